#!/usr/bin/env bash
# Installs the pinned third-party ACP agents the interop tests run, each into a prefix of
# its own under a cache directory (no global installs), and prints where each binary is.
#
#   scripts/install-agents.sh [claude|opencode|codex|gemini|acpx|sdk-examples ...]   (default: all)
#
# acpx and sdk-examples are the third-party ACP clients the interop tests drive against our own
# agents; scripts/install-clients.sh installs them (into the same cache) and is called from here.
#
# Cache: ${ACP_NOTEBOOK_AGENT_CACHE:-$HOME/.cache/acp-notebook/agents}/<name>.
# Idempotent: an agent whose prefix already holds the pinned version is skipped.
# Output: one line per agent on stdout, "<name>\t<version>\t<binary>"; progress on stderr.
set -euo pipefail

CACHE="${ACP_NOTEBOOK_AGENT_CACHE:-$HOME/.cache/acp-notebook/agents}"

# name | npm package@version | binary, relative to the prefix
AGENTS=(
  "claude|@agentclientprotocol/claude-agent-acp@0.101.0|node_modules/.bin/claude-agent-acp"
  "opencode|opencode-ai@1.18.33|node_modules/.bin/opencode"
  # codex-acp 2.x is a node adapter over `codex app-server` (from @openai/codex, a dependency);
  # it ends the app-server when its stdin closes.
  "codex|@agentclientprotocol/codex-acp@2.6.0|node_modules/.bin/codex-acp"
  "gemini|@google/gemini-cli@0.61.0|node_modules/.bin/gemini"
)

# Installed by scripts/install-clients.sh.
CLIENTS=(acpx sdk-examples)

log() { printf '%s\n' "$*" >&2; }

installed_version() {  # prefix, package name -> version installed there, or nothing
  local manifest="$1/node_modules/$2/package.json"
  [[ -f "$manifest" ]] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

install_one() {
  local name="$1" spec="$2" binary="$3"
  local package="${spec%@*}" version="${spec##*@}"
  local prefix="$CACHE/$name"
  if [[ "$(installed_version "$prefix" "$package")" == "$version" && -x "$prefix/$binary" ]]; then
    log "$name: $spec already installed in $prefix"
  else
    log "$name: installing $spec into $prefix"
    # Install next to the final place and move it in only when complete, so an
    # interrupted install is never mistaken for a finished one.
    local staging="$prefix.partial.$$"
    rm -rf "$staging"
    mkdir -p "$staging"
    local started=$SECONDS
    if ! npm install --prefix "$staging" --no-save --no-fund --no-audit \
        --no-update-notifier --loglevel=error "$spec" >&2; then
      rm -rf "$staging"
      log "$name: npm install $spec failed"
      return 1
    fi
    if [[ ! -x "$staging/$binary" ]]; then
      rm -rf "$staging"
      log "$name: $spec installed but $binary is missing (unsupported platform?)"
      return 1
    fi
    rm -rf "$prefix"
    mv "$staging" "$prefix"
    log "$name: installed in $((SECONDS - started)) s, $(du -sh "$prefix" | cut -f1)"
  fi
  printf '%s\t%s\t%s\n' "$name" "$version" "$prefix/$binary"
}

wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(claude opencode codex gemini "${CLIENTS[@]}")

mkdir -p "$CACHE"
status=0
clients=()
for want in "${wanted[@]}"; do
  found=""
  for client in "${CLIENTS[@]}"; do
    if [[ "$want" == "$client" ]]; then
      found=1
      clients+=("$want")
    fi
  done
  for entry in "${AGENTS[@]}"; do
    IFS='|' read -r name spec binary <<<"$entry"
    if [[ "$name" == "$want" ]]; then
      found=1
      install_one "$name" "$spec" "$binary" || status=1
    fi
  done
  if [[ -z "$found" ]]; then
    log "unknown agent '$want' (known: claude opencode codex gemini ${CLIENTS[*]})"
    status=2
  fi
done
if [[ ${#clients[@]} -gt 0 ]]; then
  client_status=0
  bash "$(dirname "${BASH_SOURCE[0]}")/install-clients.sh" "${clients[@]}" || client_status=$?
  [[ $client_status -eq 0 || $status -ne 0 ]] || status=$client_status
fi
exit $status

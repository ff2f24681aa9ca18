#!/usr/bin/env bash
# Installs the system packages the test suite needs beyond Python: Debian's chromium
# (driven by Playwright in tests/browser/), fonts so that screenshots are legible, and
# bubblewrap (the sweeps' and agents' sandbox="bwrap", tests/test_sandbox.py).
#
# Playwright's own browser download (`playwright install`) is deliberately not used:
# CI machines reach only the package registries, and Debian's chromium is a registry
# package. Python dependencies come from the `dev` extra in pyproject.toml.
#
# Idempotent: does nothing (not even `apt-get update`) when everything is present.
# Runs as root, or through sudo when available.
set -euo pipefail

# Debian package -> a file it installs, used to decide whether it is already present.
declare -A required_packages=(
    [chromium]=/usr/bin/chromium
    [fonts-dejavu-core]=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
    [fonts-liberation]=/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf
    [bubblewrap]=/usr/bin/bwrap
)

missing=()
for package in "${!required_packages[@]}"; do
    if [[ ! -e "${required_packages[$package]}" ]]; then
        missing+=("$package")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-test-deps: chromium, fonts and bubblewrap already present"
else
    if [[ $(id -u) -eq 0 ]]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        echo "install-test-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
    echo "install-test-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update -q
    "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Fail here, with a clear message, rather than in the middle of a browser test.
/usr/bin/chromium --version
/usr/bin/bwrap --version

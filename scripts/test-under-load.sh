#!/usr/bin/env bash
# `make test` with LOAD busy loops (default 2) running beside it, ended when it ends. A machine busier than
# CI's stretches every wait: a race that CI loses now and then is lost here much more often (see
# docs/DEVELOPING.md, "Races").
set -euo pipefail
load=${LOAD:-2}
burners=()
trap 'kill "${burners[@]}" 2>/dev/null || true' EXIT
for _ in $(seq "$load"); do
    sh -c 'while :; do :; done' &
    burners+=("$!")
done
make --no-print-directory test

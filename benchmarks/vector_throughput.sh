#!/usr/bin/env bash
# Reproduce the README throughput tables; JSON results are written next to this script.
# Extra arguments go to every run, e.g. `benchmarks/vector_throughput.sh --seconds 3`.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if command -v vecfast >/dev/null 2>&1; then
    vecfast=(vecfast)
else  # not installed: run it from the checkout
    cd "$here/.."
    vecfast=(python -m vecfast)
fi

status=0
"${vecfast[@]}" bench VizdoomBasic-v1 --num-envs 8 --rounds 3 --json "$here/vector_throughput_vizdoom_basic.json" "$@" || status=1
"${vecfast[@]}" bench CartPole-v1 --num-envs 64 --rounds 3 --json "$here/vector_throughput_cartpole.json" "$@" || status=1
exit "$status"

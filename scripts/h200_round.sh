#!/usr/bin/env bash
# One device call of a campaign round on the H200, as scripts/round_plan.json lays it out: a
# study per T regime of the `wgmma` lever over all four types (group "wgmma"), the round-1 levers'
# studies (group "levers"), adaptive_format's crossover T per dense shape (group "adaptive": a
# study per `dense_xover_<M>x<K>` suite, q4_K), each promoting only where every gate is green, then the full dense
# bench (group "bench": 4 types x 3 shapes x 8 T, the champions just promoted, both cuBLAS
# anchors, mmq_base). Optional first arguments: the groups to run (default all); anything after
# `--` is passed on to device_run.sh first (e.g. `-- tests -k wgmma -x`).
#   device command:  STEP_TIMEOUT=260 MMQ_CACHE_DIR=$PWD/.cache/runN bash scripts/h200_round.sh [GROUP ...]
#   its cubins:      python3 scripts/round_plan.py precompile /tmp/extra.json [GROUP ...] and
#                    scripts/precompile.py --extra /tmp/extra.json --only-extra --export .cache/runN
# Run 14 (H200): each wgmma study 20-40 s, the bench ~240 s for its 96 workloads.
set -uo pipefail
cd "$(dirname "$0")/.."
groups=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do groups+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
plan=$(python3 scripts/round_plan.py steps "${groups[@]}") || exit 2
mapfile -t planned <<< "$plan"
exec bash scripts/device_run.sh "$@" "${planned[@]}"

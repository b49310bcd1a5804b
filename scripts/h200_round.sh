#!/usr/bin/env bash
# One device call that closes a campaign round on the H200: the wgmma GPU tests, a study per T
# regime of the `wgmma` lever over all four types (its per-regime starting tiles enqueued, each
# promoted only if every gate is green), the fused_quant study, then the full dense bench
# (4 types x 3 shapes x 8 T) with the champions just promoted, both cuBLAS anchors and mmq_base.
#   device command:  STEP_TIMEOUT=260 MMQ_CACHE_DIR=$PWD/.cache/runN bash scripts/h200_round.sh
# Run 14 (H200): tests 16 s, each study 20-40 s, the bench ~240 s for its 96 workloads (at
# STEP_TIMEOUT=200 it stopped after 81), ~380 s in all plus the machine's start.
# (.cache/runN: scripts/precompile.py --export of the configurations below; see docs/perf-log.md)
set -uo pipefail
cd "$(dirname "$0")/.."
TYPES=q4_K,q5_K,q6_K,q8_0
study() {  # study <regime suite> <enqueued params...>: a two-candidate study of the lever `wgmma`
    local suite=$1; shift
    local args=(study wgmma --study "wgmma-$suite" --suite "$suite" --types $TYPES --trials $# --promote)
    for p in "$@"; do args+=(--enqueue "$p"); done
    printf '%s\n' "${args[@]}"
}
mapfile -t small < <(study dense_small '{"BM":128,"BN":16,"STAGES":4,"RAW":4,"XLOAD":2}' '{"BM":128,"BN":64,"STAGES":4,"RAW":3,"XLOAD":2}')
mapfile -t medium < <(study dense_medium '{"BM":128,"BN":128,"STAGES":4,"RAW":3,"XLOAD":2}' '{"BM":128,"BN":256,"STAGES":4,"RAW":2,"XLOAD":2}')
mapfile -t large < <(study dense_large '{"BM":128,"BN":256,"STAGES":4,"RAW":2,"XLOAD":1}' '{"BM":128,"BN":256,"STAGES":4,"RAW":2,"XLOAD":2}')
exec bash scripts/device_run.sh tests -k wgmma -x \
    "${small[@]}" "${medium[@]}" "${large[@]}" \
    bench --types $TYPES --shapes 4096x14336,4096x4096,14336x4096 \
          --lines dequant_cublas,bf16_cublas,mmq_base,mmq_wgmma,mmq_wgmma_x16 --reps 20 \
    study fused_quant --suite dense_small --types q4_K --trials 3 --promote \
          --enqueue '{"BM":64,"BN":16,"WARPS_M":4,"WARPS_N":1,"STAGES":1,"CVT":1,"MIN_BLOCKS":2}' \
          --enqueue '{"BM":128,"BN":16,"WARPS_M":8,"WARPS_N":1,"STAGES":2,"CVT":1,"MIN_BLOCKS":1}' \
          --enqueue '{"BM":64,"BN":16,"WARPS_M":4,"WARPS_N":1,"STAGES":2,"CVT":1,"MIN_BLOCKS":1}'

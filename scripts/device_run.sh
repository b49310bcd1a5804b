#!/usr/bin/env bash
# Everything one GPU-machine call needs: install the carried wheels, run the GPU tests,
# then the benchmark/campaign steps named in $@ (default: the dense bench). Results, logs and
# a tarball of the MLflow store land in $OUT (what the device tool brings back).
#   device command:  bash scripts/device_run.sh [tests] [bench ARGS...] [study ARGS...]
#   profile ARGS...: Nsight Compute sections of one launch of scripts/profile_kernel.py ARGS
#                    (ncu --clock-control none: the card's clocks are left as they are), and its
#                    dram__bytes_read.sum (NCU_METRICS: another comma-separated list); NCU_KERNEL picks the
#                    kernel (default regex:_gemm$; mmq_moe_grouped for the MoE GEMM)
#   trace ARGS...:   scripts/call_trace.py (a direct_q8 call's CTAs timed by %globaltimer: where its time goes)
#   clusters:        scripts/cluster_occupancy.py (how many thread-block clusters fit at once)
#   floor ARGS...:   scripts/launch_floor.py (the least a call costs, per call back to back as the bench times it and
#                    alone: an empty launch, a wave, one DRAM round trip, a pure read of the weights by loads and by
#                    the copy engine)
# Each step runs under `timeout $STEP_TIMEOUT` (default 560 s: a hung kernel ends its step, not the
# call); a failing `tests` step ends the call, so no step times a kernel that is not parity-clean.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || { echo "wheel install failed"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export MMQ_CACHE_DIR=${MMQ_CACHE_DIR:-$PWD/.cache/cubin}   # cubins precompiled off-GPU travel along
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv | tee "$OUT/nvidia-smi.txt"

STEP_TIMEOUT=${STEP_TIMEOUT:-560}
run() { timeout --signal=KILL "$STEP_TIMEOUT" "$@"; }
status=0
while [ $# -gt 0 ]; do
    step=$1; shift
    args=()
    while [ $# -gt 0 ] && [ "$1" != "tests" ] && [ "$1" != "bench" ] && [ "$1" != "study" ] && [ "$1" != "sweep" ] && [ "$1" != "moebench" ] && [ "$1" != "profile" ] && [ "$1" != "clusters" ] && [ "$1" != "floor" ] && [ "$1" != "trace" ]; do
        args+=("$1"); shift
    done
    case $step in
        tests) run python3 -m pytest -m gpu -q -p no:cacheprovider tests "${args[@]}" 2>&1 | tee -a "$OUT/pytest-gpu.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; echo "GPU tests failed: the remaining steps are skipped"; break; } ;;
        bench) run python3 -m campaign.bench --out "$OUT" "${args[@]}" 2>&1 | tee -a "$OUT/bench.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
        sweep) run python3 scripts/sweep_mmq.py --out "$OUT" "${args[@]}" 2>&1 | tee -a "$OUT/sweep.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
        moebench) run python3 scripts/moe_baseline_bench.py --out "$OUT" "${args[@]}" 2>&1 | tee -a "$OUT/moebench.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
        profile) n=$(ls "$OUT"/ncu-*.txt 2>/dev/null | wc -l)
               run ncu --clock-control none -k "${NCU_KERNEL:-regex:_gemm$}" -s 2 -c 1 --metrics "${NCU_METRICS:-dram__bytes_read.sum}" \
                   --section SpeedOfLight \
                   --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
                   --section WarpStateStats --section InstructionStats --section Occupancy --section SourceCounters \
                   -o "$OUT/ncu-$n" python3 scripts/profile_kernel.py "${args[@]}" > "$OUT/ncu-$n.txt" 2>&1 || status=1
               # the report's details and its per-SASS-instruction stall samples, as text
               ncu -i "$OUT/ncu-$n.ncu-rep" --page details --print-details all >> "$OUT/ncu-$n.txt" 2>&1
               ncu -i "$OUT/ncu-$n.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu-$n-sass.csv" 2>&1
               grep -A12 "Warp State Statistics" "$OUT/ncu-$n.txt" | head -40 ;;
        trace) run python3 scripts/call_trace.py --out "$OUT/trace" "${args[@]}" 2>&1 | tee -a "$OUT/trace.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
               tar -czf "$OUT/trace.tar.gz" -C "$OUT" trace && rm -rf "$OUT/trace" ;;
        clusters) run python3 scripts/cluster_occupancy.py "${args[@]}" 2>&1 | tee -a "$OUT/clusters.log" ;;
        floor) run python3 scripts/launch_floor.py "${args[@]}" 2>&1 | tee -a "$OUT/floor.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
        study) run python3 -m campaign.cli run "${args[@]}" 2>&1 | tee -a "$OUT/study.log"
               [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
        *) echo "unknown step $step"; status=2 ;;
    esac
done
# the stores (MLflow sqlite + artifacts, Optuna db) and champions come back as one tarball, the
# logs, sweep tables and profiles as another (the device tool returns at most 8 files)
tar -czf "$OUT/stores.tar.gz" mlruns $(ls champions.json 2>/dev/null) 2>/dev/null
# (ls exits non-zero when one of its patterns matches nothing: the list is what counts)
(cd "$OUT" && logs=$(ls *.log sweep_*.csv ncu-* 2>/dev/null || true) && [ -n "$logs" ] && tar -czf logs.tar.gz $logs && rm -f $logs)
exit $status

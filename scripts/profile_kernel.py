"""Launch one configuration of a kernel family a few times on fresh random inputs, for a
profiler to attach to (the `profile` step of scripts/device_run.sh runs it under Nsight Compute):

    ncu --clock-control none -k mmq_wgmma_gemm -s 2 -c 1 --section WarpStateStats \
        python3 scripts/profile_kernel.py --family mmq_wgmma --params '{"AREG": 1}' --type q4_K --T 4096

An MoE family (--experts N --top-k k [--routing zipf]) prints the expert-weight bytes
kernels.moe_traffic counts for its launch (unique, global loads, DRAM by the L2 model) and the
gathered activation bytes, to set beside Nsight Compute's dram__bytes_read.sum of the grouped
GEMM (the weights' DRAM reads are that minus at most the activation bytes):

    NCU_KERNEL=mmq_moe_grouped bash scripts/device_run.sh profile --family moe_fused \
        --type q4_K --shape 768x2048 --T 2048 --experts 128 --top-k 8 --routing zipf
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="mmq_wgmma")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--type", default="q4_K")
    ap.add_argument("--shape", default="4096x14336", help="MxK")
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--experts", type=int, default=0, help="> 0: an MoE workload of this many experts")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--routing", default="uniform")
    args = ap.parse_args()

    import numpy as np

    from kernels import families, quant
    from kernels.device import open_device
    from kernels.family import Problem, Workload

    device = open_device("cuda")
    M, K = map(int, args.shape.split("x"))
    rng = np.random.default_rng(0)
    qt = quant.get(args.type)
    x = rng.standard_normal((args.T, K), dtype=np.float32)
    if args.experts:
        from kernels.moe_routing import make_routing

        wl = Workload(args.type, M, K, args.T, args.experts, args.top_k, args.routing)
        w = np.stack([qt.random_packed(M, K, rng) for _ in range(args.experts)])
        problem = Problem(wl, w, x, make_routing(args.T, args.experts, args.top_k, args.routing, rng))
    else:
        problem = Problem(Workload(args.type, M, K, args.T), qt.random_packed(M, K, rng), x)
    variant = families.get(args.family).build(json.loads(args.params), args.type, device)
    print(json.dumps({"params": variant.params, "resources": {k: variant.resources.get(k) for k in
                                                               ("registers", "spill_store_bytes", "threads")}}))
    bound = variant.prepare(problem)
    metrics = getattr(bound, "metrics", None)
    if metrics:  # every launch of the profiled runs sees the same routing: one count serves them all
        gathered = args.T * args.top_k * (K + K // 32 * 8)  # Q8_1 rows the grouped GEMM reads (q, d, s)
        print(json.dumps({**metrics, "gathered_activation_bytes": gathered,
                          "compare": "ncu dram__bytes_read.sum of the GEMM launch <= fused_dram_bytes + "
                                     "gathered_activation_bytes when the L2 model holds"}))
    for _ in range(args.runs):
        bound.run()
    device.synchronize()
    bound.release()
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

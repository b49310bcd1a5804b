"""Launch one configuration of a kernel family a few times on fresh random inputs, for a
profiler to attach to (the `profile` step of scripts/device_run.sh runs it under Nsight Compute):

    ncu --clock-control none -k mmq_wgmma_gemm -s 2 -c 1 --section WarpStateStats \
        python3 scripts/profile_kernel.py --family mmq_wgmma --params '{"AREG": 1}' --type q4_K --T 4096
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
    args = ap.parse_args()

    import numpy as np

    from kernels import families, quant
    from kernels.device import open_device
    from kernels.family import Problem, Workload

    device = open_device("cuda")
    M, K = map(int, args.shape.split("x"))
    rng = np.random.default_rng(0)
    problem = Problem(Workload(args.type, M, K, args.T), quant.get(args.type).random_packed(M, K, rng),
                      rng.standard_normal((args.T, K), dtype=np.float32))
    variant = families.get(args.family).build(json.loads(args.params), args.type, device)
    print(json.dumps({"params": variant.params, "resources": {k: variant.resources.get(k) for k in
                                                               ("registers", "spill_store_bytes", "threads")}}))
    bound = variant.prepare(problem)
    for _ in range(args.runs):
        bound.run()
    device.synchronize()
    bound.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

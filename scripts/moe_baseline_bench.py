"""Time the MoE baselines (moe_matvec, moe_dequant_cublas), the fused grouped MMQ (moe_fused, at
the moe_fusion lever's defaults and at BN=128) and the GPU routing on the real MoE suites, with each approach's expert-weight traffic, on the GPU at hand. Random valid weight
blocks (QType.random_packed: quantizing 128 experts with the numpy search would take minutes).

    python3 scripts/moe_baseline_bench.py [--suite moe_qwen3] [--types q4_K ...] [--tokens 128 2048] [--out DIR]

Prints one line per (workload, approach) and writes moe_baseline_bench.json to --out.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import quant  # noqa: E402
from kernels.family import Problem  # noqa: E402
from kernels.moe_routing import bucket, routing_for  # noqa: E402
from kernels.moe_traffic import weight_traffic  # noqa: E402
from kernels.moe_workloads import moe_workloads  # noqa: E402

TOKEN_TILES = (64, 128, 256)  # token tiles a grouped GEMM might use: the traffic it would read


def median_seconds(device, fn, reps: int, inner: int) -> float:
    fn()
    device.synchronize()
    return float(np.median([device.time_once(fn, inner) for _ in range(reps)]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="moe_qwen3")
    ap.add_argument("--types", nargs="*", default=[], help="default: the suite's own types, else all four")
    ap.add_argument("--tokens", nargs="*", type=int, default=[])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="out")
    args = ap.parse_args()

    from experiments.moe_fusion import LEVER as MOE_FUSION
    from kernels import cuda_runtime, moe_fused
    from kernels.moe_baselines import FAMILIES

    fused_defaults = {**MOE_FUSION.fixed, **MOE_FUSION.defaults}
    runs = [(name, family, {}) for name, family in FAMILIES.items()]
    runs += [("moe_fused", moe_fused.FAMILY, fused_defaults),
             ("moe_fused_bn128", moe_fused.FAMILY, {**fused_defaults, "BN": 128, "WARPS_M": 2, "WARPS_N": 4})]
    from kernels.moe_route_gpu import GpuRouter

    device = cuda_runtime.open_cuda_device()
    rows = []
    variants = {}
    for wl in moe_workloads(args.suite, args.types):
        if args.tokens and wl.T not in args.tokens:
            continue
        rng = np.random.default_rng(0)
        qt = quant.get(wl.qtype)
        w = np.stack([qt.random_packed(wl.M, wl.K, rng) for _ in range(wl.n_experts)])
        x = rng.standard_normal((wl.T, wl.K)).astype(np.float32)
        problem = Problem(wl, w, x, routing_for(wl, rng))
        counts = bucket(problem.ids, wl.n_experts)[0]
        traffic = {tile: weight_traffic(counts, wl.qtype, wl.M, wl.K, tile) for tile in TOKEN_TILES}
        base = {"workload": wl.label(), "max_tokens_per_expert": int(counts.max()),
                "active_experts": traffic[64].active_experts, "unique_weight_bytes": traffic[64].unique_bytes,
                **{f"fused_ratio_tile{t}": tr.ratio("fused") for t, tr in traffic.items()}}
        for name, family, params in runs:
            key = (name, wl.qtype)
            if key not in variants:
                variants[key] = family.build(params, wl.qtype, device)
            bound = variants[key].prepare(problem)
            try:
                inner = 1 if name == "moe_dequant_cublas" else 5  # the loop syncs on the counts each run
                sec = median_seconds(device, bound.run, args.reps, inner)
            finally:
                bound.release()
            if name.startswith("moe_fused"):
                read = weight_traffic(counts, wl.qtype, wl.M, wl.K, variants[key].params["BN"]).fused_bytes
            else:
                approach = "matvec" if name == "moe_matvec" else "dequant_cublas"
                read = getattr(traffic[64], f"{approach}_bytes")
            rows.append({**base, "family": name, "ms": sec * 1e3, "tflops": wl.flops / sec / 1e12,
                         "weight_bytes_read": read, "weight_ratio": read / traffic[64].unique_bytes,
                         "unique_weight_tb_s": traffic[64].unique_bytes / sec / 1e12})
            r = rows[-1]
            print(f"{r['workload']:48s} {name:19s} {r['ms']:8.3f} ms {r['tflops']:7.2f} TFLOP/s  "
                  f"weights read {r['weight_ratio']:6.1f}x unique  (fused tile 64/128/256: "
                  f"{base['fused_ratio_tile64']:.2f}/{base['fused_ratio_tile128']:.2f}/{base['fused_ratio_tile256']:.2f}x)",
                  flush=True)
        router = GpuRouter(device, wl.T, wl.top_k, wl.n_experts, token_tile=64, K=wl.K)
        ids = device.to_device(problem.ids)
        xq, xd, xs = (device.empty(s, d) for s, d in (((wl.T, wl.K), np.int8), ((wl.T, wl.K // 32), np.float32),
                                                      ((wl.T, wl.K // 32), np.int32)))
        sec = median_seconds(device, lambda: (router.route(ids), router.gather(xq, xd, xs)), args.reps, 10)
        rows.append({**base, "family": "gpu_route+gather", "ms": sec * 1e3})
        print(f"{wl.label():48s} {'gpu_route+gather':19s} {sec * 1e3:8.3f} ms", flush=True)
        for b in (ids, xq, xd, xs):
            b.release()
        router.release()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "moe_baseline_bench.json").write_text(json.dumps({"device": device.info["name"], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

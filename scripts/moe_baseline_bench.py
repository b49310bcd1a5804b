"""Time the MoE approaches on the real MoE suites, on the GPU at hand: the baselines (moe_matvec,
moe_dequant_cublas), the fused grouped MMQ (moe_fused at the moe_fusion lever's defaults and at
the 256-token tile, or the --fused configurations), the GPU routing alone, and the dense mmq_base
at the same total FLOPs (M x K weights, T * top_k tokens). Random valid weight blocks
(QType.random_packed: quantizing 128 experts with the numpy search would take minutes).

    python3 scripts/moe_baseline_bench.py [--suite moe_qwen3] [--types q4_K ...] [--tokens 128 2048]
        [--fused '{"BN": 128, "WARPS_M": 2, "WARPS_N": 4}' ...] [--reps 10] [--out DIR]

Prints one line per (workload, approach), then a summary line per workload: each fused
configuration's time against both baselines, its weight reads over the unique expert bytes
(global loads, and DRAM reads of kernels.moe_traffic's L2 model) and its TFLOP/s over the
dense mmq_base's at equal FLOPs. Writes moe_baseline_bench.json to --out. A (type, shape) a type
cannot hold (a K-quant at K=1408) is skipped with the reason printed.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import quant  # noqa: E402
from kernels.family import Problem, Workload  # noqa: E402
from kernels.moe_routing import bucket, routing_for  # noqa: E402
from kernels.moe_traffic import weight_traffic  # noqa: E402
from kernels.moe_workloads import moe_suite  # noqa: E402

BN256 = {"BM": 64, "BN": 256, "WARPS_M": 1, "WARPS_N": 8, "STAGES": 1}  # no spills for any type (sm_90)


def median_seconds(device, fn, reps: int, inner: int) -> float:
    fn()
    device.synchronize()
    return float(np.median([device.time_once(fn, inner) for _ in range(reps)]))


def time_bound(device, variant, problem: Problem, reps: int, inner: int) -> float:
    bound = variant.prepare(problem)
    try:
        return median_seconds(device, bound.run, reps, inner)
    finally:
        bound.release()


def dense_twin(wl: Workload, rng) -> tuple[Problem | None, str]:
    """The dense mmq_base problem of wl's FLOPs: [M, K] weights x T * top_k tokens (or why none)."""
    if wl.K % 256:
        return None, f"dense mmq_base needs K % 256 == 0 (K={wl.K})"
    T = wl.T * wl.top_k
    w = quant.get(wl.qtype).random_packed(wl.M, wl.K, rng)
    return Problem(Workload(wl.qtype, wl.M, wl.K, T), w, rng.standard_normal((T, wl.K)).astype(np.float32)), ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="moe_qwen3")
    ap.add_argument("--types", nargs="*", default=[], help="default: the suite's own types, else all four")
    ap.add_argument("--tokens", nargs="*", type=int, default=[])
    ap.add_argument("--fused", action="append", type=json.loads, default=None,
                    help="a moe_fused configuration (JSON, repeatable; default: the lever's defaults and BN=256)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="out")
    args = ap.parse_args()

    from experiments.moe_fusion import LEVER as MOE_FUSION
    from kernels import cuda_runtime, mmq_base, moe_fused
    from kernels.moe_baselines import FAMILIES
    from kernels.moe_route_gpu import GpuRouter

    defaults = {**MOE_FUSION.fixed, **MOE_FUSION.defaults}
    fused_cfgs = [{**defaults, **c} for c in (args.fused or [{}, BN256])]
    runs = [(name, family, {}) for name, family in FAMILIES.items()]
    runs += [(f"moe_fused#{i}", moe_fused.FAMILY, c) for i, c in enumerate(fused_cfgs)]
    for i, c in enumerate(fused_cfgs):
        print(f"moe_fused#{i}: {json.dumps(moe_fused.FAMILY.complete(c), sort_keys=True)}")

    suite = moe_suite(args.suite)
    types = args.types or suite.types or MOE_FUSION.types
    wls, skipped = suite.expand(types)
    for reason in skipped:
        print(f"skipped: {reason}")
    device = cuda_runtime.open_cuda_device()
    l2 = device.info.get("l2_bytes", 0)
    rows, variants = [], {}

    def variant(name, family, params, qtype):
        if (name, qtype) not in variants:
            variants[name, qtype] = family.build(params, qtype, device)
        return variants[name, qtype]

    for wl in wls:
        if args.tokens and wl.T not in args.tokens:
            continue
        rng = np.random.default_rng(0)
        qt = quant.get(wl.qtype)
        w = np.stack([qt.random_packed(wl.M, wl.K, rng) for _ in range(wl.n_experts)])
        x = rng.standard_normal((wl.T, wl.K)).astype(np.float32)
        problem = Problem(wl, w, x, routing_for(wl, rng))
        counts = bucket(problem.ids, wl.n_experts)[0]
        base = {"workload": wl.label(), "max_tokens_per_expert": int(counts.max()),
                "active_experts": int(np.count_nonzero(counts))}
        ms = {}
        for name, family, params in runs:
            v = variant(name, family, params, wl.qtype)
            inner = 1 if name == "moe_dequant_cublas" else 5  # the loop syncs on the counts each run
            sec = time_bound(device, v, problem, args.reps, inner)
            p = v.params
            tr = weight_traffic(counts, wl.qtype, wl.M, wl.K, p.get("BN", 64), BM=p.get("BM", 128),
                                order=p.get("ORDER", 1), l2_bytes=l2)
            approach = {"moe_matvec": "matvec", "moe_dequant_cublas": "dequant_cublas"}.get(name, "fused")
            rows.append({**base, "family": name, "params": p, "ms": sec * 1e3, "tflops": wl.flops / sec / 1e12,
                         "unique_weight_bytes": tr.unique_bytes, "weight_loads_ratio": tr.ratio(approach),
                         "weight_dram_model_ratio": tr.ratio("fused_dram") if approach == "fused" else None})
            ms[name] = rows[-1]
            print(f"{wl.label():48s} {name:19s} {sec * 1e3:8.3f} ms {rows[-1]['tflops']:7.2f} TFLOP/s  "
                  f"weight loads {tr.ratio(approach):6.2f}x unique", flush=True)
        dense, why = dense_twin(wl, rng)
        if dense is not None:
            dparams = mmq_base.heuristic_params(dense.workload.T)
            sec = time_bound(device, variant(f"mmq_base T{dense.workload.T}", mmq_base.FAMILY, dparams, wl.qtype),
                             dense, args.reps, 5)
            rows.append({**base, "family": "mmq_base_dense_equal_flops", "params": dparams, "ms": sec * 1e3,
                         "tflops": dense.workload.flops / sec / 1e12})
            ms["dense"] = rows[-1]
            print(f"{wl.label():48s} {'mmq_base dense':19s} {sec * 1e3:8.3f} ms {rows[-1]['tflops']:7.2f} TFLOP/s  "
                  f"(M{wl.M} K{wl.K} T{dense.workload.T}: the same FLOPs)", flush=True)
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
        for i in range(len(fused_cfgs)):
            f = ms[f"moe_fused#{i}"]
            vs_dense = (f"{f['tflops'] / ms['dense']['tflops']:.2f}x dense mmq_base's TFLOP/s" if "dense" in ms
                        else why)
            print(f"summary {wl.label()} fused#{i}: {f['ms']:.3f} ms | vs matvec {ms['moe_matvec']['ms'] / f['ms']:.1f}x"
                  f" | vs dequant_cublas {ms['moe_dequant_cublas']['ms'] / f['ms']:.1f}x | weights read "
                  f"{f['weight_loads_ratio']:.2f}x unique (global loads), {f['weight_dram_model_ratio']:.2f}x "
                  f"(DRAM, L2 model) | {vs_dense}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "moe_baseline_bench.json").write_text(json.dumps({"device": device.info["name"], "skipped": skipped,
                                                             "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    sys.exit(run_main(main))

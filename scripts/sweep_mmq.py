"""Exploratory grid over mmq_base configurations on the GPU (not a study: no gates, no
promotion) to see where the time goes: the quantize pass alone, then each configuration
and split-K at each T. Output: one CSV + a printed table, best first per T.

    python3 scripts/sweep_mmq.py --out $OUT [--types q4_K] [--Ts 16,64,...] [--list]
    --list prints the compile-time configurations (to precompile them off the GPU).
A grid is grid(T) or grid(T, qtype) (a grid whose options matter for one type only).
"""
import argparse
import inspect
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import mmq_base, mmq_f16, mmq_wgmma, mmq_wgmma_i8  # noqa: E402


def grid_f16(T: int) -> list[dict]:
    shapes = [(128, 128, 2, 4), (128, 128, 4, 4), (64, 128, 2, 4), (128, 64, 4, 2), (64, 64, 2, 2)]
    out = []
    for (bm, bn, wm, wn), st in itertools.product(shapes, (1, 2, 3)):
        p = {"BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "STAGES": st}
        if mmq_f16.invalid_reason(p, "q8_0", {}) is None:
            out.append(p)
    return out


def grid_wgmma(T: int) -> list[dict]:
    if T <= 16:
        tiles, splits = [(64, 8), (64, 16), (128, 8), (128, 16)], (0, 4, 8)
    elif T <= 64:
        tiles, splits = [(64, 32), (64, 64), (128, 32), (128, 64)], (0, 2, 4)
    elif T <= 256:
        tiles, splits = [(64, 128), (128, 64), (128, 128), (128, 256)], (0, 2)
    else:
        tiles, splits = [(128, 128), (128, 192), (128, 256), (64, 256)], (0,)
    out = []
    for (bm, bn), st, deq, sk in itertools.product(tiles, (3, 4), (0, 1), splits):
        p = {"BM": bm, "BN": bn, "STAGES": st, "DEQ": deq, "SPLITK": sk}
        if mmq_wgmma.invalid_reason(p, "q8_0", {}) is None:
            out.append(p)
    if T > 256:  # two CTAs per SM: one CTA's barriers and dequant hide behind the other's wgmmas
        for bn in (128, 192):
            p = {"BM": 64, "BN": bn, "STAGES": 3, "DEQ": 1, "MIN_BLOCKS": 2, "SPLITK": 0}
            if 2 * (mmq_wgmma.smem_bytes(p, "q6_K") + 1024) <= 228 * 1024:
                out.append(p)
    return out


def grid_wgmma_ws(T: int) -> list[dict]:
    """Warp-specialized wgmma (WS=1): tiles x activation ring depth x dequantized chunks."""
    if T <= 16:
        tiles, splits, deqs = [(64, 8), (64, 16), (128, 16)], (0, 4, 8), (1,)
    elif T <= 64:
        tiles, splits, deqs = [(64, 64), (128, 32), (128, 64)], (0, 2), (1,)
    elif T <= 256:
        tiles, splits, deqs = [(64, 128), (128, 128), (128, 256)], (0, 2), (1,)
    else:
        tiles, splits, deqs = [(128, 128), (128, 192), (128, 256)], (0,), (0, 1)
    out = []
    for (bm, bn), st, abuf, deq, sk in itertools.product(tiles, (3, 4), (2, 3), deqs, splits):
        p = {"WS": 1, "BM": bm, "BN": bn, "STAGES": st, "ABUF": abuf, "DEQ": deq, "SPLITK": sk}
        if mmq_wgmma.invalid_reason(p, "q4_K", {}) is None:
            out.append(p)
    if T > 256:  # two CTAs per SM of one consumer warpgroup each
        out.append({"WS": 1, "BM": 64, "BN": 128, "STAGES": 3, "ABUF": 2, "DEQ": 1, "MIN_BLOCKS": 2, "SPLITK": 0})
    return [*out, {"WS": 0, "BM": 128, "BN": 256, "STAGES": 3, "DEQ": 1}]  # the WS=0 large-T tile, for reference


def grid_wgmma_rs(T: int) -> list[dict]:
    """wgmma with A dequantized into registers (AREG=1): tiles x activation ring x raw slots x
    how activations arrive (XLOAD: 1 bulk copy of pass-tiled chunks, 2 TMA on f16 rows, 3 f32
    converted in the kernel; 0, cp.async rows, lost to all three in run 12)."""
    if T <= 16:
        tiles, raws, loads = [(64, 16), (128, 16)], (4, 6), (1, 2, 3)
    elif T <= 64:
        tiles, raws, loads = [(64, 64), (128, 64), (128, 32)], (3,), (1, 2, 3)
    elif T <= 256:
        tiles, raws, loads = [(128, 128), (128, 256)], (2, 3), (1, 2)
    else:
        tiles, raws, loads = [(128, 256), (128, 192)], (2, 3), (1, 2)
    out = []
    for (bm, bn), raw, xl in itertools.product(tiles, raws, loads):
        p = {"AREG": 1, "BM": bm, "BN": bn, "STAGES": 4, "RAW": raw, "SPLITK": 0, "XLOAD": xl}
        if mmq_wgmma.invalid_reason(p, "q4_K", {}) is None:  # a type it does not fit is an error row
            out.append(p)
    return out


def grid_wgmma_i8(T: int) -> list[dict]:
    """The int8 wgmma kernel (mmq_wgmma_i8.cu): tiles (BN <= 128: registers) x raw slots x token
    parts per block (NSPLIT 2: half the s32 registers, twice the wgmma groups)."""
    if T <= 16:
        tiles, raws = [(64, 16), (128, 16)], (4, 6)
    elif T <= 64:
        tiles, raws = [(64, 64), (128, 64), (128, 32)], (3, 4)
    else:
        tiles, raws = [(128, 128), (128, 64), (64, 128)], (2, 3)
    out = []
    for (bm, bn), raw, ns, st in itertools.product(tiles, raws, (1, 2), (3, 4)):
        p = {"BM": bm, "BN": bn, "STAGES": st, "RAW": raw, "NSPLIT": ns, "SPLITK": 0}
        if all(mmq_wgmma_i8.invalid_reason(p, q, {}) is None for q in ("q8_0", "q6_K")):
            out.append(p)
    return out


def grid(T: int) -> list[dict]:
    """Candidate configurations for a token count (valid ones only)."""
    out = []
    if T <= 32:
        shapes = [(64, 16, 4, 1), (128, 16, 8, 1), (128, 32, 8, 1), (64, 32, 4, 1)]
        stages, splits = (2, 3, 4), (1, 2, 4, 8)
    elif T <= 256:
        shapes = [(64, 64, 4, 2), (128, 64, 4, 2), (128, 64, 8, 1), (64, 32, 4, 1), (128, 128, 2, 4), (64, 128, 2, 4)]
        stages, splits = (2, 3), (1, 2, 4)
    else:
        shapes = [(128, 128, 2, 4), (128, 128, 4, 4), (128, 64, 4, 2), (64, 128, 2, 4)]
        stages, splits = (1, 2), (1,)
    for (bm, bn, wm, wn), st, sk, mb in itertools.product(shapes, stages, splits, (1, 2)):
        p = {"BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "STAGES": st, "SPLITK": sk, "MIN_BLOCKS": mb}
        two_fit = 2 * (mmq_base.smem_bytes(p, "q4_K") + 1024) <= 228 * 1024 and mmq_base.threads(p) <= 512
        if mmq_base.invalid_reason(p, "q8_0", {}) is None and (mb == 1 or two_fit):
            out.append(p)
    return out


# mmq_base's large-T tiles (docs/sweeps/2026-12-02-run4-best.json, heuristic_params): 16 warps of
# 32x32 at one CTA per SM (the heuristic, with and without cp.async staging), and two CTAs per SM of
# 8 warps (32x32 warp tiles; and run 4's q4_K best, 64x32 warp tiles, which spill 160+ bytes at 128 registers).
RESCALE_TILES = [
    {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2, "MIN_BLOCKS": 1},
    {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 1, "MIN_BLOCKS": 1},
    {"BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 1, "MIN_BLOCKS": 2},
    {"BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "MIN_BLOCKS": 2},
]


def grid_rescale(T: int, qtype: str) -> list[dict]:
    """Old against new inner-loop options on the large-T tiles, one row each: RESCALE 0/1 (every
    type), and for q6_K also Q6SUB 0/1 (its unpack; the others compile the same code either way)."""
    subs = (0, 1) if qtype == "q6_K" else (0,)
    return [{**tile, "RESCALE": r, "Q6SUB": q, "SPLITK": 1}
            for tile, r, q in itertools.product(RESCALE_TILES, (0, 1), subs)]


GRIDS = {"mmq_base": (mmq_base.FAMILY, grid), "mmq_base_rescale": (mmq_base.FAMILY, grid_rescale), "mmq_f16": (mmq_f16.FAMILY, grid_f16),
         "mmq_wgmma": (mmq_wgmma.FAMILY, grid_wgmma), "mmq_wgmma_ws": (mmq_wgmma.FAMILY, grid_wgmma_ws),
         "mmq_wgmma_rs": (mmq_wgmma.FAMILY, grid_wgmma_rs), "mmq_wgmma_i8": (mmq_wgmma_i8.FAMILY, grid_wgmma_i8)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out/sweep")
    ap.add_argument("--types", default="q4_K")
    ap.add_argument("--shape", default="4096x14336")
    ap.add_argument("--Ts", default="16,64,128,256,1024,4096")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--family", default="mmq_base", choices=list(GRIDS))
    args = ap.parse_args()
    Ts = [int(t) for t in args.Ts.split(",")]
    family, grid_fn = GRIDS[args.family]
    typed = "qtype" in inspect.signature(grid_fn).parameters

    def configs(T: int, qtype: str) -> list[dict]:
        return grid_fn(T, qtype) if typed else grid_fn(T)

    if args.list:  # {family: [params]}: the --extra file of scripts/precompile.py
        seen = {json.dumps({k: v for k, v in p.items() if k != "SPLITK"}, sort_keys=True)
                for T in Ts for qtype in args.types.split(",") for p in configs(T, qtype)}
        print(json.dumps({family.name: [json.loads(s) for s in sorted(seen)]}))
        return 0

    import numpy as np
    import pandas as pd

    from gates import perf
    from kernels import q8_1_gpu, quant
    from kernels.device import open_device
    from kernels.family import Problem, Workload

    device = open_device("cuda")
    M, K = map(int, args.shape.split("x"))
    rng = np.random.default_rng(0)
    rows = []
    for qtype in args.types.split(","):
        w = quant.get(qtype).random_packed(M, K, rng)
        for T in Ts:
            x = rng.standard_normal((T, K), dtype=np.float32)
            prob = Problem(Workload(qtype, M, K, T), w, x)
            xb = device.to_device(x)
            q, d, s = (device.empty((T, K), np.int8), device.empty((T, K // 32), np.float32),
                       device.empty((T, K // 32), np.int32))

            class QuantOnly:  # the quantize pass alone
                def run(self):
                    q8_1_gpu.quantize_into(device, xb, q, d, s, T, K)

            tq = perf.time_variant(device, QuantOnly(), reps=args.reps)
            rows.append(dict(type=qtype, T=T, config="q8_1 quantize pass", us=tq.median * 1e6, tflops=0.0))
            for b in (xb, q, d, s):
                b.release()
            for p in configs(T, qtype):
                try:
                    variant = family.build(p, qtype, device)
                except Exception as exc:  # a configuration that cannot launch is a row, not a crash
                    rows.append(dict(type=qtype, T=T, config=json.dumps(p), us=float("nan"), tflops=0.0,
                                     error=str(exc).splitlines()[0]))
                    continue
                bound = variant.prepare(prob)
                t = perf.time_variant(device, bound, reps=args.reps)
                rows.append(dict(type=qtype, T=T, config=json.dumps(p), us=t.median * 1e6,
                                 tflops=prob.workload.flops / t.median / 1e12, splitk=bound.splitk,
                                 regs=variant.resources.get("registers"),
                                 spill=variant.resources.get("spill_store_bytes", 0)
                                 + variant.resources.get("spill_load_bytes", 0)))
                bound.release()
            best = max((r for r in rows if r["T"] == T and r["type"] == qtype), key=lambda r: r["tflops"])
            print(f"{qtype} T={T}: quant {tq.median * 1e6:.1f} us; best {best['tflops']:.1f} TFLOP/s {best['config']}",
                  flush=True)
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / f"sweep_{args.family}.csv", index=False)  # the grid's name: ws and non-ws apart
    # best configuration per (type, T), merged into best.json for `campaign.bench --tuned`
    best_path = out / "best.json"
    best = json.loads(best_path.read_text()) if best_path.exists() else {}
    # grids of one family (mmq_wgmma, mmq_wgmma_ws, mmq_wgmma_rs) compete: keep the faster per (type, T)
    rates = best.setdefault("tflops", {})
    for (qtype, T), part in df[df.tflops > 0].groupby(["type", "T"]):
        top = part.sort_values("tflops", ascending=False).iloc[0]
        seen = rates.setdefault(family.name, {}).setdefault(qtype, {})
        if float(top["tflops"]) > seen.get(str(T), 0.0):
            seen[str(T)] = round(float(top["tflops"]), 2)
            best.setdefault(family.name, {}).setdefault(qtype, {})[str(T)] = json.loads(top["config"])
    best_path.write_text(json.dumps(best, indent=1))
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_colwidth", 120):
        print(df.sort_values(["type", "T", "tflops"], ascending=[True, True, False])
              .groupby(["type", "T"]).head(4).to_string(index=False))
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

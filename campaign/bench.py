"""`campaign bench`: a benchmark sweep declared as data (shapes x T x types x lines), turned
into one table (pandas), plots (matplotlib) and an MLflow run, with the device's own ceilings
measured in the same process. The shape of Triton's `perf_report`: axes and lines are data.

Timed per point: what a prefill pays for the op (each family's run() includes its activation
quantization or weight dequantization), CUDA events, warm-up, median and p90 of many reps,
inputs rotated past L2. A rep is as many calls back to back as fill 1 ms (gates.perf), so a row is
the time per call in a stream of calls, as llama.cpp's test-backend-ops times its figures; one call
alone between events also pays the events' and the launch's latency (scripts/launch_floor.py
times both). Weights are random valid blocks (random quants, finite f16 scales):
timing does not depend on the values, and parity is gated separately on quantized weights.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from campaign import anchors
from campaign.errors import CampaignError, UnknownNameError
from kernels.family import Problem, Workload

DENSE_SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]
DENSE_TS = [16, 64, 128, 256, 512, 1024, 2048, 4096]
TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]


@dataclass(frozen=True)
class Line:
    """One curve: a kernel family and how it picks its parameters for a workload."""

    name: str
    family: str
    lever: str | None = None  # champions of this lever are used when promoted
    extra: tuple = ()  # (param, value) pairs added to whatever configuration is chosen
    types: tuple = ()  # the quant types the family has kernels for (empty: every type)
    f16_input: bool = False  # activations arrive as f16 (a 16-bit model's), run as the dispatcher runs them
    dispatched: bool = False  # the family and parameters are the dispatcher's choice per workload (what kernels.mmq runs)
    # the activations arrive quantized, written before the call by their producer (the family's q8_input form): the
    # quantization is not in the time; a workload whose kernel has no such form is not run
    q8_input: bool = False


def line_config(line: Line, params: dict) -> dict:
    """What the line runs for a chosen configuration: its extra parameters on top and, for an f16-input
    line, the parameters the dispatcher gives float16 activations (kernels.dispatch.f16_input_params); for a
    q8-input line, the configuration's form for activations quantized before the call (ValueError where it has none)."""
    from kernels import dispatch

    params = {**params, **dict(line.extra)}
    if line.f16_input:
        params = dispatch.f16_input_params(line.family, params) or params
    if line.q8_input:
        q8 = dispatch.q8_input_params(line.family, params)
        if q8 is None:
            raise ValueError(f"line {line.name}: {line.family} {json.dumps(params, sort_keys=True)} has no form for "
                             f"activations quantized before the call")
        params = q8
    return params


# the lines `--lines` can name
LINES = {"dequant_cublas": Line("dequant_cublas", "dequant_cublas"),
         # what a user's kernels.mmq call runs at each workload: the promoted champion of the first lever that has
         # one for (type, arch, T regime, shape), else mmq_base's heuristic; f32 activations, every pass counted
         "champion": Line("champion", "dispatch", dispatched=True),
         # the same kernel where the activations' producer wrote them quantized (a norm or GLU kernel writing the pass's
         # layout, or one quantization shared by the GEMMs reading the same x): the GEMM alone, where the kernel has
         # that form (mmq_direct_q8 with GRIDQ 2: Q8IN), the workload not run elsewhere
         "champion_q8in": Line("champion_q8in", "dispatch", dispatched=True, q8_input=True),
         "mmq_base": Line("mmq_base", "mmq_base", "mmq_base"),
         "mmq_f16": Line("mmq_f16", "mmq_f16", "adaptive_format"),
         "mmq_f16x2": Line("mmq_f16x2", "mmq_f16", None, (("DEQ", 1),)),
         # Q8_1 made inside the GEMM: the time has no quantize pass to add (mmq_base's includes its own)
         "mmq_fused_quant": Line("mmq_fused_quant", "mmq_fused_quant", "fused_quant"),
         "mmq_fused_quant_bf16": Line("mmq_fused_quant_bf16", "mmq_fused_quant", "fused_quant", (("XBF16", 1),)),
         "mmq_wgmma": Line("mmq_wgmma", "mmq_wgmma", "wgmma"),
         # int8 wgmma (s32.s8.s8) on Q8_1 activations: the time includes its tiled quantize pass
         "mmq_wgmma_i8": Line("mmq_wgmma_i8", "mmq_wgmma_i8", "wgmma_i8"),
         # the same kernel fed f16 activations (a 16-bit model's): no f32 -> f16 pass per call
         "mmq_wgmma_x16": Line("mmq_wgmma_x16", "mmq_wgmma", "wgmma", f16_input=True),
         # and writing bf16 (no split K): 16-bit in, 16-bit out, as the bf16_cublas anchor; the output staged
         # through shared memory (EPI: faster on all 24 workloads of perf log run 64, by 0.2-3.8 %)
         "mmq_wgmma_16": Line("mmq_wgmma_16", "mmq_wgmma", "wgmma", (("BF16_OUTPUT", 1), ("EPI", 1)), f16_input=True),
         # weights straight from global memory into mma.sync fragments (q4_K, few tokens)
         "mmq_direct": Line("mmq_direct", "mmq_direct", "direct", types=("q4_K",)),
         "mmq_direct_x16": Line("mmq_direct_x16", "mmq_direct", "direct", types=("q4_K",), f16_input=True),
         # the same structure on int8 tensor cores (every type), activations int8 per 256 (its pass counted)
         "mmq_direct_q8": Line("mmq_direct_q8", "mmq_direct_q8", "direct_q8", types=("q4_K", "q5_K", "q6_K", "q8_0")),
         # the unquantized anchor: bf16 weights already in memory, torch.mm alone
         "bf16_cublas": Line("bf16_cublas", "dequant_cublas", None, (("dequant_each_call", False),)),
         # the same with cuBLAS writing f32, the output the MMQ kernels write
         "bf16_cublas_f32": Line("bf16_cublas_f32", "dequant_cublas", None,
                                 (("dequant_each_call", False), ("gemm_out", "f32")))}


def derived_line(spec: str) -> Line:
    """`NAME=LINE:JSON`: a line that runs LINE's configuration (its champion, swept best or heuristic)
    with the JSON parameters on top, e.g. 'x16_l2p3=mmq_wgmma_x16:{"L2PROMO": 3}', so one bench sets
    a candidate option beside the configuration it would change."""
    name, sep, rest = spec.partition("=")
    base, sep2, params = rest.partition(":")
    if not (sep and sep2 and name):
        raise ValueError(f"--variant {spec!r}: expected NAME=LINE:JSON")
    if base not in LINES:
        raise UnknownNameError(f"--variant {spec!r}: unknown line {base!r} (have {', '.join(LINES)})")
    try:
        overrides = json.loads(params)
    except json.JSONDecodeError as err:
        raise ValueError(f"--variant {spec!r}: the parameters are not JSON ({err})") from None
    if not isinstance(overrides, dict):
        raise ValueError(f"--variant {spec!r}: the parameters must be a JSON object")
    line = LINES[base]
    return replace(line, name=name, extra=(*line.extra, *overrides.items()))


@dataclass
class Sweep:
    shapes: list[tuple[int, int]] = field(default_factory=lambda: list(DENSE_SHAPES))
    Ts: list[int] = field(default_factory=lambda: list(DENSE_TS))
    types: list[str] = field(default_factory=lambda: list(TYPES))
    lines: list[Line] = field(default_factory=lambda: [LINES["dequant_cublas"], LINES["mmq_base"]])


def tuned_params(tuned: dict, family: str, qtype: str, T: int) -> dict | None:
    """The swept best configuration for the largest swept T <= T (scripts/sweep_mmq.py best.json)."""
    by_t = tuned.get(family, {}).get(qtype, {})
    swept = sorted(int(t) for t in by_t if int(t) <= T)
    if not swept:
        return None
    params = dict(by_t[str(swept[-1])])
    if swept[-1] != T:  # a split-K chosen for another T is wrong here: let the launcher choose
        params.pop("SPLITK", None)
    return params


def line_params(line: Line, qtype: str, T: int, arch: str, tuned: dict | None = None,
                card: str | None = None) -> tuple[dict, str]:
    """(params, origin): the promoted champion (the card's own first), else a swept best, else the family's
    heuristic."""
    from campaign import champions

    if line.lever:
        found = champions.lookup(line.lever, qtype, arch, T, card=card)
        if found is not None:
            return dict(found), "champion"
    if tuned and (found := tuned_params(tuned, line.family, qtype, T)) is not None:
        return found, "sweep"
    from kernels import families

    heuristic = families.heuristic(line.family, T, qtype)
    return (heuristic, "heuristic") if heuristic is not None else ({}, "fixed")


def line_choice(line: Line, qtype: str, M: int, K: int, T: int, arch: str,
                tuned: dict | None = None, card: str | None = None) -> tuple[str, dict, str]:
    """(family, params, origin) the line runs at a workload: the dispatcher's choice for a dispatched line
    (kernels.dispatch.choose, the weight's shape included), else line_params; the line's extras on top."""
    if line.dispatched:
        from kernels import dispatch

        family, params, origin = dispatch.choose(qtype, arch, T, M=M, K=K, card=card)
        return family, line_config(replace(line, family=family), params), origin
    params, origin = line_params(line, qtype, T, arch, tuned, card)
    return line.family, line_config(line, params), origin


def time_lines(device, variants: dict, problem: Problem, reps: int, warmup: int, interleave: bool,
               skipped: dict) -> dict:
    """Each line's timing of one workload (gates.perf.time_interleaved on fresh bounds): line after line, or
    (interleave) all lines round-robin in one loop with the order rotated every rep, so that a clock or
    thermal drift falls on every line alike and a ratio between lines is measured under the same conditions.
    A line whose bound refuses the workload (ValueError, e.g. a GRIDQ grid larger than the GPU holds at once) is
    not timed: its reason goes to `skipped` and the other lines are timed without it."""
    from gates import perf

    timings = {}
    for group in ([variants] if interleave else [{name: v} for name, v in variants.items()]):
        bounds = {}
        try:
            for name, v in group.items():
                try:
                    bounds[name] = [v.prepare(problem)]
                except ValueError as refused:
                    skipped[name] = str(refused)
            if bounds:
                timings.update(perf.time_interleaved(device, bounds, reps, warmup))
        finally:
            for prepared in bounds.values():
                for bound in prepared:
                    bound.release()
    return timings


def run_sweep(device, sweep: Sweep, reps: int = 30, warmup: int = 5, seed: int = 0,
              progress=print, tuned: dict | None = None, partial_csv: Path | None = None,
              interleave: bool = False) -> pd.DataFrame:
    """Time every (type, shape, T, line); with `partial_csv`, the rows measured so far are rewritten
    there after each workload, so a sweep stopped by a timeout keeps what it measured. `interleave`:
    a workload's lines are timed round-robin (time_lines)."""
    from campaign import champions
    from kernels import families, quant

    rng = np.random.default_rng(seed)
    built: dict = {}
    rows, skips = [], []
    arch, card = device.info.get("arch", "?"), champions.card_of(device.info)
    total = len(sweep.shapes) * len(sweep.Ts) * len(sweep.types)
    done = 0
    for qtype in sweep.types:
        for M, K in sweep.shapes:
            w = quant.get(qtype).random_packed(M, K, rng)
            for T in sweep.Ts:
                x = rng.standard_normal((T, K), dtype=np.float32)
                problem = Problem(Workload(qtype, M, K, T), w, x)
                lines = [line for line in sweep.lines if not line.types or qtype in line.types]
                chosen = {}  # line name -> (variant, family, params, origin)
                refused = {}  # line name -> why it cannot run this workload (not timed, no row)
                for line in lines:
                    try:
                        family, params, origin = line_choice(line, qtype, M, K, T, arch, tuned, card)
                        key = (family, qtype, json.dumps(params, sort_keys=True))
                        if key not in built:
                            built[key] = families.get(family).build(params, qtype, device)
                    except ValueError as why:
                        refused[line.name] = str(why)
                        continue
                    chosen[line.name] = (built[key], family, params, origin)
                timings = time_lines(device, {name: c[0] for name, c in chosen.items()}, problem, reps, warmup,
                                     interleave, skipped=refused)
                timed = [name for name in chosen if name in timings]
                for name in timed:
                    _, family, params, origin = chosen[name]
                    t = timings[name]
                    rows.append(dict(type=qtype, M=M, K=K, T=T, line=name, family=family, params=json.dumps(params),
                                     origin=origin, median_us=t.median * 1e6, p90_us=t.p90 * 1e6,
                                     tflops=problem.workload.flops / t.median / 1e12))
                skips.extend(dict(type=qtype, M=M, K=K, T=T, line=name, reason=why) for name, why in refused.items())
                done += 1
                progress(f"[{done}/{total}] {qtype} M={M} K={K} T={T}: " + ", ".join(
                    f"{r['line']} {r['tflops']:.1f}" for r in rows[len(rows) - len(timed):]) + " TFLOP/s"
                    + "".join(f"; {name} not run: {why}" for name, why in refused.items()))
                if partial_csv is not None:
                    pd.DataFrame(rows).to_csv(partial_csv, index=False)
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skips  # (workload, line, reason) of every line that refused a workload
    return df


def add_ratios(df: pd.DataFrame, ceilings: dict) -> pd.DataFrame:
    """Fraction of the measured int8 ceiling, ratio to llama.cpp and to dequant+cuBLAS."""
    df = df.copy()
    int8, bf16 = ceilings.get("int8_tops"), ceilings.get("bf16_tflops")
    df["frac_int8"] = df["tflops"] / int8 if int8 else math.nan
    df["frac_bf16"] = df["tflops"] / bf16 if bf16 else math.nan  # the f16/bf16 tensor-core paths' ceiling
    for line in ("dequant_cublas", "bf16_cublas"):
        base = df[df.line == line].set_index(["type", "M", "K", "T"])["tflops"]
        df[f"vs_{line}"] = [r.tflops / base.get((r.type, r.M, r.K, r.T), math.nan) for r in df.itertuples()]
    df["vs_llama_cpp"] = [
        (r.tflops / a) if (a := anchors.llama_cpp_tflops(r.type, r.T)) and (r.M, r.K) == anchors.LLAMA_CPP_SHAPE
        else math.nan for r in df.itertuples()]
    return df


def plot_sweep(df: pd.DataFrame, ceilings: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from campaign import report

    shapes = sorted({(r.M, r.K) for r in df.itertuples()})
    types = list(dict.fromkeys(df.type))
    fig, axes = plt.subplots(len(types), len(shapes), figsize=(5 * len(shapes), 3.6 * len(types)),
                             squeeze=False, sharey=True)
    for i, qtype in enumerate(types):
        for j, (M, K) in enumerate(shapes):
            ax = axes[i][j]
            sub = df[(df.type == qtype) & (df.M == M) & (df.K == K)]
            for name, part in sub.groupby("line"):
                ax.plot(part["T"], part["tflops"], marker="o", label=name)
            if (M, K) == anchors.LLAMA_CPP_SHAPE and qtype == "q4_K":
                ts = sorted(anchors.LLAMA_CPP_Q4K)
                ax.plot(ts, [anchors.LLAMA_CPP_Q4K[t] for t in ts], "k--", label="llama.cpp MMQ")
            for key, style in (("int8_tops", ":"), ("bf16_tflops", "-.")):
                if ceilings.get(key):
                    ax.axhline(ceilings[key], ls=style, c="grey", lw=1, label=key)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{qtype}  M={M} K={K}")
            ax.set_xlabel("T (tokens)")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    report.save_png(fig, path)
    plt.close(fig)
    return path


def record(df: pd.DataFrame, ceilings: dict, device_info: dict, out: Path, tracking_uri: str | None) -> str:
    """Write the table and plot under `out` (with a `champion` line, also campaign.round_table's table and bars as
    round_table.md) and log them as one MLflow run; returns its id."""
    from campaign import paths
    from campaign.tracking import Tracker

    out.mkdir(parents=True, exist_ok=True)
    csv = out / "bench.csv"
    df.to_csv(csv, index=False)
    png = plot_sweep(df, ceilings, out / "bench.png")
    info = out / "ceilings.json"
    info.write_text(json.dumps({"ceilings": ceilings, "device": device_info}, indent=1, default=str))
    files = [csv, png, info]
    if df.attrs.get("skipped"):  # the lines that refused a workload, and why (they have no row in bench.csv)
        files.append(out / "bench.skipped.csv")
        pd.DataFrame(df.attrs["skipped"]).to_csv(files[-1], index=False)
    if "champion" in set(df.line):
        from campaign import round_table

        files.append(out / "round_table.md")
        files[-1].write_text(round_table.render(df, ceilings, device=device_info.get("name")))
    base = paths.root()
    tracker = Tracker(tracking_uri or paths.default_tracking_uri(base), experiment="mmq-bench",
                      artifact_root=paths.mlruns(base) / "artifacts")
    run_id = tracker.start_run(f"bench {time.strftime('%Y-%m-%d %H:%M')}",
                               tags={"device": device_info.get("name", "?"), "arch": device_info.get("arch", "?")},
                               params={f"ceiling_{k}": v for k, v in ceilings.items() if isinstance(v, (int, float))})
    tracker.log_metrics(run_id, {f"{r.line}.{r.type}.M{r.M}.K{r.K}.T{r.T}.tflops": r.tflops for r in df.itertuples()})
    for path in files:
        tracker.log_file(run_id, path)
    tracker.finish(run_id)
    return run_id


def summary_table(df: pd.DataFrame) -> str:
    cols = ["type", "M", "K", "T", "line", "median_us", "tflops", "frac_int8", "frac_bf16", "vs_dequant_cublas",
            "vs_bf16_cublas", "vs_llama_cpp"]
    with pd.option_context("display.width", 200, "display.max_rows", 2000, "display.float_format", "{:.3g}".format):
        return df[cols].to_string(index=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="campaign bench", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/bench")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--shapes", default=",".join(f"{m}x{k}" for m, k in DENSE_SHAPES), help="MxK,...")
    ap.add_argument("--Ts", default=",".join(map(str, DENSE_TS)))
    ap.add_argument("--lines", default="dequant_cublas,mmq_base")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--tracking-uri", default=None)
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--tuned", help="best.json from scripts/sweep_mmq.py: swept configurations per (type, T)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=LINE:JSON",
                    help="one more line: LINE's configuration with these parameters set (repeatable)")
    ap.add_argument("--interleave", action="store_true",
                    help="time a workload's lines round-robin, order rotated each rep (ratios under one drift)")
    args = ap.parse_args(argv)

    from kernels import cuda_runtime
    from kernels.device import open_device

    sweep = Sweep(shapes=[tuple(map(int, s.split("x"))) for s in args.shapes.split(",")],
                  Ts=[int(t) for t in args.Ts.split(",")], types=args.types.split(","),
                  lines=[LINES[n] for n in args.lines.split(",")] + [derived_line(v) for v in args.variant])
    device = open_device("cuda")
    ceilings = {} if args.no_ceilings else cuda_runtime.measure_ceilings(device)
    print("device:", json.dumps(device.info, default=str))
    print("ceilings:", json.dumps(ceilings, default=str))
    tuned = json.loads(Path(args.tuned).read_text()) if args.tuned and Path(args.tuned).exists() else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "bench.partial.csv"  # replaced by bench.csv (with the ratios) when the sweep completes
    swept = run_sweep(device, sweep, reps=args.reps, tuned=tuned, partial_csv=partial, interleave=args.interleave)
    if swept.empty:
        raise CampaignError("no line ran any workload: " + "; ".join(
            f"{s['line']} at {s['type']} {s['M']}x{s['K']} T={s['T']}: {s['reason']}" for s in swept.attrs["skipped"][:3]))
    df = add_ratios(swept, ceilings)
    record(df, ceilings, device.info, out, args.tracking_uri)
    partial.unlink(missing_ok=True)
    print(summary_table(df))
    if "champion" in set(df.line):
        print((out / "round_table.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

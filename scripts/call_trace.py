"""Where a `direct_q8` call's time goes, CTA by CTA: the TRACE=1 probe of kernels/cuda/mmq_direct_q8.cu has every CTA of
the activation pass and of the GEMM record %globaltimer when it starts, when its wait for the kernel before returns,
when its first work is ready (the pass: its first unit stored; the GEMM: its first super-block's weights and activations
landed) and when it ends; a one-launch GEMM (GRIDQ 2) also when its own wait for the kernel before returns (`resumed`)
and when its count's add is done (`published`, CTAs that quantized), its `waited` being its range's count seen. Calls run back to back on rotated inputs, queued behind the timer's spin kernel, as the
bench times them.

    python3 scripts/call_trace.py --type q4_K --shape 4096x14336 --T 16 --calls 6 --out DIR \\
        --variant 'champion={}' --variant 'xpf={"XPF": 1}' --variant 'gemm_alone={"NOPASS": 1}'

A variant is the `direct_q8` champion of the (type, T) regime (its defaults where there is none) with the JSON on top.
Per variant: a table of each call's phases in us (the median CTA's wait and ready, the last CTA's end; calls after the
first), the same times for the GEMM's CTAs in eighths by start (trace_<name>_by_start.csv: whether part of the grid sets
the call's end), trace_<name>.csv (every CTA's record) and trace_<name>.png (three calls' CTAs on one time axis) under
--out.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TIMES = ["start", "waited", "ready", "end", "resumed", "published"]  # a record's words 2..7
FIELDS = ["kernel", "sm", "launch", "cta", *TIMES]
KERNELS = {0: "pass", 1: "gemm"}
PHASES = {  # name: (from, to), each "<kernel>.<event>" of this call, "prev_gemm.end" of the call before
    "gemm_before_end->pass_waited": ("prev_gemm.end", "pass.waited"),
    "gemm_before_end->gemm_resumed": ("prev_gemm.end", "gemm.resumed"),  # GRIDQ 2: its wait for the kernel before,
    "gemm_resumed->gemm_published": ("gemm.resumed", "gemm.published"),  # its share quantized and released,
    "gemm_published->gemm_waited": ("gemm.published", "gemm.waited"),  # its range's count seen
    "pass_waited->pass_end": ("pass.waited", "pass.end"),
    "pass_end->gemm_waited": ("pass.end", "gemm.waited"),
    "gemm_waited->gemm_ready": ("gemm.waited", "gemm.ready"),
    "gemm_ready->gemm_end": ("gemm.ready", "gemm.end"),
    "call": ("prev_gemm.end", "gemm.end"),
}


def unpack(raw: np.ndarray) -> pd.DataFrame:
    """dq8_trace records [n, 8] uint64 -> one row per CTA (times in ns, as recorded; 0: not recorded)."""
    raw = np.asarray(raw, np.uint64).reshape(-1, 2 + len(TIMES))
    return pd.DataFrame({
        "kernel": (raw[:, 0] >> np.uint64(32)).astype(np.int64), "sm": (raw[:, 0] & np.uint64(0xFFFFFFFF)).astype(np.int64),
        "launch": (raw[:, 1] >> np.uint64(32)).astype(np.int64), "cta": (raw[:, 1] & np.uint64(0xFFFFFFFF)).astype(np.int64),
        **{name: raw[:, 2 + i].astype(np.int64) for i, name in enumerate(TIMES)}})


def events(records: pd.DataFrame) -> pd.DataFrame:
    """Per call (launch index) and kernel: the first CTA's start, the median CTA's wait and ready (and, where recorded,
    resumed and published), the last CTA's end."""
    rows = {}
    for (kernel, launch), g in records.groupby(["kernel", "launch"]):
        name = KERNELS[int(kernel)]
        row = rows.setdefault(int(launch), {})
        row[f"{name}.start"] = g["start"].min()
        row[f"{name}.waited"] = g["waited"].median()
        row[f"{name}.ready"] = g.loc[g["ready"] > 0, "ready"].median()  # 0: a CTA that never got there (a probe)
        row[f"{name}.end"] = g["end"].max()
        for event in ("resumed", "published"):  # GRIDQ 2's (published: the CTAs that quantized)
            if (g[event] > 0).any():
                row[f"{name}.{event}"] = g.loc[g[event] > 0, event].median()
        row[f"{name}.ctas"] = len(g)
    out = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    out["prev_gemm.end"] = out["gemm.end"].shift(1)
    return out


def phases(records: pd.DataFrame) -> pd.DataFrame:
    """Each call's phases in us (PHASES), the first call dropped (it has no call before it in the trace). A variant
    without a pass (NOPASS) has only the GEMM's phases and the call."""
    ev = events(records)
    out = pd.DataFrame(index=ev.index)
    for name, (a, b) in PHASES.items():
        if a in ev and b in ev:
            out[name] = (ev[b] - ev[a]) / 1e3
    return out.iloc[1:]


def by_start(records: pd.DataFrame, groups: int = 8) -> pd.DataFrame:
    """The GEMM's CTAs in `groups` equal parts by the order they started in (a record's `cta`; blockIdx order puts the
    K ranges there one after the other), each part's median CTA's start, wait, ready and end in us from the GEMM
    before's end, the median over the calls after the first: whether the call ends late because some part of the grid
    does (run 116's H200 trace: the second half was ready 1.0-1.3 us and ended ~1.7 us after the first)."""
    gemm = records[records["kernel"] == 1]
    before_end = events(records)["prev_gemm.end"]
    ctas = gemm.groupby("launch")["cta"].transform("size")
    part = gemm["cta"] * groups // ctas
    times = ["start", "waited", "ready", "end"]
    rel = gemm[times].sub(gemm["launch"].map(before_end), axis=0) / 1e3
    per_call = rel.assign(launch=gemm["launch"], part=part).dropna().groupby(["launch", "part"]).median()
    return per_call.groupby("part").median()


def resolution_ns(records: pd.DataFrame) -> int:
    """The smallest step between distinct recorded times: %globaltimer's update interval, at most."""
    times = np.unique(records[TIMES].to_numpy().ravel())
    times = times[times > 0]
    steps = np.diff(times)
    return int(steps.min()) if len(steps) else 0


def plot(records: pd.DataFrame, path: Path, title: str, calls: int = 3) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from campaign import report

    first = int(records["launch"].min()) + 1
    shown = records[(records["launch"] >= first) & (records["launch"] < first + calls)].sort_values("start")
    t0 = shown["start"].min()
    fig, ax = plt.subplots(figsize=(12, 6))
    for y, (_, r) in enumerate(shown.iterrows()):
        color = "tab:orange" if r["kernel"] == 0 else "tab:blue"
        ax.plot([(r["start"] - t0) / 1e3, (r["end"] - t0) / 1e3], [y, y], color=color, lw=0.6)
        ax.plot([(r["waited"] - t0) / 1e3], [y], "|", color="black", ms=2)
        for event, color in (("resumed", "tab:purple"), ("published", "tab:red")):
            if r[event] > 0:
                ax.plot([(r[event] - t0) / 1e3], [y], "|", color=color, ms=2)
        if r["ready"] > 0:
            ax.plot([(r["ready"] - t0) / 1e3], [y], "|", color="tab:green", ms=2)
    ax.set_xlabel("us (orange: pass CTAs, blue: GEMM CTAs; black tick: wait returned (GRIDQ 2: count seen), green: "
                  "first work ready; GRIDQ 2: purple resumed, red published)")
    ax.set_ylabel("CTA, by start")
    ax.set_title(title)
    fig.tight_layout()
    report.save_png(fig, path, dpi=120)
    plt.close(fig)


def read_trace(modules) -> pd.DataFrame:
    """Every record in the modules' dq8_trace (each loaded copy of the cubin has its own)."""
    import pycuda.driver as drv

    frames = []
    for m in modules:
        n = np.zeros(1, np.uint32)
        drv.memcpy_dtoh(n, m.global_ptr("dq8_trace_n")[0])
        ptr, size = m.global_ptr("dq8_trace")
        raw = np.zeros(size // 8, np.uint64)
        drv.memcpy_dtoh(raw, ptr)
        words = 2 + len(TIMES)
        if int(n[0]) > size // (8 * words):  # the rest were dropped: a trace with holes would misplace phases
            raise ValueError(f"{int(n[0])} CTAs recorded but the trace holds {size // (8 * words)}: run fewer --calls")
        frames.append(unpack(raw.reshape(-1, words)[: int(n[0])]))
    return pd.concat(frames, ignore_index=True)


def parse_variant(spec: str) -> tuple[str, dict]:
    """`NAME=JSON` (JSON optional) -> (name, parameters over the champion)."""
    name, _, overrides = spec.partition("=")
    try:
        params = json.loads(overrides or "{}")
    except json.JSONDecodeError as err:
        raise ValueError(f"--variant {spec!r}: the parameters are not JSON ({err})") from None
    if not name or not isinstance(params, dict):
        raise ValueError(f"--variant {spec!r}: expected NAME=JSON object, e.g. 'xpf={{\"XPF\": 1}}'")
    return name, params


def reset_trace(modules) -> None:
    import pycuda.driver as drv

    for m in modules:
        for name in ("dq8_trace_n", "dq8_trace_started"):
            ptr, size = m.global_ptr(name)
            drv.memcpy_htod(ptr, np.zeros(size // 4, np.uint32))


def variant_params(qtype: str, arch: str, T: int, overrides: dict, card: str | None = None) -> dict:
    """A --variant's configuration: the direct_q8 champion of the type's T regime (the card's own first, campaign
    promote --per-card; the defaults where there is none) with the overrides on top (scripts/precompile.py --trace
    compiles the same, with TRACE 1 as trace_variant builds it)."""
    from campaign import champions

    return {**(champions.lookup("direct_q8", qtype, arch, T, card=card) or {}), **overrides}


def trace_variant(device, qtype: str, M: int, K: int, T: int, params: dict, calls: int,
                  warmup: int) -> tuple[pd.DataFrame, float]:
    """(every CTA's record of `calls` back-to-back calls, their GPU us per call by CUDA events). The calls are queued
    behind the timer's spin kernel (device.time_once, as the bench times them), so the GPU runs them without waiting
    for Python's launches; where the host outran the spin, time_once times again, and only its last calls are kept."""
    from kernels import families, quant
    from kernels.family import Problem, Workload

    rng = np.random.default_rng(0)
    problem = Problem(Workload(qtype, M, K, T), quant.get(qtype).random_packed(M, K, rng),
                      rng.standard_normal((T, K), dtype=np.float32))
    variant = families.get("mmq_direct_q8").build({**params, "TRACE": 1}, qtype, device)
    bound = variant.prepare(problem)
    try:
        modules = bound.trace_modules()
        device.time_once(bound.run, warmup)  # also sets the spin's length by the host's pace of enqueueing
        device.synchronize()
        reset_trace(modules)
        us = device.time_once(bound.run, calls) * 1e6
        device.synchronize()
        records = read_trace(modules)
        return records[records["launch"] > records["launch"].max() - calls].reset_index(drop=True), us
    finally:
        bound.release()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--type", default="q4_K")
    ap.add_argument("--shape", default="4096x14336", help="MxK")
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--variant", action="append", default=[], help="NAME=JSON over the regime's direct_q8 champion")
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", default="out/trace")
    args = ap.parse_args()
    if not args.variant:
        args.variant = ["champion={}"]
    if not 2 <= args.calls <= 6:
        raise SystemExit("--calls: 2..6 (the trace holds 16384 CTAs, and time_once may time the calls three times)")

    from campaign import champions
    from kernels.device import open_device

    variants = [parse_variant(spec) for spec in args.variant]
    try:
        M, K = map(int, args.shape.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--shape {args.shape!r}: expected MxK, e.g. 4096x14336") from None
    device = open_device("cuda")
    card = champions.card_of(device.info)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for name, overrides in variants:
        params = variant_params(args.type, device.info["arch"], args.T, overrides, card)
        records, us = trace_variant(device, args.type, M, K, args.T, params, args.calls, args.warmup)
        records.to_csv(out / f"trace_{name}.csv", index=False)
        table = phases(records)
        summary[name] = pd.concat([pd.Series({"events_us_per_call": us}), table.median()])
        print(f"\n{name}: {json.dumps(params, sort_keys=True)}  ({len(records)} CTAs, timer step "
              f"{resolution_ns(records)} ns; {us:.2f} us per call by CUDA events)")
        print(table.round(2).to_string())
        parts = by_start(records)
        parts.to_csv(out / f"trace_{name}_by_start.csv")
        print(f"the GEMM's CTAs in eighths by start, median CTA, us from the GEMM before's end:\n"
              f"{parts.round(2).T.to_string()}")
        plot(records, out / f"trace_{name}.png", f"{args.type} {args.shape} T={args.T}: {name}")
    table = pd.DataFrame(summary).T
    table.to_csv(out / "trace_summary.csv")
    print(f"\nmedian over calls, us ({args.type} {args.shape} T={args.T}, {device.info.get('name', '')}):")
    print(table.round(2).to_string())
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

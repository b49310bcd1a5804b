"""Issue 6's one-run table and its bars (item 7), judged from a bench table rather than by eye.

The champion is the bench's `champion` line: at each workload what `kernels.mmq` runs (the dispatcher's
choice), f32 activations in, every pass counted; the ratios are the table's own (campaign.bench.add_ratios).
Its bars, each over what the table holds:
  - llama:   >= 1.5x llama.cpp's MMQ at every (type, T) where campaign.anchors has its figure (M=4096, K=14336);
  - dequant: faster than dequant+cuBLAS (its dequant pass counted) at every T <= 256, every type and shape;
  - stream:  at q4_K 4096x14336 T=16 the weight bytes stream at >= 60 % of the HBM bandwidth measured in the
             same bench run (ceilings.json's copy bandwidth; 33 MB in <= ~13 us on the H200);
  - complete: the table covers all four types, the three dense shapes and the eight T (one run, one table);
  - device:  it was measured on an H200 (the issue's card, and llama.cpp's figures are that card's).
Beside the bars, not one of them: where the bench ran the `champion_q8in` line (the same kernel on activations their
producer wrote quantized, so the quantization is out of the call), the stream bar's arithmetic on its row, for the
owner's reading of the stream bar (the bar as written counts the quantization in the call).

    python3 -m campaign.round_table out/bench/bench.csv [--ceilings out/bench/ceilings.json] [--line champion]
exits 0 when every bar passes, 1 when one fails or cannot be judged.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from campaign import anchors, workloads
from campaign.bench import DENSE_SHAPES, DENSE_TS, TYPES
from campaign.errors import CampaignError
from kernels.family import Workload

LLAMA_RATIO = 1.5
DEQUANT_MAX_T = 256
STREAM_WORKLOAD = ("q4_K", 4096, 14336, 16)  # (type, M, K, T)
STREAM_FRACTION = 0.6
BAR_CARD = "H200"


@dataclass(frozen=True)
class Bar:
    name: str
    verdict: str  # "pass", "fail" or "not judged"
    detail: str


def champion_rows(df: pd.DataFrame, line: str) -> pd.DataFrame:
    rows = df[df["line"] == line]
    if rows.empty:
        raise CampaignError(f"the bench table has no {line!r} line (have: {', '.join(sorted(set(df['line'])))}); "
                            f"run the bench with --lines dequant_cublas,{line}")
    return rows


def llama_bar(rows: pd.DataFrame) -> Bar:
    known = rows.dropna(subset=["vs_llama_cpp"])  # campaign.bench.add_ratios: only where llama.cpp has a figure
    if known.empty:
        return Bar("llama", "not judged", f"no workload at {anchors.LLAMA_CPP_SHAPE} with a llama.cpp figure")
    r = known.iloc[known["vs_llama_cpp"].argmin()]
    verdict = "pass" if r["vs_llama_cpp"] >= LLAMA_RATIO else "fail"
    return Bar("llama", verdict, f">= {LLAMA_RATIO}x llama.cpp at {len(known)} (type, T): lowest "
                                 f"{r['vs_llama_cpp']:.2f}x ({r['type']} T={r['T']})")


def dequant_bar(rows: pd.DataFrame) -> Bar:
    small = rows[rows["T"] <= DEQUANT_MAX_T]
    if small.empty:
        return Bar("dequant", "not judged", f"no champion workload at T <= {DEQUANT_MAX_T}")
    missing = int(small["vs_dequant_cublas"].isna().sum())
    if missing:
        return Bar("dequant", "not judged", f"{missing} champion workload(s) at T <= {DEQUANT_MAX_T} have no "
                                            "dequant_cublas row to compare with")
    r = small.iloc[small["vs_dequant_cublas"].argmin()]
    verdict = "pass" if r["vs_dequant_cublas"] > 1.0 else "fail"
    return Bar("dequant", verdict, f"faster than dequant+cuBLAS at {len(small)} workloads with T <= {DEQUANT_MAX_T}: "
                                   f"lowest {r['vs_dequant_cublas']:.2f}x ({r['type']} {r['M']}x{r['K']} T={r['T']})")


def stream_bar(rows: pd.DataFrame, ceilings: dict, name: str = "stream") -> Bar:
    qtype, M, K, T = STREAM_WORKLOAD
    hit = rows[(rows["type"] == qtype) & (rows["M"] == M) & (rows["K"] == K) & (rows["T"] == T)]
    where = f"{qtype} {M}x{K} T={T}"
    if hit.empty:
        return Bar(name, "not judged", f"no champion row at {where}")
    bandwidth = ceilings.get("bandwidth_gbps")
    if not bandwidth:
        return Bar(name, "not judged", "no HBM bandwidth measured in this run (bench without --no-ceilings)")
    nbytes, us = workloads.weight_bytes(Workload(qtype, M, K, T)), float(hit["median_us"].iloc[0])
    fraction = nbytes / (us * 1e-6) / (bandwidth * 1e9)
    bar_us = nbytes / (STREAM_FRACTION * bandwidth * 1e9) * 1e6
    verdict = "pass" if fraction >= STREAM_FRACTION else "fail"
    return Bar(name, verdict, f"{where}: {nbytes / 1e6:.1f} MB of weights in {us:.2f} us, {fraction:.0%} of the "
                                  f"measured {bandwidth:.0f} GB/s (>= {STREAM_FRACTION:.0%} is <= {bar_us:.2f} us)")


def complete_bar(rows: pd.DataFrame) -> Bar:
    have = {(r.type, r.M, r.K, r.T) for r in rows.itertuples()}
    asked = {(q, M, K, T) for q in TYPES for M, K in DENSE_SHAPES for T in DENSE_TS}
    missing = asked - have
    if missing:
        return Bar("complete", "fail", f"{len(missing)} of the {len(asked)} workloads (4 types x 3 shapes x 8 T) are "
                                       f"not in this table, e.g. {sorted(missing)[0]}")
    return Bar("complete", "pass", f"all {len(asked)} workloads in one table")


def device_bar(device: str | None) -> Bar:
    if not device:
        return Bar("device", "not judged", "the bench run's device is not known (no ceilings.json beside the table)")
    if BAR_CARD not in device:
        return Bar("device", "fail", f"measured on {device}: issue 6's bars, llama.cpp's figures among them, are the "
                                     f"{BAR_CARD}'s")
    return Bar("device", "pass", f"measured on {device}")


def judge(df: pd.DataFrame, ceilings: dict, line: str = "champion", device: str | None = None) -> list[Bar]:
    """The bars over the table; `device` is the name of the GPU it was measured on (ceilings.json's device)."""
    rows = champion_rows(df, line)
    return [llama_bar(rows), dequant_bar(rows), stream_bar(rows, ceilings), complete_bar(rows), device_bar(device)]


def q8_input_reading(df: pd.DataFrame, ceilings: dict) -> Bar | None:
    """The stream bar's arithmetic on the `champion_q8in` row (activations quantized by their producer, not in the
    call), or None where the bench did not run that line: a reading beside the bars, not one of them."""
    rows = df[df["line"] == "champion_q8in"]
    if rows.empty:
        return None
    return stream_bar(rows, ceilings, "stream, activations quantized before the call (champion_q8in)")


def pivot(df: pd.DataFrame, line: str = "champion") -> pd.DataFrame:
    """TFLOP/s by (type, shape) x T, each followed by its ratios to llama.cpp (where known) and to dequant+cuBLAS."""
    rows = champion_rows(df, line)
    Ts = sorted(set(rows["T"]))
    out = []
    for (qtype, M, K), part in rows.groupby(["type", "M", "K"], sort=False):
        by_t = part.set_index("T")
        shown = [(f"{qtype} {M}x{K}", "tflops"), ("  vs dequant+cuBLAS", "vs_dequant_cublas")]
        if (M, K) == anchors.LLAMA_CPP_SHAPE:
            shown.insert(1, ("  vs llama.cpp", "vs_llama_cpp"))
        out += [{"row": label, **{T: by_t[column].get(T, math.nan) for T in Ts}} for label, column in shown]
    return pd.DataFrame(out).set_index("row")


def render(df: pd.DataFrame, ceilings: dict, line: str = "champion", device: str | None = None) -> str:
    """The table and the bars as markdown."""
    table = pivot(df, line)
    header = "| " + " | ".join(["TFLOP/s (ratio)", *(f"T={T}" for T in table.columns)]) + " |"
    lines = [f"## The `{line}` line, one run on {device or 'an unknown device'}", "", header,
             "|" + "---|" * (len(table.columns) + 1)]
    for label, values in table.iterrows():
        ratio = label.startswith("  ")
        cells = ["" if math.isnan(v) else (f"{v:.2f}x" if ratio else f"{v:.0f}") for v in values]
        lines.append(f"| {label.strip()} | " + " | ".join(cells) + " |")
    lines += ["", "## Issue 6, item 7's bars", ""]
    lines += [f"- **{b.name}: {b.verdict}** - {b.detail}" for b in judge(df, ceilings, line, device)]
    reading = q8_input_reading(df, ceilings)
    if reading is not None:
        lines += ["", "## Beside the bars (not one of them: the quantization is out of the call)", "",
                  f"- {reading.name}: {reading.verdict} - {reading.detail}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m campaign.round_table", description=__doc__.splitlines()[0])
    ap.add_argument("bench_csv", type=Path)
    ap.add_argument("--ceilings", type=Path, help="the bench run's ceilings.json (default: beside the csv)")
    ap.add_argument("--line", default="champion")
    args = ap.parse_args(argv)
    if not args.bench_csv.is_file():
        raise CampaignError(f"{args.bench_csv}: no such bench table")
    df = pd.read_csv(args.bench_csv)
    ceilings_path = args.ceilings or args.bench_csv.with_name("ceilings.json")
    info = json.loads(ceilings_path.read_text()) if ceilings_path.is_file() else {}
    ceilings, device = info.get("ceilings", {}), info.get("device", {}).get("name")
    print(render(df, ceilings, args.line, device), end="")
    return 0 if all(b.verdict == "pass" for b in judge(df, ceilings, args.line, device)) else 1


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

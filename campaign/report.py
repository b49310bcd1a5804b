"""Tables (pandas) and plots (matplotlib) of what the campaign measured.

The sweep is declared as data (Triton's perf_report shape): series name -> {workload: TFLOP/s},
one subplot per (qtype, M, K), T on the x axis, the device roofline where ceilings are known.
Figures are built without pyplot (no global state, no display needed).
"""
from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from PIL import Image

from campaign.workloads import device_ceiling
from kernels.family import Workload


def _shape_key(w: Workload) -> tuple:
    return (w.qtype, w.M, w.K, w.n_experts, w.top_k, w.routing)


def _shape_title(w: Workload) -> str:
    moe = f" E{w.n_experts} top{w.top_k} {w.routing}" if w.is_moe else ""
    return f"{w.qtype} M{w.M} K{w.K}{moe}"


def tflops_figure(series: dict[str, dict[Workload, float]], ceilings: dict, mode: str, title: str = "") -> Figure:
    """TFLOP/s vs T, one subplot per shape, one line per series, roofline dashed."""
    shapes: dict[tuple, list[Workload]] = defaultdict(list)
    for points in series.values():
        for w in points:
            if w not in shapes[_shape_key(w)]:
                shapes[_shape_key(w)].append(w)
    n = max(1, len(shapes))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(4.2 * cols, 3.2 * rows), layout="constrained")
    for i, (shape, ws) in enumerate(sorted(shapes.items(), key=lambda kv: str(kv[0]))):
        ax = fig.add_subplot(rows, cols, i + 1)
        ws = sorted(ws, key=lambda w: w.T)
        for name, points in series.items():
            mine = [w for w in ws if w in points]
            if mine:
                ax.plot([w.T for w in mine], [points[w] for w in mine], marker="o", label=name)
        roof = [(w.T, device_ceiling(w, ceilings, mode)) for w in ws]
        if all(c for _, c in roof):
            ax.plot([t for t, _ in roof], [c for _, c in roof], "k--", linewidth=1, label="roofline")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("T (tokens)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(_shape_title(ws[0]), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def trial_figure(report, ceilings: dict, mode: str) -> Figure:
    """The trial's candidate against its incumbent on every suite workload."""
    candidate = {r.workload: r.workload.flops / r.candidate.median / 1e12 for r in report.results}
    incumbent = {r.workload: r.workload.flops / r.incumbent.median / 1e12 for r in report.results}
    return tflops_figure({"candidate": candidate, "incumbent": incumbent}, ceilings, mode,
                         title=f"geomean speedup {report.geomean_speedup:.3f}x")


def close(figure: Figure) -> None:
    figure.clear()


def save_png(figure, path: Path | str, dpi: int = 110) -> Path:
    """The figure as a PNG of 256 palette colours: a line plot looks the same at a third of the bytes. (A device call's
    plots are kept in docs/sweeps, and every later call carries that folder within its 64 MiB.)"""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    Image.open(buffer).convert("RGB").quantize(256).save(path, "PNG", optimize=True)
    return Path(path)


def workload_table(rows: list[dict]) -> pd.DataFrame:
    """One row per (variant, workload): the columns are whatever the rows carry."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    return frame.sort_values([c for c in ("lever", "key", "qtype", "M", "K", "T") if c in frame.columns])

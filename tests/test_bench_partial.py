"""campaign.bench keeps what it measured: a bench stopped by a step timeout loses no timed row."""
import pandas as pd

from campaign import bench
from experiments.cpu_demo import LEVER as CPU_DEMO
from kernels.device import open_device


def test_sweep_rows_reach_disk_workload_by_workload(tmp_path):
    partial = tmp_path / "bench.partial.csv"
    on_disk = []  # rows saved when each workload's progress line is printed (before its own save)
    line = bench.Line("cpu_demo", "cpu_demo", extra=tuple({**CPU_DEMO.fixed, **CPU_DEMO.defaults}.items()))
    sweep = bench.Sweep(shapes=[(128, 512)], Ts=[1, 16], types=["q4_K"], lines=[line])
    df = bench.run_sweep(open_device("cpu"), sweep, reps=3, warmup=1, partial_csv=partial,
                         progress=lambda msg: on_disk.append(len(pd.read_csv(partial)) if partial.exists() else 0))
    assert on_disk == [0, 1]
    saved = pd.read_csv(partial)
    assert len(saved) == len(df) == 2 and list(saved["T"]) == [1, 16] and (saved["tflops"] > 0).all()


def test_a_variant_line_is_its_base_line_with_the_options_on_top():
    line = bench.derived_line('x16_l2p3=mmq_wgmma_x16:{"L2PROMO": 3, "SPLITDEC": 1}')
    base = bench.LINES["mmq_wgmma_x16"]
    assert (line.name, line.family, line.lever) == ("x16_l2p3", base.family, base.lever)
    assert dict(line.extra) == {**dict(base.extra), "L2PROMO": 3, "SPLITDEC": 1} and line.f16_input
    champion = {"AREG": 1, "BM": 128, "BN": 256, "XLOAD": 1}  # the f16 line runs it as the dispatcher would
    assert bench.line_config(line, champion) == {**champion, "L2PROMO": 3, "SPLITDEC": 1, "XLOAD": 2, "X16_INPUT": 1}


def test_the_int8_direct_line_runs_its_champion_or_its_defaults_with_a_variant_s_options(tmp_path, monkeypatch):
    """mmq_direct_q8 is a line (lever direct_q8, q4_K): with no champion it runs the family's defaults, and a variant's
    options on top make a configuration the family accepts (the one-launch form here)."""
    from kernels import mmq_direct_q8

    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))  # a root with no champions.json
    line = bench.derived_line('q8gq=mmq_direct_q8:{"GRIDQ": 1, "PDL": 0}')
    assert (line.family, line.lever, line.types) == ("mmq_direct_q8", "direct_q8", mmq_direct_q8.QTYPES)
    params, origin = bench.line_params(line, "q4_K", 16, "sm_90")
    assert (params, origin) == (mmq_direct_q8.DEFAULTS, "heuristic")
    config = bench.line_config(line, params)
    assert config["GRIDQ"] == 1 and mmq_direct_q8.invalid_reason(config, "q4_K") is None


def test_a_variant_that_names_no_line_or_no_json_says_so():
    import pytest

    from campaign.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown line 'mmq_nope'"):
        bench.derived_line('v=mmq_nope:{"A": 1}')
    with pytest.raises(ValueError, match="not JSON"):
        bench.derived_line("v=mmq_wgmma:{A: 1}")
    with pytest.raises(ValueError, match="NAME=LINE:JSON"):
        bench.derived_line("mmq_wgmma")


class TimedOrder:
    """The CPU device, noting the line (by its rows_per_tile) whose bound each timed sample ran."""

    def __init__(self, device, line_of_rows: dict):
        self.device, self.line_of_rows, self.order = device, line_of_rows, []

    def __getattr__(self, attr):
        return getattr(self.device, attr)

    def time_once(self, fn, inner: int = 1) -> float:
        self.order.append(self.line_of_rows[fn.__self__.params["rows_per_tile"]])
        return self.device.time_once(fn, inner)


def test_interleaved_lines_are_timed_round_robin_and_rotated():
    """--interleave: one workload's lines alternate sample by sample, the first one rotating each rep, where
    the default times every sample of one line before the next line starts."""
    base = {**CPU_DEMO.fixed, **CPU_DEMO.defaults}
    lines = [bench.Line(name, "cpu_demo", extra=tuple({**base, "rows_per_tile": rows}.items()))
             for name, rows in (("a", 64), ("b", 128))]
    sweep = bench.Sweep(shapes=[(128, 512)], Ts=[16], types=["q4_K"], lines=lines)
    orders = {}
    for interleave in (False, True):
        device = TimedOrder(open_device("cpu"), {64: "a", 128: "b"})
        df = bench.run_sweep(device, sweep, reps=4, warmup=1, progress=lambda msg: None, interleave=interleave)
        assert list(df["line"]) == ["a", "b"] and (df["tflops"] > 0).all()
        orders[interleave] = "".join(device.order)
    assert orders[False] == "a" * orders[False].count("a") + "b" * orders[False].count("b")
    # warm-up (a b), the calibration (a), then 4 reps with the first line rotating
    assert orders[True] == "ab" + "a" + "ab" "ba" "ab" "ba"


def test_a_line_that_refuses_a_workload_is_not_run_and_the_others_are(tmp_path, monkeypatch):
    """A line whose configuration the family refuses (ValueError: here a cpu_demo with 0 BLAS threads; on the GPU a
    GRIDQ grid larger than the card holds at once) gets no row and no timing at that workload; the other lines are
    timed, interleaved or not, the progress line says why it was not run, and record() writes the reasons to
    bench.skipped.csv (logged with the rest)."""
    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    base = {**CPU_DEMO.fixed, **CPU_DEMO.defaults}
    lines = [bench.Line("good", "cpu_demo", extra=tuple(base.items())),
             bench.Line("refused", "cpu_demo", extra=tuple({**base, "threads": 0}.items()))]
    sweep = bench.Sweep(shapes=[(128, 512)], Ts=[1, 16], types=["q4_K"], lines=lines)
    for interleave in (False, True):
        said = []
        df = bench.run_sweep(open_device("cpu"), sweep, reps=3, warmup=1, progress=said.append, interleave=interleave)
        assert list(df["line"]) == ["good", "good"] and (df["tflops"] > 0).all()
        assert [(s["T"], s["line"]) for s in df.attrs["skipped"]] == [(1, "refused"), (16, "refused")]
        assert all("threads must be >= 1" in s["reason"] for s in df.attrs["skipped"])
        assert "good " in said[0] and "; refused not run: cpu_demo: threads must be >= 1" in said[0]
    out = tmp_path / "out"
    bench.record(bench.add_ratios(df, {}), {}, {"name": "cpu"}, out, f"sqlite:///{tmp_path / 'mlflow.db'}")
    skipped = pd.read_csv(out / "bench.skipped.csv")
    assert list(skipped["line"]) == ["refused", "refused"] and list(pd.read_csv(out / "bench.csv")["line"]) == [
        "good", "good"]

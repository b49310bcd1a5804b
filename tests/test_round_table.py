"""Issue 6's one-run table and bars (campaign.round_table), and the bench's `champion` line that feeds them."""
import json
from pathlib import Path

import pandas as pd
import pytest

from campaign import anchors, bench, champions, round_table
from campaign.errors import CampaignError
from experiments.cpu_demo import LEVER as CPU_DEMO
from kernels import dispatch
from kernels.device import open_device

ROOT = Path(__file__).resolve().parents[1]
H200_CEILINGS = {"bandwidth_gbps": 4240.6}  # perf log run 69's measured copy bandwidth


def bench_table(champion_tflops, dequant_tflops=lambda q, M, K, T: 50.0) -> pd.DataFrame:
    """A bench table over the 96 workloads with a `champion` and a `dequant_cublas` line; median_us from TFLOP/s."""
    rows = []
    for qtype in bench.TYPES:
        for M, K in bench.DENSE_SHAPES:
            for T in bench.DENSE_TS:
                for line, tflops in (("champion", champion_tflops(qtype, M, K, T)),
                                     ("dequant_cublas", dequant_tflops(qtype, M, K, T))):
                    rows.append(dict(type=qtype, M=M, K=K, T=T, line=line, tflops=tflops,
                                     median_us=2.0 * M * K * T / (tflops * 1e12) * 1e6))
    return bench.add_ratios(pd.DataFrame(rows), {})  # the ratio columns every bench.csv has


def verdicts(df, ceilings=H200_CEILINGS, device="NVIDIA H200") -> dict:
    return {b.name: b for b in round_table.judge(df, ceilings, device=device)}


def good(qtype, M, K, T):
    """2x llama.cpp where it has a figure, 60 TFLOP/s elsewhere: every bar met (T=16 anchor: 2 x 48 = 96 TFLOP/s,
    33.0 MB in 19.6 us would miss the stream bar, so that one workload is set to 11 us)."""
    if (qtype, M, K, T) == round_table.STREAM_WORKLOAD:
        return 2.0 * M * K * T / 11e-6 / 1e12
    a = anchors.llama_cpp_tflops(qtype, T) if (M, K) == anchors.LLAMA_CPP_SHAPE else None
    return 2.0 * a if a else 60.0


def test_every_bar_passes_on_a_table_that_meets_them():
    found = verdicts(bench_table(good))
    assert {name: b.verdict for name, b in found.items()} == {
        "llama": "pass", "dequant": "pass", "stream": "pass", "complete": "pass", "device": "pass"}
    assert "96 workloads" in found["complete"].detail
    # the same table from another card is not the issue's: llama.cpp's figures and the bars are the H200's
    elsewhere = verdicts(bench_table(good), device="NVIDIA H100 80GB HBM3")["device"]
    assert elsewhere.verdict == "fail" and "measured on NVIDIA H100 80GB HBM3" in elsewhere.detail
    assert verdicts(bench_table(good), device=None)["device"].verdict == "not judged"


def test_each_bar_fails_on_its_own_miss_and_names_the_worst_workload():
    low_q6 = bench_table(lambda q, M, K, T: good(q, M, K, T) * (0.7 if (q, T) == ("q6_K", 1024) else 1.0))
    llama = verdicts(low_q6)["llama"]
    assert llama.verdict == "fail" and "1.40x (q6_K T=1024)" in llama.detail

    slow_small = bench_table(good, dequant_tflops=lambda q, M, K, T: 61.0 if (q, M, K, T) == ("q8_0", 4096, 4096, 256)
                             else 50.0)
    dequant = verdicts(slow_small)["dequant"]
    assert dequant.verdict == "fail" and "q8_0 4096x4096 T=256" in dequant.detail
    # slower than dequant+cuBLAS above T = 256 is not a miss
    assert verdicts(bench_table(good, dequant_tflops=lambda q, M, K, T: 1e4 if T > 256 else 50.0))["dequant"].verdict == "pass"

    slow_stream = bench_table(lambda q, M, K, T: 2.0 * M * K * T / 13.2e-6 / 1e12 if (q, M, K, T) ==
                              round_table.STREAM_WORKLOAD else good(q, M, K, T))
    stream = verdicts(slow_stream)["stream"]
    assert stream.verdict == "fail" and "13.20 us" in stream.detail and "<= 12.98 us" in stream.detail

    partial = bench_table(good)
    partial = partial[partial["type"] != "q5_K"]
    assert verdicts(partial)["complete"].verdict == "fail"


def test_a_bar_the_table_cannot_decide_is_not_judged_not_passed():
    df = bench_table(good)
    assert verdicts(df, ceilings={})["stream"].verdict == "not judged"  # bench run with --no-ceilings
    no_dequant = bench.add_ratios(df[~((df["line"] == "dequant_cublas") & (df["T"] == 64))], {})
    assert verdicts(no_dequant)["dequant"].verdict == "not judged"
    with pytest.raises(CampaignError, match="no 'champion' line"):
        round_table.judge(df[df["line"] != "champion"], H200_CEILINGS)


def test_run_61s_table_gives_the_figures_the_perf_log_reports():
    """Perf log run 61 (H200): the dispatcher then ran the direct champion for q4_K at T <= 16 and the wgmma
    champions elsewhere; its one-run table read 102 TFLOP/s at the anchor T=16 (18.5 us), lowest ratio to
    llama.cpp 1.51x (q5_K T=16), lowest to dequant+cuBLAS 1.11x (q6_K 4096x4096 T=256)."""
    df = pd.read_csv(ROOT / "docs/sweeps/run61/bench.csv")
    q4_tiny = (df["type"] == "q4_K") & (df["T"] <= 16)
    champion = df[((df["line"] == "mmq_direct") & q4_tiny) | ((df["line"] == "mmq_wgmma") & ~q4_tiny)].assign(line="champion")
    found = verdicts(pd.concat([df, champion]))
    assert found["llama"].verdict == "pass" and "1.51x (q5_K T=16)" in found["llama"].detail
    assert found["dequant"].verdict == "pass" and "1.11x (q6_K 4096x4096 T=256)" in found["dequant"].detail
    assert found["stream"].verdict == "fail" and "18.48 us" in found["stream"].detail
    assert found["complete"].verdict == "pass"
    table = round_table.pivot(pd.concat([df, champion]))
    assert round(table.loc["q4_K 4096x14336", 16]) == 102 and round(table.loc["q4_K 4096x14336", 4096]) == 658


def test_the_command_prints_the_table_and_exits_1_on_a_missed_bar(tmp_path, capsys):
    csv = tmp_path / "bench.csv"
    bench_table(good).to_csv(csv, index=False)
    (tmp_path / "ceilings.json").write_text(json.dumps({"ceilings": H200_CEILINGS, "device": {"name": "NVIDIA H200"}}))
    assert round_table.main([str(csv)]) == 0
    out = capsys.readouterr().out
    assert "| q4_K 4096x14336 |" in out and "**stream: pass**" in out and "one run on NVIDIA H200" in out
    assert round_table.main([str(csv), "--ceilings", str(tmp_path / "none.json")]) == 1
    assert "**stream: not judged**" in capsys.readouterr().out
    with pytest.raises(CampaignError, match="no such bench table"):
        round_table.main([str(tmp_path / "missing.csv")])


def test_the_q8in_line_is_read_beside_the_bars_and_changes_no_verdict(tmp_path, capsys):
    """A `champion_q8in` row at the stream workload (the GEMM on activations quantized before the call) gets the stream
    bar's arithmetic in a section of its own; the stream bar is still the champion line's, and so is the exit code."""
    slow = bench_table(lambda q, M, K, T: 2.0 * M * K * T / 14.05e-6 / 1e12 if (q, M, K, T) ==
                       round_table.STREAM_WORKLOAD else good(q, M, K, T))
    qtype, M, K, T = round_table.STREAM_WORKLOAD
    q8in = pd.DataFrame([dict(type=qtype, M=M, K=K, T=T, line="champion_q8in", median_us=11.2,
                              tflops=2.0 * M * K * T / 11.2e-6 / 1e12)])
    df = pd.concat([slow, q8in], ignore_index=True)
    assert verdicts(df)["stream"].verdict == "fail"  # judged on the champion line as before
    reading = round_table.q8_input_reading(df, H200_CEILINGS)
    assert reading.verdict == "pass" and "in 11.20 us" in reading.detail and "<= 12.98 us" in reading.detail
    assert round_table.q8_input_reading(slow, H200_CEILINGS) is None
    csv = tmp_path / "bench.csv"
    df.to_csv(csv, index=False)
    (tmp_path / "ceilings.json").write_text(json.dumps({"ceilings": H200_CEILINGS, "device": {"name": "NVIDIA H200"}}))
    assert round_table.main([str(csv)]) == 1
    out = capsys.readouterr().out
    assert "**stream: fail**" in out and "14.05 us" in out
    beside = out.split("## Beside the bars")[1]
    assert "stream, activations quantized before the call (champion_q8in): pass" in beside and "11.20 us" in beside


# ---- the bench's champion line: what kernels.mmq runs, per workload

def test_the_champion_line_runs_the_dispatchers_choice_per_workload(tmp_path, monkeypatch):
    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    direct = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8}
    champions.promote("direct", champions.key("q4_K", "sm_90", "tiny"),
                      {"lever": "direct", "family": "mmq_direct", "params": direct, "promoted_at": "2026-12-05T00:00:00"})
    line = bench.LINES["champion"]
    family, params, origin = bench.line_choice(line, "q4_K", 4096, 14336, 16, "sm_90")
    assert (family, origin) == ("mmq_direct", "champion of direct (regime)") and params == direct
    assert (family, params, origin) == (*dispatch.choose("q4_K", "sm_90", 16, M=4096, K=14336)[:2], origin)
    # no champion at T=4096 or for another type: mmq_base's heuristic, as kernels.mmq would run
    assert bench.line_choice(line, "q4_K", 4096, 14336, 4096, "sm_90")[0] == "mmq_base"
    assert bench.line_choice(line, "q6_K", 4096, 14336, 16, "sm_90")[0] == "mmq_base"


def test_the_q8in_line_runs_the_champion_s_q8in_form_and_refuses_where_there_is_none(tmp_path, monkeypatch):
    """champion_q8in: the dispatcher's choice in its form for activations quantized before the call (mmq_direct_q8
    GRIDQ 2 -> Q8IN 1, the count's options off); a choice with no such form (the pass-fed direct_q8, mmq_base) is a
    ValueError naming the line, which the bench records as a workload it did not run."""
    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    q8 = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1,
          "QFIRST": 1, "XPF": 1}
    champions.promote("direct_q8", champions.key("q4_K", "sm_90", "tiny"),
                      {"lever": "direct_q8", "family": "mmq_direct_q8", "params": q8,
                       "promoted_at": "2026-12-05T00:00:00"})
    line = bench.LINES["champion_q8in"]
    family, params, origin = bench.line_choice(line, "q4_K", 4096, 14336, 16, "sm_90")
    assert (family, origin) == ("mmq_direct_q8", "champion of direct_q8 (regime)")
    assert params == {**q8, "QFIRST": 0, "XPF": 0, "POLLACQ": 0, "RELADD": 1, "ZPUB": 1, "ZLATE": 0, "LOCALQ": 0,
                      "SPLITCOUNT": 0, "LLQ": 0, "SELFQ": 0, "PACE": 0, "Q8IN": 1}
    assert params == dispatch.q8_input_params("mmq_direct_q8", q8)
    with pytest.raises(ValueError, match="champion_q8in: mmq_base .* no form for activations quantized"):
        bench.line_choice(line, "q4_K", 4096, 14336, 4096, "sm_90")
    assert dispatch.q8_input_params("mmq_direct_q8", {"RING": 2, "PDL": 2}) is None  # fed by its own pass
    derived = bench.derived_line('q8in_a4=champion_q8in:{"L2AHEAD": 4}')
    assert bench.line_choice(derived, "q4_K", 4096, 14336, 16, "sm_90")[1] == {**params, "L2AHEAD": 4}


def test_a_bench_with_the_champion_line_times_it_and_writes_the_round_table(tmp_path, monkeypatch):
    """On the CPU device, with cpu_demo as the only dispatched lever: the real dispatcher, a real champions.json,
    a real kernel timed; the rows name the family it chose, and record() writes round_table.md and logs it."""
    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    monkeypatch.setattr(dispatch, "LEVERS", ("cpu_demo",))
    params = {**CPU_DEMO.fixed, **CPU_DEMO.defaults, "rows_per_tile": 64}
    champions.promote("cpu_demo", champions.key("q4_K", "cpu", "tiny"),
                      {"lever": "cpu_demo", "family": "cpu_demo", "params": params, "promoted_at": "2026-12-05T00:00:00"})
    device = open_device("cpu")
    sweep = bench.Sweep(shapes=[(128, 512)], Ts=[16], types=["q4_K"],
                        lines=[bench.LINES["champion"], bench.Line("plain", "cpu_demo", extra=tuple(params.items())),
                               bench.LINES["champion_q8in"]])
    swept = bench.run_sweep(device, sweep, reps=3, warmup=1, progress=lambda msg: None)
    # cpu_demo has no form for activations quantized before the call: the q8-input line is not run, and says why
    assert [(s["line"], "no form for activations quantized" in s["reason"]) for s in swept.attrs["skipped"]] == [
        ("champion_q8in", True)]
    df = bench.add_ratios(swept, {})
    assert "champion_q8in" not in set(df["line"])
    row = df[df["line"] == "champion"].iloc[0]
    assert row["family"] == "cpu_demo" and json.loads(row["params"]) == params and row["tflops"] > 0
    assert row["origin"].startswith("champion of cpu_demo")
    bench.record(df, {}, device.info, tmp_path / "out", f"sqlite:///{tmp_path / 'mlflow.db'}")
    text = (tmp_path / "out" / "round_table.md").read_text()
    assert "| q4_K 128x512 |" in text and "**complete: fail**" in text and "**stream: not judged**" in text
    assert "**device: fail** - measured on " in text  # the CPU device is not the card


def test_campaign_round_table_is_the_same_command_with_a_one_line_error(tmp_path, capsys):
    from campaign import cli

    csv = tmp_path / "bench.csv"
    bench_table(good).to_csv(csv, index=False)
    assert cli.main(["round-table", str(csv), "--ceilings", str(tmp_path / "none.json")]) == 1  # stream not judged
    assert "**llama: pass**" in capsys.readouterr().out
    bench_table(good).query("line != 'champion'").to_csv(csv, index=False)
    assert cli.main(["round-table", str(csv)]) == cli.EXIT_USER_ERROR
    assert "error: the bench table has no 'champion' line" in capsys.readouterr().err

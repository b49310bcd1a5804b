"""scripts/call_trace.py off the GPU: the records the TRACE probe writes, unpacked and turned into each call's phases
(synthetic records with known times), and the probe's code: every CTA of both kernels reads %globaltimer at its four
points, the GEMM within its register cap, and TRACE refused where there is no pass."""
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from kernels import mmq_direct_q8, nvcc

spec = importlib.util.spec_from_file_location("call_trace", Path(__file__).resolve().parents[1] / "scripts" / "call_trace.py")
call_trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(call_trace)


def record(kernel, sm, launch, cta, start, waited, ready, end, resumed=0, published=0):
    return [kernel << 32 | sm, launch << 32 | cta, start, waited, ready, end, resumed, published]


def synthetic(with_pass=True):
    """Three calls, 1000 ns apart per phase: the GEMM before ends at e, the pass waits until e + 300 (median of its
    CTAs) and ends at e + 1000, the GEMM waits until e + 1500, is ready at e + 2500, ends at e + 10000."""
    rows = []
    for call in range(3):
        e = 100_000 + 10_000 * call  # the call before's GEMM end
        if with_pass:
            for cta, waited in enumerate([e + 200, e + 300, e + 400]):
                rows.append(record(0, cta, call, cta, e - 5000, waited, waited + 100, e + 1000 - 100 * (2 - cta)))
        for cta, (waited, ready) in enumerate([(e + 1400, e + 2400), (e + 1500, e + 2500), (e + 1600, e + 2600)]):
            rows.append(record(1, 10 + cta, call, cta, e - 2000, waited, ready, e + 10_000 - 50 * cta))
    return np.array(rows, np.uint64)


def test_records_unpack_to_their_fields():
    df = call_trace.unpack(synthetic())
    assert list(df.columns) == call_trace.FIELDS
    assert len(df) == 18 and set(df["kernel"]) == {0, 1} and set(df["launch"]) == {0, 1, 2}
    assert df.loc[(df.kernel == 1) & (df.launch == 2) & (df.cta == 1), "sm"].item() == 11


def test_each_call_s_phases_from_the_median_cta_and_the_last_to_end():
    table = call_trace.phases(call_trace.unpack(synthetic()))
    assert list(table.index) == [1, 2]  # the first call has no GEMM before it in the trace
    expect = {"gemm_before_end->pass_waited": 0.3, "pass_waited->pass_end": 0.7, "pass_end->gemm_waited": 0.5,
              "gemm_waited->gemm_ready": 1.0, "gemm_ready->gemm_end": 7.5, "call": 10.0}
    for name, us in expect.items():
        assert table[name].tolist() == pytest.approx([us, us]), name


def test_a_one_launch_gemm_s_wait_splits_into_resumed_published_and_the_count_seen():
    """GRIDQ 2: no pass; each GEMM CTA resumes after the kernel before (median e + 1000), the CTAs that quantized have
    published their share (median of those only, e + 2500; the others record 0), and the count is seen at e + 4000."""
    rows = []
    for call in range(3):
        e = 100_000 + 15_000 * call  # the call before's GEMM end
        for cta, published in enumerate([e + 2400, e + 2500, e + 2600, 0, 0]):
            rows.append(record(1, cta, call, cta, e - 3000, e + 4000, e + 5500, e + 15_000, e + 1000, published))
    table = call_trace.phases(call_trace.unpack(np.array(rows, np.uint64)))
    expect = {"gemm_before_end->gemm_resumed": 1.0, "gemm_resumed->gemm_published": 1.5,
              "gemm_published->gemm_waited": 1.5, "gemm_waited->gemm_ready": 1.5, "call": 15.0}
    assert set(table.columns) == set(expect) | {"gemm_ready->gemm_end"}
    for name, us in expect.items():
        assert table[name].tolist() == pytest.approx([us, us]), name


def test_a_gemm_alone_has_only_the_gemm_s_phases():
    table = call_trace.phases(call_trace.unpack(synthetic(with_pass=False)))
    assert set(table.columns) == {"gemm_waited->gemm_ready", "gemm_ready->gemm_end", "call"}
    assert table["call"].tolist() == pytest.approx([10.0, 10.0])


def test_the_gemm_s_ctas_by_start_order_show_which_part_of_the_grid_ends_late():
    """Four CTAs a call in two halves by start: the second half waits 0.5 us, is ready 1 us and ends 2 us after the
    first; times from the call before's last GEMM end (its last CTA, e), medians over the calls after the first."""
    rows = []
    for call in range(3):
        e = 100_000 + 20_000 * call
        for cta in range(4):
            late = cta >= 2
            rows.append(record(1, cta, call, cta, e - 1000 + 500 * late, e + 3000 + 500 * late, e + 4000 + 1000 * late,
                               e + 18_000 + 2000 * late - 100 * (cta % 2)))
    parts = call_trace.by_start(call_trace.unpack(np.array(rows, np.uint64)), groups=2)
    assert list(parts.index) == [0, 1] and list(parts.columns) == ["start", "waited", "ready", "end"]
    assert parts.loc[0].tolist() == pytest.approx([-1.0, 3.0, 4.0, 17.95])
    assert parts.loc[1].tolist() == pytest.approx([-0.5, 3.5, 5.0, 19.95])


def test_the_timer_step_is_the_smallest_gap_between_recorded_times():
    assert call_trace.resolution_ns(call_trace.unpack(synthetic())) == 50


def test_a_variant_is_a_name_and_json_parameters_and_bad_ones_say_why():
    assert call_trace.parse_variant('xpf={"XPF": 1}') == ("xpf", {"XPF": 1})
    assert call_trace.parse_variant("champion") == ("champion", {})
    for bad, why in [("x={XPF: 1}", "not JSON"), ("x=[1]", "NAME=JSON object"), ('={"XPF": 1}', "NAME=JSON object")]:
        with pytest.raises(ValueError, match=why):
            call_trace.parse_variant(bad)


def test_the_script_says_no_gpu_in_one_line_where_there_is_none():
    """On a machine without a GPU (CI), the script ends with one line saying so, not a traceback."""
    import subprocess
    import sys

    from kernels import device as device_module

    try:
        device_module.open_device("cuda")
        pytest.skip("a GPU is here")
    except Exception:
        pass
    script = Path(__file__).resolve().parents[1] / "scripts" / "call_trace.py"
    done = subprocess.run([sys.executable, str(script), "--out", "/tmp/call_trace_ci"], capture_output=True, text=True)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "GPU" in done.stderr + done.stdout


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_trace_reads_the_timer_at_four_points_of_every_cta_of_both_kernels(qtype):
    params = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64, "TRACE": 1}
    compiled = mmq_direct_q8.FAMILY.compile_only(params, qtype)
    sass = nvcc.sass_functions(compiled.sass)
    for kernel in ("mmq_direct_q8_gemm", "direct_q8_pass"):
        assert sass[kernel].count("GLOBALTIMER") == 4, kernel
    one_launch = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "TRACE": 1}
    gemm = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(one_launch, qtype).sass)["mmq_direct_q8_gemm"]
    assert gemm.count("GLOBALTIMER") == 6  # and resumed, published
    plain = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only({**params, "TRACE": 0}, qtype).sass)
    assert "GLOBALTIMER" not in plain["mmq_direct_q8_gemm"] and "GLOBALTIMER" not in plain["direct_q8_pass"]
    # the records under their C names, which call_trace.py asks each loaded module for (not a namespace's mangled ones)
    assert {b"dq8_trace", b"dq8_trace_n", b"dq8_trace_started"} <= set(re.findall(rb"\w*dq8_trace\w*", compiled.cubin))
    gemm = compiled.summary(["mmq_direct_q8_gemm"])["kernels"]["mmq_direct_q8_gemm"]
    assert gemm["spill_store_bytes"] == 0 and gemm["registers"] <= 65536 // (32 * 8 * 2)


@pytest.mark.parametrize("params", [{"TRACE": 1, "CLUSTERQ": 2, "PDL": 0}, {"TRACE": 1, "GRIDQ": 1, "PDL": 0},
                                    {"TRACE": 2}])
def test_trace_is_refused_where_there_is_no_pass_to_time(params):
    assert "TRACE=" in mmq_direct_q8.invalid_reason(params, "q4_K")

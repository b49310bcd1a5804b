"""The CPU demo family against the reference, and the parity and perf gates on real variants."""
from __future__ import annotations

import numpy as np
import pytest

from campaign import workloads
from experiments.cpu_demo import LEVER as CPU_DEMO
from gates import parity, perf
from gates.inputs import random_activations, random_problem
from kernels import quant, reference
from kernels.cpu_blocked import FAMILY
from kernels.device import CpuDevice
from kernels.family import Workload
from tests.conftest import BrokenMinFamily, SlowFamily

TYPES = ("q4_K", "q5_K", "q6_K", "q8_0")
FAST = {"rows_per_tile": 512, "tokens_per_tile": 64, "k_superblocks_per_step": 2, "dot": "f32_bmm",
        "acc": "f32", "threads": 1}


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("params", [
    CPU_DEMO.defaults,
    FAST,
    {"rows_per_tile": 64, "tokens_per_tile": 4, "k_superblocks_per_step": 8, "dot": "f64_bmm", "acc": "f64", "threads": 2},
])
def test_cpu_blocked_matches_integer_reference(qtype, params):
    rng = np.random.default_rng(7)
    problem = random_problem(Workload(qtype, 145, 512, 67), rng)  # edges not multiples of any tile
    bound = FAMILY.build(params, qtype, CpuDevice()).prepare(problem)
    bound.poison()
    bound.run()
    out = bound.output()
    ref = reference.gemm_int(problem.w_packed, qtype, quant.quantize_q8_1(problem.x))
    assert np.isfinite(out).all()
    assert np.abs(out - ref).max() / np.abs(ref).max() < 2e-6


def test_cpu_blocked_rejects_bad_params():
    with pytest.raises(ValueError, match="dot must be one of"):
        FAMILY.build({**CPU_DEMO.defaults, "dot": "magic"}, "q4_K", CpuDevice())
    with pytest.raises(ValueError, match="missing parameters"):
        FAMILY.build({"dot": "f32_bmm"}, "q4_K", CpuDevice())


def test_activations_are_never_zero():
    x = random_activations(np.random.default_rng(0), 64, 512)
    assert np.count_nonzero(x == 0) == 0
    spread = np.abs(x).reshape(64, -1, 32).max(axis=2)
    assert spread.max() / spread.min() > 10  # magnitudes are mixed across blocks


@pytest.mark.parametrize("qtype", TYPES)
def test_parity_passes_a_correct_variant_with_numbers(qtype):
    variant = FAMILY.build(CPU_DEMO.defaults, qtype, CpuDevice())
    cases = workloads.get("parity").workloads(TYPES)
    result = parity.run(variant, cases, np.random.default_rng())
    assert result.passed, result.line()
    assert result.numbers["workloads"] == 6  # only this variant's qtype is checked
    assert result.numbers["max_tight_rel"] <= parity.TIGHT_TOL
    assert 0 < result.numbers["max_loose_ratio"] <= 1
    assert set(result.details) == {w.label() for w in cases if w.qtype == qtype}


def test_parity_catches_a_missing_min_term():
    variant = BrokenMinFamily().build(CPU_DEMO.defaults, "q4_K", CpuDevice())
    result = parity.run(variant, workloads.get("parity").workloads(["q4_K"]), np.random.default_rng(), mode="int")
    assert not result.passed
    assert result.numbers["max_tight_rel"] > 1e-2
    assert "tight error" in result.reason and "q4_K" in result.reason


class _SkipsLastRow(type(FAMILY)):
    """The edge-tile bug: the last weight row is never computed, its output column never written."""

    name = "test_skips_row"

    def prepare(self, variant, problem):
        bound = super().prepare(variant, problem)
        layout = bound.layout
        layout["qw"], layout["scale"] = layout["qw"][:, :, :-1], layout["scale"][:, :-1]
        return bound


def test_parity_catches_unwritten_output_through_poison():
    variant = _SkipsLastRow().build(CPU_DEMO.defaults, "q8_0", CpuDevice())
    cases = [Workload("q8_0", 37, 256, 5)]
    result = parity.run(variant, cases, np.random.default_rng(), mode="int")
    assert not result.passed
    assert "5 NaN/Inf" in result.reason  # one column of T=5 rows


def test_parity_bf16_bound_accepts_int_kernel_but_not_broken_one():
    cases = workloads.get("parity").workloads(["q4_K"])
    good = FAMILY.build(CPU_DEMO.defaults, "q4_K", CpuDevice())
    bad = BrokenMinFamily().build(CPU_DEMO.defaults, "q4_K", CpuDevice())
    assert parity.run(good, cases, np.random.default_rng(), mode="bf16").passed
    assert not parity.run(bad, cases, np.random.default_rng(), mode="bf16").passed
    with pytest.raises(ValueError, match="unknown parity mode"):
        parity.run(good, cases, np.random.default_rng(), mode="fp8")


def test_parity_int_k_is_a_mode_of_the_gate_and_tells_the_activation_formats_apart():
    """direct_q8's contract (one activation scale per 256): the gate runs it (a study's trials call parity.run, not
    only the GPU tests' check_one; perf log run 83 lost its study to this mode being refused). A Q8_1 kernel (one
    scale per 32) is within the loose float64 bound of Q8_K's d/2 but not bit-level close to its integer result."""
    cases = workloads.get("parity").workloads(["q4_K"])
    q8_1_kernel = FAMILY.build(CPU_DEMO.defaults, "q4_K", CpuDevice())
    result = parity.run(q8_1_kernel, cases, np.random.default_rng(1), mode="int_k")
    assert result.numbers["mode"] == "int_k" and not result.passed and "tight error" in result.reason
    assert result.numbers["max_loose_ratio"] <= 1


class _MoeByReference:
    """A host MoE 'kernel' (per-expert integer GEMMs); `wrong_slot` routes slot 1 to the next expert."""

    parity = "int"

    def __init__(self, wrong_slot: bool):
        self.wrong_slot = wrong_slot

    def build(self, qtype):
        from kernels.family import Variant

        return Variant("test_moe", {}, qtype, "", {"backend": "cpu"}, impl=self)

    def prepare(self, variant, problem):
        from kernels.moe_reference import moe_gemm_int

        ids = problem.ids.copy()
        if self.wrong_slot:
            ids[:, 1] = (ids[:, 1] + 1) % problem.workload.n_experts
        out = np.empty((problem.workload.T, problem.workload.top_k, problem.workload.M), np.float32)

        class Bound:
            def run(self):
                out[:] = moe_gemm_int(problem.w_packed, variant.qtype, quant.quantize_q8_1(problem.x), ids)

            def output(self):
                return out.copy()

            def poison(self):
                out.fill(np.nan)

            def release(self):
                pass
        return Bound()


@pytest.mark.parametrize("qtype", ["q4_K", "q6_K"])
def test_parity_checks_moe_pairs_against_their_own_expert(qtype):
    cases = workloads.get("parity_moe_real").workloads([qtype])
    good = parity.run(_MoeByReference(False).build(qtype), cases, np.random.default_rng(), mode="int")
    assert good.passed, good.line()
    assert good.numbers["max_tight_rel"] == 0  # the reference itself: exact
    bad = parity.run(_MoeByReference(True).build(qtype), cases, np.random.default_rng(), mode="int")
    assert not bad.passed and "tight error" in bad.reason


def _bound(params, w, problem):
    return FAMILY.build(params, w.qtype, CpuDevice()).prepare(problem)


def test_time_variant_reports_median_p90_and_samples():
    w = Workload("q4_K", 128, 512, 16)
    problem = random_problem(w, np.random.default_rng(0))
    timing = perf.time_variant(CpuDevice(), _bound(FAST, w, problem), reps=20, warmup=2)
    assert len(timing.samples) == 20
    assert 0 < min(timing.samples) <= timing.median <= timing.p90 <= max(timing.samples)


def test_perf_config_requires_twenty_reps():
    with pytest.raises(ValueError, match=">= 20 reps"):
        perf.PerfConfig(reps=5)


def _perf_report(candidate_params, incumbent_params, family=FAMILY, config=perf.PerfConfig()):
    device = CpuDevice()
    cases = workloads.get("cpu_tiny").workloads(["q4_K"])
    rng = np.random.default_rng(0)
    problems = {w.label(): random_problem(w, rng) for w in cases}
    candidate = {"q4_K": family.build(candidate_params, "q4_K", device)}
    incumbent = FAMILY.build(incumbent_params, "q4_K", device)
    return perf.run(device, candidate, {w.label(): incumbent for w in cases}, problems, config, margin=0.05)


def test_perf_gate_finds_no_win_against_itself():
    report = _perf_report(CPU_DEMO.defaults, CPU_DEMO.defaults)
    assert not report.gate.passed
    assert "no (type, T regime) group beats the incumbent" in report.gate.reason
    for r in report.results:  # A/A and A/B of one configuration: both ratios near 1
        assert len(r.candidate.samples) == len(r.incumbent.samples) == len(r.incumbent_again.samples) == 20
        assert 0.5 < r.speedup < 2.0


def test_perf_gate_declares_a_real_win_above_noise_and_margin():
    report = _perf_report(FAST, CPU_DEMO.defaults)
    assert report.gate.passed, report.gate.line()
    group = report.wins[0]
    assert group.key == "q4_K/tiny"
    assert group.speedup > 1 + group.noise_floor + group.margin
    assert report.gate.numbers["wins"] == "q4_K/tiny"


def test_perf_abandons_a_hopeless_candidate():
    config = perf.PerfConfig(abandon_slower_than=3.0)
    with pytest.raises(perf.Abandoned, match="slower than the incumbent"):
        _perf_report(CPU_DEMO.defaults, CPU_DEMO.defaults, family=SlowFamily(), config=config)


def test_judge_uses_the_largest_noise_floor_of_a_group():
    def timing(ms):
        return perf.Timing(ms, ms, (ms,) * 20)

    w1, w2 = Workload("q4_K", 8, 256, 9), Workload("q4_K", 8, 256, 16)  # (one group: the tiny regime)
    results = [perf.WorkloadPerf(w1, timing(1.0), timing(1.3), timing(1.3)),    # 1.3x, no noise
               perf.WorkloadPerf(w2, timing(1.0), timing(1.3), timing(1.69))]   # 1.3x, 30% noise
    groups, gate = perf.judge(results, margin=0.05)
    assert groups[0].noise_floor == pytest.approx(0.3)
    assert not gate.passed  # 1.3x does not clear 1 + 0.3 + 0.05
    groups, gate = perf.judge(results[:1], margin=0.05)
    assert gate.passed

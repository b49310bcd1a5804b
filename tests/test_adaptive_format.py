"""The adaptive_format composite off the GPU: which kernel each T gets, the union resource
record the static gate judges, the parity gate's per-part checks (with CPU stand-in parts,
so the gate's own code runs), per-shape suites and promotion records, the round plan."""
import json
from pathlib import Path

import numpy as np
import pytest

import experiments
from campaign import workloads
from campaign.errors import PromotionRefused
from gates import parity, perf, promote, static
from kernels import cpu_blocked, mmq_adaptive, mmq_base, mmq_f16
from kernels.family import Variant, Workload
from kernels.mmq_adaptive import CROSSOVER, FAMILY, AdaptiveImpl

LEVER = experiments.get("adaptive_format")
TILE = {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1}


@pytest.mark.parametrize("cross", [2, 16, 33, 128, 1024])
def test_int8_parts_cover_every_T_below_the_crossover_with_the_heuristic(cross):
    parts = FAMILY.parts({**TILE, CROSSOVER: cross})
    assert parts[0] == ("f16", "mmq_f16", mmq_f16.FAMILY.complete(TILE))
    covered = []
    for name, family, params in parts[1:]:
        assert family == "mmq_base"
        first, last = (int(x) for x in name.removeprefix("int8_T").split("-"))
        covered += range(first, last + 1)
        assert all(params == mmq_base.full_params(mmq_base.heuristic_params(T)) for T in (first, last))
    assert covered == list(range(1, cross))  # contiguous, no T twice
    assert len({json.dumps(p, sort_keys=True) for _, _, p in parts[1:]}) == len(parts) - 1  # one part per config


def test_route_sends_T_at_or_above_the_crossover_to_f16_and_declines_below():
    params = {**TILE, "SPLITK": 0, CROSSOVER: 128}
    assert FAMILY.route(params, 127) is None
    assert FAMILY.route(params, 128) == ("mmq_f16", {**TILE, "SPLITK": 0})
    assert FAMILY.route(params, 4096) == ("mmq_f16", {**TILE, "SPLITK": 0})


def test_invalid_names_the_crossover_or_the_part():
    info = {"smem_per_block_optin": 227 * 1024}
    assert "CROSSOVER_T=1" in FAMILY.invalid({**TILE, CROSSOVER: 1}, "q4_K", info)
    assert FAMILY.invalid({**TILE, CROSSOVER: 128}, "q8_0", info) is None
    assert FAMILY.invalid({**TILE, "STAGES": 4, "BM": 128, "BN": 256, "WARPS_M": 4, "WARPS_N": 2, CROSSOVER: 64},
                          "q8_0", info).startswith("f16 part: shared memory")
    # on a 99 KB device (sm_89) the int8 heuristic for 32 < T <= 64 (3 stages, BM=128) does not fit
    # q8_0: a crossover that needs it is refused, one below it is not
    small, tile = {"smem_per_block_optin": 99 * 1024}, {**TILE, "BN": 64, "WARPS_N": 2}
    assert FAMILY.invalid({**tile, CROSSOVER: 32}, "q8_0", small) is None
    assert FAMILY.invalid({**tile, CROSSOVER: 64}, "q8_0", small).startswith("int8_T33-63 part: shared memory")
    assert LEVER.check({**LEVER.fixed, **LEVER.defaults}, info) is None


def _record(regs, ops, spills=0, smem=1000):
    return {"backend": "cuda", "arch": "sm_90", "sass_arch": "sm_90", "registers": regs, "barriers": 1,
            "stack_bytes": 0, "spill_store_bytes": spills, "spill_load_bytes": spills, "smem_static_bytes": 0,
            "smem_bytes_total": smem, "local_mem_ops": 0, "sass_ops": ops}


def test_union_resources_is_the_worst_part_and_every_claim_is_checked_on_its_part():
    int8 = _record(140, {"IMMA": 200, "FFMA": 9}, smem=200_000)
    f16 = _record(168, {"HMMA": 32, "FFMA": 1})
    union = mmq_adaptive.union_resources({"f16": f16, "int8_T1-32": int8})
    assert union["registers"] == 168 and union["smem_bytes_total"] == 200_000
    assert union["sass_ops"] == {"IMMA": 200, "HMMA": 32, "FFMA": 10}
    assert static.check_resources(union, LEVER, {"arch": "sm_90"}).passed
    # an f16 part alone does not hold the IMMA claim; a spill in any part fails the composite
    assert "IMMA" in static.check_resources(mmq_adaptive.union_resources({"f16": f16}), LEVER).reason
    spilled = mmq_adaptive.union_resources({"f16": f16, "int8_T1-32": _record(255, {"IMMA": 1}, spills=8)})
    assert "spilled" in static.check_resources(spilled, LEVER, {"arch": "sm_90"}).reason


# ---- the parity gate on a composite: CPU variants stand in for the CUDA parts, so the gate's
# ---- own code (each part on every workload, then the composite as dispatched) runs here

CPU_PARAMS = {"rows_per_tile": 64, "tokens_per_tile": 4, "k_superblocks_per_step": 1, "dot": "i32_einsum",
              "acc": "f64", "threads": 1}


class _Scaled:
    """A CPU part whose output is off by a factor: a wrong kernel the gate must catch."""

    def __init__(self, factor):
        self.factor = factor

    def prepare(self, variant, problem):
        bound = cpu_blocked.FAMILY.prepare(variant, problem)
        output = bound.output
        bound.output = lambda: output() * self.factor
        return bound


def _composite(cross: int, wrong: str | None = None) -> Variant:
    parts = {name: cpu_blocked.FAMILY.build(CPU_PARAMS, "q4_K", None) for name in ("f16", "int8_T1-15", "int8_T16-127")}
    if wrong:
        parts[wrong].impl = _Scaled(1.01)
    impl = AdaptiveImpl(cross, {n: p for n, p in parts.items()
                                if n == "f16" or int(n.split("-")[0].removeprefix("int8_T")) < cross})
    return Variant("mmq_adaptive", {CROSSOVER: cross}, "q4_K", "", {}, impl)


def _parity_workloads():
    return workloads.get("parity").workloads(["q4_K"])


def test_parity_checks_every_part_on_every_workload_and_the_composite_as_dispatched():
    variant = _composite(16)
    assert variant.impl.part_for(5) is variant.impl.parts["int8_T1-15"]
    assert variant.impl.part_for(67) is variant.impl.parts["f16"]
    result = parity.run(variant, _parity_workloads(), np.random.default_rng(0))
    assert result.passed, result.line()
    assert result.numbers["f16.workloads"] == result.numbers["int8_T1-15.workloads"] == 6
    assert result.numbers["dispatched.workloads"] == 6
    assert {k.split(" ")[0] for k in result.details} == {"f16", "int8_T1-15", "dispatched"}


def test_parity_fails_a_wrong_part_even_when_the_crossover_sends_no_parity_workload_to_it():
    # crossover 128: T = 1, 5, 67 all take the int8 side; the broken f16 part is still judged
    result = parity.run(_composite(128, wrong="f16"), _parity_workloads(), np.random.default_rng(1))
    assert not result.passed
    assert result.reason.startswith("f16: ") and "dispatched" not in result.reason
    # a broken int8 part that the crossover uses: caught on its own and as dispatched
    result = parity.run(_composite(16, wrong="int8_T1-15"), _parity_workloads(), np.random.default_rng(2))
    assert not result.passed and "int8_T1-15: " in result.reason and "dispatched: " in result.reason


def test_the_parity_suite_has_T_on_both_sides_of_small_crossovers():
    Ts = {w.T for w in _parity_workloads()}
    assert any(T < 16 for T in Ts) and any(T >= 64 for T in Ts)


# ---- per-shape suites, lever and promotion records

def test_each_crossover_suite_is_one_dense_shape_over_T_16_to_2048():
    names = [f"dense_xover_{M}x{K}" for M, K in workloads.DENSE_SHAPES]
    assert LEVER.suite in names and LEVER.per_shape
    for name in names:
        cases = workloads.get(name).cases
        assert len({(c.M, c.K) for c in cases}) == 1
        assert [c.T for c in cases] == [16, 32, 64, 128, 256, 512, 1024, 2048]
    crossovers = LEVER.space[CROSSOVER]
    assert min(crossovers) >= 2 and max(crossovers) <= 2048  # each splits the suite's T range


def _report(shapes_by_T: dict, speedup: float):
    t = perf.Timing.of([1.0] * 20)
    fast = perf.Timing.of([1.0 / speedup] * 20)
    results = [perf.WorkloadPerf(Workload("q4_K", M, K, T), fast, t, t) for T, (M, K) in shapes_by_T]
    groups, gate = perf.judge(results, 0.02)
    return perf.PerfReport(results, groups, gate)


def test_per_shape_promotion_keys_records_by_shape_and_refuses_a_mixed_group():
    report = _report([(256, (4096, 14336)), (1024, (4096, 14336)), (16, (4096, 14336))], 1.5)
    records = promote.champion_records(report, "sm_90", {"lever": "adaptive_format"}, per_shape=True)
    assert set(records) == {"q4_K/sm_90/large/4096x14336", "q4_K/sm_90/tiny/4096x14336"}
    assert records["q4_K/sm_90/large/4096x14336"]["shape"] == [4096, 14336]
    assert set(promote.champion_records(report, "sm_90", {})) == {"q4_K/sm_90/large", "q4_K/sm_90/tiny"}
    # the composite's own kernel runs only at T >= 128: the tiny group (T=16) won by the int8
    # stand-in gets no record (promotion.promote passes the family's route as `claims`)
    own = promote.champion_records(report, "sm_90", {}, per_shape=True,
                                   claims=lambda w: FAMILY.route({CROSSOVER: 128}, w.T) is not None)
    assert set(own) == {"q4_K/sm_90/large/4096x14336"}
    mixed = _report([(256, (4096, 14336)), (1024, (4096, 4096))], 1.5)
    with pytest.raises(PromotionRefused, match="2 shapes in group q4_K/large"):
        promote.champion_records(mixed, "sm_90", {}, per_shape=True)


def test_promoting_the_composite_writes_shape_keyed_champions_where_its_own_kernel_runs(tmp_path):
    """campaign.promotion.promote on a judged adaptive_format trial (gates given, not timed: the
    CPU is shared and noisy): schema-2 file, records keyed by shape, none for the regime that
    ran only the int8 stand-in, and the dispatcher takes the f16 part from the crossover on."""
    from types import SimpleNamespace

    from campaign import promotion
    from campaign.refs import TrialRef
    from campaign.trial import Evaluation
    from gates.result import GateResult
    from kernels import dispatch

    params = {**TILE, "SPLITK": 0, CROSSOVER: 256}
    report = _report([(16, (4096, 14336)), (512, (4096, 14336)), (1024, (4096, 14336))], 1.5)
    gates = [GateResult("static", True), GateResult("parity", True), report.gate]
    ref = TrialRef("adaptive_format", params, "dense_xover_4096x14336", ("q4_K",), "xover", 3, None, None, None)
    judged = promotion.Judgement(ref, "sm_90", Evaluation(params, gates=gates, perf=report), promote.verdict(gates))
    records = promotion.promote(judged, SimpleNamespace(root=tmp_path))
    assert set(records) == {"q4_K/sm_90/large/4096x14336"}  # tiny (T=16 < 256): the int8 stand-in's win
    data = json.loads((tmp_path / "champions.json").read_text())
    assert data["schema"] == 2 and data["levers"]["adaptive_format"]["q4_K/sm_90/large/4096x14336"]["params"] == params
    path = tmp_path / "champions.json"
    assert dispatch.choose("q4_K", "sm_90", 512, path, 4096, 14336)[:2] == ("mmq_f16", {**TILE, "SPLITK": 0})
    assert dispatch.choose("q4_K", "sm_90", 200, path, 4096, 14336)[0] == "mmq_base"
    # a trial whose every win lies below its crossover is refused, nothing written
    low = _report([(16, (4096, 4096))], 1.5)
    gates = [GateResult("static", True), GateResult("parity", True), low.gate]
    judged = promotion.Judgement(ref, "sm_90", Evaluation(params, gates=gates, perf=low), promote.verdict(gates))
    with pytest.raises(PromotionRefused, match="won only where its own kernel does not run"):
        promotion.promote(judged, SimpleNamespace(root=tmp_path))
    assert json.loads(path.read_text()) == data


def test_round_plan_studies_the_crossover_per_shape_with_valid_candidates():
    plan = json.loads((Path(__file__).resolve().parents[1] / "scripts" / "round_plan.json").read_text())
    studies = [s for s in plan["studies"] if s["lever"] == "adaptive_format"]
    assert sorted(s["suite"] for s in studies) == sorted(f"dense_xover_{M}x{K}" for M, K in workloads.DENSE_SHAPES)
    info = {"smem_per_block_optin": 227 * 1024}
    for s in studies:
        assert s["lever"] == "adaptive_format" and s["types"] == "q4_K"
        crossovers = {c[CROSSOVER] for c in s["enqueue"]}
        assert {64, 128, 256} <= crossovers  # around where run 2-5 saw f16 overtake int8
        for candidate in s["enqueue"]:
            assert all(v in LEVER.space[k] for k, v in candidate.items()), candidate
            assert LEVER.check({**LEVER.fixed, **candidate}, info) is None


def test_precompile_compiles_a_composite_as_its_parts():
    """scripts/precompile.py (the device call's cubins) expands mmq_adaptive into the mmq_f16 and
    mmq_base configurations its build loads: the same sources, so the cache hits on the GPU."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("precompile", Path(__file__).resolve().parents[1]
                                                  / "scripts" / "precompile.py")
    pre = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pre)
    params = {**TILE, "SPLITK": 0, CROSSOVER: 64}
    expanded = pre.expand_composites({"mmq_adaptive": [params], "mmq_base": [{"BM": 64}]})
    assert set(expanded) == {"mmq_f16", "mmq_base"}
    assert expanded["mmq_f16"] == [mmq_f16.FAMILY.complete(TILE)]
    assert expanded["mmq_base"] == [*(p for _, _, p in mmq_adaptive.int8_ranges(64)), {"BM": 64}]
    assert FAMILY.source(params, "q4_K").count(mmq_f16.FAMILY.source(expanded["mmq_f16"][0], "q4_K")) == 1

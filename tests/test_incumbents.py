"""Before any promotion a candidate is measured against what the dispatcher would run instead:
the incumbent family's per-T heuristic (run 16 measured persistent_queue at T=16 against
mmq_base's 64-token defaults and called a 1.5x win)."""
from campaign import champions, incumbents, workloads
from experiments.cpu_demo import LEVER as CPU_DEMO
from experiments.persistent_queue import LEVER as PERSISTENT
from kernels import mmq_base


def test_without_champions_the_incumbent_is_the_per_t_heuristic(tmp_path):
    cases = workloads.get("dense_span").workloads(["q4_K", "q6_K"])
    specs = incumbents.resolve(PERSISTENT, cases, "sm_90", tmp_path / "champions.json")
    for w in cases:
        spec = specs[w.label()]
        assert (spec.lever, spec.family, spec.origin) == ("mmq_base", "mmq_base", "heuristic")
        assert spec.params == {"SPLITK": 0, **mmq_base.heuristic_params(w.T, w.qtype)}
    assert specs[cases[0].label()].params["BN"] == 16  # T=16: the 16-token tile, not the defaults' 64
    large_q6 = next(w for w in cases if w.T == 1024 and w.qtype == "q6_K")
    assert specs[large_q6.label()].params["RESCALE"] == 1  # per type: q6_K's large tile folds its rescale


def anchor_workloads(*Ts: int) -> list:
    """q4_K workloads of the llama.cpp anchor shape (4096x14336), one per T."""
    return workloads.Suite("x", workloads.grid([(4096, 14336)], list(Ts)), "parity").workloads(["q4_K"])


def test_a_champion_replaces_the_heuristic_and_a_family_without_one_uses_defaults(tmp_path):
    path = tmp_path / "champions.json"
    champ = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    champions.promote("mmq_base", champions.key("q4_K", "sm_90", "tiny"),
                      {"family": "mmq_base", "params": champ, "mlflow_run_id": "r"}, path)
    w16, w64 = anchor_workloads(16, 64)
    specs = incumbents.resolve(PERSISTENT, [w16, w64], "sm_90", path)
    assert (specs[w16.label()].origin, specs[w16.label()].params) == ("champion", champ)
    assert specs[w64.label()].origin == "heuristic"
    cpu = incumbents.resolve(CPU_DEMO, [w16], "cpu", path)[w16.label()]  # cpu_demo's family has no heuristic
    assert (cpu.origin, cpu.params) == ("defaults", {**CPU_DEMO.fixed, **CPU_DEMO.defaults})


def test_a_lever_with_its_own_champion_must_beat_it(tmp_path):
    """Re-studying a regime: the reigning champion of the same lever defends its key, so a slower
    challenger that still beats the incumbent lever cannot replace it."""
    path = tmp_path / "champions.json"
    base = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    mine = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 3, "CTAS_PER_SM": 2}
    tiny = champions.key("q4_K", "sm_90", "tiny")
    champions.promote("mmq_base", tiny, {"family": "mmq_base", "params": base, "mlflow_run_id": "b"}, path)
    champions.promote("persistent_queue", tiny, {"family": "mmq_persistent", "params": mine, "mlflow_run_id": "p"},
                      path)
    w16, w64 = anchor_workloads(16, 64)
    specs = incumbents.resolve(PERSISTENT, [w16, w64], "sm_90", path)
    assert (specs[w16.label()].lever, specs[w16.label()].family, specs[w16.label()].origin) == \
        ("persistent_queue", "mmq_persistent", "defending")
    assert (specs[w16.label()].params, specs[w16.label()].mlflow_run_id) == (mine, "p")
    assert (specs[w64.label()].lever, specs[w64.label()].origin) == ("mmq_base", "heuristic")  # no champion at T=64


def test_the_large_champion_defends_the_huge_regime_until_it_has_its_own(tmp_path):
    """A study of T > 1024 (the huge regime, split from large) is measured against the lever's
    large champion, not against the heuristic, until a huge champion exists."""
    path = tmp_path / "champions.json"
    large = {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2}
    champions.promote("persistent_queue", champions.key("q4_K", "sm_90", "large"),
                      {"family": "mmq_persistent", "params": large, "mlflow_run_id": "l"}, path)
    w1024, w4096 = anchor_workloads(1024, 4096)
    specs = incumbents.resolve(PERSISTENT, [w1024, w4096], "sm_90", path)
    assert all((specs[w.label()].origin, specs[w.label()].params) == ("defending", large) for w in (w1024, w4096))
    huge = {**large, "STAGES": 1}
    champions.promote("persistent_queue", champions.key("q4_K", "sm_90", "huge"),
                      {"family": "mmq_persistent", "params": huge, "mlflow_run_id": "h"}, path)
    specs = incumbents.resolve(PERSISTENT, [w1024, w4096], "sm_90", path)
    assert specs[w1024.label()].params == large and specs[w4096.label()].params == huge


def test_an_incumbent_lever_without_the_type_hands_over_to_its_own_incumbent(tmp_path):
    """direct_q8 claims q5_K, its incumbent `direct` is q4_K only: at q5_K the candidate is measured against what the
    dispatcher runs there, the `wgmma` champion; at q4_K against the `direct` champion as before."""
    from experiments.direct_q8 import LEVER as DIRECT_Q8

    path = tmp_path / "champions.json"
    wgmma_tiny = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2}
    direct_tiny = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8}
    for qtype in ("q4_K", "q5_K"):
        champions.promote("wgmma", champions.key(qtype, "sm_90", "tiny"),
                          {"family": "mmq_wgmma", "params": wgmma_tiny, "mlflow_run_id": "w"}, path)
    champions.promote("direct", champions.key("q4_K", "sm_90", "tiny"),
                      {"family": "mmq_direct", "params": direct_tiny, "mlflow_run_id": "d"}, path)
    cases = workloads.Suite("x", workloads.grid([(4096, 14336)], [16]), "parity").workloads(["q4_K", "q5_K"])
    specs = incumbents.resolve(DIRECT_Q8, cases, "sm_90", path)
    by_type = {w.qtype: specs[w.label()] for w in cases}
    assert (by_type["q4_K"].lever, by_type["q4_K"].family, by_type["q4_K"].params) == ("direct", "mmq_direct", direct_tiny)
    assert (by_type["q5_K"].lever, by_type["q5_K"].family, by_type["q5_K"].params) == ("wgmma", "mmq_wgmma", wgmma_tiny)
    assert incumbents.incumbent_lever(DIRECT_Q8, "q5_K").name == "wgmma"
    assert incumbents.incumbent_lever(CPU_DEMO, "q4_K").name == "cpu_demo"  # its own incumbent
    assert incumbents.incumbent_lever(CPU_DEMO, "iq2_xs").name == "cpu_demo"  # a type no lever claims: no endless chain


def test_a_per_card_study_is_measured_against_its_cards_champion_first(tmp_path):
    """--per-card: the incumbent is the card's own champion where it has one, else the arch's (what the dispatcher
    runs on that card); without a card only the arch's records count."""
    path = tmp_path / "champions.json"
    arch_wide = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    h200 = {**arch_wide, "STAGES": 3}
    champions.promote("mmq_base", champions.key("q4_K", "sm_90", "tiny"),
                      {"family": "mmq_base", "params": arch_wide, "mlflow_run_id": "a"}, path)
    champions.promote("mmq_base", champions.key("q4_K", "sm_90", "tiny", card="h200"),
                      {"family": "mmq_base", "params": h200, "mlflow_run_id": "h"}, path)
    (w16,) = anchor_workloads(16)
    assert incumbents.resolve(PERSISTENT, [w16], "sm_90", path, "h200")[w16.label()].params == h200
    assert incumbents.resolve(PERSISTENT, [w16], "sm_90", path, "h100-80gb-hbm3")[w16.label()].params == arch_wide
    assert incumbents.resolve(PERSISTENT, [w16], "sm_90", path)[w16.label()].params == arch_wide

"""scripts/round_plan.json is checked here, not on the GPU: every enqueued candidate must be in
its lever's space and valid for every type its study runs (run 15 lost a study to a candidate
outside the space), and the plan must expand into device_run.sh steps and a precompile list."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import experiments
from campaign import workloads
from campaign.session import complete_candidate
from gates.static import DEFAULT_SMEM_OPTIN, SMEM_OPTIN_BY_ARCH
from kernels import families

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import precompile  # noqa: E402
import round_plan  # noqa: E402

STUDIES = json.loads(round_plan.PLAN.read_text())["studies"]
H200 = {"arch": "sm_90", "smem_per_block_optin": SMEM_OPTIN_BY_ARCH.get("sm_90", DEFAULT_SMEM_OPTIN)}


@pytest.mark.parametrize("study", STUDIES, ids=lambda s: f"{s['lever']}-{s['suite']}")
def test_every_candidate_is_in_the_space_and_valid_for_every_type(study):
    lever = experiments.get(study["lever"])
    workloads.get(study["suite"])
    family = families.get(lever.family)
    for params in study["enqueue"]:
        full = complete_candidate(lever, params)  # what the study runs: the defaults fill the rest
        for qtype in study["types"].split(","):
            assert qtype in lever.types
            assert family.invalid({**lever.fixed, **full}, qtype, H200) is None, (qtype, full)


@pytest.mark.parametrize("lever", experiments.all_levers(), ids=lambda lev: lev.name)
def test_every_lever_has_a_default_for_each_searched_parameter(lever):
    """An enqueued candidate that leaves a parameter out runs it at its default."""
    assert complete_candidate(lever, {}) == {name: lever.defaults[name] for name in lever.space}


def test_the_plan_expands_into_steps_and_a_precompile_list(tmp_path):
    steps = round_plan.steps([])
    assert steps.count("study") == len(STUDIES) and steps.count("--promote") == len(STUDIES)
    assert steps[steps.index("bench"):][:2] == ["bench", "--types"]
    levers_only = round_plan.steps(["levers"])
    assert "bench" not in levers_only and levers_only.count("study") == sum(s["group"] == "levers" for s in STUDIES)
    extra = round_plan.precompile_extra([])
    assert sum(len(v) for v in extra.values()) == sum(len(s["enqueue"]) for s in STUDIES)
    assert all(p["AREG"] == 1 for p in extra["mmq_wgmma"])  # the lever's fixed params are compiled in
    with pytest.raises(SystemExit, match="unknown group"):
        round_plan.steps(["nope"])


def test_precompile_adds_every_champion_as_each_bench_line_of_its_lever_runs_it(tmp_path):
    from campaign import champions

    path = tmp_path / "champions.json"
    tile = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1}
    champions.promote("wgmma", champions.key("q4_K", "sm_90", "large"), {"family": "mmq_wgmma", "params": tile}, path)
    found = precompile.champion_configs(path)
    x16 = {**tile, "X16_INPUT": 1, "XLOAD": 2}
    # mmq_wgmma, mmq_wgmma_x16 and mmq_wgmma_16 (f16 in, bf16 out, staged epilogue)
    assert found == {"mmq_wgmma": [tile, x16, {**x16, "BF16_OUTPUT": 1, "EPI": 1}]}



def test_precompile_lists_what_the_bench_champion_line_runs_per_type(tmp_path, monkeypatch):
    """--bench-lines champion: the dispatcher's choice at each dense shape and T, each configuration for its own type
    only (a q4_K champion is not compiled for q6_K)."""
    from campaign import champions
    from kernels import mmq_base

    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    direct = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8}
    champions.promote("direct", champions.key("q4_K", "sm_90", "tiny"), {"family": "mmq_direct", "params": direct})
    found = precompile.bench_jobs(["champion"], ["q4_K", "q6_K"], "sm_90")
    assert ("mmq_direct", direct, "q4_K") in found and ("mmq_direct", direct, "q6_K") not in found
    assert ("mmq_base", mmq_base.heuristic_params(16, "q6_K"), "q6_K") in found  # no q6_K champion at T=16
    assert {qtype for family, _, qtype in found if family == "mmq_base"} == {"q4_K", "q6_K"}
    with pytest.raises(SystemExit, match="unknown line 'nope'"):
        precompile.bench_jobs(["nope"], ["q4_K"], "sm_90")


def test_precompile_lists_a_bench_variant_and_a_trace_variant_as_they_are_built(tmp_path, monkeypatch):
    """--variant 'sc=mmq_direct_q8:{...}': the line's choice (the promoted tiny champion at T=16) with the JSON on top,
    per type; --trace '{...}': call_trace.py's build, the regime's champion with the JSON and TRACE 1 on top (the
    defaults where a type has no champion)."""
    from campaign import champions

    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path))
    tiny = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1}
    champions.promote("direct_q8", champions.key("q4_K", "sm_90", "tiny"), {"family": "mmq_direct_q8", "params": tiny})
    found = precompile.bench_jobs([], ["q4_K"], "sm_90", variants=['sc=mmq_direct_q8:{"SPLITCOUNT": 1}'])
    assert ("mmq_direct_q8", {**tiny, "SPLITCOUNT": 1}, "q4_K") in found
    assert all(params["SPLITCOUNT"] == 1 for _, params, _ in found)
    traced = precompile.trace_jobs([{}, {"EARLYSLOTS": 1}], ["q4_K", "q5_K"], "sm_90", 16)
    assert traced == [("mmq_direct_q8", {**tiny, "TRACE": 1}, "q4_K"), ("mmq_direct_q8", {"TRACE": 1}, "q5_K"),
                      ("mmq_direct_q8", {**tiny, "EARLYSLOTS": 1, "TRACE": 1}, "q4_K"),
                      ("mmq_direct_q8", {"EARLYSLOTS": 1, "TRACE": 1}, "q5_K")]


def test_a_per_card_entry_asks_its_study_to_promote_as_the_cards_own(tmp_path, monkeypatch):
    """An entry with "per_card": true adds --per-card to its study step (campaign run: judged against, and promoted as,
    the card's own champions); the others do not."""
    base = {k: v for k, v in STUDIES[-1].items() if k != "per_card"}  # (the plan's last entry may be per-card itself)
    plan = {"studies": [{**base, "group": "mine", "per_card": True}, {**base, "group": "other"}],
            "bench": []}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    monkeypatch.setattr(round_plan, "PLAN", path)
    assert round_plan.steps(["mine"]).count("--per-card") == 1
    assert "--per-card" not in round_plan.steps(["other"])
    assert campaign_cli_accepts(round_plan.steps(["mine"]))


def test_a_per_shape_entry_asks_its_study_to_promote_as_its_shapes_own(tmp_path, monkeypatch):
    """"per_shape": true adds --per-shape to the study step (campaign run: promoted as the suite's one shape's)."""
    base = {k: v for k, v in STUDIES[-1].items() if k not in ("per_card", "per_shape")}
    plan = {"studies": [{**base, "group": "mine", "suite": "dense_tiny", "per_shape": True}, {**base, "group": "other"}],
            "bench": []}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    monkeypatch.setattr(round_plan, "PLAN", path)
    mine = round_plan.steps(["mine"])
    assert mine.count("--per-shape") == 1 and "--per-shape" not in round_plan.steps(["other"])
    from campaign import cli

    args = cli.build_parser().parse_args(["run", *mine[1:]])
    assert args.per_shape and args.promote and args.suite == "dense_tiny"


def campaign_cli_accepts(steps: list[str]) -> bool:
    """`campaign run` parses the study step's arguments as device_run.sh passes them."""
    from campaign import cli

    args = cli.build_parser().parse_args(["run", *steps[1:]])
    return args.per_card and args.promote


def test_precompile_lists_just_the_named_gpu_test_modules_builds():
    """--tests: a call that runs some GPU test modules carries what they build and nothing of the others'."""
    import importlib

    found = precompile.test_configs(["test_gpu_mmq", "test_gpu_moe"])
    mmq = importlib.import_module("tests.test_gpu_mmq").PRECOMPILE
    moe = importlib.import_module("tests.test_gpu_moe").PRECOMPILE
    assert found == {**mmq, **moe} and "mmq_wgmma" not in found and "mmq_direct_q8" not in found
    assert set(precompile.test_configs()) >= {"mmq_wgmma", "mmq_direct_q8", "mmq_base", "moe_matvec"}
    with pytest.raises(SystemExit, match="no GPU test module test_gpu_nope"):
        precompile.test_configs(["test_gpu_nope"])

"""The dispatcher's choice (no GPU needed): champion of the most specialised lever for the
(qtype, arch, T regime), else mmq_base's heuristic."""
import sys

import numpy as np
import pytest

from campaign import champions
from kernels import dispatch, mmq_base, quant


def _promote(path, lever, family, qtype, regime, params):
    champions.promote(lever, champions.key(qtype, "sm_90", regime),
                      {"lever": lever, "family": family, "params": params, "promoted_at": "2026-12-02T00:00:00"},
                      path=path)


def test_falls_back_to_mmq_base_heuristic_without_champions(tmp_path):
    family, params, origin = dispatch.choose("q4_K", "sm_90", 16, tmp_path / "champions.json")
    assert (family, params) == ("mmq_base", mmq_base.heuristic_params(16))
    assert "no champion" in origin


def test_picks_the_champion_of_the_regime_and_prefers_specialised_levers(tmp_path):
    path = tmp_path / "champions.json"
    small = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 3}
    large_int8 = {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2}
    large_f16 = {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1}
    _promote(path, "mmq_base", "mmq_base", "q4_K", "small", small)
    _promote(path, "mmq_base", "mmq_base", "q4_K", "large", large_int8)
    _promote(path, "adaptive_format", "mmq_f16", "q4_K", "large", large_f16)
    assert dispatch.choose("q4_K", "sm_90", 64, path)[:2] == ("mmq_base", small)
    assert dispatch.choose("q4_K", "sm_90", 4096, path)[:2] == ("mmq_f16", large_f16)
    # another type or arch has no champion: heuristic
    assert dispatch.choose("q6_K", "sm_90", 4096, path)[0] == "mmq_base"
    assert dispatch.choose("q4_K", "sm_120", 4096, path)[2].endswith("(no champion)")
    # tiny and medium regimes: nothing promoted there
    assert dispatch.choose("q4_K", "sm_90", 16, path)[1] == mmq_base.heuristic_params(16)
    assert dispatch.choose("q4_K", "sm_90", 128, path)[1] == mmq_base.heuristic_params(128)
    # fused quantization promoted at small T: it takes over from the plain int8 champion there
    _promote(path, "fused_quant", "mmq_fused_quant", "q4_K", "small", {**small, "XBF16": 0})
    assert dispatch.choose("q4_K", "sm_90", 64, path)[:2] == ("mmq_fused_quant", {**small, "XBF16": 0})


# ---- adaptive_format: a crossover T per shape (champions keyed by shape, schema 2)

F16 = {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "SPLITK": 0}


def _promote_shape(path, shape, regime, crossover, lever="adaptive_format", family="mmq_adaptive", params=F16):
    champions.promote(lever, champions.key("q4_K", "sm_90", regime, shape),
                      {"lever": lever, "family": family, "params": {**params, "CROSSOVER_T": crossover},
                       "promoted_at": "2026-12-04T00:00:00"}, path=path)


def test_adaptive_champion_switches_format_at_its_crossover_not_at_the_regime_boundary(tmp_path):
    path = tmp_path / "champions.json"
    _promote_shape(path, (4096, 14336), "large", 256)  # large regime: T > 128
    _promote_shape(path, (4096, 14336), "medium", 256)
    int8 = {"BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 3}
    _promote(path, "mmq_base", "mmq_base", "q4_K", "large", int8)

    def choose(T, M=4096, K=14336):
        return dispatch.choose("q4_K", "sm_90", T, path, M=M, K=K)

    # at and above the crossover: the f16 part with the champion's tiles, CROSSOVER_T stripped
    assert choose(256)[:2] == ("mmq_f16", F16)
    assert choose(4096)[:2] == ("mmq_f16", F16)
    assert choose(4096)[2] == "champion of adaptive_format (shape 4096x14336)"
    # below it, inside the same regime: the composite declines and the int8 champion runs
    assert choose(200)[:2] == ("mmq_base", int8)
    assert choose(255)[:2] == ("mmq_base", int8)
    # medium regime below the crossover, no int8 champion there: the mmq_base heuristic
    assert choose(128) == ("mmq_base", mmq_base.heuristic_params(128), "mmq_base heuristic (no champion)")


def test_each_shape_uses_its_own_crossover_and_an_unknown_shape_the_nearest(tmp_path):
    path = tmp_path / "champions.json"
    _promote_shape(path, (4096, 14336), "large", 512)
    _promote_shape(path, (4096, 4096), "large", 256)
    _promote_shape(path, (14336, 4096), "large", 1024)
    at_300 = {shape: dispatch.choose("q4_K", "sm_90", 300, path, *shape)[0]
              for shape in [(4096, 14336), (4096, 4096), (14336, 4096)]}
    assert at_300 == {(4096, 14336): "mmq_base", (4096, 4096): "mmq_f16", (14336, 4096): "mmq_base"}
    assert dispatch.choose("q4_K", "sm_90", 600, path, 4096, 14336)[0] == "mmq_f16"
    assert dispatch.choose("q4_K", "sm_90", 600, path, 14336, 4096)[0] == "mmq_base"
    # 4096x11008 (not studied) is nearest to 4096x14336: its crossover 512 applies, and the origin says so
    family, _, origin = dispatch.choose("q4_K", "sm_90", 600, path, 4096, 11008)
    assert (family, origin) == ("mmq_f16", "champion of adaptive_format (nearest shape 4096x14336)")
    assert dispatch.choose("q4_K", "sm_90", 300, path, 4096, 11008)[0] == "mmq_base"
    # without the weight's shape, per-shape champions are not used
    assert dispatch.choose("q4_K", "sm_90", 4096, path)[2] == "mmq_base heuristic (no champion)"
    # another type, arch or regime: no shape-keyed champion there
    assert dispatch.choose("q6_K", "sm_90", 4096, path, 4096, 14336)[0] == "mmq_base"
    assert dispatch.choose("q4_K", "sm_90", 100, path, 4096, 14336)[0] == "mmq_base"


def test_a_more_specialised_lever_still_wins_over_the_adaptive_champion(tmp_path):
    path = tmp_path / "champions.json"
    _promote_shape(path, (4096, 14336), "large", 128)
    wg = {"BM": 128, "BN": 256, "STAGES": 4}
    _promote(path, "wgmma", "mmq_wgmma", "q4_K", "large", wg)
    assert dispatch.choose("q4_K", "sm_90", 1024, path, 4096, 14336)[:2] == ("mmq_wgmma", wg)


def test_schema_1_files_still_load_and_shape_keys_upgrade_the_file_to_schema_2(tmp_path):
    import json
    from pathlib import Path

    import pytest

    from campaign.errors import CampaignError

    path = tmp_path / "champions.json"
    # the repo's own records without the shape-keyed ones: a file as a schema-1 engine wrote it
    repo = json.loads((Path(__file__).resolve().parents[1] / "champions.json").read_text())
    levers = {lever: {k: r for k, r in entries.items() if k.count("/") == 2} for lever, entries in repo["levers"].items()}
    path.write_text(json.dumps({"schema": 1, "levers": levers}))
    assert dispatch.choose("q4_K", "sm_90", 1024, path, 4096, 14336)[0] == "mmq_wgmma"
    _promote(path, "mmq_base", "mmq_base", "q4_K", "tiny", mmq_base.heuristic_params(16))
    assert json.loads(path.read_text())["schema"] == 1  # no shape key: still readable by schema-1 engines
    _promote_shape(path, (4096, 4096), "large", 256)
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and data["levers"]["wgmma"]  # nothing else changed or lost
    assert dispatch.choose("q4_K", "sm_90", 1024, path, 4096, 4096)[0] == "mmq_wgmma"
    path.write_text(json.dumps({**data, "schema": champions.SCHEMA + 1}))
    with pytest.raises(CampaignError, match=r"schema 3, newer than this engine's 2: update the engine"):
        dispatch.choose("q4_K", "sm_90", 1024, path, 4096, 4096)


def test_a_record_runs_the_family_it_was_promoted_with(tmp_path):
    """adaptive_format's run-15 records are plain mmq_f16 tiles (the lever became a composite
    later): they run as mmq_f16 over their whole regime, not through the composite's crossover."""
    path = tmp_path / "champions.json"
    f16 = {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1}
    _promote(path, "adaptive_format", "mmq_f16", "q4_K", "medium", f16)
    assert dispatch.choose("q4_K", "sm_90", 100, path)[:2] == ("mmq_f16", f16)  # below the composite's default 128



@pytest.mark.parametrize("lever, family, parent, child, params, change, child_ts, parent_t", [
    # T > 1024 (huge) was split from large (run 27: RASTER pays there alone)
    ("wgmma", "mmq_wgmma", "large", "huge", {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1},
     {"RASTER": 1}, (2048, 4096), 1024),
    # T <= 8 (decode) was split from tiny (runs 93-94: the pass as a dependent launch won at T = 1, lost at T = 16)
    ("direct_q8", "mmq_direct_q8", "tiny", "decode", {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8, "PDL": 1,
                                                      "SBMAJOR": 1}, {"PDL": 2}, (1, 8), 9),
])
def test_a_split_regime_runs_the_champion_it_came_from_until_it_has_its_own(tmp_path, lever, family, parent, child,
                                                                           params, change, child_ts, parent_t):
    """A lever's champion of the regime a new one was split from serves the new one's T, until a study promotes a
    champion there, which then serves that regime's T only."""
    path = tmp_path / "champions.json"
    _promote(path, lever, family, "q4_K", parent, params)
    for t in child_ts:
        assert dispatch.choose("q4_K", "sm_90", t, path)[:2] == (family, params)
    _promote(path, lever, family, "q4_K", child, {**params, **change})
    for t in child_ts:
        assert dispatch.choose("q4_K", "sm_90", t, path)[:2] == (family, {**params, **change})
    assert dispatch.choose("q4_K", "sm_90", parent_t, path)[:2] == (family, params)


def test_a_per_shape_record_at_large_serves_its_shape_in_the_huge_regime(tmp_path):
    shaped = tmp_path / "shaped.json"
    _promote_shape(shaped, (4096, 14336), "large", 128)
    assert dispatch.choose("q4_K", "sm_90", 4096, shaped, 4096, 14336)[2] == \
        "champion of adaptive_format (shape 4096x14336)"


def test_the_direct_champion_serves_its_type_at_few_tokens_and_nowhere_else(tmp_path):
    """lever `direct` (q4_K only) comes first in LEVERS: promoted at tiny, it runs q4_K up to T=16;
    other types and larger T keep their wgmma champions."""
    path = tmp_path / "champions.json"
    tiny = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "PDL": 2}
    small = {**tiny, "BN": 64, "RAW": 3}
    direct = {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "RING": 3, "SPLITK": 0}
    for qtype in ("q4_K", "q5_K"):
        _promote(path, "wgmma", "mmq_wgmma", qtype, "tiny", tiny)
        _promote(path, "wgmma", "mmq_wgmma", qtype, "small", small)
    assert dispatch.choose("q4_K", "sm_90", 16, path)[:2] == ("mmq_wgmma", tiny)
    _promote(path, "direct", "mmq_direct", "q4_K", "tiny", direct)
    for T in (1, 8, 16):
        assert dispatch.choose("q4_K", "sm_90", T, path)[:2] == ("mmq_direct", direct)
    assert dispatch.choose("q4_K", "sm_90", 17, path)[:2] == ("mmq_wgmma", small)
    assert dispatch.choose("q5_K", "sm_90", 16, path)[:2] == ("mmq_wgmma", tiny)


def test_a_promoted_direct_q8_champion_comes_before_the_direct_one(tmp_path):
    """direct_q8's incumbent is direct, so where it is promoted it beat direct's champion: first in LEVERS, it runs q4_K at
    tiny; larger T keeps the wgmma champion; it reads float32 (no f16-input form: the dispatcher widens x)."""
    path = tmp_path / "champions.json"
    small = {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "PDL": 2}
    _promote(path, "wgmma", "mmq_wgmma", "q4_K", "small", small)
    _promote(path, "direct", "mmq_direct", "q4_K", "tiny", {"WARPS": 8, "MIN_BLOCKS": 2, "XSHARED": 8})
    q8 = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 4, "XSHARED": 8, "PDL": 1, "SPLITK": 0}
    _promote(path, "direct_q8", "mmq_direct_q8", "q4_K", "tiny", q8)
    for T in (1, 16):
        assert dispatch.choose("q4_K", "sm_90", T, path) == ("mmq_direct_q8", q8, "champion of direct_q8 (regime)")
    assert dispatch.choose("q4_K", "sm_90", 17, path)[:2] == ("mmq_wgmma", small)
    assert dispatch.f16_input_params("mmq_direct_q8", q8) is None


def test_f16_activations_run_the_f16_paths_as_they_are_and_widen_for_int8():
    """float16 input: the f16 paths get X16_INPUT=1 (no conversion pass); the wgmma kernel reads the rows
    by TMA (XLOAD 2) where its configuration reads pass-tiled chunks (1) or f32 rows (3); the int8 paths
    read float32 (None: the dispatcher widens x)."""
    wgmma = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "RASTER": 1}
    assert dispatch.f16_input_params("mmq_wgmma", wgmma) == {**wgmma, "X16_INPUT": 1, "XLOAD": 2}
    assert dispatch.f16_input_params("mmq_wgmma", {**wgmma, "BN": 16, "XLOAD": 3})["XLOAD"] == 2
    assert dispatch.f16_input_params("mmq_wgmma", {**wgmma, "XLOAD": 2}) == {**wgmma, "XLOAD": 2, "X16_INPUT": 1}
    direct = {"WARPS": 8, "MIN_BLOCKS": 2, "XSHARED": 8}
    assert dispatch.f16_input_params("mmq_direct", direct) == {**direct, "X16_INPUT": 1}
    assert dispatch.f16_input_params("mmq_f16", {"BM": 64}) == {"BM": 64, "X16_INPUT": 1}
    assert dispatch.f16_input_params("mmq_base", mmq_base.heuristic_params(64)) is None


def test_every_promoted_f16_path_champion_runs_on_f16_activations():
    """Each champion in the repo's champions.json whose kernel takes f16 rows is valid with the f16-input
    parameters the dispatcher gives it (on the H200's limits), so a 16-bit model's call never fails."""
    import json
    from pathlib import Path

    from gates.static import DEFAULT_SMEM_OPTIN
    from kernels import families

    levers = json.loads((Path(__file__).resolve().parents[1] / "champions.json").read_text())["levers"]
    checked = 0
    for lever, records in levers.items():
        for key, record in records.items():
            params = dispatch.f16_input_params(record["family"], record["params"])
            if params is None:
                continue
            qtype = key.split("/")[0]
            why = families.get(record["family"]).invalid(params, qtype, {"smem_per_block_optin": DEFAULT_SMEM_OPTIN})
            assert why is None, f"{lever} {key}: {why}"
            checked += 1
    assert checked >= 20  # the wgmma champions of every type and regime, the direct one, the f16 tiles


def test_every_promoted_champion_with_a_q8_input_form_is_valid_in_it():
    """Each champion in the repo's champions.json that kernels.mmq runs on QuantizedActivations (its q8_input form:
    the T=16 champions of each type, and the H100's records of the gate/up shape) is a valid configuration in that
    form, so a call with activations quantized before it never fails where a float32 call runs."""
    import json
    from pathlib import Path

    from gates.static import DEFAULT_SMEM_OPTIN
    from kernels import families

    levers = json.loads((Path(__file__).resolve().parents[1] / "champions.json").read_text())["levers"]
    checked = []
    for lever, records in levers.items():
        for key, record in records.items():
            params = dispatch.q8_input_params(record["family"], record["params"])
            if params is None:
                continue
            why = families.get(record["family"]).invalid(params, key.split("/")[0],
                                                         {"smem_per_block_optin": DEFAULT_SMEM_OPTIN})
            assert why is None, f"{lever} {key}: {why}"
            assert params["Q8IN"] == 1 and params["WARPS"] == record["params"]["WARPS"]
            checked.append(key)
    assert {"q4_K/sm_90/tiny", "q5_K/sm_90/tiny", "q4_K/sm_90:h100-80gb-hbm3/tiny/14336x4096"} <= set(checked)


def test_kernels_mmq_is_the_dispatcher():
    import kernels

    assert kernels.mmq is dispatch.mmq
    with pytest.raises(AttributeError, match="no attribute 'mmqq'"):
        kernels.mmqq  # noqa: B018


def test_kernels_mmq_without_a_gpu_says_so(monkeypatch):
    """On a CPU-only machine the user's call stops with the one-line NoGPUError, not a traceback from PyCUDA."""
    import builtins

    import kernels
    from campaign.errors import NoGPUError

    real_import = builtins.__import__

    def no_pycuda(name, *args, **kwargs):
        if name.startswith("pycuda"):
            raise ImportError("No module named 'pycuda'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pycuda)
    monkeypatch.delitem(sys.modules, "kernels.cuda_runtime", raising=False)
    monkeypatch.delattr(kernels, "cuda_runtime", raising=False)
    w = quant.get("q4_K").quantize( np.random.default_rng(0).standard_normal((32, 256)).astype(np.float32))
    with pytest.raises(NoGPUError, match="GPU"):
        kernels.mmq(w, "q4_K", np.ones((4, 256), np.float32))


def test_a_cards_own_champion_comes_first_on_that_card_and_nowhere_else(tmp_path):
    """One arch is several cards (H100 and H200: sm_90). A record promoted with --per-card (key q4_K/sm_90:h200/tiny)
    is what that card runs; another card, or a caller that names none, runs the arch's record; and at an inherited
    regime the card's own record at the finer regime is not skipped for the arch's."""
    path = tmp_path / "champions.json"
    arch_wide = {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 3}
    h200 = {**arch_wide, "STAGES": 2}
    _promote(path, "mmq_base", "mmq_base", "q4_K", "tiny", arch_wide)
    champions.promote("mmq_base", champions.key("q4_K", "sm_90", "tiny", card="h200"),
                      {"lever": "mmq_base", "family": "mmq_base", "params": h200}, path=path)
    h200_card = champions.card_of({"name": "NVIDIA H200"})
    h100_card = champions.card_of({"name": "NVIDIA H100 80GB HBM3"})
    assert (h200_card, h100_card) == ("h200", "h100-80gb-hbm3")
    assert dispatch.choose("q4_K", "sm_90", 16, path, card=h200_card)[1] == h200
    assert dispatch.choose("q4_K", "sm_90", 16, path, card=h100_card)[1] == arch_wide
    assert dispatch.choose("q4_K", "sm_90", 16, path)[1] == arch_wide
    assert champions.lookup("mmq_base", "q4_K", "sm_90", 16, path, card="h200") == h200
    # a card's shape-keyed record too, before the arch's
    _promote_shape(path, (4096, 14336), "large", 256)
    champions.promote("adaptive_format", champions.key("q4_K", "sm_90", "large", (4096, 14336), "h200"),
                      {"lever": "adaptive_format", "family": "mmq_adaptive", "params": {**F16, "CROSSOVER_T": 512}},
                      path=path)
    key, record = champions.lookup_shaped("adaptive_format", "q4_K", "sm_90", 1024, 4096, 14336, path, card="h200")
    assert key == "q4_K/sm_90:h200/large/4096x14336" and record["params"]["CROSSOVER_T"] == 512
    assert champions.key_shape(key) == (4096, 14336)
    assert champions.lookup_shaped("adaptive_format", "q4_K", "sm_90", 1024, 4096, 14336, path)[1]["params"][
        "CROSSOVER_T"] == 256


def test_a_per_regime_levers_shape_record_serves_its_shape_and_the_regime_record_the_others(tmp_path):
    """direct_q8 (tuned per regime) with one shape's own record (campaign promote --per-shape): that shape runs it,
    every other shape the regime's champion; with no regime record, the nearest shape's stands in."""
    path = tmp_path / "champions.json"
    regime_params, skewed = {"WARPS": 8, "RING": 2}, {"WARPS": 8, "RING": 2, "SKEW": 1}
    champions.promote("direct_q8", champions.key("q4_K", "sm_90", "tiny", (4096, 14336)),
                      {"lever": "direct_q8", "family": "mmq_direct_q8", "params": skewed}, path=path)
    assert dispatch.choose("q4_K", "sm_90", 16, path, 14336, 4096) == (
        "mmq_direct_q8", skewed, "champion of direct_q8 (nearest shape 4096x14336)")
    _promote(path, "direct_q8", "mmq_direct_q8", "q4_K", "tiny", regime_params)
    assert dispatch.choose("q4_K", "sm_90", 16, path, 4096, 14336) == (
        "mmq_direct_q8", skewed, "champion of direct_q8 (shape 4096x14336)")
    for other in [(14336, 4096), (4096, 4096), (4096, 11008)]:
        assert dispatch.choose("q4_K", "sm_90", 16, path, *other) == (
            "mmq_direct_q8", regime_params, "champion of direct_q8 (regime)")
    assert dispatch.choose("q4_K", "sm_90", 16, path)[1] == regime_params  # no shape given: the regime's

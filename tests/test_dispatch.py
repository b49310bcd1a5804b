"""The dispatcher's choice (no GPU needed): champion of the most specialised lever for the
(qtype, arch, T regime), else mmq_base's heuristic."""
from campaign import champions
from kernels import dispatch, mmq_base


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

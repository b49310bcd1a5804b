"""CI (nvcc, no GPU) for mmq_base's inner-loop options (mmq_core.cuh): RESCALE=1 fuses the weight
scale into the int -> float conversion (one FFMA with an exact bias per output element, then one
FFMA by d_x), Q6SUB=1 forms q6_K's q6 - 32 without the emulated saturating subtract.

Their defaults (0) are the launcher's and the header's; the new values compile without local
memory on the tiles the sweep grid's winners would be promoted from, keep IMMA, and cut the
instructions the options claim to cut, counted in the main loop's SASS (nvcc.sass_main_loop)."""
from __future__ import annotations

import pytest

import experiments
from kernels import mmq_base, nvcc
from tests.cuda_cases import TYPES, needs_nvcc

ARCH = "sm_90"
DEFAULT_TILE = {}  # mmq_base.DEFAULTS: 128 x 64, 4 x 2 warps, 2 stages
LARGE_TILE = {"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 1}  # 16 warps, 128 registers


def loop_counts(params: dict, qtype: str):
    compiled = mmq_base.FAMILY.compile_only(params, qtype, ARCH)
    unpack, compute = nvcc.sass_main_loop(compiled.sass, mmq_base.FAMILY.kernel_name)
    return compiled.summary([mmq_base.FAMILY.kernel_name]), unpack, compute


def test_defaults_are_the_old_code_and_the_lever_searches_the_options():
    assert mmq_base.DEFAULTS["RESCALE"] == mmq_base.DEFAULTS["Q6SUB"] == 0
    assert {"RESCALE", "Q6SUB"} <= set(mmq_base.COMPILE_KEYS)
    lever = experiments.get("mmq_base")
    assert lever.space["RESCALE"] == [0, 1] and lever.space["Q6SUB"] == [0, 1]
    assert lever.defaults["RESCALE"] == lever.defaults["Q6SUB"] == 0
    assert mmq_base.invalid_reason({"RESCALE": 2}, "q4_K", {}).startswith("RESCALE=2")
    assert mmq_base.invalid_reason({"Q6SUB": -1}, "q6_K", {}).startswith("Q6SUB=-1")


@needs_nvcc
@pytest.mark.parametrize("qtype", TYPES)
def test_header_defaults_equal_the_launchers(qtype):
    """The source rendered without the two macros compiles to the same SASS as RESCALE=0, Q6SUB=0:
    the header's #ifndef defaults are the launcher's, so an old build and a new default build agree."""
    family = mmq_base.FAMILY
    defines = family.defines(family.complete({}), qtype)
    bare = {k: v for k, v in defines.items() if k not in ("RESCALE", "Q6SUB")}
    with_macros = nvcc.compile_cubin(nvcc.render_source(family.cu_file, defines), arch=ARCH)
    without = nvcc.compile_cubin(nvcc.render_source(family.cu_file, bare), arch=ARCH)
    assert with_macros.sass == without.sass


@needs_nvcc
@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("tile", ["default", "large"])
def test_rescale_compiles_clean_and_cuts_the_rescale(qtype, tile):
    params = DEFAULT_TILE if tile == "default" else LARGE_TILE
    old_s, _, old = loop_counts({**params, "RESCALE": 0}, qtype)
    new_s, _, new = loop_counts({**params, "RESCALE": 1}, qtype)
    assert new_s["spill_store_bytes"] == new_s["spill_load_bytes"] == new_s["local_mem_ops"] == 0
    assert new["IMMA"] == old["IMMA"] > 0
    # per output element and 32-k group: the FADD conversion and the d_x * sw FMUL become one FFMA
    # (q6_K: its high half's FADD and FMUL); what FMULs stay form the biases, once per m16 tile
    elements = 4 * (old["IMMA"] // 2 if qtype == "q6_K" else old["IMMA"])  # outputs x groups per lane
    assert old["FADD"] - new["FADD"] == elements
    assert new["FMUL"] <= elements // 8
    assert new["FFMA"] - old["FFMA"] == elements
    # net: one instruction per element less, minus the biases' FMULs and scheduling noise
    assert sum(new.values()) < sum(old.values()) - (3 * elements) // 4


@needs_nvcc
@pytest.mark.parametrize("rescale", [0, 1])
def test_q6sub_drops_the_emulated_saturating_subtract(rescale):
    params = {**DEFAULT_TILE, "RESCALE": rescale}
    _, old_unpack, _ = loop_counts({**params, "Q6SUB": 0}, "q6_K")
    new_s, new_unpack, new_compute = loop_counts({**params, "Q6SUB": 1}, "q6_K")
    assert new_s["spill_store_bytes"] == new_s["spill_load_bytes"] == new_s["local_mem_ops"] == 0
    assert new_compute["IMMA"] > 0
    assert sum(new_unpack.values()) < sum(old_unpack.values())
    assert new_unpack["PRMT"] < old_unpack["PRMT"]  # __vsubss4's byte-sign PRMTs are gone


@needs_nvcc
@pytest.mark.parametrize("qtype", ["q5_K", "q8_0"])
def test_q6sub_changes_no_other_type(qtype):
    assert (mmq_base.FAMILY.compile_only({"Q6SUB": 1}, qtype, ARCH).sass
            == mmq_base.FAMILY.compile_only({"Q6SUB": 0}, qtype, ARCH).sass)

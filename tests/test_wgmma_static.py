"""The wgmma family off the GPU: its generated wrappers are current, it builds for sm_90a
(HGMMA in SASS, no spills) at every configuration the GPU tests and heuristics use, and it
refuses what it cannot build with a reason."""
import re

import pytest

from kernels import mmq_wgmma, nvcc
from kernels import wgmma_header as gen_wgmma_header
from tests.test_gpu_wgmma import CONFIGS


def test_generated_header_is_current():
    assert gen_wgmma_header.HEADER.read_text() == gen_wgmma_header.render(), \
        "kernels/cuda/wgmma_ops.cuh is stale: run python3 -m kernels.wgmma_header"
    assert tuple(gen_wgmma_header.WIDTHS) == mmq_wgmma.WGMMA_WIDTHS


@pytest.mark.parametrize("params", [*CONFIGS, *(mmq_wgmma.heuristic_params(t) for t in (16, 64, 256, 4096))])
def test_builds_for_sm_90a_with_hgmma(params):
    compiled = mmq_wgmma.FAMILY.compile_only(params, "q4_K", "sm_90")
    assert compiled.arch == "sm_90a"
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    bn = mmq_wgmma.full_params(params)["BN"]
    # 4 wgmma k16 steps per 64-k pipeline step, all at the configured N
    assert len(re.findall(rf"HGMMA\.64x{bn}x16\.F32", compiled.sass)) >= 4
    assert "warning" not in compiled.ptxas_log.lower()  # e.g. ptxas serializing the wgmmas


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_warp_specialized_kernel_moves_registers_and_waits_on_mbarriers(qtype):
    """WS=1 with two consumer warpgroups: setmaxnreg in SASS (ptxas honoured it, no C7508),
    mbarrier arrive/try-wait, no spills in the producer's smaller register budget."""
    compiled = mmq_wgmma.FAMILY.compile_only({"WS": 1, "BM": 128, "BN": 256, "STAGES": 3, "DEQ": 1}, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    for op in ("USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC", "SYNCS.ARRIVE", "SYNCS.PHASECHK", "HGMMA.64x256x16"):
        assert op in compiled.sass, op
    assert "warning" not in compiled.ptxas_log.lower()
    assert mmq_wgmma.threads({"WS": 1, "BM": 128}) == 384 and mmq_wgmma.threads({"BM": 128}) == 256


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_register_a_kernel_feeds_hgmma_from_registers(qtype):
    """AREG=1: the A operand of every HGMMA is a register (R..), not a shared-memory descriptor;
    the producer's copies arrive on mbarriers (LDGSTSBAR ... ARVCNT); no spills, no serialization."""
    params = mmq_wgmma.heuristic_params(4096, qtype)  # the large-T tile the bench runs for this type
    compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    hgmma = re.findall(rf"HGMMA\.64x{params['BN']}x16\.F32 R\d+, (\S+),", compiled.sass)
    assert len(hgmma) >= 4 and all(a.startswith("R") for a in hgmma), hgmma
    for op in ("USETMAXREG.TRY_ALLOC", "LDGSTSBAR", "SYNCS.PHASECHK"):
        assert op in compiled.sass, op
    assert "warning" not in compiled.ptxas_log.lower()
    assert mmq_wgmma.threads({"AREG": 1, "BM": 128}) == 384


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
@pytest.mark.parametrize("xload, op", [(1, "UBLKCP"), (2, "UTMALDG")])
def test_activations_arrive_by_the_copy_engine(qtype, xload, op):
    """XLOAD=1 (bulk copy of pass-tiled chunks) and 2 (TMA tensor map): the activation chunks come
    by the copy engine, so the load/store unit carries only the raw weight copies (LDGSTS with
    mbarrier arrival); the register budget holds at the widest tile."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": xload}
    compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    assert op in compiled.sass and "LDGSTSBAR" in compiled.sass
    assert "warning" not in compiled.ptxas_log.lower()


def test_invalid_configurations_say_why():
    info = {"smem_per_block_optin": 227 * 1024}
    assert "wgmma N" in mmq_wgmma.invalid_reason({"BN": 100}, "q4_K", info)
    assert "STAGES" in mmq_wgmma.invalid_reason({"STAGES": 2}, "q4_K", info)
    assert "warpgroups" in mmq_wgmma.invalid_reason({"BM": 256}, "q4_K", info)
    assert "shared memory" in mmq_wgmma.invalid_reason({"BM": 128, "BN": 256, "STAGES": 4}, "q8_0", info)
    assert mmq_wgmma.invalid_reason({"BM": 128, "BN": 256, "STAGES": 4}, "q4_K", info) is None
    assert "ABUF" in mmq_wgmma.invalid_reason({"ABUF": 3}, "q4_K", info)  # 3 chunks only for WS=1
    assert mmq_wgmma.invalid_reason({"ABUF": 3, "WS": 1}, "q4_K", info) is None
    assert "WS" in mmq_wgmma.invalid_reason({"WS": 2}, "q4_K", info)
    assert "RAW" in mmq_wgmma.invalid_reason({"AREG": 1, "RAW": 7}, "q4_K", info)
    assert "XLOAD" in mmq_wgmma.invalid_reason({"AREG": 1, "XLOAD": 4}, "q4_K", info)
    assert "X16_INPUT" in mmq_wgmma.invalid_reason({"AREG": 1, "XLOAD": 1, "X16_INPUT": 1}, "q4_K", info)
    assert mmq_wgmma.invalid_reason({"AREG": 1, "XLOAD": 2, "X16_INPUT": 1}, "q4_K", info) is None
    assert "BN=32 > 16" in mmq_wgmma.invalid_reason({"AREG": 1, "XLOAD": 3, "BN": 32}, "q4_K", info)
    assert mmq_wgmma.full_params({"XLOAD": 1})["XLOAD"] == 0  # only the register-A kernel tiles
    assert "STAGES" in mmq_wgmma.invalid_reason({"AREG": 1, "STAGES": 1}, "q4_K", info)
    assert mmq_wgmma.invalid_reason({"AREG": 1, "STAGES": 2}, "q4_K", info) is None
    with pytest.raises(ValueError, match="Hopper"):
        mmq_wgmma.FAMILY.target_arch("sm_80")


def test_smem_formula_counts_every_buffer():
    # 1 KB alignment slack + activation ring + 2 f16 weight chunks + 2 raw super-block slots
    p = {"BM": 128, "BN": 64, "STAGES": 3}
    assert mmq_wgmma.smem_bytes(p, "q4_K") == 1024 + 3 * 64 * 128 + 2 * 128 * 128 + 2 * 128 * 144
    assert mmq_wgmma.smem_bytes(p, "q6_K") == 1024 + 3 * 64 * 128 + 2 * 128 * 128 + 2 * 128 * 224
    # WS: ABUF chunks and 128 B of mbarriers
    ws = {**p, "WS": 1, "ABUF": 3}
    assert mmq_wgmma.smem_bytes(ws, "q4_K") == 1024 + 3 * 64 * 128 + 3 * 128 * 128 + 2 * 128 * 144 + 128
    # AREG: no dequantized chunks, RAW raw slots
    rs = {**p, "AREG": 1, "RAW": 3}
    assert mmq_wgmma.smem_bytes(rs, "q8_0") == 1024 + 3 * 64 * 128 + 3 * 128 * 272 + 256

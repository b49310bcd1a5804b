"""The int8 wgmma family off the GPU: its generated s8 wrappers are current, it builds for sm_90a
with register-A IGMMA (no spills, no ptxas warnings) at every configuration the GPU tests and the
heuristics use, it refuses what it cannot build with a reason, and its Bound and numpy model of the
tiled activations say what the kernel reads."""
import re

import numpy as np
import pytest

import experiments
from kernels import mmq_wgmma_i8, quant
from kernels import wgmma_header as gen_wgmma_header
from tests.test_gpu_wgmma_i8 import CONFIGS

TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]


def test_generated_s8_header_is_current():
    assert gen_wgmma_header.HEADER_S8.read_text() == gen_wgmma_header.render_s8(), \
        "kernels/cuda/wgmma_s8_ops.cuh is stale: run python3 -m kernels.wgmma_header"


def _build(params, qtype):
    compiled = mmq_wgmma_i8.FAMILY.compile_only(params, qtype, "sm_90")
    assert compiled.arch == "sm_90a"
    s = compiled.summary([mmq_wgmma_i8.FAMILY.kernel_name, "quantize_q8_1_tiled"])
    assert s["spill_store_bytes"] == 0 and s["spill_load_bytes"] == 0 and s["stack_bytes"] == 0, s
    assert "warning" not in compiled.ptxas_log.lower()  # e.g. ptxas serializing the wgmmas
    return compiled


def _check_igmma(compiled, params, qtype):
    """Per 128-k step: 4 blocks x (token parts) wgmmas of width BN / parts, A from registers."""
    p = mmq_wgmma_i8.full_params(params)
    parts = mmq_wgmma_i8.parts(p, qtype)
    width = p["BN"] // parts
    a_operands = re.findall(rf"IGMMA\.64x{width}x32\.S8\.S8 R\d+, (\S+), gdesc", compiled.sass)
    assert len(a_operands) >= 4 * parts, (width, a_operands)
    assert all(a.startswith("R") for a in a_operands), a_operands  # registers, not a descriptor
    assert "I2FP.F32.S32" in compiled.sass  # the dots' conversion on the ALU pipe, not the XU's I2F


@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
@pytest.mark.parametrize("qtype", ["q4_K", "q6_K"])  # one dot per block / q6_K's lo and hi dots
def test_builds_for_sm_90a_with_register_a_igmma(cfg, qtype):
    params = CONFIGS[cfg]
    _check_igmma(_build(params, qtype), params, qtype)


@pytest.mark.parametrize("qtype", TYPES)
def test_default_tile_every_type(qtype):
    """The lever's default (the large-T tile): IGMMA, mbarrier waits, bulk copies of the activation
    chunks, cp.async raw weight copies arriving on mbarriers, setmaxnreg for two consumer warpgroups."""
    params = experiments.get("wgmma_i8").defaults
    compiled = _build(params, qtype)
    _check_igmma(compiled, params, qtype)
    for op in ("UBLKCP", "LDGSTSBAR", "SYNCS.PHASECHK", "USETMAXREG.TRY_ALLOC", "USETMAXREG.DEALLOC"):
        assert op in compiled.sass, op
    assert mmq_wgmma_i8.threads(params) == 384


@pytest.mark.parametrize("T", [16, 64, 4096])
def test_heuristic_tiles_build(T):
    for qtype in ("q5_K", "q8_0"):
        params = mmq_wgmma_i8.heuristic_params(T)
        _check_igmma(_build(params, qtype), params, qtype)


def test_invalid_configurations_say_why():
    info = {"smem_per_block_optin": 227 * 1024}
    inv = mmq_wgmma_i8.invalid_reason
    assert inv({}, "q4_K", info) is None
    assert "BN=192 > 128" in inv({"BN": 192}, "q4_K", info)
    assert "wgmma N" in inv({"BN": 8}, "q6_K", info)  # q6_K halves each part: 4 is no wgmma N
    assert inv({"BN": 8}, "q4_K", info) is None
    assert "wgmma N" in inv({"BN": 16, "NSPLIT": 4}, "q4_K", info)
    assert "NSPLIT" in inv({"NSPLIT": 3}, "q4_K", info)
    assert "warpgroups" in inv({"BM": 256}, "q4_K", info)
    assert "STAGES" in inv({"STAGES": 1}, "q4_K", info)
    assert "RAW" in inv({"RAW": 7}, "q4_K", info)
    assert "shared memory" in inv({"BM": 128, "BN": 128, "STAGES": 4, "RAW": 6}, "q8_0", info)
    with pytest.raises(ValueError, match="Hopper"):
        mmq_wgmma_i8.FAMILY.target_arch("sm_89")


def test_smem_formula_counts_every_buffer():
    # 1 KB alignment slack + STAGES x (q chunk + scale chunk) + RAW raw slots + 256 B of mbarriers
    p = {"BM": 128, "BN": 64, "STAGES": 3, "RAW": 3}
    assert mmq_wgmma_i8.smem_bytes(p, "q4_K") == 1024 + 3 * (64 * 128 + 64 * 32) + 3 * 128 * 144 + 256
    assert mmq_wgmma_i8.smem_bytes(p, "q6_K") == 1024 + 3 * (64 * 128 + 64 * 32) + 3 * 128 * 224 + 256


def test_lever_is_registered_and_claims_igmma():
    lever = experiments.get("wgmma_i8")
    assert lever.family == "mmq_wgmma_i8" and lever.sass_claims == ("IGMMA",)
    assert lever.incumbent == "wgmma" and set(lever.types) == set(TYPES)
    from kernels import families

    assert families.get("mmq_wgmma_i8").parity == "int"  # the tight integer-reference check


def test_tiled_model_places_every_byte_where_the_kernel_reads_it():
    """tile_q8_1 (the numpy model the GPU test holds the pass to) against the kernel's addressing,
    written out per element: q byte k of token t at step k // 128, swizzled row r = t % BN; the
    scales of (t, block b) at the float4 the consumer thread (n8 tile r // 8, tq = r % 8 // 2) loads."""
    rng = np.random.default_rng(3)
    T, K, bn = 21, 512, 16  # one full token tile and a partial one
    xq = quant.quantize_q8_1(rng.standard_normal((T, K)).astype(np.float32))
    q_tiled, s_tiled = mmq_wgmma_i8.tile_q8_1(xq, bn)
    assert q_tiled.shape == (2, K // 128, bn * 128) and s_tiled.shape == (2, K // 32, bn // 8, 4, 4)
    qflat, sflat = q_tiled.reshape(-1), s_tiled.reshape(-1)
    for t in range(2 * bn):
        tile, r = divmod(t, bn)
        for k in range(K):
            step, kk = divmod(k, 128)
            off = (tile * (K // 128) + step) * bn * 128 + (r // 8) * 1024 + (r % 8) * 128 + ((kk // 16) ^ (r % 8)) * 16 + kk % 16
            assert qflat[off] == (np.uint8(xq.q[t, k]) if t < T else 0)
        for b in range(K // 32):
            base = (tile * (K // 32) + b) * bn * 2 + ((r // 8) * 4 + (r % 8) // 2) * 4 + r % 2
            want_d = xq.d[t, b] if t < T else 0.0
            want_ds = np.float32(xq.d[t, b]) * np.float32(xq.s[t, b]) if t < T else 0.0
            assert sflat[base] == want_d and sflat[base + 2] == want_ds


def test_bound_runs_the_tiled_pass_then_the_gemm():
    """The Bound's launches on a recording stand-in device: the tiled quantize pass over whole token
    tiles into the two scratch buffers, then the GEMM with (W, Xq, Xs, C, M, T, K, row_bytes)."""
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 40, 512, 21
    rng = np.random.default_rng(5)
    problem = Problem(Workload("q4_K", M, K, T),
                      quant.get("q4_K").quantize(rng.standard_normal((M, K)).astype(np.float32)),
                      rng.standard_normal((T, K)).astype(np.float32))
    device, bound = recorded_bound(mmq_wgmma_i8.FAMILY, {"BM": 128, "BN": 16}, problem, 168)
    bound.splitk, bound.partial = 1, None
    bound.run()
    (pname, pgrid, pblock, pargs, _), (gname, ggrid, gblock, gargs, gsmem) = device.launches
    q, s = bound.scratch
    assert pname == "quantize_q8_1_tiled" and pblock == (256, 1, 1)
    assert pgrid[0] * 256 >= 32 * (K // 32) * 4  # 2 tiles x 16 tokens, 4 lanes per 32-block
    assert pargs[0] == bound.x[0].ptr and pargs[1:3] == (q.ptr, s.ptr) and [int(a) for a in pargs[3:]] == [T, K]
    assert q.array.shape == (32, K) and q.array.dtype == np.int8  # whole 16-token tiles
    assert s.array.nbytes == 32 * (K // 32) * 8  # (d, d s) per token and block
    assert gname == "gemm" and ggrid == (2, 1, 1) and gblock == (384, 1, 1) and gsmem == bound.smem
    assert gargs[0] == bound.w[0].ptr and gargs[1:3] == (q.ptr, s.ptr) and gargs[3] == bound.out.ptr
    assert [int(a) for a in gargs[4:]] == [M, T, K, problem.w_packed.shape[1]]

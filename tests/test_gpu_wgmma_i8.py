"""Parity of the int8 wgmma path (kernels/cuda/mmq_wgmma_i8.cu) on the GPU (sm_90 only): the
integer contract of mmq_base, so the tight check applies (max |gpu - gemm_int| / max |gemm_int|
<= 1e-4 on the same Q8_1 activations) plus the loose float64 one; every type, odd tile edges (M, T
not multiples of the tile), 1, 2 and 3 super-blocks, split K, every token-part split, output
poisoned with NaN before each launch (run_once). Also: the tiled quantize pass writes exactly the
standalone quantizer's Q8_1 values in the layout the kernel reads (tile_q8_1), and q4_K/q5_K/q8_0
reproduce mmq_base bit for bit (the same rescale, in the same order)."""
import numpy as np
import pytest

from kernels import quant
from kernels.family import Problem, Workload
from tests.gpu_fixtures import gpu_device, run_once  # noqa: F401  (fixture)
from tests.test_gpu_mmq import SHAPES, TYPES, assert_int_parity, random_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},  # the lever's default: 128 x 128, 4 stages, 2 raw slots
    {"BM": 64, "BN": 16, "STAGES": 3, "RAW": 3},
    {"BM": 128, "BN": 64, "STAGES": 2, "RAW": 3, "SPLITK": 2},
    {"BM": 128, "BN": 128, "STAGES": 3, "NSPLIT": 2},
    {"BM": 64, "BN": 32, "STAGES": 4, "RAW": 6, "SPLITK": 3},
    {"BM": 128, "BN": 16, "STAGES": 4, "RAW": 4},  # the T <= 16 heuristic
    {"BM": 64, "BN": 128, "STAGES": 2, "RAW": 2, "NSPLIT": 2},
    {"BM": 128, "BN": 48, "STAGES": 4, "RAW": 3},  # BN not a power of two (q6_K: parts of 24)
    {"BM": 128, "BN": 32, "NSPLIT": 2},  # q6_K: four m64n8k32 pairs per block
]
PRECOMPILE = {"mmq_wgmma_i8": CONFIGS}  # scripts/precompile.py builds these off the GPU


def _sm90(device):
    from kernels import nvcc

    if nvcc.arch_base(device.info.get("arch", "")) != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {device.info.get('arch')}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_wgmma_i8_parity(gpu_device, qtype, cfg):
    from kernels import mmq_wgmma_i8

    _sm90(gpu_device)
    variant = mmq_wgmma_i8.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    assert variant.resources["arch"] == "sm_90a"
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 98])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        assert_int_parity(run_once(variant, prob), prob, f"{qtype} {M}x{K}x{T} cfg{cfg}")


def test_wgmma_i8_passes_the_parity_gate(gpu_device):
    """The campaign's own parity gate (mode 'int' from the family) on a suite-sized workload per type."""
    from gates import parity
    from kernels import mmq_wgmma_i8

    _sm90(gpu_device)
    rng = np.random.default_rng(17)
    for qtype in TYPES:
        variant = mmq_wgmma_i8.FAMILY.build({}, qtype, gpu_device)
        result = parity.run(variant, [Workload(qtype, 1000, 2048, 300)], rng)
        assert result.passed and result.numbers["mode"] == "int", result.line()


@pytest.mark.parametrize("bn", [16, 48, 128])
def test_tiled_pass_writes_the_quantizers_q8_1(gpu_device, bn):
    """The pass alone (no GEMM): its two buffers equal tile_q8_1(quantize_q8_1(x)) byte for byte --
    the same q, d and d*s as the numpy quantizer (and so the standalone GPU one), zero past T. Edge
    rows: all zeros (d = 0), a single spike, values that round half-way."""
    from kernels import mmq_wgmma_i8

    _sm90(gpu_device)
    variant = mmq_wgmma_i8.FAMILY.build({"BN": bn, "BM": 64}, "q8_0", gpu_device)
    rng = np.random.default_rng(bn)
    M, K, T = 64, 768, bn + 5
    x = (rng.standard_normal((T, K)) * rng.uniform(0.01, 30.0, (T, 1))).astype(np.float32)
    x[1] = 0.0
    x[2] = 0.0
    x[2, 37] = -3.5
    x[3, :32] = np.arange(32, dtype=np.float32) - 15.5  # d = 16.5 / 127: many ties
    prob = Problem(Workload("q8_0", M, K, T), quant.get("q8_0").quantize(rng.standard_normal((M, K)).astype(np.float32)), x)
    bound = variant.prepare(prob)
    try:
        bound.activation_pass(bound.x[0])
        gpu_device.synchronize()
        q_got = bound.scratch[0].get().view(np.uint8).reshape(-1)
        s_got = bound.scratch[1].get().reshape(-1)
    finally:
        bound.release()
    q_want, s_want = mmq_wgmma_i8.tile_q8_1(quant.quantize_q8_1(x), bn)
    np.testing.assert_array_equal(q_got, q_want.reshape(-1))
    np.testing.assert_array_equal(s_got.view(np.uint32), s_want.reshape(-1).view(np.uint32))


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q8_0"])
def test_matches_mmq_base_bit_for_bit(gpu_device, qtype):
    """Without split K both kernels apply, per element, fma(sw * d_x, I, acc) then fma(-mn, d_x s_x,
    acc) over the 32-blocks in k order, with I exact (mma.sync's magic-number C, or I2FP), so the
    outputs agree exactly; a fragment, swizzle or scale mix-up could not."""
    from kernels import mmq_base, mmq_wgmma_i8

    _sm90(gpu_device)
    ours = mmq_wgmma_i8.FAMILY.build({"SPLITK": 1}, qtype, gpu_device)
    base = mmq_base.FAMILY.build({"SPLITK": 1}, qtype, gpu_device)
    rng = np.random.default_rng(TYPES.index(qtype) + 40)
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        np.testing.assert_array_equal(run_once(ours, prob), run_once(base, prob), err_msg=f"{qtype} {M}x{K}x{T}")

"""Parity of the fused-quantization MMQ (lever `fused_quant`: mmq.cu with FUSEQ=1) on the GPU.

Parity: every type, test_gpu_mmq's odd-edged shapes, synchronous and 2-4 deep staging, both
int->float conversions, split-K, bf16 rows; tight against the CPU integer reference on the Q8_1
of the same activations, loose against float64 dequant(W).x.

Bit identity: with the same tile parameters the fused kernel's output equals mmq_base's (whose
Q8_1 comes from the standalone quantizer) bit for bit. The two run the same mma loop and the
same float rescale in the same order, so equal outputs mean equal Q8_1 bytes, scales and sums;
a wrong byte, scale or sum shows up as a difference. Also on the quantizer's edge cases (a zero
block, subnormal inputs, x / d on a rounding tie, a huge block scale).
"""
import numpy as np
import pytest

from kernels import quant, reference
from kernels.family import Problem, Workload
from kernels.quant.q8_1 import bf16_bits_to_float32, float32_to_bf16_bits
from tests.cuda_cases import q8_1_cases
from tests.gpu_fixtures import gpu_device, run_once  # noqa: F401  (fixture)
from tests.test_gpu_mmq import CONFIGS as MMQ_CONFIGS
from tests.test_gpu_mmq import SHAPES, TIGHT, TYPES, random_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},  # defaults: 64 x 16 tile, 2 stages
    {"STAGES": 1, "CVT": 0, "BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2},
    {"STAGES": 3, "BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "SPLITK": 2},
    {"STAGES": 4, "BM": 64, "BN": 16, "WARPS_M": 2, "WARPS_N": 1},
    {"STAGES": 3, "BM": 128, "BN": 32, "WARPS_M": 4, "WARPS_N": 1, "XBF16": 1},  # bf16 rows
]
# test_gpu_mmq's configurations whose f32 staging fits (its defaults' 128 x 64 tile does not)
SAME_TILES = [MMQ_CONFIGS[1], MMQ_CONFIGS[2]]
# scripts/precompile.py builds these off the GPU (mmq_base's SAME_TILES: test_gpu_mmq lists them)
PRECOMPILE = {"mmq_fused_quant": CONFIGS + [{**c, "XBF16": x} for c in SAME_TILES for x in (0, 1)]}


def activations_as_given(prob: Problem, xbf16: bool) -> np.ndarray:
    """The values the kernel quantizes: x itself, or x rounded to bf16 (the Bound does it on the host)."""
    return bf16_bits_to_float32(float32_to_bf16_bits(prob.x)) if xbf16 else prob.x


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_fused_quant_parity(gpu_device, qtype, cfg):
    from kernels import mmq_fused_quant

    variant = mmq_fused_quant.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    xbf16 = bool(variant.params["XBF16"])
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 81])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        got = run_once(variant, prob)
        label = f"{qtype} {M}x{K}x{T} cfg{cfg}"
        assert not np.isnan(got).any(), f"{label}: unwritten (NaN) outputs"
        x = activations_as_given(prob, xbf16)
        ref = reference.gemm_int(prob.w_packed, qtype, quant.quantize_q8_1(x))
        tight = np.abs(got - ref).max() / np.abs(ref).max()
        assert tight <= TIGHT, f"{label}: int-ref error {tight:.3g} > {TIGHT}"
        ref64 = reference.gemm_float64(prob.w_packed, qtype, x)
        loose = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
        assert loose <= 2e-2, f"{label}: float64 error {loose:.3g}"


def edge_case_problem(rng, qtype: str, M: int = 45, K: int = 512, T: int = 37) -> Problem:
    """Random weights, activations with the Q8_1 edge cases of tests/cuda_cases.py; the near
    float32-max row is scaled to 1e30 so the GEMM stays finite (its d is still huge)."""
    x = q8_1_cases(rng, T, K)
    x[2] *= np.float32(1e30 / np.abs(x[2]).max())
    w = (rng.standard_normal((M, K)) * rng.uniform(0.01, 2.0, (M, 1))).astype(np.float32)
    return Problem(Workload(qtype, M, K, T), quant.get(qtype).quantize(w), x)


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("tile", range(len(SAME_TILES)))
@pytest.mark.parametrize("xbf16", [0, 1])
def test_fused_output_equals_mmq_base_bit_for_bit(gpu_device, qtype, tile, xbf16):
    from kernels import mmq_base, mmq_fused_quant

    # the split is fixed: the auto choice weighs shared memory, which differs between the two,
    # and another split sums the partials in another order
    params = {"SPLITK": 1, **SAME_TILES[tile]}
    fused = mmq_fused_quant.FAMILY.build({**params, "XBF16": xbf16}, qtype, gpu_device)
    base = mmq_base.FAMILY.build(params, qtype, gpu_device)
    rng = np.random.default_rng([tile, TYPES.index(qtype), xbf16, 82])
    problems = [random_problem(rng, qtype, M, K, T) for M, K, T in SHAPES] + [edge_case_problem(rng, qtype)]
    for prob in problems:
        got = run_once(fused, prob)
        # mmq_base quantizes f32; bf16 widened to f32 is exact, so its Q8_1 is the bf16 one
        want = run_once(base, Problem(prob.workload, prob.w_packed, activations_as_given(prob, bool(xbf16))))
        assert np.isfinite(want).all()
        diff = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
        assert diff.size == 0, (f"{prob.workload.label()} tile{tile} xbf16={xbf16}: {len(diff)} outputs differ "
                                f"from mmq_base, first (t, m) = {tuple(diff[0])}")

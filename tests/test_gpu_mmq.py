"""Parity of the fused int8 MMQ kernel on the GPU, every type, odd tile edges, several
configurations (synchronous and cp.async staging, both int->float conversions, split-K, both
rescale orders RESCALE 0/1 and both q6_K unpack forms Q6SUB 0/1).

Tight: against the CPU integer reference on the same Q8_1 activations (the integer dots are
exact on both sides; only the f32 rescale order differs). Loose: against float64 dequant(W).x.
Output poisoned with NaN before every launch; fresh random inputs for every check.
"""
import numpy as np
import pytest

from kernels import quant, reference
from kernels.family import Problem, Workload
from tests.gpu_fixtures import gpu_device, run_once  # noqa: F401  (fixture)

pytestmark = pytest.mark.gpu

TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]
CONFIGS = [
    {},  # defaults
    {"STAGES": 1, "CVT": 0, "BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2},
    {"STAGES": 3, "BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "SPLITK": 2},
]
# the inner-loop options (mmq_core.cuh RESCALE, Q6SUB) on the large-T tiles of scripts/sweep_mmq.py's
# mmq_base_rescale grid, with both conversions and split-K
OPTION_CONFIGS = [
    {"RESCALE": 1, "Q6SUB": 1},
    {"RESCALE": 1, "BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 2},
    {"RESCALE": 1, "Q6SUB": 1, "BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 1, "MIN_BLOCKS": 2,
     "SPLITK": 2},
    {"RESCALE": 1, "CVT": 0, "STAGES": 1, "BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2},
    {"RESCALE": 0, "Q6SUB": 1, "BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "STAGES": 1},
]
CONFIGS = CONFIGS + OPTION_CONFIGS
SHAPES = [(37, 256, 5), (145, 512, 67), (256, 768, 128)]  # (M, K, T): odd edges, 1..3 super-blocks
TIGHT = 1e-4  # max |gpu - int ref| / max |int ref|
PRECOMPILE = {"mmq_base": CONFIGS}  # scripts/precompile.py builds these off the GPU


def random_problem(rng, qtype, M, K, T):
    # mixed magnitudes per row so scales/mins of every size get exercised; never zeros
    w = (rng.standard_normal((M, K)) * rng.uniform(0.01, 2.0, (M, 1))).astype(np.float32)
    x = (rng.standard_normal((T, K)) * rng.uniform(0.1, 4.0, (T, 1))).astype(np.float32)
    return Problem(Workload(qtype, M, K, T), quant.get(qtype).quantize(w), x)


def assert_int_parity(got, prob, where: str) -> None:
    """Every output written (the NaN poison gone), tight against the integer contract, loose
    against float64 dequant(W) . x."""
    qtype = prob.workload.qtype
    assert not np.isnan(got).any(), f"{where}: unwritten (NaN) outputs"
    ref = reference.gemm_int(prob.w_packed, qtype, quant.quantize_q8_1(prob.x))
    tight = np.abs(got - ref).max() / np.abs(ref).max()
    assert tight <= TIGHT, f"{where}: int-ref error {tight:.3g} > {TIGHT}"
    ref64 = reference.gemm_float64(prob.w_packed, qtype, prob.x)
    loose = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
    assert loose <= 2e-2, f"{where}: float64 error {loose:.3g}"


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_mmq_parity(gpu_device, qtype, cfg):
    from kernels import mmq_base

    variant = mmq_base.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype)])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        assert_int_parity(run_once(variant, prob), prob, f"{qtype} {M}x{K}x{T} cfg{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("rescale", [0, 1])
def test_mmq_parity_at_extreme_scales(gpu_device, qtype, rescale):
    """Rows and tokens 10^-4 .. 10^4 apart (weight scales from f16 subnormals' neighbourhood to
    thousands, activation blocks with one outlier each): RESCALE=1's exact -sw * 1.5 * 2^23 bias
    and both orders hold the tight bound on every row, not only on the largest ones."""
    from kernels import mmq_base

    variant = mmq_base.FAMILY.build({"RESCALE": rescale, "Q6SUB": rescale}, qtype, gpu_device)
    rng = np.random.default_rng([41, rescale, TYPES.index(qtype)])
    M, K, T = 70, 512, 19
    w = (rng.standard_normal((M, K)) * 10.0 ** rng.uniform(-4, 4, (M, 1))).astype(np.float32)
    x = (rng.standard_normal((T, K)) * 10.0 ** rng.uniform(-3, 3, (T, 1))).astype(np.float32)
    x[:, ::32] *= 50.0  # one outlier per 32-block: the other q_x are small
    prob = Problem(Workload(qtype, M, K, T), quant.get(qtype).quantize(w), x)
    got = run_once(variant, prob)
    ref = reference.gemm_int(prob.w_packed, qtype, quant.quantize_q8_1(prob.x))
    # per output row and token: scale the error by that row's and token's own largest |ref|
    scale = np.minimum(np.abs(ref).max(axis=0, keepdims=True), np.abs(ref).max(axis=1, keepdims=True))
    rel = np.abs(got - ref) / scale
    assert rel.max() <= TIGHT, f"{qtype} RESCALE={rescale}: error {rel.max():.3g} of the row/token scale"


def test_mmq_rejects_bad_shape(gpu_device):
    from kernels import mmq_base

    variant = mmq_base.FAMILY.build({}, "q4_K", gpu_device)
    rng = np.random.default_rng(7)
    prob = random_problem(rng, "q4_K", 16, 256, 4)
    bad = Problem(Workload("q4_K", 16, 300, 4), prob.w_packed, rng.standard_normal((4, 300)).astype(np.float32))
    with pytest.raises(ValueError, match="multiple of 256"):
        variant.prepare(bad)


def test_dispatcher_runs_its_choice(gpu_device, tmp_path):
    from kernels import dispatch

    rng = np.random.default_rng(11)
    prob = random_problem(rng, "q4_K", 96, 512, 33)
    got = dispatch.mmq(prob.w_packed, "q4_K", prob.x, gpu_device, champions_path=tmp_path / "none.json")
    ref = reference.gemm_int(prob.w_packed, "q4_K", quant.quantize_q8_1(prob.x))
    assert np.abs(got - ref).max() / np.abs(ref).max() <= TIGHT

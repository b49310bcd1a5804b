"""Parity of the f16 path (weights dequantized to f16 in shared memory, f16 tensor cores).

Its math differs from the integer contract, so the gate is against float64 dequant(W).x with
the bound the two f16 roundings allow: |w_f16 - w| <= 2^-11 |w| and |x_f16 - x| <= 2^-11 |x|
give |err| <= (2 * 2^-11 + small) * sum_k |w_k x_k| per output; f32 accumulation adds far less.
The test bounds each weight's error by 2^-11 (|w| + |sw q| + |mn|) (the DEQ=1 f16x2 math also
rounds sw and mn), the activation's by 2^-11 |x|, and allows 1.5x that sum; it also requires the error to be well below the int8
path's activation-quantization error scale, so a wrong fragment layout cannot hide in it.
"""
import numpy as np
import pytest

from kernels import quant
from kernels.family import Problem, Workload
from tests.gpu_fixtures import gpu_device, run_once  # noqa: F401  (fixture)
from tests.test_gpu_mmq import SHAPES, TYPES, random_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},
    {"BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 2},
    {"BM": 128, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "SPLITK": 2},
    {"DEQ": 1},  # f16x2 dequant math
    {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "DEQ": 1},
]
F16_EPS = 2.0**-11
PRECOMPILE = {"mmq_f16": CONFIGS}  # scripts/precompile.py builds these off the GPU


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_f16_parity(gpu_device, qtype, cfg):
    from kernels import mmq_f16

    variant = mmq_f16.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 16])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        got = run_once(variant, prob)
        assert_f16_parity(got, prob, f"{qtype} {M}x{K}x{T} cfg{cfg}")


def assert_f16_parity(got: np.ndarray, prob: Problem, label: str) -> None:
    """The f16 path's bound against float64 (module docstring); shared with the wgmma path."""
    assert not np.isnan(got).any(), f"{label}: unwritten (NaN) outputs"
    qtype = prob.workload.qtype
    w = quant.get(qtype).dequantize(prob.w_packed).astype(np.float64)
    x = prob.x.astype(np.float64)
    ref = x @ w.T
    # each weight's f16 error is at most eps * (|w| + |sw q| + |mn|): w rounded once, and with
    # DEQ=1 also sw and mn rounded to f16 before the fma (which cancels when w is near 0)
    form = quant.get(qtype).decompose(prob.w_packed)
    g = form.group
    sq = np.abs(np.repeat(form.scale, g, axis=1).astype(np.float64) * form.q.astype(np.float64))
    mn = np.abs(np.repeat(form.minv, g, axis=1).astype(np.float64)) if form.minv is not None else 0.0
    scale = np.abs(x) @ (np.abs(w) + sq + mn).T
    err = np.abs(got - ref)
    worst = (err / (1.5 * F16_EPS * scale)).max()
    assert worst <= 1.0, f"{label}: error {worst:.3g} x the f16 bound"
    # a layout bug shows as O(1) relative error; the f16 path must sit near f16 rounding
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


def f16x2_dequantize(packed: np.ndarray, qtype: str) -> np.ndarray:
    """The DEQ=1 (and register-A wgmma) weights: sw and mn rounded to f16 first, then one fused
    f16 multiply-add q * sw16 - mn16, rounded once (exact in float64, then one rounding)."""
    form = quant.get(qtype).decompose(packed)
    sw = np.repeat(form.scale.astype(np.float16), form.group, axis=1).astype(np.float64)
    w = form.q.astype(np.float64) * sw
    if form.minv is not None:
        w -= np.repeat(form.minv.astype(np.float16), form.group, axis=1).astype(np.float64)
    return w.astype(np.float16).astype(np.float32)


def one_hot_problem(rng, qtype: str, M: int = 48, K: int = 256, T: int = 64,
                    deq: int = 0) -> tuple[Problem, np.ndarray]:
    """x = e_k rows: the output is the f16 weight columns (returned as the expectation): the f32
    dequantizer's values rounded once to f16 (deq=0), or the f16x2 dequant's (deq=1)."""
    w = (rng.standard_normal((M, K)) * 0.1).astype(np.float32)
    packed = quant.get(qtype).quantize(w)
    x = np.zeros((T, K), np.float32)
    cols = rng.choice(K, T, replace=False)
    x[np.arange(T), cols] = 1.0
    w16 = f16x2_dequantize(packed, qtype) if deq else quant.get(qtype).dequantize(packed).astype(np.float16)
    want = w16[:, cols].T.astype(np.float32)
    return Problem(Workload(qtype, M, K, T), packed, x), want


def test_f16_matches_reference_dequant_exactly_structured(gpu_device):
    """With x = e_k (one-hot rows), the output is the f16-rounded weight column: checks the
    dequantized values themselves, not just their sums."""
    from kernels import mmq_f16

    rng = np.random.default_rng(5)
    for qtype in TYPES:
        prob, want = one_hot_problem(rng, qtype)
        variant = mmq_f16.FAMILY.build({"BM": 64, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 1}, qtype, gpu_device)
        got = run_once(variant, prob)
        np.testing.assert_allclose(got, want, rtol=2**-10, atol=1e-7)  # one f16 ulp

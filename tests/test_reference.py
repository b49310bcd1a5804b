"""CPU reference GEMMs: the integer contract against a slow loop, against float64, and its speed."""
from __future__ import annotations

import time

import numpy as np
import pytest

from kernels import quant, reference
from kernels.quant import dequantize_q8_1, quantize_q8_1

NAMES = list(quant.QTYPES)


def slow_gemm_int(packed: np.ndarray, name: str, xq) -> np.ndarray:
    """The contract as written: per output, per 32-block, exact Python-int dots, float64 rescale."""
    form = quant.get(name).decompose(packed)
    m_rows, k = form.q.shape
    t_rows = xq.q.shape[0]
    out = np.zeros((t_rows, m_rows))
    halves = 32 // form.group  # q6_K: two 16-wide halves per 32-block, each with its own scale
    for t in range(t_rows):
        for m in range(m_rows):
            acc = 0.0
            for b in range(k // 32):
                block = 0.0
                for h in range(halves):
                    g = b * halves + h
                    cols = range(g * form.group, (g + 1) * form.group)
                    dot = sum(int(form.q[m, c]) * int(xq.q[t, c]) for c in cols)
                    block += float(form.scale[m, g]) * dot
                if form.minv is not None:
                    block -= float(form.minv[m, b]) * int(xq.s[t, b])
                acc += float(xq.d[t, b]) * block
            out[t, m] = acc
    return out


def weights(name: str, m: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return quant.get(name).quantize(rng.standard_normal((m, k)).astype(np.float32))


def activations(t: int, k: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((t, k)).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_gemm_int_matches_slow_loop(name):
    packed = weights(name, 3, 512, seed=1)
    xq = quantize_q8_1(activations(2, 512, seed=2))
    expected = slow_gemm_int(packed, name, xq)
    got = reference.gemm_int_float64(packed, name, xq)
    assert got.shape == (2, 3) and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    as_f32 = reference.gemm_int(packed, name, xq)
    assert as_f32.dtype == np.float32 and np.array_equal(as_f32, got.astype(np.float32))


@pytest.mark.parametrize("name", NAMES)
def test_gemm_int_on_random_bytes_matches_slow_loop(name):
    """Random blocks reach every quant level, sign and scale pattern (incl. q6_K's negative scales)."""
    qt = quant.get(name)
    packed = qt.random_packed(2, 256, np.random.default_rng(3), (-0.02, 0.02))
    xq = quantize_q8_1(activations(3, 256, seed=4) * 10)
    expected = slow_gemm_int(packed, name, xq)
    got = reference.gemm_int_float64(packed, name, xq)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def activation_quantization_bound(packed, name, x, xq) -> np.ndarray:
    """Per-element bound on |gemm_int - gemm_float64|, [T, M].

    gemm_int is sum_k w'_k * xhat_k with xhat = d_x*q_x and w' = scale*q - minv exact;
    gemm_float64 is sum_k w_k * x_k with w = float32(scale*q - minv). So
        |err| <= sum_k |w_k| |x_k - xhat_k| + sum_k |xhat_k| |w'_k - w_k|
             <= sum_k |w_k| d_x(k)/2 * (1 + 1e-6)           (rint: |x/d - q| <= 1/2, float32 slack)
              + sum_k |xhat_k| (|scale*q|_k + |w_k|) 2^-24  (two float32 roundings in w)
    plus float64 summation noise.
    """
    qt = quant.get(name)
    form = qt.decompose(packed)
    w = np.abs(qt.dequantize(packed).astype(np.float64))
    k = w.shape[1]
    d_per_col = np.repeat(xq.d.astype(np.float64), 32, axis=1)  # [T, K]
    scaled_q = np.abs(form.scale[:, np.arange(k) // form.group].astype(np.float64) * form.q)
    xhat = np.abs(dequantize_q8_1(xq).astype(np.float64))
    bound = (d_per_col / 2 * (1 + 1e-6)) @ w.T
    bound += xhat @ (scaled_q + w).T * 2.0 ** -24
    bound += 1e-12 * (np.abs(x.astype(np.float64)) @ w.T)
    return bound


@pytest.mark.parametrize("name", NAMES)
def test_gemm_int_within_activation_quantization_error_of_float64(name):
    m, k, t = 37, 1024, 5  # odd M and T: no shape is a multiple of anything but the block
    packed = weights(name, m, k, seed=5)
    x = activations(t, k, seed=6)
    xq = quantize_q8_1(x)
    exact = reference.gemm_float64(packed, name, x)
    assert exact.shape == (t, m) and exact.dtype == np.float64
    err = np.abs(reference.gemm_int_float64(packed, name, xq) - exact)
    assert (err <= activation_quantization_bound(packed, name, x, xq)).all()
    assert err.max() > 0  # the activations really were quantized


def test_gemm_float64_is_dequantized_product():
    packed = weights("q4_K", 4, 256, seed=7)
    x = activations(3, 256, seed=8)
    w = quant.get("q4_K").dequantize(packed).astype(np.float64)
    expected = np.array([[sum(float(x[t, c]) * w[m, c] for c in range(256)) for m in range(4)] for t in range(3)])
    np.testing.assert_allclose(reference.gemm_float64(packed, "q4_K", x), expected, rtol=1e-12, atol=1e-12)


def test_gemm_float64_accepts_bf16_bits():
    from kernels.quant.q8_1 import bf16_bits_to_float32, float32_to_bf16_bits
    packed = weights("q8_0", 2, 64, seed=9)
    bits = float32_to_bf16_bits(activations(2, 64, seed=10))
    assert np.array_equal(reference.gemm_float64(packed, "q8_0", bits),
                          reference.gemm_float64(packed, "q8_0", bf16_bits_to_float32(bits)))


@pytest.mark.parametrize("t", [1, 64])
def test_decode_and_multi_chunk_shapes(t):
    """T = 1 (decode) and, at T = 64, an M spanning several row chunks agree with the slow loop on sample rows."""
    packed = weights("q5_K", 300, 256, seed=11)
    xq = quantize_q8_1(activations(t, 256, seed=12))
    got = reference.gemm_int_float64(packed, "q5_K", xq)
    rows = [0, 63, 64, 299]
    expected = slow_gemm_int(packed[rows], "q5_K", xq)
    np.testing.assert_allclose(got[:, rows], expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_errors_are_one_line_value_errors():
    packed = weights("q4_K", 2, 512, seed=13)
    for fn, args, match in [
        (reference.gemm_int, (packed, "q4_K", quantize_q8_1(activations(2, 256, 1))), "does not match"),
        (reference.gemm_int, (packed, "q4_K", activations(2, 512, 1)), "Q8_1Act"),
        (reference.gemm_int, (packed, "nope", quantize_q8_1(activations(2, 512, 1))), "unknown quant type"),
        (reference.gemm_float64, (packed, "q4_K", activations(2, 256, 1)), "does not match"),
        (reference.gemm_float64, (packed, "q4_K", activations(2, 512, 1).astype(np.float64)), "float32"),
    ]:
        with pytest.raises(ValueError, match=match) as info:
            fn(*args)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["q4_K", "q6_K"])  # the min/rank-1 path and the 16-wide path
def test_gemm_int_speed_4096x4096x64(name):
    qt = quant.get(name)
    packed = qt.random_packed(4096, 4096, np.random.default_rng(14))
    xq = quantize_q8_1(activations(64, 4096, seed=15))
    start = time.perf_counter()
    out = reference.gemm_int(packed, name, xq)
    elapsed = time.perf_counter() - start
    assert out.shape == (64, 4096) and np.isfinite(out).all()
    assert elapsed < 10.0, f"gemm_int {name} 4096x4096x64 took {elapsed:.1f} s"

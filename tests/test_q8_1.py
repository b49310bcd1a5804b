"""Q8_1 activation quantization: the exact float32 contract of docs/ARCHITECTURE.md."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.quant import Q8_1Act, dequantize_q8_1, quantize_q8_1
from kernels.quant.q8_1 import bf16_bits_to_float32, float32_to_bf16_bits


def spec_block(x: np.ndarray) -> tuple[list[int], np.float32, int]:
    """One 32-block, scalar by scalar with numpy float32 arithmetic, as the contract reads."""
    amax = np.float32(0)
    for v in x:
        amax = max(amax, np.float32(abs(v)))
    d = np.float32(amax / np.float32(127))
    if d == 0:
        return [0] * len(x), d, 0
    q = [int(min(127, max(-127, np.rint(np.float32(v / d))))) for v in x]
    return q, d, sum(q)


def spec(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t, k = x.shape
    q = np.zeros((t, k), np.int64)
    d = np.zeros((t, k // 32), np.float32)
    s = np.zeros((t, k // 32), np.int64)
    for i in range(t):
        for b in range(k // 32):
            qb, d[i, b], s[i, b] = spec_block(x[i, 32 * b:32 * b + 32])
            q[i, 32 * b:32 * b + 32] = qb
    return q, d, s


def activation_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    mixed = rng.standard_normal((3, 256)) * np.logspace(-20, 20, 8).repeat(32)
    some_zero = rng.standard_normal((2, 128))
    some_zero[0, :32] = 0
    return {
        "normal": rng.standard_normal((4, 256)),
        "mixed_magnitudes": mixed,
        "zero_blocks": some_zero,
        "huge": rng.uniform(-3e38, 3e38, (2, 64)),
        "subnormal": rng.standard_normal((2, 64)) * 1e-40,
    }


@pytest.mark.parametrize("case", list(activation_cases()))
def test_matches_scalar_spec(case):
    x = activation_cases()[case].astype(np.float32)
    xq = quantize_q8_1(x)
    q, d, s = spec(x)
    assert xq.q.dtype == np.int8 and xq.d.dtype == np.float32 and xq.s.dtype == np.int32
    assert xq.q.shape == x.shape and xq.d.shape == xq.s.shape == (x.shape[0], x.shape[1] // 32)
    assert np.array_equal(xq.q, q)
    assert np.array_equal(xq.d, d)
    assert np.array_equal(xq.s, s)


def test_rounds_half_to_even():
    x = np.zeros((1, 32), np.float32)
    x[0, :6] = [127.0, 2.5, 3.5, -2.5, -0.5, 0.5]  # amax 127 -> d = 1 exactly
    xq = quantize_q8_1(x)
    assert xq.d[0, 0] == 1.0
    assert xq.q[0, :6].tolist() == [127, 2, 4, -2, 0, 0]
    assert xq.s[0, 0] == 127 + 2 + 4 - 2


def test_all_zero_block_is_zero():
    xq = quantize_q8_1(np.zeros((2, 64), np.float32))
    assert not xq.q.any() and not xq.d.any() and not xq.s.any()


def test_round_trip_error_within_half_step():
    x = np.random.default_rng(2).standard_normal((8, 512)).astype(np.float32)
    xq = quantize_q8_1(x)
    err = np.abs(dequantize_q8_1(xq).astype(np.float64) - x).reshape(8, 16, 32)
    half_step = xq.d.astype(np.float64)[..., None] / 2
    assert (err <= half_step * (1 + 1e-6)).all()
    assert err.max() > 0.25 * half_step.max()  # it is a real quantization, not a copy


def test_bf16_bits_input_is_widened_exactly():
    rng = np.random.default_rng(4)
    bits = float32_to_bf16_bits(rng.standard_normal((3, 128)).astype(np.float32))
    widened = bf16_bits_to_float32(bits)
    assert not (widened.view(np.uint32) & 0xFFFF).any()
    assert np.array_equal(float32_to_bf16_bits(widened), bits)
    from_bits, from_f32 = quantize_q8_1(bits), quantize_q8_1(widened)
    for field in ("q", "d", "s"):
        assert np.array_equal(getattr(from_bits, field), getattr(from_f32, field))


def test_bf16_rounding_helper_is_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-9], np.float32)  # ties and below-tie
    assert bf16_bits_to_float32(float32_to_bf16_bits(x)).tolist() == [1.0, 1.0, 1.0 + 2**-6, 1.0]


def test_ml_dtypes_bfloat16_accepted():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(5).standard_normal((2, 64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(quantize_q8_1(x).q, quantize_q8_1(x.astype(np.float32)).q)


def test_dequantize_is_d_times_q():
    xq = Q8_1Act(q=np.arange(-32, 32, dtype=np.int8).reshape(1, 64), d=np.array([[0.5, 2.0]], np.float32),
                 s=np.zeros((1, 2), np.int32))
    expected = np.concatenate([np.arange(-32, 0) * 0.5, np.arange(0, 32) * 2.0]).astype(np.float32)
    assert np.array_equal(dequantize_q8_1(xq)[0], expected)


def one_line_error(x, match):
    with pytest.raises(ValueError, match=match) as info:
        quantize_q8_1(x)
    assert "\n" not in str(info.value)


def test_rejects_bad_input():
    good = np.ones((2, 64), np.float32)
    bad = good.copy()
    bad[1, 5] = np.nan
    one_line_error(bad, "NaN/Inf")
    bad[1, 5] = np.inf
    one_line_error(bad, "NaN/Inf")
    one_line_error(float32_to_bf16_bits(bad), "NaN/Inf")  # bf16 Inf too
    one_line_error(np.ones((2, 48), np.float32), "not a multiple of the block size 32")
    one_line_error(good.astype(np.float64), "expected float32, or bf16")
    one_line_error(good.astype(np.int16), "expected float32, or bf16")
    one_line_error(good[0], "2-D")
    one_line_error(good.tolist(), "numpy")
    one_line_error(np.ones((0, 64), np.float32), "empty")

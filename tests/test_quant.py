"""ggml weight formats against gguf's numpy implementation (written by people not on this project).

Dequantization is compared bit for bit (np.array_equal) on our quantizer's output and on
random bytes (every bit pattern of every field). Where gguf has a quantizer, our bytes must
equal its bytes; where it has none (the K-quants in gguf 0.17-0.19), see test_kquant_quality.
"""
from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from kernels import quant
from kernels.quant import q4_k, q5_k, q6_k

NAMES = list(quant.QTYPES)


def gguf_can_quantize(qt: quant.QType) -> bool:
    try:
        gguf_quantize(np.zeros((1, qt.block), np.float32), qt.ggml_type)
    except NotImplementedError:
        return False
    return True


WITH_GGUF_QUANTIZER = [n for n in NAMES if gguf_can_quantize(quant.QTYPES[n])]
WITHOUT_GGUF_QUANTIZER = [n for n in NAMES if n not in WITH_GGUF_QUANTIZER]


def weight_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    mixed = rng.standard_normal((8, 1024))
    mixed *= np.logspace(-30, 4, 8 * 1024 // 32).reshape(8, 32, 1).repeat(32, axis=2).reshape(8, 1024)
    zero_parts = rng.standard_normal((6, 512))
    zero_parts[:, :64] = 0  # whole sub-blocks of zeros inside a non-zero super-block
    zero_parts[::2, 256:] = 0  # whole zero super-blocks
    zero_parts[1::2, 300:316] = 0.75  # a constant run
    return {
        "normal_1x256": rng.standard_normal((1, 256)),
        "normal_5x512": rng.standard_normal((5, 512)),
        "normal_33x1024": rng.standard_normal((33, 1024)),
        "uniform": rng.uniform(-1, 1, (7, 768)),
        "positive": rng.uniform(0.5, 2.0, (4, 512)),
        "negative": -rng.uniform(0.5, 2.0, (4, 512)),
        "heavy_tail": rng.standard_t(2, (8, 512)),
        "all_zero": np.zeros((3, 512)),
        "tiny_1e-30": rng.standard_normal((4, 512)) * 1e-30,
        "huge_6e4": np.clip(rng.standard_normal((4, 512)) * 3e4, -6e4, 6e4),
        "mixed_magnitudes": mixed,
        "zero_and_constant_parts": zero_parts,
        "exact_ties": np.round(rng.standard_normal((4, 512)) * 8) / 16,
    }


CASES = {k: v.astype(np.float32) for k, v in weight_cases().items()}


def gguf_dequant(packed: np.ndarray, qt: quant.QType) -> np.ndarray:
    return gguf_dequantize(packed, qt.ggml_type).reshape(packed.shape[0], -1)


def test_sizes_match_gguf_constants():
    for qt in quant.QTYPES.values():
        assert (qt.block, qt.type_size) == GGML_QUANT_SIZES[qt.ggml_type], qt.name


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", NAMES)
def test_dequantize_equals_gguf_on_our_bytes(name, case):
    qt = quant.get(name)
    w = CASES[case]
    packed = qt.quantize(w)
    assert packed.dtype == np.uint8 and packed.shape == (w.shape[0], qt.row_bytes(w.shape[1]))
    ours = qt.dequantize(packed)
    assert ours.dtype == np.float32 and ours.shape == w.shape
    assert np.array_equal(ours, gguf_dequant(packed, qt))


@pytest.mark.parametrize("scale_range", [(1e-3, 1e-2), (-2.0, 2.0), (6e-8, 1e-6), (1e4, 6e4)])
@pytest.mark.parametrize("name", NAMES)
def test_dequantize_equals_gguf_on_random_bytes(name, scale_range):
    qt = quant.get(name)
    packed = qt.random_packed(9, 3 * qt.block if qt.block == 256 else 8 * qt.block, np.random.default_rng(7),
                              scale_range)
    assert np.array_equal(qt.dequantize(packed), gguf_dequant(packed, qt))


@pytest.mark.parametrize("name", NAMES)
def test_intform_reproduces_gguf_dequantize(name):
    """scale * q - minv, evaluated here in float32 from the IntForm alone, is gguf's w bit for bit."""
    qt = quant.get(name)
    packed = qt.random_packed(5, 2 * 256, np.random.default_rng(3), (-0.05, 0.05))
    form = qt.decompose(packed)
    m, k = form.q.shape
    group_of_column = np.arange(k) // form.group
    w = form.scale[:, group_of_column] * form.q.astype(np.float32)
    if form.minv is not None:
        w = w - form.minv[:, group_of_column]
    assert w.dtype == np.float32
    assert np.array_equal(w, gguf_dequant(packed, qt))


@pytest.mark.parametrize("name, dtype, lo, hi, group, has_min", [
    ("q4_K", np.uint8, 0, 15, 32, True),
    ("q5_K", np.uint8, 0, 31, 32, True),
    ("q6_K", np.int8, -32, 31, 16, False),
    ("q8_0", np.int8, -128, 127, 32, False),
])
def test_intform_contract(name, dtype, lo, hi, group, has_min):
    qt = quant.get(name)
    form = qt.decompose(qt.random_packed(4, 512, np.random.default_rng(5)))
    assert form.q.dtype == dtype and form.q.shape == (4, 512)
    assert form.q.min() == lo and form.q.max() == hi  # random bytes reach every level
    assert form.group == group
    assert form.scale.dtype == np.float32 and form.scale.shape == (4, 512 // group)
    assert (form.minv is not None) == has_min
    if has_min:
        assert form.minv.dtype == np.float32 and form.minv.shape == form.scale.shape


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", WITH_GGUF_QUANTIZER)
def test_quantize_bytes_equal_gguf(name, case):
    qt = quant.get(name)
    w = CASES[case]
    assert np.array_equal(qt.quantize(w), gguf_quantize(w, qt.ggml_type))


def test_gguf_quantizer_availability_is_known():
    """Records what this gguf offers, so a new gguf quantizer is noticed (and then byte-compared above)."""
    assert "q8_0" in WITH_GGUF_QUANTIZER
    assert set(WITHOUT_GGUF_QUANTIZER) <= {"q4_K", "q5_K", "q6_K"}


def plain_grid_rms(w: np.ndarray, name: str) -> float:
    """RMS of ideal uniform rounding on each sub-block's plain grid, exact float scale: step / sqrt(12).

    Unsigned types (q4_K, q5_K): step = (max - min(min, 0)) / nmax over 32 weights.
    q6_K: step = amax / 32 over 16 weights (levels -32..31).
    """
    if name == "q6_K":
        blocks = w.reshape(-1, 16).astype(np.float64)
        step = np.abs(blocks).max(axis=1) / 32
    else:
        nmax = {"q4_K": 15, "q5_K": 31}[name]
        blocks = w.reshape(-1, 32).astype(np.float64)
        step = (blocks.max(axis=1) - np.minimum(blocks.min(axis=1), 0)) / nmax
    return float(np.sqrt(np.mean(step ** 2) / 12))


MINMAX = {"q4_K": q4_k.quantize_minmax, "q5_K": q5_k.quantize_minmax, "q6_K": q6_k.quantize_minmax}


@pytest.mark.parametrize("dist", ["normal", "uniform", "student_t3", "shifted"])
@pytest.mark.parametrize("name", ["q4_K", "q5_K", "q6_K"])
def test_kquant_quality(name, dist):
    """gguf (0.17-0.19) has no Q4_K/Q5_K/Q6_K quantizer (quantize raises NotImplementedError),
    so our ggml-style quantizer is judged by its error instead:

    * bound: the round-trip RMS error is below step/sqrt(12) of ideal rounding on each
      sub-block's plain min/max grid with an exact float scale (plain_grid_rms), although
      our scales are themselves quantized (6-bit / int8 under an f16 super-scale): the
      scale/min search must more than pay for that;
    * the search beats the same format filled by plain min/max quantization.
    (Bytes were also checked equal to ggml's C reference built without FMA contraction,
    outside this suite.)
    """
    rng = np.random.default_rng(99)
    w = {
        "normal": rng.standard_normal((32, 1024)),
        "uniform": rng.uniform(-1, 1, (32, 1024)),
        "student_t3": rng.standard_t(3, (32, 1024)),
        "shifted": rng.standard_normal((32, 1024)) + 2.0,
    }[dist].astype(np.float32)
    qt = quant.get(name)
    packed, rms = qt.quantize_report(w)
    rms_minmax = qt.rms_error(w, MINMAX[name](w))
    assert rms < plain_grid_rms(w, name)
    assert rms < rms_minmax


@pytest.mark.parametrize("name", NAMES)
def test_zero_and_tiny_weights_round_trip_to_zero(name):
    qt = quant.get(name)
    for w in (CASES["all_zero"], CASES["tiny_1e-30"]):
        assert np.array_equal(qt.dequantize(qt.quantize(w)), np.zeros_like(w))


@pytest.mark.parametrize("name", NAMES)
def test_huge_weights_round_trip_within_format_precision(name):
    qt = quant.get(name)
    w = CASES["huge_6e4"]
    assert qt.rms_error(w, qt.quantize(w)) < 0.1 * np.sqrt(np.mean(w.astype(np.float64) ** 2))


def test_quantize_report_matches_rms_error():
    qt = quant.get("q4_K")
    w = CASES["normal_5x512"]
    packed, rms = qt.quantize_report(w)
    expected = np.sqrt(np.mean((qt.dequantize(packed).astype(np.float64) - w) ** 2))
    assert rms == pytest.approx(expected, rel=1e-12) and rms > 0


# ---------------------------------------------------------------- input errors

def one_line_error(fn, *args, match: str) -> str:
    with pytest.raises(ValueError, match=match) as info:
        fn(*args)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", NAMES)
def test_quantize_rejects_bad_weights(name):
    qt = quant.get(name)
    good = np.ones((2, 512), np.float32)
    with_nan = good.copy()
    with_nan[1, 7] = np.nan
    assert "(1, 7)" in one_line_error(qt.quantize, with_nan, match="NaN/Inf")
    with_inf = good.copy()
    with_inf[0, 3] = -np.inf
    one_line_error(qt.quantize, with_inf, match="NaN/Inf")
    one_line_error(qt.quantize, np.ones((2, qt.block + 16), np.float32), match="not a multiple of the block size")
    one_line_error(qt.quantize, good.astype(np.float64), match="expected float32")
    one_line_error(qt.quantize, good.astype(np.float16), match="expected float32")
    one_line_error(qt.quantize, good[0], match="2-D")
    one_line_error(qt.quantize, good.reshape(1, 2, 512), match="2-D")
    one_line_error(qt.quantize, good.tolist(), match="numpy")
    one_line_error(qt.quantize, np.ones((0, 512), np.float32), match="empty")


@pytest.mark.parametrize("name", NAMES)
def test_quantize_rejects_weights_whose_scale_overflows_f16(name):
    qt = quant.get(name)
    w = np.full((1, 512), 1e10, np.float32)
    w[0, ::2] = -1e10
    one_line_error(qt.quantize, w, match="overflows float16")


@pytest.mark.parametrize("name", NAMES)
def test_dequantize_rejects_bad_packed(name):
    qt = quant.get(name)
    packed = qt.quantize(np.ones((2, 512), np.float32))
    for fn in (qt.dequantize, qt.decompose):
        one_line_error(fn, packed[:, :-1], match="not a multiple")
        one_line_error(fn, packed.astype(np.int16), match="uint8")
        one_line_error(fn, packed[0], match="2-D")
        one_line_error(fn, packed.tolist(), match="numpy")
    corrupt = packed.copy()
    off = qt.f16_offsets[0]
    corrupt[0, off:off + 2] = np.array([np.inf], "<f2").view(np.uint8)
    one_line_error(qt.dequantize, corrupt, match="NaN/Inf")


def test_get_resolves_names_and_rejects_unknown():
    assert quant.get("q4_K") is quant.QTYPES["q4_K"]
    assert quant.get("Q6_K") is quant.QTYPES["q6_K"]
    assert quant.get(quant.QTYPES["q8_0"]) is quant.QTYPES["q8_0"]
    assert set(quant.QTYPES) == {"q4_K", "q5_K", "q6_K", "q8_0"}
    message = one_line_error(quant.get, "q3_K", match="unknown quant type")
    assert "q4_K" in message


def test_gguf_enum_members():
    assert quant.get("q4_K").ggml_type == gguf.GGMLQuantizationType.Q4_K
    assert quant.get("q8_0").ggml_type == gguf.GGMLQuantizationType.Q8_0

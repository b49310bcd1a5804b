"""Shared pieces of the ggml block formats: QType/IntForm, f16 fields, validation, float32 helpers.

Float32 discipline: ggml's C reference quantizers work in float32, one rounding per
operation, sums accumulated left to right. Every helper here keeps that: numpy float32
elementwise ops are IEEE single operations (never fused), and `sequential_sum` adds in
the C loop order instead of numpy's pairwise order. The K-quant quantizers were checked
byte-equal to ggml's C reference built without FMA contraction (gcc -std=c11, or the x86-64
baseline); a build that contracts a*b+c into FMA (gcc -march=native in GNU C mode, for
instance) rounds differently and gives different bytes in some blocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from gguf import GGMLQuantizationType

F32 = np.float32
F16_LE = np.dtype("<f2")


@dataclass(frozen=True)
class IntForm:
    """Integer view of a quantized matrix: w[m, k] = scale[m, k//group] * q[m, k] - minv[m, k//group].

    The expression is evaluated in float32 (product rounded, then difference rounded),
    which is exactly how the dequantizer and gguf's numpy dequantizer compute w.
    """

    q: np.ndarray  # uint8 (q4_K, q5_K) or int8 (q6_K, q8_0), [M, K]
    group: int  # weights sharing one scale: 32, or 16 for q6_K
    scale: np.ndarray  # float32 [M, K // group]
    minv: np.ndarray | None  # float32 [M, K // group], only for types with a min


@dataclass(frozen=True)
class QType:
    """One ggml weight format: its sizes and its numpy (de)quantizers."""

    name: str
    block: int  # weights per block
    type_size: int  # bytes per block
    ggml_type: GGMLQuantizationType
    quantize: Callable[[np.ndarray], np.ndarray]  # float32 [M, K] -> uint8 [M, K // block * type_size]
    dequantize: Callable[[np.ndarray], np.ndarray]  # uint8 [M, row_bytes] -> float32 [M, K]
    decompose: Callable[[np.ndarray], IntForm]
    f16_offsets: tuple[int, ...] = ()  # byte offsets of the f16 scale fields in a block

    def row_bytes(self, k: int) -> int:
        return k // self.block * self.type_size

    def rms_error(self, w: np.ndarray, packed: np.ndarray) -> float:
        """Root-mean-square of dequantize(packed) - w, in float64."""
        diff = self.dequantize(packed).astype(np.float64) - np.asarray(w, dtype=np.float64)
        return float(np.sqrt(np.mean(diff * diff)))

    def quantize_report(self, w: np.ndarray) -> tuple[np.ndarray, float]:
        """(packed bytes, RMS round-trip error) for float32 weights w."""
        packed = self.quantize(w)
        return packed, self.rms_error(w, packed)

    def random_packed(self, m: int, k: int, rng: np.random.Generator,
                      scale_range: tuple[float, float] = (1e-3, 1e-2)) -> np.ndarray:
        """Random valid blocks: every quant/scale bit pattern, f16 scales uniform in scale_range.

        Exercises bit layouts no quantizer would produce (fuzzing, benchmarks).
        """
        blocks = rng.integers(0, 256, (m, k // self.block, self.type_size), dtype=np.uint8)
        for off in self.f16_offsets:
            scales = rng.uniform(*scale_range, blocks.shape[:2]).astype(F16_LE)
            blocks[..., off:off + 2] = f16_bytes(scales)
        return blocks.reshape(m, self.row_bytes(k))


# ---------------------------------------------------------------- validation

def check_weights(w: object, block: int, who: str) -> np.ndarray:
    """Return w as a C-contiguous float32 [M, K] matrix or raise a one-line ValueError."""
    if not isinstance(w, np.ndarray):
        raise ValueError(f"{who}: expected a numpy float32 array, got {type(w).__name__}")
    if w.dtype != np.float32:
        raise ValueError(f"{who}: expected float32 weights, got dtype {w.dtype}")
    if w.ndim != 2:
        raise ValueError(f"{who}: expected a 2-D [M, K] array, got shape {w.shape}")
    m, k = w.shape
    if m == 0 or k == 0:
        raise ValueError(f"{who}: empty matrix of shape {w.shape}")
    if k % block:
        raise ValueError(f"{who}: row length K={k} is not a multiple of the block size {block}")
    check_finite(w, who, "weights")
    return np.ascontiguousarray(w)


def check_finite(x: np.ndarray, who: str, what: str) -> None:
    finite = np.isfinite(x)
    if not finite.all():
        bad = tuple(int(i) for i in np.argwhere(~finite)[0])
        n_bad = int(x.size - np.count_nonzero(finite))
        raise ValueError(f"{who}: {what} contain {n_bad} NaN/Inf value(s), first at index {bad} ({x[bad]})")


def check_packed(packed: object, block: int, type_size: int, who: str) -> np.ndarray:
    """Return packed bytes as uint8 [M, n_blocks, type_size] or raise a one-line ValueError."""
    if not isinstance(packed, np.ndarray):
        raise ValueError(f"{who}: expected a numpy uint8 array, got {type(packed).__name__}")
    if packed.dtype != np.uint8:
        raise ValueError(f"{who}: expected uint8 packed bytes, got dtype {packed.dtype}")
    if packed.ndim != 2:
        raise ValueError(f"{who}: expected a 2-D [M, row_bytes] array, got shape {packed.shape}")
    m, row_bytes = packed.shape
    if m == 0 or row_bytes == 0:
        raise ValueError(f"{who}: empty packed matrix of shape {packed.shape}")
    if row_bytes % type_size:
        raise ValueError(f"{who}: row of {row_bytes} bytes is not a multiple of the {type_size}-byte block")
    return np.ascontiguousarray(packed).reshape(m, row_bytes // type_size, type_size)


# ---------------------------------------------------------------- f16 fields

def read_f16(blocks: np.ndarray, offset: int, who: str, field: str) -> np.ndarray:
    """float32 value of the little-endian f16 at byte `offset` of every block ([..., type_size])."""
    raw = np.ascontiguousarray(blocks[..., offset:offset + 2])
    value = raw.view(F16_LE)[..., 0].astype(F32)
    if not np.isfinite(value).all():
        raise ValueError(f"{who}: corrupt block, f16 field '{field}' is NaN/Inf")
    return value


def f16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 to f16 (nearest even, like GGML_FP32_TO_FP16); returns the f16 array."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=F32).astype(F16_LE)


def f16_bytes(h: np.ndarray) -> np.ndarray:
    """The 2 little-endian bytes of each f16 in h: [...] -> uint8 [..., 2]."""
    return np.ascontiguousarray(h, dtype=F16_LE).view(np.uint8).reshape(*h.shape, 2)


def check_f16_scale(h: np.ndarray, who: str, field: str) -> None:
    """A scale that overflowed f16 would dequantize to Inf/NaN: refuse it."""
    if not np.isfinite(h).all():
        raise ValueError(f"{who}: weights too large, block scale '{field}' overflows float16 (max 65504)")


# ---------------------------------------------------------------- float32 arithmetic as in C

_ROUND_MAGIC = F32(12582912.0)  # 1.5 * 2**23


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: add 1.5*2^23 in float32 and read the low mantissa bits.

    Round half to even for |v| < 2^22; reproduced bit for bit (including what the
    trick gives out of that range) so edge blocks land on the same integers as C.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        bits = (np.asarray(v, dtype=F32) + _ROUND_MAGIC).view(np.int32)
    return (bits & np.int32(0x007FFFFF)) - np.int32(0x00400000)


def sequential_sum(terms: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """Float32 sum over axis 0, added left to right like a C loop `acc += terms[i]`.

    `start` is the initial accumulator (0 when None, as in `float s = 0; for ...`).
    Loops only over the (16 or 32) positions of a sub-block; each add is vectorized
    over every sub-block.
    """
    acc = np.zeros(terms.shape[1:], dtype=F32) if start is None else np.array(start, dtype=F32)
    for row in terms:
        acc += row
    return acc


def round_half_away(v: np.ndarray) -> np.ndarray:
    """C roundf (half away from zero), exact in float32."""
    a = np.abs(v)
    r = np.floor(a)
    r += (a - r) >= F32(0.5)  # a - floor(a) is exact
    return np.copysign(r, v)


def in_chunks(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, rows: int = 2048) -> np.ndarray:
    """fn applied to row chunks of x, results stacked: bounds the search's temporaries (and keeps them in cache)."""
    if x.shape[0] <= rows:
        return fn(x)
    return np.concatenate([fn(x[i:i + rows]) for i in range(0, x.shape[0], rows)], axis=0)


def dequantize_form(form: IntForm) -> np.ndarray:
    """float32 w = scale * q - minv, one rounding per operation (the dequantizer's order)."""
    m, k = form.q.shape
    q = form.q.astype(F32).reshape(m, k // form.group, form.group)
    w = form.scale[:, :, None] * q
    if form.minv is not None:
        w -= form.minv[:, :, None]
    return w.reshape(m, k)

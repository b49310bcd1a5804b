"""Q8_1 activations: the layout and arithmetic the GPU kernels read and must reproduce.

    Q8_1Act.q  int8    [T, K]       row-major, 32 consecutive values of a row form a block
    Q8_1Act.d  float32 [T, K // 32] block scale, d = amax / 127
    Q8_1Act.s  int32   [T, K // 32] block sum of q (the weight-min rank-1 term uses d * s)

Per 32-block, all float32 IEEE operations (a GPU quantizer must produce identical bytes):
    amax = max |x|
    d    = amax / 127                          (division, not a multiply by 1/127)
    q    = clamp(rint(x / d), -127, 127)       (division by d, round half to even); d == 0 -> q = 0
    s    = sum(q)                              (exact integer)

Subnormals are kept (a GPU build must not flush them: no -ftz / fast-math on this path).
Note this is our contract, not ggml's block_q8_1 (which stores d and d*sum as f16 and
rounds x * (1/d) half away from zero): float32 d keeps the reference exact.

Input: float32 [T, K], or bf16 [T, K] given as np.uint16 bit patterns (or an
ml_dtypes bfloat16 array), widened to float32 exactly (bits << 16).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import F32, check_finite

BLOCK = 32
SUPER_BLOCK = 256  # quantize_q8_k's block: one scale per 256 values


@dataclass(frozen=True)
class Q8_1Act:
    q: np.ndarray  # int8 [T, K]
    d: np.ndarray  # float32 [T, K // 32]
    s: np.ndarray  # int32 [T, K // 32]

    @property
    def shape(self) -> tuple[int, int]:
        return self.q.shape


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """Exact widening of bf16 bit patterns (uint16) to float32."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(F32)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, round to nearest even (for making bf16 test inputs)."""
    u = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    rounded = u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def activations_as_float32(x: object, who: str) -> np.ndarray:
    """Validate an activation matrix and return it as C-contiguous float32 [T, K]."""
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{who}: expected a numpy array, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"{who}: expected a 2-D [T, K] array, got shape {x.shape}")
    if x.dtype == np.float32:
        xf = np.ascontiguousarray(x)
    elif x.dtype == np.uint16 or x.dtype.name == "bfloat16":
        xf = bf16_bits_to_float32(x.view(np.uint16))
    else:
        raise ValueError(f"{who}: expected float32, or bf16 as uint16 bit patterns, got dtype {x.dtype}")
    t, k = xf.shape
    if t == 0 or k == 0:
        raise ValueError(f"{who}: empty matrix of shape {xf.shape}")
    if k % BLOCK:
        raise ValueError(f"{who}: row length K={k} is not a multiple of the block size {BLOCK}")
    check_finite(xf, who, "activations")
    return xf


def quantize_q8_1(x: np.ndarray) -> Q8_1Act:
    """float32 or bf16 [T, K] -> Q8_1Act (see the module docstring for the exact ops)."""
    return quantize_q8_1_blocks(activations_as_float32(x, "q8_1 quantize"), BLOCK)


def quantize_q8_1_blocks(xf: np.ndarray, block: int) -> Q8_1Act:
    """Q8_1's arithmetic over blocks of `block` values of a checked float32 [T, K] (K a multiple of block): d and s per
    block."""
    t, k = xf.shape
    blocks = xf.reshape(t, k // block, block)
    d = np.abs(blocks).max(axis=2) / F32(127)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(blocks / d[..., None])
    q = np.where(d[..., None] == 0, F32(0), np.clip(q, -127, 127)).astype(np.int8)
    s = q.sum(axis=2, dtype=np.int32)
    return Q8_1Act(q=q.reshape(t, k), d=d.astype(F32), s=s)


def quantize_q8_k(x: np.ndarray) -> Q8_1Act:
    """float32 or bf16 [T, K] -> Q8_1Act with one scale per 256 values (llama.cpp's Q8_K granularity): each 256-block
    quantized by quantize_q8_1's arithmetic (amax / 127, rint(x / d)), its d repeated over its eight 32-blocks, s the
    32-blocks' sums. So every integer-contract reference reads it as it reads Q8_1 (the direct_q8 kernel's format)."""
    xf = activations_as_float32(x, "q8_k quantize")
    t, k = xf.shape
    if k % SUPER_BLOCK:
        raise ValueError(f"q8_k quantize: row length K={k} is not a multiple of the block size {SUPER_BLOCK}")
    wide = quantize_q8_1_blocks(xf, SUPER_BLOCK)
    q = wide.q.reshape(t, k // BLOCK, BLOCK)
    return Q8_1Act(q=wide.q, d=np.repeat(wide.d, SUPER_BLOCK // BLOCK, axis=1), s=q.sum(axis=2, dtype=np.int32))


def dequantize_q8_1(xq: Q8_1Act) -> np.ndarray:
    """float32 [T, K]: d * q per block."""
    t, k = xq.q.shape
    x = xq.d[..., None] * xq.q.reshape(t, k // BLOCK, BLOCK).astype(F32)
    return x.reshape(t, k)

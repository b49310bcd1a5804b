"""Q8_0: 32 weights in 34 bytes, w = d*q.

Block layout (bytes): [0:2] d f16, [2:34] q int8.

Quantizer: ggml's quantize_row_q8_0_ref math (float32): d = amax/127, id = 1/d
(0 when d is 0), q = roundf(x*id) (half away from zero), d stored as f16.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

from .common import (F32, IntForm, QType, check_f16_scale, check_packed, check_weights, dequantize_form,
                     f16_bytes, f16_round, read_f16, round_half_away)

NAME = "q8_0"
BLOCK = 32
TYPE_SIZE = 34


def quantize(w: np.ndarray) -> np.ndarray:
    """float32 [M, K] -> uint8 [M, K/32*34]."""
    who = f"{NAME} quantize"
    w = check_weights(w, BLOCK, who)
    m, k = w.shape
    x = w.reshape(-1, BLOCK)
    d = np.abs(x).max(axis=1) / F32(127)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(d == 0, F32(0), F32(1) / d)
        # |x*inv| <= 127 up to rounding; the clip only matters when 1/d overflows (|x| < ~1e-36)
        q = np.clip(np.nan_to_num(round_half_away(x * inv[:, None])), -127, 127).astype(np.int8)
    d16 = f16_round(d)
    check_f16_scale(d16, who, "d")
    blocks = np.concatenate([f16_bytes(d16), q.view(np.uint8)], axis=1)
    return blocks.reshape(m, k // BLOCK * TYPE_SIZE)


def decompose(packed: np.ndarray) -> IntForm:
    who = f"{NAME} dequantize"
    blocks = check_packed(packed, BLOCK, TYPE_SIZE, who)
    m, nb, _ = blocks.shape
    d = read_f16(blocks, 0, who, "d")
    q = np.ascontiguousarray(blocks[..., 2:34]).view(np.int8).reshape(m, nb * BLOCK)
    return IntForm(q=q, group=BLOCK, scale=d.reshape(m, nb), minv=None)


def dequantize(packed: np.ndarray) -> np.ndarray:
    """uint8 [M, row_bytes] -> float32 [M, K]."""
    return dequantize_form(decompose(packed))


QTYPE = QType(name=NAME, block=BLOCK, type_size=TYPE_SIZE, ggml_type=GGMLQuantizationType.Q8_0,
              quantize=quantize, dequantize=dequantize, decompose=decompose, f16_offsets=(0,))

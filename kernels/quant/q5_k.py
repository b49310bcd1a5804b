"""Q5_K: 256 weights in 176 bytes, w = d*sc_j*q - dmin*m_j, q in 0..31, 8 sub-blocks of 32.

Block layout (bytes):
    [0:2]    d, [2:4] dmin (f16), [4:16] scales: as Q4_K (get_scale_min_k4 layout)
    [16:48]  qh: bit j of byte l is the high bit (16) of element l of sub-block j
    [48:176] qs: low 4 bits, as Q4_K (chunk c: sub-block 2c low nibbles, 2c+1 high nibbles)

Quantizer: ggml's quantize_row_q5_K_ref math, the Q4_K pipeline with nmax 31,
rmin -0.5, rdelta 0.1, 15 search steps.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

from .common import (F32, IntForm, QType, check_packed, check_weights, dequantize_form, f16_bytes, in_chunks,
                     read_f16)
from .q4_k import SUB, quantize_superblocks_with_min, unpack_scale_min_k4

NAME = "q5_K"
BLOCK = 256
TYPE_SIZE = 176
_BIT = np.arange(8, dtype=np.uint8)


def _pack(w: np.ndarray, nstep: int) -> np.ndarray:
    who = f"{NAME} quantize"
    w = check_weights(w, BLOCK, who)
    m, k = w.shape

    def pack_superblocks(x: np.ndarray) -> np.ndarray:
        d16, dmin16, scales, levels = quantize_superblocks_with_min(x, 31, -0.5, 0.1, nstep, who)
        sub = levels.reshape(-1, 8, SUB)  # [S, sub-block, 32]
        qh = np.bitwise_or.reduce((sub >> 4) << _BIT[None, :, None], axis=1).astype(np.uint8)
        nib = (sub & 0xF).reshape(-1, 4, 2, SUB)
        qs = (nib[:, :, 0] | (nib[:, :, 1] << 4)).reshape(-1, 128)
        return np.concatenate([f16_bytes(d16), f16_bytes(dmin16), scales, qh, qs], axis=1)

    return in_chunks(pack_superblocks, w.reshape(-1, BLOCK)).reshape(m, k // BLOCK * TYPE_SIZE)


def quantize(w: np.ndarray) -> np.ndarray:
    """float32 [M, K] -> uint8 [M, K/256*176], ggml's reference Q5_K quantizer."""
    return _pack(w, nstep=15)


def quantize_minmax(w: np.ndarray) -> np.ndarray:
    """Baseline without the scale/min search: each sub-block on its plain min/max grid."""
    return _pack(w, nstep=0)


def decompose(packed: np.ndarray) -> IntForm:
    who = f"{NAME} dequantize"
    blocks = check_packed(packed, BLOCK, TYPE_SIZE, who)
    m, nb, _ = blocks.shape
    d = read_f16(blocks, 0, who, "d")
    dmin = read_f16(blocks, 2, who, "dmin")
    sc, mn = unpack_scale_min_k4(blocks[..., 4:16])
    qh = blocks[..., 16:48].reshape(m, nb, 1, SUB)
    high = ((qh >> _BIT.reshape(8, 1)) & 1).reshape(m, nb, 8, SUB)
    qs = blocks[..., 48:176].reshape(m, nb, 4, 1, SUB)
    low = ((qs >> np.array([0, 4], dtype=np.uint8).reshape(2, 1)) & 0xF).reshape(m, nb, 8, SUB)
    q = (low | (high << 4)).reshape(m, nb * BLOCK)
    scale = (d[..., None] * sc.astype(F32)).reshape(m, nb * 8)
    minv = (dmin[..., None] * mn.astype(F32)).reshape(m, nb * 8)
    return IntForm(q=q, group=SUB, scale=scale, minv=minv)


def dequantize(packed: np.ndarray) -> np.ndarray:
    """uint8 [M, row_bytes] -> float32 [M, K]."""
    return dequantize_form(decompose(packed))


QTYPE = QType(name=NAME, block=BLOCK, type_size=TYPE_SIZE, ggml_type=GGMLQuantizationType.Q5_K,
              quantize=quantize, dequantize=dequantize, decompose=decompose, f16_offsets=(0, 2))

"""Q6_K: 256 weights in 210 bytes, w = d*sc_j*(q6 - 32), 16 sub-blocks of 16, no min.

Block layout (bytes), element e = 128*n + 32*g + l (n half, g 0..3, l 0..31):
    [0:128]   ql: low 4 bits. g=0: ql[64n+l] low nibble, g=1: ql[64n+32+l] low,
              g=2: ql[64n+l] high nibble, g=3: ql[64n+32+l] high
    [128:192] qh: high 2 bits, bits 2g..2g+1 of qh[32n+l]
    [192:208] scales: 16 int8, sub-block j = e // 16
    [208:210] d: f16

Quantizer: ggml's quantize_row_q6_K_ref math. Per sub-block make_qx_quants
(nmax 32, weights x^2, 19 trial grids -(32 + 0.1*is)/max), the 16 scales quantized
to int8 against the one with the largest magnitude (d = max_scale / -128), then
every weight re-rounded with the final f16-based scale.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

from .common import (F32, IntForm, QType, check_f16_scale, check_packed, check_weights, dequantize_form,
                     f16_bytes, f16_round, in_chunks, nearest_int, read_f16, sequential_sum)

NAME = "q6_K"
BLOCK = 256
TYPE_SIZE = 210
SUB = 16
GROUP_MAX_EPS = F32(1e-15)


def make_qx_quants(x: np.ndarray, nmax: int, search: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Signed quants L in 0..2*nmax-1 (value L - nmax) and a scale, x ~ scale * (L - nmax).

    x: float32 [n, ...] (position axis first). Weighting x^2 (ggml rmse_type 1). The
    start grid maps the largest-magnitude value to -nmax; the best least-squares scale
    over the grids -(nmax + 0.1*is)/max, is = -9..9, is kept. search=False: rmse_type 0,
    the plain amax grid (the baseline).
    """
    ax = np.abs(x)
    first_max = np.argmax(ax, axis=0)  # C keeps the first position reaching the max magnitude
    amax = np.take_along_axis(ax, first_max[None], axis=0)[0]
    vmax = np.take_along_axis(x, first_max[None], axis=0)[0]
    zero = amax < GROUP_MAX_EPS

    def grid(iscale):
        return np.clip(nearest_int(iscale * x), -nmax, nmax - 1)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = F32(-nmax) / vmax
        levels = grid(iscale)
        if not search:
            scale = F32(1) / iscale
        else:
            weights = x * x

            def fit(lv):
                lf = lv.astype(F32)
                return sequential_sum(weights * x * lf), sequential_sum(weights * lf * lf)

            sumlx, suml2 = fit(levels)
            scale = np.where(suml2 != 0, sumlx / suml2, F32(0))
            best = scale * sumlx
            for step in range(-9, 10):
                if step == 0:
                    continue
                iscale = -(F32(nmax) + F32(0.1) * F32(step)) / vmax
                trial = grid(iscale)
                sumlx, suml2 = fit(trial)
                better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
                levels = np.where(better, trial, levels)
                scale = np.where(better, sumlx / suml2, scale)
                best = np.where(better, scale * sumlx, best)
    levels = np.where(zero, 0, levels + nmax).astype(np.uint8)
    scale = np.where(zero, F32(0), scale).astype(F32)
    return scale, levels


def _pack(w: np.ndarray, search: bool) -> np.ndarray:
    who = f"{NAME} quantize"
    w = check_weights(w, BLOCK, who)
    m, k = w.shape
    packed = in_chunks(lambda x: _pack_superblocks(x, search, who), w.reshape(-1, BLOCK))
    return packed.reshape(m, k // BLOCK * TYPE_SIZE)


def _pack_superblocks(x: np.ndarray, search: bool, who: str) -> np.ndarray:
    """float32 [S, 256] -> uint8 [S, 210]."""
    n_super = x.shape[0]
    xs = np.ascontiguousarray(x.reshape(n_super, 16, SUB).transpose(2, 0, 1))  # [16, S, 16]
    scales, levels = make_qx_quants(xs, 32, search)  # [S, 16], [16, S, 16]

    first_max = np.argmax(np.abs(scales), axis=1)
    max_scale = np.take_along_axis(scales, first_max[:, None], axis=1)[:, 0]
    empty = np.abs(max_scale) < GROUP_MAX_EPS  # C writes an all-zero block
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = F32(-128) / max_scale
        d16 = f16_round(F32(1) / iscale)
        # C stores MIN(127, nearest_int(.)) into an int8 (mod 256)
        sc = np.minimum(nearest_int(iscale[:, None] * scales), 127).astype(np.int8)
    d16 = np.where(empty, np.float16(0), d16).astype(d16.dtype)
    sc = np.where(empty[:, None], np.int8(0), sc)
    check_f16_scale(d16, who, "d")

    d = d16.astype(F32)[:, None] * sc.astype(F32)  # [S, 16]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        requant = (np.clip(nearest_int(xs / d), -32, 31) + 32).astype(np.uint8)
    levels = np.where(d != 0, requant, levels)  # C skips sub-blocks whose scale is 0
    levels = np.where(empty[:, None], np.uint8(0), levels)
    levels = levels.transpose(1, 2, 0).reshape(n_super, BLOCK)

    low = (levels & 0xF).reshape(n_super, 2, 2, 64)  # [S, half, nibble, byte]
    ql = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(n_super, 128)
    high = (levels >> 4).reshape(n_super, 2, 4, 32)  # [S, half, g, l]
    qh = (high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)).reshape(n_super, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), f16_bytes(d16)], axis=1)


def quantize(w: np.ndarray) -> np.ndarray:
    """float32 [M, K] -> uint8 [M, K/256*210], ggml's reference Q6_K quantizer."""
    return _pack(w, search=True)


def quantize_minmax(w: np.ndarray) -> np.ndarray:
    """Baseline without the scale search: each sub-block on its plain amax grid."""
    return _pack(w, search=False)


def decompose(packed: np.ndarray) -> IntForm:
    who = f"{NAME} dequantize"
    blocks = check_packed(packed, BLOCK, TYPE_SIZE, who)
    m, nb, _ = blocks.shape
    ql = blocks[..., 0:128].reshape(m, nb, 2, 1, 64)
    low = (ql >> np.array([0, 4], dtype=np.uint8).reshape(2, 1)) & 0xF  # [m, nb, half, nibble, 64]
    qh = blocks[..., 128:192].reshape(m, nb, 2, 1, 32)
    high = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(4, 1)) & 3  # [m, nb, half, g, 32]
    q6 = low.reshape(m, nb, BLOCK) | (high.reshape(m, nb, BLOCK) << 4)
    q = (q6.astype(np.int8) - np.int8(32)).reshape(m, nb * BLOCK)
    sc = blocks[..., 192:208].view(np.int8)
    d = read_f16(blocks, 208, who, "d")
    scale = (d[..., None] * sc.astype(F32)).reshape(m, nb * 16)
    return IntForm(q=q, group=SUB, scale=scale, minv=None)


def dequantize(packed: np.ndarray) -> np.ndarray:
    """uint8 [M, row_bytes] -> float32 [M, K]."""
    return dequantize_form(decompose(packed))


QTYPE = QType(name=NAME, block=BLOCK, type_size=TYPE_SIZE, ggml_type=GGMLQuantizationType.Q6_K,
              quantize=quantize, dequantize=dequantize, decompose=decompose, f16_offsets=(208,))

"""Q4_K: 256 weights in 144 bytes, w = d*sc_j*q - dmin*m_j, q in 0..15, 8 sub-blocks of 32.

Block layout (bytes):
    [0:2]    d     f16, super-block scale of the sub-block scales
    [2:4]    dmin  f16, super-block scale of the sub-block mins
    [4:16]   scales: eight 6-bit (sc_j, m_j) pairs, get_scale_min_k4 layout
               j < 4: sc_j = b[j] & 63,               m_j = b[j+4] & 63
               j >= 4: sc_j = (b[j+4] & 15) | (b[j-4] >> 6) << 4,
                       m_j = (b[j+4] >> 4) | (b[j] >> 6) << 4
    [16:144] qs: four 32-byte chunks; chunk c holds sub-block 2c in the low nibbles
             and sub-block 2c+1 in the high nibbles (byte l -> element l of each).

The quantizer is the math of ggml's quantize_row_q4_K_ref: per sub-block the
weighted min/scale search make_qkx2_quants (weights av_x + |x|, nmax 15,
rmin -1, rdelta 0.1, 20 steps), 6-bit quantization of the scales and mins
against their super-block maxima, then every weight re-rounded with the final
f16-based scale and min. All float32, C evaluation order, no FMA.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

from .common import (F32, IntForm, QType, check_f16_scale, check_packed, check_weights, dequantize_form,
                     f16_bytes, f16_round, in_chunks, nearest_int, read_f16, sequential_sum)

NAME = "q4_K"
BLOCK = 256
TYPE_SIZE = 144
SUB = 32  # weights per sub-block


# ---------------------------------------------------------------- make_qkx2_quants

def make_qkx2_quants(x: np.ndarray, weights: np.ndarray, nmax: int, rmin: float, rdelta: float,
                     nstep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted least-squares (scale, min) search for unsigned nmax-level quants.

    x, weights: float32 [n, ...] (position axis first, any number of sub-blocks after).
    Returns (scale [...], the_min [...] >= 0, L uint8 [n, ...]) with x ~ scale*L - the_min.

    Start from the min/max grid, then (if nstep >= 1) try nstep+1 grids iscale = (nmax + rmin
    + rdelta*is) / (max - min); for each, fit scale and min by weighted least squares on the resulting
    integers (min clamped <= 0) and keep it if its weighted squared error is lower. The
    search is sequential per sub-block (a later grid uses the best min so far), so it is
    run for all sub-blocks at once with per-sub-block state.
    """
    nmax_f = F32(nmax)
    lo = np.minimum(x.min(axis=0), F32(0))
    hi = x.max(axis=0)
    sum_w = sequential_sum(weights[1:], start=weights[0])
    sum_x = sequential_sum(weights[1:] * x[1:], start=weights[0] * x[0])
    flat = hi == lo  # all values equal and <= 0: scale 0, nothing to search

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = nmax_f / (hi - lo)
        scale = F32(1) / iscale
        levels = np.clip(nearest_int(iscale * (x - lo)), 0, nmax).astype(np.uint8)
        diff = scale * levels + lo - x
        best_error = sequential_sum(weights * (diff * diff))
        best_min = lo.copy()

        for step in range(nstep + 1 if nstep >= 1 else 0):  # C: nstep < 1 keeps the min/max grid
            iscale = (F32(rmin) + F32(rdelta) * F32(step) + nmax_f) / (hi - best_min)
            trial = np.clip(nearest_int(iscale * (x - best_min)), 0, nmax)
            lf = trial.astype(F32)
            wl = weights * lf
            sum_l = sequential_sum(wl)
            sum_l2 = sequential_sum(wl * lf)
            sum_xl = sequential_sum(wl * x)
            det = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
            positive_min = this_min > 0
            this_min = np.where(positive_min, F32(0), this_min)
            this_scale = np.where(positive_min, sum_xl / sum_l2, this_scale)
            diff = this_scale * lf + this_min - x
            cur_error = sequential_sum(weights * (diff * diff))
            better = (det > 0) & (cur_error < best_error)
            levels = np.where(better, trial.astype(np.uint8), levels)
            best_error = np.where(better, cur_error, best_error)
            scale = np.where(better, this_scale, scale)
            best_min = np.where(better, this_min, best_min)

    scale = np.where(flat, F32(0), scale).astype(F32)
    the_min = -np.where(flat, lo, best_min).astype(F32)
    levels = np.where(flat, np.uint8(0), levels)
    return scale, the_min, levels


# ---------------------------------------------------------------- 6-bit scale/min packing

def pack_scale_min_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Eight 6-bit scales and mins [..., 8] (uint8 <= 63) -> the 12-byte get_scale_min_k4 layout."""
    out = np.empty((*ls.shape[:-1], 12), dtype=np.uint8)
    out[..., 0:4] = ls[..., 0:4] | ((ls[..., 4:8] >> 4) << 6)
    out[..., 4:8] = lm[..., 0:4] | ((lm[..., 4:8] >> 4) << 6)
    out[..., 8:12] = (ls[..., 4:8] & 0xF) | ((lm[..., 4:8] & 0xF) << 4)
    return out


def unpack_scale_min_k4(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """12 packed bytes [..., 12] -> (sc [..., 8], m [..., 8]) uint8."""
    lo4, mid4, hi4 = b[..., 0:4], b[..., 4:8], b[..., 8:12]
    sc = np.concatenate([lo4 & 63, (hi4 & 0xF) | ((lo4 >> 6) << 4)], axis=-1)
    m = np.concatenate([mid4 & 63, (hi4 >> 4) | ((mid4 >> 6) << 4)], axis=-1)
    return sc, m


# ---------------------------------------------------------------- super-blocks with a min (Q4_K, Q5_K)

def quantize_superblocks_with_min(x: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int,
                                  who: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shared Q4_K/Q5_K math. x: float32 [S, 256] super-blocks.

    Returns (d f16 [S], dmin f16 [S], scales uint8 [S, 12], L uint8 [S, 256] in 0..nmax).
    nstep = 0 skips the search: the plain min/max quantizer.
    """
    n_super = x.shape[0]
    xs = np.ascontiguousarray(x.reshape(n_super, 8, SUB).transpose(2, 0, 1))  # [32, S, 8]
    sum_x2 = sequential_sum(xs * xs)
    av_x = np.sqrt(sum_x2 / F32(SUB))
    weights = av_x + np.abs(xs)
    scales, mins, levels = make_qkx2_quants(xs, weights, nmax, rmin, rdelta, nstep)

    max_scale = np.maximum(scales.max(axis=1), F32(0))
    max_min = np.maximum(mins.max(axis=1), F32(0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0))
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0))
        # C stores nearest_int into a uint8 (mod 256) before MIN(63, .)
        ls = np.minimum(nearest_int(inv_scale[:, None] * scales) & 0xFF, 63).astype(np.uint8)
        lm = np.minimum(nearest_int(inv_min[:, None] * mins) & 0xFF, 63).astype(np.uint8)
    d16 = f16_round(max_scale / F32(63))
    dmin16 = f16_round(max_min / F32(63))
    check_f16_scale(d16, who, "d")
    check_f16_scale(dmin16, who, "dmin")

    d = d16.astype(F32)[:, None] * ls.astype(F32)  # [S, 8]
    dm = dmin16.astype(F32)[:, None] * lm.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        requant = np.clip(nearest_int((xs + dm) / d), 0, nmax).astype(np.uint8)
    levels = np.where(d != 0, requant, levels)  # C skips sub-blocks whose scale is 0
    levels = levels.transpose(1, 2, 0).reshape(n_super, BLOCK)
    return d16, dmin16, pack_scale_min_k4(ls, lm), levels


# ---------------------------------------------------------------- Q4_K

def _pack(w: np.ndarray, nstep: int) -> np.ndarray:
    who = f"{NAME} quantize"
    w = check_weights(w, BLOCK, who)
    m, k = w.shape

    def pack_superblocks(x: np.ndarray) -> np.ndarray:
        d16, dmin16, scales, levels = quantize_superblocks_with_min(x, 15, -1.0, 0.1, nstep, who)
        nib = levels.reshape(-1, 4, 2, SUB)  # [S, chunk, low/high, 32]
        qs = (nib[:, :, 0] | (nib[:, :, 1] << 4)).reshape(-1, 128)
        return np.concatenate([f16_bytes(d16), f16_bytes(dmin16), scales, qs], axis=1)

    return in_chunks(pack_superblocks, w.reshape(-1, BLOCK)).reshape(m, k // BLOCK * TYPE_SIZE)


def quantize(w: np.ndarray) -> np.ndarray:
    """float32 [M, K] -> uint8 [M, K/256*144], ggml's reference Q4_K quantizer."""
    return _pack(w, nstep=20)


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
    qs = blocks[..., 16:144].reshape(m, nb, 4, 1, SUB)
    q = ((qs >> np.array([0, 4], dtype=np.uint8).reshape(2, 1)) & 0xF).reshape(m, nb * BLOCK)
    scale = (d[..., None] * sc.astype(F32)).reshape(m, nb * 8)
    minv = (dmin[..., None] * mn.astype(F32)).reshape(m, nb * 8)
    return IntForm(q=q, group=SUB, scale=scale, minv=minv)


def dequantize(packed: np.ndarray) -> np.ndarray:
    """uint8 [M, row_bytes] -> float32 [M, K]."""
    return dequantize_form(decompose(packed))


QTYPE = QType(name=NAME, block=BLOCK, type_size=TYPE_SIZE, ggml_type=GGMLQuantizationType.Q4_K,
              quantize=quantize, dequantize=dequantize, decompose=decompose, f16_offsets=(0, 2))

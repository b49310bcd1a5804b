"""CPU reference GEMMs, out[t, m] = sum_k x[t, k] * w[m, k], the yardsticks of the parity gate.

gemm_int: the integer contract every MMQ kernel implements. For each 32-block b of K
    out[t, m] += d_x[t, b] * (scale[m, b] * dot(q_w[m, b], q_x[t, b]) - minv[m, b] * s_x[t, b])
with q6_K's 16-wide scales as two halves per 32-block (each half its own dot and scale).
Dots are exact: integers in float64 (|dot| <= 32*127*63 << 2^53, so the BLAS matmul
makes no rounding); only the rescale and the sum over blocks round, in float64.

gemm_float64: x (float64) @ dequantize(w) (float64) transposed, no activation quantization.
"""
from __future__ import annotations

import numpy as np

from kernels import quant
from kernels.quant.q8_1 import BLOCK as QX_BLOCK, Q8_1Act, activations_as_float32

_CHUNK_ELEMENTS = 1 << 22  # float64 temporaries per M-chunk: 32 MiB
# Keep each per-block matmul under OpenBLAS's threading threshold (~65536*4 multiply-adds):
# these thin products gain nothing from threads, and spinning BLAS threads slow to a crawl
# when another process holds a core.
_SINGLE_THREAD_MACS = 1 << 17


def _checked(w_packed: np.ndarray, qtype: "str | quant.QType", k_act: int, who: str) -> quant.IntForm:
    qt = quant.get(qtype)
    form = qt.decompose(w_packed)
    k_w = form.q.shape[1]
    if k_w != k_act:
        raise ValueError(f"{who}: weight K={k_w} ({qt.name}) does not match activation K={k_act}")
    return form


def gemm_int_float64(w_packed: np.ndarray, qtype: "str | quant.QType", xq: Q8_1Act) -> np.ndarray:
    """The integer contract evaluated in float64: float64 [T, M]."""
    if not isinstance(xq, Q8_1Act):
        raise ValueError(f"gemm_int: expected Q8_1Act activations, got {type(xq).__name__}")
    t, k = xq.q.shape
    form = _checked(w_packed, qtype, k, "gemm_int")
    m = form.q.shape[0]
    g = form.group
    n_groups = k // g
    per_block = QX_BLOCK // g  # weight groups per activation block (1, or 2 for q6_K)

    qx = np.ascontiguousarray(xq.q.reshape(t, n_groups, g).transpose(1, 2, 0), dtype=np.float64)  # [G, g, T]
    d_x = np.repeat(xq.d.astype(np.float64), per_block, axis=1).T[:, None, :]  # [G, 1, T]
    s_x = xq.s.astype(np.float64).T[:, None, :] if form.minv is not None else None  # [G, 1, T]

    out = np.empty((m, t), dtype=np.float64)
    rows = max(1, min(_CHUNK_ELEMENTS // (n_groups * t), _SINGLE_THREAD_MACS // (g * t)))
    for m0 in range(0, m, rows):
        m1 = min(m, m0 + rows)
        qw = np.ascontiguousarray(form.q[m0:m1].reshape(m1 - m0, n_groups, g).transpose(1, 0, 2),
                                  dtype=np.float64)  # [G, rows, g]
        dots = np.matmul(qw, qx)  # [G, rows, T], exact integers
        dots *= form.scale[m0:m1].T.astype(np.float64)[:, :, None]
        if s_x is not None:
            dots -= form.minv[m0:m1].T.astype(np.float64)[:, :, None] * s_x
        dots *= d_x
        out[m0:m1] = dots.sum(axis=0)
    return out.T


def gemm_int(w_packed: np.ndarray, qtype: "str | quant.QType", xq: Q8_1Act) -> np.ndarray:
    """Exact integer-contract GEMM, float32 [T, M] (float64 result rounded once)."""
    return gemm_int_float64(w_packed, qtype, xq).astype(np.float32)


def gemm_float64(w_packed: np.ndarray, qtype: "str | quant.QType", x: np.ndarray) -> np.ndarray:
    """float64 [T, M] = x @ dequantize(w).T in float64; x float32 or bf16 bits (uint16) [T, K]."""
    xf = activations_as_float32(x, "gemm_float64")
    qt = quant.get(qtype)
    w = qt.dequantize(w_packed)
    if w.shape[1] != xf.shape[1]:
        raise ValueError(f"gemm_float64: weight K={w.shape[1]} ({qt.name}) does not match activation K={xf.shape[1]}")
    return xf.astype(np.float64) @ w.astype(np.float64).T

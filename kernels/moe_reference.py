"""CPU references of the MoE expert GEMM (ggml's mul_mat_id), the yardsticks of MoE parity:

    Y[t, slot, :] = W[ids[t, slot]] . x[t]        (times route_weights[t, slot] when given)

W: uint8 [n_experts, M, row_bytes] (ggml blocks), x: [T, K], ids: int [T, top_k], Y: [T, top_k, M].

moe_gemm_int: per (t, slot) exactly the dense integer contract of kernels.reference.gemm_int on
    the token's Q8_1 activation row, so a kernel that implements it per routed pair matches tight.
moe_gemm_float64: per (t, slot) x[t] (float64) . dequantize(W[e]) (float64).
Both group the pairs by expert (kernels.moe_routing.bucket) and make one dense reference call
per expert that has tokens; the routing weight multiplies the float64 result before rounding.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from kernels import quant, reference
from kernels.moe_routing import bucket
from kernels.moe_shapes import check_moe_arrays
from kernels.quant.q8_1 import Q8_1Act, activations_as_float32


def _per_expert(w_packed: np.ndarray, ids: np.ndarray, route_weights: np.ndarray | None, M: int,
                dense: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """float64 [T, top_k, M]; dense(expert weights, token indices) -> float64 [n_tokens, M]."""
    T, top_k = ids.shape
    n_experts = w_packed.shape[0]
    counts, offsets, order = bucket(ids, n_experts)
    out = np.empty((T * top_k, M), dtype=np.float64)
    for e in np.flatnonzero(counts):
        pairs = order[offsets[e]:offsets[e + 1]]
        out[pairs] = dense(w_packed[e], pairs // top_k)
    if route_weights is not None:
        out *= np.asarray(route_weights, dtype=np.float32).astype(np.float64).reshape(-1, 1)
    return out.reshape(T, top_k, M)


def moe_gemm_int_float64(w_packed: np.ndarray, qtype: "str | quant.QType", xq: Q8_1Act, ids: np.ndarray,
                         route_weights: np.ndarray | None = None) -> np.ndarray:
    """The integer contract per routed pair, float64 [T, top_k, M]."""
    if not isinstance(xq, Q8_1Act):
        raise ValueError(f"moe_gemm_int: expected Q8_1Act activations, got {type(xq).__name__}")
    qt = quant.get(qtype)
    T, K = xq.q.shape
    _, M, ids = check_moe_arrays(w_packed, qt.name, K, ids, route_weights, "moe_gemm_int")
    if ids.shape[0] != T:
        raise ValueError(f"moe_gemm_int: ids cover {ids.shape[0]} tokens, activations {T}")

    def dense(w: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        rows = Q8_1Act(q=xq.q[tokens], d=xq.d[tokens], s=xq.s[tokens])
        return reference.gemm_int_float64(w, qt, rows)

    return _per_expert(w_packed, ids, route_weights, M, dense)


def moe_gemm_int(w_packed: np.ndarray, qtype: "str | quant.QType", xq: Q8_1Act, ids: np.ndarray,
                 route_weights: np.ndarray | None = None) -> np.ndarray:
    """float32 [T, top_k, M]: the float64 integer-contract result rounded once."""
    return moe_gemm_int_float64(w_packed, qtype, xq, ids, route_weights).astype(np.float32)


def moe_gemm_float64(w_packed: np.ndarray, qtype: "str | quant.QType", x: np.ndarray, ids: np.ndarray,
                     route_weights: np.ndarray | None = None) -> np.ndarray:
    """float64 [T, top_k, M] = x[t] . dequantize(W[ids[t, slot]]) in float64 (x float32 or bf16 bits)."""
    qt = quant.get(qtype)
    xf = activations_as_float32(x, "moe_gemm_float64")
    T, K = xf.shape
    _, M, ids = check_moe_arrays(w_packed, qt.name, K, ids, route_weights, "moe_gemm_float64")
    if ids.shape[0] != T:
        raise ValueError(f"moe_gemm_float64: ids cover {ids.shape[0]} tokens, activations {T}")
    return _per_expert(w_packed, ids, route_weights, M,
                       lambda w, tokens: reference.gemm_float64(w, qt, xf[tokens]))

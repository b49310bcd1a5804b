"""Which MoE expert-weight shapes a quant type can hold, and validation of an MoE problem's arrays.

A weight row is whole blocks: K-quants (q4_K, q5_K, q6_K) pack 256 weights per super-block, so
K % 256 == 0; q8_0 packs 32, so K % 32 == 0. DeepSeek-V2-Lite's expert down projection has
K = 1408 = 5.5 x 256: only q8_0 holds it (as ggml does, falling back from the K-quant).
"""
from __future__ import annotations

import numpy as np

from kernels import quant
from kernels.moe_routing import check_ids


def check_expert_shape(qtype: str, M: int, K: int, who: str = "moe") -> None:
    """ValueError naming the shape and the block rule when `qtype` cannot hold [M, K] experts."""
    qt = quant.get(qtype)
    if M < 1 or K < 1:
        raise ValueError(f"{who}: expert weight shape M={M} K={K} must be positive")
    if K % qt.block:
        hint = " (K-quants need K % 256 == 0; use q8_0, which needs K % 32 == 0)" if qt.block == 256 else ""
        raise ValueError(f"{who}: {qt.name} cannot hold expert weights M={M} K={K}: "
                         f"K={K} is not a multiple of {qt.block}{hint}")


def check_moe_arrays(w_packed: np.ndarray, qtype: str, K: int, ids: np.ndarray,
                     route_weights: np.ndarray | None = None, who: str = "moe") -> tuple[int, int, np.ndarray]:
    """(n_experts, M, ids as int32) of w_packed uint8 [E, M, row_bytes], or a one-line ValueError."""
    qt = quant.get(qtype)
    if not isinstance(w_packed, np.ndarray) or w_packed.dtype != np.uint8 or w_packed.ndim != 3:
        raise ValueError(f"{who}: expected expert weights as uint8 [n_experts, M, row_bytes], got "
                         f"{getattr(w_packed, 'dtype', type(w_packed).__name__)} {getattr(w_packed, 'shape', '')}")
    n_experts, M, row_bytes = w_packed.shape
    check_expert_shape(qt.name, M, K, who)
    if row_bytes != qt.row_bytes(K):
        raise ValueError(f"{who}: {qt.name} rows of K={K} take {qt.row_bytes(K)} bytes, weights have {row_bytes}")
    ids = check_ids(ids, n_experts, who)
    if route_weights is not None and np.shape(route_weights) != ids.shape:
        raise ValueError(f"{who}: routing weights of shape {np.shape(route_weights)} do not match ids {ids.shape}")
    return n_experts, M, ids

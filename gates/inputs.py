"""Random inputs of a workload, as the gates feed them to a variant.

Weights: normal values with magnitudes mixed across rows and 32-blocks (so scales, mins
and the rank-1 term all matter), quantized with kernels.quant. Activations: never zero
(a zero block would hide a missing rescale), also with mixed magnitudes. MoE routing:
kernels.moe_routing (uniform / zipf, optionally with an expert left without tokens).
"""
from __future__ import annotations

import numpy as np

from kernels import quant
from kernels.family import Problem, Workload
from kernels.moe_routing import make_routing

BLOCK = 32


def _mixed_magnitudes(rng: np.random.Generator, rows: int, cols: int, span: float) -> np.ndarray:
    """float32 [rows, cols]: 10**U(-span, span) per row times 10**U(-span/2, span/2) per 32-block."""
    row = 10.0 ** rng.uniform(-span, span, size=(rows, 1, 1))
    block = 10.0 ** rng.uniform(-span / 2, span / 2, size=(rows, cols // BLOCK, 1))
    return np.broadcast_to(row * block, (rows, cols // BLOCK, BLOCK)).reshape(rows, cols)


def random_weights(rng: np.random.Generator, rows: int, K: int) -> np.ndarray:
    w = rng.standard_normal((rows, K)) * _mixed_magnitudes(rng, rows, K, span=1.0)
    w += 0.3 * np.abs(w).mean(axis=1, keepdims=True) * rng.uniform(-1, 1, size=(rows, 1))  # row offsets: mins matter
    return w.astype(np.float32)


def random_activations(rng: np.random.Generator, T: int, K: int) -> np.ndarray:
    magnitude = np.abs(rng.standard_normal((T, K))) + 0.05  # bounded away from zero
    sign = rng.choice(np.array([-1.0, 1.0]), size=(T, K))
    return (sign * magnitude * _mixed_magnitudes(rng, T, K, span=1.0)).astype(np.float32)


def _problem(w: Workload, rng: np.random.Generator, weight_rows, packed: np.ndarray | None = None) -> Problem:
    """weight_rows() -> one packed uint8 [M, row_bytes] matrix (one per expert for MoE)."""
    x = random_activations(rng, w.T, w.K)
    if packed is None:
        packed = weight_rows() if not w.is_moe else np.stack([weight_rows() for _ in range(w.n_experts)])
    ids = make_routing(w.T, w.n_experts, w.top_k, w.routing, rng) if w.is_moe else None
    return Problem(w, packed, x, ids=ids)


def random_problem(w: Workload, rng: np.random.Generator) -> Problem:
    """Fresh float weights quantized with kernels.quant: what the parity gate checks."""
    qt = quant.get(w.qtype)
    return _problem(w, rng, lambda: qt.quantize(random_weights(rng, w.M, w.K)))


def timing_problem(w: Workload, rng: np.random.Generator, shared: dict | None = None) -> Problem:
    """Inputs for timing only: random valid blocks (no quantizer run: an MoE suite's expert
    weights would take minutes to quantize), as values do not change a GEMM's time. Parity
    is always judged on random_problem's quantized weights. Pass one `shared` dict for a
    whole suite and workloads of one weight shape share one weight array (host memory)."""
    qt = quant.get(w.qtype)
    key = (w.qtype, w.M, w.K, w.n_experts)
    problem = _problem(w, rng, lambda: qt.random_packed(w.M, w.K, rng), (shared or {}).get(key))
    if shared is not None:
        shared[key] = problem.w_packed
    return problem

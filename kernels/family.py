"""The one interface every kernel family implements, CPU or CUDA.

A *family* is a kernel (one .cu file, or one numpy routine for the CPU demo)
whose compile-time parameters come as a plain dict. The campaign engine only
ever talks to this interface, so a lever module can stay a declaration:

    family.source(params, qtype)        -> exact text that gets compiled (artifact)
    family.build(params, qtype, device) -> Variant   (compile + resource report)
    variant.prepare(problem)            -> Bound      (upload inputs, allocate output)
    bound.run()                         -> launch once (async on the GPU)
    bound.output()                      -> np.ndarray [T, M] float32 (synchronizes)
    bound.poison()                      -> fill the output with NaN (parity gate)

`Problem` holds host numpy inputs: the packed weight bytes (ggml block layout),
the float32 activations, and, for MoE families, the routing ids.
Every variant computes the whole op from these inputs, including its own
activation quantization, so a timed run is what a real prefill pays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import math

import numpy as np


@dataclass(frozen=True)
class Workload:
    """One GEMM shape: C[T, M] = X[T, K] . W[M, K]^T with W quantized as `qtype`.

    MoE workloads set n_experts/top_k: W is [n_experts, M, K] and the op is
    Y[t, slot, :] = W[ids[t, slot]] . x[t].
    """

    qtype: str
    M: int
    K: int
    T: int
    n_experts: int = 0
    top_k: int = 0
    routing: str = "uniform"  # uniform | zipf  (MoE only)

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def flops(self) -> float:
        rows = self.T * (self.top_k if self.is_moe else 1)
        return 2.0 * rows * self.M * self.K

    def label(self) -> str:
        base = f"{self.qtype} M{self.M} K{self.K} T{self.T}"
        if self.is_moe:
            base += f" E{self.n_experts} top{self.top_k} {self.routing}"
        return base


@dataclass
class Problem:
    """Host inputs of one workload instance (fresh random data per check)."""

    workload: Workload
    w_packed: np.ndarray  # uint8 [M, row_bytes] (dense) or [E, M, row_bytes] (MoE)
    x: np.ndarray  # float32 [T, K]
    ids: np.ndarray | None = None  # int32 [T, top_k] (MoE)
    extra: dict[str, Any] = field(default_factory=dict)


class Bound(Protocol):
    def run(self) -> None: ...
    def output(self) -> np.ndarray: ...
    def poison(self) -> None: ...
    def release(self) -> None: ...


@dataclass
class Variant:
    """A built (compiled) instance of a family for one parameter set and qtype."""

    family: str
    params: dict
    qtype: str
    source: str
    resources: dict  # registers, smem_bytes, spill_bytes, stack_bytes, sass_ops...
    impl: Any  # family-specific handle (compiled module, function, ...)

    def prepare(self, problem: Problem) -> Bound:
        return self.impl.prepare(self, problem)


class Family(Protocol):
    name: str
    backend: str  # "cpu" or "cuda"
    parity: str  # "int" (tight vs integer reference) or "bf16"/"f16" (bound vs float64)

    def source(self, params: dict, qtype: str) -> str: ...
    def build(self, params: dict, qtype: str, device: Any) -> Variant: ...


MAX_ROTATION_COPIES = 8


def rotation_copies(l2_bytes: int | None, bytes_per_copy: int) -> int:
    """Input copies so that one rotation touches more than twice the L2 (HBM, not L2, is timed)."""
    l2 = l2_bytes or 50 * 2**20
    return max(1, min(MAX_ROTATION_COPIES, math.ceil(2 * l2 / max(1, bytes_per_copy)) + 1))

"""The `cpu_demo` family: a blocked numpy GEMM that follows the integer contract.

It is a real kernel family with tile parameters to search, so the whole campaign loop
(study, gates, tracking, promotion) runs on a machine without a GPU.

Math contract (the same one the CUDA MMQ kernels and kernels.reference.gemm_int follow):
for every 32-block b of K, with the activations quantized to Q8_1 inside the op,

    acc[t, m] += d_x[t, b] * (sum_{g in b} scale[m, g] * dot(q_w[m, g], q_x[t, g])
                              - minv[m, b] * s_x[t, b])

where g runs over the weight groups of the block (one group of 32; two of 16 for q6_K)
and the min term exists only for q4_K/q5_K. The integer dots are exact in every `dot`
method: |q_w * q_x| * 32 <= 63 * 127 * 32 < 2**24, so float32 products and sums of one
group are exact too; only the rescale order (and `acc` precision) differs from the reference.

Parameters (all searched by experiments/cpu_demo.py):
    rows_per_tile            output rows (M) computed per tile
    tokens_per_tile          activation rows (T) per tile
    k_superblocks_per_step   256-wide K slices contracted per inner step
    dot                      f32_bmm | f64_bmm (BLAS batched matmul) | i32_einsum (integer einsum)
    acc                      f32 | f64 rescale accumulator
    threads                  BLAS threads during the op (threadpoolctl)
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
from threadpoolctl import ThreadpoolController

from kernels import quant
from kernels.family import Problem, Variant

SUPERBLOCK = 256
Q8_1_BLOCK = 32
DOT_DTYPES = {"f32_bmm": np.float32, "f64_bmm": np.float64, "i32_einsum": np.int32}
ACC_DTYPES = {"f32": np.float32, "f64": np.float64}
PARAM_NAMES = ("rows_per_tile", "tokens_per_tile", "k_superblocks_per_step", "dot", "acc", "threads")


@functools.cache
def _blas_threads() -> ThreadpoolController:
    # One controller per process: building it scans the loaded libraries (ms), limiting is ~20 us.
    return ThreadpoolController()


def scratch_bytes(params: dict, group: int = 16) -> int:
    """Bytes of the per-step dot tensor [groups, tokens, rows] (worst case: 16-wide groups)."""
    groups = params["k_superblocks_per_step"] * SUPERBLOCK // group
    itemsize = np.dtype(DOT_DTYPES[params["dot"]]).itemsize
    return groups * params["tokens_per_tile"] * params["rows_per_tile"] * itemsize


def _group_dots(qx: np.ndarray, qw: np.ndarray, dot: str) -> np.ndarray:
    """Exact integer dots per group: qx [g, t, G], qw [g, G, m] -> [g, t, m]."""
    if dot == "i32_einsum":
        return np.einsum("gtk,gkm->gtm", qx, qw)
    return np.matmul(qx, qw)


def blocked_gemm(layout: dict, xq: quant.Q8_1Act, out: np.ndarray, params: dict) -> None:
    """out[T, M] = the integer contract, computed tile by tile (each tile written once)."""
    dot_dtype = DOT_DTYPES[params["dot"]]
    acc_dtype = ACC_DTYPES[params["acc"]]
    group = layout["group"]
    per_block = Q8_1_BLOCK // group  # weight groups per activation block
    t_total, k = xq.q.shape
    n_groups = k // group
    qx = xq.q.astype(dot_dtype).reshape(t_total, n_groups, group).transpose(1, 0, 2)
    dx = xq.d.astype(acc_dtype)  # [T, K/32]
    dx_group = np.repeat(dx, per_block, axis=1)  # [T, K/G]
    dxs = dx * xq.s.astype(acc_dtype)  # d_x * s_x, pays for the min term
    qw, scale, minv = layout["qw"], layout["scale"], layout["minv"]
    m_total = qw.shape[2]
    rows, toks = params["rows_per_tile"], params["tokens_per_tile"]
    g_step = params["k_superblocks_per_step"] * SUPERBLOCK // group
    for m0 in range(0, m_total, rows):
        m1 = min(m0 + rows, m_total)
        for t0 in range(0, t_total, toks):
            t1 = min(t0 + toks, t_total)
            acc = np.zeros((t1 - t0, m1 - m0), dtype=acc_dtype)
            for g0 in range(0, n_groups, g_step):
                g1 = min(g0 + g_step, n_groups)
                dots = _group_dots(qx[g0:g1, t0:t1], qw[g0:g1, :, m0:m1], params["dot"])
                scaled = dots.astype(acc_dtype, copy=False) * scale[g0:g1, None, m0:m1]
                acc += np.einsum("gtm,tg->tm", scaled, dx_group[t0:t1, g0:g1])
                if minv is not None:
                    b0, b1 = g0 // per_block, g1 // per_block
                    acc -= dxs[t0:t1, b0:b1] @ minv[b0:b1, m0:m1]
            out[t0:t1, m0:m1] = acc


def weight_layout(w_packed: np.ndarray, qtype: str, params: dict) -> dict:
    """Integer weights repacked once per prepare, in the layout the dot method reads."""
    form = quant.get(qtype).decompose(w_packed)
    m, k = form.q.shape
    group = form.group
    acc_dtype = ACC_DTYPES[params["acc"]]
    qw = form.q.astype(DOT_DTYPES[params["dot"]]).reshape(m, k // group, group).transpose(1, 2, 0)
    return {
        "group": group,
        "qw": np.ascontiguousarray(qw),  # [K/G, G, M]
        "scale": np.ascontiguousarray(form.scale.T.astype(acc_dtype)),  # [K/G, M]
        "minv": None if form.minv is None else np.ascontiguousarray(form.minv.T.astype(acc_dtype)),
    }


class CpuBound:
    """One prepared problem: repacked weights, the float activations, an output buffer."""

    def __init__(self, variant: Variant, problem: Problem) -> None:
        if problem.workload.is_moe:
            raise ValueError("cpu_demo computes dense GEMMs only (no MoE workloads)")
        self.params = variant.params
        self.layout = weight_layout(problem.w_packed, variant.qtype, variant.params)
        self.x = np.ascontiguousarray(problem.x, dtype=np.float32)
        self.out = np.empty((problem.workload.T, problem.workload.M), dtype=np.float32)

    def run(self) -> None:
        with _blas_threads().limit(limits=self.params["threads"], user_api="blas"):
            # Activation quantization is part of the op, as in a real prefill.
            blocked_gemm(self.layout, quant.quantize_q8_1(self.x), self.out, self.params)

    def output(self) -> np.ndarray:
        return self.out.copy()

    def poison(self) -> None:
        self.out.fill(np.nan)

    def release(self) -> None:
        self.layout = self.x = self.out = None


class CpuBlockedFamily:
    name = "cpu_demo"
    backend = "cpu"
    parity = "int"

    def check_params(self, params: dict) -> None:
        missing = [p for p in PARAM_NAMES if p not in params]
        if missing:
            raise ValueError(f"cpu_demo: missing parameters {missing}")
        if params["dot"] not in DOT_DTYPES:
            raise ValueError(f"cpu_demo: dot must be one of {sorted(DOT_DTYPES)}, got {params['dot']!r}")
        if params["acc"] not in ACC_DTYPES:
            raise ValueError(f"cpu_demo: acc must be one of {sorted(ACC_DTYPES)}, got {params['acc']!r}")
        for name in ("rows_per_tile", "tokens_per_tile", "k_superblocks_per_step", "threads"):
            if int(params[name]) < 1:
                raise ValueError(f"cpu_demo: {name} must be >= 1, got {params[name]}")

    def source(self, params: dict, qtype: str) -> str:
        header = "".join(f"# {k} = {params[k]!r}\n" for k in PARAM_NAMES)
        body = "\n\n".join(inspect.getsource(f) for f in (weight_layout, _group_dots, blocked_gemm))
        return f"# cpu_demo variant for {qtype}\n{header}\n{body}"

    def build(self, params: dict, qtype: str, device) -> Variant:
        self.check_params(params)
        quant.get(qtype)  # unknown type -> ValueError
        resources = {"scratch_bytes": scratch_bytes(params), "backend": "cpu"}
        return Variant(family=self.name, params=dict(params), qtype=qtype,
                       source=self.source(params, qtype), resources=resources, impl=self)

    def prepare(self, variant: Variant, problem: Problem) -> CpuBound:
        return CpuBound(variant, problem)


FAMILY = CpuBlockedFamily()

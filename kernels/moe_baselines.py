"""The two MoE expert-GEMM baselines a grouped MMQ (`moe_fusion`) must beat, as families.

moe_matvec (kernels/cuda/moe_matvec.cu, parity "int"): one timed run = Q8_1-quantize x
    (kernels.q8_1_gpu) + one matvec launch over every (token, slot, row block): each routed
    pair reads its expert's rows itself, so an expert is read once per routed token
    (kernels.moe_traffic "matvec"). Tight parity with kernels.moe_reference.moe_gemm_int.
moe_dequant_cublas (parity "bf16"): one timed run = bucket the pairs by expert on the GPU
    (torch stable argsort + bincount, then the counts copied to the host: the loop needs
    them, as a framework's per-expert loop does), then per expert with tokens: dequantize
    its weight to bf16 (the dequant kernel of kernels.dequant_cublas), gather its tokens
    (index_select), torch.mm on cuBLAS, scatter into Y (index_copy_). The activation's
    float32 -> bf16 conversion is done once in prepare(), as in kernels.dequant_cublas.

Both read routing weights from problem.extra["route_weights"] (float32 [T, top_k]) when present
and multiply them into Y. Output: float32 [T, top_k, M].
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import dequant_cublas, nvcc
from kernels.family import Problem, Variant, rotation_copies
from kernels.moe_shapes import check_moe_arrays

MATVEC_CU = Path(__file__).resolve().parent / "cuda" / "moe_matvec.cu"
QTYPE_ID = {"q4_K": 0, "q5_K": 1, "q6_K": 2, "q8_0": 3}
ROUTE_WEIGHTS = "route_weights"  # Problem.extra key


def route_weights_of(problem: Problem, ids: np.ndarray) -> np.ndarray | None:
    """problem.extra's routing weights as float32 shaped like ids, None when there are none."""
    w = problem.extra.get(ROUTE_WEIGHTS)
    if w is None:
        return None
    w = np.ascontiguousarray(w, dtype=np.float32)
    if w.shape != ids.shape:
        raise ValueError(f"moe: routing weights of shape {w.shape} do not match ids {ids.shape}")
    return w


def check_moe_problem(problem: Problem, qtype: str, who: str) -> tuple[int, int, np.ndarray]:
    """(n_experts, M, ids as int32) of an MoE problem, or a ValueError naming what does not match."""
    wl = problem.workload
    if not wl.is_moe or problem.ids is None:
        raise ValueError(f"{who}: MoE workloads only (n_experts, top_k and routing ids)")
    x = np.asarray(problem.x)
    if x.shape != (wl.T, wl.K):
        raise ValueError(f"{who}: activation shape {x.shape} != {(wl.T, wl.K)}")
    n_experts, M, ids = check_moe_arrays(problem.w_packed, qtype, wl.K, problem.ids, who=who)
    if ids.shape != (wl.T, wl.top_k) or n_experts != wl.n_experts or M != wl.M:
        raise ValueError(f"{who}: arrays (E={n_experts}, M={M}, ids {ids.shape}) do not match {wl.label()}")
    return n_experts, M, ids


# ---------------------------------------------------------------- moe_matvec

MATVEC_DEFAULTS = {"MV_WARPS": 4, "MV_ROWS": 2}


def matvec_params(params: dict) -> dict:
    p = {**MATVEC_DEFAULTS, **params}
    unknown = set(p) - set(MATVEC_DEFAULTS)
    if unknown:
        raise ValueError(f"moe_matvec: unknown parameter(s) {sorted(unknown)} (has {sorted(MATVEC_DEFAULTS)})")
    if not 1 <= p["MV_WARPS"] <= 32 or not 1 <= p["MV_ROWS"] <= 8:
        raise ValueError(f"moe_matvec: need 1 <= MV_WARPS <= 32 and 1 <= MV_ROWS <= 8, got {p}")
    return p


class MoeMatvecFamily:
    name = "moe_matvec"
    backend = "cuda"
    parity = "int"
    kernel_name = "moe_matvec"

    def source(self, params: dict, qtype: str) -> str:
        if qtype not in QTYPE_ID:
            raise ValueError(f"moe_matvec: unsupported quant type {qtype!r} (have {', '.join(QTYPE_ID)})")
        return nvcc.render_source(MATVEC_CU, {"QTYPE": QTYPE_ID[qtype], **matvec_params(params)})

    def compile_only(self, params: dict, qtype: str, arch: str = "sm_90") -> nvcc.Compiled:
        return nvcc.compile_cubin(self.source(params, qtype), None, arch)

    def build(self, params: dict, qtype: str, device) -> Variant:
        p = matvec_params(params)
        source = self.source(p, qtype)
        compiled = nvcc.compile_cubin(source, None, device.info["arch"])
        kernel = device.load(compiled).kernel(self.kernel_name, 0)
        resources = compiled.summary([self.kernel_name])
        resources.update(threads=32 * p["MV_WARPS"])
        return Variant(family=self.name, params=p, qtype=qtype, source=source, resources=resources,
                       impl=_Impl(device, kernel, MatvecBound))


class _Impl:
    def __init__(self, device, kernel, bound_cls) -> None:
        self.device, self.kernel, self.bound_cls = device, kernel, bound_cls

    def prepare(self, variant: Variant, problem: Problem):
        return self.bound_cls(self.device, self.kernel, variant, problem)


class MoeInputs:
    """Device inputs of one MoE problem and its output: weight and activation copies that run()
    rotates through, routing ids and weights, the Q8_1 activation scratch, Y [T, top_k, M].
    run() = Q8_1-quantize the next activation copy, then the subclass's `launch(weights)`."""

    who = "moe"  # names the family in error messages

    def __init__(self, device, variant: Variant, problem: Problem) -> None:
        from kernels import q8_1_gpu

        wl = problem.workload
        self.n_experts, self.M, ids = check_moe_problem(problem, variant.qtype, self.who)
        route_w = route_weights_of(problem, ids)
        self.device, self.wl, self.q8 = device, wl, q8_1_gpu
        w = self.weights_layout(np.ascontiguousarray(problem.w_packed))
        x = np.ascontiguousarray(problem.x, dtype=np.float32)
        n = rotation_copies(device.info.get("l2_bytes"), w.nbytes + x.nbytes)
        self.w = [device.to_device(w) for _ in range(n)]
        self.x = [device.to_device(x) for _ in range(n)]
        self.row_bytes = problem.w_packed.shape[2]
        self.ids = device.to_device(ids)
        self.route_w = device.to_device(route_w) if route_w is not None else None
        T, K = wl.T, wl.K
        self.xq = device.empty((T, K), np.int8)
        self.xd = device.empty((T, K // 32), np.float32)
        self.xs = device.empty((T, K // 32), np.int32)
        self.out = device.empty((T, wl.top_k, self.M), np.float32)
        self.i = 0

    def weights_layout(self, w_packed: np.ndarray) -> np.ndarray:
        """The bytes uploaded for the expert weights uint8 [E, M, row_bytes]: as they are."""
        return w_packed

    def launch(self, weights) -> None:
        raise NotImplementedError

    def run(self) -> None:
        wl, i = self.wl, self.i
        self.i = (i + 1) % len(self.w)
        self.q8.quantize_into(self.device, self.x[i], self.xq, self.xd, self.xs, wl.T, wl.K)
        self.launch(self.w[i])

    def output(self) -> np.ndarray:
        self.device.synchronize()
        return self.out.get()

    def poison(self) -> None:
        self.device.fill_nan(self.out)

    def release(self) -> None:
        for buf in [*self.w, *self.x, self.ids, self.route_w, self.xq, self.xd, self.xs, self.out]:
            if buf is not None:
                buf.release()
        self.w, self.x = [], []


class MatvecBound(MoeInputs):
    """One matvec launch over every (row block, routed pair)."""

    who = "moe_matvec"

    def __init__(self, device, kernel, variant: Variant, problem: Problem) -> None:
        super().__init__(device, variant, problem)
        self.kernel = kernel
        p = variant.params
        self.grid = (math.ceil(self.M / (p["MV_WARPS"] * p["MV_ROWS"])), self.wl.T * self.wl.top_k, 1)
        self.block = (32 * p["MV_WARPS"], 1, 1)

    def launch(self, weights) -> None:
        wl = self.wl
        self.kernel.launch(self.grid, self.block,
                           (weights, self.ids, np.int32(self.n_experts), self.xq, self.xd, self.xs,
                            self.route_w if self.route_w is not None else 0, self.out,
                            np.int32(self.M), np.int32(wl.K), np.int32(wl.top_k), np.int64(self.row_bytes)), 0)


# ---------------------------------------------------------------- moe_dequant_cublas

class MoeDequantCublasFamily:
    """The per-expert loop; `gemm_out` as in kernels.dequant_cublas (bf16 GEMM output + one
    f32 conversion, or cuBLAS writing f32)."""

    name = "moe_dequant_cublas"
    backend = "cuda"
    parity = "bf16"

    def source(self, params: dict, qtype: str) -> str:
        return dequant_cublas.FAMILY.source(params, qtype)

    def compile_only(self, params: dict, qtype: str, arch: str = "sm_90") -> nvcc.Compiled:
        return dequant_cublas.FAMILY.compile_only(params, qtype, arch)

    def build(self, params: dict, qtype: str, device) -> Variant:
        from kernels import cuda_runtime

        p = dequant_cublas.full_params(params)
        cuda_runtime.torch_device(device)  # fail at build, not at the first run, without torch
        source = self.source(p, qtype)
        compiled = nvcc.compile_cubin(source, None, device.info["arch"])
        kernel = device.load(compiled).kernel(dequant_cublas.KERNEL, 0)
        resources = compiled.summary([dequant_cublas.KERNEL])
        resources.update(threads=dequant_cublas.CTA_THREADS)
        return Variant(family=self.name, params=p, qtype=qtype, source=source, resources=resources,
                       impl=_Impl(device, kernel, DequantLoopBound))


class DequantLoopBound:
    """Device inputs of one MoE problem; run() is the whole per-expert loop."""

    def __init__(self, device, kernel, variant: Variant, problem: Problem) -> None:
        from kernels import cuda_runtime

        torch, tdev = cuda_runtime.torch_device(device)
        wl = problem.workload
        self.n_experts, self.M, ids = check_moe_problem(problem, variant.qtype, "moe_dequant_cublas")
        route_w = route_weights_of(problem, ids)
        _struct, block, _size, lanes = dequant_cublas.FORMATS[variant.qtype]
        self.device, self.kernel, self.torch, self.wl = device, kernel, torch, wl
        self.gemm_out = variant.params["gemm_out"]
        self.blocks_per_expert = self.M * wl.K // block
        self.grid = (math.ceil(self.blocks_per_expert * lanes / dequant_cublas.CTA_THREADS), 1, 1)
        w = np.ascontiguousarray(problem.w_packed)
        self.expert_bytes = w.shape[1] * w.shape[2]
        x_bf16 = torch.from_numpy(np.ascontiguousarray(problem.x, dtype=np.float32)).to(tdev).to(torch.bfloat16)
        n = rotation_copies(device.info.get("l2_bytes"), w.nbytes + x_bf16.numel() * 2)
        self.w = [device.to_device(w) for _ in range(n)]
        self.x = [x_bf16] + [x_bf16.clone() for _ in range(n - 1)]
        self.ids = torch.from_numpy(ids.astype(np.int64)).to(tdev).reshape(-1)
        self.route_w = torch.from_numpy(route_w).to(tdev).reshape(-1, 1) if route_w is not None else None
        self.w_bf16 = torch.empty((self.M, wl.K), dtype=torch.bfloat16, device=tdev)  # reused by every expert
        self.out = torch.empty((wl.T * wl.top_k, self.M), dtype=torch.float32, device=tdev)
        self.i = 0
        self.run()  # cuBLAS handle and workspace set up outside any timed call
        device.synchronize()

    def run(self) -> None:
        torch, i, top_k = self.torch, self.i, self.wl.top_k
        self.i = (i + 1) % len(self.w)
        order = torch.argsort(self.ids, stable=True)
        counts = torch.bincount(self.ids, minlength=self.n_experts).tolist()  # host sync: the loop needs them
        start = 0
        for e, count in enumerate(counts):
            if count == 0:
                continue
            pairs = order[start:start + count]
            start += count
            self.kernel.launch(self.grid, (dequant_cublas.CTA_THREADS, 1, 1),
                               (self.w[i].ptr + e * self.expert_bytes, self.w_bf16.data_ptr(),
                                np.int64(self.blocks_per_expert)), 0)
            xe = self.x[i].index_select(0, torch.div(pairs, top_k, rounding_mode="floor"))
            if self.gemm_out == "f32":
                ye = torch.mm(xe, self.w_bf16.t(), out_dtype=torch.float32)
            else:
                ye = torch.mm(xe, self.w_bf16.t()).float()
            if self.route_w is not None:
                ye *= self.route_w.index_select(0, pairs)
            self.out.index_copy_(0, pairs, ye)

    def output(self) -> np.ndarray:
        self.device.synchronize()
        wl = self.wl
        return self.out.cpu().numpy().reshape(wl.T, wl.top_k, self.M)

    def poison(self) -> None:
        self.out.fill_(float("nan"))
        self.w_bf16.fill_(float("nan"))

    def release(self) -> None:
        for buf in self.w:
            buf.release()
        self.w, self.x = [], []
        self.w_bf16 = self.out = self.ids = self.route_w = None


MOE_MATVEC = MoeMatvecFamily()
MOE_DEQUANT_CUBLAS = MoeDequantCublasFamily()
FAMILIES = {f.name: f for f in (MOE_MATVEC, MOE_DEQUANT_CUBLAS)}

"""The `dequant_cublas` baseline: what users have without MMQ.

    run() = dequant pass (kernels/cuda/dequant.cu: packed weight read once -> bf16 W [M, K])
          + torch.mm(x_bf16, W.T) on cuBLAS (f32 accumulate)
          + gemm_out="bf16": bf16 GEMM output, then one conversion pass into the f32 output
            gemm_out="f32":  cuBLAS writes f32 directly (torch.mm out_dtype=float32)
All of that is timed. Not timed: the activation's float32 -> bf16 conversion, done once in
prepare(), because in a real prefill the activation arrives in bf16 from the layer before.

    dequant_each_call=False: the unquantized anchor ("bf16 cuBLAS on an already-dequantized
    weight"): the weight is dequantized once in prepare(); run() is torch.mm alone, bf16 out
    (gemm_out="f32": cuBLAS writes the f32 output the MMQ kernels write, no conversion pass).

The PyCUDA dequant kernel writes into a torch tensor (its data_ptr): torch and PyCUDA share
the primary context and the default stream (kernels.cuda_runtime), so no synchronization is
needed between the two steps. Inputs rotate over copies whose total exceeds twice the L2.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import nvcc
from kernels.family import Problem, Variant, rotation_copies

DEQUANT_CU = Path(__file__).resolve().parent / "cuda" / "dequant.cu"
KERNEL = "dequant_bf16"
CTA_THREADS = 256
# qtype -> (format struct in dequant.cu, weights per block, bytes per block, lanes per block)
FORMATS = {
    "q4_K": ("Q4_K", 256, 144, 16),
    "q5_K": ("Q5_K", 256, 176, 16),
    "q6_K": ("Q6_K", 256, 210, 8),
    "q8_0": ("Q8_0", 32, 34, 2),
}
DEFAULTS = {"gemm_out": "bf16", "dequant_each_call": True}
GEMM_OUTS = ("bf16", "f32")


def full_params(params: dict) -> dict:
    p = {**DEFAULTS, **params}
    unknown = set(p) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"dequant_cublas: unknown parameter(s) {sorted(unknown)} (has {sorted(DEFAULTS)})")
    if p["gemm_out"] not in GEMM_OUTS:
        raise ValueError(f"dequant_cublas: gemm_out must be one of {GEMM_OUTS}, got {p['gemm_out']!r}")
    return p


def _format(qtype: str) -> tuple[str, int, int, int]:
    if qtype not in FORMATS:
        raise ValueError(f"dequant_cublas: unsupported quant type {qtype!r} (have {', '.join(FORMATS)})")
    return FORMATS[qtype]


class DequantCublasFamily:
    name = "dequant_cublas"
    backend = "cuda"
    parity = "bf16"

    def defines(self, qtype: str) -> dict:
        struct, _block, _size, lanes = _format(qtype)
        return {"QTYPE": struct, "LANES_PER_BLOCK": lanes, "CTA_THREADS": CTA_THREADS}

    def source(self, params: dict, qtype: str) -> str:
        full_params(params)
        return nvcc.render_source(DEQUANT_CU, self.defines(qtype))

    def compile_only(self, params: dict, qtype: str, arch: str = "sm_90") -> nvcc.Compiled:
        return nvcc.compile_cubin(self.source(params, qtype), None, arch)

    def build(self, params: dict, qtype: str, device) -> Variant:
        from kernels import cuda_runtime

        p = full_params(params)
        cuda_runtime.torch_device(device)  # fail at build, not at the first run, without torch
        source = self.source(p, qtype)
        compiled = nvcc.compile_cubin(source, None, device.info["arch"])
        kernel = device.load(compiled).kernel(KERNEL, 0)
        resources = compiled.summary([KERNEL])
        resources.update(device_arch=device.info["arch"], smem_limit_bytes=device.info.get("smem_per_block_optin"),
                         threads=CTA_THREADS)
        return Variant(family=self.name, params=p, qtype=qtype, source=source, resources=resources,
                       impl=_Impl(device, kernel))


class _Impl:
    def __init__(self, device, kernel) -> None:
        self.device, self.kernel = device, kernel

    def prepare(self, variant: Variant, problem: Problem) -> "DequantCublasBound":
        return DequantCublasBound(self.device, self.kernel, variant, problem)


class DequantCublasBound:
    """Device inputs for one dense problem; run() rotates through the input copies."""

    def __init__(self, device, kernel, variant: Variant, problem: Problem) -> None:
        from kernels import cuda_runtime

        torch, tdev = cuda_runtime.torch_device(device)
        wl = problem.workload
        if wl.is_moe:
            raise ValueError("dequant_cublas: dense workloads only (no MoE routing)")
        _struct, block, type_size, lanes = _format(variant.qtype)
        M, K, T = wl.M, wl.K, wl.T
        if K % block:
            raise ValueError(f"dequant_cublas: K={K} is not a multiple of {block} ({variant.qtype} block)")
        w = np.ascontiguousarray(problem.w_packed, dtype=np.uint8)
        if w.shape != (M, K // block * type_size):
            raise ValueError(f"dequant_cublas: packed weight shape {w.shape} != {(M, K // block * type_size)}")
        x = np.ascontiguousarray(problem.x, dtype=np.float32)
        if x.shape != (T, K):
            raise ValueError(f"dequant_cublas: activation shape {x.shape} != {(T, K)}")

        self.device, self.kernel, self.torch = device, kernel, torch
        self.gemm_out = variant.params["gemm_out"]
        self.dequant_each_call = bool(variant.params["dequant_each_call"])
        self.n_blocks = M * K // block
        self.grid = (math.ceil(self.n_blocks * lanes / CTA_THREADS), 1, 1)
        x_bf16 = torch.from_numpy(x).to(tdev).to(torch.bfloat16)  # round to nearest even, untimed
        n = rotation_copies(device.info.get("l2_bytes"), w.nbytes + x_bf16.numel() * 2)
        self.w = [device.to_device(w) for _ in range(n)]
        self.x = [x_bf16] + [x_bf16.clone() for _ in range(n - 1)]
        self.w_bf16 = torch.empty((M, K), dtype=torch.bfloat16, device=tdev)
        self.w_bf16_ptr = self.w_bf16.data_ptr()
        self.out = torch.empty((T, M), dtype=torch.float32, device=tdev)
        self.out_bf16 = torch.empty((T, M), dtype=torch.bfloat16, device=tdev) if self.gemm_out == "bf16" else None
        self.i = 0
        if not self.dequant_each_call:  # the weight as an unquantized model holds it: bf16, once
            self.w_bf16s = [torch.empty_like(self.w_bf16) for _ in range(n)]
            for w_packed, w_bf16 in zip(self.w, self.w_bf16s):
                self._dequant(w_packed, w_bf16.data_ptr())
            if self.gemm_out == "bf16":
                self.out_bf16 = torch.empty((T, M), dtype=torch.bfloat16, device=tdev)
        self.run()  # cuBLAS handle/workspace set up outside any timed call
        device.synchronize()

    def _dequant(self, w_packed, dst_ptr: int) -> None:
        self.kernel.launch(self.grid, (CTA_THREADS, 1, 1), (w_packed.ptr, dst_ptr, np.int64(self.n_blocks)))

    def run(self) -> None:
        i, torch = self.i, self.torch
        self.i = (i + 1) % len(self.w)
        if not self.dequant_each_call:
            if self.gemm_out == "f32":
                torch.mm(self.x[i], self.w_bf16s[i].t(), out_dtype=torch.float32, out=self.out)
            else:
                torch.mm(self.x[i], self.w_bf16s[i].t(), out=self.out_bf16)
            return
        self._dequant(self.w[i], self.w_bf16_ptr)
        if self.out_bf16 is None:
            torch.mm(self.x[i], self.w_bf16.t(), out_dtype=torch.float32, out=self.out)
        else:
            torch.mm(self.x[i], self.w_bf16.t(), out=self.out_bf16)
            self.out.copy_(self.out_bf16)

    def output(self) -> np.ndarray:
        self.device.synchronize()
        if not self.dequant_each_call and self.gemm_out == "bf16":
            return self.out_bf16.float().cpu().numpy()
        return self.out.cpu().numpy()

    def poison(self) -> None:
        nan = float("nan")
        self.out.fill_(nan)
        self.w_bf16.fill_(nan)  # a dequant launch that skipped blocks must show, not reuse old weights
        if self.out_bf16 is not None:
            self.out_bf16.fill_(nan)

    def release(self) -> None:
        for buf in self.w:
            buf.release()
        self.w, self.x, self.w_bf16s = [], [], []
        self.w_bf16 = self.out = self.out_bf16 = None


FAMILY = DequantCublasFamily()

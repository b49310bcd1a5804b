"""Launcher of the f16 path (kernels/cuda/mmq_f16.cu): weights dequantized once per tile
into shared memory as f16 with their scales applied, activations converted f32 -> f16 by a
timed pass, f16 tensor cores with f32 accumulation. Same tile parameters as mmq_base; the
`adaptive_format` lever picks between the two by T.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import mmq_base
from kernels.mmq_base import RAW_CHUNKS, full_params

MMQ_F16_CU = Path(__file__).parent / "cuda" / "mmq_f16.cu"
CONVERT_THREADS = 256


def smem_bytes(params: dict, qtype: str) -> int:
    """Dynamic shared memory of one CTA; mirrors kSmem16 in mmq_f16.cu (checked on the GPU)."""
    p = full_params(params)
    stage = p["BM"] * RAW_CHUNKS[qtype] * 16 + p["BN"] * (512 + 32)
    return p["STAGES"] * stage + p["BM"] * 512


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    p = full_params(params)
    structural = mmq_base.invalid_reason({**p, "STAGES": 1, "BN": p["BN"]}, qtype, {"smem_per_block_optin": 1 << 30})
    if structural:
        return structural
    if not 1 <= p["STAGES"] <= 4:
        return f"STAGES={p['STAGES']} outside 1..4"
    return mmq_base.smem_limit_reason(smem_bytes(p, qtype), device_info)


class F16Bound(mmq_base.MMQBound):
    """Activation format: f16 rows from an f32 -> f16 conversion pass (timed), or, with the
    launch-time parameter X16_INPUT=1, f16 rows as they arrive from a 16-bit model (rounded to
    nearest even on the host once, as the pass would; nothing to convert per call)."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.x16_input = bool(variant.params.get("X16_INPUT", 0))
        super().__init__(device, variant, handle, problem)

    def host_activation(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x, np.float16) if self.x16_input else super().host_activation(x)

    def alloc_activation(self, T: int, K: int) -> list:
        return [] if self.x16_input else [self.device.empty((T, K), np.float16)]

    def activation_args(self) -> tuple:
        return (self.x[self.current].ptr,) if self.x16_input else super().activation_args()

    def has_pass(self) -> bool:
        """Whether run() converts the activations before the GEMM (f16 input: no pass)."""
        return not self.x16_input

    def launch_as_dependents(self, handle: dict, family, pdl: int) -> None:
        """PDL >= 1: the GEMM is a programmatic dependent launch of its pass (where there is one), so it
        starts while the pass runs; PDL = 2: the split-K reduce is one of the GEMM (kernels/dependent_launch.py)."""
        if pdl and self.has_pass():
            self.gemm = self.device.dependent_kernel(handle.get("compiled"), family.kernel_name, self.smem)
        if pdl >= 2 and self.partial is not None:
            self.reduce = self.device.dependent_kernel(handle.get("compiled"), family.reduce_name, 0)

    def activation_pass(self, x) -> None:
        if self.x16_input:
            return
        n4 = self.wl.T * self.wl.K // 4
        self.handle["convert"].launch((min(8192, math.ceil(n4 / CONVERT_THREADS)), 1, 1), (CONVERT_THREADS, 1, 1),
                                      (x.ptr, self.scratch[0].ptr, np.int64(n4)), 0)


class MMQF16Family(mmq_base.MMQFamily):
    """DEQ (0 = f32 dequant math, 1 = f16x2) is this family's own compile-time parameter."""

    name = "mmq_f16"
    parity = "f16"
    cu_file = MMQ_F16_CU
    kernel_name = "mmq_f16_gemm"
    reduce_name = "mmq_f16_splitk_reduce"
    smem_symbol = "mmq_f16_smem_bytes"

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def defines(self, params: dict, qtype: str) -> dict:
        return {**super().defines(params, qtype), "DEQ": int(params.get("DEQ", 0))}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    bound_class = F16Bound  # the wgmma family's bound adds its activation loads

    def f16_input(self, params: dict) -> dict:
        """The parameters that run `params` on float16 activations as they arrive (no conversion pass)."""
        return {**params, "X16_INPUT": 1}

    def make_bound(self, device, variant, handle: dict, problem):
        handle.setdefault("convert", handle["module"].kernel("f32_to_f16", 0))
        return self.bound_class(device, variant, handle, problem)


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:  # one tile for every type
    """Starting configurations per T (q4_K 4096x14336 sweep of 2026-12-02: two CTAs per SM
    with one stage beat deeper staging at one CTA per SM)."""
    if T <= 64:
        return {"BM": 64, "BN": 64, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 1}
    return {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1}


FAMILY = MMQF16Family()

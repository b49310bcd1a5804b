"""Launcher of the fused-quantization MMQ family: kernels/cuda/mmq.cu built with FUSEQ=1.

The kernel takes the float32 activation rows themselves (bf16 bit patterns with XBF16=1) and
quantizes each staged super-block to Q8_1 in shared memory, with the standalone quantizer's code
(kernels/cuda/q8_1.cuh), so its Q8_1 bytes equal those of kernels/q8_1_gpu.py and the GEMM after
them is mmq_base's. One timed run = the GEMM (and the split-K reduction): no quantize pass, no Q8_1
buffers written to and read back from DRAM. Every row tile re-quantizes its token tile, which the
shared memory staging of f32 (4x the Q8_1 bytes) and the ALU pay for: the trade is meant for small T.

Parameters: mmq_base's (tile, warps, stages, CVT, MIN_BLOCKS; SPLITK at launch) and XBF16
(compile-time: 0 = float32 activations, 1 = bf16 activations; the host rounds the problem's
float32 x to bf16 once, untimed, as a bf16 model hands them over).
"""
from __future__ import annotations

import numpy as np

from kernels import mmq_base
from kernels.mmq_base import RAW_CHUNKS
from kernels.quant.q8_1 import float32_to_bf16_bits

# mmq_base's small-T tile: its default 128 x 64 tile with f32 staging needs 258 KB for q8_0
DEFAULTS = {**mmq_base.DEFAULTS, "BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "XBF16": 0}
Q_STRIDE = 256 + 32  # int8 tile row (kQStride)


def full_params(params: dict) -> dict:
    return {**DEFAULTS, **params}


def x_stride(xbf16: int) -> int:
    """Bytes of one staged activation row of 256 values (kXfStride): values plus bank pad."""
    return 256 * 2 + 64 if xbf16 else 256 * 4 + 16


def smem_bytes(params: dict, qtype: str) -> int:
    """Dynamic shared memory of one CTA; mirrors kSmemBytes of mmq_core.cuh with FUSEQ=1
    (checked on the GPU): per stage the raw weights and the float rows, then mmq_base's unpacked
    tiles and the one quantized int8 activation tile."""
    p = full_params(params)
    bm, bn = p["BM"], p["BN"]
    stage = bm * RAW_CHUNKS[qtype] * 16 + bn * x_stride(p["XBF16"])
    return p["STAGES"] * stage + bm * 256 + bm * 64 + bn * 64 + bn * Q_STRIDE


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    p = full_params(params)
    if p["XBF16"] not in (0, 1):
        return f"XBF16={p['XBF16']} is not 0 (float32 activations) or 1 (bf16)"
    structural = mmq_base.invalid_reason(p, qtype, {"smem_per_block_optin": 1 << 30})
    if structural:
        return structural
    return mmq_base.smem_limit_reason(smem_bytes(p, qtype), device_info)


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:  # one tile for every type
    """Starting configurations per T until a study promotes a champion: mmq_base's small-T tile,
    and for larger T tiles that leave room for the f32 staging (mmq_base's wider ones do not fit
    227 KB). Not swept yet."""
    if T <= 32:
        return {"BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    if T <= 64:
        return {"BM": 128, "BN": 32, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 2}
    if T <= 256:
        return {"BM": 64, "BN": 64, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 2}
    return {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1}


class FusedQuantBound(mmq_base.MMQBound):
    """Activation format: the float rows themselves (float32, or bf16 bits with XBF16=1); no
    activation pass and no scratch buffers, the kernel quantizes."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.xbf16 = bool(full_params(variant.params)["XBF16"])
        super().__init__(device, variant, handle, problem)

    def host_activation(self, x: np.ndarray) -> np.ndarray:
        return float32_to_bf16_bits(x) if self.xbf16 else super().host_activation(x)

    def alloc_activation(self, T: int, K: int) -> list:
        return []

    def activation_pass(self, x) -> None:
        return None  # quantized inside the GEMM

    def activation_args(self) -> tuple:
        return (self.x[self.current].ptr,)


class MMQFusedQuantFamily(mmq_base.MMQFamily):
    """mmq.cu with FUSEQ=1: same kernel names and smem symbol, another activation argument."""

    name = "mmq_fused_quant"

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def complete(self, params: dict) -> dict:
        return full_params(params)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {**super().defines(p, qtype), "FUSEQ": 1, "XBF16": p["XBF16"]}

    def make_bound(self, device, variant, handle: dict, problem):
        return FusedQuantBound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [DEFAULTS, *(heuristic_params(t) for t in (16, 64, 128, 512))]  # every T branch


FAMILY = MMQFusedQuantFamily()

"""Launcher of the Hopper wgmma path: ggml weight blocks dequantized to f16 with their scales
applied, activations converted f32 -> f16 by a timed pass, `wgmma.mma_async` m64nBNk16 per
warpgroup with f32 accumulators. Built for sm_90a (wgmma exists only there). WS and AREG pick
the kernel:
  WS=0            kernels/cuda/mmq_wgmma.cu     every warpgroup loads, dequantizes and multiplies
  WS=1            kernels/cuda/mmq_wgmma_ws.cu  a producer warpgroup loads and dequantizes into
                                                shared memory for consumer warpgroups (mbarriers)
  AREG=1 (WS=1)   kernels/cuda/mmq_wgmma_rs.cu  the producer only copies; consumers dequantize
                                                into wgmma A registers (RAW raw slots deep);
                  XTILE=1: the activation pass writes f16 chunks pre-tiled and swizzled, and
                  the producer moves each with one bulk copy
The activation format and the bound are the f16 path's (kernels/mmq_f16.py); only the kernel,
its parameters and its shared memory differ.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import mmq_base, mmq_f16, nvcc
from kernels.mmq_base import RAW_CHUNKS

MMQ_WGMMA_CU = Path(__file__).parent / "cuda" / "mmq_wgmma.cu"
MMQ_WGMMA_WS_CU = Path(__file__).parent / "cuda" / "mmq_wgmma_ws.cu"
MMQ_WGMMA_RS_CU = Path(__file__).parent / "cuda" / "mmq_wgmma_rs.cu"

# wgmma N values the generated wrappers provide (kernels/wgmma_header.py)
WGMMA_WIDTHS = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
DEFAULTS = {"BM": 128, "BN": 128, "STAGES": 4, "DEQ": 0, "MIN_BLOCKS": 1, "SPLITK": 0, "WS": 0, "ABUF": 2,
            "AREG": 0, "RAW": 2, "XSYNC": 0, "XTILE": 0}
COMPILE_KEYS = ("BM", "BN", "STAGES", "DEQ", "MIN_BLOCKS", "ABUF", "RAW", "XSYNC", "XTILE")
WS_BARRIER_BYTES = 128  # kBarBytes in mmq_wgmma_ws.cu
RS_BARRIER_BYTES = 256  # kBarBytes in mmq_wgmma_rs.cu


def full_params(params: dict) -> dict:
    """Defaults filled in; WARPS_M/WARPS_N derived (one warpgroup of 4 warps per 64 rows)."""
    p = {**DEFAULTS, **{k: v for k, v in params.items() if k not in ("WARPS_M", "WARPS_N")}}
    if p["AREG"]:  # the register-A kernel is warp-specialized; DEQ/ABUF do not apply to it
        p.update(WS=1, DEQ=1, ABUF=2)
        if p["XTILE"]:  # bulk copies are async-proxy writes: no fence placement to choose
            p.update(XSYNC=0)
    else:
        p.update(RAW=2, XSYNC=0, XTILE=0)
    return {**p, "WARPS_M": p["BM"] // 16, "WARPS_N": 1}


def threads(params: dict) -> int:
    """Four warps per 64-row consumer warpgroup, plus the producer warpgroup when WS."""
    p = full_params(params)
    return 128 * (p["BM"] // 64 + p["WS"])


def smem_bytes(params: dict, qtype: str) -> int:
    """Dynamic shared memory of one CTA; mirrors kSmemWg in mmq_wgmma.cu and kSmemWs in
    mmq_wgmma_ws.cu (checked on the GPU): 1 KB alignment slack, the activation ring, the
    dequantized chunks, 2 raw super-block slots (and the mbarriers when WS); kSmemRs in
    mmq_wgmma_rs.cu: no dequantized chunks, RAW raw slots."""
    p = full_params(params)
    bm, bn = p["BM"], p["BN"]
    raw = p["RAW"] * bm * RAW_CHUNKS[qtype] * 16
    if p["AREG"]:
        return 1024 + p["STAGES"] * bn * 128 + raw + RS_BARRIER_BYTES
    if p["WS"]:
        return 1024 + p["STAGES"] * bn * 128 + p["ABUF"] * bm * 128 + raw + WS_BARRIER_BYTES
    return 1024 + p["STAGES"] * bn * 128 + 2 * bm * 128 + raw


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    p = full_params(params)
    if p["BM"] not in (64, 128):  # 3-4 warpgroups of BN=256 accumulators overflow the register file
        return f"BM={p['BM']} is not 64 x warpgroups (64 or 128)"
    if p["BN"] not in WGMMA_WIDTHS:
        return f"BN={p['BN']} is not a wgmma N this family provides ({', '.join(map(str, WGMMA_WIDTHS))})"
    if p["WS"] not in (0, 1):
        return f"WS={p['WS']} is not 0 (one role per warp) or 1 (producer warpgroup)"
    if p["AREG"] not in (0, 1):
        return f"AREG={p['AREG']} is not 0 (A from shared memory) or 1 (A dequantized into registers)"
    if not (2 if p["AREG"] else 3) <= p["STAGES"] <= 4:
        return f"STAGES={p['STAGES']} outside {2 if p['AREG'] else 3}..4"
    if not 2 <= p["RAW"] <= 6:
        return f"RAW={p['RAW']} outside 2..6 (raw super-block slots, AREG=1)"
    if p["XTILE"] not in (0, 1):
        return f"XTILE={p['XTILE']} is not 0 (row-major f16 activations) or 1 (pre-tiled, bulk-copied)"
    if p["XTILE"] and params.get("X16_INPUT"):
        return "X16_INPUT=1 feeds row-major f16 rows; XTILE=1 needs the tiling pass"
    if p["XSYNC"] not in (0, 1):
        return f"XSYNC={p['XSYNC']} is not 0 (MMA warps fence) or 1 (the producer fences)"
    if p["ABUF"] != 2 and not (p["WS"] and p["ABUF"] == 3):
        return f"ABUF={p['ABUF']}: 2, or 3 with WS=1"
    if p["DEQ"] not in (0, 1):
        return f"DEQ={p['DEQ']} is not 0 (f32 dequant math) or 1 (f16x2)"
    limit = device_info.get("smem_per_block_optin", 227 * 1024)
    need = smem_bytes(p, qtype)
    return f"shared memory {need} B > device limit {limit} B" if need > limit else None


class WgmmaBound(mmq_f16.F16Bound):
    """XTILE=1: the activation pass writes [token tile][K / 64][BN rows x 128 B] f16 chunks, padded
    to whole tiles, in the swizzled order the kernel's bulk copies land them in shared memory."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.tile_n = variant.params["BN"] if variant.params.get("XTILE") else 0
        super().__init__(device, variant, handle, problem)

    def alloc_activation(self, T: int, K: int) -> list:
        if not self.tile_n:
            return super().alloc_activation(T, K)
        return [self.device.empty((math.ceil(T / self.tile_n) * self.tile_n, K), np.float16)]

    def activation_pass(self, x) -> None:
        if not self.tile_n:
            return super().activation_pass(x)
        units = self.scratch[0].size // 8  # one thread per 16-byte unit
        self.handle["convert_tiled"].launch((min(8192, math.ceil(units / mmq_f16.CONVERT_THREADS)), 1, 1),
                                            (mmq_f16.CONVERT_THREADS, 1, 1),
                                            (x.ptr, self.scratch[0].ptr, np.int32(self.wl.T), np.int32(self.wl.K)), 0)


class MMQWgmmaFamily(mmq_f16.MMQF16Family):
    name = "mmq_wgmma"
    cu_file = MMQ_WGMMA_CU
    kernel_name = "mmq_wgmma_gemm"
    reduce_name = "mmq_wgmma_splitk_reduce"
    smem_symbol = "mmq_wgmma_smem_bytes"

    def complete(self, params: dict) -> dict:
        return full_params(params)

    def threads(self, params: dict) -> int:
        return threads(params)

    def source(self, params: dict, qtype: str) -> str:
        p = full_params(params)
        cu = MMQ_WGMMA_RS_CU if p["AREG"] else MMQ_WGMMA_WS_CU if p["WS"] else MMQ_WGMMA_CU
        return nvcc.render_source(cu, self.defines(params, qtype))

    def target_arch(self, device_arch: str) -> str:
        base = nvcc.arch_base(device_arch)
        if base != "sm_90":
            raise ValueError(f"mmq_wgmma: wgmma needs an sm_90 (Hopper) device, not {device_arch}")
        return "sm_90a"

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def make_bound(self, device, variant, handle: dict, problem):
        handle.setdefault("convert", handle["module"].kernel("f32_to_f16", 0))
        if variant.params.get("XTILE"):
            handle.setdefault("convert_tiled", handle["module"].kernel("f32_to_f16_tiled", 0))
        return WgmmaBound(device, variant, handle, problem)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {"QTYPE": mmq_base.QTYPE_ID[qtype], **{k: p[k] for k in (*COMPILE_KEYS, "WARPS_M", "WARPS_N")}}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def precompile_configs(self) -> list[dict]:
        return [DEFAULTS, *(heuristic_params(t, q) for t in (16, 64, 128, 256, 512, 2048) for q in RAW_CHUNKS)]


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:
    """A starting configuration per T, used until a study promotes a champion: the register-A
    kernel (AREG=1), the q4_K/q6_K sweep winners of docs/perf-log.md runs 8-10. q6_K holds three
    raw words per weight pair in flight, so its large tile is 192 tokens wide (256 spills)."""
    if T <= 16:
        return {"AREG": 1, "BM": 64, "BN": 16, "STAGES": 4, "RAW": 3}
    if T <= 64:
        return {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 2}
    if T <= 128:
        return {"AREG": 1, "BM": 128, "BN": 128, "STAGES": 4, "RAW": 2}
    return {"AREG": 1, "BM": 128, "BN": 192 if qtype == "q6_K" else 256, "STAGES": 4, "RAW": 2}


FAMILY = MMQWgmmaFamily()

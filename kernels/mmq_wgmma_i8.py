"""Launcher of the Hopper int8 MMQ (kernels/cuda/mmq_wgmma_i8.cu, lever `wgmma_i8`): ggml weight
blocks unpacked into int8 wgmma A registers, Q8_1 activations as wgmma B, `wgmma.mma_async
m64nNk32.s32.s8.s8`, mmq_base's per-32 rescale in f32. Built for sm_90a.

The math contract is mmq_base's (parity "int": tight against the CPU integer reference), and so is
the activation format, Q8_1; only its layout differs: the timed pass (`quantize_q8_1_tiled`, in the
same cubin, the standalone quantizer's per-lane code) writes each (token tile, 128-k step) as one
contiguous, already swizzled q chunk and one chunk of token scales (d, d*s), which the kernel's
producer moves with two bulk copies. Both buffers cover whole BN-token tiles (padding tokens zero).

Parameters: BM (64 x consumer warpgroups), BN (tokens), STAGES (activation stages, 2-4), RAW (raw
weight super-block slots, 2-6), NSPLIT (token parts per 32-block: each part is one wgmma group and
BN / (2 NSPLIT) s32 registers; q6_K cuts each part in two again for its lo/hi halves), MIN_BLOCKS;
SPLITK at launch, as every MMQ family.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import mmq_base, mmq_wgmma, nvcc
from kernels.mmq_base import RAW_CHUNKS

MMQ_WGMMA_I8_CU = Path(__file__).parent / "cuda" / "mmq_wgmma_i8.cu"

DEFAULTS = {"BM": 128, "BN": 128, "STAGES": 4, "RAW": 2, "NSPLIT": 1, "MIN_BLOCKS": 1, "SPLITK": 0}
COMPILE_KEYS = ("BM", "BN", "STAGES", "RAW", "NSPLIT", "MIN_BLOCKS")
BARRIER_BYTES = 256  # kBarBytes in mmq_wgmma_i8.cu
STEP_K = 128  # k per pipeline step: one 128-byte swizzled row of int8
PASS_THREADS = 256
WIDTHS = mmq_wgmma.WGMMA_WIDTHS  # the N of the generated s8 wrappers (kernels/wgmma_header.py)
# BN=192 spills 72-570 bytes even with NSPLIT=4 (ptxas, CUDA 13.0): the f32 accumulators (BN / 2)
# and the token scales the compiler hoists per block leave too few of the 224 registers
MAX_BN = 128


def full_params(params: dict) -> dict:
    """Defaults filled in; WARPS_M/WARPS_N derived (one warpgroup of 4 warps per 64 rows)."""
    p = {**DEFAULTS, **{k: v for k, v in params.items() if k not in ("WARPS_M", "WARPS_N")}}
    return {**p, "WARPS_M": p["BM"] // 16, "WARPS_N": 1}


def threads(params: dict) -> int:
    """Four warps per 64-row consumer warpgroup, plus the producer warpgroup."""
    return 128 * (full_params(params)["BM"] // 64 + 1)


def parts(params: dict, qtype: str) -> int:
    """wgmma groups per 32-block: NSPLIT token parts, each cut in two for q6_K's 16-wide halves."""
    return full_params(params)["NSPLIT"] * (2 if qtype == "q6_K" else 1)


def smem_bytes(params: dict, qtype: str) -> int:
    """Dynamic shared memory of one CTA; mirrors kSmemI8 in mmq_wgmma_i8.cu (checked on the GPU):
    1 KB alignment slack, STAGES x (q chunk BN x 128 B + scale chunk BN x 32 B), RAW raw slots,
    the mbarriers."""
    p = full_params(params)
    return 1024 + p["STAGES"] * p["BN"] * (STEP_K + 32) + p["RAW"] * p["BM"] * RAW_CHUNKS[qtype] * 16 + BARRIER_BYTES


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    p = full_params(params)
    if p["BM"] not in (64, 128):  # a third consumer warpgroup leaves no registers for the accumulators
        return f"BM={p['BM']} is not 64 x warpgroups (64 or 128)"
    if p["NSPLIT"] not in (1, 2, 4):
        return f"NSPLIT={p['NSPLIT']} is not 1, 2 or 4"
    n = parts(p, qtype)
    if p["BN"] % n or p["BN"] // n not in WIDTHS:
        return (f"BN={p['BN']} in {n} token parts: {p['BN'] / n:g} is not a wgmma N this family provides "
                f"({', '.join(map(str, WIDTHS))})")
    if p["BN"] > MAX_BN:  # BN / 2 f32 accumulators + the s32 dots + the block's token scales per thread
        return f"BN={p['BN']} > {MAX_BN}: the accumulators outgrow the consumers' 224 registers (spills)"
    if not 2 <= p["STAGES"] <= 4:
        return f"STAGES={p['STAGES']} outside 2..4"
    if not 2 <= p["RAW"] <= 6:
        return f"RAW={p['RAW']} outside 2..6 (raw super-block slots)"
    return mmq_base.smem_limit_reason(smem_bytes(p, qtype), device_info)


class WgmmaI8Bound(mmq_base.MMQBound):
    """Q8_1 activations in the kernel's tiled layout: [tile][K / 128][BN x 128 int8] and
    [tile][K / 32][BN / 8][4][4 floats], whole BN-token tiles, from one pass per run."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.tile_n = variant.params["BN"]
        super().__init__(device, variant, handle, problem)

    def padded_tokens(self, T: int) -> int:
        return math.ceil(T / self.tile_n) * self.tile_n

    def alloc_activation(self, T: int, K: int) -> list:
        t = self.padded_tokens(T)
        return [self.device.empty((t, K), np.int8), self.device.empty((t, K // 32, 2), np.float32)]

    def activation_pass(self, x) -> None:
        lanes = self.padded_tokens(self.wl.T) * self.wl.K // 32 * 4
        self.handle["quantize_tiled"].launch((math.ceil(lanes / PASS_THREADS), 1, 1), (PASS_THREADS, 1, 1),
                                             (x.ptr, self.scratch[0].ptr, self.scratch[1].ptr,
                                              np.int32(self.wl.T), np.int32(self.wl.K)), 0)


class MMQWgmmaI8Family(mmq_base.MMQFamily):
    name = "mmq_wgmma_i8"
    parity = "int"
    cu_file = MMQ_WGMMA_I8_CU
    kernel_name = "mmq_wgmma_i8_gemm"
    reduce_name = "mmq_wgmma_i8_splitk_reduce"
    smem_symbol = "mmq_wgmma_i8_smem_bytes"

    def complete(self, params: dict) -> dict:
        return full_params(params)

    def threads(self, params: dict) -> int:
        return threads(params)

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {"QTYPE": mmq_base.QTYPE_ID[qtype], **{k: p[k] for k in (*COMPILE_KEYS, "WARPS_M", "WARPS_N")}}

    def target_arch(self, device_arch: str, params: dict | None = None) -> str:
        return nvcc.wgmma_arch(device_arch, self.name)

    def make_bound(self, device, variant, handle: dict, problem):
        handle.setdefault("quantize_tiled", handle["module"].kernel("quantize_q8_1_tiled", 0))
        return WgmmaI8Bound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [DEFAULTS, *(heuristic_params(t) for t in (16, 64, 128, 2048))]


def tile_q8_1(xq, bn: int) -> tuple[np.ndarray, np.ndarray]:
    """What the activation pass writes for Q8_1 activations `xq` (kernels.quant.Q8_1Act), in numpy:
    q uint8 [tiles, K / 128, bn * 128] (token row r of a tile, byte k of a step at the 128B-swizzled
    offset 1024 (r // 8) + 128 (r % 8) + 16 ((k // 16) ^ (r % 8)) + k % 16) and scales float32
    [tiles, K / 32, bn / 8, 4, 4] ((d[t], d[t + 1], d s[t], d s[t + 1]) for t = 8 i + 2 tq at [.., i, tq, :]);
    tokens past T are zeros. The GPU test compares the pass's bytes with this."""
    T, K = xq.q.shape
    tiles = math.ceil(T / bn)
    pad = tiles * bn - T
    q = np.pad(xq.q, ((0, pad), (0, 0))).view(np.uint8).reshape(tiles, bn, K // STEP_K, 8, 16)
    d = np.pad(xq.d.astype(np.float32), ((0, pad), (0, 0)))
    ds = np.pad((xq.d.astype(np.float32) * xq.s.astype(np.float32)).astype(np.float32), ((0, pad), (0, 0)))
    qt = np.zeros((tiles, K // STEP_K, bn // 8, 8, 8, 16), np.uint8)  # [tile][step][atom][row][unit][byte]
    for r in range(bn):
        for c in range(8):
            qt[:, :, r // 8, r % 8, c ^ (r % 8), :] = q[:, r, :, c, :]
    st = np.zeros((tiles, K // 32, bn // 8, 4, 4), np.float32)
    for h, src in ((0, d), (2, ds)):  # [tile][i][tq][t parity][block] -> [tile][block][i][tq][parity]
        st[..., h:h + 2] = src.reshape(tiles, bn // 8, 4, 2, K // 32).transpose(0, 4, 1, 2, 3)
    return qt.reshape(tiles, K // STEP_K, bn * STEP_K), st


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:  # one tile for every type
    """Starting configurations per T (unmeasured: the register-A f16 kernel's tile shapes, BN capped
    where the s32 dots and f32 accumulators fit the consumers' registers)."""
    if T <= 16:
        return {"BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "NSPLIT": 1}
    if T <= 64:
        return {"BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "NSPLIT": 1}
    return {"BM": 128, "BN": 128, "STAGES": 4, "RAW": 2, "NSPLIT": 1}


FAMILY = MMQWgmmaI8Family()

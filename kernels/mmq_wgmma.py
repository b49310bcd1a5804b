"""Launcher of the Hopper wgmma path: ggml weight blocks dequantized to f16 with their scales
applied, activations converted f32 -> f16 by a timed pass, `wgmma.mma_async` m64nBNk16 per
warpgroup with f32 accumulators. Built for sm_90a (wgmma exists only there). WS and AREG pick
the kernel:
  WS=0            kernels/cuda/mmq_wgmma.cu     every warpgroup loads, dequantizes and multiplies
  WS=1            kernels/cuda/mmq_wgmma_ws.cu  a producer warpgroup loads and dequantizes into
                                                shared memory for consumer warpgroups (mbarriers)
  AREG=1 (WS=1)   kernels/cuda/mmq_wgmma_rs.cu  the producer only copies; consumers dequantize
                                                into wgmma A registers (RAW raw slots deep);
                  XLOAD picks how activations reach shared memory: 0 cp.async of f16 rows,
                  1 one bulk copy per chunk that the pass wrote pre-tiled and swizzled, 2 TMA
                  (tensor map) on f16 rows, 3 f32 rows converted by the producer (no pass);
                  CLUSTER 2/4 splits K over a thread-block cluster that adds its partial sums
                  in distributed shared memory (no partial buffer, no reduce launch);
                  MCAST 2/4 CTAs along M share each activation chunk: each copies a
                  1 / MCAST share that the copy engine multicasts to all (XLOAD 1/2);
                  PDL 1 launches the GEMM as a programmatic dependent of the activation
                  pass, so it starts (barriers, weight prefetch) while the pass runs (PDL 2:
                  and the split-K reduce a dependent of the GEMM; with XLOAD 3, no pass,
                  only the reduce);
                  WREUSE 1 keeps the raw words later steps read again (q5_K, q6_K), 2 keeps
                  them spread as the dequant reads them;
                  PERSIST 1 launches one CTA per SM slot that loops over the output tiles,
                  its rings running on from one tile into the next (where K is split, the
                  plain grid: one tile per CTA);
                  RASTER 1 launches weight-row tiles fastest (0: token tiles fastest);
                  STREAMK 1 (XLOAD 1/2, no split K) shares the last wave's tiles out evenly: whole
                  tiles first, then one CTA per SM slot for the remaining (tile, super-block)
                  units, pieces summed by the last CTA of each tile (workspace + counters);
                  SPLITDEC 1 (q4_K, q5_K) spreads the next super-block's scale decode over
                  two steps of the loop instead of one;
                  L2PROMO (XLOAD 2, a launch setting, no recompile) is the tensor map's L2
                  promotion: 2 fetches 128 B per L2 miss, 3 fetches 256 B;
                  NSPLIT 2/4 keeps a warpgroup's accumulators as 2 or 4 independent column
                  blocks, one wgmma each per k16 slice, issued alternately (no back-to-back
                  wgmmas on one accumulator);
                  PREDEC 1 (q4_K, q5_K) has one producer warp decode each landed super-block's
                  scales for every row of the tile into shared memory, once per CTA, where each
                  consumer thread decoded its two rows' (four threads per row);
                  BF16_OUTPUT 1 (a launch choice, like X16_INPUT) writes C as bf16 (round to
                  nearest even), the output a 16-bit model passes on: half the bytes, each tile
                  written once (no split K, stream-K or cluster);
                  EPI 1 (with BF16_OUTPUT) stages each warp's bf16 outputs through 2 KB of
                  shared memory (stmatrix .trans) and writes whole 32-byte sectors, 16 B per
                  lane, where EPI 0 stores two bytes per fragment element (a BN that is not
                  a multiple of 16 keeps those direct stores);
                  ASETS 3 gives each consumer three A register sets, so two wgmma groups stay
                  in flight while it dequantizes the next step (2: one group, as before);
                  PROBE 1 / 2 are timing probes, not kernels (wrong numbers): 1 hands the raw
                  words to the wgmma undequantized (what the loop costs without the dequant
                  math), 2 skips the output stores (what the epilogue costs)
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
            "AREG": 0, "RAW": 2, "XSYNC": 0, "XLOAD": 0, "CLUSTER": 1, "MCAST": 1, "PDL": 0, "WREUSE": 0,
            "PERSIST": 0, "RASTER": 0, "SPLITDEC": 0, "L2PROMO": 2, "STREAMK": 0, "NSPLIT": 1, "PREDEC": 0, "BF16_OUTPUT": 0,
            "EPI": 0, "ASETS": 2, "PROBE": 0}
# CU_TENSOR_MAP_L2_PROMOTION_* a row-major f16 tensor map (XLOAD 2) may use: 2 = 128 B, 3 = 256 B per miss
L2_PROMOTIONS = (2, 3)
# how activations reach shared memory (the register-A kernel's XLOAD)
XLOADS = {0: "f16 rows by cp.async", 1: "pass-tiled f16 chunks by bulk copy", 2: "f16 rows by TMA",
          3: "f32 rows converted in the kernel"}
COMPILE_KEYS = ("BM", "BN", "STAGES", "DEQ", "MIN_BLOCKS", "ABUF", "RAW", "XSYNC", "XLOAD")
WS_BARRIER_BYTES = 128  # kBarBytes in mmq_wgmma_ws.cu


def rs_barrier_bytes(stages: int, raw: int) -> int:
    """kBarBytes in mmq_wgmma_rs.cu: 2 (STAGES + RAW) mbarriers of 8 bytes, in 256-byte units."""
    return -(-16 * (stages + raw) // 256) * 256


def full_params(params: dict) -> dict:
    """Defaults filled in; WARPS_M/WARPS_N derived (one warpgroup of 4 warps per 64 rows)."""
    p = {**DEFAULTS, **{k: v for k, v in params.items() if k not in ("WARPS_M", "WARPS_N")}}
    if p["AREG"]:  # the register-A kernel is warp-specialized; DEQ/ABUF do not apply to it
        p.update(WS=1, DEQ=1, ABUF=2)
        if p["XLOAD"]:  # the fence placement (XSYNC) is a choice of the cp.async loads only
            p.update(XSYNC=0)
    else:
        p.update(RAW=2, XSYNC=0, XLOAD=0)
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
        predec = 128 + p["RAW"] * bm * 32 if p["PREDEC"] and qtype in ("q4_K", "q5_K") else 0  # kPreDecBytes
        epi = (bm // 16) * 2048 if p["EPI"] and bn % 16 == 0 else 0  # kEpiBytes: 2 KB of staging per consumer warp
        return 1024 + p["STAGES"] * bn * 128 + raw + rs_barrier_bytes(p["STAGES"], p["RAW"]) + predec + epi
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
    lo, hi = (2, 16) if p["AREG"] else (3, 4)  # the register-A kernel's ring runs deep for narrow tiles
    if not lo <= p["STAGES"] <= hi:
        return f"STAGES={p['STAGES']} outside {lo}..{hi}"
    if not 2 <= p["RAW"] <= 8:
        return f"RAW={p['RAW']} outside 2..8 (raw super-block slots, AREG=1)"
    if p["XLOAD"] not in XLOADS:
        return f"XLOAD={p['XLOAD']} is not one of " + ", ".join(f"{k} ({v})" for k, v in XLOADS.items())
    if p["XLOAD"] in (1, 3) and params.get("X16_INPUT"):
        return f"X16_INPUT=1 feeds row-major f16 rows; XLOAD={p['XLOAD']} reads {XLOADS[p['XLOAD']]}"
    if p["XLOAD"] == 3 and p["BN"] > 16:
        return f"XLOAD=3 holds two steps' f32 activations in registers: BN={p['BN']} > 16"
    if p["XSYNC"] not in (0, 1):
        return f"XSYNC={p['XSYNC']} is not 0 (MMA warps fence) or 1 (the producer fences)"
    if p["ABUF"] != 2 and not (p["WS"] and p["ABUF"] == 3):
        return f"ABUF={p['ABUF']}: 2, or 3 with WS=1"
    if p["DEQ"] not in (0, 1):
        return f"DEQ={p['DEQ']} is not 0 (f32 dequant math) or 1 (f16x2)"
    if reason := cluster_reason(p, qtype) or multicast_reason(p):
        return reason
    if p["PDL"] not in (0, 1, 2):
        return (f"PDL={p['PDL']} is not 0 (plain launch), 1 (dependent launch after the activation pass) "
                "or 2 (and the split-K reduce after the GEMM)")
    if p["PDL"] and not p["AREG"]:
        return "PDL >= 1 overlaps the GEMM with its activation pass: the register-A kernel with XLOAD 0-2"
    if p["PDL"] == 1 and p["XLOAD"] == 3:
        return "PDL=1 overlaps the GEMM with its activation pass: XLOAD 0-2 (XLOAD 3 has no pass; PDL=2 its reduce)"
    if p["WREUSE"] not in (0, 1, 2) or (p["WREUSE"] and not p["AREG"]):
        return (f"WREUSE={p['WREUSE']}: 0, or 1 (raw words kept across steps) or 2 (kept spread) with the "
                "register-A kernel")
    if reason := persistent_reason(p):
        return reason
    if p["RASTER"] not in (0, 1) or (p["RASTER"] and not p["AREG"]):
        return (f"RASTER={p['RASTER']}: 0 (token tiles fastest), or 1 (weight-row tiles fastest) with the "
                "register-A kernel")
    if p["SPLITDEC"] not in (0, 1) or (p["SPLITDEC"] and not p["AREG"]):
        return f"SPLITDEC={p['SPLITDEC']}: 0, or 1 (the scale decode spread over two steps) with the register-A kernel"
    if p["STREAMK"] not in (0, 1) or (p["STREAMK"] and (not p["AREG"] or p["XLOAD"] not in (1, 2) or p["CLUSTER"] > 1
                                                      or p["MCAST"] > 1 or p["PERSIST"])):
        return (f"STREAMK={p['STREAMK']}: 0, or 1 with the register-A kernel, XLOAD 1 or 2, no cluster and not "
                "PERSIST")
    if p["NSPLIT"] not in (1, 2, 4) or (p["NSPLIT"] > 1 and not p["AREG"]):
        return f"NSPLIT={p['NSPLIT']}: 1, or 2 or 4 accumulator column blocks with the register-A kernel"
    if p["BN"] // p["NSPLIT"] not in WGMMA_WIDTHS or p["BN"] % p["NSPLIT"]:
        return f"NSPLIT={p['NSPLIT']}: BN / NSPLIT = {p['BN'] / p['NSPLIT']:g} is not a wgmma N"
    if p["PREDEC"] not in (0, 1) or (p["PREDEC"] and not p["AREG"]):
        return f"PREDEC={p['PREDEC']}: 0, or 1 (the scales decoded by a producer warp) with the register-A kernel"
    if p["BF16_OUTPUT"] not in (0, 1) or (p["BF16_OUTPUT"] and (not p["AREG"] or p["STREAMK"] or p["CLUSTER"] > 1
                                                                 or p["SPLITK"] > 1)):
        return (f"BF16_OUTPUT={p['BF16_OUTPUT']}: 0, or 1 with the register-A kernel and each tile written once "
                "(no STREAMK, CLUSTER or SPLITK > 1)")
    if p["EPI"] not in (0, 1) or (p["EPI"] and not p["BF16_OUTPUT"]):
        return f"EPI={p['EPI']}: 0, or 1 (the bf16 tile staged through shared memory) with BF16_OUTPUT=1"
    if p["ASETS"] not in (2, 3) or (p["ASETS"] == 3 and (not p["AREG"] or p["STAGES"] < 3)):
        return (f"ASETS={p['ASETS']}: 2, or 3 A register sets (two wgmma groups in flight) with the register-A kernel "
                "and STAGES >= 3")
    if p["PROBE"] not in (0, 1, 2) or (p["PROBE"] and not p["AREG"]):
        return (f"PROBE={p['PROBE']}: 0, or a timing probe of the register-A kernel: 1 (raw words, no dequant math) "
                "or 2 (no output stores)")
    if p["L2PROMO"] not in L2_PROMOTIONS:
        return f"L2PROMO={p['L2PROMO']} is not a tensor-map L2 promotion: 2 (128 B per miss) or 3 (256 B)"
    return mmq_base.smem_limit_reason(smem_bytes(p, qtype), device_info)


def cluster_reason(p: dict, qtype: str) -> str | None:
    """CLUSTER > 1 (the register-A kernel only): K split over the cluster's CTAs, whose partial
    sums (BN / 2 floats per consumer thread) must fit in the drained ring and raw slots."""
    if p["CLUSTER"] not in (1, 2, 4):
        return f"CLUSTER={p['CLUSTER']} is not 1, 2 or 4 CTAs along K"
    if p["CLUSTER"] == 1:
        return None
    if not p["AREG"]:
        return "CLUSTER > 1 is the register-A kernel's (AREG=1) split of K"
    if p["SPLITK"] not in (0, p["CLUSTER"]):
        return f"SPLITK={p['SPLITK']} with CLUSTER={p['CLUSTER']}: the cluster is the split"
    partials = 128 * (p["BM"] // 64) * p["BN"] * 2
    drained = p["STAGES"] * p["BN"] * 128 + p["RAW"] * p["BM"] * RAW_CHUNKS[qtype] * 16
    if partials > drained:
        return f"CLUSTER={p['CLUSTER']}: {partials} B of partial sums exceed the {drained} B of ring and raw slots"
    return None


def persistent_reason(p: dict) -> str | None:
    """PERSIST=1: the register-A kernel's CTAs loop over output tiles, one CTA each (no cluster),
    activations by the copy engine (XLOAD 1/2)."""
    if p["PERSIST"] not in (0, 1):
        return f"PERSIST={p['PERSIST']} is not 0 (one CTA per tile) or 1 (CTAs loop over the tiles)"
    if not p["PERSIST"]:
        return None
    if not p["AREG"] or p["XLOAD"] not in (1, 2):
        return f"PERSIST=1 is the register-A kernel's with XLOAD 1 or 2, not AREG={p['AREG']} XLOAD={p['XLOAD']}"
    if p["CLUSTER"] > 1 or p["MCAST"] > 1:
        return "PERSIST=1 runs each tile in one CTA: no CLUSTER or MCAST"
    return None


def multicast_reason(p: dict) -> str | None:
    """MCAST > 1 (the register-A kernel, activations by the copy engine): a cluster of MCAST CTAs
    along M, each copying whole 8-row swizzle atoms of every chunk, multicast to the others."""
    if p["MCAST"] not in (1, 2, 4):
        return f"MCAST={p['MCAST']} is not 1, 2 or 4 CTAs along M"
    if p["MCAST"] == 1:
        return None
    if not p["AREG"] or p["XLOAD"] not in (1, 2):
        return f"MCAST > 1 is the copy engine's multicast: AREG=1 with XLOAD 1 or 2, not XLOAD={p['XLOAD']}"
    if p["CLUSTER"] > 1:
        return "MCAST > 1 with CLUSTER > 1: a cluster either splits K or shares activations"
    if (p["BN"] // p["MCAST"]) % 8:
        return f"MCAST={p['MCAST']}: BN={p['BN']} does not split into whole 8-token swizzle atoms"
    return None


class WgmmaBound(mmq_f16.F16Bound):
    """The activation side of each XLOAD (the f16 path's X16_INPUT still says whether f16 rows
    arrive as they are):
      0  the f32 -> f16 pass into row-major f16 (or the f16 rows), cp.async'd by the kernel;
      1  the pass writes [token tile][K / 64][BN rows x 128 B] chunks, padded to whole tiles,
         in the swizzled order the kernel's bulk copies land them in;
      2  as 0, but the kernel gets a TMA tensor map of the f16 rows instead of their address;
      3  no pass: the kernel reads the f32 rows."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.xload, self.tile_n = variant.params.get("XLOAD", 0), variant.params["BN"]
        mcast = variant.params.get("MCAST", 1)
        self.maps: list = []
        super().__init__(device, variant, handle, problem)
        if mcast > 1:  # whole clusters along M: a CTA past M loads clamped rows and stores nothing
            gx, gy, gz = self.grid
            self.grid = (gx, -(-gy // mcast) * mcast, gz)
        if variant.params.get("RASTER"):  # blockIdx.x walks the weight-row tiles
            gx, gy, gz = self.grid
            self.grid = (gy, gx, gz)
        if variant.params.get("PERSIST") and self.splitk == 1:  # as many CTAs as fit, looping over tiles
            gx, gy, _ = self.grid
            slots = mmq_base.cta_slots(handle["threads"], self.smem, device.info, variant.resources.get("registers", 128))
            self.grid = (min(gx * gy, slots), 1, 1)
        self.streamk, self.sk_ctas, self.work, self.counters = bool(variant.params.get("STREAMK")), 0, None, None
        if self.streamk and self.splitk == 1:
            self.plan_stream_k(variant, handle)
        self.launch_as_dependents(handle, FAMILY, variant.params.get("PDL", 0))
        if variant.params.get("BF16_OUTPUT"):
            self.out.release()
            self.out = device.empty((self.wl.T, self.wl.M), "bf16")
        if self.xload == 2:  # one map per f16 buffer the kernel reads: the pass's, or each input copy's
            rows = [self.scratch[0]] if not self.x16_input else self.x  # (a box is one CTA's share)
            promotion = variant.params.get("L2PROMO", DEFAULTS["L2PROMO"])
            self.maps = [device.tensor_map_f16(buf, self.wl.T, self.wl.K, self.tile_n // mcast, 64, promotion)
                         for buf in rows]

    def choose_split(self, params: dict, registers: int, n_threads: int) -> int:
        if params.get("BF16_OUTPUT"):  # the tile's CTA writes its bf16 outputs itself: no partial sums
            return 1
        return super().choose_split(params, registers, n_threads)

    def output(self) -> np.ndarray:
        out = super().output()
        if out.dtype == np.uint16:  # BF16_OUTPUT: bf16 bits, widened exactly
            return (out.astype(np.uint32) << 16).view(np.float32)
        return out

    def plan_stream_k(self, variant, handle: dict) -> None:
        """STREAMK: where the tiles leave the last wave short, a 1-D grid of the whole tiles of the full
        waves, then one CTA per SM slot (at most one per (tile, super-block) unit) for the rest;
        a workspace slot per CTA and piece (two each), a counter per shared tile."""
        p, wl = variant.params, self.wl
        tiles = math.ceil(wl.T / p["BN"]) * math.ceil(wl.M / p["BM"])
        slots = mmq_base.cta_slots(handle["threads"], self.smem, self.device.info,
                                   variant.resources.get("registers", 128))
        if tiles % slots == 0:
            return  # whole waves: the plain grid
        dp = tiles // slots * slots
        units = (tiles - dp) * (wl.K // 256)
        sk = min(slots, units)  # every sharer gets a unit at least
        if (sk + 1) * units >= 2**31:  # the kernel shares units out in 32-bit arithmetic
            return
        self.sk_ctas = sk
        self.grid = (dp + self.sk_ctas, 1, 1)
        self.work = self.device.empty((2 * self.sk_ctas, p["BM"] * p["BN"]), np.float32)
        self.counters = self.device.to_device(np.zeros(self.sk_ctas, np.int32))

    def extra_args(self) -> tuple:
        if not self.streamk:
            return ()
        if self.work is None:  # the plain grid: no workspace (null pointers)
            return 0, 0, np.int32(0)
        return self.work.ptr, self.counters.ptr, np.int32(self.sk_ctas)

    def has_pass(self) -> bool:
        return super().has_pass() and self.xload != 3  # XLOAD 3 converts in the kernel

    def alloc_activation(self, T: int, K: int) -> list:
        if self.xload == 3:
            return []
        if self.xload == 1:
            return [self.device.empty((math.ceil(T / self.tile_n) * self.tile_n, K), np.float16)]
        return super().alloc_activation(T, K)

    def activation_pass(self, x) -> None:
        if self.xload == 3:
            return
        if self.xload != 1:
            return super().activation_pass(x)
        units = self.scratch[0].size // 8  # one thread per 16-byte unit
        self.handle["convert_tiled"].launch((min(8192, math.ceil(units / mmq_f16.CONVERT_THREADS)), 1, 1),
                                            (mmq_f16.CONVERT_THREADS, 1, 1),
                                            (x.ptr, self.scratch[0].ptr, np.int32(self.wl.T), np.int32(self.wl.K)), 0)

    def activation_args(self) -> tuple:
        if self.xload == 3:
            return (self.x[self.current].ptr,)
        if self.xload == 2:
            return (self.maps[self.current if self.x16_input else 0].ptr,)
        return super().activation_args()

    def release(self) -> None:
        for buf in [*self.maps, self.work, self.counters]:
            if buf is not None:
                buf.release()
        super().release()


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

    def target_arch(self, device_arch: str, params: dict | None = None) -> str:
        return nvcc.wgmma_arch(device_arch, self.name)

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    bound_class = WgmmaBound

    def f16_input(self, params: dict) -> dict:
        """As the f16 path's, reading the rows by TMA (XLOAD 2) where `params` read pass-tiled chunks (1) or
        f32 rows (3), which f16 rows cannot feed."""
        params = super().f16_input(params)
        return {**params, "XLOAD": 2} if params.get("XLOAD") in (1, 3) else params

    def make_bound(self, device, variant, handle: dict, problem):
        if variant.params.get("XLOAD") == 1:
            handle.setdefault("convert_tiled", handle["module"].kernel("f32_to_f16_tiled", 0))
        return super().make_bound(device, variant, handle, problem)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        # the cluster and launch options are defined only away from their defaults (the kernel's own)
        options = {k: p[k] for k in ("CLUSTER", "MCAST", "PDL", "WREUSE", "PERSIST", "RASTER", "SPLITDEC",
                                          "STREAMK", "NSPLIT", "PREDEC", "BF16_OUTPUT", "EPI", "ASETS", "PROBE")
                   if p[k] != DEFAULTS[k]}  # (L2PROMO is the launcher's: not compiled in)
        return {"QTYPE": mmq_base.QTYPE_ID[qtype], **{k: p[k] for k in (*COMPILE_KEYS, "WARPS_M", "WARPS_N")},
                **options}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def precompile_configs(self) -> list[dict]:
        starts = [heuristic_params(t, q) for t in (16, 64, 128, 256, 512, 2048) for q in RAW_CHUNKS]
        return [DEFAULTS, *starts, *({**p, "XLOAD": 2} for p in starts)]  # the f16-input bench line's TMA


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:
    """A starting configuration per T, used until a study promotes a champion: the register-A
    kernel (AREG=1), the q4_K/q6_K sweep winners of docs/perf-log.md runs 12-13: activations by
    TMA (XLOAD=2) up to T=256, by bulk copies of pass-tiled chunks (XLOAD=1) beyond; q6_K with
    one more raw slot (q8_0's 128x256 tile has no room for it)."""
    if T <= 16:
        return {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2}
    if T <= 64:
        return {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2}
    if T <= 128:
        return {"AREG": 1, "BM": 128, "BN": 128, "STAGES": 4, "RAW": 3, "XLOAD": 2}
    return {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 3 if qtype == "q6_K" else 2,
            "XLOAD": 2 if T <= 256 else 1}


FAMILY = MMQWgmmaFamily()

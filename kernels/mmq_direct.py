"""Launcher of the direct-fragment kernel (kernels/cuda/mmq_direct.cu, lever `direct`): each warp
loads its q4_K weight rows from global memory (through registers or its own cp.async ring) into
`mma.sync m16n8k16` f16 A fragments (scales applied, the f16 path's contract) and its activations
straight from the f16 rows (or, XSHARED, from a per-CTA copy in shared memory); no producer warp, and no CTA
barrier in the loop past the first two super-blocks. Meant for few tokens (a 16-token
tile per CTA column), where the register-A wgmma kernel is bound by instruction issue (perf log
run 29); runs 32-37 measured it.

Parameters (compile time unless said):
  WARPS       warps per CTA, 16 MT weight rows each
  MT          m16 tiles per warp: 1, or 2 (32 rows share each activation fragment; RING only)
  MIN_BLOCKS  CTAs per SM the registers are capped for
  XAHEAD      when a chunk's activations are loaded: 0 as it starts, 1 a chunk ahead, 2 each half
              two k16 steps ahead
  RING        0: each thread prefetches the next super-block of its two rows into registers;
              2..8: each warp keeps a cp.async ring of RING super-blocks of its rows in shared
              memory, RING - 1 of them in flight
  L2PF        1: the ring's copies ask L2 for the surrounding 256 bytes; 2: as the GEMM starts each warp asks L2 for its
              rows' whole K range (a bulk prefetch per row): DRAM streams it during the pass and the prologue
  XSHARED     0: each warp reads its activations from global memory (through L1); n >= 1: the CTA copies
              the activations of its K range, at most n super-blocks, into shared memory once (cp.async: the
              first super-block in a group of its own; with a RING and XAHEAD 0); K is split at least
              ceil(super-blocks / n) ways
  PDL         1: the GEMM is a programmatic dependent launch of its f32 -> f16 pass and loads its
              first weights while the pass runs; 2: the split-K reduce is a dependent of the GEMM too
  FIXUP       0: a split K's partial sums are added by the reduce kernel; 1: by the last CTA of each tile to
              finish (a per-tile arrival counter, reset by that CTA), in the reduce kernel's order: no reduce launch
  MINSUM      1: the weight mins leave the dequant (one HFMA2 per weight pair instead of an HSUB2 and an
              HFMA2) and come back as a rank-1 term: -mn_j times the per-32 activation sums, which the
              pass writes beside the f16 rows (direct_pass; hi + lo f16 halves of the f32 sum), one more
              mma per super-block and 8 tokens. Needs the pass (not X16_INPUT) and |d sc| < 64
  ATOMIC      1: a split K's CTAs add their partial sums into C (16-byte red.global.add after a 4 x 4 shuffle
              transpose), C zeroed by the pass: no partial buffer, no reduce launch, the splits added in no fixed
              order. Needs the pass (not X16_INPUT); not with FIXUP. 2: the same reds, with no pass needed: the first
              split's CTA zeroes its tile of C as it starts and publishes the launch's epoch in the tile's flag; the
              other splits' CTAs wait for that epoch (long published by then) before their reds
  SPLITK      launch time; 0: chosen to fill one wave
  NIBLOP      1 (with MINSUM): each biased weight pair made by one LOP3 on the 32-bit word (low nibbles
              1024 + q, high nibbles 64 + q, from bytes 0, 2 and, of word >> 8, 1, 3), not a mask and a PRMT per
              pair: the same weights bit for bit, 2 instructions fewer per word; the pass writes each 4
              activations as k 0, 2, 1, 3 to match
  WG          1 (with XSHARED, MINSUM, MT 1, WARPS a multiple of 4): each k16 step one wgmma m64n16k16 per 4 warps,
              A the same dequantized fragments from registers, B the staged activations (128B-swizzled tiles,
              the pass writing each 64-k chunk in the fragments' k order); MINSUM's term stays an mma.sync
  CARVEOUT    1: the pass (and the reduce) prefer the most shared memory, the GEMM's carveout, so that SMs need not
              reconfigure between them and the GEMM's CTAs can sit beside the pass's (a launch choice: no code changes,
              a define only so that the module, which holds the attribute, is its own)
  WTILE       1 (with a RING, not L2PF 2): the weights reordered once, as they are uploaded, into warp tiles: each ring
              slot (one super-block of a warp's 16 MT rows) is 16 MT x 144 contiguous bytes and a tile's super-blocks
              follow one another, so each warp streams one contiguous range, not 16 MT rows 8 KB apart. 2: the same
              slots super-block major ([K / 256][tiles][16 MT][144]): at each loop step a K range's warps read one
              contiguous run of slots, the way a pure read walks memory
  PROBE       timing probes, not kernels (wrong numbers; with a RING): each leaves one stage of the loop out,
              to say what that stage costs. 1: the weights are not streamed past the first slots; 2: the raw
              words are the A registers (no dequant math); 3: one chunk of activations, loaded before the loop;
              4: no mma (its operands folded into the accumulators by LOP3); 5: no loop at all (the prologue's
              copies, the pass and the epilogue: the launch's fixed cost); 6: the loop streams the weights only
  XFUSE       1 (with XSHARED; not ATOMIC 1 or WG): one launch, no pass. The GEMM reads the f32 activations and each CTA
              writes its K range's f16 rows (and MINSUM's per-32 sums) into its shared memory itself, the pass's
              rounding and sums: each warp converts its share of the next super-block while it multiplies this one
              (one mbarrier per super-block). The splits are then summed by ATOMIC 2, FIXUP, CLUSTER or the reduce kernel
  CLUSTER     n > 1 (with XSHARED; not ATOMIC or FIXUP): K is split n ways and the n CTAs of a row tile are one
              thread-block cluster that sums their partial tiles in shared memory (each rank a share of the
              elements, over the ranks in order) and stores C: no zeroed C, no reds, no reduce launch. The K
              range of each CTA must fit XSHARED super-blocks (else a clear error for that shape)
The activation format is the f16 path's (kernels/mmq_f16.py: the timed pass, or f16 rows with
X16_INPUT=1).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kernels import mmq_base, mmq_f16, nvcc
from kernels.mmq_f16 import CONVERT_THREADS

MMQ_DIRECT_CU = Path(__file__).parent / "cuda" / "mmq_direct.cu"
TOKEN_TILE = 16
QTYPES = ("q4_K",)
WARP_COUNTS = (2, 4, 6, 8, 12, 16, 24)
DEFAULTS = {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 0, "XAHEAD": 1, "RING": 0, "L2PF": 0, "MT": 1, "XSHARED": 0,
            "FIXUP": 0, "MINSUM": 0, "ATOMIC": 0, "SPLITK": 0, "NIBLOP": 0, "WG": 0, "CARVEOUT": 0, "PROBE": 0,
            "XFUSE": 0, "CLUSTER": 1, "WTILE": 0}
# compile time, passed to nvcc only when not the default (the other kernels' cache keys stay)
OPTIONAL_KEYS = ("NIBLOP", "WG", "CARVEOUT", "PROBE", "XFUSE", "CLUSTER", "WTILE")
COMPILE_KEYS = ("WARPS", "MIN_BLOCKS", "PDL", "XAHEAD", "RING", "L2PF", "MT", "XSHARED", "FIXUP", "MINSUM", "ATOMIC")
SLOT_BYTES = 16 * 144  # a ring slot per m16 tile: one q4_K super-block of 16 rows
X_ROW_PAD = 64  # XSHARED: a staged token row's padding (rows 64 bytes apart modulo 128: no bank conflicts)
WG_TILE, WG_ALIGN = 2048, 1024  # WG: a staged chunk (16 tokens x 128 B, swizzled) and the swizzle atoms' alignment


def full_params(params: dict) -> dict:
    """With the derived tile: BM = 16 MT rows per warp times WARPS, BN = the 16-token tile (what the split-K
    choice and the reports read)."""
    p = {**DEFAULTS, **params}
    return {**p, "BM": 16 * p["MT"] * p["WARPS"], "BN": TOKEN_TILE}


def smem_bytes(params: dict) -> int:
    """Dynamic shared memory of one CTA (kSmemBytes in mmq_direct.cu): each warp's ring, and with
    XSHARED the CTA's 16 token rows of XSHARED super-blocks (512 bytes each, padded)."""
    p = full_params(params)
    staged = staged_bytes(p)
    sums = TOKEN_TILE * p["XSHARED"] * 4 * 8 if p["XFUSE"] and p["MINSUM"] else 0  # XFUSE's per-32 sums, shared
    return p["RING"] * p["WARPS"] * p["MT"] * SLOT_BYTES + staged + sums


def staged_bytes(p: dict) -> int:
    """XSHARED's staged activations (kXBytes): 16 padded token rows, or WG's swizzled tiles."""
    if not p["XSHARED"]:
        return 0
    return p["XSHARED"] * 4 * WG_TILE + WG_ALIGN if p["WG"] else TOKEN_TILE * (p["XSHARED"] * 512 + X_ROW_PAD)


def min_split(params: dict, K: int) -> int:
    """The fewest K splits under which each CTA's range of super-blocks fits its staged activations."""
    xshared = full_params(params)["XSHARED"]
    return -(-(K // 256) // xshared) if xshared else 1


def invalid_reason(params: dict, qtype: str, device_info: dict | None = None) -> str | None:
    p = full_params(params)
    if qtype not in QTYPES:
        return f"mmq_direct: {qtype} has no direct-fragment decoder (has {', '.join(QTYPES)})"
    if p["WARPS"] not in WARP_COUNTS:
        return f"WARPS={p['WARPS']} is not one of {WARP_COUNTS}"
    if p["XAHEAD"] not in (0, 1, 2):
        return f"XAHEAD={p['XAHEAD']} is not 0, 1 or 2"
    if p["L2PF"] not in (0, 1, 2) or (p["L2PF"] and not p["RING"]):
        return f"L2PF={p['L2PF']}: 0, or 1 / 2 with a RING (its copies' L2 hint / a bulk L2 prefetch of the warp's rows)"
    if p["MT"] not in (1, 2) or (p["MT"] == 2 and not p["RING"]):
        return f"MT={p['MT']}: 1, or 2 (32 rows per warp) with a RING"
    if p["RING"] == 1 or not 0 <= p["RING"] <= 8:
        return f"RING={p['RING']} is not 0 (register prefetch) or 2..8 super-blocks"
    if not 0 <= p["XSHARED"] <= 16 or (p["XSHARED"] and (not p["RING"] or p["XAHEAD"])):
        return f"XSHARED={p['XSHARED']}: 0, or 1..16 super-blocks with a RING and XAHEAD 0"
    if p["FIXUP"] not in (0, 1):
        return f"FIXUP={p['FIXUP']} is not 0 (the reduce kernel) or 1 (the last CTA of a tile)"
    if p["MINSUM"] not in (0, 1) or (p["MINSUM"] and p.get("X16_INPUT", 0)):
        return f"MINSUM={p['MINSUM']}: 0, or 1 with the f32 -> f16 pass (it writes the activation sums; not X16_INPUT)"
    if p["ATOMIC"] not in (0, 1, 2) or (p["ATOMIC"] == 1 and p.get("X16_INPUT", 0)) or (p["ATOMIC"] and p["FIXUP"]):
        return (f"ATOMIC={p['ATOMIC']}: 0, 1 with the f32 -> f16 pass (it zeroes C; not X16_INPUT), or 2 (the first split "
                "zeroes C); not with FIXUP (two ways of adding the splits)")
    if p["NIBLOP"] not in (0, 1) or (p["NIBLOP"] and not p["MINSUM"]):
        return f"NIBLOP={p['NIBLOP']}: 0, or 1 with MINSUM (its pairs are biased and the pass permutes the activations)"
    if p["WG"] not in (0, 1) or (p["WG"] and not (p["XSHARED"] and p["MINSUM"] and p["MT"] == 1 and p["WARPS"] % 4 == 0)):
        return (f"WG={p['WG']}: 0, or 1 with XSHARED, MINSUM (the pass writes its k order), MT 1 and WARPS a multiple "
                "of 4 (whole warpgroups)")
    if p["CARVEOUT"] not in (0, 1):
        return f"CARVEOUT={p['CARVEOUT']} is not 0 (the driver's choice per kernel) or 1 (every kernel of the call: the most shared memory)"
    if p["XFUSE"] not in (0, 1) or (p["XFUSE"] and (not p["XSHARED"] or p["ATOMIC"] == 1 or p["WG"] or p.get("X16_INPUT", 0))):
        return (f"XFUSE={p['XFUSE']}: 0, or 1 with XSHARED (the CTA's converted rows), without ATOMIC 1 (no pass zeroes C), "
                "WG (its tiles' k order) and X16_INPUT (nothing to convert)")
    if p["CLUSTER"] not in range(1, 9) or (p["CLUSTER"] > 1 and (not p["XSHARED"] or p["ATOMIC"] or p["FIXUP"])):
        return (f"CLUSTER={p['CLUSTER']}: 1, or 2..8 K splits in one thread-block cluster, with XSHARED (the partial tile "
                "is summed over the staged rows) and without ATOMIC or FIXUP (other ways of adding the splits)")
    if p["CLUSTER"] > 1 and TOKEN_TILE * (p["BM"] + 4) * 4 > staged_bytes(p):
        return f"CLUSTER={p['CLUSTER']}: the {p['BM']}-row partial tile does not fit XSHARED={p['XSHARED']}'s staged rows"
    if p["WTILE"] not in (0, 1, 2) or (p["WTILE"] and (not p["RING"] or p["L2PF"] == 2)):
        return (f"WTILE={p['WTILE']}: 0, or 1 / 2 (tile / super-block major) with a RING (its slots are the tiles) and "
                "without L2PF 2 (a per-row prefetch)")
    if p["PROBE"] not in range(7) or (p["PROBE"] and not p["RING"]) or (p["PROBE"] >= 5 and p["WG"]):
        return f"PROBE={p['PROBE']}: 0, or a timing probe 1..6 of the ring kernel (wrong numbers; 5, 6 not with WG)"
    if not 1 <= p["MIN_BLOCKS"] <= 8:
        return f"MIN_BLOCKS={p['MIN_BLOCKS']} outside 1..8"
    if p["PDL"] not in (0, 1, 2):
        return f"PDL={p['PDL']} is not 0, 1 (after the pass) or 2 (and the reduce after the GEMM)"
    return mmq_base.smem_limit_reason(smem_bytes(p), device_info or {})


class DirectBound(mmq_f16.F16Bound):
    """Grid (row tiles, K splits, token tiles of 16); the f16 path's activations."""

    def choose_split(self, params: dict, registers: int, n_threads: int) -> int:
        """At least the split under which a CTA's staged activations (XSHARED) hold its whole K range; with
        CLUSTER exactly CLUSTER splits, so that range must fit."""
        need = min_split(params, self.wl.K)
        cluster = params.get("CLUSTER", 1)
        if cluster > 1 and need > cluster:
            raise ValueError(f"mmq_direct CLUSTER={cluster}: K={self.wl.K} is {self.wl.K // 256} super-blocks, more than "
                             f"{cluster} CTAs of XSHARED={params['XSHARED']} hold; raise XSHARED or CLUSTER")
        return max(super().choose_split(params, registers, n_threads), need)

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.minsum = bool(variant.params.get("MINSUM", 0))
        p = full_params(variant.params)
        self.tile_rows = 16 * p["MT"] if p["WTILE"] else 0  # WTILE: the weights in warp tiles of this many rows
        self.sb_major = p["WTILE"] == 2
        self.fused = bool(variant.params.get("XFUSE", 0))  # no pass: the GEMM converts the f32 activations
        self.own_pass = (not self.fused and not variant.params.get("X16_INPUT", 0)  # direct_pass, not the f16 path's
                         and (self.minsum or bool(variant.params.get("ATOMIC", 0))))
        if self.minsum:
            check_minsum_scales(problem.w_packed)
        super().__init__(device, variant, handle, problem)
        gx, gy, gz = self.grid  # MMQBound's (token tiles, row tiles, splits)
        self.grid = (gy, gz, gx)
        self.atomic_split = variant.params.get("ATOMIC", 0) == 1 and self.splitk > 1  # the pass zeroes C
        # ATOMIC 2: a flag per (row tile, token tile), zero once; each launch publishes its own epoch in it
        self.flags = device.to_device(np.zeros(gx * gy, np.int32)) if variant.params.get("ATOMIC", 0) == 2 else None
        self.epoch = 0
        # FIXUP: one arrival counter per (row tile, token tile), zero between launches (unused with one split)
        self.counters = device.to_device(np.zeros(gx * gy, np.int32)) if variant.params.get("FIXUP", 0) else None
        self.launch_as_dependents(handle, FAMILY, variant.params.get("PDL", 0))

    def splits_summed_in_kernel(self, params: dict) -> bool:
        """ATOMIC: the GEMM adds a split's partial sums into C (zeroed by the pass) with reds."""
        return bool(params.get("ATOMIC", 0)) or super().splits_summed_in_kernel(params)

    def split_sum_args(self) -> tuple:
        return (self.out.ptr, self.counters.ptr) if self.counters is not None else ()

    def host_weights(self, w_packed: np.ndarray) -> np.ndarray:
        return tile_weights(w_packed, self.tile_rows, self.sb_major) if self.tile_rows else w_packed

    def has_pass(self) -> bool:
        return not self.fused and super().has_pass()

    # MINSUM: the pass also writes the per-32 activation sums, the GEMM's last argument (XFUSE: no pass, no buffers)
    def alloc_activation(self, T: int, K: int) -> list:
        if self.fused:
            return []
        rows = super().alloc_activation(T, K)
        return [*rows, self.device.empty((T, K // 16), np.float16)] if self.minsum else rows

    def activation_pass(self, x) -> None:
        if self.fused:
            return
        if not self.own_pass:
            return super().activation_pass(x)
        n4, n_zero = self.wl.T * self.wl.K // 4, self.wl.T * self.wl.M if self.atomic_split else 0
        sums = self.scratch[1].ptr if self.minsum else 0
        self.handle["direct_pass"].launch((min(8192, -(-n4 // CONVERT_THREADS)), 1, 1), (CONVERT_THREADS, 1, 1),
                                          (x.ptr, self.scratch[0].ptr, sums, self.out.ptr, np.int64(n4),
                                           np.int64(n_zero)), 0)

    def activation_args(self) -> tuple:
        if self.fused:  # the f32 activations themselves
            return (self.x[self.current].ptr,)
        return (self.scratch[0].ptr,) if self.minsum else super().activation_args()

    def extra_args(self) -> tuple:
        sums = (self.scratch[1].ptr,) if self.minsum and not self.fused else ()
        return (*sums, self.flags.ptr, np.int32(self.epoch)) if self.flags is not None else sums

    def run(self) -> None:
        self.epoch = self.epoch % (2**31 - 1) + 1  # ATOMIC 2: this launch's epoch (never 0, the flags' start)
        super().run()

    def release(self) -> None:
        super().release()
        for buf in (self.counters, self.flags):
            if buf is not None:
                buf.release()


class MMQDirectFamily(mmq_f16.MMQF16Family):
    name = "mmq_direct"
    cu_file = MMQ_DIRECT_CU
    kernel_name = "mmq_direct_gemm"
    reduce_name = "mmq_direct_splitk_reduce"
    smem_symbol = "mmq_direct_smem_bytes"
    bound_class = DirectBound

    def complete(self, params: dict) -> dict:
        return full_params(params)

    def threads(self, params: dict) -> int:
        return 32 * full_params(params)["WARPS"]

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params)

    def target_arch(self, device_arch: str, params: dict | None = None) -> str:
        """sm_90a for WG (its wgmma), the device's own arch otherwise."""
        return nvcc.wgmma_arch(device_arch, self.name) if full_params(params or {})["WG"] else device_arch

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        optional = {k: p[k] for k in OPTIONAL_KEYS if p[k] != DEFAULTS[k]}
        return {"QTYPE": mmq_base.QTYPE_ID[qtype], **{k: p[k] for k in COMPILE_KEYS}, **optional}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def f16_input(self, params: dict) -> dict:
        """f16 activations have no pass to write MINSUM's sums, zero ATOMIC 1's output or permute NIBLOP's and WG's k order: they
        run the kernel with the min in the dequant and the split-K reduce (or ATOMIC 2's reds, which need no pass)."""
        return {**super().f16_input(params),
                **{key: 0 for key in ("MINSUM", "NIBLOP", "WG", "XFUSE") if params.get(key)},
                **({"ATOMIC": 0} if params.get("ATOMIC") == 1 else {})}

    def make_bound(self, device, variant, handle: dict, problem):
        if variant.params.get("MINSUM") or variant.params.get("ATOMIC"):
            handle.setdefault("direct_pass", handle["module"].kernel("direct_pass", 0))
        bound = super().make_bound(device, variant, handle, problem)
        if variant.params.get("CARVEOUT"):
            for name in ("direct_pass", "convert", "reduce", "gemm"):
                if name in handle:
                    handle[name].prefer_shared_carveout(100)
        return bound

    def precompile_configs(self) -> list[dict]:
        return [DEFAULTS, heuristic_params(16)]


def tile_weights(w_packed: np.ndarray, rows: int, sb_major: bool = False, block_bytes: int = 144) -> np.ndarray:
    """WTILE's layout of q4_K rows [M, K / 256 x 144] (or another type's super-blocks of `block_bytes`): M padded with
    zero rows to a multiple of `rows`, then for each tile of `rows` rows its super-blocks in order, each the tile's
    `rows` x `block_bytes` bytes (row-major): [M / rows][K / 256][rows][block_bytes]; sb_major (WTILE 2):
    [K / 256][M / rows][rows][block_bytes]."""
    m, row_bytes = w_packed.shape
    tiles, nsb = -(-m // rows), row_bytes // block_bytes
    padded = np.zeros((tiles * rows, row_bytes), np.uint8)
    padded[:m] = w_packed
    order = (2, 0, 1, 3) if sb_major else (0, 2, 1, 3)
    return np.ascontiguousarray(padded.reshape(tiles, rows, nsb, block_bytes).transpose(*order))


def check_minsum_scales(w_packed: np.ndarray) -> None:
    """MINSUM's dequant adds -1024 f16(d sc), rounded as the kernel rounds it (f16 products of f16 operands); where the
    largest scale (sc = 63) overflows f16 for some super-block's d (|d| >= 65/64), a clear error, not -inf outputs."""
    d = np.ascontiguousarray(w_packed.reshape(w_packed.shape[0], -1, 144)[..., :2]).view(np.float16)
    largest = np.abs(d).max(initial=np.float16(0))
    with np.errstate(over="ignore"):
        offset = (largest * np.float16(63)) * np.float16(-1024)  # numpy rounds each f16 product once, as HMUL2 does
    if not np.isfinite(offset):
        raise ValueError(f"mmq_direct MINSUM=1: a q4_K super-block scale d = {float(largest):g} overflows its -1024 d sc "
                         "offset in f16 (|d| must stay below 65/64); run this weight with MINSUM=0")


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:
    """The starting configuration, the best of runs 32-37: four warps and four CTAs per SM (16
    warps at 114 registers), each warp's ring two super-blocks deep (one in flight), activations
    loaded as each chunk starts, the GEMM and its reduce as dependent launches."""
    return {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 0}


FAMILY = MMQDirectFamily()

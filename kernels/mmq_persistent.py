"""Launcher of the persistent-queue MMQ family (kernels/cuda/mmq_persistent.cu).

Same tile math and compile-time tile parameters as mmq_base; the schedule differs: a grid of
resident CTAs (sm_count x CTAS_PER_SM, capped by what fits on an SM and by the work) claims
(tile, k chunk) items from an atomic queue. One timed run = Q8_1 quantize + that one launch:
the queue counters reset themselves at the end of every launch and a split tile is reduced by
its last chunk inside the kernel, so no memset or reduce pass is queued.

Parameters beyond mmq_base's:
    ORDER        compile-time: "row" (weight row tile stays in L2 across its token tiles),
                 "token", or "grouped" (bands of GROUP_ROWS row tiles)
    SPLIT_MODE   compile-time: "none" (one item per tile) or "streamk" (k chunks; small T)
    CTAS_PER_SM  launch-time: resident CTAs per SM asked for
    SPLITK       launch-time, streamk only: chunks per tile (0 = balance the queue, see choose_chunks)
    CTAS         launch-time: grid size override (0 = sm_count x CTAS_PER_SM); tests use it to
                 make each CTA loop over many tiles
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import mmq_base
from kernels.family import Problem, Variant

MMQ_PERSISTENT_CU = Path(__file__).parent / "cuda" / "mmq_persistent.cu"

ORDERS = {"row": 0, "token": 1, "grouped": 2}
SPLIT_MODES = {"none": 0, "streamk": 1}
DEFAULTS = {"CTAS_PER_SM": 1, "ORDER": "row", "SPLIT_MODE": "none", "GROUP_ROWS": 8, "CTAS": 0}
COUNTER_SLOTS = 2  # queue index, CTAs finished; then one arrival counter per tile
MAX_CHUNKS = 16
MIN_CHUNK_SUPERBLOCKS = 2  # shorter k chunks leave the cp.async pipeline nothing to overlap


def full_params(params: dict) -> dict:
    return {**mmq_base.DEFAULTS, **DEFAULTS, **params}


def invalid_reason(params: dict, qtype: str, device_info: dict) -> str | None:
    p = full_params(params)
    if p["ORDER"] not in ORDERS:
        return f"ORDER={p['ORDER']!r} is not one of {', '.join(ORDERS)}"
    if p["SPLIT_MODE"] not in SPLIT_MODES:
        return f"SPLIT_MODE={p['SPLIT_MODE']!r} is not one of {', '.join(SPLIT_MODES)}"
    for key in ("CTAS_PER_SM", "GROUP_ROWS"):
        if p[key] < 1:
            return f"{key}={p[key]} must be >= 1"
    return mmq_base.invalid_reason(p, qtype, device_info)


def choose_chunks(n_tiles: int, n_superblocks: int, ctas: int, forced: int = 0) -> int:
    """k chunks per tile for the stream-K mode: the count that makes the queue drain in the
    fewest tile-chunk rounds, rounds = ceil(items / ctas) x ceil(superblocks / chunks);
    ties go to fewer chunks (each one costs a partial tile write and its reduction)."""
    if forced:
        return max(1, min(forced, n_superblocks))
    best, best_cost = 1, math.ceil(n_tiles / ctas) * n_superblocks
    for chunks in range(2, min(MAX_CHUNKS, n_superblocks // MIN_CHUNK_SUPERBLOCKS) + 1):
        cost = math.ceil(n_tiles * chunks / ctas) * math.ceil(n_superblocks / chunks)
        if cost < best_cost:
            best, best_cost = chunks, cost
    return best


def tile_counts(params: dict, M: int, T: int) -> tuple[int, int]:
    """(row tiles, token tiles) of the output."""
    return math.ceil(M / params["BM"]), math.ceil(T / params["BN"])


class PersistentBound(mmq_base.MMQBound):
    """mmq_base's buffers (weights, activations, output) with the queue's launch plan."""

    def __init__(self, device, variant: Variant, handle: dict, problem: Problem) -> None:
        super().__init__(device, variant, handle, problem)
        wl, p = self.wl, full_params(variant.params)
        n_tiles = math.prod(tile_counts(p, wl.M, wl.T))
        regs = variant.resources.get("registers", 128)
        fit = mmq_base.ctas_per_sm(handle["threads"], self.smem, device.info, regs)
        resident = device.info.get("sm_count", 132) * min(p["CTAS_PER_SM"], fit)
        ctas = p["CTAS"] or resident
        splits = 1
        if p["SPLIT_MODE"] == "streamk":
            splits = choose_chunks(n_tiles, wl.K // 256, ctas, p["SPLITK"])
        self._replace_partial(splits)
        self.splits = splits
        self.grid = (min(ctas, n_tiles * splits), 1, 1)
        self.counters = device.to_device(np.zeros(COUNTER_SLOTS + n_tiles, np.int32))

    def _replace_partial(self, splits: int) -> None:
        """The grid schedule's split-K workspace, resized for the queue's k chunks."""
        if self.partial is not None and self.partial.shape[0] == splits:
            return
        if self.partial is not None:
            self.partial.release()
        wl = self.wl
        self.partial = self.device.empty((splits, wl.T, wl.M), np.float32) if splits > 1 else None
        self.splitk = splits

    def run(self) -> None:
        wl, i = self.wl, self.i
        self.i = (self.i + 1) % len(self.w)
        self.activation_pass(self.x[i])
        self.handle["gemm"].launch(self.grid, self.block,
                                   (self.w[i].ptr, *self.activation_args(), self.out.ptr,
                                    self.partial.ptr if self.partial is not None else 0, self.counters.ptr,
                                    np.int32(wl.M), np.int32(wl.T), np.int32(wl.K), np.int64(self.row_bytes),
                                    np.int32(self.splits)), self.smem)

    def release(self) -> None:
        super().release()
        self.counters.release()


class PersistentFamily(mmq_base.MMQFamily):
    name = "mmq_persistent"
    cu_file = MMQ_PERSISTENT_CU
    kernel_name = "mmq_gemm_persistent"
    reduce_name = None  # a split tile is reduced in the kernel by its last chunk

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {**super().defines(p, qtype), "ORDER": ORDERS[p["ORDER"]], "SPLIT_MODE": SPLIT_MODES[p["SPLIT_MODE"]],
                "GROUP_ROWS": p["GROUP_ROWS"]}

    def make_bound(self, device, variant: Variant, handle: dict, problem: Problem) -> PersistentBound:
        return PersistentBound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [full_params({}), full_params({"SPLIT_MODE": "streamk", "ORDER": "grouped"})]


FAMILY = PersistentFamily()

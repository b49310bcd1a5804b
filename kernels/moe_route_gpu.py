"""Launcher of kernels/cuda/moe_route.cu: MoE routing on the GPU, with no host round-trip.

    router = GpuRouter(device, T, top_k, n_experts, token_tile=64, K=2048)
    router.route(ids)                  # ids: DeviceBuffer int32 [T, top_k] -> counts, offsets, order, work
    router.gather(xq, xd, xs)          # bucketed Q8_1 rows gq/gd/gs [T * top_k, ...] (needs K)
    router.scatter_rows(g, y, route_w) # y[order[pos]] = g[pos] * route_w[order[pos]]
    router.result()                    # host copies, for tests and debugging (synchronizes)

Buffers (all int32 unless noted): counts [E], offsets [E + 1], order [T * top_k],
work [capacity, 3] (rows past n_tiles are (-1, n_routed, 0)), n_tiles [1]; with K: gq int8
[T * top_k, K], gd float32 / gs int32 [T * top_k, K / 32]. Same values as the numpy
kernels.moe_routing.bucket / build_work_list; the work list is sized by work_list_capacity,
so a grouped GEMM can be launched over it without reading n_tiles back.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import nvcc
from kernels.moe_routing import work_list_capacity

ROUTE_CU = Path(__file__).resolve().parent / "cuda" / "moe_route.cu"
PARAMS = {"CHUNK_STEPS": 8, "ROUTE_WARPS": 4, "SCAN_THREADS": 1024, "GATHER_WARPS": 8, "ROW_THREADS": 256}
CHUNK = 32 * PARAMS["CHUNK_STEPS"]  # routed pairs per warp in count/scatter
MAX_EXPERTS = PARAMS["SCAN_THREADS"]  # the single-CTA scan holds one expert per thread
KERNELS = ("moe_route_count", "moe_route_scan", "moe_route_scatter", "moe_gather_q8_1", "moe_scatter_rows")


def source() -> str:
    return nvcc.render_source(ROUTE_CU, PARAMS)


def compile_for(arch: str = "sm_90") -> nvcc.Compiled:
    return nvcc.compile_cubin(source(), None, arch)


def count_smem_bytes(n_experts: int) -> int:
    """Dynamic shared memory of moe_route_count / moe_route_scatter: one [E] table per warp."""
    return PARAMS["ROUTE_WARPS"] * n_experts * 4


class GpuRouter:
    """Device buffers and launches of the routing kernels for one (T, top_k, n_experts) shape."""

    def __init__(self, device, T: int, top_k: int, n_experts: int, token_tile: int = 64, K: int | None = None) -> None:
        if not 1 <= n_experts <= MAX_EXPERTS:
            raise ValueError(f"gpu routing: n_experts={n_experts} outside 1..{MAX_EXPERTS} (one scan thread each)")
        if K is not None and K % 32:
            raise ValueError(f"gpu routing: K={K} is not a multiple of 32 (the Q8_1 block)")
        self.device, self.T, self.top_k, self.n_experts, self.K = device, T, top_k, n_experts, K
        self.token_tile = token_tile
        self.n_routed = T * top_k
        self.n_chunks = math.ceil(self.n_routed / CHUNK)
        self.capacity = work_list_capacity(self.n_routed, n_experts, token_tile)
        module = device.load(compile_for(device.info["arch"]))
        smem = count_smem_bytes(n_experts)
        self.k_count = module.kernel("moe_route_count", smem)
        self.k_scan = module.kernel("moe_route_scan", 0)
        self.k_scatter = module.kernel("moe_route_scatter", smem)
        self.k_gather = module.kernel("moe_gather_q8_1", 0)
        self.k_rows = module.kernel("moe_scatter_rows", 0)
        self.smem = smem

        i32 = np.int32
        self.chunk_hist = device.empty((self.n_chunks, n_experts), i32)
        self.chunk_base = device.empty((self.n_chunks, n_experts), i32)
        self.counts = device.empty((n_experts,), i32)
        self.offsets = device.empty((n_experts + 1,), i32)
        self.order = device.empty((self.n_routed,), i32)
        self.work = device.empty((self.capacity, 3), i32)
        self.n_tiles = device.empty((1,), i32)
        self.gathered = None
        if K is not None:
            self.gathered = (device.empty((self.n_routed, K), np.int8),
                             device.empty((self.n_routed, K // 32), np.float32),
                             device.empty((self.n_routed, K // 32), i32))

    def _chunk_grid(self) -> tuple[int, int, int]:
        return (math.ceil(self.n_chunks / PARAMS["ROUTE_WARPS"]), 1, 1)

    def route(self, ids) -> None:
        """Bucket the routed pairs of ids (int32 [T, top_k] on the device); async."""
        block = (32 * PARAMS["ROUTE_WARPS"], 1, 1)
        n, e = np.int32(self.n_routed), np.int32(self.n_experts)
        self.k_count.launch(self._chunk_grid(), block, (ids, n, e, self.chunk_hist), self.smem)
        self.k_scan.launch((1, 1, 1), (PARAMS["SCAN_THREADS"], 1, 1),
                           (self.chunk_hist, np.int32(self.n_chunks), e, np.int32(self.token_tile),
                            np.int32(self.capacity), self.counts, self.offsets, self.chunk_base, self.work,
                            self.n_tiles), 0)
        self.k_scatter.launch(self._chunk_grid(), block, (ids, n, e, self.chunk_base, self.order), self.smem)

    def gather(self, xq, xd, xs) -> None:
        """Copy each bucketed pair's Q8_1 activation row (of token order[pos] / top_k); async."""
        if self.gathered is None:
            raise ValueError("gpu routing: gather needs the router built with K")
        warps = PARAMS["GATHER_WARPS"]
        gq, gd, gs = self.gathered
        self.k_gather.launch((math.ceil(self.n_routed / warps), 1, 1), (32 * warps, 1, 1),
                             (self.order, np.int32(self.n_routed), np.int32(self.top_k), np.int32(self.K),
                              xq, xd, xs, gq, gd, gs), 0)

    def scatter_rows(self, g, y, M: int, route_w=None) -> None:
        """y[order[pos], :M] = g[pos, :M] * route_w[order[pos]] (float32 rows; route_w may be None); async."""
        self.k_rows.launch((self.n_routed, 1, 1), (PARAMS["ROW_THREADS"], 1, 1),
                           (g, self.order, np.int32(M), route_w if route_w is not None else 0, y), 0)

    def result(self) -> dict[str, np.ndarray]:
        """Host copies of the routing buffers (and the gathered rows when built with K)."""
        self.device.synchronize()
        out = {"counts": self.counts.get(), "offsets": self.offsets.get(), "order": self.order.get(),
               "work": self.work.get(), "n_tiles": int(self.n_tiles.get()[0])}
        if self.gathered is not None:
            out.update(zip(("gq", "gd", "gs"), (b.get() for b in self.gathered)))
        return out

    def release(self) -> None:
        for buf in (self.chunk_hist, self.chunk_base, self.counts, self.offsets, self.order, self.work,
                    self.n_tiles, *(self.gathered or ())):
            buf.release()

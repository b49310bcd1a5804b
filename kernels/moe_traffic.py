"""Expert-weight bytes each MoE approach reads for one routing: the number behind the
`moe_fusion` goal "weight bytes read / unique weight bytes <= 1.2x at T=2048".

Two levels, both counted from the routing and the launch order, never measured:
    global loads  what a schedule asks of the memory system (L2 requests), and
    DRAM reads    what an LRU model of the L2 predicts reaches DRAM for the fused kernel's launch
                  order (fused_dram; the other approaches are counted at global loads).

    unique          every expert with >= 1 token, once: the floor any approach must pay
    matvec          one full expert read per routed (t, slot) pair (moe_matvec, the seeds' engine)
    fused           global loads of the grouped GEMM over the work list: each (expert, token tile)
                    item reads all row tiles of its expert, so expert e is read ceil(c_e / token_tile) times
    fused_dram      the same loads through the L2 model (l2_dram_reads): CTAs taken one after
                    another in blockIdx order (mmq_moe.cu's ORDER), each touching its weight row tile
                    and its gathered activation tile; a tile is read from DRAM when it is not among the
                    most recently used bytes that fit in L2_SHARE of the L2. Concurrent CTAs share a tile
                    at least as well as back-to-back ones, so the sequential walk is the pessimistic side.
                    Check it on the GPU: scripts/profile_kernel.py --family moe_fused under Nsight Compute
                    prints the counted DRAM bytes beside dram__bytes_read.sum of the launch.
    fused_resident  an expert's row tile kept in shared memory across all its token tiles
                    (the persistent-kernel schedule): = unique
    dequant_cublas  packed expert read once by the dequant pass, then its bf16 copy
                    (2 bytes per weight) read by the matmul; the bf16 write is not a read
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kernels import quant
from kernels.moe_routing import build_work_list, tiles_per_expert
from kernels.moe_shapes import check_expert_shape


def expert_bytes(qtype: str, M: int, K: int) -> int:
    """Packed bytes of one expert's [M, K] weight."""
    check_expert_shape(qtype, M, K, "weight traffic")
    return M * quant.get(qtype).row_bytes(K)


@dataclass(frozen=True)
class WeightTraffic:
    expert_bytes: int
    n_routed: int  # routed (t, slot) pairs
    active_experts: int  # experts with >= 1 token
    token_tile: int
    unique_bytes: int
    matvec_bytes: int
    fused_bytes: int
    fused_dram_bytes: int
    fused_resident_bytes: int
    dequant_cublas_bytes: int

    def ratio(self, approach: str) -> float:
        """Weight bytes `approach` reads / unique weight bytes (1.0 is the floor)."""
        return getattr(self, f"{approach}_bytes") / self.unique_bytes

    def as_metrics(self, prefix: str = "weight_traffic") -> dict[str, float]:
        """Flat numbers for the perf log: bytes and the ratio of each approach."""
        out = {f"{prefix}/unique_bytes": float(self.unique_bytes),
               f"{prefix}/active_experts": float(self.active_experts)}
        for approach in APPROACHES:
            out[f"{prefix}/{approach}_bytes"] = float(getattr(self, f"{approach}_bytes"))
            out[f"{prefix}/{approach}_ratio"] = self.ratio(approach)
        return out


APPROACHES = ("matvec", "fused", "fused_dram", "fused_resident", "dequant_cublas")
L2_SHARE = 0.5  # of the L2 the model lets this kernel's weight and activation tiles hold (outputs stream too)
ORDERS = (0, 1)  # mmq_moe.cu ORDER: 0 token tile major, 1 row tile major within an expert


def launch_tiles(counts: np.ndarray, n_row: int, token_tile: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    """(weight tile, work item) of every live CTA of mmq_moe_grouped in blockIdx order; weight
    tile = expert * n_row + row tile, work item = row of build_work_list(counts, token_tile)."""
    if order not in ORDERS:
        raise ValueError(f"weight traffic: ORDER={order} not in {ORDERS}")
    work = build_work_list(counts, token_tile)
    items = np.arange(len(work))
    rows = np.arange(n_row)
    if order == 0:  # item major, row tile minor
        return (np.repeat(work[:, 0] * n_row, n_row) + np.tile(rows, len(work)), np.repeat(items, n_row))
    w_tiles, a_tiles = [], []
    for e in np.unique(work[:, 0]):  # the expert's items, each row tile walked over all of them
        mine = items[work[:, 0] == e]
        w_tiles.append(np.repeat(e * n_row + rows, len(mine)))
        a_tiles.append(np.tile(mine, n_row))
    return np.concatenate(w_tiles), np.concatenate(a_tiles)


def l2_dram_reads(w_tiles: np.ndarray, a_tiles: np.ndarray, w_bytes: np.ndarray, a_bytes: np.ndarray,
                  window: int) -> int:
    """Weight bytes read from DRAM when CTA i touches weight tile w_tiles[i] then activation tile
    a_tiles[i] (sizes w_bytes / a_bytes by tile id) through an LRU cache of `window` bytes."""
    cache: OrderedDict = OrderedDict()
    held = dram = 0
    for w, a in zip(w_tiles.tolist(), a_tiles.tolist()):
        for key, size in ((("w", w), int(w_bytes[w])), (("a", a), int(a_bytes[a]))):
            if key in cache:
                cache.move_to_end(key)
                continue
            dram += size if key[0] == "w" else 0
            cache[key] = size
            held += size
            while held > window and cache:
                held -= cache.popitem(last=False)[1]
    return dram


def fused_dram_bytes(counts: np.ndarray, qtype: str, M: int, K: int, token_tile: int, BM: int, order: int,
                     l2_bytes: int) -> int:
    """fused_dram of the module docstring: the L2 model over the launch order of mmq_moe_grouped."""
    counts = np.asarray(counts, dtype=np.int64)
    n_row = -(-M // BM)
    w_tiles, a_tiles = launch_tiles(counts, n_row, token_tile, order)
    row_bytes = quant.get(qtype).row_bytes(K)
    tile_rows = np.minimum(BM, M - BM * np.arange(n_row))
    w_bytes = np.tile(tile_rows * row_bytes, counts.size)  # by tile id e * n_row + r
    a_bytes = build_work_list(counts, token_tile)[:, 2].astype(np.int64) * (K + K // 32 * 8)  # Q8_1 q, d, s
    return l2_dram_reads(w_tiles, a_tiles, w_bytes, a_bytes, int(l2_bytes * L2_SHARE))


def weight_traffic(counts: np.ndarray, qtype: str, M: int, K: int, token_tile: int, *, BM: int = 128,
                   order: int = 1, l2_bytes: int = 0) -> WeightTraffic:
    """Expert-weight bytes read per approach, for per-expert token counts (bucket()'s counts).
    BM, order and l2_bytes (the device's L2; 0 = no cache) only shape fused_dram."""
    counts = np.asarray(counts, dtype=np.int64)
    one = expert_bytes(qtype, M, K)
    active = int(np.count_nonzero(counts))
    if active == 0:
        raise ValueError("weight traffic: no expert has a token")
    unique = active * one
    return WeightTraffic(
        expert_bytes=one,
        n_routed=int(counts.sum()),
        active_experts=active,
        token_tile=token_tile,
        unique_bytes=unique,
        matvec_bytes=int(counts.sum()) * one,
        fused_bytes=int(tiles_per_expert(counts, token_tile).sum()) * one,
        fused_dram_bytes=fused_dram_bytes(counts, qtype, M, K, token_tile, BM, order, l2_bytes),
        fused_resident_bytes=unique,
        dequant_cublas_bytes=unique + active * M * K * 2,
    )

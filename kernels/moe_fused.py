"""Launcher of the grouped expert MMQ family `moe_fused` (kernels/cuda/mmq_moe.cu).

One timed run, all on the GPU, no host round trip:
    Q8_1-quantize x [T, K] (kernels.q8_1_gpu)
    -> GpuRouter.route(ids): per-expert buckets and the work list, token tile = BN
    -> GpuRouter.gather: the bucketed Q8_1 rows, contiguous per expert
    -> mmq_moe_grouped over work_list_capacity x row tiles (padding items exit at once).
Output float32 [T, top_k, M]; routing weights (problem.extra["route_weights"]) multiply in.

Tile parameters are mmq_base's (BM, BN, warps, STAGES, CVT, MIN_BLOCKS); K is never split.
Each (expert, token tile) item reads all its expert's row tiles once, so expert e is read
ceil(tokens_e / BN) times: `bound.metrics` holds that weight traffic (kernels.moe_traffic)
and its ratio to the unique expert bytes, per problem.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kernels import mmq_base
from kernels.family import Problem, Variant
from kernels.moe_baselines import MoeInputs
from kernels.moe_routing import bucket
from kernels.moe_shapes import check_expert_shape
from kernels.moe_traffic import weight_traffic

MMQ_MOE_CU = Path(__file__).parent / "cuda" / "mmq_moe.cu"
SUPERBLOCK_K = 256  # mmq_core stages k in whole 256-wide super-blocks, whatever the type's block
EXPERT_ALIGN = 16  # cp.async copies 16 bytes: every expert's base must be 16-byte aligned


def check_fused_shape(qtype: str, M: int, K: int, who: str = "moe_fused") -> None:
    """ValueError naming the shape when the fused kernel cannot run [M, K] experts of qtype."""
    check_expert_shape(qtype, M, K, who)
    if K % SUPERBLOCK_K:
        raise ValueError(f"{who}: {qtype} expert weights M={M} K={K} are not supported: K={K} is not a multiple "
                         f"of {SUPERBLOCK_K}, and the fused MMQ tile stages whole {SUPERBLOCK_K}-wide k super-blocks "
                         "(use moe_matvec for this shape)")


def pack_experts(w_packed: np.ndarray) -> tuple[np.ndarray, int]:
    """(flat uint8 buffer, expert stride): expert e's rows at byte e * stride, stride the expert's
    bytes rounded up to EXPERT_ALIGN, then mmq_base.WEIGHT_PAD zero bytes (the q6_K window)."""
    n_experts, M, row_bytes = w_packed.shape
    stride = -(-M * row_bytes // EXPERT_ALIGN) * EXPERT_ALIGN
    flat = np.zeros(n_experts * stride + mmq_base.WEIGHT_PAD, np.uint8)
    flat[:n_experts * stride].reshape(n_experts, stride)[:, :M * row_bytes] = w_packed.reshape(n_experts, -1)
    return flat, stride


class MoeFusedBound(MoeInputs):
    """The MoE inputs of moe_baselines plus the GPU router; launch() = route, gather, grouped GEMM."""

    who = "moe_fused"

    def __init__(self, device, variant: Variant, handle: dict, problem: Problem) -> None:
        from kernels.moe_route_gpu import GpuRouter

        wl, p = problem.workload, variant.params
        check_fused_shape(variant.qtype, wl.M, wl.K, self.who)
        super().__init__(device, variant, problem)
        self.handle, self.smem = handle, handle["smem"]
        self.router = GpuRouter(device, wl.T, wl.top_k, self.n_experts, token_tile=p["BN"], K=wl.K)
        self.grid = (math.ceil(self.M / p["BM"]) * self.router.capacity, 1, 1)
        self.block = (mmq_base.threads(p), 1, 1)
        counts = bucket(problem.ids, self.n_experts)[0]
        self.metrics = weight_traffic(counts, variant.qtype, self.M, wl.K, p["BN"]).as_metrics()

    def weights_layout(self, w_packed: np.ndarray) -> np.ndarray:
        flat, self.expert_stride = pack_experts(w_packed)
        return flat

    def launch(self, weights) -> None:
        self.router.route(self.ids)
        self.router.gather(self.xq, self.xd, self.xs)
        gq, gd, gs = self.router.gathered
        self.handle["gemm"].launch(self.grid, self.block,
                                   (weights, np.int64(self.expert_stride), self.router.work, gq, gd, gs,
                                    self.router.order, self.route_w if self.route_w is not None else 0, self.out,
                                    np.int32(self.M), np.int32(self.wl.K), np.int64(self.row_bytes)), self.smem)

    def release(self) -> None:
        super().release()
        self.router.release()


class MoeFusedFamily(mmq_base.MMQFamily):
    name = "moe_fused"
    cu_file = MMQ_MOE_CU
    kernel_name = "mmq_moe_grouped"
    reduce_name = None  # K is never split

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        if mmq_base.full_params(params)["SPLITK"] > 1:
            return "moe_fused does not split K (SPLITK must be 0 or 1)"
        return mmq_base.invalid_reason(params, qtype, device_info)

    def make_bound(self, device, variant: Variant, handle: dict, problem: Problem) -> MoeFusedBound:
        return MoeFusedBound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [mmq_base.full_params({})]


FAMILY = MoeFusedFamily()

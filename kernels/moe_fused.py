"""Launcher of the grouped expert MMQ family `moe_fused` (kernels/cuda/mmq_moe.cu).

One timed run, all on the GPU, no host round trip:
    Q8_1-quantize x [T, K] (kernels.q8_1_gpu)
    -> GpuRouter.route(ids): per-expert buckets and the work list, token tile = BN
    -> GpuRouter.gather: the bucketed Q8_1 rows, contiguous per expert
    -> mmq_moe_grouped over work_list_capacity x row tiles (padding items exit at once).
Output float32 [T, top_k, M]; routing weights (problem.extra["route_weights"]) multiply in.

Tile parameters are mmq_base's (BM, BN, warps, STAGES, CVT, MIN_BLOCKS); K is never split.
ORDER (mmq_moe.cu) walks an expert's CTAs token tile major (0) or row tile major (1).
Each (expert, token tile) item reads all its expert's row tiles, so expert e's weight is loaded
ceil(tokens_e / BN) times; `bound.metrics` holds those global loads and the DRAM reads the L2
model of kernels.moe_traffic predicts for the launch order, each over the unique expert bytes.

K: whole 256-wide super-blocks; q8_0 also K % 128 == 0 (K = 1408: the last super-block is 128
wide, zero-filled in shared memory by the KTAIL=1 build, and its rows uploaded at a 16-byte stride).
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
from kernels.moe_traffic import ORDERS, weight_traffic

MMQ_MOE_CU = Path(__file__).parent / "cuda" / "mmq_moe.cu"
SUPERBLOCK_K = 256  # mmq_core stages k in 256-wide super-blocks, whatever the type's block
TAIL_K = {"q8_0": 128}  # types whose KTAIL build takes a last super-block this short
EXPERT_ALIGN = 16  # cp.async copies 16 bytes: every expert's base must be 16-byte aligned
ORDER_DEFAULT = 1  # row tile major: an expert's token tiles share each weight row tile back to back


def k_step(qtype: str) -> int:
    """K must be a multiple of this for the fused kernel: 256, or q8_0's 128 (KTAIL)."""
    return TAIL_K.get(qtype, SUPERBLOCK_K)


def check_fused_shape(qtype: str, M: int, K: int, who: str = "moe_fused") -> None:
    """ValueError naming the shape when the fused kernel cannot run [M, K] experts of qtype."""
    check_expert_shape(qtype, M, K, who)
    step = k_step(qtype)
    if K % step:
        why = (f"the fused MMQ tile stages {SUPERBLOCK_K}-wide k super-blocks, the last one at least {step} wide "
               "(activation scales staged 4 groups per 16-byte copy)" if step < SUPERBLOCK_K
               else f"the fused MMQ tile stages whole {SUPERBLOCK_K}-wide k super-blocks")
        raise ValueError(f"{who}: {qtype} expert weights M={M} K={K} are not supported: K={K} is not a multiple "
                         f"of {step}, and {why} (use moe_matvec for this shape)")


def row_stride(qtype: str, row_bytes: int) -> int:
    """Bytes between uploaded weight rows: q8_0 rows (34 bytes per 32 k) rounded up to 16, so every
    super-block of a KTAIL row starts 16-byte aligned (the same stride when K % 256 == 0); the
    other types keep their rows (q6_K's kernel has its own unaligned window)."""
    return -(-row_bytes // EXPERT_ALIGN) * EXPERT_ALIGN if qtype in TAIL_K else row_bytes


def pack_experts(w_packed: np.ndarray, qtype: str | None = None) -> tuple[np.ndarray, int, int]:
    """(flat uint8 buffer, expert stride, row stride): row r of expert e at byte e * expert stride +
    r * row stride (row_stride(qtype); zero bytes pad each row), the expert stride its rows rounded
    up to EXPERT_ALIGN, then mmq_base.WEIGHT_PAD zero bytes (the q6_K window)."""
    n_experts, M, row_bytes = w_packed.shape
    rstride = row_stride(qtype, row_bytes) if qtype else row_bytes
    stride = -(-M * rstride // EXPERT_ALIGN) * EXPERT_ALIGN
    flat = np.zeros(n_experts * stride + mmq_base.WEIGHT_PAD, np.uint8)
    rows = flat[:n_experts * stride].reshape(n_experts, stride)[:, :M * rstride].reshape(n_experts, M, rstride)
    rows[:, :, :row_bytes] = w_packed
    return flat, stride, rstride


class MoeFusedBound(MoeInputs):
    """The MoE inputs of moe_baselines plus the GPU router; launch() = route, gather, grouped GEMM."""

    who = "moe_fused"

    def __init__(self, device, variant: Variant, handle: dict, problem: Problem) -> None:
        from kernels.moe_route_gpu import GpuRouter

        wl, p = problem.workload, variant.params
        check_fused_shape(variant.qtype, wl.M, wl.K, self.who)
        self.qtype = variant.qtype  # weights_layout (called by MoeInputs) pads q8_0 rows by it
        super().__init__(device, variant, problem)
        self.handle, self.smem = handle, handle["smem"]
        self.router = GpuRouter(device, wl.T, wl.top_k, self.n_experts, token_tile=p["BN"], K=wl.K)
        self.grid = (math.ceil(self.M / p["BM"]) * self.router.capacity, 1, 1)
        self.block = (mmq_base.threads(p), 1, 1)
        counts = bucket(problem.ids, self.n_experts)[0]
        self.metrics = weight_traffic(counts, variant.qtype, self.M, wl.K, p["BN"], BM=p["BM"], order=p["ORDER"],
                                      l2_bytes=device.info.get("l2_bytes", 0)).as_metrics()

    def weights_layout(self, w_packed: np.ndarray) -> np.ndarray:
        flat, self.expert_stride, self.row_stride = pack_experts(w_packed, self.qtype)
        return flat

    def launch(self, weights) -> None:
        self.router.route(self.ids)
        self.router.gather(self.xq, self.xd, self.xs)
        gq, gd, gs = self.router.gathered
        self.handle["gemm"].launch(self.grid, self.block,
                                   (weights, np.int64(self.expert_stride), self.router.work, gq, gd, gs,
                                    self.router.order, self.router.offsets,
                                    self.route_w if self.route_w is not None else 0, self.out,
                                    np.int32(self.M), np.int32(self.wl.K), np.int64(self.row_stride)), self.smem)

    def release(self) -> None:
        super().release()
        self.router.release()


class MoeFusedFamily(mmq_base.MMQFamily):
    name = "moe_fused"
    cu_file = MMQ_MOE_CU
    kernel_name = "mmq_moe_grouped"
    reduce_name = None  # K is never split

    def complete(self, params: dict) -> dict:
        return {**mmq_base.full_params(params), "ORDER": params.get("ORDER", ORDER_DEFAULT)}

    def defines(self, params: dict, qtype: str) -> dict:
        # KTAIL: q8_0 builds take K % 256 == 128 (a K-quant build keeps mmq_core's KTAIL=0 code)
        return {**super().defines(params, qtype), "ORDER": self.complete(params)["ORDER"],
                "KTAIL": int(qtype in TAIL_K)}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        p = self.complete(params)
        if p["SPLITK"] > 1:
            return "moe_fused does not split K (SPLITK must be 0 or 1)"
        if p["ORDER"] not in ORDERS:
            return f"ORDER={p['ORDER']} not in {ORDERS}"
        return mmq_base.invalid_reason(p, qtype, device_info)

    def make_bound(self, device, variant: Variant, handle: dict, problem: Problem) -> MoeFusedBound:
        return MoeFusedBound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [self.complete({}), self.complete({"ORDER": 0})]


FAMILY = MoeFusedFamily()

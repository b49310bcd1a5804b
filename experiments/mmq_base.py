"""Lever `mmq_base`: the fused int8 MMQ (raw weight bytes -> smem, Q8_1 activations,
mma.sync m16n8k32 s8, per-32 f32 rescale with the weight-min rank-1 term).
It must beat the dequant+cuBLAS baseline; its champion is every later lever's incumbent."""
from experiments.base import Lever
from kernels import mmq_base

LEVER = Lever(
    name="mmq_base",
    family="mmq_base",
    backend="cuda",
    space={
        "BM": [64, 128, 256],
        "BN": [16, 32, 64, 128],
        "WARPS_M": [1, 2, 4, 8],
        "WARPS_N": [1, 2, 4],
        "STAGES": [1, 2],
        "CVT": [0, 1],
        "MIN_BLOCKS": [1, 2],
        "RESCALE": [0, 1],  # 1: weight scale fused into the int -> float FFMA (mmq_core.cuh w_dot)
        "Q6SUB": [0, 1],  # q6_K unpack: 1 = q6 - 32 by a carry-free per-byte add (others: no effect)
    },
    fixed={"SPLITK": 0},
    defaults={"BM": 128, "BN": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 2, "CVT": 1, "MIN_BLOCKS": 1,
              "RESCALE": 0, "Q6SUB": 0},
    suite="dense",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent="dequant_cublas",
    valid=lambda params, info, qtype: mmq_base.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA",),
    description="fused K-quant x Q8_1 int8 mma.sync GEMM, synchronous or double-buffered cp.async staging",
)

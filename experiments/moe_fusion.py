"""Lever `moe_fusion`: the grouped expert GEMM (ggml's mul_mat_id) on the mmq_base tile. The
pairs are bucketed by expert and their Q8_1 rows gathered on the GPU; one CTA per (expert
token tile, row tile) of the work list, so each expert's weight row tile is loaded once per
token tile of BN routed pairs instead of once per pair.

What the weight traffic goal (<= ~1.2x the unique expert bytes at T=2048) searches over:
BN (256: one token tile for most experts, so few re-loads at all) and ORDER (1: all token
tiles of a weight row tile launched back to back, so re-loads hit L2; kernels.moe_traffic
counts both the global loads and the DRAM reads its L2 model predicts). It must beat the
per-pair matvec, the faster of the two baselines at every T of the suites (perf log run 5:
4-12x faster than dequant+cuBLAS per expert, which is launch bound)."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import moe_fused

TILE = ("BM", "WARPS_M")  # BN and WARPS_N get the 256-token tile (8 warps across tokens)

LEVER = Lever(
    name="moe_fusion",
    family="moe_fused",
    backend="cuda",
    space={**{k: MMQ_BASE.space[k] for k in TILE}, "BN": [16, 32, 64, 128, 256], "WARPS_N": [1, 2, 4, 8],
           "STAGES": [1, 2, 3], "ORDER": [0, 1]},
    fixed={"CVT": 1, "MIN_BLOCKS": 1},
    defaults={**{k: MMQ_BASE.defaults[k] for k in (*TILE, "BN", "WARPS_N")}, "STAGES": 2,
              "ORDER": moe_fused.ORDER_DEFAULT},
    suite="moe_qwen3",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent="moe_matvec",
    valid=lambda params, info, qtype: moe_fused.FAMILY.invalid(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA",),
    description="grouped expert MMQ over the GPU router's work list: expert weights loaded once per token tile, "
                "token tiles of a weight tile back to back (L2)",
)

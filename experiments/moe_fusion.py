"""Lever `moe_fusion`: the grouped expert GEMM (ggml's mul_mat_id) on the mmq_base tile. The
pairs are bucketed by expert and their Q8_1 rows gathered on the GPU; one CTA per (expert
token tile, row tile) of the work list, so each expert's weight row tile is read once per
token tile of BN routed pairs instead of once per pair. It must beat the per-pair matvec."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_base

TILE = ("BM", "BN", "WARPS_M", "WARPS_N")  # BN is the token tile of the work list

LEVER = Lever(
    name="moe_fusion",
    family="moe_fused",
    backend="cuda",
    space={**{k: MMQ_BASE.space[k] for k in TILE}, "STAGES": [1, 2, 3]},
    fixed={"CVT": 1, "MIN_BLOCKS": 1},
    defaults={**{k: MMQ_BASE.defaults[k] for k in TILE}, "STAGES": 2},
    suite="moe_qwen3",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent="moe_matvec",
    valid=lambda params, info: mmq_base.invalid_reason(params, "q8_0", info),
    margin=0.02,
    sass_claims=("IMMA",),
    description="grouped expert MMQ over the GPU router's work list: expert weights read once per token tile",
)

"""Lever `moe_matvec`: the MoE baseline, one dp4a matvec per routed (token, slot) pair, so each
expert is read once per routed token (what the seeds' engine ran for mul_mat_id). It is the
incumbent of `moe_fusion`; only its warp/row blocking is tunable."""
from experiments.base import Lever
from kernels.moe_baselines import MATVEC_DEFAULTS

LEVER = Lever(
    name="moe_matvec",
    family="moe_matvec",
    backend="cuda",
    space={"MV_WARPS": [2, 4, 8], "MV_ROWS": [1, 2, 4]},
    defaults=dict(MATVEC_DEFAULTS),
    suite="moe_qwen3",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent=None,  # a baseline
    sass_claims=("IDP",),  # dp4a
    description="per routed pair expert matvec (dp4a), the MoE status quo",
)

"""cpu_demo: tile search of the blocked numpy integer GEMM (kernels/cpu_blocked.py).

It runs the whole campaign loop on any machine. Its incumbent is itself: the champion
promoted for (type, cpu, T regime), or, before any promotion, the plain defaults below
(the obvious integer implementation: einsum dots on int32, float64 rescale, one thread).
"""
from experiments.base import Lever
from kernels.cpu_blocked import scratch_bytes

SCRATCH_BUDGET = 32 << 20  # the CPU stand-in for a shared-memory limit


def fits_scratch(params: dict, device_info: dict, qtype: str) -> str | None:
    need = scratch_bytes(params)
    return None if need <= SCRATCH_BUDGET else f"tile scratch {need >> 20} MiB > budget {SCRATCH_BUDGET >> 20} MiB"


LEVER = Lever(
    name="cpu_demo",
    family="cpu_demo",
    backend="cpu",
    space={
        "rows_per_tile": [64, 128, 256, 512, 1024],
        "tokens_per_tile": [4, 16, 64],
        "k_superblocks_per_step": [1, 2, 4, 8],
        "dot": ["f32_bmm", "f64_bmm", "i32_einsum"],
        "acc": ["f32", "f64"],
        "threads": [1, 2],
    },
    defaults={"rows_per_tile": 128, "tokens_per_tile": 16, "k_superblocks_per_step": 1,
              "dot": "i32_einsum", "acc": "f64", "threads": 1},
    valid=fits_scratch,
    suite="cpu_small",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent="cpu_demo",
    margin=0.05,
    description="blocked numpy integer GEMM (Q8_1 activations, exact block dots): tile sizes, dot method",
)

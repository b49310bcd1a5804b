"""Lever `wgmma_i8`: issue 7's variant (b), the int8 Hopper path (sm_90a,
kernels/cuda/mmq_wgmma_i8.cu): ggml weight blocks unpacked into int8 wgmma A registers, Q8_1
activations (a timed pass writes them pre-tiled and swizzled; one bulk copy per chunk) as wgmma B,
`wgmma.mma_async m64nNk32.s32.s8.s8` per 32-block, and mmq_base's rescale in f32 per block and
element (q6_K: its two 16-wide scales folded in s32 first). Same integer math contract as
mmq_base, so its parity is the tight one. Searched: tile (BM rows x BN tokens, BN <= 128), stages,
raw weight slots, token parts per block (NSPLIT); split-K is chosen at launch.
Its incumbent is the f16 `wgmma` lever: the int8 path must beat the champion it would replace."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_wgmma_i8

LEVER = Lever(
    name="wgmma_i8",
    family="mmq_wgmma_i8",
    backend="cuda",
    space={
        "BM": [64, 128],
        "BN": [16, 32, 64, 128],
        "STAGES": [2, 3, 4],
        "RAW": [2, 3, 4, 6],
        "NSPLIT": [1, 2],
    },
    fixed={"SPLITK": 0, "MIN_BLOCKS": 1},
    defaults=mmq_wgmma_i8.heuristic_params(4096),
    suite="dense",
    types=MMQ_BASE.types,
    incumbent="wgmma",
    valid=lambda params, info, qtype: mmq_wgmma_i8.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IGMMA",),
    description="int8 wgmma (s32.s8.s8, sm_90a): weights unpacked into A registers, Q8_1 activations, per-32 f32 rescale",
)

"""Lever `wgmma`: the Hopper path (kernels/cuda/mmq_wgmma.cu, sm_90a) -- weights dequantized
once per 64-k step into a swizzled f16 tile (scales applied), f16 activations, warpgroup MMA
(wgmma.mma_async, operands from shared memory) with f32 accumulators, cp.async staging 3-4
activation chunks deep, split-K where the tile grid cannot fill the GPU. Its incumbent is the
int8 mma.sync MMQ; the dispatcher prefers it wherever it is promoted."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_wgmma

LEVER = Lever(
    name="wgmma",
    family="mmq_wgmma",
    backend="cuda",
    space={
        "BM": [64, 128],
        "BN": [16, 32, 64, 128, 192, 256],
        "STAGES": [3, 4],
        "DEQ": [0, 1],
        "MIN_BLOCKS": [1, 2],
    },
    fixed={"SPLITK": 0},
    defaults={k: v for k, v in mmq_wgmma.DEFAULTS.items() if k != "SPLITK"},
    suite="dense",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    # q8_0 stages the most raw bytes per row: a configuration that fits it fits every type
    valid=lambda params, info: mmq_wgmma.invalid_reason(params, "q8_0", info),
    margin=0.02,
    sass_claims=("HGMMA",),
    description="f16 weights dequantized per 64-k step into swizzled smem, wgmma m64nNk16 f32 (sm_90a)",
)

"""Lever `wgmma`: the Hopper path (sm_90a). The searched kernel is the register-A one
(kernels/cuda/mmq_wgmma_rs.cu): a producer warpgroup copies raw ggml weight blocks and f16
activations into shared memory (cp.async, mbarriers); each consumer warp dequantizes its 16
weight rows straight into wgmma A fragments (scales applied, exact f16 codes) while its previous
`wgmma.mma_async` (A from registers, B = activations from 128B-swizzled shared memory, f32
accumulators) runs. Searched: tile (BM weight rows x BN tokens), activation ring depth, raw
weight slots (prefetch depth), where the async-proxy fence sits; split-K is chosen at launch.
Its incumbent is the int8 mma.sync MMQ; the dispatcher prefers it wherever it is promoted."""
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
        "STAGES": [2, 3, 4],
        "RAW": [2, 3, 4],
        "XSYNC": [0, 1],
    },
    fixed={"AREG": 1, "SPLITK": 0, "MIN_BLOCKS": 1},
    defaults=mmq_wgmma.heuristic_params(4096),
    suite="dense",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    # q8_0 stages the most raw bytes per row: a configuration that fits it fits every type
    valid=lambda params, info: mmq_wgmma.invalid_reason(params, "q8_0", info),
    margin=0.02,
    sass_claims=("HGMMA",),
    description="weights dequantized into wgmma A registers (sm_90a), f16 activations from swizzled smem, f32",
)

"""Lever `adaptive_format`: the f16 path (kernels/cuda/mmq_f16.cu) -- weights dequantized once
per tile into shared memory as f16 with their scales applied, activations converted to f16,
f16 tensor cores, no per-group rescale in the inner loop -- against the int8 Q8_1 path
(mmq_base) as incumbent. Studies run per T regime; promotion makes the f16 path champion only
in the regimes where it wins, so the dispatcher (kernels.dispatch) switches format at the
regime boundary where the two cross."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_f16

LEVER = Lever(
    name="adaptive_format",
    family="mmq_f16",
    backend="cuda",
    space={**MMQ_BASE.space, "STAGES": [1, 2, 3]},
    fixed={"SPLITK": 0},
    defaults={"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "CVT": 1, "MIN_BLOCKS": 1},
    suite="dense_large",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    # q8_0 stages the most bytes per row: a configuration that fits it fits every type
    valid=lambda params, info: mmq_f16.invalid_reason(params, "q8_0", info),
    margin=0.02,
    sass_claims=("HMMA",),
    description="f16 activations + weights dequantized to f16 in shared memory (scales applied), HMMA f32",
)

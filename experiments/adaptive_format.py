"""Lever `adaptive_format`: the activation format chosen by T at a searched crossover
(kernels/mmq_adaptive.py): below CROSSOVER_T the int8 Q8_1 path (mmq_base, bandwidth-bound
small T), at and above it the f16 path (kernels/cuda/mmq_f16.cu: weights dequantized once per
tile into shared memory as f16 with their scales applied, f16 tensor cores, no per-group
rescale in the inner loop). Incumbent: mmq_base.

The crossover is found per shape: one suite per dense shape (`dense_xover_<M>x<K>`, T from 16
to 2048), one study each, and champions keyed by shape as well as T regime (per_shape), so the
dispatcher (kernels.dispatch) switches format at the crossover found for the weight's shape,
not at a regime boundary."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_adaptive

LEVER = Lever(
    name="adaptive_format",
    family="mmq_adaptive",
    backend="cuda",
    space={**MMQ_BASE.space, "STAGES": [1, 2, 3], "DEQ": [0, 1],
           mmq_adaptive.CROSSOVER: [16, 32, 64, 128, 256, 512, 1024]},
    fixed={"SPLITK": 0},
    defaults={"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "CVT": 1, "MIN_BLOCKS": 1,
              "DEQ": 1, "RESCALE": 1, "Q6SUB": 0, mmq_adaptive.CROSSOVER: mmq_adaptive.DEFAULT_CROSSOVER_T},
    suite="dense_xover_4096x14336",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    valid=lambda params, info, qtype: mmq_adaptive.FAMILY.invalid(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA", "HMMA"),  # one part each: the static gate reads the union of the parts
    per_shape=True,
    description="int8 Q8_1 path below a searched crossover T, f16 path (weights dequantized to f16 in "
                "shared memory, HMMA) at and above it; crossover per shape",
)

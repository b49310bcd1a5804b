"""Lever `fused_quant`: the float32 -> Q8_1 activation quantization moved into the int8 MMQ
GEMM (kernels/cuda/mmq.cu with FUSEQ=1): each stage carries the token tile's float rows of one
256-k super-block (cp.async), the unpack pass quantizes them in shared memory with the
standalone quantizer's own code (kernels/cuda/q8_1.cuh, so the Q8_1 values are bit-identical),
and the mma loop is mmq_base's. No separate pass, no Q8_1 round trip through DRAM; the cost is
4x the activation staging bytes and every row tile quantizing its tokens again, so it is aimed
at small T, where the pass is a large share of the op. The incumbent's timed run includes its
quantize pass (kernels/mmq_base.py), so the A/B compares whole ops."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_fused_quant

LEVER = Lever(
    name="fused_quant",
    family="mmq_fused_quant",
    backend="cuda",
    space={**MMQ_BASE.space, "STAGES": [1, 2, 3, 4]},
    # float32 activations: the suites' inputs (XBF16=1 would time a bf16 model's, another problem)
    fixed={"SPLITK": 0, "XBF16": 0},
    defaults={**MMQ_BASE.defaults, **mmq_fused_quant.heuristic_params(16)},
    suite="dense_tiny",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    valid=lambda params, info, qtype: mmq_fused_quant.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA",),
    description="mmq_base with the f32 -> Q8_1 activation quantization done in shared memory (no pass)",
)

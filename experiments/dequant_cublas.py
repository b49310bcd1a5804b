"""Lever `dequant_cublas`: the baseline every MMQ lever must beat. Dequantize the K-quant
weight to bf16 (one pass over the packed bytes), then cuBLAS bf16 GEMM through torch.
Nothing of ours to tune; `gemm_out` picks how the f32 output is produced (see
kernels/dequant_cublas.py for exactly what a timed run contains)."""
from experiments.base import Lever

LEVER = Lever(
    name="dequant_cublas",
    family="dequant_cublas",
    backend="cuda",
    # bf16: bf16 GEMM output + one f32 conversion pass; f32: cuBLAS writes f32 (torch.mm out_dtype)
    space={"gemm_out": ["bf16", "f32"]},
    defaults={"gemm_out": "bf16"},
    suite="dense",
    types=("q4_K", "q5_K", "q6_K", "q8_0"),
    incumbent=None,  # it is the baseline
    sass_claims=(),  # the GEMM is cuBLAS's; our dequant kernel uses no tensor cores
    description="dequant K-quant -> bf16 (our kernel), then torch.mm bf16 on cuBLAS; the users' status quo",
)

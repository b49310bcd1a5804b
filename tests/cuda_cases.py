"""Inputs shared by the CUDA kernel tests (host harness in CI, the kernels on the GPU), and
`needs_nvcc`, the mark of the CI tests that compile."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import dequant_cublas, nvcc

TYPES = ("q4_K", "q5_K", "q6_K", "q8_0")


def _have_nvcc() -> bool:
    try:
        nvcc.find_nvcc()
        return True
    except nvcc.CompileError:
        return False


needs_nvcc = pytest.mark.skipif(not _have_nvcc(), reason="nvcc not found (CUDA toolkit not installed)")
GGUF_NAME = {"q4_K": "Q4_K", "q5_K": "Q5_K", "q6_K": "Q6_K", "q8_0": "Q8_0"}
F16_FIELDS = {"q4_K": (0, 2), "q5_K": (0, 2), "q6_K": (208,), "q8_0": (0,)}  # d (and dmin) offsets


def random_blocks(rng: np.random.Generator, qtype: str, M: int, K: int) -> np.ndarray:
    """uint8 [M, row_bytes]: random quants and sub-scales (every bit pattern), finite f16 scales
    over many magnitudes and both signs, one f16 subnormal."""
    _, block, size, _ = dequant_cublas.FORMATS[qtype]
    packed = rng.integers(0, 256, (M, K // block, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        scale = rng.standard_normal((M, K // block)) * 10.0 ** rng.integers(-6, 2, (M, K // block))
        packed[..., off:off + 2] = scale.astype(np.float16)[..., None].view(np.uint8)
    first = F16_FIELDS[qtype][0]
    packed[0, 0, first:first + 2] = np.array([6e-8], np.float16).view(np.uint8)
    return packed.reshape(M, -1)


def gguf_bf16_bits(packed: np.ndarray, qtype: str) -> np.ndarray:
    """The dequant contract: gguf's float32 dequantize, rounded to bf16 (nearest even), as bits."""
    import gguf

    from kernels.quant.q8_1 import float32_to_bf16_bits

    ref = gguf.quants.dequantize(packed, getattr(gguf.GGMLQuantizationType, GGUF_NAME[qtype]))
    return float32_to_bf16_bits(np.asarray(ref, np.float32))


def q8_1_cases(rng: np.random.Generator, T: int = 9, K: int = 256) -> np.ndarray:
    """float32 [T, K] (T >= 4) with the Q8_1 edge cases in the first blocks of rows 0..3."""
    x = (rng.standard_normal((T, K)) * rng.uniform(1e-3, 1e3, (T, 1))).astype(np.float32)
    x[0, :32] = 0.0  # d = 0 -> q = 0
    x[1, :32] = rng.standard_normal(32) * 1e-40  # subnormal inputs: d may underflow
    x[2, :32] = rng.uniform(-1, 1, 32) * 3e38  # near float32 max
    x[3, :32] = (rng.integers(-100, 100, 32) + 0.5) * 0.5  # x / d lands on k + 1/2 ...
    x[3, 0] = 63.5  # ... because amax = 63.5 makes d = 0.5 exactly
    return x

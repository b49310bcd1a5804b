"""Reference figures measured outside this repo on the same H200 (quoted by the issues), and
the ceilings a benchmark measures in its own run. Used for ratios, never as results.

llama.cpp's MMQ (ggml-org/ggml d99724f, CUDA-graph replay, 4 rotating weight copies, its
q8_1 quantize pass included) at M=4096, K=14336. For q4_K every T is known; for the other
types only the range over T=16..4096 was given: the low end is its T=16 figure, and the high
end is used as the anchor for T >= 1024 (where q4_K has plateaued), which is conservative.
"""
from __future__ import annotations

LLAMA_CPP_SHAPE = (4096, 14336)  # (M, K) the figures were measured at
LLAMA_CPP_Q4K = {16: 48, 64: 111, 128: 129, 256: 133, 512: 175, 1024: 179, 2048: 179, 4096: 178}
LLAMA_CPP_RANGE = {"q4_K": (48, 179), "q6_K": (35, 146), "q5_K": (43, 172), "q8_0": (42, 199)}


def llama_cpp_tflops(qtype: str, T: int) -> float | None:
    """llama.cpp MMQ TFLOP/s at (qtype, T) for M=4096, K=14336, or None where not known."""
    if qtype == "q4_K":
        return float(LLAMA_CPP_Q4K[T]) if T in LLAMA_CPP_Q4K else None
    lo, hi = LLAMA_CPP_RANGE.get(qtype, (None, None))
    if lo is None:
        return None
    if T == 16:
        return float(lo)
    if T >= 1024:
        return float(hi)
    return None

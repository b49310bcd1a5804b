"""Q8_1 activation quantization on the GPU (kernels/cuda/q8_1_quant.cu).

Produces exactly the bytes of kernels.quant.q8_1.quantize_q8_1 (same float32 ops, IEEE
division): q int8 [T, K], d float32 [T, K // 32], s int32 [T, K // 32]. Input float32,
or bf16 as uint16 bit patterns. Buffers must be 16-byte aligned (allocations are).

    quantize_into(device, x, q, d, s, T, K)        # every MMQ run: preallocated outputs, async
    q, d, s = quantize_q8_1_gpu(device, x, T, K)   # allocates the outputs
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kernels import nvcc

Q8_1_CU = Path(__file__).resolve().parent / "cuda" / "q8_1_quant.cu"
BLOCK = 32
CTA_THREADS = 256
LANES_PER_BLOCK = 4  # each lane quantizes 8 consecutive values
KERNEL_BY_INPUT = {"float32": "quantize_q8_1_f32", "bf16": "quantize_q8_1_bf16"}


def source() -> str:
    return nvcc.render_source(Q8_1_CU, {"CTA_THREADS": CTA_THREADS})


def compile_for(arch: str = "sm_90") -> nvcc.Compiled:
    return nvcc.compile_cubin(source(), None, arch)


def input_kind(dtype) -> str:
    """'float32' or 'bf16' (np.uint16 / 'bf16' / ml_dtypes bfloat16)."""
    if isinstance(dtype, str) and dtype.lower() in ("bf16", "bfloat16"):
        return "bf16"
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "float32"
    if dt == np.uint16 or dt.name == "bfloat16":
        return "bf16"
    raise ValueError(f"q8_1 quantize: input must be float32 or bf16, got {dt}")


_kernels: dict[tuple[int, str], object] = {}  # (id(device), input kind) -> Kernel


def _kernel(device, kind: str):
    key = (id(device), kind)
    if key not in _kernels:
        module = device.load(compile_for(device.info["arch"]))
        _kernels[key] = module.kernel(KERNEL_BY_INPUT[kind], 0)
    return _kernels[key]


def _ptr(buf) -> int:
    return buf if isinstance(buf, int) else (buf.ptr if hasattr(buf, "ptr") else int(buf.data_ptr()))


def _check_room(buf, nbytes: int, what: str) -> None:
    have = getattr(buf, "nbytes", None)
    if have is not None and have < nbytes:
        raise ValueError(f"q8_1 quantize: {what} buffer has {have} bytes, needs {nbytes}")


def quantize_into(device, x, q, d, s, T: int, K: int, dtype=None) -> None:
    """Launch the quantizer on x [T, K] into preallocated q/d/s (async, default stream).

    dtype defaults to x's element type when x is a DeviceBuffer (float32 otherwise).
    """
    if K % BLOCK or T < 1 or K < 1:
        raise ValueError(f"q8_1 quantize: need T >= 1 and K a multiple of {BLOCK}, got T={T}, K={K}")
    kind = input_kind(dtype if dtype is not None else getattr(x, "element", "float32"))
    n_blocks = T * K // BLOCK
    _check_room(x, T * K * (4 if kind == "float32" else 2), "input")
    _check_room(q, T * K, "q")
    _check_room(d, n_blocks * 4, "d")
    _check_room(s, n_blocks * 4, "s")
    grid = (-(-n_blocks * LANES_PER_BLOCK // CTA_THREADS), 1, 1)
    _kernel(device, kind).launch(grid, (CTA_THREADS, 1, 1),
                                 (_ptr(x), _ptr(q), _ptr(d), _ptr(s), np.int64(n_blocks)), 0)


def quantize_q8_1_gpu(device, x, T: int, K: int, dtype=None):
    """(q, d, s) DeviceBuffers holding Q8_1 of x [T, K] (async: .get() waits)."""
    q = device.empty((T, K), np.int8)
    d = device.empty((T, K // BLOCK), np.float32)
    s = device.empty((T, K // BLOCK), np.int32)
    quantize_into(device, x, q, d, s, T, K, dtype)
    return q, d, s

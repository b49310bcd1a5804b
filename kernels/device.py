"""Open the execution device for a backend: the CPU always, CUDA only when a GPU,
a driver and PyCUDA are all present (otherwise a one-line NoGPUError)."""
from __future__ import annotations

import os
import platform
import time

from campaign.errors import NoGPUError


class CpuDevice:
    backend = "cpu"

    def __init__(self) -> None:
        self.info = {
            "name": platform.processor() or platform.machine(),
            "arch": "cpu",
            "cores": os.cpu_count() or 1,
        }

    def time_once(self, fn, inner: int = 1) -> float:
        """Seconds per call of fn, averaged over `inner` back-to-back calls."""
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - t0) / inner

    def synchronize(self) -> None:
        pass


def open_device(backend: str):
    if backend == "cpu":
        return CpuDevice()
    if backend == "cuda":
        try:
            from kernels import cuda_runtime
        except ImportError as exc:  # pycuda missing
            raise NoGPUError(f"GPU step needs PyCUDA and an NVIDIA driver: {exc}") from None
        return cuda_runtime.open_cuda_device()
    raise ValueError(f"unknown backend {backend!r} (cpu or cuda)")

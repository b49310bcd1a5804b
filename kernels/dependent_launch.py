"""Launches through cuLaunchKernelEx with one launch attribute.

Programmatic dependent launch (Hopper): a kernel launched with the programmatic-stream-serialization
attribute may start while the kernel before it in the stream still runs, once every CTA of that kernel
has executed `griddepcontrol.launch_dependents`; it waits for the earlier kernel's writes where it
executes `griddepcontrol.wait`. The GEMM uses it to load weights and set up its pipeline while the
activation pass runs.

Cooperative launch: the driver places every CTA of the grid on the GPU at once, or refuses the launch
(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE); a kernel whose CTAs wait for one another (mmq_direct_q8's
GRIDQ) needs that guarantee, which a plain launch does not give.

PyCUDA launches through cuLaunchKernel only and does not hand out its CUfunction, so the kernel is
loaded a second time here, through the driver API (ctypes), from the same cubin, in the context
PyCUDA made current."""
from __future__ import annotations

import ctypes

import numpy as np

CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2  # cuda.h
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_ubyte * 64)]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("num_attrs", ctypes.c_uint)]


def flag_attribute(attribute_id: int) -> LaunchAttribute:
    """An attribute whose value is an int set to 1 (programmaticStreamSerializationAllowed, cooperative)."""
    attr = LaunchAttribute(id=attribute_id)
    attr.value[0] = 1  # (an int, little-endian)
    return attr


def programmatic_attribute() -> LaunchAttribute:
    return flag_attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)


def c_argument(value, fmt: str):
    """A kernel argument as the ctypes value cuLaunchKernelEx reads through a pointer: "P" a
    device pointer, else a numpy scalar of that struct format char."""
    if fmt == "P":
        return ctypes.c_uint64(int(value))
    return np.ctypeslib.as_ctypes_type(np.dtype(fmt))(value.item())


class DependentKernel:
    """One __global__ function of a cubin, launched on the legacy default stream as a
    programmatic dependent of whatever kernel precedes it there."""

    attribute_id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

    def __init__(self, cubin: bytes, name: str, smem_bytes: int, error) -> None:
        self.name, self._error = name, error
        self._lib = ctypes.CDLL("libcuda.so.1")
        self._module, self._func = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self._lib.cuModuleLoadData(ctypes.byref(self._module), ctypes.c_char_p(cubin)), "cuModuleLoadData")
        self._check(self._lib.cuModuleGetFunction(ctypes.byref(self._func), self._module, name.encode()),
                    "cuModuleGetFunction")
        self._check(self._lib.cuFuncSetAttribute(self._func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 int(smem_bytes)), "cuFuncSetAttribute")
        self._attr = flag_attribute(self.attribute_id)

    def _check(self, rc: int, what: str) -> None:
        if rc == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
            raise self._error(f"{what} for {self.name}: the grid's CTAs do not all fit on the GPU at once "
                              f"(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)")
        if rc != 0:
            raise self._error(f"{what} for {self.name} failed with CUresult {rc}")

    def global_ptr(self, name: str) -> tuple[int, int]:
        """(device pointer, size in bytes) of a __device__ variable of this kernel's own module (this loading of the
        cubin, not the pycuda one: its globals are separate)."""
        ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._check(self._lib.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), self._module, name.encode()),
                    f"cuModuleGetGlobal({name})")
        return int(ptr.value), int(size.value)

    def max_active_clusters(self, grid, block, smem: int) -> int:
        """cuOccupancyMaxActiveClusters: how many of the kernel's clusters (its __cluster_dims__)
        the GPU runs at once with this block and shared memory."""
        config = LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), int(smem), None, None, 0)
        n = ctypes.c_int()
        self._check(self._lib.cuOccupancyMaxActiveClusters(ctypes.byref(n), self._func, ctypes.byref(config)),
                    "cuOccupancyMaxActiveClusters")
        return n.value

    def launch(self, grid, block, args, smem: int) -> None:
        from kernels.cuda_runtime import _kernel_arg

        values = [c_argument(*_kernel_arg(a)) for a in args]
        params = (ctypes.c_void_p * len(values))(*(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values))
        config = LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), int(smem), None,
                              ctypes.pointer(self._attr), 1)
        self._check(self._lib.cuLaunchKernelEx(ctypes.byref(config), self._func, params, None), "cuLaunchKernelEx")


class CooperativeKernel(DependentKernel):
    """The same, launched cooperatively: every CTA resident at once, or the launch is refused."""

    attribute_id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE

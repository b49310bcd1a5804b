"""The only module that imports PyCUDA: device info, module load, launches, buffers, timing.

One context per GPU, the device's PRIMARY context, so torch (the cuBLAS baseline) and
PyCUDA share it: a pointer from either side is valid on the other, and both launch on
the legacy default stream (torch's default stream is that stream), so their work is
ordered without extra synchronization and one pair of events times both.

    dev = open_cuda_device()                  # NoGPUError (one line) when there is no usable GPU
    mod = dev.load(compiled)                  # kernels.nvcc.Compiled -> Module (cached per key)
    k = mod.kernel("name", smem_bytes)
    k.launch(grid, block, (buf.ptr, np.int32(n)), smem)     # async
    seconds = dev.time_once(lambda: k.launch(...), inner=10)

PyCUDA is imported inside open_cuda_device, so this module imports anywhere (CI).
"""
from __future__ import annotations

import atexit
import ctypes
import gc
import time
import weakref
from pathlib import Path

import numpy as np

from campaign.errors import CampaignError, NoGPUError
from kernels import nvcc

SPIN_CU = Path(__file__).resolve().parent / "cuda" / "spin.cu"
SPIN_NS_PER_CALL = 20_000  # GPU idle time granted per queued call while the host enqueues
SPIN_NS_MAX = 20_000_000  # 20 ms: enough for ~1000 back-to-back launches of a 3-kernel run
STATIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to dynamic shared memory

# float NaN bit patterns for fill_nan: element kind -> (bytes, pattern)
_NAN_PATTERNS = {"float32": (4, 0x7FC00000), "bf16": (2, 0x7FC0), "float16": (2, 0x7E00)}

# CUdevice_attribute numbers (cuda.h) for the ctypes fallback when PyCUDA lacks a name
_ATTRIBUTES = {
    "sm_count": ("MULTIPROCESSOR_COUNT", 16),
    "smem_per_block_optin": ("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", 97),
    "smem_per_sm": ("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 81),
    "regs_per_sm": ("MAX_REGISTERS_PER_MULTIPROCESSOR", 82),
    "l2_bytes": ("L2_CACHE_SIZE", 38),
    "clock_khz": ("CLOCK_RATE", 13),
    "mem_clock_khz": ("MEMORY_CLOCK_RATE", 36),
    "mem_bus_width": ("GLOBAL_MEMORY_BUS_WIDTH", 37),
}


class CudaError(CampaignError):
    """A CUDA call or kernel failed; the message carries the CUDA error text."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


# ---------------------------------------------------------------- buffers

class DeviceBuffer:
    """A device allocation with the numpy shape/dtype it holds. bf16 is stored as uint16 bits."""

    def __init__(self, drv, alloc, shape: tuple[int, ...], dtype: np.dtype, element: str) -> None:
        self._drv, self._alloc = drv, alloc
        self.ptr = int(alloc)
        self.shape, self.dtype, self.element = tuple(shape), np.dtype(dtype), element
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def size(self) -> int:
        return self.nbytes // self.dtype.itemsize

    def get(self) -> np.ndarray:
        """Copy to a new host array (waits for all work queued before it)."""
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            try:
                self._drv.memcpy_dtoh(out, self.ptr)
            except self._drv.Error as exc:
                raise CudaError(f"reading a device buffer back failed (an earlier kernel may have faulted): "
                                f"{_one_line(exc)}") from None
        return out

    def set(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes:
            raise ValueError(f"set: {array.nbytes} bytes into a {self.nbytes}-byte buffer")
        if self.nbytes:
            self._drv.memcpy_htod(self.ptr, array)

    def release(self) -> None:
        if self._alloc is not None:
            self._alloc.free()
            self._alloc, self.ptr = None, 0

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.shape}, {self.element}, ptr=0x{self.ptr:x})"


def _element_of(dtype) -> tuple[np.dtype, str]:
    """(storage dtype, element kind); 'bf16'/'bfloat16' means uint16 bit patterns."""
    if isinstance(dtype, str) and dtype.lower() in ("bf16", "bfloat16"):
        return np.dtype(np.uint16), "bf16"
    dt = np.dtype(dtype)
    if dt.name == "bfloat16":  # ml_dtypes
        return np.dtype(np.uint16), "bf16"
    return dt, dt.name


# ---------------------------------------------------------------- kernels and modules

def _dim3(d) -> tuple[int, int, int]:
    t = (int(d),) if np.isscalar(d) else tuple(int(v) for v in d)
    return (t + (1, 1, 1))[:3]


def _kernel_arg(a) -> tuple[object, str]:
    """(value, struct format char) of one kernel argument.

    Pointers: DeviceBuffer, plain Python int, PyCUDA allocation, torch tensor. Scalars
    must be numpy scalars (np.int32(n), np.float32(x)): their dtype is the C type.
    """
    if isinstance(a, DeviceBuffer):
        return a.ptr, "P"
    if isinstance(a, np.generic):
        if a.dtype.kind not in "iuf":
            raise TypeError(f"kernel argument {a!r}: only integer/float numpy scalars")
        return a, a.dtype.char
    if isinstance(a, bool) or isinstance(a, float):
        raise TypeError(f"kernel argument {a!r}: pass scalars as numpy scalars (np.int32, np.float32, ...)")
    if isinstance(a, int):
        return a, "P"
    if hasattr(a, "data_ptr"):  # torch tensor
        return int(a.data_ptr()), "P"
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai:
        return int(cai["data"][0]), "P"
    if hasattr(a, "__int__") and not isinstance(a, (str, bytes)):
        return int(a), "P"  # pycuda DeviceAllocation
    raise TypeError(f"kernel argument of type {type(a).__name__} is neither a pointer nor a numpy scalar")


class Kernel:
    """One __global__ function; launch() is asynchronous on the legacy default stream."""

    def __init__(self, module: "Module", func, name: str, smem_bytes: int) -> None:
        # own PyCUDA Function object: prepare() stores the argument format on it
        self.device, self._module, self._func, self.name = module.device, module, func, name
        self.smem_bytes = int(smem_bytes)
        self._format: str | None = None
        self._opt_in(self.smem_bytes)

    @property
    def module(self) -> "Module":
        """The loaded cubin this function belongs to (its globals: Module.global_ptr)."""
        return self._module

    def _opt_in(self, smem: int) -> None:
        """Raise the function's dynamic smem limit (an attribute of the CUfunction, shared by
        every Kernel of this name, so it is only ever raised)."""
        if smem <= max(STATIC_SMEM_LIMIT, self._module.smem_optin.get(self.name, 0)):
            return
        limit = self.device.info.get("smem_per_block_optin") or 0
        if limit and smem > limit:
            raise CudaError(f"kernel {self.name}: {smem} B dynamic shared memory > device limit {limit} B")
        drv = self.device.drv
        try:
            self._func.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
        except drv.Error as exc:
            raise CudaError(f"kernel {self.name}: cannot opt in to {smem} B shared memory: {_one_line(exc)}") from None
        self._module.smem_optin[self.name] = smem

    def prefer_shared_carveout(self, percent: int) -> None:
        """The share of L1 this function prefers as shared memory (100: the most). A kernel launched beside one
        that needs the most shared memory takes the same carveout, so an SM need not drain and reconfigure
        between them (an attribute of the CUfunction, shared by every Kernel of this name)."""
        drv = self.device.drv
        self._func.set_attribute(drv.function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT, int(percent))

    def attribute(self, name: str) -> int:
        """A cuFuncGetAttribute value, e.g. 'NUM_REGS', 'LOCAL_SIZE_BYTES', 'MAX_THREADS_PER_BLOCK'."""
        return int(self._func.get_attribute(getattr(self.device.drv.function_attribute, name)))

    def launch(self, grid, block, args, smem: int | None = None) -> None:
        shared = self.smem_bytes if smem is None else int(smem)
        if shared > self.smem_bytes:
            self._opt_in(shared)
        values, chars = [], []
        for a in args:
            v, c = _kernel_arg(a)
            values.append(v)
            chars.append(c)
        fmt = "".join(chars)
        if fmt != self._format:  # re-prepare only when the argument types change
            self._func.prepare(list(fmt))
            self._format = fmt
        try:
            self._func.prepared_async_call(_dim3(grid), _dim3(block), None, *values, shared_size=shared)
        except self.device.drv.Error as exc:
            raise CudaError(f"launch of {self.name} grid={_dim3(grid)} block={_dim3(block)} smem={shared} "
                            f"failed: {_one_line(exc)}") from None


class Module:
    """A loaded cubin: its kernels and globals."""

    def __init__(self, device: "CudaDevice", compiled: nvcc.Compiled, raw) -> None:
        self.device, self.compiled, self._raw = device, compiled, raw
        self._kernels: dict[tuple[str, int], Kernel] = {}
        self.smem_optin: dict[str, int] = {}  # kernel name -> dynamic smem it may use

    def kernel(self, name: str, smem_bytes: int = 0) -> Kernel:
        key = (name, int(smem_bytes))
        if key not in self._kernels:
            try:
                func = self._raw.get_function(name)
            except self.device.drv.Error:
                raise CudaError(f"no kernel {name!r} in the module (has {', '.join(self.compiled.kernel_names)}); "
                                "C++ kernels need extern \"C\" or their mangled name") from None
            self._kernels[key] = Kernel(self, func, name, smem_bytes)
        return self._kernels[key]

    def global_ptr(self, name: str) -> tuple[int, int]:
        """(device pointer, size in bytes) of a __device__/__constant__ variable."""
        try:
            ptr, size = self._raw.get_global(name)
        except self.device.drv.Error:
            raise CudaError(f"no global {name!r} in the module (C++ globals need extern \"C\")") from None
        return int(ptr), int(size)

    def read_constant_int(self, name: str) -> int:
        """Value of an integer __device__/__constant__ variable (4 or 8 bytes)."""
        ptr, size = self.global_ptr(name)
        if size not in (4, 8):
            raise CudaError(f"global {name!r} has {size} bytes: not an int32/int64")
        out = np.zeros(1, np.int32 if size == 4 else np.int64)
        self.device.drv.memcpy_dtoh(out, ptr)
        return int(out[0])


# ---------------------------------------------------------------- device

class CudaDevice:
    backend = "cuda"

    def __init__(self, drv, index: int) -> None:
        self.drv, self.index = drv, index
        self._dev = drv.Device(index)
        self._context = self._dev.retain_primary_context()
        self._context.push()
        self._enqueue_ns_per_call = 0.0  # host launch time per timed call, learnt by time_once
        self._modules: dict[str, Module] = {}
        self._dependent: dict = {}  # (launch kind, cubin key, kernel) -> DependentKernel or CooperativeKernel
        self._buffers: weakref.WeakSet[DeviceBuffer] = weakref.WeakSet()
        self.info = self._read_info()
        self._start, self._end = drv.Event(), drv.Event()
        self._spin: Kernel | None = None
        self.last_enqueue_covered = True  # did the spin outlast the host's enqueueing in time_once?
        atexit.register(self._close)

    # -------------------------------------------------------- info
    def _attribute(self, key: str) -> int | None:
        name, number = _ATTRIBUTES[key]
        enum = getattr(self.drv.device_attribute, name, None)
        try:
            if enum is not None:
                return int(self._dev.get_attribute(enum))
        except self.drv.Error:
            pass
        return _driver_attribute(number, self.index)

    def _read_info(self) -> dict:
        major, minor = self._dev.compute_capability()
        info = {
            "name": self._dev.name(),
            "index": self.index,
            "arch": f"sm_{major}{minor}",
            "cc": (major, minor),
            "total_mem": int(self._dev.total_memory()),
            "driver_version": self.drv.get_driver_version(),
        }
        info.update({key: self._attribute(key) for key in _ATTRIBUTES})
        if info["mem_clock_khz"] and info["mem_bus_width"]:  # double data rate
            info["hbm_peak_bytes_s"] = 2.0 * info["mem_clock_khz"] * 1e3 * info["mem_bus_width"] / 8
        return info

    # -------------------------------------------------------- modules
    def load(self, compiled: nvcc.Compiled) -> Module:
        if nvcc.arch_base(compiled.arch) != self.info["arch"]:
            raise CudaError(f"cubin built for {compiled.arch} cannot run on this {self.info['arch']} device")
        if compiled.key not in self._modules:
            try:
                raw = self.drv.module_from_buffer(compiled.cubin)
            except self.drv.Error as exc:
                raise CudaError(f"loading the cubin failed: {_one_line(exc)}") from None
            self._modules[compiled.key] = Module(self, compiled, raw)
        return self._modules[compiled.key]

    def dependent_kernel(self, compiled: nvcc.Compiled, name: str, smem_bytes: int):
        """`name` of a loaded cubin as a programmatic dependent launch (kernels/dependent_launch.py)."""
        from kernels.dependent_launch import DependentKernel

        return self._ex_kernel(DependentKernel, compiled, name, smem_bytes)

    def cooperative_kernel(self, compiled: nvcc.Compiled, name: str, smem_bytes: int):
        """`name` of a loaded cubin as a cooperative launch: all its CTAs at once, or an error."""
        from kernels.dependent_launch import CooperativeKernel

        return self._ex_kernel(CooperativeKernel, compiled, name, smem_bytes)

    def _ex_kernel(self, kind, compiled: nvcc.Compiled, name: str, smem_bytes: int):
        key = (kind.__name__, compiled.key, name)
        if key not in self._dependent:
            self._dependent[key] = kind(compiled.cubin, name, smem_bytes, CudaError)
        return self._dependent[key]

    def compile_and_load(self, source: str, extra_options=()) -> Module:
        """Compile source text for this device's arch and load it."""
        return self.load(nvcc.compile_cubin(source, None, self.info["arch"], extra_options))

    # -------------------------------------------------------- buffers
    def _alloc(self, nbytes: int):
        try:
            return self.drv.mem_alloc(max(1, int(nbytes)))
        except self.drv.Error as exc:
            raise CudaError(f"allocating {nbytes} B on the GPU failed: {_one_line(exc)}") from None

    def empty(self, shape, dtype) -> DeviceBuffer:
        storage, element = _element_of(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * storage.itemsize
        buf = DeviceBuffer(self.drv, self._alloc(nbytes), shape, storage, element)
        self._buffers.add(buf)
        return buf

    def to_device(self, array: np.ndarray, dtype=None) -> DeviceBuffer:
        """Upload a host array (synchronous copy). dtype='bf16' tags uint16 data as bf16 bits."""
        array = np.ascontiguousarray(array)
        buf = self.empty(array.shape, dtype if dtype is not None else array.dtype)
        if buf.nbytes != array.nbytes:
            raise ValueError(f"to_device: {array.dtype} data does not match element type {buf.element}")
        buf.set(array)
        return buf

    def tensor_map_f16(self, buf: DeviceBuffer, rows: int, cols: int, box_rows: int, box_cols: int,
                       l2_promotion: int = 2) -> DeviceBuffer:
        """A TMA descriptor (CUtensorMap, 128 B, in device memory) for the row-major f16 matrix
        [rows, cols] in `buf`: boxes of box_rows x box_cols land 128B-swizzled, rows past the end
        read as zeros; an L2 miss fetches 128 B (l2_promotion 2) or 256 B (3). Kernels take its
        device address (cp.async.bulk.tensor reads the map from global memory; written before the
        launch, it needs no proxy fence)."""
        return self.to_device(encode_tensor_map_f16(buf.ptr, rows, cols, box_rows, box_cols, l2_promotion))

    def fill_nan(self, buf: DeviceBuffer) -> None:
        """Poison a float32/bf16/float16 buffer with quiet NaNs (async, on the default stream)."""
        if buf.element not in _NAN_PATTERNS:
            raise ValueError(f"fill_nan: {buf.element} buffer has no NaN (float32, bf16 or float16 only)")
        width, pattern = _NAN_PATTERNS[buf.element]
        count = buf.nbytes // width
        if count:
            setter = self.drv.memset_d32 if width == 4 else self.drv.memset_d16
            setter(buf.ptr, pattern, count)

    def release(self, buf: DeviceBuffer) -> None:
        buf.release()

    # -------------------------------------------------------- sync, errors, timing
    def synchronize(self) -> None:
        """Wait for all queued work; a kernel fault surfaces here as CudaError with CUDA's text."""
        try:
            self.drv.Context.synchronize()
        except self.drv.Error as exc:
            raise CudaError(f"CUDA error: {_one_line(exc)}") from None

    # The driver API reports an asynchronous kernel fault at the next synchronizing call.
    check_last_error = synchronize

    def _spin_kernel(self) -> Kernel:
        if self._spin is None:
            self._spin = self.load(compile_spin(self.info["arch"])).kernel("spin_ns")
        return self._spin

    def time_once(self, fn, inner: int = 1) -> float:
        """GPU seconds per call of fn over `inner` back-to-back calls, CUDA events.

        A spin kernel queued first keeps the GPU busy while the host enqueues the
        calls, so the events measure GPU time, not Python launch overhead.
        `last_enqueue_covered` is False when enqueueing outlasted the spin.
        """
        inner = max(1, int(inner))
        for _attempt in range(3):  # re-time when the host outran the spin (then GPU idle was timed)
            per_call = max(SPIN_NS_PER_CALL, 1.5 * self._enqueue_ns_per_call)
            spin_ns = int(min(inner * per_call, SPIN_NS_MAX))
            spin = self._spin_kernel()
            t0 = time.perf_counter()
            spin.launch((1, 1, 1), (1, 1, 1), (np.uint64(spin_ns),))
            self._start.record()
            for _ in range(inner):
                fn()
            self._end.record()
            enqueue_ns = (time.perf_counter() - t0) * 1e9
            self._enqueue_ns_per_call = max(self._enqueue_ns_per_call, enqueue_ns / inner)
            self.last_enqueue_covered = enqueue_ns < spin_ns
            try:
                self._end.synchronize()
                ms = self._end.time_since(self._start)
            except self.drv.Error as exc:
                raise CudaError(f"CUDA error while timing: {_one_line(exc)}") from None
            if self.last_enqueue_covered or spin_ns >= SPIN_NS_MAX:
                break
        return ms * 1e-3 / inner

    def _close(self) -> None:
        """atexit: free what is still allocated, then pop the primary context."""
        try:
            gc.collect()
            for buf in list(self._buffers):
                buf.release()
            self._modules.clear()
            self._context.pop()
            from pycuda.tools import clear_context_caches

            clear_context_caches()
        except Exception:  # interpreter shutdown: nothing useful left to report
            pass


def compile_spin(arch: str) -> nvcc.Compiled:
    """The timer's spin kernel (precompile it off the GPU with the other cubins)."""
    return nvcc.compile_file(SPIN_CU, None, arch)[1]


# CUtensorMap enums (cuda.h): CU_TENSOR_MAP_DATA_TYPE_FLOAT16, _INTERLEAVE_NONE, _SWIZZLE_128B,
# _FLOAT_OOB_FILL_NONE (out-of-bounds elements read as zeros); CU_TENSOR_MAP_L2_PROMOTION_* 0-3
# (none, 64 B, 128 B, 256 B fetched into L2 per miss)
_TMAP_F16, _TMAP_NO_INTERLEAVE, _TMAP_SWIZZLE_128B, _TMAP_OOB_ZERO = 6, 0, 3, 0
_TMAP_L2_PROMOTIONS = (0, 1, 2, 3)


def encode_tensor_map_f16(address: int, rows: int, cols: int, box_rows: int, box_cols: int,
                          l2_promotion: int = 2) -> np.ndarray:
    """cuTensorMapEncodeTiled (a driver call PyCUDA does not wrap) for a row-major f16 [rows, cols]
    matrix at device `address`: the 128 opaque bytes, or CudaError with the driver's code."""
    if box_cols * 2 > 128:
        raise ValueError(f"a 128B-swizzled box row holds at most 64 f16, not {box_cols}")
    if l2_promotion not in _TMAP_L2_PROMOTIONS:
        raise ValueError(f"L2 promotion {l2_promotion} is not a CU_TENSOR_MAP_L2_PROMOTION (0-3)")
    lib = ctypes.CDLL("libcuda.so.1")
    raw = (ctypes.c_uint8 * (128 + 64))()  # CUtensorMap is 64-byte aligned
    at = (ctypes.addressof(raw) + 63) & ~63
    dims = (ctypes.c_uint64 * 2)(cols, rows)  # innermost first
    strides = (ctypes.c_uint64 * 1)(cols * 2)  # bytes between rows
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    unit = (ctypes.c_uint32 * 2)(1, 1)
    fn = lib.cuTensorMapEncodeTiled
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    err = fn(at, _TMAP_F16, 2, ctypes.c_void_p(address), dims, strides, box, unit, _TMAP_NO_INTERLEAVE,
             _TMAP_SWIZZLE_128B, l2_promotion, _TMAP_OOB_ZERO)
    if err != 0:
        raise CudaError(f"cuTensorMapEncodeTiled failed (CUresult {err}) for [{rows}, {cols}] f16, box {box_rows}x{box_cols}")
    return np.frombuffer(ctypes.string_at(at, 128), np.uint8).copy()


def _driver_attribute(number: int, index: int) -> int | None:
    """cuDeviceGetAttribute through ctypes (an attribute PyCUDA does not name)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        dev, value = ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return None
        if lib.cuDeviceGetAttribute(ctypes.byref(value), number, dev) != 0:
            return None
        return int(value.value)
    except OSError:
        return None


_devices: dict[int, CudaDevice] = {}


def open_cuda_device(index: int = 0) -> CudaDevice:
    """The CUDA device `index` on its primary context (one per process), or NoGPUError."""
    if index in _devices:
        return _devices[index]
    try:
        import pycuda.driver as drv
    except Exception as exc:  # ImportError, or libcuda missing under the extension
        raise NoGPUError(f"no NVIDIA GPU/driver found: PyCUDA is not usable ({_one_line(exc)})") from None
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as exc:
        raise NoGPUError(f"no NVIDIA GPU/driver found: cuInit failed ({_one_line(exc)})") from None
    if count == 0:
        raise NoGPUError("no NVIDIA GPU/driver found: the driver reports 0 devices")
    if not 0 <= index < count:
        raise NoGPUError(f"no NVIDIA GPU/driver found: GPU {index} asked for, {count} present")
    _devices[index] = CudaDevice(drv, index)
    return _devices[index]


# ---------------------------------------------------------------- torch on the same context

def torch_device(device: CudaDevice):
    """(torch module, torch.device) sharing `device`'s primary context and default stream."""
    try:
        import torch
    except ImportError as exc:
        raise CampaignError(f"this step needs torch (pip install '.[baselines]'): {_one_line(exc)}") from None
    if not torch.cuda.is_available():
        raise NoGPUError("no NVIDIA GPU/driver found: torch sees no CUDA device")
    torch.cuda.set_device(device.index)
    stream = torch.cuda.current_stream(device.index)
    if stream.cuda_stream != 0:
        raise CudaError("torch's current stream is not the default stream: PyCUDA launches would not be "
                        "ordered with it (run outside torch.cuda.stream(...))")
    return torch, torch.device("cuda", device.index)


# ---------------------------------------------------------------- measured ceilings

def median_seconds(device: CudaDevice, fn, reps: int, warmup: int = 3) -> float:
    """The median of `reps` single-call timings (time_once) after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    device.synchronize()
    return float(np.median([device.time_once(fn, 1) for _ in range(reps)]))


def measure_ceilings(device: CudaDevice, reps: int = 20, copy_bytes: int = 1 << 30, n: int = 8192) -> dict:
    """What this GPU does, measured in-process: copy bandwidth and cuBLAS peaks.

    Keys the campaign reads: bandwidth_gbps (HBM copy, bytes read + written),
    bf16_tflops, f16_tflops, int8_tops (each with a *_method string). The matmul peaks
    need torch; without it only the bandwidth is measured.
    """
    out: dict = {}
    src, dst = device.empty(copy_bytes, np.uint8), device.empty(copy_bytes, np.uint8)
    try:
        t = median_seconds(device, lambda: device.drv.memcpy_dtod(dst.ptr, src.ptr, copy_bytes), reps)
        out["bandwidth_gbps"] = 2 * copy_bytes / t / 1e9
        out["bandwidth_method"] = (f"cuMemcpyDtoD of {copy_bytes >> 20} MiB, (read + written bytes) / time, "
                                   f"CUDA events, median of {reps}")
    finally:
        src.release()
        dst.release()
    try:
        torch, tdev = torch_device(device)
    except CampaignError as exc:
        out["matmul_method"] = f"not measured: {exc}"
        return out
    flops = 2.0 * n ** 3
    gen = torch.Generator(device=tdev).manual_seed(0)
    for key, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        a = torch.randn(n, n, device=tdev, dtype=dtype, generator=gen)
        b = torch.randn(n, n, device=tdev, dtype=dtype, generator=gen)
        c = torch.empty(n, n, device=tdev, dtype=dtype)
        t = median_seconds(device, lambda: torch.mm(a, b, out=c), reps)
        out[f"{key}_tflops"] = flops / t / 1e12
        out[f"{key}_method"] = f"torch.mm {n}^3 {key} random normal, CUDA events, median of {reps}"
        del a, b, c
    a = torch.randint(-128, 128, (n, n), device=tdev, dtype=torch.int8, generator=gen)
    b = torch.randint(-128, 128, (n, n), device=tdev, dtype=torch.int8, generator=gen).t()  # column-major B
    t = median_seconds(device, lambda: torch._int_mm(a, b), reps)
    out["int8_tops"] = flops / t / 1e12
    out["int8_method"] = (f"torch._int_mm {n}^3 int8 random, B column-major (cuBLASLt), CUDA events, "
                          f"median of {reps}; a floor for int8 tensor-core peak")
    del a, b
    torch.cuda.empty_cache()
    return out

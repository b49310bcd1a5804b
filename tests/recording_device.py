"""A stand-in for the CUDA device in CI: what a kernel's Bound asks of a device (buffers, kernels,
TMA tensor maps), with launches and tensor maps recorded instead of run, so a launcher's
argument plumbing is tested without a GPU."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gates.static import DEFAULT_SMEM_OPTIN


class RecordingDevice:
    info = {"arch": "sm_90", "sm_count": 132, "smem_per_block_optin": DEFAULT_SMEM_OPTIN, "l2_bytes": 50 << 20}

    def __init__(self):
        self.launches, self.tensor_maps, self._next_ptr = [], [], 1 << 20

    def _buffer(self, array: np.ndarray) -> SimpleNamespace:
        buf = SimpleNamespace(ptr=self._next_ptr, array=array, nbytes=array.nbytes, size=array.size,
                              release=lambda: None)
        self._next_ptr += max(256, array.nbytes)
        return buf

    def to_device(self, array):
        return self._buffer(np.asarray(array))

    def empty(self, shape, dtype):  # 'bf16' is uint16 bits, as on the device
        return self._buffer(np.empty(shape, np.uint16 if dtype == "bf16" else dtype))

    def kernel(self, name: str, smem: int = 0) -> SimpleNamespace:  # a Module's kernel(name, smem) too
        return SimpleNamespace(launch=lambda *launch: self.launches.append((name, *launch)))

    def dependent_kernel(self, compiled, name: str, smem: int) -> SimpleNamespace:
        return SimpleNamespace(launch=lambda *launch: self.launches.append((f"{name} (dependent)", *launch)))

    def cooperative_kernel(self, compiled, name: str, smem: int) -> SimpleNamespace:
        return SimpleNamespace(launch=lambda *launch: self.launches.append((f"{name} (cooperative)", *launch)))

    def tensor_map_f16(self, buf, rows: int, cols: int, box_rows: int, box_cols: int, l2_promotion: int = 2):
        self.tensor_maps.append((buf.ptr, rows, cols, box_rows, box_cols, l2_promotion))
        return self._buffer(np.zeros(128, np.uint8))


def recorded_bound(family, params: dict, problem, registers: int = 128, **launch_params):
    """(device, bound): `family`'s Bound for `problem` on a RecordingDevice; `params` completed by the
    family, launch-time parameters (X16_INPUT=1, ...) added to the variant's as given."""
    from kernels.family import Variant

    qtype = problem.workload.qtype
    p = family.complete(params)
    variant = Variant(family.name, {**p, **launch_params}, qtype, "", {"registers": registers}, None)
    device = RecordingDevice()
    handle = {"smem": family.smem(p, qtype), "threads": family.threads(p), "gemm": device.kernel("gemm"),
              "reduce": device.kernel("reduce"), "module": device}
    return device, family.make_bound(device, variant, handle, problem)

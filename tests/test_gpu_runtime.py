"""kernels.cuda_runtime: device info, buffers, launches, timing, torch sharing.

Tests marked `gpu` need an NVIDIA GPU, its driver and PyCUDA (the `gpu_device` fixture
skips with the reason otherwise); the others check the GPU-free parts anywhere.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from campaign.errors import NoGPUError
from kernels import cuda_runtime
from tests.gpu_fixtures import gpu_device, gpu_torch  # noqa: F401  (fixtures)

COPY_SRC = r"""
extern "C" __global__ void scale_via_smem(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
    extern __shared__ float tile[];  // launched with > 48 KiB: needs the opt-in attribute
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = a * tile[threadIdx.x];
}
extern "C" __device__ int answer = 42;
"""


# ---------------------------------------------------------------- anywhere

def test_kernel_arguments_pack_as_pointers_or_typed_scalars():
    assert cuda_runtime._kernel_arg(0x7F0000001000) == (0x7F0000001000, "P")
    value, fmt = cuda_runtime._kernel_arg(np.int32(5))
    assert (int(value), fmt) == (5, "i")
    assert cuda_runtime._kernel_arg(np.float32(1.5))[1] == "f"
    assert cuda_runtime._kernel_arg(np.int64(7))[1] == np.dtype(np.int64).char
    for bad in (1.5, True, "x"):
        with pytest.raises(TypeError):
            cuda_runtime._kernel_arg(bad)


def test_launch_dims_are_padded_to_three():
    assert cuda_runtime._dim3(7) == (7, 1, 1)
    assert cuda_runtime._dim3((4, 2)) == (4, 2, 1)
    assert cuda_runtime._dim3(np.int64(3)) == (3, 1, 1)


def test_bf16_buffers_are_uint16_bits():
    assert cuda_runtime._element_of("bf16") == (np.dtype(np.uint16), "bf16")
    assert cuda_runtime._element_of(np.float32) == (np.dtype(np.float32), "float32")


def test_no_gpu_is_a_one_line_error():
    try:
        device = cuda_runtime.open_cuda_device()
    except NoGPUError as exc:
        message = str(exc)
        assert message.startswith("no NVIDIA GPU/driver found: ") and "\n" not in message
    else:
        pytest.skip(f"a GPU is present ({device.info['name']})")


# ---------------------------------------------------------------- on the GPU

@pytest.mark.gpu
def test_device_info_is_read_from_the_device(gpu_device):
    info = gpu_device.info
    major, minor = info["cc"]
    assert info["arch"] == f"sm_{major}{minor}"
    assert info["sm_count"] > 0 and info["l2_bytes"] > 0 and info["total_mem"] > 0
    assert info["smem_per_block_optin"] >= 48 * 1024 and info["smem_per_sm"] >= info["smem_per_block_optin"]
    assert info["regs_per_sm"] >= 65536 and info["mem_bus_width"] > 0
    assert cuda_runtime.open_cuda_device() is gpu_device  # one device object per process


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.uint16, np.uint8])
def test_buffers_round_trip(gpu_device, dtype):
    rng = np.random.default_rng(0)
    host = rng.integers(0, 100, (37, 19)).astype(dtype)
    buf = gpu_device.to_device(host)
    assert buf.shape == host.shape and buf.nbytes == host.nbytes and buf.ptr != 0
    assert np.array_equal(buf.get(), host)
    buf.release()
    assert buf.ptr == 0


@pytest.mark.gpu
def test_fill_nan_writes_quiet_nan_patterns(gpu_device):
    f32 = gpu_device.to_device(np.zeros((5, 7), np.float32))
    bf16 = gpu_device.empty((3, 9), "bf16")
    gpu_device.fill_nan(f32)
    gpu_device.fill_nan(bf16)
    assert np.all(f32.get().view(np.uint32) == 0x7FC00000)
    assert np.all(bf16.get() == 0x7FC0)
    with pytest.raises(ValueError, match="no NaN"):
        gpu_device.fill_nan(gpu_device.empty(4, np.int32))


@pytest.mark.gpu
def test_kernel_with_large_dynamic_smem_launches_and_computes(gpu_device):
    module = gpu_device.compile_and_load(COPY_SRC)
    smem = 96 * 1024  # 24576 floats: blocks of up to 1024 threads use a fraction, but it must be granted
    kernel = module.kernel("scale_via_smem", smem)
    n = 5000
    x = np.arange(n, dtype=np.float32)
    xb, yb = gpu_device.to_device(x), gpu_device.empty(n, np.float32)
    kernel.launch(((n + 255) // 256,), (256,), (xb, yb.ptr, np.float32(2.5), np.int32(n)))
    assert np.array_equal(yb.get(), 2.5 * x)
    assert module.read_constant_int("answer") == 42


@pytest.mark.gpu
def test_bad_launch_raises_cuda_error_with_the_cuda_text(gpu_device):
    kernel = gpu_device.compile_and_load(COPY_SRC).kernel("scale_via_smem", 0)
    buf = gpu_device.empty(4, np.float32)
    with pytest.raises(cuda_runtime.CudaError, match="launch of scale_via_smem"):
        kernel.launch((1,), (4096,), (buf, buf, np.float32(1), np.int32(4)))  # > 1024 threads per block
    gpu_device.synchronize()  # the failed launch left no sticky error


@pytest.mark.gpu
def test_launches_are_asynchronous_and_time_once_measures_gpu_time(gpu_device):
    spin = gpu_device._spin_kernel()
    t0 = time.perf_counter()
    spin.launch((1,), (1,), (np.uint64(50_000_000),))  # 50 ms on the GPU
    queued = time.perf_counter() - t0
    gpu_device.synchronize()
    waited = time.perf_counter() - t0
    assert queued < 0.01 < 0.04 < waited

    per_call = gpu_device.time_once(lambda: spin.launch((1,), (1,), (np.uint64(200_000),)), inner=10)
    assert 190e-6 < per_call < 260e-6  # 200 us spins, launch gaps hidden behind the timer's spin


@pytest.mark.gpu
def test_torch_and_pycuda_share_pointers_and_stream(gpu_device, gpu_torch):
    torch, tdev = gpu_torch
    module = gpu_device.compile_and_load(COPY_SRC)
    kernel = module.kernel("scale_via_smem", 1024)
    x = torch.arange(1000, device=tdev, dtype=torch.float32)
    y = torch.empty_like(x)
    kernel.launch((4,), (256,), (x, y.data_ptr(), np.float32(-1.0), np.int32(1000)))
    z = y * 2  # torch work queued after the PyCUDA kernel on the same stream sees its result
    assert torch.equal(z, -2 * x)


@pytest.mark.gpu
def test_measure_ceilings_small(gpu_device):
    c = cuda_runtime.measure_ceilings(gpu_device, reps=3, copy_bytes=64 << 20, n=1024)
    assert c["bandwidth_gbps"] > 10 and "cuMemcpyDtoD" in c["bandwidth_method"]
    if "bf16_tflops" in c:  # torch present
        assert c["bf16_tflops"] > 0 and c["int8_tops"] > 0 and "median of 3" in c["int8_method"]


@pytest.mark.gpu
def test_launch_floor_reports_each_case_with_the_read_near_the_measured_bandwidth(gpu_device):
    """scripts/launch_floor.py on 64 MiB, 5 reps: one JSON line per case on this device, each timed per call back to back
    and as one call; the empty call under 50 us, back to back no slower than alone (beyond noise), the one-round-trip
    wave no faster than the empty call by more than noise, and the best read (plain loads or the copy engine) above a
    fifth of the copy rate measure_ceilings measures and below the HBM's peak (faster would mean the rotated copies were
    read from L2)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "scripts/launch_floor.py", "--bytes", str(64 << 20), "--reps", "5"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = list(map(json.loads, proc.stdout.strip().splitlines()))
    rows = {r["case"]: r for r in lines if r["case"] not in ("stream", "stream_bulk")}
    assert set(rows) == {"empty", "wave", "round_trip", "stream_best"}
    assert sum(r["case"] == "stream_bulk" for r in lines) == 4 and sum(r["case"] == "stream" for r in lines) == 4
    assert {r["device"] for r in lines} == {gpu_device.info["name"]}
    empty = rows["empty"]
    assert 0 < empty["us_per_call"] < 50 and empty["us_per_call"] < 1.2 * empty["us_single_call"]
    assert rows["round_trip"]["us_per_call"] > 0.8 * empty["us_per_call"]
    copy_tb_s = cuda_runtime.measure_ceilings(gpu_device, reps=3, copy_bytes=256 << 20, n=256)["bandwidth_gbps"] / 1e3
    peak_tb_s = gpu_device.info["hbm_peak_bytes_s"] / 1e12  # the HBM's own rate: above it, L2 was read, not DRAM
    for read in (r for r in lines if r["case"].startswith("stream")):
        assert read["tb_per_s"] < peak_tb_s, (read, peak_tb_s)
    assert 0.2 * copy_tb_s < rows["stream_best"]["tb_per_s"], (rows["stream_best"], copy_tb_s)


@pytest.mark.parametrize("command", [
    ["-m", "campaign.bench", "--types", "q4_K", "--Ts", "16"],
    ["scripts/profile_kernel.py"],
    ["scripts/cluster_occupancy.py"],
    ["scripts/cluster_occupancy.py", "--family", "direct"],
    ["scripts/cluster_occupancy.py", "--family", "direct_q8"],
    ["scripts/launch_floor.py"],
    ["scripts/sweep_mmq.py", "--types", "q4_K"],
    ["scripts/moe_baseline_bench.py"],
])
def test_gpu_commands_outside_the_cli_stop_with_one_error_line_without_a_gpu(command):
    """The bench module and the device scripts, run where there is no GPU: exit 2 and one
    `error: no NVIDIA GPU...` line, not a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    try:
        cuda_runtime.open_cuda_device()
    except NoGPUError:
        pass
    else:
        pytest.skip("a GPU is present")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, *command], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: no NVIDIA GPU/driver found: ")

"""CI (nvcc, no GPU) for the fused-quantization MMQ (lever `fused_quant`, mmq.cu with FUSEQ=1):
the launcher's shared-memory formula equals the kernel's kSmemBytes (read from a host build of
mmq_core.cuh), every per-T starting configuration compiles for every type without local memory
and with IMMA, and one run() launches the GEMM alone on the float rows (a recording stand-in
for the device: no quantize pass, no Q8_1 buffers, the kernel's argument order)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import experiments
from gates.static import DEFAULT_SMEM_OPTIN
from kernels import mmq_base, mmq_fused_quant, nvcc, quant
from kernels.family import Problem, Workload
from kernels.quant.q8_1 import float32_to_bf16_bits
from tests.cuda_cases import TYPES, needs_nvcc
from tests.recording_device import recorded_bound

ARCH = "sm_90"
SMEM_HARNESS = Path(__file__).resolve().parent / "cuda" / "mmq_smem_host.cu"
SMEM_CASES = [  # (family, params, qtype): both activation widths, 1..4 stages, every type
    (mmq_fused_quant.FAMILY, {}, "q4_K"),
    (mmq_fused_quant.FAMILY, {"STAGES": 3, "BM": 128, "BN": 32, "WARPS_M": 4, "WARPS_N": 1}, "q5_K"),
    (mmq_fused_quant.FAMILY, {"STAGES": 1, "BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "XBF16": 1}, "q6_K"),
    (mmq_fused_quant.FAMILY, {"STAGES": 4, "BM": 64, "BN": 16, "WARPS_M": 2, "WARPS_N": 1, "XBF16": 1}, "q8_0"),
    (mmq_base.FAMILY, {}, "q6_K"),  # the FUSEQ=0 map the fused one extends
]


def kernel_smem_bytes(tmp: Path, defines: dict) -> int:
    exe = tmp / "smem_host"
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    subprocess.run([nvcc.find_nvcc(), "-std=c++17", f"-I{nvcc.CUDA_DIR}", *flags, "-o", str(exe),
                    str(SMEM_HARNESS)], check=True, capture_output=True)
    return int(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)


@needs_nvcc
@pytest.mark.parametrize("case", range(len(SMEM_CASES)))
def test_smem_formula_is_the_kernels(tmp_path, case):
    family, params, qtype = SMEM_CASES[case]
    p = family.complete(params)
    assert family.smem(p, qtype) == kernel_smem_bytes(tmp_path, family.defines(p, qtype))


def test_only_tiles_that_fit_are_valid():
    info = {"smem_per_block_optin": DEFAULT_SMEM_OPTIN}
    base_default = {k: mmq_base.DEFAULTS[k] for k in ("BM", "BN", "WARPS_M", "WARPS_N", "STAGES")}
    assert "shared memory" in mmq_fused_quant.invalid_reason(base_default, "q8_0", info)  # 4x the staging
    assert mmq_fused_quant.invalid_reason({"XBF16": 2}, "q4_K", info).startswith("XBF16=2")
    assert "multiple of 16*WARPS_M" in mmq_fused_quant.invalid_reason({"BM": 64, "WARPS_M": 8}, "q4_K", info)
    lever = experiments.get("fused_quant")
    for T in (1, 16, 64, 128, 512, 4096):
        params = {**lever.fixed, **lever.defaults, **mmq_fused_quant.heuristic_params(T)}
        assert lever.check(params, info) is None, (T, params)
        for key, value in params.items():
            assert key in lever.fixed or value in lever.space[key], (T, key, value)


@needs_nvcc
@pytest.mark.parametrize("qtype", TYPES)
def test_every_starting_configuration_compiles_clean(qtype):
    for params in mmq_fused_quant.FAMILY.precompile_configs():
        s = mmq_fused_quant.FAMILY.compile_only(params, qtype, ARCH).summary()
        assert s["spill_store_bytes"] == s["spill_load_bytes"] == s["local_mem_ops"] == 0, params
        assert s["sass_ops"].get("IMMA", 0) > 0, params


@pytest.mark.parametrize("xbf16", [0, 1])
def test_run_launches_the_gemm_alone_on_the_float_rows(xbf16):
    M, K, T = 40, 512, 7
    rng = np.random.default_rng(xbf16)
    x = rng.standard_normal((T, K)).astype(np.float32)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").quantize(rng.standard_normal((M, K))
                                                                               .astype(np.float32)), x)
    device, bound = recorded_bound(mmq_fused_quant.FAMILY, {"XBF16": xbf16, "SPLITK": 1}, problem, 100)
    bound.run()
    bound.run()  # the second run reads the next rotation copy
    assert [name for name, *_ in device.launches] == ["gemm", "gemm"]  # no quantize pass, no reduction
    assert bound.scratch == []
    for i, (_, grid, block, args, smem) in enumerate(device.launches):
        assert grid == (1, 1, 1) and block == (128, 1, 1) and smem == bound.smem
        # mmq_gemm(W, x, C, M, T, K, row_bytes) of mmq.cu with FUSEQ=1
        assert args[:3] == (bound.w[i].ptr, bound.x[i].ptr, bound.out.ptr)
        assert [int(a) for a in args[3:]] == [M, T, K, problem.w_packed.shape[1]]
    sent = bound.x[0].array
    if xbf16:  # bf16 bits, rounded once on the host
        assert sent.dtype == np.uint16 and np.array_equal(sent, float32_to_bf16_bits(x))
    else:
        assert sent.dtype == np.float32 and np.array_equal(sent, x)

"""CI (nvcc, no GPU): the MoE kernels compile for sm_90 for every type, with no local memory,
and the SASS holds what they claim (dp4a in the matvec, warp match in the routing scatter)."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gates.inputs import random_activations, random_weights
from kernels import moe_baselines, moe_route_gpu, nvcc, quant, reference

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except nvcc.CompileError:
    HAVE_NVCC = False
pytestmark = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (CUDA toolkit not installed)")

TYPES = list(moe_baselines.QTYPE_ID)
ARCH = "sm_90"
HOST_HARNESS = Path(__file__).resolve().parent / "cuda" / "moe_matvec_host.cu"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    """Every MoE cubin and the matvec's host harness, built side by side (2 cores)."""
    exe = tmp_path_factory.mktemp("moe-host") / "moe_matvec_host"

    def build_host() -> Path:
        subprocess.run([nvcc.find_nvcc(), "-x", "c++", "-O2", "-std=c++17", f"-I{nvcc.CUDA_DIR}", "-o", str(exe),
                        str(HOST_HARNESS)],
                       check=True, capture_output=True)
        return exe

    jobs = {"host": build_host, "route": lambda: moe_route_gpu.compile_for(ARCH)}
    jobs.update({q: (lambda q=q: moe_baselines.MOE_MATVEC.compile_only({}, q, ARCH)) for q in TYPES})
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def assert_no_local_memory(summary: dict, what: str) -> None:
    assert summary["sass_arch"] == ARCH, f"{what}: SASS for {summary['sass_arch']}"
    assert summary["spill_store_bytes"] == summary["spill_load_bytes"] == 0, f"{what}: spills {summary}"
    assert summary["stack_bytes"] == 0 and summary["local_mem_ops"] == 0, f"{what}: local memory {summary}"


def test_route_kernels_compile_without_local_memory(compiled):
    c = compiled["route"]
    assert set(moe_route_gpu.KERNELS) <= set(c.kernel_names)
    for name in moe_route_gpu.KERNELS:
        assert_no_local_memory(c.summary([name]), name)
    assert nvcc.sass_opcodes(c.sass, "moe_route_scatter")["MATCH"] > 0  # the stable rank's __match_any_sync
    assert nvcc.sass_opcodes(c.sass, "moe_route_count")["ATOMS"] > 0  # shared-memory histogram
    # the largest expert count the single-CTA scan takes still fits the default 48 KiB of smem
    assert moe_route_gpu.count_smem_bytes(moe_route_gpu.MAX_EXPERTS) <= 48 * 1024


@pytest.mark.parametrize("qtype", TYPES)
def test_matvec_compiles_for_every_type(compiled, qtype):
    c = compiled[qtype]
    summary = c.summary([moe_baselines.MoeMatvecFamily.kernel_name])
    assert_no_local_memory(summary, f"moe_matvec {qtype}")
    assert summary["sass_ops"].get("IDP", 0) > 0, f"moe_matvec {qtype}: no dp4a (IDP) in the SASS"
    assert summary["registers"] <= 128


def test_matvec_rejects_bad_parameters():
    with pytest.raises(ValueError, match="MV_ROWS"):
        moe_baselines.MOE_MATVEC.source({"MV_ROWS": 9}, "q4_K")
    with pytest.raises(ValueError, match="unknown parameter"):
        moe_baselines.MOE_MATVEC.source({"BM": 64}, "q4_K")
    with pytest.raises(ValueError, match="unsupported quant type"):
        moe_baselines.MOE_MATVEC.source({}, "q2_K")


@pytest.mark.parametrize("qtype", TYPES)
def test_matvec_group_code_matches_the_integer_reference_on_the_host(compiled, tmp_path, qtype):
    """The kernel's decode + dot per 32-group (its host twin), summed over K, against gemm_int."""
    rng = np.random.default_rng(TYPES.index(qtype))
    M, K = 9, 1408 if qtype == "q8_0" else 768  # q8_0 at the DeepSeek-V2-Lite down K (44 blocks)
    packed = quant.get(qtype).quantize(random_weights(rng, M, K))
    xq = quant.quantize_q8_1(random_activations(rng, 1, K))
    paths = [tmp_path / n for n in ("w.bin", "xq.bin", "xd.bin", "xs.bin", "out.bin")]
    for path, array in zip(paths, (packed, xq.q, xq.d, xq.s)):
        array.tofile(path)
    subprocess.run([str(compiled["host"]), str(moe_baselines.QTYPE_ID[qtype]), str(paths[0]), str(M), str(K),
                    *map(str, paths[1:])], check=True)
    got = np.fromfile(paths[4], np.float32)
    want = reference.gemm_int(packed, qtype, xq)[0]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 1e-5, f"{qtype}: host decode error {err:.3g} vs gemm_int"

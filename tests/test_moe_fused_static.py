"""CI (nvcc, no GPU): the grouped expert MMQ (lever `moe_fusion`) compiles for sm_90 for every
type through the static gate (no local memory, IMMA in the SASS); the shapes it refuses and
why; the 16-byte-aligned expert layout it uploads; the MoE baselines it is measured against
resolve as families, and its suites resolve and hold for every type it claims."""
from __future__ import annotations

import numpy as np
import pytest

import experiments
from campaign import workloads
from gates import static
from kernels import families, mmq_base, moe_baselines, nvcc, quant
from kernels.moe_fused import EXPERT_ALIGN, check_fused_shape, pack_experts

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except nvcc.CompileError:
    HAVE_NVCC = False

TYPES = ("q4_K", "q5_K", "q6_K", "q8_0")


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (CUDA toolkit not installed)")
def test_defaults_pass_the_static_gate_for_every_type():
    lever = experiments.get("moe_fusion")
    assert lever.types == TYPES
    result = static.compile_defaults(lever, "sm_90")
    assert result.passed, result.reason
    for qtype in TYPES:
        assert result.numbers[f"{qtype}.sass_IMMA"] > 0
        assert result.numbers[f"{qtype}.spill_bytes"] == result.numbers[f"{qtype}.local_mem_ops"] == 0


def test_q8_0_at_k1408_is_refused_naming_the_shape():
    with pytest.raises(ValueError, match=r"q8_0 expert weights M=2048 K=1408 are not supported: K=1408 is not a "
                                         r"multiple of 256"):
        check_fused_shape("q8_0", 2048, 1408)


def test_k_quants_off_the_superblock_get_the_block_rule():
    with pytest.raises(ValueError, match=r"q4_K cannot hold expert weights M=2048 K=1408.*K % 256 == 0"):
        check_fused_shape("q4_K", 2048, 1408)


@pytest.mark.parametrize("qtype", TYPES)
def test_shapes_of_whole_superblocks_are_accepted(qtype):
    check_fused_shape(qtype, 37, 768)  # raises on refusal


@pytest.mark.parametrize("qtype,M", [("q6_K", 37), ("q6_K", 8), ("q4_K", 37)])
def test_experts_are_uploaded_at_an_aligned_stride(qtype, M):
    rng = np.random.default_rng(M)
    qt = quant.get(qtype)
    w = np.stack([qt.random_packed(M, 768, rng) for _ in range(3)])
    flat, stride = pack_experts(w)
    expert_bytes = M * qt.row_bytes(768)
    assert stride % EXPERT_ALIGN == 0 and expert_bytes <= stride < expert_bytes + EXPERT_ALIGN
    for e in range(3):
        assert np.array_equal(flat[e * stride:e * stride + expert_bytes], w[e].reshape(-1))
    assert flat.size - 3 * stride == mmq_base.WEIGHT_PAD and not flat[3 * stride:].any()


def test_moe_baselines_resolve_as_families():
    assert families.get("moe_matvec") is moe_baselines.MOE_MATVEC
    assert families.get("moe_dequant_cublas") is moe_baselines.MOE_DEQUANT_CUBLAS
    assert families.get(experiments.get("moe_fusion").incumbent).name == "moe_matvec"


def test_lever_suites_resolve_and_hold_every_claimed_type():
    lever = experiments.get("moe_fusion")
    suite = workloads.get(lever.suite)
    for wl in [*suite.workloads(lever.types), *workloads.get(suite.parity).workloads(lever.types)]:
        assert wl.is_moe
        check_fused_shape(wl.qtype, wl.M, wl.K)  # raises on a shape the kernel refuses

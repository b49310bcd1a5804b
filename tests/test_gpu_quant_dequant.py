"""The GPU quantizer and dequantizer against their CPU contracts, bit for bit, and the
dequant_cublas baseline family end to end (build, prepare, poison, run, output).

  q8_1_quant.cu  == kernels.quant.quantize_q8_1 (same bytes of q, d, s), float32 and bf16 input
  dequant.cu     == bf16_rne(gguf dequantize)    (same bf16 bits), every type
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels import dequant_cublas, q8_1_gpu, reference
from kernels.family import Problem, Workload
from kernels.quant.q8_1 import float32_to_bf16_bits, quantize_q8_1
from tests.cuda_cases import TYPES, gguf_bf16_bits, q8_1_cases, random_blocks
from tests.gpu_fixtures import gpu_device, gpu_torch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.gpu

Q8_1_SHAPES = [(1, 64), (4, 256), (9, 4096), (67, 14336)]  # (T, K): odd T, partial last CTA


def q8_1_on_gpu(device, x_host: np.ndarray, kind: str):
    T, K = x_host.shape
    x = device.to_device(x_host, "bf16" if kind == "bf16" else None)
    q, d, s = q8_1_gpu.quantize_q8_1_gpu(device, x, T, K)
    out = q.get(), d.get(), s.get()
    for buf in (x, q, d, s):
        buf.release()
    return out


@pytest.mark.parametrize("kind", ["f32", "bf16"])
@pytest.mark.parametrize("shape", Q8_1_SHAPES)
def test_q8_1_kernel_matches_reference_bytes(gpu_device, kind, shape):
    T, K = shape
    rng = np.random.default_rng([T, K])
    x = q8_1_cases(rng, max(T, 4), K)[:T]
    x_in = x if kind == "f32" else float32_to_bf16_bits(x)
    q, d, s = q8_1_on_gpu(gpu_device, x_in, kind)
    ref = quantize_q8_1(x_in)
    assert np.array_equal(q, ref.q), f"q differs at {tuple(np.argwhere(q != ref.q)[0])}"
    assert np.array_equal(d.view(np.uint32), ref.d.view(np.uint32))
    assert np.array_equal(s, ref.s)


def test_q8_1_into_overwrites_preallocated_buffers(gpu_device):
    T, K = 5, 512
    x = q8_1_cases(np.random.default_rng(9), T, K)
    xb = gpu_device.to_device(x)
    q = gpu_device.to_device(np.full((T, K), 99, np.int8))
    d = gpu_device.empty((T, K // 32), np.float32)
    s = gpu_device.to_device(np.full((T, K // 32), -7, np.int32))
    gpu_device.fill_nan(d)
    for _ in range(2):  # the MMQ launcher calls it every run on the same buffers
        q8_1_gpu.quantize_into(gpu_device, xb, q, d, s, T, K)
    ref = quantize_q8_1(x)
    assert np.array_equal(q.get(), ref.q) and np.array_equal(d.get(), ref.d) and np.array_equal(s.get(), ref.s)
    with pytest.raises(ValueError, match="multiple of 32"):
        q8_1_gpu.quantize_into(gpu_device, xb, q, d, s, T, 500)


def dequant_on_gpu(device, packed: np.ndarray, qtype: str, K: int) -> np.ndarray:
    compiled = dequant_cublas.FAMILY.compile_only({}, qtype, device.info["arch"])
    kernel = device.load(compiled).kernel(dequant_cublas.KERNEL, 0)
    _, block, _, lanes = dequant_cublas.FORMATS[qtype]
    M = packed.shape[0]
    w = device.to_device(packed)
    out = device.empty((M, K), "bf16")
    device.fill_nan(out)
    n_blocks = M * K // block
    grid = (-(-n_blocks * lanes // dequant_cublas.CTA_THREADS),)
    kernel.launch(grid, (dequant_cublas.CTA_THREADS,), (w, out, np.int64(n_blocks)))
    got = out.get()
    w.release()
    out.release()
    return got


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("M,K", [(1, 256), (37, 768), (301, 4096)])
def test_dequant_kernel_matches_gguf_bits(gpu_device, qtype, M, K):
    rng = np.random.default_rng([M, K, TYPES.index(qtype)])
    packed = random_blocks(rng, qtype, M, K)
    got = dequant_on_gpu(gpu_device, packed, qtype, K)
    want = gguf_bf16_bits(packed, qtype)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{qtype} {M}x{K}: {len(bad)} of {got.size} differ, first at {tuple(bad[0])}"


def real_problem(rng, qtype: str, M: int, K: int, T: int) -> Problem:
    from kernels import quant

    w = (rng.standard_normal((M, K)) * rng.uniform(0.01, 2.0, (M, 1))).astype(np.float32)
    x = rng.standard_normal((T, K)).astype(np.float32)
    return Problem(Workload(qtype, M, K, T), quant.get(qtype).quantize(w), x)


@pytest.mark.parametrize("gemm_out", ["bf16", "f32"])
@pytest.mark.parametrize("qtype", TYPES)
def test_dequant_cublas_family_end_to_end(gpu_device, gpu_torch, qtype, gemm_out):
    variant = dequant_cublas.FAMILY.build({"gemm_out": gemm_out}, qtype, gpu_device)
    assert variant.resources["registers"] > 0 and variant.resources["sass_arch"].startswith(gpu_device.info["arch"])
    rng = np.random.default_rng([TYPES.index(qtype), len(gemm_out)])
    for M, K, T in [(37, 512, 5), (256, 1024, 64)]:
        prob = real_problem(rng, qtype, M, K, T)
        bound = variant.prepare(prob)
        bound.poison()
        assert np.isnan(bound.output()).all()
        bound.poison()
        bound.run()
        got = bound.output()
        for _ in range(len(bound.w)):  # every rotated copy computes the same thing
            bound.run()
        again = bound.output()
        bound.release()
        assert got.shape == (T, M) and got.dtype == np.float32 and np.isfinite(got).all()
        ref = reference.gemm_float64(prob.w_packed, qtype, prob.x)
        rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert rel < 1e-2, f"{qtype} {M}x{K}x{T} {gemm_out}: relative error {rel:.3g}"
        assert np.array_equal(got, again)


@pytest.mark.parametrize("qtype", TYPES)
def test_bf16_anchor_matches_the_per_call_baseline(gpu_device, gpu_torch, qtype):
    """dequant_each_call=False (the unquantized anchor): the weight dequantized once at prepare,
    then torch.mm alone; the same product as the per-call baseline's bf16 GEMM, every element written."""
    anchor = dequant_cublas.FAMILY.build({"dequant_each_call": False}, qtype, gpu_device)
    per_call = dequant_cublas.FAMILY.build({}, qtype, gpu_device)
    rng = np.random.default_rng([TYPES.index(qtype), 16])
    prob = real_problem(rng, qtype, 256, 1024, 64)
    outs = []
    for variant in (anchor, per_call):
        bound = variant.prepare(prob)
        bound.poison()
        bound.run()
        outs.append(bound.output())
        bound.release()
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])  # same bf16 weights, same cuBLAS bf16 GEMM


@pytest.mark.parametrize("qtype", ["q4_K", "q8_0"])
def test_bf16_anchor_with_f32_output_matches_the_per_call_f32_baseline(gpu_device, gpu_torch, qtype):
    """gemm_out="f32" on the anchor: cuBLAS writes f32 from the once-dequantized weight, the same product as
    the per-call baseline's f32 GEMM, every element written."""
    anchor = dequant_cublas.FAMILY.build({"dequant_each_call": False, "gemm_out": "f32"}, qtype, gpu_device)
    per_call = dequant_cublas.FAMILY.build({"gemm_out": "f32"}, qtype, gpu_device)
    rng = np.random.default_rng([TYPES.index(qtype), 32])
    prob = real_problem(rng, qtype, 256, 1024, 64)
    outs = []
    for variant in (anchor, per_call):
        bound = variant.prepare(prob)
        bound.poison()
        bound.run()
        outs.append(bound.output())
        bound.release()
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])

"""MoE on the GPU: routing buckets and work list equal to numpy's, the gather/scatter kernels, and
the parity of both baselines (moe_matvec tight vs the integer reference, moe_dequant_cublas
within the bf16 bound vs float64). Output poisoned before every launch, fresh inputs per check."""
import numpy as np
import pytest

from gates import parity
from gates.inputs import random_activations, random_weights
from kernels import moe_reference, moe_routing, quant
from kernels.family import Problem, Workload
from tests.gpu_fixtures import gpu_device, gpu_torch  # noqa: F401  (fixtures)

pytestmark = pytest.mark.gpu

TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]
TIGHT = 1e-4  # max |gpu - int ref| / max |int ref|
GARBAGE = -7  # int buffers start as this: an entry the kernels never wrote shows


def moe_problem(rng, qtype, E, M, K, T, top_k, routing, weighted=False) -> Problem:
    qt = quant.get(qtype)
    w = np.stack([qt.quantize(random_weights(rng, M, K)) for _ in range(E)])
    ids = moe_routing.make_routing(T, E, top_k, routing, rng)
    extra = {"route_weights": moe_routing.make_routing_weights(T, top_k, rng)} if weighted else {}
    return Problem(Workload(qtype, M, K, T, E, top_k, routing), w, random_activations(rng, T, K), ids, extra)


def shapes(qtype):
    """(E, M, K, T, top_k, routing, weighted): odd edges, 2-8 super-blocks, an empty expert."""
    out = [(16, 37, 768, 33, 4, "uniform_empty", False), (8, 145, 512, 67, 2, "zipf", True),
           (4, 64, 2048, 5, 3, "zipf_empty", False)]
    if qtype == "q8_0":
        out.append((6, 130, 1408, 9, 2, "uniform", True))  # DeepSeek-V2-Lite down K: 44 q8_0 blocks
    return out


def run_poisoned(variant, problem) -> np.ndarray:
    bound = variant.prepare(problem)
    try:
        bound.poison()
        bound.run()
        return bound.output()
    finally:
        bound.release()


# ---------------------------------------------------------------- routing kernels

ROUTE_CASES = [  # T, E, top_k, routing, token_tile
    (2048, 128, 8, "zipf", 64), (128, 128, 8, "uniform_empty", 16), (300, 1024, 8, "uniform", 32),
    (5, 3, 2, "zipf_empty", 1), (2048, 64, 6, "uniform", 128), (1000, 7, 7, "uniform", 300),
]


@pytest.mark.parametrize("case", ROUTE_CASES, ids=lambda c: "T{}-E{}-top{}-{}-tile{}".format(*c))
def test_gpu_bucketing_equals_numpy(gpu_device, case):
    from kernels.moe_route_gpu import GpuRouter

    T, E, top_k, routing, tile = case
    ids = moe_routing.make_routing(T, E, top_k, routing, np.random.default_rng(list(case[:3])))
    router = GpuRouter(gpu_device, T, top_k, E, token_tile=tile)
    for buf in (router.counts, router.offsets, router.order, router.work, router.n_tiles):
        buf.set(np.full(buf.shape, GARBAGE, np.int32))
    ids_dev = gpu_device.to_device(ids)
    try:
        router.route(ids_dev)
        got = router.result()
    finally:
        ids_dev.release()
        router.release()
    counts, offsets, order = moe_routing.bucket(ids, E)
    np.testing.assert_array_equal(got["counts"], counts)
    np.testing.assert_array_equal(got["offsets"], offsets)
    np.testing.assert_array_equal(got["order"], order)  # the stable scatter: same order, not just same sets
    work = moe_routing.build_work_list(counts, tile)
    assert got["n_tiles"] == len(work)
    np.testing.assert_array_equal(got["work"][:len(work)], work)
    assert (got["work"][len(work):] == [-1, T * top_k, 0]).all(), "padding rows of the work list"


def test_gpu_gather_and_scatter_rows(gpu_device):
    from kernels import q8_1_gpu
    from kernels.moe_route_gpu import GpuRouter

    rng = np.random.default_rng(21)
    T, E, top_k, K, M = 77, 12, 3, 1408, 45
    ids = moe_routing.make_routing(T, E, top_k, "zipf_empty", rng)
    x = random_activations(rng, T, K)
    route_w = moe_routing.make_routing_weights(T, top_k, rng)
    g = rng.standard_normal((T * top_k, M)).astype(np.float32)
    router = GpuRouter(gpu_device, T, top_k, E, token_tile=16, K=K)
    bufs = [gpu_device.to_device(a) for a in (ids, x, route_w, g)]
    y = gpu_device.empty((T * top_k, M), np.float32)
    try:
        xq, xd, xs = q8_1_gpu.quantize_q8_1_gpu(gpu_device, bufs[1], T, K)
        router.route(bufs[0])
        router.gather(xq, xd, xs)
        gpu_device.fill_nan(y)
        router.scatter_rows(bufs[3], y, M, bufs[2])
        got = router.result()
        out = y.get()
        host_q = (xq.get(), xd.get(), xs.get())
        for b in (xq, xd, xs):
            b.release()
    finally:
        for b in [*bufs, y]:
            b.release()
        router.release()
    order = moe_routing.bucket(ids, E)[2]
    tokens = order // top_k
    np.testing.assert_array_equal(got["gq"], host_q[0][tokens])
    np.testing.assert_array_equal(got["gd"], host_q[1][tokens])
    np.testing.assert_array_equal(got["gs"], host_q[2][tokens])
    want = np.empty_like(g)
    want[order] = g * route_w.reshape(-1)[order][:, None]
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------- baselines

MATVEC_CONFIGS = [{}, {"MV_WARPS": 2, "MV_ROWS": 3}, {"MV_WARPS": 8, "MV_ROWS": 1}]
PRECOMPILE = {"moe_matvec": MATVEC_CONFIGS}  # scripts/precompile.py builds these off the GPU


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(MATVEC_CONFIGS)))
def test_matvec_parity(gpu_device, qtype, cfg):
    from kernels.moe_baselines import MOE_MATVEC

    variant = MOE_MATVEC.build(MATVEC_CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype)])
    for E, M, K, T, top_k, routing, weighted in shapes(qtype):
        prob = moe_problem(rng, qtype, E, M, K, T, top_k, routing, weighted)
        label = f"{qtype} cfg{cfg} {prob.workload.label()} weighted={weighted}"
        got = run_poisoned(variant, prob)
        assert got.shape == (T, top_k, M) and not np.isnan(got).any(), f"{label}: unwritten (NaN) outputs"
        gates = prob.extra.get("route_weights")
        ref = moe_reference.moe_gemm_int(prob.w_packed, qtype, quant.quantize_q8_1(prob.x), prob.ids, gates)
        tight = np.abs(got - ref).max() / np.abs(ref).max()
        assert tight <= TIGHT, f"{label}: int-ref error {tight:.3g} > {TIGHT}"
        if not weighted:  # the gate's own references and bounds (they know no routing weights)
            numbers, reason = parity.compare(got, parity.references(prob, "int"), TIGHT)
            assert not reason, f"{label}: {reason} {numbers}"


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("gemm_out", ["bf16", "f32"])
def test_dequant_cublas_loop_parity(gpu_device, gpu_torch, qtype, gemm_out):
    from kernels.moe_baselines import MOE_DEQUANT_CUBLAS

    variant = MOE_DEQUANT_CUBLAS.build({"gemm_out": gemm_out}, qtype, gpu_device)
    rng = np.random.default_rng([TYPES.index(qtype), len(gemm_out)])
    for E, M, K, T, top_k, routing, weighted in shapes(qtype):
        prob = moe_problem(rng, qtype, E, M, K, T, top_k, routing, weighted)
        label = f"{qtype} {gemm_out} {prob.workload.label()} weighted={weighted}"
        got = run_poisoned(variant, prob)
        assert got.shape == (T, top_k, M) and not np.isnan(got).any(), f"{label}: unwritten (NaN) outputs"
        if weighted:
            gates = prob.extra["route_weights"]
            ref = moe_reference.moe_gemm_float64(prob.w_packed, qtype, prob.x, prob.ids, gates)
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            assert err <= 1e-2, f"{label}: float64 error {err:.3g}"
        else:
            numbers, reason = parity.compare(got, parity.references(prob, "bf16"), TIGHT)
            assert not reason, f"{label}: {reason} {numbers}"


def test_baselines_reject_bad_routing(gpu_device):
    from kernels.moe_baselines import MOE_MATVEC

    rng = np.random.default_rng(5)
    prob = moe_problem(rng, "q4_K", 4, 16, 256, 6, 2, "uniform")
    variant = MOE_MATVEC.build({}, "q4_K", gpu_device)
    bad = Problem(prob.workload, prob.w_packed, prob.x, prob.ids + 4)
    with pytest.raises(ValueError, match="outside the 4 experts"):
        variant.prepare(bad)


def test_matvec_through_the_parity_gate(gpu_device):
    from campaign.workloads import get
    from kernels.moe_baselines import MOE_MATVEC

    variant = MOE_MATVEC.build({}, "q6_K", gpu_device)
    result = parity.run(variant, get("parity_moe_real").workloads(["q6_K"]), np.random.default_rng(9), mode="int")
    assert result.passed, result.reason

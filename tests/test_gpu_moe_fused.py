"""Parity of the grouped expert MMQ (`moe_fused`, kernels/cuda/mmq_moe.cu) on the GPU: every
type, the token tile BN at 16/32/64/128, uniform, zipf and zipf_empty routing (an expert with
no token), odd M and T, with and without routing weights. Output poisoned with NaN before every
launch (every (token, slot, row) must be written), fresh random inputs for every check; tight
vs the per-pair integer reference, loose vs float64. Also: the work list the kernel ran over is
the one the weight traffic was counted on, the lever's parity suite passes the parity gate, and
q8_0 at K=1408 (not whole 256-wide super-blocks) is refused with the shape in the message.
"""
import numpy as np
import pytest

from campaign import workloads
from gates import parity
from kernels import moe_reference, moe_routing, quant
from tests.gpu_fixtures import gpu_device  # noqa: F401  (fixture)
from tests.test_gpu_moe import moe_problem, run_poisoned

pytestmark = pytest.mark.gpu

TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]
CONFIGS = [  # one per token tile BN the lever searches
    {"BM": 128, "BN": 16, "WARPS_M": 8, "WARPS_N": 1, "STAGES": 3},
    {"BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 1, "CVT": 0},
    {},  # defaults: BM 128, BN 64
    {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 2},
]
# (E, M, K, T, top_k, routing, weighted): odd edges, 1..8 super-blocks, empty experts, experts
# spanning several token tiles (300 * 2 / 8 pairs per expert; zipf's hot experts)
SHAPES = [(16, 37, 768, 33, 4, "uniform_empty", False), (8, 145, 512, 67, 2, "zipf", True),
          (4, 64, 2048, 5, 3, "zipf_empty", False), (8, 200, 256, 300, 2, "uniform", True),
          (32, 96, 512, 257, 4, "zipf", False)]
TIGHT = 1e-4  # max |gpu - int ref| / max |int ref|
PRECOMPILE = {"moe_fused": CONFIGS}  # scripts/precompile.py builds these off the GPU


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_moe_fused_parity(gpu_device, qtype, cfg):
    from kernels.moe_fused import FAMILY

    variant = FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 17])
    for E, M, K, T, top_k, routing, weighted in SHAPES:
        prob = moe_problem(rng, qtype, E, M, K, T, top_k, routing, weighted)
        label = f"{qtype} cfg{cfg} {prob.workload.label()} weighted={weighted}"
        got = run_poisoned(variant, prob)
        assert got.shape == (T, top_k, M), f"{label}: output shape {got.shape}"
        assert not np.isnan(got).any(), f"{label}: {np.isnan(got).sum()} outputs never written"
        gates = prob.extra.get("route_weights")
        ref = moe_reference.moe_gemm_int(prob.w_packed, qtype, quant.quantize_q8_1(prob.x), prob.ids, gates)
        tight = np.abs(got - ref).max() / np.abs(ref).max()
        assert tight <= TIGHT, f"{label}: int-ref error {tight:.3g} > {TIGHT}"
        if weighted:  # the gate's references know no routing weights
            ref64 = moe_reference.moe_gemm_float64(prob.w_packed, qtype, prob.x, prob.ids, gates)
            loose = np.linalg.norm(got - ref64) / np.linalg.norm(ref64)
            assert loose <= 2e-2, f"{label}: float64 error {loose:.3g}"
        else:
            numbers, reason = parity.compare(got, parity.references(prob, "int"), TIGHT)
            assert not reason, f"{label}: {reason} {numbers}"


@pytest.mark.parametrize("cfg", [0, 3])
def test_counted_traffic_is_the_work_list_the_kernel_ran(gpu_device, cfg):
    """fused weight bytes = (tiles of the GPU work list) x expert bytes, and below the matvec's."""
    from kernels.moe_fused import FAMILY

    E, M, K, T, top_k = 32, 96, 512, 257, 4
    variant = FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    prob = moe_problem(np.random.default_rng(cfg), "q4_K", E, M, K, T, top_k, "zipf_empty")
    bound = variant.prepare(prob)
    try:
        bound.poison()
        bound.run()
        routed = bound.router.result()
    finally:
        bound.release()
    m = bound.metrics
    expert_bytes = M * quant.get("q4_K").row_bytes(K)
    assert routed["n_tiles"] == len(moe_routing.build_work_list(routed["counts"], CONFIGS[cfg]["BN"]))
    assert m["weight_traffic/fused_bytes"] == routed["n_tiles"] * expert_bytes
    assert 1.0 <= m["weight_traffic/fused_ratio"] < m["weight_traffic/matvec_ratio"]


@pytest.mark.parametrize("qtype", TYPES)
def test_moe_fused_passes_the_parity_gate_on_its_lever_suite(gpu_device, qtype):
    import experiments
    from kernels.moe_fused import FAMILY

    lever = experiments.get("moe_fusion")
    variant = FAMILY.build({**lever.fixed, **lever.defaults}, qtype, gpu_device)
    suite = workloads.get(workloads.get(lever.suite).parity)
    result = parity.run(variant, suite.workloads([qtype]), np.random.default_rng([TYPES.index(qtype), 23]))
    assert result.passed, result.reason


def test_q8_0_at_k1408_is_refused_with_the_shape(gpu_device):
    from kernels.moe_fused import FAMILY

    variant = FAMILY.build({}, "q8_0", gpu_device)
    prob = moe_problem(np.random.default_rng(2), "q8_0", 6, 130, 1408, 9, 2, "uniform")
    with pytest.raises(ValueError, match=r"q8_0 expert weights M=130 K=1408 are not supported"):
        variant.prepare(prob)

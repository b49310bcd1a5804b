"""Parity of the grouped expert MMQ (`moe_fused`, kernels/cuda/mmq_moe.cu) on the GPU: every
type, the token tile BN at 16/32/64/128/256, both launch orders (ORDER 0 and 1), uniform, zipf
and zipf_empty routing (an expert with no token), odd M and T, with and without routing weights;
q8_0 also at K=1408 and K=640 (a 128-wide last super-block, zero-filled by the KTAIL build).
Output poisoned with NaN before every launch (every (token, slot, row) must be written), fresh
random inputs for every check; tight vs the per-pair integer reference, loose vs float64. Also:
q8_0 at K=1408 is bit-identical to the same problem zero-padded to K=1536; the work list the
kernel ran over is the one the weight traffic was counted on; the lever's parity suites pass the
parity gate; q8_0 at K=1376 (K % 128 != 0) is refused with the shape in the message.
"""
import numpy as np
import pytest

from campaign import workloads
from gates import parity
from kernels import moe_reference, moe_routing, quant
from kernels.family import Problem, Workload
from tests.gpu_fixtures import gpu_device  # noqa: F401  (fixture)
from tests.test_gpu_moe import moe_problem, run_poisoned

pytestmark = pytest.mark.gpu

TYPES = ["q4_K", "q5_K", "q6_K", "q8_0"]
CONFIGS = [  # one per token tile BN the lever searches, each launch order
    {"BM": 128, "BN": 16, "WARPS_M": 8, "WARPS_N": 1, "STAGES": 3},
    {"BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 1, "CVT": 0, "ORDER": 0},
    {},  # defaults: BM 128, BN 64, ORDER 1
    {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 2},
    {"BM": 64, "BN": 256, "WARPS_M": 1, "WARPS_N": 8, "STAGES": 1},  # one token tile for most experts
    {"ORDER": 0},  # the defaults walked token tile major
]
# (E, M, K, T, top_k, routing, weighted): odd edges, 1..8 super-blocks, empty experts, experts
# spanning several token tiles (300 * 2 / 8 pairs per expert; zipf's hot experts)
SHAPES = [(16, 37, 768, 33, 4, "uniform_empty", False), (8, 145, 512, 67, 2, "zipf", True),
          (4, 64, 2048, 5, 3, "zipf_empty", False), (8, 200, 256, 300, 2, "uniform", True),
          (32, 96, 512, 257, 4, "zipf", False)]
# q8_0 with a 128-wide last super-block: DeepSeek-V2-Lite's down K=1408 (its 64 experts, top-6),
# K=640 (2 super-blocks + the tail), experts over several 256-token tiles (T=700 zipf)
Q8_0_TAIL_SHAPES = [(6, 130, 1408, 9, 2, "uniform", True), (64, 160, 1408, 100, 6, "zipf_empty", False),
                    (8, 37, 640, 700, 3, "zipf", False), (4, 200, 640, 67, 2, "uniform_empty", True)]
TIGHT = 1e-4  # max |gpu - int ref| / max |int ref|
PRECOMPILE = {"moe_fused": CONFIGS}  # scripts/precompile.py builds these off the GPU


def shapes(qtype):
    return SHAPES + (Q8_0_TAIL_SHAPES if qtype == "q8_0" else [])


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_moe_fused_parity(gpu_device, qtype, cfg):
    from kernels.moe_fused import FAMILY

    variant = FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 17])
    for E, M, K, T, top_k, routing, weighted in shapes(qtype):
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
    assert 1.0 <= m["weight_traffic/fused_dram_ratio"] <= m["weight_traffic/fused_ratio"]


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("suite_name", ["moe_qwen3", "moe_study"])
def test_moe_fused_passes_the_parity_gate_on_its_lever_suite(gpu_device, qtype, suite_name):
    import experiments
    from kernels.moe_fused import FAMILY

    lever = experiments.get("moe_fusion")
    variant = FAMILY.build({**lever.fixed, **lever.defaults}, qtype, gpu_device)
    suite = workloads.get(workloads.get(suite_name).parity)
    wls = suite.workloads([qtype])
    assert any(w.K == 1408 for w in wls) == (qtype == "q8_0" and suite_name == "moe_study")
    result = parity.run(variant, wls, np.random.default_rng([TYPES.index(qtype), 23]))
    assert result.passed, result.reason


@pytest.mark.parametrize("cfg", [2, 4, 5])
def test_q8_0_k1408_equals_the_zero_padded_k1536_bit_for_bit(gpu_device, cfg):
    """The KTAIL tail adds exactly 0: the same experts and tokens with 4 zero q8_0 blocks (d = 0)
    and 128 zero activations appended per row give the same float32 outputs, bit for bit."""
    from kernels.moe_fused import FAMILY

    variant = FAMILY.build(CONFIGS[cfg], "q8_0", gpu_device)
    prob = moe_problem(np.random.default_rng([cfg, 31]), "q8_0", 8, 96, 1408, 77, 3, "zipf", weighted=True)
    w, x = prob.w_packed, prob.x
    w_pad = np.concatenate([w, np.zeros((*w.shape[:2], 4 * 34), np.uint8)], axis=2)  # 4 blocks: d = 0, q = 0
    x_pad = np.concatenate([x, np.zeros((x.shape[0], 128), x.dtype)], axis=1)
    wl = prob.workload
    padded = Problem(Workload("q8_0", wl.M, 1536, wl.T, wl.n_experts, wl.top_k, wl.routing), w_pad, x_pad,
                     prob.ids, prob.extra)
    got, want = run_poisoned(variant, prob), run_poisoned(variant, padded)
    assert not np.isnan(got).any()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
        f"cfg{cfg}: {np.count_nonzero(got != want)} outputs differ from the K=1536 zero-padded run"


def test_q8_0_off_a_multiple_of_128_is_refused_with_the_shape(gpu_device):
    from kernels.moe_fused import FAMILY

    variant = FAMILY.build({}, "q8_0", gpu_device)
    prob = moe_problem(np.random.default_rng(2), "q8_0", 6, 130, 1376, 9, 2, "uniform")
    with pytest.raises(ValueError, match=r"q8_0 expert weights M=130 K=1376 are not supported"):
        variant.prepare(prob)

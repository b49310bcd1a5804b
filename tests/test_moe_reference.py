"""MoE on the CPU: routing properties, bucketing and the work list against slow loops, the MoE
references against a per-(t, slot) loop over the dense reference, shapes, suites, traffic."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import moe_reference, moe_routing, moe_traffic, moe_workloads, quant, reference
from kernels.family import Workload
from kernels.moe_shapes import check_expert_shape

TYPES = list(quant.QTYPES)
KINDS = ["uniform", "zipf", "uniform_empty", "zipf_empty"]


# ---------------------------------------------------------------- routing

@pytest.mark.parametrize("kind", KINDS)
def test_routing_distinct_in_range_and_complete(kind):
    ids = moe_routing.make_routing(300, 16, 6, kind, np.random.default_rng(1))
    assert ids.shape == (300, 6) and ids.dtype == np.int32
    assert ids.min() >= 0 and ids.max() < 16
    assert all(len(set(row)) == 6 for row in ids.tolist()), "an expert repeated within a token"
    counts, offsets, _ = moe_routing.bucket(ids, 16)
    assert counts.sum() == 300 * 6 == offsets[-1]
    if kind.endswith("_empty"):
        assert counts[moe_routing.EMPTY_EXPERT] == 0


def test_routing_zipf_is_skewed_uniform_is_flat():
    rng = np.random.default_rng(2)
    zipf = np.sort(moe_routing.bucket(moe_routing.make_routing(4096, 64, 2, "zipf", rng), 64)[0])[::-1]
    flat = np.sort(moe_routing.bucket(moe_routing.make_routing(4096, 64, 2, "uniform", rng), 64)[0])[::-1]
    assert zipf[0] > 8 * zipf[32], f"zipf hottest {zipf[0]} vs median {zipf[32]}: not skewed"
    assert flat[0] < 1.5 * flat[32], f"uniform hottest {flat[0]} vs median {flat[32]}: skewed"


def test_routing_zipf_ranks_are_shuffled_over_experts():
    hottest = {int(np.argmax(moe_routing.expert_popularity(32, "zipf", np.random.default_rng(s)))) for s in range(8)}
    assert len(hottest) > 1, "the most popular expert is always the same index"


def test_routing_forced_empty_expert_and_errors():
    rng = np.random.default_rng(4)
    ids = moe_routing.make_routing(500, 8, 7, "zipf", rng, empty_expert=5)
    assert np.bincount(ids.ravel(), minlength=8)[5] == 0
    with pytest.raises(ValueError, match="top_k"):
        moe_routing.make_routing(4, 8, 8, "uniform", rng, empty_expert=3)  # only 7 usable experts
    with pytest.raises(ValueError, match="unknown routing kind"):
        moe_routing.make_routing(4, 8, 2, "gaussian", rng)
    with pytest.raises(ValueError, match="outside"):
        moe_routing.bucket(np.array([[0, 8]]), 8)


def test_routing_for_workload_and_gate_weights():
    w = Workload("q4_K", 16, 256, 40, n_experts=12, top_k=3, routing="uniform_empty")
    ids = moe_routing.routing_for(w, np.random.default_rng(5))
    assert ids.shape == (40, 3) and not np.any(ids == moe_routing.EMPTY_EXPERT)
    gates = moe_routing.make_routing_weights(40, 3, np.random.default_rng(6))
    assert gates.dtype == np.float32 and (gates > 0).all()
    np.testing.assert_allclose(gates.sum(axis=1), 1.0, rtol=1e-6)


# ---------------------------------------------------------------- bucketing and work list

def slow_bucket(ids: np.ndarray, n_experts: int):
    top_k = ids.shape[1]
    buckets = [[] for _ in range(n_experts)]
    for t, row in enumerate(ids.tolist()):
        for slot, e in enumerate(row):
            buckets[e].append(t * top_k + slot)
    counts = [len(b) for b in buckets]
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    return counts, offsets, [p for b in buckets for p in b]


def slow_work_list(counts, tile: int):
    rows, start = [], 0
    for e, c in enumerate(counts):
        for first in range(0, c, tile):
            rows.append((e, start + first, min(tile, c - first)))
        start += c
    return rows


@pytest.mark.parametrize("kind", KINDS)
def test_bucket_matches_slow_loop(kind):
    ids = moe_routing.make_routing(97, 10, 3, kind, np.random.default_rng(7))
    counts, offsets, order = moe_routing.bucket(ids, 10)
    want = slow_bucket(ids, 10)
    assert counts.tolist() == want[0] and offsets.tolist() == want[1] and order.tolist() == want[2]
    assert counts.dtype == offsets.dtype == order.dtype == np.int32


@pytest.mark.parametrize("tile", [1, 7, 16, 64])
def test_work_list_matches_slow_loop_and_fits_capacity(tile):
    rng = np.random.default_rng(tile)
    for kind in KINDS:
        ids = moe_routing.make_routing(150, 12, 4, kind, rng)
        counts = moe_routing.bucket(ids, 12)[0]
        work = moe_routing.build_work_list(counts, tile)
        assert work.dtype == np.int32 and work.shape[1] == 3
        assert [tuple(r) for r in work.tolist()] == slow_work_list(counts.tolist(), tile)
        assert len(work) <= moe_routing.work_list_capacity(600, 12, tile)


def test_work_list_capacity_is_reached():
    tile, E = 16, 5
    counts = np.full(E, tile + 1)  # every expert one token past a full tile: 2 tiles each
    assert len(moe_routing.build_work_list(counts, tile)) == 2 * E
    assert moe_routing.work_list_capacity(int(counts.sum()), E, tile) == 2 * E
    assert moe_routing.work_list_capacity(3, 64, 16) == 3  # never more tiles than pairs
    assert moe_routing.build_work_list(np.zeros(4, int), 8).shape == (0, 3)


# ---------------------------------------------------------------- references

def moe_problem(qtype: str, E: int, M: int, K: int, T: int, top_k: int, kind: str, seed: int):
    rng = np.random.default_rng(seed)
    qt = quant.get(qtype)
    w = np.stack([qt.quantize((rng.standard_normal((M, K)) * rng.uniform(0.1, 2, (M, 1))).astype(np.float32))
                  for _ in range(E)])
    x = (rng.standard_normal((T, K)) * rng.uniform(0.1, 3, (T, 1))).astype(np.float32)
    return w, x, moe_routing.make_routing(T, E, top_k, kind, rng), moe_routing.make_routing_weights(T, top_k, rng)


@pytest.mark.parametrize("qtype", TYPES)
def test_moe_reference_matches_per_pair_dense_loop(qtype):
    K = 512 if qtype != "q8_0" else 96
    w, x, ids, gates = moe_problem(qtype, E=5, M=7, K=K, T=9, top_k=2, kind="zipf_empty", seed=TYPES.index(qtype))
    xq = quant.quantize_q8_1(x)
    got_int = moe_reference.moe_gemm_int_float64(w, qtype, xq, ids)
    got_int_w = moe_reference.moe_gemm_int_float64(w, qtype, xq, ids, gates)
    got64 = moe_reference.moe_gemm_float64(w, qtype, x, ids)
    assert got_int.shape == got64.shape == (9, 2, 7)
    for t in range(9):
        row = quant.Q8_1Act(q=xq.q[t:t + 1], d=xq.d[t:t + 1], s=xq.s[t:t + 1])
        for slot in range(2):
            e = ids[t, slot]
            want_int = reference.gemm_int_float64(w[e], qtype, row)[0]
            np.testing.assert_allclose(got_int[t, slot], want_int, rtol=1e-12, atol=0)
            np.testing.assert_allclose(got_int_w[t, slot], want_int * float(gates[t, slot]), rtol=1e-12, atol=0)
            np.testing.assert_allclose(got64[t, slot], reference.gemm_float64(w[e], qtype, x[t:t + 1])[0],
                                       rtol=1e-12, atol=0)
    as_f32 = moe_reference.moe_gemm_int(w, qtype, xq, ids)
    assert as_f32.dtype == np.float32 and np.array_equal(as_f32, got_int.astype(np.float32))


def test_q8_0_holds_k1408_in_the_reference():
    w, x, ids, _ = moe_problem("q8_0", E=4, M=6, K=1408, T=5, top_k=3, kind="uniform", seed=11)
    xq = quant.quantize_q8_1(x)
    got = moe_reference.moe_gemm_int(w, "q8_0", xq, ids)
    want = np.stack([[reference.gemm_int(w[e], "q8_0", quant.Q8_1Act(xq.q[t:t + 1], xq.d[t:t + 1], xq.s[t:t + 1]))[0]
                      for e in ids[t]] for t in range(5)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    exact = moe_reference.moe_gemm_float64(w, "q8_0", x, ids)
    assert np.abs(got - exact).max() < 0.02 * np.abs(exact).max()  # activation rounding only


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K"])
def test_k_quant_with_k1408_raises_naming_shape_and_rule(qtype):
    with pytest.raises(ValueError, match=r"M=2048 K=1408.*not a multiple of 256"):
        check_expert_shape(qtype, 2048, 1408)
    fake = np.zeros((2, 3, 1408 // 32 * 34), np.uint8)
    xq = quant.quantize_q8_1(np.ones((2, 1408), np.float32))
    with pytest.raises(ValueError, match=r"K=1408 is not a multiple of 256"):
        moe_reference.moe_gemm_int(fake, qtype, xq, np.zeros((2, 1), np.int32))
    with pytest.raises(ValueError, match=rf"{qtype} cannot hold expert weights M=2048 K=1408"):
        moe_workloads.moe_workloads("moe_dsv2_lite_down", [qtype])
    check_expert_shape("q8_0", 2048, 1408)  # q8_0 holds it


def test_reference_rejects_mismatched_inputs():
    w, x, ids, _ = moe_problem("q8_0", E=3, M=4, K=64, T=4, top_k=2, kind="uniform", seed=12)
    xq = quant.quantize_q8_1(x)
    with pytest.raises(ValueError, match="outside the 3 experts"):
        moe_reference.moe_gemm_int(w, "q8_0", xq, ids + 3)
    with pytest.raises(ValueError, match="ids cover 3 tokens"):
        moe_reference.moe_gemm_int(w, "q8_0", xq, ids[:3])
    with pytest.raises(ValueError, match="do not match ids"):
        moe_reference.moe_gemm_float64(w, "q8_0", x, ids, np.ones((4, 3), np.float32))


# ---------------------------------------------------------------- suites and traffic

def test_moe_suites_hold_the_real_shapes():
    qwen = moe_workloads.moe_suite("moe_qwen3")
    shapes = {(c.M, c.K, c.n_experts, c.top_k) for c in qwen.cases}
    assert shapes == {(768, 2048, 128, 8), (2048, 768, 128, 8)}
    assert {c.T for c in qwen.cases} == {128, 512, 2048}
    assert {c.routing for c in qwen.cases} == {"uniform", "zipf", "zipf_empty"}
    down = moe_workloads.moe_suite("moe_dsv2_lite_down")
    assert down.types == ("q8_0",) and {(c.M, c.K, c.n_experts, c.top_k) for c in down.cases} == {(2048, 1408, 64, 6)}
    assert {w.qtype for w in moe_workloads.moe_workloads("moe_dsv2_lite_down")} == {"q8_0"}
    for name in moe_workloads.MOE_SUITE_NAMES:  # every default expansion is holdable by its types
        suite = moe_workloads.moe_suite(name)
        assert moe_workloads.moe_workloads(name) and suite.parity in moe_workloads.MOE_SUITE_NAMES
    with pytest.raises(ValueError, match="unknown MoE suite"):
        moe_workloads.moe_suite("moe_nope")


def test_weight_traffic_counts():
    counts = np.array([0, 3, 5, 1, 0])
    t = moe_traffic.weight_traffic(counts, "q4_K", M=8, K=512, token_tile=4)
    one = 8 * 2 * 144
    assert t.expert_bytes == one and t.active_experts == 3 and t.unique_bytes == 3 * one
    assert t.matvec_bytes == 9 * one and t.fused_bytes == (1 + 2 + 1) * one and t.fused_resident_bytes == 3 * one
    assert t.dequant_cublas_bytes == 3 * one + 3 * 8 * 512 * 2
    assert t.ratio("matvec") == 3.0 and t.ratio("fused") == pytest.approx(4 / 3)
    metrics = t.as_metrics()
    assert metrics["weight_traffic/fused_ratio"] == pytest.approx(4 / 3)
    with pytest.raises(ValueError, match="no expert has a token"):
        moe_traffic.weight_traffic(np.zeros(3), "q4_K", 8, 512, 4)


@pytest.mark.parametrize("order,l2_tiles,dram_tiles", [
    (0, 0, 5), (1, 0, 5),  # no cache: every load reaches DRAM
    (0, 1, 5),  # a cache of one weight + one activation tile: ORDER 0 re-touches a row tile n_row CTAs later
    (1, 1, 2),  # ORDER 1 re-touches it in the next CTA: each expert read once
    (0, 10**6, 2), (1, 10**6, 2)])
def test_dram_model_follows_the_launch_order(order, l2_tiles, dram_tiles):
    """Experts of 9 and 5 tokens, token tile 4 (3 + 2 items), 2 row tiles of 4 rows: 5 expert loads."""
    counts = np.array([0, 9, 5])
    one = 8 * 2 * 144
    window = 4 * 2 * 144 + 4 * (512 + 16 * 8)  # one weight row tile + one full activation tile (Q8_1)
    t = moe_traffic.weight_traffic(counts, "q4_K", M=8, K=512, token_tile=4, BM=4, order=order,
                                   l2_bytes=int(l2_tiles * window / moe_traffic.L2_SHARE))
    assert t.fused_bytes == 5 * one and t.unique_bytes == 2 * one
    assert t.fused_dram_bytes == dram_tiles * one
    assert t.as_metrics()["weight_traffic/fused_dram_ratio"] == pytest.approx(dram_tiles / 2)


def test_dram_model_at_t2048_of_the_real_shapes():
    """The issue's goal (<= ~1.2x the unique expert bytes at T=2048) under the L2 model of a 50 MB L2,
    and the global loads it takes the L2 to absorb (the 256-token tile needs it least)."""
    for E, top_k, M, K, qtype in ((128, 8, 768, 2048, "q4_K"), (64, 6, 2048, 1408, "q8_0")):
        for routing in ("uniform", "zipf"):
            counts = moe_routing.bucket(moe_routing.make_routing(2048, E, top_k, routing,
                                                                 np.random.default_rng(0)), E)[0]
            for BN, order in ((64, 0), (64, 1), (256, 1)):
                t = moe_traffic.weight_traffic(counts, qtype, M, K, BN, order=order, l2_bytes=50 * 2**20)
                assert t.ratio("fused_dram") <= 1.2 < t.ratio("matvec")
                assert t.ratio("fused") >= (2.0 if BN == 64 else 1.0)
            assert moe_traffic.weight_traffic(counts, qtype, M, K, 256).ratio("fused") <= 1.4


def test_mixed_suites_skip_the_k_quant_k1408_cases_saying_why():
    from campaign import workloads

    suite = workloads.get("moe_dsv2_lite")
    wls, skipped = suite.expand(["q4_K", "q8_0"])
    assert {(w.qtype, w.M, w.K) for w in wls} == {("q4_K", 1408, 2048), ("q8_0", 1408, 2048), ("q8_0", 2048, 1408)}
    for qtype, M, K in {(w.qtype, w.M, w.K) for w in wls}:  # every T and routing, the empty expert too
        cases = {(w.T, w.routing) for w in wls if (w.qtype, w.M, w.K) == (qtype, M, K)}
        assert {T for T, _ in cases} == {128, 512, 2048} and {r for _, r in cases} == {"uniform", "zipf", "zipf_empty"}
    assert len(skipped) == 1 and skipped == suite.skipped(["q4_K"])
    assert "q4_K cannot hold expert weights M=2048 K=1408: K=1408 is not a multiple of 256" in skipped[0]
    assert suite.workloads(["q4_K", "q8_0"]) == wls and workloads.get(suite.parity).skipped(["q8_0"]) == []


def test_the_study_suite_is_small_and_holds_every_type():
    from campaign import workloads

    suite = workloads.get("moe_study")
    for qtype in ("q4_K", "q5_K", "q6_K"):
        wls, skipped = suite.expand([qtype])
        assert len(wls) == 2 and len(skipped) == 1 and "K=1408" in skipped[0]
    wls = suite.workloads(["q8_0"])
    assert len(wls) == 3 and {w.T for w in wls} == {128, 2048} and any(w.K == 1408 for w in wls)
    assert any(w.routing.endswith("_empty") for w in wls)
    with pytest.raises(ValueError, match="q4_K cannot hold expert weights M=2048 K=1408"):
        moe_workloads.moe_workloads("moe_dsv2_lite_down", ["q4_K"])

"""CI (nvcc, no GPU): the grouped expert MMQ (lever `moe_fusion`) compiles for sm_90 for every
type through the static gate (no local memory, IMMA in the SASS), the 256-token tile and both
launch orders too; q8_0 builds take a K tail (KTAIL=1), a K-quant build refuses one at compile
time; the shapes it refuses and why; the 16-byte-aligned expert and row layout it uploads; the
ORDER=1 index math of mmq_moe.cu (ported here) covers exactly the work list; the MoE baselines
it is measured against resolve as families, and its suites resolve and hold for every type it claims."""
from __future__ import annotations

import numpy as np
import pytest

import experiments
from campaign import workloads
from gates import static
from kernels import families, mmq_base, moe_baselines, nvcc, quant
from kernels import moe_fused, moe_routing, moe_traffic
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


BN256 = {"BM": 64, "BN": 256, "WARPS_M": 1, "WARPS_N": 8, "STAGES": 1}  # the 256-token tile, no spills


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (CUDA toolkit not installed)")
@pytest.mark.parametrize("qtype,params", [("q8_0", BN256), ("q6_K", BN256), ("q8_0", {"ORDER": 0}),
                                          ("q4_K", {"ORDER": 0, "BN": 128, "WARPS_M": 2, "WARPS_N": 4})])
def test_new_configurations_pass_the_static_gate(qtype, params):
    lever = experiments.get("moe_fusion")
    params = {**lever.fixed, **lever.defaults, **params}
    assert lever.check(params, {"smem_per_block_optin": 227 * 1024}) is None
    compiled = moe_fused.FAMILY.compile_only(params, qtype, "sm_90")
    res = compiled.summary([moe_fused.FAMILY.kernel_name])
    assert res["sass_ops"].get("IMMA", 0) > 0
    assert res["spill_store_bytes"] == res["local_mem_ops"] == 0, res


def test_only_q8_0_builds_take_a_k_tail():
    fam = moe_fused.FAMILY
    assert fam.defines({}, "q8_0")["KTAIL"] == 1
    assert all(fam.defines({}, t)["KTAIL"] == 0 for t in ("q4_K", "q5_K", "q6_K"))
    assert fam.defines({"ORDER": 0}, "q4_K")["ORDER"] == 0 and fam.defines({}, "q4_K")["ORDER"] == 1
    assert fam.invalid({"ORDER": 2}, "q8_0", {}) == "ORDER=2 not in (0, 1)"


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (CUDA toolkit not installed)")
def test_a_k_quant_build_with_a_k_tail_is_a_compile_error():
    source = nvcc.render_source(moe_fused.MMQ_MOE_CU, {**moe_fused.FAMILY.defines({}, "q4_K"), "KTAIL": 1})
    with pytest.raises(nvcc.CompileError, match="KTAIL"):
        nvcc.compile_cubin(source, None, "sm_90")


def test_q8_0_takes_k1408_and_refuses_a_tail_under_128():
    check_fused_shape("q8_0", 2048, 1408)  # 5 super-blocks + 128: the DeepSeek-V2-Lite down projection
    check_fused_shape("q8_0", 37, 640)
    with pytest.raises(ValueError, match=r"q8_0 expert weights M=2048 K=1376 are not supported: K=1376 is not a "
                                         r"multiple of 128"):
        check_fused_shape("q8_0", 2048, 1376)


def test_q8_0_rows_of_k1408_are_uploaded_at_a_16_byte_stride():
    rng = np.random.default_rng(5)
    qt = quant.get("q8_0")
    w = np.stack([qt.random_packed(37, 1408, rng) for _ in range(3)])
    flat, stride, rstride = pack_experts(w, "q8_0")
    assert w.shape[2] == 1496 and rstride == 1504 and stride == 37 * 1504
    rows = flat[:3 * stride].reshape(3, 37, rstride)
    assert np.array_equal(rows[:, :, :1496], w) and not rows[:, :, 1496:].any()
    # whole super-blocks keep their rows as they are (272 bytes per 256 k)
    w2 = np.stack([qt.random_packed(5, 512, rng) for _ in range(2)])
    assert pack_experts(w2, "q8_0")[2] == w2.shape[2] == 544


def kernel_order1_tiles(work: np.ndarray, offsets: np.ndarray, n_row: int, BN: int, capacity: int):
    """mmq_moe.cu's ORDER=1 blockIdx -> (expert, row tile, tok0, tok_end), ported line by line."""
    out = []
    for b in range(capacity * n_row):
        expert, off, _ = work[b // n_row]
        if expert < 0:
            continue
        begin, end = offsets[expert], offsets[expert + 1]
        tiles = (end - begin + BN - 1) // BN
        first = b // n_row - (off - begin) // BN
        local = b - first * n_row
        tok0 = begin + (local % tiles) * BN
        out.append((expert, local // tiles, tok0, min(tok0 + BN, end)))
    return out


@pytest.mark.parametrize("routing,BN", [("zipf_empty", 16), ("uniform", 64), ("zipf", 256)])
def test_order1_walks_each_work_item_and_row_tile_once(routing, BN):
    E, T, top_k, n_row = 16, 300, 4, 3
    ids = moe_routing.make_routing(T, E, top_k, routing, np.random.default_rng(BN))
    counts, offsets, _ = moe_routing.bucket(ids, E)
    work = moe_routing.build_work_list(counts, BN)
    capacity = moe_routing.work_list_capacity(T * top_k, E, BN)
    padded = np.concatenate([work, np.tile([[-1, T * top_k, 0]], (capacity - len(work), 1))])
    got = kernel_order1_tiles(padded, offsets, n_row, BN, capacity)
    want = [(e, r, o, o + c) for e, o, c in work for r in range(n_row)]  # ORDER 0's CTAs
    assert sorted(got) == sorted(want) and len(got) == len(want)
    # the launch order the traffic model walks is the kernel's
    w_tiles, a_tiles = moe_traffic.launch_tiles(counts, n_row, BN, order=1)
    assert [e * n_row + r for e, r, _, _ in got] == w_tiles.tolist()
    assert [work[a][1] for a in a_tiles] == [o for _, _, o, _ in got]


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
    flat, stride, rstride = pack_experts(w, qtype)
    assert rstride == w.shape[2]  # K-quant rows as they are (q6_K: its own unaligned window)
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

"""The wgmma family off the GPU: its generated wrappers are current, it builds for sm_90a
(HGMMA in SASS, no spills) at every configuration the GPU tests and heuristics use, and it
refuses what it cannot build with a reason."""
import collections
import re

import numpy as np
import pytest

from kernels import mmq_wgmma, nvcc
from kernels import wgmma_header as gen_wgmma_header
from tests.test_gpu_wgmma import (CLUSTER_SPLIT, CONFIGS, DEEP_RING, DEPENDENT, MULTICAST, PERSISTENT, RASTER,
                                  SPLIT_DECODE, STREAM_K)


H200 = {"smem_per_block_optin": 227 * 1024}


def why_not(params: dict, qtype: str = "q4_K") -> str | None:
    """mmq_wgmma.invalid_reason on the H200's shared memory: None, or why the configuration is refused."""
    return mmq_wgmma.invalid_reason(params, qtype, H200)


def recorded_bound(params: dict, M: int, K: int, T: int, seed: int, x16_input: int = 0):
    """(device, problem, bound): the launcher of a q4_K problem on a RecordingDevice, which
    records launches and TMA maps instead of running them."""
    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound as record

    rng = np.random.default_rng(seed)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    device, bound = record(mmq_wgmma.FAMILY, params, problem, 168, X16_INPUT=x16_input)
    return device, problem, bound


def test_generated_header_is_current():
    assert gen_wgmma_header.HEADER.read_text() == gen_wgmma_header.render(), \
        "kernels/cuda/wgmma_ops.cuh is stale: run python3 -m kernels.wgmma_header"
    assert tuple(gen_wgmma_header.WIDTHS) == mmq_wgmma.WGMMA_WIDTHS


@pytest.mark.parametrize("params", [*CONFIGS, *DEEP_RING, *CLUSTER_SPLIT, *MULTICAST, *DEPENDENT, *PERSISTENT, *RASTER,
                                    *SPLIT_DECODE, *STREAM_K,
                                    *(mmq_wgmma.heuristic_params(t) for t in (16, 64, 256, 4096))])
def test_builds_for_sm_90a_with_hgmma(params):
    compiled = mmq_wgmma.FAMILY.compile_only(params, "q4_K", "sm_90")
    assert compiled.arch == "sm_90a"
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    bn = mmq_wgmma.full_params(params)["BN"]
    # 4 wgmma k16 steps per 64-k pipeline step, all at the configured N
    assert len(re.findall(rf"HGMMA\.64x{bn}x16\.F32", compiled.sass)) >= 4
    assert "warning" not in compiled.ptxas_log.lower()  # e.g. ptxas serializing the wgmmas


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_warp_specialized_kernel_moves_registers_and_waits_on_mbarriers(qtype):
    """WS=1 with two consumer warpgroups: setmaxnreg in SASS (ptxas honoured it, no C7508),
    mbarrier arrive/try-wait, no spills in the producer's smaller register budget."""
    compiled = mmq_wgmma.FAMILY.compile_only({"WS": 1, "BM": 128, "BN": 256, "STAGES": 3, "DEQ": 1}, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    for op in ("USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC", "SYNCS.ARRIVE", "SYNCS.PHASECHK", "HGMMA.64x256x16"):
        assert op in compiled.sass, op
    assert "warning" not in compiled.ptxas_log.lower()
    assert mmq_wgmma.threads({"WS": 1, "BM": 128}) == 384 and mmq_wgmma.threads({"BM": 128}) == 256


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_register_a_kernel_feeds_hgmma_from_registers(qtype):
    """AREG=1: the A operand of every HGMMA is a register (R..), not a shared-memory descriptor;
    the producer's copies arrive on mbarriers (LDGSTSBAR ... ARVCNT); no spills, no serialization."""
    params = mmq_wgmma.heuristic_params(4096, qtype)  # the large-T tile the bench runs for this type
    compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    hgmma = re.findall(rf"HGMMA\.64x{params['BN']}x16\.F32 R\d+, (\S+),", compiled.sass)
    assert len(hgmma) >= 4 and all(a.startswith("R") for a in hgmma), hgmma
    for op in ("USETMAXREG.TRY_ALLOC", "LDGSTSBAR", "SYNCS.PHASECHK"):
        assert op in compiled.sass, op
    assert "warning" not in compiled.ptxas_log.lower()
    assert mmq_wgmma.threads({"AREG": 1, "BM": 128}) == 384


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
@pytest.mark.parametrize("xload, op", [(1, "UBLKCP"), (2, "UTMALDG")])
def test_activations_arrive_by_the_copy_engine(qtype, xload, op):
    """XLOAD=1 (bulk copy of pass-tiled chunks) and 2 (TMA tensor map): the activation chunks come
    by the copy engine, so the load/store unit carries only the raw weight copies (LDGSTS with
    mbarrier arrival); the register budget holds at the widest tile."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": xload}
    compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    assert op in compiled.sass and "LDGSTSBAR" in compiled.sass
    assert "warning" not in compiled.ptxas_log.lower()


def test_invalid_configurations_say_why():
    assert "wgmma N" in why_not({"BN": 100})
    assert "STAGES" in why_not({"STAGES": 2})
    assert "warpgroups" in why_not({"BM": 256})
    assert "shared memory" in why_not({"BM": 128, "BN": 256, "STAGES": 4}, "q8_0")
    assert why_not({"BM": 128, "BN": 256, "STAGES": 4}) is None
    assert "ABUF" in why_not({"ABUF": 3})  # 3 chunks only for WS=1
    assert why_not({"ABUF": 3, "WS": 1}) is None
    assert "WS" in why_not({"WS": 2})
    assert "RAW" in why_not({"AREG": 1, "RAW": 9})
    assert "STAGES" in why_not({"AREG": 1, "BN": 16, "STAGES": 17})
    assert why_not({"AREG": 1, "BN": 16, "STAGES": 16, "RAW": 8}) is None
    assert "STAGES" in why_not({"STAGES": 6})  # deep rings: register-A only
    assert "XLOAD" in why_not({"AREG": 1, "XLOAD": 4})
    assert "X16_INPUT" in why_not({"AREG": 1, "XLOAD": 1, "X16_INPUT": 1})
    assert why_not({"AREG": 1, "XLOAD": 2, "X16_INPUT": 1}) is None
    assert "BN=32 > 16" in why_not({"AREG": 1, "XLOAD": 3, "BN": 32})
    assert mmq_wgmma.full_params({"XLOAD": 1})["XLOAD"] == 0  # only the register-A kernel tiles
    assert "STAGES" in why_not({"AREG": 1, "STAGES": 1})
    assert why_not({"AREG": 1, "STAGES": 2}) is None
    with pytest.raises(ValueError, match="Hopper"):
        mmq_wgmma.FAMILY.target_arch("sm_80")


def test_smem_formula_counts_every_buffer():
    # 1 KB alignment slack + activation ring + 2 f16 weight chunks + 2 raw super-block slots
    p = {"BM": 128, "BN": 64, "STAGES": 3}
    assert mmq_wgmma.smem_bytes(p, "q4_K") == 1024 + 3 * 64 * 128 + 2 * 128 * 128 + 2 * 128 * 144
    assert mmq_wgmma.smem_bytes(p, "q6_K") == 1024 + 3 * 64 * 128 + 2 * 128 * 128 + 2 * 128 * 224
    # WS: ABUF chunks and 128 B of mbarriers
    ws = {**p, "WS": 1, "ABUF": 3}
    assert mmq_wgmma.smem_bytes(ws, "q4_K") == 1024 + 3 * 64 * 128 + 3 * 128 * 128 + 2 * 128 * 144 + 128
    # AREG: no dequantized chunks, RAW raw slots
    rs = {**p, "AREG": 1, "RAW": 3}
    assert mmq_wgmma.smem_bytes(rs, "q8_0") == 1024 + 3 * 64 * 128 + 3 * 128 * 272 + 256
    # a deep ring's 2 x (16 + 8) mbarriers take a second 256-byte unit
    deep = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 16, "RAW": 8}
    assert mmq_wgmma.smem_bytes(deep, "q4_K") == 1024 + 16 * 16 * 128 + 8 * 128 * 144 + 512


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_deep_rings_compile_without_spills(qtype):
    """STAGES 16 / RAW 8 at BN=16 (and STAGES 6 at BN=64): the ring indices are no longer powers of
    two or small, and the consumers must still fit their registers."""
    for params in ({"AREG": 1, "BM": 128, "BN": 16, "STAGES": 16, "RAW": 4, "XLOAD": 2},
                   {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 6, "RAW": 3, "XLOAD": 2}):
        compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
        s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
        assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0, (params, s)
        assert "HGMMA" in compiled.sass


@pytest.mark.parametrize("xload", [0, 1, 2, 3])
@pytest.mark.parametrize("x16_input", [0, 1])
def test_each_activation_load_gets_what_its_kernel_reads(xload, x16_input):
    """The Bound's side of XLOAD, with launches recorded instead of run: 0 the f32 -> f16 pass into
    row-major rows; 1 the tiling pass into whole BN-token tiles; 2 the pass, and the kernel gets a
    TMA map of the rows it reads (one per rotation copy when f16 arrives as is); 3 no pass, the
    kernel reads the f32 rows. Every launch's GEMM arguments are (W, X, C, M, T, K, row_bytes)."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "XLOAD": xload, "X16_INPUT": x16_input}
    if mmq_wgmma.invalid_reason(params, "q4_K", {}):
        assert xload in (1, 3) and x16_input  # the two that need f32 rows
        return
    M, K, T = 40, 512, 21  # T: one full 16-token tile and a partial one
    device, problem, bound = recorded_bound(params, M, K, T, xload, x16_input)
    bound.splitk, bound.partial = 1, None  # one launch per run: the GEMM's own arguments
    bound.run()
    bound.run()  # the second run reads the next rotation copy
    passes = [name for name, *_ in device.launches if name != "gemm"]
    gemm_args = [args for name, grid, block, args, smem in device.launches if name == "gemm"]
    want_pass = {0: "f32_to_f16", 1: "f32_to_f16_tiled", 2: "f32_to_f16", 3: None}[xload]
    assert passes == ([] if x16_input or want_pass is None else [want_pass] * 2)
    for i, args in enumerate(gemm_args):
        assert args[0] == bound.w[i].ptr and args[2] == bound.out.ptr
        assert [int(a) for a in args[3:]] == [M, T, K, problem.w_packed.shape[1]]
        if xload == 3 or (xload == 0 and x16_input):
            assert args[1] == bound.x[i].ptr  # the rows as they arrive
        elif xload == 2:
            assert args[1] == bound.maps[i if x16_input else 0].ptr
        else:
            assert args[1] == bound.scratch[0].ptr
    if xload == 1:  # whole tiles: 2 x 16 token rows of K f16
        assert bound.scratch[0].array.shape == (32, K) and bound.scratch[0].array.dtype == np.float16
    if xload == 2:  # box: 16 tokens x 64 k of each [T, K] f16 matrix the kernel reads
        rows = [b.ptr for b in (bound.x if x16_input else bound.scratch)]
        assert device.tensor_maps == [(ptr, T, K, 16, 64, 2) for ptr in rows]  # 128 B per L2 miss
    assert (xload == 3 or bool(x16_input)) == (bound.scratch == [])  # no pass, no scratch


@pytest.mark.parametrize("cluster", [2, 4])
def test_a_cluster_split_launches_one_kernel_with_the_cluster_along_k(cluster):
    """CLUSTER > 1: gridDim.z is the cluster (whatever the auto split would pick), the GEMM writes
    C itself, and there is no partial buffer and no reduce launch."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "XLOAD": 3, "CLUSTER": cluster}
    # M=4096, K=2048, T=16: 32 tiles, where the auto split would pick 4 (2048 / 256 = 8 super-blocks)
    device, _, bound = recorded_bound(params, 4096, 2048, 16, cluster)
    bound.run()
    assert [name for name, *_ in device.launches] == ["gemm"]
    (_, grid, _, args, _), = device.launches
    assert grid == (1, 32, cluster) and bound.partial is None and args[2] == bound.out.ptr


def test_cluster_configurations_say_why_not():
    assert "CLUSTER=3" in why_not({"AREG": 1, "CLUSTER": 3})
    assert "register-A" in why_not({"CLUSTER": 2})
    assert "the cluster is the split" in why_not({"AREG": 1, "CLUSTER": 2, "SPLITK": 4})
    for qtype in ("q4_K", "q5_K", "q6_K", "q8_0"):  # the cluster is the split: SPLITK 0 or CLUSTER
        assert why_not({"AREG": 1, "BN": 16, "CLUSTER": 4, "SPLITK": 4}, qtype) is None
    # BN=256 at BM=128: 128 KB of partial sums, 2 x 32 KB ring + 2 x 18 KB raw slots hold 100 KB
    assert "partial sums" in why_not({"AREG": 1, "BM": 128, "BN": 256, "STAGES": 2, "RAW": 2, "CLUSTER": 2})


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q8_0"])
def test_cluster_split_compiles_to_cluster_barriers_and_remote_loads(qtype):
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "CLUSTER": 4}
    compiled = mmq_wgmma.FAMILY.compile_only(params, qtype)
    s = compiled.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    assert "UCGABAR_ARV" in compiled.sass and "UCGABAR_WAIT" in compiled.sass  # barrier.cluster
    assert "HGMMA" in compiled.sass
    plain = mmq_wgmma.FAMILY.compile_only({**params, "CLUSTER": 1}, qtype)
    assert "UCGABAR_ARV" not in plain.sass


@pytest.mark.parametrize("mcast", [2, 4])
@pytest.mark.parametrize("xload", [1, 2])
def test_multicast_rounds_the_grid_to_whole_clusters_and_maps_a_share(mcast, xload):
    """MCAST > 1: gridDim.y is a multiple of the cluster (M = 330 is 3 row tiles of 128), and
    a TMA box is one CTA's share of the token tile."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "XLOAD": xload, "MCAST": mcast}
    M, K, T = 330, 512, 300
    device, _, bound = recorded_bound(params, M, K, T, mcast)
    bound.run()
    (grid,) = [grid for name, grid, *_ in device.launches if name == "gemm"]
    assert grid[:2] == (2, 4) and grid[1] % mcast == 0
    if xload == 2:
        assert device.tensor_maps == [(bound.scratch[0].ptr, T, K, 256 // mcast, 64, 2)]


@pytest.mark.parametrize("mcast", [2, 4])
def test_multicast_with_raster_rounds_the_row_tiles_along_x(mcast):
    """MCAST with RASTER=1: the cluster runs along x, where the weight-row tiles are (M = 330: 3 row
    tiles of 128, rounded up to whole clusters; T = 300: 2 token tiles of 256)."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "XLOAD": 1, "MCAST": mcast, "RASTER": 1}
    device, _, bound = recorded_bound(params, 330, 512, 300, mcast)
    bound.run()
    (grid,) = [grid for name, grid, *_ in device.launches if name == "gemm"]
    assert grid[:2] == (4, 2)
    sass = mmq_wgmma.FAMILY.compile_only(params, "q4_K").sass
    assert "UBLKCP.S.G.MULTICAST" in sass


def test_multicast_configurations_say_why_not():
    assert "MCAST=3" in why_not({"AREG": 1, "XLOAD": 1, "MCAST": 3})
    assert "XLOAD=3" in why_not({"AREG": 1, "BN": 16, "XLOAD": 3, "MCAST": 2})
    assert "AREG=1" in why_not({"XLOAD": 1, "MCAST": 2})
    assert "either splits K" in why_not({"AREG": 1, "BN": 64, "XLOAD": 2, "MCAST": 2, "CLUSTER": 2})
    assert "8-token" in why_not({"AREG": 1, "BN": 16, "XLOAD": 2, "MCAST": 4})
    assert why_not({"AREG": 1, "BN": 16, "XLOAD": 2, "MCAST": 2}) is None


@pytest.mark.parametrize("xload, copy", [(1, "UBLKCP.S.G.MULTICAST"), (2, "UTMALDG.2D.MULTICAST")])
def test_multicast_compiles_to_multicast_copies_and_remote_arrives(xload, copy):
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": xload, "MCAST": 2}
    compiled = mmq_wgmma.FAMILY.compile_only(params, "q4_K")
    assert copy in compiled.sass and "UCGABAR_WAIT" in compiled.sass
    assert "MULTICAST" not in mmq_wgmma.FAMILY.compile_only({**params, "MCAST": 1}, "q4_K").sass


@pytest.mark.parametrize("pdl", [1, 2])
@pytest.mark.parametrize("x16_input", [0, 1])
@pytest.mark.parametrize("xload", [1, 2])
def test_a_dependent_gemm_follows_its_pass_and_only_its_pass(xload, x16_input, pdl):
    """PDL >= 1: the GEMM goes through the dependent launch after the activation pass; with f16
    rows in (no pass) it is launched plainly, since nothing before it may overlap it. PDL=2: the
    split-K reduce (T=16 splits K 4 ways here) is a dependent of the GEMM, pass or not."""
    if xload == 1 and x16_input:
        return  # (XLOAD=1 reads the pass's tiles: no f16-input form)
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "XLOAD": xload, "PDL": pdl}
    device, _, bound = recorded_bound(params, 4096, 2048, 16, xload, x16_input)
    bound.run()
    names = [name for name, *_ in device.launches]
    passed = {1: "f32_to_f16_tiled", 2: "f32_to_f16"}[xload]
    want = ["gemm"] if x16_input else [passed, "mmq_wgmma_gemm (dependent)"]
    assert bound.partial is not None and names == want + [{1: "reduce", 2: "mmq_wgmma_splitk_reduce (dependent)"}[pdl]]


def test_pdl_2_without_a_pass_makes_only_the_reduce_dependent():
    """XLOAD=3 reads f32 rows itself: no pass, so the GEMM is a plain launch (and does not wait
    in griddepcontrol.wait), but with PDL=2 it still releases the split-K reduce at its start."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "PDL": 2}
    device, _, bound = recorded_bound(params, 4096, 2048, 16, 3)
    bound.run()
    assert bound.partial is not None
    assert [name for name, *_ in device.launches] == ["gemm", "mmq_wgmma_splitk_reduce (dependent)"]
    gemm = nvcc.sass_functions(mmq_wgmma.FAMILY.compile_only(params, "q4_K").sass)[mmq_wgmma.FAMILY.kernel_name]
    assert "PREEXIT" in gemm and "ACQBULK" not in gemm


def test_dependent_launch_configurations_say_why_not():
    assert "PDL=3" in why_not({"AREG": 1, "PDL": 3})
    assert "XLOAD 0-2" in why_not({"AREG": 1, "BN": 16, "XLOAD": 3, "PDL": 1})
    assert "XLOAD 0-2" in why_not({"PDL": 1})
    assert why_not({"AREG": 1, "BN": 16, "XLOAD": 3, "PDL": 2}) is None  # the reduce only
    assert why_not({"AREG": 1, "BN": 16, "XLOAD": 2, "PDL": 1}) is None
    assert why_not({"AREG": 1, "BN": 16, "XLOAD": 2, "PDL": 2}) is None


def test_dependent_launch_waits_in_the_gemm_and_releases_in_the_pass():
    """griddepcontrol.wait (SASS ACQBULK) in the GEMM's activation warps, launch_dependents
    (PREEXIT) in the pass; neither without PDL."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 1, "PDL": 1}
    sass = mmq_wgmma.FAMILY.compile_only(params, "q4_K").sass
    functions = re.split(r"\n\s*Function : ", sass)
    gemm = next(f for f in functions if f.startswith("mmq_wgmma_gemm"))
    tiled = next(f for f in functions if f.startswith("f32_to_f16_tiled"))
    assert "ACQBULK" in gemm and "PREEXIT" in tiled and "PREEXIT" not in gemm
    plain = mmq_wgmma.FAMILY.compile_only({**params, "PDL": 0}, "q4_K").sass
    assert "ACQBULK" not in plain and "PREEXIT" not in plain


def test_pdl_2_releases_the_reduce_from_the_gemm_and_the_reduce_waits():
    functions = re.split(r"\n\s*Function : ", mmq_wgmma.FAMILY.compile_only(
        {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "PDL": 2}, "q4_K").sass)
    gemm = next(f for f in functions if f.startswith("mmq_wgmma_gemm"))
    reduce = next(f for f in functions if f.startswith("mmq_wgmma_splitk_reduce"))
    assert "PREEXIT" in gemm and "ACQBULK" in gemm and "ACQBULK" in reduce


@pytest.mark.parametrize("qtype, fewer", [("q4_K", 0), ("q5_K", 24), ("q6_K", 48), ("q8_0", 0)])
def test_wreuse_drops_the_reloaded_words_and_only_those(qtype, fewer):
    """WREUSE=1: q5_K stops reloading its qh word in 3 of 4 steps (2 rows x 4 positions x 3 loads
    per super-block), q6_K its three words in the odd steps (2 x 4 x 3 x 2); q4_K and q8_0 have
    no word to keep and compile to the same loads."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2}

    def shared_loads(wreuse: int) -> int:
        sass = mmq_wgmma.FAMILY.compile_only({**params, "WREUSE": wreuse}, qtype).sass
        return len(re.findall(r"\bLDS\b", next(f for f in re.split(r"\n\s*Function : ", sass)
                                               if f.startswith("mmq_wgmma_gemm"))))

    assert shared_loads(0) - shared_loads(1) == fewer


@pytest.mark.parametrize("qtype, fewer", [("q4_K", 0), ("q5_K", 24), ("q6_K", 48), ("q8_0", 0)])
def test_wreuse_2_keeps_the_reused_words_spread(qtype, fewer):
    """WREUSE=2: the words WREUSE=1 keeps are kept spread, so no step spreads one again: q5_K's qh
    word in steps 1-3 (2 rows x 4 positions x 3 PRMT per super-block), q6_K's three words in the
    odd steps (2 x 4 x 3 x 2); the same shared loads as WREUSE=1, and no change for q4_K and q8_0."""
    params = {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2}

    def ops(wreuse: int) -> collections.Counter:
        sass = mmq_wgmma.FAMILY.compile_only({**params, "WREUSE": wreuse}, qtype).sass
        return nvcc.sass_opcodes(sass, mmq_wgmma.FAMILY.kernel_name)

    kept, spread = ops(1), ops(2)
    prmt = lambda c: sum(n for op, n in c.items() if op.startswith("PRMT"))  # noqa: E731
    lds = lambda c: sum(n for op, n in c.items() if op.startswith("LDS"))  # noqa: E731
    assert prmt(kept) - prmt(spread) == fewer and lds(kept) == lds(spread)


def test_the_launch_structures_have_the_driver_layout():
    """CUlaunchConfig and CUlaunchAttribute as cuda.h lays them out (x86-64)."""
    import ctypes

    from kernels import dependent_launch as dl

    assert ctypes.sizeof(dl.LaunchAttribute) == 72 and dl.LaunchAttribute.value.offset == 8
    assert ctypes.sizeof(dl.LaunchConfig) == 56
    assert (dl.LaunchConfig.shared_mem_bytes.offset, dl.LaunchConfig.stream.offset, dl.LaunchConfig.attrs.offset,
            dl.LaunchConfig.num_attrs.offset) == (24, 32, 40, 48)
    attr = dl.programmatic_attribute()
    assert attr.id == 6 and int.from_bytes(bytes(attr.value[:4]), "little") == 1
    assert dl.c_argument(np.int32(-3), "i").value == -3 and dl.c_argument(np.int64(1 << 40), "l").value == 1 << 40
    assert dl.c_argument(0xDEAD0000, "P").value == 0xDEAD0000


@pytest.mark.parametrize("M, T, grid", [(4096, 4096, (132, 1, 1)), (4096, 2304, (132, 1, 1)),
                                        (4096, 1024, (128, 1, 1)), (4096, 512, (2, 32, 2))])
def test_persistent_ctas_fill_the_sms_once_where_the_tiles_do(M, T, grid):
    """PERSIST=1 (128 x 256 tiles, one CTA per SM): a 1-D grid of min(tiles, SM slots) CTAs
    writing C directly where the tiles fill the GPU; where they do not (T=512: 64 tiles), the
    plain grid split along K, as without PERSIST."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1}
    device, _, bound = recorded_bound({**params, "PERSIST": 1}, M, 1024, T, 7)
    bound.run()
    (launch, args), = [(g, args) for name, g, _, args, _ in device.launches if name == "gemm"]
    assert launch == grid and (bound.partial is None) == (grid[2] == 1)
    _, _, plain = recorded_bound(params, M, 1024, T, 7)
    assert plain.splitk == bound.splitk


def test_persistent_configurations_say_why_not():
    assert "PERSIST=2" in why_not({"AREG": 1, "XLOAD": 1, "PERSIST": 2})
    assert "XLOAD 1 or 2" in why_not({"AREG": 1, "BN": 16, "XLOAD": 3, "PERSIST": 1})
    assert "XLOAD 1 or 2" in why_not({"PERSIST": 1})
    assert "no CLUSTER" in why_not({"AREG": 1, "BN": 16, "XLOAD": 2, "PERSIST": 1, "CLUSTER": 2})
    assert "no CLUSTER" in why_not({"AREG": 1, "BN": 64, "XLOAD": 2, "PERSIST": 1, "MCAST": 2})
    assert why_not({"AREG": 1, "BN": 256, "XLOAD": 1, "PERSIST": 1}) is None


def test_persistent_kernel_loops_over_tiles_and_the_plain_one_does_not():
    """PERSIST=1 compiles a tile loop, strided by the grid size, around the same HGMMA main loop;
    the plain kernel (PERSIST=0) never reads the grid size."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1}
    plain = mmq_wgmma.FAMILY.compile_only(params, "q4_K")
    persistent = mmq_wgmma.FAMILY.compile_only({**params, "PERSIST": 1}, "q4_K")
    s = persistent.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    gemm = {name: nvcc.sass_functions(c.sass)[mmq_wgmma.FAMILY.kernel_name]
            for name, c in (("plain", plain), ("persistent", persistent))}
    assert gemm["persistent"].count("HGMMA.64x256x16") == gemm["plain"].count("HGMMA.64x256x16") == 16
    # the tile stride is gridDim.x (constant bank offset 0xc): only the persistent GEMM reads it
    assert "c[0x0][0xc]" in gemm["persistent"] and "c[0x0][0xc]" not in gemm["plain"]


def hgmma_span(params: dict) -> int:
    """Instructions from the q4_K GEMM's first HGMMA to its last: one super-block of the consumer loop."""
    body = [line for line in main_loop_sass(params, "q4_K").splitlines()
            if re.match(r"\s+/\*[0-9a-f]+\*/\s+[@A-Z]", line)]
    at = [i for i, line in enumerate(body) if "HGMMA" in line]
    return at[-1] - at[0] + 1


def test_persistent_loop_costs_no_more_instructions_than_the_plain_one():
    """The rings count whole super-blocks from tile to tile (unsigned), so with STAGES dividing the 4 steps
    of a super-block every slot and phase stays a compile-time constant in PERSIST's loop as in the plain
    one (run 26: a signed step offset cost PERSIST 541 instructions per super-block against 503)."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "RASTER": 1, "SPLITDEC": 1}
    plain, persistent = hgmma_span(params), hgmma_span({**params, "PERSIST": 1})
    assert persistent <= plain * 1.02, (plain, persistent)


@pytest.mark.parametrize("persist", [0, 1])
def test_raster_launches_weight_row_tiles_along_x(persist):
    """RASTER=1: the plain grid is (row tiles, token tiles, split); the persistent grid is as
    wide as without it (M=4096: 32 row tiles of 128, T=1280: 5 token tiles of 256)."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "PERSIST": persist}
    grids = {}
    for raster in (0, 1):
        device, _, bound = recorded_bound({**params, "RASTER": raster}, 4096, 1024, 1280, 3)
        bound.run()
        (grids[raster],) = [g for name, g, *_ in device.launches if name == "gemm"]
    assert grids[0] == ((5, 32, 1) if not persist else (132, 1, 1))
    assert grids[1] == ((32, 5, 1) if not persist else (132, 1, 1))


def test_raster_configurations_say_why_not():
    assert "RASTER=2" in why_not({"AREG": 1, "XLOAD": 1, "RASTER": 2})
    assert why_not({"AREG": 1, "XLOAD": 1, "RASTER": 1, "MCAST": 2}) is None  # the cluster runs along x
    assert "register-A" in why_not({"RASTER": 1})
    assert why_not({"AREG": 1, "BN": 256, "XLOAD": 1, "RASTER": 1}) is None


def main_loop_sass(params: dict, qtype: str) -> str:
    return nvcc.sass_functions(mmq_wgmma.FAMILY.compile_only(params, qtype).sass)[mmq_wgmma.FAMILY.kernel_name]


@pytest.mark.parametrize("qtype, changes", [("q4_K", True), ("q5_K", True), ("q6_K", False), ("q8_0", False)])
def test_split_decode_moves_the_q4_q5_scale_decode_and_leaves_the_others(qtype, changes):
    """SPLITDEC=1: q4_K and q5_K decode their 6-bit scale pairs in two steps, so their loop changes
    (the byte permutes of the decode stay 8 per row and super-block) and loads the scale words
    twice; q6_K and q8_0 have nothing to split and compile to the same SASS."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1}
    plain, split = main_loop_sass(params, qtype), main_loop_sass({**params, "SPLITDEC": 1}, qtype)
    assert (plain != split) == changes
    if changes:
        count = lambda sass, op: len(re.findall(rf"\b{op}\b", sass))  # noqa: E731
        assert count(split, "HGMMA.64x256x16.F32") == count(plain, "HGMMA.64x256x16.F32")
        assert count(split, "LDS") > count(plain, "LDS")  # (d, dmin) and the first two scale words again


def test_split_decode_configurations_say_why_not():
    assert "SPLITDEC=2" in why_not({"AREG": 1, "XLOAD": 1, "SPLITDEC": 2})
    assert "register-A" in why_not({"SPLITDEC": 1})
    assert why_not({"AREG": 1, "BN": 256, "XLOAD": 1, "SPLITDEC": 1}, "q8_0") is None  # a no-op there


def test_l2_promotion_is_the_tensor_maps_and_compiles_nothing():
    """L2PROMO reaches every TMA map of XLOAD 2 (256 B per L2 miss at 3) and is not a define, so it
    shares its cubin with the default; anything but 2 or 3 is refused."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2}
    device, _, bound = recorded_bound({**params, "L2PROMO": 3}, 4096, 1024, 512, 5, x16_input=1)
    assert [m[-1] for m in device.tensor_maps] == [3] * len(bound.x)
    assert mmq_wgmma.FAMILY.defines({**params, "L2PROMO": 3}, "q4_K") == mmq_wgmma.FAMILY.defines(params, "q4_K")
    assert "L2PROMO=1" in why_not({**params, "L2PROMO": 1})
    assert why_not({**params, "L2PROMO": 3}) is None


STREAMK_TILE = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "RASTER": 1, "STREAMK": 1}


@pytest.mark.parametrize("T, grid, sk", [(2048, (264, 1, 1), 132),  # 256 tiles: one whole wave, 132 sharers
                                         (4096, (528, 1, 1), 132),  # 512 tiles: three whole waves
                                         (1024, (132, 1, 1), 132),  # 128 tiles: no whole wave
                                         (8448, (32, 33, 1), 0)])  # 1056 tiles = 8 waves: the plain grid
def test_stream_k_shares_the_last_wave_out_over_every_sm(T, grid, sk):
    """STREAMK: the grid is the whole waves' tiles plus one CTA per SM slot for the rest, with a workspace
    slot per CTA and piece and a counter per sharer (q4_K 4096 x 14336); tiles in whole waves launch the
    plain grid, with null workspace arguments."""
    device, _, bound = recorded_bound(STREAMK_TILE, 4096, 14336, T, 7)
    bound.run()
    (launch,) = [launch for launch in device.launches if launch[0] == "gemm"]
    _, got_grid, _, args, _ = launch
    assert got_grid == grid and bound.sk_ctas == sk
    assert int(args[-1]) == sk
    if sk:
        assert (args[-3], args[-2]) == (bound.work.ptr, bound.counters.ptr)
        assert bound.work.array.shape == (2 * sk, 128 * 256) and bound.counters.array.tolist() == [0] * sk
    else:
        assert (args[-3], args[-2]) == (0, 0) and bound.work is None


def test_stream_k_leaves_a_split_k_launch_to_its_reduce():
    """Where K is split (few tiles: T=16), STREAMK keeps the plain split grid and its reduce launch."""
    params = {**STREAMK_TILE, "BN": 16, "RAW": 4, "RASTER": 0, "XLOAD": 2}
    device, _, bound = recorded_bound(params, 4096, 14336, 16, 8)
    bound.run()
    names = [launch[0] for launch in device.launches]
    assert bound.splitk > 1 and bound.sk_ctas == 0 and names[-1] == "reduce"


def stream_k_pieces(tiles: int, nsb: int, sk: int) -> dict[int, list[tuple[int, int, int]]]:
    """The kernel's StreamK share (mmq_wgmma_rs.cu) in Python: tile -> [(CTA, first unit, units)]."""
    units = tiles * nsb
    start = [c * units // sk for c in range(sk + 1)]
    pieces: dict[int, list] = {}
    for c in range(sk):
        u = start[c]
        while u < start[c + 1]:
            r, b0 = divmod(u, nsb)
            nb = min(nsb - b0, start[c + 1] - u)
            pieces.setdefault(r, []).append((c, b0, nb))
            u += nb
    return pieces


@pytest.mark.parametrize("tiles, nsb, slots", [(124, 56, 132), (116, 56, 132), (6, 16, 132), (44, 1, 132),
                                               (128, 56, 132), (44, 4, 132)])
def test_stream_k_share_covers_each_tile_once_in_at_most_two_pieces_per_cta(tiles, nsb, slots):
    """With sk = min(slots, units) (the launcher's) every sharer gets units, at most two tiles' worth, so
    two workspace slots each; each tile's super-blocks are covered once, by consecutive CTAs."""
    sk = min(slots, tiles * nsb)
    pieces = stream_k_pieces(tiles, nsb, sk)
    per_cta: dict[int, int] = {}
    for r in range(tiles):
        ctas = [c for c, _, _ in pieces[r]]
        assert ctas == list(range(ctas[0], ctas[-1] + 1))  # the kernel's first .. first + count - 1
        covered = sorted((b0, nb) for _, b0, nb in pieces[r])
        assert [b0 for b0, _ in covered] == list(np.cumsum([0] + [nb for _, nb in covered[:-1]]))
        assert sum(nb for _, nb in covered) == nsb
        for c in ctas:
            per_cta[c] = per_cta.get(c, 0) + 1
    assert sorted(per_cta) == list(range(sk)) and max(per_cta.values()) <= 2


def test_stream_k_compiles_to_counted_pieces_and_only_there():
    plain = {k: v for k, v in STREAMK_TILE.items() if k != "STREAMK"}
    counted = mmq_wgmma.FAMILY.compile_only(STREAMK_TILE, "q4_K").sass
    assert "ATOMG.E.ADD" in counted and "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100" in counted  # the consumers' own barrier
    assert "ATOMG" not in mmq_wgmma.FAMILY.compile_only(plain, "q4_K").sass


def test_stream_k_configurations_say_why_not():
    assert "STREAMK=2" in why_not({**STREAMK_TILE, "STREAMK": 2})
    assert "XLOAD 1 or 2" in why_not({**STREAMK_TILE, "BN": 16, "XLOAD": 3})
    assert "not PERSIST" in why_not({**STREAMK_TILE, "PERSIST": 1})
    assert "no cluster" in why_not({**STREAMK_TILE, "RASTER": 0, "MCAST": 2})
    assert why_not(STREAMK_TILE) is None


def test_the_timing_probe_runs_the_loop_without_the_dequant_math():
    """PROBE=1 hands the raw words to the wgmma: no HADD2 and no HFMA2 math left in the kernel, the loop's loads,
    waits and wgmmas still there; only the register-A kernel has it."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2}
    probe = mmq_wgmma.FAMILY.compile_only({**params, "PROBE": 1}, "q4_K").sass
    real = mmq_wgmma.FAMILY.compile_only(params, "q4_K").sass
    assert "HADD2" in real and "HADD2" not in probe
    assert probe.count("HFMA2") < real.count("HFMA2") // 10  # (ptxas moves constants with HFMA2.MMA)
    assert probe.count("HGMMA") == real.count("HGMMA") and "SYNCS" in probe
    assert "PROBE" in why_not({"PROBE": 1})


@pytest.mark.parametrize("nsplit, width", [(2, 128), (4, 64)])
def test_column_blocks_alternate_their_wgmmas(nsplit, width):
    """NSPLIT column blocks: per k16 slice one wgmma per block, alternating (so no two back-to-back
    wgmmas write the same accumulators), the same registers and no spills."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2}
    compiled = mmq_wgmma.FAMILY.compile_only({**params, "NSPLIT": nsplit}, "q4_K")
    ops = [line.split("HGMMA.")[1].split(",")[0] for line in compiled.sass.splitlines() if "HGMMA." in line]
    assert ops and all(op.startswith(f"64x{width}x16.F32 ") for op in ops)
    accs = [op.split()[1] for op in ops]
    assert all(a != b for a, b in zip(accs, accs[1:]))  # consecutive wgmmas: different accumulator blocks
    assert len(set(accs)) == nsplit
    assert compiled.summary([mmq_wgmma.FAMILY.kernel_name])["spill_store_bytes"] == 0


def test_column_blocks_must_be_wgmma_widths():
    assert why_not({"AREG": 1, "BN": 256, "NSPLIT": 4}) is None
    assert "not a wgmma N" in why_not({"AREG": 1, "BN": 24, "NSPLIT": 2})  # 12
    assert "NSPLIT=3" in why_not({"AREG": 1, "BN": 48, "NSPLIT": 3})
    assert "register-A" in why_not({"BN": 128, "NSPLIT": 2})


def test_the_producer_decodes_the_scales_once_per_cta():
    """PREDEC: the consumers' per-row scale decode (4 x 8 HMUL2 per super-block and row pair, SPLITDEC's two
    halves) leaves the consumer loop; one decoder loop (8 HMUL2) remains in the producer. q6_K and q8_0 have
    no packed scales: the same SASS."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "SPLITDEC": 1}
    for qtype in ("q4_K", "q5_K"):
        plain = mmq_wgmma.FAMILY.compile_only(params, qtype).sass
        predec = mmq_wgmma.FAMILY.compile_only({**params, "PREDEC": 1}, qtype).sass
        assert plain.count("HMUL2") == 32 and predec.count("HMUL2") == 8, qtype
        assert predec.count("STS.128") == plain.count("STS.128") + 2  # the decoder's two 16-byte stores per row
    for qtype in ("q6_K", "q8_0"):
        plain = mmq_wgmma.FAMILY.compile_only(params, qtype)
        assert mmq_wgmma.FAMILY.compile_only({**params, "PREDEC": 1}, qtype).sass == plain.sass


def test_predec_scale_slots_are_counted_in_shared_memory():
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2}
    base = mmq_wgmma.smem_bytes(params, "q4_K")
    assert mmq_wgmma.smem_bytes({**params, "PREDEC": 1}, "q4_K") == base + 128 + 2 * 128 * 32
    assert mmq_wgmma.smem_bytes({**params, "PREDEC": 1}, "q8_0") == mmq_wgmma.smem_bytes(params, "q8_0")
    assert "PREDEC" in why_not({"PREDEC": 1})


def test_bf16_output_is_written_once_per_tile_in_half_the_bytes():
    """BF16_OUTPUT: a bf16 [T, M] output (2 bytes per element), no split K even where the plain launcher would
    split (the tile's CTA writes its outputs itself), 16-bit stores in the SASS; refused where a tile is
    written in pieces."""
    params = {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2}
    _, _, plain = recorded_bound(params, 4096, 4096, 64, 5)
    device, _, bf16 = recorded_bound({**params, "BF16_OUTPUT": 1}, 4096, 4096, 64, 5)
    assert plain.splitk > 1 and plain.out.array.dtype == np.float32
    assert bf16.splitk == 1 and bf16.partial is None and bf16.out.array.dtype == np.uint16
    bf16.run()
    (_, grid, _, args, _), = [launch for launch in device.launches if launch[0].startswith("gemm")]
    assert grid[2] == 1 and args[2] == bf16.out.ptr
    sass = mmq_wgmma.FAMILY.compile_only({**params, "BF16_OUTPUT": 1}, "q4_K").sass
    assert "STG.E.U16" in sass and "STG.E.U16" not in mmq_wgmma.FAMILY.compile_only(params, "q4_K").sass
    for bad in ({"STREAMK": 1, "XLOAD": 1}, {"CLUSTER": 2, "BN": 16}, {"SPLITK": 2}):
        assert "BF16_OUTPUT" in why_not({**params, **bad, "BF16_OUTPUT": 1})


@pytest.mark.parametrize("persist", [0, 1])
def test_staged_bf16_epilogue_stores_whole_sectors_from_shared_memory(persist):
    """EPI=1: per warp and 64 tokens, 4 stmatrix .trans and 4 sixteen-byte loads and stores (the huge
    tile: 16 of each), no local memory (an edge lane's 8 values picked from registers, not a stack
    array), in the persistent loop too; 2 KB of staging per consumer warp; refused without
    BF16_OUTPUT; a tile width not a multiple of 16 tokens keeps the direct stores."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "RASTER": 1, "SPLITDEC": 1,
              "PERSIST": persist, "BF16_OUTPUT": 1}
    direct = mmq_wgmma.FAMILY.compile_only(params, "q4_K")
    staged = mmq_wgmma.FAMILY.compile_only({**params, "EPI": 1}, "q4_K")
    s = staged.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["stack_bytes"] == 0
    count = lambda sass, op: len(re.findall(rf"\b{op}\b", sass))  # noqa: E731
    assert count(direct.sass, "STSM.16.MT88.4") == 0 and count(staged.sass, "STSM.16.MT88.4") == 16
    assert count(staged.sass, "LDS.128") - count(direct.sass, "LDS.128") == 16
    assert count(staged.sass, "STG.E.128") - count(direct.sass, "STG.E.128") == 16
    assert count(staged.sass, "LDL") == count(staged.sass, "STL") == 0
    assert mmq_wgmma.smem_bytes({**params, "EPI": 1}, "q4_K") == mmq_wgmma.smem_bytes(params, "q4_K") + 8 * 2048
    assert "EPI" in why_not({**params, "BF16_OUTPUT": 0, "EPI": 1})
    assert why_not({**params, "BN": 96, "EPI": 1}) is None  # rounds of 32 tokens
    narrow = {**params, "BN": 24, "PERSIST": 0}
    assert why_not({**narrow, "EPI": 1}) is None
    assert mmq_wgmma.smem_bytes({**narrow, "EPI": 1}, "q4_K") == mmq_wgmma.smem_bytes(narrow, "q4_K")
    assert (mmq_wgmma.FAMILY.compile_only({**narrow, "EPI": 1}, "q4_K").sass
            == mmq_wgmma.FAMILY.compile_only(narrow, "q4_K").sass)


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
def test_three_register_sets_keep_two_wgmma_groups_in_flight(qtype):
    """ASETS 3: the loop runs 12 steps (three super-blocks) per trip, so each step's A set is fixed; each step
    waits for the group two steps back (DEPBAR.LE gsb0, 0x2), never for the one before; the 16 more A
    registers fit the consumers' setmaxnreg (no spill, no local memory, ptxas silent). ASETS 2 (the default) waits
    for the group one step back, four times per super-block."""
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "SPLITDEC": 1}
    three = mmq_wgmma.FAMILY.compile_only({**params, "ASETS": 3}, qtype)
    two = mmq_wgmma.FAMILY.compile_only(params, qtype)
    waits = collections.Counter(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", three.sass))
    assert waits["0x2"] == 12 and waits["0x1"] == 0, waits
    assert collections.Counter(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", two.sass))["0x1"] == 4
    assert three.sass.count("HGMMA.") == 3 * two.sass.count("HGMMA.")
    s = three.summary([mmq_wgmma.FAMILY.kernel_name])
    assert s["spill_store_bytes"] == 0 and s["local_mem_ops"] == 0
    assert "warning" not in three.ptxas_log.lower()


def test_three_register_sets_say_why_not():
    assert why_not({"AREG": 1, "BN": 256, "STAGES": 4, "ASETS": 3}) is None
    assert "ASETS=4" in why_not({"AREG": 1, "ASETS": 4})
    assert "STAGES >= 3" in why_not({"AREG": 1, "STAGES": 2, "ASETS": 3})
    assert "register-A" in why_not({"BN": 128, "ASETS": 3})

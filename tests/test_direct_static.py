"""The direct-fragment kernel (kernels/cuda/mmq_direct.cu, lever `direct`) off the GPU: what it
claims is in its SASS. No CTA barrier in the GEMM without XSHARED (and, with the register prefetch, no shared
memory); its main loop holds the instructions the design counts and not many more: per
super-block and warp 32 HMMA (4 chunks x 4 k16 steps x 2 token halves), 64 HFMA2 (one per weight
pair: w = fma(q, sw, -mn)), and about 400-450 in all, against ~790 per 256 k for the 16-token
wgmma kernel's consumer warps and producer (perf log run 29)."""
import collections

import numpy as np
import pytest

from kernels import mmq_direct, nvcc

DEFAULT = mmq_direct.heuristic_params(16)  # a per-warp ring
REGISTER_PREFETCH = {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "RING": 0}


@pytest.fixture(scope="module")
def default_build():
    return mmq_direct.FAMILY.compile_only(DEFAULT, "q4_K")


@pytest.fixture(scope="module")
def register_build():
    return mmq_direct.FAMILY.compile_only(REGISTER_PREFETCH, "q4_K")


def test_the_default_compiles_without_spills_or_barriers(default_build):
    summary = default_build.summary([mmq_direct.FAMILY.kernel_name, mmq_direct.FAMILY.reduce_name])
    assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0
    assert summary["kernels"][mmq_direct.FAMILY.kernel_name]["smem_static_bytes"] == 0  # the ring is dynamic
    ops = nvcc.sass_opcodes(default_build.sass, mmq_direct.FAMILY.kernel_name)
    assert ops["HMMA"] > 0 and ops["LDGSTS"] > 0
    assert not {op for op in ops if op.startswith(("BAR", "SYNCS"))}, ops


def test_the_register_prefetch_uses_no_shared_memory(register_build):
    ops = nvcc.sass_opcodes(register_build.sass, mmq_direct.FAMILY.kernel_name)
    assert ops["HMMA"] > 0
    assert not {op for op in ops if op.startswith(("LDS", "STS", "BAR", "SYNCS", "LDSM", "LDGSTS"))}, ops


def test_the_register_prefetch_loop_holds_the_counted_instructions(register_build):
    before, after = nvcc.sass_main_loop(register_build.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    loop = before + after
    per_sb = {op: n / 2 for op, n in loop.items()}  # the loop multiplies two super-blocks per trip
    assert per_sb["HMMA"] == 32 and per_sb["HFMA2"] == 64
    assert per_sb["LDG"] == 26  # 2 heads + 8 qs words + 16 activation vectors
    assert sum(per_sb.values()) <= 420, sorted(per_sb.items())


def test_the_ring_adds_its_copies_and_no_barrier():
    """RING: per super-block and warp, 5 cp.async (144 16-byte pieces over 32 lanes) and the ten
    shared loads of a thread's two rows, the same dequant and mma; still no CTA barrier, and fewer
    instructions than the register prefetch's copies (one warp-uniform base, fixed offsets)."""
    built = mmq_direct.FAMILY.compile_only({"WARPS": 8, "MIN_BLOCKS": 2, "RING": 4}, "q4_K")
    assert built.summary([mmq_direct.FAMILY.kernel_name])["spill_store_bytes"] == 0
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    loop = before + after
    assert loop["HMMA"] == 32 and loop["HFMA2"] == 64 and loop["LDGSTS"] == 5
    assert loop["LDG"] == 16  # the activations only: the weights come through the ring
    assert sum(loop.values()) <= 450, sorted(loop.items())
    ops = nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)
    assert not {op for op in ops if op.startswith(("BAR", "SYNCS"))}, ops
    assert mmq_direct.smem_bytes({"WARPS": 8, "RING": 4}) == 8 * 4 * 16 * 144


def test_two_m_tiles_per_warp_share_the_activation_loads():
    """MT=2: per super-block twice the mma and dequant of MT=1, the same 16 activation loads, 9 copies
    per lane (288 pieces), and fewer instructions per 16 rows."""
    built = mmq_direct.FAMILY.compile_only({"WARPS": 4, "MIN_BLOCKS": 4, "RING": 2, "XAHEAD": 0, "MT": 2}, "q4_K")
    assert built.summary([mmq_direct.FAMILY.kernel_name])["spill_store_bytes"] == 0
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    loop = before + after
    assert loop["HMMA"] == 64 and loop["HFMA2"] == 128 and loop["LDG"] == 16 and loop["LDGSTS"] == 9
    assert sum(loop.values()) / 2 <= 410, sorted(loop.items())
    assert mmq_direct.full_params({"WARPS": 4, "MT": 2})["BM"] == 128


def test_shared_activations_are_copied_once_and_read_from_shared_memory():
    """XSHARED: the CTA's warps copy its K range of activations into shared memory with cp.async (the first
    super-block in a group of its own, so the first multiply waits for 8 KB only), and the loop's 16 activation
    vectors per super-block are shared loads (LDS.128): no global load is left in it. Its one CTA barrier
    (taken in the first two trips only, when the two groups have landed) is the kernel's only one."""
    params = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8}
    built = mmq_direct.FAMILY.compile_only(params, "q4_K")
    assert built.summary([mmq_direct.FAMILY.kernel_name])["spill_store_bytes"] == 0
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    loop = before + after
    assert loop["HMMA"] == 32 and loop["HFMA2"] == 64 and loop["LDGSTS"] == 5 and "LDG" not in loop
    assert loop["BAR"] == 1 and sum(loop.values()) <= 430, sorted(loop.items())
    sass = nvcc.sass_functions(built.sass)[mmq_direct.FAMILY.kernel_name]
    assert sass.count("LDS.128") >= 16
    assert sass.count("BAR.SYNC") == 1, [line for line in sass.splitlines() if "BAR" in line]
    assert mmq_direct.smem_bytes(params) == 8 * 2 * 16 * 144 + 16 * (8 * 512 + 64)


@pytest.mark.parametrize("params", [{"WARPS": 8, "MIN_BLOCKS": 1, "XAHEAD": 0}, {"WARPS": 4, "MIN_BLOCKS": 3, "XAHEAD": 0},
                                    {"WARPS": 2, "MIN_BLOCKS": 4, "XAHEAD": 0, "PDL": 1},
                                    {"WARPS": 4, "MIN_BLOCKS": 5, "XAHEAD": 0, "PDL": 2, "RING": 2}])
def test_other_spill_free_configurations_compile(params):
    built = mmq_direct.FAMILY.compile_only(params, "q4_K")
    assert built.summary([mmq_direct.FAMILY.kernel_name])["spill_store_bytes"] == 0


@pytest.mark.parametrize("params, qtype, words", [
    ({}, "q6_K", "no direct-fragment decoder"),
    ({"WARPS": 3}, "q4_K", "WARPS=3"),
    ({"PDL": 3}, "q4_K", "PDL=3"),
    ({"XAHEAD": 3}, "q4_K", "XAHEAD=3"),
    ({"MIN_BLOCKS": 9}, "q4_K", "MIN_BLOCKS=9"),
    ({"RING": 1}, "q4_K", "RING=1"),
    ({"L2PF": 1}, "q4_K", "L2PF=1"),
    ({"MT": 2}, "q4_K", "MT=2"),
    ({"MT": 3, "RING": 2}, "q4_K", "MT=3"),
    ({"RING": 8, "WARPS": 16}, "q4_K", "shared memory"),
    ({"XSHARED": 4}, "q4_K", "XSHARED=4"),  # the register path has no shared memory to stage into
    ({"XSHARED": 4, "RING": 2, "XAHEAD": 1}, "q4_K", "XSHARED=4"),
    ({"XSHARED": 17, "RING": 2, "XAHEAD": 0}, "q4_K", "XSHARED=17"),
    ({"XSHARED": 16, "RING": 2, "XAHEAD": 0, "WARPS": 24}, "q4_K", "shared memory"),
    ({"FIXUP": 2}, "q4_K", "FIXUP=2"),
    ({"MINSUM": 2}, "q4_K", "MINSUM=2"),
    ({"MINSUM": 1, "X16_INPUT": 1}, "q4_K", "not X16_INPUT"),  # f16 rows in: no pass writes the sums
    ({"ATOMIC": 3}, "q4_K", "ATOMIC=3"),
    ({"ATOMIC": 1, "X16_INPUT": 1}, "q4_K", "not X16_INPUT"),  # no pass to zero C
    ({"ATOMIC": 1, "FIXUP": 1, "RING": 2, "XAHEAD": 0}, "q4_K", "not with FIXUP"),
])
def test_invalid_configurations_say_why(params, qtype, words):
    assert words in mmq_direct.invalid_reason(params, qtype)


def test_a_valid_configuration_has_no_reason():
    assert mmq_direct.invalid_reason(DEFAULT, "q4_K") is None


@pytest.mark.parametrize("pdl", [0, 1, 2])
@pytest.mark.parametrize("x16_input", [0, 1])
def test_the_launcher_grid_split_and_dependent_launches(pdl, x16_input):
    """On a RecordingDevice: grid (row tiles, K splits, token tiles of 16), the split chosen to fill
    one wave of 4 CTAs per SM, the pass (not with f16 input), the GEMM a dependent of the pass
    (PDL >= 1, where there is one) and the reduce a dependent of the GEMM (PDL 2)."""
    import numpy as np

    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 4096, 14336, 20
    rng = np.random.default_rng(pdl)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    device, bound = recorded_bound(mmq_direct.FAMILY, {**DEFAULT, "PDL": pdl}, problem, 114, X16_INPUT=x16_input)
    assert bound.grid == (M // 64, bound.splitk, 2) and bound.splitk == 4  # 64 x 2 tiles, 528 slots
    bound.run()
    names = [name for name, *_ in device.launches]
    gemm = "mmq_direct_gemm (dependent)" if pdl and not x16_input else "gemm"
    want = ([] if x16_input else ["f32_to_f16"]) + [gemm, "mmq_direct_splitk_reduce (dependent)" if pdl == 2 else "reduce"]
    assert names == want


@pytest.mark.parametrize("xshared, splitk, want", [(7, 0, 8), (4, 0, 14), (7, 16, 16), (7, 3, 8), (0, 3, 3)])
def test_the_split_leaves_each_cta_a_range_its_staged_activations_hold(xshared, splitk, want):
    """XSHARED = n: K is split at least ceil(super-blocks / n) ways, above the wave-filling choice (8 at
    4096x14336, T=16, 8 warps x 2 CTAs) or an asked-for SPLITK, never below them."""
    import numpy as np

    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 4096, 14336, 16
    rng = np.random.default_rng(xshared)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    params = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XAHEAD": 0, "XSHARED": xshared, "SPLITK": splitk}
    _, bound = recorded_bound(mmq_direct.FAMILY, params, problem, 77)
    assert bound.splitk == want and bound.grid == (M // 128, want, 1)
    if xshared:
        assert -(-(K // 256) // want) <= xshared  # the longest range fits the staged rows


def test_the_last_cta_of_a_tile_sums_the_splits_without_a_reduce_launch():
    """FIXUP=1 on a RecordingDevice: the GEMM gets the output and one arrival counter per (row tile, token
    tile), all zero, after its usual arguments, and no reduce kernel follows it; the kernel compiles
    spill-free with the same main loop, and its split sum requests every split's value before adding."""
    import numpy as np

    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 4096, 14336, 20
    rng = np.random.default_rng(7)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    params = {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "FIXUP": 1}
    device, bound = recorded_bound(mmq_direct.FAMILY, params, problem, 80)
    assert bound.splitk == 7 and bound.grid == (32, 7, 2)  # 64 tiles x 7 splits fill 2 CTAs on 132 SMs once
    bound.run()
    names = [name for name, *_ in device.launches]
    assert names == ["f32_to_f16", "mmq_direct_gemm (dependent)"]
    args = device.launches[1][3]
    assert args[-2:] == (bound.out.ptr, bound.counters.ptr) and args[2] == bound.partial.ptr  # (W, X, partial, ...)
    assert bound.counters.array.shape == (64,) and not bound.counters.array.any()

    built = mmq_direct.FAMILY.compile_only(params, "q4_K")
    assert built.summary([mmq_direct.FAMILY.kernel_name])["spill_store_bytes"] == 0
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    assert (before + after)["HMMA"] == 32 and sum((before + after).values()) <= 430
    ops = nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)
    assert ops["ATOMG"] + ops.get("RED", 0) >= 1 and ops["LDG"] >= 16


TINY = {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8}  # the T <= 16 champion's shape


@pytest.mark.parametrize("params, most", [(TINY, 375), ({"WARPS": 4, "MIN_BLOCKS": 4, "RING": 2, "XAHEAD": 0, "MT": 2}, 720),
                                          (REGISTER_PREFETCH, 2 * 360)])
def test_minsum_takes_the_min_out_of_the_dequant(params, most):
    """MINSUM=1: per m16 tile and super-block the same 64 HFMA2 (one per weight pair, now on 1024 + q) and two
    more HMMA (the rank-1 min term, one per token half), but the HSUB2 (an HADD2 in SASS) that turned each nibble
    pair into f16 is gone: at most 10 HADD2 left per tile (the scale and min decode), against 80 without it, and
    fewer instructions in all, spill-free. MINSUM=0 compiles the loop it had."""
    def loop_of(minsum):
        built = mmq_direct.FAMILY.compile_only({**params, "MINSUM": minsum}, "q4_K")
        summary = built.summary([mmq_direct.FAMILY.kernel_name])
        assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0, summary
        before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
        return before + after, built

    plain, _ = loop_of(0)
    minsum, built = loop_of(1)
    tiles = plain["HMMA"] // 32  # m16 tiles x super-blocks per trip
    assert minsum["HMMA"] == plain["HMMA"] + 2 * tiles and minsum["HFMA2"] == plain["HFMA2"] == 64 * tiles
    assert plain["HADD2"] == 80 * tiles and minsum["HADD2"] <= 10 * tiles, (plain["HADD2"], minsum["HADD2"])
    assert sum(minsum.values()) <= most < sum(plain.values()), (sum(minsum.values()), sum(plain.values()))
    sums = nvcc.sass_opcodes(built.sass, "direct_pass")  # the pass: a butterfly of 3 shuffles per sub-block
    assert sums["SHFL"] >= 3 and sums["F2FP"] >= 2 and sums["STG"] >= 3


def test_minsum_launches_the_sums_pass_and_hands_its_sums_to_the_gemm():
    """On a RecordingDevice: MINSUM=1 runs direct_pass (x, the f16 rows, a [T, K/16] f16 buffer of hi and lo
    sums, C, n4, no floats to zero) instead of f32_to_f16, and the GEMM, still its dependent launch, gets the rows as its activations and
    the sums as its last argument; a weight whose d would overflow the -1024 d sc offset is refused before any launch."""
    import numpy as np

    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 512, 2048, 16
    rng = np.random.default_rng(11)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    device, bound = recorded_bound(mmq_direct.FAMILY, {**TINY, "MINSUM": 1}, problem, 84)
    rows, sums = bound.scratch
    assert rows.array.shape == (T, K) and rows.array.dtype == np.float16
    assert sums.array.shape == (T, K // 16) and sums.array.dtype == np.float16
    bound.run()
    (pass_name, _, _, pass_args, _), (gemm_name, _, _, gemm_args, _) = device.launches[:2]
    assert (pass_name, gemm_name) == ("direct_pass", "mmq_direct_gemm (dependent)")
    assert pass_args == (bound.x[0].ptr, rows.ptr, sums.ptr, bound.out.ptr, T * K // 4, 0)
    assert gemm_args[1] == rows.ptr and gemm_args[-1] == sums.ptr

    assert mmq_direct.FAMILY.f16_input({**TINY, "MINSUM": 1})["MINSUM"] == 0  # f16 rows in: the min in the dequant
    # d = 65/64: f16(63 d) rounds to 64 and -1024 x 64 overflows f16; the f16 just below it is the largest d that runs
    for d, refused in [(1.5, True), (65 / 64, True), (float(np.nextafter(np.float16(65 / 64), np.float16(0))), False)]:
        big = problem.w_packed.copy()
        big.reshape(M, -1, 144)[3, 5, :2] = np.frombuffer(np.float16(d).tobytes(), np.uint8)
        big_problem = Problem(problem.workload, big, problem.x)
        if refused:
            with pytest.raises(ValueError, match="MINSUM=0"):
                recorded_bound(mmq_direct.FAMILY, {**TINY, "MINSUM": 1}, big_problem, 84)
            recorded_bound(mmq_direct.FAMILY, TINY, big_problem, 84)  # MINSUM=0 runs it
        else:
            recorded_bound(mmq_direct.FAMILY, {**TINY, "MINSUM": 1}, big_problem, 84)
            assert np.isfinite(np.float16(np.float16(d) * np.float16(63)) * np.float16(-1024))


@pytest.mark.parametrize("minsum", [0, 1])
def test_atomic_splits_add_into_the_output_with_no_reduce(minsum):
    """ATOMIC=1 on a RecordingDevice, 4096x14336 at T=20 (7 splits): no partial buffer; the pass (direct_pass) zeroes
    all T M floats of C, which the GEMM, its dependent launch, gets as its output; no reduce follows. Unsplit (K = 256),
    nothing is zeroed and the GEMM stores. The kernel's main loop is ATOMIC=0's (within two instructions); its epilogue adds each lane's four rows
    with one 16-byte red after 4 shuffles per token half (a butterfly transpose), with no local memory (and has the scalar reds for M not a multiple of 4)."""
    import numpy as np

    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    params = {**TINY, "ATOMIC": 1, "MINSUM": minsum}
    rng = np.random.default_rng(12)
    for M, K, T, splits in [(4096, 14336, 20, 7), (4096, 256, 20, 1)]:
        problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                          rng.standard_normal((T, K)).astype(np.float32))
        device, bound = recorded_bound(mmq_direct.FAMILY, params, problem, 84)
        assert bound.splitk == splits and bound.partial is None
        bound.run()
        assert [name for name, *_ in device.launches] == ["direct_pass", "mmq_direct_gemm (dependent)"]
        pass_args, gemm_args = device.launches[0][3], device.launches[1][3]
        sums = bound.scratch[1].ptr if minsum else 0
        assert pass_args == (bound.x[0].ptr, bound.scratch[0].ptr, sums, bound.out.ptr, T * K // 4,
                             T * M if splits > 1 else 0)
        assert gemm_args[2] == bound.out.ptr and len(gemm_args) == 7 + minsum
    assert mmq_direct.FAMILY.f16_input(params)["ATOMIC"] == 0  # f16 rows in: no pass to zero C, the reduce adds

    def built_loop(atomic):
        built = mmq_direct.FAMILY.compile_only({**params, "ATOMIC": atomic}, "q4_K")
        summary = built.summary([mmq_direct.FAMILY.kernel_name])  # the static gate refuses any local memory
        assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0, summary
        before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
        return before + after, built

    (plain, _), (atomic, built) = built_loop(0), built_loop(1)
    assert atomic["HMMA"] == plain["HMMA"] and atomic["HFMA2"] == plain["HFMA2"]
    assert abs(sum(atomic.values()) - sum(plain.values())) <= 2, (atomic - plain, plain - atomic)
    sass = nvcc.sass_functions(built.sass)[mmq_direct.FAMILY.kernel_name]
    ops = nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)
    assert sass.count("REDG.E.ADD.F32x4") == 2 and ops["SHFL"] == 8 and ops["REDG"] == 2 + 8, dict(ops)


PROBED = {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "ATOMIC": 1}


def test_l2pf_2_adds_one_bulk_l2_prefetch_before_the_loop_and_leaves_the_loop_alone():
    """L2PF 2: each warp's rows asked of L2 once (cp.async.bulk.prefetch.L2: UBLKPF), not in the loop; the loop as L2PF 0's
    (within two address instructions)."""
    plain, bulk = (mmq_direct.FAMILY.compile_only({**PROBED, "L2PF": v}, "q4_K").sass for v in (0, 2))
    assert "UBLKPF" not in nvcc.sass_opcodes(plain, mmq_direct.FAMILY.kernel_name)
    assert nvcc.sass_opcodes(bulk, mmq_direct.FAMILY.kernel_name)["UBLKPF"] >= 1
    loop = [sum(nvcc.sass_main_loop(sass, mmq_direct.FAMILY.kernel_name, "HMMA"), collections.Counter()) for sass in (plain, bulk)]
    moved = (loop[0] - loop[1]) + (loop[1] - loop[0])  # (the scheduler may move an address IMAD or two)
    assert "UBLKPF" not in loop[1] and sum(moved.values()) <= 2 and set(moved) <= {"IMAD", "IADD3", "MOV"}, moved
    assert "L2PF" in mmq_direct.invalid_reason({"RING": 0, "L2PF": 2}, "q4_K")


def test_carveout_is_a_launch_choice_with_the_same_code():
    """CARVEOUT 1 compiles to the champion's SASS (its own module, which holds the carveout attribute)."""
    plain, carve = (mmq_direct.FAMILY.compile_only({**PROBED, "CARVEOUT": v}, "q4_K") for v in (0, 1))
    assert carve.key != plain.key and carve.sass == plain.sass
    assert "CARVEOUT" in mmq_direct.invalid_reason({**PROBED, "CARVEOUT": 2}, "q4_K")


def test_the_fixed_cost_and_stream_only_probes():
    """PROBE 5 keeps the launch's fixed work (the prologue's copies, the epilogue's reds) and drops the loop; PROBE 6's
    loop streams the weights through the ring as the kernel's does and computes nothing."""
    real = nvcc.sass_opcodes(mmq_direct.FAMILY.compile_only(PROBED, "q4_K").sass, mmq_direct.FAMILY.kernel_name)
    fixed = nvcc.sass_opcodes(mmq_direct.FAMILY.compile_only({**PROBED, "PROBE": 5}, "q4_K").sass,
                              mmq_direct.FAMILY.kernel_name)
    assert "HMMA" not in fixed and "HFMA2" not in fixed and fixed["REDG"] == real["REDG"], dict(fixed)
    assert 0 < fixed["LDGSTS"] < real["LDGSTS"] and fixed["BAR"] >= 1  # the first slot and the staged activations
    built = mmq_direct.FAMILY.compile_only({**PROBED, "PROBE": 6}, "q4_K")
    ops = nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "DEPBAR")
    loop = before + after  # (unrolled by the compiler: one FADD per super-block)
    assert loop["FADD"] >= 1 and loop["LDGSTS"] == 5 * loop["FADD"], dict(loop)
    assert "HMMA" not in ops and "HFMA2" not in ops and ops["REDG"] == real["REDG"], dict(ops)


def test_each_timing_probe_leaves_its_stage_out_of_the_loop():
    """PROBE 1..4 (timing probes, wrong numbers) each drop one stage of the main loop and keep the rest: 1 the
    ring's copies (LDGSTS), 2 the dequant math (HFMA2), 3 the activations' shared loads, 4 the mma (HMMA)."""
    def loop(probe):
        built = mmq_direct.FAMILY.compile_only({**PROBED, "PROBE": probe}, "q4_K")
        ops = nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)
        before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "LDS")
        return before + after, ops

    real, real_ops = loop(0)
    copies, _ = loop(1)
    assert real["LDGSTS"] == 5 and copies["LDGSTS"] == 0 and copies["HMMA"] == real["HMMA"] == 34
    nodeq, _ = loop(2)
    assert real["HFMA2"] == 64 and nodeq["HFMA2"] == 0 and nodeq["HMMA"] == 34 and nodeq["LDGSTS"] == 5
    nox, _ = loop(3)
    assert real["LDS"] - nox["LDS"] == 16 and nox["HFMA2"] == 64  # the 16 LDS.128 of activations per super-block
    _, nomma_ops = loop(4)
    assert real_ops["HMMA"] == 34 and "HMMA" not in nomma_ops and nomma_ops["HFMA2"] >= 64
    assert "PROBE" in mmq_direct.invalid_reason({**PROBED, "PROBE": 7}, "q4_K")
    assert "PROBE" in mmq_direct.invalid_reason({**PROBED, "WG": 1, "PROBE": 5}, "q4_K")
    assert "PROBE" in mmq_direct.invalid_reason({"RING": 0, "PROBE": 1}, "q4_K")


def niblop_pairs(words: np.ndarray) -> tuple:
    """The four biased f16 pairs NIBLOP's LOP3s make of each 32-bit word, as numpy reads the bits: low nibbles of
    bytes 0, 2 and 1, 3 (bias 1024), high nibbles of the same (bias 64)."""
    def pair(w, mask, bias):
        return ((w & mask) | bias).astype(np.uint32).view(np.float16).reshape(-1, 2).astype(np.float64)
    return (pair(words, 0x000F000F, 0x64006400), pair(words >> 8, 0x000F000F, 0x64006400),
            pair(words, 0x00F000F0, 0x54005400), pair(words >> 8, 0x00F000F0, 0x54005400))


def test_niblop_pairs_are_the_biased_nibbles_and_dequantize_as_minsum_does():
    """The bit trick on random words: each pair is (1024 + q) or (64 + q) of the bytes it names, and
    fma(bias + q, sw, f16(-bias sw)) rounded once is f16(q sw), MINSUM's weight, for every f16 scale |sw| < 64."""
    rng = np.random.default_rng(5)
    words = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    b = words.view(np.uint8).reshape(-1, 4).astype(np.float64)
    lo02, lo13, hi02, hi13 = niblop_pairs(words)
    np.testing.assert_array_equal(lo02, 1024 + (b[:, [0, 2]] % 16))
    np.testing.assert_array_equal(lo13, 1024 + (b[:, [1, 3]] % 16))
    np.testing.assert_array_equal(hi02, 64 + (b[:, [0, 2]] // 16))
    np.testing.assert_array_equal(hi13, 64 + (b[:, [1, 3]] // 16))
    sw = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    sw = sw[np.isfinite(sw) & (np.abs(sw) < 64)]
    q = np.arange(16, dtype=np.float64)[:, None]
    want = (q * sw.astype(np.float64)).astype(np.float16)
    for bias in (1024, 64):
        offset = (sw * np.float16(-bias)).astype(np.float64)  # HMUL2's product: exact, a power of two
        got = ((bias + q) * sw.astype(np.float64) + offset).astype(np.float16)  # the fma: exact, then one rounding
        # (values: q = 0 under a negative sw is +0 here, -0 in f16(q sw), as in MINSUM's dequant; they sum alike)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(got.view(np.uint16)[want != 0], want.view(np.uint16)[want != 0])


def test_niblop_makes_each_pair_with_one_lop3():
    """NIBLOP: the loop's 64 PRMT of the byte pairs become 64 LOP3 (mask immediate, bias register), with the same HFMA2
    and HMMA and 28+ fewer instructions per super-block, no spills; the pass permutes its rows (2 PRMT); MINSUM is
    required, and f16 input (no pass) runs without it."""
    def built(niblop):
        b = mmq_direct.FAMILY.compile_only({**PROBED, "NIBLOP": niblop}, "q4_K")
        summary = b.summary([mmq_direct.FAMILY.kernel_name])
        assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0
        before, after = nvcc.sass_main_loop(b.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
        return before + after, nvcc.sass_functions(b.sass)

    (plain, plain_fns), (niblop, niblop_fns) = built(0), built(1)
    assert plain["PRMT"] >= 78 and niblop["PRMT"] <= plain["PRMT"] - 64
    assert niblop["LOP3"] >= plain["LOP3"] + 32 and niblop["HFMA2"] == plain["HFMA2"] == 64
    assert niblop["HMMA"] == plain["HMMA"] == 34 and sum(niblop.values()) <= sum(plain.values()) - 28
    fused = [line for line in niblop_fns[mmq_direct.FAMILY.kernel_name].splitlines() if "LOP3.LUT" in line and "0xea" in line]
    assert len([line for line in fused if "0xf000f," in line]) >= 32 and len([line for line in fused if "0xf000f0," in line]) >= 32
    # the biases the numpy test above checks, held in registers, and the offsets' HMUL2 by (-1024, -64)
    kernel = niblop_fns[mmq_direct.FAMILY.kernel_name]
    assert "0x64006400 ;" in kernel and "0x54005400 ;" in kernel and kernel.count("HMUL2") >= 2
    assert "-64, -1024" in kernel and "-64, -1024" not in plain_fns[mmq_direct.FAMILY.kernel_name]
    assert niblop_fns["direct_pass"].count("PRMT") == plain_fns["direct_pass"].count("PRMT") + 2
    assert "NIBLOP" in mmq_direct.invalid_reason({**PROBED, "MINSUM": 0, "NIBLOP": 1}, "q4_K")
    assert mmq_direct.FAMILY.f16_input({**PROBED, "NIBLOP": 1})["NIBLOP"] == 0


def niblop_order(rows: np.ndarray) -> np.ndarray:
    """NIBLOP's pass output: each 4 consecutive activations of a row stored as k 0, 2, 1, 3."""
    return rows.reshape(rows.shape[0], -1, 4)[..., [0, 2, 1, 3]].reshape(rows.shape)


def wg_order(rows: np.ndarray, niblop: bool) -> np.ndarray:
    """WG's pass output, as direct_pass computes it: the 4 activations of float4 group q of a 64-k chunk (q = 8 h + 2 t
    + o, k 4 q .. 4 q + 3) go to k16 block s = 2 h + o as two pairs, at halves 16 s + 2 t and 16 s + 2 t + 8."""
    T, K = rows.shape
    out = np.empty_like(rows)
    groups = rows.reshape(T, K // 64, 16, 4)
    if niblop:
        groups = groups[..., [0, 2, 1, 3]]
    dst = out.reshape(T, K // 64, 64)
    for q in range(16):
        pos = 16 * (2 * (q >> 3) + (q & 1)) + 2 * ((q >> 1) & 3)
        dst[:, :, pos:pos + 2], dst[:, :, pos + 8:pos + 10] = groups[:, :, q, :2], groups[:, :, q, 2:]
    return out


def fragment_k(niblop: bool) -> np.ndarray:
    """From the A fragments' side: the real k (of a 64-k chunk) that step s pairs with the mma's k kappa. Thread t's
    registers in step s hold the low (s < 2) or high nibbles of bytes 8 t + 4 (s & 1) + b: a0 pairs bytes 0, 1 at
    kappa 2 t, 2 t + 1 and a2 bytes 2, 3 at 2 t + 8, 2 t + 9 (NIBLOP: a0 bytes 0, 2, a2 bytes 1, 3). Byte b's low
    nibble is k b of the chunk's first 32, its high nibble k 32 + b."""
    k = np.empty((4, 16), int)
    for s in range(4):
        for t in range(4):
            for reg, kappa in ((0, 2 * t), (1, 2 * t + 8)):
                for e in range(2):
                    b = (2 * e + reg) if niblop else (2 * reg + e)
                    k[s, kappa + e] = 32 * (s >= 2) + 8 * t + 4 * (s & 1) + b
    return k


@pytest.mark.parametrize("niblop", [False, True])
def test_wg_stages_each_k16_block_in_the_fragments_k_order(niblop):
    """The pass's WG order puts at (k16 block s, mma k kappa) the activation of the real k the A fragments pair there
    (derived separately, from the fragment layout), for every k of a chunk once."""
    chunk = np.arange(64, dtype=np.float32)[None, :]
    staged = wg_order(chunk, niblop).reshape(4, 16)
    np.testing.assert_array_equal(staged, fragment_k(niblop))
    assert sorted(staged.ravel()) == list(range(64))
    rows = np.random.default_rng(3).standard_normal((3, 512)).astype(np.float16)
    assert sorted(wg_order(rows, niblop)[1, 64:128]) == sorted(rows[1, 64:128])


WG = {**PROBED, "WG": 1}


def test_wg_issues_one_wgmma_per_k16_step():
    """WG: per super-block 16 HGMMA.64x16x16 (A from registers) in 4 groups with one in flight (wait_group 1), MINSUM's 2
    HMMA, no activation loads through registers (only the weights' LDS), no spills or local memory, sm_90a; the same
    count of dequant HFMA2. It needs XSHARED, MINSUM, MT 1 and whole warpgroups; f16 input runs without it."""
    built = mmq_direct.FAMILY.compile_only(WG, "q4_K")
    summary = built.summary([mmq_direct.FAMILY.kernel_name])
    assert summary["sass_arch"] == "sm_90a" and summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HGMMA")
    loop = before + after
    plain_before, plain_after = nvcc.sass_main_loop(mmq_direct.FAMILY.compile_only(PROBED, "q4_K").sass,
                                                    mmq_direct.FAMILY.kernel_name, "HMMA")
    plain = plain_before + plain_after
    assert loop["HGMMA"] == 16 and loop["HMMA"] == 2 and loop["HFMA2"] == plain["HFMA2"] == 64
    kernel = nvcc.sass_functions(built.sass)[mmq_direct.FAMILY.kernel_name]
    plain_kernel = nvcc.sass_functions(mmq_direct.FAMILY.compile_only(PROBED, "q4_K").sass)[mmq_direct.FAMILY.kernel_name]
    # the 16 LDS.128 of activations per super-block are gone: the two left read the rows' scale heads
    assert kernel.count("LDS.128") == 2 and plain_kernel.count("LDS.128") == 18
    assert kernel.count("LDS.64") == plain_kernel.count("LDS.64") == 8  # the weights' words
    assert kernel.count("HGMMA.64x16x16.F32 ") >= 16 and "WARPGROUP.DEPBAR.LE gsb0, 0x1" in kernel
    assert mmq_direct.FAMILY.target_arch("sm_90", WG) == "sm_90a" and mmq_direct.FAMILY.target_arch("sm_90", PROBED) == "sm_90"
    for bad in ({"XSHARED": 0, "XAHEAD": 1}, {"MINSUM": 0, "ATOMIC": 0}, {"WARPS": 6}, {"MT": 2}):
        assert "WG" in mmq_direct.invalid_reason({**WG, **bad}, "q4_K"), bad
    assert mmq_direct.FAMILY.f16_input(WG)["WG"] == 0
    assert mmq_direct.smem_bytes(WG) == 2 * 8 * 2304 + 8 * 4 * 2048 + 1024


FUSED = {**PROBED, "ATOMIC": 0, "XFUSE": 1, "CLUSTER": 7}  # one launch: the conversion in the GEMM, the splits in a cluster


def test_xfuse_launches_the_gemm_alone_on_the_f32_activations():
    """XFUSE=1 on a RecordingDevice, 4096x14336 at T=20: one launch, the GEMM (not a dependent: no pass to follow), its
    activations the f32 rows themselves, no sums argument, no scratch buffers; with CLUSTER=7 no partial buffer either
    (the cluster sums the 7 splits), with FIXUP the last CTA sums the partial buffer and with neither the reduce kernel
    follows. CLUSTER
    splits K exactly its CTAs' ways, and a K range XSHARED cannot hold is refused before any launch."""
    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 4096, 14336, 20
    rng = np.random.default_rng(13)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    for extra, launches in [({}, ["gemm"]), ({"CLUSTER": 1, "FIXUP": 1}, ["gemm"]),
                            ({"CLUSTER": 1, "PDL": 0}, ["gemm", "reduce"])]:
        device, bound = recorded_bound(mmq_direct.FAMILY, {**FUSED, **extra}, problem, 112)
        assert bound.scratch == [] and bound.splitk == 7 and (bound.partial is None) == (extra == {})
        bound.run()
        assert [name for name, *_ in device.launches] == launches
        grid, gemm_args = device.launches[0][1], device.launches[0][3]
        assert gemm_args[1] == bound.x[0].ptr and grid == (32, 7, 2)
        assert len(gemm_args) == 7 + 2 * ("FIXUP" in extra)  # (C_sum, counters)
    assert mmq_direct.FAMILY.f16_input(FUSED)["XFUSE"] == 0  # f16 rows in: nothing to convert
    with pytest.raises(ValueError, match="CLUSTER=4"):  # 56 super-blocks > 4 CTAs x 8
        recorded_bound(mmq_direct.FAMILY, {**FUSED, "CLUSTER": 4}, problem, 112)


@pytest.mark.parametrize("params, words", [
    ({**FUSED, "XSHARED": 0, "XAHEAD": 1}, "XFUSE"), ({**FUSED, "CLUSTER": 1, "ATOMIC": 1}, "XFUSE"),
    ({**FUSED, "CLUSTER": 1, "WG": 1}, "XFUSE"), ({**FUSED, "XFUSE": 2}, "XFUSE"),
    ({**FUSED, "CLUSTER": 9}, "CLUSTER"), ({**FUSED, "FIXUP": 1}, "CLUSTER"), ({**FUSED, "XFUSE": 0, "ATOMIC": 1}, "CLUSTER"),
    ({**FUSED, "WARPS": 24, "MIN_BLOCKS": 1, "XSHARED": 2}, "partial tile"),
])
def test_xfuse_and_cluster_refuse_what_they_cannot_run(params, words):
    assert words in (mmq_direct.invalid_reason(params, "q4_K") or "")


def test_xfuse_converts_in_the_gemm_and_the_cluster_sums_the_splits_in_shared_memory():
    """The SASS of each: XFUSE waits on mbarriers (SYNCS), converts (F2FP: 2 per 4 activations) and sums (the butterfly's
    3 SHFL per share float4) and copies only the weights with cp.async (the pass's rows are no longer staged by it);
    CLUSTER arrives on and waits for the cluster barrier twice and stores C with no red; neither spills."""
    def build(params):
        built = mmq_direct.FAMILY.compile_only(params, "q4_K")
        summary = built.summary([mmq_direct.FAMILY.kernel_name])
        assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0, summary
        return nvcc.sass_opcodes(built.sass, mmq_direct.FAMILY.kernel_name)

    staged, fused, clustered = (build(p) for p in ({**FUSED, "XFUSE": 0, "CLUSTER": 1, "FIXUP": 1},
                                                    {**FUSED, "CLUSTER": 1, "FIXUP": 1}, FUSED))
    assert fused["SYNCS"] >= 2 and not staged["SYNCS"]
    assert fused["F2FP"] >= 2 * 4 and fused["SHFL"] >= 3 * 4 and not staged["F2FP"]
    assert fused["LDGSTS"] < staged["LDGSTS"] and fused["LDG"] > staged["LDG"]
    assert clustered["UCGABAR_ARV"] == 2 and clustered["UCGABAR_WAIT"] == 2 and not clustered["REDG"]
    assert not fused["UCGABAR_ARV"]


def test_atomic_2_zeroes_c_in_the_gemm_and_runs_with_no_pass():
    """ATOMIC=2 on a RecordingDevice, 4096x14336 at T=20 (7 splits): with XFUSE one launch, no partial buffer, no reduce; the
    GEMM's last two arguments a zeroed flag per (row tile, token tile) and the launch's epoch, 1, 2, 3 on successive runs.
    After the pass (no XFUSE) the pass zeroes nothing (n_zero 0); on f16 rows (X16_INPUT) it still runs, with no pass. The SASS
    has ATOMIC 1's reds and the release store and acquire load of the flag."""
    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 4096, 14336, 20
    rng = np.random.default_rng(14)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    params = {**PROBED, "ATOMIC": 2, "XFUSE": 1}
    device, bound = recorded_bound(mmq_direct.FAMILY, params, problem, 110)
    assert bound.partial is None and bound.splitk == 7 and bound.flags.array.shape == (32 * 2,)
    assert not bound.flags.array.any()
    for epoch in (1, 2, 3):
        bound.run()
        name, _, _, args, _ = device.launches[-1]
        assert name == "gemm" and args[-2:] == (bound.flags.ptr, epoch) and args[1] == bound.x[bound.current].ptr
    assert len(device.launches) == 3
    device, bound = recorded_bound(mmq_direct.FAMILY, {**params, "XFUSE": 0}, problem, 110)
    bound.run()
    assert [n for n, *_ in device.launches] == ["direct_pass", "mmq_direct_gemm (dependent)"]
    assert device.launches[0][3][-1] == 0  # the pass zeroes nothing
    f16 = mmq_direct.FAMILY.f16_input({**PROBED, "ATOMIC": 2, "MINSUM": 0})
    assert f16["ATOMIC"] == 2 and mmq_direct.invalid_reason(f16, "q4_K") is None
    assert "ATOMIC" in mmq_direct.invalid_reason({**PROBED, "ATOMIC": 3}, "q4_K")
    assert "ATOMIC" in mmq_direct.invalid_reason({**PROBED, "ATOMIC": 2, "FIXUP": 1}, "q4_K")

    sass = nvcc.sass_functions(mmq_direct.FAMILY.compile_only(params, "q4_K").sass)[mmq_direct.FAMILY.kernel_name]
    assert sass.count("REDG.E.ADD.F32x4") == 2 and "STG.E.STRONG.GPU" in sass and "LDG.E.STRONG.GPU" in sass


def test_wtile_uploads_the_weights_in_warp_tiles_and_streams_each_slot_as_one_range():
    """WTILE=1: tile_weights puts each (tile of 16 MT rows, super-block) as 16 MT x 144 contiguous bytes, the tile's super-blocks
    in order, the last tile padded with zero rows (M = 37: 3 tiles of 16, 2 of 32); the bound uploads that layout (on a
    RecordingDevice) and its kernel's loop holds no more instructions than the row-major one's, with no local memory."""
    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 37, 768, 16
    rng = np.random.default_rng(15)
    w = quant.get("q4_K").random_packed(M, K, rng)
    for rows in (16, 32):
        tiled = mmq_direct.tile_weights(w, rows)
        tiles = -(-M // rows)
        assert tiled.shape == (tiles, K // 256, rows, 144)
        for t in range(tiles):
            for sb in range(K // 256):
                for r in range(rows):
                    want = w[t * rows + r, 144 * sb:144 * (sb + 1)] if t * rows + r < M else np.zeros(144, np.uint8)
                    np.testing.assert_array_equal(tiled[t, sb, r], want)
    problem = Problem(Workload("q4_K", M, K, T), w, rng.standard_normal((T, K)).astype(np.float32))
    params = {**PROBED, "WTILE": 1}
    _, bound = recorded_bound(mmq_direct.FAMILY, params, problem, 84)
    want = mmq_direct.tile_weights(w, 16).reshape(-1)
    np.testing.assert_array_equal(bound.w[0].array[:want.size], want)
    assert "WTILE" in mmq_direct.invalid_reason({**PROBED, "WTILE": 1, "L2PF": 2}, "q4_K")
    assert "WTILE" in mmq_direct.invalid_reason({"RING": 0, "WTILE": 1}, "q4_K")

    def loop(wtile):
        built = mmq_direct.FAMILY.compile_only({**PROBED, "WTILE": wtile}, "q4_K")
        summary = built.summary([mmq_direct.FAMILY.kernel_name])
        assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0, summary
        before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
        return before + after

    plain, tiled_loop = loop(0), loop(1)
    assert tiled_loop["HMMA"] == plain["HMMA"] and sum(tiled_loop.values()) <= sum(plain.values())  # (6 fewer: no row strides)


def test_wtile_2_uploads_the_same_slots_super_block_major():
    """WTILE=2: the same tiles' slots as WTILE 1, ordered [K / 256][tiles][16 MT][144] (a K range's warps read one contiguous
    run at each loop step); the bound uploads that order, and the kernel's loop keeps its HMMA count with no local memory."""
    from kernels import quant
    from kernels.family import Problem, Workload
    from tests.recording_device import recorded_bound

    M, K, T = 37, 768, 16
    rng = np.random.default_rng(16)
    w = quant.get("q4_K").random_packed(M, K, rng)
    np.testing.assert_array_equal(mmq_direct.tile_weights(w, 16, sb_major=True),
                                  mmq_direct.tile_weights(w, 16).transpose(1, 0, 2, 3))
    problem = Problem(Workload("q4_K", M, K, T), w, rng.standard_normal((T, K)).astype(np.float32))
    _, bound = recorded_bound(mmq_direct.FAMILY, {**PROBED, "WTILE": 2}, problem, 84)
    want = mmq_direct.tile_weights(w, 16, sb_major=True).reshape(-1)
    np.testing.assert_array_equal(bound.w[0].array[:want.size], want)
    assert "WTILE=3" in mmq_direct.invalid_reason({**PROBED, "WTILE": 3}, "q4_K")
    built = mmq_direct.FAMILY.compile_only({**PROBED, "WTILE": 2}, "q4_K")
    summary = built.summary([mmq_direct.FAMILY.kernel_name])
    assert summary["spill_store_bytes"] == 0 and summary["local_mem_ops"] == 0, summary
    before, after = nvcc.sass_main_loop(built.sass, mmq_direct.FAMILY.kernel_name, "HMMA")
    assert (before + after)["HMMA"] == 34

"""The int8 direct kernel off the GPU (lever `direct_q8`, kernels/mmq_direct_q8.py): its activation format
(quant.quantize_q8_k against a block-by-block loop), its integer-contract reference (parity mode "int_k")
against float64 of the dequantized operands, the weight and activation layouts the kernel reads (byte for byte
against index formulas written out), the launcher's checks, and nvcc: every configuration of the lever's list
compiles without spills, its loop on IMMA with the min term on HMMA."""
import re

import numpy as np
import pytest

from kernels import mmq_direct_q8, nvcc, quant
from kernels.family import Workload
from gates import parity
from gates.inputs import random_problem

# q4_K and q5_K: 8 sub-blocks of 32 with a min (the pass's sums read, a k32 mma a sub-block); q6_K's and q8_0's
# layouts and decodes are their own (tile_weights_q6_k, tile_weights_q8_0; tests/test_direct_q8_emulation.py checks
# their bytes against the int_k contract)
WITH_MIN = ("q4_K", "q5_K")


def loop_q8_k(x: np.ndarray):
    """quantize_q8_k written block by block in plain Python float32 arithmetic (numpy scalars)."""
    t, k = x.shape
    q = np.zeros((t, k), np.int8)
    d = np.zeros((t, k // 32), np.float32)
    for r in range(t):
        for b in range(k // 256):
            block = x[r, 256 * b:256 * (b + 1)]
            scale = np.float32(np.max(np.abs(block))) / np.float32(127)
            d[r, 8 * b:8 * (b + 1)] = scale
            if scale > 0:
                q[r, 256 * b:256 * (b + 1)] = np.clip(np.rint(block / scale), -127, 127)
    return q, d, q.reshape(t, k // 32, 32).sum(axis=2, dtype=np.int32)


def test_q8_k_matches_a_block_by_block_loop():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 768)) * rng.uniform(0.01, 10, (3, 1))).astype(np.float32)
    x[1, 256:512] = 0.0  # a zero block: d = 0, q = 0
    xq = quant.quantize_q8_k(x)
    q, d, s = loop_q8_k(x)
    np.testing.assert_array_equal(xq.q, q)
    np.testing.assert_array_equal(xq.d, d)
    np.testing.assert_array_equal(xq.s, s)


def test_q8_k_refuses_a_row_that_is_not_whole_256_blocks():
    with pytest.raises(ValueError, match="multiple of the block size 256"):
        quant.quantize_q8_k(np.ones((2, 288), np.float32))


def test_the_int_k_reference_is_the_dequantized_product_in_float64():
    """The tight reference (gemm_int on quantize_q8_k's activations) equals dequant(w) . (d8 q8) in float64, and the
    loose bound holds the float64 GEMM of the unquantized x."""
    problem = random_problem(Workload("q4_K", M=40, K=512, T=5), np.random.default_rng(4))
    refs = parity.references(problem, "int_k")
    xq = quant.quantize_q8_k(problem.x)
    w = quant.get("q4_K").dequantize(problem.w_packed).astype(np.float64)
    x_hat = np.repeat(xq.d.astype(np.float64), 32, axis=1) * xq.q
    np.testing.assert_allclose(refs["int"], (x_hat @ w.T).astype(np.float32), rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(refs["int"].astype(np.float64) - refs["float64"]) <= refs["bound"] + 1e-6)


@pytest.mark.parametrize("qtype", WITH_MIN)
def test_tile_weights_puts_each_byte_where_the_kernel_reads_it(qtype):
    """The head as it is; lane t's qs bytes of chunk c at qs + 32 t + 8 c (qs[32c + 4t ..], qs[32c + 16 + 4t ..]);
    q5_K's qh bytes of the same positions at 16 + 8 t (qh[4t ..], qh[16 + 4t ..])."""
    rng = np.random.default_rng(5)
    m, nsb, size = 21, 3, mmq_direct_q8.BLOCK_BYTES[qtype]
    qs_at = size - 128
    packed = rng.integers(0, 256, (m, nsb * size), dtype=np.uint8)
    tiled = mmq_direct_q8.tile_weights(packed, qtype=qtype)
    assert tiled.shape == (2, nsb, 16, size)
    for r in (0, 7, 15, 16, 20):
        for sb in range(nsb):
            row = tiled[r // 16, sb, r % 16]
            block = packed[r, size * sb:size * (sb + 1)]
            np.testing.assert_array_equal(row[:16], block[:16])
            qs, qh = block[qs_at:], block[16:48]
            for t in range(4):
                for c in range(4):
                    lane = row[qs_at + 32 * t + 8 * c:qs_at + 32 * t + 8 * c + 8]
                    np.testing.assert_array_equal(lane[:4], qs[32 * c + 4 * t:32 * c + 4 * t + 4])
                    np.testing.assert_array_equal(lane[4:], qs[32 * c + 16 + 4 * t:32 * c + 16 + 4 * t + 4])
                if qtype == "q5_K":
                    np.testing.assert_array_equal(row[16 + 8 * t:20 + 8 * t], qh[4 * t:4 * t + 4])
                    np.testing.assert_array_equal(row[20 + 8 * t:24 + 8 * t], qh[16 + 4 * t:20 + 4 * t])
    assert not tiled[1, :, 5:].any()  # rows 21..31: the zero padding


def test_sb_major_weights_are_the_tiles_super_block_by_super_block():
    packed = np.random.default_rng(8).integers(0, 256, (40, 3 * 144), dtype=np.uint8)
    tile_major, sb_major = mmq_direct_q8.tile_weights(packed), mmq_direct_q8.tile_weights(packed, sb_major=True)
    assert sb_major.shape == (3, 3, 16, 144)
    np.testing.assert_array_equal(sb_major, tile_major.transpose(1, 0, 2, 3))


@pytest.mark.parametrize("probe, kept", [(1, ("UBLKCP", "LDGSTS")), (2, ("REDG",))])
def test_the_probes_leave_their_stage_out(probe, kept):
    """PROBE 1 streams the weights and multiplies nothing (no IMMA); PROBE 2 has no loop (no IMMA, no slot refills)."""
    compiled = mmq_direct_q8.FAMILY.compile_only({"PROBE": probe, "BULK": 1}, "q4_K")
    sass = compiled.sass.split("Function : mmq_direct_q8_gemm")[1].split("Function :")[0]
    assert "IMMA" not in sass and "HMMA" not in sass
    assert all(op in sass for op in kept)


def test_the_pass_layout_holds_each_b_fragment_where_lane_t_reads_it():
    """Lane t's 16 bytes at 16 t of a 64-k chunk are k 4t.., 16 + 4t.., 32 + 4t.., 48 + 4t.. (the B fragments of
    both 32-blocks); d8 by token tile, super-block, token; the sums' hi + lo is each 32-block's sum of q."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((19, 512)).astype(np.float32)
    xq = quant.quantize_q8_k(x)
    q8, d8, sums = mmq_direct_q8.pass_outputs(x)
    for tok in (0, 18):
        for chunk in range(8):
            for t in range(4):
                got = q8[tok, 64 * chunk + 16 * t:64 * chunk + 16 * t + 16]
                want = np.concatenate([xq.q[tok, 64 * chunk + 16 * p + 4 * t:64 * chunk + 16 * p + 4 * t + 4]
                                       for p in range(4)])
                np.testing.assert_array_equal(got, want)
        for sb in range(2):
            assert d8[tok // 16, sb, tok % 16] == xq.d[tok, 8 * sb]
            for j in range(8):
                hi, lo = sums[tok, sb, j // 2, j % 2], sums[tok, sb, j // 2, 2 + j % 2]
                assert float(hi) + float(lo) == xq.s[tok, 8 * sb + j]
    assert sums.shape == (19, 2, 4, 4) and d8.shape == (2, 2, 16)


@pytest.mark.parametrize("params, reason", [
    ({"WARPS": 6}, "WARPS=6"), ({"RING": 1}, "RING=1"), ({"XSHARED": 0}, "XSHARED=0"), ({"PDL": 3}, "PDL=3"),
    ({"RING": 8, "WARPS": 16}, "shared memory"), ({"BULK": 2}, "BULK=2"), ({"SBMAJOR": 2}, "SBMAJOR=2"),
    ({"PROBE": 3}, "PROBE=3"), ({"L2AHEAD": 9}, "L2AHEAD=9"), ({"CLUSTERQ": 3, "PDL": 0}, "CLUSTERQ=3"),
    ({"CLUSTERQ": 16, "PDL": 0}, "CLUSTERQ=16"), ({"CLUSTERQ": 8, "PDL": 1}, "with PDL 0 or 2"),
    ({"CLUSTERQ": 8, "PDL": 2, "PASSTRIG": 1}, "PASSTRIG 0"),
    ({"CLUSTERQ": 2, "PDL": 0, "NOPASS": 1}, "NOPASS 0"), ({"PASSTHREADS": 96}, "PASSTHREADS=96"),
    ({"PASSTRIG": 1, "PDL": 0}, "PASSTRIG=1"), ({"PASSTRIG": 2}, "PASSTRIG=2"),
    ({"PASSONLY": 1, "NOPASS": 1}, "PASSONLY=1"), ({"XPF": 1, "PDL": 1}, "XPF=1"), ({"XPF": 2, "PDL": 2}, "XPF=2"),
    ({"XPF": 1, "PDL": 2, "CLUSTERQ": 2}, "XPF=1"), ({"PASSFLAG": 1, "PDL": 1}, "PASSFLAG=1"),
    ({"PASSFLAG": 3, "PDL": 2}, "PASSFLAG=3"), ({"PASSFLAG": 2, "PDL": 2, "NOPASS": 1}, "PASSFLAG=2"),
    ({"PASSFLAG": 1, "PDL": 2, "CLUSTERQ": 2}, "PASSFLAG=1"), ({"GRIDQ": 2, "PDL": 1}, "GRIDQ=2"),
    ({"GRIDQ": 2, "PDL": 2, "PASSFLAG": 1}, "GRIDQ=2"), ({"GRIDQ": 3, "PDL": 2}, "GRIDQ=3"),
    ({"GRIDQ": 1, "PDL": 0, "XPF": 1}, "XPF=1"), ({"GRIDQ": 1, "PDL": 0, "TRACE": 1}, "TRACE=1"),
    ({"QFIRST": 1}, "QFIRST=1"), ({"QFIRST": 1, "GRIDQ": 1, "PDL": 0}, "QFIRST=1"),
    ({"QFIRST": 2, "GRIDQ": 2, "PDL": 2}, "QFIRST=2"), ({"SMEMSUMS": 1}, "SMEMSUMS=1"),
    ({"SMEMSUMS": 1, "CLUSTERQ": 2, "PDL": 0}, "SMEMSUMS=1"), ({"SMEMSUMS": 2, "GRIDQ": 2, "PDL": 2}, "SMEMSUMS=2"),
    ({"POLLACQ": 1}, "POLLACQ=1"), ({"POLLACQ": 2, "GRIDQ": 2, "PDL": 2}, "POLLACQ=2"),
    ({"RELADD": 1, "CLUSTERQ": 2, "PDL": 0}, "RELADD=1"), ({"RELADD": 2, "GRIDQ": 2, "PDL": 2}, "RELADD=2"),
    ({"LOCALQ": 1, "GRIDQ": 2, "PDL": 2}, "LOCALQ=1"), ({"LOCALQ": 3, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1}, "LOCALQ=3"),
    ({"LOCALQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "BULK": 1}, "LOCALQ=1"),
    ({"XBULK": 1, "GRIDQ": 2, "PDL": 2}, "XBULK=1"), ({"XBULK": 2, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1}, "XBULK=2"),
    ({"XBULK": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "LOCALQ": 1}, "XBULK=1"),
    ({"SPLITCOUNT": 1, "GRIDQ": 2, "PDL": 2}, "SPLITCOUNT=1"),
    ({"SPLITCOUNT": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "RELADD": 1}, "SPLITCOUNT=1"),
    ({"SPLITCOUNT": 2, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1}, "SPLITCOUNT=2"),
    ({"EARLYSLOTS": 1}, "EARLYSLOTS=1"), ({"EARLYSLOTS": 1, "RING": 2, "GRIDQ": 2, "PDL": 2}, "EARLYSLOTS=1"),
    ({"EARLYSLOTS": 3, "RING": 4, "GRIDQ": 2, "PDL": 2}, "EARLYSLOTS=3"),
    ({"EARLYSLOTS": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "LOCALQ": 1}, "EARLYSLOTS=1"),
    ({"EARLYSLOTS": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "XBULK": 1}, "EARLYSLOTS=1"),
    ({"EARLYSLOTS": 1, "GRIDQ": 2, "PDL": 2, "BULK": 1}, "EARLYSLOTS=1"),
    ({"L2LATE": 1, "GRIDQ": 2, "PDL": 2}, "L2LATE=1"), ({"L2LATE": 1, "L2AHEAD": 2}, "L2LATE=1"),
    ({"L2LATE": 2, "L2AHEAD": 2, "GRIDQ": 2, "PDL": 2}, "L2LATE=2"),
    ({"PACE": 500, "L2AHEAD": 2}, "PACE=500"), ({"PACE": 500, "GRIDQ": 2, "PDL": 2}, "PACE=500"),  # no count; no asks
    ({"PACE": -1, "L2AHEAD": 2, "GRIDQ": 2, "PDL": 2}, "PACE=-1"),
    *[({"PACE": 500, "L2AHEAD": 2, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, other: 1}, "PACE=500")
      for other in mmq_direct_q8.PACE_EXCLUDES],
    ({"SKEW": 1}, "SKEW=1"), ({"SKEW": 1, "CLUSTERQ": 2, "PDL": 0}, "SKEW=1"),
    ({"SKEW": 4, "GRIDQ": 2, "PDL": 2}, "SKEW=4"),
    ({"LLQ": 1}, "LLQ=1"), ({"LLQ": 1, "GRIDQ": 2, "PDL": 2}, "LLQ=1"), ({"LLQ": 3, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1}, "LLQ=3"),
    *[({"LLQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, other: 1}, "LLQ=1")
      for other in ("LOCALQ", "SPLITCOUNT", "XBULK", "BULK", "RELADD", "POLLACQ")],
    ({"LLQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "RING": 3, "EARLYSLOTS": 1}, "LLQ=1"),
    ({"LLQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "WARPS": 4, "XSHARED": 7}, "33 lines a thread"),
    ({"SELFQ": 1}, "SELFQ=1"), ({"SELFQ": 1, "GRIDQ": 2, "PDL": 2}, "SELFQ=1"),
    ({"SELFQ": 9, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1}, "SELFQ=9"),  # more slots than the range's super-blocks
    *[({"SELFQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, other: 1}, "SELFQ=1")
      for other in ("LOCALQ", "SPLITCOUNT", "EARLYSLOTS", "XBULK", "BULK", "LLQ", "RELADD", "POLLACQ", "QFIRST",
                    "PROBE")],
    ({"SELFQ": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "L2AHEAD": 1, "L2LATE": 1}, "SELFQ=1"),
    ({"SELFQ": 8, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "WARPS": 16, "MIN_BLOCKS": 1, "RING": 2}, "shared memory"),
    ({"Q8IN": 1}, "Q8IN=1"), ({"Q8IN": 1, "PDL": 2}, "Q8IN=1"), ({"Q8IN": 2, "GRIDQ": 2, "PDL": 2}, "Q8IN=2"),
    *[({"Q8IN": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, "L2AHEAD": 2, other: 1}, "Q8IN=1")
      for other in mmq_direct_q8.Q8IN_EXCLUDES],
    ({"ZLATE": 1}, "ZLATE=1"), ({"ZLATE": 2, "GRIDQ": 2, "PDL": 2}, "ZLATE=2"),
    ({"FLAGPEEK": 1, "CLUSTERQ": 2, "PDL": 0}, "FLAGPEEK=1"), ({"FLAGPEEK": 2, "GRIDQ": 2, "PDL": 2}, "FLAGPEEK=2"),
    ({"ZPUB": 1}, "ZPUB=1"), ({"ZPUB": 2, "GRIDQ": 2, "PDL": 2}, "ZPUB=2"),
    *[({"ZPUB": 1, "GRIDQ": 2, "PDL": 2, "SMEMSUMS": 1, other: 1}, "ZPUB=1") for other in mmq_direct_q8.ZPUB_EXCLUDES],
])
def test_invalid_configurations_say_why(params, reason):
    assert reason in mmq_direct_q8.invalid_reason(params, "q4_K", {"smem_per_block_optin": 232448})
    assert "no int8 direct-fragment decoder" in mmq_direct_q8.invalid_reason({}, "q2_K")
    # q5_K's 176-byte rows make a ring slot 2816 bytes (q6_K's 210: 3360): the same configuration may fit q4_K and
    # not q5_K, or q5_K and not q6_K
    limit = {"smem_per_block_optin": mmq_direct_q8.smem_bytes({"RING": 6, "WARPS": 16}, "q4_K")}
    assert mmq_direct_q8.invalid_reason({"RING": 6, "WARPS": 16}, "q4_K", limit) is None
    assert "shared memory" in mmq_direct_q8.invalid_reason({"RING": 6, "WARPS": 16}, "q5_K", limit)
    limit = {"smem_per_block_optin": mmq_direct_q8.smem_bytes({"RING": 6, "WARPS": 16}, "q5_K")}
    assert mmq_direct_q8.invalid_reason({"RING": 6, "WARPS": 16}, "q5_K", limit) is None
    assert "shared memory" in mmq_direct_q8.invalid_reason({"RING": 6, "WARPS": 16}, "q6_K", limit)


def test_the_lever_judges_each_type_by_its_own_sizes():
    """A study of q5_K alone must not take a configuration that fits only q4_K's 144-byte rows (its trial would be
    spent on a build the family refuses), and a study of q4_K must not lose it."""
    from experiments.direct_q8 import LEVER

    params = {**LEVER.fixed, **LEVER.defaults, "WARPS": 16, "MIN_BLOCKS": 1, "RING": 5, "XSHARED": 4}
    h200 = {"smem_per_block_optin": 232448}
    assert LEVER.check(params, h200, ["q4_K"]) is None
    assert "shared memory" in LEVER.check(params, h200, ["q5_K"])
    assert LEVER.check(params, h200).startswith("q5_K: shared memory")  # every type the lever claims


@pytest.mark.parametrize("params", [{}, {"RING": 2}, {"RING": 6, "XSHARED": 4}, {"WARPS": 4, "MIN_BLOCKS": 4, "RING": 3},
                                    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 3, "XSHARED": 8}, {"PDL": 0},
                                    {"BULK": 1}, {"BULK": 1, "RING": 3, "XSHARED": 3}, {"GRIDQ": 1, "PDL": 0},
                                    {"GRIDQ": 1, "PDL": 0, "BULK": 1}, {"SBMAJOR": 1},
                                    {"RING": 2, "SBMAJOR": 1, "L2AHEAD": 3}, {"BULK": 1, "L2AHEAD": 1},
                                    {"CLUSTERQ": 8, "PDL": 0}, {"CLUSTERQ": 1, "PDL": 0, "BULK": 1, "RING": 3, "XSHARED": 3},
                                    {"CLUSTERQ": 4, "PDL": 0, "RING": 2, "SBMAJOR": 1, "L2AHEAD": 2},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "LOCALQ": 2},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "LOCALQ": 1},
                                    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "SKEW": 2},
                                    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "XBULK": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1, "XBULK": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "SPLITCOUNT": 1},
                                    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "EARLYSLOTS": 1},
                                    {"RING": 3, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "SPLITCOUNT": 1,
                                     "EARLYSLOTS": 1},
                                    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2,
                                     "XPF": 1, "SMEMSUMS": 1, "LLQ": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "QFIRST": 1, "SMEMSUMS": 1, "LLQ": 2},
                                    {"WARPS": 4, "RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "LLQ": 1},
                                    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2,
                                     "XPF": 1, "SMEMSUMS": 1, "SELFQ": 6},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "SELFQ": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
                                     "L2AHEAD": 6, "PACE": 1000},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1,
                                     "L2AHEAD": 2, "PACE": 500},
                                    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "XBULK": 1,
                                     "L2AHEAD": 2, "PACE": 500},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1,
                                     "XBULK": 1, "Q8IN": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1,
                                     "ZLATE": 1, "FLAGPEEK": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
                                     "ZLATE": 1, "FLAGPEEK": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "LLQ": 1,
                                     "ZLATE": 1, "FLAGPEEK": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1,
                                     "RELADD": 1, "ZPUB": 1, "FLAGPEEK": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "QFIRST": 1,
                                     "SMEMSUMS": 1, "XBULK": 1, "ZPUB": 1},
                                    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1,
                                     "SPLITCOUNT": 1, "ZPUB": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
                                     "RELADD": 1, "ZPUB": 1},
                                    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2,
                                     "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "RELADD": 1, "ZPUB": 1},
                                    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2,
                                     "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1, "ZPUB": 1},
                                    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1,
                                     "RELADD": 1, "ZPUB": 1}])
@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_every_configuration_compiles_on_int8_tensor_cores_without_spills(params, qtype):
    compiled = mmq_direct_q8.FAMILY.compile_only(params, qtype)
    smem = mmq_direct_q8.smem_bytes(params, qtype)
    gemm = compiled.summary(["mmq_direct_q8_gemm", "direct_q8_pass"],
                            dynamic_smem_bytes={"mmq_direct_q8_gemm": smem})["kernels"]["mmq_direct_q8_gemm"]
    assert gemm["spill_store_bytes"] == 0 and gemm["spill_load_bytes"] == 0
    assert gemm["smem_static_bytes"] == mmq_direct_q8.static_smem_bytes(params)  # what the launcher adds to the dynamic
    p = mmq_direct_q8.full_params(params)
    assert gemm["registers"] <= 65536 // (32 * p["WARPS"] * p["MIN_BLOCKS"])
    sass = compiled.sass.split("Function : mmq_direct_q8_gemm")[1].split("Function :")[0]
    if qtype == "q6_K":  # 16 sub-blocks of 16 x 2 token halves, once in the loop; no min
        assert sass.count("IMMA.16816.S8.S8") == 32 and "IMMA.16832" not in sass and "HMMA" not in sass
    elif qtype == "q8_0":  # 8 blocks of 32 x 2 token halves, signed weights as they are; no min
        assert sass.count("IMMA.16832.S8.S8") == 16 and "IMMA.16832.U8" not in sass and "HMMA" not in sass
    else:
        assert sass.count("IMMA.16832.U8.S8") == 16  # 8 sub-blocks x 2 token halves, once in the loop
        assert sass.count("HMMA.16816.F32") == 2  # the min term, once per token half
    assert ("UBLKCP" in sass) == bool(params.get("BULK") or params.get("XBULK") or params.get("SELFQ"))
    # cp.async: the weights' pieces (BULK 0) and the staged activations (all but CLUSTERQ, which quantizes them itself,
    # and XBULK, whose copy engine stages them)
    assert ("LDGSTS" in sass) == (not params.get("BULK") or not (params.get("CLUSTERQ") or params.get("XBULK")))


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_l2ahead_asks_l2_for_that_many_slots_before_the_pass_wait_and_one_a_loop_step(ahead):
    """L2AHEAD n: n bulk L2 prefetches between the ring's prologue and griddepcontrol.wait (issued while the pass
    runs), one in the loop (n ahead of the ring's copy), none after it; L2AHEAD 0 compiles none."""
    params = {"RING": 2, "SBMAJOR": 1, "L2AHEAD": ahead}
    sass = mmq_direct_q8.FAMILY.compile_only(params, "q4_K").sass
    gemm = nvcc.sass_functions(sass)["mmq_direct_q8_gemm"]
    before_wait = gemm.split("ACQBULK")[0]  # griddepcontrol.wait's SASS
    assert gemm.count("ACQBULK") == 1
    assert before_wait.count("UBLKPF") == ahead
    assert gemm.count("UBLKPF") == (ahead + 1 if ahead else 0)
    before, after = nvcc.sass_main_loop(sass, "mmq_direct_q8_gemm")
    assert before["UBLKPF"] + after["UBLKPF"] == (1 if ahead else 0)


@pytest.mark.parametrize("ahead", [2, 4])
@pytest.mark.parametrize("qfirst", [0, 1])
def test_l2late_asks_l2_only_after_the_wait_for_the_kernel_before(ahead, qfirst):
    """GRIDQ 2, L2AHEAD n: L2LATE 0 makes the first n asks before griddepcontrol.wait (ACQBULK), L2LATE 1 none before
    it, the same n after it (QFIRST: a second n, where a quantizing CTA makes them after its add) and the loop's one."""
    def asks(late):
        params = {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "QFIRST": qfirst, "L2AHEAD": ahead,
                  "L2LATE": late}
        gemm = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(params, "q4_K").sass)["mmq_direct_q8_gemm"]
        assert gemm.count("ACQBULK") == 1
        return gemm.split("ACQBULK")[0].count("UBLKPF"), gemm.count("UBLKPF")

    assert asks(0) == (ahead, ahead + 1)
    assert asks(1) == (0, ahead * (1 + qfirst) + 1)


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_pace_makes_the_first_asks_of_l2_in_the_count_s_wait_by_the_clock(qtype):
    """GRIDQ 2, L2AHEAD 4: without PACE its 4 asks come before griddepcontrol.wait (ACQBULK); with PACE none does,
    and the asks are one in a loop after the wait, timed by %globaltimer with short sleeps (a second NANOSLEEP beside
    the count's poll), besides the main loop's one; the warps read thread 0's flag through a shuffle, and there is no
    spill."""
    base = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "QFIRST": 1, "SMEMSUMS": 1, "L2AHEAD": 4}
    burst, _ = compiled_gemm(base, qtype)
    paced, summary = compiled_gemm({**base, "PACE": 800}, qtype)
    assert burst.split("ACQBULK")[0].count("UBLKPF") == 4 and burst.count("UBLKPF") == 5
    assert paced.split("ACQBULK")[0].count("UBLKPF") == 0 and paced.count("UBLKPF") == 2
    assert "GLOBALTIMER" not in burst and "GLOBALTIMER" in paced
    assert burst.count("NANOSLEEP") == 1 and paced.count("NANOSLEEP") == 2
    assert "SHFL.IDX" in paced.split("ACQBULK")[1]
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_xpf_asks_l2_for_the_pass_s_x_before_its_wait_and_leaves_the_gemm_as_it_was(qtype):
    """XPF 1: the pass's one bulk L2 prefetch (UBLKPF, in its loop over units) comes before griddepcontrol.wait
    (ACQBULK) and before its first x load (LDG); XPF 0's pass has none. Only the pass changes: the GEMM's SASS is the
    same instruction for instruction."""
    def strip(text):  # the instructions alone: no addresses, encodings or column padding (cuobjdump pads per file)
        return [" ".join(line.split()) for line in re.sub(r"/\*[0-9a-f]+\*/|/\* 0x[0-9a-f]+ \*/", "", text).splitlines()
                if line.strip()]
    base = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64}
    with_xpf = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only({**base, "XPF": 1}, qtype).sass)
    without = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(base, qtype).sass)
    pass_ = with_xpf["direct_q8_pass"]
    assert pass_.count("UBLKPF") == 1 and pass_.index("UBLKPF") < pass_.index("ACQBULK") < pass_.index("LDG")
    assert "UBLKPF" not in without["direct_q8_pass"]
    assert strip(with_xpf["mmq_direct_q8_gemm"]) == strip(without["mmq_direct_q8_gemm"])


def recorded(params: dict, M=4096, K=14336, T=16, registers=112):
    from kernels.family import Problem
    from tests.recording_device import recorded_bound

    rng = np.random.default_rng(7)
    problem = Problem(Workload("q4_K", M, K, T), quant.get("q4_K").random_packed(M, K, rng),
                      rng.standard_normal((T, K)).astype(np.float32))
    return recorded_bound(mmq_direct_q8.FAMILY, params, problem, registers)


def test_the_launches_are_the_pass_then_the_gemm_as_its_dependent():
    """4096 x 14336 at T = 16, 8 warps x 2 CTAs per SM: 32 row tiles x 8 K splits (7 super-blocks each, XSHARED 8)
    fill one wave of 264; the pass (112 CTAs: 896 warps, one per (token, super-block)) zeroes C, and the GEMM is its
    dependent launch with the pass's three buffers."""
    device, bound = recorded({})
    assert bound.grid == (32, 8, 1) and bound.splitk == 8
    bound.run()
    (pass_name, pass_grid, *_), (gemm_name, gemm_grid, _, gemm_args, _) = device.launches
    assert (pass_name, pass_grid) == ("direct_q8_pass", (112, 1, 1))
    assert gemm_name == "mmq_direct_q8_gemm (dependent)" and gemm_grid == (32, 8, 1)
    assert list(gemm_args[1:4]) == [buf.ptr for buf in bound.scratch] and len(gemm_args) == 9


def test_the_nopass_probe_launches_the_gemm_alone_with_the_same_cubin():
    """NOPASS (a timing probe): the call is the GEMM alone, with the buffers the pass would have written; it is a launch
    choice, so the kernel compiled is the configuration's own."""
    device, bound = recorded({"NOPASS": 1})
    bound.run()
    assert [name for name, *_ in device.launches] == ["mmq_direct_q8_gemm (dependent)"]
    assert list(device.launches[0][3][1:4]) == [buf.ptr for buf in bound.scratch]
    assert mmq_direct_q8.FAMILY.source({"NOPASS": 1}, "q4_K") == mmq_direct_q8.FAMILY.source({}, "q4_K")


def test_gridq_is_one_cooperative_launch_with_the_activations_a_counter_and_each_launch_s_epoch():
    """One launch per call, cooperative (the driver places every CTA at once or refuses), the counter and the epoch
    that launch waits for; a launch that fails on the host gives its epoch back, so the next one does not wait for
    arrivals that never come."""
    device, bound = recorded({"GRIDQ": 1, "PDL": 0})
    bound.run(), bound.run()
    assert [name for name, *_ in device.launches] == ["mmq_direct_q8_gemm (cooperative)"] * 2
    for epoch, (_, _, _, args, _) in enumerate(device.launches, start=1):
        assert args[9] == bound.x[epoch - 1].ptr and args[10] == bound.arrived.ptr and args[11] == epoch

    def refused(*launch):
        raise RuntimeError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")

    launch, bound.gemm.launch = bound.gemm.launch, refused
    with pytest.raises(RuntimeError):
        bound.run()
    bound.gemm.launch = launch
    bound.run()
    assert bound.epoch == 3 and device.launches[-1][3][11] == 3


def test_gridq_refuses_a_grid_the_gpu_does_not_hold_at_once():
    """The grid-wide wait needs every CTA resident: 8 warps x 1 CTA per SM at 255 registers is 132 at once, and
    4096 x 14336 needs 32 row tiles x 7 splits."""
    with pytest.raises(ValueError, match="GRIDQ=1: 224 CTAs .* holds 132 at once"):
        recorded({"GRIDQ": 1, "PDL": 0, "MIN_BLOCKS": 1}, registers=255)
    assert "with PDL 0" in mmq_direct_q8.invalid_reason({"GRIDQ": 1, "PDL": 1}, "q4_K")


def test_gridq_reads_what_its_own_launch_wrote_through_l2_not_the_read_only_path():
    """With GRIDQ the launch writes the scales and sums it then reads: their 8-byte loads must be coherent (LDG .STRONG.GPU,
    __ldcg), not the non-coherent read-only path (.CONSTANT) the pass-fed kernel may use."""
    def loads(params):
        sass = mmq_direct_q8.FAMILY.compile_only(params, "q4_K").sass
        return sass.split("Function : mmq_direct_q8_gemm")[1].split("Function :")[0]

    assert "LDG.E.64.CONSTANT" in loads({})
    gridq = loads({"GRIDQ": 1, "PDL": 0})
    assert "LDG.E.64.CONSTANT" not in gridq and "LDG.E.64.STRONG.GPU" in gridq


def test_gridq_polls_the_counter_without_dropping_l1_then_acquires_once():
    """The wait's polls are relaxed loads spaced by NANOSLEEP (an acquire load invalidates the SM's L1 each time, under
    the feet of the CTAs still quantizing), then one acquire load, no fence (a fence also waits for the ring's copies in
    flight, run 99): the two L1 invalidations are the release's fence before the arrival and that acquire."""
    sass = mmq_direct_q8.FAMILY.compile_only({"GRIDQ": 1, "PDL": 0}, "q4_K").sass
    gemm = sass.split("Function : mmq_direct_q8_gemm")[1].split("Function :")[0]
    wait = gemm[gemm.index("ATOMG.E.ADD.STRONG.GPU"):]
    polls = wait[:wait.index("CCTL.IVALL")]  # from the arrival to the acquire's invalidation
    assert polls.count("LDG.E.STRONG.GPU") >= 2 and "NANOSLEEP" in polls and "MEMBAR" not in polls
    assert gemm.count("CCTL.IVALL") == 2


def test_the_shared_memory_limit_counts_bulk_s_static_mbarriers():
    """BULK's mbarriers are static shared memory beside the dynamic ring: a device limit that holds the dynamic bytes
    alone refuses BULK and takes the same configuration without it."""
    limit = {"smem_per_block_optin": mmq_direct_q8.smem_bytes({}) + 8}
    assert mmq_direct_q8.invalid_reason({}, "q4_K", limit) is None
    assert "shared memory" in mmq_direct_q8.invalid_reason({"BULK": 1}, "q4_K", limit)


@pytest.mark.parametrize("cluster, ahead", [(1, 4), (2, 4), (8, 2)])
@pytest.mark.parametrize("pdl", [0, 2])
def test_clusterq_quantizes_into_every_cluster_cta_by_st_async(cluster, ahead, pdl):
    """CLUSTERQ n: each warp's first x loads (a batch of `ahead` units: the 16 x 8 units of a range over the cluster's
    8 n warps, at most 4) come before the ring's first weight copy (LDGSTS) with PDL 0, and right after the one wait for
    the kernel before (ACQBULK, after the ring's prologue) with PDL 2; the activations go to n CTAs' shared memory by
    st.async (SASS STAS: per unit 2 words and the scale per member, and one 8-byte store of the sums pair), unrolled
    over the members; no release fence or cluster-wide barrier publishes them: one relaxed arrival and its wait (n > 1)
    so that every member's barrier is armed first; range 0's release of its zeroed tile and the others' acquire of it."""
    sass = mmq_direct_q8.FAMILY.compile_only({"CLUSTERQ": cluster, "PDL": pdl, "RING": 2, "SBMAJOR": 1}, "q4_K").sass
    gemm = nvcc.sass_functions(sass)["mmq_direct_q8_gemm"]
    first_copy = gemm.index("LDGSTS")
    x_loads = r"\bLDG\.E\.128"
    if pdl:
        assert gemm.count("ACQBULK") == 1 and first_copy < gemm.index("ACQBULK")
        assert len(re.findall(x_loads, gemm[gemm.index("ACQBULK"):])) >= 2 * ahead
        assert gemm.index("PREEXIT") < gemm.index("ACQBULK")  # the next call's GEMM may launch
    else:
        assert "ACQBULK" not in gemm and "PREEXIT" not in gemm
        assert len(re.findall(x_loads, gemm[:first_copy])) == 2 * ahead  # two 16-byte loads a unit and lane
    assert len(re.findall(r"\bSTAS ", gemm)) == 3 * cluster * ahead
    assert len(re.findall(r"\bSTAS\.64 ", gemm)) == cluster * ahead
    assert "ST.E " not in gemm and "ST.E.U16" not in gemm  # no plain DSMEM stores
    assert (gemm.count("UCGABAR_ARV"), gemm.count("UCGABAR_WAIT")) == ((1, 1) if cluster > 1 else (0, 0))
    assert "STG.E.STRONG.GPU" in gemm and "LDG.E.STRONG.GPU" in gemm  # st.release / ld.acquire of the tile's flag


@pytest.mark.parametrize("pdl", [0, 2])
def test_clusterq_is_one_launch_of_whole_clusters_in_one_wave_with_the_activations_flags_and_epochs(pdl):
    """4096 x 14336 at T = 16 with clusters of 8: 32 row CTAs (4 clusters) x 7 K splits (224 CTAs, 28 clusters: within
    90 % of the 264 slots, where 8 splits would need 32 clusters and 30 fit), one launch per call (no pass; with PDL 2 a
    dependent of the kernel before), with the f32 activations, the tiles' flags and each launch's epoch 1, 2, ...; 37
    rows need one row CTA, and the grid takes a whole cluster of them (the extra warps store nothing)."""
    device, bound = recorded({"CLUSTERQ": 8, "PDL": pdl})
    assert bound.grid == (32, 7, 1)
    bound.run(), bound.run()
    assert [name for name, *_ in device.launches] == ["mmq_direct_q8_gemm (dependent)" if pdl else "gemm"] * 2
    for epoch, (_, _, _, args, _) in enumerate(device.launches, start=1):
        assert args[9] == bound.x[epoch - 1].ptr and args[10] == bound.flags.ptr and args[11] == epoch
    assert bound.flags.size == 32 and not bound.flags.array.any()  # one per (row CTA, token tile), zero at the start
    _, small = recorded({"CLUSTERQ": 8, "PDL": pdl}, M=37, K=256)
    assert small.grid == (8, 1, 1)
    _, plain = recorded({"PDL": pdl})
    assert plain.grid == (32, 8, 1)  # without clusters the grid fills the wave


@pytest.mark.parametrize("pdl", [1, 2])
def test_pdl_2_makes_the_pass_a_dependent_that_waits_and_lets_the_gemm_release_the_next_pass(pdl):
    """PDL 2: the pass is launched as a dependent too, and waits (griddepcontrol.wait, ACQBULK) for the kernel before it
    after letting its GEMM launch (PREEXIT); the GEMM lets the next call's pass launch (PREEXIT) before it waits for its
    own pass. PDL 1: the pass waits for nothing and the GEMM releases nothing."""
    sass = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only({"RING": 2, "SBMAJOR": 1, "PDL": pdl}, "q4_K").sass)
    gemm, pass_ = sass["mmq_direct_q8_gemm"], sass["direct_q8_pass"]
    assert gemm.count("ACQBULK") == 1 and pass_.count("PREEXIT") == 1
    if pdl == 2:
        assert gemm.count("PREEXIT") == 1 and gemm.index("PREEXIT") < gemm.index("ACQBULK")
        assert pass_.count("ACQBULK") == 1 and pass_.index("PREEXIT") < pass_.index("ACQBULK")
    else:
        assert "PREEXIT" not in gemm and "ACQBULK" not in pass_
    device, bound = recorded({"PDL": pdl})
    bound.run()
    names = [name for name, *_ in device.launches]
    assert names == ["direct_q8_pass (dependent)" if pdl == 2 else "direct_q8_pass", "mmq_direct_q8_gemm (dependent)"]


@pytest.mark.parametrize("pdl", [1, 2])
def test_passtrig_lets_the_gemm_launch_only_after_the_pass_s_first_reads_are_consumed(pdl):
    """PASSTRIG 1: the pass's launch_dependents (PREEXIT) comes after its first x loads (LDG), the stores that consume
    them (STG) and a CTA barrier, so every warp's first reads have landed; with PDL 2 also after its wait for the kernel
    before it. PASSTRIG 0: PREEXIT before any load. The GEMM's code is the same either way."""
    def pass_and_gemm(trig):
        sass = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(
            {"RING": 4, "SBMAJOR": 1, "PDL": pdl, "PASSTRIG": trig}, "q4_K").sass)
        return sass["direct_q8_pass"], sass["mmq_direct_q8_gemm"]

    late, gemm_late = pass_and_gemm(1)
    early, gemm_early = pass_and_gemm(0)
    assert late.count("PREEXIT") == 1 and early.count("PREEXIT") == 1
    trigger = late.index("PREEXIT")
    assert late.index("LDG") < late.index("STG") < late.rindex("BAR.SYNC", 0, trigger) < trigger
    assert early.index("PREEXIT") < early.index("LDG")
    if pdl == 2:
        assert late.index("ACQBULK") < late.index("LDG")
    def strip(text):  # the instructions alone: no addresses, encodings or column padding (cuobjdump pads per file)
        return [" ".join(line.split()) for line in re.sub(r"/\*[0-9a-f]+\*/|/\* 0x[0-9a-f]+ \*/", "", text).splitlines()
                if line.strip()]
    assert strip(gemm_late) == strip(gemm_early)


def test_passthreads_sizes_the_pass_s_ctas_at_launch_with_the_same_cubin():
    """PASSTHREADS 64: the pass's 896 warps (16 tokens x 56 super-blocks) in 448 CTAs of 64 threads, each small enough
    that three fit on an SM beside two GEMM CTAs; a launch choice, so the kernel compiled is the configuration's own."""
    device, bound = recorded({"PASSTHREADS": 64})
    bound.run()
    (name, grid, block, *_), _ = device.launches
    assert (name, grid, block) == ("direct_q8_pass", (448, 1, 1), (64, 1, 1))
    assert mmq_direct_q8.FAMILY.source({"PASSTHREADS": 64}, "q4_K") == mmq_direct_q8.FAMILY.source({}, "q4_K")


def test_the_passonly_probe_launches_the_pass_alone_rotating_the_inputs():
    """PASSONLY (a timing probe): each call is the pass of the next input copy, no GEMM, with the configuration's own
    cubin (a launch choice)."""
    device, bound = recorded({"PASSONLY": 1})
    bound.run(), bound.run()
    assert [name for name, *_ in device.launches] == ["direct_q8_pass"] * 2
    assert [args[0] for _, _, _, args, _ in device.launches] == [bound.x[0].ptr, bound.x[1 % len(bound.x)].ptr]
    assert mmq_direct_q8.FAMILY.source({"PASSONLY": 1}, "q4_K") == mmq_direct_q8.FAMILY.source({}, "q4_K")


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
@pytest.mark.parametrize("flag", [1, 2])
def test_passflag_gemm_waits_on_the_pass_s_counters_not_on_its_grid(flag, qtype):
    """PASSFLAG: the GEMM has no griddepcontrol.wait (ACQBULK) and no fence; it polls its range's counter (a sleep
    between polls: NANOSLEEP) before its first multiply, and the pass's done count before its reds; 1 polls before its
    ring's first weight copies (LDGSTS), 2 after them. The pass publishes on the counters with atomics (one a unit, in both of its unit loops, and one a CTA
    done), each after its fences, and still waits for the kernel before it (ACQBULK). No spills."""
    compiled = mmq_direct_q8.FAMILY.compile_only({"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTHREADS": 64,
                                                  "PASSFLAG": flag}, qtype)
    sass = nvcc.sass_functions(compiled.sass)
    gemm, pass_ = sass["mmq_direct_q8_gemm"], sass["direct_q8_pass"]
    assert "ACQBULK" not in gemm and "MEMBAR" not in gemm and gemm.count("NANOSLEEP") == 2
    first_copy, first_poll = gemm.index("LDGSTS"), gemm.index("NANOSLEEP")
    assert (first_poll < first_copy) if flag == 1 else (first_copy < first_poll)
    assert gemm.index("IMMA") > first_poll and gemm.rindex("NANOSLEEP") > gemm.rindex("IMMA")
    atomics = [m.start() for m in re.finditer(r"\bATOMG?\.\S*ADD", pass_)]
    assert "ACQBULK" in pass_ and len(atomics) == 3 and pass_.index("MEMBAR") < atomics[0]
    summary = compiled.summary(["mmq_direct_q8_gemm"])["kernels"]["mmq_direct_q8_gemm"]
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128


def test_passflag_launches_pass_and_gemm_with_the_counters_and_a_growing_epoch():
    """The pass gets the counters and the GEMM's K splits; the GEMM the counters, the launch's epoch (1, 2, ...: a
    count grows by a call's units every call) and the pass's CTA count (what its done counter reaches per call)."""
    device, bound = recorded({"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTHREADS": 64, "PASSFLAG": 1})
    assert bound.grid == (32, 8, 1)
    assert bound.counters.array.shape == (8 * 1 + 1,) and not bound.counters.array.any()  # a count per (token tile, K range), then the pass CTAs done
    bound.run()
    bound.run()
    (p1, pg1, _, pargs1, _), (g1, _, _, gargs1, _), (_, _, _, pargs2, _), (_, _, _, gargs2, _) = device.launches
    assert (p1, g1) == ("direct_q8_pass (dependent)", "mmq_direct_q8_gemm (dependent)") and pg1 == (448, 1, 1)
    assert list(pargs1[-2:]) == [bound.counters.ptr, 8] and list(pargs2[-2:]) == [bound.counters.ptr, 8]
    assert list(gargs1[-3:]) == [bound.counters.ptr, 1, 448] and list(gargs2[-3:]) == [bound.counters.ptr, 2, 448]


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_gridq2_quantizes_after_its_wait_and_asks_l2_for_x_before_it(qtype):
    """GRIDQ 2: one launch, a dependent of the kernel before (its PREEXIT lets the next launch go, its one ACQBULK waits
    for the one before); its x loads (LDG) come after the wait, its first weight copies (LDGSTS) before; XPF adds one
    bulk L2 prefetch (UBLKPF), before the wait. The range's count: thread 0's fence and one atomic add after the x
    loads, then the poll (NANOSLEEP between polls), all before the first multiply."""
    def gemm(extra):
        compiled = mmq_direct_q8.FAMILY.compile_only({"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, **extra}, qtype)
        summary = compiled.summary(["mmq_direct_q8_gemm"])["kernels"]["mmq_direct_q8_gemm"]
        assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
        return nvcc.sass_functions(compiled.sass)["mmq_direct_q8_gemm"]

    plain, prefetching = gemm({}), gemm({"XPF": 1})
    wait = plain.index("ACQBULK")
    assert plain.count("ACQBULK") == 1 and plain.index("PREEXIT") < wait
    assert plain.index("LDGSTS") < wait < plain.index("LDG.E") and "UBLKPF" not in plain
    assert prefetching.count("UBLKPF") == 1 and prefetching.index("UBLKPF") < prefetching.index("ACQBULK")
    assert wait < plain.index("MEMBAR") < plain.index("ATOMG") < plain.index("NANOSLEEP") < plain.index("IMMA")


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
@pytest.mark.parametrize("bulk", [0, 1])
def test_qfirst_copies_a_quantizing_ctas_ring_after_its_add(qtype, bulk):
    """QFIRST 1 (GRIDQ 2): the ring's first copies (LDGSTS pieces, or BULK's one UBLKCP a slot) stay before the wait
    for the CTAs that quantize nothing, and a second set of them follows the count's add (ATOMG) for the CTAs that
    quantize, so that add's release fence (MEMBAR) has no copies of its thread in flight; QFIRST 0 has no such set."""
    copy = "UBLKCP" if bulk else "LDGSTS"

    def copies(extra):
        compiled = mmq_direct_q8.FAMILY.compile_only({"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "BULK": bulk,
                                                      **extra}, qtype)
        summary = compiled.summary(["mmq_direct_q8_gemm"])["kernels"]["mmq_direct_q8_gemm"]
        assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
        gemm = nvcc.sass_functions(compiled.sass)["mmq_direct_q8_gemm"]
        add = gemm.index("ATOMG.E.ADD.STRONG.GPU")
        assert gemm.index("MEMBAR") < add
        return gemm[:gemm.index("ACQBULK")].count(copy), gemm[add:].count(copy)

    (before, after), (q_before, q_after) = copies({}), copies({"QFIRST": 1})
    assert before > 0 and q_before == before and q_after == after + before


@pytest.mark.parametrize("qtype", WITH_MIN)
def test_smemsums_reads_the_scales_and_sums_from_shared_memory_not_l2(qtype):
    """SMEMSUMS 1 (GRIDQ 2): the loop's 8-byte loads of the sums and scales (LDG.E.64 through L2, four a super-block) become
    shared-memory loads (LDS.64), staged by more cp.async (LDGSTS) before the loop, in a CTA that takes the sums'
    [16][XSHARED x 4 + 4] uint2 and the scales' [XSHARED][16] f32 more shared memory."""
    def gemm(extra):
        params = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, **extra}
        return nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(params, qtype).sass)["mmq_direct_q8_gemm"], params

    (l2, l2_params), (shared, shared_params) = gemm({}), gemm({"SMEMSUMS": 1})
    assert l2.count("LDG.E.64.STRONG.GPU") == 4 and "LDG.E.64" not in shared
    assert shared.count("LDS.64") - l2.count("LDS.64") == 4  # (q5_K's loop reads its qh words by LDS.64 in both)
    assert shared.count("LDGSTS") > l2.count("LDGSTS")
    xshared = mmq_direct_q8.DEFAULTS["XSHARED"]
    assert mmq_direct_q8.smem_bytes(shared_params, qtype) - mmq_direct_q8.smem_bytes(l2_params, qtype) == \
        16 * (xshared * 4 + 4) * 8 + xshared * 16 * 4


def test_pollacq_ends_the_wait_with_the_poll_that_sees_the_count():
    """POLLACQ 1: the polls of the range's count (from the first LDG.E.STRONG.GPU after the count's add to the CTA barrier
    after them) are acquire loads, each followed by its L1 invalidation (CCTL.IVALL), the first before the NANOSLEEP;
    0: relaxed polls, then one invalidation after the last (the separate acquire load)."""
    def polls(extra):
        params = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, **extra}
        gemm = nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(params, "q4_K").sass)["mmq_direct_q8_gemm"]
        first = gemm.index("LDG.E.STRONG.GPU", gemm.index("ATOMG.E.ADD.STRONG.GPU"))
        return gemm[first:gemm.index("BAR.SYNC", first)]

    relaxed, acquiring = polls({}), polls({"POLLACQ": 1})
    assert relaxed.count("LDG.E.STRONG.GPU") >= 2 and relaxed.count("CCTL.IVALL") == 1
    assert relaxed.index("CCTL.IVALL") > relaxed.rindex("NANOSLEEP")
    assert acquiring.count("CCTL.IVALL") == acquiring.count("LDG.E.STRONG.GPU") >= 2
    assert acquiring.index("CCTL.IVALL") < acquiring.index("NANOSLEEP")


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_reladd_releases_the_count_and_the_zeroed_tile_without_a_sequential_fence(qtype):
    """RELADD 1 (GRIDQ 2): the count's add is a REDG after a MEMBAR.ALL.GPU (red.release) and range 0's flag a release
    store alone, so the kernel has no MEMBAR.SC.GPU; RELADD 0: __threadfence's MEMBAR.SC.GPU before the ATOMG add and
    before the flag's release store."""
    def gemm(extra):
        params = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, **extra}
        return nvcc.sass_functions(mmq_direct_q8.FAMILY.compile_only(params, qtype).sass)["mmq_direct_q8_gemm"]

    fenced, released = gemm({}), gemm({"RELADD": 1})
    assert fenced.count("MEMBAR.SC.GPU") == 2 and fenced.index("MEMBAR.SC.GPU") < fenced.index("ATOMG.E.ADD.STRONG.GPU")
    assert "MEMBAR.SC" not in released and "ATOMG.E.ADD.STRONG.GPU" not in released
    add = released.index("REDG.E.ADD.STRONG.GPU")
    assert released.rindex("MEMBAR.ALL.GPU", 0, add) > released.rindex("BAR.SYNC", 0, add)
    assert released.index("STG.E.STRONG.GPU", add) > released.index("MEMBAR.ALL.GPU", add)


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_localq_quantizes_into_shared_memory_and_still_shares_the_rest(qtype):
    """LOCALQ 1: the CTA's first super-block is quantized straight into shared memory (STS: the staged words, the scale
    and the sums; LOCALQ 0 writes shared memory only by cp.async) with its x asked of L2 first (a second UBLKPF), and
    the rest still goes through the range's count (one add, one poll loop) and the staging copies."""
    def ops(extra):
        params = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, **extra}
        compiled = mmq_direct_q8.FAMILY.compile_only(params, qtype)
        summary = compiled.summary(["mmq_direct_q8_gemm"])["kernels"]["mmq_direct_q8_gemm"]
        assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
        gemm = nvcc.sass_functions(compiled.sass)["mmq_direct_q8_gemm"]
        return nvcc.sass_opcodes(gemm), gemm.count("ATOMG.E.ADD.STRONG.GPU")  # (the count's add; C's reds are F32)

    (shared, shared_adds), (local, local_adds) = ops({}), ops({"LOCALQ": 1})
    assert "STS" not in shared and local["STS"] >= 3
    assert (shared["UBLKPF"], local["UBLKPF"]) == (1, 2)
    assert shared_adds == local_adds == 1
    for o in (shared, local):
        assert o["NANOSLEEP"] == 1 and o["LDGSTS"] > 0


def test_gridq2_is_one_dependent_launch_with_the_counters_the_flags_and_the_epoch():
    """No pass: the GEMM alone, a dependent launch, with x, a count per (token tile, K range), a flag per (row tile,
    token tile) and the launch's epoch (1, 2, ...), all zero at first; a grid the GPU cannot hold at once is refused."""
    device, bound = recorded({"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2})
    assert bound.grid == (32, 8, 1)
    bound.run()
    bound.run()
    assert [name for name, *_ in device.launches] == ["mmq_direct_q8_gemm (dependent)"] * 2
    args = [launch[3] for launch in device.launches]
    assert bound.counters.array.shape == (8,) and bound.flags.array.shape == (32,)
    assert not bound.counters.array.any() and not bound.flags.array.any()
    for epoch, a in enumerate(args, 1):
        assert list(a[-4:]) == [bound.x[epoch - 1].ptr, bound.counters.ptr, bound.flags.ptr, epoch]
    with pytest.raises(ValueError, match="GRIDQ=2: .* at once"):
        recorded({"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SPLITK": 16})


@pytest.mark.parametrize("nsb, ranges", [(56, 8), (56, 7), (16, 2), (16, 4), (16, 8), (24, 3), (8, 8), (1, 1), (67, 9)])
@pytest.mark.parametrize("skew", [0, 1, 2, 3])
@pytest.mark.parametrize("xshared", [3, 8])
def test_skewed_k_ranges_cover_k_once_each_within_xshared_and_never_empty(nsb, ranges, skew, xshared):
    """SKEW's split (range_starts, as range_begin in the kernel): consecutive ranges that cover every super-block once,
    each 1..XSHARED long wherever the even split is, none moved by more than a quarter of an even range, the first
    ones at least as long as the last ones, and SKEW 0 the even split itself (the kernel's before SKEW)."""
    params = {"SKEW": skew, "XSHARED": xshared, "GRIDQ": 2, "PDL": 2}
    starts = mmq_direct_q8.range_starts(nsb, ranges, params)
    even = [y * nsb // ranges for y in range(ranges + 1)]
    sizes = np.diff(starts)
    assert starts[0] == 0 and starts[-1] == nsb and (sizes >= 1).all()
    if np.diff(even).max() <= xshared:
        assert sizes.max() <= xshared
    if skew == 0:
        assert starts == even
    else:
        moved = np.array(starts) - np.array(even)
        assert np.abs(sizes - np.diff(even)).max() <= max(1, nsb // ranges // 4) * (nsb // ranges >= 4)
        assert (moved >= 0).all() and (moved[:ranges // 2 + 1] == np.maximum.accumulate(moved[:ranges // 2 + 1])).all()


def test_skew_moves_the_anchors_super_blocks_to_the_ranges_started_first():
    """q4_K 4096x14336 at T=16 (56 super-blocks over 8 ranges, XSHARED 8): SKEW 1 makes the first four ranges 8 long
    and the last four 6; SKEW 2 can do no more within XSHARED 8; 14336x4096's two full ranges of 8 stay as they are,
    and ranges of 2 (4096x4096 over 8) shorter than 4 are not skewed at all."""
    p = {"GRIDQ": 2, "PDL": 2, "XSHARED": 8}
    assert np.diff(mmq_direct_q8.range_starts(56, 8, {**p, "SKEW": 1})).tolist() == [8] * 4 + [6] * 4
    assert mmq_direct_q8.range_starts(56, 8, {**p, "SKEW": 2}) == mmq_direct_q8.range_starts(56, 8, {**p, "SKEW": 1})
    assert mmq_direct_q8.range_starts(16, 2, {**p, "SKEW": 3}) == [0, 8, 16]
    assert mmq_direct_q8.range_starts(16, 8, {**p, "SKEW": 1}) == list(range(0, 17, 2))  # (4096x4096: 3:1 no)
    assert np.diff(mmq_direct_q8.range_starts(16, 4, {**p, "SKEW": 2})).tolist() == [5, 5, 3, 3]


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_xbulk_stages_the_range_by_three_bulk_copies_in_place_of_its_cp_async_pieces(qtype):
    """XBULK: the range's activations, sums and scales are three bulk-copy instructions (a token row, its sums, the
    scales: one per lane of warp 0) and no cp.async of theirs is left; the weights' pieces are untouched (the same
    LDGSTS a ring slot, with or without XBULK)."""
    base = {"SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1}

    def copies(params):
        sass = mmq_direct_q8.FAMILY.compile_only(params, qtype).sass
        gemm = sass.split("Function : mmq_direct_q8_gemm")[1].split("Function :")[0]
        return gemm.count("LDGSTS"), gemm.count("UBLKCP")

    (staged2, none2), (bulk2, three2) = copies({**base, "RING": 2}), copies({**base, "RING": 2, "XBULK": 1})
    (staged3, _), (bulk3, three3) = copies({**base, "RING": 3}), copies({**base, "RING": 3, "XBULK": 1})
    assert none2 == 0 and three2 == three3 == 3
    assert staged2 - bulk2 == staged3 - bulk3 > 0  # the staging's pieces, whatever the ring
    assert staged3 - staged2 == bulk3 - bulk2 > 0  # a ring slot's pieces, XBULK or not


def compiled_gemm(params: dict, qtype: str) -> tuple[str, dict]:
    """The GEMM's SASS and its resource summary (with the dynamic shared memory the launcher asks for)."""
    compiled = mmq_direct_q8.FAMILY.compile_only(params, qtype)
    summary = compiled.summary(["mmq_direct_q8_gemm"], dynamic_smem_bytes={
        "mmq_direct_q8_gemm": mmq_direct_q8.smem_bytes(params, qtype)})["kernels"]["mmq_direct_q8_gemm"]
    return nvcc.sass_functions(compiled.sass)["mmq_direct_q8_gemm"], summary


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_splitcount_waits_and_adds_twice_and_stages_the_rest_in_the_loop(qtype):
    """SPLITCOUNT: a second count's wait (its polls sleep: NANOSLEEP), a second add (ATOM) after the one fence
    (MEMBAR), one more CTA barrier (the wait's) and the rest's staging in the loop (more cp.async pieces), with no spill
    in the registers two CTAs an SM leave."""
    base = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1}

    one, _ = compiled_gemm(base, qtype)
    two, summary = compiled_gemm({**base, "SPLITCOUNT": 1}, qtype)
    for op, more in (("NANOSLEEP", 1), ("ATOM", 1), ("BAR.SYNC", 1)):
        assert two.count(op) == one.count(op) + more, op
    assert two.count("MEMBAR") == one.count("MEMBAR") and two.count("LDGSTS") > one.count("LDGSTS")
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128


def _tight_waits(ring: int, early: int, splitcount: bool, trips: int = 12) -> list[int]:
    """A model of the GEMM's cp.async groups in commit order (not the kernel's formula): the ring's `early` slots, the
    activations' first group (the first super-block; with the sums), their second (the rest: before the loop, or with
    SPLITCOUNT in trip 1 before its slot), the ring's late slots, then a slot per trip. For each trip s, the most groups
    that may stay pending once slot s and the activations it needs (the first group from trip 0, the second from trip
    1) have landed: cp.async.wait_group N completes all but the N newest."""
    order = [("slot", s) for s in range(early)] + [("act", 0)]
    if not splitcount:
        order.append(("act", 1))
    order += [("slot", s) for s in range(early, ring - 1)]
    waits = []
    for s in range(trips):
        if splitcount and s == 1:
            order.append(("act", 1))
        order.append(("slot", s + ring - 1))
        needed = [("slot", s)] + ([("act", s)] if s < 2 else [])  # (what earlier trips needed, they waited for)
        waits.append(len(order) - 1 - max(order.index(g) for g in needed))
    return waits


@pytest.mark.parametrize("ring, early, splitcount", [(3, 1, False), (3, 2, False), (4, 1, False), (4, 2, False),
                                                     (4, 3, False), (5, 1, False), (5, 2, False), (5, 3, False),
                                                     (5, 4, False), (3, 1, True), (4, 1, True), (4, 3, True),
                                                     (5, 1, True), (5, 3, True)])
@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_the_loops_waits_are_what_a_model_of_its_copy_groups_allows(ring, early, splitcount, qtype):
    """The GEMM's waits (DEPBAR.LE SB0, N) against an independent model of its cp.async groups (_tight_waits): trips 0
    and 1 let exactly as many groups pend as the model allows, and the one wait of later trips, RING - 1, never more
    (the model's own from some trip on). In-order groups make a wait complete everything older than what it needs: the
    slots committed before the activations' groups (trip 0), and with SPLITCOUNT and RING >= 3 trip 0's slot before
    trip 1's activations. With EARLYSLOTS, ring - 1 - early slots are late (early = ring - 1: EARLYSLOTS 0). Each
    compiles without spills in the registers two CTAs an SM leave."""
    params = {"RING": ring, "XSHARED": 8, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
              "EARLYSLOTS": 0 if early == ring - 1 else early, "SPLITCOUNT": int(splitcount)}
    gemm, summary = compiled_gemm(params, qtype)
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
    found = {int(n, 16) for n in re.findall(r"DEPBAR\.LE SB0, (0x[0-9a-f]+)", gemm)}
    tight = _tight_waits(ring, early, splitcount)
    assert all(ring - 1 <= w for w in tight[2:]) and tight[-1] == ring - 1
    assert found == {tight[0], tight[1], ring - 1}


@pytest.mark.parametrize("qtype", WITH_MIN)
def test_llq_stores_fenced_lines_with_no_count_and_loads_them_all_at_once(qtype):
    """LLQ against the same GRIDQ 2 kernel with its count (16 warps, one CTA an SM): the count's add (ATOM) gone and its
    fence, after a CTA barrier, now each storing thread's own (as many MEMBARs); the units' lines stored by strong
    16-byte stores at GPU scope; a thread's 10 lines (16 rows x 8 super-blocks x 37 lines over 512 threads) asked for
    by strong 16-byte loads, all in flight at once, not by cp.async copies; a stale line polled alone between rounds
    (NANOSLEEP); each B fragment two whole 16-byte shared loads and each sums uint2 one (10 more LDS.128 a
    super-block: ptxas would narrow a plain vector load whose epochs go unread); no spill; and the shared memory the
    launcher asks for grown by the lines' second halves."""
    base = {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1,
            "SMEMSUMS": 1}

    counted, _ = compiled_gemm(base, qtype)
    flagged, summary = compiled_gemm({**base, "LLQ": 1}, qtype)
    assert flagged.count("MEMBAR") == counted.count("MEMBAR")  # every thread's own fence for the count's one
    assert flagged.count("ATOM") == counted.count("ATOM") - 1
    assert flagged.count("STG.E.128.STRONG.GPU") == 3 and "STG.E.128.STRONG" not in counted  # data, sums, scale
    assert flagged.count("LDG.E.128.STRONG.GPU") >= 10 and "LDG.E.128.STRONG" not in counted
    assert "NANOSLEEP 0x80" in flagged  # the poll of one stale line between rounds
    staged = counted.count("LDGSTS") - flagged.count("LDGSTS")  # the activations' and the sums' copies, gone
    assert staged > 0 and flagged.count("LDGSTS") > 0  # (the weight ring's stay)
    assert flagged.count("LDS.128") == counted.count("LDS.128") + 10
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
    assert mmq_direct_q8.smem_bytes({**base, "LLQ": 1}, qtype) - mmq_direct_q8.smem_bytes(base, qtype) == \
        16 * 8 * 256 - 16 * (64 - 16) + 16 * 36 * 8 + 8 * 16 * 12  # rows twice as wide, sums and scales a line each


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_selfq_has_no_count_and_quantizes_bulk_copied_rows_in_the_loop(qtype):
    """SELFQ against the same GRIDQ 2 kernel with its count (16 warps, one CTA an SM): no count's add (one ATOM fewer)
    and no poll of it (no NANOSLEEP); no staging of shared activations (fewer cp.async pieces, the weight ring's stay);
    the f32 rows by bulk copies (UBLKCP) on mbarriers (SYNCS), the loop's among them (a slot refilled);
    a CTA barrier in the loop (the hand-over of the super-block quantized a trip ahead); the range's rows asked of L2
    (XPF) before griddepcontrol.wait; no spill; and the shared memory grown by exactly the f32 slots."""
    base = {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1}
    selfq = {**base, "SELFQ": 4}

    counted, _ = compiled_gemm(base, qtype)
    own, summary = compiled_gemm(selfq, qtype)
    assert own.count("ATOM") == counted.count("ATOM") - 1
    assert "NANOSLEEP" in counted and "NANOSLEEP" not in own
    assert 0 < own.count("LDGSTS") < counted.count("LDGSTS") and "UBLKCP" not in counted
    before, after = nvcc.sass_main_loop(mmq_direct_q8.FAMILY.compile_only(selfq, qtype).sass, "mmq_direct_q8_gemm")
    loop = before + after
    assert loop["UBLKCP"] >= 1 and loop["BAR"] >= 1 and own.count("UBLKCP") >= 2
    assert "SYNCS" in own and own.split("ACQBULK")[0].count("UBLKPF") == 1
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
    assert mmq_direct_q8.smem_bytes(selfq, qtype) - mmq_direct_q8.smem_bytes(base, qtype) == 4 * 16 * 256 * 4


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
def test_q8in_reads_quantized_activations_with_no_quantization_and_no_count(qtype):
    """Q8IN against the same GRIDQ 2 kernel (the q4_K T=16 champion's form with its count's options off): no rounding
    of activations (no FRND), no count's add (one ATOM fewer: the reds stay) and no poll of it (no NANOSLEEP), no
    store of activations (fewer STG: range 0's zeroed tile and its flag stay), the zeroed tile's flag still published
    (STG.E.STRONG) and polled (LDG.E.STRONG), the range staged by the same cp.async pieces; no spill."""
    base = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1}
    counted, _ = compiled_gemm(base, qtype)
    given, summary = compiled_gemm({**base, "Q8IN": 1}, qtype)
    assert "FRND" in counted and "FRND" not in given
    assert given.count("ATOM") == counted.count("ATOM") - 1
    assert "NANOSLEEP" in counted and "NANOSLEEP" not in given
    assert 0 < given.count("STG") < counted.count("STG")
    assert given.count("STG.E.STRONG.GPU") == counted.count("STG.E.STRONG.GPU") == 1 and "LDG.E.STRONG.GPU" in given
    assert given.count("LDGSTS") == counted.count("LDGSTS")
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128
    # RELADD: with no count, only the sequentially consistent fence before range 0's flag goes (its release stays)
    released, _ = compiled_gemm({**base, "Q8IN": 1, "RELADD": 1}, qtype)
    assert "MEMBAR.SC.GPU" in given and "MEMBAR.SC.GPU" not in released
    assert released.count("MEMBAR.ALL.GPU") == given.count("MEMBAR.ALL.GPU") >= 1
    assert released.count("STG.E.STRONG.GPU") == 1


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
@pytest.mark.parametrize("base", [{"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1},
                                  {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1}],
                         ids=["q8in", "champion"])
def test_zlate_publishes_the_zeroed_tile_after_the_staging_and_flagpeek_acquires_its_flag_in_the_loop(base, qtype):
    """ZLATE: range 0's zeroed tile is published (its flag's strong store, after the fences) once every cp.async piece
    of the staging is issued, not before them: more LDGSTS precede the store, and as many in all. FLAGPEEK: one more
    acquire of the flag (LDG.E.STRONG.GPU), issued in the loop before its first wait for the ring (DEPBAR) and the first
    IMMA; the acquire after the loop stays, for a flag not yet published. Neither spills."""
    def ldgsts_before_flag_store(sass):
        return sass.split("STG.E.STRONG.GPU")[0].count("LDGSTS")

    def acquires_before_first_imma(sass):
        return sass.split("IMMA")[0].count("LDG.E.STRONG.GPU")

    plain, _ = compiled_gemm(base, qtype)
    late, late_summary = compiled_gemm({**base, "ZLATE": 1}, qtype)
    peek, peek_summary = compiled_gemm({**base, "FLAGPEEK": 1}, qtype)
    assert ldgsts_before_flag_store(late) > ldgsts_before_flag_store(plain)
    assert late.count("LDGSTS") == plain.count("LDGSTS") and late.count("STG.E.STRONG.GPU") == 1
    assert ldgsts_before_flag_store(peek) == ldgsts_before_flag_store(plain)
    assert peek.count("LDG.E.STRONG.GPU") == plain.count("LDG.E.STRONG.GPU") + 1
    assert acquires_before_first_imma(peek) == acquires_before_first_imma(plain) + 1
    assert "DEPBAR" in peek.split("IMMA")[0].rsplit("LDG.E.STRONG.GPU", 1)[1]  # the slot's wait after the acquire
    for summary in (late_summary, peek_summary):
        assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
@pytest.mark.parametrize("base", [{"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1},
                                  {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1}],
                         ids=["q8in", "champion"])
def test_zpub_publishes_the_zeroed_tile_in_the_loop_after_its_first_barrier(base, qtype):
    """ZPUB: range 0's zeroed tile is published (its flag's one strong store, after its fences) in the loop, after the
    first trip's IMMAs, not before the staging's cp.async pieces; the zeros' stores and the other fences stay where
    they were (Q8IN with RELADD: no fence at all before the loop). No spill."""
    plain, _ = compiled_gemm(base, qtype)
    published, summary = compiled_gemm({**base, "ZPUB": 1}, qtype)
    before_loop = published.split("IMMA")[0]
    assert plain.split("IMMA")[0].count("STG.E.STRONG.GPU") == 1 and "STG.E.STRONG.GPU" not in before_loop
    assert published.count("STG.E.STRONG.GPU") == 1
    assert published.count("MEMBAR") == plain.count("MEMBAR")
    assert published.count("LDGSTS") == plain.count("LDGSTS") and published.count("STG") == plain.count("STG")
    if base.get("Q8IN"):
        assert "MEMBAR" in plain.split("IMMA")[0] and "MEMBAR" not in before_loop
    assert summary["spill_store_bytes"] == 0 and summary["registers"] <= 128


def test_q8in_quantizes_each_input_copy_once_when_prepared_then_each_call_is_the_gemm_alone():
    """Q8IN: preparing the problem launches the pass (not a dependent launch: nothing before it to overlap) once per
    input copy, each into buffers of its own; each call then launches the GEMM alone, a dependent launch, with its
    input copy's quantized activations, its x (unread) and the flags and epoch of GRIDQ 2's zeroed tiles."""
    champion = {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "QFIRST": 1, "XPF": 1}
    params = mmq_direct_q8.FAMILY.q8_input(champion)
    assert params == {**champion, "QFIRST": 0, "XPF": 0, "POLLACQ": 0, "RELADD": 1, "ZPUB": 1, "ZLATE": 0,
                      "LOCALQ": 0, "SPLITCOUNT": 0, "LLQ": 0, "SELFQ": 0, "PACE": 0, "Q8IN": 1}
    assert mmq_direct_q8.invalid_reason(params, "q4_K") is None
    assert mmq_direct_q8.FAMILY.q8_input({"RING": 2, "PDL": 2}) is None  # no GRIDQ 2: the GEMM has a pass of its own
    # the flag's release alone, in the loop's first trip, whatever the champion chose for its count's add and its zeros
    assert mmq_direct_q8.invalid_reason(mmq_direct_q8.FAMILY.q8_input({**champion, "ZLATE": 1}), "q4_K") is None
    device, bound = recorded(params)
    copies = len(bound.x)
    assert copies >= 2 and len(bound.q8_copies) == copies
    passes = device.launches[:]
    assert [(name, grid) for name, grid, *_ in passes] == [("direct_q8_pass", (112, 1, 1))] * copies
    written = [tuple(args[1:4]) for *_, args, _ in passes]
    assert [tuple(args[0:1]) for *_, args, _ in passes] == [(x.ptr,) for x in bound.x]
    assert written == [tuple(buf.ptr for buf in copy) for copy in bound.q8_copies]
    assert len({ptr for w in written for ptr in w}) == 3 * copies  # every copy its own buffers
    for call in range(copies + 1):
        bound.run()
        name, grid, _, args, _ = device.launches[-1]
        assert name == "mmq_direct_q8_gemm (dependent)" and grid == (32, 8, 1)
        assert tuple(args[1:4]) == written[call % copies]
        assert list(args[-4:]) == [bound.x[call % copies].ptr, bound.counters.ptr, bound.flags.ptr, call + 1]
    assert len(device.launches) == copies + copies + 1  # the passes when prepared, then one launch a call


def test_q8in_given_quantized_activations_uploads_them_to_every_input_copy_and_launches_no_pass():
    """A problem whose x is QuantizedActivations (a producer's, here numpy's pass_outputs): every input copy gets the
    three arrays as given, no pass is launched, each call's GEMM reads its copy's; the float x it does not have is a
    one-element placeholder the kernel never reads. A configuration without Q8IN refuses such a problem, and so does
    kernels.mmq where the dispatcher's choice has no q8-input form."""
    from kernels import dispatch
    from kernels.family import Problem
    from tests.recording_device import RecordingDevice, recorded_bound

    rng = np.random.default_rng(8)
    M, K, T = 4096, 14336, 16
    x = rng.standard_normal((T, K)).astype(np.float32)
    given = mmq_direct_q8.QuantizedActivations.of(x)
    for got, want in zip((given.q8, given.d8, given.sums), mmq_direct_q8.pass_outputs(x)):
        np.testing.assert_array_equal(got, want)
    assert given.shape == (T, K) and given.nbytes == T * K + (T * K // 256) * (4 + 32)
    with pytest.raises(ValueError, match=r"d8 is float32\[1, 56, 8\], the pass's layout .* float32\[1, 56, 16\]"):
        mmq_direct_q8.QuantizedActivations(given.q8, given.d8[..., :8].copy(), given.sums)
    with pytest.raises(ValueError, match="sums is float32"):
        mmq_direct_q8.QuantizedActivations(given.q8, given.d8, given.sums.astype(np.float32))
    with pytest.raises(ValueError, match="q8 is int8\\[16, 14000\\]"):  # K not whole super-blocks
        mmq_direct_q8.QuantizedActivations(given.q8[:, :14000].copy(), given.d8, given.sums)
    w = quant.get("q4_K").random_packed(M, K, rng)
    params = mmq_direct_q8.FAMILY.q8_input({"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1})
    device, bound = recorded_bound(mmq_direct_q8.FAMILY, params, Problem(Workload("q4_K", M, K, T), w, given), 112)
    assert device.launches == [] and len(bound.q8_copies) == len(bound.x) >= 2
    for copy in bound.q8_copies:
        for buf, want in zip(copy, (given.q8, given.d8, given.sums)):
            np.testing.assert_array_equal(buf.array, want)
    assert all(x_copy.array.shape == (1,) for x_copy in bound.x)
    for call in range(2):
        bound.run()
        assert tuple(device.launches[-1][3][1:4]) == tuple(buf.ptr for buf in bound.q8_copies[call])
    assert [name for name, *_ in device.launches] == ["mmq_direct_q8_gemm (dependent)"] * 2
    with pytest.raises(ValueError, match="read by the Q8IN form only"):
        recorded_bound(mmq_direct_q8.FAMILY, {**params, "Q8IN": 0}, Problem(Workload("q4_K", M, K, T), w, given))
    with pytest.raises(ValueError, match="runs mmq_base, which reads float32 activations"):  # no champion: mmq_base
        dispatch.mmq(w, "q4_K", given, RecordingDevice(), champions_path="/nonexistent/champions.json")

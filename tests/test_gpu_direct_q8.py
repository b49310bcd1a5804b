"""The int8 direct kernel on the GPU (kernels/cuda/mmq_direct_q8.cu, lever `direct_q8`, every type): parity under the
"int_k" contract (tight against the integer reference on quantize_q8_k's activations, loose against float64),
the output poisoned with NaN first; the pass's three outputs byte for byte against numpy; launch after launch
into the same output (the pass zeroes C every call before the splits' reds; GRIDQ's one launch does the pass's work
and counts the grid's arrivals per launch; CLUSTERQ's range 0 zeroes each tile and publishes the launch's epoch)."""
import numpy as np
import pytest

from gates import parity
from tests.gpu_fixtures import gpu_device, run_once, run_poisoned  # noqa: F401  (fixture)
from tests.test_gpu_mmq import random_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},  # the defaults: 8 warps x 2 CTAs, a 4-deep ring, 8 super-blocks staged, PDL
    {"RING": 2, "PDL": 0},
    {"RING": 3, "XSHARED": 3},  # short ranges: K split many ways, ranges shorter than the ring
    {"WARPS": 4, "MIN_BLOCKS": 4, "RING": 5, "XSHARED": 5},
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 3, "XSHARED": 8, "SPLITK": 3},
    {"BULK": 1},  # one bulk copy per ring slot
    {"BULK": 1, "RING": 3, "XSHARED": 3, "PDL": 0},
    {"GRIDQ": 1, "PDL": 0},  # one launch: the grid quantizes, then meets at the arrival count
    {"GRIDQ": 1, "PDL": 0, "BULK": 1, "RING": 3, "XSHARED": 3},
    {"SBMAJOR": 1},  # the weights super-block major
    {"SBMAJOR": 1, "GRIDQ": 1, "PDL": 0, "BULK": 1},
    {"RING": 2, "SBMAJOR": 1},  # the q4_K tiny champion (perf log run 89)
    {"RING": 2, "SBMAJOR": 1, "L2AHEAD": 3},  # its weights asked of L2 ahead of the ring (a hint: the same numbers)
    {"RING": 3, "XSHARED": 3, "L2AHEAD": 8},  # asks past a short range's end are skipped
    {"CLUSTERQ": 8, "PDL": 0},  # one launch: clusters of 8 quantize their range, range 0 zeroes C's tile
    {"CLUSTERQ": 2, "PDL": 0, "RING": 3, "XSHARED": 3},  # short ranges: many K splits wait for range 0's tile
    {"CLUSTERQ": 1, "PDL": 0, "BULK": 1},  # each CTA quantizes its whole range; the weights by bulk copies
    {"CLUSTERQ": 4, "PDL": 0, "RING": 2, "SBMAJOR": 1, "L2AHEAD": 2},  # the champion's form
    {"RING": 2, "SBMAJOR": 1, "PDL": 2},  # the pass a dependent of the kernel before it (the last call's GEMM)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTHREADS": 64},  # and its CTAs of 64 threads
    {"RING": 4, "SBMAJOR": 1, "PDL": 1, "PASSTRIG": 1},  # the GEMM launched once the pass's reads have landed
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64},  # and the pass a dependent, small CTAs
    {"CLUSTERQ": 8, "PDL": 2, "RING": 2, "SBMAJOR": 1},  # one launch, a dependent of the kernel before
    {"CLUSTERQ": 2, "PDL": 2, "RING": 3, "XSHARED": 3},  # and with short ranges: many K splits wait for range 0's tile
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64, "XPF": 1},  # the pass asks L2 for x first
    {"RING": 3, "XSHARED": 3, "PDL": 2, "XPF": 1, "L2AHEAD": 2},  # and the GEMM for weights past its ring
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTHREADS": 64, "PASSFLAG": 1},  # the GEMM waits on the pass's counters
    {"RING": 3, "XSHARED": 3, "PDL": 2, "PASSFLAG": 2},  # its ring's copies first; many K ranges, each its own count
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64, "PASSFLAG": 1, "XPF": 1},
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2},  # one launch: each K range's CTAs quantize it between them
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1},  # many short ranges, x asked of L2 before the wait
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1},  # a quantizing CTA's ring after its add
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "QFIRST": 1},  # and bulk copies, short ranges
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1},  # the range's sums and scales in smem
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "QFIRST": 1, "SMEMSUMS": 1},  # with short ranges
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "POLLACQ": 1},  # acquire polls
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "RELADD": 1},  # red.release
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "RELADD": 1},  # many ranges wait on flags
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "LOCALQ": 1},  # SB 0 local
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "LOCALQ": 2},  # short ranges: some all local
    {"RING": 2, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "RELADD": 1, "LOCALQ": 2},  # 4 local units a warp
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1},  # q4_K's T=16 champion (run 110)
    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1},  # q4_K's T=16 champion (run 118)
    # K ranges of unequal length (SKEW): 4 ranges (K of 4096: 5, 5, 3, 3 super-blocks; 6144: 7, 7, 5, 5), 3 (6, 5, 5)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "SKEW": 1, "SPLITK": 4},
    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "SKEW": 2, "SPLITK": 3},
    # the range staged by bulk copies (XBULK): the champion's form; short ranges with bulk-copied weights too
    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "XBULK": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "QFIRST": 1, "SMEMSUMS": 1, "XBULK": 1},
    # the weights asked of L2 after the wait for the kernel before (L2LATE): the champion's form asking the whole range
    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "L2AHEAD": 4, "L2LATE": 1},
    # the range's count split at its first super-block (SPLITCOUNT): the T=16 champion's form; short ranges (some of
    # one super-block: nothing past the first to count)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "SPLITCOUNT": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "SPLITCOUNT": 1},
    # only the ring's first slots copied before the count's chain (EARLYSLOTS): the champion's form with a 4-deep ring;
    # short ranges (the late slot past some ranges' end); and with SPLITCOUNT
    {"RING": 4, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "EARLYSLOTS": 1},
    {"RING": 4, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "EARLYSLOTS": 2},
    {"RING": 3, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "SPLITCOUNT": 1, "EARLYSLOTS": 1},
    # the activations as LL lines, no count (LLQ): the T=16 champion's form with 16 warps (10 lines a thread in
    # flight); short ranges; 4 warps (14 lines a thread), each thread's first line polled before the rest (LLQ 2); the
    # 16-warp form so
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
     "LLQ": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "LLQ": 1},
    {"WARPS": 4, "RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "QFIRST": 1, "SMEMSUMS": 1, "LLQ": 2},
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
     "LLQ": 2},
    # each CTA quantizes its own range (SELFQ): the T=16 form (16 warps, a token row a warp, 6 slots of f32 for up to 8
    # super-blocks: refilled past 6); short ranges with one slot, refilled every trip; 8 warps, two rows a warp, two
    # slots; 4 warps, four rows a warp, three slots for ranges of up to 5
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "SELFQ": 6},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "SELFQ": 1},
    {"RING": 2, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "SELFQ": 2},
    {"WARPS": 4, "RING": 3, "XSHARED": 5, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "SELFQ": 3},
    # the first asks of L2 spread over the count's wait (PACE): the T=16 champion's form asking the whole range; short
    # ranges with bulk-copied weights, asks past some ranges' end
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "L2AHEAD": 6, "PACE": 1000},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1, "L2AHEAD": 2, "PACE": 300},
    # the activations quantized before the call, by the pass as their producer would (Q8IN): the T=16 champion's form;
    # short ranges with bulk-copied weights and the range staged by bulk copies
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1, "XBULK": 1, "Q8IN": 1},
    # range 0 zeroes C's tile after its staging is issued (ZLATE) and the other ranges acquire its flag mid-loop
    # (FLAGPEEK): the Q8IN form, the T=16 champion's form, and short ranges (one super-block: the peek at trip 0, where
    # the flag may not be published yet, so the wait after the loop still runs)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "ZLATE": 1, "FLAGPEEK": 1},
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "ZLATE": 1, "FLAGPEEK": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "SMEMSUMS": 1, "ZLATE": 1, "FLAGPEEK": 1, "SPLITK": 24},
    # the Q8IN form with range 0's flag published by its release store alone (RELADD: no MEMBAR.SC before it)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1, "FLAGPEEK": 1},
    # range 0's zeroed tile published in its loop's first trip (ZPUB): the Q8IN form; the T=16 champion's form; short
    # ranges of one super-block (published at the end of the only trip) with bulk copies, and with SPLITCOUNT
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1, "ZPUB": 1, "FLAGPEEK": 1},
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "ZPUB": 1},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "BULK": 1, "QFIRST": 1, "SMEMSUMS": 1, "XBULK": 1, "ZPUB": 1,
     "SPLITK": 24},
    {"RING": 3, "XSHARED": 3, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "SPLITCOUNT": 1, "ZPUB": 1, "SPLITK": 24},
    # the Q8IN form FAMILY.q8_input gives the T=16 champion (RELADD, ZPUB); the champion itself so (its count's add a
    # red.release too)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1, "ZPUB": 1},
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1, "RELADD": 1, "ZPUB": 1},
    # the H100's champion of the gate/up shape (run 146: 16 warps, RELADD, ZPUB), and its Q8IN form
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "QFIRST": 1, "SMEMSUMS": 1,
     "RELADD": 1, "ZPUB": 1},
    {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "SMEMSUMS": 1, "Q8IN": 1, "RELADD": 1,
     "ZPUB": 1},
    # q5_K's champion of that shape (its T=16 champion, QFIRST 0, with RELADD and ZPUB; its Q8IN form is configuration 73)
    {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1, "RELADD": 1, "ZPUB": 1},
]
# odd M (rows past M, a zero-padded last tile), T from 1 to several token tiles (tokens past T), K of 1 to 24
# super-blocks; M not a multiple of 4 (the scalar reds)
SHAPES = [(37, 256, 5), (145, 512, 67), (256, 768, 16), (330, 4096, 1), (77, 6144, 33), (4096, 2048, 16)]
TRACED = [{"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTRIG": 1, "PASSTHREADS": 64},  # the T=16 champion's form
          {"RING": 2, "SBMAJOR": 1, "PDL": 1},  # the pass not a dependent launch: its wait returns at once
          {"RING": 2, "SBMAJOR": 1, "PDL": 2, "PASSTHREADS": 64, "PASSFLAG": 1},  # the GEMM waits on counters
          {"RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2},  # no pass: the GEMM's CTAs quantize
          {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1,
           "LLQ": 1},  # and no count
          {"WARPS": 16, "MIN_BLOCKS": 1, "RING": 2, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2, "XPF": 1, "SMEMSUMS": 1,
           "SELFQ": 6}]  # nothing shared: each CTA quantizes its own range
PRECOMPILE = {"mmq_direct_q8": [{k: v for k, v in c.items() if k != "SPLITK"} for c in CONFIGS]
              + [{**c, "TRACE": 1} for c in TRACED]}


def assert_int_k_parity(got: np.ndarray, prob, where: str) -> None:
    numbers, reason = parity.compare(got, parity.references(prob, "int_k"), parity.TIGHT_TOL)
    assert not reason, f"{where}: {reason} ({numbers})"


# q6_K's and q8_0's decodes (their own layouts, no min) under the launch, staging and count forms the switches give
# (57, SELFQ 6 at 16 warps, fits neither's larger slots; 4, a 3-deep ring at 16 warps, not q8_0's 4352-byte ones: run
# 149's launcher refused it, as it should)
NO_MIN_CONFIGS = {"q6_K": [0, 4, 5, 7, 11, 14, 18, 41, 46, 53, 58, 63, 74, 75, 76],
                  "q8_0": [0, 3, 5, 7, 11, 14, 18, 41, 46, 53, 58, 63, 74, 75, 76]}


@pytest.mark.parametrize("cfg, qtype", [(i, q) for i in range(len(CONFIGS)) for q in ("q4_K", "q5_K")]
                         + [(i, q) for q, configs in NO_MIN_CONFIGS.items() for i in configs])
def test_direct_q8_parity(gpu_device, cfg, qtype):
    from kernels import mmq_direct_q8

    variant = mmq_direct_q8.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, 81])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        assert_int_k_parity(run_once(variant, prob), prob, f"{qtype} {M}x{K}x{T} direct_q8 {CONFIGS[cfg]}")


def test_the_pass_writes_q8_scales_and_sums_byte_for_byte(gpu_device):
    """At T = 67 (several token tiles, a partial last one) and K = 6144: q8, d8 and the sums, each buffer poisoned
    first, against kernels.mmq_direct_q8.pass_outputs (quant.quantize_q8_k in the kernel's layouts)."""
    from kernels import mmq_direct_q8

    variant = mmq_direct_q8.FAMILY.build({}, "q4_K", gpu_device)
    prob = random_problem(np.random.default_rng(82), "q4_K", 256, 6144, 67)
    bound = variant.prepare(prob)
    try:
        q8_buf, d8_buf, sums_buf = bound.scratch
        gpu_device.drv.memset_d8(q8_buf.ptr, 0x80, q8_buf.nbytes)  # -128: a value the quantizer never writes
        gpu_device.fill_nan(d8_buf), gpu_device.fill_nan(sums_buf)
        bound.run()
        want_q8, want_d8, want_sums = mmq_direct_q8.pass_outputs(prob.x)
        np.testing.assert_array_equal(q8_buf.get().reshape(want_q8.shape), want_q8)
        live = live_tokens(want_d8, prob.x.shape[0])
        np.testing.assert_array_equal(d8_buf.get().reshape(want_d8.shape)[live], want_d8[live])
        np.testing.assert_array_equal(sums_buf.get().reshape(want_sums.shape).view(np.uint16), want_sums.view(np.uint16))
    finally:
        bound.release()


def live_tokens(d8: np.ndarray, T: int) -> np.ndarray:
    """A mask of d8's [tile][sb][16] entries that belong to tokens < T (the rest are never written)."""
    tiles, nsb, _ = d8.shape
    token = np.arange(tiles)[:, None, None] * 16 + np.arange(16)[None, None, :]
    return np.broadcast_to(token < T, (tiles, nsb, 16))


@pytest.mark.parametrize("cfg, qtype", [(0, "q4_K"), (4, "q4_K"), (5, "q4_K"), (7, "q4_K"), (8, "q4_K"), (0, "q5_K"),
                                        (11, "q5_K"), (14, "q4_K"), (15, "q4_K"), (17, "q5_K"), (18, "q4_K"),
                                        (18, "q5_K"), (19, "q4_K"), (19, "q5_K"), (20, "q4_K"), (21, "q5_K"),
                                        (22, "q4_K"), (22, "q5_K"), (23, "q4_K"), (24, "q4_K"), (24, "q5_K"),
                                        (26, "q4_K"), (26, "q5_K"), (27, "q4_K"), (28, "q5_K"), (29, "q4_K"),
                                        (29, "q5_K"), (30, "q4_K"), (31, "q4_K"), (31, "q5_K"), (32, "q4_K"), (33, "q4_K"),
                                        (33, "q5_K"), (34, "q5_K"), (35, "q4_K"), (35, "q5_K"), (36, "q4_K"),
                                        (36, "q5_K"), (37, "q4_K"), (38, "q4_K"),
                                        (38, "q5_K"), (39, "q4_K"), (40, "q5_K"), (41, "q4_K"),
                                        (41, "q5_K"), (50, "q4_K"), (51, "q5_K"), (52, "q4_K"), (53, "q4_K"),
                                        (54, "q5_K"), (55, "q4_K"), (56, "q5_K"), (57, "q4_K"), (57, "q5_K"),
                                        (58, "q4_K"), (59, "q5_K"), (60, "q4_K"), (61, "q4_K"),
                                        (62, "q5_K"), (63, "q4_K"), (63, "q5_K"), (64, "q4_K"),
                                        (65, "q4_K"), (66, "q5_K"), (67, "q4_K"), (68, "q5_K"),
                                        (69, "q4_K"), (70, "q5_K"), (71, "q4_K"), (72, "q5_K"),
                                        (73, "q4_K"), (73, "q5_K"), (74, "q4_K"), (74, "q5_K"),
                                        (75, "q4_K"), (76, "q4_K"), (77, "q5_K"), (18, "q6_K"), (41, "q6_K"),
                                        (75, "q6_K"), (18, "q8_0"), (41, "q8_0"), (74, "q8_0")])
def test_launch_after_launch_into_the_same_output(gpu_device, cfg, qtype):
    """Three runs of one bound into a poisoned output: each passes parity (the pass zeroes C before every call's reds;
    GRIDQ: each launch waits for its own epoch's arrivals, not the last launch's; CLUSTERQ: for its own epoch's zeroed
    tiles; PDL 2: each pass waits for the GEMM before it, which it follows as a dependent, before it zeroes C; CLUSTERQ
    with PDL 2: each GEMM waits for the one before before its range 0 zeroes C)."""
    from kernels import mmq_direct_q8

    variant = mmq_direct_q8.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 83]), qtype, 512, 4096, 16)
    bound = variant.prepare(prob)
    try:
        for launch in range(3):
            assert_int_k_parity(run_poisoned(bound), prob, f"launch {launch}")
    finally:
        bound.release()


Q8IN_CONFIGS = [i for i, c in enumerate(CONFIGS) if c.get("Q8IN")]


@pytest.mark.parametrize("qtype", ["q4_K", "q5_K", "q6_K", "q8_0"])
@pytest.mark.parametrize("cfg", Q8IN_CONFIGS)
def test_q8in_calls_read_the_activations_quantized_when_prepared_not_x(gpu_device, cfg, qtype):
    """Q8IN: once the problem is prepared, every float32 input copy on the GPU is overwritten with NaN, and the calls,
    one per copy and one more, still pass parity into a poisoned output: they read the quantized copies the pass wrote
    when the problem was prepared, never x."""
    from kernels import mmq_direct_q8

    variant = mmq_direct_q8.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 85]), qtype, 4096, 2048, 16)
    bound = variant.prepare(prob)
    try:
        gpu_device.synchronize()  # the passes of every copy are done
        for x in bound.x:
            gpu_device.fill_nan(x)
        for call in range(len(bound.x) + 1):
            assert_int_k_parity(run_poisoned(bound), prob, f"call {call}")
    finally:
        bound.release()


def test_kernels_mmq_runs_the_q8in_form_on_activations_quantized_before_the_call(gpu_device, tmp_path):
    """kernels.mmq given QuantizedActivations (numpy's pass_outputs, as a producer would write them) where the promoted
    q4_K champion is the T=16 one (GRIDQ 2): the dispatcher runs its Q8IN form, and the result passes parity against
    the float activations' references; at T=16 and at T=5 (a partial token tile)."""
    from campaign import champions
    from kernels import dispatch, mmq_direct_q8

    champion = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 2, "XSHARED": 8, "SBMAJOR": 1, "PDL": 2, "GRIDQ": 2,
                "SMEMSUMS": 1, "QFIRST": 1, "XPF": 1}
    path = tmp_path / "champions.json"
    champions.promote("direct_q8", champions.key("q4_K", gpu_device.info["arch"], "tiny"),
                      {"lever": "direct_q8", "family": "mmq_direct_q8", "params": champion,
                       "promoted_at": "2026-12-07T00:00:00"}, path=path)
    for T in (16, 5):
        prob = random_problem(np.random.default_rng([T, 86]), "q4_K", 4096, 2048, T)
        got = dispatch.mmq(prob.w_packed, "q4_K", mmq_direct_q8.QuantizedActivations.of(prob.x), gpu_device,
                           champions_path=path)
        assert_int_k_parity(got, prob, f"kernels.mmq on quantized activations, T={T}")


def expected_counts(params: dict, grid: tuple, T: int, K: int) -> np.ndarray:
    """What one launch adds to the counters: GRIDQ 1 one arrival per CTA; GRIDQ 2 a (token tile, K range)'s units, rows x
    super-blocks past the LOCALQ ones; LLQ nothing (kernel grid: x row tiles, y K ranges, z token tiles; the kernel's split of K,
    SKEW's too: a range the kernel made longer or shorter than range_starts says shows in its count)."""
    gx, gy, gz = grid
    if params["GRIDQ"] == 1:
        return np.array([gx * gy * gz])
    from kernels import mmq_direct_q8

    ranges = np.diff(mmq_direct_q8.range_starts(K // 256, gy, params))  # LOCALQ: each CTA quantizes the first ones itself
    if params["LLQ"] or params["SELFQ"] or params["Q8IN"]:  # no count (LLQ: the lines carry the epoch; SELFQ: nothing
        # shared; Q8IN: nothing quantized)
        return np.zeros(gz * len(ranges), np.int64)
    if params["SPLITCOUNT"]:  # two counts a range: its first super-block's units, the rest's
        return np.array([min(16, T - 16 * z) * part for z in range(gz) for n in ranges for part in (1, n - 1)])
    return np.array([min(16, T - 16 * z) * (n - min(params["LOCALQ"], n)) for z in range(gz) for n in ranges])


@pytest.mark.parametrize("cfg", [i for i, c in enumerate(CONFIGS) if c.get("GRIDQ")])
def test_gridq_counts_grow_by_exactly_one_launch_each_launch(gpu_device, cfg):
    """GRIDQ's counts after each of three launches are exactly launch x what one launch adds: one short add would leave
    the next launch waiting (a trap), one extra would let a later launch's CTAs read activations not yet stored (a race
    that parity could miss). Shapes where only some CTAs of a range quantize, or each several units, or none."""
    from kernels import mmq_direct_q8

    params = {**mmq_direct_q8.DEFAULTS, **CONFIGS[cfg]}
    variant = mmq_direct_q8.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    rng = np.random.default_rng([cfg, 84])
    for M, K, T in [(330, 4096, 1), (145, 512, 67), (77, 6144, 33), (4096, 2048, 16)]:
        bound = variant.prepare(random_problem(rng, "q4_K", M, K, T))
        try:
            counter = bound.arrived if params["GRIDQ"] == 1 else bound.counters
            per_launch = expected_counts(params, bound.grid, T, K)
            # (LOCALQ: few super-blocks, all local; LLQ, SELFQ, Q8IN: no count)
            assert per_launch.sum() > 0 or params["LOCALQ"] or params["LLQ"] or params["SELFQ"] or params["Q8IN"]
            for launch in range(1, 4):
                bound.run()
                gpu_device.synchronize()
                np.testing.assert_array_equal(counter.get(), launch * per_launch, err_msg=f"{M}x{K}x{T} launch {launch}")
        finally:
            bound.release()


@pytest.mark.parametrize("cfg", range(len(TRACED)))
def test_trace_records_every_cta_of_every_call_in_dependency_order(gpu_device, cfg):
    """scripts/call_trace.py on the GPU: every CTA of each call's pass and GEMM leaves one record, launch by launch,
    with start <= waited <= ready <= end; the GEMM's wait returns only after its pass's last CTA ended (a dependent
    launch's griddepcontrol.wait; PASSFLAG: only after some pass CTA had its first unit), and with PDL 2 each pass's
    wait only after the GEMM before it ended; GRIDQ 2: every CTA resumes after the GEMM before ended, and a CTA that
    quantized publishes its share after resuming and before its range's count is seen."""
    from tests.test_call_trace import call_trace  # the script, loaded once by its CI tests

    params = TRACED[cfg]
    M, K, T, calls = 1024, 4096, 16, 4
    records, us = call_trace.trace_variant(gpu_device, "q4_K", M, K, T, params, calls=calls, warmup=2)
    assert us > 0 and sorted(records["launch"].unique()) == list(range(records["launch"].min(), records["launch"].min() + calls))
    pass_ctas = 0 if params.get("GRIDQ") else -(-T * (K // 256) * 32 // params.get("PASSTHREADS", 256))
    records["launch"] -= records["launch"].min()
    counts = records.groupby(["kernel", "launch"]).size()
    if pass_ctas:
        assert counts.loc[0].tolist() == [pass_ctas] * calls
    else:  # GRIDQ 2 launches no pass
        assert 0 not in counts.index.get_level_values("kernel")
    gemm_ctas = counts.loc[1].tolist()
    assert len(gemm_ctas) == calls and len(set(gemm_ctas)) == 1
    for kernel, g in records.groupby("kernel"):
        assert sorted(g.groupby("launch")["cta"].apply(lambda c: tuple(sorted(c))).unique()) == \
            [tuple(range(counts.loc[kernel].iloc[0]))]  # each launch's CTAs once each
    assert (records["start"] <= records["waited"]).all() and (records["waited"] <= records["end"]).all()
    ready = records[records["ready"] > 0]
    assert len(ready) == len(records) and (ready["waited"] <= ready["ready"]).all() and (ready["ready"] <= ready["end"]).all()
    if not pass_ctas:  # GRIDQ 2: each GEMM's CTAs quantize only after the GEMM before has ended
        ends = records[records.kernel == 1].groupby("launch")["end"].max().to_numpy()
        resumed = records[records.kernel == 1].groupby("launch")["resumed"].min().to_numpy()
        assert (resumed[1:] >= ends[:-1]).all() and (records["resumed"] > 0).all()
        published = records[records["published"] > 0]  # the CTAs that quantized: after resuming, before the count
        assert len(published) or params.get("SELFQ")  # (SELFQ: no CTA quantizes for another)
        assert (published["resumed"] <= published["published"]).all()
        assert (published["published"] <= published["waited"]).all() and (records["resumed"] <= records["waited"]).all()
        return
    ev = call_trace.events(records)
    first_gemm_wait = records[records.kernel == 1].groupby("launch")["waited"].min()
    first_pass_wait = records[records.kernel == 0].groupby("launch")["waited"].min()
    first_pass_ready = records[records.kernel == 0].groupby("launch")["ready"].min()
    if params.get("PASSFLAG"):  # the GEMM waits for its range's units, published after the first pass CTA's ready
        assert (first_gemm_wait.to_numpy() >= first_pass_ready.to_numpy()).all()
    else:  # griddepcontrol.wait: the whole pass has ended
        assert (first_gemm_wait.to_numpy() >= ev["pass.end"].to_numpy()).all()
    if params["PDL"] == 2:
        assert (first_pass_wait.to_numpy()[1:] >= ev["gemm.end"].to_numpy()[:-1]).all()

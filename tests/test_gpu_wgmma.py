"""Parity of the Hopper wgmma path (kernels/cuda/mmq_wgmma.cu; WS=1: mmq_wgmma_ws.cu; AREG=1:
mmq_wgmma_rs.cu): the f16 path's contract and bound (tests/test_gpu_mmq_f16.py) on every type, at odd tile edges (M, T not multiples of the
tile), 1-3 super-blocks, split K, every BM/BN/STAGES/DEQ choice of the lever's space, output
poisoned with NaN before each launch (run_once)."""
import numpy as np
import pytest

from kernels.family import Problem
from tests.gpu_fixtures import gpu_device, run_once, run_poisoned  # noqa: F401  (fixture)
from tests.test_gpu_mmq import SHAPES, TYPES, random_problem
from tests.test_gpu_mmq_f16 import assert_f16_parity, one_hot_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},
    {"BM": 64, "BN": 16, "STAGES": 3},
    {"BM": 128, "BN": 64, "STAGES": 4, "SPLITK": 2},
    {"BM": 128, "BN": 256, "STAGES": 3, "DEQ": 1},
    {"BM": 64, "BN": 192, "STAGES": 4, "DEQ": 1, "MIN_BLOCKS": 2},
    {"BM": 128, "BN": 8, "STAGES": 4, "SPLITK": 3},
    # warp-specialized (mmq_wgmma_ws.cu): producer warpgroup, mbarrier hand-off, setmaxnreg
    {"WS": 1},
    {"WS": 1, "BM": 64, "BN": 16, "STAGES": 3, "DEQ": 1},
    {"WS": 1, "BM": 128, "BN": 256, "STAGES": 3, "DEQ": 1},
    {"WS": 1, "BM": 128, "BN": 64, "STAGES": 4, "ABUF": 3, "SPLITK": 2},
    {"WS": 1, "BM": 64, "BN": 192, "STAGES": 4, "DEQ": 1, "MIN_BLOCKS": 2},
    # A dequantized into registers (mmq_wgmma_rs.cu): producer copies only, RAW raw slots deep
    {"AREG": 1},
    {"AREG": 1, "BM": 128, "BN": 192, "STAGES": 4},
    {"AREG": 1, "BM": 64, "BN": 16, "STAGES": 4, "RAW": 4},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 2, "RAW": 3, "SPLITK": 2},
    {"AREG": 1, "BM": 64, "BN": 8, "STAGES": 3, "SPLITK": 3},
    {"AREG": 1, "BM": 64, "BN": 32, "RAW": 3, "MIN_BLOCKS": 2},
    {"AREG": 1, "BM": 128, "BN": 128, "X16_INPUT": 1},  # f16 activations in, no conversion pass
    {"AREG": 1, "BM": 128, "BN": 96, "STAGES": 3, "XSYNC": 1},  # the producer fences instead
    {"AREG": 1, "BM": 64, "BN": 48, "STAGES": 2, "RAW": 3, "XSYNC": 1},  # the producer fence with no lag
    # activations pre-tiled by the pass and bulk-copied (XLOAD=1): padded token tiles, split K
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1},
    {"AREG": 1, "BM": 64, "BN": 16, "STAGES": 4, "RAW": 6, "XLOAD": 1, "SPLITK": 3},
    {"AREG": 1, "BM": 128, "BN": 24, "STAGES": 3, "RAW": 3, "XLOAD": 1},
    {"AREG": 1, "BM": 64, "BN": 128, "STAGES": 4, "RAW": 5},
    # TMA tensor map on f16 rows (XLOAD=2): tokens past T zero-filled by the copy engine
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2},
    {"AREG": 1, "BM": 64, "BN": 24, "STAGES": 3, "RAW": 4, "XLOAD": 2, "SPLITK": 2},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "X16_INPUT": 1},  # no pass at all
    # f32 rows converted by the producer (XLOAD=3): no pass, no launch
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3},
    {"AREG": 1, "BM": 64, "BN": 16, "STAGES": 3, "RAW": 3, "XLOAD": 3, "SPLITK": 3},
    {"AREG": 1, "BM": 64, "BN": 8, "STAGES": 4, "RAW": 6, "XLOAD": 3},
]
# deep rings (a narrow tile's activation ring 6-16 steps ahead, 8 raw slots): K long enough that
# both rings wrap more than once per CTA, with and without split K, every activation load
DEEP_RING = [
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 16, "RAW": 4, "XLOAD": 2},
    {"AREG": 1, "BM": 64, "BN": 16, "STAGES": 12, "RAW": 8, "XLOAD": 3, "SPLITK": 3},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 8, "RAW": 6, "XLOAD": 1, "SPLITK": 2},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 6, "RAW": 3, "XLOAD": 2},
]
DEEP_SHAPES = [(200, 4096, 21), (77, 6144, 16)]  # (M, K, T): 64 and 96 steps of 64 k
# K split over a thread-block cluster, partial sums added in distributed shared memory
CLUSTER_SPLIT = [
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "CLUSTER": 4},
    {"AREG": 1, "BM": 64, "BN": 32, "STAGES": 3, "RAW": 3, "XLOAD": 1, "CLUSTER": 2},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "CLUSTER": 2},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 8, "RAW": 4, "XLOAD": 3, "CLUSTER": 4},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "CLUSTER": 4},
]
# activations multicast to a cluster of CTAs along M (MCAST): each copies a share of every chunk
MULTICAST = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "MCAST": 2},
    {"AREG": 1, "BM": 128, "BN": 128, "STAGES": 4, "RAW": 3, "XLOAD": 2, "MCAST": 2},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "MCAST": 4},
    {"AREG": 1, "BM": 64, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 2, "MCAST": 4, "SPLITK": 2},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "MCAST": 2, "X16_INPUT": 1},
    # the cluster along x, where RASTER puts the weight-row tiles
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "MCAST": 2, "RASTER": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "MCAST": 2, "RASTER": 1, "SPLITDEC": 1,
     "X16_INPUT": 1},
]
# M = 330: 3 (BM 128) or 6 (BM 64) row tiles, so the last cluster has a CTA with no rows; K = 4096
# wraps every ring several times, so a slot refilled before all CTAs released it shows
MULTICAST_SHAPES = [(330, 4096, 300), (37, 256, 5), (145, 512, 67)]
# the GEMM as a programmatic dependent launch of its activation pass: a GEMM that read the f16
# activations before the pass wrote them would read the previous problem's (or garbage)
DEPENDENT = [
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 1, "PDL": 1, "SPLITK": 2},
    {"AREG": 1, "BM": 64, "BN": 32, "STAGES": 3, "RAW": 3, "XLOAD": 0, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "PDL": 1, "MCAST": 2},
    # PDL=2: the split-K reduce a dependent of the GEMM (M = 330 and 37 leave the grid short: split K)
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "PDL": 2},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "PDL": 2, "SPLITK": 3},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 2, "XLOAD": 2, "PDL": 2, "MIN_BLOCKS": 2,
     "X16_INPUT": 1},
    # no pass (XLOAD=3): only the reduce is a dependent
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "PDL": 2, "WREUSE": 1},
]
# raw words kept across a super-block's steps (q5_K qh, q6_K odd steps): every regime's tile
WORD_REUSE = [
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "WREUSE": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "WREUSE": 1, "PDL": 2},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "WREUSE": 1},
    {"AREG": 1, "BM": 64, "BN": 32, "STAGES": 3, "RAW": 3, "XLOAD": 2, "WREUSE": 1, "SPLITK": 3},
    # WREUSE=2: kept spread
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "WREUSE": 2, "PDL": 2},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "WREUSE": 2, "RASTER": 1},
    {"AREG": 1, "BM": 64, "BN": 32, "STAGES": 3, "RAW": 3, "XLOAD": 2, "WREUSE": 2, "SPLITK": 3},
]
# persistent CTAs (PERSIST=1) that loop over tiles: 176-192 tiles (more than the 132 SMs' slots, so
# CTAs run two), n = 16 or 20 steps per tile that STAGES = 3 / RAW = 3 do not divide, so each tile
# starts the rings at another slot and phase; odd M and T edges in the last tiles
PERSISTENT = [
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 2, "PERSIST": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 1, "PERSIST": 1, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 2, "XLOAD": 2, "PERSIST": 1, "WREUSE": 1, "PDL": 2},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 2, "XLOAD": 2, "PERSIST": 1, "X16_INPUT": 1},
]
# 16 x 11 and 16 x 10 tiles of 128 x 64; 3 x 2 tiles, too few: the plain grid split 8 ways along K
PERSISTENT_SHAPES = [(2000, 1024, 700), (2048, 1280, 640), (330, 4096, 67)]
# weight-row tiles fastest in the launch order (RASTER=1): the plain grid, the persistent loop, a split K
RASTER = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "RASTER": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 2, "RASTER": 1, "PERSIST": 1},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 2, "RASTER": 1, "PDL": 2},
]
# the next super-block's scale decode spread over steps 1 and 2 (SPLITDEC, q4_K/q5_K): 16 super-blocks
# per CTA, one (K = 256: step 1 must not open a super-block past the end), split K, the persistent
# loop (rings carried from tile to tile), the large-T tile on each activation load, TMA rows fetched
# 256 B per L2 miss (L2PROMO 3)
SPLIT_DECODE = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "SPLITDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "SPLITDEC": 1, "L2PROMO": 3,
     "X16_INPUT": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "SPLITDEC": 1, "RASTER": 1, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "SPLITDEC": 1, "SPLITK": 3, "WREUSE": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 2, "SPLITDEC": 1, "PERSIST": 1},
]
SPLIT_DECODE_TYPES = ["q4_K", "q5_K"]  # (a no-op for q6_K and q8_0: nothing to split)
# stream-K (STREAMK=1; SPLITK=1 so the launcher shares tiles out instead of splitting K): both activation
# loads, both launch orders, BN 64 and 256
STREAM_K = [
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 2, "XLOAD": 2, "STREAMK": 1, "SPLITK": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "STREAMK": 1, "SPLITK": 1, "RASTER": 1,
     "SPLITDEC": 1, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 1, "STREAMK": 1, "SPLITK": 1, "WREUSE": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "STREAMK": 1, "SPLITK": 1, "RASTER": 1,
     "X16_INPUT": 1},
]
# (M, K, T) on 132 SMs, BN 64 / 256: 176 / 48 tiles, 4 super-blocks each, so a tile is shared by 2-3 CTAs
# (BN 256: dp 0); 6 tiles of 16 super-blocks shared by 16 CTAs of one unit each; one super-block per tile
# (every piece a whole tile); 132 / 36 tiles (BN 64: whole waves, the plain grid); odd M and T edges
STREAM_K_SHAPES = [(2000, 1024, 700), (330, 4096, 300), (2000, 256, 700), (1536, 512, 704)]
# accumulators as NSPLIT independent column blocks (n 128 / 64 / 32 / 8 per wgmma): a block's descriptor
# offset or accumulator slice off by one block fails the bound; split K, STREAMK and the persistent loop
# store the same slices
NSPLIT = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "NSPLIT": 2, "PDL": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "NSPLIT": 4, "RASTER": 1, "SPLITDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "NSPLIT": 4, "PDL": 2, "WREUSE": 1},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "NSPLIT": 2},
    {"AREG": 1, "BM": 64, "BN": 128, "STAGES": 3, "RAW": 3, "XLOAD": 1, "NSPLIT": 2, "PERSIST": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "NSPLIT": 2, "STREAMK": 1, "SPLITK": 1},
]
# q4_K/q5_K scales decoded once per CTA by a producer warp (PREDEC; a no-op for q6_K and q8_0): BM 64 and 128
# (2 or 4 rows per decoder lane), the scale decode split over two steps or not, split K, the persistent loop,
# stream-K, and XLOAD 3 (one raw-copy warp beside the decoder)
PREDEC = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "PDL": 1, "RASTER": 1, "SPLITDEC": 1,
     "PREDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "PREDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "PDL": 2, "WREUSE": 1, "PREDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "PREDEC": 1},
    {"AREG": 1, "BM": 64, "BN": 128, "STAGES": 3, "RAW": 3, "XLOAD": 1, "PERSIST": 1, "SPLITDEC": 1, "PREDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "STREAMK": 1, "SPLITK": 1, "PREDEC": 1},
]
# C written as bf16 (BF16_OUTPUT): the huge tile (RASTER, SPLITDEC, PREDEC), the persistent loop, a narrow tile
# on shapes where the plain launcher would split K (the bf16 kernel does not), f16 input by TMA; widths 96 and 48
# (EPI's rounds of 32 and 16 tokens)
BF16_OUT = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "PDL": 1, "RASTER": 1, "SPLITDEC": 1},
    {"AREG": 1, "BM": 64, "BN": 128, "STAGES": 3, "RAW": 3, "XLOAD": 1, "PERSIST": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 4, "RAW": 3, "XLOAD": 2, "PDL": 2, "WREUSE": 1},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "X16_INPUT": 1, "RASTER": 1, "PREDEC": 1},
    {"AREG": 1, "BM": 64, "BN": 96, "STAGES": 3, "RAW": 4, "XLOAD": 2},
    {"AREG": 1, "BM": 128, "BN": 48, "STAGES": 4, "RAW": 3, "XLOAD": 1},
]
# three A register sets (ASETS 3: two wgmma groups in flight, sets rotating over 12 steps, chunks released two steps
# late): 1..3 and 16 / 24 super-blocks (every remainder of the 3-super-block loop), split K, the persistent loop and
# stream-K (whose last two chunks are released after the loop); the bench's 16-bit tile's loop with a 5-deep ring, with
# three sets and two (f32 out: the bf16 epilogue is BF16_OUT's test)
THREE_SETS = [
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "PDL": 1, "RASTER": 1, "SPLITDEC": 1,
     "ASETS": 3},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 5, "RAW": 2, "XLOAD": 2, "X16_INPUT": 1, "RASTER": 1, "SPLITDEC": 1,
     "ASETS": 3},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 5, "RAW": 2, "XLOAD": 2, "X16_INPUT": 1, "RASTER": 1, "SPLITDEC": 1},
    {"AREG": 1, "BM": 128, "BN": 64, "STAGES": 3, "RAW": 3, "XLOAD": 2, "PDL": 2, "WREUSE": 1, "ASETS": 3},
    {"AREG": 1, "BM": 128, "BN": 16, "STAGES": 4, "RAW": 4, "XLOAD": 3, "ASETS": 3},
    {"AREG": 1, "BM": 64, "BN": 128, "STAGES": 3, "RAW": 3, "XLOAD": 1, "PERSIST": 1, "ASETS": 3},
    {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "STREAMK": 1, "SPLITK": 1, "ASETS": 3},
]
# the kernel the dispatcher runs for f16 activations under an XLOAD 1 champion (its last test)
DISPATCH_F16 = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 2, "RASTER": 1, "SPLITDEC": 1}
# the one-hot test's kernels: each shared-memory-A kernel with both dequant maths, the register-A one
ONE_HOT = [{"BM": 128, "BN": 64, "WS": ws, "DEQ": deq} for ws in (0, 1) for deq in (0, 1)] + [
    {"BM": 128, "BN": 64 if xload < 3 else 16, "AREG": 1, "XLOAD": xload} for xload in (0, 1, 2, 3)] + [
    {"BM": 128, "BN": 64, "AREG": 1, "XLOAD": 1, "SPLITDEC": 1},
    {"BM": 128, "BN": 64, "AREG": 1, "XLOAD": 1, "SPLITDEC": 1, "PREDEC": 1}]
# scripts/precompile.py builds these off the GPU
PRECOMPILE = {"mmq_wgmma": CONFIGS + DEEP_RING + CLUSTER_SPLIT + MULTICAST + DEPENDENT + WORD_REUSE + PERSISTENT
              + RASTER + SPLIT_DECODE + STREAM_K + NSPLIT + PREDEC + BF16_OUT + THREE_SETS
              + [{**c, "BF16_OUTPUT": 1, "EPI": e} for c in BF16_OUT for e in (0, 1)] + ONE_HOT + [DISPATCH_F16]}


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_wgmma_parity(gpu_device, qtype, cfg):
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    assert variant.resources["arch"] == "sm_90a"
    check_shapes(variant, qtype, SHAPES, [cfg, TYPES.index(qtype), 90], f"cfg{cfg}")


def check_shapes(variant, qtype: str, shapes: list, seed: list, tag: str) -> None:
    """The f16 bound on fresh random problems of each (M, K, T), output poisoned first."""
    rng = np.random.default_rng(seed)
    for M, K, T in shapes:
        prob = random_problem(rng, qtype, M, K, T)
        assert_f16_parity(run_once(variant, prob), prob, f"{qtype} {M}x{K}x{T} {tag}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(NSPLIT)))
def test_wgmma_column_blocks_cover_the_tile(gpu_device, qtype, cfg):
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(NSPLIT[cfg], qtype, gpu_device)
    shapes = STREAM_K_SHAPES if NSPLIT[cfg].get("STREAMK") else PERSISTENT_SHAPES if NSPLIT[cfg].get("PERSIST") \
        else SHAPES
    check_shapes(variant, qtype, shapes, [cfg, TYPES.index(qtype), 93], f"nsplit{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(THREE_SETS)))
def test_wgmma_three_register_sets_rotate(gpu_device, qtype, cfg):
    """A set overwritten while its wgmma still reads it, a chunk released a step early, or a remainder of the
    3-super-block loop skipped gives wrong sums, and the bound fails."""
    from kernels import mmq_wgmma

    params = THREE_SETS[cfg]
    if reason := mmq_wgmma.invalid_reason(params, qtype, gpu_device.info):
        pytest.skip(reason)  # (the huge tile's 5-deep ring fits q4_K and q5_K only)
    variant = mmq_wgmma.FAMILY.build(params, qtype, gpu_device)
    shapes = STREAM_K_SHAPES if params.get("STREAMK") else PERSISTENT_SHAPES if params.get("PERSIST") \
        else SHAPES + DEEP_SHAPES
    check_shapes(variant, qtype, shapes, [cfg, TYPES.index(qtype), 89], f"asets{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(PREDEC)))
def test_wgmma_scales_decoded_by_the_producer(gpu_device, qtype, cfg):
    """A scale slot read before its decoder wrote it, or rewritten while a consumer still reads it, gives
    another super-block's (or garbage) scales, and the bound fails."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(PREDEC[cfg], qtype, gpu_device)
    shapes = STREAM_K_SHAPES if PREDEC[cfg].get("STREAMK") else PERSISTENT_SHAPES if PREDEC[cfg].get("PERSIST") \
        else SHAPES + DEEP_SHAPES
    check_shapes(variant, qtype, shapes, [cfg, TYPES.index(qtype), 94], f"predec{cfg}")


def bf16_rne(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 (round to nearest even) -> float32, for finite x."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("epi", (0, 1))
@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(BF16_OUT)))
def test_wgmma_bf16_output_is_the_f32_output_rounded(gpu_device, qtype, cfg, epi):
    """BF16_OUTPUT changes only the epilogue: every output is the same kernel's f32 output rounded to nearest
    even, bit for bit (the same accumulation: the f32 kernel without split K), and none is left unwritten.
    EPI 1 (staged through shared memory by stmatrix): a token row or 8-row half misplaced in the transpose,
    or a lane's rows past M (M 77, 145, 330: not multiples of 8), fails the same comparison."""
    from kernels import mmq_wgmma

    f32 = mmq_wgmma.FAMILY.build({**BF16_OUT[cfg], "SPLITK": 1}, qtype, gpu_device)
    bf16 = mmq_wgmma.FAMILY.build({**BF16_OUT[cfg], "BF16_OUTPUT": 1, "EPI": epi}, qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 95])
    shapes = PERSISTENT_SHAPES if BF16_OUT[cfg].get("PERSIST") else SHAPES + DEEP_SHAPES
    for M, K, T in shapes:
        prob = random_problem(rng, qtype, M, K, T)
        if BF16_OUT[cfg].get("X16_INPUT"):
            prob = Problem(prob.workload, prob.w_packed, prob.x.astype(np.float16).astype(np.float32))
        got, want = run_once(bf16, prob), run_once(f32, prob)
        assert not np.isnan(got).any(), f"{qtype} {M}x{K}x{T}: unwritten outputs"
        np.testing.assert_array_equal(got, bf16_rne(want), err_msg=f"{qtype} {M}x{K}x{T} cfg {cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(DEEP_RING)))
def test_wgmma_deep_rings_wrap_correctly(gpu_device, qtype, cfg):
    """A ring slot reused 4-6 times per CTA: a wrong phase parity or slot index would read a
    stale or half-written chunk, and the f16 bound fails."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(DEEP_RING[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, DEEP_SHAPES, [cfg, TYPES.index(qtype), 91], f"deep{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CLUSTER_SPLIT)))
def test_wgmma_cluster_split_sums_every_part(gpu_device, qtype, cfg):
    """The leader CTA adds its cluster's partial sums: a part missed, added twice or read before it is
    written fails the bound. K = 256 leaves all but one CTA of the cluster without a super-block (they
    contribute zeros); K = 4096 / 6144 gives each several. The tile this split left unwritten now and then
    (q6_K in runs 19-20, q4_K 200x4096x21 at configuration 2 in run 49) was a race: a non-leader CTA's
    partial sums overwrote the ring its other warpgroup still read. Three rounds of fresh problems, as a
    race shows only some of the time."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(CLUSTER_SPLIT[cfg], qtype, gpu_device)
    for round_ in range(3):
        check_shapes(variant, qtype, SHAPES + DEEP_SHAPES,
                     [cfg, TYPES.index(qtype), 92, round_], f"cluster{cfg} round {round_}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(MULTICAST)))
def test_wgmma_multicast_feeds_every_cta(gpu_device, qtype, cfg):
    """Each CTA of the cluster sees the whole chunk: a share sent to the wrong offset, a missed
    or double-counted share, or a slot refilled while another CTA still reads it fails the bound."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(MULTICAST[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, MULTICAST_SHAPES, [cfg, TYPES.index(qtype), 93], f"mcast{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(DEPENDENT)))
def test_wgmma_dependent_launch_waits_for_its_pass(gpu_device, qtype, cfg):
    """PDL=1: the GEMM starts before its activation pass ends; each problem's activations are
    new, so reading them before the pass wrote them fails the bound."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(DEPENDENT[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, MULTICAST_SHAPES, [cfg, TYPES.index(qtype), 94], f"pdl{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(WORD_REUSE)))
def test_wgmma_word_reuse_keeps_the_right_words(gpu_device, qtype, cfg):
    """WREUSE=1: a word kept from the wrong step or super-block puts codes at the wrong k and fails
    the bound; K = 4096 runs 16 super-blocks per split."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(WORD_REUSE[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, MULTICAST_SHAPES, [cfg, TYPES.index(qtype), 95], f"wreuse{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(PERSISTENT)))
def test_wgmma_persistent_ctas_carry_their_rings_across_tiles(gpu_device, qtype, cfg):
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(PERSISTENT[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, PERSISTENT_SHAPES, [cfg, TYPES.index(qtype), 96], f"persist{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(RASTER)))
def test_wgmma_raster_stores_every_tile_where_it_belongs(gpu_device, qtype, cfg):
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(RASTER[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, PERSISTENT_SHAPES, [cfg, TYPES.index(qtype), 97], f"raster{cfg}")


@pytest.mark.parametrize("qtype", SPLIT_DECODE_TYPES)
@pytest.mark.parametrize("cfg", range(len(SPLIT_DECODE)))
def test_wgmma_split_decode_keeps_each_group_scale(gpu_device, qtype, cfg):
    """SPLITDEC=1: a scale pair decoded into a register still in use, or from the wrong super-block,
    scales 32 weights wrongly and fails the bound."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(SPLIT_DECODE[cfg], qtype, gpu_device)
    shapes = PERSISTENT_SHAPES if SPLIT_DECODE[cfg].get("PERSIST") else MULTICAST_SHAPES
    check_shapes(variant, qtype, shapes, [cfg, TYPES.index(qtype), 98], f"splitdec{cfg}")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(STREAM_K)))
def test_wgmma_stream_k_adds_every_piece_once(gpu_device, qtype, cfg):
    """STREAMK=1: a piece added twice, lost, or summed before its CTA wrote it fails the bound; the
    output is poisoned first, so a tile nobody stored fails too."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(STREAM_K[cfg], qtype, gpu_device)
    check_shapes(variant, qtype, STREAM_K_SHAPES, [cfg, TYPES.index(qtype), 99], f"streamk{cfg}")


@pytest.mark.parametrize("cfg", [0, 1])
def test_wgmma_stream_k_gives_the_same_sum_launch_after_launch(gpu_device, cfg):
    """STREAMK=1, one bound launched three times into a poisoned output: the same C bit for bit each
    time (each tile's counter is back at zero after every launch, and the last CTA adds the pieces in
    CTA order whoever it is), and it is a stream-K grid (sk_ctas > 0)."""
    from kernels import mmq_wgmma

    variant = mmq_wgmma.FAMILY.build(STREAM_K[cfg], "q4_K", gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 100]), "q4_K", 2000, 1024, 700)
    bound = variant.prepare(prob)
    try:
        assert bound.sk_ctas > 0
        first = run_poisoned(bound)
        assert_f16_parity(first, prob, f"streamk{cfg} launch 1")
        for _ in range(2):
            np.testing.assert_array_equal(run_poisoned(bound), first)
    finally:
        bound.release()


def test_wgmma_one_hot_reproduces_f16_weights(gpu_device):
    """x = e_k rows: each output is one dequantized weight in f16 (DEQ=0: the f32 dequantizer's
    value rounded once; DEQ=1 and the register-A kernel: the fused f16 q * sw16 - mn16), so a
    swizzle, descriptor or fragment-layout error moves values between (row, k) positions and fails."""
    from kernels import mmq_wgmma

    rng = np.random.default_rng(7)
    for qtype in TYPES:
        for deq in (0, 1):
            prob, want = one_hot_problem(rng, qtype, M=200, K=512, T=128, deq=deq)
            for kernel in ONE_HOT:
                if mmq_wgmma.full_params(kernel)["DEQ"] != deq:  # AREG=1 computes as DEQ=1
                    continue
                got = run_once(mmq_wgmma.FAMILY.build(kernel, qtype, gpu_device), prob)
                np.testing.assert_array_equal(got, want, err_msg=f"{qtype} {kernel}")  # exact: one product per output


def test_the_dispatcher_reads_f16_activations_as_they_are(gpu_device, tmp_path):
    """kernels.dispatch.mmq with float16 x and a wgmma champion that reads pass-tiled chunks (XLOAD 1):
    the call runs it on the f16 rows by TMA (X16_INPUT=1, XLOAD 2), within the f16 bound of the same x."""
    from campaign import champions
    from kernels import dispatch
    from kernels.family import Problem

    path = tmp_path / "champions.json"
    params = {"AREG": 1, "BM": 128, "BN": 256, "STAGES": 4, "RAW": 2, "XLOAD": 1, "RASTER": 1, "SPLITDEC": 1}
    champions.promote("wgmma", champions.key("q4_K", gpu_device.info["arch"], "large"),
                      {"lever": "wgmma", "family": "mmq_wgmma", "params": params,
                       "promoted_at": "2026-12-03T00:00:00"}, path=path)
    prob = random_problem(np.random.default_rng(101), "q4_K", 330, 1024, 300)
    x16 = prob.x.astype(np.float16)
    got = dispatch.mmq(prob.w_packed, "q4_K", x16, gpu_device, champions_path=path)
    assert_f16_parity(got, Problem(prob.workload, prob.w_packed, x16.astype(np.float32)), "dispatch f16 x")

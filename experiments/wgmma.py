"""Lever `wgmma`: the Hopper path (sm_90a). The searched kernel is the register-A one
(kernels/cuda/mmq_wgmma_rs.cu): a producer warpgroup copies raw ggml weight blocks (cp.async,
`RAW` slots deep) and brings f16 activations into a 128B-swizzled ring (XLOAD: 1 one bulk copy
per chunk the activation pass wrote pre-tiled, 2 TMA on f16 rows, 3 f32 rows converted by the
producer itself, no pass); each consumer warp dequantizes its 16 weight rows straight into wgmma
A fragments (scales applied, exact f16 codes) while its previous `wgmma.mma_async` (A from
registers, B from shared memory, f32 accumulators) runs. Searched: tile (BM weight rows x BN
tokens), activation ring depth (up to 16 steps ahead where the chunks are small), raw weight
slots, activation load, CTAs per SM (MIN_BLOCKS: at small T a 16-token tile needs few
registers, and two CTAs per SM hide more latency), cluster size (1: split-K, where the grid is
short of a wave, is chosen at launch and reduced by a second kernel; 2/4, K split over a cluster
that adds its partial sums in distributed shared memory, builds and passes parity since run 52 but is
not searched: it never won a study), activation multicast
(MCAST 2/4 CTAs along M share each activation chunk, one copy from L2 for all of them), and
whether the GEMM is a programmatic dependent launch of its activation pass (PDL), whether
q5_K/q6_K threads keep raw words that later steps read again (WREUSE), and whether one CTA per
SM loops over the output tiles with its rings running on between them (PERSIST), and the launch
order of the tiles (RASTER: token tiles or weight-row tiles fastest), whether q4_K/q5_K spread the
next super-block's scale decode over two steps (SPLITDEC), and how much an L2 miss of the TMA's
row-major activations fetches (L2PROMO), and whether the last wave's tiles are shared out over every SM
(STREAMK), and in how many independent accumulator column blocks a warpgroup's wgmmas alternate (NSPLIT), and whether a
producer warp decodes the q4_K/q5_K scales once per CTA (PREDEC), and how many A register sets a consumer
rotates (ASETS: 3 keeps two wgmma groups in flight).
(XLOAD 0, cp.async rows, and its fence placement XSYNC lost to all three in run 12: not searched.)
Its incumbent is the int8 mma.sync MMQ; the dispatcher prefers it wherever it is promoted."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_wgmma

LEVER = Lever(
    name="wgmma",
    family="mmq_wgmma",
    backend="cuda",
    space={
        "BM": [64, 128],
        "BN": [16, 32, 64, 128, 192, 256],
        "STAGES": [2, 3, 4, 6, 8, 16],  # 6-16: the deep activation rings of narrow token tiles
        "RAW": [2, 3, 4, 5, 6],
        "XLOAD": [1, 2, 3],
        "MIN_BLOCKS": [1, 2],
        # K split over a thread-block cluster, summed in distributed shared memory: 2 and 4 build (their race,
        # the unwritten tiles of runs 19-20 and 49, fixed in run 52) but are not searched: they never won a study
        "CLUSTER": [1],
        "MCAST": [1, 2, 4],  # CTAs along M that share one multicast copy of each activation chunk
        "PDL": [0, 1, 2],  # GEMM starts while its pass runs (programmatic dependent launch); 2: the reduce too
        "WREUSE": [0, 1, 2],  # q5_K/q6_K raw words kept across a super-block's steps, not reloaded (2: kept spread)
        "PERSIST": [0, 1],  # one CTA per SM slot loops over the tiles (where K is not split)
        "RASTER": [0, 1],  # 1: weight-row tiles fastest in the launch order (activations shared in L2)
        "SPLITDEC": [0, 1],  # 1: q4_K/q5_K scale decode spread over two steps (no-op for q6_K, q8_0)
        "L2PROMO": [2, 3],  # XLOAD 2's tensor maps: 128 or 256 B fetched into L2 per miss
        "STREAMK": [0, 1],  # 1: the last wave's tiles shared out over every SM (pieces summed by the last CTA)
        "NSPLIT": [1, 2, 4],  # independent accumulator column blocks per warpgroup, their wgmmas alternating
        "PREDEC": [0, 1],  # 1: q4_K/q5_K scales decoded once per CTA by a producer warp (no-op for q6_K, q8_0)
        "ASETS": [2, 3],  # 3: three A register sets, two wgmma groups in flight while the next step dequantizes
    },
    fixed={"AREG": 1, "SPLITK": 0, "XSYNC": 0},
    defaults={**mmq_wgmma.heuristic_params(4096), "MIN_BLOCKS": 1, "CLUSTER": 1, "MCAST": 1, "PDL": 0, "WREUSE": 0,
              "PERSIST": 0, "RASTER": 0, "SPLITDEC": 0, "L2PROMO": 2,
              "STREAMK": 0, "NSPLIT": 1, "PREDEC": 0, "ASETS": 2},
    suite="dense",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    valid=lambda params, info, qtype: mmq_wgmma.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("HGMMA",),
    description="weights dequantized into wgmma A registers (sm_90a), f16 activations by copy engine or in-kernel, f32",
)

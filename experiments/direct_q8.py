"""Lever `direct_q8`: the `direct` lever's few-token q4_K GEMM on int8 tensor cores (kernels/cuda/mmq_direct_q8.cu),
and q5_K (its fifth bit from qh, one SHF and two LOP3 more per A word), and q6_K (its sub-blocks of 16 a k16 IMMA
each, the A bytes q6 - 32 sign-extended from six bits, no min; the weights in its own 210-byte layout), and q8_0
(its int8 weights the A words as they are, a k32 IMMA a block, each block's f16 scale applied in f32).
The f16 direct kernel spends ~331 instructions per super-block and warp (perf log runs 69-81), in a loop that issues
about every other cycle: each weight pair is a LOP3 and an HFMA2, each k16 step an HMMA. With int8 activations and
one scale per 256 (quant.quantize_q8_k, parity "int_k") a weight word is one LOP3 (q or 16 q as u8), a k32 step one
IMMA, the sub-block scales exact integer IMADs, and the f32 work once per super-block; the staged activations take
half the shared memory, so 2 CTAs per SM keep a deeper ring. Searched: warps per CTA, CTAs per SM, ring depth,
staged super-blocks (which set the K split), whether a ring slot is one bulk copy, whether the call is one launch (the
grid quantizes, GRIDQ), the weights' order in memory (SBMAJOR), how many super-blocks each warp asks of L2 ahead of its
ring (L2AHEAD), whether the call is one launch whose clusters quantize their K range once each (CLUSTERQ), whether
the GEMM is a dependent launch of its pass and the pass one of the kernel before it (PDL), the pass's CTA size,
when the pass lets the GEMM launch (PASSTRIG), whether the pass asks L2 for its x while it waits (XPF), whether the
GEMM waits on counters the pass publishes rather than on its grid (PASSFLAG), whether a CTA that quantizes (GRIDQ 2)
copies its ring's first weights after its count's add (QFIRST), and whether GRIDQ 2 stages its range's scales and sums
in shared memory (SMEMSUMS), polls its count with acquire loads (POLLACQ), releases it with no sequentially
consistent fence (RELADD), has each CTA quantize its range's first super-blocks itself (LOCALQ), counts its first
super-block apart from the rest (SPLITCOUNT), copies only its ring's first slots before the count's chain and the
rest after the staging (EARLYSLOTS), asks L2 for weights only after the kernel before has ended (L2LATE),
stages the range by bulk copies (XBULK), makes the K ranges started first longer than the ones started last (SKEW)
stores the activations as LL lines that carry the launch's epoch, so that no count is needed (LLQ; measured
and not promoted, runs 128-131), or has each CTA quantize its own range from f32 rows copied into shared memory, with
nothing shared and no count (SELFQ, how many super-blocks of f32 slots; measured and not promoted, run 133), or
spreads its first asks of L2 over the wait for its range's count, one every PACE ns (PACE; measured and not
promoted, run 138), and when range 0 zeroes C's tile (before its activations' copies, or after them: ZLATE)
or publishes it (at once, or in its loop's first trip: ZPUB), and when the other ranges acquire the flag that says
it is zeroed (after their loop, or halfway through it: FLAGPEEK). Runs 140-142 measured the three on the T=16
champion and on its Q8IN form: none is promoted for the champion; the Q8IN form takes ZPUB (q8_input).
Not searched: Q8IN, the activations quantized before the call by their producer. It changes what the call is given,
not how it runs, so a trial with it would not be comparable with its incumbent's; the bench's `champion_q8in` line
times the champion in that form beside the `champion` line.
Its incumbent is the `direct` champion of the regime (q5_K, which `direct` lacks: the `wgmma` champion,
campaign.incumbents)."""
from experiments.base import Lever
from kernels import mmq_direct_q8

LEVER = Lever(
    name="direct_q8",
    family="mmq_direct_q8",
    backend="cuda",
    space={
        "WARPS": [4, 8, 16],
        "MIN_BLOCKS": [1, 2, 3, 4],
        "RING": [2, 3, 4, 5, 6],  # super-blocks per warp's ring: RING - 1 in flight
        "XSHARED": [4, 6, 7, 8],  # staged super-blocks (K splits at least super-blocks / XSHARED ways)
        "PDL": [0, 1, 2],  # 1: the GEMM a dependent launch of its pass; 2: and the pass of the kernel before it
        "BULK": [0, 1],  # each ring slot one bulk copy on an mbarrier, not 144 cp.async pieces
        "GRIDQ": [0, 1, 2],  # one launch, the grid quantizes: 1 meets at a grid-wide count (PDL 0), 2 per K range (PDL 2)
        "SBMAJOR": [0, 1],  # the weights super-block major: each loop step reads one contiguous run of slots
        "L2AHEAD": [0, 1, 2, 3, 4],  # super-blocks asked of L2 past the ring: the first ones while the pass runs
        "CLUSTERQ": [0, 1, 2, 4, 8],  # one launch: clusters of that many CTAs along M quantize their range (PDL 0, 2)
        "PASSTHREADS": [256, 128, 64],  # the pass's CTAs: a 64-thread one fits on an SM beside two GEMM CTAs
        "PASSTRIG": [0, 1],  # 1: the pass lets the GEMM launch once its x reads have landed, not as it starts
        "XPF": [0, 1],  # 1 (PDL 2): the pass asks L2 for its x before it waits for the kernel before it
        "PASSFLAG": [0, 1, 2],  # 1, 2 (PDL 2): the GEMM waits on counters the pass publishes, not on its grid
        "QFIRST": [0, 1],  # 1 (GRIDQ 2): a CTA that quantizes copies its ring after its count's add, not before
        "SMEMSUMS": [0, 1],  # 1 (GRIDQ 2): the range's scales and sums in shared memory, not read from L2 by every warp
        "POLLACQ": [0, 1],  # 1 (GRIDQ 2): every poll of the range's count an acquire load (no extra load after the last)
        "RELADD": [0, 1],  # 1 (GRIDQ 2): the count's add one red.release, range 0's flag a release store, no MEMBAR.SC
        "LOCALQ": [0, 1, 2],  # n (GRIDQ 2, SMEMSUMS): each CTA quantizes its range's first n super-blocks itself
        "SPLITCOUNT": [0, 1],  # 1 (GRIDQ 2, SMEMSUMS): the range's count split at its first super-block
        "EARLYSLOTS": [0, 1, 2],  # n (GRIDQ 2): the ring's first n slots before the count's chain, the rest after it
        "L2LATE": [0, 1],  # 1 (GRIDQ 2, L2AHEAD): the first asks of L2 made after the wait for the kernel before
        "XBULK": [0, 1],  # 1 (GRIDQ 2, SMEMSUMS): the range's activations staged by bulk copies, not cp.async pieces
        "SKEW": [0, 1, 2, 3],  # n (GRIDQ 2): the K ranges started first n super-blocks longer, the last n shorter
        "LLQ": [0, 1, 2],  # 1, 2 (GRIDQ 2, SMEMSUMS): the activations as LL lines carrying the epoch, no count (2: a
        # thread polls its first line before asking for the rest)
        "SELFQ": [0, 1, 2, 4, 6, 7],  # n (GRIDQ 2, SMEMSUMS): each CTA quantizes its own range, n slots of f32 rows
        "PACE": [0, 500, 1000, 2000],  # ns (GRIDQ 2, L2AHEAD): the first asks of L2 one per PACE ns in the count's wait
        "ZLATE": [0, 1],  # 1 (GRIDQ 2): range 0 zeroes C's tile once its activations' copies are issued
        "FLAGPEEK": [0, 1],  # 1 (GRIDQ 2): the other ranges acquire range 0's flag mid-loop, not before their reds
        "ZPUB": [0, 1],  # 1 (GRIDQ 2): range 0 publishes its zeroed tile in its loop's first trip, not before staging
    },
    fixed={"SPLITK": 0},
    defaults=dict(mmq_direct_q8.DEFAULTS),
    suite="dense_tiny",
    types=mmq_direct_q8.QTYPES,
    incumbent="direct",
    valid=lambda params, info, qtype: mmq_direct_q8.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA",),  # (q4_K / q5_K add the min term by one HMMA; q6_K and q8_0 have none)
    description="q4_K, q5_K, q6_K, q8_0 weights straight into int8 mma.sync fragments, activations int8 with one "
                "scale per 256 (few tokens)",
)

"""Launcher of the int8 direct-fragment kernel (kernels/cuda/mmq_direct_q8.cu, lever `direct_q8`; q4_K .. q6_K, q8_0):
the `direct` kernel's few-token structure (each warp streams its 16-row weight tile through its own cp.async ring; the CTA
stages its K range's activations once; a split K's CTAs add into C with reds) on int8 tensor cores, with the
activations quantized to int8 with one scale per 256 values (kernels.quant.quantize_q8_k; parity mode "int_k").
Its loop is ~288 instructions per super-block and warp (16 IMMA, 2 HMMA) where the f16 kernel's is ~331 (34 HMMA).
q6_K (tile_weights_q6_k): its 16 sub-blocks of 16 are 32 k16 IMMAs a super-block, each A word sign-extended from six bits.
q8_0 (tile_weights_q8_0): its weights are the A words as they are, a k32 s8 IMMA a block, its f16 d applied in f32.

Parameters (compile time unless said):
  WARPS       warps per CTA, 16 weight rows each
  MIN_BLOCKS  CTAs per SM the registers are capped for
  RING        super-blocks in each warp's cp.async ring (RING - 1 in flight while one is multiplied): int8
              activations take half the f16 path's shared memory, so 2 CTAs per SM hold a 4-deep ring
  XSHARED     super-blocks of activations a CTA stages; K is split at least ceil(super-blocks / XSHARED) ways
  PDL         1: the GEMM is a programmatic dependent launch of its activation pass (its weights stream while the
              pass runs); 2: and the pass a dependent launch of whatever precedes it (a call's GEMM lets the next
              call's pass launch as it starts; the pass waits for the kernel before it to end before it reads x or
              zeroes C), so the pass's launch hides behind the kernel before it (run 92: the pass costs 23 % at T=16)
  BULK        1: each ring slot is one bulk copy by lane 0 (the copy engine), completing on the slot's mbarrier,
              instead of 144 16-byte cp.async spread over the warp's lanes (5 per lane, each padded by the compiler)
  GRIDQ       1 (PDL 0): one launch. The GEMM's warps do the pass's work (each a (token, super-block) of the whole
              matrix, and C zeroed) while their first weights stream, then every CTA waits at a grid-wide arrival
              count (a monotonic counter: launch e waits for e x CTAs) before staging its range. Every CTA must be
              resident at once: the launcher refuses a grid the GPU does not hold in one wave.
              2 (PDL 2): one launch that is a dependent of the kernel before it (its ring's first copies, and with XPF
              its x asked of L2, before it waits for that kernel), without a grid-wide wait: the CTAs of each token
              tile and K range quantize that range's units between them (a warp a unit), each CTA that quantized
              adds its units to the range's counter, and every CTA waits for its own range's count (launch e: e x the
              range's units; run 108: counting CTAs made a range wait for all of them); range 0's CTA
              of each tile zeroes C's tile and publishes the epoch, which the other ranges wait for before their reds.
              Run 105's trace: a call with a pass spends ~2.3 us in the two handoffs around it; this form has one
  QFIRST      1 (GRIDQ 2): a CTA that quantizes copies its ring's first slots only after it added its units to the
              range's count, whose release fence would otherwise wait for those copies in flight (run 99: a fence
              waits for the thread's copies); the CTAs that quantize nothing copy theirs at once
  SMEMSUMS    1 (GRIDQ 2): the range's scales and sums are copied into shared memory with its activations (one copy a CTA)
              instead of every warp reading them from L2 at every super-block (GRIDQ 2 wrote them in this launch, so not
              through the read-only path, whose L1 hits the pass-fed kernel gets): run 109's trace had GRIDQ 2 stream
              q4_K 14336x4096 1.5x slower than the champion, all of a K range's 896 warps on the same lines of L2
  POLLACQ     1 (GRIDQ 2): every poll of the range's count is an acquire load, so the poll that sees the count ends the
              wait (0: relaxed polls and then one acquire load, an L2 round trip more on every CTA's critical path);
              each acquire drops the SM's L1, which holds nothing the loop reads (weights, activations and, with
              SMEMSUMS, the sums all come by cp.async)
  RELADD      1 (GRIDQ 2): a CTA's add to its range's count is one red.release (MEMBAR.ALL.GPU, then the RED) instead
              of __threadfence's sequentially consistent MEMBAR.SC.GPU and an atomic add: the waiting CTAs acquire the
              count, so a release is all they need, and the add is on every CTA's critical path. Range 0's flag is
              then published by its release store alone, with no MEMBAR.SC.GPU before it (Q8IN: this is all it does)
  LOCALQ      n = 1..2 (GRIDQ 2, SMEMSUMS 1, BULK 0): each CTA quantizes the first n super-blocks of its range for its 16
              tokens itself, straight into its shared memory (all the range's CTAs the same ones: n x 16 KB of x read
              from L2 by each, loaded together with the warp's first shared unit: one round trip), and the range's CTAs
              share only the rest through the count, which each CTA waits for just before its super-block n. Its first
              n super-blocks need no global round trip (store, release, count, acquire, copy back: ~4.5 us from the
              kernel before's end, runs 109-112), so their weights stream while the count comes. Measured and not
              promoted (runs 113-114: 7-8 % slower; an L2 round trip under the weight stream takes 2.5-3 us)
  CLUSTERQ    n = 1, 2, 4, 8 (PDL 0 or 2): one launch, no pass. The n CTAs of a thread-block cluster along M (one K
              range and token tile) quantize the range's f32 activations once, each a share, into every member's
              shared memory (st.async, completing on the member's mbarrier: no release fence, no cluster-wide barrier;
              run 99: the barrier's fence waited for the ring's copies); the first K range's CTA of each tile zeroes
              its tile of C and publishes the launch's epoch in the tile's flag, and the other ranges' CTAs wait for it
              before their reds (run 90: the pass and the GEMM's wait for it are 20 % of the T=16 call). Each warp's
              first units of x (up to 4, loaded together) are asked for before its ring's first weight copies (PDL 2:
              the GEMM is a dependent launch of the kernel before it, and asks for them right after waiting for it).
              The launcher rounds the row tiles' CTAs up to a multiple of n (the extra warps stream the last tile and
              store nothing) and splits K for at most 90 % of the GPU's CTA slots: clusters pack into GPCs with slots
              left over (run 97, H100: 30 clusters of 8 at 2 CTAs per SM, 240 of 264 slots), and a grid past that runs
              a second, nearly empty wave
  SBMAJOR     1: the weights uploaded super-block major, [K / 256][M / 16][16][144]: at each loop step the warps of a
              K range read one contiguous run of slots, as a pure read walks memory (0: each warp its own run)
  L2AHEAD     super-blocks past its ring each warp asks L2 for (cp.async.bulk.prefetch.L2, one per slot), the first
              L2AHEAD before the GEMM waits for its pass, then one per loop step: the weights stream while the pass
              runs, bounded (run 71's whole-range prefetch flooded DRAM ahead of the pass's own loads)
  SPLITCOUNT  1 (GRIDQ 2, SMEMSUMS 1; LOCALQ, XBULK, BULK, RELADD 0): the range's count in two, its first super-block's
              units (numbered super-block first: at T=16 two CTAs of 8 warps quantize them) and the rest's; a CTA
              stages the first super-block once its count is seen and the rest in the loop's second trip once the
              other count is (run 118: the range's one count waits for the last of its 14 quantizing CTAs, 0.8-1.8 us
              after the median one). Measured and not promoted (runs 125-126, H100: 0-1 % slower, 5 % at 4096x4096;
              run 136, H200: 3-11 % slower at T=16)
  EARLYSLOTS  n = 1 .. RING - 2 (GRIDQ 2; LOCALQ, XBULK, BULK 0): only the ring's first n slots are copied before
              the count's chain (as the CTA starts, or after its add with QFIRST), the other RING - 1 - n right after
              the range's activations are staged (0: all RING - 1 before): a deep ring for the weight stream without
              its bytes in the chain's window (RING 4 streamed faster than RING 2 on an H100, run 118, and lengthened
              the chain on an H200, runs 123-124: every byte asked for during the chain delays it)
  L2LATE      1 (GRIDQ 2, L2AHEAD > 0): the first L2AHEAD asks made once the kernel before has ended (a CTA that
              quantizes: after its count's add), not as the CTA starts: run 118's trace had DRAM idle from the ring's
              first slots landing to the first super-block (~4 us), while asks made at the start slow the kernel
              before's last CTAs, which everything waits for. Measured and not promoted (run 121: 10-20 % slower;
              bytes asked during the count's chain lengthen it more than they save)
  XBULK       1 (GRIDQ 2, SMEMSUMS 1, LOCALQ 0): the range's activations, sums and scales staged by the copy engine, a
              bulk copy per token row issued by warp 0 as the count is seen, landing on one mbarrier, instead of ~2000
              16-byte cp.async queued behind the SM's own weight copies (run 118: 1.8 us from the count seen to the
              first super-block, an L2 hit's round trip). Measured and not promoted (run 120: 16 % slower; the bulk
              copies land later, so the wait is not the SM's own queue)
  SKEW        n = 1..3 (GRIDQ 2): the K ranges started first (low blockIdx.y) take up to n super-blocks more and the
              last ones as many fewer, within XSHARED and a quarter of a range at most (range_starts): a call's CTAs
              start in blockIdx order as the call before's leave, and run 118's trace had the last-started end ~1.7
              us after the first, the call lasting until its last CTA ends. Measured and not promoted (run 119, H100:
              5 % slower; one super-block a CTA is twice the gap, so the order reverses; run 136, H200: 8 % slower at
              the anchor, the halves even but the stream bound by bytes, not by the last CTA)
  LLQ         1, 2 (GRIDQ 2, SMEMSUMS 1; LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, RELADD, POLLACQ 0): no count. Each
              unit is stored as NCCL's LL lines (16 bytes, {data, epoch, data, epoch}: each 8-byte half stored and
              loaded whole, so a half carrying the launch's epoch carries its data), 37 a unit (its 64 int8 words, its
              4 lanes' sums, its scale; LL_UNIT_BYTES), each storing thread fencing its own, with no barrier and no
              add; each CTA loads its range's lines into shared memory by strong loads (a thread's lines all in flight
              at once, at most 32, ll_lines_per_thread) and, while some are stale, polls one stale line alone and then
              asks for the stale ones again. The loop reads the lines' data words (twice the activations' bytes in L2
              and shared memory; at 8 warps the 19 lines a thread spill, so the T=16 form has 16 warps). 2: the thread
              polls so before its first loads too. Measured and not promoted (runs 128-131, H100: 1.3-1.4x slower at
              T=16; the range is staged 3-4 us after the last producer's fence returned, where the count's copy lands
              ~1 us after its count is seen)
  SELFQ       n = 1..XSHARED (GRIDQ 2, SMEMSUMS 1; LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, LLQ, RELADD, POLLACQ,
              QFIRST, L2LATE, PROBE 0): no count, no activations in global memory. Each CTA quantizes its own K range
              for its 16 tokens: the f32 rows come by bulk copies (a token row and super-block each, issued by warp 0)
              into n slots of 16 KB in shared memory, each landing on its own mbarrier; in trip s the warps quantize
              super-block s + 1 (a token row a warp) while the trip's weights are in flight, and one CTA barrier a
              trip hands it over and frees its slot for super-block s + 1 + n. Every CTA of a range reads its x (16 KB
              a super-block, 4x the int8 bytes: 14.7 MB from L2 at q4_K 4096x14336 T=16 with 16 warps), but the
              first super-block waits for one copy, not for the count's chain (store, fence, add, count seen, copy:
              ~4.5 us of L2 round trips under the weight stream, runs 116-121). With XPF the range's rows are asked of
              L2 before the wait for the kernel before, row r by the range's CTA r mod gridDim.x. Measured and not
              promoted (run 133, H100: 1.4-1.7x slower at T=16; a super-block's rows took 4-5 us to copy, more than
              the count's whole chain, and the stream 15-17 us against 9: the x bytes every CTA reads, on the same
              lines as the range's other CTAs)
  PACE        ns (GRIDQ 2, L2AHEAD > 0; L2LATE, LOCALQ, LLQ, SELFQ 0): each warp's first L2AHEAD asks of L2 made while
              its CTA waits for the range's count, one every PACE ns (warps 1 .. WARPS - 1, staggered; warp 0's thread
              0 polls), until the count is seen; the asks the wait leaves are not made, and the loop's one a step go
              on from the last one made. DRAM carries ~4 MB of the anchor's 33 in the ~5.6 us before its first
              super-block (run 136), and bursts of asks (L2AHEAD, L2LATE, deeper rings) lengthened that chain by more
              than they saved: spread out, the bytes may stream under it with shallow queues. Measured and not
              promoted (run 138, H100: 12-35 % slower at T=16; the count seen 0.3 us later, the stream 1.8 us longer)
  Q8IN        1 (GRIDQ 2; XPF, QFIRST, POLLACQ, LOCALQ, SPLITCOUNT, LLQ, SELFQ, PACE 0): the activations arrive
              quantized, in the pass's layout (pass_outputs), written by their producer before the call: the call is
              the GEMM alone, one dependent launch that zeroes C as GRIDQ 2 does, with no unit to quantize and no
              count to wait for. The launcher quantizes each input copy once, when the problem is prepared, with the
              pass kernel (as a producer would), outside every timed call. It is the form a norm or GLU kernel that
              writes Q8_1 feeds, and the one quantization that GEMMs reading the same x (Q, K, V; gate, up) share;
              q8_input() gives a champion's configuration in it
  ZLATE       1 (GRIDQ 2): range 0 zeroes C's tile once its activations' copies are issued, just before its loop,
              not before them, so that the staging does not wait for the zeroing's fence (run 139, H100: Q8IN took
              1.0-1.8 us over the same GEMM with no zeroing, NOPASS). Measured (run 140): slower at 4096x14336 (+0.8
              us on Q8IN, +1.1 on the champion), the fence then waiting for the staging's copies too; faster only on
              4096x4096's two-super-block ranges (-0.4 us, Q8IN)
  FLAGPEEK    1 (GRIDQ 2): the other ranges' CTAs acquire range 0's flag halfway through their loop (thread 0, after
              that trip's copies are issued, while its warp waits for its slot), not after it: the acquire's round
              trip overlaps the stream instead of standing before the reds (a flag not yet published is waited for
              after the loop, as before). Measured (runs 140-142, H100, T=16): -0.1 to -0.3 us at 4096x14336, +0.0 to
              +0.2 on 4096x4096; not promoted
  ZPUB        1 (GRIDQ 2; ZLATE, LOCALQ, LLQ, SELFQ, PROBE 0): range 0 stores C's zeroed tile where it would zero it,
              but publishes it (thread 0's release) at the end of its loop's first trip, whose CTA barrier has
              ordered every thread's zeros: the release's fence then waits for a slot that the second trip waits for
              anyway, not in front of the staging (run 141's trace, H100, Q8IN with RELADD: range 0's CTAs had their
              first super-block 1.3 us after the others' and ended last). Run 142: Q8IN 0.3-0.5 us faster on the
              long-K shapes, range 0 ready with the others (q8_input takes it); the champion +4 % at the anchor
  PROBE       timing probes, not kernels (wrong numbers): 1 the loop only streams the weights (one word of each
              landed slot read); 2 no loop (the prologue's copies, the pass, the reds: the call's fixed cost)
  PASSFLAG    1, 2 (PDL 2): the GEMM does not wait for its pass's grid to end (griddepcontrol.wait and the flush behind
              it cost 1.0-1.3 us a call, run 105): each pass warp publishes its unit on a counter of its token tile and
              K range, each GEMM CTA waits for its own range's count (1: before its ring's first copies, which then do
              not queue ahead of the pass's x reads; 2: after them), and the pass's CTAs count themselves done (C
              zeroed) on one more counter that the GEMM waits for before its reds. Counts grow by a call's units each
              call (a launch e waits for e x its range's units, mod 2^32); the GEMM may start only once every pass CTA
              has (it is the pass's dependent launch), so its waiting CTAs never keep the pass from the GPU
  TRACE       a timing probe (the same numbers, a little later; scripts/call_trace.py): 1 each CTA of the pass and
              of the GEMM records %globaltimer at its start, after its wait for the kernel before, when its first
              work is ready, and at its end, in the module's dq8_trace (not with GRIDQ 1 or CLUSTERQ)
  NOPASS      launch time, a timing probe too (wrong numbers: the GEMM reads whatever the buffers hold and C is not
              zeroed): 1 launches the GEMM alone, no activation pass, so a bench row beside the same configuration
              says what the pass and the GEMM's wait for it cost per call
  PASSONLY    launch time, the other timing probe (C is not computed): 1 launches the pass alone, so a bench row says
              what the pass itself takes per call, beside NOPASS's GEMM alone and the whole call
  PASSTHREADS launch time: threads per pass CTA, 256, 128 or 64. The pass takes 39 registers, so a 256-thread CTA
              (40 x 256 allocated) does not fit on an SM beside two GEMM CTAs of <= 112 (2 x 28672 + 10240 > 65536);
              a 64-thread one does, three of them: the GEMM's CTAs are placed while the pass runs, and with PDL 2 the
              next call's pass while the GEMM runs (run 93: PDL 2 lost where the GEMM fills every SM)
  PASSTRIG    1 (PDL >= 1): each pass CTA lets the GEMM launch only once its first activations are in registers,
              not as it starts: the GEMM's weight copies then do not queue in DRAM ahead of the pass's x reads, which
              the GEMM waits for (0: at once; the GEMM's first slots and the pass's reads share DRAM)
  XPF         1 (PDL 2): the pass asks L2 for its x (a bulk prefetch per unit) before it waits for the kernel before
              it, so its reads after the wait hit L2 rather than queue in DRAM behind the next GEMM's first weight
              copies (run 92: every weight byte asked for while the pass reads x delayed the pass). A hint: L2 is
              coherent, so lines fetched before that kernel writes x are made current by its writes
  SPLITK      launch time; 0: the fewest splits that fit XSHARED, or more to fill one wave
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernels import mmq_base

MMQ_DIRECT_Q8_CU = Path(__file__).parent / "cuda" / "mmq_direct_q8.cu"
TOKEN_TILE = 16
TILE_ROWS = 16  # a warp's weight tile
QTYPES = ("q4_K", "q5_K", "q6_K", "q8_0")
# the bytes of 256 weights of a row (q8_0: 8 blocks of 34); a ring slot is a warp tile's 16 of them
BLOCK_BYTES = {"q4_K": 144, "q5_K": 176, "q6_K": 210, "q8_0": 272}
WARP_COUNTS = (2, 4, 8, 12, 16)
DEFAULTS = {"WARPS": 8, "MIN_BLOCKS": 2, "RING": 4, "XSHARED": 8, "PDL": 1, "BULK": 0, "GRIDQ": 0, "SBMAJOR": 0,
            "L2AHEAD": 0, "CLUSTERQ": 0, "PROBE": 0, "NOPASS": 0, "PASSONLY": 0, "PASSTHREADS": 256, "PASSTRIG": 0,
            "XPF": 0, "PASSFLAG": 0, "TRACE": 0, "QFIRST": 0, "SMEMSUMS": 0, "POLLACQ": 0, "RELADD": 0, "LOCALQ": 0,
            "SPLITCOUNT": 0, "EARLYSLOTS": 0, "L2LATE": 0, "XBULK": 0, "SKEW": 0, "LLQ": 0, "SELFQ": 0, "PACE": 0,
            "Q8IN": 0, "ZLATE": 0, "FLAGPEEK": 0, "ZPUB": 0, "SPLITK": 0}
COMPILE_KEYS = ("WARPS", "MIN_BLOCKS", "RING", "XSHARED", "PDL", "BULK", "GRIDQ", "SBMAJOR", "L2AHEAD", "CLUSTERQ",
                "PASSTRIG", "XPF", "PASSFLAG", "QFIRST", "SMEMSUMS", "POLLACQ", "RELADD", "LOCALQ", "SPLITCOUNT",
                "EARLYSLOTS", "L2LATE", "XBULK", "SKEW", "LLQ", "SELFQ", "PACE", "Q8IN", "ZLATE", "FLAGPEEK", "ZPUB",
                "PROBE", "TRACE")
CLUSTER_SIZES = (0, 1, 2, 4, 8)  # CLUSTERQ: 0 the pass; else CTAs per cluster (8: the portable most)
CLUSTER_SLOT_SHARE = 0.9  # CLUSTERQ's grid fills at most this share of the CTA slots: one wave of whole clusters
X_ROW_PAD = 64
LL_LINES = 37  # LLQ: a unit's 16-byte lines, 32 of int8 words, 4 of sums, 1 of its scale
LL_UNIT_BYTES = 16 * LL_LINES
LL_ROW_PAD = 16  # LLQ: a staged token row's padding (rows 16 bytes apart modulo 128: no bank conflicts)
X_SLOT_BYTES = TOKEN_TILE * 256 * 4  # SELFQ: a slot of f32 activations, a super-block of the 16-token tile
# SELFQ excludes the count's options (it has no count) and every other way of staging the activations
SELFQ_EXCLUDES = ("LOCALQ", "SPLITCOUNT", "EARLYSLOTS", "XBULK", "BULK", "LLQ", "RELADD", "POLLACQ", "QFIRST", "L2LATE",
                  "PROBE")
# on/off options of GRIDQ 2's count and staging: what each does, as an invalid configuration is told
GRIDQ2_SWITCHES = {"QFIRST": "a CTA that quantizes copies its ring after its count's add",
                   "SMEMSUMS": "the range's scales and sums staged in shared memory",
                   "POLLACQ": "each poll of the range's count an acquire load",
                   "RELADD": "the count's add one red.release, no sequential fence",
                   "ZLATE": "range 0 zeroes C's tile once its activations' copies are issued",
                   "FLAGPEEK": "the other ranges acquire range 0's flag mid-loop"}
# Q8IN has no units to quantize and no count: the options of either are off (RELADD stays: with no count, it drops the
# sequentially consistent fence before range 0's flag, whose release store alone publishes the zeroed tile)
Q8IN_EXCLUDES = ("XPF", "QFIRST", "POLLACQ", "LOCALQ", "SPLITCOUNT", "LLQ", "SELFQ", "PACE")
# ZPUB publishes range 0's zeros in the loop's first trip, after its barrier: not where they are zeroed late (ZLATE),
# nor where that trip has no CTA barrier after them (LOCALQ, LLQ, SELFQ) or no loop (PROBE)
ZPUB_EXCLUDES = ("ZLATE", "LOCALQ", "LLQ", "SELFQ", "PROBE")
PACE_EXCLUDES = ("L2LATE", "LOCALQ", "LLQ", "SELFQ")  # PACE's asks are made in the count's wait, which these move or drop
PASS_THREADS = (256, 128, 64)  # PASSTHREADS: the pass's CTA sizes (a warp per unit, any count of warps)


def full_params(params: dict) -> dict:
    """With the derived tile: BM = 16 rows per warp times WARPS, BN = the 16-token tile."""
    p = {**DEFAULTS, **params}
    return {**p, "BM": TILE_ROWS * p["WARPS"], "BN": TOKEN_TILE}


def smem_bytes(params: dict, qtype: str = "q4_K") -> int:
    """kSmemBytes in mmq_direct_q8.cu: each warp's ring of 16-row slots and the 16 staged token rows (256 bytes per
    super-block); CLUSTERQ, SMEMSUMS: the range's sums (8 bytes per token, super-block and t, rows padded by 4) and
    scales."""
    p = full_params(params)
    slot_bytes = TILE_ROWS * BLOCK_BYTES[qtype]
    shared_sums = p["CLUSTERQ"] or p["SMEMSUMS"]
    ll = 2 if p["LLQ"] else 1  # LLQ: every staged word an LL line's half, every sums uint2 and every scale a line
    sum_bytes, scale_bytes = (16, 16) if p["LLQ"] else (8, 4)
    sums = TOKEN_TILE * (p["XSHARED"] * 4 + 4) * sum_bytes + p["XSHARED"] * TOKEN_TILE * scale_bytes if shared_sums else 0
    row_pad = LL_ROW_PAD if p["LLQ"] else X_ROW_PAD
    return (p["RING"] * p["WARPS"] * slot_bytes + TOKEN_TILE * (p["XSHARED"] * 256 * ll + row_pad) + sums
            + p["SELFQ"] * X_SLOT_BYTES)


def static_smem_bytes(params: dict) -> int:
    """The GEMM's static shared memory: BULK's mbarriers, one per ring slot of each warp (8 bytes each), CLUSTERQ's
    or XBULK's one for the activations' arrival (8 bytes) and PACE's flag (4 bytes), which ptxas places together in
    a 16-byte slot, and SELFQ's one per slot of f32 activations (8 bytes each, rounded up to 16)."""
    p = full_params(params)
    ring_barriers = 8 * p["WARPS"] * p["RING"] if p["BULK"] else 0
    small = (8 if p["CLUSTERQ"] or p["XBULK"] else 0) + (4 if p["PACE"] else 0)
    selfq_barriers = 16 * -(-p["SELFQ"] // 2)  # two 8-byte mbarriers a 16-byte slot
    return ring_barriers + 16 * -(-small // 16) + selfq_barriers


def invalid_reason(params: dict, qtype: str, device_info: dict | None = None) -> str | None:
    p = full_params(params)
    if qtype not in QTYPES:
        return f"mmq_direct_q8: {qtype} has no int8 direct-fragment decoder (has {', '.join(QTYPES)})"
    if p["WARPS"] not in WARP_COUNTS:
        return f"WARPS={p['WARPS']} is not one of {WARP_COUNTS}"
    if not 2 <= p["RING"] <= 8:
        return f"RING={p['RING']} is not 2..8 super-blocks"
    if not 1 <= p["XSHARED"] <= 16:
        return f"XSHARED={p['XSHARED']} is not 1..16 super-blocks"
    if p["SBMAJOR"] not in (0, 1):
        return f"SBMAJOR={p['SBMAJOR']} is not 0 (tile major) or 1 (super-block major weights)"
    if p["NOPASS"] not in (0, 1) or (p["NOPASS"] and p["GRIDQ"]):
        return f"NOPASS={p['NOPASS']}: 0, or a timing probe 1 (the GEMM without its pass; not with GRIDQ, which has none)"
    if not 0 <= p["L2AHEAD"] <= 8:
        return f"L2AHEAD={p['L2AHEAD']} is not 0..8 super-blocks asked of L2 ahead of the ring"
    if p["PROBE"] not in (0, 1, 2):
        return f"PROBE={p['PROBE']}: 0, or a timing probe 1 (stream only) / 2 (no loop), wrong numbers"
    if p["BULK"] not in (0, 1):
        return f"BULK={p['BULK']} is not 0 (cp.async pieces) or 1 (one bulk copy per ring slot)"
    if p["GRIDQ"] not in (0, 1, 2) or (p["GRIDQ"] == 1 and p["PDL"]) or (p["GRIDQ"] == 2 and p["PDL"] != 2) \
            or (p["GRIDQ"] and (p["PASSTRIG"] or p["PASSFLAG"])):
        return (f"GRIDQ={p['GRIDQ']}: 0, 1 with PDL 0 or 2 with PDL 2 (one launch: no pass to depend on, so neither "
                f"PASSTRIG nor PASSFLAG)")
    if p["CLUSTERQ"] not in CLUSTER_SIZES or (p["CLUSTERQ"] and (p["PDL"] == 1 or p["GRIDQ"] or p["NOPASS"]
                                                                 or p["PASSTRIG"])):
        return (f"CLUSTERQ={p['CLUSTERQ']}: 0, or 1, 2, 4, 8 CTAs per cluster with PDL 0 or 2, GRIDQ 0, NOPASS 0 and "
                f"PASSTRIG 0 (one launch: no pass)")
    if p["PASSONLY"] not in (0, 1) or (p["PASSONLY"] and (p["NOPASS"] or p["GRIDQ"] or p["CLUSTERQ"])):
        return f"PASSONLY={p['PASSONLY']}: 0, or a timing probe 1 (the pass alone; not with NOPASS, GRIDQ or CLUSTERQ)"
    if p["PASSTHREADS"] not in PASS_THREADS:
        return f"PASSTHREADS={p['PASSTHREADS']} is not one of {PASS_THREADS} (threads per pass CTA)"
    if p["PASSTRIG"] not in (0, 1) or (p["PASSTRIG"] and not p["PDL"]):
        return f"PASSTRIG={p['PASSTRIG']}: 0, or 1 with PDL 1 or 2 (the pass lets its dependent GEMM launch late)"
    if p["XPF"] not in (0, 1) or (p["XPF"] and (p["PDL"] != 2 or p["CLUSTERQ"] or p["GRIDQ"] == 1)):
        return (f"XPF={p['XPF']}: 0, or 1 with PDL 2, CLUSTERQ 0 and GRIDQ 0 or 2 (x asked of L2 before a wait for the "
                f"kernel before)")
    if p["PASSFLAG"] not in (0, 1, 2) or (p["PASSFLAG"] and (p["PDL"] != 2 or p["CLUSTERQ"] or p["GRIDQ"]
                                                             or p["NOPASS"])):
        return (f"PASSFLAG={p['PASSFLAG']}: 0, or 1 / 2 with PDL 2, CLUSTERQ 0, GRIDQ 0 and NOPASS 0 (a pass whose "
                f"counters the GEMM waits on)")
    for name, what in GRIDQ2_SWITCHES.items():
        if p[name] not in (0, 1) or (p[name] and p["GRIDQ"] != 2):
            return f"{name}={p[name]}: 0, or 1 with GRIDQ 2 ({what})"
    if p["LOCALQ"] not in range(3) or (p["LOCALQ"] and (p["GRIDQ"] != 2 or not p["SMEMSUMS"] or p["BULK"])):
        return (f"LOCALQ={p['LOCALQ']}: 0, or 1..2 super-blocks with GRIDQ 2, SMEMSUMS 1 and BULK 0 (each CTA "
                f"quantizes its range's first super-blocks itself)")
    if p["SPLITCOUNT"] not in (0, 1) or (p["SPLITCOUNT"] and (p["GRIDQ"] != 2 or not p["SMEMSUMS"] or p["LOCALQ"]
                                                                or p["XBULK"] or p["BULK"] or p["RELADD"])):
        return (f"SPLITCOUNT={p['SPLITCOUNT']}: 0, or 1 with GRIDQ 2, SMEMSUMS 1, LOCALQ 0, XBULK 0, BULK 0 and RELADD 0 "
                f"(the range's count split at its first super-block)")
    if p["EARLYSLOTS"] not in range(p["RING"] - 1) or (p["EARLYSLOTS"] and (
            p["GRIDQ"] != 2 or p["LOCALQ"] or p["XBULK"] or p["BULK"])):
        return (f"EARLYSLOTS={p['EARLYSLOTS']}: 0, or 1..RING - 2 ({p['RING'] - 2}) with GRIDQ 2, LOCALQ 0, XBULK 0 and "
                f"BULK 0 (the ring's first slots copied before the count's chain, the rest after the staging)")
    if p["L2LATE"] not in (0, 1) or (p["L2LATE"] and (p["GRIDQ"] != 2 or not p["L2AHEAD"])):
        return (f"L2LATE={p['L2LATE']}: 0, or 1 with GRIDQ 2 and L2AHEAD > 0 (the first asks of L2 made after the wait "
                f"for the kernel before)")
    if p["XBULK"] not in (0, 1) or (p["XBULK"] and (p["GRIDQ"] != 2 or not p["SMEMSUMS"] or p["LOCALQ"])):
        return (f"XBULK={p['XBULK']}: 0, or 1 with GRIDQ 2, SMEMSUMS 1 and LOCALQ 0 (the range's activations staged by "
                f"bulk copies)")
    if p["LLQ"] not in (0, 1, 2) or (p["LLQ"] and (p["GRIDQ"] != 2 or not p["SMEMSUMS"] or any(
            p[k] for k in ("LOCALQ", "SPLITCOUNT", "EARLYSLOTS", "XBULK", "BULK", "RELADD", "POLLACQ")))):
        return (f"LLQ={p['LLQ']}: 0, or 1..2 with GRIDQ 2, SMEMSUMS 1 and LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, "
                f"RELADD, POLLACQ 0 (the activations as LL lines, no count)")
    if p["LLQ"] and ll_lines_per_thread(p) > 32:
        return (f"LLQ={p['LLQ']}: {ll_lines_per_thread(p)} lines a thread (16 rows x XSHARED={p['XSHARED']} super-blocks "
                f"x {LL_LINES} over {32 * p['WARPS']} threads); at most 32: more warps or fewer staged super-blocks")
    if p["SELFQ"] not in range(p["XSHARED"] + 1) or (p["SELFQ"] and (
            p["GRIDQ"] != 2 or not p["SMEMSUMS"] or any(p[k] for k in SELFQ_EXCLUDES))):
        return (f"SELFQ={p['SELFQ']}: 0, or 1..XSHARED ({p['XSHARED']}) slots with GRIDQ 2, SMEMSUMS 1 and "
                f"{', '.join(SELFQ_EXCLUDES)} 0 (each CTA quantizes its own range: no count)")
    if p["PACE"] < 0 or (p["PACE"] and (p["GRIDQ"] != 2 or not p["L2AHEAD"] or any(
            p[k] for k in PACE_EXCLUDES))):
        return (f"PACE={p['PACE']}: 0, or ns between a warp's asks of L2 with GRIDQ 2, L2AHEAD > 0 and "
                f"{', '.join(PACE_EXCLUDES)} 0 (the first asks spread over the wait for the range's count)")
    if p["Q8IN"] not in (0, 1) or (p["Q8IN"] and (p["GRIDQ"] != 2 or any(p[k] for k in Q8IN_EXCLUDES))):
        return (f"Q8IN={p['Q8IN']}: 0, or 1 with GRIDQ 2 and {', '.join(Q8IN_EXCLUDES)} 0 (the activations arrive "
                f"quantized: nothing to quantize or count)")
    if p["ZPUB"] not in (0, 1) or (p["ZPUB"] and (p["GRIDQ"] != 2 or any(p[k] for k in ZPUB_EXCLUDES))):
        return (f"ZPUB={p['ZPUB']}: 0, or 1 with GRIDQ 2 and {', '.join(ZPUB_EXCLUDES)} 0 (range 0's zeroed tile "
                f"published in its loop's first trip)")
    if p["SKEW"] not in range(4) or (p["SKEW"] and p["GRIDQ"] != 2):
        return f"SKEW={p['SKEW']}: 0, or 1..3 super-blocks with GRIDQ 2 (the K ranges started first made longer)"
    if p["TRACE"] not in (0, 1) or (p["TRACE"] and (p["GRIDQ"] == 1 or p["CLUSTERQ"])):
        return f"TRACE={p['TRACE']}: 0, or a timing probe 1 (with GRIDQ 0 or 2 and CLUSTERQ 0)"
    if p["PDL"] not in (0, 1, 2):
        return (f"PDL={p['PDL']} is not 0, 1 (the GEMM a dependent launch of its pass) or 2 (and the pass one of what "
                f"precedes it)")
    if not 1 <= p["MIN_BLOCKS"] <= 8:
        return f"MIN_BLOCKS={p['MIN_BLOCKS']} outside 1..8"
    return mmq_base.smem_limit_reason(smem_bytes(p, qtype) + static_smem_bytes(p), device_info or {})


def ll_lines_per_thread(params: dict) -> int:
    """LLQ: the most LL lines a thread of the GEMM stages (kLLPerThread): 16 token rows x XSHARED super-blocks x 37."""
    p = full_params(params)
    return -(-TOKEN_TILE * p["XSHARED"] * LL_LINES // (32 * p["WARPS"]))


def range_starts(nsb: int, ranges: int, params: dict) -> list[int]:
    """Where each of the kernel's K ranges begins, and K's end (range_begin in mmq_direct_q8.cu): nsb super-blocks split
    evenly, then SKEW of them moved from each range in the later half to one in the earlier half, as many as XSHARED
    allows and at most a quarter of an even range (a 3:1 split of 4096x4096's ranges of 2 would undo what it gains)."""
    p = full_params(params)
    skew = max(0, min(p["SKEW"], p["XSHARED"] - -(-nsb // ranges), nsb // ranges // 4))
    return [y * nsb // ranges + skew * min(y, ranges - y) for y in range(ranges + 1)]


def tile_weights(w_packed: np.ndarray, sb_major: bool = False, qtype: str = "q4_K") -> np.ndarray:
    """The kernel's weight layout of q4_K rows [M, K / 256 x 144] (q5_K: x 176): the direct kernel's warp tiles of 16 rows
    (kernels.mmq_direct.tile_weights: [M / 16][K / 256][16 rows][block], or super-block major), each row's 128 qs bytes
    permuted so that lane t of a quad reads its A fragments' bytes as 32 contiguous ones at qs + 32 t: for chunk c (32 qs
    bytes) bytes 8c .. 8c + 3 are qs[32c + 4t ..] and 8c + 4 .. 8c + 7 are qs[32c + 16 + 4t ..]. q5_K's 32 qh bytes (bit j
    of qh[l]: the fifth bit of element l of sub-block j) are permuted alike, so that lane t reads the two words its qs
    words need, qh[4t ..] and qh[16 + 4t ..], as 8 contiguous bytes at 16 + 8 t."""
    from kernels import mmq_direct

    if qtype == "q6_K":
        return tile_weights_q6_k(w_packed, sb_major)
    if qtype == "q8_0":
        return tile_weights_q8_0(w_packed, sb_major)
    block = BLOCK_BYTES[qtype]
    m, row_bytes = w_packed.shape
    blocks = w_packed.reshape(m, row_bytes // block, block).copy()
    qs_at = block - 128
    qs = blocks[..., qs_at:].reshape(m, -1, 4, 2, 4, 4)  # [row, sb, chunk c, half h, lane t, byte i]: qs[32c + 16h + 4t + i]
    blocks[..., qs_at:] = qs.transpose(0, 1, 4, 2, 3, 5).reshape(m, -1, 128)  # -> [row, sb, t, c, h, i]
    if qtype == "q5_K":
        qh = blocks[..., 16:48].reshape(m, -1, 2, 4, 4)  # [row, sb, half h, lane t, byte i]: qh[16h + 4t + i]
        blocks[..., 16:48] = qh.transpose(0, 1, 3, 2, 4).reshape(m, -1, 32)  # -> [row, sb, t, h, i]
    return mmq_direct.tile_weights(blocks.reshape(m, row_bytes), TILE_ROWS, sb_major, block)


def tile_weights_q6_k(w_packed: np.ndarray, sb_major: bool = False) -> np.ndarray:
    """The kernel's layout of q6_K rows [M, K / 256 x 210], the same 210 bytes a row: the warp tiles of 16 rows as
    tile_weights, each 3360-byte slot in four parts, [16 rows][128] low nibbles, [16][64] high bit pairs, [16][16]
    scales, [16] d (f16), so that every lane's loads are aligned. Lane t of a quad reads its A fragments' low nibbles as
    32 bytes at 128 r + 32 t: for chunk c (32-blocks 2c, 2c + 1) and part p (k 0..15, 16..31 of a 32-block), byte
    8c + 4p + i is element 64c + 16p + 4t + i (low nibble) and element 64c + 32 + 16p + 4t + i (high nibble). Its high
    bits are 16 bytes at 2048 + 64 r + 16 t: byte 4c + i holds, at bits 2f .. 2f + 1 (f = 2 jj + p), the high pair of
    element 64c + 32 jj + 16p + 4t + i, XOR 2: so the six bits are q6 - 32 in two's complement (q6 XOR 32), and the
    kernel sign-extends them to the int8 A bytes."""
    m, row_bytes = w_packed.shape
    nsb = row_bytes // 210
    blocks = w_packed.reshape(m, nsb, 210)
    ql = blocks[..., :128].reshape(m, nsb, 2, 2, 32)  # [row, sb, half n, ql[64n + 32h + l]]
    qh = blocks[..., 128:192].reshape(m, nsb, 2, 1, 32)  # [row, sb, half n, qh[32n + l]]
    # element 128 n + 32 g + l: low nibble of ql[64n + 32 (g & 1) + l] (g >= 2: its high one), high pair bits 2g of qh
    low = np.concatenate([ql & 0xF, ql >> 4], axis=3)  # [row, sb, n, g, l]
    high = np.concatenate([(qh >> (2 * g)) & 3 for g in range(4)], axis=3) ^ 2
    low = low.reshape(m, nsb, 4, 2, 2, 4, 4)  # [row, sb, c, jj, p, t, i]: element 64c + 32jj + 16p + 4t + i
    high = high.reshape(m, nsb, 4, 2, 2, 4, 4)
    nibbles = (low[:, :, :, 0] | (low[:, :, :, 1] << 4)).transpose(0, 1, 4, 2, 3, 5).reshape(m, nsb, 128)  # [t, c, p, i]
    pairs = sum(high[:, :, :, jj, p] << (2 * (2 * jj + p)) for jj in range(2) for p in range(2))  # [row, sb, c, t, i]
    pairs = pairs.astype(np.uint8).transpose(0, 1, 3, 2, 4).reshape(m, nsb, 64)  # [t, c, i]
    rows = np.concatenate([nibbles, pairs, blocks[..., 192:210]], axis=2).reshape(m, row_bytes)
    return tiled_in_parts(rows, 210, (128, 192, 208), sb_major)


def tile_weights_q8_0(w_packed: np.ndarray, sb_major: bool = False) -> np.ndarray:
    """The kernel's layout of q8_0 rows [M, K / 32 x 34], the same 272 bytes per 256 weights: the warp tiles of 16 rows
    as tile_weights, each 4352-byte slot in two parts, [16 rows][256] weights and [16 rows][8] d (f16), so that every
    lane's loads are aligned. Lane t of a quad reads its A fragments as 64 bytes at 256 r + 64 t: for block j, bytes
    8j .. 8j + 3 are qs[4t ..] and 8j + 4 .. 8j + 7 are qs[16 + 4t ..] of block j (k 4t .., 16 + 4t ..)."""
    m, row_bytes = w_packed.shape
    nsb = row_bytes // 272
    blocks = w_packed.reshape(m, nsb, 8, 34)
    qs = blocks[..., 2:].reshape(m, nsb, 8, 2, 4, 4)  # [row, sb, j, p, t, i]: qs[16p + 4t + i] of block j
    weights = qs.transpose(0, 1, 4, 2, 3, 5).reshape(m, nsb, 256)  # -> [t, j, p, i]
    rows = np.concatenate([weights, blocks[..., :2].reshape(m, nsb, 16)], axis=2).reshape(m, row_bytes)
    return tiled_in_parts(rows, 272, (256,), sb_major)


def tiled_in_parts(rows: np.ndarray, block: int, cuts: tuple[int, ...], sb_major: bool) -> np.ndarray:
    """Rows of `block`-byte super-blocks in the warp tiles of tile_weights, each slot's 16 rows cut at `cuts` and
    stored part by part ([16][part 0], [16][part 1], ...), so that every part of every row starts aligned."""
    from kernels import mmq_direct

    tiled = mmq_direct.tile_weights(rows, TILE_ROWS, sb_major, block)
    slots = tiled.reshape(-1, TILE_ROWS, block)
    edges = (0, *cuts, block)
    parts = [slots[..., a:b].reshape(len(slots), -1) for a, b in zip(edges, edges[1:])]
    return np.concatenate(parts, axis=1).reshape(tiled.shape)


def pass_outputs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What direct_q8_pass writes for float32 activations x [T, K], emulated in numpy (quant.quantize_q8_k's values in
    the kernel's layouts): q8 [T, K] int8 with each 64-k chunk's 16 words transposed 4 x 4; d8 [T / 16 tiles (rounded
    up)][K / 256][16] float32 (tokens past T: 0 here, never read into an output); sums [T][K / 256][4 t][hi_2t,
    hi_2t+1, lo_2t, lo_2t+1] float16 with hi = f16(bsum), lo = f16(bsum - hi)."""
    from kernels import quant

    xq = quant.quantize_q8_k(x)
    t, k = xq.q.shape
    nsb, tiles = k // 256, -(-t // TOKEN_TILE)
    words = xq.q.view(np.uint32).reshape(t, k // 64, 4, 4)  # [token, chunk, p, t]: old word 4p + t
    q8 = np.ascontiguousarray(words.transpose(0, 1, 3, 2)).view(np.int8).reshape(t, k)
    d8 = np.zeros((tiles * TOKEN_TILE, nsb), np.float32)
    d8[:t] = xq.d[:, ::8]
    d8 = np.ascontiguousarray(d8.reshape(tiles, TOKEN_TILE, nsb).transpose(0, 2, 1))
    bsum = xq.s.reshape(t, nsb, 4, 2).astype(np.float32)  # [token, sb, t, pair element]
    hi = bsum.astype(np.float16)
    lo = (bsum - hi.astype(np.float32)).astype(np.float16)
    return q8, d8, np.concatenate([hi, lo], axis=-1)


@dataclass(frozen=True)
class QuantizedActivations:
    """Activations [T, K] quantized before the call, in the pass's layout (pass_outputs: q8, d8, sums): what a producer
    that writes them hands the Q8IN GEMM, as `kernels.dispatch.mmq`'s x (the quantization not in the call)."""

    q8: np.ndarray
    d8: np.ndarray
    sums: np.ndarray

    def __post_init__(self) -> None:  # the kernel reads these layouts as they are: a wrong one reads past them
        t, k = self.q8.shape if self.q8.ndim == 2 else (0, 0)
        want = {"q8": ((t, k), np.int8), "d8": ((-(-t // TOKEN_TILE), k // 256, TOKEN_TILE), np.float32),
                "sums": ((t, k // 256, 4, 4), np.float16)}
        for name, (shape, dtype) in want.items():
            a = getattr(self, name)
            if not (t and k % 256 == 0 and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous):
                raise ValueError(f"QuantizedActivations: {name} is {a.dtype}{list(a.shape)}, the pass's layout for "
                                 f"q8 {list(self.q8.shape)} is a C-contiguous {np.dtype(dtype)}{list(shape)} "
                                 f"(see pass_outputs)")

    @classmethod
    def of(cls, x: np.ndarray) -> "QuantizedActivations":
        return cls(*pass_outputs(np.asarray(x, np.float32)))

    @property
    def shape(self) -> tuple[int, int]:
        return self.q8.shape

    @property
    def nbytes(self) -> int:
        return self.q8.nbytes + self.d8.nbytes + self.sums.nbytes


class DirectQ8Bound(mmq_base.MMQBound):
    """Grid (row tiles, K splits, token tiles of 16); the activations from direct_q8_pass (which zeroes C: every
    split adds into it)."""

    def __init__(self, device, variant, handle: dict, problem) -> None:
        self.gridq = variant.params.get("GRIDQ", 0)
        self.nopass = bool(variant.params.get("NOPASS", 0))
        self.pass_only = bool(variant.params.get("PASSONLY", 0))
        self.sb_major = bool(variant.params.get("SBMAJOR", 0))
        self.cluster_q = variant.params.get("CLUSTERQ", 0)
        self.pass_threads = variant.params.get("PASSTHREADS", DEFAULTS["PASSTHREADS"])
        self.llq = bool(variant.params.get("LLQ", 0))
        self.selfq = bool(variant.params.get("SELFQ", 0))
        self.q8in = bool(variant.params.get("Q8IN", 0))
        self.q8_copies = self.q8_owned = []  # Q8IN: each input copy's (q8, d8, sums); those it allocated
        given = isinstance(problem.x, QuantizedActivations)
        if given and not self.q8in:
            raise ValueError("mmq_direct_q8: activations quantized before the call are read by the Q8IN form only "
                             "(FAMILY.q8_input gives a configuration's)")
        super().__init__(device, variant, handle, problem)
        gx, gy, gz = self.grid  # MMQBound's (token tiles, row tiles, splits)
        if self.cluster_q:  # whole clusters along the row tiles
            gy = -(-gy // self.cluster_q) * self.cluster_q
        self.grid = (gy, gz, gx)
        if variant.params.get("PDL", 0):  # the GEMM starts while its pass runs
            self.gemm = device.dependent_kernel(handle.get("compiled"), FAMILY.kernel_name, self.smem)
        self.pass_kernel = handle["pass"]
        if variant.params.get("PDL", 0) == 2:  # and the pass while the kernel before it runs
            self.pass_kernel = device.dependent_kernel(handle.get("compiled"), "direct_q8_pass", 0)
        self.arrived, self.epoch = None, 0
        # PASSFLAG, GRIDQ 2: a count per (token tile, K range) (PASSFLAG: of the units published, then one of the pass
        # CTAs done; GRIDQ 2: of the range's units stored), zero once
        self.passflag = variant.params.get("PASSFLAG", 0)
        split = 2 if variant.params.get("SPLITCOUNT", 0) else 1  # SPLITCOUNT: the first super-block's, the rest's
        counts = gx * gz + 1 if self.passflag else gx * gz * split if self.gridq == 2 else 0
        self.counters = device.to_device(np.zeros(counts, np.uint32)) if counts else None
        # CLUSTERQ, GRIDQ 2: a flag per (row tile, token tile), zero once; each launch publishes its own epoch in it
        tiled = self.cluster_q or self.gridq == 2
        self.flags = device.to_device(np.zeros(gy * gx, np.int32)) if tiled else None
        if self.gridq:  # CTAs wait for others (all, or their range's): they must all be resident at once
            resident = mmq_base.cta_slots(handle["threads"], self.smem + static_smem_bytes(variant.params), device.info,
                                          variant.resources.get("registers", 128))
            ctas = gx * gy * gz
            if ctas > resident:
                self.release()
                raise ValueError(f"mmq_direct_q8 GRIDQ={self.gridq}: {ctas} CTAs for {self.wl.M}x{self.wl.K} at "
                                 f"T={self.wl.T}, but this GPU holds {resident} at once (CTAs wait for each other's "
                                 f"activations: they must all be resident); use GRIDQ=0")
            if self.gridq == 1:
                # a cooperative launch: the driver refuses a grid it cannot place at once where the estimate erred
                self.gemm = device.cooperative_kernel(handle.get("compiled"), FAMILY.kernel_name, self.smem)
                self.arrived = device.to_device(np.zeros(1, np.uint32))
        if self.q8in and given:  # as their producer wrote them, in every input copy
            arrays = (problem.x.q8, problem.x.d8, problem.x.sums)
            self.q8_copies = self.q8_owned = [[device.to_device(a) for a in arrays] for _ in self.x]
        elif self.q8in:  # each input copy's activations written once, now, by the pass kernel (as their producer would)
            self.q8_owned = [self.alloc_activation(self.wl.T, self.wl.K) for _ in self.x[1:]]
            self.q8_copies = [self.scratch, *self.q8_owned]  # (the first copy's are the scratch buffers)
            for x, buffers in zip(self.x, self.q8_copies):  # (the stream orders them before every call's GEMM)
                self.launch_pass(handle["pass"], x, buffers)

    def trace_modules(self) -> list:
        """TRACE: the loaded modules whose dq8_trace the pass's and the GEMM's CTAs write (a dependent launch loads its
        own copy of the cubin, with its own globals), each once, as objects with global_ptr(name)."""
        kernels = [self.pass_kernel, self.gemm]
        owners = [getattr(k, "module", k) for k in kernels]  # a pycuda Kernel's Module, or the DependentKernel itself
        return list({id(o): o for o in owners}.values())

    def choose_split(self, params: dict, registers: int, n_threads: int) -> int:
        """At least the split under which a CTA's range of super-blocks fits its staged activations."""
        need = math.ceil((self.wl.K // 256) / full_params(params)["XSHARED"])
        if params.get("SPLITK"):
            if params["SPLITK"] < need:
                raise ValueError(f"mmq_direct_q8: SPLITK={params['SPLITK']} leaves more than XSHARED="
                                 f"{params['XSHARED']} super-blocks per CTA at K={self.wl.K}; need >= {need}")
            return min(params["SPLITK"], self.wl.K // 256)
        wl, smem = self.wl, self.smem + static_smem_bytes(params)  # (a CTA's whole shared memory sets how many fit)
        info = self.device.info
        if params.get("CLUSTERQ"):  # clusters leave ~10 % of the slots empty (see CLUSTERQ above)
            info = {**info, "sm_count": int(info["sm_count"] * CLUSTER_SLOT_SHARE)}
        return max(need, mmq_base.choose_splitk({**params, "SPLITK": 0}, smem, wl.M, wl.T, wl.K, info, registers,
                                                n_threads))

    def splits_summed_in_kernel(self, params: dict) -> bool:
        return True  # reds into C, which the pass zeroes

    def host_weights(self, w_packed: np.ndarray) -> np.ndarray:
        return tile_weights(w_packed, self.sb_major, self.wl.qtype)

    def alloc_activation(self, T: int, K: int) -> list:
        d, nsb, t_pad = self.device, K // 256, -(-T // TOKEN_TILE) * TOKEN_TILE
        if self.llq:  # the units' LL lines in place of q8 (d8 and sums unused): zero, an epoch no launch has
            return [d.to_device(np.zeros(T * nsb * LL_UNIT_BYTES, np.uint8)), d.empty((1,), np.float32),
                    d.empty((1,), np.float16)]
        if self.selfq:  # each CTA quantizes into its own shared memory: no activations in global memory
            return [d.empty((1,), np.int8), d.empty((1,), np.float32), d.empty((1,), np.float16)]
        return [d.empty((T, K), np.int8), d.empty((t_pad * nsb,), np.float32), d.empty((T * nsb * 16,), np.float16)]

    def extra_args(self) -> tuple:
        if self.gridq == 1:
            return (self.x[self.current].ptr, self.arrived.ptr, np.uint32(self.epoch))
        if self.gridq == 2:
            return (self.x[self.current].ptr, self.counters.ptr, self.flags.ptr, np.uint32(self.epoch))
        if self.cluster_q:
            return (self.x[self.current].ptr, self.flags.ptr, np.int32(self.epoch))
        if self.passflag:
            return (self.counters.ptr, np.uint32(self.epoch), np.uint32(self.pass_ctas()))
        return ()

    def pass_ctas(self) -> int:
        return math.ceil(self.wl.T * (self.wl.K // 256) * 32 / self.pass_threads)  # a warp per (token, super-block)

    def run(self) -> None:
        # GRIDQ: launch e waits until e x CTAs (1) or a range's units (2) have arrived (mod 2^32); CLUSTERQ: launch e's
        # tiles are zeroed when their flag reads e (never 0, the flags' start)
        if self.pass_only:  # the timing probe: the pass of this call's input copy, no GEMM
            self.current, self.i = self.i, (self.i + 1) % len(self.w)
            self.activation_pass(self.x[self.current])
            return
        if not (self.gridq or self.passflag):
            self.epoch = self.epoch % (2**31 - 1) + 1
            super().run()
            return
        self.epoch = (self.epoch + 1) % 2**32  # GRIDQ's arrivals and PASSFLAG's counts grow with every launch
        try:
            super().run()
        except Exception:
            if not self.llq:  # (LLQ: the lines a failed launch stored carry e, so the next launch must not reuse it)
                self.epoch = (self.epoch - 1) % 2**32  # no CTA of a launch that failed arrives: the next one waits for e
            raise

    def host_activation(self, x) -> np.ndarray:
        if isinstance(x, QuantizedActivations):  # no float32 x: Q8IN's GEMM takes the argument and never reads it
            return np.zeros(1, np.float32)
        return super().host_activation(x)

    def activation_args(self) -> tuple:
        buffers = self.q8_copies[self.current] if self.q8in else self.scratch  # Q8IN: this call's input copy's
        return tuple(buf.ptr for buf in buffers)

    def release(self) -> None:
        super().release()
        for buffers in self.q8_owned:
            for buf in buffers:
                buf.release()
        self.q8_copies = self.q8_owned = []
        for name in ("arrived", "flags", "counters"):
            if getattr(self, name, None) is not None:
                getattr(self, name).release()
                setattr(self, name, None)

    def activation_pass(self, x) -> None:
        if self.gridq or self.cluster_q or self.nopass:
            return  # the GEMM's own warps quantize (GRIDQ, CLUSTERQ), or Q8IN's were before; NOPASS: a timing probe
        self.launch_pass(self.pass_kernel, x, self.scratch)

    def launch_pass(self, kernel, x, buffers) -> None:
        """The pass: x quantized into `buffers` (q8, d8, sums), C zeroed."""
        wl = self.wl
        q8, d8, sums = buffers
        counted = (self.counters.ptr, np.int32(self.grid[1])) if self.passflag else ()  # the GEMM's K ranges
        kernel.launch((self.pass_ctas(), 1, 1), (self.pass_threads, 1, 1),
                      (x.ptr, q8.ptr, d8.ptr, sums.ptr, self.out.ptr, np.int32(wl.T), np.int32(wl.K),
                       np.int64(wl.T * wl.M), *counted), 0)


class MMQDirectQ8Family(mmq_base.MMQFamily):
    name = "mmq_direct_q8"
    parity = "int_k"
    cu_file = MMQ_DIRECT_Q8_CU
    kernel_name = "mmq_direct_q8_gemm"
    reduce_name = None  # the splits are added into C by the GEMM
    smem_symbol = "mmq_direct_q8_smem_bytes"

    def complete(self, params: dict) -> dict:
        return full_params(params)

    def threads(self, params: dict) -> int:
        return 32 * full_params(params)["WARPS"]

    def smem(self, params: dict, qtype: str) -> int:
        return smem_bytes(params, qtype)

    def defines(self, params: dict, qtype: str) -> dict:
        p = full_params(params)
        return {"QTYPE": mmq_base.QTYPE_ID[qtype], **{k: p[k] for k in COMPILE_KEYS}}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        return invalid_reason(params, qtype, device_info)

    def make_bound(self, device, variant, handle: dict, problem):
        handle.setdefault("pass", handle["module"].kernel("direct_q8_pass", 0))
        return DirectQ8Bound(device, variant, handle, problem)

    def precompile_configs(self) -> list[dict]:
        return [DEFAULTS]

    def q8_input(self, params: dict) -> dict | None:
        """The configuration for activations that arrive quantized (Q8IN), or None where it has no such form (it needs
        GRIDQ 2's one launch): the count's and the quantization's options off; range 0's flag published by its release
        store alone (RELADD: with no count, its one effect; run 141, H100, q4_K T=16: 0.4-1.2 us faster at the three
        shapes) and in its loop's first trip (ZPUB, so not ZLATE; run 142: 0.3 and 0.5 us faster on the two long-K
        shapes, 0.07 us slower on 4096x4096), the rest as they are."""
        if full_params(params)["GRIDQ"] != 2:
            return None
        return {**params, **{k: 0 for k in Q8IN_EXCLUDES}, "ZLATE": 0, "RELADD": 1, "ZPUB": 1, "Q8IN": 1}


def heuristic_params(T: int, qtype: str = "q4_K") -> dict:
    """The starting configuration: 8 warps, 2 CTAs per SM, a 4-deep ring, 8 super-blocks staged, the GEMM a
    dependent launch of its pass."""
    return dict(DEFAULTS)


FAMILY = MMQDirectQ8Family()

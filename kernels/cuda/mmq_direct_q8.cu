// Few-token q4_K / q5_K GEMM on int8 tensor cores, weights loaded straight into `mma.sync m16n8k32` fragments (lever
// `direct_q8`). The `direct` kernel's structure (each warp streams its 16-row weight tile through a cp.async ring of
// its own; the CTA stages its K range's activations in shared memory once; a split K's CTAs add into C with reds)
// with the activations as int8 and one scale per 256 (llama.cpp's Q8_K granularity) instead of f16:
//   - a weight word becomes A by one LOP3 (q of the low nibbles, 16 q of the high ones, read as u8), not a LOP3 and an
//     HFMA2 per pair; a k32 step is one IMMA where the f16 path needs two HMMA;
//   - the 8 sub-blocks' scales are integer: sum_j sc_j I_j is IMADs on exact int32, and the f32 work is once per
//     super-block, not per sub-block as Q8_1's per-32 activation scales would need;
//   - the staged activations are half the f16 bytes (shared memory for a deeper ring, half the L2 -> SM traffic).
//
// Math contract (kernels.quant.quantize_q8_k, the "int_k" parity mode): per token and super-block s of 256,
// d8 = amax / 127, q8 = clamp(rint(x / d8), -127, 127) (q8_1.cuh's arithmetic); per 32-block j, bsum_j = sum q8.
// For weight row r: y += d8 (d/16 float(16 sum_j sc_j I_j) - dmin sum_j m_j bsum_j), I_j = sum_k q_k q8_k (exact int32;
// the high nibbles' A is 16 q, so their I is 16 I_j and is added to 16 times the low nibbles'). sum_j m_j bsum_j is exact:
// one f16 m16n8k16 of f16(m_j) (exact) by bsum_j = hi_j + lo_j (hi = f16(bsum), lo = bsum - hi, both exact).
// q5_K (QTYPE 1): the same with q in 0..31, its fifth bit from qh (bit j of qh[l]: element l of sub-block j). A is q5 as u8
// for both nibbles of a byte (the high ones shifted down: 16 q5 would not fit), so both I_j are 1x and the sum is 16 (lo + hi).
// q6_K (QTYPE 2): 16 sub-blocks of 16 with int8 scales, no min: y += d8 d float(sum_j sc_j I_j), I_j = sum_k (q6_k - 32)
// q8_k, one m16n8k16 s8 x s8 mma a sub-block (its A bytes q6 - 32, sign-extended from six bits); the pass's sums unread.
// q8_0 (QTYPE 3): 8 blocks of 32 a super-block, y += d8 sum_j d_j float(I_j): one m16n8k32 s8 x s8 mma a block on its
// int8 weights as they are, each block's f16 d applied in f32; the pass's sums unread.
//
// Layouts (kernels/mmq_direct_q8.py writes the weights, direct_q8_pass the activations):
//   weights  [M / 16 tiles][K / 256][16 rows][144]: a tile's super-block is one contiguous 2304-byte ring slot. Each
//            row is the q4_K block with its 128 qs bytes permuted so that lane t of a quad reads its 32 bytes at
//            16 + 32 t: for chunk c, bytes 8c .. 8c + 3 are qs[32c + 4t ..] and 8c + 4 .. are qs[32c + 16 + 4t ..],
//            the A fragment's k 4t .. 4t + 3 and 16 + 4t .. of sub-block 2c (low nibbles) and 2c + 1 (high).
//            q5_K: 176-byte rows (2816-byte slots), qs so permuted at 48, and its 32 qh bytes at 16 permuted so that
//            lane t reads qh[4t ..] and qh[16 + 4t ..] (the fifth bits of its two qs words of every chunk) at 16 + 8t
//   q8       [T][K] int8, each 64-k chunk as 16 words transposed 4 x 4 (word 4t + p holds old word 4p + t): lane t
//            reads 16 bytes at 16 t, the B fragments (k 4t .., 16 + 4t ..) of both sub-blocks of the chunk
//   d8       [T / 16 tiles][K / 256][16] f32: a token tile's scales of one super-block together
//   sums     [T][K / 256][4 t][hi_2t, hi_2t+1, lo_2t, lo_2t+1] f16: lane t's B fragment of the min mma
#include "cluster.cuh"
#include "helper_kernels.cuh"
#include "fragment_reds.cuh"
#include "mbarrier.cuh"
#include "q8_1.cuh"
#include "tile_flags.cuh"  // CLUSTERQ: range 0 zeroes C's tile
#include "wgmma_smem.cuh"  // fence_proxy_async (BULK)

#if QTYPE < 0 || QTYPE > 3
#error "mmq_direct_q8.cu: q4_K (QTYPE 0), q5_K (QTYPE 1), q6_K (QTYPE 2) or q8_0 (QTYPE 3)"
#endif
#ifndef WARPS  // warps per CTA, 16 weight rows each
#define WARPS 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2
#endif
#ifndef RING  // super-blocks in each warp's cp.async ring (RING - 1 in flight while one is multiplied)
#define RING 4
#endif
#ifndef XSHARED  // super-blocks of activations a CTA stages (the launcher splits K so that a range fits)
#define XSHARED 8
#endif
#ifndef PDL  // 1: the GEMM is a programmatic dependent launch of its pass (its weights stream while the pass runs); 2: and
#define PDL 1  // the pass one of whatever precedes it (the last call's GEMM lets it launch as it starts, and it waits for
#endif         // that kernel's writes before it reads x or zeroes C): the pass's launch hides behind the kernel before it
#ifndef BULK  // 1: each ring slot is one bulk copy (the copy engine, one instruction of lane 0) completing on the
#define BULK 0  // slot's mbarrier, not 144 16-byte cp.async over the warp's lanes
#endif
#ifndef GRIDQ  // 1: one launch: the GEMM's warps quantize the activations and zero C themselves (the pass's work, spread
#define GRIDQ 0  // over the grid), then every CTA waits for all of them at a grid-wide arrival count before staging its
#endif           // range; all CTAs must be resident at once (the launcher checks), and the weights stream meanwhile.
                 // 2 (PDL 2): one launch too, a dependent of the kernel before it (its ring's first copies, and with
                 // XPF its x asked of L2, before its wait for that kernel), no grid-wide wait: the CTAs of each K range
                 // and token tile quantize that range's units between them, count themselves on the range's counter
                 // and wait for their own range's count; range 0's CTA of each tile zeroes C's tile (tile_flags.cuh)
#ifndef SBMAJOR  // 1: the weights super-block major, [K / 256][M / 16][16][144]: at a loop step the warps of a K range
#define SBMAJOR 0  // read one contiguous run of tiles' slots (0: [M / 16][K / 256][16][144], each warp its own run)
#endif
#ifndef L2AHEAD  // super-blocks past its ring that each warp asks L2 for (one bulk prefetch a slot) ahead of copying them:
#define L2AHEAD 0   // the first L2AHEAD before the GEMM waits for its pass, so the weights stream while the pass runs,
#endif              // then one a loop step, L2AHEAD ahead of the ring's copy (0: none)
#ifndef CLUSTERQ  // n >= 1 (PDL 0 or 2): one launch, no pass. The n CTAs of a thread-block cluster along M (one K range,
#define CLUSTERQ 0  // one token tile) quantize the range's activations once, each a share, into every member's shared
#endif              // memory (st.async, completing on each member's mbarrier); each K range's first CTA zeroes its tile of
                    // C and publishes the launch's epoch, the others wait for it. PDL 2: the GEMM a dependent of the
                    // kernel before it (its prologue overlaps that kernel's end; it waits for it before x and C)
#ifndef PASSTRIG  // PDL >= 1. 0: the pass lets its GEMM launch as it starts; 1: once each of its CTAs has its first
#define PASSTRIG 0  // activations in registers, so the GEMM's weight copies do not queue in DRAM ahead of the pass's reads
#endif
#ifndef XPF  // 1 (PDL 2): the pass asks L2 for its x (one bulk prefetch per unit) before it waits for the kernel before it,
#define XPF 0  // so its reads after the wait hit L2 instead of queueing in DRAM behind the next GEMM's weight copies (a
#endif         // hint: lines fetched before that kernel writes x are made current by its writes, L2 being coherent)
#ifndef QFIRST  // 1 (GRIDQ 2): a CTA that quantizes copies its ring's first slots only after it added its units to the
#define QFIRST 0  // range's count, so that add's release fence does not wait for those copies (a fence waits for the
#endif            // thread's copies in flight, run 99); the CTAs that quantize nothing copy theirs first, as with 0
#ifndef SMEMSUMS  // 1 (GRIDQ 2): the range's scales and sums staged in shared memory with its activations (one copy a
#define SMEMSUMS 0  // CTA), not read from L2 by every warp at every super-block: run 109's trace, q4_K 14336x4096 T=16,
#endif              // streamed 1.5x slower than the champion, whose loads of them hit L1 (the read-only path)
#ifndef POLLACQ  // 1 (GRIDQ 2): each poll of the range's count is an acquire load, so the poll that sees the count is the
#define POLLACQ 0  // acquire (0: relaxed polls, then one acquire load: an L2 round trip more, ~0.7 us under the weight
#endif             // stream). An acquire drops the SM's L1, which holds nothing the loop reads with SMEMSUMS
#ifndef RELADD  // 1 (GRIDQ 2): a CTA's add to its range's count is one red.release (a release fence's MEMBAR.ALL before
#define RELADD 0  // the RED), not __threadfence's sequentially consistent MEMBAR.SC and an atomic: the release is all the
#endif            // waiting CTAs need (they acquire), and the add is on every CTA's critical path; range 0's zeroed tile
                  // is published by its release store alone, with no MEMBAR.SC before it either
#ifndef LOCALQ  // n = 1, 2 (GRIDQ 2, SMEMSUMS, BULK 0): each CTA quantizes the first n super-blocks of its range for its
#define LOCALQ 0  // 16 tokens itself, straight into its shared memory (every CTA of the range again: n x 16 KB of x from
#endif            // L2 each, loaded with the warp's first shared unit's), and the range's CTAs share only the rest
                  // through the count, which a CTA then waits for only before its super-block n: its first n
                  // super-blocks stream while the count comes (run 113: loading the local units one after the other
                  // put three L2 round trips under load, 1-1.5 us each, before the first super-block)
#ifndef SPLITCOUNT  // 1 (GRIDQ 2, SMEMSUMS, LOCALQ 0, XBULK 0, BULK 0, RELADD 0): the range's count in two, its first
#define SPLITCOUNT 0  // super-block's units (numbered super-block first, so two CTAs of 8 warps quantize them at T=16)
#endif                // and the rest's: a CTA stages the first super-block once its count is seen and the rest once
                      // the other count is, in the loop's second trip (run 118: the range's count waits for the last
                      // of its 14 quantizing CTAs, 0.8-1.8 us after the median one)
#ifndef EARLYSLOTS  // n = 1 .. RING - 2 (GRIDQ 2, LOCALQ 0, XBULK 0, BULK 0): only the ring's first n slots are copied
#define EARLYSLOTS 0  // before the count's chain, the other RING - 1 - n once the range's activations are staged (0: all
#endif                // RING - 1 before): a deep ring for the stream without its bytes in the chain's window (runs
                      // 118, 123: RING 4 streamed faster than RING 2 on an H100 but lengthened the chain on an H200)
#ifndef L2LATE  // 1 (GRIDQ 2, L2AHEAD > 0): the first L2AHEAD asks are made once the kernel before has ended (a CTA that
#define L2LATE 0  // quantizes: after its count's add) rather than as the CTA starts: run 118's trace had DRAM idle from
#endif            // the ring's first slots landing (~2-3 us after the kernel before's end) to the first super-block
                  // (~7.5), while asks made at the start slow the kernel before's last CTAs, which everything waits for
#ifndef XBULK  // 1 (GRIDQ 2, SMEMSUMS, LOCALQ 0): the range's activations, sums and scales staged by the copy engine (a bulk
#define XBULK 0  // copy per token row, issued by warp 0 as soon as the count is seen, landing on one mbarrier) instead
#endif           // of ~2000 16-byte cp.async behind the SM's own weight copies (run 118: 1.8 us from the count seen to
                 // the first super-block, an L2 hit's round trip queued behind copies that wait on DRAM)
#ifndef LLQ  // 1, 2 (GRIDQ 2, SMEMSUMS; LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, RELADD, POLLACQ 0): no count. Each
#define LLQ 0  // unit is stored as NCCL's LL lines, 16 bytes {data, epoch, data, epoch} (37 a unit: its 64 int8 words, its 4
#endif         // lanes' sums, its scale), each storing thread fencing its own, with no barrier and no add; a CTA loads
               // its range's lines into shared memory by strong loads (the loop reads the data words of each line),
               // again for those whose epochs are not yet this launch's. The load is the poll: of the count's chain
               // (store, fence, add, count seen, copy: ~4.5 us of L2 round trips under the weight stream, runs
               // 116-121) only the store, the fence and the load are left. Twice the activations' bytes in L2 and in
               // shared memory. 1: a thread asks for all its lines at once, then, while some are stale, polls one
               // stale line alone and asks for the stale ones again once it is current; 2: it polls its first line so
               // before asking for any (a CTA with no unit to quantize would ask as it resumes). Measured and not
               // promoted (runs 128-131, H100: 1.3-1.4x slower at T=16; the range is staged 3-4 us after the last
               // fence returns, where the count's copy lands ~1 us after the count is seen)
#ifndef SELFQ  // n = 1..XSHARED (GRIDQ 2, SMEMSUMS; LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, LLQ, RELADD, POLLACQ,
#define SELFQ 0  // QFIRST, L2LATE, PROBE 0): no count and no global round trip for the activations. Each CTA quantizes its
#endif           // own range for its 16 tokens: the f32 rows come by bulk copies (one a token row and super-block, warp 0
                 // issuing) into n slots of 16 KB (a super-block of 16 tokens), each landing on its own mbarrier; the
                 // warps quantize super-block s + 1 (a token row a warp) into the staged rows, sums and scales while
                 // super-block s's weights are in flight, and one barrier a trip hands it over and frees its slot for
                 // super-block s + 1 + n. Every CTA of a range reads the range's x (16 KB a super-block) where the count's
                 // form reads 4: more L2 bytes, but no chain (store, fence, add, count seen, copy: ~4.5 us of round
                 // trips under the weight stream, runs 116-121) before the first super-block. Measured and not
                 // promoted (run 133, H100: 1.4-1.7x slower at T=16: the rows' copies, not the chain, set its time)
#ifndef PACE  // ns (GRIDQ 2, L2AHEAD > 0; L2LATE, LOCALQ, LLQ, SELFQ 0): each warp's first L2AHEAD asks of L2 are made
#define PACE 0  // while its CTA waits for the range's count, one every PACE ns (warps 1 .. WARPS - 1, staggered; warp 0's
#endif          // thread 0 polls), until the count is seen; the asks the wait leaves are not made. Runs 121 and 136:
                // DRAM carries ~4 MB in the ~5.6 us before the first super-block, and asks made in one burst (L2AHEAD,
                // L2LATE, deeper rings) lengthen that chain by more than they save; spread out, the same bytes could
                // stream under it with shallow queues. Measured and not promoted (run 138, H100: 12-35 % slower at
                // T=16: the count seen 0.3 us later, the stream after the first super-block 1.8 us longer)
#ifndef Q8IN  // 1 (GRIDQ 2; XPF, QFIRST, POLLACQ, LOCALQ, SPLITCOUNT, LLQ, SELFQ, PACE 0): the activations arrive
#define Q8IN 0  // quantized, in the pass's layout (its producer wrote them: a norm or GLU kernel, or one quantization
#endif          // shared by the GEMMs that read the same x), so the call is the GEMM alone: no unit to quantize, no
                // count to wait for; range 0 still zeroes C's tile and the other ranges wait for it before their reds
#ifndef ZLATE  // 1 (GRIDQ 2): range 0 zeroes C's tile once its activations' copies are issued, just before its loop,
#define ZLATE 0  // not before them, so that the staging does not wait for the zeroing's fence. Measured (run 140, H100,
#endif           // T=16): slower at 4096x14336 (+0.8 us on Q8IN, +1.1 on the champion), where the fence then also
                 // waits for the staging's copies; faster only on 4096x4096's two-super-block ranges (-0.4 us, Q8IN)
#ifndef FLAGPEEK  // 1 (GRIDQ 2): the other ranges' CTAs acquire range 0's flag in the middle of their loop (thread 0,
#define FLAGPEEK 0  // after that trip's copies are issued, while the warp waits for its slot), not after the loop: the
#endif              // acquire's round trip then overlaps the stream instead of standing before the reds; where the
                    // flag is not published yet, the wait after the loop is as before. Measured (runs 140-142, H100,
                    // T=16): -0.1 to -0.3 us on 4096x14336, +0.0 to +0.2 on 4096x4096; not promoted
#ifndef ZPUB  // 1 (GRIDQ 2; ZLATE, LOCALQ, LLQ, SELFQ, PROBE 0): range 0 stores C's zeroed tile where it would zero it,
#define ZPUB 0  // but publishes it (thread 0's release) only at the end of its loop's first trip, whose barrier has
#endif          // ordered every thread's zeros: its fence then waits for a slot the second trip waits for anyway, not
                // in front of the staging (run 141's trace, H100: range 0's CTAs ready 1.3 us after the others with
                // RELADD's release alone, and still the last to end). Run 142: Q8IN 0.3-0.5 us faster on the long-K
                // shapes, range 0 ready with the others (the Q8IN form takes it); the champion +4 % at the anchor
#ifndef SKEW  // n = 1..3 (GRIDQ 2): the K ranges the GPU starts first (low blockIdx.y) take up to n super-blocks more and
#define SKEW 0  // the last ones as many fewer (within XSHARED, a quarter of a range at most): a call's CTAs start as the call
#endif          // before's leave, in blockIdx order, and run 118's trace had the last-started ones end ~1.7 us after
                // the first, while the call lasts until its last CTA ends
#ifndef PROBE  // timing probes, not kernels (wrong numbers): 1 the loop only streams the weights through the ring (one
#define PROBE 0  // word of each landed slot read); 2 no loop (the prologue's copies land, the reds: the call's fixed cost)
#endif
#ifndef PASSFLAG  // 1, 2 (PDL 2): the GEMM does not wait for its pass's grid to end (griddepcontrol.wait and the flush
#define PASSFLAG 0  // behind it: 1.0-1.3 us a call, run 105). Each pass warp publishes its unit on the counter of its token
#endif              // tile and K range, each GEMM CTA waits for its own range's count (1: before its ring's first copies,
                    // so they do not queue ahead of the pass's x reads; 2: after them), and every pass CTA counts itself
                    // done (its share of C zeroed) on one more counter, which the GEMM waits for before its reds
#ifndef TRACE  // a timing probe (the same numbers, a little later): 1 each CTA of the pass and of the GEMM records, in
#define TRACE 0  // dq8_trace, %globaltimer at its start, after its wait for the kernel before, when its first work is ready
#endif           // (the pass: its first unit stored; the GEMM: its first super-block's weights and activations landed) and
                 // at its end, with its launch (the order CTAs start in: every CTA of a launch starts before any of the next)
#if PASSFLAG < 0 || PASSFLAG > 2 || (PASSFLAG && (PDL != 2 || GRIDQ || CLUSTERQ))
#error "mmq_direct_q8.cu: PASSFLAG 0..2, 1 and 2 with PDL 2, GRIDQ 0 and CLUSTERQ 0 (a pass the GEMM does not wait for)"
#endif
#if TRACE < 0 || TRACE > 1 || (TRACE && (GRIDQ == 1 || CLUSTERQ))
#error "mmq_direct_q8.cu: TRACE 0..1, 1 with GRIDQ 0 or 2 and CLUSTERQ 0"
#endif
#if PROBE < 0 || PROBE > 2 || SBMAJOR < 0 || SBMAJOR > 1
#error "mmq_direct_q8.cu: PROBE 0..2, SBMAJOR 0..1"
#endif
#if RING < 2 || RING > 8 || XSHARED < 1 || XSHARED > 16 || PDL < 0 || PDL > 2 || BULK < 0 || BULK > 1 || GRIDQ < 0 || \
    GRIDQ > 2 || (GRIDQ == 1 && PDL) || (GRIDQ == 2 && PDL != 2)
#error "mmq_direct_q8.cu: RING 2..8, XSHARED 1..16, PDL 0..2, BULK 0..1, GRIDQ 0..2 (1 with PDL 0, 2 with PDL 2)"
#endif
#if L2AHEAD < 0 || L2AHEAD > 8
#error "mmq_direct_q8.cu: L2AHEAD 0..8"
#endif
#if PASSTRIG < 0 || PASSTRIG > 1 || (PASSTRIG && !PDL)
#error "mmq_direct_q8.cu: PASSTRIG 0..1, 1 with PDL (a dependent GEMM to let launch)"
#endif
#if XPF < 0 || XPF > 1 || (XPF && PDL != 2)
#error "mmq_direct_q8.cu: XPF 0..1, 1 with PDL 2 (a pass that waits for the kernel before it)"
#endif
#if SMEMSUMS < 0 || SMEMSUMS > 1 || (SMEMSUMS && GRIDQ != 2)
#error "mmq_direct_q8.cu: SMEMSUMS 0..1, 1 with GRIDQ 2"
#endif
#if POLLACQ < 0 || POLLACQ > 1 || (POLLACQ && GRIDQ != 2)
#error "mmq_direct_q8.cu: POLLACQ 0..1, 1 with GRIDQ 2"
#endif
#if LOCALQ < 0 || LOCALQ > 2 || (LOCALQ && (GRIDQ != 2 || !SMEMSUMS || BULK))
#error "mmq_direct_q8.cu: LOCALQ 0..2, 1..2 with GRIDQ 2, SMEMSUMS 1 and BULK 0"
#endif
#if RELADD < 0 || RELADD > 1 || (RELADD && GRIDQ != 2)
#error "mmq_direct_q8.cu: RELADD 0..1, 1 with GRIDQ 2"
#endif
#if SPLITCOUNT < 0 || SPLITCOUNT > 1 || (SPLITCOUNT && (GRIDQ != 2 || !SMEMSUMS || LOCALQ || XBULK || BULK || RELADD))
#error "mmq_direct_q8.cu: SPLITCOUNT 0..1, 1 with GRIDQ 2, SMEMSUMS 1, LOCALQ 0, XBULK 0, BULK 0 and RELADD 0"
#endif
#if EARLYSLOTS < 0 || EARLYSLOTS > RING - 2 || (EARLYSLOTS && (GRIDQ != 2 || LOCALQ || XBULK || BULK))
#error "mmq_direct_q8.cu: EARLYSLOTS 0..RING - 2, 1.. with GRIDQ 2, LOCALQ 0, XBULK 0 and BULK 0"
#endif
#if L2LATE < 0 || L2LATE > 1 || (L2LATE && (GRIDQ != 2 || !L2AHEAD))
#error "mmq_direct_q8.cu: L2LATE 0..1, 1 with GRIDQ 2 and L2AHEAD > 0"
#endif
#if XBULK < 0 || XBULK > 1 || (XBULK && (GRIDQ != 2 || !SMEMSUMS || LOCALQ))
#error "mmq_direct_q8.cu: XBULK 0..1, 1 with GRIDQ 2, SMEMSUMS 1 and LOCALQ 0"
#endif
#if LLQ < 0 || LLQ > 2 || (LLQ && (GRIDQ != 2 || !SMEMSUMS || LOCALQ || SPLITCOUNT || EARLYSLOTS || XBULK || BULK || \
                                   RELADD || POLLACQ))
#error "mmq_direct_q8.cu: LLQ 0..2, 1..2 with GRIDQ 2, SMEMSUMS 1 and LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, RELADD, POLLACQ 0"
#endif
#if SELFQ < 0 || SELFQ > XSHARED || (SELFQ && (GRIDQ != 2 || !SMEMSUMS || LOCALQ || SPLITCOUNT || EARLYSLOTS || \
                                             XBULK || BULK || LLQ || RELADD || POLLACQ || QFIRST || L2LATE || PROBE))
#error "mmq_direct_q8.cu: SELFQ 0..XSHARED, 1.. with GRIDQ 2, SMEMSUMS 1 and LOCALQ, SPLITCOUNT, EARLYSLOTS, XBULK, BULK, LLQ, RELADD, POLLACQ, QFIRST, L2LATE, PROBE 0"
#endif
#if SKEW < 0 || SKEW > 3 || (SKEW && GRIDQ != 2)
#error "mmq_direct_q8.cu: SKEW 0..3, 1..3 with GRIDQ 2"
#endif
#if Q8IN < 0 || Q8IN > 1 || (Q8IN && (GRIDQ != 2 || XPF || QFIRST || POLLACQ || LOCALQ || SPLITCOUNT || LLQ || \
                                       SELFQ || PACE))
#error "mmq_direct_q8.cu: Q8IN 0..1, 1 with GRIDQ 2 and XPF, QFIRST, POLLACQ, LOCALQ, SPLITCOUNT, LLQ, SELFQ, PACE 0"
#endif
#if ZLATE < 0 || ZLATE > 1 || (ZLATE && GRIDQ != 2)
#error "mmq_direct_q8.cu: ZLATE 0..1, 1 with GRIDQ 2"
#endif
#if FLAGPEEK < 0 || FLAGPEEK > 1 || (FLAGPEEK && GRIDQ != 2)
#error "mmq_direct_q8.cu: FLAGPEEK 0..1, 1 with GRIDQ 2"
#endif
#if ZPUB < 0 || ZPUB > 1 || (ZPUB && (GRIDQ != 2 || ZLATE || LOCALQ || LLQ || SELFQ || PROBE))
#error "mmq_direct_q8.cu: ZPUB 0..1, 1 with GRIDQ 2 and ZLATE, LOCALQ, LLQ, SELFQ, PROBE 0"
#endif
#if PACE < 0 || (PACE && (GRIDQ != 2 || !L2AHEAD || L2LATE || LOCALQ || LLQ || SELFQ))
#error "mmq_direct_q8.cu: PACE >= 0 ns, > 0 with GRIDQ 2, L2AHEAD > 0 and L2LATE, LOCALQ, LLQ, SELFQ 0"
#endif
#if QFIRST < 0 || QFIRST > 1 || (QFIRST && GRIDQ != 2)
#error "mmq_direct_q8.cu: QFIRST 0..1, 1 with GRIDQ 2"
#endif
#if CLUSTERQ < 0 || CLUSTERQ > 8 || (CLUSTERQ & (CLUSTERQ - 1)) || (CLUSTERQ && (PDL == 1 || GRIDQ || PASSTRIG))
#error "mmq_direct_q8.cu: CLUSTERQ 0, 1, 2, 4 or 8, with PDL 0 or 2, GRIDQ 0 and PASSTRIG 0 (no pass)"
#endif

#if TRACE  // the records (C names: scripts/call_trace.py reads them by name from each loaded module)
extern "C" {
__device__ unsigned long long dq8_trace[16384][8];
__device__ unsigned dq8_trace_n, dq8_trace_started[2];
}
#endif

namespace dq8 {

constexpr int kThreads = 32 * WARPS;
constexpr int kBlockBytes = QTYPE == 3 ? 272 : QTYPE == 2 ? 210 : QTYPE == 1 ? 176 : 144, kSlotBytes = 16 * kBlockBytes;
constexpr int kQsAt = kBlockBytes - 128;  // the permuted qs bytes of a row (after q5_K's qh)
constexpr int kPieces = kSlotBytes / 16, kCopies = (kPieces + 31) / 32;  // 16-byte copies per slot, per lane
constexpr int kEarlySlots = EARLYSLOTS ? EARLYSLOTS : RING - 1;  // ring slots copied before the activations' groups
constexpr int kLateSlots = RING - 1 - kEarlySlots;                  // and after them
// a staged token row's super-block: 256 int8, or (LLQ) their 32 LL lines
constexpr int kXUnitBytes = LLQ ? 512 : 256;
// token rows 64 bytes apart modulo 128: a quarter-warp's loads, 8 banks (LLQ: 16 apart, each lane two lines 32 bytes apart)
constexpr int kXStride = LLQ ? XSHARED * 512 + 16 : XSHARED * 256 + 64;
// CLUSTERQ, SMEMSUMS: the range's scales and sums in shared memory, as the pass lays them out in global: sums [16 tokens]
// [XSHARED][4 t] uint2, each token row padded by 4 (lanes g read 8 rows: 2-way, not 8-way, bank conflicts); d8 [XSHARED]
// [16] f32
constexpr bool kSumsShared = CLUSTERQ || SMEMSUMS;
// (LLQ: the same arrays with each uint2 of sums and each f32 scale an LL line of 16 bytes, as loaded)
constexpr int kSumStride = XSHARED * 4 + 4;
constexpr int kSumBytes = LLQ ? 16 : 8, kScaleBytes = LLQ ? 16 : 4;
constexpr int kSumsBytes = kSumsShared ? 16 * kSumStride * kSumBytes + XSHARED * 16 * kScaleBytes : 0;
// byte offsets in shared memory: the warps' rings, the staged token rows, then (kSumsShared) the sums and the scales
constexpr int kXsAt = RING * WARPS * kSlotBytes, kSumsAt = kXsAt + 16 * kXStride;
constexpr int kD8At = kSumsAt + 16 * kSumStride * kSumBytes;
// SELFQ: after them, its slots of the range's f32 activations, [SELFQ][16 tokens][256]
constexpr int kXfSlotBytes = 16 * 256 * 4, kXfAt = kSumsAt + kSumsBytes;
constexpr int kSmemBytes = kXfAt + SELFQ * kXfSlotBytes;

// The first super-block of K range y of `ranges` (range y ends where y + 1 begins); SKEW moves super-blocks from the
// ranges started last to the ones started first, as many as XSHARED allows and at most a quarter of an even range
// (unsigned as blockIdx and gridDim are: the unskewed split's SASS is the one before SKEW)
__device__ __forceinline__ int range_begin(unsigned y, unsigned ranges, int nsb) {
    int skew = 0;
    if constexpr (SKEW > 0) {
        const int n = static_cast<int>(ranges);
        skew = max(0, min(SKEW, min(XSHARED - (nsb + n - 1) / n, nsb / n / 4)));
    }
    return y * nsb / ranges + skew * min(y, ranges - y);
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#if TRACE
// TRACE: one record per CTA, {kernel (0 pass, 1 GEMM) << 32 | SM, launch << 32 | CTA, start, waited, ready, end,
// resumed, published} (ns; GRIDQ 2 only, else 0: its return from the wait for the kernel before, and its count's add
// done); records past the capacity are dropped. scripts/call_trace.py zeroes the counters, runs calls and reads them.

struct CtaTrace {  // kept by thread 0
    unsigned long long t[6];
    unsigned start_index;
    __device__ __forceinline__ void begin(int kernel) {
        t[0] = global_ns(), t[1] = t[2] = t[4] = t[5] = 0;  // (a PROBE 2 GEMM has no first super-block: ready stays 0)
        start_index = atomicAdd(&dq8_trace_started[kernel], 1u);  // its result is needed only at the end
    }
    __device__ __forceinline__ void mark(int i) { t[i] = global_ns(); }
    __device__ __forceinline__ void end(int kernel) {
        t[3] = global_ns();
        const unsigned ctas = gridDim.x * gridDim.y * gridDim.z, slot = atomicAdd(&dq8_trace_n, 1u);
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        if (slot < sizeof(dq8_trace) / sizeof(dq8_trace[0])) {
            unsigned long long* r = dq8_trace[slot];
            r[0] = static_cast<unsigned long long>(kernel) << 32 | sm;
            r[1] = static_cast<unsigned long long>(start_index / ctas) << 32 | (start_index % ctas);
            r[2] = t[0], r[3] = t[1], r[4] = t[2], r[5] = t[3], r[6] = t[4], r[7] = t[5];
        }
    }
};
#define TRACE_BEGIN(k) if (threadIdx.x == 0) trace.begin(k)
#define TRACE_MARK(i) if (threadIdx.x == 0) trace.mark(i)
#define TRACE_END(k) do { __syncthreads(); if (threadIdx.x == 0) trace.end(k); } while (0)
#else
struct CtaTrace {};
#define TRACE_BEGIN(k)
#define TRACE_MARK(i)
#define TRACE_END(k)
#endif

// The pass's scales and sums as the loop reads them: with GRIDQ this launch wrote them, and with PASSFLAG a pass still
// running, so through L2 (__ldcg), never the read-only path a const __restrict__ pointer would allow (not coherent with
// stores made while the kernel runs); kSumsShared: from shared memory
template <class V>
__device__ __forceinline__ V load_pass_output(const V* p) {
    if constexpr ((GRIDQ || PASSFLAG) && !kSumsShared) return __ldcg(p); else return *p;
}

// PASSFLAG: counters[tile * splits + r] counts the units of token tile `tile` and K range r published, counters[tiles *
// splits] the pass CTAs done. K range r of `splits` holds super-blocks r nsb / splits .. (r + 1) nsb / splits - 1 (the
// GEMM's blockIdx.y ranges), so super-block sb is in range ((sb + 1) splits - 1) / nsb.
__device__ __forceinline__ int range_of(int sb, int splits, int nsb) { return ((sb + 1) * splits - 1) / nsb; }

// Thread 0 polls a counter until it reaches target (mod 2^32: counts wrap together), then the CTA goes on. Relaxed
// polls 128 ns apart (run 107: back-to-back polls of one line by a range's CTAs queued with the adds they wait for),
// then one acquire load, not a fence: a fence would also wait for the thread's weight copies in flight (run 99);
// kAcquirePolls: every poll an acquire load (POLLACQ), the one that sees the count ends the wait
template <bool kAcquirePolls = false, bool kBarrier = true>  // kBarrier false: thread 0 alone, no CTA barrier after
__device__ __forceinline__ void wait_count(const unsigned* counter, unsigned target) {
    if (threadIdx.x == 0) {
        unsigned seen;
        for (long long polls = 0;; ++polls) {
            if constexpr (kAcquirePolls)
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
            else
                asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
            if (static_cast<int>(seen - target) >= 0) break;
            if (polls > (1LL << 24)) __trap();  // seconds without the count: an error, not a hang
            __nanosleep(128);
        }
        if constexpr (!kAcquirePolls)
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
    }
    if constexpr (kBarrier) __syncthreads();
}

__device__ __forceinline__ void mma_u8s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ void mma_s8s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ void mma_s8s8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b), "r"(0));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%4,%5}, {%6,%7}, "
                 "{%8,%8,%8,%8};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(b1), "f"(0.0f));
}

// One weight row's super-block header: its 8 integer scales, the f16 pair (m_2t, m_2t+1) for the min mma, d / 16 and
// dmin. Each scale is one PRMT (a byte, zero-extended) of the two words that hold sc 0..3 and sc 4..7.
struct RowScales {
    int sc[8];
    uint32_t mpair;
    float d16, dmin;
};

// sub-block j's A word of q5_K from a qs word (its low or high nibbles, by the parity of j) and the qh word of the same 4
// bytes: each byte q | 16 h_j, h_j bit j of its qh byte moved to bit 4 (j folds to a constant in the unrolled loop)
__device__ __forceinline__ uint32_t q5_word(uint32_t qs, uint32_t qh, int j) {
    const uint32_t q = (j & 1 ? qs >> 4 : qs) & 0x0F0F0F0Fu;
    return q | ((j <= 4 ? qh << (4 - j) : qh >> (j - 4)) & 0x10101010u);
}

// q6_K's A word of 32-block 2c + jj, part p (f = 2 jj + p), from the low-nibble word of its 4 bytes and their
// high-pair word (kernels/mmq_direct_q8.py tile_weights_q6_k: the pairs XOR 2, so the six bits are q6 - 32 in two's
// complement): bit 5 of each byte copied to bits 6 and 7 by adding 6 x it (no carry leaves a byte)
__device__ __forceinline__ uint32_t q6_word(uint32_t qs, uint32_t qh, int jj, int f) {
    const uint32_t low = (jj ? qs >> 4 : qs) & 0x0F0F0F0Fu;
    const uint32_t moved = f <= 2 ? qh << (4 - 2 * f) : qh >> (2 * f - 4);
    return (low | (moved & 0x30303030u)) + (moved & 0x20202020u) * 6u;
}

__device__ __forceinline__ uint32_t word_of(uint4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

__device__ __forceinline__ RowScales row_scales(uint4 head, int t) {
    RowScales s;
    const uint32_t sc03 = head.y & 0x3F3F3F3Fu, m03 = head.z & 0x3F3F3F3Fu;
    const uint32_t sc47 = (head.w & 0x0F0F0F0Fu) | ((head.y >> 2) & 0x30303030u);
    const uint32_t m47 = ((head.w >> 4) & 0x0F0F0F0Fu) | ((head.z >> 2) & 0x30303030u);
#pragma unroll
    for (int j = 0; j < 8; ++j) s.sc[j] = static_cast<int>(__byte_perm(j < 4 ? sc03 : sc47, 0, 0x4440 | (j & 3)));
    // m_2t, m_2t+1 as the 16-bit halves of a word, made f16 (1024 + m) by the exponent bits, then 1024 taken off: exact
    const uint32_t mb = __byte_perm(t < 2 ? m03 : m47, 0, t & 1 ? 0x4342 : 0x4140) | 0x64006400u;
    const __half2 m = __hsub2(*reinterpret_cast<const __half2*>(&mb), __float2half2_rn(1024.0f));
    s.mpair = *reinterpret_cast<const uint32_t*>(&m);
    const float2 dd = __half22float2(*reinterpret_cast<const __half2*>(&head.x));
    s.d16 = dd.x * 0.0625f, s.dmin = dd.y;
    return s;
}

// One (token, super-block) of the activations, 256 floats at x, quantized by one warp, lane l taking k 8l .. 8l + 7
// (q8_1.cuh's arithmetic, the amax over the warp). The lane's two int8 words are old words 2l, 2l + 1 of the super-block.
struct Q8Lanes {
    float scale;
    uint32_t packed[2];
    int bsum;  // of the 32-block of lanes 4j .. 4j + 3
};

__device__ __forceinline__ Q8Lanes quantize_values(const float (&v)[8]) {  // the lane's 8 floats, loaded
    Q8Lanes q;
    float amax = mmq::abs_max8(v);
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
    q.scale = mmq::q8_1_scale(amax);
    q.bsum = mmq::quad_quantize(v, q.scale, q.packed);
    return q;
}

__device__ __forceinline__ Q8Lanes quantize_lanes(const float* __restrict__ x, int lane) {
    float v[8];
    mmq::load8(x + 8 * lane, v);
    return quantize_values(v);
}

// Where old word w of a super-block lives in the q8 layout: chunk w / 16, word 4p + t of it (p = (w / 4) % 4, t = w % 4)
__device__ __forceinline__ int staged_word(int w) { return (w >> 4) * 16 + 4 * (w & 3) + ((w >> 2) & 3); }

// A 32-block's sum as the exact f16 pair (hi, lo) of the min mma's B fragment
__device__ __forceinline__ void split_sum(int bsum, __half& hi, __half& lo) {
    hi = __float2half_rn(static_cast<float>(bsum));
    lo = __float2half_rn(static_cast<float>(bsum) - __half2float(hi));
}

// Lane 8t's B fragment of the min mma for its unit, (hi_2t, hi_2t+1) and (lo_2t, lo_2t+1) as two words, the odd
// 32-block's halves from the quad 4 lanes up (every lane takes part in the shuffle; lanes 8t use the result)
__device__ __forceinline__ uint2 sum_pairs(int bsum) {
    __half hi, lo;
    split_sum(bsum, hi, lo);
    const uint32_t mine = __half_as_ushort(hi) | static_cast<uint32_t>(__half_as_ushort(lo)) << 16;
    const uint32_t odd = __shfl_down_sync(0xffffffffu, mine, 4);
    return make_uint2(__byte_perm(mine, odd, 0x5410), __byte_perm(mine, odd, 0x7632));
}

// One unit (256 values of a token), quantized by a warp, stored as its 64 staged words, its scale and its 8 sums' 16
// halves, wherever they go: the pass's global buffers, or (LOCALQ) the CTA's staged rows and SMEMSUMS's arrays
__device__ __forceinline__ void store_unit(const Q8Lanes& q, uint32_t* words, float* scale, __half* sums_unit, int lane) {
#pragma unroll
    for (int e = 0; e < 2; ++e) words[staged_word(2 * lane + e)] = q.packed[e];
    if (lane == 0) *scale = q.scale;
    if ((lane & 3) == 0) {
        const int j = lane >> 2;  // the 32-block: lane t = j / 2 of the min mma, pair element j % 2
        __half hi, lo;
        split_sum(q.bsum, hi, lo);
        __half* out = sums_unit + 4 * (j >> 1) + (j & 1);
        out[0] = hi, out[2] = lo;
    }
}

// (LOCALQ, SELFQ) token row r's super-block sb of the CTA's range, quantized by the CTA itself, into its staged row,
// scale and sums in shared memory (SMEMSUMS's layout, which the loop reads)
__device__ __forceinline__ void store_staged_unit(const Q8Lanes& q, uint8_t* smem, int r, int sb, int lane) {
    uint2* sums_unit = reinterpret_cast<uint2*>(smem + kSumsAt) + r * kSumStride + 4 * sb;
    store_unit(q, reinterpret_cast<uint32_t*>(smem + kXsAt + r * kXStride + sb * 256),
               reinterpret_cast<float*>(smem + kD8At) + sb * 16 + r, reinterpret_cast<__half*>(sums_unit), lane);
}

__device__ __forceinline__ void quantize_unit_into(const float* __restrict__ x_unit, uint32_t* words, float* scale,
                                                   __half* sums_unit, int lane) {
    store_unit(quantize_lanes(x_unit, lane), words, scale, sums_unit, lane);
}

// One (token, super-block) `unit` of the activations quantized by one warp, written in the layouts above.
__device__ __forceinline__ void quantize_unit(const float* __restrict__ x, uint32_t* __restrict__ q8,
                                              float* __restrict__ d8, __half* __restrict__ sums, long long unit,
                                              int lane, int nsb) {
    const int tok = static_cast<int>(unit / nsb), sb = static_cast<int>(unit % nsb);
    float* scale = d8 + ((tok >> 4) * static_cast<long long>(nsb) + sb) * 16 + (tok & 15);
    quantize_unit_into(x + unit * 256, q8 + unit * 64, scale, sums + unit * 16, lane);
}

#if LLQ
// LLQ: a unit's 37 lines of 16 bytes, {data, epoch, data, epoch} (NCCL's LL protocol: each 8-byte half is stored and
// loaded whole, so a half whose epoch is the launch's holds the launch's data), in the order the CTA stages them:
// lines 0..31 its staged words 2L, 2L + 1; 32..35 lane t's sums (hi pair, lo pair); 36 its scale (twice)
constexpr int kLLLines = 37, kLLUnitBytes = 16 * kLLLines;
// the most lines a thread stages (16 token rows, XSHARED super-blocks): its loads all in flight, a bit each of a mask
constexpr int kLLPerThread = (16 * XSHARED * kLLLines + kThreads - 1) / kThreads;
static_assert(kLLPerThread <= 32, "LLQ: at most 32 lines a thread (more warps, or fewer staged super-blocks)");

__device__ __forceinline__ void st_ll(uint8_t* p, uint32_t a, uint32_t b, uint32_t epoch) {
    asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(a), "r"(epoch), "r"(b), "r"(epoch)
                 : "memory");
}

__device__ __forceinline__ uint4 ld_ll(const uint8_t* p) {
    uint4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ bool ll_current(uint4 line, uint32_t epoch) { return line.y == epoch && line.w == epoch; }

// One (token, super-block) `unit` quantized by a warp into its LL lines. Line L holds staged words 2L, 2L + 1, which are
// old words w and w + 4 for w = 16 (L >> 3) + 8 (L & 1) + ((L >> 1) & 3) (staged_word's inverse), old word w being lane
// w / 2's packed[w % 2]; the sums as sum_pairs gives them to lane 8t
__device__ __forceinline__ void quantize_unit_ll(const float* __restrict__ x, uint8_t* ll, long long unit, int lane,
                                                 uint32_t epoch) {
    const Q8Lanes q = quantize_lanes(x + unit * 256, lane);
    uint8_t* lines = ll + unit * kLLUnitBytes;
    const int w = 16 * (lane >> 3) + 8 * (lane & 1) + ((lane >> 1) & 3), from = w >> 1;
    const uint32_t a0 = __shfl_sync(0xffffffffu, q.packed[0], from), a1 = __shfl_sync(0xffffffffu, q.packed[1], from);
    const uint32_t b0 = __shfl_sync(0xffffffffu, q.packed[0], from + 2);
    const uint32_t b1 = __shfl_sync(0xffffffffu, q.packed[1], from + 2);
    st_ll(lines + 16 * lane, w & 1 ? a1 : a0, w & 1 ? b1 : b0, epoch);
    const uint2 pairs = sum_pairs(q.bsum);
    if ((lane & 7) == 0) st_ll(lines + 16 * (32 + (lane >> 3)), pairs.x, pairs.y, epoch);
    if (lane == 0) st_ll(lines + 16 * 36, __float_as_uint(q.scale), __float_as_uint(q.scale), epoch);
}
#endif

// LLQ: a staged line's 16 bytes in one load: with only its data words used, ptxas splits a plain uint4 load into two
// 32-bit ones, but not a PTX ld.volatile (the asm statement itself is not volatile: the compiler still schedules the
// loop's loads freely, all after the staging's barrier, which they depend on)
__device__ __forceinline__ uint4 lds_line(const void* p) {
    uint4 v;
    asm("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(mmq::smem_addr(p)));
    return v;
}

// The staged sums and scales as the loop reads them: a uint2 / float2 (from global or shared memory), or (LLQ) the data
// words of LL lines in shared memory
__device__ __forceinline__ uint2 staged_sums(const uint2* p) { return load_pass_output(p); }
__device__ __forceinline__ uint2 staged_sums(const uint4* p) {  // (LLQ: the sums' line, its data words)
    const uint4 v = lds_line(p);
    return make_uint2(v.x, v.z);
}
__device__ __forceinline__ float2 staged_scales(const float* p) {
    return load_pass_output(reinterpret_cast<const float2*>(p));
}
__device__ __forceinline__ float2 staged_scales(const uint4* p) {  // (LLQ: two tokens' lines, a data word of each)
    return make_float2(__uint_as_float(p[0].x), __uint_as_float(p[1].x));
}

// Every warp of the grid quantizes units warp, warp + warps, ... and every thread zeroes its share of C's n_zero floats.
// kTriggerLate (the pass with PASSTRIG): the CTA lets its dependent launch once every warp's first unit is stored (the
// stores consume the loaded x, so its reads have landed; the CTA's first trigger is the one that counts).
// PASSFLAG (counters non-null): each unit is published on its range's counter once its warp's stores are, and the CTA
// counts itself done once its zeros are (each thread's fence, then one atomic: the CUDA guide's threadFenceReduction).
template <bool kTriggerLate = false>
__device__ __forceinline__ void quantize_and_zero(const float* __restrict__ x, uint32_t* __restrict__ q8,
                                                  float* __restrict__ d8, __half* __restrict__ sums,
                                                  float* __restrict__ C, int T, int K, long long n_zero,
                                                  long long thread, long long threads, CtaTrace& trace,
                                                  unsigned* counters = nullptr, int splits = 1) {
    const int lane = threadIdx.x & 31, nsb = K / 256;
    const long long units = static_cast<long long>(T) * nsb;
    auto quantize = [&](long long unit) {
        quantize_unit(x, q8, d8, sums, unit, lane, nsb);
        if (counters) {
            __threadfence();
            __syncwarp();
            const int tok = static_cast<int>(unit / nsb), sb = static_cast<int>(unit % nsb);
            if (lane == 0) atomicAdd(counters + (tok >> 4) * splits + range_of(sb, splits, nsb), 1u);
        }
    };
    long long unit = thread >> 5;
    if (unit < units) quantize(unit);  // warp-uniform
    TRACE_MARK(2);
    if constexpr (kTriggerLate) {
        __syncthreads();
        MMQ_LAUNCH_DEPENDENTS();
    }
    for (unit += threads >> 5; unit < units; unit += threads >> 5) quantize(unit);
    for (long long i = thread; i < n_zero; i += threads) C[i] = 0.0f;
    if (counters) {
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) atomicAdd(counters + (T + 15) / 16 * splits, 1u);
    }
}

// XPF: the units quantize_and_zero gives this thread's warp, each 1 KB of x asked of L2 by its lane 0
__device__ __forceinline__ void prefetch_units(const float* __restrict__ x, int T, int K, long long thread,
                                               long long threads) {
    const long long units = static_cast<long long>(T) * (K / 256);
    if ((threadIdx.x & 31) == 0)
        for (long long unit = thread >> 5; unit < units; unit += threads >> 5) mmq::bulk_prefetch_l2(x + unit * 256, 1024);
}

#if CLUSTERQ
// CLUSTERQ: this CTA's share of its K range's activations (token rows 0 .. rows - 1 of the tile, super-blocks 0 ..
// nrange - 1 of the range), quantized into the staged rows, d8 and sums of every CTA of the cluster. Units (a token row's
// super-block) go to the cluster's warps in turn: warp w of rank c takes units u0, u0 + stride, ... (u0 = c WARPS + w,
// stride = CLUSTERQ WARPS), kXAhead of them per batch, each batch's loads in flight together. The first batch is loaded
// before the ring's first copies (PDL 0; PDL 2: right after the wait for the kernel before), so its reads are not queued
// behind weights. Each unit's bytes go to every member by st.async completing on the member's mbarrier: no release fence
// (which waits for the thread's weight copies in flight, run 99) and no cluster-wide barrier; a CTA expects
// kUnitBytes per unit of its range and waits for them on its own barrier.
constexpr int kXStrideUnits = CLUSTERQ * WARPS;
constexpr int kXAhead = (16 * XSHARED + kXStrideUnits - 1) / kXStrideUnits < 4
                            ? (16 * XSHARED + kXStrideUnits - 1) / kXStrideUnits : 4;  // at most 32 registers
constexpr uint32_t kUnitBytes = 256 + 4 + 4 * 8;  // a unit's int8 words, its scale, its 4 lanes' sums (uint2 each)

__device__ __forceinline__ void load_units(const float* __restrict__ x, float (&v)[kXAhead][8], int u0, int units,
                                           int nrange, int tok0, int sb_begin, int K, int lane) {
#pragma unroll
    for (int i = 0; i < kXAhead; ++i) {
        const int u = u0 + i * kXStrideUnits;
        if (u < units)  // warp-uniform
            mmq::load8(x + static_cast<long long>(tok0 + u / nrange) * K + (sb_begin + u % nrange) * 256 + 8 * lane, v[i]);
    }
}

// member[c] / bar[c]: CTA c's shared address of `smem` (the same offsets in every CTA) / of its barrier. v: the first
// batch, loaded.
__device__ __forceinline__ void quantize_into_cluster(const float* __restrict__ x, float (&v)[kXAhead][8],
                                                      const uint32_t (&member)[CLUSTERQ], const uint32_t (&bar)[CLUSTERQ],
                                                      int u_first, int units, int nrange, int tok0, int sb_begin, int K,
                                                      int lane) {
    for (int u0 = u_first; u0 < units; u0 += kXAhead * kXStrideUnits) {  // warp-uniform
        if (u0 != u_first) load_units(x, v, u0, units, nrange, tok0, sb_begin, K, lane);
#pragma unroll
        for (int i = 0; i < kXAhead; ++i) {
            const int u = u0 + i * kXStrideUnits;
            if (u >= units) break;
            const int r = u / nrange, s = u % nrange;
            const Q8Lanes q = quantize_values(v[i]);
            const uint32_t words = kXsAt + r * kXStride + s * 256, row_sums = kSumsAt + (r * kSumStride + s * 4) * 8;
            const uint2 pairs = sum_pairs(q.bsum);  // the sums as lane t = lane / 8 of the min mma reads them
#pragma unroll
            for (int c = 0; c < CLUSTERQ; ++c) {
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    mmq::st_async_u32(member[c] + words + 4 * staged_word(2 * lane + e), q.packed[e], bar[c]);
                if (lane == 0)
                    mmq::st_async_u32(member[c] + kD8At + (s * 16 + r) * 4, __float_as_uint(q.scale), bar[c]);
                if ((lane & 7) == 0) mmq::st_async_v2_u32(member[c] + row_sums + (lane >> 3) * 8, pairs.x, pairs.y, bar[c]);
            }
        }
    }
}
#endif

}  // namespace dq8

// The activation pass: one warp per (token, super-block); it also zeroes the first n_zero floats of C.
extern "C" __global__ void direct_q8_pass(const float* __restrict__ x, uint32_t* __restrict__ q8, float* __restrict__ d8,
                                          __half* __restrict__ sums, float* __restrict__ C, int T, int K,
                                          long long n_zero
#if PASSFLAG
                                          , unsigned* __restrict__ counters, int splits  // the GEMM's K ranges
#endif
) {
    dq8::CtaTrace trace;
    TRACE_BEGIN(0);
    const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
    if constexpr (!PASSTRIG) MMQ_LAUNCH_DEPENDENTS();
    if constexpr (XPF) dq8::prefetch_units(x, T, K, thread, threads);
    MMQ_WAIT_PRIMARY();  // PDL 2: the kernel before it has written x and is done with C
    TRACE_MARK(1);
#if PASSFLAG
    dq8::quantize_and_zero<PASSTRIG>(x, q8, d8, sums, C, T, K, n_zero, thread, threads, trace, counters, splits);
#else
    dq8::quantize_and_zero<PASSTRIG>(x, q8, d8, sums, C, T, K, n_zero, thread, threads, trace);
#endif
    TRACE_END(0);
}

// C[T, M] += this CTA's part: WARPS x 16 weight rows (blockIdx.x), the blockIdx.y-th of gridDim.y ranges of
// super-blocks, one token tile of 16 (blockIdx.z).
#if GRIDQ || PASSFLAG  // outputs written while the GEMM runs (its own CTAs', or a pass's): no const __restrict__ promise
#define PASS_OUTPUT(type) type*
#else
#define PASS_OUTPUT(type) const type* __restrict__
#endif
extern "C" __global__ void __launch_bounds__(dq8::kThreads, MIN_BLOCKS)
#if CLUSTERQ
__cluster_dims__(CLUSTERQ, 1, 1)  // the launcher's gridDim.x is a multiple of CLUSTERQ
#endif
mmq_direct_q8_gemm(const uint8_t* __restrict__ W, PASS_OUTPUT(int8_t) Q8, PASS_OUTPUT(float) D8, PASS_OUTPUT(uint2) S,
                   float* __restrict__ C, int M, int T, int K,
                   long long /* row_bytes: the tile layout has its own strides */
#if GRIDQ == 1
                   , const float* __restrict__ X, unsigned* __restrict__ arrived, unsigned epoch
#elif GRIDQ == 2  // counters: one per (token tile, K range), + epoch a launch; flags: C's tiles zeroed (an epoch each)
                   , const float* __restrict__ X, unsigned* __restrict__ counters, int* __restrict__ flags,
                   unsigned epoch
#elif CLUSTERQ
                   , const float* __restrict__ X, int* __restrict__ flags, int epoch
#elif PASSFLAG
                   , const unsigned* __restrict__ counters, unsigned epoch, unsigned pass_ctas  // counts: epoch x per call
#endif
) {
    using namespace dq8;
    extern __shared__ __align__(16) uint8_t smem[];
    CtaTrace trace;
    TRACE_BEGIN(1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int nsb = K / 256, sb_begin = range_begin(blockIdx.y, gridDim.y, nsb);
    const int sb_end = range_begin(blockIdx.y + 1, gridDim.y, nsb);
    const int nrange = sb_end - sb_begin;
    if (nrange > XSHARED) __trap();  // the launcher splits K so that a range fits
    const int row0 = (blockIdx.x * WARPS + warp) * 16, tok0 = blockIdx.z * 16, rows = min(16, T - tok0);
    const long long tile = min(row0 / 16, (M - 1) / 16);  // a warp past M streams the last tile and stores nothing
    const long long tiles = (M + 15) / 16, slot_stride = SBMAJOR ? tiles * kSlotBytes : kSlotBytes;  // next super-block
    const uint8_t* slots = W + (SBMAJOR ? sb_begin * tiles + tile : tile * nsb + sb_begin) * kSlotBytes;
    const uint8_t* src = slots + 16 * lane;
    uint8_t* ring = smem + warp * (RING * kSlotBytes);
    uint8_t* xs = smem + kXsAt;
#if CLUSTERQ
    // the barrier the cluster's st.async of this CTA's activations complete on: initialized, and this CTA's expected
    // bytes armed, before the cluster arrival that lets the other CTAs store
    __shared__ uint64_t x_landed;
    const int u_first = (CLUSTERQ > 1 ? mmq::cluster_rank() : 0) * WARPS + warp, units = rows * nrange;
    if (threadIdx.x == 0) {
        mmq::mbar_init(&x_landed, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        mmq::mbar_arrive_expect_tx(&x_landed, units * kUnitBytes);
    }
    __syncthreads();
    if constexpr (CLUSTERQ > 1) mmq::cluster_arrive_relaxed();  // this CTA has started (waited for before the stores)
    float xv[kXAhead][8];
    // PDL 0: this warp's first units of x asked for before any weight, at the head of DRAM's queues
    if constexpr (!PDL) load_units(X, xv, u_first, units, nrange, tok0, sb_begin, K, lane);
#endif
#if XBULK
    __shared__ uint64_t x_full;  // XBULK: the range's staged activations, sums and scales have landed (one phase)
    if (threadIdx.x == 0) {
        mmq::mbar_init(&x_full, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // (GRIDQ 2's barriers order it for all)
    }
#endif
#if SELFQ
    __shared__ uint64_t x_slot[SELFQ];  // SELFQ: slot i's f32 activations have landed (one phase a fill)
    if (warp == 0) {  // warp 0 issues the copies; the other warps wait on the slots only after a CTA barrier
        if (lane < SELFQ) mmq::mbar_init(&x_slot[lane], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        __syncwarp();
    }
    // super-block j of the range, its 16 token rows (a token past T copies the last token's), into slot j % SELFQ
    auto issue_x = [&](int j) {
        if (warp == 0 && j < nrange) {
            uint64_t* bar = &x_slot[j % SELFQ];
            if (lane == 0) mmq::mbar_arrive_expect_tx(bar, kXfSlotBytes);
            __syncwarp();
            if (lane < 16) {
                // the warps' reads of the slot's last contents (before a CTA barrier) come before the engine's writes
                mmqwg::fence_proxy_async();
                mmq::bulk_copy_g2s(smem + kXfAt + (j % SELFQ) * kXfSlotBytes + lane * 1024,
                                   X + static_cast<long long>(min(tok0 + lane, T - 1)) * K + (sb_begin + j) * 256, 1024,
                                   bar);
            }
        }
    };
    // super-block j's 16 token rows quantized, a row a warp, into the staged rows, sums and scales
    auto quantize_x = [&](int j) {
        if (j >= nrange) return;
        mmq::mbar_wait(&x_slot[j % SELFQ], (j / SELFQ) & 1);
        const float* xf = reinterpret_cast<const float*>(smem + kXfAt + (j % SELFQ) * kXfSlotBytes);
        for (int r = warp; r < 16; r += WARPS) {
            float v[8];
            mmq::load8(xf + r * 256 + 8 * lane, v);
            store_staged_unit(quantize_values(v), smem, r, j, lane);
        }
    };
#endif
#if BULK
    __shared__ uint64_t full[WARPS][RING];  // slot i of warp w has landed (one phase per fill)
    if (lane < RING) mmq::mbar_init(&full[warp][lane], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // initialized before the copy engine uses it
    __syncwarp();
#endif

    auto issue_slot = [&](int s, bool live) {  // super-block sb_begin + s of the warp's tile into its ring slot
#if BULK
        if (live && lane == 0) {
            uint64_t* bar = &full[warp][s % RING];
            // the warp's reads of the slot's last contents (ordered by the __syncwarp before) come before the copy
            // engine's writes: a proxy fence between the generic and the async proxy
            mmqwg::fence_proxy_async();
            mmq::mbar_arrive_expect_tx(bar, kSlotBytes);
            mmq::bulk_copy_g2s(ring + (s % RING) * kSlotBytes, src - 16 * lane, kSlotBytes, bar);
        }
#else
        const bool last_piece = lane + 32 * (kCopies - 1) < kPieces;  // the lanes that copy a 5th piece of 144
        uint8_t* slot = ring + (s % RING) * kSlotBytes + 16 * lane;
        if (live) {
#pragma unroll
            for (int i = 0; i < kCopies - 1; ++i) mmq::cp_async16(slot + 512 * i, src + 512 * i);
            if (last_piece) mmq::cp_async16(slot + 512 * (kCopies - 1), src + 512 * (kCopies - 1));
        }
        mmq::cp_async_commit();  // one group per slot, empty past the range: the wait counts stay uniform
#endif
        src += slot_stride;
    };
#if PASSFLAG  // this CTA's range of its token tile: rows x nrange units, each published once a call
    const unsigned* range_count = counters + blockIdx.z * gridDim.y + blockIdx.y;
    if constexpr (PASSFLAG == 1) {
        wait_count(range_count, epoch * static_cast<unsigned>(rows * nrange));
        TRACE_MARK(1);
    }
#endif
    const uint8_t* ahead = slots + (RING - 1) * slot_stride;  // the next super-block to ask L2 for (first: past the ring)
    auto ask_l2 = [&](int s) {  // super-block s of the range (the one at `ahead`) into L2: a hint, nothing to wait for
        if (L2AHEAD > 0) {
            if (lane == 0 && s < nrange) mmq::bulk_prefetch_l2(ahead, kSlotBytes);
            ahead += slot_stride;
        }
    };
#if GRIDQ == 2  // this range's units (token rows of the tile x its super-blocks), shared by the range's CTAs warp by warp:
    // warp w of CTA x takes units x * WARPS + w, then a stride of the range's warps on; the range's count grows by the
    // units stored, so a CTA that quantized none adds nothing and none waits for it (run 108: counting CTAs made
    // 14336x4096's ranges wait for 112 CTAs, 96 of them with no unit)
    // (LOCALQ: the units of the range's super-blocks past its first local_sbs, which each CTA quantizes itself)
    // (SELFQ: none, each CTA quantizes its whole range itself)
    const int local_sbs = LOCALQ > 0 ? min(LOCALQ, nrange) : 0, shared_sbs = SELFQ ? 0 : nrange - local_sbs;
    const int range_units = Q8IN ? 0 : rows * shared_sbs, stride = gridDim.x * WARPS, first_unit = blockIdx.x * WARPS;
    auto mine_below = [&](int n) {  // how many of this CTA's units are numbered below n
        return static_cast<unsigned>(n / stride * WARPS + min(WARPS, max(0, n % stride - first_unit)));
    };
    const unsigned mine = SELFQ || Q8IN ? 0u : mine_below(range_units);  // (SELFQ, Q8IN: no count to add to)
    const bool ring_first = !(QFIRST && mine);
    // SPLITCOUNT: two counts a range, its first super-block's units (numbered first) and the rest's
    unsigned* range_count = SPLITCOUNT ? counters + 2 * (blockIdx.z * gridDim.y + blockIdx.y)
                                       : counters + blockIdx.z * gridDim.y + blockIdx.y;
    // range 0's flag of this (row tile, token tile): the launch's epoch once C's tile is zeroed (computed where used)
    auto tile_flag = [&] { return flags + blockIdx.z * gridDim.x + blockIdx.x; };
    const int tile_epoch = static_cast<int>(epoch);
#else
    constexpr bool ring_first = true;
    constexpr int local_sbs = 0;
#endif
    auto issue_ring = [&] {
#pragma unroll
        for (int s = 0; s < kEarlySlots; ++s) issue_slot(s, s < nrange);
    };
    auto issue_late_slots = [&] {  // EARLYSLOTS: the ring's other slots, once the activations' groups are committed
#pragma unroll
        for (int s = kEarlySlots; s < RING - 1; ++s) issue_slot(s, s < nrange);
    };
    auto ask_l2_first = [&] {
#pragma unroll
        for (int s = RING - 1; s < RING - 1 + L2AHEAD; ++s) ask_l2(s);
    };
    if (ring_first) issue_ring();
    if (!L2LATE && !PACE) ask_l2_first();
    int l2_lead = L2AHEAD;  // the super-blocks past the ring that the warp has asked L2 for (PACE: those it got to)
    if constexpr (PDL == 2) MMQ_LAUNCH_DEPENDENTS();  // the next call's pass may launch (it waits for this GEMM's end)
#if GRIDQ == 2
    {
#if PACE  // thread 0 says the range's count is seen (set before the barrier after the CTA's units are stored)
        __shared__ int count_seen;
        if (threadIdx.x == 0) count_seen = 0;
#endif
        auto unit_of = [&](int u) {  // (SPLITCOUNT: super-block major, so the first super-block's are units 0 .. rows - 1)
            if constexpr (SPLITCOUNT) return static_cast<long long>(tok0 + u % rows) * nsb + sb_begin + u / rows;
            return static_cast<long long>(tok0 + u / shared_sbs) * nsb + sb_begin + local_sbs + u % shared_sbs;
        };
        auto local_unit = [&](int lu) {
            return static_cast<long long>(tok0 + lu / local_sbs) * nsb + sb_begin + lu % local_sbs;
        };
        if constexpr (XPF) {  // asked of L2 before the wait: a hint, made current by the kernel before's writes
            if constexpr (SELFQ) {  // the range's rows, shared by its CTAs: row r by the one r mod gridDim.x
                if (warp == 0 && lane < rows && lane % gridDim.x == blockIdx.x)
                    mmq::bulk_prefetch_l2(X + static_cast<long long>(tok0 + lane) * K + sb_begin * 256, nrange * 1024);
            } else {  // this warp's units (LOCALQ: and its local ones)
                for (int u = first_unit + warp; u < range_units && lane == 0; u += stride)
                    mmq::bulk_prefetch_l2(X + unit_of(u) * 256, 1024);
                if constexpr (LOCALQ > 0) {
                    for (int lu = warp; lu < rows * local_sbs && lane == 0; lu += WARPS)
                        mmq::bulk_prefetch_l2(X + local_unit(lu) * 256, 1024);
                }
            }
        }
        asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the kernel before has written x and is done with C
        TRACE_MARK(4);
#if SELFQ
#pragma unroll
        for (int j = 0; j < SELFQ; ++j) issue_x(j);
#endif
        if (L2LATE && ring_first) ask_l2_first();
        constexpr int kLocalPerWarp = (16 * LOCALQ + WARPS - 1) / WARPS;
        float lv[kLocalPerWarp > 0 ? kLocalPerWarp : 1][8];  // LOCALQ: this warp's local units' x, loaded with its first
        int u = first_unit + warp;                           // shared unit's (one round trip for all of them)
        if constexpr (LOCALQ > 0) {
            TRACE_MARK(1);  // (the count is awaited in the loop)
            float gv[8];
            if (u < range_units) mmq::load8(X + unit_of(u) * 256 + 8 * lane, gv);
#pragma unroll
            for (int i = 0; i < kLocalPerWarp; ++i) {
                const int lu = warp + i * WARPS;
                if (lu < rows * local_sbs) mmq::load8(X + local_unit(lu) * 256 + 8 * lane, lv[i]);
            }
            if (u < range_units) {  // the count's unit first
                const long long unit = unit_of(u);
                const int tok = static_cast<int>(unit / nsb), sb = static_cast<int>(unit % nsb);
                store_unit(quantize_values(gv), reinterpret_cast<uint32_t*>(Q8) + unit * 64,
                           D8 + ((tok >> 4) * static_cast<long long>(nsb) + sb) * 16 + (tok & 15),
                           reinterpret_cast<__half*>(S) + unit * 16, lane);
                u += stride;
            }
        }
        for (; !Q8IN && u < range_units; u += stride) {  // warp-uniform
#if LLQ
            quantize_unit_ll(X, reinterpret_cast<uint8_t*>(Q8), unit_of(u), lane, epoch);
#else
            quantize_unit(X, reinterpret_cast<uint32_t*>(Q8), D8, reinterpret_cast<__half*>(S), unit_of(u), lane, nsb);
#endif
        }
        // LLQ: each thread fences its own lines (runs 129-130: unfenced, the range was staged ~7 us after the stores;
        // run 131: fenced, still 3-4 us after the last fence returned); no barrier, no add
        if constexpr (LLQ) __threadfence();
        if constexpr (!LLQ) __syncthreads();  // every thread's stores, then thread 0's fence (cumulative over them)
        if (!LLQ && threadIdx.x == 0 && mine) {  // and the CTA's one add, after the barrier: a release cumulative over them
            if constexpr (RELADD) {
                asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(range_count), "r"(mine) : "memory");
            } else if constexpr (SPLITCOUNT) {  // one fence for both counts
                const unsigned first = mine_below(rows);
                __threadfence();
                if (first) atomicAdd(range_count, first);
                if (mine > first) atomicAdd(range_count + 1, mine - first);
            } else {
                __threadfence();
                atomicAdd(range_count, mine);
            }
        }
        if (mine) TRACE_MARK(5);  // (after the release: its fence has waited for the CTA's stores)
        if (!ring_first) issue_ring();  // QFIRST: after the add (the loop's first wait counts these groups)
        if (L2LATE && !ring_first) ask_l2_first();
        if constexpr (LOCALQ > 0) {  // row r's super-block sb into its staged row, scale and sums (SMEMSUMS's layout)
#pragma unroll
            for (int i = 0; i < kLocalPerWarp; ++i) {
                const int lu = warp + i * WARPS, r = lu / local_sbs, sb = lu % local_sbs;
                if (lu >= rows * local_sbs) break;  // warp-uniform
                store_staged_unit(quantize_values(lv[i]), smem, r, sb, lane);
            }
            __syncthreads();  // (before the loop reads them)
        }
        // range 0 zeroes C's tile and publishes the epoch (ZLATE: before its loop); the others wait before their reds
        if (!ZLATE && !ZPUB && blockIdx.y == 0)
            mmq::zero_tile<16 * WARPS, kThreads, !RELADD>(
                C, tile_flag(), tile_epoch, blockIdx.x * WARPS * 16, tok0, M, T);
        if (ZPUB && blockIdx.y == 0)  // (published in the loop's first trip)
            mmq::store_zero_tile<16 * WARPS, kThreads>(C, blockIdx.x * WARPS * 16, tok0, M, T);
        if constexpr (Q8IN) { TRACE_MARK(1); }  // (stored before the launch: nothing to wait for)
        if constexpr (LOCALQ == 0 && !LLQ && !SELFQ && !Q8IN) {  // its units are stored (SPLITCOUNT: its first super-block's)
            const unsigned target = epoch * static_cast<unsigned>(SPLITCOUNT ? rows : range_units);
#if PACE
            l2_lead = 0;  // (warp 0 asks nothing ahead: its thread 0 polls)
            if (threadIdx.x == 0) {
                wait_count<POLLACQ == 1, false>(range_count, target);
                *reinterpret_cast<volatile int*>(&count_seen) = 1;
            } else if (warp > 0) {  // the whole warp, lane 0 deciding, so that its lanes' `ahead` stay in step
                unsigned long long next = global_ns() + (warp - 1) * static_cast<unsigned long long>(PACE) / (WARPS - 1);
                while (l2_lead < L2AHEAD) {
                    const int seen = *reinterpret_cast<volatile int*>(&count_seen);
                    const int state = __shfl_sync(0xffffffffu, (global_ns() >= next ? 1 : 0) | (seen ? 2 : 0), 0);
                    if (state & 2) break;
                    if (state & 1) {
                        ask_l2(RING - 1 + l2_lead++);
                        next += PACE;
                    }
                    __nanosleep(64);
                }
            }
            __syncthreads();
#else
            wait_count<POLLACQ == 1>(range_count, target);
#endif
            TRACE_MARK(1);
        }
    }
#elif GRIDQ
    {  // the pass's work, shared by the grid's warps, then a grid-wide arrival count (every CTA is resident: see above)
        const long long cta = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        const unsigned ctas = gridDim.x * gridDim.y * gridDim.z;
        quantize_and_zero(X, reinterpret_cast<uint32_t*>(Q8), D8, reinterpret_cast<__half*>(S), C, T, K,
                          static_cast<long long>(T) * M, cta * kThreads + threadIdx.x,
                          static_cast<long long>(ctas) * kThreads, trace);
        __syncthreads();  // this CTA's writes, then one arrival for it
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(arrived, 1u);
        }
        wait_count(arrived, epoch * ctas);  // every CTA's activations are written and C is zeroed (wraps consistently)
    }
#elif CLUSTERQ
    int* flag = flags + static_cast<long long>(blockIdx.z) * gridDim.x + blockIdx.x;
    if constexpr (PDL) {  // the kernel before has written x and is done with C
        asm volatile("griddepcontrol.wait;\n" ::: "memory");
        load_units(X, xv, u_first, units, nrange, tok0, sb_begin, K, lane);
    }
    if (blockIdx.y == 0) mmq::zero_tile<16 * WARPS, kThreads>(C, flag, epoch, blockIdx.x * WARPS * 16, tok0, M, T);
    {
        uint32_t member[CLUSTERQ], bar[CLUSTERQ];
#pragma unroll
        for (int c = 0; c < CLUSTERQ; ++c) member[c] = mmq::cluster_addr(smem, c), bar[c] = mmq::cluster_addr(&x_landed, c);
        if constexpr (CLUSTERQ > 1) mmq::cluster_wait();  // every CTA of the cluster has started: its barrier is armed
        quantize_into_cluster(X, xv, member, bar, u_first, units, nrange, tok0, sb_begin, K, lane);
        mmq::mbar_wait(&x_landed, 0);  // every share is in this CTA's shared memory
    }
#elif PASSFLAG
    if constexpr (PASSFLAG == 2) {
        wait_count(range_count, epoch * static_cast<unsigned>(rows * nrange));  // this range's activations are written
        TRACE_MARK(1);
    }
#else
    if constexpr (PDL) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the pass's activations are written
    TRACE_MARK(1);
#endif
#if CLUSTERQ  // staged already: two empty groups keep the loop's wait counts
    mmq::cp_async_commit();
    mmq::cp_async_commit();
    const uint2* xsum = reinterpret_cast<const uint2*>(smem + kSumsAt);
    const uint2* sums[2] = {xsum + g * kSumStride + t, xsum + (g + 8) * kSumStride + t};
    const float* d8 = reinterpret_cast<const float*>(smem + kD8At) + 2 * t;
#else
    // the range's activations of the live token rows after the ring's first RING - 1 slots: the first super-block in a
    // group of its own (the loop starts on it), the rest in a second group (needed from the second super-block on)
    auto stage = [&](int first, int count) {  // super-blocks first .. first + count - 1 of the range: 16 pieces each
        for (int p = threadIdx.x; p < rows * count * 16; p += kThreads) {
            const int r = p / (count * 16), c = first * 16 + p % (count * 16);
            mmq::cp_async16(xs + r * kXStride + 16 * c, Q8 + static_cast<long long>(tok0 + r) * K + sb_begin * 256 + 16 * c);
        }
        mmq::cp_async_commit();
    };
#if SMEMSUMS  // the range's sums (16 token rows of 32 bytes a super-block) and scales (64 bytes a super-block) of
    // super-blocks first .. first + count - 1, into the group that stage() then commits
    auto stage_sums = [&](int first, int count) {
        for (int p = threadIdx.x; p < 16 * 2 * count + 4 * count; p += kThreads) {
            if (p < 16 * 2 * count) {  // a token past T copies the last token's (its outputs are never stored)
                const int r = p / (2 * count), c = 2 * first + p % (2 * count);
                mmq::cp_async16(smem + kSumsAt + r * kSumStride * 8 + 16 * c,
                                S + (static_cast<long long>(min(tok0 + r, T - 1)) * nsb + sb_begin) * 4 + 2 * c);
            } else {
                const int c = 4 * first + p - 16 * 2 * count;
                mmq::cp_async16(smem + kD8At + 16 * c,
                                D8 + (static_cast<long long>(blockIdx.z) * nsb + sb_begin) * 16 + 4 * c);
            }
        }
    };
#endif
#if LOCALQ || SPLITCOUNT  // the range from super-block `first` on (LOCALQ: past its local ones; SPLITCOUNT: past the
    // first), once its count says it is stored: one group, in the loop
    auto stage_from = [&](int first) {
        stage_sums(first, nrange - first);
        stage(first, nrange - first);
    };
#endif
#if LOCALQ  // nothing staged before the loop: its local super-blocks are in shared memory already
#elif XBULK  // lane r: token row r's activations and sums, lane 16: the scales; two empty groups keep the loop's counts
    if (warp == 0) {
        // the other CTAs' generic stores, acquired through the count, ordered before the copy engine's reads
        asm volatile("fence.proxy.async.global;\n" ::: "memory");
        const uint32_t row_bytes = nrange * 256, sum_bytes = nrange * 32, d8_bytes = nrange * 64;
        if (lane == 0) mmq::mbar_arrive_expect_tx(&x_full, rows * row_bytes + 16 * sum_bytes + d8_bytes);
        __syncwarp();
        if (lane < rows)
            mmq::bulk_copy_g2s(xs + lane * kXStride, Q8 + static_cast<long long>(tok0 + lane) * K + sb_begin * 256,
                               row_bytes, &x_full);
        if (lane < 16)  // a token past T copies the last token's (its outputs are never stored)
            mmq::bulk_copy_g2s(smem + kSumsAt + lane * kSumStride * 8,
                               S + (static_cast<long long>(min(tok0 + lane, T - 1)) * nsb + sb_begin) * 4, sum_bytes,
                               &x_full);
        if (lane == 16)
            mmq::bulk_copy_g2s(smem + kD8At, D8 + (static_cast<long long>(blockIdx.z) * nsb + sb_begin) * 16, d8_bytes,
                               &x_full);
    }
    mmq::cp_async_commit();
    mmq::cp_async_commit();
#elif LLQ  // the range's lines, each thread a run of them (a unit's 37 lines to one or two threads), loaded by strong
    // loads, all of them in flight at once, again for those whose epochs are stale once a stale one is current (run 128:
    // staged by cp.async copies and strong polls, the range took 10-25 us after the stores)
    {
        const uint8_t* ll = reinterpret_cast<const uint8_t*>(Q8);
        const int lines = rows * nrange * kLLLines, per = (lines + kThreads - 1) / kThreads;
        const int p_begin = min(lines, static_cast<int>(threadIdx.x) * per), p_end = min(lines, p_begin + per);
        auto src_of = [&](int p) {
            const int unit = p / kLLLines, r = unit / nrange;
            return ll + ((static_cast<long long>(tok0 + r) * nsb + sb_begin + unit - r * nrange) * kLLLines +
                         p - unit * kLLLines) * 16;
        };
        auto dst_of = [&](int p) {
            const int unit = p / kLLLines, line = p - unit * kLLLines, r = unit / nrange, sb = unit - r * nrange;
            return line < 32   ? xs + r * kXStride + sb * 512 + 16 * line
                   : line < 36 ? smem + kSumsAt + (r * kSumStride + sb * 4 + line - 32) * 16
                               : smem + kD8At + (sb * 16 + r) * 16;
        };
        uint32_t pending = p_end - p_begin >= 32 ? 0xffffffffu : (1u << (p_end - p_begin)) - 1;  // kLLPerThread <= 32
        uint4 v[kLLPerThread];
        for (int round = 0; pending; ++round) {
            // after a round that found stale lines (LLQ 2: before the first too), one line alone is polled until it is
            // current, and only then are all the stale ones asked for again (not every stale line every round: 10 MB
            // of strong loads a round from the grid; runs 129-130 measured both at ~7 us)
            if (round > 0 || LLQ == 2) {
                const uint8_t* first = src_of(p_begin + __ffs(pending) - 1);
                for (long long polls = 0; !ll_current(ld_ll(first), epoch); ++polls) {
                    if (polls > (1LL << 22)) __trap();  // seconds without the line: an error, not a hang
                    __nanosleep(128);
                }
            }
#pragma unroll
            for (int i = 0; i < kLLPerThread; ++i)
                if (pending >> i & 1) v[i] = ld_ll(src_of(p_begin + i));
#pragma unroll
            for (int i = 0; i < kLLPerThread; ++i) {
                if ((pending >> i & 1) && ll_current(v[i], epoch)) {
                    *reinterpret_cast<uint4*>(dst_of(p_begin + i)) = v[i];
                    pending &= ~(1u << i);
                }
            }
        }
        mmq::cp_async_wait<0>();  // the ring's first slots (the loop's waits count only the slots after them)
        __syncthreads();
        TRACE_MARK(1);
    }
#elif SELFQ  // the first super-block quantized now, each later one a trip ahead in the loop; no activation groups
    quantize_x(0);
    __syncthreads();
    issue_x(SELFQ);  // into the slot just read
    TRACE_MARK(1);
#elif SPLITCOUNT  // the first super-block now, one group; the rest in the loop's second trip
    stage_sums(0, 1);
    stage(0, 1);
    issue_late_slots();
#else
#if SMEMSUMS
    stage_sums(0, nrange);  // in the first group
#endif
    stage(0, min(1, nrange));
    stage(1, max(0, nrange - 1));
    issue_late_slots();
#endif
#if LLQ
    const uint4* xsum = reinterpret_cast<const uint4*>(smem + kSumsAt);
    const uint4* sums[2] = {xsum + g * kSumStride + t, xsum + (g + 8) * kSumStride + t};
    const uint4* d8 = reinterpret_cast<const uint4*>(smem + kD8At) + 2 * t;
#elif SMEMSUMS
    const uint2* xsum = reinterpret_cast<const uint2*>(smem + kSumsAt);
    const uint2* sums[2] = {xsum + g * kSumStride + t, xsum + (g + 8) * kSumStride + t};
    const float* d8 = reinterpret_cast<const float*>(smem + kD8At) + 2 * t;
#else
    const uint2* sums[2] = {S + (static_cast<long long>(min(tok0 + g, T - 1)) * nsb + sb_begin) * 4 + t,
                            S + (static_cast<long long>(min(tok0 + g + 8, T - 1)) * nsb + sb_begin) * 4 + t};
    const float* d8 = D8 + (static_cast<long long>(blockIdx.z) * nsb + sb_begin) * 16 + 2 * t;
#endif
#endif

#if GRIDQ == 2 && ZLATE  // the activations' copies are in flight: the zeroing's fence overlaps them
    if (blockIdx.y == 0)
        mmq::zero_tile<16 * WARPS, kThreads, !RELADD>(C, tile_flag(), tile_epoch, blockIdx.x * WARPS * 16, tok0, M, T);
#endif
#if GRIDQ == 2
    bool tile_zeroed = false;  // FLAGPEEK: thread 0 of a range past 0 has acquired range 0's flag mid-loop
#endif
    float acc[2][4] = {};
    const uint8_t* xrow[2] = {xs + g * kXStride + (LLQ ? 32 : 16) * t, xs + (g + 8) * kXStride + (LLQ ? 32 : 16) * t};
    for (int s = 0; s < (PROBE == 2 ? 0 : nrange); ++s) {
        __syncwarp();  // every lane has read the slot refilled now (the one multiplied last)
#if SELFQ
        if (s > 0) {  // super-block s, quantized in the trip before, is staged for every warp, and its f32 slot is free
            __syncthreads();
            issue_x(s + SELFQ);
        }
#endif
#if LOCALQ
        if (s == local_sbs) {  // the first super-block the range's CTAs quantized between them
            wait_count<POLLACQ == 1>(range_count, epoch * static_cast<unsigned>(range_units));
            stage_from(local_sbs);
        }
#elif SPLITCOUNT
        if (s == 1) {  // the rest of the range, once its count says it is stored: a group before this trip's slot
            wait_count<POLLACQ == 1>(range_count + 1, epoch * static_cast<unsigned>(rows * (nrange - 1)));
            stage_from(1);
        }
#endif
        issue_slot(s + RING - 1, s + RING - 1 < nrange);
        if (!PACE || l2_lead > 0) ask_l2(s + RING - 1 + l2_lead);
#if SELFQ
        quantize_x(s + 1);  // while this trip's weights are in flight
#endif
#if XBULK
        if (s == 0) mmq::mbar_wait(&x_full, 0);  // the range's activations, sums and scales
#endif
#if GRIDQ == 2 && FLAGPEEK  // after this trip's copies are issued, before its wait for the slot
        if (s == nrange / 2 && blockIdx.y > 0 && threadIdx.x == 0)
            tile_zeroed = mmq::tile_zeroed(tile_flag(), tile_epoch);
#endif
#if BULK
        if (s < 2) {  // this thread's copies of super-block s's activations (the only cp.async groups), then every thread's
            if (s == 0) mmq::cp_async_wait<1>(); else mmq::cp_async_wait<0>();
            __syncthreads();
        }
        mmq::mbar_wait(&full[warp][s % RING], (s / RING) & 1);  // this super-block's slot
#else
        // groups in commit order: slots 0 .. RING - 2, the first super-block's activations, the rest's, then a slot per
        // trip. Super-block s needs slot s (and for s < 2 an activation group): everything older than the groups that
        // may stay pending is complete. s = 0: the rest's activations and slot RING - 1 pending; s = 1: the two slots
        // after it (RING - 1 and RING; with RING = 2 only slot 2, newer than slot 1); later: the RING - 1 slots after s.
        // EARLYSLOTS: the kLateSlots slots past the early ones come after the activations' groups, so trip 0 lets them
        // pend too, and trip 1 as well while slot 1 is early (kEarlySlots > 1), else its RING - 1 newer slots
        // LOCALQ: slots 0 .. RING - 2, then a slot per trip, and at trip local_sbs the shared activations before its
        // slot: that trip lets only its slot pend (and waits for every thread's copies), the others the RING - 1 newest
        if constexpr (LOCALQ > 0) {
            if (s == local_sbs) {
                mmq::cp_async_wait<1>();
                __syncthreads();
            } else {
                mmq::cp_async_wait<RING - 1>();
                __syncwarp();
            }
        } else if constexpr (SPLITCOUNT) {  // slots 0 .. RING - 2, the first super-block's activations, then a slot
            // per trip and in trip 1, before its slot, the rest's: trips 0 and 1 let only their own slot pend (trip 0
            // also EARLYSLOTS's late slots, committed after the first super-block's activations)
            if (s < 2) {
                if (kLateSlots > 0 && s == 0) mmq::cp_async_wait<1 + kLateSlots>(); else mmq::cp_async_wait<1>();
                __syncthreads();
            } else {
                mmq::cp_async_wait<RING - 1>();
                __syncwarp();
            }
        } else if constexpr (LLQ || SELFQ) {  // the range's activations are in shared memory already (LLQ: its lines;
            // SELFQ: super-block s, quantized): only slots pend, the RING - 1 newest
            mmq::cp_async_wait<RING - 1>();
            __syncwarp();
        } else {
            if (s == 0) {
                mmq::cp_async_wait<2 + kLateSlots>();
            } else if (s == 1) {
                mmq::cp_async_wait<(kEarlySlots > 1 ? 2 + kLateSlots : RING - 1)>();
            } else {
                mmq::cp_async_wait<RING - 1>();
            }
            if (s < 2) __syncthreads();  // and every thread's copies of super-block s's activations
            else __syncwarp();           // and every lane's copies of the slot
        }
#endif
        if (s == 0) TRACE_MARK(2);
        // lane t's B words of chunk c (k 4t .., 16 + 4t .. of its 32-blocks 2c, 2c + 1) for token row g + 8n
        auto chunk_b = [&](int n, int c) {
            if constexpr (LLQ) {  // words 4t .. 4t + 3 of the chunk: lines 8c + 2t, 8c + 2t + 1
                const uint4 l0 = lds_line(xrow[n] + 128 * c), l1 = lds_line(xrow[n] + 128 * c + 16);
                return make_uint4(l0.x, l0.z, l1.x, l1.z);
            } else {
                return *reinterpret_cast<const uint4*>(xrow[n] + 64 * c);
            }
        };
#if QTYPE >= 2
        // q6_K: [16][128] nibbles, [16][64] pairs, [16][16] sc, [16] d; q8_0: [16][256] weights, [16][8] d
        const uint8_t* slot = ring + (s % RING) * kSlotBytes;
        if constexpr (PROBE == 1) {  // a word of row g's first part (q6_K's nibbles, q8_0's weights)
            const uint8_t* row = slot + (QTYPE == 2 ? 128 : 256) * g;
            acc[0][0] += __uint_as_float(*reinterpret_cast<const uint32_t*>(row + 16 * t) & 0x007FFFFFu);
            continue;
        }
#if QTYPE == 2
        const uint4 qh6[2] = {*reinterpret_cast<const uint4*>(slot + 2048 + 64 * g + 16 * t),
                              *reinterpret_cast<const uint4*>(slot + 2048 + 64 * (g + 8) + 16 * t)};
        const uint4 sc6[2] = {*reinterpret_cast<const uint4*>(slot + 3072 + 16 * g),
                              *reinterpret_cast<const uint4*>(slot + 3072 + 16 * (g + 8))};
        const float d6[2] = {__half2float(*reinterpret_cast<const __half*>(slot + 3328 + 2 * g)),
                             __half2float(*reinterpret_cast<const __half*>(slot + 3328 + 2 * (g + 8)))};
        int isum6[2][4] = {};  // sum_j sc_j I_j per fragment element (rows g, g + 8; tokens 2t, 2t + 1 of each n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // chunks 2 half, 2 half + 1: one 16-byte load per row
            const uint4 wg = *reinterpret_cast<const uint4*>(slot + 128 * g + 32 * t + 16 * half);
            const uint4 wh = *reinterpret_cast<const uint4*>(slot + 128 * (g + 8) + 32 * t + 16 * half);
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int c = 2 * half + cc;
                const uint4 b[2] = {chunk_b(0, c), chunk_b(1, c)};
#pragma unroll
                for (int f = 0; f < 4; ++f) {  // 32-block 2c + f / 2, part f % 2: sub-block 4c + f
                    const int jj = f >> 1, p = f & 1;
                    const uint32_t a0 = q6_word(word_of(wg, 2 * cc + p), word_of(qh6[0], c), jj, f);
                    const uint32_t a1 = q6_word(word_of(wh, 2 * cc + p), word_of(qh6[1], c), jj, f);
#pragma unroll
                    for (int n = 0; n < 2; ++n) {
                        int d[4];
                        mma_s8s8_k16(d, a0, a1, word_of(b[n], f));
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int sc = static_cast<int8_t>(word_of(sc6[e >> 1], c) >> (8 * f));
                            isum6[n][e] += d[e] * sc;
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {  // the super-block's f32 step: d8 d float(isum) per element
            const float2 scale = staged_scales(d8 + 8 * n);
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[n][e] = fmaf(e & 1 ? scale.y : scale.x, d6[e >> 1] * static_cast<float>(isum6[n][e]), acc[n][e]);
            sums[n] += 4;
        }
#else  // q8_0
        const uint4 dq[2] = {*reinterpret_cast<const uint4*>(slot + 4096 + 16 * g),  // rows g, g + 8: 8 f16 d each
                             *reinterpret_cast<const uint4*>(slot + 4096 + 16 * (g + 8))};
        float fsum[2][4] = {};  // sum_j d_j float(I_j) per fragment element (rows g, g + 8; tokens 2t, 2t + 1 of each n)
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // blocks 4 half .. 4 half + 3: two 16-byte loads per row
            const uint4 wg[2] = {*reinterpret_cast<const uint4*>(slot + 256 * g + 64 * t + 32 * half),
                                 *reinterpret_cast<const uint4*>(slot + 256 * g + 64 * t + 32 * half + 16)};
            const uint4 wh[2] = {*reinterpret_cast<const uint4*>(slot + 256 * (g + 8) + 64 * t + 32 * half),
                                 *reinterpret_cast<const uint4*>(slot + 256 * (g + 8) + 64 * t + 32 * half + 16)};
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int c = 2 * half + cc;
                const uint4 b[2] = {chunk_b(0, c), chunk_b(1, c)};
#pragma unroll
                for (int jj = 0; jj < 2; ++jj) {  // block 2c + jj: words 2 jj, 2 jj + 1 of the row's cc-th load
                    const int j = 2 * c + jj;
                    const uint32_t a[4] = {word_of(wg[cc], 2 * jj), word_of(wh[cc], 2 * jj), word_of(wg[cc], 2 * jj + 1),
                                           word_of(wh[cc], 2 * jj + 1)};
#pragma unroll
                    for (int n = 0; n < 2; ++n) {
                        int d[4];
                        mma_s8s8(d, a, word_of(b[n], 2 * jj), word_of(b[n], 2 * jj + 1));
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const uint32_t pair = word_of(dq[e >> 1], j >> 1);
                            const float dj = __half2float(__ushort_as_half(static_cast<unsigned short>(
                                j & 1 ? pair >> 16 : pair & 0xFFFFu)));
                            fsum[n][e] = fmaf(dj, static_cast<float>(d[e]), fsum[n][e]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int n = 0; n < 2; ++n) {  // the super-block's f32 step: d8 sum_j d_j float(I_j) per element
            const float2 scale = staged_scales(d8 + 8 * n);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[n][e] = fmaf(e & 1 ? scale.y : scale.x, fsum[n][e], acc[n][e]);
            sums[n] += 4;
        }
#endif
#else
        const uint8_t* slot = ring + (s % RING) * kSlotBytes + g * kBlockBytes;
        if constexpr (PROBE == 1) {
            acc[0][0] += __uint_as_float(*reinterpret_cast<const uint32_t*>(slot + 16 * t) & 0x007FFFFFu);
            continue;
        }
        const RowScales rs[2] = {row_scales(*reinterpret_cast<const uint4*>(slot), t),
                                 row_scales(*reinterpret_cast<const uint4*>(slot + 8 * kBlockBytes), t)};
        // sum_j sc_j I_j per fragment element (rows g, g + 8; tokens 2t, 2t + 1 of each n) over the low-nibble
        // sub-blocks (even j) and 16 times it over the high-nibble ones (odd j): 16 lo + hi is 16 sum_j sc_j I_j
        // (q5_K: both 1x, and 16 (lo + hi) is)
        int isum[2][2][4] = {};
#if QTYPE == 1
        const uint2 qhg = *reinterpret_cast<const uint2*>(slot + 16 + 8 * t);  // qh[4t ..], qh[16 + 4t ..] of row g
        const uint2 qhh = *reinterpret_cast<const uint2*>(slot + 8 * kBlockBytes + 16 + 8 * t);  // of row g + 8
#endif
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // chunks 2 half, 2 half + 1: one 16-byte load per row
            const uint4 wg = *reinterpret_cast<const uint4*>(slot + kQsAt + 32 * t + 16 * half);
            const uint4 wh = *reinterpret_cast<const uint4*>(slot + 8 * kBlockBytes + kQsAt + 32 * t + 16 * half);
            const uint32_t rg[4] = {wg.x, wg.y, wg.z, wg.w}, rh[4] = {wh.x, wh.y, wh.z, wh.w};
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int c = 2 * half + cc;
                uint4 b[2];
#pragma unroll
                for (int n = 0; n < 2; ++n) b[n] = chunk_b(n, c);
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {  // sub-block 2c + hi: the low nibbles (q) or the high ones (16 q; q5_K: q)
#if QTYPE == 1
                    const int j = 2 * c + hi;
                    const uint32_t a[4] = {q5_word(rg[2 * cc], qhg.x, j), q5_word(rh[2 * cc], qhh.x, j),
                                           q5_word(rg[2 * cc + 1], qhg.y, j), q5_word(rh[2 * cc + 1], qhh.y, j)};
#else
                    const uint32_t mask = hi ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
                    const uint32_t a[4] = {rg[2 * cc] & mask, rh[2 * cc] & mask, rg[2 * cc + 1] & mask,
                                           rh[2 * cc + 1] & mask};
#endif
#pragma unroll
                    for (int n = 0; n < 2; ++n) {
                        int d[4];
                        mma_u8s8(d, a, hi ? b[n].z : b[n].x, hi ? b[n].w : b[n].y);
#pragma unroll
                        for (int e = 0; e < 4; ++e) isum[hi][n][e] += d[e] * rs[e >> 1].sc[2 * c + hi];
                    }
                }
            }
        }
        // the super-block's f32 step: d8 (d/16 float(isum) - dmin sum_j m_j bsum_j) per element
#pragma unroll
        for (int n = 0; n < 2; ++n) {
            const uint2 bs = staged_sums(sums[n]);
            float msum[4];
            mma_f16(msum, rs[0].mpair, rs[1].mpair, bs.x, bs.y);
            const float2 scale = staged_scales(d8 + 8 * n);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const RowScales& r = rs[e >> 1];
                const int i16 = 16 * isum[0][n][e] + (QTYPE == 1 ? 16 : 1) * isum[1][n][e];
                const float v = fmaf(r.d16, static_cast<float>(i16), -r.dmin * msum[e]);
                acc[n][e] = fmaf(e & 1 ? scale.y : scale.x, v, acc[n][e]);
            }
            sums[n] += 4;
        }
#endif
        d8 += 16;
        xrow[0] += kXUnitBytes, xrow[1] += kXUnitBytes;
#if GRIDQ == 2 && ZPUB  // trip 0's barrier ordered every thread's zeros; its copies are in flight or landed
        if (s == 0 && blockIdx.y == 0)
            mmq::publish_tile<!RELADD>(tile_flag(), tile_epoch);
#endif
    }
    if constexpr (PROBE == 2) {  // the prologue's copies land, as they would for the first super-block
        mmq::cp_async_wait<0>();
#if BULK
        for (int s = 0; s < min(RING - 1, nrange); ++s) mmq::mbar_wait(&full[warp][s], 0);
#endif
#if XBULK
        mmq::mbar_wait(&x_full, 0);
#endif
        __syncthreads();
    }
#if CLUSTERQ
    if (blockIdx.y > 0) mmq::wait_tile_zeroed(flag, epoch);
#elif GRIDQ == 2
    if (blockIdx.y > 0) mmq::wait_tile_zeroed(tile_flag(), tile_epoch, tile_zeroed);
#elif PASSFLAG
    wait_count(counters + gridDim.z * gridDim.y, epoch * pass_ctas);  // every pass CTA has zeroed its share of C
#endif
    mmq::red_fragment_pair(acc, C, row0, tok0 + 2 * t, g, M, T);  // into C, zeroed by the pass (CLUSTERQ: by range 0)
    TRACE_END(1);
}

extern "C" __constant__ int mmq_direct_q8_smem_bytes = dq8::kSmemBytes;

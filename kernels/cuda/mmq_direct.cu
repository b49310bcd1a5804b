// Few-token f16 GEMM with weights loaded straight into mma.sync fragments (lever `direct`):
// each warp streams 16 (MT = 2: 32) q4_K weight rows from global memory into the A fragments of
// `mma.sync m16n8k16` f16 (f32 accumulators) and reads its activations straight from the f16 rows,
// or (XSHARED) from the copy of its K range the CTA made in shared memory once (runs 40-42).
// There is no producer warp; the weights come through registers or through a cp.async ring of the
// warp's own, and the only CTA barriers are XSHARED's, in the first two super-blocks. At T <= 16 the
// wgmma kernel is bound by instruction issue (perf log run 29), and this kernel issues about 60 % of
// its instructions (runs 32-36).
//
// Math contract: the f16 path's (dequant16.cuh, DEQ=1): sw = f16(d sc), mn = f16(dmin m),
// w = fma_f16(q, sw, -mn) rounded once; f16 activations (the f32 -> f16 pass, or f16 input);
// f32 accumulation. Parity: the f16 bound against float64.
// MINSUM = 1 moves the min into the rank-1 term, as the int8 contract keeps it: w' = f16(q sw), one
// HFMA2 per weight pair on the exact 1024 + q (fma(1024 + q, sw, -1024 sw) = q sw rounded once; exact
// while |sw| < 64), and C += sum_j -mn_j (hi_j + lo_j) with S_j the f32 sum of sub-block j's 32 f16
// activations, hi_j = f16(S_j), lo_j = f16(S_j - hi_j) (written by the pass, direct_pass): one more
// m16n8k16 per super-block and 8 tokens, whose k runs over the 8 sub-blocks' hi then their lo sums.
//
// NIBLOP = 1 (with MINSUM) makes each biased pair with one LOP3 on the 32-bit word instead of a mask and a PRMT per
// pair: (w & 0x000F000F) | 0x64006400 = (1024 + q of bytes 0, 2) for the low nibbles, (w & 0x00F000F0) | 0x54005400 =
// (64 + q of bytes 0, 2) for the high ones (f16 64 has ulp 1/16: bits 4..7 weigh 1), and of bytes 1, 3 from w >> 8;
// fma(64 + q, sw, -64 sw) = q sw rounded once as well, so the weights are MINSUM's bit for bit. A register then holds
// k 0 and 2 (or 1 and 3) of 4 consecutive k, so the pass writes each 4 consecutive activations as k 0, 2, 1, 3 (its
// sums unchanged).
//
// WG = 1 (with XSHARED and MINSUM; WARPS a multiple of 4) multiplies with wgmma instead of mma.sync: each 4 warps
// are a warpgroup of 64 rows, and a k16 step is one `wgmma m64n16k16` with A, the same dequantized fragment, from
// registers and B, the 16 tokens, from the staged activations through a descriptor (128B-swizzled K-major tiles of
// 16 tokens x 64 k per chunk, wgmma_smem.cuh). No activation goes through registers and no mma waits on the one
// before it: the wgmmas of a chunk run while the next chunk is dequantized (two register sets, wait_group 1). The
// staged k order is the fragments' (below): the pass writes each chunk so that k16 block s holds, at the mma's k
// 2t + e and 2t + 8 + e, the activations thread t's A registers pair there (the cp.async copies stay 16 bytes).
// MINSUM's rank-1 term stays an mma.sync, into accumulators of its own, added at the end.
//
// XFUSE = 1 (with XSHARED) is one launch, no pass: the GEMM reads the f32 activations and each CTA writes the f16
// rows of its own K range (and, MINSUM, their per-32 sums) into its shared memory itself, as direct_pass would have
// (the same rounding, the same sums, NIBLOP's order). Each warp converts its share of super-block s + 1 while it
// multiplies s, and arrives on s + 1's mbarrier; a warp multiplies s once every warp has arrived on s's. The
// activations of a K range are converted once per CTA that reads them (32 times at M = 4096): no launch, no wait.
// CLUSTER = n > 1: the n K splits of a row tile are one thread-block cluster (gridDim.y = n) that adds its partial
// sums in shared memory: each CTA leaves its tile there, and rank r sums elements r, r + n, ... (x kThreads) of the
// tile over the n CTAs in rank order and stores them. No zeroed C, no reds, no reduce launch; the order is fixed.
//
// k order: within each 64-k chunk (32 qs bytes: the low nibbles are k 0..31, the high ones
// k 32..63) thread t = lane % 4 takes bytes 8t..8t+7. Its four mma steps take 4 consecutive
// k each: low nibbles of bytes 8t..8t+3 (k 8t..8t+3), of 8t+4..8t+7, then the high nibbles
// (k 32+8t..). An mma step pairs a thread's A registers with its B registers slot by slot, so
// the B side reads the same 4 consecutive k of each token row (8 bytes of f16); every k is
// multiplied by its own activation, and the sum over k is the GEMM's.
#include "helper_kernels.cuh"
#include "cluster.cuh"
#include "tile_flags.cuh"
#include "fragment_reds.cuh"
#include "mbarrier.cuh"
#if WG
#include "wgmma_ops.cuh"
#include "wgmma_smem.cuh"
#endif

#if QTYPE != 0
#error "mmq_direct.cu: q4_K only (QTYPE 0)"
#endif
#ifndef WARPS  // warps per CTA, 16 MT weight rows each
#define WARPS 8
#endif
#ifndef PDL
#define PDL 0
#endif
#ifndef XAHEAD  // when a chunk's activations are loaded: 0 as it starts; 1 during the chunk before (16 more
#define XAHEAD 1  // registers); 2 each half two k16 steps before its first use (a half's registers are
#endif            // refilled as soon as its last mma has read them: no more registers than 0)
#ifndef L2PF  // 1: the ring's copies ask L2 to fetch the 256 bytes around each piece (the row's next super-block);
#define L2PF 0  // 2: as the GEMM starts, each warp asks L2 for its rows' whole K range (one bulk prefetch per row), so
#endif          // DRAM streams them while the pass runs and the prologue waits; the ring's copies then hit L2
#ifndef RING  // 0: the next super-block's weights are prefetched into registers; >= 2: each warp keeps
#define RING 0  // a cp.async ring of RING super-blocks of its rows in shared memory (RING - 1 in flight)
#endif
#ifndef MT  // m16 tiles per warp: 1 (16 rows) or 2 (32 rows: each activation fragment feeds twice the mma; RING only)
#define MT 1
#endif
#if MT != 1 && (MT != 2 || RING == 0)
#error "mmq_direct.cu: MT is 1, or 2 with a RING"
#endif
#ifndef XSHARED  // 0: each warp reads its activations from global memory (L1); n: the CTA copies its K range's
#define XSHARED 0  // activations (at most n super-blocks: the launcher splits K so) into shared memory once
#endif
#ifndef FIXUP  // 0: the reduce kernel adds a split K's partial sums; 1: the last CTA of each tile to finish does
#define FIXUP 0  // (arrival counters, in the reduce kernel's order: z = 0, 1, ...)
#endif
#if XSHARED && (RING == 0 || XAHEAD != 0)
#error "mmq_direct.cu: XSHARED needs a RING and XAHEAD 0 (a chunk is read from shared memory as it starts)"
#endif
#ifndef MINSUM  // 1: the weight mins as a rank-1 term on the pass's per-32 activation sums (see the contract above)
#define MINSUM 0
#endif
#if MINSUM != 0 && MINSUM != 1
#error "mmq_direct.cu: MINSUM is 0 or 1"
#endif
#ifndef ATOMIC  // 1: a split K's CTAs add their partial sums into C with red.global.add (C zeroed by the pass):
#define ATOMIC 0  // no partial buffer, no reduce launch; the order of the splits' additions is not fixed. 2: the same reds,
#endif            // C's tile zeroed by its first split's CTA as it starts (no pass needed; see tile_flags.cuh)
#ifndef NIBLOP  // 1: the biased pairs made by one LOP3 each (see the contract above; with MINSUM)
#define NIBLOP 0
#endif
#if NIBLOP != 0 && (NIBLOP != 1 || !MINSUM)
#error "mmq_direct.cu: NIBLOP is 0, or 1 with MINSUM"
#endif
#ifndef WG  // 1: the k16 steps as wgmma m64n16k16 on the staged activations (see the contract above)
#define WG 0
#endif
#if WG != 0 && (WG != 1 || !XSHARED || !MINSUM || MT != 1 || WARPS % 4)
#error "mmq_direct.cu: WG is 0, or 1 with XSHARED, MINSUM, MT 1 and whole warpgroups (WARPS % 4 == 0)"
#endif
#ifndef CARVEOUT  // a launch choice of kernels/mmq_direct.py (the carveout every kernel of the call prefers): no code
#define CARVEOUT 0
#endif
#ifndef XFUSE  // 1: no pass; each CTA converts its own K range's f32 activations (see the contract above)
#define XFUSE 0
#endif
#if XFUSE && (XFUSE != 1 || !XSHARED || ATOMIC == 1 || WG)
#error "mmq_direct.cu: XFUSE is 0, or 1 with XSHARED, without ATOMIC 1 (no pass zeroes C) and WG (its tiles' k order)"
#endif
#ifndef CLUSTER  // > 1: the K splits of a row tile are one cluster of CLUSTER CTAs that sums them (see the contract above)
#define CLUSTER 1
#endif
#if CLUSTER < 1 || CLUSTER > 8 || (CLUSTER > 1 && (ATOMIC || FIXUP || !XSHARED))
#error "mmq_direct.cu: CLUSTER is 1..8; above 1 with XSHARED (its tile is summed there), without ATOMIC and FIXUP"
#endif
#ifndef WTILE  // 1: the weights in warp tiles (kernels/mmq_direct.py tile_weights): each ring slot, a super-block of a warp's
#define WTILE 0  // 16 MT rows, is 16 MT x 144 contiguous bytes, the tile's super-blocks one after another; 2: the same
#endif           // slots super-block major (all tiles' slots of super-block 0, then of 1, ...): a K range's warps read one
                 // contiguous run at each loop step
#if WTILE && (WTILE > 2 || RING == 0 || L2PF == 2)
#error "mmq_direct.cu: WTILE is 0, or 1 / 2 with a RING and without L2PF 2 (its per-row prefetch)"
#endif
#ifndef PROBE  // timing probes, not kernels (wrong numbers): each leaves one stage of the loop out. 1: no weight
#define PROBE 0  // stream past the first RING - 1 slots; 2: the raw words as A (no dequant math); 3: one chunk of
#endif           // activations loaded before the loop (no activation loads in it); 4: no mma (its operands folded by LOP3)
// 5: no loop (the prologue's copies landed, the epilogue's stores: the launch's fixed cost); 6: the loop only streams
// the weights through the ring (one word of each landed slot read: no dequant, activations or mma)
#if PROBE < 0 || PROBE > 6 || (PROBE && RING == 0) || (PROBE >= 5 && WG)
#error "mmq_direct.cu: PROBE is 0..6, with a RING (5 and 6 not with WG)"
#endif
#if ATOMIC && (FIXUP || ATOMIC > 2)
#error "mmq_direct.cu: ATOMIC is 0, 1 or 2, and not with FIXUP (two ways of adding the splits)"
#endif

namespace direct {

constexpr int kThreads = 32 * WARPS;
constexpr int kWarpRows = 16 * MT, kThreadRows = 2 * MT;  // a thread's rows: g + 8 i, i < kThreadRows
constexpr int kBlockBytes = 144;  // q4_K super-block: d, dmin (f16), 12 scale bytes, 128 qs bytes
constexpr int kSlotBytes = kWarpRows * kBlockBytes;  // one ring slot: a super-block of a warp's rows
constexpr int kPieces = kSlotBytes / 16, kCopies = (kPieces + 31) / 32;  // 16-byte copies per slot, per lane
// XSHARED: 16 token rows of XSHARED super-blocks (512 bytes each); rows sit 64 bytes apart modulo 128, so
// the two rows a quarter-warp's 16-byte loads read fall on different banks
constexpr int kXStride = XSHARED * 512 + 64;
// WG: per super-block 4 swizzled tiles of 16 tokens x 128 B (2 KB), after the rings, aligned up to 1024 B
constexpr int kXTile = 2048, kXAlign = 1024;
constexpr int kXBytes = !XSHARED ? 0 : WG ? XSHARED * 4 * kXTile + kXAlign : 16 * kXStride;
// XFUSE + MINSUM: the staged rows' per-32 sums, [16 token rows][XSHARED super-blocks][4 pairs] (direct_pass's layout)
constexpr int kSumPairs = XSHARED * 4, kSumBytes = XFUSE && MINSUM ? 16 * kSumPairs * 8 : 0;
constexpr int kSmemBytes = RING * WARPS * kSlotBytes + kXBytes + kSumBytes;
constexpr int kCtaRows = WARPS * kWarpRows;
// CLUSTER: the CTA's partial tile [16 tokens][kCtaRows + 4] f32, over the staged activations once every warp is done
// (rows padded by 4: the 4 lanes t of a row quad store 2 tokens apart, 8 banks apart)
constexpr int kPartStride = kCtaRows + 4;
static_assert(CLUSTER == 1 || 16 * kPartStride * 4 <= kXBytes, "mmq_direct.cu: CLUSTER's tile does not fit the staged rows");

// 4 consecutive f32 activations -> their f16 words as the GEMM reads them (NIBLOP: k 0, 2 and k 1, 3 paired) and the
// f32 sum of the 4 rounded values (MINSUM's sums add the f16 activations the mma multiplies)
__device__ __forceinline__ uint2 to_f16_words(const float4 v, float& sum) {
    const uint32_t h0 = mmq::pack_h2(v.x, v.y), h1 = mmq::pack_h2(v.z, v.w);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&h0));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&h1));
    sum = (a.x + a.y) + (b.x + b.y);
    return NIBLOP ? make_uint2(__byte_perm(h0, h1, 0x5410), __byte_perm(h0, h1, 0x7632)) : make_uint2(h0, h1);
}

// MINSUM: the sum of one 32-k sub-block, whose 4-value sums 8 aligned lanes hold (every lane of the warp calls it),
// as hi = f16(S), lo = f16(S - hi) into pair[0] and pair[2] by the first of the 8 (`writer`)
__device__ __forceinline__ void store_subblock_sum(float s, __half* pair, bool writer) {
    s += __shfl_xor_sync(0xffffffffu, s, 4);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    if (writer) {
        const __half hi = __float2half_rn(s), lo = __float2half_rn(s - __half2float(hi));
        pair[0] = hi, pair[2] = lo;
    }
}

#if XFUSE
// A thread's share of one super-block's 16 x 256 f32 activations: float4 f = tid % 64 (k 4f .. 4f + 3) of token rows
// r0 + kRowStep i, r0 = tid / 64 (kThreads is a multiple of 64: WARPS is even). All of a warp's lanes share a row, so the
// test of a row against the live ones is warp-uniform, and 8 aligned lanes hold one 32-k sub-block. Everything but the
// super-block is fixed per thread: the loads and stores of a super-block are a base plus constants.
constexpr int kRowStep = kThreads / 64, kShare = (16 + kRowStep - 1) / kRowStep;
static_assert(kThreads % 64 == 0, "mmq_direct.cu: XFUSE needs an even WARPS");
struct Share {
    float4 v[kShare];
};

// Where the thread's share sits: src, its row r0's float4 in the range's first super-block (rows K floats apart).
// last = rows - 1 - r0: a row past the tile's live ones loads the last live row instead, and stores nothing. Both
// functions run unconditionally, with their stores predicated: a branch around the sums' shuffles would make the
// compiler emit them twice (a converged and a divergent path).
struct ShareAt {
    const float* src;
    int K, r0, f, last;
};

__device__ __forceinline__ void load_share(Share& x, const ShareAt& at, int sbl) {
#pragma unroll
    for (int i = 0; i < kShare; ++i)
        x.v[i] = *reinterpret_cast<const float4*>(at.src + static_cast<long long>(min(kRowStep * i, at.last)) * at.K +
                                                  sbl * 256);
}

// The share as f16 into the staged rows (super-block sbl of the CTA's range) and, MINSUM, its sub-blocks' sums; `store`
// false: the same work, nothing stored (the range has no super-block sbl)
__device__ __forceinline__ void store_share(const Share& x, const ShareAt& at, uint8_t* xs, __half* sums, int sbl,
                                            bool store) {
    uint8_t* dst = xs + at.r0 * kXStride + sbl * 512 + 8 * at.f;
    __half* pair = sums + 4 * (at.r0 * kSumPairs + sbl * 4 + at.f / 16) + (at.f / 8) % 2;  // sub-block f / 8's
#pragma unroll
    for (int i = 0; i < kShare; ++i) {
        const bool live = store && kRowStep * i <= at.last;
        float sum;
        const uint2 words = to_f16_words(x.v[i], sum);
        if (live) *reinterpret_cast<uint2*>(dst + i * kRowStep * kXStride) = words;
        if constexpr (MINSUM) store_subblock_sum(sum, pair + i * kRowStep * 4 * kSumPairs, live && (at.f & 7) == 0);
    }
}
#endif

struct Rows {  // one super-block of a thread's two rows (g and g + 8)
    uint4 head[2];   // d | dmin, scales[0..11]
    uint2 qs[2][4];  // bytes 8t..8t+7 of each 64-k chunk
};

__device__ __forceinline__ uint4 load_streamed16(const uint8_t* p) {  // read once: keep it out of L1
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 load_streamed8(const uint8_t* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// row[i]: the super-block's first byte in row g (i = 0) and g + 8; the thread's qs bytes sit 16 + 8t on
__device__ __forceinline__ void load_rows(Rows& r, const uint8_t* const (&row)[2], int t) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        r.head[i] = load_streamed16(row[i]);
#pragma unroll
        for (int j = 0; j < 4; ++j) r.qs[i][j] = load_streamed8(row[i] + 16 + 8 * t + 32 * j);
    }
}

// Its lane's share of a warp's ring copies: slot piece p = lane + 32 i (16 bytes at 16 p in the slot)
// is row p / 9's piece p % 9, read at a fixed offset from the warp's first row in the super-block
struct RingCopies {
    int src[kCopies];  // the piece's offset from the warp's row-0 super-block (rows past M: the last row's)
};

__device__ __forceinline__ void copy16(void* dst, const void* src) {
#if L2PF == 1
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(mmq::smem_addr(dst)), "l"(src));
#else
    mmq::cp_async16(dst, src);
#endif
}

__device__ __forceinline__ void issue_slot(const RingCopies& c, const uint8_t* base, uint8_t* slot, int lane, bool live) {
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
        if (live && (i < kCopies - 1 || lane + 32 * i < kPieces)) copy16(slot + 16 * lane + 512 * i, base + c.src[i]);
    }
    mmq::cp_async_commit();  // a group per slot, empty past the range: the wait counts stay uniform
}

// The thread's rows g + 8 i in a landed slot (144-byte row strides); `row` is row g's super-block
struct SlotRows {
    const uint8_t* row;
    int t;
    __device__ __forceinline__ uint4 head(int i) const {
        return *reinterpret_cast<const uint4*>(row + 8 * i * kBlockBytes);
    }
    __device__ __forceinline__ uint2 qs(int i, int j) const {  // the chunk's words, read as the chunk starts
        return *reinterpret_cast<const uint2*>(row + 8 * i * kBlockBytes + 16 + 32 * j + 8 * t);
    }
};

struct RegRows {  // the register-prefetch path's super-block (Rows)
    const Rows& r;
    __device__ __forceinline__ uint4 head(int i) const { return r.head[i]; }
    __device__ __forceinline__ uint2 qs(int i, int j) const { return r.qs[i][j]; }
};

__device__ __forceinline__ __half2 as_h2(uint32_t u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }

// byte pair (b_lo, b_hi) of `word` (selector 0x4140: bytes 0, 1; 0x4342: bytes 2, 3) -> (1024 + b_lo, 1024 + b_hi), exact
template <uint32_t kSel>
__device__ __forceinline__ __half2 biased_pair(uint32_t word) {
    return as_h2(__byte_perm(word, 0x64646464u, kSel));
}

// the same pair as exact f16 values b_lo, b_hi
template <uint32_t kSel>
__device__ __forceinline__ __half2 byte_pair(uint32_t word) {
    return __hsub2(biased_pair<kSel>(word), as_h2(0x64006400u));  // (1024 + b) - 1024
}

// A super-block's 6-bit mins: bytes j of m_lo (j < 4) and j - 4 of m_hi are the sub-blocks' m_j
__device__ __forceinline__ void unpack_mins(const uint4 head, uint32_t& m_lo, uint32_t& m_hi) {
    m_lo = head.z & 0x3F3F3F3Fu;
    m_hi = ((head.w >> 4) & 0x0F0F0F0Fu) | ((head.z >> 2) & 0x30303030u);
}

__device__ __forceinline__ __half2 neg_dmin(const uint4 head) {
    return as_h2(__byte_perm(head.x, 0, 0x3232) ^ 0x80008000u);
}

// The 6-bit scales as f16 pairs: sw[j] = (sw_2j, sw_2j+1)
__device__ __forceinline__ void decode_sw(const uint4 head, __half2 (&sw)[4]) {
    const __half2 d = as_h2(__byte_perm(head.x, 0, 0x1010));
    const uint32_t sc_lo = head.y & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (head.w & 0x0F0F0F0Fu) | ((head.y >> 2) & 0x30303030u);
    sw[0] = __hmul2(byte_pair<0x4140>(sc_lo), d), sw[1] = __hmul2(byte_pair<0x4342>(sc_lo), d);
    sw[2] = __hmul2(byte_pair<0x4140>(sc_hi), d), sw[3] = __hmul2(byte_pair<0x4342>(sc_hi), d);
}

// The 6-bit scales and mins of one super-block as f16 pairs: sw[j] = (sw_2j, sw_2j+1), nmn[j] = -(mn ...)
__device__ __forceinline__ void decode_scales(const uint4 head, __half2 (&sw)[4], __half2 (&nmn)[4]) {
    decode_sw(head, sw);
    const __half2 ndmin = neg_dmin(head);
    uint32_t m_lo, m_hi;
    unpack_mins(head, m_lo, m_hi);
    nmn[0] = __hmul2(byte_pair<0x4140>(m_lo), ndmin), nmn[1] = __hmul2(byte_pair<0x4342>(m_lo), ndmin);
    nmn[2] = __hmul2(byte_pair<0x4140>(m_hi), ndmin), nmn[3] = __hmul2(byte_pair<0x4342>(m_hi), ndmin);
}

// MINSUM: the scales, their -1024 multiples (exact in f16 while |sw| < 64) and the one min pair the thread's
// rank-1 mma needs: -(mn_2t, mn_2t+1) (bytes 2t mod 4 and the next of m_lo for t < 2, of m_hi after)
__device__ __forceinline__ void decode_scales_minsum(const uint4 head, int t, __half2 (&sw)[4], __half2 (&off)[4],
                                                     __half2& nmn) {
    decode_sw(head, sw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // -1024 sw (NIBLOP: -64 sw for the high sub-block, biased by 64)
        off[j] = __hmul2(sw[j], as_h2(NIBLOP ? 0xD400E400u : 0xE400E400u));
    }
    uint32_t m_lo, m_hi;
    unpack_mins(head, m_lo, m_hi);
    const uint32_t m = (t & 2) ? m_hi : m_lo;
    // bytes 0, 1 (selector 0x4140) or 2, 3 (0x4342), written as a sum: a 0x4342 literal here made the compiler
    // keep that selector in a register and copy it before every dequant's PRMT (42 more IMADs per super-block)
    const uint32_t sel = 0x4140u + 0x0202u * static_cast<uint32_t>(t & 1);
    const __half2 mn = __hsub2(as_h2(__byte_perm(m, 0x64646464u, sel)), as_h2(0x64006400u));
    nmn = __hmul2(mn, neg_dmin(head));
}

// Four nibbles (one per byte of `nib`, already masked) -> the two A registers of one row
__device__ __forceinline__ void dequant4(uint32_t nib, __half2 sw, __half2 nmn, uint32_t& lo, uint32_t& hi) {
    lo = as_u32(__hfma2(byte_pair<0x4140>(nib), sw, nmn));
    hi = as_u32(__hfma2(byte_pair<0x4342>(nib), sw, nmn));
}

// NIBLOP: the pair (bytes 0, 2) or (1, 3) of `word` biased by one LOP3: low nibbles 1024 + q, high nibbles 64 + q
template <bool kHigh>
__device__ __forceinline__ __half2 lop3_pair(uint32_t word) {
    constexpr uint32_t kMask = kHigh ? 0x00F000F0u : 0x000F000Fu, kBias = kHigh ? 0x54005400u : 0x64006400u;
    uint32_t r;  // (word & mask) | bias as one LOP3 (in C the two constants make an AND and an OR: one immediate each)
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(word), "n"(kMask), "r"(kBias));
    return as_h2(r);
}

// MINSUM: (1024 + q) sw - 1024 sw = q sw, rounded once; the nibble pair is never converted on its own
__device__ __forceinline__ void dequant4_nomin(uint32_t nib, __half2 sw, __half2 off, uint32_t& lo, uint32_t& hi) {
    lo = as_u32(__hfma2(biased_pair<0x4140>(nib), sw, off));
    hi = as_u32(__hfma2(biased_pair<0x4342>(nib), sw, off));
}

// Step s of a chunk for one row: its word's four weights (s & 1: the second word; s >= 2: the high nibbles, the
// chunk's second sub-block, whose scale and offset are the high halves of the pairs) -> the row's two A registers
__device__ __forceinline__ void dequant_step(uint2 words, int s, __half2 sw_pair, __half2 nmn_pair, uint32_t& lo,
                                             uint32_t& hi) {
    const bool high = s >= 2;
    const uint32_t word = (s & 1) ? words.y : words.x;
    const __half2 scale = high ? __high2half2(sw_pair) : __low2half2(sw_pair);
    const __half2 nmin = high ? __high2half2(nmn_pair) : __low2half2(nmn_pair);
#if !NIBLOP && PROBE != 2
    const uint32_t nib = (high ? word >> 4 : word) & 0x0F0F0F0Fu;  // one nibble per byte
#endif
#if PROBE == 2
    lo = word, hi = word >> 4;  // no dequant math (scale, nmin unused)
    (void)scale, (void)nmin;
#elif NIBLOP  // nmin: -1024 sw (low) or -64 sw (high); lo: bytes 0, 2 of the word, hi: bytes 1, 3
    const uint32_t odd = word >> 8;
    lo = as_u32(__hfma2(high ? lop3_pair<true>(word) : lop3_pair<false>(word), scale, nmin));
    hi = as_u32(__hfma2(high ? lop3_pair<true>(odd) : lop3_pair<false>(odd), scale, nmin));
#elif MINSUM
    dequant4_nomin(nib, scale, nmin, lo, hi);  // nmin: -1024 sw
#else
    dequant4(nib, scale, nmin, lo, hi);  // lo: bytes 0, 1 (the mma's k 2t, 2t + 1), hi: bytes 2, 3 (k 2t + 8, 2t + 9)
#endif
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if PROBE == 4  // the operands still have to be made: fold them into the accumulator's bits (3 LOP3)
    c[0] = __uint_as_float(__float_as_uint(c[0]) ^ ((a[0] ^ a[1] ^ a[2]) ^ (a[3] ^ b0 ^ b1)));
    return;
#endif
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

struct Chunk {  // a thread's activations for one 64-k chunk: per 8-token half, k 8t.. and 32+8t..
    uint4 lo[2], hi[2];
};

// xp[n]: the thread's first activation (k 8t of the super-block's first chunk) in token row
// g (n = 0) and g + 8; `off` (halves) selects the chunk, a compile-time constant after unrolling
__device__ __forceinline__ void load_half(uint4 (&h)[2], const __half* const (&xp)[2], int off) {
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#if XSHARED
        h[n] = *reinterpret_cast<const uint4*>(xp[n] + off);  // the CTA's staged copy
#else
        h[n] = __ldg(reinterpret_cast<const uint4*>(xp[n] + off));
#endif
    }
}

// XSHARED: one cp.async group of super-blocks [c0, c1) of the CTA's range, for its `rows` live token rows
// tok0.. (16, or the T - tok0 left; the fragments of tokens past T read the last row): warp w copies rows
// w, w + WARPS, ..., each lane 16 bytes of every 512-byte super-block
__device__ __forceinline__ void stage_activations(uint8_t* xs, const __half* X, int tok0, int rows, int K, int sb_begin,
                                                  int c0, int c1, int warp, int lane) {
    for (int r = warp; r < rows; r += WARPS) {
        const uint8_t* src =
            reinterpret_cast<const uint8_t*>(X + static_cast<long long>(tok0 + r) * K + sb_begin * 256) + 16 * lane;
#if WG  // lane's 16 bytes: piece lane % 8 of chunk lane / 8, in that chunk's tile
        uint8_t* dst = xs + (lane >> 3) * kXTile + mmqwg::swz(r, lane & 7);
        for (int c = c0; c < c1; ++c) mmq::cp_async16(dst + 4 * kXTile * c, src + 512 * c);
#else
        uint8_t* dst = xs + r * kXStride + 16 * lane;
        for (int c = c0; c < c1; ++c) mmq::cp_async16(dst + 512 * c, src + 512 * c);
#endif
    }
    mmq::cp_async_commit();
}

__device__ __forceinline__ void load_chunk(Chunk& x, const __half* const (&xp)[2], int off) {
    load_half(x.lo, xp, off);
    load_half(x.hi, xp, off + 32);
}

// MINSUM's rank-1 term: k 2t, 2t + 1 are sub-blocks 2t, 2t + 1's hi sums, k 2t + 8, 2t + 9 their lo sums
__device__ __forceinline__ void add_min_term(float (&acc)[MT][2][4], const __half2 (&nmn_t)[kThreadRows],
                                             const uint2 (&sums)[2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const uint32_t a[4] = {as_u32(nmn_t[2 * mt]), as_u32(nmn_t[2 * mt + 1]), as_u32(nmn_t[2 * mt]),
                               as_u32(nmn_t[2 * mt + 1])};
#pragma unroll
        for (int n = 0; n < 2; ++n) mma16816(acc[mt][n], a, sums[n].x, sums[n].y);
    }
}

// MINSUM's sums pair: the pass's (global, read-only) or the CTA's own (XFUSE: shared)
__device__ __forceinline__ uint2 load_sums(const uint2* p) { return XFUSE ? *p : __ldg(p); }

// One super-block of 16 rows x 16 tokens into acc; xn holds its first chunk's activations on
// entry and the next super-block's first chunk on exit (when there is one: `more`).
// MINSUM: sp[n] points at the super-block's sums pair t for token g + 8 n (direct_pass's layout).
template <class Src>
__device__ __forceinline__ void multiply(float (&acc)[MT][2][4], const Src& r, const __half* const (&xp)[2], Chunk& xn,
                                         bool more, const uint2* const (&sp)[2], int t) {
#if MINSUM
    uint2 sums[2];  // (hi, lo) pairs of sub-blocks 2t, 2t + 1, used after the 16 steps: their latency is hidden
#pragma unroll
    for (int n = 0; n < 2; ++n) sums[n] = load_sums(sp[n]);
    __half2 sw[kThreadRows][4], nmn[kThreadRows][4], nmn_t[kThreadRows];  // nmn: the -1024 sw offsets here
#pragma unroll
    for (int i = 0; i < kThreadRows; ++i) decode_scales_minsum(r.head(i), t, sw[i], nmn[i], nmn_t[i]);
#else
    __half2 sw[kThreadRows][4], nmn[kThreadRows][4];
#pragma unroll
    for (int i = 0; i < kThreadRows; ++i) decode_scales(r.head(i), sw[i], nmn[i]);
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#if XAHEAD == 1
        const Chunk x = xn;
        if (j < 3 || more) load_chunk(xn, xp, 64 * (j + 1));  // a chunk ahead
#elif XAHEAD == 2
        Chunk& x = xn;  // its halves are refilled below, two steps ahead of their use
#elif PROBE == 3
        const Chunk x = xn;  // loaded once, before the loop
#else
        Chunk x;
        load_chunk(x, xp, 64 * j);
#endif
        uint2 words[kThreadRows];
#pragma unroll
        for (int i = 0; i < kThreadRows; ++i) words[i] = r.qs(i, j);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const bool high = s >= 2;  // high nibbles: the chunk's second 32-k sub-block
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {  // m16 tile mt: rows g + 16 mt and g + 16 mt + 8
                uint32_t a[4];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int i = 2 * mt + h;
                    dequant_step(words[i], s, sw[i][j], nmn[i][j], a[h], a[h + 2]);
                }
#pragma unroll
                for (int n = 0; n < 2; ++n) {
                    const uint4 v = high ? x.hi[n] : x.lo[n];
                    mma16816(acc[mt][n], a, (s & 1) ? v.z : v.x, (s & 1) ? v.w : v.y);
                }
            }
#if XAHEAD == 2
            if (s == 1 && (j < 3 || more)) load_half(x.lo, xp, 64 * (j + 1));  // the next chunk's first half
            if (s == 3 && (j < 3 || more)) load_half(x.hi, xp, 64 * (j + 1) + 32);
#endif
        }
    }
#if MINSUM
    add_min_term(acc, nmn_t, sums);
#endif
}

#if WG
// WG: one super-block of the warpgroup's 64 rows x 16 tokens into accw (d[4 n + e]: the m16n8 fragment of token
// half n, as acc[0][n][e]) and MINSUM's rank-1 term into acc. Chunk j's four steps are dequantized into set[j & 1]
// and issued as one wgmma group on its tile (xtiles + j kXTile: k16 step s at +32 s bytes); the wait for the group
// before it frees the other set for chunk j + 1. The last group is left in flight (the caller's final wait).
template <class Src>
__device__ __forceinline__ void multiply_wg(float (&acc)[MT][2][4], float (&accw)[8], uint32_t (&set)[2][4][4],
                                            const Src& r, uint32_t xtiles, const uint2* const (&sp)[2], int t) {
    uint2 sums[2];
#pragma unroll
    for (int n = 0; n < 2; ++n) sums[n] = load_sums(sp[n]);
    __half2 sw[kThreadRows][4], off[kThreadRows][4], nmn_t[kThreadRows];
#pragma unroll
    for (int i = 0; i < kThreadRows; ++i) decode_scales_minsum(r.head(i), t, sw[i], off[i], nmn_t[i]);
    // the descriptor's address field counts 16-byte units (bits 0..13; shared addresses stay below 256 KB): a
    // step's descriptor is the super-block's plus a constant
    const uint64_t desc = mmqwg::smem_desc(xtiles);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint32_t (&a)[4][4] = set[j & 1];
        uint2 words[kThreadRows];
#pragma unroll
        for (int i = 0; i < kThreadRows; ++i) words[i] = r.qs(i, j);
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h) dequant_step(words[h], s, sw[h][j], off[h][j], a[s][h], a[s][h + 2]);
        mmqwg::wgmma_fence();  // the registers written above, before the wgmmas read them
#pragma unroll
        for (int s = 0; s < 4; ++s) wg::wgmma_f16_rs<16>(accw, a[s], desc + ((j * kXTile + 32 * s) >> 4));
        mmqwg::wgmma_commit();
        mmqwg::wgmma_wait<1>();  // chunk j - 1's group is done: its set may be rewritten
        mmqwg::fence_regs(set[(j + 1) & 1]);
    }
    add_min_term(acc, nmn_t, sums);
}
#endif

// The next super-block: 256 activations on, and (MINSUM) 4 sums pairs
__device__ __forceinline__ void advance(const __half* (&xp)[2], const uint2* (&sp)[2]) {
    xp[0] += 256, xp[1] += 256;
    if constexpr (MINSUM) sp[0] += 4, sp[1] += 4;
}

#if FIXUP
// After a CTA stored its split's partial sums: the last of the tile's gridDim.y CTAs to arrive adds
// partial[0..splits)[T][M] over its BM rows and 16 tokens into C (each element by one thread, the splits
// in order, as the reduce kernel does) and resets the tile's counter for the next launch.
__device__ __forceinline__ void sum_splits(const float* partial, float* C, int* counter, int M, int T) {
    __shared__ int last;
    __threadfence();  // this CTA's partial sums are visible device-wide before its arrival
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(counter, 1) == static_cast<int>(gridDim.y) - 1;
        if (last) *counter = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();  // and the other CTAs' before this one reads them
    const int row0 = blockIdx.x * kCtaRows, tok0 = blockIdx.z * 16, splits = gridDim.y;
    const long long slice = static_cast<long long>(T) * M;
#pragma unroll
    for (int i = 0; i < kCtaRows * 16 / kThreads; ++i) {  // 8 MT elements per thread
        const int e = threadIdx.x + i * kThreads, r = row0 + e % kCtaRows, tk = tok0 + e / kCtaRows;
        if (r >= M || tk >= T) continue;
        const float* p = partial + static_cast<long long>(tk) * M + r;
        float v[16];  // every split's value requested before the first is added (splits <= 16)
#pragma unroll
        for (int z = 0; z < 16; ++z) v[z] = z < splits ? __ldcg(p + z * slice) : 0.0f;
        float s = v[0];
#pragma unroll
        for (int z = 1; z < 16; ++z) if (z < splits) s += v[z];
        C[static_cast<long long>(tk) * M + r] = s;
    }
}
#endif

#if ATOMIC
// ATOMIC, a split K: each m16 tile's fragment pair added into C [T][M] (fragment_reds.cuh); tok0 is the lane's token 2t
__device__ __forceinline__ void add_splits(const float (&acc)[MT][2][4], float* C, int row0, int tok0, int g, int M,
                                           int T) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) mmq::red_fragment_pair(acc[mt], C, row0 + 16 * mt, tok0, g, M, T);
}
#endif


#if CLUSTER > 1
// CLUSTER: the cluster's CTAs (the K splits of one row tile) sum their accumulators in shared memory and store C.
// `part` is [16 tokens][kPartStride] f32 (an m16n8 fragment: lane (g, t) holds rows g, g + 8 of tokens 2t, 2t + 1).
// Rank r then sums element e = tok kCtaRows + row for e = kThreads r + threadIdx.x, + kThreads CLUSTER, ... over the
// ranks in order (the same sum whichever rank adds it) and stores it: consecutive threads, consecutive rows of C.
__device__ __forceinline__ void sum_cluster(const float (&acc)[MT][2][4], float* part, float* C, int row0, int tok0,
                                            int M, int T) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    mmq::cp_async_wait<0>();  // a range with no super-block never waited for the staged copies it issued
    __syncthreads();          // and every warp is done with the staged activations this tile overwrites
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                part[(8 * n + 2 * t + (e & 1)) * kPartStride + warp * kWarpRows + 16 * mt + g + 8 * (e >> 1)] =
                    acc[mt][n][e];
    mmq::cluster_sync();  // every rank's tile is written
    uint32_t remote[CLUSTER];
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) remote[r] = mmq::cluster_addr(part, r);
    for (int e = threadIdx.x + kThreads * static_cast<int>(mmq::cluster_rank()); e < 16 * kCtaRows;
         e += kThreads * CLUSTER) {
        const int tk = e / kCtaRows, r = e % kCtaRows, at = 4 * (tk * kPartStride + r);
        float v[CLUSTER];
#pragma unroll
        for (int c = 0; c < CLUSTER; ++c) v[c] = mmq::ld_cluster_f32(remote[c] + at);
        float sum = v[0];
#pragma unroll
        for (int c = 1; c < CLUSTER; ++c) sum += v[c];
        if (tok0 + tk < T && row0 + r < M) C[static_cast<long long>(tok0 + tk) * M + row0 + r] = sum;
    }
    mmq::cluster_sync();  // each CTA keeps its shared memory until the others have read it
}
#endif

}  // namespace direct

#if MINSUM || ATOMIC
// The f32 -> f16 pass of MINSUM and ATOMIC: y as f32_to_f16 writes it (NIBLOP: each 4 values as k 0, 2, 1, 3;
// WG: each 64-k chunk in the fragments' k order, above);
// MINSUM: per 32-k sub-block j (over all of
// [T, K / 32]) the f32 sum S_j of its 32 rounded values (8 lanes' sums, added in a butterfly) as hi = f16(S_j),
// lo = f16(S_j - hi): uint2 sums[j / 2] = {(hi_j even, hi_j odd), (lo ...)}. n4 = T K / 4 is a multiple of 64: every
// lane of a warp takes each trip, and 8 aligned lanes hold one sub-block. ATOMIC: the first n_zero floats of C zeroed
// (the split GEMM adds into them; it waits for this grid to finish before its first red).
extern "C" __global__ void direct_pass(const float4* __restrict__ x, uint2* __restrict__ y, __half* __restrict__ sums,
                                       float* __restrict__ C, long long n4, long long n_zero) {
    MMQ_LAUNCH_DEPENDENTS();
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n4;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        float sum;
        const uint2 h = direct::to_f16_words(x[i], sum);
#if WG
        // the 4 are k 32 h + 8 t + 4 o + 0..3 of a 64-k chunk (group q = i % 16 = 8 h + 2 t + o); they go to k16 block
        // s = 2 h + o, at the mma's k 2t (h.x) and 2t + 8 (h.y): halves 16 s + 2 t and + 8 of the chunk
        const long long q = i & 15, pos = 16 * (2 * (q >> 3) + (q & 1)) + 2 * ((q >> 1) & 3);
        uint32_t* chunk = reinterpret_cast<uint32_t*>(y + (i - q));
        chunk[pos / 2] = h.x, chunk[pos / 2 + 4] = h.y;
#else
        y[i] = h;
#endif
#if MINSUM
        const long long j = i >> 3;  // the sub-block
        direct::store_subblock_sum(sum, sums + (j >> 1) * 4 + (j & 1), (i & 7) == 0);
#endif
    }
#if ATOMIC
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n_zero;
         i += static_cast<long long>(gridDim.x) * blockDim.x)
        C[i] = 0.0f;
#endif
}
#endif

// C[T, M] (or the split's slice of partial[split][T][M]) for one token tile of 16 (blockIdx.z),
// WARPS x 16 weight rows (blockIdx.x) and the blockIdx.y-th of gridDim.y ranges of super-blocks.
extern "C" __global__ void __launch_bounds__(direct::kThreads, MIN_BLOCKS)
#if CLUSTER > 1
__cluster_dims__(1, CLUSTER, 1)  // the launcher's grid has gridDim.y = CLUSTER
#endif
mmq_direct_gemm(const uint8_t* __restrict__ W, const void* __restrict__ Xin, float* __restrict__ C, int M, int T,
                int K, long long row_bytes
#if FIXUP
                , float* __restrict__ C_sum, int* __restrict__ counters  // C: the partial sums, with a split
#endif
#if MINSUM && !XFUSE
                , const uint2* __restrict__ S  // direct_pass's activation sums, [T][K / 64] pairs
#endif
#if ATOMIC == 2
                , int* __restrict__ flags, int epoch  // a flag per (row tile, token tile); this launch's epoch
#endif
) {
    using namespace direct;
    // the pass's f16 rows, or (XFUSE) the f32 activations themselves
    const __half* X = static_cast<const __half*>(Xin);
    if constexpr (PDL >= 2) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // the reduce may start
#if ATOMIC == 2
    int* const flag = flags + blockIdx.z * gridDim.x + blockIdx.x;
    if (gridDim.y > 1 && blockIdx.y == 0)
        mmq::zero_tile<kCtaRows, kThreads>(C, flag, epoch, blockIdx.x * kCtaRows, blockIdx.z * 16, M, T);
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int row0 = (blockIdx.x * WARPS + warp) * kWarpRows, row = row0 + g;  // the thread's rows: row + 8 i
    // (rows past M read the last row and store nothing)
    const int nsb = K / 256, sb_begin = blockIdx.y * nsb / gridDim.y, sb_end = (blockIdx.y + 1) * nsb / gridDim.y;
    const int tok = blockIdx.z * 16 + g;  // B columns: tokens tok and tok + 8 (past T: the last, stored nowhere)
    float acc[MT][2][4] = {};
    Chunk xn;
    const __half* xp[2] = {X + static_cast<long long>(min(tok, T - 1)) * K + sb_begin * 256 + 8 * t,
                           X + static_cast<long long>(min(tok + 8, T - 1)) * K + sb_begin * 256 + 8 * t};
    const uint2* sp[2] = {nullptr, nullptr};
#if MINSUM && !XFUSE
    sp[0] = S + static_cast<long long>(min(tok, T - 1)) * (K / 64) + sb_begin * 4 + t;
    sp[1] = S + static_cast<long long>(min(tok + 8, T - 1)) * (K / 64) + sb_begin * 4 + t;
#endif
    auto start_activations = [&] {  // after the first weights are requested: they do not depend on the pass
        if constexpr (PDL >= 1) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the pass's f16 is written
        if constexpr (XAHEAD) load_chunk(xn, xp, 0);
    };
    if constexpr (RING == 0) {
        const uint8_t* rows[2] = {W + static_cast<long long>(min(row, M - 1)) * row_bytes + sb_begin * kBlockBytes,
                                  W + static_cast<long long>(min(row + 8, M - 1)) * row_bytes + sb_begin * kBlockBytes};
        Rows ra, rb;
        load_rows(ra, rows, t);
        start_activations();
        for (int sb = sb_begin; sb < sb_end; sb += 2) {  // two super-blocks per trip: ra and rb swap roles
            rows[0] += kBlockBytes, rows[1] += kBlockBytes;
            if (sb + 1 < sb_end) load_rows(rb, rows, t);
            multiply(acc, RegRows{ra}, xp, xn, sb + 1 < sb_end, sp, t);  // (MT = 1)
            if (sb + 1 >= sb_end) break;
            advance(xp, sp), rows[0] += kBlockBytes, rows[1] += kBlockBytes;
            if (sb + 2 < sb_end) load_rows(ra, rows, t);
            multiply(acc, RegRows{rb}, xp, xn, sb + 2 < sb_end, sp, t);
            advance(xp, sp);
        }
    } else {
        extern __shared__ __align__(16) uint8_t smem[];
        uint8_t* ring = smem + warp * (RING * kSlotBytes);
        uint8_t* xs = smem + RING * WARPS * kSlotBytes;
        if constexpr (WG) xs += (kXAlign - (mmq::smem_addr(xs) & (kXAlign - 1))) & (kXAlign - 1);  // swizzle atoms
        const int tok0 = blockIdx.z * 16, rows = min(16, T - tok0);  // XSHARED: the live token rows
        if constexpr (XSHARED > 0) {  // the fragments read the staged rows g and g + 8
            if (sb_end - sb_begin > XSHARED) __trap();  // the launcher splits K so that a range fits
            xp[0] = reinterpret_cast<const __half*>(xs + min(g, rows - 1) * kXStride) + 8 * t;
            xp[1] = reinterpret_cast<const __half*>(xs + min(g + 8, rows - 1) * kXStride) + 8 * t;
        }
#if XFUSE
        // xready[s]: every thread has written its share of super-block s of the range (one phase per launch)
        __shared__ uint64_t xready[XSHARED];
        __half* sums = reinterpret_cast<__half*>(xs + kXBytes);
        if constexpr (MINSUM) {
            sp[0] = reinterpret_cast<const uint2*>(sums) + min(g, rows - 1) * kSumPairs + t;
            sp[1] = reinterpret_cast<const uint2*>(sums) + min(g + 8, rows - 1) * kSumPairs + t;
        }
        if (threadIdx.x < XSHARED) mmq::mbar_init(&xready[threadIdx.x], kThreads);
        __syncthreads();  // initialized before any arrival
        const int r0 = threadIdx.x / 64;
        const ShareAt at{static_cast<const float*>(Xin) + static_cast<long long>(tok0 + r0) * K + sb_begin * 256 +
                             4 * (threadIdx.x % 64),
                         K, r0, static_cast<int>(threadIdx.x % 64), rows - 1 - r0};
        Share next;  // super-block s + 1's share, loaded while s - 1 is multiplied
#endif
        RingCopies copies;
        // warp-uniform; WTILE: the warp's tile row0 / kWarpRows of nsb slots
        // (a warp past M reads the last tile and stores nothing)
        const long long tile = min(row0 / kWarpRows, (M - 1) / kWarpRows);
#if WTILE == 2
        const long long tiles = (M + kWarpRows - 1) / kWarpRows;
        const uint8_t* base = W + (sb_begin * tiles + tile) * kSlotBytes;
        const long long kNextBlock = tiles * kSlotBytes;  // the next super-block's offset
#else
        const uint8_t* base = WTILE ? W + (tile * nsb + sb_begin) * kSlotBytes
                                    : W + static_cast<long long>(row0) * row_bytes + sb_begin * kBlockBytes;
        constexpr int kNextBlock = WTILE ? kSlotBytes : kBlockBytes;  // the next super-block's offset
#endif
        if constexpr (L2PF == 2) {  // rows are 16-byte multiples (144-byte super-blocks), so each range is bulk-aligned
            if (lane < kWarpRows && row0 + lane < M)
                mmq::bulk_prefetch_l2(base + lane * row_bytes, (sb_end - sb_begin) * kBlockBytes);
        }
#pragma unroll
        for (int i = 0; i < kCopies; ++i) {
            const int p = min(lane + 32 * i, kPieces - 1), r = p / 9;
            copies.src[i] = WTILE ? 16 * p : static_cast<int>((min(row0 + r, M - 1) - row0) * row_bytes) + 16 * (p % 9);
        }
#pragma unroll
        for (int s = 0; s < RING - 1; ++s) {
            issue_slot(copies, base, ring + s * kSlotBytes, lane, sb_begin + s < sb_end);
            base += kNextBlock;
            if (XSHARED && s == 0) {  // after the first weights: the first super-block's activations, then the rest's
#if !XFUSE
                if constexpr (PDL >= 1) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the pass's f16 is written
                stage_activations(xs, X, tok0, rows, K, sb_begin, 0, 1, warp, lane);
                stage_activations(xs, X, tok0, rows, K, sb_begin, 1, sb_end - sb_begin, warp, lane);
#endif
            }
        }
#if XFUSE  // after the first weights: the first super-block's activations converted here, the rest in the loop
        if (sb_begin < sb_end) {
            Share first;
            load_share(first, at, 0);
            load_share(next, at, min(1, sb_end - sb_begin - 1));
            store_share(first, at, xs, sums, 0, true);
            mmq::mbar_arrive(&xready[0]);
        }
#endif
        if constexpr (!XSHARED) start_activations();
        if constexpr (PROBE == 3) load_chunk(xn, xp, 0);  // the one chunk every step multiplies
        int slot = 0, fill = RING - 1;
#if WG
        float accw[8] = {};  // the wgmmas' accumulators (acc takes MINSUM's rank-1 term)
        uint32_t aset[2][4][4];
#endif
        for (int sb = sb_begin; sb < (PROBE == 5 ? sb_begin : sb_end); ++sb) {
            __syncwarp();  // every lane has read the slot refilled now (the one multiplied last)
            issue_slot(copies, base, ring + fill * kSlotBytes, lane, PROBE != 1 && sb + RING - 1 < sb_end);
            base += kNextBlock;
            fill = fill + 1 == RING ? 0 : fill + 1;
#if XFUSE
            const int sbl = sb - sb_begin;
            // the next super-block's share (loaded a super-block ago), and the one after's loads (past the range: the last
            // super-block's again, nothing stored)
            store_share(next, at, xs, sums, sbl + 1, sb + 1 < sb_end);
            if (sb + 1 < sb_end) mmq::mbar_arrive(&xready[sbl + 1]);
            load_share(next, at, min(sbl + 2, sb_end - sb_begin - 1));
            mmq::cp_async_wait<RING - 1>();  // this super-block's weights have landed
            __syncwarp();                    // (every lane's copies)
            mmq::mbar_wait(&xready[sbl], 0);  // and every warp's share of its activations
#else
            if (XSHARED && sb == sb_begin) {
                mmq::cp_async_wait<RING>();  // the first super-block's weights and activations (not the rest's)
            } else {
                mmq::cp_async_wait<RING - 1>();  // this super-block's group has landed (XSHARED: the rest's too)
            }
            __syncwarp();  // and so have the other lanes' copies of it
            if (XSHARED && sb - sb_begin < 2) {  // and the other warps' activation copies
#if WG
                mmqwg::fence_proxy_async();  // landed cp.async bytes -> visible to the wgmma
#endif
                __syncthreads();
            }
#endif
            const uint8_t* landed = ring + slot * kSlotBytes + g * kBlockBytes;
#if WG
            multiply_wg(acc, accw, aset, SlotRows{landed, t}, mmq::smem_addr(xs) + (sb - sb_begin) * 4 * kXTile, sp, t);
#elif PROBE == 6
            acc[0][0][0] += __uint_as_float(*reinterpret_cast<const uint32_t*>(landed + 16 * t) & 0x007FFFFFu);
#else
            multiply(acc, SlotRows{landed, t}, xp, xn, sb + 1 < sb_end, sp, t);
#endif
            slot = slot + 1 == RING ? 0 : slot + 1;
            advance(xp, sp);
        }
        if constexpr (PROBE == 5) {  // the prologue's copies land, as they would for the first super-block
            mmq::cp_async_wait<0>();
            __syncthreads();
        }
#if WG
        mmqwg::wgmma_wait<0>();
        mmqwg::fence_acc(accw);
        mmqwg::fence_regs(aset[0]);
        mmqwg::fence_regs(aset[1]);
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[0][n][e] += accw[4 * n + e];
#endif
    }
#if ATOMIC
    if (gridDim.y > 1) {
#if ATOMIC == 2
        if (blockIdx.y > 0) mmq::wait_tile_zeroed(flag, epoch);
#endif
        add_splits(acc, C, row0, blockIdx.z * 16 + 2 * t, g, M, T);
        return;
    }
#endif
#if CLUSTER > 1
    extern __shared__ __align__(16) uint8_t smem_part[];  // the staged activations, done with
    sum_cluster(acc, reinterpret_cast<float*>(smem_part + RING * WARPS * kSlotBytes), C, blockIdx.x * kCtaRows,
                blockIdx.z * 16, M, T);
    return;
#endif
    float* out = C + static_cast<long long>(blockIdx.y) * T * M;  // this split's slice (one split: C itself)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int tk = blockIdx.z * 16 + n * 8 + 2 * t + (e & 1), r = row + 16 * mt + 8 * (e >> 1);
                if (tk < T && r < M) out[static_cast<long long>(tk) * M + r] = acc[mt][n][e];
            }
        }
    }
#if FIXUP
    if (gridDim.y > 1) direct::sum_splits(C, C_sum, counters + blockIdx.z * gridDim.x + blockIdx.x, M, T);
#endif
}

MMQ_SPLITK_REDUCE(mmq_direct_splitk_reduce)

extern "C" __constant__ int mmq_direct_smem_bytes = direct::kSmemBytes;

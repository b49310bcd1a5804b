// Hopper (sm_90a) quantized GEMM with the weights dequantized straight into wgmma A registers
// (the `wgmma` lever, WS = 1, AREG = 1). A producer warpgroup only copies; each consumer warp
// turns its 16 weight rows of raw ggml bytes into f16 A fragments while its previous wgmma runs.
//
//   C[T, M] = X[T, K] . W[M, K]^T,  X as f16 (an f32 -> f16 pass, timed), W in ggml blocks.
//
// Why registers and not a dequantized tile in shared memory (mmq_wgmma.cu, mmq_wgmma_ws.cu):
// the tile costs a store, a CTA-wide hand-off and a second read per weight; here a weight is
// read once (2 raw bytes give 4 weights), dequantized in 2 instructions and consumed by
// `wgmma.mma_async ... {a0..a3}, desc_b`, which reads A from registers, B from shared memory.
//
// Precision contract: that of the DEQ = 1 f16 path (dequant16.cuh): the quantized value q is
// exact in f16 (1024 + q - bias), then w = fma_f16(q, f16(sw), f16(-mn)), rounded once; f32 sums.
//
// Fragment layout (m16n8k16 A, one warp = 16 rows of its warpgroup's 64): lane (g = lane / 4,
// tq = lane % 4) holds for k16 slice i the half2 pairs a[i][0] = (row g, k 2tq..+1),
// a[i][1] = (row g+8, same k), a[i][2] = (row g, k 2tq+8..+9), a[i][3] = (row g+8, k 2tq+8..+9).
// In one 64-k chunk the thread's k are l, l+1 and 32+l, 32+l+1 for l in {2tq, 2tq+8, 2tq+16, 2tq+24}:
// one 16-bit load of q4_K nibbles yields both (low nibbles: slice l/16, high: slice 2 + l/16).
//
// Pipeline (mbarriers, no CTA-wide barrier in the main loop):
//   xfull[s]/xempty[s]   STAGES activation chunks (BN tokens x 64 k, 128B-swizzled, wgmma B);
//   rawfull[b]/rawempty[b] RAW raw super-block slots (BM rows x 256 k).
//   The producer warpgroup has two independent roles, so neither waits for the other's slots:
//   raw-copy warps fill the raw slots as soon as they drain (RAW super-blocks of weight prefetch,
//   cp.async.mbarrier.arrive: consumers read them with plain loads once they land), and the
//   activation warps fill the activation ring (XLOAD picks how):
//     XLOAD 1: the activation pass already wrote each (token tile, step) chunk contiguous and
//              swizzled, so one thread moves it with one bulk copy (the TMA engine, async proxy:
//              no fence before the wgmma, no per-16-byte copies on the load/store unit);
//     XLOAD 2: TMA with a tensor map on row-major f16 (cp.async.bulk.tensor, 128B swizzle by the
//              copy engine, tokens past T read as zeros): one thread, one copy per step, and no
//              pass at all when the activations arrive as f16;
//     XLOAD 3: the activation warps read f32 rows and write swizzled f16 themselves (no pass, no
//              launch: for small T, where the pass costs the most; BN <= 16), fence, arrive;
//     XLOAD 0: cp.async per 16 bytes from row-major f16. These are generic-proxy writes read by
//              the wgmma (the async proxy), so they need fence.proxy.async between landing and use:
//     XSYNC 1: the producer waits for its copies of step f - LAG, fences, arrives xfull (LAG =
//              STAGES - 2 steps behind its copies); the MMA warps never fence;
//     XSYNC 0: cp.async.mbarrier.arrive, and every consumer fences after its xfull wait (a
//              MEMBAR.ALL.CTA per step on the MMA warps).
//   consumer step s: wait xfull[s], 4 x wgmma(A regs of s), wait for step s-1's wgmmas, release
//   its chunk, dequantize step s+1 into the other register set (overlaps wgmma(s)). ASETS 3: three
//   register sets, and the wait is for step s-2's wgmmas (two groups in flight); measured within
//   noise of two (runs 66-67).
//
// Split K (small T: too few row x token tiles to fill the GPU) either by separate partial sums
// and a reduce launch (CLUSTER = 1, the launcher's SPLITK), or inside a thread-block cluster
// (CLUSTER = 2 or 4 CTAs along K): the non-leader CTAs leave their accumulators in their drained
// shared memory, the leader adds them over distributed shared memory and writes C itself -- no
// partial buffer, no second launch.
//
// Activations shared by a cluster (MCAST = 2 or 4 CTAs along M, XLOAD 1/2): the CTAs of a cluster
// multiply the same token tile with different weight rows, so each copies 1 / MCAST of every
// activation chunk and the copy engine multicasts it into all of them. L2 reads of activations
// drop MCAST-fold (at BN = 256 they are 7 of every 8 bytes a CTA reads); a slot is free again only
// when the consumers of every CTA of the cluster have released it (xempty counts them all).
// Measured (docs/perf-log.md runs 21-24): within 2 % of the plain launch, because at large T the
// plain kernel is bound by the tensor pipe, with L2 only 64 % busy.
//
// PDL = 1 (XLOAD 0-2, whose activations an f32 -> f16 pass writes): the kernel is launched as a
// programmatic dependent of that pass, so its CTAs start, initialise their barriers and copy the
// first RAW super-blocks of weights while the pass runs; only the activation warps wait for it.
// PDL = 2: the same, and the split-K reduction (when there is one) is a dependent of this kernel,
// released at its start: its CTAs are resident and waiting when the last partial sum lands. With
// XLOAD 3 (no pass) only that second half applies.
//
// PERSIST = 1 (XLOAD 1/2, no cluster): where the tiles fill the GPU (no split K), the launcher starts
// one CTA per SM slot and each loops over the output tiles (t = blockIdx.x, + gridDim.x, ... in the
// plain grid's launch order, which RASTER picks). Its rings carry on from tile to tile, so the
// producer copies the next tile's first super-blocks and chunks while the consumers finish the last
// steps of this one and store it: no CTA launch, barrier setup or pipeline fill per tile. Where K is
// split, the launcher keeps the plain grid and each CTA runs its one tile.
//
// RASTER = 1: the launch order runs weight-row tiles fastest (blockIdx.x is the row tile), so the
// CTAs resident at once share a few token tiles and all of the weights, not all of the tokens and a
// few row tiles (RASTER = 0): at large T the activations outgrow L2, the weights (33 MB) do not.
// With MCAST the cluster runs along x then, still CTAs of one token tile and neighbouring rows.
//
// WREUSE = 1: a thread keeps the raw words that later steps of the super-block read again instead
// of reloading them (q5_K: the qh word, so steps 1-3 load 8 words per thread instead of 16; q6_K: all
// three words, so the odd steps load none instead of 24); no effect on q4_K and q8_0.
// WREUSE = 2: the same, and those words are kept spread (one code byte per f16 lane, as the dequant
// reads them), so the steps that reuse a word do not spread it again (one PRMT per word each).
//
// STREAMK = 1 (XLOAD 1/2, where the launcher passes sk_ctas > 0): the last wave's tiles are shared out
// evenly instead of leaving SMs idle (at T = 2048, 256 tiles of 128 x 256 on 132 SMs are 1.94 waves). The
// grid is 1-D. Its first gridDim.x - sk_ctas CTAs run one whole tile each, in the launch order (RASTER's).
// The last sk_ctas CTAs split the remaining tiles' super-blocks: CTA c gets units [c U / sk, (c + 1) U / sk)
// of the U (tile, super-block) units, at least one and fewer than a tile's, so it holds pieces of at most two
// tiles. Its producer and consumers run the pieces one after the other, the rings carrying on as PERSIST's do.
// A piece that is not a whole tile goes to the CTA's slot of a workspace, and a counter per tile says who is
// last; the last adds the pieces in CTA order (the same sum whoever is last) and stores the tile.
// Measured (docs/perf-log.md runs 47-48): 3-13 % slower. The tail fills (SMs active 97.5 % instead of 94.5 %),
// but the shared CTAs' runtime ring offsets and workspace round trip add 5.7 % instructions, and their
// staggered K offsets lose the L2 reuse of CTAs that walk K in step (26 % more DRAM reads).
//
// SPLITDEC = 1 (q4_K, q5_K): the step that opens the next super-block (step 2 of 4) also decodes all
// 16 of its rows' scale pairs, the heaviest step of the loop by ~80 instructions per thread. Here step 1
// waits for the next super-block and decodes groups 0-3 (free since step 0), step 2 groups 4-7.
// Measured (run 45): +0.3 %, the tensor pipe as idle as before (84 %): that step was not what idles it.
//
// Compile-time parameters: QTYPE, BM = 64 x consumer warpgroups, BN (a wgmma N), STAGES 2..16,
// RAW 2..8, XLOAD, XSYNC, MIN_BLOCKS, CLUSTER, MCAST, PDL, WREUSE, PERSIST, RASTER, SPLITDEC, STREAMK, NSPLIT, ASETS. A narrow token tile has small
// activation chunks (2 KB at BN = 16), so its ring can run many steps ahead of the consumers and cover
// a whole copy round trip.
#define MMQ_MAX_STAGES 16
#include "wgmma_ring.cuh"
#include "cluster.cuh"

#ifndef XSYNC
#define XSYNC 0
#endif
#ifndef XLOAD
#define XLOAD 0
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef MCAST
#define MCAST 1
#endif
#ifndef PDL
#define PDL 0
#endif
#ifndef WREUSE
#define WREUSE 0
#endif
#ifndef PERSIST
#define PERSIST 0
#endif
#ifndef RASTER
#define RASTER 0
#endif
#ifndef SPLITDEC
#define SPLITDEC 0
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
// PROBE 1 / 2: timing probes, not kernels (wrong numbers; the parity gate refuses them): 1 hands the raw words
// to the wgmma as they are (the loop without the dequant math), 2 skips the output stores (without the epilogue)
#ifndef NSPLIT
#define NSPLIT 1
#endif
#ifndef PREDEC
#define PREDEC 0
#endif
#ifndef BF16_OUTPUT
#define BF16_OUTPUT 0
#endif
#ifndef PROBE
#define PROBE 0
#endif
// EPI 1 (BF16_OUTPUT): the output tile transposed through shared memory by stmatrix, then written 16 B per
// lane in whole 32-byte sectors (0: two-byte stores straight from the fragments)
#ifndef EPI
#define EPI 0
#endif
// ASETS 3: three A register sets, so a warpgroup keeps two wgmma groups in flight while it dequantizes the
// next step (2: one group in flight, the other set being written)
#ifndef ASETS
#define ASETS 2
#endif

using namespace mmqwg;

namespace mmqrs {

constexpr int kConsumers = BM / 64;
constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kThreadsRs = kConsumerThreads + 128;
constexpr bool kXByCopyEngine = XLOAD == 1 || XLOAD == 2;  // one thread issues, the bytes arrive as tx
constexpr int kXThreads = kXByCopyEngine ? 32 : 64;          // producer threads on activations
// PREDEC (q4_K, q5_K): one producer warp decodes each landed super-block's scales for the whole tile
constexpr bool kPreDec = PREDEC && QTYPE <= 1;
constexpr int kDecThreads = kPreDec ? 32 : 0;                 // producer threads decoding scales
constexpr int kRawThreads = 128 - kXThreads - kDecThreads;   // producer threads on raw weight slots
constexpr int kLag = (XSYNC && XLOAD == 0) ? STAGES - 2 : 0;  // steps xfull trails the copies (more would deadlock)
static_assert(XLOAD >= 0 && XLOAD <= 3, "XLOAD must be 0..3");
static_assert(XLOAD != 3 || BN <= 16, "XLOAD 3 holds two steps' f32 in the activation warps' registers");
// 2 (STAGES + RAW) mbarriers of 8 bytes, in 256-byte units (256 for up to 16 of them)
constexpr int kBarBytes = (16 * (STAGES + RAW) + 255) / 256 * 256;
// PREDEC: RAW scale slots of BM rows x 8 (sw, -mn) pairs, after their RAW `scfull` mbarriers (128 B)
constexpr int kScaleSlotBytes = BM * 8 * 4;
constexpr int kPreDecBytes = kPreDec ? 128 + RAW * kScaleSlotBytes : 0;
// EPI: 2 KB of staging per consumer warp, where the tile is whole 16-token stmatrix groups (else the direct stores)
static_assert(!EPI || BF16_OUTPUT, "EPI: the staged epilogue of BF16_OUTPUT");
constexpr bool kStagedEpi = EPI && BN % 16 == 0;
constexpr int kEpiBytes = kStagedEpi ? kConsumers * 4 * 2048 : 0;
constexpr int kSmemRs = kAlign + STAGES * kXChunk + RAW * kRawWBytes + kBarBytes + kPreDecBytes + kEpiBytes;
static_assert(kThreads == kConsumerThreads, "WARPS_M = BM / 16: the consumers' warps");
static_assert(STAGES >= 2 && STAGES <= 16, "STAGES must be 2..16");
static_assert(RAW >= 2 && RAW <= 8, "RAW must be 2..8");
static_assert((STAGES * kXChunk) % kAlign == 0, "activation chunks keep their 1024-byte swizzle alignment");
static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4, "CLUSTER must be 1, 2 or 4 CTAs along K");
static_assert(MCAST == 1 || MCAST == 2 || MCAST == 4, "MCAST must be 1, 2 or 4 CTAs along M");
static_assert(MCAST == 1 || (CLUSTER == 1 && kXByCopyEngine), "MCAST: the copy engine's multicast, no K cluster");
static_assert(PDL >= 0 && PDL <= 2 && (PDL != 1 || XLOAD != 3), "PDL 1 overlaps the activation pass: XLOAD 3 has none");
static_assert((BN / MCAST) % 8 == 0, "each CTA's share of a chunk is whole 8-row swizzle atoms");
static_assert(!PERSIST || (kXByCopyEngine && CLUSTER == 1 && MCAST == 1),
              "PERSIST: activations by the copy engine (XLOAD 1/2), no cluster");
static_assert(RASTER == 0 || RASTER == 1, "RASTER 1: weight-row tiles along x (an MCAST cluster along x too)");
constexpr bool kInCluster = CLUSTER > 1 || MCAST > 1;
static_assert(!STREAMK || (kXByCopyEngine && CLUSTER == 1 && MCAST == 1 && !PERSIST),
              "STREAMK: activations by the copy engine (XLOAD 1/2), no cluster, not PERSIST");
static_assert(!BF16_OUTPUT || (CLUSTER == 1 && !STREAMK), "BF16_OUTPUT: each tile written once by its CTA");
constexpr bool kSplitDec = SPLITDEC && QTYPE <= 1;  // (q6_K and q8_0 have no per-block decode to split)
static_assert(ASETS == 2 || ASETS == 3, "ASETS: 2 or 3 A register sets");
static_assert(STAGES >= ASETS, "ASETS - 1 steps' chunks stay held while the next one is multiplied");
constexpr int kInFlight = ASETS - 1;  // wgmma groups a warpgroup leaves running when it dequantizes the next step
// NSPLIT: the warpgroup's accumulators as NSPLIT independent column blocks of BN / NSPLIT tokens, one wgmma
// each per k16 slice, issued alternately: back-to-back wgmmas then never wait on each other's accumulators
constexpr int kNSplit = NSPLIT, kNBlock = BN / NSPLIT;
static_assert(BN % (8 * NSPLIT) == 0, "NSPLIT column blocks of whole n8 tiles");
constexpr int kXShare = kXChunk / MCAST;  // the bytes of a chunk one CTA of the cluster copies
// a non-leader CTA's partial sums (BN / 2 floats per consumer thread) go where its ring and raw slots were
static_assert(CLUSTER == 1 || kConsumerThreads * BN * 2 <= STAGES * kXChunk + RAW * kRawWBytes,
              "the cluster's partial sums do not fit in the drained ring and raw slots");
constexpr bool kMoveRegs = (kConsumers == 2 && MIN_BLOCKS == 1);
// ASETS 3: 16 more A registers per consumer thread, taken from the producer (56 x 128 + 224 x 256 = 64512 of 65536)
constexpr int kProducerRegs = ASETS == 3 ? 56 : 72, kConsumerRegs = ASETS == 3 ? 224 : 208;
static_assert(!kMoveRegs || register_split_fits(kProducerRegs, kConsumerRegs, kConsumerThreads), "register file");
static_assert(sizeof(Bars) <= kBarBytes, "barriers overflow their smem slot");

struct Smem {
    uint8_t* x;    // STAGES activation chunks
    uint8_t* raw;  // RAW raw super-block slots
    Bars* bars;
    uint64_t* scfull;  // PREDEC: RAW mbarriers, slot b's scales are decoded
    uint4* scales;     // PREDEC: RAW scale slots [row][2 x uint4]
    uint8_t* epi;      // EPI: the consumer warps' output staging
};

struct Job {
    const uint8_t* W;
    const void* X;  // XLOAD 0/1: f16 rows / tiled chunks; 2: the tensor map; 3: f32 rows
    int row0, tok0, M, T, K, kb_begin, n;  // n: 64-k steps of this CTA, from super-block kb_begin
    size_t rb;
    int sb0;     // super-blocks the CTA's rings carried before this tile (PERSIST: its earlier tiles; else 0)
    // The rings' counts are unsigned and whole super-blocks apart from tile to tile, so that with STAGES
    // dividing kSteps a step's slot is a compile-time constant in PERSIST's loop as in the plain one's
    // (a signed, step-granular offset cost PERSIST 6 % more instructions per super-block: run 26).
    __device__ __forceinline__ unsigned ring_step(int s) const { return kSteps * static_cast<unsigned>(sb0) + s; }
    __device__ __forceinline__ unsigned ring_block(int b) const { return static_cast<unsigned>(sb0) + b; }
    int tile_x;  // token tile (XLOAD 1's chunk index)
};

// ---- dequantize: raw ggml bytes -> f16 A fragments ----
//
// Per super-block each thread decodes the scales of its two rows once into half2 registers
// (exact products rounded once, as the DEQ = 1 path rounds them); per step it turns codes into
// exact f16 integers (the 1024 + code exponent trick) and applies the scale with one HFMA2/HMUL2.

__device__ __forceinline__ uint32_t ld16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
// bytes b0, b1 of v -> 0x00b1_00b0 (one code per f16 lane)
__device__ __forceinline__ uint32_t spread(uint32_t v) { return __byte_perm(v, 0u, 0x4140); }
// (a & mask) | c in one LOP3 (nvcc splits the C++ form into two when both constants are immediates)
template <uint32_t MASK>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t c) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "n"(MASK), "r"(c));
    return d;
}
__device__ __forceinline__ __half2 h2(uint32_t v) { return *reinterpret_cast<const __half2*>(&v); }
__device__ __forceinline__ uint32_t u32(__half2 v) { return *reinterpret_cast<const uint32_t*>(&v); }
constexpr uint32_t kMagic = 0x64006400u;  // f16 1024 in both lanes: 0x6400 | c is 1024 + c exactly (c < 1024)

// biased (1024 + bias + q per lane) -> q, exact
__device__ __forceinline__ __half2 unbias(uint32_t biased, uint32_t bias2) { return __hsub2(h2(biased), h2(bias2)); }

#if QTYPE <= 1
constexpr int kScaleRegs = 8;  // j: (sw_j, -mn_j) of 32-group j
#elif QTYPE == 2
// i: (sw_2i, sw_2i+1) of the step's 16-groups 2i, 2i + 1 (no min), decoded per step with the
// step's raw words (8 per super-block would leave a BN = 256 tile no registers to spare); r[2] = d
constexpr int kScaleRegs = 3;
#else
constexpr int kScaleRegs = 4;  // i: (d_2i, d_2i+1) of 32-blocks 2i, 2i + 1 (no min)
#endif

#if QTYPE <= 1
// r[j] for the 32-groups j in [J0, J1) of one row's super-block `blk`: 6-bit (sc, m) pairs of 12
// bytes, four at a time (ggml's get_scale_min_k4 on whole words; groups 0-3 need no third word).
template <int J0, int J1>
__device__ __forceinline__ void decode_groups(const uint8_t* blk, uint32_t (&r)[kScaleRegs]) {
    const __half2 dm = h2(ld32(blk) ^ 0x80000000u);  // (d, -dmin)
    const uint32_t s0 = ld32(blk + 4), s1 = ld32(blk + 8), s2 = J1 > 4 ? ld32(blk + 12) : 0u;
    const uint32_t sc[2] = {s0 & 0x3F3F3F3Fu, (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u)};
    const uint32_t mn[2] = {s1 & 0x3F3F3F3Fu, ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u)};
#pragma unroll
    for (int j = J0; j < J1; ++j) {
        const int b = j & 3;  // byte b of the words: sc in lane 0, m in lane 1
        const uint32_t bytes = __byte_perm(sc[j >> 2], mn[j >> 2], b | (b << 4) | ((4 + b) << 8) | ((4 + b) << 12));
        const uint32_t pair = and_or<0x00FF00FFu>(bytes, kMagic);
        r[j] = u32(__hmul2(unbias(pair, kMagic), dm));  // (d sc, -dmin m), each rounded once
    }
}
#endif

// The scale registers of one row's super-block `blk`.
__device__ __forceinline__ void decode_scales(const uint8_t* blk, uint32_t (&r)[kScaleRegs]) {
#if QTYPE <= 1
    decode_groups<0, 8>(blk, r);
#elif QTYPE == 2
    const uint32_t d = ld16(blk + 208);
    r[2] = d | (d << 16);  // the step scales follow in step_scales
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = ld16(blk + 68 * i) | (ld16(blk + 68 * i + 34) << 16);
#endif
}

// The raw words a thread loads per row position l (one 16-bit load each), and their turn into
// exact f16 codes of k = 64 SUB + l, l + 1 (lo: slices 0-1) and 64 SUB + 32 + l, l + 1 (hi: slices 2-3).
// Loading and turning are apart so the loads of step s + 2 run while step s + 1's wgmmas issue.
#if QTYPE == 0
constexpr int kWords = 1;  // qs: low nibbles group 2 SUB, high nibbles group 2 SUB + 1
#elif QTYPE == 1
constexpr int kWords = 2;  // qs, qh (bit j of qh byte l is the 5th bit of group j)
#elif QTYPE == 2
constexpr int kWords = 3;  // ql (quarter r), ql (quarter r + 1), qh
#else
constexpr int kWords = 2;  // block 2 SUB, block 2 SUB + 1
#endif

// q6_K: the 16-group scales of step SUB (groups 4 SUB .. 4 SUB + 3) into r[0], r[1].
template <int SUB>
__device__ __forceinline__ void step_scales(const uint8_t* blk, uint32_t (&r)[kScaleRegs]) {
#if QTYPE == 2
#pragma unroll
    for (int i = 0; i < 2; ++i)  // int8 scales: sign bit flipped -> 1024 + 128 + sc
        r[i] = u32(__hmul2(unbias(spread(ld16(blk + 192 + 4 * SUB + 2 * i)) ^ 0x64806480u, 0x64806480u), h2(r[2])));
#endif
}

// WREUSE = 2: words a later step reuses are held spread (keep at the load, kept at each use).
__device__ __forceinline__ uint32_t keep(uint32_t raw) { return WREUSE == 2 ? spread(raw) : raw; }
__device__ __forceinline__ uint32_t kept(uint32_t w) { return WREUSE == 2 ? w : spread(w); }

template <int SUB>
__device__ __forceinline__ void load_words(const uint8_t* blk, int l, uint32_t (&w)[kWords]) {
#if QTYPE == 0
    w[0] = ld16(blk + 16 + 32 * SUB + l);
#elif QTYPE == 1
    w[0] = ld16(blk + 48 + 32 * SUB + l);
    if (!WREUSE || SUB == 0) w[1] = keep(ld16(blk + 16 + l));  // WREUSE: qh is one word for all four steps
#elif QTYPE == 2
    // 128-k half n = SUB / 2; quarters r = 2 (SUB % 2) (lo) and r + 1 (hi): ql byte 64 n + 32 (r % 2) + l
    if (WREUSE && SUB % 2) return;  // WREUSE: an odd step's words are the even step's, still held
    w[0] = keep(ld16(blk + 64 * (SUB >> 1) + l));
    w[1] = keep(ld16(blk + 64 * (SUB >> 1) + 32 + l));
    w[2] = keep(ld16(blk + 128 + 32 * (SUB >> 1) + l));
#else
    w[0] = ld16(blk + 68 * SUB + 2 + l);
    w[1] = ld16(blk + 68 * SUB + 36 + l);
#endif
}

template <int SUB>
__device__ __forceinline__ void words_to_codes(const uint32_t (&w)[kWords], __half2& lo, __half2& hi) {
#if QTYPE == 0
    const uint32_t p = spread(w[0]);
    lo = unbias(and_or<0x000F000Fu>(p, kMagic), kMagic);
    hi = __hfma2(h2(and_or<0x00F000F0u>(p, kMagic)), h2(0x2C002C00u), h2(0xD400D400u));  // (1024 + 16 q) / 16 - 64
#elif QTYPE == 1
    const uint32_t p = spread(w[0]), h = kept(w[1]);
    lo = unbias(and_or<0x000F000Fu>(p, kMagic) | (((h >> (2 * SUB)) & 0x00010001u) << 4), kMagic);
    hi = unbias(and_or<0x000F000Fu>(p >> 4, kMagic) | (((h >> (2 * SUB + 1)) & 0x00010001u) << 4), kMagic);
#elif QTYPE == 2
    // ql nibble 4 (r / 2), qh bits 2 r; stored q + 32
    constexpr int sh = 4 * (SUB & 1);
    const uint32_t h = kept(w[2]);
    lo = unbias(and_or<0x000F000Fu>(kept(w[0]) >> sh, kMagic) | (((h >> sh) & 0x00030003u) << 4), 0x64206420u);
    hi = unbias(and_or<0x000F000Fu>(kept(w[1]) >> sh, kMagic) | (((h >> (sh + 2)) & 0x00030003u) << 4),
                0x64206420u);
#else
    lo = unbias(spread(w[0]) ^ 0x64806480u, 0x64806480u);  // int8: 1024 + 128 + q
    hi = unbias(spread(w[1]) ^ 0x64806480u, 0x64806480u);
#endif
}

// A thread's raw words of one step: [row g / g + 8][position p = 2 i + h, l = 16 i + 2 tq + 8 h].
using StepWords = uint32_t[2][4][kWords];

// w = q sw - mn for the codes of k16 slice i (0..3) of chunk SUB.
template <int SUB>
__device__ __forceinline__ uint32_t scale(__half2 q, const uint32_t (&r)[kScaleRegs], int i) {
#if QTYPE <= 1
    const __half2 s = h2(r[2 * SUB + (i >> 1)]);
    return u32(__hfma2(q, __low2half2(s), __high2half2(s)));
#else
    const int j = QTYPE == 2 ? i : 2 * SUB + (i >> 1);  // the step's 16-group / 32-block of the slice
    const __half2 s = h2(r[j >> 1]);
    return u32(__hmul2(q, (j & 1) ? __high2half2(s) : __low2half2(s)));
#endif
}

// The thread's 16 weights of one row (rr = 0: row g, 1: row g + 8) in chunk SUB, from its words.
template <int SUB>
__device__ __forceinline__ void dequant_row(uint32_t (&a)[4][4], const uint32_t (&w)[4][kWords],
                                            const uint32_t (&r)[kScaleRegs], int rr) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            __half2 lo, hi;
            words_to_codes<SUB>(w[2 * i + h], lo, hi);
            a[i][2 * h + rr] = scale<SUB>(lo, r, i);
            a[i + 2][2 * h + rr] = scale<SUB>(hi, r, i + 2);
        }
}

// ---- thread-block cluster (CLUSTER > 1 or MCAST > 1) ----

// Arrive on the mbarrier at this CTA's shared address `bar` in cluster CTA `rank`. The slot it
// frees was read by wgmmas that have completed (wgmma.wait_group), so there is nothing to order
// before the other CTA's refill: the default .release.cta arrive, as CUTLASS's ClusterBarrier.
// (.release.cluster compiled to a MEMBAR.ALL.GPU per arrive: 41 % of the stalls in run 23.)
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
    asm volatile(
        "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
        " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
        "r"(rank)
        : "memory");
}
// bulk_copy_g2s / tma_load_2d into the same shared offset of every cluster CTA in `mask`, each
// CTA's barrier at `bar`'s offset counting the bytes that land in it.
__device__ __forceinline__ void bulk_copy_g2s_multicast(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                        uint16_t mask) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], "
        "%4;\n" ::"r"(smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar)), "h"(mask)
        : "memory");
}
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const void* tmap, int c0, int c1, uint64_t* bar,
                                                      uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
        "l"(tmap), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(mask)
        : "memory");
}

// ---- the two roles ----

// Activation chunk of step kc (BN tokens x 64 k) by the kXThreads activation threads: thread tid
// copies 16-byte column c = tid % 8 of tokens tid / 8 + kRowsPer m, so its shared-memory offsets
// are constants apart and each copy costs a clamp and an address.
__device__ __forceinline__ void copy_x(uint8_t* xs, int tid, const Job& j, int kc) {
    constexpr int kRowsPer = kXThreads / 8;
    const int c = tid & 7, t0 = tid >> 3;
    const __half* src = static_cast<const __half*>(j.X) + kc * 64 + c * 8;
#pragma unroll 8  // (fully unrolled, a 256-token chunk's 32 addresses outgrow the producer's registers)
    for (int m = 0; m < (BN + kRowsPer - 1) / kRowsPer; ++m) {
        const int t = t0 + kRowsPer * m;
        if (BN % kRowsPer == 0 || t < BN) {
            const int tok = min(j.tok0 + t, j.T - 1);  // tokens past T load the last one; never stored
            cp_async16(xs + swz(t, c), src + static_cast<size_t>(tok) * j.K);
        }
    }
}

// Activation warps: step f's chunk into ring slot f % STAGES once the consumers released it.
__device__ __forceinline__ void produce_x(const Smem& sm, const Job& j, int tid) {
    const int kc0 = j.kb_begin * kSteps;
    if constexpr (PDL && XLOAD != 3) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the pass's f16 is written
#if XLOAD == 1 || XLOAD == 2
    if (tid != 0) return;
    // XLOAD 1: chunk (token tile, global step) of the tiled activations [tile][K / 64][BN rows x 128 B]
    const __half* tile = static_cast<const __half*>(j.X) + static_cast<size_t>(j.tile_x) * (j.K / 64) * (BN * 64);
    // MCAST > 1: this CTA's share is token rows [rank BN / MCAST, (rank + 1) BN / MCAST) of every chunk
    const uint32_t share = MCAST > 1 ? cluster_rank() : 0;
    for (int f = 0; f < j.n; ++f) {
        const unsigned g = j.ring_step(f);
        if (g >= STAGES) mbar_wait(&sm.bars->xempty[g % STAGES], ((g / STAGES) - 1) & 1);
        // the whole chunk lands here (a box past T still counts in full): this CTA's share and the others'
        uint64_t* full = &sm.bars->xfull[g % STAGES];
        mbar_arrive_expect_tx(full, kXChunk);
        uint8_t* dst = sm.x + (g % STAGES) * kXChunk + share * kXShare;
        if constexpr (XLOAD == 1) {
            const __half* src = tile + static_cast<size_t>(kc0 + f) * (BN * 64) + share * (kXShare / 2);
            if constexpr (MCAST == 1) bulk_copy_g2s(dst, src, kXChunk, full);
            else bulk_copy_g2s_multicast(dst, src, kXShare, full, (1u << MCAST) - 1);
        } else {
            const int tok = j.tok0 + static_cast<int>(share) * (BN / MCAST);  // the map's box is BN / MCAST rows
            if constexpr (MCAST == 1) tma_load_2d(dst, j.X, (kc0 + f) * 64, tok, full);
            else tma_load_2d_multicast(dst, j.X, (kc0 + f) * 64, tok, full, (1u << MCAST) - 1);
        }
    }
#elif XLOAD == 3
    // unit u = (token row u / 8, 16-byte column u % 8) of a chunk: 8 f32 in, 8 f16 out (rounded as
    // f32_to_f16 rounds). Two register sets alternate, so a step's L2 loads are in flight two steps
    // before its chunk is published (one step ahead left the producer waiting on them in run 13).
    constexpr int kUnits = BN * 8, kPer = (kUnits + kXThreads - 1) / kXThreads;
    const float* X = static_cast<const float*>(j.X);
    float4 v[2][kPer][2];
    auto load = [&](float4 (&r)[kPer][2], int f) {
        if (f >= j.n) return;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int u = tid + i * kXThreads;
            if (kUnits % kXThreads == 0 || u < kUnits) {
                const int tok = min(j.tok0 + (u >> 3), j.T - 1);  // tokens past T load the last one; never stored
                const float4* p =
                    reinterpret_cast<const float4*>(X + static_cast<size_t>(tok) * j.K + (kc0 + f) * 64 + (u & 7) * 8);
                r[i][0] = __ldg(p);
                r[i][1] = __ldg(p + 1);
            }
        }
    };
    auto publish = [&](const float4 (&r)[kPer][2], int f) {
        if (f >= STAGES) mbar_wait(&sm.bars->xempty[f % STAGES], ((f / STAGES) - 1) & 1);
        uint8_t* xs = sm.x + (f % STAGES) * kXChunk;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int u = tid + i * kXThreads;
            if (kUnits % kXThreads == 0 || u < kUnits)
                *reinterpret_cast<uint4*>(xs + swz(u >> 3, u & 7)) =
                    make_uint4(pack_h2(r[i][0].x, r[i][0].y), pack_h2(r[i][0].z, r[i][0].w),
                               pack_h2(r[i][1].x, r[i][1].y), pack_h2(r[i][1].z, r[i][1].w));
        }
        fence_proxy_async();  // generic-proxy stores -> visible to the wgmma's async-proxy reads
        mbar_arrive(&sm.bars->xfull[f % STAGES]);
    };
    load(v[0], 0);
    load(v[1], 1);
    for (int f = 0; f < j.n; f += 2) {
        publish(v[0], f);
        load(v[0], f + 2);
        if (f + 1 < j.n) {
            publish(v[1], f + 1);
            load(v[1], f + 3);
        }
    }
#else
    for (int f = 0; f < j.n + kLag; ++f) {
        if (f < j.n) {
            if (f >= STAGES) mbar_wait(&sm.bars->xempty[f % STAGES], ((f / STAGES) - 1) & 1);
            copy_x(sm.x + (f % STAGES) * kXChunk, tid, j, kc0 + f);
            if constexpr (!XSYNC) cp_async_mbar_arrive(&sm.bars->xfull[f % STAGES]);
        }
        if constexpr (XSYNC) {  // step g = f - kLag has landed: fence it for the wgmma, then publish
            cp_async_commit();
            const int g = f - kLag;
            if (g >= 0) {
                cp_async_wait<kLag>();
                fence_proxy_async();
                mbar_arrive(&sm.bars->xfull[g % STAGES]);
            }
        }
    }
#endif
}

#if QTYPE <= 1
// PREDEC: the decoder warp turns each landed super-block's packed scales into (sw, -mn) pairs for all BM rows
// of the slot, once per CTA instead of once per consumer thread (four threads share a row); the consumers
// then read 8 pairs per row. The slot's previous scales were read before its raw slot was released, which
// the refill (and so this rawfull) waits for.
__device__ __forceinline__ void produce_scale_slots(const Smem& sm, const Job& j, int lane) {
    for (int b = 0; b < j.n / kSteps; ++b) {
        const unsigned g = j.ring_block(b);
        mbar_wait(&sm.bars->rawfull[g % RAW], (g / RAW) & 1);
        const uint8_t* slot = sm.raw + (g % RAW) * kRawWBytes;
        uint4* out = sm.scales + (g % RAW) * (kScaleSlotBytes / 16);
#pragma unroll 1
        for (int r = lane; r < BM; r += 32) {
            uint32_t s[kScaleRegs];
            decode_groups<0, 8>(raw_block(slot, r, j.row0, j.M, j.kb_begin + b, j.rb), s);
            out[2 * r] = make_uint4(s[0], s[1], s[2], s[3]);
            out[2 * r + 1] = make_uint4(s[4], s[5], s[6], s[7]);
        }
        mbar_arrive(&sm.scfull[g % RAW]);
    }
}
#endif

// The producer warpgroup's share of one job: activation warps fill the ring, raw-copy warps the raw slots,
// (PREDEC) the last warp decodes their scales.
__device__ __forceinline__ void produce_job(const Smem& sm, const Job& job, int tid) {
    if (tid < kXThreads) produce_x(sm, job, tid);
#if QTYPE <= 1
    else if (kPreDec && tid >= 128 - kDecThreads) produce_scale_slots(sm, job, tid - (128 - kDecThreads));
#endif
    else produce_raw_slots(sm.raw, sm.bars, tid - kXThreads, kRawThreads, job.n / kSteps, job.W, job.row0, job.M,
                           job.kb_begin, job.rb, job.sb0);
}

struct Consumer {
    const Smem& sm;
    const Job& j;
    float acc[BN / 2];
    uint32_t sc[2][kScaleRegs];  // scales of the super-block being dequantized, rows g and g + 8
    StepWords words;             // raw words of the next step to dequantize (loaded a step early; WREUSE: or kept)
    const uint8_t* blk[2];       // the two rows' raw blocks of the super-block being loaded
    const uint4* scl[2];         // PREDEC: the two rows' decoded scales of that super-block
    int r0, tq, lane;            // r0: CTA-local row of the thread's g

    // The raw ring's count of super-block b of this tile (its slot and phase; PERSIST: after earlier tiles').
    __device__ __forceinline__ unsigned raw_count(int b) const { return j.ring_block(b); }

    // Wait until super-block b (relative) has landed and point at its two rows.
    __device__ __forceinline__ void open_block(int b) {
        const unsigned g = raw_count(b);
        mbar_wait(&sm.bars->rawfull[g % RAW], (g / RAW) & 1);
        const uint8_t* slot = sm.raw + (g % RAW) * kRawWBytes;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) blk[rr] = raw_block(slot, r0 + 8 * rr, j.row0, j.M, j.kb_begin + b, j.rb);
        if constexpr (kPreDec) {
            mbar_wait(&sm.scfull[g % RAW], (g / RAW) & 1);
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) scl[rr] = sm.scales + (g % RAW) * (kScaleSlotBytes / 16) + 2 * (r0 + 8 * rr);
        }
    }

    // Super-block b has landed: point at its rows, decode their scales.
    __device__ __forceinline__ void begin_block(int b) {
        open_block(b);
#if QTYPE <= 1
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) group_scales<0, 8>(rr);
#else
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) decode_scales(blk[rr], sc[rr]);
#endif
    }

#if QTYPE <= 1
    // Row rr's (sw, -mn) of 32-groups [J0, J1): decoded here, or (PREDEC) read as the producer decoded them.
    template <int J0, int J1>
    __device__ __forceinline__ void group_scales(int rr) {
        if constexpr (kPreDec) {
#pragma unroll
            for (int q = J0 / 4; q < J1 / 4; ++q) {
                const uint4 v = scl[rr][q];
                sc[rr][4 * q] = v.x, sc[rr][4 * q + 1] = v.y, sc[rr][4 * q + 2] = v.z, sc[rr][4 * q + 3] = v.w;
            }
        } else {
            decode_groups<J0, J1>(blk[rr], sc[rr]);
        }
    }
#endif

#if QTYPE <= 1
    // SPLITDEC: the open super-block's 32-groups [4 H, 4 H + 4), into registers free by now.
    template <int H>
    __device__ __forceinline__ void decode_half() {
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) group_scales<4 * H, 4 * H + 4>(rr);
    }
#endif

    template <int SUB>
    __device__ __forceinline__ void load(int b) {
#pragma unroll
        for (int rr = 0; rr < 2; ++rr)
#pragma unroll
            for (int pos = 0; pos < 4; ++pos) load_words<SUB>(blk[rr], 16 * (pos >> 1) + 2 * tq + 8 * (pos & 1), words[rr][pos]);
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) step_scales<SUB>(blk[rr], sc[rr]);  // q6_K only
        if (SUB == kSteps - 1) {  // the super-block's last reads are issued: its slot may refill
            __syncwarp();          // (the arrive's release orders them before the refill)
            if (lane == 0) mbar_arrive(&sm.bars->rawempty[raw_count(b) % RAW]);
        }
    }

    // The chunk in slot `slot` is read: tell its producer -- with MCAST, every CTA's (each wrote a share).
    __device__ __forceinline__ void release_x(int slot) {
        if constexpr (MCAST == 1) {
            mbar_arrive(&sm.bars->xempty[slot]);
        } else {
#pragma unroll
            for (uint32_t r = 0; r < MCAST; ++r) mbar_arrive_cluster(&sm.bars->xempty[slot], r);
        }
    }

    template <int SUB>
    __device__ __forceinline__ void dequant(uint32_t (&a)[4][4]) {
#if PROBE == 1
#pragma unroll
        for (int rr = 0; rr < 2; ++rr)
#pragma unroll
            for (int pos = 0; pos < 4; ++pos) {
                a[pos >> 1][2 * (pos & 1) + rr] = words[rr][pos][0];
                a[(pos >> 1) + 2][2 * (pos & 1) + rr] = words[rr][pos][0] >> 4;
            }
#else
        dequant_row<SUB>(a, words[0], sc[0], 0);
        dequant_row<SUB>(a, words[1], sc[1], 1);
#endif
    }

    // Step s = 4 b + SUB: multiply with `cur` (dequantized before), then dequantize step s + 1
    // into `nxt` from the words loaded last step, and load the words of step s + 2.
    template <int SUB>
    __device__ __forceinline__ void step(int b, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4]) {
        const int s = kSteps * b + SUB;  // the tile's step
        const unsigned g = j.ring_step(s);
        mbar_wait(&sm.bars->xfull[g % STAGES], (g / STAGES) & 1);
        if constexpr (!XSYNC && XLOAD == 0) fence_proxy_async();  // landed cp.async bytes -> visible to the wgmma
        const uint32_t x_addr = smem_addr(sm.x) + (g % STAGES) * kXChunk;
        wgmma_fence();
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int h = 0; h < kNSplit; ++h)  // column block h: tokens [h kNBlock, ...), 128 B per token row
                wg::wgmma_f16_rs<kNBlock>(acc + h * (kNBlock / 2), cur[i], smem_desc(x_addr + h * kNBlock * 128 + 32 * i));
        wgmma_commit();
        wgmma_wait<kInFlight>();  // step s - kInFlight's wgmmas are done: its chunk and `nxt` are free
        fence_regs(nxt);
        if (s >= kInFlight && lane == 0) release_x((g - kInFlight) % STAGES);
        if (s + 1 >= j.n) return;
        dequant<(SUB + 1) % kSteps>(nxt);  // SUB == 3: begin_block(b + 1) ran a step ago
        if (s + 2 >= j.n) return;
        if constexpr (SUB < kSteps - 2) {
            load<SUB + 2>(b);
#if QTYPE <= 1
            // SPLITDEC: super-block b's words are all loaded and groups 0-3 of its scales are
            // dead, so b + 1 opens a step early and half its scale decode leaves step 2
            if constexpr (kSplitDec && SUB == kSteps - 3)
                if (s + 3 < j.n) {
                    open_block(b + 1);
                    decode_half<0>();
                }
#endif
        } else if constexpr (SUB == kSteps - 2) {  // step s + 2 opens super-block b + 1
#if QTYPE <= 1
            if constexpr (kSplitDec) decode_half<1>();  // groups 4-7: step s dequantized the last of b's
            else
#endif
                begin_block(b + 1);
            load<0>(b + 1);
        } else {
            load<1>(b + 1);
        }
    }

    __device__ __forceinline__ void run(float* C) {
        multiply();
        finish(C);
    }

    // acc = this CTA's K range of the tile
    __device__ __forceinline__ void multiply() {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        fence_acc(acc);
        uint32_t a0[4][4], a1[4][4], a2[4][4];  // (a2: ASETS 3 only)
        if (j.n > 0) {  // (a cluster CTA can get no super-block when K has fewer than CLUSTER)
            begin_block(0);
            load<0>(0);
            dequant<0>(a0);
            load<1>(0);
            const int nb = j.n / kSteps;
            if constexpr (ASETS == 2) {
                for (int b = 0; b < nb; ++b) {  // one super-block = 4 steps, register sets alternating
                    step<0>(b, a0, a1);
                    step<1>(b, a1, a0);
                    step<2>(b, a0, a1);
                    step<3>(b, a1, a0);
                }
            } else {
                // step s multiplies set s % 3: three super-blocks (12 steps) bring the sets back to a0
                for (int b = 0; b < nb; b += 3) {
                    step<0>(b, a0, a1);
                    step<1>(b, a1, a2);
                    step<2>(b, a2, a0);
                    step<3>(b, a0, a1);
                    if (b + 1 >= nb) break;
                    step<0>(b + 1, a1, a2);
                    step<1>(b + 1, a2, a0);
                    step<2>(b + 1, a0, a1);
                    step<3>(b + 1, a1, a2);
                    if (b + 2 >= nb) break;
                    step<0>(b + 2, a2, a0);
                    step<1>(b + 2, a0, a1);
                    step<2>(b + 2, a1, a2);
                    step<3>(b + 2, a2, a0);
                }
            }
            wgmma_wait<0>();
            fence_acc(acc);
            fence_regs(a0);
            fence_regs(a1);
            if constexpr (ASETS == 3) fence_regs(a2);
            // the last kInFlight chunks are read too: the next tile's producer refills their slots (PERSIST, STREAMK)
            if ((PERSIST || STREAMK) && lane == 0) {
                if (kInFlight == 2 && j.n >= 2) release_x(j.ring_step(j.n - 2) % STAGES);
                release_x(j.ring_step(j.n - 1) % STAGES);
            }
        }
    }

    __device__ __forceinline__ void finish(float* C) {
#if CLUSTER == 1
        // timing probe 2: the stores skipped, behind a test the compiler cannot fold (K is a multiple of 256,
        // never 7), so the accumulators stay live and the loop with them
        if (PROBE == 2 && j.K != 7) return;
        if constexpr (BF16_OUTPUT && kStagedEpi)
            store_tile_bf16_staged(acc, reinterpret_cast<uint16_t*>(C), j.M, j.T, j.row0, j.tok0, sm.epi);
        else if constexpr (BF16_OUTPUT) store_tile_bf16(acc, reinterpret_cast<uint16_t*>(C), j.M, j.T, j.row0, j.tok0);
        else store_tile(acc, C, j.M, j.T, j.row0, j.tok0);
        if constexpr (MCAST > 1) cluster_sync();  // the other CTAs still arrive on this one's barriers until then
#else
        // [float4 i][consumer thread]: a warp's 16-byte accesses are consecutive
        float4* part = reinterpret_cast<float4*>(sm.x) + threadIdx.x;
        const uint32_t rank = cluster_rank();
        if (rank != 0) {
            // The other warpgroup may still multiply its last steps from the ring (it can trail by up to
            // STAGES steps): wait for every consumer warp before overwriting it. Without this the partial
            // sums raced that warpgroup's reads: runs 19-20 and 49's unwritten tiles (none since, run 52).
            consumer_sync();
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
                part[i * kConsumerThreads] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
        }
        cluster_sync();  // the partial sums are written
        if (rank == 0) {
#pragma unroll 1
            for (uint32_t r = 1; r < CLUSTER; ++r)
#pragma unroll
                for (int i = 0; i < BN / 8; ++i) {
                    const float4 v = ld_cluster_f4(part + i * kConsumerThreads, r);
                    acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
                }
            store_tile(acc, C, j.M, j.T, j.row0, j.tok0);  // blockIdx.z = 0: C itself
        }
        cluster_sync();  // the other CTAs keep their shared memory until the leader has read it
#endif
    }

#if STREAMK
    // Stream-K: acc holds this CTA's piece of a tile that `count` shared CTAs hold in pieces; `mine` is this
    // CTA's workspace slot for it and `slot_of(k)` the k-th sharer's. Publish the piece, count in; the last
    // to arrive adds all pieces in CTA order (the same sum whoever is last) and stores the tile.
    template <class SlotOf>
    __device__ __forceinline__ void finish_piece(float* C, float* work, int* counter, int count, int mine,
                                                 SlotOf slot_of) {
        if (count == 1) {  // a whole tile after all
            store_tile(acc, C, j.M, j.T, j.row0, j.tok0);
            return;
        }
        constexpr int kSlotF4 = kConsumerThreads * BN / 8;  // [float4 i][consumer thread], as the cluster's
        float4* const col = reinterpret_cast<float4*>(work) + threadIdx.x;
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
            col[static_cast<size_t>(mine) * kSlotF4 + i * kConsumerThreads] =
                make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
        __threadfence();  // the piece is in L2 before the count says so
        consumer_sync();
        __shared__ int last;
        if (threadIdx.x == 0) {
            last = atomicAdd(counter, 1) == count - 1;
            if (last) *counter = 0;  // every piece is in: ready for the next launch
            __threadfence();
        }
        consumer_sync();
        if (!last) return;
        // every piece from L2, this CTA's too, in CTA order into acc; 8 float4 per pass over the pieces, so
        // the loads in flight stay at 32 registers (all 32 hoisted ahead spill the accumulators)
        constexpr int kGroup = 8;
        static_assert((BN / 8) % kGroup == 0, "whole groups of a thread's float4");
#pragma unroll
        for (int i0 = 0; i0 < BN / 8; i0 += kGroup) {
#pragma unroll 1
            for (int k = 0; k < count; ++k) {
                const float4* piece = col + static_cast<size_t>(slot_of(k)) * kSlotF4;
#pragma unroll
                for (int i = i0; i < i0 + kGroup; ++i) {
                    const float4 v = __ldcg(piece + i * kConsumerThreads);
                    if (k == 0) acc[4 * i] = v.x, acc[4 * i + 1] = v.y, acc[4 * i + 2] = v.z, acc[4 * i + 3] = v.w;
                    else acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
                }
            }
        }
        store_tile(acc, C, j.M, j.T, j.row0, j.tok0);
    }

#endif

    // the consumer warps only (named barrier 1; the producer warpgroup has left by now)
    __device__ __forceinline__ void consumer_sync() const {
        asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
    }
};

#if STREAMK
// The shared part of a stream-K grid: `sk` CTAs over `units` (tile, super-block) units, `nsb` per tile.
// (32-bit arithmetic, which inlines: a 64-bit division is a call, and the accumulators live across it
// would spill; the launcher keeps (sk + 1) units < 2^31)
struct StreamK {
    int sk, nsb, units;
    __device__ __forceinline__ int start(int c) const { return c * units / sk; }
    // the CTA whose units hold unit u (every CTA has at least one: the launcher keeps sk <= units)
    __device__ __forceinline__ int owner(int u) const {
        int c = u * sk / units;
        while (start(c + 1) <= u) ++c;
        return c;
    }
    // CTA c's workspace slot for its piece of tile r: 0 for the tile its units begin in, 1 for the next
    __device__ __forceinline__ int slot(int c, int r) const { return 2 * c + (start(c) / nsb == r ? 0 : 1); }
};
#endif

}  // namespace mmqrs

using namespace mmqrs;

#if STREAMK
// One CTA of a stream-K grid (sk_ctas > 0), both roles: a whole tile below gridDim.x - sk_ctas, else its
// pieces of the shared tiles, one after the other. Each role takes its registers first and keeps to its own
// branch (ptxas gives a region the setmaxnreg count that dominates it).
__device__ __forceinline__ void run_stream_k(const Smem& sm, const uint8_t* W, const void* X, float* C, int M, int T,
                                             int K, long long row_bytes, float* work, int* counters, int sk_ctas) {
    const int tiles_x = (T + BN - 1) / BN, tiles_y = (M + BM - 1) / BM, nsb = K / 256;
    const int dp = static_cast<int>(gridDim.x) - sk_ctas, c = static_cast<int>(blockIdx.x) - dp;
    const StreamK s{sk_ctas, nsb, (tiles_x * tiles_y - dp) * nsb};
    auto job_at = [&](int t, int b0, int nb, int sb0) {  // launch-order tile t, its super-blocks [b0, b0 + nb)
        const int tx = RASTER ? t / tiles_y : t % tiles_x, ty = RASTER ? t % tiles_y : t / tiles_x;
        return Job{W, X, ty * BM, tx * BN, M, T, K, b0, nb * kSteps, static_cast<size_t>(row_bytes), sb0, tx};
    };
    // the CTA's pieces: (tile relative to dp, first super-block, super-blocks, ring steps before it)
    auto for_each_piece = [&](auto&& body) {
        const int u1 = s.start(c + 1);
        for (int u = s.start(c), sb0 = 0; u < u1;) {
            const int r = u / nsb, b0 = u % nsb, nb = min(nsb - b0, u1 - u);
            body(r, job_at(dp + r, b0, nb, sb0));
            u += nb;
            sb0 += nb;
        }
    };
    if (threadIdx.x >= kConsumerThreads) {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        const int tid = threadIdx.x - kConsumerThreads;
        if (c < 0) produce_job(sm, job_at(static_cast<int>(blockIdx.x), 0, nsb, 0), tid);  // a whole tile, rings from 0
        else for_each_piece([&](int, const Job& job) { produce_job(sm, job, tid); });
    } else {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
        const int lane = threadIdx.x & 31, r0 = 16 * static_cast<int>(threadIdx.x >> 5) + (lane >> 2);
        if (c < 0) {
            const Job job = job_at(static_cast<int>(blockIdx.x), 0, nsb, 0);
            Consumer{sm, job, {}, {}, {}, {}, {}, r0, lane & 3, lane}.run(C);
        } else {
            for_each_piece([&](int r, const Job& job) {
                // (who shares the tile is worked out before the accumulators are live)
                const int first = s.owner(r * nsb), count = s.owner((r + 1) * nsb - 1) - first + 1;
                const int mine = s.slot(c, r);
                Consumer cons{sm, job, {}, {}, {}, {}, {}, r0, lane & 3, lane};
                cons.multiply();
                // the sharers after the first begin inside tile r (their piece 0), the first maybe before it
                const int first_slot = s.slot(first, r);
                cons.finish_piece(C, work, counters + r, count, mine,
                                  [=](int k) { return k ? 2 * (first + k) : first_slot; });
            });
        }
    }
}
#endif

// Arguments as mmq_wgmma_gemm's, but X by XLOAD (see Job); kThreadsRs threads per CTA (consumers first,
// producer last).
extern "C" __global__ void __launch_bounds__(kThreadsRs, MIN_BLOCKS)
#if CLUSTER > 1
__cluster_dims__(1, 1, CLUSTER)  // the launcher's grid has gridDim.z = CLUSTER
#elif MCAST > 1 && RASTER
__cluster_dims__(MCAST, 1, 1)  // weight-row tiles along x: the launcher rounds gridDim.x up to a multiple
#elif MCAST > 1
__cluster_dims__(1, MCAST, 1)  // the launcher rounds gridDim.y up to a multiple of MCAST
#endif
mmq_wgmma_gemm(const uint8_t* __restrict__ W, const void* __restrict__ X, float* __restrict__ C, int M, int T,
               int K, long long row_bytes
#if STREAMK
               , float* __restrict__ work, int* __restrict__ counters, int sk_ctas  // sk_ctas 0: the plain grid
#endif
) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* smem = align_smem(smem_raw);
    uint8_t* raw = smem + STAGES * kXChunk;
    uint8_t* predec = raw + RAW * kRawWBytes + kBarBytes;  // (PREDEC only)
    const Smem sm{smem, raw, reinterpret_cast<Bars*>(raw + RAW * kRawWBytes), reinterpret_cast<uint64_t*>(predec),
                  reinterpret_cast<uint4*>(predec + 128), predec + kPreDecBytes};
    if constexpr (PDL >= 2) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // the reduce may start
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(&sm.bars->xfull[i], kXByCopyEngine ? 1 : kXThreads);
            mbar_init(&sm.bars->xempty[i], 4 * kConsumers * MCAST);  // consumer warps of every CTA sharing it
        }
        for (int i = 0; i < RAW; ++i) {
            mbar_init(&sm.bars->rawfull[i], kRawThreads);
            mbar_init(&sm.bars->rawempty[i], 4 * kConsumers);
            if constexpr (kPreDec) mbar_init(&sm.scfull[i], kDecThreads);
        }
        // in a cluster the copy engine's complete_tx addresses the barriers through the cluster
        // window: make the inits visible there before any copy is issued
        if constexpr (kInCluster) asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if constexpr (kInCluster) cluster_sync();  // (also: every CTA of the cluster has started)
    else __syncthreads();
#if STREAMK
    if (sk_ctas > 0) {
        run_stream_k(sm, W, X, C, M, T, K, row_bytes, work, counters, sk_ctas);
        return;
    }
#endif

    int kb_begin, kb_end;
    split_range(K / 256, kb_begin, kb_end);
    const int n = (kb_end - kb_begin) * kSteps;
    // The CTA's tiles: its own (blockIdx.x, blockIdx.y), or with PERSIST every (gridDim.x gridDim.y)-th
    // of the launch order (RASTER's) from its own -- the same one tile when the launcher gives the
    // plain grid (split K), several when it launches fewer CTAs than tiles. `it` counts them, so the
    // rings' step count is it * n.
    const int tiles_x = (T + BN - 1) / BN, tiles_y = (M + BM - 1) / BM, n_tiles = PERSIST ? tiles_x * tiles_y : 1;
    auto job_of = [&](int t, int it) {
        const int bx = static_cast<int>(blockIdx.x), by = static_cast<int>(blockIdx.y);
        const int tx = PERSIST ? (RASTER ? t / tiles_y : t % tiles_x) : (RASTER ? by : bx);
        const int ty = PERSIST ? (RASTER ? t % tiles_y : t / tiles_x) : (RASTER ? bx : by);
        return Job{W, X, ty * BM, tx * BN, M, T, K, kb_begin, n, static_cast<size_t>(row_bytes), it * (kb_end - kb_begin), tx};
    };
    const int t0 = PERSIST ? static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x) : 0;
    const int dt = PERSIST ? static_cast<int>(gridDim.x * gridDim.y) : 1;
    if (threadIdx.x >= kConsumerThreads) {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        const int tid = threadIdx.x - kConsumerThreads;
        for (int t = t0, it = 0; t < n_tiles; t += dt, ++it) produce_job(sm, job_of(t, it), tid);
        if constexpr (CLUSTER > 1) {  // the consumers' two cluster barriers count every thread
            cluster_sync();
            cluster_sync();
        } else if constexpr (MCAST > 1) {
            cluster_sync();
        }
    } else {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
        const int lane = threadIdx.x & 31;
        for (int t = t0, it = 0; t < n_tiles; t += dt, ++it) {
            const Job job = job_of(t, it);
            Consumer c{sm, job, {}, {}, {}, {}, {}, 16 * static_cast<int>(threadIdx.x >> 5) + (lane >> 2), lane & 3, lane};
            c.run(C);
        }
    }
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_wgmma_splitk_reduce)

// The activation pass of XLOAD = 1: f32 [T, K] -> f16 chunks [token tile][K / 64][BN rows x 128 B],
// each chunk already in the 128B-swizzled order the wgmma reads (16-byte unit c of row t at
// c ^ (t & 7)), tokens past T zero. One thread writes one 16-byte unit; f16 as f32_to_f16 rounds.
extern "C" __global__ void f32_to_f16_tiled(const float* __restrict__ x, uint4* __restrict__ y, int T, int K) {
    MMQ_LAUNCH_DEPENDENTS();
    const int steps = K / 64;
    const long long n = static_cast<long long>((T + BN - 1) / BN) * BN * K / 8;
    for (long long o = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; o < n;
         o += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long r = o >> 3;  // (tile * steps + kc) * BN + t
        const int t = static_cast<int>(r % BN), kc = static_cast<int>((r / BN) % steps);
        const int tok = static_cast<int>(r / (static_cast<long long>(BN) * steps)) * BN + t;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (tok < T) {
            const float4* p = reinterpret_cast<const float4*>(x + static_cast<size_t>(tok) * K + kc * 64 +
                                                              ((static_cast<int>(o & 7) ^ (t & 7)) << 3));
            const float4 a = p[0], b = p[1];
            v = make_uint4(mmq::pack_h2(a.x, a.y), mmq::pack_h2(a.z, a.w), mmq::pack_h2(b.x, b.y),
                           mmq::pack_h2(b.z, b.w));
        }
        y[o] = v;
    }
}

extern "C" __constant__ int mmq_wgmma_smem_bytes = kSmemRs;

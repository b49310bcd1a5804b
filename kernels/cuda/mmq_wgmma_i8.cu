// Hopper (sm_90a) int8 MMQ on warpgroup tensor cores (lever `wgmma_i8`): ggml weight blocks
// unpacked straight into int8 wgmma A registers, Q8_1 activations as wgmma B from shared memory,
// `wgmma.mma_async ... m64nNk32.s32.s8.s8`, and mmq_base's per-32 rescale in f32.
//
//   C[T, M] = X[T, K] . W[M, K]^T,  W in ggml blocks, X quantized to Q8_1 by a timed pass.
//
// Math contract: mmq_base's (mmq_core.cuh), so the parity gate's tight check applies. Per 32-block j:
//   C[t,m] += d_x[t,j] * (sw[m,j] * I[t,m,j] - mn[m,j] * s_x[t,j]),  I = sum_k q_w q_x  (exact in s32)
// Each 32-block needs its own integer dot: d_x changes per block and token (Q8_1), so dots of two
// blocks cannot be summed in s32 before their scales are applied -- the integer sub-block scales
// of q4_K/q5_K/q8_0 cannot be folded across blocks. What folds exactly is q6_K's pair of 16-wide
// scales inside one 32-block (one d_x): I = sc_lo I_lo + sc_hi I_hi in s32, then one conversion.
// |I_half| <= 16 * 32 * 127 = 65024 (q6 in -32..31, q8 in -127..127), |sc| <= 128, so
// |I| <= 2 * 128 * 65024 = 16646144 < 2^24: no s32 overflow, and the f32 conversion is exact.
// q6_K gets I_lo and I_hi from two k32 wgmmas on the same B with half of A zeroed (A's registers
// a0, a1 hold k 0..15 of the block, a2, a3 k 16..31): tensor work doubles, which costs nothing
// here because the rescale, not the tensor core, bounds this kernel.
//
// Rescale per accumulator element and 32-block (why this kernel is expected to be slower than the
// f16 one): I2FP (s32 -> f32, ALU pipe), FMUL (sw * d_x), FFMA into the f32 accumulator, and for
// q4_K/q5_K one more FFMA for the weight-min rank-1 term (-mn * d_x s_x); q6_K adds two IMADs.
//
// Activations: one pass (quantize_q8_1_tiled below, the standalone quantizer's per-lane code from
// q8_1.cuh, so the same Q8_1 bytes) writes per (token tile, 128-k step) a contiguous chunk of
// BN token rows x 128 int8, already 128B-swizzled as wgmma B, and a chunk of the 4 blocks' token
// scales in the order the consumers read them: float4 (d[t], d[t+1], d s[t], d s[t+1]) per
// (block, n8 tile, tq). One thread brings both chunks with two bulk copies (the TMA engine).
//
// Pipeline (mbarriers; producer warpgroup + BM / 64 consumer warpgroups), as mmq_wgmma_rs.cu:
//   xfull[s]/xempty[s]     STAGES activation stages (q chunk + scale chunk of one 128-k step);
//   rawfull[b]/rawempty[b] RAW raw super-block slots (BM rows x 256 k of ggml bytes, cp.async).
//   consumer, per 32-block: wgmma (A regs of this block), unpack the next block's A while it runs,
//   wait, rescale. Two consumer warps share each scheduler, so one's rescale covers the other's
//   wgmma latency.
//
// Fragment layout (m16n8k32 A, one warp = 16 rows of its warpgroup's 64): lane (g = lane / 4,
// tq = lane % 4) holds a0 = row g, k 4tq..4tq+3; a1 = row g+8; a2 = row g, k 16+4tq..+3; a3 =
// row g+8 -- exactly mmq_core's unpack_word words 8j + tq and 8j + 4 + tq of block j.
//
// Compile-time parameters: QTYPE, BM = 64 x consumer warpgroups, BN (tokens), STAGES 2..4,
// RAW 2..6, NSPLIT (token parts per block: each part is one wgmma group and BN / (2 NSPLIT)
// s32 registers; q6_K splits each part again into two), MIN_BLOCKS.
#include "wgmma_ring.cuh"
#include "wgmma_s8_ops.cuh"
#include "q8_1.cuh"

#ifndef NSPLIT
#define NSPLIT 1
#endif

namespace mmqi8 {

using namespace mmq;
using mmqwg::kAlign;
using mmqwg::swz;

constexpr int kStepK = 128;                 // k per step: one 128-byte swizzled row of int8
constexpr int kStepsPerSb = 256 / kStepK;   // 2 steps per super-block
constexpr int kQChunk = BN * kStepK;        // activation q of one step: BN rows x 128 B
constexpr int kSChunk = BN * 32;            // token scales of one step: 4 blocks x BN x (d, d s)
constexpr int kStage = kQChunk + kSChunk;
constexpr int kConsumers = BM / 64;
constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kThreadsI8 = kConsumerThreads + 128;
constexpr int kRawThreads = 96;  // producer warps 1-3; warp 0's lane 0 issues the activation copies
constexpr int kBarBytes = 256;
constexpr int kSmemI8 = kAlign + STAGES * kStage + RAW * kRawWBytes + kBarBytes;

constexpr bool kQ6 = QTYPE == 2;
constexpr int kParts = NSPLIT * (kQ6 ? 2 : 1);    // wgmma groups per block, one per token part
constexpr int kW = BN / kParts;                   // their N
constexpr int kIRegs = kQ6 ? kW : kW / 2;         // s32 registers of one part (q6_K: lo, then hi)

static_assert(kThreads == kConsumerThreads, "WARPS_M = BM / 16: the consumers' warps");
static_assert(STAGES >= 2 && STAGES <= 4, "STAGES must be 2..4");
static_assert(RAW >= 2 && RAW <= 6, "RAW must be 2..6");
static_assert(NSPLIT == 1 || NSPLIT == 2 || NSPLIT == 4, "NSPLIT must be 1, 2 or 4");
static_assert(BN % kParts == 0 && kW % 8 == 0, "each token part is a wgmma N (a multiple of 8)");
static_assert((STAGES * kQChunk) % kAlign == 0, "q chunks keep their 1024-byte swizzle alignment");
constexpr bool kMoveRegs = (kConsumers == 2 && MIN_BLOCKS == 1);
constexpr int kProducerRegs = 56, kConsumerRegs = 224;
static_assert(!kMoveRegs || mmqwg::register_split_fits(kProducerRegs, kConsumerRegs, kConsumerThreads), "register file");

using mmqwg::Bars;
static_assert(sizeof(Bars) <= kBarBytes, "barriers overflow their smem slot");

struct Smem {
    uint8_t* xq;   // STAGES q chunks (1024-aligned, swizzled)
    uint8_t* xs;   // STAGES scale chunks
    uint8_t* raw;  // RAW raw super-block slots
    Bars* bars;
};

struct Job {
    const uint8_t* W;
    const uint8_t* Xq;  // [token tile][K / 128][kQChunk]
    const uint8_t* Xs;  // [token tile][K / 128][kSChunk]
    int row0, tok0, M, T, K, kb_begin, n;  // n: 128-k steps of this CTA, from super-block kb_begin
    size_t rb;
};

// ---- the producer warpgroup: copies only (raw slots: wgmma_ring.cuh) ----

__device__ __forceinline__ void produce_x(const Smem& sm, const Job& j) {
    const size_t tile = static_cast<size_t>(blockIdx.x) * (j.K / kStepK);
    const int kc0 = j.kb_begin * kStepsPerSb;
    for (int f = 0; f < j.n; ++f) {
        const int st = f % STAGES;
        if (f >= STAGES) mmqwg::mbar_wait(&sm.bars->xempty[st], ((f / STAGES) - 1) & 1);
        mmqwg::mbar_arrive_expect_tx(&sm.bars->xfull[st], kStage);
        const size_t chunk = tile + kc0 + f;
        mmqwg::bulk_copy_g2s(sm.xq + st * kQChunk, j.Xq + chunk * kQChunk, kQChunk, &sm.bars->xfull[st]);
        mmqwg::bulk_copy_g2s(sm.xs + st * kSChunk, j.Xs + chunk * kSChunk, kSChunk, &sm.bars->xfull[st]);
    }
}

// ---- the consumers ----

// The weight side of one 32-block for the thread's rows g (index 0) and g + 8 (index 1).
struct RowScale {
#if QTYPE == 2
    float d[2];        // the super-block's d
    int lo[2], hi[2];  // int8 scales of the block's two 16-wide halves
#else
    float sw[2], mn[2];  // group scale and min, as the dequantizer computes them (mn = 0: no min)
#endif
};

__device__ __forceinline__ void row_scale(const uint8_t* const (&blk)[2], int jb, RowScale& r) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
#if QTYPE == 2
        r.d[rr] = f16_at(blk[rr] + 208);
        r.lo[rr] = static_cast<int8_t>(blk[rr][192 + 2 * jb]);
        r.hi[rr] = static_cast<int8_t>(blk[rr][193 + 2 * jb]);
#else
        group_scale(blk[rr], jb, r.sw[rr], r.mn[rr]);
#endif
    }
}

// Keep registers that an in-flight wgmma reads or writes where they are (the compiler does not
// know the asm's operands live on after it).
__device__ __forceinline__ void fence_a(uint32_t (&a)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i])::"memory");
}
__device__ __forceinline__ void fence_i(int (&v)[kIRegs]) {
#pragma unroll
    for (int i = 0; i < kIRegs; ++i) asm volatile("" : "+r"(v[i])::"memory");
}

struct Consumer {
    const Smem& sm;
    const Job& j;
    float acc[BN / 2];
    int dot[kIRegs];         // one token part's integer dots (q6_K: lo halves, then hi halves)
    const uint8_t* blk[2];   // rows g, g + 8 of the super-block in its raw slot
    int r0, tq, lane;        // r0: CTA-local row of the thread's g

    __device__ __forceinline__ void begin_block(int b) {
        mmqwg::mbar_wait(&sm.bars->rawfull[b % RAW], (b / RAW) & 1);
        const uint8_t* slot = sm.raw + (b % RAW) * kRawWBytes;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) blk[rr] = raw_block(slot, r0 + 8 * rr, j.row0, j.M, j.kb_begin + b, j.rb);
    }

    // The A fragment of 32-block jb (0..7) of the current super-block (int8 codes: q4_K/q5_K
    // unsigned 0..15 / 0..31, q6_K q - 32, q8_0 as stored; all fit s8).
    __device__ __forceinline__ void unpack(uint32_t (&a)[4], int jb) const {
        a[0] = unpack_word(blk[0], 8 * jb + tq);
        a[1] = unpack_word(blk[1], 8 * jb + tq);
        a[2] = unpack_word(blk[0], 8 * jb + 4 + tq);
        a[3] = unpack_word(blk[1], 8 * jb + 4 + tq);
    }

    // Token part P of the block: wgmma(s) on the part's kW tokens (B rows P kW ..), one group.
    template <int P>
    __device__ __forceinline__ void issue(const uint32_t (&a)[4], uint32_t b_addr) {
        const uint64_t desc = mmqwg::smem_desc(b_addr + P * kW * 128);  // whole 8-row atoms: 1024-aligned
        mmqwg::wgmma_fence();
#if QTYPE == 2
        const uint32_t lo[4] = {a[0], a[1], 0u, 0u}, hi[4] = {0u, 0u, a[2], a[3]};
        wg::wgmma_s8_rs<kW>(dot, lo, desc);
        wg::wgmma_s8_rs<kW>(dot + kW / 2, hi, desc);
#else
        wg::wgmma_s8_rs<kW>(dot, a, desc);
#endif
        mmqwg::wgmma_commit();
    }

    // acc += d_x (sw I - mn s_x) for the part's elements; xs: the block's float4 token scales.
    template <int P>
    __device__ __forceinline__ void rescale(const RowScale& r, const float4* xs) {
#pragma unroll
        for (int ii = 0; ii < kW / 8; ++ii) {
            const int i = P * (kW / 8) + ii;  // n8 tile of the CTA tile
            const float4 x = xs[4 * i + tq];  // (d[t], d[t + 1], d s[t], d s[t + 1]), t = 8 i + 2 tq
            float* o = acc + 4 * i;
#pragma unroll
            for (int v = 0; v < 4; ++v) {  // v: (row g, t), (g, t + 1), (g + 8, t), (g + 8, t + 1)
                const int rr = v >> 1;
                const float dx = (v & 1) ? x.y : x.x;
#if QTYPE == 2
                const int folded = r.lo[rr] * dot[4 * ii + v] + r.hi[rr] * dot[kW / 2 + 4 * ii + v];  // |.| < 2^24
                o[v] = fmaf(r.d[rr] * dx, __int2float_rn(folded), o[v]);
#else
                o[v] = fmaf(r.sw[rr] * dx, __int2float_rn(dot[4 * ii + v]), o[v]);
                if constexpr (kHasMin) o[v] = fmaf(-r.mn[rr], (v & 1) ? x.w : x.z, o[v]);
#endif
            }
        }
    }

    // Part P of block jj of step s: issue, (part 0: prepare the next block's A while it runs),
    // wait, rescale.
    template <int P, int JJ>
    __device__ __forceinline__ void part(int s, const RowScale& r, uint32_t (&cur)[4], uint32_t (&nxt)[4],
                                         uint32_t b_addr, const float4* xs) {
        issue<P>(cur, b_addr);
        if constexpr (P == 0) {
            const int jb = 4 * (s % kStepsPerSb) + JJ;  // block within the super-block
            const bool more = JJ < 3 || s + 1 < j.n;
            if (jb == 7) {  // the super-block's last reads are done: its raw slot may refill
                __syncwarp();
                if (lane == 0) mmqwg::mbar_arrive(&sm.bars->rawempty[(s / kStepsPerSb) % RAW]);
                if (more) begin_block(s / kStepsPerSb + 1);
            }
            if (more) unpack(nxt, (jb + 1) & 7);
        }
        mmqwg::wgmma_wait<0>();
        fence_i(dot);
        rescale<P>(r, xs);
    }

    template <int JJ>
    __device__ __forceinline__ void block(int s, uint32_t (&cur)[4], uint32_t (&nxt)[4], uint32_t q_addr,
                                          const float4* xs) {
        RowScale r;
        row_scale(blk, 4 * (s % kStepsPerSb) + JJ, r);  // before the slot can be released
        const uint32_t b_addr = q_addr + 32 * JJ;        // k32 = 32 bytes along the swizzled row
        const float4* xb = xs + JJ * (BN / 8) * 4;
        part<0, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 1) part<1, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 2) part<2, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 3) part<3, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 4) part<4, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 5) part<5, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 6) part<6, JJ>(s, r, cur, nxt, b_addr, xb);
        if constexpr (kParts > 7) part<7, JJ>(s, r, cur, nxt, b_addr, xb);
        fence_a(cur);  // its wgmmas are done: free for the block after next
    }

    __device__ __forceinline__ void run(float* C) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        if (j.n > 0) {
            uint32_t a0[4], a1[4];
            begin_block(0);
            unpack(a0, 0);
            for (int s = 0; s < j.n; ++s) {  // 4 blocks per step: the A register sets alternate
                const int st = s % STAGES;
                mmqwg::mbar_wait(&sm.bars->xfull[st], (s / STAGES) & 1);
                const uint32_t q_addr = smem_addr(sm.xq) + st * kQChunk;
                const float4* xs = reinterpret_cast<const float4*>(sm.xs + st * kSChunk);
                block<0>(s, a0, a1, q_addr, xs);
                block<1>(s, a1, a0, q_addr, xs);
                block<2>(s, a0, a1, q_addr, xs);
                block<3>(s, a1, a0, q_addr, xs);
                __syncwarp();  // the warp's wgmmas and scale loads of this stage are done
                if (lane == 0) mmqwg::mbar_arrive(&sm.bars->xempty[st]);
            }
        }
        mmqwg::store_tile(acc, C, j.M, j.T, j.row0, j.tok0);
    }
};

}  // namespace mmqi8

using namespace mmqi8;

// W: ggml rows of row_bytes; Xq, Xs: the tiled activations of quantize_q8_1_tiled; C [T, M]
// (split z: C + z T M, summed by mmq_wgmma_i8_splitk_reduce). kThreadsI8 threads per CTA
// (consumers first, producer last); grid (token tiles, row tiles, K splits).
extern "C" __global__ void __launch_bounds__(kThreadsI8, MIN_BLOCKS)
mmq_wgmma_i8_gemm(const uint8_t* __restrict__ W, const uint8_t* __restrict__ Xq, const uint8_t* __restrict__ Xs,
                  float* __restrict__ C, int M, int T, int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* smem = mmqwg::align_smem(smem_raw);
    uint8_t* raw = smem + STAGES * kStage;
    const Smem sm{smem, smem + STAGES * kQChunk, raw, reinterpret_cast<Bars*>(raw + RAW * kRawWBytes)};
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mmqwg::mbar_init(&sm.bars->xfull[i], 1);
            mmqwg::mbar_init(&sm.bars->xempty[i], 4 * kConsumers);
        }
        for (int i = 0; i < RAW; ++i) {
            mmqwg::mbar_init(&sm.bars->rawfull[i], kRawThreads);
            mmqwg::mbar_init(&sm.bars->rawempty[i], 4 * kConsumers);
        }
    }
    __syncthreads();

    int kb_begin, kb_end;
    mmqwg::split_range(K / 256, kb_begin, kb_end);
    const Job job{W, Xq, Xs, static_cast<int>(blockIdx.y) * BM, static_cast<int>(blockIdx.x) * BN, M, T, K,
                  kb_begin, (kb_end - kb_begin) * kStepsPerSb, static_cast<size_t>(row_bytes)};
    if (threadIdx.x >= kConsumerThreads) {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        const int tid = threadIdx.x - kConsumerThreads;
        if (tid == 0) produce_x(sm, job);
        else if (tid >= 32)
            mmqwg::produce_raw_slots(sm.raw, sm.bars, tid - 32, kRawThreads, job.n / kStepsPerSb, job.W, job.row0,
                                     job.M, job.kb_begin, job.rb);
    } else {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
        const int lane = threadIdx.x & 31;
        Consumer c{sm, job, {}, {}, {}, 16 * static_cast<int>(threadIdx.x >> 5) + (lane >> 2), lane & 3, lane};
        c.run(C);
    }
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_wgmma_i8_splitk_reduce)

// The activation pass: float32 x [T, K] -> Q8_1 in the kernel's tiled layout, for tokens
// 0 .. ceil(T / BN) BN - 1 (tokens past T: zeros). Four lanes quantize one 32-block, 8 values
// each, with q8_1.cuh's quad code (the standalone quantizer's: the same q, d and s bytes).
//   Xq [tile][K / 128][BN rows x 128 B]: token row r of a tile, byte k of a step at swz(r, k / 16) + k % 16;
//   Xs [tile][K / 32][BN / 8][4 tq] float4 (d[t], d[t + 1], d s[t], d s[t + 1]), t = 8 i + 2 tq.
// Launch: 256 threads, ceil(4 * tokens * K / 32 / 256) CTAs (no grid-stride: a quad's shuffles need
// all its lanes; quads never straddle a warp).
extern "C" __global__ void __launch_bounds__(256)
quantize_q8_1_tiled(const float* __restrict__ x, uint8_t* __restrict__ Xq, float* __restrict__ Xs, int T, int K) {
    const int blocks = K / 32;
    const long long lanes = static_cast<long long>((T + BN - 1) / BN) * BN * blocks * 4;
    const long long lane = static_cast<long long>(blockIdx.x) * 256 + threadIdx.x;
    const long long id = lane >> 2;  // (token, block)
    const int qq = static_cast<int>(lane & 3);
    const int t = static_cast<int>(id / blocks), b = static_cast<int>(id % blocks);
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (lane < lanes && t < T) mmq::load8(x + static_cast<size_t>(t) * K + 32 * b + 8 * qq, v);
    const float d = mmq::quad_scale(v);
    uint32_t packed[2];
    const int s = mmq::quad_quantize(v, d, packed);
    if (lane >= lanes) return;
    const int tile = t / BN, r = t % BN;
    const int k = 32 * (b % 4) + 8 * qq;  // byte within the step's 128-byte row
    uint8_t* q = Xq + (static_cast<size_t>(tile) * (K / kStepK) + b / 4) * kQChunk + swz(r, k >> 4) + (k & 8);
    *reinterpret_cast<uint2*>(q) = make_uint2(packed[0], packed[1]);
    if (qq == 0) {
        float* sc = Xs + (static_cast<size_t>(tile) * blocks + b) * (BN * 2) + ((r >> 3) * 4 + ((r & 7) >> 1)) * 4 + (r & 1);
        sc[0] = d;
        sc[2] = mmq::mul_rn(d, static_cast<float>(s));
    }
}

extern "C" __constant__ int mmq_wgmma_i8_smem_bytes = kSmemI8;

// Hopper (sm_90a) quantized GEMM: weights dequantized once per tile into shared memory as f16
// with their scales applied, then warpgroup MMA (wgmma.mma_async, both operands from shared
// memory) with f32 accumulators. The `wgmma` lever, variant (a) of its issue.
//
//   C[T, M] = X[T, K] . W[M, K]^T,  X as f16 (an f32 -> f16 pass, timed), W in ggml blocks.
//
// Precision contract: that of mmq_f16.cu (dequant16.cuh): w rounded once to f16 from the f32
// dequantizer's value (DEQ 0) or computed in f16x2 (DEQ 1); x rounded once to f16; f32 sums.
//
// Pipeline, one step per 64 k (one 128-byte row of f16, the wgmma 128B swizzle atom width):
//   raw weight super-blocks --cp.async--> 2 raw slots (loaded with the step that starts them)
//   f16 activation chunks    --cp.async--> STAGES-deep ring, written in the 128B-swizzled layout
//   step k: dequantize raw -> f16 A tile (2 buffers, swizzled) while the wgmmas of step k-1 run;
//           then 4 x wgmma m64nBNk16 per warpgroup on (A tile, activation chunk), committed async.
// Warpgroup w owns rows [64 w, 64 w + 64) of the BM-row tile and all BN tokens.
//
// Compile-time parameters: QTYPE, BM = 64 x warpgroups (WARPS_M = BM / 16, WARPS_N = 1),
// BN tokens (a wgmma N: multiple of 8, <= 256), STAGES 3..4 activation chunks, DEQ, MIN_BLOCKS.
#include "mmq_core.cuh"
#include "dequant16.cuh"
#include "wgmma_ops.cuh"

using namespace mmq;

namespace mmqwg {

constexpr int kWarpgroups = BM / 64;
constexpr int kSteps = 4;                   // 64-k steps per 256-k super-block
constexpr int kXChunk = BN * 128;           // activation chunk: BN rows x 64 f16
constexpr int kAChunk = BM * 128;           // dequantized weight chunk: BM rows x 64 f16
constexpr int kRawSlots = 2;
constexpr int kAlign = 1024;                // swizzle atoms (8 rows x 128 B) must be 1024-aligned
constexpr int kSmemWg = kAlign + STAGES * kXChunk + 2 * kAChunk + kRawSlots * kRawWBytes;
static_assert(BM % 64 == 0 && kThreads == 128 * kWarpgroups, "BM = 64 per warpgroup, WARPS_M = BM / 16");
static_assert(BN % 8 == 0 && BN <= 256, "BN must be a wgmma N: a multiple of 8 up to 256");
static_assert(STAGES >= 3 && STAGES <= 4, "STAGES (activation chunks in flight) must be 3..4");
static_assert(WARPS_N == 1, "a warpgroup spans all BN tokens");

// Byte offset of 16-byte chunk c (8 f16 = 8 k) of row r in a 128B-swizzled K-major tile: rows
// of 128 B, 8-row atoms of 1024 B, chunk index XOR row-in-atom (what the hardware reads back).
__device__ __forceinline__ int swz(int r, int c) { return (r >> 3) * 1024 + (r & 7) * 128 + ((c ^ (r & 7)) << 4); }

// Shared-memory matrix descriptor: K-major, 128B swizzle, 8-row groups 1024 B apart.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
           (1ull << 62);
}

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Tell the compiler the accumulators change under it (in flight wgmmas write them).
__device__ __forceinline__ void fence_acc(float (&acc)[BN / 2]) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

struct Smem {
    uint8_t* x;    // STAGES activation chunks
    uint8_t* a;    // 2 dequantized weight chunks
    uint8_t* raw;  // 2 raw super-block slots
};

// Issue the copies of step s (global 64-k chunk kc): its activation chunk and, when it starts
// a super-block, that super-block's raw weight rows.
__device__ __forceinline__ void issue_step(const Smem& sm, int s, int kc, const uint8_t* __restrict__ W,
                                           const __half* __restrict__ x, int row0, int tok0, int M, int T, int K,
                                           size_t row_bytes, int kb_begin) {
    uint8_t* xs = sm.x + (s % STAGES) * kXChunk;
    for (int i = threadIdx.x; i < BN * 8; i += kThreads) {
        const int t = i >> 3, c = i & 7;
        const int tok = min(tok0 + t, T - 1);  // tokens past T load the last one; never stored
        cp_async16(xs + swz(t, c), x + static_cast<size_t>(tok) * K + kc * 64 + c * 8);
    }
    if (kc % kSteps == 0) {
        const int kb = kc / kSteps;
        uint8_t* raw_w = sm.raw + ((kb - kb_begin) % kRawSlots) * kRawWBytes;
        for (int i = threadIdx.x; i < BM * kRawChunks; i += kThreads) {
            const int r = i / kRawChunks, c = i % kRawChunks;
            const int row = min(row0 + r, M - 1);
            const size_t off = w_offset(row, kb, row_bytes) & ~static_cast<size_t>(15);
            cp_async16(raw_w + r * kRawStride + c * 16, W + off + c * 16);
        }
    }
}

// Dequantize step kc's 64 k of the BM rows into the swizzled f16 tile `a`: item (row, 8-k chunk).
__device__ __forceinline__ void dequant_step(uint8_t* a, const uint8_t* raw_w, int kc, int row0, int M,
                                             size_t row_bytes) {
    const int kb = kc / kSteps, sub = kc % kSteps;
#pragma unroll
    for (int e = threadIdx.x; e < BM * 8; e += kThreads) {
        const int r = e >> 3, c = e & 7;
        const uint8_t* blk = raw_block(raw_w, r, row0, M, kb, row_bytes);
        const int k = 64 * sub + 8 * c;  // super-block-local k of the chunk's first weight
        float sw, mn;
        group_scale(blk, k / kGroupK, sw, mn);
        const uint2 lo = dequant_word(unpack_word(blk, k / 4), sw, mn);
        const uint2 hi = dequant_word(unpack_word(blk, k / 4 + 1), sw, mn);
        *reinterpret_cast<uint4*>(a + swz(r, c)) = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
}

}  // namespace mmqwg

using namespace mmqwg;

// X16: f16 [T, K]; W: ggml blocks, rows of row_bytes (buffer padded at the end);
// C: f32 [T, M] (gridDim.z == 1) or partials [z][T][M].
extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_wgmma_gemm(const uint8_t* __restrict__ W, const __half* __restrict__ X16, float* __restrict__ C, int M, int T,
               int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    const uint32_t base = smem_addr(smem_raw);
    uint8_t* smem = smem_raw + (((base + kAlign - 1) & ~(kAlign - 1)) - base);
    const Smem sm{smem, smem + STAGES * kXChunk, smem + STAGES * kXChunk + 2 * kAChunk};

    const int row0 = blockIdx.y * BM, tok0 = blockIdx.x * BN;
    const int nkb = K / 256;
    const int kb_begin = static_cast<int>((static_cast<long long>(nkb) * blockIdx.z) / gridDim.z);
    const int kb_end = static_cast<int>((static_cast<long long>(nkb) * (blockIdx.z + 1)) / gridDim.z);
    const int n = (kb_end - kb_begin) * kSteps;  // 64-k steps of this CTA
    const int kc0 = kb_begin * kSteps;
    const size_t rb = static_cast<size_t>(row_bytes);
    const int wg = threadIdx.x >> 7;

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    fence_acc(acc);

#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < n) issue_step(sm, s, kc0 + s, W, X16, row0, tok0, M, T, K, rb, kb_begin);
        cp_async_commit();
    }
    const uint32_t a_base = smem_addr(sm.a) + wg * 64 * 128;
    const uint32_t x_base = smem_addr(sm.x);
    for (int s = 0; s < n; ++s) {
        const int kc = kc0 + s;
        cp_async_wait<STAGES - 3>();  // step s landed (this thread's copies)
        wgmma_wait<1>();              // this warpgroup's step s-2 wgmmas are done
        __syncthreads();              // ... everyone's: A buffer s%2 and chunk slot (s-2)%STAGES are free
        if (s + STAGES - 2 < n)
            issue_step(sm, s + STAGES - 2, kc + STAGES - 2, W, X16, row0, tok0, M, T, K, rb, kb_begin);
        cp_async_commit();

        dequant_step(sm.a + (s & 1) * kAChunk, sm.raw + ((kc / kSteps - kb_begin) % kRawSlots) * kRawWBytes, kc,
                     row0, M, rb);
        fence_proxy_async();  // generic-proxy stores -> visible to the wgmma (async proxy) reads
        __syncthreads();

        wgmma_fence();
        const uint32_t a_addr = a_base + (s & 1) * kAChunk;
        const uint32_t x_addr = x_base + (s % STAGES) * kXChunk;
#pragma unroll
        for (int k16 = 0; k16 < 4; ++k16)  // +32 bytes along the swizzled row per k16
            wg::wgmma_f16<BN>(acc, smem_desc(a_addr + 32 * k16), smem_desc(x_addr + 32 * k16));
        wgmma_commit();
    }
    wgmma_wait<0>();
    fence_acc(acc);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    store_acc(reinterpret_cast<const float(&)[1][BN / 8][4]>(acc), C + static_cast<size_t>(blockIdx.z) * T * M,
              nullptr, nullptr, M, T, row0 + 16 * warp, tok0, lane >> 2, lane & 3);
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_wgmma_splitk_reduce)

extern "C" __constant__ int mmq_wgmma_smem_bytes = kSmemWg;

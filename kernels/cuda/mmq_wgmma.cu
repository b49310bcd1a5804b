// Hopper (sm_90a) quantized GEMM: weights dequantized once per tile into shared memory as f16
// with their scales applied, then warpgroup MMA (wgmma.mma_async, both operands from shared
// memory) with f32 accumulators. The `wgmma` lever, variant (a) of its issue, WS = 0: every
// warpgroup loads, dequantizes and multiplies (mmq_wgmma_ws.cu splits those roles).
//
//   C[T, M] = X[T, K] . W[M, K]^T,  X as f16 (an f32 -> f16 pass, timed), W in ggml blocks.
//
// Precision contract: that of mmq_f16.cu (dequant16.cuh): w rounded once to f16 from the f32
// dequantizer's value (DEQ 0) or computed in f16x2 (DEQ 1); x rounded once to f16; f32 sums.
//
// Pipeline, one step per 64 k (wgmma_tile.cuh):
//   raw weight super-blocks --cp.async--> 2 raw slots (loaded with the step that starts them)
//   f16 activation chunks    --cp.async--> STAGES-deep ring, written in the 128B-swizzled layout
//   step k: dequantize raw -> f16 A tile (2 buffers, swizzled) while the wgmmas of step k-1 run;
//           then 4 x wgmma m64nBNk16 per warpgroup on (A tile, activation chunk), committed async.
// Warpgroup w owns rows [64 w, 64 w + 64) of the BM-row tile and all BN tokens.
//
// Compile-time parameters: QTYPE, BM = 64 x warpgroups (WARPS_M = BM / 16, WARPS_N = 1),
// BN tokens (a wgmma N: multiple of 8, <= 256), STAGES 3..4 activation chunks, DEQ, MIN_BLOCKS.
#include "wgmma_tile.cuh"

using namespace mmqwg;

constexpr int kSmemWg = kAlign + STAGES * kXChunk + 2 * kAChunk + kRawSlots * kRawWBytes;
static_assert(kThreads == 128 * (BM / 64), "one warpgroup per 64 rows: WARPS_M = BM / 16");
static_assert(STAGES >= 3 && STAGES <= 4, "STAGES (activation chunks in flight) must be 3..4");

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
    issue_x(sm.x + (s % STAGES) * kXChunk, threadIdx.x, kThreads, x, tok0, T, K, kc);
    if (kc % kSteps == 0) {
        const int kb = kc / kSteps;
        issue_raw(sm.raw + ((kb - kb_begin) % kRawSlots) * kRawWBytes, threadIdx.x, kThreads, W, row0, M, kb,
                  row_bytes);
    }
}

// X16: f16 [T, K]; W: ggml blocks, rows of row_bytes (buffer padded at the end);
// C: f32 [T, M] (gridDim.z == 1) or partials [z][T][M].
extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_wgmma_gemm(const uint8_t* __restrict__ W, const __half* __restrict__ X16, float* __restrict__ C, int M, int T,
               int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* smem = align_smem(smem_raw);
    const Smem sm{smem, smem + STAGES * kXChunk, smem + STAGES * kXChunk + 2 * kAChunk};

    const int row0 = blockIdx.y * BM, tok0 = blockIdx.x * BN;
    int kb_begin, kb_end;
    split_range(K / 256, kb_begin, kb_end);
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
                     row0, M, rb, threadIdx.x, kThreads);
        fence_proxy_async();  // generic-proxy stores -> visible to the wgmma (async proxy) reads
        __syncthreads();

        mma_step(acc, a_base + (s & 1) * kAChunk, x_base + (s % STAGES) * kXChunk);
    }
    wgmma_wait<0>();
    fence_acc(acc);
    store_tile(acc, C, M, T, row0, tok0);
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_wgmma_splitk_reduce)

extern "C" __constant__ int mmq_wgmma_smem_bytes = kSmemWg;

// K-quant weights dequantized once per CTA tile into shared memory as f16, scales applied,
// then f16 x f16 -> f32 tensor-core GEMM (mma.sync m16n8k16): no per-group rescale in the
// inner loop. The compute-bound half of the `adaptive_format` lever (seed 000's design).
//
//   C[T, M] = X[T, K] . W[M, K]^T,  X as f16 (an f32 -> f16 pass, timed), W in ggml blocks.
//
// Precision contract: w is computed in f32 exactly as the dequantizer does (sw * u - mn), then
// rounded once to f16; x is rounded once to f16; products and sums in f32. So the error against
// float64 dequant(W).x is bounded by about 2^-11 * sum_k |w x| per output (tested).
//
// Staging and unpacking reuse mmq_core.cuh (raw weight bytes by cp.async, type decoders);
// the activation stage holds f16 rows instead of Q8_1.
#include "mmq_core.cuh"
#include "dequant16.cuh"

using namespace mmq;

namespace mmq16 {

constexpr int kXStride = 512 + 32;            // bytes per token row of 256 f16 (+32: 8 mod 32 words)
constexpr int kXBytes = BN * kXStride;        // per stage
constexpr int kStage16 = kRawWBytes + kXBytes;
constexpr int kWfrag16Bytes = BM * 512;       // [BM/16][16 k16 steps][32 lanes] x uint4 (a0..a3)
constexpr int kSmem16 = STAGES * kStage16 + kWfrag16Bytes;

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void issue_stage16(uint8_t* stage, const uint8_t* __restrict__ W,
                                              const __half* __restrict__ x, int row0, int tok0, int M, int T,
                                              int K, size_t row_bytes, int kb) {
    uint8_t* raw_w = stage;
    uint8_t* xs = stage + kRawWBytes;
    for (int i = threadIdx.x; i < BM * kRawChunks; i += kThreads) {
        const int r = i / kRawChunks, c = i % kRawChunks;
        const int row = min(row0 + r, M - 1);
        const size_t off = w_offset(row, kb, row_bytes) & ~static_cast<size_t>(15);
        cp_async16(raw_w + r * kRawStride + c * 16, W + off + c * 16);
    }
    for (int i = threadIdx.x; i < BN * 32; i += kThreads) {  // 256 f16 = 32 chunks per token
        const int t = i >> 5, c = i & 31;
        const int tok = min(tok0 + t, T - 1);
        cp_async16(xs + t * kXStride + c * 16, x + static_cast<size_t>(tok) * K + kb * 256 + c * 8);
    }
}

}  // namespace mmq16

using namespace mmq16;

// X16: f16 [T, K]; W as in mmq.cu; C: f32 [T, M] (gridDim.z == 1) or partials [z][T][M].
extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_f16_gemm(const uint8_t* __restrict__ W, const __half* __restrict__ X16, float* __restrict__ C, int M, int T,
             int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem[];
    uint4* wfrag = reinterpret_cast<uint4*>(smem + STAGES * kStage16);
    const int row0 = blockIdx.y * BM, tok0 = blockIdx.x * BN;
    const int nkb = K / 256;
    const int kb_begin = static_cast<int>((static_cast<long long>(nkb) * blockIdx.z) / gridDim.z);
    const int n = static_cast<int>((static_cast<long long>(nkb) * (blockIdx.z + 1)) / gridDim.z) - kb_begin;
    const size_t rb = static_cast<size_t>(row_bytes);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int wr0 = (warp / WARPS_N) * kWarpRows, wt0 = (warp % WARPS_N) * kWarpTokens;

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    auto stage_ptr = [&](int i) { return smem + (i % STAGES) * kStage16; };
    if constexpr (STAGES > 1) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < n) issue_stage16(stage_ptr(s), W, X16, row0, tok0, M, T, K, rb, kb_begin + s);
            cp_async_commit();
        }
    }
    for (int i = 0; i < n; ++i) {
        const int kb = kb_begin + i;
        uint8_t* st = stage_ptr(i);
        if constexpr (STAGES == 1) {
            __syncthreads();
            issue_stage16(st, W, X16, row0, tok0, M, T, K, rb, kb);
            cp_async_commit();
            cp_async_wait<0>();
        } else {
            cp_async_wait<STAGES - 2>();
        }
        __syncthreads();

        // ---- dequantize: item (m16 tile, 32-wide group pair of k16 steps, g) -> rows g, g+8 ----
        const uint8_t* raw_w = st;
        for (int e = threadIdx.x; e < BM * 8; e += kThreads) {  // BM/16 tiles x 16 steps x 8 g / 2
            const int gg = e & 7, s = (e >> 3) & 15, mt = e >> 7;
            const int rg = mt * 16 + gg;
            const uint8_t* b0 = raw_block(raw_w, rg, row0, M, kb, rb);
            const uint8_t* b8 = raw_block(raw_w, rg + 8, row0, M, kb, rb);
            const int grp = (kGroupK == 32) ? (s >> 1) : s;  // scale group of k16 step s
            float s0, m0, s8, m8;
            group_scale(b0, grp, s0, m0);
            group_scale(b8, grp, s8, m8);
#pragma unroll
            for (int q = 0; q < 4; ++q) {  // lane 4 gg + q holds elements 16 s + 4 q .. + 3
                const uint2 lo = dequant_word(unpack_word(b0, 4 * s + q), s0, m0);
                const uint2 hi = dequant_word(unpack_word(b8, 4 * s + q), s8, m8);
                wfrag[(mt * 16 + s) * 32 + 4 * gg + q] = make_uint4(lo.x, hi.x, lo.y, hi.y);
            }
        }
        if constexpr (STAGES > 1) {
            if (i + STAGES - 1 < n)
                issue_stage16(stage_ptr(i + STAGES - 1), W, X16, row0, tok0, M, T, K, rb, kb + STAGES - 1);
            cp_async_commit();
        }
        __syncthreads();

        // ---- compute: 16 k16 steps; lane tq holds k 4tq..4tq+3 of the step (b0 = pair 0, b1 = pair 1) ----
        const uint8_t* xs = st + kRawWBytes;
#pragma unroll 4
        for (int s = 0; s < 16; ++s) {
            uint2 b[kNT];
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
                b[nt] = *reinterpret_cast<const uint2*>(xs + (wt0 + nt * 8 + g) * kXStride + 32 * s + 8 * tq);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
                const uint4 a = wfrag[(((wr0 >> 4) + mt) * 16 + s) * 32 + lane];
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt) mma_f16(acc[mt][nt], a, b[nt].x, b[nt].y);
            }
        }
    }
    store_acc(acc, C + static_cast<size_t>(blockIdx.z) * T * M, nullptr, nullptr, M, T, row0 + wr0, tok0 + wt0, g, tq);
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_f16_splitk_reduce)

extern "C" __constant__ int mmq_f16_smem_bytes = kSmem16;

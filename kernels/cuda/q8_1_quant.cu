// float32 / bf16 activations -> Q8_1 (the layout the MMQ kernels read):
//   q int8 [T, K] row-major, d float32 [T, K / 32], s int32 [T, K / 32].
//
// Contract and per-lane math: q8_1.cuh (shared with the GEMM that quantizes in-kernel, FUSEQ=1).
//
// K is a multiple of 32, so the [T, K] matrix is a flat run of T * K / 32 blocks and
// block b owns d[b], s[b] and q[32 b, +32). Four consecutive lanes share a block,
// 8 elements each (two 16-byte loads for float32, one for bf16); amax and the sum
// are reduced over those 4 lanes with two xor shuffles.
// Launch: CTA_THREADS threads per CTA, ceil(4 * n_blocks / CTA_THREADS) CTAs;
// x, q 16-byte aligned.
#include "q8_1.cuh"

#ifndef CTA_THREADS
#define CTA_THREADS 256
#endif

namespace mmq {

#ifdef __CUDACC__
template <class In>
__device__ __forceinline__ void quantize_q8_1_lane(const In* __restrict__ x, int8_t* __restrict__ q,
                                                   float* __restrict__ d, int* __restrict__ s,
                                                   long long n_blocks) {
    const long long lane = (long long)blockIdx.x * CTA_THREADS + threadIdx.x;
    const long long block = lane >> 2;
    // Lanes past the end still take part in the shuffles (full-warp mask); a block's
    // 4 lanes are all in range or all out, so real blocks never see their zeros.
    const bool active = block < n_blocks;
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (active) load8(x + lane * 8, v);

    const float scale = quad_scale(v);
    uint32_t packed[2];
    const int sum = quad_quantize(v, scale, packed);

    if (active) {
        *reinterpret_cast<uint2*>(q + lane * 8) = make_uint2(packed[0], packed[1]);
        if ((lane & 3) == 0) {
            d[block] = scale;
            s[block] = sum;
        }
    }
}
#endif

}  // namespace mmq

extern "C" __global__ void __launch_bounds__(CTA_THREADS)
quantize_q8_1_f32(const float* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ d,
                  int* __restrict__ s, long long n_blocks) {
    mmq::quantize_q8_1_lane(x, q, d, s, n_blocks);
}

extern "C" __global__ void __launch_bounds__(CTA_THREADS)
quantize_q8_1_bf16(const uint16_t* __restrict__ x, int8_t* __restrict__ q, float* __restrict__ d,
                   int* __restrict__ s, long long n_blocks) {
    mmq::quantize_q8_1_lane(x, q, d, s, n_blocks);
}

// float32 / bf16 activations -> Q8_1 (the layout the MMQ kernels read):
//   q int8 [T, K] row-major, d float32 [T, K / 32], s int32 [T, K / 32].
//
// Contract (bit-identical to kernels.quant.q8_1.quantize_q8_1), per 32-block:
//   amax = max |x|;  d = amax / 127  (IEEE float32 division)
//   q = d > 0 ? clamp(rint(x / d), -127, 127) : 0   (IEEE division, round half to even)
//   s = sum(q)  (int)
// bf16 input is widened to float32 first (exact). div_rn is __fdiv_rn, so neither
// -use_fast_math nor -prec-div=false could turn these into approximate divisions.
//
// K is a multiple of 32, so the [T, K] matrix is a flat run of T * K / 32 blocks and
// block b owns d[b], s[b] and q[32 b, +32). Four consecutive lanes share a block,
// 8 elements each (two 16-byte loads for float32, one for bf16); amax and the sum
// are reduced over those 4 lanes with two xor shuffles.
// Launch: CTA_THREADS threads per CTA, ceil(4 * n_blocks / CTA_THREADS) CTAs;
// x, q 16-byte aligned.
#include "common.cuh"

#ifndef CTA_THREADS
#define CTA_THREADS 256
#endif

namespace mmq {

MMQ_HD void load8(const float* x, float v[8]) {
    const float4 a = reinterpret_cast<const float4*>(x)[0];
    const float4 b = reinterpret_cast<const float4*>(x)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

MMQ_HD void load8(const uint16_t* x, float v[8]) {  // bf16 bits, widened exactly
    const uint4 a = *reinterpret_cast<const uint4*>(x);
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[2 * i] = bf16_bits_to_f32(uint16_t(w[i] & 0xFFFF));
        v[2 * i + 1] = bf16_bits_to_f32(uint16_t(w[i] >> 16));
    }
}

// The per-lane math, __host__ __device__ so the host harness runs the same code.
MMQ_HD float abs_max8(const float v[8]) {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
    return m;
}

MMQ_HD float q8_1_scale(float amax) { return div_rn(amax, 127.0f); }

// q of 8 values under the block scale, packed little-endian into 2 words; returns their sum.
MMQ_HD int quantize8(const float v[8], float scale, uint32_t packed[2]) {
    int sum = 0;
    packed[0] = packed[1] = 0u;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        int qi = 0;
        if (scale > 0.0f) {
            const float r = rintf(div_rn(v[i], scale));  // rint: round half to even
            qi = int(fminf(fmaxf(r, -127.0f), 127.0f));
        }
        sum += qi;
        packed[i >> 2] |= uint32_t(qi & 0xFF) << (8 * (i & 3));
    }
    return sum;
}

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

    float amax = abs_max8(v);
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
    const float scale = q8_1_scale(amax);

    uint32_t packed[2];
    int sum = quantize8(v, scale, packed);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);

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

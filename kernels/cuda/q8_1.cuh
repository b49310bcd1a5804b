// The Q8_1 quantizer's math, one place for every kernel that quantizes activations: the
// standalone pass (q8_1_quant.cu) and the GEMM that quantizes in its prologue (mmq_core.cuh,
// FUSEQ=1). Sharing the code is what makes the two bit-identical.
//
// Contract (bit-identical to kernels.quant.q8_1.quantize_q8_1), per 32-block:
//   amax = max |x|;  d = amax / 127  (IEEE float32 division)
//   q = d > 0 ? clamp(rint(x / d), -127, 127) : 0   (IEEE division, round half to even)
//   s = sum(q)  (int)
// bf16 input is widened to float32 first (exact). div_rn is __fdiv_rn, so neither
// -use_fast_math nor -prec-div=false could turn these into approximate divisions.
//
// A block is quantized by four consecutive lanes of a warp, 8 consecutive values each; amax
// and the sum are reduced over those 4 lanes with two xor shuffles (quad_*). max and an
// integer sum do not depend on the order, so any split of a block over its 4 lanes gives
// the same bytes.
#pragma once
#include "common.cuh"

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
// Block scale d of the 4-lane quad this lane's 8 values belong to (every lane of the warp calls it).
__device__ __forceinline__ float quad_scale(const float v[8]) {
    float amax = abs_max8(v);
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
    return q8_1_scale(amax);
}

// This lane's 8 q (packed) and the quad's block sum s (every lane of the warp calls it).
__device__ __forceinline__ int quad_quantize(const float v[8], float scale, uint32_t packed[2]) {
    int sum = quantize8(v, scale, packed);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
    return sum;
}
#endif

}  // namespace mmq

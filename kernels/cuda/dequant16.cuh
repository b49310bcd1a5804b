// Weights to f16 with their scales applied, four at a time: the dequantize step of every
// path that feeds f16 tensor cores from ggml blocks (mmq_f16.cu: mma.sync, mmq_wgmma.cu: wgmma).
// Built on mmq_core.cuh's decoders: unpack_word gives the quantized bytes, group_scale (sw, mn).
#pragma once
#include <cuda_fp16.h>
#include "mmq_core.cuh"

namespace mmq {

constexpr bool kSignedQ = (QTYPE == 2 || QTYPE == 3);  // unpack_word yields signed bytes

// byte u (0..255) -> float, exactly: place it in the mantissa of 2^23 and subtract 2^23
__device__ __forceinline__ float byte_f32(uint32_t word, int i) {
    return __uint_as_float(0x4B000000u | ((word >> (8 * i)) & 0xFFu)) - 8388608.0f;
}

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// Four weights of one word, w = sw * u - mn, as two half2: (w0, w1), (w2, w3).
//   DEQ == 0: in f32 (byte -> float exactly, one FFMA), rounded once to f16: ~3.5 instr/weight.
//   DEQ == 1: in f16x2: PRMT puts two bytes under the exponent of 1024 (0x64uu = 1024 + u, exact),
//             HSUB2 leaves u, HFMA2 applies f16(sw) and f16(-mn): ~1.5 instr/weight, with sw and
//             mn rounded to f16 as well (the parity bound counts |u sw| + |mn|, not just |w|).
#ifndef DEQ
#define DEQ 0
#endif
__device__ __forceinline__ uint2 dequant_word(uint32_t word, float sw, float mn) {
    if constexpr (kSignedQ) {  // signed byte b = u - 128: fold the 128 into the min
        word ^= 0x80808080u;
        mn = fmaf(128.0f, sw, mn);
    }
#if DEQ == 1
    const __half2 sw2 = __float2half2_rn(sw), nmn2 = __float2half2_rn(-mn);
    const __half2 bias = __float2half2_rn(1024.0f);
    const uint32_t lo = __byte_perm(word, 0x64646464u, 0x4140), hi = __byte_perm(word, 0x64646464u, 0x4342);
    const __half2 wl = __hfma2(__hsub2(*reinterpret_cast<const __half2*>(&lo), bias), sw2, nmn2);
    const __half2 wh = __hfma2(__hsub2(*reinterpret_cast<const __half2*>(&hi), bias), sw2, nmn2);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&wl), *reinterpret_cast<const uint32_t*>(&wh));
#else
    const float w0 = fmaf(sw, byte_f32(word, 0), -mn), w1 = fmaf(sw, byte_f32(word, 1), -mn);
    const float w2 = fmaf(sw, byte_f32(word, 2), -mn), w3 = fmaf(sw, byte_f32(word, 3), -mn);
    return make_uint2(pack_h2(w0, w1), pack_h2(w2, w3));
#endif
}

}  // namespace mmq

// Tiny helpers shared by the kernel files of kernels/cuda.
//
// Everything here is __host__ __device__ so a host-only harness (tests) can run the
// same decode code on the CPU. Float arithmetic that must match the float32 numpy
// references goes through mul_rn/sub_rn/div_rn: on the device they are the _rn
// intrinsics, which nvcc never contracts into FMA and never approximates.
#pragma once

#include <cstdint>
#include <cstring>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define MMQ_HD __host__ __device__ __forceinline__

namespace mmq {

MMQ_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;  // x86-64 host code has no FMA unless -mfma: one rounding per op
#endif
}

MMQ_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

MMQ_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);  // IEEE division whatever -prec-div says
#else
    return a / b;
#endif
}

// Little-endian loads at the alignment the caller guarantees.
MMQ_HD uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
MMQ_HD uint32_t load_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 8 bytes from a 2-byte aligned address (Q6_K/Q8_0 blocks are 210/34 bytes: only
// 2-aligned); four 16-bit loads, never a byte outside [p, p + 8).
MMQ_HD uint2 load8_align2(const uint8_t* p) {
    uint2 r;
    r.x = uint32_t(load_u16(p)) | (uint32_t(load_u16(p + 2)) << 16);
    r.y = uint32_t(load_u16(p + 4)) | (uint32_t(load_u16(p + 6)) << 16);
    return r;
}

// 8 bytes from an 8-byte aligned address: one 64-bit load.
MMQ_HD uint2 load8_align8(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }

MMQ_HD uint8_t byte_of(uint2 v, int i) {  // i in [0, 8), little-endian
    return uint8_t((i < 4 ? v.x >> (8 * i) : v.y >> (8 * (i - 4))) & 0xFF);
}

// ggml f16 fields: exact widening to float32.
MMQ_HD float f16_bits_to_f32(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
MMQ_HD float load_f16(const uint8_t* p) { return f16_bits_to_f32(load_u16(p)); }

// bf16 <-> float32: widening is exact; narrowing rounds to nearest even.
MMQ_HD float bf16_bits_to_f32(uint16_t bits) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(uint32_t(bits) << 16);
#else
    uint32_t u = uint32_t(bits) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

MMQ_HD uint16_t f32_to_bf16_bits(float x) {
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *reinterpret_cast<const uint16_t*>(&h);
}

MMQ_HD uint32_t pack_bf16x2(float lo, float hi) {
    return uint32_t(f32_to_bf16_bits(lo)) | (uint32_t(f32_to_bf16_bits(hi)) << 16);
}

// 8 float32 values -> 8 bf16 in one 16-byte store (dst 16-byte aligned).
MMQ_HD void store_bf16x8(uint16_t* dst, const float v[8]) {
    uint4 w;
    w.x = pack_bf16x2(v[0], v[1]);
    w.y = pack_bf16x2(v[2], v[3]);
    w.z = pack_bf16x2(v[4], v[5]);
    w.w = pack_bf16x2(v[6], v[7]);
#ifdef __CUDA_ARCH__
    __stcg(reinterpret_cast<uint4*>(dst), w);  // explicit v4 store: nvcc split a plain one
#else
    memcpy(dst, &w, sizeof w);
#endif
}

}  // namespace mmq

// Small kernels that several GEMM modules carry (each module is its own cubin, so each
// defines them): the f32 -> f16 activation pass and the split-K reduction.
#pragma once
#include "dequant16.cuh"

// PDL >= 1: the GEMM after this pass is a programmatic dependent launch (kernels/dependent_launch.py):
// the pass lets it start at once, and the GEMM waits for the pass's writes where it reads them.
// PDL = 2: the split-K reduction is in turn a dependent of the GEMM, resident before the GEMM ends.
#if defined(PDL) && PDL
#define MMQ_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define MMQ_LAUNCH_DEPENDENTS()
#endif
#if defined(PDL) && PDL >= 2
#define MMQ_WAIT_PRIMARY() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#else
#define MMQ_WAIT_PRIMARY()
#endif

// f32 -> f16 (round to nearest even), 4 per thread; n a multiple of 4.
extern "C" __global__ void f32_to_f16(const float4* __restrict__ x, uint2* __restrict__ y, long long n4) {
    MMQ_LAUNCH_DEPENDENTS();
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n4;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        const float4 v = x[i];
        y[i] = make_uint2(mmq::pack_h2(v.x, v.y), mmq::pack_h2(v.z, v.w));
    }
}

// Split-K: C[i] = sum_z partial[z][i]; every output element written (the poison check sees gaps).
#define MMQ_SPLITK_REDUCE(NAME)                                                                       \
    extern "C" __global__ void NAME(const float* __restrict__ partial, float* __restrict__ C, long long n, \
                                    int splits) {                                                       \
        MMQ_WAIT_PRIMARY(); /* PDL = 2: the GEMM's partial sums are written */                          \
        for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;         \
             i += static_cast<long long>(gridDim.x) * blockDim.x) {                                      \
            float s = 0.0f;                                                                             \
            for (int z = 0; z < splits; ++z) s += partial[z * n + i];                                   \
            C[i] = s;                                                                                   \
        }                                                                                               \
    }

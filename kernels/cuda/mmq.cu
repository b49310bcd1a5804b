// Fused K-quant x Q8_1 int8 tensor-core GEMM ("MMQ"), grid schedule: one CTA per
// (token tile, row tile, K split). The math, staging and fragment layout live in mmq_core.cuh.
// Built with FUSEQ=1 it is the `fused_quant` kernel: float activations in, Q8_1 made in-kernel.
#include "mmq_core.cuh"

using namespace mmq;

// W: ggml blocks, row-major rows of row_bytes (buffer padded by >= 16 bytes at the end).
// xq/xd/xs: Q8_1 activations, or with FUSEQ=1 x: float32 (XBF16: bf16 bits) rows [T, K],
// quantized in the kernel. C: f32 [T, M] when gridDim.z == 1, else partials [z][T][M].
extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_gemm(const uint8_t* __restrict__ W,
#if FUSEQ
         const XElem* __restrict__ x,
#else
         const int8_t* __restrict__ xq, const float* __restrict__ xd, const int* __restrict__ xs,
#endif
         float* __restrict__ C, int M, int T, int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int nkb = K / 256;
    TileArgs a;
#if FUSEQ
    a.W = W; a.xq = nullptr; a.xd = nullptr; a.xs = nullptr; a.x = x;
#else
    a.W = W; a.xq = xq; a.xd = xd; a.xs = xs;
#endif
    a.M = M; a.K = K; a.row_bytes = static_cast<size_t>(row_bytes);
    a.row0 = blockIdx.y * BM;
    a.tok0 = blockIdx.x * BN;
    a.tok_end = T;
    a.kb_begin = static_cast<int>((static_cast<long long>(nkb) * blockIdx.z) / gridDim.z);
    a.kb_end = static_cast<int>((static_cast<long long>(nkb) * (blockIdx.z + 1)) / gridDim.z);
    a.out = C + static_cast<size_t>(blockIdx.z) * T * M;
    a.out_rows = nullptr;
    a.out_scale = nullptr;
    mmq_tile(smem, a);
}

// Split-K: C[i] = sum_z partial[z][i]; every output element written (the poison check sees gaps).
extern "C" __global__ void mmq_splitk_reduce(const float* __restrict__ partial, float* __restrict__ C,
                                             long long n, int splits) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        float s = 0.0f;
        for (int z = 0; z < splits; ++z) s += partial[z * n + i];
        C[i] = s;
    }
}

// Dynamic shared memory this configuration needs; the launcher checks its own formula against it.
extern "C" __constant__ int mmq_smem_bytes = kSmemBytes;

// Host-only run of moe_matvec.cu's per-group decode and dot (no GPU): one output row at a
// time, the groups summed in order, so tests can check every format's bit layout and scale
// math against kernels.reference.gemm_int on a machine without a GPU. One binary serves all
// formats: the kernel itself (and the QTYPE it is built for) is left out.
// Built as plain C++ (nvcc -x c++: the host compiler with the CUDA headers, no device pass).
// usage: moe_matvec_host <0..3> <weights.bin> <M> <K> <xq.bin> <xd.bin> <xs.bin> <out.bin>
//   weights uint8 [M][row_bytes], xq int8 [K], xd float32 [K/32], xs int32 [K/32] -> out float32 [M]
#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

#define MOE_MATVEC_HOST_HARNESS
#include "moe_matvec.cu"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

template <class T>
static bool read_all(const char* path, std::vector<T>& v) {
    FILE* f = std::fopen(path, "rb");
    const bool ok = f && std::fread(v.data(), sizeof(T), v.size(), f) == v.size();
    if (f) std::fclose(f);
    return ok;
}

template <int QT>
static int run(char** argv) {
    const int M = std::atoi(argv[3]), K = std::atoi(argv[4]), groups = K / 32;
    const size_t row_bytes = size_t(K / Format<QT>::kBlockK) * Format<QT>::kBytes;
    std::vector<uint8_t> w(M * row_bytes);
    std::vector<int8_t> xq(K);
    std::vector<float> xd(groups), out(M);
    std::vector<int> xs(groups);
    if (!read_all(argv[2], w) || !read_all(argv[5], xq) || !read_all(argv[6], xd) || !read_all(argv[7], xs)) return 3;
    for (int m = 0; m < M; ++m) {
        float acc = 0.0f;
        for (int g = 0; g < groups; ++g) {
            int x[8];
            std::memcpy(x, xq.data() + 32 * g, 32);
            acc = std::fma(xd[g], group_dot<QT>(w.data() + m * row_bytes, g, x, xs[g]), acc);
        }
        out[m] = acc;
    }
    FILE* f = std::fopen(argv[8], "wb");
    if (!f || std::fwrite(out.data(), 4, out.size(), f) != out.size()) return 4;
    std::fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 9) {
        std::fprintf(stderr, "usage: %s 0..3 weights.bin M K xq.bin xd.bin xs.bin out.bin\n", argv[0]);
        return 2;
    }
    switch (std::atoi(argv[1])) {
        case 0: return run<0>(argv);
        case 1: return run<1>(argv);
        case 2: return run<2>(argv);
        case 3: return run<3>(argv);
    }
    return 2;
}

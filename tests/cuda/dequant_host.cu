// Host-only run of dequant.cu's per-thread code (no GPU): loops the global thread index
// over the whole grid exactly as the kernel's CTAs would, so tests can check the block
// layouts and the rounding against gguf on a machine without a GPU. One binary serves all
// formats (QTYPE only picks the kernel's instantiation, which this harness does not use).
// usage: dequant_host <Q4_K|Q5_K|Q6_K|Q8_0> <packed.bin> <n_blocks> <out.bin>
#define QTYPE Q4_K
#include "dequant.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

template <class F>
static int run(const char* in_path, long long n_blocks, const char* out_path) {
    std::vector<uint8_t> w(size_t(n_blocks) * F::TYPE_SIZE);
    std::vector<uint16_t> out(size_t(n_blocks) * F::BLOCK);
    FILE* f = std::fopen(in_path, "rb");
    if (!f || std::fread(w.data(), 1, w.size(), f) != w.size()) return 3;
    std::fclose(f);
    const long long threads = n_blocks * F::THREADS;
    for (long long g = 0; g < threads; ++g) mmq::dequant_thread<F>(w.data(), out.data(), n_blocks, g);
    f = std::fopen(out_path, "wb");
    if (!f || std::fwrite(out.data(), 2, out.size(), f) != out.size()) return 4;
    std::fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s Q4_K|Q5_K|Q6_K|Q8_0 packed.bin n_blocks out.bin\n", argv[0]);
        return 2;
    }
    const long long n = std::atoll(argv[3]);
    if (!std::strcmp(argv[1], "Q4_K")) return run<mmq::Q4_K>(argv[2], n, argv[4]);
    if (!std::strcmp(argv[1], "Q5_K")) return run<mmq::Q5_K>(argv[2], n, argv[4]);
    if (!std::strcmp(argv[1], "Q6_K")) return run<mmq::Q6_K>(argv[2], n, argv[4]);
    if (!std::strcmp(argv[1], "Q8_0")) return run<mmq::Q8_0>(argv[2], n, argv[4]);
    std::fprintf(stderr, "unknown format %s\n", argv[1]);
    return 2;
}

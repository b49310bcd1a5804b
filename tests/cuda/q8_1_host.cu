// Host-only run of q8_1_quant.cu's per-lane math (no GPU): the four lanes of a block are
// emulated in turn (amax = max of the lanes' abs_max8, the shuffles' result), so tests can
// check the bytes against kernels.quant.q8_1 on a machine without a GPU.
// usage: q8_1_host <f32|bf16> <x.bin> <n_blocks> <q.bin> <d.bin> <s.bin>
#include "q8_1_quant.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

template <class In>
static void run(const std::vector<uint8_t>& raw, long long n_blocks, int8_t* q, float* d, int* s) {
    const In* x = reinterpret_cast<const In*>(raw.data());
    for (long long b = 0; b < n_blocks; ++b) {
        float v[4][8];
        float amax = 0.0f;
        for (int lane = 0; lane < 4; ++lane) {
            mmq::load8(x + (4 * b + lane) * 8, v[lane]);
            amax = fmaxf(amax, mmq::abs_max8(v[lane]));
        }
        const float scale = mmq::q8_1_scale(amax);
        int sum = 0;
        for (int lane = 0; lane < 4; ++lane) {
            uint32_t packed[2];
            sum += mmq::quantize8(v[lane], scale, packed);
            std::memcpy(q + (4 * b + lane) * 8, packed, 8);
        }
        d[b] = scale;
        s[b] = sum;
    }
}

static bool dump(const char* path, const void* p, size_t n) {
    FILE* f = std::fopen(path, "wb");
    bool ok = f && std::fwrite(p, 1, n, f) == n;
    if (f) std::fclose(f);
    return ok;
}

int main(int argc, char** argv) {
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s f32|bf16 x.bin n_blocks q.bin d.bin s.bin\n", argv[0]);
        return 2;
    }
    const bool bf16 = std::strcmp(argv[1], "bf16") == 0;
    const long long n_blocks = std::atoll(argv[3]);
    std::vector<uint8_t> raw(size_t(n_blocks) * 32 * (bf16 ? 2 : 4));
    FILE* f = std::fopen(argv[2], "rb");
    if (!f || std::fread(raw.data(), 1, raw.size(), f) != raw.size()) return 3;
    std::fclose(f);
    std::vector<int8_t> q(size_t(n_blocks) * 32);
    std::vector<float> d(n_blocks);
    std::vector<int> s(n_blocks);
    if (bf16) run<uint16_t>(raw, n_blocks, q.data(), d.data(), s.data());
    else run<float>(raw, n_blocks, q.data(), d.data(), s.data());
    return dump(argv[4], q.data(), q.size()) && dump(argv[5], d.data(), 4 * d.size()) &&
           dump(argv[6], s.data(), 4 * s.size()) ? 0 : 4;
}

// ggml block formats -> bf16, row-major [M, K]: the dequant pass of the
// `dequant_cublas` baseline (the weight then goes to cuBLAS through torch).
//
// Contract (bit-exact): out = bf16_rne(w) where w is what gguf's numpy
// `dequantize` computes in float32, one rounding per operation:
//   Q4_K, Q5_K: w = (d * sc_j) * q - (dmin * m_j)      q unsigned, 32-wide sub-blocks
//   Q6_K:       w = (d * sc_j) * (q6 - 32)             16-wide sub-blocks, int8 sc_j
//   Q8_0:       w = q * d
// mul_rn/sub_rn keep nvcc from contracting the product and difference into an FMA.
//
// Rows are whole blocks, so the packed matrix is a flat array of blocks and block b
// owns outputs [b * BLOCK, (b + 1) * BLOCK). Each format splits a block over THREADS
// lanes; a lane reads its bytes once and writes >= 16 outputs as 16-byte stores.
//
// QTYPE (from the #define block) names the format struct: Q4_K, Q5_K, Q6_K or Q8_0.
#include "common.cuh"

#ifndef QTYPE
#error "define QTYPE as Q4_K, Q5_K, Q6_K or Q8_0 (kernels.dequant_cublas renders it)"
#endif
#ifndef CTA_THREADS
#define CTA_THREADS 256
#endif

namespace mmq {

// The 12 packed K-quant scale bytes, loaded once as three words (offset 4 of a
// 16-aligned block: 4-aligned).
struct KScales {
    uint32_t w[3];
    MMQ_HD explicit KScales(const uint8_t* p) : w{load_u32(p), load_u32(p + 4), load_u32(p + 8)} {}
    // Selects, not w[i >> 2]: g++ 12 -O2 (tree-vrp) miscompiled the indexed form in the
    // host harness, and on the device both compile to the same SEL/PRMT code.
    MMQ_HD int byte(int i) const {
        const uint32_t word = i < 4 ? w[0] : (i < 8 ? w[1] : w[2]);
        return int((word >> (8 * (i & 3))) & 0xFF);
    }

    // 6-bit (scale, min) pair of sub-block j (ggml get_scale_min_k4).
    MMQ_HD void get(int j, int& sc, int& m) const {
        if (j < 4) {
            sc = byte(j) & 63;
            m = byte(j + 4) & 63;
        } else {
            sc = (byte(j + 4) & 0x0F) | ((byte(j - 4) >> 6) << 4);
            m = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
        }
    }
};

// Q4_K, 144 B: d f16 | dmin f16 | scales[12] | qs[128]. qs chunk c (32 bytes) holds
// sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
// Lane = 4 * c + i8: bytes qs[32c + 8 i8, +8) -> outputs 64c + 8 i8 (+32 for the high nibble).
struct Q4_K {
    static constexpr int BLOCK = 256, TYPE_SIZE = 144, THREADS = 16;

    MMQ_HD static void decode(const uint8_t* blk, int lane, uint16_t* out) {
        const int c = lane >> 2, p = (lane & 3) * 8;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        const KScales scales(blk + 4);
        const uint2 q = load8_align8(blk + 16 + 32 * c + p);  // block base is 16-aligned
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            int sc, m;
            scales.get(2 * c + half, sc, m);
            const float ds = mul_rn(d, float(sc)), dm = mul_rn(dmin, float(m));
            float v[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int qi = (byte_of(q, i) >> (4 * half)) & 0x0F;
                v[i] = sub_rn(mul_rn(ds, float(qi)), dm);
            }
            store_bf16x8(out + 64 * c + 32 * half + p, v);
        }
    }
};

// Q5_K, 176 B: d | dmin | scales[12] | qh[32] | qs[128]. As Q4_K plus a fifth bit:
// bit j of qh[pos] is the high bit of sub-block j at position pos.
struct Q5_K {
    static constexpr int BLOCK = 256, TYPE_SIZE = 176, THREADS = 16;

    MMQ_HD static void decode(const uint8_t* blk, int lane, uint16_t* out) {
        const int c = lane >> 2, p = (lane & 3) * 8;
        const float d = load_f16(blk), dmin = load_f16(blk + 2);
        const uint2 qh = load8_align8(blk + 16 + p);
        const uint2 ql = load8_align8(blk + 48 + 32 * c + p);
        const KScales scales(blk + 4);
        #pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int j = 2 * c + half;
            int sc, m;
            scales.get(j, sc, m);
            const float ds = mul_rn(d, float(sc)), dm = mul_rn(dmin, float(m));
            float v[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int qi = ((byte_of(ql, i) >> (4 * half)) & 0x0F) | (((byte_of(qh, i) >> j) & 1) << 4);
                v[i] = sub_rn(mul_rn(ds, float(qi)), dm);
            }
            store_bf16x8(out + 32 * j + p, v);
        }
    }
};

// Q6_K, 210 B: ql[128] | qh[64] | scales[16] int8 | d f16. Half h (128 outputs) uses
// ql[64h, +64) and qh[32h, +32); output r of the half takes the nibble r / 64 of
// ql[64h + r % 64] and the 2 bits at 2 * (r / 32) of qh[32h + r % 32].
// Lane = 4 * h + i8 reads qh[32h + 8 i8, +8) once: outputs 128h + 32s + 8 i8, s = 0..3.
struct Q6_K {
    static constexpr int BLOCK = 256, TYPE_SIZE = 210, THREADS = 8;

    MMQ_HD static void decode(const uint8_t* blk, int lane, uint16_t* out) {
        const int h = lane >> 2, p = (lane & 3) * 8;
        const float d = load_f16(blk + 208);
        const uint2 ql_lo = load8_align2(blk + 64 * h + p);  // blocks are only 2-aligned
        const uint2 ql_hi = load8_align2(blk + 64 * h + 32 + p);
        const uint2 qh = load8_align2(blk + 128 + 32 * h + p);
        #pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int r = 32 * s + p;  // first output of this group within the half
            const int sc = int8_t(blk[192 + 8 * h + r / 16]);
            const float ds = mul_rn(d, float(sc));
            const uint2 ql = (s & 1) ? ql_hi : ql_lo;
            float v[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int lo = (byte_of(ql, i) >> (4 * (s >> 1))) & 0x0F;
                const int hi = (byte_of(qh, i) >> (2 * s)) & 0x03;
                v[i] = mul_rn(ds, float((lo | (hi << 4)) - 32));
            }
            store_bf16x8(out + 128 * h + r, v);
        }
    }
};

// Q8_0, 34 B: d f16 | qs[32] int8. Lane l (0, 1) writes outputs [16 l, +16).
struct Q8_0 {
    static constexpr int BLOCK = 32, TYPE_SIZE = 34, THREADS = 2;

    MMQ_HD static void decode(const uint8_t* blk, int lane, uint16_t* out) {
        const float d = load_f16(blk);
        #pragma unroll
        for (int g = 0; g < 2; ++g) {
            const uint2 q = load8_align2(blk + 2 + 16 * lane + 8 * g);
            float v[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = mul_rn(float(int8_t(byte_of(q, i))), d);
            store_bf16x8(out + 16 * lane + 8 * g, v);
        }
    }
};

// Global thread index -> (block, lane); shared by the kernel and the host harness.
template <class F>
MMQ_HD void dequant_thread(const uint8_t* w, uint16_t* out, long long n_blocks, long long g) {
    const long long b = g / F::THREADS;
    if (b >= n_blocks) return;
    F::decode(w + b * F::TYPE_SIZE, int(g % F::THREADS), out + b * F::BLOCK);
}

}  // namespace mmq

using DequantFormat = mmq::QTYPE;
#ifdef LANES_PER_BLOCK  // the launcher's grid math must agree with the format
static_assert(DequantFormat::THREADS == LANES_PER_BLOCK, "launcher LANES_PER_BLOCK != format THREADS");
#endif

// w: packed blocks (n_blocks * TYPE_SIZE bytes); out: bf16 bits, 16-byte aligned.
// Launch: CTA_THREADS threads per CTA, ceil(n_blocks * THREADS / CTA_THREADS) CTAs.
extern "C" __global__ void __launch_bounds__(CTA_THREADS)
dequant_bf16(const uint8_t* __restrict__ w, uint16_t* __restrict__ out, long long n_blocks) {
    const long long g = (long long)blockIdx.x * CTA_THREADS + threadIdx.x;
    mmq::dequant_thread<DequantFormat>(w, out, n_blocks, g);
}

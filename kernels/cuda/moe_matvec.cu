// MoE expert matvec baseline (what the seeds' engine ran for mul_mat_id): every routed pair
// (t, slot) reads its expert's weight rows on its own, so an expert is read once per routed token.
//
//   Y[p, m] = route_w[p] * sum_k W[ids[p], m, k] * x[t, k],   p = t * top_k + slot
//
// Math contract: exactly the dense integer contract (kernels/reference.py gemm_int) per pair.
// Per 32-wide k group b:
//   w[m,k] = sw[m,b] * q_w[m,k] - mn[m,b]   (q_w unsigned for q4_K/q5_K, signed otherwise)
//   Y[p,m] += d_x[t,b] * (sw * I - mn * s_x[t,b]),  I = sum_k q_w * q_x  (dp4a, exact int32)
// q6_K: two 16-wide halves per group, each its own scale: d_x * (sw_lo * I_lo + sw_hi * I_hi).
// Only the f32 rescale and the order of the sum over groups differ from the float64 reference.
// q8_0 rows are 34-byte blocks, so any K % 32 == 0 works (K-quants need K % 256 == 0).
//
// Layout: W [n_experts][M][row_bytes] ggml blocks, xq int8 [T][K], xd f32 / xs i32 [T][K / 32],
// ids int32 [T * top_k], route_w f32 [T * top_k] or null, Y f32 [T * top_k][M].
//
// Launch: grid (ceil(M / (MV_WARPS * MV_ROWS)), T * top_k), block 32 * MV_WARPS, no smem.
// A warp owns MV_ROWS rows; lane l takes the 32-groups l, l + 32, ... of K and keeps the
// activation words of its group in registers for all MV_ROWS rows; a shuffle tree sums lanes.
#include "common.cuh"

#ifndef QTYPE
#define QTYPE 0
#endif
#ifndef MV_WARPS
#define MV_WARPS 4
#endif
#ifndef MV_ROWS
#define MV_ROWS 2
#endif

namespace moe_mv {

using mmq::load_f16;
static_assert(MV_WARPS >= 1 && MV_WARPS <= 32, "MV_WARPS must be 1..32");
static_assert(MV_ROWS >= 1 && MV_ROWS <= 8, "MV_ROWS must be 1..8");
static_assert(QTYPE >= 0 && QTYPE <= 3, "QTYPE must be 0 (q4_K), 1 (q5_K), 2 (q6_K) or 3 (q8_0)");

// Weights per block and bytes per block of format QT (0 q4_K, 1 q5_K, 2 q6_K, 3 q8_0).
template <int QT> struct Format { static constexpr int kBlockK = 256, kBytes = QT == 0 ? 144 : QT == 1 ? 176 : 210; };
template <> struct Format<3> { static constexpr int kBlockK = 32, kBytes = 34; };

// Device intrinsics, with host twins so tests/cuda/moe_matvec_host.cu runs the same decode on a CPU.
MMQ_HD int dp4a(int a, int b, int c) {  // c + sum of the 4 signed byte products
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i) c += int(int8_t(a >> (8 * i))) * int(int8_t(b >> (8 * i)));
    return c;
#endif
}

MMQ_HD uint32_t minus32_bytes(uint32_t v) {  // each byte 0..63 -> signed byte (v - 32)
#ifdef __CUDA_ARCH__
    return __vsubss4(v, 0x20202020u);
#else
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= uint32_t(uint8_t(int((v >> (8 * i)) & 0xFF) - 32)) << (8 * i);
    return r;
#endif
}

MMQ_HD void load_32_bytes(const uint8_t* p, uint32_t (&w)[8]) {  // p 16-byte aligned: two 16-byte loads
#ifdef __CUDA_ARCH__
    const uint4 a = reinterpret_cast<const uint4*>(p)[0], b = reinterpret_cast<const uint4*>(p)[1];
    w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w; w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
#else
    memcpy(w, p, 32);
#endif
}

MMQ_HD uint32_t u32_align2(const uint8_t* p) {  // 4 bytes at a 2-byte aligned address
    return uint32_t(mmq::load_u16(p)) | (uint32_t(mmq::load_u16(p + 2)) << 16);
}

// ggml get_scale_min_k4: 6-bit (scale, min) of sub-block j from the 12 packed bytes.
MMQ_HD void scale_min_k4(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Contribution of 32-group g of one weight row, before the d_x factor:
//   sw * I - mn * s_x  (q6_K: sw_lo * I_lo + sw_hi * I_hi; q8_0: d * I)
// x: the group's 32 activation bytes as 8 words; sx: their Q8_1 sum.
template <int QT>
MMQ_HD float group_dot(const uint8_t* __restrict__ row, int g, const int (&x)[8], int sx) {
    constexpr int kGroups = Format<QT>::kBlockK / 32;  // 32-groups per block
    const uint8_t* blk = row + static_cast<size_t>(g / kGroups) * Format<QT>::kBytes;
    const int j = g % kGroups;
    if constexpr (QT == 0 || QT == 1) {
        // q4_K: qs at 16, chunk j/2 holds group j in its low (even j) or high (odd j) nibbles.
        // q5_K: qh at 16 (bit j of byte l = high bit of group j, element l), qs at 48.
        constexpr int kQs = QT == 0 ? 16 : 48;
        uint32_t qs[8], qh[8];
        load_32_bytes(blk + kQs + 32 * (j >> 1), qs);  // blocks are 16-aligned
        if constexpr (QT == 1) load_32_bytes(blk + 16, qh);
        int dot = 0;
#pragma unroll
        for (int p = 0; p < 8; ++p) {
            uint32_t w = (j & 1) ? (qs[p] >> 4) & 0x0F0F0F0Fu : qs[p] & 0x0F0F0F0Fu;
            if constexpr (QT == 1) w |= ((qh[p] >> j) & 0x01010101u) << 4;
            dot = dp4a(static_cast<int>(w), x[p], dot);  // unsigned 0..31 fit a signed byte
        }
        int sc, m;
        scale_min_k4(blk + 4, j, sc, m);
        const float sw = load_f16(blk) * static_cast<float>(sc);
        const float mn = load_f16(blk + 2) * static_cast<float>(m);
        return sw * static_cast<float>(dot) - mn * static_cast<float>(sx);
    } else if constexpr (QT == 2) {
        // q6_K, 210 B (2-aligned): ql[128] | qh[64] | int8 scales[16] | d f16. Group j = 4 n + r of
        // half n: low nibble (r < 2) or high nibble of ql[64 n + 32 (r & 1) + l], 2 bits at 2 r of
        // qh[32 n + l]; 16-wide scales 2 j (l < 16) and 2 j + 1.
        const int n = j >> 2, r = j & 3;
        int dot_lo = 0, dot_hi = 0;
#pragma unroll
        for (int p = 0; p < 8; ++p) {
            const uint32_t ql = u32_align2(blk + 64 * n + 32 * (r & 1) + 4 * p);
            const uint32_t qh = u32_align2(blk + 128 + 32 * n + 4 * p);
            const uint32_t q6 = ((ql >> (4 * (r >> 1))) & 0x0F0F0F0Fu) | (((qh >> (2 * r)) & 0x03030303u) << 4);
            const int w = static_cast<int>(minus32_bytes(q6));
            if (p < 4) dot_lo = dp4a(w, x[p], dot_lo);
            else dot_hi = dp4a(w, x[p], dot_hi);
        }
        const float d = load_f16(blk + 208);
        const float sw_lo = d * static_cast<float>(static_cast<int8_t>(blk[192 + 2 * j]));
        const float sw_hi = d * static_cast<float>(static_cast<int8_t>(blk[192 + 2 * j + 1]));
        (void)sx;
        return sw_lo * static_cast<float>(dot_lo) + sw_hi * static_cast<float>(dot_hi);
    } else {
        // q8_0, 34 B (2-aligned): d f16 | 32 int8
        int dot = 0;
#pragma unroll
        for (int p = 0; p < 8; ++p) dot = dp4a(static_cast<int>(u32_align2(blk + 2 + 4 * p)), x[p], dot);
        (void)sx;
        return load_f16(blk) * static_cast<float>(dot);
    }
}

}  // namespace moe_mv

using namespace moe_mv;

#ifndef MOE_MATVEC_HOST_HARNESS  // tests/cuda/moe_matvec_host.cu builds the code above as plain C++
extern "C" __global__ void __launch_bounds__(32 * MV_WARPS)
moe_matvec(const uint8_t* __restrict__ W, const int* __restrict__ ids, int n_experts, const int8_t* __restrict__ xq,
           const float* __restrict__ xd, const int* __restrict__ xs, const float* __restrict__ route_w,
           float* __restrict__ Y, int M, int K, int top_k, long long row_bytes) {
    const int pair = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = (blockIdx.x * MV_WARPS + warp) * MV_ROWS;
    const int expert = ids[pair];
    float* out = Y + static_cast<size_t>(pair) * M;
    if (static_cast<unsigned>(expert) >= static_cast<unsigned>(n_experts)) {  // the host checks ids
        if (lane < MV_ROWS && row0 + lane < M) out[row0 + lane] = __int_as_float(0x7FC00000);  // NaN: visible
        return;
    }
    const size_t t = static_cast<size_t>(pair / top_k);
    const int groups = K / 32;
    const uint8_t* rows = W + (static_cast<size_t>(expert) * M + row0) * static_cast<size_t>(row_bytes);

    float acc[MV_ROWS];
#pragma unroll
    for (int r = 0; r < MV_ROWS; ++r) acc[r] = 0.0f;
    for (int g = lane; g < groups; g += 32) {
        const int4* xp = reinterpret_cast<const int4*>(xq + t * K + 32 * g);  // K % 32 == 0: 16-aligned
        const int4 x0 = xp[0], x1 = xp[1];
        const int x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        const float dx = xd[t * groups + g];
        const int sx = xs[t * groups + g];
#pragma unroll
        for (int r = 0; r < MV_ROWS; ++r)
            if (row0 + r < M) acc[r] = fmaf(dx, group_dot<QTYPE>(rows + r * static_cast<size_t>(row_bytes), g, x, sx), acc[r]);
    }
    const float w = route_w != nullptr ? route_w[pair] : 1.0f;
#pragma unroll
    for (int r = 0; r < MV_ROWS; ++r) {
        float v = acc[r];
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
        if (lane == 0 && row0 + r < M) out[row0 + r] = v * w;
    }
}
#endif  // MOE_MATVEC_HOST_HARNESS

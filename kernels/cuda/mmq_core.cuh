// Fused K-quant x Q8_1 int8 tensor-core GEMM ("MMQ").
//
//   C[T, M] = X[T, K] . W[M, K]^T,  W in ggml blocks (q4_K, q5_K, q6_K, q8_0), X as Q8_1.
//
// Math contract (docs/ARCHITECTURE.md): per 32-wide k group b (16-wide for q6_K)
//   w[m,k] = sw[m,b] * q_w[m,k] - mn[m,b]          (q_w unsigned for q4_K/q5_K, signed otherwise)
//   x[t,k] ~ d_x[t,b] * q_x[t,k],  s_x[t,b] = sum_k q_x[t,k]
//   C[t,m] = sum_b d_x * (sw * I[t,m,b] - mn * s_x),  I = sum_k q_w * q_x  (exact in int32)
// The integer dot I runs on mma.sync.m16n8k32.s8 (q6_K: two m16n8k16, one per 16-wide scale);
// only the float rescale differs in order from the CPU reference.
//
// Data path per k super-block (256 k):
//   global --cp.async 16B--> raw stage buffers (STAGES deep ring)
//   raw weight bytes --unpack pass--> int8 tile + float scales (one buffer)
//   int8 tiles --LDS--> mma fragments --> per-group rescale into f32 accumulators
//
// Compile-time parameters (macros, see the launcher kernels/mmq_base.py):
//   QTYPE 0=q4_K 1=q5_K 2=q6_K 3=q8_0, BM rows x BN tokens per CTA, WARPS_M x WARPS_N warps,
//   STAGES 1..4 (1 = synchronous staging), CVT 0 = I2F conversion, 1 = exact magic-number add,
//   MIN_BLOCKS for __launch_bounds__,
//   RESCALE 0 = o += (d_x * sw) * float(I); 1 = o += d_x * (sw * I) with sw * I one FFMA on the
//   mma's raw bits (see w_dot): fewer instructions per IMMA, the same two roundings,
//   Q6SUB (q6_K only) 0 = q6 - 32 by __vsubss4 (saturating, emulated in ~8 instructions per word),
//   1 = by a per-byte add that cannot carry and an xor (2 instructions; q6 - 32 never saturates),
//   FUSEQ 1 = the activations arrive as float32 rows (bf16 with XBF16 1) and are quantized to Q8_1
//   in the unpack pass (q8_1.cuh's code, so the bytes equal the standalone quantizer's); the
//   scheduler kernel sets TileArgs::x instead of xq/xd/xs (mmq.cu's grid kernel does).
//   KTAIL 1 (q8_0 only) = K may end in a short super-block (K % 256 == 128, e.g. K = 1408): see
//   issue_stage. With KTAIL 0 the preprocessor emits the code as it was before the macro existed.
#pragma once
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef FUSEQ
#define FUSEQ 0
#endif
#ifndef XBF16
#define XBF16 0
#endif
#ifndef KTAIL
#define KTAIL 0
#endif
#if FUSEQ
#include <type_traits>
#include "q8_1.cuh"
#endif

#ifndef QTYPE
#define QTYPE 0
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 64
#endif
#ifndef WARPS_M
#define WARPS_M 4
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef CVT
#define CVT 1
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef RESCALE
#define RESCALE 0
#endif
#ifndef Q6SUB
#define Q6SUB 0
#endif

namespace mmq {

constexpr int kThreads = 32 * WARPS_M * WARPS_N;
constexpr int kWarpRows = BM / WARPS_M;    // rows per warp tile
constexpr int kWarpTokens = BN / WARPS_N;  // tokens per warp tile
constexpr int kMT = kWarpRows / 16;        // m16 tiles per warp
constexpr int kNT = kWarpTokens / 8;       // n8 tiles per warp
static_assert(BM % (16 * WARPS_M) == 0, "BM must be a multiple of 16 * WARPS_M (m16 tiles per warp)");
static_assert(BN % (8 * WARPS_N) == 0, "BN must be a multiple of 8 * WARPS_N (n8 tiles per warp)");
#ifndef MMQ_MAX_STAGES  // a kernel with its own, deeper ring (mmq_wgmma_rs.cu) raises it
#define MMQ_MAX_STAGES 4
#endif
static_assert(STAGES >= 1 && STAGES <= MMQ_MAX_STAGES, "STAGES must be 1..4 (1..16 in mmq_wgmma_rs.cu)");
static_assert(kThreads <= 1024, "too many warps per CTA");
static_assert(RESCALE == 0 || RESCALE == 1, "RESCALE must be 0 or 1");
static_assert(Q6SUB == 0 || Q6SUB == 1, "Q6SUB must be 0 or 1");
static_assert(!XBF16 || FUSEQ, "XBF16 (bf16 activation rows) needs FUSEQ=1");
static_assert(!KTAIL || QTYPE == 3, "KTAIL (a k tail shorter than 256) is for q8_0 only: K-quant rows are whole "
                                    "256-wide super-blocks");
static_assert(!(KTAIL && FUSEQ), "KTAIL stages Q8_1 activation rows (FUSEQ=0)");

// ---- per-type constants: bytes per 256 k of one weight row, staged 16-byte chunks, groups ----
#if QTYPE == 0
constexpr int kRawBytes = 144, kRawChunks = 9, kGroups = 8, kGroupK = 32; constexpr bool kHasMin = true;
#elif QTYPE == 1
constexpr int kRawBytes = 176, kRawChunks = 11, kGroups = 8, kGroupK = 32; constexpr bool kHasMin = true;
#elif QTYPE == 2
// 210 bytes are only 2-byte aligned: stage the 16-byte-aligned window that covers the block.
constexpr int kRawBytes = 210, kRawChunks = 14, kGroups = 16, kGroupK = 16; constexpr bool kHasMin = false;
#elif QTYPE == 3
constexpr int kRawBytes = 272, kRawChunks = 17, kGroups = 8, kGroupK = 32; constexpr bool kHasMin = false;
#else
#error "QTYPE must be 0 (q4_K), 1 (q5_K), 2 (q6_K) or 3 (q8_0)"
#endif

// Row strides of the int8 tiles: 256 bytes + 32 so that the 8-byte fragment loads of 4
// rows x 4 lanes in a half-warp hit distinct banks (72 words = 8 mod 32).
constexpr int kQStride = 256 + 32;
constexpr int kRawStride = kRawChunks * 16;

// ---- shared memory map (bytes) ----
constexpr int kRawWBytes = BM * kRawStride;          // per stage
#if FUSEQ
// per stage: the float rows of the super-block (256 values per token), quantized into xqt.
// Row pad: the quantize pass's 16-byte loads of 8 lanes (4 of token t, 4 of t+1) then hit
// 8 distinct 16-byte bank slots (t+1 sits 16 B over for f32, 64 B for bf16, mod 128).
using XElem = std::conditional_t<XBF16 != 0, uint16_t, float>;
constexpr int kXfStride = 256 * static_cast<int>(sizeof(XElem)) + (XBF16 ? 64 : 16);
constexpr int kRawXBytes = BN * kXfStride;
constexpr int kRawXdsBytes = 0;                      // d and s go straight into xscl
constexpr int kXqBytes = BN * kQStride;              // one int8 activation tile (not per stage)
#else
constexpr int kRawXBytes = BN * kQStride;            // per stage: activation int8, used in place
constexpr int kRawXdsBytes = BN * 64;                // per stage: d[8] f32 + s[8] i32 per token
constexpr int kXqBytes = 0;                          // the int8 tile is read in place in the stage
#endif
constexpr int kStageBytes = kRawWBytes + kRawXBytes + kRawXdsBytes;
// Unpacked tiles are stored fragment-ready: one 16-byte LDS per lane per mma operand.
//   wfrag [BM/16][8 groups][32 lanes] x uint4: the lane's A registers a0..a3
//   wscl  [BM/16][8 groups][8 g]      x float4: (sw[g], sw[g+8], mn[g], mn[g+8])
//                                       q6_K:   (sw_lo[g], sw_lo[g+8], sw_hi[g], sw_hi[g+8])
//   xscl  [BN/8][8 groups][4 tq]      x float4: (d[t], d[t+1], d*s[t], d*s[t+1]), t = 2 tq
//   xqt   (FUSEQ only) [BN][kQStride] int8, the quantized tile in the stage's FUSEQ=0 layout
constexpr int kWfragBytes = BM * 256;
constexpr int kWsclBytes = BM * 64;
constexpr int kXsclBytes = BN * 64;
constexpr int kSmemBytes = STAGES * kStageBytes + kWfragBytes + kWsclBytes + kXsclBytes + kXqBytes;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
#if KTAIL
// Copies the first n (0..16) bytes of src and zero-fills the rest of the 16 (cp.async's src-size):
// n == 0 reads nothing from global memory, so src then only has to be some valid address.
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
}
__device__ __forceinline__ int chunk_bytes(int c, int valid) { return max(0, min(16, valid - 16 * c)); }
#endif
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// D = A.B + C with C held in separate (constant) registers: no per-mma zeroing moves.
__device__ __forceinline__ void mma_k32(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1, int c) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c));
}
__device__ __forceinline__ void mma_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0, int c) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(c));
}

// int32 dot -> f32. |I| < 2^22 always (32 * 127 * 127 < 2^22), so with CVT == 1 the mma starts
// from C = 0x4B400000 (the bits of 1.5 * 2^23): the int32 result, read as float, is exactly
// 1.5 * 2^23 + I, and one FADD recovers I -- no quarter-rate I2F, no zeroing, no IADD.
#if CVT == 1
constexpr int kAccInit = 0x4B400000;
__device__ __forceinline__ float to_f32(int v) { return __int_as_float(v) - 12582912.0f; }
#else
constexpr int kAccInit = 0;
__device__ __forceinline__ float to_f32(int v) { return __int2float_rn(v); }
#endif

// RESCALE == 1: the weight scale goes in first, fused with the conversion. With CVT == 1 the mma's
// raw result read as float is exactly kMagic + I (kMagic = 1.5 * 2^23 = 3 * 2^22), so
//   sw * I = fmaf(sw, raw, -sw * kMagic)
// and -sw * kMagic (dot_bias) is exact: every weight scale is an f16 times an integer of at most
// 8 bits (q6_K's int8 scale; q4_K/q5_K 6 bits; q8_0 1), i.e. at most 19 significant bits, and
// kMagic has 2, so the product fits f32's 24 (|sw| < 2^23: no overflow; f16 subnormals stay
// normal in f32). The FFMA therefore rounds the exact sw * I once -- what a plain product of
// sw and float(I) does -- and the accumulation o = fmaf(d_x, sw * I, o) rounds once more: two
// roundings per group, as RESCALE == 0's (d_x * sw) then fmaf(., I, o). One FFMA replaces the
// FADD conversion and the d_x * sw FMUL of every output element.
// With CVT == 0 the I2F result is exact already: dot_bias is 0 and w_dot a plain product.
#if CVT == 1
__device__ __forceinline__ float dot_bias(float sw) { return sw * -12582912.0f; }
__device__ __forceinline__ float w_dot(float sw, int v, float bias) { return fmaf(sw, __int_as_float(v), bias); }
#else
__device__ __forceinline__ float dot_bias(float) { return 0.0f; }
__device__ __forceinline__ float w_dot(float sw, int v, float) { return sw * __int2float_rn(v); }
#endif

__device__ __forceinline__ float f16_at(const uint8_t* p) {  // 2-byte aligned f16
    return __half2float(*reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ uint32_t u32_at2(const uint8_t* p) {  // 2-byte aligned 4 bytes
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
}

// Offset of weight row `row`, super-block `kb` in the global buffer.
__device__ __forceinline__ size_t w_offset(int row, int kb, size_t row_bytes) {
    return static_cast<size_t>(row) * row_bytes + static_cast<size_t>(kb) * kRawBytes;
}

// One CTA tile: rows [row0, row0 + BM) of W x tokens [tok0, min(tok0 + BN, tok_end)) over the
// k super-blocks [kb_begin, kb_end). Scheduler kernels (grid, persistent queue, MoE work list)
// differ only in how they fill this.
struct TileArgs {
    const uint8_t* W;    // weight rows (an expert's base for MoE), ggml blocks of row_bytes
    const int8_t* xq;    // Q8_1 activation rows, K bytes each
    const float* xd;     // [rows][K/32] scales
    const int* xs;       // [rows][K/32] int sums
#if FUSEQ
    const XElem* x;      // instead of xq/xd/xs: float (XBF16: bf16 bits) activation rows, K each
#endif
    int M, K;
    size_t row_bytes;
    int row0, tok0, tok_end, kb_begin, kb_end;
    float* out;             // out[orow(t) * M + r]
    const int* out_rows;    // orow(t) = out_rows[t] when given (MoE scatter), else t
    const float* out_scale; // optional per-token factor (MoE routing weights), indexed like out_rows
};

// ---- stage one super-block of raw weight rows and activation tokens into `stage` ----
__device__ __forceinline__ void issue_stage(uint8_t* stage, const TileArgs& A, int kb) {
    const uint8_t* __restrict__ W = A.W;
    const int row0 = A.row0, tok0 = A.tok0, M = A.M, tok_end = A.tok_end, K = A.K;
    const size_t row_bytes = A.row_bytes;
    uint8_t* raw_w = stage;
    uint8_t* raw_x = stage + kRawWBytes;
#if KTAIL
    // K = 256 n + 128 (q8_0): the last super-block holds 4 of 8 blocks. Every byte past the
    // super-block's real weight bytes (34 per 32 k), activation bytes (k) and scale groups
    // (k / 32) is zero-filled in shared memory, never read from global memory: a zero q8_0
    // block (d = 0, q = 0) against zero Q8_1 values (q = 0, d = 0, s = 0) adds exactly 0 to
    // every accumulator, and the unpack/compute code runs unchanged. The launcher pads weight
    // rows to a 16-byte stride so every super-block starts 16-byte aligned (q8_0 has no window).
    const int k_here = min(256, K - kb * 256);  // 256, or 128 in the tail
    const int w_valid = k_here / 32 * 34;
#endif
    for (int i = threadIdx.x; i < BM * kRawChunks; i += kThreads) {
        const int r = i / kRawChunks, c = i % kRawChunks;
        const int row = min(row0 + r, M - 1);  // rows past M load row M-1; never stored
        const size_t off = w_offset(row, kb, row_bytes) & ~static_cast<size_t>(15);
#if KTAIL
        const int n = chunk_bytes(c, w_valid);
        cp_async16_zfill(raw_w + r * kRawStride + c * 16, W + off + (n ? c * 16 : 0), n);
#else
        cp_async16(raw_w + r * kRawStride + c * 16, W + off + c * 16);
#endif
    }
#if FUSEQ
    constexpr int kChunks = 256 * static_cast<int>(sizeof(XElem)) / 16;  // 16-byte chunks per token
    for (int i = threadIdx.x; i < BN * kChunks; i += kThreads) {
        const int t = i / kChunks, c = i % kChunks;
        const int tok = min(tok0 + t, tok_end - 1);  // rows past the tile's tokens load the last one
        cp_async16(raw_x + t * kXfStride + c * 16,
                   reinterpret_cast<const uint8_t*>(A.x + static_cast<size_t>(tok) * K + kb * 256) + c * 16);
    }
#else
    const int8_t* __restrict__ xq = A.xq;
    const float* __restrict__ xd = A.xd;
    const int* __restrict__ xs = A.xs;
    uint8_t* raw_ds = raw_x + kRawXBytes;
    const int groups = K / 32;
    for (int i = threadIdx.x; i < BN * 20; i += kThreads) {
        const int t = i / 20, c = i % 20;
        const int tok = min(tok0 + t, tok_end - 1);  // rows past the tile's tokens load the last one
#if KTAIL
        // chunks of 16 k bytes, then 2 + 2 chunks of 4 scale groups (K % 128 == 0: whole chunks)
        const int q_n = chunk_bytes(c, k_here), ds_n = chunk_bytes((c - 16) & 1, k_here / 8);
        if (c < 16) {
            cp_async16_zfill(raw_x + t * kQStride + c * 16,
                             xq + static_cast<size_t>(tok) * K + kb * 256 + (q_n ? c * 16 : 0), q_n);
        } else if (c < 18) {
            cp_async16_zfill(raw_ds + t * 64 + (c - 16) * 16,
                             xd + static_cast<size_t>(tok) * groups + kb * 8 + (ds_n ? (c - 16) * 4 : 0), ds_n);
        } else {
            cp_async16_zfill(raw_ds + t * 64 + 32 + (c - 18) * 16,
                             xs + static_cast<size_t>(tok) * groups + kb * 8 + (ds_n ? (c - 18) * 4 : 0), ds_n);
        }
#else
        if (c < 16) {
            cp_async16(raw_x + t * kQStride + c * 16, xq + static_cast<size_t>(tok) * K + kb * 256 + c * 16);
        } else if (c < 18) {
            cp_async16(raw_ds + t * 64 + (c - 16) * 16, xd + static_cast<size_t>(tok) * groups + kb * 8 + (c - 16) * 4);
        } else {
            cp_async16(raw_ds + t * 64 + 32 + (c - 18) * 16, xs + static_cast<size_t>(tok) * groups + kb * 8 + (c - 18) * 4);
        }
#endif
    }
#endif
}

#if FUSEQ
// Quantize the staged float rows to Q8_1 in shared memory: int8 into xqt (the layout the
// compute loop reads: token t's 256 bytes at t * kQStride, natural k order) and the scales
// straight into xscl. Lane item e = (token pair tp, token parity h, group j, quarter qq): a quad
// of lanes owns one 32-block as in q8_1_quant.cu; the quads of tokens t and t+1 sit 4 lanes
// apart, so one xor-4 shuffle brings the partner's (d, s) for xscl's (t, t+1) pair.
__device__ __forceinline__ void quantize_stage(const uint8_t* raw_x, int8_t* xqt, float4* xscl) {
    // BN * 32 and kThreads are multiples of 32: a warp's lanes run the loop together (shuffles)
    for (int e = threadIdx.x; e < BN * 32; e += kThreads) {
        const int qq = e & 3, h = (e >> 2) & 1, j = (e >> 3) & 7, tp = e >> 6;
        const int t = 2 * tp + h;
        float v[8];
        load8(reinterpret_cast<const XElem*>(raw_x + t * kXfStride) + 32 * j + 8 * qq, v);
        const float d = quad_scale(v);
        uint32_t packed[2];
        const int s = quad_quantize(v, d, packed);
        *reinterpret_cast<uint2*>(xqt + t * kQStride + 32 * j + 8 * qq) = make_uint2(packed[0], packed[1]);
        const float d1 = __shfl_xor_sync(0xFFFFFFFFu, d, 4);  // token t + 1 (h = 1 lanes: t - 1)
        const int s1 = __shfl_xor_sync(0xFFFFFFFFu, s, 4);
        if ((e & 7) == 0)  // xscl entry (n8 tile tp / 4, group j, tq = tp % 4), as the FUSEQ=0 pass forms it
            xscl[((tp >> 2) * 8 + j) * 4 + (tp & 3)] =
                make_float4(d, d1, d * static_cast<float>(s), d1 * static_cast<float>(s1));
    }
}
#endif

#if QTYPE == 2
// q6_K: four int8 (q6 - 32) of quarter r (ql nibble r / 2, qh bits 2 r .. 2 r + 1).
__device__ __forceinline__ uint32_t q6_word(uint32_t ql, uint32_t qh, int r) {
    const uint32_t q6 = ((ql >> (4 * (r >> 1))) & 0x0F0F0F0Fu) | (((qh >> (2 * r)) & 0x03030303u) << 4);
#if Q6SUB
    // 0..63 -> -32..31 in each byte: q6 + 0x60 <= 0x9F carries into no neighbour, and flipping
    // bit 7 takes 0x80 off (q6 >= 32) or adds it (q6 < 32): (q6 - 32) mod 256, the int8 q6 - 32
    return (q6 + 0x60606060u) ^ 0x80808080u;
#else
    return __vsubss4(q6, 0x20202020u);  // 0..63 -> -32..31, four bytes at once
#endif
}
#endif

// One 32-bit word (4 consecutive k) of weight row r, super-block-local word wi, as int8x4.
__device__ __forceinline__ uint32_t unpack_word(const uint8_t* blk, int wi) {
    const int j = wi >> 3, p = wi & 7;  // 32-group j, word p within the group
#if QTYPE == 0
    const uint32_t qs = *reinterpret_cast<const uint32_t*>(blk + 16 + 32 * (j >> 1) + 4 * p);
    return (j & 1) ? ((qs >> 4) & 0x0F0F0F0Fu) : (qs & 0x0F0F0F0Fu);
#elif QTYPE == 1
    const uint32_t qs = *reinterpret_cast<const uint32_t*>(blk + 48 + 32 * (j >> 1) + 4 * p);
    const uint32_t qh = *reinterpret_cast<const uint32_t*>(blk + 16 + 4 * p);
    const uint32_t lo = (j & 1) ? ((qs >> 4) & 0x0F0F0F0Fu) : (qs & 0x0F0F0F0Fu);
    return lo | (((qh >> j) & 0x01010101u) << 4);
#elif QTYPE == 2
    // element e = 32 j + 4 p: half n = j / 4, quarter r = j % 4, l = 4 p
    const int n = j >> 2, r = j & 3;
    const uint32_t ql = u32_at2(blk + 64 * n + 32 * (r & 1) + 4 * p);
    const uint32_t qh = u32_at2(blk + 128 + 32 * n + 4 * p);
    return q6_word(ql, qh, r);
#else
    return u32_at2(blk + 34 * j + 2 + 4 * p);
#endif
}

__device__ __forceinline__ const uint8_t* raw_block(const uint8_t* raw_w, int r, int row0, int M, int kb,
                                                    size_t row_bytes) {
    if constexpr (kRawBytes % 16 == 0) {
        return raw_w + r * kRawStride;  // blocks start 16-byte aligned: no shift
    } else {
        const int row = min(row0 + r, M - 1);
        return raw_w + r * kRawStride + (w_offset(row, kb, row_bytes) & 15);
    }
}

#if QTYPE == 2
// The fragment-ready weight tile of one q6_K super-block: wfrag[(mt * 8 + j) * 32 + lane] =
// (row g, row g + 8) x (word 8 j + q, 8 j + q + 4) of m16 tile mt, 32-group j = 4 n + r (the
// natural k16 halves: q = lane % 4). The four quarters r of a 128-k half n share their ql bytes
// (r and r + 2: low and high nibbles) and their qh bytes, so one item decodes all four from 3
// loads per word position instead of 4 x 2: the unpack is the larger part of q6_K's super-block.
__device__ __forceinline__ void unpack_q6_tile(uint4* wfrag, const uint8_t* raw_w, int row0, int M, int kb,
                                               size_t rb) {
    for (int e = threadIdx.x; e < BM * 4; e += kThreads) {  // (m16 tile, half n, lane)
        const int ln = e & 31, n = (e >> 5) & 1, mt = e >> 6;
        const int rg = mt * 16 + (ln >> 2), q = ln & 3;
        const uint8_t* blk[2] = {raw_block(raw_w, rg, row0, M, kb, rb), raw_block(raw_w, rg + 8, row0, M, kb, rb)};
        uint32_t w[4][4];  // [quarter r][row g lo, row g + 8 lo, row g hi, row g + 8 hi]
#pragma unroll
        for (int h = 0; h < 2; ++h)      // word position p = q + 4 h
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {  // row g, g + 8
                const uint8_t* b = blk[rr];
                const int p = q + 4 * h;
                const uint32_t ql0 = u32_at2(b + 64 * n + 4 * p), ql1 = u32_at2(b + 64 * n + 32 + 4 * p);
                const uint32_t qh = u32_at2(b + 128 + 32 * n + 4 * p);
#pragma unroll
                for (int r = 0; r < 4; ++r) w[r][2 * h + rr] = q6_word((r & 1) ? ql1 : ql0, qh, r);
            }
#pragma unroll
        for (int r = 0; r < 4; ++r)
            wfrag[(mt * 8 + 4 * n + r) * 32 + ln] = make_uint4(w[r][0], w[r][1], w[r][2], w[r][3]);
    }
}
#endif

// Group scale sw and min mn of row block `blk`, group g (float32 ops as the dequantizer does them).
__device__ __forceinline__ void group_scale(const uint8_t* blk, int g, float& sw, float& mn) {
#if QTYPE == 0 || QTYPE == 1
    const uint8_t* s = blk + 4;
    int sc, m;
    if (g < 4) {
        sc = s[g] & 63;
        m = s[g + 4] & 63;
    } else {
        sc = (s[g + 4] & 0xF) | ((s[g - 4] >> 6) << 4);
        m = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
    }
    sw = f16_at(blk) * static_cast<float>(sc);
    mn = f16_at(blk + 2) * static_cast<float>(m);
#elif QTYPE == 2
    sw = f16_at(blk + 208) * static_cast<float>(static_cast<int8_t>(blk[192 + g]));
    mn = 0.0f;
#else
    sw = f16_at(blk + 34 * g);
    mn = 0.0f;
#endif
}


// Store a warp's f32 accumulators (m16n8 C fragments: lane holds rows (r, r+8) x tokens
// (t, t+1)) to out[orow(t) * M + r], orow(t) = out_rows[t] when given; rows >= M and tokens
// >= T are skipped. Shared by every kernel whose accumulators have this fragment layout.
__device__ __forceinline__ void store_acc(const float (&acc)[kMT][kNT][4], float* out, const int* out_rows,
                                          const float* out_scale, int M, int T, int r0, int t0, int g, int tq) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
            const int r = r0 + mt * 16 + g;
            const int t = t0 + nt * 8 + 2 * tq;
            const float* o = acc[mt][nt];
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // tokens t and t + 1
                if (t + h >= T) continue;
                const size_t orow = out_rows ? out_rows[t + h] : t + h;
                const float f = out_scale ? out_scale[orow] : 1.0f;
                if (r < M) out[orow * M + r] = f * o[h];
                if (r + 8 < M) out[orow * M + r + 8] = f * o[2 + h];
            }
        }
}

__device__ __forceinline__ void mmq_tile(uint8_t* smem, const TileArgs& A) {
    uint8_t* stages = smem;
    uint4* wfrag = reinterpret_cast<uint4*>(smem + STAGES * kStageBytes);
    float4* wscl = reinterpret_cast<float4*>(smem + STAGES * kStageBytes + kWfragBytes);
    float4* xscl = reinterpret_cast<float4*>(smem + STAGES * kStageBytes + kWfragBytes + kWsclBytes);
#if FUSEQ
    int8_t* xqt = reinterpret_cast<int8_t*>(smem + STAGES * kStageBytes + kWfragBytes + kWsclBytes + kXsclBytes);
#endif
    const int M = A.M, row0 = A.row0, tok0 = A.tok0, T = A.tok_end;
    const int kb_begin = A.kb_begin, n = A.kb_end - A.kb_begin;
    const size_t rb = A.row_bytes;
    __syncthreads();  // a persistent CTA's previous tile is done with the shared buffers

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int wr0 = (warp / WARPS_N) * kWarpRows;   // warp's first row in the CTA tile
    const int wt0 = (warp % WARPS_N) * kWarpTokens; // warp's first token in the CTA tile

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    auto stage_ptr = [&](int i) { return stages + (i % STAGES) * kStageBytes; };

    if constexpr (STAGES > 1) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < n) issue_stage(stage_ptr(s), A, kb_begin + s);
            cp_async_commit();
        }
    }

    for (int i = 0; i < n; ++i) {
        const int kb = kb_begin + i;
        uint8_t* st = stage_ptr(i);
        if constexpr (STAGES == 1) {
            __syncthreads();  // previous compute finished reading the single stage
            issue_stage(st, A, kb);
            cp_async_commit();
            cp_async_wait<0>();
        } else {
            cp_async_wait<STAGES - 2>();  // tile i has landed (this thread's copies)
        }
        __syncthreads();  // everyone's copies visible; compute(i-1) done -> unpacked buffers free

        // ---- unpack: fragment-ready weight tile, weight scales, activation scales ----
        const uint8_t* raw_w = st;
#if QTYPE == 2
        unpack_q6_tile(wfrag, raw_w, row0, M, kb, rb);
#else
        for (int e = threadIdx.x; e < BM * 16; e += kThreads) {  // (m16 tile, group, lane)
            const int ln = e & 31, j = (e >> 5) & 7, mt = e >> 8;
            const int rg = mt * 16 + (ln >> 2), q = ln & 3;
            const uint8_t* b0 = raw_block(raw_w, rg, row0, M, kb, rb);
            const uint8_t* b8 = raw_block(raw_w, rg + 8, row0, M, kb, rb);
            // word index within the super-block of slot s: the kappa permutation (lane q holds
            // group bytes 8q..8q+7)
            const int w_lo = j * 8 + 2 * q, w_hi = w_lo + 1;
            wfrag[e] = make_uint4(unpack_word(b0, w_lo), unpack_word(b8, w_lo), unpack_word(b0, w_hi),
                                  unpack_word(b8, w_hi));
        }
#endif
        for (int e = threadIdx.x; e < BM * 4; e += kThreads) {  // (m16 tile, group, g)
            const int gg = e & 7, j = (e >> 3) & 7, mt = e >> 6;
            const uint8_t* b0 = raw_block(raw_w, mt * 16 + gg, row0, M, kb, rb);
            const uint8_t* b8 = raw_block(raw_w, mt * 16 + gg + 8, row0, M, kb, rb);
            float s0, m0, s8, m8, unused;
            if constexpr (kGroupK == 32) {
                group_scale(b0, j, s0, m0);
                group_scale(b8, j, s8, m8);
            } else {  // q6_K: the high-half 16-wide scales take the min slots
                group_scale(b0, 2 * j, s0, unused);
                group_scale(b8, 2 * j, s8, unused);
                group_scale(b0, 2 * j + 1, m0, unused);
                group_scale(b8, 2 * j + 1, m8, unused);
            }
            wscl[e] = make_float4(s0, s8, m0, m8);
        }
#if FUSEQ
        quantize_stage(st + kRawWBytes, xqt, xscl);
#else
        const uint8_t* raw_ds = st + kRawWBytes + kRawXBytes;
        for (int e = threadIdx.x; e < BN * 4; e += kThreads) {  // (n8 tile, group, tq)
            const int q = e & 3, j = (e >> 2) & 7, nt = e >> 5;
            const int t = nt * 8 + 2 * q;
            const float d0 = reinterpret_cast<const float*>(raw_ds + t * 64)[j];
            const float d1 = reinterpret_cast<const float*>(raw_ds + (t + 1) * 64)[j];
            const int s0 = reinterpret_cast<const int*>(raw_ds + t * 64 + 32)[j];
            const int s1 = reinterpret_cast<const int*>(raw_ds + (t + 1) * 64 + 32)[j];
            xscl[e] = make_float4(d0, d1, d0 * static_cast<float>(s0), d1 * static_cast<float>(s1));
        }
#endif

        if constexpr (STAGES > 1) {  // refill the slot that tile i-1 used
            if (i + STAGES - 1 < n)
                issue_stage(stage_ptr(i + STAGES - 1), A, kb + STAGES - 1);
            cp_async_commit();
        }
        __syncthreads();  // unpacked tiles visible

        // ---- compute: 8 groups of 32 k ----
#if !FUSEQ
        const int8_t* xqt = reinterpret_cast<const int8_t*>(st + kRawWBytes);
#endif
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            uint32_t b[kNT][2];  // B fragments (activations) of the warp's n8 tiles
            float4 xs4[kNT];     // (d[t], d[t+1], d*s[t], d*s[t+1])
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
                const int t = wt0 + nt * 8;
                const int8_t* p = xqt + (t + g) * kQStride + 32 * j;
                if constexpr (kGroupK == 32) {  // kappa permutation: bytes 8tq..8tq+7
                    const uint2 v = *reinterpret_cast<const uint2*>(p + 8 * tq);
                    b[nt][0] = v.x;
                    b[nt][1] = v.y;
                } else {  // q6_K: natural order, one 16-k half per m16n8k16
                    b[nt][0] = *reinterpret_cast<const uint32_t*>(p + 4 * tq);
                    b[nt][1] = *reinterpret_cast<const uint32_t*>(p + 16 + 4 * tq);
                }
                xs4[nt] = xscl[((t >> 3) * 8 + j) * 4 + tq];
            }
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
                const int mg = (wr0 >> 4) + mt;  // m16 tile index in the CTA
                const uint4 a = wfrag[(mg * 8 + j) * 32 + lane];
                const float4 ws = wscl[(mg * 8 + j) * 8 + g];
                // RESCALE == 1: w_dot's biases of rows g and g + 8 (q6_K: of the high halves' scales),
                // once per (group, m16 tile) for all its n8 tiles. (q8_0 could read them from its unused
                // min slots, but the 16-byte load of ws then costs the 512-thread tile a spill.)
                float nb0 = 0.0f, nb8 = 0.0f;
                if constexpr (RESCALE == 1) {
                    nb0 = (kGroupK == 16) ? dot_bias(ws.z) : dot_bias(ws.x);
                    nb8 = (kGroupK == 16) ? dot_bias(ws.w) : dot_bias(ws.y);
                }
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt) {
                    float* o = acc[mt][nt];
                    const float4 x4 = xs4[nt];
                    if constexpr (kGroupK == 32 && RESCALE == 1) {
                        int c[4];
                        mma_k32(c, a.x, a.y, a.z, a.w, b[nt][0], b[nt][1], kAccInit);
                        o[0] = fmaf(x4.x, w_dot(ws.x, c[0], nb0), o[0]);
                        o[1] = fmaf(x4.y, w_dot(ws.x, c[1], nb0), o[1]);
                        o[2] = fmaf(x4.x, w_dot(ws.y, c[2], nb8), o[2]);
                        o[3] = fmaf(x4.y, w_dot(ws.y, c[3], nb8), o[3]);
                        if constexpr (kHasMin) {  // rank-1 weight-min term
                            o[0] = fmaf(-ws.z, x4.z, o[0]);
                            o[1] = fmaf(-ws.z, x4.w, o[1]);
                            o[2] = fmaf(-ws.w, x4.z, o[2]);
                            o[3] = fmaf(-ws.w, x4.w, o[3]);
                        }
                    } else if constexpr (kGroupK == 16 && RESCALE == 1) {
                        // q6_K: sw_lo * I_lo + round(sw_hi * I_hi) in one FFMA, then d_x: 4 per element
                        int cl[4], ch[4];
                        mma_k16(cl, a.x, a.y, b[nt][0], kAccInit);
                        mma_k16(ch, a.z, a.w, b[nt][1], kAccInit);
                        o[0] = fmaf(x4.x, fmaf(ws.x, to_f32(cl[0]), w_dot(ws.z, ch[0], nb0)), o[0]);
                        o[1] = fmaf(x4.y, fmaf(ws.x, to_f32(cl[1]), w_dot(ws.z, ch[1], nb0)), o[1]);
                        o[2] = fmaf(x4.x, fmaf(ws.y, to_f32(cl[2]), w_dot(ws.w, ch[2], nb8)), o[2]);
                        o[3] = fmaf(x4.y, fmaf(ws.y, to_f32(cl[3]), w_dot(ws.w, ch[3], nb8)), o[3]);
                    } else if constexpr (kGroupK == 32) {
                        int c[4];
                        mma_k32(c, a.x, a.y, a.z, a.w, b[nt][0], b[nt][1], kAccInit);
                        o[0] = fmaf(x4.x * ws.x, to_f32(c[0]), o[0]);
                        o[1] = fmaf(x4.y * ws.x, to_f32(c[1]), o[1]);
                        o[2] = fmaf(x4.x * ws.y, to_f32(c[2]), o[2]);
                        o[3] = fmaf(x4.y * ws.y, to_f32(c[3]), o[3]);
                        if constexpr (kHasMin) {  // rank-1 weight-min term
                            o[0] = fmaf(-ws.z, x4.z, o[0]);
                            o[1] = fmaf(-ws.z, x4.w, o[1]);
                            o[2] = fmaf(-ws.w, x4.z, o[2]);
                            o[3] = fmaf(-ws.w, x4.w, o[3]);
                        }
                    } else {  // q6_K: two k16 halves, each with its own 16-wide scale
                        int cl[4], ch[4];
                        mma_k16(cl, a.x, a.y, b[nt][0], kAccInit);
                        mma_k16(ch, a.z, a.w, b[nt][1], kAccInit);
                        o[0] = fmaf(x4.x, fmaf(ws.x, to_f32(cl[0]), ws.z * to_f32(ch[0])), o[0]);
                        o[1] = fmaf(x4.y, fmaf(ws.x, to_f32(cl[1]), ws.z * to_f32(ch[1])), o[1]);
                        o[2] = fmaf(x4.x, fmaf(ws.y, to_f32(cl[2]), ws.w * to_f32(ch[2])), o[2]);
                        o[3] = fmaf(x4.y, fmaf(ws.y, to_f32(cl[3]), ws.w * to_f32(ch[3])), o[3]);
                    }
                }
            }
        }
    }
    store_acc(acc, A.out, A.out_rows, A.out_scale, M, T, row0 + wr0, tok0 + wt0, g, tq);
}

}  // namespace mmq

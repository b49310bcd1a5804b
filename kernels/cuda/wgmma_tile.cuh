// The pieces every wgmma kernel of the `wgmma` lever shares (mmq_wgmma.cu: all warpgroups
// load, dequantize and multiply; mmq_wgmma_ws.cu: a producer warpgroup loads and dequantizes
// for consumer warpgroups that only multiply): the 128B-swizzled tile layout and its
// descriptors, the copies of one 64-k step, the dequantize of one step, the wgmma issue.
//
// One step = 64 k = one 128-byte row of f16 = the width of the wgmma 128B swizzle atom.
//   activation chunk: BN token rows x 128 B; weight (A) chunk: BM rows x 128 B, both swizzled;
//   raw slot: one 256-k super-block of BM weight rows (kRawStride bytes each), read by 4 steps.
#pragma once
#include <cuda_bf16.h>
#include "mmq_core.cuh"
#include "mbarrier.cuh"
#include "dequant16.cuh"
#include "wgmma_ops.cuh"
#include "wgmma_smem.cuh"

namespace mmqwg {

using namespace mmq;

constexpr int kSteps = 4;          // 64-k steps per 256-k super-block
constexpr int kXChunk = BN * 128;  // activation chunk: BN rows x 64 f16
constexpr int kAChunk = BM * 128;  // dequantized weight chunk: BM rows x 64 f16
constexpr int kRawSlots = 2;
constexpr int kAlign = 1024;       // swizzle atoms (8 rows x 128 B) must be 1024-aligned
static_assert(BM % 64 == 0, "BM = 64 rows per consumer warpgroup");
static_assert(BN % 8 == 0 && BN <= 256, "BN must be a wgmma N: a multiple of 8 up to 256");
static_assert(WARPS_N == 1, "a warpgroup spans all BN tokens");

__device__ __forceinline__ uint8_t* align_smem(uint8_t* p) {
    const uint32_t base = smem_addr(p);
    return p + (((base + kAlign - 1) & ~(kAlign - 1)) - base);
}

// Arrive on `bar` once every cp.async this thread issued so far has landed (the arrival counts
// against the count the barrier was initialised with: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// TMA: the box at (c0 innermost, c1) of the tensor map at `tmap` (a global-memory CUtensorMap),
// landing as the map's swizzle says, counted against `bar` like bulk_copy_g2s.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tmap, int c0, int c1, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            smem_addr(dst)),
        "l"(tmap), "r"(c0), "r"(c1), "r"(smem_addr(bar))
        : "memory");
}

// Super-blocks [begin, end) of split z of `splits` (gridDim.z) over nkb.
__device__ __forceinline__ void split_range(int nkb, int& begin, int& end) {
    begin = static_cast<int>((static_cast<long long>(nkb) * blockIdx.z) / gridDim.z);
    end = static_cast<int>((static_cast<long long>(nkb) * (blockIdx.z + 1)) / gridDim.z);
}

// Activation chunk of global 64-k step kc for tokens [tok0, tok0 + BN), copied by threads
// tid = 0..nthr-1 into the swizzled layout.
__device__ __forceinline__ void issue_x(uint8_t* xs, int tid, int nthr, const __half* __restrict__ x, int tok0,
                                        int T, int K, int kc) {
    for (int i = tid; i < BN * 8; i += nthr) {
        const int t = i >> 3, c = i & 7;
        const int tok = min(tok0 + t, T - 1);  // tokens past T load the last one; never stored
        cp_async16(xs + swz(t, c), x + static_cast<size_t>(tok) * K + kc * 64 + c * 8);
    }
}

// Raw super-block kb of weight rows [row0, row0 + BM) into one raw slot.
__device__ __forceinline__ void issue_raw(uint8_t* raw_w, int tid, int nthr, const uint8_t* __restrict__ W,
                                          int row0, int M, int kb, size_t row_bytes) {
    for (int i = tid; i < BM * kRawChunks; i += nthr) {
        const int r = i / kRawChunks, c = i % kRawChunks;
        const int row = min(row0 + r, M - 1);  // rows past M load row M-1; never stored
        const size_t off = w_offset(row, kb, row_bytes) & ~static_cast<size_t>(15);
        cp_async16(raw_w + r * kRawStride + c * 16, W + off + c * 16);
    }
}

// Dequantize step kc's 64 k of the BM rows into the swizzled f16 tile `a`: item (row, 8-k chunk).
__device__ __forceinline__ void dequant_step(uint8_t* a, const uint8_t* raw_w, int kc, int row0, int M,
                                             size_t row_bytes, int tid, int nthr) {
    const int kb = kc / kSteps, sub = kc % kSteps;
#pragma unroll
    for (int e = tid; e < BM * 8; e += nthr) {
        const int r = e >> 3, c = e & 7;
        const uint8_t* blk = raw_block(raw_w, r, row0, M, kb, row_bytes);
        const int k = 64 * sub + 8 * c;  // super-block-local k of the chunk's first weight
        float sw, mn;
        group_scale(blk, k / kGroupK, sw, mn);
        const uint2 lo = dequant_word(unpack_word(blk, k / 4), sw, mn);
        const uint2 hi = dequant_word(unpack_word(blk, k / 4 + 1), sw, mn);
        *reinterpret_cast<uint4*>(a + swz(r, c)) = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
}

// One step's multiply for a warpgroup: 4 x wgmma m64nBNk16 on its 64 rows of the A chunk at
// a_addr and the activation chunk at x_addr, committed as one async group.
__device__ __forceinline__ void mma_step(float (&acc)[BN / 2], uint32_t a_addr, uint32_t x_addr) {
    wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16)  // +32 bytes along the swizzled row per k16
        wg::wgmma_f16<BN>(acc, smem_desc(a_addr + 32 * k16), smem_desc(x_addr + 32 * k16));
    wgmma_commit();
}

// The same as bf16 bits (round to nearest even), C [T, M] written once (no split K): the output a 16-bit model
// passes on, half the bytes of f32.
__device__ __forceinline__ void store_tile_bf16(const float (&acc)[BN / 2], uint16_t* C, int M, int T, int row0,
                                                int tok0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r = row0 + 16 * warp + (lane >> 2);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
        const int t = tok0 + 8 * i + 2 * (lane & 3);
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // tokens t and t + 1; rows r and r + 8
            if (t + h >= T) continue;
            uint16_t* o = C + static_cast<size_t>(t + h) * M;
            if (r < M) o[r] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[4 * i + h]));
            if (r + 8 < M) o[r + 8] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[4 * i + 2 + h]));
        }
    }
}

// The same output through shared memory (EPI = 1): 128 two-byte stores per thread, each warp
// instruction 4 tokens x 16 B, become 16 stmatrix and 16 sixteen-byte stores of whole 32-byte
// sectors. Per warp and 64 tokens: stmatrix .trans turns the fragments (rows x tokens) into
// 2 KB of token rows of 16 bf16 (`stage`, the warp's own), read back 16 B per lane. The 16-byte
// halves of a token row swap every 4 tokens, so neither side has bank conflicts. Eight rows that
// pass M, or a C whose rows are not 16-byte aligned (M % 8), are stored element by element.
// (A template, so that only a kernel that stores this way needs BN % 16 == 0.)
template <int W = BN>
__device__ __forceinline__ void store_tile_bf16_staged(const float (&acc)[W / 2], uint16_t* C, int M, int T,
                                                       int row0, int tok0, uint8_t* stage) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr int kRound = W % 64 == 0 ? 64 : W % 32 == 0 ? 32 : 16;  // tokens per round (2 KB at most)
    static_assert(W % 16 == 0, "EPI: whole 16-token stmatrix groups");
    uint8_t* buf = stage + warp * 2048;
    auto at = [&](int tl, int half) { return smem_addr(buf + tl * 32 + ((half ^ ((tl >> 2) & 1)) << 4)); };
    auto bf2 = [&](int k) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[k], acc[k + 1]);
        return *reinterpret_cast<const uint32_t*>(&v);
    };
    const int r = row0 + 16 * warp + 8 * (lane & 1);  // this lane's 8 rows
    const bool whole = r + 8 <= M && M % 8 == 0;
#pragma unroll
    for (int q = 0; q < W / kRound; ++q) {
#pragma unroll
        for (int p = 0; p < kRound / 16; ++p) {  // n8 blocks i, i + 1; matrix j = (block i + j / 2, rows 8 (j % 2) ..)
            const int i = q * (kRound / 8) + 2 * p, j = lane >> 3;
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                         ::"r"(at(16 * p + 8 * (j >> 1) + (lane & 7), j & 1)), "r"(bf2(4 * i)), "r"(bf2(4 * i + 2)),
                         "r"(bf2(4 * i + 4)), "r"(bf2(4 * i + 6))
                         : "memory");
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < kRound / 16; ++u) {  // 16 token rows of 32 B per warp instruction
            const int tl = 16 * u + (lane >> 1), t = tok0 + q * kRound + tl;
            uint4 v;
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(at(tl, lane & 1)) : "memory");
            if (t >= T) continue;
            uint16_t* o = C + static_cast<size_t>(t) * M + r;
            if (whole) {
                *reinterpret_cast<uint4*>(o) = v;
            } else {
                const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int k = 0; k < 8; ++k)  // constant k: w stays in registers
                    if (r + k < M) o[k] = static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2)));
            }
        }
        __syncwarp();  // the round's reads are done before the next round's stmatrix
    }
}

// Consumer warps' accumulators (rows 16 warp + g (+8), tokens 8 i + 2 tq (+1)) to C.
__device__ __forceinline__ void store_tile(const float (&acc)[BN / 2], float* C, int M, int T, int row0, int tok0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    store_acc(reinterpret_cast<const float(&)[1][BN / 8][4]>(acc), C + static_cast<size_t>(blockIdx.z) * T * M,
              nullptr, nullptr, M, T, row0 + 16 * warp, tok0, lane >> 2, lane & 3);
}

}  // namespace mmqwg

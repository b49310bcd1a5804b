// Grouped expert GEMM (ggml's mul_mat_id) on the fused int8 MMQ tile of mmq_core.cuh:
//
//   Y[p, :] = route_w[p] * W[e(p)] . x[p / top_k],   p = t * top_k + slot,  Y viewed as [T * top_k, M]
//
// Inputs come from the GPU router (kernels/cuda/moe_route.cu, kernels.moe_route_gpu): the routed
// pairs bucketed by expert (`order`: bucket position -> p), their Q8_1 activation rows gathered
// in bucket order (gq/gd/gs), and the work list rows (expert, token_offset, token_count) that cut
// each expert's bucket into token tiles of at most BN positions; padding rows (-1, n_routed, 0)
// fill it up to its capacity, so the grid is sized without reading the tile count back.
//
// One CTA per (work item, row tile). The CTAs of expert e's work items are one contiguous range of
// blockIdx in either ORDER, so its weight is touched by neighbouring CTAs only; ORDER picks the
// walk inside the range:
//   0  token tile major: the row tiles of one token tile back to back (its gathered tokens are
//      re-read from L2 by its row tiles; the next token tile follows n_row CTAs later);
//   1  row tile major: all token tiles of one weight row tile back to back, so they run at the
//      same time and the row tile is read from DRAM once, the other token tiles hitting L2.
// Global loads of weights are once per token tile either way; kernels.moe_traffic counts both
// those (what L2 serves) and the DRAM reads an LRU model of the L2 predicts for this launch order.
//
// K: a multiple of 256, or for q8_0 (KTAIL=1) of 128 -- the last super-block of 128 k is
// zero-filled in shared memory (mmq_core.cuh, issue_stage).
//
// W: experts at a stride of expert_stride bytes (a multiple of 16: cp.async needs every expert's
// base 16-byte aligned; q6_K rows are 210-byte multiples), >= 16 bytes of padding after the last.
//
// offsets: the router's per-expert bucket offsets [E + 1] (ORDER 1 finds an expert's tiles from it);
// the work list must be cut at token_tile = BN.
//
// Launch: grid (n_row_tiles * work_capacity), block 32 * WARPS_M * WARPS_N, dynamic smem
// kSmemBytes (mmq_smem_bytes), n_row_tiles = ceil(M / BM).
#include "mmq_core.cuh"

#ifndef ORDER
#define ORDER 1
#endif
static_assert(ORDER == 0 || ORDER == 1, "ORDER must be 0 (token tile major) or 1 (row tile major)");

using namespace mmq;

extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_moe_grouped(const uint8_t* __restrict__ W, long long expert_stride, const int* __restrict__ work,
                const int8_t* __restrict__ gq, const float* __restrict__ gd, const int* __restrict__ gs,
                const int* __restrict__ order, const int* __restrict__ offsets, const float* __restrict__ route_w,
                float* __restrict__ Y, int M, int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_row = (M + BM - 1) / BM;
    const int* item = work + 3 * static_cast<size_t>(blockIdx.x / n_row);
    const int expert = item[0];
    if (expert < 0) return;  // padding row: the whole CTA leaves before any barrier
#if ORDER == 0
    const int row_tile = blockIdx.x % n_row;
    const int tok0 = item[1], tok_end = item[1] + item[2];
#else
    // expert e's items are work rows [first, first + tiles): CTAs [first * n_row, (first + tiles) * n_row)
    const int begin = offsets[expert], end = offsets[expert + 1];
    const int tiles = (end - begin + BN - 1) / BN;
    const int first = static_cast<int>(blockIdx.x / n_row) - (item[1] - begin) / BN;
    const int local = static_cast<int>(blockIdx.x) - first * n_row;
    const int row_tile = local / tiles;
    const int tok0 = begin + (local % tiles) * BN, tok_end = min(tok0 + BN, end);
#endif
    TileArgs a;
    a.W = W + static_cast<size_t>(expert) * static_cast<size_t>(expert_stride);
    a.xq = gq; a.xd = gd; a.xs = gs;
    a.M = M; a.K = K; a.row_bytes = static_cast<size_t>(row_bytes);
    a.row0 = row_tile * BM;
    a.tok0 = tok0;
    a.tok_end = tok_end;
    a.kb_begin = 0;
    a.kb_end = (K + 255) / 256;  // K % 256 != 0 only with KTAIL (the launcher checks)
    a.out = Y;
    a.out_rows = order;     // bucket position -> output row p
    a.out_scale = route_w;  // indexed by p; null: no routing weights
    mmq_tile(smem, a);
}

// Dynamic shared memory this configuration needs; the launcher checks its own formula against it.
extern "C" __constant__ int mmq_smem_bytes = kSmemBytes;

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
// One CTA per (work item, row tile): the row tile moves fastest, so an item's gathered tokens are
// re-read from L2 by its row tiles, and an expert's next token tile follows n_row CTAs later while
// its weight rows are still in L2. Each expert's weight row tile is read once per token tile.
//
// W: experts at a stride of expert_stride bytes (a multiple of 16: cp.async needs every expert's
// base 16-byte aligned; q6_K rows are 210-byte multiples), >= 16 bytes of padding after the last.
//
// Launch: grid (n_row_tiles * work_capacity), block 32 * WARPS_M * WARPS_N, dynamic smem
// kSmemBytes (mmq_smem_bytes), n_row_tiles = ceil(M / BM).
#include "mmq_core.cuh"

using namespace mmq;

extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_moe_grouped(const uint8_t* __restrict__ W, long long expert_stride, const int* __restrict__ work,
                const int8_t* __restrict__ gq, const float* __restrict__ gd, const int* __restrict__ gs,
                const int* __restrict__ order, const float* __restrict__ route_w, float* __restrict__ Y, int M,
                int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int n_row = (M + BM - 1) / BM;
    const int* item = work + 3 * static_cast<size_t>(blockIdx.x / n_row);
    const int expert = item[0];
    if (expert < 0) return;  // padding row: the whole CTA leaves before any barrier
    TileArgs a;
    a.W = W + static_cast<size_t>(expert) * static_cast<size_t>(expert_stride);
    a.xq = gq; a.xd = gd; a.xs = gs;
    a.M = M; a.K = K; a.row_bytes = static_cast<size_t>(row_bytes);
    a.row0 = (blockIdx.x % n_row) * BM;
    a.tok0 = item[1];
    a.tok_end = item[1] + item[2];
    a.kb_begin = 0;
    a.kb_end = K / 256;
    a.out = Y;
    a.out_rows = order;     // bucket position -> output row p
    a.out_scale = route_w;  // indexed by p; null: no routing weights
    mmq_tile(smem, a);
}

// Dynamic shared memory this configuration needs; the launcher checks its own formula against it.
extern "C" __constant__ int mmq_smem_bytes = kSmemBytes;

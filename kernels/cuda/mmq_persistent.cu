// Fused K-quant x Q8_1 int8 MMQ, persistent schedule: a fixed grid of resident CTAs
// (sm_count x CTAS_PER_SM, chosen at launch) claims work items from a global atomic queue
// until none is left. The math, staging and fragment layout live in mmq_core.cuh.
//
// Work item = (tile, k chunk): tile -> (row tile, token tile) by ORDER (mmq_tile_order.cuh),
// k chunk s of `splits` covers super-blocks [nkb * s / splits, nkb * (s + 1) / splits).
// Items of one tile are consecutive in the queue.
//   splits == 1: the tile is written straight to C.
//   splits > 1 (SPLIT_MODE 1, stream-K style, for small T): each chunk writes its partial
//     sums to partial[s][T][M]; the CTA that completes a tile's last chunk (per-tile arrival
//     counter) sums the tile's partials in chunk order into C -- no second launch, and the
//     same summation order as mmq.cu's split-K reduce.
//
// counters (int32, zero before the first launch; the kernel leaves them zero again, so a
// launcher never resets them between runs):
//   [0] next queue index  [1] CTAs finished  [2 + tile] chunks of `tile` finished (splits > 1)
//
// Launch: grid (n_ctas), block 32 * WARPS_M * WARPS_N, dynamic smem kSmemBytes (mmq_smem_bytes).
#include "mmq_core.cuh"
#include "mmq_tile_order.cuh"

#ifndef ORDER
#define ORDER 0
#endif
#ifndef GROUP_ROWS
#define GROUP_ROWS 8
#endif
#ifndef SPLIT_MODE
#define SPLIT_MODE 0
#endif
static_assert(SPLIT_MODE == 0 || SPLIT_MODE == 1, "SPLIT_MODE must be 0 (none) or 1 (stream-K k chunks)");

using namespace mmq;

namespace persistent {

constexpr int kQueue = 0, kFinished = 1, kTileArrivals = 2;

#if SPLIT_MODE == 1
// Called by the whole CTA after it wrote chunk partials of `tile`: the last arrival sums them.
__device__ __forceinline__ void reduce_if_last_chunk(const float* __restrict__ partial, float* __restrict__ C,
                                                     int* __restrict__ arrivals, int splits, int row0, int tok0,
                                                     int M, int T, int& last_flag) {
    __threadfence();  // this CTA's partial stores are visible device-wide before its arrival counts
    __syncthreads();
    if (threadIdx.x == 0) {
        last_flag = atomicAdd(arrivals, 1) == splits - 1;
        if (last_flag) *arrivals = 0;  // every chunk is in: clean for the next launch
    }
    __syncthreads();
    if (!last_flag) return;
    __threadfence();
    const int rows = min(BM, M - row0), toks = min(BN, T - tok0);
    const size_t plane = static_cast<size_t>(T) * M;
    for (int i = threadIdx.x; i < rows * toks; i += kThreads) {
        const size_t at = static_cast<size_t>(tok0 + i / rows) * M + row0 + i % rows;
        float s = 0.0f;
        for (int z = 0; z < splits; ++z) s += __ldcg(partial + z * plane + at);  // L2: other SMs wrote them
        C[at] = s;
    }
}
#endif

}  // namespace persistent

extern "C" __global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
mmq_gemm_persistent(const uint8_t* __restrict__ W, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                    const int* __restrict__ xs, float* __restrict__ C, float* __restrict__ partial,
                    int* __restrict__ counters, int M, int T, int K, long long row_bytes, int splits) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ int claimed;
#if SPLIT_MODE == 1
    __shared__ int last_flag;
#endif
    const int nkb = K / 256;
    const int n_row = (M + BM - 1) / BM, n_tok = (T + BN - 1) / BN;
    const int n_items = n_row * n_tok * splits;
    TileArgs a;
    a.W = W; a.xq = xq; a.xd = xd; a.xs = xs;
    a.M = M; a.K = K; a.row_bytes = static_cast<size_t>(row_bytes);
    a.tok_end = T;
    a.out_rows = nullptr;
    a.out_scale = nullptr;
    for (;;) {
        // every thread reads `claimed` before mmq_tile's opening barrier, so thread 0's next
        // write cannot overtake a slow reader
        if (threadIdx.x == 0) claimed = atomicAdd(&counters[persistent::kQueue], 1);
        __syncthreads();
        const int item = claimed;
        if (item >= n_items) break;
        const int tile = item / splits, chunk = item % splits;
        const TileCoord tc = tile_coord<ORDER, GROUP_ROWS>(tile, n_row, n_tok);
        a.row0 = tc.row_tile * BM;
        a.tok0 = tc.tok_tile * BN;
        a.kb_begin = static_cast<int>((static_cast<long long>(nkb) * chunk) / splits);
        a.kb_end = static_cast<int>((static_cast<long long>(nkb) * (chunk + 1)) / splits);
        a.out = splits == 1 ? C : partial + static_cast<size_t>(chunk) * T * M;
        mmq_tile(smem, a);
#if SPLIT_MODE == 1
        if (splits > 1)
            persistent::reduce_if_last_chunk(partial, C, &counters[persistent::kTileArrivals + tile], splits,
                                             a.row0, a.tok0, M, T, last_flag);
#endif
    }
    if (threadIdx.x == 0) {
        __threadfence();  // this CTA's last claim is ordered before its finish count
        if (atomicAdd(&counters[persistent::kFinished], 1) == static_cast<int>(gridDim.x) - 1) {
            counters[persistent::kQueue] = 0;  // every CTA has made its final claim
            counters[persistent::kFinished] = 0;
        }
    }
}

// Dynamic shared memory this configuration needs; the launcher checks its own formula against it.
extern "C" __constant__ int mmq_smem_bytes = kSmemBytes;

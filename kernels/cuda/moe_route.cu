// MoE routing on the GPU, no host round-trip: routing ids -> per-expert buckets, the tile work
// list of a grouped expert GEMM, the bucketed Q8_1 activation rows, and the scatter back.
// Same results as kernels/moe_routing.py (bucket, build_work_list), bit for bit.
//
// A routed pair (t, slot) is p = t * top_k + slot (its row of Y viewed as [T * top_k, M]).
// The n_routed pairs are cut into chunks of CHUNK = 32 * CHUNK_STEPS; one warp owns a chunk.
//
//   1 moe_route_count    per-chunk histogram (shared-memory atomics) -> chunk_hist [n_chunks][E]
//   2 moe_route_scan     ONE CTA of SCAN_THREADS (E <= SCAN_THREADS): counts, offsets [E + 1]
//                        (exclusive prefix sum, total appended), chunk_base [n_chunks][E] = where
//                        each chunk's pairs of expert e start, and the work list
//   3 moe_route_scatter  order[pos] = p. Deterministic and stable: a warp walks its chunk 32 pairs
//                        at a time, __match_any_sync groups lanes of one expert, a lane's rank is
//                        the number of lower lanes in its group; the group leader then advances the
//                        expert's running position. So order is ascending within each expert.
//   4 moe_gather_q8_1    bucketed activation rows: gq[pos] = xq[order[pos] / top_k] (and d, s)
//   5 moe_scatter_rows   y[order[pos]] = g[pos] * (route_w ? route_w[order[pos]] : 1)
//
// Work list (int32 [capacity][3]): rows (expert, token_offset, token_count), expert-major; expert
// e's bucket [offsets[e], offsets[e + 1]) cut into ceil(count / token_tile) tiles, token_offset an
// absolute bucket position. Rows past n_tiles (written to *n_tiles) are (-1, n_routed, 0): a
// grouped GEMM launched over `capacity` tiles (kernels.moe_routing.work_list_capacity) skips them.
//
// Launch shapes:
//   count, scatter: grid ceil(n_chunks / ROUTE_WARPS), block 32 * ROUTE_WARPS,
//                   dynamic smem ROUTE_WARPS * n_experts * 4 bytes
//   scan:           grid 1, block SCAN_THREADS
//   gather:         grid ceil(n_routed / GATHER_WARPS), block 32 * GATHER_WARPS (K % 32 == 0)
//   scatter_rows:   grid n_routed, block ROW_THREADS
#include <stdint.h>

#ifndef CHUNK_STEPS
#define CHUNK_STEPS 8
#endif
#ifndef ROUTE_WARPS
#define ROUTE_WARPS 4
#endif
#ifndef SCAN_THREADS
#define SCAN_THREADS 1024
#endif
#ifndef GATHER_WARPS
#define GATHER_WARPS 8
#endif
#ifndef ROW_THREADS
#define ROW_THREADS 256
#endif

namespace moe {

constexpr int kChunk = 32 * CHUNK_STEPS;
static_assert(SCAN_THREADS % 32 == 0 && SCAN_THREADS <= 1024, "SCAN_THREADS: whole warps, <= 1024");
static_assert(ROUTE_WARPS >= 1 && ROUTE_WARPS <= 32, "ROUTE_WARPS must be 1..32");

// Exclusive prefix sum over the CTA (one value per thread, every thread calls), and the CTA total.
__device__ __forceinline__ int block_exclusive_scan(int v, int& total) {
    constexpr int kWarps = SCAN_THREADS / 32;
    __shared__ int warp_prefix[32];
    __shared__ int block_total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int n = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
        if (lane >= d) inclusive += n;
    }
    if (lane == 31) warp_prefix[warp] = inclusive;  // the warp's total, for now
    __syncthreads();
    if (warp == 0) {
        const int s = lane < kWarps ? warp_prefix[lane] : 0;
        int inc = s;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int n = __shfl_up_sync(0xFFFFFFFFu, inc, d);
            if (lane >= d) inc += n;
        }
        if (lane < kWarps) warp_prefix[lane] = inc - s;
        if (lane == 31) block_total = inc;
    }
    __syncthreads();
    const int exclusive = warp_prefix[warp] + inclusive - v;
    total = block_total;
    __syncthreads();  // the next call reuses the shared slots
    return exclusive;
}

}  // namespace moe

using namespace moe;

extern "C" __global__ void __launch_bounds__(32 * ROUTE_WARPS)
moe_route_count(const int* __restrict__ ids, int n_routed, int n_experts, int* __restrict__ chunk_hist) {
    extern __shared__ int counts[];  // [ROUTE_WARPS][n_experts]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int chunk = blockIdx.x * ROUTE_WARPS + warp;
    const int n_chunks = (n_routed + kChunk - 1) / kChunk;
    if (chunk >= n_chunks) return;  // warp-private work: no CTA barrier follows
    int* mine = counts + warp * n_experts;
    for (int e = lane; e < n_experts; e += 32) mine[e] = 0;
    __syncwarp();
    const int begin = chunk * kChunk, end = min(begin + kChunk, n_routed);
    for (int i = begin + lane; i < end; i += 32) {
        const int id = ids[i];
        if (static_cast<unsigned>(id) < static_cast<unsigned>(n_experts)) atomicAdd(&mine[id], 1);  // host checks ids
    }
    __syncwarp();
    for (int e = lane; e < n_experts; e += 32) chunk_hist[static_cast<size_t>(chunk) * n_experts + e] = mine[e];
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS, 1)
moe_route_scan(const int* __restrict__ chunk_hist, int n_chunks, int n_experts, int token_tile, int capacity,
               int* __restrict__ counts, int* __restrict__ offsets, int* __restrict__ chunk_base,
               int* __restrict__ work, int* __restrict__ n_tiles) {
    const int e = threadIdx.x;
    const bool expert = e < n_experts;
    int count = 0;
    if (expert)
        for (int c = 0; c < n_chunks; ++c) count += chunk_hist[static_cast<size_t>(c) * n_experts + e];
    int n_routed;
    const int offset = block_exclusive_scan(count, n_routed);
    const int tiles = (count + token_tile - 1) / token_tile;
    int total_tiles;
    const int first_tile = block_exclusive_scan(tiles, total_tiles);
    if (expert) {
        counts[e] = count;
        offsets[e] = offset;
        int running = offset;
        for (int c = 0; c < n_chunks; ++c) {
            const size_t at = static_cast<size_t>(c) * n_experts + e;
            chunk_base[at] = running;
            running += chunk_hist[at];
        }
        for (int i = 0; i < tiles; ++i) {
            int* row = work + 3 * static_cast<size_t>(first_tile + i);
            row[0] = e;
            row[1] = offset + i * token_tile;
            row[2] = min(token_tile, count - i * token_tile);
        }
    }
    if (e == 0) {
        offsets[n_experts] = n_routed;
        *n_tiles = total_tiles;
    }
    for (int i = total_tiles + e; i < capacity; i += SCAN_THREADS) {
        int* row = work + 3 * static_cast<size_t>(i);
        row[0] = -1;
        row[1] = n_routed;
        row[2] = 0;
    }
}

extern "C" __global__ void __launch_bounds__(32 * ROUTE_WARPS)
moe_route_scatter(const int* __restrict__ ids, int n_routed, int n_experts, const int* __restrict__ chunk_base,
                  int* __restrict__ order) {
    extern __shared__ int running[];  // [ROUTE_WARPS][n_experts]: next free bucket position
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int chunk = blockIdx.x * ROUTE_WARPS + warp;
    const int n_chunks = (n_routed + kChunk - 1) / kChunk;
    if (chunk >= n_chunks) return;
    int* next = running + warp * n_experts;
    for (int e = lane; e < n_experts; e += 32) next[e] = chunk_base[static_cast<size_t>(chunk) * n_experts + e];
    __syncwarp();
    const unsigned lower = (1u << lane) - 1u;
    const int begin = chunk * kChunk, end = min(begin + kChunk, n_routed);
    for (int step = begin; step < end; step += 32) {  // uniform trip count: full-warp shuffles are safe
        const int i = step + lane;
        const int id = i < end ? ids[i] : -1;
        const bool valid = static_cast<unsigned>(id) < static_cast<unsigned>(n_experts);
        const unsigned group = __match_any_sync(0xFFFFFFFFu, id);
        const int base = valid ? next[id] : 0;
        __syncwarp();  // every lane has read next[] before the leaders advance it
        if (valid) {
            order[base + __popc(group & lower)] = i;
            if (lane == __ffs(group) - 1) next[id] = base + __popc(group);
        }
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(32 * GATHER_WARPS)
moe_gather_q8_1(const int* __restrict__ order, int n_routed, int top_k, int K, const int8_t* __restrict__ xq,
                const float* __restrict__ xd, const int* __restrict__ xs, int8_t* __restrict__ gq,
                float* __restrict__ gd, int* __restrict__ gs) {
    const int pos = blockIdx.x * GATHER_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (pos >= n_routed) return;
    const size_t t = static_cast<size_t>(order[pos] / top_k);
    const int groups = K / 32;
    const int4* src = reinterpret_cast<const int4*>(xq + t * K);  // K % 32 == 0: rows 16-byte aligned
    int4* dst = reinterpret_cast<int4*>(gq + static_cast<size_t>(pos) * K);
    for (int i = lane; i < K / 16; i += 32) dst[i] = src[i];
    for (int g = lane; g < groups; g += 32) {
        gd[static_cast<size_t>(pos) * groups + g] = xd[t * groups + g];
        gs[static_cast<size_t>(pos) * groups + g] = xs[t * groups + g];
    }
}

extern "C" __global__ void __launch_bounds__(ROW_THREADS)
moe_scatter_rows(const float* __restrict__ g, const int* __restrict__ order, int M,
                 const float* __restrict__ route_w, float* __restrict__ y) {
    const int pos = blockIdx.x;
    const int pair = order[pos];
    const float w = route_w != nullptr ? route_w[pair] : 1.0f;
    const float* src = g + static_cast<size_t>(pos) * M;
    float* dst = y + static_cast<size_t>(pair) * M;
    for (int m = threadIdx.x; m < M; m += ROW_THREADS) dst[m] = src[m] * w;
}

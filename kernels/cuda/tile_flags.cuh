// A split K's CTAs adding into C with reds, with no pass to zero C first (mmq_direct's ATOMIC 2, mmq_direct_q8's
// CLUSTERQ and GRIDQ 2): the first split's CTA of each tile zeroes the tile as it starts and publishes the launch's `epoch` (the
// launcher's count of launches, never 0) in the tile's flag; the other splits' CTAs wait for that epoch before their
// reds. By then it is long published (the zeroing is the first thing split 0 does), so the wait is one load. Split 0's
// CTAs come first in the grid's order, so a waiting CTA never holds up the one it waits for (CUTLASS's serial split-K
// makes the same assumption).
#pragma once

namespace mmq {

// C [T][M]'s tile of kRows rows from row0 and 16 tokens from tok0, zeroed by the CTA's kThreads threads (not yet
// published: a CTA barrier, then publish_tile)
template <int kRows, int kThreads>
__device__ __forceinline__ void store_zero_tile(float* C, int row0, int tok0, int M, int T) {
    for (int e = threadIdx.x; e < 16 * kRows; e += kThreads) {
        const int tk = tok0 + e / kRows, r = row0 + e % kRows;
        if (tk < T && r < M) C[static_cast<long long>(tk) * M + r] = 0.0f;
    }
}

// thread 0 publishes the zeros that a CTA barrier ordered before this call. kFence false: the release store alone
// publishes (it is cumulative over them), no sequentially consistent fence before it
template <bool kFence = true>
__device__ __forceinline__ void publish_tile(int* flag, int epoch) {
    if (threadIdx.x == 0) {
        if constexpr (kFence) __threadfence();
        asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(epoch) : "memory");
    }
}

// the tile zeroed and published at once
template <int kRows, int kThreads, bool kFence = true>
__device__ __forceinline__ void zero_tile(float* C, int* flag, int epoch, int row0, int tok0, int M, int T) {
    store_zero_tile<kRows, kThreads>(C, row0, tok0, M, T);
    __syncthreads();  // every thread's zeros are stored before thread 0 publishes them
    publish_tile<kFence>(flag, epoch);
}

// one acquire load of the flag: whether this launch's tile is zeroed yet (a peek; wait_tile_zeroed waits)
__device__ __forceinline__ bool tile_zeroed(const int* flag, int epoch) {
    int seen;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
    return seen == epoch;
}

// acquired: thread 0 has acquired the flag at this epoch already (tile_zeroed): only the barrier is left
__device__ __forceinline__ void wait_tile_zeroed(const int* flag, int epoch, bool acquired = false) {
    if (threadIdx.x == 0 && !acquired) {
        int seen;
        for (long long polls = 0;; ++polls) {
            asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
            if (seen == epoch) break;
            if (polls > (1LL << 22)) __trap();  // seconds without split 0's tile: an error, not a hang
        }
    }
    __syncthreads();  // (the acquire, then every thread's reds)
}

}  // namespace mmq

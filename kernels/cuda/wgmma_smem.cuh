// What a wgmma kernel needs to put an operand in shared memory and issue on it: the 128B-swizzled
// K-major layout (rows of 128 B = 64 f16, 8-row atoms of 1024 B, 1024-aligned), its descriptor, and
// the fences and group waits, and the register fences that keep an in-flight wgmma's operands in place.
// Shared by the `wgmma` lever's kernels (wgmma_tile.cuh) and the direct kernel's wgmma path (mmq_direct.cu, WG=1).
#pragma once
#include <stdint.h>

namespace mmqwg {

// Byte offset of 16-byte chunk c (8 f16 = 8 k) of row r in a 128B-swizzled K-major tile: rows
// of 128 B, 8-row atoms of 1024 B, chunk index XOR row-in-atom (what the hardware reads back).
__device__ __forceinline__ int swz(int r, int c) { return (r >> 3) * 1024 + (r & 7) * 128 + ((c ^ (r & 7)) << 4); }

// Shared-memory matrix descriptor: K-major, 128B swizzle, 8-row groups 1024 B apart.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
           (1ull << 62);
}

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// Keep registers that an in-flight wgmma reads where they are until it is done (call after its wait).
__device__ __forceinline__ void fence_regs(uint32_t (&a)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

// Tell the compiler the accumulators change under it (in flight wgmmas write them).
template <int N>
__device__ __forceinline__ void fence_acc(float (&acc)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

}  // namespace mmqwg

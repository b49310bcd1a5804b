// Thread-block clusters (sm_90): a CTA's rank, the cluster-wide barrier, and loads from and stores into another cluster
// CTA's shared memory (the split-K sums of mmq_wgmma_rs's CLUSTER and mmq_direct's CLUSTER; mmq_direct_q8's CLUSTERQ
// activations).
#pragma once
#include "mmq_core.cuh"

namespace mmq {

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every CTA in the cluster; release/acquire: shared-memory writes before it are
// visible to the cluster's reads after it. (Not .aligned: the producer and consumer roles reach
// it from different code.)
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// The barrier in two halves, for work between them: every thread arrives (relaxed: nothing to publish yet), and waits
// before it touches another CTA's shared memory, which a CTA may do only once every CTA of the cluster has started.
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;\n" ::: "memory"); }
// This CTA's shared address `local` in the shared memory of cluster CTA `rank` (the same offset there).
__device__ __forceinline__ uint32_t cluster_addr(const void* local, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(local)), "r"(rank));
    return remote;
}
// 16 bytes at this CTA's shared address `local` in the shared memory of cluster CTA `rank`.
__device__ __forceinline__ float4 ld_cluster_f4(const void* local, uint32_t rank) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(cluster_addr(local, rank)) : "memory");
    return v;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t remote) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// Stores into cluster CTA shared memory that complete on an mbarrier there (st.async): the receiver waits on its own
// barrier for the bytes it expects, and the sender needs no release fence or cluster-wide barrier. remote_bar: the
// receiving CTA's barrier (cluster_addr of it).
__device__ __forceinline__ void st_async_u32(uint32_t remote, uint32_t v, uint32_t remote_bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];\n" ::"r"(remote), "r"(v),
                 "r"(remote_bar)
                 : "memory");
}
__device__ __forceinline__ void st_async_v2_u32(uint32_t remote, uint32_t a, uint32_t b, uint32_t remote_bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.u32 [%0], {%1, %2}, [%3];\n" ::"r"(remote),
                 "r"(a), "r"(b), "r"(remote_bar)
                 : "memory");
}

}  // namespace mmq

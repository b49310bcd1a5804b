// mbarriers in shared memory: the hand-off between the warps of a CTA (the wgmma kernels' producer and consumer
// warpgroups; mmq_direct's XFUSE: a super-block's converted activations, written by every warp), and the bulk copies
// that complete on them (the wgmma kernels' raw slots; mmq_direct_q8's BULK ring).
#pragma once
#include "mmq_core.cuh"

namespace mmq {

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// (.release.cta: this thread's shared-memory writes before it are seen by the threads its phase releases)
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_addr(bar))
                 : "memory");
}
// Wait until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// This thread's arrival on `bar`, with `bytes` more expected of asynchronous writes (bulk copies, st.async) before the
// phase completes; writes counted before the arrival are fine (the count only has to reach zero with it).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
// The bulk-copy engine (TMA without a tensor map): `bytes` contiguous bytes global -> shared,
// counted against `bar`'s transaction count, which the issuing thread raised first with
// mbar_arrive_expect_tx. Both addresses 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
// The same engine asked to bring `bytes` global bytes into L2 only: a hint, nothing to wait for (16-byte aligned,
// a multiple of 16)
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

}  // namespace mmq

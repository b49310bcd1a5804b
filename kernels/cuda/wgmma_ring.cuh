// The warp-specialized ring that the register-A kernels share (mmq_wgmma_rs.cu: f16 wgmma,
// mmq_wgmma_i8.cu: int8 wgmma): a producer warpgroup fills STAGES activation stages and RAW raw
// super-block slots, the consumer warpgroups release them, all through mbarriers; the producer
// gives registers to the consumers with setmaxnreg when the CTA has two consumer warpgroups.
#pragma once
#include "wgmma_tile.cuh"

#ifndef RAW
#define RAW 2
#endif

namespace mmqwg {

struct Bars {
    uint64_t xfull[STAGES], xempty[STAGES], rawfull[RAW], rawempty[RAW];
};

// setmaxnreg's split of the 64 K registers: 128 producer threads keep `producer` each, the
// consumers get `consumer` each.
constexpr bool register_split_fits(int producer, int consumer, int consumer_threads) {
    return 128 * producer + consumer_threads * consumer <= 65536;
}

// Raw-copy threads (tid < nthr): super-block b of the CTA's n_sb into slot (b0 + b) % RAW as soon
// as the consumers have read the slot's previous super-block; rawfull arrives when the bytes land.
// b0: the super-blocks this CTA's ring already carried (a persistent CTA's earlier tiles).
__device__ __forceinline__ void produce_raw_slots(uint8_t* raw, Bars* bars, int tid, int nthr, int n_sb,
                                                  const uint8_t* __restrict__ W, int row0, int M, int kb_begin,
                                                  size_t rb, int b0 = 0) {
    for (int b = 0; b < n_sb; ++b) {
        const unsigned g = static_cast<unsigned>(b0) + b;  // (unsigned: the slot of RAW | 4 folds)
        if (g >= RAW) mbar_wait(&bars->rawempty[g % RAW], ((g / RAW) - 1) & 1);
        issue_raw(raw + (g % RAW) * kRawWBytes, tid, nthr, W, row0, M, kb_begin + b, rb);
        cp_async_mbar_arrive(&bars->rawfull[g % RAW]);
    }
}

}  // namespace mmqwg

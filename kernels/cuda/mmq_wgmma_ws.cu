// Hopper (sm_90a) quantized GEMM, warp-specialized (the `wgmma` lever, WS = 1): one producer
// warpgroup copies and dequantizes, BM / 64 consumer warpgroups only issue wgmma. The math,
// tile layout and step are mmq_wgmma.cu's (wgmma_tile.cuh); what changes is who waits for whom.
//
// Why: with every warpgroup doing everything (WS = 0), the dequantize of step s and the wgmma
// issue of step s share warps and two CTA-wide barriers per step, so the tensor cores idle
// whenever a warp is late. Here the roles hand off through mbarriers in shared memory:
//   full[x]    (128 producer arrivals):  activation slot x and the A chunk of its step are ready
//   xempty[x]  (one arrival per consumer warp): the wgmmas that read activation slot x are done
//   aempty[a]  (same):                          ... that read A chunk a are done
// Producer, step s: copy step s + STAGES - 2 (after xempty), wait for its own copies of step s,
//   dequantize step s into A chunk s % ABUF (after aempty), fence.proxy.async, arrive full.
// Consumer, step s: wait full, 4 x wgmma, keep one group in flight, release step s - 1.
// With MIN_BLOCKS 1 and two consumer warpgroups, setmaxnreg moves registers from the producer
// (which holds no accumulators) to the consumers (BN / 2 f32 accumulators per thread).
//
// Compile-time parameters: QTYPE, BM = 64 x consumer warpgroups, BN, STAGES 3..4 activation
// slots (copies run STAGES - 2 steps ahead), ABUF 2..3 dequantized chunks, DEQ, MIN_BLOCKS.
#include "wgmma_tile.cuh"

#ifndef ABUF
#define ABUF 2
#endif

using namespace mmqwg;

namespace mmqws {

constexpr int kConsumers = BM / 64;
constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kThreadsWs = kConsumerThreads + 128;
constexpr int kLookahead = STAGES - 2;  // steps the copies run ahead of the dequantize
constexpr int kBarBytes = 128;
constexpr int kSmemWs = kAlign + STAGES * kXChunk + ABUF * kAChunk + kRawSlots * kRawWBytes + kBarBytes;
static_assert(kThreads == kConsumerThreads, "WARPS_M = BM / 16: the consumers' warps");
// A raw slot is refilled 8 - (STAGES - 2) steps after its first read: STAGES <= 5 keeps that after
// every producer has passed its last read (mmq_core.cuh caps STAGES at 4).
static_assert(STAGES >= 3 && STAGES <= 4, "STAGES must be 3..4");
static_assert(ABUF >= 2 && ABUF <= 3, "ABUF must be 2..3");
constexpr bool kMoveRegs = (kConsumers == 2 && MIN_BLOCKS == 1);
constexpr int kProducerRegs = 88, kConsumerRegs = 208;  // 128 x 88 + 256 x 208 <= 64 K registers
static_assert(!kMoveRegs || 128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 65536, "register file");

struct Bars {
    uint64_t full[STAGES], xempty[STAGES], aempty[ABUF];
};
static_assert(sizeof(Bars) <= kBarBytes, "barriers overflow their smem slot");

struct Smem {
    uint8_t* x;    // STAGES activation chunks
    uint8_t* a;    // ABUF dequantized weight chunks
    uint8_t* raw;  // 2 raw super-block slots
    Bars* bars;
};

__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

struct Job {
    const uint8_t* W;
    const __half* X16;
    int row0, tok0, M, T, K, kb_begin, n;  // n: 64-k steps of this CTA, from super-block kb_begin
    size_t rb;
};

__device__ __forceinline__ void produce(const Smem& sm, const Job& j) {
    const int tid = threadIdx.x - kConsumerThreads;
    const int kc0 = j.kb_begin * kSteps;
    auto issue = [&](int f) {  // copies of step f
        const int kc = kc0 + f;
        issue_x(sm.x + (f % STAGES) * kXChunk, tid, 128, j.X16, j.tok0, j.T, j.K, kc);
        if (kc % kSteps == 0)
            issue_raw(sm.raw + ((kc / kSteps - j.kb_begin) % kRawSlots) * kRawWBytes, tid, 128, j.W, j.row0, j.M,
                      kc / kSteps, j.rb);
    };
#pragma unroll
    for (int f = 0; f < kLookahead; ++f) {
        if (f < j.n) issue(f);
        cp_async_commit();
    }
    for (int s = 0; s < j.n; ++s) {
        const int f = s + kLookahead;
        if (f < j.n) {
            if (f >= STAGES) mbar_wait(&sm.bars->xempty[f % STAGES], ((f / STAGES) - 1) & 1);
            issue(f);
        }
        cp_async_commit();
        cp_async_wait<kLookahead>();  // this thread's copies of step s landed
        producer_sync();              // ... every producer's: the raw rows dequant reads
        if (s >= ABUF) mbar_wait(&sm.bars->aempty[s % ABUF], ((s / ABUF) - 1) & 1);
        const int kc = kc0 + s;
        dequant_step(sm.a + (s % ABUF) * kAChunk, sm.raw + ((kc / kSteps - j.kb_begin) % kRawSlots) * kRawWBytes,
                     kc, j.row0, j.M, j.rb, tid, 128);
        fence_proxy_async();  // dequant stores and landed copies -> visible to the wgmma (async proxy)
        mbar_arrive(&sm.bars->full[s % STAGES]);
    }
}

__device__ __forceinline__ void consume(const Smem& sm, const Job& j, float* C) {
    const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    fence_acc(acc);
    const uint32_t a_base = smem_addr(sm.a) + wg * 64 * 128;
    const uint32_t x_base = smem_addr(sm.x);
    for (int s = 0; s < j.n; ++s) {
        mbar_wait(&sm.bars->full[s % STAGES], (s / STAGES) & 1);
        mma_step(acc, a_base + (s % ABUF) * kAChunk, x_base + (s % STAGES) * kXChunk);
        wgmma_wait<1>();  // step s - 1's wgmmas (this warpgroup's) are done: release its buffers
        if (s >= 1 && lane == 0) {
            mbar_arrive(&sm.bars->xempty[(s - 1) % STAGES]);
            mbar_arrive(&sm.bars->aempty[(s - 1) % ABUF]);
        }
    }
    wgmma_wait<0>();
    fence_acc(acc);
    store_tile(acc, C, j.M, j.T, j.row0, j.tok0);
}

}  // namespace mmqws

using namespace mmqws;

// Arguments as mmq_wgmma_gemm's; kThreadsWs threads per CTA (consumers first, producer last).
extern "C" __global__ void __launch_bounds__(kThreadsWs, MIN_BLOCKS)
mmq_wgmma_gemm(const uint8_t* __restrict__ W, const __half* __restrict__ X16, float* __restrict__ C, int M, int T,
               int K, long long row_bytes) {
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* smem = align_smem(smem_raw);
    uint8_t* raw = smem + STAGES * kXChunk + ABUF * kAChunk;
    const Smem sm{smem, smem + STAGES * kXChunk, raw, reinterpret_cast<Bars*>(raw + kRawSlots * kRawWBytes)};
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(&sm.bars->full[i], 128);
            mbar_init(&sm.bars->xempty[i], 4 * kConsumers);
        }
        for (int i = 0; i < ABUF; ++i) mbar_init(&sm.bars->aempty[i], 4 * kConsumers);
    }
    __syncthreads();

    int kb_begin, kb_end;
    split_range(K / 256, kb_begin, kb_end);
    const Job job{W, X16, static_cast<int>(blockIdx.y) * BM, static_cast<int>(blockIdx.x) * BN, M, T, K, kb_begin,
                  (kb_end - kb_begin) * kSteps, static_cast<size_t>(row_bytes)};
    if (threadIdx.x >= kConsumerThreads) {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        produce(sm, job);
    } else {
        if constexpr (kMoveRegs) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
        consume(sm, job, C);
    }
}

#include "helper_kernels.cuh"
MMQ_SPLITK_REDUCE(mmq_wgmma_splitk_reduce)

extern "C" __constant__ int mmq_wgmma_smem_bytes = kSmemWs;

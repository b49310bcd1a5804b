"""What a call costs at the least on this GPU, to set beside a kernel's time (issue 6's T=16 bar: q4_K 4096 x 14336 at
T=16 in <= 13 us per call; perf log run 78 and "The floor and the bench timed calls differently"). Each case is timed
two ways (a spin kernel first, CUDA events, median of --reps; kernels/cuda_runtime.py):

  per call     as the bench and the perf gate time a GEMM (gates.perf.time_variant): calls back to back between the
               events, as many as fill 1 ms, the time divided by their number; the figure to set beside a bench row
  single call  the events around one launch: adds the events' and the launch's own latency, which back-to-back calls
               overlap (runs 78-82 reported only this one, and set it beside the bench's per-call rows)

  empty        a one-thread kernel that does nothing
  wave         one wave of the T=16 champion's CTAs that do nothing: 224 CTAs of 256 threads, 103 KB shared memory each
  round_trip   that wave, each CTA loading 16 bytes from DRAM and storing them: one DRAM round trip per CTA
  stream       --bytes (the 4096 x 14336 q4_K weights' 33.0 MB by default) read once from DRAM, 16-byte loads, 8 in flight
               per thread, at a few grid sizes
  stream_bulk  the same bytes read by the copy engine: one thread per CTA keeps a ring of shared-memory slots filled with
               bulk copies (cp.async.bulk on an mbarrier per slot), at a few slot sizes and depths
  stream_best  the fastest read of all: the least time any T=16 GEMM of that weight can take

    python3 scripts/launch_floor.py [--bytes N] [--reps 200]

Inputs rotate through copies that cover twice the L2 (kernels/family.py), as in the bench, so DRAM is what is read.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SOURCE = r"""
#include <stdint.h>
#include "mbarrier.cuh"
#include "wgmma_smem.cuh"  // fence_proxy_async
extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void one_round_trip(const uint4* __restrict__ src, uint4* __restrict__ dst) {
    if (threadIdx.x == 0) dst[blockIdx.x] = src[blockIdx.x * 64];  // a line of its own per CTA
}

__device__ __forceinline__ uint4 load_streamed(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

// n16 16-byte words read once; the xor of all of them is stored only when it equals `never` (it does not: random data),
// so the loads stay and nothing is written
extern "C" __global__ void stream_read(const uint4* __restrict__ src, long long n16, unsigned never,
                                       unsigned* __restrict__ out) {
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    unsigned acc = 0;
    for (; i + 7 * step < n16; i += 8 * step) {
        uint4 v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = load_streamed(src + i + j * step);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    for (; i < n16; i += step) {
        const uint4 v = load_streamed(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == never) out[blockIdx.x] = acc;
}

// The same read by the copy engine. Chunk c of the grid's n (the last may be short) is CTA c % gridDim's, so each wave of
// copies walks memory in order; thread 0 keeps `slots` of them in flight, each on its slot's mbarrier, reading one word of
// each landed chunk (the xor, as above) before the slot is refilled.
extern "C" __global__ void stream_bulk(const uint8_t* __restrict__ src, long long nbytes, unsigned chunk, int slots,
                                       unsigned never, unsigned* __restrict__ out) {
    extern __shared__ __align__(128) uint8_t ring[];
    __shared__ uint64_t bars[16];
    if (threadIdx.x != 0) return;
    const int nchunks = static_cast<int>((nbytes + chunk - 1) / chunk);
    const int mine = static_cast<int>(blockIdx.x) < nchunks ? (nchunks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    auto issue = [&](int c, int slot) {  // this CTA's c-th chunk into `slot`
        const long long offset = static_cast<long long>(blockIdx.x + c * gridDim.x) * chunk;
        const unsigned bytes = static_cast<unsigned>(nbytes - offset < chunk ? nbytes - offset : chunk);
        mmq::mbar_arrive_expect_tx(&bars[slot], bytes);
        mmq::bulk_copy_g2s(ring + slot * chunk, src + offset, bytes, &bars[slot]);
    };
    for (int s = 0; s < slots; ++s) mmq::mbar_init(&bars[s], 1);
    mmqwg::fence_proxy_async();  // the initialized barriers -> visible to the copy engine
    for (int c = 0; c < slots && c < mine; ++c) issue(c, c);
    unsigned acc = 0;
    for (int c = 0, slot = 0, phase = 0; c < mine; ++c) {
        mmq::mbar_wait(&bars[slot], phase);
        acc ^= *reinterpret_cast<const unsigned*>(ring + slot * chunk);
        if (c + slots < mine) {
            mmqwg::fence_proxy_async();  // this thread's read of the slot, before the copy engine refills it
            issue(c + slots, slot);
        }
        if (++slot == slots) slot = 0, phase ^= 1;
    }
    if (acc == never) out[blockIdx.x] = acc;
}
"""

WAVE_CTAS, WAVE_THREADS, WAVE_SMEM = 224, 256, 103424  # the T=16 champion's grid at M = 4096 (perf log run 70)
WEIGHT_BYTES = 4096 * 14336 // 256 * 144  # q4_K 4096 x 14336: 144 bytes per 256 weights
STREAM_GRIDS = [(1, 1024), (2, 512), (4, 512), (8, 256)]  # (CTAs per SM, threads)
BULK_RINGS = [(1, 16384, 8), (2, 8192, 8), (2, 4096, 12), (1, 32768, 6)]  # (CTAs per SM, slot bytes, slots)


def time_both(device, fn, reps: int) -> dict:
    """fn's time per call back to back (as the bench times a GEMM) and as one call between the events, in us."""
    from types import SimpleNamespace

    from gates.perf import calibrate_inner, time_variant

    call, inner = SimpleNamespace(run=fn), calibrate_inner(device, fn, 1e-3)
    per_call, single = (time_variant(device, call, reps, inner=n).median for n in (inner, 1))
    return {"us_per_call": round(per_call * 1e6, 3), "us_single_call": round(single * 1e6, 3), "calls_per_sample": inner}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=WEIGHT_BYTES, help="bytes the stream cases read (a multiple of 16)")
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    if args.bytes <= 0 or args.bytes % 16:
        raise SystemExit(f"error: --bytes={args.bytes} is not a positive multiple of 16")
    from kernels.device import open_device
    from kernels.family import rotation_copies

    device = open_device("cuda")
    module = device.compile_and_load(SOURCE)
    empty, trip, stream, bulk = (module.kernel(name) for name in ("empty_kernel", "one_round_trip", "stream_read",
                                                                    "stream_bulk"))
    rng = np.random.default_rng(0)
    copies = [device.to_device(rng.integers(0, 2**8, args.bytes, dtype=np.uint8))
              for _ in range(rotation_copies(device.info.get("l2_bytes"), args.bytes))]
    out = device.empty(4096, np.uint32)
    turn = {"i": 0}

    def next_copy():
        turn["i"] = (turn["i"] + 1) % len(copies)
        return copies[turn["i"]]

    def report(case: str, fn, **extra) -> dict:
        row = {"device": device.info["name"], "case": case, **time_both(device, fn, args.reps), **extra}
        if "bytes" in extra:
            row["tb_per_s"] = round(args.bytes / row["us_per_call"] / 1e6, 3)
        print(json.dumps(row), flush=True)
        return row

    report("empty", lambda: empty.launch((1, 1, 1), (1, 1, 1), ()))
    report("wave", lambda: empty.launch((WAVE_CTAS, 1, 1), (WAVE_THREADS, 1, 1), (), WAVE_SMEM),
           ctas=WAVE_CTAS, smem=WAVE_SMEM)
    report("round_trip", lambda: trip.launch((WAVE_CTAS, 1, 1), (WAVE_THREADS, 1, 1), (next_copy().ptr, out.ptr),
                                             WAVE_SMEM), ctas=WAVE_CTAS, smem=WAVE_SMEM)
    n16, sms, never = args.bytes // 16, device.info["sm_count"], np.uint32(0x9E3779B9)
    reads = []
    for ctas_per_sm, threads in STREAM_GRIDS:
        grid = sms * ctas_per_sm
        reads.append(report("stream", lambda: stream.launch((grid, 1, 1), (threads, 1, 1),
                                                            (next_copy().ptr, np.int64(n16), never, out.ptr)),
                            bytes=args.bytes, grid=grid, threads=threads))
    for ctas_per_sm, chunk, slots in BULK_RINGS:
        grid = sms * ctas_per_sm
        reads.append(report("stream_bulk", lambda: bulk.launch(
            (grid, 1, 1), (32, 1, 1), (next_copy().ptr, np.int64(args.bytes), np.uint32(chunk), np.int32(slots), never,
                                       out.ptr), chunk * slots), bytes=args.bytes, grid=grid, chunk=chunk, slots=slots))
    best = min(reads, key=lambda r: r["us_per_call"])
    print(json.dumps({**best, "case": "stream_best", "from": best["case"]}), flush=True)
    for buf in [*copies, out]:
        buf.release()
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

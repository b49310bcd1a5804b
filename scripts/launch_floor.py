"""What one call between CUDA events costs at the least on this GPU, to set beside a kernel's time (issue 6's T=16 bar:
q4_K 4096 x 14336 at T=16 in <= 13 us end to end; perf log run 78). Each case is timed as the bench times a GEMM call
(kernels/cuda_runtime.py: a spin kernel first, then the events around one launch; median of --reps):

  empty        a one-thread kernel that does nothing
  wave         one wave of the T=16 champion's CTAs that do nothing: 224 CTAs of 256 threads, 103 KB shared memory each
  round_trip   that wave, each CTA loading 16 bytes from DRAM and storing them: one DRAM round trip per CTA
  stream       --bytes (the 4096 x 14336 q4_K weights' 33.0 MB by default) read once from DRAM, 16-byte loads, 8 in flight
               per thread, at the best of a few grid sizes: the least time any T=16 GEMM of that weight can take

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
"""

WAVE_CTAS, WAVE_THREADS, WAVE_SMEM = 224, 256, 103424  # the T=16 champion's grid at M = 4096 (perf log run 70)
WEIGHT_BYTES = 4096 * 14336 // 256 * 144  # q4_K 4096 x 14336: 144 bytes per 256 weights


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=WEIGHT_BYTES, help="bytes the stream case reads (a multiple of 16)")
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    if args.bytes <= 0 or args.bytes % 16:
        raise SystemExit(f"error: --bytes={args.bytes} is not a positive multiple of 16")
    from kernels.cuda_runtime import median_seconds
    from kernels.device import open_device
    from kernels.family import rotation_copies

    def median_us(fn) -> float:
        return median_seconds(device, fn, args.reps) * 1e6

    device = open_device("cuda")
    module = device.compile_and_load(SOURCE)
    empty, trip, stream = (module.kernel(name) for name in ("empty_kernel", "one_round_trip", "stream_read"))
    rng = np.random.default_rng(0)
    copies = [device.to_device(rng.integers(0, 2**8, args.bytes, dtype=np.uint8))
              for _ in range(rotation_copies(device.info.get("l2_bytes"), args.bytes))]
    out = device.empty(4096, np.uint32)
    turn = {"i": 0}

    def next_copy():
        turn["i"] = (turn["i"] + 1) % len(copies)
        return copies[turn["i"]]

    def report(case: str, us: float, **extra) -> None:
        print(json.dumps({"device": device.info["name"], "case": case, "median_us": round(us, 3), **extra}), flush=True)

    report("empty", median_us(lambda: empty.launch((1, 1, 1), (1, 1, 1), ())))
    report("wave", median_us(lambda: empty.launch((WAVE_CTAS, 1, 1), (WAVE_THREADS, 1, 1), (), WAVE_SMEM)),
           ctas=WAVE_CTAS, smem=WAVE_SMEM)
    report("round_trip", median_us(lambda: trip.launch((WAVE_CTAS, 1, 1), (WAVE_THREADS, 1, 1),
                                                       (next_copy().ptr, out.ptr), WAVE_SMEM)),
           ctas=WAVE_CTAS, smem=WAVE_SMEM)
    n16, sms = args.bytes // 16, device.info["sm_count"]
    best = None
    for ctas_per_sm, threads in [(1, 1024), (2, 512), (4, 512), (8, 256)]:
        grid = sms * ctas_per_sm
        us = median_us(lambda: stream.launch((grid, 1, 1), (threads, 1, 1),
                                             (next_copy().ptr, np.int64(n16), np.uint32(0x9E3779B9), out.ptr)))
        report("stream", us, bytes=args.bytes, grid=grid, threads=threads, tb_per_s=round(args.bytes / us / 1e6, 3))
        best = us if best is None else min(best, us)
    report("stream_best", best, bytes=args.bytes, tb_per_s=round(args.bytes / best / 1e6, 3))
    for buf in [*copies, out]:
        buf.release()
    return 0


if __name__ == "__main__":
    from campaign.errors import run_main

    raise SystemExit(run_main(main))

// A split K's partial sums added into C [T][M] with 16-byte reds, from the accumulators of an m16n8 f32 fragment pair
// (tokens 0..7 and 8..15 of a 16-token tile): the direct kernels' ATOMIC path (mmq_direct.cu, mmq_direct_q8.cu).
#pragma once

namespace mmq {

// Lane (g, t) holds acc[n][e] = row g + 8 (e >> 1), token 2t + (e & 1) + 8 n. The four lanes g = 4i + j (j = 0..3) of one
// t transpose their values (two butterfly rounds of 2 shuffles, every register index fixed: a lane-dependent index would
// put the values in local memory), so lane j holds rows 4i .. 4i + 3 (+ 8 (j >> 1)) of token 2t + (j & 1) (+ 8 n), and
// adds them with one 16-byte red (4 scalar ones where M is not a multiple of 4). row0: the fragment's first row; tok0:
// the lane's token 2t of the tile (the tile's first token plus 2t).
__device__ __forceinline__ void red_fragment_pair(const float (&acc)[2][4], float* C, int row0, int tok0, int g, int M,
                                                  int T) {
    const int j = g & 3, i = g >> 2;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
        float v[4] = {acc[n][0], acc[n][1], acc[n][2], acc[n][3]};
#pragma unroll
        for (int m = 1; m <= 2; m <<= 1) {  // round m: lanes j and j ^ m swap the halves they do not keep
            const bool upper = j & m;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                if (c & m) continue;
                const float y = __shfl_xor_sync(0xffffffffu, upper ? v[c] : v[c ^ m], m << 2);
                if (upper) v[c] = y; else v[c ^ m] = y;
            }
        }
        // v[q] is now row 4i + q of combination j
        const int tk = tok0 + 8 * n + (j & 1), r = row0 + 4 * i + 8 * (j >> 1);
        if (tk >= T || r >= M) continue;
        float* p = C + static_cast<long long>(tk) * M + r;
        if ((M & 3) == 0) {
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]),
                         "f"(v[3]) : "memory");
        } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) if (r + q < M) atomicAdd(p + q, v[q]);
        }
    }
}

}  // namespace mmq

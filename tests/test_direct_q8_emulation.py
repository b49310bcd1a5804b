"""The int8 direct kernel's arithmetic run on the host, lane by lane, from the bytes it reads (kernels/mmq_direct_q8.py's
weight and activation layouts): each index the .cu computes, the mma.sync fragment layouts of the PTX ISA (m16n8k32
u8 x s8 and m16n8k16 f16, as kernels/cuda/mmq_core.cuh and wgmma_s8_ops.cuh read them), the scale words' bit
operations, the per-super-block f32 step and the reds' butterfly (fragment_reds.cuh). Where the kernel's indexing, a layout or the
scale decode is wrong, this emulation misses the integer-contract reference (gates/parity.py, mode "int_k") off the
GPU. (What it cannot check is the hardware: tests/test_gpu_direct_q8.py runs the kernel itself.)"""
import numpy as np
import pytest

from gates import parity
from gates.inputs import random_problem
from kernels import mmq_direct_q8
from kernels.family import Workload

LANES = np.arange(32)
G, T4 = LANES >> 2, LANES & 3  # lane = 4 g + t


def words(raw: np.ndarray) -> np.ndarray:
    """Little-endian uint32 words of a byte array (last axis a multiple of 4)."""
    return np.ascontiguousarray(raw).view(np.uint32)


def mma_k32(a: list, b0: np.ndarray, b1: np.ndarray, signed: bool = False) -> np.ndarray:
    """mma.sync m16n8k32 row.col s32.u8.s8 (signed: s8.s8) from zero: a[i] [32] uint32 (a0: row g, k 4t..; a1: row
    g + 8; a2: row g, k 16 + 4t..; a3: row g + 8), b0/b1 [32] (k 4t.. / 16 + 4t.. of column g); returns d [32, 4] (d0,
    d1: row g, columns 2t, 2t + 1; d2, d3: row g + 8)."""
    A = np.zeros((16, 32), np.int64)
    B = np.zeros((32, 8), np.int64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for reg, (row, k0) in enumerate([(g, 4 * t), (g + 8, 4 * t), (g, 16 + 4 * t), (g + 8, 16 + 4 * t)]):
            A[row, k0:k0 + 4] = np.frombuffer(np.uint32(a[reg][lane]).tobytes(), np.int8 if signed else np.uint8)
        B[4 * t:4 * t + 4, g] = np.frombuffer(np.uint32(b0[lane]).tobytes(), np.int8)
        B[16 + 4 * t:20 + 4 * t, g] = np.frombuffer(np.uint32(b1[lane]).tobytes(), np.int8)
    D = A @ B
    return np.stack([D[G, 2 * T4], D[G, 2 * T4 + 1], D[G + 8, 2 * T4], D[G + 8, 2 * T4 + 1]], axis=1)


def mma_f16(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """mma.sync m16n8k16 f16 -> f32 from zero with A = {a0, a1, a0, a1} (a0: row g, k 2t, 2t + 1; a1: row g + 8; the
    same pairs at k 2t + 8, 2t + 9), b0 / b1: k 2t, 2t + 1 / 2t + 8, 2t + 9 of column g. Exact here (integers)."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        lo = np.frombuffer(np.uint32(a0[lane]).tobytes(), np.float16).astype(np.float64)
        hi = np.frombuffer(np.uint32(a1[lane]).tobytes(), np.float16).astype(np.float64)
        A[g, 2 * t:2 * t + 2] = A[g, 2 * t + 8:2 * t + 10] = lo
        A[g + 8, 2 * t:2 * t + 2] = A[g + 8, 2 * t + 8:2 * t + 10] = hi
        B[2 * t:2 * t + 2, g] = np.frombuffer(np.uint32(b0[lane]).tobytes(), np.float16)
        B[2 * t + 8:2 * t + 10, g] = np.frombuffer(np.uint32(b1[lane]).tobytes(), np.float16)
    D = A @ B
    return np.stack([D[G, 2 * T4], D[G, 2 * T4 + 1], D[G + 8, 2 * T4], D[G + 8, 2 * T4 + 1]], axis=1)


def row_scales(head: np.ndarray):
    """row_scales() of the .cu for every lane: head [32, 4] uint32 words of the lane's row."""
    y, z, w = head[:, 1], head[:, 2], head[:, 3]
    sc03, m03 = y & 0x3F3F3F3F, z & 0x3F3F3F3F
    sc47 = (w & 0x0F0F0F0F) | ((y >> 2) & 0x30303030)
    m47 = ((w >> 4) & 0x0F0F0F0F) | ((z >> 2) & 0x30303030)
    sc = np.stack([((sc03 if j < 4 else sc47) >> (8 * (j & 3))) & 0xFF for j in range(8)], axis=1).astype(np.int64)
    src = np.where(T4 < 2, m03, m47)
    shift = np.where(T4 & 1, 16, 0).astype(np.uint32)
    pair = ((src >> shift) & 0xFF) | (((src >> (shift + 8)) & 0xFF) << 16)  # bytes (2t, 2t + 1) -> the two halves
    biased = (pair | 0x64006400).astype(np.uint32).view(np.float16).reshape(32, 2).astype(np.float32)
    mpair = (biased - np.float32(1024)).astype(np.float16).view(np.uint32).reshape(32)
    dd = (head[:, 0]).astype(np.uint32).view(np.float16).reshape(32, 2).astype(np.float32)
    return sc, mpair, dd[:, 0] * np.float32(0.0625), dd[:, 1]


def red_fragment_pair(acc: np.ndarray, C: np.ndarray, row0: int, tok0: int, M: int, T: int) -> None:
    """red_fragment_pair() of fragment_reds.cuh: the butterfly among the lanes g = 4i + j of one t, then each lane's 4 rows."""
    j, i = G & 3, G >> 2
    for n in range(2):
        v = [acc[:, n, e].copy() for e in range(4)]
        for m in (1, 2):
            upper = (j & m) != 0
            for c in range(4):
                if c & m:
                    continue
                sent = np.where(upper, v[c], v[c ^ m])
                y = sent[LANES ^ (m << 2)]
                v[c] = np.where(upper, y, v[c])
                v[c ^ m] = np.where(upper, v[c ^ m], y)
        for lane in range(32):
            tk = tok0 + 2 * T4[lane] + 8 * n + (j[lane] & 1)
            r = row0 + 4 * i[lane] + 8 * (j[lane] >> 1)
            if tk < T:
                for q in range(4):
                    if r + q < M:
                        C[tk, r + q] += v[q][lane]


def q5_word(qs: np.ndarray, qh: np.ndarray, j: int) -> np.ndarray:
    """q5_word() of the .cu: sub-block j's bytes q | 16 h_j from a qs word and the qh word of the same 4 bytes."""
    q = ((qs >> 4) if j & 1 else qs) & np.uint32(0x0F0F0F0F)
    moved = (qh << np.uint32(4 - j)) if j <= 4 else (qh >> np.uint32(j - 4))
    return q | (moved & np.uint32(0x10101010))


def mma_k16(a0: np.ndarray, a1: np.ndarray, b: np.ndarray) -> np.ndarray:
    """mma.sync m16n8k16 row.col s32.s8.s8 from zero: a0 / a1 [32] uint32 (row g / g + 8, k 4t..), b (k 4t.. of column
    g); returns d [32, 4] as mma_k32."""
    A = np.zeros((16, 16), np.int64)
    B = np.zeros((16, 8), np.int64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        A[g, 4 * t:4 * t + 4] = np.frombuffer(np.uint32(a0[lane]).tobytes(), np.int8)
        A[g + 8, 4 * t:4 * t + 4] = np.frombuffer(np.uint32(a1[lane]).tobytes(), np.int8)
        B[4 * t:4 * t + 4, g] = np.frombuffer(np.uint32(b[lane]).tobytes(), np.int8)
    D = A @ B
    return np.stack([D[G, 2 * T4], D[G, 2 * T4 + 1], D[G + 8, 2 * T4], D[G + 8, 2 * T4 + 1]], axis=1)


def q6_word(qs: np.ndarray, qh: np.ndarray, jj: int, f: int) -> np.ndarray:
    """q6_word() of the .cu: the int8 bytes q6 - 32 of 32-block 2c + jj, part p (f = 2 jj + p), from a low-nibble word
    and the high-pair word of the same 4 positions: the six bits (q6 XOR 32) sign-extended."""
    low = ((qs >> np.uint32(4)) if jj else qs) & np.uint32(0x0F0F0F0F)
    moved = (qh << np.uint32(4 - 2 * f)) if f <= 2 else (qh >> np.uint32(2 * f - 4))
    six = low | (moved & np.uint32(0x30303030))
    return (six + (moved & np.uint32(0x20202020)) * np.uint32(6)).astype(np.uint32)


def emulate_no_min(problem, splits: int, sb_major: bool, superblock) -> np.ndarray:
    """C [T, M] as mmq_direct_q8_gemm computes it for a type with no min (q6_K, q8_0) from the pass's outputs: each
    slot read at the kernel's offset into the uploaded weights, superblock(slot, b) giving the lanes' f32 values of
    the super-block before the activation scale ([32, 2 token halves, 4]; b(c) the lanes' B words of chunk c per token
    half), then the scale once per super-block and the reds."""
    w = problem.workload
    M, K, T = w.M, w.K, w.T
    nsb, tiles = K // 256, -(-M // 16)
    slot_bytes = 16 * mmq_direct_q8.BLOCK_BYTES[w.qtype]
    uploaded = mmq_direct_q8.tile_weights(problem.w_packed, sb_major, w.qtype).reshape(-1)
    q8, d8, _ = mmq_direct_q8.pass_outputs(problem.x)
    C = np.zeros((T, M), np.float32)
    for tile in range(tiles):
        for y in range(splits):
            sb_begin, sb_end = y * nsb // splits, (y + 1) * nsb // splits
            acc = np.zeros((32, 2, 4), np.float32)
            tok_b = [np.minimum(G + 8 * n, T - 1) for n in range(2)]
            for sb in range(sb_begin, sb_end):
                at = ((sb * tiles + tile) if sb_major else (tile * nsb + sb)) * slot_bytes
                v = superblock(uploaded[at:at + slot_bytes], lambda c: [
                    words(np.stack([q8[tok_b[n][ln], 256 * sb + 64 * c + 16 * T4[ln]:][:16] for ln in LANES]))
                    for n in range(2)])
                for n in range(2):
                    tokens = np.minimum(8 * n + 2 * T4[:, None] + np.arange(2), 15)
                    scale = d8[0, sb][tokens]
                    for e in range(4):
                        acc[:, n, e] = (scale[:, e & 1].astype(np.float64) * v[:, n, e] + acc[:, n, e]).astype(np.float32)
            red_fragment_pair(acc, C, tile * 16, 0, M, T)
    return C


def q6_k_superblock(slot: np.ndarray, b) -> np.ndarray:
    """q6_K (QTYPE 2): the slot's four parts (tile_weights_q6_k) at the kernel's offsets, a k16 mma a 16-sub-block with
    its int8 scale on the exact int32 sum, then d (f16): [32, 2, 4] float32."""
    rows = [G, G + 8]
    qh = [words(np.stack([slot[2048 + 64 * r[ln] + 16 * T4[ln]:][:16] for ln in LANES])) for r in rows]
    sc = [np.stack([slot[3072 + 16 * r[ln]:][:16] for ln in LANES]).view(np.int8).astype(np.int64) for r in rows]
    dw = [np.stack([slot[3328 + 2 * r[ln]:][:2] for ln in LANES]).view(np.float16)[:, 0].astype(np.float32) for r in rows]
    isum = np.zeros((32, 2, 4), np.int64)
    for half in range(2):
        wg, wh = (words(np.stack([slot[128 * r[ln] + 32 * T4[ln] + 16 * half:][:16] for ln in LANES])) for r in rows)
        for cc in range(2):
            c = 2 * half + cc
            bc = b(c)
            for jj in range(2):
                for p in range(2):
                    f = 2 * jj + p
                    a0 = q6_word(wg[:, 2 * cc + p], qh[0][:, c], jj, f)
                    a1 = q6_word(wh[:, 2 * cc + p], qh[1][:, c], jj, f)
                    for n in range(2):
                        d = mma_k16(a0, a1, bc[n][:, f])
                        for e in range(4):
                            isum[:, n, e] += d[:, e] * sc[e >> 1][:, 4 * c + f]
    assert np.abs(isum).max() < 2**31
    return np.stack([np.stack([(dw[e >> 1] * isum[:, n, e].astype(np.float32)).astype(np.float32) for e in range(4)],
                              axis=1) for n in range(2)], axis=1)


def q8_0_superblock(slot: np.ndarray, b) -> np.ndarray:
    """q8_0 (QTYPE 3): the A words read as they are at the kernel's offsets (tile_weights_q8_0), a k32 s8 x s8 mma a
    block, its exact int32 times the block's d in f32, summed over the super-block's 8 blocks: [32, 2, 4] float32."""
    rows = [G, G + 8]
    dw = [np.stack([slot[4096 + 16 * r[ln]:][:16] for ln in LANES]).view(np.float16).astype(np.float32)
          for r in rows]  # [32, 8] per row
    wq = [words(np.stack([slot[256 * r[ln] + 64 * T4[ln]:][:64] for ln in LANES])) for r in rows]  # [32, 16]
    fsum = np.zeros((32, 2, 4), np.float32)
    for c in range(4):
        bc = b(c)
        for jj in range(2):
            j = 2 * c + jj
            a = [wq[0][:, 2 * j], wq[1][:, 2 * j], wq[0][:, 2 * j + 1], wq[1][:, 2 * j + 1]]
            for n in range(2):
                d = mma_k32(a, bc[n][:, 2 * jj], bc[n][:, 2 * jj + 1], signed=True)
                for e in range(4):
                    fsum[:, n, e] = (dw[e >> 1][:, j] * d[:, e].astype(np.float32) + fsum[:, n, e]).astype(np.float32)
    return fsum


def emulate(problem, splits: int, sb_major: bool = False) -> np.ndarray:
    """C [T, M] as mmq_direct_q8_gemm computes it from direct_q8_pass's outputs (one token tile: T <= 16), each slot read
    at the kernel's byte offset into the uploaded weights: q6_K and q8_0 through emulate_no_min, q4_K and q5_K (QTYPE 0
    or 1) below."""
    w = problem.workload
    if w.qtype in ("q6_K", "q8_0"):
        return emulate_no_min(problem, splits, sb_major, q6_k_superblock if w.qtype == "q6_K" else q8_0_superblock)
    M, K, T = w.M, w.K, w.T
    q5 = w.qtype == "q5_K"
    nsb, tiles = K // 256, -(-M // 16)
    uploaded = mmq_direct_q8.tile_weights(problem.w_packed, sb_major, w.qtype).reshape(-1)
    block = mmq_direct_q8.BLOCK_BYTES[w.qtype]
    qs_at, slot_bytes = block - 128, 16 * block
    q8, d8, sums = mmq_direct_q8.pass_outputs(problem.x)
    sums = sums.reshape(T, nsb, 4, 4).view(np.uint32).reshape(T, nsb, 4, 2)  # lane t's uint2 (hi pair, lo pair)
    C = np.zeros((T, M), np.float32)
    for tile in range(tiles):
        for y in range(splits):
            sb_begin, sb_end = y * nsb // splits, (y + 1) * nsb // splits
            acc = np.zeros((32, 2, 4), np.float32)
            tok_b = [np.minimum(G + 8 * n, T - 1) for n in range(2)]  # the staged row (a dead token: the last one)
            for sb in range(sb_begin, sb_end):
                at = ((sb * tiles + tile) if sb_major else (tile * nsb + sb)) * slot_bytes
                slot = uploaded[at:at + slot_bytes].reshape(16, block)
                rows = [slot[G], slot[G + 8]]
                rs = [row_scales(words(r[:, :16])) for r in rows]
                qh = [words(np.stack([r[ln, 16 + 8 * T4[ln]:][:8] for ln in LANES])) for r in rows]  # [32, 2] per row
                isum = np.zeros((2, 32, 2, 4), np.int64)
                for half in range(2):
                    wg = words(np.stack([rows[0][ln, qs_at + 32 * T4[ln] + 16 * half:][:16] for ln in LANES]))
                    wh = words(np.stack([rows[1][ln, qs_at + 32 * T4[ln] + 16 * half:][:16] for ln in LANES]))
                    for cc in range(2):
                        c = 2 * half + cc
                        b = [words(np.stack([q8[tok_b[n][ln], 256 * sb + 64 * c + 16 * T4[ln]:][:16] for ln in LANES]))
                             for n in range(2)]
                        for hi in range(2):
                            if q5:
                                j = 2 * c + hi
                                a = [q5_word(wg[:, 2 * cc], qh[0][:, 0], j), q5_word(wh[:, 2 * cc], qh[1][:, 0], j),
                                     q5_word(wg[:, 2 * cc + 1], qh[0][:, 1], j), q5_word(wh[:, 2 * cc + 1], qh[1][:, 1], j)]
                            else:
                                mask = np.uint32(0xF0F0F0F0 if hi else 0x0F0F0F0F)
                                a = [wg[:, 2 * cc] & mask, wh[:, 2 * cc] & mask, wg[:, 2 * cc + 1] & mask,
                                     wh[:, 2 * cc + 1] & mask]
                            for n in range(2):
                                d = mma_k32(a, b[n][:, 2 if hi else 0], b[n][:, 3 if hi else 1])
                                for e in range(4):
                                    isum[hi, :, n, e] += d[:, e] * rs[e >> 1][0][:, 2 * c + hi]
                for n in range(2):
                    bs = sums[tok_b[n], sb, T4]  # [32, 2]
                    msum = mma_f16(rs[0][1], rs[1][1], bs[:, 0], bs[:, 1]).astype(np.float32)
                    tokens = np.minimum(8 * n + 2 * T4[:, None] + np.arange(2), 15)
                    scale = d8[0, sb][tokens]  # [32, 2]
                    for e in range(4):
                        _, _, d16, dmin = rs[e >> 1]
                        i16 = 16 * isum[0, :, n, e] + (16 if q5 else 1) * isum[1, :, n, e]
                        assert np.abs(i16).max() < 2**31
                        v = (d16.astype(np.float64) * i16.astype(np.float32) - (dmin * msum[:, e])).astype(np.float32)
                        acc[:, n, e] = (scale[:, e & 1].astype(np.float64) * v + acc[:, n, e]).astype(np.float32)
            red_fragment_pair(acc, C, tile * 16, 0, M, T)
    return C


@pytest.mark.parametrize("qtype", mmq_direct_q8.QTYPES)
@pytest.mark.parametrize("M, K, T, splits, sb_major", [(37, 512, 5, 1, False), (32, 768, 16, 2, False),
                                                       (20, 1024, 1, 3, False), (37, 768, 7, 2, True)])
def test_the_kernel_arithmetic_emulated_lane_by_lane_meets_the_int_k_contract(qtype, M, K, T, splits, sb_major):
    problem = random_problem(Workload(qtype, M=M, K=K, T=T), np.random.default_rng([M, K, T]))
    got = emulate(problem, splits, sb_major)
    numbers, reason = parity.compare(got, parity.references(problem, "int_k"), parity.TIGHT_TOL)
    assert not reason, f"{reason} ({numbers})"


def test_the_pass_index_arithmetic_writes_the_documented_layout():
    """direct_q8_pass's store index for lane l's packed words (q8[unit * 64 + chunk * 16 + 4 t + p]) puts the same bytes
    where pass_outputs (the documented layout) has them."""
    from kernels import quant

    x = np.random.default_rng(9).standard_normal((3, 512)).astype(np.float32)
    xq = quant.quantize_q8_k(x)
    flat = np.zeros(3 * 512 // 4, np.uint32)
    old = words(xq.q.reshape(3, 512))  # [3, 128]: word w of the row = k 4w .. 4w + 3
    for tok in range(3):
        for sb in range(2):
            unit = tok * 2 + sb
            for lane in range(32):
                for e in range(2):
                    wd = 2 * lane + e
                    chunk, p, t = wd >> 4, (wd >> 2) & 3, wd & 3
                    flat[unit * 64 + chunk * 16 + 4 * t + p] = old[tok, 64 * sb + wd]
    want, _, _ = mmq_direct_q8.pass_outputs(x)
    np.testing.assert_array_equal(flat.view(np.int8).reshape(3, 512), want)


def cp_async_wait_count(s: int, ring: int) -> int:
    """The cp.async.wait_group count of trip s in mmq_direct_q8_gemm's ring (BULK 0), as the .cu sets it."""
    return 2 if s == 0 else (2 if ring > 2 else 1) if s == 1 else ring - 1


@pytest.mark.parametrize("ring", range(2, 9))
def test_each_trip_s_wait_leaves_its_slot_and_activations_landed(ring):
    """cp.async groups complete in commit order and wait_group N leaves only the newest N pending. Committed: slots
    0 .. RING - 2, the first super-block's activations, the rest's, then one slot (empty past the range) per trip before
    its wait. At every trip of every range length the groups it reads (slot s; the first activations from trip 0, the
    rest from trip 1) are among the complete ones (a group once complete stays so)."""
    for nrange in range(1, 17):
        committed = [("slot", i) for i in range(ring - 1)] + [("act", 0), ("act", 1)]
        complete = set()
        for s in range(nrange):
            committed.append(("slot", s + ring - 1))
            complete |= set(committed[:len(committed) - cp_async_wait_count(s, ring)])
            needed = {("slot", s), ("act", 0)} | ({("act", 1)} if s >= 1 else set())
            assert needed <= complete, (ring, nrange, s, needed - complete)


def test_llq_lines_stage_and_read_back_as_the_pass_layout():
    """LLQ's index arithmetic, as the .cu writes it: quantize_unit_ll's lanes (line L from lanes w / 2 and w / 2 + 2,
    w = 16 (L >> 3) + 8 (L & 1) + ((L >> 1) & 3); sums lines from lanes 8t and 8t + 4; the scale line), the staging's
    dst_of into a shared-memory image (XSHARED 3, two token rows of a range of 3 super-blocks), and the loop's reads
    (lane t's B words from lines 8c + 2t, 8c + 2t + 1; its sums line; its two tokens' scale lines) give the words, sums
    and scales the pass's layout (pass_outputs) has at the same places, and every half of every line read carries the
    epoch."""
    from kernels import quant

    T, nsb, xshared, epoch = 2, 3, 3, 7
    x = np.random.default_rng(10).standard_normal((T, 256 * nsb)).astype(np.float32)
    xq = quant.quantize_q8_k(x)
    want_q8, want_d8, want_sums = mmq_direct_q8.pass_outputs(x)
    old = words(xq.q)  # [T, 64 nsb]: word w of a unit = k 4w .. 4w + 3
    bsum = xq.s.reshape(T, nsb, 8)
    ll = np.zeros((T * nsb, mmq_direct_q8.LL_LINES, 4), np.uint32)
    for tok in range(T):
        for sb in range(nsb):
            unit = tok * nsb + sb
            packed = old[tok, 64 * sb:64 * sb + 64].reshape(32, 2)  # lane l: old words 2l, 2l + 1
            for lane in range(32):
                w = 16 * (lane >> 3) + 8 * (lane & 1) + ((lane >> 1) & 3)
                a, b = packed[w >> 1, w & 1], packed[(w >> 1) + 2, w & 1]
                ll[unit, lane] = (a, epoch, b, epoch)
            for t in range(4):  # lane 8t: blocks 2t (its own) and 2t + 1 (lane 8t + 4's)
                hi = [np.float16(bsum[tok, sb, j]) for j in (2 * t, 2 * t + 1)]
                lo = [np.float16(np.float32(bsum[tok, sb, j]) - np.float32(h)) for j, h in zip((2 * t, 2 * t + 1), hi)]
                pair = lambda h: int(h[0].view(np.uint16)) | int(h[1].view(np.uint16)) << 16
                ll[unit, 32 + t] = (pair(hi), epoch, pair(lo), epoch)
            scale = np.float32(xq.d[tok, 8 * sb]).view(np.uint32)
            ll[unit, 36] = (scale, epoch, scale, epoch)
    # the staging: a range of nsb super-blocks, T token rows, line p of the range to dst_of(p)
    x_stride = xshared * 512 + mmq_direct_q8.LL_ROW_PAD
    sum_stride = xshared * 4 + 4
    xs = np.zeros(16 * x_stride // 4, np.uint32)
    sums_img = np.zeros(16 * sum_stride * 4, np.uint32)
    d8_img = np.zeros(xshared * 16 * 4, np.uint32)
    for p in range(T * nsb * mmq_direct_q8.LL_LINES):
        unit, line = divmod(p, mmq_direct_q8.LL_LINES)
        r, sb = divmod(unit, nsb)
        src = ll[r * nsb + sb, line]
        if line < 32:
            at = (r * x_stride + sb * 512 + 16 * line) // 4
            xs[at:at + 4] = src
        elif line < 36:
            at = (r * sum_stride + sb * 4 + line - 32) * 4
            sums_img[at:at + 4] = src
        else:
            at = (sb * 16 + r) * 4
            d8_img[at:at + 4] = src
    q8_words = words(want_q8)  # [T, 64 nsb], each chunk's 16 words in the staged order
    sums_words = want_sums.view(np.uint32).reshape(T, nsb, 4, 2)
    for tok in range(T):
        g, n = tok % 8, tok // 8
        for t in range(4):
            xrow = ((g + 8 * n) * x_stride + 32 * t) // 4
            for sb in range(nsb):
                for c in range(4):
                    l0 = xs[xrow + (sb * 512 + 128 * c) // 4:][:4]
                    l1 = xs[xrow + (sb * 512 + 128 * c + 16) // 4:][:4]
                    assert l0[1] == l0[3] == l1[1] == l1[3] == epoch
                    np.testing.assert_array_equal([l0[0], l0[2], l1[0], l1[2]],
                                                  q8_words[tok, 64 * sb + 16 * c + 4 * t:][:4])
                s = sums_img[((g + 8 * n) * sum_stride + sb * 4 + t) * 4:][:4]
                assert s[1] == s[3] == epoch
                np.testing.assert_array_equal([s[0], s[2]], sums_words[tok, sb, t])
    for sb in range(nsb):  # the scales as lane t reads them: tokens 8n + 2t, + 1 at lines (2t + 8n), (2t + 8n + 1)
        for tok in range(T):
            line = d8_img[(sb * 16 + tok) * 4:][:4]
            assert line[1] == line[3] == epoch and line[0] == want_d8[0, sb, tok].view(np.uint32)

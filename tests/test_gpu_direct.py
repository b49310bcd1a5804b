"""Parity of the direct-fragment kernel (kernels/cuda/mmq_direct.cu, lever `direct`, q4_K): the
f16 path's contract and bound (tests/test_gpu_mmq_f16.py), output poisoned with NaN first.
The k order inside each 64-k chunk is permuted the same way for weights and activations; a
mismatch puts a weight on the wrong activation, which the one-hot test below catches element
by element (its output is the weight column itself, exact f16 codes)."""
import numpy as np
import pytest

from kernels import quant

from tests.gpu_fixtures import gpu_device, run_once, run_poisoned  # noqa: F401  (fixture)
from tests.test_gpu_mmq import random_problem
from tests.test_gpu_mmq_f16 import assert_f16_parity, one_hot_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1},  # the heuristic
    {"WARPS": 8, "MIN_BLOCKS": 1, "PDL": 0, "XAHEAD": 0},
    {"WARPS": 4, "MIN_BLOCKS": 3, "PDL": 1, "XAHEAD": 0, "SPLITK": 3},
    {"WARPS": 2, "MIN_BLOCKS": 4, "PDL": 2, "XAHEAD": 0, "SPLITK": 2},
    {"WARPS": 16, "MIN_BLOCKS": 1, "PDL": 2, "XAHEAD": 0},
    {"WARPS": 12, "MIN_BLOCKS": 1, "PDL": 1, "XAHEAD": 1, "SPLITK": 5},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "X16_INPUT": 1},  # f16 rows in: no pass
    # each warp's cp.async ring of RING super-blocks: deeper than a split's range (empty groups), wrapping
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 4},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 0, "SPLITK": 3},
    {"WARPS": 6, "MIN_BLOCKS": 1, "PDL": 2, "RING": 8, "SPLITK": 2},
    {"WARPS": 2, "MIN_BLOCKS": 4, "PDL": 0, "RING": 2},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 5, "X16_INPUT": 1},
    {"WARPS": 4, "MIN_BLOCKS": 5, "PDL": 2, "RING": 2, "XAHEAD": 0, "SPLITK": 2},  # 20 warps at 96 registers
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 0, "L2PF": 1},
    # activations half a chunk ahead (XAHEAD 2): ring and register paths, split ranges of odd lengths
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 2, "SPLITK": 3},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 1, "RING": 0, "XAHEAD": 2},
    # 32 rows per warp (MT 2): two m16 tiles share each activation fragment; M = 37, 77, 145 end inside a warp
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 0, "MT": 2},
    {"WARPS": 2, "MIN_BLOCKS": 8, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 2},
    # activations staged per CTA in shared memory (XSHARED): the split raised so each range fits (K = 6144 at
    # XSHARED 2: 12 splits over an asked 2), token rows past T, 24 warps, f16 input, 32-row warps
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 7},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 0, "XSHARED": 2, "SPLITK": 2},
    {"WARPS": 24, "MIN_BLOCKS": 1, "PDL": 0, "RING": 2, "XAHEAD": 0, "XSHARED": 4, "X16_INPUT": 1},
    {"WARPS": 2, "MIN_BLOCKS": 8, "PDL": 2, "RING": 2, "XAHEAD": 0, "MT": 2, "XSHARED": 3},
    # the last CTA of each tile adds the split partial sums (FIXUP): split and unsplit shapes, with and without
    # staged activations, 32-row warps, f16 input
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "FIXUP": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 0, "FIXUP": 1, "SPLITK": 5},
    {"WARPS": 2, "MIN_BLOCKS": 8, "PDL": 1, "RING": 2, "XAHEAD": 0, "MT": 2, "FIXUP": 1, "X16_INPUT": 1},
    # the mins as a rank-1 term on the pass's activation sums (MINSUM): staged activations, the register path,
    # 32-row warps with a split, the last CTA's split sum
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "MINSUM": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "MINSUM": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "FIXUP": 1, "MINSUM": 1},
    # the splits added into C by red.global.add (ATOMIC; M = 37, 145, 77, 330: the scalar reds, 256: the 16-byte ones):
    # staged activations with and without MINSUM, 32-row warps after the pass (PDL 1), the register path in stream order
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "ATOMIC": 1},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 0, "XAHEAD": 1, "SPLITK": 4, "ATOMIC": 1},
    # each biased pair by one LOP3, the pass's activations as k 0, 2, 1, 3 (NIBLOP): the champion's staged ring, the
    # register path (activations read from the pass's rows), 32-row warps with a split
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "NIBLOP": 1},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "MINSUM": 1, "NIBLOP": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "MINSUM": 1, "NIBLOP": 1},
    # the k16 steps as wgmma m64n16k16 on the staged, swizzled activations (WG): the champion's layout, with NIBLOP,
    # one warpgroup per CTA with short split ranges (XSHARED 2), three warpgroups without ATOMIC (the reduce adds)
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "WG": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "NIBLOP": 1,
     "WG": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 0, "XSHARED": 2, "ATOMIC": 1, "MINSUM": 1, "WG": 1},
    {"WARPS": 12, "MIN_BLOCKS": 1, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 5, "MINSUM": 1, "WG": 1},
    # each warp's rows bulk-prefetched into L2 as the GEMM starts (L2PF 2): the champion with NIBLOP, 32-row warps
    # with a split (rows past M: no prefetch)
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "NIBLOP": 1,
     "L2PF": 2},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "L2PF": 2},
    # every kernel of the call on the most shared memory (CARVEOUT, a launch choice): with the pass and with the reduce
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "CARVEOUT": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 2, "RING": 2, "XAHEAD": 0, "SPLITK": 3, "CARVEOUT": 1},
    # one launch (XFUSE: the GEMM converts its own activations), the splits summed by FIXUP, a cluster or the reduce;
    # and a cluster after the pass
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "XFUSE": 1, "FIXUP": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "XFUSE": 1, "CLUSTER": 7},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 7, "MINSUM": 1, "NIBLOP": 1, "XFUSE": 1,
     "CLUSTER": 8},
    {"WARPS": 16, "MIN_BLOCKS": 1, "PDL": 2, "RING": 3, "XAHEAD": 0, "XSHARED": 7, "MINSUM": 1, "NIBLOP": 1, "XFUSE": 1,
     "CLUSTER": 8},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 0, "RING": 3, "XAHEAD": 0, "XSHARED": 3, "MT": 2, "XFUSE": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "CLUSTER": 7},
    # ATOMIC 2 (the first split zeroes C's tile): one launch with XFUSE, after the pass, and on f16 rows
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "XFUSE": 1, "ATOMIC": 2},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "NIBLOP": 1, "XFUSE": 1,
     "ATOMIC": 2},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "ATOMIC": 2},
    {"WARPS": 6, "MIN_BLOCKS": 2, "PDL": 0, "XAHEAD": 1, "SPLITK": 4, "ATOMIC": 2, "X16_INPUT": 1},
    # the weights in warp tiles (WTILE): the champion's form, 32-row tiles (MT 2), and with one launch
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "WTILE": 1},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "WTILE": 1},
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "MINSUM": 1, "XFUSE": 1, "ATOMIC": 2,
     "WTILE": 1},
    # the same slots super-block major (WTILE 2): the champion's form, and 32-row tiles with a split
    {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "RING": 2, "XAHEAD": 0, "XSHARED": 8, "ATOMIC": 1, "MINSUM": 1, "NIBLOP": 1,
     "WTILE": 2},
    {"WARPS": 4, "MIN_BLOCKS": 4, "PDL": 1, "RING": 3, "XAHEAD": 2, "MT": 2, "SPLITK": 3, "WTILE": 2},
]
MINSUM_CONFIGS = [i for i, c in enumerate(CONFIGS) if c.get("MINSUM")]
ATOMIC_CONFIGS = [i for i, c in enumerate(CONFIGS) if c.get("ATOMIC")]
NIBLOP_CONFIGS = [i for i, c in enumerate(CONFIGS) if c.get("NIBLOP") and not c.get("WG")]
WG_CONFIGS = [i for i, c in enumerate(CONFIGS) if c.get("WG")]
# (the splits summed in a fixed order: ATOMIC's reds are not)
ONE_LAUNCH_CONFIGS = [i for i, c in enumerate(CONFIGS) if (c.get("XFUSE") or c.get("CLUSTER", 1) > 1) and not c.get("ATOMIC")]
# odd M (rows past M), T from 1 to several token tiles (tokens past T), K of 1 to 24
# super-blocks so split ranges hold odd counts (and one or none of the two-per-trip loop's halves)
SHAPES = [(37, 256, 5), (145, 512, 67), (256, 768, 16), (330, 4096, 1), (77, 6144, 33)]
PRECOMPILE = {"mmq_direct": [{k: v for k, v in c.items() if k != "X16_INPUT"} for c in CONFIGS]
                           + [{**c, "ATOMIC": 0} for c in CONFIGS if c.get("ATOMIC")]}


@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_direct_parity(gpu_device, cfg):
    from kernels import mmq_direct

    variant = mmq_direct.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    rng = np.random.default_rng([cfg, 97])
    for M, K, T in SHAPES:
        prob = random_problem(rng, "q4_K", M, K, T)
        assert_f16_parity(run_once(variant, prob), prob, f"q4_K {M}x{K}x{T} direct{cfg}")


@pytest.mark.parametrize("cfg", [0, 3, 7, 8, 14, 15, 16, 17, 18, 19, 20, 21, *sorted(set(MINSUM_CONFIGS + ATOMIC_CONFIGS))])
def test_direct_dequantizes_every_weight_to_its_exact_f16_code(gpu_device, cfg):
    """x = e_k rows, every k once: the output is the weight matrix, the f16x2 dequant's code for every (row, k).
    MINSUM: f16(q sw) - mn instead (the min comes from the rank-1 term on the one sum that is 1: a sum on the
    wrong sub-block or token shows as a wrong min, element by element)."""
    from kernels import mmq_direct

    variant = mmq_direct.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    prob, want = one_hot_problem(np.random.default_rng([cfg, 98]), "q4_K", M=200, K=256 * 3, T=256, deq=1)
    if CONFIGS[cfg].get("MINSUM"):
        want = minsum_dequantize(prob.w_packed)[:, prob.x.argmax(axis=1)].T
    np.testing.assert_array_equal(run_once(variant, prob), want)


def minsum_dequantize(packed: np.ndarray) -> np.ndarray:
    """MINSUM's weights as a one-hot row sees them: f16(q sw16), rounded once, minus mn16, exact in f32."""
    form = quant.get("q4_K").decompose(packed)
    sw = np.repeat(form.scale.astype(np.float16), form.group, axis=1).astype(np.float64)
    mn = np.repeat(form.minv.astype(np.float16), form.group, axis=1).astype(np.float64)
    return ((form.q * sw).astype(np.float16).astype(np.float64) - mn).astype(np.float32)


def emulated_sums(x: np.ndarray) -> np.ndarray:
    """direct_pass's sums buffer [T, K/16] from x [T, K]: per 32-k sub-block, 8 lanes' f32 sums of their 4
    rounded values ((a + b) + (c + d)) added in the butterfly xor 4, 2, 1, as hi = f16(S), lo = f16(S - hi), stored
    per pair of sub-blocks as (hi even, hi odd, lo even, lo odd)."""
    v = x.astype(np.float16).astype(np.float32).reshape(x.shape[0], -1, 8, 4)
    s = (v[..., 0] + v[..., 1]) + (v[..., 2] + v[..., 3])
    for step in (4, 2, 1):
        s = s + s[..., np.arange(8) ^ step]
    total = s[..., 0]
    hi = total.astype(np.float16)
    lo = (total - hi.astype(np.float32)).astype(np.float16)
    pairs = np.stack([hi[:, 0::2], hi[:, 1::2], lo[:, 0::2], lo[:, 1::2]], axis=-1)
    return pairs.reshape(x.shape[0], -1)


def pass_order(rows: np.ndarray, cfg: dict) -> np.ndarray:
    """The pass's rows in the k order the GEMM reads (tests/test_direct_static.py checks these orders on the CPU)."""
    from tests.test_direct_static import niblop_order, wg_order

    if cfg.get("WG"):
        return wg_order(rows, bool(cfg.get("NIBLOP")))
    return niblop_order(rows) if cfg.get("NIBLOP") else rows


@pytest.mark.parametrize("cfg", [MINSUM_CONFIGS[0], NIBLOP_CONFIGS[0], *WG_CONFIGS[:2]])
def test_the_minsum_pass_writes_the_rows_and_sums_bit_for_bit(gpu_device, cfg):
    """The pass's two outputs, poisoned first, against the numpy emulation of the same rounding and order: every
    f16 row value (NIBLOP, WG: in their k order) and every hi and lo sum, at T = 67 (tokens in several grid-stride trips)
    and K = 6144."""
    from kernels import mmq_direct

    variant = mmq_direct.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    prob = random_problem(np.random.default_rng(95), "q4_K", 256, 6144, 67)
    bound = variant.prepare(prob)
    try:
        rows, sums = bound.scratch
        gpu_device.fill_nan(rows), gpu_device.fill_nan(sums)
        bound.run()
        want = pass_order(prob.x.astype(np.float16), CONFIGS[cfg])
        np.testing.assert_array_equal(rows.get().view(np.uint16), want.view(np.uint16))
        np.testing.assert_array_equal(sums.get().view(np.uint16), emulated_sums(prob.x).view(np.uint16))
    finally:
        bound.release()


@pytest.mark.parametrize("cfg", [22, 23, 24])
def test_the_last_cta_of_a_tile_sums_the_splits_launch_after_launch(gpu_device, cfg):
    """FIXUP: one bound run three times into a poisoned output gives the same C each time, equal to the
    reduce kernel's bit for bit (the splits added in the same order): each tile's arrival counter is back at
    zero after every launch."""
    from kernels import mmq_direct

    fixup = mmq_direct.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    plain = mmq_direct.FAMILY.build({**CONFIGS[cfg], "FIXUP": 0}, "q4_K", gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 96]), "q4_K", 330, 6144, 20)
    want = run_once(plain, prob)
    bound = fixup.prepare(prob)
    try:
        assert bound.splitk > 1
        for _ in range(3):
            np.testing.assert_array_equal(run_poisoned(bound), want)
    finally:
        bound.release()


@pytest.mark.parametrize("cfg", ATOMIC_CONFIGS)
def test_atomic_splits_launch_after_launch(gpu_device, cfg):
    """ATOMIC: one bound run three times into a poisoned output, split K ways, each time within the f16 bound and equal
    to the reduce kernel's C up to the f32 rounding of the splits' order (an output added twice, or not zeroed by the pass
    before the next launch, is off by a whole partial sum)."""
    from kernels import mmq_direct

    atomic = mmq_direct.FAMILY.build(CONFIGS[cfg], "q4_K", gpu_device)
    plain = mmq_direct.FAMILY.build({**CONFIGS[cfg], "ATOMIC": 0}, "q4_K", gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 94]), "q4_K", 332, 6144, 20)  # M % 4 = 0: the 16-byte reds
    want = run_once(plain, prob)
    bound = atomic.prepare(prob)
    try:
        assert bound.splitk > 1 and bound.partial is None
        for _ in range(3):
            got = run_poisoned(bound)
            assert_f16_parity(got, prob, f"atomic {cfg}")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    finally:
        bound.release()


def test_the_dispatcher_runs_a_promoted_direct_champion(gpu_device, tmp_path):
    """kernels.dispatch.mmq with a direct champion at tiny: the user's call runs mmq_direct at T <= 16."""
    from campaign import champions
    from kernels import dispatch

    path = tmp_path / "champions.json"
    params = {"WARPS": 8, "MIN_BLOCKS": 2, "PDL": 2, "XAHEAD": 1, "RING": 3, "SPLITK": 0}
    champions.promote("direct", champions.key("q4_K", gpu_device.info["arch"], "tiny"),
                      {"lever": "direct", "family": "mmq_direct", "params": params,
                       "promoted_at": "2026-12-03T00:00:00"}, path=path)
    prob = random_problem(np.random.default_rng(99), "q4_K", 300, 2048, 11)
    assert dispatch.choose("q4_K", gpu_device.info["arch"], 11, path, M=300, K=2048)[0] == "mmq_direct"
    got = dispatch.mmq(prob.w_packed, "q4_K", prob.x, gpu_device, champions_path=path)
    assert_f16_parity(got, prob, "dispatch q4_K 300x2048x11")


@pytest.mark.parametrize("cfg", ONE_LAUNCH_CONFIGS)
def test_one_launch_matches_the_pass_and_the_reduce_bit_for_bit(gpu_device, cfg):
    """XFUSE converts the activations as the pass does (the same f16 rows, the same sums, in the same order) and CLUSTER
    adds the splits in the reduce kernel's order, so each gives the pass-and-reduce kernel's C bit for bit (SPLITK set to
    its split count: the same K ranges), launch after launch into a poisoned output (each launch's mbarriers and cluster
    barriers start afresh), at shapes with T past one token tile, M and T not multiples of the tile, and splits that hold
    no super-block."""
    from kernels import mmq_direct

    cfg_params = CONFIGS[cfg]
    fused = mmq_direct.FAMILY.build(cfg_params, "q4_K", gpu_device)
    for M, K, T in [(330, 6144, 20), (37, 256, 5), (145, 1024, 67)]:
        prob = random_problem(np.random.default_rng([cfg, M, 93]), "q4_K", M, K, T)
        bound = fused.prepare(prob)
        try:
            ref_params = {**cfg_params, "XFUSE": 0, "CLUSTER": 1, "FIXUP": 0, "SPLITK": bound.splitk}
            want = run_once(mmq_direct.FAMILY.build(ref_params, "q4_K", gpu_device), prob)
            for _ in range(2):
                np.testing.assert_array_equal(run_poisoned(bound), want, err_msg=f"{M}x{K}x{T} direct{cfg}")
        finally:
            bound.release()

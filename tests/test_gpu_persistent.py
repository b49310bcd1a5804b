"""Parity of the persistent-queue MMQ (kernels/cuda/mmq_persistent.cu) on the GPU: every type,
every tile order, with and without stream-K k chunks, grids small enough that each CTA loops
over many tiles, odd M and T. Output (and the chunk workspace) poisoned with NaN before every
launch, fresh random inputs for every check, the gate's tight (integer reference) and loose
(float64, elementwise bound) comparisons. The queue counters reset themselves, so a bound run
again must give the same bits; with the same tile and split it must equal mmq_base bit for bit.
"""
import numpy as np
import pytest

from gates import parity
from tests.gpu_fixtures import gpu_device, run_poisoned  # noqa: F401  (fixture)
from tests.test_gpu_mmq import TYPES, random_problem

pytestmark = pytest.mark.gpu

CONFIGS = [
    {},  # defaults: row-major order, one item per tile, one CTA per SM
    # 3 CTAs in all: each claims many tiles in turn (the loop and its barriers)
    {"ORDER": "token", "BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 1, "CVT": 0, "CTAS": 3},
    # short last band (GROUP_ROWS 3 does not divide the row tiles), 2 CTAs per SM asked for
    {"ORDER": "grouped", "GROUP_ROWS": 3, "BM": 64, "BN": 16, "WARPS_M": 4, "WARPS_N": 1, "STAGES": 3,
     "CTAS_PER_SM": 2},
    # 3 forced k chunks on 5 CTAs: chunks of one tile land on one CTA and on several
    {"SPLIT_MODE": "streamk", "SPLITK": 3, "CTAS": 5, "BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2},
    {"SPLIT_MODE": "streamk", "ORDER": "grouped"},  # chunk count from choose_chunks
]
# (M, K, T): odd edges, 1..8 super-blocks; 144 tiles at the defaults (more than one per SM);
# K=2048 at T=9 is where choose_chunks splits
SHAPES = [(37, 256, 5), (145, 512, 67), (256, 768, 128), (1100, 256, 1000), (300, 2048, 9)]
TIGHT = 1e-4  # max |gpu - int ref| / max |int ref|
# scripts/precompile.py builds these off the GPU (mmq_base: the bit-identity test's tile)
PRECOMPILE = {"mmq_persistent": CONFIGS, "mmq_base": [{"BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2}]}


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_persistent_parity(gpu_device, qtype, cfg):
    from kernels import mmq_persistent

    variant = mmq_persistent.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    rng = np.random.default_rng([cfg, TYPES.index(qtype), 11])
    for M, K, T in SHAPES:
        prob = random_problem(rng, qtype, M, K, T)
        bound = variant.prepare(prob)
        try:
            got = run_poisoned(bound)
            splits = bound.splits
        finally:
            bound.release()
        label = f"{qtype} cfg{cfg} {M}x{K}x{T} splits={splits}"
        assert not np.isnan(got).any(), f"{label}: {np.isnan(got).sum()} outputs never written"
        numbers, reason = parity.compare(got, parity.references(prob, "int"), TIGHT)
        assert not reason, f"{label}: {reason} {numbers}"


def test_choose_chunks_splits_the_small_T_shape(gpu_device):
    """The auto stream-K configuration really runs split on the K=2048, T=9 shape."""
    from kernels import mmq_persistent

    variant = mmq_persistent.FAMILY.build(CONFIGS[4], "q4_K", gpu_device)
    bound = variant.prepare(random_problem(np.random.default_rng(3), "q4_K", 300, 2048, 9))
    try:
        assert bound.splits > 1 and bound.partial is not None and bound.grid[0] <= gpu_device.info["sm_count"]
    finally:
        bound.release()


@pytest.mark.parametrize("cfg", [0, 1, 3])
def test_counters_reset_themselves_between_runs(gpu_device, cfg):
    from kernels import mmq_persistent

    variant = mmq_persistent.FAMILY.build(CONFIGS[cfg], "q5_K", gpu_device)
    prob = random_problem(np.random.default_rng([cfg, 5]), "q5_K", 145, 768, 67)
    bound = variant.prepare(prob)
    try:
        runs = [run_poisoned(bound) for _ in range(3)]  # a stale queue counter leaves NaN behind
    finally:
        bound.release()
    for i, out in enumerate(runs[1:], 1):
        assert np.array_equal(out, runs[0]), f"cfg{cfg}: run {i} differs from run 0 (NaN: {np.isnan(out).sum()})"


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("split", [1, 3])
def test_same_tile_and_split_as_mmq_base_is_bit_identical(gpu_device, qtype, split):
    """Same tile, same k ranges, same summation order: the schedule must not change a bit."""
    from kernels import mmq_base, mmq_persistent

    tile = {"BM": 64, "BN": 32, "WARPS_M": 2, "WARPS_N": 2}
    mode = {"SPLIT_MODE": "streamk", "SPLITK": split, "CTAS": 5} if split > 1 else {"CTAS": 3, "ORDER": "token"}
    persistent = mmq_persistent.FAMILY.build({**tile, **mode}, qtype, gpu_device)
    grid = mmq_base.FAMILY.build({**tile, "SPLITK": split}, qtype, gpu_device)
    prob = random_problem(np.random.default_rng([split, TYPES.index(qtype)]), qtype, 145, 768, 67)
    outs = []
    for variant in (persistent, grid):
        bound = variant.prepare(prob)
        try:
            outs.append(run_poisoned(bound))
        finally:
            bound.release()
    assert not np.isnan(outs[0]).any()
    assert np.array_equal(outs[0], outs[1]), f"{qtype} split={split}: max diff {np.abs(outs[0] - outs[1]).max()}"


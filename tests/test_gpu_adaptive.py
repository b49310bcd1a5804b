"""The adaptive_format composite on the GPU: int8 below CROSSOVER_T, f16 at and above.

Crossovers 16 and 64 split the dense parity suite (T = 1, 5 | 67), so the composite as
dispatched runs both paths there; the gate also checks each part on every workload. The two
paths are told apart by their contracts: the int8 path matches the integer reference to 1e-4
(the f16 path cannot: its activations are not Q8_1-rounded), the f16 path sits within the f16
bound of float64 (the int8 path cannot: Q8_1 rounding is ~0.5 % per element).
"""
import numpy as np
import pytest

from campaign import champions, workloads
from kernels import quant, reference
from kernels.mmq_adaptive import CROSSOVER
from tests.gpu_fixtures import gpu_device, run_once  # noqa: F401  (fixture)
from tests.test_gpu_mmq import TIGHT, TYPES, random_problem
from tests.test_gpu_mmq_f16 import assert_f16_parity

pytestmark = pytest.mark.gpu

CONFIGS = [
    {"BM": 64, "BN": 128, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 1, "DEQ": 1, CROSSOVER: 16},
    {"BM": 64, "BN": 64, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 2, CROSSOVER: 64},
]
PRECOMPILE = {"mmq_adaptive": CONFIGS}  # scripts/precompile.py compiles a composite as its parts


def assert_int8_path(got, prob, label):
    ref = reference.gemm_int(prob.w_packed, prob.workload.qtype, quant.quantize_q8_1(prob.x))
    tight = np.abs(got - ref).max() / np.abs(ref).max()
    assert tight <= TIGHT, f"{label}: int-ref error {tight:.3g} > {TIGHT} (not the int8 path?)"


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_composite_passes_the_parity_gate_on_both_paths(gpu_device, qtype, cfg):
    from gates import parity
    from kernels import mmq_adaptive

    variant = mmq_adaptive.FAMILY.build(CONFIGS[cfg], qtype, gpu_device)
    suite = workloads.get("parity").workloads([qtype])
    Ts = sorted({w.T for w in suite})
    assert Ts[0] < CONFIGS[cfg][CROSSOVER] <= Ts[-1]  # the crossover splits the suite
    result = parity.run(variant, suite, np.random.default_rng([cfg, TYPES.index(qtype), 6]))
    assert result.passed, result.line()
    assert result.numbers["dispatched.mode"] == "f16+int"  # both contracts applied as dispatched


@pytest.mark.parametrize("qtype", TYPES)
def test_composite_runs_the_part_its_T_selects(gpu_device, qtype):
    from kernels import mmq_adaptive

    cfg = CONFIGS[0]
    variant = mmq_adaptive.FAMILY.build(cfg, qtype, gpu_device)
    rng = np.random.default_rng([TYPES.index(qtype), 61])
    for M, K, T in [(37, 256, 5), (145, 512, 15), (145, 512, 16), (256, 768, 67)]:
        prob = random_problem(rng, qtype, M, K, T)
        got = run_once(variant, prob)
        label = f"{qtype} {M}x{K}x{T} crossover {cfg[CROSSOVER]}"
        if T < cfg[CROSSOVER]:
            assert_int8_path(got, prob, label)
        else:
            assert_f16_parity(got, prob, label)


def test_dispatcher_switches_format_at_the_shapes_crossover(gpu_device, tmp_path):
    """An adaptive_format champion for this shape with crossover 32: T=16 and 31 run int8 (the
    composite declines, mmq_base's heuristic runs), T=32 and 40 run the champion's f16 tiles."""
    from kernels import dispatch

    M, K, arch = 145, 512, gpu_device.info["arch"]
    path = tmp_path / "champions.json"
    params = {"BM": 64, "BN": 64, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 2, "SPLITK": 0, CROSSOVER: 32}
    for regime in ("tiny", "small"):
        champions.promote("adaptive_format", champions.key("q4_K", arch, regime, (M, K)),
                          {"lever": "adaptive_format", "family": "mmq_adaptive", "params": params,
                           "promoted_at": "2026-12-04T00:00:00"}, path)
    rng = np.random.default_rng(32)
    for T in (16, 31, 32, 40):
        prob = random_problem(rng, "q4_K", M, K, T)
        got = dispatch.mmq(prob.w_packed, "q4_K", prob.x, gpu_device, champions_path=path)
        if T < 32:
            assert_int8_path(got, prob, f"T={T}")
        else:
            assert_f16_parity(got, prob, f"T={T}")

"""Lever and family registries, workload suites, champions file."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import experiments
from campaign import champions, workloads
from campaign.errors import SpaceError, UnknownNameError
from kernels import families
from tests.conftest import REPO


def test_levers_are_discovered_and_cpu_demo_is_one():
    names = [lv.name for lv in experiments.all_levers()]
    assert "cpu_demo" in names
    assert names == sorted(names)
    assert experiments.get("cpu_demo").family == "cpu_demo"


def test_unknown_lever_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown lever 'nope'; known levers: .*cpu_demo"):
        experiments.get("nope")


def test_registered_lever_is_visible_until_unregistered(test_levers):
    assert experiments.get("test_broken").family == "test_broken_min"
    experiments.unregister("test_broken")
    with pytest.raises(UnknownNameError):
        experiments.get("test_broken")


def test_space_checks(test_levers):
    with pytest.raises(SpaceError, match="search space is empty"):
        experiments.check_space(test_levers["test_empty"])
    assert experiments.space_problems({"a": [], "b": (8, 4), "c": "x", "d": (1, 9, 2)}) == [
        "a: empty choice list", "b: bad int range (8, 4)",
        "c: expected a list of choices or an int (low, high[, step]) tuple, got 'x'"]
    experiments.check_space(experiments.get("cpu_demo"))


def test_family_registry_is_lazy_and_clear():
    assert families.get("cpu_demo").backend == "cpu"
    with pytest.raises(UnknownNameError, match="unknown kernel family 'nope'"):
        families.get("nope")


def test_listing_levers_imports_no_gpu_runtime():
    code = ("import sys; from campaign import cli; cli.main(['list']); "
            "bad = [m for m in ('pycuda', 'kernels.cuda_runtime') if m in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "cpu_demo  [cpu]" in result.stdout


def test_suites_expand_per_type_and_name_their_parity_suite():
    suite = workloads.get("cpu_small")
    cases = suite.workloads(["q4_K", "q8_0"])
    assert len(cases) == 2 * len(suite.cases)
    parity = workloads.get(suite.parity).workloads(["q4_K"])
    assert {w.M for w in parity} == {1, 37, 145} and {w.T for w in parity} == {1, 5, 67}
    assert {w.K for w in parity} == {256, 512}
    assert workloads.get("moe_qwen3").parity == "parity_moe_real"  # MoE suites check MoE shapes
    with pytest.raises(UnknownNameError, match="known suites"):
        workloads.get("nope")


@pytest.mark.parametrize("T,expected", [(1, "decode"), (8, "decode"), (9, "tiny"), (16, "tiny"), (17, "small"), (64, "small"), (65, "medium"),
                                        (128, "medium"), (129, "large"), (1024, "large"), (1025, "huge"),
                                        (4096, "huge")])
def test_t_regimes(T, expected):
    assert workloads.regime(T) == expected


def test_a_split_regime_inherits_the_one_it_came_from():
    assert workloads.regime_chain(4096) == ("huge", "large")
    assert workloads.regime_chain(1) == ("decode", "tiny")
    assert workloads.regime_chain(1024) == ("large",) and workloads.regime_chain(16) == ("tiny",)


def test_roofline_is_bandwidth_bound_at_small_T():
    w_small, w_large = (workloads.Suite("x", workloads.grid([(4096, 4096)], [T]), "parity").workloads(["q4_K"])[0]
                        for T in (1, 8192))
    ceilings = {"int8_tops": 853.0, "bandwidth_gbps": 4140.0}
    bytes_moved = 4096 * 4096 // 256 * 144 + 4096 * 4 + 4096 * 4  # Q4_K weights + f32 x + f32 out
    expected = 2 * 4096 * 4096 / bytes_moved * 4140e9 / 1e12  # ~14.7 TFLOP/s: 3.5 flops per byte
    assert workloads.device_ceiling(w_small, ceilings, "int") == pytest.approx(expected)
    assert workloads.device_ceiling(w_large, ceilings, "int") == 853.0
    assert workloads.device_ceiling(w_small, {}, "int") is None


def test_champions_keep_history_and_lookup(tmp_path):
    path = tmp_path / "champions.json"
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, path) is None
    first = {"family": "cpu_demo", "params": {"rows_per_tile": 64}, "promoted_at": "1"}
    second = {"family": "cpu_demo", "params": {"rows_per_tile": 512}, "promoted_at": "2"}
    assert champions.promote("cpu_demo", "q4_K/cpu/small", first, path) is None
    assert champions.promote("cpu_demo", "q4_K/cpu/small", second, path)["params"] == {"rows_per_tile": 64}
    entry = json.loads(path.read_text())["levers"]["cpu_demo"]["q4_K/cpu/small"]
    assert entry["params"] == {"rows_per_tile": 512}
    assert [h["params"] for h in entry["history"]] == [{"rows_per_tile": 64}]
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 64, path) == {"rows_per_tile": 512}
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 600, path) is None  # another regime
    assert champions.lookup("cpu_demo", "q4_K", "sm_90", 16, path) is None  # another arch


def test_champions_file_newer_schema_is_refused(tmp_path):
    path = tmp_path / "champions.json"
    path.write_text(json.dumps({"schema": champions.SCHEMA + 1, "levers": {}}))
    with pytest.raises(Exception, match="newer than this engine"):
        champions.lookup("cpu_demo", "q4_K", "cpu", 1, path)

"""`campaign run` end to end on real stores: Optuna sqlite + MLflow sqlite, trial states, links,
metrics and artifacts; infeasible and hopeless trials; every bad input refused with nothing lost."""
from __future__ import annotations

import json

import optuna
import pytest
from mlflow import MlflowClient
from optuna.trial import TrialState

from campaign import tracking
from tests.conftest import trial_runs

OVER_BUDGET = {"rows_per_tile": 1024, "tokens_per_tile": 64, "k_superblocks_per_step": 8, "dot": "f64_bmm"}
# Configurations that cannot be pruned as hopeless against the naive defaults: the test stays deterministic.
FAST = [{"rows_per_tile": 512, "tokens_per_tile": 64, "k_superblocks_per_step": 2, "dot": "f32_bmm", "acc": "f32",
         "threads": 1},
        {"rows_per_tile": 128, "tokens_per_tile": 16, "k_superblocks_per_step": 1, "dot": "f64_bmm", "acc": "f64",
         "threads": 1}]


def _study(storage: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=storage)


def _one_line_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0]
    assert "Traceback" not in err


def test_run_records_every_trial_in_optuna_and_mlflow(campaign, tmp_path):
    ceilings = tmp_path / "ceilings.json"  # as `campaign bench` writes them
    ceilings.write_text(json.dumps({"ceilings": {"int8_tops": 0.05, "bandwidth_gbps": 20.0,
                                                 "int8_method": "made up for the test"}}))
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "3", "--ceilings", str(ceilings),
                                  *(f"--enqueue={json.dumps(p)}" for p in [OVER_BUDGET, *FAST]))
    assert code == 0, err
    assert "trial 0: infeasible (static): tile scratch" in err  # progress lines
    assert "study cpu_demo [cpu_demo]: COMPLETE 2, FAIL 1" in out

    study = _study(campaign.storage, "cpu_demo")
    assert study.user_attrs["lever"] == "cpu_demo" and study.user_attrs["suite"] == "cpu_tiny"
    assert study.user_attrs["types"] == ["q4_K"] and study.user_attrs["engine_schema"] == 1
    trials = {t.number: t for t in study.trials}
    assert trials[0].state == TrialState.FAIL and trials[0].value is None  # never recorded as fast
    assert trials[0].user_attrs["failed_gate"] == "static" and "tile scratch" in trials[0].user_attrs["reason"]
    for n in (1, 2):
        assert trials[n].state == TrialState.COMPLETE and trials[n].value > 0

    client = MlflowClient(campaign.tracking)
    runs = trial_runs(client, study)
    assert sorted(runs) == [0, 1, 2] and all(len(r) == 1 for r in runs.values())
    for n, (run,) in runs.items():
        assert trials[n].user_attrs["mlflow_run_id"] == run.info.run_id  # the two records point at each other
        assert run.data.tags[tracking.TAG_STUDY] == "cpu_demo"
    failed = runs[0][0]
    assert failed.info.status == "FAILED" and failed.data.tags[tracking.TAG_OUTCOME] == "infeasible"
    assert failed.data.tags["gate.static"] == "FAIL"
    done = runs[1][0]
    assert done.info.status == "FINISHED"
    assert done.data.tags["gate.static"] == "PASS" and done.data.tags["gate.parity"] == "PASS"
    assert done.data.tags["gate.perf"] in ("PASS", "FAIL")
    assert done.data.params["rows_per_tile"] == str(trials[1].params["rows_per_tile"])
    metrics = done.data.metrics
    for name in ("median_ms", "p90_ms", "tflops", "incumbent_median_ms", "speedup", "noise_floor"):
        assert f"q4_K/M128/K512/T16/{name}" in metrics, name
    for name in ("parity_tight_rel", "parity_loose_ratio"):  # parity is judged on its own small shapes
        assert f"q4_K/M37/K512/T5/{name}" in metrics, name
    bandwidth_bound = 2 * 128 * 512 * 16 / (128 * 512 // 256 * 144 + 16 * 512 * 4 + 16 * 128 * 4) * 20e9 / 1e12
    roofline = min(0.05, bandwidth_bound)
    assert metrics["q4_K/M128/K512/T16/ceiling_frac"] == pytest.approx(metrics["q4_K/M128/K512/T16/tflops"] / roofline)
    assert metrics["q4_K/M128/K512/T16/p90_ms"] >= metrics["q4_K/M128/K512/T16/median_ms"]
    assert metrics["objective.geomean_speedup"] == pytest.approx(trials[1].value)
    artifacts = {a.path for folder in ("source", "resources", "plots") for a in client.list_artifacts(done.info.run_id, folder)}
    assert artifacts == {"source/cpu_demo_q4_K.py", "resources/cpu_demo_q4_K.json", "plots/tflops_vs_T.png"}
    source = client.download_artifacts(done.info.run_id, "source/cpu_demo_q4_K.py")
    assert f"# rows_per_tile = {trials[1].params['rows_per_tile']}" in open(source).read()


def test_an_enqueued_candidate_takes_the_defaults_for_what_it_leaves_out(campaign):
    """Optuna samples what an enqueued trial leaves out; the engine fills in the lever's defaults
    instead, so the trial runs the candidate as written (run 20 measured two-CTA tiles with a
    random CLUSTER this way)."""
    from experiments.cpu_demo import LEVER

    partial = {k: v for k, v in FAST[0].items() if k not in ("acc", "threads")}
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", "--study", "partial",
                                  f"--enqueue={json.dumps(partial)}")
    assert code == 0, err
    (trial,) = _study(campaign.storage, "partial").get_trials()
    assert trial.params == {**partial, "acc": LEVER.defaults["acc"], "threads": LEVER.defaults["threads"]}


def test_timeout_stops_starting_trials(campaign):
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--timeout", "0.5")
    assert code == 0, err
    trials = _study(campaign.storage, "cpu_demo").trials
    assert 1 <= len(trials) < 5 and all(t.state.is_finished() for t in trials)


def test_broken_math_fails_parity_and_hopeless_variants_are_pruned(campaign, test_levers):
    code, out, err = campaign.run("test_broken", "--trials", "2", "--types", "q4_K")
    assert code == 0, err
    broken = _study(campaign.storage, "test_broken")
    assert [t.state for t in broken.trials] == [TrialState.FAIL, TrialState.FAIL]
    assert all(t.user_attrs["failed_gate"] == "parity" for t in broken.trials)
    assert "tight error" in broken.trials[0].user_attrs["reason"]

    code, out, err = campaign.run("test_slow", "--trials", "1", "--types", "q4_K")
    assert code == 0, err
    slow = _study(campaign.storage, "test_slow").trials[0]
    assert slow.state == TrialState.PRUNED and slow.value is None
    assert "slower than the incumbent" in slow.user_attrs["reason"]
    run = MlflowClient(campaign.tracking).get_run(slow.user_attrs["mlflow_run_id"])
    assert run.data.tags[tracking.TAG_OUTCOME] == "pruned" and run.data.tags["gate.perf"] == "ABANDONED"


def test_bad_input_is_refused_in_one_line_and_nothing_recorded_is_lost(campaign, test_levers):
    code, _, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", "--study", "shared")
    assert code == 0, err

    def snapshot():
        study = _study(campaign.storage, "shared")
        return [(t.number, t.state, t.value) for t in study.trials], dict(study.user_attrs)

    before = snapshot()
    _one_line_error(*campaign.run("nope")[::2], "unknown lever 'nope'; known levers:")
    _one_line_error(*campaign.run("cpu_demo", "--storage", "nosuchdb://x")[::2], "cannot open study storage")
    _one_line_error(*campaign.run("test_empty")[::2], "search space is empty")
    _one_line_error(*campaign.run("cpu_demo", "--types", "q2_K")[::2], "does not claim types q2_K")
    _one_line_error(*campaign.run("cpu_demo", "--suite", "nope")[::2], "unknown workload suite 'nope'")
    _one_line_error(*campaign.run("test_broken", "--study", "shared", "--types", "q4_K")[::2],
                    "study 'shared' belongs to lever 'cpu_demo'")
    _one_line_error(*campaign.run("cpu_demo", "--study", "shared", "--suite", "cpu_small")[::2],
                    "measures suite 'cpu_tiny'")
    _one_line_error(*campaign("resume", "missing", "--storage", campaign.storage)[::2], "no study 'missing'")
    _one_line_error(*campaign("gate", "shared/7")[::2], "has no trial 7")
    _one_line_error(*campaign("gate", "not-a-ref")[::2], "bad trial reference")
    _one_line_error(*campaign.run("cpu_demo", "--reps", "5", "--study", "shared", "--suite", "cpu_tiny")[::2],
                    ">= 20 reps")
    # a candidate outside the space is refused before the ones ahead of it are queued or run
    _one_line_error(*campaign.run("cpu_demo", "--study", "shared", "--suite", "cpu_tiny", "--trials", "2",
                                  f"--enqueue={json.dumps(FAST[0])}",
                                  f"--enqueue={json.dumps({**FAST[1], 'rows_per_tile': 96})}")[::2],
                    "rows_per_tile=96 is outside its space (one of [64, 128, 256, 512, 1024])")
    _one_line_error(*campaign.run("cpu_demo", "--study", "shared", "--enqueue", '{"tile": 3}')[::2],
                    "has no parameters tile")
    assert snapshot() == before
    assert not _study(campaign.storage, "shared").get_trials(states=(TrialState.WAITING,))

    study = _study(campaign.storage, "shared")
    study.set_user_attr("engine_schema", 99)  # as written by a newer engine
    for argv in (("resume", "shared"), ("gate", "shared/0")):
        _one_line_error(*campaign(*argv)[::2], "engine schema 99, newer than this engine's 1")
    _one_line_error(*campaign.run("cpu_demo", "--study", "shared", "--suite", "cpu_tiny")[::2], "newer than")
    trials_after, attrs_after = snapshot()
    assert trials_after == before[0] and attrs_after == {**before[1], "engine_schema": 99}


def test_gpu_lever_without_gpu_fails_in_one_line(campaign, test_levers):
    try:
        import pycuda.driver  # noqa: F401
        pytest.skip("PyCUDA is importable here: this test is for machines without a GPU")
    except ImportError:
        pass
    _one_line_error(*campaign.run("test_gpu")[::2], "error: ")
    assert not (campaign.root / "mlruns" / "optuna.db").exists()  # refused before any study was written

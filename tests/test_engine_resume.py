"""Kill -9 a running `campaign run` mid-trial, resume it, and check both stores trial by trial."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
from mlflow import MlflowClient
from optuna.trial import TrialState

from campaign import cli, tracking
from tests.conftest import REPO, trial_runs


def _wait_mid_trial(storage: optuna.storages.RDBStorage, process: subprocess.Popen, timeout: float):
    """Wait until >= 1 trial completed and another is running with its MLflow run started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"campaign run exited early with {process.returncode}"
        try:
            study_id = storage.get_study_id_from_name("cpu_demo")
            trials = storage.get_all_trials(study_id, deepcopy=False)
        except KeyError:  # study not created yet
            trials = []
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs]
        if complete and running:
            return
        time.sleep(0.05)
    raise AssertionError("no trial was running after one had completed")


def test_kill_mid_study_then_resume_loses_and_duplicates_nothing(root, capsys):
    storage_url = f"sqlite:///{root / 'mlruns' / 'optuna.db'}"
    tracking_uri = f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli", "--root", str(root), "run", "cpu_demo", "--suite", "cpu_tiny",
         "--trials", "50"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        (root / "mlruns").mkdir(parents=True, exist_ok=True)
        storage = optuna.storages.RDBStorage(storage_url)
        _wait_mid_trial(storage, process, timeout=120)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()

    killed = optuna.load_study(study_name="cpu_demo", storage=storage_url)
    complete_before = {t.number: t.value for t in killed.trials if t.state == TrialState.COMPLETE}
    running_before = [t.number for t in killed.trials if t.state == TrialState.RUNNING]
    assert complete_before and len(running_before) == 1, [t.state for t in killed.trials]
    interrupted = running_before[0]

    assert cli.main(["--root", str(root), "resume", "cpu_demo", "--trials", "1"]) == 0
    out = capsys.readouterr().out
    assert f"marked interrupted trial(s) {interrupted} as failed" in out

    study = optuna.load_study(study_name="cpu_demo", storage=storage_url)
    trials = {t.number: t for t in study.trials}
    assert sorted(trials) == list(range(len(trials)))  # numbers unique and dense
    assert {n: trials[n].value for n in complete_before} == complete_before  # nothing completed was lost
    assert trials[interrupted].state == TrialState.FAIL
    assert trials[interrupted].user_attrs["outcome"] == "interrupted"
    new = [t for n, t in trials.items() if n > max(complete_before.keys() | {interrupted})]
    # The resumed trial ran to a verdict: a tile the space allows may still be judged infeasible (over the
    # scratch budget, or f32 accumulation failing parity), which Optuna stores as FAIL with that outcome.
    assert len(new) == 1, new
    verdicts = {TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "infeasible"}
    assert new[0].user_attrs.get("outcome") == verdicts.get(new[0].state), (new[0].state, new[0].user_attrs)

    client = MlflowClient(tracking_uri)
    by_number = trial_runs(client, study)
    assert sorted(by_number) == sorted(trials)
    assert all(len(r) == 1 for r in by_number.values()), "a trial has two MLflow runs"
    for number, trial in trials.items():
        (run,) = by_number[number]
        assert trial.user_attrs["mlflow_run_id"] == run.info.run_id
        expected = "FAILED" if trial.state == TrialState.FAIL else "FINISHED"
        assert run.info.status == expected, (number, trial.state, run.info.status)
    assert by_number[interrupted][0].data.tags[tracking.TAG_OUTCOME] == "interrupted"
    assert client.get_run(study.user_attrs["mlflow_parent_run_id"]).info.status == "FINISHED"

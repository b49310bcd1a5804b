"""The engine against real servers: an `mlflow server` over HTTP, a PostgreSQL study storage,
and `campaign ui` serving the local store."""
from __future__ import annotations

import subprocess
import sys
import urllib.request

import optuna
import pytest
from mlflow import MlflowClient
from optuna.trial import TrialState

from campaign import study as study_mod, tracking
from tests.conftest import REPO, free_port, wait_http


def test_trials_are_logged_to_an_mlflow_server_over_http(campaign, mlflow_server):
    campaign.tracking = mlflow_server
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "2")
    assert code == 0, err
    assert f"in {mlflow_server}" in out
    study = optuna.load_study(study_name="cpu_demo", storage=campaign.storage)
    client = MlflowClient(mlflow_server)
    parent = client.get_run(study.user_attrs["mlflow_parent_run_id"])
    assert parent.data.tags[tracking.TAG_KIND] == "study" and parent.info.status == "FINISHED"
    for trial in study.trials:
        run = client.get_run(trial.user_attrs["mlflow_run_id"])
        assert run.data.tags[tracking.TAG_PARENT] == parent.info.run_id
        assert run.data.tags[tracking.TAG_TRIAL] == str(trial.number)
        if trial.state == TrialState.COMPLETE:  # artifacts went through the server's proxy
            assert [a.path for a in client.list_artifacts(run.info.run_id, "plots")] == ["plots/tflops_vs_T.png"]

    # `campaign gate` finds the trial from its MLflow run id alone.
    run_id = study.trials[0].user_attrs["mlflow_run_id"]
    code, out, err = campaign("gate", run_id, "--tracking-uri", mlflow_server)
    assert code in (0, 1), err  # 1 = a gate said no: a verdict, not an error
    assert out.startswith(f"cpu_demo/0 [cpu_demo]")
    assert [line.split()[0] for line in out.splitlines()[1:5]] == ["static", "parity", "perf", "promote"]


def test_study_on_postgresql_runs_and_resumes(campaign, postgres_url):
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", "--storage", postgres_url)
    assert code == 0, err
    code, out, err = campaign("resume", "cpu_demo", "--storage", postgres_url, "--trials", "1")
    assert code == 0, err
    study = optuna.load_study(study_name="cpu_demo", storage=study_mod.with_installed_driver(postgres_url))
    assert [t.number for t in study.trials] == [0, 1]
    assert all(t.state.is_finished() for t in study.trials)
    assert study.user_attrs["lever"] == "cpu_demo"
    assert not (campaign.root / "mlruns" / "optuna.db").exists()  # nothing went to the default sqlite


def test_campaign_ui_serves_the_local_store_and_stops_with_it(root):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "campaign.cli", "--root", str(root), "ui", "--port", str(port)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", process, timeout=180)
        assert process.stdout.readline().startswith(f"MLflow UI: http://127.0.0.1:{port}")
        assert (root / "mlruns" / "mlflow.db").exists()
        process.terminate()  # only `campaign ui` itself: it must take its server down
        assert process.wait(timeout=60) == 0
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        if process.poll() is None:
            process.kill()

"""MLflow side of a campaign: one parent run per study, one nested run per trial.

Everything goes through an explicit `MlflowClient(tracking_uri)` (no global fluent state),
so a process can talk to several stores. The two records point at each other: the trial
run carries the tags `optuna.study` / `optuna.trial_number`, the Optuna trial the user
attribute `mlflow_run_id`.

Device scripts can reuse the pieces: `Tracker(uri).start_run(...)`, `log_gate`,
`log_perf`, `log_variants`, `finish`.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from campaign.errors import StorageError, UnknownNameError
from campaign.workloads import device_ceiling, metric_prefix
from gates.result import GateResult

EXPERIMENT = "mmq-campaign"
TAG_KIND = "campaign.kind"  # study | trial
TAG_STUDY = "optuna.study"
TAG_TRIAL = "optuna.trial_number"
TAG_LEVER = "campaign.lever"
TAG_PARAMS = "campaign.params_json"
TAG_OUTCOME = "campaign.outcome"  # complete | infeasible | pruned | interrupted | error
TAG_PARENT = "mlflow.parentRunId"
MAX_BATCH = 900  # MLflow accepts at most 1000 entities per log_batch


def _quiet_http_defaults() -> None:
    # MLflow retries an unreachable server for minutes by default; a wrong URI should fail fast.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def is_local_store(uri: str) -> bool:
    return not uri.startswith(("http://", "https://", "databricks"))


class Tracker:
    def __init__(self, tracking_uri: str, experiment: str = EXPERIMENT, artifact_root: Path | None = None):
        _quiet_http_defaults()
        from mlflow import MlflowClient

        self.uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        try:
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                # A local store keeps artifacts under <root>/mlruns/artifacts; a server decides itself.
                location = Path(artifact_root).resolve().as_uri() if artifact_root and is_local_store(tracking_uri) else None
                self.experiment_id = self.client.create_experiment(experiment, artifact_location=location)
            else:
                self.experiment_id = found.experiment_id
        except Exception as exc:
            raise StorageError(f"cannot use MLflow tracking store {tracking_uri}: {_first_line(exc)}") from None
        self.experiment = experiment

    # ------------------------------------------------------------------ runs
    def start_run(self, name: str, tags: dict, params: dict | None = None, parent_id: str | None = None) -> str:
        tags = dict(tags)
        if parent_id:
            tags[TAG_PARENT] = parent_id
        run = self.client.create_run(self.experiment_id, tags={k: str(v) for k, v in tags.items()}, run_name=name)
        if params:
            self.log_params(run.info.run_id, params)
        return run.info.run_id

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def finish(self, run_id: str, status: str = "FINISHED", outcome: str | None = None) -> None:
        if outcome:
            self.client.set_tag(run_id, TAG_OUTCOME, outcome)
        self.client.set_terminated(run_id, status=status)

    def get_run(self, run_id: str):
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_run(run_id)
        except MlflowException:
            raise UnknownNameError(f"no MLflow run {run_id} in {self.uri}") from None

    def child_runs(self, parent_id: str) -> list:
        return self.search(f"tags.`{TAG_PARENT}` = '{parent_id}'")

    def search(self, filter_string: str, order_by: list[str] | None = None) -> list:
        runs, token = [], None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=filter_string,
                                           max_results=1000, order_by=order_by, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    # --------------------------------------------------------------- logging
    def _batch(self, run_id: str, metrics=(), params=(), tags=()) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        entities = ([Metric(k, float(v), now, 0) for k, v in metrics]
                    + [Param(k, str(v)) for k, v in params] + [RunTag(k, str(v)) for k, v in tags])
        for i in range(0, len(entities), MAX_BATCH):
            chunk = entities[i:i + MAX_BATCH]
            self.client.log_batch(run_id,
                                  metrics=[e for e in chunk if isinstance(e, Metric)],
                                  params=[e for e in chunk if isinstance(e, Param)],
                                  tags=[e for e in chunk if isinstance(e, RunTag)])

    def log_params(self, run_id: str, params: dict) -> None:
        self._batch(run_id, params=params.items())

    def has_run(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_run(run_id)
            return True
        except MlflowException:
            return False

    def set_tags(self, run_id: str, tags: dict) -> None:
        self._batch(run_id, tags=tags.items())

    def log_metrics(self, run_id: str, metrics: dict) -> None:
        self._batch(run_id, metrics=[(k, v) for k, v in metrics.items() if v is not None])

    def log_gate(self, run_id: str, gate: GateResult) -> None:
        """Verdict and reason as tags, numeric numbers as metrics, per-workload details as metrics."""
        tags = {f"gate.{gate.gate}": "PASS" if gate.passed else "FAIL"}
        if gate.reason:
            tags[f"gate.{gate.gate}.reason"] = gate.reason[:5000]
        metrics = {}
        for name, value in gate.numbers.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                metrics[f"{gate.gate}.{name}"] = value
            else:
                tags[f"gate.{gate.gate}.{name}"] = value
        for label, numbers in gate.details.items():
            for name, value in numbers.items():
                metrics[f"{metric_prefix(label)}/{gate.gate}_{name}"] = value
        self._batch(run_id, metrics=metrics.items(), tags=tags.items())

    def log_perf(self, run_id: str, report, ceilings: dict, mode: str) -> None:
        """Per-shape time (median, p90), TFLOP/s and fraction of the device ceiling, both sides."""
        metrics = {"objective.geomean_speedup": report.geomean_speedup}
        for r in report.results:
            p = metric_prefix(r.workload.label())
            ceiling = device_ceiling(r.workload, ceilings, mode)
            for side, timing in (("", r.candidate), ("incumbent_", r.incumbent)):
                tflops = r.workload.flops / timing.median / 1e12
                metrics[f"{p}/{side}median_ms"] = timing.median * 1e3
                metrics[f"{p}/{side}p90_ms"] = timing.p90 * 1e3
                metrics[f"{p}/{side}tflops"] = tflops
                if ceiling:
                    metrics[f"{p}/{side}ceiling_frac"] = tflops / ceiling
            metrics[f"{p}/speedup"] = r.speedup
            metrics[f"{p}/noise_floor"] = r.noise_floor
        self.log_metrics(run_id, metrics)
        samples = {r.workload.label(): {"candidate": r.candidate.samples, "incumbent": r.incumbent.samples,
                                        "incumbent_again": r.incumbent_again.samples} for r in report.results}
        self.log_json(run_id, samples, "perf/timings_s.json")  # every sample, for a second look

    def log_variants(self, run_id: str, variants: dict) -> None:
        """The exact source each variant was built from and its resource report."""
        for qtype, variant in variants.items():
            suffix = "py" if variant.resources.get("backend") == "cpu" else "cu"
            self.client.log_text(run_id, variant.source, f"source/{variant.family}_{qtype}.{suffix}")
            self.log_json(run_id, variant.resources, f"resources/{variant.family}_{qtype}.json")

    def log_json(self, run_id: str, data, artifact_file: str) -> None:
        self.client.log_dict(run_id, _jsonable(data), artifact_file)

    def log_figure(self, run_id: str, figure, artifact_file: str) -> None:
        from campaign import report  # (matplotlib and PIL only where a figure is logged)

        artifact = Path(artifact_file)
        with tempfile.TemporaryDirectory() as folder:
            path = report.save_png(figure, Path(folder) / artifact.name)
            self.client.log_artifact(run_id, str(path), artifact.parent.as_posix() if artifact.parent.parts else None)

    def log_file(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))

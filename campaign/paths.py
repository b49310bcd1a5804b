"""Where the campaign keeps its state: one root folder (the repo by default).

    <root>/mlruns/optuna.db       default Optuna storage
    <root>/mlruns/mlflow.db       default MLflow tracking store
    <root>/mlruns/artifacts/      default MLflow artifact root
    <root>/champions.json         promoted champions, read by the dispatcher

The root is `--root`, else $CAMPAIGN_ROOT, else the checkout this package lives in
(the folder holding pyproject.toml), else the current directory.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "CAMPAIGN_ROOT"


def root(override: str | os.PathLike | None = None) -> Path:
    if override:
        return Path(override).resolve()
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    checkout = Path(__file__).resolve().parents[1]
    return checkout if (checkout / "pyproject.toml").exists() else Path.cwd()


def mlruns(base: Path) -> Path:
    path = base / "mlruns"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_storage(base: Path) -> str:
    return f"sqlite:///{mlruns(base) / 'optuna.db'}"


def default_tracking_uri(base: Path) -> str:
    return f"sqlite:///{mlruns(base) / 'mlflow.db'}"


def default_artifact_root(base: Path) -> Path:
    return mlruns(base) / "artifacts"


def champions_file(base: Path) -> Path:
    return base / "champions.json"

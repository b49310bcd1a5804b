"""Optuna side of a campaign: storage, study identity, sampling, and interrupted trials.

A campaign study is an ordinary Optuna study whose user attributes say what it measures
(lever, suite, types, incumbents, engine schema). Every trial records which process runs
it, so a trial left RUNNING by a killed process can be told apart from one that a live
worker is still running: on the same host the pid is checked at once; elsewhere Optuna's
heartbeat (RDBStorage heartbeat_interval/grace_period) fails it once it goes stale.
"""
from __future__ import annotations

import os
import socket
import warnings
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from campaign.errors import StorageError, StudyMismatchError, UnknownNameError

ENGINE_SCHEMA = 1
HEARTBEAT_S = 30
GRACE_S = 120


def redact(url: str) -> str:
    """The URL without its password, for messages and tags."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def with_installed_driver(url: str) -> str:
    """postgresql://... means psycopg (3) to SQLAlchemy 2.1; use psycopg2 when only that is installed."""
    import importlib.util

    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg") is None \
            and importlib.util.find_spec("psycopg2") is not None:
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def open_storage(url: str) -> optuna.storages.RDBStorage:
    url = with_installed_driver(url)
    try:
        with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    except Exception as exc:  # sqlalchemy: bad dialect, unreachable server, unwritable file, ...
        why = exc.__cause__ if isinstance(exc, ImportError) and exc.__cause__ else exc  # Optuna hides the module
        line = (str(why).strip().splitlines() or [type(why).__name__])[0][:300]
        raise StorageError(f"cannot open study storage {redact(url)}: {line}") from None


@dataclass(frozen=True)
class StudyIdentity:
    """What a study measures; stored in its user attributes when it is created."""

    lever: str
    suite: str
    types: tuple[str, ...]

    def attrs(self) -> dict:
        return {"lever": self.lever, "suite": self.suite, "types": list(self.types), "engine_schema": ENGINE_SCHEMA}


def load(storage, name: str, sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        return None


def load_existing(storage, name: str, url: str, sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    study = load(storage, name, sampler)
    if study is None:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
        raise UnknownNameError(f"no study {name!r} in {redact(url)}; studies there: {', '.join(names) or 'none'}")
    check_schema(study)
    return study


def check_schema(study: optuna.Study) -> None:
    attrs = study.user_attrs
    if "engine_schema" not in attrs:
        raise StudyMismatchError(f"study {study.study_name!r} was not created by the campaign engine")
    if attrs["engine_schema"] > ENGINE_SCHEMA:
        raise StudyMismatchError(f"study {study.study_name!r} has engine schema {attrs['engine_schema']}, "
                                 f"newer than this engine's {ENGINE_SCHEMA}: upgrade mmq-campaign")


def identity(study: optuna.Study) -> StudyIdentity:
    a = study.user_attrs
    return StudyIdentity(a["lever"], a["suite"], tuple(a["types"]))


def check_identity(study: optuna.Study, wanted: StudyIdentity) -> None:
    """An existing study must measure exactly what is asked for."""
    check_schema(study)
    name, have = study.study_name, identity(study)
    if have.lever != wanted.lever:
        raise StudyMismatchError(f"study {name!r} belongs to lever {have.lever!r}, not {wanted.lever!r}; "
                                 f"choose another --study name")
    if have != wanted:
        raise StudyMismatchError(f"study {name!r} measures suite {have.suite!r} types {','.join(have.types)}, "
                                 f"not suite {wanted.suite!r} types {','.join(wanted.types)}; "
                                 f"use `campaign resume {name}` or another --study name")


def create(storage, name: str, wanted: StudyIdentity, extra_attrs: dict,
           sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize", sampler=sampler)
    for key, value in {**wanted.attrs(), **extra_attrs}.items():
        study.set_user_attr(key, value)
    return study


def sample(trial: optuna.Trial, space: dict) -> dict:
    """Define-by-run sampling of a plain-dict space: lists are categorical, tuples int ranges."""
    params = {}
    for name, choices in space.items():
        if isinstance(choices, list):
            params[name] = trial.suggest_categorical(name, choices)
        else:
            low, high, *step = choices
            params[name] = trial.suggest_int(name, low, high, step=step[0] if step else 1)
    return params


# ----------------------------------------------------------------- workers

def _process_start(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (tells a reused pid apart)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def worker_attrs() -> dict:
    pid = os.getpid()
    return {"worker_host": socket.gethostname(), "worker_pid": pid, "worker_start": _process_start(pid) or ""}


def worker_is_dead(attrs: dict) -> bool:
    """True only when we can tell: the trial's worker ran on this host and is gone."""
    if attrs.get("worker_host") != socket.gethostname() or "worker_pid" not in attrs:
        return False
    started = _process_start(int(attrs["worker_pid"]))
    return started is None or (attrs.get("worker_start") not in ("", None) and started != attrs["worker_start"])


def dead_running_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """RUNNING trials whose worker is gone: on this host by pid; elsewhere Optuna's heartbeat
    has already failed them (fail_stale_trials) once they went stale."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if worker_is_dead(t.user_attrs)]


def mark_interrupted(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    storage = study._storage
    storage.set_trial_user_attr(trial._trial_id, "outcome", "interrupted")
    storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)


def set_trial_attr(study: optuna.Study, trial: optuna.trial.FrozenTrial, key: str, value) -> None:
    study._storage.set_trial_user_attr(trial._trial_id, key, value)


def is_done(trial: optuna.trial.FrozenTrial) -> bool:
    """Finished and not interrupted: counts towards the trials a study was asked for.
    (A FAIL without an outcome was failed by Optuna's heartbeat check: interrupted too.)"""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and trial.user_attrs.get("outcome") in ("infeasible", "error")


def counts(study: optuna.Study) -> dict[str, int]:
    result: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        result[t.state.name] = result.get(t.state.name, 0) + 1
    return result

"""champions.json: the promoted variant per lever and (qtype, arch, T regime), with history.

    {"schema": 1,
     "levers": {"<lever>": {"q4_K/sm_90/small": {"params": {...}, "family": ..., "mlflow_run_id": ...,
                                                  "study": ..., "trial": ..., "speedup": ...,
                                                  "promoted_at": ..., "history": [older records]}}}}

The dispatcher calls `lookup(family_or_lever, qtype, arch, T)`. Writes go through a lock
file and an atomic rename, so a reader never sees half a file and no promotion is lost.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path

from campaign import paths
from campaign.errors import CampaignError
from campaign.workloads import regime

SCHEMA = 1


def key(qtype: str, arch: str, regime_name: str) -> str:
    return f"{qtype}/{arch}/{regime_name}"


def default_path() -> Path:
    return paths.champions_file(paths.root())


def load(path: Path | None = None) -> dict:
    path = Path(path or default_path())
    if not path.exists():
        return {"schema": SCHEMA, "levers": {}}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CampaignError(f"{path} is not valid JSON ({exc}); fix or move it, nothing was changed") from None
    if data.get("schema", 0) > SCHEMA:
        raise CampaignError(f"{path} has schema {data['schema']}, newer than this engine's {SCHEMA}")
    data.setdefault("levers", {})
    return data


def current(lever: str, champion_key: str, path: Path | None = None) -> dict | None:
    return load(path)["levers"].get(lever, {}).get(champion_key)


def lookup(family_or_lever: str, qtype: str, arch: str, T: int, path: Path | None = None) -> dict | None:
    """Params of the champion for this lever (or, failing that, family) at (qtype, arch, regime(T))."""
    levers = load(path)["levers"]
    wanted = key(qtype, arch, regime(T))
    record = levers.get(family_or_lever, {}).get(wanted)
    if record is None:
        matches = [r for entries in levers.values() for k, r in entries.items()
                   if k == wanted and r.get("family") == family_or_lever]
        record = max(matches, key=lambda r: r.get("promoted_at", ""), default=None)
    return dict(record["params"]) if record else None


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write_atomic(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def promote(lever: str, champion_key: str, record: dict, path: Path | None = None) -> dict | None:
    """Make `record` the champion of (lever, key); the previous one goes to its history. Returns it."""
    path = Path(path or default_path())
    with _locked(path):
        data = load(path)
        entries = data["levers"].setdefault(lever, {})
        previous = entries.get(champion_key)
        history = []
        if previous:
            history = previous.pop("history", []) + [previous]
        entries[champion_key] = {**record, "history": history}
        _write_atomic(path, data)
    return previous

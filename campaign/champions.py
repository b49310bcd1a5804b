"""champions.json: the promoted variant per lever and (qtype, arch, T regime), with history.

    {"schema": 1,
     "levers": {"<lever>": {"q4_K/sm_90/small": {"params": {...}, "family": ..., "mlflow_run_id": ...,
                                                  "study": ..., "trial": ..., "speedup": ...,
                                                  "promoted_at": ..., "history": [older records]}}}}

A record may also be a card's own, "q4_K/sm_90:h200/tiny" (`campaign promote --per-card`): one arch is several cards
(the H100 and the H200 are both sm_90) and a choice gated on one can lose on the other (perf log run 124). Lookups
take the card they run on and prefer its records to the arch's, regime by regime; without card records nothing
changes. (A colon, not "@": MLflow's tag names, which carry the key, allow it.)

Schema 2 adds shape-keyed records, "q4_K/sm_90/large/4096x14336" (M x K), for levers whose
parameters are tuned per shape (Lever.per_shape: adaptive_format's crossover T). A file is
written as schema 2 only once it holds such a key, so files without them stay readable by
schema-1 engines; a file newer than this engine is refused.

The dispatcher calls `lookup(family_or_lever, qtype, arch, T)` and, for a shape, `lookup_shaped`.
Writes go through a lock file and an atomic rename, so a reader never sees half a file and no
promotion is lost.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import math
import os
import re
import tempfile
from pathlib import Path

from campaign import paths
from campaign.errors import CampaignError
from campaign.workloads import regime_chain

SCHEMA = 2
SHAPED_SCHEMA = 2  # the first schema with shape-keyed records


def key(qtype: str, arch: str, regime_name: str, shape: tuple[int, int] | None = None,
        card: str | None = None) -> str:
    base = f"{qtype}/{arch}:{card}/{regime_name}" if card else f"{qtype}/{arch}/{regime_name}"
    return f"{base}/{shape[0]}x{shape[1]}" if shape else base


def card_of(device_info: dict) -> str | None:
    """The card's name as a key part: "NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"."""
    name = re.sub(r"^nvidia\s+", "", str(device_info.get("name", "")).strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or None


def cards_first(card: str | None) -> tuple[str | None, ...]:
    """The key variants a lookup tries at each regime: the card's own first, then the arch's."""
    return (card, None) if card else (None,)


def key_shape(champion_key: str) -> tuple[int, int] | None:
    """(M, K) of a shape-keyed record's key, None for a (qtype, arch, regime) key."""
    parts = champion_key.split("/")
    if len(parts) != 4:
        return None
    m, k = parts[3].split("x")
    return int(m), int(k)


def default_path() -> Path:
    return paths.champions_file(paths.root())


def load(path: Path | None = None) -> dict:
    path = Path(path or default_path())
    if not path.exists():
        return {"schema": 1, "levers": {}}  # the oldest schema that describes it (see _schema_of)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CampaignError(f"{path} is not valid JSON ({exc}); fix or move it, nothing was changed") from None
    if data.get("schema", 0) > SCHEMA:
        raise CampaignError(f"{path} has schema {data['schema']}, newer than this engine's {SCHEMA}: "
                            f"update the engine to read it; nothing was changed")
    data.setdefault("levers", {})
    return data


def current(lever: str, champion_key: str, path: Path | None = None) -> dict | None:
    return load(path)["levers"].get(lever, {}).get(champion_key)


def lookup_record(family_or_lever: str, qtype: str, arch: str, T: int, path: Path | None = None,
                  card: str | None = None) -> dict | None:
    """The champion record for this lever (or, failing that, family) at (qtype, arch, regime(T)),
    else at the regime that regime inherits from (workloads.INHERITS); at each, the card's own first."""
    levers = load(path)["levers"]
    for regime_name in regime_chain(T):
        for on in cards_first(card):
            wanted = key(qtype, arch, regime_name, card=on)
            record = levers.get(family_or_lever, {}).get(wanted)
            if record is None:
                matches = [r for entries in levers.values() for k, r in entries.items()
                           if k == wanted and r.get("family") == family_or_lever]
                record = max(matches, key=lambda r: r.get("promoted_at", ""), default=None)
            if record is not None:
                return record
    return None


def lookup(family_or_lever: str, qtype: str, arch: str, T: int, path: Path | None = None,
           card: str | None = None) -> dict | None:
    """Params of the champion for this lever (or, failing that, family) at (qtype, arch, regime(T))."""
    record = lookup_record(family_or_lever, qtype, arch, T, path, card)
    return dict(record["params"]) if record else None


def lookup_shaped(lever: str, qtype: str, arch: str, T: int, M: int, K: int,
                  path: Path | None = None, card: str | None = None) -> tuple[str, dict] | None:
    """(key, record) of `lever`'s shape-keyed champion at (qtype, arch, regime(T)) for the
    shape (M, K): that shape's own record, else the record of the nearest promoted shape
    (distance |log2 M/M'| + |log2 K/K'|; ties go to the smaller key), else None. The key
    says which shape was used, so a caller can report an approximation as one."""
    entries = load(path)["levers"].get(lever, {})
    # (a regime without shape-keyed records: the one it inherits from; at each, the card's own shapes first)
    for regime_name, on in ((r, c) for r in regime_chain(T) for c in cards_first(card)):
        prefix = key(qtype, arch, regime_name, card=on) + "/"
        shaped = {k: r for k, r in entries.items() if k.startswith(prefix) and key_shape(k)}
        if shaped:
            break
    else:
        return None

    def distance(k: str) -> float:
        m, kk = key_shape(k)
        return abs(math.log2(M / m)) + abs(math.log2(K / kk))

    best = min(sorted(shaped), key=distance)
    return best, shaped[best]


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


def _schema_of(data: dict) -> int:
    """The oldest schema that can describe `data`: 2 once any record is shape-keyed."""
    shaped = any(key_shape(k) for entries in data["levers"].values() for k in entries)
    return SHAPED_SCHEMA if shaped else 1


def restore(lever: str, champion_key: str, reason: str, path: Path | None = None) -> dict:
    """Make the newest record in the champion's history champion again (a promotion that measured well on the gate's
    card and badly where it matters is undone without re-running anything). The displaced champion goes to the
    restored record's history with `retired_reason`; nothing is deleted. Returns the restored record."""
    if not reason.strip():
        raise CampaignError("restore needs a reason: it is kept with the champion it retires")
    path = Path(path or default_path())
    with _locked(path):
        data = load(path)
        entries = data["levers"].get(lever, {})
        if champion_key not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise CampaignError(f"{lever} has no champion at {champion_key} (has: {known}); nothing was changed")
        displaced = dict(entries[champion_key])
        history = displaced.pop("history", [])
        if not history:
            raise CampaignError(f"{lever} {champion_key} has no earlier champion to restore; nothing was changed")
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        restored = {**history[-1], "restored_at": now, "restored_reason": reason}
        displaced.update(retired_at=now, retired_reason=reason)
        entries[champion_key] = {**restored, "history": history[:-1] + [displaced]}
        _write_atomic(path, data)
    return entries[champion_key]


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
        data["schema"] = max(data.get("schema", 1), _schema_of(data))
        _write_atomic(path, data)
    return previous

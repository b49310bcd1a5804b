"""Promotion rule: every gate green -> the variant becomes champion for each (qtype, T regime)
group it wins, on this device's arch. Anything else is refused, naming the failing gate."""
from __future__ import annotations

import datetime

from campaign.champions import key
from campaign.errors import PromotionRefused
from campaign.workloads import regime
from gates.result import GateResult

REQUIRED = ("static", "parity", "perf")


def verdict(gates: list[GateResult]) -> GateResult:
    by_name = {g.gate: g for g in gates}
    for name in REQUIRED:
        gate = by_name.get(name)
        if gate is None:
            return GateResult("promote", False, {"failed_gate": name}, f"{name} gate not reached")
        if not gate.passed:
            return GateResult("promote", False, {"failed_gate": name}, f"{name} gate failed: {gate.reason}")
    return GateResult("promote", True, {"wins": by_name["perf"].numbers.get("wins", "")})


def champion_records(perf_report, arch: str, base: dict, per_shape: bool = False,
                     claims=None, card: str | None = None) -> dict[str, dict]:
    """One champions.json record per winning group, keyed 'qtype/arch/regime', or with
    `per_shape` 'qtype/arch/regime/MxK' (the group's one shape; several shapes in one group
    are refused: its verdict would be promoted for a shape that may have lost).
    `claims(workload) -> bool`: groups with no claimed workload get no record. `card`: the records are that card's
    own, 'qtype/arch:card/regime' (campaign promote --per-card)."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    records = {}
    for group in perf_report.wins:
        mine = [r.workload for r in perf_report.results
                if r.workload.qtype == group.qtype and regime(r.workload.T) == group.regime]
        if claims is not None and not any(claims(w) for w in mine):
            continue
        shape = None
        if per_shape:
            shapes = sorted({(w.M, w.K) for w in mine})
            if len(shapes) != 1:
                raise PromotionRefused(f"per-shape lever judged on {len(shapes)} shapes in group {group.key} "
                                       f"({', '.join(f'{m}x{k}' for m, k in shapes)}): study one shape per suite")
            shape = shapes[0]
        records[key(group.qtype, arch, group.regime, shape, card)] = {
            **base, "qtype": group.qtype, "arch": arch, "regime": group.regime, "speedup": group.speedup,
            "noise_floor": group.noise_floor, "margin": group.margin, "workloads": [w.label() for w in mine],
            "promoted_at": now, **({"shape": list(shape)} if shape else {}),
        }
    return records

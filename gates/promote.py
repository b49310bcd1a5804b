"""Promotion rule: every gate green -> the variant becomes champion for each (qtype, T regime)
group it wins, on this device's arch. Anything else is refused, naming the failing gate."""
from __future__ import annotations

import datetime

from campaign.champions import key
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


def champion_records(perf_report, arch: str, base: dict) -> dict[str, dict]:
    """One champions.json record per winning group, keyed 'qtype/arch/regime'."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    records = {}
    for group in perf_report.wins:
        labels = [r.workload.label() for r in perf_report.results
                  if r.workload.qtype == group.qtype and regime(r.workload.T) == group.regime]
        records[key(group.qtype, arch, group.regime)] = {
            **base, "qtype": group.qtype, "arch": arch, "regime": group.regime, "speedup": group.speedup,
            "noise_floor": group.noise_floor, "margin": group.margin, "workloads": labels, "promoted_at": now,
        }
    return records

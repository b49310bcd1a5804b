"""A gate verdict: passed or not, the numbers it was judged on, and why."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GateResult:
    gate: str  # "static" | "parity" | "perf"
    passed: bool
    numbers: dict = field(default_factory=dict)  # flat {name: float|int|str}, logged to MLflow
    reason: str = ""  # one line; empty when passed
    # per-workload numbers {workload label: {name: float}}: logged as metrics, not printed by line()
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        nums = ", ".join(f"{k}={_fmt(v)}" for k, v in self.numbers.items())
        tail = f" -- {self.reason}" if self.reason else ""
        return f"{self.gate:7s} {verdict}  {nums}{tail}"


def merge(gate: str, results: dict[str, GateResult]) -> GateResult:
    """One verdict from per-qtype verdicts: passed only if all passed; numbers prefixed by qtype."""
    if len(results) == 1:
        return next(iter(results.values()))
    numbers = {f"{qtype}.{k}": v for qtype, r in results.items() for k, v in r.numbers.items()}
    reasons = [f"{qtype}: {r.reason}" for qtype, r in results.items() if not r.passed]
    details = {label: d for r in results.values() for label, d in r.details.items()}
    return GateResult(gate, not reasons, numbers, "; ".join(reasons), details)


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)

"""Perf gate: interleaved A/B timing against the incumbent, with an A/A noise floor.

For every workload, in one process: the candidate (B) and two independently prepared
bounds of the incumbent (A, A') are run round-robin, the order rotated each rep so no
side always runs first (A B A' / B A' A / A' A B ...), after a warm-up. The A/A ratio
|median(A') / median(A) - 1| is that workload's noise floor. A gain counts only when it
exceeds the noise floor plus the lever's margin.

Verdicts are given per (qtype, T regime) group, because champions are kept per group:
the gate passes when at least one group wins; `wins` names them (those are what
promotion records). The same code times CPU and GPU: only `device.time_once(fn, inner)`
differs (perf_counter on the CPU, CUDA events on the GPU).

Reusable by a benchmark script: `time_variant(device, bound, reps, warmup) -> Timing`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from campaign.workloads import regime, workload_bytes
from gates.result import GateResult
from kernels.family import Bound, Problem, Variant, Workload

MIN_REPS = 20
PROBE_REPS = 5  # samples per side before a hopeless candidate may be abandoned
MAX_ROTATE = 8  # input copies per side at most


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, 90th percentile, and every sample."""

    median: float
    p90: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Timing":
        arr = np.asarray(samples, dtype=np.float64)
        return cls(float(np.median(arr)), float(np.percentile(arr, 90)), tuple(float(s) for s in arr))


@dataclass(frozen=True)
class PerfConfig:
    reps: int = MIN_REPS
    warmup: int = 3
    min_sample_s: float = 1e-3  # calls per sample grow until one sample lasts this long
    # bounds prepared per side and cycled, so inputs rotate past the L2; None: enough to cover
    # twice the device's device.info["l2_bytes"] (1 where the device does not say)
    rotate: int | None = None
    # After warm-up, a candidate this many times slower than the incumbent is abandoned
    # (None: always time it fully); the trial is then pruned, never recorded as fast.
    abandon_slower_than: float | None = None

    def __post_init__(self) -> None:
        if self.reps < MIN_REPS:
            raise ValueError(f"perf gate needs >= {MIN_REPS} reps, got {self.reps}")
        if self.warmup < 1 or (self.rotate is not None and self.rotate < 1):
            raise ValueError("perf gate needs warmup >= 1 and rotate >= 1")


def calibrate_inner(device, fn: Callable[[], None], min_sample_s: float) -> int:
    """Calls per timed sample so that one sample lasts at least min_sample_s."""
    once = max(device.time_once(fn, 1), 1e-9)
    return max(1, math.ceil(min_sample_s / once))


def _cycled(bounds: Sequence[Bound]) -> Callable[[int], Callable[[], None]]:
    return lambda rep: bounds[rep % len(bounds)].run


def time_variant(device, bound: "Bound | Sequence[Bound]", reps: int = MIN_REPS, warmup: int = 3,
                 inner: int | None = None, min_sample_s: float = 1e-3) -> Timing:
    """Time one variant alone (a benchmark script's building block); bounds are cycled per rep."""
    bounds = list(bound) if isinstance(bound, Sequence) else [bound]
    return time_interleaved(device, {"x": bounds}, reps, warmup, inner, min_sample_s)["x"]


def time_interleaved(device, sides: dict[str, Sequence[Bound]], reps: int, warmup: int,
                     inner: int | None = None, min_sample_s: float = 1e-3) -> dict[str, Timing]:
    """Round-robin timing of several sides in one process, order rotated every rep."""
    names = list(sides)
    runs = {name: _cycled(list(sides[name])) for name in names}
    for rep in range(warmup):
        for name in names:
            device.time_once(runs[name](rep), 1)
    if inner is None:
        inner = calibrate_inner(device, runs[names[0]](0), min_sample_s)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(device.time_once(runs[name](rep), inner))
    return {name: Timing.of(s) for name, s in samples.items()}


@dataclass(frozen=True)
class WorkloadPerf:
    workload: Workload
    candidate: Timing
    incumbent: Timing
    incumbent_again: Timing  # the A/A partner

    @property
    def speedup(self) -> float:
        return self.incumbent.median / self.candidate.median

    @property
    def noise_floor(self) -> float:
        return abs(self.incumbent_again.median / self.incumbent.median - 1.0)


@dataclass(frozen=True)
class GroupVerdict:
    qtype: str
    regime: str
    speedup: float  # geometric mean over the group's workloads
    noise_floor: float  # the largest A/A floor in the group
    margin: float

    @property
    def needed(self) -> float:
        return 1.0 + self.noise_floor + self.margin

    @property
    def win(self) -> bool:
        return self.speedup > self.needed

    @property
    def key(self) -> str:
        return f"{self.qtype}/{self.regime}"


@dataclass
class PerfReport:
    results: list[WorkloadPerf]
    groups: list[GroupVerdict]
    gate: GateResult

    @property
    def geomean_speedup(self) -> float:
        return geomean([r.speedup for r in self.results])

    @property
    def wins(self) -> list[GroupVerdict]:
        return [g for g in self.groups if g.win]


class Abandoned(Exception):
    """The candidate is hopelessly slower than the incumbent on a workload (see PerfConfig)."""

    def __init__(self, workload: Workload, slowdown: float):
        super().__init__(f"{slowdown:.1f}x slower than the incumbent on {workload.label()} after warm-up")
        self.workload, self.slowdown = workload, slowdown


def geomean(values: Sequence[float]) -> float:
    return float(math.exp(sum(math.log(v) for v in values) / len(values))) if values else float("nan")


def rotation(device_info: dict, w: Workload) -> int:
    """Bounds per side so that cycling through them touches twice the L2 (at most MAX_ROTATE)."""
    l2 = device_info.get("l2_bytes")
    return min(MAX_ROTATE, max(1, math.ceil(2 * l2 / workload_bytes(w)))) if l2 else 1


def _prepare(variant: Variant, problem: Problem, n: int) -> list[Bound]:
    return [variant.prepare(problem) for _ in range(n)]


def measure_workload(device, candidate: Variant, incumbent: Variant, problem: Problem,
                     config: PerfConfig) -> WorkloadPerf:
    """Interleaved A / B / A' timing of one workload (A and A' prepared independently)."""
    n = config.rotate or rotation(device.info, problem.workload)
    sides = {"incumbent": _prepare(incumbent, problem, n),
             "candidate": _prepare(candidate, problem, n),
             "incumbent_again": _prepare(incumbent, problem, n)}
    try:
        inner = calibrate_inner(device, sides["incumbent"][0].run, config.min_sample_s)
        if config.abandon_slower_than:
            # a short interleaved probe judged on best samples: a preempted sample cannot condemn
            probe = time_interleaved(device, {k: sides[k] for k in ("incumbent", "candidate")},
                                     reps=PROBE_REPS, warmup=1, inner=inner)
            slowdown = min(probe["candidate"].samples) / min(probe["incumbent"].samples)
            if slowdown > config.abandon_slower_than:
                raise Abandoned(problem.workload, slowdown)
        t = time_interleaved(device, sides, config.reps, config.warmup, inner)
    finally:
        for bounds in sides.values():
            for b in bounds:
                b.release()
    return WorkloadPerf(problem.workload, t["candidate"], t["incumbent"], t["incumbent_again"])


def judge(results: list[WorkloadPerf], margin: float) -> tuple[list[GroupVerdict], GateResult]:
    by_group: dict[tuple[str, str], list[WorkloadPerf]] = {}
    for r in results:
        by_group.setdefault((r.workload.qtype, regime(r.workload.T)), []).append(r)
    groups = [GroupVerdict(qtype, reg, geomean([r.speedup for r in rs]), max(r.noise_floor for r in rs), margin)
              for (qtype, reg), rs in by_group.items()]
    wins = [g for g in groups if g.win]
    numbers: dict = {"geomean_speedup": geomean([r.speedup for r in results]),
                     "max_noise_floor": max(r.noise_floor for r in results), "margin": margin,
                     "wins": ",".join(g.key for g in wins) or "none"}
    for g in groups:
        numbers[f"{g.key}.speedup"] = g.speedup
    reason = ""
    if not wins:
        best = max(groups, key=lambda g: g.speedup / g.needed)
        reason = (f"no (type, T regime) group beats the incumbent above noise + margin "
                  f"(best {best.key}: {best.speedup:.3f}x, needed > {best.needed:.3f}x)")
    return groups, GateResult("perf", bool(wins), numbers, reason)  # per-shape numbers: WorkloadPerf


def run(device, candidates: dict[str, Variant], incumbents: dict[str, Variant],
        problems: dict[str, Problem], config: PerfConfig, margin: float) -> PerfReport:
    """Time every problem: candidates keyed by qtype, incumbents and problems by workload label."""
    results = [measure_workload(device, candidates[problem.workload.qtype], incumbents[label], problem, config)
               for label, problem in problems.items()]
    groups, gate = judge(results, margin)
    return PerfReport(results, groups, gate)

"""One trial: build -> static -> parity -> perf -> record.

`evaluate` judges one parameter set (no tracking): `campaign gate`/`promote` call it too.
`Objective` is the Optuna objective: it samples, evaluates and records one trial in MLflow.
A static or parity failure makes the trial infeasible (Optuna FAIL, reason in user_attrs);
a candidate abandoned as hopelessly slow is PRUNED; neither is ever recorded as fast.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import numpy as np
import optuna

from campaign import incumbents as incumbents_mod
from campaign import tracking, workloads
from campaign.errors import CampaignError
from campaign.study import sample, worker_attrs
from experiments.base import Lever
from gates import parity, perf
from gates.build import build_all
from gates.inputs import timing_problem
from gates.result import GateResult, merge
from kernels import families
from kernels.family import Problem, Variant, Workload

PERF_INPUT_SEED = 0  # perf inputs are fixed per session: every trial is timed on the same data


class InfeasibleTrial(Exception):
    """The variant failed the static or parity gate; Optuna records the trial as FAIL."""


@dataclass
class Context:
    """Everything a study's trials share."""

    lever: Lever
    family: object
    types: tuple[str, ...]
    suite: str
    parity_workloads: list[Workload]
    device: object
    perf_config: perf.PerfConfig
    incumbent_specs: dict[str, incumbents_mod.IncumbentSpec]
    incumbents: dict[str, Variant]  # by workload label
    problems: dict[str, Problem]  # the perf inputs, by workload label

    @property
    def mode(self) -> str:
        return self.family.parity

    @property
    def ceilings(self) -> dict:
        return self.device.info.get("ceilings", {})


def make_context(lever: Lever, types: tuple[str, ...], suite_name: str, device, perf_config: perf.PerfConfig,
                 incumbent_specs: dict[str, incumbents_mod.IncumbentSpec]) -> Context:
    suite = workloads.get(suite_name)
    suite_workloads, skipped = suite.expand(types)
    for reason in skipped:  # a K-quant cannot hold a K % 256 != 0 shape: said, not silent
        print(f"skipped: {reason}", file=sys.stderr)
    missing = [t for t in types if not any(w.qtype == t for w in suite_workloads)]
    if missing:
        raise CampaignError(f"suite {suite_name!r} has no workload for {','.join(missing)}: {'; '.join(skipped)}")
    rng = np.random.default_rng(PERF_INPUT_SEED)
    weights: dict = {}
    return Context(
        lever=lever, family=families.get(lever.family), types=types, suite=suite_name,
        parity_workloads=workloads.get(suite.parity).workloads(types),
        device=device, perf_config=perf_config, incumbent_specs=incumbent_specs,
        incumbents=incumbents_mod.build(incumbent_specs, suite_workloads, device),
        problems={w.label(): timing_problem(w, rng, weights) for w in suite_workloads},
    )


@dataclass
class Evaluation:
    params: dict
    variants: dict[str, Variant] = field(default_factory=dict)
    gates: list[GateResult] = field(default_factory=list)
    perf: perf.PerfReport | None = None
    pruned: str = ""  # why timing was abandoned

    @property
    def infeasible(self) -> GateResult | None:
        return next((g for g in self.gates if g.gate in ("static", "parity") and not g.passed), None)



def evaluate(ctx: Context, params: dict, rng: np.random.Generator, config: perf.PerfConfig | None = None) -> Evaluation:
    """Run the gates in order on one parameter set; stop at the first infeasibility."""
    ev = Evaluation(params)
    ev.variants, static = build_all(ctx.lever, ctx.family, params, list(ctx.types), ctx.device)
    ev.gates.append(static)
    if not static.passed:
        return ev
    verdicts = {qtype: parity.run(v, ctx.parity_workloads, rng, mode=ctx.mode) for qtype, v in ev.variants.items()}
    ev.gates.append(merge("parity", verdicts))
    if not ev.gates[-1].passed:
        return ev
    try:
        ev.perf = perf.run(ctx.device, ev.variants, ctx.incumbents, ctx.problems, config or ctx.perf_config,
                           ctx.lever.margin)
    except perf.Abandoned as exc:
        ev.pruned = str(exc)
        return ev
    ev.gates.append(ev.perf.gate)
    return ev


def record(tracker: tracking.Tracker, run_id: str, ctx: Context, ev: Evaluation) -> None:
    from campaign import report  # matplotlib only when something is recorded

    for gate in ev.gates:
        tracker.log_gate(run_id, gate)
    if ev.pruned:
        tracker.set_tags(run_id, {"gate.perf": "ABANDONED", "gate.perf.reason": ev.pruned})
    tracker.log_variants(run_id, ev.variants)
    if ev.perf:
        tracker.log_perf(run_id, ev.perf, ctx.ceilings, ctx.mode)
        figure = report.trial_figure(ev.perf, ctx.ceilings, ctx.mode)
        tracker.log_figure(run_id, figure, "plots/tflops_vs_T.png")
        report.close(figure)


def summary(ev: Evaluation) -> str:
    if ev.infeasible:
        return f"infeasible ({ev.infeasible.gate}): {ev.infeasible.reason}"
    if ev.pruned:
        return f"pruned: {ev.pruned}"
    p = ev.perf
    wins = ",".join(g.key for g in p.wins) or "no win"
    return f"{p.geomean_speedup:.3f}x  perf {'PASS' if p.gate.passed else 'FAIL'} ({wins})"


class Objective:
    """The Optuna objective of a campaign study, recording each trial as a nested MLflow run."""

    def __init__(self, ctx: Context, tracker: tracking.Tracker, parent_run_id: str, study_name: str,
                 on_result=None):
        self.ctx, self.tracker, self.parent_run_id, self.study_name = ctx, tracker, parent_run_id, study_name
        self.on_result = on_result  # called with (trial number, Evaluation)

    def __call__(self, trial: optuna.Trial) -> float:
        for key, value in worker_attrs().items():
            trial.set_user_attr(key, value)
        params = {**self.ctx.lever.fixed, **sample(trial, self.ctx.lever.space)}
        trial.set_user_attr("params", params)  # what was built, fixed params included
        seed = int(np.random.SeedSequence().entropy % (1 << 63))  # fresh parity inputs, reproducible from the log
        run_id = self.tracker.start_run(
            f"trial-{trial.number}", parent_id=self.parent_run_id,
            tags={tracking.TAG_KIND: "trial", tracking.TAG_STUDY: self.study_name,
                  tracking.TAG_TRIAL: trial.number, tracking.TAG_LEVER: self.ctx.lever.name,
                  tracking.TAG_PARAMS: json.dumps(params, sort_keys=True)},
            params={**params, "parity_seed": seed, "types": ",".join(self.ctx.types), "suite": self.ctx.suite})
        trial.set_user_attr("mlflow_run_id", run_id)
        try:
            ev = evaluate(self.ctx, params, np.random.default_rng(seed))
            record(self.tracker, run_id, self.ctx, ev)
        except BaseException as exc:
            outcome = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
            trial.set_user_attr("outcome", outcome)
            trial.set_user_attr("reason", f"{type(exc).__name__}: {exc}"[:500])
            self.tracker.finish(run_id, "FAILED", outcome)
            raise
        if self.on_result:
            self.on_result(trial.number, ev)
        return self._conclude(trial, run_id, ev)

    def _conclude(self, trial: optuna.Trial, run_id: str, ev: Evaluation) -> float:
        if ev.infeasible:
            trial.set_user_attr("outcome", "infeasible")
            trial.set_user_attr("failed_gate", ev.infeasible.gate)
            trial.set_user_attr("reason", ev.infeasible.reason[:500])
            self.tracker.finish(run_id, "FAILED", "infeasible")
            raise InfeasibleTrial(f"{ev.infeasible.gate}: {ev.infeasible.reason}")
        if ev.pruned:
            trial.set_user_attr("outcome", "pruned")
            trial.set_user_attr("reason", ev.pruned)
            self.tracker.finish(run_id, "FINISHED", "pruned")
            raise optuna.TrialPruned(ev.pruned)
        trial.set_user_attr("outcome", "complete")
        trial.set_user_attr("perf_gate", "PASS" if ev.perf.gate.passed else "FAIL")
        trial.set_user_attr("wins", [g.key for g in ev.perf.wins])
        self.tracker.finish(run_id, "FINISHED", "complete")
        return ev.perf.geomean_speedup

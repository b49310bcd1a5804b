"""Re-judge a chosen trial with fresh measurements (`campaign gate`) and, when every gate is
green, record it as champion (`campaign promote`): champions.json and MLflow tags.

The variant is measured against the champions as they are now, not as they were when
its study began, so a stale study can never demote a better champion.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import experiments
from campaign import champions, incumbents, paths, workloads
from campaign.errors import PromotionRefused
from campaign.refs import TrialRef
from campaign.trial import Evaluation, evaluate, make_context
from gates import promote as rule
from gates.result import GateResult
from kernels import families


@dataclass
class Judgement:
    ref: TrialRef
    arch: str
    evaluation: Evaluation
    verdict: GateResult
    device: str = ""  # the card (or CPU) the gates ran on: one arch can be several cards (H100, H200: sm_90)
    card: str | None = None  # with --per-card: the champions' key part of that card (champions.card_of)

    def lines(self) -> list[str]:
        reached = {g.gate for g in self.evaluation.gates}
        return [g.line() for g in self.evaluation.gates] + [f"{name:7s} NOT RUN" for name in rule.REQUIRED
                                                            if name not in reached]


def judge(ref: TrialRef, opts) -> Judgement:
    lever = experiments.get(ref.lever)
    device = opts.open_device(lever.backend)
    arch = device.info["arch"]
    suite_workloads = workloads.get(ref.suite).workloads(ref.types)
    card = opts.card(device)
    specs = incumbents.resolve(lever, suite_workloads, arch, paths.champions_file(opts.root), card)
    # every workload timed in full: a verdict is never cut short
    ctx = make_context(lever, ref.types, ref.suite, device, opts.perf_config(abandon=None), specs)
    ev = evaluate(ctx, ref.params, np.random.default_rng())
    return Judgement(ref, arch, ev, rule.verdict(ev.gates), device.info.get("name", arch), card)


def promote(j: Judgement, opts) -> dict[str, dict]:
    """Record a judged variant as champion: {champion key: record}. Refused unless all gates are green."""
    ref = j.ref
    if not j.verdict.passed:
        raise PromotionRefused(f"not promoted: {ref.label()}: {j.verdict.reason}")
    lever = experiments.get(ref.lever)
    base = {"lever": lever.name, "family": lever.family, "params": ref.params, "study": ref.study,
            "trial": ref.trial, "mlflow_run_id": ref.run_id or "", "tracking_uri": ref.tracking_uri or "",
            "gated_on": j.device}
    route = getattr(families.get(lever.family), "route", None)
    # a composite (adaptive_format) is champion only where its own kernel runs: a group won
    # entirely below its crossover was won by the int8 stand-in, which the dispatcher never takes
    runs_own = (lambda w: route(ref.params, w.T) is not None) if route else None
    records = rule.champion_records(j.evaluation.perf, j.arch, base, per_shape=lever.per_shape or opts.per_shape,
                                    claims=runs_own, card=j.card)
    if not records:
        raise PromotionRefused(f"not promoted: {ref.label()}: it won only where its own kernel does not run "
                               f"({j.verdict.numbers.get('wins', '')})")
    path = paths.champions_file(opts.root)
    retired = {}
    for champion_key, record in records.items():
        previous = champions.promote(lever.name, champion_key, record, path)
        if previous and previous.get("mlflow_run_id") and previous["mlflow_run_id"] != ref.run_id:
            retired[champion_key] = previous
    if ref.run_id:
        _tag_runs(ref, opts, j, records, retired)
    return records


def _tag_runs(ref: TrialRef, opts, j: Judgement, records: dict, retired: dict) -> None:
    tracker = opts.tracker(ref.tracking_uri, ref.experiment)
    tags = {f"champion.{k}": "current" for k in records}
    tags["champion"] = "true"
    tags["promotion.verdicts"] = "\n".join(j.lines())
    tracker.set_tags(ref.run_id, tags)
    tracker.log_metrics(ref.run_id, {"promotion.geomean_speedup": j.evaluation.perf.geomean_speedup})
    for champion_key, previous in retired.items():
        # an old champion in another store stays as it is; so does one whose store is at the same
        # path on another machine (champions.json travels with the repo, the store may not)
        if previous.get("tracking_uri") == tracker.uri and tracker.has_run(previous["mlflow_run_id"]):
            tracker.set_tags(previous["mlflow_run_id"], {f"champion.{champion_key}": "retired"})


def restore(lever: str, champion_key: str, reason: str, root) -> dict:
    """`campaign restore`: the champion's predecessor is champion again (champions.restore), and where both runs are in
    this root's MLflow store their champion tags say so (the displaced one "retired", the restored one "current")."""
    from campaign import tracking

    restored = champions.restore(lever, champion_key, reason, paths.champions_file(root))
    local = paths.default_tracking_uri(root)
    pairs = ((restored["history"][-1], "retired"), (restored, "current"))
    runs = {rec["mlflow_run_id"]: state for rec, state in pairs
            if rec.get("mlflow_run_id") and rec.get("tracking_uri") == local}
    if runs and (paths.mlruns(root) / "mlflow.db").exists():  # (no store is created for this)
        tracker = tracking.Tracker(local, artifact_root=paths.default_artifact_root(root))
        for run_id, state in runs.items():
            if tracker.has_run(run_id):
                tracker.set_tags(run_id, {f"champion.{champion_key}": state})
    return restored

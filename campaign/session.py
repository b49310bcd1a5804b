"""A campaign session: open (or create) the study and its MLflow parent run, repair what a
killed process left behind, then let Optuna run trials with progress shown.

    start(lever, ...)  -> Session   (`campaign run`)
    reopen(study, ...) -> Session   (`campaign resume`)
    session.optimize(n_trials, timeout)
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState
from tqdm import tqdm

import experiments
from campaign import incumbents, paths, study as study_mod, tracking, workloads
from campaign.errors import CampaignError, StudyMismatchError
from campaign.trial import Context, InfeasibleTrial, Objective, make_context, summary
from experiments.base import Lever
from gates.perf import PerfConfig
from kernels.device import open_device

TRIAL_ABANDON_SLOWER_THAN = 3.0  # trials stop timing a candidate this much slower (pruned)


@dataclass(frozen=True)
class Options:
    root: Path
    storage: str | None = None
    tracking_uri: str | None = None
    experiment: str = tracking.EXPERIMENT
    reps: int = 20
    warmup: int = 3
    seed: int | None = None  # the sampler's (TPE) seed
    ceilings_file: Path | None = None  # measured device ceilings (JSON), for roofline fractions
    per_card: bool = False  # judge against, and promote as, this card's own champions (champions.card_of)
    per_shape: bool = False  # promote as the suite's one shape's champion (any lever; Lever.per_shape always does)

    @property
    def storage_url(self) -> str:
        return self.storage or paths.default_storage(self.root)

    def perf_config(self, abandon: float | None = TRIAL_ABANDON_SLOWER_THAN) -> PerfConfig:
        try:
            return PerfConfig(reps=self.reps, warmup=self.warmup, abandon_slower_than=abandon)
        except ValueError as exc:
            raise CampaignError(str(exc)) from None

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed)

    def card(self, device) -> str | None:
        """The card a study or a promotion keys champions by: the device's with per_card, else None (the arch's)."""
        from campaign import champions

        return champions.card_of(device.info) if self.per_card else None

    def open_device(self, backend: str):
        device = open_device(backend)
        if self.ceilings_file:
            device.info["ceilings"] = read_ceilings(self.ceilings_file)
        return device

    def tracker(self, uri: str | None = None, experiment: str | None = None) -> tracking.Tracker:
        uri = uri or self.tracking_uri or paths.default_tracking_uri(self.root)
        return tracking.Tracker(uri, experiment or self.experiment, paths.default_artifact_root(self.root))


def read_ceilings(path: Path) -> dict:
    """{"bandwidth_gbps": ..., "int8_tops": ...}, as kernels.cuda_runtime.measure_ceilings returns
    them, or a file holding them under "ceilings" (what `campaign bench` writes)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CampaignError(f"cannot read ceilings from {path}: {exc}") from None
    data = data.get("ceilings", data)
    return {k: v for k, v in data.items() if isinstance(v, (int, float))}


def resolve_types(lever: Lever, suite: workloads.Suite, asked: list[str] | None) -> tuple[str, ...]:
    types = tuple(asked) if asked else tuple(t for t in suite.types if t in lever.types) or lever.types
    unclaimed = [t for t in types if t not in lever.types]
    if unclaimed:
        raise CampaignError(f"lever {lever.name!r} does not claim types {','.join(unclaimed)}; "
                            f"it claims {','.join(lever.types)}")
    return types


@dataclass
class Session:
    study: optuna.Study
    lever: Lever
    ctx: Context
    tracker: tracking.Tracker
    parent_run_id: str

    @property
    def name(self) -> str:
        return self.study.study_name

    # ------------------------------------------------------------- repair
    def repair(self) -> list[int]:
        """Fail the trials of dead workers in both stores, then make MLflow follow Optuna.

        Idempotent: a repair killed half-way is finished by the next one."""
        runs = self._runs_by_trial()
        interrupted = []
        for trial in study_mod.dead_running_trials(self.study):
            run_ids = [r.info.run_id for r in runs.get(trial.number, [])]
            if not run_ids:
                run_ids = [self._new_failed_run(trial)]
                study_mod.set_trial_attr(self.study, trial, "mlflow_run_id", run_ids[0])
            for run_id in run_ids:
                self.tracker.finish(run_id, "FAILED", "interrupted")
            study_mod.mark_interrupted(self.study, trial)
            interrupted.append(trial.number)
        runs = self._runs_by_trial()
        for trial in self.study.get_trials(deepcopy=False):
            if not trial.state.is_finished():
                continue  # a live worker's
            want = "FINISHED" if trial.state in (TrialState.COMPLETE, TrialState.PRUNED) else "FAILED"
            if trial.number not in runs and want == "FAILED":
                self._new_failed_run(trial)  # failed by Optuna's heartbeat before its run existed
            for run in runs.get(trial.number, []):
                if run.info.status != want:
                    outcome = trial.user_attrs.get("outcome", "complete" if want == "FINISHED" else "interrupted")
                    self.tracker.finish(run.info.run_id, want, outcome)
        return interrupted

    def _runs_by_trial(self) -> dict[int, list]:
        runs: dict[int, list] = {}
        for run in self.tracker.child_runs(self.parent_run_id):
            number = run.data.tags.get(tracking.TAG_TRIAL)
            if number is not None:
                runs.setdefault(int(number), []).append(run)
        return runs

    def _new_failed_run(self, trial) -> str:
        """A trial killed before its MLflow run existed still gets one, so each store lists it."""
        run_id = self.tracker.start_run(
            f"trial-{trial.number}", parent_id=self.parent_run_id,
            tags={tracking.TAG_KIND: "trial", tracking.TAG_STUDY: self.name, tracking.TAG_TRIAL: trial.number,
                  tracking.TAG_LEVER: self.lever.name, tracking.TAG_PARAMS: json.dumps(trial.user_attrs.get("params", trial.params), sort_keys=True)})
        self.tracker.finish(run_id, "FAILED", "interrupted")
        return run_id

    # ----------------------------------------------------------- optimize
    def remaining(self) -> int:
        done = sum(study_mod.is_done(t) for t in self.study.get_trials(deepcopy=False))
        return max(0, int(self.study.user_attrs.get("trials_target", 0)) - done)

    def set_target(self, more: int) -> None:
        done = sum(study_mod.is_done(t) for t in self.study.get_trials(deepcopy=False))
        self.study.set_user_attr("trials_target", done + more)

    def optimize(self, n_trials: int | None, timeout: float | None, stream=None) -> None:
        stream = stream or sys.stderr
        bar = tqdm(total=n_trials, desc=f"{self.name} [{self.lever.name}]", unit="trial", file=stream,
                   dynamic_ncols=True)

        def on_result(number, ev):
            bar.write(f"trial {number}: {summary(ev)}", file=stream)

        def after_trial(study, trial):
            bar.update(1)
            complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
            if complete:
                best = max(complete, key=lambda t: t.value)
                bar.set_postfix_str(f"best {best.value:.3f}x (trial {best.number})")

        objective = Objective(self.ctx, self.tracker, self.parent_run_id, self.name, on_result)
        optuna_level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own line per trial replaces Optuna's
        self.tracker.reopen(self.parent_run_id)
        status = "KILLED"
        try:
            self.study.optimize(objective, n_trials=n_trials, timeout=timeout, catch=(InfeasibleTrial,),
                                callbacks=[after_trial], gc_after_trial=False)
            status = "FINISHED"
        finally:
            bar.close()
            optuna.logging.set_verbosity(optuna_level)
            self.tracker.finish(self.parent_run_id, status)

    def enqueue(self, params: dict) -> None:
        """Have the next trial try these parameters; the ones not named take the lever's defaults
        (Optuna would sample them: run 20's enqueued two-CTA tiles ran with a random CLUSTER)."""
        self.study.enqueue_trial(complete_candidate(self.lever, params), skip_if_exists=True)

    def best(self) -> optuna.trial.FrozenTrial | None:
        complete = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        return max(complete, key=lambda t: t.value) if complete else None


def complete_candidate(lever, params: dict) -> dict:
    """An enqueued candidate as the whole point of the space it names: every searched parameter
    it leaves out takes the lever's default, so what runs is what was written down."""
    check_params(lever, params)
    missing = [name for name in lever.space if name not in params]
    undefined = [name for name in missing if name not in lever.defaults]
    if undefined:
        raise CampaignError(f"lever {lever.name!r}: the candidate {params} leaves out {', '.join(undefined)}, "
                            f"which has no default: name it")
    full = {**params, **{name: lever.defaults[name] for name in missing}}
    check_params(lever, full)  # a default outside the space is the lever's bug: say so before queuing
    return full


def check_params(lever, params: dict) -> None:
    """Refuse parameters the lever's space cannot sample: Optuna would only fail on an enqueued
    one mid-study, after the trials queued ahead of it had run."""
    unknown = sorted(set(params) - set(lever.space))
    if unknown:
        raise CampaignError(f"lever {lever.name!r} has no parameters {', '.join(unknown)}; "
                            f"its space: {', '.join(lever.space)}")
    for name, value in params.items():
        choices = lever.space[name]
        if isinstance(choices, list):
            ok, allowed = value in choices, f"one of {choices}"
        else:
            low, high, *step = choices
            ok = isinstance(value, int) and low <= value <= high and (value - low) % (step[0] if step else 1) == 0
            allowed = f"an int in {low}..{high}" + (f" step {step[0]}" if step else "")
        if not ok:
            raise CampaignError(f"lever {lever.name!r}: {name}={value!r} is outside its space ({allowed})")


def start(lever_name: str, opts: Options, study_name: str | None = None, suite: str | None = None,
          types: list[str] | None = None) -> Session:
    """Open or create the study `study_name` (default: the lever's name) for `campaign run`."""
    lever = experiments.get(lever_name)
    experiments.check_space(lever)
    suite_obj = workloads.get(suite or lever.suite)
    wanted = study_mod.StudyIdentity(lever.name, suite_obj.name, resolve_types(lever, suite_obj, types))
    device = opts.open_device(lever.backend)
    storage = study_mod.open_storage(opts.storage_url)
    name = study_name or lever.name
    study = study_mod.load(storage, name, opts.sampler())
    if study is not None:
        study_mod.check_identity(study, wanted)  # before anything is written
        return _attach(study, lever, device, opts)
    tracker = opts.tracker()  # a bad tracking URI fails here, before a study exists
    arch = device.info["arch"]
    specs = incumbents.resolve(lever, suite_obj.workloads(wanted.types), arch, paths.champions_file(opts.root),
                               opts.card(device))
    study = study_mod.create(storage, name, wanted, {
        "experiment": tracker.experiment, "tracking_uri": tracker.uri, "arch": arch,
        "incumbents": {label: spec.to_json() for label, spec in specs.items()},
    }, opts.sampler())
    return _attach(study, lever, device, opts, tracker)


def reopen(study_name: str, opts: Options) -> Session:
    """The existing study `study_name`, its lever and suite from its own attributes (`campaign resume`)."""
    storage = study_mod.open_storage(opts.storage_url)
    study = study_mod.load_existing(storage, study_name, opts.storage_url, opts.sampler())
    lever = experiments.get(study.user_attrs["lever"])
    return _attach(study, lever, opts.open_device(lever.backend), opts)


def _attach(study: optuna.Study, lever: Lever, device, opts: Options,
            tracker: tracking.Tracker | None = None) -> Session:
    attrs = study.user_attrs
    if attrs.get("arch") != device.info["arch"]:
        raise StudyMismatchError(f"study {study.study_name!r} measures arch {attrs.get('arch')}, "
                                 f"this device is {device.info['arch']}")
    tracker = tracker or opts.tracker(opts.tracking_uri or attrs.get("tracking_uri"), attrs.get("experiment"))
    parent = attrs.get("mlflow_parent_run_id")
    if parent is not None:
        try:
            tracker.get_run(parent)
        except CampaignError:
            raise StudyMismatchError(f"study {study.study_name!r} is tracked in {attrs.get('tracking_uri')}, "
                                     f"not {tracker.uri}: pass that --tracking-uri") from None
    ident = study_mod.identity(study)
    ctx = make_context(lever, ident.types, ident.suite, device, opts.perf_config(),
                       incumbents.from_json(attrs["incumbents"]))
    if parent is None:  # a new study (or one whose creator died before this point)
        parent = tracker.start_run(study.study_name, params=_study_params(study, ctx, opts),
                                   tags={tracking.TAG_KIND: "study", tracking.TAG_STUDY: study.study_name,
                                         tracking.TAG_LEVER: lever.name})
        tracker.log_json(parent, {label: spec.to_json() for label, spec in ctx.incumbent_specs.items()},
                         "incumbents.json")
        study.set_user_attr("mlflow_parent_run_id", parent)
    return Session(study, lever, ctx, tracker, parent)


def _study_params(study: optuna.Study, ctx: Context, opts: Options) -> dict:
    a = study.user_attrs
    params = {"lever": ctx.lever.name, "family": ctx.lever.family, "suite": a["suite"], "types": ",".join(a["types"]),
              "storage": study_mod.redact(opts.storage_url), "engine_schema": study_mod.ENGINE_SCHEMA,
              "arch": a["arch"], "device": ctx.device.info.get("name", ""), "parity_mode": ctx.mode,
              "margin": ctx.lever.margin, "reps": opts.reps, "space": json.dumps(ctx.lever.space)}
    params.update({f"ceiling.{k}": v for k, v in ctx.ceilings.items()})
    return params

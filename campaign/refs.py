"""Find a trial from what a user types: `<study>/<trial number>` or an MLflow run id."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from campaign import study as study_mod, tracking
from campaign.errors import CampaignError, UnknownNameError

RUN_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class TrialRef:
    lever: str
    params: dict
    suite: str
    types: tuple[str, ...]
    study: str
    trial: int
    run_id: str | None
    tracking_uri: str | None
    experiment: str | None

    def label(self) -> str:
        return f"{self.study}/{self.trial}"


def resolve(ref: str, opts) -> TrialRef:
    if RUN_ID.fullmatch(ref):
        return _from_run(ref, opts)
    study_name, sep, number = ref.rpartition("/")
    if sep and study_name and number.isdigit():
        return _from_study(study_name, int(number), opts)
    raise CampaignError(f"bad trial reference {ref!r}: expected <study>/<trial number> or a 32-hex MLflow run id")


def _from_study(study_name: str, number: int, opts) -> TrialRef:
    study = study_mod.load_existing(study_mod.open_storage(opts.storage_url), study_name, opts.storage_url)
    trial = next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)
    if trial is None:
        raise UnknownNameError(f"study {study_name!r} has no trial {number} (it has {len(study.trials)})")
    if "params" not in trial.user_attrs:
        raise CampaignError(f"trial {study_name}/{number} never got to build a variant (no params recorded)")
    ident = study_mod.identity(study)
    return TrialRef(ident.lever, trial.user_attrs["params"], ident.suite, ident.types, study_name, number,
                    trial.user_attrs.get("mlflow_run_id"), opts.tracking_uri or study.user_attrs.get("tracking_uri"),
                    study.user_attrs.get("experiment"))


def _from_run(run_id: str, opts) -> TrialRef:
    tracker = opts.tracker()
    run = tracker.get_run(run_id)
    tags, params = run.data.tags, run.data.params
    if tags.get(tracking.TAG_KIND) != "trial" or tracking.TAG_PARAMS not in tags:
        raise CampaignError(f"MLflow run {run_id} is not a campaign trial run")
    return TrialRef(tags[tracking.TAG_LEVER], json.loads(tags[tracking.TAG_PARAMS]), params["suite"],
                    tuple(params["types"].split(",")), tags[tracking.TAG_STUDY], int(tags[tracking.TAG_TRIAL]),
                    run_id, tracker.uri, tracker.experiment)

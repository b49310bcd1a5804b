"""What a candidate must beat on each workload: the lever's own champion for (qtype, arch, T
regime) when it has one (a re-study must beat the reigning champion, or it would replace a
faster kernel with a slower one: run 18 promoted a 66.5 TFLOP/s tile over a 68 one that way);
else the champion of the lever's incumbent; before any promotion, what the dispatcher would run
there instead -- the incumbent family's per-T heuristic where it has one (mmq_base's 16-token
tile at T=16, not its 64-token defaults), else that lever's defaults.

A lever whose `incumbent` is None is a baseline: it is measured against its own defaults. Where the incumbent lever
claims no kernel for a workload's type, its own incumbent stands in (direct_q8 at q5_K: `direct` is q4_K only, so
the `wgmma` champion, which is what the dispatcher runs there).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import experiments
from campaign import champions
from campaign.errors import CampaignError
from campaign.workloads import regime_chain
from experiments.base import Lever
from kernels import families
from kernels.family import Variant, Workload


@dataclass(frozen=True)
class IncumbentSpec:
    lever: str
    family: str
    params: dict
    origin: str  # "defending" (the lever's own champion), "champion", "heuristic" or "defaults"
    mlflow_run_id: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def incumbent_lever(lever: Lever, qtype: str) -> Lever:
    """The lever a candidate of `lever` is measured against at `qtype`: its incumbent, or the first lever down the
    incumbent chain that claims the type (a baseline is its own incumbent)."""
    target = experiments.get(lever.incumbent) if lever.incumbent else lever
    seen = {target.name}
    while qtype not in target.types and target.incumbent and target.incumbent not in seen:  # (a lever may be its own)
        target = experiments.get(target.incumbent)
        seen.add(target.name)
    return target


def resolve(lever: Lever, workloads: list[Workload], arch: str, champions_path: Path,
            card: str | None = None) -> dict[str, IncumbentSpec]:
    """Incumbent per workload label, from the champions file as it is now (with `card`, that card's own champions
    first)."""
    specs = {}
    for w in workloads:
        target = incumbent_lever(lever, w.qtype)
        defending = _champion(lever.name, w, arch, champions_path, card)
        record = defending or _champion(target.name, w, arch, champions_path, card)
        if record:
            specs[w.label()] = IncumbentSpec(lever.name if defending else target.name, record["family"],
                                             record["params"], "defending" if defending else "champion",
                                             record.get("mlflow_run_id", ""))
        elif (heuristic := families.heuristic(target.family, w.T, w.qtype)) is not None:
            specs[w.label()] = IncumbentSpec(target.name, target.family, {**target.fixed, **heuristic}, "heuristic")
        else:
            specs[w.label()] = IncumbentSpec(target.name, target.family, {**target.fixed, **target.defaults},
                                             "defaults")
    return specs


def _champion(lever_name: str, w: Workload, arch: str, champions_path: Path, card: str | None = None) -> dict | None:
    """A per-shape lever's champion of this very shape, else the (qtype, arch, regime) one (with `card`, the card's
    own of each first); a regime without any is defended by the champion of the regime it inherits from."""
    for regime_name in regime_chain(w.T):
        for on in champions.cards_first(card):
            shaped, regime_key = (champions.key(w.qtype, arch, regime_name, (w.M, w.K), on),
                                  champions.key(w.qtype, arch, regime_name, card=on))
            record = (champions.current(lever_name, shaped, champions_path)
                      or champions.current(lever_name, regime_key, champions_path))
            if record:
                return record
    return None


def from_json(data: dict) -> dict[str, IncumbentSpec]:
    return {label: IncumbentSpec(**spec) for label, spec in data.items()}


def build(specs: dict[str, IncumbentSpec], workloads: list[Workload], device) -> dict[str, Variant]:
    """Incumbent variants per workload label; one build per distinct (family, params, qtype)."""
    built: dict[str, Variant] = {}
    variants = {}
    for w in workloads:
        spec = specs[w.label()]
        cache_key = json.dumps([spec.family, spec.params, w.qtype], sort_keys=True)
        if cache_key not in built:
            try:
                built[cache_key] = families.get(spec.family).build(spec.params, w.qtype, device)
            except CampaignError:
                raise
            except Exception as exc:
                raise CampaignError(f"incumbent {spec.lever} ({spec.origin}) does not build for {w.qtype}: "
                                    f"{type(exc).__name__}: {exc}") from None
        variants[w.label()] = built[cache_key]
    return variants

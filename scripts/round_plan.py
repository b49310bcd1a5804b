"""An H200 round from scripts/round_plan.json, in the two forms it is needed in:

    python3 scripts/round_plan.py steps [GROUP ...]     device_run.sh arguments, one per line
    python3 scripts/round_plan.py precompile FILE [GROUP ...]
                                                        the studies' candidates as a precompile
                                                        --extra file ({family: [params]})

A study step is `study <lever> --study <lever>-<suite> --suite ... --types ... --trials N --promote`
(and `--per-card` / `--per-shape` where the entry says "per_card" / "per_shape": true) with its N candidates
enqueued (and Optuna's own samples after them when the entry asks for more "trials"); the `bench` group is the full
dense bench. GROUPs (default: all) select studies by their "group" field, plus "bench". The precompile form adds each
lever's fixed parameters and, for what a candidate leaves out, its defaults (as `campaign run --enqueue`
does), so the compiled sources are the ones the trials build.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PLAN = ROOT / "scripts" / "round_plan.json"


def load(groups: list[str]) -> tuple[list[dict], list[str] | None]:
    plan = json.loads(PLAN.read_text())
    known = {s["group"] for s in plan["studies"]} | {"bench"}
    unknown = set(groups) - known
    if unknown:
        raise SystemExit(f"unknown group(s) {', '.join(sorted(unknown))}; the plan has {', '.join(sorted(known))}")
    studies = [s for s in plan["studies"] if not groups or s["group"] in groups]
    bench = plan["bench"] if not groups or "bench" in groups else None
    return studies, bench


def steps(groups: list[str]) -> list[str]:
    studies, bench = load(groups)
    out: list[str] = []
    for s in studies:
        name = s.get("study", f"{s['lever']}-{s['suite']}")  # two studies of one suite need their own names
        out += ["study", s["lever"], "--study", name, "--suite", s["suite"],
                "--types", s["types"], "--trials", str(s.get("trials", len(s["enqueue"]))), "--promote"]
        if s.get("per_card"):  # judged against, and promoted as, the card's own champions (campaign run --per-card)
            out.append("--per-card")
        if s.get("per_shape"):  # promoted as the suite's one shape's champion (campaign run --per-shape)
            out.append("--per-shape")
        for params in s["enqueue"]:
            out += ["--enqueue", json.dumps(params, separators=(",", ":"))]
    if bench:
        out += ["bench", *bench]
    return out


def precompile_extra(groups: list[str]) -> dict[str, list[dict]]:
    import experiments
    from campaign.session import complete_candidate

    studies, _ = load(groups)
    extra: dict[str, list[dict]] = {}
    for s in studies:
        lever = experiments.get(s["lever"])  # compiled as the study will run them: defaults filled in
        extra.setdefault(lever.family, []).extend({**lever.fixed, **complete_candidate(lever, p)} for p in s["enqueue"])
    return extra


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    st = sub.add_parser("steps")
    st.add_argument("groups", nargs="*")
    pc = sub.add_parser("precompile")
    pc.add_argument("file")
    pc.add_argument("groups", nargs="*")
    args = ap.parse_args()
    if args.what == "steps":
        print("\n".join(steps(args.groups)))
    else:
        Path(args.file).write_text(json.dumps(precompile_extra(args.groups), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`campaign` command line: list | run | resume | gate | promote | restore | compare | report | ui | bench |
round-table.

The data path from here: experiments.get (spec) -> session.start/reopen (study + MLflow parent)
-> trial.Objective (build, static, parity, perf, record) -> promotion (gates again, champions.json).
User errors print one line `error: ...` on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from campaign import paths, reference_cmd
from campaign.errors import EXIT_USER_ERROR, CampaignError

EXIT_GATE_FAILED = 1
EXIT_INTERRUPTED = 130


def _types(value: str) -> list[str]:
    return [t.strip() for t in value.split(",") if t.strip()]


def _params_json(value: str) -> dict:
    try:
        params = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise argparse.ArgumentTypeError("expected a JSON object of parameters")
    return params


def _options(args):
    from campaign.session import Options

    return Options(root=paths.root(args.root), storage=getattr(args, "storage", None),
                   tracking_uri=getattr(args, "tracking_uri", None) or os.environ.get("MLFLOW_TRACKING_URI"),
                   experiment=getattr(args, "experiment", None) or "mmq-campaign",
                   reps=getattr(args, "reps", 20), seed=getattr(args, "seed", None),
                   ceilings_file=getattr(args, "ceilings", None), per_card=getattr(args, "per_card", False),
                   per_shape=getattr(args, "per_shape", False))


# ------------------------------------------------------------------ commands

def cmd_list(args) -> int:
    import experiments
    from campaign import champions

    data = champions.load(paths.champions_file(paths.root(args.root)))["levers"]
    for lever in experiments.all_levers():
        print(f"{lever.name}  [{lever.backend}] family={lever.family} suite={lever.suite} "
              f"types={','.join(lever.types)} incumbent={lever.incumbent or '(own defaults)'} "
              f"margin={lever.margin:.0%}")
        if lever.description:
            print(f"    {lever.description}")
        print("    space: " + ("  ".join(f"{k}={v}" for k, v in lever.space.items()) or "(empty)"))
        entries = data.get(lever.name, {})
        if not entries:
            print("    champions: none")
        for key, r in sorted(entries.items()):
            on = f" on {r['gated_on']}" if r.get("gated_on") else ""  # (records before the field: not known)
            print(f"    champion {key}: {r['study']}/{r['trial']} {r['speedup']:.3f}x "
                  f"(promoted {r['promoted_at']}{on}, {len(r.get('history', []))} before) params={r['params']}")
    for module, why in experiments.broken_modules().items():
        print(f"(experiments/{module}.py failed to import: {why})")
    return 0


def _optimize(session, trials: int | None, timeout: float | None) -> int:
    from campaign import study as study_mod

    interrupted = session.repair()
    if interrupted:
        print(f"marked interrupted trial(s) {', '.join(map(str, interrupted))} as failed in Optuna and MLflow")
    if trials is not None:
        session.set_target(trials)
    n = session.remaining() if timeout is None or trials is not None else None
    if n == 0:
        print(f"study {session.name} already has its {session.study.user_attrs.get('trials_target')} trials; "
              f"pass --trials N to run more")
    else:
        try:
            session.optimize(n, timeout)
        except KeyboardInterrupt:
            print(f"interrupted: continue with `campaign resume {session.name}`", file=sys.stderr)
            return EXIT_INTERRUPTED
    counts = study_mod.counts(session.study)
    print(f"study {session.name} [{session.lever.name}]: "
          + ", ".join(f"{state} {n}" for state, n in sorted(counts.items())))
    best = session.best()
    if best is not None:
        print(f"best: trial {best.number}  {best.value:.3f}x  perf {best.user_attrs.get('perf_gate', '?')}"
              f"  params={best.user_attrs.get('params', best.params)}")
        print(f"next: campaign gate {session.name}/{best.number}   campaign promote {session.name}/{best.number}")
    print(f"mlflow: parent run {session.parent_run_id} in {session.tracker.uri}")
    return 0


def cmd_run(args) -> int:
    import experiments
    from campaign import session as session_mod

    for params in args.enqueue or []:  # all checked before the study is opened or anything queued
        session_mod.complete_candidate(experiments.get(args.lever), params)
    if args.per_shape and args.promote:  # refused now, not after the trials: a shape's record needs one shape
        _one_shape(args.suite or experiments.get(args.lever).suite)
    session = session_mod.start(args.lever, _options(args), study_name=args.study, suite=args.suite,
                                types=_types(args.types) if args.types else None)
    for params in args.enqueue or []:
        session.enqueue(params)
    trials = args.trials if args.trials is not None or args.timeout else 20
    status = _optimize(session, trials, args.timeout)
    if status != 0 or not args.promote:
        return status
    best = session.best()
    if best is None:
        print("not promoted: the study has no completed trial", file=sys.stderr)
        return EXIT_GATE_FAILED
    args.ref = f"{session.name}/{best.number}"  # the same gates as `campaign promote`, re-run fresh
    return cmd_promote(args)


def _one_shape(suite_name: str) -> None:
    from campaign import workloads

    shapes = sorted({(c.M, c.K) for c in workloads.get(suite_name).cases})
    if len(shapes) != 1:
        raise CampaignError(f"--per-shape promotes one shape's champion, but suite {suite_name} holds "
                           f"{len(shapes)} shapes ({', '.join(f'{m}x{k}' for m, k in shapes)}): "
                           f"study a suite of one shape (e.g. dense_tiny, the anchor at T=16)")


def cmd_resume(args) -> int:
    from campaign import session as session_mod

    return _optimize(session_mod.reopen(args.study, _options(args)), args.trials, args.timeout)


def _judge_and_print(args):
    from campaign import promotion, refs

    opts = _options(args)
    ref = refs.resolve(args.ref, opts)
    judgement = promotion.judge(ref, opts)
    print(f"{ref.label()} [{ref.lever}] params={ref.params}")
    for line in judgement.lines():
        print(line)
    print(judgement.verdict.line())
    return judgement, opts


def cmd_gate(args) -> int:
    judgement, _ = _judge_and_print(args)
    return 0 if judgement.verdict.passed else EXIT_GATE_FAILED


def cmd_promote(args) -> int:
    from campaign import promotion

    judgement, opts = _judge_and_print(args)
    records = promotion.promote(judgement, opts)
    for key, record in records.items():
        print(f"champion {record['lever']} {key}: {judgement.ref.label()} {record['speedup']:.3f}x")
    print(f"recorded in {paths.champions_file(paths.root(args.root))}")
    return 0


def cmd_restore(args) -> int:
    from campaign import promotion

    restored = promotion.restore(args.lever, args.key, args.reason, paths.root(args.root))
    print(f"champion {args.lever} {args.key}: {restored.get('study')}/{restored.get('trial')} again "
          f"(promoted {restored.get('promoted_at')}; the one it replaces is in its history, with the reason)")
    return 0


def _tracker_cache(opts):
    cache = {}

    def tracker_for(uri: str):
        if uri not in cache:
            cache[uri] = opts.tracker(uri or None)
        return cache[uri]
    return tracker_for


def cmd_compare(args) -> int:
    import experiments
    import pandas as pd
    from campaign import report, results

    opts = _options(args)
    levers = args.lever or [lv.name for lv in experiments.all_levers()]
    for name in levers:
        experiments.get(name)  # unknown lever: clear error
    rows = results.compare_rows(levers, paths.champions_file(opts.root), _tracker_cache(opts))
    if not rows:
        print("nothing to compare yet: no champions and no completed trials for " + ", ".join(levers))
        return 0
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.4g}".format):
        print(report.workload_table(rows).to_string(index=False))
    return 0


def cmd_report(args) -> int:
    from campaign import champions, results

    opts = _options(args)
    tracker = opts.tracker()
    out = Path(args.out) if args.out else paths.mlruns(opts.root) / "reports"  # git-ignored with mlruns/
    champion_runs = {r.get("mlflow_run_id") for entries in champions.load(paths.champions_file(opts.root))["levers"].values()
                     for r in entries.values()}
    parents = results.study_runs(tracker, study=args.study, lever=args.lever)
    if not parents:
        raise CampaignError("no studies recorded in " + tracker.uri
                            + (f" for study {args.study!r}" if args.study else "")
                            + (f" for lever {args.lever!r}" if args.lever else ""))
    written = []
    for parent in parents:
        written += results.write_study_report(tracker, parent, out, args.top, champion_runs)
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("no completed trials to plot yet")
    return 0


def cmd_ui(args) -> int:
    opts = _options(args)
    uri = opts.tracking_uri or paths.default_tracking_uri(opts.root)
    if uri.startswith(("http://", "https://")):
        print(f"MLflow UI: {uri} (already a tracking server)")
        return 0
    url = f"http://{args.host}:{args.port}"
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri,
               "--default-artifact-root", paths.default_artifact_root(opts.root).as_uri(),
               "--host", args.host, "--port", str(args.port), "--workers", "1"]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": os.environ.get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")}
    # the server's own chatter goes to stderr: stdout carries only the URL line below
    server = subprocess.Popen(command, env=env, start_new_session=True, stdout=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopping us stops the server (finally below)
    try:
        if not _wait_healthy(url, server, timeout=120):
            raise CampaignError(f"mlflow server did not come up on {url} (exit code {server.poll()})")
        print(f"MLflow UI: {url}  (store {uri}; Ctrl-C stops it)", flush=True)
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return 0


def _wait_healthy(url: str, process, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False


# ------------------------------------------------------------------- parser

def _add_measuring(p) -> None:
    p.add_argument("--reps", type=int, default=20, help="timed reps per workload and side (>= 20)")
    p.add_argument("--ceilings", type=Path, metavar="JSON",
                   help="measured device ceilings (campaign bench's ceilings.json) for roofline fractions")
    p.add_argument("--per-card", action="store_true",
                   help="measure against, and promote as, this card's own champions (key <qtype>/<arch>:<card>/...: "
                        "one arch is several cards, and the dispatcher prefers its card's records)")
    p.add_argument("--per-shape", action="store_true",
                   help="promote as the champion of the suite's one shape (key <qtype>/<arch>/<regime>/<M>x<K>): a "
                        "variant tuned for one shape; the dispatcher takes it there only, before the regime's record")


def _add_stores(p, experiment: bool = False) -> None:
    p.add_argument("--storage", help="Optuna storage URL (any SQLAlchemy URL; default sqlite:///<root>/mlruns/optuna.db)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///<root>/mlruns/mlflow.db, or http://...)")
    if experiment:
        p.add_argument("--experiment", help="MLflow experiment name (default mmq-campaign)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="campaign", description=__doc__.splitlines()[0])
    parser.add_argument("--root", help=f"state folder (mlruns/, champions.json); default ${paths.ROOT_ENV} or the checkout")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="levers, their search spaces and current champions").set_defaults(func=cmd_list)
    reference_cmd.add_parser(sub)

    p = sub.add_parser("run", help="run an Optuna study of a lever")
    p.add_argument("lever")
    p.add_argument("--trials", type=int, help="trials to run (default 20, or unlimited with --timeout)")
    p.add_argument("--timeout", type=float, help="stop starting trials after this many seconds")
    p.add_argument("--types", help="comma-separated quant types (default: the suite's, else the lever's)")
    p.add_argument("--suite", help="workload suite (default: the lever's)")
    p.add_argument("--promote", action="store_true",
                   help="afterwards, re-run every gate on the best trial and promote it if all are green")
    p.add_argument("--study", help="study name (default: the lever's name)")
    p.add_argument("--seed", type=int, help="seed of the TPE sampler")
    _add_measuring(p)
    p.add_argument("--enqueue", action="append", type=_params_json, metavar="JSON",
                   help='a parameter set to try first, e.g. \'{"rows_per_tile": 512}\' (repeatable; Optuna enqueue_trial)')
    _add_stores(p, experiment=True)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("resume", help="continue a stopped or killed study")
    p.add_argument("study")
    p.add_argument("--trials", type=int, help="more trials (default: what is left of the original request)")
    p.add_argument("--timeout", type=float)
    p.add_argument("--seed", type=int, help="seed of the TPE sampler")
    _add_measuring(p)
    _add_stores(p)
    p.set_defaults(func=cmd_resume)

    for name, func, text in (("gate", cmd_gate, "re-run the static, parity and perf gates on a trial's variant"),
                             ("promote", cmd_promote, "make a trial's variant champion if every gate is green")):
        p = sub.add_parser(name, help=text)
        p.add_argument("ref", help="<study>/<trial number> or an MLflow run id")
        _add_measuring(p)
        _add_stores(p)
        p.set_defaults(func=func)

    p = sub.add_parser("restore", help="make a champion's predecessor champion again (kept in its history), with a "
                                       "reason")
    p.add_argument("lever")
    p.add_argument("key", help="<qtype>/<arch>/<regime>[/<M>x<K>], as `campaign list` shows it")
    p.add_argument("--reason", required=True, help="why (kept with the champion it retires)")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("compare", help="champion vs incumbent vs baselines per shape (from MLflow)")
    p.add_argument("--lever", action="append", help="lever to show (repeatable; default all)")
    p.add_argument("--tracking-uri")
    p.add_argument("--experiment")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="TFLOP/s vs T plots per study, into MLflow and a folder")
    p.add_argument("--study")
    p.add_argument("--lever")
    p.add_argument("--out", help="folder for the PNG/CSV files (default <root>/mlruns/reports)")
    p.add_argument("--top", type=int, default=5, help="best trials per study to plot")
    p.add_argument("--tracking-uri")
    p.add_argument("--experiment")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("bench", help="benchmark sweep on the GPU (campaign/bench.py; `campaign bench -h`)",
                       add_help=False)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("round-table", help="a bench table's `champion` line as one table, and issue 6's bars judged "
                                           "(campaign/round_table.py; `campaign round-table -h`)", add_help=False)
    p.set_defaults(func=cmd_round_table)

    p = sub.add_parser("ui", help="start the MLflow UI on the local tracking store")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--tracking-uri")
    p.set_defaults(func=cmd_ui)
    return parser


def cmd_bench(args) -> int:
    from campaign import bench

    return bench.main(args.own_args)


def cmd_round_table(args) -> int:
    from campaign import round_table

    return round_table.main(args.own_args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command in ("bench", "round-table"):  # these parse their own options
        args.own_args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # our own lines say what happens
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return args.func(args)
    except CampaignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

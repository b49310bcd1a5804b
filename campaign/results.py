"""Read measurements back from MLflow for `campaign compare` and `campaign report`."""
from __future__ import annotations

from pathlib import Path

import experiments
from campaign import champions, report, tracking, workloads
from campaign.workloads import metric_prefix, regime
from kernels.family import Workload

SHAPE_METRICS = ("tflops", "incumbent_tflops", "speedup", "noise_floor", "median_ms", "incumbent_median_ms",
                 "ceiling_frac")


def run_workloads(run) -> list[Workload]:
    params = run.data.params
    return workloads.get(params["suite"]).workloads(params["types"].split(","))


def shape_metrics(run, w: Workload) -> dict:
    prefix = metric_prefix(w.label())
    m = run.data.metrics
    return {name: m[f"{prefix}/{name}"] for name in SHAPE_METRICS if f"{prefix}/{name}" in m}


def _shape_columns(w: Workload) -> dict:
    return {"qtype": w.qtype, "M": w.M, "K": w.K, "T": w.T, "regime": regime(w.T)}


def _variants(lever: str, entries: dict, tracker_for) -> list[tuple[str, str, str, tuple | None]]:
    """(key shown, run id, tracking uri, (qtype, regime) or None) of what to compare for a lever."""
    if entries:
        return [(k, r.get("mlflow_run_id", ""), r.get("tracking_uri", ""), (r["qtype"], r["regime"]))
                for k, r in entries.items()]
    return [(f"best {run.data.tags[tracking.TAG_STUDY]}/{run.data.tags[tracking.TAG_TRIAL]}", run.info.run_id, "", None)
            for run in _best_trials(tracker_for(""), lever)]


def compare_rows(levers: list[str], champions_path: Path, tracker_for) -> list[dict]:
    """Champion vs incumbent (measured in the same interleaved run) vs baseline champions, per shape.

    tracker_for(uri) -> Tracker ('' = the default store). A lever without champions shows
    the best completed trial of each of its studies instead."""
    data = champions.load(champions_path)["levers"]
    baselines = [lv.name for lv in experiments.all_levers() if lv.incumbent is None]
    rows = []
    for lever in levers:
        for key, run_id, uri, group in _variants(lever, data.get(lever, {}), tracker_for):
            if not run_id:
                continue
            run = tracker_for(uri).get_run(run_id)
            for w in run_workloads(run):
                if group and (w.qtype, regime(w.T)) != group:
                    continue
                m = shape_metrics(run, w)
                row = {"lever": lever, "key": key, **_shape_columns(w), "champion_tflops": m.get("tflops"),
                       "incumbent_tflops": m.get("incumbent_tflops"), "speedup": m.get("speedup"),
                       "noise_floor": m.get("noise_floor")}
                for base in baselines:
                    record = data.get(base, {}).get(key) if base != lever else None
                    if record and record.get("mlflow_run_id"):
                        base_run = tracker_for(record.get("tracking_uri", "")).get_run(record["mlflow_run_id"])
                        row[f"{base}_tflops"] = shape_metrics(base_run, w).get("tflops")
                rows.append(row)
    return rows


def _best_trials(tracker: tracking.Tracker, lever: str) -> list:
    """The best completed trial run of each study of the lever."""
    best = []
    for parent in study_runs(tracker, lever=lever):
        children = completed_trials(tracker, parent)
        if children:
            best.append(children[0])
    return best


def study_runs(tracker: tracking.Tracker, study: str | None = None, lever: str | None = None) -> list:
    clauses = [f"tags.`{tracking.TAG_KIND}` = 'study'"]
    if study:
        clauses.append(f"tags.`{tracking.TAG_STUDY}` = '{study}'")
    if lever:
        clauses.append(f"tags.`{tracking.TAG_LEVER}` = '{lever}'")
    return tracker.search(" and ".join(clauses))


def completed_trials(tracker: tracking.Tracker, parent) -> list:
    """Completed trial runs of a study, best objective first."""
    runs = [r for r in tracker.child_runs(parent.info.run_id)
            if r.data.tags.get(tracking.TAG_OUTCOME) == "complete" and "objective.geomean_speedup" in r.data.metrics]
    return sorted(runs, key=lambda r: -r.data.metrics["objective.geomean_speedup"])


def write_study_report(tracker: tracking.Tracker, parent, out_dir: Path, top: int, champion_runs: set[str]) -> list[Path]:
    """TFLOP/s vs T of the study's best trials and their incumbent; PNG + CSV, also logged to MLflow."""
    name = parent.data.tags[tracking.TAG_STUDY]
    trials = completed_trials(tracker, parent)[:top]
    if not trials:
        return []
    ws = run_workloads(parent)
    series, rows = {}, []
    for run in trials:
        number = run.data.tags[tracking.TAG_TRIAL]
        label = f"trial {number}" + (" (champion)" if run.info.run_id in champion_runs else "")
        series[label] = {}
        for w in ws:
            m = shape_metrics(run, w)
            if "tflops" in m:
                series[label][w] = m["tflops"]
                rows.append({"study": name, "trial": int(number), **_shape_columns(w), **m})
    series["incumbent"] = {w: shape_metrics(trials[0], w)["incumbent_tflops"] for w in ws
                           if "incumbent_tflops" in shape_metrics(trials[0], w)}
    params = parent.data.params
    ceilings = {k.removeprefix("ceiling."): float(v) for k, v in params.items()
                if k.startswith("ceiling.") and _is_number(v)}  # *_method entries are prose
    figure = report.tflops_figure(series, ceilings, params.get("parity_mode", "int"),
                                  title=f"{name}: TFLOP/s vs T (top {len(trials)} trials)")
    out_dir.mkdir(parents=True, exist_ok=True)
    png, csv = out_dir / f"{name}_tflops_vs_T.png", out_dir / f"{name}_table.csv"
    report.save_png(figure, png)
    report.close(figure)
    report.workload_table(rows).to_csv(csv, index=False)
    for path in (png, csv):
        tracker.log_file(parent.info.run_id, path, "report")
    return [png, csv]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

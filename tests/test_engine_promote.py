"""`campaign gate | promote | list | compare | report` on studies run here."""
from __future__ import annotations

import json

import optuna
from mlflow import MlflowClient

from campaign import champions
from kernels.device import CpuDevice
from tests.test_engine_study import FAST


def test_promotion_refused_for_a_variant_that_fails_parity(campaign, test_levers):
    code, _, err = campaign.run("test_broken", "--trials", "1", "--types", "q4_K")
    assert code == 0, err
    code, out, err = campaign("gate", "test_broken/0")
    assert code == 1
    assert "parity  FAIL" in out and "tight error" in out and "perf    NOT RUN" in out
    code, out, err = campaign("promote", "test_broken/0")
    assert code == 2
    assert err.strip().startswith("error: not promoted: test_broken/0: parity gate failed: ")
    assert not (campaign.root / "champions.json").exists()


def test_promote_records_champion_then_refuses_to_promote_it_over_itself(root, capsys):
    from tests.conftest import Campaign

    campaign = Campaign(root, None, None, capsys)  # the default stores under --root
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", f"--enqueue={json.dumps(FAST[0])}")
    assert code == 0, err
    assert (root / "mlruns" / "mlflow.db").exists() and (root / "mlruns" / "artifacts").is_dir()

    code, out, err = campaign("compare", "--lever", "cpu_demo")  # no champion yet: the best trial stands in
    assert code == 0, err
    assert [row.split()[1:3] for row in out.splitlines()[1:]] == [["best", "cpu_demo/0"]] * 3

    code, out, err = campaign("promote", "cpu_demo/0")
    assert code == 0, err + out
    lines = out.splitlines()
    assert [line.split()[:2] for line in lines[1:5]] == [["static", "PASS"], ["parity", "PASS"], ["perf", "PASS"],
                                                           ["promote", "PASS"]]
    assert "champion cpu_demo q4_K/cpu/tiny: cpu_demo/0" in out

    record = json.loads((root / "champions.json").read_text())["levers"]["cpu_demo"]["q4_K/cpu/tiny"]
    assert record["params"] == FAST[0] and record["study"] == "cpu_demo" and record["trial"] == 0
    assert record["history"] == [] and record["speedup"] > 1 + record["noise_floor"] + record["margin"]
    assert record["gated_on"] == CpuDevice().info["name"]  # the card (here the CPU) the gates ran on
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, root / "champions.json") == FAST[0]

    run_id = optuna.load_study(study_name="cpu_demo", storage=campaign.storage).trials[0].user_attrs["mlflow_run_id"]
    assert record["mlflow_run_id"] == run_id
    tags = MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}").get_run(run_id).data.tags
    assert tags["champion.q4_K/cpu/tiny"] == "current" and "perf    PASS" in tags["promotion.verdicts"]

    code, out, _ = campaign("list")
    assert "champion q4_K/cpu/tiny: cpu_demo/0" in out and f" on {record['gated_on']}, 0 before)" in out

    # Against itself as the incumbent there is nothing to win: refused, the record untouched.
    code, out, err = campaign("promote", "cpu_demo/0")
    assert code == 2 and "perf gate failed" in err
    assert json.loads((root / "champions.json").read_text())["levers"]["cpu_demo"]["q4_K/cpu/tiny"] == record

    code, out, err = campaign("compare", "--lever", "cpu_demo")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["lever", "key", "qtype"] and "champion_tflops" in header
    assert len(rows) == 3 and all(r.split()[1] == "q4_K/cpu/tiny" for r in rows)  # T = 1, 5, 16

    code, out, err = campaign("report", "--out", str(root / "plots"))
    assert code == 0, err
    png = root / "plots" / "cpu_demo_tflops_vs_T.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and (root / "plots" / "cpu_demo_table.csv").exists()


def test_run_with_promote_runs_the_whole_loop(root, capsys, test_levers):
    """The README's main command shape: study, gates, MLflow and promotion in one call."""
    from tests.conftest import Campaign

    campaign = Campaign(root, None, None, capsys)
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", "--promote",
                                  f"--enqueue={json.dumps(FAST[0])}")
    assert code == 0, err + out
    assert "static  PASS" in out and "parity  PASS" in out and "perf    PASS" in out
    record = champions.lookup("cpu_demo", "q4_K", "cpu", 16, path=root / "champions.json")
    assert record == FAST[0]
    code, _, err = campaign.run("test_broken", "--trials", "1", "--types", "q4_K", "--promote")
    assert code != 0 and "not promoted" in err


def test_promotion_retires_a_champion_whose_run_is_not_in_this_store(root, capsys):
    """champions.json travels with the repo; the MLflow store it points at may be another machine's."""
    from experiments.cpu_demo import LEVER as CPU_DEMO
    from tests.conftest import Campaign

    campaign = Campaign(root, None, None, capsys)
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", "--promote",
                                  f"--enqueue={json.dumps(FAST[0])}")
    assert code == 0, err + out
    path = root / "champions.json"
    data = json.loads(path.read_text())
    old = data["levers"]["cpu_demo"]["q4_K/cpu/tiny"]
    old.update(params=CPU_DEMO.defaults, mlflow_run_id="0" * 32)  # slower, and its run lives elsewhere
    path.write_text(json.dumps(data))

    code, out, err = campaign("promote", "cpu_demo/0")
    assert code == 0, err + out
    record = json.loads(path.read_text())["levers"]["cpu_demo"]["q4_K/cpu/tiny"]
    assert record["params"] == FAST[0] and record["history"][-1]["mlflow_run_id"] == "0" * 32



def _record(study: str, params: dict, run_id: str = "", tracking_uri: str = "") -> dict:
    return {"family": "cpu_demo", "lever": "cpu_demo", "params": params, "study": study, "trial": 0,
            "speedup": 1.2, "noise_floor": 0.01, "margin": 0.02, "promoted_at": "2026-12-06T00:00:00+00:00",
            "mlflow_run_id": run_id, "tracking_uri": tracking_uri}


def test_restore_makes_the_predecessor_champion_again_and_keeps_the_one_it_replaces(root, campaign):
    """`campaign restore`: the newest history record is champion again (the dispatcher's lookup says so), the displaced
    champion sits in its history with the reason and the time, nothing is lost; a second restore brings the displaced
    one back; the MLflow store's champion tags follow. Without a predecessor, or without a reason: a clear error and
    champions.json untouched."""
    from campaign import paths, tracking

    path, key = root / "champions.json", "q4_K/cpu/tiny"
    local = paths.default_tracking_uri(root)
    tracker = tracking.Tracker(local, artifact_root=paths.default_artifact_root(root))
    run_a, run_b = (tracker.start_run(name, {f"champion.{key}": "current"}) for name in ("a", "b"))
    champions.promote("cpu_demo", key, _record("a", {"BM": 32}, run_a, local), path)
    code, out, err = campaign("restore", "cpu_demo", key, "--reason", "x")
    assert code == 2 and "no earlier champion" in err  # A has no predecessor
    champions.promote("cpu_demo", key, _record("b", {"BM": 64}, run_b, local), path)
    before = path.read_text()

    code, out, err = campaign("restore", "cpu_demo", "q4_K/cpu/huge", "--reason", "x")
    assert code == 2 and "no champion at q4_K/cpu/huge" in err and path.read_text() == before
    code, out, err = campaign("restore", "cpu_demo", key, "--reason", " ")
    assert code == 2 and "needs a reason" in err and path.read_text() == before

    code, out, err = campaign("restore", "cpu_demo", key, "--reason", "slower on the H200 (run 122)")
    assert code == 0, err
    assert "a/0 again" in out
    record = champions.current("cpu_demo", key, path)
    assert record["study"] == "a" and record["restored_reason"] == "slower on the H200 (run 122)"
    assert [r["study"] for r in record["history"]] == ["b"]
    retired = record["history"][0]
    assert retired["retired_reason"] == "slower on the H200 (run 122)" and retired["retired_at"]
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, path) == {"BM": 32}
    assert tracker.get_run(run_a).data.tags[f"champion.{key}"] == "current"
    assert tracker.get_run(run_b).data.tags[f"champion.{key}"] == "retired"

    code, out, err = campaign("restore", "cpu_demo", key, "--reason", "back")
    assert code == 0, err
    record = champions.current("cpu_demo", key, path)
    assert record["study"] == "b" and [r["study"] for r in record["history"]] == ["a"]
    assert tracker.get_run(run_b).data.tags[f"champion.{key}"] == "current"


def test_per_card_promotion_keys_the_champion_by_the_card_it_was_gated_on(root, capsys):
    """`campaign promote --per-card`: the record is the card's own (<qtype>/<arch>:<card>/<regime>), the arch's key is
    left alone, and a lookup on that card finds it while one on another card does not."""
    from tests.conftest import Campaign

    campaign = Campaign(root, None, None, capsys)
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", f"--enqueue={json.dumps(FAST[0])}")
    assert code == 0, err
    code, out, err = campaign("promote", "cpu_demo/0", "--per-card")
    assert code == 0, err + out
    card = champions.card_of(CpuDevice().info)
    key = champions.key("q4_K", "cpu", "tiny", card=card)
    assert f"champion cpu_demo {key}: cpu_demo/0" in out
    entries = json.loads((root / "champions.json").read_text())["levers"]["cpu_demo"]
    assert list(entries) == [key] and entries[key]["gated_on"] == CpuDevice().info["name"]
    path = root / "champions.json"
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, path, card=card) == FAST[0]
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, path, card="another-card") is None
    code, out, _ = campaign("list")
    assert f"champion {key}: cpu_demo/0" in out


def test_per_shape_promotion_keys_the_champion_by_the_suites_one_shape(root, capsys):
    """`campaign promote --per-shape` of a lever tuned per regime: the record is the shape's own
    (<qtype>/<arch>/<regime>/<M>x<K>) and the regime's key is left alone; `campaign run --per-shape --promote` on a
    suite of several shapes is refused before any trial, with no study opened."""
    from tests.conftest import Campaign

    campaign = Campaign(root, None, None, capsys)
    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_small", "--trials", "1", "--promote", "--per-shape",
                                  f"--enqueue={json.dumps(FAST[0])}")
    assert code == 2 and "suite cpu_small holds 2 shapes (256x2048, 1024x512)" in err, err
    assert not (root / "mlruns" / "optuna.db").exists() or not optuna.get_all_study_summaries(campaign.storage)

    code, out, err = campaign.run("cpu_demo", "--suite", "cpu_tiny", "--trials", "1", f"--enqueue={json.dumps(FAST[0])}")
    assert code == 0, err
    code, out, err = campaign("promote", "cpu_demo/0", "--per-shape")
    assert code == 0, err + out
    key = champions.key("q4_K", "cpu", "tiny", (128, 512))
    assert f"champion cpu_demo {key}: cpu_demo/0" in out
    entries = json.loads((root / "champions.json").read_text())["levers"]["cpu_demo"]
    assert list(entries) == [key] and entries[key]["shape"] == [128, 512]
    assert champions.lookup("cpu_demo", "q4_K", "cpu", 16, root / "champions.json") is None

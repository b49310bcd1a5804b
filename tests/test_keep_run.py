"""scripts/keep_run.py on a device call's files as the device tool returns them (real gzip tars, a real sqlite store):
the archives kept as xz with the same tar inside, the store as its two databases, the rest copied, nothing overwritten."""
import gzip
import importlib.util
import io
import lzma
import sqlite3
import tarfile
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("keep_run", Path(__file__).resolve().parents[1] / "scripts" / "keep_run.py")
keep_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(keep_run)


def tar_gz(path: Path, files: dict[str, bytes]) -> bytes:
    """Write `files` as a gzip tar at `path`; returns the tar's bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return buffer.getvalue()


def sqlite_bytes(tmp_path: Path, rows: int) -> bytes:
    db = tmp_path / f"db{rows}.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("create table runs (id integer, metric real)")
        con.executemany("insert into runs values (?, ?)", [(i, i / 3) for i in range(rows)])
    return db.read_bytes()


@pytest.fixture
def call_files(tmp_path):
    out = tmp_path / "files_at"
    (out / "t16").mkdir(parents=True)
    (out / "nvidia-smi.txt").write_text("NVIDIA H200\n")
    (out / "t16" / "bench.csv").write_text("type,M,K,T,line,median_us\nq4_K,4096,14336,16,champion,14.06\n")
    logs = tar_gz(out / "logs.tar.gz", {"pytest-gpu.log": b"5 passed\n", "study.log": b"trial 0: 1.02x\n"})
    mlflow, optuna = sqlite_bytes(tmp_path, 50), sqlite_bytes(tmp_path, 7)
    tar_gz(out / "stores.tar.gz", {"mlruns/mlflow.db": mlflow, "mlruns/optuna.db": optuna,
                                   "mlruns/artifacts/0/plot.png": b"\x89PNG" + bytes(5000),
                                   "mlruns/artifacts/0/kernel.cu": b"// source\n" * 100, "champions.json": b"{}"})
    return out, logs, mlflow, optuna


def test_a_call_is_kept_small_and_whole(tmp_path, call_files):
    out, logs, mlflow, optuna = call_files
    kept = dict(keep_run.keep(out, tmp_path / "sweeps" / "run117"))
    assert set(kept) == {"nvidia-smi.txt", "t16/bench.csv", "logs.tar.xz", "studies.tar.xz"}
    run = tmp_path / "sweeps" / "run117"
    assert lzma.decompress((run / "logs.tar.xz").read_bytes()) == logs  # the same tar, byte for byte
    with tarfile.open(run / "studies.tar.xz", "r:xz") as studies:
        assert sorted(studies.getnames()) == ["mlruns/mlflow.db", "mlruns/optuna.db"]
        assert studies.extractfile("mlruns/mlflow.db").read() == mlflow
        assert studies.extractfile("mlruns/optuna.db").read() == optuna
    db = tmp_path / "back.db"
    with tarfile.open(run / "studies.tar.xz", "r:xz") as studies:
        db.write_bytes(studies.extractfile("mlruns/mlflow.db").read())
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from runs").fetchone()[0] == 50
    assert (run / "t16" / "bench.csv").read_text() == (out / "t16" / "bench.csv").read_text()


def test_an_existing_run_is_not_overwritten_and_a_store_without_databases_is_refused(tmp_path, call_files):
    out, *_ = call_files
    dest = tmp_path / "run117"
    keep_run.keep(out, dest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    with pytest.raises(SystemExit, match="exists"):
        keep_run.keep(out, dest)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
    tar_gz(out / "stores.tar.gz", {"mlruns/artifacts/0/plot.png": b"png"})
    with pytest.raises(SystemExit, match="no mlruns/mlflow.db"):
        keep_run.keep(out, tmp_path / "run118")
    assert not (tmp_path / "run118").exists()  # refused before anything was written
    with pytest.raises(SystemExit, match="not a folder"):
        keep_run.keep(tmp_path / "missing", tmp_path / "run119")


def test_a_call_that_ran_no_study_is_kept_without_a_store(tmp_path, call_files):
    """GPU tests or a bench alone: the store the device brings back holds mlruns/.gitkeep and champions.json only, so
    the logs and the rest are kept and no studies.tar.xz is made."""
    out, logs, *_ = call_files
    tar_gz(out / "stores.tar.gz", {"mlruns/.gitkeep": b"", "champions.json": b"{}"})
    dest = tmp_path / "run122"
    kept = dict(keep_run.keep(out, dest))
    assert "studies.tar.xz" not in kept and "stores.tar.gz" not in kept
    assert lzma.decompress((dest / "logs.tar.xz").read_bytes()) == logs
    assert (dest / "nvidia-smi.txt").read_text() == "NVIDIA H200\n"

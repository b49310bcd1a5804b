"""Shared fixtures of the engine tests: real stores (sqlite, an `mlflow server`, a PostgreSQL
cluster started here), the CLI called in-process, and test-only levers/families."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import experiments
from campaign import cli
from experiments.base import Lever
from experiments.cpu_demo import LEVER as CPU_DEMO
from kernels import families
from kernels.cpu_blocked import CpuBlockedFamily

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[:3]} exited with {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def stop_group(process: subprocess.Popen) -> None:
    """Stop a server we started in its own session, children (uvicorn workers) included."""
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def trial_runs(client, study) -> dict[int, list]:
    """The study's nested MLflow runs, grouped by the Optuna trial number they are tagged with."""
    from campaign import tracking

    parent = study.user_attrs["mlflow_parent_run_id"]
    runs = client.search_runs([client.get_run(parent).info.experiment_id],
                              filter_string=f"tags.`{tracking.TAG_PARENT}` = '{parent}'")
    by_number: dict[int, list] = {}
    for run in runs:
        by_number.setdefault(int(run.data.tags[tracking.TAG_TRIAL]), []).append(run)
    return by_number


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    # Nothing a test does may land in the checkout's mlruns/ or champions.json.
    monkeypatch.setenv("CAMPAIGN_ROOT", str(tmp_path / "default-root"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def root(tmp_path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def shared_tracking(tmp_path_factory) -> str:
    """One sqlite MLflow store for the in-process tests (creating one costs seconds); each test
    keeps to its own experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def experiment(request) -> str:
    return f"test-{request.node.name}-{uuid.uuid4().hex[:6]}"


class Campaign:
    """The CLI in-process, with this test's root and stores."""

    def __init__(self, root: Path, tracking: str | None, experiment: str | None, capsys):
        self.root, self.tracking, self.experiment, self.capsys = root, tracking, experiment, capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main(["--root", str(self.root), *argv])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def run(self, lever: str, *extra: str) -> tuple[int, str, str]:
        stores = []
        if self.tracking:
            stores += ["--tracking-uri", self.tracking]
        if self.experiment:
            stores += ["--experiment", self.experiment]
        return self("run", lever, *stores, *extra)

    @property
    def storage(self) -> str:
        return f"sqlite:///{self.root / 'mlruns' / 'optuna.db'}"


@pytest.fixture
def campaign(root, shared_tracking, experiment, capsys) -> Campaign:
    return Campaign(root, shared_tracking, experiment, capsys)


# ---------------------------------------------------------------- servers

@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real `mlflow server` on 127.0.0.1 (free port), sqlite backend, proxied artifacts."""
    base = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    log = open(base / "server.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{base / 'mlflow.db'}",
         "--artifacts-destination", str(base / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health", process, timeout=180)
        yield url
    finally:
        stop_group(process)
        log.close()


def _pg_binary(name: str) -> str | None:
    """On PATH, else the newest Debian-style /usr/lib/postgresql/<version>/bin."""
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)
    return shutil.which(name) or (str(versions[0]) if versions else None)


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A throw-away PostgreSQL cluster (initdb + postgres on a free 127.0.0.1 port)."""
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    pytest.importorskip("psycopg2", reason="psycopg2 is needed to talk to PostgreSQL")
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        import pwd
        try:
            pg_user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        if shutil.which("runuser") is None:
            pytest.skip("running as root and no runuser to start postgres as another user")
        as_user = ["runuser", "-u", "postgres", "--"]
        # pytest's tmp folders are root-only (0700): the cluster needs one its user can enter
        base = Path(tempfile.mkdtemp(prefix="campaign-pg-"))
    else:
        base = tmp_path_factory.mktemp("postgres")
    data, sockets = base / "data", base / "sock"
    sockets.mkdir()
    if as_user:
        for path in (base, sockets):
            os.chown(path, pg_user.pw_uid, pg_user.pw_gid)
    port = free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "campaign", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True)
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
                    "-o", f"-p {port} -h 127.0.0.1 -k {sockets}", "start"], check=True, capture_output=True)
    try:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="campaign", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE optuna")
        conn.close()
        yield f"postgresql://campaign@127.0.0.1:{port}/optuna"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------- test-only levers

class BrokenMinFamily(CpuBlockedFamily):
    """cpu_demo with the weight-min (rank-1) term left out: a real kernel, wrong for q4_K/q5_K."""

    name = "test_broken_min"

    def prepare(self, variant, problem):
        bound = super().prepare(variant, problem)
        bound.layout["minv"] = None
        return bound


class SlowFamily(CpuBlockedFamily):
    """cpu_demo plus 20 ms of sleep per call: hopelessly slower than any incumbent."""

    name = "test_slow"

    def prepare(self, variant, problem):
        bound = super().prepare(variant, problem)
        run = bound.run

        def slow_run():
            time.sleep(0.02)
            run()
        bound.run = slow_run
        return bound


def _cpu_variant_of(name: str, family: str, **changes) -> Lever:
    fixed = {k: v for k, v in CPU_DEMO.defaults.items() if k != "rows_per_tile"}
    return Lever(name=name, family=family, backend="cpu", space={"rows_per_tile": [64, 128]}, fixed=fixed,
                 defaults=CPU_DEMO.defaults, suite="cpu_tiny", types=("q4_K", "q8_0"), incumbent="cpu_demo",
                 margin=0.05, **changes)


@pytest.fixture
def test_levers():
    """Levers registered for one test only: broken math, hopelessly slow, empty space, a GPU one."""
    fams = [families.register(BrokenMinFamily()), families.register(SlowFamily())]
    levers = [experiments.register(lv) for lv in (
        _cpu_variant_of("test_broken", "test_broken_min"),
        _cpu_variant_of("test_slow", "test_slow"),
        Lever(name="test_empty", family="cpu_demo", backend="cpu", space={}, suite="cpu_tiny",
              types=("q4_K",), incumbent=None),
        Lever(name="test_gpu", family="test_gpu_family", backend="cuda", space={"BM": [64, 128]},
              suite="cpu_tiny", types=("q4_K",), incumbent=None),
    )]
    yield {lv.name: lv for lv in levers}
    for lv in levers:
        experiments.unregister(lv.name)
    for fam in fams:
        families.unregister(fam.name)

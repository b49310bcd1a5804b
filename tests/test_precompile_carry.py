"""scripts/precompile.py's carry count: what a device call takes against its 64 MiB limit (git's tracked files and the
carried paths), so an export says before the call whether the call would be refused."""
import importlib.util
import subprocess
from pathlib import Path

spec = importlib.util.spec_from_file_location("precompile", Path(__file__).resolve().parents[1] / "scripts" / "precompile.py")
precompile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(precompile)


def test_carry_counts_tracked_files_and_carried_paths_not_untracked_ones(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tracked.bin").write_bytes(b"x" * 1000)
    (repo / "sub").mkdir()
    (repo / "sub" / "also.txt").write_bytes(b"y" * 200)
    (repo / "untracked.bin").write_bytes(b"z" * 5000)
    subprocess.run(["git", "-C", str(repo), "add", "tracked.bin", "sub/also.txt"], check=True)
    cache = repo / ".cache" / "run"
    cache.mkdir(parents=True)
    (cache / "a.cubin.gz").write_bytes(b"c" * 300)
    (cache / "a.json").write_bytes(b"j" * 40)
    wheel = repo / "w.whl"
    wheel.write_bytes(b"w" * 7)
    assert precompile.carry_bytes(repo, []) == 1200
    assert precompile.carry_bytes(repo, [cache, wheel, repo / "missing"]) == 1200 + 340 + 7

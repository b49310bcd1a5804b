"""scripts/precompile.py's carry count: what a device call takes against its 64 MiB limit (git's tracked files and the
carried paths, counted as a tar of them), so an export says before the call whether the call would be refused."""
import importlib.util
import subprocess
from pathlib import Path

spec = importlib.util.spec_from_file_location("precompile", Path(__file__).resolve().parents[1] / "scripts" / "precompile.py")
precompile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(precompile)


def test_carry_counts_what_travels_tracked_unignored_and_carried_files_not_ignored_ones(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tracked.bin").write_bytes(b"x" * 1000)
    (repo / "sub").mkdir()
    (repo / "sub" / "also.txt").write_bytes(b"y" * 200)
    (repo / ".gitignore").write_text("/ignored.bin\n/.cache/\n/.whl/\n")
    (repo / "ignored.bin").write_bytes(b"z" * 5000)
    subprocess.run(["git", "-C", str(repo), "add", "tracked.bin", "sub/also.txt", ".gitignore"], check=True)
    (repo / "untracked.txt").write_bytes(b"u" * 600)  # not ignored: it travels
    cache = repo / ".cache" / "run"
    cache.mkdir(parents=True)
    (cache / "a.cubin.gz").write_bytes(b"c" * 300)
    (cache / "a.json").write_bytes(b"j" * 40)
    wheels = repo / ".whl"
    wheels.mkdir()
    (wheels / "w.whl").write_bytes(b"w" * 7)
    # a tar's 512-byte header and 512-byte blocks per file: 1000, 200, .gitignore's 30 and the untracked 600 bytes
    travels = (512 + 1024) + (512 + 512) + (512 + 512) + (512 + 1024)
    assert precompile.carry_bytes(repo, []) == travels
    assert precompile.carry_bytes(repo, [cache, wheels, repo / "missing"]) == travels + 3 * (512 + 512)
    assert precompile.carry_bytes(repo, [repo / "untracked.txt"]) == travels  # carried and not ignored: once


def test_an_exported_cache_carries_no_sass_and_a_load_disassembles_the_cubin(tmp_path, monkeypatch):
    """export() copies the gzipped cubin and the json, not the SASS text (60 % of an entry); loading from the export
    (what the GPU machine does) runs no nvcc, gets the same SASS from cuobjdump, and keeps it for the next load."""
    from kernels import nvcc

    source = "extern \"C\" __global__ void k(float* y, const float* x) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }\n"
    monkeypatch.setenv("MMQ_CACHE_DIR", str(tmp_path / "full"))
    nvcc.clear_memory_cache()
    compiled = nvcc.compile_cubin(source, arch="sm_90")
    precompile.export([compiled], tmp_path / "carried")
    carried = sorted(p.name for p in (tmp_path / "carried").iterdir())
    assert carried == [f"{compiled.key}.cubin.gz", f"{compiled.key}.json"]

    monkeypatch.setenv("MMQ_CACHE_DIR", str(tmp_path / "carried"))
    nvcc.clear_memory_cache()
    runs = nvcc.nvcc_run_count()
    loaded = nvcc.compile_cubin(source, arch="sm_90")
    assert loaded.from_cache and nvcc.nvcc_run_count() == runs
    assert loaded.sass == compiled.sass and "Function : k" in loaded.sass
    assert (tmp_path / "carried" / f"{compiled.key}.sass.gz").exists()
    nvcc.clear_memory_cache()

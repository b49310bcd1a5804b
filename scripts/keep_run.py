"""Keep what a device call brought back in docs/sweeps/runNN, small: every device call carries the tracked tree under a
64 MiB limit (docs/sweeps/README.md), so the archives go in as xz.

    python3 scripts/keep_run.py FILES_AT runNN [--root docs/sweeps]

FILES_AT is the folder the device tool copied the call's $OUT to. Each `*.tar.gz` becomes `*.tar.xz` holding the same
tar, byte for byte, except the MLflow + Optuna store (`stores.tar.gz`), which becomes `studies.tar.xz` with its two
databases only (every trial, parameter, metric and verdict; the artifacts are kernel sources, which git has at the run's
commit, and plots drawn from the data); a call that ran no study brings back a store with no database, and it is
left out. Everything else (nvidia-smi.txt, a bench folder's csv and plot, ...) is copied as it is. An existing runNN is not touched.
"""
from __future__ import annotations

import argparse
import gzip
import io
import lzma
import shutil
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE_DATABASES = ("mlruns/mlflow.db", "mlruns/optuna.db")


def recompress(src: Path, dest: Path) -> None:
    """The tar inside `src` (gzip) as `dest` (xz), byte-identical."""
    dest.write_bytes(lzma.compress(gzip.decompress(src.read_bytes()), preset=9))


def store_databases(src: Path) -> list[str]:
    """The store databases in `src`. None at all is a call that ran no study (GPU tests, a bench: its store holds
    only mlruns/.gitkeep and champions.json), and there is nothing to keep; none beside other run data is an error."""
    with tarfile.open(src, "r:gz") as store:
        names = [m.name.lstrip("./") for m in store.getmembers() if m.isfile()]
    found = [n for n in names if n in STORE_DATABASES]
    if not found and any(n.startswith("mlruns/") and n != "mlruns/.gitkeep" for n in names):
        raise SystemExit(f"{src}: no {' or '.join(STORE_DATABASES)} in it: not a device call's store")
    return found


def slim_store(src: Path, dest: Path) -> list[str]:
    """`src`'s store databases alone, as an xz tar at `dest`; returns their names."""
    with tarfile.open(src, "r:gz") as store:
        members = [m for m in store.getmembers() if m.isfile() and m.name.lstrip("./") in STORE_DATABASES]
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as out:
            for m in members:
                out.addfile(m, store.extractfile(m))
    dest.write_bytes(lzma.compress(buffer.getvalue(), preset=9))
    return [m.name for m in members]


def keep(files_at: Path, dest: Path) -> list[tuple[str, int]]:
    """Copy `files_at` into `dest` (which must not exist) as the module says; returns (name, bytes) kept."""
    if not files_at.is_dir():
        raise SystemExit(f"{files_at}: not a folder (the device tool's files_at)")
    if dest.exists():
        raise SystemExit(f"{dest} exists: a kept run is not overwritten")
    store = files_at / "stores.tar.gz"
    has_studies = store.exists() and bool(store_databases(store))  # (refused before anything is written)
    dest.mkdir(parents=True)
    for src in sorted(files_at.iterdir()):
        if src.name == "stores.tar.gz":
            if has_studies:
                slim_store(src, dest / "studies.tar.xz")
        elif src.name.endswith(".tar.gz"):
            recompress(src, dest / (src.name[: -len(".gz")] + ".xz"))
        elif src.is_dir():
            shutil.copytree(src, dest / src.name)
        else:
            shutil.copy2(src, dest / src.name)
    return [(str(p.relative_to(dest)), p.stat().st_size) for p in sorted(dest.rglob("*")) if p.is_file()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files_at", type=Path)
    ap.add_argument("run", help="the folder's name under --root, e.g. run117")
    ap.add_argument("--root", type=Path, default=ROOT / "docs" / "sweeps")
    args = ap.parse_args()
    kept = keep(args.files_at, args.root / args.run)
    for name, size in kept:
        print(f"{size:>10}  {name}")
    print(f"{sum(size for _, size in kept) / 2**20:.2f} MiB in {args.root / args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

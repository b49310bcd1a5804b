#!/usr/bin/env bash
# Re-create .whl/ (the wheels carried to the GPU machine) from scripts/gpu_wheels.txt.
# A pure-Python wheel is preferred (smaller: SQLAlchemy's is 2 MB, its compiled one 4.7 MB);
# otherwise the cp312 manylinux x86_64 one. `shared` lines are copied from SHARED_WHEELS
# (default ../shared/wheels: PyCUDA built on the GPU machine, which pip cannot fetch).
#   scripts/fetch_gpu_wheels.sh            # then: du -sh .whl (keep it well under 64 MiB)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED_WHEELS=${SHARED_WHEELS:-../shared/wheels}
DEST=.whl
rm -rf "$DEST"
mkdir -p "$DEST"
pure=(--no-deps --only-binary=:all: --python-version 3.12 --implementation py --abi none --platform any)
binary=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
while read -r first second; do
    case $first in
        ''|'#'*) continue ;;
        shared) cp "$SHARED_WHEELS/$second" "$DEST/" ;;
        *) python3 -m pip download -q "${pure[@]}" -d "$DEST" "$first" 2>/dev/null ||
               python3 -m pip download -q "${binary[@]}" -d "$DEST" "$first" ;;
    esac
done < scripts/gpu_wheels.txt
ls "$DEST"
du -sh "$DEST"

"""Compile, off the GPU, every CUDA configuration a device call will need (each CUDA family's
defaults and heuristics for every type, the GPU tests' configurations, and optional extra
lists), into MMQ_CACHE_DIR, which the device call carries: the GPU's minutes go to running.

    MMQ_CACHE_DIR=.cache/cubin python3 scripts/precompile.py [--arch sm_90] [--types q4_K,...]
        [--extra mmq_base=params.json] [--extra mmq_f16=params.json]
"""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import mmq_base, mmq_f16  # noqa: E402

TYPES = list(mmq_base.QTYPE_ID)
TILE_FAMILIES = {"mmq_base": mmq_base, "mmq_f16": mmq_f16}
HEURISTIC_TS = (16, 32, 64, 128, 4096)


def tile_configs(name: str, extra: list[dict]) -> list[dict]:
    """Distinct compile-time configurations of one tile family."""
    from tests import test_gpu_mmq, test_gpu_mmq_f16

    tests = {"mmq_base": test_gpu_mmq.CONFIGS, "mmq_f16": test_gpu_mmq_f16.CONFIGS}[name]
    module = TILE_FAMILIES[name]
    found = [mmq_base.DEFAULTS, *tests, *(module.heuristic_params(t) for t in HEURISTIC_TS), *extra]
    unique = {json.dumps(mmq_base.family_compile_params(c), sort_keys=True): c for c in found}
    return list(unique.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--extra", action="append", default=[], help="FAMILY=file.json (a list of parameter dicts)")
    args = ap.parse_args()
    types = args.types.split(",")
    extra = {name: [] for name in TILE_FAMILIES}
    for item in args.extra:
        name, path = item.split("=", 1)
        extra[name] += json.loads(Path(path).read_text())

    from kernels import cuda_runtime, dequant_cublas, q8_1_gpu

    for qtype in types:  # the other CUDA pieces a device call loads
        dequant_cublas.FAMILY.compile_only({}, qtype, args.arch)
    q8_1_gpu.compile_for(args.arch)
    cuda_runtime.compile_spin(args.arch)
    jobs = [(name, c, q) for name in TILE_FAMILIES for c in tile_configs(name, extra[name]) for q in types]

    def compile_job(job):
        name, params, qtype = job
        if TILE_FAMILIES[name].invalid_reason(params, qtype, {}) is not None:
            return None
        return TILE_FAMILIES[name].FAMILY.compile_only(params, qtype, args.arch)

    with ThreadPoolExecutor(2) as pool:
        for (name, c, q), res in zip(jobs, pool.map(compile_job, jobs)):
            if res is None:
                continue
            kernel = TILE_FAMILIES[name].FAMILY.kernel_name
            r = res.resources[kernel]
            print(f"{name:8s} {q:5s} {json.dumps(mmq_base.family_compile_params(c))}: {r['registers']} regs, "
                  f"spills {r['spill_store_bytes']}, cached={res.from_cache}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

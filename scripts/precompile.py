"""Compile, off the GPU, every CUDA configuration a device call will need, into MMQ_CACHE_DIR,
which the device call carries: the GPU's minutes go to running, not nvcc.

For every type, each CUDA family gets compiled at:
  - the defaults of every CUDA lever that names it (the incumbents are levers too),
  - its own `precompile_configs()` when it has one (mmq_base: the per-T heuristics),
  - every champion in champions.json, also with the extra parameters of its lever's bench lines,
  - the configurations the GPU tests build: a tests/test_gpu_*.py module lists them as
    PRECOMPILE = {family name: [params, ...]},
  - --extra: a JSON file with a list of mmq_base params, or {family name: [params, ...]},
  - --tests MODULES: only what these GPU test modules build (their PRECOMPILE) and --extra, not the sets above,
  - --bench-lines: what `campaign bench --lines ...` runs over the dense shapes and T of these types (its champion
    line: the dispatcher's choice per workload, from the champions.json in the tree); --variant NAME=LINE:JSON: what
    the bench's `--variant` of the same text runs,
  - --trace JSON: what `scripts/call_trace.py --variant NAME=JSON --T 16` builds for each type (the direct_q8
    champion of the T regime, the JSON on top, TRACE 1).
A composite family (mmq_adaptive) is compiled as its parts (mmq_f16 and mmq_base configurations).
Configurations a family calls invalid for a type are skipped (and said so). Then the runtime
pieces every call loads: the Q8_1 quantizer, the MoE router, the timer's spin kernel.

    MMQ_CACHE_DIR=.cache/cubin python3 scripts/precompile.py [--arch sm_90] [--extra params.json] [--types ...]
        [--families mmq_wgmma,...] [--export .cache/run [--append]]
--export copies just the entries this call needed into a fresh directory (--append: into the one
there), cubins gzipped and no SASS text: a cache small enough to carry (the device call's working tree is capped at
64 MiB; kernels.nvcc reads .cubin.gz as it reads .cubin, and disassembles a cubin whose SASS is not there) while
MMQ_CACHE_DIR keeps everything.
"""
import argparse
import gzip
import importlib
import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import experiments  # noqa: E402
from gates.static import DEFAULT_SMEM_OPTIN, SMEM_OPTIN_BY_ARCH  # noqa: E402
from kernels import families, nvcc  # noqa: E402
from kernels.mmq_base import QTYPE_ID  # noqa: E402

TYPES = list(QTYPE_ID)


def merge(into: dict[str, list[dict]], more: dict[str, list[dict]]) -> None:
    for name, configs in more.items():
        into.setdefault(name, []).extend(configs)


def test_configs(modules: list[str] | None = None) -> dict[str, list[dict]]:
    """PRECOMPILE of every GPU test module, or of the named ones (file stems, e.g. test_gpu_mmq)."""
    paths = sorted((ROOT / "tests").glob("test_gpu_*.py"))
    unknown = set(modules or []) - {path.stem for path in paths}
    if unknown:
        raise SystemExit(f"no GPU test module {', '.join(sorted(unknown))} in tests/ "
                         f"(have {', '.join(path.stem for path in paths)})")
    found: dict[str, list[dict]] = {}
    for path in paths:
        if modules is None or path.stem in modules:
            merge(found, getattr(importlib.import_module(f"tests.{path.stem}"), "PRECOMPILE", {}))
    return found


def champion_configs(path=None) -> dict[str, list[dict]]:
    """Every promoted champion's configuration (what the dispatcher and the bench run), also as
    each bench line of its lever runs it (a line's extra parameters; an f16-input line's XLOAD=2)."""
    from campaign import champions
    from campaign.bench import LINES, line_config

    found: dict[str, list[dict]] = {}
    for lever, entries in champions.load(path)["levers"].items():
        lines = [line for line in LINES.values() if line.lever == lever and (line.extra or line.f16_input)]
        for record in entries.values():
            merge(found, {record["family"]: [record["params"], *(line_config(line, record["params"]) for line in lines)]})
    return found


def bench_jobs(lines: list[str], types: list[str], arch: str, card: str | None = None,
               variants: list[str] = ()) -> list[tuple[str, dict, str]]:
    """(family, params, qtype) that the bench's `lines` and `variants` (its --variant NAME=LINE:JSON) run at every dense
    shape and T of `types` (campaign.bench.line_choice: the champion line's choice depends on the type, so not every
    type's configurations are compiled for every other type)."""
    from campaign import bench

    for name in lines:
        if name not in bench.LINES:
            raise SystemExit(f"--bench-lines: unknown line {name!r} (have {', '.join(bench.LINES)})")
    found: dict[str, tuple[str, dict, str]] = {}
    for line in [bench.LINES[name] for name in lines] + [bench.derived_line(spec) for spec in variants]:
        for qtype in types:
            if line.types and qtype not in line.types:
                continue
            for M, K in bench.DENSE_SHAPES:
                for T in bench.DENSE_TS:
                    try:
                        family, params, _origin = bench.line_choice(line, qtype, M, K, T, arch, card=card)
                    except ValueError:  # a workload the line does not run (a q8-input line where no kernel has the form)
                        continue
                    found[json.dumps([family, params, qtype], sort_keys=True)] = (family, params, qtype)
    return list(found.values())


def trace_jobs(overlays: list[dict], types: list[str], arch: str, T: int,
               card: str | None = None) -> list[tuple[str, dict, str]]:
    """(family, params, qtype) that scripts/call_trace.py builds for each overlay (its variant_params, TRACE 1)."""
    from call_trace import variant_params  # (scripts/, beside this file)

    return [("mmq_direct_q8", {**variant_params(qtype, arch, T, overlay, card), "TRACE": 1}, qtype)
            for overlay in overlays for qtype in types]


def family_configs(extra: dict[str, list[dict]]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    merge(found, {lv.family: [{**lv.fixed, **lv.defaults}] for lv in experiments.all_levers() if lv.backend == "cuda"})
    merge(found, test_configs())
    merge(found, champion_configs())
    merge(found, extra)
    for name in list(found):
        own = getattr(families.get(name), "precompile_configs", None)
        merge(found, {name: own() if own else []})
    return found


def expand_composites(configs: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """A composite family (one with `parts`, e.g. mmq_adaptive) is compiled as its parts: each
    part's configuration under the part's family, which is what the composite's build loads."""
    out: dict[str, list[dict]] = {}
    for name, params_list in configs.items():
        parts = getattr(families.get(name), "parts", None)
        if parts is None:
            merge(out, {name: params_list})
            continue
        for params in params_list:
            for _part, family, part_params in parts(params):
                merge(out, {family: [part_params]})
    return out


def jobs(configs: dict[str, list[dict]], types: list[str], arch: str) -> list[tuple[str, dict, str]]:
    """(family name, params, qtype) for each distinct source text; invalid ones reported and skipped."""
    info = {"arch": arch, "smem_per_block_optin": SMEM_OPTIN_BY_ARCH.get(nvcc.arch_base(arch), DEFAULT_SMEM_OPTIN)}
    seen, out = set(), []
    for name, params_list in configs.items():
        family = families.get(name)
        unique = {json.dumps(params, sort_keys=True): params for params in params_list}
        for params in unique.values():
            for qtype in types:
                invalid = getattr(family, "invalid", None)
                try:
                    reason = invalid(params, qtype, info) if invalid else None
                    source = None if reason else family.source(params, qtype)
                except ValueError as exc:
                    reason = str(exc)
                if reason:
                    print(f"skip {name} {qtype} {json.dumps(params, sort_keys=True)}: {reason}")
                elif source not in seen:
                    seen.add(source)
                    out.append((name, params, qtype))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--extra", help="JSON file: a list of mmq_base parameter dicts, or {family: [dicts]}")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--bench-lines", help="comma-separated bench line names to compile as campaign bench runs them "
                                          "over the dense shapes and T")
    ap.add_argument("--families", help="only these families (comma-separated)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=LINE:JSON",
                    help="a bench --variant to compile as the bench runs it (repeatable)")
    ap.add_argument("--trace", action="append", default=[], metavar="JSON",
                    help="a scripts/call_trace.py --variant's JSON, compiled as it builds it at --trace-T (repeatable)")
    ap.add_argument("--trace-T", type=int, default=16)
    ap.add_argument("--card", help="with --bench-lines: the card the call will run on (e.g. h200), whose own champions "
                                   "(campaign promote --per-card) the champion line takes first")
    ap.add_argument("--export", help="copy the cache entries this call needed into this directory")
    ap.add_argument("--append", action="store_true", help="add to the --export directory instead of replacing it")
    ap.add_argument("--only-extra", action="store_true",
                    help="just the --extra configurations (e.g. a few of a family's, next to another's full set)")
    ap.add_argument("--tests", metavar="MODULES",
                    help="just what these GPU test modules build (comma-separated file stems, e.g. "
                         "test_gpu_mmq,test_gpu_moe: their PRECOMPILE), with --extra on top")
    args = ap.parse_args()
    extra = json.loads(Path(args.extra).read_text()) if args.extra else {}
    extra = {"mmq_base": extra} if isinstance(extra, list) else extra
    if args.tests:  # a device call that runs only these GPU test modules needs only what they build
        merge(extra, test_configs(args.tests.split(",")))
    configs = extra if args.only_extra or args.tests else family_configs(extra)
    if args.families:
        configs = {name: c for name, c in configs.items() if name in args.families.split(",")}
    configs = expand_composites(configs)
    todo = jobs(configs, args.types.split(","), args.arch)
    types = args.types.split(",")
    more = bench_jobs(args.bench_lines.split(",") if args.bench_lines else [], types, args.arch, args.card, args.variant)
    more += trace_jobs([json.loads(overlay) for overlay in args.trace], types, args.arch, args.trace_T, args.card)
    for name, params, qtype in more:
        todo += [job for job in jobs({name: [params]}, [qtype], args.arch) if job not in todo]
    from kernels import cuda_runtime, moe_route_gpu, q8_1_gpu

    needed = [q8_1_gpu.compile_for(args.arch), moe_route_gpu.compile_for(args.arch), cuda_runtime.compile_spin(args.arch)]

    def compile_one(job):
        name, params, qtype = job
        return families.get(name).compile_only(params, qtype, args.arch)

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for (name, params, qtype), compiled in zip(todo, pool.map(compile_one, todo)):
            s = compiled.summary()
            print(f"{name:16s} {qtype:5s} {json.dumps(params, sort_keys=True)}: {s['registers']} regs, "
                  f"spills {s['spill_store_bytes']}, cached={compiled.from_cache}")
            needed.append(compiled)
    if args.export:
        export(needed, Path(args.export), fresh=not args.append)
    return 0


def export(compiled: list, dest: Path, fresh: bool = True) -> None:
    """Copy the cache entries of `compiled` (key.cubin as key.cubin.gz, and key.json) into `dest`, emptied first unless
    `fresh` is False (several calls, e.g. per-type sweep lists, filling one carried cache). Not key.sass.gz, 60 % of an
    entry: kernels.nvcc disassembles a carried cubin with cuobjdump when it is first loaded."""
    if fresh:
        shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True, exist_ok=True)
    for c in compiled:
        for path in nvcc.cache_dir().glob(f"{c.key}.*"):
            if path.suffix == ".cubin":  # ~3.5x smaller gzipped: more configurations fit the carry limit
                (dest / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes(), 6))
            elif path.suffix == ".json":
                shutil.copy2(path, dest / path.name)
    size = sum(p.stat().st_size for p in dest.iterdir())
    print(f"exported {len(compiled)} entries; {dest} holds {size / 2**20:.1f} MiB")
    total = carry_bytes(ROOT, [ROOT / ".whl", dest])
    print(f"a device call carrying .whl and {dest} takes {total / 2**20:.1f} MiB of the {CARRY_LIMIT / 2**20:.0f} MiB "
          f"limit{'' if total <= CARRY_LIMIT else ': OVER, the call would be refused (export fewer configurations)'}")


CARRY_LIMIT = 64 * 2**20  # what one device call may carry: the tracked files and the paths it names


def carry_bytes(root: Path, carried: list[Path]) -> int:
    """Bytes a device call takes, counted as a tar of what travels: every file git tracks or does not ignore under
    `root` plus every file under the carried paths, each a 512-byte header and its size rounded up to 512. The device
    tool's limit behaves so (run 114's calls: 63.4 MiB of tar passed, 64.1 was refused; plain sizes 62.8 and 63.5)."""
    import subprocess

    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout  # (untracked files git does not ignore travel too)
    files = {root / name for name in listed.decode().split("\0") if name and (root / name).is_file()}
    files |= {f for path in carried if path.exists() for f in ([path] if path.is_file() else path.rglob("*"))
              if f.is_file()}  # (a carried path git does not ignore travels once)
    return sum(512 + -(-f.stat().st_size // 512) * 512 for f in files)


if __name__ == "__main__":
    raise SystemExit(main())

"""GPU-free compilation: CUDA source text -> cubin, ptxas resource report, SASS.

Runs wherever nvcc runs (CI has no GPU). A kernel family's artifact is the exact
text that gets compiled: `render_source(path, defines)` prepends the `#define`
block to the .cu file, and `compile_cubin` compiles that text as given.

Compiles are cached on disk (MMQ_CACHE_DIR, default ~/.cache/mmq-campaign/cubin),
keyed by the source text, defines, options, arch, nvcc version and the headers of
kernels/cuda (an edited common.cuh must not serve stale cubins).
"""
from __future__ import annotations

import collections
import gzip
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from campaign.errors import CampaignError

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
BASE_OPTIONS = ("-O3", "-std=c++17", "-lineinfo", "-Xptxas", "-v")
NVCC_TIMEOUT_S = 600
_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CompileError(CampaignError):
    """nvcc (or cuobjdump) failed; the first line says what, the rest is the full log."""


# ---------------------------------------------------------------- tools

def find_nvcc() -> str:
    candidates = [shutil.which("nvcc")]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "bin", "nvcc"))
    candidates.append("/usr/local/cuda/bin/nvcc")
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise CompileError("nvcc not found: install the CUDA toolkit or put nvcc on PATH")


def find_cuobjdump() -> str:
    """cuobjdump from PATH, next to nvcc, or the nvidia-cuda-cuobjdump pip package."""
    candidates = [shutil.which("cuobjdump")]
    try:
        candidates.append(str(Path(find_nvcc()).resolve().parent / "cuobjdump"))
    except CompileError:
        pass
    try:
        import nvidia  # namespace package of the NVIDIA pip wheels

        for root in nvidia.__path__:
            candidates += sorted(str(p) for p in Path(root).glob("cu*/bin/cuobjdump"))
    except ImportError:
        pass
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise CompileError("cuobjdump not found: put it on PATH or `pip install nvidia-cuda-cuobjdump`")


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str | None = None) -> str:
    """The 'release X.Y, VX.Y.Z' line of `nvcc --version` (part of every cache key)."""
    out = subprocess.run([nvcc or find_nvcc(), "--version"], capture_output=True, text=True, check=False)
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    release = [ln for ln in lines if "release" in ln]
    return (release or lines or ["unknown"])[-1]


def arch_options(arch: str) -> list[str]:
    """nvcc target flags: plain sm_XY via -arch; arch-specific sm_XYa/f need -gencode."""
    m = _ARCH_RE.match(arch)
    if not m:
        raise CompileError(f"bad arch {arch!r}: expected sm_<NN>, e.g. sm_90 or sm_90a")
    if m.group(2):
        return [f"-gencode=arch=compute_{m.group(1)}{m.group(2)},code={arch}"]
    return [f"-arch={arch}"]


def arch_base(arch: str) -> str:
    """'sm_90a' -> 'sm_90': the machine an arch-specific cubin runs on."""
    m = _ARCH_RE.match(arch)
    return f"sm_{m.group(1)}" if m else arch


def wgmma_arch(device_arch: str, who: str) -> str:
    """The nvcc target of a wgmma kernel: sm_90a, which only an sm_90 (Hopper) device runs."""
    if arch_base(device_arch) != "sm_90":
        raise ValueError(f"{who}: wgmma needs an sm_90 (Hopper) device, not {device_arch}")
    return "sm_90a"


# ---------------------------------------------------------------- source text

def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _define_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _checked_defines(defines: dict | None) -> list[tuple[str, str]]:
    items = []
    for name, value in sorted((defines or {}).items()):
        if not _NAME_RE.match(str(name)):
            raise CompileError(f"bad macro name {name!r} in defines")
        text = _define_value(value)
        if "\n" in text:
            raise CompileError(f"macro {name} has a multi-line value")
        items.append((str(name), text))
    return items


def render_source(path: str | os.PathLike, defines: dict | None = None) -> str:
    """The exact text compiled for a family: the #define block, then the .cu file.

    The `#line` directive keeps nvcc errors and -lineinfo pointing at the real file.
    """
    path = Path(path)
    if not path.is_absolute() and not path.exists():
        path = CUDA_DIR / path
    body = path.read_text()
    lines = [f"// rendered from {path.name} by kernels.nvcc.render_source"]
    lines += [f"#define {name} {value}" for name, value in _checked_defines(defines)]
    lines.append(f'#line 1 "{path.name}"')
    return "\n".join(lines) + "\n" + body


_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _headers_digest(source: str) -> str:
    """Hash of the kernels/cuda headers `source` includes, transitively: an edited header
    must not serve stale cubins, and an unrelated header must not invalidate them."""
    h = hashlib.sha256()
    seen: set[str] = set()
    pending = _INCLUDE_RE.findall(source)
    while pending:
        name = pending.pop()
        path = CUDA_DIR / name
        if name in seen or not path.exists():
            continue
        seen.add(name)
        text = path.read_text()
        pending += _INCLUDE_RE.findall(text)
    for name in sorted(seen):
        h.update(name.encode() + b"\0" + (CUDA_DIR / name).read_bytes() + b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------- ptxas / SASS parsing

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_RES_FUNC_RE = re.compile(r"^\s*Function (\S+):\s*$")
_RES_VAL_RE = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def _empty_kernel_resources() -> dict:
    return {"registers": 0, "barriers": 0, "smem_static_bytes": 0, "stack_bytes": 0,
            "spill_store_bytes": 0, "spill_load_bytes": 0, "cmem_bytes": 0}


def parse_ptxas_log(log: str) -> dict[str, dict]:
    """Per-kernel resources from `ptxas -v` output, keyed by the (mangled) entry name.

    Handles both layouts ptxas has used: the frame line before the `Used` line
    (CUDA 11+) and cmem listed on the `Used` line (older releases).
    """
    kernels: dict[str, dict] = {}
    current: str | None = None
    for line in log.splitlines():
        if m := _ENTRY_RE.search(line):
            current = m.group(1)
            kernels.setdefault(current, _empty_kernel_resources())
            continue
        if m := _PROPS_RE.search(line):
            # properties of a non-entry function (noinline device code) are not a kernel
            current = m.group(1) if m.group(1) in kernels else None
            continue
        if current is None:
            continue
        res = kernels[current]
        if m := _FRAME_RE.search(line):
            res["stack_bytes"] = int(m.group(1))
            res["spill_store_bytes"] = int(m.group(2))
            res["spill_load_bytes"] = int(m.group(3))
        if m := _USED_RE.search(line):
            res["registers"] = int(m.group(1))
            if b := _BARRIERS_RE.search(line):
                res["barriers"] = int(b.group(1))
            if s := _SMEM_RE.search(line):
                res["smem_static_bytes"] = int(s.group(1))
            cmem = _CMEM_RE.findall(line)
            if cmem:
                res["cmem_bytes"] = sum(int(n) for n, _bank in cmem)
    return kernels


def parse_resource_usage(text: str) -> dict[str, dict]:
    """`cuobjdump --dump-resource-usage`: {kernel: {"REG": n, "STACK": n, "CONSTANT[0]": n, ...}}."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if m := _RES_FUNC_RE.match(line):
            current = m.group(1)
            out[current] = {}
        elif current is not None and "REG:" in line:
            out[current] = {k: int(v) for k, v in _RES_VAL_RE.findall(line)}
    return out


_SASS_LINE_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
_SASS_FUNC_RE = re.compile(r"^\s*Function : (\S+)\s*$", re.M)
_SASS_ARCH_RE = re.compile(r"code for (sm_\d+[af]?)")


def sass_functions(sass: str) -> dict[str, str]:
    """Split a cuobjdump SASS dump into {function name: its SASS text}."""
    parts = _SASS_FUNC_RE.split(sass)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def sass_opcodes(sass: str, function: str | None = None) -> collections.Counter:
    """Opcode mnemonics of a SASS dump, predicates and modifiers stripped.

    `@!P0 IMMA.16832.S8.S8 R8, ...` counts as IMMA. `function` limits the count
    to one kernel of the dump.
    """
    if function is not None:
        sass = sass_functions(sass).get(function, "")
    return collections.Counter(m.group(1) for m in _SASS_LINE_RE.finditer(sass))


def sass_arch(sass: str) -> str | None:
    """The machine the SASS was generated for ('code for sm_90'), None if absent."""
    m = _SASS_ARCH_RE.search(sass)
    return m.group(1) if m else None


_SASS_INSN_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)([^;]*);")


def sass_main_loop(sass: str, function: str, op: str = "IMMA") -> tuple[collections.Counter, collections.Counter]:
    """Opcodes of a kernel's main loop, split at its last barrier: (before, after).

    The main loop is the widest backward branch whose body holds `op`. For the MMQ tile loop the
    part after the last barrier is the unrolled compute (fragment loads, IMMA, rescale: straight-line
    code, so these counts are per iteration); the part before it holds the staging and unpack
    loops, counted once per static instruction (their trip counts are not in the SASS).
    """
    text = sass_functions(sass).get(function, "")
    ins = [(int(m.group(1), 16), m.group(2), m.group(3)) for m in _SASS_INSN_RE.finditer(text)]
    best: list = []
    for i, (addr, opcode, rest) in enumerate(ins):
        target = re.search(r"0x([0-9a-f]+)", rest) if opcode == "BRA" else None
        if target and int(target.group(1), 16) < addr:
            start = int(target.group(1), 16)
            body = [x for x in ins[:i + 1] if x[0] >= start]
            if len(body) > len(best) and any(o == op for _, o, _ in body):
                best = body
    if not best:
        raise CompileError(f"{function}: no loop holding {op} in the SASS")
    bars = [j for j, (_, o, _) in enumerate(best) if o == "BAR"]
    cut = bars[-1] + 1 if bars else 0
    return (collections.Counter(o for _, o, _ in best[:cut]), collections.Counter(o for _, o, _ in best[cut:]))


LOCAL_MEMORY_OPS = ("LDL", "STL")


# ---------------------------------------------------------------- compile result

@dataclass(frozen=True)
class Compiled:
    cubin: bytes
    ptxas_log: str
    resources: dict  # {kernel name: {registers, smem_static_bytes, spill_*_bytes, stack_bytes, cmem_bytes, ...}}
    sass: str
    key: str
    arch: str
    command: tuple[str, ...] = ()
    compile_seconds: float = 0.0  # nvcc wall time of the original compile
    from_cache: bool = False

    @property
    def kernel_names(self) -> list[str]:
        return sorted(self.resources)

    def summary(self, kernels: list[str] | None = None,
                dynamic_smem_bytes: int | dict[str, int] = 0) -> dict:
        """Flat resource record a family stores in `Variant.resources` (the static gate reads it).

        Worst case over `kernels` (default: every kernel of the cubin): max registers,
        stack and smem (static + that kernel's dynamic smem), summed spills.
        """
        names = kernels if kernels is not None else self.kernel_names
        missing = [n for n in names if n not in self.resources]
        if missing:
            raise CompileError(f"kernel(s) {missing} not in cubin (has {self.kernel_names})")
        per = {n: self.resources[n] for n in names}

        def dyn(name: str) -> int:
            if isinstance(dynamic_smem_bytes, dict):
                return int(dynamic_smem_bytes.get(name, 0))
            return int(dynamic_smem_bytes)

        ops = collections.Counter()
        for name in names:
            ops += sass_opcodes(self.sass, name)
        return {
            "backend": "cuda",
            "arch": self.arch,
            "sass_arch": sass_arch(self.sass),
            "cubin_key": self.key,
            "registers": max((r["registers"] for r in per.values()), default=0),
            "barriers": max((r["barriers"] for r in per.values()), default=0),
            "stack_bytes": max((r["stack_bytes"] for r in per.values()), default=0),
            "spill_store_bytes": sum(r["spill_store_bytes"] for r in per.values()),
            "spill_load_bytes": sum(r["spill_load_bytes"] for r in per.values()),
            "smem_static_bytes": max((r["smem_static_bytes"] for r in per.values()), default=0),
            "smem_bytes_total": max((r["smem_static_bytes"] + dyn(n) for n, r in per.items()), default=0),
            "local_mem_ops": sum(ops[op] for op in LOCAL_MEMORY_OPS),
            "sass_ops": dict(ops),
            "kernels": {n: dict(r, smem_dynamic_bytes=dyn(n)) for n, r in per.items()},
            "compile_seconds": self.compile_seconds,
        }


# ---------------------------------------------------------------- cache

def cache_dir() -> Path:
    return Path(os.environ.get("MMQ_CACHE_DIR") or Path.home() / ".cache" / "mmq-campaign" / "cubin")


_memory_cache: dict[str, Compiled] = {}
_nvcc_runs = 0  # how many times nvcc actually ran in this process (cache tests read it)


def nvcc_run_count() -> int:
    return _nvcc_runs


def clear_memory_cache() -> None:
    """Forget in-process compiles (the disk cache stays)."""
    _memory_cache.clear()


def compile_key(source: str, defines: dict | None, arch: str, options: list[str]) -> str:
    h = hashlib.sha256()
    for part in (source, json.dumps(_checked_defines(defines)), json.dumps(options), arch,
                 nvcc_version(), _headers_digest(source)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _load_cached(key: str) -> Compiled | None:
    base = cache_dir() / key
    try:
        meta = json.loads(base.with_suffix(".json").read_text())
        packed = base.with_suffix(".cubin.gz")  # an exported (carried) cache keeps cubins compressed
        cubin = gzip.decompress(packed.read_bytes()) if packed.exists() else base.with_suffix(".cubin").read_bytes()
        sass_file = base.with_suffix(".sass.gz")
        sass = gzip.decompress(sass_file.read_bytes()).decode() if sass_file.exists() else _sass_of(cubin, sass_file)
    except (OSError, ValueError, CompileError):
        return None
    return Compiled(cubin=cubin, ptxas_log=meta["ptxas_log"], resources=meta["resources"], sass=sass,
                    key=key, arch=meta["arch"], command=tuple(meta["command"]),
                    compile_seconds=meta["compile_seconds"], from_cache=True)


def _sass_of(cubin: bytes, sass_file: Path) -> str:
    """An exported cache carries no SASS (the larger part of an entry): disassemble the cubin (cuobjdump, which the GPU
    machine's CUDA image has) and keep the text beside it for the next load (best effort: the cache may be read-only)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        sass, _ = _dump_sass(path)
    try:
        sass_file.write_bytes(gzip.compress(sass.encode(), 6))
    except OSError:
        pass
    return sass


def _store_cached(c: Compiled) -> None:
    """Write atomically (temp file + rename) so concurrent trials never read half a cubin."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        meta = {"ptxas_log": c.ptxas_log, "resources": c.resources, "arch": c.arch,
                "command": list(c.command), "compile_seconds": c.compile_seconds}
        # SASS text is ~4x the cubin: stored compressed so a cache can travel to the GPU machine
        for suffix, data in ((".cubin", c.cubin), (".sass.gz", gzip.compress(c.sass.encode(), 6)),
                             (".json", json.dumps(meta).encode())):  # json last: it marks completeness
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{c.key[:16]}")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / f"{c.key}{suffix}")
    except OSError:
        pass  # a read-only cache only costs recompiles


# ---------------------------------------------------------------- compile

def _first_error_line(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line.lower():
            return line.strip()
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[0] if lines else "no output"


def _dump_sass(cubin_path: Path) -> tuple[str, str]:
    """(SASS text, resource-usage text) of a cubin, one cuobjdump run."""
    tool = find_cuobjdump()
    # cuobjdump runs nvdisasm, which the pip wheels put beside it rather than on PATH
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run([tool, "--dump-resource-usage", "--dump-sass", str(cubin_path)],
                         capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise CompileError(f"cuobjdump failed (exit {out.returncode}) on {cubin_path.name}\n"
                           f"command: {tool} --dump-sass {cubin_path}\n{out.stderr}")
    text = out.stdout
    m = re.search(r"^\s*code for sm_", text, re.M)
    split = m.start() if m else 0
    return text[split:], text[:split]


def compile_cubin(source: str, defines: dict | None = None, arch: str = "sm_90",
                  extra_options: tuple[str, ...] | list[str] = ()) -> Compiled:
    """Compile CUDA source text to a cubin for `arch`; cached on disk and in memory.

    `defines` become -DNAME=VALUE flags; families instead pass text from
    `render_source` (defines already in it) so the logged artifact is complete.
    Raises CompileError with the nvcc command and its full stderr.
    """
    global _nvcc_runs
    nvcc = find_nvcc()
    defs = _checked_defines(defines)
    options = [*BASE_OPTIONS, *arch_options(arch), *[f"-D{n}={v}" for n, v in defs],
               *map(str, extra_options)]
    key = compile_key(source, defines, arch, options)
    if key in _memory_cache:
        return _memory_cache[key]
    cached = _load_cached(key)
    if cached is not None:
        _memory_cache[key] = cached
        return cached

    with tempfile.TemporaryDirectory(prefix="mmq-nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(source)
        cmd = [nvcc, "-cubin", *options, f"-I{CUDA_DIR}", "-o", str(out), str(src)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp,
                                  timeout=NVCC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc timed out after {NVCC_TIMEOUT_S} s\ncommand: {' '.join(cmd)}") from None
        seconds = time.perf_counter() - t0
        _nvcc_runs += 1
        if proc.returncode != 0 or not out.exists():
            raise CompileError(f"nvcc failed for {arch} (exit {proc.returncode}): "
                               f"{_first_error_line(proc.stderr)}\n"
                               f"command: {' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
        cubin = out.read_bytes()
        sass, usage = _dump_sass(out)

    log = proc.stderr + proc.stdout  # ptxas -v reports on stderr
    resources = parse_ptxas_log(log)
    for name, usage_row in parse_resource_usage(usage).items():
        if name in resources and not resources[name]["cmem_bytes"]:
            resources[name]["cmem_bytes"] = usage_row.get("CONSTANT[0]", 0)
    compiled = Compiled(cubin=cubin, ptxas_log=log, resources=resources, sass=sass, key=key,
                        arch=arch, command=tuple(cmd), compile_seconds=seconds)
    _store_cached(compiled)
    _memory_cache[key] = compiled
    return compiled


def compile_file(path: str | os.PathLike, defines: dict | None = None, arch: str = "sm_90",
                 extra_options: tuple[str, ...] | list[str] = ()) -> tuple[str, Compiled]:
    """(rendered text, Compiled) for a kernels/cuda file: what families call."""
    text = render_source(path, defines)
    return text, compile_cubin(text, None, arch, extra_options)

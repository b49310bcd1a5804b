"""Static gate: what the compiler says about a CUDA variant, before it ever runs.

Checks, on the resource record a family stores in `Variant.resources`
(`kernels.nvcc.Compiled.summary()` writes it):
  - the SASS is for the device's arch (sm_90a SASS counts as sm_90),
  - no register spills and no local memory (LDL/STL in SASS) unless the lever allows spills,
  - registers <= 255 per thread,
  - static + dynamic shared memory <= the device's opt-in limit per block,
  - every opcode the lever claims (lever.sass_claims, e.g. IMMA, HGMMA) is in the SASS.

`compile_defaults(lever)` runs the same checks in CI (nvcc, no GPU) on the lever's default
configuration for each of its types, through the family's `compile_only`.
"""
from __future__ import annotations

from experiments.base import Lever
from gates.result import GateResult, merge
from kernels import nvcc
from kernels.family import Variant

MAX_REGISTERS = 255
# opt-in shared memory per block by arch, used when no device is at hand (CI)
SMEM_OPTIN_BY_ARCH = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024,
                      "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_120": 99 * 1024}
DEFAULT_SMEM_OPTIN = 227 * 1024


def _target(resources: dict, device_info: dict | None) -> tuple[str | None, int]:
    """(device arch, smem limit per block): device info first, then what build recorded."""
    info = device_info or {}
    arch = info.get("arch") or resources.get("device_arch")
    limit = info.get("smem_per_block_optin") or resources.get("smem_limit_bytes")
    if not limit:
        limit = SMEM_OPTIN_BY_ARCH.get(nvcc.arch_base(arch or resources.get("arch") or ""), DEFAULT_SMEM_OPTIN)
    return arch, int(limit)


def check_resources(resources: dict, lever: Lever, device_info: dict | None = None) -> GateResult:
    """The static verdict on one compile's resource record."""
    ops = dict(resources.get("sass_ops") or {})
    built_for = resources.get("sass_arch") or resources.get("arch")
    device_arch, smem_limit = _target(resources, device_info)
    spills = int(resources.get("spill_store_bytes", 0)) + int(resources.get("spill_load_bytes", 0))
    local_ops = int(resources.get("local_mem_ops", sum(ops.get(op, 0) for op in nvcc.LOCAL_MEMORY_OPS)))
    registers = int(resources.get("registers", 0))
    smem = int(resources.get("smem_bytes_total", resources.get("smem_static_bytes", 0)))
    numbers = {
        "arch": built_for or "unknown",
        "registers": registers,
        "smem_bytes": smem,
        "smem_limit_bytes": smem_limit,
        "spill_bytes": spills,
        "local_mem_ops": local_ops,
        "stack_bytes": int(resources.get("stack_bytes", 0)),
    }
    numbers.update({f"sass_{op}": int(ops.get(op, 0)) for op in lever.sass_claims})

    problems = []
    if not built_for:
        problems.append("resource record names no arch (build it with Compiled.summary())")
    elif device_arch and nvcc.arch_base(built_for) != nvcc.arch_base(device_arch):
        problems.append(f"compiled for {built_for}, device is {device_arch}")
    if not ops:
        problems.append("resource record holds no SASS opcode counts")
    if not lever.allow_spills and (spills or local_ops):
        problems.append(f"local memory: {spills} B spilled, {local_ops} LDL/STL in SASS "
                        f"(stack {numbers['stack_bytes']} B)")
    if registers > MAX_REGISTERS:
        problems.append(f"{registers} registers > {MAX_REGISTERS}")
    if smem > smem_limit:
        problems.append(f"shared memory {smem} B > limit {smem_limit} B")
    missing = [op for op in lever.sass_claims if not ops.get(op)]
    if missing:
        problems.append(f"claimed SASS opcode(s) missing: {', '.join(missing)}")
    return GateResult("static", not problems, numbers, "; ".join(problems))


def run(variant: Variant, lever: Lever, device_info: dict | None = None) -> GateResult:
    """The static gate of one built variant (CPU variants pass: nothing to inspect)."""
    if lever.backend == "cpu" or variant.resources.get("backend") == "cpu":
        return GateResult("static", True, {"backend": "cpu"})
    return check_resources(variant.resources, lever, device_info)


def compile_defaults(lever: Lever, arch: str = "sm_90", family=None) -> GateResult:
    """CI's static gate: the lever's defaults compiled with nvcc for each of its types.

    `family.compile_only(params, qtype, arch)` returns a `Compiled` (checked over all its
    kernels, with the family's dynamic smem when it states it) or a resource record like
    `Variant.resources`.
    """
    if lever.backend == "cpu":
        return GateResult("static", True, {"backend": "cpu"})
    if family is None:
        from kernels import families

        family = families.get(lever.family)
    params = {**lever.fixed, **lever.defaults}
    device_info = {"arch": arch, "smem_per_block_optin": SMEM_OPTIN_BY_ARCH.get(nvcc.arch_base(arch),
                                                                                 DEFAULT_SMEM_OPTIN)}
    reason = lever.check(params, device_info)
    if reason:
        return GateResult("static", False, {"check": "invalid"}, f"defaults invalid: {reason}")
    verdicts = {}
    for qtype in lever.types:
        try:
            built = family.compile_only(params, qtype, arch)
        except nvcc.CompileError as exc:
            first = (str(exc).splitlines() or [""])[0]
            verdicts[qtype] = GateResult("static", False, {"built": 0}, f"compile failed: {first}")
            continue
        if isinstance(built, nvcc.Compiled):
            # tile families know their dynamic shared memory: count it, as a launch would
            dynamic = ({family.kernel_name: family.smem(params, qtype)}
                       if hasattr(family, "smem") and hasattr(family, "kernel_name") else 0)
            resources = built.summary(dynamic_smem_bytes=dynamic)
        else:
            resources = built
        verdicts[qtype] = check_resources(resources, lever, device_info)
    return merge("static", verdicts)

"""The `adaptive_format` composite: the activation format chosen by T at a searched crossover.

    T <  CROSSOVER_T  -> the int8 path (kernels/mmq_base.py: Q8_1 activations, IMMA), with
                         mmq_base.heuristic_params(T) -- the configuration the dispatcher runs
                         when mmq_base has no champion; one int8 part per heuristic branch that
                         some T below the crossover reaches
    T >= CROSSOVER_T  -> the f16 path (kernels/mmq_f16.py: weights dequantized into shared
                         memory as f16, HMMA) with this variant's own tile parameters

A composite builds its parts with their own families; prepare(problem) hands the problem to
the part its T selects, so every timed run is exactly one part's kernels. The gates see:
  - static: the union of the parts' resource records (max registers/smem/stack, summed
    spills and SASS opcode counts), so the IMMA and HMMA claims are checked on what each
    part really compiled and a spill in any part fails the composite;
  - parity (`parity = "parts"`, gates/parity.py): every part on the whole parity suite under
    its own contract (int8: tight vs gemm_int; f16: the f16 bound), whatever the crossover,
    and the composite as dispatched (each workload judged by the contract of the part it ran).
The dispatcher (kernels/dispatch.py) asks `route(params, T)`: the f16 part at or above the
crossover, None below it (the int8 side is then whichever int8 lever is champion).
"""
from __future__ import annotations

import json

from kernels import mmq_base, mmq_f16
from kernels.family import Problem, Variant

CROSSOVER = "CROSSOVER_T"
DEFAULT_CROSSOVER_T = 128
MAX_CROSSOVER_T = 1 << 16
F16_PART = "f16"


def crossover(params: dict) -> int:
    return int(params.get(CROSSOVER, DEFAULT_CROSSOVER_T))


def f16_params(params: dict) -> dict:
    """The f16 part's parameters: everything but the crossover."""
    return {k: v for k, v in params.items() if k != CROSSOVER}


def int8_ranges(cross: int) -> list[tuple[int, int, dict]]:
    """(first T, last T, mmq_base params) for each int8 configuration used below `cross`:
    consecutive T with the same heuristic configuration share one part. (The parts are the
    same for every type: q4_K's tiles, so above T=256 the q5_K/q6_K/q8_0 fallback's folded
    rescale is not used here; crossovers above 256 have not won so far.)"""
    ranges: list[tuple[int, int, dict]] = []
    for T in range(1, cross):
        p = mmq_base.full_params(mmq_base.heuristic_params(T))
        if ranges and ranges[-1][2] == p:
            ranges[-1] = (ranges[-1][0], T, p)
        else:
            ranges.append((T, T, p))
    return ranges


def part_name(first: int, last: int) -> str:
    return f"int8_T{first}-{last}"


class AdaptiveFamily:
    name = "mmq_adaptive"
    backend = "cuda"
    parity = "parts"  # gates/parity.py checks each part under its own contract

    # ---- what the composite is made of ----
    def parts(self, params: dict) -> list[tuple[str, str, dict]]:
        """(part name, family name, params) of every kernel the composite may run."""
        cross = crossover(params)
        return [(F16_PART, mmq_f16.FAMILY.name, mmq_f16.FAMILY.complete(f16_params(params))),
                *((part_name(a, b), mmq_base.FAMILY.name, p) for a, b, p in int8_ranges(cross))]

    @staticmethod
    def _family(name: str):
        return mmq_f16.FAMILY if name == mmq_f16.FAMILY.name else mmq_base.FAMILY

    def complete(self, params: dict) -> dict:
        return {**mmq_f16.FAMILY.complete(f16_params(params)), CROSSOVER: crossover(params)}

    def invalid(self, params: dict, qtype: str, device_info: dict) -> str | None:
        cross = crossover(params)
        if not 2 <= cross <= MAX_CROSSOVER_T:
            return f"{CROSSOVER}={cross} outside 2..{MAX_CROSSOVER_T} (below 2 no T takes the int8 path)"
        for name, family, p in self.parts(params):
            reason = self._family(family).invalid(p, qtype, device_info)
            if reason:
                return f"{name} part: {reason}"
        return None

    # ---- compile ----
    def source(self, params: dict, qtype: str) -> str:
        """Every part's source, each under a header naming it (the artifact a trial logs)."""
        return "\n".join(f"// ==== part {name}: {family} {json.dumps(p, sort_keys=True)}\n"
                         + self._family(family).source(p, qtype)
                         for name, family, p in self.parts(self.complete(params)))

    def compile_only(self, params: dict, qtype: str, arch: str = "sm_90") -> dict:
        """The union resource record (CI's static gate: nvcc only, no GPU)."""
        records = {}
        for name, family, p in self.parts(self.complete(params)):
            fam = self._family(family)
            records[name] = fam.compile_only(p, qtype, arch).summary(
                dynamic_smem_bytes={fam.kernel_name: fam.smem(p, qtype)})
        return union_resources(records)

    def build(self, params: dict, qtype: str, device) -> Variant:
        p = self.complete(params)
        reason = self.invalid(p, qtype, device.info)
        if reason:
            raise ValueError(f"{self.name}: {reason}")
        built = {name: self._family(family).build(pp, qtype, device) for name, family, pp in self.parts(p)}
        return Variant(family=self.name, params=p, qtype=qtype, source=self.source(p, qtype),
                       resources=union_resources({n: v.resources for n, v in built.items()}),
                       impl=AdaptiveImpl(crossover(p), built))

    # ---- the dispatcher ----
    def route(self, params: dict, T: int) -> tuple[str, dict] | None:
        """(family, params) the dispatcher runs at T: the f16 part at or above the crossover;
        None below it, so the dispatcher goes on to the int8 levers' champions (the int8 part
        here is only the study's stand-in for them)."""
        if T < crossover(params):
            return None
        return mmq_f16.FAMILY.name, f16_params(params)


class AdaptiveImpl:
    """The built parts; a problem goes to the part its T selects."""

    def __init__(self, cross: int, parts: dict[str, Variant]) -> None:
        self.crossover, self.parts = cross, parts

    def part_for(self, T: int) -> Variant:
        if T >= self.crossover:
            return self.parts[F16_PART]
        for name, part in self.parts.items():
            if name.startswith("int8_T"):
                first, last = (int(x) for x in name[len("int8_T"):].split("-"))
                if first <= T <= last:
                    return part
        raise ValueError(f"mmq_adaptive: no int8 part covers T={T} (crossover {self.crossover})")

    def prepare(self, variant: Variant, problem: Problem):
        return self.part_for(problem.workload.T).prepare(problem)


# counts add up over the parts; sizes take the worst part (nvcc.Compiled.summary's convention)
_SUMMED = ("spill_store_bytes", "spill_load_bytes", "local_mem_ops", "compile_seconds")
_WORST = ("registers", "barriers", "stack_bytes", "smem_static_bytes", "smem_bytes_total", "threads")


def union_resources(records: dict[str, dict]) -> dict:
    """One resource record for the static gate from the parts' records: worst case of each
    size, sum of each count, every part's SASS opcodes, and each part's record under `parts`."""
    first = next(iter(records.values()))
    archs = {r.get("sass_arch") or r.get("arch") for r in records.values()}
    out = {k: first[k] for k in ("backend", "arch", "sass_arch", "device_arch", "smem_limit_bytes") if k in first}
    if len(archs) > 1:  # the gate then sees a mismatch with the device and says so
        out["sass_arch"] = "+".join(sorted(a or "?" for a in archs))
    for k in _SUMMED:
        out[k] = sum(r.get(k, 0) or 0 for r in records.values())
    for k in _WORST:
        out[k] = max(r.get(k, 0) or 0 for r in records.values())
    ops: dict[str, int] = {}
    for r in records.values():
        for op, n in (r.get("sass_ops") or {}).items():
            ops[op] = ops.get(op, 0) + n
    out["sass_ops"] = ops
    out["parts"] = records
    return out


FAMILY = AdaptiveFamily()

"""Parity gate: fresh random inputs per workload, output poisoned before each launch,
every element compared against the CPU references.

family.parity == "int" (the integer contract, Q8_1 activations):
  tight  max|out - gemm_int| / max|gemm_int| <= tight_tol, on the same Q8_1 activations;
  loose  |out - gemm_float64| <= sum_k |w| * d_x / 2 elementwise (the activation rounding
         error: |x - d*q| <= d/2 per element, and the integer contract equals w . (d*q)).
family.parity == "int_k": the same two checks on activations with one scale per 256 values
  (quant.quantize_q8_k: the direct_q8 kernel's format), their d repeated per 32-block.
family.parity == "bf16" / "f16" (dequantized weights, rounded activations, f32 accumulate):
  |out - gemm_float64| <= (2u + K * 2**-24) * (|W| @ |x|^T) elementwise, u the unit roundoff
  of the format (bf16 2**-8, f16 2**-11): one rounding of w and of x, plus worst-case f32 sums.
A NaN or Inf anywhere fails (a poisoned element the kernel never wrote stays NaN).
family.parity == "parts" (a composite, e.g. kernels/mmq_adaptive.py): each part under its own
contract on every workload, then the composite as dispatched (see run_parts).
"""
from __future__ import annotations

import numpy as np

from gates.inputs import random_problem
from gates.result import GateResult, merge
from kernels import moe_reference, quant, reference
from kernels.family import Problem, Variant, Workload

TIGHT_TOL = 1e-4
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "f16": 2.0**-11}
F32_ROUNDOFF = 2.0**-24
BOUND_SLACK = 1.0 + 1e-5  # the float32 x/d division and output rounding, beyond the d/2 bound
Q8_1_BLOCK = 32
# the integer contracts: parity mode -> the activation quantizer whose bytes the kernel reads
ACTIVATION_QUANTIZERS = {"int": quant.quantize_q8_1, "int_k": quant.quantize_q8_k}


def _error_bound(problem: Problem, mode: str, xq: quant.Q8_1Act | None) -> np.ndarray:
    """float64 bound per output element (see the module docstring), shaped like the output."""
    w = problem.workload
    qt = quant.get(w.qtype)
    packed = problem.w_packed if w.is_moe else problem.w_packed[None]
    w_abs = np.abs(np.stack([qt.dequantize(p) for p in packed]).astype(np.float64))  # [E, M, K]
    if mode in ACTIVATION_QUANTIZERS:
        per_element = np.repeat(xq.d.astype(np.float64) / 2, Q8_1_BLOCK, axis=1)  # |x - d*q| <= d/2
    else:
        per_element = (2 * UNIT_ROUNDOFF[mode] + w.K * F32_ROUNDOFF) * np.abs(problem.x.astype(np.float64))
    bound = np.matmul(w_abs, per_element.T).transpose(0, 2, 1) * BOUND_SLACK  # [E, T, M]
    if not w.is_moe:
        return bound[0]
    return bound[problem.ids, np.arange(w.T)[:, None]]  # [T, top_k, M]: each pair's expert


def references(problem: Problem, mode: str) -> dict[str, np.ndarray]:
    """Arrays shaped like the output: 'float64', 'bound', and for the integer modes ('int', 'int_k') also 'int'."""
    w = problem.workload
    xq = ACTIVATION_QUANTIZERS[mode](problem.x) if mode in ACTIVATION_QUANTIZERS else None
    if w.is_moe:
        refs = {"float64": moe_reference.moe_gemm_float64(problem.w_packed, w.qtype, problem.x, problem.ids)}
        if xq is not None:
            refs["int"] = moe_reference.moe_gemm_int(problem.w_packed, w.qtype, xq, problem.ids)
    else:
        refs = {"float64": reference.gemm_float64(problem.w_packed, w.qtype, problem.x)}
        if xq is not None:
            refs["int"] = reference.gemm_int(problem.w_packed, w.qtype, xq)
    refs["bound"] = _error_bound(problem, mode, xq)
    return refs


def compare(out: np.ndarray, refs: dict[str, np.ndarray], tight_tol: float) -> tuple[dict, str]:
    """(numbers, reason) of one output against its references; reason '' when it passes."""
    if out.shape != refs["float64"].shape:
        return {}, f"output shape {out.shape} != expected {refs['float64'].shape}"
    out64 = out.astype(np.float64)
    nonfinite = int(np.count_nonzero(~np.isfinite(out64)))
    if nonfinite:
        return {"nonfinite": nonfinite}, f"{nonfinite} NaN/Inf elements (unwritten or overflowed)"
    scale = float(np.abs(refs["float64"]).max()) or 1.0
    allowed = refs["bound"] + tight_tol * scale
    numbers = {"loose_ratio": float((np.abs(out64 - refs["float64"]) / allowed).max())}
    reasons = []
    if "int" in refs:
        int_scale = float(np.abs(refs["int"]).max()) or 1.0
        numbers["tight_rel"] = float(np.abs(out64 - refs["int"]).max() / int_scale)
        if numbers["tight_rel"] > tight_tol:
            reasons.append(f"tight error {numbers['tight_rel']:.3g} > {tight_tol:g} vs gemm_int")
    if numbers["loose_ratio"] > 1.0:
        reasons.append(f"loose error {numbers['loose_ratio']:.3g}x its bound vs gemm_float64")
    return numbers, "; ".join(reasons)


def check_one(variant: Variant, w: Workload, rng: np.random.Generator, mode: str,
              tight_tol: float) -> tuple[dict, str]:
    problem = random_problem(w, rng)
    refs = references(problem, mode)
    try:
        bound = variant.prepare(problem)
        try:
            bound.poison()
            bound.run()
            out = bound.output()
        finally:
            bound.release()
    except Exception as exc:  # a launch that fails is a parity failure of this variant
        return {}, f"run failed: {type(exc).__name__}: {exc}"
    return compare(out, refs, tight_tol)


PARTS = "parts"  # a composite family (kernels/mmq_adaptive.py): each part under its own contract


def run(variant: Variant, workloads: list[Workload], rng: np.random.Generator, mode: str | None = None,
        tight_tol: float = TIGHT_TOL) -> GateResult:
    """Check `variant` on the workloads of its qtype; mode defaults to its family's parity."""
    if mode is None:
        from kernels import families
        mode = families.get(variant.family).parity
    if mode == PARTS:
        return run_parts(variant, workloads, rng, tight_tol)
    if mode not in ACTIVATION_QUANTIZERS and mode not in UNIT_ROUNDOFF:
        known = ", ".join([*ACTIVATION_QUANTIZERS, *UNIT_ROUNDOFF, PARTS])
        raise ValueError(f"unknown parity mode {mode!r} ({known})")
    return _run_each(variant, workloads, rng, lambda w: mode, tight_tol)


def run_parts(variant: Variant, workloads: list[Workload], rng: np.random.Generator,
              tight_tol: float = TIGHT_TOL) -> GateResult:
    """A composite (variant.impl.parts: name -> Variant, variant.impl.part_for(T)): every part on
    every workload under its own family's contract, so each path is checked whatever T the
    composite would send to it; then the composite as dispatched, each workload judged by the
    contract of the part its T selects."""
    from kernels import families

    def mode_of(v: Variant) -> str:
        return families.get(v.family).parity

    verdicts = {name: run(part, workloads, rng, mode_of(part), tight_tol)
                for name, part in variant.impl.parts.items()}
    verdicts["dispatched"] = _run_each(variant, workloads, rng,
                                       lambda w: mode_of(variant.impl.part_for(w.T)), tight_tol)
    for name, verdict in verdicts.items():  # one metric per (part, workload), not the last part's
        verdict.details = {f"{name} {label}": d for label, d in verdict.details.items()}
    return merge("parity", verdicts)


def _run_each(variant: Variant, workloads: list[Workload], rng: np.random.Generator, mode_of,
              tight_tol: float) -> GateResult:
    mine = [w for w in workloads if w.qtype == variant.qtype]
    if not mine:
        return GateResult("parity", False, {"workloads": 0}, f"no parity workloads for {variant.qtype}")
    details, failures, modes = {}, [], set()
    for w in mine:
        mode = mode_of(w)
        modes.add(mode)
        numbers, reason = check_one(variant, w, rng, mode, tight_tol)
        details[w.label()] = numbers
        if reason:
            failures.append(f"{w.label()}: {reason}")
    numbers = {"mode": "+".join(sorted(modes)), "workloads": len(mine), "failed": len(failures)}
    for key in ("tight_rel", "loose_ratio"):
        values = [d[key] for d in details.values() if key in d]
        if values:
            numbers[f"max_{key}"] = max(values)
    reason = failures[0] + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else "") if failures else ""
    return GateResult("parity", not failures, numbers, reason, details=details)

"""Build a variant for every quant type and judge it with the static gate.

The static gate proper (compile report, registers, smem, spills, SASS claims) lives in
gates/static.py, written for the CUDA families and imported only when a CUDA variant
needs it. A CPU variant has nothing to inspect: built means passed.
"""
from __future__ import annotations

import importlib

from experiments.base import Lever
from gates.result import GateResult, merge
from kernels.family import Variant


def static_verdict(variant: Variant, lever: Lever, device_info: dict | None = None) -> GateResult:
    if lever.backend == "cpu":
        return GateResult("static", True, {"backend": "cpu"})
    try:
        static = importlib.import_module("gates.static")
    except ModuleNotFoundError as exc:
        if exc.name != "gates.static":
            raise
        return GateResult("static", False, reason="gates/static.py is missing: a CUDA variant cannot be judged")
    return static.run(variant, lever, device_info)  # the device's own limits (smem opt-in, arch)


def build_one(lever: Lever, family, params: dict, qtype: str, device) -> tuple[Variant | None, GateResult]:
    try:
        variant = family.build(params, qtype, device)
    except Exception as exc:  # a compile failure is an outcome of the trial, not a crash of the study
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return None, GateResult("static", False, {"built": 0}, f"build failed: {type(exc).__name__}: {first_line}")
    return variant, static_verdict(variant, lever, device.info)


def build_all(lever: Lever, family, params: dict, types: list[str], device) -> tuple[dict[str, Variant], GateResult]:
    """Variants keyed by qtype, and one static verdict for them all (the lever's check first)."""
    reason = lever.check(params, device.info, types)
    if reason:
        return {}, GateResult("static", False, {"check": "invalid"}, reason)
    variants, verdicts = {}, {}
    for qtype in types:
        variant, verdict = build_one(lever, family, params, qtype, device)
        verdicts[qtype] = verdict
        if not verdict.passed:
            break  # the variant is infeasible: building the other types would change nothing
        variants[qtype] = variant
    return variants, merge("static", verdicts)

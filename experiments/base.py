"""What a lever declares: its kernel family, fixed params, search space, validity rule,
workload suite, the incumbent it must beat and the margin it must beat it by.

A lever module is a declaration (Kernel Tuner's `tune_kernel` shape), never a loop:

    LEVER = Lever(name="mmq_base", family="mmq_base", backend="cuda",
                  space={"BM": [64, 128], "BN": [32, 64, 128], ...},
                  valid=fits_smem, suite="dense", incumbent="dequant_cublas", ...)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

# A search space is a plain dict: name -> list of choices (categorical) or
# (low, high) / (low, high, step) int ranges. Optuna samples it define-by-run.
Space = dict[str, list | tuple]


@dataclass(frozen=True)
class Lever:
    name: str
    family: str  # kernel family key (kernels.families.get)
    backend: str  # "cpu" | "cuda"
    space: Space
    suite: str  # campaign.workloads suite name
    types: tuple[str, ...]  # quant types this lever claims
    incumbent: str | None  # lever whose champion (or defaults) it must beat; None = baseline
    fixed: dict = field(default_factory=dict)  # params not searched
    defaults: dict = field(default_factory=dict)  # the configuration CI's static gate compiles
    # returns None when (params, device_info, qtype) is buildable, else the one-line reason
    valid: Callable[[dict, dict, str], str | None] | None = None
    margin: float = 0.02  # required gain over the noise floor (fraction)
    sass_claims: tuple[str, ...] = ()  # e.g. ("IMMA",) checked by the static gate
    allow_spills: bool = False
    # champions keyed by (qtype, arch, T regime, shape) instead of (qtype, arch, T regime): its
    # parameters are tuned per (M, K) shape (adaptive_format's crossover T); each of its suites
    # must hold one shape (promotion refuses otherwise)
    per_shape: bool = False
    description: str = ""

    def check(self, params: dict, device_info: dict, types: Sequence[str] | None = None) -> str | None:
        """The first reason `params` cannot be built for one of `types` (default: all the lever's types), or None.
        Asked per type: a rule's sizes are the type's (q5_K's 176-byte super-blocks stage more than q4_K's 144)."""
        if self.valid is None:
            return None
        types = list(types or self.types)
        for qtype in types:
            reason = self.valid(params, device_info, qtype)
            if reason:
                return reason if len(types) == 1 else f"{qtype}: {reason}"
        return None

"""Family registry: a family name -> the module that implements it, imported only when asked.

CUDA families import kernels.cuda_runtime (PyCUDA) when they build; naming them here
costs nothing, so a CPU machine can list every lever without touching PyCUDA.

    kernels.families.get("cpu_demo") -> Family   (its module's FAMILY, or FAMILIES[name])
    kernels.families.register(family)            (families defined elsewhere: tests, plugins)
"""
from __future__ import annotations

import importlib

from campaign.errors import UnknownNameError

# family name -> module exposing FAMILY (or FAMILIES, a name -> family dict); a module named
# after its family needs no entry
_MODULES = {"cpu_demo": "kernels.cpu_blocked", "moe_matvec": "kernels.moe_baselines",
            "moe_dequant_cublas": "kernels.moe_baselines"}
_registered: dict[str, object] = {}


def register(family) -> object:
    _registered[family.name] = family
    return family


def unregister(name: str) -> None:
    _registered.pop(name, None)


def get(name: str):
    if name in _registered:
        return _registered[name]
    module_name = _MODULES.get(name, f"kernels.{name}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # the family exists but one of its imports is missing: show that
        raise UnknownNameError(f"unknown kernel family {name!r} (no module {module_name})") from None
    family = getattr(module, "FAMILIES", {}).get(name) or getattr(module, "FAMILY", None)
    if family is None:
        raise UnknownNameError(f"module {module_name} defines no FAMILY for family {name!r}")
    return family


def heuristic(name: str, T: int, qtype: str) -> dict | None:
    """The family's starting configuration for (T, qtype) -- what runs before a study promotes a
    champion -- from its module's `heuristic_params(T, qtype)`, or None if it has none."""
    module = importlib.import_module(type(get(name)).__module__)  # where the family lives
    found = getattr(module, "heuristic_params", None)
    return found(T, qtype) if found else None


"""Lever registry: every module in this package that declares `LEVER = Lever(...)` is a lever.

    experiments.get("cpu_demo")   -> Lever        (UnknownNameError lists the known ones)
    experiments.all_levers()      -> [Lever, ...] sorted by name
    experiments.register(lever)   -> adds a lever that lives outside this package (tests, plugins)

Lever modules are declarations only: importing one must not import PyCUDA, so the
registry can be listed on a machine without a GPU.
"""
from __future__ import annotations

import importlib
import pkgutil

from campaign.errors import SpaceError, UnknownNameError
from experiments.base import Lever

_NOT_LEVERS = {"base"}
_registered: dict[str, Lever] = {}
_discovered: dict[str, Lever] | None = None
_broken: dict[str, str] = {}  # module name -> why it could not be imported


def _discover() -> dict[str, Lever]:
    global _discovered
    if _discovered is None:
        found: dict[str, Lever] = {}
        for info in pkgutil.iter_modules(__path__):
            if info.name in _NOT_LEVERS or info.name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"{__name__}.{info.name}")
            except Exception as exc:  # one broken lever must not hide the others
                _broken[info.name] = f"{type(exc).__name__}: {exc}"
                continue
            lever = getattr(module, "LEVER", None)
            if isinstance(lever, Lever):
                found[lever.name] = lever
        _discovered = found
    return _discovered


def register(lever: Lever) -> Lever:
    """Add (or replace) a lever declared outside experiments/; returns it for chaining."""
    _registered[lever.name] = lever
    return lever


def unregister(name: str) -> None:
    _registered.pop(name, None)


def all_levers() -> list[Lever]:
    levers = {**_discover(), **_registered}
    return [levers[name] for name in sorted(levers)]


def broken_modules() -> dict[str, str]:
    _discover()
    return dict(_broken)


def get(name: str) -> Lever:
    levers = {lever.name: lever for lever in all_levers()}
    if name in levers:
        return levers[name]
    known = ", ".join(levers) or "none"
    hint = f"; modules that failed to import: {', '.join(_broken)}" if _broken else ""
    raise UnknownNameError(f"unknown lever {name!r}; known levers: {known}{hint}")


def space_problems(space: dict) -> list[str]:
    """Why a search space cannot be sampled (empty list when it can)."""
    if not space:
        return ["the search space is empty"]
    problems = []
    for name, choices in space.items():
        if isinstance(choices, list):
            if not choices:
                problems.append(f"{name}: empty choice list")
        elif isinstance(choices, tuple) and len(choices) in (2, 3) and all(isinstance(v, int) for v in choices):
            low, high = choices[:2]
            if low > high or (len(choices) == 3 and choices[2] < 1):
                problems.append(f"{name}: bad int range {choices}")
        else:
            problems.append(f"{name}: expected a list of choices or an int (low, high[, step]) tuple, got {choices!r}")
    return problems


def check_space(lever: Lever) -> None:
    problems = space_problems(lever.space)
    if problems:
        raise SpaceError(f"lever {lever.name!r}: {'; '.join(problems)}")

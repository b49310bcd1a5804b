"""The call a user makes: `kernels.dispatch.mmq(w_packed, qtype, x)` -> C[T, M] float32.

It picks, for (qtype, the device's arch, the T regime), the promoted champion of the first
lever in LEVERS that has one (champions.json, written by `campaign promote`), and falls back
to mmq_base with its per-T heuristic where no champion exists. Variants are built once per
(family, params, qtype) and reused.
"""
from __future__ import annotations

import json

import numpy as np

from kernels.family import Problem, Workload

# most specialised first: a lever is only champion where it beat its incumbent
LEVERS = ("wgmma_i8", "wgmma", "adaptive_format", "fused_quant", "persistent_queue", "mmq_base")
_built: dict = {}


def choose(qtype: str, arch: str, T: int, champions_path=None) -> tuple[str, dict, str]:
    """(family, params, origin) the dispatcher runs for this workload."""
    import experiments
    from campaign import champions

    for lever in LEVERS:
        params = champions.lookup(lever, qtype, arch, T, path=champions_path)
        if params is not None:
            return experiments.get(lever).family, params, f"champion of {lever}"
    from kernels import mmq_base

    return "mmq_base", mmq_base.heuristic_params(T), "mmq_base heuristic (no champion)"


def mmq(w_packed: np.ndarray, qtype: str, x: np.ndarray, device=None, champions_path=None) -> np.ndarray:
    """C[T, M] = x[T, K] . dequant(W)[M, K]^T on the GPU with the dispatcher's choice."""
    from kernels import families
    from kernels.device import open_device

    device = device or open_device("cuda")
    x = np.ascontiguousarray(x, dtype=np.float32)
    T, K = x.shape
    family, params, _origin = choose(qtype, device.info["arch"], T, champions_path)
    key = (family, qtype, json.dumps(params, sort_keys=True))
    if key not in _built:
        _built[key] = families.get(family).build(params, qtype, device)
    bound = _built[key].prepare(Problem(Workload(qtype, w_packed.shape[0], K, T), w_packed, x))
    try:
        bound.run()
        return bound.output()
    finally:
        bound.release()

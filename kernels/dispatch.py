"""The call a user makes: `kernels.dispatch.mmq(w_packed, qtype, x)` -> C[T, M] float32.

It picks, for (qtype, the device's arch, the T regime), the promoted champion of the first
lever in LEVERS that has one (champions.json, written by `campaign promote`), and falls back
to mmq_base with its per-T heuristic where no champion exists. Variants are built once per
(family, params, qtype) and reused.

Activations quantized before the call (kernels.mmq_direct_q8.QuantizedActivations: a producer wrote them in the int8
GEMM's layout) go to the chosen kernel's q8_input form (mmq_direct_q8 Q8IN: the GEMM alone), where it has one.

Activations that arrive as float16 (a 16-bit model's) go to the f16 paths as they are: the champion
runs with X16_INPUT=1 and no conversion pass, the wgmma kernel reading the rows by TMA (XLOAD 2)
where its champion reads pass-tiled chunks or f32 rows -- the configuration `campaign bench`'s
`*_x16` lines time. The int8 paths quantize from float32, so f16 input is widened for them.

Per-shape levers (Lever.per_shape, e.g. adaptive_format) keep a champion per (M, K) shape as
well: with the weight's shape, the dispatcher takes that shape's record, else the nearest
promoted shape's (the origin says which). Any other lever may hold a shape's own record too
(`campaign promote --per-shape`: a variant that won that shape alone); it serves that shape, and
the lever's regime champion the others (the nearest shape's only where there is none). A
composite champion (a family with `route`, e.g. kernels/mmq_adaptive.py) names the one kernel it
runs at T, or declines (adaptive_format below its crossover T): the next lever in LEVERS then
decides, so the int8 side of the crossover is whichever int8 champion exists.
"""
from __future__ import annotations

import json

import numpy as np

from kernels.family import Problem, Workload

# most specialised first: a lever is only champion where it beat its incumbent (direct_q8: q4_K at few tokens, against
# the direct champion; direct: against the wgmma champion)
LEVERS = ("direct_q8", "direct", "wgmma_i8", "wgmma", "adaptive_format", "fused_quant", "persistent_queue", "mmq_base")
_built: dict = {}


def _champion(lever: str, qtype: str, arch: str, T: int, shape, path, card=None) -> tuple[str, dict, str] | None:
    """(family, params, where from) of the lever's champion: the shape's own record first, then per regime.
    The family is the record's own: a lever's family may have changed since it was promoted
    (adaptive_format's records of run 15 are plain mmq_f16 tiles, not the later composite)."""
    import experiments
    from campaign import champions

    found = champions.lookup_shaped(lever, qtype, arch, T, *shape, path=path, card=card) if shape else None
    own_shape = found is not None and tuple(champions.key_shape(found[0])) == tuple(shape)
    # another shape's record stands in only for a lever tuned per shape: one tuned per regime that won a shape apart
    # (campaign promote --per-shape) runs its regime's champion at the other shapes, where it has one
    if not (own_shape or (found and experiments.get(lever).per_shape)):
        record = champions.lookup_record(lever, qtype, arch, T, path=path, card=card)
        if record:
            return record["family"], dict(record["params"]), "regime"
    if found:
        (m, k), record = champions.key_shape(found[0]), found[1]
        return record["family"], dict(record["params"]), f"{'shape' if own_shape else 'nearest shape'} {m}x{k}"
    return None


def choose(qtype: str, arch: str, T: int, champions_path=None, M: int | None = None,
           K: int | None = None, card: str | None = None) -> tuple[str, dict, str]:
    """(family, params, origin) the dispatcher runs for this workload (M, K: the weight's
    shape, which per-shape champions need; without it only regime champions are used; card: the
    card it runs on, whose own champions (campaign promote --per-card) come before the arch's)."""
    from kernels import families

    shape = (M, K) if M and K else None
    for lever in LEVERS:
        found = _champion(lever, qtype, arch, T, shape, champions_path, card)
        if found is None:
            continue
        family, params, where = found
        route = getattr(families.get(family), "route", None)
        if route is not None:  # a composite: the one kernel it runs at T, or none
            routed = route(params, T)
            if routed is None:
                continue
            family, params = routed
        return family, params, f"champion of {lever} ({where})"
    from kernels import mmq_base

    return "mmq_base", mmq_base.heuristic_params(T, qtype), "mmq_base heuristic (no champion)"


def f16_input_params(family: str, params: dict) -> dict | None:
    """The chosen kernel's parameters for float16 activations (its family's `f16_input`), or None where
    the family reads float32 only."""
    from kernels import families

    f16_input = getattr(families.get(family), "f16_input", None)
    return f16_input(params) if f16_input else None


def q8_input_params(family: str, params: dict) -> dict | None:
    """The chosen kernel's parameters for activations that arrive quantized in its own layout (its family's `q8_input`:
    mmq_direct_q8's Q8IN), or None where it quantizes them itself only."""
    from kernels import families

    q8_input = getattr(families.get(family), "q8_input", None)
    return q8_input(params) if q8_input else None


def mmq(w_packed: np.ndarray, qtype: str, x, device=None, champions_path=None) -> np.ndarray:
    """C[T, M] = x[T, K] . dequant(W)[M, K]^T on the GPU with the dispatcher's choice; x float32, or
    float16 (read as it is by the f16 paths), or activations quantized before the call
    (kernels.mmq_direct_q8.QuantizedActivations, e.g. `.of(x)`: what a producer writing them hands over, run by the
    chosen kernel's q8_input form; ValueError where the chosen kernel has none)."""
    from kernels import families
    from kernels.device import open_device
    from kernels.mmq_direct_q8 import QuantizedActivations

    device = device or open_device("cuda")
    quantized = isinstance(x, QuantizedActivations)
    x = x if quantized else np.asarray(x)
    T, K = x.shape
    from campaign import champions

    family, params, _origin = choose(qtype, device.info["arch"], T, champions_path, M=w_packed.shape[0], K=K,
                                     card=champions.card_of(device.info))
    if quantized:
        q8 = q8_input_params(family, params)
        if q8 is None:
            raise ValueError(f"kernels.mmq: for {qtype} {w_packed.shape[0]}x{K} at T={T} the dispatcher runs {family}, "
                             f"which reads float32 activations and quantizes them itself: pass x as float32")
        params = q8
    else:
        x16 = f16_input_params(family, params) if x.dtype == np.float16 else None
        params = x16 or params
        x = np.ascontiguousarray(x, dtype=np.float16 if x16 else np.float32)
    key = (family, qtype, json.dumps(params, sort_keys=True))
    if key not in _built:
        _built[key] = families.get(family).build(params, qtype, device)
    bound = _built[key].prepare(Problem(Workload(qtype, w_packed.shape[0], K, T), w_packed, x))
    try:
        bound.run()
        return bound.output()
    finally:
        bound.release()

"""numpy pack/unpack of ggml block formats: q4_K, q5_K, q6_K, q8_0 weights (QTYPES), q8_1 activations.

    from kernels import quant
    qt = quant.get("q4_K")
    packed = qt.quantize(w)            # float32 [M, K] -> uint8 [M, K/256*144]
    w_hat = qt.dequantize(packed)      # bit-exact with gguf.quants.dequantize
    form = qt.decompose(packed)        # IntForm: w_hat == scale * q - minv (float32)
    xq = quant.quantize_q8_1(x)        # activations: Q8_1Act(q, d, s)
    xk = quant.quantize_q8_k(x)        # one scale per 256 (the direct_q8 kernel's), as a Q8_1Act
"""
from __future__ import annotations

from . import q4_k, q5_k, q6_k, q8_0
from .common import IntForm, QType
from .q8_1 import Q8_1Act, dequantize_q8_1, quantize_q8_1, quantize_q8_k

QTYPES: dict[str, QType] = {m.QTYPE.name: m.QTYPE for m in (q4_k, q5_k, q6_k, q8_0)}


def get(name: "str | QType") -> QType:
    """The QType called `name` ("q4_K", ...; case-insensitive); a QType is returned as is."""
    if isinstance(name, QType):
        return name
    if isinstance(name, str):
        for key, qtype in QTYPES.items():
            if key.lower() == name.lower():
                return qtype
    raise ValueError(f"unknown quant type {name!r}; supported: {', '.join(QTYPES)}")


__all__ = ["QTYPES", "get", "QType", "IntForm", "Q8_1Act", "quantize_q8_1", "dequantize_q8_1", "quantize_q8_k"]

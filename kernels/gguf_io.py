"""Read and write quantized 2-D tensors in .gguf files through the gguf package.

A tensor travels as (qtype name, packed uint8 [M, row_bytes], (M, K)): the raw ggml
block bytes, exactly what kernels.quant produces and the kernels consume.
Any unreadable file, missing name or unsupported type raises GGUFFormatError
(a ValueError) with one line naming the file and the problem.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf import GGUFReader, GGUFWriter

from kernels import quant

ARCH = "mmq-campaign"  # general.architecture of the files we write


class GGUFFormatError(ValueError):
    """A .gguf file (or a tensor in it) we cannot read or write; the message is one line."""


class TensorInfo(NamedTuple):
    name: str
    qtype: str  # a kernels.quant.QTYPES name
    shape: tuple[int, int]  # (M, K) in weights


_BY_GGML_TYPE = {qt.ggml_type: qt for qt in quant.QTYPES.values()}


def _add_metadata(writer: GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_int64(key, value)
    elif isinstance(value, float):
        writer.add_float64(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    else:
        raise GGUFFormatError(f"metadata {key!r}: unsupported value type {type(value).__name__} "
                              "(use bool, int, float or str)")


def _checked_tensor(name: str, entry: Any) -> tuple[quant.QType, np.ndarray]:
    try:
        qtype_name, packed, shape = entry
    except (TypeError, ValueError):
        raise GGUFFormatError(f"tensor {name!r}: expected (qtype, packed uint8 [M, row_bytes], (M, K))") from None
    try:
        qt = quant.get(qtype_name)
    except ValueError as err:
        raise GGUFFormatError(f"tensor {name!r}: {err}") from None
    if not isinstance(packed, np.ndarray) or packed.dtype != np.uint8 or packed.ndim != 2:
        raise GGUFFormatError(f"tensor {name!r}: packed bytes must be a 2-D uint8 array")
    m, k = (int(v) for v in shape)
    if k % qt.block or packed.shape != (m, qt.row_bytes(k)):
        raise GGUFFormatError(f"tensor {name!r}: packed shape {packed.shape} does not hold a {qt.name} "
                              f"matrix of shape ({m}, {k}) (expected ({m}, {qt.row_bytes(k)}))")
    return qt, np.ascontiguousarray(packed)


def write_gguf(path: str | os.PathLike, tensors: dict[str, tuple[Any, np.ndarray, tuple[int, int]]],
               metadata: dict[str, Any] | None = None) -> None:
    """Write quantized tensors {name: (qtype, packed, (M, K))} and optional scalar metadata.

    The file appears complete or not at all (written next to `path`, then renamed).
    """
    path = Path(path)
    checked = {name: _checked_tensor(name, entry) for name, entry in tensors.items()}
    tmp = path.with_name(path.name + ".partial")
    writer = GGUFWriter(tmp, arch=ARCH)
    try:
        for key, value in (metadata or {}).items():
            _add_metadata(writer, key, value)
        for name, (qt, packed) in checked.items():
            writer.add_tensor(name, packed, raw_dtype=qt.ggml_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise


def _open(path: str | os.PathLike) -> GGUFReader:
    path = Path(path)
    if not path.is_file():
        raise GGUFFormatError(f"{path}: no such file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise GGUFFormatError(f"{path}: not a GGUF file (no 'GGUF' magic at the start)")
    try:
        return GGUFReader(path)
    except Exception as err:  # the reader fails in many ways on a bad file (ValueError, IndexError, ...)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise GGUFFormatError(f"{path}: truncated or corrupt GGUF file of {path.stat().st_size} bytes "
                              f"(reader: {reason})") from None


def _info(path: str | os.PathLike, tensor: Any) -> tuple[quant.QType, TensorInfo]:
    qt = _BY_GGML_TYPE.get(tensor.tensor_type)
    type_name = getattr(tensor.tensor_type, "name", str(tensor.tensor_type))
    if qt is None:
        raise GGUFFormatError(f"{path}: tensor {tensor.name!r} has type {type_name}; "
                              f"supported: {', '.join(quant.QTYPES)}")
    dims = [int(v) for v in tensor.shape]  # ggml order: ne[0] = K first
    if len(dims) != 2:
        raise GGUFFormatError(f"{path}: tensor {tensor.name!r} is {len(dims)}-D, expected 2-D [M, K]")
    k, m = dims
    return qt, TensorInfo(tensor.name, qt.name, (m, k))


def list_tensors(path: str | os.PathLike) -> list[TensorInfo]:
    """Every tensor of the file in file order; one of an unsupported type or rank raises."""
    reader = _open(path)
    return [_info(path, t)[1] for t in reader.tensors]


def read_tensor(path: str | os.PathLike, name: str) -> tuple[str, np.ndarray, tuple[int, int]]:
    """(qtype name, packed uint8 [M, row_bytes] (a copy), (M, K)) of the tensor called `name`."""
    reader = _open(path)
    found = [t for t in reader.tensors if t.name == name]
    if not found:
        names = ", ".join(t.name for t in reader.tensors[:10]) or "none"
        raise GGUFFormatError(f"{path}: no tensor named {name!r} (has: {names})")
    tensor = found[0]
    qt, info = _info(path, tensor)
    m, k = info.shape
    data = np.asarray(tensor.data)
    if data.dtype != np.uint8 or data.size != m * qt.row_bytes(k):
        raise GGUFFormatError(f"{path}: tensor {name!r} data is truncated "
                              f"({data.size} of {m * qt.row_bytes(k)} bytes)")
    return qt.name, data.reshape(m, qt.row_bytes(k)).copy(), (m, k)

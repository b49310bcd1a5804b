"""GGUF round trips through gguf's writer and reader, and clear errors on bad files."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

from kernels import quant
from kernels.gguf_io import GGUFFormatError, TensorInfo, list_tensors, read_tensor, write_gguf


@pytest.fixture
def tensors():
    rng = np.random.default_rng(8)
    out = {}
    for i, (name, qt) in enumerate(quant.QTYPES.items()):
        m, k = 3 + i, 512
        out[f"blk.{i}.{name}"] = (name, qt.quantize(rng.standard_normal((m, k)).astype(np.float32)), (m, k))
    return out


@pytest.fixture
def gguf_file(tmp_path, tensors):
    path = tmp_path / "model.gguf"
    write_gguf(path, tensors, metadata={"campaign.seed": 8, "campaign.note": "test", "campaign.ok": True})
    return path


def one_line(info) -> str:
    message = str(info.value)
    assert "\n" not in message
    return message


def test_round_trip_all_types(gguf_file, tensors):
    for name, (qtype, packed, shape) in tensors.items():
        got_type, got_packed, got_shape = read_tensor(gguf_file, name)
        assert (got_type, got_shape) == (qtype, shape)
        assert got_packed.dtype == np.uint8 and np.array_equal(got_packed, packed)


def test_file_is_a_real_gguf(gguf_file, tensors):
    """gguf's own reader sees our types, ggml-order dims and metadata."""
    reader = GGUFReader(gguf_file)
    by_name = {t.name: t for t in reader.tensors}
    for name, (qtype, _, (m, k)) in tensors.items():
        assert by_name[name].tensor_type == quant.get(qtype).ggml_type
        assert [int(v) for v in by_name[name].shape] == [k, m]
    assert reader.get_field("campaign.note").contents() == "test"
    assert reader.get_field("campaign.seed").contents() == 8


def test_list_tensors(gguf_file, tensors):
    assert list_tensors(gguf_file) == [TensorInfo(n, q, s) for n, (q, _, s) in tensors.items()]


def test_dequantized_weights_survive_the_file(gguf_file, tensors):
    name = next(iter(tensors))
    qtype, packed, _ = read_tensor(gguf_file, name)
    assert np.array_equal(quant.get(qtype).dequantize(packed), quant.get(qtype).dequantize(tensors[name][1]))


@pytest.mark.parametrize("cut", ["empty", "in_magic", "in_counts", "in_metadata", "halfway", "last_data_byte"])
def test_truncated_file(gguf_file, tmp_path, cut):
    data = gguf_file.read_bytes()
    data_end = max(t.data_offset + t.n_bytes for t in GGUFReader(gguf_file).tensors)  # before end padding
    keep = {"empty": 0, "in_magic": 3, "in_counts": 20, "in_metadata": 120, "halfway": len(data) // 2,
            "last_data_byte": data_end - 1}[cut]
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(data[:keep])
    with pytest.raises(GGUFFormatError) as info:
        read_tensor(bad, "blk.0.q4_K")
    assert str(bad) in one_line(info)
    with pytest.raises(GGUFFormatError):
        list_tensors(bad)


def test_garbage_file(tmp_path):
    bad = tmp_path / "garbage.gguf"
    bad.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(GGUFFormatError, match="not a GGUF file") as info:
        read_tensor(bad, "x")
    one_line(info)


def test_corrupt_header(gguf_file, tmp_path):
    data = bytearray(gguf_file.read_bytes())
    data[8:24] = b"\xff" * 16  # tensor and key/value counts
    bad = tmp_path / "corrupt.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(GGUFFormatError, match="truncated or corrupt") as info:
        list_tensors(bad)
    one_line(info)


def test_missing_file_and_wrong_name(gguf_file, tmp_path):
    with pytest.raises(GGUFFormatError, match="no such file"):
        read_tensor(tmp_path / "absent.gguf", "x")
    with pytest.raises(GGUFFormatError, match="no tensor named 'nope'") as info:
        read_tensor(gguf_file, "nope")
    assert "blk.0.q4_K" in one_line(info)


def test_unsupported_tensor_type(tmp_path):
    path = tmp_path / "f32.gguf"
    writer = GGUFWriter(path, arch="test")
    writer.add_tensor("norm", np.ones((2, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFFormatError, match="type F32") as info:
        read_tensor(path, "norm")
    assert "q4_K" in one_line(info)


def test_write_rejects_bad_tensors_and_keeps_existing_file(gguf_file, tensors):
    before = gguf_file.read_bytes()
    qtype, packed, shape = tensors["blk.0.q4_K"]
    bad_entries = [
        {"x": ("q3_K", packed, shape)},
        {"x": (qtype, packed[:, :-1], shape)},
        {"x": (qtype, packed.astype(np.int8), shape)},
        {"x": (qtype, packed, (shape[0], shape[1] + 256))},
        {"x": (qtype, packed)},
    ]
    for entry in bad_entries:
        with pytest.raises(GGUFFormatError) as info:
            write_gguf(gguf_file, entry)
        one_line(info)
    with pytest.raises(GGUFFormatError, match="unsupported value type"):
        write_gguf(gguf_file, tensors, metadata={"bad": [1, 2]})
    assert gguf_file.read_bytes() == before
    assert [p.name for p in gguf_file.parent.iterdir()] == [gguf_file.name]  # no partial file left

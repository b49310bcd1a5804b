"""`campaign reference`: the formats + references on any machine, and one-line errors for bad
input (corrupt GGUF, NaN activations, K not a multiple of the block)."""
import numpy as np

from campaign import cli
from kernels import gguf_io, quant


def test_reference_on_a_gguf_tensor(tmp_path, capsys):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((48, 512)) * 0.05).astype(np.float32)
    path = tmp_path / "w.gguf"
    gguf_io.write_gguf(path, {"blk.0.ffn_up.weight": ("q6_K", quant.get("q6_K").quantize(w), w.shape)})
    assert cli.main(["reference", "--gguf", str(path), "--tensor", "blk.0.ffn_up.weight", "--T", "8"]) == 0
    out = capsys.readouterr().out
    assert "q6_K [48, 512]" in out
    rel = float(out.rsplit("relative difference (activation quantization error):", 1)[1])
    assert 0 < rel < 0.02


def _one_line_error(capsys, argv) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_bad_inputs_give_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    assert "corrupt GGUF" in _one_line_error(capsys, ["reference", "--gguf", str(bad), "--tensor", "w"])
    x = np.ones((4, 512), np.float32)
    x[2, 9] = np.nan
    np.save(tmp_path / "x.npy", x)
    assert "NaN" in _one_line_error(capsys, ["reference", "--M", "16", "--K", "512", "--x", str(tmp_path / "x.npy")])
    assert "multiple of the block" in _one_line_error(capsys, ["reference", "--M", "16", "--K", "500"])

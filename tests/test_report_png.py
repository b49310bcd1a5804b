"""Plots are saved as palette PNGs (campaign.report.save_png): the same image size at a fraction of the bytes, since
every device call's plots are kept in docs/sweeps and travel with each later call. Logged to a real sqlite MLflow
store at the artifact path asked for, nested or at the run's root."""
import io

from mlflow import MlflowClient
from PIL import Image

from campaign import report, tracking
from kernels.family import Workload


def _figure():
    ws = [Workload("q4_K", M=4096, K=14336, T=t) for t in (16, 64, 256, 1024, 4096)]
    series = {name: {w: scale * w.T ** 0.5 for w in ws} for name, scale in (("candidate", 3.0), ("incumbent", 2.5))}
    return report.tflops_figure(series, {}, "int", title="test")


def test_save_png_writes_a_palette_png_of_the_figure_smaller_than_a_plain_savefig(tmp_path):
    figure = _figure()
    plain = io.BytesIO()
    figure.savefig(plain, format="png", dpi=110)
    path = report.save_png(figure, tmp_path / "plot.png")
    with Image.open(path) as image, Image.open(plain) as reference:
        assert image.mode == "P" and image.size == reference.size
        colours = image.convert("RGB").getcolors(256)
        assert colours and len(colours) > 8  # lines, text and grid kept, not flattened to a few colours
    assert path.stat().st_size < 0.6 * len(plain.getvalue())
    report.close(figure)


def test_log_figure_puts_the_png_at_the_artifact_path_asked_for(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = tracking.Tracker(uri, artifact_root=tmp_path / "artifacts")
    run_id = tracker.start_run("r", tags={})
    figure = _figure()
    tracker.log_figure(run_id, figure, "plots/tflops_vs_T.png")
    tracker.log_figure(run_id, figure, "bench.png")
    client = MlflowClient(uri)
    assert [a.path for a in client.list_artifacts(run_id, "plots")] == ["plots/tflops_vs_T.png"]
    assert "bench.png" in [a.path for a in client.list_artifacts(run_id)]
    local = client.download_artifacts(run_id, "plots/tflops_vs_T.png", str(tmp_path / "down"))
    with Image.open(local) as image:
        assert image.format == "PNG" and image.mode == "P"
    report.close(figure)

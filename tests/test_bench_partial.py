"""campaign.bench keeps what it measured: a bench stopped by a step timeout loses no timed row."""
import pandas as pd

from campaign import bench
from experiments.cpu_demo import LEVER as CPU_DEMO
from kernels.device import open_device


def test_sweep_rows_reach_disk_workload_by_workload(tmp_path):
    partial = tmp_path / "bench.partial.csv"
    on_disk = []  # rows saved when each workload's progress line is printed (before its own save)
    line = bench.Line("cpu_demo", "cpu_demo", extra=tuple({**CPU_DEMO.fixed, **CPU_DEMO.defaults}.items()))
    sweep = bench.Sweep(shapes=[(128, 512)], Ts=[1, 16], types=["q4_K"], lines=[line])
    df = bench.run_sweep(open_device("cpu"), sweep, reps=3, warmup=1, partial_csv=partial,
                         progress=lambda msg: on_disk.append(len(pd.read_csv(partial)) if partial.exists() else 0))
    assert on_disk == [0, 1]
    saved = pd.read_csv(partial)
    assert len(saved) == len(df) == 2 and list(saved["T"]) == [1, 16] and (saved["tflops"] > 0).all()

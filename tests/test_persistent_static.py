"""CI (nvcc, no GPU): the persistent-queue MMQ (lever `persistent_queue`) compiles for sm_90 for
every type through the static gate (no local memory, IMMA in the SASS), its stream-K build
carries the per-tile arrival atomic, every tile order visits every tile exactly once (the order
code run on the host), and the launcher's choices (k chunks, parameter checks)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import experiments
from gates import static
from kernels import mmq_persistent, nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except nvcc.CompileError:
    HAVE_NVCC = False
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (CUDA toolkit not installed)")

ARCH = "sm_90"
TYPES = ("q4_K", "q5_K", "q6_K", "q8_0")
HOST_HARNESS = Path(__file__).resolve().parent / "cuda" / "tile_order_host.cu"


@needs_nvcc
def test_defaults_pass_the_static_gate_for_every_type():
    lever = experiments.get("persistent_queue")
    assert lever.types == TYPES
    result = static.compile_defaults(lever, ARCH)
    assert result.passed, result.reason
    for qtype in TYPES:
        assert result.numbers[f"{qtype}.sass_IMMA"] > 0
        assert result.numbers[f"{qtype}.spill_bytes"] == result.numbers[f"{qtype}.local_mem_ops"] == 0


def global_atomics(summary: dict) -> int:
    return sum(n for op, n in summary["sass_ops"].items() if op.startswith(("ATOMG", "RED")))


@needs_nvcc
def test_streamk_build_adds_the_arrival_atomic_without_local_memory():
    plain = mmq_persistent.FAMILY.compile_only({}, "q6_K", ARCH).summary()
    streamk = mmq_persistent.FAMILY.compile_only({"SPLIT_MODE": "streamk", "ORDER": "grouped"}, "q6_K", ARCH).summary()
    assert streamk["spill_store_bytes"] == streamk["local_mem_ops"] == 0
    assert streamk["sass_ops"].get("IMMA", 0) > 0
    assert global_atomics(plain) >= 2  # the queue claim and the finish count
    assert global_atomics(streamk) == global_atomics(plain) + 1  # a tile's chunk arrivals


@pytest.fixture(scope="module")
def tile_order_host(tmp_path_factory) -> Path:
    if not HAVE_NVCC:
        pytest.skip("nvcc not found (CUDA toolkit not installed)")
    exe = tmp_path_factory.mktemp("tile-order") / "tile_order_host"
    subprocess.run([nvcc.find_nvcc(), "-x", "c++", "-O2", "-std=c++17", f"-I{nvcc.CUDA_DIR}", "-o", str(exe),
                    str(HOST_HARNESS)], check=True, capture_output=True)
    return exe


def visit(exe: Path, order: str, group: int, n_row: int, n_tok: int) -> list[tuple[int, int]]:
    out = subprocess.run([str(exe), str(mmq_persistent.ORDERS[order]), str(group), str(n_row), str(n_tok)],
                         check=True, capture_output=True, text=True).stdout
    return [tuple(map(int, line.split())) for line in out.splitlines()]


@pytest.mark.parametrize("order", list(mmq_persistent.ORDERS))
@pytest.mark.parametrize("group", [1, 3, 8])
@pytest.mark.parametrize("n_row,n_tok", [(1, 1), (7, 4), (5, 13), (16, 3), (9, 1)])
def test_every_order_visits_every_tile_once(tile_order_host, order, group, n_row, n_tok):
    seq = visit(tile_order_host, order, group, n_row, n_tok)
    assert sorted(seq) == [(r, t) for r in range(n_row) for t in range(n_tok)]
    if order == "row":  # a weight row tile's token tiles are consecutive queue items
        assert seq == [(r, t) for r in range(n_row) for t in range(n_tok)]
    elif order == "token":
        assert seq == [(r, t) for t in range(n_tok) for r in range(n_row)]
    else:  # bands of `group` row tiles, each band's tiles consecutive, row tile fastest
        band_of = [r // group for r, _ in seq]
        assert band_of == sorted(band_of)
        first_band = seq[:min(group, n_row) * n_tok]
        assert [t for _, t in first_band] == sorted(t for _, t in first_band)


def test_choose_chunks_balances_the_queue():
    assert mmq_persistent.choose_chunks(264, 56, 132) == 1  # two full rounds already
    assert mmq_persistent.choose_chunks(32, 16, 132) == 4  # 128 items on 132 CTAs, 4 super-blocks each
    assert mmq_persistent.choose_chunks(3, 1, 132) == 1  # one super-block cannot be cut
    assert mmq_persistent.choose_chunks(3, 8, 132) == 4  # chunks keep >= 2 super-blocks
    assert mmq_persistent.choose_chunks(3, 8, 132, forced=3) == 3
    assert mmq_persistent.choose_chunks(3, 2, 132, forced=5) == 2  # never more chunks than super-blocks


def test_invalid_parameters_are_named():
    info = {"smem_per_block_optin": 227 * 1024}
    assert "ORDER='zigzag'" in mmq_persistent.invalid_reason({"ORDER": "zigzag"}, "q4_K", info)
    assert "SPLIT_MODE='full'" in mmq_persistent.invalid_reason({"SPLIT_MODE": "full"}, "q4_K", info)
    assert "CTAS_PER_SM=0" in mmq_persistent.invalid_reason({"CTAS_PER_SM": 0}, "q4_K", info)
    assert "multiple of 16*WARPS_M" in mmq_persistent.invalid_reason({"BM": 64, "WARPS_M": 8}, "q4_K", info)
    assert mmq_persistent.invalid_reason({"ORDER": "grouped", "SPLIT_MODE": "streamk"}, "q8_0", info) is None

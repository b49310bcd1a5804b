"""Named workload suites, declared as data: shapes x token counts, expanded per quant type.

A suite names the parity suite that checks it (small shapes with odd tile edges and one
or two K super-blocks), so every lever kind (dense, MoE) gets fitting parity shapes.

Also the shape arithmetic every report needs: T regimes (the champion key), bytes moved
and the roofline ceiling of a workload.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from campaign.errors import UnknownNameError
from kernels import moe_workloads, quant
from kernels.family import Workload
from kernels.moe_shapes import check_expert_shape

# T regime of a workload: the dispatcher picks a champion per (qtype, arch, regime).
# Bounds follow the tiles that win on the H200 (run 14): a 16-token tile at T <= 16, 64 up to 64,
# 128 up to 128, and above that the 256-token tile (split along K while it cannot fill the GPU).
# `huge` (T > 1024) was split from `large` after run 27: there the 256-token tiles run in more than
# one wave and the f16 activations (T x K x 2 bytes) outgrow L2, so the launch order pays (RASTER)
# where it cannot at T <= 1024, and a study must be able to promote it there alone.
# `decode` (T <= 8) was split from `tiny` after runs 93-94: launching the activation pass as a dependent of the kernel
# before it (direct_q8 PDL 2) wins 9-19 % at T = 1 and loses 3-12 % at T = 16 on two of three shapes, and one champion
# for both traded the one for the other (the bound 8 is not measured: only T = 1 and 16 were).
REGIMES: tuple[tuple[str, float], ...] = (
    ("decode", 8), ("tiny", 16), ("small", 64), ("medium", 128), ("large", 1024), ("huge", float("inf")))
# a regime split from another serves that one's champion until it has its own
INHERITS: dict[str, str] = {"huge": "large", "decode": "tiny"}


def regime(T: int) -> str:
    return next(name for name, upper in REGIMES if T <= upper)


def regime_chain(T: int) -> tuple[str, ...]:
    """The regimes whose champion serves T, nearest first: regime(T), then those it inherits from."""
    chain = [regime(T)]
    while chain[-1] in INHERITS:
        chain.append(INHERITS[chain[-1]])
    return tuple(chain)


@dataclass(frozen=True)
class Case:
    """One shape of a suite; expanded to a Workload for each quant type."""

    M: int
    K: int
    T: int
    n_experts: int = 0
    top_k: int = 0
    routing: str = "uniform"


def grid(shapes: list[tuple[int, int]], tokens: list[int], **moe) -> tuple[Case, ...]:
    """Every (M, K) shape at every token count T."""
    return tuple(Case(M, K, T, **moe) for (M, K), T in itertools.product(shapes, tokens))


@dataclass(frozen=True)
class Suite:
    name: str
    cases: tuple[Case, ...]
    parity: str  # the suite whose small shapes the parity gate checks
    description: str = ""
    types: tuple[str, ...] = ()  # quant types run when none are asked for; () = all the lever claims

    def expand(self, types: tuple[str, ...] | list[str]) -> tuple[list[Workload], list[str]]:
        """(workloads, skipped): every case for every type, except a (type, shape) the type cannot
        hold (K not whole blocks: DeepSeek-V2-Lite's K=1408 down projection for a K-quant), which
        is skipped with the block rule's one-line reason (one per type and shape), never silently."""
        out, skipped = [], {}
        for qtype in types:
            for c in self.cases:
                try:
                    check_expert_shape(qtype, c.M, c.K, f"suite {self.name}")
                except ValueError as exc:
                    skipped[str(exc)] = None
                    continue
                out.append(Workload(qtype, c.M, c.K, c.T, c.n_experts, c.top_k, c.routing))
        return out, list(skipped)

    def workloads(self, types: tuple[str, ...] | list[str]) -> list[Workload]:
        return self.expand(types)[0]

    def skipped(self, types: tuple[str, ...] | list[str]) -> list[str]:
        """Why the (type, shape) pairs that workloads() leaves out are left out."""
        return self.expand(types)[1]


DENSE_SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096))  # (M, K): Llama-8B-like projections
XOVER_TS = (16, 32, 64, 128, 256, 512, 1024, 2048)

_DENSE_PARITY = (  # each M, T and K value at least once; odd edges; 1 and 2 super-blocks
    Case(1, 256, 1), Case(37, 512, 5), Case(145, 256, 67),
    Case(145, 512, 1), Case(1, 512, 67), Case(37, 256, 67),
)

SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("parity", _DENSE_PARITY, parity="parity", description="small dense shapes for the parity gate"),
    Suite("cpu_tiny", grid([(128, 512)], [9, 13, 16]), parity="parity", types=("q4_K",),
          description="smoke test of the CPU demo: seconds per trial"),
    Suite("cpu_small", grid([(1024, 512), (256, 2048)], [1, 16, 64]), parity="parity", types=("q4_K", "q8_0"),
          description="the CPU demo's campaign suite"),
    Suite("dense", grid(list(DENSE_SHAPES), [16, 128, 512, 2048]), parity="parity",
          description="GPU dense prefill GEMMs (Llama-8B-like projections)"),
    # one T regime of the shape llama.cpp's MMQ was measured at: a study per regime, so each
    # regime gets its own champion (the dispatcher keys champions by regime)
    Suite("dense_tiny", grid([(4096, 14336)], [16]), parity="parity",
          description="llama.cpp anchor shape, T <= 16 (weight streaming, latency bound)"),
    # the gate/up projection's shape at T = 16, for a champion of that one shape (--per-shape): RELADD + ZPUB
    # took ~1 us off it and nothing off the anchor (perf log runs 144-145)
    Suite("dense_tiny_up", grid([(14336, 4096)], [16]), parity="parity",
          description="the gate/up projection shape (M 14336, K 4096), T = 16"),
    # the tiny regime's champion serves every shape (the dispatcher keys champions by type and regime,
    # not shape): a study that changes how K is split must see the shapes where the split differs
    Suite("dense_tiny_shapes", grid(list(DENSE_SHAPES), [1, 16]), parity="parity",
          description="the three dense shapes at T = 1 and 16 (the decode and tiny regimes, judged apart)"),
    Suite("dense_decode_shapes", grid(list(DENSE_SHAPES), [1]), parity="parity",
          description="the three dense shapes at T = 1 (the decode regime)"),
    Suite("dense_t16_shapes", grid(list(DENSE_SHAPES), [16]), parity="parity",
          description="the three dense shapes at T = 16 (the tiny regime)"),
    Suite("dense_small", grid([(4096, 14336)], [64]), parity="parity",
          description="llama.cpp anchor shape, T <= 64"),
    Suite("dense_medium", grid([(4096, 14336)], [128]), parity="parity",
          description="llama.cpp anchor shape, T <= 128"),
    Suite("dense_large", grid([(4096, 14336)], [256, 512, 1024, 4096]), parity="parity",
          description="llama.cpp anchor shape, T > 128 (compute bound; T=4096 is the huge regime's)"),
    Suite("dense_huge", grid([(4096, 14336)], [2048, 4096]), parity="parity",
          description="llama.cpp anchor shape, T > 1024 (several waves, activations past L2)"),
    # one T per regime: a lever's gain over its incumbent across the whole range in one study
    Suite("dense_span", grid([(4096, 14336)], [16, 64, 128, 1024]), parity="parity",
          description="llama.cpp anchor shape, one T per regime"),
    # one shape each, T dense around where the f16 path overtakes int8: adaptive_format's
    # crossover T is found per shape (a study per suite, champions keyed by shape)
    *(Suite(f"dense_xover_{M}x{K}", grid([(M, K)], list(XOVER_TS)), parity="parity",
            description=f"{M}x{K} from T=16 to 2048: where the f16 path overtakes int8")
      for M, K in DENSE_SHAPES),
)}
SUITES.update({name: moe_workloads.moe_suite(name) for name in moe_workloads.MOE_SUITE_NAMES})  # real MoE models


def get(name: str) -> Suite:
    """A suite of SUITES or one of the real-model MoE suites of kernels.moe_workloads."""
    if name in moe_workloads.MOE_SUITE_NAMES:
        return moe_workloads.moe_suite(name)
    if name not in SUITES:
        known = ", ".join(dict.fromkeys([*SUITES, *moe_workloads.MOE_SUITE_NAMES]))
        raise UnknownNameError(f"unknown workload suite {name!r}; known suites: {known}")
    return SUITES[name]


def weight_bytes(w: Workload) -> int:
    """The packed weights' bytes (every expert's for MoE)."""
    return w.M * quant.get(w.qtype).row_bytes(w.K) * max(1, w.n_experts)


def workload_bytes(w: Workload) -> float:
    """Bytes a GEMM must move at least: packed weights + float32 activations + float32 output."""
    weights = weight_bytes(w)
    rows_out = w.T * (w.top_k if w.is_moe else 1)
    return float(weights + w.T * w.K * 4 + rows_out * w.M * 4)


def roofline_tflops(w: Workload, peak_tflops: float, bandwidth_gbps: float) -> float:
    """min(compute peak, bandwidth x arithmetic intensity) in TFLOP/s."""
    return min(peak_tflops, bandwidth_gbps * 1e9 * w.flops / workload_bytes(w) / 1e12)


# Which measured peak bounds a family, by its arithmetic (its parity mode).
PEAK_BY_MODE = {"int": "int8_tops", "int_k": "int8_tops", "bf16": "bf16_tflops", "f16": "f16_tflops"}


def device_ceiling(w: Workload, ceilings: dict, mode: str) -> float | None:
    """The roofline TFLOP/s of w on a device with these measured ceilings, None when unknown.

    ceilings: {"int8_tops"|"bf16_tflops"|"f16_tflops": peak, "bandwidth_gbps": copy bandwidth}.
    """
    peak, bandwidth = ceilings.get(PEAK_BY_MODE.get(mode, "")), ceilings.get("bandwidth_gbps")
    if not peak or not bandwidth:
        return None
    return roofline_tflops(w, float(peak), float(bandwidth))


def metric_prefix(label: str) -> str:
    """A workload label as an MLflow metric prefix: 'q4_K M256 K512 T16' -> 'q4_K/M256/K512/T16'."""
    return label.replace(" ", "/")

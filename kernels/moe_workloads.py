"""MoE workload suites from real models' expert shapes, as data (campaign.workloads wires them in).

    moe_suite("moe_qwen3")              -> campaign.workloads.Suite
    moe_workloads("moe_qwen3", types)   -> [Workload], every shape checked against each type

Qwen3-30B-A3B-like: 128 experts, top-8, hidden 2048, expert FFN 768:
    gate/up M=768 K=2048 (8 super-blocks), down M=2048 K=768 (3 super-blocks).
DeepSeek-V2-Lite-like: 64 experts, top-6, hidden 2048, expert FFN 1408:
    gate/up M=1408 K=2048; down M=2048 K=1408 = 44 q8_0 blocks, which no K-quant can hold
    (K % 256 != 0): a suite with both shapes skips the K-quant down cases with the block rule as
    the reason (campaign.workloads.Suite.skipped), and moe_dsv2_lite_down is the q8_0-only suite.
Token counts T in {128, 512, 2048}, uniform and zipf routing, and a case where one expert gets
no token (routing kind "<kind>_empty", kernels.moe_routing).

moe_study is the small suite of a `campaign run moe_fusion` study (a few trials over every type
in one device call): the T=2048 cases where the weight re-reads matter, the skinny T=128 case
where the per-pair matvec is strongest, and DeepSeek's K=1408 down projection (q8_0 only).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.family import Workload

TOKENS = (128, 512, 2048)
ROUTINGS = ("uniform", "zipf")


@dataclass(frozen=True)
class MoeModel:
    name: str
    n_experts: int
    top_k: int
    hidden: int
    ffn: int

    @property
    def gate_up(self) -> tuple[int, int]:  # (M, K): hidden -> expert FFN
        return self.ffn, self.hidden

    @property
    def down(self) -> tuple[int, int]:  # (M, K): expert FFN -> hidden
        return self.hidden, self.ffn


QWEN3_30B_A3B = MoeModel("qwen3-30b-a3b", n_experts=128, top_k=8, hidden=2048, ffn=768)
DEEPSEEK_V2_LITE = MoeModel("deepseek-v2-lite", n_experts=64, top_k=6, hidden=2048, ffn=1408)


def _cases(model: MoeModel, shapes: list[tuple[int, int]]) -> tuple[dict, ...]:
    """Every shape x T x routing, plus one empty-expert case per shape at the middle T."""
    moe = {"n_experts": model.n_experts, "top_k": model.top_k}
    cases = [dict(M=M, K=K, T=T, routing=r, **moe) for (M, K) in shapes for T in TOKENS for r in ROUTINGS]
    cases += [dict(M=M, K=K, T=TOKENS[1], routing="zipf_empty", **moe) for (M, K) in shapes]
    return tuple(cases)


def _case(model: MoeModel, shape: tuple[int, int], T: int, routing: str) -> dict:
    return dict(M=shape[0], K=shape[1], T=T, routing=routing, n_experts=model.n_experts, top_k=model.top_k)


def _parity(M: int, K: int, T: int, E: int, top_k: int, routing: str) -> dict:
    return dict(M=M, K=K, T=T, n_experts=E, top_k=top_k, routing=routing)


# name -> (cases as Case kwargs, parity suite, default types, description)
_SUITES: dict[str, tuple[tuple[dict, ...], str, tuple[str, ...], str]] = {
    "moe_qwen3": (_cases(QWEN3_30B_A3B, [QWEN3_30B_A3B.gate_up, QWEN3_30B_A3B.down]), "parity_moe_real", (),
                  "Qwen3-30B-A3B-like expert GEMMs: E128 top-8, gate/up 768x2048, down 2048x768"),
    "moe_dsv2_lite": (_cases(DEEPSEEK_V2_LITE, [DEEPSEEK_V2_LITE.gate_up, DEEPSEEK_V2_LITE.down]), "parity_moe_mixed",
                      (), "DeepSeek-V2-Lite-like expert GEMMs: E64 top-6, gate/up 1408x2048, down 2048x1408 "
                          "(q8_0 only: K-quant cases skipped with the reason)"),
    "moe_dsv2_lite_down": (_cases(DEEPSEEK_V2_LITE, [DEEPSEEK_V2_LITE.down]), "parity_moe_k1408", ("q8_0",),
                           "DeepSeek-V2-Lite-like expert down GEMM 2048x1408: K % 256 != 0, q8_0 only"),
    # small parity shapes: odd M, T; 2 and 3 super-blocks; an empty first expert; zipf skew
    "parity_moe_real": ((_parity(37, 768, 33, 16, 4, "uniform_empty"), _parity(145, 512, 67, 8, 2, "zipf"),
                         _parity(64, 2048, 5, 8, 3, "zipf_empty")), "parity_moe_real", (),
                        "small MoE parity shapes with real K values and an expert without tokens"),
    "moe_study": ((_case(QWEN3_30B_A3B, QWEN3_30B_A3B.gate_up, 2048, "zipf"),
                   _case(QWEN3_30B_A3B, QWEN3_30B_A3B.down, 128, "uniform_empty"),
                   _case(DEEPSEEK_V2_LITE, DEEPSEEK_V2_LITE.down, 2048, "zipf")), "parity_moe_mixed", (),
                  "small study suite: Qwen3 gate/up T=2048 zipf, down T=128 with an empty expert, DeepSeek down "
                  "K=1408 T=2048 zipf (q8_0 only)"),
    # the real-K parity shapes plus the K=1408 ones (a K-quant skips those, with the reason)
    "parity_moe_mixed": ((_parity(37, 768, 33, 16, 4, "uniform_empty"), _parity(145, 512, 67, 8, 2, "zipf"),
                          _parity(64, 2048, 5, 8, 3, "zipf_empty"), _parity(37, 1408, 33, 8, 3, "zipf_empty"),
                          _parity(130, 1408, 9, 6, 2, "uniform")), "parity_moe_mixed", (),
                         "small MoE parity shapes, K=1408 ones included (q8_0 only)"),
    "parity_moe_k1408": ((_parity(37, 1408, 33, 8, 3, "zipf_empty"), _parity(130, 1408, 9, 6, 2, "uniform")),
                         "parity_moe_k1408", ("q8_0",), "small q8_0 MoE parity shapes with K=1408 (44 blocks)"),
}
MOE_SUITE_NAMES = tuple(_SUITES)


def _entry(name: str):
    if name not in _SUITES:
        raise ValueError(f"unknown MoE suite {name!r}; known: {', '.join(_SUITES)}")
    return _SUITES[name]


def moe_suite(name: str):
    """The named suite as a campaign.workloads.Suite (imported here, not at module load, so
    campaign.workloads may import this module without a cycle)."""
    from campaign.workloads import Case, Suite

    cases, parity, types, description = _entry(name)
    return Suite(name, tuple(Case(**c) for c in cases), parity=parity, description=description, types=types)


def moe_workloads(name: str, types: tuple[str, ...] | list[str] = ()) -> list[Workload]:
    """The suite's workloads for `types` (default: the suite's own types, else all four). A
    (type, shape) the type cannot hold is left out (Suite.skipped says why); a type left with no
    workload at all raises the ValueError naming the shape and the block rule."""
    _, _, default_types, _ = _entry(name)
    types = tuple(types) or default_types or ("q4_K", "q5_K", "q6_K", "q8_0")
    suite = moe_suite(name)
    out = suite.workloads(types)
    for qtype in types:
        if not any(w.qtype == qtype for w in out):
            raise ValueError("; ".join(r for r in suite.skipped([qtype])) or f"MoE suite {name}: no {qtype} workload")
    return out

"""Expert-weight bytes each MoE approach reads for one routing: the number behind the
`moe_fusion` goal "weight bytes read / unique weight bytes <= 1.2x at T=2048".

Counted at the kernel's global loads (what its schedule asks of L2/HBM, not what L2 hides):
    unique          every expert with >= 1 token, once: the floor any approach must pay
    matvec          one full expert read per routed (t, slot) pair (moe_matvec, the seeds' engine)
    fused           a grouped GEMM over the work list: each (expert, token tile) item reads all
                    row tiles of its expert, so expert e is read ceil(c_e / token_tile) times
    fused_resident  an expert's row tile kept in shared memory across all its token tiles
                    (the persistent-kernel schedule): = unique
    dequant_cublas  packed expert read once by the dequant pass, then its bf16 copy
                    (2 bytes per weight) read by the matmul; the bf16 write is not a read
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels import quant
from kernels.moe_routing import tiles_per_expert
from kernels.moe_shapes import check_expert_shape


def expert_bytes(qtype: str, M: int, K: int) -> int:
    """Packed bytes of one expert's [M, K] weight."""
    check_expert_shape(qtype, M, K, "weight traffic")
    return M * quant.get(qtype).row_bytes(K)


@dataclass(frozen=True)
class WeightTraffic:
    expert_bytes: int
    n_routed: int  # routed (t, slot) pairs
    active_experts: int  # experts with >= 1 token
    token_tile: int
    unique_bytes: int
    matvec_bytes: int
    fused_bytes: int
    fused_resident_bytes: int
    dequant_cublas_bytes: int

    def ratio(self, approach: str) -> float:
        """Weight bytes `approach` reads / unique weight bytes (1.0 is the floor)."""
        return getattr(self, f"{approach}_bytes") / self.unique_bytes

    def as_metrics(self, prefix: str = "weight_traffic") -> dict[str, float]:
        """Flat numbers for the perf log: bytes and the ratio of each approach."""
        out = {f"{prefix}/unique_bytes": float(self.unique_bytes),
               f"{prefix}/active_experts": float(self.active_experts)}
        for approach in APPROACHES:
            out[f"{prefix}/{approach}_bytes"] = float(getattr(self, f"{approach}_bytes"))
            out[f"{prefix}/{approach}_ratio"] = self.ratio(approach)
        return out


APPROACHES = ("matvec", "fused", "fused_resident", "dequant_cublas")


def weight_traffic(counts: np.ndarray, qtype: str, M: int, K: int, token_tile: int) -> WeightTraffic:
    """Expert-weight bytes read per approach, for per-expert token counts (bucket()'s counts)."""
    counts = np.asarray(counts, dtype=np.int64)
    one = expert_bytes(qtype, M, K)
    active = int(np.count_nonzero(counts))
    if active == 0:
        raise ValueError("weight traffic: no expert has a token")
    unique = active * one
    return WeightTraffic(
        expert_bytes=one,
        n_routed=int(counts.sum()),
        active_experts=active,
        token_tile=token_tile,
        unique_bytes=unique,
        matvec_bytes=int(counts.sum()) * one,
        fused_bytes=int(tiles_per_expert(counts, token_tile).sum()) * one,
        fused_resident_bytes=unique,
        dequant_cublas_bytes=unique + active * M * K * 2,
    )

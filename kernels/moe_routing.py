"""MoE routing on the host (numpy): which experts each token uses, the tokens grouped by
expert, and the tile work list a grouped expert GEMM consumes.

    ids = make_routing(T, n_experts, top_k, "zipf", rng)      # int32 [T, top_k], distinct per row
    counts, offsets, order = bucket(ids, n_experts)           # histogram, prefix sum, stable grouping
    work = build_work_list(counts, token_tile=64)             # int32 [n_tiles, 3]

A routed pair (t, slot) is named by its flat index p = t * top_k + slot, the row of the output
Y viewed as [T * top_k, M]. `order` lists the flat indices grouped by expert, ascending within
an expert (a stable sort); expert e owns order[offsets[e]:offsets[e + 1]].

kernels/cuda/moe_route.cu computes the same three arrays and the work list on the GPU
(kernels.moe_route_gpu launches it); its scatter is deterministic and equal to these.
"""
from __future__ import annotations

import numpy as np

ROUTING_KINDS = ("uniform", "zipf")
EMPTY_SUFFIX = "_empty"  # "zipf_empty": the routing kind, with expert EMPTY_EXPERT forced to get no token
EMPTY_EXPERT = 0  # the first bucket: the prefix-sum edge (offsets[0] == offsets[1] == 0)
ZIPF_S = 1.0
WORK_FIELDS = ("expert", "token_offset", "token_count")


def parse_routing(kind: str) -> tuple[str, int | None]:
    """'zipf_empty' -> ('zipf', EMPTY_EXPERT); 'uniform' -> ('uniform', None)."""
    base, empty = kind, None
    if kind.endswith(EMPTY_SUFFIX):
        base, empty = kind[: -len(EMPTY_SUFFIX)], EMPTY_EXPERT
    if base not in ROUTING_KINDS:
        known = ", ".join(k + s for k in ROUTING_KINDS for s in ("", EMPTY_SUFFIX))
        raise ValueError(f"unknown routing kind {kind!r}; known: {known}")
    return base, empty


def expert_popularity(n_experts: int, kind: str, rng: np.random.Generator, zipf_s: float = ZIPF_S) -> np.ndarray:
    """float64 [n_experts], sums to 1. Zipf: p ~ 1 / rank^s with the ranks shuffled over the
    experts (a hot expert is not always expert 0, so no kernel can lean on the index order)."""
    if kind == "uniform":
        return np.full(n_experts, 1.0 / n_experts)
    if kind == "zipf":
        p = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** zipf_s
        return rng.permutation(p) / p.sum()
    raise ValueError(f"unknown routing kind {kind!r}; known: {', '.join(ROUTING_KINDS)}")


def make_routing(T: int, n_experts: int, top_k: int, kind: str = "uniform",
                 rng: np.random.Generator | None = None, *, empty_expert: int | None = None,
                 zipf_s: float = ZIPF_S) -> np.ndarray:
    """int32 [T, top_k]: top_k distinct experts per token, drawn without replacement from the
    kind's popularity ('uniform', 'zipf', or either with the '_empty' suffix). `empty_expert`
    (or the suffix) forces that expert to get no token at all.

    Sampling without replacement in one vectorized step (Gumbel top-k): the top_k largest
    log p_e + Gumbel noise are distributed as successive draws proportional to p.
    """
    rng = rng if rng is not None else np.random.default_rng()
    base, suffix_empty = parse_routing(kind)
    empty = empty_expert if empty_expert is not None else suffix_empty
    usable = n_experts - (empty is not None)
    if T < 1 or n_experts < 1 or not 1 <= top_k <= usable:
        raise ValueError(f"routing: need T >= 1 and 1 <= top_k <= {usable} usable experts, "
                         f"got T={T}, n_experts={n_experts}, top_k={top_k}")
    if empty is not None and not 0 <= empty < n_experts:
        raise ValueError(f"routing: empty expert {empty} outside 0..{n_experts - 1}")
    p = expert_popularity(n_experts, base, rng, zipf_s)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    if empty is not None:
        log_p[empty] = -np.inf
    keys = log_p[None, :] + rng.gumbel(size=(T, n_experts))
    top = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    # slot 0 holds the strongest key, as a router's top-k does
    rank = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, rank, axis=1).astype(np.int32)


def make_routing_weights(T: int, top_k: int, rng: np.random.Generator) -> np.ndarray:
    """float32 [T, top_k]: positive gate weights summing to 1 per token (softmax of normals)."""
    z = rng.standard_normal((T, top_k))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def check_ids(ids: np.ndarray, n_experts: int, who: str = "routing") -> np.ndarray:
    """ids as C-contiguous int32 [T, top_k] with every entry in [0, n_experts), or a ValueError."""
    if not isinstance(ids, np.ndarray) or ids.ndim != 2 or ids.size == 0:
        raise ValueError(f"{who}: expected routing ids as a non-empty int array [T, top_k], got "
                         f"{getattr(ids, 'shape', type(ids).__name__)}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"{who}: routing ids must be integers, got dtype {ids.dtype}")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= n_experts:
        raise ValueError(f"{who}: routing ids span [{lo}, {hi}], outside the {n_experts} experts")
    return np.ascontiguousarray(ids, dtype=np.int32)


def bucket(ids: np.ndarray, n_experts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts int32 [E], offsets int32 [E + 1], order int32 [T * top_k]).

    counts: routed pairs per expert (the histogram); offsets: its exclusive prefix sum with the
    total appended; order: flat pair indices t * top_k + slot grouped by expert, ascending within
    each expert, so expert e's pairs are order[offsets[e]:offsets[e + 1]].
    """
    flat = check_ids(ids, n_experts, "bucket").reshape(-1)
    counts = np.bincount(flat, minlength=n_experts).astype(np.int32)
    offsets = np.zeros(n_experts + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    order = np.argsort(flat, kind="stable").astype(np.int32)
    return counts, offsets, order


# ---------------------------------------------------------------- work list of a grouped GEMM

def work_list_capacity(n_routed: int, n_experts: int, token_tile: int) -> int:
    """Most tiles any routing of n_routed pairs over n_experts can need: each expert adds at
    most one partial tile, and no tile is empty. A kernel sized by it needs no host round-trip."""
    if token_tile < 1:
        raise ValueError(f"work list: token_tile must be >= 1, got {token_tile}")
    return min(n_routed, (n_routed + n_experts * (token_tile - 1)) // token_tile)


def tiles_per_expert(counts: np.ndarray, token_tile: int) -> np.ndarray:
    """int64 [E]: ceil(counts / token_tile), the token tiles each expert's bucket is cut into."""
    if token_tile < 1:
        raise ValueError(f"work list: token_tile must be >= 1, got {token_tile}")
    return -(-np.asarray(counts, dtype=np.int64) // token_tile)


def build_work_list(counts: np.ndarray, token_tile: int) -> np.ndarray:
    """int32 [n_tiles, 3] rows (expert, token_offset, token_count), expert-major.

    Expert e's bucket of counts[e] pairs is cut into ceil(counts[e] / token_tile) tiles; a tile
    covers bucket positions [token_offset, token_offset + token_count) of `order` (absolute
    positions, i.e. offsets[e] + i * token_tile), token_count <= token_tile, > 0. Experts with
    no token get no tile. The GPU builds the same list (moe_route_scan), padded to
    work_list_capacity with (-1, n_routed, 0) rows; the host version costs a copy of counts.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or (counts < 0).any():
        raise ValueError(f"work list: counts must be a 1-D array of non-negative ints, got {counts!r}")
    tiles = tiles_per_expert(counts, token_tile)
    expert = np.repeat(np.arange(counts.size), tiles)
    first_tile = np.concatenate([[0], np.cumsum(tiles)[:-1]])
    local = np.arange(int(tiles.sum())) - first_tile[expert]  # tile index within its expert
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    offset = starts[expert] + local * token_tile
    count = np.minimum(token_tile, counts[expert] - local * token_tile)
    return np.stack([expert, offset, count], axis=1).astype(np.int32).reshape(-1, 3)


def routing_for(workload, rng: np.random.Generator) -> np.ndarray:
    """make_routing for an MoE Workload (its T, n_experts, top_k and routing kind)."""
    return make_routing(workload.T, workload.n_experts, workload.top_k, workload.routing, rng)

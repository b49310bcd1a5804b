"""Lever `persistent_queue`: the mmq_base tile, scheduled by resident CTAs (sm_count x
CTAS_PER_SM) that claim work items from an atomic queue, in row-major (a weight row tile stays
in L2 across its token tiles), token-major or grouped order; for small T optionally stream-K
style k chunks reduced in the kernel by each tile's last chunk. It must beat mmq_base."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_persistent

LEVER = Lever(
    name="persistent_queue",
    family="mmq_persistent",
    backend="cuda",
    space={
        **MMQ_BASE.space,
        "CTAS_PER_SM": [1, 2],
        "ORDER": list(mmq_persistent.ORDERS),
        "SPLIT_MODE": list(mmq_persistent.SPLIT_MODES),
    },
    fixed={"SPLITK": 0, "GROUP_ROWS": 8, "CTAS": 0},
    defaults={**MMQ_BASE.defaults, "CTAS_PER_SM": 1, "ORDER": "row", "SPLIT_MODE": "none"},
    suite="dense",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    valid=lambda params, info, qtype: mmq_persistent.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA",),
    description="mmq_base tile on persistent CTAs with an atomic tile queue (tile order, stream-K k chunks)",
)

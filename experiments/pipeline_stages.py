"""Lever `pipeline_stages`: the mmq_base kernel with its cp.async ring deepened -- STAGES raw
stages (weight bytes, Q8_1 activations and scales of one 256-k super-block each) in flight while
the current one is unpacked and multiplied, one commit group per super-block and
`cp.async.wait_group STAGES-2` before each (mmq_core.cuh). STAGES=1 (synchronous staging) is
mmq_base's own option; here the search is over the depth and the tile that the extra shared
memory leaves room for. It must beat mmq_base."""
from experiments.base import Lever
from experiments.mmq_base import LEVER as MMQ_BASE
from kernels import mmq_base

LEVER = Lever(
    name="pipeline_stages",
    family="mmq_base",
    backend="cuda",
    space={**MMQ_BASE.space, "STAGES": [2, 3, 4]},
    fixed=MMQ_BASE.fixed,
    defaults={**MMQ_BASE.defaults, "STAGES": 3},
    suite="dense_span",
    types=MMQ_BASE.types,
    incumbent="mmq_base",
    valid=lambda params, info, qtype: mmq_base.invalid_reason(params, qtype, info),
    margin=0.02,
    sass_claims=("IMMA", "LDGSTS"),
    description="mmq_base with a 2-4 deep cp.async staging ring (LDGSTS), searched with the tile",
)

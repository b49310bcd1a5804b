"""CI's static gate over every registered CUDA lever: its default configuration compiles with
nvcc for sm_90 for every type it claims, with no spills or local memory, its dynamic shared
memory within the sm_90 limit, and the tensor-core instructions it claims present in SASS."""
import pytest

import experiments
from gates import static

CUDA_LEVERS = [lv.name for lv in experiments.all_levers() if lv.backend == "cuda"]


def test_every_kernel_lever_is_covered():
    assert {"mmq_base", "dequant_cublas", "pipeline_stages", "adaptive_format", "persistent_queue",
            "moe_fusion", "wgmma", "fused_quant", "direct"} <= set(CUDA_LEVERS)


@pytest.mark.parametrize("name", CUDA_LEVERS)
def test_static_gate_passes_for_the_defaults(name):
    lever = experiments.get(name)
    result = static.compile_defaults(lever, "sm_90")
    assert result.passed, result.line()
    for qtype in lever.types:  # one type's verdict carries its numbers unprefixed (gates.result.merge)
        prefix = f"{qtype}." if len(lever.types) > 1 else ""
        for op in lever.sass_claims:
            assert result.numbers[f"{prefix}sass_{op}"] > 0

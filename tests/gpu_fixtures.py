"""The `gpu_device` fixture for tests marked `gpu`: the CUDA device, or a clean skip naming
why there is none (no PyCUDA, no driver, no GPU). Import it where it is used:

    from tests.gpu_fixtures import gpu_device  # noqa: F401  (fixture)
"""
import pytest

from campaign.errors import NoGPUError


@pytest.fixture(scope="session")
def gpu_device():
    from kernels import cuda_runtime

    try:
        return cuda_runtime.open_cuda_device()
    except NoGPUError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def gpu_torch(gpu_device):
    """(torch, torch.device) on the same primary context, or a skip when torch is missing."""
    from kernels import cuda_runtime

    pytest.importorskip("torch", reason="torch (the cuBLAS baseline) is not installed")
    return cuda_runtime.torch_device(gpu_device)


def run_poisoned(bound):
    """One launch into a NaN-poisoned output: unwritten elements stay NaN."""
    bound.poison()
    bound.run()
    return bound.output()


def run_once(variant, problem):
    """Prepare `problem` on fresh buffers, run it once poisoned, release, return C."""
    bound = variant.prepare(problem)
    try:
        return run_poisoned(bound)
    finally:
        bound.release()

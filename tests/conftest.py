import jax
import pytest


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats (convergence to 1e-8, autodiff vs closed forms)."""
    with jax.enable_x64(True):
        yield

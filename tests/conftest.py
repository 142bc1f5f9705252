import jax
import pytest


@pytest.fixture
def x64():
    """Run the test body with 64-bit floats (convergence to 1e-8, autodiff vs closed forms)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_caches():
    """Drop compiled programs after each test module: the suite compiles hundreds of programs, and
    keeping them all alive in one process ended in a segmentation fault inside XLA's compiler (in
    test_training, after the SDL and covariance modules) although every module passes on its own."""
    yield
    jax.clear_caches()
    import gc
    gc.collect()

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


@pytest.fixture(autouse=True, scope="session")
def _no_one_cpu_device_hint():
    """sweep.run's once-per-process hint about JAX's single CPU device is for users; the suite
    checks it in test_sweep and keeps it out of every other test's output."""
    from lowrank_jax import sweep
    sweep._hinted_one_cpu_device = True
    yield


class RecordingBar:
    """Stands in for a tqdm bar: records the total, the position and every update."""

    def __init__(self, total):
        self.total, self.n, self.updates, self.closed = total, 0, [], False

    def update(self, k=1):
        self.n += k
        self.updates.append(k)

    def set_postfix(self, **kwargs):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def recorded_bars(monkeypatch):
    """``progress.bar`` replaced by a recorder: the list of the bars opened since (a
    :class:`RecordingBar` each, ``progress.NoBar`` where the caller asked for no bar)."""
    from lowrank_jax import progress
    bars = []

    def bar(total, desc, unit, show=True):
        bars.append(RecordingBar(total) if show else progress.NoBar())
        return bars[-1]

    monkeypatch.setattr(progress, "bar", bar)
    return bars

import os
import shutil
import tempfile

import pytest

# An on-disk cache of compiled XLA programs for the run. Most of the suite's time is XLA compiling,
# and many programs come back within a worker: in another test file (each module drops its in-memory
# caches, see below) and in the processes its tests start (notebook kernels, the demo, the 8-device
# runs), which inherit the directory. Each xdist worker has a directory of its own: JAX writes
# entries without a lock, and the other worker could read one half written. The directories are
# made fresh for each run and removed after it, so every run compiles from scratch as CI does; an
# entry is keyed on the program's HLO, the compile options, the backend and the JAX version, so a
# hit never changes a result. Set before JAX is imported here: JAX reads these variables once.
_BASE, _OWNER = "LOWRANK_JAX_TEST_XLA_CACHE", "LOWRANK_JAX_TEST_XLA_CACHE_OWNER"
if "JAX_COMPILATION_CACHE_DIR" not in os.environ or _BASE in os.environ:
    if _BASE not in os.environ:
        os.environ[_BASE] = tempfile.mkdtemp(prefix="lowrank-jax-xla-")
        os.environ[_OWNER] = str(os.getpid())
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(
        os.environ[_BASE], os.environ.get("PYTEST_XDIST_WORKER", "main")
    )
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Source locations in the lowered programs without the whole Python stack of each operation: tracing
# and lowering took 10-12 % less time in test_sdl, and test_regression plus test_contract ran 7 %
# faster. Only what debugging output shows of a program changes.
os.environ.setdefault("JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", "false")
os.environ.setdefault("JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "0")

# XLA:CPU compiles the suite's programs at LLVM optimisation level 0, without LLVM's expensive
# passes, with XLA's older elemental fusion emitters instead of its MLIR ones, and as one LLVM
# module (no split for parallel code generation, whose threads cost more than they save on 2
# cores). Most of the suite's time is XLA compiling (78 % of the test time in test_sdl,
# test_regression, test_rpca and test_contract on the 2-core machine); the first three flags halve
# it: the whole suite on that machine, two workers, went from 20m41 with level 1 and the MLIR
# emitters to 10m19, all tests passing in both. The single module takes another 12 % off
# test_contract's time (17 % of its CPU time). Programs run somewhat slower; the suite's programs
# are small, so it finishes sooner. Code generated this way can round differently from XLA's
# default, which users get (operations fused or ordered otherwise): the suite passes at these flags
# and at level 1 with the MLIR emitters.
# LOWRANK_JAX_TEST_XLA_FLAGS replaces these flags (set it empty for XLA's default). They are
# appended to any XLA_FLAGS already set, and the processes the tests start (notebooks, the demo, the
# multi-device runs) inherit them.
COMPILE_FLAGS = os.environ.get(
    "LOWRANK_JAX_TEST_XLA_FLAGS",
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    " --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1",
)
_flags = os.environ.get("XLA_FLAGS", "")
_missing = [f for f in COMPILE_FLAGS.split() if f.split("=")[0] not in _flags]
if _missing:
    os.environ["XLA_FLAGS"] = " ".join([_flags] + _missing).strip()

import jax  # noqa: E402

# In case a plugin imported JAX before this file: the same settings through its config.
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update(
    "jax_persistent_cache_min_compile_time_secs",
    float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
)
jax.config.update(
    "jax_include_full_tracebacks_in_locations",
    os.environ["JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS"].lower() in ("1", "true"),
)
jax.config.update(
    "jax_traceback_in_locations_limit", int(os.environ["JAX_TRACEBACK_IN_LOCATIONS_LIMIT"])
)


def pytest_unconfigure(config):
    if os.environ.get(_OWNER) == str(os.getpid()):
        shutil.rmtree(os.environ[_BASE], ignore_errors=True)


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


# The test files that take longest (compiling most), first: xdist hands files to the two workers in
# collection order, and a long file collected last (test_rpca, test_sdl come late alphabetically)
# ran alone on one worker for the last quarter of the run while the other stood idle. The order is
# that of a measured run (`pytest --junitxml`, time per file).
_LONGEST_FIRST = (
    "test_sdl.py",
    "test_regression.py",
    "test_rpca.py",
    "test_notebooks.py",
    "test_contract.py",
    "test_pathnorm_prox.py",
    "test_covariance_nn.py",
    "test_docstring_examples.py",
    "test_pathnorm.py",
    "test_linalg.py",
    "test_checks.py",
    "test_training.py",
    "test_demo.py",
    "test_sweep.py",
    "test_multidevice.py",
    "test_covariance_baselines.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))

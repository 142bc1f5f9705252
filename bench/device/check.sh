#!/usr/bin/env bash
# The test suite and the sweep benchmark on whatever accelerator JAX sees (a GPU machine whose
# Python already holds jax with its CUDA plugin, equinox, optax, chex, pytest-xdist, hypothesis,
# scikit-learn, matplotlib and tqdm; nothing is installed). The package is imported from this
# checkout through PYTHONPATH. Logs go to $OUT (default: build/device) so a run cut short still
# leaves what it printed.
#
#   bash bench/device/check.sh [SECONDS_FOR_THE_SUITE]
#
# 1. the 64-point sweep benchmark on that device;
# 2. k-th largest selection by counting and by sorting, and ScaledGD's sweep (device_selection_probe);
# 3. how far a rank-deficient design's Hessian lands from singular there (device_rounding_probe);
# 4. the notebooks as plain scripts, all five at once (scripts/run_notebooks_plain.py: the device
#    machines have no Jupyter kernel, so tests/test_notebooks.py would skip there);
# 5. the suite, in parallel workers that share the one GPU (no preallocation), with JAX's default
#    float32 matmul precision. Left out: the notebooks (step 4), the multi-device tests (simulated
#    CPU devices, the same on any machine) and the demo (238 s of one worker beside 14 others on an
#    H200, which alone kept the suite from finishing within 290 s; 77 s beside 11 workers on
#    lighter files: run tests/test_demo.py on its own when the lease allows);
# 6. the tests that failed, again with float32 matmuls at full precision
#    (JAX_DEFAULT_MATMUL_PRECISION=highest), which tells precision from other failures.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/device}
mkdir -p "$OUT"
SUITE_S=${1:-300}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
WORKERS=${WORKERS:-15}

{ nvidia-smi -L; $PY -c 'import jax, jaxlib, equinox, optax; print("jax", jax.__version__, "equinox",
  equinox.__version__, "optax", optax.__version__, jax.devices())'; } 2>&1 | tee "$OUT/env.txt"

# the three short measurements first, so that a suite cut short by the lease still leaves them
# (in two processes: one took 99 s for the first four families on an H200, compilation included)
timeout -s INT 120 $PY bench/bench_sweep.py --reps 2 --only ScaledGD LRPCA Newton SDL 2>&1 | tee "$OUT/bench_sweep.txt"
timeout -s INT 60 $PY bench/bench_sweep.py --reps 2 --only covariance path-norm 2>&1 | tee -a "$OUT/bench_sweep.txt"

timeout -s INT 60 $PY bench/device/selection_probe.py --batches 8 64 2>&1 | tee "$OUT/selection.txt"

timeout -s INT 40 $PY bench/device/rounding_probe.py 2>&1 | tee "$OUT/rounding.txt"

timeout -s INT 150 $PY scripts/run_notebooks_plain.py "$OUT/notebooks" 2>&1 | tee "$OUT/notebooks.txt"

SKIP="--ignore tests/test_notebooks.py --ignore tests/test_multidevice.py --ignore tests/test_demo.py"
timeout -s INT "$SUITE_S" $PY -m pytest -q -n "$WORKERS" --dist load -o cache_dir=/tmp/device_pytest_cache \
  $SKIP -rfE --durations 15 tests 2>&1 | tee "$OUT/suite.txt"

JAX_DEFAULT_MATMUL_PRECISION=highest timeout -s INT 90 $PY -m pytest -q -n 8 --dist load \
  -o cache_dir=/tmp/device_pytest_cache --lf --lfnf none $SKIP -rfE tests 2>&1 \
  | tail -n 40 | tee "$OUT/suite_highest.txt"


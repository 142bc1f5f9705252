#!/usr/bin/env bash
# The test suite and the sweep benchmark on whatever accelerator JAX sees (a GPU machine whose
# Python already holds jax with its CUDA plugin, equinox, optax, chex, pytest-xdist, hypothesis,
# scikit-learn, matplotlib and tqdm; nothing is installed). The package is imported from this
# checkout through PYTHONPATH. Logs go to $OUT (default: build/device) so a run cut short still
# leaves what it printed.
#
#   bash scripts/device_check.sh [SECONDS_FOR_THE_SUITE]
#
# 1. the suite (the notebooks left out: they need a Jupyter kernel), in parallel workers that share
#    the one GPU (no preallocation), with JAX's default float32 matmul precision;
# 2. the tests that failed, again with float32 matmuls at full precision
#    (JAX_DEFAULT_MATMUL_PRECISION=highest), which tells precision from other failures;
# 3. the 64-point sweep benchmark on that device;
# 4. k-th largest selection by counting and by sorting, and ScaledGD's sweep (device_selection_probe).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/device}
mkdir -p "$OUT"
SUITE_S=${1:-300}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
WORKERS=${WORKERS:-12}

{ nvidia-smi -L; $PY -c 'import jax, jaxlib, equinox, optax; print("jax", jax.__version__, "equinox",
  equinox.__version__, "optax", optax.__version__, jax.devices())'; } 2>&1 | tee "$OUT/env.txt"

timeout -s INT "$SUITE_S" $PY -m pytest -q -n "$WORKERS" --dist load -o cache_dir="$OUT/.pytest_cache" \
  --ignore tests/test_notebooks.py -rfE --durations 15 tests 2>&1 | tee "$OUT/suite.txt"

JAX_DEFAULT_MATMUL_PRECISION=highest timeout -s INT 110 $PY -m pytest -q -n 8 --dist load \
  -o cache_dir="$OUT/.pytest_cache" --lf --lfnf none --ignore tests/test_notebooks.py -rfE tests 2>&1 \
  | tail -n 40 | tee "$OUT/suite_highest.txt"

timeout -s INT 80 $PY bench/bench_sweep.py --reps 2 2>&1 | tee "$OUT/bench_sweep.txt"

timeout -s INT 60 $PY scripts/device_selection_probe.py 2>&1 | tee "$OUT/selection.txt"

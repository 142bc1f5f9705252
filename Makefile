# Every target creates .venv when missing and installs the package with its extras.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test bench experiments clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,experiments,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m lowrank_jax.demo

test: $(STAMP)
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) bench/run_all.py

experiments: $(STAMP)
	$(PY) experiments/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache results

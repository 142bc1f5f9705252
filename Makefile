# Every target creates .venv when missing and installs the package with its extras.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test bench experiments data clean

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

experiments: data
	$(PY) experiments/run_all.py

# Real data from registries (never fetched at run time): the decoder from PyPI, and the one clip
# vtest.avi extracted from Debian's opencv-doc package (checked against its SHA-256).
VTEST_SHA256 := 45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf
data: $(STAMP) data/vtest.avi
	$(PY) -m pip install --quiet -e '.[data]'

data/vtest.avi:
	mkdir -p data/.deb
	cd data/.deb && (apt-get download opencv-doc || (apt-get update && apt-get download opencv-doc))
	dpkg-deb --fsys-tarfile data/.deb/opencv-doc_*.deb | tar -x -C data/.deb ./usr/share/doc/opencv-doc/examples/data/vtest.avi
	echo "$(VTEST_SHA256)  data/.deb/usr/share/doc/opencv-doc/examples/data/vtest.avi" | sha256sum -c -
	mv data/.deb/usr/share/doc/opencv-doc/examples/data/vtest.avi data/vtest.avi
	rm -rf data/.deb

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache results

# scalebook — every target bootstraps .venv first (python3 -m venv + pip install -e ".[dev]").
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.scalebook-installed

.PHONY: lab test bench notebooks exercises test-oldest-jax setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

## Open the chapter notebooks in JupyterLab.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

## Run the whole test suite: unit tests, book numbers, grader, browser, and nbval over notebooks/ + solutions/.
test: $(STAMP)
	$(PY) -m pytest tests notebooks solutions --nbval-lax --nbval-cell-timeout=300 -v -rs

## Speed and fidelity measurements, printed as tables.
bench: $(STAMP)
	$(PY) benchmarks/run.py

## Re-execute every notebook and store its outputs (the only way stored outputs are made).
notebooks: $(STAMP)
	$(PY) tools/execute_notebooks.py notebooks/*.ipynb solutions/*.ipynb
	$(PY) tools/make_exercises.py
	$(PY) tools/execute_notebooks.py exercises/*.ipynb

## Regenerate exercises/ from solutions/.
exercises: $(STAMP)
	$(PY) tools/make_exercises.py

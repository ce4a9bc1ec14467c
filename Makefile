# scalebook — every target bootstraps .venv first (python3 -m venv + pip install -e ".[dev]").
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.scalebook-installed

PROFILE_DIR ?= notebooks/profiles/ch09

.PHONY: lab app profile lint test test-main test-oldest-jax test-colab-jax test-colab test-colab-all colab bench notebooks exercises setup

OLDJAX_VENV ?= .venv-oldjax
OLDJAX_PY := $(OLDJAX_VENV)/bin/python
OLDJAX_TESTS := tests/test_jaxlab.py tests/test_jaxlab_runtime.py tests/test_units.py tests/test_hardware.py tests/test_roofline.py \
	tests/test_book_numbers.py tests/test_questions_check.py tests/test_architecture.py \
	tests/test_topology.py tests/test_collectives.py tests/test_sharding.py tests/test_sharding_jax.py \
	tests/test_transformer.py tests/test_training.py tests/test_book_numbers_ch4.py tests/test_book_numbers_ch5_6.py \
	tests/test_tinymodel.py tests/test_jaxtrain.py tests/test_jaxpipeline.py tests/test_inference.py tests/test_serving.py tests/test_jaxdecode.py \
	tests/test_profiling.py tests/test_jaxprog.py tests/test_jaxmulti.py tests/test_gpus.py tests/test_book_numbers_ch12.py \
	tests/test_book_numbers_ch7_8.py tests/test_gpu_training.py tests/test_capstone.py

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

## Open the chapter notebooks in JupyterLab.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

## The chapter-11 capstone ("plan your model") as a web app without code cells (Voilà).
app: $(STAMP)
	$(VENV)/bin/voila notebooks/11_conclusion.ipynb

## XProf (the chapter-9 profiler UI) on 127.0.0.1 over the traces notebooks/09_profiling.ipynb wrote; Ctrl-C stops it.
profile: $(STAMP)
	$(PY) -m scalebook_utils.lab.xprof_server $(PROFILE_DIR)

## ruff (the rules and the format are in pyproject.toml): the package, tests, tools, benchmarks and notebooks.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## Run the whole test suite: lint, unit tests, book numbers, grader, browser, nbval over notebooks/ + solutions/,
## then the JAX layer and the core against the oldest supported JAX and against Colab's JAX, then the Colab-like run.
test: lint test-main test-oldest-jax test-colab-jax test-colab

## Two pytest workers (pytest-xdist; --dist loadfile keeps each notebook and each test module on one worker).
TEST_JOBS ?= 2

test-main: $(STAMP)
	$(PY) -m pytest tests notebooks solutions --nbval-lax --nbval-cell-timeout=300 -v -rs -n $(TEST_JOBS) --dist loadfile \
		--deselect tests/test_colab_like.py --deselect tests/test_widgets_colab.py::test_every_widget_works_on_colabs_ipywidgets_7

## The oldest supported JAX (0.4.35) in its own venv: the JAX layer and the core tests.
test-oldest-jax:
	test -x $(OLDJAX_PY) || $(PYTHON) -m venv $(OLDJAX_VENV)
	$(OLDJAX_PY) -m pip install -q --upgrade pip
	$(OLDJAX_PY) -m pip install -q "jax==0.4.35" "jaxlib==0.4.35" "numpy>=1.24,<2.3" "nbformat>=5.9" \
		"pytest>=7.4" "pytest-timeout>=2.1" "pytest-xdist>=3.5" "hypothesis>=6.80"
	$(OLDJAX_PY) -m pip install -q -e . --no-deps
	$(OLDJAX_PY) -c "import jax; assert jax.__version__ == '0.4.35', jax.__version__"
	$(OLDJAX_PY) -m pytest $(OLDJAX_TESTS) -q -n $(TEST_JOBS) --dist loadfile

## Stamp the install source, the Colab links and the README's table into every notebook (tools/stamp_colab.py):
## make colab SOURCE=git+https://github.com/ORG/REPO@TAG ; plain `make colab` reads `git remote get-url origin`
## and HEAD's tag (else its commit); SOURCE=none removes the stamp. Idempotent.
colab: $(STAMP)
	$(PY) tools/stamp_colab.py $(SOURCE)

## Colab's JAX (tests/colab_pins.py: COLAB_JAX) in its own venv: the same JAX-layer and core tests.
COLABJAX_VENV ?= .venv-colabjax
COLABJAX_PY := $(COLABJAX_VENV)/bin/python
test-colab-jax:
	test -x $(COLABJAX_PY) || $(PYTHON) -m venv $(COLABJAX_VENV)
	$(COLABJAX_PY) -m pip install -q --upgrade pip
	$(COLABJAX_PY) -m pip install -q $$($(PYTHON) tests/colab_pins.py --jax) "nbformat>=5.9" \
		"pytest>=7.4" "pytest-timeout>=2.1" "pytest-xdist>=3.5" "hypothesis>=6.80"
	$(COLABJAX_PY) -m pip install -q -e . --no-deps
	$(COLABJAX_PY) -m pytest $(OLDJAX_TESTS) -q -n $(TEST_JOBS) --dist loadfile

## A Colab-like runtime (tests/colab_pins.py: Colab's preinstalled set, no scalebook) in .venv-colab, rebuilt
## when the pins change; then chapters $(COLAB_CHAPTERS) each run alone there, installing scalebook from a clone
## of HEAD (tests/test_colab_like.py), and every widget is driven under its ipywidgets 7.7.1.
## `make test` runs chapters 01 03 10; `make test-colab-all` runs all 12 (measured on the shared 2-core machine,
## 3 workers: all 12 + the widget drive 9.8 min at load average ~10; 01 03 10 + the widget drive 6.2 min at ~12,
## the widget drive alone 3.2 min).
COLAB_VENV ?= .venv-colab
COLAB_CHAPTERS ?= 01 03 10
COLAB_JOBS ?= 3
$(COLAB_VENV)/.colab-pins: tests/colab_pins.py
	rm -rf $(COLAB_VENV)
	$(PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip install -q --upgrade pip
	$(COLAB_VENV)/bin/python -m pip install -q $$($(PYTHON) tests/colab_pins.py)
	touch $@

test-colab: $(STAMP) $(COLAB_VENV)/.colab-pins
	SCALEBOOK_COLAB_VENV=$(abspath $(COLAB_VENV)) SCALEBOOK_COLAB_CHAPTERS="$(COLAB_CHAPTERS)" $(PY) -m pytest -v -rs -s \
		-n $(COLAB_JOBS) tests/test_colab_like.py tests/test_widgets_colab.py::test_every_widget_works_on_colabs_ipywidgets_7

test-colab-all:
	$(MAKE) test-colab COLAB_CHAPTERS=all

## Speed and fidelity measurements, printed as tables.
bench: $(STAMP)
	$(PY) benchmarks/run.py

## Re-execute every notebook and store its outputs (the only way stored outputs are made).
notebooks: $(STAMP)
	$(PY) tools/execute_notebooks.py notebooks/*.ipynb solutions/*.ipynb
	$(PY) tools/make_exercises.py
	$(PY) tools/execute_notebooks.py exercises/*.ipynb  # checks that they run; writes nothing

## Regenerate exercises/ from solutions/.
exercises: $(STAMP)
	$(PY) tools/make_exercises.py

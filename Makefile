# kwatt: `make demo` and `make test` set everything up on a fresh Debian bookworm machine.
SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD_DIR ?= build
ASAN_DIR ?= build-asan
FUZZ_DIR ?= build-fuzz
TSAN_DIR ?= build-tsan
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)

# Debian packages: compiler and build tools, the C++ libraries, Python's venv, benchmark tools.
APT_PACKAGES := build-essential cmake ninja-build pkg-config git curl ca-certificates \
  libcurl4-openssl-dev libzstd-dev zstd libcli11-dev libsqlite3-dev postgresql libpq-dev libyaml-dev \
  libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev libxxhash-dev libgtest-dev libgmock-dev pybind11-dev \
  python3 python3-dev python3-venv python3-pip time clang libclang-rt-14-dev clang-format \
  prometheus-node-exporter prometheus influxdb snmpd snmp libsnmp-dev openipmi freeipmi-tools ipmitool \
  zlib1g-dev chromium chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEPS_STAMP := $(VENV)/.kwatt-deps

.PHONY: deps build build-asan build-tsan build-fuzz test-tsan python demo-cli test test-unit test-asan test-python \
  test-fuzz fuzz format-check demo bench bench-deps clean format

# `make` alone installs the dependencies.
.DEFAULT_GOAL := deps

# uPlot (the dashboard's plots, doc/dashboard.md), from npm's registry, unpacked into
# third_party/uplot/ (gitignored) and embedded into the binary by CMake.
UPLOT_VERSION := 1.6.32
UPLOT_DIR := third_party/uplot
UPLOT_STAMP := $(UPLOT_DIR)/.kwatt-uplot-$(UPLOT_VERSION)
$(UPLOT_STAMP): | $(DEPS_STAMP)
	@command -v npm >/dev/null || { echo "installing Debian's npm"; $(SUDO) apt-get install -y -q npm; }
	rm -rf $(UPLOT_DIR) && mkdir -p $(UPLOT_DIR)
	cd $(UPLOT_DIR) && npm pack --silent uplot@$(UPLOT_VERSION) >/dev/null && \
	  tar xzf uplot-$(UPLOT_VERSION).tgz --strip-components=1 package/dist/uPlot.iife.min.js \
	    package/dist/uPlot.min.css package/LICENSE && rm uplot-$(UPLOT_VERSION).tgz
	@touch $@

deps: $(DEPS_STAMP) $(UPLOT_STAMP)

$(DEPS_STAMP): requirements-dev.txt Makefile
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

# Peers in virtualenvs of their own, each pinned whole in bench/NAME-requirements.txt (installed
# with --no-deps): kwollect, Kwollect's own collector (PyPI kwollect 1.2.0) for
# bench/collect_bench.py; powerapi, PowerAPI 2.10.0 and its SmartWatts formula 2.4.1 for
# bench/meter_smartwatts_bench.py and for make test (test_meter_smartwatts.py checks that PowerAPI's
# parsers read kwatt's reports); psutil, what Python users read processes' CPU times with, for
# bench/meter_activity_bench.py.
KWOLLECT_VENV := bench/.venv-kwollect
POWERAPI_VENV := bench/.venv-powerapi
PSUTIL_VENV := bench/.venv-psutil
POWERAPI_STAMP := $(POWERAPI_VENV)/.kwatt-bench-deps
bench/.venv-%/.kwatt-bench-deps: bench/%-requirements.txt | $(DEPS_STAMP)
	@[ -x bench/.venv-$*/bin/python ] || $(PYTHON) -m venv bench/.venv-$*
	bench/.venv-$*/bin/pip install -q --disable-pip-version-check --no-deps -r $<
	@touch $@

bench-deps: $(foreach peer,kwollect powerapi psutil,bench/.venv-$(peer)/.kwatt-bench-deps)

$(BUILD_DIR)/build.ninja: CMakeLists.txt | $(DEPS_STAMP) $(UPLOT_STAMP)
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: $(DEPS_STAMP) $(UPLOT_STAMP) $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The Python package (kwatt, kwatt._core and the kwatt command) into the virtualenv, built by
# scikit-build-core in build/python-*/ (kept: later builds recompile only what changed).
PY_STAMP := $(VENV)/.kwatt-python
PY_SOURCES := $(shell git ls-files 'python/*' 'src/*' 'include/*' 2>/dev/null) CMakeLists.txt pyproject.toml
python: $(PY_STAMP)

$(PY_STAMP): $(DEPS_STAMP) $(UPLOT_STAMP) $(PY_SOURCES)
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
	@touch $@

$(ASAN_DIR)/build.ninja: CMakeLists.txt | $(DEPS_STAMP) $(UPLOT_STAMP)
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKWATT_SANITIZE=ON

build-asan: $(DEPS_STAMP) $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS) --target kwatt_unit_tests kwatt

# ThreadSanitizer over the threaded parts: the unit tests (the archive's parallel loading, the
# fetcher, the collector), then the server's thread pool through the integration tests that stream
# from it, and the collector's threads against its real peers.
# tests/tsan.supp names what is not kwatt's (libstdc++'s ctype cache, Debian's uninstrumented
# cpp-httplib).
$(TSAN_DIR)/build.ninja: CMakeLists.txt | $(DEPS_STAMP) $(UPLOT_STAMP)
	cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKWATT_TSAN=ON

build-tsan: $(DEPS_STAMP) $(TSAN_DIR)/build.ninja
	cmake --build $(TSAN_DIR) -j $(JOBS) --target kwatt_unit_tests kwatt

TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)"
test-tsan: build-tsan build python
	$(TSAN_ENV) $(TSAN_DIR)/kwatt_unit_tests --gtest_brief=1
	cd tests/integration && $(TSAN_ENV) KWATT_BIN=$(abspath $(TSAN_DIR))/kwatt \
	  KWATT_PEERS_BIN=$(abspath $(BUILD_DIR))/kwatt_collect_peers \
	  $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider test_server.py \
	  test_archive_read.py test_hostile.py test_collect.py test_meter.py

# The libFuzzer harnesses of fuzz/ (clang, ASan, UBSan, _GLIBCXX_ASSERTIONS): fuzz/README.md.
FUZZERS := row_parser time node_name catalogue jobs_file manifest archive_data server_query \
  pushed_rows store_block testbed_description prometheus_text metric_descriptions wattmetre_line \
  rapl_sysfs proc_stat activity_record hwpc_json hwpc_csv nvml_counters output_spec \
  meter_state
$(FUZZ_DIR)/build.ninja: CMakeLists.txt | $(DEPS_STAMP) $(UPLOT_STAMP)
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DKWATT_FUZZ=ON -DKWATT_BUILD_TESTS=OFF

build-fuzz: $(DEPS_STAMP) $(FUZZ_DIR)/build.ninja
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target $(addsuffix _fuzzer,$(FUZZERS))

# A bounded campaign: FUZZ_SECONDS per harness, from the seeds and earlier findings; new inputs
# are kept in $(FUZZ_DIR)/corpus, crashes in $(FUZZ_DIR)/findings (copy one into
# fuzz/regressions/NAME/ once fixed: every test run replays it).
FUZZ_SECONDS ?= 120
fuzz: build-fuzz
	@bash fuzz/run.sh campaign $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZERS)

# What `make test` runs: every seed and regression input replayed, then FUZZ_RUNS inputs each
# from a fixed seed.
FUZZ_RUNS ?= 20000
test-fuzz: build-fuzz
	@bash fuzz/run.sh check $(FUZZ_DIR) $(FUZZ_RUNS) $(FUZZERS)

# Every test: C++ unit tests (plain, under ASan/UBSan, under TSan), the fuzz harnesses on their corpora,
# then the integration tests and the Python package's tests (pytest; two runs, as each directory
# has its own conftest).
test: format-check test-unit test-asan test-tsan test-fuzz test-python

# Every C++ file as clang-format (.clang-format, Google based) writes it; `make format` fixes.
format-check: $(DEPS_STAMP)
	@bad=$$(for f in $$(git ls-files '*.h' '*.cc'); do \
	  clang-format --dry-run --Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted as .clang-format says (run make format):" $$bad; exit 1; fi

test-unit: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The unit tests, then the integration tests of the parts that meet hostile input (archives,
# requests, files, the server, the collector's devices), under ASan/UBSan: the sanitized kwatt against itself on loopback.
# test_collect.py also imports the Python package (a lab's rows through kwatt.Kwollect): `python` first.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ASAN_INTEGRATION := test_hostile.py test_archive_read.py test_backup.py test_fetch.py test_server.py \
  test_energy.py test_collect.py test_dashboard.py test_meter_smartwatts.py test_meter.py
test-asan: build-asan build python $(POWERAPI_STAMP)
	$(SANITIZER_ENV) $(ASAN_DIR)/kwatt_unit_tests
	cd tests/integration && $(SANITIZER_ENV) KWATT_BIN=$(abspath $(ASAN_DIR))/kwatt \
	  KWATT_PEERS_BIN=$(abspath $(BUILD_DIR))/kwatt_collect_peers \
	  $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider $(ASAN_INTEGRATION)

test-python: build python $(POWERAPI_STAMP)
	KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt $(VENV)/bin/python -m pytest -q tests/integration
	KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt $(VENV)/bin/python -m pytest -q python/tests

# The story of an experiment's energy (examples/demo.py, the notebook's story as a script):
# simulated testbed, metrics, energy table, archive, plots written to demo-output/*.png.
demo: build python
	@$(VENV)/bin/python examples/demo.py demo-output --kwatt $(BUILD_DIR)/kwatt

# The same with the CLI alone: serve, fetch, backup, inspect, energy, simulate energy.
demo-cli: build
	@bash examples/demo.sh $(BUILD_DIR)/kwatt

bench: build bench-deps
	@KWOLLECT_VENV=$(KWOLLECT_VENV) POWERAPI_VENV=$(POWERAPI_VENV) PSUTIL_VENV=$(PSUTIL_VENV) \
	  bash bench/run_all.sh $(BUILD_DIR)/kwatt

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)

# kwatt: `make demo` and `make test` set everything up on a fresh Debian bookworm machine.
# README.md ("Development") says what each target does and how long it takes.
SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)
# The compiler cache (Debian's ccache), outside the clone: a tree rebuilt in the same clone (make
# clean, a branch switched and back) compiles from it (a deleted 31-step tree: 19 s instead of
# 3 min), and so does a clone in another folder (a fresh clone's make test, CI): paths under the
# clone are made relative (the unity batches' absolute includes too, in the preprocessed text;
# __FILE__ and debug information by CMakeLists.txt's -ffile-prefix-map), and the folder is not
# hashed for the trees with debug information (the sanitized ones).
export CCACHE_DIR ?= $(HOME)/.cache/ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_SLOPPINESS := include_file_mtime,include_file_ctime,time_macros
export CCACHE_NOHASHDIR := 1
# Expanded when a recipe runs (=, not :=): on a fresh machine ccache is installed by the same make
# run that first configures a tree, and a tree configured without it would rebuild whole later.
LAUNCHER = $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Debian packages that building and running kwatt needs (make demo, make wheel, and what `pip
# install` of the source needs: doc/install.md).
BUILD_PACKAGES := build-essential cmake ninja-build pkg-config ccache ca-certificates \
  libcurl4-openssl-dev libzstd-dev libcli11-dev libsqlite3-dev libpq-dev libyaml-dev \
  nlohmann-json3-dev libxxhash-dev libsnmp-dev zlib1g-dev libboost-dev \
  python3 python3-dev python3-venv
# What the tests need besides (make test-deps): GoogleTest, clang for the sanitized and fuzzing
# tree, the real peers (PostgreSQL, Prometheus and its node exporter, InfluxDB, snmpd, OpenIPMI,
# Chromium), mmdebstrap for the wheel's minimal root, LaTeX for the report's tables (booktabs,
# siunitx), strace (no process started between the CLI and Python), and the tools the tests call.
TEST_PACKAGES := git curl zstd time libgtest-dev libgmock-dev clang libclang-rt-14-dev clang-format \
  postgresql prometheus-node-exporter prometheus influxdb snmpd snmp openipmi freeipmi-tools ipmitool \
  chromium chromium-driver mmdebstrap texlive-latex-base texlive-latex-recommended texlive-science \
  strace
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BUILD_DEPS := $(VENV)/.kwatt-build-deps
TEST_DEPS := $(VENV)/.kwatt-test-deps

.PHONY: test-layers deps test-deps build python wheel build-tests build-asan build-tsan demo demo-cli test \
  wheels sdist uplot test-wheels \
  test-unit test-asan test-tsan test-fuzz test-integration test-types test-python test-wheel check-full \
  fuzz format-check format bench bench-deps clean

# Installs the Debian packages of $(1) that are missing.
define apt_install
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

$(BUILD_DEPS): requirements-build.txt Makefile
	$(call apt_install,$(BUILD_PACKAGES))
	@[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --upgrade "pip>=23.1"
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-build.txt
	@touch $@

$(TEST_DEPS): requirements-dev.txt Makefile | $(BUILD_DEPS)
	$(call apt_install,$(TEST_PACKAGES))
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

# uPlot (the dashboard's plots, doc/dashboard.md), from npm's registry, unpacked into
# third_party/uplot/ (gitignored) and embedded into the binary by CMake. `make uplot` needs npm
# only (no root where npm is installed): what `pip install .` from a clone asks for.
UPLOT_VERSION := 1.6.32
UPLOT_DIR := third_party/uplot
UPLOT_STAMP := $(UPLOT_DIR)/.kwatt-uplot-$(UPLOT_VERSION)
uplot: $(UPLOT_STAMP)
$(UPLOT_STAMP):
	@command -v npm >/dev/null || { echo "installing Debian's npm"; $(SUDO) apt-get install -y -q npm; }
	rm -rf $(UPLOT_DIR) && mkdir -p $(UPLOT_DIR)
	cd $(UPLOT_DIR) && npm pack --silent uplot@$(UPLOT_VERSION) >/dev/null && \
	  tar xzf uplot-$(UPLOT_VERSION).tgz --strip-components=1 package/dist/uPlot.iife.min.js \
	    package/dist/uPlot.min.css package/LICENSE && rm uplot-$(UPLOT_VERSION).tgz
	@touch $@

deps: $(BUILD_DEPS) $(UPLOT_STAMP)
test-deps: $(TEST_DEPS)

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
bench/.venv-%/.kwatt-bench-deps: bench/%-requirements.txt | $(BUILD_DEPS)
	@[ -x bench/.venv-$*/bin/python ] || $(PYTHON) -m venv bench/.venv-$*
	bench/.venv-$*/bin/pip install -q --disable-pip-version-check --no-deps -r $<
	@touch $@

bench-deps: $(foreach peer,kwollect powerapi psutil,bench/.venv-$(peer)/.kwatt-bench-deps)

# One release tree, build/, configured by scikit-build-core (pip) so that the CLI, the Python
# module and the wheel come from the same objects: `make build` compiles `kwatt` and `_core`
# there and installs the package (with the `kwatt` command) into the virtualenv; the unit tests,
# peers and benchmarks are built in the same tree once GoogleTest is installed (make test-deps).
PIP := $(VENV)/bin/pip --disable-pip-version-check
CONFIG := --config-settings=
SKBUILD_FLAGS = $(CONFIG)build-dir=$(BUILD_DIR) $(CONFIG)cmake.define.KWATT_WERROR=ON \
  $(CONFIG)cmake.define.KWATT_BUILD_TESTS=AUTO \
  $(if $(LAUNCHER),$(CONFIG)cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
WHEEL_RAW := $(BUILD_DIR)/wheel
PY_STAMP := $(VENV)/.kwatt-python
PY_SOURCES := $(shell git ls-files 'python/*' 'src/*' 'include/*' 'apps/*' 'cmake/*' 2>/dev/null) \
  CMakeLists.txt pyproject.toml packaging/kwatt_launcher.py
build python: $(PY_STAMP)

$(PY_STAMP): $(BUILD_DEPS) $(UPLOT_STAMP) $(PY_SOURCES)
	@rm -rf $(WHEEL_RAW)
	$(PIP) wheel -v --no-build-isolation --no-deps $(SKBUILD_FLAGS) -w $(WHEEL_RAW) .
	$(PIP) install -q --no-deps --force-reinstall $(WHEEL_RAW)/kwatt-*.whl
	@touch $@

# The wheels (doc/install.md, "Wheels"): one per CPython 3.9 to 3.13, self-contained,
# manylinux_2_31 (Debian 11 and newer), built by packaging/wheels.sh into dist/: zig's clang
# (PyPI's ziglang) with a static libc++ for an old glibc, against the C libraries of a Debian 11
# root that mmdebstrap makes once; auditwheel copies them in. The release workflow
# (.github/workflows/release.yml) runs the same targets. From a warm compiler cache about 8 min
# for the five; the first CPython's build is the long one, each other one compiles its module alone.
WHEEL_PYTHONS ?= 3.9 3.10 3.11 3.12 3.13
WHEEL_PACKAGES := mmdebstrap debian-archive-keyring dpkg-dev binutils
wheels wheel: $(BUILD_DEPS) $(UPLOT_STAMP)
	$(call apt_install,$(WHEEL_PACKAGES))
	bash packaging/wheels.sh $(WHEEL_PYTHONS)
	@ls -l dist/*.whl

# The source distribution (it carries uPlot, so that it builds offline), into dist/.
sdist: $(BUILD_DEPS) $(UPLOT_STAMP)
	$(VENV)/bin/python -m build --sdist --no-isolation -o dist .

# The unit tests, the test peers and the benchmarks' programs, in the release tree.
build-tests: $(PY_STAMP) $(TEST_DEPS)
	@cmake -S . -B $(BUILD_DIR) >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)

# One sanitized tree (clang; ASan, UBSan, _GLIBCXX_ASSERTIONS, libFuzzer's coverage): the unit
# tests, the sanitized `kwatt` for the integration tests that meet hostile input, and the fuzz
# harnesses of fuzz/ (fuzz/README.md).
FUZZERS := row_parser time node_name catalogue jobs_file manifest archive_data server_query \
  pushed_rows store_block testbed_description prometheus_text metric_descriptions wattmetre_line \
  rapl_sysfs proc_stat activity_record hwpc_json hwpc_csv nvml_counters output_spec \
  meter_state carbon_intensity http_request
$(ASAN_DIR)/build.ninja: CMakeLists.txt | $(TEST_DEPS) $(UPLOT_STAMP)
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_DIR) -G Ninja $(LAUNCHER) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DKWATT_WERROR=ON -DKWATT_SANITIZE=ON \
	  -DKWATT_FUZZ=ON -DKWATT_BUILD_TESTS=ON

build-asan: $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS) --target kwatt_unit_tests kwatt \
	  $(addsuffix _fuzzer,$(FUZZERS))

# ThreadSanitizer over the unit tests that run threads, alone (each part's THREADED list,
# KWATT_THREADED_TESTS). tests/tsan.supp names what is not kwatt's (libstdc++'s ctype cache).
TSAN_CONFIGURE = cmake -S . -G Ninja $(LAUNCHER) -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DKWATT_WERROR=ON -DKWATT_TSAN=ON -DKWATT_BUILD_TESTS=ON
$(TSAN_DIR)/build.ninja: CMakeLists.txt | $(TEST_DEPS) $(UPLOT_STAMP)
	$(TSAN_CONFIGURE) -B $(TSAN_DIR)

build-tsan: $(TSAN_DIR)/build.ninja
	cmake --build $(TSAN_DIR) -j $(JOBS) --target kwatt_unit_tests

# Every test, in at most 30 minutes from a fresh clone on 2 cores (README.md, "Development"):
# formatting, the layering of the parts, the C++ unit tests (release, ASan/UBSan, TSan over the threaded parts), the fuzz
# harnesses on their seeds and regressions, each integration file once (those meeting hostile
# input against the sanitized kwatt), the Python package's types and tests, and the wheel in a
# minimal root.
test: format-check test-layers test-unit test-asan test-tsan test-fuzz test-integration test-types \
  test-python test-wheel

# Every C++ file as clang-format (.clang-format, Google based) writes it; `make format` fixes.
format-check: $(TEST_DEPS)
	@bad=$$(for f in $$(git ls-files '*.h' '*.cc'); do \
	  clang-format --dry-run --Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted as .clang-format says (run make format):" $$bad; exit 1; fi

# The parts depend on each other as doc/design.md's "Parts and layers" table says: every include
# and every link (tests/layering/check_layers.py), and the check itself fails on each kind of break.
test-layers: $(TEST_DEPS)
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/layering

test-unit: build-tests
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-asan: build-asan
	cd $(ASAN_DIR) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS)

TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 suppressions=$(abspath tests/tsan.supp)"
test-tsan: build-tsan build-tests
	cd $(TSAN_DIR) && $(TSAN_ENV) KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt \
	  ctest --output-on-failure -j $(JOBS)

# Every seed and regression input replayed, then FUZZ_RUNS inputs each from a fixed seed.
FUZZ_RUNS ?= 20000
test-fuzz: build-asan
	@bash fuzz/run.sh check $(ASAN_DIR) $(FUZZ_RUNS) $(FUZZERS)

# A bounded campaign: FUZZ_SECONDS per harness, from the seeds and earlier findings; new inputs
# are kept in $(ASAN_DIR)/corpus, crashes in $(ASAN_DIR)/findings (copy one into
# fuzz/regressions/NAME/ once fixed: every test run replays it).
FUZZ_SECONDS ?= 120
fuzz: build-asan
	@bash fuzz/run.sh campaign $(ASAN_DIR) $(FUZZ_SECONDS) $(FUZZERS)

# The integration tests (tests/integration), each file once, two at a time (pytest-xdist): those
# that meet hostile input (damaged archives, hostile requests, misbehaving devices, the meter's
# inputs) against the sanitized kwatt, the others against the release build.
ASAN_INTEGRATION := test_hostile.py test_archive_read.py test_server.py test_collect.py test_meter.py \
  test_serve_hostile.py test_store_hostile.py test_collect_hostile.py \
  test_edges.py test_http_hostile.py
RELEASE_INTEGRATION := $(filter-out $(ASAN_INTEGRATION),$(notdir $(wildcard tests/integration/test_*.py)))
PYTEST := $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider -n $(JOBS)
# Run alone, after the others: the meter's learned idle power against the simulator's truth, a
# fit of power against the machine's busy fraction, which the other tests' load makes a fit of
# noise (16 W +- 3.6 W for a true 60 W when run beside them; right alone, and beside two busy
# loops). The meter's estimate under such load is issue 37's.
ALONE_INTEGRATION := test_meter_hostile.py::test_the_learned_idle_power_is_the_simulators_within_its_stated_uncertainty
PEERS_ENV := KWATT_PEERS_BIN=$(abspath $(BUILD_DIR))/kwatt_test_peers
test-integration: build-tests build-asan $(POWERAPI_STAMP)
	cd tests/integration && $(SANITIZER_ENV) $(PEERS_ENV) KWATT_BIN=$(abspath $(ASAN_DIR))/kwatt \
	  $(PYTEST) $(ASAN_INTEGRATION)
	cd tests/integration && $(PEERS_ENV) KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt \
	  $(PYTEST) $(RELEASE_INTEGRATION) --deselect tests/integration/$(ALONE_INTEGRATION)
	cd tests/integration && $(PEERS_ENV) KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt \
	  $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider $(ALONE_INTEGRATION)

# The package's annotations and the examples checked by mypy (mypy.ini: strict over python/kwatt
# and examples/*.py), with the mypy and pandas-stubs of requirements-dev.txt; no build needed
# (the sources and kwatt/_core.pyi). About 15 s cold, under 1 s from its cache (.mypy_cache).
test-types: $(TEST_DEPS)
	$(VENV)/bin/python -m mypy

test-python: build-tests
	KWATT_BIN=$(abspath $(BUILD_DIR))/kwatt $(PYTEST) python/tests

# The wheels of the oldest and newest CPython, each installed as an unprivileged user in a minimal
# Debian root of its Python (Debian 11's 3.9, Debian 13's 3.13; python3, python3-venv,
# ca-certificates; made by mmdebstrap, kept in ~/.cache/kwatt/roots), where no compiler is: the
# CLI against a simulator it starts, the store, the meter, the collector, a report with its
# figures, a parquet export, the Python service (tests/wheel). make test-wheels: all five wheels in
# Debian 11, 12 (3.10, 3.11, 3.12) and 13 (about 15 min after make test).
test-wheel: $(TEST_DEPS)
	$(MAKE) wheels WHEEL_PYTHONS="3.9 3.13"
	KWATT_WHEEL_SYSTEMS="bullseye trixie" $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/wheel

test-wheels: $(TEST_DEPS)
	$(MAKE) wheels
	KWATT_WHEEL_SYSTEMS="bullseye bookworm-3.10 bookworm bookworm-3.12 trixie" \
	  $(VENV)/bin/python -m pytest -q -p no:cacheprovider tests/wheel

# What `make test` leaves out for time (about an hour after it on 2 cores: 46 min of it the
# fuzzing campaign, 23 harnesses x 120 s; the rest estimated, not timed whole): a campaign of
# FUZZ_SECONDS per harness, every integration file against the ASan kwatt and the TSan kwatt
# (the server's thread pool, the collector's threads), every unit test under TSan, and a build
# file by file (no unity batches: each .cc compiles with its own includes alone).
check-full: test
	$(MAKE) test-wheels
	$(MAKE) fuzz
	cd tests/integration && $(SANITIZER_ENV) $(PEERS_ENV) KWATT_BIN=$(abspath $(ASAN_DIR))/kwatt \
	  $(PYTEST) $(RELEASE_INTEGRATION)
	$(TSAN_CONFIGURE) -B $(TSAN_DIR)-full -DKWATT_TSAN_ALL_TESTS=ON
	cmake --build $(TSAN_DIR)-full -j $(JOBS) --target kwatt_unit_tests kwatt
	cd $(TSAN_DIR)-full && $(TSAN_ENV) ctest --output-on-failure -j $(JOBS)
	cd tests/integration && $(TSAN_ENV) $(PEERS_ENV) KWATT_BIN=$(abspath $(TSAN_DIR))-full/kwatt \
	  $(PYTEST) test_server.py test_archive_read.py test_hostile.py test_collect.py test_meter.py
	cmake -S . -B $(BUILD_DIR)-files -G Ninja $(LAUNCHER) -DKWATT_UNITY_BUILD=OFF -DKWATT_WERROR=ON \
	  -DKWATT_BUILD_TESTS=ON -DKWATT_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(VENV))/bin/python \
	  -Dpybind11_DIR=$$($(VENV)/bin/python -m pybind11 --cmakedir)
	cmake --build $(BUILD_DIR)-files -j $(JOBS)

# The story of an experiment's energy (examples/demo.py, the notebook's story as a script):
# simulated testbed, metrics, energy table, archive, plots written to demo-output/*.png.
demo: $(PY_STAMP)
	@$(VENV)/bin/python examples/demo.py demo-output --kwatt $(BUILD_DIR)/kwatt

# The same with the CLI alone: serve, fetch, backup, inspect, energy, simulate energy.
demo-cli: $(PY_STAMP)
	@bash examples/demo.sh $(BUILD_DIR)/kwatt

bench: build-tests bench-deps
	@KWOLLECT_VENV=$(KWOLLECT_VENV) POWERAPI_VENV=$(POWERAPI_VENV) PSUTIL_VENV=$(PSUTIL_VENV) \
	  bash bench/run_all.sh $(BUILD_DIR)/kwatt

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-files $(ASAN_DIR) $(TSAN_DIR) $(TSAN_DIR)-full build-wheel-* dist

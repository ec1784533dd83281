# Kiln's front door. `make demo` and `make test` each do all the set-up on a fresh Debian
# machine: install the missing packages (apt-get, as root or through sudo), configure,
# build, run. The plain CMake flow works too once the packages are there:
#   cmake -S . -B build && cmake --build build -j && ctest --test-dir build
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Debian packages the build needs (compiler, CMake, Eigen, oneDNN for the CPU convolutions,
# GoogleTest, Google Benchmark, and zlib, the NIfTI library and libcurl for the data
# pipeline), pkg-config for the test of the installed kiln.pc (tests/install/), and
# iproute2 for the distributed tests across two network namespaces (tests/dist/), and CLI11
# for the `kiln` command's flags (tools/).
PACKAGES := g++ make cmake libeigen3-dev libdnnl-dev libgtest-dev libbenchmark-dev pkg-config zlib1g-dev \
  libnifti2-dev libcurl4-openssl-dev iproute2 libcli11-dev
# `make sanitize` builds with Clang (its sanitizer runtimes and its OpenMP) as well.
SANITIZE_PACKAGES := clang libclang-rt-dev libomp-dev
SANITIZE_BUILD ?= build-sanitize
# The sanitizers' settings (every report fatal, leaks reported, a failed allocation
# returns null) are compiled into the test and fuzz binaries: tests/sanitizer_options.cpp.

# What `make sanitize` and `make fuzz` configure alike: Clang, the CPU backend, ASan + UBSan,
# nothing but what they run.
CLANG_SANITIZE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DKILN_CUDA=OFF \
  -DKILN_SANITIZE=ON -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_EXAMPLES=OFF -DKILN_INSTALL=OFF

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

# `make bench-dist` compares Kiln's ring all-reduce with Open MPI's (bench/dist/).
BENCH_DIST_PACKAGES := openmpi-bin libopenmpi-dev

.PHONY: all deps configure build test demo bench bench-dist sanitize fuzz clean

all: build

deps:
	@missing=""; \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "kiln: installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
	fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# `kiln train` on AdrenalMNIST3D (or generated volumes offline), sized to the machine
# (scripts/demo.sh).
demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target kiln_cli
	scripts/demo.sh $(BUILD)/bin/kiln

bench: configure
	cmake --build $(BUILD) -j$(JOBS) --target kiln_bench
	$(BUILD)/bin/kiln_bench --benchmark_counters_tabular=true

# All-reduce bus bandwidth of Kiln's ring beside Open MPI's MPI_Allreduce, 2 and 4 ranks,
# 4 KB to 256 MB, and DDP steps with and without overlap (bench/dist/README.md).
bench-dist:
	$(MAKE) deps PACKAGES="$(PACKAGES) $(BENCH_DIST_PACKAGES)"
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS) --target kiln_cli kiln_allreduce_bench kiln_mpi_allreduce_bench
	bench/dist/compare_allreduce.sh $(BUILD)
	$(BUILD)/bin/kiln launch --nproc-per-node 2 -- $(BUILD)/bin/kiln_allreduce_bench --ddp --delay-ms 30

# The CPU configuration built by Clang with ASan + UBSan (KILN_SANITIZE), and the whole CPU
# test suite run under them. CI runs it after `make test`.
sanitize:
	$(MAKE) deps PACKAGES="$(PACKAGES) $(SANITIZE_PACKAGES)"
	cmake -S . -B $(SANITIZE_BUILD) $(CLANG_SANITIZE_FLAGS) -DKILN_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_BUILD) -j$(JOBS)
	ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j$(JOBS)

# Every libFuzzer harness of tests/fuzz, built by Clang with ASan + UBSan, run for
# FUZZ_SECONDS each (tests/fuzz/README.md): `make fuzz FUZZ_SECONDS=600`.
fuzz:
	$(MAKE) deps PACKAGES="$(PACKAGES) $(SANITIZE_PACKAGES)"
	cmake -S . -B $(FUZZ_BUILD) $(CLANG_SANITIZE_FLAGS) -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target kiln_fuzzers
	tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)

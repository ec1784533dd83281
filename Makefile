# Kiln's front door. `make demo` and `make test` each do all the set-up on a fresh Debian
# machine: install the missing packages (apt-get, as root or through sudo), configure,
# build, run. The plain CMake flow works too once the packages are there:
#   cmake -S . -B build && cmake --build build -j && ctest --test-dir build
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Debian packages the build needs (compiler, CMake, Eigen, GoogleTest, Google Benchmark),
# and pkg-config for the test of the installed kiln.pc (tests/install/).
PACKAGES := g++ make cmake libeigen3-dev libgtest-dev libbenchmark-dev pkg-config

.PHONY: all deps configure build test demo bench clean

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

demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target train_cnn3d
	$(BUILD)/bin/train_cnn3d

bench: configure
	cmake --build $(BUILD) -j$(JOBS) --target kiln_bench
	$(BUILD)/bin/kiln_bench --benchmark_counters_tabular=true

clean:
	rm -rf $(BUILD)

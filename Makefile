# lote: the two set-up commands are `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: deps configure build build-binaries test demo bench bundle test-gpu clean

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# What the demo runs: the lote binary and its supervisor shim (no tests, no benchmarks).
build-binaries: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target lote lote-exec-shim

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

demo: build-binaries
	bash scripts/demo.sh $(BUILD_DIR)/lote

bench: build
	bash bench/run-all.sh $(BUILD_DIR)

# A self-contained lote (binary, node runner, libraries, wrapper) as
# $(BUILD_DIR)/lote-bundle-*.tar.gz, for hosts without lote's libraries.
bundle: build-binaries
	bash scripts/make-bundle.sh $(BUILD_DIR)

# lote's checks on a real NVIDIA GPU host (not in CI): tests/gpu/run.sh.
test-gpu: build-binaries
	bash tests/gpu/run.sh $(BUILD_DIR)/lote

clean:
	rm -rf $(BUILD_DIR)

# lote: the two set-up commands are `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: deps configure build build-binaries test demo bench clean

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

clean:
	rm -rf $(BUILD_DIR)

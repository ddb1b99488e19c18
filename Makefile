# lote: the two set-up commands are `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: deps build test demo bench clean

deps:
	bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

demo: build
	bash scripts/demo.sh $(BUILD_DIR)/lote

bench: build
	bash bench/run-all.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

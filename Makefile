# SPDX-License-Identifier: BSD-2-Clause
# The README's commands: `make demo`, `make test` and `make install`. CMake does the building,
# into build/ (build-install/ for `make install`). Each target first installs the Debian
# packages that are missing (scripts/install-deps.sh).

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=
# make install: where to (PREFIX), a staging root for packagers (DESTDIR), its own build tree.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BUILD ?= build-install

.PHONY: all deps build test demo bench asan tsan memcheck fuzz format format-check install uninstall
.PHONY: clean
.PHONY: demo-ring

all: build

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

# The whole pipeline on librdkafka's mock cluster: ring partitioner, consumer group, ordered lanes.
demo: build
	@$(BUILD)/examples/ringlane-demo

# The ring itself with the ringlane command-line tool.
demo-ring: build
	@scripts/demo.sh $(BUILD)

bench: build
	@echo "benchmarks are built in $(BUILD)/bench; see bench/RESULTS.md for how to run them"

# The same tests with AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DRINGLANE_SANITIZE=address,undefined -DRINGLANE_BUILD_BENCH=OFF $(CMAKE_FLAGS)"

# The threaded suites (CTest label "threads") with ThreadSanitizer.
tsan:
	@$(MAKE) --no-print-directory test BUILD=build-tsan CTEST_FLAGS="-L threads --no-tests=ignore" \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DRINGLANE_SANITIZE=thread -DRINGLANE_BUILD_BENCH=OFF $(CMAKE_FLAGS)"

# The unit suites under valgrind memcheck (errors and definite or indirect leaks fail them).
# valgrind is installed before configuring, so CTest finds it even in a build/ made earlier.
memcheck:
	@scripts/install-deps.sh build bench
	@cmake -S . -B $(BUILD) -DMEMORYCHECK_COMMAND=$$(command -v valgrind) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@ctest --test-dir $(BUILD) -T memcheck -L unit -LE stress --output-on-failure -j $(JOBS)

# The libFuzzer targets (clang), each run for FUZZ_SECONDS with ASan and UBSan.
FUZZ_SECONDS ?= 30
fuzz:
	@scripts/install-deps.sh fuzz
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DRINGLANE_FUZZ=ON \
	  -DRINGLANE_FUZZ_SECONDS=$(FUZZ_SECONDS) -DRINGLANE_BUILD_BENCH=OFF \
	  -DRINGLANE_BUILD_EXAMPLES=OFF -DRINGLANE_BUILD_TOOLS=OFF \
	  -DRINGLANE_SANITIZE=address,undefined,fuzzer-no-link $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@ctest --test-dir build-fuzz --output-on-failure -L fuzz

# The C files git tracks. No list (git missing, or not a checkout) is an error, not a pass.
C_FILES = files=$$(git ls-files '*.c' '*.h') && [ -n "$$files" ] || \
	{ echo "$@: git ls-files gave no C files (is git installed, is this a checkout?)" >&2; exit 1; }

format:
	@$(C_FILES); echo "$$files" | xargs clang-format -i

format-check:
	@$(C_FILES); echo "$$files" | xargs clang-format --dry-run --Werror
	@echo "format-check: $$(git ls-files '*.c' '*.h' | wc -l) files formatted"

# The libraries, headers, CLI, plugin, pkg-config files, CMake package and LICENSE into
# $(DESTDIR)$(PREFIX), from a build of those alone (no tests, benchmarks or examples), with only
# the packages they need. As root into the live system (no DESTDIR), ldconfig runs after, so
# the new libraries are found at once (/usr/local/lib is in ld.so's cache, not searched
# without it). See docs/install.md.
install:
	@scripts/install-deps.sh lib
	@cmake -S . -B "$(INSTALL_BUILD)" -DCMAKE_INSTALL_PREFIX="$(PREFIX)" -DRINGLANE_BUILD_TESTS=OFF \
	  -DRINGLANE_BUILD_BENCH=OFF -DRINGLANE_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build "$(INSTALL_BUILD)" -j $(JOBS)
	@DESTDIR="$(DESTDIR)" cmake --install "$(INSTALL_BUILD)"
	@scripts/ldconfig-after-install.sh "$(DESTDIR)"

# Removes what the last `make install` from $(INSTALL_BUILD) installed (its install_manifest.txt).
uninstall:
	@scripts/uninstall.sh "$(INSTALL_BUILD)/install_manifest.txt" "$(DESTDIR)"
	@scripts/ldconfig-after-install.sh "$(DESTDIR)"

clean:
	@rm -rf build build-asan build-tsan build-fuzz build-install

# The two commands a newcomer needs:
#   make run    install, build, start Redis + the demo backend + the gateway
#   make test   install, build, run every test, then again under ASan/UBSan,
#               then the fuzzers
# `make check` runs the suite once, without the sanitizer build. `make fuzz`
# builds the libFuzzer targets of tests/fuzz/ with clang (in build-fuzz) and
# runs each for FUZZ_TIME seconds, side by side.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME  ?= 60
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test check check-asan fuzz bench clean format

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

run: build
	scripts/run-local.sh $(BUILD)

check: build
	cd $(BUILD) && ctest --output-on-failure

check-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure

# -O1: fast enough to fuzz, and asserts stay in (Debug has no NDEBUG).
# The gateway itself is built there too, so that every source of it
# compiles under clang's warnings as well as gcc's.
fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang \
	    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
	    -DSLUICE_FUZZ=ON -DSLUICE_SANITIZE=ON -DSLUICE_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers sluice
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TIME)

test: check check-asan fuzz

# The comparative benchmark (bench/README.md): nginx, HAProxy, nginx + Lua +
# Redis and sluice on loopback; prints a table, asserts nothing. Knobs in
# the environment: DURATION, WARMUP, REPS, CONNS, ROWS, SKIP_SLOW...
BENCH_PACKAGES = wrk nginx-light libnginx-mod-http-lua lua-nginx-redis \
    haproxy redis-server strace valgrind curl python3

bench: build
	scripts/install-deps.sh $(BENCH_PACKAGES)
	bench/run.sh $(BUILD)

format:
	clang-format -i src/*.c src/*/*.[ch] demo/*.c tests/unit/*/*.c \
	    tests/integration/*.[ch] tests/fuzz/*.[ch]

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

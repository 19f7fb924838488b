#!/bin/sh
# Runs every libFuzzer target of a fuzz build (make fuzz) for SECONDS,
# side by side, each on its corpus in tests/fuzz/corpus/<module>/ and its
# dictionary. What a run finds goes to a scratch directory: the repo's
# corpus is only read.
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]
# Fails when a target crashes, leaks, or breaks an invariant; the input
# that did it is kept in BUILD_DIR/fuzz-crashes/.
set -eu

build=$1
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
crashes=$build/fuzz-crashes
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$crashes"

pids=""
for bin in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    module=${bin##*/fuzz_}
    mkdir "$scratch/$module"
    # New inputs go to the first directory, the scratch one.
    "$bin" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -dict="$here/$module.dict" -artifact_prefix="$crashes/$module-" \
        "$scratch/$module" "$here/corpus/$module" \
        >"$scratch/$module.log" 2>&1 &
    pids="$pids $module:$!"
done
[ -n "$pids" ] || { echo "fuzz: no fuzz_* target in $build/tests/fuzz" >&2; exit 1; }

failed=0
passed=0
for entry in $pids; do
    module=${entry%%:*}
    if wait "${entry#*:}"; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$module.log")
        cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*cov: \([0-9]*\).*/\1/p' "$scratch/$module.log")
        echo "fuzz: $module: ok, $runs inputs in ${secs}s, coverage $cov"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "fuzz: $module: FAILED; input kept in $crashes/" >&2
        grep -v '^"' "$scratch/$module.log" | tail -n 40 >&2
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

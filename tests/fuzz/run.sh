#!/usr/bin/env bash
# Runs libFuzzer targets one after another (make fuzz):
#   BUILD=build-fuzz FUZZ_SECONDS=60 tests/fuzz/run.sh spec tar jpeg ...
# For each target: replays tests/fuzz/regressions/<name>/ once, then fuzzes
# for FUZZ_SECONDS from tests/fuzz/corpus/<name>/ (seeds, read only) plus
# $BUILD/fuzz-corpus/<name>/ (what earlier runs found; kept between runs),
# with tests/fuzz/<name>.dict when it exists. Crashes, leaks, timeouts and
# out-of-memory inputs land in $BUILD/fuzz-artifacts/<name>/; the log is
# $BUILD/fuzz-logs/<name>.log. Ends with one summary line; exit 1 if any
# target failed.
#   FUZZ_TIMEOUT  seconds one input may take (default 25: a hang is a bug)
#   FUZZ_RSS_MB   memory limit (default 2048)
#   FUZZ_ARGS     extra libFuzzer flags
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-60}
timeout=${FUZZ_TIMEOUT:-25}
rss=${FUZZ_RSS_MB:-2048}
failed=()
report=()
for name in "$@"; do
    bin=$BUILD/fuzz/fuzz_$name
    work=$BUILD/fuzz-corpus/$name
    art=$BUILD/fuzz-artifacts/$name
    log=$BUILD/fuzz-logs/$name.log
    mkdir -p "$work" "$art" "$(dirname "$log")"
    : >"$log"
    if [ ! -x "$bin" ]; then
        echo "  fuzz_$name: $bin missing" >&2
        failed+=("$name")
        continue
    fi
    common=(-rss_limit_mb="$rss" -timeout="$timeout" -artifact_prefix="$art/")
    regs=()
    if [ -d "tests/fuzz/regressions/$name" ]; then
        while IFS= read -r -d '' f; do
            regs+=("$f")
        done < <(find "tests/fuzz/regressions/$name" -type f -print0 | sort -z)
    fi
    if [ ${#regs[@]} -gt 0 ] && ! "$bin" "${common[@]}" "${regs[@]}" >>"$log" 2>&1; then
        echo "  fuzz_$name: a regression input fails again (see $log)"
        tail -n 40 "$log"
        failed+=("$name")
        continue
    fi
    dict=()
    if [ -f "tests/fuzz/$name.dict" ]; then
        dict=(-dict="tests/fuzz/$name.dict")
    fi
    # shellcheck disable=SC2086
    "$bin" "${common[@]}" "${dict[@]}" -max_total_time="$secs" -print_final_stats=1 \
        ${FUZZ_ARGS:-} "$work" "tests/fuzz/corpus/$name" >>"$log" 2>&1
    rc=$?
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | sed 's/cov: //')
    if [ $rc -ne 0 ]; then
        echo "  fuzz_$name: FAILED (exit $rc) after ${runs:-?} runs; artifacts in $art/"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*fuzz check failed|artifact_prefix|Test unit written)' \
            "$log" | head -n 10
        failed+=("$name")
    else
        printf '  fuzz_%-10s %ss, %s runs, coverage %s edges\n' "$name" "$secs" "${runs:-?}" \
            "${cov:-?}"
    fi
    report+=("$name:${runs:-?}")
done
n=$#
echo "fuzz: $n targets, ${#failed[@]} failed, ${secs}s each (${report[*]:-})"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed targets: ${failed[*]}"
    exit 1
fi

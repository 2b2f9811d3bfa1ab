#!/usr/bin/env bash
# Runs every Check unit-test binary given as arguments, TEST_JOBS at once
# (default: the number of CPUs); prints each suite's result as it ends and one
# closing "N passed, N failed" line. Exit 1 if any failed.
set -u
JOBS="${TEST_JOBS:-$(nproc)}"
case "$JOBS" in '' | *[!0-9]* | 0) echo "TEST_JOBS must be a positive integer" >&2; exit 2 ;; esac
# Check's per-test timeouts catch hangs; suites side by side on a busy machine
# run slower than alone, which is not a hang.
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-3}"
OUT="$(mktemp -d /tmp/sluice-unit.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
pass=0
fail=0
failed_suites=()
declare -A running=() started=()
t0=$(date +%s)

# report PID RC: the result of the suite that process ran.
report() {
    local t=${running[$1]} rc=$2 secs=$(( $(date +%s) - ${started[$1]} ))
    unset "running[$1]" "started[$1]"
    local out line checks fails nf=0
    out=$(cat "$OUT/$(basename "$t")")
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    checks=$(printf '%s' "$line" | sed -nE 's/.*Checks: ([0-9]+).*/\1/p')
    fails=$(printf '%s' "$line" | sed -nE 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2/p')
    [ -z "$checks" ] && checks=0
    if [ -n "$fails" ]; then
        nf=$(( ${fails% *} + ${fails#* } ))
    fi
    if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
        [ "$nf" -eq 0 ] && nf=1
        failed_suites+=("$(basename "$t")")
        printf '%s\n' "$out" | grep -vE ':P:|^Running suite' | tail -n 30
    fi
    pass=$((pass + checks - nf))
    fail=$((fail + nf))
    printf '  %-28s %3ss %s\n' "$(basename "$t")" "$secs" "${line:-no result (exit $rc)}"
}

reap_one() {
    local pid rc
    wait -n -p pid "${!running[@]}"
    rc=$?
    report "$pid" "$rc"
}

for t in "$@"; do
    while [ ${#running[@]} -ge "$JOBS" ]; do reap_one; done
    "$t" >"$OUT/$(basename "$t")" 2>&1 &
    running[$!]=$t
    started[$!]=$(date +%s)
done
while [ ${#running[@]} -gt 0 ]; do reap_one; done

if [ ${#failed_suites[@]} -gt 0 ]; then
    echo "failed suites: ${failed_suites[*]}"
fi
echo "unit: $pass passed, $fail failed ($(( $(date +%s) - t0 ))s)"
[ $fail -eq 0 ]

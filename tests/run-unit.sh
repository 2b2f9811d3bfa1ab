#!/usr/bin/env bash
# Runs every Check unit-test binary given as arguments; prints each suite's
# result and one closing "N passed, N failed" line. Exit 1 if any failed.
set -u
pass=0
fail=0
failed_suites=()
for t in "$@"; do
    out=$("$t" 2>&1)
    rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    checks=$(printf '%s' "$line" | sed -nE 's/.*Checks: ([0-9]+).*/\1/p')
    fails=$(printf '%s' "$line" | sed -nE 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1 \2/p')
    if [ -z "$checks" ]; then
        checks=0
    fi
    nf=0
    if [ -n "$fails" ]; then
        nf=$(( ${fails% *} + ${fails#* } ))
    fi
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        [ "$nf" -eq 0 ] && nf=1
        failed_suites+=("$(basename "$t")")
        printf '%s\n' "$out" | grep -vE ':P:|^Running suite' | tail -n 30
    fi
    pass=$((pass + checks - nf))
    fail=$((fail + nf))
    printf '  %-28s %s\n' "$(basename "$t")" "${line:-no result (exit $rc)}"
done
if [ ${#failed_suites[@]} -gt 0 ]; then
    echo "failed suites: ${failed_suites[*]}"
fi
echo "unit: $pass passed, $fail failed"
[ $fail -eq 0 ]

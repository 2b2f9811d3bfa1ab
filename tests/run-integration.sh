#!/usr/bin/env bash
# Runs every tests/integration/test_*.sh (each starts and stops the daemons it
# needs); prints one closing "N passed, N failed" line. Exit 1 if any failed.
set -u
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}"
pass=0
fail=0
failed=()
for t in tests/integration/test_*.sh; do
    [ -e "$t" ] || continue
    start=$(date +%s)
    log="$BUILD/integration-logs/$(basename "$t" .sh).log"
    mkdir -p "$(dirname "$log")"
    if timeout 600 bash "$t" >"$log" 2>&1; then
        pass=$((pass + 1))
        printf '  PASS %-40s %3ss\n' "$(basename "$t")" $(( $(date +%s) - start ))
    else
        fail=$((fail + 1))
        failed+=("$t")
        printf '  FAIL %-40s %3ss (log: %s)\n' "$(basename "$t")" $(( $(date +%s) - start )) "$log"
        tail -n 40 "$log" | sed 's/^/    | /'
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
fi
echo "integration: $pass passed, $fail failed"
[ $fail -eq 0 ]

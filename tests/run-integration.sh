#!/usr/bin/env bash
# Runs every tests/integration/test_*.sh (each starts and stops the daemons it
# needs); prints a line per test as it ends and one closing "N passed, N
# failed" line. Exit 1 if any failed.
#
# TEST_JOBS tests run at once (default: one more than the CPUs). Most tests
# spend their time waiting on daemons, sockets and sleeps: one at a time, the
# suite took 21 minutes of a 2-core machine's wall clock; two at a time, 12. Each test has its own temporary directory, ports and journal
# (lib.sh). A test whose header has a line "# test: alone" runs with no other
# test beside it: those that judge a CPU or rate measurement a neighbour would
# disturb. Tests with "# test: cluster-emu" take scripts/cluster-emu's
# machine-wide lock: they run one at a time, beside other tests (their hosts
# are CPU-quota'd cgroups, and they judge no timing).
# Give test names (test_x.sh or test_x) as arguments to run only those.
set -u
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}"
JOBS="${TEST_JOBS:-$(($(nproc) + 1))}"
case "$JOBS" in '' | *[!0-9]* | 0) echo "TEST_JOBS must be a positive integer" >&2; exit 2 ;; esac
LOGS="$BUILD/integration-logs"
mkdir -p "$LOGS"

tests=()
if [ $# -gt 0 ]; then
    for a in "$@"; do
        t="tests/integration/$(basename "${a%.sh}").sh"
        [ -e "$t" ] || { echo "no such test: $a" >&2; exit 2; }
        tests+=("$t")
    done
else
    for t in tests/integration/test_*.sh; do
        [ -e "$t" ] && tests+=("$t")
    done
fi
# The "alone" tests last, one after the other: each drains the tests
# running before it starts, and one drain costs less than one per test.
normal=() last=()
for t in "${tests[@]}"; do
    if head -n 30 "$t" | grep -q '^# test: alone'; then last+=("$t"); else normal+=("$t"); fi
done
tests=("${normal[@]}" "${last[@]}")

pass=0
fail=0
failed=()
declare -A running=() started=()
t0=$(date +%s)

# finish PID: reports the test that process ran.
finish() {
    local pid=$1 rc=$2 t=${running[$1]}
    local log="$LOGS/$(basename "$t" .sh).log" secs=$(( $(date +%s) - ${started[$1]} ))
    unset "running[$pid]" "started[$pid]"
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1))
        printf '  PASS %-40s %3ss\n' "$(basename "$t")" "$secs"
    else
        fail=$((fail + 1))
        failed+=("$t")
        printf '  FAIL %-40s %3ss (log: %s)\n' "$(basename "$t")" "$secs" "$log"
        tail -n 40 "$log" | sed 's/^/    | /'
    fi
}

# reap_one: waits for any running test to end.
reap_one() {
    local pid rc
    wait -n -p pid "${!running[@]}"
    rc=$?
    finish "$pid" "$rc"
}

emu_pid= # the cluster-emu test running, if any
# A cluster-emu test that finds another running goes to the back of the
# queue once; the tests after it start meanwhile.
declare -A deferred=()
i=0
while [ $i -lt ${#tests[@]} ]; do
    t=${tests[$i]}
    i=$((i + 1))
    alone=0 emu=0
    head -n 30 "$t" | grep -q '^# test: alone' && alone=1
    head -n 30 "$t" | grep -q '^# test: cluster-emu' && emu=1
    if [ $alone = 1 ]; then
        while [ ${#running[@]} -gt 0 ]; do reap_one; done
    else
        while [ ${#running[@]} -ge "$JOBS" ]; do reap_one; done
    fi
    if [ $emu = 1 ] && [ -n "$emu_pid" ] && [ -n "${running[$emu_pid]+x}" ]; then
        if [ $i -lt ${#tests[@]} ] && [ -z "${deferred[$t]+x}" ]; then
            deferred[$t]=1
            tests+=("$t")
            continue
        fi
        while [ -n "${running[$emu_pid]+x}" ]; do reap_one; done
    fi
    timeout 600 bash "$t" >"$LOGS/$(basename "$t" .sh).log" 2>&1 &
    running[$!]=$t
    started[$!]=$(date +%s)
    [ $emu = 1 ] && emu_pid=$!
    if [ $alone = 1 ]; then
        reap_one
    fi
done
while [ ${#running[@]} -gt 0 ]; do reap_one; done

if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
fi
echo "integration: $pass passed, $fail failed ($(( $(date +%s) - t0 ))s)"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# test: cluster-emu (run-integration.sh): takes the machine-wide cluster-emu lock
# make bench-quick's harness: scripts/bench-cluster --quick (scenario A on an emulated
# cluster, policies off and auto, 8 s each, 100 generated images) runs and prints its
# table. Prints the figures; asserts only that both policies ran and the table came
# out with the planner's prediction and its error next to each, never a timing. Needs root and `ip netns` (as scripts/cluster-emu); SKIP otherwise.
source "$(dirname "$0")/lib.sh"

skip() {
    echo "SKIP: $*"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null && command -v tc >/dev/null && command -v nsenter >/dev/null &&
    command -v flock >/dev/null || skip "needs ip, tc, nsenter, flock"
ip netns list >/dev/null 2>&1 || skip "ip netns unavailable"
[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null ||
    skip "no cgroup CPU controller"

start=$(date +%s)
BUILD="$BUILD" "$ROOT/scripts/bench-cluster" --quick --data "$TMP/data" >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/out" "$TMP/err"; fail "bench-cluster --quick failed"; }
cat "$TMP/out"
echo "bench-cluster --quick took $(( $(date +%s) - start )) s"
grep -q '^### A: ' "$TMP/out" || fail "no scenario A heading"
grep -q '^| policy | plan K:F | samples/s | predicted | error |' "$TMP/out" ||
    fail "no table header (with predicted and error)"
# off's prediction is the planner's off candidate (sluice plan --json); auto's is the
# final plan's, from sluice bench --json, with its binding term; both with an error
grep -Eq '^\| off \| [0-9]+:[0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [-+][0-9]+ % \|' "$TMP/out" ||
    fail "no off row with a prediction"
grep -Eq '^\| \*\*auto\*\* \| [0-9]+:[0-9.]+( \+zstd)? \| [0-9.]+ \| [0-9.]+ \([a-z_]+(, v[0-9]+)?\) \| [-+][0-9]+ % \|' \
    "$TMP/out" || fail "no auto row with a prediction"
grep -q '^Limit: ' "$TMP/out" || fail "no limit line"
grep -Eq '^Targets: prediction within 15 % \(auto [-+][0-9]+ %\): (met|\*\*not met\*\*)' \
    "$TMP/out" || fail "no prediction target"
! grep -q FAILED "$TMP/err" || fail "a policy run failed: $(cat "$TMP/err")"
echo "PASS"

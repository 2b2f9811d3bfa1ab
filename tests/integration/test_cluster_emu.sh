#!/usr/bin/env bash
# test: cluster-emu (run-integration.sh): takes the machine-wide cluster-emu lock
# scripts/cluster-emu: a job on an emulated cluster (dispatcher, GPU node and two
# CPU hosts as network namespaces, 1gbit tbf links, cgroup CPU quotas) gives the
# --local digests; the hosts really are shaped and capped; nothing with the
# run's prefix is left afterwards; a second run at the same time is refused; a
# failing CMD, a daemon that cannot start and SIGTERM all still tear down.
# Needs root and `ip netns`; prints SKIP otherwise.
source "$(dirname "$0")/lib.sh"
EMU="$ROOT/scripts/cluster-emu"

skip() {
    echo "SKIP: $*"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null && command -v tc >/dev/null && command -v nsenter >/dev/null &&
    command -v flock >/dev/null || skip "needs ip, tc, nsenter, flock"
ip netns list >/dev/null 2>&1 || skip "ip netns unavailable"
if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG=v1
elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    CG=v2
else
    CG=none # no CPU controller: hosts without CPU limits
fi
CPU_ARGS=(--worker-cpu 0.5 --client-cpu 0.25)
[ "$CG" != none ] || CPU_ARGS=(--worker-cpu none --client-cpu none)

# Runs of cluster-emu in the background are stopped with SIGTERM (they tear
# down themselves); `cleanup` is the safety net for anything a failure left.
BG=()
emu_cleanup() {
    local rc=$? p
    for p in "${BG[@]:-}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done
    for p in "${BG[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
    if [ -n "$(ip netns list | awk '$1 ~ /^slemu-/')" ]; then "$EMU" cleanup >&2 || true; fi
    set +e
    (exit $rc) # lib.sh's cleanup takes the status from $?
    cleanup
}
trap emu_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# leftovers PREFIX: prints every namespace, cgroup, interface or process of that run
leftovers() {
    local p=$1
    ip netns list | awk -v p="$p-" 'index($1, p) == 1'
    ls -d /sys/fs/cgroup/cpu/"$p"-* /sys/fs/cgroup/"$p"-* 2>/dev/null || true
    ip -o link show | grep -F "$p" || true
    pgrep -af -- "--data-root $TMP/data" || true
}

make_images "$TMP/data" 2 10
write_train_spec "$TMP/spec.json" 2
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq 40 ] || fail "local run: expected 40 digests"
links_before=$(ip -o link show | wc -l)

# 1. The job on the emulated cluster, everything offloaded; CMD also reports
#    what the GPU node looks like from inside.
"$EMU" run --workers 2 --link 1gbit "${CPU_ARGS[@]}" --data "$TMP/data" --logs "$TMP/emu1" -- \
    sh -c 'echo "$SLUICE_EMU_PREFIX" >"$1/prefix"
           ip -o -4 addr show >"$1/addr"; ip route >"$1/route"
           cat /proc/self/cgroup >"$1/cgroup"
           tc -n "$SLUICE_EMU_PREFIX-w1" qdisc show dev eth0 >"$1/tc-w1"
           tc -n "$SLUICE_EMU_PREFIX-sw" qdisc show dev p-client >"$1/tc-sw-client"
           exec "$2" run "$1/spec.json" --dispatcher "$SLUICE_DISPATCHER" --data-root @DATA@ \
               --offload all --digests "$1/remote" --quiet --json >"$1/remote.json"' \
    sh "$TMP" "$BIN/sluice" 2>"$TMP/emu1.err" || {
    cat "$TMP/emu1.err" >&2
    fail "cluster-emu run failed"
}
cat "$TMP/emu1.err"
grep -q '^cluster-emu: SLUICE_DISPATCHER=192\.0\.2\.1:' "$TMP/emu1.err" || fail "SLUICE_DISPATCHER not printed"
sort "$TMP/remote" | cmp -s - "$TMP/local.s" || {
    sort "$TMP/remote" | diff - "$TMP/local.s" | head -5
    fail "emulated cluster: digests differ from --local"
}
grep -q '"local":0,' "$TMP/remote.json" || fail "offload all ran samples on the GPU node"
echo "emulated cluster, offload all: digests identical to --local"
grep -q ' 192\.0\.2\.2/24 ' "$TMP/addr" || fail "CMD did not run on 192.0.2.2: $(cat "$TMP/addr")"
[ "$(grep -cv '^192\.0\.2\.0/24 ' "$TMP/route")" -eq 0 ] || fail "the GPU node has a route out: $(cat "$TMP/route")"
grep -q 'tbf .*rate 1Gbit' "$TMP/tc-w1" || fail "w1's link is not shaped: $(cat "$TMP/tc-w1")"
grep -q 'tbf .*rate 1Gbit' "$TMP/tc-sw-client" || fail "the link into the GPU node is not shaped"
P1=$(cat "$TMP/prefix")
if [ "$CG" = v1 ]; then
    grep -qE ":cpu(,[a-z]+)*:/$P1-client\$" "$TMP/cgroup" || fail "CMD not in the client cgroup: $(cat "$TMP/cgroup")"
elif [ "$CG" = v2 ]; then
    grep -q "^0::/$P1-client\$" "$TMP/cgroup" || fail "CMD not in the client cgroup: $(cat "$TMP/cgroup")"
fi
echo "GPU node 192.0.2.2, no route out, links tbf 1Gbit, CPU cgroup $CG"
[ -z "$(leftovers "$P1")" ] || fail "left after the run: $(leftovers "$P1")"
[ "$(ip -o link show | wc -l)" -eq "$links_before" ] || fail "root namespace interfaces changed"
echo "nothing left of $P1"

# 2. A second run while one is active is refused and touches nothing of the
#    first; so is `cleanup`. The first also gets a worker added mid-run.
"$EMU" run --quiet --workers 1 "${CPU_ARGS[@]}" --data "$TMP/data" --add-worker-after 0.2 \
    --logs "$TMP/emu2" -- sh -c '
        echo "$SLUICE_EMU_PREFIX" >"$1/prefix2"
        touch "$1/started"
        for i in $(seq 1 100); do
            n=$(curl -sf "http://$SLUICE_DISPATCHER_HTTP/metrics" | awk "\$1 == \"sluice_workers\" {print \$2}")
            [ "${n:-0}" -ge 2 ] && { touch "$1/added"; break; }
            sleep 0.1
        done
        for i in $(seq 1 300); do [ -e "$1/release" ] && exit 0; sleep 0.1; done
        exit 9' sh "$TMP" 2>"$TMP/emu2.err" &
first=$!
BG+=("$first")
for _ in $(seq 1 200); do
    [ -e "$TMP/started" ] && break
    kill -0 "$first" 2>/dev/null || {
        cat "$TMP/emu2.err" >&2
        fail "the first run ended early"
    }
    sleep 0.05
done
[ -e "$TMP/started" ] || fail "the first run did not start its CMD"
P2=$(cat "$TMP/prefix2")
rc=0
"$EMU" run --workers 1 --data "$TMP/data" -- touch "$TMP/second-ran" 2>"$TMP/second.err" || rc=$?
[ "$rc" -eq 75 ] || fail "a second concurrent run was not refused (exit $rc)"
grep -q 'refusing to run twice' "$TMP/second.err" || fail "no refusal message: $(cat "$TMP/second.err")"
[ ! -e "$TMP/second-ran" ] || fail "the refused run ran its CMD"
rc=0
"$EMU" cleanup 2>/dev/null || rc=$?
[ "$rc" -eq 75 ] || fail "cleanup during an active run was not refused (exit $rc)"
[ -e "/run/netns/$P2-w1" ] && [ -e "/run/netns/$P2-client" ] || fail "a refused invocation removed the first run's hosts"
echo "second concurrent run and cleanup refused; the first run untouched"
for _ in $(seq 1 100); do
    [ -e "$TMP/added" ] && break
    sleep 0.05
done
[ -e "$TMP/added" ] || fail "--add-worker-after: the added worker did not register"
echo "worker added mid-run registered"
touch "$TMP/release"
rc=0
wait "$first" || rc=$?
[ "$rc" -eq 0 ] || {
    cat "$TMP/emu2.err" >&2
    fail "the first run failed (exit $rc)"
}
[ -z "$(leftovers "$P2")" ] || fail "left after the run: $(leftovers "$P2")"

# 3. A failing CMD: its status comes back, everything is torn down.
rc=0
"$EMU" run --quiet --workers 2 --link 1gbit "${CPU_ARGS[@]}" --data "$TMP/data" -- \
    sh -c 'echo "$SLUICE_EMU_PREFIX" >"$1/prefix3"; exit 3' sh "$TMP" || rc=$?
[ "$rc" -eq 3 ] || fail "failing CMD: expected exit 3, got $rc"
P3=$(cat "$TMP/prefix3")
[ -z "$(leftovers "$P3")" ] || fail "left after a failing CMD: $(leftovers "$P3")"
echo "failing CMD: exit 3 passed through, nothing left"

# 4. A daemon that cannot start fails the setup step; nothing is left.
rc=0
"$EMU" run --quiet --workers 1 --data "$TMP/data" --worker-args "--no-such-flag 1" -- \
    touch "$TMP/bad-ran" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 71 ] || fail "a worker that cannot start: expected exit 71, got $rc"
[ ! -e "$TMP/bad-ran" ] || fail "CMD ran although setup failed"
[ -z "$(leftovers slemu)" ] || fail "left after a failed setup: $(leftovers slemu)"
echo "failed setup: exit 71, nothing left"

# 5. SIGTERM mid-run tears down too.
"$EMU" run --quiet --workers 1 --data "$TMP/data" -- \
    sh -c 'echo "$SLUICE_EMU_PREFIX" >"$1/prefix5"; sleep 30' sh "$TMP" 2>/dev/null &
run=$!
BG+=("$run")
for _ in $(seq 1 200); do
    [ -s "$TMP/prefix5" ] && break
    sleep 0.05
done
[ -s "$TMP/prefix5" ] || fail "the run to be terminated did not start"
kill -TERM "$run"
rc=0
wait "$run" || rc=$?
[ "$rc" -eq 143 ] || fail "SIGTERM: expected exit 143, got $rc"
P5=$(cat "$TMP/prefix5")
[ -z "$(leftovers "$P5")" ] || fail "left after SIGTERM: $(leftovers "$P5")"
echo "SIGTERM: exit 143, nothing left"
echo "cluster-emu: all checks passed"

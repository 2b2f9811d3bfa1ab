#!/usr/bin/env bash
# sluice-worker on its own: CLI errors, retrying registration while the
# dispatcher is down, registering once it is up (its /status lists the
# worker), /status and /healthz on the worker, SIGHUP, SIGTERM -> exit 0.
# Run from the repository root; $BUILD (default build) holds the binaries.
set -u
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}"
WORKER="$BUILD/bin/sluice-worker"
DISPATCHER="$BUILD/bin/sluice-dispatcher"

TMP=$(mktemp -d /tmp/sluice-wk-basic.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    for f in "$TMP"/*.err; do
        [ -e "$f" ] || continue
        echo "--- $f"
        tail -n 20 "$f"
    done
    exit 1
}
ok() { echo "ok: $*"; }

# Waits up to $2 seconds for a file to contain a pattern.
wait_for() {
    local file=$1 secs=$2 pattern=$3
    for _ in $(seq 1 $((secs * 10))); do
        grep -q -- "$pattern" "$file" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# A free loopback port (bound and released; good enough on loopback).
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

[ -x "$WORKER" ] || fail "$WORKER not built"
mkdir -p "$TMP/data/train/a"

# ---- CLI
"$WORKER" --help >"$TMP/help.out" 2>&1 || fail "--help exit $?"
grep -q -- "--data-root" "$TMP/help.out" || fail "--help does not list --data-root"
ok "--help exits 0"

"$WORKER" --version >/dev/null 2>&1 || fail "--version exit $?"
ok "--version exits 0"

"$WORKER" --dispatcher 127.0.0.1:1 >/dev/null 2>"$TMP/nodr.err"
rc=$?
[ $rc -eq 2 ] || fail "missing --data-root: exit $rc, want 2"
grep -q "data-root" "$TMP/nodr.err" || fail "missing --data-root: message does not name it"
ok "missing --data-root -> exit 2"

"$WORKER" --dispatcher 127.0.0.1:1 --data-root "$TMP/nonexistent" >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "nonexistent data root: exit $rc, want 2"
ok "nonexistent data root -> exit 2"

printf '# worker\ndispatcher = 127.0.0.1:1\nthreads = lots\n' >"$TMP/bad.conf"
"$WORKER" --config "$TMP/bad.conf" --data-root "$TMP/data" >/dev/null 2>"$TMP/badconf.err"
rc=$?
[ $rc -eq 2 ] || fail "bad config: exit $rc, want 2"
grep -q "bad.conf:3" "$TMP/badconf.err" ||
    fail "bad config: message does not name bad.conf:3: $(cat "$TMP/badconf.err")"
ok "bad config file -> exit 2 naming file:line"

"$WORKER" --dispatcher 127.0.0.1:1 --data-root "$TMP/data" --bogus 1 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "unknown flag: exit $rc, want 2"
ok "unknown flag -> exit 2"

# ---- against a dispatcher that is not up yet
DPORT=$(free_port)
printf 'log_level = info\n' >"$TMP/worker.conf"
"$WORKER" --config "$TMP/worker.conf" --dispatcher "127.0.0.1:$DPORT" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2 \
    >"$TMP/worker.out" 2>"$TMP/worker.err" &
WPID=$!
PIDS+=("$WPID")
wait_for "$TMP/worker.out" 10 "^listening grpc=" || fail "worker printed no listening line"
LINE=$(head -n 1 "$TMP/worker.out")
echo "$LINE" | grep -Eq '^listening grpc=127\.0\.0\.1:[0-9]+ http=127\.0\.0\.1:[0-9]+$' ||
    fail "bad listening line: $LINE"
WGRPC=$(echo "$LINE" | sed -E 's/.*grpc=([^ ]+).*/\1/')
WHTTP=$(echo "$LINE" | sed -E 's/.*http=([^ ]+).*/\1/')
[ "$WGRPC" != "127.0.0.1:0" ] || fail "port not resolved: $LINE"
ok "listening line: $LINE"

wait_for "$TMP/worker.err" 10 "unreachable" || fail "no retry log line while the dispatcher is down"
# Alive after its third attempt (backoff 100 ms, 200 ms, ...), not after a guessed pause.
wait_for "$TMP/worker.err" 30 "(attempt 3)" || fail "worker did not retry while the dispatcher was down"
kill -0 "$WPID" 2>/dev/null || fail "worker died while the dispatcher was down"
ok "worker keeps retrying and stays alive while the dispatcher is down"

curl -sf "http://$WHTTP/healthz" | grep -q ok || fail "worker /healthz"
curl -sf "http://$WHTTP/status" >"$TMP/wstatus.json" || fail "worker /status"
grep -q '"state": "unregistered"' "$TMP/wstatus.json" ||
    fail "worker /status state: $(cat "$TMP/wstatus.json")"
curl -sf "http://$WHTTP/metrics" | grep -q "sluice_worker_registered 0" || fail "worker /metrics"
ok "worker /healthz, /status, /metrics"

# SIGHUP reloads log_level from the config file.
printf 'log_level = debug\n' >"$TMP/worker.conf"
kill -HUP "$WPID"
wait_for "$TMP/worker.err" 10 "SIGHUP: reloaded" || fail "SIGHUP did not reload"
kill -0 "$WPID" 2>/dev/null || fail "worker died on SIGHUP"
ok "SIGHUP reloads"

if [ -x "$DISPATCHER" ]; then
    "$DISPATCHER" --listen "127.0.0.1:$DPORT" --http 127.0.0.1:0 --journal none \
        >"$TMP/disp.out" 2>"$TMP/disp.err" &
    DPID=$!
    PIDS+=("$DPID")
    wait_for "$TMP/disp.out" 10 "^listening grpc=" || fail "dispatcher printed no listening line"
    DHTTP=$(head -n 1 "$TMP/disp.out" | sed -E 's/.*http=([^ ]+).*/\1/')
    # Backoff is capped at 5 s: the worker registers within a few seconds.
    wait_for "$TMP/worker.err" 15 "registered with dispatcher" || fail "worker did not register"
    ok "worker registered once the dispatcher came up"
    listed=0
    for _ in $(seq 1 50); do
        if curl -sf "http://$DHTTP/status" | grep -q "\"$WGRPC\""; then
            listed=1
            break
        fi
        sleep 0.1
    done
    [ $listed -eq 1 ] ||
        fail "dispatcher /status does not list $WGRPC: $(curl -s "http://$DHTTP/status")"
    ok "dispatcher /status lists the worker"
    curl -sf "http://$WHTTP/status" | grep -q '"state": "registered"' ||
        fail "worker /status does not say registered"
    ok "worker /status says registered"
else
    echo "skip: $DISPATCHER not built; registration checks skipped"
fi

# ---- SIGTERM -> exit 0, promptly
kill -TERM "$WPID"
for _ in $(seq 1 100); do
    kill -0 "$WPID" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$WPID" 2>/dev/null && fail "worker still running 10 s after SIGTERM"
wait "$WPID"
rc=$?
[ $rc -eq 0 ] || fail "worker exit $rc after SIGTERM, want 0"
ok "SIGTERM -> exit 0"

if [ -x "$DISPATCHER" ]; then
    kill -TERM "$DPID" 2>/dev/null
    wait "$DPID" 2>/dev/null
fi
echo "PASS"

#!/usr/bin/env bash
# sluice-dispatcher on its own: CLI (--help, bad config -> exit 2 naming
# FILE:LINE), listening line on ephemeral ports, /healthz /status /metrics,
# hostile HTTP (POST -> 405, unknown path -> 404, huge header -> 4xx),
# hostile gRPC (wrong protocol version -> 9, unknown method -> 12, garbage
# message -> 3, raw garbage bytes on the TCP port) with the daemon still
# alive afterwards, SIGHUP, and SIGTERM -> exit 0.
# Run from the repository root; $BUILD (default build) holds the binaries.
source "$(dirname "$0")/lib.sh"

DISP="$BIN/sluice-dispatcher"
PROBE="$ROOT/$BUILD/tools/rpc_probe"
[ -x "$DISP" ] || fail "$DISP not built"
[ -x "$PROBE" ] || fail "$PROBE not built"
ok() { echo "ok: $*"; }

# http_code URL [curl args...]
http_code() {
    local url=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" "$url" || true
}

# probe TARGET METHOD [args...]: prints the status code number.
probe() {
    { "$PROBE" "$@" 2>"$TMP/probe.err" || true; } | sed -nE 's/.*status=([0-9]+).*/\1/p' |
        head -n 1
}

alive() {
    kill -0 "$D_PID" 2>/dev/null || fail "dispatcher died ($1)"
    [ "$(curl -s --max-time 5 "http://$D_HTTP/healthz")" = "ok" ] ||
        fail "dispatcher /healthz not ok ($1)"
}

# ---- CLI
"$DISP" --help >"$TMP/help.out" 2>&1 || fail "--help exit $?"
grep -q -- "--worker-timeout-ms" "$TMP/help.out" || fail "--help lacks --worker-timeout-ms"
grep -q -- "--journal" "$TMP/help.out" || fail "--help lacks --journal"
ok "--help exits 0 and lists the flags"
"$DISP" --version | grep -q "sluice-dispatcher" || fail "--version"
ok "--version"

printf 'split_size = 128\n# fine\nworker_timeout_ms = soon\n' >"$TMP/bad.conf"
rc=0
"$DISP" --config "$TMP/bad.conf" >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
[ "$rc" -eq 2 ] || fail "bad config: exit $rc, want 2"
grep -q "bad.conf:3" "$TMP/bad.err" ||
    fail "bad config error lacks FILE:LINE: $(cat "$TMP/bad.err")"
[ ! -s "$TMP/bad.out" ] || fail "bad config printed to stdout"
ok "bad config -> exit 2 naming bad.conf:3"

printf 'no_such_key = 1\n' >"$TMP/unknown.conf"
rc=0
"$DISP" --config "$TMP/unknown.conf" >/dev/null 2>"$TMP/unknown.err" || rc=$?
[ "$rc" -eq 2 ] || fail "unknown key: exit $rc, want 2"
grep -q "unknown.conf:1" "$TMP/unknown.err" || fail "unknown key error: $(cat "$TMP/unknown.err")"
rc=0
"$DISP" --split-size -1 >/dev/null 2>"$TMP/range.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--split-size -1: exit $rc, want 2"
grep -q -- "--split-size" "$TMP/range.err" || fail "range error: $(cat "$TMP/range.err")"
rc=0
"$DISP" --no-such-flag >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "unknown flag: exit $rc, want 2"
rc=0
"$DISP" --heartbeat-ms 9000 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "heartbeat >= worker timeout: exit $rc, want 2"
ok "unknown key / out of range / unknown flag / inconsistent -> exit 2"

# ---- start on ephemeral ports, with a config file (reloadable log_level)
printf 'log_level = notice\nsplit_size = 64\n' >"$TMP/d.conf"
start_daemon D "$DISP" --config "$TMP/d.conf" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --journal "$TMP/journal"
[ "$(wc -l <"$TMP/D.out")" -eq 1 ] || fail "more than one stdout line"
grep -qE '^listening grpc=127\.0\.0\.1:[0-9]+ http=127\.0\.0\.1:[0-9]+$' "$TMP/D.out" ||
    fail "listening line: $(cat "$TMP/D.out")"
case "$D_GRPC" in *:0) fail "grpc port not resolved" ;; esac
case "$D_HTTP" in *:0) fail "http port not resolved" ;; esac
grep -q "journal" "$TMP/D.err" || fail "no warning about the unimplemented journal"
ok "listening grpc=$D_GRPC http=$D_HTTP"

# ---- HTTP
[ "$(curl -s --max-time 5 "http://$D_HTTP/healthz")" = "ok" ] || fail "/healthz"
curl -s --max-time 5 "http://$D_HTTP/status" >"$TMP/status.json" || fail "/status"
/usr/bin/python3 - "$TMP/status.json" <<'PY' || fail "/status JSON: $(cat "$TMP/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert isinstance(s["version"], str), s
assert s["uptime_sec"] >= 0, s
assert s["workers"] == [] and s["jobs"] == [], s
PY
curl -s -D "$TMP/status.hdr" -o /dev/null --max-time 5 "http://$D_HTTP/status"
grep -qi '^content-type: application/json' "$TMP/status.hdr" || fail "/status content type"
curl -s --max-time 5 "http://$D_HTTP/metrics" >"$TMP/metrics.txt"
for m in sluice_workers sluice_jobs sluice_splits_acked_total sluice_splits_reassigned_total; do
    grep -qE "^$m [0-9]+" "$TMP/metrics.txt" || fail "/metrics lacks $m"
done
[ "$(http_code "http://$D_HTTP/status" -I)" = "200" ] || fail "HEAD /status"
ok "/healthz /status /metrics HEAD"

[ "$(http_code "http://$D_HTTP/status" -X POST -d x=1)" = "405" ] || fail "POST not 405"
[ "$(http_code "http://$D_HTTP/status" -X DELETE)" = "405" ] || fail "DELETE not 405"
[ "$(http_code "http://$D_HTTP/nope")" = "404" ] || fail "unknown path not 404"
big=$(head -c 20000 /dev/zero | tr '\0' a)
code=$(http_code "http://$D_HTTP/status" -H "X-Big: $big")
case "$code" in 4??) ;; *) fail "huge header: $code, want 4xx" ;; esac
# A raw request line that is not HTTP at all.
exec 3<>"/dev/tcp/${D_HTTP%:*}/${D_HTTP##*:}"
printf '\x00\x01\x02 garbage\r\n\r\n' >&3
timeout 5 cat <&3 >/dev/null 2>&1 || true
exec 3<&- 3>&-
alive "after bad HTTP"
ok "POST/DELETE -> 405, unknown path -> 404, huge header -> $code, garbage -> still alive"

# ---- gRPC
T="$D_GRPC"
code=$(probe "$T" /sluice.Dispatcher/GetAssignment --version 2)
[ "$code" = "9" ] || fail "wrong version: status=$code, want 9 ($(cat "$TMP/probe.err"))"
code=$(probe "$T" /sluice.Dispatcher/NoSuchMethod)
[ "$code" = "12" ] || fail "unknown method: status=$code, want 12"
code=$(probe "$T" /sluice.Dispatcher/SubmitJob --garbage)
[ "$code" = "3" ] || fail "garbage message: status=$code, want 3"
code=$(probe "$T" /sluice.Dispatcher/Heartbeat --garbage --bytes 100000)
[ "$code" = "3" ] || fail "100 kB garbage message: status=$code, want 3"
code=$(probe "$T" /sluice.Dispatcher/GetAssignment)
[ "$code" = "5" ] || fail "GetAssignment of job 0: status=$code, want 5 (NOT_FOUND)"
code=$(probe "$T" /sluice.Dispatcher/SubmitJob)
[ "$code" = "3" ] || fail "SubmitJob with an empty spec: status=$code, want 3"
ok "gRPC: version -> 9, unknown method -> 12, garbage -> 3, unknown job -> 5, empty spec -> 3"

# Raw garbage straight onto the HTTP/2 port, then a half-open connection.
exec 3<>"/dev/tcp/${T%:*}/${T##*:}"
head -c 65536 /dev/urandom >&3 2>/dev/null || true
exec 3<&- 3>&-
exec 3<>"/dev/tcp/${T%:*}/${T##*:}"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff' >&3 2>/dev/null || true
exec 3<&- 3>&-
code=$(probe "$T" /sluice.Dispatcher/GetAssignment)
[ "$code" = "5" ] || fail "after raw garbage: status=$code, want 5"
alive "after raw gRPC garbage"
ok "raw garbage on the gRPC port -> still serving"

# ---- SIGHUP: reload log_level (a bad file is refused, the daemon lives on)
printf 'log_level = debug\n' >"$TMP/d.conf"
kill -HUP "$D_PID"
for _ in $(seq 1 50); do
    grep -q "reloaded" "$TMP/D.err" && break
    sleep 0.1
done
grep -q "reloaded" "$TMP/D.err" || fail "SIGHUP: no reload logged"
printf 'log_level = loud\n' >"$TMP/d.conf"
kill -HUP "$D_PID"
for _ in $(seq 1 50); do
    grep -q "reload failed" "$TMP/D.err" && break
    sleep 0.1
done
grep -q "d.conf:1" "$TMP/D.err" || fail "SIGHUP with a bad file: no FILE:LINE error"
alive "after SIGHUP"
ok "SIGHUP reloads log_level, refuses a bad file"

# ---- SIGTERM -> exit 0
kill -TERM "$D_PID"
rc=0
wait "$D_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "SIGTERM: exit $rc, want 0 ($(tail -n 5 "$TMP/D.err"))"
ok "SIGTERM -> exit 0"

# ---- a taken port -> exit 1 (runtime), not a hang
start_daemon E "$DISP" --listen 127.0.0.1:0 --http 127.0.0.1:0
rc=0
timeout 20 "$DISP" --listen "$E_GRPC" --http 127.0.0.1:0 --journal none >/dev/null 2>"$TMP/busy.err" || rc=$?
[ "$rc" -eq 1 ] || fail "busy grpc port: exit $rc, want 1 ($(cat "$TMP/busy.err"))"
rc=0
timeout 20 "$DISP" --listen 127.0.0.1:0 --http "$E_HTTP" --journal none >/dev/null 2>"$TMP/busy2.err" || rc=$?
[ "$rc" -eq 1 ] || fail "busy http port: exit $rc, want 1 ($(cat "$TMP/busy2.err"))"
kill -TERM "$E_PID"
wait "$E_PID" || fail "second dispatcher: SIGTERM exit $?"
ok "busy ports -> exit 1"
echo "PASS"

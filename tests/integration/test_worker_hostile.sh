#!/usr/bin/env bash
# Hostile input on the WORKER's gRPC port (invariant 4: bad input never kills
# a daemon): unknown method -> 12, wrong protocol version -> 9, garbage bytes
# -> 3, a message over the receive limit -> 8, Fetch without a job -> 3 (a
# unary probe of the stream method still gets a clean status), raw garbage
# and a half-open HTTP/2 preface on the TCP port. Afterwards the worker still
# serves: a job through it gives the --local digests.
source "$(dirname "$0")/lib.sh"

PROBE="$ROOT/$BUILD/tools/rpc_probe"
[ -x "$PROBE" ] || fail "$PROBE not built"
ok() { echo "ok: $*"; }

# probe TARGET METHOD [args...]: prints the status code number.
probe() {
    { "$PROBE" "$@" 2>"$TMP/probe.err" || true; } | sed -nE 's/.*status=([0-9]+).*/\1/p' |
        head -n 1
}

alive() {
    kill -0 "$W_PID" 2>/dev/null || fail "worker died ($1)"
    [ "$(curl -s --max-time 5 "http://$W_HTTP/healthz")" = "ok" ] ||
        fail "worker /healthz not ok ($1)"
}

make_images "$TMP/data" 2 6
write_train_spec "$TMP/spec.json" 1
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 1 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --heartbeat-ms 100
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
T="$W_GRPC"

code=$(probe "$T" /sluice.Worker/NoSuchMethod)
[ "$code" = "12" ] || fail "unknown method: status=$code, want 12 ($(cat "$TMP/probe.err"))"
code=$(probe "$T" /sluice.Dispatcher/Heartbeat)
[ "$code" = "12" ] || fail "a dispatcher method on the worker: status=$code, want 12"
code=$(probe "$T" /sluice.Worker/Fetch --version 2)
[ "$code" = "9" ] || fail "wrong version: status=$code, want 9"
code=$(probe "$T" /sluice.Worker/Fetch --version 0)
[ "$code" = "9" ] || fail "version 0: status=$code, want 9"
code=$(probe "$T" /sluice.Worker/Fetch --garbage)
[ "$code" = "3" ] || fail "garbage message: status=$code, want 3"
code=$(probe "$T" /sluice.Worker/Fetch --garbage --bytes 100000)
[ "$code" = "3" ] || fail "100 kB garbage message: status=$code, want 3"
# The worker accepts max_message_bytes (8 MiB default) + 64 KiB of framing.
code=$(probe "$T" /sluice.Worker/Fetch --bytes 9000000)
[ "$code" = "8" ] || fail "9 MB message: status=$code, want 8"
# Fetch is a stream method; a unary probe is its first (and only) request,
# which names no job: INVALID_ARGUMENT, not a hang.
code=$(probe "$T" /sluice.Worker/Fetch --timeout 10000)
[ "$code" = "3" ] || fail "Fetch without job_id: status=$code, want 3"
alive "after probes"
ok "gRPC: unknown method -> 12, version -> 9, garbage -> 3, oversized -> 8, Fetch w/o job -> 3"

# Raw garbage straight onto the HTTP/2 port, then a half-open connection.
exec 3<>"/dev/tcp/${T%:*}/${T##*:}"
head -c 65536 /dev/urandom >&3 2>/dev/null || true
exec 3<&- 3>&-
exec 3<>"/dev/tcp/${T%:*}/${T##*:}"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\xff' >&3 2>/dev/null || true
exec 3<&- 3>&-
# A connection that stays open while the rest goes on.
exec 4<>"/dev/tcp/${T%:*}/${T##*:}"
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' >&4 2>/dev/null || true
code=$(probe "$T" /sluice.Worker/NoSuchMethod)
[ "$code" = "12" ] || fail "after raw garbage: status=$code, want 12"
alive "after raw garbage"
ok "raw garbage and a half-open connection on the gRPC port -> still serving"

# Still does real work: a job through it gives the --local digests.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --digests "$TMP/remote" --json >"$TMP/remote.json" ||
    fail "job after the hostile input failed"
exec 4<&- 4>&-
sort "$TMP/remote" | cmp -s - "$TMP/local.s" || fail "digests differ from --local"
grep -q '"local":0,' "$TMP/remote.json" || fail "the job did not run on the worker"
alive "after the job"
ok "a job through the worker afterwards: digests identical to --local"
echo "worker hostile: ok"

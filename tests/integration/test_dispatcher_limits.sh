#!/usr/bin/env bash
# What a peer can make the dispatcher hold (docs/limits.md): a request over
# DISP_MAX_REQUEST_BYTES (37 MiB) is refused with RESOURCE_EXHAUSTED (8) by
# the transport and the daemon stays up and keeps answering; a request of
# the largest legitimate size (a SubmitJob with 8 Mi sample costs, ~33 MiB)
# still reaches the handler (which judges its content: not 8).
# Run from the repository root; $BUILD (default build) holds the binaries.
source "$(dirname "$0")/lib.sh"

PROBE="$ROOT/$BUILD/tools/rpc_probe"
[ -x "$PROBE" ] || fail "$PROBE not built"
ok() { echo "ok: $*"; }

# probe METHOD [args...]: prints the status code number.
probe() {
    { "$PROBE" "$D_GRPC" "$@" --timeout 60000 2>"$TMP/probe.err" || true; } |
        sed -nE 's/.*status=([0-9]+).*/\1/p' | head -n 1
}
alive() {
    kill -0 "$D_PID" 2>/dev/null || fail "dispatcher died ($1)"
    [ "$(curl -s --max-time 5 "http://$D_HTTP/healthz")" = "ok" ] ||
        fail "dispatcher /healthz not ok ($1)"
}

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0

code=$(probe /sluice.Dispatcher/SubmitJob --bytes $((40 << 20)))
[ "$code" = 8 ] || fail "40 MiB SubmitJob: status '$code', not 8 (RESOURCE_EXHAUSTED)"
alive "after a 40 MiB request"
code=$(probe /sluice.Dispatcher/Heartbeat --bytes $((40 << 20)))
[ "$code" = 8 ] || fail "40 MiB Heartbeat: status '$code', not 8"
ok "40 MiB requests refused with RESOURCE_EXHAUSTED, dispatcher alive"

code=$(probe /sluice.Dispatcher/SubmitJob --bytes $((33 << 20)))
[ -n "$code" ] && [ "$code" != 8 ] || fail "33 MiB SubmitJob: status '$code' (must reach the handler)"
alive "after a 33 MiB request"
code=$(probe /sluice.Dispatcher/Heartbeat)
[ -n "$code" ] && [ "$code" != 8 ] && [ "$code" != 14 ] || fail "small Heartbeat after: status '$code'"
ok "a 33 MiB SubmitJob reaches the handler (status $code); small calls still served"
echo PASS

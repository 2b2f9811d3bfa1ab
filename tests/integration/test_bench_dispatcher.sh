#!/usr/bin/env bash
# scripts/bench-dispatcher's contract on a small load (50 simulated workers, 4 jobs,
# 400 acks/s, 3 s, journal on): the --json line holds dispatcher_cpu, p99_ms_max and
# errors; the real dispatcher answered every call (errors 0) and took the acks; the
# clients ack as the client library does (one AckSplits per job per 100 ms carrying
# several splits) unless --ack-interval-ms 0 (one call per split); a bad flag is a
# usage error (exit 2). Asserts no timing.
source "$(dirname "$0")/lib.sh"

[ -x "$ROOT/$BUILD/tools/bench_dispatcher" ] || fail "$BUILD/tools/bench_dispatcher not built"

run_bench() {
    JOURNAL_PARENT="$TMP" BUILD="$BUILD" "$ROOT/scripts/bench-dispatcher" --workers 50 --jobs 4 \
        --ack-rate 400 --seconds 3 --journal --json "$@" >"$TMP/out" 2>"$TMP/err" ||
        { cat "$TMP/out" "$TMP/err"; fail "bench-dispatcher $* failed"; }
    cat "$TMP/out"
    tail -n 1 "$TMP/out" >"$TMP/json"
}

check_json() { # PYTHON-EXPRESSION over j: must hold
    /usr/bin/python3 - "$TMP/json" "$1" <<'EOF' || fail "bench-dispatcher --json: $1 does not hold: $(cat "$TMP/json")"
import json, sys
j = json.load(open(sys.argv[1]))
m = j["methods"]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

run_bench
check_json 'all(k in j for k in ("dispatcher_cpu", "p99_ms_max", "errors"))'
check_json 'j["errors"] == 0 and j["journal"] and j["ack_interval_ms"] == 100'
check_json 'j["acks_per_sec"] > 100 and j["heartbeats_per_sec"] > 10'
# Batched: each AckSplits carries several splits (400/s over 4 jobs = 10 per 100 ms).
check_json 'm["AckSplits"]["calls"] * 3 < j["acks_per_sec"] * j["seconds"]'
check_json 'm["Heartbeat"]["errors"] == 0 and m["AckSplits"]["errors"] == 0'
# The journal directory lived under JOURNAL_PARENT and is gone again.
[ -z "$(ls -A "$TMP" | grep bench-dispatcher || true)" ] || fail "the journal directory was left behind"

run_bench --ack-interval-ms 0
check_json 'j["errors"] == 0 and j["ack_interval_ms"] == 0'
# One call per split.
check_json 'abs(m["AckSplits"]["calls"] - j["acks_per_sec"] * j["seconds"]) <= 1'

if "$ROOT/scripts/bench-dispatcher" --no-such-flag >"$TMP/out" 2>&1; then
    fail "a bad flag was accepted"
else
    rc=$?
    [ "$rc" = 2 ] || fail "a bad flag exited $rc, not 2"
    grep -q '^usage: ' "$TMP/out" || fail "no usage line: $(cat "$TMP/out")"
fi
echo "PASS"

#!/usr/bin/env bash
# Job capabilities (docs/protocol.md "Job capabilities"): a second client that
# holds the cluster token but not the job's secret tries to Fetch the job's
# stream from its worker (with no secret and a wrong one, over and over,
# also while the owner's stream is re-opened after a worker restart),
# GetAssignment, AckSplits (acks, received, retries), ReportRates and
# CloseJob, and to join a multi-rank job by name as a rank. Each is refused
# with PERMISSION_DENIED, and the owner's digests equal the --local run's
# (every sample exactly once, as without the intruder).
source "$(dirname "$0")/lib.sh"
INTR="$ROOT/$BUILD/tools/intruder"
[ -x "$INTR" ] || fail "$INTR not built"

make_images "$TMP/data" 2 12 # 24 samples
write_train_spec "$TMP/spec.json" 3
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 1 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
umask 077
printf 'cluster-token-0123\n' >"$TMP/token"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --heartbeat-ms 100 --worker-timeout-ms 1500 --token-file "$TMP/token"
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --token-file "$TMP/token"

# The owner, slowed down so that the intruder acts while the job runs.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --max-rate 12 --token-file "$TMP/token" \
    --digests "$TMP/owner" >"$TMP/owner.out" 2>"$TMP/owner.err" &
OWNER=$!
PIDS+=("$OWNER")

JOB=""
for _ in $(seq 1 100); do
    JOB=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c 'import json,sys
j=json.load(sys.stdin)["jobs"]
print(j[0]["id"] if j else "")' || true)
    [ -n "$JOB" ] && break
    sleep 0.05
done
[ -n "$JOB" ] || fail "the owner's job never showed in /status"

# expect_denied WHAT CMD...: the intruder's line must be PERMISSION_DENIED (7).
expect_denied() {
    local what=$1
    shift
    local out
    out=$("$INTR" "$@" --token-file "$TMP/token") || fail "$what: intruder failed"
    case "$out" in
    "status=7 "*) ;;
    *) fail "$what: expected PERMISSION_DENIED, got: $out" ;;
    esac
}

# Fetch from the worker in a loop for the whole run: never served, never
# holding the job's stream slot (the owner's stream is never refused).
(
    while kill -0 "$OWNER" 2>/dev/null; do
        "$INTR" "$W1_GRPC" fetch --job "$JOB" --token-file "$TMP/token" --timeout 3000
        "$INTR" "$W1_GRPC" fetch --job "$JOB" --secret wrong-secret-0123456789abcdef \
            --token-file "$TMP/token" --timeout 3000
        sleep 0.02
    done >"$TMP/fetches" 2>&1
) &
PIDS+=("$!")
LOOP=$!

for s in "" "--secret guess-0123456789abcdef"; do
    # shellcheck disable=SC2086
    {
        expect_denied "GetAssignment ${s:-without secret}" "$D_GRPC" assign --job "$JOB" $s
        expect_denied "AckSplits ${s:-without secret}" "$D_GRPC" ack --job "$JOB" $s
        expect_denied "ReportRates ${s:-without secret}" "$D_GRPC" rates --job "$JOB" $s
        expect_denied "CloseJob ${s:-without secret}" "$D_GRPC" close --job "$JOB" $s
    }
done
echo "GetAssignment, AckSplits, ReportRates, CloseJob without / with a wrong secret: denied"

# The owner reconnects: its worker restarts on the same port mid-run, and
# the intruder's loop keeps trying the new one.
sleep 1
kill -9 "$W1_PID"
start_daemon W1b "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen "$W1_GRPC" \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --token-file "$TMP/token"

wait "$OWNER" || {
    cat "$TMP/owner.err"
    fail "the owner's run failed"
}
wait "$LOOP" || true
sort "$TMP/owner" >"$TMP/owner.s"
cmp -s "$TMP/owner.s" "$TMP/local.s" || fail "owner's digests differ from --local"
n=$(grep -c '^status=' "$TMP/fetches" || true)
[ "$n" -ge 4 ] || fail "the intruder's Fetch loop ran only $n times"
# Around the worker's restart a Fetch may find no server (14 UNAVAILABLE) or
# one not serving yet, and run into its deadline (4 DEADLINE_EXCEEDED; seen
# once in ~10 make check runs). Neither is served; anything else is a failure.
if grep -v '^status=7 ' "$TMP/fetches" | grep -q '^status='; then
    grep -v '^status=7 ' "$TMP/fetches" | grep -v '^status=\(14\|4\) ' && \
        fail "an intruder Fetch was not denied (only 14 UNAVAILABLE or 4 DEADLINE_EXCEEDED while the worker restarts)"
fi
echo "owner: digests = --local with $n intruder Fetch attempts (all denied), worker restarted"

# Multi-rank: the ranks share SLUICE_JOB_SECRET; a client with the token and
# the job's name, without that secret (or with none), cannot join as a rank.
/usr/bin/python3 - "$TMP/spec.json" "$TMP" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
for r in (0, 1):
    s["world_size"], s["rank"] = 2, r
    json.dump(s, open("%s/rank%d.json" % (sys.argv[2], r), "w"))
EOF
export SLUICE_JOB_SECRET=team-launcher-secret-0123456789
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --max-rate 12 --token-file "$TMP/token" --world-size 2 \
    --rank 0 --job-name shared --digests "$TMP/r0" 2>"$TMP/r0.err" &
R0=$!
PIDS+=("$R0")
for _ in $(seq 1 100); do
    http_grep '"shared"' "http://$D_HTTP/status" && break
    sleep 0.05
done
JOIN=(--job-name shared --spec "$TMP/rank1.json" --world-size 2 --rank 1 --samples 24)
expect_denied "join without secret" "$D_GRPC" join "${JOIN[@]}"
expect_denied "join with the token-derived secret" "$D_GRPC" join "${JOIN[@]}" \
    --secret "$(/usr/bin/python3 -c 'import hmac,hashlib,sys
print(hmac.new(sys.argv[1].encode(), b"sluice-rank-job\nshared", hashlib.sha256).hexdigest())' \
    cluster-token-0123)"
expect_denied "re-attach as rank 0 with a wrong secret" "$D_GRPC" join --job-name shared \
    --spec "$TMP/rank0.json" --world-size 2 --rank 0 --samples 24 \
    --secret wrong-secret-0123456789abcdef
echo "joining the multi-rank job by name without its secret: denied"
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --token-file "$TMP/token" --world-size 2 --rank 1 \
    --job-name shared --digests "$TMP/r1" || fail "rank 1 (with the secret) failed"
wait "$R0" || {
    cat "$TMP/r0.err"
    fail "rank 0 failed"
}
sort -m <(sort "$TMP/r0") <(sort "$TMP/r1") | cmp -s - "$TMP/local.s" \
    || fail "the ranks' union differs from --local"
echo "ranks with the shared secret: union = --local"
echo "job capability: ok"

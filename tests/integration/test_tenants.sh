#!/usr/bin/env bash
# Tenants (docs/protocol.md "Tenants"): two teams with their own tokens on one
# dispatcher and worker (tenants_file), the cluster token for the worker.
# - team A at its cap (max_jobs=1) cannot open a second job; team B can;
# - team B's token does not reach team A's job (GetAssignment, AckSplits,
#   CloseJob, Fetch: PERMISSION_DENIED);
# - /status over HTTP and `sluice status` show a team its own jobs and the
#   others only counted; without a token, only counts; /metrics the same
#   jobs' series, labelled by tenant;
# - revoking team B (tenants file rewritten, SIGHUP to both daemons) ends
#   its new RPCs (UNAUTHENTICATED) while team A's job runs on to the
#   --local digests.
source "$(dirname "$0")/lib.sh"
INTR="$ROOT/$BUILD/tools/intruder"
[ -x "$INTR" ] || fail "$INTR not built"

make_images "$TMP/data" 2 12
write_train_spec "$TMP/spec.json" 3
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 1 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
umask 077
printf 'cluster-token-0123456789\n' >"$TMP/cluster"
printf 'team-a-token-0123456789\n' >"$TMP/a"
printf 'team-b-token-0123456789\n' >"$TMP/b"
cat >"$TMP/tenants" <<'EOF'
# name    token                      limits
team-a    team-a-token-0123456789    max_jobs=1
team-b    team-b-token-0123456789
EOF

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --heartbeat-ms 100 --token-file "$TMP/cluster" \
    --tenants-file "$TMP/tenants" --tenant-max-jobs 4
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --token-file "$TMP/cluster" \
    --tenants-file "$TMP/tenants"

runas() { # runas TEAM NAME ARGS...: sluice run with TEAM's token, digests in $TMP/NAME
    local team=$1 name=$2
    shift 2
    "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
        --quiet --threads 1 --offload all --token-file "$TMP/$team" --digests "$TMP/$name" "$@"
}

runas a a1 --max-rate 12 >/dev/null 2>"$TMP/a1.err" &
A1=$!
PIDS+=("$A1")
JOB=""
for _ in $(seq 1 100); do
    JOB=$(curl -sf -H "Authorization: Bearer team-a-token-0123456789" \
        "http://$D_HTTP/status" | /usr/bin/python3 -c 'import json,sys
j=json.load(sys.stdin)["jobs"]
print(j[0]["id"] if j else "")' || true)
    [ -n "$JOB" ] && break
    sleep 0.05
done
[ -n "$JOB" ] || fail "team A's job never showed in its /status"

# Caps: A is at max_jobs=1; B is not.
run_rc "$TMP/a2.err" runas a a2 --dispatcher-timeout 3000
[ "$RC" -ne 0 ] || fail "team A's second job was accepted past its max_jobs=1"
grep -q "RESOURCE_EXHAUSTED" "$TMP/a2.err" || {
    cat "$TMP/a2.err"
    fail "team A's second job: no RESOURCE_EXHAUSTED"
}
runas b b1 || fail "team B's job failed while team A is at its cap"
echo "caps: team A at max_jobs=1 refused a second job; team B ran one meanwhile"

# Team B's token on team A's job: refused, with or without a secret.
for op in assign ack close; do
    out=$("$INTR" "$D_GRPC" "$op" --job "$JOB" --token-file "$TMP/b" \
        --secret guess-0123456789abcdef)
    case "$out" in "status=7 "*) ;; *) fail "team B $op on team A's job: $out" ;; esac
done
out=$("$INTR" "$W1_GRPC" fetch --job "$JOB" --token-file "$TMP/b" --timeout 3000)
case "$out" in "status=7 "*) ;; *) fail "team B Fetch of team A's job: $out" ;; esac
echo "team B's token on team A's job: GetAssignment, AckSplits, CloseJob, Fetch denied"

# What each reader sees.
view() { # view TOKEN-OR-EMPTY: "VIEW ids... others=N"
    local h=()
    [ -n "$1" ] && h=(-H "Authorization: Bearer $1")
    curl -sf "${h[@]}" "http://$D_HTTP/status" | /usr/bin/python3 -c 'import json,sys
s=json.load(sys.stdin)
v=s["viewer"]
print(v["view"], ",".join(str(j["id"]) for j in s["jobs"]) or "-", v["other_jobs_open"])'
}
read -r v ids others <<<"$(view team-a-token-0123456789)"
[ "$v $ids" = "tenant $JOB" ] || fail "team A's /status: $v $ids"
read -r v ids others <<<"$(view team-b-token-0123456789)"
[ "$v $ids" = "tenant -" ] && [ "$others" -ge 1 ] || fail "team B's /status: $v $ids $others"
read -r v ids others <<<"$(view "")"
[ "$v $ids" = "aggregate -" ] && [ "$others" -ge 1 ] || fail "anonymous /status: $v $ids"
"$BIN/sluice" status --dispatcher "$D_GRPC" --token-file "$TMP/b" --json >"$TMP/bstatus.json"
/usr/bin/python3 - "$TMP/bstatus.json" "$JOB" <<'EOF' || fail "sluice status as team B shows A's job"
import json, sys
s = json.load(open(sys.argv[1]))
ids = [j["id"] for j in s.get("jobs", [])]
assert int(sys.argv[2]) not in ids, ids
EOF
"$BIN/sluice" status --dispatcher "$D_GRPC" --token-file "$TMP/b" | grep -q \
    "your tenant's jobs only; 1 open job(s) of other tenants not shown" \
    || fail "sluice status as team B does not say what it leaves out"
http_grep "^sluice_tenant_jobs{tenant=\"team-a\"} 1" "http://$D_HTTP/metrics" \
    || fail "/metrics: no sluice_tenant_jobs for team-a"
http_grep "^sluice_job_epoch{job=\"$JOB\",tenant=\"team-a\"}" \
    -H "Authorization: Bearer team-a-token-0123456789" "http://$D_HTTP/metrics" \
    || fail "/metrics for team A: its job's series without the tenant label"
for who in "" team-b-token-0123456789; do
    h=()
    [ -n "$who" ] && h=(-H "Authorization: Bearer $who")
    if http_grep "job=\"$JOB\"" "${h[@]}" "http://$D_HTTP/metrics"; then
        fail "/metrics for ${who:-an anonymous reader} shows team A's job"
    fi
done
echo "status: team A sees its job, team B and anonymous readers only counts; metrics by tenant"

# Revoke team B: its next RPCs are UNAUTHENTICATED; team A's job runs on.
grep -v '^team-b' "$TMP/tenants" >"$TMP/tenants.new"
mv "$TMP/tenants.new" "$TMP/tenants"
kill -HUP "$D_PID" "$W1_PID"
for _ in $(seq 1 50); do
    grep -q "SIGHUP: 1 tenant" "$TMP/D.err" && grep -q "SIGHUP: 1 tenant" "$TMP/W1.err" && break
    sleep 0.05
done
out=$("$INTR" "$D_GRPC" assign --job "$JOB" --token-file "$TMP/b")
case "$out" in "status=16 "*) ;; *) fail "revoked team B: $out" ;; esac
out=$("$INTR" "$W1_GRPC" fetch --job "$JOB" --token-file "$TMP/b" --timeout 3000)
case "$out" in "status=16 "*) ;; *) fail "revoked team B at the worker: $out" ;; esac
run_rc "$TMP/b2.err" runas b b2 --dispatcher-timeout 2000
[ "$RC" -ne 0 ] || fail "revoked team B still runs jobs"
grep -q "UNAUTHENTICATED" "$TMP/b2.err" || fail "revoked team B: no UNAUTHENTICATED"
wait "$A1" || {
    cat "$TMP/a1.err"
    fail "team A's job failed"
}
sort "$TMP/a1" | cmp -s - "$TMP/local.s" || fail "team A's digests differ from --local"
sort "$TMP/b1" | cmp -s - "$TMP/local.s" || fail "team B's digests differ from --local"
echo "revoke: team B refused (UNAUTHENTICATED) from the SIGHUP on; team A's job = --local"
echo "tenants: ok"

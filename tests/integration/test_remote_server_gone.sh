#!/usr/bin/env bash
# A data server that goes away mid-job (docs/sources.md "Remote sources"):
# real nginx on loopback, started and stopped here.
#  - two workers, one reaching the server through a proxy (a second nginx,
#    its http_proxy) that is stopped mid-job: that worker's reads fail after
#    the retries, it gives the job back naming the unreachable server, the
#    dispatcher re-gives its unfinished splits to the other worker, and the
#    digests equal the disk's: nothing lost, nothing duplicated;
#  - the proxy started again: a worker that gave a job back for its data
#    server probes it, reports the job again, and the dispatcher gives it
#    the job's splits again after a back-off (/status: out, back, its
#    delivered count grows); digests equal the disk's;
#  - the proxy down when the job opens on that worker, then up: the same
#    give-back, probe and take-back, and that worker delivers splits;
#  - the server stopped for everyone (offloaded): both workers give the
#    job back, its splits fall back to the client, which cannot read them
#    either and fails with "data server unreachable" (not a run of skips);
#  - the same run locally: the same clear failure.
# Every host's cache is too small to hold a shard whole (shard over a
# quarter of cache_bytes), so every sample read is a range request.
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
WWW="$TMP/www"
shards_www "$DATA" "$WWW" mm-shards --samples 96 --per-shard 16 --size-scale 0.4 --seed 13
N=96
SMALL=1048576 # cache_bytes: a shard (over 256 KiB) is never fetched whole
for f in "$DATA"/mm-shards/*.tar; do
    [ "$(stat -c %s "$f")" -gt $((SMALL / 4)) ] || fail "$f is small enough to be cached whole"
done

# The server, and a proxy in front of it for worker A.
NGX="$TMP/nginx"
HPORT=$(free_port)
start_server() {
    start_nginx_shards "$NGX" "$WWW" "$HPORT"
    SRV_PID=$NGX_PID
}
start_server
PXY="$TMP/proxy"
PPORT=$(free_port)
start_proxy() {
    start_nginx_shards "$PXY" "$WWW" "$PPORT" "" "location / { proxy_pass http://127.0.0.1:$HPORT; }"
    PXY_PID=$NGX_PID
}
start_proxy
H="http://127.0.0.1:$HPORT"
ROOTS="$H/d/"

cat >"$TMP/disk.json" <<JSON
{"source": {"type": "webdataset", "path": "mm-shards/shard-{000000..000005}.tar", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": 2, "cache": "off"}
JSON
sed "s|mm-shards/|$H/d/mm-shards/|" "$TMP/disk.json" >"$TMP/http.json"

"$BIN/sluice" run "$TMP/disk.json" --data-root "$DATA" --local --quiet --threads 2 \
    --digests "$TMP/disk.dig" >/dev/null 2>"$TMP/disk.err" ||
    { cat "$TMP/disk.err" >&2; fail "disk run failed"; }
sort "$TMP/disk.dig" >"$TMP/disk.s"
[ "$(wc -l <"$TMP/disk.s")" -eq $((2 * N)) ] || fail "disk: $(wc -l <"$TMP/disk.s") digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 3000 --heartbeat-ms 100 --client-timeout-ms 5000
# A worker with a cache too small for a shard, and a buffer of finished
# samples (1 MiB: a few) that keeps it from reading far ahead of the client.
worker() { # worker NAME [ENV...]
    local name=$1
    shift
    start_daemon "$name" env "$@" "$BIN/sluice-worker" --http 127.0.0.1:0 \
        --dispatcher "$D_GRPC" --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 \
        --remote-roots "$ROOTS" --cache-dir "$TMP/cache-$name" --cache-bytes "$SMALL" \
        --buffer-bytes 1048576
}
# http_proxy is for libcurl; gRPC reads it too, so no_grpc_proxy keeps
# the dispatcher and clients direct.
worker A http_proxy="http://127.0.0.1:$PPORT" no_grpc_proxy="127.0.0.1"
wait_live_workers "$D_HTTP" 1
A_ID=$(sed -nE 's/.* as worker ([0-9]+) .*/\1/p' "$TMP/A.err" | head -n 1)
[ -n "$A_ID" ] || fail "worker A's id not logged"

# ---- one worker loses the server: its splits go to the other --------------
# A alone first, so it is given splits and reads through the proxy.
"$BIN/sluice" run "$TMP/http.json" --dispatcher "$D_GRPC" --offload all --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-c1" --cache-bytes "$SMALL" --max-rate 20 \
    --digests "$TMP/one.dig" --json >"$TMP/one.out" 2>"$TMP/one.err" &
run_pid=$!
# Stopped once A has delivered two splits (B is not there yet).
for _ in $(seq 1 400); do
    [ "$(cat "$TMP/one.dig" 2>/dev/null | wc -l)" -ge 16 ] && break
    sleep 0.05
done
[ "$(wc -l <"$TMP/one.dig")" -ge 16 ] || fail "worker A delivered nothing"
# B joins now (a worker present from the start may be given every split).
worker B
wait_live_workers "$D_HTTP" 2
kill "$PXY_PID"
wait "$run_pid" || { cat "$TMP/one.err" >&2; fail "one worker lost the server: the run failed"; }
sort "$TMP/one.dig" >"$TMP/one.s"
cmp -s "$TMP/one.s" "$TMP/disk.s" ||
    fail "one worker lost the server: $(wc -l <"$TMP/one.s") digests, not the disk's $((2 * N))"
grep -q "worker $A_ID cannot run it: \".*data server unreachable: after 4 attempts: $H/d/" \
    "$TMP/D.err" ||
    { grep 'job' "$TMP/D.err" | tail -n 5 >&2; fail "the dispatcher was not told why A gave the job back"; }
/usr/bin/python3 - "$TMP/one.out" <<'PY' || fail "one worker lost the server: skips counted"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j["skipped"]["total"] == 0, j["skipped"]
PY
echo "one worker lost the server: it gave the job back (data server unreachable), the other" \
    "read its splits; digests equal the disk's, none twice, no skip"

# ---- the server returns: the worker that gave the job back takes it again ---
# A reaches the server through the proxy again; a new job, both workers.
wait "$PXY_PID" 2>/dev/null || true
start_proxy
# a_split_counts: A's splits delivered in the open job and whether it is out
# for its data server, from the dispatcher's /status ("JOB DELIVERED OUT").
a_split_counts() {
    curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    for w in j["splits"]["workers"]:
        if w["worker_id"] == int(sys.argv[1]):
            print(j["id"], w["delivered"], int(w["out_for_data_server"]), w["times_back"])
' "$A_ID" || true
}
"$BIN/sluice" run "$TMP/http.json" --dispatcher "$D_GRPC" --offload all --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-cb" --cache-bytes "$SMALL" --max-rate 12 \
    --digests "$TMP/back.dig" --json >"$TMP/back.out" 2>"$TMP/back.err" &
run_pid=$!
counts=""
for _ in $(seq 1 300); do
    counts=$(a_split_counts)
    [ -n "$counts" ] && [ "$(cut -d' ' -f2 <<<"$counts")" -ge 1 ] && break
    sleep 0.1
done
[ -n "$counts" ] && [ "$(cut -d' ' -f2 <<<"$counts")" -ge 1 ] ||
    fail "server returns: worker A delivered no split of the job (${counts:-not in it})"
JOB=$(cut -d' ' -f1 <<<"$counts")
kill "$PXY_PID"
wait "$PXY_PID" 2>/dev/null || true
for _ in $(seq 1 300); do
    grep -q "job $JOB: worker $A_ID cannot run it: \".*data server unreachable" "$TMP/D.err" && break
    sleep 0.1
done
grep -q "job $JOB: worker $A_ID cannot run it: \".*data server unreachable" "$TMP/D.err" ||
    fail "server returns: worker A did not give job $JOB back when its server went away"
sleep 0.5 # a heartbeat: /status has it out
counts=$(a_split_counts)
[ "$(cut -d' ' -f3 <<<"$counts")" = 1 ] ||
    fail "server returns: /status does not show worker A out for its data server ($counts)"
before=$(cut -d' ' -f2 <<<"$counts")
start_proxy
for _ in $(seq 1 300); do
    grep -q "job $JOB: worker $A_ID is back" "$TMP/D.err" && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q "job $JOB: worker $A_ID is back" "$TMP/D.err" ||
    { grep "job $JOB" "$TMP/A.err" | tail -n 5 >&2; fail "server returns: worker A was not given job $JOB back"; }
grep -q "job $JOB: data server answers again" "$TMP/A.err" ||
    fail "server returns: worker A did not log that its server answers again"
after=$before
for _ in $(seq 1 300); do
    c=$(a_split_counts)
    [ -n "$c" ] && after=$(cut -d' ' -f2 <<<"$c")
    [ "$after" -gt "$before" ] && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.1
done
[ "$after" -gt "$before" ] ||
    fail "server returns: worker A delivered no split after it came back ($before before, $after after)"
[ "$(cut -d' ' -f4 <<<"$c")" -ge 1 ] || fail "server returns: /status times_back not counted ($c)"
wait "$run_pid" || { cat "$TMP/back.err" >&2; fail "server returns: the run failed"; }
sort "$TMP/back.dig" >"$TMP/back.s"
cmp -s "$TMP/back.s" "$TMP/disk.s" ||
    fail "server returns: $(wc -l <"$TMP/back.s") digests, not the disk's $((2 * N))"
/usr/bin/python3 - "$TMP/back.out" <<'PY' || fail "server returns: skips counted"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j["skipped"]["total"] == 0, j["skipped"]
PY
echo "server returns: worker A gave job $JOB back, was given it again once its server" \
    "answered ($before split(s) delivered before, $after after); digests equal the disk's, none twice"

# ---- the server away when the job opens: the worker takes it when it answers -
# A's open of the job's source fails (its proxy is down): it gives the job
# back naming the unreachable server, probes it, opens the source again when
# it answers and is given the job's splits (the same path as mid-job).
kill "$PXY_PID"
wait "$PXY_PID" 2>/dev/null || true
nback=$(grep -c "worker $A_ID is back" "$TMP/D.err" || true)
"$BIN/sluice" run "$TMP/http.json" --dispatcher "$D_GRPC" --offload all --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-co" --cache-bytes "$SMALL" --max-rate 12 \
    --digests "$TMP/open.dig" --json >"$TMP/open.out" 2>"$TMP/open.err" &
run_pid=$!
JOB=""
for _ in $(seq 1 300); do
    JOB=$(sed -nE "s/.*job ([0-9]+): worker $A_ID cannot run it: \"job [0-9]+: cannot open source: data server unreachable.*/\1/p" \
        "$TMP/D.err" | tail -n 1)
    [ -n "$JOB" ] && break
    sleep 0.1
done
[ -n "$JOB" ] || { grep "job" "$TMP/A.err" | tail -n 5 >&2; fail "server away at open: worker A did not give the job back naming its data server"; }
sleep 0.5 # a heartbeat: /status has it out
c=$(a_split_counts)
[ "$(cut -d' ' -f1,2,3 <<<"$c")" = "$JOB 0 1" ] ||
    fail "server away at open: /status does not show worker A out with nothing delivered ($c)"
start_proxy
after=0
for _ in $(seq 1 300); do
    c=$(a_split_counts)
    [ -n "$c" ] && after=$(cut -d' ' -f2 <<<"$c")
    [ "$after" -gt 0 ] && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.1
done
[ "$after" -gt 0 ] ||
    { grep "job $JOB" "$TMP/A.err" | tail -n 5 >&2; fail "server away at open: worker A delivered no split after its server answered"; }
grep -q "job $JOB: data server answers again" "$TMP/A.err" ||
    fail "server away at open: worker A did not log that its server answers again"
[ "$(grep -c "worker $A_ID is back" "$TMP/D.err")" -gt "$nback" ] ||
    fail "server away at open: the dispatcher did not log worker A back"
wait "$run_pid" || { cat "$TMP/open.err" >&2; fail "server away at open: the run failed"; }
sort "$TMP/open.dig" >"$TMP/open.s"
cmp -s "$TMP/open.s" "$TMP/disk.s" ||
    fail "server away at open: $(wc -l <"$TMP/open.s") digests, not the disk's $((2 * N))"
echo "server away at open: worker A gave job $JOB back at its open, opened it again once its" \
    "server answered and delivered $after split(s); digests equal the disk's, none twice"

# ---- nobody can read: a clear error -----------------------------------------
"$BIN/sluice" run "$TMP/http.json" --dispatcher "$D_GRPC" --offload all --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-c2" --cache-bytes "$SMALL" --max-rate 40 \
    --digests "$TMP/all.dig" >"$TMP/all.out" 2>"$TMP/all.err" &
run_pid=$!
for _ in $(seq 1 400); do
    [ -s "$TMP/all.dig" ] && break
    sleep 0.05
done
[ -s "$TMP/all.dig" ] || fail "the job did not start"
kill "$SRV_PID"
rc=0
wait "$run_pid" || rc=$?
[ "$rc" -ne 0 ] || fail "server gone for everyone: the run succeeded"
grep -q 'data server unreachable' "$TMP/all.err" ||
    { cat "$TMP/all.err" >&2; fail "server gone for everyone: no 'data server unreachable'"; }
grep -q "$H/d/mm-shards/shard-" "$TMP/all.err" || fail "server gone: the URL is not named"
grep -q 'every live worker refused the job (worker .*data server unreachable' "$TMP/all.err" ||
    fail "server gone: the workers did not give the job back before the client read it"
echo "server gone for everyone: the run fails (exit $rc): $(grep -m1 '^sluice run: data server unreachable' "$TMP/all.err")"

# ---- locally: the same --------------------------------------------------------
start_server
"$BIN/sluice" run "$TMP/http.json" --data-root "$DATA" --local --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-c3" --cache-bytes "$SMALL" --max-rate 40 \
    --digests "$TMP/local.dig" >"$TMP/local.out" 2>"$TMP/local.err" &
run_pid=$!
for _ in $(seq 1 400); do
    [ -s "$TMP/local.dig" ] && break
    sleep 0.05
done
[ -s "$TMP/local.dig" ] || fail "the local job did not start"
kill "$SRV_PID"
rc=0
wait "$run_pid" || rc=$?
[ "$rc" -ne 0 ] || fail "local, server gone: the run succeeded"
grep -q 'data server unreachable' "$TMP/local.err" ||
    { cat "$TMP/local.err" >&2; fail "local, server gone: no 'data server unreachable'"; }
echo "locally, server gone: the run fails (exit $rc) naming the unreachable server"
echo "PASS"

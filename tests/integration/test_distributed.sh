#!/usr/bin/env bash
# Dispatcher + workers + client over real gRPC on loopback: every offload
# mode gives the --local digests; a worker killed with SIGKILL mid-epoch and
# started again on a new port loses and duplicates nothing; a worker that
# joins mid-job gets work; a client that vanishes has its job freed.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 30
cls="$TMP/data/train/class_001"
: >"$cls/zz_empty.jpg"
head -c 3000 "$(ls "$cls"/*.jpg | head -n 1)" >"$cls/zz_truncated.jpg"
write_train_spec "$TMP/spec.json" 2

"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local" --epochs 6
sort "$TMP/local" >"$TMP/local.s"
awk '$1 < 2' "$TMP/local.s" >"$TMP/local2.s"
[ "$(wc -l <"$TMP/local2.s")" -eq 180 ] || fail "local run: expected 180 digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 2000
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done

remote() { # remote NAME OFFLOAD [EPOCHS]
    "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload "$2" --epochs "${3:-2}" --digests "$TMP/$1" --json >"$TMP/$1.json"
    sort "$TMP/$1" >"$TMP/$1.s"
}

for mode in off all 2:0.5 3:0.25 0:0; do
    remote "m_${mode//:/_}" "$mode"
    cmp -s "$TMP/m_${mode//:/_}.s" "$TMP/local2.s" || fail "offload $mode: digests differ from --local"
    echo "offload $mode: digests identical to --local"
done
# 'all' really ran remotely, 'off' really locally.
grep -q '"remote":0' "$TMP/m_off.json" || fail "offload off used workers"
grep -q '"local":0,' "$TMP/m_all.json" || fail "offload all ran samples locally"
grep -q '"too_large"\|"truncated":2' "$TMP/m_all.json" || fail "skips not reported from workers"

# Kill -9 one worker mid-epoch: nothing lost, nothing duplicated.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --epochs 6 --digests "$TMP/kill" --json >"$TMP/kill.json" &
client=$!
PIDS+=("$client")
for _ in $(seq 1 100); do
    [ -f "$TMP/kill" ] && [ "$(wc -l <"$TMP/kill")" -ge 60 ] && break
    sleep 0.05
done
kill -0 "$client" 2>/dev/null || fail "the job ended before the worker could be killed"
kill -9 "$W1_PID"
# The same worker restarted (a new process: new port, new worker id).
start_daemon W1B "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
wait "$client" || fail "client failed after a worker was killed and restarted"
sort "$TMP/kill" >"$TMP/kill.s"
cmp -s "$TMP/kill.s" "$TMP/local.s" || {
    diff "$TMP/kill.s" "$TMP/local.s" | head -5
    fail "worker killed and restarted: digests differ from --local"
}
restarted=$(curl -sf "http://$W1B_HTTP/status" | /usr/bin/python3 -c \
    'import json,sys; print(json.load(sys.stdin)["samples_done"])')
[ "$restarted" -gt 0 ] || fail "the restarted worker processed nothing"
echo "worker killed mid-job and restarted on a new port (it then processed $restarted" \
    "samples): digests identical to --local"

# A worker that joins mid-job gets work.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --epochs 6 --digests "$TMP/join" >/dev/null &
client=$!
PIDS+=("$client")
sleep 0.3
start_daemon W3 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
served=0
while kill -0 "$client" 2>/dev/null; do
    n=$(curl -sf "http://$W3_HTTP/status" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sum(j.get("samples_done", 0) for j in s.get("jobs", [])))' || echo 0)
    [ "${n:-0}" -gt "$served" ] && served=$n
    sleep 0.05
done
wait "$client" || fail "client failed while a worker joined"
sort "$TMP/join" | cmp -s - "$TMP/local.s" || fail "worker joined: digests differ"
[ "$served" -gt 0 ] || fail "the worker that joined mid-job processed nothing"
echo "worker joined mid-job: it processed $served samples, digests identical"

# A client that vanishes: its job is freed after client_timeout.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --threads 1 --offload all --epochs 50 >/dev/null 2>&1 &
client=$!
PIDS+=("$client")
sleep 1
jobs_open=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')
[ "$jobs_open" -ge 1 ] || fail "no job open while the client runs"
kill -9 "$client"
for _ in $(seq 1 100); do
    jobs_open=$(curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))')
    [ "$jobs_open" -eq 0 ] && break
    sleep 0.1
done
[ "$jobs_open" -eq 0 ] || fail "job of a vanished client still open"
echo "vanished client: job freed"
kill -0 "$D_PID" && kill -0 "$W2_PID" && kill -0 "$W1B_PID" || fail "a daemon died"
echo "distributed: ok"

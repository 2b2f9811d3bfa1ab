#!/usr/bin/env bash
# The journal: a dispatcher killed with SIGKILL mid-epoch and restarted on the
# same port with the same journal keeps the job; the client and the workers
# ride through the outage and the digests equal --local; an auto job keeps
# its planner (prediction, re-planning). A torn tail is
# truncated (and logged); a corrupt record in the middle stops the start.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 30
write_train_spec "$TMP/spec.json" 6
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
J="$TMP/journal"
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$J" --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done

"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload all --digests "$TMP/remote" --json >"$TMP/remote.json" &
client=$!
PIDS+=("$client")
for _ in $(seq 1 200); do
    [ -f "$TMP/remote" ] && [ "$(wc -l <"$TMP/remote")" -ge 200 ] && break
    sleep 0.05
done
kill -0 "$client" 2>/dev/null || fail "the job ended before the dispatcher could be killed"
kill -9 "$D_PID"
echo "dispatcher killed after $(wc -l <"$TMP/remote") samples"
sleep 1
dispatcher D2
grep -q "job [0-9]* restored" "$TMP/D2.err" || { cat "$TMP/D2.err"; fail "no job restored"; }
wait "$client" || { cat "$TMP/D2.err"; fail "client failed across the dispatcher restart"; }
sort "$TMP/remote" >"$TMP/remote.s"
cmp -s "$TMP/remote.s" "$TMP/local.s" || {
    diff "$TMP/remote.s" "$TMP/local.s" | head -5
    fail "dispatcher restarted: digests differ from --local"
}
echo "dispatcher killed mid-epoch and restarted: digests identical to --local"

# A second job gets a new id (ids never collide with replayed ones).
first=$(sed -nE 's/.*"job_id": ?([0-9]+).*/\1/p' "$TMP/remote.json" | head -n 1)
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload off --epochs 1 --json >"$TMP/second.json"
second=$(sed -nE 's/.*"job_id": ?([0-9]+).*/\1/p' "$TMP/second.json" | head -n 1)
[ -n "$first" ] && [ "$first" != "$second" ] || fail "job ids collide: '$first' '$second'"

# An auto job keeps its planner across a restart: /status still explains
# its plan (the prediction comes from the journaled planner input) and the
# job re-plans when its workers re-register, which needs the client's
# planner inputs from the journal. The job is short (the short-job guard
# would start it on a fixed plan, which has no planner): --always-profile.
status_job() { # status_job ID: "VERSION HAS_PLANNER PREDICTED" of the job in D2's /status
    curl -sf "http://$D2_HTTP/status" | /usr/bin/python3 -c '
import json, sys
for j in json.load(sys.stdin)["jobs"]:
    if j["id"] == int(sys.argv[1]):
        p = j["plan"]
        print(p["version"], int(j.get("planner") is not None), p["predicted_samples_per_sec"])
' "$1"
}
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload auto --always-profile --max-rate 150 --digests "$TMP/auto" \
    --json >"$TMP/auto.json" &
client=$!
PIDS+=("$client")
for _ in $(seq 1 400); do
    [ -f "$TMP/auto" ] && [ "$(wc -l <"$TMP/auto")" -ge 100 ] && break
    sleep 0.05
done
kill -0 "$client" 2>/dev/null || fail "the auto job ended before the dispatcher could be killed"
auto_id=$(grep -o 'job [0-9]* submitted' "$TMP/D2.err" | tail -n 1 | awk '{print $2}')
read -r v_before has_before pred_before <<<"$(status_job "$auto_id")"
[ "$has_before" = 1 ] || fail "auto job $auto_id has no planner before the restart"
kill -9 "$D2_PID"
sleep 1
dispatcher D2
read -r v_after has_after pred_after <<<"$(status_job "$auto_id")"
[ "$has_after" = 1 ] && [ "$pred_after" != None ] || {
    cat "$TMP/D2.err"
    fail "auto job $auto_id lost its planner in the restart (planner $has_after, predicted $pred_after)"
}
replanned=0
while kill -0 "$client" 2>/dev/null; do
    v=$(status_job "$auto_id" | awk '{print $1}')
    [ -n "$v" ] && [ "$v" -gt "$v_before" ] && replanned=1 && break
    sleep 0.1
done
grep -q "job $auto_id: re-plan" "$TMP/D2.err" || [ $replanned = 1 ] \
    || { cat "$TMP/D2.err"; fail "auto job $auto_id did not re-plan after the restart"; }
wait "$client" || { cat "$TMP/D2.err"; fail "auto client failed across the restart"; }
sort "$TMP/auto" | cmp -s - "$TMP/local.s" || fail "auto job: digests differ from --local"
echo "auto job restarted: plan v$v_before kept with its planner (predicted $pred_before ->" \
    "$pred_after samples/s), re-planned as workers re-registered; digests = --local"

kill -TERM "$D2_PID"
wait "$D2_PID" 2>/dev/null || true

# Torn tail: half a record appended; the dispatcher starts and says so.
printf 'SLJ1\x40\x00\x00\x00\x01\x00\x00\x00junk' >>"$J/journal.log"
dispatcher D3
grep -q "truncated a torn tail of [0-9]* bytes" "$TMP/D3.err" || {
    cat "$TMP/D3.err"
    fail "torn tail not reported"
}
echo "torn tail: truncated and logged"
# Two jobs in the log: corrupt the first record, keep the second valid.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload off --epochs 1 >/dev/null
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port" --data-root "$TMP/data" \
    --quiet --threads 1 --offload off --epochs 1 >/dev/null
kill -9 "$D3_PID"
wait "$D3_PID" 2>/dev/null || true
[ "$(stat -c %s "$J/journal.log")" -gt 100 ] || fail "journal.log unexpectedly small"
/usr/bin/python3 - "$J/journal.log" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[20] ^= 0xFF  # inside the first record's payload
open(p, "wb").write(b)
PY
rc=0
"$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 --journal "$J" \
    >"$TMP/D4.out" 2>"$TMP/D4.err" || rc=$?
[ "$rc" -eq 1 ] || fail "corrupt journal: exit $rc, expected 1"
grep -q "journal.log" "$TMP/D4.err" || { cat "$TMP/D4.err"; fail "error does not name the file"; }
echo "corrupt middle: refused to start ($(head -c 200 "$TMP/D4.err" | tail -n 1))"

# ---- The default journal (issue 38): a dispatcher started by hand journals to
# its user's state directory, says where in one line, locks it, and keeps a
# job across a restart; the client's error for a dispatcher restarted without
# one names --journal; the summary counts what --digests holds.
port2=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
X="$TMP/xdg"
default_disp() { # default_disp NAME: no --journal, no --config (env: not start_daemon's none)
    start_daemon "$1" env XDG_STATE_HOME="$X" "$BIN/sluice-dispatcher" \
        --listen "127.0.0.1:$port2" --http 127.0.0.1:0 --split-size 8 \
        --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 20000
}
default_disp DA
grep -q "journal: $X/sluice/journal\$" "$TMP/DA.err" || { cat "$TMP/DA.err"; fail "no journal line"; }
[ -f "$X/sluice/journal/journal.log" ] || fail "default journal not in \$XDG_STATE_HOME/sluice/journal"
env -u XDG_STATE_HOME HOME="$TMP/home" "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 >"$TMP/DH.out" 2>"$TMP/DH.err" &
dh=$!
PIDS+=("$dh")
for _ in $(seq 1 200); do grep -q '^listening ' "$TMP/DH.out" && break; sleep 0.05; done
grep -q "journal: $TMP/home/.local/state/sluice/journal\$" "$TMP/DH.err" ||
    { cat "$TMP/DH.err"; fail "without \$XDG_STATE_HOME: not ~/.local/state/sluice/journal"; }
kill -TERM "$dh"
wait "$dh" 2>/dev/null || true
rc=0
env XDG_STATE_HOME="$X" timeout 20 "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 >/dev/null 2>"$TMP/DB.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "in use by another sluice-dispatcher" "$TMP/DB.err" ||
    { cat "$TMP/DB.err"; fail "a second dispatcher on one journal: exit $rc"; }
echo "default journal: $X/sluice/journal (logged, locked: a second dispatcher exits 1)"

for i in 1 2; do
    start_daemon WA$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port2" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done
# run_killed OUT RESTART...: a remote job (--digests OUT, its stderr OUT.err)
# whose dispatcher is killed mid-job and started again by RESTART; the
# client's exit status in $client_rc.
run_killed() {
    local out=$1
    shift
    "$BIN/sluice" run "$TMP/spec.json" --dispatcher "127.0.0.1:$port2" --data-root "$TMP/data" \
        --threads 1 --offload all --digests "$out" 2>"$out.err" &
    local c=$!
    PIDS+=("$c")
    for _ in $(seq 1 200); do
        [ -f "$out" ] && [ "$(wc -l <"$out")" -ge 150 ] && break
        sleep 0.05
    done
    kill -0 "$c" 2>/dev/null || fail "the job ended before the dispatcher could be killed"
    kill -9 "$cur_pid"
    sleep 1
    "$@"
    client_rc=0
    wait "$c" || client_rc=$?
}
summary_count() { sed -nE 's/^sluice: ([0-9]+) samples in .*/\1/p' "$1"; }
cur_pid=$DA_PID
run_killed "$TMP/def" default_disp DA2
grep -q "job [0-9]* restored" "$TMP/DA2.err" || { cat "$TMP/DA2.err"; fail "default: not restored"; }
[ "$client_rc" -eq 0 ] || { cat "$TMP/def.err"; fail "default journal: the client failed"; }
sort "$TMP/def" | cmp -s - "$TMP/local.s" || fail "default journal: digests differ from --local"
[ "$(summary_count "$TMP/def.err")" = "$(wc -l <"$TMP/def")" ] ||
    fail "default journal: summary $(summary_count "$TMP/def.err") != $(wc -l <"$TMP/def") digests"
echo "default journal: the job survived the restart, digests = --local"
kill -TERM "$DA2_PID"
wait "$DA2_PID" 2>/dev/null || true

nojournal() { # nojournal NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port2" --http 127.0.0.1:0 \
        --journal none --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100
}
nojournal DN
grep -q "journal: none" "$TMP/DN.err" || { cat "$TMP/DN.err"; fail "--journal none not logged"; }
cur_pid=$DN_PID
run_killed "$TMP/nj" nojournal DN2
[ "$client_rc" -ne 0 ] || fail "no journal: the client survived a restart that lost its job"
grep -q "no longer knows this job.*--journal" "$TMP/nj.err" ||
    { cat "$TMP/nj.err"; fail "the client's error does not name --journal"; }
n=$(summary_count "$TMP/nj.err")
[ -n "$n" ] && [ "$n" = "$(wc -l <"$TMP/nj")" ] ||
    { cat "$TMP/nj.err"; fail "failed job: summary says '$n' samples, --digests holds $(wc -l <"$TMP/nj")"; }
echo "no journal: the client's error names --journal; summary = $n = digest lines"

# drop_last: the discarded remainder is not counted as delivered.
write_train_spec "$TMP/drop.json" 1 ', "drop_last": true'
"$BIN/sluice" run "$TMP/drop.json" --local --data-root "$TMP/data" --threads 2 \
    --digests "$TMP/drop" 2>"$TMP/drop.err"
n=$(summary_count "$TMP/drop.err")
[ "$n" = "$(wc -l <"$TMP/drop")" ] && [ "$n" -eq 88 ] ||
    fail "drop_last: summary says '$n' samples, --digests holds $(wc -l <"$TMP/drop") (want 88)"
echo "drop_last: summary = digest lines = 88"

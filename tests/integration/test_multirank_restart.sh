#!/usr/bin/env bash
# Multi-rank jobs across a dispatcher restart (the journal keeps each rank's
# part with its job name): 2 ranks on 2 workers; the dispatcher is killed
# with SIGKILL mid-epoch and restarted on the same port and journal; both
# ranks ride through. Then rank 1 is killed and started again: it re-attaches
# to its part (which only the journal can tell the new dispatcher about)
# instead of opening a new one and delivering its whole share again. Each
# rank's digests equal its --local share, the ranks are disjoint, and their
# union equals the plain --local run.
source "$(dirname "$0")/lib.sh"

W=2
EPOCHS=6
make_images "$TMP/data" 3 30 # 90 samples: 45 per rank, nothing dropped
write_train_spec "$TMP/spec.json" $EPOCHS
SHARE=$((45 * EPOCHS))

local_run() { # local_run NAME ARGS...: sorted digests in $TMP/NAME.s
    local name=$1
    shift
    "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 2 --local \
        --digests "$TMP/$name" "$@"
    sort "$TMP/$name" >"$TMP/$name.s"
}
keys() { awk '{print $1, $2}' "$@" | sort; } # epoch and index: the same sample
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

local_run local
for r in 0 1; do
    local_run "lr$r" --rank "$r" --world-size $W
    [ "$(wc -l <"$TMP/lr$r.s")" -eq $SHARE ] || fail "local rank $r: expected $SHARE digests"
done

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal" --split-size 5 --worker-timeout-ms 1500 --heartbeat-ms 100 \
        --client-timeout-ms 20000
}
dispatcher D
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done

rank() { # rank R DIGESTS: one rank in the background, pid in RANK_PID
    "$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
        --dispatcher "127.0.0.1:$port" --offload all --rank "$1" --world-size $W \
        --job-name rs --max-rate 60 --digests "$2" &
    RANK_PID=$!
    PIDS+=("$RANK_PID")
}
rank 0 "$TMP/r0"
R0=$RANK_PID
rank 1 "$TMP/r1.first"
R1=$RANK_PID

for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r0")" -ge 40 ] && [ "$(lines "$TMP/r1.first")" -ge 40 ] && break
    sleep 0.05
done
kill -0 "$R0" 2>/dev/null && kill -0 "$R1" 2>/dev/null \
    || fail "a rank ended before the dispatcher could be killed"
kill -9 "$D_PID"
echo "dispatcher killed after $(lines "$TMP/r0") + $(lines "$TMP/r1.first") samples"
sleep 1
dispatcher D2
[ "$(grep -c "job [0-9]* restored" "$TMP/D2.err")" -eq 2 ] \
    || { cat "$TMP/D2.err"; fail "expected both ranks' parts restored"; }

# Both ranks continue on the restarted dispatcher.
at=$(lines "$TMP/r1.first")
for _ in $(seq 1 400); do
    [ "$(lines "$TMP/r1.first")" -ge $((at + 30)) ] && break
    sleep 0.05
done
[ "$(lines "$TMP/r1.first")" -ge $((at + 30)) ] || fail "rank 1 did not continue after the restart"
kill -0 "$R1" 2>/dev/null || fail "rank 1 ended before it could be killed"
kill -9 "$R1"
wait "$R1" 2>/dev/null || true
first=$(lines "$TMP/r1.first")
"$BIN/sluice" run "$TMP/spec.json" --data-root "$TMP/data" --quiet --threads 1 \
    --dispatcher "127.0.0.1:$port" --offload all --rank 1 --world-size $W --job-name rs \
    --digests "$TMP/r1.second" || { cat "$TMP/D2.err"; fail "the restarted rank 1 failed"; }
wait "$R0" || { cat "$TMP/D2.err"; fail "rank 0 failed across the dispatcher restart"; }
grep -q 'rank 1 of "rs" re-attached' "$TMP/D2.err" \
    || { cat "$TMP/D2.err"; fail "rank 1 did not re-attach to its restored part"; }

second=$(lines "$TMP/r1.second")
[ "$second" -lt $SHARE ] || fail "the restarted rank delivered its whole share again ($second)"
[ -z "$(sort "$TMP/r1.second" | uniq -d)" ] || fail "the restarted rank repeated samples"
sort -u "$TMP/r1.first" "$TMP/r1.second" >"$TMP/r1.s"
cmp -s "$TMP/r1.s" "$TMP/lr1.s" || {
    diff "$TMP/r1.s" "$TMP/lr1.s" | head -5
    fail "rank 1: digests differ from its --local share"
}
sort "$TMP/r0" >"$TMP/r0.s"
cmp -s "$TMP/r0.s" "$TMP/lr0.s" || {
    diff "$TMP/r0.s" "$TMP/lr0.s" | head -5
    fail "rank 0: digests differ from its --local share (duplicates or losses)"
}
[ -z "$(keys "$TMP/r0.s" "$TMP/r1.s" | uniq -d)" ] || fail "the ranks overlap"
sort -m "$TMP/r0.s" "$TMP/r1.s" | cmp -s - "$TMP/local.s" \
    || fail "the ranks' union differs from the --local run"
dup=$(sort "$TMP/r1.first" "$TMP/r1.second" | uniq -d | wc -l)
echo "dispatcher killed mid-epoch and restarted: both ranks continued; rank 1 killed after" \
    "$first samples re-attached and delivered $second more ($dup unacknowledged repeated);" \
    "ranks disjoint, union = --local"

kill -0 "$D2_PID" && kill -0 "$W1_PID" && kill -0 "$W2_PID" || fail "a daemon died"
echo "multirank_restart: ok"

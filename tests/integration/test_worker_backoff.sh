#!/usr/bin/env bash
# test: alone (run-integration.sh): judges re-registration delays in seconds
# Workers come back quickly after a dispatcher outage (docs/deploy.md "Deploying on a
# cluster"). Two ways a worker waits for a dispatcher, each with long enough
# an outage for every back-off to have grown to its cap:
#   1. started while no dispatcher listens (the RegisterWorker retries);
#   2. registered, then the dispatcher is killed and restarted on the same
#      port and journal (the Heartbeat retries, then registering again).
# Each time, every worker must be registered within DEADLINE seconds of the
# dispatcher's listening line; the measured delays are printed. Before the
# caps (gRPC's reconnect back-off grew to 120 s, RegisterWorker's to 5 s),
# workers took 5-18 s after these outages.
source "$(dirname "$0")/lib.sh"

DEADLINE=4        # seconds; the caps promise ~2 s (worker/control.h)
OUTAGE_START=10   # phase 1: seconds without a dispatcher after the workers start
OUTAGE_RESTART=32 # phase 2: seconds the killed dispatcher stays down
NW=3

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
mkdir -p "$TMP/data"
dispatcher() { # dispatcher NAME
    start_daemon "$1" "$BIN/sluice-dispatcher" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
        --journal "$TMP/journal"
}

# "STATE REGISTRATIONS FAILURES" of worker I from its /status.
worker_state() {
    local http_var="W$1_HTTP"
    curl -sf --max-time 2 "http://${!http_var}/status" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["state"], d["registrations"], d["failures"])'
}

# wait_all_registered N WHAT: every worker has N registrations; fails after
# DEADLINE seconds counted from now (the dispatcher's listening line was
# just seen). Prints each worker's delay.
wait_all_registered() {
    local want=$1 what=$2 t0 now i state regs fails
    t0=$(date +%s%N)
    local -a took=()
    for i in $(seq 1 $NW); do took[i]=""; done
    while :; do
        local pending=0
        for i in $(seq 1 $NW); do
            [ -n "${took[i]}" ] && continue
            now=$(date +%s%N)
            read -r state regs fails <<<"$(worker_state "$i" || echo "? 0 0")"
            if [ "$state" = registered ] && [ "$regs" -ge "$want" ]; then
                took[i]=$(( (now - t0) / 1000000 ))
            else
                pending=$((pending + 1))
            fi
        done
        [ $pending = 0 ] && break
        if [ $(( (now - t0) / 1000000 )) -gt $((DEADLINE * 1000)) ]; then
            for i in $(seq 1 $NW); do
                echo "W$i: $(worker_state "$i" || echo unreachable) took ${took[i]:-?} ms" >&2
                tail -n 3 "$TMP/W$i.err" >&2
            done
            fail "$what: not every worker registered within ${DEADLINE} s of the dispatcher"
        fi
        sleep 0.05
    done
    echo "$what: workers registered ${took[*]/%/ ms} after the dispatcher listened" \
        "(deadline ${DEADLINE} s; polled, so within the time one status read takes)"
}

# The dispatcher's own clock for the registrations: the spread the jitter
# makes (informational; tests/unit/test_worker_msg.c checks the jitter).
registration_spread() { # registration_spread NAME
    grep -o '^<5>[0-9:.]* sluice-dispatcher notice: worker [0-9]* registered' "$TMP/$1.err" |
        /usr/bin/python3 -c '
import sys
t = []
for line in sys.stdin:
    h, m, s = line[3:].split()[0].split(":")
    t.append((int(h) * 60 + int(m)) * 60 + float(s))
t.sort()
print("dispatcher log: registrations at " +
      ", ".join("+%d ms" % round((x - t[0]) * 1000) for x in t))'
}

# ---- 1. workers first, the dispatcher OUTAGE_START seconds later
for i in $(seq 1 $NW); do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "127.0.0.1:$port" \
        --listen 127.0.0.1:0 --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done
sleep $OUTAGE_START
read -r state regs fails <<<"$(worker_state 1)"
[ "$state" = unregistered ] && [ "$regs" = 0 ] && [ "$fails" -ge 5 ] ||
    fail "without a dispatcher W1 is '$state' after $regs registrations, $fails failures"
dispatcher D
wait_all_registered 1 "dispatcher started ${OUTAGE_START} s after the workers"
registration_spread D

# ---- 2. registered workers, the dispatcher killed for OUTAGE_RESTART seconds
kill -9 "$D_PID"
wait "$D_PID" 2>/dev/null || true
sleep $OUTAGE_RESTART
read -r state regs fails <<<"$(worker_state 1)"
[ "$fails" -ge 10 ] || fail "W1 saw only $fails failed calls in a ${OUTAGE_RESTART} s outage"
dispatcher D2
wait_all_registered 2 "dispatcher restarted after a ${OUTAGE_RESTART} s outage"
registration_spread D2
for i in $(seq 1 $NW); do
    pid_var="W${i}_PID"
    kill -0 "${!pid_var}" 2>/dev/null || fail "W$i died"
done
echo PASS

#!/usr/bin/env bash
# An idle client asks for work (docs/protocol.md "Idle clients"): with a plan
# that puts 90% of the splits on workers that are slow to take them (one
# split at a time, a 500 ms heartbeat), the client runs its own 10% and then
# takes remote splits no worker holds yet, one at a time while idle -- its
# --json shows far more local samples than its planned share, and the
# digests equal --local (every sample exactly once, the same bytes). With
# offload "all" the client runs nothing itself, idle or not.
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 3 40
write_train_spec "$TMP/spec.json" 2
N=120
EPOCHS=2

"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq $((N * EPOCHS)) ] || fail "local run: expected $((N * EPOCHS)) digests"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --max-splits-per-worker 1 --heartbeat-ms 500 --worker-timeout-ms 3000
for i in 1 2; do
    start_daemon W$i "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done
wait_live_workers "$D_HTTP" 2

remote() { # remote NAME OFFLOAD
    "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 2 --offload "$2" --digests "$TMP/$1" --json >"$TMP/$1.json" ||
        fail "$1: run failed"
    sort "$TMP/$1" >"$TMP/$1.s"
    cmp -s "$TMP/$1.s" "$TMP/local.s" || {
        diff "$TMP/$1.s" "$TMP/local.s" | head -5
        fail "$1: digests differ from --local"
    }
}
sources() { # sources NAME: "LOCAL REMOTE" from --json
    /usr/bin/python3 -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(j["sources"]["local"], j["sources"]["remote"])' "$TMP/$1.json"
}

remote mostly_remote 2:0.1
read -r loc rem <<<"$(sources mostly_remote)"
echo "offload 2:0.1: $loc local / $rem remote of $((N * EPOCHS)) samples (planned local: 10%)"
[ $((loc + rem)) -ge $((N * EPOCHS)) ] || fail "2:0.1: sources do not add up ($loc + $rem)"
# Planned: one split of 8 per 10 (16 of 120 positions per epoch rounded to
# whole splits). Idle, the client took remote splits: at least twice that.
[ "$loc" -ge $((2 * N * EPOCHS / 10)) ] ||
    fail "2:0.1: the idle client ran only $loc samples itself (planned ~$((N * EPOCHS / 10)))"
[ "$rem" -gt 0 ] || fail "2:0.1: the workers ran nothing"

remote all all
read -r loc rem <<<"$(sources all)"
echo "offload all: $loc local / $rem remote"
[ "$loc" -eq 0 ] || fail "offload all: the client ran $loc samples itself"
echo "PASS"

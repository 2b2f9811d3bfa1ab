#!/usr/bin/env bash
# The client fetches its own share's URL shards ahead of its reads
# (docs/sources.md "Remote sources"), as workers do: real nginx on
# loopback, its access log with times. The shards were indexed before (the
# index cached). 8 shards of 16 samples read in index order ("shuffle":
# false), taken at 20 samples/s by a client whose executor holds 24: the
# last shard's first read comes about (112 - 24) / 20 = 4.4 s into the
# run, and without reading ahead its bytes would be fetched then. Fills
# (by range GETs of what the index did not keep, pfill.h) on loopback take
# milliseconds, so:
#  - locally (--local, 256 positions ahead): every shard is whole in the
#    cache and the run's last shard GET ends within 1.5 s of its first
#    request;
#  - with a dispatcher that gives the client every split (--offload off;
#    4 splits, 32 positions, ahead): within 3.6 s;
#  - digests equal the disk's.
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
WWW="$TMP/www"
shards_www "$DATA" "$WWW" mm-shards --samples 128 --per-shard 16 --size-scale 0.3 --seed 19
NGX="$TMP/nginx"
HPORT=$(free_port)
start_nginx_shards "$NGX" "$WWW" "$HPORT" '$msec'
H="http://127.0.0.1:$HPORT"
ROOTS="$H/d/"

spec() { # spec FILE PATH
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "$2", "shuffle": false},
 "deterministic": true,
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": 1, "cache": "off"}
JSON
}
spec "$TMP/disk.json" "mm-shards/shard-{000000..000007}.tar"
spec "$TMP/http.json" "$H/d/mm-shards/shard-{000000..000007}.tar"
run() { # run SPEC NAME [ARGS...]: digests sorted into NAME.s
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --data-root "$DATA" --quiet --digests "$TMP/$name.dig" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; fail "$name: run failed"; }
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
run "$TMP/disk.json" disk --local --threads 2
# In a subshell: python_env's LD_PRELOAD (an ASan build) must not reach the
# curl of wait_live_workers later (curl hangs under a preloaded ASan).
index() { # index CACHE: the shards' index into CACHE (range GETs), no sample read
    (
        python_env
        "$PY" - "$TMP/http.json" "$DATA" "$ROOTS" "$1" <<'PY'
import sys, sluice
sluice.describe(None, sys.argv[1], data_root=sys.argv[2], remote_roots=sys.argv[3],
                cache_dir=sys.argv[4])
PY
    )
}
counted() { # counted NAME ARGS...: a run; whole = shards whole in its cache, last = its last GET
    local name=$1
    shift
    index "$TMP/cache-$name"
    local before
    before=$(wc -l <"$NGX/access.log")
    run "$TMP/http.json" "$name" --threads 1 --max-rate 20 --remote-roots "$ROOTS" \
        --cache-dir "$TMP/cache-$name" "$@"
    cmp -s "$TMP/$name.s" "$TMP/disk.s" || fail "$name: digests differ from disk"
    tail -n +$((before + 1)) "$NGX/access.log" >"$TMP/$name.log"
    whole=$(ls "$TMP/cache-$name/shards" | grep -v '^\.' | grep -v '\.idx$' | grep -vc '\.part$' ||
        true)
    # Seconds from the run's first request to its last shard GET's end.
    last=$(awk 'NR == 1 { t0 = $NF } $1 == "GET" && $2 ~ /\.tar$/ { t = $NF }
        END { printf "%.2f", t - t0 }' "$TMP/$name.log")
}

counted local --local
[ "$whole" -eq 8 ] || fail "local: $whole shards whole in the cache, want 8"
awk -v t="$last" 'BEGIN { exit !(t < 1.5) }' ||
    { cat "$TMP/local.log" >&2; fail "local: the last shard downloaded $last s into the run: not ahead of its reads"; }
echo "local: 8 shards in the cache, the last GET within $last s of the run's first request"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --heartbeat-ms 100
counted disp --dispatcher "$D_GRPC" --offload off
[ "$whole" -eq 8 ] || fail "dispatcher: $whole shards whole in the cache, want 8"
awk -v t="$last" 'BEGIN { exit !(t < 3.6) }' ||
    { cat "$TMP/disp.log" >&2; fail "dispatcher: the last shard downloaded $last s into the run: not ahead of its reads"; }
echo "with a dispatcher: 8 shards in the cache, the last GET within $last s (its splits' shards" \
    "ahead of its reads)"

# The planner is told what remote reads cost here: `sluice plan --explain`
# shows each host's measured read rate and request latency and the
# samples/s they allow.
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --remote-roots "$ROOTS" \
    --cache-dir "$TMP/cache-w"
wait_live_workers "$D_HTTP" 1
"$BIN/sluice" plan "$TMP/http.json" --dispatcher "$D_GRPC" --data-root "$DATA" --explain \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-plan" --threads 1 --samples 64 \
    >"$TMP/plan.out" 2>"$TMP/plan.err" || { cat "$TMP/plan.err" >&2; fail "sluice plan failed"; }
grep -q '^source reads (measured' "$TMP/plan.out" ||
    { cat "$TMP/plan.out" >&2; fail "plan --explain shows no source read rates"; }
# Bytes and latency both priced: HEAD time x requests / the reads at once.
grep -Eq '^  client +[0-9.]+ MB/s, HEAD [0-9.]+ ms x 1 request / [0-9]+ reads at once = [0-9.]+ samples/s \(latency [0-9]+ %\)' \
    "$TMP/plan.out" ||
    { cat "$TMP/plan.out" >&2; fail "plan --explain: no client read rate"; }
grep -Eq '^  workers .* MB/s, HEAD .* samples/s' "$TMP/plan.out" ||
    { cat "$TMP/plan.out" >&2; fail "plan --explain: no worker read rate"; }
echo "plan --explain: $(grep -A2 '^source reads' "$TMP/plan.out" | tail -n 2 | tr -s ' ' | tr '\n' ';')"
echo "PASS"

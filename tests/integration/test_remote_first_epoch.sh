#!/usr/bin/env bash
# No byte of a shard comes over the link twice in a first epoch (docs/
# sources.md "Remote sources", common/remote/partial.h, pfill.h): a shuffled
# first epoch over URL shards reads samples by range far ahead of their
# shards' whole fills, keeps those bytes in the cache (partial entries), and
# the fills fetch only what is missing. Real nginx on loopback, every GET and
# its body bytes counted from its access log, each request throttled so the
# fills take a while:
#  - the index's and the epoch's shard GETs transfer at most the shards'
#    bytes + 3 % (the stated slack: a read that waited for another's fetch
#    longer than SL_PFILL_WAIT_MS), not counting a hedge's repeat of one
#    range (those bounded apart, + 25 % with them);
#  - digests equal the same shards read from disk;
#  - afterwards the cache holds each shard whole, no partial entry left;
#  - a second epoch makes no GET at all (0 data bytes from nginx);
#  - a cache where every shard is over a quarter of cache_bytes (never
#    fetched whole): the first epoch's range reads are kept (partial
#    entries) and a second epoch is served from them, again with no GET;
#  - a shard over half of cache_bytes (1.5x and 0.75x its size): its range
#    bytes are kept as far as cache_bytes allows, so a second epoch moves
#    fewer bytes than the first; the cache stays within cache_bytes.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 64 \
    --per-shard 16 --size-scale 0.5 --seed 23 --quiet
WWW="$TMP/www"
mkdir -p "$WWW/d"
cp -r "$DATA/mm-shards" "$WWW/d/"
NGX="$TMP/nginx"
HPORT=$(free_port)
nginx_conf "$NGX" "$WWW" "$HPORT" \
    "log_format r '\$request \$status \$http_range \$body_bytes_sent';
    access_log $NGX/access.log r;" \
    "limit_rate 3m;"
/usr/sbin/nginx -c "$NGX/nginx.conf" -p "$NGX" 2>>"$NGX/stderr" &
PIDS+=("$!")
for _ in $(seq 1 100); do
    curl -sfI -o /dev/null "http://127.0.0.1:$HPORT/d/mm-shards/shard-000000.tar" && break
    sleep 0.05
done
H="http://127.0.0.1:$HPORT"
ROOTS="$H/d/"
SHARDS="shard-{000000..000003}.tar"
TOTAL=$(cat "$DATA"/mm-shards/shard-00000[0-3].tar | wc -c)

spec() { # spec FILE PATH
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "$2", "seed": 5},
 "stages": [], "batch_size": 8, "epochs": 1, "cache": "off"}
JSON
}
spec "$TMP/disk.json" "mm-shards/$SHARDS"
spec "$TMP/http.json" "$H/d/mm-shards/$SHARDS"
run() { # run SPEC NAME [ARGS...]: digests sorted into NAME.s
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --data-root "$DATA" --quiet --local --digests "$TMP/$name.dig" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; fail "$name: run failed"; }
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
run "$TMP/disk.json" disk --threads 2
python_env
index() { # index CACHE: the shards' index read (range GETs of headers, cached)
    "$PY" - "$TMP/http.json" "$DATA" "$ROOTS" "$1" <<'PY'
import sys, sluice
sluice.describe(None, sys.argv[1], data_root=sys.argv[2], remote_roots=sys.argv[3],
                cache_dir=sys.argv[4])
PY
}
since() { # since LINE: the access log after line LINE
    tail -n +$(($1 + 1)) "$NGX/access.log"
}
body_bytes() { # body_bytes: data bytes of the shard GETs on stdin
    awk '$1 == "GET" && $2 ~ /\.tar$/ { n += $NF } END { print n + 0 }'
}
data_gets() {
    awk '$1 == "GET" && $2 ~ /\.tar$/ { n++ } END { print n + 0 }'
}

# ---- first epoch: every shard byte once ------------------------------------
# The index's range reads (256 KiB windows of headers, describe) count too:
# their bytes are kept like the samples'.
CACHE="$TMP/cache"
before=$(wc -l <"$NGX/access.log")
index "$CACHE"
run "$TMP/http.json" first --threads 2 --remote-roots "$ROOTS" --cache-dir "$CACHE"
cmp -s "$TMP/first.s" "$TMP/disk.s" || fail "first epoch: digests differ from disk"
since "$before" >"$TMP/first.log"
got=$(body_bytes <"$TMP/first.log")
ranged=$(awk '$1 == "GET" && $4 == 206 && $5 !~ /^bytes=0-/ { n++ } END { print n + 0 }' \
    "$TMP/first.log")
[ "$ranged" -ge 4 ] || fail "only $ranged range reads: the epoch did not read ahead of the fills"
# A range sent twice by the hedge (no byte after the hedge delay, hedge.h;
# on a loaded machine it happens) is the same range twice in the log: its
# repeats are the hedge's cost, bounded apart.
uniq_bytes=$(awk '$1 == "GET" && $2 ~ /\.tar$/ && !seen[$2 " " $5]++ { n += $NF } END { print n + 0 }' \
    "$TMP/first.log")
limit=$((TOTAL + TOTAL * 3 / 100))
[ "$uniq_bytes" -le "$limit" ] ||
    { cat "$TMP/first.log" >&2; fail "first epoch moved $uniq_bytes bytes, over $TOTAL + 3 % ($limit)"; }
[ "$got" -le $((TOTAL + TOTAL / 4)) ] ||
    { cat "$TMP/first.log" >&2; fail "first epoch moved $got bytes with hedges, over $TOTAL + 25 %"; }
[ "$uniq_bytes" -ge "$TOTAL" ] || fail "first epoch moved $got bytes, less than the shards ($TOTAL)?"
whole=$(ls "$CACHE/shards" | grep -v '^\.' | grep -v '\.idx$' | grep -vc '\.part$' || true)
[ "$whole" -eq 4 ] || fail "$whole whole shards in the cache after the epoch, want 4"
[ "$(ls "$CACHE/shards" | grep -c '\.part$' || true)" -eq 0 ] || fail "partial entries left"
echo "index + first epoch: $uniq_bytes bytes ($got with hedged repeats) for $TOTAL bytes of" \
    "shards ($ranged range reads not at a shard's start), digests equal the disk's"

# ---- second epoch: from the cache ------------------------------------------
before=$(wc -l <"$NGX/access.log")
run "$TMP/http.json" second --threads 2 --remote-roots "$ROOTS" --cache-dir "$CACHE"
cmp -s "$TMP/second.s" "$TMP/disk.s" || fail "second epoch: digests differ from disk"
n=$(since "$before" | data_gets)
[ "$n" -eq 0 ] || fail "second epoch made $n GETs"
echo "second epoch: 0 GETs, 0 data bytes"

# ---- shards over a quarter of the cache: range bytes kept -----------------
# cache_bytes between 2x and 4x the largest shard: no shard is prefetched
# whole (over a quarter), each may have a partial entry (at most half).
bigname=$(cd "$DATA/mm-shards" && ls -S shard-00000[0-3].tar | head -n 1)
big=$(stat -c %s "$DATA/mm-shards/$bigname")
CB=$(((big * 5 / 2 + 1048575) / 1048576 * 1048576))
[ "$CB" -lt $((big * 4)) ] && [ "$CB" -ge $((big * 2)) ] || fail "no cache size fits ($big)"
spec "$TMP/http1.json" "$H/d/mm-shards/$bigname"
spec "$TMP/disk1.json" "mm-shards/$bigname"
run "$TMP/disk1.json" disk1 --threads 2
CACHE2="$TMP/cache2"
before=$(wc -l <"$NGX/access.log")
run "$TMP/http1.json" big1 --threads 2 --remote-roots "$ROOTS" --cache-dir "$CACHE2" \
    --cache-bytes "$CB"
cmp -s "$TMP/big1.s" "$TMP/disk1.s" || fail "big shard: digests differ from disk"
since "$before" >"$TMP/big1.log"
[ "$(grep -c '^GET [^ ]* HTTP/1.1 200 ' "$TMP/big1.log" || true)" -eq 0 ] || fail "a shard over a quarter was fetched whole"
got=$(body_bytes <"$TMP/big1.log")
size0=$big
[ "$got" -le "$size0" ] || fail "big shard: $got bytes for a $size0-byte shard"
[ "$(ls "$CACHE2/shards" | grep -c '\.part$' || true)" -eq 1 ] || fail "no partial entry kept"
before=$(wc -l <"$NGX/access.log")
run "$TMP/http1.json" big2 --threads 2 --remote-roots "$ROOTS" --cache-dir "$CACHE2" \
    --cache-bytes "$CB"
cmp -s "$TMP/big2.s" "$TMP/disk1.s" || fail "big shard, second epoch: digests differ"
n=$(since "$before" | data_gets)
[ "$n" -eq 0 ] || fail "big shard, second epoch: $n GETs (range bytes not kept)"
echo "a shard over a quarter of cache_bytes ($size0 of $CB): $got bytes by range in the" \
    "first epoch, kept; second epoch 0 GETs"

# ---- shards over half of the cache: what fits is kept ----------------------
# cache_usage DIR: the bytes the cache counts (cache.c: a partial entry by
# its allocated blocks), never over cache_bytes.
cache_usage() {
    /usr/bin/python3 - "$1/shards" <<'PY'
import os, sys
d, n = sys.argv[1], 0
for f in os.listdir(d):
    st = os.stat(os.path.join(d, f))
    if f.startswith("."):
        continue
    n += min(st.st_blocks * 512, st.st_size) if f.endswith(".part") else st.st_size
print(n)
PY
}
# 1.5x the shard (over half, fits: the second epoch moves nothing), 0.75x
# (the shard over the whole cache: what fits is kept): the second epoch moves
# fewer bytes than the first, the cache stays within cache_bytes after each.
for frac in 3/2 3/4; do
    CB=$((big * ${frac%/*} / ${frac#*/}))
    C3="$TMP/cache-$CB"
    e1=$(wc -l <"$NGX/access.log")
    run "$TMP/http1.json" over1 --threads 2 --remote-roots "$ROOTS" --cache-dir "$C3" \
        --cache-bytes "$CB"
    cmp -s "$TMP/over1.s" "$TMP/disk1.s" || fail "shard over half ($frac): digests differ"
    u1=$(cache_usage "$C3")
    e2=$(wc -l <"$NGX/access.log")
    run "$TMP/http1.json" over2 --threads 2 --remote-roots "$ROOTS" --cache-dir "$C3" \
        --cache-bytes "$CB"
    cmp -s "$TMP/over2.s" "$TMP/disk1.s" || fail "shard over half ($frac), epoch 2: digests differ"
    u2=$(cache_usage "$C3")
    b1=$(sed -n "$((e1 + 1)),${e2}p" "$NGX/access.log" | body_bytes)
    b2=$(since "$e2" | body_bytes)
    [ "$u1" -le "$CB" ] && [ "$u2" -le "$CB" ] ||
        fail "shard over half ($frac): the cache holds $u1 / $u2 bytes, over cache_bytes $CB"
    [ "$b1" -ge $((big * 9 / 10)) ] || fail "shard over half ($frac): epoch 1 moved $b1 bytes of $big?"
    [ "$b2" -lt "$b1" ] ||
        fail "shard over half ($frac): epoch 2 moved $b2 bytes, not fewer than epoch 1's $b1"
    # It fits in cache_bytes: all of it was kept, nothing goes over the link.
    [ "$frac" != 3/2 ] || [ "$b2" -eq 0 ] ||
        fail "shard over half ($frac): epoch 2 moved $b2 bytes of a shard the cache holds"
    echo "a shard over half of cache_bytes ($big of $CB): epoch 1 $b1 bytes, epoch 2 $b2;" \
        "the cache holds $u1 then $u2 bytes"
done
echo "PASS"

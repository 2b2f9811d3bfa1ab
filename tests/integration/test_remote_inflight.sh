#!/usr/bin/env bash
# A shard is not downloaded twice (docs/sources.md "Remote sources"): a
# sample read while its shard's whole download is running takes its members
# from that download once they are written (or due within a range GET's
# time), not by a range GET of its own. Real nginx on loopback, counted in
# its access log. Whole-object GETs send their first 1000 KiB at once and
# the rest at 100 KB/s (range GETs are not throttled), so during the job
# each shard's download holds its first 1000 KiB and is far from done:
#  - a read of a sample in that part makes no request (at most the first
#    read of each shard does, before its download has begun);
#  - a sample beyond it is read by a range GET (the download is too slow
#    to wait for);
#  - digests equal the disk's.
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 32 \
    --per-shard 16 --size-scale 0.5 --seed 17 --quiet
WWW="$TMP/www"
mkdir -p "$WWW/d"
cp -r "$DATA/mm-shards" "$WWW/d/"
NGX="$TMP/nginx"
HPORT=$(free_port)
nginx_conf "$NGX" "$WWW" "$HPORT" \
    "log_format r '\$request \$status \$http_range \$body_bytes_sent';
    access_log $NGX/access.log r;
    map \$http_range \$whole_rate { '' 100k; default 0; }" \
    "limit_rate \$whole_rate; limit_rate_after 1000k;"
/usr/sbin/nginx -c "$NGX/nginx.conf" -p "$NGX" 2>>"$NGX/stderr" &
PIDS+=("$!")
for _ in $(seq 1 100); do
    curl -sfI -o /dev/null "http://127.0.0.1:$HPORT/d/mm-shards/shard-000000.tar" && break
    sleep 0.05
done
H="http://127.0.0.1:$HPORT"
ROOTS="$H/d/"

spec() { # spec FILE PATH
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "$2", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": 1, "cache": "off"}
JSON
}
spec "$TMP/disk.json" "mm-shards/shard-{000000..000001}.tar"
spec "$TMP/http.json" "$H/d/mm-shards/shard-{000000..000001}.tar"
run() { # run SPEC NAME [ARGS...]: digests sorted into NAME.s
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --data-root "$DATA" --quiet --local --digests "$TMP/$name.dig" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; fail "$name: run failed"; }
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
run "$TMP/disk.json" disk --threads 2
for f in "$DATA"/mm-shards/shard-00000[01].tar; do
    [ "$(stat -c %s "$f")" -gt 1200000 ] || fail "$f: too small for a download that takes a while"
done

# Index first (range GETs of the headers, cached), so every GET the run
# makes is a sample read or a whole download.
python_env
"$PY" - "$TMP/http.json" "$DATA" "$ROOTS" "$TMP/cache" <<'PY'
import sys, sluice
sluice.describe(None, sys.argv[1], data_root=sys.argv[2], remote_roots=sys.argv[3],
                cache_dir=sys.argv[4])
PY
before=$(wc -l <"$NGX/access.log")
run "$TMP/http.json" http --threads 1 --remote-roots "$ROOTS" --cache-dir "$TMP/cache"
cmp -s "$TMP/http.s" "$TMP/disk.s" || fail "digests differ from disk"
tail -n +$((before + 1)) "$NGX/access.log" >"$TMP/run.log"
whole=$(grep -c '^GET /d/mm-shards/[^ ]*\.tar HTTP/1.1 200 ' "$TMP/run.log" || true)
[ "$whole" -eq 2 ] || fail "$whole whole downloads, want 2"
# Range GETs of bytes the downloads held, beyond each shard's first read.
early=$(awk '$1 == "GET" && $4 == 206 { split($5, r, /[=-]/); if (r[3] < 1024000) n[$2]++ }
    END { e = 0; for (k in n) if (n[k] > 1) e += n[k] - 1; print e }' "$TMP/run.log")
ranged=$(grep -c '^GET /d/mm-shards/[^ ]*\.tar HTTP/1.1 206 ' "$TMP/run.log" || true)
[ "$early" -eq 0 ] ||
    { cat "$TMP/run.log" >&2; fail "$early range GETs of bytes the running downloads held"; }
late=$(awk '$1 == "GET" && $4 == 206 { split($5, r, /[=-]/); if (r[3] >= 1024000) n++ } END { print n + 0 }' "$TMP/run.log")
[ "$late" -ge 1 ] || fail "no sample beyond the downloads' front was read by range"
echo "32 reads during 2 slow downloads: $ranged range GETs, $late of them beyond the" \
    "downloads' front, none of bytes already downloaded; digests equal the disk's"
echo "PASS"

#!/usr/bin/env bash
# A shard is not downloaded twice (docs/sources.md "Remote sources"): a
# sample read while its shard's fill is running takes the bytes the fill has
# (or is fetching: it waits for that range, pfill.h) from the shard's
# partial entry, and the fill skips the ranges reads kept. Real nginx on
# loopback, counted in its access log. Range GETs that start at byte 0 of
# a shard (the index's first window, a fill's first range) are sent at
# 100 KB/s after their first 1000 KiB, others at once, so each fill is far
# from done while the job reads:
#  - no byte of a shard is asked for twice (no two GETs overlap, a hedge's
#    repeat of one range apart), and no shard is downloaded by a whole GET;
#  - some samples beyond the fills' front are read by range (the fills are
#    too slow to wait for);
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
    map \$http_range \$slow_rate { '~^bytes=0-' 100k; default 0; }" \
    "limit_rate \$slow_rate; limit_rate_after 1000k;"
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
ibefore=$(($(wc -l <"$NGX/access.log") + 1))
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
[ "$whole" -eq 0 ] || fail "$whole whole downloads, want none (fills by range)"
# Bytes asked for twice: overlaps of distinct ranges of one shard, over the
# index's GETs and the run's.
tail -n +"$ibefore" "$NGX/access.log" | awk '$1 == "GET" && $4 == 206 { print $2, $5 }' |
    sort -u >"$TMP/ranges"
twice=$(awk '{ split($2, r, /[=-]/); n++; s[n] = $1; a[n] = r[2]; b[n] = r[3] }
    END { t = 0; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (s[i] == s[j]) { lo = a[i] > a[j] ? a[i] : a[j]; hi = b[i] < b[j] ? b[i] : b[j];
            if (hi >= lo) t += hi - lo + 1 }
        print t }' "$TMP/ranges")
[ "$twice" -eq 0 ] || { cat "$TMP/ranges" >&2; fail "$twice bytes asked for twice"; }
ranged=$(grep -c '^GET /d/mm-shards/[^ ]*\.tar HTTP/1.1 206 ' "$TMP/run.log" || true)
late=$(awk '$1 == "GET" && $4 == 206 { split($5, r, /[=-]/); if (r[2] >= 1024000) n++ } END { print n + 0 }' "$TMP/run.log")
[ "$late" -ge 1 ] || fail "no sample beyond the fills' front was read by range"
echo "32 reads during 2 slow fills: $ranged range GETs, $late of them beyond the fills'" \
    "front, no byte asked for twice; digests equal the disk's"
echo "PASS"

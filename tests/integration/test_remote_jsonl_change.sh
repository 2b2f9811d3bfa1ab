#!/usr/bin/env bash
# jsonl images named by URL changed under a running job (docs/sources.md
# "Remote sources"): each image's version is pinned by its first read, so
# a later read of it delivers those bytes again (from the cache) or, when
# the cache no longer has them, is a counted skip "changed since the job
# indexed it" -- never the new bytes. Real nginx on loopback.
# Epoch 1 reads every image; then every image is replaced by another one's
# bytes (a new ETag) and the host's cache emptied (as an eviction would):
# every epoch-2 sample read after that is such a skip, every one read before
# has its epoch-1 digest.
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
WWW="$TMP/www"
shards_www "$DATA" "$WWW" mm-images --samples 24 --per-shard 8 --size-scale 0.2 --seed 23
NGX="$TMP/nginx"
HPORT=$(free_port)
start_nginx_shards "$NGX" "$WWW" "$HPORT"
H="http://127.0.0.1:$HPORT"
url_manifest "$DATA" "$H/d"
nimg=$(grep -o "$H/d/mm-images/[^\"]*" "$DATA/mm_url.jsonl" | sort -u | wc -l)
[ "$nimg" -ge 10 ] || fail "only $nimg image URLs in the manifest"
cat >"$TMP/url.json" <<JSON
{"source": {"type": "jsonl", "path": "mm_url.jsonl", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 2, "epochs": 2, "cache": "off"}
JSON

CACHE="$TMP/cache"
"$BIN/sluice" run "$TMP/url.json" --data-root "$DATA" --local --threads 1 --max-rate 4 \
    --remote-roots "$H/d/" --cache-dir "$CACHE" --digests "$TMP/run.dig" --json \
    >"$TMP/run.out" 2>"$TMP/run.err" &
run_pid=$!
# Epoch 1 has read every image once it has GET each.
for _ in $(seq 1 400); do
    [ "$(grep -c '^GET /d/mm-images/' "$NGX/access.log" 2>/dev/null)" -ge "$nimg" ] && break
    sleep 0.05
done
[ "$(grep -c '^GET /d/mm-images/' "$NGX/access.log")" -ge "$nimg" ] || fail "epoch 1 did not read every image"
/usr/bin/python3 - "$WWW/d/mm-images" <<'PY'
import os, sys, time
d = sys.argv[1]
names = sorted(os.listdir(d))
blobs = [open(os.path.join(d, n), "rb").read() for n in names]
later = time.time() + 3600
for i, n in enumerate(names):  # each image gets the next one's bytes, a new mtime
    p = os.path.join(d, n)
    open(p, "wb").write(blobs[(i + 1) % len(blobs)])
    os.utime(p, (later, later))
PY
find "$CACHE/shards" -maxdepth 1 -type f ! -name '.*' -delete
wait "$run_pid" || { cat "$TMP/run.err" >&2; fail "the run failed"; }

/usr/bin/python3 - "$TMP/run.dig" "$TMP/run.out" <<'PY' || fail "changed images: wrong bytes or no skip"
import json, sys
e1, e2 = {}, {}
for line in open(sys.argv[1]):
    epoch, index, label, digest = line.split()
    (e1 if epoch == "0" else e2)[index] = digest
assert len(e1) == 24, len(e1)
for i, d in e2.items():
    assert e1[i] == d, "sample %s: epoch 2 delivered other bytes than epoch 1" % i
j = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
sk = j["skipped"]
assert sk["total"] == 24 - len(e2) and sk["total"] > 0, (sk, len(e2))
assert any("changed since the job indexed it" in r.get("detail", "") for r in sk["recent"]), sk["recent"]
print("epoch 2: %d samples with their epoch-1 bytes, %d skipped (changed)" % (len(e2), sk["total"]))
PY
echo "PASS"

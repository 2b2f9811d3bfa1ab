#!/usr/bin/env bash
# One version of each jsonl image URL per job, across hosts and resumes
# (docs/sources.md "One version per job"). Real nginx, dispatcher, worker.
# 1. Two hosts: a manifest naming every image twice (its lines, then the same
#    lines again) is offloaded to a worker, which reads every image; the
#    worker is killed and every image changed (a new ETag), so the client
#    reads what is left -- the changed images -- itself. Each image is
#    delivered in exactly one version; a sample whose image the job had
#    delivered before in the other version is a counted skip "changed since
#    the job first read it".
# 2. A resume: a job stopped with --save-state, then resumed after the
#    images changed, fails with the changed-dataset refusal ("saved over
#    another source"); resumed with nothing changed it runs to its end.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
WWW="$TMP/www"
shards_www "$DATA" "$WWW" mm-images --samples 16 --per-shard 8 --size-scale 0.2 --seed 31
NGX="$TMP/nginx"
HPORT=$(free_port)
start_nginx_shards "$NGX" "$WWW" "$HPORT"
H="http://127.0.0.1:$HPORT"
# mm_url.jsonl: every line with its images as URLs, then the same lines again.
url_manifest "$DATA" "$H/d" 2
NLINES=$(wc -l <"$DATA/mm_url.jsonl")
nimg=$(grep -o "$H/d/mm-images/[^\"]*" "$DATA/mm_url.jsonl" | sort -u | wc -l)
[ "$nimg" -ge 6 ] || fail "only $nimg image URLs in the manifest"
cat >"$TMP/url.json" <<JSON
{"source": {"type": "jsonl", "path": "mm_url.jsonl", "shuffle": false},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 2, "epochs": 1, "cache": "off"}
JSON

# change_images: each image gets the next one's bytes and a new mtime (a new ETag).
change_images() {
    /usr/bin/python3 - "$WWW/d/mm-images" "$1" <<'PY'
import os, sys, time
d, shift = sys.argv[1], int(sys.argv[2])
names = sorted(os.listdir(d))
blobs = [open(os.path.join(d, n), "rb").read() for n in names]
later = time.time() + 3600 * shift
for i, n in enumerate(names):
    p = os.path.join(d, n)
    open(p, "wb").write(blobs[(i + shift) % len(blobs)])
    os.utime(p, (later, later))
PY
}

# ---- 1. a worker reads the old version, the client the new one -----------
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --worker-timeout-ms 1000 --heartbeat-ms 100 --client-timeout-ms 3000
WCACHE="$TMP/cache-worker"
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --remote-roots "$H/d/" \
    --cache-dir "$WCACHE"
wait_live_workers "$D_HTTP" 1
"$BIN/sluice" run "$TMP/url.json" --dispatcher "$D_GRPC" --offload all --data-root "$DATA" \
    --threads 1 --max-rate 4 --remote-roots "$H/d/" --cache-dir "$TMP/cache-client" \
    --digests "$TMP/two.dig" --json >"$TMP/two.out" 2>"$TMP/two.err" &
run_pid=$!
# The worker has read every image (whole objects in its cache) ...
for _ in $(seq 1 400); do
    [ "$(find "$WCACHE/shards" -maxdepth 1 -type f ! -name '.*' 2>/dev/null | wc -l)" -ge "$nimg" ] &&
        break
    sleep 0.05
done
[ "$(find "$WCACHE/shards" -maxdepth 1 -type f ! -name '.*' | wc -l)" -ge "$nimg" ] ||
    fail "the worker did not read every image"
# ... and has sent the client a split whole (the dispatcher's /status).
worker_delivered() {
    curl -sf "http://$D_HTTP/status" | /usr/bin/python3 -c '
import json, sys
print(sum(w["delivered"] for j in json.load(sys.stdin)["jobs"] for w in j["splits"]["workers"]))
' || echo 0
}
for _ in $(seq 1 200); do
    [ "$(worker_delivered)" -ge 1 ] && break
    sleep 0.05
done
[ "$(worker_delivered)" -ge 1 ] || fail "the worker delivered no split"
kill -9 "$W_PID"
change_images 1
wait "$run_pid" || { cat "$TMP/two.err" >&2; fail "two hosts: the run failed"; }
grep -q "runs on this host" "$TMP/two.err" || { cat "$TMP/two.err" >&2; fail "the client did not take over"; }

/usr/bin/python3 - "$DATA/mm_url.jsonl" "$TMP/two.dig" "$TMP/two.out" <<'PY' ||
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
def urls(o):
    v = o.get("images", o.get("image", []))
    return tuple(v if isinstance(v, list) else [v])
got = {}
for line in open(sys.argv[2]):
    epoch, index, label, digest = line.split()
    got[int(index)] = digest
j = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
sk = j["skipped"]
n = len(lines)
assert len(got) + sk["total"] == n, (len(got), sk["total"], n)
# Line i and line i + n/2 are the same record: delivered both, they are
# the same bytes (one version of its images).
half = n // 2
both = mixed = 0
for i in range(half):
    if i in got and i + half in got:
        both += 1
        mixed += got[i] != got[i + half]
assert mixed == 0, "%d records delivered in two versions" % mixed
# A record whose image the job delivered before in the other version is a skip.
changed = [r for r in sk["recent"] if "changed since the job first read it" in r.get("detail", "")]
assert sk["total"] > 0 and changed, sk
assert sk["reasons"].get("io", 0) == sk["total"], sk["reasons"]
assert all(r["path"].startswith("mm_url.jsonl:") for r in changed), changed[:1]
# Every skipped line names an image some delivered line names too: the
# job had delivered it, in the other version.
skipped = [i for i in range(n) if i not in got]
seen = {u for i in got for u in urls(lines[i])}
assert all(set(urls(lines[i])) & seen for i in skipped), skipped
# The client pinned exactly the URLs it delivered (--json "url_pins").
assert j["url_pins"] == {"pinned": len(seen), "unpinned": 0}, (j.get("url_pins"), len(seen))
print("two hosts: %d delivered (%d records both times, one version), %d skipped: %s"
      % (len(got), both, sk["total"], changed[0]["detail"][:160]))
PY
    fail "two hosts: an image delivered in two versions, or no counted skip"
change_images 0 # one more version (a new mtime): what part 2 starts from

# ---- 2. stopped, the images changed, resumed: refused ----------------------
cat >"$TMP/two_epochs.json" <<JSON
{"source": {"type": "jsonl", "path": "mm_url.jsonl", "seed": 3},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 2, "epochs": 2, "cache": "off"}
JSON
local_run() {
    "$BIN/sluice" run "$TMP/two_epochs.json" --local --data-root "$DATA" --threads 1 \
        --remote-roots "$H/d/" --cache-dir "$TMP/cache-resume" "$@"
}
local_run --save-state "$TMP/state" --stop-after-batches 4 --quiet >/dev/null 2>"$TMP/stop.err" ||
    { cat "$TMP/stop.err" >&2; fail "the run to stop failed"; }
grep -q '"url_pins":"' "$TMP/state" || fail "the saved state has no url_pins"
cp "$TMP/state" "$TMP/state0"
local_run --resume "$TMP/state" --quiet --json >"$TMP/same.out" 2>"$TMP/same.err" ||
    { cat "$TMP/same.err" >&2; fail "resumed with nothing changed: the run failed"; }
echo "resumed with nothing changed: runs to its end"
change_images 1
run_rc "$TMP/resumed.err" local_run --resume "$TMP/state0" --quiet
[ "$RC" -eq 1 ] || { cat "$TMP/resumed.err" >&2; fail "resumed across a change: exit $RC, want 1"; }
grep -q "saved over another source: mm_url.jsonl:[^:]*: URL [0-9a-f]* changed since the saved state read it" \
    "$TMP/resumed.err" || { cat "$TMP/resumed.err" >&2; fail "resumed across a change: not the refusal"; }
echo "resumed across a change: $(head -c 240 "$TMP/resumed.err")"
echo "PASS"

#!/usr/bin/env bash
# A job over URL shards opens without downloading them (docs/sources.md
# "Remote sources"): the tar headers are read by HTTP range requests from a
# real nginx on loopback, started here and stopped on any exit.
#  - opening (indexing) makes only range GETs (206): one per window for
#    small members, a jump over a member larger than the window; nothing is
#    downloaded whole; the index is cached per (URL, validator);
#  - a second open reads the cached index: no GET at all;
#  - a damaged index entry is dropped and read again, same samples;
#  - digests over the URLs equal the disk's, locally and offloaded;
#  - a server that ignores Range (Python's http.server answers 200): the
#    shards are read in one pass each into the cache, same digests;
#  - a range request that stalls is sent again after the hedge delay and
#    the second answer wins (a small server of our own stalls the first).
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 48 \
    --per-shard 16 --size-scale 0.2 --seed 11 --quiet
N=48
# Shard 1 gets a 3 MiB member (KEY.bin, not part of any sample) after its
# first sample: more than a range window, so indexing must jump over it.
/usr/bin/python3 - "$DATA/mm-shards/shard-000001.tar" <<'PY'
import io, os, sys, tarfile
p = sys.argv[1]
src = tarfile.open(p)
members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
out = io.BytesIO()
with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as dst:
    first_key = members[0][0].name.split(".")[0]
    done = False
    for m, body in members:
        if not done and m.name.split(".")[0] != first_key:
            big = tarfile.TarInfo(first_key + ".bin")
            big.size = 3 << 20
            dst.addfile(big, io.BytesIO(os.urandom(big.size)))
            done = True
        dst.addfile(m, io.BytesIO(body) if body is not None else None)
open(p, "wb").write(out.getvalue())
PY
WWW="$TMP/www"
mkdir -p "$WWW/d"
cp -r "$DATA/mm-shards" "$WWW/d/"

NGX="$TMP/nginx"
HPORT=$(free_port)
nginx_conf "$NGX" "$WWW" "$HPORT" \
    "log_format r '\$request \$status \$http_range'; access_log $NGX/access.log r;" \
    "autoindex on;"
/usr/sbin/nginx -c "$NGX/nginx.conf" -p "$NGX" 2>>"$NGX/stderr" &
PIDS+=("$!")
for _ in $(seq 1 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$HPORT/d/mm-shards/" && break # not a shard: not counted
    sleep 0.05
done
H="http://127.0.0.1:$HPORT"
ROOTS="$H/d/"

# "cache": "off": with --cache-dir the prefix cache (docs/cache.md) would serve
# the second epoch without any read; here every epoch's reads are counted.
spec() { # spec FILE PATH
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "$2", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": 2, "cache": "off"}
JSON
}
spec "$TMP/disk.json" "mm-shards/shard-{000000..000002}.tar"
spec "$TMP/http.json" "$H/d/mm-shards/shard-{000000..000002}.tar"

whole_entries() { # whole_entries CACHE: whole shards in the cache (not an index, not partial)
    ls "$1/shards" | grep -v '^\.' | grep -v '\.idx$' | grep -vc '\.part$' || true
}
gets() { # gets STATUS: GETs of the shards answered with STATUS so far
    grep -c "^GET /d/mm-shards/[^ ]*\.tar HTTP/1.1 $1" "$NGX/access.log" || true
}
python_env
describe() { # describe SPEC CACHE: the samples an open indexes
    "$PY" - "$1" "$DATA" "$ROOTS" "$2" <<'PY'
import sys, sluice
d = sluice.describe(None, sys.argv[1], data_root=sys.argv[2], remote_roots=sys.argv[3],
                    cache_dir=sys.argv[4])
print(d["samples"])
PY
}

# ---- opening: range reads only --------------------------------------------
CACHE="$TMP/cache"
want=$(describe "$TMP/disk.json" "$CACHE")
got=$(describe "$TMP/http.json" "$CACHE") || fail "describe over http failed"
[ "$got" = "$want" ] || fail "indexed $got samples over http, $want from disk"
[ "$(gets 200)" -eq 0 ] || fail "opening downloaded $(gets 200) shards whole"
ranged=$(gets 206)
# Shards 0 and 2 fit one 256 KiB window each; shard 1 needs a window before
# its 3 MiB member and at least one after it.
[ "$ranged" -ge 4 ] || fail "$ranged range GETs, want at least 4 (a jump over the big member)"
[ "$ranged" -le 8 ] || fail "$ranged range GETs for 3 shards: not one per window"
grep -q '^GET /d/mm-shards/shard-000001.tar HTTP/1.1 206 bytes=0-' "$NGX/access.log" ||
    fail "no range from the start of shard 1"
[ "$(ls "$CACHE/shards" | grep -c '\.idx$')" -eq 3 ] || fail "want 3 cached indexes"
# The windows' bytes are kept (partial entries, pfill.h), not fetched again;
# a shard one window read whole (shards 0 and 2) becomes a whole entry with
# no further request.
parts=$(ls "$CACHE/shards" | grep -c '\.part$' || true)
[ $((parts + $(whole_entries "$CACHE"))) -eq 3 ] || fail "the index's ranges were not kept"
[ "$parts" -ge 1 ] || fail "shard 1 (read in part) has no partial entry"
big=$(stat -c %s "$DATA/mm-shards/shard-000001.tar")
idx_bytes=$(cat "$CACHE"/shards/*.idx | wc -c)
[ "$idx_bytes" -lt $((big / 10)) ] || fail "the indexes ($idx_bytes bytes) are not small"
echo "open: $ranged range GETs (206) for 3 shards, none whole; indexes $idx_bytes bytes"

# ---- a second open: from the cached index ---------------------------------
before=$(grep -c '^GET ' "$NGX/access.log")
got=$(describe "$TMP/http.json" "$CACHE")
[ "$got" = "$want" ] || fail "second open: $got samples"
[ "$(grep -c '^GET ' "$NGX/access.log")" -eq "$before" ] || fail "second open made GETs"
echo "second open: cached indexes, HEAD only"

# ---- a damaged index entry is read again ---------------------------------
# Indexes of the shards not cached whole (a whole one is read locally, its
# index not looked at); their headers are read again from the windows kept
# in the shard's partial entry, else by ranges.
damaged=()
for f in "$CACHE"/shards/*.idx; do
    [ -e "${f%.idx}" ] || damaged+=("$f")
done
[ "${#damaged[@]}" -ge 1 ] || fail "no index of a shard not cached whole"
cut=${damaged[0]}
head -c 100 "$cut" >"$cut.cut" && mv "$cut.cut" "$cut" # truncated
f=${damaged[-1]}
if [ "$f" != "$cut" ]; then
    printf 'XXXXXXXX' | dd of="$f" conv=notrunc status=none # not an index
fi
got=$(describe "$TMP/http.json" "$CACHE")
[ "$got" = "$want" ] || fail "damaged index: $got samples"
[ "$(stat -c %s "$cut")" -gt 100 ] && [ "$(head -c 8 "$f")" = SLRIDX1 ] ||
    fail "a damaged index was served (not replaced)"
again=$(gets 206)
describe "$TMP/http.json" "$CACHE" >/dev/null
[ "$(gets 206)" -eq "$again" ] || fail "the damaged index was not replaced"
echo "damaged index entries: dropped, read again (from the shard's cached bytes), replaced"

# ---- digests: local and offloaded ------------------------------------------
run() { # run SPEC NAME [ARGS...]: digests sorted into NAME.s
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --data-root "$DATA" --quiet --threads 2 \
        --digests "$TMP/$name.dig" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; fail "$name: run failed"; }
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
run "$TMP/disk.json" disk --local
[ "$(wc -l <"$TMP/disk.s")" -eq $((2 * N)) ] || fail "disk: $(wc -l <"$TMP/disk.s") digests"
b200=$(gets 200)
b206=$(gets 206)
run "$TMP/http.json" http --local --remote-roots "$ROOTS" --cache-dir "$TMP/cache-run"
cmp -s "$TMP/http.s" "$TMP/disk.s" || fail "http:// digests differ from disk"
# The prefetcher fills each shard by range GETs of what is not kept yet
# (pfill.h), never by a whole GET.
[ $(($(gets 200) - b200)) -eq 0 ] || fail "$(($(gets 200) - b200)) whole GETs, want none"
[ "$(whole_entries "$TMP/cache-run")" -eq 3 ] || fail "the shards did not come into the cache"
[ "$(ls "$TMP/cache-run/shards" | grep -c '\.part$' || true)" -eq 0 ] ||
    fail "partial entries left beside the whole shards"
echo "local: digests over range-indexed URLs equal the disk's; $(($(gets 206) - b206)) range" \
    "GETs (index, first reads, the fills of what was missing), each shard whole in the cache"

# A cache too small for shard 1 to be fetched whole (over a quarter of
# cache_bytes, over half too): never fetched whole; its range reads are kept
# in its partial entry (it fits in cache_bytes), so no byte of it goes over
# the link twice: at most one GET per sample of the first epoch and the
# index's (not one per sample read in each epoch, 32 +).
b1=$(grep -c '^GET /d/mm-shards/shard-000001.tar HTTP/1.1 206' "$NGX/access.log" || true)
w1=$(grep -c '^GET /d/mm-shards/shard-000001.tar HTTP/1.1 200' "$NGX/access.log" || true)
run "$TMP/http.json" small --local --remote-roots "$ROOTS" --cache-dir "$TMP/cache-small" \
    --cache-bytes 4000000
cmp -s "$TMP/small.s" "$TMP/disk.s" || fail "small cache: digests differ from disk"
[ "$(grep -c '^GET /d/mm-shards/shard-000001.tar HTTP/1.1 200' "$NGX/access.log")" -eq "$w1" ] ||
    fail "shard 1 was fetched whole"
r1=$(($(grep -c '^GET /d/mm-shards/shard-000001.tar HTTP/1.1 206' "$NGX/access.log") - b1))
[ "$r1" -ge 1 ] && [ "$r1" -le 20 ] || fail "shard 1: $r1 range GETs, want 1 .. 16 + the index's"
[ "$(ls "$TMP/cache-small/shards" | grep -c '\.part$' || true)" -ge 1 ] ||
    fail "small cache: shard 1's ranges not kept"
echo "small cache: shard 1 read by $r1 range GETs over 2 epochs (its ranges kept), same digests"

# Shard 1 changed while a job reads it by ranges: its later reads are refused
# (the 206's validator is not the indexed one), never mixed in. A cache of
# a third of the shard: most of its reads stay range GETs (what fits is kept).
"$BIN/sluice" run "$TMP/http.json" --data-root "$DATA" --local --threads 1 --max-rate 20 \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-change" --cache-bytes 1200000 --json \
    >"$TMP/change.out" 2>"$TMP/change.err" &
cpid=$!
sleep 1
touch -d '+1 hour' "$WWW/d/mm-shards/shard-000001.tar" # a new Last-Modified and ETag
wait "$cpid" || { cat "$TMP/change.err" >&2; fail "changed mid-job: the run failed"; }
grep -q "changed since the job indexed it" "$TMP/change.out" "$TMP/change.err" ||
    { head -c 2000 "$TMP/change.out" >&2; fail "changed mid-job: no 'changed since the job indexed it'"; }
echo "shard changed mid-job: its later range reads refused ('changed since the job indexed it')"
touch -d '-1 hour' "$WWW/d/mm-shards/shard-000001.tar"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 3000
WCACHE="$TMP/cache-worker"
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --remote-roots "$ROOTS" \
    --cache-dir "$WCACHE"
wait_live_workers "$D_HTTP" 1
run "$TMP/http.json" off --dispatcher "$D_GRPC" --offload all --remote-roots "$ROOTS" \
    --cache-dir "$TMP/cache-off"
cmp -s "$TMP/off.s" "$TMP/disk.s" || fail "offloaded: digests differ from disk"
[ "$(ls "$WCACHE/shards" | grep -c '\.idx$')" -eq 3 ] || fail "the worker did not index by ranges"
[ "$(whole_entries "$WCACHE")" -eq 3 ] ||
    fail "the worker did not prefetch the shards into its cache"
echo "offloaded: digests equal the disk's; the worker indexed by ranges"

# ---- a server without Range support ----------------------------------------
PPORT=$(free_port)
(cd "$WWW" && exec /usr/bin/python3 -m http.server --bind 127.0.0.1 "$PPORT") \
    >"$TMP/plain.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$PPORT/d/" && break; sleep 0.05; done
P="http://127.0.0.1:$PPORT"
curl -s -o /dev/null -w '%{http_code}' -r 0-9 "$P/d/mm-shards/shard-000000.tar" | grep -qx 200 ||
    fail "the plain server honours Range: not the fault wanted"
spec "$TMP/plain.json" "$P/d/mm-shards/shard-{000000..000002}.tar"
PCACHE="$TMP/cache-plain"
run "$TMP/plain.json" plain --local --remote-roots "$P/d/" --cache-dir "$PCACHE"
cmp -s "$TMP/plain.s" "$TMP/disk.s" || fail "no Range support: digests differ from disk"
[ "$(ls "$PCACHE/shards" | grep -c '\.part$' || true)" -eq 0 ] ||
    fail "no Range support: empty partial entries left"
[ "$(whole_entries "$PCACHE")" -eq 3 ] ||
    fail "no Range support: the shards are not in the cache"
echo "a server ignoring Range: each shard read whole into the cache, same digests"

# ---- hedged range requests --------------------------------------------------
# A server whose first range GET stalls for 60 s (then answers); every other
# request is answered at once. The reader sends the range again after the
# hedge delay, and the second answer wins.
SPORT=$(free_port)
/usr/bin/python3 - "$SPORT" "$WWW" >"$TMP/stall.log" 2>&1 <<'PY' &
import http.server, os, sys, threading, time
port, root = int(sys.argv[1]), sys.argv[2]
lock, first = threading.Lock(), [True]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send(self, head):
        body = open(os.path.join(root, self.path.lstrip("/")), "rb").read()
        rng = self.headers.get("Range")
        code, part = 200, body
        if rng:
            a, b = rng.split("=")[1].split("-")
            a, b = int(a), min(int(b), len(body) - 1)
            code, part = 206, body[a:b + 1]
            with lock:
                stall, first[0] = first[0], False
            print("GET", rng, "stalled" if stall else "answered", flush=True)
            if stall:
                time.sleep(60)
                print("stall over", flush=True)
        self.send_response(code)
        self.send_header("Content-Length", str(len(part)))
        self.send_header("ETag", '"v1"')
        if rng:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(part)
    def do_HEAD(self): self.send(True)
    def do_GET(self): self.send(False)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
PIDS+=("$!")
for _ in $(seq 1 100); do curl -s -o /dev/null -I "http://127.0.0.1:$SPORT/d/mm-shards/shard-000000.tar" && break; sleep 0.05; done
spec "$TMP/one_disk.json" "mm-shards/shard-000000.tar"
spec "$TMP/stall.json" "http://127.0.0.1:$SPORT/d/mm-shards/shard-000000.tar"
run "$TMP/one_disk.json" one_disk --local
run "$TMP/stall.json" stall --local --remote-roots "http://127.0.0.1:$SPORT/d/" \
    --cache-dir "$TMP/cache-stall"
cmp -s "$TMP/stall.s" "$TMP/one_disk.s" || fail "hedged: digests differ from disk"
first=$(grep -m1 '^GET ' "$TMP/stall.log")
[ "${first##* }" = stalled ] || fail "the stalling server did not stall: $first"
rng=$(echo "$first" | cut -d' ' -f2)
grep -q "^GET $rng answered" "$TMP/stall.log" || { cat "$TMP/stall.log" >&2; fail "the stalled range was not sent again"; }
grep -q "stall over" "$TMP/stall.log" && fail "the job waited for the stalled answer"
echo "hedged: the stalled range ($rng) was sent again and the second answer won; same digests"
echo "PASS"

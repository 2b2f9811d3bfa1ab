#!/usr/bin/env bash
# URL sources (docs/sources.md "Remote sources") against real servers on
# loopback, started here and stopped on any exit: nginx serving WebDataset
# shards over HTTP, and moto's S3 server (it verifies SigV4 signatures).
#  - digests over http:// and s3:// URLs equal the same shards read from
#    disk, locally and offloaded to one worker; a second run reads the cache;
#  - a URL outside remote_roots: the client exits 2 naming the URL and the
#    setting; a worker without the prefix refuses the job and says why;
#    a redirect out of the prefixes is refused;
#  - a wrong S3 secret is refused by the server (HTTP 403);
#  - the server stopped mid-job: the job ends with every sample (the shards
#    are in the cache); a truncated response (a tiny server that lies about
#    Content-Length) fails after the retries, naming the URL; a changed
#    object: resume refuses the changed data set.
source "$(dirname "$0")/lib.sh"


DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 48 \
    --per-shard 16 --size-scale 0.2 --seed 11 --quiet
N=48
WWW="$TMP/www"
mkdir -p "$WWW/d" "$WWW/secret"
cp -r "$DATA/mm-shards" "$DATA/mm-images" "$WWW/d/"
cp "$DATA/mm-shards/shard-000000.tar" "$WWW/secret/"

# ---- nginx on a free loopback port -------------------------------------
NGX="$TMP/nginx"
HPORT=$(free_port)
nginx_conf "$NGX" "$WWW" "$HPORT" "access_log $NGX/access.log;" \
    'location /moved/ { rewrite ^/moved/(.*)$ /d/$1 redirect; }
        location /out/ { rewrite ^/out/(.*)$ /secret/$1 redirect; }'
start_nginx() {
    /usr/sbin/nginx -c "$NGX/nginx.conf" -p "$NGX" 2>>"$NGX/stderr" &
    NGX_PID=$!
    PIDS+=("$NGX_PID")
    for _ in $(seq 1 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$HPORT/d/mm-shards/shard-000000.tar" && return 0
        sleep 0.05
    done
    cat "$NGX/error.log" "$NGX/stderr" >&2 || true
    fail "nginx did not start"
}
stop_nginx() {
    kill "$NGX_PID" 2>/dev/null || true
    wait "$NGX_PID" 2>/dev/null || true
}
start_nginx
H="http://127.0.0.1:$HPORT"

# ---- moto's S3 server: IAM auth on, so signatures are verified -----------
MOTO_PY=""
for p in /usr/local/lib/sluice-oracle-moto/bin/python3 python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import moto.server, boto3' 2>/dev/null; then
        MOTO_PY=$(command -v "$p")
        break
    fi
done
[ -n "$MOTO_PY" ] || fail "no moto[server] (scripts/install-deps.sh installs it)"
SPORT=$(free_port)
# Three calls before auth starts: create the user, its key and its policy.
INITIAL_NO_AUTH_ACTION_COUNT=3 "$MOTO_PY" -m moto.server -H 127.0.0.1 -p "$SPORT" \
    >"$TMP/moto.log" 2>&1 &
PIDS+=("$!")
S3="http://127.0.0.1:$SPORT"
for _ in $(seq 1 200); do # a TCP probe: an HTTP request would use up a no-auth call
    (: >"/dev/tcp/127.0.0.1/$SPORT") 2>/dev/null && break
    sleep 0.05
done
"$MOTO_PY" - "$S3" "$DATA/mm-shards" >"$TMP/s3.keys" <<'PY' || fail "S3 set-up failed"
import boto3, json, os, sys
ep, shards = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=ep, region_name="us-east-1")
iam = boto3.client("iam", aws_access_key_id="x", aws_secret_access_key="x", **kw)
iam.create_user(UserName="sluice")
key = iam.create_access_key(UserName="sluice")["AccessKey"]
iam.put_user_policy(UserName="sluice", PolicyName="all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
s3 = boto3.client("s3", aws_access_key_id=key["AccessKeyId"],
                  aws_secret_access_key=key["SecretAccessKey"], **kw)
s3.create_bucket(Bucket="sluice-data")
for name in sorted(os.listdir(shards)):
    s3.upload_file(os.path.join(shards, name), "sluice-data", "train/" + name)
print(key["AccessKeyId"], key["SecretAccessKey"])
PY
read -r S3_ID S3_SECRET <"$TMP/s3.keys"
# This host's AWS settings, for the client and the worker alike (never on
# Sluice's wire: each process signs with its own).
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3
export AWS_ENDPOINT_URL="$S3" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID="$S3_ID"
export AWS_SECRET_ACCESS_KEY="$S3_SECRET"

spec() { # spec FILE PATH
    cat >"$1" <<JSON
{"source": {"type": "webdataset", "path": "$2", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 8, "epochs": 2}
JSON
}
spec "$TMP/disk.json" "mm-shards/shard-{000000..000002}.tar"
spec "$TMP/http.json" "$H/d/mm-shards/shard-{000000..000002}.tar"
spec "$TMP/s3.json" "s3://sluice-data/train/shard-{000000..000002}.tar"
ROOTS="$H/d/,s3://sluice-data/train/"

run() { # run SPEC NAME [ARGS...]: a local run, digests sorted into NAME.s
    local s=$1 name=$2
    shift 2
    "$BIN/sluice" run "$s" --data-root "$DATA" --quiet --threads 2 \
        --digests "$TMP/$name.dig" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err" >&2; fail "$name: run failed"; }
    sort "$TMP/$name.dig" >"$TMP/$name.s"
}
refused() { # refused WHAT WANT_EXIT WANT_TEXT CMD...
    local what=$1 want=$2 text=$3
    shift 3
    set +e
    "$@" >"$TMP/refused.out" 2>"$TMP/refused.err"
    local rc=$?
    set -e
    [ "$rc" -eq "$want" ] || { cat "$TMP/refused.err" >&2; fail "$what: exit $rc, want $want"; }
    grep -qF -- "$text" "$TMP/refused.err" ||
        { cat "$TMP/refused.err" >&2; fail "$what: no '$text' in the error"; }
    echo "$what: exit $rc, $(head -c 200 "$TMP/refused.err")"
}
run "$TMP/disk.json" disk --local
[ "$(wc -l <"$TMP/disk.s")" -eq $((2 * N)) ] || fail "disk: $(wc -l <"$TMP/disk.s") digests"

CACHE="$TMP/cache-client"
run "$TMP/http.json" http --local --remote-roots "$ROOTS" --cache-dir "$CACHE"
cmp -s "$TMP/http.s" "$TMP/disk.s" || fail "http:// digests differ from disk"
[ "$(ls "$CACHE/shards" | grep -v '^\.' | grep -vc '\.idx$')" -eq 3 ] ||
    fail "the cache does not hold the 3 shards"
[ "$(ls "$CACHE/shards" | grep -c '\.idx$')" -eq 3 ] || fail "the cache does not hold 3 shard indexes"
run "$TMP/s3.json" s3 --local --remote-roots "$ROOTS" --cache-dir "$CACHE"
cmp -s "$TMP/s3.s" "$TMP/disk.s" || fail "s3:// digests differ from disk"
echo "local: http:// and s3:// (SigV4, path style) digests equal the disk's"

# The other kinds: a tar shard, a filelist of URLs, a jsonl manifest naming
# its images by URL -- each equal to the same files read from disk.
kind_spec() { # kind_spec FILE TYPE PATH
    cat >"$1" <<JSON
{"source": {"type": "$2", "path": "$3", "seed": 5},
 "stages": [{"op": "decode_image"}, {"op": "normalize", "on": "device"}],
 "batch_size": 4, "epochs": 1}
JSON
}
/usr/bin/python3 - "$DATA" "$H/d" <<'PY'
import json, os, sys
data, base = sys.argv[1], sys.argv[2]
imgs = sorted(os.listdir(os.path.join(data, "mm-images")))[:20]
with open(os.path.join(data, "list.txt"), "w") as a, open(os.path.join(data, "list_url.txt"), "w") as b:
    for i, f in enumerate(imgs):
        a.write("mm-images/%s %d\n" % (f, i % 3))
        b.write("%s/mm-images/%s %d\n" % (base, f, i % 3))
with open(os.path.join(data, "mm.jsonl")) as src, open(os.path.join(data, "mm_url.jsonl"), "w") as dst:
    for line in src:
        o = json.loads(line)
        for k in ("images", "image"):
            if isinstance(o.get(k), list):
                o[k] = [base + "/" + p for p in o[k]]
            elif isinstance(o.get(k), str):
                o[k] = base + "/" + o[k]
        dst.write(json.dumps(o) + "\n")
PY
cp "$DATA/mm_url.jsonl" "$WWW/d/"
kind_spec "$TMP/tar_disk.json" tar "mm-shards/shard-000000.tar"
kind_spec "$TMP/tar_url.json" tar "$H/d/mm-shards/shard-000000.tar"
kind_spec "$TMP/fl_disk.json" filelist "list.txt"
kind_spec "$TMP/fl_url.json" filelist "list_url.txt"
kind_spec "$TMP/jl_disk.json" jsonl "mm.jsonl"
kind_spec "$TMP/jl_url.json" jsonl "$H/d/mm_url.jsonl"
for k in tar fl jl; do
    run "$TMP/${k}_disk.json" "${k}_disk" --local
    run "$TMP/${k}_url.json" "${k}_url" --local --remote-roots "$ROOTS" --cache-dir "$CACHE"
    [ -s "$TMP/${k}_disk.s" ] || fail "$k: no samples"
    cmp -s "$TMP/${k}_url.s" "$TMP/${k}_disk.s" || fail "$k over URLs: digests differ from disk"
done
echo "tar shard, filelist of URLs, jsonl manifest with image URLs: digests equal the disk's"
# A filelist line outside remote_roots fails the open, naming LIST:LINE.
printf '%s/mm-images/%s 0\n' "$H/secret" "x.jpg" >>"$DATA/list_url.txt"
refused "filelist URL outside remote_roots" 2 "list_url.txt:21: URL '$H/secret/mm-images/x.jpg' is outside remote_roots" \
    "$BIN/sluice" run "$TMP/fl_url.json" --local --data-root "$DATA" --remote-roots "$ROOTS" \
    --cache-dir "$CACHE"

# An imagefolder over S3: the listing (ListObjectsV2) indexed as torchvision
# indexes the same tree on disk; http has no listing. At a bucket's root:
# moto's SigV4 check mis-handles an escaped query value (prefix=a%2Fb; its
# own boto3 client gets SignatureDoesNotMatch there), AWS does not.
IMGS="$TMP/imgs"
make_images "$IMGS" 3 7
"$MOTO_PY" - "$S3" "$IMGS/train" <<'PY' || fail "S3 imagefolder upload failed"
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
root = sys.argv[2]
s3.create_bucket(Bucket="sluice-folder")
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        s3.upload_file(p, "sluice-folder", os.path.relpath(p, root))
PY
kind_spec "$TMP/if_disk.json" imagefolder "train"
kind_spec "$TMP/if_s3.json" imagefolder "s3://sluice-folder/"
kind_spec "$TMP/if_http.json" imagefolder "$H/d/mm-images/"
"$BIN/sluice" run "$TMP/if_disk.json" --local --data-root "$IMGS" --quiet --digests "$TMP/if_disk.dig" ||
    fail "imagefolder from disk"
"$BIN/sluice" run "$TMP/if_s3.json" --local --data-root "$IMGS" --quiet --digests "$TMP/if_s3.dig" \
    --remote-roots "s3://sluice-folder/" --cache-dir "$CACHE" 2>"$TMP/if_s3.err" ||
    { cat "$TMP/if_s3.err" >&2; fail "imagefolder over s3"; }
[ -s "$TMP/if_disk.dig" ] || fail "imagefolder: no samples"
cmp -s <(sort "$TMP/if_s3.dig") <(sort "$TMP/if_disk.dig") || fail "imagefolder over s3: digests differ"
python_env
"$PY" - "$TMP/if_s3.json" "$TMP/if_disk.json" "$IMGS" "$CACHE" <<'PY' || fail "imagefolder over s3: classes or labels differ"
import sys, sluice
kw = dict(data_root=sys.argv[3], remote_roots="s3://sluice-folder/", cache_dir=sys.argv[4])
a, b = sluice.describe(None, sys.argv[1], **kw), sluice.describe(None, sys.argv[2], **kw)
assert a["classes"] == b["classes"] and a["samples"] == b["samples"], (a, b)
PY
echo "imagefolder over s3:// (listing): digests and classes equal the disk's"
refused "imagefolder over http" 1 "http(s) has no listing" \
    "$BIN/sluice" run "$TMP/if_http.json" --local --data-root "$DATA" --remote-roots "$ROOTS"

# The Python binding: remote_roots= and cache_dir= as keyword arguments.
python_env
"$PY" - "$TMP/http.json" "$DATA" "$ROOTS" "$CACHE" "$N" <<'PY' || fail "Python over URLs"
import sys, sluice
spec, data, roots, cache, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
with sluice.Loader(None, spec, data_root=data, remote_roots=roots, cache_dir=cache,
                   cache_bytes=1 << 30) as loader:
    got = sum(len(b.indices) for b in loader.batches())
assert got == 2 * n, got
try:
    sluice.Loader(None, spec, data_root=data, remote_roots="", cache_dir=cache)
    raise SystemExit("a URL outside remote_roots was accepted")
except sluice.SpecError as e:
    msg = str(e)
assert "outside remote_roots" in msg, msg
print("Python: remote_roots= reads the URLs; without them: SpecError:", msg[:90])
PY

# Concurrent jobs share one cache: each object is filled once (by range
# GETs of what is not kept yet, pfill.h; the entry's fill lock makes the
# other jobs wait for it), nothing partial is left behind. Each job also
# reads its samples by range while the fills run, and a process knows
# another's ranges only once they landed: the bytes are bounded by what
# one job's own download of every shard would take per job, not 1x.
SHARED="$TMP/cache-shared"
whole_gets() { grep -c '"GET /d/mm-shards/[^"]*" 200 ' "$NGX/access.log" || true; }
shard_bytes() {
    awk '$6 == "\"GET" && $7 ~ /^\/d\/mm-shards\// { n += $10 } END { print n + 0 }' \
        "$NGX/access.log"
}
before=$(whole_gets)
bbefore=$(shard_bytes)
for i in 1 2 3; do
    "$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" --quiet --threads 1 \
        --remote-roots "$ROOTS" --cache-dir "$SHARED" --digests "$TMP/conc$i.dig" \
        2>"$TMP/conc$i.err" &
    conc[$i]=$!
done
for i in 1 2 3; do
    wait "${conc[$i]}" || { cat "$TMP/conc$i.err" >&2; fail "concurrent job $i failed"; }
    cmp -s <(sort "$TMP/conc$i.dig") "$TMP/disk.s" || fail "concurrent job $i: digests differ"
done
after=$(whole_gets)
[ $((after - before)) -eq 0 ] || fail "3 concurrent jobs made $((after - before)) whole GETs, want 0"
moved=$(($(shard_bytes) - bbefore))
three=$(cat "$DATA"/mm-shards/shard-00000[0-2].tar | wc -c)
[ "$moved" -lt $((3 * three)) ] || fail "3 concurrent jobs moved $moved bytes: each read all itself"
[ "$(ls "$SHARED/shards" | grep -v '^\.' | grep -v '\.idx$' | grep -vc '\.part$')" -eq 3 ] ||
    fail "the 3 shards are not whole in the cache"
[ -z "$(ls -A "$SHARED/shards" | grep '^\.tmp-')" ] || fail "a temporary was left in the cache"
[ -z "$(ls -A "$SHARED/shards" | grep '\.part$')" ] || fail "a partial entry was left in the cache"
echo "3 concurrent jobs, one cache: each shard filled once, $moved bytes for $three of shards"

# A second run is served by the cache: nginx logs no new GET.
gets() { grep -c '"GET ' "$NGX/access.log" || true; }
before=$(gets)
run "$TMP/http.json" http2 --local --remote-roots "$ROOTS" --cache-dir "$CACHE"
cmp -s "$TMP/http2.s" "$TMP/disk.s" || fail "cached run: digests differ"
[ "$(gets)" -eq "$before" ] || fail "cached run fetched again ($before -> $(gets) GETs)"
echo "second run: from the cache (HEAD only), same digests"

# ---- refusals -----------------------------------------------------------
n_before=$(wc -l <"$NGX/access.log")
refused "no remote_roots" 2 "is outside remote_roots (none set; set remote_roots or --remote-roots" \
    "$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" --cache-dir "$CACHE"
refused "outside remote_roots" 2 "URL '$H/d/mm-shards/shard-{000000..000002}.tar' is outside remote_roots ('$H/d/other/'" \
    "$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" --cache-dir "$CACHE" \
    --remote-roots "$H/d/other/"
spec "$TMP/dots.json" "$H/d/../secret/shard-000000.tar"
refused "'..' out of a root" 2 'must not contain a ".." component' \
    "$BIN/sluice" run "$TMP/dots.json" --local --data-root "$DATA" --remote-roots "$ROOTS"
spec "$TMP/dots2.json" "$H/d/%2e%2E/secret/shard-000000.tar"
refused "'%2e%2E' out of a root" 2 "a '..' segment in the path" \
    "$BIN/sluice" run "$TMP/dots2.json" --local --data-root "$DATA" --remote-roots "$ROOTS"
spec "$TMP/at.json" "http://127.0.0.1:$HPORT@127.0.0.1:1/d/x.tar"
refused "userinfo in a URL" 2 "userinfo ('@') is not allowed" \
    "$BIN/sluice" run "$TMP/at.json" --local --data-root "$DATA" --remote-roots "$ROOTS"
[ "$(wc -l <"$NGX/access.log")" -eq "$n_before" ] || fail "a refused URL reached the server"
spec "$TMP/out.json" "$H/out/shard-000000.tar"
refused "redirect out of the roots" 2 "redirected: URL '$H/secret/shard-000000.tar' is outside remote_roots" \
    "$BIN/sluice" run "$TMP/out.json" --local --data-root "$DATA" --cache-dir "$CACHE" \
    --remote-roots "$ROOTS,$H/out/"
spec "$TMP/moved.json" "$H/moved/mm-shards/shard-{000000..000002}.tar"
run "$TMP/moved.json" moved --local --remote-roots "$ROOTS,$H/moved/" --cache-dir "$CACHE"
cmp -s "$TMP/moved.s" "$TMP/disk.s" || fail "a redirect inside the roots: digests differ"
echo "a redirect inside the roots is followed"
refused "wrong S3 secret" 1 "access denied (HTTP 403" \
    env AWS_SECRET_ACCESS_KEY=not-the-secret "$BIN/sluice" run "$TMP/s3.json" --local --data-root "$DATA" \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-wrong"
grep -q "SignatureDoesNotMatch" "$TMP/moto.log" 2>/dev/null ||
    grep -q '" 403 ' "$TMP/moto.log" || fail "moto did not log the refused signature"
grep -qF "$S3_SECRET" "$TMP"/*.err && fail "the S3 secret appears in an error message"

# ---- offloaded to one worker ---------------------------------------------
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 3000
WCACHE="$TMP/cache-worker"
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 \
    --dispatcher "$D_GRPC" --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$WCACHE" --cache-bytes 8388608
wait_live_workers "$D_HTTP" 1
grep -q "URL sources: remote_roots=$ROOTS cache_dir=$WCACHE cache_bytes=8388608" "$TMP/W.err" ||
    fail "the worker does not log its URL-source settings"
grep -qF "$S3_SECRET" "$TMP/W.err" && fail "the worker logged the S3 secret"
curl -sf "http://$W_HTTP/status" | grep -qF "$S3_SECRET" && fail "/status shows the S3 secret"
for kind in http s3; do
    run "$TMP/$kind.json" off-$kind --dispatcher "$D_GRPC" --offload all \
        --remote-roots "$ROOTS" --cache-dir "$CACHE"
    cmp -s "$TMP/off-$kind.s" "$TMP/disk.s" || fail "$kind offloaded: digests differ from disk"
done
[ "$(ls "$WCACHE/shards" | grep -vc '^\.')" -ge 3 ] || fail "the worker cached nothing"
echo "offloaded to one worker: http:// and s3:// digests equal the disk's"

# A worker whose remote_roots lack the prefix refuses the job, and says why.
start_daemon W2 "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1 --remote-roots "$H/d/other/" \
    --cache-dir "$TMP/cache-w2"
wait_live_workers "$D_HTTP" 2
kill "$W_PID"
wait "$W_PID" 2>/dev/null || true
spec "$TMP/http1.json" "$H/d/mm-shards/shard-000001.tar"
set +e
timeout 60 "$BIN/sluice" run "$TMP/http1.json" --dispatcher "$D_GRPC" --offload all \
    --data-root "$DATA" --quiet --remote-roots "$ROOTS" --cache-dir "$CACHE" \
    >"$TMP/w2.out" 2>"$TMP/w2.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$TMP/w2.err" >&2; fail "refused by every worker: the client did not run it"; }
grep -qF "is outside remote_roots ('$H/d/other/'" "$TMP/W2.err" ||
    { cat "$TMP/W2.err" >&2; fail "worker W2 does not log why it refused the job"; }
grep -qF "cannot run it" "$TMP/D.err" && grep -qF "is outside remote_roots ('$H/d/other/'" "$TMP/D.err" ||
    { cat "$TMP/D.err" >&2; fail "the dispatcher does not say why the worker refused"; }
grep -qF "every live worker refused the job" "$TMP/w2.err" &&
    grep -qF "is outside remote_roots ('$H/d/other/'" "$TMP/w2.err" ||
    { cat "$TMP/w2.err" >&2; fail "the client is not told why the worker refused"; }
echo "a worker without the prefix refuses the job; the client hears why and runs it itself: $(head -c 200 "$TMP/w2.err")"
kill "$W2_PID"
wait "$W2_PID" 2>/dev/null || true

# ---- faults ---------------------------------------------------------------
# The server stopped mid-job: every shard was fetched when the job opened,
# so the job ends with every sample.
FRESH="$TMP/cache-fresh"
"$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" --quiet --threads 1 \
    --remote-roots "$ROOTS" --cache-dir "$FRESH" --digests "$TMP/stop.dig" \
    --max-rate 40 >"$TMP/stop.out" 2>"$TMP/stop.err" &
run_pid=$!
for _ in $(seq 1 100); do
    [ -s "$TMP/stop.dig" ] && break
    sleep 0.05
done
[ -s "$TMP/stop.dig" ] || fail "the job did not start"
stop_nginx
wait "$run_pid" || { cat "$TMP/stop.err" >&2; fail "server stopped mid-job: the run failed"; }
sort "$TMP/stop.dig" >"$TMP/stop.s"
cmp -s "$TMP/stop.s" "$TMP/disk.s" || fail "server stopped mid-job: digests differ"
echo "server stopped mid-job: every sample delivered (from the cache)"
# ... and a job that opens now cannot reach it: a clear error after retries.
refused "server down" 1 "after 4 attempts" \
    "$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" \
    --remote-roots "$ROOTS" --cache-dir "$TMP/cache-down"
start_nginx

# A truncated response: a server that announces more bytes than it sends.
TPORT=$(free_port)
/usr/bin/python3 - "$TPORT" "$DATA/mm-shards/shard-000000.tar" >"$TMP/trunc.log" 2>&1 <<'PY' &
import http.server, sys
port, path = int(sys.argv[1]), sys.argv[2]
body = open(path, "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def head(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"t1"')
        self.end_headers()
    def do_HEAD(self):
        self.head()
    def do_GET(self):
        self.head()
        self.wfile.write(body[: len(body) // 2])  # then the connection closes
        self.close_connection = True
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
PIDS+=("$!")
for _ in $(seq 1 100); do curl -s -o /dev/null -I "http://127.0.0.1:$TPORT/x" && break; sleep 0.05; done
spec "$TMP/trunc.json" "http://127.0.0.1:$TPORT/shard.tar"
refused "truncated response" 1 "http://127.0.0.1:$TPORT/shard.tar" \
    "$BIN/sluice" run "$TMP/trunc.json" --local --data-root "$DATA" \
    --remote-roots "http://127.0.0.1:$TPORT/" --cache-dir "$TMP/cache-trunc"
grep -q "after 4 attempts" "$TMP/refused.err" || fail "truncated: not retried"
[ "$(grep -c '"GET /shard.tar' "$TMP/trunc.log")" -eq 4 ] || fail "truncated: want 4 GETs"
[ -z "$(ls "$TMP/cache-trunc/shards" | grep -v '^\.')" ] || fail "truncated: a partial file was kept"
[ -z "$(ls -A "$TMP/cache-trunc/shards" | grep '^\.tmp-')" ] || fail "truncated: a temporary was left"

# A changed object: resume refuses the changed data set.
run "$TMP/http.json" part --local --remote-roots "$ROOTS" --cache-dir "$CACHE" \
    --save-state "$TMP/state" --stop-after-batches 3
/usr/bin/python3 - "$WWW/d/mm-shards/shard-000001.tar" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[600] ^= 0xFF  # a byte inside the first member's data: same size, new ETag (mtime)
open(p, "wb").write(bytes(b))
PY
touch -d '+1 minute' "$WWW/d/mm-shards/shard-000001.tar"
refused "changed object, resume" 2 "saved over another source" \
    "$BIN/sluice" run "$TMP/http.json" --local --data-root "$DATA" --remote-roots "$ROOTS" \
    --cache-dir "$CACHE" --resume "$TMP/state"
echo "PASS"

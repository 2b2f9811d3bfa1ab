# Shared helpers for integration tests: temp dirs, daemons, cleanup.
# Every test sources this; cleanup runs on any exit, also on failure.
set -euo pipefail
BUILD="${BUILD:-build}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/$BUILD/bin"
TMP="$(mktemp -d /tmp/sluice-it.XXXXXX)"
PIDS=()
# A dispatcher's default journal is per user ($XDG_STATE_HOME/sluice/journal):
# a test's own, never the user's nor another test's (tests run concurrently).
export XDG_STATE_HOME="$TMP/state"

cleanup() {
    local rc=$?
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
    exit $rc
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# start_daemon NAME CMD...: starts it with stdout/stderr in $TMP/NAME.{out,err},
# waits for its "listening grpc=... http=..." line, sets NAME_GRPC / NAME_HTTP / NAME_PID.
# A sluice-dispatcher given neither --journal nor --config runs without a
# journal (--journal none), as tests wrote it: its default, a directory per
# user, would be shared by the test's dispatchers (one locks out the next).
start_daemon() {
    local name=$1
    shift
    if [ "$(basename "$1")" = sluice-dispatcher ] && [[ " $* " != *" --journal "* ]] &&
        [[ " $* " != *" --config "* ]]; then
        set -- "$@" --journal none
    fi
    # A restarted NAME must not be read from its predecessor's files: the
    # child truncates them only once it runs, after this loop's first grep.
    rm -f "$TMP/$name.out" "$TMP/$name.err"
    "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 1 200); do
        if grep -q '^listening ' "$TMP/$name.out" 2>/dev/null; then
            local line
            line=$(head -n 1 "$TMP/$name.out")
            printf -v "${name}_GRPC" '%s' "$(sed -nE 's/.*grpc=([^ ]+).*/\1/p' <<<"$line")"
            printf -v "${name}_HTTP" '%s' "$(sed -nE 's/.*http=([^ ]+).*/\1/p' <<<"$line")"
            printf -v "${name}_PID" '%s' "$pid"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$TMP/$name.err" >&2
            fail "$name exited before listening"
        fi
        sleep 0.05
    done
    cat "$TMP/$name.err" >&2
    fail "$name did not print its listening line"
}

# wait_live_workers HTTP N: waits (5 s at most) until the dispatcher at HTTP
# lists N live workers; fails the test otherwise.
wait_live_workers() {
    local n=""
    for _ in $(seq 1 100); do
        n=$(curl -sf "http://$1/status" | /usr/bin/python3 -c 'import json,sys
print(sum(w["state"] == "live" for w in json.load(sys.stdin)["workers"]))' || true)
        [ "$n" = "$2" ] && return 0
        sleep 0.05
    done
    fail "$2 live workers expected, got ${n:-none}"
}

# python_env: $PY (/usr/bin/python3: Debian's numpy and torch) importing the
# source tree's binding over $BUILD's library.
python_env() {
    PY=/usr/bin/python3
    export PYTHONPATH="$ROOT/client/python"
    export SLUICE_LIB="$ROOT/$BUILD/lib/libsluice.so"
    [ -e "$SLUICE_LIB" ] || fail "$SLUICE_LIB not built"
    case "$BUILD" in
    *asan*)
        # An ASan-built library needs the runtime loaded first -- into Python
        # only: exported, it reached every program the test ran (curl, nginx),
        # which do not need it and could hang under it. Python's own
        # allocations are not ours to leak-check.
        PY="$TMP/python3-asan"
        printf '#!/bin/sh\nLD_PRELOAD="%s %s" ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" exec /usr/bin/python3 "$@"\n' \
            "$(cc -print-file-name=libasan.so)" "$(cc -print-file-name=libubsan.so)" >"$PY"
        chmod +x "$PY"
        ;;
    esac
}

# free_port: a TCP port on 127.0.0.1 free now (for servers that cannot be
# told to pick one and print it, as Sluice's daemons can with :0).
free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# text_only_jsonl IN OUT: the records of jsonl manifest IN that have no
# image, into OUT (a text-only source for mixes); fails when there are none.
text_only_jsonl() {
    /usr/bin/python3 -c '
import json, sys
with open(sys.argv[2], "w") as out:
    for l in open(sys.argv[1]):
        if not json.loads(l).get("images"):
            out.write(l)' "$1" "$2"
    [ -s "$2" ] || fail "no text-only record in $1"
}

# make_mix_data DIR: 48 generated multimodal records (WebDataset shards of 24
# in mm-shards/, mm.jsonl), the tokenizer files and text.jsonl (text_only_jsonl).
make_mix_data() {
    /usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$1" --samples 48 \
        --per-shard 24 --size-scale 0.5 --seed 7 --quiet
    "$ROOT/scripts/tokenizer-files" "$1/tokenizers" >/dev/null
    text_only_jsonl "$1/mm.jsonl" "$1/text.jsonl"
}

# url_manifest DATA BASE [TIMES]: DATA/mm_url.jsonl, DATA/mm.jsonl with every
# image named by its URL under BASE, its lines TIMES times over (default 1).
url_manifest() {
    /usr/bin/python3 - "$1" "$2" "${3:-1}" <<'PY'
import json, os, sys
data, base, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = []
for line in open(os.path.join(data, "mm.jsonl")):
    o = json.loads(line)
    for k in ("images", "image"):
        if isinstance(o.get(k), list):
            o[k] = [base + "/" + p for p in o[k]]
        elif isinstance(o.get(k), str):
            o[k] = base + "/" + o[k]
    lines.append(json.dumps(o))
with open(os.path.join(data, "mm_url.jsonl"), "w") as dst:
    dst.write("\n".join(lines * times) + "\n")
PY
}

# caps_text_spec FILE CAPS TEXT SEED SAMPLES STEP CAPS2 TEXT2 EPOCHS: an auto,
# deterministic mix over make_mix_data's data -- webdataset images ("caps",
# weight CAPS) and the text-only jsonl with its own stages ("text", TEXT) --
# of SAMPLES per epoch whose weights become CAPS2 / TEXT2 at step STEP.
caps_text_spec() {
    local tok='{"op": "tokenize", "vocab": "tokenizers/cl100k_base.tiktoken", "max_tokens": 300}'
    local tpl='{"op": "template", "image_token": 100258, "tokens_per_tile": 16, "eos": 100257}'
    cat >"$1" <<JSON
{"mix": {"sources": [
   {"name": "caps", "weight": $2, "source": {"type": "webdataset", "path": "mm-shards"}},
   {"name": "text", "weight": $3, "stages": [$tok, $tpl],
    "source": {"type": "jsonl", "path": "text.jsonl"}}],
  "seed": $4, "samples_per_epoch": $5,
  "schedule": [{"from_step": $6, "weights": {"caps": $7, "text": $8}}]},
 "stages": [{"op": "decode_image"}, {"op": "image_tiles", "tile": 32, "max_tiles": 4},
            $tok, $tpl],
 "batch_size": 8, "epochs": $9, "offload": "auto", "deterministic": true}
JSON
}

# local_digests SPEC DATA OUT [ARGS...]: SPEC run --local on one thread, its
# digests sorted into OUT.s (unsorted in OUT.dig); ARGS go to sluice run.
local_digests() {
    local spec=$1 data=$2 out=$3
    shift 3
    "$BIN/sluice" run "$spec" --local --data-root "$data" --quiet --threads 1 \
        --digests "$out.dig" "$@" || fail "local run of $spec failed"
    sort "$out.dig" >"$out.s"
}

# py CODE [ARGS...]: the system Python (not a test's venv) on CODE.
py() { /usr/bin/python3 -c "$@"; }

# make_images DIR CLASSES PER_CLASS: a small generated image set.
make_images() {
    /usr/bin/python3 "$ROOT/scripts/make-dataset" --out "$1" --classes "$2" --per-class "$3" \
        --large-fraction 0 --quiet --format "${4:-imagefolder}"
}

# nginx_conf DIR WWW PORT [HTTP_LINES] [SERVER_LINES]: DIR/nginx.conf serving WWW
# on 127.0.0.1:PORT, logs and temporaries in DIR. One process (master_process
# off): the exit's kill -9 of a master would leave its workers running.
nginx_conf() {
    local d=$1 www=$2 port=$3 http_lines=${4:-} server_lines=${5:-} user=""
    mkdir -p "$d"
    [ "$(id -u)" -eq 0 ] && user="user root;" # it reads the test's 0700 temp dir
    cat >"$d/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
$user
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 64; }
http {
    $http_lines
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    server {
        listen 127.0.0.1:$port;
        root $www;
        $server_lines
    }
}
CONF
}

write_train_spec() {
    cat >"$1" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 7},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 64},
            {"op": "flip", "p": 0.5},
            {"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]},
            {"op": "to_chw"}],
 "batch_size": 8, "epochs": ${2:-2}${3:-}}
JSON
}

# http_grep PATTERN CURL_ARGS...: whether the body, fetched whole first, has a
# line matching PATTERN. Not `curl | grep -q`: grep -q leaves at its first
# match, curl then dies of SIGPIPE and pipefail fails the pipeline.
http_grep() {
    local pat=$1 body
    shift
    body=$(curl -sf "$@") || return 1
    grep -q -- "$pat" <<<"$body"
}

# run_rc ERRFILE CMD...: runs CMD with its stderr in ERRFILE and its exit status
# in RC; a failing CMD does not end the test.
run_rc() {
    local errf=$1
    shift
    RC=0
    "$@" 2>"$errf" || RC=$?
}


# shards_www DATA WWW DIRS MAKE_DATASET_ARGS...: a generated multimodal data
# set in DATA (make-dataset --multimodal ARGS) whose DIRS (comma-separated:
# mm-shards, mm-images, ...) are copied under WWW/d/ for an nginx to serve.
shards_www() {
    local data=$1 www=$2 dirs=$3
    shift 3
    /usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$data" --quiet "$@"
    mkdir -p "$www/d"
    local d
    for d in ${dirs//,/ }; do
        cp -r "$data/$d" "$www/d/"
    done
}

# start_nginx_shards DIR WWW PORT [LOG_FIELDS] [SERVER_LINES]: an nginx
# (nginx_conf) serving WWW on 127.0.0.1:PORT, each request logged in
# DIR/access.log as "$request $status $http_range" plus LOG_FIELDS (nginx
# variables, e.g. '$msec'), started in the background (its pid in NGX_PID
# and PIDS) and waited for until it answers HTTP. A stopped one starts
# again with the same call (its access.log goes on).
start_nginx_shards() {
    local d=$1 www=$2 port=$3 fields=${4:-} server_lines=${5:-}
    nginx_conf "$d" "$www" "$port" \
        "log_format r '\$request \$status \$http_range${fields:+ $fields}'; access_log $d/access.log r;" \
        "$server_lines"
    /usr/sbin/nginx -c "$d/nginx.conf" -p "$d" 2>>"$d/stderr" &
    NGX_PID=$!
    PIDS+=("$NGX_PID")
    local code=""
    for _ in $(seq 1 100); do
        # Any HTTP answer (even a 404 or a proxy's 502) means it listens.
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
        [ -n "$code" ] && [ "$code" != 000 ] && return 0
        kill -0 "$NGX_PID" 2>/dev/null || break
        sleep 0.05
    done
    cat "$d/stderr" >&2 2>/dev/null || true
    fail "nginx ($d) did not start on port $port"
}

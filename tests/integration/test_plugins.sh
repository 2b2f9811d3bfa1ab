#!/usr/bin/env bash
# Stage plugins (docs/plugins.md): the example plugins (cutout, rgb_to_ycbcr)
# give the same bytes locally, offloaded, split between worker and client,
# and on a worker that lacks them (it runs the units before them, the client
# the rest; /status shows who has what); a spec naming another build, a
# missing plugin_dir, refused params and broken plugin files get clear
# errors; a plugin that crashes fails its job naming it while another job on
# the same worker finishes with the right digests and the worker lives on.
source "$(dirname "$0")/lib.sh"

PLUG="$ROOT/$BUILD/plugins"
export SLUICE_PLUGIN_HOST="$BIN/sluice-plugin-host" # the library inside python, too
make_images "$TMP/data" 3 20 # 60 samples
CUT=$(sha256sum "$PLUG/cutout.so" | cut -d' ' -f1)
YCC=$(sha256sum "$PLUG/ycbcr.so" | cut -d' ' -f1)
spec() { # spec FILE CUTOUT_SHA [extra stage JSON]
    cat >"$1" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 5},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 40},
            {"op": "plugin", "name": "cutout", "sha256": "$2", "params": {"size": 12, "p": 0.8}},
            {"op": "plugin", "name": "rgb_to_ycbcr", "sha256": "$YCC"}${3:-},
            {"op": "flip", "p": 0.5}, {"op": "to_chw"}],
 "batch_size": 6, "epochs": 2}
JSON
}
spec "$TMP/plug.json" "$CUT"
run() { # run NAME ARGS...: sorted digests in $TMP/NAME.s
    local name=$1
    shift
    "$BIN/sluice" run "$TMP/plug.json" --data-root "$TMP/data" --quiet --digests "$TMP/$name" \
        "$@"
    sort "$TMP/$name" >"$TMP/$name.s"
}

run local --local --plugin-dir "$PLUG" --threads 2
[ "$(wc -l <"$TMP/local.s")" -eq 120 ] || fail "local: expected 120 digests"
SLUICE_PLUGIN_DIR="$PLUG" run local1 --local --threads 1
cmp -s "$TMP/local.s" "$TMP/local1.s" || fail "1 and 2 threads differ"
echo "local: 120 samples through cutout + rgb_to_ycbcr, the same with 1 and 2 threads"

# ---- broken inputs
run_rc "$TMP/e" "$BIN/sluice" run "$TMP/plug.json" --data-root "$TMP/data" --local --quiet
[ "$RC" -eq 2 ] && grep -q "no plugin_dir is configured" "$TMP/e" || fail "no plugin_dir: $(cat "$TMP/e")"
echo "refused: $(cat "$TMP/e")"
spec "$TMP/other.json" "$YCC"
run_rc "$TMP/e" "$BIN/sluice" run "$TMP/other.json" --data-root "$TMP/data" --local --quiet \
    --plugin-dir "$PLUG"
[ "$RC" -eq 2 ] && grep -q "has cutout 1.0 with sha256 ${CUT:0:16}... (another build)" "$TMP/e" \
    || fail "another build: $(cat "$TMP/e")"
echo "refused: $(cat "$TMP/e")"
sed 's/"size": 12/"size": 0/' "$TMP/plug.json" >"$TMP/badparams.json"
run_rc "$TMP/e" "$BIN/sluice" run "$TMP/badparams.json" --data-root "$TMP/data" --local \
    --quiet --plugin-dir "$PLUG"
[ "$RC" -eq 2 ] && grep -q "plugin cutout: params: need size 1..4096" "$TMP/e" \
    || fail "bad params: $(cat "$TMP/e")"
echo "refused: $(cat "$TMP/e")"
sed 's/"sha256": "'"$CUT"'"/"sha256": "ABC"/' "$TMP/plug.json" >"$TMP/badsha.json"
run_rc "$TMP/e" "$BIN/sluice" run "$TMP/badsha.json" --data-root "$TMP/data" --local --quiet \
    --plugin-dir "$PLUG"
[ "$RC" -eq 2 ] && grep -q "stages\[2\].sha256: must be the plugin file's SHA-256" "$TMP/e" \
    || fail "bad sha256: $(cat "$TMP/e")"
echo "refused: $(cat "$TMP/e")"

# A worker's plugin_dir with broken files beside good ones: the good ones
# serve, the broken ones are named in its log.
mkdir -p "$TMP/wplug"
cp "$PLUG/cutout.so" "$PLUG/ycbcr.so" "$ROOT/$BUILD/test-plugins/misbehave.so" "$TMP/wplug/"
head -c 4096 /dev/urandom >"$TMP/wplug/garbage.so"
cp "$BIN/sluice-plugin-host" "$TMP/wplug/noentry.so" # an ELF without the entry point

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 5 --worker-timeout-ms 1500 --heartbeat-ms 100
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --plugin-dir "$TMP/wplug"
start_daemon W2 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
wait_live_workers "$D_HTTP" 2
grep -q "not used: garbage.so" "$TMP/W1.err" && grep -q "noentry.so" "$TMP/W1.err" \
    || fail "broken plugin files not named: $(grep -i plugin "$TMP/W1.err")"
echo "worker log: $(grep "not used" "$TMP/W1.err" | sed 's/.*notice: //; s/.*warning: //')"
curl -sf "http://$D_HTTP/status" >"$TMP/status.json"
/usr/bin/python3 - "$TMP/status.json" "$W1_GRPC" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1]))
have = {w["address"]: sorted(p["name"] for p in w["plugins"]) for w in st["workers"]}
assert have[sys.argv[2]] == ["cutout", "misbehave", "rgb_to_ycbcr"], have
assert sorted(map(len, have.values())) == [0, 3], have
print("/status: plugins per worker:", sorted(have.values()))
EOF

# ---- offloaded: all on workers (one of which lacks the plugins), and split
run all --dispatcher "$D_GRPC" --plugin-dir "$PLUG" --offload all
cmp -s "$TMP/all.s" "$TMP/local.s" || fail "offload all: digests differ from --local"
W2_SAMPLES=$(curl -sf "http://$W2_HTTP/metrics" | awk '/^sluice_worker_samples_total /{print $2}')
[ "${W2_SAMPLES:-0}" -gt 0 ] || fail "the worker without plugins got no work"
echo "offload all: = --local; the worker without plugins ran $W2_SAMPLES samples up to the plugin"
run mixed --dispatcher "$D_GRPC" --plugin-dir "$PLUG" --offload 3:0.4
cmp -s "$TMP/mixed.s" "$TMP/local.s" || fail "offload 3:0.4: digests differ from --local"
echo "offload 3:0.4 (workers decode, crop, cutout; the client ycbcr on; 40 % local): = --local"

# ---- with built-in augmentations too, on 2 ranks: the union is --local's.
spec "$TMP/aug.json" "$CUT" ', {"op": "color_jitter", "brightness": 0.4, "hue": 0.1}, {"op": "random_erasing", "p": 0.5}'
"$BIN/sluice" run "$TMP/aug.json" --data-root "$TMP/data" --quiet --local --plugin-dir "$PLUG" \
    --digests "$TMP/aug_local"
for r in 0 1; do
    "$BIN/sluice" run "$TMP/aug.json" --data-root "$TMP/data" --quiet --dispatcher "$D_GRPC" \
        --plugin-dir "$PLUG" --offload all --rank $r --world-size 2 --digests "$TMP/aug_r$r" &
    PIDS+=("$!")
done
wait "${PIDS[@]: -2}" || fail "a rank of the plugin + augmentation job failed"
cat "$TMP"/aug_r0 "$TMP"/aug_r1 | sort | cmp -s - <(sort "$TMP/aug_local") \
    || fail "2 ranks, offloaded: the union differs from --local"
echo "plugins + color_jitter + random_erasing, 2 ranks offloaded: union = --local (120 digests)"

# ---- a transient crash (the first host to reach its 3rd sample dies once):
# retried in a fresh host, every sample once, the digests of a run without it.
MIS=$(sha256sum "$TMP/wplug/misbehave.so" | cut -d' ' -f1)
spec "$TMP/once.json" "$CUT" ', {"op": "plugin", "name": "misbehave", "sha256": "'"$MIS"'", "params": {"mode": "crash_once", "from": 2, "marker": "'"$TMP/crashed"'"}}'
touch "$TMP/crashed" # the reference: no crash
"$BIN/sluice" run "$TMP/once.json" --data-root "$TMP/data" --quiet --local \
    --plugin-dir "$TMP/wplug" --digests "$TMP/once_ref"
rm "$TMP/crashed"
"$BIN/sluice" run "$TMP/once.json" --data-root "$TMP/data" --quiet --dispatcher "$D_GRPC" \
    --plugin-dir "$TMP/wplug" --offload all --digests "$TMP/once" || fail "transient crash: job failed"
[ -e "$TMP/crashed" ] || fail "the plugin did not crash"
sort "$TMP/once" | cmp -s - <(sort "$TMP/once_ref") \
    || fail "transient crash: samples lost or repeated ($(wc -l <"$TMP/once") digests)"
echo "a transient plugin crash: retried in a fresh host, 120 digests = the run without it"

# ---- a crashing plugin: its job fails naming it; another job on the same
# worker finishes with the right digests; the worker lives on. W2 (without
# plugins) leaves first, so W1 is the one that meets the crash.
kill "$W2_PID"
wait "$W2_PID" 2>/dev/null || true
wait_live_workers "$D_HTTP" 1
"$BIN/sluice" run "$TMP/plug.json" --data-root "$TMP/data" --quiet --digests "$TMP/busy" \
    --dispatcher "$D_GRPC" --plugin-dir "$PLUG" --offload all --max-rate 60 \
    2>"$TMP/busy.err" &
BUSY=$!
PIDS+=("$BUSY")
spec "$TMP/crash.json" "$CUT" ', {"op": "plugin", "name": "misbehave", "sha256": "'"$MIS"'", "params": {"mode": "crash", "from": 0}}'
sleep 0.5
run_rc "$TMP/crash.err" "$BIN/sluice" run "$TMP/crash.json" --data-root "$TMP/data" --quiet \
    --dispatcher "$D_GRPC" --plugin-dir "$TMP/wplug" --offload all
[ "$RC" -eq 1 ] && grep -q "plugin misbehave crashed (signal 6)" "$TMP/crash.err" \
    || fail "crashing plugin: exit $RC: $(cat "$TMP/crash.err")"
echo "crash: $(cat "$TMP/crash.err")"
wait "$BUSY" || fail "the other job failed: $(cat "$TMP/busy.err")"
sort "$TMP/busy" | cmp -s - "$TMP/local.s" || fail "the other job's digests differ"
kill -0 "$W1_PID" || fail "the worker died with the plugin"
grep -q "plugin misbehave crashed (signal 6)" "$TMP/W1.err" || fail "the worker did not log it"
echo "the other job on that worker: 120 digests = --local; the worker is alive"
# A plugin that hangs: killed after plugin_timeout_ms on the worker (the job
# fails there, its splits come home), after SLUICE_PLUGIN_TIMEOUT_MS on the
# client (10 s by default).
sed 's/"mode": "crash"/"mode": "hang"/' "$TMP/crash.json" >"$TMP/hang.json"
kill "$W1_PID"
wait "$W1_PID" 2>/dev/null || true
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1 --plugin-dir "$TMP/wplug" \
    --plugin-timeout-ms 300
wait_live_workers "$D_HTTP" 1
T0=$(date +%s)
SLUICE_PLUGIN_TIMEOUT_MS=400 run_rc "$TMP/hang.err" "$BIN/sluice" run "$TMP/hang.json" --data-root "$TMP/data" --quiet \
    --dispatcher "$D_GRPC" --plugin-dir "$TMP/wplug" --offload all --threads 1
echo "hang run: $(( $(date +%s) - T0 )) s"
[ "$RC" -eq 1 ] && grep -q "plugin misbehave: no answer within 400 ms (killed)" "$TMP/hang.err" \
    || fail "hanging plugin: exit $RC: $(cat "$TMP/hang.err")"
grep -q "plugin misbehave: no answer within 300 ms (killed)" "$TMP/W1.err" \
    || fail "the worker did not kill the hanging plugin"
kill -0 "$W1_PID" || fail "the worker died with the hanging plugin"
echo "hang: killed after 300 ms on the worker, 400 ms on the client: $(cat "$TMP/hang.err")"

# ---- docs/plugins.md's my_stage.c, built by the doc's own source-tree line
# from a tree's top directory (the header only: no make install, no JSON
# library), then run: p 0 is the spec without it, p 1 changes every sample,
# bad params are refused with its message.
mkdir -p "$TMP/doc/tree" "$TMP/doc/plug"
ln -s "$ROOT/common" "$TMP/doc/tree/common"
/usr/bin/python3 - "$ROOT/docs/plugins.md" "$TMP/doc" <<'EOF'
import re, sys
doc, out = sys.argv[1], sys.argv[2]
text = open(doc).read()
def block(marker, lang):
    m = re.compile(r"```" + lang + r"\n(.*?)```", re.S).search(text, text.index(marker))
    return m.group(1)
open(out + "/tree/my_stage.c", "w").write(block("<!-- plugin-example: my_stage.c", "c"))
lines = [l for l in block("<!-- plugin-build", "sh").splitlines() if "-I common/plugin" in l]
assert len(lines) == 1 and lines[0].startswith("cc "), lines
open(out + "/build.sh", "w").write(lines[0] + "\n")
EOF
echo "docs/plugins.md: $(cat "$TMP/doc/build.sh")"
(cd "$TMP/doc/tree" && bash -e "$TMP/doc/build.sh") || fail "the doc's build line failed"
cp "$TMP/doc/tree/my_stage.so" "$TMP/doc/plug/"
MY=$(sha256sum "$TMP/doc/plug/my_stage.so" | cut -d' ' -f1)
my_spec() { # my_spec FILE [plugin stage JSON]
    cat >"$1" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 5},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 40}${2:-},
            {"op": "to_chw"}],
 "batch_size": 6, "epochs": 1}
JSON
}
my_run() { # my_run NAME [plugin stage JSON]: sorted digests in $TMP/NAME.s
    my_spec "$TMP/$1.json" "${2:-}"
    "$BIN/sluice" run "$TMP/$1.json" --data-root "$TMP/data" --quiet --local \
        --plugin-dir "$TMP/doc/plug" --digests "$TMP/$1" || fail "$1: the job failed"
    sort "$TMP/$1" >"$TMP/$1.s"
}
MY_STAGE=', {"op": "plugin", "name": "my_stage", "sha256": "'"$MY"'", "params": '
my_run none
my_run p0 "$MY_STAGE"'{"p": 0}}'
my_run p1 "$MY_STAGE"'{"amount": -40, "p": 1}}'
cmp -s "$TMP/none.s" "$TMP/p0.s" || fail "my_stage with p 0 changed samples"
[ "$(wc -l <"$TMP/p1.s")" -eq 60 ] || fail "my_stage p 1: expected 60 digests"
[ -z "$(comm -12 "$TMP/none.s" "$TMP/p1.s")" ] || fail "my_stage with p 1 left samples unchanged"
my_spec "$TMP/mybad.json" "$MY_STAGE"'{"amount": 1.5}}'
run_rc "$TMP/e" "$BIN/sluice" run "$TMP/mybad.json" --data-root "$TMP/data" --local --quiet \
    --plugin-dir "$TMP/doc/plug"
[ "$RC" -eq 2 ] && grep -q "plugin my_stage: params: need amount -255..255" "$TMP/e" \
    || fail "my_stage bad params: $(cat "$TMP/e")"
echo "the doc's my_stage.c: built by its line; p 0 = without it, p 1 changes all 60;" \
    "refused: $(cat "$TMP/e")"

# ---- Python: plugin_dir=
python_env
$PY - "$TMP/plug.json" "$TMP/data" "$PLUG" "$TMP/local.s" <<'EOF'
import hashlib, sys
import sluice
spec, root, plug, want = sys.argv[1:]
n = 0
with sluice.Loader(None, spec, data_root=root, plugin_dir=plug, threads=1) as ld:
    for b in ld.batches():
        n += len(b.indices)
assert n == 120, n
try:
    sluice.Loader(None, spec, data_root=root, plugin_dir=root)
except sluice.SpecError as e:
    assert "not in " in str(e), str(e)
    print("python: 120 samples with plugin_dir=; without the plugin:", e)
else:
    raise AssertionError("a missing plugin was accepted")
EOF

# ---- Python in a source tree, neither SLUICE_PLUGIN_HOST set nor the host
# on PATH (issue #38): the host is found beside the library (build/lib's
# ../bin). A library with no host near it: the error names the host
# program, where it was looked for and SLUICE_PLUGIN_HOST, not "not in DIR".
mkdir -p "$TMP/lonelib" "$TMP/nobin"
cp "$SLUICE_LIB" "$TMP/lonelib/"
[ -e "$(dirname "$(readlink -f "$PY")")/sluice-plugin-host" ] \
    && fail "a sluice-plugin-host beside $PY: this test cannot make it missing"
for lib in "$SLUICE_LIB" "$TMP/lonelib/libsluice.so"; do
    env -u SLUICE_PLUGIN_HOST PATH="$TMP/nobin" SLUICE_LIB="$lib" \
        $PY - "$TMP/plug.json" "$TMP/data" "$PLUG" "$lib" "$ROOT/$BUILD/lib/libsluice.so" <<'EOF2'
import sys
import sluice
spec, root, plug, lib, built = sys.argv[1:]
if lib == built:
    with sluice.Loader(None, spec, data_root=root, plugin_dir=plug, threads=1) as ld:
        n = sum(len(b.indices) for b in ld.batches())
    assert n == 120, n
    print("python, source tree, host not on PATH: found beside the library, 120 samples")
    sys.exit(0)
try:
    sluice.Loader(None, spec, data_root=root, plugin_dir=plug)
except sluice.SpecError as e:
    msg = str(e)
    for want in ("plugin host program sluice-plugin-host was not found",
                 lib.rsplit("/", 1)[0] + "/sluice-plugin-host", "on PATH",
                 "set SLUICE_PLUGIN_HOST to its path"):
        assert want in msg, (want, msg)
    assert "not in " not in msg, msg
    print("python, no host near the library:", msg)
else:
    raise AssertionError("a plugin without its host program was accepted")
EOF2
done

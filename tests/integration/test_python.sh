#!/usr/bin/env bash
# The Python binding (client/python) under /usr/bin/python3: sluice.Loader
# locally and through a dispatcher gives the same sample bytes as
# `sluice run --digests` (sha256 per sample), batches are zero-copy views
# released when the last array goes, shapes/dtypes for CHW, HWC and
# non-uniform batches, spec errors as SpecError, a dict spec goes to the
# library without a temporary file (errors name the field), sluice.version
# is the library's, stats() answers after close, TLS + token +
# dispatcher_timeout_ms against daemons that require them (and the errors
# without them), sluice.torch yields tensors,
# and scripts/train-example.py trains a few steps from a dispatcher job.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

python_env
$PY -c 'import numpy' || fail "python3-numpy missing (scripts/install-deps.sh)"

# ---- the ctypes structs match client/lib/sluice.h field for field (a field
# inserted in the C header must not silently shift the binding)
cat >"$TMP/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "client/lib/sluice.h"
#include "common/base/version.h"
#define F(T, f) printf("%s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))
int main(void)
{
    F(sluice_options_t, dispatcher); F(sluice_options_t, data_root);
    F(sluice_options_t, threads); F(sluice_options_t, offload);
    F(sluice_options_t, epochs); F(sluice_options_t, timeout_ms);
    F(sluice_options_t, consumer_rate); F(sluice_options_t, rank);
    F(sluice_options_t, world_size); F(sluice_options_t, job_name);
    F(sluice_options_t, dispatcher_timeout_ms); F(sluice_options_t, tls_ca);
    F(sluice_options_t, tls_cert); F(sluice_options_t, tls_key);
    F(sluice_options_t, token_file); F(sluice_options_t, first_epoch);
    F(sluice_options_t, has_seed); F(sluice_options_t, seed);
    F(sluice_options_t, cache_bytes); F(sluice_options_t, always_profile);
    F(sluice_batch_t, epoch); F(sluice_batch_t, n); F(sluice_batch_t, uniform);
    F(sluice_batch_t, dtype); F(sluice_batch_t, layout); F(sluice_batch_t, h);
    F(sluice_batch_t, w); F(sluice_batch_t, c); F(sluice_batch_t, data);
    F(sluice_batch_t, nbytes); F(sluice_batch_t, labels); F(sluice_batch_t, indices);
    F(sluice_batch_t, offsets); F(sluice_batch_t, sizes); F(sluice_batch_t, priv);
    F(sluice_batch_t, norm_on_device); F(sluice_batch_t, norm_mean);
    F(sluice_batch_t, norm_std);
    F(sluice_stats_t, delivered); F(sluice_stats_t, skipped);
    F(sluice_stats_t, duplicates_dropped); F(sluice_stats_t, from_local);
    F(sluice_stats_t, from_remote); F(sluice_stats_t, seconds);
    F(sluice_stats_t, wait_seconds); F(sluice_stats_t, plan_split);
    F(sluice_stats_t, plan_local_share); F(sluice_stats_t, plan_mode); F(sluice_stats_t, job_id);
    F(sluice_stats_t, plan_predicted); F(sluice_stats_t, plan_binding);
    F(sluice_stats_t, plan_version); F(sluice_stats_t, profile_seconds);
    F(sluice_stats_t, sample_costs); F(sluice_stats_t, first_epoch); F(sluice_stats_t, epochs);
    F(sluice_stats_t, fallback);
    F(sluice_stats_t, pack_oversize); F(sluice_stats_t, guard_choice);
    F(sluice_stats_t, guard_reason); F(sluice_stats_t, guard_rate_off);
    F(sluice_stats_t, guard_seconds);
    F(sluice_skip_t, epoch); F(sluice_skip_t, index); F(sluice_skip_t, reason);
    F(sluice_skip_t, path); F(sluice_skip_t, detail);
    printf("sizeof.sluice_options_t %zu 0\nsizeof.sluice_stats_t %zu 0\n",
           sizeof(sluice_options_t), sizeof(sluice_stats_t));
    printf("exact.sluice_skip_t %zu 0\nrecent.skips %d 0\nversion.%s 0 0\n",
           sizeof(sluice_skip_t), SLUICE_RECENT_SKIPS, SL_VERSION);
    return 0;
}
C
cc -I"$ROOT" -o "$TMP/layout" "$TMP/layout.c" || fail "layout probe does not build"
"$TMP/layout" >"$TMP/layout.txt"
$PY - "$TMP/layout.txt" <<'PY' || fail "ctypes structs differ from client/lib/sluice.h"
import ctypes, sys
import sluice
types = {"sluice_options_t": sluice._Options, "sluice_batch_t": sluice._Batch,
         "sluice_stats_t": sluice._Stats, "sluice_skip_t": sluice._Skip}
for line in open(sys.argv[1]):
    name, off, size = line.split()
    t, f = name.split(".", 1)
    if t == "exact":  # arrays of it: no reserve, the size itself must match
        assert ctypes.sizeof(types[f]) == int(off), (f, ctypes.sizeof(types[f]), off)
        continue
    if t == "recent":
        assert sluice._RECENT_SKIPS == int(off), (sluice._RECENT_SKIPS, off)
        continue
    if t == "version":  # the library's, not a copy of the literal
        assert sluice.version == f, (sluice.version, f)
        continue
    if t == "sizeof":
        # The C struct may grow only into the binding's zeroed reserve.
        c = types[f]
        assert int(off) <= c._reserved.offset + c._reserved.size, (f, off)
        continue
    d = getattr(types[t], f)
    assert (d.offset, d.size) == (int(off), int(size)), (name, d.offset, d.size, off, size)
PY
grep -rn '"[0-9]*\.[0-9]*\.[0-9]*"' "$ROOT/client/python/sluice" &&
    fail "a version literal in the Python binding (sluice.version comes from the library)"
ok "ctypes structs match client/lib/sluice.h (offsets and sizes); sluice.version == SL_VERSION"

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 2
# Decode only: every image keeps its own size (non-uniform batches).
cat >"$TMP/raw.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 3},
 "stages": [{"op": "decode_jpeg"}], "batch_size": 5, "epochs": 1}
JSON
# uint8 HWC: crop and flip, no normalize / to_chw.
cat >"$TMP/hwc.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": false},
 "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 32}, {"op": "flip", "p": 0.5}],
 "batch_size": 6, "epochs": 1}
JSON

digests() { # SPEC OUT [sluice run args]
    local spec=$1 out=$2
    shift 2
    "$BIN/sluice" run "$spec" --data-root "$TMP/data" --quiet --digests "$out.raw" "$@"
    sort "$out.raw" >"$out"
}
digests "$TMP/spec.json" "$TMP/ref.txt" --local
digests "$TMP/raw.json" "$TMP/ref-raw.txt" --local
digests "$TMP/hwc.json" "$TMP/ref-hwc.txt" --local

# pydigests.py DISPATCHER|- SPEC DATA OUT [JSON-KWARGS]: the same lines from
# Python; the optional JSON object holds more sluice.Loader keyword arguments.
cat >"$TMP/pydigests.py" <<'PY'
import hashlib, json, sys
import numpy as np
import sluice
disp, spec, data, out = sys.argv[1:5]
kwargs = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
lines = []
with sluice.Loader(None if disp == "-" else disp, spec, data_root=data, threads=2,
                   **kwargs) as loader:
    for b in loader.batches():
        imgs = b.images
        for k in range(len(b)):
            a = imgs[k]
            assert isinstance(a, np.ndarray) and not a.flags["OWNDATA"]
            lines.append("%d %d %d %s" % (b.epoch, b.indices[k], b.labels[k],
                                          hashlib.sha256(a.tobytes()).hexdigest()))
    st = loader.stats()
    assert st["delivered"] == len(lines), (st, len(lines))
with open(out, "w") as f:
    f.write("".join(l + "\n" for l in sorted(lines)))
PY

$PY "$TMP/pydigests.py" - "$TMP/spec.json" "$TMP/data" "$TMP/py-local.txt" ||
    fail "python local run"
cmp "$TMP/ref.txt" "$TMP/py-local.txt" || fail "python local digests differ from sluice run"
$PY "$TMP/pydigests.py" - "$TMP/raw.json" "$TMP/data" "$TMP/py-raw.txt" || fail "raw run"
cmp "$TMP/ref-raw.txt" "$TMP/py-raw.txt" || fail "non-uniform digests differ"
$PY "$TMP/pydigests.py" - "$TMP/hwc.json" "$TMP/data" "$TMP/py-hwc.txt" || fail "hwc run"
cmp "$TMP/ref-hwc.txt" "$TMP/py-hwc.txt" || fail "HWC digests differ"
ok "local: digests equal sluice run --digests (CHW float32, HWC uint8, non-uniform)"

$PY - "$TMP" <<'PY' || fail "shapes, zero copy, lifetime, errors"
import gc, json, os, sys, weakref
import numpy as np
import sluice
tmp = sys.argv[1]
data = os.path.join(tmp, "data")

# CHW float32, uniform: one ndarray viewing the library's batch.
loader = sluice.Loader(None, os.path.join(tmp, "spec.json"), data_root=data, epochs=1)
images, labels = next(loader)
assert images.shape == (8, 3, 64, 64) and images.dtype == np.float32, images.shape
assert labels.shape == (8,) and labels.dtype == np.int32
base = images
while isinstance(base, np.ndarray) and base.base is not None:
    base = base.base
assert type(base).__name__ == "_Owner", type(base)
owner = weakref.ref(base)
assert images.__array_interface__["data"][0] == base.__array_interface__["data"][0]
del base
# The arrays outlive the loader; the job closes when the last one goes.
saved = images[0].copy()
loader.close()
assert np.array_equal(images[0], saved)
assert owner() is not None
del images
gc.collect()
assert owner() is None, "batch not released after its last array went"

# uint8 HWC and non-uniform shapes.
with sluice.Loader(None, os.path.join(tmp, "hwc.json"), data_root=data) as l:
    b = l.next_batch()
    assert b.images.shape == (6, 32, 32, 3) and b.images.dtype == np.uint8, b.images.shape
with sluice.Loader(None, os.path.join(tmp, "raw.json"), data_root=data) as l:
    b = l.next_batch()
    assert isinstance(b.images, list) and len(b.images) == 5
    assert all(a.dtype == np.uint8 and a.ndim == 1 for a in b.images)
    assert len({a.size for a in b.images}) > 1, "expected images of different sizes"

# A spec given as a dict; iteration ends with StopIteration. No temporary
# file, whether the dict is good, refused by the library or not JSON at all.
import glob, tempfile
def spec_files():
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "sluice-spec-*")))
before = spec_files()
spec = json.load(open(os.path.join(tmp, "spec.json")))
spec["epochs"] = 1
spec["batch_size"] = np.int64(8)  # numpy scalars are numbers
n = sum(len(y) for _, y in sluice.Loader(None, spec, data_root=data))
assert n == 24, n
for field, value, words in (("epochs", {1, 2}, ["epochs", "set"]),
                            ("batch_size", float("nan"), ["batch_size", "finite"]),
                            ("stages", [{"op": "decode_jpeg"}, {"op": "resize", "size": object()}],
                             ["stages[1].size", "object"])):
    bad = dict(spec, **{field: value})
    try:
        sluice.Loader(None, bad, data_root=data)
        raise AssertionError("accepted %s=%r" % (field, value))
    except sluice.SpecError as e:
        assert all(w in str(e) for w in words), (words, str(e))
        print("dict spec:", e)
bad = dict(spec, stages=[{"op": "decode_jpeg"}, {"op": "resize", "size": -3}])
try:
    sluice.Loader(None, bad, data_root=data)
    raise AssertionError("resize -3 accepted")
except sluice.SpecError as e:  # the library's message: the field, no file
    assert "stages[1].size" in str(e) and "<spec dict>" in str(e), e
    assert "/tmp" not in str(e), e
    print("dict spec:", e)
assert spec_files() == before, spec_files() - before

# Options that renumber or reseed: checked, naming the option.
for kw, word in (({"first_epoch": -1}, "first_epoch"), ({"first_epoch": 2**32}, "first_epoch"),
                 ({"first_epoch": 1.5}, "first_epoch"), ({"seed": -1}, "seed"),
                 ({"seed": 2**63}, "seed"), ({"seed": "7"}, "seed")):
    try:
        sluice.Loader(None, spec, data_root=data, **kw)
        raise AssertionError("accepted %r" % (kw,))
    except sluice.SpecError as e:
        assert word in str(e), (word, str(e))

# Errors: a bad spec names the file; a bad data root; a closed loader.
bad = os.path.join(tmp, "bad.json")
open(bad, "w").write('{"source": {"type": "imagefolder", "path": "train"},\n "stages": 7}\n')
try:
    sluice.Loader(None, bad, data_root=data)
    raise AssertionError("bad spec accepted")
except sluice.SpecError as e:
    assert "bad.json" in str(e) and isinstance(e, ValueError), e
try:
    sluice.Loader(None, os.path.join(tmp, "spec.json"), data_root=os.path.join(tmp, "nope"))
    raise AssertionError("missing data root accepted")
except sluice.SluiceError as e:
    assert e.code < 0, e
l = sluice.Loader(None, os.path.join(tmp, "spec.json"), data_root=data)
l.close()
try:
    l.next_batch()
    raise AssertionError("closed loader works")
except sluice.SluiceError:
    pass
# ... but its numbers stay readable: the final ones.
assert l.stats()["delivered"] == 0 and l.stats()["epochs"] == 2, l.stats()
assert l.skipped() == {} and l.skipped_samples() == []
print("library:", sluice.library_path)
PY
ok "zero-copy views, batch released on last reference, HWC/non-uniform, dict spec, errors"

# ---- through a dispatcher
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2
$PY "$TMP/pydigests.py" "$D_GRPC" "$TMP/spec.json" "$TMP/data" "$TMP/py-remote.txt" ||
    fail "python dispatcher run"
cmp "$TMP/ref.txt" "$TMP/py-remote.txt" || fail "python dispatcher digests differ from sluice run"
ok "dispatcher: digests equal sluice run --digests"

# ---- TLS (mutual), the bearer token and dispatcher_timeout_ms from Python,
# against daemons that require them (a test CA as in test_tls.sh)
OSSL=/usr/bin/openssl
[ -x "$OSSL" ] || fail "$OSSL not found"
C="$TMP/pki"
mkdir -p "$C"
for ca in ca other; do
    "$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$C/$ca.key" -out "$C/$ca.pem" -days 2 -subj "/CN=sluice $ca" 2>/dev/null
done
"$OSSL" req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$C/node.key" \
    -out "$C/node.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' \
    >"$C/ext.cnf"
"$OSSL" x509 -req -in "$C/node.csr" -CA "$C/ca.pem" -CAkey "$C/ca.key" -CAcreateserial \
    -out "$C/node.pem" -days 2 -extfile "$C/ext.cnf" 2>/dev/null
(umask 077 && printf 'py-s3cret\n' >"$TMP/token")
TLS=(--tls-cert "$C/node.pem" --tls-key "$C/node.key" --tls-ca "$C/ca.pem")
start_daemon DT "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    "${TLS[@]}" --token-file "$TMP/token"
start_daemon WT "$BIN/sluice-worker" --dispatcher "$DT_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2 "${TLS[@]}" --token-file "$TMP/token"
kw=$(printf '{"tls_ca": "%s", "tls_cert": "%s", "tls_key": "%s", "token_file": "%s", '\
'"dispatcher_timeout_ms": 20000, "offload": "all", "consumer_rate": 500}' \
    "$C/ca.pem" "$C/node.pem" "$C/node.key" "$TMP/token")
$PY "$TMP/pydigests.py" "$DT_GRPC" "$TMP/spec.json" "$TMP/data" "$TMP/py-tls.txt" "$kw" ||
    fail "python TLS + token run"
cmp "$TMP/ref.txt" "$TMP/py-tls.txt" || fail "python TLS digests differ from sluice run"
ok "TLS + token + dispatcher_timeout_ms: digests equal sluice run --digests"

$PY - "$DT_GRPC" "$TMP" <<'PY' || fail "TLS/token errors from Python"
import os, sys, time
import sluice
disp, tmp = sys.argv[1:3]
spec, data, pki = (os.path.join(tmp, "spec.json"), os.path.join(tmp, "data"),
                   os.path.join(tmp, "pki"))
good = dict(tls_ca=os.path.join(pki, "ca.pem"), tls_cert=os.path.join(pki, "node.pem"),
            tls_key=os.path.join(pki, "node.key"), token_file=os.path.join(tmp, "token"),
            dispatcher_timeout_ms=2000, data_root=data, offload="all")

def fails(exc, what, **change):
    kw = dict(good, **change)
    kw = {k: v for k, v in kw.items() if v is not None}
    try:
        with sluice.Loader(disp, spec, **kw) as l:
            for _ in l:
                pass
    except exc as e:
        assert isinstance(e, sluice.SluiceError) and e.code < 0, e
        for w in what:
            assert w in str(e), (w, str(e))
        return str(e)
    raise AssertionError("accepted: %r" % (change,))

print("no token:", fails(sluice.SluiceError, ["UNAUTHENTICATED"], token_file=None))
wrong = os.path.join(tmp, "wrong-token")
with open(os.open(wrong, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
    f.write("not-the-token\n")
print("wrong token:", fails(sluice.SluiceError, ["UNAUTHENTICATED"], token_file=wrong))
print("other CA:", fails(sluice.SluiceError, [], tls_ca=os.path.join(pki, "other.pem")))
print("plaintext:", fails(sluice.SluiceError, [], tls_ca=None, tls_cert=None, tls_key=None))
print("missing token file:", fails(sluice.SluiceError, ["nope"],
                                   token_file=os.path.join(tmp, "nope")))
print("cert without key:", fails(sluice.SpecError, ["tls_key"], tls_key=None))
print("timeout -1:", fails(sluice.SpecError, ["dispatcher_timeout_ms"],
                           dispatcher_timeout_ms=-1))
print("rate nan:", fails(sluice.SpecError, ["consumer_rate"], consumer_rate=float("nan")))
PY
ok "no/wrong token, other CA, plaintext, missing token file: SluiceError; bad options: SpecError"

if $PY -c 'import torch' 2>/dev/null; then
    $PY - "$D_GRPC" "$TMP" <<'PY' || fail "sluice.torch"
import os, sys
import torch
import sluice
disp, tmp = sys.argv[1:3]
ds = sluice.torch.IterableDataset(disp, os.path.join(tmp, "spec.json"),
                                  data_root=os.path.join(tmp, "data"), offload="all")
n = 0
for x, y in torch.utils.data.DataLoader(ds, batch_size=None):
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32, type(x)
    assert x.shape[1:] == (3, 64, 64) and y.dtype == torch.int64 and len(y) == len(x)
    n += len(y)
assert n == 48, n
PY
    ok "sluice.torch.IterableDataset yields float32 CHW tensors and int64 labels"
    $PY "$ROOT/scripts/train-example.py" --dispatcher "$D_GRPC" --spec "$TMP/spec.json" \
        --data-root "$TMP/data" --steps 4 >"$TMP/train.out" 2>&1 ||
        fail "train-example: $(tail -n 5 "$TMP/train.out")"
    tail -n 1 "$TMP/train.out" | $PY -c '
import json, sys
r = json.load(sys.stdin)
assert r["steps"] == 4 and r["samples"] == 32 and r["classes"] == 3, r
assert r["last_loss"] == r["last_loss"] and r["last_loss"] > 0, r' ||
        fail "train-example summary: $(tail -n 3 "$TMP/train.out")"
    ok "scripts/train-example.py: 4 steps of a tiny CNN from a dispatcher job"
else
    echo "SKIP: python3-torch is not installed: sluice.torch and train-example not tested"
fi
echo PASS

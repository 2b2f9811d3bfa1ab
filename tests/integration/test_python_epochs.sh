#!/usr/bin/env bash
# A PyTorch user's first week (issue #14), with real daemons and files:
#  - an outer per-epoch loop over sluice.torch.IterableDataset(epochs=1) with
#    set_epoch(e) delivers exactly the epoch-e lines of one 2-epoch
#    `sluice run --digests`, locally and through a dispatcher with two
#    workers (offload all); epoch 0 and epoch 1 differ; without set_epoch
#    the loop still moves on (0, then 1); seed= replaces the spec's seed
#    (== `sluice run --seed`); Loader(first_epoch=) and `sluice run
#    --first-epoch` agree;
#  - DataLoader(ds, batch_size=32) (and the default batch_size=1) is
#    refused with a message naming batch_size=None, not torch's "stack
#    expects each tensor to be equal size";
#  - skipped samples are reachable from the dataset: stats(), skipped(),
#    skipped_samples() with paths and reasons, after the loop too;
#  - every worker refusing a job: the client says so once (a SluiceWarning;
#    `sluice run` on stderr) and stats()["fallback"] / --json "fallback"
#    carry the reason.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

python_env
if ! $PY -c 'import torch' 2>/dev/null; then
    echo "SKIP: python3-torch is not installed (scripts/install-deps.sh)"
    echo PASS
    exit 0
fi

make_images "$TMP/data" 3 8
write_train_spec "$TMP/spec.json" 2
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet \
    --digests "$TMP/ref.raw"
sort "$TMP/ref.raw" >"$TMP/ref.txt"
grep '^0 ' "$TMP/ref.txt" >"$TMP/ref0.txt"
grep '^1 ' "$TMP/ref.txt" >"$TMP/ref1.txt"
[ "$(wc -l <"$TMP/ref1.txt")" -eq 24 ] || fail "reference: $(wc -l <"$TMP/ref1.txt") lines"
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --epochs 1 \
    --seed 8 --digests "$TMP/seed8.raw"
sort "$TMP/seed8.raw" >"$TMP/seed8.txt"
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --epochs 1 \
    --first-epoch 1 --digests "$TMP/cli1.raw"
sort "$TMP/cli1.raw" | cmp - "$TMP/ref1.txt" || fail "sluice run --first-epoch 1 != epoch 1"
ok "sluice run --epochs 1 --first-epoch 1 delivers epoch 1 of the 2-epoch run"

# torchdigests.py DISPATCHER|- SPEC DATA OUTPREFIX JSON-KWARGS: one sorted
# 'EPOCH -1 LABEL SHA256' file per DataLoader pass (the dataset yields images
# and labels, no indices): OUTPREFIX.e1 (set_epoch(1)), .e0 (set_epoch(0)),
# then .a0, .a1 (a fresh dataset, no set_epoch, two passes).
cat >"$TMP/torchdigests.py" <<'PY'
import hashlib, json, sys
import torch
import sluice.torch
disp, spec, data, out = sys.argv[1:5]
kw = json.loads(sys.argv[5])
disp = None if disp == "-" else disp

def one_pass(ds, name):
    lines = []
    for x, y in torch.utils.data.DataLoader(ds, batch_size=None):
        st = ds.stats()
        e = st["first_epoch"]
        for k in range(len(y)):
            h = hashlib.sha256(x[k].numpy().tobytes()).hexdigest()
            lines.append("%d %d %d %s" % (e, -1, int(y[k]), h))
    with open(out + "." + name, "w") as f:
        f.write("".join(l + "\n" for l in sorted(lines)))
    return ds.stats()

ds = sluice.torch.IterableDataset(disp, spec, data_root=data, epochs=1, threads=2, **kw)
ds.set_epoch(1)
st = one_pass(ds, "e1")
assert st["first_epoch"] == 1 and st["epochs"] == 1 and st["delivered"] == 24, st
if disp is not None:
    assert st["from_remote"] == 24 and st["from_local"] == 0, st
    assert st["fallback"] == "", st
ds.set_epoch(0)
one_pass(ds, "e0")
ds2 = sluice.torch.IterableDataset(disp, spec, data_root=data, epochs=1, threads=2, **kw)
one_pass(ds2, "a0")
one_pass(ds2, "a1")
assert ds2.epoch == 2, ds2.epoch
PY
# The reference's lines without the index (the dataset yields images and
# labels only): epoch, -1, label, digest.
for e in 0 1; do
    awk '{print $1, -1, $3, $4}' "$TMP/ref$e.txt" | sort >"$TMP/ref$e.noidx"
done
awk '{print 0, -1, $3, $4}' "$TMP/seed8.txt" | sort >"$TMP/seed8.noidx"

check_passes() { # PREFIX WHERE
    cmp "$1.e1" "$TMP/ref1.noidx" || fail "$2: set_epoch(1) != epoch 1 of the 2-epoch run"
    cmp "$1.e0" "$TMP/ref0.noidx" || fail "$2: set_epoch(0) != epoch 0"
    cmp "$1.a0" "$TMP/ref0.noidx" || fail "$2: first pass without set_epoch != epoch 0"
    cmp "$1.a1" "$TMP/ref1.noidx" || fail "$2: second pass without set_epoch != epoch 1"
    # Same images, other crops and flips: the digest sets differ.
    ! cmp -s <(cut -d' ' -f4 "$1.e0" | sort) <(cut -d' ' -f4 "$1.e1" | sort) ||
        fail "$2: epoch 0 and epoch 1 delivered the same bytes"
}
$PY "$TMP/torchdigests.py" - "$TMP/spec.json" "$TMP/data" "$TMP/local" '{}' ||
    fail "local torch passes"
check_passes "$TMP/local" local
ok "local: set_epoch(1) == epoch 1, set_epoch(0) == epoch 0, != each other; passes advance"

$PY "$TMP/torchdigests.py" - "$TMP/spec.json" "$TMP/data" "$TMP/seed" '{"seed": 8}' ||
    fail "seed pass"
cmp "$TMP/seed.a0" "$TMP/seed8.noidx" || fail "seed=8 != sluice run --seed 8"
! cmp -s "$TMP/seed.a0" "$TMP/ref0.noidx" || fail "seed=8 delivered the spec's seed 7"
ok "seed=8 == sluice run --seed 8, != the spec's seed"

# ---- through a dispatcher with two workers, offload all
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
for w in W1 W2; do
    start_daemon $w "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
done
$PY "$TMP/torchdigests.py" "$D_GRPC" "$TMP/spec.json" "$TMP/data" "$TMP/remote" \
    '{"offload": "all"}' || fail "dispatcher torch passes"
check_passes "$TMP/remote" dispatcher
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
    --offload all --epochs 1 --first-epoch 1 --digests "$TMP/r1.raw" --json >"$TMP/r1.json"
sort "$TMP/r1.raw" | cmp - "$TMP/ref1.txt" || fail "dispatcher: --first-epoch 1 != epoch 1"
grep -q '"first_epoch":1' "$TMP/r1.json" || fail "--json first_epoch: $(cat "$TMP/r1.json")"
ok "dispatcher + 2 workers (offload all): the same epochs, exactly"

# Multi-rank, one job per epoch: a rank's next epoch is another job (its
# derived name carries the epoch), even while its previous one is open.
$PY - "$D_GRPC" "$TMP" <<'PY' || fail "multi-rank per-epoch jobs"
import os, sys
import sluice
disp, tmp = sys.argv[1:3]
kw = dict(data_root=os.path.join(tmp, "data"), epochs=1, rank=0, world_size=2, offload="all")
a = sluice.Loader(disp, os.path.join(tmp, "spec.json"), first_epoch=0, **kw)
b = sluice.Loader(disp, os.path.join(tmp, "spec.json"), first_epoch=1, **kw)
assert a.stats()["job_id"] != b.stats()["job_id"]
n = sum(len(y) for _, y in b)
assert n == 12 and b.stats()["first_epoch"] == 1, (n, b.stats())
a.close()
b.close()
PY
ok "multi-rank: rank 0's epoch-1 job opens while its epoch-0 job is open"

# ---- DataLoader with a batch size: a clear refusal
$PY - "$TMP" <<'PY' || fail "DataLoader batch_size"
import os, sys
import torch
import sluice.torch
tmp = sys.argv[1]
ds = sluice.torch.IterableDataset(None, os.path.join(tmp, "spec.json"),
                                  data_root=os.path.join(tmp, "data"), epochs=1)
for kw in ({"batch_size": 32}, {}):
    try:
        for _ in torch.utils.data.DataLoader(ds, **kw):
            pass
        raise AssertionError("DataLoader(%r) accepted" % (kw,))
    except TypeError as e:
        assert "batch_size=None" in str(e) and "stack expects" not in str(e), e
        print("DataLoader(%r): %s" % (kw, e))
try:
    ds.set_epoch(-1)
    raise AssertionError("set_epoch(-1) accepted")
except ValueError as e:
    assert "set_epoch" in str(e), e
try:
    sluice.torch.IterableDataset(None, "x.json", first_epoch=3)
    raise AssertionError("first_epoch= accepted")
except TypeError as e:
    assert "set_epoch" in str(e), e
PY
ok "DataLoader(ds, batch_size=32) and DataLoader(ds) refused naming batch_size=None"

# ---- skipped samples, from the dataset
cls="$TMP/data/train/class_001"
printf 'GIF89a not a jpeg' >"$cls/zz_notjpeg.jpg"
: >"$cls/zz_empty.jpg"
$PY - "$TMP" <<'PY' || fail "skips from sluice.torch"
import os, sys
import torch
import sluice, sluice.torch
tmp = sys.argv[1]
ds = sluice.torch.IterableDataset(None, os.path.join(tmp, "spec.json"),
                                  data_root=os.path.join(tmp, "data"), epochs=1)
try:
    ds.stats()
    raise AssertionError("stats() before any job")
except sluice.SluiceError as e:
    assert "no job yet" in str(e), e
n = sum(len(y) for _, y in torch.utils.data.DataLoader(ds, batch_size=None))
assert n == 24, n
st = ds.stats()  # after the loop: the job's final numbers
assert st["delivered"] == 24 and st["skipped"] == 2, st
assert ds.skipped() == {"empty": 1, "not_jpeg": 1}, ds.skipped()
got = {(k["path"], k["reason"]) for k in ds.skipped_samples()}
assert got == {("train/class_001/zz_empty.jpg", "empty"),
               ("train/class_001/zz_notjpeg.jpg", "not_jpeg")}, got
for k in ds.skipped_samples():
    assert k["epoch"] == 0 and k["path"] in k["detail"], k
print(ds.skipped_samples())
PY
ok "stats()/skipped()/skipped_samples() from the dataset name each skipped path and reason"

# scripts/train-example.py --epochs N: the outer loop, one job per epoch.
$PY "$ROOT/scripts/train-example.py" --local --spec "$TMP/spec.json" --data-root "$TMP/data" \
    --epochs 2 --steps 100 >"$TMP/train.out" 2>&1 || fail "train-example: $(tail -n 5 "$TMP/train.out")"
tail -n 1 "$TMP/train.out" | $PY -c '
import json, sys
r = json.load(sys.stdin)
assert r["epochs"] == [[0, 0], [1, 1]] and r["samples"] == 48, r
assert r["skipped"] == {"empty": 2, "not_jpeg": 2}, r' ||
    fail "train-example --epochs 2: $(tail -n 1 "$TMP/train.out")"
ok "scripts/train-example.py --epochs 2: two one-epoch jobs, epochs 0 and 1, skips summed"
rm -f "$cls/zz_notjpeg.jpg" "$cls/zz_empty.jpg"

# ---- every worker refuses the job: said once, with the reason
kill -9 "$W1_PID" "$W2_PID"
mkdir -p "$TMP/empty"
start_daemon D2 "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
start_daemon WR "$BIN/sluice-worker" --dispatcher "$D2_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/empty" --threads 1
$PY - "$D2_GRPC" "$TMP" <<'PY' || fail "fallback warning from Python"
import os, sys, warnings
import sluice
disp, tmp = sys.argv[1:3]
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with sluice.Loader(disp, os.path.join(tmp, "spec.json"), data_root=os.path.join(tmp, "data"),
                       offload="all") as l:
        n = sum(len(y) for _, y in l)
        st = l.stats()
    mine = [x for x in w if issubclass(x.category, sluice.SluiceWarning)]
assert n == 48, n
assert st["from_local"] == 48 and st["from_remote"] == 0, st
assert "every live worker refused the job" in st["fallback"], st
assert "train" in st["fallback"], st  # the worker's own reason: no such source
assert len(mine) == 1, [str(x.message) for x in w]
assert st["fallback"] in str(mine[0].message), mine[0].message
print("warning:", mine[0].message)
PY
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D2_GRPC" --data-root "$TMP/data" --quiet \
    --offload all --json >"$TMP/fb.json" 2>"$TMP/fb.err" ||
    fail "fallback run: $(cat "$TMP/fb.err")"
[ "$(grep -c 'warning: the job.s remote work runs on this host' "$TMP/fb.err")" -eq 1 ] ||
    fail "sluice run did not warn once: $(cat "$TMP/fb.err")"
$PY -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert "every live worker refused the job" in j["fallback"], j
assert j["sources"]["local"] == 48, j' "$TMP/fb.json" ||
    fail "--json fallback: $(cat "$TMP/fb.json")"
ok "all workers refusing: one SluiceWarning / one stderr line; stats()/--json carry the reason"
echo PASS

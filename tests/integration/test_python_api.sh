#!/usr/bin/env bash
# The PyTorch loop's questions answered by the Python binding (issue #38
# item 7): len() of sluice.Loader and sluice.torch.IterableDataset (known
# before iterating, equal to what the iteration yields, for one rank and for
# shares of several, drop_last and both rank paddings, also through
# DataLoader(batch_size=None)); classes / class_to_idx of an imagefolder equal
# torchvision's ImageFolder on the same tree (hidden, upper-case and
# punctuated class names); the sample indices and epoch in sluice.torch's
# record dicts; balanced batching's counts. Run from the repository root;
# $BUILD holds the library.
source "$(dirname "$0")/lib.sh"
python_env

DATA="$TMP/data"
make_images "$DATA" 3 5 # 15 samples
# Class names whose order differs between sort orders: strcmp puts ".h",
# "B" and "a-b" where torchvision (sorted(os.scandir)) puts them too.
for c in B .h a-b; do
    mkdir -p "$DATA/train/$c"
    cp "$DATA/train/class_000/"*.jpg "$DATA/train/$c/"
done
N=$(find "$DATA/train" -name '*.jpg' | wc -l)

"$PY" - "$DATA" "$N" <<'PY' || fail "Python counts / classes"
import sys
import torch
import torchvision
import sluice
import sluice.torch

data, n = sys.argv[1], int(sys.argv[2])


def spec(**kw):
    s = {"source": {"type": "imagefolder", "path": "train", "seed": 4},
         "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 8}],
         "batch_size": 4, "epochs": 2}
    s.update(kw)
    return s


cases = [  # (spec keys, Loader kwargs, samples per epoch)
    ({}, {}, n),
    ({"drop_last": True}, {}, n // 4 * 4),
    ({}, {"world_size": 4, "rank": 3}, n // 4),
    ({"rank_padding": "pad"}, {"world_size": 4, "rank": 3}, -(-n // 4)),
    ({"epochs": 1}, {"world_size": 7, "rank": 0}, n // 7),
]
for keys, kw, per_epoch in cases:
    s = spec(**keys)
    drop = keys.get("drop_last", False)
    batches = per_epoch // 4 if drop else -(-per_epoch // 4)
    epochs = s["epochs"]
    what = "%s %s" % (keys, kw)
    d = sluice.describe(None, s, data_root=data, **kw)
    assert (d["samples_per_epoch"], d["batches_per_epoch"]) == (per_epoch, batches), (what, d)
    assert (d["samples"], d["batches"]) == (per_epoch * epochs, batches * epochs), (what, d)
    with sluice.Loader(None, s, data_root=data, threads=2, **kw) as ld:
        assert len(ld) == batches * epochs, (what, len(ld))
        assert (ld.samples_per_epoch, ld.batches_per_epoch) == (per_epoch, batches), what
        got = [len(b) for b in ld.batches()]
        assert len(got) == len(ld) and sum(got) == per_epoch * epochs, (what, got)
    ds = sluice.torch.IterableDataset(None, s, data_root=data, threads=2, **kw)
    assert len(ds) == batches * epochs, (what, len(ds))  # before any iteration
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    assert len(dl) == len(ds), what
    items = list(dl)
    assert len(items) == len(dl), (what, len(items))
    assert sum(len(y) for _, y in items) == per_epoch * epochs, what
    assert (ds.samples_per_epoch, ds.batches_per_epoch) == (per_epoch, batches), what
print("ok: len() of Loader, IterableDataset and DataLoader = what they yield")

# One epoch per job (set_epoch): len is one epoch's batches, every epoch.
ds = sluice.torch.IterableDataset(None, spec(epochs=1), data_root=data, threads=2)
for e in range(3):
    ds.set_epoch(e)
    assert len(ds) == -(-n // 4) == len(list(ds)), e
print("ok: set_epoch loop: len = one epoch's batches")

# A resumed job: len counts what is left of the epoch it continues.
s = spec(deterministic=True)
ld = sluice.Loader(None, s, data_root=data, threads=2)
it = ld.batches()
next(it), next(it)
state = ld.state()
ld.close()
per = -(-n // 4)
with sluice.Loader(None, s, data_root=data, threads=2, resume=state) as ld:
    assert len(ld) == 2 * per - 2 == len(list(ld.batches())), len(ld)
ds = sluice.torch.IterableDataset(None, s, data_root=data, threads=2)
ds.load_state_dict({"epoch": 0, "sluice_states": [state]})
assert len(ds) == 2 * per - 2 == len(list(ds)), len(ds)
assert len(ds) == 2 * per  # the next iteration is a fresh job
print("ok: a resumed job's len is what it delivers")

ref = torchvision.datasets.ImageFolder(data + "/train")
with sluice.Loader(None, spec(), data_root=data) as ld:
    assert ld.classes == ref.classes, (ld.classes, ref.classes)
    assert ld.class_to_idx == ref.class_to_idx, (ld.class_to_idx, ref.class_to_idx)
ds = sluice.torch.IterableDataset(None, spec(), data_root=data)
assert ds.classes == ref.classes and ds.class_to_idx == ref.class_to_idx
assert sluice.describe(None, spec(), data_root=data)["classes"] == ref.classes
print("ok: classes and class_to_idx are torchvision's:", ref.classes)

# A source whose labels have no names: None.
fl = spec()
fl["source"] = {"type": "filelist", "path": "filelist.txt"}
with sluice.Loader(None, fl, data_root=data) as ld:
    assert ld.classes is None and ld.class_to_idx is None
print("ok: a filelist has no class names")

# Counts are known without running (a missing source is still an error).
try:
    sluice.describe(None, spec(), data_root=data + "/nope")
    raise AssertionError("describe of a missing data root succeeded")
except sluice.SluiceError:
    pass
PY

MM="$TMP/mm"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$MM" --samples 20 \
    --per-shard 10 --size-scale 0.2 --seed 3 --quiet
"$PY" - "$MM" <<'PY' || fail "record dicts: indices and epoch"
import sys
import torch
import sluice
import sluice.torch

spec = {"source": {"type": "webdataset", "path": "mm-shards", "seed": 2},
        "stages": [{"op": "decode_image"}], "batch_size": 6, "epochs": 2,
        "deterministic": True}
ds = sluice.torch.IterableDataset(None, spec, data_root=sys.argv[1], threads=2)
ref = {}
with sluice.Loader(None, spec, data_root=sys.argv[1], threads=2) as ld:
    for b in ld.batches():
        ref.setdefault(b.epoch, []).extend(int(i) for i in b.indices)
got = {}
items = list(torch.utils.data.DataLoader(ds, batch_size=None))
assert len(items) == len(ds), (len(items), len(ds))
for d in items:
    assert isinstance(d["indices"], torch.Tensor) and d["indices"].dtype == torch.int64
    assert len(d["indices"]) == len(d["labels"]) == len(d["keys"])
    got.setdefault(d["epoch"], []).extend(d["indices"].tolist())
assert got == ref, (got, ref)
assert sorted(got[0]) == sorted(got[1]) == list(range(20)), got
print("ok: record dicts carry indices and epoch:", {e: len(v) for e, v in got.items()})

# Balanced batching: the same counts (equal counts per rank and step), a
# batch being one microbatch.
for drop, per_epoch, batches in ((False, 6, 2), (True, 5, 1)):
    bal = dict(spec, batch_size=5, drop_last=drop,
               batching={"mode": "balanced", "microbatches": 2})
    for rank in range(3):  # floor(20 / 3) = 6 samples a rank and epoch
        with sluice.Loader(None, bal, data_root=sys.argv[1], threads=2, world_size=3,
                           rank=rank) as ld:
            sizes = [len(b) for b in ld.batches()]
            assert (ld.samples_per_epoch, ld.batches_per_epoch) == (per_epoch, batches), sizes
            assert len(ld) == len(sizes) == 2 * batches and sum(sizes) == 2 * per_epoch, sizes
print("ok: balanced batching: len = what the ranks get")
PY
echo PASS

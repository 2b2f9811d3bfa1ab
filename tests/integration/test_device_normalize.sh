#!/usr/bin/env bash
# uint8 to the device: a spec whose normalize has "on": "device" delivers the
# uint8 tensors of the same spec without normalize (digests equal, locally and
# through a dispatcher at every split), the C API / Python Batch carry the
# normalization, and sluice.torch applies it on the device (torch on the CPU
# here): float32 within 1e-5 of Sluice's own CPU normalize of the same
# samples, HWC and CHW, local and remote; the CUDA branch (pinned memory, a
# non-blocking copy) checked with pin_memory/to stubbed, as no GPU is here.
# The CPU normalize + to_chw (one pass on one host, two units for splits)
# gives the same digests at every split point. A wrong "on" is a spec error
# (exit 2, file:line:field; SpecError in Python).
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

python_env

make_images "$TMP/data" 3 8
# spec NAME NORMALIZE TAIL: the train spec with the given normalize stage
# (or none) and stages after it.
spec() {
    cat >"$TMP/$1.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 11},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 48},
            {"op": "flip", "p": 0.5}$2$3],
 "batch_size": 8, "epochs": 2, "deterministic": true}
JSON
}
NORM='{"op": "normalize", "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]'
spec cpu ", $NORM}" ', {"op": "to_chw"}'
spec dev ", $NORM, \"on\": \"device\"}" ', {"op": "to_chw"}'
spec devhwc ", $NORM, \"on\": \"device\"}" ''
spec none '' ', {"op": "to_chw"}'
# random_erasing after normalize (value in tensor units, a negative one too):
# the CPU erases the floats; after a device normalize the consumer does, at
# the same boxes (same stage positions)
ERASE='{"op": "random_erasing", "p": 0.7, "value": [0.5, -1.25, 2]}'
spec cpuerase ", $NORM}" ", {\"op\": \"to_chw\"}, $ERASE"
spec deverase ", $NORM, \"on\": \"device\"}" ", {\"op\": \"to_chw\"}, $ERASE"
spec cpuerasehwc ", $NORM}" ", $ERASE"
spec deverasehwc ", $NORM, \"on\": \"device\"}" ", $ERASE"
spec devrandom ", $NORM, \"on\": \"device\"}" \
    ', {"op": "to_chw"}, {"op": "random_erasing", "p": 0.7, "value": "random"}'
spec nonehwc '' ''

digests() { # SPEC OUT [sluice run args]
    local s=$1 out=$2
    shift 2
    "$BIN/sluice" run "$TMP/$s.json" --data-root "$TMP/data" --quiet --threads 2 \
        --digests "$out.raw" "$@" || fail "sluice run $s $*"
    sort "$out.raw" >"$out"
}

# ---- digests of the uint8 Sluice delivers: the spec without normalize's
digests dev "$TMP/dev.txt" --local
digests none "$TMP/none.txt" --local
cmp "$TMP/dev.txt" "$TMP/none.txt" || fail "device-normalize digests differ from no-normalize"
digests devhwc "$TMP/devhwc.txt" --local
digests nonehwc "$TMP/nonehwc.txt" --local
cmp "$TMP/devhwc.txt" "$TMP/nonehwc.txt" || fail "HWC device-normalize digests differ"
cmp -s "$TMP/dev.txt" "$TMP/devhwc.txt" && fail "CHW and HWC digests equal: layout ignored"
[ "$(wc -l <"$TMP/dev.txt")" = 48 ] || fail "expected 48 samples, got $(wc -l <"$TMP/dev.txt")"
ok "local: device-normalize digests = the uint8 of the spec without normalize (CHW, HWC)"
digests deverase "$TMP/deverase.txt" --local
cmp "$TMP/dev.txt" "$TMP/deverase.txt" || fail "a device erase changed the uint8 Sluice delivers"
ok "local: a random_erasing after a device normalize leaves the delivered uint8 unerased"

# ---- after a device erase only to_chw may run on the host: exit 2, named
set +e
"$BIN/sluice" run <(sed 's/"on": "device"}, {"op": "to_chw"}, {"op": "random_erasing"\([^}]*\)}/"on": "device"}, {"op": "random_erasing"\1}, {"op": "vertical_flip"}/' \
    "$TMP/deverase.json") --local --data-root "$TMP/data" --quiet 2>"$TMP/badtail.err"
rc=$?
set -e
[ $rc = 2 ] || fail "vertical_flip after a device erase: exit $rc, want 2"
grep -q 'stages\[5\].op: vertical_flip after a random_erasing the device applies (stages\[4\])' \
    "$TMP/badtail.err" || fail "vertical_flip after a device erase: $(cat "$TMP/badtail.err")"
ok "vertical_flip after a device erase refused: $(head -n 1 "$TMP/badtail.err")"

# ---- a wrong "on": exit 2, the message names file, line and field
set +e
"$BIN/sluice" run <(sed 's/"on": "device"/"on": "gpu"/' "$TMP/dev.json") --local \
    --data-root "$TMP/data" --quiet 2>"$TMP/bad.err"
rc=$?
set -e
[ $rc = 2 ] || fail "bad \"on\": exit $rc, want 2"
grep -q ':3: stages\[3\].on: must be one of cpu, device, got "gpu"' "$TMP/bad.err" ||
    fail "bad \"on\": $(cat "$TMP/bad.err")"
ok "\"on\": \"gpu\" refused: $(head -n 1 "$TMP/bad.err")"

# ---- through a dispatcher: every split gives the same bytes
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2
# dev: units decode+crop, flip, to_chw; 3:0 and 4:0 cut before to_chw.
for mode in all 0:0 3:0 4:0 2:0.5; do
    digests dev "$TMP/dev-$mode.txt" --dispatcher "$D_GRPC" --offload "$mode"
    cmp "$TMP/dev.txt" "$TMP/dev-$mode.txt" || fail "dev --offload $mode: digests differ"
done
digests deverase "$TMP/deverase-all.txt" --dispatcher "$D_GRPC" --offload all
cmp "$TMP/dev.txt" "$TMP/deverase-all.txt" || fail "deverase --offload all: digests differ"
ok "dispatcher: device-normalize digests equal --local at all, 0:0, 3:0, 4:0, 2:0.5"
# cpu: 3:0 ships uint8 and the client runs normalize + to_chw as one pass;
# 4:0 cuts between them (two passes on two hosts); all: one pass on the worker.
digests cpu "$TMP/cpu.txt" --local
for mode in all 3:0 4:0 0:0; do
    digests cpu "$TMP/cpu-$mode.txt" --dispatcher "$D_GRPC" --offload "$mode"
    cmp "$TMP/cpu.txt" "$TMP/cpu-$mode.txt" || fail "cpu --offload $mode: digests differ"
done
ok "CPU normalize + to_chw: digests equal --local at all, 3:0, 4:0, 0:0"

# ---- the C API's batch through Python: uint8 plus the normalization
$PY - "$TMP" <<'PY' || fail "Batch.normalize"
import os, sys
import numpy as np
import sluice
tmp = sys.argv[1]
data = os.path.join(tmp, "data")
f32 = lambda v: tuple(float(np.float32(x)) for x in v)
with sluice.Loader(None, os.path.join(tmp, "dev.json"), data_root=data, epochs=1) as l:
    b = l.next_batch()
    assert b.images.dtype == np.uint8 and b.images.shape == (8, 3, 48, 48), b.images.shape
    assert b.normalize == (f32([0.485, 0.456, 0.406]), f32([0.229, 0.224, 0.225])), b.normalize
with sluice.Loader(None, os.path.join(tmp, "cpu.json"), data_root=data, epochs=1) as l:
    b = l.next_batch()
    assert b.images.dtype == np.float32 and b.normalize is None, (b.images.dtype, b.normalize)
bad = os.path.join(tmp, "bad.json")
open(bad, "w").write(open(os.path.join(tmp, "dev.json")).read().replace('"device"', '"gpu"'))
try:
    sluice.Loader(None, bad, data_root=data)
    raise AssertionError("bad \"on\" accepted")
except sluice.SpecError as e:
    assert "stages[3].on" in str(e) and "bad.json" in str(e), e
PY
ok "Batch: uint8 images, normalize = (mean, std); None for a CPU normalize; bad \"on\": SpecError"

if ! $PY -c 'import torch' 2>/dev/null; then
    echo "SKIP: python3-torch is not installed: sluice.torch device normalize not tested"
    echo PASS
    exit 0
fi

# ---- sluice.torch normalizes on the device (the CPU here): the floats of
# Sluice's CPU normalize of the same samples ("deterministic": the same
# batches in the same order), within 1e-5
cat >"$TMP/torchcmp.py" <<'PY'
import os, sys
import numpy as np
import torch
import sluice, sluice.torch
disp, tmp = sys.argv[1], sys.argv[2]
kw = dict(data_root=os.path.join(tmp, "data"))
if disp == "-":
    disp = None
else:
    kw["offload"] = "all"

def reference(spec, hwc):
    with sluice.Loader(disp, os.path.join(tmp, spec), **kw) as l:
        return [(np.array(b.images.transpose(0, 2, 3, 1) if hwc else b.images),
                 b.labels.astype(np.int64)) for b in l.batches()]

ref = reference("cpu.json", False)
ref_hwc = [(x.transpose(0, 2, 3, 1), y) for x, y in ref]
for spec, want, device, shape in (("dev.json", ref, "cpu", (3, 48, 48)),
                                  ("devhwc.json", ref_hwc, None, (48, 48, 3))):
    ds = sluice.torch.IterableDataset(disp, os.path.join(tmp, spec), device=device, **kw)
    got = list(torch.utils.data.DataLoader(ds, batch_size=None))
    assert len(got) == len(want) == 6, (len(got), len(want))
    worst = 0.0
    for (x, y), (wx, wy) in zip(got, want):
        assert x.dtype == torch.float32 and x.device.type == "cpu", (x.dtype, x.device)
        assert tuple(x.shape[1:]) == shape, x.shape
        assert y.dtype == torch.int64 and np.array_equal(y.numpy(), wy)
        worst = max(worst, float(np.abs(x.numpy() - wx).max()))
    assert worst <= 1e-5, worst
    print("%s device=%s: max |device - cpu normalize| = %.2e" % (spec, device, worst))

# A CPU-normalized spec is untouched: float32 views of the library's batch.
x, _ = next(iter(sluice.torch.IterableDataset(disp, os.path.join(tmp, "cpu.json"), **kw)))
assert np.array_equal(x.numpy(), ref[0][0])

# CUDA is not here: stub pin_memory and to() to check the branch's calls
# (pinned first, then a non-blocking copy), then run it on the CPU.
calls = []
real_to = torch.Tensor.to
torch.Tensor.pin_memory = lambda self: (calls.append("pin"), self.clone())[1]
def fake_to(self, *a, **k):
    if a and isinstance(a[0], torch.device) and a[0].type == "cuda":
        calls.append("to non_blocking=%s" % k.get("non_blocking", False))
        return self
    return real_to(self, *a, **k)
torch.Tensor.to = fake_to
ds = sluice.torch.IterableDataset(disp, os.path.join(tmp, "dev.json"), device="cuda:0", **kw)
x, y = next(iter(ds))
torch.Tensor.to = real_to
assert calls[:2] == ["pin", "to non_blocking=True"], calls
assert calls.count("pin") == 2, calls  # images and labels
assert float(np.abs(x.numpy() - ref[0][0]).max()) <= 1e-5
print("cuda branch (stubbed):", calls)
PY
$PY "$TMP/torchcmp.py" - "$TMP" || fail "sluice.torch local"
$PY "$TMP/torchcmp.py" "$D_GRPC" "$TMP" || fail "sluice.torch through the dispatcher"
ok "sluice.torch: device normalize = Sluice's CPU normalize within 1e-5 (CHW, HWC, local, remote)"

# ---- random_erasing after a device normalize: sluice.torch erases at
# Sluice's boxes, so its floats are the CPU-erased spec's within 1e-5;
# "random" fills normal values, the same on every run, only inside the boxes
cat >"$TMP/erasecmp.py" <<'PY'
import os, sys
import numpy as np
import torch
import sluice, sluice.torch
disp, tmp = sys.argv[1], sys.argv[2]
kw = dict(data_root=os.path.join(tmp, "data"))
if disp == "-":
    disp = None
else:
    kw["offload"] = "all"

def cpu(spec):
    with sluice.Loader(disp, os.path.join(tmp, spec), **kw) as l:
        return [np.array(b.images) if isinstance(b.images, np.ndarray)
                else [np.array(a) for a in b.images] for b in l.batches()]

def device(spec):
    ds = sluice.torch.IterableDataset(disp, os.path.join(tmp, spec), device="cpu", **kw)
    return [x.numpy() for x, _ in torch.utils.data.DataLoader(ds, batch_size=None)]

with sluice.Loader(disp, os.path.join(tmp, "deverase.json"), **kw) as l:
    boxes = [e for b in l.batches() for e in b.erase]
assert len(boxes) > 10 and all(e["value"] == (0.5, -1.25, 2.0) for e in boxes), boxes[:3]
assert all(0 < e["w"] < 48 and 0 < e["h"] < 48 and e["image_hw"] == (48, 48) for e in boxes)
for dev, ref in (("deverase.json", "cpuerase.json"), ("deverasehwc.json", "cpuerasehwc.json")):
    got, want = device(dev), cpu(ref)
    assert len(got) == len(want) == 6
    worst = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
    assert worst <= 1e-5, (dev, worst)
    print("%s: max |device erase - cpu erase| = %.2e over %d boxes" % (dev, worst, len(boxes)))
plain = [x.numpy() for x, _ in torch.utils.data.DataLoader(
    sluice.torch.IterableDataset(disp, os.path.join(tmp, "dev.json"), device="cpu", **kw),
    batch_size=None)]
with sluice.Loader(disp, os.path.join(tmp, "devrandom.json"), **kw) as l:
    rboxes = [[e for e in b.erase] for b in l.batches()]
a, b = device("devrandom.json"), device("devrandom.json")
inside = 0
for k, (x, y, p) in enumerate(zip(a, b, plain)):
    assert np.array_equal(x, y)
    mask = np.zeros(x.shape, bool)
    for e in rboxes[k]:
        assert e["value"] == "random"
        mask[e["sample"], :, e["y"]:e["y"] + e["h"], e["x"]:e["x"] + e["w"]] = True
    assert np.abs(x[~mask] - p[~mask]).max() <= 1e-5
    inside += int(mask.sum())
    assert np.isfinite(x[mask]).all() and (x[mask] != p[mask]).mean() > 0.99
assert inside > 0
print("random: %d values inside the boxes, the same on two runs" % inside)

# Samples of differing shapes (resize keeps the aspect): flat per-sample
# tensors, erased through each box's image_hw
import json
for on in ("cpu", "device"):
    json.dump({"source": {"type": "imagefolder", "path": "train", "shuffle": True, "seed": 3},
               "stages": [{"op": "decode_jpeg"}, {"op": "resize", "size": 40},
                          {"op": "normalize", "on": on}, {"op": "to_chw"},
                          {"op": "random_erasing", "p": 0.9, "value": [1, 2, 3]}],
               "batch_size": 8, "epochs": 1, "deterministic": True},
              open(os.path.join(tmp, "var-%s.json" % on), "w"))
want = [a for b in cpu("var-cpu.json") for a in b]
ds = sluice.torch.IterableDataset(disp, os.path.join(tmp, "var-device.json"), device="cpu", **kw)
got = [x.numpy() for xs, _ in torch.utils.data.DataLoader(ds, batch_size=None) for x in xs]
assert len(got) == len(want) == 24 and len({g.size for g in got}) > 1, [g.size for g in got]
assert max(float(np.abs(g - w).max()) for g, w in zip(got, want)) <= 1e-5
print("differing shapes: %d samples as the CPU erase" % len(got))
PY
$PY "$TMP/erasecmp.py" - "$TMP" || fail "device erase local"
$PY "$TMP/erasecmp.py" "$D_GRPC" "$TMP" || fail "device erase through the dispatcher"
ok "sluice.torch: random_erasing after a device normalize = the CPU erase within 1e-5 (CHW, HWC, local, remote); \"random\" deterministic, inside the boxes only"
echo PASS

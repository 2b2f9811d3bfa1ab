#!/usr/bin/env bash
# Batch-level MixUp / CutMix ("batch_transforms", issue #38 item 8) with
# torchvision's semantics (references/classification/transforms.py
# RandomMixup / RandomCutmix): per batch, the images and soft labels
# sluice.Loader delivers equal what the reference computes (in torch,
# float32) from the same job run without batch transforms, given the
# lambda / box the batch reports; two runs give the same bytes; a run
# offloaded to a worker gives the same bytes as a local one; sluice.torch
# yields float32 soft labels; the ctypes struct matches sluice.h's new fields.
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

python_env
$PY -c 'import numpy, torch' || fail "python3-numpy / python3-torch missing"

cat >"$TMP/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "client/lib/sluice.h"
#define F(f) printf("%s %zu %zu\n", #f, offsetof(sluice_batch_t, f), sizeof(((sluice_batch_t *)0)->f))
int main(void)
{
    F(positions); F(batch_size); F(soft_labels); F(num_classes); F(mix_op); F(mix_lambda);
    F(mix_box);
    return 0;
}
C
cc -I"$ROOT" -o "$TMP/layout" "$TMP/layout.c" || fail "layout probe does not build"
"$TMP/layout" >"$TMP/layout.txt"
$PY - "$TMP/layout.txt" <<'PY' || fail "ctypes _Batch differs from client/lib/sluice.h"
import sys
import sluice
for line in open(sys.argv[1]):
    f, off, size = line.split()
    d = getattr(sluice._Batch, f)
    assert (d.offset, d.size) == (int(off), int(size)), (f, d.offset, d.size, off, size)
PY
ok "ctypes _Batch matches sluice.h (soft_labels, num_classes, mix_op, mix_lambda, mix_box)"

make_images "$TMP/data" 3 9
cat >"$TMP/mix.py" <<'PY'
import hashlib, json, sys
import numpy as np
import torch
import sluice

disp, data, what = sys.argv[1], sys.argv[2], sys.argv[3]
disp = None if disp == "-" else disp
extra = {"offload": "all"} if disp else {}


def spec(tfs, layout="chw"):
    stages = [{"op": "decode_jpeg"}, {"op": "resize", "size": 20},
              {"op": "center_crop", "size": 16}, {"op": "flip", "p": 0.5},
              {"op": "normalize"}]
    if layout == "chw":
        stages.append({"op": "to_chw"})
    s = {"source": {"type": "imagefolder", "path": "train", "shuffle": True, "seed": 5},
         "stages": stages, "batch_size": 5, "epochs": 2, "deterministic": True}
    if tfs:
        s["batch_transforms"] = tfs
        s["num_classes"] = 3
    return s


def run(s):
    out = []
    with sluice.Loader(disp, s, data_root=data, threads=2, **extra) as loader:
        for b in loader.batches():
            out.append((b.epoch, b.indices.copy(), b.labels.copy(), np.array(b.images),
                        None if b.soft_labels is None else b.soft_labels.copy(), b.mix))
        st = loader.stats()
    if disp:
        assert st["from_remote"] > 0, st
    return out


def reference(x, y, mix, chw):
    """torchvision's RandomMixup / RandomCutmix, given its draws."""
    batch = torch.from_numpy(x.copy())
    if not chw:
        batch = batch.permute(0, 3, 1, 2)
    target = torch.nn.functional.one_hot(torch.from_numpy(y.astype(np.int64)),
                                         num_classes=3).to(dtype=batch.dtype)
    lam = mix["lambda"]
    if mix["op"] == "mixup":
        rolled = batch.roll(1, 0)
        target_rolled = target.roll(1, 0)
        batch.mul_(lam).add_(rolled.mul_(1.0 - lam))
        target.mul_(lam).add_(target_rolled.mul_(1.0 - lam))
    elif mix["op"] == "cutmix":
        rolled = batch.roll(1, 0)
        target_rolled = target.roll(1, 0)
        x1, y1, x2, y2 = mix["box"]
        batch[:, :, y1:y2, x1:x2] = rolled[:, :, y1:y2, x1:x2]
        lam2 = float(1.0 - (x2 - x1) * (y2 - y1) / (batch.shape[-1] * batch.shape[-2]))
        assert lam2 == lam, (lam2, lam)
        target.mul_(lam).add_(target_rolled.mul_(1.0 - lam))
    else:
        assert mix["op"] == "none" and lam == 1.0, mix
    if not chw:
        batch = batch.permute(0, 2, 3, 1)
    return batch.contiguous().numpy(), target.numpy()


def digest(batches):
    h = hashlib.sha256()
    for e, idx, lab, img, soft, mix in batches:
        h.update(np.array([e]).tobytes() + idx.tobytes() + lab.tobytes() + img.tobytes())
        h.update(soft.tobytes() + json.dumps(mix, sort_keys=True).encode())
    return h.hexdigest()


cases = {"mixup": [{"op": "mixup", "alpha": 0.2}],
         "cutmix": [{"op": "cutmix", "alpha": 1.0}],
         "both": [{"op": "mixup", "alpha": 0.2, "p": 0.8}, {"op": "cutmix", "alpha": 1.0}]}
digests = {}
for layout in ("chw", "hwc"):
    base = run(spec(None, layout))
    assert all(b[4] is None and b[5] is None for b in base)
    for name, tfs in cases.items():
        got = run(spec(tfs, layout))
        assert len(got) == len(base) == 12, (len(got), len(base))
        ops = set()
        for (e, idx, lab, img, _, _), (e2, idx2, lab2, img2, soft, mix) in zip(base, got):
            assert e == e2 and (idx == idx2).all() and (lab == lab2).all()
            assert soft.dtype == np.float32 and soft.shape == (len(idx), 3)
            ops.add(mix["op"])
            want_img, want_soft = reference(img, lab, mix, layout == "chw")
            assert np.array_equal(img2, want_img), (name, layout, mix,
                                                    np.abs(img2 - want_img).max())
            assert np.array_equal(soft, want_soft), (name, mix, soft, want_soft)
            if mix["op"] != "none":
                assert not np.array_equal(img2, img) or mix["lambda"] == 1.0
        want_ops = {"mixup": {"mixup"}, "cutmix": {"cutmix"},
                    "both": {"mixup", "cutmix", "none"}}[name]
        assert ops <= want_ops and len(ops & {"mixup", "cutmix"}) >= 1, (name, ops)
        if name == "both":
            assert {"mixup", "cutmix"} <= ops, ops
        digests["%s-%s" % (name, layout)] = digest(got)
        again = run(spec(tfs, layout))
        assert digest(again) == digests["%s-%s" % (name, layout)], name

if what == "torch":
    import sluice.torch as st
    ds = st.IterableDataset(disp, spec(cases["mixup"]), data_root=data, threads=2, **extra)
    n = 0
    for images, labels in torch.utils.data.DataLoader(ds, batch_size=None):
        assert labels.dtype == torch.float32 and labels.shape == (images.shape[0], 3), labels
        assert torch.allclose(labels.sum(1), torch.ones(images.shape[0]))
        n += 1
    assert n == 12, n
print(json.dumps(digests, sort_keys=True))
PY

$PY "$TMP/mix.py" - "$TMP/data" torch >"$TMP/local.json" || fail "local runs"
ok "local: images and soft labels equal torchvision's RandomMixup / RandomCutmix (CHW, HWC, both), two runs identical, sluice.torch soft labels"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0
start_daemon W "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 2
wait_live_workers "$D_HTTP" 1
$PY "$TMP/mix.py" "$D_GRPC" "$TMP/data" - >"$TMP/remote.json" || fail "offloaded runs"
cmp "$TMP/local.json" "$TMP/remote.json" || fail "offloaded batches differ from local ones"
ok "offloaded to a worker: the same bytes as local"

# Spec errors reach Python naming the field.
$PY - "$TMP/data" <<'PY' || fail "spec errors"
import sys
import sluice
s = {"source": {"type": "imagefolder", "path": "train"},
     "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 8},
                {"op": "normalize", "on": "device"}],
     "num_classes": 3, "batch_transforms": [{"op": "mixup", "alpha": 0.2}]}
try:
    sluice.Loader(None, s, data_root=sys.argv[1])
    raise SystemExit("a device normalize was accepted")
except sluice.SpecError as e:
    assert "batch_transforms: needs float32 images" in str(e), e
s["stages"][2] = {"op": "normalize"}
s["batch_transforms"][0]["alpha"] = 0
try:
    sluice.Loader(None, s, data_root=sys.argv[1])
    raise SystemExit("alpha 0 was accepted")
except sluice.SpecError as e:
    assert "batch_transforms[0].alpha: must be a number > 0" in str(e), e
PY
ok "spec errors name the field"

#!/usr/bin/env bash
# An imagefolder indexes what torchvision.datasets.ImageFolder indexes: on a
# tree with .png/.bmp/.ppm/.tif files, hidden files and a hidden class,
# non-image files, nested and symlinked directories, a dangling link, an
# empty file and empty classes, sample i has torchvision's file (checked by
# its decoded size: every JPEG has its own) and label, and every file Sluice
# cannot decode is a counted skip with its reason, never a crash. Run under
# /usr/bin/python3 with torchvision and the binding (libsluice.so).
source "$(dirname "$0")/lib.sh"
ok() { echo "ok: $*"; }

python_env
$PY -c 'import torchvision, PIL' || fail "torchvision and PIL are needed under $PY"

# The tree: real images of every kind, each JPEG its own size.
$PY - "$TMP/data/train" <<'PY'
import os, sys
from PIL import Image
root = sys.argv[1]
k = [0]
def img(rel, fmt, mode="RGB"):
    k[0] += 1
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    im = Image.new(mode, (16 + k[0], 16 + k[0]), (k[0] * 7 % 256, 80, 160) if mode == "RGB" else 90)
    im.save(p, fmt)
def raw(rel, data):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "wb").write(data)
for i in range(3):
    img("cat/%02d.jpg" % i, "JPEG")
img("cat/03.JPG", "JPEG")
img("cat/04.Jpeg", "JPEG")
img("cat/05.png", "PNG")
img("cat/06.bmp", "BMP")
img("cat/07.PPM", "PPM")
img("cat/08.pgm", "PPM", "L")
img("cat/09.tif", "TIFF")
img("cat/10.gif", "GIF")             # not one of torchvision's extensions
img("cat/.hidden.jpg", "JPEG")       # hidden, a real JPEG
raw("cat/._00.jpg", b"\0\5\26\7 AppleDouble litter")  # hidden, not a JPEG
raw("cat/notes.txt", b"not an image\n")
raw("cat/README", b"no extension\n")
raw("cat/zz_empty.jpg", b"")
img("cat/sub/20.jpg", "JPEG")
img("cat/sub-x/21.jpg", "JPEG")      # '-' sorts before '/': between sub and sub/deeper
img("cat/sub/deeper/22.jpg", "JPEG")
img("cat/sub0/23.png", "PNG")
img("cat/y.jpg/24.jpg", "JPEG")      # a directory with an image's name
img("dog/00.jpg", "JPEG")
img("dog/01.jpeg", "JPEG")
img(".hidden_cls/00.jpg", "JPEG")    # a hidden class, a class all the same
img("zebra/00.jpg", "JPEG")
img("zebra/01.webp", "WEBP") if "WEBP" in Image.SAVE else raw("zebra/01.webp", b"RIFF....WEBPVP8 ")
os.symlink("../dog/00.jpg", os.path.join(root, "cat/link.jpg"))
os.symlink("nowhere.jpg", os.path.join(root, "cat/dangling.jpg"))
os.symlink("../zebra", os.path.join(root, "cat/zlinkdir"))
open(os.path.join(root, "top.jpg"), "wb").write(b"a file beside the classes")
PY

cat >"$TMP/compare.py" <<'PY'
import os, sys
from PIL import Image
import torchvision
from torchvision.datasets import folder
import sluice

root, want_reasons = sys.argv[1], eval(sys.argv[2])
train = os.path.join(root, "train")
classes, c2i = folder.find_classes(train)
try:
    samples = folder.make_dataset(train, c2i, extensions=folder.IMG_EXTENSIONS)
    empty = False
except FileNotFoundError:
    # torchvision before 0.17 refuses a class without images; with
    # allow_empty=True (0.17+) it keeps the class's label, as Sluice does:
    # the same, made from torchvision's own make_dataset class by class.
    empty = True
    samples = []
    for c in sorted(c2i):
        try:
            samples += folder.make_dataset(train, {c: c2i[c]}, extensions=folder.IMG_EXTENSIONS)
        except FileNotFoundError:
            pass
if not empty:
    tv = torchvision.datasets.ImageFolder(train)
    assert tv.samples == samples, (tv.samples, samples)

def jpeg_size(path):
    try:
        with Image.open(path) as im:
            return im.size if im.format == "JPEG" else None
    except OSError:
        return None

spec = {"source": {"type": "imagefolder", "path": "train", "shuffle": False},
        "stages": [{"op": "decode_jpeg"}], "batch_size": 1}
got = {}
with sluice.Loader(None, spec, data_root=root, threads=2) as ld:
    for b in ld.batches():
        for k in range(len(b)):
            im = b.images[k]
            assert int(b.indices[k]) not in got, b.indices[k]
            got[int(b.indices[k])] = (int(b.labels[k]), im.shape)
    skipped = ld.skipped()
for i, (path, label) in enumerate(samples):
    size = jpeg_size(path)
    if size is None:
        assert i not in got, (i, path, got.get(i))
        continue
    assert i in got, (i, path, "not delivered")
    w, h = size
    assert got[i] == (label, (h, w, 3)), (i, path, label, size, got[i])
assert max(got) < len(samples), (max(got), len(samples))
assert len(got) + sum(skipped.values()) == len(samples), (len(got), skipped, len(samples))
assert skipped == want_reasons, skipped
print("%d samples in %d classes (empty classes: %s), %d delivered, skipped %s"
      % (len(samples), len(classes), empty, len(got), skipped))
PY

# Not a JPEG: .png .bmp .PPM .pgm .tif, sub0/23.png, ._00.jpg, zebra/01.webp
# (twice: once more through cat/zlinkdir); empty: zz_empty.jpg; io: dangling.jpg.
reasons='{"not_jpeg": 9, "empty": 1, "io": 1}'
$PY "$TMP/compare.py" "$TMP/data" "$reasons" || fail "indices differ from torchvision's"
ok "same samples, order and labels as torchvision.datasets.ImageFolder"

# Empty classes: one with only a text file, one hidden and empty.
mkdir -p "$TMP/data/train/emu" "$TMP/data/train/.empty"
echo "no images here" >"$TMP/data/train/emu/notes.txt"
$PY - "$TMP/data/train" <<'PY' || fail "torchvision accepted empty classes without allow_empty"
import sys, torchvision
try:
    torchvision.datasets.ImageFolder(sys.argv[1])
except FileNotFoundError:
    sys.exit(0)
sys.exit(int(torchvision.__version__.split(".")[1]) < 17)
PY
$PY "$TMP/compare.py" "$TMP/data" "$reasons" || fail "with empty classes: indices differ"
ok "empty classes keep their labels (torchvision's allow_empty=True)"

# The CLI counts the same reasons.
cat >"$TMP/spec.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": false},
 "stages": [{"op": "decode_jpeg"}, {"op": "center_crop", "size": 8}], "batch_size": 4}
JSON
"$BIN/sluice" run "$TMP/spec.json" --local --data-root "$TMP/data" --quiet --json >"$TMP/run.json"
$PY - "$TMP/run.json" "$reasons" <<'PY' || fail "sluice run --json: $(cat "$TMP/run.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["skipped"]["reasons"] == json.loads(sys.argv[2]), j["skipped"]
PY
ok "sluice run --json counts the undecodable files by reason"
echo "imagefolder vs torchvision: ok"

#!/usr/bin/env bash
# The augmentation ops against torchvision 0.14 as the oracle. Generated
# photos (scripts/make-dataset: gradients, shapes, texture, noise; gray and
# progressive ones too) are decoded by build/tools/augment_apply, which
# writes the decoded pixels and one op's output at explicit parameters (the
# draws torchvision would make); torchvision.transforms.functional applies
# the same op to the same pixels as a uint8 tensor. Per op: the mean
# absolute difference over all images and parameter sets, the largest
# single-pixel difference and the share of differing values are printed
# (docs/design.md "Pipeline spec" quotes them) and checked against limits:
# integer-exact ops must be exact; float ones within the tolerance below.
# Saturated and flat channels (generated PNGs) for auto_contrast and
# equalize, exact.
source "$(dirname "$0")/lib.sh"
TOOL="$ROOT/$BUILD/tools/augment_apply"
[ -x "$TOOL" ] || fail "$TOOL not built"
/usr/bin/python3 -c 'import torch, torchvision' || fail "torch and torchvision are needed under /usr/bin/python3"

make_images "$TMP/data" 2 3

/usr/bin/python3 - "$TOOL" "$TMP" <<'PY' || fail "torchvision comparison failed"
import glob, math, os, subprocess, sys
import numpy as np
from PIL import Image
import torch
import torchvision
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms.autoaugment import _apply_op

torch.set_num_threads(1)
tool, tmp = sys.argv[1], sys.argv[2]
images = sorted(glob.glob(os.path.join(tmp, "data", "train", "*", "*.jpg")))
assert len(images) >= 6, images
MODES = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR}
POLICY_OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
              "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
              "AutoContrast", "Equalize"]

def jitter(t, order, b, c, s, h):
    fns = [lambda x: F.adjust_brightness(x, b), lambda x: F.adjust_contrast(x, c),
           lambda x: F.adjust_saturation(x, s), lambda x: F.adjust_hue(x, h)]
    for k in order:
        t = fns[int(k)](t)
    return t

# name -> (max allowed mean abs diff, max allowed share of differing values,
#          [(tool args, torchvision function of the CHW uint8 tensor)])
CASES = {
    "brightness": (0.0, 0.0, [(["brightness", f], lambda t, f=f: F.adjust_brightness(t, f))
                              for f in (0.6, 1.3, 1.9)]),
    "contrast": (0.01, 0.01, [(["contrast", f], lambda t, f=f: F.adjust_contrast(t, f))
                              for f in (0.5, 1.4)]),
    "saturation": (0.0, 0.0, [(["saturation", f], lambda t, f=f: F.adjust_saturation(t, f))
                              for f in (0.0, 0.7, 1.6)]),
    "hue": (0.01, 0.01, [(["hue", f], lambda t, f=f: F.adjust_hue(t, f))
                         for f in (-0.4, -0.05, 0.13, 0.5)]),
    "color_jitter": (0.01, 0.01, [(["jitter", o, b, c, s, h],
                                   lambda t, o=o, b=b, c=c, s=s, h=h: jitter(t, o, b, c, s, h))
                                  for o, b, c, s, h in (("0123", 1.2, 0.8, 1.3, 0.1),
                                                        ("3201", 0.7, 1.3, 0.6, -0.2))]),
    "vertical_flip": (0.0, 0.0, [(["vflip"], F.vflip)]),
    "grayscale": (0.0, 0.0, [(["grayscale"], lambda t: F.rgb_to_grayscale(t, 3))]),
    "solarize": (0.0, 0.0, [(["solarize", th], lambda t, th=th: F.solarize(t, th))
                            for th in (0.0, 127.5, 200.0)]),
    "posterize": (0.0, 0.0, [(["posterize", b], lambda t, b=b: F.posterize(t, b))
                             for b in (0, 3, 8)]),
    "auto_contrast": (0.0, 0.0, [(["autocontrast"], F.autocontrast)]),
    "equalize": (0.0, 0.0, [(["equalize"], F.equalize)]),
    "sharpness": (0.01, 0.01, [(["sharpness", f], lambda t, f=f: F.adjust_sharpness(t, f))
                               for f in (0.1, 1.9)]),
    "gaussian_blur": (0.02, 0.02, [(["blur", kx, ky, sx, sy],
                                    lambda t, kx=kx, ky=ky, sx=sx, sy=sy:
                                    F.gaussian_blur(t, [kx, ky], [sx, sy]))
                                   for kx, ky, sx, sy in ((3, 3, 0.1, 0.1), (9, 5, 1.7, 1.7),
                                                          (23, 23, 2.0, 2.0))]),
    "random_erasing": (0.0, 0.0, [(["erase", 17, 9, 40, 25, v],
                                   lambda t, v=v: F.erase(t, 9, 17, 25, 40,
                                                          torch.tensor([v, v, v])[:, None, None]))
                                  for v in (0, 124)]),
    "random_rotation": (0.05, 0.01, [(["rotate", a, m, fill],
                                      lambda t, a=a, m=m, fill=fill:
                                      F.rotate(t, a, MODES[m], fill=[float(fill)] * 3))
                                     for a, m, fill in ((17.5, "nearest", 0),
                                                        (-33.0, "bilinear", 0),
                                                        (90.0, "nearest", 128),
                                                        (151.25, "bilinear", 200))] +
                                    [(["rotate", 25.0, "bilinear", 0, 40, 70.5],
                                      lambda t: F.rotate(t, 25.0, IM.BILINEAR, center=[40, 70.5],
                                                         fill=[0.0] * 3))]),
    "random_affine": (0.05, 0.01, [(["affine", a, tx, ty, sc, shx, shy, m, fill],
                                    lambda t, a=a, tx=tx, ty=ty, sc=sc, shx=shx, shy=shy, m=m,
                                    fill=fill: F.affine(t, a, [tx, ty], sc, [shx, shy], MODES[m],
                                                        fill=[float(fill)] * 3))
                                   for a, tx, ty, sc, shx, shy, m, fill in (
                                       (10.0, 12, -7, 0.9, 5.0, 0.0, "nearest", 0),
                                       (-25.0, -30, 4, 1.2, -8.0, 6.0, "bilinear", 0),
                                       (0.0, 3, 3, 1.0, 0.0, 0.0, "bilinear", 77))]),
}
# The policies' ops through autoaugment's _apply_op (fill None), at
# magnitudes from both tables, signed both ways.
pol = []
for i, name in enumerate(POLICY_OPS):
    mags = {"ShearX": (0.3, -0.99), "ShearY": (-0.3, 0.66), "TranslateX": (32.0, -135.9),
            "TranslateY": (-32.0, 45.3), "Rotate": (30.0, -135.0), "Brightness": (0.9, -0.99),
            "Color": (-0.9, 0.99), "Contrast": (0.33, -0.99), "Sharpness": (0.9, -0.99),
            "Posterize": (4.0, 2.0), "Solarize": (255.0, 93.5)}.get(name, (0.0,))
    for mag in mags:
        for mode in ("nearest", "bilinear") if name in ("ShearX", "Rotate") else ("nearest",):
            pol.append((["policy", i, mag, mode],
                        lambda t, name=name, mag=mag, mode=mode:
                        _apply_op(t, name, mag, interpolation=MODES[mode], fill=None)))
CASES["policy_ops"] = (0.05, 0.01, pol)

bad = []
print(f"{'op':<16} {'mean|d|':>9} {'max|d|':>6} {'values differ':>14}   "
      f"{'PIL mean|d|':>11}  (tensor oracle; PIL: the same call on a PIL image, "
      f"information only; {len(images)} images)")
for name, (mean_lim, share_lim, runs) in CASES.items():
    tot = cnt = ndiff = 0
    mx = 0
    ptot = pcnt = 0
    for img in images:
        for args, fn in runs:
            inp, outp = os.path.join(tmp, "in.raw"), os.path.join(tmp, "out.raw")
            res = subprocess.run([tool, img, inp, outp] + [str(a) for a in args],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                bad.append(f"{name} {args} on {img}: {res.stderr.strip()}")
                continue
            w, h, c = map(int, res.stdout.split())
            a = np.fromfile(inp, np.uint8).reshape(h, w, c)
            ours = np.fromfile(outp, np.uint8).reshape(h, w, c).astype(np.int32)
            t = torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()
            ref = fn(t).permute(1, 2, 0).numpy().astype(np.int32)
            d = np.abs(ours - ref)
            tot += int(d.sum())
            cnt += d.size
            ndiff += int((d != 0).sum())
            mx = max(mx, int(d.max()))
            try:  # torchvision on a PIL image: Pillow's own arithmetic
                pil = np.asarray(fn(Image.fromarray(a.squeeze() if c == 1 else a)))
                pil = pil.reshape(h, w, -1)[:, :, :c].astype(np.int32)
                ptot += int(np.abs(ours - pil).sum())
                pcnt += d.size
            except (TypeError, ValueError, AttributeError):
                pass  # tensor-only (erase) or not for PIL
    mean = tot / max(cnt, 1)
    share = ndiff / max(cnt, 1)
    pmean = f"{ptot / pcnt:11.4f}" if pcnt else f"{'-':>11}"
    print(f"{name:<16} {mean:9.6f} {mx:6d} {ndiff:6d} {100 * share:6.4f}%   {pmean}")
    if mean > mean_lim or share > share_lim:
        bad.append(f"{name}: mean |d| {mean:.5f} (limit {mean_lim}), "
                   f"{100 * share:.3f}% of values differ (limit {100 * share_lim}%)")
# Saturated images (lossless PNG), for the exact histogram ops: channels
# that hit 0 and 255, flat ones (0, 255, a middle value), narrow ranges whose
# maximum is where a single float division truncates to 254 (0..7, 0..14,
# 3..200), and one photo's channels stretched to 0..255. Exact, every value.
rng = np.random.default_rng(38)
def ramp(lo, hi, h=24, w=31):
    return (lo + (np.arange(h * w).reshape(h, w) * 7919) % (hi - lo + 1)).astype(np.uint8)
sat = [np.stack([ramp(0, 255), np.full((24, 31), 255, np.uint8), ramp(0, 7)], -1),
       np.stack([ramp(3, 200), np.zeros((24, 31), np.uint8), ramp(0, 14)], -1),
       np.stack([np.full((24, 31), 77, np.uint8), ramp(250, 255), ramp(1, 254)], -1),
       np.where(rng.random((24, 31, 3)) < 0.5, 0, 255).astype(np.uint8),
       np.stack([ramp(0, 41), ramp(12, 12 + 197), ramp(128, 255)], -1)]
photo = np.asarray(Image.open(images[0]).convert("RGB")).astype(np.float64)
lo, hi = photo.min(axis=(0, 1)), photo.max(axis=(0, 1))
sat.append(np.clip((photo - lo) * 255.0 / np.maximum(hi - lo, 1), 0, 255).astype(np.uint8))
for name, args, fn in (("auto_contrast", ["autocontrast"], F.autocontrast),
                       ("equalize", ["equalize"], F.equalize)):
    nval = ndiff = 0
    for k, a in enumerate(sat):
        png, inp, outp = (os.path.join(tmp, f) for f in (f"sat{k}.png", "in.raw", "out.raw"))
        Image.fromarray(a).save(png)
        res = subprocess.run([tool, png, inp, outp] + args, capture_output=True, text=True)
        if res.returncode != 0:
            bad.append(f"{name} on saturated image {k}: {res.stderr.strip()}")
            continue
        assert (np.fromfile(inp, np.uint8).reshape(a.shape) == a).all(), k
        ours = np.fromfile(outp, np.uint8).reshape(a.shape)
        ref = fn(torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()).permute(1, 2, 0).numpy()
        d = int((ours != ref).sum())
        nval += ours.size
        ndiff += d
        if d:
            bad.append(f"{name} on saturated image {k}: {d} values differ, e.g. ours "
                       f"{ours[ours != ref][:5].tolist()} torchvision {ref[ours != ref][:5].tolist()}")
    print(f"{name + ' (saturated)':<26} {ndiff} of {nval} values differ ({len(sat)} images)")
# Ops that change the size (issue #38's recipes), exact: random_crop after
# its draws as RandomCrop.forward does it (F.pad, pad_if_needed's F.pad,
# F.crop), in every padding mode.
def rcrop(t, pad, mode, fill, need, th, tw, x, y):
    if any(pad):
        t = F.pad(t, list(pad), fill, mode)
    if need and t.shape[-1] < tw:
        t = F.pad(t, [tw - t.shape[-1], 0], fill, mode)
    if need and t.shape[-2] < th:
        t = F.pad(t, [0, th - t.shape[-2]], fill, mode)
    return F.crop(t, y, x, th, tw)

SIZED = {"random_crop": []}
for img in images:
    W, H = Image.open(img).size
    for pad, mode, fill, need, th, tw, x, y in (
            ((4, 4, 4, 4), "constant", 0, 0, H, W, 3, 5),
            ((2, 7, 5, 1), "reflect", 0, 0, H - 3, W + 2, 1, 4),
            ((9, 9, 9, 9), "edge", 0, 0, H + 10, W + 10, 8, 0),
            ((3, 0, 6, 2), "symmetric", 0, 0, H // 2, W // 3, W // 4, H // 5),
            ((0, 0, 0, 0), "constant", 77, 1, H + 6, W + 11, 10, 2),
            ((1, 0, 0, 2), "reflect", 0, 1, H + 4, W + 4, 3, 2),
            ((0, 0, 0, 0), "symmetric", 0, 1, H + 3, W - 5, 4, 3)):
        SIZED["random_crop"].append(
            (img, ["crop", *pad, mode, fill, need, th, tw, x, y],
             lambda t, a=(pad, mode, fill, need, th, tw, x, y): rcrop(t, *a)))
# resize / random_resized_crop: the crop, then the resize. Nearest is
# torch's on tensors, exact; bilinear and bicubic are Pillow's (what timm's
# recipes run: torchvision on PIL images), exact against PIL, and against
# the tensor path with antialias=True within the limits below (torch's
# float weights against Pillow's 22-bit fixed point).
def pil_rc(a, x, y, w, h, oh, ow, mode):
    f = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}[mode]
    return np.asarray(Image.fromarray(a).crop((x, y, x + w, y + h)).resize((ow, oh), f))

RESIZE_TENSOR_LIMITS = {"bilinear": (0.2, 1), "bicubic": (0.25, 12)}
for mode in ("nearest", "bilinear", "bicubic"):
    SIZED["resize_" + mode] = []
for img in images:
    W, H = Image.open(img).size
    for x, y, w, h, oh, ow in ((0, 0, W, H, 224, 224), (17, 9, W // 2, H // 3, 96, 160),
                               (0, 0, W, H, H * 2 + 1, W + 7), (5, 3, 40, 30, 13, 17),
                               (W // 4, H // 4, W // 2, H // 2, H // 2, W // 2)):
        for mode in ("nearest", "bilinear", "bicubic"):
            args = ["resize", x, y, w, h, oh, ow, mode]
            if mode == "nearest":
                fn = lambda t, a=(y, x, h, w, [oh, ow]): F.resized_crop(t, *a, IM.NEAREST)
            else:
                fn = (lambda t, a=(x, y, w, h, oh, ow, mode): torch.from_numpy(
                    pil_rc(t.permute(1, 2, 0).numpy(), *a).copy()).permute(2, 0, 1))
            SIZED["resize_" + mode].append((img, args, fn))
tensor_d = {m: [0, 0, 0] for m in RESIZE_TENSOR_LIMITS}  # sum |d|, count, max
for name, runs in SIZED.items():
    nval = ndiff = 0
    for img, args, fn in runs:
        inp, outp = os.path.join(tmp, "in.raw"), os.path.join(tmp, "out.raw")
        res = subprocess.run([tool, img, inp, outp] + [str(a) for a in args],
                             capture_output=True, text=True)
        if res.returncode != 0:
            bad.append(f"{name} {args} on {img}: {res.stderr.strip()}")
            continue
        w, h, c = map(int, res.stdout.split())
        W, H = Image.open(img).size
        a = np.fromfile(inp, np.uint8).reshape(H, W, c)
        ours = np.fromfile(outp, np.uint8).reshape(h, w, c)
        ref = fn(torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()).permute(1, 2, 0).numpy()
        if ref.shape != ours.shape:
            bad.append(f"{name} {args}: shape {ours.shape}, torchvision {ref.shape}")
            continue
        nval += ours.size
        ndiff += int((ours != ref).sum())
        mode = args[-1]
        if args[0] == "resize" and mode in tensor_d:
            x, y, w, h, oh, ow = args[1:7]
            tt = torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()
            tv = F.resized_crop(tt, y, x, h, w, [oh, ow], IM(mode), antialias=True)
            d = np.abs(ours.astype(np.int32) - tv.permute(1, 2, 0).numpy().astype(np.int32))
            tensor_d[mode][0] += int(d.sum())
            tensor_d[mode][1] += d.size
            tensor_d[mode][2] = max(tensor_d[mode][2], int(d.max()))
    print(f"{name:<26} {ndiff} of {nval} values differ ({len(runs)} runs)")
    if ndiff:
        bad.append(f"{name}: {ndiff} values differ (must be exact)")
# random_erasing after normalize (float32 CHW): F.erase on the normalized
# tensor, value 0 = the normalized zero (the mean colour); bit-exact.
nval = ndiff = 0
for img in images:
    W, H = Image.open(img).size
    for x, y, w, h, v in ((17, 9, 40, 25, 0.0), (0, 0, W // 2, H // 3, 0.0),
                          (W // 3, H // 4, 5, 70, -1.25)):
        inp, outp = os.path.join(tmp, "in.raw"), os.path.join(tmp, "out.raw")
        res = subprocess.run([tool, img, inp, outp, "erase_norm"] +
                             [str(q) for q in (x, y, w, h, v)], capture_output=True, text=True)
        if res.returncode != 0:
            bad.append(f"erase_norm on {img}: {res.stderr.strip()}")
            continue
        tin = torch.from_numpy(np.fromfile(inp, np.float32).reshape(3, H, W).copy())
        ours = np.fromfile(outp, np.float32).reshape(3, H, W)
        ref = F.erase(tin, y, x, h, w, torch.tensor([v, v, v])[:, None, None]).numpy()
        nval += ours.size
        ndiff += int((ours.view(np.uint32) != ref.view(np.uint32)).sum())
print(f"{'random_erasing (normalized)':<26} {ndiff} of {nval} values differ (bitwise)")
if ndiff:
    bad.append(f"random_erasing after normalize: {ndiff} values differ (must be exact)")
for mode, (tot, cnt, mx) in tensor_d.items():
    mean = tot / max(cnt, 1)
    print(f"resize_{mode} vs tensor antialias=True: mean |d| {mean:.5f}, max {mx}")
    if mean > RESIZE_TENSOR_LIMITS[mode][0] or mx > RESIZE_TENSOR_LIMITS[mode][1]:
        bad.append(f"resize_{mode} vs the tensor path: mean |d| {mean:.5f}, max {mx} "
                   f"(limits {RESIZE_TENSOR_LIMITS[mode]})")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY
echo "PASS: augmentations match torchvision within the documented tolerance"

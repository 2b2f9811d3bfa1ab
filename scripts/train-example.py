#!/usr/bin/python3
"""Trains a tiny CNN for a few steps on CPU from a Sluice job: Sluice as a
training script sees it (docs/deploy.md "Deploying on a cluster").

    scripts/train-example.py --dispatcher HOST:PORT --spec conf/imagenet-train.json \\
        --data-root /srv/sluice/data --steps 20
    scripts/train-example.py --local --spec SPEC --data-root DIR      # no daemons

The spec must end in float32 CHW tensors (normalize + to_chw), as a vision
model wants them. Batches arrive as torch tensors sharing the library's
memory (no copy); the loop is a plain PyTorch loop. Without --epochs one job
runs the spec's epochs; with --epochs N the script loops over epochs itself,
one job per epoch (set_epoch: each epoch reshuffles and draws new crops,
exactly as epoch e of one N-epoch job would).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Run from a source tree without installing: the binding next to the library.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "client", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import sluice  # noqa: E402
import sluice.torch  # noqa: E402


def count_classes(spec_path, data_root):
    """Classes of an imagefolder source, counted on this host."""
    with open(spec_path) as f:
        src = json.load(f)["source"]
    if src.get("type") != "imagefolder":
        return 0
    d = os.path.join(data_root or ".", src["path"])
    try:
        return sum(1 for e in os.scandir(d) if e.is_dir())
    except OSError:
        return 0


class TinyNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.features(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dispatcher", help="HOST:PORT of sluice-dispatcher")
    where.add_argument("--local", action="store_true", help="run every stage in this process")
    ap.add_argument("--spec", required=True, help="pipeline spec (JSON)")
    ap.add_argument("--data-root", default=".", help="directory the spec's paths are under")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    ap.add_argument("--epochs", type=int, default=0,
                    help="an outer loop of N epochs, one job each (default: one job of the "
                    "spec's epochs)")
    ap.add_argument("--classes", type=int, default=0,
                    help="output classes (default: counted from an imagefolder source)")
    ap.add_argument("--threads", type=int, default=0, help="local decode threads")
    ap.add_argument("--offload", default=None, help="off|all|auto|fastflow|K:F")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    classes = args.classes or count_classes(args.spec, args.data_root) or 1000
    torch.manual_seed(0)
    torch.set_num_threads(1)  # leave the cores to Sluice's local share
    model = TinyNet(classes)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    # --epochs N: jobs of one epoch each, numbered by set_epoch below.
    ds = sluice.torch.IterableDataset(None if args.local else args.dispatcher, args.spec,
                                      data_root=args.data_root, epochs=1 if args.epochs else 0,
                                      threads=args.threads, offload=args.offload)
    # Sluice batches by itself: batch_size=None passes its batches through.
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    t0 = time.monotonic()
    r = {"steps": 0, "samples": 0, "first_loss": None, "last_loss": None, "epochs": [],
         "skipped": {}}
    for epoch in range(max(1, args.epochs)):
        if args.epochs:
            ds.set_epoch(epoch)
        more = train_epoch(model, opt, loss_fn, loader, args.steps, t0, r)
        if r["steps"] > 0:
            st = ds.stats()  # the job just run (its final numbers)
            r["epochs"].append([st["first_epoch"], st["first_epoch"] + st["epochs"] - 1])
            for reason, n in ds.skipped().items():
                r["skipped"][reason] = r["skipped"].get(reason, 0) + n
        if not more:
            break
    if r["steps"] == 0:
        sys.exit("train-example: the job delivered no batch")
    r.update(seconds=time.monotonic() - t0, classes=classes)
    print(json.dumps(r))


def train_epoch(model, opt, loss_fn, loader, max_steps, t0, r):
    """One pass over the loader (one job). False once max_steps are done."""
    for images, labels in loader:
        if images.dtype != torch.float32 or images.dim() != 4 or images.shape[1] != 3:
            sys.exit("train-example: the spec must produce float32 CHW images "
                     "(end with normalize and to_chw); got %s %s"
                     % (images.dtype, tuple(images.shape)))
        opt.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
        r["steps"] += 1
        r["samples"] += labels.shape[0]
        r["last_loss"] = loss.item()
        if r["first_loss"] is None:
            r["first_loss"] = r["last_loss"]
        print("step %3d  loss %.4f  batch %s  %.1f samples/s"
              % (r["steps"], r["last_loss"], tuple(images.shape),
                 r["samples"] / (time.monotonic() - t0)), flush=True)
        if r["steps"] >= max_steps:
            return False  # leaving the loop closes the job (the dispatcher is told)
    return True


if __name__ == "__main__":
    main()

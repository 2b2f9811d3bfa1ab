#!/usr/bin/python3
"""Checkpoint the input pipeline with the model, get killed, resume.

    examples/resume/train_resume.py --local --spec SPEC --data-root DIR \\
        --ckpt /tmp/ckpt.pt --every 5 [--kill-after 12]
    examples/resume/train_resume.py --dispatcher HOST:PORT --spec SPEC ...

A tiny linear classifier trains on CPU from a Sluice job (sluice.torch). Every
``--every`` steps it saves one checkpoint holding the model, the optimizer and
the loader's state_dict() (torchdata's StatefulDataLoader protocol), written
atomically. With ``--kill-after N`` it SIGKILLs itself after step N, like a
preempted job. Started again with the same ``--ckpt`` it restores all three and
goes on: the samples trained on before the checkpoint are not repeated, none is
skipped, and every remaining sample is the same tensor as in an uninterrupted
run. With a ``"deterministic": true`` spec and the same world size the batches
are the same ones in the same order, so the final weights equal an
uninterrupted run's bit for bit (``--out`` writes them, for checking).
"""

import argparse
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Run from a source tree without installing: the binding next to the library.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "client", "python"))

import torch  # noqa: E402

import sluice.torch  # noqa: E402


def save_atomically(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--dispatcher", help="HOST:PORT of a sluice-dispatcher")
    where.add_argument("--local", action="store_true", help="no daemons")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--data-root", default=".")
    ap.add_argument("--ckpt", required=True, help="checkpoint file (resumed from if present)")
    ap.add_argument("--every", type=int, default=10, help="steps between checkpoints")
    ap.add_argument("--kill-after", type=int, default=0, help="SIGKILL self after this step")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--out", help="write the final weights here")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # bit-for-bit equal weights across runs
    ds = sluice.torch.IterableDataset(None if args.local else args.dispatcher, args.spec,
                                      data_root=args.data_root, threads=1)
    model = opt = None
    step = 0
    if os.path.exists(args.ckpt):
        ck = torch.load(args.ckpt, weights_only=False)
        ds.load_state_dict(ck["loader"])
        step = ck["step"]
        print("resumed at step %d (epoch %d)" % (step, ck["loader"]["epoch"]), flush=True)
    else:
        ck = None
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for images, labels in loader:
        x = images.reshape(images.shape[0], -1).float()
        if model is None:
            model = torch.nn.Linear(x.shape[1], args.classes)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            if ck is not None:
                model.load_state_dict(ck["model"])
                opt.load_state_dict(ck["opt"])
        loss = torch.nn.functional.cross_entropy(model(x / 255.0), labels % args.classes)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if args.every > 0 and step % args.every == 0:
            save_atomically({"model": model.state_dict(), "opt": opt.state_dict(),
                             "loader": ds.state_dict(), "step": step}, args.ckpt)
            print("step %d: checkpoint (loss %.4f)" % (step, loss.item()), flush=True)
        if args.kill_after and step == args.kill_after:
            print("step %d: killed" % step, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    print("done at step %d" % step, flush=True)
    if args.out:
        torch.save({"model": model.state_dict() if model else None, "step": step}, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Trains examples/packed/model.py's tiny transformer on packed batches of a
Sluice job: LLaVA-style conversations with images through a chat template
that emits labels (the assistant's tokens only), each batch one packed
sequence with a block-diagonal causal mask (CPU).

    scripts/make-dataset --multimodal --out data --samples 64 --size-scale 0.1
    scripts/tokenizer-files data/tokenizers
    examples/packed/make_chat.py data
    examples/packed/train.py --data-root data --steps 20

The spec (examples/packed/spec.json) uses packed batching: each batch is one
pack of whole samples within the token budget (docs/records.md "Packed
batching"), and batch["pack"] carries the loss-normalisation counts.
--dispatcher HOST:PORT runs the job on a Sluice cluster instead of locally.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as packed  # noqa: E402

import sluice.torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=os.path.join(os.path.dirname(__file__), "spec.json"))
    ap.add_argument("--data-root", default=".")
    ap.add_argument("--dispatcher", default=None)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--image-token", type=int, default=100258)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = packed.TinyLM(a.image_token)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ds = sluice.torch.IterableDataset(a.dispatcher, a.spec, data_root=a.data_root, epochs=1000,
                                      device="cpu")
    step = 0
    for batch in torch.utils.data.DataLoader(ds, batch_size=None):
        loss = packed.packed_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        print("step %d loss %.4f (%d samples, %d tokens, longest %d, %d trained)" % (
            step, loss.item(), len(batch["keys"]), int(batch["cu_seqlens_i32"][-1]),
            batch["max_seqlen"], int((batch["label_ids"] != packed.IGNORE).sum())), flush=True)
        if step == a.steps:
            break
    print("trained %d steps" % step)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""A short PyTorch consumer of a multimodal Sluice job (LLaVA-style records).

Each batch is a dict of tensors (sluice.torch): the template's token
sequences concatenated (input_ids) with cu_seqlens offsets, every image tile
of the batch as one [n_tiles, 3, tile, tile] tensor normalized on the device,
and per-image tile counts. A toy model embeds the tokens, encodes the tiles
with one convolution, pools both per sample and regresses the label -- just
enough to show the shapes a real vision-language model takes.

    scripts/make-dataset --multimodal --out data --size-scale 0.5
    scripts/tokenizer-files data/tokenizers
    examples/multimodal/train.py --spec examples/multimodal/multimodal.json --data-root data

--dispatcher HOST:PORT runs the job on a Sluice cluster instead of locally.
"""

import argparse

import torch
import torch.utils.data

import sluice.torch


class Toy(torch.nn.Module):
    def __init__(self, vocab=200064, dim=32):
        super().__init__()
        self.embed = torch.nn.EmbeddingBag(vocab, dim, mode="mean")
        self.vision = torch.nn.Conv2d(3, dim, kernel_size=8, stride=8)
        self.head = torch.nn.Linear(2 * dim, 1)

    def forward(self, input_ids, cu_seqlens, tiles, tile_offsets):
        text = self.embed(input_ids, cu_seqlens[:-1])  # one bag per sample
        n = cu_seqlens.numel() - 1
        vis = torch.zeros(n, text.shape[1])
        if tiles is not None and tiles.shape[0] > 0:
            per_tile = self.vision(tiles).mean(dim=(2, 3))  # [n_tiles, dim]
            owner = torch.repeat_interleave(torch.arange(n), tile_offsets.diff())
            vis = vis.index_add(0, owner, per_tile)
            counts = tile_offsets.diff().clamp(min=1).unsqueeze(1)
            vis = vis / counts
        return self.head(torch.cat([text, vis], dim=1)).squeeze(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--data-root", default=".")
    ap.add_argument("--dispatcher", default=None)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    ds = sluice.torch.IterableDataset(a.dispatcher, a.spec, data_root=a.data_root,
                                      epochs=a.epochs, device="cpu")
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    samples = steps = tiles = 0
    max_seq = 0
    for batch in torch.utils.data.DataLoader(ds, batch_size=None):
        pred = model(batch["input_ids"].long(), batch["cu_seqlens"], batch["tiles"],
                     batch["tile_offsets"])
        loss = torch.nn.functional.mse_loss(pred, batch["labels"].float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += len(batch["keys"])
        tiles += 0 if batch["tiles"] is None else batch["tiles"].shape[0]
        max_seq = max(max_seq, int(batch["seq_lens"].max()))
        steps += 1
    print("trained on %d samples in %d steps (%d tiles, longest sequence %d tokens)"
          % (samples, steps, tiles, max_seq))


if __name__ == "__main__":
    main()

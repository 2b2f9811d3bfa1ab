"""A tiny causal transformer that trains on packed batches of Sluice records.

A batch of records is one packed sequence: every sample's input_ids back to
back, cu_seqlens_i32 its boundaries, position_ids restarting at 0 per sample,
label_ids the template's labels (-100 on everything but the assistant's
tokens and never on image tokens). Attention must not cross samples, so the
mask is block-diagonal and causal, built from cu_seqlens -- what
flash_attn_varlen_func does without a mask. packed_loss and unpacked_loss
compute the same loss for the same samples; tests/integration/
test_packed_example.sh checks that they agree.

Plain PyTorch on the CPU (1.13 has no scaled_dot_product_attention: the
attention is written out; on 2.x F.scaled_dot_product_attention is used).
"""

import math

import torch
import torch.nn.functional as F

IGNORE = -100


def block_causal_mask(cu_seqlens):
    """[T, T] bool, True where query i may attend key j: same sample, j <= i."""
    cu = cu_seqlens.long()
    total = int(cu[-1])
    seg = torch.repeat_interleave(torch.arange(cu.numel() - 1), cu.diff())
    idx = torch.arange(total)
    return (seg[:, None] == seg[None, :]) & (idx[:, None] >= idx[None, :])


def attend(q, k, v, mask):
    """q, k, v [B, H, T, d]; mask [B, 1, T, T] bool (True: attend)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyLM(torch.nn.Module):
    """Token ids are hashed into `vocab` buckets (the real vocabulary's output
    layer would dwarf the model); each image tile's 2 x 2 patches become the
    tokens_per_tile = 4 image tokens' embeddings."""

    def __init__(self, image_token, vocab=4096, dim=64, heads=4, layers=2, tile=32,
                 max_pos=4096):
        super().__init__()
        self.image_token, self.vocab, self.tile = image_token, vocab, tile
        self.embed = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(max_pos, dim)
        self.patch = torch.nn.Linear(3 * (tile // 2) ** 2, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def patches(self, tiles):
        """[n_tiles, 3, t, t] -> [n_tiles * 4, dim]: one embedding per 2 x 2 patch."""
        n, h = tiles.shape[0], self.tile // 2
        p = tiles.float().reshape(n, 3, 2, h, 2, h).permute(0, 2, 4, 1, 3, 5)
        return self.patch(p.reshape(n * 4, 3 * h * h))

    def forward(self, ids, pos, mask, tiles=None):
        """ids, pos [B, T] int; mask [B, 1, T, T] bool; tiles in sample order:
        their patches go to the image tokens in order."""
        x = self.embed(ids.long() % self.vocab) + self.pos(pos.long())
        img = ids == self.image_token
        if tiles is not None and tiles.shape[0] > 0:
            x = x.masked_scatter(img.unsqueeze(-1), self.patches(tiles))
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.norm(x))


def _targets(labels, cu_seqlens, vocab):
    """Next-token targets inside each sample: labels are unshifted (as
    Hugging Face's), so position i learns labels[i + 1]; a sample's last
    position learns nothing (the next sample is not its continuation)."""
    t = torch.full_like(labels.long(), IGNORE)
    t[:-1] = labels[1:].long()
    t[cu_seqlens.long()[1:] - 1] = IGNORE
    return torch.where(t == IGNORE, t, t % vocab)


def _reduce(logits, tgt, per_token):
    loss = F.cross_entropy(logits, tgt, ignore_index=IGNORE, reduction="none")
    keep = tgt != IGNORE
    return loss[keep] if per_token else loss.sum() / keep.sum()


def packed_loss(model, batch, mask=None, position_ids=None, per_token=False):
    """Mean loss over the batch's trained tokens, computed on the packed
    sequence (per_token: each trained token's loss, in sample order).
    mask / position_ids override the batch's (to show that a wrong one
    changes the loss)."""
    cu = batch["cu_seqlens_i32"]
    m = block_causal_mask(cu) if mask is None else mask
    pos = batch["position_ids"] if position_ids is None else position_ids
    logits = model(batch["input_ids"][None], pos[None], m[None, None], batch.get("tiles"))[0]
    return _reduce(logits, _targets(batch["label_ids"], cu, model.vocab), per_token)


def unpacked_loss(model, batch, per_token=False):
    """The same samples one row each, right-padded to the longest, a causal
    mask that also hides the padding: the loss a trainer without packing
    computes."""
    cu = batch["cu_seqlens_i32"].long()
    n, longest = cu.numel() - 1, int(batch["max_seqlen"])
    ids = torch.zeros(n, longest, dtype=torch.long)
    labels = torch.full((n, longest), IGNORE, dtype=torch.long)
    valid = torch.zeros(n, longest, dtype=torch.bool)
    for i in range(n):
        a, b = int(cu[i]), int(cu[i + 1])
        ids[i, :b - a] = batch["input_ids"][a:b]
        labels[i, :b - a] = batch["label_ids"][a:b]
        valid[i, :b - a] = True
    pos = torch.arange(longest).expand(n, longest)
    causal = torch.tril(torch.ones(longest, longest, dtype=torch.bool))
    eye = torch.eye(longest, dtype=torch.bool)  # a padding query sees itself: no NaN
    mask = (causal[None] & valid[:, None, :]) | eye[None]
    # Padding must not take an image's patches: only real rows hold image tokens.
    ids = torch.where(valid, ids, torch.zeros_like(ids))
    logits = model(ids, pos, mask[:, None], batch.get("tiles"))
    tgt = torch.full_like(labels, IGNORE)
    tgt[:, :-1] = labels[:, 1:]
    tgt = torch.where(tgt == IGNORE, tgt, tgt % model.vocab)
    return _reduce(logits.reshape(-1, model.vocab), tgt.reshape(-1), per_token)

#!/usr/bin/env bash
# Trainable records (docs/records.md "Conversations, labels, max_seq_len") end
# to end: LLaVA-style conversations with images (scripts/make-dataset
# --multimodal, turned into chat.jsonl by examples/packed/make_chat.py)
# through examples/packed/spec.json (chat template with role markers, labels
# on the assistant's tokens, max_seq_len). The Python binding's ctypes
# struct matches sluice_records_t field for field; every batch's
# label_ids / position_ids / cu_seqlens_i32 / max_seqlen agree with
# input_ids and each other; examples/packed/model.py's loss over a batch
# packed (one sequence, block-diagonal causal mask, restarting positions)
# equals its loss over the same samples unpacked (padded rows) -- and a
# packed loss with a plain causal mask or with unbroken positions does not;
# the example trains; a too_long skip ("overflow": "skip") is counted in
# --json locally and through a dispatcher and a worker, and in /status.
source "$(dirname "$0")/lib.sh"

DATA="$TMP/data"
/usr/bin/python3 "$ROOT/scripts/make-dataset" --multimodal --out "$DATA" --samples 40 \
    --size-scale 0.1 --seed 7 --quiet
"$ROOT/scripts/tokenizer-files" "$DATA/tokenizers" >/dev/null
/usr/bin/python3 "$ROOT/examples/packed/make_chat.py" "$DATA" >/dev/null
SPEC="$ROOT/examples/packed/spec.json"
python_env

# ---- the ctypes struct is sluice_records_t
cat >"$TMP/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "client/lib/sluice.h"
#define F(f) printf("%s %zu %zu\n", #f, offsetof(sluice_records_t, f), \
                    sizeof(((sluice_records_t *)0)->f))
int main(void)
{
    F(n); F(tile_offsets); F(labels); F(position_ids); F(cu_seqlens_i32); F(max_seqlen);
    printf("size %zu 0\n", sizeof(sluice_records_t));
    return 0;
}
C
cc -I "$ROOT" -o "$TMP/layout" "$TMP/layout.c" || fail "layout.c does not build"
"$TMP/layout" >"$TMP/layout.c.txt"
"$PY" - "$TMP/layout.c.txt" <<'PY' || fail "sluice.RecordBatch's struct differs from sluice.h"
import ctypes, sys
import sluice
R = sluice._Records
for line in open(sys.argv[1]):
    name, off, size = line.split()
    if name == "size":
        assert ctypes.sizeof(R) == int(off), (ctypes.sizeof(R), off)
        continue
    f = getattr(R, name)
    assert (f.offset, f.size) == (int(off), int(size)), (name, f.offset, f.size, off, size)
print("layout: sluice_records_t and sluice._Records agree")
PY

# ---- batches: arrays consistent; packed loss == unpacked loss; wrong masks differ
"$PY" - "$SPEC" "$DATA" "$ROOT/examples/packed" <<'PY' || fail "packed batches"
import json, sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[3])
import model as packed
import sluice, sluice.torch

spec = json.load(open(sys.argv[1]))
tmpl = [s for s in spec["stages"] if s["op"] == "template"][0]
IMG, MAX, IGN = tmpl["image_token"], tmpl["max_seq_len"], tmpl["ignore_index"]
seen = trained = images = 0
with sluice.Loader(None, sys.argv[1], data_root=sys.argv[2], epochs=1, threads=2) as ld:
    for b in ld:
        n = len(b)
        assert b.cu_seqlens_i32.dtype == np.int32 and b.position_ids.dtype == np.int32
        assert b.label_ids.dtype == np.int32, b.label_ids.dtype
        assert (b.cu_seqlens_i32 == b.cu_seqlens).all()
        assert b.max_seqlen == int(b.seq_lens.max()) <= MAX, (b.max_seqlen, MAX)
        assert len(b.label_ids) == len(b.position_ids) == len(b.input_ids)
        for i in range(n):
            a, e = b.cu_seqlens[i], b.cu_seqlens[i + 1]
            ids, lab = b.input_ids[a:e], b.label_ids[a:e]
            assert (b.position_ids[a:e] == np.arange(e - a)).all()
            # Unshifted labels: the id itself where trained, else the ignore index.
            assert ((lab == IGN) | (lab == ids)).all(), b.keys[i]
            assert (lab[ids == IMG] == IGN).all(), "an image token is trained"
            # Images first, then the first turn (the human's) behind its marker.
            text = ids[ids != IMG]
            assert text[0] == 1502 and text[1] == 25, "not the user marker first"
            assert (ids[:len(ids) - len(text)] == IMG).all(), "images not first"
            trained += int((lab != IGN).sum())
            images += int((ids == IMG).sum())
        seen += n
assert seen == 40 and trained > 0 and images > 0, (seen, trained, images)

torch.manual_seed(0)
m = packed.TinyLM(IMG)
with torch.no_grad():  # sharper attention than at init: what a mask changes, shows
    for blk in m.blocks:
        blk.qkv.weight.mul_(8)
        blk.out.weight.mul_(4)
    m.pos.weight.mul_(4)
ds = sluice.torch.IterableDataset(None, sys.argv[1], data_root=sys.argv[2], epochs=1,
                                  device="cpu")
checked = 0
for batch in torch.utils.data.DataLoader(ds, batch_size=None):
    assert batch["cu_seqlens_i32"].dtype == torch.int32 and isinstance(batch["max_seqlen"], int)
    with torch.no_grad():
        p, u = packed.packed_loss(m, batch), packed.unpacked_loss(m, batch)
        assert torch.allclose(p, u, rtol=1e-5, atol=1e-5), (p.item(), u.item())
        pt = packed.packed_loss(m, batch, per_token=True)
        ut = packed.unpacked_loss(m, batch, per_token=True)
        assert pt.shape == ut.shape and (pt - ut).abs().max() < 1e-4, (pt - ut).abs().max()
        # Checks that can fail: attention across samples, positions not restarting --
        # some token's loss moves by over 100 times the tolerance above.
        total = int(batch["cu_seqlens_i32"][-1])
        causal = torch.tril(torch.ones(total, total, dtype=torch.bool))
        flat = torch.arange(total, dtype=torch.int32)
        wrong_mask = (packed.packed_loss(m, batch, mask=causal, per_token=True) - ut).abs().max()
        wrong_pos = (packed.packed_loss(m, batch, position_ids=flat, per_token=True)
                     - ut).abs().max()
        if len(batch["keys"]) < 2:
            continue  # a pack of one sample: every mask and position is the same
        assert wrong_mask > 1e-2, ("plain causal mask", wrong_mask.item())
        assert wrong_pos > 1e-2, ("unbroken positions", wrong_pos.item())
    checked += 1
    print("batch %d: packed %.6f unpacked %.6f; largest token loss change with a causal-only "
          "mask %.4f, with flat positions %.4f" % (checked, p.item(), u.item(),
                                                   wrong_mask.item(), wrong_pos.item()))
assert checked >= 5, checked
print("packed == unpacked on %d batches; %d samples, %d trained tokens" % (checked, seen, trained))
PY

# ---- the example trains
"$PY" "$ROOT/examples/packed/train.py" --data-root "$DATA" --steps 3 >"$TMP/train.out" ||
    fail "examples/packed/train.py failed"
grep -q '^trained 3 steps' "$TMP/train.out" || { cat "$TMP/train.out"; fail "train.py"; }

# ---- a bad template option: the spec is refused, exit 2, naming the field
bad() { # bad KEY VALUE WANT
    "$PY" - "$SPEC" "$TMP/bad.json" "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for st in s["stages"]:
    if st["op"] == "template":
        st[sys.argv[3]] = json.loads(sys.argv[4])
json.dump(s, open(sys.argv[2], "w"))
PY
    local rc=0
    "$BIN/sluice" run "$TMP/bad.json" --local --data-root "$DATA" --quiet         >/dev/null 2>"$TMP/bad.err" || rc=$?
    [ $rc -eq 2 ] || fail "template $1=$2: exit $rc, want 2"
    grep -qF "$3" "$TMP/bad.err" || { cat "$TMP/bad.err"; fail "template $1=$2: no '$3'"; }
}
bad chat '"<|im_start|>"' 'chat: must be true, false or an object'
bad max_seq_len 4 'max_seq_len: must be more than the template'
bad ignore_index 2147483648 'ignore_index: must be an integer'
bad train_on '"user"' 'train_on'
echo "bad template options: exit 2, the field named"

# ---- too_long skips counted: locally, through a worker, in /status
"$PY" - "$SPEC" "$TMP/skip.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for st in s["stages"]:
    if st["op"] == "template":
        st["max_seq_len"], st["overflow"] = 120, "skip"
json.dump(s, open(sys.argv[2], "w"))
PY
"$BIN/sluice" run "$TMP/skip.json" --local --data-root "$DATA" --quiet --json \
    >"$TMP/skip.local" || fail "local run of the skip spec"
start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --heartbeat-ms 100
start_daemon W "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$DATA" --threads 1
wait_live_workers "$D_HTTP" 1
"$BIN/sluice" run "$TMP/skip.json" --dispatcher "$D_GRPC" --data-root "$DATA" --quiet \
    --offload all --json >"$TMP/skip.remote" || fail "remote run of the skip spec"
curl -sf "http://$D_HTTP/status" >"$TMP/status.json" || fail "/status"
"$PY" - "$TMP" <<'PY' || fail "too_long skips"
import json, sys
def get(name):
    j = json.loads(open(sys.argv[1] + "/" + name).read().strip().splitlines()[-1])
    return j["samples"], j["skipped"]["reasons"]
d, r = get("skip.local")
rd, rr = get("skip.remote")
assert r.get("too_long", 0) > 0 and d > 0, (d, r)
assert (d, r) == (rd, rr), ("local and remote differ", d, r, rd, rr)
assert d + r["too_long"] == 40, (d, r)
assert "too_long" in open(sys.argv[1] + "/status.json").read(), "/status lacks too_long"
print("too_long: %d skipped, %d delivered, locally and remotely; /status shows it"
      % (r["too_long"], d))
PY
echo "packed example: ok"

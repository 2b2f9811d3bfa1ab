#!/usr/bin/env bash
# Resume from Python (docs/protocol.md "Resume"): sluice.Loader's state() /
# state_dict() / load_state_dict() / resume=, across a world-size change;
# broken states refused; and examples/resume/train_resume.py, killed with
# SIGKILL after a checkpoint and started again -- locally, and from a
# dispatcher whose workers and itself are killed too and replaced by fresh
# ones -- ends with weights bit-for-bit equal to an uninterrupted run's.
source "$(dirname "$0")/lib.sh"
python_env

make_images "$TMP/data" 4 24 # 96 samples
cat >"$TMP/det.json" <<'JSON'
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 3},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 16},
            {"op": "flip", "p": 0.5}, {"op": "to_chw"}],
 "batch_size": 8, "epochs": 2, "deterministic": true}
JSON

$PY - "$TMP/det.json" "$TMP/data" <<'EOF'
import sys
import numpy as np
import sluice

spec, root = sys.argv[1], sys.argv[2]

def take(loader, n):
    out = []
    for _ in range(n):
        b = loader.next_batch()
        if b is None:
            break
        out += [(b.epoch, int(i), np.asarray(x).tobytes()) for i, x in zip(b.indices, b.images)]
    return out

full = take(sluice.Loader(None, spec, data_root=root, threads=1), 10**6)
assert len(full) == 192, len(full)

# Two ranks stop at different batches; one rank takes the rest.
r0 = sluice.Loader(None, spec, data_root=root, threads=1, rank=0, world_size=2)
r1 = sluice.Loader(None, spec, data_root=root, threads=1, rank=1, world_size=2)
got = take(r0, 3) + take(r1, 7)
sd = [r0.state_dict(), r1.state_dict()]
assert all(len(s["sluice_states"][0]) < 4096 for s in sd), "a state is not small"
r0.close(); r1.close()
rest = sluice.Loader(None, spec, data_root=root, threads=1, resume=sd)
got += take(rest, 10**6)
assert sorted(got) == sorted(full), "2 -> 1 ranks: not the uninterrupted samples"
print("Loader: 2 ranks stopped at batches 3 and 7, resumed on 1: %d samples, each once"
      % len(got))

# load_state_dict restarts a running loader from a state.
a = sluice.Loader(None, spec, data_root=root, threads=1)
first = take(a, 5)
st = a.state()
take(a, 2)  # consumed after the state: delivered again after the restore
a.load_state_dict(st)
assert sorted(first + take(a, 10**6)) == sorted(full), "load_state_dict: not the same run"
print("Loader.load_state_dict: back to the saved position, the rest exactly once")

for bad, why in ((b"garbage", "not a sluice state"), ({"x": 1}, "sluice_states"),
                 (st.replace(b'"taken"', b'"takeN"'), "checksum")):
    try:
        sluice.Loader(None, spec, data_root=root, resume=bad)
    except sluice.SpecError as e:
        assert why in str(e), (why, str(e))
        print("refused:", e)
    else:
        raise AssertionError("a broken state was accepted: %r" % (bad[:20],))
EOF

train() { $PY "$ROOT/examples/resume/train_resume.py" --spec "$TMP/det.json" \
    --data-root "$TMP/data" --every 4 --classes 4 "$@"; }
train --local --ckpt "$TMP/full.ckpt" --out "$TMP/full.pt" >"$TMP/full.log" \
    || fail "uninterrupted training: $(tail -n 5 "$TMP/full.log")"
same_weights() {
    $PY -c "import sys, torch
a, b = torch.load(sys.argv[1])['model'], torch.load(sys.argv[2])['model']
sys.exit(0 if all(torch.equal(a[k], b[k]) for k in a) else 1)" "$TMP/full.pt" "$1"
}
RC=0
train --local --ckpt "$TMP/l.ckpt" --kill-after 11 >"$TMP/l1.log" 2>&1 || RC=$?
[ "$RC" -eq 137 ] || fail "the training process was not killed (exit $RC)"
train --local --ckpt "$TMP/l.ckpt" --out "$TMP/l.pt" >"$TMP/l2.log" \
    || fail "resumed training: $(tail -n 5 "$TMP/l2.log")"
grep -q "resumed at step 8" "$TMP/l2.log" || fail "did not resume from the step-8 checkpoint"
same_weights "$TMP/l.pt" || fail "local: resumed weights differ from the uninterrupted run's"
echo "train_resume.py --local: killed at step 11, resumed at 8: weights equal the uninterrupted run's"

start_cluster() {
    start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
        --split-size 6 --heartbeat-ms 100
    start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
    start_daemon W2 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
        --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
    wait_live_workers "$D_HTTP" 2
}
start_cluster
sed 's/"deterministic": true/"deterministic": true, "offload": "all"/' "$TMP/det.json" \
    >"$TMP/remote.json"
RC=0
$PY "$ROOT/examples/resume/train_resume.py" --spec "$TMP/remote.json" --data-root "$TMP/data" \
    --every 4 --classes 4 --dispatcher "$D_GRPC" --ckpt "$TMP/r.ckpt" --kill-after 15 \
    >"$TMP/r1.log" 2>&1 || RC=$?
[ "$RC" -eq 137 ] || fail "remote: the training process was not killed (exit $RC)"
kill -9 "$D_PID" "$W1_PID" "$W2_PID"
wait "$D_PID" "$W1_PID" "$W2_PID" 2>/dev/null || true
start_cluster # nothing of the first cluster survives
$PY "$ROOT/examples/resume/train_resume.py" --spec "$TMP/remote.json" --data-root "$TMP/data" \
    --every 4 --classes 4 --dispatcher "$D_GRPC" --ckpt "$TMP/r.ckpt" --out "$TMP/r.pt" \
    >"$TMP/r2.log" 2>&1 || fail "remote resumed training: $(tail -n 5 "$TMP/r2.log")"
grep -q "resumed at step 12" "$TMP/r2.log" || fail "remote: did not resume from step 12"
same_weights "$TMP/r.pt" || fail "remote: resumed weights differ from the uninterrupted run's"
echo "train_resume.py on a cluster: killed at 15 with the cluster, resumed at 12 on a new one:" \
    "weights equal the uninterrupted run's"

# ---- torch.distributed: each rank's state_dict() holds every rank's state
# (gathered with gloo), so rank 1's checkpoint alone resumes the job on one
# process: the two ranks' samples before plus the resumed ones = the epochs.
# (a file, not stdin: torch.multiprocessing's spawn imports the script)
cat >"$TMP/dist.py" <<'EOF2'
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
import sluice.torch

spec, root, tmp = sys.argv[1:]

def rank_main(r, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=r, world_size=2)
    ds = sluice.torch.IterableDataset(None, spec, data_root=root, threads=1, rank=r,
                                      world_size=2)
    seen = []
    it = iter(ds)
    for _ in range(3 + 2 * r):  # the ranks stop at different steps
        images, labels = next(it)
        seen.append(images.clone())
    dist.barrier()
    sd = ds.state_dict()  # collective: both ranks call it
    assert len(sd["sluice_states"]) == 2, sd
    torch.save({"sd": sd, "seen": seen}, os.path.join(tmp, "dist%d.pt" % r))
    dist.destroy_process_group()

if __name__ == "__main__":
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(rank_main, args=(port,), nprocs=2, join=True)
    before = []
    for r in (0, 1):
        before += torch.load(os.path.join(tmp, "dist%d.pt" % r))["seen"]
    ds = sluice.torch.IterableDataset(None, spec, data_root=root, threads=1)
    ds.load_state_dict(torch.load(os.path.join(tmp, "dist1.pt"))["sd"])
    after = [x.clone() for x, _ in ds]
    full = [x.clone() for x, _ in sluice.torch.IterableDataset(None, spec, data_root=root,
                                                               threads=1)]
    key = lambda t: t.numpy().tobytes()
    got = sorted(key(s) for b in before + after for s in b)
    want = sorted(key(s) for b in full for s in b)
    assert got == want, (len(got), len(want))
    print("torch.distributed (gloo, 2 ranks stopped at 3 and 5 batches): rank 1's state_dict "
          "alone resumed on 1 process: %d samples, each once" % len(got))
EOF2
$PY "$TMP/dist.py" "$TMP/det.json" "$TMP/data" "$TMP" || fail "torch.distributed resume"

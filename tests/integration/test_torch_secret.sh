#!/usr/bin/env bash
# Multi-rank jobs on a cluster without a token (issue 38 item 5): under an
# initialized torch.distributed group (gloo on loopback, two spawned ranks)
# rank 0 draws the job's secret and broadcasts it, so the ranks share one and
# a third process that knows the job's name but not the secret is refused;
# under torchrun (TORCHELASTIC_RUN_ID) the run id keys it. Without either,
# the client (CLI and Python) warns, the dispatcher logs it and /status
# shows "secret": false for the job.
source "$(dirname "$0")/lib.sh"
python_env

make_images "$TMP/data" 2 20 # 40 samples: 20 per rank per epoch
write_train_spec "$TMP/spec.json" 2
unset SLUICE_JOB_SECRET TORCHELASTIC_RUN_ID

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 4 --heartbeat-ms 100 --worker-timeout-ms 1500
start_daemon W1 "$BIN/sluice-worker" --dispatcher "$D_GRPC" --listen 127.0.0.1:0 \
    --http 127.0.0.1:0 --data-root "$TMP/data" --threads 1
wait_live_workers "$D_HTTP" 1

# status_secrets NAME: the "secret" field of every /status job of that name.
status_secrets() {
    curl -sf "http://$D_HTTP/status" | "$PY" -c '
import json, sys
print(" ".join(str(j["secret"]).lower() for j in json.load(sys.stdin)["jobs"]
               if (j.get("rank") or {}).get("job_name") == sys.argv[1]))' "$1"
}

# ---- torch.distributed: two ranks, a shared secret, an intruder refused.
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0));
print(s.getsockname()[1])')
cat >"$TMP/third.py" <<'PY'
import sys, warnings
import sluice
try:
    l = sluice.Loader(sys.argv[1], sys.argv[2], data_root=sys.argv[3], rank=1, world_size=2,
                      job_name="dist-job", epochs=1, threads=1)
except sluice.SluiceError as e:
    print("refused:", e)
    sys.exit(0)
print("joined")
sys.exit(1)
PY
# A file, not stdin: torch.multiprocessing.spawn re-imports the main module.
cat >"$TMP/dist.py" <<'PY'
import os, subprocess, sys, warnings
import torch.distributed as dist
import torch.multiprocessing as mp

disp, spec, root, port, tmp, http = sys.argv[1:7]

def rank_main(rank):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % port, rank=rank,
                            world_size=2)
    import sluice.torch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = sluice.torch.IterableDataset(disp, spec, data_root=root, rank=rank, world_size=2,
                                          job_name="dist-job", epochs=1, threads=1)
        it = iter(ds)
        n = len(next(it)[1])
    assert not [w for w in caught if "no secret" in str(w.message)], [str(w.message) for w in caught]
    secret = ds.loader_kwargs["job_secret"]
    assert secret and len(secret) >= 16, secret
    both = [None, None]
    dist.all_gather_object(both, secret)
    assert both[0] == both[1], "the ranks do not share a secret"
    if rank == 0:
        # Both parts are open: a third process with the name but no secret.
        r = subprocess.run([sys.executable, os.path.join(tmp, "third.py"), disp, spec, root],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "job_secret" in r.stdout, (r.returncode, r.stdout, r.stderr)
        st = subprocess.run(["curl", "-sf", "http://%s/status" % http], capture_output=True,
                            text=True).stdout
        open(os.path.join(tmp, "dist.status"), "w").write(st)
        print("third process:", r.stdout.strip())
    dist.barrier()
    for _, labels in it:
        n += len(labels)
    assert n == 20, n  # the rank's share of one epoch
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(rank_main, nprocs=2, join=True)
    print("torch.distributed: 2 ranks shared rank 0's secret; the third process was refused")
PY
timeout 300 "$PY" "$TMP/dist.py" "$D_GRPC" "$TMP/spec.json" "$TMP/data" "$port" "$TMP" \
    "$D_HTTP" || fail "torch.distributed ranks"
"$PY" - "$TMP/dist.status" <<'PY' || fail "/status: the torch.distributed job's parts"
import json, sys
jobs = [j for j in json.load(open(sys.argv[1]))["jobs"]
        if (j.get("rank") or {}).get("job_name") == "dist-job"]
assert len(jobs) == 2 and all(j["secret"] is True for j in jobs), jobs
PY
! grep -q '"dist-job" has no secret' "$TMP/D.err" || fail "the dispatcher warned about dist-job"
echo "/status: both parts of dist-job have \"secret\": true"

# ---- torchrun's run id: the ranks derive alike, no warning.
for r in 0 1; do
    TORCHELASTIC_RUN_ID=run-7f3a9c "$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" \
        --data-root "$TMP/data" --threads 1 --epochs 1 --rank $r --world-size 2 \
        --job-name elastic-job --quiet --digests "$TMP/el$r" 2>"$TMP/el$r.err" &
    eval "el$r=\$!"
done
wait "$el0" || { cat "$TMP/el0.err"; fail "torchrun rank 0"; }
wait "$el1" || { cat "$TMP/el1.err"; fail "torchrun rank 1"; }
! grep -q "no secret" "$TMP/el0.err" "$TMP/el1.err" || fail "torchrun ranks warned"
! grep -q '"elastic-job" has no secret' "$TMP/D.err" || fail "the dispatcher warned about elastic-job"
[ "$(cat "$TMP/el0" "$TMP/el1" | wc -l)" -eq 40 ] || fail "torchrun ranks: not 40 samples"
echo "torchrun: the run id keys the secret (no warning)"

# ---- no secret at all: the CLI and Python warn, the dispatcher logs, /status.
"$BIN/sluice" run "$TMP/spec.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
    --threads 1 --epochs 1 --rank 0 --world-size 2 --job-name open-job --max-rate 20 --quiet \
    2>"$TMP/open0.err" &
open0=$!
PIDS+=("$open0")
# /status is read while the job runs, from before rank 1 starts: on a loaded
# machine rank 0 could be done by the time rank 1's Python had finished.
(while true; do
    v=$(status_secrets open-job || true)
    [ -n "$v" ] && echo "$v" >"$TMP/open.secrets"
    [ "$(wc -w <<<"$v")" -ge 2 ] && break
    sleep 0.1
done) &
poll=$!
PIDS+=("$poll")
"$PY" - "$D_GRPC" "$TMP/spec.json" "$TMP/data" <<'PY' 2>"$TMP/open1.err" || fail "python rank 1"
import sys, warnings
import sluice
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    l = sluice.Loader(sys.argv[1], sys.argv[2], data_root=sys.argv[3], rank=1, world_size=2,
                      job_name="open-job", epochs=1, threads=1)
msgs = [str(w.message) for w in caught if issubclass(w.category, sluice.SluiceWarning)]
assert any("no secret" in m for m in msgs), msgs
print("python: " + msgs[0], file=sys.stderr)
n = sum(len(labels) for _, labels in l)
assert n == 20, n
PY
wait "$open0" || { cat "$TMP/open0.err"; fail "open-job rank 0"; }
kill "$poll" 2>/dev/null || true
wait "$poll" 2>/dev/null || true
secrets_open=$(cat "$TMP/open.secrets" 2>/dev/null || true)
grep -q "sluice run: warning: this multi-rank job has no secret" "$TMP/open0.err" ||
    { cat "$TMP/open0.err"; fail "the CLI did not warn"; }
grep -q "no secret" "$TMP/open1.err" || fail "Python did not warn"
[ "$(grep -c '"open-job" has no secret' "$TMP/D.err")" -eq 2 ] ||
    { cat "$TMP/D.err"; fail "the dispatcher did not warn once per rank"; }
case " $secrets_open " in *" true "*|"  ") fail "/status: open-job secret: '$secrets_open'" ;; esac
echo "no secret: CLI and Python warn, dispatcher logs it, /status \"secret\": $secrets_open"
echo "PASS"

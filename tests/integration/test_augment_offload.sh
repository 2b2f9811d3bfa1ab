#!/usr/bin/env bash
# The augmentation ops run on workers: a spec using most of them gives the
# same --digests locally and through a dispatcher + worker, with every
# stage on the worker (offload all) and with the split in the middle of the
# augmentations (some units on the worker, the rest on the client), over
# two epochs (the draws differ per epoch, and agree across hosts).
source "$(dirname "$0")/lib.sh"

make_images "$TMP/data" 2 12
cat >"$TMP/aug.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 11},
 "stages": [{"op": "decode_jpeg"}, {"op": "random_resized_crop", "size": 64},
            {"op": "color_jitter", "brightness": 0.4, "contrast": 0.4, "saturation": 0.4,
             "hue": 0.1},
            {"op": "random_grayscale", "p": 0.3},
            {"op": "gaussian_blur", "kernel_size": 7},
            {"op": "random_affine", "degrees": 15, "translate": [0.1, 0.1],
             "interpolation": "bilinear", "fill": [124, 116, 104]},
            {"op": "trivial_augment_wide"},
            {"op": "rand_augment", "num_ops": 2, "magnitude": 12},
            {"op": "solarize", "threshold": 160}, {"op": "equalize", "p": 0.3},
            {"op": "random_erasing", "p": 0.5, "value": "random"},
            {"op": "normalize"}, {"op": "to_chw"}],
 "batch_size": 8, "epochs": 2}
JSON

"$BIN/sluice" run "$TMP/aug.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/local"
sort "$TMP/local" >"$TMP/local.s"
[ "$(wc -l <"$TMP/local.s")" -eq 48 ] || fail "local run: expected 48 digests"
# Two epochs of the same images draw differently.
e0=$(awk '$1 == 0 {print $2, $4}' "$TMP/local.s" | sort)
e1=$(awk '$1 == 1 {print $2, $4}' "$TMP/local.s" | sort)
[ "$e0" != "$e1" ] || fail "epochs 0 and 1 gave identical samples"

start_daemon D "$BIN/sluice-dispatcher" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
    --split-size 8 --worker-timeout-ms 1500 --heartbeat-ms 100 --client-timeout-ms 2000
start_daemon W1 "$BIN/sluice-worker" --http 127.0.0.1:0 --dispatcher "$D_GRPC" \
    --listen 127.0.0.1:0 --data-root "$TMP/data" --threads 1
wait_live_workers "$D_HTTP" 1

for offload in all 6:0; do
    name=${offload/:/_}
    "$BIN/sluice" run "$TMP/aug.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" --quiet \
        --threads 1 --offload "$offload" --digests "$TMP/$name" --json >"$TMP/$name.json" ||
        fail "offload $offload: the run failed"
    sort "$TMP/$name" >"$TMP/$name.s"
    cmp -s "$TMP/$name.s" "$TMP/local.s" ||
        { diff "$TMP/$name.s" "$TMP/local.s" | head >&2; fail "offload $offload: digests differ from --local"; }
    grep -q '"local":0,' "$TMP/$name.json" || fail "offload $offload: samples ran locally"
    echo "offload $offload: 48 digests identical to --local"
done

# The recipe ops of issue #38 (vertical_flip, a padded random_crop, a
# bicubic (unfused) crop, random_apply / random_choice, random_erasing after
# normalize): the same bytes on a worker, split anywhere.
cat >"$TMP/recipes.json" <<JSON
{"source": {"type": "imagefolder", "path": "train", "shuffle": true, "seed": 12},
 "stages": [{"op": "decode_jpeg"},
            {"op": "random_resized_crop", "size": 40, "interpolation": "bicubic"},
            {"op": "random_crop", "size": 36, "padding": 4, "padding_mode": "reflect"},
            {"op": "vertical_flip"},
            {"op": "random_apply", "p": 0.8, "ops": [{"op": "color_jitter", "brightness": 0.4,
             "hue": 0.1}, {"op": "random_grayscale", "p": 0.5}]},
            {"op": "random_choice", "ops": [{"op": "solarize", "threshold": 128},
             {"op": "posterize", "bits": 3}, {"op": "gaussian_blur", "kernel_size": 3}],
             "p": [1, 2, 1]},
            {"op": "resize", "size": 32, "interpolation": "nearest"},
            {"op": "normalize"}, {"op": "to_chw"},
            {"op": "random_erasing", "p": 0.7, "value": "random"}],
 "batch_size": 8, "epochs": 2}
JSON
"$BIN/sluice" run "$TMP/recipes.json" --local --data-root "$TMP/data" --quiet --threads 2 \
    --digests "$TMP/rlocal" || fail "recipes: the local run failed"
sort "$TMP/rlocal" >"$TMP/rlocal.s"
[ "$(wc -l <"$TMP/rlocal.s")" -eq 48 ] || fail "recipes: expected 48 digests"
for offload in all 4:0; do
    name=r${offload/:/_}
    "$BIN/sluice" run "$TMP/recipes.json" --dispatcher "$D_GRPC" --data-root "$TMP/data" \
        --quiet --threads 1 --offload "$offload" --digests "$TMP/$name" ||
        fail "recipes, offload $offload: the run failed"
    sort "$TMP/$name" >"$TMP/$name.s"
    cmp -s "$TMP/$name.s" "$TMP/rlocal.s" ||
        { diff "$TMP/$name.s" "$TMP/rlocal.s" | head >&2; fail "recipes, offload $offload: digests differ from --local"; }
    echo "recipes, offload $offload: 48 digests identical to --local"
done

kill "$W1_PID" "$D_PID"
wait "$W1_PID" "$D_PID" 2>/dev/null || true
echo "PASS: augmentations give the same bytes locally and on a worker"

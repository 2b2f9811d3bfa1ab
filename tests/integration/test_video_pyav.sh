#!/usr/bin/env bash
# decode_video's frames equal PyAV's (Debian's python3-av, the oracle):
# clips made here by Debian's ffmpeg (H.264 with B-frames, BT.709-tagged
# H.264, VP9 in WebM, HEVC, AV1, variable frame rate, full range, 4:4:4 at
# an odd size), each asked for uniform frames (round(linspace)), a random offset,
# fps sampling with and without an offset, and a scaled output; the frames
# tests/tools/video_frames returns (common/video/video.h, keyframe jumps
# included) are byte-equal to PyAV's to_ndarray(format='rgb24') of the same
# frames after decoding every frame.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/video_clips.sh"
TOOL="$ROOT/$BUILD/tools/video_frames"
ORACLE="$ROOT/tests/integration/video_oracle.py"
make_clips "$TMP/clips"
n=0
jumps=0
for clip in h264.mp4 bt709.mp4 vp9.webm hevc.mp4 av1.mkv vfr.mkv full.mkv odd.mkv; do
    for req in "uniform 8" "uniform 5 0.3" "uniform 16" "fps 2 10" "fps 3 4 0.7" \
        "uniform 3 -1 100 150"; do
        # shellcheck disable=SC2086
        "$TOOL" "$TMP/clips/$clip" "$TMP/ours.raw" $req >"$TMP/ours.txt" ||
            fail "$clip $req: video_frames failed: $(cat "$TMP/ours.txt")"
        # shellcheck disable=SC2086
        /usr/bin/python3 "$ORACLE" "$TMP/clips/$clip" "$TMP/pyav.raw" $req >"$TMP/pyav.txt" ||
            fail "$clip $req: the oracle failed"
        read -r _ nf fh fw _ <"$TMP/ours.txt"
        read -r _ pnf pfh pfw _ <"$TMP/pyav.txt"
        [ "$nf $fh $fw" = "$pnf $pfh $pfw" ] ||
            fail "$clip $req: $nf frames of ${fh}x$fw, PyAV $pnf of ${pfh}x$pfw"
        cmp -s "$TMP/ours.raw" "$TMP/pyav.raw" ||
            fail "$clip $req: frames differ from PyAV's ($(cat "$TMP/ours.txt"))"
        s=$(sed -n 's/.* seeks \([0-9]*\) .*/\1/p' "$TMP/ours.txt")
        jumps=$((jumps + s))
        n=$((n + 1))
    done
done
# Some requests must have jumped to a keyframe: otherwise the test never
# compared a frame reached that way.
[ "$jumps" -gt 10 ] || fail "only $jumps keyframe jumps in $n requests"
echo "video: $n requests over 8 clips byte-equal to PyAV ($jumps keyframe jumps)"

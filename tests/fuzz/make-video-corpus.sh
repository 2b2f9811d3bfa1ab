#!/usr/bin/env bash
# Regenerates the video seed corpus (tests/fuzz/corpus/video/: committed;
# run this only to change the seeds) with Debian's ffmpeg: tiny clips of
# every codec and container decode_video reads, B-frames and short GOPs so
# the keyframe jumps run. tests/unit/test_video.c decodes them too.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/video
mkdir -p "$out"
src=(-f lavfi -i "testsrc2=size=64x48:rate=12:duration=1")
ff() { ffmpeg -v error -y -bitexact "$@"; }
ff "${src[@]}" -c:v libx264 -bf 2 -g 4 -pix_fmt yuv420p -fflags +bitexact "$out/h264.mp4"
ff -f lavfi -i "testsrc2=size=66x50:rate=10:duration=1" -c:v libvpx-vp9 -g 4 -b:v 100k \
    "$out/vp9.webm"
ff "${src[@]}" -c:v libx265 -x265-params log-level=error:bframes=2:keyint=4 "$out/hevc.mkv"
ff "${src[@]}" -c:v libaom-av1 -cpu-used 8 -g 4 "$out/av1.mkv"
find "$out" -type f | sort | while read -r f; do
    printf '  %-40s %6d bytes\n' "$f" "$(stat -c %s "$f")"
done

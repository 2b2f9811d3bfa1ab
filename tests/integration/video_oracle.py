#!/usr/bin/python3
"""PyAV's frames of a clip at the indices decode_video picks, for
tests/integration/test_video_pyav.sh and scripts/bench-video.

  video_oracle.py CLIP OUT.raw uniform FRAMES [OFFSET [OUT_H OUT_W]]
  video_oracle.py CLIP OUT.raw fps FPS MAX_FRAMES [OFFSET [OUT_H OUT_W]]

Decodes every frame (PyAV's container.decode, as a DataLoader would), picks
the frames by the documented rules (docs/reference/spec.md "decode_video"),
converts each with to_ndarray(format='rgb24') -- the stream's YUV matrix
given as src_colorspace -- and writes them stacked to OUT.raw. Prints
"frames N FH FW clip TOTAL"."""
import math
import subprocess
import sys

import av
import av.logging
import numpy as np

# PyAV 10's Colorspace names by ffprobe's color_space (PyAV 10's frames do
# not say theirs: ffprobe reads it from the stream).
MATRIX = {"bt709": "ITU709", "fcc": "FCC", "bt470bg": "ITU601", "smpte170m": "SMPTE170M",
          "smpte240m": "SMPTE240M"}


def stream_matrix(clip):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=color_space", "-of", "csv=p=0", clip],
                         capture_output=True, text=True, check=True).stdout.strip()
    return MATRIX.get(out.split(",")[0])


def pick(n, times, args):
    mode = args[0]
    if mode == "uniform":
        k = int(args[1])
        off = float(args[2]) if len(args) > 2 else -1
        if off >= 0:
            return [min(n - 1, int(math.floor((i + off) * n / k))) for i in range(k)]
        return [int(v) for v in np.round(np.linspace(0, n - 1, k))]
    fps, cap = float(args[1]), int(args[2])
    off = float(args[3]) if len(args) > 3 and float(args[3]) >= 0 else 0.0
    out, f, k = [], 0, 0
    while len(out) < cap:
        at = (k + off) / fps
        if at > times[-1] + 1e-9:
            break
        while f + 1 < n and times[f + 1] <= at + 1e-9:
            f += 1
        out.append(f)
        k += 1
    return out


def main():
    av.logging.set_level(av.logging.ERROR)
    clip, out_path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    nsize = 3 if args[0] == "uniform" else 4
    size = (int(args[nsize]), int(args[nsize + 1])) if len(args) > nsize + 1 else (0, 0)
    with av.open(clip) as c:
        st = c.streams.video[0]
        frames = list(c.decode(st))
        tb = st.time_base
    frames.sort(key=lambda f: f.pts)
    times = [float((f.pts - frames[0].pts) * tb) for f in frames]
    idx = pick(len(frames), times, args[:nsize])
    arrays = []
    cs = stream_matrix(clip)
    for i in idx:
        f = frames[i]
        kw = {"format": "rgb24"}
        if cs is not None:
            kw["src_colorspace"] = cs
        if size != (0, 0):
            kw["height"], kw["width"] = size
            kw["interpolation"] = "BILINEAR"
        arrays.append(f.to_ndarray(**kw))
    data = np.concatenate(arrays, axis=0)
    data.tofile(out_path)
    print("frames %d %d %d clip %d" % (len(idx), arrays[0].shape[0], arrays[0].shape[1],
                                          len(frames)))


if __name__ == "__main__":
    main()

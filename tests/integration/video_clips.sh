# Clips for the video tests, made with Debian's ffmpeg (sourced by
# test_video_pyav.sh and test_video.sh): make_clips DIR writes
#   h264.mp4    H.264, 3 B-frames, GOP 30, 320x240 25 fps, 4 s
#   bt709.mp4   H.264 tagged BT.709 (the matrix the conversion must use), 640x360
#   vp9.webm    VP9 in WebM, asked 321x243 (testsrc2 makes 320x242), 3 s
#   hevc.mp4    HEVC (libx265), B-frames, GOP 20, 352x288
#   av1.mkv     AV1 (libaom) in Matroska, 250x150
#   vfr.mkv     H.264 with variable frame rate (jittered timestamps)
#   full.mkv    H.264 yuvj420p (full range)
#   odd.mkv     H.264 4:4:4 at an odd size, 321x243
make_clips() {
    local d=$1
    mkdir -p "$d"
    local ff=(ffmpeg -v error -y -nostdin)
    "${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=25:duration=4 -c:v libx264 -bf 3 -g 30 \
        -pix_fmt yuv420p "$d/h264.mp4"
    "${ff[@]}" -f lavfi -i testsrc2=size=640x360:rate=24:duration=2 -c:v libx264 -bf 2 \
        -pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 -color_trc bt709 "$d/bt709.mp4"
    "${ff[@]}" -f lavfi -i testsrc2=size=321x243:rate=30:duration=3 -c:v libvpx-vp9 -g 40 \
        -b:v 300k "$d/vp9.webm"
    "${ff[@]}" -f lavfi -i testsrc2=size=352x288:rate=25:duration=2 -c:v libx265 \
        -x265-params log-level=error:bframes=3:keyint=20 "$d/hevc.mp4"
    "${ff[@]}" -f lavfi -i testsrc2=size=250x150:rate=25:duration=2 -c:v libaom-av1 \
        -cpu-used 8 -g 20 "$d/av1.mkv"
    "${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=30:duration=3 \
        -vf "setpts='PTS+0.05*sin(N)/TB'" -c:v libx264 -bf 3 -fps_mode vfr "$d/vfr.mkv"
    "${ff[@]}" -f lavfi -i testsrc2=size=176x144:rate=25:duration=2 -c:v libx264 \
        -pix_fmt yuvj420p "$d/full.mkv" 2>/dev/null
    "${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=25:duration=2 -vf scale=321:243 \
        -c:v libx264 -bf 2 -g 12 -pix_fmt yuv444p "$d/odd.mkv"
}

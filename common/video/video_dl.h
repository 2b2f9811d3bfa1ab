/* video_dl: FFmpeg's libraries loaded on first use (dlopen), not linked.
 * A process that never decodes a clip -- every image job, the CLI, the
 * plugin host -- loads none of them (libavcodec alone pulls in some 80
 * codec libraries), and the Python wheel, which bundles what libsluice
 * links, stays as it was: decode_video there uses the system's FFmpeg.
 * The sonames are the major versions of the headers built against, so the
 * ABI is the one compiled for. Every FFmpeg function the video module
 * calls is listed once below and, after this header, its name means the
 * loaded pointer. Any thread: the table is filled once (pthread_once) and
 * never written again. Not a public API. */
#ifndef SL_VIDEO_DL_H
#define SL_VIDEO_DL_H

#include <stddef.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

/* X(library, function): every function used, by the library that has it. */
#define SL_VDL_FUNCS(X)                                                                            \
    X(avutil, av_frame_alloc)                                                                      \
    X(avutil, av_frame_free)                                                                       \
    X(avutil, av_frame_unref)                                                                      \
    X(avutil, av_free)                                                                             \
    X(avutil, av_freep)                                                                            \
    X(avutil, av_get_pix_fmt_name)                                                                 \
    X(avutil, av_image_alloc)                                                                      \
    X(avutil, av_log_set_level)                                                                    \
    X(avutil, av_malloc)                                                                           \
    X(avutil, av_strdup)                                                                           \
    X(avutil, av_strerror)                                                                         \
    X(avcodec, av_packet_alloc)                                                                    \
    X(avcodec, av_packet_free)                                                                     \
    X(avcodec, av_packet_move_ref)                                                                 \
    X(avcodec, av_packet_unref)                                                                    \
    X(avcodec, avcodec_alloc_context3)                                                             \
    X(avcodec, avcodec_find_decoder)                                                               \
    X(avcodec, avcodec_flush_buffers)                                                              \
    X(avcodec, avcodec_free_context)                                                               \
    X(avcodec, avcodec_get_name)                                                                   \
    X(avcodec, avcodec_open2)                                                                      \
    X(avcodec, avcodec_parameters_to_context)                                                      \
    X(avcodec, avcodec_receive_frame)                                                              \
    X(avcodec, avcodec_send_packet)                                                                \
    X(avformat, av_read_frame)                                                                     \
    X(avformat, avformat_alloc_context)                                                            \
    X(avformat, avformat_close_input)                                                              \
    X(avformat, avformat_index_get_entries_count)                                                  \
    X(avformat, avformat_index_get_entry)                                                          \
    X(avformat, avformat_open_input)                                                               \
    X(avformat, avio_alloc_context)                                                                \
    X(avformat, avio_context_free)                                                                 \
    X(swscale, sws_freeContext)                                                                    \
    X(swscale, sws_getCachedContext)                                                               \
    X(swscale, sws_getCoefficients)                                                                \
    X(swscale, sws_getColorspaceDetails)                                                           \
    X(swscale, sws_scale)                                                                          \
    X(swscale, sws_setColorspaceDetails)

typedef struct sl_vdl_s {
#define SL_VDL_MEMBER(lib, fn) __typeof__(fn) *fn;
    SL_VDL_FUNCS(SL_VDL_MEMBER)
#undef SL_VDL_MEMBER
} sl_vdl_t;

/* Loads the libraries and every function (once per process). Returns 0,
 * or -EPROTONOSUPPORT with err naming what is missing (then every later
 * call says the same). */
int sl_vdl_load(char *err, size_t errlen);
/* The table; valid after sl_vdl_load returned 0. */
const sl_vdl_t *sl_vdl(void);

/* From here on a function's name is its loaded pointer (but in
 * video_dl.c, which fills the table). */
#ifndef SL_VDL_NO_REDIRECT
#define av_frame_alloc (sl_vdl()->av_frame_alloc)
#define av_frame_free (sl_vdl()->av_frame_free)
#define av_frame_unref (sl_vdl()->av_frame_unref)
#define av_free (sl_vdl()->av_free)
#define av_freep (sl_vdl()->av_freep)
#define av_get_pix_fmt_name (sl_vdl()->av_get_pix_fmt_name)
#define av_image_alloc (sl_vdl()->av_image_alloc)
#define av_log_set_level (sl_vdl()->av_log_set_level)
#define av_malloc (sl_vdl()->av_malloc)
#define av_strdup (sl_vdl()->av_strdup)
#define av_strerror (sl_vdl()->av_strerror)
#define av_packet_alloc (sl_vdl()->av_packet_alloc)
#define av_packet_free (sl_vdl()->av_packet_free)
#define av_packet_move_ref (sl_vdl()->av_packet_move_ref)
#define av_packet_unref (sl_vdl()->av_packet_unref)
#define avcodec_alloc_context3 (sl_vdl()->avcodec_alloc_context3)
#define avcodec_find_decoder (sl_vdl()->avcodec_find_decoder)
#define avcodec_flush_buffers (sl_vdl()->avcodec_flush_buffers)
#define avcodec_free_context (sl_vdl()->avcodec_free_context)
#define avcodec_get_name (sl_vdl()->avcodec_get_name)
#define avcodec_open2 (sl_vdl()->avcodec_open2)
#define avcodec_parameters_to_context (sl_vdl()->avcodec_parameters_to_context)
#define avcodec_receive_frame (sl_vdl()->avcodec_receive_frame)
#define avcodec_send_packet (sl_vdl()->avcodec_send_packet)
#define av_read_frame (sl_vdl()->av_read_frame)
#define avformat_alloc_context (sl_vdl()->avformat_alloc_context)
#define avformat_close_input (sl_vdl()->avformat_close_input)
#define avformat_index_get_entries_count (sl_vdl()->avformat_index_get_entries_count)
#define avformat_index_get_entry (sl_vdl()->avformat_index_get_entry)
#define avformat_open_input (sl_vdl()->avformat_open_input)
#define avio_alloc_context (sl_vdl()->avio_alloc_context)
#define avio_context_free (sl_vdl()->avio_context_free)
#define sws_freeContext (sl_vdl()->sws_freeContext)
#define sws_getCachedContext (sl_vdl()->sws_getCachedContext)
#define sws_getCoefficients (sl_vdl()->sws_getCoefficients)
#define sws_getColorspaceDetails (sl_vdl()->sws_getColorspaceDetails)
#define sws_scale (sl_vdl()->sws_scale)
#define sws_setColorspaceDetails (sl_vdl()->sws_setColorspaceDetails)
#endif

#endif

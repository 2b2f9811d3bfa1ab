/* rpc_pb: protobuf-c <-> grpc_byte_buffer, the version check, deadlines and
 * the library's init. All functions are thread-safe. */
#include "common/rpc/rpc_impl.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <string.h>

#include "common/base/err.h"

grpc_byte_buffer *sl_rpc_pb_pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    /* grpc_slice_malloc aborts on failure inside gpr_malloc, so there is no
     * NULL to check; packing writes straight into the slice (no copy). */
    grpc_slice s = grpc_slice_malloc(n);
    size_t done = protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    if (done != n) {
        grpc_slice_unref(s);
        return NULL;
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1); /* takes its own ref */
    grpc_slice_unref(s);
    return bb;
}

grpc_byte_buffer *sl_rpc_pb_raw(const void *bytes, size_t n)
{
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)bytes, n);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

ProtobufCMessage *sl_rpc_pb_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
    if (bb == NULL) {
        return NULL;
    }
    /* Fast path: an uncompressed buffer of one slice is unpacked in place,
     * saving a flat copy of what may be a 60 MB image batch. */
    if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE &&
        bb->data.raw.slice_buffer.count == 1) {
        grpc_slice s = bb->data.raw.slice_buffer.slices[0];
        return protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s),
                                         GRPC_SLICE_START_PTR(s));
    }
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb)) {
        return NULL; /* decompression failed */
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&r); /* one flat copy */
    grpc_byte_buffer_reader_destroy(&r);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    return m;
}

static const ProtobufCFieldDescriptor *version_field(const ProtobufCMessageDescriptor *desc)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, 1);
    if (f == NULL || f->type != PROTOBUF_C_TYPE_UINT32 ||
        (f->label != PROTOBUF_C_LABEL_NONE && f->label != PROTOBUF_C_LABEL_OPTIONAL &&
         f->label != PROTOBUF_C_LABEL_REQUIRED)) {
        return NULL;
    }
    return f;
}

int sl_rpc_pb_has_version(const ProtobufCMessageDescriptor *desc)
{
    return desc != NULL && version_field(desc) != NULL;
}

int sl_rpc_pb_check_version(const ProtobufCMessage *m, char *details, size_t len)
{
    const ProtobufCFieldDescriptor *f = version_field(m->descriptor);
    if (f == NULL) {
        return sl_err(details, len, -EPROTO, "message %s has no version field",
                      m->descriptor->name);
    }
    uint32_t v;
    memcpy(&v, (const char *)m + f->offset, sizeof(v));
    if (v != SL_PROTOCOL_VERSION) {
        return sl_err(details, len, -EPROTO, "protocol version %u, this server speaks %u",
                      (unsigned)v, (unsigned)SL_PROTOCOL_VERSION);
    }
    return 0;
}

gpr_timespec sl_rpc_deadline(int ms)
{
    if (ms <= 0) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

gpr_timespec sl_rpc_deadline_or_poll(int ms)
{
    if (ms < 0) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

void sl_rpc_init(void)
{
    grpc_init();
}

void sl_rpc_shutdown(void)
{
    grpc_shutdown();
}

/*
 * payload_header.c: the header of XNNPACK's and Vulkan's payloads (payload_header.h).
 * Both runtimes (XNNHeader.cpp, VulkanDelegateHeader.cpp) refuse a header shorter than
 * 30 bytes or whose extents reach past the payload or overlap.
 */
#include "backends/payload_header.h"

#include "fb/fb.h"

int payload_header_read(struct fb_ctx *c, const uint8_t *buf, uint64_t len, int code,
                        payload_header *h) {
    memset(h, 0, sizeof *h);
    fb_push(c, "header", FB_NO_INDEX);
    if (len < PAYLOAD_HEADER_LENGTH) return fb_fail(c, code, 0);
    h->length = fb_ld16(buf + 8);
    h->flatbuffer_offset = fb_ld32(buf + 10);
    h->flatbuffer_size = fb_ld32(buf + 14);
    h->constant_offset = fb_ld32(buf + 18);
    h->constant_size = fb_ld64(buf + 22);
    if (h->length < PAYLOAD_HEADER_LENGTH || h->length > len) return fb_fail(c, code, 8);
    /* 32-bit fields summed in 64 bits cannot overflow; the 64-bit size is compared
     * against what is left, never added. The flatbuffer needs its root offset and
     * identifier (8 bytes), which both runtimes read before verifying it. */
    if (h->flatbuffer_offset < h->length || h->flatbuffer_size < 8
        || h->flatbuffer_offset + h->flatbuffer_size > len)
        return fb_fail(c, code, 10);
    if (h->constant_offset < h->flatbuffer_offset + h->flatbuffer_size
        || h->constant_offset > len || h->constant_size > len - h->constant_offset)
        return fb_fail(c, code, 18);
    h->identifier = fb_ld32(buf + h->flatbuffer_offset + 4);
    fb_pop(c);
    return FB_OK;
}

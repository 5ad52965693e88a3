/*
 * payload_header.h: the header ExecuTorch's XNNPACK and Vulkan backends put before their
 * payload's flatbuffer (XNNPACK's `XH00`, Vulkan's `VH00`; both written by ExecuTorch
 * 1.5.1's *_graph_serialize.py): 4 bytes, the 4-byte magic, u16 header length (30),
 * u32 flatbuffer offset, u32 flatbuffer size, u32 constant data offset, u64 constant data
 * size, little-endian. Positions are byte offsets in the payload.
 */
#ifndef PAYLOAD_HEADER_H
#define PAYLOAD_HEADER_H

#include "fb/fb_common.h"

/* --- cdef begin --- */

typedef struct payload_header {
    uint32_t length;            /* header bytes; 0: none, the payload is all flatbuffer */
    uint32_t identifier;        /* the flatbuffer's file identifier */
    uint64_t flatbuffer_offset; /* the flatbuffer is [offset, offset + size) */
    uint64_t flatbuffer_size;
    uint64_t constant_offset;   /* the constant data: [offset, offset + size) */
    uint64_t constant_size;
} payload_header;

/* --- cdef end --- */

#define PAYLOAD_HEADER_LENGTH 30u

struct fb_ctx;

/* Reads the header of the payload buf[0, len) (of `len` bytes, the magic at 4..8 checked
 * by the caller), located under "header": its length, at least 30, the flatbuffer (at
 * least its root offset and identifier) after it and the constant data after that, both
 * inside the payload; `code` is the backend's status for a malformed one. */
int payload_header_read(struct fb_ctx *c, const uint8_t *buf, uint64_t len, int code,
                        payload_header *h);

#endif /* PAYLOAD_HEADER_H */

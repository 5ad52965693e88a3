/*
 * vk.h: Vulkan delegate payloads (the `processed` bytes of a VulkanBackend delegate in an
 * ExecuTorch program). The payload is a `VH00` header, a VkGraph flatbuffer (identifier
 * VK00, checked by fb_verify_table from csrc/schemas/vulkan.fbs) and the constant bytes;
 * vk.c reads the header and checks what the graph means: value ids, constant ids and the
 * constants' extents.
 */
#ifndef VK_H
#define VK_H

#include "backends/payload_header.h"
#include "backends/vulkan/vk_status.h"
#include "fb/fb_common.h"
#include "gen/vulkan.h"

/* --- cdef begin --- */

/* What vk_open finds; positions are byte offsets in the payload. */
typedef struct vk_summary {
    payload_header header;      /* a constant size of 0: to the payload's end, as the
                                   runtime reads it */
    uint64_t root;              /* the VkGraph table */
    uint32_t n_values;          /* ids run 0 .. n_values - 1 */
    uint32_t n_constants;
    uint64_t tables_visited, elements_visited;
} vk_summary;

/* Where a tensor value's constant is, by value id: inline (data) or named data (key);
 * index -1 when the value has none. */
typedef struct vk_constant {
    uint64_t data;              /* payload offset of inline bytes */
    uint64_t key;               /* payload offset of the named data key; 0 if inline */
    uint64_t nbytes;            /* bytes the tensor takes: its dims times its element */
    uint32_t key_len;
    int32_t index;              /* its constants index, -1 if none */
} vk_constant;

/* Reads the header of the payload buf[0, len) and checks that the flatbuffer and the
 * constant bytes it gives lie inside. */
int vk_read_header(const uint8_t *buf, size_t len, payload_header *h, fb_error *err);
/* Reads the header, verifies the flatbuffer by the schema and checks the graph's meaning:
 * every value id a node, a value list or the graph's inputs and outputs names, every
 * tensor's constant id and its bytes. */
int vk_open(const uint8_t *buf, size_t len, const fb_options *opt, vk_summary *s,
            fb_error *err);
/* Fills constants[s->n_values], by value id, for a payload vk_open accepted. */
int vk_index(const uint8_t *buf, size_t len, const vk_summary *s, vk_constant *constants,
             fb_error *err);

/* --- cdef end --- */

#endif /* VK_H */

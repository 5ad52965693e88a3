/*
 * vk.c: what a Vulkan delegate payload means, on top of the generic layer.
 *
 * Facts (ExecuTorch 1.5.1: backends/vulkan/serialization/vulkan_graph_serialize.py
 * writes the payload, runtime/VulkanDelegateHeader.cpp and VulkanBackend.cpp read it):
 * the header is 4 zero bytes, `VH00`, u16 header length (at least 30), u32 flatbuffer
 * offset (at or after the header), u32 flatbuffer size (not 0), u32 constant bytes offset
 * (at or after the flatbuffer's end), u64 constant bytes size, each extent inside the
 * payload; a size of 0 makes the constant bytes run to the payload's end. The runtime
 * verifies the flatbuffer (its own bytes only) and then reads, unchecked but by
 * ET_CHECK_MSG (an abort): each value id an operator call, a value list or the graph's
 * inputs and outputs names (0 .. values - 1), each tensor's datatype (a known one) and
 * its constant id (constants()->Get, unchecked when >= 0). A constant with a named_key and
 * offset 2^64-1 is the named data of that key (looked up as a C string), any other is
 * inline: its offset below the constant bytes' size and the tensor's dims times its
 * element size inside what follows.
 */
#include "backends/vulkan/vk.h"

#include "executorch/et.h"

#include "fb/fb.h"

FB_STATUS_BLOCK(vk_statuses, VK);

#define VH_MAGIC 0x30304856u   /* "VH00" */
#define VK_NAMED_OFFSET UINT64_MAX

typedef struct walk {
    fb_ctx c;
    const vk_summary *s;
    vk_constant *constants;        /* by value id, when indexing */
    fb_vec values;                    /* VkValue tables */
    fb_vec constant_bytes;            /* VkBytes tables */
    uint64_t base;                 /* payload offset of the flatbuffer */
    uint64_t bytes_size;           /* the constant bytes, as the runtime takes them */
} walk;

/* Bytes an element of VkDataType `type` takes, 0 for one the runtime does not know. */
static unsigned element_size(int type) {
    switch (type) {
    case VK_VK_DATA_TYPE_BOOL: case VK_VK_DATA_TYPE_UINT8: case VK_VK_DATA_TYPE_INT8:
        return 1;
    case VK_VK_DATA_TYPE_FLOAT16:
        return 2;
    case VK_VK_DATA_TYPE_INT32: case VK_VK_DATA_TYPE_FLOAT32:
        return 4;
    case VK_VK_DATA_TYPE_INT64: case VK_VK_DATA_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- header */

int vk_read_header(const uint8_t *buf, size_t size, payload_header *h, fb_error *err) {
    fb_ctx c;
    uint64_t len = (uint64_t)size;
    fb_ctx_init(&c, buf, size, NULL, NULL, err);
    memset(h, 0, sizeof *h);
    if (len < 8 || fb_ld32(buf + 4) != VH_MAGIC) {   /* the runtime requires the header */
        fb_push(&c, "header", FB_NO_INDEX);
        return fb_fail(&c, VK_E_BAD_PAYLOAD_HEADER, len < 8 ? 0 : 4);
    }
    return payload_header_read(&c, buf, len, VK_E_BAD_PAYLOAD_HEADER, h);
}

/* ---------------------------------------------------------------- meaning */

static int value_id(walk *w, int64_t id, uint64_t at) {
    if (id < 0 || (uint64_t)id >= w->values.count) return fb_fail(&w->c, VK_E_BAD_VALUE_ID, at);
    return FB_OK;
}

/* Each element of the uint or int vector field f of table t names a value. */
static int value_ids(walk *w, const fb_tbl *t, const fb_field *f, int is_signed) {
    fb_vec ids;
    uint32_t i;
    FB_TRY(fb_fld_vec(&w->c, t, f, &ids));
    for (i = 0; i < ids.count; i++) {
        uint32_t u = fb_vec_u32(&w->c, &ids, i);
        int64_t id = is_signed ? (int64_t)fb_as_i32(u) : (int64_t)u;
        FB_TRY_IN_FIELD(&w->c, f, i, value_id(w, id, ids.data + 4 * (uint64_t)i));
    }
    return FB_OK;
}

/* Tensor value `id` (VkTensor t): its datatype, and its constant's bytes. */
static int tensor(walk *w, uint32_t id, const fb_tbl *t) {
    fb_ctx *c = &w->c;
    const fb_field *constant_f = &vk_vk_tensor[VK_VK_TENSOR_CONSTANT_ID];
    uint8_t type;
    int32_t constant;
    uint64_t nbytes, offset, length;
    unsigned esize;
    int empty = 0;
    fb_vec dims, key;
    uint32_t i;
    fb_tbl b;
    vk_constant *out = w->constants ? &w->constants[id] : NULL;
    FB_TRY(fb_fld_u8(c, t, &vk_vk_tensor[VK_VK_TENSOR_DATATYPE], &type));
    esize = element_size((int8_t)type);
    if (!esize) return fb_fail_at(c, &vk_vk_tensor[VK_VK_TENSOR_DATATYPE], FB_NO_INDEX,
                               FB_E_BAD_SCALAR_TYPE, t->pos);
    FB_TRY(fb_fld_vec(c, t, &vk_vk_tensor[VK_VK_TENSOR_DIMS], &dims));
    /* numpy counts an array's bytes in intptr_t, an empty one's other dims' product too
     * (it refuses such a shape): the product of the non-zero dims must fit */
    nbytes = esize;
    for (i = 0; i < dims.count; i++) {
        uint64_t d = fb_vec_u32(c, &dims, i);
        if (!d) {
            empty = 1;
            continue;
        }
        if (nbytes > (uint64_t)INT64_MAX / d) return fb_fail(c, FB_E_EXTENT_OVERFLOW, dims.data);
        nbytes *= d;
    }
    if (empty) nbytes = 0;
    FB_TRY(fb_fld_i32(c, t, constant_f, &constant));
    if (out) out->nbytes = nbytes;
    if (constant < 0) return FB_OK;
    if ((uint32_t)constant >= w->constant_bytes.count)
        return fb_fail_at(c, constant_f, FB_NO_INDEX, VK_E_BAD_CONSTANT, t->pos);
    FB_TRY(fb_vec_table(c, &w->constant_bytes, (uint32_t)constant, &b));
    FB_TRY(fb_fld_u64(c, &b, &vk_vk_bytes[VK_VK_BYTES_OFFSET], &offset));
    FB_TRY(fb_fld_u64(c, &b, &vk_vk_bytes[VK_VK_BYTES_LENGTH], &length));
    memset(&key, 0, sizeof key);
    if (fb_tbl_has(c, &b, VK_VK_BYTES_NAMED_KEY))
        FB_TRY(et_c_string(c, &b, &vk_vk_bytes[VK_VK_BYTES_NAMED_KEY], &key, 1));
    if (out) out->index = constant;
    if (fb_tbl_has(c, &b, VK_VK_BYTES_NAMED_KEY) && offset == VK_NAMED_OFFSET) {
        /* named data: its size is checked against the program's, by key */
        if (out) {
            out->key = w->base + key.data;
            out->key_len = key.count;
        }
        return FB_OK;
    }
    if (offset >= w->bytes_size || nbytes > w->bytes_size - offset)
        return fb_fail_at(c, constant_f, FB_NO_INDEX, VK_E_BAD_CONSTANT, b.pos);
    if (out) out->data = w->s->header.constant_offset + offset;
    return FB_OK;
}

static int value(walk *w, uint32_t id) {
    fb_ctx *c = &w->c;
    const fb_field *f = &vk_vk_value[VK_VK_VALUE_VALUE];
    fb_tbl v;
    fb_union_value u;
    if (w->constants) {
        memset(&w->constants[id], 0, sizeof w->constants[id]);
        w->constants[id].index = -1;
    }
    FB_TRY(fb_vec_table(c, &w->values, id, &v));
    FB_TRY(fb_union_open(c, &v, f, &vk_schema_file.decls[f->ref], &u));
    if (u.type == VK_GRAPH_TYPES_VK_TENSOR)
        FB_TRY_IN_MEMBER(c, f, u.member, tensor(w, id, &u.table));
    else if (u.type == VK_GRAPH_TYPES_VALUE_LIST)
        FB_TRY_IN_MEMBER(c, f, u.member, value_ids(w, &u.table, &vk_value_list[VK_VALUE_LIST_ITEMS], 1));
    return FB_OK;
}

static int graph(walk *w, const fb_tbl *root) {
    fb_ctx *c = &w->c;
    const fb_field *values_f = &vk_vk_graph[VK_VK_GRAPH_VALUES];
    const fb_field *chain_f = &vk_vk_graph[VK_VK_GRAPH_CHAIN];
    fb_vec chain;
    uint32_t i;
    FB_TRY(fb_fld_vec(c, root, values_f, &w->values));
    /* indexing: the buffer is the one vk_open counted (a changed one is refused) */
    if (w->constants && w->values.count != w->s->n_values)
        return fb_fail(c, FB_E_BAD_ARGUMENT, 0);
    FB_TRY(fb_fld_vec(c, root, &vk_vk_graph[VK_VK_GRAPH_CONSTANTS], &w->constant_bytes));
    for (i = 0; i < w->values.count; i++)
        FB_TRY_IN_FIELD(c, values_f, i, value(w, i));
    FB_TRY(fb_fld_vec(c, root, chain_f, &chain));
    for (i = 0; i < chain.count; i++) {
        fb_tbl call;
        FB_TRY(fb_vec_table(c, &chain, i, &call));
        FB_TRY_IN_FIELD(c, chain_f, i,
                     value_ids(w, &call, &vk_operator_call[VK_OPERATOR_CALL_ARGS], 1));
    }
    FB_TRY(value_ids(w, root, &vk_vk_graph[VK_VK_GRAPH_INPUT_IDS], 0));
    return value_ids(w, root, &vk_vk_graph[VK_VK_GRAPH_OUTPUT_IDS], 0);
}

/* ---------------------------------------------------------------- entry points */

static int rebase(int rc, const walk *w, fb_error *err) {
    if (rc != FB_OK && err) err->offset += w->base;
    return rc;
}

static void walk_init(walk *w, const uint8_t *buf, size_t len, const fb_options *opt,
                      const vk_summary *s, vk_constant *constants, fb_error *err) {
    const payload_header *h = &s->header;
    memset(w, 0, sizeof *w);
    fb_ctx_init(&w->c, buf + h->flatbuffer_offset, (size_t)h->flatbuffer_size, opt, NULL, err);
    w->s = s;
    w->constants = constants;
    w->base = h->flatbuffer_offset;
    w->bytes_size = h->constant_size ? h->constant_size : (uint64_t)len - h->constant_offset;
}

int vk_open(const uint8_t *buf, size_t len, const fb_options *opt, vk_summary *s,
            fb_error *err) {
    walk w;
    fb_tbl root;
    uint64_t pos;
    int rc;
    memset(s, 0, sizeof *s);
    FB_TRY(vk_read_header(buf, len, &s->header, err));
    walk_init(&w, buf, len, opt, s, NULL, err);
    if (fb_ld32(buf + s->header.flatbuffer_offset + 4) != VK_FILE_IDENTIFIER) {
        fb_push(&w.c, "header", FB_NO_INDEX);   /* located as the flatbuffer's identifier */
        return rebase(fb_fail(&w.c, FB_E_BAD_IDENTIFIER, 4), &w, err);
    }
    rc = fb_deref(&w.c, 0, &pos);
    if (rc == FB_OK) rc = fb_verify_table(&w.c, &vk_schema_file, vk_schema_file.root, pos);
    if (rc == FB_OK) rc = fb_tbl_open(&w.c, pos, &root);
    if (rc != FB_OK) return rebase(rc, &w, err);
    s->root = s->header.flatbuffer_offset + pos;
    s->tables_visited = w.c.tables;
    s->elements_visited = w.c.elements;
    /* the meaning, on budgets of its own */
    w.c.tables = w.c.elements = 0;
    rc = graph(&w, &root);
    s->n_values = w.values.count;
    s->n_constants = w.constant_bytes.count;
    return rebase(rc, &w, err);
}

int vk_index(const uint8_t *buf, size_t len, const vk_summary *s, vk_constant *constants,
             fb_error *err) {
    walk w;
    fb_tbl root;
    fb_options opt;
    int rc;
    const payload_header *h = &s->header;
    fb_default_options(&opt);
    opt.verify = 0;
    if (h->flatbuffer_offset > len || h->flatbuffer_size > len - h->flatbuffer_offset
        || h->constant_offset > len || s->root < h->flatbuffer_offset
        || s->root - h->flatbuffer_offset >= h->flatbuffer_size) {
        fb_ctx c;
        fb_ctx_init(&c, buf, len, NULL, NULL, err);
        return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    }
    walk_init(&w, buf, len, &opt, s, constants, err);
    rc = fb_tbl_open(&w.c, s->root - h->flatbuffer_offset, &root);
    if (rc == FB_OK) rc = graph(&w, &root);
    return rebase(rc, &w, err);
}

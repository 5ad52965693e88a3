/*
 * xnn.c: what an XNNPACK delegate payload means, on top of the generic layer.
 *
 * Facts (ExecuTorch 1.5.1, backends/xnnpack/serialization/xnnpack_graph_serialize.py
 * and its node visitors, checked on its files): the payload starts with 4 zero bytes
 * and `XH00`, then u16 header length (30), u32 flatbuffer offset, u32 flatbuffer size,
 * u32 constant data offset (at or after the flatbuffer's end), u64 constant data size;
 * a payload without the header is all flatbuffer (its identifier at byte 4). Value ids
 * (id_out) are 0 .. n-1, one per xvalue; a node's fields that the schema marks
 * value_ref name values, ~0 meaning none (an absent bias, unused concatenation inputs). constant_buffer_idx and
 * scale_buffer_idx index constant_data, entry 0 meaning none; an entry with a non-empty
 * named_key is in the program's named data (offset 2^64-1), else at offset in the
 * constant data. 4-bit types pack two values a byte along the last dimension, a row
 * padded to whole bytes. Per-channel scales written to constant data are float32,
 * per-channel-group scales bfloat16.
 */
#include "backends/xnnpack/xnn.h"

#include "executorch/et.h"

#include "fb/fb.h"

FB_STATUS_BLOCK(xnn_statuses, XNN);

#define XH_MAGIC 0x30304858u   /* "XH00" */
#define XNN_NO_ID 0xffffffffu
/* XNNPACK's value and node flags (xnnpack.h) that the checks below read. */
#define XNN_VALUE_FLAG_EXTERNAL_INPUT 0x1u
#define XNN_VALUE_FLAG_EXTERNAL_OUTPUT 0x2u
/* The most external values XNNCompiler.cpp takes (it refuses a larger num_externs). */
#define XNN_MAX_EXTERNS 4096u
#define XNN_FLAG_TRANSPOSE_WEIGHTS 0x1u

typedef struct walk {
    fb_ctx c;
    const xnn_summary *s;
    xnn_value *values;
    fb_vec constant_data;             /* ConstantDataOffset tables */
    uint64_t base;                 /* payload offset of the flatbuffer */
    uint32_t num_externs;          /* the graph's */
    uint32_t n_args;               /* as xnn_summary's */
    uint8_t externs[XNN_MAX_EXTERNS / 8];   /* external ids taken so far */
} walk;

/* Bits an element of datatype `type` takes, 0 if none. */
static unsigned datatype_bits(int type) {
    switch (type) {
    case XN_XNN_DATATYPE_XNN_DATATYPE_QCINT4: case XN_XNN_DATATYPE_XNN_DATATYPE_QBINT4:
        return 4;
    case XN_XNN_DATATYPE_XNN_DATATYPE_QINT8: case XN_XNN_DATATYPE_XNN_DATATYPE_QUINT8:
    case XN_XNN_DATATYPE_XNN_DATATYPE_QCINT8: case XN_XNN_DATATYPE_XNN_DATATYPE_QDINT8:
    case XN_XNN_DATATYPE_XNN_DATATYPE_QPINT8:
        return 8;
    case XN_XNN_DATATYPE_XNN_DATATYPE_FP16: case XN_XNN_DATATYPE_XNN_DATATYPE_BF16:
        return 16;
    case XN_XNN_DATATYPE_XNN_DATATYPE_FP32: case XN_XNN_DATATYPE_XNN_DATATYPE_QINT32:
    case XN_XNN_DATATYPE_XNN_DATATYPE_QCINT32: case XN_XNN_DATATYPE_XNN_DATATYPE_INT32:
    case XN_XNN_DATATYPE_XNN_DATATYPE_PFP32:
        return 32;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- header */

int xnn_read_header(const uint8_t *buf, size_t size, payload_header *h, fb_error *err) {
    fb_ctx c;
    uint64_t len = (uint64_t)size;
    fb_ctx_init(&c, buf, size, NULL, NULL, err);
    memset(h, 0, sizeof *h);
    if (len < 8) return fb_fail(&c, FB_E_TOO_SMALL, 0);
    if (fb_ld32(buf + 4) != XH_MAGIC) {   /* no header: all flatbuffer */
        h->identifier = fb_ld32(buf + 4);
        h->flatbuffer_size = len;
        h->constant_offset = len;
        return FB_OK;
    }
    return payload_header_read(&c, buf, len, XNN_E_BAD_PAYLOAD_HEADER, h);
}

/* ---------------------------------------------------------------- meaning */

/* Constant data entry `index` (checked) for `nbytes` bytes: inline inside the constant data, or a
 * named data key (whose size the caller checks against the program's named data). */
static int constant_entry(walk *w, uint32_t index, uint64_t nbytes, xnn_ref *r) {
    fb_ctx *c = &w->c;
    fb_tbl t;
    uint64_t offset, size;
    fb_vec key;
    FB_TRY(fb_vec_table(c, &w->constant_data, index, &t));
    FB_TRY(fb_fld_u64(c, &t, &xn_constant_data_offset[XN_CONSTANT_DATA_OFFSET_OFFSET], &offset));
    FB_TRY(fb_fld_u64(c, &t, &xn_constant_data_offset[XN_CONSTANT_DATA_OFFSET_SIZE], &size));
    /* the runtime looks a named key up as a C string (XNNCompiler.cpp), this reader by
     * the whole key */
    FB_TRY(et_c_string(c, &t, &xn_constant_data_offset[XN_CONSTANT_DATA_OFFSET_NAMED_KEY], &key,
                    1));
    /* The runtime reads a tensor's bytes (nbytes) from its entry: of the named data a
     * key names (checked against the program's named data, by key), or at `offset` of
     * the constant data, after refusing an entry whose `size` bytes are not all there.
     * The entry's size need not cover the tensor: strict mode holds it to that. */
    if (c->strict && nbytes > size) return fb_fail(c, FB_E_OUTSIDE_STORAGE, t.pos);
    memset(r, 0, sizeof *r);
    if (key.count) {
        r->key = w->base + key.data;
        r->key_len = key.count;
    } else {
        if (offset > w->s->header.constant_size || size > w->s->header.constant_size - offset)
            return fb_fail(c, ET_E_BAD_SEGMENT, t.pos);
        if (nbytes > w->s->header.constant_size - offset)
            return fb_fail(c, FB_E_OUTSIDE_STORAGE, t.pos);
        r->data = w->s->header.constant_offset + offset;
    }
    r->size = size;
    r->nbytes = nbytes;
    r->index = index;
    return FB_OK;
}

static int constant_ref(walk *w, uint32_t index, uint64_t nbytes, uint64_t where,
                        xnn_ref *r) {
    if (index == 0 || index >= w->constant_data.count)
        return fb_fail(&w->c, FB_E_BAD_STORAGE_INDEX, where);
    /* located as it always was: the bare name, wherever it is */
    FB_TRY_IN(&w->c, xn_xnn_graph[XN_XNN_GRAPH_CONSTANT_DATA].name, index,
           constant_entry(w, index, nbytes, r));
    return FB_OK;
}

/* Element count and byte size of a value of `type` with dims `dims` (uint32 each). */
static int extent(walk *w, const fb_vec *dims, int type, uint64_t where, uint64_t *nbytes) {
    fb_ctx *c = &w->c;
    unsigned bits = datatype_bits(type);
    uint64_t outer = 1, last = 1;
    uint32_t i;
    int empty = 0;
    if (!bits) return fb_fail(c, FB_E_BAD_SCALAR_TYPE, where);
    /* numpy counts an array's bytes in intptr_t, an empty one's other dims' product too
     * (it refuses such a shape): the product of the non-zero dims must fit */
    for (i = 0; i < dims->count; i++) {
        uint64_t d = fb_vec_u32(c, dims, i);
        if (i + 1 == dims->count) {
            last = d;
            break;
        }
        if (!d) {
            empty = 1;
            continue;
        }
        if (outer > (uint64_t)INT64_MAX / d) return fb_fail(c, FB_E_EXTENT_OVERFLOW, dims->data);
        outer *= d;
    }
    if (bits == 4) last = last / 2 + last % 2;   /* a row packs two a byte, padded */
    else last *= bits / 8;                        /* at most 2^32 * 4: no overflow */
    if (last != 0 && outer > (uint64_t)INT64_MAX / last)
        return fb_fail(c, FB_E_EXTENT_OVERFLOW, dims->data);
    *nbytes = empty ? 0 : outer * last;
    return FB_OK;
}

/* The scales of a per-channel (-group) value: `count` of them, inline in `scale` or
 * in constant data (`esize` bytes each). */
static int scales(walk *w, const fb_tbl *q, const fb_field *scale_f, const fb_field *index_f,
                  const fb_field *num_f, unsigned esize, uint64_t count, xnn_value *v) {
    fb_ctx *c = &w->c;
    fb_vec inline_scales;
    uint32_t index, num;
    FB_TRY(fb_fld_vec(c, q, scale_f, &inline_scales));
    if (inline_scales.count) {
        if (inline_scales.count != count) return fb_fail(c, FB_E_BAD_QUANTIZATION, inline_scales.data);
        return FB_OK;
    }
    FB_TRY(fb_fld_u32(c, q, index_f, &index));
    FB_TRY(fb_fld_u32(c, q, num_f, &num));
    if (num != count) return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
    return constant_ref(w, index, (uint64_t)num * esize, q->pos, &v->scales);
}

/* The quantization parameters of kind `kind` in table q, for value v of dims `dims`. */
static int quant_params(walk *w, uint8_t kind, const fb_tbl *q, const fb_vec *dims, xnn_value *v) {
    fb_ctx *c = &w->c;
    int type = v->datatype;
    int32_t cd;
    switch (kind) {
    case XN_XNN_QUANT_PARAMS_PER_TENSOR_QUANT:
        if (type != XN_XNN_DATATYPE_XNN_DATATYPE_QINT8 && type != XN_XNN_DATATYPE_XNN_DATATYPE_QUINT8
            && type != XN_XNN_DATATYPE_XNN_DATATYPE_QINT32)
            return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        break;
    case XN_XNN_QUANT_PARAMS_PER_TOKEN_DYNAMIC_QUANT:
        if (type != XN_XNN_DATATYPE_XNN_DATATYPE_QDINT8) return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        break;
    case XN_XNN_QUANT_PARAMS_PER_CHANNEL_QUANT:
        if (type != XN_XNN_DATATYPE_XNN_DATATYPE_QCINT8 && type != XN_XNN_DATATYPE_XNN_DATATYPE_QCINT32
            && type != XN_XNN_DATATYPE_XNN_DATATYPE_QCINT4)
            return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        FB_TRY(fb_fld_i32(c, q, &xn_per_channel_quant[XN_PER_CHANNEL_QUANT_CHANNEL_DIM], &cd));
        if (cd < 0 || (uint32_t)cd >= dims->count) return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        FB_TRY(scales(w, q, &xn_per_channel_quant[XN_PER_CHANNEL_QUANT_SCALE],
                   &xn_per_channel_quant[XN_PER_CHANNEL_QUANT_SCALE_BUFFER_IDX],
                   &xn_per_channel_quant[XN_PER_CHANNEL_QUANT_NUM_SCALES], 4,
                   fb_vec_u32(c, dims, (uint32_t)cd), v));
        break;
    default: {   /* per channel and group: 2-D, groups along the other dimension */
        int32_t group;
        uint64_t channels, other;
        if (type != XN_XNN_DATATYPE_XNN_DATATYPE_QBINT4) return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        FB_TRY(fb_fld_i32(c, q, &xn_per_channel_group_quant[XN_PER_CHANNEL_GROUP_QUANT_CHANNEL_DIM], &cd));
        FB_TRY(fb_fld_i32(c, q, &xn_per_channel_group_quant[XN_PER_CHANNEL_GROUP_QUANT_GROUP_SIZE],
                    &group));
        if (dims->count != 2 || (cd != 0 && cd != 1) || group <= 0)
            return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        channels = fb_vec_u32(c, dims, (uint32_t)cd);
        other = fb_vec_u32(c, dims, (uint32_t)(1 - cd));
        FB_TRY(scales(w, q, &xn_per_channel_group_quant[XN_PER_CHANNEL_GROUP_QUANT_SCALE],
                   &xn_per_channel_group_quant[XN_PER_CHANNEL_GROUP_QUANT_SCALE_BUFFER_IDX],
                   &xn_per_channel_group_quant[XN_PER_CHANNEL_GROUP_QUANT_NUM_SCALES], 2,
                   channels * ((other + (uint64_t)group - 1) / (uint64_t)group), v));
        break;
    }
    }
    return FB_OK;
}

static int quantization(walk *w, const fb_tbl *qv, const fb_vec *dims, xnn_value *v) {
    const fb_field *f = &xn_xnn_quantized_tensor_value[XN_XNN_QUANTIZED_TENSOR_VALUE_QUANT_PARAMS];
    fb_union_value u;
    FB_TRY(fb_union_open(&w->c, qv, f, &xn_schema_file.decls[f->ref], &u));
    v->quant = w->base + u.pos;
    v->quant_kind = u.type;
    FB_TRY_IN_MEMBER(&w->c, f, u.member, quant_params(w, u.type, &u.table, dims, v));
    return FB_OK;
}

/* Where a tensor value's field f is, for locating a failure (the table when absent). */
static int field_at(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint64_t *at) {
    FB_TRY(fb_tbl_field(c, t, f->id, 4, at));
    if (!*at) *at = t->pos;
    return FB_OK;
}

/* The external slot of XNNTensorValue t. XNNCompiler.cpp defines each value with its
 * external_id (~0: internal) and passes the graph's inputs and outputs, by flags, to
 * the runtime at those slots: XNNPACK refuses an id past num_externs, the compiler other
 * flags, and the executor reads delegate argument `external_id` for each flagged value
 * (~0 reads far outside the arguments; Program checks each delegate call has
 * n_args); a slot defined twice is redefined, another graph than the file's. */
static int external(walk *w, const fb_tbl *t) {
    const fb_field *id_f = &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_EXTERNAL_ID];
    const fb_field *flags_f = &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_FLAGS];
    fb_ctx *c = &w->c;
    uint32_t id, flags;
    uint64_t at;
    FB_TRY(fb_fld_u32(c, t, id_f, &id));
    FB_TRY(fb_fld_u32(c, t, flags_f, &flags));
    if (flags & ~(XNN_VALUE_FLAG_EXTERNAL_INPUT | XNN_VALUE_FLAG_EXTERNAL_OUTPUT)) {
        FB_TRY(field_at(c, t, flags_f, &at));
        return fb_fail_at(c, flags_f, FB_NO_INDEX, XNN_E_BAD_EXTERNAL, at);
    }
    if (id == XNN_NO_ID && !flags) return FB_OK;
    FB_TRY(field_at(c, t, id_f, &at));
    if (id >= w->num_externs || (w->externs[id / 8] & (1u << (id % 8))))
        return fb_fail_at(c, id_f, FB_NO_INDEX, XNN_E_BAD_EXTERNAL, at);
    w->externs[id / 8] |= (uint8_t)(1u << (id % 8));
    if (flags && id >= w->n_args) w->n_args = id + 1;
    return FB_OK;
}

/* The XNNTensorValue t of xvalue `index`: its id, layout and constant data, into the
 * value record it names (*out; `scratch` without records) and its dims. */
static int tensor_value(walk *w, const fb_tbl *t, uint32_t index, xnn_value *scratch,
                        xnn_value **out, fb_vec *dims) {
    fb_ctx *c = &w->c;
    uint16_t datatype;
    uint32_t id, num_dims, buffer;
    xnn_value *v;
    FB_TRY(fb_fld_u32(c, t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_ID_OUT], &id));
    if (id >= w->s->n_values) return fb_fail(c, XNN_E_BAD_VALUE_ID, t->pos);
    v = w->values ? &w->values[id] : scratch;
    if (w->values && v->tensor) return fb_fail(c, XNN_E_BAD_VALUE_ID, t->pos);   /* twice */
    memset(v, 0, sizeof *v);
    v->tensor = w->base + t->pos;
    v->xvalue = index;
    FB_TRY(fb_fld_u16(c, t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_DATATYPE], &datatype));
    v->datatype = (int16_t)datatype;
    FB_TRY(fb_fld_u32(c, t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_NUM_DIMS], &num_dims));
    FB_TRY(fb_fld_vec(c, t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_DIMS], dims));
    /* the runtime defines the tensor by its dims vector alone, num_dims unread */
    if (c->strict && num_dims != dims->count) return fb_fail(c, FB_E_LENGTH_MISMATCH, t->pos);
    if (!datatype_bits(v->datatype)) return fb_fail(c, FB_E_BAD_SCALAR_TYPE, t->pos);
    FB_TRY(external(w, t));
    FB_TRY(fb_fld_u32(c, t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_CONSTANT_BUFFER_IDX], &buffer));
    if (buffer) {
        uint64_t nbytes;
        FB_TRY(extent(w, dims, v->datatype, t->pos, &nbytes));
        FB_TRY(constant_ref(w, buffer, nbytes, t->pos, &v->constant));
    }
    *out = v;
    return FB_OK;
}

/* What union member `u` of xvalue `index` holds: a tensor value, or a quantized one. */
static int xvalue(walk *w, const fb_union_value *u, uint32_t index) {
    const fb_field *tv = &xn_xnn_quantized_tensor_value[XN_XNN_QUANTIZED_TENSOR_VALUE_TENSOR_VALUE];
    xnn_value scratch, *v;
    fb_vec dims;
    fb_tbl t;
    int present;
    if (u->type != XN_X_VALUE_UNION_XNN_QUANTIZED_TENSOR_VALUE)
        return tensor_value(w, &u->table, index, &scratch, &v, &dims);
    FB_TRY(fb_fld_table(&w->c, &u->table, tv, &t, &present));
    FB_TRY_IN_FIELD(&w->c, tv, FB_NO_INDEX, tensor_value(w, &t, index, &scratch, &v, &dims));
    return quantization(w, &u->table, &dims, v);
}

/* Xvalue `index` of the graph. */
static int value(walk *w, const fb_vec *xvalues, uint32_t index) {
    const fb_field *f = &xn_x_value[XN_X_VALUE_XVALUE_UNION];
    fb_union_value u;
    fb_tbl xv;
    FB_TRY(fb_vec_table(&w->c, xvalues, index, &xv));
    FB_TRY(fb_union_open(&w->c, &xv, f, &xn_schema_file.decls[f->ref], &u));
    FB_TRY_IN_MEMBER(&w->c, f, u.member, xvalue(w, &u, index));
    return FB_OK;
}

/* Elements of the tensor value with id `id` (a shape XNNPACK reads whole), by its dims;
 * UINT64_MAX when the product overflows. */
static int value_numel(walk *w, uint32_t id, uint64_t *numel) {
    fb_ctx *c = &w->c;
    fb_tbl t;
    fb_vec dims;
    uint32_t i;
    FB_TRY(fb_tbl_open(c, w->values[id].tensor - w->base, &t));
    FB_TRY(fb_fld_vec(c, &t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_DIMS], &dims));
    *numel = 1;
    for (i = 0; i < dims.count; i++) {
        uint64_t d = fb_vec_u32(c, &dims, i);
        if (d && *numel > UINT64_MAX / d) { *numel = UINT64_MAX; return FB_OK; }
        *numel *= d;
    }
    return FB_OK;
}

/* The flags of the tensor value with id `id` (XNN_VALUE_FLAG_*). */
static int value_flags(walk *w, uint32_t id, uint32_t *flags) {
    fb_tbl t;
    FB_TRY(fb_tbl_open(&w->c, w->values[id].tensor - w->base, &t));
    return fb_fld_u32(&w->c, &t, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_FLAGS], flags);
}

/* The value_ref fields of node table t, reads (`writes` 0) or writes (1): each names a
 * value (or none). Once the values are known, a node reads only a graph input, a
 * constant or a value an earlier node wrote (XNNPACK runs the nodes in order), and writes
 * neither a constant nor a graph input nor a value written before (XNNPACK graphs are
 * single assignment). */
static int node_refs(walk *w, const fb_member *m, const fb_tbl *t, int writes) {
    fb_ctx *c = &w->c;
    const fb_decl *d = &xn_schema_file.decls[m->ref];
    unsigned i;
    for (i = 0; i < d->count; i++) {
        const fb_field *f = &d->fields[i];
        uint32_t id, flags;
        uint64_t at;
        xnn_value *v;
        int known;
        if (!(f->flags & FB_VALUE_REF) || (strncmp(f->name, "output", 6) == 0) != writes)
            continue;
        FB_TRY(fb_fld_u32(c, t, f, &id));
        if (id == XNN_NO_ID) continue;
        FB_TRY(fb_tbl_field(c, t, f->id, 4, &at));
        if (id >= w->s->n_values) return fb_fail_at(c, f, FB_NO_INDEX, XNN_E_BAD_VALUE_ID, at ? at : t->pos);
        if (!w->values) continue;
        v = &w->values[id];
        FB_TRY(value_flags(w, id, &flags));
        known = v->constant.index || (flags & XNN_VALUE_FLAG_EXTERNAL_INPUT);
        if (writes ? known || v->writers : !known && !v->writers)
            return fb_fail_at(c, f, FB_NO_INDEX, XNN_E_BAD_NODE, at ? at : t->pos);
        if (writes) v->writers = 1;
    }
    return FB_OK;
}

/* Both: what a node reads, then what it writes. */
static int node_values(walk *w, const fb_member *m, const fb_tbl *t) {
    FB_TRY(node_refs(w, m, t, 0));
    return node_refs(w, m, t, 1);
}

/* A fully connected node's bias holds one element per output channel: the filter's
 * first dimension, its last with transposed weights (XNNPACK reads that many). */
static int fully_connected_shapes(walk *w, const fb_tbl *t) {
    const fb_field *fields = xn_xnn_fully_connected;
    fb_ctx *c = &w->c;
    uint32_t filter, bias, flags;
    uint64_t have;
    fb_tbl ft;
    fb_vec dims;
    FB_TRY(fb_fld_u32(c, t, &fields[XN_XNN_FULLY_CONNECTED_FILTER_ID], &filter));
    FB_TRY(fb_fld_u32(c, t, &fields[XN_XNN_FULLY_CONNECTED_BIAS_ID], &bias));
    FB_TRY(fb_fld_u32(c, t, &fields[XN_XNN_FULLY_CONNECTED_FLAGS], &flags));
    if (filter == XNN_NO_ID || bias == XNN_NO_ID) return FB_OK;
    FB_TRY(fb_tbl_open(c, w->values[filter].tensor - w->base, &ft));
    FB_TRY(fb_fld_vec(c, &ft, &xn_xnn_tensor_value[XN_XNN_TENSOR_VALUE_DIMS], &dims));
    if (!dims.count) return fb_fail(c, XNN_E_BAD_NODE, t->pos);
    FB_TRY(value_numel(w, bias, &have));
    if (have != fb_vec_u32(c, &dims, (flags & XNN_FLAG_TRANSPOSE_WEIGHTS) ? dims.count - 1 : 0))
        return fb_fail(c, XNN_E_BAD_NODE, t->pos);
    return FB_OK;
}

/* An output clamp XNNPACK accepts: min not above max, neither NaN (a clamp of min ==
 * max loads and runs; min above max or a NaN fails load_method). */
static int clamp(walk *w, const fb_tbl *xn) {
    const fb_field *f = &xn_x_node[XN_X_NODE_OUTPUT_MIN_MAX];
    fb_ctx *c = &w->c;
    float lo, hi;
    fb_tbl mm;
    int present;
    FB_TRY(fb_fld_table(c, xn, f, &mm, &present));
    if (!present) return FB_OK;
    FB_TRY(fb_fld_f32(c, &mm, &xn_output_min_max[XN_OUTPUT_MIN_MAX_OUTPUT_MIN], &lo));
    FB_TRY(fb_fld_f32(c, &mm, &xn_output_min_max[XN_OUTPUT_MIN_MAX_OUTPUT_MAX], &hi));
    if (!(lo <= hi)) return fb_fail_at(c, f, FB_NO_INDEX, XNN_E_BAD_NODE, mm.pos);
    return FB_OK;
}

/* A convolution's filter holds groups * group_output_channels * kernel_height *
 * kernel_width * group_input_channels elements and its bias groups *
 * group_output_channels: XNNPACK packs that many from the node's parameters, not from the
 * values' shapes (XNNCompiler.cpp hands both over unchecked). Values that are not
 * tensors (no table) are left to the value_ref check. */
static int conv_shapes(walk *w, const fb_tbl *t) {
    static const unsigned factors[] = {
        XN__XNN_NODE_CONV_GROUPS, XN__XNN_NODE_CONV_GROUP_OUTPUT_CHANNELS,
        XN__XNN_NODE_CONV_KERNEL_HEIGHT, XN__XNN_NODE_CONV_KERNEL_WIDTH,
        XN__XNN_NODE_CONV_GROUP_INPUT_CHANNELS};
    fb_ctx *c = &w->c;
    uint64_t want = 1, channels = 0, have;
    uint32_t filter, bias;
    unsigned i;
    for (i = 0; i < sizeof factors / sizeof factors[0]; i++) {
        uint32_t f;
        FB_TRY(fb_fld_u32(c, t, &xn__xnn_node_conv[factors[i]], &f));
        want = (f && want > UINT64_MAX / f) ? UINT64_MAX : want * f;
        if (i == 1) channels = want;
    }
    FB_TRY(fb_fld_u32(c, t, &xn__xnn_node_conv[XN__XNN_NODE_CONV_FILTER_ID], &filter));
    FB_TRY(fb_fld_u32(c, t, &xn__xnn_node_conv[XN__XNN_NODE_CONV_BIAS_ID], &bias));
    if (filter == XNN_NO_ID || !w->values[filter].tensor)
        return fb_fail_at(c, &xn__xnn_node_conv[XN__XNN_NODE_CONV_FILTER_ID], FB_NO_INDEX,
                       XNN_E_BAD_VALUE_ID, t->pos);
    FB_TRY(value_numel(w, filter, &have));
    if (have != want || want == UINT64_MAX) return fb_fail(c, XNN_E_BAD_NODE, t->pos);
    if (bias != XNN_NO_ID) {
        if (!w->values[bias].tensor)
            return fb_fail_at(c, &xn__xnn_node_conv[XN__XNN_NODE_CONV_BIAS_ID], FB_NO_INDEX,
                           XNN_E_BAD_VALUE_ID, t->pos);
        FB_TRY(value_numel(w, bias, &have));
        if (have != channels) return fb_fail(c, XNN_E_BAD_NODE, t->pos);
    }
    return FB_OK;
}

/* What node table t of union member m reads and writes and, once the values are known,
 * the shapes a convolution or a fully connected node relies on. */
static int node_checks(walk *w, const fb_member *m, const fb_tbl *t) {
    FB_TRY(node_values(w, m, t));
    if (w->values && m->ref == XN_DECL__XNN_NODE_CONV) return conv_shapes(w, t);
    if (w->values && m->ref == XN_DECL_XNN_FULLY_CONNECTED) return fully_connected_shapes(w, t);
    return FB_OK;
}

/* Xnode `index` of the graph. */
static int node(walk *w, const fb_vec *xnodes, uint32_t index) {
    const fb_field *f = &xn_x_node[XN_X_NODE_XNODE_UNION];
    fb_union_value u;
    fb_tbl xn;
    FB_TRY(fb_vec_table(&w->c, xnodes, index, &xn));
    FB_TRY(fb_union_open(&w->c, &xn, f, &xn_schema_file.decls[f->ref], &u));
    FB_TRY_IN_MEMBER(&w->c, f, u.member, node_checks(w, u.member, &u.table));
    return clamp(w, &xn);
}

/* Every id of the graph's value_ref list f names a value. */
static int id_list(walk *w, const fb_tbl *root, const fb_field *f) {
    fb_vec ids;
    uint32_t i;
    FB_TRY(fb_fld_vec(&w->c, root, f, &ids));
    for (i = 0; i < ids.count; i++)
        if (fb_vec_u32(&w->c, &ids, i) >= w->s->n_values)
            return fb_fail_at(&w->c, f, i, XNN_E_BAD_VALUE_ID, ids.data + 4 * (uint64_t)i);
    return FB_OK;
}

static int graph(walk *w, const fb_tbl *root) {
    fb_ctx *c = &w->c;
    const fb_field *values = &xn_xnn_graph[XN_XNN_GRAPH_XVALUES];
    const fb_field *nodes = &xn_xnn_graph[XN_XNN_GRAPH_XNODES];
    fb_vec xvalues, xnodes;
    uint32_t i;
    FB_TRY(fb_fld_vec(c, root, &xn_xnn_graph[XN_XNN_GRAPH_CONSTANT_DATA], &w->constant_data));
    FB_TRY(fb_fld_u32(c, root, &xn_xnn_graph[XN_XNN_GRAPH_NUM_EXTERNS], &w->num_externs));
    if (w->num_externs > XNN_MAX_EXTERNS) {
        uint64_t at;
        FB_TRY(field_at(c, root, &xn_xnn_graph[XN_XNN_GRAPH_NUM_EXTERNS], &at));
        return fb_fail_at(c, &xn_xnn_graph[XN_XNN_GRAPH_NUM_EXTERNS], FB_NO_INDEX,
                       XNN_E_BAD_EXTERNAL, at);
    }
    memset(w->externs, 0, sizeof w->externs);
    w->n_args = 0;
    FB_TRY(fb_fld_vec(c, root, values, &xvalues));
    if (xvalues.count != w->s->n_values) return fb_fail(c, FB_E_BAD_ARGUMENT, 0);
    for (i = 0; i < xvalues.count; i++) FB_TRY_IN_FIELD(c, values, i, value(w, &xvalues, i));
    FB_TRY(fb_fld_vec(c, root, nodes, &xnodes));
    for (i = 0; i < xnodes.count; i++) FB_TRY_IN_FIELD(c, nodes, i, node(w, &xnodes, i));
    /* The runtime takes a graph's inputs and outputs from its values' flags and external
     * ids (XNNCompiler.cpp) and never reads these lists: strict mode only. */
    if (!c->strict) return FB_OK;
    FB_TRY(id_list(w, root, &xn_xnn_graph[XN_XNN_GRAPH_INPUT_IDS]));
    return id_list(w, root, &xn_xnn_graph[XN_XNN_GRAPH_OUTPUT_IDS]);
}

/* Positions in errors are the payload's, not the flatbuffer's. */
static int rebase(int rc, const walk *w, fb_error *err) {
    if (rc != FB_OK && err) err->offset += w->base;
    return rc;
}

static void walk_init(walk *w, const uint8_t *buf, const fb_options *opt,
                      const xnn_summary *s, xnn_value *values, fb_error *err) {
    memset(w, 0, sizeof *w);
    fb_ctx_init(&w->c, buf + s->header.flatbuffer_offset, (size_t)s->header.flatbuffer_size, opt,
             NULL, err);
    w->s = s;
    w->values = values;
    w->base = s->header.flatbuffer_offset;
}

int xnn_open(const uint8_t *buf, size_t len, const fb_options *opt, xnn_summary *s,
             fb_error *err) {
    walk w;
    fb_tbl root;
    fb_vec xvalues;
    uint64_t pos;
    int rc;
    memset(s, 0, sizeof *s);
    FB_TRY(xnn_read_header(buf, len, &s->header, err));
    walk_init(&w, buf, opt, s, NULL, err);
    if (s->header.identifier != XN_FILE_IDENTIFIER) {   /* located as the header's */
        fb_push(&w.c, "header", FB_NO_INDEX);
        return rebase(fb_fail(&w.c, FB_E_BAD_IDENTIFIER, 4), &w, err);
    }
    rc = fb_deref(&w.c, 0, &pos);
    if (rc == FB_OK) rc = fb_verify_table(&w.c, &xn_schema_file, xn_schema_file.root, pos);
    if (rc == FB_OK) rc = fb_tbl_open(&w.c, pos, &root);
    if (rc == FB_OK) rc = fb_fld_vec(&w.c, &root, &xn_xnn_graph[XN_XNN_GRAPH_XVALUES], &xvalues);
    if (rc != FB_OK) return rebase(rc, &w, err);
    s->root = s->header.flatbuffer_offset + pos;
    s->n_values = xvalues.count;
    s->tables_visited = w.c.tables;
    s->elements_visited = w.c.elements;
    /* the meaning, on budgets of its own, without records */
    w.c.tables = w.c.elements = 0;
    rc = graph(&w, &root);
    s->n_args = w.n_args;
    return rebase(rc, &w, err);
}

int xnn_index(const uint8_t *buf, size_t len, const xnn_summary *s, xnn_value *values,
              fb_error *err) {
    walk w;
    fb_tbl root;
    fb_options opt;
    int rc;
    const payload_header *h = &s->header;
    fb_default_options(&opt);
    opt.verify = 0;
    if (h->flatbuffer_offset > len || h->flatbuffer_size > len - h->flatbuffer_offset
        || s->root < h->flatbuffer_offset
        || s->root - h->flatbuffer_offset >= h->flatbuffer_size) {
        fb_ctx c;
        fb_ctx_init(&c, buf, len, NULL, NULL, err);
        return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    }
    walk_init(&w, buf, &opt, s, values, err);
    memset(values, 0, sizeof *values * s->n_values);
    rc = fb_tbl_open(&w.c, s->root - h->flatbuffer_offset, &root);
    if (rc == FB_OK) rc = graph(&w, &root);
    return rebase(rc, &w, err);
}

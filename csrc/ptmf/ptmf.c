/*
 * ptmf.c: one-pass verifier and index builder for PTMF flatbuffers.
 *
 * What PTMF means on top of the generic FlatBuffers layer (fb.h): index
 * back-references, tensor extents, quantization, which strings are text and which
 * values a dict key may be. Every field is read through its descriptor generated from
 * schemas/mobile_bytecode.fbs, and every read through fb.h, which checks bounds with
 * overflow-safe arithmetic and validates every vtable; nothing here trusts an earlier
 * check. Verification (opt->verify) adds what reading does not need: FlatBuffers'
 * alignment rules, NUL terminators, UTF-8 text and dict keys as the index passes read
 * the ivalues (the hot path: one pass that checks as it indexes), and, in
 * ptmf_verify_rest, the structure of everything else (functions, object types, extra
 * files, jit sources, the root's own fields) by the generic verifier from the schema,
 * then what those parts mean.
 */
#define _POSIX_C_SOURCE 200809L   /* pread */
#include "fb/fb.h"
#include "ptmf/ptmf_schema.h"

#include <string.h>
#include <sys/types.h>
#include <unistd.h>

FB_STATUS_BLOCK(ptmf_statuses, PTMF);

/* ----------------------------------------------------------- scalar types */

/* Bits per element of each c10::ScalarType that a file can hold; 0 = invalid.
 * quint4x2 and quint2x4 pack several values into a byte; float4_e2m1fn_x2
 * counts bytes. */
static const uint8_t scalar_type_bits[FB_SCALAR_TYPE_COUNT] = {
    8, 8, 16, 32, 64, 16, 32, 64, 32, 64, 128, 8,  /* uint8 .. bool */
    8, 8, 32, 16, 4, 2,                             /* qint8 .. quint2x4 */
    8, 8, 8, 8, 16,                                 /* bits1x8 .. bits16 */
    8, 8, 8, 8,                                     /* float8 e5m2 .. e4m3fnuz */
    16, 32, 64,                                     /* uint16 .. uint64 */
    8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,       /* uint1..7, int1..7 */
    8, 8};                                          /* e8m0fnu, float4_e2m1fn_x2 */

static int is_quantized_type(int st) {
    return st == FB_SCALAR_TYPE_QINT8 || st == FB_SCALAR_TYPE_QUINT8 || st == FB_SCALAR_TYPE_QINT32 || st == FB_SCALAR_TYPE_QUINT4X2
        || st == FB_SCALAR_TYPE_QUINT2X4;
}

const char *ptmf_ivalue_type_name(int type) {
    return type >= 0 && type < UT_COUNT ? mobile_i_value_union[type].name : "";
}

/* ------------------------------------------------------------ the module */

/* A pass over a PTMF file: torch decodes its strings as text (names, types, code), so
 * every string a verifying pass reads must be UTF-8. */
static void ptmf_ctx_init(ctx *c, const uint8_t *buf, size_t len, const fb_options *opt,
                          ptmf_summary *s, fb_error *err) {
    ctx_init(c, buf, len, opt, &s->visited, err);
    c->utf8 = c->verify;
}

static int read_header(ctx *c, uint64_t *root) {
    push(c, "header", NO_INDEX);   /* whole-file rejections are located there */
    if (c->len >= 4 && memcmp(c->buf, "PK\x03\x04", 4) == 0)
        return fail(c, PTMF_E_ZIP_ARCHIVE, 0);
    if (c->len < 8) return fail(c, PTMF_E_TOO_SMALL, 0);
    if (c->len > ((uint64_t)1 << 32)) return fail(c, FB_E_TOO_LARGE, c->len);
    if (ld32(c->buf + 4) != MOBILE_FILE_IDENTIFIER) return fail(c, PTMF_E_BAD_IDENTIFIER, 4);
    pop(c);
    push(c, "root", NO_INDEX);
    TRY(deref(c, 0, root));
    pop(c);
    return FB_OK;
}

int ptmf_open(const uint8_t *buf, size_t len, const fb_options *opt,
              ptmf_summary *s, fb_error *err) {
    ctx c;
    tbl m;
    vec v;
    int32_t sds;
    if (!buf && len) return FB_E_BAD_ARGUMENT;
    memset(s, 0, sizeof *s);
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    TRY(read_header(&c, &s->root));
    TRY_IN(&c, "module", NO_INDEX, tbl_open(&c, s->root, &m));

#define MODULE_FIELD(NAME, read, out) TRY(read(&c, &m, FIELD(module, MODULE_##NAME), out))
    MODULE_FIELD(BYTECODE_VERSION, fld_u32_at, &s->bytecode_version);
    MODULE_FIELD(OPERATOR_VERSION, fld_u32_at, &s->operator_version);
    MODULE_FIELD(STATE_OBJ, fld_u32_at, &s->state_obj);
    MODULE_FIELD(MOBILE_IVALUE_SIZE, fld_u32_at, &s->mobile_ivalue_size);
    MODULE_FIELD(STORAGE_DATA_SIZE, fld_i32_at, &sds);
    s->storage_data_size = sds;
    MODULE_FIELD(IVALUES, fld_vec_at, &v);
    s->ivalues = v.data; s->n_ivalues = v.count;
    MODULE_FIELD(STORAGE_DATA, fld_vec_at, &v);
    s->storages = v.data; s->n_storages = v.count;
    MODULE_FIELD(OBJECT_TYPES, fld_vec_at, &v);
    s->object_types = v.data; s->n_object_types = v.count;
    MODULE_FIELD(EXTRA_FILES, fld_vec_at, &v);
    s->extra_files = v.data; s->n_extra_files = v.count;
    MODULE_FIELD(JIT_SOURCES, fld_vec_at, &v);
    s->jit_sources = v.data; s->n_jit_sources = v.count;
    MODULE_FIELD(METHODS, fld_vec_at, &v);
    s->methods = v.data; s->n_methods = v.count;
    MODULE_FIELD(JIT_CONSTANTS, fld_vec_at, &v);
    s->jit_constants = v.data; s->n_jit_constants = v.count;
#undef MODULE_FIELD

    if (s->state_obj >= s->n_ivalues)
        return fail_at(&c, FIELD(module, MODULE_STATE_OBJ), NO_INDEX, PTMF_E_BAD_INDEX, s->root);
    ctx_finish(&c);
    return FB_OK;
}

/* Files with at least this many bytes per storage read each storage's header
 * (table and vector length, just before its payload) with pread: faulting it in
 * through the mapping would map the page-cache folio around it, which the kernel
 * maps whole when large (up to 2 MiB of payload per storage in RSS). */
#define PREAD_BYTES_PER_STORAGE (64u << 10)
#define STORAGE_WINDOW 64   /* bytes: a storage's table and its vector's length */

/* Storage i: its data vector, read through a pread window when fd >= 0. */
static int index_storage(ctx *c, const vec *all, uint32_t i, int fd,
                         uint8_t window[STORAGE_WINDOW], ptmf_storage *out) {
    tbl t;
    vec data;
    uint64_t target;
    TRY(vec_ref(c, all, i, &target));
    if (fd >= 0) {
        ssize_t got = pread(fd, window, STORAGE_WINDOW, (off_t)target);
        c->win = window;
        c->win_pos = target;
        c->win_len = got > 0 ? (uint64_t)got : 0;
    }
    TRY(tbl_open(c, target, &t));
    TRY(fld_vec_at(c, &t, FIELD(storage_data, STORAGE_DATA_DATA), &data));
    out->pos = data.data;
    out->size = data.count;
    return FB_OK;
}

int ptmf_index_storages(const uint8_t *buf, size_t len, const fb_options *opt,
                        ptmf_summary *s, ptmf_storage *out, int fd, fb_error *err) {
    ctx c;
    vec all = {s->storages, s->n_storages};
    uint8_t window[STORAGE_WINDOW];
    uint32_t i;
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    if (s->n_storages == 0 || (uint64_t)len / s->n_storages < PREAD_BYTES_PER_STORAGE)
        fd = -1;
    for (i = 0; i < s->n_storages; i++) {
        TRY_IN_FIELD(&c, FIELD(module, MODULE_STORAGE_DATA), i,
                     index_storage(&c, &all, i, fd, window, &out[i]));
        c.win_len = 0;
    }
    ctx_finish(&c);
    return FB_OK;
}

/* ---------------------------------------------------------------- tensors */

typedef struct tensor_sink {
    ptmf_tensor *records;       /* NULL while counting */
    int64_t *dims;
    const ptmf_storage *storages;
    uint32_t n_storages;
    uint32_t n_tensors;
    uint64_t n_dims;
    uint32_t capacity;
    uint64_t dims_capacity;
} tensor_sink;

/* Element indices above this cannot be in any buffer; 16-byte elements times it
 * still fit in 64 bits. */
#define EXTENT_LIMIT (UINT64_MAX >> 8)

/* Highest byte + 1 that a view reaches, with every product and sum checked;
 * also the element count and whether the strides are row-major. */
static int tensor_extent(ctx *c, const tbl *t, int st, int64_t offset, const vec *sizes,
                         const vec *strides, ptmf_tensor *r) {
    uint64_t last = (uint64_t)offset;   /* element index of the last element */
    uint64_t numel = 1, expected = 1;
    uint32_t i;
    unsigned bits = scalar_type_bits[st];
    int contiguous = 1;
    for (i = sizes->count; i-- > 0;) {
        int32_t size = as_i32(vec_u32(c, sizes, i));
        int32_t stride = as_i32(vec_u32(c, strides, i));
        /* Exact, size-1 dimensions included: a row-major view made from the sizes
         * alone must carry the strides the file holds (torch's). */
        if ((uint64_t)stride != expected) contiguous = 0;
        if (size == 0) {
            numel = 0;
            break;
        }
        if (numel > UINT64_MAX / (uint64_t)size) return fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
        numel *= (uint64_t)size;
        expected = numel;
    }
    /* Torch counts bytes in int64 and numpy in intptr_t: the logical size must fit. */
    if (numel > (uint64_t)INT64_MAX / (bits >= 8 ? bits / 8 : 1))
        return fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
    r->numel = numel;
    r->contiguous = (uint8_t)contiguous;
    r->extent = 0;
    if (numel == 0) return FB_OK;
    for (i = 0; i < sizes->count; i++) {
        int32_t size = as_i32(vec_u32(c, sizes, i));
        int32_t stride = as_i32(vec_u32(c, strides, i));
        uint64_t step;
        step = (uint64_t)(size - 1) * (uint64_t)stride;   /* < 2^62 */
        if (step > EXTENT_LIMIT || last > EXTENT_LIMIT - step)
            return fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
        last += step;
    }
    /* last <= EXTENT_LIMIT here, so the byte arithmetic below cannot overflow. */
    if (bits >= 8)
        r->extent = (last + 1) * (bits / 8);
    else
        r->extent = last / (8 / bits) + 1;
    return FB_OK;
}

static int walk_tensor(ctx *c, const tbl *t, uint32_t ivalue, int nested, tensor_sink *k,
                       int32_t *record_index);

/* TensorMetadata's field NAME. */
#define TM(NAME) FIELD(tensor_metadata, TENSOR_METADATA_##NAME)

/* One per-channel parameter tensor: one dimension of `axis_size` reals. */
static int walk_qparam(ctx *c, const tbl *sub, int64_t axis_size, tensor_sink *k,
                       int32_t *slot) {
    int32_t idx;
    TRY(walk_tensor(c, sub, PTMF_NO_IVALUE, 1, k, &idx));
    if (k->records) {
        const ptmf_tensor *p = &k->records[idx];
        if (p->ndim != 1 || k->dims[p->dims] != axis_size)
            return fail(c, FB_E_LENGTH_MISMATCH, sub->pos);
        if (p->scalar_type > 7 && p->scalar_type != 15)   /* real, unquantized */
            return fail(c, FB_E_BAD_QUANTIZATION, sub->pos);
    }
    *slot = idx;
    return FB_OK;
}

static int walk_qparams(ctx *c, const tbl *q, int64_t axis_size, tensor_sink *k,
                        ptmf_tensor *r) {
    int present;
    tbl sub;
    unsigned id;
    int32_t *slots[2];
    slots[0] = &r->scales;
    slots[1] = &r->zero_points;
    for (id = MOBILE_QUANTIZED_SCHEMA_SCALES; id <= MOBILE_QUANTIZED_SCHEMA_ZERO_POINTS; id++) {
        const fb_field *f = &mobile_quantized_schema[id];
        TRY(fld_table_at(c, q, f, &sub, &present));
        if (!present)   /* per-channel parameters need both */
            return fail_at(c, f, NO_INDEX, FB_E_MISSING_FIELD, q->pos);
        TRY_IN_FIELD(c, f, NO_INDEX, walk_qparam(c, &sub, axis_size, k,
                                                 slots[id - MOBILE_QUANTIZED_SCHEMA_SCALES]));
    }
    return FB_OK;
}

/* The quantized schema q of tensor record r: its scheme and parameters. */
static int walk_quantized(ctx *c, const tbl *q, const vec *sizes, tensor_sink *k,
                          ptmf_tensor *r) {
    uint8_t qs;
    int32_t zp;
    TRY(fld_u8(c, q, FIELD(quantized_schema, QUANTIZED_SCHEMA_QSCHEME), &qs));
    TRY(fld_f64(c, q, FIELD(quantized_schema, QUANTIZED_SCHEMA_SCALE), &r->scale));
    TRY(fld_i32(c, q, FIELD(quantized_schema, QUANTIZED_SCHEMA_ZERO_POINT), &zp));
    TRY(fld_i32(c, q, FIELD(quantized_schema, QUANTIZED_SCHEMA_AXIS), &r->axis));
    r->zero_point = zp;
    r->qscheme = (int8_t)qs;
    if (qs == FB_QSCHEME_PER_CHANNEL_AFFINE || qs == FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
        int64_t axis_size;
        if (r->axis < 0 || (uint32_t)r->axis >= sizes->count)
            return fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        axis_size = as_i32(vec_u32(c, sizes, (uint32_t)r->axis));
        return walk_qparams(c, q, axis_size, k, r);
    }
    if (qs != FB_QSCHEME_PER_TENSOR_AFFINE)
        return fail_at(c, FIELD(quantized_schema, QUANTIZED_SCHEMA_QSCHEME), NO_INDEX,
                       FB_E_BAD_QUANTIZATION, q->pos);
    return FB_OK;
}

/* Counts the per-channel parameter tensors of quantized schema q, those present. */
static int count_qparams(ctx *c, const tbl *q, tensor_sink *k) {
    unsigned id;
    for (id = MOBILE_QUANTIZED_SCHEMA_SCALES; id <= MOBILE_QUANTIZED_SCHEMA_ZERO_POINTS; id++) {
        const fb_field *f = &mobile_quantized_schema[id];
        int present;
        tbl sub;
        int32_t idx;
        TRY(fld_table_at(c, q, f, &sub, &present));
        if (present) TRY_IN_FIELD(c, f, NO_INDEX, walk_tensor(c, &sub, PTMF_NO_IVALUE, 1, k, &idx));
    }
    return FB_OK;
}

/* Reads one TensorMetadata; with k->records NULL it only counts. */
static int walk_tensor(ctx *c, const tbl *t, uint32_t ivalue, int nested, tensor_sink *k,
                       int32_t *record_index) {
    uint32_t storage, i;
    uint8_t st_raw, grad;
    int32_t offset;
    vec sizes, strides;
    tbl q;
    int quantized;
    ptmf_tensor *r = NULL;
    uint32_t self = k->n_tensors;

    if (k->records && self >= k->capacity) return fail(c, FB_E_BAD_ARGUMENT, t->pos);
    k->n_tensors++;
    *record_index = (int32_t)self;
    TRY(fld_vec_at(c, t, TM(SIZES), &sizes));
    TRY(fld_vec_at(c, t, TM(STRIDES), &strides));
    if (strides.count != sizes.count)
        return fail_at(c, TM(STRIDES), NO_INDEX, FB_E_LENGTH_MISMATCH, t->pos);
    TRY(count_elements(c, 2 * (uint64_t)sizes.count, t->pos));
    TRY(fld_table_at(c, t, TM(QUANTIZED_SCHEMA), &q, &quantized));
    if (k->records) {
        if (k->n_dims > k->dims_capacity || 2 * (uint64_t)sizes.count > k->dims_capacity - k->n_dims)
            return fail(c, FB_E_BAD_ARGUMENT, t->pos);
        r = &k->records[self];
        memset(r, 0, sizeof *r);
        r->pos = t->pos;
        r->ivalue = ivalue;
        r->dims = k->n_dims;
        r->ndim = sizes.count;
        r->scales = r->zero_points = -1;
        r->qscheme = -1;
    }
    k->n_dims += 2 * (uint64_t)sizes.count;
    if (!r) {
        /* Counting: only the nested parameter tensors matter. */
        uint8_t qs = 0;
        if (quantized) TRY(fld_u8(c, &q, FIELD(quantized_schema, QUANTIZED_SCHEMA_QSCHEME), &qs));
        if (quantized && (qs == FB_QSCHEME_PER_CHANNEL_AFFINE
                          || qs == FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS)) {
            if (nested) return fail(c, FB_E_BAD_QUANTIZATION, q.pos);
            TRY_IN_FIELD(c, TM(QUANTIZED_SCHEMA), NO_INDEX, count_qparams(c, &q, k));
        }
        return FB_OK;
    }

    TRY(fld_u32_at(c, t, TM(STORAGE_LOCATION_INDEX), &storage));
    if (storage >= k->n_storages)
        return fail_at(c, TM(STORAGE_LOCATION_INDEX), NO_INDEX, FB_E_BAD_STORAGE_INDEX, t->pos);
    TRY(fld_u8_at(c, t, TM(SCALAR_TYPE), &st_raw));
    if (st_raw >= FB_SCALAR_TYPE_COUNT)
        return fail_at(c, TM(SCALAR_TYPE), NO_INDEX, FB_E_BAD_SCALAR_TYPE, t->pos);
    TRY(fld_i32_at(c, t, TM(STORAGE_OFFSET), &offset));
    if (offset < 0) return fail_at(c, TM(STORAGE_OFFSET), NO_INDEX, FB_E_NEGATIVE_DIMENSION, t->pos);
    TRY(fld_u8(c, t, TM(REQUIRES_GRAD), &grad));
    r->storage = storage;
    r->scalar_type = (int8_t)st_raw;
    r->storage_offset = offset;
    r->requires_grad = grad != 0;
    for (i = 0; i < sizes.count; i++) {
        int32_t size = as_i32(vec_u32(c, &sizes, i));
        int32_t stride = as_i32(vec_u32(c, &strides, i));
        if (size < 0 || stride < 0)
            return fail_at(c, size < 0 ? TM(SIZES) : TM(STRIDES), i, FB_E_NEGATIVE_DIMENSION,
                           (size < 0 ? sizes.data : strides.data) + 4 * (uint64_t)i);
        k->dims[r->dims + i] = size;
        k->dims[r->dims + sizes.count + i] = stride;
    }
    TRY(tensor_extent(c, t, st_raw, offset, &sizes, &strides, r));
    if (r->extent > k->storages[storage].size) return fail(c, FB_E_OUTSIDE_STORAGE, t->pos);

    if (quantized != is_quantized_type(st_raw)) return fail(c, FB_E_BAD_QUANTIZATION, t->pos);
    if (quantized) {
        if (nested) return fail_at(c, TM(QUANTIZED_SCHEMA), NO_INDEX, FB_E_BAD_QUANTIZATION, q.pos);
        TRY_IN_FIELD(c, TM(QUANTIZED_SCHEMA), NO_INDEX, walk_quantized(c, &q, &sizes, k, r));
    }
    return FB_OK;
}

/* The element at which each of tensor records todo[n] starts in the buffer seen as its
 * dtype (out[i]), or -1 when it is no plain view of it: not contiguous, empty,
 * quantized, packed several to a byte, or not aligned to its element size. */
void ptmf_view_starts(const ptmf_tensor *tensors, uint64_t n_tensors,
                      const ptmf_storage *storages, uint64_t n_storages,
                      const uint32_t *todo, uint64_t n, int64_t *out) {
    uint64_t i;
    for (i = 0; i < n; i++) {
        const ptmf_tensor *r;
        uint64_t size, pos;
        out[i] = -1;
        if (todo[i] >= n_tensors) continue;
        r = &tensors[todo[i]];
        if (!r->contiguous || r->numel == 0 || r->qscheme >= 0 || r->scalar_type < 0
            || r->scalar_type >= FB_SCALAR_TYPE_COUNT || r->storage >= n_storages
            || r->storage_offset < 0)
            continue;
        size = scalar_type_bits[r->scalar_type] / 8u;
        pos = storages[r->storage].pos;
        if (size == 0 || (uint64_t)r->storage_offset > (UINT64_MAX - pos) / size) continue;
        pos += (uint64_t)r->storage_offset * size;
        if (pos % size == 0 && pos / size <= INT64_MAX) out[i] = (int64_t)(pos / size);
    }
}

/* ---------------------------------------------------------------- ivalues */

/* Checks that index `j` names an earlier ivalue and folds its depth in. */
static int child(ctx *c, const ptmf_summary *s, const ptmf_ivalue *out, uint32_t self,
                 uint32_t j, uint64_t where, uint32_t *depth) {
    if (j >= s->n_ivalues) return fail(c, PTMF_E_BAD_INDEX, where);
    if (j >= self) return fail(c, PTMF_E_FORWARD_REFERENCE, where);
    if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    return FB_OK;
}

/* Checks the ivalue indices of vector field f (read into v) and folds their depths in. */
static int children(ctx *c, const ptmf_summary *s, const ptmf_ivalue *out, uint32_t self,
                    const fb_field *f, const vec *v, uint32_t *depth) {
    uint32_t i;
    TRY(at_field(c, f, NO_INDEX, count_elements(c, v->count, v->data)));
    for (i = 0; i < v->count; i++) {
        uint64_t where = v->data + 4 * (uint64_t)i;
        uint32_t j = ld32(c->buf + where);
        if (j >= self || j >= s->n_ivalues)
            return at_field(c, f, i, child(c, s, out, self, j, where, depth));
        if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    }
    return FB_OK;
}

/* Dict keys are None, str, int, float, complex, bool or Tensor: TorchScript's key
 * types (a Tensor key is hashed by identity, as torch does; the Python side wraps
 * it), and None; lists, tuples and dicts are no key at all. Checked when verifying,
 * so that a verified file decodes. */
static int dict_keys(ctx *c, const ptmf_ivalue *out, const vec *keys) {
    uint32_t i;
    for (i = 0; i < keys->count; i++) {
        uint64_t where = keys->data + 4 * (uint64_t)i;
        uint8_t t = out[ld32(c->buf + where)].type;
        if (t != UT_NONE && t != UT_INT && t != UT_BOOL && t != UT_DOUBLE
            && t != UT_COMPLEX && t != UT_STRING && t != UT_TENSOR)
            return fail_at(c, FIELD(dict, DICT_KEYS), i, PTMF_E_UNHASHABLE_KEY, where);
    }
    return FB_OK;
}

/* What ivalue i's member table t holds, into r; *depth folds in its children's. */
static int index_member(ctx *c, const ptmf_summary *s, tensor_sink *k, ptmf_ivalue *out,
                        uint32_t i, const tbl *t, uint32_t *depth) {
    ptmf_ivalue *r = &out[i];
    vec v;
    switch (r->type) {
    case UT_STRING:
    case UT_DEVICE:
        TRY(fld_text_at(c, t, r->type == UT_STRING ? FIELD(string, STRING_DATA)
                                                   : FIELD(device, DEVICE_STR), &v));
        r->a = v.data;
        r->n = v.count;
        break;
    case UT_LIST:
    case UT_TUPLE: {
        const fb_field *f = r->type == UT_LIST ? FIELD(list, LIST_ITEMS) : FIELD(tuple, TUPLE_ITEMS);
        TRY(fld_vec_at(c, t, f, &v));
        TRY(children(c, s, out, i, f, &v, depth));
        r->a = v.data;
        r->n = v.count;
        if (r->type == UT_LIST) {
            TRY(fld_text_at(c, t, FIELD(list, LIST_ANNOTATION_STR), &v));
            r->b = v.data;
            r->m = v.count;
        }
        break;
    }
    case UT_DICT: {
        vec values;
        TRY(fld_vec_at(c, t, FIELD(dict, DICT_KEYS), &v));
        TRY(children(c, s, out, i, FIELD(dict, DICT_KEYS), &v, depth));
        if (c->verify) TRY(dict_keys(c, out, &v));
        TRY(fld_vec_at(c, t, FIELD(dict, DICT_VALUES), &values));
        if (values.count != v.count)
            return fail_at(c, FIELD(dict, DICT_VALUES), NO_INDEX, FB_E_LENGTH_MISMATCH, t->pos);
        TRY(children(c, s, out, i, FIELD(dict, DICT_VALUES), &values, depth));
        r->a = v.data;
        r->n = v.count;
        r->b = values.data;
        TRY(fld_text_at(c, t, FIELD(dict, DICT_ANNOTATION_STR), &v));
        r->c = v.data;
        r->k = v.count;
        break;
    }
    case UT_INT_LIST:
    case UT_DOUBLE_LIST:
    case UT_BOOL_LIST:
        TRY(fld_vec_at(c, t, r->type == UT_INT_LIST ? FIELD(int_list, INT_LIST_ITEMS)
                             : r->type == UT_DOUBLE_LIST ? FIELD(double_list, DOUBLE_LIST_ITEMS)
                                                         : FIELD(bool_list, BOOL_LIST_ITEMS), &v));
        r->a = v.data;
        r->n = v.count;
        break;
    case UT_OBJECT: {
        uint32_t type_index, state, setstate;
        TRY(fld_u32_at(c, t, FIELD(object, OBJECT_TYPE_INDEX), &type_index));
        if (type_index >= s->n_object_types)
            return fail_at(c, FIELD(object, OBJECT_TYPE_INDEX), NO_INDEX, PTMF_E_BAD_TYPE_INDEX, t->pos);
        TRY(fld_u32_at(c, t, FIELD(object, OBJECT_STATE), &state));
        TRY(at_field(c, FIELD(object, OBJECT_STATE), NO_INDEX,
                     child(c, s, out, i, state, t->pos, depth)));
        TRY(fld_u32_at(c, t, FIELD(object, OBJECT_SETSTATE_FUNC), &setstate));
        if (setstate >= s->n_ivalues)
            return fail_at(c, FIELD(object, OBJECT_SETSTATE_FUNC), NO_INDEX, PTMF_E_BAD_INDEX, t->pos);
        TRY(fld_vec_at(c, t, FIELD(object, OBJECT_ATTRS), &v));
        TRY(children(c, s, out, i, FIELD(object, OBJECT_ATTRS), &v, depth));
        r->a = v.data;
        r->n = v.count;
        r->m = type_index;
        r->b = state;
        r->c = setstate;
        break;
    }
    case UT_ENUM: {
        uint32_t value;
        TRY(fld_text_at(c, t, FIELD(enum_value, ENUM_VALUE_TYPE_NAME), &v));
        TRY(fld_u32_at(c, t, FIELD(enum_value, ENUM_VALUE_VALUE), &value));
        TRY(at_field(c, FIELD(enum_value, ENUM_VALUE_VALUE), NO_INDEX,
                     child(c, s, out, i, value, t->pos, depth)));
        r->a = v.data;
        r->n = v.count;
        r->m = value;
        break;
    }
    case UT_FUNCTION:
        TRY(fld_text_at(c, t, FIELD(function, FUNCTION_QN), &v));
        TRY(fld_u32_at(c, t, FIELD(function, FUNCTION_CLASS_TYPE), &r->m));
        r->a = v.data;
        r->n = v.count;
        break;
    case UT_TENSOR: {
        int32_t idx;
        TRY(walk_tensor(c, t, i, 0, k, &idx));
        r->m = (uint32_t)idx;
        break;
    }
    default:
        break;
    }
    return FB_OK;
}

/* IValue i of vector `all`. */
static int index_one(ctx *c, const ptmf_summary *s, tensor_sink *k, ptmf_ivalue *out,
                     uint32_t i, const vec *all) {
    const fb_field *val = FIELD(i_value, I_VALUE_VAL);
    ptmf_ivalue *r = &out[i];
    union_value u;
    uint32_t depth = 1;
    tbl iv;
    int rc;
    TRY(vec_table(c, all, i, &iv));
    rc = union_open(c, &iv, val, &mobile_schema_file.decls[val->ref], &u);
    if (rc == FB_OK && u.type == UT_NONE)   /* a None's offset too is followed */
        rc = fld_ref(c, &iv, val, &u.pos);
    TRY(at_member(c, val, u.member, rc));
    r->type = u.type;
    r->pos = u.pos;
    if (u.member->kind == FB_TABLE)
        TRY_IN_MEMBER(c, val, u.member, index_member(c, s, k, out, i, &u.table, &depth));
    if (depth > c->max_depth) return fail(c, FB_E_DEPTH_BUDGET, iv.pos);
    r->depth = depth;
    return FB_OK;
}

int ptmf_index_ivalues(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *out, fb_error *err) {
    ctx c;
    vec all = {s->ivalues, s->n_ivalues};
    tensor_sink k;
    uint32_t i;
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    memset(&k, 0, sizeof k);
    TRY(count_elements(&c, s->n_ivalues, s->ivalues));
    for (i = 0; i < s->n_ivalues; i++) {
        memset(&out[i], 0, sizeof out[i]);
        TRY_IN_FIELD(&c, FIELD(module, MODULE_IVALUES), i, index_one(&c, s, &k, out, i, &all));
    }
    s->n_tensors = k.n_tensors;
    s->n_dims = k.n_dims;
    ctx_finish(&c);
    return FB_OK;
}

/* The TensorMetadata table at `pos`, of ivalue i. */
static int open_tensor(ctx *c, uint64_t pos, tensor_sink *k, uint32_t i, int32_t *idx) {
    tbl t;
    TRY(tbl_open(c, pos, &t));
    return walk_tensor(c, &t, i, 0, k, idx);
}

/* The tensor record of tensor ivalue i. */
static int index_tensor(ctx *c, tensor_sink *k, ptmf_ivalue *ivalues, uint32_t i) {
    int32_t idx;
    TRY_IN_MEMBER(c, FIELD(i_value, I_VALUE_VAL), &mobile_i_value_union[UT_TENSOR],
                  open_tensor(c, ivalues[i].pos, k, i, &idx));
    ivalues[i].m = (uint32_t)idx;
    return FB_OK;
}

int ptmf_index_tensors(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *ivalues,
                       const ptmf_storage *storages, ptmf_tensor *tensors,
                       int64_t *dims, fb_error *err) {
    ctx c;
    tensor_sink k;
    uint32_t i;
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    memset(&k, 0, sizeof k);
    k.records = tensors;
    k.dims = dims;
    k.storages = storages;
    k.n_storages = s->n_storages;
    k.capacity = s->n_tensors;
    k.dims_capacity = s->n_dims;
    for (i = 0; i < s->n_ivalues; i++) {
        if (ivalues[i].type != UT_TENSOR) continue;
        TRY_IN_FIELD(&c, FIELD(module, MODULE_IVALUES), i,
                     index_tensor(&c, &k, ivalues, i));
    }
    if (k.n_tensors != s->n_tensors || k.n_dims != s->n_dims)   /* the buffer changed */
        return fail_at(&c, FIELD(module, MODULE_IVALUES), NO_INDEX, FB_E_BAD_ARGUMENT, s->ivalues);
    ctx_finish(&c);
    return FB_OK;
}

/* ------------------------------------------------------ functions & rest */

/* A function's schema table: its arguments and returns. */
static int read_schema(ctx *c, const tbl *t, ptmf_function *f) {
    vec v;
    TRY(fld_vec_at(c, t, FIELD(schema, SCHEMA_ARGUMENTS), &v));
    f->arguments = v.data; f->n_arguments = v.count;
    TRY(fld_vec_at(c, t, FIELD(schema, SCHEMA_RETURNS), &v));
    f->returns = v.data; f->n_returns = v.count;
    return FB_OK;
}

/* With `s`, the constants are checked to name ivalues (verifying); NULL on demand. */
static int read_function(ctx *c, const ptmf_summary *s, uint64_t pos, ptmf_function *f) {
    tbl t, sub;
    vec v;
    int present;
    uint32_t j;
    memset(f, 0, sizeof *f);
    TRY(tbl_open(c, pos, &t));
    TRY(fld_text_at(c, &t, FIELD(function, FUNCTION_QN), &v));
    f->qn = v.data; f->qn_len = v.count;
    TRY(fld_vec_at(c, &t, FIELD(function, FUNCTION_INSTRUCTIONS), &v));
    f->instructions = v.data; f->n_instructions = v.count;
    TRY(fld_vec_at(c, &t, FIELD(function, FUNCTION_OPERATORS), &v));
    f->operators = v.data; f->n_operators = v.count;
    TRY(fld_vec_at(c, &t, FIELD(function, FUNCTION_CONSTANTS), &v));
    f->constants = v.data; f->n_constants = v.count;
    if (s) {
        TRY(at_field(c, FIELD(function, FUNCTION_CONSTANTS), NO_INDEX,
                     count_elements(c, v.count, v.data)));
        for (j = 0; j < v.count; j++)
            if (vec_u32(c, &v, j) >= s->n_ivalues)
                return fail_at(c, FIELD(function, FUNCTION_CONSTANTS), j, PTMF_E_BAD_INDEX,
                               v.data + 4 * (uint64_t)j);
    }
    TRY(fld_vec_at(c, &t, FIELD(function, FUNCTION_TYPE_ANNOTATIONS), &v));
    f->type_annotations = v.data; f->n_type_annotations = v.count;
    TRY(fld_i32_at(c, &t, FIELD(function, FUNCTION_REGISTER_SIZE), &f->register_size));
    TRY(fld_table_at(c, &t, FIELD(function, FUNCTION_SCHEMA), &sub, &present));
    f->has_schema = present != 0;
    if (present) TRY_IN_FIELD(c, FIELD(function, FUNCTION_SCHEMA), NO_INDEX, read_schema(c, &sub, f));
    TRY(fld_table_at(c, &t, FIELD(function, FUNCTION_DEBUG_INFO), &sub, &present));
    if (present) {
        TRY(at_field(c, FIELD(debug_info, DEBUG_INFO_DEBUG_HANDLE), NO_INDEX,
                     at_field(c, FIELD(function, FUNCTION_DEBUG_INFO), NO_INDEX,
                              fld_vec(c, &sub, FIELD(debug_info, DEBUG_INFO_DEBUG_HANDLE), &v))));
        f->debug_handles = v.data; f->n_debug_handles = v.count;
    }
    TRY(fld_u32_at(c, &t, FIELD(function, FUNCTION_CLASS_TYPE), &f->class_type));
    return FB_OK;
}

/* A table of two strings and, when `num` is given, an integer after them. The first
 * string is text; the second too when `text1`, else bytes (an extra file's content). */
static int read_pair(ctx *c, const vec *v, uint32_t i, const fb_field *s0, const fb_field *s1,
                     int text1, const fb_field *num, ptmf_record *out) {
    tbl t;
    vec s;
    memset(out, 0, sizeof *out);
    TRY(vec_table(c, v, i, &t));
    TRY(fld_text_at(c, &t, s0, &s));
    out->s0 = s.data; out->s0_len = s.count;
    TRY(text1 ? fld_text_at(c, &t, s1, &s) : fld_str_at(c, &t, s1, &s));
    out->s1 = s.data; out->s1_len = s.count;
    if (num) {
        uint32_t u;
        TRY(fld_u32(c, &t, num, &u));
        out->num = num->type == FB_I32 ? (int64_t)as_i32(u) : (int64_t)u;
    }
    return FB_OK;
}

static int read_operator(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, FIELD(operator, OPERATOR_NAME), FIELD(operator, OPERATOR_OVERLOAD_NAME),
                     1, FIELD(operator, OPERATOR_NUM_ARGS_SERIALIZED), out);
}

static int read_arg(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, FIELD(arg, ARG_NAME), FIELD(arg, ARG_TYPE),
                     1, FIELD(arg, ARG_DEFAULT_VALUE), out);
}

static int read_extra_file(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, FIELD(extra_file, EXTRA_FILE_NAME),
                     FIELD(extra_file, EXTRA_FILE_CONTENT), 0, NULL, out);
}

static int read_object_type(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    tbl t;
    vec s;
    uint8_t kind;
    memset(out, 0, sizeof *out);
    TRY(vec_table(c, v, i, &t));
    TRY(fld_text_at(c, &t, FIELD(object_type, OBJECT_TYPE_TYPE_NAME), &s));
    out->s0 = s.data; out->s0_len = s.count;
    TRY(fld_u8_at(c, &t, FIELD(object_type, OBJECT_TYPE_TYPE), &kind));
    out->num = kind;
    TRY(fld_vec_at(c, &t, FIELD(object_type, OBJECT_TYPE_ATTR_NAMES), &s));
    out->v = s.data; out->v_len = s.count;
    return FB_OK;
}

/* What the schema alone checks, by fb_verify_table_shallow: the whole root table but
 * the elements of the ivalues and storages, which the index passes check as they read
 * them, and the contents of ExtraFile tables, which are bytes in extra_files and text
 * in jit_sources (verify_jit_sources). */
static const fb_field *const module_shallow[] = {
    FIELD(module, MODULE_IVALUES), FIELD(module, MODULE_STORAGE_DATA),
    FIELD(extra_file, EXTRA_FILE_CONTENT), NULL};

/* Runs `expr` inside "ivalues[i].val<Member>" for ivalue i of union type `type`. */
#define TRY_IN_IVALUE(c, i, type, expr)                                                \
    do {                                                                               \
        push((c), field_segment((c), FIELD(module, MODULE_IVALUES)), (i));            \
        TRY_IN_MEMBER((c), FIELD(i_value, I_VALUE_VAL), &mobile_i_value_union[type], expr); \
        pop(c);                                                                        \
    } while (0)

/* Argument i of list v (of a schema's arguments or returns): its default names an ivalue. */
static int verify_arg(ctx *c, const ptmf_summary *s, const vec *v, uint32_t i) {
    ptmf_record a;
    TRY(read_arg(c, v, i, &a));
    if ((uint64_t)a.num >= s->n_ivalues)
        return fail_at(c, FIELD(arg, ARG_DEFAULT_VALUE), NO_INDEX, PTMF_E_BAD_INDEX,
                       v->data + 4 * (uint64_t)i);
    return FB_OK;
}

static int verify_args(ctx *c, const ptmf_summary *s, const ptmf_function *f, int returns) {
    const fb_field *list = returns ? FIELD(schema, SCHEMA_RETURNS) : FIELD(schema, SCHEMA_ARGUMENTS);
    vec v;
    uint32_t i;
    v.data = returns ? f->returns : f->arguments;
    v.count = returns ? f->n_returns : f->n_arguments;
    TRY(count_elements(c, v.count, v.data));
    push(c, field_segment(c, FIELD(function, FUNCTION_SCHEMA)), NO_INDEX);
    for (i = 0; i < v.count; i++) TRY_IN_FIELD(c, list, i, verify_arg(c, s, &v, i));
    pop(c);
    return FB_OK;
}

/* What function ivalue i refers to. */
static int verify_function(ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                           uint32_t i) {
    ptmf_function f;
    TRY(read_function(c, s, ivalues[i].pos, &f));
    if (f.class_type >= s->n_object_types)
        return fail_at(c, FIELD(function, FUNCTION_CLASS_TYPE), NO_INDEX, PTMF_E_BAD_TYPE_INDEX,
                       ivalues[i].pos);
    TRY(verify_args(c, s, &f, 0));
    TRY(verify_args(c, s, &f, 1));
    if (f.n_debug_handles != 0 && f.n_debug_handles != f.n_instructions)
        return at_field(c, FIELD(debug_info, DEBUG_INFO_DEBUG_HANDLE), NO_INDEX,
                        fail_at(c, FIELD(function, FUNCTION_DEBUG_INFO), NO_INDEX,
                                FB_E_LENGTH_MISMATCH, f.debug_handles));
    return FB_OK;
}

/* What object ivalue i refers to, by its object type. */
static int verify_object(ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                         const vec *types, uint32_t i) {
    const ptmf_ivalue *o = &ivalues[i];
    ptmf_record ot;
    TRY(read_object_type(c, types, o->m, &ot));
    switch (ot.num) {
    case OT_CLASS_WITH_FIELD:
        if (o->n > ot.v_len)
            return fail_at(c, FIELD(object, OBJECT_ATTRS), NO_INDEX, FB_E_LENGTH_MISMATCH, o->a);
        break;
    case OT_CUSTOM_CLASS:
        break;
    case OT_CLASS_WITH_SETSTATE:
        if (o->c >= s->n_ivalues || ivalues[o->c].type != UT_FUNCTION)
            return fail_at(c, FIELD(object, OBJECT_SETSTATE_FUNC), NO_INDEX, FB_E_KIND_MISMATCH,
                           o->pos);
        break;
    default:
        return fail_at(c, FIELD(object, OBJECT_TYPE_INDEX), NO_INDEX, PTMF_E_BAD_OBJECT_KIND,
                       o->pos);
    }
    return FB_OK;
}

/* Object type i: its kind is one torch writes. */
static int verify_object_type(ctx *c, const vec *types, uint32_t i) {
    ptmf_record ot;
    TRY(read_object_type(c, types, i, &ot));
    if (ot.num < OT_CLASS_WITH_FIELD || ot.num > OT_CLASS_WITH_SETSTATE)
        return fail_at(c, FIELD(object_type, OBJECT_TYPE_TYPE), NO_INDEX, PTMF_E_BAD_OBJECT_KIND,
                       ot.s0);
    return FB_OK;
}

/* TorchScript source i is text (an extra file's content is bytes). */
static int verify_jit_source(ctx *c, const vec *v, uint32_t i) {
    const fb_field *content = FIELD(extra_file, EXTRA_FILE_CONTENT);
    tbl t;
    vec text;
    TRY(vec_table(c, v, i, &t));
    TRY(fld_str_at(c, &t, content, &text));
    return at_field(c, content, NO_INDEX, utf8_text(c, &text));
}

/* What the schema says of the parts the index passes do not read: the root table but
 * for module_shallow, every function, and that the jit sources are text. */
static int verify_structure(ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues) {
    vec sources = {s->jit_sources, s->n_jit_sources};
    uint32_t i;
    TRY(fb_verify_table_shallow(c, &mobile_schema_file, MOBILE_DECL_MODULE, s->root,
                                module_shallow));
    for (i = 0; i < s->n_ivalues; i++)
        if (ivalues[i].type == UT_FUNCTION)
            TRY_IN_IVALUE(c, i, UT_FUNCTION, fb_verify_table(c, &mobile_schema_file,
                                                             MOBILE_DECL_FUNCTION, ivalues[i].pos));
    for (i = 0; i < sources.count; i++)
        TRY_IN_FIELD(c, FIELD(module, MODULE_JIT_SOURCES), i, verify_jit_source(c, &sources, i));
    return FB_OK;
}

/* Every index of vector field f of the module (data, count) names an ivalue, a function
 * when `functions`. */
static int verify_roots(ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                        uint64_t data, uint32_t count, const fb_field *f, int functions) {
    uint32_t i;
    for (i = 0; i < count; i++) {
        uint32_t j = ld32(c->buf + data + 4 * (uint64_t)i);
        if (j >= s->n_ivalues) return fail_at(c, f, i, PTMF_E_BAD_INDEX, data + 4 * (uint64_t)i);
        if (functions && ivalues[j].type != UT_FUNCTION)
            return fail_at(c, f, i, FB_E_KIND_MISMATCH, data + 4 * (uint64_t)i);
    }
    return FB_OK;
}

int ptmf_verify_rest(const uint8_t *buf, size_t len, const fb_options *opt,
                     ptmf_summary *s, const ptmf_ivalue *ivalues, fb_error *err) {
    ctx c;
    uint32_t i;
    vec types = {s->object_types, s->n_object_types};
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    c.verify = c.utf8 = 1;

    TRY(verify_structure(&c, s, ivalues));
    /* What follows reads only what was verified, for what it means. */
    c.verify = c.utf8 = 0;
    if (s->storage_data_size != (int32_t)s->n_storages)
        return fail_at(&c, FIELD(module, MODULE_STORAGE_DATA_SIZE), NO_INDEX,
                       FB_E_LENGTH_MISMATCH, s->root);
    for (i = 0; i < s->n_object_types; i++)
        TRY_IN_FIELD(&c, FIELD(module, MODULE_OBJECT_TYPES), i, verify_object_type(&c, &types, i));
    for (i = 0; i < s->n_ivalues; i++) {
        if (ivalues[i].type == UT_FUNCTION)
            TRY_IN_IVALUE(&c, i, UT_FUNCTION, verify_function(&c, s, ivalues, i));
        else if (ivalues[i].type == UT_OBJECT)
            TRY_IN_IVALUE(&c, i, UT_OBJECT, verify_object(&c, s, ivalues, &types, i));
    }
    if (ivalues[s->state_obj].type != UT_OBJECT)
        return fail_at(&c, FIELD(module, MODULE_STATE_OBJ), NO_INDEX, FB_E_KIND_MISMATCH, s->root);
    TRY(verify_roots(&c, s, ivalues, s->methods, s->n_methods, FIELD(module, MODULE_METHODS), 1));
    TRY(verify_roots(&c, s, ivalues, s->jit_constants, s->n_jit_constants,
                     FIELD(module, MODULE_JIT_CONSTANTS), 0));
    ctx_finish(&c);
    return FB_OK;
}

/* ------------------------------------------------------ on-demand readers */

int ptmf_read_function(const uint8_t *buf, size_t len, uint64_t pos, ptmf_function *out,
                       fb_error *err) {
    ctx c;
    ctx_init(&c, buf, len, NULL, NULL, err);
    push(&c, "", NO_INDEX);   /* on demand, paths start inside the unnamed table: ".qn" */
    return read_function(&c, NULL, pos, out);
}

#define VECTOR_READER(fn, reader)                                                   \
    int fn(const uint8_t *buf, size_t len, uint64_t data, uint32_t count, uint32_t i, \
           ptmf_record *out, fb_error *err) {                                    \
        ctx c;                                                                      \
        vec v;                                                                      \
        ctx_init(&c, buf, len, NULL, NULL, err);                                    \
        push(&c, "", NO_INDEX);   /* as ptmf_read_function: ".name" */              \
        v.data = data;                                                              \
        v.count = count;                                                            \
        if (!in_bounds(&c, data, (uint64_t)count * 4)) return fail(&c, FB_E_OUT_OF_BOUNDS, data); \
        return reader(&c, &v, i, out);                                              \
    }

VECTOR_READER(ptmf_read_operator, read_operator)
VECTOR_READER(ptmf_read_arg, read_arg)
VECTOR_READER(ptmf_read_extra_file, read_extra_file)

int ptmf_read_strings(const uint8_t *buf, size_t len, uint64_t data, uint32_t count,
                      uint64_t *pos, uint32_t *size, fb_error *err) {
    ctx c;
    vec v = {data, count}, s;
    uint32_t i;
    ctx_init(&c, buf, len, NULL, NULL, err);
    if (!in_bounds(&c, data, (uint64_t)count * 4)) return fail(&c, FB_E_OUT_OF_BOUNDS, data);
    for (i = 0; i < count; i++) {
        uint64_t target;
        push(&c, "", i);   /* located at the element of a vector the caller names */
        TRY(vec_ref(&c, &v, i, &target));
        TRY(str_at(&c, target, &s));
        pop(&c);
        pos[i] = s.data;
        size[i] = s.count;
    }
    return FB_OK;
}

int ptmf_read_object_types(const uint8_t *buf, size_t len, uint64_t data, uint32_t count,
                           ptmf_object_type *types, ptmf_span *attrs, uint64_t max_attrs,
                           uint64_t *n_attrs, fb_error *err) {
    ctx c;
    vec v = {data, count};
    uint64_t total = 0, cap;
    uint32_t i, k;
    ctx_init(&c, buf, len, NULL, NULL, err);
    cap = c.max_elements < UINT32_MAX ? c.max_elements : UINT32_MAX;   /* names numbered in 32 bits */
    *n_attrs = 0;
    if (!in_bounds(&c, data, (uint64_t)count * 4)) return fail(&c, FB_E_OUT_OF_BOUNDS, data);
    for (i = 0; i < count; i++) {
        ptmf_record r;
        TRY_IN_FIELD(&c, FIELD(module, MODULE_OBJECT_TYPES), i, read_object_type(&c, &v, i, &r));
        /* Types may share one attr_names vector: its names count once per type. */
        if (r.v_len > cap - total)
            return fail_at(&c, FIELD(module, MODULE_OBJECT_TYPES), i, FB_E_ELEMENT_BUDGET, r.v);
        types[i].name.pos = r.s0;
        types[i].name.len = r.s0_len;
        types[i].attr_names = r.v;
        types[i].first_attr = total;
        types[i].n_attrs = r.v_len;
        types[i].kind = (uint32_t)r.num;
        total += r.v_len;
    }
    *n_attrs = total;
    if (max_attrs < total) return FB_OK;
    for (i = 0; i < count; i++) {
        vec names;
        names.data = types[i].attr_names;
        names.count = types[i].n_attrs;
        push(&c, field_segment(&c, FIELD(module, MODULE_OBJECT_TYPES)), i);
        for (k = 0; k < names.count; k++) {
            uint64_t target;
            vec s;
            int rc = vec_ref(&c, &names, k, &target);
            if (rc == FB_OK) rc = str_at(&c, target, &s);
            TRY(at_field(&c, FIELD(object_type, OBJECT_TYPE_ATTR_NAMES), k, rc));
            attrs[types[i].first_attr + k].pos = s.data;
            attrs[types[i].first_attr + k].len = s.count;
        }
        pop(&c);
    }
    return FB_OK;
}

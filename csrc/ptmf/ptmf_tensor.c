/*
 * ptmf_tensor.c: tensors: the extent of a view in its storage, quantization and its
 * per-channel parameter tensors, the tensor records (ptmf_index_tensors, after the
 * ivalue index counted them with the same walk) and the plain views over the buffer
 * (ptmf_view_starts).
 */
#include "ptmf/ptmf_internal.h"

#include <string.h>

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

/* Element indices above this cannot be in any buffer; 16-byte elements times it
 * still fit in 64 bits. */
#define EXTENT_LIMIT (UINT64_MAX >> 8)

/* Highest byte + 1 that a view reaches, with every product and sum checked;
 * also the element count and whether the strides are row-major. */
static int tensor_extent(fb_ctx *c, const fb_tbl *t, int st, int64_t offset, const fb_vec *sizes,
                         const fb_vec *strides, ptmf_tensor *r) {
    uint64_t last = (uint64_t)offset;   /* element index of the last element */
    uint64_t numel = 1, expected = 1;
    uint32_t i;
    unsigned bits = scalar_type_bits[st];
    int contiguous = 1, empty = 0;
    for (i = sizes->count; i-- > 0;) {
        int32_t size = fb_as_i32(fb_vec_u32(c, sizes, i));
        int32_t stride = fb_as_i32(fb_vec_u32(c, strides, i));
        /* Exact, size-1 dimensions included: a row-major view made from the sizes
         * alone must carry the strides the file holds (torch's); past a size 0 the
         * view holds nothing and its strides are kept as they are. */
        if (!empty && (uint64_t)stride != expected) contiguous = 0;
        if (size == 0) {
            empty = 1;
            continue;
        }
        if (numel > UINT64_MAX / (uint64_t)size) return fb_fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
        numel *= (uint64_t)size;
        expected = numel;
    }
    /* Torch counts bytes in int64 and numpy in intptr_t: the logical size must fit, and
     * so must an empty tensor's other sizes' product (numpy refuses such a shape). */
    if (numel > (uint64_t)INT64_MAX / (bits >= 8 ? bits / 8 : 1))
        return fb_fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
    if (empty) numel = 0;
    r->numel = numel;
    r->contiguous = (uint8_t)contiguous;
    r->extent = 0;
    if (numel == 0) return FB_OK;
    for (i = 0; i < sizes->count; i++) {
        int32_t size = fb_as_i32(fb_vec_u32(c, sizes, i));
        int32_t stride = fb_as_i32(fb_vec_u32(c, strides, i));
        uint64_t step;
        step = (uint64_t)(size - 1) * (uint64_t)stride;   /* < 2^62 */
        if (step > EXTENT_LIMIT || last > EXTENT_LIMIT - step)
            return fb_fail(c, FB_E_EXTENT_OVERFLOW, t->pos);
        last += step;
    }
    /* last <= EXTENT_LIMIT here, so the byte arithmetic below cannot overflow. */
    if (bits >= 8)
        r->extent = (last + 1) * (bits / 8);
    else
        r->extent = last / (8 / bits) + 1;
    return FB_OK;
}

/* One per-channel parameter tensor: one dimension of `axis_size` reals. */
static int walk_qparam(fb_ctx *c, const fb_tbl *sub, int64_t axis_size, ptmf_tensor_sink *k,
                       int32_t *slot) {
    int32_t idx;
    FB_TRY(ptmf_walk_tensor(c, sub, PTMF_NO_IVALUE, 1, k, &idx));
    if (k->records) {
        const ptmf_tensor *p = &k->records[idx];
        if (p->ndim != 1 || k->dims[p->dims] != axis_size)
            return fb_fail(c, FB_E_LENGTH_MISMATCH, sub->pos);
        if (p->scalar_type > FB_SCALAR_TYPE_FLOAT64            /* real, unquantized */
            && p->scalar_type != FB_SCALAR_TYPE_BFLOAT16)
            return fb_fail(c, FB_E_BAD_QUANTIZATION, sub->pos);
    }
    *slot = idx;
    return FB_OK;
}

static int walk_qparams(fb_ctx *c, const fb_tbl *q, int64_t axis_size, ptmf_tensor_sink *k,
                        ptmf_tensor *r) {
    int present;
    fb_tbl sub;
    unsigned id;
    int32_t *slots[2];
    slots[0] = &r->scales;
    slots[1] = &r->zero_points;
    for (id = MOBILE_QUANTIZED_SCHEMA_SCALES; id <= MOBILE_QUANTIZED_SCHEMA_ZERO_POINTS; id++) {
        const fb_field *f = &mobile_quantized_schema[id];
        FB_TRY(fb_fld_table_at(c, q, f, &sub, &present));
        if (!present)   /* per-channel parameters need both */
            return fb_fail_at(c, f, FB_NO_INDEX, FB_E_MISSING_FIELD, q->pos);
        FB_TRY_IN_FIELD(c, f, FB_NO_INDEX, walk_qparam(c, &sub, axis_size, k,
                                                 slots[id - MOBILE_QUANTIZED_SCHEMA_SCALES]));
    }
    return FB_OK;
}

/* The quantized schema q of tensor record r: its scheme and parameters. */
static int walk_quantized(fb_ctx *c, const fb_tbl *q, const fb_vec *sizes, ptmf_tensor_sink *k,
                          ptmf_tensor *r) {
    uint8_t qs;
    int32_t zp;
    FB_TRY(fb_fld_u8(c, q, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_QSCHEME], &qs));
    FB_TRY(fb_fld_f64(c, q, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_SCALE], &r->scale));
    FB_TRY(fb_fld_i32(c, q, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_ZERO_POINT], &zp));
    FB_TRY(fb_fld_i32(c, q, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_AXIS], &r->axis));
    r->zero_point = zp;
    r->qscheme = (int8_t)qs;
    if (qs == FB_QSCHEME_PER_CHANNEL_AFFINE || qs == FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
        int64_t axis_size;
        if (r->axis < 0 || (uint32_t)r->axis >= sizes->count)
            return fb_fail(c, FB_E_BAD_QUANTIZATION, q->pos);
        axis_size = fb_as_i32(fb_vec_u32(c, sizes, (uint32_t)r->axis));
        return walk_qparams(c, q, axis_size, k, r);
    }
    if (qs != FB_QSCHEME_PER_TENSOR_AFFINE)
        return fb_fail_at(c, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_QSCHEME], FB_NO_INDEX,
                       FB_E_BAD_QUANTIZATION, q->pos);
    return FB_OK;
}

/* Counts the per-channel parameter tensors of quantized schema q, those present. */
static int count_qparams(fb_ctx *c, const fb_tbl *q, ptmf_tensor_sink *k) {
    unsigned id;
    for (id = MOBILE_QUANTIZED_SCHEMA_SCALES; id <= MOBILE_QUANTIZED_SCHEMA_ZERO_POINTS; id++) {
        const fb_field *f = &mobile_quantized_schema[id];
        int present;
        fb_tbl sub;
        int32_t idx;
        FB_TRY(fb_fld_table_at(c, q, f, &sub, &present));
        if (present) FB_TRY_IN_FIELD(c, f, FB_NO_INDEX, ptmf_walk_tensor(c, &sub, PTMF_NO_IVALUE, 1, k, &idx));
    }
    return FB_OK;
}

/* Reads one TensorMetadata; with k->records NULL it only counts. */
int ptmf_walk_tensor(fb_ctx *c, const fb_tbl *t, uint32_t ivalue, int nested, ptmf_tensor_sink *k,
                     int32_t *record_index) {
    uint32_t storage, i;
    uint8_t st_raw, grad;
    int32_t offset;
    fb_vec sizes, strides;
    fb_tbl q;
    int quantized;
    ptmf_tensor *r = NULL;
    uint32_t self = k->n_tensors;

    if (k->records && self >= k->capacity) return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
    k->n_tensors++;
    *record_index = (int32_t)self;
    FB_TRY(fb_fld_vec_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_SIZES], &sizes));
    FB_TRY(fb_fld_vec_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STRIDES], &strides));
    if (strides.count != sizes.count)
        return fb_fail_at(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STRIDES], FB_NO_INDEX,
                       FB_E_LENGTH_MISMATCH, t->pos);
    FB_TRY(fb_count_elements(c, 2 * (uint64_t)sizes.count, t->pos));
    FB_TRY(fb_fld_table_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_QUANTIZED_SCHEMA], &q,
                     &quantized));
    if (k->records) {
        if (k->n_dims > k->dims_capacity || 2 * (uint64_t)sizes.count > k->dims_capacity - k->n_dims)
            return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
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
        if (quantized)
            FB_TRY(fb_fld_u8(c, &q, &mobile_quantized_schema[MOBILE_QUANTIZED_SCHEMA_QSCHEME], &qs));
        if (quantized && (qs == FB_QSCHEME_PER_CHANNEL_AFFINE
                          || qs == FB_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS)) {
            if (nested) return fb_fail(c, FB_E_BAD_QUANTIZATION, q.pos);
            FB_TRY_IN_FIELD(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_QUANTIZED_SCHEMA],
                         FB_NO_INDEX, count_qparams(c, &q, k));
        }
        return FB_OK;
    }

    FB_TRY(fb_fld_u32_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STORAGE_LOCATION_INDEX],
                   &storage));
    if (storage >= k->n_storages)
        return fb_fail_at(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STORAGE_LOCATION_INDEX],
                       FB_NO_INDEX, FB_E_BAD_STORAGE_INDEX, t->pos);
    FB_TRY(fb_fld_u8_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_SCALAR_TYPE], &st_raw));
    if (st_raw >= FB_SCALAR_TYPE_COUNT)
        return fb_fail_at(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_SCALAR_TYPE], FB_NO_INDEX,
                       FB_E_BAD_SCALAR_TYPE, t->pos);
    FB_TRY(fb_fld_i32_at(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STORAGE_OFFSET], &offset));
    if (offset < 0)
        return fb_fail_at(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_STORAGE_OFFSET], FB_NO_INDEX,
                       FB_E_NEGATIVE_DIMENSION, t->pos);
    FB_TRY(fb_fld_u8(c, t, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_REQUIRES_GRAD], &grad));
    r->storage = storage;
    r->scalar_type = (int8_t)st_raw;
    r->storage_offset = offset;
    r->requires_grad = grad != 0;
    for (i = 0; i < sizes.count; i++) {
        int32_t size = fb_as_i32(fb_vec_u32(c, &sizes, i));
        int32_t stride = fb_as_i32(fb_vec_u32(c, &strides, i));
        if (size < 0 || stride < 0)
            return fb_fail_at(c, &mobile_tensor_metadata[size < 0 ? MOBILE_TENSOR_METADATA_SIZES
                                                               : MOBILE_TENSOR_METADATA_STRIDES],
                           i, FB_E_NEGATIVE_DIMENSION,
                           (size < 0 ? sizes.data : strides.data) + 4 * (uint64_t)i);
        k->dims[r->dims + i] = size;
        k->dims[r->dims + sizes.count + i] = stride;
    }
    FB_TRY(tensor_extent(c, t, st_raw, offset, &sizes, &strides, r));
    if (r->extent > k->storages[storage].size) return fb_fail(c, FB_E_OUTSIDE_STORAGE, t->pos);

    if (quantized != is_quantized_type(st_raw)) return fb_fail(c, FB_E_BAD_QUANTIZATION, t->pos);
    if (quantized) {
        if (nested)
            return fb_fail_at(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_QUANTIZED_SCHEMA],
                           FB_NO_INDEX, FB_E_BAD_QUANTIZATION, q.pos);
        FB_TRY_IN_FIELD(c, &mobile_tensor_metadata[MOBILE_TENSOR_METADATA_QUANTIZED_SCHEMA], FB_NO_INDEX,
                     walk_quantized(c, &q, &sizes, k, r));
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

/* The TensorMetadata table at `pos`, of ivalue i. */
static int open_tensor(fb_ctx *c, uint64_t pos, ptmf_tensor_sink *k, uint32_t i, int32_t *idx) {
    fb_tbl t;
    FB_TRY(fb_tbl_open(c, pos, &t));
    return ptmf_walk_tensor(c, &t, i, 0, k, idx);
}

/* The tensor record of tensor ivalue i. */
static int index_tensor(fb_ctx *c, ptmf_tensor_sink *k, ptmf_ivalue *ivalues, uint32_t i) {
    int32_t idx;
    FB_TRY_IN_MEMBER(c, &mobile_i_value[MOBILE_I_VALUE_VAL], &mobile_i_value_union[UT_TENSOR],
                  open_tensor(c, ivalues[i].pos, k, i, &idx));
    ivalues[i].target = (uint32_t)idx;
    return FB_OK;
}

int ptmf_index_tensors(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *ivalues,
                       const ptmf_storage *storages, ptmf_tensor *tensors,
                       int64_t *dims, fb_error *err) {
    fb_ctx c;
    ptmf_tensor_sink k;
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
        FB_TRY_IN_FIELD(&c, &mobile_module[MOBILE_MODULE_IVALUES], i,
                     index_tensor(&c, &k, ivalues, i));
    }
    if (k.n_tensors != s->n_tensors || k.n_dims != s->n_dims)   /* the buffer changed */
        return fb_fail_at(&c, &mobile_module[MOBILE_MODULE_IVALUES], FB_NO_INDEX, FB_E_BAD_ARGUMENT,
                       s->ivalues);
    fb_ctx_finish(&c);
    return FB_OK;
}

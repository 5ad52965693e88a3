/*
 * et.c: what ExecuTorch programs (.pte) and data files (.ptd) mean, on top of the generic
 * layer: their headers, their segments (64-bit offsets after the flatbuffer) and every
 * cross-reference the runtime follows. The flatbuffer's structure was checked by
 * fb_verify_table from the schema before anything here reads it.
 *
 * Facts (ExecuTorch 1.5.1, checked on its own files): a .pte's optional `eh00` header at
 * byte 8 gives the flatbuffer's size and where the segment data starts; without it the
 * file is all flatbuffer and has no segments. Constant tensors are in the constant
 * segment (buffer i starts at offsets[i] of that segment) or, in older programs, in the
 * inline constant_buffer; data_buffer_idx 0 means no data, except for an external tensor
 * (found by name in a .ptd). A .ptd's `FH01` header at byte 8 gives its flatbuffer's
 * extent and its segment data.
 */
#include "executorch/et.h"

#include "fb/fb.h"

FB_STATUS_BLOCK(et_statuses, ET);

#define EH_MAGIC 0x30306865u   /* "eh00" */
#define FH_MAGIC 0x31304846u   /* "FH01" */

unsigned et_element_size(int type) {
    switch (type) {
    case ET_SCALAR_TYPE_BYTE: case ET_SCALAR_TYPE_CHAR: case ET_SCALAR_TYPE_BOOL:
    case ET_SCALAR_TYPE_QINT8: case ET_SCALAR_TYPE_QUINT8: case ET_SCALAR_TYPE_QUINT4X2:
    case ET_SCALAR_TYPE_QUINT2X4: case ET_SCALAR_TYPE_FLOAT8E5M2:
    case ET_SCALAR_TYPE_FLOAT8E4M3FN: case ET_SCALAR_TYPE_FLOAT8E5M2FNUZ:
    case ET_SCALAR_TYPE_FLOAT8E4M3FNUZ:
        return 1;
    case ET_SCALAR_TYPE_SHORT: case ET_SCALAR_TYPE_HALF: case ET_SCALAR_TYPE_BFLOAT16:
    case ET_SCALAR_TYPE_BITS16: case ET_SCALAR_TYPE_UINT16:
        return 2;
    case ET_SCALAR_TYPE_INT: case ET_SCALAR_TYPE_FLOAT: case ET_SCALAR_TYPE_QINT32:
    case ET_SCALAR_TYPE_UINT32:
        return 4;
    case ET_SCALAR_TYPE_LONG: case ET_SCALAR_TYPE_DOUBLE: case ET_SCALAR_TYPE_UINT64:
        return 8;
    default:
        return 0;
    }
}

/* The walk over a verified file: counts, or fills the records when they are given. */
typedef struct walk {
    fb_ctx c;
    const et_summary *s;
    et_record *tensors;
    et_blob *blobs;
    uint32_t n_tensors, n_blobs;
    uint64_t n_delegates_all;      /* of every plan walked so far */
    fb_vec segments;                  /* DataSegment tables */
    fb_vec constant_buffer;           /* Buffer tables (inline constants) */
    fb_vec constant_offsets;          /* uint64 offsets into the constant segment */
    fb_vec mutable_segments;          /* SubsegmentOffsets tables: mutable buffers' first values */
    uint64_t constant_start, constant_size;   /* the constant segment, file offsets */
    /* the execution plan being walked */
    uint32_t plan, n_values, n_operators, n_delegates;
    fb_vec values;                    /* EValue tables */
    fb_vec buffer_sizes;              /* int64 non_const_buffer_sizes */
    /* WALK_FUSED: the structural pass's context, which checks each plan's structure as
     * the meaning reads it (NULL in the other walks) */
    fb_ctx *structure;
} walk;

/* ---------------------------------------------------------------- headers */

/* The checks both headers end with: the flatbuffer after the header and inside the file of
 * `size` bytes, the segment data inside the file (its base offset at byte `at`, its size
 * after it). A failure for a file too short records its size and the bytes it needs. */
static int truncated(fb_ctx *c, uint64_t size, uint64_t at, uint64_t need) {
    fb_truncated(c, ET_E_BAD_HEADER, at, need);
    if (c->err) c->err->size = size;
    return ET_E_BAD_HEADER;
}

static int check_extents(fb_ctx *c, uint64_t size, uint32_t length, uint64_t flatbuffer_end,
                         uint64_t base, uint64_t segment_size, uint64_t at) {
    if (flatbuffer_end < 8 + (uint64_t)length) return fb_fail(c, ET_E_BAD_HEADER, 16);
    if (flatbuffer_end > size) return truncated(c, size, 16, flatbuffer_end);
    if (base > size) return truncated(c, size, at, base);
    if (segment_size > size - base)
        return segment_size > UINT64_MAX - base ? fb_fail(c, ET_E_BAD_HEADER, at + 8)
                                                : truncated(c, size, at + 8, base + segment_size);
    return FB_OK;
}

/* The header's own bytes, from its magic on, must be in the file, and in the buffer: a
 * buffer that holds fewer of the file's bytes than its header is the caller's fault. */
static int check_header_bytes(fb_ctx *c, uint64_t size, uint32_t length) {
    if ((uint64_t)length > size - 8) return truncated(c, size, 12, 8 + (uint64_t)length);
    if ((uint64_t)length > c->len - 8) return fb_fail(c, FB_E_BAD_ARGUMENT, 0);
    return FB_OK;
}

int et_read_extended_header(const uint8_t *buf, size_t len, uint64_t size,
                            et_extended_header *h, fb_error *err) {
    fb_ctx c;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    memset(h, 0, sizeof *h);
    if (len > size) return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    if (len < 16 || fb_ld32(buf + 8) != EH_MAGIC) {   /* none: all flatbuffer, no segments */
        h->program_size = size;
        h->segment_base_offset = size;
        return FB_OK;
    }
    fb_push(&c, "header", FB_NO_INDEX);
    /* eh00, u32 length, u64 program size, u64 segment base[, u64 segment data size] */
    h->length = fb_ld32(buf + 12);
    if (h->length < 24) return fb_fail(&c, ET_E_BAD_HEADER, 12);
    FB_TRY(check_header_bytes(&c, size, h->length));
    h->program_size = fb_ld64(buf + 16);
    h->segment_base_offset = fb_ld64(buf + 24);
    h->segment_data_size = h->length >= 32 ? fb_ld64(buf + 32)
                           : (h->segment_base_offset <= size ? size - h->segment_base_offset
                                                             : 0);
    return check_extents(&c, size, h->length, h->program_size, h->segment_base_offset,
                         h->segment_data_size, 24);
}

int et_read_flat_tensor_header(const uint8_t *buf, size_t len, uint64_t size,
                               et_flat_tensor_header *h, fb_error *err) {
    fb_ctx c;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    memset(h, 0, sizeof *h);
    if (len > size) return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    fb_push(&c, "header", FB_NO_INDEX);
    /* FH01, u32 length, u64 flatbuffer offset, u64 flatbuffer size, u64 segment base,
     * u64 segment data size */
    if (len < 16 || fb_ld32(buf + 8) != FH_MAGIC) return fb_fail(&c, ET_E_BAD_HEADER, 8);
    h->length = fb_ld32(buf + 12);
    if (h->length < 40) return fb_fail(&c, ET_E_BAD_HEADER, 12);
    FB_TRY(check_header_bytes(&c, size, h->length));
    h->flatbuffer_offset = fb_ld64(buf + 16);
    h->flatbuffer_size = fb_ld64(buf + 24);
    if (h->flatbuffer_size > UINT64_MAX - h->flatbuffer_offset)
        return fb_fail(&c, ET_E_BAD_HEADER, 16);
    if (h->flatbuffer_offset + h->flatbuffer_size > size)
        return truncated(&c, size, 16, h->flatbuffer_offset + h->flatbuffer_size);
    h->segment_base_offset = fb_ld64(buf + 32);
    h->segment_data_size = fb_ld64(buf + 40);
    return check_extents(&c, size, h->length, h->flatbuffer_offset + h->flatbuffer_size,
                         h->segment_base_offset, h->segment_data_size, 32);
}

/* The identifier, then the header of a program or a data file of `size` bytes (buf holds
 * its first len), as the summary's extents. */
static int read_header(const uint8_t *buf, uint64_t len, uint64_t size, et_summary *s,
                       fb_error *err) {
    fb_ctx c;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    if (len < 8) {
        if (len == size) return fb_fail(&c, FB_E_TOO_SMALL, 0);
        return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    }
    s->identifier = fb_ld32(buf + 4);
    if (s->identifier == ET_FILE_IDENTIFIER) {
        et_extended_header h;
        FB_TRY(et_read_extended_header(buf, (size_t)len, size, &h, err));
        s->header_length = h.length;
        s->flatbuffer_end = h.program_size;
        s->segment_base = h.segment_base_offset;
        s->segment_size = h.segment_data_size;
    } else if (s->identifier == FT_FILE_IDENTIFIER) {
        et_flat_tensor_header h;
        FB_TRY(et_read_flat_tensor_header(buf, (size_t)len, size, &h, err));
        s->header_length = h.length;
        s->flatbuffer_end = h.flatbuffer_offset + h.flatbuffer_size;
        s->segment_base = h.segment_base_offset;
        s->segment_size = h.segment_data_size;
    } else {
        return fb_fail(&c, FB_E_BAD_IDENTIFIER, 4);
    }
    return FB_OK;
}

int et_extent(const uint8_t *buf, size_t len, uint64_t size, et_summary *s, fb_error *err) {
    memset(s, 0, sizeof *s);
    return read_header(buf, (uint64_t)len, size, s, err);
}

/* ------------------------------------------------------------- segments */

/* File offset and size of segment `index`, checked inside the segment data. The runtime
 * loads a delegate's, a named datum's or the constant segment whole, but a mutable
 * tensor's first values alone, bounded by the segment's size and the file: for a mutable
 * data segment (`cut`), a size past the segment data is cut at its end (strict mode
 * refuses it). */
static int segment_at(walk *w, uint32_t index, uint64_t where, int cut, uint64_t *start,
                      uint64_t *size) {
    fb_ctx *c = &w->c;
    fb_tbl t;
    uint64_t off, n;
    if (index >= w->segments.count) return fb_fail(c, FB_E_BAD_INDEX, where);
    FB_TRY(fb_vec_table(c, &w->segments, index, &t));
    FB_TRY(fb_fld_u64(c, &t, &et_data_segment[ET_DATA_SEGMENT_OFFSET], &off));
    FB_TRY(fb_fld_u64(c, &t, &et_data_segment[ET_DATA_SEGMENT_SIZE], &n));
    if (off > w->s->segment_size) return fb_fail(c, ET_E_BAD_SEGMENT, t.pos);
    if (n > w->s->segment_size - off) {
        if (!cut || c->strict) return fb_fail(c, ET_E_BAD_SEGMENT, t.pos);
        n = w->s->segment_size - off;
    }
    *start = w->s->segment_base + off;
    *size = n;
    return FB_OK;
}

/* The file's segments, root field f. Strict mode: every one lies inside the segment
 * data. Otherwise only the segments used are checked, each where it is used (segment_at),
 * as the runtime loads a segment only when a constant, a delegate or named data needs it. */
static int file_segments(walk *w, const fb_tbl *root, const fb_field *f) {
    uint32_t i;
    FB_TRY(fb_fld_vec(&w->c, root, f, &w->segments));
    if (!w->c.strict) return FB_OK;
    for (i = 0; i < w->segments.count; i++) {
        uint64_t start, size;
        FB_TRY(fb_at_field(&w->c, f, i, segment_at(w, i, w->segments.data, 0, &start, &size)));
    }
    return FB_OK;
}

/* A named data entry (both formats' NamedData start with key, segment_index). */
static int named_data(walk *w, const fb_tbl *t, const fb_field *key, const fb_field *segment,
                      int32_t tensor) {
    fb_vec k;
    uint32_t index;
    uint64_t start, size;
    /* looked up by strcmp, and logged when missing (et_c_string) */
    FB_TRY(et_c_string(&w->c, t, key, &k, 1));
    FB_TRY(fb_fld_u32(&w->c, t, segment, &index));
    FB_TRY(segment_at(w, index, t->pos, 0, &start, &size));
    if (w->blobs && w->n_blobs >= w->s->n_blobs) return fb_fail(&w->c, FB_E_BAD_ARGUMENT, 0);
    if (w->blobs) {
        et_blob *b = &w->blobs[w->n_blobs];
        b->key = k.data;
        b->key_len = k.count;
        b->segment = index;
        b->data = start;
        b->size = size;
        b->tensor = tensor;
    }
    w->n_blobs++;
    return FB_OK;
}

/* -------------------------------------------------------------- tensors */

/* Where the next tensor record goes: the caller's array (never past the count et_open
 * found: the buffer may have changed since), or `scratch` when only counting. */
static int record_slot(walk *w, et_record *scratch, et_record **r) {
    if (w->tensors && w->n_tensors >= w->s->n_tensors) return fb_fail(&w->c, FB_E_BAD_ARGUMENT, 0);
    *r = w->tensors ? &w->tensors[w->n_tensors] : scratch;
    memset(*r, 0, sizeof **r);
    return FB_OK;
}

int et_tensor_layout(fb_ctx *c, const fb_tbl *t, const fb_field *type_f, const fb_field *sizes_f,
                     const fb_field *order_f, et_record *r) {
    fb_vec sizes, order;
    uint8_t type;
    uint64_t numel = 1, at;
    unsigned esize;
    uint32_t i;
    int empty = 0;
    FB_TRY(fb_fld_u8(c, t, type_f, &type));
    r->scalar_type = (int8_t)type;
    esize = et_element_size((int8_t)type);
    if (!esize) {
        FB_TRY(fb_tbl_field(c, t, type_f->id, 1, &at));
        return fb_fail(c, FB_E_BAD_SCALAR_TYPE, at ? at : t->pos);
    }
    FB_TRY(fb_fld_vec(c, t, sizes_f, &sizes));
    FB_TRY(fb_fld_vec(c, t, order_f, &order));
    for (i = 0; i < sizes.count; i++) {
        int32_t d = fb_as_i32(fb_vec_u32(c, &sizes, i));
        if (d < 0) return fb_fail(c, FB_E_NEGATIVE_DIMENSION, sizes.data + 4 * (uint64_t)i);
        if (d == 0) {
            empty = 1;
            continue;
        }
        if (numel > UINT64_MAX / (uint64_t)d)
            return fb_fail(c, FB_E_EXTENT_OVERFLOW, sizes.data);
        numel *= (uint64_t)d;
    }
    /* numpy counts an array's bytes in intptr_t, an empty one's other sizes' product too
     * (it refuses such a shape), and the runtime in size_t. */
    if (numel > (uint64_t)INT64_MAX / esize) return fb_fail(c, FB_E_EXTENT_OVERFLOW, sizes.data);
    if (empty) numel = 0;
    {   /* the runtime reads as many entries as there are sizes */
        uint64_t seen[4] = {0, 0, 0, 0};   /* a bit per dimension */
        if (order.count != sizes.count || sizes.count > 256)
            return fb_fail(c, ET_E_BAD_DIM_ORDER, order.data ? order.data : t->pos);
        for (i = 0; i < order.count; i++) {
            uint8_t d = c->buf[order.data + i];
            uint64_t bit = UINT64_C(1) << (d % 64);
            if (d >= order.count || (seen[d / 64] & bit))
                return fb_fail(c, ET_E_BAD_DIM_ORDER, order.data + i);
            seen[d / 64] |= bit;
        }
    }
    r->table = t->pos;
    r->ndim = sizes.count;
    r->sizes = sizes.data;
    r->dim_order = order.count ? order.data : 0;
    r->nbytes = numel * esize;
    return FB_OK;
}

/* File offset of sub-buffer `index` of a segment that starts at `start` and holds `size`
 * bytes, cut at `offsets`, and the bytes from there to the segment's end: as the runtime
 * reads a constant or a mutable tensor's first values, at offsets[index], bounded by the
 * segment alone (the next offset plays no part, nor do offsets no tensor uses). */
static int subsegment(walk *w, const fb_vec *offsets, uint64_t start, uint64_t size,
                      uint32_t index, uint64_t where, uint64_t *at, uint64_t *n) {
    fb_ctx *c = &w->c;
    uint64_t off;
    if (index >= offsets->count) return fb_fail(c, FB_E_BAD_STORAGE_INDEX, where);
    off = fb_ld64(c->buf + offsets->data + 8 * (uint64_t)index);
    if (off > size) return fb_fail(c, ET_E_BAD_SEGMENT, offsets->data + 8 * (uint64_t)index);
    *at = start + off;
    *n = size - off;
    return FB_OK;
}

/* Where a constant's bytes are: buffer `index` of the constant segment, or of the inline
 * constant_buffer when the program has one (the runtime's order). */
static int constant_data(walk *w, uint32_t index, uint64_t where, et_record *r) {
    fb_ctx *c = &w->c;
    uint64_t start, end;
    if (w->constant_buffer.count) {
        fb_tbl b;
        fb_vec storage;
        if (index >= w->constant_buffer.count) return fb_fail(c, FB_E_BAD_STORAGE_INDEX, where);
        FB_TRY(fb_vec_table(c, &w->constant_buffer, index, &b));
        FB_TRY(fb_fld_vec(c, &b, &et_buffer[ET_BUFFER_STORAGE], &storage));
        start = storage.data;
        end = storage.data + storage.count;
    } else {
        uint64_t n;
        FB_TRY(subsegment(w, &w->constant_offsets, w->constant_start, w->constant_size, index,
                       where, &start, &n));
        end = start + n;
    }
    if (r->nbytes > end - start) return fb_fail(c, FB_E_OUTSIDE_STORAGE, where);
    r->data = start;
    return FB_OK;
}

/* A tensor's ExtraTensorInfo: where its data is and, when external, its name. */
static int extra_tensor_info(walk *w, const fb_tbl *extra, uint8_t *location, et_record *r) {
    fb_ctx *c = &w->c;
    const fb_field *name_f = &et_extra_tensor_info[ET_EXTRA_TENSOR_INFO_FULLY_QUALIFIED_NAME];
    fb_vec name;
    FB_TRY(fb_fld_u8(c, extra, &et_extra_tensor_info[ET_EXTRA_TENSOR_INFO_LOCATION], location));
    FB_TRY(fb_fld_text(c, extra, name_f, &name));
    if (*location > ET_TENSOR_DATA_LOCATION_EXTERNAL) return fb_fail(c, FB_E_BAD_INDEX, extra->pos);
    if (*location == ET_TENSOR_DATA_LOCATION_EXTERNAL) {
        if (name.data == 0) return fb_fail(c, FB_E_MISSING_FIELD, extra->pos);   /* its meaning */
        /* the runtime looks an external tensor up by this name read as a C string, and
         * this reader by the whole name: one with a NUL inside would resolve otherwise */
        FB_TRY(et_c_string(c, extra, name_f, &name, 1));
    }
    r->name = name.data;
    r->name_len = name.count;
    return FB_OK;
}

/* WALK_FUSED: a Tensor's allocation_info, which fused_member leaves to tensor_value
 * (opened by fb_fld_table as the structural pass opens it); `read`: allocation_info()
 * read its three fields with their checking readers. */
static int fused_allocation(walk *w, const fb_tbl *alloc, int read) {
    const fb_field *f = et_allocation_details;
    uint64_t skip = 0;
    if (read)
        skip = UINT64_C(1) << f[ET_ALLOCATION_DETAILS_MEMORY_ID].id
               | UINT64_C(1) << f[ET_ALLOCATION_DETAILS_MEMORY_OFFSET_LOW].id
               | UINT64_C(1) << f[ET_ALLOCATION_DETAILS_MEMORY_OFFSET_HIGH].id;
    w->structure->tables++;   /* bounded after the walk */
    return fb_verify_fields(w->structure, &et_schema_file, ET_DECL_ALLOCATION_DETAILS, alloc,
                            NULL, skip, 4);
}

/* A memory-planned tensor's AllocationDetails: inside its arena. */
static int allocation_info(walk *w, const fb_tbl *alloc, et_record *r) {
    fb_ctx *c = &w->c;
    uint32_t id, low, high;
    int64_t size;
    FB_TRY(fb_fld_u32(c, alloc, &et_allocation_details[ET_ALLOCATION_DETAILS_MEMORY_ID], &id));
    FB_TRY(fb_fld_u32(c, alloc, &et_allocation_details[ET_ALLOCATION_DETAILS_MEMORY_OFFSET_LOW], &low));
    FB_TRY(fb_fld_u32(c, alloc, &et_allocation_details[ET_ALLOCATION_DETAILS_MEMORY_OFFSET_HIGH], &high));
    if (id >= w->buffer_sizes.count) return fb_fail(c, FB_E_BAD_INDEX, alloc->pos);
    size = (int64_t)fb_ld64(c->buf + w->buffer_sizes.data + 8 * (uint64_t)id);
    r->memory_id = id;
    r->memory_offset = (uint64_t)low | ((uint64_t)high << 32);
    if (size < 0 || r->memory_offset > (uint64_t)size
        || r->nbytes > (uint64_t)size - r->memory_offset)
        return fb_fail(c, FB_E_OUTSIDE_STORAGE, alloc->pos);
    r->stored = ET_STORED_PLANNED;
    return FB_OK;
}

static int tensor_value(walk *w, const fb_tbl *t, uint32_t value) {
    fb_ctx *c = &w->c;
    et_record rec, *r;
    fb_tbl alloc, extra;
    int has_alloc, has_extra;
    uint32_t index;
    uint8_t location = ET_TENSOR_DATA_LOCATION_SEGMENT, dynamism;
    FB_TRY(record_slot(w, &rec, &r));
    r->plan = w->plan;
    r->value = value;
    FB_TRY(et_tensor_layout(c, t, &et_tensor[ET_TENSOR_SCALAR_TYPE], &et_tensor[ET_TENSOR_SIZES],
                         &et_tensor[ET_TENSOR_DIM_ORDER], r));
    if (w->structure)   /* sizes and dim_order, which fused_skip leaves to this walk */
        FB_TRY(fb_count_elements(w->structure, 2 * (uint64_t)r->ndim, t->pos));
    FB_TRY(fb_fld_u8(c, t, &et_tensor[ET_TENSOR_SHAPE_DYNAMISM], &dynamism));
    r->shape_dynamism = dynamism;
    FB_TRY(fb_fld_u32(c, t, &et_tensor[ET_TENSOR_DATA_BUFFER_IDX], &index));
    FB_TRY(fb_fld_table(c, t, &et_tensor[ET_TENSOR_ALLOCATION_INFO], &alloc, &has_alloc));
    FB_TRY(fb_fld_table(c, t, &et_tensor[ET_TENSOR_EXTRA_TENSOR_INFO], &extra, &has_extra));
    if (has_extra)
        FB_TRY_IN_FIELD(c, &et_tensor[ET_TENSOR_EXTRA_TENSOR_INFO], FB_NO_INDEX,
                     extra_tensor_info(w, &extra, &location, r));
    if (location == ET_TENSOR_DATA_LOCATION_EXTERNAL) {
        r->stored = ET_STORED_EXTERNAL;
    } else if (has_alloc) {
        FB_TRY(fb_at_field(c, &et_tensor[ET_TENSOR_ALLOCATION_INFO], FB_NO_INDEX,
                     allocation_info(w, &alloc, r)));
        if (index > 0 && w->mutable_segments.count) {
            /* a mutable buffer's first values: sub-buffer data_buffer_idx of mutable data
             * segment extra_tensor_info.mutable_data_segments_idx */
            uint64_t which = 0, start, size, at, n;
            uint32_t segment;
            fb_tbl m;
            fb_vec offsets;
            if (has_extra)
                FB_TRY(fb_fld_u64(c, &extra, &et_extra_tensor_info[
                                           ET_EXTRA_TENSOR_INFO_MUTABLE_DATA_SEGMENTS_IDX], &which));
            if (which >= w->mutable_segments.count) return fb_fail(c, FB_E_BAD_INDEX, t->pos);
            FB_TRY(fb_vec_table(c, &w->mutable_segments, (uint32_t)which, &m));
            FB_TRY(fb_fld_u32(c, &m, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_SEGMENT_INDEX],
                        &segment));
            FB_TRY(segment_at(w, segment, m.pos, 1, &start, &size));
            FB_TRY(fb_fld_vec(c, &m, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_OFFSETS], &offsets));
            FB_TRY(subsegment(w, &offsets, start, size, index, t->pos, &at, &n));
            if (r->nbytes > n) return fb_fail(c, FB_E_OUTSIDE_STORAGE, t->pos);
            r->data = at;
            r->initial = 1;
        }
    } else if (index > 0) {
        FB_TRY(constant_data(w, index, t->pos, r));
        r->stored = ET_STORED_CONSTANT;
    }
    if (w->structure && has_alloc)
        FB_TRY(fused_allocation(w, &alloc, location != ET_TENSOR_DATA_LOCATION_EXTERNAL));
    w->n_tensors++;
    return FB_OK;
}

/* ---------------------------------------------------------- execution plans */

/* WALK_FUSED reads each EValue and Instruction table, most of a program's tables, once
 * for both passes: the meaning walk opens the table and its union (fb_union_open makes
 * every check the structural pass makes of them), and the structural pass's context
 * checks the union's member, counting the two tables as that pass would. */
static const fb_field *const fused_shallow[] = {
    &et_execution_plan[ET_EXECUTION_PLAN_VALUES], &et_chain[ET_CHAIN_INSTRUCTIONS], NULL};

/* The id bit of field i of declaration `fields`. */
#define FIELD_BIT(fields, i) (UINT64_C(1) << (fields)[i].id)

/* WALK_FUSED: the fields of a union member of declaration `decl` that the meaning walk
 * reads unconditionally with the checking readers of their kind, which the structural
 * pass leaves to it (the walk counts the vectors' elements: fused_count). */
static uint64_t fused_skip(unsigned decl) {
    switch (decl) {
    case ET_DECL_TENSOR:
        return FIELD_BIT(et_tensor, ET_TENSOR_SCALAR_TYPE) | FIELD_BIT(et_tensor, ET_TENSOR_SIZES)
               | FIELD_BIT(et_tensor, ET_TENSOR_DIM_ORDER)
               | FIELD_BIT(et_tensor, ET_TENSOR_SHAPE_DYNAMISM)
               | FIELD_BIT(et_tensor, ET_TENSOR_DATA_BUFFER_IDX)
               | FIELD_BIT(et_tensor, ET_TENSOR_ALLOCATION_INFO);
    case ET_DECL_INT_LIST:
        return FIELD_BIT(et_int_list, ET_INT_LIST_ITEMS);
    case ET_DECL_TENSOR_LIST:
        return FIELD_BIT(et_tensor_list, ET_TENSOR_LIST_ITEMS);
    case ET_DECL_OPTIONAL_TENSOR_LIST:
        return FIELD_BIT(et_optional_tensor_list, ET_OPTIONAL_TENSOR_LIST_ITEMS);
    case ET_DECL_KERNEL_CALL:
        return FIELD_BIT(et_kernel_call, ET_KERNEL_CALL_OP_INDEX)
               | FIELD_BIT(et_kernel_call, ET_KERNEL_CALL_ARGS);
    case ET_DECL_DELEGATE_CALL:
        return FIELD_BIT(et_delegate_call, ET_DELEGATE_CALL_DELEGATE_INDEX)
               | FIELD_BIT(et_delegate_call, ET_DELEGATE_CALL_ARGS);
    case ET_DECL_MOVE_CALL:
        return FIELD_BIT(et_move_call, ET_MOVE_CALL_MOVE_FROM)
               | FIELD_BIT(et_move_call, ET_MOVE_CALL_MOVE_TO);
    case ET_DECL_FREE_CALL:
        return FIELD_BIT(et_free_call, ET_FREE_CALL_VALUE_INDEX);
    default:
        return 0;
    }
}

/* WALK_FUSED: union value u, just opened at nesting `depth`, as the structural pass
 * checks it, but for the fields fused_skip leaves to the meaning walk. */
static int fused_member(walk *w, const fb_union_value *u, uint32_t depth) {
    if (!w->structure) return FB_OK;
    w->structure->tables++;   /* the table holding the union (bounded after the walk) */
    if (!u->member || u->member->kind != FB_TABLE || !u->pos) return FB_OK;
    w->structure->tables++;
    return fb_verify_fields(w->structure, &et_schema_file, u->member->ref, &u->table, NULL,
                            fused_skip(u->member->ref), depth);
}

/* WALK_FUSED: what the structural pass counts of vector v, which fused_skip left to the
 * meaning walk. */
static int fused_count(walk *w, const fb_vec *v) {
    return w->structure ? fb_count_elements(w->structure, v->count, v->data) : FB_OK;
}

/* WALK_FUSED: the structure of plan p, as fb_verify_table checks it, but for the
 * EValue and Instruction tables (fused_member) and what it counts of their vectors. */
static int fused_plan(walk *w, const fb_tbl *p) {
    fb_ctx *c = w->structure;
    fb_tbl t;
    fb_vec values;
    if (!c) return FB_OK;
    FB_TRY(fb_tbl_open(c, p->pos, &t));
    FB_TRY(fb_verify_fields(c, &et_schema_file, et_program[ET_PROGRAM_EXECUTION_PLAN].ref, &t,
                            fused_shallow, 0, 1));
    FB_TRY(fb_fld_vec(c, &t, &et_execution_plan[ET_EXECUTION_PLAN_VALUES], &values));
    return fb_count_elements(c, values.count, values.data);
}

/* Every int32 of `v` must index a value (-1 too when `optional`). */
static int value_indices(walk *w, const fb_vec *v, int optional) {
    uint32_t i;
    for (i = 0; i < v->count; i++) {
        int32_t x = fb_as_i32(fb_vec_u32(&w->c, v, i));
        if (optional && x == -1) continue;
        if (x < 0 || (uint32_t)x >= w->n_values)
            return fb_fail(&w->c, FB_E_BAD_INDEX, v->data + 4 * (uint64_t)i);
    }
    return FB_OK;
}

static int index_field(walk *w, const fb_tbl *t, const fb_field *f, uint64_t bound) {
    int32_t x;
    FB_TRY(fb_fld_i32(&w->c, t, f, &x));
    if (x < 0 || (uint64_t)x >= bound) {
        uint64_t at;
        FB_TRY(fb_tbl_field(&w->c, t, f->id, 4, &at));
        return fb_fail(&w->c, FB_E_BAD_INDEX, at ? at : t->pos);
    }
    return FB_OK;
}

static int value_list_field(walk *w, const fb_tbl *t, const fb_field *f, int optional) {
    fb_vec v;
    FB_TRY(fb_fld_vec(&w->c, t, f, &v));
    return value_indices(w, &v, optional);
}

/* A call's `args` (field f of its arguments a): value indices, a vector fused_skip leaves
 * to this walk. */
static int call_args(walk *w, const fb_tbl *a, const fb_field *f) {
    fb_vec v;
    FB_TRY(fb_fld_vec(&w->c, a, f, &v));
    FB_TRY(fused_count(w, &v));
    return value_indices(w, &v, 0);
}

/* What the arguments `a` of an instruction of type `type` index. */
static int instruction_args(walk *w, uint8_t type, const fb_tbl *a, uint32_t n_instructions) {
    switch (type) {
    case ET_INSTRUCTION_ARGUMENTS_KERNEL_CALL:
        FB_TRY(index_field(w, a, &et_kernel_call[ET_KERNEL_CALL_OP_INDEX], w->n_operators));
        FB_TRY(call_args(w, a, &et_kernel_call[ET_KERNEL_CALL_ARGS]));
        break;
    case ET_INSTRUCTION_ARGUMENTS_DELEGATE_CALL:
        FB_TRY(index_field(w, a, &et_delegate_call[ET_DELEGATE_CALL_DELEGATE_INDEX],
                        w->n_delegates));
        FB_TRY(call_args(w, a, &et_delegate_call[ET_DELEGATE_CALL_ARGS]));
        break;
    case ET_INSTRUCTION_ARGUMENTS_MOVE_CALL:
        FB_TRY(index_field(w, a, &et_move_call[ET_MOVE_CALL_MOVE_FROM], w->n_values));
        FB_TRY(index_field(w, a, &et_move_call[ET_MOVE_CALL_MOVE_TO], w->n_values));
        break;
    case ET_INSTRUCTION_ARGUMENTS_JUMP_FALSE_CALL:
        FB_TRY(index_field(w, a, &et_jump_false_call[ET_JUMP_FALSE_CALL_COND_VALUE_INDEX],
                        w->n_values));
        /* One past the last instruction is the end of the chain: ExecuTorch jumps there
         * past a branch that ends the chain (torch.cond). The runtime ends a chain at any
         * destination past its last instruction (Method::execute runs while the index is
         * below the count; Method::step refuses one past it): strict mode only. */
        if (w->c.strict)
            FB_TRY(index_field(w, a,
                            &et_jump_false_call[ET_JUMP_FALSE_CALL_DESTINATION_INSTRUCTION],
                            (uint64_t)n_instructions + 1));
        break;
    default:
        FB_TRY(index_field(w, a, &et_free_call[ET_FREE_CALL_VALUE_INDEX], w->n_values));
        break;
    }
    return FB_OK;
}

/* Instruction i of a chain's `instructions`. */
static int instruction(walk *w, const fb_vec *instructions, uint32_t i) {
    const fb_field *f = &et_instruction[ET_INSTRUCTION_INSTR_ARGS];
    fb_union_value u;
    fb_tbl t;
    FB_TRY(fb_vec_table(&w->c, instructions, i, &t));
    FB_TRY(fb_union_open(&w->c, &t, f, &et_schema_file.decls[f->ref], &u));
    FB_TRY(fused_member(w, &u, 4));
    return fb_at_member(&w->c, f, u.member,
                     instruction_args(w, u.type, &u.table, instructions->count));
}

/* Chain i of a plan's `chains`. */
static int chain(walk *w, const fb_vec *chains, uint32_t i) {
    const fb_field *f = &et_chain[ET_CHAIN_INSTRUCTIONS];
    fb_vec instructions;
    fb_tbl t;
    uint32_t k;
    FB_TRY(fb_vec_table(&w->c, chains, i, &t));
    /* The runtime never reads a chain's inputs and outputs (a method's are its plan's):
     * they are indices only strict mode holds to the values. */
    if (w->c.strict) {
        FB_TRY(value_list_field(w, &t, &et_chain[ET_CHAIN_INPUTS], 0));
        FB_TRY(value_list_field(w, &t, &et_chain[ET_CHAIN_OUTPUTS], 0));
    }
    FB_TRY(fb_fld_vec(&w->c, &t, f, &instructions));
    if (w->structure)   /* what verify_vector counts of the vector it leaves shallow */
        FB_TRY(fb_count_elements(w->structure, instructions.count, instructions.data));
    for (k = 0; k < instructions.count; k++)
        FB_TRY_IN_FIELD(&w->c, f, k, instruction(w, &instructions, k));
    return FB_OK;
}

/* Where a delegate's payload is (ref): inline data or a segment. */
static int processed(walk *w, const fb_tbl *ref, uint32_t n_inline) {
    fb_ctx *c = &w->c;
    uint8_t location;
    uint32_t index;
    FB_TRY(fb_fld_u8(c, ref, &et_backend_delegate_data_reference[
                           ET_BACKEND_DELEGATE_DATA_REFERENCE_LOCATION], &location));
    FB_TRY(fb_fld_u32(c, ref, &et_backend_delegate_data_reference[
                            ET_BACKEND_DELEGATE_DATA_REFERENCE_INDEX], &index));
    if (location == ET_DATA_LOCATION_INLINE) {
        if (index >= n_inline) return fb_fail(c, FB_E_BAD_INDEX, ref->pos);
    } else if (location == ET_DATA_LOCATION_SEGMENT) {
        uint64_t start, size;
        FB_TRY(segment_at(w, index, ref->pos, 0, &start, &size));
    } else {
        return fb_fail(c, FB_E_BAD_INDEX, ref->pos);
    }
    return FB_OK;
}

int et_c_string(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_vec *s, int refuse) {
    const uint8_t *nul;
    fb_vec name;
    FB_TRY(fb_fld_str(c, t, f, s));
    nul = s->count ? memchr(c->buf + s->data, 0, s->count) : NULL;
    if ((refuse || c->strict) && nul) return fb_fail_at(c, f, FB_NO_INDEX, ET_E_NUL_IN_NAME, s->data);
    /* The runtime logs these names, up to their first NUL, when it cannot find what they
     * name, and its Python bindings terminate the process on a log line that is not UTF-8
     * (the fidelity campaign: "Missing operator", "Backend ... is not registered") */
    name = *s;
    if (nul) name.count = (uint32_t)(nul - (c->buf + s->data));
    if (c->verify) FB_TRY(fb_at_field(c, f, FB_NO_INDEX, fb_utf8_text(c, &name)));
    return FB_OK;
}

static int c_string(fb_ctx *c, const fb_tbl *t, const fb_field *f, int refuse) {
    fb_vec s;
    return et_c_string(c, t, f, &s, refuse);
}

/* Operator i of a plan's `operators`: the runtime looks its kernel up by name and
 * overload, read as C strings (a NUL inside ends them: strict mode only). Counts in
 * *nameless an operator without its name. */
static int operator_names(fb_ctx *c, const fb_vec *operators, uint32_t i, uint32_t *nameless) {
    fb_tbl t;
    FB_TRY(fb_vec_table(c, operators, i, &t));
    if (!fb_tbl_has(c, &t, et_operator[ET_OPERATOR_NAME].id)) (*nameless)++;
    FB_TRY(c_string(c, &t, &et_operator[ET_OPERATOR_NAME], 0));
    return c_string(c, &t, &et_operator[ET_OPERATOR_OVERLOAD], 0);
}

/* Every operator a KernelCall of the (already walked) chains names has its name: the
 * runtime resolves that operator's kernel by it, and logs it missing without one. An
 * operator no call names is never read (the fidelity campaign: a plan with a nameless
 * unused operator loads and runs). One pass over the calls, run only when some operator
 * has no name. */
static int used_operators_named(walk *w, const fb_vec *chains, const fb_vec *operators) {
    fb_ctx *c = &w->c;
    const fb_field *args = &et_instruction[ET_INSTRUCTION_INSTR_ARGS];
    uint32_t i, k;
    for (i = 0; i < chains->count; i++) {
        fb_tbl t;
        fb_vec instructions;
        FB_TRY(fb_vec_table(c, chains, i, &t));
        FB_TRY(fb_fld_vec(c, &t, &et_chain[ET_CHAIN_INSTRUCTIONS], &instructions));
        for (k = 0; k < instructions.count; k++) {
            fb_union_value u;
            fb_tbl ins, op;
            int32_t index;
            FB_TRY(fb_vec_table(c, &instructions, k, &ins));
            FB_TRY(fb_union_open(c, &ins, args, &et_schema_file.decls[args->ref], &u));
            if (u.type != ET_INSTRUCTION_ARGUMENTS_KERNEL_CALL) continue;
            FB_TRY(fb_fld_i32(c, &u.table, &et_kernel_call[ET_KERNEL_CALL_OP_INDEX], &index));
            FB_TRY(fb_vec_table(c, operators, (uint32_t)index, &op));   /* in range: walked */
            if (!fb_tbl_has(c, &op, et_operator[ET_OPERATOR_NAME].id))
                FB_TRY_IN_FIELD(c, &et_execution_plan[ET_EXECUTION_PLAN_OPERATORS], index,
                             fb_fail_at(c, &et_operator[ET_OPERATOR_NAME], FB_NO_INDEX,
                                     FB_E_MISSING_FIELD, op.pos));
        }
    }
    return FB_OK;
}

/* Compile spec i of a delegate's `compile_specs`: the runtime hands its key to the
 * backend as a C string (a NUL inside ends it: strict mode only). */
static int compile_spec(fb_ctx *c, const fb_vec *specs, uint32_t i) {
    fb_tbl t;
    FB_TRY(fb_vec_table(c, specs, i, &t));
    return c_string(c, &t, &et_compile_spec[ET_COMPILE_SPEC_KEY], 0);
}

/* Delegate i of a plan's `delegates`. */
static int delegate(walk *w, const fb_vec *delegates, uint32_t i, uint32_t n_inline) {
    const fb_field *f = &et_backend_delegate[ET_BACKEND_DELEGATE_PROCESSED];
    const fb_field *specs_f = &et_backend_delegate[ET_BACKEND_DELEGATE_COMPILE_SPECS];
    fb_tbl t, ref;
    fb_vec specs;
    uint32_t k;
    int present;
    FB_TRY(fb_vec_table(&w->c, delegates, i, &t));
    /* a backend id with bytes after a NUL crashed the runtime's load_method (the
     * gate's campaign, docs/verified.md): refused */
    FB_TRY(c_string(&w->c, &t, &et_backend_delegate[ET_BACKEND_DELEGATE_ID], 1));
    FB_TRY(fb_fld_vec(&w->c, &t, specs_f, &specs));
    for (k = 0; k < specs.count; k++)
        FB_TRY_IN_FIELD(&w->c, specs_f, k, compile_spec(&w->c, &specs, k));
    FB_TRY(fb_fld_table(&w->c, &t, f, &ref, &present));
    return fb_at_field(&w->c, f, FB_NO_INDEX, processed(w, &ref, n_inline));
}

/* The items of a list value: indices of values of kind `kind` (boxed lists: an IntList
 * holds the indices of Int values, a TensorList of Tensor values), -1 too in an
 * OptionalTensorList; `wide` items are int64, others int32. */
static int list_items(walk *w, const fb_tbl *t, const fb_field *f, uint8_t kind, int wide,
                      int optional) {
    fb_ctx *c = &w->c;
    fb_vec items;
    uint32_t i;
    FB_TRY(fb_fld_vec(c, t, f, &items));
    FB_TRY(fused_count(w, &items));
    for (i = 0; i < items.count; i++) {
        uint64_t at = items.data + (wide ? 8 : 4) * (uint64_t)i;
        int64_t x = wide ? (int64_t)fb_ld64(c->buf + at) : (int64_t)fb_as_i32(fb_ld32(c->buf + at));
        fb_tbl v;
        uint8_t type;
        if (optional && x == -1) continue;
        if (x < 0 || (uint64_t)x >= w->n_values) return fb_fail(c, FB_E_BAD_INDEX, at);
        FB_TRY(fb_vec_table(c, &w->values, (uint32_t)x, &v));
        FB_TRY(fb_fld_u8(c, &v, &et_e_value[ET_E_VALUE_VAL_TYPE], &type));
        if (type != kind) return fb_fail(c, FB_E_KIND_MISMATCH, at);
    }
    return FB_OK;
}

/* What value `value` of union type `type` (table v) holds. */
static int evalue_member(walk *w, uint8_t type, const fb_tbl *v, uint32_t value) {
    if (type == ET_KERNEL_TYPES_TENSOR)
        return tensor_value(w, v, value);
    if (type == ET_KERNEL_TYPES_INT_LIST)
        return list_items(w, v, &et_int_list[ET_INT_LIST_ITEMS], ET_KERNEL_TYPES_INT, 1, 0);
    if (type == ET_KERNEL_TYPES_TENSOR_LIST)
        return list_items(w, v, &et_tensor_list[ET_TENSOR_LIST_ITEMS], ET_KERNEL_TYPES_TENSOR, 0, 0);
    if (type == ET_KERNEL_TYPES_OPTIONAL_TENSOR_LIST)
        return list_items(w, v, &et_optional_tensor_list[ET_OPTIONAL_TENSOR_LIST_ITEMS],
                          ET_KERNEL_TYPES_TENSOR, 0, 1);
    return FB_OK;
}

/* Value i of the plan's `values`. */
static int evalue(walk *w, uint32_t i) {
    const fb_field *f = &et_e_value[ET_E_VALUE_VAL];
    fb_union_value u;
    fb_tbl t;
    FB_TRY(fb_vec_table(&w->c, &w->values, i, &t));
    FB_TRY(fb_union_open(&w->c, &t, f, &et_schema_file.decls[f->ref], &u));
    FB_TRY(fused_member(w, &u, 3));
    if (u.type != ET_KERNEL_TYPES_NONE)
        FB_TRY_IN_MEMBER(&w->c, f, u.member, evalue_member(w, u.type, &u.table, i));
    return FB_OK;
}

/* Execution plan `index` of `plans`. */
static int execution_plan(walk *w, const fb_vec *plans, uint32_t index, uint32_t n_inline) {
    fb_ctx *c = &w->c;
    fb_vec chains, operators, delegates, devices;
    fb_tbl plan;
    const fb_tbl *t = &plan;
    uint32_t i, nameless = 0;
    int rc;
    FB_TRY(fb_vec_table(c, plans, index, &plan));
    FB_TRY(fused_plan(w, &plan));
    FB_TRY(c_string(c, t, &et_execution_plan[ET_EXECUTION_PLAN_NAME], 0));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_VALUES], &w->values));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_CHAINS], &chains));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_OPERATORS], &operators));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_DELEGATES], &delegates));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_NON_CONST_BUFFER_SIZES],
                &w->buffer_sizes));
    FB_TRY(fb_fld_vec(c, t, &et_execution_plan[ET_EXECUTION_PLAN_NON_CONST_BUFFER_DEVICE], &devices));
    w->n_values = w->values.count;
    w->n_operators = operators.count;
    w->n_delegates = delegates.count;
    w->n_delegates_all += delegates.count;
    FB_TRY(value_list_field(w, t, &et_execution_plan[ET_EXECUTION_PLAN_INPUTS], 0));
    FB_TRY(value_list_field(w, t, &et_execution_plan[ET_EXECUTION_PLAN_OUTPUTS], 0));
    for (i = 0; i < w->values.count; i++)
        FB_TRY_IN_FIELD(c, &et_execution_plan[ET_EXECUTION_PLAN_VALUES], i, evalue(w, i));
    for (i = 0; i < chains.count; i++)
        FB_TRY_IN_FIELD(c, &et_execution_plan[ET_EXECUTION_PLAN_CHAINS], i, chain(w, &chains, i));
    for (i = 0; i < operators.count; i++)
        FB_TRY_IN_FIELD(c, &et_execution_plan[ET_EXECUTION_PLAN_OPERATORS], i,
                     operator_names(c, &operators, i, &nameless));
    if (nameless) FB_TRY(used_operators_named(w, &chains, &operators));
    for (i = 0; i < delegates.count; i++)
        FB_TRY_IN_FIELD(c, &et_execution_plan[ET_EXECUTION_PLAN_DELEGATES], i,
                     delegate(w, &delegates, i, n_inline));
    for (i = 0; i < devices.count; i++) {
        fb_tbl d;
        rc = fb_vec_table(c, &devices, i, &d);
        if (rc == FB_OK)
            rc = index_field(w, &d, &et_non_const_buffer_device[ET_NON_CONST_BUFFER_DEVICE_BUFFER_IDX],
                             w->buffer_sizes.count);
        FB_TRY(fb_at_field(c, &et_execution_plan[ET_EXECUTION_PLAN_NON_CONST_BUFFER_DEVICE], i, rc));
    }
    return FB_OK;
}

/* -------------------------------------------------------------- the files */

/* The program's constant segment (cs): its offsets and its segment. The runtime loads
 * the segment only when the offsets hold more than the placeholder of buffer 0 (no
 * constants: the segment index is never read). */
static int constant_segment(walk *w, const fb_tbl *cs) {
    uint32_t index;
    FB_TRY(fb_fld_vec(&w->c, cs, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_OFFSETS],
                &w->constant_offsets));
    FB_TRY(fb_fld_u32(&w->c, cs, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_SEGMENT_INDEX], &index));
    if (w->constant_offsets.count > 1)
        FB_TRY(segment_at(w, index, cs->pos, 0, &w->constant_start, &w->constant_size));
    return FB_OK;
}

/* Mutable data segment i: its segment, and (strict mode) its offsets inside it; otherwise
 * each offset a tensor uses is checked there (subsegment), as the runtime does. */
static int mutable_segment(walk *w, uint32_t i) {
    fb_ctx *c = &w->c;
    fb_tbl m;
    uint32_t index, k;
    uint64_t start, size;
    fb_vec offsets;
    FB_TRY(fb_vec_table(c, &w->mutable_segments, i, &m));
    FB_TRY(fb_fld_u32(c, &m, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_SEGMENT_INDEX], &index));
    FB_TRY(segment_at(w, index, m.pos, 1, &start, &size));
    FB_TRY(fb_fld_vec(c, &m, &et_subsegment_offsets[ET_SUBSEGMENT_OFFSETS_OFFSETS], &offsets));
    for (k = 0; c->strict && k < offsets.count; k++)
        if (fb_ld64(c->buf + offsets.data + 8 * (uint64_t)k) > size)
            return fb_fail(c, ET_E_BAD_SEGMENT, offsets.data + 8 * (uint64_t)k);
    return FB_OK;
}

/* The program's meaning: what its execution plans use (segments, constants, named
 * data), then, when `plans`, every plan. */
static int program(walk *w, const fb_tbl *root, int plans) {
    fb_ctx *c = &w->c;
    fb_vec all, inline_data, named;
    fb_tbl cs;
    int has_cs, rc;
    uint32_t i;
    FB_TRY(file_segments(w, root, &et_program[ET_PROGRAM_SEGMENTS]));
    FB_TRY(fb_fld_vec(c, root, &et_program[ET_PROGRAM_CONSTANT_BUFFER], &w->constant_buffer));
    FB_TRY(fb_fld_vec(c, root, &et_program[ET_PROGRAM_BACKEND_DELEGATE_DATA], &inline_data));
    FB_TRY(fb_fld_table(c, root, &et_program[ET_PROGRAM_CONSTANT_SEGMENT], &cs, &has_cs));
    if (has_cs)
        FB_TRY(fb_at_field(c, &et_program[ET_PROGRAM_CONSTANT_SEGMENT], FB_NO_INDEX,
                     constant_segment(w, &cs)));
    FB_TRY(fb_fld_vec(c, root, &et_program[ET_PROGRAM_MUTABLE_DATA_SEGMENTS], &w->mutable_segments));
    for (i = 0; i < w->mutable_segments.count; i++)
        FB_TRY(fb_at_field(c, &et_program[ET_PROGRAM_MUTABLE_DATA_SEGMENTS], i,
                     mutable_segment(w, i)));
    FB_TRY(fb_fld_vec(c, root, &et_program[ET_PROGRAM_NAMED_DATA], &named));
    for (i = 0; i < named.count; i++) {
        fb_tbl nd;
        rc = fb_vec_table(c, &named, i, &nd);
        if (rc == FB_OK)
            rc = named_data(w, &nd, &et_named_data[ET_NAMED_DATA_KEY],
                            &et_named_data[ET_NAMED_DATA_SEGMENT_INDEX], -1);
        FB_TRY(fb_at_field(c, &et_program[ET_PROGRAM_NAMED_DATA], i, rc));
    }
    if (!plans) return FB_OK;
    FB_TRY(fb_fld_vec(c, root, &et_program[ET_PROGRAM_EXECUTION_PLAN], &all));
    for (i = 0; i < all.count; i++) {
        w->plan = i;
        FB_TRY_IN_FIELD(c, &et_program[ET_PROGRAM_EXECUTION_PLAN], i,
                     execution_plan(w, &all, i, inline_data.count));
    }
    return FB_OK;
}

/* Entry i of a data file's named data: its blob and, with a layout, its tensor. */
static int data_entry(walk *w, const fb_vec *named, uint32_t i) {
    const fb_field *layout_f = &ft_named_data[FT_NAMED_DATA_TENSOR_LAYOUT];
    fb_ctx *c = &w->c;
    fb_tbl nd, layout;
    int has_layout;
    int32_t tensor = -1;
    FB_TRY(fb_vec_table(c, named, i, &nd));
    FB_TRY(fb_fld_table(c, &nd, layout_f, &layout, &has_layout));
    if (has_layout) {
        et_record rec, *r;
        uint32_t index;
        uint64_t size;
        fb_vec key;
        FB_TRY(record_slot(w, &rec, &r));
        FB_TRY(fb_at_field(c, layout_f, FB_NO_INDEX,
                     et_tensor_layout(c, &layout,
                                      &ft_tensor_layout[FT_TENSOR_LAYOUT_SCALAR_TYPE],
                                      &ft_tensor_layout[FT_TENSOR_LAYOUT_SIZES],
                                      &ft_tensor_layout[FT_TENSOR_LAYOUT_DIM_ORDER], r)));
        FB_TRY(fb_fld_u32(c, &nd, &ft_named_data[FT_NAMED_DATA_SEGMENT_INDEX], &index));
        FB_TRY(segment_at(w, index, nd.pos, 0, &r->data, &size));
        if (r->nbytes > size) return fb_fail(c, FB_E_OUTSIDE_STORAGE, nd.pos);
        FB_TRY(fb_fld_str(c, &nd, &ft_named_data[FT_NAMED_DATA_KEY], &key));
        r->name = key.data;
        r->name_len = key.count;
        r->value = i;
        r->stored = ET_STORED_CONSTANT;
        tensor = (int32_t)w->n_tensors++;
    }
    return named_data(w, &nd, &ft_named_data[FT_NAMED_DATA_KEY],
                      &ft_named_data[FT_NAMED_DATA_SEGMENT_INDEX], tensor);
}

static int data_file(walk *w, const fb_tbl *root) {
    fb_ctx *c = &w->c;
    fb_vec named;
    uint32_t i;
    FB_TRY(file_segments(w, root, &ft_flat_tensor[FT_FLAT_TENSOR_SEGMENTS]));
    FB_TRY(fb_fld_vec(c, root, &ft_flat_tensor[FT_FLAT_TENSOR_NAMED_DATA], &named));
    for (i = 0; i < named.count; i++)
        FB_TRY_IN_FIELD(c, &ft_flat_tensor[FT_FLAT_TENSOR_NAMED_DATA], i, data_entry(w, &named, i));
    return FB_OK;
}

/* Tensor i of a data file in 0.6.0's layout: its metadata, and its bytes at an offset
 * inside its segment, where 0.6.0's runtime loads them. */
static int tensor_0_6(walk *w, const fb_vec *tensors, uint32_t i) {
    const fb_field *f = ft06_tensor_metadata;
    fb_ctx *c = &w->c;
    fb_tbl t;
    et_record rec, *r;
    uint32_t index;
    uint64_t offset, start, size;
    fb_vec key;
    FB_TRY(fb_vec_table(c, tensors, i, &t));
    FB_TRY(record_slot(w, &rec, &r));
    FB_TRY(et_tensor_layout(c, &t, &f[FT06_TENSOR_METADATA_SCALAR_TYPE],
                            &f[FT06_TENSOR_METADATA_SIZES], &f[FT06_TENSOR_METADATA_DIM_ORDER], r));
    FB_TRY(fb_fld_u32(c, &t, &f[FT06_TENSOR_METADATA_SEGMENT_INDEX], &index));
    FB_TRY(segment_at(w, index, t.pos, 0, &start, &size));
    FB_TRY(fb_fld_u64(c, &t, &f[FT06_TENSOR_METADATA_OFFSET], &offset));
    if (offset > size || r->nbytes > size - offset) return fb_fail(c, FB_E_OUTSIDE_STORAGE, t.pos);
    /* looked up by strcmp */
    FB_TRY(et_c_string(c, &t, &f[FT06_TENSOR_METADATA_FULLY_QUALIFIED_NAME], &key, 1));
    r->data = start + offset;
    r->name = key.data;
    r->name_len = key.count;
    r->value = i;
    r->stored = ET_STORED_CONSTANT;
    w->n_tensors++;
    return FB_OK;
}

/* A data file in 0.6.0's layout: its tensors, then its named data (blobs by key, which
 * 0.6.0's runtime lists nowhere but which take their segments all the same). */
static int data_file_0_6(walk *w, const fb_tbl *root) {
    const fb_field *f = ft06_flat_tensor;
    fb_ctx *c = &w->c;
    fb_vec tensors, named;
    uint32_t i;
    FB_TRY(file_segments(w, root, &f[FT06_FLAT_TENSOR_SEGMENTS]));
    FB_TRY(fb_fld_vec(c, root, &f[FT06_FLAT_TENSOR_TENSORS], &tensors));
    for (i = 0; i < tensors.count; i++)
        FB_TRY_IN_FIELD(c, &f[FT06_FLAT_TENSOR_TENSORS], i, tensor_0_6(w, &tensors, i));
    FB_TRY(fb_fld_vec(c, root, &f[FT06_FLAT_TENSOR_NAMED_DATA], &named));
    for (i = 0; i < named.count; i++) {
        fb_tbl nd;
        int rc = fb_vec_table(c, &named, i, &nd);
        if (rc == FB_OK)
            rc = named_data(w, &nd, &ft06_named_data[FT06_NAMED_DATA_KEY],
                            &ft06_named_data[FT06_NAMED_DATA_SEGMENT_INDEX], -1);
        FB_TRY(fb_at_field(c, &f[FT06_FLAT_TENSOR_NAMED_DATA], i, rc));
    }
    return FB_OK;
}

/* The layout of a file's root table (enum et_layout; see et.h). */
static uint32_t layout_of(const fb_ctx *c, const et_summary *s, const fb_tbl *root) {
    if (s->identifier != FT_FILE_IDENTIFIER) return ET_LAYOUT_CURRENT;
    return fb_tbl_has(c, root, FT06_FLAT_TENSOR_SEGMENTS)
           || fb_tbl_has(c, root, FT06_FLAT_TENSOR_NAMED_DATA)
           ? ET_LAYOUT_FLAT_TENSOR_0_6 : ET_LAYOUT_CURRENT;
}

/* The schema of a file of this identifier in this layout. */
static const fb_schema *schema_of(uint32_t identifier, uint32_t layout) {
    return layout == ET_LAYOUT_FLAT_TENSOR_0_6 ? &ft06_schema_file : fb_schema_find(identifier);
}

const fb_schema *et_schema(const et_summary *s) {
    return schema_of(s->identifier, s->layout);
}

/* What one walk over a file whose header is read does. */
enum walk_mode {
    WALK_TOP,      /* the structure by the schema, then the meaning, but for a program's
                      execution plans (their vector's extent only): counts */
    WALK_PLANS,    /* after WALK_TOP: the plans' structure, its visits going on from the
                      rest's, then the meaning with them: counts */
    WALK_FUSED,    /* what WALK_PLANS checks, the plans' structure checked as the meaning
                      reads them, nothing located: counts */
    WALK_INDEX     /* after both: the meaning again, filling records */
};

/* The field WALK_TOP leaves shallow: the execution plans' vector, not its tables. */
static const fb_field *const plans_shallow[] = {&et_program[ET_PROGRAM_EXECUTION_PLAN], NULL};

/* One walk of a file (a program checked in full is WALK_TOP then WALK_PLANS, so that it
 * meets a fault where the first read of a lazily opened one does). The summary is
 * written only when the walk succeeds, and WALK_PLANS writes none of what the fields
 * Python reads meanwhile (the root, the extents). */
static int walk_file(const uint8_t *buf, const fb_options *opt, et_summary *s,
                     et_record *tensors, et_blob *blobs, enum walk_mode mode,
                     fb_error *err) {
    walk w;
    fb_ctx structure;
    fb_tbl root;
    uint64_t root_pos, structure_tables, structure_elements;
    uint32_t layout;
    int rc, is_program = s->identifier == ET_FILE_IDENTIFIER;
    const fb_schema *schema;
    memset(&w, 0, sizeof w);
    fb_ctx_init(&w.c, buf, s->flatbuffer_end, opt, NULL, err);
    w.s = s;
    w.tensors = tensors;
    w.blobs = blobs;
    fb_push(&w.c, "root", FB_NO_INDEX);   /* the root offset and table: located there */
    FB_TRY(fb_deref(&w.c, 0, &root_pos));
    FB_TRY(fb_tbl_open(&w.c, root_pos, &root));
    fb_pop(&w.c);
    layout = layout_of(&w.c, s, &root);
    if (mode != WALK_TOP && layout != s->layout)
        return fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);   /* not the file et_open saw */
    schema = schema_of(s->identifier, layout);
    if (!schema) return fb_fail(&w.c, FB_E_BAD_IDENTIFIER, 4);
    if (mode == WALK_TOP) {
        FB_TRY(is_program ? fb_verify_table_shallow(&w.c, schema, schema->root, root_pos,
                                                 plans_shallow)
                       : fb_verify_table(&w.c, schema, schema->root, root_pos));
    } else if (mode == WALK_PLANS) {
        w.c.tables = s->structure_tables;   /* one budget for the whole file */
        w.c.elements = s->structure_elements;
        FB_TRY(fb_verify_field(&w.c, schema, &root, &et_program[ET_PROGRAM_EXECUTION_PLAN], 0));
    } else if (mode == WALK_FUSED) {
        fb_vec plans;
        structure = w.c;
        structure.tables = s->structure_tables;
        structure.elements = s->structure_elements;
        FB_TRY(fb_fld_vec(&structure, &root, &et_program[ET_PROGRAM_EXECUTION_PLAN], &plans));
        FB_TRY(fb_count_elements(&structure, plans.count, plans.data));
        w.structure = &structure;
    }
    structure_tables = w.c.tables;
    structure_elements = w.c.elements;
    /* The meaning walk gets budgets of its own: it opens each table again (and the value
     * each list item points at), which the structural pass already bounded. */
    w.c.tables = 0;
    w.c.elements = 0;
    rc = is_program ? program(&w, &root, mode != WALK_TOP)
         : layout == ET_LAYOUT_FLAT_TENSOR_0_6 ? data_file_0_6(&w, &root) : data_file(&w, &root);
    if (rc != FB_OK) return rc;
    if (w.structure) {   /* its tables, counted past the budget's checks by fused_member */
        if (structure.tables > structure.max_tables) return FB_E_TABLE_BUDGET;
        structure_tables = structure.tables;
        structure_elements = structure.elements;
    }
    if (mode == WALK_INDEX) {
        if (w.n_tensors != s->n_tensors || w.n_blobs != s->n_blobs)
            return fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);   /* not the file et_open saw */
        return FB_OK;
    }
    if (mode == WALK_TOP) {
        s->root = root_pos;
        s->layout = layout;
    }
    s->structure_tables = structure_tables;
    s->structure_elements = structure_elements;
    s->tables_visited = structure_tables + w.c.tables;
    s->elements_visited = structure_elements + w.c.elements;
    s->n_tensors = w.n_tensors;
    s->n_blobs = w.n_blobs;
    s->n_delegates = w.n_delegates_all;
    s->plans_checked = mode != WALK_TOP || !is_program;
    return FB_OK;
}

/* Fails unless the first len bytes at buf can be the file summary s was made of. */
static int check_summary(const uint8_t *buf, size_t len, const et_summary *s, fb_error *err) {
    fb_ctx c;
    if (s->flatbuffer_end <= len) return FB_OK;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
}

/* The plans checked after WALK_TOP: fused, and when that finds a fault (or when the
 * options ask what it does not check: strict mode, a nesting budget below its tables'),
 * by the two passes, which locate it. What the fused walk accepts, they accept: it makes
 * each of their checks on the same tables. */
static int check_plans(const uint8_t *buf, const fb_options *opt, et_summary *s,
                       fb_error *err) {
    if (opt && opt->verify && !opt->strict && (opt->max_depth == 0 || opt->max_depth >= 4)
        && walk_file(buf, opt, s, NULL, NULL, WALK_FUSED, NULL) == FB_OK)
        return FB_OK;
    return walk_file(buf, opt, s, NULL, NULL, WALK_PLANS, err);
}

int et_open(const uint8_t *buf, size_t len, uint64_t size, const fb_options *opt, int plans,
            et_summary *s, fb_error *err) {
    memset(s, 0, sizeof *s);
    if (err) {
        err->code = FB_OK;
        err->offset = 0;
        err->path[0] = '\0';
    }
    FB_TRY(read_header(buf, (uint64_t)len, size, s, err));
    FB_TRY(check_summary(buf, len, s, err));   /* buf must hold the whole flatbuffer */
    FB_TRY(walk_file(buf, opt, s, NULL, NULL, WALK_TOP, err));
    if (!plans || s->plans_checked) return FB_OK;
    return check_plans(buf, opt, s, err);
}

int et_check_plans(const uint8_t *buf, size_t len, const fb_options *opt, et_summary *s,
                   fb_error *err) {
    FB_TRY(check_summary(buf, len, s, err));
    if (s->plans_checked) return FB_OK;
    return check_plans(buf, opt, s, err);
}

int et_index(const uint8_t *buf, size_t len, const et_summary *s, et_record *tensors,
             et_blob *blobs, fb_error *err) {
    et_summary again = *s;
    fb_options opt;
    fb_default_options(&opt);
    FB_TRY(check_summary(buf, len, s, err));
    if (!s->plans_checked) {
        fb_ctx c;
        fb_ctx_init(&c, buf, len, NULL, NULL, err);
        return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);   /* et_check_plans first */
    }
    opt.verify = 0;
    return walk_file(buf, &opt, &again, tensors, blobs, WALK_INDEX, err);
}

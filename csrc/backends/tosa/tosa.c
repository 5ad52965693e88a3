/*
 * tosa.c: what an Arm TOSA delegate payload means, on top of the generic layer.
 *
 * Facts (ExecuTorch 1.5.1: backends/arm/tosa/backend.py, TOSABackend.preprocess, returns
 * tosa-tools' TosaSerializer.serialize() as the payload, nothing before or after it;
 * tosa-tools 2026.5.0's serializer writes the data): the payload is a TosaGraph
 * flatbuffer. Each basic block holds its tensors and shapes, which its operators, its
 * inputs and its outputs name (a name is a value's identity, within its block). A
 * tensor's data is its shape's elements, little-endian, each as its DType takes (BOOL,
 * INT8 and the FP8 types one byte, INT16, FP16 and BF16 two, INT32 and FP32 four, INT48
 * six, SHAPE eight, INT4 two to a byte, the last one's high half zero); a shape's data
 * is its rank int64 values. The data may hold more than that (ExecuTorch writes an int8
 * convolution's weight zero point, shape [1], as one byte per output channel): the
 * constant is the bytes its shape takes, from the data's start. An UNKNOWN type, an
 * unranked tensor or a negative dimension leaves the extent undefined: those are not
 * checked, and the constant is all the data. A value is a constant when its data holds
 * bytes: the serializer gives every tensor a data vector, empty for all but the
 * constants. Tensors of more than 2 GB, whose data the schema puts outside the
 * flatbuffer (`offset`, `size`), are not read.
 */
#include "backends/tosa/tosa.h"

#include "fb/fb.h"

FB_STATUS_BLOCK(tosa_statuses, TOSA);

typedef struct walk {
    fb_ctx c;
    const tosa_summary *s;     /* NULL when counting (tosa_open) */
    tosa_value *values;        /* by value id, when indexing */
    uint32_t *names;           /* value id of each name, when indexing */
    uint32_t *slots;           /* the block's name table: 1 + its value index, 0 free */
    uint32_t mask;             /* the table's size - 1 */
    uint64_t n_blocks, n_values, n_names, max_block;
    uint64_t first;            /* value id of the block's first value */
} walk;

/* The bytes `n` elements of DType `type` take, in *out: 1, or 0 for a type whose extent
 * is undefined, -1 when they overflow. */
static int data_size(uint32_t type, uint64_t n, uint64_t *out) {
    unsigned esize;
    switch (type) {
    case TOSA_D_TYPE_INT4:
        *out = n / 2 + n % 2;
        return 1;
    case TOSA_D_TYPE_BOOL: case TOSA_D_TYPE_INT8: case TOSA_D_TYPE_FP8E4M3:
    case TOSA_D_TYPE_FP8E5M2:
        esize = 1;
        break;
    case TOSA_D_TYPE_INT16: case TOSA_D_TYPE_FP16: case TOSA_D_TYPE_BF16:
        esize = 2;
        break;
    case TOSA_D_TYPE_INT32: case TOSA_D_TYPE_FP32:
        esize = 4;
        break;
    case TOSA_D_TYPE_INT48:
        esize = 6;
        break;
    case TOSA_D_TYPE_SHAPE:
        esize = 8;
        break;
    default:
        return 0;
    }
    if (n > (uint64_t)INT64_MAX / esize) return -1;   /* numpy counts bytes in intptr_t */
    *out = n * esize;
    return 1;
}

/* FNV-1a of a name. */
static uint32_t name_hash(const uint8_t *p, uint32_t n) {
    uint32_t h = 2166136261u, i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* The string element i of the vector v. */
static int vec_string(walk *w, const fb_vec *v, uint32_t i, fb_vec *s) {
    uint64_t pos;
    FB_TRY(fb_vec_ref(&w->c, v, i, &pos));
    return fb_str_at(&w->c, pos, s);
}

/* The slot of name s in the block's table: the one holding it, or the free one where it
 * goes. The table is at least twice the block's values, so a free slot is always met. */
static uint32_t *slot_of(walk *w, const fb_vec *s) {
    const uint8_t *p = w->c.buf + s->data;
    uint32_t i = name_hash(p, s->count) & w->mask;
    for (;;) {
        uint32_t *slot = &w->slots[i];
        if (!*slot) return slot;
        {
            const tosa_value *v = &w->values[w->first + *slot - 1];
            const fb_field *f = v->is_shape ? &tosa_tosa_shape[TOSA_TOSA_SHAPE_NAME]
                                            : &tosa_tosa_tensor[TOSA_TOSA_TENSOR_NAME];
            fb_tbl t;
            fb_vec other;
            /* tables and strings the block's indexing already read */
            if (fb_tbl_open(&w->c, v->table, &t) == FB_OK
                && fb_fld_str(&w->c, &t, f, &other) == FB_OK && other.count == s->count
                && memcmp(w->c.buf + other.data, p, s->count) == 0)
                return slot;
        }
        i = (i + 1) & w->mask;
    }
}

/* Enters value `index` of the block (its name field f of table t) in the name table. */
static int enter(walk *w, const fb_tbl *t, const fb_field *f, uint32_t index) {
    fb_vec s;
    uint32_t *slot;
    FB_TRY(fb_fld_str(&w->c, t, f, &s));
    slot = slot_of(w, &s);
    if (*slot) return fb_fail_at(&w->c, f, FB_NO_INDEX, TOSA_E_BAD_TENSOR_NAME, s.data);
    *slot = index + 1;
    return FB_OK;
}

/* Value `index` of the block (table t, a tensor or a shape, its fields name_f and
 * data_f): its record, its name in the name table, its data in *data. */
static int value(walk *w, const fb_tbl *t, uint32_t index, uint32_t block, int is_shape,
                 const fb_field *name_f, const fb_field *data_f, fb_vec *data) {
    tosa_value *v = &w->values[w->first + index];
    FB_TRY(fb_fld_vec(&w->c, t, data_f, data));
    v->table = t->pos;
    v->data = data->data;
    v->nbytes = data->count;
    v->block = block;
    v->is_shape = (uint8_t)is_shape;
    v->shaped = 0;
    v->constant = data->count > 0;   /* the writer gives every other tensor an empty one */
    return enter(w, t, name_f, index);
}

/* The constant of value `index` takes `nbytes` bytes of its data (field data_f). */
static int extent(walk *w, uint32_t index, const fb_field *data_f, const fb_vec *data,
                  uint64_t nbytes) {
    tosa_value *v = &w->values[w->first + index];
    if (nbytes > data->count)
        return fb_fail_at(&w->c, data_f, FB_NO_INDEX, TOSA_E_BAD_CONSTANT, data->data - 4);
    v->nbytes = nbytes;
    v->shaped = 1;
    return FB_OK;
}

/* Tensor `index` of the block: its record, its name, its data's extent. */
static int tensor(walk *w, const fb_tbl *t, uint32_t index, uint32_t block) {
    fb_ctx *c = &w->c;
    const fb_field *data_f = &tosa_tosa_tensor[TOSA_TOSA_TENSOR_DATA];
    const fb_field *shape_f = &tosa_tosa_tensor[TOSA_TOSA_TENSOR_SHAPE];
    fb_vec shape, data;
    uint32_t type, i;
    uint8_t unranked;
    uint64_t n = 1, nbytes;
    int defined, empty = 0;
    FB_TRY(value(w, t, index, block, 0, &tosa_tosa_tensor[TOSA_TOSA_TENSOR_NAME], data_f,
                 &data));
    if (!data.count) return FB_OK;
    FB_TRY(fb_fld_u32(c, t, &tosa_tosa_tensor[TOSA_TOSA_TENSOR_TYPE], &type));
    FB_TRY(fb_fld_u8(c, t, &tosa_tosa_tensor[TOSA_TOSA_TENSOR_IS_UNRANKED], &unranked));
    FB_TRY(fb_fld_vec(c, t, shape_f, &shape));
    if (unranked) return FB_OK;
    for (i = 0; i < shape.count; i++) {
        int32_t d = fb_as_i32(fb_vec_u32(c, &shape, i));
        if (d < 0) return FB_OK;
        if (d == 0) {   /* no element; the other sizes must still make a shape numpy takes */
            empty = 1;
            continue;
        }
        if (n > (UINT64_MAX >> 1) / (uint64_t)d)
            return fb_fail_at(c, shape_f, FB_NO_INDEX, FB_E_EXTENT_OVERFLOW, shape.data);
        n *= (uint64_t)d;
    }
    defined = data_size(type, n, &nbytes);
    if (defined < 0) return fb_fail_at(c, shape_f, FB_NO_INDEX, FB_E_EXTENT_OVERFLOW, shape.data);
    if (empty) nbytes = 0;
    return defined ? extent(w, index, data_f, &data, nbytes) : FB_OK;
}

/* Shape `index` of the block (after its tensors): its record, its name, its data's
 * extent (rank int64 values). */
static int shape(walk *w, const fb_tbl *t, uint32_t index, uint32_t block) {
    const fb_field *data_f = &tosa_tosa_shape[TOSA_TOSA_SHAPE_DATA];
    fb_vec data;
    uint32_t rank;
    FB_TRY(fb_fld_u32(&w->c, t, &tosa_tosa_shape[TOSA_TOSA_SHAPE_RANK], &rank));
    FB_TRY(value(w, t, index, block, 1, &tosa_tosa_shape[TOSA_TOSA_SHAPE_NAME], data_f,
                 &data));
    return data.count ? extent(w, index, data_f, &data, (uint64_t)rank * 8) : FB_OK;
}

/* Each name of the string vector field f of table t: counted, or resolved in the block
 * (indexing). */
static int names(walk *w, const fb_tbl *t, const fb_field *f) {
    fb_vec v, s;
    uint32_t i;
    FB_TRY(fb_fld_vec(&w->c, t, f, &v));
    if (!w->s) {
        w->n_names += v.count;
        return FB_OK;
    }
    for (i = 0; i < v.count; i++) {
        uint32_t *slot;
        FB_TRY_IN_FIELD(&w->c, f, i, vec_string(w, &v, i, &s));
        slot = slot_of(w, &s);
        if (!*slot)
            return fb_fail_at(&w->c, f, i, TOSA_E_BAD_TENSOR_NAME, s.data - 4);
        if (w->n_names >= w->s->n_names) return fb_fail(&w->c, FB_E_BAD_ARGUMENT, 0);
        w->names[w->n_names++] = (uint32_t)(w->first + *slot - 1);
    }
    return FB_OK;
}

/* Each table of the vector field f of table t, visited in order. */
static int each(walk *w, const fb_tbl *t, const fb_field *f,
                int (*visit)(walk *, const fb_tbl *)) {
    fb_vec v;
    fb_tbl e;
    uint32_t i;
    FB_TRY(fb_fld_vec(&w->c, t, f, &v));
    for (i = 0; i < v.count; i++) {
        FB_TRY_IN_FIELD(&w->c, f, i, fb_vec_table(&w->c, &v, i, &e));
        FB_TRY_IN_FIELD(&w->c, f, i, visit(w, &e));
    }
    return FB_OK;
}

static int operator(walk *w, const fb_tbl *op) {
    FB_TRY(names(w, op, &tosa_tosa_operator[TOSA_TOSA_OPERATOR_INPUTS]));
    return names(w, op, &tosa_tosa_operator[TOSA_TOSA_OPERATOR_OUTPUTS]);
}

/* The block's values, in the name table, then the names it and its operators give. */
static int block(walk *w, const fb_tbl *b) {
    fb_ctx *c = &w->c;
    const fb_field *tensors_f = &tosa_tosa_basic_block[TOSA_TOSA_BASIC_BLOCK_TENSORS];
    const fb_field *shapes_f = &tosa_tosa_basic_block[TOSA_TOSA_BASIC_BLOCK_SHAPES];
    fb_vec tensors, shapes;
    uint64_t count;
    uint32_t i, id = (uint32_t)w->n_blocks;
    fb_tbl t;
    FB_TRY(fb_fld_vec(c, b, tensors_f, &tensors));
    FB_TRY(fb_fld_vec(c, b, shapes_f, &shapes));
    count = (uint64_t)tensors.count + shapes.count;
    if (!w->s) {
        w->n_values += count;
        if (count > w->max_block) w->max_block = count;
    } else {
        uint64_t size = 1;
        if (w->first + count > w->s->n_values) return fb_fail(c, FB_E_BAD_ARGUMENT, 0);
        while (size < 2 * count) size <<= 1;   /* within n_slots, as tosa_open sized it */
        if (size > w->s->n_slots) return fb_fail(c, FB_E_BAD_ARGUMENT, 0);
        w->mask = (uint32_t)(size - 1);
        memset(w->slots, 0, (size_t)size * sizeof *w->slots);
        for (i = 0; i < tensors.count; i++) {
            FB_TRY_IN_FIELD(c, tensors_f, i, fb_vec_table(c, &tensors, i, &t));
            FB_TRY_IN_FIELD(c, tensors_f, i, tensor(w, &t, i, id));
        }
        for (i = 0; i < shapes.count; i++) {
            FB_TRY_IN_FIELD(c, shapes_f, i, fb_vec_table(c, &shapes, i, &t));
            FB_TRY_IN_FIELD(c, shapes_f, i, shape(w, &t, tensors.count + i, id));
        }
    }
    FB_TRY(names(w, b, &tosa_tosa_basic_block[TOSA_TOSA_BASIC_BLOCK_INPUTS]));
    FB_TRY(names(w, b, &tosa_tosa_basic_block[TOSA_TOSA_BASIC_BLOCK_OUTPUTS]));
    FB_TRY(each(w, b, &tosa_tosa_basic_block[TOSA_TOSA_BASIC_BLOCK_OPERATORS], operator));
    if (w->s) w->first += count;
    w->n_blocks++;
    return FB_OK;
}

static int region(walk *w, const fb_tbl *r) {
    return each(w, r, &tosa_tosa_region[TOSA_TOSA_REGION_BLOCKS], block);
}

static int graph(walk *w, const fb_tbl *root) {
    return each(w, root, &tosa_tosa_graph[TOSA_TOSA_GRAPH_REGIONS], region);
}

/* ---------------------------------------------------------------- entry points */

int tosa_open(const uint8_t *buf, size_t len, const fb_options *opt, tosa_summary *s,
              fb_error *err) {
    walk w;
    fb_tbl root;
    uint64_t pos, slots = 1;
    memset(s, 0, sizeof *s);
    memset(&w, 0, sizeof w);
    fb_ctx_init(&w.c, buf, len, opt, NULL, err);
    if (len < 8) return fb_truncated(&w.c, FB_E_TOO_SMALL, 0, 8);
    if (fb_ld32(buf + 4) != TOSA_FILE_IDENTIFIER) {
        fb_push(&w.c, "header", FB_NO_INDEX);   /* located as the flatbuffer's identifier */
        return fb_fail(&w.c, FB_E_BAD_IDENTIFIER, 4);
    }
    FB_TRY(fb_deref(&w.c, 0, &pos));
    FB_TRY(fb_verify_table(&w.c, &tosa_schema_file, tosa_schema_file.root, pos));
    FB_TRY(fb_tbl_open(&w.c, pos, &root));
    s->root = pos;
    /* the counts, on budgets of their own */
    w.c.tables = w.c.elements = 0;
    FB_TRY(graph(&w, &root));
    /* each count is below the buffer's length over 4 (an offset or more apiece) */
    if (w.n_values > UINT32_MAX / 4 || w.n_names > UINT32_MAX || w.n_blocks > UINT32_MAX)
        return fb_fail(&w.c, FB_E_EXTENT_OVERFLOW, 0);
    while (slots < 2 * w.max_block) slots <<= 1;
    s->n_values = (uint32_t)w.n_values;
    s->n_names = (uint32_t)w.n_names;
    s->n_slots = (uint32_t)slots;
    return FB_OK;
}

int tosa_index(const uint8_t *buf, size_t len, const tosa_summary *s, tosa_value *values,
               uint32_t *names_out, uint32_t *slots, fb_error *err) {
    walk w;
    fb_tbl root;
    fb_options opt;
    int rc;
    fb_default_options(&opt);
    opt.verify = 0;
    memset(&w, 0, sizeof w);
    fb_ctx_init(&w.c, buf, len, &opt, NULL, err);
    if (s->root >= len) return fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);
    w.s = s;
    w.values = values;
    w.names = names_out;
    w.slots = slots;
    rc = fb_tbl_open(&w.c, s->root, &root);
    if (rc == FB_OK) rc = graph(&w, &root);
    /* the buffer is the one tosa_open counted (a changed one is refused) */
    if (rc == FB_OK && (w.first != s->n_values || w.n_names != s->n_names))
        rc = fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);
    return rc;
}

/*
 * etdump.c: what an ETDump (.etdump) means, on top of the generic layer, in the words of
 * ExecuTorch 1.5.1's schema (devtools/etdump/etdump_schema_flatcc.fbs) and its readers
 * (devtools/etdump/serialize.py, devtools/inspector/_inspector_utils.py). The structure
 * was checked by fb_verify_table; here: an Event holds exactly one of its three members
 * ("Exactly one of these fields must be non-null"); an allocation event's allocator_id
 * indexes its run's allocators; a debug Value holds the table its `val` names; a debug
 * tensor has a known scalar type, as many strides as sizes, none of either negative,
 * its nonzero sizes' product in bytes within an int64, strides that stay inside its
 * elements (the runtime's DataSink::write_tensor copies a tensor's nbytes into the debug
 * buffer, offset -1 when it has none), and when it has bytes an offset to them inside
 * the debug buffer (when its size is given). Before all that, the size prefix must lie
 * inside the file; the buffer read is the one it gives. Times are not compared: nothing
 * says an end follows its start.
 */
#include "executorch/etdump.h"

#include "executorch/et.h"
#include "fb/fb.h"

FB_STATUS_BLOCK(ed_statuses, ED);

typedef struct walk {
    fb_ctx c;
    int64_t debug_size;
    ed_summary *s;
} walk;

static int64_t as_i64(uint64_t u) {
    return u < 0x8000000000000000u ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* A debug tensor: its layout, and its bytes where it says they are. */
static int tensor(walk *w, const fb_tbl *t) {
    fb_ctx *c = &w->c;
    const fb_field *type_f = &ed_tensor[ED_TENSOR_SCALAR_TYPE];
    const fb_field *sizes_f = &ed_tensor[ED_TENSOR_SIZES];
    const fb_field *strides_f = &ed_tensor[ED_TENSOR_STRIDES];
    const fb_field *offset_f = &ed_tensor[ED_TENSOR_OFFSET];
    fb_vec sizes, strides;
    uint8_t type;
    uint64_t esize, numel = 1, last = 0, raw;
    int64_t offset;
    uint32_t i;
    int empty = 0;
    w->s->n_debug_tensors++;
    FB_TRY(fb_fld_u8_at(c, t, type_f, &type));
    esize = et_element_size((int8_t)type);
    if (!esize) return fb_fail_at(c, type_f, FB_NO_INDEX, FB_E_BAD_SCALAR_TYPE, t->pos);
    FB_TRY(fb_fld_vec_at(c, t, sizes_f, &sizes));
    FB_TRY(fb_fld_vec_at(c, t, strides_f, &strides));
    if (strides.count != sizes.count)
        return fb_fail_at(c, strides_f, FB_NO_INDEX, FB_E_LENGTH_MISMATCH, t->pos);
    for (i = 0; i < sizes.count; i++) {
        uint64_t at = 8 * (uint64_t)i;
        int64_t size = as_i64(fb_ld64(c->buf + sizes.data + at));
        int64_t stride = as_i64(fb_ld64(c->buf + strides.data + at));
        if (size < 0) return fb_fail_at(c, sizes_f, i, FB_E_NEGATIVE_DIMENSION, sizes.data + at);
        if (stride < 0)
            return fb_fail_at(c, strides_f, i, FB_E_NEGATIVE_DIMENSION, strides.data + at);
        if (size == 0) {
            empty = 1;
            continue;
        }
        /* the nonzero sizes' product, in bytes, fits an int64 (as every reader's sizes) */
        if ((uint64_t)size > (uint64_t)INT64_MAX / esize / numel)
            return fb_fail_at(c, sizes_f, i, FB_E_EXTENT_OVERFLOW, sizes.data + at);
        numel *= (uint64_t)size;
        /* the last element's index */
        if (size > 1 && (uint64_t)stride > (UINT64_MAX - last) / (uint64_t)(size - 1))
            return fb_fail_at(c, strides_f, i, FB_E_EXTENT_OVERFLOW, strides.data + at);
        last += (uint64_t)(size - 1) * (uint64_t)stride;
    }
    if (empty) return FB_OK;   /* no bytes: the runtime writes offset -1 */
    if (last >= numel) return fb_fail_at(c, strides_f, FB_NO_INDEX, FB_E_OUTSIDE_STORAGE, t->pos);
    FB_TRY(fb_at_field(c, offset_f, FB_NO_INDEX, fb_fld_u64(c, t, offset_f, &raw)));
    offset = as_i64(raw);
    if (offset < 0) return fb_fail_at(c, offset_f, FB_NO_INDEX, FB_E_NEGATIVE_DIMENSION, t->pos);
    if (w->debug_size >= 0 && ((uint64_t)offset > (uint64_t)w->debug_size
                               || numel * esize > (uint64_t)w->debug_size - (uint64_t)offset))
        return fb_fail_at(c, offset_f, FB_NO_INDEX, FB_E_OUTSIDE_STORAGE, t->pos);
    return FB_OK;
}

/* The field of Value each ValueType names (Null and String have none). */
static const int value_field[] = {
    -1, ED_VALUE_INT_VALUE, ED_VALUE_BOOL_VALUE, ED_VALUE_FLOAT_VALUE, ED_VALUE_DOUBLE_VALUE,
    ED_VALUE_TENSOR, ED_VALUE_TENSOR_LIST, -1,
};

/* Tensor i of a TensorList. */
static int list_tensor(walk *w, const fb_vec *list, uint32_t i) {
    fb_tbl t;
    FB_TRY(fb_vec_table(&w->c, list, i, &t));
    return tensor(w, &t);
}

/* Each tensor of a TensorList. */
static int tensor_list(walk *w, const fb_tbl *list_t) {
    const fb_field *list_f = &ed_tensor_list[ED_TENSOR_LIST_TENSORS];
    fb_vec list;
    uint32_t i;
    FB_TRY(fb_fld_vec_at(&w->c, list_t, list_f, &list));
    for (i = 0; i < list.count; i++) FB_TRY_IN_FIELD(&w->c, list_f, i, list_tensor(w, &list, i));
    return FB_OK;
}

/* A debug event's value: its type, the table that type names, its tensors. */
static int value(walk *w, const fb_tbl *v) {
    fb_ctx *c = &w->c;
    const fb_field *val_f = &ed_value[ED_VALUE_VAL];
    const fb_field *f;
    uint8_t type;
    fb_tbl sub;
    int present;
    FB_TRY(fb_fld_u8_at(c, v, val_f, &type));
    if (type >= sizeof value_field / sizeof value_field[0])
        return fb_fail_at(c, val_f, FB_NO_INDEX, ED_E_BAD_VALUE, v->pos);
    if (value_field[type] < 0) return FB_OK;
    f = &ed_value[value_field[type]];
    FB_TRY(fb_fld_table_at(c, v, f, &sub, &present));
    if (!present) return fb_fail_at(c, val_f, FB_NO_INDEX, ED_E_BAD_VALUE, v->pos);
    if (type == ED_VALUE_TYPE_TENSOR || type == ED_VALUE_TYPE_TENSORLIST)
        FB_TRY_IN_FIELD(c, f, FB_NO_INDEX, type == ED_VALUE_TYPE_TENSOR ? tensor(w, &sub)
                                                                  : tensor_list(w, &sub));
    return FB_OK;
}

/* An allocation event: its allocator one of the run's. */
static int allocation(walk *w, const fb_tbl *a, uint32_t n_allocators) {
    const fb_field *id_f = &ed_allocation_event[ED_ALLOCATION_EVENT_ALLOCATOR_ID];
    int32_t id;
    FB_TRY(fb_fld_i32_at(&w->c, a, id_f, &id));
    if (id < 0 || (uint32_t)id >= n_allocators)
        return fb_fail_at(&w->c, id_f, FB_NO_INDEX, FB_E_BAD_INDEX, a->pos);
    w->s->n_allocation++;
    return FB_OK;
}

/* A debug event: its value, when it has one. */
static int debug(walk *w, const fb_tbl *d) {
    const fb_field *entry_f = &ed_debug_event[ED_DEBUG_EVENT_DEBUG_ENTRY];
    fb_tbl entry;
    int present;
    FB_TRY(fb_fld_table_at(&w->c, d, entry_f, &entry, &present));
    if (present) FB_TRY_IN_FIELD(&w->c, entry_f, FB_NO_INDEX, value(w, &entry));
    w->s->n_debug++;
    return FB_OK;
}

/* Event i of a run: exactly one member, and that member's references. */
static int event(walk *w, const fb_vec *events, uint32_t i, uint32_t n_allocators) {
    fb_ctx *c = &w->c;
    fb_tbl e, member[ED_EVENT_FIELD_COUNT];
    int present[ED_EVENT_FIELD_COUNT];
    unsigned k, n = 0;
    FB_TRY(fb_vec_table(c, events, i, &e));
    for (k = 0; k < ED_EVENT_FIELD_COUNT; k++) {
        FB_TRY(fb_fld_table_at(c, &e, &ed_event[k], &member[k], &present[k]));
        n += (unsigned)present[k];
    }
    if (n != 1) return fb_fail(c, ED_E_BAD_EVENT, e.pos);
    if (present[ED_EVENT_PROFILE_EVENT]) w->s->n_profile++;
    if (present[ED_EVENT_ALLOCATION_EVENT])
        FB_TRY_IN_FIELD(c, &ed_event[ED_EVENT_ALLOCATION_EVENT], FB_NO_INDEX,
                     allocation(w, &member[ED_EVENT_ALLOCATION_EVENT], n_allocators));
    if (present[ED_EVENT_DEBUG_EVENT])
        FB_TRY_IN_FIELD(c, &ed_event[ED_EVENT_DEBUG_EVENT], FB_NO_INDEX,
                     debug(w, &member[ED_EVENT_DEBUG_EVENT]));
    return FB_OK;
}

/* Run i: its events, against its allocators. */
static int run(walk *w, const fb_vec *runs, uint32_t i) {
    fb_ctx *c = &w->c;
    const fb_field *events_f = &ed_run_data[ED_RUN_DATA_EVENTS];
    fb_tbl r;
    fb_vec allocators, events;
    uint32_t j;
    FB_TRY(fb_vec_table(c, runs, i, &r));
    FB_TRY(fb_fld_vec_at(c, &r, &ed_run_data[ED_RUN_DATA_ALLOCATORS], &allocators));
    FB_TRY(fb_fld_vec_at(c, &r, events_f, &events));
    for (j = 0; j < events.count; j++)
        FB_TRY_IN_FIELD(c, events_f, j, event(w, &events, j, allocators.count));
    w->s->n_events += events.count;
    return FB_OK;
}

/* The root table, through the root offset at 4 (after the size prefix). */
static int open_root(fb_ctx *c, ed_summary *s, fb_tbl *root) {
    FB_TRY(fb_deref(c, 4, &s->root));
    return fb_tbl_open(c, s->root, root);
}

int ed_open(const uint8_t *buf, size_t len, int64_t debug_size, const fb_options *opt,
            ed_summary *s, fb_error *err) {
    const fb_field *runs_f = &ed_et_dump[ED_ET_DUMP_RUN_DATA];
    walk w;
    fb_ctx *c = &w.c;
    fb_tbl root;
    fb_vec runs;
    uint32_t i;
    memset(s, 0, sizeof *s);
    fb_ctx_init(c, buf, len, opt, NULL, err);
    w.debug_size = debug_size;
    w.s = s;
    if (len < 12) return fb_fail(c, FB_E_TOO_SMALL, 0);
    if (fb_ld32(buf + 8) != ED_FILE_IDENTIFIER) return fb_fail(c, FB_E_BAD_IDENTIFIER, 8);
    s->size = fb_ld32(buf);
    if (s->size > c->len - 4)
        return fb_locate(c, "size", FB_NO_INDEX,
                         fb_truncated(c, ED_E_BAD_SIZE, 0, 4 + (uint64_t)s->size));
    c->len = 4 + s->size;   /* the buffer ends where its size says; bytes after it are not read */
    FB_TRY_IN(c, "root", FB_NO_INDEX, open_root(c, s, &root));
    FB_TRY(fb_verify_table(c, &ed_schema_file, ed_schema_file.root, s->root));
    s->tables_visited = c->tables;
    s->elements_visited = c->elements;
    /* the meaning walk, on budgets of its own (the structural pass bounded it) */
    c->tables = c->elements = 0;
    FB_TRY(fb_fld_vec_at(c, &root, runs_f, &runs));
    for (i = 0; i < runs.count; i++) FB_TRY_IN_FIELD(c, runs_f, i, run(&w, &runs, i));
    s->n_runs = runs.count;
    s->tables_visited += c->tables;
    s->elements_visited += c->elements;
    return FB_OK;
}

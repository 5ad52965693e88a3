/*
 * fb.h: the generic FlatBuffers layer every format's reader stands on: bounds-checked
 * little-endian reads, tables through validated vtables, vectors, strings (bytes, or
 * text checked as UTF-8), unions, table and element budgets, and located errors
 * (code, offset, path).
 *
 * Every read checks `pos + size <= len` with overflow-safe arithmetic; nothing trusts an
 * earlier check. Field readers take the field's descriptor (fb_schema.h, generated from
 * the schema by csrc/schemas/fbsgen.py): its id, size, alignment, default and kind come
 * from the schema, and a reader refuses a field of another kind. The functions are
 * static inline so that a call with a constant descriptor compiles to the direct read.
 * It names no format: statuses, options and errors come from fb_common.h.
 */
#ifndef FB_H
#define FB_H

#include "fb/fb_common.h"
#include "fb/fb_schema.h"

#include <string.h>

/* The index of a path segment: none ("name"), or a union member ("<name>"). */
#define FB_NO_INDEX (-1)
#define FB_PATH_MEMBER (-2)
#define FB_PATH_MAX_SEGMENTS 16

/* --------------------------------------------------------------- context */

typedef struct fb_segment {
    const char *name;
    int64_t index;
} fb_segment;

typedef struct fb_ctx {
    const uint8_t *buf;
    uint64_t len;
    int verify;
    int strict;
    int utf8;                /* strings read as text must be UTF-8 (fb_check_text) */
    uint64_t max_tables, max_elements;
    uint32_t max_depth;
    fb_counts *counts;       /* the file's counts so far; NULL for on-demand reads */
    uint64_t tables, elements;
    fb_segment path[FB_PATH_MAX_SEGMENTS];
    int depth;               /* path segments in use, may exceed the array */
    fb_error *err;
    /* A copy of buf[win_pos, win_pos + win_len) read with pread: table reads
     * inside it come from here and touch no page of the mapping. */
    const uint8_t *win;
    uint64_t win_pos, win_len;
} fb_ctx;

typedef struct fb_tbl {
    uint64_t pos;       /* table start (its soffset) */
    uint64_t vt;        /* vtable start */
    uint16_t vt_size;
    uint16_t size;      /* inline table size */
} fb_tbl;

typedef struct fb_vec {
    uint64_t data;      /* element 0 */
    uint32_t count;
} fb_vec;


/* A pass over buf[0, len): budgets and switches from `opt` (NULL: read without
 * verifying, budgets from the length); its visits start from `counts` and are written
 * back by fb_ctx_finish (NULL: from zero, not kept). */
static inline void fb_ctx_init(fb_ctx *c, const uint8_t *buf, size_t len, const fb_options *opt,
                            fb_counts *counts, fb_error *err) {
    memset(c, 0, sizeof *c);
    c->buf = buf;
    c->len = (uint64_t)len;
    c->counts = counts;
    c->err = err;
    c->verify = opt ? opt->verify : 0;
    c->strict = opt ? opt->strict : 0;
    /* FlatBuffers' verifier does not look inside strings: by default, neither does this
     * one; strict mode asks for it, and so may a format whose readers decode its strings */
    c->utf8 = c->verify && c->strict;
    c->max_depth = opt && opt->max_depth ? opt->max_depth : 200;
    c->max_tables = opt && opt->max_tables ? opt->max_tables : c->len / 2 + 1024;
    c->max_elements = opt && opt->max_elements ? opt->max_elements : 2 * c->len + 1024;
    if (counts) {
        c->tables = counts->tables;
        c->elements = counts->elements;
    }
    if (err) {
        err->code = FB_OK;
        err->offset = 0;
        err->path[0] = '\0';
    }
}

static inline void fb_ctx_finish(fb_ctx *c) {
    if (c->counts) {
        c->counts->tables = c->tables;
        c->counts->elements = c->elements;
    }
}

static inline void fb_push(fb_ctx *c, const char *name, int64_t index) {
    if (c->depth < FB_PATH_MAX_SEGMENTS) {
        c->path[c->depth].name = name;
        c->path[c->depth].index = index;
    }
    c->depth++;
}

static inline void fb_pop(fb_ctx *c) { c->depth--; }

/* Records a failure with the current path in c->err (fb.c). */
void fb_record_failure(const fb_ctx *c, int code, uint64_t offset);

/* Records the failure; returns the code (inline, so that callers see it is not OK). */
static inline int fb_fail(fb_ctx *c, int code, uint64_t offset) {
    fb_record_failure(c, code, offset);
    return code;
}

/* fb_fail(), for a file shorter than its header (or size prefix) says: the error records the
 * file's size and the `need` bytes it would take, so that the message can say both. */
static inline int fb_truncated(fb_ctx *c, int code, uint64_t offset, uint64_t need) {
    fb_record_failure(c, code, offset);
    if (c->err) {
        c->err->size = c->len;
        c->err->need = need;
    }
    return code;
}

#define FB_TRY(expr)                 \
    do {                          \
        int rc_ = (expr);         \
        if (rc_ != FB_OK) return rc_; \
    } while (0)

/* ------------------------------------------------------------- locating */

/* Errors are located from the descriptors: a field's segment is its bare name at the
 * root of the path, else its descriptor's path ("." + name). */
static inline const char *fb_field_segment(const fb_ctx *c, const fb_field *f) {
    return c->depth == 0 ? f->name : f->path;
}

/* Appends the segment (name, index) to the path of the failure just recorded, as if it
 * had been pushed before it (it is the path's leaf); returns `code` (fb.c). */
int fb_locate(const fb_ctx *c, const char *name, int64_t index, int code);

/* `rc`; a failure located at field f (its element `index`, or FB_NO_INDEX). What a read or
 * a check of one field adds to the path, built only when it fails. */
static inline int fb_at_field(fb_ctx *c, const fb_field *f, int64_t index, int rc) {
    if (rc != FB_OK) fb_locate(c, fb_field_segment(c, f), index, rc);
    return rc;   /* rc itself, so that callers see a success is one */
}

/* `rc`; a failure located at union field f holding member m (".f<Member>"), unless m is
 * NULL (the failure came before the member was known). */
static inline int fb_at_member(fb_ctx *c, const fb_field *f, const fb_member *m, int rc) {
    if (rc == FB_OK || !m) return rc;
    fb_locate(c, fb_field_segment(c, f), FB_NO_INDEX, rc);
    c->depth++;
    fb_locate(c, m->name, FB_PATH_MEMBER, rc);
    c->depth--;
    return rc;
}

/* Fails at field f (its element `index`, or FB_NO_INDEX). */
static inline int fb_fail_at(fb_ctx *c, const fb_field *f, int64_t index, int code, uint64_t offset) {
    return fb_at_field(c, f, index, fb_fail(c, code, offset));
}

/* Runs `expr` inside the path segment (name, index) of a region that holds more than one
 * read: a vector's element, a table or a union member that a format walks further. */
#define FB_TRY_IN(c, name, index, expr) \
    do {                             \
        fb_push((c), (name), (index));  \
        FB_TRY(expr);                   \
        fb_pop(c);                      \
    } while (0)

/* FB_TRY_IN at field f, or at its element `index`. */
#define FB_TRY_IN_FIELD(c, f, index, expr) FB_TRY_IN((c), fb_field_segment((c), (f)), (index), (expr))

/* FB_TRY_IN at member m of union field f. */
#define FB_TRY_IN_MEMBER(c, f, m, expr)                            \
    do {                                                        \
        fb_push((c), fb_field_segment((c), (f)), FB_NO_INDEX);           \
        fb_push((c), (m)->name, FB_PATH_MEMBER);                      \
        FB_TRY(expr);                                              \
        fb_pop(c);                                                 \
        fb_pop(c);                                                 \
    } while (0)

/* ------------------------------------------------------------ raw reads */

static inline int fb_in_bounds(const fb_ctx *c, uint64_t pos, uint64_t size) {
    return pos <= c->len && size <= c->len - pos;
}

/* The `size` bytes at `pos` (already bounds-checked): from the read-ahead window
 * when it holds all of them, else from the buffer. */
static const uint8_t *fb_bytes_at(const fb_ctx *c, uint64_t pos, uint64_t size) {
    if (c->win_len && pos >= c->win_pos && size <= c->win_len
        && pos - c->win_pos <= c->win_len - size)
        return c->win + (pos - c->win_pos);
    return c->buf + pos;
}

static inline int fb_need(fb_ctx *c, uint64_t pos, uint64_t size, unsigned align) {
    if (!fb_in_bounds(c, pos, size)) return fb_fail(c, FB_E_OUT_OF_BOUNDS, pos);
    if (c->verify && align > 1 && pos % align != 0) return fb_fail(c, FB_E_MISALIGNED, pos);
    return FB_OK;
}

/* Little-endian loads; callers have checked the bounds. */
static inline uint16_t fb_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t fb_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t fb_ld64(const uint8_t *p) {
    return (uint64_t)fb_ld32(p) | ((uint64_t)fb_ld32(p + 4) << 32);
}
static inline int32_t fb_as_i32(uint32_t u) {
    return u < 0x80000000u ? (int32_t)u : (int32_t)(u - 0x80000000u) - 0x7fffffff - 1;
}

static inline int fb_count_elements(fb_ctx *c, uint64_t n, uint64_t where) {
    if (n > c->max_elements || c->elements > c->max_elements - n)
        return fb_fail(c, FB_E_ELEMENT_BUDGET, where);
    c->elements += n;
    return FB_OK;
}

/* Follows the uoffset stored at `at`, inside the buffer. FlatBuffers' verifier refuses an
 * offset of 0 (to itself) in a field or the root, but follows one in a vector's element
 * (a table there then starts at the element): `zero_ok` for those, but in strict mode. */
static inline int fb_follow_needed(fb_ctx *c, uint64_t at, int zero_ok, uint64_t *target);

static inline int fb_follow(fb_ctx *c, uint64_t at, int zero_ok, uint64_t *target) {
    FB_TRY(fb_need(c, at, 4, 4));
    return fb_follow_needed(c, at, zero_ok, target);
}

/* fb_follow, for an offset whose 4 bytes at `at` fb_need has passed. */
static inline int fb_follow_needed(fb_ctx *c, uint64_t at, int zero_ok, uint64_t *target) {
    uint64_t t;
    uint32_t o = fb_ld32(fb_bytes_at(c, at, 4));
    if (o == 0 && (!zero_ok || c->strict)) return fb_fail(c, FB_E_ZERO_OFFSET, at);
    t = at + o;
    if (t >= c->len) return fb_fail(c, FB_E_OUT_OF_BOUNDS, at);
    *target = t;
    return FB_OK;
}

/* Follows the uoffset of a field (or the root) stored at `at`. */
static inline int fb_deref(fb_ctx *c, uint64_t at, uint64_t *target) {
    return fb_follow(c, at, 0, target);
}

/* ---------------------------------------------------------------- tables */

/* Opens the table at `pos` by FlatBuffers' verifier's rules: the table aligned and inside
 * the buffer, its vtable inside the buffer, aligned, of an even size. That verifier reads
 * neither the vtable's second entry (the table's declared size) nor a vtable's fields past
 * its own size, so a vtable shorter than its two entries has no fields and a declared size
 * that does not cover the table is no fault; strict mode holds tables to the builder's
 * layout (FB_E_BAD_VTABLE). */
static inline int fb_tbl_open(fb_ctx *c, uint64_t pos, fb_tbl *t) {
    uint32_t soff;
    int64_t vt;
    FB_TRY(fb_need(c, pos, 4, 4));
    if (c->tables >= c->max_tables) return fb_fail(c, FB_E_TABLE_BUDGET, pos);
    c->tables++;
    soff = fb_ld32(fb_bytes_at(c, pos, 4));
    vt = (int64_t)pos - (int64_t)fb_as_i32(soff);
    if (vt < 0 || !fb_in_bounds(c, (uint64_t)vt, 2)) {
        /* Torch writes files over 2 GiB whose soffsets wrapped; modulo 2^32
         * the target is exact, and unambiguous up to 4 GiB. */
        uint64_t wrapped = (pos - soff) & 0xffffffffu;
        if (!fb_in_bounds(c, wrapped, 2)) return fb_fail(c, FB_E_BAD_VTABLE, pos);
        if (c->strict) return fb_fail(c, FB_E_VTABLE_WRAPPED, pos);
        vt = (int64_t)wrapped;
        if (c->counts) c->counts->wrapped_vtables++;
    }
    t->pos = pos;
    t->vt = (uint64_t)vt;
    if (c->verify && t->vt % 2 != 0) return fb_fail(c, FB_E_MISALIGNED, t->vt);
    t->vt_size = fb_ld16(fb_bytes_at(c, t->vt, 2));
    if (t->vt_size % 2 != 0 || !fb_in_bounds(c, t->vt, t->vt_size))
        return fb_fail(c, FB_E_BAD_VTABLE, t->vt);
    t->size = t->vt_size >= 4 ? fb_ld16(fb_bytes_at(c, t->vt + 2, 2)) : 0;
    if (c->strict && (t->vt_size < 4 || t->size < 4 || !fb_in_bounds(c, pos, t->size)))
        return fb_fail(c, FB_E_BAD_VTABLE, t->vt);
    return FB_OK;
}

/* Whether field `id` has its slot set in t's vtable (fb_tbl_open checked the vtable's extent). */
static inline int fb_tbl_has(const fb_ctx *c, const fb_tbl *t, unsigned id) {
    uint64_t slot = 4 + 2 * (uint64_t)id;
    return slot + 2 <= t->vt_size && fb_ld16(fb_bytes_at(c, t->vt + slot, 2)) != 0;
}

/* Position of field `id` holding `size` bytes aligned to `align`, or 0 when absent. As in
 * FlatBuffers' verifier, the field's bytes must lie inside the buffer; a writer may put
 * them past the table's declared size (some writers do), which strict mode names. */
static inline int fb_tbl_field_aligned(fb_ctx *c, const fb_tbl *t, unsigned id, unsigned size,
                                    unsigned align, uint64_t *at) {
    uint64_t slot = 4 + 2 * (uint64_t)id;
    uint16_t off;
    *at = 0;
    if (slot + 2 > t->vt_size) return FB_OK;
    off = fb_ld16(fb_bytes_at(c, t->vt + slot, 2));
    if (off == 0) return FB_OK;
    if (c->strict && (off < 4 || (uint64_t)off + size > t->size))
        return fb_fail(c, FB_E_FIELD_OUTSIDE_TABLE, t->vt + slot);
    if (!fb_in_bounds(c, t->pos + off, size)) return fb_fail(c, FB_E_OUT_OF_BOUNDS, t->vt + slot);
    *at = t->pos + off;
    if (c->verify && align > 1 && *at % align != 0) return fb_fail(c, FB_E_MISALIGNED, *at);
    return FB_OK;
}

/* Position of scalar field `id` of `size` bytes (aligned to its size), or 0. */
static inline int fb_tbl_field(fb_ctx *c, const fb_tbl *t, unsigned id, unsigned size, uint64_t *at) {
    return fb_tbl_field_aligned(c, t, id, size, size, at);
}

/* A reader given a field of another kind than its own: a mistake of the caller,
 * reported rather than read. With a constant descriptor the test folds away. */
static inline int fb_fld_kind(fb_ctx *c, const fb_tbl *t, int ok) {
    return ok ? FB_OK : fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
}

/* One-byte scalar (or a union's type); its default when absent. */
static inline int fb_fld_u8(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint8_t *out) {
    uint64_t at;
    FB_TRY(fb_fld_kind(c, t, (f->kind == FB_SCALAR || f->kind == FB_UNION_TYPE) && f->size == 1));
    FB_TRY(fb_tbl_field(c, t, f->id, 1, &at));
    *out = at ? c->buf[at] : (uint8_t)f->int_default;
    return FB_OK;
}

/* Two-byte integer scalar (or enum); its default when absent. */
static inline int fb_fld_u16(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint16_t *out) {
    uint64_t at;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_SCALAR && f->size == 2));
    FB_TRY(fb_tbl_field(c, t, f->id, 2, &at));
    *out = at ? fb_ld16(c->buf + at) : (uint16_t)f->int_default;
    return FB_OK;
}

/* Four-byte integer scalar; its default when absent. */
static inline int fb_fld_u32(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint32_t *out) {
    uint64_t at;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_SCALAR && f->size == 4 && f->type != FB_F32));
    FB_TRY(fb_tbl_field(c, t, f->id, 4, &at));
    *out = at ? fb_ld32(c->buf + at) : (uint32_t)f->int_default;
    return FB_OK;
}

/* Four-byte float scalar; its default when absent. */
static inline int fb_fld_f32(fb_ctx *c, const fb_tbl *t, const fb_field *f, float *out) {
    uint64_t at;
    uint32_t u;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_SCALAR && f->type == FB_F32));
    FB_TRY(fb_tbl_field(c, t, f->id, 4, &at));
    if (!at) {
        *out = (float)f->real_default;
        return FB_OK;
    }
    u = fb_ld32(c->buf + at);
    memcpy(out, &u, sizeof *out);
    return FB_OK;
}

static inline int fb_fld_i32(fb_ctx *c, const fb_tbl *t, const fb_field *f, int32_t *out) {
    uint32_t u;
    FB_TRY(fb_fld_u32(c, t, f, &u));
    *out = fb_as_i32(u);
    return FB_OK;
}

/* Eight-byte integer scalar; its default when absent. */
static inline int fb_fld_u64(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint64_t *out) {
    uint64_t at;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_SCALAR && f->size == 8 && f->type != FB_F64));
    FB_TRY(fb_tbl_field(c, t, f->id, 8, &at));
    *out = at ? fb_ld64(c->buf + at) : (uint64_t)f->int_default;
    return FB_OK;
}

static inline int fb_fld_f64(fb_ctx *c, const fb_tbl *t, const fb_field *f, double *out) {
    uint64_t at, bits;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_SCALAR && f->type == FB_F64));
    FB_TRY(fb_tbl_field(c, t, f->id, 8, &at));
    if (!at) {
        *out = f->real_default;
        return FB_OK;
    }
    bits = fb_ld64(c->buf + at);
    memcpy(out, &bits, sizeof *out);
    return FB_OK;
}

/* Offset field: the position it points to, or 0 when absent. */
static inline int fb_fld_ref(fb_ctx *c, const fb_tbl *t, const fb_field *f, uint64_t *target) {
    uint64_t at;
    *target = 0;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_STRING || f->kind == FB_TABLE || f->kind == FB_UNION
                           || f->kind >= FB_VEC_SCALAR));
    FB_TRY(fb_tbl_field(c, t, f->id, 4, &at));   /* as fb_need(at, 4, 4) would */
    if (at) FB_TRY(fb_follow_needed(c, at, 0, target));
    return FB_OK;
}

/* A table field; a `required` one absent fails at its table. */
static inline int fb_fld_table(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_tbl *sub, int *present) {
    uint64_t target;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_TABLE));
    FB_TRY(fb_fld_ref(c, t, f, &target));
    if (!target && (f->flags & FB_REQUIRED)) return fb_fail(c, FB_E_MISSING_FIELD, t->pos);
    *present = target != 0;
    if (target) FB_TRY(fb_tbl_open(c, target, sub));
    return FB_OK;
}

/* The position of a union's value (a table, or struct bytes checked for its member's
 * size and alignment), 0 when absent; `m` is the member its type byte names. */
static inline int fb_fld_union(fb_ctx *c, const fb_tbl *t, const fb_field *f, const fb_member *m,
                            uint64_t *target) {
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_UNION));
    FB_TRY(fb_fld_ref(c, t, f, target));
    if (*target && m->kind == FB_STRUCT) FB_TRY(fb_need(c, *target, m->size, m->align));
    return FB_OK;
}

/* A union field as a reader opens it: its type, the member that names, the value's
 * position and, for a table member, the table. */
typedef struct fb_union_value {
    uint8_t type;
    const fb_member *member;   /* NULL until the type is known to name one */
    uint64_t pos;              /* 0 for NONE: its offset is not followed */
    fb_tbl table;
} fb_union_value;

/* Opens union field f of table t as union declaration u (its type in the slot fbsgen puts
 * right before f). A required union fails with FB_E_MISSING_FIELD at t when its type is
 * NONE or unknown or its value absent; one that is not takes NONE (no value read), fails
 * a type u does not have at the type's field and a member without its value at t.
 * Nothing is located here beyond the type: callers locate at the member (fb_at_member). */
static inline int fb_union_open(fb_ctx *c, const fb_tbl *t, const fb_field *f, const fb_decl *u,
                             fb_union_value *v) {
    v->member = NULL;
    v->pos = 0;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_UNION));
    FB_TRY(fb_fld_u8(c, t, f - 1, &v->type));
    if (v->type == 0 || v->type >= u->count || u->members[v->type].kind == FB_NONE) {
        if (f->flags & FB_REQUIRED) return fb_fail(c, FB_E_MISSING_FIELD, t->pos);
        if (v->type != 0) return fb_fail_at(c, f - 1, FB_NO_INDEX, FB_E_BAD_UNION_TYPE, t->pos);
        v->member = &u->members[0];
        return FB_OK;
    }
    v->member = &u->members[v->type];
    FB_TRY(fb_fld_union(c, t, f, v->member, &v->pos));
    if (!v->pos) return fb_fail(c, FB_E_MISSING_FIELD, t->pos);
    if (v->member->kind == FB_TABLE) FB_TRY(fb_tbl_open(c, v->pos, &v->table));
    return FB_OK;
}

/* Vector of `esize`-byte elements at `pos`; counts them against the budget. */
static inline int fb_vec_at(fb_ctx *c, uint64_t pos, unsigned esize, unsigned align, fb_vec *v) {
    uint32_t n;
    FB_TRY(fb_need(c, pos, 4, 4));
    n = fb_ld32(fb_bytes_at(c, pos, 4));
    if (!fb_in_bounds(c, pos + 4, (uint64_t)n * esize)) return fb_fail(c, FB_E_OUT_OF_BOUNDS, pos);
    /* FlatBuffers' verifier checks only the length field (above); its builder pads
     * before a non-empty vector alone, so an empty vector of 8-byte elements may sit
     * at 4 mod 8 (torch writes them so). Strict mode holds non-empty vectors to the
     * builder's alignment. */
    if (c->verify && c->strict && n > 0 && align > 1 && (pos + 4) % align != 0)
        return fb_fail(c, FB_E_MISALIGNED, pos + 4);
    v->data = pos + 4;
    v->count = n;
    return FB_OK;
}

/* Absent vectors read as empty; a `required` one absent fails at its table. */
static inline int fb_fld_vec(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_vec *v) {
    uint64_t target;
    v->data = 0;
    v->count = 0;
    FB_TRY(fb_fld_kind(c, t, f->kind >= FB_VEC_SCALAR));
    FB_TRY(fb_fld_ref(c, t, f, &target));
    if (!target && (f->flags & FB_REQUIRED)) return fb_fail(c, FB_E_MISSING_FIELD, t->pos);
    if (target) FB_TRY(fb_vec_at(c, target, f->elem_size, f->elem_align, v));
    return FB_OK;
}

static inline int fb_str_at(fb_ctx *c, uint64_t pos, fb_vec *s) {
    FB_TRY(fb_vec_at(c, pos, 1, 1, s));
    if (c->verify) {
        if (!fb_in_bounds(c, s->data + s->count, 1)) return fb_fail(c, FB_E_NO_NUL, pos);
        if (c->buf[s->data + s->count] != 0) return fb_fail(c, FB_E_NO_NUL, s->data + s->count);
    }
    return FB_OK;
}

/* Offset of the first byte that makes s[0, n) invalid UTF-8, or n (fb.c). */
uint64_t fb_utf8_invalid_at(const uint8_t *s, uint64_t n);

/* Fails unless the string is UTF-8, verifying or not. */
static inline int fb_utf8_text(fb_ctx *c, const fb_vec *s) {
    uint64_t bad = fb_utf8_invalid_at(c->buf + s->data, s->count);
    if (bad < s->count) return fb_fail(c, FB_E_BAD_UTF8, s->data + bad);
    return FB_OK;
}

/* A string the reader decodes as text: UTF-8 when c->utf8 asks for it. */
static inline int fb_check_text(fb_ctx *c, const fb_vec *s) {
    return c->utf8 ? fb_utf8_text(c, s) : FB_OK;
}

static inline int fb_text_at(fb_ctx *c, uint64_t pos, fb_vec *s) {
    FB_TRY(fb_str_at(c, pos, s));
    return fb_check_text(c, s);
}

/* A string field read as bytes; absent reads as empty, and a `required` one absent fails
 * at its table. */
static inline int fb_fld_str(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_vec *s) {
    uint64_t target;
    s->data = 0;
    s->count = 0;
    FB_TRY(fb_fld_kind(c, t, f->kind == FB_STRING));
    FB_TRY(fb_fld_ref(c, t, f, &target));
    if (!target && (f->flags & FB_REQUIRED)) return fb_fail(c, FB_E_MISSING_FIELD, t->pos);
    if (target) FB_TRY(fb_str_at(c, target, s));
    return FB_OK;
}

/* A string field read as text: fb_fld_str plus fb_check_text. */
static inline int fb_fld_text(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_vec *s) {
    FB_TRY(fb_fld_str(c, t, f, s));
    return fb_check_text(c, s);
}

/* The readers above with their failures located at the field. */
#define FB_LOCATED_READER(name, reader, type)                                         \
    static inline int name(fb_ctx *c, const fb_tbl *t, const fb_field *f, type *out) {   \
        return fb_at_field(c, f, FB_NO_INDEX, reader(c, t, f, out));                     \
    }
FB_LOCATED_READER(fb_fld_u8_at, fb_fld_u8, uint8_t)
FB_LOCATED_READER(fb_fld_u32_at, fb_fld_u32, uint32_t)
FB_LOCATED_READER(fb_fld_i32_at, fb_fld_i32, int32_t)
FB_LOCATED_READER(fb_fld_vec_at, fb_fld_vec, fb_vec)
FB_LOCATED_READER(fb_fld_str_at, fb_fld_str, fb_vec)
FB_LOCATED_READER(fb_fld_text_at, fb_fld_text, fb_vec)
#undef FB_LOCATED_READER

static inline int fb_fld_table_at(fb_ctx *c, const fb_tbl *t, const fb_field *f, fb_tbl *sub,
                               int *present) {
    return fb_at_field(c, f, FB_NO_INDEX, fb_fld_table(c, t, f, sub, present));
}

/* Element i of a vector of offsets (to tables or strings). */
static inline int fb_vec_ref(fb_ctx *c, const fb_vec *v, uint32_t i, uint64_t *target) {
    if (i >= v->count) return fb_fail(c, FB_E_BAD_ARGUMENT, v->data);
    return fb_follow(c, v->data + 4 * (uint64_t)i, 1, target);
}

static inline int fb_vec_table(fb_ctx *c, const fb_vec *v, uint32_t i, fb_tbl *t) {
    uint64_t target;
    FB_TRY(fb_vec_ref(c, v, i, &target));
    return fb_tbl_open(c, target, t);
}

static inline uint32_t fb_vec_u32(const fb_ctx *c, const fb_vec *v, uint32_t i) {
    return fb_ld32(c->buf + v->data + 4 * (uint64_t)i);
}

/* Verifies the table at `pos` as declaration `decl` of schema `s` and everything it
 * reaches, by the schema's descriptors alone: every field inside its table and aligned,
 * every offset inside the buffer, every `required` field present, strings
 * NUL-terminated (and UTF-8 when c->utf8 asks),
 * vectors inside the buffer, union types known, nesting within c->max_depth, tables and
 * elements within their budgets; errors carry the path of field names (fb_verify.c). */
int fb_verify_table(fb_ctx *c, const fb_schema *s, unsigned decl, uint64_t pos);

/* fb_verify_table, except for the fields `shallow` lists (NULL-terminated; strings and
 * vectors only), wherever they occur: the verifier checks a shallow field's slot, its
 * offset and the extent of its string (with the NUL) or vector, but neither the text of
 * the string nor the vector's elements. The format reads those itself: a vector whose
 * elements its index pass checks as it reads them, a string that holds bytes. */
int fb_verify_table_shallow(fb_ctx *c, const fb_schema *s, unsigned decl, uint64_t pos,
                            const fb_field *const *shallow);

/* Table-vector field f of table t, found at nesting `depth`, and everything it reaches,
 * as fb_verify_table checks them inside t: for a field an earlier pass left shallow
 * (a part of the file checked when it is first read). */
int fb_verify_field(fb_ctx *c, const fb_schema *s, const fb_tbl *t, const fb_field *f,
                    uint32_t depth);

/* The fields of table t, opened (fb_tbl_open) as declaration `decl` at nesting `depth`,
 * and everything they reach, as fb_verify_table_shallow checks them after opening it: for
 * a reader that opens a table itself and checks its structure and its meaning in one
 * visit. The fields of t whose vtable ids (below 64) are set in `skip` are left to that
 * reader, which reads them with fb.h's readers of their kind (the same checks) and
 * counts a vector's elements (fb_count_elements). */
int fb_verify_fields(fb_ctx *c, const fb_schema *s, unsigned decl, const fb_tbl *t,
                     const fb_field *const *shallow, uint64_t skip, uint32_t depth);

#endif /* FB_H */

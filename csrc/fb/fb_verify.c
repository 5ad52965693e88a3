/*
 * fb_verify.c: the generic verifier. It walks a buffer by a schema's descriptors
 * (fb_schema.h, generated from the .fbs by csrc/schemas/fbsgen.py), so a format gets its
 * structural checks from its schema alone; what the values mean (indices into other
 * vectors, tensor extents) is checked by the format's own file on top.
 */
#include "fb/fb.h"

/* What one verification walks by: the schema, and the fields it checks shallowly. */
typedef struct verifier {
    const fb_schema *s;
    const fb_field *const *shallow;   /* NULL-terminated, or NULL */
} verifier;

static int verify_table(fb_ctx *c, const verifier *v, unsigned decl, uint64_t pos,
                        uint32_t depth);

/* Pushes the segment of field `f` (its bare name at the root of the path). */
static void push_field(fb_ctx *c, const fb_field *f, int64_t index) {
    fb_push(c, c->depth == 0 ? f->name : f->path, index);
}

static int is_shallow(const verifier *v, const fb_field *f) {
    const fb_field *const *p;
    if (!v->shallow) return 0;
    for (p = v->shallow; *p; p++)
        if (*p == f) return 1;
    return 0;
}

static int verify_string(fb_ctx *c, uint64_t pos) {
    fb_vec str;
    return fb_text_at(c, pos, &str);
}

static int verify_union(fb_ctx *c, const verifier *v, const fb_tbl *t, const fb_field *types,
                        const fb_field *f, uint32_t depth) {
    const fb_decl *u = &v->s->decls[f->ref];
    const fb_member *m;
    uint8_t type;
    uint64_t target;
    FB_TRY(fb_fld_u8(c, t, types, &type));
    if (type == 0) return FB_OK;   /* NONE: the value, if any, is not read */
    if (type >= u->count || u->members[type].kind == FB_NONE) {
        uint64_t at;
        FB_TRY(fb_tbl_field(c, t, types->id, 1, &at));
        return fb_fail(c, FB_E_BAD_UNION_TYPE, at);
    }
    m = &u->members[type];
    FB_TRY(fb_fld_union(c, t, f, m, &target));
    if (!target || m->kind != FB_TABLE) return FB_OK;
    fb_push(c, m->name, FB_PATH_MEMBER);
    FB_TRY(verify_table(c, v, m->ref, target, depth + 1));
    fb_pop(c);
    return FB_OK;
}

static int verify_vector(fb_ctx *c, const verifier *v, const fb_tbl *t, const fb_field *f,
                         uint32_t depth) {
    fb_vec items;
    uint32_t i;
    int offsets = f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE;
    if (offsets) push_field(c, f, FB_NO_INDEX);
    FB_TRY(fb_fld_vec(c, t, f, &items));
    FB_TRY(fb_count_elements(c, items.count, items.data));
    if (!offsets) return FB_OK;
    fb_pop(c);
    for (i = 0; i < items.count; i++) {
        uint64_t target;
        int rc;
        push_field(c, f, i);
        rc = fb_vec_ref(c, &items, i, &target);
        if (rc == FB_OK)
            rc = f->kind == FB_VEC_STRING ? verify_string(c, target)
                                          : verify_table(c, v, f->ref, target, depth + 1);
        if (rc != FB_OK) return rc;
        fb_pop(c);
    }
    return FB_OK;
}

/* A shallow field: a string's extent and NUL, or a vector's extent; not its text nor
 * its elements (the format reads them itself). */
static int verify_shallow(fb_ctx *c, const fb_tbl *t, const fb_field *f) {
    fb_vec items;
    if (f->kind == FB_STRING) return fb_fld_str(c, t, f, &items);
    if (f->kind >= FB_VEC_SCALAR) return fb_fld_vec(c, t, f, &items);
    return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);   /* only strings and vectors can be */
}

/* A `required` field must be there: its slot set and, for a union, its type not NONE
 * (FlatBuffers' own verifier checks the slot only). Absent, it fails at its table. */
static int verify_required(fb_ctx *c, const fb_tbl *t, const fb_field *fields, unsigned i) {
    const fb_field *f = &fields[i];
    uint64_t at;
    uint8_t type = 1;
    FB_TRY(fb_at_field(c, f, FB_NO_INDEX, fb_tbl_field_aligned(c, t, f->id, 1, 1, &at)));
    if (at && f->kind == FB_UNION && i > 0 && fields[i - 1].kind == FB_UNION_TYPE)
        FB_TRY(fb_at_field(c, f, FB_NO_INDEX, fb_fld_u8(c, t, &fields[i - 1], &type)));
    if (!at || !type) return fb_fail_at(c, f, FB_NO_INDEX, FB_E_MISSING_FIELD, t->pos);
    return FB_OK;
}

static int verify_field(fb_ctx *c, const verifier *v, const fb_tbl *t, const fb_field *fields,
                        unsigned i, uint32_t depth) {
    const fb_field *f = &fields[i];
    uint64_t at;
    switch (f->kind) {
    case FB_SCALAR:
    case FB_UNION_TYPE:
    case FB_STRUCT:
        return fb_tbl_field_aligned(c, t, f->id, f->size, f->align, &at);
    case FB_STRING:
        FB_TRY(fb_fld_ref(c, t, f, &at));
        return at ? verify_string(c, at) : FB_OK;
    case FB_TABLE:
        FB_TRY(fb_fld_ref(c, t, f, &at));
        return at ? verify_table(c, v, f->ref, at, depth + 1) : FB_OK;
    case FB_UNION:
        /* fbsgen puts a union's type slot right before it */
        if (i == 0 || fields[i - 1].kind != FB_UNION_TYPE) return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
        return verify_union(c, v, t, &fields[i - 1], f, depth);
    default:
        return verify_vector(c, v, t, f, depth);
    }
}

/* Strict mode: no slot past the schema's last field is set. A newer writer's fields are
 * valid FlatBuffers, and this reader skips them, as the runtime's does. */
static int no_unknown_fields(fb_ctx *c, const fb_tbl *t, const fb_decl *d) {
    uint64_t slot = 4 + 2 * (d->count ? (uint64_t)d->fields[d->count - 1].id + 1 : 0);
    for (; slot + 2 <= t->vt_size; slot += 2)
        if (fb_ld16(fb_bytes_at(c, t->vt + slot, 2)) != 0)
            return fb_fail(c, FB_E_UNKNOWN_FIELD, t->vt + slot);
    return FB_OK;
}

/* The fields of table t (declaration d), opened at nesting `depth`, but those whose
 * vtable ids are set in `skip`. A scalar or a struct that is not required, most of a
 * file's fields, is read once: its slot, its extent and its alignment, located at the
 * field only when it fails. */
static int verify_fields(fb_ctx *c, const verifier *v, const fb_decl *d, const fb_tbl *t,
                         uint64_t skip, uint32_t depth) {
    unsigned i;
    for (i = 0; i < d->count; i++) {
        const fb_field *f = &d->fields[i];
        int rc, shallow;
        if (f->kind == FB_UNION_TYPE) continue;   /* checked with its union */
        if (f->id < 64 && (skip >> f->id & 1)) continue;
        if ((f->kind == FB_SCALAR || f->kind == FB_STRUCT) && !(f->flags & FB_REQUIRED)) {
            uint64_t at;
            FB_TRY(fb_at_field(c, f, FB_NO_INDEX,
                               fb_tbl_field_aligned(c, t, f->id, f->size, f->align, &at)));
            continue;
        }
        shallow = is_shallow(v, f);
        if ((f->kind == FB_VEC_SCALAR || f->kind == FB_VEC_STRUCT) && !shallow) {
            /* its extent, its elements counted: fb_fld_vec fails a required one absent
             * as verify_required would, at the table, located at the field */
            fb_vec items;
            FB_TRY(fb_at_field(c, f, FB_NO_INDEX, fb_fld_vec(c, t, f, &items)));
            FB_TRY(fb_at_field(c, f, FB_NO_INDEX,
                               fb_count_elements(c, items.count, items.data)));
            continue;
        }
        /* Absent and optional: nothing to check (a union is checked by its type slot) */
        if (f->kind != FB_UNION && !(f->flags & FB_REQUIRED) && !fb_tbl_has(c, t, f->id))
            continue;
        if (f->flags & FB_REQUIRED) FB_TRY(verify_required(c, t, d->fields, i));
        if (!shallow && (f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE)) {
            FB_TRY(verify_field(c, v, t, d->fields, i, depth));   /* pushes per element */
            continue;
        }
        push_field(c, f, FB_NO_INDEX);
        rc = shallow ? verify_shallow(c, t, f) : verify_field(c, v, t, d->fields, i, depth);
        if (rc != FB_OK) return rc;
        fb_pop(c);
    }
    return c->strict ? no_unknown_fields(c, t, d) : FB_OK;
}

static int verify_table(fb_ctx *c, const verifier *v, unsigned decl, uint64_t pos,
                        uint32_t depth) {
    fb_tbl t;
    if (decl >= v->s->count || v->s->decls[decl].kind != FB_DECL_TABLE)
        return fb_fail(c, FB_E_BAD_ARGUMENT, pos);
    if (depth > c->max_depth) return fb_fail(c, FB_E_DEPTH_BUDGET, pos);
    FB_TRY(fb_tbl_open(c, pos, &t));
    return verify_fields(c, v, &v->s->decls[decl], &t, 0, depth);
}

int fb_verify_table(fb_ctx *c, const fb_schema *s, unsigned decl, uint64_t pos) {
    return fb_verify_table_shallow(c, s, decl, pos, NULL);
}

int fb_verify_table_shallow(fb_ctx *c, const fb_schema *s, unsigned decl, uint64_t pos,
                            const fb_field *const *shallow) {
    verifier v;
    v.s = s;
    v.shallow = shallow;
    return verify_table(c, &v, decl, pos, 0);
}

int fb_verify_field(fb_ctx *c, const fb_schema *s, const fb_tbl *t, const fb_field *f,
                    uint32_t depth) {
    verifier v;
    v.s = s;
    v.shallow = NULL;
    if (f->kind != FB_VEC_TABLE) return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
    return verify_vector(c, &v, t, f, depth);
}

int fb_verify_fields(fb_ctx *c, const fb_schema *s, unsigned decl, const fb_tbl *t,
                     const fb_field *const *shallow, uint64_t skip, uint32_t depth) {
    verifier v;
    v.s = s;
    v.shallow = shallow;
    if (decl >= s->count || s->decls[decl].kind != FB_DECL_TABLE)
        return fb_fail(c, FB_E_BAD_ARGUMENT, t->pos);
    return verify_fields(c, &v, &s->decls[decl], t, skip, depth);
}

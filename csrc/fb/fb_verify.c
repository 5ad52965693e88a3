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

static int verify_table(ctx *c, const verifier *v, unsigned decl, uint64_t pos,
                        uint32_t depth);

/* Pushes the segment of field `f` (its bare name at the root of the path). */
static void push_field(ctx *c, const fb_field *f, int64_t index) {
    push(c, c->depth == 0 ? f->name : f->path, index);
}

static int is_shallow(const verifier *v, const fb_field *f) {
    const fb_field *const *p;
    if (!v->shallow) return 0;
    for (p = v->shallow; *p; p++)
        if (*p == f) return 1;
    return 0;
}

static int verify_string(ctx *c, uint64_t pos) {
    vec str;
    return text_at(c, pos, &str);
}

static int verify_union(ctx *c, const verifier *v, const tbl *t, const fb_field *types,
                        const fb_field *f, uint32_t depth) {
    const fb_decl *u = &v->s->decls[f->ref];
    const fb_member *m;
    uint8_t type;
    uint64_t target;
    TRY(fld_u8(c, t, types, &type));
    if (type == 0) return FB_OK;   /* NONE: the value, if any, is not read */
    if (type >= u->count || u->members[type].kind == FB_NONE) {
        uint64_t at;
        TRY(tbl_field(c, t, types->id, 1, &at));
        return fail(c, FB_E_BAD_UNION_TYPE, at);
    }
    m = &u->members[type];
    TRY(fld_union(c, t, f, m, &target));
    if (!target || m->kind != FB_TABLE) return FB_OK;
    push(c, m->name, PATH_MEMBER);
    TRY(verify_table(c, v, m->ref, target, depth + 1));
    pop(c);
    return FB_OK;
}

static int verify_vector(ctx *c, const verifier *v, const tbl *t, const fb_field *f,
                         uint32_t depth) {
    vec items;
    uint32_t i;
    int offsets = f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE;
    if (offsets) push_field(c, f, NO_INDEX);
    TRY(fld_vec(c, t, f, &items));
    TRY(count_elements(c, items.count, items.data));
    if (!offsets) return FB_OK;
    pop(c);
    for (i = 0; i < items.count; i++) {
        uint64_t target;
        int rc;
        push_field(c, f, i);
        rc = vec_ref(c, &items, i, &target);
        if (rc == FB_OK)
            rc = f->kind == FB_VEC_STRING ? verify_string(c, target)
                                          : verify_table(c, v, f->ref, target, depth + 1);
        if (rc != FB_OK) return rc;
        pop(c);
    }
    return FB_OK;
}

/* A shallow field: a string's extent and NUL, or a vector's extent; not its text nor
 * its elements (the format reads them itself). */
static int verify_shallow(ctx *c, const tbl *t, const fb_field *f) {
    vec items;
    if (f->kind == FB_STRING) return fld_str(c, t, f, &items);
    if (f->kind >= FB_VEC_SCALAR) return fld_vec(c, t, f, &items);
    return fail(c, FB_E_BAD_ARGUMENT, t->pos);   /* only strings and vectors can be */
}

/* A `required` field must be there: its slot set and, for a union, its type not NONE
 * (FlatBuffers' own verifier checks the slot only). Absent, it fails at its table. */
static int verify_required(ctx *c, const tbl *t, const fb_field *fields, unsigned i) {
    const fb_field *f = &fields[i];
    uint64_t at;
    uint8_t type = 1;
    TRY(at_field(c, f, NO_INDEX, tbl_field_aligned(c, t, f->id, 1, 1, &at)));
    if (at && f->kind == FB_UNION && i > 0 && fields[i - 1].kind == FB_UNION_TYPE)
        TRY(at_field(c, f, NO_INDEX, fld_u8(c, t, &fields[i - 1], &type)));
    if (!at || !type) return fail_at(c, f, NO_INDEX, FB_E_MISSING_FIELD, t->pos);
    return FB_OK;
}

static int verify_field(ctx *c, const verifier *v, const tbl *t, const fb_field *fields,
                        unsigned i, uint32_t depth) {
    const fb_field *f = &fields[i];
    uint64_t at;
    switch (f->kind) {
    case FB_SCALAR:
    case FB_UNION_TYPE:
    case FB_STRUCT:
        return tbl_field_aligned(c, t, f->id, f->size, f->align, &at);
    case FB_STRING:
        TRY(fld_ref(c, t, f, &at));
        return at ? verify_string(c, at) : FB_OK;
    case FB_TABLE:
        TRY(fld_ref(c, t, f, &at));
        return at ? verify_table(c, v, f->ref, at, depth + 1) : FB_OK;
    case FB_UNION:
        /* fbsgen puts a union's type slot right before it */
        if (i == 0 || fields[i - 1].kind != FB_UNION_TYPE) return fail(c, FB_E_BAD_ARGUMENT, t->pos);
        return verify_union(c, v, t, &fields[i - 1], f, depth);
    default:
        return verify_vector(c, v, t, f, depth);
    }
}

/* Strict mode: no slot past the schema's last field is set. A newer writer's fields are
 * valid FlatBuffers, and this reader skips them, as the runtime's does. */
static int no_unknown_fields(ctx *c, const tbl *t, const fb_decl *d) {
    uint64_t slot = 4 + 2 * (d->count ? (uint64_t)d->fields[d->count - 1].id + 1 : 0);
    for (; slot + 2 <= t->vt_size; slot += 2)
        if (ld16(bytes_at(c, t->vt + slot, 2)) != 0)
            return fail(c, FB_E_UNKNOWN_FIELD, t->vt + slot);
    return FB_OK;
}

static int verify_table(ctx *c, const verifier *v, unsigned decl, uint64_t pos,
                        uint32_t depth) {
    const fb_decl *d;
    tbl t;
    unsigned i;
    if (decl >= v->s->count || v->s->decls[decl].kind != FB_DECL_TABLE)
        return fail(c, FB_E_BAD_ARGUMENT, pos);
    if (depth > c->max_depth) return fail(c, FB_E_DEPTH_BUDGET, pos);
    d = &v->s->decls[decl];
    TRY(tbl_open(c, pos, &t));
    for (i = 0; i < d->count; i++) {
        const fb_field *f = &d->fields[i];
        int rc, shallow;
        if (f->kind == FB_UNION_TYPE) continue;   /* checked with its union */
        /* Absent and optional: nothing to check (a union is checked by its type slot) */
        if (f->kind != FB_UNION && !(f->flags & FB_REQUIRED) && !tbl_has(c, &t, f->id))
            continue;
        shallow = is_shallow(v, f);
        if (f->flags & FB_REQUIRED) TRY(verify_required(c, &t, d->fields, i));
        if (!shallow && (f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE)) {
            TRY(verify_field(c, v, &t, d->fields, i, depth));   /* pushes per element */
            continue;
        }
        push_field(c, f, NO_INDEX);
        rc = shallow ? verify_shallow(c, &t, f) : verify_field(c, v, &t, d->fields, i, depth);
        if (rc != FB_OK) return rc;
        pop(c);
    }
    return c->strict ? no_unknown_fields(c, &t, d) : FB_OK;
}

int fb_verify_table(ctx *c, const fb_schema *s, unsigned decl, uint64_t pos) {
    return fb_verify_table_shallow(c, s, decl, pos, NULL);
}

int fb_verify_table_shallow(ctx *c, const fb_schema *s, unsigned decl, uint64_t pos,
                            const fb_field *const *shallow) {
    verifier v;
    v.s = s;
    v.shallow = shallow;
    return verify_table(c, &v, decl, pos, 0);
}

int fb_verify_field(ctx *c, const fb_schema *s, const tbl *t, const fb_field *f,
                    uint32_t depth) {
    verifier v;
    v.s = s;
    v.shallow = NULL;
    if (f->kind != FB_VEC_TABLE) return fail(c, FB_E_BAD_ARGUMENT, t->pos);
    return verify_vector(c, &v, t, f, depth);
}

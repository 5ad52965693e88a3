/*
 * fb_verify.c: the generic verifier. It walks a buffer by a schema's descriptors
 * (fb_schema.h, generated from the .fbs by csrc/schemas/fbsgen.py), so a format gets its
 * structural checks from its schema alone; what the values mean (indices into other
 * vectors, tensor extents) is checked by the format's own file on top.
 */
#include "fb.h"

static int verify_table(ctx *c, const fb_schema *s, unsigned decl, uint64_t pos,
                        uint32_t depth);

/* Pushes the segment of field `f` (its bare name at the root of the path). */
static void push_field(ctx *c, const fb_field *f, int64_t index) {
    push(c, c->depth == 0 ? f->name : f->path, index);
}

static int verify_string(ctx *c, uint64_t pos) {
    vec str;
    return text_at(c, pos, &str);
}

static int verify_union(ctx *c, const fb_schema *s, const tbl *t, const fb_field *types,
                        const fb_field *f, uint32_t depth) {
    const fb_decl *u = &s->decls[f->ref];
    const fb_member *m;
    uint8_t type;
    uint64_t target;
    TRY(fld_u8(c, t, types, &type));
    if (type == 0) return PTMF_OK;   /* NONE: the value, if any, is not read */
    if (type >= u->count || u->members[type].kind == FB_NONE) {
        uint64_t at;
        TRY(tbl_field(c, t, types->id, 1, &at));
        return fail(c, PTMF_E_BAD_UNION_TYPE, at);
    }
    m = &u->members[type];
    TRY(fld_union(c, t, f, m, &target));
    if (!target || m->kind != FB_TABLE) return PTMF_OK;
    push(c, m->name, PATH_MEMBER);
    TRY(verify_table(c, s, m->ref, target, depth + 1));
    pop(c);
    return PTMF_OK;
}

static int verify_vector(ctx *c, const fb_schema *s, const tbl *t, const fb_field *f,
                         uint32_t depth) {
    vec v;
    uint32_t i;
    int offsets = f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE;
    if (offsets) push_field(c, f, NO_INDEX);
    TRY(fld_vec(c, t, f, &v));
    TRY(count_elements(c, v.count, v.data));
    if (!offsets) return PTMF_OK;
    pop(c);
    for (i = 0; i < v.count; i++) {
        uint64_t target;
        int rc;
        push_field(c, f, i);
        rc = vec_ref(c, &v, i, &target);
        if (rc == PTMF_OK)
            rc = f->kind == FB_VEC_STRING ? verify_string(c, target)
                                          : verify_table(c, s, f->ref, target, depth + 1);
        if (rc != PTMF_OK) return rc;
        pop(c);
    }
    return PTMF_OK;
}

static int verify_field(ctx *c, const fb_schema *s, const tbl *t, const fb_field *fields,
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
        return at ? verify_string(c, at) : PTMF_OK;
    case FB_TABLE:
        TRY(fld_ref(c, t, f, &at));
        return at ? verify_table(c, s, f->ref, at, depth + 1) : PTMF_OK;
    case FB_UNION:
        /* fbsgen puts a union's type slot right before it */
        if (i == 0 || fields[i - 1].kind != FB_UNION_TYPE) return fail(c, PTMF_E_BAD_ARGUMENT, t->pos);
        return verify_union(c, s, t, &fields[i - 1], f, depth);
    default:
        return verify_vector(c, s, t, f, depth);
    }
}

static int verify_table(ctx *c, const fb_schema *s, unsigned decl, uint64_t pos,
                        uint32_t depth) {
    const fb_decl *d;
    tbl t;
    unsigned i;
    if (decl >= s->count || s->decls[decl].kind != FB_DECL_TABLE)
        return fail(c, PTMF_E_BAD_ARGUMENT, pos);
    if (depth > c->max_depth) return fail(c, PTMF_E_DEPTH_BUDGET, pos);
    d = &s->decls[decl];
    TRY(tbl_open(c, pos, &t));
    for (i = 0; i < d->count; i++) {
        const fb_field *f = &d->fields[i];
        int rc;
        if (f->kind == FB_UNION_TYPE) continue;   /* checked with its union */
        if (f->kind == FB_VEC_STRING || f->kind == FB_VEC_TABLE) {   /* pushes per element */
            TRY(verify_field(c, s, &t, d->fields, i, depth));
            continue;
        }
        push_field(c, f, NO_INDEX);
        rc = verify_field(c, s, &t, d->fields, i, depth);
        if (rc != PTMF_OK) return rc;
        pop(c);
    }
    return PTMF_OK;
}

int fb_verify_table(ctx *c, const fb_schema *s, unsigned decl, uint64_t pos) {
    return verify_table(c, s, decl, pos, 0);
}

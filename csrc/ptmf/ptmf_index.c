/*
 * ptmf_index.c: the ivalue index (ptmf_index_ivalues): one record per ivalue, each
 * reference checked to name an earlier ivalue, each value's depth, a dict's keys of
 * the types TorchScript hashes; tensors are counted by the tensor walk as they come.
 */
#include "ptmf/ptmf_internal.h"

#include <string.h>

/* Checks that index `j` names an earlier ivalue and folds its depth in. */
static int child(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *out, uint32_t self,
                 uint32_t j, uint64_t where, uint32_t *depth) {
    if (j >= s->n_ivalues) return fb_fail(c, PTMF_E_BAD_INDEX, where);
    if (j >= self) return fb_fail(c, PTMF_E_FORWARD_REFERENCE, where);
    if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    return FB_OK;
}

/* Checks the ivalue indices of vector field f (read into v) and folds their depths in. */
static int children(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *out, uint32_t self,
                    const fb_field *f, const fb_vec *v, uint32_t *depth) {
    uint32_t i;
    FB_TRY(fb_at_field(c, f, FB_NO_INDEX, fb_count_elements(c, v->count, v->data)));
    for (i = 0; i < v->count; i++) {
        uint64_t where = v->data + 4 * (uint64_t)i;
        uint32_t j = fb_ld32(c->buf + where);
        if (j >= self || j >= s->n_ivalues)
            return fb_at_field(c, f, i, child(c, s, out, self, j, where, depth));
        if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    }
    return FB_OK;
}

/* Dict keys are None, str, int, float, complex, bool or Tensor: TorchScript's key
 * types (a Tensor key is hashed by identity, as torch does; the Python side wraps
 * it), and None; lists, tuples and dicts are no key at all. Checked when verifying,
 * so that a verified file decodes. */
static int dict_keys(fb_ctx *c, const ptmf_ivalue *out, const fb_vec *keys) {
    uint32_t i;
    for (i = 0; i < keys->count; i++) {
        uint64_t where = keys->data + 4 * (uint64_t)i;
        uint8_t t = out[fb_ld32(c->buf + where)].type;
        if (t != UT_NONE && t != UT_INT && t != UT_BOOL && t != UT_DOUBLE
            && t != UT_COMPLEX && t != UT_STRING && t != UT_TENSOR)
            return fb_fail_at(c, &mobile_dict[MOBILE_DICT_KEYS], i, PTMF_E_UNHASHABLE_KEY, where);
    }
    return FB_OK;
}

/* What ivalue i's member table t holds, into r; *depth folds in its children's. */
static int index_member(fb_ctx *c, const ptmf_summary *s, ptmf_tensor_sink *k, ptmf_ivalue *out,
                        uint32_t i, const fb_tbl *t, uint32_t *depth) {
    ptmf_ivalue *r = &out[i];
    fb_vec v;
    switch (r->type) {
    case UT_STRING:
    case UT_DEVICE:
        FB_TRY(fb_fld_text_at(c, t, r->type == UT_STRING ? &mobile_string[MOBILE_STRING_DATA]
                                                   : &mobile_device[MOBILE_DEVICE_STR], &v));
        r->data = v.data;
        r->length = v.count;
        break;
    case UT_LIST:
    case UT_TUPLE: {
        const fb_field *f = r->type == UT_LIST ? &mobile_list[MOBILE_LIST_ITEMS]
                                               : &mobile_tuple[MOBILE_TUPLE_ITEMS];
        FB_TRY(fb_fld_vec_at(c, t, f, &v));
        FB_TRY(children(c, s, out, i, f, &v, depth));
        r->data = v.data;
        r->length = v.count;
        if (r->type == UT_LIST) {
            FB_TRY(fb_fld_text_at(c, t, &mobile_list[MOBILE_LIST_ANNOTATION_STR], &v));
            r->annotation = v.data;
            r->annotation_len = v.count;
        }
        break;
    }
    case UT_DICT: {
        fb_vec values;
        FB_TRY(fb_fld_vec_at(c, t, &mobile_dict[MOBILE_DICT_KEYS], &v));
        FB_TRY(children(c, s, out, i, &mobile_dict[MOBILE_DICT_KEYS], &v, depth));
        if (c->verify) FB_TRY(dict_keys(c, out, &v));
        FB_TRY(fb_fld_vec_at(c, t, &mobile_dict[MOBILE_DICT_VALUES], &values));
        if (values.count != v.count)
            return fb_fail_at(c, &mobile_dict[MOBILE_DICT_VALUES], FB_NO_INDEX, FB_E_LENGTH_MISMATCH,
                           t->pos);
        FB_TRY(children(c, s, out, i, &mobile_dict[MOBILE_DICT_VALUES], &values, depth));
        r->data = v.data;
        r->length = v.count;
        r->values = values.data;
        FB_TRY(fb_fld_text_at(c, t, &mobile_dict[MOBILE_DICT_ANNOTATION_STR], &v));
        r->annotation = v.data;
        r->annotation_len = v.count;
        break;
    }
    case UT_INT_LIST:
    case UT_DOUBLE_LIST:
    case UT_BOOL_LIST:
        FB_TRY(fb_fld_vec_at(c, t,
                       r->type == UT_INT_LIST      ? &mobile_int_list[MOBILE_INT_LIST_ITEMS]
                       : r->type == UT_DOUBLE_LIST ? &mobile_double_list[MOBILE_DOUBLE_LIST_ITEMS]
                                                   : &mobile_bool_list[MOBILE_BOOL_LIST_ITEMS],
                       &v));
        r->data = v.data;
        r->length = v.count;
        break;
    case UT_OBJECT: {
        uint32_t type_index, state, setstate;
        FB_TRY(fb_fld_u32_at(c, t, &mobile_object[MOBILE_OBJECT_TYPE_INDEX], &type_index));
        if (type_index >= s->n_object_types)
            return fb_fail_at(c, &mobile_object[MOBILE_OBJECT_TYPE_INDEX], FB_NO_INDEX,
                           PTMF_E_BAD_TYPE_INDEX, t->pos);
        FB_TRY(fb_fld_u32_at(c, t, &mobile_object[MOBILE_OBJECT_STATE], &state));
        FB_TRY(fb_at_field(c, &mobile_object[MOBILE_OBJECT_STATE], FB_NO_INDEX,
                     child(c, s, out, i, state, t->pos, depth)));
        FB_TRY(fb_fld_u32_at(c, t, &mobile_object[MOBILE_OBJECT_SETSTATE_FUNC], &setstate));
        if (setstate >= s->n_ivalues)
            return fb_fail_at(c, &mobile_object[MOBILE_OBJECT_SETSTATE_FUNC], FB_NO_INDEX,
                           PTMF_E_BAD_INDEX, t->pos);
        FB_TRY(fb_fld_vec_at(c, t, &mobile_object[MOBILE_OBJECT_ATTRS], &v));
        FB_TRY(children(c, s, out, i, &mobile_object[MOBILE_OBJECT_ATTRS], &v, depth));
        r->data = v.data;
        r->length = v.count;
        r->type_index = type_index;
        r->state = state;
        r->setstate = setstate;
        break;
    }
    case UT_ENUM: {
        uint32_t value;
        FB_TRY(fb_fld_text_at(c, t, &mobile_enum_value[MOBILE_ENUM_VALUE_TYPE_NAME], &v));
        FB_TRY(fb_fld_u32_at(c, t, &mobile_enum_value[MOBILE_ENUM_VALUE_VALUE], &value));
        FB_TRY(fb_at_field(c, &mobile_enum_value[MOBILE_ENUM_VALUE_VALUE], FB_NO_INDEX,
                     child(c, s, out, i, value, t->pos, depth)));
        r->data = v.data;
        r->length = v.count;
        r->target = value;
        break;
    }
    case UT_FUNCTION:
        FB_TRY(fb_fld_text_at(c, t, &mobile_function[MOBILE_FUNCTION_QN], &v));
        FB_TRY(fb_fld_u32_at(c, t, &mobile_function[MOBILE_FUNCTION_CLASS_TYPE], &r->type_index));
        r->data = v.data;
        r->length = v.count;
        break;
    case UT_TENSOR: {
        int32_t idx;
        FB_TRY(ptmf_walk_tensor(c, t, i, 0, k, &idx));
        r->target = (uint32_t)idx;
        break;
    }
    default:
        break;
    }
    return FB_OK;
}

/* IValue i of vector `all`. */
static int index_one(fb_ctx *c, const ptmf_summary *s, ptmf_tensor_sink *k, ptmf_ivalue *out,
                     uint32_t i, const fb_vec *all) {
    const fb_field *val = &mobile_i_value[MOBILE_I_VALUE_VAL];
    ptmf_ivalue *r = &out[i];
    fb_union_value u;
    uint32_t depth = 1;
    fb_tbl iv;
    int rc;
    FB_TRY(fb_vec_table(c, all, i, &iv));
    rc = fb_union_open(c, &iv, val, &mobile_schema_file.decls[val->ref], &u);
    if (rc == FB_OK && u.type == UT_NONE)   /* a None's offset too is followed */
        rc = fb_fld_ref(c, &iv, val, &u.pos);
    FB_TRY(fb_at_member(c, val, u.member, rc));
    r->type = u.type;
    r->pos = u.pos;
    if (u.member->kind == FB_TABLE)
        FB_TRY_IN_MEMBER(c, val, u.member, index_member(c, s, k, out, i, &u.table, &depth));
    if (depth > c->max_depth) return fb_fail(c, FB_E_DEPTH_BUDGET, iv.pos);
    r->depth = depth;
    return FB_OK;
}

int ptmf_index_ivalues(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *out, fb_error *err) {
    fb_ctx c;
    fb_vec all = {s->ivalues, s->n_ivalues};
    ptmf_tensor_sink k;
    uint32_t i;
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    memset(&k, 0, sizeof k);
    FB_TRY(fb_count_elements(&c, s->n_ivalues, s->ivalues));
    for (i = 0; i < s->n_ivalues; i++) {
        memset(&out[i], 0, sizeof out[i]);
        FB_TRY_IN_FIELD(&c, &mobile_module[MOBILE_MODULE_IVALUES], i,
                     index_one(&c, s, &k, out, i, &all));
    }
    s->n_tensors = k.n_tensors;
    s->n_dims = k.n_dims;
    fb_ctx_finish(&c);
    return FB_OK;
}

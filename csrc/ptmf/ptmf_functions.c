/*
 * ptmf_functions.c: the readers of Function tables and of the small tables beside them
 * (Operator, Arg, ExtraFile, ObjectType), for the verifier and on demand; the
 * on-demand entry points bounds-check whether or not the buffer was verified.
 */
#include "ptmf/ptmf_internal.h"

#include <string.h>

/* A function's schema table: its arguments and returns. */
static int read_schema(fb_ctx *c, const fb_tbl *t, ptmf_function *f) {
    fb_vec v;
    FB_TRY(fb_fld_vec_at(c, t, &mobile_schema[MOBILE_SCHEMA_ARGUMENTS], &v));
    f->arguments = v.data; f->n_arguments = v.count;
    FB_TRY(fb_fld_vec_at(c, t, &mobile_schema[MOBILE_SCHEMA_RETURNS], &v));
    f->returns = v.data; f->n_returns = v.count;
    return FB_OK;
}

/* With `s`, the constants are checked to name ivalues (verifying); NULL on demand. */
int ptmf_function_at(fb_ctx *c, const ptmf_summary *s, uint64_t pos, ptmf_function *f) {
    fb_tbl t, sub;
    fb_vec v;
    int present;
    uint32_t j;
    memset(f, 0, sizeof *f);
    FB_TRY(fb_tbl_open(c, pos, &t));
    FB_TRY(fb_fld_text_at(c, &t, &mobile_function[MOBILE_FUNCTION_QN], &v));
    f->qn = v.data; f->qn_len = v.count;
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_function[MOBILE_FUNCTION_INSTRUCTIONS], &v));
    f->instructions = v.data; f->n_instructions = v.count;
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_function[MOBILE_FUNCTION_OPERATORS], &v));
    f->operators = v.data; f->n_operators = v.count;
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_function[MOBILE_FUNCTION_CONSTANTS], &v));
    f->constants = v.data; f->n_constants = v.count;
    if (s) {
        FB_TRY(fb_at_field(c, &mobile_function[MOBILE_FUNCTION_CONSTANTS], FB_NO_INDEX,
                     fb_count_elements(c, v.count, v.data)));
        for (j = 0; j < v.count; j++)
            if (fb_vec_u32(c, &v, j) >= s->n_ivalues)
                return fb_fail_at(c, &mobile_function[MOBILE_FUNCTION_CONSTANTS], j, PTMF_E_BAD_INDEX,
                               v.data + 4 * (uint64_t)j);
    }
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_function[MOBILE_FUNCTION_TYPE_ANNOTATIONS], &v));
    f->type_annotations = v.data; f->n_type_annotations = v.count;
    FB_TRY(fb_fld_i32_at(c, &t, &mobile_function[MOBILE_FUNCTION_REGISTER_SIZE], &f->register_size));
    FB_TRY(fb_fld_table_at(c, &t, &mobile_function[MOBILE_FUNCTION_SCHEMA], &sub, &present));
    f->has_schema = present != 0;
    if (present)
        FB_TRY_IN_FIELD(c, &mobile_function[MOBILE_FUNCTION_SCHEMA], FB_NO_INDEX,
                     read_schema(c, &sub, f));
    FB_TRY(fb_fld_table_at(c, &t, &mobile_function[MOBILE_FUNCTION_DEBUG_INFO], &sub, &present));
    if (present) {
        FB_TRY(fb_at_field(c, &mobile_debug_info[MOBILE_DEBUG_INFO_DEBUG_HANDLE], FB_NO_INDEX,
                     fb_at_field(c, &mobile_function[MOBILE_FUNCTION_DEBUG_INFO], FB_NO_INDEX,
                              fb_fld_vec(c, &sub,
                                      &mobile_debug_info[MOBILE_DEBUG_INFO_DEBUG_HANDLE], &v))));
        f->debug_handles = v.data; f->n_debug_handles = v.count;
    }
    FB_TRY(fb_fld_u32_at(c, &t, &mobile_function[MOBILE_FUNCTION_CLASS_TYPE], &f->class_type));
    return FB_OK;
}

/* A table of two strings and, when `num` is given, an integer after them. The first
 * string is text; the second too when `text1`, else bytes (an extra file's content). */
static int read_pair(fb_ctx *c, const fb_vec *v, uint32_t i, const fb_field *s0, const fb_field *s1,
                     int text1, const fb_field *num, ptmf_record *out) {
    fb_tbl t;
    fb_vec s;
    memset(out, 0, sizeof *out);
    FB_TRY(fb_vec_table(c, v, i, &t));
    FB_TRY(fb_fld_text_at(c, &t, s0, &s));
    out->s0 = s.data; out->s0_len = s.count;
    FB_TRY(text1 ? fb_fld_text_at(c, &t, s1, &s) : fb_fld_str_at(c, &t, s1, &s));
    out->s1 = s.data; out->s1_len = s.count;
    if (num) {
        uint32_t u;
        FB_TRY(fb_fld_u32(c, &t, num, &u));
        out->num = num->type == FB_I32 ? (int64_t)fb_as_i32(u) : (int64_t)u;
    }
    return FB_OK;
}

static int read_operator(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, &mobile_operator[MOBILE_OPERATOR_NAME],
                     &mobile_operator[MOBILE_OPERATOR_OVERLOAD_NAME],
                     1, &mobile_operator[MOBILE_OPERATOR_NUM_ARGS_SERIALIZED], out);
}

int ptmf_arg_at(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, &mobile_arg[MOBILE_ARG_NAME], &mobile_arg[MOBILE_ARG_TYPE],
                     1, &mobile_arg[MOBILE_ARG_DEFAULT_VALUE], out);
}

static int read_extra_file(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, &mobile_extra_file[MOBILE_EXTRA_FILE_NAME],
                     &mobile_extra_file[MOBILE_EXTRA_FILE_CONTENT], 0, NULL, out);
}

int ptmf_object_type_at(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out) {
    fb_tbl t;
    fb_vec s;
    uint8_t kind;
    memset(out, 0, sizeof *out);
    FB_TRY(fb_vec_table(c, v, i, &t));
    FB_TRY(fb_fld_text_at(c, &t, &mobile_object_type[MOBILE_OBJECT_TYPE_TYPE_NAME], &s));
    out->s0 = s.data; out->s0_len = s.count;
    FB_TRY(fb_fld_u8_at(c, &t, &mobile_object_type[MOBILE_OBJECT_TYPE_TYPE], &kind));
    out->num = kind;
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_object_type[MOBILE_OBJECT_TYPE_ATTR_NAMES], &s));
    out->v = s.data; out->v_len = s.count;
    return FB_OK;
}

/* ------------------------------------------------------ on-demand readers */

int ptmf_read_function(const uint8_t *buf, size_t len, uint64_t pos, ptmf_function *out,
                       fb_error *err) {
    fb_ctx c;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    fb_push(&c, "", FB_NO_INDEX);   /* on demand, paths start inside the unnamed table: ".qn" */
    return ptmf_function_at(&c, NULL, pos, out);
}

#define VECTOR_READER(fn, reader)                                                   \
    int fn(const uint8_t *buf, size_t len, uint64_t data, uint32_t count, uint32_t i, \
           ptmf_record *out, fb_error *err) {                                    \
        fb_ctx c;                                                                      \
        fb_vec v;                                                                      \
        fb_ctx_init(&c, buf, len, NULL, NULL, err);                                    \
        fb_push(&c, "", FB_NO_INDEX);   /* as ptmf_read_function: ".name" */              \
        v.data = data;                                                              \
        v.count = count;                                                            \
        if (!fb_in_bounds(&c, data, (uint64_t)count * 4)) return fb_fail(&c, FB_E_OUT_OF_BOUNDS, data); \
        return reader(&c, &v, i, out);                                              \
    }

VECTOR_READER(ptmf_read_operator, read_operator)
VECTOR_READER(ptmf_read_arg, ptmf_arg_at)
VECTOR_READER(ptmf_read_extra_file, read_extra_file)

int ptmf_read_strings(const uint8_t *buf, size_t len, uint64_t data, uint32_t count,
                      uint64_t *pos, uint32_t *size, fb_error *err) {
    fb_ctx c;
    fb_vec v = {data, count}, s;
    uint32_t i;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    if (!fb_in_bounds(&c, data, (uint64_t)count * 4)) return fb_fail(&c, FB_E_OUT_OF_BOUNDS, data);
    for (i = 0; i < count; i++) {
        uint64_t target;
        fb_push(&c, "", i);   /* located at the element of a vector the caller names */
        FB_TRY(fb_vec_ref(&c, &v, i, &target));
        FB_TRY(fb_str_at(&c, target, &s));
        fb_pop(&c);
        pos[i] = s.data;
        size[i] = s.count;
    }
    return FB_OK;
}

int ptmf_read_object_types(const uint8_t *buf, size_t len, uint64_t data, uint32_t count,
                           ptmf_object_type *types, ptmf_span *attrs, uint64_t max_attrs,
                           uint64_t *n_attrs, fb_error *err) {
    fb_ctx c;
    fb_vec v = {data, count};
    uint64_t total = 0, cap;
    uint32_t i, k;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    cap = c.max_elements < UINT32_MAX ? c.max_elements : UINT32_MAX;   /* names numbered in 32 bits */
    *n_attrs = 0;
    if (!fb_in_bounds(&c, data, (uint64_t)count * 4)) return fb_fail(&c, FB_E_OUT_OF_BOUNDS, data);
    for (i = 0; i < count; i++) {
        ptmf_record r;
        FB_TRY_IN_FIELD(&c, &mobile_module[MOBILE_MODULE_OBJECT_TYPES], i,
                     ptmf_object_type_at(&c, &v, i, &r));
        /* Types may share one attr_names vector: its names count once per type. */
        if (r.v_len > cap - total)
            return fb_fail_at(&c, &mobile_module[MOBILE_MODULE_OBJECT_TYPES], i, FB_E_ELEMENT_BUDGET,
                           r.v);
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
        fb_vec names;
        names.data = types[i].attr_names;
        names.count = types[i].n_attrs;
        fb_push(&c, fb_field_segment(&c, &mobile_module[MOBILE_MODULE_OBJECT_TYPES]), i);
        for (k = 0; k < names.count; k++) {
            uint64_t target;
            fb_vec s;
            int rc = fb_vec_ref(&c, &names, k, &target);
            if (rc == FB_OK) rc = fb_str_at(&c, target, &s);
            FB_TRY(fb_at_field(&c, &mobile_object_type[MOBILE_OBJECT_TYPE_ATTR_NAMES], k, rc));
            attrs[types[i].first_attr + k].pos = s.data;
            attrs[types[i].first_attr + k].len = s.count;
        }
        fb_pop(&c);
    }
    return FB_OK;
}

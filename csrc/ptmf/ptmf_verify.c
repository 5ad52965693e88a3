/*
 * ptmf_verify.c: ptmf_verify_rest, the checks the index passes do not need: the
 * structure of the root table (but the ivalues and storages those passes checked) and
 * of every function, by the schema; then what functions, object types, objects, jit
 * sources and the root's references mean.
 */
#include "ptmf/ptmf_internal.h"

/* What the schema alone checks, by fb_verify_table_shallow: the whole root table but
 * the elements of the ivalues and storages, which the index passes check as they read
 * them, and the contents of ExtraFile tables, which are bytes in extra_files and text
 * in jit_sources (verify_jit_sources). */
static const fb_field *const module_shallow[] = {
    &mobile_module[MOBILE_MODULE_IVALUES], &mobile_module[MOBILE_MODULE_STORAGE_DATA],
    &mobile_extra_file[MOBILE_EXTRA_FILE_CONTENT], NULL};

/* Runs `expr` inside "ivalues[i].val<Member>" for ivalue i of union type `type`. */
#define TRY_IN_IVALUE(c, i, type, expr)                                                \
    do {                                                                               \
        fb_push((c), fb_field_segment((c), &mobile_module[MOBILE_MODULE_IVALUES]), (i));    \
        FB_TRY_IN_MEMBER((c), &mobile_i_value[MOBILE_I_VALUE_VAL], &mobile_i_value_union[type], \
                      expr);                                                           \
        fb_pop(c);                                                                        \
    } while (0)

/* Argument i of list v (of a schema's arguments or returns): its default names an ivalue. */
static int verify_arg(fb_ctx *c, const ptmf_summary *s, const fb_vec *v, uint32_t i) {
    ptmf_record a;
    FB_TRY(ptmf_arg_at(c, v, i, &a));
    if ((uint64_t)a.num >= s->n_ivalues)
        return fb_fail_at(c, &mobile_arg[MOBILE_ARG_DEFAULT_VALUE], FB_NO_INDEX, PTMF_E_BAD_INDEX,
                       v->data + 4 * (uint64_t)i);
    return FB_OK;
}

static int verify_args(fb_ctx *c, const ptmf_summary *s, const ptmf_function *f, int returns) {
    const fb_field *list =
        &mobile_schema[returns ? MOBILE_SCHEMA_RETURNS : MOBILE_SCHEMA_ARGUMENTS];
    fb_vec v;
    uint32_t i;
    v.data = returns ? f->returns : f->arguments;
    v.count = returns ? f->n_returns : f->n_arguments;
    FB_TRY(fb_count_elements(c, v.count, v.data));
    fb_push(c, fb_field_segment(c, &mobile_function[MOBILE_FUNCTION_SCHEMA]), FB_NO_INDEX);
    for (i = 0; i < v.count; i++) FB_TRY_IN_FIELD(c, list, i, verify_arg(c, s, &v, i));
    fb_pop(c);
    return FB_OK;
}

/* What function ivalue i refers to. */
static int verify_function(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                           uint32_t i) {
    ptmf_function f;
    FB_TRY(ptmf_function_at(c, s, ivalues[i].pos, &f));
    if (f.class_type >= s->n_object_types)
        return fb_fail_at(c, &mobile_function[MOBILE_FUNCTION_CLASS_TYPE], FB_NO_INDEX,
                       PTMF_E_BAD_TYPE_INDEX, ivalues[i].pos);
    FB_TRY(verify_args(c, s, &f, 0));
    FB_TRY(verify_args(c, s, &f, 1));
    if (f.n_debug_handles != 0 && f.n_debug_handles != f.n_instructions)
        return fb_at_field(c, &mobile_debug_info[MOBILE_DEBUG_INFO_DEBUG_HANDLE], FB_NO_INDEX,
                        fb_fail_at(c, &mobile_function[MOBILE_FUNCTION_DEBUG_INFO], FB_NO_INDEX,
                                FB_E_LENGTH_MISMATCH, f.debug_handles));
    return FB_OK;
}

/* What object ivalue i refers to, by its object type. */
static int verify_object(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                         const fb_vec *types, uint32_t i) {
    const ptmf_ivalue *o = &ivalues[i];
    ptmf_record ot;
    FB_TRY(ptmf_object_type_at(c, types, o->type_index, &ot));
    switch (ot.num) {
    case OT_CLASS_WITH_FIELD:
        if (o->length > ot.v_len)
            return fb_fail_at(c, &mobile_object[MOBILE_OBJECT_ATTRS], FB_NO_INDEX, FB_E_LENGTH_MISMATCH,
                           o->data);
        break;
    case OT_CUSTOM_CLASS:
        break;
    case OT_CLASS_WITH_SETSTATE:
        if (o->setstate >= s->n_ivalues || ivalues[o->setstate].type != UT_FUNCTION)
            return fb_fail_at(c, &mobile_object[MOBILE_OBJECT_SETSTATE_FUNC], FB_NO_INDEX,
                           FB_E_KIND_MISMATCH, o->pos);
        break;
    default:
        return fb_fail_at(c, &mobile_object[MOBILE_OBJECT_TYPE_INDEX], FB_NO_INDEX,
                       PTMF_E_BAD_OBJECT_KIND, o->pos);
    }
    return FB_OK;
}

/* Object type i: its kind is one torch writes. */
static int verify_object_type(fb_ctx *c, const fb_vec *types, uint32_t i) {
    ptmf_record ot;
    FB_TRY(ptmf_object_type_at(c, types, i, &ot));
    if (ot.num < OT_CLASS_WITH_FIELD || ot.num > OT_CLASS_WITH_SETSTATE)
        return fb_fail_at(c, &mobile_object_type[MOBILE_OBJECT_TYPE_TYPE], FB_NO_INDEX,
                       PTMF_E_BAD_OBJECT_KIND, ot.s0);
    return FB_OK;
}

/* TorchScript source i is text (an extra file's content is bytes). */
static int verify_jit_source(fb_ctx *c, const fb_vec *v, uint32_t i) {
    const fb_field *content = &mobile_extra_file[MOBILE_EXTRA_FILE_CONTENT];
    fb_tbl t;
    fb_vec text;
    FB_TRY(fb_vec_table(c, v, i, &t));
    FB_TRY(fb_fld_str_at(c, &t, content, &text));
    return fb_at_field(c, content, FB_NO_INDEX, fb_utf8_text(c, &text));
}

/* What the schema says of the parts the index passes do not read: the root table but
 * for module_shallow, every function, and that the jit sources are text. */
static int verify_structure(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues) {
    fb_vec sources = {s->jit_sources, s->n_jit_sources};
    uint32_t i;
    FB_TRY(fb_verify_table_shallow(c, &mobile_schema_file, MOBILE_DECL_MODULE, s->root,
                                module_shallow));
    for (i = 0; i < s->n_ivalues; i++)
        if (ivalues[i].type == UT_FUNCTION)
            TRY_IN_IVALUE(c, i, UT_FUNCTION, fb_verify_table(c, &mobile_schema_file,
                                                             MOBILE_DECL_FUNCTION, ivalues[i].pos));
    for (i = 0; i < sources.count; i++)
        FB_TRY_IN_FIELD(c, &mobile_module[MOBILE_MODULE_JIT_SOURCES], i,
                     verify_jit_source(c, &sources, i));
    return FB_OK;
}

/* Every index of vector field f of the module (data, count) names an ivalue, a function
 * when `functions`. */
static int verify_roots(fb_ctx *c, const ptmf_summary *s, const ptmf_ivalue *ivalues,
                        uint64_t data, uint32_t count, const fb_field *f, int functions) {
    uint32_t i;
    for (i = 0; i < count; i++) {
        uint32_t j = fb_ld32(c->buf + data + 4 * (uint64_t)i);
        if (j >= s->n_ivalues) return fb_fail_at(c, f, i, PTMF_E_BAD_INDEX, data + 4 * (uint64_t)i);
        if (functions && ivalues[j].type != UT_FUNCTION)
            return fb_fail_at(c, f, i, FB_E_KIND_MISMATCH, data + 4 * (uint64_t)i);
    }
    return FB_OK;
}

int ptmf_verify_rest(const uint8_t *buf, size_t len, const fb_options *opt,
                     ptmf_summary *s, const ptmf_ivalue *ivalues, fb_error *err) {
    fb_ctx c;
    uint32_t i;
    fb_vec types = {s->object_types, s->n_object_types};
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    c.verify = c.utf8 = 1;

    FB_TRY(verify_structure(&c, s, ivalues));
    /* What follows reads only what was verified, for what it means. */
    c.verify = c.utf8 = 0;
    if (s->storage_data_size != (int32_t)s->n_storages)
        return fb_fail_at(&c, &mobile_module[MOBILE_MODULE_STORAGE_DATA_SIZE], FB_NO_INDEX,
                       FB_E_LENGTH_MISMATCH, s->root);
    for (i = 0; i < s->n_object_types; i++)
        FB_TRY_IN_FIELD(&c, &mobile_module[MOBILE_MODULE_OBJECT_TYPES], i,
                     verify_object_type(&c, &types, i));
    for (i = 0; i < s->n_ivalues; i++) {
        if (ivalues[i].type == UT_FUNCTION)
            TRY_IN_IVALUE(&c, i, UT_FUNCTION, verify_function(&c, s, ivalues, i));
        else if (ivalues[i].type == UT_OBJECT)
            TRY_IN_IVALUE(&c, i, UT_OBJECT, verify_object(&c, s, ivalues, &types, i));
    }
    if (ivalues[s->state_obj].type != UT_OBJECT)
        return fb_fail_at(&c, &mobile_module[MOBILE_MODULE_STATE_OBJ], FB_NO_INDEX, FB_E_KIND_MISMATCH,
                       s->root);
    FB_TRY(verify_roots(&c, s, ivalues, s->methods, s->n_methods,
                     &mobile_module[MOBILE_MODULE_METHODS], 1));
    FB_TRY(verify_roots(&c, s, ivalues, s->jit_constants, s->n_jit_constants,
                     &mobile_module[MOBILE_MODULE_JIT_CONSTANTS], 0));
    fb_ctx_finish(&c);
    return FB_OK;
}

/*
 * bundled.c: what a bundled program (.bpte) means, on top of the generic layer: its test
 * values as ExecuTorch's runtime reads them (devtools/bundled_program/bundled_program.cpp,
 * ExecuTorch 1.5.1). The structure was checked by fb_verify_table from the schema, which
 * marks `required` every field the runtime dereferences unchecked; here, each test tensor
 * must describe bytes it has: a known scalar type, at most 16 sizes (the runtime's
 * kMaxDim), none negative, dim_order a permutation of them, and data holding at least
 * the bytes they give (the runtime copies that many).
 */
#include "executorch/bundled.h"

#include "executorch/et.h"
#include "fb/fb.h"

FB_STATUS_BLOCK(bp_statuses, BP);

/* The runtime's kMaxDim: the most sizes a test tensor may have. */
#define BP_MAX_DIM 16

/* A test tensor: its layout, and data for all of it. */
static int tensor(fb_ctx *c, const fb_tbl *t) {
    et_record r;
    fb_vec sizes, order, data;
    memset(&r, 0, sizeof r);
    /* located reads first: a required field absent fails at its name */
    FB_TRY(fb_fld_vec_at(c, t, &bp_tensor[BP_TENSOR_SIZES], &sizes));
    FB_TRY(fb_fld_vec_at(c, t, &bp_tensor[BP_TENSOR_DIM_ORDER], &order));
    if (sizes.count > BP_MAX_DIM) return fb_fail_at(c, &bp_tensor[BP_TENSOR_SIZES], FB_NO_INDEX,
                                                 BP_E_BAD_TENSOR, sizes.data);
    FB_TRY(et_tensor_layout(c, t, &bp_tensor[BP_TENSOR_SCALAR_TYPE], &bp_tensor[BP_TENSOR_SIZES],
                         &bp_tensor[BP_TENSOR_DIM_ORDER], &r));
    FB_TRY(fb_fld_vec_at(c, t, &bp_tensor[BP_TENSOR_DATA], &data));
    if (data.count < r.nbytes)
        return fb_fail_at(c, &bp_tensor[BP_TENSOR_DATA], FB_NO_INDEX, BP_E_BAD_TENSOR, data.data);
    return FB_OK;
}

/* The values of a test case's field f (inputs or expected outputs); counts the tensors. */
static int values(fb_ctx *c, const fb_tbl *t, const fb_field *f, bp_summary *s) {
    fb_vec v;
    uint32_t i;
    FB_TRY(fb_fld_vec_at(c, t, f, &v));
    for (i = 0; i < v.count; i++) {
        fb_tbl value;
        fb_union_value u;
        const fb_field *val = &bp_value[BP_VALUE_VAL];
        FB_TRY_IN_FIELD(c, f, i, fb_vec_table(c, &v, i, &value));
        fb_push(c, fb_field_segment(c, f), i);
        FB_TRY(fb_union_open(c, &value, val, &bp_decl_table[BP_DECL_VALUE_UNION], &u));
        if (u.type == BP_VALUE_UNION_TENSOR) {
            FB_TRY_IN_MEMBER(c, val, u.member, tensor(c, &u.table));
            s->n_tensors++;
        }
        fb_pop(c);
    }
    return FB_OK;
}

/* Every suite's cases; each suite's method name is read (the runtime compares it). */
static int suites(fb_ctx *c, const fb_tbl *root, bp_summary *s) {
    const fb_field *suites_f = &bp_bundled_program[BP_BUNDLED_PROGRAM_METHOD_TEST_SUITES];
    const fb_field *cases_f = &bp_bundled_method_test_suite[BP_BUNDLED_METHOD_TEST_SUITE_TEST_CASES];
    fb_vec v;
    uint32_t i, j;
    FB_TRY(fb_fld_vec_at(c, root, suites_f, &v));
    for (i = 0; i < v.count; i++) {
        fb_tbl suite;
        fb_vec name, cases;
        fb_push(c, fb_field_segment(c, suites_f), i);
        FB_TRY(fb_vec_table(c, &v, i, &suite));
        FB_TRY(fb_fld_text_at(c, &suite,
                        &bp_bundled_method_test_suite[BP_BUNDLED_METHOD_TEST_SUITE_METHOD_NAME],
                        &name));
        FB_TRY(fb_fld_vec_at(c, &suite, cases_f, &cases));
        for (j = 0; j < cases.count; j++) {
            fb_tbl tc;
            fb_push(c, fb_field_segment(c, cases_f), j);
            FB_TRY(fb_vec_table(c, &cases, j, &tc));
            FB_TRY(values(c, &tc, &bp_bundled_method_test_case[BP_BUNDLED_METHOD_TEST_CASE_INPUTS],
                       s));
            FB_TRY(values(c, &tc,
                       &bp_bundled_method_test_case[BP_BUNDLED_METHOD_TEST_CASE_EXPECTED_OUTPUTS],
                       s));
            fb_pop(c);
        }
        s->n_cases += cases.count;
        fb_pop(c);
    }
    s->n_suites = v.count;
    return FB_OK;
}

int bp_open(const uint8_t *buf, size_t len, const fb_options *opt, bp_summary *s,
            fb_error *err) {
    fb_ctx c;
    fb_tbl root;
    fb_vec program;
    memset(s, 0, sizeof *s);
    fb_ctx_init(&c, buf, len, opt, NULL, err);
    if (len < 8) return fb_fail(&c, FB_E_TOO_SMALL, 0);
    if (fb_ld32(buf + 4) != BP_FILE_IDENTIFIER) return fb_fail(&c, FB_E_BAD_IDENTIFIER, 4);
    fb_push(&c, "root", FB_NO_INDEX);
    FB_TRY(fb_deref(&c, 0, &s->root));
    FB_TRY(fb_tbl_open(&c, s->root, &root));
    fb_pop(&c);
    FB_TRY(fb_verify_table(&c, &bp_schema_file, bp_schema_file.root, s->root));
    s->tables_visited = c.tables;
    s->elements_visited = c.elements;
    /* the meaning walk, on budgets of its own (the structural pass bounded it) */
    c.tables = c.elements = 0;
    FB_TRY(fb_fld_vec_at(&c, &root, &bp_bundled_program[BP_BUNDLED_PROGRAM_PROGRAM], &program));
    s->program = program.data;
    s->program_size = program.count;
    FB_TRY(suites(&c, &root, s));
    s->tables_visited += c.tables;
    s->elements_visited += c.elements;
    return FB_OK;
}

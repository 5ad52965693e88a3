/*
 * ptmf_open.c: the PTMF reader's entry: the file header, the root Module table
 * (ptmf_open), the set-up every pass shares and PTMF's status block.
 *
 * What PTMF means on top of the generic FlatBuffers layer (fb.h) is split by concern:
 * storages (ptmf_storage.c), tensors (ptmf_tensor.c), the ivalue index (ptmf_index.c),
 * the function readers (ptmf_functions.c) and the checks the index does not need
 * (ptmf_verify.c). Every field is read through its descriptor generated from
 * schemas/mobile_bytecode.fbs, and every read through fb.h, which checks bounds with
 * overflow-safe arithmetic and validates every vtable; nothing trusts an earlier
 * check. Verification (opt->verify) adds what reading does not need: FlatBuffers'
 * alignment rules, NUL terminators, UTF-8 text and dict keys as the index passes read
 * the ivalues (the hot path: one pass that checks as it indexes), and, in
 * ptmf_verify_rest, the structure of everything else by the generic verifier from
 * the schema, then what those parts mean.
 */
#include "ptmf/ptmf_internal.h"

#include <string.h>

FB_STATUS_BLOCK(ptmf_statuses, PTMF);

const char *ptmf_ivalue_type_name(int type) {
    return type >= 0 && type < UT_COUNT ? mobile_i_value_union[type].name : "";
}

/* ------------------------------------------------------------ the module */

/* A pass over a PTMF file: torch decodes its strings as text (names, types, code), so
 * every string a verifying pass reads must be UTF-8. */
void ptmf_ctx_init(fb_ctx *c, const uint8_t *buf, size_t len, const fb_options *opt,
                   ptmf_summary *s, fb_error *err) {
    fb_ctx_init(c, buf, len, opt, &s->visited, err);
    c->utf8 = c->verify;
}

static int read_header(fb_ctx *c, uint64_t *root) {
    fb_push(c, "header", FB_NO_INDEX);   /* whole-file rejections are located there */
    if (c->len >= 4 && memcmp(c->buf, "PK\x03\x04", 4) == 0)
        return fb_fail(c, PTMF_E_ZIP_ARCHIVE, 0);
    if (c->len < 8) return fb_fail(c, PTMF_E_TOO_SMALL, 0);
    if (c->len > ((uint64_t)1 << 32)) return fb_fail(c, FB_E_TOO_LARGE, c->len);
    if (fb_ld32(c->buf + 4) != MOBILE_FILE_IDENTIFIER) return fb_fail(c, PTMF_E_BAD_IDENTIFIER, 4);
    fb_pop(c);
    fb_push(c, "root", FB_NO_INDEX);
    FB_TRY(fb_deref(c, 0, root));
    fb_pop(c);
    return FB_OK;
}

int ptmf_open(const uint8_t *buf, size_t len, const fb_options *opt,
              ptmf_summary *s, fb_error *err) {
    fb_ctx c;
    fb_tbl m;
    fb_vec v;
    int32_t sds;
    if (!buf && len) return FB_E_BAD_ARGUMENT;
    memset(s, 0, sizeof *s);
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    FB_TRY(read_header(&c, &s->root));
    FB_TRY_IN(&c, "module", FB_NO_INDEX, fb_tbl_open(&c, s->root, &m));

#define MODULE_FIELD(NAME, read, out) FB_TRY(read(&c, &m, &mobile_module[MOBILE_MODULE_##NAME], out))
    MODULE_FIELD(BYTECODE_VERSION, fb_fld_u32_at, &s->bytecode_version);
    MODULE_FIELD(OPERATOR_VERSION, fb_fld_u32_at, &s->operator_version);
    MODULE_FIELD(STATE_OBJ, fb_fld_u32_at, &s->state_obj);
    MODULE_FIELD(MOBILE_IVALUE_SIZE, fb_fld_u32_at, &s->mobile_ivalue_size);
    MODULE_FIELD(STORAGE_DATA_SIZE, fb_fld_i32_at, &sds);
    s->storage_data_size = sds;
    MODULE_FIELD(IVALUES, fb_fld_vec_at, &v);
    s->ivalues = v.data; s->n_ivalues = v.count;
    MODULE_FIELD(STORAGE_DATA, fb_fld_vec_at, &v);
    s->storages = v.data; s->n_storages = v.count;
    MODULE_FIELD(OBJECT_TYPES, fb_fld_vec_at, &v);
    s->object_types = v.data; s->n_object_types = v.count;
    MODULE_FIELD(EXTRA_FILES, fb_fld_vec_at, &v);
    s->extra_files = v.data; s->n_extra_files = v.count;
    MODULE_FIELD(JIT_SOURCES, fb_fld_vec_at, &v);
    s->jit_sources = v.data; s->n_jit_sources = v.count;
    MODULE_FIELD(METHODS, fb_fld_vec_at, &v);
    s->methods = v.data; s->n_methods = v.count;
    MODULE_FIELD(JIT_CONSTANTS, fb_fld_vec_at, &v);
    s->jit_constants = v.data; s->n_jit_constants = v.count;
#undef MODULE_FIELD

    if (s->state_obj >= s->n_ivalues)
        return fb_fail_at(&c, &mobile_module[MOBILE_MODULE_STATE_OBJ], FB_NO_INDEX, PTMF_E_BAD_INDEX,
                       s->root);
    fb_ctx_finish(&c);
    return FB_OK;
}

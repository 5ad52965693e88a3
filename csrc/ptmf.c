/*
 * ptmf.c: one-pass verifier and index builder for PTMF flatbuffers.
 *
 * Every read goes through rd_* helpers that check `pos + size <= len` with
 * overflow-safe arithmetic, and every table through tbl_open, which validates
 * its vtable; nothing here trusts an earlier check. Verification (opt->verify)
 * adds what reading does not need: FlatBuffers' alignment rules, NUL
 * terminators, and the tables the index never looks at.
 */
#define _POSIX_C_SOURCE 200809L   /* pread */
#include "ptmf.h"

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* ------------------------------------------------------------------ schema */

enum { UT_NONE, UT_INT, UT_BOOL, UT_DOUBLE, UT_COMPLEX, UT_TENSOR, UT_STRING,
       UT_LIST, UT_TUPLE, UT_DICT, UT_OBJECT, UT_INT_LIST, UT_DOUBLE_LIST,
       UT_BOOL_LIST, UT_DEVICE, UT_ENUM, UT_FUNCTION, UT_COUNT };

static const char *const val_paths[UT_COUNT] = {
    ".val<NONE>", ".val<Int>", ".val<Bool>", ".val<Double>", ".val<ComplexDouble>",
    ".val<TensorMetadata>", ".val<String>", ".val<List>", ".val<Tuple>", ".val<Dict>",
    ".val<Object>", ".val<IntList>", ".val<DoubleList>", ".val<BoolList>",
    ".val<Device>", ".val<EnumValue>", ".val<Function>"};

/* Module field ids (later revisions appended 8..11). */
enum { M_BYTECODE_VERSION, M_EXTRA_FILES, M_METHODS, M_STATE_OBJ, M_IVALUES,
       M_STORAGE_DATA_SIZE, M_STORAGE_DATA, M_OBJECT_TYPES, M_JIT_SOURCES,
       M_JIT_CONSTANTS, M_OPERATOR_VERSION, M_MOBILE_IVALUE_SIZE };
enum { TM_STORAGE, TM_SCALAR_TYPE, TM_STORAGE_OFFSET, TM_SIZES, TM_STRIDES,
       TM_REQUIRES_GRAD, TM_QUANTIZED };
enum { QS_QSCHEME, QS_SCALE, QS_ZERO_POINT, QS_SCALES, QS_ZERO_POINTS, QS_AXIS };
enum { OBJ_TYPE_INDEX, OBJ_STATE, OBJ_ATTRS, OBJ_SETSTATE };
enum { FN_QN, FN_INSTRUCTIONS, FN_OPERATORS, FN_CONSTANTS, FN_TYPE_ANNOTATIONS,
       FN_REGISTER_SIZE, FN_SCHEMA, FN_DEBUG_INFO, FN_CLASS_TYPE };
enum { OT_UNSET, OT_CLASS_WITH_FIELD, OT_CUSTOM_CLASS, OT_CLASS_WITH_SETSTATE };

#define NO_INDEX (-1)
#define PATH_MAX_SEGMENTS 16
#define SCALAR_TYPE_COUNT 46

/* Bits per element of each c10::ScalarType that a file can hold; 0 = invalid.
 * quint4x2 and quint2x4 pack several values into a byte; float4_e2m1fn_x2
 * counts bytes. */
static const uint8_t scalar_type_bits[SCALAR_TYPE_COUNT] = {
    8, 8, 16, 32, 64, 16, 32, 64, 32, 64, 128, 8,  /* uint8 .. bool */
    8, 8, 32, 16, 4, 2,                             /* qint8 .. quint2x4 */
    8, 8, 8, 8, 16,                                 /* bits1x8 .. bits16 */
    8, 8, 8, 8,                                     /* float8 e5m2 .. e4m3fnuz */
    16, 32, 64,                                     /* uint16 .. uint64 */
    8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,       /* uint1..7, int1..7 */
    8, 8};                                          /* e8m0fnu, float4_e2m1fn_x2 */

static int is_quantized_type(int st) {
    return st == 12 || st == 13 || st == 14 || st == 16 || st == 17;
}

/* --------------------------------------------------------------- context */

typedef struct segment {
    const char *name;
    int64_t index;
} segment;

typedef struct ctx {
    const uint8_t *buf;
    uint64_t len;
    int verify;
    int strict;
    uint64_t max_tables, max_elements;
    uint32_t max_depth;
    ptmf_summary *summary;   /* may be NULL for on-demand reads */
    uint64_t tables, elements;
    segment path[PATH_MAX_SEGMENTS];
    int depth;               /* path segments in use, may exceed the array */
    ptmf_error *err;
    /* A copy of buf[win_pos, win_pos + win_len) read with pread: table reads
     * inside it come from here and touch no page of the mapping. */
    const uint8_t *win;
    uint64_t win_pos, win_len;
} ctx;

typedef struct tbl {
    uint64_t pos;       /* table start (its soffset) */
    uint64_t vt;        /* vtable start */
    uint16_t vt_size;
    uint16_t size;      /* inline table size */
} tbl;

typedef struct vec {
    uint64_t data;      /* element 0 */
    uint32_t count;
} vec;

static const char *const status_messages[] = {
#define PTMF_MESSAGE_ITEM(name, message) message,
    PTMF_STATUS_TABLE(PTMF_MESSAGE_ITEM)
#undef PTMF_MESSAGE_ITEM
};

static const char *const status_names[] = {
#define PTMF_NAME_ITEM(name, message) #name,
    PTMF_STATUS_TABLE(PTMF_NAME_ITEM)
#undef PTMF_NAME_ITEM
};

const char *ptmf_strerror(int code) {
    if (code < 0 || code >= PTMF_STATUS_COUNT) return "unknown status";
    return status_messages[code];
}

const char *ptmf_status_name(int code) {
    if (code < 0 || code >= PTMF_STATUS_COUNT) return "PTMF_E_UNKNOWN";
    return status_names[code];
}

void ptmf_default_options(ptmf_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->max_depth = 200;
    opt->verify = 1;
}

static void ctx_init(ctx *c, const uint8_t *buf, size_t len, const ptmf_options *opt,
                     ptmf_summary *s, ptmf_error *err) {
    memset(c, 0, sizeof *c);
    c->buf = buf;
    c->len = (uint64_t)len;
    c->summary = s;
    c->err = err;
    c->verify = opt ? opt->verify : 0;
    c->strict = opt ? opt->strict : 0;
    c->max_depth = opt && opt->max_depth ? opt->max_depth : 200;
    c->max_tables = opt && opt->max_tables ? opt->max_tables : c->len / 2 + 1024;
    c->max_elements = opt && opt->max_elements ? opt->max_elements : 2 * c->len + 1024;
    if (s) {
        c->tables = s->tables_visited;
        c->elements = s->elements_visited;
    }
    if (err) {
        err->code = PTMF_OK;
        err->offset = 0;
        err->path[0] = '\0';
    }
}

static void ctx_finish(ctx *c) {
    if (c->summary) {
        c->summary->tables_visited = c->tables;
        c->summary->elements_visited = c->elements;
    }
}

static void push(ctx *c, const char *name, int64_t index) {
    if (c->depth < PATH_MAX_SEGMENTS) {
        c->path[c->depth].name = name;
        c->path[c->depth].index = index;
    }
    c->depth++;
}

static void pop(ctx *c) { c->depth--; }

/* Records the first failure with the current path; returns the code. */
static int fail(ctx *c, int code, uint64_t offset) {
    ptmf_error *e = c->err;
    size_t used = 0;
    int i, n;
    if (!e) return code;
    e->code = code;
    e->offset = offset;
    e->path[0] = '\0';
    n = c->depth < PATH_MAX_SEGMENTS ? c->depth : PATH_MAX_SEGMENTS;
    for (i = 0; i < n && used + 1 < sizeof e->path; i++) {
        int w;
        if (c->path[i].index >= 0)
            w = snprintf(e->path + used, sizeof e->path - used, "%s[%lld]",
                         c->path[i].name, (long long)c->path[i].index);
        else
            w = snprintf(e->path + used, sizeof e->path - used, "%s", c->path[i].name);
        if (w < 0) break;
        used += (size_t)w;
        if (used >= sizeof e->path) used = sizeof e->path - 1;
    }
    return code;
}

#define TRY(expr)                 \
    do {                          \
        int rc_ = (expr);         \
        if (rc_ != PTMF_OK) return rc_; \
    } while (0)

/* ------------------------------------------------------------ raw reads */

static int in_bounds(const ctx *c, uint64_t pos, uint64_t size) {
    return pos <= c->len && size <= c->len - pos;
}

/* The `size` bytes at `pos` (already bounds-checked): from the read-ahead window
 * when it holds all of them, else from the buffer. */
static const uint8_t *bytes_at(const ctx *c, uint64_t pos, uint64_t size) {
    if (c->win_len && pos >= c->win_pos && size <= c->win_len
        && pos - c->win_pos <= c->win_len - size)
        return c->win + (pos - c->win_pos);
    return c->buf + pos;
}

static int need(ctx *c, uint64_t pos, uint64_t size, unsigned align) {
    if (!in_bounds(c, pos, size)) return fail(c, PTMF_E_OUT_OF_BOUNDS, pos);
    if (c->verify && align > 1 && pos % align != 0) return fail(c, PTMF_E_MISALIGNED, pos);
    return PTMF_OK;
}

/* Little-endian loads; callers have checked the bounds. */
static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static uint64_t ld64(const uint8_t *p) {
    return (uint64_t)ld32(p) | ((uint64_t)ld32(p + 4) << 32);
}
static int32_t as_i32(uint32_t u) {
    return u < 0x80000000u ? (int32_t)u : (int32_t)(u - 0x80000000u) - 0x7fffffff - 1;
}

static int count_elements(ctx *c, uint64_t n, uint64_t where) {
    if (n > c->max_elements || c->elements > c->max_elements - n)
        return fail(c, PTMF_E_ELEMENT_BUDGET, where);
    c->elements += n;
    return PTMF_OK;
}

/* Follows the uoffset stored at `at`. */
static int deref(ctx *c, uint64_t at, uint64_t *target) {
    uint64_t t;
    TRY(need(c, at, 4, 4));
    t = at + ld32(bytes_at(c, at, 4));
    if (t >= c->len) return fail(c, PTMF_E_OUT_OF_BOUNDS, at);
    *target = t;
    return PTMF_OK;
}

/* ---------------------------------------------------------------- tables */

static int tbl_open(ctx *c, uint64_t pos, tbl *t) {
    uint32_t soff;
    int64_t vt;
    TRY(need(c, pos, 4, 4));
    if (c->tables >= c->max_tables) return fail(c, PTMF_E_TABLE_BUDGET, pos);
    c->tables++;
    soff = ld32(bytes_at(c, pos, 4));
    vt = (int64_t)pos - (int64_t)as_i32(soff);
    if (vt < 0 || !in_bounds(c, (uint64_t)vt, 4)) {
        /* Torch writes files over 2 GiB whose soffsets wrapped; modulo 2^32
         * the target is exact, and unambiguous up to 4 GiB. */
        uint64_t wrapped = (pos - soff) & 0xffffffffu;
        if (!in_bounds(c, wrapped, 4)) return fail(c, PTMF_E_BAD_VTABLE, pos);
        if (c->strict) return fail(c, PTMF_E_VTABLE_WRAPPED, pos);
        vt = (int64_t)wrapped;
        if (c->summary) c->summary->wrapped_vtables++;
    }
    t->pos = pos;
    t->vt = (uint64_t)vt;
    if (c->verify && t->vt % 2 != 0) return fail(c, PTMF_E_MISALIGNED, t->vt);
    t->vt_size = ld16(bytes_at(c, t->vt, 2));
    t->size = ld16(bytes_at(c, t->vt + 2, 2));
    if (t->vt_size < 4 || t->vt_size % 2 != 0 || !in_bounds(c, t->vt, t->vt_size))
        return fail(c, PTMF_E_BAD_VTABLE, t->vt);
    if (t->size < 4 || !in_bounds(c, pos, t->size)) return fail(c, PTMF_E_BAD_VTABLE, t->vt);
    return PTMF_OK;
}

/* Position of field `id` holding `size` bytes, or 0 when absent. */
static int tbl_field(ctx *c, const tbl *t, unsigned id, unsigned size, uint64_t *at) {
    uint64_t slot = 4 + 2 * (uint64_t)id;
    uint16_t off;
    *at = 0;
    if (slot + 2 > t->vt_size) return PTMF_OK;
    off = ld16(bytes_at(c, t->vt + slot, 2));
    if (off == 0) return PTMF_OK;
    if (off < 4 || (uint64_t)off + size > t->size) return fail(c, PTMF_E_BAD_VTABLE, t->vt + slot);
    *at = t->pos + off;
    if (c->verify && *at % size != 0) return fail(c, PTMF_E_MISALIGNED, *at);
    return PTMF_OK;
}

static int fld_u8(ctx *c, const tbl *t, unsigned id, uint8_t dflt, uint8_t *out) {
    uint64_t at;
    TRY(tbl_field(c, t, id, 1, &at));
    *out = at ? c->buf[at] : dflt;
    return PTMF_OK;
}

static int fld_u32(ctx *c, const tbl *t, unsigned id, uint32_t dflt, uint32_t *out) {
    uint64_t at;
    TRY(tbl_field(c, t, id, 4, &at));
    *out = at ? ld32(c->buf + at) : dflt;
    return PTMF_OK;
}

static int fld_i32(ctx *c, const tbl *t, unsigned id, int32_t dflt, int32_t *out) {
    uint32_t u;
    TRY(fld_u32(c, t, id, (uint32_t)dflt, &u));
    *out = as_i32(u);
    return PTMF_OK;
}

static int fld_f64(ctx *c, const tbl *t, unsigned id, double *out) {
    uint64_t at, bits;
    TRY(tbl_field(c, t, id, 8, &at));
    bits = at ? ld64(c->buf + at) : 0;
    memcpy(out, &bits, sizeof *out);
    return PTMF_OK;
}

/* Offset field: the position it points to, or 0 when absent. */
static int fld_ref(ctx *c, const tbl *t, unsigned id, uint64_t *target) {
    uint64_t at;
    *target = 0;
    TRY(tbl_field(c, t, id, 4, &at));
    if (at) TRY(deref(c, at, target));
    return PTMF_OK;
}

static int fld_table(ctx *c, const tbl *t, unsigned id, tbl *sub, int *present) {
    uint64_t target;
    TRY(fld_ref(c, t, id, &target));
    *present = target != 0;
    if (target) TRY(tbl_open(c, target, sub));
    return PTMF_OK;
}

/* Vector of `esize`-byte elements at `pos`; counts them against the budget. */
static int vec_at(ctx *c, uint64_t pos, unsigned esize, unsigned align, vec *v) {
    uint32_t n;
    TRY(need(c, pos, 4, 4));
    n = ld32(bytes_at(c, pos, 4));
    if (!in_bounds(c, pos + 4, (uint64_t)n * esize)) return fail(c, PTMF_E_OUT_OF_BOUNDS, pos);
    /* FlatBuffers' verifier checks only the length field (above); its builder pads
     * before a non-empty vector alone, so torch's empty int64/double vectors sit at
     * 4 mod 8. Strict mode holds non-empty vectors to the builder's alignment. */
    if (c->verify && c->strict && n > 0 && align > 1 && (pos + 4) % align != 0)
        return fail(c, PTMF_E_MISALIGNED, pos + 4);
    v->data = pos + 4;
    v->count = n;
    return PTMF_OK;
}

/* Absent vectors read as empty. */
static int fld_vec(ctx *c, const tbl *t, unsigned id, unsigned esize, unsigned align, vec *v) {
    uint64_t target;
    v->data = 0;
    v->count = 0;
    TRY(fld_ref(c, t, id, &target));
    if (target) TRY(vec_at(c, target, esize, align, v));
    return PTMF_OK;
}

static int str_at(ctx *c, uint64_t pos, vec *s) {
    TRY(vec_at(c, pos, 1, 1, s));
    if (c->verify) {
        if (!in_bounds(c, s->data + s->count, 1)) return fail(c, PTMF_E_NO_NUL, pos);
        if (c->buf[s->data + s->count] != 0) return fail(c, PTMF_E_NO_NUL, s->data + s->count);
    }
    return PTMF_OK;
}

/* Offset of the first byte that makes s[0, n) invalid UTF-8, or n: Python's
 * strict decoder, so no overlong forms, no surrogates, nothing above U+10FFFF. */
static uint64_t utf8_invalid_at(const uint8_t *s, uint64_t n) {
    uint64_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        uint8_t lo = 0x80, hi = 0xbf;
        unsigned more, k;
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b >= 0xc2 && b <= 0xdf) more = 1;
        else if (b >= 0xe0 && b <= 0xef) more = 2;
        else if (b >= 0xf0 && b <= 0xf4) more = 3;
        else return i;
        if (b == 0xe0) lo = 0xa0;        /* overlong */
        else if (b == 0xed) hi = 0x9f;   /* surrogates */
        else if (b == 0xf0) lo = 0x90;   /* overlong */
        else if (b == 0xf4) hi = 0x8f;   /* above U+10FFFF */
        for (k = 1; k <= more; k++) {
            uint8_t cont;
            if (i + k >= n) return i;
            cont = s[i + k];
            if (cont < (k == 1 ? lo : 0x80) || cont > (k == 1 ? hi : 0xbf)) return i;
        }
        i += 1 + more;
    }
    return n;
}

/* A string the reader decodes as text: when verifying, it must be UTF-8. */
static int check_text(ctx *c, const vec *s) {
    uint64_t bad;
    if (!c->verify) return PTMF_OK;
    bad = utf8_invalid_at(c->buf + s->data, s->count);
    if (bad < s->count) return fail(c, PTMF_E_BAD_UTF8, s->data + bad);
    return PTMF_OK;
}

static int text_at(ctx *c, uint64_t pos, vec *s) {
    TRY(str_at(c, pos, s));
    return check_text(c, s);
}

static int fld_str(ctx *c, const tbl *t, unsigned id, vec *s) {
    uint64_t target;
    s->data = 0;
    s->count = 0;
    TRY(fld_ref(c, t, id, &target));
    if (target) TRY(str_at(c, target, s));
    return PTMF_OK;
}

static int fld_text(ctx *c, const tbl *t, unsigned id, vec *s) {
    TRY(fld_str(c, t, id, s));
    return check_text(c, s);
}

/* Element i of a vector of offsets (to tables or strings). */
static int vec_ref(ctx *c, const vec *v, uint32_t i, uint64_t *target) {
    if (i >= v->count) return fail(c, PTMF_E_BAD_ARGUMENT, v->data);
    return deref(c, v->data + 4 * (uint64_t)i, target);
}

static int vec_table(ctx *c, const vec *v, uint32_t i, tbl *t) {
    uint64_t target;
    TRY(vec_ref(c, v, i, &target));
    return tbl_open(c, target, t);
}

static uint32_t vec_u32(const ctx *c, const vec *v, uint32_t i) {
    return ld32(c->buf + v->data + 4 * (uint64_t)i);
}

/* ------------------------------------------------------------ the module */

static int read_header(ctx *c, uint64_t *root) {
    push(c, "header", NO_INDEX);   /* whole-file rejections are located there */
    if (c->len >= 4 && memcmp(c->buf, "PK\x03\x04", 4) == 0)
        return fail(c, PTMF_E_ZIP_ARCHIVE, 0);
    if (c->len < 8) return fail(c, PTMF_E_TOO_SMALL, 0);
    if (c->len > ((uint64_t)1 << 32)) return fail(c, PTMF_E_TOO_LARGE, c->len);
    if (memcmp(c->buf + 4, "PTMF", 4) != 0) return fail(c, PTMF_E_BAD_IDENTIFIER, 4);
    pop(c);
    push(c, "root", NO_INDEX);
    TRY(deref(c, 0, root));
    pop(c);
    return PTMF_OK;
}

int ptmf_open(const uint8_t *buf, size_t len, const ptmf_options *opt,
              ptmf_summary *s, ptmf_error *err) {
    ctx c;
    tbl m;
    vec v;
    int32_t sds;
    if (!buf && len) return PTMF_E_BAD_ARGUMENT;
    memset(s, 0, sizeof *s);
    ctx_init(&c, buf, len, opt, s, err);
    TRY(read_header(&c, &s->root));
    push(&c, "module", NO_INDEX);
    TRY(tbl_open(&c, s->root, &m));
    pop(&c);

#define MODULE_FIELD(name, stmt) push(&c, name, NO_INDEX); TRY(stmt); pop(&c)
    MODULE_FIELD("bytecode_version", fld_u32(&c, &m, M_BYTECODE_VERSION, 0, &s->bytecode_version));
    MODULE_FIELD("operator_version", fld_u32(&c, &m, M_OPERATOR_VERSION, 0, &s->operator_version));
    MODULE_FIELD("state_obj", fld_u32(&c, &m, M_STATE_OBJ, 0, &s->state_obj));
    MODULE_FIELD("mobile_ivalue_size", fld_u32(&c, &m, M_MOBILE_IVALUE_SIZE, 0, &s->mobile_ivalue_size));
    MODULE_FIELD("storage_data_size", fld_i32(&c, &m, M_STORAGE_DATA_SIZE, 0, &sds));
    s->storage_data_size = sds;
    MODULE_FIELD("ivalues", fld_vec(&c, &m, M_IVALUES, 4, 4, &v));
    s->ivalues = v.data; s->n_ivalues = v.count;
    MODULE_FIELD("storage_data", fld_vec(&c, &m, M_STORAGE_DATA, 4, 4, &v));
    s->storages = v.data; s->n_storages = v.count;
    MODULE_FIELD("object_types", fld_vec(&c, &m, M_OBJECT_TYPES, 4, 4, &v));
    s->object_types = v.data; s->n_object_types = v.count;
    MODULE_FIELD("extra_files", fld_vec(&c, &m, M_EXTRA_FILES, 4, 4, &v));
    s->extra_files = v.data; s->n_extra_files = v.count;
    MODULE_FIELD("jit_sources", fld_vec(&c, &m, M_JIT_SOURCES, 4, 4, &v));
    s->jit_sources = v.data; s->n_jit_sources = v.count;
    MODULE_FIELD("methods", fld_vec(&c, &m, M_METHODS, 4, 4, &v));
    s->methods = v.data; s->n_methods = v.count;
    MODULE_FIELD("jit_constants", fld_vec(&c, &m, M_JIT_CONSTANTS, 4, 4, &v));
    s->jit_constants = v.data; s->n_jit_constants = v.count;
#undef MODULE_FIELD

    push(&c, "state_obj", NO_INDEX);
    if (s->state_obj >= s->n_ivalues) return fail(&c, PTMF_E_BAD_INDEX, s->root);
    pop(&c);
    ctx_finish(&c);
    return PTMF_OK;
}

/* Files with at least this many bytes per storage read each storage's header
 * (table and vector length, just before its payload) with pread: faulting it in
 * through the mapping would map the page-cache folio around it, which the kernel
 * maps whole when large (up to 2 MiB of payload per storage in RSS). */
#define PREAD_BYTES_PER_STORAGE (64u << 10)

int ptmf_index_storages(const uint8_t *buf, size_t len, const ptmf_options *opt,
                        ptmf_summary *s, ptmf_storage *out, int fd, ptmf_error *err) {
    ctx c;
    vec all = {s->storages, s->n_storages};
    uint8_t window[64];
    uint32_t i;
    ctx_init(&c, buf, len, opt, s, err);
    if (s->n_storages == 0 || (uint64_t)len / s->n_storages < PREAD_BYTES_PER_STORAGE)
        fd = -1;
    for (i = 0; i < s->n_storages; i++) {
        tbl t;
        vec data;
        uint64_t target;
        push(&c, "storage_data", i);
        TRY(vec_ref(&c, &all, i, &target));
        if (fd >= 0) {
            ssize_t got = pread(fd, window, sizeof window, (off_t)target);
            c.win = window;
            c.win_pos = target;
            c.win_len = got > 0 ? (uint64_t)got : 0;
        }
        TRY(tbl_open(&c, target, &t));
        push(&c, ".data", NO_INDEX);
        TRY(fld_vec(&c, &t, 0, 1, 1, &data));
        pop(&c);
        pop(&c);
        c.win_len = 0;
        out[i].pos = data.data;
        out[i].size = data.count;
    }
    ctx_finish(&c);
    return PTMF_OK;
}

static uint32_t add_run(uint64_t start, uint64_t end, uint64_t page, uint64_t *runs,
                        uint32_t k) {
    start = start / page * page + (start % page ? page : 0);
    end = end / page * page;
    if (end <= start) return k;
    runs[2 * (uint64_t)k] = start;
    runs[2 * (uint64_t)k + 1] = end;
    return k + 1;
}

uint32_t ptmf_payload_runs(const ptmf_storage *storages, const uint32_t *order, uint32_t n,
                           uint64_t page, uint64_t gap, uint64_t *runs) {
    uint64_t start = 0, end = 0;
    uint32_t i, k = 0;
    int open_run = 0;
    if (page == 0) return 0;
    for (i = 0; i < n; i++) {
        const ptmf_storage *st;
        if (order[i] >= n) continue;
        st = &storages[order[i]];
        if (st->size < page || st->pos > UINT64_MAX - page - st->size) continue;
        if (open_run && st->pos >= end && st->pos - end >= gap) {
            k = add_run(start, end, page, runs, k);
            open_run = 0;
        }
        if (!open_run) {
            start = st->pos;
            end = st->pos + st->size;
            open_run = 1;
        } else if (st->pos + st->size > end) {
            end = st->pos + st->size;
        }
    }
    return open_run ? add_run(start, end, page, runs, k) : k;
}

/* ---------------------------------------------------------------- tensors */

typedef struct tensor_sink {
    ptmf_tensor *records;       /* NULL while counting */
    int64_t *dims;
    const ptmf_storage *storages;
    uint32_t n_tensors;
    uint64_t n_dims;
    uint32_t capacity;
    uint64_t dims_capacity;
} tensor_sink;

/* Element indices above this cannot be in any buffer; 16-byte elements times it
 * still fit in 64 bits. */
#define EXTENT_LIMIT (UINT64_MAX >> 8)

/* Highest byte + 1 that a view reaches, with every product and sum checked;
 * also the element count and whether the strides are row-major. */
static int tensor_extent(ctx *c, const tbl *t, int st, int64_t offset, const vec *sizes,
                         const vec *strides, ptmf_tensor *r) {
    uint64_t last = (uint64_t)offset;   /* element index of the last element */
    uint64_t numel = 1, expected = 1;
    uint32_t i;
    unsigned bits = scalar_type_bits[st];
    int contiguous = 1;
    for (i = sizes->count; i-- > 0;) {
        int32_t size = as_i32(vec_u32(c, sizes, i));
        int32_t stride = as_i32(vec_u32(c, strides, i));
        /* Exact, size-1 dimensions included: a row-major view made from the sizes
         * alone must carry the strides the file holds (torch's). */
        if ((uint64_t)stride != expected) contiguous = 0;
        if (size == 0) {
            numel = 0;
            break;
        }
        if (numel > UINT64_MAX / (uint64_t)size) return fail(c, PTMF_E_EXTENT_OVERFLOW, t->pos);
        numel *= (uint64_t)size;
        expected = numel;
    }
    /* Torch counts bytes in int64 and numpy in intptr_t: the logical size must fit. */
    if (numel > (uint64_t)INT64_MAX / (bits >= 8 ? bits / 8 : 1))
        return fail(c, PTMF_E_EXTENT_OVERFLOW, t->pos);
    r->numel = numel;
    r->contiguous = (uint8_t)contiguous;
    r->extent = 0;
    if (numel == 0) return PTMF_OK;
    for (i = 0; i < sizes->count; i++) {
        int32_t size = as_i32(vec_u32(c, sizes, i));
        int32_t stride = as_i32(vec_u32(c, strides, i));
        uint64_t step;
        step = (uint64_t)(size - 1) * (uint64_t)stride;   /* < 2^62 */
        if (step > EXTENT_LIMIT || last > EXTENT_LIMIT - step)
            return fail(c, PTMF_E_EXTENT_OVERFLOW, t->pos);
        last += step;
    }
    /* last <= EXTENT_LIMIT here, so the byte arithmetic below cannot overflow. */
    if (bits >= 8)
        r->extent = (last + 1) * (bits / 8);
    else
        r->extent = last / (8 / bits) + 1;
    return PTMF_OK;
}

static int walk_tensor(ctx *c, const tbl *t, uint32_t ivalue, int nested, tensor_sink *k,
                       int32_t *record_index);

static int walk_qparams(ctx *c, const tbl *q, int64_t axis_size, tensor_sink *k,
                        ptmf_tensor *r) {
    int present;
    tbl sub;
    unsigned id;
    int32_t *slots[2];
    slots[0] = &r->scales;
    slots[1] = &r->zero_points;
    for (id = QS_SCALES; id <= QS_ZERO_POINTS; id++) {
        int32_t idx;
        push(c, id == QS_SCALES ? ".scales" : ".zero_points", NO_INDEX);
        TRY(fld_table(c, q, id, &sub, &present));
        if (!present) return fail(c, PTMF_E_MISSING_FIELD, q->pos);
        TRY(walk_tensor(c, &sub, UINT32_MAX, 1, k, &idx));
        if (k->records) {
            const ptmf_tensor *p = &k->records[idx];
            if (p->ndim != 1 || k->dims[p->dims] != axis_size)
                return fail(c, PTMF_E_LENGTH_MISMATCH, sub.pos);
            if (p->scalar_type > 7 && p->scalar_type != 15)   /* real, unquantized */
                return fail(c, PTMF_E_BAD_QUANTIZATION, sub.pos);
        }
        *slots[id - QS_SCALES] = idx;
        pop(c);
    }
    return PTMF_OK;
}

/* Reads one TensorMetadata; with k->records NULL it only counts. */
static int walk_tensor(ctx *c, const tbl *t, uint32_t ivalue, int nested, tensor_sink *k,
                       int32_t *record_index) {
    uint32_t storage, i;
    uint8_t st_raw, grad;
    int32_t offset;
    vec sizes, strides;
    tbl q;
    int quantized;
    ptmf_tensor *r = NULL;
    uint32_t self = k->n_tensors;

    if (k->records && self >= k->capacity) return fail(c, PTMF_E_BAD_ARGUMENT, t->pos);
    k->n_tensors++;
    *record_index = (int32_t)self;
    push(c, ".sizes", NO_INDEX);
    TRY(fld_vec(c, t, TM_SIZES, 4, 4, &sizes));
    pop(c);
    push(c, ".strides", NO_INDEX);
    TRY(fld_vec(c, t, TM_STRIDES, 4, 4, &strides));
    if (strides.count != sizes.count) return fail(c, PTMF_E_LENGTH_MISMATCH, t->pos);
    pop(c);
    TRY(count_elements(c, 2 * (uint64_t)sizes.count, t->pos));
    push(c, ".quantized_schema", NO_INDEX);
    TRY(fld_table(c, t, TM_QUANTIZED, &q, &quantized));
    pop(c);
    if (k->records) {
        if (k->n_dims > k->dims_capacity || 2 * (uint64_t)sizes.count > k->dims_capacity - k->n_dims)
            return fail(c, PTMF_E_BAD_ARGUMENT, t->pos);
        r = &k->records[self];
        memset(r, 0, sizeof *r);
        r->pos = t->pos;
        r->ivalue = ivalue;
        r->dims = k->n_dims;
        r->ndim = sizes.count;
        r->scales = r->zero_points = -1;
        r->qscheme = -1;
    }
    k->n_dims += 2 * (uint64_t)sizes.count;
    if (!r) {
        /* Counting: only the nested parameter tensors matter. */
        uint8_t qs = 0;
        if (quantized) TRY(fld_u8(c, &q, QS_QSCHEME, 0, &qs));
        if (quantized && (qs == 1 || qs == 4)) {
            int present;
            tbl sub;
            unsigned id;
            int32_t idx;
            if (nested) return fail(c, PTMF_E_BAD_QUANTIZATION, q.pos);
            for (id = QS_SCALES; id <= QS_ZERO_POINTS; id++) {
                push(c, ".quantized_schema", NO_INDEX);
                push(c, id == QS_SCALES ? ".scales" : ".zero_points", NO_INDEX);
                TRY(fld_table(c, &q, id, &sub, &present));
                if (present) TRY(walk_tensor(c, &sub, UINT32_MAX, 1, k, &idx));
                pop(c);
                pop(c);
            }
        }
        return PTMF_OK;
    }

    push(c, ".storage_location_index", NO_INDEX);
    TRY(fld_u32(c, t, TM_STORAGE, 0, &storage));
    if (storage >= c->summary->n_storages) return fail(c, PTMF_E_BAD_STORAGE_INDEX, t->pos);
    pop(c);
    push(c, ".scalar_type", NO_INDEX);
    TRY(fld_u8(c, t, TM_SCALAR_TYPE, 0, &st_raw));
    if (st_raw >= SCALAR_TYPE_COUNT) return fail(c, PTMF_E_BAD_SCALAR_TYPE, t->pos);
    pop(c);
    push(c, ".storage_offset", NO_INDEX);
    TRY(fld_i32(c, t, TM_STORAGE_OFFSET, 0, &offset));
    if (offset < 0) return fail(c, PTMF_E_NEGATIVE_DIMENSION, t->pos);
    pop(c);
    TRY(fld_u8(c, t, TM_REQUIRES_GRAD, 0, &grad));
    r->storage = storage;
    r->scalar_type = (int8_t)st_raw;
    r->storage_offset = offset;
    r->requires_grad = grad != 0;
    for (i = 0; i < sizes.count; i++) {
        int32_t size = as_i32(vec_u32(c, &sizes, i));
        int32_t stride = as_i32(vec_u32(c, &strides, i));
        if (size < 0 || stride < 0) {
            push(c, size < 0 ? ".sizes" : ".strides", i);
            return fail(c, PTMF_E_NEGATIVE_DIMENSION,
                        (size < 0 ? sizes.data : strides.data) + 4 * (uint64_t)i);
        }
        k->dims[r->dims + i] = size;
        k->dims[r->dims + sizes.count + i] = stride;
    }
    TRY(tensor_extent(c, t, st_raw, offset, &sizes, &strides, r));
    if (r->extent > k->storages[storage].size) return fail(c, PTMF_E_OUTSIDE_STORAGE, t->pos);

    if (quantized != is_quantized_type(st_raw)) return fail(c, PTMF_E_BAD_QUANTIZATION, t->pos);
    if (quantized) {
        uint8_t qs;
        int32_t zp;
        push(c, ".quantized_schema", NO_INDEX);
        if (nested) return fail(c, PTMF_E_BAD_QUANTIZATION, q.pos);
        TRY(fld_u8(c, &q, QS_QSCHEME, 0, &qs));
        TRY(fld_f64(c, &q, QS_SCALE, &r->scale));
        TRY(fld_i32(c, &q, QS_ZERO_POINT, 0, &zp));
        TRY(fld_i32(c, &q, QS_AXIS, 0, &r->axis));
        r->zero_point = zp;
        r->qscheme = (int8_t)qs;
        if (qs == 1 || qs == 4) {
            int64_t axis_size;
            if (r->axis < 0 || (uint32_t)r->axis >= sizes.count)
                return fail(c, PTMF_E_BAD_QUANTIZATION, q.pos);
            axis_size = as_i32(vec_u32(c, &sizes, (uint32_t)r->axis));
            TRY(walk_qparams(c, &q, axis_size, k, &k->records[self]));
        } else if (qs != 0) {
            push(c, ".qscheme", NO_INDEX);
            return fail(c, PTMF_E_BAD_QUANTIZATION, q.pos);
        }
        pop(c);
    }
    return PTMF_OK;
}

/* ---------------------------------------------------------------- ivalues */

/* Checks that index `j` names an earlier ivalue and folds its depth in. */
static int child(ctx *c, const ptmf_ivalue *out, uint32_t self, uint32_t j, uint64_t where,
                 uint32_t *depth) {
    if (j >= c->summary->n_ivalues) return fail(c, PTMF_E_BAD_INDEX, where);
    if (j >= self) return fail(c, PTMF_E_FORWARD_REFERENCE, where);
    if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    return PTMF_OK;
}

static int children(ctx *c, const ptmf_ivalue *out, uint32_t self, const vec *v,
                    uint32_t *depth) {
    uint32_t i;
    TRY(count_elements(c, v->count, v->data));
    for (i = 0; i < v->count; i++) {
        uint64_t where = v->data + 4 * (uint64_t)i;
        uint32_t j = ld32(c->buf + where);
        if (j >= self || j >= c->summary->n_ivalues) {
            push(c, "", i);
            return child(c, out, self, j, where, depth);
        }
        if (out[j].depth + 1 > *depth) *depth = out[j].depth + 1;
    }
    return PTMF_OK;
}

/* Dict keys are None, str, int, float, complex or bool: the scalars a Python dict
 * can hold (of TorchScript's key types, a Tensor it cannot; lists and dicts are no
 * key at all). Checked when verifying, so that a verified file decodes. */
static int dict_keys(ctx *c, const ptmf_ivalue *out, const vec *keys) {
    uint32_t i;
    for (i = 0; i < keys->count; i++) {
        uint64_t where = keys->data + 4 * (uint64_t)i;
        uint8_t t = out[ld32(c->buf + where)].type;
        if (t != UT_NONE && t != UT_INT && t != UT_BOOL && t != UT_DOUBLE
            && t != UT_COMPLEX && t != UT_STRING) {
            push(c, "", i);
            return fail(c, PTMF_E_UNHASHABLE_KEY, where);
        }
    }
    return PTMF_OK;
}

static int struct_payload(ctx *c, const tbl *iv, uint64_t pos, unsigned size, unsigned align) {
    if (!pos) return fail(c, PTMF_E_MISSING_FIELD, iv->pos);
    return need(c, pos, size, align);
}

static int index_one(ctx *c, tensor_sink *k, ptmf_ivalue *out, uint32_t i, const tbl *iv) {
    ptmf_ivalue *r = &out[i];
    uint8_t type;
    uint64_t target;
    tbl t;
    vec v;
    uint32_t depth = 1;

    TRY(fld_u8(c, iv, 0, 0, &type));
    if (type >= UT_COUNT) {
        push(c, ".val_type", NO_INDEX);
        return fail(c, PTMF_E_BAD_UNION_TYPE, iv->pos);
    }
    r->type = type;
    push(c, val_paths[type], NO_INDEX);
    TRY(fld_ref(c, iv, 1, &target));
    r->pos = target;
    switch (type) {
    case UT_NONE:
        break;
    case UT_INT:
        TRY(struct_payload(c, iv, target, 8, 8));
        break;
    case UT_BOOL:
        TRY(struct_payload(c, iv, target, 1, 1));
        break;
    case UT_DOUBLE:
        TRY(struct_payload(c, iv, target, 8, 8));
        break;
    case UT_COMPLEX:
        TRY(struct_payload(c, iv, target, 16, 8));
        break;
    default:
        if (!target) return fail(c, PTMF_E_MISSING_FIELD, iv->pos);
        TRY(tbl_open(c, target, &t));
        break;
    }
    switch (type) {
    case UT_STRING:
    case UT_DEVICE:
        push(c, type == UT_STRING ? ".data" : ".str", NO_INDEX);
        TRY(fld_text(c, &t, 0, &v));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        break;
    case UT_LIST:
    case UT_TUPLE:
        push(c, ".items", NO_INDEX);
        TRY(fld_vec(c, &t, 0, 4, 4, &v));
        TRY(children(c, out, i, &v, &depth));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        if (type == UT_LIST) {
            push(c, ".annotation_str", NO_INDEX);
            TRY(fld_text(c, &t, 1, &v));
            pop(c);
            r->b = v.data;
            r->m = v.count;
        }
        break;
    case UT_DICT: {
        vec values;
        push(c, ".keys", NO_INDEX);
        TRY(fld_vec(c, &t, 0, 4, 4, &v));
        TRY(children(c, out, i, &v, &depth));
        if (c->verify) TRY(dict_keys(c, out, &v));
        pop(c);
        push(c, ".values", NO_INDEX);
        TRY(fld_vec(c, &t, 1, 4, 4, &values));
        if (values.count != v.count) return fail(c, PTMF_E_LENGTH_MISMATCH, t.pos);
        TRY(children(c, out, i, &values, &depth));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        r->b = values.data;
        push(c, ".annotation_str", NO_INDEX);
        TRY(fld_text(c, &t, 2, &v));
        pop(c);
        r->c = v.data;
        r->k = v.count;
        break;
    }
    case UT_INT_LIST:
    case UT_DOUBLE_LIST:
    case UT_BOOL_LIST: {
        unsigned esize = type == UT_BOOL_LIST ? 1 : 8;
        push(c, ".items", NO_INDEX);
        TRY(fld_vec(c, &t, 0, esize, esize, &v));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        break;
    }
    case UT_OBJECT: {
        uint32_t type_index, state, setstate;
        push(c, ".type_index", NO_INDEX);
        TRY(fld_u32(c, &t, OBJ_TYPE_INDEX, 0, &type_index));
        if (type_index >= c->summary->n_object_types)
            return fail(c, PTMF_E_BAD_TYPE_INDEX, t.pos);
        pop(c);
        push(c, ".state", NO_INDEX);
        TRY(fld_u32(c, &t, OBJ_STATE, 0, &state));
        TRY(child(c, out, i, state, t.pos, &depth));
        pop(c);
        push(c, ".setstate_func", NO_INDEX);
        TRY(fld_u32(c, &t, OBJ_SETSTATE, 0, &setstate));
        if (setstate >= c->summary->n_ivalues) return fail(c, PTMF_E_BAD_INDEX, t.pos);
        pop(c);
        push(c, ".attrs", NO_INDEX);
        TRY(fld_vec(c, &t, OBJ_ATTRS, 4, 4, &v));
        TRY(children(c, out, i, &v, &depth));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        r->m = type_index;
        r->b = state;
        r->c = setstate;
        break;
    }
    case UT_ENUM: {
        uint32_t value;
        push(c, ".type_name", NO_INDEX);
        TRY(fld_text(c, &t, 0, &v));
        pop(c);
        push(c, ".value", NO_INDEX);
        TRY(fld_u32(c, &t, 1, 0, &value));
        TRY(child(c, out, i, value, t.pos, &depth));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        r->m = value;
        break;
    }
    case UT_FUNCTION:
        push(c, ".qn", NO_INDEX);
        TRY(fld_text(c, &t, FN_QN, &v));
        pop(c);
        push(c, ".class_type", NO_INDEX);
        TRY(fld_u32(c, &t, FN_CLASS_TYPE, 0, &r->m));
        pop(c);
        r->a = v.data;
        r->n = v.count;
        break;
    case UT_TENSOR: {
        int32_t idx;
        TRY(walk_tensor(c, &t, i, 0, k, &idx));
        r->m = (uint32_t)idx;
        break;
    }
    default:
        break;
    }
    pop(c);
    if (depth > c->max_depth) return fail(c, PTMF_E_DEPTH_BUDGET, iv->pos);
    r->depth = depth;
    return PTMF_OK;
}

int ptmf_index_ivalues(const uint8_t *buf, size_t len, const ptmf_options *opt,
                       ptmf_summary *s, ptmf_ivalue *out, ptmf_error *err) {
    ctx c;
    vec all = {s->ivalues, s->n_ivalues};
    tensor_sink k;
    uint32_t i;
    ctx_init(&c, buf, len, opt, s, err);
    memset(&k, 0, sizeof k);
    TRY(count_elements(&c, s->n_ivalues, s->ivalues));
    for (i = 0; i < s->n_ivalues; i++) {
        tbl iv;
        memset(&out[i], 0, sizeof out[i]);
        push(&c, "ivalues", i);
        TRY(vec_table(&c, &all, i, &iv));
        TRY(index_one(&c, &k, out, i, &iv));
        pop(&c);
    }
    s->n_tensors = k.n_tensors;
    s->n_dims = k.n_dims;
    ctx_finish(&c);
    return PTMF_OK;
}

int ptmf_index_tensors(const uint8_t *buf, size_t len, const ptmf_options *opt,
                       ptmf_summary *s, ptmf_ivalue *ivalues,
                       const ptmf_storage *storages, ptmf_tensor *tensors,
                       int64_t *dims, ptmf_error *err) {
    ctx c;
    tensor_sink k;
    uint32_t i;
    ctx_init(&c, buf, len, opt, s, err);
    memset(&k, 0, sizeof k);
    k.records = tensors;
    k.dims = dims;
    k.storages = storages;
    k.capacity = s->n_tensors;
    k.dims_capacity = s->n_dims;
    for (i = 0; i < s->n_ivalues; i++) {
        tbl t;
        int32_t idx;
        if (ivalues[i].type != UT_TENSOR) continue;
        push(&c, "ivalues", i);
        push(&c, ".val<TensorMetadata>", NO_INDEX);
        TRY(tbl_open(&c, ivalues[i].pos, &t));
        TRY(walk_tensor(&c, &t, i, 0, &k, &idx));
        ivalues[i].m = (uint32_t)idx;
        pop(&c);
        pop(&c);
    }
    if (k.n_tensors != s->n_tensors || k.n_dims != s->n_dims) {
        push(&c, "ivalues", NO_INDEX);
        return fail(&c, PTMF_E_BAD_ARGUMENT, s->ivalues);   /* the buffer changed between passes */
    }
    ctx_finish(&c);
    return PTMF_OK;
}

/* ------------------------------------------------------ functions & rest */

static int read_function(ctx *c, uint64_t pos, ptmf_function *f, uint32_t self) {
    tbl t, sub;
    vec v;
    int present;
    uint32_t j;
    memset(f, 0, sizeof *f);
    TRY(tbl_open(c, pos, &t));
    push(c, ".qn", NO_INDEX);
    TRY(fld_text(c, &t, FN_QN, &v));
    f->qn = v.data; f->qn_len = v.count;
    pop(c);
    push(c, ".instructions", NO_INDEX);
    TRY(fld_vec(c, &t, FN_INSTRUCTIONS, 8, 4, &v));
    f->instructions = v.data; f->n_instructions = v.count;
    pop(c);
    push(c, ".operators", NO_INDEX);
    TRY(fld_vec(c, &t, FN_OPERATORS, 4, 4, &v));
    f->operators = v.data; f->n_operators = v.count;
    pop(c);
    push(c, ".constants", NO_INDEX);
    TRY(fld_vec(c, &t, FN_CONSTANTS, 4, 4, &v));
    f->constants = v.data; f->n_constants = v.count;
    if (self != UINT32_MAX) {
        TRY(count_elements(c, v.count, v.data));
        for (j = 0; j < v.count; j++)
            if (vec_u32(c, &v, j) >= c->summary->n_ivalues) {
                push(c, "", j);
                return fail(c, PTMF_E_BAD_INDEX, v.data + 4 * (uint64_t)j);
            }
    }
    pop(c);
    push(c, ".type_annotations", NO_INDEX);
    TRY(fld_vec(c, &t, FN_TYPE_ANNOTATIONS, 4, 4, &v));
    f->type_annotations = v.data; f->n_type_annotations = v.count;
    pop(c);
    push(c, ".register_size", NO_INDEX);
    TRY(fld_i32(c, &t, FN_REGISTER_SIZE, 0, &f->register_size));
    pop(c);
    push(c, ".schema", NO_INDEX);
    TRY(fld_table(c, &t, FN_SCHEMA, &sub, &present));
    if (present) {
        f->has_schema = 1;
        push(c, ".arguments", NO_INDEX);
        TRY(fld_vec(c, &sub, 0, 4, 4, &v));
        f->arguments = v.data; f->n_arguments = v.count;
        pop(c);
        push(c, ".returns", NO_INDEX);
        TRY(fld_vec(c, &sub, 1, 4, 4, &v));
        f->returns = v.data; f->n_returns = v.count;
        pop(c);
    }
    pop(c);
    push(c, ".debug_info", NO_INDEX);
    TRY(fld_table(c, &t, FN_DEBUG_INFO, &sub, &present));
    if (present) {
        push(c, ".debug_handle", NO_INDEX);
        TRY(fld_vec(c, &sub, 0, 8, 8, &v));
        f->debug_handles = v.data; f->n_debug_handles = v.count;
        pop(c);
    }
    pop(c);
    push(c, ".class_type", NO_INDEX);
    TRY(fld_u32(c, &t, FN_CLASS_TYPE, 0, &f->class_type));
    pop(c);
    return PTMF_OK;
}

/* text1: the second string is text (else bytes, as an extra file's content). */
static int read_pair(ctx *c, const vec *v, uint32_t i, const char *n0, const char *n1,
                     int text1, unsigned num_id, int64_t num_default, ptmf_record *out) {
    tbl t;
    vec s;
    memset(out, 0, sizeof *out);
    TRY(vec_table(c, v, i, &t));
    push(c, n0, NO_INDEX);
    TRY(fld_text(c, &t, 0, &s));
    out->s0 = s.data; out->s0_len = s.count;
    pop(c);
    push(c, n1, NO_INDEX);
    TRY(text1 ? fld_text(c, &t, 1, &s) : fld_str(c, &t, 1, &s));
    out->s1 = s.data; out->s1_len = s.count;
    pop(c);
    out->num = num_default;
    if (num_id) {
        int32_t num;
        TRY(fld_i32(c, &t, num_id, (int32_t)num_default, &num));
        out->num = num;
    }
    return PTMF_OK;
}

static int read_operator(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, ".name", ".overload_name", 1, 2, -1, out);
}

static int read_arg(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    TRY(read_pair(c, v, i, ".name", ".type", 1, 2, 0, out));
    out->num = (int64_t)(uint32_t)out->num;   /* default_value is an unsigned index */
    return PTMF_OK;
}

static int read_object_type(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    tbl t;
    vec s;
    uint8_t kind;
    memset(out, 0, sizeof *out);
    TRY(vec_table(c, v, i, &t));
    push(c, ".type_name", NO_INDEX);
    TRY(fld_text(c, &t, 0, &s));
    out->s0 = s.data; out->s0_len = s.count;
    pop(c);
    push(c, ".type", NO_INDEX);
    TRY(fld_u8(c, &t, 1, 0, &kind));
    out->num = kind;
    pop(c);
    push(c, ".attr_names", NO_INDEX);
    TRY(fld_vec(c, &t, 2, 4, 4, &s));
    out->v = s.data; out->v_len = s.count;
    pop(c);
    return PTMF_OK;
}

static int verify_strings(ctx *c, const vec *v) {
    uint32_t i;
    TRY(count_elements(c, v->count, v->data));
    for (i = 0; i < v->count; i++) {
        uint64_t target;
        vec s;
        push(c, "", i);
        TRY(vec_ref(c, v, i, &target));
        TRY(text_at(c, target, &s));
        pop(c);
    }
    return PTMF_OK;
}

static int verify_args(ctx *c, const ptmf_function *f, int returns) {
    vec v;
    uint32_t i;
    v.data = returns ? f->returns : f->arguments;
    v.count = returns ? f->n_returns : f->n_arguments;
    TRY(count_elements(c, v.count, v.data));
    for (i = 0; i < v.count; i++) {
        ptmf_record a;
        push(c, returns ? ".schema.returns" : ".schema.arguments", i);
        TRY(read_arg(c, &v, i, &a));
        if ((uint64_t)a.num >= c->summary->n_ivalues) {
            push(c, ".default_value", NO_INDEX);
            return fail(c, PTMF_E_BAD_INDEX, v.data + 4 * (uint64_t)i);
        }
        pop(c);
    }
    return PTMF_OK;
}

static int verify_function(ctx *c, const ptmf_ivalue *ivalues, uint32_t i) {
    ptmf_function f;
    vec v;
    uint32_t j;
    TRY(read_function(c, ivalues[i].pos, &f, i));
    if (f.class_type >= c->summary->n_object_types) {
        push(c, ".class_type", NO_INDEX);
        return fail(c, PTMF_E_BAD_TYPE_INDEX, ivalues[i].pos);
    }
    v.data = f.operators;
    v.count = f.n_operators;
    TRY(count_elements(c, v.count, v.data));
    for (j = 0; j < v.count; j++) {
        ptmf_record op;
        push(c, ".operators", j);
        TRY(read_operator(c, &v, j, &op));
        pop(c);
    }
    push(c, ".type_annotations", NO_INDEX);
    v.data = f.type_annotations;
    v.count = f.n_type_annotations;
    TRY(verify_strings(c, &v));
    pop(c);
    TRY(verify_args(c, &f, 0));
    TRY(verify_args(c, &f, 1));
    if (f.n_debug_handles != 0 && f.n_debug_handles != f.n_instructions) {
        push(c, ".debug_info.debug_handle", NO_INDEX);
        return fail(c, PTMF_E_LENGTH_MISMATCH, f.debug_handles);
    }
    return PTMF_OK;
}

static int verify_object(ctx *c, const ptmf_ivalue *ivalues, const ptmf_record *ot,
                         uint32_t i) {
    const ptmf_ivalue *o = &ivalues[i];
    push(c, ".type_index", NO_INDEX);
    switch (ot->num) {
    case OT_CLASS_WITH_FIELD:
        if (o->n > ot->v_len) {
            pop(c);
            push(c, ".attrs", NO_INDEX);
            return fail(c, PTMF_E_LENGTH_MISMATCH, o->a);
        }
        break;
    case OT_CUSTOM_CLASS:
        break;
    case OT_CLASS_WITH_SETSTATE:
        if (o->c >= c->summary->n_ivalues || ivalues[o->c].type != UT_FUNCTION) {
            pop(c);
            push(c, ".setstate_func", NO_INDEX);
            return fail(c, PTMF_E_KIND_MISMATCH, o->pos);
        }
        break;
    default:
        return fail(c, PTMF_E_BAD_OBJECT_KIND, o->pos);
    }
    pop(c);
    return PTMF_OK;
}

/* text_content: the contents are text (jit sources), else bytes (extra files). */
static int verify_named_blobs(ctx *c, uint64_t data, uint32_t count, const char *name,
                              int text_content) {
    vec v = {data, count};
    uint32_t i;
    TRY(count_elements(c, count, data));
    for (i = 0; i < count; i++) {
        ptmf_record r;
        push(c, name, i);
        TRY(read_pair(c, &v, i, ".name", ".content", text_content, 0, 0, &r));
        pop(c);
    }
    return PTMF_OK;
}

static int verify_roots(ctx *c, const ptmf_ivalue *ivalues, uint64_t data, uint32_t count,
                        const char *name, int functions) {
    uint32_t i;
    TRY(count_elements(c, count, data));
    for (i = 0; i < count; i++) {
        uint32_t j = ld32(c->buf + data + 4 * (uint64_t)i);
        push(c, name, i);
        if (j >= c->summary->n_ivalues) return fail(c, PTMF_E_BAD_INDEX, data + 4 * (uint64_t)i);
        if (functions && ivalues[j].type != UT_FUNCTION)
            return fail(c, PTMF_E_KIND_MISMATCH, data + 4 * (uint64_t)i);
        pop(c);
    }
    return PTMF_OK;
}

int ptmf_verify_rest(const uint8_t *buf, size_t len, const ptmf_options *opt,
                     ptmf_summary *s, const ptmf_ivalue *ivalues, ptmf_error *err) {
    ctx c;
    uint32_t i;
    vec types = {s->object_types, s->n_object_types};
    ctx_init(&c, buf, len, opt, s, err);
    c.verify = 1;

    if (s->storage_data_size != (int32_t)s->n_storages) {
        push(&c, "storage_data_size", NO_INDEX);
        return fail(&c, PTMF_E_LENGTH_MISMATCH, s->root);
    }
    TRY(count_elements(&c, s->n_object_types, s->object_types));
    for (i = 0; i < s->n_object_types; i++) {
        ptmf_record ot;
        vec names;
        push(&c, "object_types", i);
        TRY(read_object_type(&c, &types, i, &ot));
        if (ot.num < OT_CLASS_WITH_FIELD || ot.num > OT_CLASS_WITH_SETSTATE) {
            push(&c, ".type", NO_INDEX);
            return fail(&c, PTMF_E_BAD_OBJECT_KIND, ot.s0);
        }
        names.data = ot.v;
        names.count = ot.v_len;
        push(&c, ".attr_names", NO_INDEX);
        TRY(verify_strings(&c, &names));
        pop(&c);
        pop(&c);
    }
    for (i = 0; i < s->n_ivalues; i++) {
        push(&c, "ivalues", i);
        if (ivalues[i].type == UT_FUNCTION) {
            push(&c, ".val<Function>", NO_INDEX);
            TRY(verify_function(&c, ivalues, i));
            pop(&c);
        } else if (ivalues[i].type == UT_OBJECT) {
            ptmf_record ot;
            push(&c, ".val<Object>", NO_INDEX);
            TRY(read_object_type(&c, &types, ivalues[i].m, &ot));
            TRY(verify_object(&c, ivalues, &ot, i));
            pop(&c);
        }
        pop(&c);
    }
    if (ivalues[s->state_obj].type != UT_OBJECT) {
        push(&c, "state_obj", NO_INDEX);
        return fail(&c, PTMF_E_KIND_MISMATCH, s->root);
    }
    TRY(verify_named_blobs(&c, s->extra_files, s->n_extra_files, "extra_files", 0));
    TRY(verify_named_blobs(&c, s->jit_sources, s->n_jit_sources, "jit_sources", 1));
    TRY(verify_roots(&c, ivalues, s->methods, s->n_methods, "methods", 1));
    TRY(verify_roots(&c, ivalues, s->jit_constants, s->n_jit_constants, "jit_constants", 0));
    ctx_finish(&c);
    return PTMF_OK;
}

/* ------------------------------------------------------ on-demand readers */

int ptmf_read_function(const uint8_t *buf, size_t len, uint64_t pos, ptmf_function *out,
                       ptmf_error *err) {
    ctx c;
    ctx_init(&c, buf, len, NULL, NULL, err);
    return read_function(&c, pos, out, UINT32_MAX);
}

#define VECTOR_READER(fn, reader)                                                   \
    int fn(const uint8_t *buf, size_t len, uint64_t data, uint32_t count, uint32_t i, \
           ptmf_record *out, ptmf_error *err) {                                    \
        ctx c;                                                                      \
        vec v;                                                                      \
        ctx_init(&c, buf, len, NULL, NULL, err);                                    \
        v.data = data;                                                              \
        v.count = count;                                                            \
        if (!in_bounds(&c, data, (uint64_t)count * 4)) return fail(&c, PTMF_E_OUT_OF_BOUNDS, data); \
        return reader(&c, &v, i, out);                                              \
    }

static int read_extra_file(ctx *c, const vec *v, uint32_t i, ptmf_record *out) {
    return read_pair(c, v, i, ".name", ".content", 0, 0, 0, out);
}

VECTOR_READER(ptmf_read_operator, read_operator)
VECTOR_READER(ptmf_read_arg, read_arg)
VECTOR_READER(ptmf_read_extra_file, read_extra_file)
VECTOR_READER(ptmf_read_object_type, read_object_type)

int ptmf_read_strings(const uint8_t *buf, size_t len, uint64_t data, uint32_t count,
                      uint64_t *pos, uint32_t *size, ptmf_error *err) {
    ctx c;
    vec v = {data, count}, s;
    uint32_t i;
    ctx_init(&c, buf, len, NULL, NULL, err);
    if (!in_bounds(&c, data, (uint64_t)count * 4)) return fail(&c, PTMF_E_OUT_OF_BOUNDS, data);
    for (i = 0; i < count; i++) {
        uint64_t target;
        push(&c, "", i);
        TRY(vec_ref(&c, &v, i, &target));
        TRY(str_at(&c, target, &s));
        pop(&c);
        pos[i] = s.data;
        size[i] = s.count;
    }
    return PTMF_OK;
}

/* ---------------------------------------------------------- module walk */

/* Appends a step; the caller sized `steps` for every attribute the budget admits. */
static int walk_emit(ctx *c, ptmf_walk_step *steps, uint64_t max_steps, uint64_t *n,
                     ptmf_walk_step step, uint64_t where) {
    if (*n >= max_steps) return fail(c, PTMF_E_ELEMENT_BUDGET, where);
    steps[(*n)++] = step;
    return PTMF_OK;
}

/* The attributes of field object `i` that the walk takes, in state_dict order:
 * parameters and buffers as steps, then submodules onto `stack`, so that they come
 * off it in slot order. */
static int walk_object(ctx *c, const ptmf_ivalue *ivalues, const ptmf_walk_types *types,
                       uint32_t i, uint32_t self, ptmf_walk_step *steps,
                       uint64_t max_steps, uint64_t *n, ptmf_walk_step *stack,
                       uint64_t *sp) {
    const ptmf_ivalue *r = &ivalues[i];
    uint32_t t = r->m, count = r->n, slot, pass;
    uint64_t first_child = *sp, last;
    if (t >= types->n_types) return fail(c, PTMF_E_BAD_TYPE_INDEX, r->pos);
    if (types->slot_count[t] > types->n_names
        || types->slot_base[t] > types->n_names - types->slot_count[t])
        return fail(c, PTMF_E_BAD_ARGUMENT, r->pos);
    if (count > types->slot_count[t]) count = types->slot_count[t];
    if (!in_bounds(c, r->a, (uint64_t)r->n * 4)) return fail(c, PTMF_E_OUT_OF_BOUNDS, r->a);
    for (pass = 1; pass <= 3; pass++) {
        for (slot = 0; slot < count; slot++) {
            uint64_t where = r->a + 4 * (uint64_t)slot;
            uint32_t j = ld32(c->buf + where), name = types->slot_base[t] + slot;
            const ptmf_ivalue *target;
            ptmf_walk_step step;
            if (j >= i) {
                push(c, ".val<Object>.attrs", slot);
                return fail(c, PTMF_E_FORWARD_REFERENCE, where);
            }
            target = &ivalues[j];
            step.parent = self;
            step.name = name;
            if (pass < 3) {
                if (target->type != UT_TENSOR || types->role[name] != pass) continue;
                step.target = target->m;
                step.kind = pass;
                TRY(walk_emit(c, steps, max_steps, n, step, where));
            } else {
                if (target->type != UT_OBJECT) continue;
                if (target->m >= types->n_types) return fail(c, PTMF_E_BAD_TYPE_INDEX, target->pos);
                if (!types->module[target->m]) continue;
                step.target = j;
                step.kind = types->module[target->m] == 1 ? PTMF_WALK_MODULE
                                                          : PTMF_WALK_OTHER_MODULE;
                TRY(walk_emit(c, stack, max_steps, sp, step, where));
            }
        }
    }
    /* Reversed, so that the submodules come off the stack in slot order. */
    for (last = *sp; first_child + 1 < last; first_child++, last--) {
        ptmf_walk_step tmp = stack[first_child];
        stack[first_child] = stack[last - 1];
        stack[last - 1] = tmp;
    }
    return PTMF_OK;
}

int ptmf_walk_modules(const uint8_t *buf, size_t len, const ptmf_ivalue *ivalues,
                      uint32_t n_ivalues, const ptmf_walk_types *types, uint32_t root,
                      ptmf_walk_step *steps, ptmf_walk_step *stack, uint64_t max_steps,
                      uint64_t *budget, uint64_t *n_steps, ptmf_error *err) {
    ctx c;
    uint64_t n = 0, sp = 0;
    ptmf_walk_step first;
    ctx_init(&c, buf, len, NULL, NULL, err);
    *n_steps = 0;
    if (max_steps > UINT32_MAX) max_steps = UINT32_MAX;   /* steps are numbered in 32 bits */
    if (root >= n_ivalues || ivalues[root].type != UT_OBJECT || max_steps == 0)
        return fail(&c, PTMF_E_BAD_ARGUMENT, 0);
    first.parent = UINT32_MAX;
    first.name = UINT32_MAX;
    first.target = root;
    first.kind = PTMF_WALK_MODULE;
    stack[sp++] = first;
    while (sp) {
        ptmf_walk_step step = stack[--sp];
        const ptmf_ivalue *r = &ivalues[step.target];
        uint64_t self = n;
        push(&c, "ivalues", step.target);
        TRY(walk_emit(&c, steps, max_steps, &n, step, r->pos));
        if (step.kind != PTMF_WALK_MODULE) {
            pop(&c);
            continue;
        }
        if (*budget < 1 + (uint64_t)r->n) return fail(&c, PTMF_E_ELEMENT_BUDGET, r->pos);
        *budget -= 1 + (uint64_t)r->n;
        TRY(walk_object(&c, ivalues, types, step.target, (uint32_t)self, steps, max_steps,
                        &n, stack, &sp));
        pop(&c);
    }
    *n_steps = n;
    return PTMF_OK;
}

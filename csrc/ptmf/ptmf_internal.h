/*
 * ptmf_internal.h: what the PTMF reader's own files share and nothing else includes:
 * the schema's short names (ptmf_schema.h), the generic layer (fb.h), a pass's set-up
 * and the entry points one concern offers another (the ivalue index counts tensors
 * with the tensor walk; the verifier reads functions and object types with the
 * function readers).
 *
 *   ptmf_open.c      header, root Module table, a pass's set-up, the status block
 *   ptmf_storage.c   storage payload windows (pread for files of large storages)
 *   ptmf_tensor.c    tensor extents, quantization, the tensor records and views
 *   ptmf_index.c     the ivalue index: references, depths, dict keys
 *   ptmf_functions.c the Function, Operator, Arg, ExtraFile and ObjectType readers
 *   ptmf_verify.c    ptmf_verify_rest: what the index passes do not check
 */
#ifndef PTMF_INTERNAL_H
#define PTMF_INTERNAL_H

#include "fb/fb.h"
#include "ptmf/ptmf_schema.h"

/* A pass over a PTMF file: torch decodes its strings as text (names, types, code), so
 * every string a verifying pass reads must be UTF-8 (ptmf_open.c). */
void ptmf_ctx_init(fb_ctx *c, const uint8_t *buf, size_t len, const fb_options *opt,
                   ptmf_summary *s, fb_error *err);

/* Where the tensor walk puts its records: records NULL while counting (ptmf_tensor.c). */
typedef struct ptmf_tensor_sink {
    ptmf_tensor *records;       /* NULL while counting */
    int64_t *dims;
    const ptmf_storage *storages;
    uint32_t n_storages;
    uint32_t n_tensors;
    uint64_t n_dims;
    uint32_t capacity;
    uint64_t dims_capacity;
} ptmf_tensor_sink;

/* Reads one TensorMetadata table t of ivalue `ivalue` (PTMF_NO_IVALUE for a nested
 * quantization parameter, `nested`); its record's number into *record_index. With
 * k->records NULL it only counts (ptmf_tensor.c). */
int ptmf_walk_tensor(fb_ctx *c, const fb_tbl *t, uint32_t ivalue, int nested, ptmf_tensor_sink *k,
                     int32_t *record_index);

/* The Function table at `pos`; with `s`, its constants are checked to name ivalues
 * (verifying), NULL on demand (ptmf_functions.c). */
int ptmf_function_at(fb_ctx *c, const ptmf_summary *s, uint64_t pos, ptmf_function *f);
/* Arg table i of vector v: name, type, default_value (ptmf_functions.c). */
int ptmf_arg_at(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out);
/* ObjectType table i of vector v: type_name, attr_names, kind (ptmf_functions.c). */
int ptmf_object_type_at(fb_ctx *c, const fb_vec *v, uint32_t i, ptmf_record *out);

#endif /* PTMF_INTERNAL_H */

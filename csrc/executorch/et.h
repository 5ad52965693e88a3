/*
 * et.h: ExecuTorch programs (.pte, identifier ET12) and data files (.ptd, FT01): the
 * meaning on top of the generic layer. The structure of both flatbuffers is checked by
 * fb_verify_table from the project's schemas; et.c adds the file headers (eh00, FH01),
 * the 64-bit segments after the flatbuffer, and every cross-reference the runtime follows
 * (value, operator, delegate and segment indices, tensor extents), then indexes the
 * tensors and named data for the Python side.
 */
#ifndef ET_H
#define ET_H

#include "executorch/et_status.h"
#include "fb/fb_common.h"
#include "gen/executorch_flat_tensor.h"
#include "gen/executorch_flat_tensor_0_6.h"
#include "gen/executorch_program.h"

/* --- cdef begin --- */

/* Where a tensor's bytes are (et_record.stored). */
enum et_stored {
    ET_STORED_NONE = 0,        /* no data: an input or a tensor the runtime fills */
    ET_STORED_CONSTANT = 1,    /* in the file: constant segment, inline buffer, data file */
    ET_STORED_EXTERNAL = 2,    /* in a data file, by the tensor's fully qualified name */
    ET_STORED_PLANNED = 3      /* in a memory-planned buffer (memory_id, memory_offset) */
};

/* A program's (.pte) extended header, after the root offset and identifier: magic
 * "eh00" at byte 8, u32 length, u64 program size, u64 segment base offset[, u64 segment
 * data size], little-endian. */
typedef struct et_extended_header {
    uint32_t length;               /* header bytes from its magic on; 0: the file has none
                                      (it is all flatbuffer, without segments) */
    uint64_t program_size;         /* the flatbuffer is bytes [0, program_size) */
    uint64_t segment_base_offset;  /* segment data: [base offset, + segment data size) */
    uint64_t segment_data_size;    /* the rest of the file if the header has no such field */
} et_extended_header;

/* A data file's (.ptd) header: magic "FH01" at byte 8, u32 length, u64 flatbuffer offset,
 * u64 flatbuffer size, u64 segment base offset, u64 segment data size, little-endian. */
typedef struct et_flat_tensor_header {
    uint32_t length;               /* header bytes from its magic on */
    uint64_t flatbuffer_offset;    /* the flatbuffer's extent */
    uint64_t flatbuffer_size;
    uint64_t segment_base_offset;  /* segment data: [base offset, + segment data size) */
    uint64_t segment_data_size;
} et_flat_tensor_header;

/* Read the header of a file of `size` bytes, of which buf holds the first len (len <=
 * size; the whole header), and check that every extent it gives lies inside the file;
 * failures are located at the field ("header", its byte offset). */
int et_read_extended_header(const uint8_t *buf, size_t len, uint64_t size,
                            et_extended_header *h, fb_error *err);
int et_read_flat_tensor_header(const uint8_t *buf, size_t len, uint64_t size,
                               et_flat_tensor_header *h, fb_error *err);

/* The layout of a data file's flatbuffer (et_summary.layout). Both are FT01 behind an
 * FH01 header and carry no mark of their own (each writes version 0): ExecuTorch 0.6.0's
 * runtime reads the first, every later one the second, each taking the root as the
 * layout it knows. Their root tables tell them apart: 0.6.0's FlatTensor has five fields
 * (version, tensor_alignment, tensors, segments, named_data) and its writer writes both
 * vectors at ids 3 and 4 in every file, while the later FlatTensor has three (version,
 * segments, named_data). A root whose vtable gives field 3 or 4 is read by
 * executorch_flat_tensor_0_6.fbs, any other by executorch_flat_tensor.fbs. */
enum et_layout {
    ET_LAYOUT_CURRENT = 0,           /* a program, or a data file read since 0.7.0 */
    ET_LAYOUT_FLAT_TENSOR_0_6 = 1    /* a data file in ExecuTorch 0.6.0's layout */
};

/* What et_open finds; positions are absolute byte offsets in the file. */
typedef struct et_summary {
    uint32_t identifier;        /* ET_FILE_IDENTIFIER or FT_FILE_IDENTIFIER */
    uint32_t header_length;     /* of the eh00 / FH01 header, 0 without one */
    uint64_t flatbuffer_end;    /* the flatbuffer is bytes [0, flatbuffer_end) */
    uint64_t segment_base;      /* segment data: [segment_base, segment_base + segment_size) */
    uint64_t segment_size;
    uint64_t root;              /* the root table */
    uint32_t n_tensors;         /* Tensor values (program), or a data file's tensors (named
                                   data with a layout; 0.6.0's layout: its tensors) */
    uint32_t n_blobs;           /* named data entries */
    uint64_t tables_visited, elements_visited;
    uint64_t structure_tables;  /* the structural pass's visits alone: the plans' part */
    uint64_t structure_elements;/* goes on from the rest's, one budget for the file */
    uint64_t n_delegates;       /* delegates of every execution plan (program) */
    uint32_t plans_checked;     /* 1 once every execution plan is checked; until then the
                                   counts above leave the plans out */
    uint32_t layout;            /* enum et_layout */
} et_summary;

/* The schema a file et_open accepted is read by (its identifier's, or for a data file
 * in 0.6.0's layout that layout's). */
const fb_schema *et_schema(const et_summary *s);

/* One tensor: a Tensor value of an execution plan, or a data file's stored tensor. */
typedef struct et_record {
    uint64_t table;             /* the Tensor (TensorLayout) table */
    uint64_t data;              /* its bytes: ET_STORED_CONSTANT, or ET_STORED_PLANNED
                                   with `initial` (a mutable buffer's first values) */
    uint64_t nbytes;            /* elements times element size */
    uint64_t sizes;             /* int32[ndim] */
    uint64_t dim_order;         /* uint8[ndim], 0 if absent */
    uint64_t name;              /* fully qualified name (key) bytes, 0 if none */
    uint64_t memory_offset;     /* ET_STORED_PLANNED */
    uint32_t name_len;
    uint32_t plan;              /* execution plan (program); 0 for a data file */
    uint32_t value;             /* value index (program); named data index (data file) */
    uint32_t ndim;
    uint32_t memory_id;
    int8_t scalar_type;
    uint8_t stored;             /* enum et_stored */
    uint8_t shape_dynamism;
    uint8_t initial;            /* 1: planned, with initial data in a mutable data segment */
    uint8_t reserved[4];
} et_record;

/* One named data entry: key and bytes. */
typedef struct et_blob {
    uint64_t key;
    uint64_t data;
    uint64_t size;
    uint32_t key_len;
    uint32_t segment;
    int32_t tensor;             /* its et_record (data file), -1 if none */
    uint32_t reserved;
} et_blob;

/* Element size of ExecuTorch scalar type `type`, 0 if the schema does not know it. */
unsigned et_element_size(int type);

/* Verifies a .pte or .ptd (structure by the schema, then meaning) and counts its
 * tensors and named data: the whole file when `plans`, or else all of it but a program's
 * execution plans (their vector's extent only), which et_check_plans checks later, as
 * the runtime's load_method checks a method after its load_program. buf holds the first len
 * bytes of a file of `size` bytes: all of it, or (read in parts) at least its flatbuffer;
 * segment extents are checked against `size`. */
int et_open(const uint8_t *buf, size_t len, uint64_t size, const fb_options *opt, int plans,
            et_summary *s, fb_error *err);
/* The extents et_open reads from a file's identifier and header (s->flatbuffer_end: the
 * bytes a buffer given to et_open must hold), without verifying the rest: for a file read
 * in parts, whose buf holds its first len of `size` bytes. */
int et_extent(const uint8_t *buf, size_t len, uint64_t size, et_summary *s, fb_error *err);
/* Checks the execution plans et_open left, as it checks them with `plans`, and completes
 * the counts of s (nothing to do once s->plans_checked). */
int et_check_plans(const uint8_t *buf, size_t len, const fb_options *opt, et_summary *s,
                   fb_error *err);
/* Fills tensors[s->n_tensors] and blobs[s->n_blobs] for a file et_open accepted, its
 * plans checked. */
int et_index(const uint8_t *buf, size_t len, const et_summary *s, et_record *tensors,
             et_blob *blobs, fb_error *err);

/* --- cdef end --- */

struct fb_ctx;
struct fb_tbl;
struct fb_vec;

/* The layout of Tensor-like table t (a program's Tensor, a data file's TensorLayout, a
 * bundled program's test Tensor), from its scalar type, sizes and dim_order fields: sets
 * r's scalar_type, table, ndim, sizes, dim_order (0 when absent: the default order) and
 * nbytes, and fails on an unknown type, a negative size, an overflowing extent or a
 * dim_order that is not a permutation of the dimensions. */
int et_tensor_layout(struct fb_ctx *c, const struct fb_tbl *t, const fb_field *type_f,
                     const fb_field *sizes_f, const fb_field *order_f, et_record *r);

/* String field f of table t, into *s, which the runtime reads as a C string (a method,
 * backend, operator or external tensor name, looked up by strcmp): fails with
 * ET_E_NUL_IN_NAME, at the field, on a NUL inside it, where the runtime stops reading,
 * when `refuse` (a name this reader resolves whole, or one the runtime crashed on) or
 * in strict mode; and, verifying, with FB_E_BAD_UTF8 on one that is not UTF-8 (the
 * runtime logs these names, and its Python bindings abort on a log that is not). */
int et_c_string(struct fb_ctx *c, const struct fb_tbl *t, const fb_field *f, struct fb_vec *s,
                int refuse);

#endif /* ET_H */

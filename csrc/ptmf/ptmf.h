/*
 * ptmf.h: verifier and index builder for PyTorch mobile flatbuffer (PTMF) files.
 *
 * Plain C99, no allocation, no global state. Every entry point takes the whole
 * buffer as (buf, len) and bounds-checks every read itself, so the accessors stay
 * safe even on a buffer that was never verified or that changed after verification.
 *
 * This header is the single source of truth for the Python binding: the cffi
 * builder feeds the part between the "cdef" markers to ffi.cdef(), after those of
 * the headers it includes: fb_common.h (options, error), fb_tensor.h (scalar types,
 * quantization schemes) and the generated schema header, gen/mobile_bytecode.h (union
 * type numbers, enums, field ids).
 */
#ifndef PTMF_H
#define PTMF_H

#include <stddef.h>
#include <stdint.h>

#include "fb/fb_common.h"
#include "fb/fb_tensor.h"
#include "gen/mobile_bytecode.h"

/* PTMF's block of status codes: what only its files mean, and its wording of generic
 * checks (same codes as FB_E_TOO_SMALL, FB_E_BAD_IDENTIFIER, FB_E_BAD_UNION_TYPE and
 * FB_E_BAD_INDEX, in the words of its own files). */
#define PTMF_STATUS_BASE 100
#define PTMF_STATUS_TABLE(X)                                                        \
    X(PTMF_E_TOO_SMALL, "buffer is too small to hold a PTMF header")               \
    X(PTMF_E_ZIP_ARCHIVE, "this is a zip archive (TorchScript/pickle .ptl), not a PTMF flatbuffer") \
    X(PTMF_E_BAD_IDENTIFIER, "file identifier is not 'PTMF'")                      \
    X(PTMF_E_BAD_UNION_TYPE, "unknown IValue union type")                          \
    X(PTMF_E_BAD_INDEX, "ivalue index is out of range")                            \
    X(PTMF_E_FORWARD_REFERENCE, "ivalue reference does not point to an earlier value") \
    X(PTMF_E_BAD_TYPE_INDEX, "object type index is out of range")                  \
    X(PTMF_E_BAD_OBJECT_KIND, "invalid object type kind")                          \
    X(PTMF_E_UNHASHABLE_KEY, "dict key is not None, str, int, float, complex, bool or Tensor: no TorchScript dict key")

FB_STATUS_CODES(ptmf_status, PTMF);
extern const fb_status_block ptmf_statuses;   /* ptmf_open.c */

/* --- cdef begin --- */

/* ptmf_tensor.ivalue of the records of a tensor's per-channel scales and zero points. */
#define PTMF_NO_IVALUE 0xFFFFFFFF

/* What ptmf_open reads from the root Module table; vector data positions are
 * absolute byte offsets of element 0. */
typedef struct ptmf_summary {
    uint64_t root;
    uint64_t ivalues, storages, object_types, extra_files, jit_sources;
    uint64_t methods, jit_constants;
    uint32_t n_ivalues, n_storages, n_object_types, n_extra_files, n_jit_sources;
    uint32_t n_methods, n_jit_constants;
    uint32_t bytecode_version, operator_version;
    uint32_t state_obj;
    uint32_t mobile_ivalue_size;   /* as stored: 0 means all */
    int32_t storage_data_size;
    /* filled by ptmf_index_ivalues */
    uint32_t n_tensors;            /* tensor records, nested quantization params included */
    uint64_t n_dims;               /* int64 slots for all sizes and strides */
    fb_counts visited;             /* by every pass so far */
} ptmf_summary;

/* One record per ivalue, its columns named for what they hold; a column a type does not
 * use is 0. Per type:
 *   String, Device : data, length = UTF-8 bytes
 *   List           : data, length = uint32 items;  annotation, annotation_len = annotation_str
 *   Tuple          : data, length = uint32 items
 *   Dict           : data, length = uint32 keys;   values = uint32 values (length of them);
 *                    annotation, annotation_len = annotation_str
 *   IntList        : data, length = int64 items;   DoubleList: data, length = float64 items
 *   BoolList       : data, length = uint8 items
 *   Object         : data, length = uint32 attrs;  type_index; state; setstate
 *   EnumValue      : data, length = type_name bytes; target = the value's ivalue
 *   Function       : data, length = qn bytes;      type_index = class_type
 *   TensorMetadata : target = its tensor record
 *   Int/Bool/Double/ComplexDouble: the struct at pos */
typedef struct ptmf_ivalue {
    uint64_t pos;              /* the union value: its table, or a scalar's struct */
    uint64_t data;             /* element 0 of the vector or string the value holds */
    uint64_t values;           /* Dict: element 0 of its values vector */
    uint64_t annotation;       /* List, Dict: annotation_str's first byte */
    uint32_t length;           /* elements (bytes, for a string) at data */
    uint32_t annotation_len;   /* bytes at annotation */
    uint32_t type_index;       /* Object: its object type; Function: its class_type */
    uint32_t target;           /* EnumValue: its value's ivalue; TensorMetadata: its record */
    uint32_t state;            /* Object: the ivalue of its state */
    uint32_t setstate;         /* Object: the ivalue of its setstate_func */
    uint32_t depth;            /* 1 for leaves, 1 + the deepest child otherwise */
    uint8_t type;              /* IValue union type */
    uint8_t reserved[3];
} ptmf_ivalue;

typedef struct ptmf_storage {
    uint64_t pos;    /* payload start */
    uint64_t size;   /* payload bytes */
} ptmf_storage;

/* One record per tensor, in ivalue order; a quantized tensor's per-channel
 * scales and zero_points follow as records of their own (ivalue = PTMF_NO_IVALUE). */
typedef struct ptmf_tensor {
    uint64_t pos;            /* TensorMetadata table */
    uint64_t extent;         /* bytes of the storage the view reaches (0 if empty) */
    uint64_t dims;           /* index into dims[]: sizes[ndim] then strides[ndim] */
    uint64_t numel;          /* elements (values, for packed types) */
    int64_t storage_offset;  /* in elements */
    int64_t zero_point;
    double scale;
    uint32_t ivalue;
    uint32_t storage;
    uint32_t ndim;
    int32_t scales;          /* tensor record of per-channel scales, -1 if none */
    int32_t zero_points;     /* tensor record of per-channel zero points, -1 if none */
    int32_t axis;
    int8_t scalar_type;
    int8_t qscheme;          /* -1 when not quantized */
    uint8_t requires_grad;
    uint8_t contiguous;      /* strides are the row-major strides of sizes */
    uint8_t reserved[4];
} ptmf_tensor;

/* A Function table, read on demand. */
typedef struct ptmf_function {
    uint64_t qn; uint32_t qn_len;
    uint32_t n_instructions; uint64_t instructions;   /* 8-byte structs op:i8 pad n:u16 x:i32 */
    uint32_t n_operators; uint64_t operators;         /* vector of Operator tables */
    uint32_t n_constants; uint64_t constants;         /* uint32 ivalue indices */
    uint32_t n_type_annotations; uint64_t type_annotations; /* vector of strings */
    uint32_t n_arguments; uint64_t arguments;         /* vector of Arg tables */
    uint32_t n_returns; uint64_t returns;             /* vector of Arg tables */
    uint32_t n_debug_handles; uint64_t debug_handles; /* int64 each */
    int32_t register_size;
    uint32_t class_type;
    int has_schema;
} ptmf_function;

/* Operator (name, overload, num_args) or Arg (name, type, default_value) or
 * ExtraFile (name, content) or ObjectType (type_name, attr_names; kind). */
typedef struct ptmf_record {
    uint64_t s0; uint32_t s0_len;    /* first string */
    uint64_t s1; uint32_t s1_len;    /* second string (content, type, overload) */
    uint64_t v; uint32_t v_len;      /* vector (attr_names of an ObjectType) */
    int64_t num;                     /* num_args_serialized, default_value, kind */
} ptmf_record;

/* The schema's name of IValue union type `type` ("TensorMetadata"); "" if none. */
const char *ptmf_ivalue_type_name(int type);

/* Header and root Module table. */
int ptmf_open(const uint8_t *buf, size_t len, const fb_options *opt,
              ptmf_summary *s, fb_error *err);
/* storages[s->n_storages]. fd: the file buf maps, or -1; with it, files with
 * large storages have each storage header read with pread, not through buf. */
int ptmf_index_storages(const uint8_t *buf, size_t len, const fb_options *opt,
                        ptmf_summary *s, ptmf_storage *storages, int fd,
                        fb_error *err);
/* The byte ranges a mapping should read ahead in: the payloads of at least `page`
 * bytes, in position order (sorted here, into the scratch `order`, n entries), merged
 * while the gap after the run so far is under `gap` bytes, and trimmed to whole pages.
 * runs[2k], runs[2k + 1] = start, end of run k; runs holds 2 * n. Returns the number
 * of runs. */
uint32_t ptmf_payload_runs(const ptmf_storage *storages, uint32_t n, uint64_t page,
                           uint64_t gap, uint32_t *order, uint64_t *runs);
/* out[s->n_ivalues]; sets s->n_tensors and s->n_dims. */
int ptmf_index_ivalues(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *out, fb_error *err);
/* tensors[s->n_tensors], dims[s->n_dims]; needs the filled ivalue and storage records. */
int ptmf_index_tensors(const uint8_t *buf, size_t len, const fb_options *opt,
                       ptmf_summary *s, ptmf_ivalue *ivalues,
                       const ptmf_storage *storages, ptmf_tensor *tensors,
                       int64_t *dims, fb_error *err);
/* The element at which each of tensor records todo[n] starts in the buffer seen as its
 * dtype (out[i]), or -1 when it is no plain view of it: not contiguous, empty,
 * quantized, packed several to a byte, or not aligned to its element size. */
void ptmf_view_starts(const ptmf_tensor *tensors, uint64_t n_tensors,
                      const ptmf_storage *storages, uint64_t n_storages,
                      const uint32_t *todo, uint64_t n, int64_t *out);
/* The checks the index does not need: the structure of the root table (but the
 * ivalues and storages the index passes checked) and of every function, by the schema;
 * then what functions, object types, objects, jit sources and the root's references
 * mean. */
int ptmf_verify_rest(const uint8_t *buf, size_t len, const fb_options *opt,
                     ptmf_summary *s, const ptmf_ivalue *ivalues, fb_error *err);

/* On-demand readers; bounds-checked whether or not the buffer was verified. */
int ptmf_read_function(const uint8_t *buf, size_t len, uint64_t pos,
                       ptmf_function *out, fb_error *err);
int ptmf_read_operator(const uint8_t *buf, size_t len, uint64_t vec, uint32_t count,
                       uint32_t i, ptmf_record *out, fb_error *err);
int ptmf_read_arg(const uint8_t *buf, size_t len, uint64_t vec, uint32_t count,
                  uint32_t i, ptmf_record *out, fb_error *err);
int ptmf_read_extra_file(const uint8_t *buf, size_t len, uint64_t vec, uint32_t count,
                         uint32_t i, ptmf_record *out, fb_error *err);

/* Bytes [pos, pos + len) of the file. */
typedef struct ptmf_span {
    uint64_t pos;
    uint64_t len;
} ptmf_span;

/* One entry of the object type table. */
typedef struct ptmf_object_type {
    ptmf_span name;          /* type_name */
    uint64_t attr_names;     /* the attr_names vector's first element */
    uint64_t first_attr;     /* its attribute names are attrs[first_attr, + n_attrs) */
    uint32_t n_attrs;
    uint32_t kind;           /* TypeType */
} ptmf_object_type;

/* Every entry of the object type vector at `vec` (count of them) into types[count],
 * and their attribute names, type after type, into attrs[max_attrs]. *n_attrs is set
 * to the names' total (at most the element budget and 2^32 - 1: types may share a
 * vector); attrs is written only when max_attrs holds them all, so a first call with
 * none counts. */
int ptmf_read_object_types(const uint8_t *buf, size_t len, uint64_t vec, uint32_t count,
                           ptmf_object_type *types, ptmf_span *attrs, uint64_t max_attrs,
                           uint64_t *n_attrs, fb_error *err);
/* Every string of a vector of strings: pos[count], size[count]. */
int ptmf_read_strings(const uint8_t *buf, size_t len, uint64_t vec, uint32_t count,
                      uint64_t *pos, uint32_t *size, fb_error *err);

/* What nn.Module.state_dict() walks, per object type and attribute name. Names are
 * numbered type by type: type t's slot s is name slot_base[t] + s (s < slot_count[t]). */
typedef struct ptmf_walk_types {
    uint32_t n_types;
    uint32_t n_names;
    const uint8_t *module;        /* [n_types] 0: not a module, 1: a field object the
                                   * walk enters, 2: a module the caller walks itself */
    const uint32_t *slot_base;    /* [n_types] */
    const uint32_t *slot_count;   /* [n_types] */
    const uint8_t *role;          /* [n_names] 1 parameter, 2 buffer, 0 neither */
} ptmf_walk_types;

enum { PTMF_WALK_PARAMETER = 1, PTMF_WALK_BUFFER = 2, PTMF_WALK_MODULE = 3,
       PTMF_WALK_OTHER_MODULE = 4 };

/* One entry of a module walk, in state_dict order: a module (its steps follow,
 * then its submodules') or one of its tensors. */
typedef struct ptmf_walk_step {
    uint32_t parent;   /* step of the owning module; UINT32_MAX for the root */
    uint32_t name;     /* name number of the attribute (UINT32_MAX for the root) */
    uint32_t target;   /* tensor record (parameter, buffer) or ivalue (modules) */
    uint32_t kind;     /* PTMF_WALK_* */
} ptmf_walk_step;

/* Walks the field-object modules from `root` (depth first, shared modules once per
 * path). Each module entered costs 1 + its attributes from *budget. steps[] and
 * stack[] hold max_steps entries each; *n_steps is set to the steps written. */
int ptmf_walk_modules(const uint8_t *buf, size_t len, const ptmf_ivalue *ivalues,
                      uint32_t n_ivalues, const ptmf_walk_types *types, uint32_t root,
                      ptmf_walk_step *steps, ptmf_walk_step *stack, uint64_t max_steps,
                      uint64_t *budget, uint64_t *n_steps, fb_error *err);

/* --- cdef end --- */

#endif /* PTMF_H */

/*
 * fb_common.h: what the generic FlatBuffers layer (fb.h) and every format's entry points
 * share: the one status table, the options (budgets and switches), the located error and
 * the visit counts. It names no format: PTMF (ptmf.h), ExecuTorch (et.h) and XNNPACK
 * (xnn.h) stand on it.
 *
 * The cffi builder feeds the part between the "cdef" markers to ffi.cdef() first and
 * expands the status table below into the fb_status enum.
 */
#ifndef FB_COMMON_H
#define FB_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Status codes of every format: X(name, message). The one table both C and Python read;
 * the names keep the PTMF_ prefix of the first format, because Python reads them as
 * lib.PTMF_E_* and a FormatError's code is the name without it. */
#define FB_STATUS_TABLE(X)                                                          \
    X(FB_OK, "ok")                                                                  \
    X(FB_E_TOO_SMALL, "buffer is too small to hold a PTMF header")                 \
    X(PTMF_E_ZIP_ARCHIVE, "this is a zip archive (TorchScript/pickle .ptl), not a PTMF flatbuffer") \
    X(FB_E_BAD_IDENTIFIER, "file identifier is not 'PTMF'")                        \
    X(FB_E_OUT_OF_BOUNDS, "offset points outside the buffer")                      \
    X(FB_E_MISALIGNED, "scalar, table, vector or vtable is not aligned")           \
    X(FB_E_BAD_VTABLE, "vtable is malformed")                                      \
    X(FB_E_VTABLE_WRAPPED, "signed vtable offset wrapped around (a torch file over 2 GiB); rejected in strict mode") \
    X(FB_E_TOO_LARGE, "buffer is over 4 GiB: 32-bit offsets cannot address it")    \
    X(FB_E_NO_NUL, "string is not NUL-terminated")                                 \
    X(FB_E_MISSING_FIELD, "a required field is absent")                            \
    X(FB_E_BAD_UNION_TYPE, "unknown IValue union type")                            \
    X(FB_E_BAD_INDEX, "ivalue index is out of range")                              \
    X(PTMF_E_FORWARD_REFERENCE, "ivalue reference does not point to an earlier value") \
    X(PTMF_E_BAD_TYPE_INDEX, "object type index is out of range")                    \
    X(FB_E_BAD_STORAGE_INDEX, "storage index is out of range")                     \
    X(FB_E_KIND_MISMATCH, "reference points at a value of the wrong kind")         \
    X(FB_E_LENGTH_MISMATCH, "vectors that must have equal lengths differ")         \
    X(FB_E_BAD_SCALAR_TYPE, "unknown or unsupported tensor scalar type")           \
    X(FB_E_NEGATIVE_DIMENSION, "negative tensor size, stride or storage offset")   \
    X(FB_E_EXTENT_OVERFLOW, "tensor extent overflows 64-bit arithmetic")           \
    X(FB_E_OUTSIDE_STORAGE, "tensor reaches past the end of its storage")          \
    X(FB_E_BAD_QUANTIZATION, "invalid quantization schema")                        \
    X(PTMF_E_BAD_OBJECT_KIND, "invalid object type kind")                            \
    X(FB_E_DEPTH_BUDGET, "value nesting exceeds the depth budget")                 \
    X(FB_E_TABLE_BUDGET, "number of tables visited exceeds the table budget")      \
    X(FB_E_ELEMENT_BUDGET, "number of vector elements exceeds the element budget") \
    X(FB_E_BAD_ARGUMENT, "invalid argument passed to the library")                \
    X(FB_E_BAD_UTF8, "string is not valid UTF-8")                                \
    X(PTMF_E_UNHASHABLE_KEY, "dict key is not None, str, int, float, complex, bool or Tensor: no TorchScript dict key") \
    X(ET_E_BAD_HEADER, "extended header (eh00/FH01) is malformed or reaches past the end of the file") \
    X(ET_E_BAD_SEGMENT, "data lies outside its segment, or the segment outside the file's segment data") \
    X(ET_E_BAD_DIM_ORDER, "dim_order is not a permutation of the tensor's dimensions") \
    X(ET_E_MISSING_DATA, "external tensor data is in none of the data files given") \
    X(ET_E_DATA_MISMATCH, "external tensor data does not match the tensor's dtype and size") \
    X(ET_E_BAD_PAYLOAD_HEADER, "XNNPACK payload header (XH00) is malformed or reaches past the payload") \
    X(ET_E_BAD_VALUE_ID, "XNNPACK value id is out of range, repeated, or names no value")

/* --- cdef begin --- */

/* Budgets and switches. Zero budgets mean "derive from the buffer length":
 * a table costs at least 4 bytes and an element at least 1, so len/4 tables and
 * len elements bound every file that does not share tables, torch's output
 * included; shared tables beyond that are what the budget is for. */
typedef struct fb_options {
    uint64_t max_tables;     /* table visits, 0 = auto */
    uint64_t max_elements;   /* vector elements visited, 0 = auto */
    uint32_t max_depth;      /* nesting of values (lists in lists, objects in objects) */
    int verify;              /* full checks: alignment, NUL, UTF-8, what a format adds */
    int strict;              /* FlatBuffers' own rules: no wrapped vtable offsets */
} fb_options;

typedef struct fb_error {
    int code;                /* an fb_status */
    uint64_t offset;         /* byte offset of the offending data */
    char path[240];          /* e.g. "ivalues[12].val<TensorMetadata>.sizes" */
} fb_error;

/* What the passes over one file visited, carried from pass to pass. */
typedef struct fb_counts {
    uint64_t tables;           /* tables opened */
    uint64_t elements;         /* vector elements visited */
    uint64_t wrapped_vtables;  /* tables read through a wrapped vtable offset */
} fb_counts;

const char *fb_strerror(int code);
/* The status's name in the table ("FB_E_OUT_OF_BOUNDS"). */
const char *fb_status_name(int code);
/* Verification on, depth budget 200, the other budgets derived from the length. */
void fb_default_options(fb_options *opt);

/* --- cdef end --- */

enum fb_status {
#define FB_STATUS_ENUM_ITEM(name, message) name,
    FB_STATUS_TABLE(FB_STATUS_ENUM_ITEM)
#undef FB_STATUS_ENUM_ITEM
    FB_STATUS_COUNT
};

#endif /* FB_COMMON_H */

/*
 * fb_common.h: what the generic FlatBuffers layer (fb.h) and every format's entry points
 * share: the generic block of status codes and the way a format declares its own, the
 * options (budgets and switches), the located error and the visit counts. It names no
 * format: each stands on it from its own folder.
 *
 * The cffi builder feeds the part between the "cdef" markers to ffi.cdef() first and
 * declares the codes of every status block it finds.
 */
#ifndef FB_COMMON_H
#define FB_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The generic block of status codes: X(name, message), numbered from FB_STATUS_BASE. Each
 * format declares a block of its own the same way in its own header (<P>_STATUS_BASE,
 * <P>_STATUS_TABLE, FB_STATUS_CODES, an extern fb_status_block) and defines it in one of
 * its .c files with FB_STATUS_BLOCK; the cffi builder (csrc/build.py) finds every block
 * in the headers, declares its codes to Python and lists the blocks for fb_strerror and
 * fb_status_name. A FormatError's code is a status's name after "_E_", lower-cased, so a
 * format may give a generic check its own wording under the same code. */
#define FB_STATUS_BASE 0
#define FB_STATUS_TABLE(X)                                                          \
    X(FB_OK, "ok")                                                                  \
    X(FB_E_TOO_SMALL, "buffer is too small to hold a header")                      \
    X(FB_E_BAD_IDENTIFIER, "file identifier is not the format's")                  \
    X(FB_E_OUT_OF_BOUNDS, "offset points outside the buffer")                      \
    X(FB_E_MISALIGNED, "scalar, table, vector or vtable is not aligned")           \
    X(FB_E_BAD_VTABLE, "vtable is malformed")                                      \
    X(FB_E_VTABLE_WRAPPED, "signed vtable offset wrapped around (a torch file over 2 GiB); rejected in strict mode") \
    X(FB_E_TOO_LARGE, "buffer is over 4 GiB: 32-bit offsets cannot address it")    \
    X(FB_E_NO_NUL, "string is not NUL-terminated")                                 \
    X(FB_E_MISSING_FIELD, "a required field is absent")                            \
    X(FB_E_BAD_UNION_TYPE, "unknown union type")                                   \
    X(FB_E_BAD_INDEX, "index is out of range")                                     \
    X(FB_E_BAD_STORAGE_INDEX, "storage index is out of range")                     \
    X(FB_E_KIND_MISMATCH, "reference points at a value of the wrong kind")         \
    X(FB_E_LENGTH_MISMATCH, "vectors that must have equal lengths differ")         \
    X(FB_E_BAD_SCALAR_TYPE, "unknown or unsupported tensor scalar type")           \
    X(FB_E_NEGATIVE_DIMENSION, "negative tensor size, stride or storage offset")   \
    X(FB_E_EXTENT_OVERFLOW, "tensor extent overflows 64-bit arithmetic")           \
    X(FB_E_OUTSIDE_STORAGE, "tensor reaches past the end of its storage")          \
    X(FB_E_BAD_QUANTIZATION, "invalid quantization schema")                        \
    X(FB_E_DEPTH_BUDGET, "value nesting exceeds the depth budget")                 \
    X(FB_E_TABLE_BUDGET, "number of tables visited exceeds the table budget")      \
    X(FB_E_ELEMENT_BUDGET, "number of vector elements exceeds the element budget") \
    X(FB_E_BAD_ARGUMENT, "invalid argument passed to the library")                \
    X(FB_E_BAD_UTF8, "string is not valid UTF-8")                                  \
    X(FB_E_ZERO_OFFSET, "offset is zero: it points at itself")                     \
    X(FB_E_FIELD_OUTSIDE_TABLE, "field lies outside its table's declared size (FlatBuffers' verifier takes it; rejected in strict mode)") \
    X(FB_E_UNKNOWN_FIELD, "table sets a field its schema does not declare (a newer writer's; rejected in strict mode)")

/* --- cdef begin --- */

/* Budgets and switches. Zero budgets mean "derive from the buffer length":
 * a table costs at least 4 bytes and an element at least 1, so len/4 tables and
 * len elements bound every file that does not share tables, torch's output
 * included; shared tables beyond that are what the budget is for. */
typedef struct fb_options {
    uint64_t max_tables;     /* table visits, 0 = auto */
    uint64_t max_elements;   /* vector elements visited, 0 = auto */
    uint32_t max_depth;      /* nesting of values (lists in lists, objects in objects) */
    int verify;              /* full checks: alignment, NUL, what a format adds */
    int strict;              /* the builder's layout as well: no wrapped vtable offsets,
                              * fields inside their table's declared size, no fields the
                              * schema lacks, strings in UTF-8 */
} fb_options;

typedef struct fb_error {
    int code;                /* a status code of any block */
    uint64_t offset;         /* byte offset of the offending data */
    char path[240];          /* field names, indices and union members: "a[12].b<T>.c" */
    uint64_t size, need;     /* a file too short for what its header or size prefix says:
                              * its size and the bytes it needs (fb_truncated); else 0 */
} fb_error;

/* What the passes over one file visited, carried from pass to pass. */
typedef struct fb_counts {
    uint64_t tables;           /* tables opened */
    uint64_t elements;         /* vector elements visited */
    uint64_t wrapped_vtables;  /* tables read through a wrapped vtable offset */
} fb_counts;

/* Names and messages of one block of status codes: codes base .. base + count - 1. */
typedef struct fb_status_block {
    int base;
    int count;
    const char *const *names;      /* "FB_E_OUT_OF_BOUNDS" */
    const char *const *messages;
} fb_status_block;

/* The message of any block's status; "unknown status" for a code no block holds. */
const char *fb_strerror(int code);
/* The status's name in its block ("FB_E_OUT_OF_BOUNDS"); "FB_E_UNKNOWN" if none. */
const char *fb_status_name(int code);
/* Block i of those compiled in, NULL past the last (the list csrc/build.py writes). */
const fb_status_block *fb_status_block_at(size_t i);
/* Verification on, depth budget 200, the other budgets derived from the length. */
void fb_default_options(fb_options *opt);

/* --- cdef end --- */

#define FB_STATUS_ENUM_ITEM(name, message) name,
#define FB_STATUS_NAME_ITEM(name, message) #name,
#define FB_STATUS_MESSAGE_ITEM(name, message) message,

/* Declares block P's codes (P_STATUS_TABLE's names from P_STATUS_BASE on) as enum `tag`,
 * with P_STATUS_END one past the last. */
#define FB_STATUS_CODES(tag, P)                                                     \
    enum tag {                                                                      \
        P##_STATUS_BEFORE = P##_STATUS_BASE - 1,                                    \
        P##_STATUS_TABLE(FB_STATUS_ENUM_ITEM)                                       \
        P##_STATUS_END                                                              \
    }

/* Defines block P's names and messages as the fb_status_block `var` (once, in a .c file
 * of its owner; its header declares `extern const fb_status_block var;`). */
#define FB_STATUS_BLOCK(var, P)                                                     \
    static const char *const var##_names[] = {P##_STATUS_TABLE(FB_STATUS_NAME_ITEM)};        \
    static const char *const var##_messages[] = {P##_STATUS_TABLE(FB_STATUS_MESSAGE_ITEM)};  \
    const fb_status_block var = {P##_STATUS_BASE, P##_STATUS_END - P##_STATUS_BASE,         \
                                 var##_names, var##_messages}

FB_STATUS_CODES(fb_status, FB);
extern const fb_status_block fb_statuses;

#endif /* FB_COMMON_H */

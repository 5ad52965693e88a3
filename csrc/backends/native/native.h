/*
 * native.h: ExecuTorch native backend payloads (the `processed` bytes of a NativeBackend
 * delegate in an ExecuTorch program). The payload is a Program flatbuffer (identifier
 * NPTG, checked by fb_verify_table from csrc/schemas/native.fbs) and nothing else; its
 * first method's graph names values by SSA name, and a constant's bytes are named data.
 * native.c checks what the graph means: every name resolves to a value defined before
 * its use, no value is defined twice, every tensor's dtype is known and every constant's
 * dims are static.
 */
#ifndef NATIVE_H
#define NATIVE_H

#include "backends/native/native_status.h"
#include "fb/fb_common.h"
#include "gen/native.h"

/* --- cdef begin --- */

/* What nat_open finds; positions are byte offsets in the payload. */
typedef struct nat_summary {
    uint64_t root;              /* the Program table */
    uint64_t method;            /* its first Method table, the one the delegate runs */
    uint32_t n_methods;
    uint32_t n_values;          /* value ids run 0 .. n_values - 1 */
    uint64_t tables_visited, elements_visited;
} nat_summary;

/* Where each value comes from (nat_value.source). */
enum nat_source {
    NAT_SOURCE_INPUT = 0,       /* a name of the graph's inputs */
    NAT_SOURCE_CONSTANT = 1,    /* a NamedTensorRef of the method: named data */
    NAT_SOURCE_BUFFER = 2,      /* a mutable buffer of the method: no data */
    NAT_SOURCE_NODE = 3         /* an output of a node */
};

/* One value, by id: inputs, then constants, then mutable buffers, then each node's
 * outputs in node order (a tensor list's elements each a value). */
typedef struct nat_value {
    uint64_t name;              /* payload offset of its SSA name */
    uint64_t meta;              /* payload offset of its TensorMeta table, 0 if none */
    uint64_t key;               /* a constant: payload offset of its data key */
    uint64_t nbytes;            /* a constant: its dims times its element size; 0 for a
                                   quantized one (its named data's length) */
    uint32_t name_len;
    uint32_t key_len;
    int32_t node;               /* index in the graph's nodes of the node that defines
                                   it, -1 for the others */
    uint8_t source;             /* enum nat_source */
    uint8_t kind;               /* the node output's OutputValueKind (TENSOR for an
                                   input, constant or buffer; a list's element: TENSOR) */
} nat_value;

/* Verifies the payload buf[0, len) by the schema and counts the values of its first
 * method. */
int nat_open(const uint8_t *buf, size_t len, const fb_options *opt, nat_summary *s,
             fb_error *err);
/* Fills values[s->n_values] by value id and order[s->n_values] (the ids by name), for a
 * payload nat_open accepted, and checks the graph's meaning: every name a node, the
 * graph's outputs, its tensor metadata and the method's output specs give resolves to a
 * value defined before it is used, no name is defined twice, every tensor's dtype is
 * known, every constant's dims static. */
int nat_index(const uint8_t *buf, size_t len, const nat_summary *s, nat_value *values,
              uint32_t *order, fb_error *err);

/* --- cdef end --- */

#endif /* NATIVE_H */

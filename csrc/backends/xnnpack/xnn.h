/*
 * xnn.h: XNNPACK delegate payloads (the `processed` bytes of an XnnpackBackend delegate
 * in an ExecuTorch program). The payload is an `XH00` header, an XNNPACK flatbuffer
 * (identifier XN01, checked by fb_verify_table from csrc/schemas/xnnpack.fbs) and the
 * inline constant data; xnn.c reads the header and checks what the graph means: value
 * ids, the ids nodes name, constant references and extents, quantization parameters.
 */
#ifndef XNN_H
#define XNN_H

#include "backends/payload_header.h"
#include "backends/xnnpack/xnn_status.h"
#include "executorch/et_status.h"
#include "fb/fb_common.h"
#include "gen/xnnpack.h"

/* --- cdef begin --- */


/* "XN00": the flatbuffer identifier of the older payloads (constants inside the
 * flatbuffer), which the reader leaves opaque. */
#define XNN_LEGACY_IDENTIFIER 0x30304e58

/* Reads the header of the payload buf[0, len) and checks that the flatbuffer and the
 * constant data it gives lie inside; not the flatbuffer's identifier (xnn_open does). */
int xnn_read_header(const uint8_t *buf, size_t len, payload_header *h, fb_error *err);

/* What xnn_open finds; positions are byte offsets in the payload. */
typedef struct xnn_summary {
    payload_header header;
    uint64_t root;              /* the XNNGraph table */
    uint32_t n_values;          /* xvalues; ids run 0 .. n_values - 1 */
    uint32_t n_args;            /* delegate call arguments the runtime reads: one past the
                                   largest external id of a value flagged input or output */
    uint64_t tables_visited, elements_visited;
} xnn_summary;

/* Where constant bytes are: inline (data, size) or named data (key, size); data and
 * key 0 when none. */
typedef struct xnn_ref {
    uint64_t data;              /* payload offset of inline bytes */
    uint64_t key;               /* payload offset of the named data key */
    uint64_t size;              /* bytes the payload's ConstantDataOffset gives */
    uint64_t nbytes;            /* bytes the value (or scales) need */
    uint32_t key_len;
    uint32_t index;             /* constant_data index, 0 if none */
} xnn_ref;

/* One value, at index = its id. */
typedef struct xnn_value {
    uint64_t tensor;            /* its XNNTensorValue table */
    uint64_t quant;             /* its quantization parameters table, 0 if none */
    xnn_ref constant;           /* its constant data, index 0 if none */
    xnn_ref scales;             /* per-channel (-group) scales from constant data */
    uint32_t xvalue;            /* position in xvalues */
    int16_t datatype;           /* enum xn_xnn_datatype */
    uint8_t quant_kind;         /* enum xn_xnn_quant_params */
    uint8_t writers;            /* nodes that write it (counted by the index pass) */
} xnn_value;

/* Reads the header and verifies the flatbuffer of the payload buf[0, len) by the
 * schema; counts its values. */
int xnn_open(const uint8_t *buf, size_t len, const fb_options *opt, xnn_summary *s,
             fb_error *err);
/* Checks the graph's meaning and fills values[s->n_values] by id, for a payload
 * xnn_open accepted. */
int xnn_index(const uint8_t *buf, size_t len, const xnn_summary *s, xnn_value *values,
              fb_error *err);

/* --- cdef end --- */

#endif /* XNN_H */

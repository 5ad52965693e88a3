/*
 * tosa.h: Arm TOSA delegate payloads (the `processed` bytes of a TOSABackend delegate in
 * an ExecuTorch program). The payload is a TosaGraph flatbuffer (identifier TOSA,
 * checked by fb_verify_table from csrc/schemas/tosa.fbs): regions of basic blocks, each
 * block its operators, tensors and shapes, which operators and the block's inputs and
 * outputs name. tosa.c checks what the graph means: every name resolves in its block,
 * once, and every constant's data holds its shape times its element size.
 */
#ifndef TOSA_H
#define TOSA_H

#include "backends/tosa/tosa_status.h"
#include "fb/fb_common.h"
#include "gen/tosa.h"

/* --- cdef begin --- */

/* What tosa_open finds; positions are byte offsets in the payload. Value ids number the
 * tensors then the shapes of each block, the blocks of each region in order, the regions
 * in order. */
typedef struct tosa_summary {
    uint64_t root;              /* the TosaGraph table */
    uint32_t n_values;          /* tensors and shapes, over all blocks */
    uint32_t n_names;           /* names the blocks and their operators give */
    uint32_t n_slots;           /* the name table tosa_index needs: a power of two, at
                                   least twice the values of the largest block */
} tosa_summary;

/* One value (a TosaTensor or a TosaShape), by value id. */
typedef struct tosa_value {
    uint64_t table;             /* payload offset of its table */
    uint64_t data;              /* payload offset of its data bytes (when constant) */
    uint64_t nbytes;            /* the constant's bytes: its shape times its element size,
                                   or all the data where that is undefined; 0 when not
                                   constant */
    uint32_t block;             /* its block, counted over the regions */
    uint8_t is_shape;           /* a TosaShape (else a TosaTensor) */
    uint8_t constant;           /* its data holds bytes */
    uint8_t shaped;             /* a constant whose bytes are its shape times its element
                                   size (a shape's, always); 0: extent undefined */
} tosa_value;

/* Verifies the payload buf[0, len) by the schema and counts its values and names. */
int tosa_open(const uint8_t *buf, size_t len, const fb_options *opt, tosa_summary *s,
              fb_error *err);
/* For a payload tosa_open accepted, checks the graph's meaning (every name a block or an
 * operator gives is a tensor or shape of its block, no name twice in a block, each
 * constant's data at least its shape times its element size) and fills values[s->n_values] and
 * names[s->n_names]: the value id of each name, block by block, a block's inputs, its
 * outputs, then each operator's inputs and outputs. slots[s->n_slots] is scratch. */
int tosa_index(const uint8_t *buf, size_t len, const tosa_summary *s, tosa_value *values,
               uint32_t *names, uint32_t *slots, fb_error *err);

/* --- cdef end --- */

#endif /* TOSA_H */

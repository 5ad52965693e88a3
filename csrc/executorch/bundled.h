/*
 * bundled.h: ExecuTorch bundled programs (.bpte, identifier BP08): a program (.pte)
 * embedded byte for byte, with test inputs and expected outputs per method. The structure
 * is checked by fb_verify_table from the project's schema; bundled.c adds what ExecuTorch's
 * runtime assumes of the test values (every tensor's bytes there for its dtype and sizes,
 * its dim_order a permutation, at most 16 dimensions, each suite naming a method of the
 * embedded program: that one the Python side checks, once the program is open). The
 * embedded program itself is opened as any program (et.h).
 */
#ifndef BUNDLED_H
#define BUNDLED_H

#include "executorch/bundled_status.h"
#include "gen/executorch_bundled.h"

/* --- cdef begin --- */

/* What bp_open finds; positions are absolute byte offsets in the file. */
typedef struct bp_summary {
    uint64_t root;              /* the BundledProgram table */
    uint64_t program;           /* the embedded program: [program, program + program_size) */
    uint64_t program_size;
    uint32_t n_suites;          /* method test suites */
    uint32_t n_cases;           /* test cases, over all suites */
    uint32_t n_tensors;         /* tensor values, over all cases */
    uint32_t reserved;
    uint64_t tables_visited, elements_visited;
} bp_summary;

/* Verifies a .bpte but for its embedded program: the structure by the schema, then the
 * test values. */
int bp_open(const uint8_t *buf, size_t len, const fb_options *opt, bp_summary *s,
            fb_error *err);

/* --- cdef end --- */

#endif /* BUNDLED_H */

/*
 * etdump.h: ExecuTorch ETDump profiles (.etdump, identifier ED00 at byte 8): what the
 * runtime records of its runs (profile, allocation and debug events), a size-prefixed
 * flatbuffer: a u32 size, then the buffer with its root offset and identifier. The
 * structure is checked by fb_verify_table from the project's schema; etdump.c adds what
 * the schema's own words say of the values: an event is exactly one of its three kinds,
 * an allocation names an allocator of its run, a debug value holds the field its type
 * names, and a debug tensor's sizes and strides describe bytes at its offset in the debug
 * buffer (a separate file) of the size given, when one is.
 */
#ifndef ETDUMP_H
#define ETDUMP_H

#include "executorch/etdump_status.h"
#include "gen/executorch_etdump.h"

/* --- cdef begin --- */

/* What ed_open finds; positions are absolute byte offsets in the file. */
typedef struct ed_summary {
    uint64_t root;              /* the ETDump table */
    uint64_t size;              /* the size prefix: the buffer is bytes [4, 4 + size) */
    uint32_t n_runs;            /* RunData entries */
    uint32_t n_events;          /* events, over all runs */
    uint32_t n_profile, n_allocation, n_debug;   /* events by kind */
    uint32_t n_debug_tensors;   /* tensors of debug values (a tensor list's each) */
    uint64_t tables_visited, elements_visited;
} ed_summary;

/* Verifies an ETDump: the structure by the schema, then the meaning. `debug_size` is the
 * size of the debug buffer its tensors point into, or -1 when none is given (their
 * extents are then checked only against their own sizes and strides). */
int ed_open(const uint8_t *buf, size_t len, int64_t debug_size, const fb_options *opt,
            ed_summary *s, fb_error *err);

/* --- cdef end --- */

#endif /* ETDUMP_H */

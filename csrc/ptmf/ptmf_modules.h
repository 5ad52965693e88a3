/*
 * ptmf_modules.h: what a PTMF file says about its modules, read in bulk for the
 * state_dict walk: each class's __parameters__ and __buffers__ lists as the
 * TorchScript sources of the file print them, and which object types they make
 * modules of. The types themselves come from ptmf_read_object_types (ptmf.h).
 */
#ifndef PTMF_MODULES_H
#define PTMF_MODULES_H

#include "ptmf/ptmf.h"

/* --- cdef begin --- */

/* A class of the jit sources: the line "class NAME...:" starting at the beginning of
 * a line of source `source` (its qualified name is that source's name, ".", NAME) and
 * its declaration block: the lines after its header up to the first that is not
 * indented by two spaces or that starts a method ("  def "). */
typedef struct ptmf_class {
    ptmf_span source_name;   /* the jit_sources entry's name */
    ptmf_span name;
    ptmf_span block;
    uint64_t first_listed;   /* listed[first_listed, + n_parameters): __parameters__, */
    uint32_t n_parameters;   /* then n_buffers names of __buffers__, each in the */
    uint32_t n_buffers;      /* order of its lines and of the names in them */
    uint32_t is_module;      /* it has a __parameters__ or __buffers__ line */
    uint32_t source;
} ptmf_class;

/* Every class of the file's jit sources (summary s, from ptmf_open), in source order:
 * classes[max_classes] and the names listed by their __parameters__ and __buffers__
 * lines into listed[max_listed]. *n_classes and *n_listed are set to the totals; an
 * array is written only when it holds its total. A list line is
 * "  __parameters__ = [...]" (or __buffers__), with any spaces around "=" and after
 * "]"; its names are the double-quoted strings without backslash inside. */
int ptmf_scan_classes(const uint8_t *buf, size_t len, const ptmf_summary *s,
                      ptmf_class *classes, uint32_t max_classes, uint32_t *n_classes,
                      ptmf_span *listed, uint64_t max_listed, uint64_t *n_listed,
                      fb_error *err);

/* Per object type, what the state_dict walk needs (ptmf_walk_types): class_of_type[t],
 * the last class whose qualified name is the type's name (UINT32_MAX: none); module[t]
 * (1: a class_with_field whose class is a module, 2: another kind whose class is a
 * module, 0: not a module); and for the attributes of module types role[a] (1: listed
 * by __parameters__, 2: by __buffers__ and not __parameters__, 0: neither; 0 for every
 * attribute of other types). scratch[2 * (n_classes + n_listed)] is working space:
 * names are sorted (by hash, then bytes), so that the work is O(n log n) in names
 * compared whatever the input. */
int ptmf_module_types(const uint8_t *buf, size_t len, const ptmf_class *classes,
                      uint32_t n_classes, const ptmf_span *listed, uint64_t n_listed,
                      const ptmf_object_type *types, uint32_t n_types,
                      const ptmf_span *attrs, uint64_t n_attrs, uint64_t *scratch,
                      uint32_t *class_of_type, uint8_t *module, uint8_t *role,
                      fb_error *err);

/* The dotted key of each step of a module walk (ptmf_walk_modules) but the first: its
 * module's key, ".", its name (names[step.name]). The first step, the walk's root, has
 * the empty key: its own steps' keys are their names. Key s is
 * keys[key_end[s - 1], key_end[s]); key_end[n_steps]. *n_bytes is set to the keys'
 * total; keys is written only when max_keys holds it. */
int ptmf_walk_keys(const uint8_t *buf, size_t len, const ptmf_walk_step *steps,
                   uint64_t n_steps, const ptmf_span *names, uint64_t n_names, uint8_t *keys,
                   uint64_t max_keys, uint64_t *key_end, uint64_t *n_bytes, fb_error *err);

/* --- cdef end --- */

#endif /* PTMF_MODULES_H */

/*
 * ptmf_walk.c: what the Python side asks of an indexed file beyond the index: the
 * byte ranges to read ahead (ptmf_payload_runs) and the state_dict module walk
 * (ptmf_walk_modules) with the dotted keys of its steps (ptmf_walk_keys).
 */
#include "fb/fb.h"
#include "ptmf/ptmf_modules.h"
#include "ptmf/ptmf_schema.h"

static uint32_t add_run(uint64_t start, uint64_t end, uint64_t page, uint64_t *runs,
                        uint32_t k) {
    start = start / page * page + (start % page ? page : 0);
    end = end / page * page;
    if (end <= start) return k;
    runs[2 * (uint64_t)k] = start;
    runs[2 * (uint64_t)k + 1] = end;
    return k + 1;
}

/* Sifts order[i] down the max-heap order[0..n) keyed by storage position. */
static void sift_down(const ptmf_storage *storages, uint32_t *order, uint32_t i, uint32_t n) {
    for (;;) {
        uint64_t l = 2 * (uint64_t)i + 1, r = l + 1;   /* no wrap past 2^32 entries */
        uint32_t top = i, t;
        if (l < n && storages[order[l]].pos > storages[order[top]].pos) top = (uint32_t)l;
        if (r < n && storages[order[r]].pos > storages[order[top]].pos) top = (uint32_t)r;
        if (top == i) return;
        t = order[i];
        order[i] = order[top];
        order[top] = t;
        i = top;
    }
}

uint32_t ptmf_payload_runs(const ptmf_storage *storages, uint32_t n, uint64_t page,
                           uint64_t gap, uint32_t *order, uint64_t *runs) {
    uint64_t start = 0, end = 0;
    uint32_t i, m = 0, k = 0;
    int open_run = 0;
    if (page == 0) return 0;
    for (i = 0; i < n; i++)   /* the payloads that can hold a whole page */
        if (storages[i].size >= page && storages[i].pos <= UINT64_MAX - page - storages[i].size)
            order[m++] = i;
    for (i = m / 2; i-- > 0;)   /* heap sort by position: O(m log m), no allocation */
        sift_down(storages, order, i, m);
    for (i = m; i-- > 1;) {
        uint32_t t = order[0];
        order[0] = order[i];
        order[i] = t;
        sift_down(storages, order, 0, i);
    }
    for (i = 0; i < m; i++) {
        const ptmf_storage *st = &storages[order[i]];
        if (open_run && st->pos >= end && st->pos - end >= gap) {
            k = add_run(start, end, page, runs, k);
            open_run = 0;
        }
        if (!open_run) {
            start = st->pos;
            end = st->pos + st->size;
            open_run = 1;
        } else if (st->pos + st->size > end) {
            end = st->pos + st->size;
        }
    }
    return open_run ? add_run(start, end, page, runs, k) : k;
}


/* ---------------------------------------------------------- module walk */

/* Appends a step; the caller sized `steps` for every attribute the budget admits. */
static int walk_emit(fb_ctx *c, ptmf_walk_step *steps, uint64_t max_steps, uint64_t *n,
                     ptmf_walk_step step, uint64_t where) {
    if (*n >= max_steps) return fb_fail(c, FB_E_ELEMENT_BUDGET, where);
    steps[(*n)++] = step;
    return FB_OK;
}

/* The attributes of field object `i` that the walk takes, in state_dict order:
 * parameters and buffers as steps, then submodules onto `stack`, so that they come
 * off it in slot order. */
static int walk_object(fb_ctx *c, const ptmf_ivalue *ivalues, const ptmf_walk_types *types,
                       uint32_t i, uint32_t self, ptmf_walk_step *steps,
                       uint64_t max_steps, uint64_t *n, ptmf_walk_step *stack,
                       uint64_t *sp) {
    const ptmf_ivalue *r = &ivalues[i];
    uint32_t t = r->type_index, count = r->length, slot, pass;
    uint64_t first_child = *sp, last;
    if (t >= types->n_types) return fb_fail(c, PTMF_E_BAD_TYPE_INDEX, r->pos);
    if (types->slot_count[t] > types->n_names
        || types->slot_base[t] > types->n_names - types->slot_count[t])
        return fb_fail(c, FB_E_BAD_ARGUMENT, r->pos);
    if (count > types->slot_count[t]) count = types->slot_count[t];
    if (!fb_in_bounds(c, r->data, (uint64_t)r->length * 4))
        return fb_fail(c, FB_E_OUT_OF_BOUNDS, r->data);
    for (pass = 1; pass <= 3; pass++) {
        for (slot = 0; slot < count; slot++) {
            uint64_t where = r->data + 4 * (uint64_t)slot;
            uint32_t j = fb_ld32(c->buf + where), name = types->slot_base[t] + slot;
            const ptmf_ivalue *attr;
            ptmf_walk_step step;
            if (j >= i)
                return fb_at_field(c, &mobile_object[MOBILE_OBJECT_ATTRS], slot,
                                fb_at_member(c, &mobile_i_value[MOBILE_I_VALUE_VAL],
                                          &mobile_i_value_union[UT_OBJECT],
                                          fb_fail(c, PTMF_E_FORWARD_REFERENCE, where)));
            attr = &ivalues[j];
            step.parent = self;
            step.name = name;
            if (pass < 3) {
                if (attr->type != UT_TENSOR || types->role[name] != pass) continue;
                step.target = attr->target;
                step.kind = pass;
                FB_TRY(walk_emit(c, steps, max_steps, n, step, where));
            } else {
                if (attr->type != UT_OBJECT) continue;
                if (attr->type_index >= types->n_types)
                    return fb_fail(c, PTMF_E_BAD_TYPE_INDEX, attr->pos);
                if (!types->module[attr->type_index]) continue;
                step.target = j;
                step.kind = types->module[attr->type_index] == 1 ? PTMF_WALK_MODULE
                                                             : PTMF_WALK_OTHER_MODULE;
                FB_TRY(walk_emit(c, stack, max_steps, sp, step, where));
            }
        }
    }
    /* Reversed, so that the submodules come off the stack in slot order. */
    for (last = *sp; first_child + 1 < last; first_child++, last--) {
        ptmf_walk_step tmp = stack[first_child];
        stack[first_child] = stack[last - 1];
        stack[last - 1] = tmp;
    }
    return FB_OK;
}

int ptmf_walk_modules(const uint8_t *buf, size_t len, const ptmf_ivalue *ivalues,
                      uint32_t n_ivalues, const ptmf_walk_types *types, uint32_t root,
                      ptmf_walk_step *steps, ptmf_walk_step *stack, uint64_t max_steps,
                      uint64_t *budget, uint64_t *n_steps, fb_error *err) {
    fb_ctx c;
    uint64_t n = 0, sp = 0;
    ptmf_walk_step first;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    *n_steps = 0;
    if (max_steps > UINT32_MAX) max_steps = UINT32_MAX;   /* steps are numbered in 32 bits */
    if (root >= n_ivalues || ivalues[root].type != UT_OBJECT || max_steps == 0)
        return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
    first.parent = UINT32_MAX;
    first.name = UINT32_MAX;
    first.target = root;
    first.kind = PTMF_WALK_MODULE;
    stack[sp++] = first;
    while (sp) {
        ptmf_walk_step step = stack[--sp];
        const ptmf_ivalue *r = &ivalues[step.target];
        uint64_t self = n;
        fb_push(&c, "ivalues", step.target);
        FB_TRY(walk_emit(&c, steps, max_steps, &n, step, r->pos));
        if (step.kind != PTMF_WALK_MODULE) {
            fb_pop(&c);
            continue;
        }
        if (*budget < 1 + (uint64_t)r->length) return fb_fail(&c, FB_E_ELEMENT_BUDGET, r->pos);
        *budget -= 1 + (uint64_t)r->length;
        FB_TRY(walk_object(&c, ivalues, types, step.target, (uint32_t)self, steps, max_steps,
                        &n, stack, &sp));
        fb_pop(&c);
    }
    *n_steps = n;
    return FB_OK;
}

int ptmf_walk_keys(const uint8_t *buf, size_t len, const ptmf_walk_step *steps,
                   uint64_t n_steps, const ptmf_span *names, uint64_t n_names, uint8_t *keys,
                   uint64_t max_keys, uint64_t *key_end, uint64_t *n_bytes, fb_error *err) {
    fb_ctx c;
    uint64_t s, total = 0;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    *n_bytes = 0;
    if (n_steps == 0) return FB_OK;
    key_end[0] = 0;   /* the walk's root: the empty key */
    for (s = 1; s < n_steps; s++) {
        const ptmf_walk_step *st = &steps[s];
        uint64_t size;
        if (st->parent >= s || st->name >= n_names || names[st->name].pos > c.len
            || names[st->name].len > c.len - names[st->name].pos)
            return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
        /* A key is its parent's, a dot and a name, each under the total so far. */
        size = names[st->name].len;
        if (st->parent) size += key_end[st->parent] - key_end[st->parent - 1] + 1;
        if (size > UINT64_MAX - total) return fb_fail(&c, FB_E_ELEMENT_BUDGET, 0);
        total += size;
        key_end[s] = total;
    }
    *n_bytes = total;
    if (max_keys < total) return FB_OK;
    for (s = 1; s < n_steps; s++) {
        const ptmf_walk_step *st = &steps[s];
        uint8_t *out = keys + key_end[s - 1];
        if (st->parent) {
            uint64_t start = key_end[st->parent - 1], size = key_end[st->parent] - start;
            memcpy(out, keys + start, (size_t)size);
            out[size] = '.';
            out += size + 1;
        }
        memcpy(out, buf + names[st->name].pos, (size_t)names[st->name].len);
    }
    return FB_OK;
}

/*
 * ptmf_modules.c: the classes of a PTMF file's TorchScript sources and the object
 * types they make modules of, for the state_dict walk (ptmf_walk.c). One linear scan
 * of the source bytes finds every class and its __parameters__/__buffers__ lines;
 * sorting (a heap sort: no allocation, O(n log n) whatever the input) then matches
 * type names to classes and attribute names to the listed names.
 */
#include <stdio.h>

#include "fb/fb.h"
#include "ptmf/ptmf_modules.h"

/* ---------------------------------------------------------- the sources */

/* Whitespace inside a line: ASCII's, as TorchScript's printer and Python's \s see it. */
static int is_space(uint8_t b) {
    return b == ' ' || b == '\t' || b == '\r' || b == '\f' || b == '\v'
           || (b >= 0x1c && b <= 0x1f);
}

/* Where the line holding p[i] ends: its '\n', or n. */
static uint64_t line_end(const uint8_t *p, uint64_t i, uint64_t n) {
    const uint8_t *q = i < n ? memchr(p + i, '\n', (size_t)(n - i)) : NULL;
    return q ? (uint64_t)(q - p) : n;
}

static int starts_with(const uint8_t *p, uint64_t i, uint64_t n, const char *lit) {
    size_t k = strlen(lit);
    return i <= n && n - i >= k && memcmp(p + i, lit, k) == 0;
}

/* The start of the first line after the one holding p[i] that starts with `lit`, or n. */
static uint64_t next_line(const uint8_t *p, uint64_t i, uint64_t n, const char *lit) {
    for (i = line_end(p, i, n); i < n; i = line_end(p, i + 1, n))
        if (starts_with(p, i + 1, n, lit)) return i + 1;
    return n;
}

/* The end of a declaration block whose header line ends at p[i] (a '\n' or n): the
 * first '\n' that is not followed by two spaces, or that is followed by "  def ". */
static uint64_t block_end(const uint8_t *p, uint64_t i, uint64_t n) {
    for (; i < n; i = line_end(p, i + 1, n))
        if (!starts_with(p, i + 1, n, "  ") || starts_with(p, i + 1, n, "  def ")) return i;
    return n;
}

typedef struct sink {
    ptmf_span *out;
    uint64_t max, n;
} sink;

static void emit(sink *k, uint64_t pos, uint64_t len) {
    if (k->n < k->max) {
        k->out[k->n].pos = pos;
        k->out[k->n].len = len;
    }
    k->n++;
}

/* Whether p[i, end of line) is `line` (two spaces and a list's name) then " = [...]"
 * (spaces allowed around "=" and after "]"); if so its names go to k: each "..."
 * without a backslash inside, at file position base + its offset. */
static int list_line(const uint8_t *p, uint64_t i, uint64_t end, const char *line,
                     uint64_t base, sink *k) {
    uint64_t e = line_end(p, i, end), j = i + strlen(line), last;
    while (j < e && is_space(p[j])) j++;
    if (j >= e || p[j] != '=') return 0;
    for (j++; j < e && is_space(p[j]);) j++;
    if (j >= e || p[j] != '[') return 0;
    for (last = e; last > j + 1 && is_space(p[last - 1]);) last--;
    if (last <= j + 1 || p[last - 1] != ']') return 0;
    while (j < last) {
        uint64_t m = j + 1;
        if (p[j] != '"') {
            j++;
            continue;
        }
        while (m < last && p[m] != '"' && p[m] != '\\') m++;
        if (m < last && p[m] == '"') {
            emit(k, base + j + 1, m - j - 1);
            j = m + 1;
        } else {
            j++;
        }
    }
    return 1;
}

/* Appends the names of every `list` line of block [start, end) to k (`line` is the
 * line's start: two spaces and the list's name); returns how many, and sets *found
 * when there is at least one such line. */
static uint32_t list_names(const uint8_t *p, uint64_t start, uint64_t end, const char *line,
                           uint64_t base, sink *k, uint32_t *found) {
    uint64_t q, before = k->n;
    for (q = start; q < end; q = line_end(p, q + 1, end))
        if (starts_with(p, q + 1, end, line) && list_line(p, q + 1, end, line, base, k))
            *found = 1;
    return (uint32_t)(k->n - before);
}

/* Every class of source text p[0, n) (at file position base) into classes. */
static void scan_source(const uint8_t *p, uint64_t n, uint64_t base, ptmf_span source_name,
                        uint32_t source, ptmf_class *classes, uint32_t max_classes,
                        uint32_t *n_classes, sink *listed) {
    uint64_t i = starts_with(p, 0, n, "class ") ? 0 : next_line(p, 0, n, "class ");
    for (; i < n; i = next_line(p, i, n, "class ")) {
        uint64_t j = i + 6, k = j, e, t, end;
        ptmf_class c;
        while (k < n && !is_space(p[k]) && p[k] != '\n' && p[k] != '(' && p[k] != ':') k++;
        if (k == j) continue;
        e = line_end(p, k, n);
        for (t = e; t > i && is_space(p[t - 1]);) t--;
        if (p[t - 1] != ':') continue;
        end = block_end(p, e, n);
        memset(&c, 0, sizeof c);
        c.source_name = source_name;
        c.source = source;
        c.name.pos = base + j;
        c.name.len = k - j;
        c.block.pos = base + e;
        c.block.len = end - e;
        c.first_listed = listed->n;
        c.n_parameters = list_names(p, e, end, "  __parameters__", base, listed, &c.is_module);
        c.n_buffers = list_names(p, e, end, "  __buffers__", base, listed, &c.is_module);
        if (*n_classes < max_classes) classes[*n_classes] = c;
        (*n_classes)++;
    }
}

/* Copies a failure of a reader that had its own context, under `name[i]`. */
static int fail_under(fb_error *err, const fb_error *sub, int code, const char *name,
                      uint32_t i) {
    if (err) {
        err->code = code;
        err->offset = sub->offset;
        /* a path too long for err->path is cut short */
        if (snprintf(err->path, sizeof err->path, "%s[%u]%s", name, i, sub->path) < 0)
            err->path[0] = '\0';
    }
    return code;
}

int ptmf_scan_classes(const uint8_t *buf, size_t len, const ptmf_summary *s,
                      ptmf_class *classes, uint32_t max_classes, uint32_t *n_classes,
                      ptmf_span *listed, uint64_t max_listed, uint64_t *n_listed,
                      fb_error *err) {
    sink names = {listed, max_listed, 0};
    uint32_t i;
    *n_classes = 0;
    *n_listed = 0;
    for (i = 0; i < s->n_jit_sources; i++) {
        ptmf_record r;
        fb_error sub;
        ptmf_span name;
        int rc = ptmf_read_extra_file(buf, len, s->jit_sources, s->n_jit_sources, i, &r, &sub);
        if (rc != FB_OK) return fail_under(err, &sub, rc, "jit_sources", i);
        name.pos = r.s0;
        name.len = r.s0_len;
        /* A class has at most one per 7 bytes ("class X"), so these counts fit. */
        scan_source(buf + r.s1, r.s1_len, r.s1, name, i, classes, max_classes, n_classes,
                    &names);
    }
    *n_listed = names.n;
    if (err) err->code = FB_OK;
    return FB_OK;
}

/* -------------------------------------------------------- matching names */

/* A name as up to three pieces of bytes: a type name, or a class's qualified name
 * (source name, ".", class name). */
typedef struct key {
    const uint8_t *part[3];
    uint64_t len[3];
} key;

static key span_key(const uint8_t *buf, ptmf_span s) {
    key k;
    memset(&k, 0, sizeof k);
    k.part[0] = buf + s.pos;
    k.len[0] = s.len;
    return k;
}

static key class_key(const uint8_t *buf, const ptmf_class *c) {
    key k;
    k.part[0] = buf + c->source_name.pos;
    k.len[0] = c->source_name.len;
    k.part[1] = (const uint8_t *)".";
    k.len[1] = 1;
    k.part[2] = buf + c->name.pos;
    k.len[2] = c->name.len;
    return k;
}

/* memcmp order of the two names' bytes. */
static int key_cmp(const key *a, const key *b) {
    int i = 0, j = 0;
    uint64_t x = 0, y = 0;
    for (;;) {
        uint64_t n;
        int r;
        while (i < 3 && x == a->len[i]) i++, x = 0;
        while (j < 3 && y == b->len[j]) j++, y = 0;
        if (i == 3 || j == 3) return (j == 3) - (i == 3);
        n = a->len[i] - x < b->len[j] - y ? a->len[i] - x : b->len[j] - y;
        r = memcmp(a->part[i] + x, b->part[j] + y, (size_t)n);
        if (r) return r < 0 ? -1 : 1;
        x += n;
        y += n;
    }
}

/* FNV-1a of the name's bytes: names are ordered by it first, so that most comparisons
 * are of two integers; equal hashes fall back to the bytes. */
static uint64_t key_hash(const key *k) {
    uint64_t h = UINT64_C(0xcbf29ce484222325), j;
    int i;
    for (i = 0; i < 3; i++)
        for (j = 0; j < k->len[i]; j++) h = (h ^ k->part[i][j]) * UINT64_C(0x100000001b3);
    return h;
}

/* Names to sort: classes by qualified name, or spans by their bytes; hash[i] is the
 * key_hash of element i. */
typedef struct order_env {
    const uint8_t *buf;
    const ptmf_class *classes;
    const ptmf_span *spans;
    uint64_t *hash;
} order_env;

static key element_key(const order_env *env, uint64_t i) {
    return env->classes ? class_key(env->buf, &env->classes[i]) : span_key(env->buf, env->spans[i]);
}

/* Name (k, with hash h) against element i: by hash, then bytes. */
static int element_cmp(const order_env *env, const key *k, uint64_t h, uint64_t i) {
    key ki;
    if (h != env->hash[i]) return h < env->hash[i] ? -1 : 1;
    ki = element_key(env, i);
    return key_cmp(k, &ki);
}

/* Element a before b: by hash, then name, then index (a total, stable order). */
static int less(const order_env *env, uint64_t a, uint64_t b) {
    key ka = element_key(env, a);
    int r = element_cmp(env, &ka, env->hash[a], b);
    return r < 0 || (r == 0 && a < b);
}

static void sift_down(uint64_t *v, uint64_t root, uint64_t n, const order_env *env) {
    for (;;) {
        uint64_t child = 2 * root + 1, tmp;
        if (child >= n) return;
        if (child + 1 < n && less(env, v[child], v[child + 1])) child++;
        if (!less(env, v[root], v[child])) return;
        tmp = v[root];
        v[root] = v[child];
        v[child] = tmp;
        root = child;
    }
}

static void heap_sort(uint64_t *v, uint64_t n, const order_env *env) {
    uint64_t i, tmp;
    for (i = n / 2; i-- > 0;) sift_down(v, i, n, env);
    for (i = n; i-- > 1;) {
        tmp = v[0];
        v[0] = v[i];
        v[i] = tmp;
        sift_down(v, 0, i, env);
    }
}

/* The last element of v[0, n) (sorted by env) whose name is k (hash h), or n. */
static uint64_t find_last(const uint64_t *v, uint64_t n, const key *k, uint64_t h,
                          const order_env *env) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (element_cmp(env, k, h, v[mid]) < 0) hi = mid;
        else lo = mid + 1;
    }
    return lo > 0 && element_cmp(env, k, h, v[lo - 1]) == 0 ? lo - 1 : n;
}

static int span_ok(size_t len, ptmf_span s) {
    return s.pos <= len && s.len <= len - s.pos;
}

int ptmf_module_types(const uint8_t *buf, size_t len, const ptmf_class *classes,
                      uint32_t n_classes, const ptmf_span *listed, uint64_t n_listed,
                      const ptmf_object_type *types, uint32_t n_types,
                      const ptmf_span *attrs, uint64_t n_attrs, uint64_t *scratch,
                      uint32_t *class_of_type, uint8_t *module, uint8_t *role,
                      fb_error *err) {
    fb_ctx c;
    uint64_t *class_order = scratch, *listed_order = scratch + 2 * (uint64_t)n_classes;
    order_env by_class = {buf, classes, NULL, scratch + n_classes};
    order_env by_name = {buf, NULL, listed, listed_order + n_listed};
    uint64_t i, a;
    uint32_t t;
    fb_ctx_init(&c, buf, len, NULL, NULL, err);
    for (i = 0; i < n_classes; i++) {
        const ptmf_class *k = &classes[i];
        key name;
        if (!span_ok(len, k->source_name) || !span_ok(len, k->name)
            || k->first_listed > n_listed
            || (uint64_t)k->n_parameters + k->n_buffers > n_listed - k->first_listed)
            return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
        name = class_key(buf, k);
        class_order[i] = i;
        by_class.hash[i] = key_hash(&name);
    }
    for (i = 0; i < n_listed; i++) {
        key name;
        if (!span_ok(len, listed[i])) return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
        name = span_key(buf, listed[i]);
        listed_order[i] = i;
        by_name.hash[i] = key_hash(&name);
    }
    for (a = 0; a < n_attrs; a++) {
        if (!span_ok(len, attrs[a])) return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
        role[a] = 0;
    }
    heap_sort(class_order, n_classes, &by_class);
    for (i = 0; i < n_classes; i++) {
        const ptmf_class *k = &classes[i];
        heap_sort(listed_order + k->first_listed, k->n_parameters, &by_name);
        heap_sort(listed_order + k->first_listed + k->n_parameters, k->n_buffers, &by_name);
    }
    for (t = 0; t < n_types; t++) {
        const ptmf_object_type *ty = &types[t];
        key name;
        uint64_t at;
        const ptmf_class *k;
        const uint64_t *params, *buffers;
        class_of_type[t] = UINT32_MAX;
        module[t] = 0;
        if (!span_ok(len, ty->name) || ty->first_attr > n_attrs
            || ty->n_attrs > n_attrs - ty->first_attr)
            return fb_fail(&c, FB_E_BAD_ARGUMENT, 0);
        name = span_key(buf, ty->name);
        at = find_last(class_order, n_classes, &name, key_hash(&name), &by_class);
        if (at == n_classes) continue;
        class_of_type[t] = (uint32_t)class_order[at];
        k = &classes[class_order[at]];
        if (!k->is_module) continue;
        module[t] = ty->kind == MOBILE_TYPE_TYPE_CLASS_WITH_FIELD ? 1 : 2;
        params = listed_order + k->first_listed;
        buffers = params + k->n_parameters;
        for (a = ty->first_attr; a < ty->first_attr + ty->n_attrs; a++) {
            key attr = span_key(buf, attrs[a]);
            uint64_t h = key_hash(&attr);
            role[a] = find_last(params, k->n_parameters, &attr, h, &by_name) < k->n_parameters
                          ? PTMF_WALK_PARAMETER
                      : find_last(buffers, k->n_buffers, &attr, h, &by_name) < k->n_buffers
                          ? PTMF_WALK_BUFFER : 0;
        }
    }
    return FB_OK;
}

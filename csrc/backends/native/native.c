/*
 * native.c: what an ExecuTorch native backend payload means, on top of the generic layer.
 *
 * Facts (ExecuTorch 1.5.1: backends/native/preprocess.py writes the payload,
 * serialization/graph_serialize.py its flatbuffer and validate_graph / validate_method
 * the rules a graph keeps): the payload is the flatbuffer alone, identifier NPTG at byte
 * 4, root Program; a delegate's payload holds one method ("forward"), whose graph is
 * read. Values are named, not numbered: a graph's inputs, the method's constants
 * (NamedTensorRef) and mutable buffers are defined first, then each node other than a
 * placeholder defines its outputs (each element of a TENSOR_LIST output a value of its
 * own), in node order; a placeholder restates an input, constant or buffer. A name is
 * defined once, and every reference (a TensorArg, a tensor list's names, an optional
 * tensor list's present names, an int, float or bool argument's or an int list's refs,
 * an output's alias_of, the graph's outputs, tensor_values, output_specs) names a value
 * defined before the node that uses it; an argument's empty name references nothing (as
 * validate_graph takes it), a graph output's must resolve. A constant's bytes are the named data its
 * data_key names, its TensorMeta's dims (static: min == max) times its dtype's size, or,
 * quantized, what the named data holds. Subgraphs (GraphArg, a torch.cond's branches)
 * have names of their own: the schema's verifier checks them, their names are not
 * resolved here.
 */
#include "backends/native/native.h"

#include "fb/fb.h"

FB_STATUS_BLOCK(nat_statuses, NAT);

typedef struct walk {
    fb_ctx c;
    const nat_summary *s;
    nat_value *values;             /* by value id */
    uint32_t *order;               /* value ids by name */
    uint32_t n;                    /* values defined so far */
} walk;

/* Bytes an element of ScalarType `type` takes, 0 for one the schema does not have. */
static unsigned element_size(int type) {
    switch (type) {
    case NATIVE_SCALAR_TYPE_BYTE: case NATIVE_SCALAR_TYPE_CHAR: case NATIVE_SCALAR_TYPE_BOOL:
        return 1;
    case NATIVE_SCALAR_TYPE_SHORT: case NATIVE_SCALAR_TYPE_HALF:
    case NATIVE_SCALAR_TYPE_BFLOAT16: case NATIVE_SCALAR_TYPE_UINT16:
        return 2;
    case NATIVE_SCALAR_TYPE_INT: case NATIVE_SCALAR_TYPE_FLOAT: case NATIVE_SCALAR_TYPE_UINT32:
        return 4;
    case NATIVE_SCALAR_TYPE_LONG: case NATIVE_SCALAR_TYPE_DOUBLE: case NATIVE_SCALAR_TYPE_UINT64:
        return 8;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- names */

static int name_cmp(const walk *w, uint64_t a, uint32_t a_len, uint64_t b, uint32_t b_len) {
    uint32_t n = a_len < b_len ? a_len : b_len;
    int r = n ? memcmp(w->c.buf + a, w->c.buf + b, n) : 0;
    if (r) return r;
    return a_len < b_len ? -1 : a_len > b_len;
}

static int value_cmp(const walk *w, uint32_t a, uint32_t b) {
    const nat_value *x = &w->values[a], *y = &w->values[b];
    return name_cmp(w, x->name, x->name_len, y->name, y->name_len);
}

/* Restores the heap below `root` in order[0, n) (the largest name at its top). */
static void sift(walk *w, uint32_t root, uint32_t n) {
    uint32_t *o = w->order;
    for (;;) {
        uint64_t child = 2 * (uint64_t)root + 1;
        uint32_t top = root, t;
        if (child < n && value_cmp(w, o[child], o[top]) > 0) top = (uint32_t)child;
        if (child + 1 < n && value_cmp(w, o[child + 1], o[top]) > 0) top = (uint32_t)(child + 1);
        if (top == root) return;
        t = o[root];
        o[root] = o[top];
        o[top] = t;
        root = top;
    }
}

/* Sorts order[0, n) by the values' names (heapsort: no allocation, n log n). */
static void sort_names(walk *w) {
    uint32_t n = w->n, i, t;
    for (i = 0; i < n; i++) w->order[i] = i;
    for (i = n / 2; i > 0; i--) sift(w, i - 1, n);
    for (i = n; i > 1; i--) {
        t = w->order[0];
        w->order[0] = w->order[i - 1];
        w->order[i - 1] = t;
        sift(w, 0, i - 1);
    }
}

/* The id of the value named by string s, defined before node `before` (a node index;
 * INT32_MAX for the graph's outputs and the method's bindings); fails at s otherwise. */
static int resolve(walk *w, const fb_vec *s, int32_t before, uint32_t *id) {
    uint32_t lo = 0, hi = w->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const nat_value *v = &w->values[w->order[mid]];
        int r = name_cmp(w, s->data, s->count, v->name, v->name_len);
        if (r == 0) {
            if (v->node >= before) break;
            *id = w->order[mid];
            return FB_OK;
        }
        if (r < 0) hi = mid;
        else lo = mid + 1;
    }
    return fb_fail(&w->c, NAT_E_BAD_REFERENCE, s->data - 4);
}

/* Element i of vector-of-strings v. */
static int string_at(walk *w, const fb_vec *v, uint32_t i, fb_vec *s) {
    uint64_t pos;
    FB_TRY(fb_vec_ref(&w->c, v, i, &pos));
    return fb_str_at(&w->c, pos, s);
}

/* Each name of the string vector field f of t resolves (empty ones skipped when
 * `skip_empty`; only those whose has_value flag is set when `present` is given). */
static int resolve_names(walk *w, const fb_tbl *t, const fb_field *f, int32_t before,
                         int skip_empty, const fb_vec *present) {
    fb_vec names, s;
    uint32_t i, id;
    FB_TRY(fb_fld_vec_at(&w->c, t, f, &names));
    if (present && present->count != names.count)
        return fb_fail_at(&w->c, f, FB_NO_INDEX, NAT_E_BAD_REFERENCE, t->pos);
    for (i = 0; i < names.count; i++) {
        if (present && !w->c.buf[present->data + i]) continue;
        FB_TRY_IN_FIELD(&w->c, f, i, string_at(w, &names, i, &s));
        if (skip_empty && s.count == 0) continue;
        FB_TRY_IN_FIELD(&w->c, f, i, resolve(w, &s, before, &id));
    }
    return FB_OK;
}

/* The string field f of t, if not empty, resolves. */
static int resolve_field(walk *w, const fb_tbl *t, const fb_field *f, int32_t before) {
    fb_vec s;
    uint32_t id;
    FB_TRY(fb_fld_str_at(&w->c, t, f, &s));
    if (s.count == 0) return FB_OK;
    return fb_at_field(&w->c, f, FB_NO_INDEX, resolve(w, &s, before, &id));
}

/* ---------------------------------------------------------------- definitions */

/* Defines the next value, named by string s. */
static int define(walk *w, const fb_vec *s, uint8_t source, int32_t node, uint8_t kind) {
    nat_value *v;
    if (w->n >= w->s->n_values) return fb_fail(&w->c, FB_E_BAD_ARGUMENT, s->data);
    v = &w->values[w->n++];
    memset(v, 0, sizeof *v);
    v->name = s->data;
    v->name_len = s->count;
    v->source = source;
    v->node = node;
    v->kind = kind;
    return FB_OK;
}

/* TensorMeta t: its dtype known; for a constant, its dims static and its bytes (0 when
 * quantized: the named data's length). */
static int tensor_meta(walk *w, const fb_tbl *t, int constant, uint64_t *nbytes) {
    fb_ctx *c = &w->c;
    const fb_field *sizes_f = &native_tensor_meta[NATIVE_TENSOR_META_SIZES];
    uint8_t type;
    uint64_t n;
    unsigned esize;
    int empty = 0;
    fb_vec sizes;
    uint32_t i;
    FB_TRY(fb_fld_u8(c, t, &native_tensor_meta[NATIVE_TENSOR_META_DTYPE], &type));
    esize = element_size((int8_t)type);
    if (!esize) return fb_fail_at(c, &native_tensor_meta[NATIVE_TENSOR_META_DTYPE],
                                  FB_NO_INDEX, FB_E_BAD_SCALAR_TYPE, t->pos);
    if (!constant) return FB_OK;
    if (fb_tbl_has(c, t, NATIVE_TENSOR_META_QUANT)) {
        *nbytes = 0;
        return FB_OK;
    }
    FB_TRY(fb_fld_vec_at(c, t, sizes_f, &sizes));
    n = esize;
    for (i = 0; i < sizes.count; i++) {
        fb_tbl dim;
        uint64_t lo, hi;
        FB_TRY_IN_FIELD(c, sizes_f, i, fb_vec_table(c, &sizes, i, &dim));
        FB_TRY_IN_FIELD(c, sizes_f, i, fb_fld_u64(c, &dim, &native_dim[NATIVE_DIM_MIN], &lo));
        FB_TRY_IN_FIELD(c, sizes_f, i, fb_fld_u64(c, &dim, &native_dim[NATIVE_DIM_MAX], &hi));
        /* a dim is signed; a constant's is static and not negative, and (numpy counts
         * an array's bytes in intptr_t, an empty one's other dims' product too) the
         * product of the non-zero dims fits */
        if (lo != hi || lo > (uint64_t)INT64_MAX || (lo && n > (uint64_t)INT64_MAX / lo))
            return fb_fail_at(c, sizes_f, i, NAT_E_BAD_TENSOR, dim.pos);
        if (lo) n *= lo;
        else empty = 1;
    }
    *nbytes = empty ? 0 : n;
    return FB_OK;
}

/* The method's constant NamedTensorRef t, value `id`. */
static int constant(walk *w, const fb_tbl *t, uint32_t id) {
    fb_ctx *c = &w->c;
    nat_value *v = &w->values[id];
    fb_vec key;
    fb_tbl meta;
    int present;
    FB_TRY(fb_fld_str_at(c, t, &native_named_tensor_ref[NATIVE_NAMED_TENSOR_REF_DATA_KEY], &key));
    FB_TRY(fb_fld_table_at(c, t, &native_named_tensor_ref[NATIVE_NAMED_TENSOR_REF_META], &meta,
                           &present));
    v->key = key.data;
    v->key_len = key.count;
    v->meta = meta.pos;
    FB_TRY_IN_FIELD(c, &native_named_tensor_ref[NATIVE_NAMED_TENSOR_REF_META], FB_NO_INDEX,
                    tensor_meta(w, &meta, 1, &v->nbytes));
    return FB_OK;
}

/* Defines the name field `name_f` of each table of vector field f of t. */
static int define_tables(walk *w, const fb_tbl *t, const fb_field *f, const fb_field *name_f,
                         uint8_t source) {
    fb_vec v, s;
    uint32_t i;
    FB_TRY(fb_fld_vec_at(&w->c, t, f, &v));
    for (i = 0; i < v.count; i++) {
        fb_tbl e;
        FB_TRY_IN_FIELD(&w->c, f, i, fb_vec_table(&w->c, &v, i, &e));
        FB_TRY_IN_FIELD(&w->c, f, i, fb_fld_str_at(&w->c, &e, name_f, &s));
        FB_TRY_IN_FIELD(&w->c, f, i, define(w, &s, source, -1, NATIVE_OUTPUT_VALUE_KIND_TENSOR));
        if (source == NAT_SOURCE_CONSTANT)
            FB_TRY_IN_FIELD(&w->c, f, i, constant(w, &e, w->n - 1));
    }
    return FB_OK;
}

/* Defines the outputs of node i (table t), unless it is a placeholder. */
static int define_outputs(walk *w, const fb_tbl *t, int32_t node) {
    fb_ctx *c = &w->c;
    const fb_field *f = &native_node[NATIVE_NODE_OUTPUTS];
    uint8_t op;
    fb_vec outs, s;
    uint32_t i, j;
    FB_TRY(fb_fld_u8_at(c, t, &native_node[NATIVE_NODE_OP_KIND], &op));
    if (op == NATIVE_OP_KIND_PLACEHOLDER) return FB_OK;
    FB_TRY(fb_fld_vec_at(c, t, f, &outs));
    for (i = 0; i < outs.count; i++) {
        fb_tbl o;
        uint8_t kind;
        FB_TRY_IN_FIELD(c, f, i, fb_vec_table(c, &outs, i, &o));
        FB_TRY_IN_FIELD(c, f, i, fb_fld_u8_at(c, &o, &native_output[NATIVE_OUTPUT_KIND], &kind));
        if (kind == NATIVE_OUTPUT_VALUE_KIND_TENSOR_LIST) {
            const fb_field *names_f = &native_output[NATIVE_OUTPUT_NAMES];
            fb_vec names;
            FB_TRY_IN_FIELD(c, f, i, fb_fld_vec_at(c, &o, names_f, &names));
            for (j = 0; j < names.count; j++) {
                FB_TRY_IN_FIELD(c, f, i, fb_at_field(c, names_f, j, string_at(w, &names, j, &s)));
                FB_TRY_IN_FIELD(c, f, i, fb_at_field(c, names_f, j,
                                define(w, &s, NAT_SOURCE_NODE, node,
                                       NATIVE_OUTPUT_VALUE_KIND_TENSOR)));
            }
        } else {
            FB_TRY_IN_FIELD(c, f, i, fb_fld_str_at(c, &o, &native_output[NATIVE_OUTPUT_NAME], &s));
            FB_TRY_IN_FIELD(c, f, i, define(w, &s, NAT_SOURCE_NODE, node, kind));
        }
    }
    return FB_OK;
}

/* ---------------------------------------------------------------- references */

/* The value references of ArgumentValue member `type` (table a) of node `node`. */
static int argument_refs(walk *w, const fb_tbl *a, uint8_t type, int32_t node) {
    fb_vec present;
    switch (type) {
    case NATIVE_ARGUMENT_VALUE_TENSOR_ARG:
        return resolve_field(w, a, &native_tensor_arg[NATIVE_TENSOR_ARG_NAME], node);
    case NATIVE_ARGUMENT_VALUE_INT_ARG:
        return resolve_field(w, a, &native_int_arg[NATIVE_INT_ARG_REF], node);
    case NATIVE_ARGUMENT_VALUE_FLOAT_ARG:
        return resolve_field(w, a, &native_float_arg[NATIVE_FLOAT_ARG_REF], node);
    case NATIVE_ARGUMENT_VALUE_BOOL_ARG:
        return resolve_field(w, a, &native_bool_arg[NATIVE_BOOL_ARG_REF], node);
    case NATIVE_ARGUMENT_VALUE_TENSOR_LIST_ARG:
        return resolve_names(w, a, &native_tensor_list_arg[NATIVE_TENSOR_LIST_ARG_NAMES], node,
                             1, NULL);
    case NATIVE_ARGUMENT_VALUE_OPTIONAL_TENSOR_LIST_ARG:
        FB_TRY(fb_fld_vec_at(&w->c, a, &native_optional_tensor_list_arg[
                                 NATIVE_OPTIONAL_TENSOR_LIST_ARG_HAS_VALUE], &present));
        return resolve_names(w, a, &native_optional_tensor_list_arg[
                                 NATIVE_OPTIONAL_TENSOR_LIST_ARG_NAMES], node, 1, &present);
    case NATIVE_ARGUMENT_VALUE_INT_LIST_ARG: {
        fb_vec values, refs;
        FB_TRY(fb_fld_vec_at(&w->c, a, &native_int_list_arg[NATIVE_INT_LIST_ARG_VALUES], &values));
        FB_TRY(fb_fld_vec_at(&w->c, a, &native_int_list_arg[NATIVE_INT_LIST_ARG_REFS], &refs));
        if (refs.count && refs.count != values.count)
            return fb_fail_at(&w->c, &native_int_list_arg[NATIVE_INT_LIST_ARG_REFS], FB_NO_INDEX,
                              NAT_E_BAD_REFERENCE, a->pos);
        return resolve_names(w, a, &native_int_list_arg[NATIVE_INT_LIST_ARG_REFS], node, 1,
                             NULL);
    }
    default:
        return FB_OK;   /* literals, and subgraphs (names of their own) */
    }
}

/* The references of NamedArgument na of node `node`. */
static int named_argument_refs(walk *w, const fb_tbl *na, int32_t node) {
    fb_ctx *c = &w->c;
    const fb_field *arg_f = &native_named_argument[NATIVE_NAMED_ARGUMENT_ARG];
    const fb_field *value_f = &native_argument[NATIVE_ARGUMENT_VALUE];
    fb_tbl arg;
    fb_union_value u;
    int present;
    FB_TRY(fb_fld_table_at(c, na, arg_f, &arg, &present));
    FB_TRY_IN_FIELD(c, arg_f, FB_NO_INDEX, fb_at_field(
        c, value_f, FB_NO_INDEX,
        fb_union_open(c, &arg, value_f, &native_schema_file.decls[value_f->ref], &u)));
    if (!u.pos) return FB_OK;   /* NONE */
    fb_push(c, fb_field_segment(c, arg_f), FB_NO_INDEX);
    FB_TRY_IN_MEMBER(c, value_f, u.member, argument_refs(w, &u.table, u.type, node));
    fb_pop(c);
    return FB_OK;
}

/* The references of node i (table t): its arguments, its outputs' aliases, and for a
 * placeholder the input, constant or buffer it restates. */
static int node_refs(walk *w, const fb_tbl *t, int32_t node) {
    fb_ctx *c = &w->c;
    const fb_field *inputs_f = &native_node[NATIVE_NODE_INPUTS];
    const fb_field *outputs_f = &native_node[NATIVE_NODE_OUTPUTS];
    fb_vec args, outs;
    uint8_t op;
    uint32_t i;
    FB_TRY(fb_fld_u8_at(c, t, &native_node[NATIVE_NODE_OP_KIND], &op));
    if (op == NATIVE_OP_KIND_PLACEHOLDER) {
        fb_vec s;
        uint32_t id;
        FB_TRY(fb_fld_str_at(c, t, &native_node[NATIVE_NODE_NAME], &s));
        FB_TRY(fb_at_field(c, &native_node[NATIVE_NODE_NAME], FB_NO_INDEX,
                           resolve(w, &s, 0, &id)));
    }
    FB_TRY(fb_fld_vec_at(c, t, inputs_f, &args));
    for (i = 0; i < args.count; i++) {
        fb_tbl na;
        FB_TRY(fb_at_field(c, inputs_f, i, fb_vec_table(c, &args, i, &na)));
        FB_TRY_IN_FIELD(c, inputs_f, i, named_argument_refs(w, &na, node));
    }
    FB_TRY(fb_fld_vec_at(c, t, outputs_f, &outs));
    for (i = 0; i < outs.count; i++) {
        fb_tbl o;
        FB_TRY(fb_at_field(c, outputs_f, i, fb_vec_table(c, &outs, i, &o)));
        FB_TRY_IN_FIELD(c, outputs_f, i,
                        resolve_field(w, &o, &native_output[NATIVE_OUTPUT_ALIAS_OF], node));
    }
    return FB_OK;
}

/* The TensorMeta field meta_f of table e: its dtype known; `id`'s unless it has one. */
static int value_meta(walk *w, const fb_tbl *e, const fb_field *meta_f, uint32_t id) {
    fb_tbl meta;
    int present;
    FB_TRY(fb_fld_table_at(&w->c, e, meta_f, &meta, &present));
    FB_TRY_IN_FIELD(&w->c, meta_f, FB_NO_INDEX, tensor_meta(w, &meta, 0, NULL));
    if (!w->values[id].meta) w->values[id].meta = meta.pos;
    return FB_OK;
}

/* The name field `name_f` of each table of vector field f of t resolves; with `meta_f`,
 * the value takes the table's TensorMeta (unless it has one) and its dtype is checked. */
static int resolve_tables(walk *w, const fb_tbl *t, const fb_field *f, const fb_field *name_f,
                          const fb_field *meta_f) {
    fb_ctx *c = &w->c;
    fb_vec v, s;
    uint32_t i, id;
    FB_TRY(fb_fld_vec_at(c, t, f, &v));
    for (i = 0; i < v.count; i++) {
        fb_tbl e;
        FB_TRY_IN_FIELD(c, f, i, fb_vec_table(c, &v, i, &e));
        FB_TRY_IN_FIELD(c, f, i, fb_fld_str_at(c, &e, name_f, &s));
        FB_TRY_IN_FIELD(c, f, i, fb_at_field(c, name_f, FB_NO_INDEX,
                                             resolve(w, &s, INT32_MAX, &id)));
        if (meta_f) FB_TRY_IN_FIELD(c, f, i, value_meta(w, &e, meta_f, id));
    }
    return FB_OK;
}

/* ---------------------------------------------------------------- the method */

/* Opens the summary's method and its graph. */
static int method_graph(walk *w, fb_tbl *m, fb_tbl *g) {
    int present;
    FB_TRY(fb_tbl_open(&w->c, w->s->method, m));
    return fb_fld_table_at(&w->c, m, &native_method[NATIVE_METHOD_GRAPH], g, &present);
}

/* Defines the inputs of graph g. */
static int graph_defs(walk *w, const fb_tbl *g) {
    fb_ctx *c = &w->c;
    const fb_field *inputs_f = &native_graph[NATIVE_GRAPH_INPUTS];
    fb_vec inputs, s;
    uint32_t i;
    FB_TRY(fb_fld_vec_at(c, g, inputs_f, &inputs));
    for (i = 0; i < inputs.count; i++) {
        FB_TRY(fb_at_field(c, inputs_f, i, string_at(w, &inputs, i, &s)));
        FB_TRY(fb_at_field(c, inputs_f, i, define(w, &s, NAT_SOURCE_INPUT, -1,
                                                  NATIVE_OUTPUT_VALUE_KIND_TENSOR)));
    }
    return FB_OK;
}

/* fn(w, node, i) of each node i of graph g, located at the node. */
static int each_node(walk *w, const fb_tbl *g, int (*fn)(walk *, const fb_tbl *, int32_t)) {
    fb_ctx *c = &w->c;
    const fb_field *nodes_f = &native_graph[NATIVE_GRAPH_NODES];
    fb_vec nodes;
    uint32_t i;
    FB_TRY(fb_fld_vec_at(c, g, nodes_f, &nodes));
    if (nodes.count > INT32_MAX) return fb_fail_at(c, nodes_f, FB_NO_INDEX, FB_E_BAD_ARGUMENT,
                                                   nodes.data);
    for (i = 0; i < nodes.count; i++) {
        fb_tbl node;
        FB_TRY(fb_at_field(c, nodes_f, i, fb_vec_table(c, &nodes, i, &node)));
        FB_TRY_IN_FIELD(c, nodes_f, i, fn(w, &node, (int32_t)i));
    }
    return FB_OK;
}

/* Defines every value of the method (m, its graph g), in id order: the graph's inputs,
 * the method's constants and mutable buffers, the nodes' outputs. */
static int define_all(walk *w, const fb_tbl *m, const fb_tbl *g) {
    const fb_field *graph_f = &native_method[NATIVE_METHOD_GRAPH];
    FB_TRY_IN_FIELD(&w->c, graph_f, FB_NO_INDEX, graph_defs(w, g));
    FB_TRY(define_tables(w, m, &native_method[NATIVE_METHOD_CONSTANTS],
                         &native_named_tensor_ref[NATIVE_NAMED_TENSOR_REF_NAME],
                         NAT_SOURCE_CONSTANT));
    FB_TRY(define_tables(w, m, &native_method[NATIVE_METHOD_MUTABLE_BUFFERS],
                         &native_mutable_buffer_spec[NATIVE_MUTABLE_BUFFER_SPEC_NAME],
                         NAT_SOURCE_BUFFER));
    FB_TRY_IN_FIELD(&w->c, graph_f, FB_NO_INDEX, each_node(w, g, define_outputs));
    return FB_OK;
}

/* Every reference of graph g resolves: its tensor metadata's names, its nodes', its
 * outputs. */
static int graph_refs(walk *w, const fb_tbl *g) {
    FB_TRY(resolve_tables(w, g, &native_graph[NATIVE_GRAPH_TENSOR_VALUES],
                          &native_tensor_value[NATIVE_TENSOR_VALUE_NAME],
                          &native_tensor_value[NATIVE_TENSOR_VALUE_META]));
    FB_TRY(each_node(w, g, node_refs));
    return resolve_names(w, g, &native_graph[NATIVE_GRAPH_OUTPUTS], INT32_MAX, 0, NULL);
}

/* Every reference of the method (m, its graph g) resolves. */
static int resolve_all(walk *w, const fb_tbl *m, const fb_tbl *g) {
    FB_TRY_IN_FIELD(&w->c, &native_method[NATIVE_METHOD_GRAPH], FB_NO_INDEX, graph_refs(w, g));
    return resolve_tables(w, m, &native_method[NATIVE_METHOD_OUTPUT_SPECS],
                          &native_output_spec[NATIVE_OUTPUT_SPEC_NAME], NULL);
}

/* Each name defined once (order sorted by name: duplicates are neighbours). */
static int unique_names(walk *w) {
    uint32_t i;
    for (i = 1; i < w->n; i++)
        if (value_cmp(w, w->order[i - 1], w->order[i]) == 0) {
            uint32_t later = w->order[i - 1] > w->order[i] ? w->order[i - 1] : w->order[i];
            return fb_fail(&w->c, NAT_E_DUPLICATE_VALUE, w->values[later].name - 4);
        }
    return FB_OK;
}

/* ---------------------------------------------------------------- entry points */

int nat_open(const uint8_t *buf, size_t len, const fb_options *opt, nat_summary *s,
             fb_error *err) {
    walk w;
    fb_ctx *c = &w.c;
    const fb_field *methods_f = &native_program[NATIVE_PROGRAM_METHODS];
    fb_tbl root, m, g;
    fb_vec methods, v;
    uint64_t pos, n = 0;
    uint32_t i;
    int present;
    memset(s, 0, sizeof *s);
    memset(&w, 0, sizeof w);
    fb_ctx_init(c, buf, len, opt, NULL, err);
    if ((uint64_t)len < 8 || fb_ld32(buf + 4) != NATIVE_FILE_IDENTIFIER) {
        fb_push(c, "header", FB_NO_INDEX);   /* located as the flatbuffer's identifier */
        return fb_fail(c, FB_E_BAD_IDENTIFIER, (uint64_t)len < 8 ? 0 : 4);
    }
    FB_TRY(fb_deref(c, 0, &pos));
    FB_TRY(fb_verify_table(c, &native_schema_file, native_schema_file.root, pos));
    FB_TRY(fb_tbl_open(c, pos, &root));
    s->root = pos;
    s->tables_visited = c->tables;
    s->elements_visited = c->elements;
    c->tables = c->elements = 0;   /* the meaning, on budgets of its own */
    FB_TRY(fb_fld_vec_at(c, &root, methods_f, &methods));
    s->n_methods = methods.count;
    if (methods.count == 0) return fb_fail_at(c, methods_f, FB_NO_INDEX, NAT_E_NO_METHOD, root.pos);
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_vec_ref(c, &methods, 0, &s->method));
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_tbl_open(c, s->method, &m));
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_fld_table_at(c, &m, &native_method[NATIVE_METHOD_GRAPH],
                                                     &g, &present));
    /* the values: inputs, constants, mutable buffers, the nodes' outputs */
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_fld_vec(c, &g, &native_graph[NATIVE_GRAPH_INPUTS], &v));
    n += v.count;
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_fld_vec(c, &m, &native_method[NATIVE_METHOD_CONSTANTS], &v));
    n += v.count;
    FB_TRY_IN_FIELD(c, methods_f, 0, fb_fld_vec(c, &m, &native_method[NATIVE_METHOD_MUTABLE_BUFFERS],
                                                &v));
    n += v.count;
    {
        fb_vec nodes;
        FB_TRY_IN_FIELD(c, methods_f, 0, fb_fld_vec(c, &g, &native_graph[NATIVE_GRAPH_NODES],
                                                    &nodes));
        for (i = 0; i < nodes.count; i++) {
            fb_tbl node, o;
            fb_vec outs, names;
            uint8_t op, kind;
            uint32_t j;
            FB_TRY(fb_vec_table(c, &nodes, i, &node));
            FB_TRY(fb_fld_u8(c, &node, &native_node[NATIVE_NODE_OP_KIND], &op));
            if (op == NATIVE_OP_KIND_PLACEHOLDER) continue;
            FB_TRY(fb_fld_vec(c, &node, &native_node[NATIVE_NODE_OUTPUTS], &outs));
            for (j = 0; j < outs.count; j++) {
                FB_TRY(fb_vec_table(c, &outs, j, &o));
                FB_TRY(fb_fld_u8(c, &o, &native_output[NATIVE_OUTPUT_KIND], &kind));
                if (kind != NATIVE_OUTPUT_VALUE_KIND_TENSOR_LIST) {
                    n++;
                    continue;
                }
                FB_TRY(fb_fld_vec(c, &o, &native_output[NATIVE_OUTPUT_NAMES], &names));
                n += names.count;
            }
        }
    }
    if (n > UINT32_MAX) return fb_fail(c, FB_E_EXTENT_OVERFLOW, s->method);
    s->n_values = (uint32_t)n;
    return FB_OK;
}

int nat_index(const uint8_t *buf, size_t len, const nat_summary *s, nat_value *values,
              uint32_t *order, fb_error *err) {
    walk w;
    fb_options opt;
    fb_tbl m, g;
    const fb_field *methods_f = &native_program[NATIVE_PROGRAM_METHODS];
    fb_default_options(&opt);
    opt.verify = 0;
    memset(&w, 0, sizeof w);
    fb_ctx_init(&w.c, buf, len, &opt, NULL, err);
    w.s = s;
    w.values = values;
    w.order = order;
    if (s->method == 0 || s->method >= (uint64_t)len) return fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);
    FB_TRY_IN_FIELD(&w.c, methods_f, 0, method_graph(&w, &m, &g));
    FB_TRY_IN_FIELD(&w.c, methods_f, 0, define_all(&w, &m, &g));
    /* the buffer is the one nat_open counted (a changed one is refused) */
    if (w.n != s->n_values) return fb_fail(&w.c, FB_E_BAD_ARGUMENT, 0);
    sort_names(&w);
    FB_TRY_IN_FIELD(&w.c, methods_f, 0, unique_names(&w));
    FB_TRY_IN_FIELD(&w.c, methods_f, 0, resolve_all(&w, &m, &g));
    return FB_OK;
}

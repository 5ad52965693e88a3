/*
 * fb_schema.h: the descriptors csrc/schemas/fbsgen.py writes for a schema's tables,
 * unions and enums (declared in csrc/gen/<schema>.h, defined once in csrc/gen/<schema>.c),
 * which the readers in fb.h check every access against.
 */
#ifndef FB_SCHEMA_H
#define FB_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

/* --- cdef begin --- */

/* What a table field holds. */
enum fb_kind {
    FB_NONE,          /* union type 0 */
    FB_SCALAR,        /* inline scalar or enum */
    FB_STRUCT,        /* inline struct */
    FB_STRING,        /* offset to a string */
    FB_TABLE,         /* offset to a table */
    FB_UNION_TYPE,    /* the ubyte type of the union field that follows */
    FB_UNION,         /* offset to the union's table, or to struct bytes */
    FB_VEC_SCALAR,    /* offset to a vector of scalars or enums */
    FB_VEC_STRUCT,    /* offset to a vector of structs */
    FB_VEC_STRING,    /* offset to a vector of offsets to strings */
    FB_VEC_TABLE      /* offset to a vector of offsets to tables */
};

/* Scalar type of a field (of its elements, for a vector); FB_OFFSET otherwise. */
enum fb_type {
    FB_OFFSET, FB_BOOL, FB_I8, FB_U8, FB_I16, FB_U16, FB_I32, FB_U32, FB_I64, FB_U64,
    FB_F32, FB_F64
};

#define FB_NO_REF 0xffffu

/* What the schema's attributes say of a field (its flags). */
enum fb_flag {
    FB_REQUIRED = 1,          /* `required`: the readers refuse it absent */
    FB_VALUE_REF = 2          /* `value_ref`: names an entry of the format's value table */
};

/* One table field, at index = its vtable id. */
typedef struct fb_field {
    const char *name;        /* as declared; "<union>_type" for a union's type slot */
    const char *path;        /* "." + name: its segment in an error path */
    uint16_t id;             /* vtable slot */
    uint8_t kind;            /* enum fb_kind */
    uint8_t type;            /* enum fb_type */
    uint8_t size;            /* bytes inline in the table (4 for offsets) */
    uint8_t align;           /* alignment inline */
    uint8_t elem_size;       /* vector element (4 for offsets) or string byte; 0 otherwise */
    uint8_t elem_align;
    uint8_t force_align;     /* the schema's force_align on a vector, 0 if none */
    uint8_t flags;           /* enum fb_flag */
    int64_t int_default;     /* default of an integer, bool or enum scalar */
    double real_default;     /* default of a float or double */
    uint16_t ref;            /* declaration number of the table, struct, union or enum */
} fb_field;

/* One union member, at index = its type number. */
typedef struct fb_member {
    const char *name;        /* "NONE" for 0, "" for numbers the union skips */
    uint8_t kind;            /* FB_NONE, FB_STRUCT or FB_TABLE */
    uint8_t size;            /* a struct's size; 4 for a table's offset */
    uint8_t align;
    uint16_t ref;
} fb_member;

/* One member of an enum, in schema order: the names Python reads instead of retyping. */
typedef struct fb_enum_member {
    const char *name;        /* as declared */
    int64_t value;
} fb_enum_member;

/* What a declaration is. */
enum fb_decl_kind { FB_DECL_ENUM, FB_DECL_UNION, FB_DECL_STRUCT, FB_DECL_TABLE };

/* One declaration of a schema, at index = its declaration number (a descriptor's ref). */
typedef struct fb_decl {
    const char *name;        /* as declared */
    uint8_t kind;            /* enum fb_decl_kind */
    uint8_t size;            /* a struct's size; an enum's underlying scalar size */
    uint8_t align;
    uint16_t count;          /* fields of a table, members of a union (type numbers) */
    const fb_field *fields;  /* a table's, in vtable id order; NULL otherwise */
    const fb_member *members;/* a union's, by type number; NULL otherwise */
} fb_decl;

/* A whole schema: what the generic verifier and the Python reader walk. */
typedef struct fb_schema {
    const char *name;        /* the schema file's stem */
    uint32_t identifier;     /* file_identifier as a little-endian uint32, 0 if none */
    uint16_t root;           /* declaration number of the root table */
    uint16_t count;          /* declarations */
    const fb_decl *decls;
} fb_schema;

/* The compiled schema whose file identifier is `identifier`, or NULL (the module's
 * source, which csrc/build.py writes, lists every generated schema). */
const fb_schema *fb_schema_find(uint32_t identifier);

/* --- cdef end --- */

#endif /* FB_SCHEMA_H */

/*
 * ptmf_schema.h: the numbers of the PTMF schema's IValue union and ObjectType kinds
 * (gen/mobile_bytecode.h, generated from schemas/mobile_bytecode.fbs) under the short
 * names the PTMF reader switches on, with the reader's own declarations (ptmf.h). Field
 * descriptors keep their generated names, as in every format: the descriptor of field
 * F of table T is &mobile_T[MOBILE_T_F] (&mobile_module[MOBILE_MODULE_IVALUES]).
 */
#ifndef PTMF_SCHEMA_H
#define PTMF_SCHEMA_H

#include "gen/mobile_bytecode.h"
#include "ptmf/ptmf.h"

/* IValue union type numbers. */
enum {
    UT_NONE = MOBILE_I_VALUE_UNION_NONE,
    UT_INT = MOBILE_I_VALUE_UNION_INT,
    UT_BOOL = MOBILE_I_VALUE_UNION_BOOL,
    UT_DOUBLE = MOBILE_I_VALUE_UNION_DOUBLE,
    UT_COMPLEX = MOBILE_I_VALUE_UNION_COMPLEX_DOUBLE,
    UT_TENSOR = MOBILE_I_VALUE_UNION_TENSOR_METADATA,
    UT_STRING = MOBILE_I_VALUE_UNION_STRING,
    UT_LIST = MOBILE_I_VALUE_UNION_LIST,
    UT_TUPLE = MOBILE_I_VALUE_UNION_TUPLE,
    UT_DICT = MOBILE_I_VALUE_UNION_DICT,
    UT_OBJECT = MOBILE_I_VALUE_UNION_OBJECT,
    UT_INT_LIST = MOBILE_I_VALUE_UNION_INT_LIST,
    UT_DOUBLE_LIST = MOBILE_I_VALUE_UNION_DOUBLE_LIST,
    UT_BOOL_LIST = MOBILE_I_VALUE_UNION_BOOL_LIST,
    UT_DEVICE = MOBILE_I_VALUE_UNION_DEVICE,
    UT_ENUM = MOBILE_I_VALUE_UNION_ENUM_VALUE,
    UT_FUNCTION = MOBILE_I_VALUE_UNION_FUNCTION,
    UT_COUNT = MOBILE_I_VALUE_UNION_COUNT
};

/* ObjectType.type */
enum {
    OT_UNSET = MOBILE_TYPE_TYPE_UNSET,
    OT_CLASS_WITH_FIELD = MOBILE_TYPE_TYPE_CLASS_WITH_FIELD,
    OT_CUSTOM_CLASS = MOBILE_TYPE_TYPE_CUSTOM_CLASS,
    OT_CLASS_WITH_SETSTATE = MOBILE_TYPE_TYPE_CLASS_WITH_SETSTATE
};

#endif /* PTMF_SCHEMA_H */

/*
 * et_status.h: the ExecuTorch wing's block of status codes (programs, data files and
 * XNNPACK payloads), defined in et.c.
 */
#ifndef ET_STATUS_H
#define ET_STATUS_H

#include "fb/fb_common.h"

#define ET_STATUS_BASE 200
#define ET_STATUS_TABLE(X)                                                          \
    X(ET_E_BAD_HEADER, "extended header (eh00/FH01) is malformed or reaches past the end of the file") \
    X(ET_E_BAD_SEGMENT, "data lies outside its segment, or the segment outside the file's segment data") \
    X(ET_E_BAD_DIM_ORDER, "dim_order is not a permutation of the tensor's dimensions") \
    X(ET_E_MISSING_DATA, "external tensor data is in none of the data files given") \
    X(ET_E_DATA_MISMATCH, "external tensor data does not match the tensor's dtype and size") \
    X(ET_E_BAD_PAYLOAD_HEADER, "XNNPACK payload header (XH00) is malformed or reaches past the payload") \
    X(ET_E_BAD_VALUE_ID, "XNNPACK value id is out of range, repeated, or names no value") \
    X(ET_E_BAD_NODE, "XNNPACK node disagrees with its values: their shapes, or what it may read or write") \
    X(ET_E_NUL_IN_NAME, "a name the runtime reads as a C string holds a NUL byte") \
    X(ET_E_BAD_EXTERNAL, "XNNPACK external value: its flags, its external id against the graph's num_externs (out of range, missing or repeated), or a delegate call with fewer arguments than the graph's external ids")

FB_STATUS_CODES(et_status, ET);
extern const fb_status_block et_statuses;

#endif /* ET_STATUS_H */

/*
 * et_status.h: the ExecuTorch wing's block of status codes (programs and data files),
 * defined in et.c; a backend's payloads have their own block (backends/<backend>/).
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
    X(ET_E_NUL_IN_NAME, "a name the runtime reads as a C string holds a NUL byte") \
    X(ET_E_BAD_EXTERNAL, "a delegate call passes fewer arguments than its graph's external values need") \
    X(ET_E_NATIVE_CODE, "the file holds native code, an executable image the runtime may load and run (rejected in strict mode)")

FB_STATUS_CODES(et_status, ET);
extern const fb_status_block et_statuses;

#endif /* ET_STATUS_H */

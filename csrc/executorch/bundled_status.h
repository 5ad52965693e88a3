/*
 * bundled_status.h: the block of status codes of bundled programs (.bpte), defined in
 * bundled.c.
 */
#ifndef BUNDLED_STATUS_H
#define BUNDLED_STATUS_H

#include "fb/fb_common.h"

#define BP_STATUS_BASE 400
#define BP_STATUS_TABLE(X)                                                          \
    X(BP_E_BAD_TENSOR, "test tensor's sizes, dim_order or data do not describe its bytes") \
    X(BP_E_UNKNOWN_METHOD, "test suite names no method of the bundled program")

FB_STATUS_CODES(bp_status, BP);
extern const fb_status_block bp_statuses;

#endif /* BUNDLED_STATUS_H */

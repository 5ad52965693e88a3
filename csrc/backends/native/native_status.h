/*
 * native_status.h: the block of status codes of ExecuTorch native backend payloads,
 * defined in native.c.
 */
#ifndef NATIVE_STATUS_H
#define NATIVE_STATUS_H

#include "fb/fb_common.h"

#define NAT_STATUS_BASE 660
#define NAT_STATUS_TABLE(X)                                                          \
    X(NAT_E_NO_METHOD, "native backend payload holds no method")                  \
    X(NAT_E_BAD_REFERENCE, "native backend value name is defined by no earlier input, constant or node") \
    X(NAT_E_DUPLICATE_VALUE, "native backend value name is defined twice")        \
    X(NAT_E_BAD_TENSOR, "native backend tensor's dims are not static, or its bytes overflow")

FB_STATUS_CODES(nat_status, NAT);
extern const fb_status_block nat_statuses;

#endif /* NATIVE_STATUS_H */

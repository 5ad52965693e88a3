/*
 * xnn_status.h: the block of status codes of XNNPACK delegate payloads, defined in
 * xnn.c. (A fault of the program around a payload, or of its named data, keeps
 * ExecuTorch's code: executorch/et_status.h.)
 */
#ifndef XNN_STATUS_H
#define XNN_STATUS_H

#include "fb/fb_common.h"

#define XNN_STATUS_BASE 300
#define XNN_STATUS_TABLE(X)                                                         \
    X(XNN_E_BAD_PAYLOAD_HEADER, "XNNPACK payload header (XH00) is malformed or reaches past the payload") \
    X(XNN_E_BAD_VALUE_ID, "XNNPACK value id is out of range, repeated, or names no value") \
    X(XNN_E_BAD_NODE, "XNNPACK node disagrees with its values: their shapes, or what it may read or write") \
    X(XNN_E_BAD_EXTERNAL, "XNNPACK external value: its flags, or its external id against the graph's num_externs (out of range, missing or repeated)")

FB_STATUS_CODES(xnn_status, XNN);
extern const fb_status_block xnn_statuses;

#endif /* XNN_STATUS_H */

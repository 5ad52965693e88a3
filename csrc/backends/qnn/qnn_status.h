/*
 * qnn_status.h: the block of status codes of QNN delegate payloads, defined in qnn.c.
 * Their reader (pyflatmodule/executorch/backends/qnn.py) describes the payload's header
 * and leaves the context binary it frames, Qualcomm's own format, as bytes.
 */
#ifndef QNN_STATUS_H
#define QNN_STATUS_H

#include "fb/fb_common.h"

#define QNN_STATUS_BASE 360
#define QNN_STATUS_TABLE(X)                                                          \
    X(QNN_E_BAD_HEADER, "QNN payload header is cut short, or the context binary it frames reaches past the payload")

FB_STATUS_CODES(qnn_status, QNN);
extern const fb_status_block qnn_statuses;

#endif /* QNN_STATUS_H */

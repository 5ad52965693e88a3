/*
 * etrecord_status.h: the block of status codes of ETRecords (ExecuTorch's devtools
 * record: a zip of JSON programs and maps, and torch.save archives), defined in
 * etrecord.c. Their reader is Python (pyflatmodule/executorch/etrecord.py).
 */
#ifndef ETRECORD_STATUS_H
#define ETRECORD_STATUS_H

#include "fb/fb_common.h"

#define ETR_STATUS_BASE 640
#define ETR_STATUS_TABLE(X)                                                          \
    X(ETR_E_NOT_ETRECORD, "zip archive is not an ETRecord: it has no ETRECORD_V0 member") \
    X(ETR_E_BAD_JSON, "member is not the JSON an ETRecord holds there, or is over the size limit") \
    X(ETR_E_BAD_GRAPH, "exported program's JSON lacks a part of torch.export's schema, or holds a value of the wrong kind")

FB_STATUS_CODES(etr_status, ETR);
extern const fb_status_block etr_statuses;

#endif /* ETRECORD_STATUS_H */

/*
 * coreai_status.h: the block of status codes of Apple Core AI delegate payloads, defined
 * in coreai.c. The payload (a JSON manifest naming the Core AI asset's files, kept as the
 * program's named data or beside it) is read by
 * pyflatmodule/executorch/backends/coreai.py, which raises these codes.
 */
#ifndef COREAI_STATUS_H
#define COREAI_STATUS_H

#include "fb/fb_common.h"

#define CAI_STATUS_BASE 680
#define CAI_STATUS_TABLE(X)                                                          \
    X(CAI_E_BAD_MANIFEST, "Core AI manifest is not a UTF-8 JSON object of the writer's shape: a packaging the runtime does not know, a hash that is not 64 hex digits, a file or path that is not relative under its hash, or larger than a manifest may be")

FB_STATUS_CODES(cai_status, CAI);
extern const fb_status_block cai_statuses;

#endif /* COREAI_STATUS_H */

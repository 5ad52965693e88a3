/*
 * torch_save_status.h: the block of status codes of zip archives and of torch.save
 * archives (a zip holding a pickle and its tensors' storages), defined in torch_save.c.
 * Their reader is Python (pyflatmodule/core/zipview.py for the zip,
 * pyflatmodule/core/torch_save.py for the pickle, interpreted by a restricted reader
 * that never runs Python's unpickler), which raises these codes.
 */
#ifndef TORCH_SAVE_STATUS_H
#define TORCH_SAVE_STATUS_H

#include "fb/fb_common.h"

#define TS_STATUS_BASE 620
#define TS_STATUS_TABLE(X)                                                          \
    X(TS_E_BAD_ZIP, "zip archive is malformed: its end record, central directory or a local header, or a member outside the archive") \
    X(TS_E_MISSING_RECORD, "archive lacks a record it needs (a torch.save pickle, or the storage a tensor names)") \
    X(TS_E_BAD_PICKLE, "pickle is malformed: truncated, an unknown opcode, a stack or memo it does not hold, or a value of the wrong kind") \
    X(TS_E_REFUSED, "pickle asks for something the restricted reader never does: a global, call or opcode other than those torch.save writes for tensors")

FB_STATUS_CODES(ts_status, TS);
extern const fb_status_block ts_statuses;

#endif /* TORCH_SAVE_STATUS_H */

/*
 * etdump_status.h: the block of status codes of ETDump profiles (.etdump), defined in
 * etdump.c.
 */
#ifndef ETDUMP_STATUS_H
#define ETDUMP_STATUS_H

#include "fb/fb_common.h"

#define ED_STATUS_BASE 500
#define ED_STATUS_TABLE(X)                                                          \
    X(ED_E_BAD_SIZE, "size prefix is past the end of the file")                    \
    X(ED_E_BAD_EVENT, "event holds not exactly one of a profile, allocation and debug event") \
    X(ED_E_BAD_VALUE, "debug value's type is unknown or names a field it does not have")

FB_STATUS_CODES(ed_status, ED);
extern const fb_status_block ed_statuses;

#endif /* ETDUMP_STATUS_H */

/*
 * fb.c: the out-of-line part of fb.h: the status table's names and messages and the
 * formatting of an error's path.
 */
#include "fb.h"

#include <stdio.h>

static const char *const status_messages[] = {
#define PTMF_MESSAGE_ITEM(name, message) message,
    PTMF_STATUS_TABLE(PTMF_MESSAGE_ITEM)
#undef PTMF_MESSAGE_ITEM
};

static const char *const status_names[] = {
#define PTMF_NAME_ITEM(name, message) #name,
    PTMF_STATUS_TABLE(PTMF_NAME_ITEM)
#undef PTMF_NAME_ITEM
};

const char *ptmf_strerror(int code) {
    if (code < 0 || code >= PTMF_STATUS_COUNT) return "unknown status";
    return status_messages[code];
}

const char *ptmf_status_name(int code) {
    if (code < 0 || code >= PTMF_STATUS_COUNT) return "PTMF_E_UNKNOWN";
    return status_names[code];
}

void fb_fail(const ctx *c, int code, uint64_t offset) {
    ptmf_error *e = c->err;
    size_t used = 0;
    int i, n;
    if (!e) return;
    e->code = code;
    e->offset = offset;
    e->path[0] = '\0';
    n = c->depth < PATH_MAX_SEGMENTS ? c->depth : PATH_MAX_SEGMENTS;
    for (i = 0; i < n && used + 1 < sizeof e->path; i++) {
        int w;
        if (c->path[i].index >= 0)
            w = snprintf(e->path + used, sizeof e->path - used, "%s[%lld]",
                         c->path[i].name, (long long)c->path[i].index);
        else if (c->path[i].index == PATH_MEMBER)
            w = snprintf(e->path + used, sizeof e->path - used, "<%s>", c->path[i].name);
        else
            w = snprintf(e->path + used, sizeof e->path - used, "%s", c->path[i].name);
        if (w < 0) break;
        used += (size_t)w;
        if (used >= sizeof e->path) used = sizeof e->path - 1;
    }
}

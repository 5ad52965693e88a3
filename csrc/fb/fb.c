/*
 * fb.c: the out-of-line part of fb.h: the generic status block and the lookup of any
 * block's names and messages, the default options, the formatting of an error's path
 * and the UTF-8 check of text.
 */
#include "fb/fb.h"

#include <stdio.h>
#include <string.h>

FB_STATUS_BLOCK(fb_statuses, FB);

/* The block holding `code`, NULL if none. */
static const fb_status_block *block_of(int code) {
    const fb_status_block *b;
    size_t i;
    for (i = 0; (b = fb_status_block_at(i)) != NULL; i++)
        if (code >= b->base && code - b->base < b->count) return b;
    return NULL;
}

const char *fb_strerror(int code) {
    const fb_status_block *b = block_of(code);
    return b ? b->messages[code - b->base] : "unknown status";
}

const char *fb_status_name(int code) {
    const fb_status_block *b = block_of(code);
    return b ? b->names[code - b->base] : "FB_E_UNKNOWN";
}

void fb_default_options(fb_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->max_depth = 200;
    opt->verify = 1;
}

/* Writes segment (name, index) at e->path + *used, within the array; 0 if it cannot. */
static int put_segment(fb_error *e, size_t *used, const char *name, int64_t index) {
    int w;
    if (index >= 0)
        w = snprintf(e->path + *used, sizeof e->path - *used, "%s[%lld]", name, (long long)index);
    else if (index == FB_PATH_MEMBER)
        w = snprintf(e->path + *used, sizeof e->path - *used, "<%s>", name);
    else
        w = snprintf(e->path + *used, sizeof e->path - *used, "%s", name);
    if (w < 0) return 0;
    *used += (size_t)w;
    if (*used >= sizeof e->path) *used = sizeof e->path - 1;
    return 1;
}

void fb_record_failure(const fb_ctx *c, int code, uint64_t offset) {
    fb_error *e = c->err;
    size_t used = 0;
    int i, n;
    if (!e) return;
    e->code = code;
    e->offset = offset;
    e->path[0] = '\0';
    n = c->depth < FB_PATH_MAX_SEGMENTS ? c->depth : FB_PATH_MAX_SEGMENTS;
    for (i = 0; i < n && used + 1 < sizeof e->path; i++)
        if (!put_segment(e, &used, c->path[i].name, c->path[i].index)) break;
}

int fb_locate(const fb_ctx *c, const char *name, int64_t index, int code) {
    fb_error *e = c->err;
    size_t used;
    if (!e || c->depth >= FB_PATH_MAX_SEGMENTS) return code;   /* as push would drop it */
    used = strlen(e->path);
    if (used + 1 < sizeof e->path) (void)put_segment(e, &used, name, index);
    return code;
}

/* Python's strict decoder: no overlong forms, no surrogates, nothing above U+10FFFF. */
uint64_t fb_utf8_invalid_at(const uint8_t *s, uint64_t n) {
    uint64_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        uint8_t lo = 0x80, hi = 0xbf;
        unsigned more, k;
        if (b < 0x80) {
            uint64_t word;
            i++;
            /* ASCII runs (most source text) eight bytes at a time */
            while (n - i >= 8) {
                memcpy(&word, s + i, 8);
                if (word & UINT64_C(0x8080808080808080)) break;
                i += 8;
            }
            continue;
        }
        if (b >= 0xc2 && b <= 0xdf) more = 1;
        else if (b >= 0xe0 && b <= 0xef) more = 2;
        else if (b >= 0xf0 && b <= 0xf4) more = 3;
        else return i;
        if (b == 0xe0) lo = 0xa0;        /* overlong */
        else if (b == 0xed) hi = 0x9f;   /* surrogates */
        else if (b == 0xf0) lo = 0x90;   /* overlong */
        else if (b == 0xf4) hi = 0x8f;   /* above U+10FFFF */
        for (k = 1; k <= more; k++) {
            uint8_t cont;
            if (i + k >= n) return i;
            cont = s[i + k];
            if (cont < (k == 1 ? lo : 0x80) || cont > (k == 1 ? hi : 0xbf)) return i;
        }
        i += 1 + more;
    }
    return n;
}

/*
 * ptmf_storage.c: the storages' payload windows (ptmf_index_storages): each storage's
 * data vector, its table read with pread rather than through the mapping in files of
 * large storages.
 */
#define _POSIX_C_SOURCE 200809L   /* pread */
#include "ptmf/ptmf_internal.h"

#include <sys/types.h>
#include <unistd.h>

/* Files with at least this many bytes per storage read each storage's header
 * (table and vector length, just before its payload) with pread: faulting it in
 * through the mapping would map the page-cache folio around it, which the kernel
 * maps whole when large (up to 2 MiB of payload per storage in RSS). */
#define PREAD_BYTES_PER_STORAGE (64u << 10)
#define STORAGE_WINDOW 64   /* bytes: a storage's table and its vector's length */

/* Storage i: its data vector, read through a pread window when fd >= 0. */
static int index_storage(fb_ctx *c, const fb_vec *all, uint32_t i, int fd,
                         uint8_t window[STORAGE_WINDOW], ptmf_storage *out) {
    fb_tbl t;
    fb_vec data;
    uint64_t target;
    FB_TRY(fb_vec_ref(c, all, i, &target));
    if (fd >= 0) {
        ssize_t got = pread(fd, window, STORAGE_WINDOW, (off_t)target);
        c->win = window;
        c->win_pos = target;
        c->win_len = got > 0 ? (uint64_t)got : 0;
    }
    FB_TRY(fb_tbl_open(c, target, &t));
    FB_TRY(fb_fld_vec_at(c, &t, &mobile_storage_data[MOBILE_STORAGE_DATA_DATA], &data));
    out->pos = data.data;
    out->size = data.count;
    return FB_OK;
}

int ptmf_index_storages(const uint8_t *buf, size_t len, const fb_options *opt,
                        ptmf_summary *s, ptmf_storage *out, int fd, fb_error *err) {
    fb_ctx c;
    fb_vec all = {s->storages, s->n_storages};
    uint8_t window[STORAGE_WINDOW];
    uint32_t i;
    ptmf_ctx_init(&c, buf, len, opt, s, err);
    if (s->n_storages == 0 || (uint64_t)len / s->n_storages < PREAD_BYTES_PER_STORAGE)
        fd = -1;
    for (i = 0; i < s->n_storages; i++) {
        FB_TRY_IN_FIELD(&c, &mobile_module[MOBILE_MODULE_STORAGE_DATA], i,
                     index_storage(&c, &all, i, fd, window, &out[i]));
        c.win_len = 0;
    }
    fb_ctx_finish(&c);
    return FB_OK;
}

/* reader.c — the attn_reader implementations (a file via pread, a memory buffer via memcpy) and
 * the atomic file writer shared by the safetensors and .npy savers.
 *
 * Invariants: a reader's read() never touches bytes outside [0, size): a request past the end is
 * ATTN_STATUS_FORMAT (the data is truncated), an OS failure ATTN_STATUS_IO; both name the reader.
 * Readers own their context (and a copy of the name); attn_reader_close releases it and zeroes
 * the struct, so closing twice is harmless. The atomic writer never modifies the destination
 * before the final rename and removes its temporary file on every failure path. */
#include "io-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static attn_status read_range_check(const char *name, uint64_t size, uint64_t off, size_t n) {
    if (off > size || n > size - off)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: unexpected end of data: %zu bytes at offset %llu are past the end "
                         "(%llu bytes)",
                         name, n, (unsigned long long)off, (unsigned long long)size);
    return ATTN_STATUS_OK;
}

/* ---- file reader ---- */

typedef struct {
    int fd;
    uint64_t size;
    char name[]; /* the path */
} file_ctx;

static attn_status file_read(void *ctx, uint64_t off, void *dst, size_t n) {
    file_ctx *c = ctx;
    attn_status s = read_range_check(c->name, c->size, off, n);
    if (s) return s;
    unsigned char *p = dst;
    while (n > 0) {
        /* pread of more than ~2 GiB is short on Linux; keep each call bounded. */
        size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(c->fd, p, want, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return attn_fail(ATTN_STATUS_IO, "%s: read of %zu bytes at offset %llu failed: %s",
                             c->name, want, (unsigned long long)off, strerror(errno));
        }
        if (got == 0)
            return attn_fail(ATTN_STATUS_IO,
                             "%s: unexpected end of file at offset %llu (file shrank while open?)",
                             c->name, (unsigned long long)off);
        p += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return ATTN_STATUS_OK;
}

static void file_close(void *ctx) {
    file_ctx *c = ctx;
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c);
}

attn_status attn_reader_open_file(const char *path, attn_reader *out) {
    if (!out) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_reader_open_file: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path || !*path)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_reader_open_file: empty path");
    size_t len = strlen(path);
    file_ctx *c = malloc(sizeof *c + len + 1);
    if (!c) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(c->name, path, len + 1);
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int e = errno;
        free(c);
        return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        free(c);
        return attn_fail(ATTN_STATUS_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        free(c);
        return attn_fail(ATTN_STATUS_IO, "%s: not a regular file%s", path,
                         S_ISDIR(st.st_mode) ? " (a directory)" : "");
    }
    c->fd = fd;
    c->size = (uint64_t)st.st_size;
    out->ctx = c;
    out->size = c->size;
    out->name = c->name;
    out->read = file_read;
    out->close = file_close;
    return ATTN_STATUS_OK;
}

/* ---- memory reader ---- */

typedef struct {
    const unsigned char *buf;
    uint64_t size;
    char name[];
} mem_ctx;

static attn_status mem_read(void *ctx, uint64_t off, void *dst, size_t n) {
    mem_ctx *c = ctx;
    attn_status s = read_range_check(c->name, c->size, off, n);
    if (s) return s;
    if (n) memcpy(dst, c->buf + off, n);
    return ATTN_STATUS_OK;
}

static void mem_close(void *ctx) { free(ctx); }

attn_status attn_reader_open_memory(const void *buf, size_t n, const char *name,
                                    attn_reader *out) {
    if (!out)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_reader_open_memory: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name) name = "<memory>";
    if (!buf && n)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: NULL buffer of %zu bytes", name, n);
    size_t len = strlen(name);
    mem_ctx *c = malloc(sizeof *c + len + 1);
    if (!c) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    memcpy(c->name, name, len + 1);
    c->buf = buf;
    c->size = n;
    out->ctx = c;
    out->size = n;
    out->name = c->name;
    out->read = mem_read;
    out->close = mem_close;
    return ATTN_STATUS_OK;
}

void attn_reader_close(attn_reader *r) {
    if (!r) return;
    if (r->close) r->close(r->ctx);
    memset(r, 0, sizeof *r);
}

/* ---- atomic writer ---- */

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

attn_status attn_atomic_begin(const char *path, attn_atomic *a) {
    static _Thread_local uint64_t counter;
    memset(a, 0, sizeof *a);
    a->fd = -1;
    if (!path || !*path) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "save: empty path");
    size_t len = strlen(path);
    a->path = dup_str(path);
    a->tmp = malloc(len + sizeof ".tmp.XXXXXX");
    if (!a->path || !a->tmp) {
        attn_atomic_abort(a);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = mix64((uint64_t)getpid() ^ (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^
                          (uint64_t)(uintptr_t)a);
    for (int attempt = 0; attempt < 100; attempt++) {
        uint64_t x = mix64(seed ^ ++counter);
        memcpy(a->tmp, path, len);
        memcpy(a->tmp + len, ".tmp.", 5);
        for (int i = 0; i < 6; i++, x /= 62) a->tmp[len + 5 + i] = alphabet[x % 62];
        a->tmp[len + 11] = '\0';
        int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            a->fd = fd;
            return ATTN_STATUS_OK;
        }
        if (errno == EEXIST || errno == EINTR) continue;
        int e = errno;
        attn_status s = attn_fail(ATTN_STATUS_IO, "%s: cannot create temporary file %s: %s",
                                  path, a->tmp, strerror(e));
        free(a->tmp); /* not created: nothing to unlink */
        a->tmp = NULL;
        attn_atomic_abort(a);
        return s;
    }
    attn_status s = attn_fail(ATTN_STATUS_IO, "%s: cannot create a unique temporary file", path);
    free(a->tmp);
    a->tmp = NULL;
    attn_atomic_abort(a);
    return s;
}

attn_status attn_atomic_write(attn_atomic *a, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(a->fd, p, want);
        if (w < 0) {
            if (errno == EINTR) continue;
            return attn_fail(ATTN_STATUS_IO, "%s: write to %s failed: %s", a->path, a->tmp,
                             strerror(errno));
        }
        if (w == 0)
            return attn_fail(ATTN_STATUS_IO, "%s: write to %s made no progress", a->path, a->tmp);
        p += w;
        n -= (size_t)w;
    }
    return ATTN_STATUS_OK;
}

void attn_atomic_abort(attn_atomic *a) {
    if (!a) return;
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
}

/* The directory containing path, for the fsync that makes the rename durable. */
static int open_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) dir = dup_str(".");
    else if (slash == path) dir = dup_str("/");
    else {
        size_t n = (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    return fd;
}

attn_status attn_atomic_commit(attn_atomic *a) {
    attn_status s = ATTN_STATUS_OK;
    if (fsync(a->fd) != 0) {
        s = attn_fail(ATTN_STATUS_IO, "%s: fsync of %s failed: %s", a->path, a->tmp,
                      strerror(errno));
        attn_atomic_abort(a);
        return s;
    }
    int fd = a->fd;
    a->fd = -1;
    if (close(fd) != 0) {
        s = attn_fail(ATTN_STATUS_IO, "%s: close of %s failed: %s", a->path, a->tmp,
                      strerror(errno));
        attn_atomic_abort(a);
        return s;
    }
    if (rename(a->tmp, a->path) != 0) {
        s = attn_fail(ATTN_STATUS_IO, "%s: cannot rename %s over it: %s", a->path, a->tmp,
                      strerror(errno));
        attn_atomic_abort(a);
        return s;
    }
    free(a->tmp); /* renamed: nothing left to remove */
    a->tmp = NULL;
    int dfd = open_parent_dir(a->path);
    if (dfd >= 0) {
        /* Some file systems cannot fsync a directory (EINVAL); the data itself is synced. */
        if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EBADF)
            s = attn_fail(ATTN_STATUS_IO, "%s: written, but fsync of its directory failed: %s",
                          a->path, strerror(errno));
        close(dfd);
    }
    attn_atomic_abort(a);
    return s;
}

/* ---- names in messages ---- */

const char *attn_io_shown(char *buf, size_t cap, const char *s, size_t n) {
    size_t k = 0;
    if (cap < 8) {
        if (cap) buf[0] = '\0';
        return buf;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool esc = c < 0x20 || c == 0x7f;
        if (k + (esc ? 4 : 1) + 4 > cap) {
            memcpy(buf + k, "...", 4);
            return buf;
        }
        if (esc) k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", c);
        else buf[k++] = (char)c;
    }
    buf[k] = '\0';
    return buf;
}

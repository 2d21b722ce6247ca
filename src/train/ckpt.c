/* ckpt.c — atomic training checkpoints (attn_ckpt_save / attn_ckpt_load) and CRC-32.
 *
 * The directory format and the crash-safety argument are in include/attn_train.h. In short: the
 * new checkpoint is assembled completely in a sibling DIR.tmp-XXXXXX (every file fsynced, the JSON
 * with the other files' sizes and CRCs written last), and only then put in place by one atomic
 * directory exchange (Linux renameat2) or, as a fallback, by DIR → DIR.prev, tmp → DIR, which the
 * loader understands. Whole directories are swapped, rather than files renamed one by one inside
 * DIR, because three separate renames could be interrupted between the model and the JSON and
 * leave a set that is neither the old nor the new checkpoint.
 *
 * Load trusts nothing: the JSON is schema-checked field by field, each tensor file's size and
 * CRC-32 must match what the JSON recorded (a torn write or files from two different saves are
 * caught here), and every tensor's name and shape must match the caller's model before any
 * caller buffer is written. */
#define _GNU_SOURCE /* renameat2, RENAME_EXCHANGE (glibc >= 2.28) */
#include "train-impl.h"
#include "../io/io-impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int attn_ckpt__crash_after = 0;
bool attn_ckpt__no_exchange = false;

/* Test hooks for other processes (tests/test_nolostwork.c kills `attn train` with SIGKILL in the
 * middle of saves): ATTN_CKPT_TEST_PAUSE_US=N sleeps N microseconds after each durable step of a
 * save, so that random kills land inside saves; ATTN_CKPT_TEST_NO_EXCHANGE=1 takes the rename
 * fallback path (DIR -> DIR.prev, tmp -> DIR) as attn_ckpt__no_exchange does. Read once. */
static unsigned test_pause_us;
static bool test_no_exchange;
static pthread_once_t test_env_once = PTHREAD_ONCE_INIT;

static void test_env_read(void) {
    const char *p = getenv("ATTN_CKPT_TEST_PAUSE_US"), *x = getenv("ATTN_CKPT_TEST_NO_EXCHANGE");
    long v = p ? strtol(p, NULL, 10) : 0;
    test_pause_us = v > 0 && v < 10000000 ? (unsigned)v : 0;
    test_no_exchange = x && *x && strcmp(x, "0") != 0;
}

static void test_pause(void) {
    if (test_pause_us) {
        struct timespec ts = {(time_t)(test_pause_us / 1000000), (long)(test_pause_us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

static const char *const F_MODEL = "model.safetensors";
static const char *const F_OPTIM = "optimizer.safetensors";
static const char *const F_STATE = "training_state.json";

/* ---- CRC-32, slicing by 8 ---- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

uint32_t attn_crc32(uint32_t crc, const void *buf, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = buf;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t a = c ^ attn_ld32(p), b = attn_ld32(p + 4);
        c = crc_tab[7][a & 0xff] ^ crc_tab[6][(a >> 8) & 0xff] ^ crc_tab[5][(a >> 16) & 0xff] ^
            crc_tab[4][a >> 24] ^ crc_tab[3][b & 0xff] ^ crc_tab[2][(b >> 8) & 0xff] ^
            crc_tab[1][(b >> 16) & 0xff] ^ crc_tab[0][b >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

/* Size and CRC-32 of a whole file. */
static attn_status hash_file(const char *path, uint64_t *bytes, uint32_t *crc) {
    *bytes = 0;
    *crc = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = (size_t)1 << 20;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    uint64_t total = 0;
    uint32_t c = 0;
    attn_status s = ATTN_STATUS_OK;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = attn_fail(ATTN_STATUS_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        c = attn_crc32(c, buf, (size_t)r);
        total += (uint64_t)r;
    }
    free(buf);
    close(fd);
    *bytes = total;
    *crc = c;
    return s;
}

/* ---- small path and directory helpers ---- */

static char *cat3(const char *a, const char *b, const char *c) {
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *r = malloc(la + lb + lc + 1);
    if (!r) return NULL;
    memcpy(r, a, la);
    memcpy(r + la, b, lb);
    memcpy(r + la + lb, c, lc + 1);
    return r;
}

static bool is_dir(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool path_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static attn_status fsync_path(const char *path, bool dir) {
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return attn_fail(ATTN_STATUS_IO, "%s: cannot open for fsync: %s", path, strerror(errno));
    attn_status s = ATTN_STATUS_OK;
    /* some file systems cannot fsync a directory (EINVAL): the files themselves are synced */
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EBADF)
        s = attn_fail(ATTN_STATUS_IO, "%s: fsync failed: %s", path, strerror(errno));
    close(fd);
    return s;
}

/* Remove a directory that holds only files (what the checkpoint code creates). Best effort. */
static void remove_flat_dir(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = cat3(path, "/", e->d_name);
            if (p && !is_dir(p)) unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(path);
}

static bool is_ckpt_file(const char *name) {
    return !strcmp(name, F_MODEL) || !strcmp(name, F_OPTIM) || !strcmp(name, F_STATE);
}

static attn_status copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return attn_fail(ATTN_STATUS_IO, "%s: cannot open: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (out < 0) {
        attn_status s = attn_fail(ATTN_STATUS_IO, "%s: cannot create: %s", dst, strerror(errno));
        close(in);
        return s;
    }
    attn_status s = ATTN_STATUS_OK;
    char buf[1 << 16];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = attn_fail(ATTN_STATUS_IO, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (r == 0) break;
        for (ssize_t off = 0; off < r && !s;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) s = attn_fail(ATTN_STATUS_IO, "%s: write failed: %s", dst, strerror(errno));
            else off += w;
        }
        if (s) break;
    }
    if (!s && fsync(out) != 0)
        s = attn_fail(ATTN_STATUS_IO, "%s: fsync failed: %s", dst, strerror(errno));
    close(out);
    close(in);
    return s;
}

/* Entries of an existing checkpoint directory that are not checkpoint files: refuse
 * subdirectories (check_only), or link/copy them into dst. */
static attn_status carry_over(const char *src, const char *dst, bool check_only) {
    DIR *d = opendir(src);
    if (!d) return attn_fail(ATTN_STATUS_IO, "%s: cannot list: %s", src, strerror(errno));
    attn_status s = ATTN_STATUS_OK;
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || is_ckpt_file(nm)) continue;
        char *sp = cat3(src, "/", nm), *dp = dst ? cat3(dst, "/", nm) : NULL;
        struct stat st;
        if (!sp || (dst && !dp)) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", src);
        else if (lstat(sp, &st) != 0)
            s = attn_fail(ATTN_STATUS_IO, "%s: cannot stat: %s", sp, strerror(errno));
        else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                          "%s: a checkpoint directory may hold only files; '%s' is not one", src, nm);
        else if (check_only) {
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlink(sp, target, sizeof target - 1);
            if (n < 0)
                s = attn_fail(ATTN_STATUS_IO, "%s: cannot read link: %s", sp, strerror(errno));
            else {
                target[n] = '\0';
                if (symlink(target, dp) != 0)
                    s = attn_fail(ATTN_STATUS_IO, "%s: cannot create link: %s", dp, strerror(errno));
            }
        } else if (link(sp, dp) != 0)
            s = copy_file(sp, dp);
        free(sp);
        free(dp);
    }
    closedir(d);
    return s;
}

/* Remove stale "BASE.tmp-XXXXXX" siblings left by crashed saves. */
static void remove_stale_tmp(const char *parent, const char *base) {
    DIR *d = opendir(parent);
    if (!d) return;
    size_t lb = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, lb) != 0 || strncmp(nm + lb, ".tmp-", 5) != 0 ||
            strlen(nm + lb + 5) != 6)
            continue;
        char *p = cat3(parent, "/", nm);
        if (p && is_dir(p)) remove_flat_dir(p);
        free(p);
    }
    closedir(d);
}

/* dir without trailing slashes; parent ("." if none) and base name. */
static attn_status split_dir(const char *dir, char **clean, char **parent, char **base) {
    *clean = *parent = *base = NULL;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *c = malloc(n + 1);
    if (!c) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    memcpy(c, dir, n);
    c[n] = '\0';
    const char *sl = strrchr(c, '/');
    char *p, *b;
    if (!sl) {
        p = cat3(".", "", "");
        b = cat3(c, "", "");
    } else {
        size_t pl = sl == c ? 1 : (size_t)(sl - c);
        p = malloc(pl + 1);
        if (p) {
            memcpy(p, c, pl);
            p[pl] = '\0';
        }
        b = cat3(sl + 1, "", "");
    }
    if (!p || !b || !*b || !strcmp(b, ".") || !strcmp(b, "..")) {
        attn_status s = !p || !b ? attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir)
                                 : attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                                             "%s: not a usable checkpoint directory name", dir);
        free(c);
        free(p);
        free(b);
        return s;
    }
    *clean = c;
    *parent = p;
    *base = b;
    return ATTN_STATUS_OK;
}

/* ---- training state ---- */

attn_ckpt_state attn_ckpt_state_init(void) {
    attn_ckpt_state st;
    memset(&st, 0, sizeof st);
    st.best_valid_loss = INFINITY;
    return st;
}

attn_status attn_ckpt_state_set_rng(attn_ckpt_state *st, const char *name, const attn_rng *r) {
    if (!st || !name || !r || !*name || strlen(name) >= ATTN_CKPT_RNG_NAME)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                         "attn_ckpt_state_set_rng: bad arguments (name must be 1 to %d bytes)",
                         ATTN_CKPT_RNG_NAME - 1);
    int i = 0;
    while (i < st->n_rng && strcmp(st->rng[i].name, name) != 0) i++;
    if (i == st->n_rng) {
        if (st->n_rng == ATTN_CKPT_MAX_RNG)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "attn_ckpt_state_set_rng: more than %d generators", ATTN_CKPT_MAX_RNG);
        st->n_rng++;
        snprintf(st->rng[i].name, sizeof st->rng[i].name, "%s", name);
    }
    attn_rng_set_state(&st->rng[i].rng, r->seed, r->counter);
    return ATTN_STATUS_OK;
}

attn_status attn_ckpt_state_get_rng(const attn_ckpt_state *st, const char *name, attn_rng *r) {
    if (!st || !name || !r)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_ckpt_state_get_rng: NULL argument");
    for (int i = 0; i < st->n_rng; i++)
        if (!strcmp(st->rng[i].name, name)) {
            attn_rng_set_state(r, st->rng[i].rng.seed, st->rng[i].rng.counter);
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_NOT_FOUND, "training state has no generator '%.40s'", name);
}

/* ---- save ---- */

static json_t *json_u64_str(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

static json_t *file_entry(const char *path, attn_status *s) {
    uint64_t bytes;
    uint32_t crc;
    if ((*s = hash_file(path, &bytes, &crc))) return NULL;
    char hex[16];
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    return json_pack("{s:I, s:s}", "bytes", (json_int_t)bytes, "crc32", hex);
}

static json_t *build_state(const attn_ckpt_state *st, const attn_optim *opt, json_t *files) {
    json_t *root = json_pack("{s:i, s:s, s:I, s:I, s:I}", "format_version",
                             ATTN_CKPT_FORMAT_VERSION, "library", "attn " ATTN_VERSION, "step",
                             (json_int_t)st->step, "epoch", (json_int_t)st->epoch, "data_position",
                             (json_int_t)st->data_position);
    if (!root) return NULL;
    bool ok = true;
    ok = ok && !json_object_set_new(root, "lr", isfinite(st->lr) ? json_real(st->lr) : json_null());
    ok = ok && !json_object_set_new(root, "best_valid_loss", isfinite(st->best_valid_loss)
                                                                 ? json_real(st->best_valid_loss)
                                                                 : json_null());
    json_t *rng = json_object();
    ok = ok && rng && !json_object_set_new(root, "rng", rng);
    for (int i = 0; ok && i < st->n_rng; i++) {
        json_t *e = json_object();
        ok = e && !json_object_set_new(e, "seed", json_u64_str(st->rng[i].rng.seed)) &&
             !json_object_set_new(e, "counter", json_u64_str(st->rng[i].rng.counter)) &&
             !json_object_set_new(rng, st->rng[i].name, e);
    }
    if (opt) {
        const attn_optim_params *p = &opt->p;
        json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "kind",
                              attn_optim_kind_name(p->kind), "step", (json_int_t)opt->step, "n",
                              (json_int_t)opt->n, "beta1", p->beta1, "beta2", p->beta2, "eps",
                              p->eps, "weight_decay", p->weight_decay, "momentum", p->momentum,
                              "dampening", p->dampening, "nesterov", (int)p->nesterov);
        ok = ok && o && !json_object_set_new(root, "optimizer", o);
    }
    ok = ok && !json_object_set(root, "files", files);
    if (ok && st->extra) ok = !json_object_set(root, "extra", st->extra);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* One durable step of a save done; under the test hook, "crash" here. */
#define DURABLE_STEP()                                                                             \
    do {                                                                                           \
        test_pause();                                                                              \
        if (attn_ckpt__crash_after > 0 && ++steps == attn_ckpt__crash_after) {                     \
            s = attn_fail(ATTN_STATUS_IO, "%s: simulated crash after step %d", clean, steps);      \
            crashed = true;                                                                        \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

attn_status attn_ckpt_save(const char *dir, const attn_ckpt_tensor *tensors, int ntensors,
                           const attn_optim *opt, const attn_ckpt_state *st) {
    if (!dir || !*dir || !st || ntensors < 0 || (ntensors > 0 && !tensors))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_ckpt_save: bad arguments");
    pthread_once(&test_env_once, test_env_read);
    char *clean, *parent, *base;
    attn_status s = split_dir(dir, &clean, &parent, &base);
    if (s) return s;
    char *tmp = NULL, *prev = cat3(clean, ".prev", ""), *path = NULL, *optpath = NULL;
    attn_st_entry *ent = NULL;
    json_t *files = NULL, *root = NULL;
    char *text = NULL;
    bool crashed = false, tmp_made = false;
    int steps = 0;
    if (!prev) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
        goto done;
    }
    if (path_exists(clean) && !is_dir(clean)) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: exists and is not a directory", clean);
        goto done;
    }
    /* the directory whose extra files are carried over: DIR, or DIR.prev after a crash */
    const char *old = is_dir(clean) ? clean : is_dir(prev) ? prev : NULL;
    if (old && (s = carry_over(old, NULL, true))) goto done;
    remove_stale_tmp(parent, base);
    if (old == clean) {
        /* DIR holds a complete checkpoint: a DIR.prev that a crash left after the fallback's
         * second rename is garbage (the exchange path never looks at it, and a load must not
         * bring it back later) */
        char *djs = cat3(clean, "/", F_STATE);
        if (djs && path_exists(djs) && is_dir(prev)) remove_flat_dir(prev);
        free(djs);
    }

    /* 1. the complete new checkpoint in DIR.tmp-XXXXXX */
    tmp = cat3(clean, ".tmp-XXXXXX", "");
    if (!tmp) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
        goto done;
    }
    if (!mkdtemp(tmp)) {
        s = attn_fail(ATTN_STATUS_IO, "%s: cannot create temporary directory %s: %s", clean, tmp,
                      strerror(errno));
        goto done;
    }
    tmp_made = true;
    test_pause();
    ent = calloc((size_t)ntensors + 2, sizeof *ent);
    path = cat3(tmp, "/", F_MODEL);
    optpath = cat3(tmp, "/", F_OPTIM);
    files = json_object();
    if (!ent || !path || !optpath || !files) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
        goto done;
    }
    for (int i = 0; i < ntensors; i++) {
        const attn_ckpt_tensor *t = &tensors[i];
        if (t->ndim < 0 || t->ndim > ATTN_MAX_DIMS) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: tensor %d ('%s'): ndim %d", clean, i,
                          t->name ? t->name : "?", t->ndim);
            goto done;
        }
        ent[i].name = t->name;
        ent[i].dtype = ATTN_DTYPE_F32;
        ent[i].ndim = t->ndim;
        memcpy(ent[i].shape, t->shape, sizeof ent[i].shape);
        ent[i].data = t->data;
    }
    static const char *const model_meta[] = {"format", "pt", NULL};
    if ((s = attn_st_save(path, ent, ntensors, model_meta))) goto done;
    json_t *fe = file_entry(path, &s);
    if (!fe || json_object_set_new(files, F_MODEL, fe)) {
        if (!s) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
        goto done;
    }
    DURABLE_STEP();
    if (opt) {
        char stepb[32], nb[32];
        snprintf(stepb, sizeof stepb, "%" PRId64, opt->step);
        snprintf(nb, sizeof nb, "%zu", opt->n);
        const char *meta[] = {"kind", attn_optim_kind_name(opt->p.kind), "step", stepb, "n", nb,
                              NULL};
        attn_st_entry oe[2];
        int no = 0;
        const char *mname = opt->p.kind == ATTN_OPTIM_SGD ? "momentum_buffer" : "m";
        if (opt->m) oe[no++] = (attn_st_entry){mname, ATTN_DTYPE_F32, 1, {(int64_t)opt->n}, opt->m};
        if (opt->v) oe[no++] = (attn_st_entry){"v", ATTN_DTYPE_F32, 1, {(int64_t)opt->n}, opt->v};
        if ((s = attn_st_save(optpath, oe, no, meta))) goto done;
        fe = file_entry(optpath, &s);
        if (!fe || json_object_set_new(files, F_OPTIM, fe)) {
            if (!s) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
            goto done;
        }
        DURABLE_STEP();
    }
    root = build_state(st, opt, files);
    text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    if (!text) {
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                      "%s: cannot serialize the training state (is extra valid JSON?)", clean);
        goto done;
    }
    {
        char *jp = cat3(tmp, "/", F_STATE);
        attn_atomic a;
        if (!jp) s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", clean);
        else s = attn_atomic_begin(jp, &a);
        free(jp);
        if (s) goto done;
        s = attn_atomic_write(&a, text, strlen(text));
        if (!s) s = attn_atomic_write(&a, "\n", 1);
        if (s) attn_atomic_abort(&a);
        else s = attn_atomic_commit(&a);
        if (s) goto done;
    }
    DURABLE_STEP();

    /* 2. carry the old directory's other files over, make the new directory durable */
    if (old && (s = carry_over(old, tmp, false))) goto done;
    if ((s = fsync_path(tmp, true))) goto done;
    DURABLE_STEP();

    /* 3. put it in place */
    bool swapped = false;
#if defined(__linux__) && defined(RENAME_EXCHANGE)
    if (!attn_ckpt__no_exchange && !test_no_exchange && old == clean) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, clean, RENAME_EXCHANGE) == 0) {
            swapped = true; /* tmp now names the old checkpoint */
            if ((s = fsync_path(parent, true))) goto done;
            DURABLE_STEP();
        } else if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
            s = attn_fail(ATTN_STATUS_IO, "%s: cannot exchange with %s: %s", clean, tmp,
                          strerror(errno));
            goto done;
        }
    }
#endif
    if (!swapped) {
        if (old == clean) {
            /* DIR is complete, so a DIR.prev left by an earlier crash is garbage */
            if (is_dir(prev)) remove_flat_dir(prev);
            if (rename(clean, prev) != 0) {
                s = attn_fail(ATTN_STATUS_IO, "%s: cannot rename to %s: %s", clean, prev,
                              strerror(errno));
                goto done;
            }
            DURABLE_STEP();
        }
        if (rename(tmp, clean) != 0) {
            s = attn_fail(ATTN_STATUS_IO, "%s: cannot rename %s to it: %s", clean, tmp,
                          strerror(errno));
            if (old == clean) rename(prev, clean); /* undo; DIR.prev is loadable anyway */
            goto done;
        }
        tmp_made = false;
        if ((s = fsync_path(parent, true))) goto done;
        DURABLE_STEP();
        if (is_dir(prev)) remove_flat_dir(prev);
    }
    /* swapped: tmp_made stays true, so the old checkpoint (now at tmp) is removed below */

done:
    if (tmp_made && !crashed) remove_flat_dir(tmp);
    free(text);
    json_decref(root);
    json_decref(files);
    free(ent);
    free(path);
    free(optpath);
    free(tmp);
    free(prev);
    free(clean);
    free(parent);
    free(base);
    return s;
}

/* ---- load ---- */

typedef struct {
    const char *file; /* for messages */
    json_t *root;
} jctx;

static attn_status need(const jctx *j, json_t *obj, const char *key, json_type type, bool nullable,
                        json_t **out, const char *where) {
    *out = NULL;
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) return attn_fail(ATTN_STATUS_FORMAT, "%s: missing field \"%s%s\"", j->file, where, key);
    bool ok = json_typeof(v) == type || (nullable && json_is_null(v)) ||
              (type == JSON_REAL && json_is_integer(v)) ||
              (type == JSON_TRUE && json_is_boolean(v));
    if (!ok) {
        const char *want = type == JSON_INTEGER ? "an integer" : type == JSON_REAL ? "a number"
                         : type == JSON_STRING  ? "a string"   : type == JSON_OBJECT ? "an object"
                         : type == JSON_TRUE    ? "a boolean"  : "another type";
        return attn_fail(ATTN_STATUS_FORMAT, "%s: field \"%s%s\" must be %s%s", j->file, where,
                         key, want, nullable ? " or null" : "");
    }
    *out = v;
    return ATTN_STATUS_OK;
}

static attn_status parse_u64(const jctx *j, json_t *v, const char *what, uint64_t *out) {
    const char *t = json_string_value(v);
    char *end;
    errno = 0;
    unsigned long long x = t && *t >= '0' && *t <= '9' ? strtoull(t, &end, 10) : 0;
    if (!t || !(*t >= '0' && *t <= '9') || errno || *end)
        return attn_fail(ATTN_STATUS_FORMAT,
                         "%s: field \"%s\" must be a decimal unsigned 64-bit integer string",
                         j->file, what);
    *out = x;
    return ATTN_STATUS_OK;
}

/* Check DIR/name against the JSON's "files" entry. */
static attn_status verify_file(const jctx *j, const char *dir, const char *name) {
    json_t *files = json_object_get(j->root, "files"), *e, *jb, *jc;
    char where[96];
    snprintf(where, sizeof where, "files.%s.", name);
    attn_status s;
    if ((s = need(j, files, name, JSON_OBJECT, false, &e, "files.")) ||
        (s = need(j, e, "bytes", JSON_INTEGER, false, &jb, where)) ||
        (s = need(j, e, "crc32", JSON_STRING, false, &jc, where)))
        return s;
    char *p = cat3(dir, "/", name);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    uint64_t bytes;
    uint32_t crc;
    s = hash_file(p, &bytes, &crc);
    if (!s && (json_int_t)bytes != json_integer_value(jb))
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: %llu bytes, but %s records %lld (truncated, or from another save)", p,
                      (unsigned long long)bytes, F_STATE, (long long)json_integer_value(jb));
    char hex[16] = "";
    if (!s) snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    if (!s && strcmp(hex, json_string_value(jc)) != 0)
        s = attn_fail(ATTN_STATUS_FORMAT,
                      "%s: CRC-32 %s, but %s records %.16s (corrupt, or from another save)", p,
                      hex, F_STATE, json_string_value(jc));
    free(p);
    return s;
}

static attn_status load_model(const char *dir, attn_ckpt_tensor *tensors, int ntensors) {
    char *p = cat3(dir, "/", F_MODEL);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    attn_st_file *f;
    attn_status s = attn_st_open(p, &f);
    if (s) {
        free(p);
        return s;
    }
    /* names and shapes first, so a mismatch leaves the caller's buffers untouched */
    for (int i = 0; i < ntensors && !s; i++) {
        const attn_ckpt_tensor *t = &tensors[i];
        const attn_st_tensor *ft = t->name ? attn_st_find(f, t->name) : NULL;
        if (!t->name || t->ndim < 0 || t->ndim > ATTN_MAX_DIMS || !t->data)
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_ckpt_load: tensor %d is invalid", i);
        else if (!ft)
            s = attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no tensor '%s', which the model has", p,
                          t->name);
        else if (ft->dtype != ATTN_DTYPE_F32)
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' is %s, expected F32", p, t->name,
                          attn_dtype_name(ft->dtype));
        else if (ft->ndim != t->ndim || memcmp(ft->shape, t->shape, (size_t)t->ndim * sizeof(int64_t))) {
            char a[160] = "", b[160] = "";
            for (int d = 0; d < ft->ndim; d++)
                snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "", (long long)ft->shape[d]);
            for (int d = 0; d < t->ndim; d++)
                snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' has shape [%s], the model [%s]", p,
                          t->name, a, b);
        }
    }
    for (int k = 0; k < attn_st_count(f) && !s; k++) {
        const char *nm = attn_st_tensor_at(f, k)->name;
        int i = 0;
        while (i < ntensors && strcmp(tensors[i].name, nm) != 0) i++;
        if (i == ntensors)
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: tensor '%s' is not in the model", p, nm);
    }
    for (int i = 0; i < ntensors && !s; i++)
        s = attn_st_read_f32(f, tensors[i].name, tensors[i].ndim, tensors[i].shape, tensors[i].data);
    attn_st_close(f);
    free(p);
    return s;
}

static attn_status load_optim(const jctx *j, const char *dir, attn_optim *opt) {
    json_t *jo, *jk, *js, *jn;
    attn_status s;
    if ((s = need(j, j->root, "optimizer", JSON_OBJECT, false, &jo, "")) ||
        (s = need(j, jo, "kind", JSON_STRING, false, &jk, "optimizer.")) ||
        (s = need(j, jo, "step", JSON_INTEGER, false, &js, "optimizer.")) ||
        (s = need(j, jo, "n", JSON_INTEGER, false, &jn, "optimizer.")))
        return s;
    if (strcmp(json_string_value(jk), attn_optim_kind_name(opt->p.kind)) != 0)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: optimizer.kind is \"%.20s\", but resuming with %s",
                         j->file, json_string_value(jk), attn_optim_kind_name(opt->p.kind));
    if (json_integer_value(jn) != (json_int_t)opt->n)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: optimizer.n is %lld, but the optimizer has %zu",
                         j->file, (long long)json_integer_value(jn), opt->n);
    if (json_integer_value(js) < 0)
        return attn_fail(ATTN_STATUS_FORMAT, "%s: optimizer.step is negative", j->file);
    char *p = cat3(dir, "/", F_OPTIM);
    if (!p) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    attn_st_file *f;
    if ((s = attn_st_open(p, &f))) {
        free(p);
        return s;
    }
    const char *mk = attn_st_metadata(f, "kind");
    if (!mk || strcmp(mk, attn_optim_kind_name(opt->p.kind)) != 0)
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: __metadata__.kind is %s, expected \"%s\"", p,
                      mk ? mk : "missing", attn_optim_kind_name(opt->p.kind));
    int64_t shape[1] = {(int64_t)opt->n};
    const char *mname = opt->p.kind == ATTN_OPTIM_SGD ? "momentum_buffer" : "m";
    if (!s && opt->m && (s = attn_st_read_f32(f, mname, 1, shape, opt->m)) == ATTN_STATUS_NOT_FOUND)
        s = attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no tensor '%s'", p, mname);
    if (!s && opt->v && (s = attn_st_read_f32(f, "v", 1, shape, opt->v)) == ATTN_STATUS_NOT_FOUND)
        s = attn_fail(ATTN_STATUS_NOT_FOUND, "%s: no tensor 'v'", p);
    if (!s) opt->step = (int64_t)json_integer_value(js);
    attn_st_close(f);
    free(p);
    return s;
}

/* DIR; or, when a crash in the fallback swap left DIR missing and DIR.prev complete, DIR.prev
 * renamed back to DIR (the old checkpoint, with its other files: callers such as a trainer that
 * reads DIR/config.json next find everything where it belongs; a complete but unswapped
 * DIR.tmp-XXXXXX is left for the next save to remove); DIR.prev itself if that rename fails.
 * NULL only on a bad name or out of memory. */
static char *resolve(const char *dir) {
    char *c, *parent, *base;
    if (split_dir(dir, &c, &parent, &base)) return NULL;
    free(base);
    if (path_exists(c)) {
        free(parent);
        return c;
    }
    char *prev = cat3(c, ".prev", "");
    char *js = prev ? cat3(prev, "/", F_STATE) : NULL;
    bool use_prev = js && path_exists(js);
    free(js);
    if (use_prev && rename(prev, c) == 0) {
        (void)fsync_path(parent, true); /* best effort: were it lost, DIR.prev would be back */
        use_prev = false;
    }
    free(parent);
    if (use_prev) {
        free(c);
        return prev;
    }
    free(prev);
    return c;
}

bool attn_ckpt_exists(const char *dir) {
    if (!dir || !*dir) return false;
    char *d = resolve(dir);
    char *js = d ? cat3(d, "/", F_STATE) : NULL;
    bool r = js && path_exists(js);
    free(js);
    free(d);
    return r;
}

attn_status attn_ckpt_load(const char *dir, attn_ckpt_tensor *tensors, int ntensors,
                           attn_optim *opt, attn_ckpt_state *st) {
    if (!dir || !*dir || ntensors < 0 || (ntensors > 0 && !tensors))
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_ckpt_load: bad arguments");
    char *d = resolve(dir);
    if (!d) return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: bad checkpoint directory", dir);
    char *jp = cat3(d, "/", F_STATE);
    attn_status s = ATTN_STATUS_OK;
    jctx j = {jp, NULL};
    json_t *v;
    if (!jp) {
        s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
        goto done;
    }
    if (!is_dir(d)) {
        s = attn_fail(ATTN_STATUS_IO, "%s: no such checkpoint directory", d);
        goto done;
    }
    if (!path_exists(jp)) {
        s = attn_fail(ATTN_STATUS_IO, "%s: missing (not a checkpoint, or an incomplete one)", jp);
        goto done;
    }
    json_error_t err;
    j.root = json_load_file(jp, JSON_REJECT_DUPLICATES, &err);
    if (!j.root) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s:%d:%d: invalid JSON: %s", jp, err.line, err.column,
                      err.text);
        goto done;
    }
    if (!json_is_object(j.root)) {
        s = attn_fail(ATTN_STATUS_FORMAT, "%s: must be a JSON object", jp);
        goto done;
    }
    if ((s = need(&j, j.root, "format_version", JSON_INTEGER, false, &v, ""))) goto done;
    if (json_integer_value(v) != ATTN_CKPT_FORMAT_VERSION) {
        s = attn_fail(json_integer_value(v) > ATTN_CKPT_FORMAT_VERSION ? ATTN_STATUS_UNSUPPORTED
                                                                       : ATTN_STATUS_FORMAT,
                      "%s: format_version %lld, this attn reads version %d", jp,
                      (long long)json_integer_value(v), ATTN_CKPT_FORMAT_VERSION);
        goto done;
    }
    json_t *jfiles;
    if ((s = need(&j, j.root, "files", JSON_OBJECT, false, &jfiles, ""))) goto done;
    if ((s = verify_file(&j, d, F_MODEL))) goto done;
    bool has_opt = json_object_get(jfiles, F_OPTIM) != NULL;
    if (opt && !has_opt) {
        s = attn_fail(ATTN_STATUS_NOT_FOUND, "%s: files.%s: the checkpoint has no optimizer state",
                      jp, F_OPTIM);
        goto done;
    }
    if (has_opt && (s = verify_file(&j, d, F_OPTIM))) goto done;

    /* the training state, parsed fully before any tensor is read into the caller's buffers */
    attn_ckpt_state ns = attn_ckpt_state_init();
    json_t *jstep, *jep, *jpos, *jlr, *jbest, *jrng;
    if ((s = need(&j, j.root, "step", JSON_INTEGER, false, &jstep, "")) ||
        (s = need(&j, j.root, "epoch", JSON_INTEGER, false, &jep, "")) ||
        (s = need(&j, j.root, "data_position", JSON_INTEGER, false, &jpos, "")) ||
        (s = need(&j, j.root, "lr", JSON_REAL, true, &jlr, "")) ||
        (s = need(&j, j.root, "best_valid_loss", JSON_REAL, true, &jbest, "")) ||
        (s = need(&j, j.root, "rng", JSON_OBJECT, false, &jrng, "")))
        goto done;
    ns.step = json_integer_value(jstep);
    ns.epoch = json_integer_value(jep);
    ns.data_position = json_integer_value(jpos);
    ns.lr = json_is_null(jlr) ? NAN : json_number_value(jlr);
    ns.best_valid_loss = json_is_null(jbest) ? INFINITY : json_number_value(jbest);
    const char *rk;
    json_t *rv;
    json_object_foreach(jrng, rk, rv) {
        json_t *jseed, *jctr;
        uint64_t seed, ctr;
        char where[64], what[96];
        snprintf(where, sizeof where, "rng.%.40s.", rk);
        if ((s = need(&j, jrng, rk, JSON_OBJECT, false, &rv, "rng.")) ||
            (s = need(&j, rv, "seed", JSON_STRING, false, &jseed, where)) ||
            (s = need(&j, rv, "counter", JSON_STRING, false, &jctr, where)))
            goto done;
        snprintf(what, sizeof what, "%sseed", where);
        if ((s = parse_u64(&j, jseed, what, &seed))) goto done;
        snprintf(what, sizeof what, "%scounter", where);
        if ((s = parse_u64(&j, jctr, what, &ctr))) goto done;
        attn_rng r;
        attn_rng_set_state(&r, seed, ctr);
        if ((s = attn_ckpt_state_set_rng(&ns, rk, &r))) {
            s = attn_fail(ATTN_STATUS_FORMAT, "%s: rng: bad name '%.40s' or too many generators",
                          jp, rk);
            goto done;
        }
    }
    if (opt) {
        /* kind and size first: a mismatch must not reach the model buffers either */
        json_t *jo, *jk, *jn;
        if ((s = need(&j, j.root, "optimizer", JSON_OBJECT, false, &jo, "")) ||
            (s = need(&j, jo, "kind", JSON_STRING, false, &jk, "optimizer.")) ||
            (s = need(&j, jo, "n", JSON_INTEGER, false, &jn, "optimizer.")))
            goto done;
        if (strcmp(json_string_value(jk), attn_optim_kind_name(opt->p.kind)) != 0 ||
            json_integer_value(jn) != (json_int_t)opt->n) {
            s = load_optim(&j, d, opt); /* reports which */
            if (!s) s = attn_fail(ATTN_STATUS_FORMAT, "%s: optimizer mismatch", jp);
            goto done;
        }
    }
    if ((s = load_model(d, tensors, ntensors))) goto done;
    if (opt && (s = load_optim(&j, d, opt))) goto done;
    if (st) {
        json_t *ex = json_object_get(j.root, "extra");
        ns.extra = ex ? json_incref(ex) : NULL;
        *st = ns;
    }
done:
    json_decref(j.root);
    free(jp);
    free(d);
    return s;
}

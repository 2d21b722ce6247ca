/* cmd_tokenizer.c — `attn tokenizer train|encode|decode`: train a BPE tokenizer with byte
 * fallback on a text or TSV file and save it as DIR/tokenizer.json (loadable by Hugging Face
 * `tokenizers`, same ids), encode text to ids and decode ids to text (src/tok/). */
#include "cmd_tokenizer.h"

#include "cli.h"

#include "attn_tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char tok_usage[] =
    "usage: attn tokenizer train --data FILE --out DIR [--vocab-size N] [--column 1|2|all]\n"
    "                            [--min-frequency N] [--min-char-frequency N]\n"
    "       attn tokenizer encode --tokenizer DIR|FILE [TEXT...]\n"
    "       attn tokenizer decode --tokenizer DIR|FILE [--keep-special] [IDS...]\n"
    "\n"
    "train   learns a BPE vocabulary (default 8000 ids: <pad> <unk> <s> </s>, the 256 byte\n"
    "        tokens <0x00>..<0xFF>, the characters, the merges) from FILE, one text per line\n"
    "        (UTF-8). For a tab-separated FILE, --column picks column 1 or 2 or, with 'all'\n"
    "        (the default), both: the sentence pair of a Tatoeba file, whose third column is\n"
    "        attribution. Writes DIR/tokenizer.json, which Hugging Face `tokenizers` loads.\n"
    "encode  prints the ids of each TEXT (or of each line of standard input) on one line.\n"
    "decode  prints the text of the ids (separated by spaces or commas) of each argument, or of\n"
    "        each line of standard input; special tokens are dropped unless --keep-special.\n";

/* ---- train ---- */

typedef struct {
    char *data;
    size_t size;
} file_buf;

static int read_file(const char *path, file_buf *f) {
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!fp) {
        attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int err = ferror(fp);
    if (fp != stdin) fclose(fp);
    if (!buf) {
        attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        return -1;
    }
    if (err) {
        free(buf);
        attn_set_error(ATTN_STATUS_IO, "%s: read error", path);
        return -1;
    }
    f->data = buf;
    f->size = n;
    return 0;
}

/* A progress line rewritten in place on a terminal; elsewhere only the summary line is printed. */
static void progress(void *ctx, int32_t done, int32_t total) {
    if (!isatty(fileno(stderr))) return;
    const struct timespec *t0 = ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
    fprintf(stderr, "\rattn: training BPE: %ld/%ld merges, %.1f s", (long)done, (long)total, s);
    fflush(stderr);
}

static int cmd_train(int argc, char **argv) {
    const char *data = NULL, *out = NULL;
    int column = 0; /* 0 = all */
    attn_tok_train_params p = attn_tok_train_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(tok_usage, stdout);
            return CLI_EXIT_OK;
        }
        if (!v) return cli_usage_error("tokenizer train: %s needs a value", a);
        i++;
        if (!strcmp(a, "--data")) {
            data = v;
        } else if (!strcmp(a, "--out")) {
            out = v;
        } else if (!strcmp(a, "--vocab-size")) {
            if (!cli_parse_int(v, 300, 1 << 24, &p.vocab_size))
                return cli_usage_error("--vocab-size needs a number from 300 to 16777216");
        } else if (!strcmp(a, "--min-frequency")) {
            if (!cli_parse_int(v, 1, 1 << 30, &p.min_frequency))
                return cli_usage_error("--min-frequency needs a number >= 1");
        } else if (!strcmp(a, "--min-char-frequency")) {
            if (!cli_parse_int(v, 1, 1 << 30, &p.min_char_frequency))
                return cli_usage_error("--min-char-frequency needs a number >= 1");
        } else if (!strcmp(a, "--column")) {
            if (!strcmp(v, "all"))
                column = 0;
            else if (!cli_parse_int(v, 1, 2, &column))
                return cli_usage_error("--column must be 1, 2 or all");
        } else {
            return cli_usage_error("tokenizer train: unknown option '%s'", a);
        }
    }
    if (!data || !out) return cli_usage_error("tokenizer train needs --data FILE and --out DIR");

    file_buf f;
    if (read_file(data, &f)) return cli_fail(ATTN_STATUS_IO);
    char *s = f.data, *end = f.data + f.size;
    if (f.size >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* a UTF-8 byte order mark */
    size_t cap = 1024, n = 0, nlines = 0;
    const char **lines = malloc(cap * sizeof *lines);
    size_t *lens = malloc(cap * sizeof *lens);
    bool oom = !lines || !lens;
    int rc = CLI_EXIT_OK;
    while (s < end && !oom) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        size_t len = (size_t)(e - s);
        if (len && s[len - 1] == '\r') len--;
        nlines++;
        size_t at;
        const char *what = cli_text_problem(s, len, &at);
        if (what) {
            free(lines);
            free(lens);
            attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "%s:%zu: %s at byte %zu (0x%02X): training text must be UTF-8 without "
                           "NUL bytes",
                           strcmp(data, "-") ? data : "<stdin>", nlines, what, at + 1,
                           (unsigned)(unsigned char)s[at]);
            free(f.data);
            return cli_fail(ATTN_STATUS_INVALID_ARGUMENT);
        }
        /* the wanted columns of this line */
        const char *col[2];
        size_t cl[2];
        int nc = 0;
        const char *tab = memchr(s, '\t', len);
        if (!tab) {
            col[nc] = s, cl[nc++] = len;
        } else {
            const char *c2 = tab + 1, *tab2 = memchr(c2, '\t', len - (size_t)(c2 - s));
            size_t l2 = tab2 ? (size_t)(tab2 - c2) : len - (size_t)(c2 - s);
            if (column != 2) col[nc] = s, cl[nc++] = (size_t)(tab - s);
            if (column != 1) col[nc] = c2, cl[nc++] = l2;
        }
        for (int k = 0; k < nc && !oom; k++) {
            if (n == cap) {
                const char **l2 = realloc(lines, 2 * cap * sizeof *lines);
                if (l2) lines = l2;
                size_t *n2 = realloc(lens, 2 * cap * sizeof *lens);
                if (n2) lens = n2;
                oom = !l2 || !n2;
                if (!oom) cap *= 2;
            }
            if (!oom) {
                lines[n] = col[k];
                lens[n++] = cl[k];
            }
        }
        s = nl ? nl + 1 : end;
    }
    if (oom) {
        free(lines);
        free(lens);
        free(f.data);
        attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", data);
        return cli_fail(ATTN_STATUS_OUT_OF_MEMORY);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    p.progress = progress;
    p.progress_ctx = &t0;
    attn_tok *tok = NULL;
    attn_status st = attn_tok_train_bpe(&p, lines, lens, n, &tok);
    if (isatty(fileno(stderr))) fputc('\n', stderr);
    char *path = NULL;
    if (!st) {
        if (mkdir(out, 0777) != 0 && errno != EEXIST) {
            st = attn_set_error(ATTN_STATUS_IO, "%s: cannot create directory: %s", out,
                                strerror(errno));
        } else {
            size_t ol = strlen(out);
            path = malloc(ol + sizeof "/tokenizer.json");
            if (!path) {
                st = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            } else {
                memcpy(path, out, ol);
                memcpy(path + ol, "/tokenizer.json", sizeof "/tokenizer.json");
                st = attn_tok_save(tok, path);
            }
        }
    }
    if (st) {
        rc = cli_fail(st);
    } else {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "attn: %ld tokens from %zu texts (%zu lines of %s) in %.1f s -> %s\n",
                (long)attn_tok_vocab_size(tok), n, nlines, data, sec, path);
    }
    free(path);
    attn_tok_free(tok);
    free(lines);
    free(lens);
    free(f.data);
    return rc;
}

/* ---- encode / decode ---- */

static int load_tok(int argc, char **argv, attn_tok **tok, int *first, bool *keep) {
    const char *path = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer")) {
            if (i + 1 >= argc) return cli_usage_error("--tokenizer needs a directory or file");
            path = argv[++i];
        } else if (keep && !strcmp(argv[i], "--keep-special")) {
            *keep = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(tok_usage, stdout);
            return -1;
        } else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            break;
        }
    }
    if (!path) return cli_usage_error("tokenizer %s needs --tokenizer DIR|FILE", argv[0]);
    attn_status st = attn_tok_load(path, tok);
    if (st) return cli_fail(st);
    *first = i;
    return CLI_EXIT_OK;
}

/* A failure of input `index` (1-based) of `where` ("argument " or "<stdin>:"): one line naming
 * the input, then the library's message. */
static int fail_at(attn_status st, const char *where, size_t index) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", attn_last_error());
    attn_set_error(st, "%s%zu: %s", where, index, msg);
    return cli_fail(st);
}

static int encode_one(const attn_tok *tok, const char *s, size_t n, const char *where,
                      size_t index) {
    const char *nul = memchr(s, '\0', n);
    if (nul) {
        attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                       "NUL byte at byte %zu: expected UTF-8 text without NUL bytes",
                       (size_t)(nul - s) + 1);
        return fail_at(ATTN_STATUS_INVALID_ARGUMENT, where, index);
    }
    int32_t *ids;
    size_t k;
    attn_status st = attn_tok_encode_alloc(tok, s, n, &ids, &k);
    if (st) return fail_at(st, where, index);
    for (size_t i = 0; i < k; i++) printf(i ? " %ld" : "%ld", (long)ids[i]);
    putchar('\n');
    attn_free(ids);
    return CLI_EXIT_OK;
}

static int read_failed(size_t lineno) {
    attn_set_error(ATTN_STATUS_IO, "<stdin>: read error after line %zu", lineno);
    return cli_fail(ATTN_STATUS_IO);
}

static int cmd_encode(int argc, char **argv) {
    attn_tok *tok;
    int first;
    int rc = load_tok(argc, argv, &tok, &first, NULL);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if (first < argc) {
        for (int i = first; i < argc && !rc; i++)
            rc = encode_one(tok, argv[i], strlen(argv[i]), "argument ", (size_t)(i - first + 1));
    } else {
        char *line = NULL;
        size_t cap = 0, lineno = 0;
        ssize_t len;
        while (!rc && (len = getline(&line, &cap, stdin)) >= 0) {
            if (len && line[len - 1] == '\n') len--;
            rc = encode_one(tok, line, (size_t)len, "<stdin>:", ++lineno);
        }
        free(line);
        if (!rc && ferror(stdin)) rc = read_failed(lineno);
    }
    attn_tok_free(tok);
    return rc;
}

/* Ids separated by spaces, tabs or commas. A malformed list is a usage error when it came from
 * the command line, a failure when it came from standard input. */
static int decode_one(const attn_tok *tok, const char *s, bool keep, const char *where,
                      size_t index, bool from_args) {
    size_t cap = 64, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = CLI_EXIT_OK;
    while (ids && *s) {
        if (*s == ' ' || *s == '\t' || *s == ',' || *s == '\r') {
            s++;
            continue;
        }
        char *e;
        errno = 0;
        long v = strtol(s, &e, 10);
        if (e == s || errno || v < 0 || v > INT32_MAX ||
            (*e && *e != ' ' && *e != '\t' && *e != ',' && *e != '\r')) {
            size_t w = strcspn(s, " \t,\r");
            attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "'%.*s' is not an id: expected integers from 0 to %ld separated by "
                           "spaces or commas",
                           (int)(w > 40 ? 40 : w), s, (long)attn_tok_vocab_size(tok) - 1);
            free(ids);
            if (from_args) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", attn_last_error());
                return cli_usage_error("tokenizer decode: %s%zu: %s", where, index, msg);
            }
            return fail_at(ATTN_STATUS_INVALID_ARGUMENT, where, index);
        }
        if (n == cap) {
            int32_t *p = realloc(ids, 2 * cap * sizeof *ids);
            if (!p) break;
            ids = p;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        s = e;
    }
    if (!ids || *s) {
        free(ids);
        attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "tokenizer decode: out of memory");
        return cli_fail(ATTN_STATUS_OUT_OF_MEMORY);
    }
    char *text;
    size_t len;
    attn_status st =
        attn_tok_decode_alloc(tok, ids, n, keep ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0, &text, &len);
    if (st) {
        rc = fail_at(st, where, index);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
        attn_free(text);
    }
    free(ids);
    return rc;
}

static int cmd_decode(int argc, char **argv) {
    attn_tok *tok;
    int first;
    bool keep = false;
    int rc = load_tok(argc, argv, &tok, &first, &keep);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    for (int i = first; i < argc && !rc; i++)
        if (!strcmp(argv[i], "--keep-special")) keep = true;
    if (first < argc) {
        size_t k = 0;
        for (int i = first; i < argc && !rc; i++)
            if (strcmp(argv[i], "--keep-special"))
                rc = decode_one(tok, argv[i], keep, "argument ", ++k, true);
    } else {
        char *line = NULL;
        size_t cap = 0, lineno = 0;
        ssize_t len;
        while (!rc && (len = getline(&line, &cap, stdin)) >= 0) {
            lineno++;
            if (len && line[len - 1] == '\n') line[--len] = '\0';
            if (memchr(line, '\0', (size_t)len)) {
                attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "NUL byte in a list of ids");
                rc = fail_at(ATTN_STATUS_INVALID_ARGUMENT, "<stdin>:", lineno);
                break;
            }
            rc = decode_one(tok, line, keep, "<stdin>:", lineno, false);
        }
        free(line);
        if (!rc && ferror(stdin)) rc = read_failed(lineno);
    }
    attn_tok_free(tok);
    return rc;
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 2) {
        fputs(tok_usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(sub, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(sub, "decode")) return cmd_decode(argc - 1, argv + 1);
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        fputs(tok_usage, stdout);
        return CLI_EXIT_OK;
    }
    return cli_usage_error("tokenizer: unknown subcommand '%s' (train, encode or decode)", sub);
}

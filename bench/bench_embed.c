/* bench_embed.c — attn's side of issue 5's embedding targets, compared with sentence-transformers
 * by bench/torch_embed.py (sh bench/run.sh BUILD embed). Prints JSON lines
 * {"bench":"embed","case":...,"metric":...,"value":...} (higher is better).
 *
 * Model: models/all-MiniLM-L6-v2 (sh tools/get_minilm.sh). Sentences: 1,000 texts of 8 to 64
 * tokens ([CLS] and [SEP] included) made deterministically from the English side of
 * ../shared/data/tatoeba-eng-cmn/cmn.txt: text i starts at a line drawn with Philox (seed 1) and
 * joins the following lines with spaces until it reaches a target length drawn uniformly from
 * [8, 64] (never exceeding 64). They go to $ATTN_BENCH_DIR/embed_sentences.txt for the PyTorch
 * side, with attn's embeddings (embed_attn.npy) so that it can print the agreement.
 *
 *   throughput  attn_embed_encode of the 1,000 texts with batch_size 32 (tokenization included,
 *               as SentenceTransformer.encode includes it), best of ATTN_BENCH_ROUNDS (3) passes:
 *               sentences/s
 *   latency     one text per call, texts 0..49 in turn after a warm-up call, ATTN_BENCH_LAT_ROUNDS
 *               (5) passes over the 50; the median of all the calls' times (reported as
 *               calls/s = 1 / median, higher is better; the note line gives milliseconds)
 * The note line also gives both in process CPU time (all threads together), the number to compare
 * A/B builds by on a busy machine (with ATTN_BENCH_THREADS=1).
 * Where the CPU has AVX512-BF16, both are measured again with the opt-in bfloat16 dense layers
 * (attn embed --precision bf16; attn_bert_pack_weights_precision), reported twice: against
 * sentence-transformers in float32 (its default, the peer) and in bfloat16
 * (model.to(torch.bfloat16), the same-precision peer); embed_attn_bf16.npy goes to the PyTorch
 * side for the agreement line.
 * Environment: ATTN_BENCH_THREADS (2), ATTN_BENCH_DIR, ATTN_BENCH_ROUNDS (3),
 * ATTN_BENCH_LAT_ROUNDS (5). Run from the
 * repository root. */
#include "attn_core.h"
#include "attn_embed.h"
#include "attn_io.h"
#include "attn_kernels.h"
#include "attn_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATA_PATH "../shared/data/tatoeba-eng-cmn/cmn.txt"
#define MODEL_DIR "models/all-MiniLM-L6-v2"
#define N_SENT 1000
#define MIN_TOK 8
#define MAX_TOK 64
#define BATCH 32
#define N_SINGLE 50

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU time of the whole process (all threads): the A/B measure on a busy machine. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_embed: %s: %s\n", what, attn_last_error());
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The English column of the Tatoeba file, one string per line (malloc'd). */
static char **read_english(size_t *n) {
    FILE *fp = fopen(DATA_PATH, "rb");
    if (!fp) return NULL;
    size_t cap = 1024, k = 0;
    char **v = malloc(cap * sizeof *v);
    char line[8192];
    while (v && fgets(line, sizeof line, fp)) {
        char *s = line;
        if (k == 0 && !strncmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* BOM */
        char *tab = strchr(s, '\t');
        if (!tab) continue;
        *tab = '\0';
        if (k == cap) {
            char **nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) break;
            v = nv, cap *= 2;
        }
        v[k++] = strdup(s);
    }
    fclose(fp);
    *n = k;
    return v;
}

typedef struct {
    double best, best_cpu; /* sentences/s over the 1,000 texts: wall, process CPU */
    double med, med_cpu;   /* median seconds per single-text call: wall, process CPU */
} perf;

/* The throughput (best of rounds) and single-text latency measurements on e. */
static int measure(attn_embed *e, const char *const *texts, float *emb, int rounds, perf *out) {
    memset(out, 0, sizeof *out);
    if (attn_embed_encode(e, N_SENT, texts, NULL, emb)) return fail("encode"); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        double t = now(), c = cpu_now();
        if (attn_embed_encode(e, N_SENT, texts, NULL, emb)) return fail("encode");
        t = now() - t, c = cpu_now() - c;
        if (N_SENT / t > out->best) out->best = N_SENT / t;
        if (N_SENT / c > out->best_cpu) out->best_cpu = N_SENT / c;
    }
    float one[1024];
    if (attn_embed_encode(e, 1, texts, NULL, one)) return fail("encode");
    int lat_rounds = env_int("ATTN_BENCH_LAT_ROUNDS", 5);
    if (lat_rounds < 1) lat_rounds = 1;
    const int n_lat = lat_rounds * N_SINGLE;
    double *lat = malloc((size_t)n_lat * sizeof *lat);
    double *lat_cpu = malloc((size_t)n_lat * sizeof *lat_cpu);
    if (!lat || !lat_cpu) {
        free(lat), free(lat_cpu);
        return fail("out of memory");
    }
    for (int k = 0; k < n_lat; k++) {
        const int i = k % N_SINGLE;
        double t = now(), c = cpu_now();
        if (attn_embed_encode(e, 1, texts + i, NULL, one)) {
            free(lat), free(lat_cpu);
            return fail("encode");
        }
        lat[k] = now() - t;
        lat_cpu[k] = cpu_now() - c;
    }
    qsort(lat, (size_t)n_lat, sizeof lat[0], cmp_double);
    qsort(lat_cpu, (size_t)n_lat, sizeof lat_cpu[0], cmp_double);
    out->med = 0.5 * (lat[n_lat / 2 - 1] + lat[n_lat / 2]);
    out->med_cpu = 0.5 * (lat_cpu[n_lat / 2 - 1] + lat_cpu[n_lat / 2]);
    free(lat), free(lat_cpu);
    return 0;
}

int main(void) {
    const int threads = env_int("ATTN_BENCH_THREADS", 2), rounds = env_int("ATTN_BENCH_ROUNDS", 3);
    attn_set_num_threads(threads);
    (void)attn_set_flush_denormals(true); /* as the attn CLI does */
    const char *dir = getenv("ATTN_BENCH_DIR");
    size_t n_en = 0;
    char **en = read_english(&n_en);
    if (!en || n_en < 100) {
        fprintf(stderr, "bench_embed: cannot read %s (run from the repository root)\n", DATA_PATH);
        return 1;
    }
    attn_embed_options eo = attn_embed_default_options();
    eo.batch_size = BATCH;
    attn_embed *e = NULL;
    if (attn_embed_load(MODEL_DIR, &eo, &e)) return fail(MODEL_DIR " (sh tools/get_minilm.sh)");
    const int dim = attn_embed_get_info(e)->dim;

    /* the 1,000 texts */
    char **sent = calloc(N_SENT, sizeof *sent);
    attn_rng rng;
    attn_rng_init(&rng, 1);
    int32_t ids[1024];
    size_t total_tok = 0, buf_cap = 4096;
    char *buf = malloc(buf_cap), *cand = malloc(buf_cap);
    for (int i = 0; i < N_SENT; i++) {
        size_t line = (size_t)attn_rng_below(&rng, n_en);
        int target = MIN_TOK + (int)attn_rng_below(&rng, MAX_TOK - MIN_TOK + 1);
        buf[0] = '\0';
        size_t ntok = 0;
        for (;;) {
            const char *add = en[line++ % n_en];
            size_t lb = strlen(buf), la = strlen(add);
            if (lb + la + 2 >= buf_cap) break;
            memcpy(cand, buf, lb);
            if (lb) cand[lb++] = ' ';
            memcpy(cand + lb, add, la + 1);
            size_t n = 0;
            if (attn_embed_tokenize(e, cand, strlen(cand), ids, 1024, &n)) return fail("tokenize");
            if (n > MAX_TOK) {
                if (ntok >= MIN_TOK) break;
                continue; /* too long to add: try the next line */
            }
            memcpy(buf, cand, strlen(cand) + 1);
            ntok = n;
            if ((int)ntok >= target) break;
        }
        sent[i] = strdup(buf);
        total_tok += ntok;
    }
    free(buf), free(cand);

    float *emb = malloc((size_t)N_SENT * (size_t)dim * sizeof *emb);
    const char *const *texts = (const char *const *)sent;
    perf f32;
    if (measure(e, texts, emb, rounds, &f32)) return 1;
    printf("all-MiniLM-L6-v2: %d texts of %d-%d tokens (mean %.1f) from Tatoeba English, batch "
           "%d, %d threads, %s kernels; single-text median latency %.2f ms; CPU time (all threads): "
           "%.1f sent per CPU-second in batches, %.2f ms median per single text\n",
           N_SENT, MIN_TOK, MAX_TOK, (double)total_tok / N_SENT, BATCH, threads,
           attn_backend_name(attn_get_backend()), 1e3 * f32.med, f32.best_cpu, 1e3 * f32.med_cpu);
    printf("{\"bench\":\"embed\",\"case\":\"MiniLM 1000 texts, batch 32\",\"metric\":\"sent/s\","
           "\"value\":%.2f}\n",
           f32.best);
    printf("{\"bench\":\"embed\",\"case\":\"MiniLM single text (1/median)\",\"metric\":\"calls/s\","
           "\"value\":%.2f}\n",
           1.0 / f32.med);
    /* The opt-in bfloat16 dense layers (attn embed --precision bf16), where the CPU has them:
     * against sentence-transformers in float32 (its default) and in bfloat16. */
    float *emb16 = NULL;
    if (attn_precision_available(ATTN_PRECISION_BF16)) {
        attn_embed *e16 = NULL;
        eo.precision = ATTN_PRECISION_BF16;
        if (attn_embed_load(MODEL_DIR, &eo, &e16)) return fail("load bf16");
        emb16 = malloc((size_t)N_SENT * (size_t)dim * sizeof *emb16);
        perf b16;
        if (!emb16 || measure(e16, texts, emb16, rounds, &b16)) return 1;
        attn_embed_free(e16);
        double worst = 1.0;
        for (int i = 0; i < N_SENT; i++) {
            const float c = attn_embed_cosine(dim, emb + (size_t)i * dim, emb16 + (size_t)i * dim);
            if (c < worst) worst = c;
        }
        printf("bf16: single-text median latency %.2f ms; CPU time: %.1f sent per CPU-second in "
               "batches, %.2f ms median per single text; min cosine to attn f32 %.6f\n",
               1e3 * b16.med, b16.best_cpu, 1e3 * b16.med_cpu, worst);
        static const char *const peers[] = {"ST f32", "ST bf16"};
        for (int k = 0; k < 2; k++) {
            printf("{\"bench\":\"embed\",\"case\":\"MiniLM 1000 texts, attn bf16 vs %s\","
                   "\"metric\":\"sent/s\",\"value\":%.2f}\n",
                   peers[k], b16.best);
            printf("{\"bench\":\"embed\",\"case\":\"MiniLM single text, attn bf16 vs %s\","
                   "\"metric\":\"calls/s\",\"value\":%.2f}\n",
                   peers[k], 1.0 / b16.med);
        }
    }
    if (dir) {
        char p[4096];
        snprintf(p, sizeof p, "%s/embed_sentences.txt", dir);
        FILE *fp = fopen(p, "w");
        if (!fp) return fail("cannot write embed_sentences.txt");
        for (int i = 0; i < N_SENT; i++) fprintf(fp, "%s\n", sent[i]);
        fclose(fp);
        snprintf(p, sizeof p, "%s/embed_attn.npy", dir);
        int64_t shape[2] = {N_SENT, dim};
        if (attn_npy_save_f32(p, emb, 2, shape)) return fail("embed_attn.npy");
        snprintf(p, sizeof p, "%s/embed_attn_bf16.npy", dir);
        if (emb16 && attn_npy_save_f32(p, emb16, 2, shape)) return fail("embed_attn_bf16.npy");
    }
    for (int i = 0; i < N_SENT; i++) free(sent[i]);
    for (size_t i = 0; i < n_en; i++) free(en[i]);
    free(sent), free(en), free(emb), free(emb16);
    attn_embed_free(e);
    return 0;
}

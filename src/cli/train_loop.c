/* train_loop.c — the shared options and the one training loop of `attn train` (train_loop.h). */
#include "train_loop.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ==== the shared options ==================================================================== */

#define F_ALL (TRAIN_ENCDEC | TRAIN_GPT | TRAIN_BERT)
#define OFF(field) offsetof(train_opts, field)

/* One row per shared option. kind: 'i' int64, 'u' uint64, 'r' double, 's' string. section: where
 * --help lists it ('d' data and model, 'o' optimization, 's' stopping, logging, saving; 0: in the
 * family's own text, which says what it means there). */
typedef struct {
    const char *name, *alias; /* alias: an older spelling, still accepted */
    const char *arg;
    char kind;
    double lo, hi;
    size_t off;
    unsigned families; /* train_family bits: the families that take it */
    bool fixed;        /* defines the run: saved in the checkpoint, refused with --resume */
    char section;
    const char *help, *unset; /* unset: the default shown when the value is below lo */
} opt_def;

static const opt_def k_opts[] = {
    {"--data", NULL, "FILE", 's', 0, 0, OFF(data), F_ALL, true, 0, NULL, NULL},
    {"--out", NULL, "DIR", 's', 0, 0, OFF(out), F_ALL, false, 0, NULL, NULL},
    {"--config", NULL, "FILE", 's', 0, 0, OFF(config), F_ALL, true, 0, NULL, NULL},
    {"--tokenizer", NULL, "PATH", 's', 0, 0, OFF(tokenizer), F_ALL, true, 0, NULL, NULL},
    {"--batch", NULL, "N", 'i', 1, 1000000, OFF(batch), F_ALL, true, 0, NULL, NULL},
    {"--lr-decay-steps", "--decay-steps", "N", 'i', 0, 1e12, OFF(decay_steps),
     TRAIN_GPT | TRAIN_BERT, true, 0, NULL, NULL},
    {"--seed", NULL, "N", 'u', 0, 1e19 /* INT64_MAX */, OFF(seed), F_ALL, true, 'd',
     "initialization, data order, masks and dropout", NULL},
    {"--dropout", NULL, "X", 'r', 0, 0.99, OFF(dropout), F_ALL, true, 'd',
     "override the configuration's dropout", "the configuration's"},
    {"--lr", NULL, "X", 'r', 0, 10, OFF(lr), F_ALL, true, 'o', "peak learning rate", NULL},
    {"--warmup-steps", "--warmup", "N", 'i', 0, 1e9, OFF(warmup), F_ALL, true, 'o',
     "linear warmup steps", NULL},
    {"--weight-decay", NULL, "X", 'r', 0, 10, OFF(weight_decay), F_ALL, true, 'o',
     "AdamW's decoupled weight decay, on matrices only", NULL},
    {"--beta1", NULL, "X", 'r', 0, 0.999999, OFF(beta1), F_ALL, true, 'o',
     "AdamW's first-moment decay rate", NULL},
    {"--beta2", NULL, "X", 'r', 0, 0.999999999, OFF(beta2), F_ALL, true, 'o',
     "AdamW's second-moment decay rate", NULL},
    {"--adam-eps", NULL, "X", 'r', 1e-30, 1, OFF(adam_eps), F_ALL, true, 'o',
     "AdamW's epsilon", NULL},
    {"--grad-clip", "--clip", "X", 'r', 0, 1e9, OFF(grad_clip), F_ALL, true, 'o',
     "clip the global gradient norm; 0 = off", NULL},
    {"--max-steps", NULL, "N", 'i', 0, 1e12, OFF(max_steps), F_ALL, false, 's',
     "stop after N optimizer steps", "none"},
    {"--epochs", NULL, "N", 'i', 1, 1000000, OFF(epochs), TRAIN_ENCDEC | TRAIN_BERT, false, 's',
     "stop after N passes over the training data", "none"},
    {"--time-budget", NULL, "S", 'r', 0.001, 1e9, OFF(time_budget), F_ALL, false, 's',
     "stop (and save) after S seconds", "none"},
    {"--eval-every", NULL, "N", 'i', 1, 1e9, OFF(eval_every), F_ALL, false, 's',
     "validation every N steps (and at the end)", NULL},
    {"--save-every", NULL, "N", 'i', 1, 1e9, OFF(save_every), F_ALL, false, 's',
     "checkpoint every N steps (and at the end)", NULL},
    {"--log-every", NULL, "N", 'i', 1, 1e9, OFF(log_every), F_ALL, false, 's',
     "progress line every N steps", NULL},
    {"--metrics", NULL, "FILE", 's', 0, 0, OFF(metrics), F_ALL, false, 's',
     "JSON lines per step and per validation (below)", "none"},
    {"--comm-timeout", NULL, "S", 'r', 0.001, 1e9, OFF(comm_timeout), F_ALL, false, 's',
     "under mpirun: end the job when a collective waits longer than S seconds", "600"},
    {"--comm-abort-delay", NULL, "S", 'r', 0, 3600, OFF(comm_abort_delay), F_ALL, false, 's',
     "under mpirun: after a failure, wait S seconds (its line printed) before ending the job "
     "(docs/training.md: a failed network)",
     "0"},
};
enum { N_OPTS = sizeof k_opts / sizeof k_opts[0] };

static const char *const k_arches[] = {"encdec", "gpt", "bert"};

static const char *arch_of(unsigned family) {
    return family == TRAIN_ENCDEC ? k_arches[0] : family == TRAIN_GPT ? k_arches[1] : k_arches[2];
}

/* The families that take row d, as "--arch gpt" / "--arch gpt and --arch bert". */
static void takers(const opt_def *d, char *buf, size_t cap) {
    buf[0] = '\0';
    for (unsigned f = 1, k = 0; f <= TRAIN_BERT; f <<= 1) {
        if (!(d->families & f)) continue;
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s--arch %s", k++ ? " and " : "", arch_of(f));
    }
}

/* A number as a person writes it in --help: 0.1, 1000, 5e-4, 1e-9. */
static void fmt_num(double v, char *buf, size_t cap) {
    snprintf(buf, cap, "%g", v);
    if (v != 0 && fabs(v) < 0.01) {
        char e[32];
        snprintf(e, sizeof e, "%.0e", v);
        if (strtod(e, NULL) == v) snprintf(buf, cap, "%s", e);
    }
    char *z = strstr(buf, "e-0"); /* 1e-09 -> 1e-9 */
    if (z) memmove(z + 2, z + 3, strlen(z + 3) + 1);
}

/* The default of row d for the family: "1000" (a value) or ": text" (an explanation). */
static void default_text(const train_family_info *fam, const opt_def *d, char *buf, size_t cap) {
    for (const char *const *p = fam->default_text; p && p[0]; p += 2)
        if (!strcmp(p[0], d->name)) {
            snprintf(buf, cap, ": %s", p[1]);
            return;
        }
    const void *at = (const char *)&fam->defaults + d->off;
    const char *unset = d->unset ? d->unset : "none";
    buf[0] = ' ';
    switch (d->kind) {
    case 'i': {
        int64_t v = *(const int64_t *)at;
        if ((double)v < d->lo) snprintf(buf, cap, ": %s", unset);
        else snprintf(buf + 1, cap - 1, "%lld", (long long)v);
        return;
    }
    case 'u': snprintf(buf + 1, cap - 1, "%llu", (unsigned long long)*(const uint64_t *)at); return;
    case 'r': {
        double v = *(const double *)at;
        if (v < d->lo) snprintf(buf, cap, ": %s", unset);
        else fmt_num(v, buf + 1, cap - 1);
        return;
    }
    default: {
        const char *v = *(const char *const *)at;
        snprintf(buf, cap, v ? " %s" : ": %s", v ? v : unset);
        return;
    }
    }
}

/* "  --name ARG   text", wrapped at 96 columns under the text's column. */
static void print_help_line(const char *opt, const char *text, FILE *f) {
    fprintf(f, "  %-20s", opt);
    int col = 22;
    for (const char *w = text; *w;) {
        size_t n = strcspn(w, " ");
        if (col > 23 && col + 1 + (int)n > 96) {
            fprintf(f, "\n%23s", "");
            col = 23;
        } else {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)n, w);
        col += (int)n;
        w += n;
        while (*w == ' ') w++;
    }
    fputc('\n', f);
}

static void print_section(const train_family_info *fam, char section, FILE *f) {
    for (int k = 0; k < N_OPTS; k++) {
        const opt_def *d = &k_opts[k];
        if (d->section != section || !(d->families & fam->family)) continue;
        char opt[40], def[96], text[320];
        snprintf(opt, sizeof opt, "%s %s", d->name, d->arg);
        default_text(fam, d, def, sizeof def);
        snprintf(text, sizeof text, "%s (default%s%s%s)", d->help, def, d->alias ? "; also " : "",
                 d->alias ? d->alias : "");
        print_help_line(opt, text, f);
    }
}

/* The options --resume allows: those that do not define the run. */
static void resumable(const train_family_info *fam, char *buf, size_t cap) {
    buf[0] = '\0';
    for (int k = 0; k < N_OPTS; k++) {
        const opt_def *d = &k_opts[k];
        if (d->fixed || !(d->families & fam->family) || d->off == OFF(out)) continue;
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", d->name);
    }
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, ", --zero1");
}

void train_print_usage(const train_family_info *fam, FILE *f) {
    fputs(fam->usage, f);
    fputs("\ndata and model:\n", f);
    fputs(fam->own_data, f);
    print_section(fam, 'd', f);
    fputs("optimization (AdamW):\n", f);
    print_section(fam, 'o', f);
    if (fam->own_optimization) fputs(fam->own_optimization, f);
    fputs("stopping, logging, saving:\n", f);
    print_section(fam, 's', f);
    if (fam->own_stopping) fputs(fam->own_stopping, f);
    char text[400], allowed[240];
    resumable(fam, allowed, sizeof allowed);
    snprintf(text, sizeof text,
             "continue the checkpoint in DIR exactly; only %s may be given with it (the rest is "
             "the checkpoint's)",
             allowed);
    print_help_line("--resume", text, f);
    print_help_line("--zero1",
                    "under mpirun: each rank keeps and updates only its share of AdamW's state "
                    "(1/N of the moments' 8 bytes per parameter), then the parameters are "
                    "all-gathered; the same numbers as without it",
                    f);
    fputs("Each progress line shows the mean training loss since the last one, the learning rate,\n"
          "tokens/s, elapsed time and ETA; the last line is a summary with the final validation\n"
          "loss and tokens/s=N (the training tokens of this run's steps over the time spent in\n"
          "those steps: evaluation and checkpoints excluded). --metrics appends JSON lines\n"
          "{step, loss, lr, grad_norm, tokens, train_seconds, seconds} per step (tokens and\n"
          "train_seconds: this run's so far) and {step, val_loss[, bleu], eval_seconds} per\n"
          "validation.\n"
          "Several processes or machines: `mpirun -np N attn train ...` (a build with Open MPI:\n"
          "attn info says) trains data-parallel: every rank builds the same global batches and\n"
          "runs its slice of each (the same data order and dropout masks as one process), the\n"
          "gradients are summed over the ranks before clipping and AdamW; rank 0 alone prints\n"
          "and writes checkpoints, which --resume continues with any number of ranks. Give each\n"
          "rank its threads (OMP_NUM_THREADS); --out must be a directory every rank can read.\n",
          f);
    fputs(fam->notes, f);
    for (const train_family_info *const *m = fam->more_help; m && *m; m++) {
        fputs("\n", f);
        train_print_usage(*m, f);
    }
}

/* Stores v into the row's field; a usage error (returned) when it does not parse. */
static int store(const opt_def *d, const char *name, const char *v, train_opts *o) {
    void *at = (char *)o + d->off;
    if (d->kind == 's') {
        *(const char **)at = v;
        return -1;
    }
    if (d->kind == 'r') {
        double x;
        if (!cli_parse_double(v, d->lo, d->hi, &x))
            return cli_usage_error("train: %s needs a number from %g to %g, got '%s'", name, d->lo,
                                   d->hi, v);
        *(double *)at = x;
        return -1;
    }
    /* (double)INT64_MAX rounds up to 2^63, which no int64 holds */
    const int64_t lo = (int64_t)d->lo, hi = d->hi >= 9.2e18 ? INT64_MAX : (int64_t)d->hi;
    int64_t n;
    if (!cli_parse_i64(v, lo, hi, &n))
        return cli_usage_error("train: %s needs an integer from %lld to %lld, got '%s'", name,
                               (long long)lo, (long long)hi, v);
    if (d->kind == 'u') *(uint64_t *)at = (uint64_t)n;
    else *(int64_t *)at = n;
    return -1;
}

int train_next_arg(int argc, char **argv, int *i, const train_family_info *fam, train_opts *o,
                   const char **a, const char **v) {
    const char *arg = argv[*i];
    *a = *v = NULL;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
        train_print_usage(fam, stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(arg, "--resume")) {
        o->resume = true;
        return -1;
    }
    if (!strcmp(arg, "--zero1")) {
        o->zero1 = true;
        return -1;
    }
    if (strncmp(arg, "--", 2) != 0)
        return cli_usage_error("train: unexpected argument '%s'", arg);
    if (*i + 1 >= argc) return cli_usage_error("train: %s needs a value", arg);
    const char *val = argv[++*i];
    if (!strcmp(arg, "--arch")) {
        if (strcmp(val, fam->arch) != 0)
            return cli_usage_error("train: --arch must be encdec, gpt, llama or bert, got '%s'",
                                   val);
        return -1;
    }
    for (int k = 0; k < N_OPTS; k++) {
        const opt_def *d = &k_opts[k];
        if (strcmp(arg, d->name) != 0 && !(d->alias && !strcmp(arg, d->alias))) continue;
        if (!(d->families & fam->family)) {
            char who[64];
            takers(d, who, sizeof who);
            return cli_usage_error("train: %s is an option of %s, not of --arch %s", arg, who,
                                   fam->arch);
        }
        int rc = store(d, arg, val, o);
        if (rc >= 0) return rc;
        if (d->fixed) o->fixed = arg;
        if (d->off == OFF(max_steps)) o->max_steps_given = true;
        return -1;
    }
    *a = arg;
    *v = val;
    return -1;
}

int train_unknown_option(const train_family_info *fam, const char *a) {
    return cli_usage_error("train: unknown option '%s' for --arch %s", a, fam->arch);
}

int train_check_args(const train_family_info *fam, const train_opts *o) {
    if (!o->out) return cli_usage_error("train: --out DIR is required");
    if (o->resume && o->fixed) {
        char allowed[240];
        resumable(fam, allowed, sizeof allowed);
        return cli_usage_error("train: --resume continues the run as it was saved; %s cannot be "
                               "changed (only %s)",
                               o->fixed, allowed);
    }
    if (!o->resume && !o->data) return cli_usage_error("train: --data FILE is required");
    return -1;
}

void train_opts_to_json(const train_opts *o, json_t *j) {
    char seed[32]; /* a uint64: a string, as the checkpoint's generator seeds */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    json_object_set_new(j, "data", json_string(o->data));
    json_object_set_new(j, "seed", json_string(seed));
    json_object_set_new(j, "lr", json_real(o->lr));
    json_object_set_new(j, "warmup_steps", json_integer((json_int_t)o->warmup));
    if (o->decay_steps >= 0) /* the families with a decay end (GPT, BERT) */
        json_object_set_new(j, "lr_decay_steps", json_integer((json_int_t)o->decay_steps));
    json_object_set_new(j, "weight_decay", json_real(o->weight_decay));
    json_object_set_new(j, "beta1", json_real(o->beta1));
    json_object_set_new(j, "beta2", json_real(o->beta2));
    json_object_set_new(j, "adam_eps", json_real(o->adam_eps));
    json_object_set_new(j, "grad_clip", json_real(o->grad_clip));
    json_object_set_new(j, "batch", json_integer((json_int_t)o->batch));
}

/* The first of the keys that the object has (checkpoints before the unified names used the
 * second). */
static const json_t *get2(const json_t *j, const char *key, const char *old) {
    const json_t *v = json_object_get(j, key);
    return v || !old ? v : json_object_get(j, old);
}

void train_opts_from_json(const json_t *j, train_opts *o) {
    const json_t *v;
    if ((v = json_object_get(j, "seed"))) {
        o->seed = json_is_string(v) ? strtoull(json_string_value(v), NULL, 10)
                                    : (uint64_t)json_integer_value(v);
    }
#define NUM(key, old, field)                                                                     \
    if ((v = get2(j, key, old)) && json_is_number(v)) o->field = json_number_value(v);
#define INT(key, old, field)                                                                     \
    if ((v = get2(j, key, old)) && json_is_integer(v)) o->field = json_integer_value(v);
    NUM("lr", NULL, lr)
    INT("warmup_steps", "warmup", warmup)
    INT("lr_decay_steps", "decay_steps", decay_steps)
    NUM("weight_decay", NULL, weight_decay)
    NUM("beta1", NULL, beta1)
    NUM("beta2", NULL, beta2)
    NUM("adam_eps", NULL, adam_eps)
    NUM("grad_clip", "clip", grad_clip)
    INT("batch", NULL, batch)
#undef NUM
#undef INT
}

/* ==== the loop ============================================================================== */

attn_status train_loop_tables(train_loop *L, const attn_param_info *t, int n, float *params) {
    L->n_tensors = n;
    TRAIN_TRY(train_tables_alloc(n, &L->tensors, &L->ranges));
    for (int i = 0; i < n; i++)
        train_table_set(&L->tensors[i], &L->ranges[i], t[i].name, t[i].ndim, t[i].shape, params,
                        t[i].offset, t[i].numel, t[i].decay);
    return ATTN_STATUS_OK;
}

int train_loop_replicas(size_t num_params) {
    int replicas = attn_get_num_threads();
    const double grad_bytes = (double)num_params * sizeof(float);
    while (replicas > 1 && (replicas - 1) * grad_bytes > 2147483648.0) replicas--;
    return replicas;
}

attn_status train_loop_optim(train_loop *L, size_t num_params, const train_opts *o) {
    attn_optim_params op = attn_optim_default_params(ATTN_OPTIM_ADAMW);
    op.beta1 = o->beta1, op.beta2 = o->beta2, op.eps = o->adam_eps;
    op.weight_decay = o->weight_decay;
    L->num_params = num_params;
    return attn_optim_create(&op, num_params, L->ranges, L->n_tensors, &L->opt);
}

attn_status train_loop_resume(train_loop *L, bool with_epoch) {
    L->cs = attn_ckpt_state_init();
    if (!L->resume) return ATTN_STATUS_OK;
    TRAIN_TRY(attn_ckpt_load(L->ckpt_dir, L->tensors, L->n_tensors, L->opt, &L->cs));
    printf("resumed %s at step %lld", L->out, (long long)L->cs.step);
    if (with_epoch)
        printf(" (epoch %lld, batch %lld)", (long long)L->cs.epoch + 1,
               (long long)L->cs.data_position);
    printf("\n");
    return ATTN_STATUS_OK;
}

void train_loop_set(train_loop *L, const train_opts *o) {
    L->out = o->out;
    L->metrics = o->metrics;
    L->resume = o->resume;
    L->grad_clip = o->grad_clip;
    L->time_budget = o->time_budget;
    L->end_step = o->max_steps >= 0 ? o->max_steps : INT64_MAX;
    L->eval_every = o->eval_every, L->save_every = o->save_every, L->log_every = o->log_every;
    attn_dist_set_timeout(train_dist(), o->comm_timeout > 0 ? o->comm_timeout : 600.0);
    train_dist_set_abort_delay(o->comm_abort_delay);
    L->zero1 = o->zero1;
}

void train_loop_free(train_loop *L) {
    attn_optim_destroy(L->opt);
    attn_optim_destroy(L->zopt);
    free(L->zoff);
    free(L->zranges);
    free(L->tensors);
    free(L->ranges);
    if (L->cs.extra) json_decref(L->cs.extra);
    memset(L, 0, sizeof *L);
}

/* ---- ZeRO-1 ---- */

/* --zero1 with several ranks, at the start of the run (after a resume loaded the whole state):
 * this rank's share of the parameters (near-equal, cut at multiples of 16 floats) gets an
 * optimizer of its own holding that share of the state, and the whole one is freed. */
static attn_status zero1_begin(train_loop *L) {
    attn_dist *d = train_dist();
    const int S = attn_dist_size(d), me = attn_dist_rank(d);
    if (!L->zero1) return ATTN_STATUS_OK;
    if (S < 2) {
        printf("zero1: one rank: nothing to shard\n");
        return ATTN_STATUS_OK;
    }
    const size_t P = L->num_params;
    L->zoff = malloc(((size_t)S + 1) * sizeof *L->zoff);
    L->zranges = malloc(((size_t)L->n_tensors + 1) * sizeof *L->zranges);
    if (!L->zoff || !L->zranges) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int r = 0; r <= S; r++) {
        size_t a = (size_t)((double)P * r / S);
        a = r == S ? P : a - a % 16;
        L->zoff[r] = a;
    }
    const size_t p0 = L->zoff[me], p1 = L->zoff[me + 1];
    int zn = 0;
    for (int i = 0; i < L->n_tensors; i++) {
        const attn_optim_range *g = &L->ranges[i];
        const size_t a = g->offset > p0 ? g->offset : p0;
        const size_t e = g->offset + g->length < p1 ? g->offset + g->length : p1;
        if (a < e) L->zranges[zn++] = (attn_optim_range){a - p0, e - a, g->decay, g->name};
    }
    TRAIN_TRY(attn_optim_create(attn_optim_get_params(L->opt), p1 - p0, L->zranges, zn, &L->zopt));
    float *m = NULL, *v = NULL;
    attn_optim_state(L->opt, &m, &v);
    TRAIN_TRY(attn_optim_set_state(L->zopt, attn_optim_step_count(L->opt), m ? m + p0 : NULL,
                                   v ? v + p0 : NULL));
    attn_optim_destroy(L->opt);
    L->opt = NULL;
    const double mb = (double)P * 2 * sizeof(float) / 1048576.0;
    printf("zero1: AdamW's state sharded over %d ranks: %.3g MiB on each instead of %.3g MiB\n",
           S, mb * (double)(p1 - p0) / (double)P, mb);
    return ATTN_STATUS_OK;
}

/* The whole optimizer state gathered from every rank's share (collective), for a checkpoint. */
static attn_status zero1_gather(train_loop *L, attn_optim **out) {
    const size_t me = (size_t)attn_dist_rank(train_dist());
    const size_t p0 = L->zoff[me], p1 = L->zoff[me + 1];
    attn_optim *o = NULL;
    TRAIN_TRY(attn_optim_create(attn_optim_get_params(L->zopt), L->num_params, L->ranges,
                                L->n_tensors, &o));
    attn_status s = attn_optim_set_state(o, attn_optim_step_count(L->zopt), NULL, NULL);
    float *m = NULL, *v = NULL, *zm = NULL, *zv = NULL;
    attn_optim_state(o, &m, &v);
    attn_optim_state(L->zopt, &zm, &zv);
    if (!s && m && zm) {
        memcpy(m + p0, zm, (p1 - p0) * sizeof(float));
        s = attn_dist_allgather(train_dist(), m, L->zoff);
    }
    if (!s && v && zv) {
        memcpy(v + p0, zv, (p1 - p0) * sizeof(float));
        s = attn_dist_allgather(train_dist(), v, L->zoff);
    }
    if (s) attn_optim_destroy(o);
    else *out = o;
    return s;
}

/* Clipping by the global norm and AdamW on this rank's share, then every rank's share of the
 * parameters to every rank: bit for bit the whole update (the update is elementwise). */
static attn_status zero1_step(train_loop *L, double lr, double *norm) {
    const size_t P = L->num_params, me = (size_t)attn_dist_rank(train_dist());
    const size_t p0 = L->zoff[me];
    *norm = attn_optim_grad_norm(L->grads, P);
    if (!isfinite(*norm))
        TRAIN_TRY(attn_optim_check_finite(L->grads, P, L->ranges, L->n_tensors, NULL));
    TRAIN_TRY(attn_optim_clip_step_with_norm(L->zopt, L->params + p0, L->grads + p0, *norm,
                                             L->grad_clip, lr));
    return attn_dist_allgather(train_dist(), L->params, L->zoff);
}

/* Rank 0 alone writes the checkpoint: it holds the global state (every rank's parameters and
 * optimizer state are the same; with ZeRO-1 the state is gathered first, by every rank), so
 * --resume may use another number of ranks. */
static attn_status save(train_loop *L, int64_t step, double lr) {
    attn_optim *whole = NULL;
    if (L->zopt) TRAIN_TRY(zero1_gather(L, &whole));
    attn_status s = ATTN_STATUS_OK;
    if (train_writer()) {
        int64_t epoch = 0, pos = step, shown = 0;
        if (L->position) L->position(L->ctx, &epoch, &pos, &shown);
        s = train_save(L->ckpt_dir, L->tensors, L->n_tensors, whole ? whole : L->opt, &L->cs, step,
                       epoch, pos, lr, L->run_options(L->ctx));
        if (!s && L->save_extra) s = L->save_extra(L->ctx);
    }
    attn_optim_destroy(whole);
    return s;
}

/* Validation: the "valid" line and the metrics line; the best loss goes into the checkpoint. */
static attn_status evaluate(train_loop *L, FILE *mf, int64_t step, train_eval_out *e) {
    memset(e, 0, sizeof *e);
    e->loss = e->bleu = NAN;
    const double t0 = train_now_s();
    TRAIN_TRY(L->evaluate(L->ctx, e));
    const double dt = train_now_s() - t0;
    if (e->loss < L->cs.best_valid_loss) L->cs.best_valid_loss = e->loss;
    printf("valid  %6lld | loss %7.4f | ppl %8.2f%s%s | %.1f s\n", (long long)step, e->loss,
           exp(e->loss), e->detail[0] ? " | " : "", e->detail, dt);
    fflush(stdout);
    if (mf) {
        fprintf(mf, "{\"step\": %lld, \"val_loss\": %.17g", (long long)step, e->loss);
        if (!isnan(e->bleu)) fprintf(mf, ", \"bleu\": %.17g", e->bleu);
        fprintf(mf, ", \"eval_seconds\": %.6f}\n", dt);
        fflush(mf);
    }
    return ATTN_STATUS_OK;
}

static void progress(train_loop *L, int64_t step, double loss, double lr, double tok_s,
                     double elapsed, double eta) {
    int64_t epoch = 0, pos = 0, shown = 0;
    if (L->position) L->position(L->ctx, &epoch, &pos, &shown);
    char where[80];
    if (shown > 0)
        snprintf(where, sizeof where, "step %6lld | epoch %3lld", (long long)step,
                 (long long)shown);
    else if (L->end_step != INT64_MAX)
        snprintf(where, sizeof where, "step %6lld/%lld", (long long)step, (long long)L->end_step);
    else
        snprintf(where, sizeof where, "step %6lld", (long long)step);
    train_progress(where, loss, lr, tok_s, elapsed, eta);
    train_progress_notify(step, loss, lr, tok_s, elapsed, eta);
}

/* Floats per bucket of the gradients' all-reduce: 1 Mi (4 MiB); ATTN_GRAD_BUCKET=N overrides
 * it (the tests make tiny models post several buckets during the backward). */
static size_t grad_bucket(void) {
    const char *v = getenv("ATTN_GRAD_BUCKET");
    long long n = v && *v ? atoll(v) : 0;
    return n > 0 ? (size_t)n : (size_t)1 << 20;
}

/* Several ranks stop together: a signal or the time budget seen by one rank (its clock, its
 * Ctrl-C) stops them all, for the same reason (the largest code). */
static attn_status agree_stop(const char **stop) {
    static const char *const why[] = {NULL, "time budget reached", "interrupted",
                                      "stopped by the caller"};
    double code = 0;
    for (int k = 1; k < 4; k++)
        if (*stop && !strcmp(*stop, why[k])) code = k;
    if (*stop && code == 0) code = 2;
    TRAIN_TRY(attn_dist_allreduce_f64(train_dist(), &code, 1, ATTN_DIST_MAX));
    *stop = why[(int)code];
    return ATTN_STATUS_OK;
}

/* Several ranks must start from the same state: the parameters (after the initialization or the
 * resume), the step and the run's options (with the data's path, and its size and CRC where the
 * family records them). Rank 0's fingerprint is broadcast; a rank that differs (another data
 * file or configuration on its host, another seed, a stale checkpoint) stops the job naming
 * itself, instead of training a model that silently drifts apart. */
static attn_status agree_start(train_loop *L) {
    json_t *opts = L->run_options(L->ctx);
    char *text = opts ? json_dumps(opts, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(opts);
    uint64_t fp[4] = {(uint64_t)L->num_params, (uint64_t)L->cs.step,
                      attn_crc32(0, L->params, L->num_params * sizeof(float)),
                      text ? attn_crc32(0, text, strlen(text)) : 0};
    free(text);
    uint64_t r0[4];
    memcpy(r0, fp, sizeof fp);
    TRAIN_TRY(attn_dist_broadcast(train_dist(), r0, sizeof r0, 0));
    if (memcmp(r0, fp, sizeof fp) != 0)
        return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                              "this rank starts from another state than rank 0 (step %llu, "
                              "parameters CRC-32 %08llx, options CRC-32 %08llx; rank 0: %llu, "
                              "%08llx, %08llx): every rank needs the same data, configuration, "
                              "options and checkpoint",
                              (unsigned long long)fp[1], (unsigned long long)fp[2],
                              (unsigned long long)fp[3], (unsigned long long)r0[1],
                              (unsigned long long)r0[2], (unsigned long long)r0[3]);
    return ATTN_STATUS_OK;
}

int train_run(train_loop *L) {
    FILE *mf = NULL;
    if (L->metrics && train_writer()) {
        mf = fopen(L->metrics, L->resume ? "a" : "w");
        if (!mf)
            return cli_fail(attn_set_error(ATTN_STATUS_IO, "%s: cannot open: %s", L->metrics,
                                           strerror(errno)));
    }
    {
        attn_status zs = attn_dist_size(train_dist()) > 1 ? agree_start(L) : ATTN_STATUS_OK;
        if (!zs) zs = zero1_begin(L);
        if (zs) {
            if (mf) fclose(mf);
            return cli_fail(zs);
        }
    }
    train_catch_signals();

    const double t_start = train_now_s();
    int64_t step = L->cs.step, done = 0;
    /* t_train: seconds inside training steps (batch, forward, backward, update), the
     * denominator of tokens/s; tokens: their training tokens */
    double t_train = 0, tokens = 0, win_loss = 0, win_w = 0, lr = L->cs.lr, last_loss = NAN;
    attn_status s = ATTN_STATUS_OK;
    const char *why = "done";
    while (step < L->end_step) {
        const char *stop = train_stop_reason(t_start, L->time_budget);
        if (attn_dist_size(train_dist()) > 1 && (s = agree_stop(&stop))) break;
        if (stop) {
            why = stop;
            break;
        }
        const double t0 = train_now_s();
        const double step_lr = L->lr_at(L->ctx, step);
        train_step_out so = {NAN, 1, 0};
        double norm = 0;
        s = L->next_batch ? L->next_batch(L->ctx, step) : ATTN_STATUS_OK;
        /* several ranks: the sum of every rank's gradients (each weighed over the global batch),
         * in buckets, those of the last layers already while the backward runs on (the
         * trainers' overlap), the rest after it */
        if (!s) s = attn_dist_grad_begin(train_dist(), L->grads, L->num_params, grad_bucket());
        if (!s) s = L->train_step(L->ctx, step, &so);
        if (!s) s = attn_dist_grad_finish(train_dist());
        /* finiteness check, clipping (grad_clip > 0) and AdamW in one pass over the gradients */
        if (!s && L->zopt)
            s = zero1_step(L, step_lr, &norm);
        else if (!s)
            s = attn_optim_clip_step(L->opt, L->params, L->grads, L->grad_clip, step_lr,
                                     L->ranges, L->n_tensors, &norm);
        if (s) break;
        t_train += train_now_s() - t0;
        step++, done++;
        lr = step_lr, last_loss = so.loss;
        win_loss += so.loss * so.weight, win_w += so.weight;
        tokens += so.tokens;
        const double tok_s = tokens / (t_train > 0 ? t_train : 1);
        if (mf) {
            fprintf(mf,
                    "{\"step\": %lld, \"loss\": %.17g, \"lr\": %.17g, \"grad_norm\": %.17g, "
                    "\"tokens\": %.0f, \"train_seconds\": %.9f, \"seconds\": %.6f}\n",
                    (long long)step, so.loss, lr, norm, tokens, t_train, train_now_s() - t_start);
            fflush(mf);
        }
        if (step % L->log_every == 0 || step == L->end_step) {
            const double el = train_now_s() - t_start;
            const double eta = train_eta(el / (double)done,
                                         L->end_step != INT64_MAX ? L->end_step - step : -1,
                                         L->time_budget, el);
            progress(L, step, win_w > 0 ? win_loss / win_w : 0.0, lr, tok_s, el, eta);
            win_loss = win_w = 0;
        }
        /* the last step's validation and checkpoint are the final ones, below */
        train_eval_out e;
        if (L->evaluate && step % L->eval_every == 0 && step != L->end_step &&
            (s = evaluate(L, mf, step, &e)))
            break;
        if (step % L->save_every == 0 && step != L->end_step && (s = save(L, step, lr))) break;
    }
    if (s) {
        /* nothing is saved: the last checkpoint stays the one to resume */
        if (mf) fclose(mf);
        return cli_fail(s);
    }
    train_eval_out e;
    memset(&e, 0, sizeof e);
    e.loss = e.bleu = NAN;
    if (L->evaluate) s = evaluate(L, mf, step, &e);
    if (mf) fclose(mf);
    if (!s) s = save(L, step, lr);
    if (s) return cli_fail(s);

    const double el = train_now_s() - t_start;
    char tl[32] = "n/a", vl[96] = "";
    if (!isnan(last_loss)) snprintf(tl, sizeof tl, "%.4f", last_loss);
    if (L->evaluate) {
        snprintf(vl, sizeof vl, ", val loss %.4f", e.loss);
        size_t n = strlen(vl);
        if (!isnan(e.bleu)) snprintf(vl + n, sizeof vl - n, ", BLEU %.2f", e.bleu);
    }
    printf("%s: step %lld, train loss %s%s, %.0f s, tokens/s=%.0f (%.0f tokens in %.1f s of "
           "training steps); saved %s\n",
           why, (long long)step, tl, vl, el, done ? tokens / (t_train > 0 ? t_train : 1) : 0.0,
           tokens, t_train, L->out);
    const int ranks = attn_dist_size(train_dist());
    const attn_dist_stats ds = attn_dist_get_stats(train_dist());
    if (ranks > 1 && ds.grad_steps > 0) {
        const double n = (double)ds.grad_steps;
        printf("mpi: %d ranks; per step %.0f bytes of gradients all-reduced in %.1f buckets (%.1f "
               "during the backward), %.2f ms waiting for them after it, %.2f ms in all "
               "collectives (rank 0)\n",
               ranks, (double)ds.grad_bytes / n, (double)ds.grad_buckets / n,
               (double)ds.early_buckets / n, 1e3 * ds.grad_wait_s / n, 1e3 * ds.wait_s / n);
    }
    return CLI_EXIT_OK;
}

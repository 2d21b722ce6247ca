/* fuzz_chat_template.c — the chat-template lexer, parser and interpreter on arbitrary input.
 * The input is up to three parts split at FUZZ_SEP: the template source, a conversation (a JSON
 * array of messages; when it is not one, a fixed two-message conversation is used) and the extra
 * variables (a JSON object, or nothing). The first byte of the template part, when it is a digit,
 * picks add_generation_prompt (odd) and whether assistant spans are computed too (>= '4').
 * Renders run under small limits (1 MiB of output, 64 MiB of memory, 100,000 steps): a hostile
 * template must end with an error, never hang or exhaust memory. Every failure must leave a
 * one-line message; every rendered text must be valid UTF-8 of the stated length, and spans must
 * lie inside the text in message order. */
#include "fuzz.h"

#include "attn_chat.h"

#include "attn_tok.h" /* attn_tok_utf8_check */

static const char default_conv[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello.\"}, {\"role\": \"user\", \"content\": \"Bye\"}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    fuzz_split(data, size, 3, part, len);
    bool agp = false, spans = false;
    if (len[0] && part[0][0] >= '0' && part[0][0] <= '9') {
        agp = (part[0][0] - '0') & 1;
        spans = part[0][0] >= '4';
    }
    attn_chat_template *t;
    if (attn_chat_template_parse((const char *)part[0], len[0], "fuzz", &t)) {
        fuzz_check_message(attn_last_error());
        return 0;
    }
    attn_chat_conv *c;
    if (attn_chat_conv_parse((const char *)part[1], len[1], &c)) {
        fuzz_check_message(attn_last_error());
        if (attn_chat_conv_parse(default_conv, SIZE_MAX, &c)) abort();
    }
    char *extra = NULL;
    if (len[2]) {
        extra = malloc(len[2] + 1);
        if (!extra) abort();
        memcpy(extra, part[2], len[2]);
        extra[len[2]] = '\0';
    }
    attn_chat_render_params p = attn_chat_default_render_params();
    p.add_generation_prompt = agp;
    p.extra_json = extra;
    p.now = 1700000000;
    p.max_output = (size_t)1 << 20;
    p.max_memory = (size_t)64 << 20;
    p.max_steps = 100000;
    char *out = NULL;
    size_t n = 0;
    if (attn_chat_render(t, c, &p, &out, &n)) {
        fuzz_check_message(attn_last_error());
        if (out) abort();
    } else {
        if (!out || strlen(out) > n || out[n] != '\0' || attn_tok_utf8_check(out, n, true) != n) abort();
        free(out);
    }
    if (spans) {
        attn_chat_span *sp = NULL;
        size_t ns = 0, tl = 0;
        char *text = NULL;
        if (attn_chat_assistant_spans(t, c, &p, &text, &tl, &sp, &ns)) {
            fuzz_check_message(attn_last_error());
            if (text || sp) abort();
        } else {
            size_t prev = 0;
            for (size_t i = 0; i < ns; i++) {
                if (sp[i].begin > sp[i].end || sp[i].end > tl || sp[i].begin < prev) abort();
                if (strcmp(attn_chat_conv_role(c, sp[i].message), "assistant")) abort();
                prev = sp[i].end;
            }
            free(text);
            free(sp);
        }
    }
    free(extra);
    attn_chat_conv_free(c);
    attn_chat_template_free(t);
    return 0;
}

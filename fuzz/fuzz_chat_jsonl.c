/* fuzz_chat_jsonl.c — chat JSONL (attn_chat_jsonl_open_mem) on arbitrary input, with a 4096-byte
 * line limit: every line either gives a conversation or a one-line error naming "fuzz.jsonl:LINE";
 * line numbers only grow; each conversation is then rendered by a fixed ChatML template (with and
 * without the generation prompt) and its assistant spans computed, all of which must succeed on a
 * valid conversation: the messages of a conversation the reader accepted are strings (or text
 * parts) with known roles. */
#include "fuzz.h"

#include "attn_chat.h"

static attn_chat_template *chatml;

static const char chatml_src[] =
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}"
    "{% if m.content is string %}{{ m.content }}{% elif m.content %}"
    "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (attn_chat_template_parse(chatml_src, SIZE_MAX, "chatml", &chatml)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!chatml) LLVMFuzzerInitialize(NULL, NULL);
    attn_chat_jsonl_params jp = attn_chat_jsonl_default_params();
    jp.max_line = 4096;
    attn_chat_jsonl *r;
    if (attn_chat_jsonl_open_mem((const char *)data, size, "fuzz.jsonl", &jp, &r)) abort();
    size_t last = 0;
    for (int guard = 0; guard < 100000; guard++) {
        attn_chat_conv *c;
        attn_status s = attn_chat_jsonl_next(r, &c);
        size_t line = attn_chat_jsonl_line(r);
        if (line < last) abort();
        last = line;
        if (s) {
            fuzz_check_message(attn_last_error());
            if (strncmp(attn_last_error(), "fuzz.jsonl:", 11) || c) abort();
            continue;
        }
        if (!c) break;
        if (attn_chat_conv_len(c) == 0) abort();
        for (int agp = 0; agp < 2; agp++) {
            attn_chat_render_params p = attn_chat_default_render_params();
            p.add_generation_prompt = agp;
            char *out;
            size_t n;
            if (attn_chat_render(chatml, c, &p, &out, &n)) abort();
            free(out);
        }
        char *text;
        size_t tl, ns;
        attn_chat_span *sp;
        if (attn_chat_assistant_spans(chatml, c, NULL, &text, &tl, &sp, &ns)) abort();
        free(text);
        free(sp);
        attn_chat_conv_free(c);
    }
    attn_chat_jsonl_close(r);
    return 0;
}

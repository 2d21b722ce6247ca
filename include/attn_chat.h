/* attn_chat.h — chat templates and chat messages: render a model's Hugging Face chat template
 * (tokenizer_config.json's "chat_template", a Jinja template) exactly as transformers 4.49's
 * apply_chat_template(..., tokenize=False) does, read chat JSONL files, and find the byte spans
 * of the assistant messages in a rendered conversation (for training with the loss on them only).
 *
 *   attn_chat_template *t;
 *   attn_chat_conv *c;
 *   if (attn_chat_template_load_dir("models/SmolLM2-135M-Instruct", NULL, &t) ||
 *       attn_chat_conv_parse("[{\"role\": \"user\", \"content\": \"Hi!\"}]", SIZE_MAX, &c))
 *       return fprintf(stderr, "%s\n", attn_last_error()), 1;
 *   attn_chat_render_params p = attn_chat_default_render_params();
 *   p.add_generation_prompt = true;
 *   char *text;
 *   size_t len;
 *   if (attn_chat_render(t, c, &p, &text, &len) == ATTN_STATUS_OK) fwrite(text, 1, len, stdout);
 *   free(text);
 *   attn_chat_conv_free(c);
 *   attn_chat_template_free(t);
 *
 * The template language is the part of Jinja2 (3.1) that chat templates use, run in
 * transformers' environment: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
 * with the loopcontrols extension (break, continue), `{% generation %}` blocks (their body is
 * rendered), transformers' tojson filter (json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False)), and the globals raise_exception(message) and
 * strftime_now(format). docs/chat.md lists the supported statements, expressions, filters, tests
 * and methods. Something outside that subset is an error that names it (ATTN_STATUS_UNSUPPORTED):
 * at parse time for statements (include, extends, block, import, with, ...), when evaluated for a
 * filter, test or method that jinja2 has and attn does not. Where jinja2 itself fails (a syntax
 * error, an undefined value used, a filter that does not exist, a list modified in the sandbox),
 * attn fails too (ATTN_STATUS_FORMAT for the template's syntax, ATTN_STATUS_INVALID_ARGUMENT at
 * render time). raise_exception(message) fails the render with ATTN_STATUS_INVALID_ARGUMENT and
 * attn_last_error() exactly `message` (newlines made spaces): a template's own check of the
 * conversation ("Conversation roles must alternate user/assistant/user/assistant/...").
 *
 * Variables a render sees, as apply_chat_template passes them: messages (the conversation),
 * tools (None), documents (None), add_generation_prompt, the special-token strings of the model
 * (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token,
 * additional_special_tokens: those tokenizer_config.json sets), then each key of
 * attn_chat_render_params.extra_json, which overrides any of them (so {"tools": [...]} passes
 * tools, {"enable_thinking": false} Qwen3's switch); "messages" and "add_generation_prompt" may
 * not be given there.
 *
 * Values: JSON's null, true/false, integers (64-bit), numbers, strings, arrays and objects are
 * Python's None, bool, int, float, str, list and dict. Strings are UTF-8 and are indexed, sliced
 * and measured in code points, as Python's are.
 *
 * Limits (attn_chat_render_params): a hostile template or conversation fails with
 * ATTN_STATUS_TOO_LARGE instead of hanging or exhausting memory — output bytes, memory used by
 * one render, loop iterations plus macro calls, nesting depth of evaluation; a template source
 * over ATTN_CHAT_MAX_TEMPLATE bytes or nested deeper than ATTN_CHAT_MAX_NESTING is refused at
 * parse time.
 *
 * A template is read-only after it is loaded: any number of threads may render with it at once.
 */
#ifndef ATTN_CHAT_H
#define ATTN_CHAT_H

#include "attn_core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_CHAT_MAX_TEMPLATE ((size_t)1 << 20) /* bytes of template source */
#define ATTN_CHAT_MAX_NESTING 200                /* nested blocks / expressions in a template */

typedef struct attn_chat_template attn_chat_template; /* a parsed template + special tokens */
typedef struct attn_chat_conv attn_chat_conv;         /* a conversation: messages in order */

/* ---- templates ------------------------------------------------------------------------------
 * attn_chat_template_parse: src (len bytes, UTF-8; len SIZE_MAX: NUL-terminated) under `name`
 * (used in messages: "NAME:LINE:COLUMN: ..."). No special tokens are set (see
 * attn_chat_template_set_token).
 *
 * attn_chat_template_load_dir: the chat template of a model directory, as transformers 4.49's
 * AutoTokenizer finds it:
 *   DIR/tokenizer_config.json  "chat_template": a string, or a list of {"name": S, "template": S}
 *                              (which: that name; NULL: "default"); the special tokens
 *                              "bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
 *                              "cls_token", "mask_token" (each null, a string, or an AddedToken
 *                              object {"content": S, ...}) and "additional_special_tokens" (a
 *                              list of those)
 *   DIR/chat_template.jinja    the template as a file (newer transformers save it so, and then
 *                              prefer it to tokenizer_config.json's): used first when which is NULL
 *   DIR/chat_template.json     {"chat_template": S} (processor configurations): used when neither
 *                              of the others has a template
 * tokenizer_config.json may be absent when a template file is there. No template anywhere, or
 * no template of that name, is ATTN_STATUS_NOT_FOUND naming the directory. */
attn_status attn_chat_template_parse(const char *src, size_t len, const char *name,
                                     attn_chat_template **out);
attn_status attn_chat_template_load_dir(const char *dir, const char *which,
                                        attn_chat_template **out);
void attn_chat_template_free(attn_chat_template *t);

/* Sets (value NULL: removes) a special-token variable such as "eos_token" given to every render.
 * Not to be called while another thread renders with t. */
attn_status attn_chat_template_set_token(attn_chat_template *t, const char *name,
                                         const char *value);
/* The special token `name` ("eos_token", ...), or NULL when not set. */
const char *attn_chat_template_token(const attn_chat_template *t, const char *name);
/* The template's source text and name. */
const char *attn_chat_template_source(const attn_chat_template *t);
const char *attn_chat_template_name(const attn_chat_template *t);

/* ---- conversations ---------------------------------------------------------------------------
 * A conversation is a list of message objects, each {"role": R, "content": C, ...}: R one of
 * "system", "user", "assistant", "tool"; C a string, or a list of parts {"type": "text", "text":
 * S} (other part types are refused), or null/absent for an assistant message with "tool_calls".
 * Other keys (tool_calls, name, tool_call_id, reasoning_content, ...) are kept and passed to the
 * template as they are. An empty conversation is refused. */
attn_status attn_chat_conv_parse(const char *json, size_t len, attn_chat_conv **out);
attn_status attn_chat_conv_new(attn_chat_conv **out); /* empty, for attn_chat_conv_add */
/* Appends {"role": role, "content": content} (content: len bytes of UTF-8; SIZE_MAX: NUL-
 * terminated). */
attn_status attn_chat_conv_add(attn_chat_conv *c, const char *role, const char *content,
                               size_t len);
size_t attn_chat_conv_len(const attn_chat_conv *c);
/* Message i's role, and its content when a string (NULL otherwise). */
const char *attn_chat_conv_role(const attn_chat_conv *c, size_t i);
const char *attn_chat_conv_content(const attn_chat_conv *c, size_t i);
/* The first n messages as a new conversation (n <= len). */
attn_status attn_chat_conv_prefix(const attn_chat_conv *c, size_t n, attn_chat_conv **out);
void attn_chat_conv_free(attn_chat_conv *c);

/* ---- rendering ----------------------------------------------------------------------------- */

typedef struct {
    bool add_generation_prompt; /* end with the header of a new assistant turn */
    const char *extra_json;     /* NULL, or a JSON object: more variables (see the top) */
    int64_t now;        /* strftime_now's clock: seconds since the epoch (local time); 0: now */
    size_t max_output;  /* bytes of rendered text (default 64 MiB) */
    size_t max_memory;  /* bytes one render may allocate (default 512 MiB) */
    uint64_t max_steps; /* loop iterations + macro calls (default 10,000,000) */
    int max_depth;      /* nested macro calls and expression evaluation (default 200) */
} attn_chat_render_params;

attn_chat_render_params attn_chat_default_render_params(void);

/* The rendered text: *out is malloc'd (free it), NUL-terminated, *len bytes (out_len may be NULL).
 * Equal, byte for byte, to transformers' apply_chat_template(messages, tokenize=False,
 * add_generation_prompt=..., **extra) on a tokenizer with the same template and tokens. */
attn_status attn_chat_render(const attn_chat_template *t, const attn_chat_conv *c,
                             const attn_chat_render_params *p, char **out, size_t *out_len);

/* ---- assistant spans (training on the assistant's tokens only) -------------------------------
 * Renders the whole conversation (add_generation_prompt false; p's other fields apply) into
 * *text and finds each assistant message's bytes in it: for message i, P = render(messages[:i],
 * add_generation_prompt=true) and Q = render(messages[:i+1]); the span is [len(P), len(Q)), the
 * message's text plus whatever the template puts after it up to the next message (its end-of-turn
 * token). Each P must be a prefix of its Q and each Q a prefix of the whole text: a template that
 * renders a message differently depending on what follows (Qwen3 drops the reasoning of earlier
 * turns, ...) is ATTN_STATUS_UNSUPPORTED naming the message. *spans (malloc'd, *n_spans entries,
 * in message order; NULL when there is none) and *text are the caller's to free. */
typedef struct {
    size_t message;    /* index in the conversation */
    size_t begin, end; /* byte offsets in the rendered text: [begin, end) */
} attn_chat_span;

attn_status attn_chat_assistant_spans(const attn_chat_template *t, const attn_chat_conv *c,
                                      const attn_chat_render_params *p, char **text,
                                      size_t *text_len, attn_chat_span **spans,
                                      size_t *n_spans);

/* ---- chat JSONL ------------------------------------------------------------------------------
 * One conversation per line: a JSON array of messages as attn_chat_conv_parse takes them. Lines
 * that are empty or only whitespace are skipped; a line longer than max_line bytes, a line that
 * is not valid UTF-8 or not a JSON array, a message that is not an object, an unknown role, a
 * content that is not a string (or text parts), an empty array: ATTN_STATUS_FORMAT, "NAME:LINE:
 * what is wrong". A final line without '\n' is read like the others. */
typedef struct attn_chat_jsonl attn_chat_jsonl;

typedef struct {
    size_t max_line; /* bytes (default 64 MiB) */
} attn_chat_jsonl_params;

attn_chat_jsonl_params attn_chat_jsonl_default_params(void);
/* Opens a file (name = the path), or reads a memory buffer (data, n bytes: kept by reference,
 * must outlive the reader) under `name`. p NULL: the defaults. */
attn_status attn_chat_jsonl_open(const char *path, const attn_chat_jsonl_params *p,
                                 attn_chat_jsonl **out);
attn_status attn_chat_jsonl_open_mem(const char *data, size_t n, const char *name,
                                     const attn_chat_jsonl_params *p, attn_chat_jsonl **out);
/* The next conversation into *conv (the caller's to free), or *conv = NULL at the end. */
attn_status attn_chat_jsonl_next(attn_chat_jsonl *r, attn_chat_conv **conv);
/* The line number (1-based) of the conversation the last attn_chat_jsonl_next returned. */
size_t attn_chat_jsonl_line(const attn_chat_jsonl *r);
void attn_chat_jsonl_close(attn_chat_jsonl *r);

#ifdef __cplusplus
}
#endif
#endif

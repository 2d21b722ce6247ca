/* cmd_export.c — `attn export --format hf-marian|hf-m2m100 MODEL OUT`: an attn translator (the
 * demo model, an `attn train` checkpoint) saved as the Hugging Face directory of the architecture
 * that is the same model (attn_encdec_save_hf_dir), with its tokenizer.json beside it, so that
 * transformers, and CTranslate2's ct2-transformers-converter, load it. */
#include "cmd_export.h"

#include "cli.h"

#include "attn_models.h"
#include "attn_tok.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char export_usage[] =
    "usage: attn export --format hf-marian|hf-m2m100 MODEL OUT [--beams K]\n"
    "\n"
    "Saves the encoder-decoder translator in MODEL (a directory 'attn train' wrote: config.json,\n"
    "model.safetensors, tokenizer.json) as a Hugging Face directory OUT that transformers'\n"
    "from_pretrained and CTranslate2's ct2-transformers-converter load as the same model:\n"
    "config.json, model.safetensors, generation_config.json, tokenizer.json (MODEL's, as is)\n"
    "and tokenizer_config.json. The architecture must express the model exactly:\n"
    "  hf-marian   MarianMTModel: post-LN models (pre_ln false; attn train's default), positions\n"
    "              \"sinusoidal\" or \"sinusoidal_halves\"\n"
    "  hf-m2m100   M2M100ForConditionalGeneration: pre-LN models with positions\n"
    "              \"sinusoidal_fairseq\", shared embeddings and \"logits_bias\": false\n"
    "              (configs/demo-en-zh.json trains such a model)\n"
    "Both need layer_norm_eps 1e-5. Anything else is refused with the field that differs.\n"
    "generation_config.json starts the decoder from <s>, ends at </s>, never generates <pad> or\n"
    "<s>, and allows max_len decoder positions, as 'attn translate' does; its beam search is\n"
    "transformers' (length penalty 1), not attn translate's GNMT form.\n"
    "\n"
    "options:\n"
    "  --format F   hf-marian or hf-m2m100 (required)\n"
    "  --beams K    num_beams in generation_config.json (default 4)\n";

/* OUT/tokenizer_config.json: transformers' PreTrainedTokenizerFast over tokenizer.json. */
static attn_status write_tokenizer_config(const attn_tok *tok, const char *out, int max_len) {
    static const struct {
        attn_tok_special which;
        const char *key;
    } sp[] = {{ATTN_TOK_BOS, "bos_token"},
              {ATTN_TOK_EOS, "eos_token"},
              {ATTN_TOK_PAD, "pad_token"},
              {ATTN_TOK_UNK, "unk_token"}};
    json_t *j = json_object();
    if (!j) return attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "export: out of memory");
    json_object_set_new(j, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        const int32_t id = attn_tok_special_id(tok, sp[i].which);
        const char *t = id >= 0 ? attn_tok_id_to_token(tok, id) : NULL;
        if (t) json_object_set_new(j, sp[i].key, json_string(t));
    }
    json_object_set_new(j, "model_max_length", json_integer(max_len));
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", out);
    int rc = json_dump_file(j, path, JSON_INDENT(2));
    json_decref(j);
    return rc ? attn_set_error(ATTN_STATUS_IO, "%s: cannot write", path) : ATTN_STATUS_OK;
}

static attn_status run(const char *model, const char *out, attn_encdec_arch arch, int beams) {
    attn_encdec_model *m = NULL;
    attn_tok *tok = NULL;
    attn_status s = attn_encdec_load_dir(model, &m);
    if (!s) s = attn_tok_load(model, &tok);
    attn_encdec_hf_export o = attn_encdec_hf_export_default(arch);
    if (!s) {
        o.bos_id = attn_tok_special_id(tok, ATTN_TOK_BOS);
        o.eos_id = attn_tok_special_id(tok, ATTN_TOK_EOS);
        o.decoder_start_id = o.bos_id;
        o.num_beams = beams;
        const int32_t V = attn_tok_vocab_size(tok);
        if (o.bos_id < 0 || o.eos_id < 0)
            s = attn_set_error(ATTN_STATUS_FORMAT,
                               "%s/tokenizer.json: no <s> or </s> token (the decoder's start and "
                               "end)",
                               model);
        else if (V != m->cfg.src_vocab || V != m->cfg.tgt_vocab)
            s = attn_set_error(ATTN_STATUS_FORMAT,
                               "%s/tokenizer.json: %d ids, but %s/config.json has src_vocab %d and "
                               "tgt_vocab %d (the tokenizer and the model must match)",
                               model, (int)V, model, m->cfg.src_vocab, m->cfg.tgt_vocab);
    }
    if (!s) s = attn_encdec_save_hf_dir(m, out, &o);
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", out);
    if (!s) s = attn_tok_save(tok, path);
    if (!s) s = write_tokenizer_config(tok, out, m->cfg.max_len);
    attn_tok_free(tok);
    attn_encdec_model_free(m);
    return s;
}

int cmd_export(int argc, char **argv) {
    const char *format = NULL, *pos[2] = {NULL, NULL};
    int npos = 0, beams = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(export_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--format")) {
            if (!v) return cli_usage_error("export: --format needs hf-marian or hf-m2m100");
            format = v, i++;
        } else if (!strcmp(a, "--beams")) {
            if (!cli_parse_int(v, 1, 256, &beams))
                return cli_usage_error("export: --beams needs an integer from 1 to 256, got '%s'",
                                       v ? v : "");
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("export: unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return cli_usage_error("export: one MODEL and one OUT directory, got '%s' too", a);
        }
    }
    if (!format) return cli_usage_error("export needs --format hf-marian|hf-m2m100");
    attn_encdec_arch arch;
    if (!strcmp(format, "hf-marian")) arch = ATTN_ENCDEC_ARCH_MARIAN;
    else if (!strcmp(format, "hf-m2m100")) arch = ATTN_ENCDEC_ARCH_M2M100;
    else return cli_usage_error("export: --format must be hf-marian or hf-m2m100, got '%s'", format);
    if (npos != 2) return cli_usage_error("export needs MODEL and OUT directories");
    attn_status s = run(pos[0], pos[1], arch, beams);
    return s ? cli_fail(s) : CLI_EXIT_OK;
}

/* cmd_quantize.c — `attn quantize IN OUT.gguf --type T [--pure] [--quiet]`: a Hugging Face
 * decoder directory or a GGUF file written as a GGUF file of type T, with llama.cpp's per-tensor
 * type choices (include/attn_gguf_quantize.h). */
#include "cmd_quantize.h"

#include "cli.h"

#include "attn_gguf_quantize.h"

#include <stdio.h>
#include <string.h>

static const char quantize_usage[] =
    "usage: attn quantize IN OUT.gguf --type TYPE [--pure] [--quiet]\n"
    "\n"
    "Writes OUT.gguf, a GGUF file llama.cpp and the gguf Python package load, from IN: a Hugging\n"
    "Face decoder directory (GPT-2, Llama, Mistral, Qwen2, Qwen3: config.json, safetensors,\n"
    "tokenizer.json with a byte-level BPE vocabulary) laid out as llama.cpp's\n"
    "convert_hf_to_gguf.py lays it out (metadata keys, tokenizer, tensor names, llama's q/k rows\n"
    "permuted), or a GGUF file (requantized: each tensor dequantized and quantized again).\n"
    "\n"
    "TYPE: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_s, q4_k_m (q4_k), q5_k_s,\n"
    "      q5_k_m (q5_k), q6_k. Which tensor gets which type follows llama-quantize: norms,\n"
    "      biases and other 1-D tensors stay F32, GPT-2's position table too; the output head\n"
    "      (the token table when tied) is Q6_K for the 4- and 5-bit types; q4_k_m and q5_k_m\n"
    "      give attn_v / attn_qkv and ffn_down Q6_K in the first and last eighth of the layers\n"
    "      and every third between; q4_k_s gives the first four attn_v and the first eighth of\n"
    "      ffn_down Q5_K. A row length the type's block does not divide falls back as llama.cpp:\n"
    "      Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16.\n"
    "\n"
    "options:\n"
    "  --type TYPE  the file type (required)\n"
    "  --pure       every quantized tensor TYPE (no mix; the row-length fallback still applies)\n"
    "  --quiet      no line per tensor\n"
    "\n"
    "output: one line per tensor on stderr ('[  3/ 24] blk.0.attn_v.weight  F32 -> Q6_K'), then\n"
    "        the file's size on stdout.\n";

static void progress(void *user, int i, int n, const char *name, attn_gguf_dtype from,
                     attn_gguf_dtype to, int n_dims, const int64_t *ne) {
    (void)user;
    char shape[96] = "";
    size_t o = 0;
    for (int d = 0; d < n_dims && o < sizeof shape; d++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", d ? ", " : "",
                              (long long)ne[d]);
    fprintf(stderr, "[%4d/%4d] %-36s {%s}  %s -> %s\n", i + 1, n, name, shape,
            attn_gguf_dtype_name(from), attn_gguf_dtype_name(to));
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *type = NULL;
    int npos = 0;
    bool pure = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(quantize_usage, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--type")) {
            if (i + 1 >= argc) return cli_usage_error("quantize: --type needs a value");
            type = argv[++i];
        } else if (!strcmp(a, "--pure")) {
            pure = true;
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("quantize: unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return cli_usage_error("quantize: one input and one output, got also '%s'", a);
        }
    }
    if (npos != 2)
        return cli_usage_error("quantize needs an input (a model directory or a .gguf file) and "
                               "an output file (usage: attn quantize IN OUT.gguf --type TYPE)");
    if (!type) return cli_usage_error("quantize: --type is required (e.g. --type q4_k_m)");
    attn_gguf_quantize_params p = attn_gguf_quantize_default_params();
    if (attn_gguf_ftype_parse(type, &p.ftype))
        return cli_usage_error("quantize: --type: %s", attn_last_error());
    p.pure = pure;
    if (!quiet) p.progress = progress;
    attn_status s = attn_gguf_quantize(pos[0], pos[1], &p);
    if (s) return cli_fail(s);
    FILE *f = fopen(pos[1], "rb");
    long size = -1;
    if (f && !fseek(f, 0, SEEK_END)) size = ftell(f);
    if (f) fclose(f);
    printf("wrote %s: %s, %.2f MiB\n", pos[1], attn_gguf_ftype_name(p.ftype),
           (double)size / (1024.0 * 1024.0));
    return CLI_EXIT_OK;
}

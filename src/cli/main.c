/* main.c — `attn`: global options, command dispatch, usage. */
#include "attn_dist.h"
#include "cli.h"
#include "cmd_attention.h"
#include "cmd_bleu.h"
#include "cmd_chat.h"
#include "cmd_embed.h"
#include "cmd_forward.h"
#include "cmd_generate.h"
#include "cmd_quantize.h"
#include "cmd_serve.h"
#include "cmd_tokenizer.h"
#include "cmd_train.h"
#include "cmd_translate.h"
#include "cmd_export.h"

#include "attn_kernels.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "attn " ATTN_VERSION " — the Transformer's attention, in C\n"
    "\n"
    "usage: attn [--threads N] [--backend auto|ref|avx2|avx512] COMMAND [ARGS...]\n"
    "\n"
    "commands:\n"
    "  explain [FILE.safetensors] [--json] [--png OUT.png]\n"
    "        self-attention step by step (q, k, v; scores; scaled; softmax; weighted sum),\n"
    "        encoder (bidirectional) and decoder (causal) side by side. FILE holds F32 tensors\n"
    "        x (T, d_model), w_q, w_k, w_v (d_model, d_k) and optionally the metadata key\n"
    "        \"tokens\" (a JSON array of T strings); without FILE, a built-in example over\n"
    "        \"Knowledge is power\". --json prints {\"encoder\": {...}, \"decoder\": {...}}.\n"
    "        --png draws the scores and softmax weights as heatmaps.\n"
    "  explain --model DIR|FILE.gguf TEXT [--layer L] [--head H] [--query TOKEN|I]\n"
    "          [--kind K] [--target TEXT] [--find TOKEN [--key TOKEN]] [--compare-masks]\n"
    "          [--json] [--png OUT.png] [--html OUT.html]\n"
    "        the same steps for one head of a real model (BERT, GPT-2, Llama family, the\n"
    "        translator) on your text, with the model's own numbers: x_i, the head's W_Q/W_K/W_V,\n"
    "        q, k (before/after rotary), v, scores, scaled, mask, softmax, weighted sum, the\n"
    "        head's share of W_O; --find ranks the heads by where TOKEN looks; --html writes a\n"
    "        self-contained page where a click picks the query (docs/explain.md)\n"
    "  attention --model DIR (TEXT | --ids IDS) [--target TEXT] [--out F.safetensors]\n"
    "            [--html F.html] [--png F.png] [--kind K] [--layer L] [--head H|mean|all]\n"
    "        capture every attention map of one input (translator: encoder, decoder, cross;\n"
    "        GPT-2, BERT), export it, view it in a self-contained page or draw heatmaps\n"
    "        (see 'attn attention --help')\n"
    "  train --data FILE.tsv --out DIR [--config FILE] [--time-budget S] [--resume] ...\n"
    "        train the encoder-decoder translation model (see 'attn train --help')\n"
    "  train --arch gpt --data FILE.txt --out DIR [--config FILE] [--tokenizer char|PATH]\n"
    "        [--batch N] [--max-steps N] [--resume] ...\n"
    "        train a GPT-2 language model on a text file (see 'attn train --help')\n"
    "  train --arch bert --data FILE --tokenizer DIR --out DIR [--config FILE | --init DIR]\n"
    "        masked-LM training of a BERT encoder on text lines (see 'attn train --help')\n"
    "  generate --model DIR --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K]\n"
    "           [--top-p P] [--min-p P] [--repetition-penalty R] [--stop TEXT] [--seed S]\n"
    "           [--greedy] [--no-stream]\n"
    "        continue TEXT with a decoder — GPT-2 or the Llama family (Llama 2/3, TinyLlama,\n"
    "        SmolLM2, Mistral, Qwen2, Qwen3), attn-trained or Hugging Face — streamed, with a KV\n"
    "        cache (see 'attn generate --help')\n"
    "  chat --model DIR [--system TEXT] [--jsonl] [sampling options]\n"
    "        multi-turn chat with a chat model's own template, streamed, the KV cache kept\n"
    "        across turns; with --jsonl one reply per JSON message list (see 'attn chat --help')\n"
    "  forward --model DIR --ids ID,ID,... [--out FILE.npy] [--hidden-out FILE.npy]\n"
    "          [--compare-hidden REF.npy]\n"
    "        run a Hugging Face model directory (gpt2, bert) on token ids; write its output\n"
    "        (gpt2: the logits (T, vocab)) as .npy or print a summary (see 'attn forward --help')\n"
    "  embed --model DIR [--out FILE.npy | --jsonl] [--batch N] [--precision f32|bf16] [TEXT...]\n"
    "        sentence embeddings (e.g. all-MiniLM-L6-v2) of each TEXT or stdin line, pooled\n"
    "        and normalized as the sentence-transformers directory says (see 'attn embed --help')\n"
    "  similarity --model DIR QUERY [--top-k K] < CANDIDATES\n"
    "        rank the candidate lines by cosine similarity to QUERY\n"
    "  fill-mask --model DIR [--top-k K] [--jsonl] \"The capital of France is [MASK].\"\n"
    "        the most probable tokens at each [MASK] (a BertForMaskedLM directory)\n"
    "  translate --model DIR [--beam K] [--length-penalty A] [--batch N] [TEXT...]\n"
    "        translate TEXT, or each line of standard input (greedy with --beam 1)\n"
    "  export --format hf-marian|hf-m2m100 MODEL OUT [--beams K]\n"
    "        save a translator as the Hugging Face directory (MarianMTModel or M2M100) that is\n"
    "        the same model, for transformers and CTranslate2 (see 'attn export --help')\n"
    "  bleu HYPOTHESES REFERENCES... [--tokenize zh|13a|none] [--lowercase] [--json]\n"
    "        corpus BLEU identical to sacreBLEU 2.x (4-grams, closest-reference brevity\n"
    "        penalty, 'exp' smoothing); one sentence per line; several REFERENCES files are\n"
    "        several references per sentence; --tokenize defaults to zh (English -> Chinese)\n"
    "  tokenizer train --data FILE --out DIR [--vocab-size N] [--column 1|2|all]\n"
    "  tokenizer encode --tokenizer DIR|FILE [TEXT...]\n"
    "  tokenizer decode --tokenizer DIR|FILE [--keep-special] [IDS...]\n"
    "        BPE with byte fallback, saved as a Hugging Face tokenizer.json (see\n"
    "        'attn tokenizer --help')\n"
    "  quantize IN OUT.gguf --type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|q6_k|...\n"
    "        write a decoder (a Hugging Face directory or a GGUF file) as a GGUF file that\n"
    "        llama.cpp loads, with llama-quantize's per-tensor types (see 'attn quantize --help')\n"
    "  serve --model NAME=PATH [--model NAME=PATH ...] [--host 127.0.0.1] [--port 8080]\n"
    "        [--api-key KEY] [--slots N] ...\n"
    "        an HTTP server for all three families at once: OpenAI-compatible embeddings,\n"
    "        completions and chat (streamed), LibreTranslate-style translation, tokenize,\n"
    "        attention maps, /metrics (see 'attn serve --help')\n"
    "  info  version, CPU features, kernel backend, threads and MPI\n"
    "  help  this text\n"
    "\n"
    "options:\n"
    "  --threads N      threads for the kernels (default: all cores, or OMP_NUM_THREADS)\n"
    "  --backend NAME   kernel path: auto (best for this CPU), ref (plain reference loops),\n"
    "                   avx2, avx512; also the environment variable ATTN_BACKEND\n"
    "  --version, --help\n";

static int cmd_info(void) {
    printf("attn %s\n", ATTN_VERSION);
    printf("backend: %s (available:", attn_backend_name(attn_get_backend()));
    const attn_backend all[] = {ATTN_BACKEND_REF, ATTN_BACKEND_AVX2, ATTN_BACKEND_AVX512};
    for (int i = 0; i < 3; i++)
        if (attn_backend_available(all[i])) printf(" %s", attn_backend_name(all[i]));
    printf(")\nthreads: %d\n", attn_get_num_threads());
    if (attn_dist_compiled())
        printf("mpi: %s (mpirun -np N attn train ...: data-parallel training)\n",
               attn_dist_library());
    else
        printf("mpi: no (built without MPI: install Open MPI and rebuild for mpirun)\n");
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    int i = 1;
    /* The environment's backend is checked here so that a typo is an error, not a silent
     * fallback. */
    const char *env = getenv("ATTN_BACKEND");
    if (env && *env) {
        attn_backend b;
        attn_status s = attn_backend_parse(env, &b);
        if (!s) s = attn_set_backend(b);
        if (s) {
            fprintf(stderr, "attn: error: ATTN_BACKEND: %s\n", attn_last_error());
            return CLI_EXIT_USAGE;
        }
    }
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--version")) {
            printf("attn %s\n", ATTN_VERSION);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--threads")) {
            int n;
            if (i + 1 >= argc || !cli_parse_int(argv[i + 1], 1, 1024, &n))
                return cli_usage_error("--threads needs a number from 1 to 1024");
            attn_set_num_threads(n);
            i++;
        } else if (!strcmp(a, "--backend")) {
            attn_backend b;
            if (i + 1 >= argc) return cli_usage_error("--backend needs a name");
            attn_status s = attn_backend_parse(argv[i + 1], &b);
            if (!s) s = attn_set_backend(b);
            if (s) return cli_fail(s);
            i++;
        } else {
            return cli_usage_error("unknown option '%s'", a);
        }
    }
    if (i >= argc) {
        fputs(usage_text, stderr);
        return CLI_EXIT_USAGE;
    }
    /* After --threads, so that the OpenMP workers it starts get the mode too. */
    (void)attn_set_flush_denormals(true);
    const char *cmd = argv[i];
    int sub_argc = argc - i;
    char **sub_argv = argv + i;
    if (!strcmp(cmd, "explain")) return cmd_explain(sub_argc, sub_argv);
    if (!strcmp(cmd, "attention")) return cmd_attention(sub_argc, sub_argv);
    if (!strcmp(cmd, "bleu")) return cmd_bleu(sub_argc, sub_argv);
    if (!strcmp(cmd, "train")) return cmd_train(sub_argc, sub_argv);
    if (!strcmp(cmd, "embed")) return cmd_embed(sub_argc, sub_argv);
    if (!strcmp(cmd, "similarity")) return cmd_similarity(sub_argc, sub_argv);
    if (!strcmp(cmd, "fill-mask")) return cmd_fill_mask(sub_argc, sub_argv);
    if (!strcmp(cmd, "translate")) return cmd_translate(sub_argc, sub_argv);
    if (!strcmp(cmd, "export")) return cmd_export(sub_argc, sub_argv);
    if (!strcmp(cmd, "forward")) return cmd_forward(sub_argc, sub_argv);
    if (!strcmp(cmd, "generate")) return cmd_generate(sub_argc, sub_argv);
    if (!strcmp(cmd, "chat")) return cmd_chat(sub_argc, sub_argv);
    if (!strcmp(cmd, "tokenizer")) return cmd_tokenizer(sub_argc, sub_argv);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(sub_argc, sub_argv);
    if (!strcmp(cmd, "serve")) return cmd_serve(sub_argc, sub_argv);
    if (!strcmp(cmd, "info")) return sub_argc == 1 ? cmd_info() : cli_usage_error("info takes no arguments");
    if (!strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return CLI_EXIT_OK;
    }
    return cli_usage_error("unknown command '%s'", cmd);
}

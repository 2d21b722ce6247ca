/* attn_gguf_quantize.h — write a GGUF file of a decoder in a chosen type (`attn quantize`): from
 * a Hugging Face directory (GPT-2 and the Llama family attn loads: llama, mistral, qwen2, qwen3)
 * as llama.cpp's convert_hf_to_gguf.py followed by llama-quantize would write it, or from a GGUF
 * file (requantize, as llama-quantize --allow-requantize).
 *
 *   attn_gguf_quantize_params p = attn_gguf_quantize_default_params();
 *   attn_gguf_ftype_parse("q4_k_m", &p.ftype);
 *   if (attn_gguf_quantize("models/SmolLM2-135M-Instruct", "smol.Q4_K_M.gguf", &p))
 *       puts(attn_last_error());
 *
 * ---- from a Hugging Face directory -------------------------------------------------------------
 * config.json, model.safetensors (or shards) and tokenizer.json (+ tokenizer_config.json), read
 * as attn_gpt_load_dir reads them. Written as convert_hf_to_gguf.py writes them:
 *   metadata  general.architecture ("llama" for llama and mistral, "qwen2", "qwen3", "gpt2"),
 *             general.type "model", general.name (the directory's name), ARCH.block_count,
 *             context_length, embedding_length, feed_forward_length, attention.head_count and
 *             for the Llama family attention.head_count_kv, rope.freq_base,
 *             attention.layer_norm_rms_epsilon, attention.key_length / value_length (when the
 *             configuration gives head_dim), rope.scaling.type "linear" + rope.scaling.factor;
 *             llama also ARCH.vocab_size and rope.dimension_count; gpt2
 *             attention.layer_norm_epsilon; general.file_type, general.quantization_version 2.
 *   tokenizer byte-level BPE tokenizer.json only (GPT-2, Llama 3, Qwen2, SmolLM2 style):
 *             tokenizer.ggml.model "gpt2", .pre from the pre-tokenizer's structure (ByteLevel
 *             alone "gpt-2", Digits + ByteLevel "smollm", Split with Llama 3's regex
 *             "llama-bpe", Split with Qwen2's regex "qwen2"; convert_hf_to_gguf.py hashes the
 *             token ids of a test text instead, which names the same four), .tokens (ids 0 ..
 *             vocab_size − 1; ids without a token "[PAD<id>]"), .token_type (1 normal, 3 control:
 *             special added tokens and "<|...|>", 4 user-defined: other added tokens, 5 unused),
 *             .merges ("a b"; the list form's spaces as U+0120), and gguf.SpecialVocab's keys:
 *             bos/eos/unk/sep/pad/cls/mask_token_id from tokenizer_config.json's *_token
 *             (looked up among the added tokens), else config.json's *_token_id;
 *             add_bos_token / add_eos_token from the post-processor (ByteLevel: false; a
 *             TemplateProcessing's leading / trailing special token) or tokenizer_config.json;
 *             tokenizer.chat_template from tokenizer_config.json or chat_template.jinja.
 *             A SentencePiece tokenizer (tokenizer.model, byte_fallback BPE) or WordPiece is
 *             ATTN_STATUS_UNSUPPORTED.
 *   tensors   llama.cpp's names; the llama architecture's q and k weights (and biases) with
 *             their rows permuted per head (LlamaModel.permute; qwen2, qwen3 are not); GPT-2's
 *             Conv1D weights transposed to (out, in); llama3 rope scaling as a rope_freqs
 *             tensor; 1-D tensors and norms F32.
 *
 * ---- from a GGUF file ---------------------------------------------------------------------------
 * Every metadata key is copied (general.file_type and general.quantization_version replaced,
 * moved to the end as ggml's gguf_set_val does); every tensor is written in its new type:
 * copied when the type does not change, else dequantized to float32 (attn_quant_dequantize;
 * F32, F16, BF16 and the quantized types of attn_quant.h) and quantized again. A tensor in
 * another type that would have to change is ATTN_STATUS_UNSUPPORTED.
 *
 * ---- which tensor gets which type (llama.cpp's src/llama-quant.cpp, without an imatrix) ------
 * Tensors are written in llama-quantize's order: the tensors outside blocks by name, then block
 * by block (numerically), each block's by name. Quantized are the tensors of 2 or more
 * dimensions whose name ends in "weight", except *_norm.weight, position_embd.weight and
 * token_types.weight; the others keep their type (F32). The default type is the ftype's
 * (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K for Q4_K_S/M, Q5_K for Q5_K_S/M, Q6_K).
 * Unless pure, for the quantized ftypes:
 *   output.weight, and token_embd.weight when there is no output.weight (tied): Q8_0 when its
 *       rows are not a multiple of the default type's block, else Q6_K unless the default is
 *       Q8_0 (so Q4_0 … Q5_K_M files get a Q6_K head, Q8_0 files a Q8_0 one);
 *   attn_v.weight and attn_qkv.weight, the i-th of n (in the order above): Q6_K for Q4_K_M and
 *       Q5_K_M when use_more_bits(i, n); Q5_K for Q4_K_S when i < 4;
 *   ffn_down, layer i of L: Q6_K for Q4_K_M and Q5_K_M when use_more_bits(i, L); Q5_K for
 *       Q4_K_S when i < L/8;
 *   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i − n/8) % 3 == 2.
 * Then, as llama.cpp's tensor_type_fallback, a type whose block does not divide the row length
 * falls back: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, and to F16 when even that block (32) does
 * not divide it. (llama.cpp's rules for Q2_K/Q3_K/IQ ftypes, MoE experts, Falcon and 70B models
 * are not implemented: those types are not attn's.)
 * The quantizers are attn_quant_quantize's: byte-identical to gguf.quants for F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, and ggml's reference quantizer for Q4_K, Q5_K, Q6_K.
 *
 * The output is written atomically (attn_gguf_writer_*), one tensor in memory at a time (from a
 * directory the float model is in memory as attn_gpt_load_dir loads it). The library never
 * prints: progress goes through the optional callback. */
#ifndef ATTN_GGUF_QUANTIZE_H
#define ATTN_GGUF_QUANTIZE_H

#include "attn_core.h"
#include "attn_gguf.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* llama.cpp's enum llama_ftype (general.file_type) for the types attn writes. */
typedef enum {
    ATTN_GGUF_FTYPE_F32 = 0,
    ATTN_GGUF_FTYPE_F16 = 1,
    ATTN_GGUF_FTYPE_Q4_0 = 2,
    ATTN_GGUF_FTYPE_Q4_1 = 3,
    ATTN_GGUF_FTYPE_Q8_0 = 7,
    ATTN_GGUF_FTYPE_Q5_0 = 8,
    ATTN_GGUF_FTYPE_Q5_1 = 9,
    ATTN_GGUF_FTYPE_Q4_K_S = 14,
    ATTN_GGUF_FTYPE_Q4_K_M = 15,
    ATTN_GGUF_FTYPE_Q5_K_S = 16,
    ATTN_GGUF_FTYPE_Q5_K_M = 17,
    ATTN_GGUF_FTYPE_Q6_K = 18,
    ATTN_GGUF_FTYPE_BF16 = 32
} attn_gguf_ftype;

/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_s", "q4_k_m", "q5_k_s",
 * "q5_k_m", "q6_k" (case-insensitive; "q4_k" = q4_k_m, "q5_k" = q5_k_m as llama-quantize's
 * aliases); anything else is ATTN_STATUS_INVALID_ARGUMENT listing them. */
attn_status attn_gguf_ftype_parse(const char *name, attn_gguf_ftype *out);
/* The names above in capitals ("Q4_K_M"); NULL for another value. */
const char *attn_gguf_ftype_name(attn_gguf_ftype ft);
/* The ftype's default tensor type (Q4_K for Q4_K_M, ...). */
attn_gguf_dtype attn_gguf_ftype_default_type(attn_gguf_ftype ft);

/* Called once per tensor as it is written (i of n, in file order). */
typedef void (*attn_gguf_quantize_progress)(void *user, int i, int n, const char *name,
                                            attn_gguf_dtype from, attn_gguf_dtype to,
                                            int n_dims, const int64_t *ne);

typedef struct {
    attn_gguf_ftype ftype;
    bool pure;           /* every quantized tensor the default type (llama-quantize --pure; the
                            row-length fallback still applies) */
    attn_gguf_quantize_progress progress; /* or NULL */
    void *user;
} attn_gguf_quantize_params;

attn_gguf_quantize_params attn_gguf_quantize_default_params(void); /* Q8_0, not pure */

/* Write out (a GGUF file) from in: a Hugging Face model directory or a GGUF file (what
 * attn_gpt_is_gguf_path says). Errors are one line naming the file and the key or tensor:
 * unreadable input, an architecture or tokenizer attn cannot write, a tensor type that cannot
 * be converted, a write failure (then out is untouched). */
attn_status attn_gguf_quantize(const char *in, const char *out,
                               const attn_gguf_quantize_params *params);

/* The type llama.cpp's rules above give one tensor: name, its dimensions ne[0..n_dims) and
 * current type, the file's n_layer, n_attn_v (count of attn_v/attn_qkv weights) and *i_attn_v /
 * *i_ffn_down (the counters, advanced as llama.cpp advances them when such a tensor is seen),
 * tied (no output.weight). Exposed for tests. */
attn_gguf_dtype attn_gguf_quantize_pick(const attn_gguf_quantize_params *p, const char *name,
                                        int n_dims, const int64_t *ne, attn_gguf_dtype cur,
                                        int n_layer, int n_attn_v, bool tied, int *i_attn_v,
                                        int *i_ffn_down);

#ifdef __cplusplus
}
#endif
#endif

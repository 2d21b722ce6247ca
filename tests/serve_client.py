"""The `openai` package (PyPI) as a real client of `attn serve` (tests/test_serve.c runs it).

    python tests/serve_client.py PORT API_KEY OUT.json

Asks, through the official client, for: embeddings of a few texts (the client's default base64
encoding), a greedy completion, a streamed greedy chat reply (chunks gathered), six greedy
completions of different prompt and reply lengths and three streamed greedy chats all at once
(AsyncOpenAI: more requests than slots, sharing the server's batched decoding steps) and the six
completions again one after the other; writes what came back as JSON for the C test to compare with the CLI. Exits 3
when the openai package is missing (the test then skips)."""
import asyncio
import json
import sys

try:
    import openai
except ImportError:
    sys.exit(3)

port, key, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
base = "http://127.0.0.1:%s/v1" % port
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)
out = {}

texts = ["Knowledge is power.", "知识就是力量", "The quick brown fox jumps over the lazy dog."]
emb = client.embeddings.create(model="minilm", input=texts)
out["embeddings"] = [[float(x) for x in d.embedding] for d in emb.data]
out["embedding_usage"] = emb.usage.prompt_tokens

comp = client.completions.create(model="smol", prompt="The capital of France is", max_tokens=12,
                                  temperature=0)
out["completion"] = comp.choices[0].text
out["completion_finish"] = comp.choices[0].finish_reason
out["completion_usage"] = [comp.usage.prompt_tokens, comp.usage.completion_tokens]

messages = [{"role": "user", "content": "What is 2+2?"}]
chunks = []
for ch in client.chat.completions.create(model="smol", messages=messages, max_tokens=30,
                                         temperature=0, stream=True):
    if ch.choices and ch.choices[0].delta.content:
        chunks.append(ch.choices[0].delta.content)
out["chat_stream"] = "".join(chunks)
out["chat_chunks"] = len(chunks)

# Prompts of different lengths (1 to 19 tokens) and replies of different lengths, more requests
# than the test server's 4 slots: they join the batched decoding steps at different positions and
# times, and leave at different times.
prompts = ["Once upon a time", "The best way to learn", "In 1492,", "Water boils at",
           "Hello", "The history of the Roman Empire is long and complicated, and historians "
           "still disagree about why it"]
max_toks = [8, 16, 12, 20, 6, 24]
chats = ["What is 2+2?", "Name three colors.", "Write a haiku about the sea."]
aclient = openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)


async def stream_chat(q):
    parts = []
    st = await aclient.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": q}], max_tokens=20, temperature=0,
        stream=True)
    async for ch in st:
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
    return "".join(parts)


async def together():
    comps = [aclient.completions.create(model="smol", prompt=p, max_tokens=n, temperature=0)
             for p, n in zip(prompts, max_toks)]
    rs = await asyncio.gather(*comps, *[stream_chat(q) for q in chats])
    return [r.choices[0].text for r in rs[:len(prompts)]], rs[len(prompts):]


out["concurrent_prompts"] = prompts
out["concurrent_max_tokens"] = max_toks
out["concurrent_chat_questions"] = chats
out["concurrent"], out["concurrent_chats"] = asyncio.run(together())
out["sequential"] = [client.completions.create(model="smol", prompt=p, max_tokens=n,
                                               temperature=0).choices[0].text
                     for p, n in zip(prompts, max_toks)]

try:
    client.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    out["not_found"] = "no error"
except openai.NotFoundError as e:
    out["not_found"] = e.status_code

with open(out_path, "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False)

"""A bounded load generator for `attn serve` (Python asyncio with the official openai client;
a fixed number of requests, loopback only). Not part of CI: the lead runs it.

    build/attn serve --model smol=models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --model minilm=models/all-MiniLM-L6-v2 --port 8080 --slots 16 &
    .venv/bin/python bench/serve_load.py [--port 8080] [--streams 1,4,16,64] [--tokens 32]
        [--embed-clients 32] [--embed-requests 4]

Chat: for each concurrency C, C streamed greedy chat completions of the same conversation at
once (max_tokens --tokens, the usage chunk asked for); every reply must equal the one a single
stream gets (continuous batching must not change a token). Prints aggregate generated tokens/s
(all streams' tokens / wall time), the speed-up over one stream, and p50 / p99 of the request
latency and of the time to the first token.
Embeddings: --embed-clients clients each send --embed-requests requests of 8 sentences at once;
texts/s, compared with `attn embed` on the same sentences in one process (--attn build/attn)."""
import argparse
import asyncio
import statistics
import subprocess
import sys
import time

import openai

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, default=8080)
ap.add_argument("--key", default="none")
ap.add_argument("--model", default="smol")
ap.add_argument("--embed-model", default="minilm")
ap.add_argument("--embed-dir", default="models/all-MiniLM-L6-v2")
ap.add_argument("--attn", default="build/attn")
ap.add_argument("--streams", default="1,4,16,64")
ap.add_argument("--tokens", type=int, default=32)
ap.add_argument("--embed-clients", type=int, default=32)
ap.add_argument("--embed-requests", type=int, default=4)
ap.add_argument("--threads", type=int, default=2, help="attn embed's --threads (the server's own)")
a = ap.parse_args()

client = openai.AsyncOpenAI(base_url="http://127.0.0.1:%d/v1" % a.port, api_key=a.key,
                            max_retries=0, timeout=600)
MESSAGES = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def one_stream():
    t0 = time.perf_counter()
    first, text, tokens = None, [], 0
    stream = await client.chat.completions.create(
        model=a.model, messages=MESSAGES, max_tokens=a.tokens, temperature=0, stream=True,
        stream_options={"include_usage": True})
    async for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            if first is None:
                first = time.perf_counter() - t0
            text.append(ch.choices[0].delta.content)
        if ch.usage:
            tokens = ch.usage.completion_tokens
    return "".join(text), tokens, time.perf_counter() - t0, first or 0.0


async def chat_level(c):
    t0 = time.perf_counter()
    rs = await asyncio.gather(*[one_stream() for _ in range(c)])
    return rs, time.perf_counter() - t0


async def embed_client(texts):
    n = 0
    lat = []
    for _ in range(a.embed_requests):
        t0 = time.perf_counter()
        r = await client.embeddings.create(model=a.embed_model, input=texts)
        lat.append(time.perf_counter() - t0)
        n += len(r.data)
    return n, lat


async def main():
    ref = None
    base = None
    print("chat: %d greedy tokens per stream, model %s" % (a.tokens, a.model))
    for c in [int(x) for x in a.streams.split(",")]:
        rs, wall = await chat_level(c)
        texts = [r[0] for r in rs]
        if ref is None:
            ref = texts[0]
        ok = all(t == ref for t in texts)
        toks = sum(r[1] for r in rs)
        tps = toks / wall
        base = base or tps
        lat = [r[2] for r in rs]
        ttft = [r[3] for r in rs]
        print("  %3d streams: %5d tokens in %6.2f s = %7.1f tokens/s (x%.2f of 1 stream); "
              "latency p50 %.2f s p99 %.2f s; first token p50 %.2f s p99 %.2f s; outputs %s"
              % (c, toks, wall, tps, tps / base, pct(lat, 50), pct(lat, 99), pct(ttft, 50),
                 pct(ttft, 99), "all correct" if ok else "DIFFER"))
        if not ok:
            sys.exit(1)
    sents = ["Sentence number %d is about %s." % (i, w) for i, w in
             enumerate(["cats", "stocks", "rain", "music", "rivers", "bread", "chess", "stars"])]
    t0 = time.perf_counter()
    rs = await asyncio.gather(*[embed_client(sents) for _ in range(a.embed_clients)])
    wall = time.perf_counter() - t0
    n = sum(r[0] for r in rs)
    lat = [x for r in rs for x in r[1]]
    print("embeddings: %d clients x %d requests x %d texts: %d texts in %.2f s = %.1f texts/s; "
          "latency p50 %.3f s p99 %.3f s" % (a.embed_clients, a.embed_requests, len(sents), n,
                                              wall, n / wall, pct(lat, 50), pct(lat, 99)))
    lines = "\n".join(sents * (a.embed_clients * a.embed_requests)) + "\n"
    t0 = time.perf_counter()
    subprocess.run([a.attn, "--threads", str(a.threads), "embed", "--model", a.embed_dir],
                   input=lines.encode(), stdout=subprocess.DEVNULL, check=True)
    cli = time.perf_counter() - t0
    print("attn embed (one process, load included): %d texts in %.2f s = %.1f texts/s; server / "
          "CLI = %.2f" % (n, cli, n / cli, (n / wall) / (n / cli)))


asyncio.run(main())

"""A bounded load generator for `attn serve` (Python asyncio with the official openai client;
a fixed number of requests, loopback only). Not part of CI: the lead runs it.

    build/attn serve --model smol=models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --model minilm=models/all-MiniLM-L6-v2 --port 8080 --slots 16 &
    .venv/bin/python bench/serve_load.py [--port 8080] [--streams 1,4,16,64] [--tokens 32]
        [--embed-clients 32] [--embed-requests 4] [--conversations 4] [--repeat N]
        [--no-embed] [--completions]

Chat: for each concurrency C, C streamed greedy chat completions at once (max_tokens --tokens,
the usage chunk asked for), stream i asking conversation i mod --conversations (questions of
different lengths, so the slots decode at different positions); every reply must equal the one a
single stream gets for that conversation (measured first, one at a time; continuous batching must
not change a token). Prints aggregate generated tokens/s (all streams' tokens / wall time), the
speed-up over one stream, p50 / p99 of the request latency and of the time to the first token,
and the mean decoding batch (attn_decode_slot_steps_total / attn_decode_iterations_total over
the level, from /metrics). --repeat N runs every level N times.
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
ap.add_argument("--conversations", type=int, default=4, help="distinct chat questions (1..8)")
ap.add_argument("--repeat", type=int, default=1, help="runs of each concurrency level")
ap.add_argument("--no-embed", action="store_true", help="skip the embeddings part")
ap.add_argument("--peer", action="store_true",
                help="the server is a peer (llama-server): no attn_decode_* metrics, and replies "
                     "that differ from the single stream's are counted, not fatal (its batched "
                     "kernels need not reproduce one stream's numbers)")
ap.add_argument("--json", help="write {streams: tokens/s} of each level's best run to this file")
ap.add_argument("--completions", action="store_true",
                help="streamed /v1/completions of the questions as prompts (a model without a "
                     "chat template, e.g. GPT-2) instead of chat")
a = ap.parse_args()

client = openai.AsyncOpenAI(base_url="http://127.0.0.1:%d/v1" % a.port, api_key=a.key,
                            max_retries=0, timeout=600)
QUESTIONS = ["Write a short story about a robot who learns to paint.",
             "Why is the sky blue?",
             "Explain, step by step and for a beginner, how a bicycle's gears make it easier to "
             "climb a steep hill, and when a rider should change them.",
             "Hi!",
             "List some fruits.",
             "What should I see in Paris if I only have one day there?",
             "Describe the water cycle.",
             "Tell me a joke about computers."]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def metrics():
    if a.peer:
        return {"attn_decode_iterations_total": 0.0, "attn_decode_slot_steps_total": 0.0}
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % a.port,
                                 headers={"Authorization": "Bearer " + a.key})
    out = {}
    for line in urllib.request.urlopen(req).read().decode().splitlines():
        if line.startswith("attn_decode_"):
            k, v = line.split()
            out[k] = float(v)
    return out


async def one_stream(q):
    t0 = time.perf_counter()
    first, text, tokens = None, [], 0
    if a.completions:
        stream = await client.completions.create(
            model=a.model, prompt=QUESTIONS[q], max_tokens=a.tokens, temperature=0, stream=True,
            stream_options={"include_usage": True})
    else:
        stream = await client.chat.completions.create(
            model=a.model, messages=[{"role": "user", "content": QUESTIONS[q]}],
            max_tokens=a.tokens, temperature=0, stream=True,
            stream_options={"include_usage": True})
    async for ch in stream:
        piece = None
        if ch.choices:
            piece = ch.choices[0].text if a.completions else ch.choices[0].delta.content
        if piece:
            if first is None:
                first = time.perf_counter() - t0
            text.append(piece)
        if ch.usage:
            tokens = ch.usage.completion_tokens
    return "".join(text), tokens, time.perf_counter() - t0, first or 0.0


async def chat_level(c):
    t0 = time.perf_counter()
    rs = await asyncio.gather(*[one_stream(i % a.conversations) for i in range(c)])
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
    a.conversations = max(1, min(a.conversations, len(QUESTIONS)))
    ref = [(await one_stream(q))[0] for q in range(a.conversations)]
    base = None
    best = {}
    print("%s: %d greedy tokens per stream, model %s, %d conversations" %
          ("completions" if a.completions else "chat", a.tokens, a.model, a.conversations))
    for c in [int(x) for x in a.streams.split(",")]:
        for _ in range(a.repeat):
            m0 = metrics()
            rs, wall = await chat_level(c)
            m1 = metrics()
            steps = m1["attn_decode_iterations_total"] - m0["attn_decode_iterations_total"]
            slots = m1["attn_decode_slot_steps_total"] - m0["attn_decode_slot_steps_total"]
            bad = sum(r[0] != ref[i % a.conversations] for i, r in enumerate(rs))
            toks = sum(r[1] for r in rs)
            tps = toks / wall
            base = base or tps
            lat = [r[2] for r in rs]
            ttft = [r[3] for r in rs]
            best[c] = max(best.get(c, 0.0), tps)
            print("  %3d streams: %5d tokens in %6.2f s = %7.1f tokens/s (x%.2f of 1 stream); "
                  "latency p50 %.2f s p99 %.2f s; first token p50 %.2f s p99 %.2f s; mean batch "
                  "%s; outputs %s"
                  % (c, toks, wall, tps, tps / base, pct(lat, 50), pct(lat, 99), pct(ttft, 50),
                     pct(ttft, 99), "n/a" if a.peer else "%.1f" % (slots / max(steps, 1)),
                     "all %d as one stream's" % c if not bad else "%d DIFFER from one stream's"
                     % bad), flush=True)
            if bad and not a.peer:
                sys.exit(1)
    if a.json:
        import json
        with open(a.json, "w") as f:
            json.dump({str(k): v for k, v in best.items()}, f)
    if a.no_embed:
        return
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

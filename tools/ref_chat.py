"""Chat-template references for tests/test_chat.c, computed live with transformers 4.49's
apply_chat_template (jinja2 under transformers' ImmutableSandboxedEnvironment).

Writes OUT/chat/ (OUT = argv[1], default build/ref):
  cases.json   {"now": T, "templates": [{"name", "group", "path", "tokens": {...}}],
                "conversations": {name: [messages]}, "cases": [{"template", "conv", "agp",
                "extra": JSON text or null, "out": text | null, "error": null | {"type", "message"}}],
                "spans": [{"template", "conv", "extra", "spans": [[message, begin, end]] | null}]}
  templates/NAME.jinja   each template's source, exactly as given to transformers
  dirs/NAME/   model directories (tokenizer_config.json with the template and special tokens,
               or chat_template.jinja) for attn_chat_template_load_dir

Templates: every file of models/llamacpp/templates (tools/get_llamacpp_assets.sh; group "family"
for the supported model families the task names, "other" for the rest), and the published
templates kept in tests/data/chat/*.json (Llama 2 chat, Mistral-7B-Instruct v0.1 / v0.3,
TinyLlama chat, SmolLM2; group "family"). SmolLM2's comes from
models/SmolLM2-135M-Instruct/tokenizer_config.json when tools/get_smollm2.sh has made it.

strftime_now is pinned to the time NOW (the test passes the same time to attn) so that Llama 3's
"Today Date" does not depend on when each side runs. A render that raises records the exception's
type and message: raise_exception's TemplateError message must come back as attn's error message.
"""
import datetime
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "ref"), "chat")
NOW = 1700000000  # 2023-11-14

FAMILY = [
    "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
    "meta-llama-Llama-3.3-70B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
    "Qwen-QwQ-32B", "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506",
    "HuggingFaceTB-SmolLM3-3B", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "microsoft-Phi-3.5-mini-instruct"]

# the special tokens of each family's tokenizer_config.json (what apply_chat_template passes)
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
DEEPSEEK = {"bos_token": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "eos_token": "<\uff5cend\u2581of\u2581sentence\uff5c>"}
TOKENS = {
    "meta-llama-Llama-3.1-8B-Instruct": LLAMA3, "meta-llama-Llama-3.2-3B-Instruct": LLAMA3,
    "meta-llama-Llama-3.3-70B-Instruct": LLAMA3, "Qwen-Qwen2.5-7B-Instruct": QWEN,
    "Qwen-Qwen3-0.6B": QWEN, "Qwen-QwQ-32B": QWEN,
    "mistralai-Mistral-Nemo-Instruct-2407": MISTRAL, "Mistral-Small-3.2-24B-Instruct-2506": MISTRAL,
    "HuggingFaceTB-SmolLM3-3B": {"eos_token": "<|im_end|>", "pad_token": "<|im_end|>"},
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": DEEPSEEK,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": DEEPSEEK,
    "microsoft-Phi-3.5-mini-instruct": {"bos_token": "<s>", "eos_token": "<|endoftext|>",
                                        "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
}
GENERIC = {"bos_token": "<s>", "eos_token": "</s>"}
THINKING = {"Qwen-Qwen3-0.6B", "HuggingFaceTB-SmolLM3-3B", "Qwen-QwQ-32B"}

U, A, S = "user", "assistant", "system"


def m(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}

CONVS = {
    "single": [m(U, "Hello! How are you?")],
    "system": [m(S, "You are a helpful assistant."), m(U, "What is 2+2?")],
    "answered": [m(U, "What is 2+2?"), m(A, "2 + 2 = 4.")],
    "multi": [m(S, "You are terse."), m(U, "Hi"), m(A, "Hello."), m(U, "Name a colour."),
              m(A, "Blue."), m(U, "Another?")],
    "multi_nosys": [m(U, "Hi"), m(A, "Hello! How can I help?"), m(U, "Tell me a joke."),
                    m(A, "Why did the chicken cross the road? To get to the other side.")],
    "unicode": [m(U, "Gr\u00fc\u00dfe! \u4f60\u597d \U0001F916 \u2014 \u00bfqu\u00e9 tal? e\u0301"),
                m(A, "Tr\u00e8s bien \U0001F44D \u2713 \u0645\u0631\u062d\u0628\u0627"),
                m(U, "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\u3000\u00a0end")],
    "empty": [m(U, "")],
    "templatey": [m(U, "{{ x }} {% if y %}z{% endif %} {# c #} <|im_end|></s>[INST]"),
                  m(A, "{{ raise_exception('no') }} }} {%")],
    "whitespace": [m(S, "  padded system \n"), m(U, "\n  leading and trailing  \n\n"),
                   m(A, "\n answer \n"), m(U, "\tq\t")],
    "bad_alternation": [m(U, "one"), m(U, "two")],
    "parts": [m(U, [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}])],
    "reasoning": [m(U, "What is 7*6?"),
                  m(A, "<think>\n7*6 = 42\n</think>\n\n42."), m(U, "And 6*7?")],
    "tools": [m(U, "What's the weather in Paris?"),
              m(A, "", tool_calls=[{"id": "call00001", "type": "function", "function": {
                  "name": "get_weather", "arguments": {"city": "Paris"}}}]),
              m("tool", "{\"temperature\": 21}", name="get_weather", tool_call_id="call00001"),
              m(A, "It is 21 \u00b0C in Paris.")],
    "long20": [m(U if i % 2 == 0 else A, ("question %d: what about %s?" if i % 2 == 0 else
                                          "answer %d: %s is fine.") % (i, "x" * (i % 7)))
               for i in range(20)],
}
# conversations whose assistant spans are checked
SPAN_CONVS = ["answered", "multi_nosys", "unicode", "whitespace", "long20"]


# One feature (or a few) each, rendered over the "multi" conversation like the real templates:
# the jinja2 semantics attn follows, checked live.
UNIT = {
    "ws_control": "a  {%- if true %} b {% endif -%}  c\n  {% if true %}\n  d\n  {% endif %}\n{{- ' e ' -}}  f {#- x -#} g {%+ if true %}h{% endif +%}\ni",
    "lstrip_comment": "x\n    {# note #}\n  y {{ 1 }}\n\t{%- set a = 2 %}{{ a }}\n",
    "raw": "{% raw %}{{ not evaluated }}{% endraw %}|{%- raw -%}  {% x %}  {%- endraw %}|",
    "crlf": "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\n",
    "literals": "{{ 'a\\tb\\n\\x41\\u00e9\\U0001F600\\101\\q' }}|{{ \"dq'\" }}|{{ 'x' 'y' }}|{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5e3 }}|{{ 2.5 }}|{{ true }}{{ None }}{{ none }}",
    "floats": "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 1/3 }} {{ 10/2 }} {{ 2**0.5 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 3 * 1.5 }}",
    "repr": "{{ [1, 'a', \"b'c\", none, true, 1.5, {'k': [1, 2]}] }} {{ (1,) }} {{ (1, 'x') }} {{ () }} {{ {'a': 'b\\n'} }} {{ ['\\u00e9\\t'] }} {{ messages[0] }}",
    "tojson": "{{ messages|tojson }}|{{ {'b': 1, 'a': [1.5, none, true, 'x\\u00e9\\n\"']}|tojson }}|{{ {'b': 1, 'a': 2}|tojson(indent=2) }}|{{ {'b': 1, 'a': {'c': []}}|tojson(sort_keys=true, indent=1) }}|{{ 'caf\\u00e9 \\U0001F600'|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ {1: 'int key', none: 0}|tojson }}",
    "strings": "{% set s = '  Hello, World  ' %}[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ s|trim }}][{{ 'xxhixx'.strip('x') }}][{{ s.upper() }}][{{ s.lower() }}][{{ 'hello world-foo'.title() }}][{{ 'hello wORLD'|title }}][{{ 'hELLO'.capitalize() }}][{{ 'hELLO'|capitalize }}][{{ s.replace('l', 'L') }}][{{ 'aaa'.replace('a', 'b', 2) }}][{{ 'ab'.replace('', '-') }}][{{ s|replace('o', '0') }}]",
    "split": "{{ 'a,b,,c'.split(',') }} {{ '  a  b \\n c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x<think>y</think>z'.split('</think>')[-1] }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }} {{ ' a b '.split(none, 1) }}",
    "startswith": "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ '{} and {name}'.format(1, name='x') }}",
    "unicode_str": "{% set u = 'h\\u00e9llo \\U0001F600 \\u4e16\\u754c' %}{{ u|length }} {{ u[1] }} {{ u[-1] }} {{ u[1:4] }} {{ u[::-1] }} {{ u[::2] }} {{ u.upper() }} {{ u|list }} {{ u.find('\\u4e16') }} {{ '\\u00c9COLE'.lower() }} {{ '\\u00a0x\\u3000'.strip() }}|",
    "slicing": "{% set l = [0, 1, 2, 3, 4, 5] %}{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[1:5:2] }} {{ l[5:1:-2] }} {{ l[10:] }} {{ l[-100:2] }} {{ messages[1:]|length }} {{ messages[-1].role }} {{ l[2] }} {{ l[-1] }} {{ l.0 }}",
    "tests": "{% for v in [none, true, false, 0, 1, 1.5, 'a', '', [], [1], {}, {'a': 1}, undefined_name] %}{{ v is none }}{{ v is defined }}{{ v is undefined }}{{ v is string }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is callable }}|{% endfor %}",
    "tests2": "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 1 is lt 2 }}{{ 1 is le 0 }}{{ 1 is in [1, 2] }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ none is sameas none }}{{ 'x' is not string }}{{ messages is not none }}",
    "filters": "{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }} {{ [1, 2, 2, 3, 1]|unique|list }} {{ ['A', 'a', 'b']|unique|list }} {{ [1, 2]|first }} {{ [1, 2]|last }} {{ [1, 2, 3]|sum }} {{ [1, 5, 3]|max }} {{ [1, 5, 3]|min }} {{ -3|abs }} {{ [1, 2]|reverse|list }} {{ 'abc'|reverse }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }} {{ {'a': 1}|items|list }} {{ [1, 2]|join(', ') }} {{ messages|map(attribute='role')|join('/') }} {{ ['a', 'b']|map('upper')|list }} {{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='content')|list }} {{ [0, 1, '', 'x']|select|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ messages|selectattr('role')|list|count }}",
    "filters2": "{{ 'x'|default('d') }} {{ undefined_var|default('d') }} {{ ''|default('d', true) }} {{ none|d('n') }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ 4.7|int }} {{ '2.5'|float }} {{ 3|float }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 12|string + 'x' }} {{ 'a<b>&\"\\''|escape }} {{ 'a<b'|e }} {{ 'x'|center(7) }}|{{ 'one two  three'|wordcount }} {{ 'ab'|upper }} {{ 'AB'|lower }} {{ [1, [2]]|length }} {{ {'a': 1}|length }} {{ undefined_var|length }} {{ {'a': 1}|list }}",
    "indent": "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}|{{ 'x'|indent(first=true) }}",
    "markup": "{{ ('<a>'|safe) + '<b>' }} {{ '<a>' + ('<b>'|safe) }} {{ ('<a>'|safe) ~ '<b>' }} {{ (\"'\"|safe + \"it's\" + \"'\"|safe) }} {{ '<x>'|safe|e }} {{ ('<x>'|safe) is escaped }} {{ '<x>' is escaped }}",
    "operators": "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 'a' + 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ none or 'x' }} {{ 0 and 'x' }} {{ 'y' and 'x' }} {{ not 0 }} {{ 'yes' if 0 else 'no' }} {{ 'yes' if [] }}|{{ 1 if true else 2 if true else 3 }} {{ 7 % 3 }} {{ 2 - 5 }} {{ 5 / 2 }} {{ 5.0 // 2 }} {{ +3 }} {{ -(-3) }}",
    "loops": "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }}[{{ loop.previtem.role if loop.previtem is defined }}][{{ loop.nextitem.role if loop.nextitem is defined }}]{{ loop.cycle('a', 'b') }};{% endfor %}|{% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length }}{{ m.content }};{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}|{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}|{% for c in 'h\\u00e9' %}[{{ c }}]{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for i in range(2) %}{% for j in range(2) %}{{ loop.depth }}{{ i }}{{ j }}{% endfor %}{% endfor %}|{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "scoping": "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}|{% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }}{{ ns.items }}|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set blk %}  inner {{ x }}  {% endset %}[{{ blk }}]|{% set up | upper %}shout{% endset %}{{ up }}|{% set n = namespace() %}{% set n.v = 'z' %}{{ n.v }}{{ n.missing is defined }}",
    "macros": "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C') }} {{ greet('D', punct='.') }}|{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}|{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside {{ messages|length }}{% endcall %}|{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(3) }}|{% macro uses_outer() %}{{ outer_var }}{% endmacro %}{% set outer_var = 'late' %}{{ uses_outer() }}|{% macro m2(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m2(1) }}|{% filter upper %}filtered {{ 'text' }}{% endfilter %}|{% macro cl(x) %}{{ caller(x * 2) }}{% endmacro %}{% call(v) cl(21) %}got {{ v }}{% endcall %}",
    "dicts": "{% set d = {'b': 1, 'a': 2, 3: 'three'} %}{{ d.b }} {{ d['a'] }} {{ d[3] }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.missing is defined }} {{ d|length }} {{ d.items is defined }} {{ messages[0].content }} {{ messages[0]['role'] }} {{ {'b': 1, 'a': 2}|dictsort|first }} {{ d[3] ~ d['b'] }} {{ {'x': d}.x.b }}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}",
    "print_stmt": "{% print 'printed' %} {% print messages|length, 2 %}",
    "globals": "{{ strftime_now('%Y-%m-%d %H %b %A %j') }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ raise_exception is defined }} {{ add_generation_prompt }} {{ bos_token }} {{ eos_token }} {{ tools }} {{ documents }}",
    "raise": "{% if messages|length > 1 %}{{ raise_exception('Bad conversation: ' ~ messages|length ~ ' messages') }}{% endif %}",
    "undefined_use": "{{ nope.attr }}",
    "undefined_ok": "[{{ nope }}][{{ nope|default('d') }}][{{ messages[99] }}][{{ messages[0].nope }}][{{ nope is defined }}][{% for x in nope %}x{% endfor %}][{{ nope|length }}][{{ 'x' ~ nope }}][{{ nope == nope }}][{{ nope|list }}][{{ messages[0].nope is none }}]",
    "type_error": "{{ 1 + 'a' }}",
    "append_refused": "{% set l = [] %}{{ l.append(1) }}",
    "unknown_filter_soft": "{% if false %}{{ x|no_such_filter }}{% endif %}ok",
    "unknown_filter": "{{ x|no_such_filter }}",
    "syntax_error": "{% if %}",
    "generator_true": "{{ 'yes' if messages|selectattr('role', 'eq', 'nobody') else 'no' }} {{ (messages|selectattr('role', 'eq', 'nobody')|list) is sequence }}",
    "whitespace_modes": "{%- for m in messages -%}\n  {{- m.role -}}\n  {% if not loop.last %},{% endif %}\n{%- endfor %}\n  tail  \n",
    "concat_types": "{{ 1 ~ 2 }} {{ [1] ~ (2,) }} {{ 1.0 ~ '' }} {{ {'a': 1} ~ '' }}",
    "nested_data": "{% set d = {'outer': {'inner': [{'k': 'v'}]}} %}{{ d.outer.inner[0].k }} {{ d['outer']['inner'][0]['k'] }} {{ d.outer.inner|map(attribute='k')|first }} {{ d|selectattr('x', 'defined')|list }}",
}


def load_published():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "chat", "*.json"))):
        d = json.load(open(path, encoding="utf-8"))
        name = os.path.basename(path)[:-5]
        src = d["chat_template"]
        if name == "smollm2-135m-instruct":
            cfg = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct", "tokenizer_config.json")
            if os.path.exists(cfg):
                c = json.load(open(cfg, encoding="utf-8"))
                if isinstance(c.get("chat_template"), str):
                    src = c["chat_template"]
        toks = {k: v for k, v in d.items() if k.endswith("_token")}
        out.append((name, src, toks))
    return out


def make_tokenizer(template, tokens):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    vocab = {"<unk0>": 0}
    for v in tokens.values():
        vocab.setdefault(v, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk0>"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, chat_template=template, **tokens)


def pin_clock(template):
    from transformers.utils.chat_template_utils import _compile_jinja_template
    compiled = _compile_jinja_template(template)  # cached: apply_chat_template gets this one
    when = datetime.datetime.fromtimestamp(NOW)
    compiled.environment.globals["strftime_now"] = lambda fmt: when.strftime(fmt)


def render(tok, conv, agp, extra):
    kw = dict(extra or {})
    tools = kw.pop("tools", None)
    documents = kw.pop("documents", None)
    try:
        return tok.apply_chat_template(conv, tools=tools, documents=documents, tokenize=False,
                                       add_generation_prompt=agp, **kw), None
    except Exception as e:  # noqa: BLE001 - every failure is a reference too
        import jinja2
        kind = "raise" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
        return None, {"type": kind, "message": str(e)}


def spans_of(tok, conv, extra):
    full, err = render(tok, conv, False, extra)
    if err:
        return None
    out = []
    for i, msg in enumerate(conv):
        if msg["role"] != "assistant":
            continue
        pre, e1 = render(tok, conv[:i], True, extra) if i else ("", None)
        upto, e2 = render(tok, conv[:i + 1], False, extra)
        if e1 or e2 or not upto.startswith(pre) or not full.startswith(upto):
            return None
        out.append([i, len(pre.encode()), len(upto.encode())])
    return out


def main():
    import transformers
    assert transformers.__version__ == "4.49.0", transformers.__version__
    os.makedirs(os.path.join(OUT, "templates"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "dirs"), exist_ok=True)
    tdir = os.path.join(ROOT, "models", "llamacpp", "templates")
    templates = []
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        name = os.path.basename(path)[:-6]
        src = open(path, encoding="utf-8").read()
        templates.append((name, src, TOKENS.get(name, GENERIC), "family" if name in FAMILY else "other"))
    if not templates:
        print("error: no templates in %s (run tools/get_llamacpp_assets.sh)" % tdir)
        sys.exit(1)
    for name, src, toks in load_published():
        templates.append((name, src, toks, "family"))
    for name, src in UNIT.items():
        templates.append(("unit-" + name, src, GENERIC, "unit"))
    doc = {"now": NOW, "templates": [], "conversations": CONVS, "cases": [], "spans": []}
    n_ok = n_err = 0
    for name, src, toks, group in templates:
        tpath = os.path.join(OUT, "templates", name + ".jinja")
        with open(tpath, "w", encoding="utf-8", newline="") as f:
            f.write(src)
        doc["templates"].append({"name": name, "group": group, "path": tpath, "tokens": toks})
        try:
            tok = make_tokenizer(src, toks)
            pin_clock(src)
        except Exception as e:  # noqa: BLE001 - a template jinja2 cannot compile
            for conv in (CONVS if group != "unit" else ["multi"]):
                for agp in (False, True):
                    doc["cases"].append({"template": name, "conv": conv, "agp": agp, "extra": None,
                                         "out": None, "error": {"type": type(e).__name__, "message": str(e)}})
                    n_err += 1
            continue
        extras = [None]
        if name in THINKING:
            extras += [{"enable_thinking": False}, {"enable_thinking": True}]
        for conv, msgs in (CONVS.items() if group != "unit" else [("multi", CONVS["multi"])]):
            for extra in extras:
                for agp in (False, True):
                    ex = dict(extra or {})
                    if conv == "tools":
                        ex["tools"] = [WEATHER_TOOL]
                    out, err = render(tok, msgs, agp, ex)
                    n_ok += err is None
                    n_err += err is not None
                    doc["cases"].append({"template": name, "conv": conv, "agp": agp,
                                         "extra": json.dumps(ex, ensure_ascii=False) if ex else None,
                                         "out": out, "error": err})
        if group == "family":
            for conv in SPAN_CONVS:
                doc["spans"].append({"template": name, "conv": conv, "extra": None,
                                     "spans": spans_of(tok, CONVS[conv], None)})
    # model directories for the loader: tokenizer_config.json (string template, AddedToken dict
    # tokens), a named-template list, and chat_template.jinja alone
    fam = {t[0]: t for t in templates}
    qwen = fam["Qwen-Qwen2.5-7B-Instruct"]
    d = os.path.join(OUT, "dirs", "config-string")
    os.makedirs(d, exist_ok=True)
    cfg = {"chat_template": qwen[1], "eos_token": {"content": "<|im_end|>", "lstrip": False,
                                                   "normalized": False, "rstrip": False,
                                                   "single_word": False, "special": True},
           "pad_token": "<|endoftext|>", "bos_token": None,
           "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), ensure_ascii=False)
    d = os.path.join(OUT, "dirs", "config-list")
    os.makedirs(d, exist_ok=True)
    l2 = fam["llama-2-chat"]
    cfg = {"chat_template": [{"name": "default", "template": l2[1]},
                             {"name": "tool_use", "template": qwen[1]}], **l2[2]}
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), ensure_ascii=False)
    d = os.path.join(OUT, "dirs", "jinja-file")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(fam["Qwen-Qwen3-0.6B"][1])
    json.dump({"eos_token": "<|im_end|>"}, open(os.path.join(d, "tokenizer_config.json"), "w"))
    os.makedirs(os.path.join(OUT, "dirs", "none"), exist_ok=True)
    json.dump({"eos_token": "</s>"}, open(os.path.join(OUT, "dirs", "none", "tokenizer_config.json"), "w"))
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    print("chat: %d templates, %d renders, %d of them errors, %d span cases -> %s" %
          (len(templates), n_ok + n_err, n_err, len(doc["spans"]), OUT))


if __name__ == "__main__":
    main()

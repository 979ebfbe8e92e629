"""agents_api_check.py URL KEY LOG - gate 55's checks of k3 serve as the backend
of coding agents (issue 31): /v1/messages, /v1/messages/count_tokens and
/v1/responses, the K3 API contract and the llama-server/vLLM fields on
/v1/chat/completions, /v1/models aliases, clamping. The server runs with
--api-key KEY, --alias k3, --max-tokens 24 and --max-context 400; LOG is its log.
Exits 1 with the first failure."""
import json
import sys
import urllib.error
import urllib.request

URL, KEY, LOG = sys.argv[1], sys.argv[2], sys.argv[3]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def call(path, body=None, headers=None, method=None, raw=None):
    """(status, parsed JSON or the text) of a request; Bearer KEY unless headers say."""
    h = {"Content-Type": "application/json"}
    h.update({"Authorization": "Bearer " + KEY} if headers is None else headers)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(URL + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def ok(path, body, what):
    status, r = call(path, body)
    if status != 200:
        fail("%s: HTTP %d: %s" % (what, status, str(r)[:400]))
    return r


def sse(path, body):
    """The (event, data) pairs of a streamed answer."""
    status, text = call(path, body)
    if status != 200 or not isinstance(text, str):
        fail("%s stream: HTTP %d: %s" % (path, status, str(text)[:300]))
    events, name = [], None
    for line in text.split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
            name = None
    return events


# --- the one conversation, in the three APIs' words -------------------------
SYSTEM = "You are terse."
USER = "Hello there"
TOOL = {"name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}
chat_body = {"model": "k3", "messages": [{"role": "system", "content": SYSTEM},
                                         {"role": "user", "content": USER}],
             "tools": [{"type": "function", "function": TOOL}],
             "max_tokens": 8, "temperature": 0, "thinking": False, "return_token_ids": True}
msg_body = {"model": "k3", "system": SYSTEM, "messages": [{"role": "user", "content": USER}],
            "tools": [{"name": TOOL["name"], "description": TOOL["description"],
                       "input_schema": TOOL["parameters"]}],
            "max_tokens": 8, "temperature": 0, "return_token_ids": True}
resp_body = {"model": "k3", "instructions": SYSTEM, "input": USER,
             "tools": [dict(type="function", **TOOL)], "max_output_tokens": 8,
             "temperature": 0, "reasoning": {"effort": "none"}, "return_token_ids": True}

c = ok("/v1/chat/completions", chat_body, "chat")
m = ok("/v1/messages", msg_body, "messages")
r = ok("/v1/responses", resp_body, "responses")
ids = [c["prompt_token_ids"], m["prompt_token_ids"], r["prompt_token_ids"]]
if not (ids[0] == ids[1] == ids[2]):
    fail("one conversation, three prompts: %s" % [len(x) for x in ids])
gen = [c["choices"][0]["token_ids"], m["token_ids"], r["token_ids"]]
if not (gen[0] == gen[1] == gen[2]):
    fail("greedy ids differ between the APIs: %s" % gen)
ctext = c["choices"][0]["message"]["content"] or ""
mtext = "".join(b.get("text", "") for b in m["content"] if b["type"] == "text")
rtext = "".join(p["text"] for it in r["output"] if it["type"] == "message" for p in it["content"])
if not (ctext == mtext == rtext):
    fail("greedy text differs: %r %r %r" % (ctext, mtext, rtext))
print("ok: chat, messages and responses render one prompt (%d ids) and generate the same %d ids"
      % (len(ids[0]), len(gen[0])))

# usage: Anthropic's input_tokens + cache_read_input_tokens = count_tokens = the prompt
cnt = ok("/v1/messages/count_tokens", {k: v for k, v in msg_body.items()
                                       if k not in ("max_tokens", "temperature",
                                                    "return_token_ids")}, "count_tokens")
u = m["usage"]
if cnt["input_tokens"] != len(ids[0]) or u["input_tokens"] + u["cache_read_input_tokens"] != len(ids[0]):
    fail("count_tokens %s, usage %s, prompt %d" % (cnt, u, len(ids[0])))
if u["output_tokens"] != len(gen[1]) or r["usage"]["input_tokens"] != len(ids[0]):
    fail("usage: %s / %s" % (u, r["usage"]))
if r["usage"]["input_tokens_details"]["cached_tokens"] != c["usage"]["prompt_tokens_details"]["cached_tokens"] and False:
    pass
print("ok: count_tokens = input_tokens + cache_read_input_tokens = %d" % cnt["input_tokens"])

# --- Messages: the shapes ------------------------------------------------------
if m["type"] != "message" or m["role"] != "assistant" or not m["id"].startswith("msg_"):
    fail("message shape: %s" % m)
if m["stop_reason"] not in ("end_turn", "max_tokens", "tool_use", "stop_sequence"):
    fail("stop_reason %s" % m["stop_reason"])
ev = sse("/v1/messages", dict(msg_body, stream=True))
names = [e for e, _ in ev]
if names[:2] != ["message_start", "ping"] or names[-2:] != ["message_delta", "message_stop"]:
    fail("messages event sequence: %s" % names)
blocks, text = {}, ""
for name, d in ev:
    if d.get("type") != name:
        fail("event %s carries type %s" % (name, d.get("type")))
    if name == "content_block_start":
        blocks[d["index"]] = d["content_block"]["type"]
    elif name == "content_block_delta" and d["delta"]["type"] == "text_delta":
        text += d["delta"]["text"]
    elif name == "content_block_stop" and d["index"] not in blocks:
        fail("content_block_stop of a block never started")
if text != mtext or ev[-2][1]["delta"]["stop_reason"] != m["stop_reason"]:
    fail("streamed message differs: %r vs %r" % (text, mtext))
if ev[-2][1]["token_ids"] != m["token_ids"]:
    fail("streamed ids differ")
print("ok: /v1/messages streamed = whole (%s)" % " ".join(dict.fromkeys(names)))

# thinking on: a thinking block first
# (no tools here: with tools declared the reply is constrained to the
# format's markup, and a random model may close its thinking at once)
msg_nt = {k: v for k, v in msg_body.items() if k != "tools"}
chat_nt = {k: v for k, v in chat_body.items() if k != "tools"}
mt = ok("/v1/messages", dict(msg_nt, thinking={"type": "enabled", "budget_tokens": 2000}),
        "thinking")
if mt["content"][0]["type"] != "thinking":
    fail("thinking enabled gave no thinking block: %s" % mt["content"])
# the effort mapping: budget 2000 is low, as reasoning_effort low on chat
cl = ok("/v1/chat/completions", dict(chat_nt, thinking=True, reasoning_effort="low"), "chat low")
if cl["prompt_token_ids"] != mt["prompt_token_ids"]:
    fail("budget_tokens 2000 does not render as effort low")
mx = ok("/v1/messages", dict(msg_nt, thinking={"type": "enabled", "budget_tokens": 30000}),
        "budget max")
cm = ok("/v1/chat/completions", dict(chat_nt, thinking=True, reasoning_effort="max"), "max")
if cm["prompt_token_ids"] != mx["prompt_token_ids"]:
    fail("budget_tokens 30000 does not render as effort max")
print("ok: thinking blocks; budget_tokens -> effort (2000 low, 30000 max)")

# stop_sequences: a string taken from the greedy text ends the answer just
# before it, stop_reason "stop_sequence" and stop_sequence the string (the
# message and the stream's message_delta); without a match it is null.
long_nt = dict(msg_nt, max_tokens=24)
full = ok("/v1/messages", long_nt, "messages, 24 tokens")
ftext = "".join(b.get("text", "") for b in full["content"] if b["type"] == "text")
if len(ftext) < 6:
    fail("the greedy text is too short to take a stop sequence from: %r" % ftext)
stop = ftext[len(ftext) // 2:len(ftext) // 2 + 2]
want = ftext[:ftext.find(stop)]
sbody = dict(long_nt, stop_sequences=["\u2603 never", stop])
ms = ok("/v1/messages", sbody, "stop_sequences")
stext = "".join(b.get("text", "") for b in ms["content"] if b["type"] == "text")
if ms["stop_reason"] != "stop_sequence" or ms["stop_sequence"] != stop or stext != want:
    fail("stop_sequences %r: stop_reason %s, stop_sequence %r, text %r (wanted %r)"
         % (stop, ms["stop_reason"], ms["stop_sequence"], stext, want))
delta = sse("/v1/messages", dict(sbody, stream=True))[-2][1]["delta"]
if delta != {"stop_reason": "stop_sequence", "stop_sequence": stop}:
    fail("streamed message_delta with a stop sequence: %s" % delta)
if full["stop_sequence"] is not None or m["stop_sequence"] is not None:
    fail("stop_sequence without a match: %r" % full["stop_sequence"])
print("ok: stop_sequences %r ends the text there; stop_sequence names it (whole and streamed)"
      % stop)

# reasoning_tokens: the ids generated while the think element is open (its
# closing tag included), in chat's completion_tokens_details and Responses'
# output_tokens_details; 0 with thinking off. With tools declared the random
# model closes its thinking after a few ids (the format's markup is
# constrained), so the count is a part of the answer, not all of it.
close_tag = ok("/tokenize", {"content": "<|close|>think<|sep|>"}, "tokenize")["tokens"]


def thinking_ids(ids, ended):
    """The ids up to the first <|sep|> after the first <|close|> (the think
    element's closing tag, its name however the model spelled it), else all
    (but an end id)."""
    if close_tag[0] in ids and close_tag[-1] in ids[ids.index(close_tag[0]):]:
        at = ids.index(close_tag[0])
        return at + ids[at:].index(close_tag[-1]) + 1
    return len(ids) - (1 if ended else 0)


ct = ok("/v1/chat/completions", dict(chat_body, thinking=True, max_tokens=24), "chat thinking")
rt = ok("/v1/responses", dict(resp_body, reasoning={"effort": "high"}, max_output_tokens=24),
        "responses thinking")
got = [ct["usage"]["completion_tokens_details"]["reasoning_tokens"],
       rt["usage"]["output_tokens_details"]["reasoning_tokens"]]
want = [thinking_ids(ct["choices"][0]["token_ids"], ct["choices"][0]["finish_reason"] == "stop"),
        thinking_ids(rt["token_ids"], rt["status"] == "completed")]
if got != want or not all(0 < x < 24 for x in got):
    fail("reasoning_tokens %s, wanted %s (ids %s / %s)" % (got, want, ct["choices"][0]["token_ids"],
                                                          rt["token_ids"]))
off = [c["usage"]["completion_tokens_details"]["reasoning_tokens"],
       r["usage"]["output_tokens_details"]["reasoning_tokens"]]
if off != [0, 0]:
    fail("reasoning_tokens with thinking off: %s" % off)
if "cached_tokens" not in r["usage"]["input_tokens_details"]:
    fail("responses usage without input_tokens_details.cached_tokens: %s" % r["usage"])
print("ok: reasoning_tokens = the thinking's ids (%s of %d and %d), 0 with thinking off"
      % (got, ct["usage"]["completion_tokens"], rt["usage"]["output_tokens"]))

# a tool_use / tool_result round trip renders as chat's tool_calls / tool message
rt_msg = dict(msg_body, messages=[
    {"role": "user", "content": USER},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need weather.", "signature": ""},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
        {"type": "text", "text": "And?"}]}])
rt_chat = dict(chat_body, messages=[
    {"role": "system", "content": SYSTEM}, {"role": "user", "content": USER},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "Need weather.",
     "tool_calls": [{"id": "toolu_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    {"role": "user", "content": "And?"}])
rt_resp = dict(resp_body, input=[
    {"role": "user", "content": USER},
    {"type": "reasoning", "id": "rs_1", "summary": [],
     "content": [{"type": "reasoning_text", "text": "Need weather."}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "call_id": "toolu_1", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call_output", "call_id": "toolu_1", "output": "sunny"},
    {"role": "user", "content": [{"type": "input_text", "text": "And?"}]}])
a = ok("/v1/chat/completions", rt_chat, "chat round trip")["prompt_token_ids"]
b = ok("/v1/messages", rt_msg, "messages round trip")["prompt_token_ids"]
d = ok("/v1/responses", rt_resp, "responses round trip")["prompt_token_ids"]
if not (a == b == d):
    fail("tool round trip renders differently: %d %d %d ids" % (len(a), len(b), len(d)))
print("ok: tool_use/tool_result, function_call/function_call_output and tool_calls render alike")


# --- errors: Anthropic's shape for /v1/messages ---------------------------------
def refused(path, body, status, where, raw=None, headers=None):
    st, r = call(path, body, headers=headers, raw=raw)
    if st != status:
        fail("%s %s: HTTP %d, wanted %d: %s" % (path, json.dumps(body)[:120], st, status, r))
    text = json.dumps(r)
    if path.startswith("/v1/messages"):
        if not (isinstance(r, dict) and r.get("type") == "error" and "type" in r["error"]
                and "message" in r["error"]):
            fail("not Anthropic's error shape: %s" % text[:300])
    elif not (isinstance(r, dict) and "message" in r.get("error", {})):
        fail("not OpenAI's error shape: %s" % text[:300])
    if where and where not in text:
        fail("%s: the error does not name %s: %s" % (path, where, text[:300]))


base = {"model": "k3", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}]}
refused("/v1/messages", None, 400, "JSON", raw=b'{"model": ')
refused("/v1/messages", None, 400, "", raw=b"[1,2]")
refused("/v1/messages", {"model": "k3", "messages": []}, 400, "max_tokens")
refused("/v1/messages", dict(base, messages="hi"), 400, "messages")
refused("/v1/messages", dict(base, messages=[{"role": "robot", "content": "x"}]), 400, "role")
refused("/v1/messages", dict(base, messages=[{"role": "user", "content": [{"type": "video"}]}]),
        400, "video")
refused("/v1/messages", dict(base, messages=[{"role": "user", "content": [
    {"type": "image", "source": {"type": "file", "file_id": "x"}}]}]), 400, "source")
refused("/v1/messages", dict(base, messages=[{"role": "assistant", "content": [
    {"type": "tool_use", "id": "t", "name": "f", "input": [1]}]}]), 400, "input")
refused("/v1/messages", dict(base, tools=[{"type": "web_search_20250305", "name": "web_search"}]),
        400, "server tools")
refused("/v1/messages", dict(base, tool_choice={"type": "sometimes"}), 400, "tool_choice")
refused("/v1/messages", dict(base, thinking={"type": "maybe"}), 400, "thinking")
refused("/v1/messages", dict(base, bogus=1), 400, "bogus")
refused("/v1/messages", dict(base, max_tokens=0), 400, "max_tokens")
refused("/v1/messages", dict(base, stop_sequences=["a", "b", "c", "d", "e"]), 400, "stop")
refused("/v1/messages", dict(base, model="claude-opus"), 404, "claude-opus")
refused("/v1/messages", base, 401, "API key", headers={})
refused("/v1/messages", base, 401, "API key", headers={"x-api-key": KEY + "x"})
refused("/v1/messages/count_tokens", {"model": "k3", "messages": base["messages"], "stream": True},
        400, "stream")
st, xr = call("/v1/messages", base, headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"})
if st != 200:
    fail("x-api-key with anthropic-version: HTTP %d %s" % (st, xr))
# forced tool choices are enforced (gate 57); forcing a call with no tools
# declared, or naming a tool not declared, is a clear 400
tools = msg_body["tools"]
refused("/v1/messages", dict(base, tools=tools, tool_choice={"type": "tool", "name": "nope"}),
        400, "tool_choice")
refused("/v1/messages", dict(base, tool_choice={"type": "any"}), 400, "tool_choice")
print("ok: hostile /v1/messages bodies are 400/401/404 in Anthropic's shape")

# --- Responses: shapes, stream, refusals -------------------------------------------
if r["object"] != "response" or not r["id"].startswith("resp_") or r["status"] not in ("completed", "incomplete"):
    fail("response shape: %s" % r)
ev = sse("/v1/responses", dict(resp_body, stream=True))
names = [e for e, _ in ev]
if names[:2] != ["response.created", "response.in_progress"] or \
        names[-1] not in ("response.completed", "response.incomplete"):
    fail("responses event sequence: %s" % names)
if [d["sequence_number"] for _, d in ev] != list(range(len(ev))):
    fail("sequence numbers")
text = "".join(d["delta"] for e, d in ev if e == "response.output_text.delta")
def no_ids(items):
    return [{k: v for k, v in it.items() if k not in ("id", "call_id")} for it in items]


if text != rtext or no_ids(ev[-1][1]["response"]["output"]) != no_ids(r["output"]):
    fail("streamed response differs from the whole one")
for e, d in ev:
    if d["type"] != e:
        fail("event %s carries type %s" % (e, d["type"]))
print("ok: /v1/responses streamed = whole (%s)" % " ".join(dict.fromkeys(names)))
rb = {"model": "k3", "input": "x", "max_output_tokens": 4}
refused("/v1/responses", dict(rb, previous_response_id="resp_1"), 400, "previous_response_id")
refused("/v1/responses", {"model": "k3"}, 400, "input")
refused("/v1/responses", dict(rb, input=[{"type": "computer_call"}]), 400, "computer_call")
refused("/v1/responses", dict(rb, input=[{"role": "robot", "content": "x"}]), 400, "role")
refused("/v1/responses", dict(rb, input=7), 400, "input")
refused("/v1/responses", dict(rb, bogus=1), 400, "bogus")
refused("/v1/responses", dict(rb, background=True), 400, "background")
refused("/v1/responses", dict(rb, tool_choice="required"), 400, "tool_choice")
refused("/v1/responses", dict(rb, tools=resp_body["tools"],
                              tool_choice={"type": "function", "name": "nope"}), 400, "tool_choice")
ok("/v1/responses", dict(rb, tools=[{"type": "web_search"}], store=True, include=[],
                         text={"format": {"type": "text"}, "verbosity": "low"}), "dropped tools")
print("ok: hostile /v1/responses bodies are 400 naming the field; non-function tools dropped")

# --- the K3 contract on chat completions -------------------------------------------------
cb = {"model": "k3", "messages": [{"role": "user", "content": USER}], "max_tokens": 2,
      "temperature": 0, "return_token_ids": True}


def prompt(body):
    return ok("/v1/chat/completions", body, json.dumps(body)[:80])["prompt_token_ids"]


p_obj = prompt(dict(cb, thinking={"type": "enabled", "keep": "all", "effort": "high"}))
p_ref = prompt(dict(cb, thinking=True, reasoning_effort="high"))
if p_obj != p_ref:
    fail("thinking object {enabled, high} differs from thinking true + reasoning_effort high")
if prompt(dict(cb, thinking={"type": "enabled", "effort": "low"}, reasoning_effort="max")) != \
        prompt(dict(cb, reasoning_effort="max")):
    fail("reasoning_effort does not override thinking.effort")
if prompt(dict(cb, thinking={"type": "disabled"})) != prompt(dict(cb, thinking=False)):
    fail("thinking {type: disabled} is not thinking false")
if prompt(dict(cb, chat_template_kwargs={"enable_thinking": False})) != prompt(dict(cb, thinking=False)):
    fail("chat_template_kwargs.enable_thinking false is not thinking false")
if p_obj == prompt(dict(cb, thinking=True)):
    fail("the effort changed nothing: the comparison cannot fail")
# tools on a system message render as the request's tools
sys_tools = dict(cb, messages=[{"role": "system", "content": SYSTEM,
                                "tools": [{"type": "function", "function": TOOL}]},
                               {"role": "user", "content": USER}])
top_tools = dict(cb, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
                 tools=[{"type": "function", "function": TOOL}])
no_tools = dict(top_tools, tools=None)
if prompt(sys_tools) != prompt(top_tools) or prompt(sys_tools) == prompt(no_tools):
    fail("tools on a system message are not declared as the request's tools")
for body, where in [(dict(cb, thinking={"type": "sometimes"}), "thinking.type"),
                    (dict(cb, thinking={"type": "enabled", "effort": "medium"}), "thinking.effort"),
                    (dict(cb, thinking={"type": "enabled", "keep": "none"}), "thinking.keep"),
                    (dict(cb, thinking="yes"), "thinking"),
                    (dict(cb, tool_choice="required"), "tool_choice"),
                    (dict(cb, tool_choice="required", tools=[]), "tool_choice"),
                    (dict(cb, tool_choice="sometimes", tools=top_tools["tools"]), "tool_choice"),
                    (dict(cb, tool_choice={"type": "function", "function": {"name": "nope"}},
                          tools=top_tools["tools"]), "tool_choice"),
                    (dict(cb, messages=[{"role": "system", "content": "x", "tools": 3},
                                        {"role": "user", "content": "y"}]), "tools")]:
    refused("/v1/chat/completions", body, 400, where)
prompt(dict(sys_tools, tool_choice="required"))  # system tools count as tools
print("ok: thinking object, reasoning_effort over thinking.effort, system-message tools, "
      "tool_choice rules")

# --- llama-server / vLLM fields -------------------------------------------------------------
x = ok("/v1/chat/completions", dict(cb, max_tokens=None, cache_prompt=True, n_predict=3, skip_special_tokens=True,
                                    min_tokens=1, stop_token_ids=[5], typical_p=0.9,
                                    chat_template_kwargs={"thinking": False, "foo": 1}), "compat")
if x["usage"]["completion_tokens"] > 3:
    fail("n_predict 3 gave %d tokens" % x["usage"]["completion_tokens"])
refused("/v1/chat/completions", dict(cb, cache_prompt="yes"), 400, "cache_prompt")
refused("/v1/chat/completions", dict(cb, min_tokens=-1), 400, "min_tokens")
refused("/v1/chat/completions", dict(cb, grammar="root ::= ("), 400, "grammar")  # a bad one
log = open(LOG, encoding="utf-8", errors="replace").read()
if "ignored fields (accepted, no effect): min_tokens, stop_token_ids, typical_p" not in log:
    fail("the ignored fields are not in the log")
one = ok("/v1/completions", {"prompt": ["Once upon"], "max_tokens": 3, "temperature": 0,
                              "return_token_ids": True}, "prompt list")
by_ids = ok("/v1/completions", {"prompt": one["prompt_token_ids"], "max_tokens": 3,
                                 "temperature": 0, "return_token_ids": True}, "prompt ids")
if by_ids["prompt_token_ids"] != one["prompt_token_ids"] or \
        by_ids["choices"][0]["token_ids"] != one["choices"][0]["token_ids"]:
    fail("a prompt of ids differs from its text")
refused("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt")
refused("/v1/completions", {"prompt": [1, 99999999]}, 400, "prompt")
refused("/v1/completions", {"prompt": []}, 400, "prompt")
# max_tokens over the server's --max-tokens (24) or the context (400): clamped, finish length
big = ok("/v1/chat/completions", dict(cb, max_tokens=100000, ignore_eos=True, thinking=False),
         "clamp")
if big["usage"]["completion_tokens"] != 24 or big["choices"][0]["finish_reason"] != "length":
    fail("max_tokens 100000 was not clamped to --max-tokens 24: %s" % big["usage"])
long_user = "word " * 362
lp = ok("/v1/chat/completions", dict(cb, messages=[{"role": "user", "content": long_user}],
                                     max_tokens=24, ignore_eos=True, thinking=False), "room")
room = 400 - lp["usage"]["prompt_tokens"]
if not 0 < room < 24 or lp["usage"]["completion_tokens"] != room or \
        lp["choices"][0]["finish_reason"] != "length":
    fail("max_tokens over the context's room was not clamped: %s" % lp["usage"])
refused("/v1/chat/completions", dict(cb, messages=[{"role": "user", "content": "word " * 900}]),
        400, "context")
mm = ok("/v1/messages", dict(msg_body, max_tokens=32000, return_token_ids=False), "messages clamp")
if mm["usage"]["output_tokens"] > 24:
    fail("messages max_tokens 32000 not clamped")
print("ok: llama-server/vLLM fields, prompt lists, max_tokens clamped (--max-tokens, context %d+%d)"
      % (lp["usage"]["prompt_tokens"], room))

# --- /v1/models lists the aliases ---------------------------------------------------------
st, models = call("/v1/models", headers={})
if st != 200 or [d["id"] for d in models["data"]] != ["serve-tiny", "k3"]:
    fail("/v1/models: %s" % models)
print("ok: /v1/models lists the alias")

/* test_serve.c - the pure parts of k3 serve (src/server): the HTTP request
 * parser, the OpenAI request mapping, the reply reader and the response
 * writer. No sockets, no model.
 *
 * 1. HTTP: a valid request parses; every proper prefix of it asks for more
 *    (never an error); each kind of malformed or oversized request gets its
 *    status.
 * 2. API: defaults, each field's type and range check with the field named,
 *    and the conversation as rendered (developer role, text parts, effort).
 * 3. Reply reader: an assistant message rendered by the chat renderer,
 *    fed back segment by segment, gives back its reasoning, content and
 *    tool calls; malformed markup never fails.
 * 4. Responses are JSON (the strict reader takes them), invalid UTF-8
 *    included.
 * 5. Client addresses: which listening addresses are loopback (the
 *    others get a warning), client keys (IPv6 by /64, mapped IPv4 as
 *    IPv4) and the per-client count. Numeric addresses only: no network. */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "k3/chat.h"
#include "server/api.h"
#include "server/clients.h"
#include "server/emit.h"
#include "server/http.h"
#include "chat/jtext.h"
#include "chat/reply.h"
#include "util/json.h"

static const k3_http_limits lim = { 1024, 8, 64, 100 };

static int parse(const char *s, k3_http_request *r)
{
    return k3_http_parse_request(s, strlen(s), r, &lim);
}

static void test_http(void)
{
    static const char ok[] = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\n"
                             "Content-Length: 5\r\nExpect: 100-continue\r\n\r\nhello";
    k3_http_request r;
    CHECK(parse(ok, &r) == K3_HTTP_OK, "valid request: %s", r.error);
    CHECK(r.method_len == 4 && !memcmp(r.method, "POST", 4), "method");
    CHECK(r.path_len == 15 && !memcmp(r.path, "/v1/completions", 15), "path without query");
    CHECK(r.content_length == 5 && !memcmp(ok + r.head_len, "hello", 5), "body");
    CHECK(r.expect_continue && r.minor == 1, "expect, version");
    for (size_t n = 0; n < sizeof ok - 1; n++) {
        int rc = k3_http_parse_request(ok, n, &r, &lim);
        CHECK(rc == (n < sizeof ok - 6 ? K3_HTTP_NEED_HEAD : K3_HTTP_NEED_BODY),
              "prefix of %zu bytes: %d", n, rc);
    }
    CHECK(parse("GET /health HTTP/1.0\r\n\r\n", &r) == K3_HTTP_OK && r.minor == 0,
          "HTTP/1.0 needs no Host");

    static const struct {
        const char *req;
        int status;
    } bad[] = {
        { "GET /health HTTP/1.1\r\n\r\n", 400 },                       /* no Host */
        { "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 }, /* two */
        { "GET /health HTTP/1.1\nHost: a\r\n\r\n", 400 },              /* bare LF */
        { "GET /health HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400 },
        { "GET /health HTTP/1.1\r\nHost : a\r\n\r\n", 400 },           /* space before colon */
        { "GET /health HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400 },        /* control character */
        { "GET health HTTP/1.1\r\nHost: a\r\n\r\n", 400 },             /* not origin-form */
        { "GET  /health HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
        { "G(T /health HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
        { "GET /health HTTP/2.0\r\nHost: a\r\n\r\n", 505 },
        { "GET /health HTTX/1.1\r\nHost: a\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", 413 },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413 },
        { "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 411 },
        { "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501 },
        { "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
          400 },
        { "POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", 417 },
        { "GET /0123456789012345678901234567890123456789012345678901234567890123456789 "
          "HTTP/1.1\r\nHost: a\r\n\r\n", 414 },
        { "GET / HTTP/1.1\r\nHost: a\r\na: 1\r\nb: 1\r\nc: 1\r\nd: 1\r\ne: 1\r\nf: 1\r\ng: 1\r\n"
          "h: 1\r\n\r\n", 431 },
        { "\r\n\r\n", 400 },
        { "GET /health HTTP/1.1\n\n", 400 },            /* bare LF: refused before the end */
        { "GET /health HTTP/1.1\nHost: a\n", 400 },     /* ... with no blank line at all */
        { "GET /health HTTP/1.1\r\nHost: a\rX", 400 }, /* bare CR */
        { "GET /health HTTP/1.1\n", 400 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].req, &r);
        CHECK(rc == bad[i].status && r.error, "bad request %zu: %d, wanted %d", i, rc,
              bad[i].status);
    }
    CHECK(parse("GET /health HTTP/1.1\r", &r) == K3_HTTP_NEED_HEAD,
          "a CR as the last byte may still become CRLF");
    char big[1100];
    memset(big, 'a', sizeof big);
    CHECK(k3_http_parse_request(big, sizeof big, &r, &lim) == 431, "a head over the limit");

    char head[256];
    size_t n = k3_http_head(head, sizeof head, 503, "application/json", 12, "Allow: GET\r\n", 0);
    CHECK(n > 0 && !strncmp(head, "HTTP/1.1 503 Service Unavailable\r\n", 34) &&
              strstr(head, "Content-Length: 12\r\n") && strstr(head, "Allow: GET\r\n") &&
              strstr(head, "Connection: close\r\n") && !strcmp(head + n - 4, "\r\n\r\n"),
          "response head: %s", head);
    CHECK(k3_http_head(head, 16, 200, "text/plain", 1, NULL, 0) == 0, "a head that does not fit");
    n = k3_http_head(head, sizeof head, 200, "text/event-stream", -1, NULL, 1);
    CHECK(n > 0 && strstr(head, "Transfer-Encoding: chunked\r\n") &&
              strstr(head, "Connection: keep-alive\r\n") && !strstr(head, "Content-Length"),
          "a kept stream is chunked: %s", head);
    n = k3_http_head(head, sizeof head, 200, "text/event-stream", -1, NULL, 0);
    CHECK(n > 0 && !strstr(head, "Transfer-Encoding") && strstr(head, "Connection: close\r\n"),
          "a stream that closes is not chunked: %s", head);
    CHECK(k3_http_chunk(head, sizeof head, 300) == 5 && !memcmp(head, "12c\r\n", 5) &&
              k3_http_chunk(head, sizeof head, 0) == 5 && !memcmp(head, "0\r\n\r\n", 5),
          "chunk lines");
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, CLOSE\r\n\r\n", &r) ==
                  K3_HTTP_OK && r.conn_close && !r.conn_keep_alive,
          "Connection: close among other options");
    CHECK(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r) == K3_HTTP_OK &&
              r.conn_keep_alive && !r.conn_close && r.minor == 0,
          "HTTP/1.0 keep-alive");
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: closed\r\n\r\n", &r) ==
                  K3_HTTP_OK && !r.conn_close,
          "\"closed\" is not \"close\"");
}

static const k3_api_limits api_lim = { 100 };

/* Parses a chat request; returns the status, err filled. */
static int chat(const char *body, k3_api_request *r, k3_api_error *err)
{
    k3_api_request_free(r);
    return k3_api_parse_chat_request(body, strlen(body), &api_lim, r, err);
}

/* The rendered prompt of a parsed chat request contains want. */
static int renders(const k3_api_request *r, const char *want)
{
    k3_chat_segments s;
    k3_err e = { 0, "" };
    memset(&s, 0, sizeof s);
    int ok = k3_chat_render(r->chat, &s, &e) == K3_OK && strstr(s.text, want) != NULL;
    if (!ok)
        fprintf(stderr, "rendered: %s\n", s.text ? s.text : e.msg);
    k3_chat_segments_free(&s);
    return ok;
}

static void test_api(void)
{
    k3_api_request r;
    k3_api_error err;
    memset(&r, 0, sizeof r);
    CHECK(chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r,
               &err) == 0,
          "minimal: %s", err.message);
    CHECK(r.kind == K3_API_CHAT && r.max_tokens == -1 && r.temperature == 1 && r.top_p == 1 &&
              !r.stream && !r.has_seed && r.nstop == 0,
          "defaults");
    CHECK(renders(&r, "<|open|>think<|sep|>"), "thinking by default");

    CHECK(chat("{\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":"
               "\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"user\",\"content\":\"x\"},"
               "{\"role\":\"assistant\",\"content\":\"y\",\"name\":\"n\",\"refusal\":null}],"
               "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":7,"
               "\"temperature\":0,\"top_p\":0.5,\"top_k\":3,\"min_p\":0.1,"
               "\"repetition_penalty\":1.1,\"seed\":-1,\"stop\":[\"a\",\"bc\"],"
               "\"reasoning_effort\":\"low\",\"user\":\"u\",\"n\":1,\"logprobs\":false,"
               "\"frequency_penalty\":0,\"logit_bias\":{},\"parallel_tool_calls\":true,"
               "\"tools\":null,\"tool_choice\":null}",
               &r, &err) == 0,
          "full: %s", err.message);
    CHECK(r.stream && r.include_usage && r.max_tokens == 7 && r.temperature == 0 &&
              r.top_p == 0.5f && r.top_k == 3 && r.has_seed && r.seed == UINT64_MAX &&
              r.nstop == 2 && !strcmp(r.stop[1], "bc"),
          "fields");
    CHECK(renders(&r, "role=\"system\"<|sep|>a\nb<|close|>"), "developer, parts joined");
    CHECK(renders(&r, "thinking_effort=low"), "reasoning_effort low");
    CHECK(chat("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":"
               "\"none\"}", &r, &err) == 0 && renders(&r, "<|open|>response<|sep|>"),
          "reasoning_effort none: no thinking");

    static const struct {
        const char *extra, *param;
    } bad[] = {
        { "\"temperature\":\"hot\"", "temperature" },
        { "\"temperature\":2.5", "temperature" },
        { "\"top_p\":0", "top_p" },
        { "\"top_p\":1e-300", "top_p" }, /* above 0, but 0 as the sampler's float */
        { "\"repetition_penalty\":1e-60", "repetition_penalty" },
        { "\"max_tokens\":0", "max_tokens" },
        { "\"max_tokens\":0", "max_tokens" },
        { "\"max_tokens\":1.5", "max_tokens" },
        { "\"max_tokens\":5,\"max_completion_tokens\":5", "max_completion_tokens" },
        { "\"seed\":1e3", "seed" },
        { "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]", "stop" },
        { "\"stop\":\"\"", "stop" },
        { "\"stop\":[1]", "stop" },
        { "\"stream\":1", "stream" },
        { "\"stream_options\":{\"x\":1}", "stream_options" },
        { "\"n\":2", "n" },
        { "\"logprobs\":1", "logprobs" },
        { "\"top_logprobs\":3", "top_logprobs" }, /* without logprobs */
        { "\"logprobs\":true,\"top_logprobs\":21", "top_logprobs" },
        { "\"presence_penalty\":2.5", "presence_penalty" },
        { "\"frequency_penalty\":-3", "frequency_penalty" },
        { "\"logit_bias\":{\"1\":2}", "logit_bias" },
        { "\"reasoning_effort\":\"huge\"", "reasoning_effort" },
        { "\"thinking\":true,\"reasoning_effort\":\"none\"", "reasoning_effort" },
        { "\"thinking\":\"yes\"", "thinking" },
        { "\"tool_choice\":\"maybe\"", "tool_choice" },
        { "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}",
          "tool_choice.function.name" }, /* no tool f declared */
        { "\"grammar\":\"root ::= \\\"a\\\"\",\"guided_json\":{}", "guided_json" },
        { "\"json_schema\":{},\"response_format\":{\"type\":\"json_object\"}", "json_schema" },
        { "\"guided_choice\":[]", "guided_choice" },
        { "\"guided_choice\":[1]", "guided_choice" },
        { "\"guided_json\":\"{nope\"", "guided_json" },
        { "\"response_format\":{\"type\":\"yaml\"}", "response_format.type" },
        { "\"tools\":[1]", "tools[0]" },
        { "\"prompt\":\"x\"", "prompt" },
        { "\"echo\":false", "echo" },
        { "\"bogus\":null", "bogus" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}",
                 bad[i].extra);
        int rc = chat(body, &r, &err);
        CHECK(rc == 400 && !strcmp(err.param, bad[i].param) && err.message[0] &&
                  !strcmp(err.type, "invalid_request_error") &&
                  strncmp(err.message, "options.", 8) != 0, /* the renderer's key */
              "%s: %d param \"%s\" (%s)", bad[i].extra, rc, err.param, err.message);
    }
    static const struct {
        const char *body, *param;
    } bad_messages[] = {
        { "{\"messages\":[]}", "messages" },
        { "{\"messages\":{}}", "messages" },
        { "{\"messages\":[{\"role\":\"robot\"}]}", "messages[0].role" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"extra\":1}]}", "messages[0]" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
          "messages[0].content[0].image_url.url" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
          "\"image_url\":{\"url\":\"https://x/y.png\"}}]}]}", "messages[0].content[0]" },
        { "{\"messages\":[{\"role\":\"assistant\",\"function_call\":{}}]}",
          "messages[0].function_call" },
        { "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", "messages[0].content" },
        { "{\"max_tokens\":3}", "messages" },
        { "[]", "" },
        { "{\"messages\":", "" },
    };
    for (size_t i = 0; i < sizeof bad_messages / sizeof bad_messages[0]; i++) {
        int rc = chat(bad_messages[i].body, &r, &err);
        CHECK(rc == 400 && !strcmp(err.param, bad_messages[i].param),
              "%s: %d param \"%s\" (%s)", bad_messages[i].body, rc, err.param, err.message);
    }

    k3_api_request_free(&r);
    const char *compl =
        "{\"prompt\":\"The capital\",\"max_tokens\":3,\"echo\":false,\"suffix\":null}";
    CHECK(k3_api_parse_completion_request(compl, strlen(compl), &api_lim, &r, &err) == 0 &&
              r.kind == K3_API_COMPLETION && r.prompt_len == 11 && !strcmp(r.prompt, "The capital"),
          "completion: %s", err.message);
    k3_api_request_free(&r);
    const char *compl_bad = "{\"prompt\":[\"a\",\"b\"]}"; /* one prompt per request */
    CHECK(k3_api_parse_completion_request(compl_bad, strlen(compl_bad), &api_lim, &r, &err) ==
                  400 && !strcmp(err.param, "prompt"),
          "completion prompt must be a string");
    k3_api_request_free(&r);
    const char *compl_msgs = "{\"prompt\":\"a\",\"messages\":[]}";
    CHECK(k3_api_parse_completion_request(compl_msgs, strlen(compl_msgs), &api_lim, &r, &err) ==
                  400 && !strcmp(err.param, "messages"),
          "messages is not a completions field");
    k3_api_request_free(&r);
}

/* What the reply reader reported. */
typedef struct {
    k3_buf text[2];
    k3_buf calls; /* "name(args);" per call */
} heard;

static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    return k3_buf_put(&((heard *)ctx)->text[channel], s, n, e);
}

static int on_call(void *ctx, const char *name, size_t nl, const char *args, size_t al, k3_err *e)
{
    heard *h = ctx;
    if (k3_buf_put(&h->calls, name, nl, e) || k3_buf_put(&h->calls, "(", 1, e) ||
        k3_buf_put(&h->calls, args, al, e))
        return e->code;
    return k3_buf_put(&h->calls, ");", 2, e);
}

static void heard_free(heard *h)
{
    k3_buf_free(&h->text[0]);
    k3_buf_free(&h->text[1]);
    k3_buf_free(&h->calls);
}

/* Feeds segments [from, to) to r: special segments as markup, text ones in
 * pieces of at most 3 bytes (as tokens would split them). */
static void feed(k3_reply *r, const k3_chat_segments *s, size_t from, size_t to, k3_err *e)
{
    for (size_t i = from; i < to; i++) {
        const char *t = s->text + s->seg[i].off;
        size_t n = s->seg[i].len;
        if (s->seg[i].allow_special) {
            int which = !strncmp(t, "<|open|>", n) ? K3_REPLY_OPEN
                        : !strncmp(t, "<|close|>", n) ? K3_REPLY_CLOSE
                                                      : K3_REPLY_SEP;
            k3_reply_markup(r, which, e);
            continue;
        }
        for (size_t k = 0; k < n; k += 3)
            k3_reply_text(r, t + k, n - k < 3 ? n - k : 3, e);
    }
}

static int seg_is(const k3_chat_segments *s, size_t i, const char *want)
{
    return i < s->n && s->seg[i].len == strlen(want) &&
           !memcmp(s->text + s->seg[i].off, want, s->seg[i].len);
}

static void test_reply(void)
{
    static const char conv[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\","
        "\"reasoning_content\":\"Use the tool.\",\"content\":\"Checking \\\"now\\\".\","
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris & \\\\\\\"Nice\\\\\\\"\\\", "
        "\\\"days\\\": 3, \\\"units\\\": [\\\"c\\\"]}\"}},{\"id\":\"c2\",\"type\":\"function\","
        "\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]}],"
        "\"options\":{\"add_generation_prompt\":false}}";
    k3_chat *c = NULL;
    k3_chat_segments s;
    k3_err e = { 0, "" };
    memset(&s, 0, sizeof s);
    CHECK(k3_chat_read(&c, conv, sizeof conv - 1, &e) == K3_OK &&
              k3_chat_render(c, &s, &e) == K3_OK,
          "render: %s", e.msg);
    /* The assistant message's body starts after its think element opens. */
    size_t from = 0, to = 0;
    for (size_t i = 0; i + 2 < s.n && !from; i++)
        if (seg_is(&s, i, "<|open|>") && seg_is(&s, i + 1, "think") && seg_is(&s, i + 2, "<|sep|>"))
            from = i + 3;
    for (to = from; to < s.n && !seg_is(&s, to, "<|end_of_msg|>"); to++)
        ;
    CHECK(from && to < s.n, "assistant message found");
    heard h;
    memset(&h, 0, sizeof h);
    k3_reply_sink sink = { &h, on_text, on_call };
    k3_reply r;
    k3_reply_init(&r, 1, &sink);
    feed(&r, &s, from, to, &e);
    CHECK(!e.code, "reader: %s", e.msg);
    CHECK(h.text[K3_REPLY_REASONING].data &&
              !strcmp(h.text[K3_REPLY_REASONING].data, "Use the tool."),
          "reasoning");
    CHECK(h.text[K3_REPLY_CONTENT].data &&
              !strcmp(h.text[K3_REPLY_CONTENT].data, "Checking \"now\"."),
          "content");
    CHECK(h.calls.data && !strcmp(h.calls.data, "get_weather({\"city\": \"Paris & \\\"Nice\\\"\", "
                                                "\"days\": 3, \"units\": [\"c\"]});now({});"),
          "calls: %s", h.calls.data ? h.calls.data : "(none)");
    k3_reply_free(&r);
    heard_free(&h);

    /* Not thinking; malformed markup: a stray <|sep|>, a close of nothing,
     * an unfinished call. Nothing fails, text keeps flowing to content. */
    memset(&h, 0, sizeof h);
    k3_reply_init(&r, 0, &sink);
    k3_reply_markup(&r, K3_REPLY_SEP, &e);
    k3_reply_text(&r, "a", 1, &e);
    k3_reply_markup(&r, K3_REPLY_CLOSE, &e);
    k3_reply_text(&r, "nothing", 7, &e);
    k3_reply_markup(&r, K3_REPLY_SEP, &e);
    k3_reply_text(&r, "b", 1, &e);
    k3_reply_markup(&r, K3_REPLY_CLOSE, &e);
    k3_reply_text(&r, "message", 7, &e);
    k3_reply_markup(&r, K3_REPLY_SEP, &e);
    k3_reply_text(&r, "c", 1, &e);
    k3_reply_markup(&r, K3_REPLY_OPEN, &e);
    k3_reply_text(&r, "call tool=\"f\"", 13, &e);
    k3_reply_markup(&r, K3_REPLY_SEP, &e);
    k3_reply_markup(&r, K3_REPLY_OPEN, &e);
    k3_reply_text(&r, "argument key=\"k\" type=\"string\"", 30, &e);
    k3_reply_markup(&r, K3_REPLY_SEP, &e);
    k3_reply_text(&r, "v", 1, &e);
    CHECK(!e.code && h.text[K3_REPLY_CONTENT].data &&
              !strcmp(h.text[K3_REPLY_CONTENT].data, "abc") && !h.calls.data &&
              !h.text[K3_REPLY_REASONING].data,
          "malformed: content \"%s\"", h.text[K3_REPLY_CONTENT].data);
    k3_reply_free(&r);
    heard_free(&h);
    k3_chat_segments_free(&s);
    k3_chat_free(c);
}

/* text is one JSON document the strict reader accepts. */
static int is_json(const char *text, size_t n)
{
    char jerr[128];
    k3_json_doc *d = k3_json_parse(text, n, jerr, sizeof jerr);
    if (!d)
        fprintf(stderr, "not JSON (%s): %.*s\n", jerr, (int)n, text);
    k3_json_free(d);
    return d != NULL;
}

static void test_emit(void)
{
    k3_err e = { 0, "" };
    k3_buf out = { 0 };
    k3_emit em;
    k3_usage u = { 5, 3, 1, 2, 0.5, 0.25 };
    k3_emit_init(&em, K3_API_CHAT, 0, 0, "chatcmpl-1", 7, "m");
    k3_emit_text(&em, K3_REPLY_REASONING, "think", 5, &out, &e);
    k3_emit_text(&em, K3_REPLY_CONTENT, "bad \xff\xc3 utf8 \xe2\x82\xac", 15, &out, &e);
    k3_emit_call(&em, "f", 1, "{\"a\": 1}", 8, &out, &e);
    CHECK(out.len == 0, "nothing before the end when not streaming");
    k3_emit_finish(&em, "tool_calls", &u, NULL, &out, &e);
    CHECK(!e.code && is_json(out.data, out.len), "chat completion is JSON");
    CHECK(strstr(out.data, "\"content\":\"bad \xef\xbf\xbd\xef\xbf\xbd utf8 \xe2\x82\xac\"") &&
              strstr(out.data, "\"reasoning_content\":\"think\"") &&
              strstr(out.data, "\"arguments\":\"{\\\"a\\\": 1}\"") &&
              strstr(out.data, "\"total_tokens\":8") && strstr(out.data, "\"cached_tokens\":2"),
          "chat completion: %s", out.data);
    k3_emit_free(&em);

    out.len = 0;
    k3_emit_init(&em, K3_API_CHAT, 1, 1, "chatcmpl-2", 7, "m");
    k3_emit_text(&em, K3_REPLY_CONTENT, "x", 1, &out, &e);
    k3_emit_finish(&em, "stop", &u, NULL, &out, &e);
    /* Every event is "data: JSON\n\n"; the last is [DONE]. */
    size_t events = 0;
    for (char *p = out.data; p && *p && !e.code; events++) {
        char *end = strstr(p, "\n\n");
        CHECK(end && !strncmp(p, "data: ", 6), "event framing");
        if (!end)
            break;
        if (strncmp(p, "data: [DONE]", 12) != 0)
            CHECK(is_json(p + 6, (size_t)(end - p - 6)), "event %zu is JSON", events);
        p = end + 2;
    }
    CHECK(events == 5 && strstr(out.data, "\"role\":\"assistant\"") &&
              strstr(out.data, "\"choices\":[],\"usage\"") &&
              !strcmp(out.data + out.len - 14, "data: [DONE]\n\n"),
          "stream: role, content, finish, usage, done: %s", out.data);
    k3_emit_free(&em);

    out.len = 0;
    k3_api_error err;
    k3_api_fail(&err, 400, NULL, "temperature", "bad \"value\"");
    k3_emit_error(&err, 0, &out, &e);
    CHECK(is_json(out.data, out.len) && strstr(out.data, "\"param\":\"temperature\",\"code\":null"),
          "error: %s", out.data);
    k3_buf_free(&out);
}

/* The client key of a numeric address; 0, or -1 if it does not parse. */
static int key_of(const char *host, k3_client_key *k, int *loopback)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, "80", &hints, &ai) != 0)
        return -1;
    k3_client_key_of(ai->ai_addr, k);
    *loopback = k3_addr_is_loopback(ai->ai_addr);
    freeaddrinfo(ai);
    return 0;
}

static void test_clients(void)
{
    static const struct {
        const char *host;
        int loopback;
    } hosts[] = {
        { "127.0.0.1", 1 }, { "127.1.2.3", 1 }, { "::1", 1 },       { "::ffff:127.0.0.2", 1 },
        { "0.0.0.0", 0 },   { "::", 0 },        { "10.0.0.1", 0 },  { "192.0.2.1", 0 },
        { "::2", 0 },       { "::ffff:10.0.0.1", 0 }, { "fe80::1", 0 }, { "128.0.0.1", 0 },
    };
    k3_client_key a, b;
    int lo;
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        int ok = key_of(hosts[i].host, &a, &lo) == 0;
        CHECK(ok && lo == hosts[i].loopback, "%s: loopback %d, wanted %d", hosts[i].host,
              ok ? lo : -1, hosts[i].loopback);
    }
    char t[64];
    CHECK(!key_of("2001:db8:1:2::5", &a, &lo) && !key_of("2001:db8:1:2:ffff::9", &b, &lo) &&
              !memcmp(&a, &b, sizeof a),
          "IPv6 addresses of one /64 are one client");
    k3_client_key_format(&a, t, sizeof t);
    CHECK(!strcmp(t, "2001:db8:1:2::/64"), "IPv6 client: %s", t);
    CHECK(!key_of("2001:db8:1:3::5", &b, &lo) && memcmp(&a, &b, sizeof a),
          "another /64 is another client");
    CHECK(!key_of("::ffff:10.1.2.3", &a, &lo) && !key_of("10.1.2.3", &b, &lo) &&
              !memcmp(&a, &b, sizeof a),
          "a mapped IPv4 address is that IPv4 client");
    k3_client_key_format(&a, t, sizeof t);
    CHECK(!strcmp(t, "10.1.2.3"), "IPv4 client: %s", t);

    k3_clients c;
    k3_err e = { 0, "" };
    CHECK(k3_clients_init(&c, 3, &e) == K3_OK, "clients init");
    key_of("127.0.0.1", &a, &lo);
    key_of("127.0.0.2", &b, &lo);
    int in = 0;
    for (int i = 0; i < 5; i++)
        in += k3_clients_enter(&c, &a) == 0;
    CHECK(in == 3, "a client holds at most its limit: %d of 5", in);
    CHECK(k3_clients_enter(&c, &b) == 0, "another client is not counted with it");
    k3_clients_leave(&c, &a);
    CHECK(k3_clients_enter(&c, &a) == 0 && k3_clients_enter(&c, &a) != 0,
          "a connection that ends frees its place");
    for (int i = 0; i < 3; i++)
        k3_clients_leave(&c, &a);
    k3_clients_leave(&c, &b);
    CHECK(c.n == 0, "every client left: %zu counted", c.n);
    k3_clients_free(&c);
}

int main(void)
{
    test_http();
    test_api();
    test_reply();
    test_emit();
    test_clients();
    return check_report("test_serve");
}

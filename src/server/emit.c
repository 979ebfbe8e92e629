/* emit.c - see emit.h. */
#include "server/emit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chat/jtext.h"
#include "chat/reply.h"
#include "util/error.h"

void k3_emit_init(k3_emit *em, k3_api_kind api, int stream, int include_usage, const char *id,
                  long long created, const char *model)
{
    memset(em, 0, sizeof *em);
    em->api = api;
    em->chat = api != K3_API_COMPLETION;
    em->open = -1;
    em->stream = stream;
    em->include_usage = include_usage;
    snprintf(em->id, sizeof em->id, "%s", id);
    em->created = created;
    em->model = model;
}

void k3_emit_free(k3_emit *em)
{
    k3_buf_free(&em->content);
    k3_buf_free(&em->reasoning);
    k3_buf_free(&em->calls);
    k3_buf_free(&em->blocks);
    for (int i = 0; i < 4; i++)
        k3_buf_free(&em->lp[i]);
}

void k3_emit_prompt(k3_emit *em, size_t prompt, size_t cached)
{
    em->prompt = prompt;
    em->cached = cached;
}

int k3_emit_has_done(k3_api_kind api)
{
    return api == K3_API_CHAT || api == K3_API_COMPLETION;
}

void k3_emit_want_logprobs(k3_emit *em)
{
    em->logprobs = 1;
}

/* A log-probability as JSON: 17 significant digits (a double's exact
 * round trip), -9999.0 when not finite. */
static int lp_number(double x, k3_buf *b, k3_err *e)
{
    if (!isfinite(x))
        return k3_buf_puts(b, "-9999.0", e);
    return k3_buf_printf(b, e, "%.17g", x);
}

/* "token":TEXT,"logprob":X,"bytes":[...] */
static int lp_fields(const k3_emit_alt *a, k3_buf *b, k3_err *e)
{
    if (k3_buf_puts(b, "\"token\":", e) || k3_jtext_put(b, (const char *)a->bytes, a->len, e) ||
        k3_buf_puts(b, ",\"logprob\":", e) || lp_number(a->logprob, b, e) ||
        k3_buf_puts(b, ",\"bytes\":[", e))
        return e->code;
    for (size_t i = 0; i < a->len; i++)
        if (k3_buf_printf(b, e, "%s%u", i ? "," : "", (unsigned)a->bytes[i]))
            return e->code;
    return k3_buf_puts(b, "]", e);
}

int k3_emit_logprob(k3_emit *em, const k3_emit_alt *chosen, const k3_emit_alt *top, size_t ntop,
                    k3_err *e)
{
    const char *sep = em->nlp ? "," : "";
    if (em->chat) {
        k3_buf *b = &em->lp[0];
        if (k3_buf_printf(b, e, "%s{", sep) || lp_fields(chosen, b, e) ||
            k3_buf_puts(b, ",\"top_logprobs\":[", e))
            return e->code;
        for (size_t i = 0; i < ntop; i++)
            if (k3_buf_puts(b, i ? ",{" : "{", e) || lp_fields(&top[i], b, e) ||
                k3_buf_puts(b, "}", e))
                return e->code;
        if (k3_buf_puts(b, "]}", e))
            return e->code;
    } else {
        if (k3_buf_puts(&em->lp[0], sep, e) ||
            k3_jtext_put(&em->lp[0], (const char *)chosen->bytes, chosen->len, e) ||
            k3_buf_puts(&em->lp[1], sep, e) || lp_number(chosen->logprob, &em->lp[1], e) ||
            k3_buf_printf(&em->lp[2], e, "%s{", sep) ||
            k3_buf_printf(&em->lp[3], e, "%s%zu", sep, em->lp_offset))
            return e->code;
        for (size_t i = 0; i < ntop; i++)
            if ((i && k3_buf_puts(&em->lp[2], ",", e)) ||
                k3_jtext_put(&em->lp[2], (const char *)top[i].bytes, top[i].len, e) ||
                k3_buf_puts(&em->lp[2], ":", e) || lp_number(top[i].logprob, &em->lp[2], e))
                return e->code;
        if (k3_buf_puts(&em->lp[2], "}", e))
            return e->code;
        em->lp_offset += chosen->len;
    }
    em->nlp++;
    return K3_OK;
}

/* ,"logprobs":null, or the entries so far (emit.h), which are then
 * cleared. */
static int logprobs_json(k3_emit *em, k3_buf *b, k3_err *e)
{
    static const char *const keys[4] = { "tokens", "token_logprobs", "top_logprobs",
                                         "text_offset" };
    if (!em->logprobs)
        return k3_buf_puts(b, ",\"logprobs\":null", e);
    if (em->chat) {
        if (k3_buf_puts(b, ",\"logprobs\":{\"content\":[", e) ||
            k3_buf_put(b, em->lp[0].data, em->lp[0].len, e) || k3_buf_puts(b, "]}", e))
            return e->code;
    } else {
        for (int i = 0; i < 4; i++)
            if (k3_buf_printf(b, e, "%s\"%s\":[", i ? "]," : ",\"logprobs\":{", keys[i]) ||
                k3_buf_put(b, em->lp[i].data, em->lp[i].len, e))
                return e->code;
        if (k3_buf_puts(b, "]}", e))
            return e->code;
    }
    for (int i = 0; i < 4; i++)
        em->lp[i].len = 0;
    em->nlp = 0;
    return K3_OK;
}

/* {"id":...,"object":...,"created":...,"model":...,"choices":[ */
static int head(const k3_emit *em, const char *object, k3_buf *b, k3_err *e)
{
    if (k3_buf_puts(b, "{\"id\":", e) || k3_jtext_put(b, em->id, strlen(em->id), e) ||
        k3_buf_puts(b, ",\"object\":\"", e) || k3_buf_puts(b, object, e) ||
        k3_buf_printf(b, e, "\",\"created\":%lld,\"model\":", em->created) ||
        k3_jtext_put(b, em->model, strlen(em->model), e))
        return e->code;
    return k3_buf_puts(b, ",\"choices\":[", e);
}

static int usage(const k3_usage *u, k3_buf *b, k3_err *e)
{
    if (k3_buf_printf(b, e, "\"usage\":{\"prompt_tokens\":%lld", (long long)u->prompt) ||
        k3_buf_printf(b, e, ",\"completion_tokens\":%lld", (long long)u->completion) ||
        k3_buf_printf(b, e, ",\"total_tokens\":%lld", (long long)(u->prompt + u->completion)))
        return e->code;
    return k3_buf_printf(b, e,
                         ",\"prompt_tokens_details\":{\"cached_tokens\":%lld},"
                         "\"completion_tokens_details\":{\"reasoning_tokens\":%lld}}",
                         (long long)u->cached, (long long)u->reasoning);
}

/* ,"finish_reason":REASON or null */
static int finish_reason(const char *reason, k3_buf *b, k3_err *e)
{
    if (k3_buf_puts(b, ",\"finish_reason\":", e))
        return e->code;
    if (!reason)
        return k3_buf_puts(b, "null", e);
    return k3_jtext_put(b, reason, strlen(reason), e);
}

/* ,"timings":{...} (emit.h) */
static int timings(const k3_usage *u, k3_buf *b, k3_err *e)
{
    size_t pn = u->prompt - u->cached, gn = u->completion;
    double pms = u->prompt_seconds * 1e3, gms = u->gen_seconds * 1e3;
    if (k3_buf_printf(b, e, ",\"timings\":{\"prompt_n\":%zu,\"prompt_ms\":%.3f,", pn, pms) ||
        k3_buf_printf(b, e, "\"prompt_per_token_ms\":%.3f,\"prompt_per_second\":%.3f,",
                      pn ? pms / (double)pn : 0.0, pms > 0 ? (double)pn * 1e3 / pms : 0.0) ||
        k3_buf_printf(b, e, "\"predicted_n\":%zu,\"predicted_ms\":%.3f,", gn, gms))
        return e->code;
    return k3_buf_printf(b, e, "\"predicted_per_token_ms\":%.3f,\"predicted_per_second\":%.3f}",
                         gn ? gms / (double)gn : 0.0, gms > 0 ? (double)gn * 1e3 / gms : 0.0);
}

/* ,"KEY":[id,...] */
int k3_emit_id_list(const char *key, const uint32_t *ids, size_t n, k3_buf *b, k3_err *e)
{
    if (k3_buf_printf(b, e, ",\"%s\":[", key))
        return e->code;
    for (size_t i = 0; i < n; i++)
        if (k3_buf_printf(b, e, "%s%lu", i ? "," : "", (unsigned long)ids[i]))
            return e->code;
    return k3_buf_puts(b, "]", e);
}

/* One streamed chunk: choices holds one choice whose body (after "index")
 * is `delta` (already JSON: `"delta":{...}` or `"text":"..."`), then the
 * generated ids when given (the last chunk); the prompt's ids follow the
 * choices. */
static int chunk(k3_emit *em, const char *delta, size_t n, const char *reason,
                 const k3_emit_ids *ids, const k3_usage *u, k3_buf *out, k3_err *e)
{
    if (k3_buf_puts(out, "data: ", e) ||
        head(em, em->chat ? "chat.completion.chunk" : "text_completion", out, e) ||
        k3_buf_puts(out, "{\"index\":0,", e) || k3_buf_put(out, delta, n, e) ||
        logprobs_json(em, out, e) || finish_reason(reason, out, e) ||
        (ids && k3_emit_id_list("token_ids", ids->generated, ids->ngenerated, out, e)) ||
        k3_buf_puts(out, "}]", e) ||
        (ids && k3_emit_id_list("prompt_token_ids", ids->prompt, ids->nprompt, out, e)) ||
        (u && timings(u, out, e)))
        return e->code;
    return k3_buf_puts(out, "}\n\n", e);
}

/* Streaming chat: the first chunk names the role. */
static int begin(k3_emit *em, k3_buf *out, k3_err *e)
{
    static const char role[] = "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}";
    if (!em->stream || !em->chat || em->started)
        return K3_OK;
    em->started = 1;
    return chunk(em, role, sizeof role - 1, NULL, NULL, NULL, out, e);
}

int k3_emit_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e)
{
    if (n == 0)
        return K3_OK;
    if (em->api == K3_API_MESSAGES)
        return k3_emit_msg_text(em, channel, s, n, out, e);
    if (em->api == K3_API_RESPONSES)
        return k3_emit_resp_text(em, channel, s, n, out, e);
    if (!em->stream)
        return k3_buf_put(channel == K3_REPLY_REASONING ? &em->reasoning : &em->content, s, n, e);
    k3_buf d = { 0 };
    if (!begin(em, out, e)) {
        if (!em->chat)
            k3_buf_puts(&d, "\"text\":", e);
        else
            k3_buf_puts(&d,
                        channel == K3_REPLY_REASONING ? "\"delta\":{\"reasoning_content\":"
                                                      : "\"delta\":{\"content\":",
                        e);
        if (!e->code && !k3_jtext_put(&d, s, n, e) && (!em->chat || !k3_buf_puts(&d, "}", e)))
            chunk(em, d.data, d.len, NULL, NULL, NULL, out, e);
    }
    k3_buf_free(&d);
    return e->code;
}

/* {"id":...,"type":"function","function":{"name":...,"arguments":...}},
 * with "index" first when streaming. */
static int call_json(const k3_emit *em, const char *name, size_t nl, const char *args, size_t al,
                     k3_buf *b, k3_err *e)
{
    char id[96];
    snprintf(id, sizeof id, "call_%s_%zu", em->id, em->ncalls);
    if ((em->stream ? k3_buf_printf(b, e, "{\"index\":%lld,\"id\":", (long long)em->ncalls)
                    : k3_buf_puts(b, "{\"id\":", e)) ||
        k3_jtext_put(b, id, strlen(id), e) ||
        k3_buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":", e) ||
        k3_jtext_put(b, name, nl, e) || k3_buf_puts(b, ",\"arguments\":", e) ||
        k3_jtext_put(b, args, al, e))
        return e->code;
    return k3_buf_puts(b, "}}", e);
}

int k3_emit_call(k3_emit *em, const char *name, size_t name_len, const char *args, size_t args_len,
                 k3_buf *out, k3_err *e)
{
    if (em->api == K3_API_MESSAGES)
        return k3_emit_msg_call(em, name, name_len, args, args_len, out, e);
    if (em->api == K3_API_RESPONSES)
        return k3_emit_resp_call(em, name, name_len, args, args_len, out, e);
    if (!em->stream) {
        if ((em->ncalls && k3_buf_puts(&em->calls, ",", e)) ||
            call_json(em, name, name_len, args, args_len, &em->calls, e))
            return e->code;
        em->ncalls++;
        return K3_OK;
    }
    k3_buf d = { 0 };
    if (!begin(em, out, e) && !k3_buf_puts(&d, "\"delta\":{\"tool_calls\":[", e) &&
        !call_json(em, name, name_len, args, args_len, &d, e) && !k3_buf_puts(&d, "]}", e))
        chunk(em, d.data, d.len, NULL, NULL, NULL, out, e);
    k3_buf_free(&d);
    em->ncalls++;
    return e->code;
}

/* The whole chat answer's "message" object. */
static int message(const k3_emit *em, k3_buf *b, k3_err *e)
{
    if (k3_buf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":", e))
        return e->code;
    if (em->ncalls && em->content.len == 0
            ? k3_buf_puts(b, "null", e)
            : k3_jtext_put(b, em->content.data ? em->content.data : "", em->content.len, e))
        return e->code;
    if (em->reasoning.len && (k3_buf_puts(b, ",\"reasoning_content\":", e) ||
                              k3_jtext_put(b, em->reasoning.data, em->reasoning.len, e)))
        return e->code;
    if (em->ncalls && (k3_buf_puts(b, ",\"tool_calls\":[", e) ||
                       k3_buf_put(b, em->calls.data, em->calls.len, e) || k3_buf_puts(b, "]", e)))
        return e->code;
    return k3_buf_puts(b, "}", e);
}

void k3_emit_warnings(k3_emit *em, const char *lines)
{
    em->warnings = lines && *lines ? lines : NULL;
}

/* "warnings":["...",...] from em->warnings' lines. */
static int warnings_json(const k3_emit *em, k3_buf *b, k3_err *e)
{
    const char *p = em->warnings;
    if (k3_buf_puts(b, "\"warnings\":[", e))
        return e->code;
    for (int first = 1; *p; first = 0) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if ((!first && k3_buf_puts(b, ",", e)) || k3_jtext_put(b, p, n, e))
            return e->code;
        p += n + (nl != NULL);
    }
    return k3_buf_puts(b, "]", e);
}

int k3_emit_finish(k3_emit *em, const char *reason, const k3_usage *u, const k3_emit_ids *ids,
                   k3_buf *out, k3_err *e)
{
    if (em->api == K3_API_MESSAGES)
        return k3_emit_msg_finish(em, reason, u, ids, out, e);
    if (em->api == K3_API_RESPONSES)
        return k3_emit_resp_finish(em, reason, u, ids, out, e);
    if (em->stream && em->warnings &&
        (k3_buf_puts(out, "data: ", e) ||
         head(em, em->chat ? "chat.completion.chunk" : "text_completion", out, e) ||
         k3_buf_puts(out, "],", e) || warnings_json(em, out, e) || k3_buf_puts(out, "}\n\n", e)))
        return e->code;
    if (em->stream) {
        static const char empty[] = "\"delta\":{}", no_text[] = "\"text\":\"\"";
        if (begin(em, out, e) ||
            (em->chat ? chunk(em, empty, sizeof empty - 1, reason, ids, u, out, e)
                      : chunk(em, no_text, sizeof no_text - 1, reason, ids, u, out, e)))
            return e->code;
        if (em->include_usage &&
            (k3_buf_puts(out, "data: ", e) ||
             head(em, em->chat ? "chat.completion.chunk" : "text_completion", out, e) ||
             k3_buf_puts(out, "],", e) || usage(u, out, e) || k3_buf_puts(out, "}\n\n", e)))
            return e->code;
        return k3_buf_puts(out, "data: [DONE]\n\n", e);
    }
    if (head(em, em->chat ? "chat.completion" : "text_completion", out, e) ||
        k3_buf_puts(out, "{\"index\":0,", e))
        return e->code;
    if (em->chat
            ? message(em, out, e)
            : (k3_buf_puts(out, "\"text\":", e) ||
               k3_jtext_put(out, em->content.data ? em->content.data : "", em->content.len, e)))
        return e->code;
    if (logprobs_json(em, out, e) || finish_reason(reason, out, e) ||
        (ids && k3_emit_id_list("token_ids", ids->generated, ids->ngenerated, out, e)) ||
        k3_buf_puts(out, "}],", e) || usage(u, out, e) ||
        (ids && k3_emit_id_list("prompt_token_ids", ids->prompt, ids->nprompt, out, e)) ||
        timings(u, out, e))
        return e->code;
    if (em->warnings && (k3_buf_puts(out, ",", e) || warnings_json(em, out, e)))
        return e->code;
    return k3_buf_puts(out, "}", e);
}

int k3_emit_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e)
{
    if ((sse && k3_buf_puts(out, "data: ", e)) || k3_buf_puts(out, "{\"error\":{\"message\":", e) ||
        k3_jtext_put(out, err->message, strlen(err->message), e) ||
        k3_buf_puts(out, ",\"type\":", e) ||
        k3_jtext_put(out, err->type ? err->type : "invalid_request_error",
                     strlen(err->type ? err->type : "invalid_request_error"), e) ||
        k3_buf_puts(out, ",\"param\":", e))
        return e->code;
    if (err->param[0] ? k3_jtext_put(out, err->param, strlen(err->param), e)
                      : k3_buf_puts(out, "null", e))
        return e->code;
    if (k3_buf_puts(out, ",\"code\":", e) ||
        (err->code ? k3_jtext_put(out, err->code, strlen(err->code), e)
                   : k3_buf_puts(out, "null", e)))
        return e->code;
    return k3_buf_puts(out, sse ? "}}\n\n" : "}}", e);
}

int k3_emit_error_as(k3_api_kind api, const k3_api_error *err, int sse, k3_buf *out, k3_err *e)
{
    if (api == K3_API_MESSAGES)
        return k3_emit_msg_error(err, sse, out, e);
    if (api == K3_API_RESPONSES && sse)
        return k3_emit_resp_error(err, sse, out, e);
    return k3_emit_error(err, sse, out, e);
}

/* {"id":MODEL,"object":"model","created":...,"owned_by":"k3"} */
static int model_object(const char *model, long long created, k3_buf *out, k3_err *e)
{
    if (k3_buf_puts(out, "{\"id\":", e) || k3_jtext_put(out, model, strlen(model), e))
        return e->code;
    return k3_buf_printf(out, e, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"k3\"}",
                         created);
}

int k3_emit_models_list(const char *model, const char *const *aliases, size_t naliases,
                        long long created, k3_buf *out, k3_err *e)
{
    if (k3_buf_puts(out, "{\"object\":\"list\",\"data\":[", e) ||
        model_object(model, created, out, e))
        return e->code;
    for (size_t i = 0; i < naliases; i++)
        if (k3_buf_puts(out, ",", e) || model_object(aliases[i], created, out, e))
            return e->code;
    return k3_buf_puts(out, "]}", e);
}

int k3_emit_model(const char *model, long long created, k3_buf *out, k3_err *e)
{
    return model_object(model, created, out, e);
}

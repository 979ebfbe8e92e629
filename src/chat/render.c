/* render.c - k3_chat_render: a conversation as XTML segments.
 *
 * The format, as the release's encoder writes it (chat_vectors.json is the
 * ground truth; where the vectors are silent the rules follow the
 * encoder's published ports and say so):
 *
 *  1. "internal" system messages first: the tool declarations (when tools
 *     is non-empty), then, in thinking mode with an effort given, the
 *     thinking-effort notice (no effort: no notice);
 *  2. the messages in order;
 *  3. after them, notices for tool_choice required/none and for a JSON
 *     response_format (they instruct "the next message");
 *  4. the generation prompt: an open assistant message followed by an open
 *     think element (thinking) or response element (not thinking).
 *
 * An internal message is <message role="system" type="KIND"> with a fixed
 * body. A user or system message carries role and, when non-empty, name.
 * An assistant message holds, in thinking mode only, a think element (its
 * reasoning_content, omitted when blank; past turns keep it), then a
 * response element (content), then, when it made calls, a tools element
 * with one call element per call. A tool message carries the name and the
 * 1-based index of the call it answers.
 *
 * The vectors show all of the above except these, which follow the
 * encoder's ports (vLLM's and NVIDIA Dynamo's, which agree): the
 * tool_choice=none and json_schema notice texts; the think element's
 * absence when not thinking and the dropping of blank reasoning; argument
 * values that are not strings written as json.dumps writes them; arguments
 * that are not JSON kept verbatim in a json element; and how tool results
 * are ordered, named and numbered (tool_run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conv.h"
#include "chat/segments.h"
#include "chat/xtml.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/json.h"
#include "util/json_write.h"

static k3_xtml_attr attr(const char *key, const char *value)
{
    return (k3_xtml_attr){ key, value, strlen(value) };
}

static k3_xtml_attr attr_text(const char *key, k3_text value)
{
    return (k3_xtml_attr){ key, value.s, value.n };
}

/* <message role="system" type="kind"> whose body is the concatenation of
 * the NULL-terminated parts, as one text segment. (The encoder strips the
 * body; no body here has surrounding whitespace.) */
static int notice(k3_chat_segments *s, const char *kind, const char *const *parts, k3_err *e)
{
    k3_xtml_attr a[2] = { attr("role", "system"), attr("type", kind) };
    if (k3_xtml_open(s, "message", a, 2, e))
        return e->code;
    size_t start = s->len;
    for (size_t i = 0; parts[i]; i++)
        if (k3_seg_grow(s, parts[i], strlen(parts[i]), e))
            return e->code;
    if (k3_seg_close(s, start, 0, e) || k3_xtml_close(s, "message", e))
        return e->code;
    return k3_xtml_end_of_msg(s, e);
}

static int leading_notices(k3_chat_segments *s, const k3_chat *c, k3_err *e)
{
    if (c->tools_json.s) {
        const char *const body[] = {
            "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n",
            c->tools_json.s, "\n```", NULL
        };
        if (notice(s, "tool-declare", body, e))
            return e->code;
    }
    if (c->thinking && c->effort) {
        /* The text names `medium` although the encoder refuses it. */
        const char *const body[] = {
            "`thinking_effort` guides on how much to think in your thinking channel (not "
            "including the response channel), supported values include `low`, `medium`, "
            "`high`, and `max`.\nNow the system is invoked with `thinking_effort=",
            c->effort, "`.", NULL
        };
        return notice(s, "thinking-effort", body, e);
    }
    return K3_OK;
}

#define RAW_JSON                                                                       \
    "Your response must be raw JSON data without markdown code blocks (```json) or any " \
    "additional formatting."

static int trailing_notices(k3_chat_segments *s, const k3_chat *c, k3_err *e)
{
    if (c->tool_choice) {
        int none = !strcmp(c->tool_choice, "none");
        const char *const body[] = { "The system is invoked with `tool_choice=", c->tool_choice,
                                     "`.\nYou MUST ", none ? "NOT call any tools" : "call tools",
                                     " in the next message.", NULL };
        if (notice(s, "tool-choice", body, e))
            return e->code;
    }
    if (!c->response_format)
        return K3_OK;
    const char *const json_object[] = {
        "The system is invoked with `response_format=json_object`.\n" RAW_JSON, NULL
    };
    const char *const json_schema[] = {
        "The system is invoked with `response_format=json_schema`.\n" RAW_JSON
        "\nThe JSON data must match the following schema:\n```json\n",
        c->schema_json.s, "\n```", NULL
    };
    return notice(s, "response-format",
                  strcmp(c->response_format, "json_schema") ? json_object : json_schema, e);
}

/* Whether t is empty or only Python whitespace (str.strip() leaves ""). */
static int blank(k3_text t)
{
    const unsigned char *p = (const unsigned char *)t.s;
    size_t i = 0;
    while (i < t.n) {
        uint32_t cp;
        size_t l = k3_utf8_decode(p + i, t.n - i, &cp);
        if (!l || !(k3_uc_props(cp) & K3_UC_PY_SPACE))
            return 0;
        i += l;
    }
    return 1;
}

/* One <argument key="k" type="t">value</argument>: strings as they are,
 * other values as Python's json.dumps with its default separators. */
static int argument(k3_chat_segments *s, const char *key, size_t klen, const k3_json *v,
                    k3_err *e)
{
    k3_xtml_attr a[2] = { { "key", key, klen }, attr("type", k3_json_type_name(v)) };
    if (k3_xtml_open(s, "argument", a, 2, e))
        return e->code;
    if (v->type == K3J_STRING) {
        if (k3_xtml_text(s, v->str, v->len, e))
            return e->code;
    } else {
        k3_buf b = { 0 };
        if (k3_json_write(&b, v, K3_JW_SPACED, e) == K3_OK)
            k3_xtml_text(s, b.data, b.len, e);
        k3_buf_free(&b);
        if (e->code)
            return e->code;
    }
    return k3_xtml_close(s, "argument", e);
}

/* A call's arguments: one argument element per member of the JSON object,
 * in order. Text that is not JSON goes verbatim into a json element (the
 * encoder's fallback for malformed arguments); blank text is no arguments.
 * Text the strict reader refuses but Python's json.loads would take
 * (duplicate keys, NaN) takes the fallback too. */
static int arguments(k3_chat_segments *s, k3_text args, const char *path, k3_err *e)
{
    if (!args.s || blank(args))
        return K3_OK;
    char jerr[128];
    k3_json_doc *doc = k3_json_parse(args.s, args.n, jerr, sizeof jerr);
    if (!doc) {
        k3_xtml_attr a = attr("type", "object");
        if (k3_xtml_open(s, "json", &a, 1, e) || k3_xtml_text(s, args.s, args.n, e))
            return e->code;
        return k3_xtml_close(s, "json", e);
    }
    const k3_json *obj = k3_json_root(doc);
    if (obj->type != K3J_OBJECT)
        k3_fail(e, K3_EINPUT, "%s.arguments: expected a JSON object, got %s", path,
                k3_json_type_name(obj));
    for (size_t i = 0; i < obj->count && !e->code; i++)
        argument(s, obj->keys[i], obj->key_lens[i], &obj->items[i], e);
    k3_json_free(doc);
    return e->code;
}

static int tool_calls(k3_chat_segments *s, const k3_msg *m, size_t index, k3_err *e)
{
    if (m->ncalls == 0)
        return K3_OK;
    if (k3_xtml_open(s, "tools", NULL, 0, e))
        return e->code;
    for (size_t i = 0; i < m->ncalls; i++) {
        char num[24], path[80];
        snprintf(num, sizeof num, "%zu", i + 1);
        snprintf(path, sizeof path, "messages[%zu].tool_calls[%zu].function", index, i);
        k3_xtml_attr a[2] = { attr_text("tool", m->calls[i].name), attr("index", num) };
        if (k3_xtml_open(s, "call", a, 2, e) || arguments(s, m->calls[i].arguments, path, e) ||
            k3_xtml_close(s, "call", e))
            return e->code;
    }
    return k3_xtml_close(s, "tools", e);
}

/* A message element around a plain-text body. */
/* A content of parts (chat/images.h): each text part as text, each image
 * part as its markup (docs/VISION.md §4 steps 1 and 4), one structural
 * segment with the one <|media_pad|> that stands for the image's rows. */
static int parts_body(k3_chat_segments *s, const k3_chat *c, const k3_msg *m, k3_err *e)
{
    for (size_t i = 0; i < m->nparts && !e->code; i++) {
        const k3_part *p = &m->parts[i];
        if (p->image < 0) {
            k3_xtml_text(s, p->text.s, p->text.n, e);
            continue;
        }
        const k3_chat_image *im = &c->images[p->image];
        char mk[160];
        int n = snprintf(mk, sizeof mk, "<|media_begin|>image %dx%d<|media_content|>"
                                        "<|media_pad|><|media_end|>", im->width, im->height);
        k3_seg_add(s, mk, (size_t)n, 1, e);
    }
    return e->code;
}

static int plain_message_of(k3_chat_segments *s, const k3_chat *c, const k3_xtml_attr *a,
                            size_t na, const k3_msg *m, k3_err *e)
{
    if (k3_xtml_open(s, "message", a, na, e) ||
        (m->nparts ? parts_body(s, c, m, e) : k3_xtml_text(s, m->content.s, m->content.n, e)) ||
        k3_xtml_close(s, "message", e))
        return e->code;
    return k3_xtml_end_of_msg(s, e);
}

static int plain_message(k3_chat_segments *s, const k3_xtml_attr *a, size_t na, k3_text body,
                         k3_err *e)
{
    k3_msg m;
    memset(&m, 0, sizeof m);
    m.content = body;
    return plain_message_of(s, NULL, a, na, &m, e);
}

static int assistant(k3_chat_segments *s, const k3_chat *c, size_t index, k3_err *e)
{
    const k3_msg *m = &c->msgs[index];
    k3_xtml_attr role = attr("role", "assistant");
    if (k3_xtml_open(s, "message", &role, 1, e))
        return e->code;
    if (c->thinking) {
        if (k3_xtml_open(s, "think", NULL, 0, e) ||
            (m->reasoning.s && !blank(m->reasoning) &&
             k3_xtml_text(s, m->reasoning.s, m->reasoning.n, e)) ||
            k3_xtml_close(s, "think", e))
            return e->code;
    }
    if (k3_xtml_open(s, "response", NULL, 0, e) ||
        k3_xtml_text(s, m->content.s, m->content.n, e) || k3_xtml_close(s, "response", e) ||
        tool_calls(s, m, index, e) || k3_xtml_close(s, "message", e))
        return e->code;
    return k3_xtml_end_of_msg(s, e);
}

/* 1-based position of the call with this id in asst (first match), or 0. */
static size_t call_position(const k3_msg *asst, k3_text id)
{
    for (size_t i = 0; asst && id.s && i < asst->ncalls; i++)
        if (asst->calls[i].id.s && asst->calls[i].id.n == id.n &&
            !memcmp(asst->calls[i].id.s, id.s, id.n))
            return i + 1;
    return 0;
}

/* The run of tool messages [first, end), answering the calls of asst (the
 * latest assistant message, or NULL). When every message's tool_call_id
 * names one of asst's calls, results are put in call order (stable), as the
 * encoder does for parallel calls answered out of order. Each result is
 * then numbered by *count, the tool messages since asst, and named by its
 * call, else by its own name, else by the call at that number. */
static int tool_run(k3_chat_segments *s, const k3_chat *c, size_t first, size_t end,
                    const k3_msg *asst, size_t *count, k3_err *e)
{
    size_t n = end - first;
    size_t *pos = k3_malloc(e, 2 * n * sizeof *pos, "tool results");
    if (!pos)
        return e->code;
    size_t *order = pos + n;
    int resolved = 1;
    for (size_t k = 0; k < n; k++) {
        pos[k] = call_position(asst, c->msgs[first + k].tool_call_id);
        resolved &= pos[k] != 0;
        order[k] = k;
    }
    for (size_t k = 1; resolved && k < n; k++) /* insertion sort: stable */
        for (size_t j = k; j > 0 && pos[order[j - 1]] > pos[order[j]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t k = 0; k < n && !e->code; k++) {
        size_t at = order[k];
        const k3_msg *m = &c->msgs[first + at];
        size_t index = ++*count;
        k3_text name = m->name;
        if (pos[at])
            name = asst->calls[pos[at] - 1].name;
        else if (!name.s && asst && index <= asst->ncalls)
            name = asst->calls[index - 1].name;
        if (!name.s) {
            k3_fail(e, K3_EINPUT, "messages[%zu]: cannot tell which tool this result is for "
                                  "(no tool_call_id naming a call of the previous assistant "
                                  "message, no name)", first + at);
            break;
        }
        char num[24];
        snprintf(num, sizeof num, "%zu", index);
        k3_xtml_attr a[3] = { attr("role", "tool"), attr_text("tool", name), attr("index", num) };
        plain_message(s, a, 3, m->content, e);
    }
    free(pos);
    return e->code;
}

static int messages(k3_chat_segments *s, const k3_chat *c, k3_err *e)
{
    static const char *const roles[] = { "system", "user" };
    const k3_msg *asst = NULL;
    size_t count = 0;
    for (size_t i = 0; i < c->n && !e->code; i++) {
        const k3_msg *m = &c->msgs[i];
        if (m->role == K3_ROLE_ASSISTANT) {
            asst = m;
            count = 0;
            assistant(s, c, i, e);
        } else if (m->role == K3_ROLE_TOOL) {
            size_t end = i + 1;
            while (end < c->n && c->msgs[end].role == K3_ROLE_TOOL)
                end++;
            tool_run(s, c, i, end, asst, &count, e);
            i = end - 1;
        } else {
            k3_xtml_attr a[2] = { attr("role", roles[m->role]), attr_text("name", m->name) };
            plain_message_of(s, c, a, m->name.n ? 2 : 1, m, e);
        }
    }
    return e->code;
}

int k3_chat_render(const k3_chat *c, k3_chat_segments *out, k3_err *e)
{
    out->len = 0;
    out->n = 0;
    if (k3_seg_grow(out, "", 0, e) || /* text is a string even when nothing is rendered */
        leading_notices(out, c, e) || messages(out, c, e) || trailing_notices(out, c, e))
        return e->code;
    if (!c->add_generation_prompt)
        return K3_OK;
    k3_xtml_attr role = attr("role", "assistant");
    if (k3_xtml_open(out, "message", &role, 1, e))
        return e->code;
    return k3_xtml_open(out, c->thinking ? "think" : "response", NULL, 0, e);
}

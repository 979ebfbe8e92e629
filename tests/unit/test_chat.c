/* test_chat.c - the XTML chat renderer (k3/chat.h) and the JSON writer it
 * embeds JSON with.
 *
 * 1. Every case of ../shared/k3-release/chat_vectors.json (the release
 *    encoder's own output) renders to exactly its segments - text and
 *    allow_special flag, one by one - and its rendered string.
 * 2. Rules the vectors do not exercise (parallel tool results, malformed
 *    arguments, tool_choice none, json_schema), pinned to the encoder's
 *    behaviour as its published ports document it.
 * 3. Bad input: each refused with K3_EINPUT and a message naming the field.
 * 4. The JSON writer against Python's json.dumps. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "k3/chat.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_write.h"

#define VECTORS "../shared/k3-release/chat_vectors.json"

/* Renders conversation JSON text; NULL (with e filled) on failure. */
static k3_chat_segments *render(const char *json, size_t len, k3_err *e)
{
    static k3_chat_segments s;
    k3_chat *c;
    k3_chat_segments_free(&s);
    if (k3_chat_read(&c, json, len, e))
        return NULL;
    int rc = k3_chat_render(c, &s, e);
    k3_chat_free(c);
    return rc ? NULL : &s;
}

/* Segment i's text equals want (NUL-terminated) and its flag is special. */
static int seg_is(const k3_chat_segments *s, size_t i, const char *want, size_t want_len,
                  int special)
{
    return i < s->n && s->seg[i].len == want_len &&
           !memcmp(s->text + s->seg[i].off, want, want_len) && s->seg[i].allow_special == special;
}

/* The case's input as the reader takes it: {"messages", "tools", "options"}. */
static int case_input(const k3_json *c, k3_buf *b, k3_err *e)
{
    static const char *const keys[] = { "messages", "tools", "options" };
    k3_buf_puts(b, "{", e);
    for (int i = 0; i < 3; i++) {
        const k3_json *v = k3_json_get(c, keys[i]);
        if (!v)
            continue;
        if (b->len > 1)
            k3_buf_puts(b, ",", e);
        k3_buf_puts(b, "\"", e);
        k3_buf_puts(b, keys[i], e);
        k3_buf_puts(b, "\":", e);
        k3_json_write(b, v, 0, e);
    }
    return k3_buf_puts(b, "}", e);
}

static void check_case(const k3_json *c)
{
    const k3_json *name = k3_json_get(c, "name"), *segs = k3_json_get(c, "segments");
    const k3_json *rendered = k3_json_get(c, "rendered");
    k3_err e = { 0, "" };
    k3_buf in = { 0 };
    case_input(c, &in, &e);
    k3_chat_segments *s = render(in.data, in.len, &e);
    k3_buf_free(&in);
    CHECK(s != NULL, "%s: %s", name->str, e.msg);
    if (!s)
        return;
    CHECK(s->len == rendered->len && !memcmp(s->text, rendered->str, s->len),
          "%s: rendered string differs:\n got: %s\nwant: %s", name->str, s->text, rendered->str);
    CHECK(s->n == segs->count, "%s: %zu segments, want %zu", name->str, s->n, segs->count);
    for (size_t i = 0; i < segs->count; i++) {
        const k3_json *t = k3_json_get(&segs->items[i], "text");
        const k3_json *f = k3_json_get(&segs->items[i], "allow_special");
        if (!seg_is(s, i, t->str, t->len, f->boolean)) {
            CHECK(0, "%s: segment %zu: got \"%.*s\" (allow_special %d), want \"%s\" (%d)",
                  name->str, i, i < s->n ? (int)s->seg[i].len : 0,
                  i < s->n ? s->text + s->seg[i].off : "", i < s->n ? s->seg[i].allow_special : -1,
                  t->str, f->boolean);
            break;
        }
    }
}

static void test_vectors(void)
{
    k3_err e = { 0, "" };
    size_t len;
    char *text = k3_read_small_file(&e, VECTORS, (size_t)1 << 24, &len);
    CHECK(text != NULL, "%s", e.msg);
    if (!text)
        return;
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    CHECK(doc != NULL, "%s: %s", VECTORS, jerr);
    const k3_json *cases = doc ? k3_json_get(k3_json_root(doc), "cases") : NULL;
    CHECK(cases && cases->count >= 12, "%s: expected at least 12 cases", VECTORS);
    for (size_t i = 0; cases && i < cases->count; i++)
        check_case(&cases->items[i]);
    k3_json_free(doc);
    free(text);
}

/* The hand-written conversations and expectations below spell '"' as '\''
 * to stay readable (none needs a real '\''): dq(s) is s with every '\''
 * turned into '"', in one of a few static buffers. */
static const char *dq(const char *s)
{
    static char buf[4][2048];
    static int next;
    char *d = buf[next++ % 4];
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof buf[0]; i++)
        d[i] = s[i] == '\'' ? '"' : s[i];
    d[i] = '\0';
    CHECK(!s[i], "test string longer than %zu bytes", sizeof buf[0]);
    return d;
}

/* conversation renders to exactly want (the rendered string). */
static void renders(const char *what, const char *conversation, const char *want)
{
    k3_err e = { 0, "" };
    conversation = dq(conversation);
    want = dq(want);
    k3_chat_segments *s = render(conversation, strlen(conversation), &e);
    CHECK(s && s->len == strlen(want) && !memcmp(s->text, want, s->len),
          "%s:\n got: %s\nwant: %s\n(%s)", what, s ? s->text : "(error)", want, e.msg);
}

#define USER(t) "<|open|>message role='user'<|sep|>" t "<|close|>message<|sep|><|end_of_msg|>"
#define TOOL(name, index, t)                                                                    \
    "<|open|>message role='tool' tool='" name "' index='" index "'<|sep|>" t                     \
    "<|close|>message<|sep|><|end_of_msg|>"
#define ASSISTANT_OPEN "<|open|>message role='assistant'<|sep|>"
#define NOTHINK(tail) "'options':{'thinking':false,'add_generation_prompt':false" tail "}"

static void test_inferred_rules(void)
{
    /* Parallel calls answered out of order: results go back into call
     * order, each named and numbered by its call. Arguments that are not
     * JSON go verbatim into a json element; non-string values are written
     * by json.dumps with its default separators. */
    renders("tool results",
            "{'messages':[{'role':'assistant','content':null,'tool_calls':["
            "{'id':'a','type':'function','function':{'name':'f','arguments':'{oops'}},"
            "{'id':'b','function':{'name':'g','arguments':{'x':[1, 2.50, {'k': null}]}}}]},"
            "{'role':'tool','tool_call_id':'b','content':'B'},"
            "{'role':'tool','tool_call_id':'a','content':'A'}]," NOTHINK("") "}",
            ASSISTANT_OPEN "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
            "<|open|>call tool='f' index='1'<|sep|><|open|>json type='object'<|sep|>{oops"
            "<|close|>json<|sep|><|close|>call<|sep|>"
            "<|open|>call tool='g' index='2'<|sep|><|open|>argument key='x' type='array'<|sep|>"
            "[1, 2.5, {'k': null}]<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
            "<|close|>message<|sep|><|end_of_msg|>"
            TOOL("f", "1", "A")
            TOOL("g", "2", "B"));
    /* Without ids, results are named by position; a name of their own wins
     * over the position when the id does not resolve. */
    renders("tool results by position",
            "{'messages':[{'role':'assistant','content':'','tool_calls':["
            "{'function':{'name':'f','arguments':' '}},{'function':{'name':'g'}}]},"
            "{'role':'tool','content':'1'},{'role':'tool','name':'h','content':'2'}],"
            NOTHINK("") "}",
            ASSISTANT_OPEN "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
            "<|open|>call tool='f' index='1'<|sep|><|close|>call<|sep|>"
            "<|open|>call tool='g' index='2'<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
            "<|close|>message<|sep|><|end_of_msg|>"
            TOOL("f", "1", "1")
            TOOL("h", "2", "2"));
    /* Blank reasoning is dropped; not thinking drops the think element. */
    renders("blank reasoning",
            "{'messages':[{'role':'assistant','content':'x','reasoning_content':' \\n'}],"
            "'options':{'add_generation_prompt':false}}",
            ASSISTANT_OPEN "<|open|>think<|sep|><|close|>think<|sep|><|open|>response<|sep|>x"
            "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>");
    renders("no thinking, no reasoning",
            "{'messages':[{'role':'assistant','content':'x','reasoning_content':'r'}],"
            NOTHINK("") "}",
            ASSISTANT_OPEN "<|open|>response<|sep|>x<|close|>response<|sep|><|close|>message<|sep|>"
            "<|end_of_msg|>");
    renders("tool_choice none, json_schema, sorted schema",
            "{'messages':[{'role':'user','content':'q'}]," NOTHINK(
                ",'tool_choice':'none','response_format':{'type':'json_schema',"
                "'json_schema':{'name':'n','schema':{'type':'object','a':1e-5}}}") "}",
            USER("q") "<|open|>message role='system' type='tool-choice'<|sep|>The system is "
            "invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message."
            "<|close|>message<|sep|><|end_of_msg|><|open|>message role='system' "
            "type='response-format'<|sep|>The system is invoked with `response_format=json_schema`."
            "\nYour response must be raw JSON data without markdown code blocks (```json) or any "
            "additional formatting.\nThe JSON data must match the following schema:\n```json\n"
            "{'a':1e-05,'type':'object'}\n```<|close|>message<|sep|><|end_of_msg|>");
    renders("auto, text and empty tools add nothing",
            "{'messages':[],'tools':[]," NOTHINK(",'tool_choice':'auto','response_format':"
                                                    "{'type':'text'}") "}",
            "");
}

/* The chat loop's path: add a user turn, ask for the generation prompt. */
static void test_chat_loop_api(void)
{
    k3_err e = { 0, "" };
    k3_chat *c;
    const char *in = dq("{'messages':[]," NOTHINK("") "}");
    k3_chat_segments s = { 0 };
    CHECK(k3_chat_read(&c, in, strlen(in), &e) == K3_OK, "%s", e.msg);
    if (!c)
        return;
    CHECK(k3_chat_add_message(c, "user", "a\0b", 3, &e) == K3_OK, "%s", e.msg);
    k3_chat_set_generation_prompt(c, 1);
    CHECK(k3_chat_render(c, &s, &e) == K3_OK, "%s", e.msg);
    /* The content holds a NUL byte, so compare around it. */
    const char *head = dq("<|open|>message role='user'<|sep|>");
    const char *tail = dq("<|close|>message<|sep|><|end_of_msg|>" ASSISTANT_OPEN
                          "<|open|>response<|sep|>");
    size_t h = strlen(head);
    CHECK(s.len == h + 3 + strlen(tail) && !memcmp(s.text, head, h) &&
              !memcmp(s.text + h, "a\0b", 3) && !strcmp(s.text + h + 3, tail),
          "add_message: %s", s.text);
    CHECK(seg_is(&s, 7, "a\0b", 3, 0), "content with a NUL byte is one text segment");
    CHECK(k3_chat_add_message(c, "assistant", "x", 1, &e) == K3_EINPUT &&
              strstr(e.msg, "assistant"),
          "add_message refuses other roles: %s", e.msg);
    k3_chat_segments_free(&s);
    k3_chat_free(c);
}

/* conversation is refused (by the reader or the renderer) with K3_EINPUT
 * and a message containing each of the NULL-terminated want strings. */
static void refused(const char *conversation, const char *want1, const char *want2)
{
    k3_err e = { 0, "" };
    conversation = dq(conversation);
    want1 = dq(want1);
    want2 = want2 ? dq(want2) : NULL;
    k3_chat_segments *s = render(conversation, strlen(conversation), &e);
    CHECK(!s && e.code == K3_EINPUT && strstr(e.msg, want1) && (!want2 || strstr(e.msg, want2)),
          "%s\n  -> code %d: %s", conversation, e.code, e.msg);
}

static void test_bad_input(void)
{
    refused("{'messages':[{'role':'robot','content':'x'}]}", "messages[0].role", "robot");
    refused("{'messages':[],'options':{'thinking_effort':'medium'}}",
            "options.thinking_effort", "low, high or max");
    refused("{'messages':[],'options':{'thinking_effort':3}}", "options.thinking_effort",
            "got number");
    refused("{'messages':[{'role':'user','content':'x'}", "not valid JSON", "byte");
    refused("{'messages':[{'role':'user','content':'x'},]}", "not valid JSON", NULL);
    refused("[]", "conversation: expected an object", NULL);
    refused("{'options':{}}", "missing 'messages'", NULL);
    refused("{'messages':{}}", "messages: expected an array, got object", NULL);
    refused("{'messages':['hi']}", "messages[0]: expected an object, got string", NULL);
    refused("{'messages':[{'content':'x'}]}", "messages[0]: missing 'role'", NULL);
    refused("{'messages':[{'role':'user','content':'a'},{'role':'user','content':1}]}",
            "messages[1].content: expected a string, an array of parts or null, got number",
            NULL);
    refused("{'messages':[{'role':'user','content':[{'type':'image_url','image_url':"
            "{'url':'https://example.com/a.png'}}]}]}",
            "messages[0].content[0]: only data URLs", "never fetches");
    refused("{'messages':[{'role':'user','content':[{'type':'audio'}]}]}",
            "messages[0].content[0].type", NULL);
    refused("{'messages':[{'role':'assistant','content':[{'type':'text','text':'a'}]}]}",
            "messages[0].content: expected a string or null, got array", NULL);
    refused("{'messages':[{'role':'user','content':'a','reasoning_content':'r'}]}",
            "messages[0]: unknown key 'reasoning_content'", NULL);
    refused("{'messages':[],'options':{'thinking':'yes'}}",
            "options.thinking: expected a boolean, got string", NULL);
    refused("{'messages':[],'options':{'stream':true}}", "options: unknown key 'stream'",
            NULL);
    refused("{'messages':[],'tools':{}}", "tools: expected an array or null", NULL);
    refused("{'messages':[],'tools':[1]}", "tools[0]: expected an object, got number", NULL);
    refused("{'messages':[],'options':{'tool_choice':'always'}}", "options.tool_choice",
            "auto, required or none");
    refused("{'messages':[],'options':{'tool_choice':{'type':'function'}}}",
            "options.tool_choice", "a named choice needs");
    refused("{'messages':[],'tools':[{'type':'function','function':{'name':'g'}}],"
            "'options':{'tool_choice':{'type':'function','function':{'name':'f'}}}}",
            "options.tool_choice.function.name", "not a declared tool");
    refused("{'messages':[],'options':{'grammar':3}}", "options.grammar", NULL);
    refused("{'messages':[],'options':{'response_format':{'type':'json_schema',"
            "'json_schema':{'schema':{},'strict':'yes'}}}}",
            "options.response_format.json_schema.strict", NULL);
    refused("{'messages':[],'options':{'response_format':{'type':'xml'}}}",
            "options.response_format.type", NULL);
    refused("{'messages':[],'options':{'response_format':{'type':'json_schema'}}}",
            "options.response_format", "json_schema");
    refused("{'messages':[{'role':'assistant','tool_calls':{}}]}",
            "messages[0].tool_calls: expected an array or null, got object", NULL);
    refused("{'messages':[{'role':'assistant','tool_calls':[{'function':{}}]}]}",
            "messages[0].tool_calls[0].function.name: missing", NULL);
    refused("{'messages':[{'role':'assistant','tool_calls':[{'type':'code','function':"
            "{'name':'f'}}]}]}",
            "messages[0].tool_calls[0].type", "'code' is not 'function'");
    refused("{'messages':[{'role':'assistant','tool_calls':[{'function':{'name':'f',"
            "'arguments':7}}]}]}",
            "messages[0].tool_calls[0].function.arguments", "got number");
    /* Caught when rendering: arguments that are JSON but not an object, and
     * a tool result nothing names. */
    refused("{'messages':[{'role':'assistant','tool_calls':[{'function':{'name':'f',"
            "'arguments':'[1]'}}]}]}",
            "messages[0].tool_calls[0].function.arguments: expected a JSON object, got array",
            NULL);
    refused("{'messages':[{'role':'tool','content':'r'}]}", "messages[0]",
            "which tool");
}

static void writes(const char *json, unsigned flags, const char *want)
{
    char err[256];
    k3_err e = { 0, "" };
    k3_buf b = { 0 };
    k3_json_doc *d = k3_json_parse(json, strlen(json), err, sizeof err);
    CHECK(d != NULL, "%s: %s", json, err);
    if (!d)
        return;
    k3_json_write(&b, k3_json_root(d), flags, &e);
    CHECK(b.data && !strcmp(b.data, want), "%s -> %s, want %s", json, b.data, want);
    k3_buf_free(&b);
    k3_json_free(d);
}

static void test_json_write(void)
{
    /* Python: repr(float) for non-integers, digits for integers. */
    static const char *const floats[][2] = {
        { "1.0", "1.0" }, { "0.5", "0.5" }, { "1e-5", "1e-05" }, { "0.0001", "0.0001" },
        { "1e16", "1e+16" }, { "9999999999999998.0", "9999999999999998.0" },
        { "-0.0", "-0.0" }, { "1e22", "1e+22" }, { "0.1", "0.1" }, { "2.5e-7", "2.5e-07" },
        { "1.7976931348623157e308", "1.7976931348623157e+308" }, { "5e-324", "5e-324" },
        { "1E2", "100.0" }, { "-1.5e-10", "-1.5e-10" }, { "123456789.125", "123456789.125" },
        { "-0", "0" }, { "9007199254740993", "9007199254740993" },
    };
    for (size_t i = 0; i < sizeof floats / sizeof *floats; i++)
        writes(floats[i][0], 0, floats[i][1]);
    /* Escapes as json.dumps(ensure_ascii=False): DEL and U+2028 stay raw. */
    writes("{\"b\":[1,{\"z\":null,\"a\":true}],\"a\":\"x\\u0001\\\"\\\\\\n\\u007f\\u00e9\\u2028\"}",
           K3_JW_SORT_KEYS,
           "{\"a\":\"x\\u0001\\\"\\\\\\n\x7f\xc3\xa9\xe2\x80\xa8\","
           "\"b\":[1,{\"a\":true,\"z\":null}]}");
    writes("{\"b\":[1,{\"z\":null,\"a\":true}],\"a\":\"x\",\"e\":{},\"f\":[]}", K3_JW_SPACED,
           "{\"b\": [1, {\"z\": null, \"a\": true}], \"a\": \"x\", \"e\": {}, \"f\": []}");
    /* Code-point order: "\u00e9" sorts after "z", "a" before "ab". */
    writes("{\"\\u00e9\":1,\"z\":2,\"ab\":3,\"a\":4}", K3_JW_SORT_KEYS,
           "{\"a\":4,\"ab\":3,\"z\":2,\"\xc3\xa9\":1}");
}

int main(void)
{
    test_vectors();
    test_inferred_rules();
    test_chat_loop_api();
    test_bad_input();
    test_json_write();
    return check_report("test_chat");
}

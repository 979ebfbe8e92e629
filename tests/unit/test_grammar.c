/* test_grammar.c - the grammar engine (grammar/grammar.h): GBNF parsing
 * and its errors, matching bytes, masks against a brute-force check on a
 * small vocabulary (every id: does appending it keep the output a viable
 * prefix; special and end ids included), rollback equal to recompute, the
 * end budget, and hostile inputs refused or bounded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grammar/grammar.h"
#include "util/json.h"

/* The synthetic vocabulary: ids 0..255 the single bytes, then pieces,
 * then specials. */
static const char *const pieces[] = {
    "ab",   "abc",      "\"",       "\",",      "{\"",      "\"}",          "true",     "tr",
    "12",   "\xC3\xA9", "<|open|>", "\": ",     ", \"",     "null",         "]",        "[1",
    "-0",   "0.",       "e+",       "\\u00",    "\\n",      "think",        "response", "message",
    "call", "argument", " key=\"",  " type=\"", "tool=\"",  " index=\"1\"", "string",   "number",
    "get",  "_weather", "Paris",    "\"a\"",    "abcdefgh", "\xE2\x82",     "\xAC",
};
static const char *const specials[] = { "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>" };
#define NPIECES  (sizeof pieces / sizeof *pieces)
#define NSPEC    4
#define NV       (256 + NPIECES + NSPEC)
#define ID_OPEN  (256 + NPIECES)
#define ID_CLOSE (ID_OPEN + 1)
#define ID_SEP   (ID_OPEN + 2)
#define ID_END   (ID_OPEN + 3)

static k3_gram_vocab *vocab;
static unsigned char byte_store[256];

static void make_vocab(void)
{
    const unsigned char *b[NV];
    size_t l[NV];
    unsigned char sp[NV];
    for (int i = 0; i < 256; i++) {
        byte_store[i] = (unsigned char)i;
        b[i] = &byte_store[i], l[i] = 1, sp[i] = 0;
    }
    for (size_t i = 0; i < NPIECES; i++)
        b[256 + i] = (const unsigned char *)pieces[i], l[256 + i] = strlen(pieces[i]),
                sp[256 + i] = 0;
    for (int i = 0; i < NSPEC; i++)
        b[ID_OPEN + i] = (const unsigned char *)specials[i], l[ID_OPEN + i] = strlen(specials[i]),
                    sp[ID_OPEN + i] = 1;
    k3_err e = { 0, "" };
    CHECK(k3_gram_vocab_new(&vocab, NV, b, l, sp, &e) == K3_OK, "vocab: %s", e.msg);
}

static int bit(const uint32_t *m, uint32_t id)
{
    return (m[id >> 5] >> (id & 31)) & 1;
}

/* The brute-force mask: every id tried with accept (a path through the
 * byte matcher that does not use the trie, the walk or the cache), then
 * undone; end ids allowed exactly where the grammar may end. */
static void brute(k3_gram_matcher *m, uint32_t *out)
{
    memset(out, 0, k3_gram_mask_words(vocab) * 4);
    for (uint32_t id = 0; id < NV; id++) {
        k3_err e = { 0, "" };
        if (k3_gram_accept(m, id, &e) == K3_OK) {
            out[id >> 5] |= 1u << (id & 31);
            k3_gram_rollback(m, 1);
        }
    }
}

static int masks_equal(k3_gram_matcher *m, const char *what)
{
    uint32_t a[(NV + 31) / 32], b[(NV + 31) / 32];
    k3_err e = { 0, "" };
    CHECK(k3_gram_mask(m, -1, a, &e) == K3_OK, "%s: mask: %s", what, e.msg);
    brute(m, b);
    int same = 1;
    for (uint32_t id = 0; id < NV; id++)
        if (bit(a, id) != bit(b, id)) {
            if (same)
                CHECK(0, "%s: id %u: mask %d, brute force %d", what, id, bit(a, id), bit(b, id));
            same = 0;
        }
    return same;
}

static k3_grammar *gbnf(const char *text)
{
    k3_grammar *g = NULL;
    k3_err e = { 0, "" };
    CHECK(k3_gram_from_gbnf(&g, text, strlen(text), &e) == K3_OK, "%s: %s", text, e.msg);
    return g;
}

static k3_gram_matcher *matcher(const k3_grammar *g)
{
    k3_gram_matcher *m = NULL;
    k3_err e = { 0, "" };
    uint32_t end = ID_END;
    CHECK(k3_gram_matcher_new(&m, g, vocab, &end, 1, &e) == K3_OK, "matcher: %s", e.msg);
    return m;
}

/* Whether the bytes of s (as single-byte ids) match the whole grammar. */
static int matches(const k3_grammar *g, const char *s, size_t n)
{
    k3_gram_matcher *m = matcher(g);
    if (!m)
        return 0;
    k3_err e = { 0, "" };
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = k3_gram_accept(m, (unsigned char)s[i], &e) == K3_OK;
    ok = ok && k3_gram_is_accepting(m);
    k3_gram_matcher_free(m);
    return ok;
}

static void test_parse_errors(void)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        { "root ::= foo", "grammar:1:10: undefined rule 'foo'" },
        { "rot ::= \"a\"", "no 'root' rule" },
        { "root ::= \"a", "grammar:1:10: unterminated literal" },
        { "root ::= [a-", "unterminated character class" },
        { "root ::= ( \"a\" ", "group without its ')'" },
        { "root ::= \"a\"\nroot ::= \"b\"", "grammar:2:1: rule defined twice" },
        { "root ::= \"a\" )", "')' without its '('" },
        { "root ::= \"\\q\"", "unknown escape" },
        { "root ::= x\nx ::= x \"a\" | \"b\"", "left recursion" },
        { "root ::= a\na ::= b? a \"x\" | \"z\"\nb ::= \"y\"", "left recursion" },
        { "root ::= \"a\"{3,2}", "n < m" },
        { "root ::= \"a\"{99999}", "K3_GRAM_MAX_REPEAT" },
        { "root ::= r\nr ::= \"a\" r", "matches nothing" },
        { "root := \"a\"", "expected '::='" },
        { "root ::= [z-a]", "end before its start" },
        { "root ::= <[abc]>", "decimal id" },
        { "root ::= !x", "expected a token" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        k3_grammar *g = NULL;
        k3_err e = { 0, "" };
        int rc = k3_gram_from_gbnf(&g, bad[i].text, strlen(bad[i].text), &e);
        CHECK(rc == K3_EINPUT && strstr(e.msg, bad[i].want), "%s: rc %d, \"%s\" (want \"%s\")",
              bad[i].text, rc, e.msg, bad[i].want);
        k3_gram_free(g);
    }
    /* deep nesting is refused, not a stack overflow */
    char *deep = malloc(100000);
    strcpy(deep, "root ::= ");
    size_t n = strlen(deep);
    for (int i = 0; i < 20000; i++)
        deep[n++] = '(';
    deep[n] = 0;
    k3_grammar *g = NULL;
    k3_err e = { 0, "" };
    CHECK(k3_gram_from_gbnf(&g, deep, n, &e) == K3_EINPUT && strstr(e.msg, "K3_GRAM_MAX_NEST"),
          "deep: %s", e.msg);
    free(deep);
}

static void test_matching(void)
{
    static const struct {
        const char *gram, *yes[4], *no[4];
    } cases[] = {
        { "root ::= \"ab\" | \"abc\"", { "ab", "abc" }, { "a", "abcd", "b" } },
        { "root ::= [a-c]+ \"x\"?", { "a", "abcx", "ccc" }, { "", "x", "ad" } },
        { "root ::= [^a-y]*", { "", "z", "zé" }, { "a", "y" } },
        { "root ::= \"a\"{2,3} b\nb ::= \"-\" | \"\"", { "aa", "aaa-", "aa-" }, { "a", "aaaa" } },
        { "root ::= (\"x\" | \"y\"){2}  # comment\n", { "xy", "yy" }, { "x", "xyx" } },
        { "root ::= \"\\u00e9\\x41\" .",
          { "\xC3\xA9"
            "Aq",
            "\xC3\xA9"
            "A\xE2\x82\xAC" },
          { "\xC3\xA9"
            "A",
            "\xC3\xA9"
            "A\xE2\x82" } },
        { "root ::= [\\x00-\\x7F]{0,2}", { "", "ab" }, { "abc", "\xC3\xA9" } },
        { "root ::= item (\",\" item)*\nitem ::= [0-9]+", { "1", "1,22,3" }, { "1,", ",1" } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        k3_grammar *g = gbnf(cases[i].gram);
        if (!g)
            continue;
        for (int k = 0; k < 4 && cases[i].yes[k]; k++)
            CHECK(matches(g, cases[i].yes[k], strlen(cases[i].yes[k])), "%s should match '%s'",
                  cases[i].gram, cases[i].yes[k]);
        for (int k = 0; k < 4 && cases[i].no[k]; k++)
            CHECK(!matches(g, cases[i].no[k], strlen(cases[i].no[k])), "%s should not match '%s'",
                  cases[i].gram, cases[i].no[k]);
        k3_gram_free(g);
    }
}

/* Random walks through a grammar: at every step the mask equals the
 * brute force, and after the walk, rolling back k and recomputing equals
 * the mask seen k steps ago. */
static void walk_grammar(const k3_grammar *g, const char *name, unsigned seed, int steps)
{
    k3_gram_matcher *m = matcher(g);
    if (!m)
        return;
    size_t words = k3_gram_mask_words(vocab);
    uint32_t *hist = calloc((size_t)(steps + 1) * words, 4);
    uint32_t mask[(NV + 31) / 32];
    srand(seed);
    int t = 0;
    for (; t < steps; t++) {
        k3_err e = { 0, "" };
        char what[96];
        snprintf(what, sizeof what, "%s step %d", name, t);
        if (!masks_equal(m, what))
            break;
        k3_gram_mask(m, -1, hist + (size_t)t * words, &e);
        int n = 0;
        for (uint32_t id = 0; id < NV; id++)
            n += bit(hist + (size_t)t * words, id);
        if (!n)
            break;
        int pick = rand() % n;
        uint32_t id = 0;
        for (;; id++)
            if (bit(hist + (size_t)t * words, id) && pick-- == 0)
                break;
        CHECK(k3_gram_accept(m, id, &e) == K3_OK, "%s: accept %u: %s", what, id, e.msg);
        if (k3_gram_is_done(m)) {
            t++;
            break;
        }
    }
    /* rollback equals recompute */
    for (int k = t; k > 0; k -= 3) {
        k3_gram_rollback(m, (size_t)(k3_gram_count(m) - (size_t)(k - 1)));
        k3_err e = { 0, "" };
        k3_gram_mask(m, -1, mask, &e);
        CHECK(!memcmp(mask, hist + (size_t)(k - 1) * words, words * 4),
              "%s: mask after rollback to %d differs", name, k - 1);
    }
    free(hist);
    k3_gram_matcher_free(m);
}

static void test_masks(void)
{
    static const char *const grams[] = {
        "root ::= \"ab\" | \"abc\" | \"abcdefgh\"",
        ("root ::= \"{\" (\"\\\"a\\\"\" \": \" val (\", \" \"\\\"a\\\"\" \": \" val)*)? \"}\"\n"
         "val ::= \"true\" | \"null\" | [0-9]+ | \"[\" val \"]\" | \"\\\"\" [^\"]* \"\\\"\""),
        "root ::= <|open|> \"think\" <|sep|> [^<]* <|close|> \"think\" <|sep|>",
        "root ::= (!<|close|>)* <|close|>",
        "root ::= !<|close|> (!<|open|> | \"ab\") <|sep|>",
        "root ::= \"<|open|>\" <|open|>",
        "root ::= [\\u00e9\\u20ac]+ | \"x\"",
        "root ::= <[295]> \"x\"", /* ID_OPEN by number */
    };
    char name[32];
    for (size_t i = 0; i < sizeof grams / sizeof *grams; i++) {
        k3_grammar *g = gbnf(grams[i]);
        if (!g)
            continue;
        for (unsigned s = 1; s <= 4; s++) {
            snprintf(name, sizeof name, "grammar %zu seed %u", i, s);
            walk_grammar(g, name, s, 40);
        }
        k3_gram_free(g);
    }
}

/* Special ids are not text: the ordinary piece spelling "<|open|>" does
 * not match the token terminal, and the special id does not match the
 * literal. */
static void test_specials(void)
{
    k3_grammar *g = gbnf("root ::= <|open|> \"x\"");
    k3_gram_matcher *m = g ? matcher(g) : NULL;
    if (!m)
        return;
    k3_err e = { 0, "" };
    uint32_t mask[(NV + 31) / 32];
    k3_gram_mask(m, -1, mask, &e);
    CHECK(bit(mask, ID_OPEN), "special <|open|> allowed");
    int n = 0;
    for (uint32_t id = 0; id < NV; id++)
        n += bit(mask, id);
    CHECK(n == 1, "only the special id: %d allowed", n);
    k3_gram_free(g);
    k3_gram_matcher_free(m);
    g = gbnf("root ::= \"<|open|>\"");
    m = g ? matcher(g) : NULL;
    if (!m)
        return;
    k3_gram_mask(m, -1, mask, &e);
    CHECK(!bit(mask, ID_OPEN) && bit(mask, 256 + 10) && bit(mask, '<'), "text, not special");
    k3_gram_free(g);
    k3_gram_matcher_free(m);
    /* an unknown token name is refused when the matcher is made */
    g = gbnf("root ::= <|nope|>");
    if (g) {
        uint32_t end = ID_END;
        CHECK(k3_gram_matcher_new(&m, g, vocab, &end, 1, &e) == K3_EINPUT &&
                  strstr(e.msg, "<|nope|>"),
              "unknown token: %s", e.msg);
    }
    k3_gram_free(g);
}

/* The end budget: with b ids left, a walk that always takes the allowed id
 * that is longest (the worst for finishing) still ends within b, and the
 * output is complete. */
static void test_budget(void)
{
    const char *gr =
        "root ::= \"{\" (\"\\\"a\\\"\" \": \" val (\", \" \"\\\"a\\\"\" \": \" val)*)? \"}\"\n"
        "val ::= \"true\" | \"null\" | [0-9]+ | \"[\" val \"]\" | \"\\\"\" [^\"]* \"\\\"\"";
    k3_grammar *g = gbnf(gr);
    if (!g)
        return;
    for (int budget = 3; budget <= 40; budget += 3) {
        for (unsigned seed = 1; seed <= 3; seed++) {
            k3_gram_matcher *m = matcher(g);
            if (!m)
                break;
            srand(seed);
            uint32_t mask[(NV + 31) / 32];
            int used = 0;
            k3_err e = { 0, "" };
            while (!k3_gram_is_done(m) && used < budget) {
                CHECK(k3_gram_mask(m, budget - used, mask, &e) == K3_OK, "mask: %s", e.msg);
                uint32_t ids[NV];
                int n = 0;
                for (uint32_t id = 0; id < NV; id++)
                    if (bit(mask, id) && id != ID_END)
                        ids[n++] = id;
                uint32_t id = n && (rand() % 8 || !bit(mask, ID_END)) ? ids[rand() % n] : ID_END;
                if (!n && !bit(mask, ID_END))
                    break;
                CHECK(k3_gram_accept(m, id, &e) == K3_OK, "accept: %s", e.msg);
                used++;
            }
            CHECK(k3_gram_is_done(m), "budget %d seed %u: not complete after %d ids", budget, seed,
                  used);
            k3_gram_matcher_free(m);
        }
    }
    k3_gram_free(g);
}

static void test_hostile(void)
{
    /* exponential ambiguity is bounded by K3_GRAM_MAX_STACKS */
    const char *amb = "root ::= x*\nx ::= \"a\" | \"a\" | \"aa\" | y\ny ::= \"a\" | \"a\" \"a\"";
    k3_grammar *g = gbnf(amb);
    k3_gram_matcher *m = g ? matcher(g) : NULL;
    if (m) {
        k3_err e = { 0, "" };
        int rc = K3_OK;
        clock_t t0 = clock();
        for (int i = 0; i < 64 && rc == K3_OK; i++)
            rc = k3_gram_accept(m, 'a', &e);
        CHECK(rc == K3_OK || (rc == K3_EINPUT && strstr(e.msg, "K3_GRAM_MAX_STACKS")), "%s", e.msg);
        CHECK((double)(clock() - t0) / CLOCKS_PER_SEC < 5, "ambiguity took too long");
        k3_gram_matcher_free(m);
    }
    k3_gram_free(g);
    /* deep recursion: nesting past K3_GRAM_MAX_DEPTH is cut, not a crash */
    g = gbnf("root ::= \"[\" root \"]\" | \"x\"");
    m = g ? matcher(g) : NULL;
    if (m) {
        k3_err e = { 0, "" };
        int rc = K3_OK, i = 0;
        for (; i < K3_GRAM_MAX_DEPTH + 10 && rc == K3_OK; i++)
            rc = k3_gram_accept(m, '[', &e);
        CHECK(rc == K3_EINPUT && i <= K3_GRAM_MAX_DEPTH + 1, "depth cut at %d: %s", i, e.msg);
        k3_gram_matcher_free(m);
    }
    k3_gram_free(g);
}

/* Feeds a reply written with markers: \x01 <|open|>, \x02 <|close|>,
 * \x03 <|sep|>, \x04 the end id; other bytes as single-byte ids.
 * Returns whether every id was accepted and the matcher is done. */
static int feed(k3_gram_matcher *m, const char *s)
{
    k3_err e = { 0, "" };
    for (; *s; s++) {
        uint32_t id = *s == 1   ? ID_OPEN
                      : *s == 2 ? ID_CLOSE
                      : *s == 3 ? ID_SEP
                      : *s == 4 ? ID_END
                                : (unsigned char)*s;
        if (k3_gram_accept(m, id, &e))
            return 0;
    }
    return k3_gram_is_done(m);
}

/* The chat reply builder against the release's own rendering of a tool
 * call (chat_vectors.json "tools-and-call"). */
static void test_reply(void)
{
    static const char params[] =
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
        "\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":\"boolean\"}},"
        "\"required\":[\"city\"]}";
    static const char call[] = "need tool\2think\3\1response\3\2response\3\1tools\3"
                               "\1call tool=\"get_weather\" index=\"1\"\3"
                               "\1argument key=\"city\" type=\"string\"\3Paris\2argument\3"
                               "\1argument key=\"days\" type=\"number\"\3"
                               "2\2argument\3"
                               "\1argument key=\"metric\" type=\"boolean\"\3true\2argument\3"
                               "\2call\3\2tools\3\2message\3\4";
    char err[128];
    k3_json_doc *doc = k3_json_parse(params, strlen(params), err, sizeof err);
    CHECK(doc != NULL, "%s", err);
    if (!doc)
        return;
    k3_gram_tool tool = { "get_weather", k3_json_root(doc) };
    static const struct {
        int mode, thinking, content;
        const char *reply;
        int ok;
    } cases[] = {
        { K3_GRAM_TOOLS_REQUIRED, 1, K3_GRAM_CONTENT_FREE, call, 1 },
        { K3_GRAM_TOOLS_AUTO, 1, K3_GRAM_CONTENT_FREE, call, 1 },
        { K3_GRAM_TOOLS_NAMED, 1, K3_GRAM_CONTENT_FREE, call, 1 },
        { K3_GRAM_TOOLS_NONE, 1, K3_GRAM_CONTENT_FREE, call, 0 },
        { K3_GRAM_TOOLS_AUTO, 1, K3_GRAM_CONTENT_FREE,
          "hm\2think\3\1response\3Hello!\2response\3\2message\3\4", 1 },
        { K3_GRAM_TOOLS_REQUIRED, 1, K3_GRAM_CONTENT_FREE,
          "hm\2think\3\1response\3Hello!\2response\3\2message\3\4", 0 },
        { K3_GRAM_TOOLS_NONE, 0, K3_GRAM_CONTENT_JSON_OBJECT,
          "{\"a\": [1, 2]}\2response\3\2message\3\4", 1 },
        { K3_GRAM_TOOLS_NONE, 0, K3_GRAM_CONTENT_JSON_OBJECT,
          "{\"a\":[1,2]}\2response\3\2message\3\4", 0 },
        /* a required argument missing; a wrong type; an undeclared tool */
        { K3_GRAM_TOOLS_REQUIRED, 0, K3_GRAM_CONTENT_FREE,
          "\2response\3\1tools\3\1call tool=\"get_weather\" index=\"1\"\3\2call\3"
          "\2tools\3\2message\3\4",
          0 },
        { K3_GRAM_TOOLS_REQUIRED, 0, K3_GRAM_CONTENT_FREE,
          "\2response\3\1tools\3\1call tool=\"get_weather\" index=\"1\"\3"
          "\1argument key=\"city\" type=\"number\"\3"
          "1\2argument\3\2call\3"
          "\2tools\3\2message\3\4",
          0 },
        { K3_GRAM_TOOLS_REQUIRED, 0, K3_GRAM_CONTENT_FREE,
          "\2response\3\1tools\3\1call tool=\"other\" index=\"1\"\3\2call\3"
          "\2tools\3\2message\3\4",
          0 },
        /* two calls, indexed 1 and 2 */
        { K3_GRAM_TOOLS_REQUIRED, 0, K3_GRAM_CONTENT_FREE,
          "\2response\3\1tools\3\1call tool=\"get_weather\" index=\"1\"\3"
          "\1argument key=\"city\" type=\"string\"\3a\"b&\2argument\3\2call\3"
          "\1call tool=\"get_weather\" index=\"2\"\3"
          "\1argument key=\"city\" type=\"string\"\3x\2argument\3\2call\3"
          "\2tools\3\2message\3\4",
          1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        k3_gram_reply_spec sp;
        memset(&sp, 0, sizeof sp);
        sp.thinking = cases[i].thinking;
        sp.content = cases[i].content;
        sp.tools = &tool;
        sp.ntools = 1;
        sp.tool_mode = cases[i].mode;
        sp.tool_name = "get_weather";
        sp.schema.strict = 1;
        k3_grammar *g = NULL;
        k3_err e = { 0, "" };
        CHECK(k3_gram_chat_reply(&g, &sp, NULL, &e) == K3_OK, "case %zu: %s", i, e.msg);
        k3_gram_matcher *m = g ? matcher(g) : NULL;
        if (m) {
            CHECK(feed(m, cases[i].reply) == cases[i].ok, "case %zu: expected %s", i,
                  cases[i].ok ? "accepted" : "refused");
            /* masks equal brute force along the way, and the end budget
             * completes the reply */
            char name[32];
            snprintf(name, sizeof name, "reply case %zu", i);
            walk_grammar(g, name, (unsigned)i + 1, 30);
        }
        k3_gram_matcher_free(m);
        k3_gram_free(g);
    }
    /* the end budget with thinking and a required call: free reasoning
     * must close in time; a uniform walk ends complete within every
     * budget from k3_gram_min_ids up */
    k3_gram_reply_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.thinking = 1;
    sp.tools = &tool;
    sp.ntools = 1;
    sp.tool_mode = K3_GRAM_TOOLS_REQUIRED;
    k3_grammar *g = NULL;
    k3_err e = { 0, "" };
    CHECK(k3_gram_chat_reply(&g, &sp, NULL, &e) == K3_OK, "%s", e.msg);
    int least = 0;
    if (g) {
        k3_gram_matcher *m0 = matcher(g);
        least = m0 ? (int)k3_gram_min_ids(m0) : 0;
        k3_gram_matcher_free(m0);
    }
    for (int budget = least; g && least && budget <= least + 60; budget++) {
        for (unsigned seed = 1; seed <= 4; seed++) {
            k3_gram_matcher *m = matcher(g);
            srand(seed);
            uint32_t mask[(NV + 31) / 32];
            int used = 0;
            while (m && !k3_gram_is_done(m) && used < budget) {
                k3_gram_mask(m, budget - used, mask, &e);
                uint32_t ids[NV];
                int n = 0;
                for (uint32_t id = 0; id < NV; id++)
                    if (bit(mask, id))
                        ids[n++] = id;
                if (!n || k3_gram_accept(m, ids[rand() % n], &e))
                    break;
                used++;
                CHECK(k3_gram_is_done(m) || (int)k3_gram_min_ids(m) <= budget - used,
                      "budget %d seed %u: %zu ids needed, %d left", budget, seed,
                      k3_gram_min_ids(m), budget - used);
            }
            CHECK(m && k3_gram_is_done(m), "reply, budget %d seed %u: not complete", budget, seed);
            k3_gram_matcher_free(m);
        }
    }
    CHECK(least > 0 && least < 150, "the reply's least budget %d", least);
    k3_gram_free(g);
    k3_json_free(doc);
}

typedef char id_open_is_295[ID_OPEN == 295 ? 1 : -1];

/* Hostile schemas: refused or bounded, in bounded time. */
static void test_hostile_schemas(void)
{
    size_t cap = 4u << 20;
    char *s = malloc(cap);
    clock_t t0 = clock();
    /* a 100,000-value enum: compiled as a trie; refused if past the limits */
    size_t n = (size_t)snprintf(s, cap, "{\"enum\":[");
    for (int i = 0; i < 100000; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"v%d\"", i ? "," : "", i * 7919 % 1000003);
    n += (size_t)snprintf(s + n, cap - n, "]}");
    k3_grammar *g = NULL;
    k3_err e = { 0, "" };
    int rc = k3_gram_from_schema(&g, s, n, NULL, NULL, &e);
    CHECK(rc == K3_OK || (rc == K3_EINPUT && strstr(e.msg, "K3_GRAM_MAX")), "huge enum: %s", e.msg);
    if (g) {
        CHECK(matches(g, "\"v7919\"", 7) && !matches(g, "\"v7918\"", 7), "huge enum members");
        k3_gram_free(g);
    }
    /* anyOf nested 40 deep, two branches each: linear, not exponential */
    n = 0;
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(s + n, cap - n, "{\"anyOf\":[{\"type\":\"integer\"},");
    n += (size_t)snprintf(s + n, cap - n, "{\"type\":\"string\"}");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(s + n, cap - n, "]}");
    g = NULL;
    e.code = 0;
    rc = k3_gram_from_schema(&g, s, n, NULL, NULL, &e);
    CHECK(rc == K3_OK, "nested anyOf: %s", e.msg);
    if (g) {
        CHECK(matches(g, "12", 2) && matches(g, "\"x\"", 3) && !matches(g, "x", 1), "anyOf");
        walk_grammar(g, "nested anyOf", 1, 10);
        k3_gram_free(g);
    }
    /* nesting past K3_GRAM_MAX_NEST: refused */
    n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(s + n, cap - n, "{\"type\":\"array\",\"items\":");
    n += (size_t)snprintf(s + n, cap - n, "true");
    for (int i = 0; i < 300; i++)
        s[n++] = '}';
    g = NULL;
    e.code = 0;
    rc = k3_gram_from_schema(&g, s, n, NULL, NULL, &e);
    CHECK(rc == K3_EINPUT && strstr(e.msg, "K3_GRAM_MAX_NEST"), "deep schema: %s", e.msg);
    k3_gram_free(g);
    /* a $ref cycle that never consumes input: refused as left recursion */
    const char *cyc = "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":"
                      "\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}";
    g = NULL;
    e.code = 0;
    rc = k3_gram_from_schema(&g, cyc, strlen(cyc), NULL, NULL, &e);
    CHECK(rc == K3_EINPUT, "ref cycle: rc %d %s", rc, e.msg);
    k3_gram_free(g);
    /* a recursive schema that does consume: fine */
    const char *rec = "{\"$defs\":{\"t\":{\"type\":\"array\",\"items\":{\"$ref\":"
                      "\"#/$defs/t\"}}},\"$ref\":\"#/$defs/t\"}";
    g = NULL;
    e.code = 0;
    CHECK(k3_gram_from_schema(&g, rec, strlen(rec), NULL, NULL, &e) == K3_OK, "%s", e.msg);
    if (g) {
        CHECK(matches(g, "[[], [[]]]", 10) && !matches(g, "[[]", 3), "recursive arrays");
        k3_gram_free(g);
    }
    /* strict: an unsupported keyword names its pointer */
    const char *pp = "{\"type\":\"object\",\"properties\":{\"a\":{\"patternProperties\":{}}}}";
    g = NULL;
    e.code = 0;
    k3_gram_schema_opts strict = { 1, K3_GRAM_WS_SPACED };
    CHECK(k3_gram_from_schema(&g, pp, strlen(pp), &strict, NULL, &e) == K3_EINPUT &&
              strstr(e.msg, "'patternProperties' at /properties/a/patternProperties"),
          "%s", e.msg);
    k3_buf warn = { 0 };
    e.code = 0;
    CHECK(k3_gram_from_schema(&g, pp, strlen(pp), NULL, &warn, &e) == K3_OK && warn.len &&
              strstr(warn.data, "/properties/a/patternProperties"),
          "warning: %s", e.msg);
    k3_buf_free(&warn);
    k3_gram_free(g);
    /* a length or item bound past K3_GRAM_MAX_REPEAT: strict refuses it; not
     * strict drops it with a warning (agents' tool schemas carry such
     * bounds: Claude Code's script parameter) and the string stays a string */
    static const char *const big[] = {
        "{\"type\":\"string\",\"maxLength\":100000}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":100000}",
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        g = NULL;
        e.code = 0;
        CHECK(k3_gram_from_schema(&g, big[i], strlen(big[i]), &strict, NULL, &e) == K3_EINPUT,
              "strict %s", big[i]);
        k3_gram_free(g);
        g = NULL;
        k3_buf w = { 0 };
        e.code = 0;
        CHECK(k3_gram_from_schema(&g, big[i], strlen(big[i]), NULL, &w, &e) == K3_OK && w.len &&
                  strstr(w.data, i ? "'maxItems'" : "'maxLength'"),
              "not strict %s: %s", big[i], e.msg);
        if (g)
            CHECK(i ? matches(g, "[1, 2]", 6) && !matches(g, "[\"a\"]", 5)
                    : matches(g, "\"abc\"", 5) && !matches(g, "3", 1),
                  "an unbounded %s", i ? "array" : "string");
        k3_buf_free(&w);
        k3_gram_free(g);
    }
    /* integer ranges are exact: every integer in and around the range */
    static const struct {
        const char *schema;
        long lo, hi;
    } ranges[] = {
        { "{\"type\":\"integer\",\"minimum\":-57,\"maximum\":1234}", -57, 1234 },
        { "{\"type\":\"integer\",\"exclusiveMinimum\":99,\"exclusiveMaximum\":1000}", 100, 999 },
        { "{\"type\":\"integer\",\"minimum\":7}", 7, 100000 },
        { "{\"type\":\"integer\",\"maximum\":-3}", -100000, -3 },
        { "{\"type\":\"integer\",\"minimum\":0,\"maximum\":0}", 0, 0 },
    };
    for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++) {
        g = NULL;
        e.code = 0;
        CHECK(k3_gram_from_schema(&g, ranges[k].schema, strlen(ranges[k].schema), NULL, NULL, &e) ==
                  K3_OK,
              "%s: %s", ranges[k].schema, e.msg);
        int wrong = 0;
        for (long i = -1500; g && i <= 1500 && wrong < 3; i++) {
            char num[24];
            int len = snprintf(num, sizeof num, "%ld", i);
            int want = i >= ranges[k].lo && i <= ranges[k].hi;
            if (matches(g, num, (size_t)len) != want) {
                CHECK(0, "%s: %ld %s", ranges[k].schema, i, want ? "refused" : "accepted");
                wrong++;
            }
        }
        if (g)
            CHECK(!matches(g, "007", 3) && !matches(g, "-0", 2) && !matches(g, "1.0", 3),
                  "%s: leading zeros, -0, fractions", ranges[k].schema);
        k3_gram_free(g);
    }
    /* the whitespace policy: spaced or compact, nothing else */
    k3_grammar *sp = NULL, *cp = NULL;
    e.code = 0;
    CHECK(k3_gram_json_object(&sp, K3_GRAM_WS_SPACED, &e) == K3_OK &&
              k3_gram_json_object(&cp, K3_GRAM_WS_COMPACT, &e) == K3_OK,
          "%s", e.msg);
    if (sp && cp) {
        static const char a[] = "{\"a\": [1, {\"b\": null}], \"c\": \"x\"}";
        static const char b[] = "{\"a\":[1,{\"b\":null}],\"c\":\"x\"}";
        static const char c[] = "{ \"a\": 1}";
        CHECK(matches(sp, a, strlen(a)) && !matches(sp, b, strlen(b)) &&
                  matches(cp, b, strlen(b)) && !matches(cp, a, strlen(a)) &&
                  !matches(sp, c, strlen(c)) && !matches(cp, c, strlen(c)) && !matches(sp, "[]", 2),
              "whitespace policy");
    }
    k3_gram_free(sp);
    k3_gram_free(cp);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(secs < 10, "hostile schemas took %.1f s", secs);
    free(s);
}

int main(void)
{
    make_vocab();
    if (!vocab)
        return check_report("test_grammar");
    test_parse_errors();
    test_matching();
    test_specials();
    test_masks();
    test_budget();
    test_reply();
    test_hostile();
    test_hostile_schemas();
    k3_gram_vocab_free(vocab);
    return check_report("test_grammar");
}

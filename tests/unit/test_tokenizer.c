/* test_tokenizer.c - the tokenizer's parts: UTF-8 decoding and streaming,
 * the Unicode tables, the pre-tokeniser, BPE and special tokens on small
 * vocabularies written to a temporary directory, the loader's errors, and
 * (when ../shared/k3-release is there) the release's vocabulary.
 *
 * Exactness against tiktoken over a large corpus is the job of
 * tests/gates/30-tokenizer.sh; these tests pin the rules one at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "k3/tokenizer.h"
#include "tokenizer/pretok.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

#define RELEASE "../shared/k3-release"

/* --- UTF-8 ---------------------------------------------------------------- */

static void test_utf8(void)
{
    static const struct {
        const char *s;
        size_t len;     /* 0 = invalid */
        uint32_t cp;
    } cases[] = {
        {"A", 1, 'A'}, {"\xC3\xA9", 2, 0xE9}, {"\xE4\xB8\xAD", 3, 0x4E2D},
        {"\xF0\x9F\x98\x80", 4, 0x1F600}, {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF},
        {"\xC0\x80", 0, 0}, {"\xC1\xBF", 0, 0},             /* overlong 2-byte */
        {"\xE0\x80\x80", 0, 0}, {"\xF0\x80\x80\x80", 0, 0}, /* overlong 3, 4-byte */
        {"\xED\xA0\x80", 0, 0}, {"\xED\xBF\xBF", 0, 0},     /* surrogates */
        {"\xF4\x90\x80\x80", 0, 0}, {"\xF5\x80\x80\x80", 0, 0}, /* > U+10FFFF */
        {"\x80", 0, 0}, {"\xBF", 0, 0}, {"\xFF", 0, 0},     /* stray bytes */
        {"\xC3", 0, 0}, {"\xE4\xB8", 0, 0}, {"\xC3\x41", 0, 0}, /* truncated */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t cp = 0;
        size_t n = strlen(cases[i].s);
        size_t got = k3_utf8_decode((const unsigned char *)cases[i].s, n, &cp);
        CHECK(got == cases[i].len && (got == 0 || cp == cases[i].cp),
              "utf8 case %zu: len %zu cp %X", i, got, cp);
    }
}

/* Pushes s one chunk at a time (chunk sizes from sizes[], cycling) and
 * checks that every write ends on a character boundary of s and that the
 * writes add up to s. */
static void stream_case(const char *s, const size_t *sizes, size_t nsizes)
{
    k3_utf8_stream st = {{0}, 0};
    unsigned char out[64], all[256];
    size_t n = strlen(s), at = 0, total = 0, k = 0;
    while (at < n) {
        size_t step = sizes[k++ % nsizes];
        if (step > n - at)
            step = n - at;
        size_t w = k3_utf8_stream_push(&st, (const unsigned char *)s + at, step, out);
        memcpy(all + total, out, w);
        total += w;
        at += step;
        /* A valid text is only ever cut between characters. */
        CHECK(total == 0 || total == n || (((unsigned char)s[total] & 0xC0) != 0x80),
              "stream of \"%s\" split a character at %zu", s, total);
    }
    total += k3_utf8_stream_flush(&st, all + total);
    CHECK(total == n && memcmp(all, s, n) == 0, "stream of \"%s\" lost bytes", s);
}

static void test_utf8_stream(void)
{
    static const size_t ones[] = {1}, twos[] = {2}, mixed[] = {3, 1, 2, 5};
    const char *texts[] = {"h\xC3\xA9llo", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80x",
                           "\xE4\xB8\xAD\xE6\x96\x87", "abc"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        stream_case(texts[i], ones, 1);
        stream_case(texts[i], twos, 1);
        stream_case(texts[i], mixed, 4);
    }
    /* Held bytes; flush gives back an incomplete tail as-is; bytes that are
     * not UTF-8 pass straight through. */
    k3_utf8_stream st = {{0}, 0};
    unsigned char out[16];
    CHECK(k3_utf8_stream_push(&st, (const unsigned char *)"a\xF0\x9F", 3, out) == 1 &&
              st.nheld == 2,
          "holds an incomplete 4-byte character");
    CHECK(k3_utf8_stream_flush(&st, out) == 2 && out[0] == 0xF0 && st.nheld == 0, "flush");
    CHECK(k3_utf8_stream_push(&st, (const unsigned char *)"\xFF\x80\x80", 3, out) == 3 &&
              st.nheld == 0,
          "garbage is not held");
}

/* --- Unicode tables ------------------------------------------------------- */

static void test_unicode(void)
{
    static const struct {
        uint32_t cp;
        unsigned props;
    } cases[] = {
        {'A', K3_UC_LU}, {'z', K3_UC_LL}, {0x01C5, K3_UC_LT}, {0x02B0, K3_UC_LM},
        {0x05D0, K3_UC_LO}, {0x0301, K3_UC_M}, {'5', K3_UC_N}, {0x00BD, K3_UC_N}, {0x2167, K3_UC_N},
        {0x4E2D, K3_UC_LO | K3_UC_HAN}, {0x3007, K3_UC_N | K3_UC_HAN},
        {0x3005, K3_UC_LM | K3_UC_HAN},
        {0x2E80, K3_UC_HAN}, {0x20000, K3_UC_LO | K3_UC_HAN}, {0x3400, K3_UC_LO | K3_UC_HAN},
        {0x30A2, K3_UC_LO}, {0xAC00, K3_UC_LO}, /* katakana, Hangul: not Han */
        {' ', K3_UC_WHITE_SPACE | K3_UC_PY_SPACE}, {0x3000, K3_UC_WHITE_SPACE | K3_UC_PY_SPACE},
        {0x0085, K3_UC_WHITE_SPACE | K3_UC_PY_SPACE}, {0x2028, K3_UC_WHITE_SPACE | K3_UC_PY_SPACE},
        {0x001C, K3_UC_PY_SPACE}, {0x001F, K3_UC_PY_SPACE}, /* isspace, not White_Space */
        {0xFEFF, K3_UC_OTHER}, {0x200B, K3_UC_OTHER}, {0x1F600, K3_UC_OTHER}, {'.', K3_UC_OTHER},
        {0x10FFFF, K3_UC_OTHER}, {0x110000, K3_UC_OTHER}, {0xFFFFFFFF, K3_UC_OTHER},
        {0x323AF, K3_UC_LO | K3_UC_HAN}, /* CJK Extension H, Unicode 15 */
        {0x1C89, K3_UC_LU}, /* CYRILLIC CAPITAL LETTER TJE, new in Unicode 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(k3_uc_props(cases[i].cp) == cases[i].props, "props of U+%04X: %#x, want %#x",
              cases[i].cp, k3_uc_props(cases[i].cp), cases[i].props);
    CHECK(k3_uc_fold_az('S') == 's' && k3_uc_fold_az('s') == 's' && k3_uc_fold_az(0x017F) == 's',
          "S, s and long s fold to s");
    CHECK(k3_uc_fold_az(0x212A) == 'k' && k3_uc_fold_az('L') == 'l', "Kelvin sign, L");
    CHECK(k3_uc_fold_az(0x00E9) == 0 && k3_uc_fold_az('1') == 0 && k3_uc_fold_az(0x0130) == 0,
          "no fold onto a..z");
}

/* --- Pre-tokeniser -------------------------------------------------------- */

/* Splits text and compares the pieces with want ("|"-separated). */
static void pieces_case(const char *text, const char *want)
{
    uint32_t cp[128];
    unsigned char cls[128];
    size_t off[129], n = 0, at = 0, len = strlen(text);
    while (at < len && n < 128) {
        size_t l = k3_utf8_decode((const unsigned char *)text + at, len - at, &cp[n]);
        if (l == 0)
            break;
        cls[n] = (unsigned char)k3_pretok_class(cp[n]);
        off[n++] = at;
        at += l;
    }
    off[n] = at;
    char got[512];
    size_t g = 0;
    for (size_t i = 0; i < n && g + 1 < sizeof got;) {
        size_t j = k3_pretok_next(cp, cls, i, n);
        if (i > 0)
            got[g++] = '|';
        size_t b = off[j] - off[i];
        if (g + b + 1 >= sizeof got)
            break;
        memcpy(got + g, text + off[i], b);
        g += b;
        i = j;
    }
    got[g] = '\0';
    CHECK(strcmp(got, want) == 0, "pieces of \"%s\": \"%s\", want \"%s\"", text, got, want);
}

static void test_pretok(void)
{
    pieces_case("Hello world", "Hello| world");
    pieces_case("  hello", " | hello");
    pieces_case("don't DON'T We'LL I'\xC5\xBF",
                "don't| DON'T| We'LL| I'\xC5\xBF"); /* 'ſ folds to 's */
    pieces_case("it'sx they'rer", "it's|x| they're|r");
    pieces_case("a  \n\n b", "a|  \n\n| b");
    pieces_case("abc   ", "abc|   ");      /* \s+(?!\S) at the end takes the whole run */
    pieces_case("a   b", "a|  | b");        /* elsewhere all but the last space */
    pieces_case("a \tb", "a| |\tb");        /* a single space before a non-space: \s+ */
    pieces_case("12345 6", "123|45| |6");
    pieces_case("\xE4\xB8\xAD\xE6\x96\x87" "abc", "\xE4\xB8\xAD\xE6\x96\x87|abc"); /* Han run */
    pieces_case("E\xCC\x81" "COLE", "E\xCC\x81|COLE"); /* UPPER* gives back to LOWER+ */
    pieces_case("\xCC\x81.", "\xCC\x81|.");            /* a lone mark */
    pieces_case(" ...!!\n\nx", " ...!!\n\n|x");
    pieces_case("x\x1F\x1Fy", "x|\x1F\x1F|y");         /* U+001F is not \s */
    pieces_case("a_b-c <x>", "a|_b|-c| <|x|>");
    pieces_case("HelloWORLD", "Hello|WORLD");
}

/* --- Small vocabularies in a temporary directory -------------------------- */

static char tmpdir[64];

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void remove_file(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    remove(path);
}

static void b64(const unsigned char *s, size_t n, char *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[o++] = A[v >> 18];
        out[o++] = A[(v >> 12) & 63];
        out[o++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
}

/* A tiktoken.model: the 256 bytes ranked in reverse (rank = 255 - byte), then
 * the given multi-byte tokens, ranks 256... */
static char *model_text(const char *const *merges, size_t nmerges)
{
    char *t = malloc(16384), line[128];
    t[0] = '\0';
    for (int r = 0; r < 256; r++) {
        unsigned char byte = (unsigned char)(255 - r);
        char enc[8];
        b64(&byte, 1, enc);
        snprintf(line, sizeof line, "%s %d\n", enc, r);
        strcat(t, line);
    }
    for (size_t i = 0; i < nmerges; i++) {
        char enc[64];
        b64((const unsigned char *)merges[i], strlen(merges[i]), enc);
        snprintf(line, sizeof line, "%s %zu\n", enc, 256 + i);
        strcat(t, line);
    }
    return t;
}

/* added_tokens_decoder with [BOS], [EOS] and two overlapping tokens at the
 * start of the special range (ranks = nranks). */
static void write_config(uint32_t nranks)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"added_tokens_decoder\": {"
             "\"%u\": {\"content\": \"[BOS]\", \"special\": true},"
             "\"%u\": {\"content\": \"[EOS]\", \"special\": true},"
             "\"%u\": {\"content\": \"<s>\", \"special\": true},"
             "\"%u\": {\"content\": \"<s>x\", \"special\": true}},"
             "\"tokenizer_class\": \"TikTokenTokenizer\"}",
             nranks, nranks + 1, nranks + 5, nranks + 6);
    write_file("tokenizer_config.json", cfg);
}

/* Encodes text and compares with want (comma-separated ids). */
static void encode_case(const k3_tokenizer *tok, const char *text, size_t len, int special,
                        const char *want)
{
    k3_err e = {0};
    uint32_t *ids = NULL;
    size_t n = 0;
    char got[1024];
    size_t g = 0;
    got[0] = '\0';
    if (k3_tok_encode(tok, text, len, special, &ids, &n, &e) == K3_OK)
        for (size_t i = 0; i < n && g + 12 < sizeof got; i++)
            g += (size_t)snprintf(got + g, sizeof got - g, i ? ",%u" : "%u", ids[i]);
    else
        snprintf(got, sizeof got, "error: %.200s", e.msg);
    CHECK(strcmp(got, want) == 0, "encode \"%.40s\" (special %d): %s, want %s", text, special, got,
          want);
    free(ids);
}

/* Ids of the reverse-ranked bytes. */
#define B(c) (255 - (unsigned char)(c))

static void test_small_vocab(void)
{
    /* Ranks 256.. : "aa", "bc", "ab", "xyz" (not reachable by merges). */
    const char *merges[] = {"aa", "bc", "ab", "xyz"};
    char *model = model_text(merges, 4);
    write_file("tiktoken.model", model);
    free(model);
    write_config(260);
    k3_err e = {0};
    k3_tokenizer *tok = NULL;
    CHECK(k3_tok_load(&tok, tmpdir, &e) == K3_OK, "load: %s", e.msg);
    if (!tok)
        return;
    CHECK(k3_tok_vocab_size(tok) == 260 + 256, "vocab %u", k3_tok_vocab_size(tok));
    char want[256];

    /* Whole pieces, lowest rank first, leftmost on a tie, bytes otherwise. */
    encode_case(tok, "xyz", 3, 0, "259");                   /* whole-piece rule */
    snprintf(want, sizeof want, "%d,%d,%d", B('x'), B('y'), B('w'));
    encode_case(tok, "xyw", 3, 0, want);
    snprintf(want, sizeof want, "256,%d", B('a'));
    encode_case(tok, "aaa", 3, 0, want);                    /* leftmost of equal pairs */
    snprintf(want, sizeof want, "%d,257", B('a'));
    encode_case(tok, "abc", 3, 0, want);                    /* "bc" outranks "ab" */
    snprintf(want, sizeof want, "258,%d,256", B(' '));
    encode_case(tok, "ab aa", 5, 0, want);
    encode_case(tok, "", 0, 0, "");

    /* Special tokens: text between them is encoded alone; leftmost-longest;
     * disallowed, they are plain text. */
    snprintf(want, sizeof want, "%d,261,%d", B('x'), B('y'));
    encode_case(tok, "x[EOS]y", 7, 1, want);
    encode_case(tok, "<s>x", 4, 1, "266");
    snprintf(want, sizeof want, "265,%d", B('y'));
    encode_case(tok, "<s>y", 4, 1, want);
    snprintf(want, sizeof want, "%d,%d,%d,%d,%d", B('['), B('E'), B('O'), B('S'), B(']'));
    encode_case(tok, "[EOS]", 5, 0, want);
    CHECK(k3_tok_special_id(tok, "[EOS]") == 261 &&
              k3_tok_special_id(tok, "<|reserved_token_262|>") == 262 &&
              k3_tok_special_id(tok, "[EOT]") == -1 && k3_tok_special_id(tok, "aa") == -1,
          "special ids");
    encode_case(tok, "<|reserved_token_515|>", 22, 1, "515");

    /* Decoding. */
    const unsigned char *bytes;
    size_t len;
    CHECK(k3_tok_piece(tok, 257, &bytes, &len, &e) == K3_OK && len == 2 && !memcmp(bytes, "bc", 2),
          "piece 257");
    CHECK(k3_tok_piece(tok, B('q'), &bytes, &len, &e) == K3_OK && len == 1 && bytes[0] == 'q',
          "piece of a byte");
    CHECK(k3_tok_piece(tok, 260, &bytes, &len, &e) == K3_OK && len == 5 &&
              !memcmp(bytes, "[BOS]", 5),
          "piece of a special");
    CHECK(k3_tok_piece(tok, 516, &bytes, &len, &e) == K3_EINPUT && strstr(e.msg, "516"),
          "id outside the vocabulary: %s", e.msg);

    /* Invalid UTF-8 is refused with its byte offset. */
    memset(&e, 0, sizeof e);
    uint32_t *ids = NULL;
    size_t n = 0;
    CHECK(k3_tok_encode(tok, "ab\xC3(", 4, 0, &ids, &n, &e) == K3_EINPUT &&
              strstr(e.msg, "byte offset 2") && ids == NULL,
          "invalid UTF-8: %s", e.msg);

    /* The 25,000-character run rule and the 400,000-character chunks:
     * each piece is encoded as if alone (a run of 25,001 letters is not one
     * piece; "a " pairs end a chunk with a trailing space piece). */
    memset(&e, 0, sizeof e);
    size_t big = 400002;
    char *text = malloc(big + 1);
    memset(text, 'a', 25001);
    uint32_t *whole = NULL, *part = NULL;
    size_t nwhole = 0, npart = 0;
    k3_tok_encode(tok, text, 25001, 0, &whole, &nwhole, &e);
    k3_tok_encode(tok, text, 25000, 0, &part, &npart, &e);
    CHECK(e.code == K3_OK && nwhole == npart + 1 && !memcmp(whole, part, npart * sizeof *part) &&
              whole[npart] == B('a'),
          "run of 25,001 letters = 25,000 + 1");
    free(whole);
    free(part);
    for (size_t i = 0; i < big; i += 2)
        memcpy(text + i, "a ", 2);
    uint32_t *tail = NULL;
    size_t ntail = 0;
    k3_tok_encode(tok, text, big, 0, &whole, &nwhole, &e);
    k3_tok_encode(tok, text, 400000, 0, &part, &npart, &e);
    k3_tok_encode(tok, text + 400000, 2, 0, &tail, &ntail, &e);
    CHECK(e.code == K3_OK && nwhole == npart + ntail &&
              !memcmp(whole, part, npart * sizeof *part) &&
              !memcmp(whole + npart, tail, ntail * sizeof *tail),
          "400,002 characters = 400,000 + 2");
    free(whole);
    free(part);
    free(tail);
    free(text);
    k3_tok_free(tok);
}

/* Loads the directory expecting failure with code and a message holding
 * each of the needles. */
static void load_fails(const char *what, int code, const char *needle1, const char *needle2)
{
    k3_err e = {0};
    k3_tokenizer *tok = (k3_tokenizer *)&e; /* must be reset to NULL */
    int rc = k3_tok_load(&tok, tmpdir, &e);
    CHECK(rc == code && (rc == K3_OK) == (tok != NULL) && strstr(e.msg, needle1) &&
              (!needle2 || strstr(e.msg, needle2)),
          "%s: rc %d, message \"%s\"", what, rc, e.msg);
    if (rc == K3_OK)
        k3_tok_free(tok);
}

/* Writes the 256-byte model with one line replaced (line is 1-based; NULL
 * text drops it) or extra lines appended. */
static void write_model_edit(size_t line, const char *text, const char *append)
{
    char *m = model_text(NULL, 0), *out = malloc(strlen(m) + 256);
    size_t o = 0, l = 1;
    for (char *p = m; *p; l++) {
        char *nl = strchr(p, '\n');
        if (l == line) {
            if (text)
                o += (size_t)sprintf(out + o, "%s\n", text);
        } else {
            memcpy(out + o, p, (size_t)(nl - p + 1));
            o += (size_t)(nl - p + 1);
        }
        p = nl + 1;
    }
    out[o] = '\0';
    if (append)
        strcat(out, append);
    write_file("tiktoken.model", out);
    free(m);
    free(out);
}

static void test_load_errors(void)
{
    write_config(256);
    write_model_edit(3, "/Q==", NULL); /* no rank */
    load_fails("no rank", K3_EINPUT, "tiktoken.model:3:", "malformed");
    write_model_edit(3, "/Q== x", NULL);
    load_fails("rank not a number", K3_EINPUT, ":3:", "rank");
    write_model_edit(3, "/R== 2", NULL); /* non-canonical base64 of 0xFD */
    load_fails("non-canonical base64", K3_EINPUT, ":3:", "base64");
    write_model_edit(3, "*** 2", NULL);
    load_fails("not base64", K3_EINPUT, ":3:", "base64");
    write_model_edit(3, "", NULL);
    load_fails("empty line", K3_EINPUT, ":3:", "malformed");
    write_model_edit(0, NULL, "YWI= 5\n"); /* rank 5 given twice */
    load_fails("duplicate rank", K3_EINPUT, ":257:", "duplicate rank 5");
    write_config(257);
    write_model_edit(0, NULL, "/w== 256\n"); /* the bytes of rank 0 again */
    load_fails("duplicate bytes", K3_EINPUT, ":257:", "line 1");
    write_model_edit(0, NULL, "YWI= 300\n");
    load_fails("rank beyond the line count", K3_EINPUT, ":257:", "rank 300");
    write_config(256);
    write_model_edit(256, "YWI= 255", NULL); /* byte 0x00 missing */
    load_fails("missing single byte", K3_EINPUT, "0x00", NULL);
    write_file("tiktoken.model", "");
    load_fails("empty model", K3_EINPUT, "empty", NULL);
    write_model_edit(0, NULL, NULL);

    /* The model loads without a final newline too. */
    char *m = model_text(NULL, 0);
    m[strlen(m) - 1] = '\0';
    write_file("tiktoken.model", m);
    free(m);
    load_fails("no final newline", K3_OK, "", NULL);

    write_file("tokenizer_config.json",
               "{\"added_tokens_decoder\": {\"600\": {\"content\": \"x\"}}}");
    load_fails("id outside the special range", K3_EINPUT, "600", "special range");
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {\"256\": {\"content\": 5}}}");
    load_fails("content not a string", K3_EINPUT, "256", "content");
    write_file("tokenizer_config.json",
               "{\"added_tokens_decoder\": {\"256x\": {\"content\": \"a\"}}}");
    load_fails("key not an id", K3_EINPUT, "256x", NULL);
    write_file(
        "tokenizer_config.json",
        "{\"added_tokens_decoder\": {\"256\": {\"content\": \"a\"}, \"0257\": {\"content\": \"b\"},"
        " \"257\": {\"content\": \"c\"}}}");
    load_fails("id given twice", K3_EINPUT, "257", "twice");
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {\"256\": {\"content\": "
                                        "\"a\"}, \"257\": {\"content\": \"a\"}}}");
    load_fails("duplicate special text", K3_EINPUT, "\"a\"", NULL);
    write_file("tokenizer_config.json",
               "{\"added_tokens_decoder\": {\"256\": {\"content\": \"<|reserved_token_300|>\"}}}");
    load_fails("a name taken by a reserved id", K3_EINPUT, "reserved_token_300", NULL);
    write_file("tokenizer_config.json", "{\"bos_token\": \"[BOS]\"}");
    load_fails("no added_tokens_decoder", K3_EINPUT, "added_tokens_decoder", NULL);
    write_file("tokenizer_config.json", "{\"added_tokens_decoder\": {},}");
    load_fails("bad JSON", K3_EINPUT, "tokenizer_config.json", "byte");
    remove_file("tokenizer_config.json");
    load_fails("missing tokenizer_config.json", K3_EINPUT, "tokenizer_config.json", NULL);
    write_config(256);
    remove_file("tiktoken.model");
    load_fails("missing tiktoken.model", K3_EINPUT, "tiktoken.model", NULL);
    remove_file("tokenizer_config.json");
}

/* --- The release ---------------------------------------------------------- */

static void test_release(void)
{
    if (access(RELEASE "/tiktoken.model", R_OK) != 0) {
        printf("test_tokenizer: %s not found, release checks skipped\n", RELEASE);
        return;
    }
    k3_err e = {0};
    k3_tokenizer *tok = NULL;
    CHECK(k3_tok_load(&tok, RELEASE, &e) == K3_OK, "release: %s", e.msg);
    if (!tok)
        return;
    CHECK(k3_tok_vocab_size(tok) == 163840, "release vocab %u", k3_tok_vocab_size(tok));
    const char *capital = "The capital of France is";
    encode_case(tok, capital, strlen(capital), 0, "1008,10484,318,15383,387");
    encode_case(tok, "<|end_of_msg|> hi", 17, 1, "163586,20910");
    encode_case(tok, "<|end_of_msg|> hi", 17, 0, "27,91,517,5118,14222,91,29,20910");
    CHECK(k3_tok_special_id(tok, "[BOS]") == 163584 && k3_tok_special_id(tok, "[EOS]") == 163585 &&
              k3_tok_special_id(tok, "<|end_of_msg|>") == 163586 &&
              k3_tok_special_id(tok, "<|open|>") == 163587 &&
              k3_tok_special_id(tok, "<|sep|>") == 163589 &&
              k3_tok_special_id(tok, "<|reserved_token_163592|>") == 163592 &&
              k3_tok_special_id(tok, "[PAD]") == 163839,
          "release special ids");
    const unsigned char *b;
    size_t len;
    CHECK(k3_tok_piece(tok, 10484, &b, &len, &e) == K3_OK && len == 8 && !memcmp(b, " capital", 8),
          "release piece 10484");
    k3_tok_free(tok);
}

int main(void)
{
    test_utf8();
    test_utf8_stream();
    test_unicode();
    test_pretok();

    strcpy(tmpdir, "/tmp/k3-test-tokenizer-XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL, "mkdtemp");
    test_small_vocab();
    test_load_errors();
    rmdir(tmpdir);

    test_release();
    return check_report("test_tokenizer");
}

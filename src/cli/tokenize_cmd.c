/* tokenize_cmd.c - see tokenize_cmd.h. */
#include "cli/tokenize_cmd.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "util/error.h"
#include "util/os.h"
#include "util/file.h"
#include "util/json.h"

/* One line of comma-separated ids. Formatted by hand into a buffer: a
 * corpus run prints millions of ids. */
static int print_ids(const uint32_t *ids, size_t n, FILE *out, k3_err *e)
{
    char buf[4096];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        char digits[10];
        int nd = 0;
        uint32_t v = ids[i];
        do {
            digits[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (used + 12 > sizeof buf) {
            fwrite(buf, 1, used, out);
            used = 0;
        }
        if (i > 0)
            buf[used++] = ',';
        while (nd > 0)
            buf[used++] = digits[--nd];
    }
    buf[used++] = '\n';
    fwrite(buf, 1, used, out);
    if (ferror(out))
        return k3_fail(e, K3_ERUNTIME, "writing token ids: %s", strerror(errno));
    return K3_OK;
}

int k3_cmd_tokenize(const k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                    FILE *out, k3_err *e)
{
    uint32_t *ids;
    size_t n;
    if (k3_tok_encode(tok, text, len, allow_special, &ids, &n, e))
        return e->code;
    int rc = print_ids(ids, n, out, e);
    free(ids);
    return rc;
}

int k3_cmd_detokenize(const k3_tokenizer *tok, const char *ids_csv, FILE *out, k3_err *e)
{
    if (*ids_csv == '\0')
        return K3_OK;
    uint32_t *ids;
    size_t n;
    if (k3_parse_ids(ids_csv, &ids, &n, e))
        return e->code;
    /* Every id is checked before anything is written: no partial text. */
    const unsigned char *b;
    size_t len;
    for (size_t i = 0; i < n && e->code == K3_OK; i++)
        k3_tok_piece(tok, ids[i], &b, &len, e);
    for (size_t i = 0; i < n && e->code == K3_OK; i++) {
        k3_tok_piece(tok, ids[i], &b, &len, e);
        fwrite(b, 1, len, out);
    }
    free(ids);
    if (e->code == K3_OK && ferror(out))
        k3_fail(e, K3_ERUNTIME, "writing text: %s", strerror(errno));
    return e->code;
}

/* Whether ids decode to exactly text[0..len). */
static int round_trips(const k3_tokenizer *tok, const uint32_t *ids, size_t n, const char *text,
                       size_t len, k3_err *e)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b;
        size_t bl;
        if (k3_tok_piece(tok, ids[i], &b, &bl, e) || bl > len - at ||
            memcmp(text + at, b, bl) != 0)
            return 0;
        at += bl;
    }
    return at == len;
}

/* Encodes, prints and checks the JSON string on one line of the corpus. */
static int jsonl_case(const k3_tokenizer *tok, const char *path, size_t lineno,
                      const char *line, size_t len, int allow_special, FILE *out, k3_err *e)
{
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(line, len, jerr, sizeof jerr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s:%zu: %s", path, lineno, jerr);
    const k3_json *s = k3_json_root(doc);
    uint32_t *ids = NULL;
    size_t n = 0;
    if (s->type != K3J_STRING)
        k3_fail(e, K3_EINPUT, "%s:%zu: not a JSON string", path, lineno);
    else if (k3_tok_encode(tok, s->str, s->len, allow_special, &ids, &n, e) == K3_OK &&
             print_ids(ids, n, out, e) == K3_OK &&
             !round_trips(tok, ids, n, s->str, s->len, e))
        k3_fail(e, K3_ERUNTIME, "%s:%zu: the ids do not decode back to the text", path, lineno);
    free(ids);
    k3_json_free(doc);
    return e->code;
}

int k3_cmd_tokenize_jsonl(const k3_tokenizer *tok, const char *path, int allow_special,
                          FILE *out, k3_err *e)
{
    FILE *f = k3_fopen_input(path, e);
    if (!f)
        return e->code;
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int64_t got;
    while (e->code == K3_OK && (got = k3_os_getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        jsonl_case(tok, path, lineno, line, len, allow_special, out, e);
    }
    if (e->code == K3_OK && ferror(f))
        k3_fail(e, K3_ERUNTIME, "%s: read error: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return e->code;
}

/* jtext.c - see jtext.h. */
#include "chat/jtext.h"

#include <string.h>

#include "tokenizer/utf8.h"
#include "util/json.h"

/* Bytes of s[0..n) before the first that starts no valid character. */
static size_t valid_prefix(const char *s, size_t n)
{
    size_t i = 0, l;
    uint32_t cp;
    while (i < n && (l = k3_utf8_decode((const unsigned char *)s + i, n - i, &cp)) != 0)
        i += l;
    return i;
}

int k3_jtext_clean(const char *s, size_t n, k3_buf *out, k3_err *e)
{
    for (size_t i = 0; i < n;) {
        size_t run = valid_prefix(s + i, n - i);
        if (k3_buf_put(out, s + i, run, e))
            return e->code;
        i += run;
        if (i < n) {
            if (k3_buf_put(out, "\xEF\xBF\xBD", 3, e))
                return e->code;
            i++;
        }
    }
    return K3_OK;
}

int k3_jtext_put(k3_buf *b, const char *s, size_t n, k3_err *e)
{
    k3_buf clean = { 0 };
    k3_json v;
    memset(&v, 0, sizeof v);
    v.type = K3J_STRING;
    v.str = s;
    v.len = n;
    if (valid_prefix(s, n) < n) {
        if (k3_jtext_clean(s, n, &clean, e) == K3_OK) {
            v.str = clean.data;
            v.len = clean.len;
        }
    }
    if (!e->code)
        k3_json_write(b, &v, 0, e);
    k3_buf_free(&clean);
    return e->code;
}

int k3_jtext_key(k3_buf *b, int first, const char *key, k3_err *e)
{
    if ((!first && k3_buf_put(b, ",", 1, e)) || k3_jtext_put(b, key, strlen(key), e))
        return e->code;
    return k3_buf_put(b, ":", 1, e);
}

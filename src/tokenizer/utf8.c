/* utf8.c - strict UTF-8 decoding and the streaming helper of k3/tokenizer.h. */
#include "tokenizer/utf8.h"

#include <string.h>

#include "k3/tokenizer.h"

size_t k3_utf8_seq_len(unsigned char lead)
{
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF)
        return 3;
    if (lead >= 0xF0 && lead <= 0xF4)
        return 4;
    return 0; /* continuation byte, overlong C0/C1, or beyond U+10FFFF */
}

size_t k3_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len = k3_utf8_seq_len(s[0]);
    if (len == 0 || len > n)
        return 0;
    if (len == 1) {
        *cp = s[0];
        return 1;
    }
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    /* Lead bytes already exclude 2-byte overlongs and > U+10FFFF leads
     * other than F4; these catch the rest. */
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_for_len[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

/* Streaming: a write may end inside a character; the tail that could still
 * be completed (a lead byte followed by fewer continuation bytes than it
 * announces) is held back. Everything else passes straight through, so the
 * stream never stalls on bytes that are not UTF-8. */
size_t k3_utf8_stream_push(k3_utf8_stream *s, const unsigned char *in, size_t n,
                           unsigned char *out)
{
    size_t total = s->nheld + n;
    memcpy(out, s->held, s->nheld);
    memcpy(out + s->nheld, in, n);
    s->nheld = 0;
    /* The last byte that is not a continuation byte, at most 3 back. */
    size_t back = 1;
    while (back <= 4 && back <= total && (out[total - back] & 0xC0) == 0x80)
        back++;
    if (back > 4 || back > total)
        return total; /* no lead byte to wait on */
    size_t start = total - back;
    if (k3_utf8_seq_len(out[start]) <= back)
        return total; /* complete, or a byte that starts nothing */
    memcpy(s->held, out + start, back);
    s->nheld = back;
    return start;
}

size_t k3_utf8_stream_flush(k3_utf8_stream *s, unsigned char *out)
{
    size_t n = s->nheld;
    memcpy(out, s->held, n);
    s->nheld = 0;
    return n;
}

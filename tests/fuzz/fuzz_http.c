/* fuzz_http.c - the HTTP request parser of `k3 serve`
 * (server/http.c, k3_http_parse_request) on arbitrary bytes, with small
 * limits (LIM) so that inputs of a few KB reach every limit.
 *
 * Promises checked (http.h): the answer is K3_HTTP_OK, NEED_HEAD,
 * NEED_BODY or one of the documented error statuses with a reason; the
 * same bytes give the same answer; an accepted request's method, path,
 * head and body lie inside the buffer and inside the limits, the path is
 * in origin form; and every prefix of an accepted request asks for more
 * (NEED_HEAD before the head is complete, NEED_BODY before the body is)
 * instead of failing or being accepted early; NEED_HEAD never hides a bare
 * CR or LF. */
#include <string.h>

#include "fuzz.h"
#include "server/http.h"

static const k3_http_limits LIM = { 2048, 16, 256, 4096 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int parse(const uint8_t *data, size_t len, k3_http_request *r)
{
    memset(r, 0xA5, sizeof *r); /* nothing may be left unset where promised */
    return k3_http_parse_request((const char *)data, len, r, &LIM);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_http_request r, again;
    int rc = parse(data, size, &r);
    FZ_ASSERT(parse(data, size, &again) == rc, "two answers for the same bytes");
    if (rc >= 400) {
        static const int known[] = { 400, 411, 413, 414, 417, 431, 501, 505 };
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            ok |= rc == known[i];
        FZ_ASSERT(ok && r.error && r.error[0], "status %d (%s)", rc, ok ? "no reason" : "unknown");
        FZ_ASSERT(strcmp(k3_http_reason(rc), "Error"), "status %d has no reason phrase", rc);
        return 0;
    }
    FZ_ASSERT(rc == K3_HTTP_OK || rc == K3_HTTP_NEED_HEAD || rc == K3_HTTP_NEED_BODY,
              "unknown answer %d", rc);
    const char *b = (const char *)data;
    if (rc == K3_HTTP_NEED_HEAD) {
        /* A bare CR or LF is refused as soon as it arrives. */
        for (size_t i = 0; i < size && i < LIM.max_head; i++)
            FZ_ASSERT((b[i] != '\n' || (i > 0 && b[i - 1] == '\r')) &&
                          (b[i] != '\r' || i + 1 == size || b[i + 1] == '\n'),
                      "a bare line ending at %zu still asks for more", i);
        return 0;
    }
    FZ_ASSERT(r.head_len <= size && r.head_len <= LIM.max_head && r.content_length <= LIM.max_body,
              "head %zu / body %zu beyond the buffer or the limits", r.head_len, r.content_length);
    FZ_ASSERT(r.method >= b && r.method_len > 0 && r.method + r.method_len <= b + r.head_len,
              "method outside the head");
    FZ_ASSERT(r.path >= b && r.path_len > 0 && r.path + r.path_len <= b + r.head_len &&
                  r.path[0] == '/' && r.path_len <= LIM.max_target,
              "path outside the head or not origin form");
    FZ_ASSERT(r.minor == 0 || r.minor == 1, "HTTP/1.%d", r.minor);
    FZ_ASSERT(r.has_length || r.content_length == 0, "a body without Content-Length");
    if (rc == K3_HTTP_NEED_BODY) {
        FZ_ASSERT(r.head_len + r.content_length > size, "NEED_BODY with the body here");
        return 0;
    }
    FZ_ASSERT(r.head_len + r.content_length <= size, "OK without the whole body");
    /* Prefixes ask for more; a sample of them when the request is long. */
    size_t end = r.head_len + r.content_length, step = end > 512 ? end / 256 : 1;
    for (size_t n = 0; n < end; n += step) {
        k3_http_request p;
        int prc = parse(data, n, &p);
        FZ_ASSERT(prc == (n < r.head_len ? K3_HTTP_NEED_HEAD : K3_HTTP_NEED_BODY),
                  "prefix of %zu bytes of an accepted %zu-byte request answers %d", n, end, prc);
    }
    return 0;
}

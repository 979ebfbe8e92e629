/* http.c - see http.h.
 *
 * Why a hand-written parser and not a library: k3 serve needs a dozen
 * lines' worth of HTTP (Content-Length request bodies, keep-alive decided
 * by the caller from the Connection header, no TLS), and what matters is that every byte a client
 * sends is either understood exactly or refused. A general-purpose server
 * library would bring a large surface of leniency (folded headers, bare
 * LF, chunked bodies, pipelining) that k3 does not need, and a dependency
 * the portable C99 build does not have. This parser is small enough to read
 * in one sitting, is a pure function over a buffer (no I/O, no allocation,
 * no state between calls) and is fuzzed on its own.
 *
 * Strictness, per RFC 9112:
 *  - lines end in CRLF; a bare CR or LF (refused as soon as it arrives,
 *    not when the head is complete), a control character or an obsolete
 *    folded header line is 400;
 *  - the request-target must be origin-form ("/..."), printable ASCII;
 *  - header names are tokens with the colon right after the name;
 *  - Content-Length is digits only; several must agree; together with
 *    Transfer-Encoding it is 400 (the classic request-smuggling shape);
 *  - HTTP/1.1 requests need exactly one Host.
 * Chunked request bodies are refused with 411 Length Required: every
 * OpenAI client sends its JSON with a Content-Length, and a second body
 * framing would double the parser's attack surface for no client we
 * serve. Other transfer codings are 501, other Expect values 417. */
#include "server/http.h"

#include <stdio.h>
#include <string.h>

/* RFC 9110 tchar. */
static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field-value bytes: HTAB, SP, VCHAR, obs-text. */
static int is_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7F);
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Whether s[0..n) equals the lower-case literal lit, ignoring case. */
static int ieq(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if (lower((unsigned char)s[i]) != lit[i])
            return 0;
    return i == n && !lit[i];
}

static int fail(k3_http_request *out, int status, const char *why)
{
    out->error = why;
    return status;
}

/* Offset just past the "\r\n\r\n" ending the head in buf[0..len), or 0.
 * *bare is set when a line ending that is not CRLF comes first: an LF
 * without its CR, or a CR followed by anything but LF (a CR as the last
 * byte may still be a CRLF's first half). */
static size_t head_end(const char *buf, size_t len, int *bare)
{
    *bare = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == '\r' && i + 1 < len && buf[i + 1] != '\n') {
            *bare = 1;
            return 0;
        }
        if (buf[i] != '\n')
            continue;
        if (i == 0 || buf[i - 1] != '\r') {
            *bare = 1;
            return 0;
        }
        if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return i + 1;
    }
    return 0;
}

/* The request line at p[0..n) (CRLF excluded). */
static int request_line(const char *p, size_t n, k3_http_request *out, const k3_http_limits *lim)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i >= n || p[i] != ' ')
        return fail(out, 400, "malformed request line (method)");
    out->method = p;
    out->method_len = i;
    size_t t0 = ++i;
    while (i < n && (unsigned char)p[i] > 0x20 && (unsigned char)p[i] < 0x7F)
        i++;
    if (i - t0 > lim->max_target)
        return fail(out, 414, "request-target too long");
    if (i == t0 || p[t0] != '/' || i >= n || p[i] != ' ')
        return fail(out, 400, "malformed request line (target must be a path)");
    out->path = p + t0;
    out->path_len = i - t0;
    const char *q = memchr(out->path, '?', out->path_len);
    if (q)
        out->path_len = (size_t)(q - out->path);
    const char *v = p + i + 1;
    size_t vn = n - i - 1;
    if (vn != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
        v[7] < '0' || v[7] > '9')
        return fail(out, 400, "malformed request line (version)");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return fail(out, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
    out->minor = v[7] - '0';
    return 0;
}

/* What the headers said, beyond *out. */
typedef struct {
    int hosts;
    int transfer_encoding, chunked;
    int expect_other;
    unsigned long long length;
} head_facts;

/* Content-Length: digits only; a repeat must agree. */
static int content_length(const char *v, size_t n, k3_http_request *out, head_facts *f)
{
    unsigned long long x = 0;
    if (n == 0)
        return fail(out, 400, "empty Content-Length");
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return fail(out, 400, "Content-Length is not a number");
        if (x > (~0ULL - 9) / 10)
            return fail(out, 413, "Content-Length too large");
        x = x * 10 + (unsigned long long)(v[i] - '0');
    }
    if (out->has_length && x != f->length)
        return fail(out, 400, "conflicting Content-Length headers");
    out->has_length = 1;
    f->length = x;
    return 0;
}

/* The Connection header's comma-separated options v[0..n) (RFC 9110
 * 7.6.1, case-insensitive): "close" and "keep-alive" are noted, others
 * (e.g. "Upgrade") are ignored. Several Connection headers add up. */
static void connection_tokens(const char *v, size_t n, k3_http_request *out)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ',' || v[i] == ' ' || v[i] == '\t'))
            i++;
        size_t b = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (ieq(v + b, i - b, "close"))
            out->conn_close = 1;
        else if (ieq(v + b, i - b, "keep-alive"))
            out->conn_keep_alive = 1;
    }
}

/* One header line p[0..n) (CRLF excluded). */
static int header(const char *p, size_t n, k3_http_request *out, head_facts *f)
{
    if (n && (p[0] == ' ' || p[0] == '\t'))
        return fail(out, 400, "folded header line");
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)p[i]))
        i++;
    if (i == 0 || i >= n || p[i] != ':')
        return fail(out, 400, "malformed header line");
    const char *name = p;
    size_t name_len = i++;
    for (size_t j = i; j < n; j++)
        if (!is_value_char((unsigned char)p[j]))
            return fail(out, 400, "control character in a header value");
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    size_t end = n;
    while (end > i && (p[end - 1] == ' ' || p[end - 1] == '\t'))
        end--;
    const char *v = p + i;
    size_t vn = end - i;
    if (ieq(name, name_len, "content-length"))
        return content_length(v, vn, out, f);
    if (ieq(name, name_len, "host")) {
        f->hosts++;
    } else if (ieq(name, name_len, "transfer-encoding")) {
        /* The last coding decides how the body ends. */
        size_t k = vn;
        while (k > 0 && v[k - 1] != ',' && v[k - 1] != ' ' && v[k - 1] != '\t')
            k--;
        f->transfer_encoding = 1;
        f->chunked = ieq(v + k, vn - k, "chunked");
    } else if (ieq(name, name_len, "authorization")) {
        if (out->authorization)
            return fail(out, 400, "two Authorization headers");
        out->authorization = v;
        out->authorization_len = vn;
    } else if (ieq(name, name_len, "x-api-key")) {
        if (out->api_key)
            return fail(out, 400, "two X-Api-Key headers");
        out->api_key = v;
        out->api_key_len = vn;
    } else if (ieq(name, name_len, "connection")) {
        connection_tokens(v, vn, out);
    } else if (ieq(name, name_len, "expect")) {
        if (ieq(v, vn, "100-continue"))
            out->expect_continue = 1;
        else
            f->expect_other = 1;
    }
    return 0;
}

int k3_http_parse_request(const char *buf, size_t len, k3_http_request *out,
                          const k3_http_limits *lim)
{
    memset(out, 0, sizeof *out);
    size_t scan = len < lim->max_head ? len : lim->max_head;
    int bare;
    size_t end = head_end(buf, scan, &bare);
    if (bare)
        return fail(out, 400, "line not ended by CRLF");
    if (!end)
        return len >= lim->max_head ? fail(out, 431, "request head too large") : K3_HTTP_NEED_HEAD;
    head_facts f = { 0, 0, 0, 0, 0 };
    size_t nheaders = 0;
    int first = 1;
    for (size_t at = 0; at < end - 2;) {
        /* Every line ends in CRLF: a lone CR or LF inside is an error. */
        size_t eol = at;
        while (buf[eol] != '\r' && buf[eol] != '\n')
            eol++;
        if (buf[eol] != '\r' || buf[eol + 1] != '\n')
            return fail(out, 400, "line not ended by CRLF");
        int rc;
        if (first)
            rc = request_line(buf + at, eol - at, out, lim);
        else if (++nheaders > lim->max_headers)
            rc = fail(out, 431, "too many header fields");
        else
            rc = header(buf + at, eol - at, out, &f);
        if (rc)
            return rc;
        first = 0;
        at = eol + 2;
    }
    out->head_len = end;
    if (f.transfer_encoding && out->has_length)
        return fail(out, 400, "both Transfer-Encoding and Content-Length");
    if (f.transfer_encoding)
        return f.chunked ? fail(out, 411, "chunked request bodies are not supported: "
                                          "send a Content-Length")
                         : fail(out, 501, "unsupported transfer coding");
    if (out->minor == 1 && f.hosts != 1)
        return fail(out, 400, f.hosts ? "more than one Host header" : "missing Host header");
    if (f.expect_other)
        return fail(out, 417, "only \"Expect: 100-continue\" is supported");
    if (f.length > lim->max_body)
        return fail(out, 413, "request body larger than --max-body");
    out->content_length = (size_t)f.length;
    return len - end >= out->content_length ? K3_HTTP_OK : K3_HTTP_NEED_BODY;
}

const char *k3_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

size_t k3_http_head(char *out, size_t cap, int status, const char *content_type,
                    long long content_length, const char *extra, int keep)
{
    char length[48] = "";
    if (content_length >= 0)
        snprintf(length, sizeof length, "Content-Length: %lld\r\n", content_length);
    else if (keep)
        snprintf(length, sizeof length, "Transfer-Encoding: chunked\r\n");
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s%sCache-Control: no-cache\r\n"
                     "Connection: %s\r\n\r\n",
                     status, k3_http_reason(status), content_type, length, extra ? extra : "",
                     keep ? "keep-alive" : "close");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

size_t k3_http_chunk(char *out, size_t cap, size_t n)
{
    int w = snprintf(out, cap, n ? "%zx\r\n" : "0\r\n\r\n", n);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

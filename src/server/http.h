/* http.h - the HTTP/1.1 subset `k3 serve` speaks (RFC 9112), as pure
 * functions over buffers: a strict request parser and the response head.
 *
 * Requests: a request line, headers, and a body framed by Content-Length
 * (or none). Whether the connection stays open after the response is the
 * caller's decision (conn.h: keep-alive); the parser reports what the
 * client asked (its version and Connection header). */
#ifndef K3_SERVER_HTTP_H
#define K3_SERVER_HTTP_H

#include <stddef.h>

/* k3_http_parse_request's results besides an HTTP error status (>= 400). */
enum {
    K3_HTTP_OK = 0,        /* head and body complete */
    K3_HTTP_NEED_HEAD = 1, /* no complete head yet: read more */
    K3_HTTP_NEED_BODY = 2  /* head parsed into *out, body not all here: read more */
};

typedef struct k3_http_limits {
    size_t max_head;    /* request line + headers + blank line, bytes (431 beyond) */
    size_t max_headers; /* header fields (431 beyond) */
    size_t max_target;  /* request-target bytes (414 beyond) */
    size_t max_body;    /* Content-Length (413 beyond) */
} k3_http_limits;

/* A parsed request. Pointers point into the parsed buffer; strings are not
 * NUL-terminated. */
typedef struct k3_http_request {
    const char *method;
    size_t method_len;
    const char *path;      /* the request-target up to '?' (origin form: starts with '/') */
    size_t path_len;
    int minor;             /* HTTP/1.minor: 0 or 1 */
    size_t head_len;       /* bytes of the head, blank line included; the body follows */
    size_t content_length; /* body bytes (0 without Content-Length) */
    int has_length;        /* a Content-Length header was present */
    int expect_continue;   /* "Expect: 100-continue" */
    int conn_close;        /* a Connection header lists "close" */
    int conn_keep_alive;   /* a Connection header lists "keep-alive" */
    const char *authorization; /* the Authorization header's value, or NULL */
    size_t authorization_len;
    const char *api_key;   /* the X-Api-Key header's value (Anthropic's), or NULL */
    size_t api_key_len;
    const char *error;     /* when an error status is returned: why (a literal) */
} k3_http_request;

/* Parses the request at buf[0..len). Returns K3_HTTP_OK, K3_HTTP_NEED_HEAD,
 * K3_HTTP_NEED_BODY, or the status of the response the request deserves
 * (400 malformed, 411 chunked body, 413 body over max_body, 414 target too
 * long, 431 head too large, 501 unknown transfer coding, 505 not HTTP/1.x;
 * 400 for two Authorization headers)
 * with out->error saying why. Deterministic and allocation-free: the same
 * bytes always give the same answer, and a prefix of a valid request asks
 * for more rather than failing. A line ending that is not CRLF is 400 as
 * soon as it is in buf (NEED_HEAD never hides one), so a client sending
 * bare LF is answered at once. Bytes after the body (a pipelined next
 * request) are not looked at: the caller parses them as the next request. */
int k3_http_parse_request(const char *buf, size_t len, k3_http_request *out,
                          const k3_http_limits *lim);

/* The reason phrase of a status code ("Not Found"); "Error" if unknown. */
const char *k3_http_reason(int status);

/* Writes the response head "HTTP/1.1 STATUS REASON" + Content-Type,
 * the body's framing, extra (pre-formatted "Name: value\r\n" lines, or
 * NULL), the Connection line and the blank line into out[0..cap).
 * Framing: Content-Length when content_length >= 0; otherwise, with keep,
 * "Transfer-Encoding: chunked" (the caller sends the body as chunks,
 * k3_http_chunk), and without keep none (the body runs to the close).
 * keep: "Connection: keep-alive" (the connection takes another request),
 * else "Connection: close". Returns its length, or 0 if it does not fit. */
size_t k3_http_head(char *out, size_t cap, int status, const char *content_type,
                    long long content_length, const char *extra, int keep);

/* The line that opens a chunk of n bytes ("%zx\r\n") into out[0..cap);
 * n = 0 gives the last chunk with its trailer ("0\r\n\r\n"). The chunk's
 * data follows, then "\r\n" (K3_HTTP_CHUNK_END). Returns its length. */
size_t k3_http_chunk(char *out, size_t cap, size_t n);
#define K3_HTTP_CHUNK_END "\r\n"

#endif

/* webui.c - see webui.h. */
#include "server/webui.h"

#include <string.h>

#include "chat/jtext.h"
#include "util/error.h"
#include "util/json_write.h"

/* The page is the server's own: no other origin may frame it, and the
 * browser is told not to guess types (its CSP is in the page's head). */
#define PAGE_HEADERS "X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\n"

static int is(const k3_http_request *r, const char *path)
{
    return strlen(path) == r->path_len && !memcmp(r->path, path, r->path_len);
}

/* GET /chat/props: what the page shows and offers. */
static int props(k3_server *s, k3_conn *c)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    int rc = k3_buf_puts(&b, "{\"model\":", &e) ||
             k3_jtext_put(&b, s->cfg->model_name, strlen(s->cfg->model_name), &e) ||
             k3_buf_printf(&b, &e,
                           ",\"vision\":%s,\"api_key\":%s,\"context\":%lld,\"max_tokens\":%ld}",
                           s->vision.ok ? "true" : "false", s->cfg->api_key ? "true" : "false",
                           (long long)s->cfg->context, s->cfg->max_tokens);
    int status = rc ? 500 : 200;
    if (rc)
        k3_conn_respond(s, c, 500, "text/plain", e.msg, strlen(e.msg), NULL);
    else
        k3_conn_respond(s, c, 200, "application/json", b.data, b.len, NULL);
    k3_buf_free(&b);
    return status;
}

int k3_webui_route(k3_server *s, k3_conn *c, const k3_http_request *req)
{
    if (s->cfg->no_webui || !(is(req, "/") || is(req, "/chat") || is(req, "/chat/props")))
        return 0;
    if (!(req->method_len == 3 && !memcmp(req->method, "GET", 3))) {
        k3_conn_respond(s, c, 405, "text/plain", "method not allowed\n", 19, "Allow: GET\r\n");
        return 405;
    }
    if (is(req, "/chat/props"))
        return props(s, c);
    k3_conn_respond(s, c, 200, "text/html; charset=utf-8", (const char *)k3_webui_page,
                    k3_webui_page_len, PAGE_HEADERS);
    return 200;
}

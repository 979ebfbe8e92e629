/* webui.h - the chat page of `k3 serve` (issue 33): GET / and GET /chat
 * answer one static HTML page (src/server/webui/index.html, embedded into
 * the binary at build time by scripts/embed.sh), and GET /chat/props the
 * few facts the page needs ({"model", "vision", "api_key", "context",
 * "max_tokens"}: nothing secret, so like the page it is served without
 * the API key; the page's API calls carry the key). The page talks to the
 * server's own /v1/chat/completions; it never loads anything else.
 * --no-webui (k3_server_config.no_webui) turns the three routes off: 404
 * as any unknown path. */
#ifndef K3_SERVER_WEBUI_H
#define K3_SERVER_WEBUI_H

#include <stddef.h>

#include "server/conn.h"

/* The page's bytes (generated: $(BUILD)/gen/webui_page.c). */
extern const unsigned char k3_webui_page[];
extern const size_t k3_webui_page_len;

/* Answers req when it is one of the page's routes and the page is on:
 * returns the HTTP status sent (the caller logs it), or 0 when req is not
 * the page's (nothing sent). */
int k3_webui_route(k3_server *s, k3_conn *c, const k3_http_request *req);

#endif

/* conv.c - conversation memory and the chat-loop helpers of k3/chat.h. */
#include "chat/conv.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int k3_chat_new(k3_chat **out, k3_err *e)
{
    k3_chat *c = k3_calloc(e, 1, sizeof *c, "a conversation");
    if (!c)
        return e->code;
    c->thinking = 1;
    c->add_generation_prompt = 1;
    *out = c;
    return K3_OK;
}

void k3_chat_free(k3_chat *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nowned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->images);
    free(c->msgs);
    free(c);
}

void *k3_chat_alloc(k3_chat *c, size_t n, k3_err *e)
{
    if (c->nowned == c->owned_cap) {
        size_t cap = c->owned_cap ? 2 * c->owned_cap : 64;
        void **p = realloc(c->owned, cap * sizeof *p);
        if (!p) {
            k3_fail(e, K3_ERUNTIME, "out of memory growing a conversation");
            return NULL;
        }
        c->owned = p;
        c->owned_cap = cap;
    }
    void *p = k3_malloc(e, n, "a conversation");
    if (p)
        c->owned[c->nowned++] = p;
    return p;
}

int k3_chat_keep(k3_chat *c, const char *s, size_t n, k3_text *out, k3_err *e)
{
    char *p = k3_chat_alloc(c, n + 1, e);
    if (!p)
        return e->code;
    memcpy(p, s, n);
    p[n] = '\0';
    *out = (k3_text){ p, n };
    return K3_OK;
}

int k3_chat_push(k3_chat *c, k3_role role, k3_msg **out, k3_err *e)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        k3_msg *p = realloc(c->msgs, cap * sizeof *p);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing a conversation");
        c->msgs = p;
        c->cap = cap;
    }
    *out = &c->msgs[c->n++];
    memset(*out, 0, sizeof **out);
    (*out)->role = role;
    return K3_OK;
}

void k3_chat_set_generation_prompt(k3_chat *c, int on)
{
    c->add_generation_prompt = on != 0;
}

int k3_chat_add_message(k3_chat *c, const char *role, const char *text, size_t len, k3_err *e)
{
    k3_role r;
    if (!strcmp(role, "system"))
        r = K3_ROLE_SYSTEM;
    else if (!strcmp(role, "user"))
        r = K3_ROLE_USER;
    else
        return k3_fail(e, K3_EINPUT, "k3_chat_add_message: role \"%s\" is not system or user",
                       role);
    k3_text content;
    k3_msg *m = NULL;
    if (k3_chat_keep(c, text, len, &content, e) || k3_chat_push(c, r, &m, e))
        return e->code;
    m->content = content;
    return K3_OK;
}

int k3_chat_set_thinking(k3_chat *c, int on, const char *effort, k3_err *e)
{
    static const char *const efforts[] = { "low", "high", "max" };
    const char *known = NULL;
    for (size_t i = 0; effort && i < sizeof efforts / sizeof efforts[0]; i++)
        if (!strcmp(effort, efforts[i]))
            known = efforts[i];
    if (effort && !known)
        return k3_fail(e, K3_EINPUT, "thinking effort \"%s\": expected low, high or max", effort);
    c->thinking = on != 0;
    c->effort = known; /* the options hold literals (conv.h) */
    return K3_OK;
}

int k3_chat_add_assistant(k3_chat *c, const char *content, size_t clen, const char *reasoning,
                          size_t rlen, k3_err *e)
{
    k3_text body, why = { NULL, 0 };
    k3_msg *m = NULL;
    if (k3_chat_keep(c, content, clen, &body, e) ||
        (reasoning && k3_chat_keep(c, reasoning, rlen, &why, e)) ||
        k3_chat_push(c, K3_ROLE_ASSISTANT, &m, e))
        return e->code;
    m->content = body;
    m->reasoning = why;
    return K3_OK;
}

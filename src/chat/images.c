/* images.c - see images.h. */
#include "chat/images.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vision/image.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The value of a base64 digit, or -1. */
static int b64_value(unsigned char ch)
{
    const char *p = ch ? strchr(b64, ch) : NULL;
    return p ? (int)(p - b64) : -1;
}

/* Standard base64 (RFC 4648 §4) of s[0..n) into *out (malloc'd), *len.
 * Padding is optional at the end and nowhere else; any other byte is
 * refused (K3_EINPUT), naming its offset. */
static int b64_decode(const char *s, size_t n, const char *what, unsigned char **out,
                      size_t *len, k3_err *e)
{
    size_t pad = 0;
    while (n && s[n - 1] == '=')
        n--, pad++;
    if (pad > 2 || (pad && (n + pad) % 4))
        return k3_fail(e, K3_EINPUT, "%s: the data URL's base64 ends in %zu '=' (padding is "
                       "at most 2 and completes a group of 4)", what, pad);
    if (n % 4 == 1)
        return k3_fail(e, K3_EINPUT, "%s: the data URL's base64 has a stray last digit", what);
    unsigned char *d = malloc(n / 4 * 3 + 3);
    if (!d)
        return k3_fail(e, K3_ERUNTIME, "out of memory decoding %s", what);
    uint32_t acc = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(d);
            return k3_fail(e, K3_EINPUT, "%s: the data URL's base64 has an invalid byte at "
                                         "offset %zu", what, i);
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            d[k++] = (unsigned char)(acc >> 16);
            d[k++] = (unsigned char)(acc >> 8);
            d[k++] = (unsigned char)acc;
            acc = 0;
        }
    }
    if (n % 4 == 2)
        d[k++] = (unsigned char)(acc >> 4);
    else if (n % 4 == 3) {
        d[k++] = (unsigned char)(acc >> 10);
        d[k++] = (unsigned char)(acc >> 2);
    }
    *out = d;
    *len = k;
    return K3_OK;
}

int k3_chat_add_image(k3_chat *c, const unsigned char *data, size_t n, const char *what,
                      size_t *index, k3_err *e)
{
    if (c->nimages >= K3_CHAT_MAX_IMAGES)
        return k3_fail(e, K3_EINPUT, "%s: a conversation holds at most %d images", what,
                       K3_CHAT_MAX_IMAGES);
    if (n > K3_IMAGE_MAX_FILE)
        return k3_fail(e, K3_EINPUT, "%s: %zu bytes, more than an image may have (%u)", what, n,
                       K3_IMAGE_MAX_FILE);
    int w = 0, h = 0;
    if (c->images_header_only) {
        if (k3_image_probe(data, n, what, &w, &h, e))
            return e->code;
    } else {
        k3_image img;
        if (k3_image_decode(data, n, what, &img, e))
            return e->code;
        w = img.width;
        h = img.height;
        k3_image_free(&img);
    }
    if (c->nimages == c->images_cap) {
        size_t cap = c->images_cap ? 2 * c->images_cap : 4;
        k3_chat_image *g = realloc(c->images, cap * sizeof *g);
        if (!g)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing a conversation");
        c->images = g;
        c->images_cap = cap;
    }
    unsigned char *copy = k3_chat_alloc(c, n ? n : 1, e);
    if (!copy)
        return e->code;
    memcpy(copy, data, n);
    k3_chat_image *im = &c->images[c->nimages];
    im->data = copy;
    im->n = n;
    im->width = w;
    im->height = h;
    *index = c->nimages++;
    return K3_OK;
}

/* An image part's URL: a base64 data URL of an image type. */
static int data_url(k3_chat *c, const char *url, size_t n, const char *what, size_t *index,
                    k3_err *e)
{
    static const char scheme[] = "data:";
    if (n < 5 || memcmp(url, scheme, 5) != 0)
        return k3_fail(e, K3_EINPUT, "%s: only data URLs are accepted (\"data:image/png;base64,"
                                     "...\"): k3 never fetches images from the network", what);
    const char *comma = memchr(url, ',', n);
    if (!comma)
        return k3_fail(e, K3_EINPUT, "%s: a data URL without a comma", what);
    size_t head = (size_t)(comma - url);
    static const char tail[] = ";base64";
    if (head < 5 + 6 + 7 || memcmp(url + 5, "image/", 6) != 0 ||
        memcmp(comma - 7, tail, 7) != 0)
        return k3_fail(e, K3_EINPUT, "%s: expected a base64 data URL of an image "
                                     "(data:image/...;base64,...)", what);
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (b64_decode(comma + 1, n - head - 1, what, &bytes, &len, e))
        return e->code;
    k3_chat_add_image(c, bytes, len, what, index, e);
    free(bytes);
    return e->code;
}

/* One part of a content list. */
static int read_part(k3_chat *c, const k3_json *v, const char *path, k3_part *p, k3_err *e)
{
    if (v->type != K3J_OBJECT)
        return k3_fail(e, K3_EINPUT, "%s: expected an object, got %s", path,
                       k3_json_type_name(v));
    const k3_json *type = k3_json_get(v, "type");
    if (!type || type->type != K3J_STRING)
        return k3_fail(e, K3_EINPUT, "%s.type: expected \"text\" or \"image_url\"", path);
    int is_image = !strcmp(type->str, "image_url");
    if (!is_image && strcmp(type->str, "text"))
        return k3_fail(e, K3_EINPUT, "%s.type: \"%s\" is not \"text\" or \"image_url\"", path,
                       type->str);
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], "type") && strcmp(v->keys[i], is_image ? "image_url" : "text"))
            return k3_fail(e, K3_EINPUT, "%s: unknown key \"%s\" in a %s part", path, v->keys[i],
                           type->str);
    p->image = -1;
    if (!is_image) {
        const k3_json *t = k3_json_get(v, "text");
        if (!t || t->type != K3J_STRING)
            return k3_fail(e, K3_EINPUT, "%s.text: expected a string", path);
        return k3_chat_keep(c, t->str, t->len, &p->text, e);
    }
    const k3_json *iu = k3_json_get(v, "image_url"), *url = NULL;
    if (iu && iu->type == K3J_OBJECT) {
        for (size_t i = 0; i < iu->count; i++)
            if (strcmp(iu->keys[i], "url") && strcmp(iu->keys[i], "detail"))
                return k3_fail(e, K3_EINPUT, "%s.image_url: unknown key \"%s\"", path,
                               iu->keys[i]);
        url = k3_json_get(iu, "url");
    }
    if (!url || url->type != K3J_STRING)
        return k3_fail(e, K3_EINPUT, "%s.image_url.url: expected a string", path);
    size_t index;
    if (data_url(c, url->str, url->len, path, &index, e))
        return e->code;
    p->image = (long)index;
    return K3_OK;
}

int k3_chat_read_content(k3_chat *c, const k3_json *v, const char *path, k3_msg *m, k3_err *e)
{
    if (!v || v->type == K3J_NULL)
        return K3_OK;
    if (v->type == K3J_STRING)
        return k3_chat_keep(c, v->str, v->len, &m->content, e);
    if (v->type != K3J_ARRAY)
        return k3_fail(e, K3_EINPUT, "%s.content: expected a string, an array of parts or "
                                     "null, got %s", path, k3_json_type_name(v));
    k3_part *parts = k3_chat_alloc(c, (v->count ? v->count : 1) * sizeof *parts, e);
    if (!parts)
        return e->code;
    for (size_t i = 0; i < v->count; i++) {
        char ppath[96];
        snprintf(ppath, sizeof ppath, "%s.content[%zu]", path, i);
        if (read_part(c, &v->items[i], ppath, &parts[i], e))
            return e->code;
    }
    m->parts = parts;
    m->nparts = v->count;
    return K3_OK;
}

int k3_chat_add_user_parts(k3_chat *c, const size_t *images, size_t nimg, const char *text,
                           size_t len, k3_err *e)
{
    size_t np = nimg + (len != 0);
    k3_part *parts = k3_chat_alloc(c, (np ? np : 1) * sizeof *parts, e);
    k3_msg *m = NULL;
    if (!parts)
        return e->code;
    for (size_t i = 0; i < nimg; i++) {
        if (images[i] >= c->nimages)
            return k3_fail(e, K3_EINPUT, "k3_chat_add_user_parts: no image %zu", images[i]);
        parts[i].image = (long)images[i];
        parts[i].text.s = NULL;
        parts[i].text.n = 0;
    }
    if (len) {
        parts[nimg].image = -1;
        if (k3_chat_keep(c, text, len, &parts[nimg].text, e))
            return e->code;
    }
    if (k3_chat_push(c, K3_ROLE_USER, &m, e))
        return e->code;
    m->parts = parts;
    m->nparts = np;
    return K3_OK;
}

int k3_chat_put_data_url(k3_buf *b, const k3_chat_image *im, k3_err *e)
{
    int png = im->n >= 8 && !memcmp(im->data, "\x89PNG\r\n\x1a\n", 8);
    if (k3_buf_puts(b, png ? "data:image/png;base64," : "data:image/jpeg;base64,", e))
        return e->code;
    const unsigned char *d = im->data;
    char q[4];
    for (size_t i = 0; i < im->n; i += 3) {
        size_t r = im->n - i < 3 ? im->n - i : 3;
        uint32_t v = (uint32_t)d[i] << 16 | (r > 1 ? (uint32_t)d[i + 1] << 8 : 0) |
                     (r > 2 ? d[i + 2] : 0);
        q[0] = b64[v >> 18];
        q[1] = b64[(v >> 12) & 63];
        q[2] = r > 1 ? b64[(v >> 6) & 63] : '=';
        q[3] = r > 2 ? b64[v & 63] : '=';
        if (k3_buf_put(b, q, 4, e))
            return e->code;
    }
    return K3_OK;
}

void k3_chat_image_order(const k3_chat *c, size_t order[K3_CHAT_MAX_IMAGES], size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < c->n; i++)
        for (size_t j = 0; j < c->msgs[i].nparts; j++)
            if (c->msgs[i].parts[j].image >= 0 && *n < K3_CHAT_MAX_IMAGES)
                order[(*n)++] = (size_t)c->msgs[i].parts[j].image;
}

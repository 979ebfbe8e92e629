/* images.h - images in a conversation (docs/VISION.md §4 step 4, §10.6).
 *
 * A system or user message's content may be a list of parts, OpenAI's
 * shape: {"type": "text", "text": STRING} and
 * {"type": "image_url", "image_url": {"url": URL, "detail": ...}}. URL must
 * be a data URL, "data:image/png;base64,..." or "data:image/jpeg;base64,...":
 * k3 never fetches from the network, so an http(s) or any other URL is
 * K3_EINPUT saying so. The bytes are decoded once here (vision/image.h) to
 * refuse a bad image early and learn its size for the markup; the rows are
 * the front end's business (cli/chat_images.h).
 *
 * The renderer turns an image part into §4 step 1's markup as one
 * structural segment (<|media_begin|>image WxH<|media_content|><|media_pad|>
 * <|media_end|>), so the encoded prompt has exactly one <|media_pad|> per
 * image, in the order of c->images (text segments never yield special
 * ids). */
#ifndef K3_CHAT_IMAGES_H
#define K3_CHAT_IMAGES_H

#include <stddef.h>

#include "chat/conv.h"
#include "util/json.h"
#include "util/json_write.h"

/* Most images one conversation holds. */
#define K3_CHAT_MAX_IMAGES 16

/* Adds an image of n bytes (copied; `what` names it in messages) to c's
 * images; *index gets its number. */
int k3_chat_add_image(k3_chat *c, const unsigned char *data, size_t n, const char *what,
                      size_t *index, k3_err *e);

/* A message's content (JSON string, null or an array of parts) into m:
 * m->content for a string, m->parts otherwise (images added to c). path
 * names the message in messages ("messages[3]"). */
int k3_chat_read_content(k3_chat *c, const k3_json *v, const char *path, k3_msg *m, k3_err *e);

/* Appends a user message: images[0..nimg) (indices into c->images), then
 * text[0..len) (as a text part, when not empty). */
int k3_chat_add_user_parts(k3_chat *c, const size_t *images, size_t nimg, const char *text,
                           size_t len, k3_err *e);

/* The images in the order the renderer emits them (messages in order,
 * parts in order): order[k] is the index into c->images of the image whose
 * markup holds the k-th <|media_pad|> of the rendering; *n of them, at most
 * K3_CHAT_MAX_IMAGES. */
void k3_chat_image_order(const k3_chat *c, size_t order[K3_CHAT_MAX_IMAGES], size_t *n);

/* Appends im as a data URL ("data:image/png;base64,...") to b. */
int k3_chat_put_data_url(k3_buf *b, const k3_chat_image *im, k3_err *e);

#endif

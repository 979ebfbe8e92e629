/* xtml.h - the markup of Kimi K3's XTML chat format (MODEL.md §6.1), as
 * segments.
 *
 * An element is
 *   <|open|> tag { " key" "=\"" value "\"" } <|sep|>  body  <|close|> tag <|sep|>
 * where the four special tokens are structural segments and everything
 * else is text, split exactly as shown: the tag, each attribute's " key",
 * the "=\"", the escaped value and the closing quote are separate segments
 * (chat_vectors.json; the split changes the token ids). Attribute values
 * escape only '&' (&amp;) and '"' (&quot;). A message element is followed
 * by <|end_of_msg|>. */
#ifndef K3_CHAT_XTML_H
#define K3_CHAT_XTML_H

#include <stddef.h>

#include "k3/chat.h"

#define K3_XTML_OPEN "<|open|>"
#define K3_XTML_CLOSE "<|close|>"
#define K3_XTML_SEP "<|sep|>"
#define K3_XTML_END_OF_MSG "<|end_of_msg|>"

typedef struct k3_xtml_attr {
    const char *key;
    const char *value; /* value[0..len), unescaped */
    size_t len;
} k3_xtml_attr;

/* <|open|>tag attrs...<|sep|> */
int k3_xtml_open(k3_chat_segments *s, const char *tag, const k3_xtml_attr *attrs, size_t nattrs,
                 k3_err *e);

/* <|close|>tag<|sep|> */
int k3_xtml_close(k3_chat_segments *s, const char *tag, k3_err *e);

/* <|end_of_msg|> */
int k3_xtml_end_of_msg(k3_chat_segments *s, k3_err *e);

/* Body text t[0..n) as one text segment (none when empty). */
int k3_xtml_text(k3_chat_segments *s, const char *t, size_t n, k3_err *e);

#endif

/* segments.h - building a k3_chat_segments list (k3/chat.h).
 *
 * A segment's bytes are appended to the shared text buffer first and the
 * segment is recorded when it is closed, so one segment can be assembled
 * from several pieces (a fixed preamble around embedded JSON) without a
 * scratch copy. Empty segments are never recorded: the release's encoder
 * drops them, and an empty segment encodes to nothing anyway. */
#ifndef K3_CHAT_SEGMENTS_H
#define K3_CHAT_SEGMENTS_H

#include <stddef.h>

#include "k3/chat.h"

/* Appends t[0..n) to the text of the segment being built. */
int k3_seg_grow(k3_chat_segments *s, const char *t, size_t n, k3_err *e);

/* Records the bytes added since text offset start (s->len when the segment
 * began) as one segment; nothing when there are none. */
int k3_seg_close(k3_chat_segments *s, size_t start, int allow_special, k3_err *e);

/* k3_seg_grow then k3_seg_close: one whole segment. */
int k3_seg_add(k3_chat_segments *s, const char *t, size_t n, int allow_special, k3_err *e);

#endif

/* draft_pack.c - see draft_pack.h. */
#include "pack/draft_pack.h"

#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "io/pread_all.h"
#include "model/draft_trunk.h"
#include "util/atomic_file.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/xxh64.h"

/* Rows of a matrix read and quantized at a time: about this many bytes. */
#define WINDOW (64u << 20)

typedef struct {
    k3_atomic_file a;
    k3_xxh64_state h;        /* of everything after the header */
    uint64_t off;            /* bytes written */
    k3_err *e;
} out;

static int emit(out *o, const void *data, size_t n)
{
    if (n && fwrite(data, 1, n, o->a.f) != n)
        return k3_fail(o->e, K3_ERUNTIME, "%s: write failed", o->a.path);
    k3_xxh64_update(&o->h, data, n);
    o->off += n;
    return K3_OK;
}

/* Zeros up to file offset `to`. */
static int pad(out *o, uint64_t to)
{
    static const uint8_t zero[64];
    while (o->off < to && !o->e->code)
        emit(o, zero, (size_t)(to - o->off < sizeof zero ? to - o->off : sizeof zero));
    return o->e->code;
}

/* One matrix: its int8 rows at q_off, then its scales at s_off. */
static int pack_matrix(out *o, uint32_t kind, const k3_draft_entry *x, const k3_run_piece *src,
                       uint8_t *raw, int8_t *q)
{
    size_t cols = (size_t)x->cols, rows = (size_t)x->rows;
    size_t nb = (size_t)k3_q8_blocks(x->cols), win = WINDOW / (cols * 2) ? WINDOW / (cols * 2) : 1;
    if (src->len != (uint64_t)rows * cols * 2)
        return k3_fail(o->e, K3_EINPUT, "%s: %llu bytes, not a %zu x %zu BF16 matrix",
                       src->tensor, (unsigned long long)src->len, rows, cols);
    uint16_t *scales = k3_malloc(o->e, rows * nb * 2 + 1, "draft trunk scales");
    if (!scales || pad(o, x->q_off))
        goto done;
    for (size_t r0 = 0; r0 < rows && !o->e->code; r0 += win) {
        size_t n = rows - r0 < win ? rows - r0 : win;
        char why[160];
        if (k3_pread_weight(src->fd, raw, n * cols * 2, (off_t)(src->src_off + r0 * cols * 2),
                            why, sizeof why)) {
            k3_fail(o->e, K3_EINVALID, "RUN INVALID: reading %s from %s: %s", src->tensor,
                    src->path, why);
            break;
        }
        const uint16_t *w = (const uint16_t *)(const void *)raw;
        for (size_t i = 0; i < n * cols; i++)
            if ((w[i] & 0x7f80u) == 0x7f80u) {
                k3_fail(o->e, K3_EINPUT, "%s: element (%zu, %zu) is not finite: no draft trunk "
                        "of it", src->tensor, r0 + i / cols, i % cols);
                goto done;
            }
        if (x->bf16) {
            emit(o, raw, n * cols * 2);
            continue;
        }
        size_t row_bytes = kind == K3_DRAFT_KIND_Q4 ? cols / 2 : cols;
        for (size_t r = 0; r < n; r++)
            if (kind == K3_DRAFT_KIND_Q4)
                k3_q4_quantize_row(w + r * cols, cols, (uint8_t *)q + r * row_bytes,
                                   scales + (r0 + r) * nb);
            else
                k3_q8_quantize_row(w + r * cols, cols, q + r * cols, scales + (r0 + r) * nb);
        emit(o, q, n * row_bytes);
    }
    if (!o->e->code && !x->bf16 && !pad(o, x->s_off))
        emit(o, scales, rows * nb * 2);
done:
    free(scales);
    return o->e->code;
}

int k3_draft_pack(const k3_weights *w, uint32_t kind, uint64_t fp, const char *dir,
                  FILE *progress, k3_draft_pack_result *r, k3_err *e)
{
    memset(r, 0, sizeof *r);
    double t0 = k3_seconds();
    k3_draft_entry *ent = NULL;
    size_t n = 0;
    uint64_t size = 0;
    if (k3_draft_layout(w, kind, &ent, &n, &size, e) != K3_OK)
        return e->code;
    char path[4096];
    out o;
    memset(&o, 0, sizeof o);
    o.e = e;
    uint8_t *raw = NULL;
    int8_t *q = NULL;
    uint8_t head[K3_DRAFT_HEADER];
    memset(head, 0, sizeof head);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, K3_DRAFT_FILE) >= sizeof path) {
        k3_fail(e, K3_EINPUT, "%s: path too long", dir);
        goto done;
    }
    size_t widest = 1;
    for (size_t k = 0; k < n; k++)
        widest = (size_t)ent[k].cols > widest ? (size_t)ent[k].cols : widest;
    size_t window = WINDOW > widest * 2 ? WINDOW : widest * 2;
    if (!(raw = k3_malloc(e, window, "draft trunk window")) ||
        !(q = k3_malloc(e, window / 2, "draft trunk window")) ||
        k3_atomic_begin(&o.a, path, e) != K3_OK)
        goto done;
    if (fwrite(head, 1, sizeof head, o.a.f) != sizeof head) {
        k3_fail(e, K3_ERUNTIME, "%s: write failed", path);
        goto done;
    }
    o.off = sizeof head;
    k3_xxh64_init(&o.h, 0);
    for (size_t k = 0; k < n && !e->code; k++) {
        pack_matrix(&o, kind, &ent[k], &ent[k].src, raw, q);
        if (progress && !e->code && (k + 1 == n || (k + 1) % 64 == 0))
            fprintf(progress, "\rpack-trunk: draft %s: %zu of %zu matrices",
                    k3_draft_kind_name(kind), k + 1, n);
    }
    if (progress && n)
        fputc('\n', progress);
    if (!e->code && o.off != size)
        k3_fail(e, K3_ERUNTIME, "%s: wrote %llu bytes, the layout says %llu", path,
                (unsigned long long)o.off, (unsigned long long)size);
    if (!e->code) {
        k3_draft_header_encode(head, kind, (uint32_t)n, fp, size, k3_xxh64_digest(&o.h));
        if (fseek(o.a.f, 0, SEEK_SET) != 0 || fwrite(head, 1, sizeof head, o.a.f) != sizeof head)
            k3_fail(e, K3_ERUNTIME, "%s: write failed", path);
    }
    if (!e->code && k3_atomic_commit(&o.a, e) == K3_OK) {
        r->bytes = size;
        r->matrices = n;
        for (size_t k = 0; k < n; k++)
            r->bf16_bytes += (uint64_t)ent[k].rows * (uint64_t)ent[k].cols * 2;
        r->seconds = k3_seconds() - t0;
    }
done:
    if (e->code)
        k3_atomic_abort(&o.a);
    free(ent);
    free(raw);
    free(q);
    return e->code;
}

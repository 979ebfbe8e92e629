/* embeds_check - the placeholder path (k3_forward_embeds, docs/VISION.md §4
 * step 3): input rows given in place of embedding lookups.
 *
 *   embeds_check MODEL_DIR
 *   embeds_check MODEL_DIR --feed IDS_FILE ROWS_FILE PAD OUT
 *
 * The second form feeds the comma-separated ids of IDS_FILE in one call of
 * k3_forward_embeds, the rows of ROWS_FILE (float32 LE, hidden_size each) in
 * order at the positions whose id is PAD, and writes the last position's
 * logits (float32) to OUT: what the first row of `k3 --image ...
 * --dump-logits` must equal byte for byte when ROWS_FILE holds the images'
 * rows.
 *
 * A prompt A of 12 ids, and the prompt B in which positions 4..8 hold a
 * placeholder id whose rows are given as the embedding rows of A's ids
 * there (what an image whose projected rows equal those tokens' embeddings
 * feeds): B's logits at every position, and the logits after one more id,
 * must be byte-identical (memcmp) to A's; B's state records the
 * placeholder ids. The same two sequences in one k3_forward_multi call
 * (the rows as k3_seq.embeds), in either order, give each one's logits
 * byte for byte. Negative control: rows of other tokens must change the
 * logits from position 4 on and not before. A non-finite row is K3_EINPUT
 * with the state unmoved. Opened resident, and with max_batch 3 (the call
 * in pieces cutting through the given rows) and streamed embeddings.
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); 1 the
 * model did not open or run. Run by tests/gates/17-vision-c.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/k3.h"
#include "model/model.h"
#include "model/weights.h"

#define N 12
#define LO 4
#define HI 9 /* positions [LO, HI) take given rows */

static int failed;

static void check(int ok, const char *what, int mode)
{
    if (!ok) {
        fprintf(stderr, "CHECK FAILED: %s (open %d)\n", what, mode);
        failed = 1;
    }
}

static int run_mode(const char *dir, int mode)
{
    k3_err e = { 0, "" };
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    if (mode == 1) {
        o.max_batch = 3;
        o.stream_embed = 1;
    }
    k3_model *m;
    if (k3_model_open(&m, dir, &o, &e)) {
        fprintf(stderr, "embeds_check: %s\n", e.msg);
        return 1;
    }
    size_t V = k3_model_vocab(m), H = (size_t)m->cfg.hidden_size;
    uint32_t a[N + 1], b[N + 1], pad = (uint32_t)(V - 1);
    for (size_t i = 0; i <= N; i++)
        a[i] = b[i] = (uint32_t)((i * 7919 + 13) % (V - 256));
    float *rows = malloc(sizeof *rows * 2 * N * H), *la = malloc(sizeof *la * (N + 1) * V);
    float *lb = malloc(sizeof *lb * (N + 1) * V);
    uint16_t *raw = malloc(sizeof *raw * H);
    const float *emb[N] = { 0 }, *other[N] = { 0 };
    k3_state *sa, *sb;
    if (!rows || !la || !lb || !raw || k3_state_new(&sa, m, &e) || k3_state_new(&sb, m, &e)) {
        fprintf(stderr, "embeds_check: setup failed %s\n", e.msg);
        return 1;
    }
    for (size_t i = LO; i < HI; i++) {
        b[i] = pad;
        if (k3_weights_embed_row(&m->w, m->ix, a[i], rows + i * H, raw, &e) ||
            k3_weights_embed_row(&m->w, m->ix, a[i] + 1, rows + (N + i) * H, raw, &e))
            return 1;
        emb[i] = rows + i * H;
        other[i] = rows + (N + i) * H;
    }
    int rc = k3_forward(m, sa, a, N, la, 1, &e) ||
             k3_forward_embeds(m, sb, b, emb, N, lb, 1, &e) ||
             k3_forward(m, sa, a + N, 1, la + N * V, 0, &e) ||
             k3_forward(m, sb, b + N, 1, lb + N * V, 0, &e);
    if (rc) {
        fprintf(stderr, "embeds_check: %s\n", e.msg);
        return 1;
    }
    check(memcmp(la, lb, sizeof *la * (N + 1) * V) == 0, "given rows = the tokens' embeddings "
          "give the text prompt's logits", mode);
    check(memcmp(k3_state_ids(sb), b, sizeof b) == 0, "the state records the placeholder ids",
          mode);
    /* In one k3_forward_multi call beside a text sequence (k3_seq.embeds),
     * in either order: every position's logits are those of each sequence
     * alone (with max_batch 3 the pieces mix the two sequences). */
    for (int order = 0; order < 2; order++) {
        k3_state *sc, *sd;
        float *lc = malloc(sizeof *lc * N * V), *ld = malloc(sizeof *ld * N * V);
        if (!lc || !ld || k3_state_new(&sc, m, &e) || k3_state_new(&sd, m, &e))
            return 1;
        k3_seq q[2] = { { sc, a, N, lc, 1, NULL }, { sd, b, N, ld, 1, emb } };
        if (order) {
            k3_seq t = q[0];
            q[0] = q[1];
            q[1] = t;
        }
        if (k3_forward_multi(m, q, 2, &e)) {
            fprintf(stderr, "embeds_check: %s\n", e.msg);
            return 1;
        }
        check(memcmp(lc, la, sizeof *la * N * V) == 0 && memcmp(ld, lb, sizeof *lb * N * V) == 0,
              "rows in a k3_forward_multi call = k3_forward_embeds alone", mode);
        k3_state_free(sc);
        k3_state_free(sd);
        free(lc);
        free(ld);
    }
    /* Negative control: other rows change the logits from LO on, not before. */
    k3_state_reset(sb);
    if (k3_forward_embeds(m, sb, b, other, N, lb, 1, &e))
        return 1;
    check(memcmp(la, lb, sizeof *la * LO * V) == 0, "positions before the rows unchanged", mode);
    check(memcmp(la + LO * V, lb + LO * V, sizeof *la * V) != 0, "other rows change the logits",
          mode);
    /* A non-finite row: refused before anything runs. */
    k3_state_reset(sb);
    rows[LO * H + 1] = NAN;
    int bad = k3_forward_embeds(m, sb, b, emb, N, lb, 1, &e);
    check(bad == K3_EINPUT && strstr(e.msg, "not finite") && k3_state_pos(sb) == 0,
          "a NaN row is K3_EINPUT with the state unmoved", mode);
    printf("open %d: %zu positions, rows %d..%d given: %s\n", mode, (size_t)N, LO, HI - 1,
           failed ? "FAILED" : "identical to the text prompt");
    free(rows);
    free(la);
    free(lb);
    free(raw);
    k3_state_free(sa);
    k3_state_free(sb);
    k3_model_close(m);
    return 0;
}

static int feed(const char *dir, const char *ids_path, const char *rows_path, long pad,
                const char *out_path)
{
    k3_err e = { 0, "" };
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    k3_model *m;
    k3_state *s;
    if (k3_model_open(&m, dir, &o, &e) || k3_state_new(&s, m, &e)) {
        fprintf(stderr, "embeds_check: %s\n", e.msg);
        return 1;
    }
    size_t V = k3_model_vocab(m), H = (size_t)m->cfg.hidden_size, n = 0, cap = 1 << 16;
    uint32_t *ids = malloc(sizeof *ids * cap);
    FILE *f = fopen(ids_path, "r");
    unsigned v;
    while (f && ids && n < cap && fscanf(f, "%u,", &v) == 1)
        ids[n++] = v;
    if (f)
        fclose(f);
    size_t npad = 0;
    for (size_t i = 0; i < n; i++)
        npad += ids[i] == (uint32_t)pad;
    float *rows = malloc(sizeof *rows * (npad ? npad : 1) * H);
    const float **emb = calloc(n ? n : 1, sizeof *emb);
    float *lg = malloc(sizeof *lg * V);
    f = fopen(rows_path, "rb");
    size_t got = f && rows ? fread(rows, sizeof *rows * H, npad, f) : 0;
    if (f)
        fclose(f);
    if (n == 0 || !emb || !lg || got != npad) {
        fprintf(stderr, "embeds_check: %zu ids, %zu of %zu rows\n", n, got, npad);
        return 1;
    }
    for (size_t i = 0, r = 0; i < n; i++)
        if (ids[i] == (uint32_t)pad)
            emb[i] = rows + r++ * H;
    if (k3_forward_embeds(m, s, ids, emb, n, lg, 0, &e)) {
        fprintf(stderr, "embeds_check: %s\n", e.msg);
        return 1;
    }
    f = fopen(out_path, "wb");
    if (!f || fwrite(lg, sizeof *lg * V, 1, f) != 1 || fclose(f)) {
        fprintf(stderr, "embeds_check: cannot write %s\n", out_path);
        return 1;
    }
    printf("fed %zu ids, %zu given rows\n", n, npad);
    free(ids);
    free(rows);
    free((void *)emb);
    free(lg);
    k3_state_free(s);
    k3_model_close(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[2], "--feed") == 0)
        return feed(argv[1], argv[3], argv[4], atol(argv[5]), argv[6]);
    if (argc != 2) {
        fprintf(stderr, "usage: embeds_check MODEL_DIR\n");
        return 2;
    }
    for (int mode = 0; mode < 2; mode++)
        if (run_mode(argv[1], mode))
            return 1;
    return failed ? 9 : 0;
}

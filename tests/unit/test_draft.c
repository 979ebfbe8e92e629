/* test_draft.c - the context-lookup drafter and the choice of how many
 * drafts to verify (gen/draft.h). The drafter is checked against a
 * brute-force statement of its rule on random sequences over a small
 * alphabet (so matches of every length occur). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gen/draft.h"

/* The rule, written the slow way: for k = max..min, every earlier start j
 * (latest first) whose k ids equal the last k and that has a continuation. */
static size_t slow(const uint32_t *seq, size_t n, size_t min_n, size_t max_n, uint32_t *out,
                   size_t max)
{
    for (size_t k = max_n; k >= min_n && k > 0; k--) {
        if (k >= n)
            continue;
        for (size_t j = n - k; j-- > 0;) {
            size_t same = 0;
            while (same < k && seq[j + same] == seq[n - k + same])
                same++;
            if (same < k)
                continue;
            size_t got = 0;
            while (got < max && j + k + got < n) {
                out[got] = seq[j + k + got];
                got++;
            }
            return got;
        }
    }
    return 0;
}

static void test_ngram(void)
{
    k3_err e = { 0, "" };
    k3_drafter d;
    CHECK(k3_drafter_ngram(&d, 1, 4, &e) == K3_OK, "%s", e.msg);
    /* A quoted passage: "a b c d" seen, then "a b" again -> "c d ...". */
    const uint32_t seq[] = { 1, 2, 3, 4, 9, 1, 2 };
    uint32_t out[8];
    size_t got = d.propose(d.ctx, seq, 7, out, 8, NULL, &e);
    CHECK(got == 5 && out[0] == 3 && out[1] == 4 && out[2] == 9, "passage: %zu", got);
    CHECK(d.propose(d.ctx, seq, 7, out, 2, NULL, &e) == 2, "capped at max");
    const uint32_t none[] = { 1, 2, 3 };
    CHECK(d.propose(d.ctx, none, 3, out, 8, NULL, &e) == 0, "no repeat, no guess");
    CHECK(d.propose(d.ctx, none, 1, out, 8, NULL, &e) == 0, "one id, no guess");
    /* Random sequences over 3 symbols against the slow rule. */
    uint64_t x = 12345;
    uint32_t s[64], want[16];
    int bad = 0;
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = 1 + (size_t)(trial % 60);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            s[i] = (uint32_t)(x >> 62) % 3;
        }
        size_t max = (size_t)(trial % 7), a = d.propose(d.ctx, s, n, out, max, NULL, &e);
        size_t b = slow(s, n, 1, 4, want, max);
        bad += a != b || memcmp(out, want, a * sizeof *out) != 0;
    }
    CHECK(bad == 0, "%d of 2000 random sequences differ from the rule", bad);
    k3_drafter_free(&d);
    CHECK(k3_drafter_ngram(&d, 0, 4, &e) == K3_EINPUT, "min 0 refused");
    e.code = 0;
    CHECK(k3_drafter_ngram(&d, 3, 2, &e) == K3_EINPUT, "min > max refused");
    e.code = 0;
    CHECK(k3_drafter_ngram(&d, 1, 17, &e) == K3_EINPUT, "max 17 refused");
}

static void test_choose(void)
{
    /* Trunk-bound (streamed trunk): a call costs far more than a row. */
    k3_spec_cost streamed = { 100.0, 1.0 }, rowbound = { 1.0, 100.0 };
    k3_spec_stats good = { 1000, 900 }, bad = { 1000, 10 }, fresh = { 0, 0 };
    CHECK(k3_spec_choose(&good, &streamed, 8, 0.03) == 8, "high acceptance, cheap rows: all");
    CHECK(k3_spec_choose(&bad, &rowbound, 8, 0.03) == 0, "low acceptance, dear rows: none");
    CHECK(k3_spec_choose(&good, &rowbound, 8, 0.03) == 0, "rows dearer than calls: none");
    CHECK(k3_spec_choose(&fresh, &streamed, 8, 0.03) > 0, "a fresh run tries drafting");
    CHECK(k3_spec_choose(&good, &streamed, 0, 0.03) == 0, "max 0: none");
    /* A gain under the margin is not taken: equal costs, acceptance 1/2:
     * n=1 gives 1.5 / 2 < 1, so none. */
    k3_spec_cost even = { 1.0, 1.0 };
    k3_spec_stats half = { 998, 498 };
    CHECK(k3_spec_choose(&half, &even, 4, 0.03) == 0, "no gain, no drafts");
}

int main(void)
{
    test_ngram();
    test_choose();
    return check_report("test_draft");
}

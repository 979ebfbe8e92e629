/* test_sample.c - the sampler (k3/sample.h): greedy is argmax with ties to
 * the lowest id, top-k 1 is greedy, a fixed seed gives a fixed sequence
 * (pinned: the same numbers on every machine), the filters keep what
 * they should, and the draws follow the distribution. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "k3/sample.h"

#define V 8

static void init(k3_sampler *s, size_t vocab)
{
    k3_err e = { 0, "" };
    CHECK(k3_sampler_init(s, vocab, &e) == K3_OK, "init: %s", e.msg);
}

static void test_greedy(void)
{
    k3_sampler s;
    init(&s, V);
    float l[V] = { 0.5f, 3.0f, -1.0f, 3.0f, 2.9f, NAN, 0.0f, -INFINITY };
    CHECK(k3_sample(&s, l, V, NULL, 0) == 1, "greedy: tie goes to the lowest id");
    /* The penalty moves the choice: 3/2 = 1.5 < 2.9. */
    s.repeat_penalty = 2.0f;
    uint32_t recent[] = { 1, 3, 1, 99 }; /* repeated and out-of-vocabulary ids too */
    CHECK(k3_sample(&s, l, V, recent, 4) == 4, "penalised greedy");
    /* A negative logit is multiplied: -1 * 2 = -2 stays below 0. */
    float neg[3] = { -1.0f, -1.5f, -3.0f };
    uint32_t r0[] = { 0 };
    CHECK(k3_sample(&s, neg, 3, r0, 1) == 1, "negative logits are multiplied");
    CHECK(neg[0] == -1.0f, "the logits are not modified");
    k3_sampler_free(&s);
}

static void test_top_k_one_is_greedy(void)
{
    k3_sampler s;
    init(&s, V);
    float l[V] = { 0.1f, 0.2f, 1.0f, 0.9f, 1.0f, -2.0f, 0.3f, 0.0f };
    s.temperature = 1.5f;
    s.top_k = 1;
    for (uint64_t seed = 0; seed < 50; seed++) {
        k3_sampler_seed(&s, seed);
        CHECK(k3_sample(&s, l, V, NULL, 0) == 2, "top-k 1 = greedy (seed %llu)",
              (unsigned long long)seed);
    }
    k3_sampler_free(&s);
}

/* The exact sequence for one seed and every filter on: pins the RNG, the
 * exponentials and the summation order. Any change to them changes what
 * users get for a given --seed, so it must be deliberate. */
static void test_fixed_seed(void)
{
    static const uint32_t want[24] = { 6, 2, 5, 0, 1, 5, 5, 0, 5, 2, 5, 6,
                                       5, 6, 5, 0, 2, 0, 5, 5, 6, 6, 2, 2 };
    float l[V] = { 1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, 2.0f, -3.0f };
    uint32_t recent[3] = { 2, 5, 2 };
    for (int round = 0; round < 2; round++) {
        k3_sampler s;
        init(&s, V);
        s.temperature = 0.9f;
        s.top_p = 0.95f;
        s.top_k = 6;
        s.min_p = 0.02f;
        s.repeat_penalty = 1.2f;
        if (round == 0)
            k3_sampler_seed(&s, 42);
        else
            s.seed = 42; /* the same, set as a field before the first draw */
        for (int i = 0; i < 24; i++) {
            uint32_t got = k3_sample(&s, l, V, recent, 3);
            CHECK(got == want[i], "round %d draw %d: got %u, want %u", round, i, got, want[i]);
        }
        k3_sampler_free(&s);
    }
    /* Another seed gives another sequence. */
    k3_sampler s;
    init(&s, V);
    s.temperature = 0.9f;
    k3_sampler_seed(&s, 43);
    int differ = 0;
    for (int i = 0; i < 24; i++)
        differ += k3_sample(&s, l, V, NULL, 0) != want[i];
    CHECK(differ > 0, "seed 43 repeats seed 42's sequence");
    k3_sampler_free(&s);
}

/* Draws n tokens and counts them. */
static void histogram(k3_sampler *s, const float *l, size_t vocab, int n, int *count)
{
    memset(count, 0, vocab * sizeof *count);
    for (int i = 0; i < n; i++)
        count[k3_sample(s, l, vocab, NULL, 0)]++;
}

static void test_distribution(void)
{
    enum { N = 40000 };
    /* p = 0.5, 0.25, 0.125, 0.125 at temperature 1. */
    float l[4] = { logf(0.5f), logf(0.25f), logf(0.125f), logf(0.125f) };
    const double p[4] = { 0.5, 0.25, 0.125, 0.125 };
    int count[4];
    k3_sampler s;
    init(&s, 4);
    s.temperature = 1.0f;
    k3_sampler_seed(&s, 7);
    histogram(&s, l, 4, N, count);
    for (int i = 0; i < 4; i++)
        CHECK(fabs((double)count[i] / N - p[i]) < 0.01, "id %d: frequency %.4f, want %.3f", i,
              (double)count[i] / N, p[i]);
    /* Temperature 2 flattens: p ~ sqrt(p) normalised. */
    s.temperature = 2.0f;
    histogram(&s, l, 4, N, count);
    double z = sqrt(0.5) + sqrt(0.25) + 2 * sqrt(0.125);
    CHECK(fabs((double)count[0] / N - sqrt(0.5) / z) < 0.01, "temperature 2: %.4f vs %.4f",
          (double)count[0] / N, sqrt(0.5) / z);
    s.temperature = 1.0f;
    /* top-p 0.7: 0.5 + 0.25 reaches it, so only ids 0 and 1, as 2:1. */
    s.top_p = 0.7f;
    histogram(&s, l, 4, N, count);
    CHECK(count[2] == 0 && count[3] == 0, "top-p 0.7 kept ids 2/3: %d %d", count[2], count[3]);
    CHECK(fabs((double)count[0] / N - 2.0 / 3.0) < 0.01, "top-p renormalises: %.4f",
          (double)count[0] / N);
    /* min-p 0.3: ids with p >= 0.15 (0 and 1). */
    s.top_p = 1.0f;
    s.min_p = 0.3f;
    histogram(&s, l, 4, N, count);
    CHECK(count[2] == 0 && count[3] == 0 && count[1] > 0, "min-p 0.3: %d %d %d", count[1], count[2],
          count[3]);
    /* top-k 3 with a tie at the cut: the lower id (2) stays. */
    s.min_p = 0.0f;
    s.top_k = 3;
    histogram(&s, l, 4, N, count);
    CHECK(count[3] == 0 && count[2] > 0, "top-k 3: ids 2/3 %d %d", count[2], count[3]);
    k3_sampler_free(&s);
}

static void test_check(void)
{
    k3_sampler s;
    k3_err e = { 0, "" };
    init(&s, 4);
    CHECK(k3_sampler_check(&s, &e) == K3_OK, "defaults are valid: %s", e.msg);
    s.top_p = 1.5f;
    CHECK(k3_sampler_check(&s, &e) == K3_EINPUT && strstr(e.msg, "top_p"), "top_p 1.5: %s", e.msg);
    s.top_p = 1.0f;
    s.temperature = -1.0f;
    e.code = 0;
    CHECK(k3_sampler_check(&s, &e) == K3_EINPUT, "negative temperature");
    k3_sampler_free(&s);
}

int main(void)
{
    test_greedy();
    test_top_k_one_is_greedy();
    test_fixed_seed();
    test_distribution();
    test_check();
    return check_report("test_sample");
}

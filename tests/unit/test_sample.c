/* test_sample.c - the sampler (k3/sample.h): greedy is argmax with ties to
 * the lowest id, top-k 1 is greedy, a fixed seed gives a fixed sequence
 * over positions 0..23 (pinned: the same numbers on every machine), a
 * position's token does not depend on what was sampled before, the filters
 * keep what they should, and the draws follow the distribution. */
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
    CHECK(k3_sample(&s, l, V, NULL, 0, 0) == 1, "greedy: tie goes to the lowest id");
    /* The penalty moves the choice: 3/2 = 1.5 < 2.9. */
    s.repeat_penalty = 2.0f;
    uint32_t recent[] = { 1, 3, 1, 99 }; /* repeated and out-of-vocabulary ids too */
    CHECK(k3_sample(&s, l, V, recent, 4, 1) == 4, "penalised greedy");
    /* A negative logit is multiplied: -1 * 2 = -2 stays below 0. */
    float neg[3] = { -1.0f, -1.5f, -3.0f };
    uint32_t r0[] = { 0 };
    CHECK(k3_sample(&s, neg, 3, r0, 1, 2) == 1, "negative logits are multiplied");
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
        CHECK(k3_sample(&s, l, V, NULL, 0, seed * 977) == 2, "top-k 1 = greedy (seed %llu)",
              (unsigned long long)seed);
    }
    k3_sampler_free(&s);
}

/* The exact tokens at positions 0..23 for one seed and every filter on
 * (from tools/k3ref.py's sample, the reference of k3/sample.h): pins the
 * draw, the exponentials and the summation order. Any change to them
 * changes what users get for a given --seed, so it must be deliberate. */
static void test_fixed_seed(void)
{
    static const uint32_t want[24] = { 6, 1, 2, 6, 5, 6, 6, 5, 6, 5, 5, 6,
                                       6, 6, 0, 5, 2, 2, 5, 6, 5, 1, 5, 6 };
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
            s.seed = 42; /* the same, set as a field */
        for (int i = 0; i < 24; i++) {
            uint32_t got = k3_sample(&s, l, V, recent, 3, (uint64_t)i);
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
        differ += k3_sample(&s, l, V, NULL, 0, (uint64_t)i) != want[i];
    CHECK(differ > 0, "seed 43 repeats seed 42's sequence");
    k3_sampler_free(&s);
}

/* A position's token depends only on (logits, parameters, seed, position):
 * positions sampled in a shuffled order, each after a different history
 * (other logits, other parameters, other positions, a greedy step), give
 * the tokens of the in-order run; far positions (2^20, 2^40, 2^64 - 1)
 * included. Distinct positions do give distinct draws. */
static void test_position_only(void)
{
    enum { N = 64 };
    float l[V] = { 1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, 2.0f, -3.0f };
    float other[V] = { -2.0f, 3.0f, 0.0f, 1.0f, 2.5f, -1.0f, 0.5f, 1.5f };
    uint32_t recent[3] = { 2, 5, 2 };
    static const uint64_t far[4] = { 1ull << 20, (1ull << 20) + 1, 1ull << 40, UINT64_MAX };
    uint64_t pos[N], x = 99;
    uint32_t ref[N];
    for (int i = 0; i < N; i++)
        pos[i] = i < N - 4 ? (uint64_t)i : far[i - (N - 4)];
    k3_sampler s;
    init(&s, V);
    s.temperature = 1.0f;
    s.top_k = 7;
    s.repeat_penalty = 1.1f;
    k3_sampler_seed(&s, 2026);
    for (int i = 0; i < N; i++)
        ref[i] = k3_sample(&s, l, V, recent, 3, pos[i]);
    int distinct = 0;
    for (int i = 1; i < N; i++)
        distinct += ref[i] != ref[0];
    CHECK(distinct > 0, "64 positions all gave token %u", ref[0]);
    CHECK(k3_sample_uniform(2026, 0) != k3_sample_uniform(2026, 1) &&
              k3_sample_uniform(2026, 1ull << 40) != k3_sample_uniform(2027, 1ull << 40),
          "the uniform ignores its position or seed");

    int order[N];
    for (int i = 0; i < N; i++)
        order[i] = i;
    for (int i = N - 1; i > 0; i--) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((x >> 33) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < N; k++) {
        int i = order[k];
        /* A different history before each: other logits at other positions,
         * other parameters, sometimes a greedy step. */
        s.temperature = k % 3 == 0 ? 0.0f : 0.7f;
        s.top_k = 0;
        s.repeat_penalty = 1.0f;
        for (int h = 0; h < k % 5; h++)
            (void)k3_sample(&s, other, V, NULL, 0, pos[i] + 1 + (uint64_t)h);
        s.temperature = 1.0f;
        s.top_k = 7;
        s.repeat_penalty = 1.1f;
        uint32_t got = k3_sample(&s, l, V, recent, 3, pos[i]);
        CHECK(got == ref[i], "position %llu shuffled: %u, in order %u", (unsigned long long)pos[i],
              got, ref[i]);
    }
    k3_sampler_free(&s);
}

/* Draws n tokens, at positions 0..n-1, and counts them. */
static void histogram(k3_sampler *s, const float *l, size_t vocab, int n, int *count)
{
    memset(count, 0, vocab * sizeof *count);
    for (int i = 0; i < n; i++)
        count[k3_sample(s, l, vocab, NULL, 0, (uint64_t)i)]++;
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
    test_position_only();
    test_distribution();
    test_check();
    return check_report("test_sample");
}

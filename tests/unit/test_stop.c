/* test_stop.c - stop strings over streamed text (gen/stop.h): the text
 * shown is exactly the text before the first stop string, however the
 * text is cut into pieces, and nothing of a stop string is ever shown. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gen/stop.h"

/* Feeds text in pieces of `step` bytes; returns what was shown and
 * whether it stopped. Checks that no release ends inside a stop string. */
static int matched; /* the last run's k3_stop.matched */

static void run(const char *const *stops, size_t nstops, const char *text, size_t step,
                k3_buf *shown, int *stopped)
{
    k3_err e = { 0, "" };
    k3_stop s;
    k3_stop_init(&s, stops, nstops);
    shown->len = 0;
    k3_buf_put(shown, "", 0, &e);
    *stopped = 0;
    size_t n = strlen(text);
    for (size_t at = 0; at < n && !*stopped; at += step) {
        size_t len = n - at < step ? n - at : step;
        CHECK(k3_stop_push(&s, text + at, len, shown, stopped, &e) == K3_OK, "push: %s", e.msg);
        for (size_t i = 0; i < nstops; i++)
            CHECK(!strstr(shown->data, stops[i]), "\"%s\" was shown", stops[i]);
    }
    if (!*stopped)
        k3_stop_flush(&s, shown, &e);
    matched = s.matched;
    k3_stop_free(&s);
}

int main(void)
{
    static const char *const stops[] = { "STOP", "\n\n", "abcabd" };
    k3_buf shown = { 0 };
    int stopped;
    for (size_t step = 1; step <= 9; step++) {
        run(stops, 3, "hello STOP world", step, &shown, &stopped);
        CHECK(stopped && !strcmp(shown.data, "hello ") && matched == 0, "step %zu: \"%s\"",
              step, shown.data);
        run(stops, 3, "one\ntwo\n\nthree", step, &shown, &stopped);
        CHECK(stopped && !strcmp(shown.data, "one\ntwo") && matched == 1, "step %zu: \"%s\"",
              step, shown.data);
        /* A false start: "abcab" then "c..." - the held bytes are released. */
        run(stops, 3, "xabcabcabdy", step, &shown, &stopped);
        CHECK(stopped && !strcmp(shown.data, "xabc") && matched == 2, "step %zu: \"%s\"", step,
              shown.data);
        /* No stop string: everything, including a held tail, comes out. */
        run(stops, 3, "no stop here, ST", step, &shown, &stopped);
        CHECK(!stopped && !strcmp(shown.data, "no stop here, ST") && matched == -1,
              "step %zu: \"%s\"", step, shown.data);
    }
    /* Without stop strings nothing is held. */
    k3_err e = { 0, "" };
    k3_stop s;
    k3_stop_init(&s, NULL, 0);
    shown.len = 0;
    k3_stop_push(&s, "abc", 3, &shown, &stopped, &e);
    CHECK(shown.len == 3 && !stopped, "no stop strings: %zu bytes released", shown.len);
    k3_stop_free(&s);
    k3_buf_free(&shown);
    return check_report("test_stop");
}

/* fuzz.h - shared by the fuzz targets in tests/fuzz/.
 *
 * Each fuzz_NAME.c defines the libFuzzer entry points below. The same file
 * is linked two ways:
 *   - with clang -fsanitize=fuzzer (make fuzz, tests/fuzz/run.sh): libFuzzer
 *     supplies main and mutates inputs;
 *   - with tests/fuzz/replay.c (every normal build, $(BUILD)/fuzz/replay_NAME):
 *     a plain main that feeds files to the same function, so the gate
 *     tests/gates/70-fuzz-regressions.sh replays every saved input without
 *     libFuzzer (and under ASan/UBSan in `make asan`).
 *
 * A target's contract: for ANY input it returns 0 after the code under test
 * either accepted the input (and then the target checks what acceptance
 * promises) or refused it with an error code and a message. Anything else
 * - a crash, a sanitizer report, a hang, or a broken promise (FZ_ASSERT) -
 * is a finding. */
#ifndef K3_TESTS_FUZZ_H
#define K3_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "k3/chat.h"
#include "k3/error.h"
#include "k3/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the code under test: prints and aborts (libFuzzer
 * saves the input as a crash). */
#define FZ_ASSERT(cond, ...)                                                            \
    do {                                                                                \
        if (!(cond))                                                                    \
            fz_abort(__FILE__, __LINE__, #cond, __VA_ARGS__);                           \
    } while (0)
void fz_abort(const char *file, int line, const char *cond, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((noreturn, format(printf, 4, 5)))
#endif
    ;

/* A refusal must carry a known code and a message (printed when
 * K3_FUZZ_VERBOSE is set, to see which seeds are accepted). */
void fz_check_refusal(const k3_err *e, int rc);
/* The same, for a refusal of input (K3_EINPUT): a parser given a small file
 * must not report running out of memory or an I/O failure. */
void fz_check_input_refusal(const k3_err *e, int rc);

/* A fresh private directory for the target's files (under /dev/shm when it
 * exists: the file targets write their input on every run). Removed, with
 * the files fz_write put there, at exit. */
const char *fz_tmpdir(void);

/* Writes data[0..n) to fz_tmpdir()/name (replacing it); returns the path
 * (static storage, valid until the next call). Aborts on I/O failure: the
 * harness, not the input, is broken then. */
const char *fz_write(const char *name, const void *data, size_t n);

/* Makes fz_tmpdir()/name a symbolic link to target (made absolute),
 * removed at exit. Aborts when target is not readable. */
void fz_link(const char *name, const char *target);

/* The tokenizer directory the tokenizer targets use: $K3_FUZZ_TOK, else
 * ../shared/k3-release when it holds tiktoken.model, else the small one the
 * seed maker writes ($K3_FUZZ_DATA/tok). Aborts when there is none. */
const char *fz_tokenizer_dir(void);

/* $K3_FUZZ_DATA: the data directory tests/fuzz/make_seeds.py fills (small
 * tokenizer, model checkpoints). Aborts when unset. */
const char *fz_data_dir(void);

/* Whether s[0..n) is valid UTF-8 (RFC 3629), decided independently of the
 * tokenizer's own decoder. */
int fz_utf8_valid(const uint8_t *s, size_t n);

/* Encodes text with tok and checks what k3/tokenizer.h promises: invalid
 * UTF-8 is refused with K3_EINPUT; valid text encodes, its ids decode
 * (piece by piece, and through the UTF-8 stream helper) to exactly the
 * text, and with allow_special == 0 no id is in the special range. Returns
 * the ids (malloc'd; NULL for refused text) with their count in *n. */
uint32_t *fz_check_encode(const k3_tokenizer *tok, const uint8_t *text, size_t len,
                          int allow_special, size_t *n);

/* The tokenizer of fz_tokenizer_dir(), loaded on first use (aborts when it
 * does not load). */
k3_tokenizer *fz_tokenizer(void);

/* Renders c and checks what k3/chat.h promises: the segments tile the
 * rendered text and none is empty; THE SPECIAL-TOKEN RULE: a text segment
 * (allow_special 0: every message, name, argument and tool text) never
 * encodes to a special id (fz_check_encode), and each structural segment
 * is exactly one special id; k3_chat_encode is the concatenation of the
 * segments' encodings. A refused render must carry a code and message. */
void fz_check_chat(const k3_tokenizer *tok, const k3_chat *c);

#endif

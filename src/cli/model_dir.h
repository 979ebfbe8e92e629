/* model_dir.h - the first check of a MODEL_DIR (or --tok DIR) argument, so
 * the first error a new user meets names the real problem:
 *   a path that does not exist  -> "models/k3-nan does not exist (did you
 *                                   mean models/k3-nano?)"
 *   a GGUF file                  -> "GGUF is not supported: k3 reads the
 *                                   release's safetensors checkpoint ..."
 *   any other file               -> "... is a file, not a model directory"
 * A directory passes (what it must hold is checked where it is read). */
#ifndef K3_CLI_MODEL_DIR_H
#define K3_CLI_MODEL_DIR_H

#include "k3/error.h"

/* what: how the message names the argument ("MODEL_DIR", "--tok"). K3_EINPUT
 * on the cases above. */
int k3_cli_check_dir(const char *dir, const char *what, k3_err *e);

#endif

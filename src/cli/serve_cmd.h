/* serve_cmd.h - `k3 serve MODEL_DIR --port N [options]`: the
 * OpenAI-compatible HTTP server (server/server.h). */
#ifndef K3_CLI_SERVE_CMD_H
#define K3_CLI_SERVE_CMD_H

/* argv[0] is "serve". Returns the exit code (k3/error.h). */
int k3_cmd_serve(int argc, char **argv);

#endif

/* pack_cmd.h - `k3 pack-trunk MODEL_DIR TRUNK_DIR [options]`: copies the
 * dense trunk into one aligned file (pack/trunk_pack.h). */
#ifndef K3_CLI_PACK_CMD_H
#define K3_CLI_PACK_CMD_H

/* argv[0] is "pack-trunk". Returns the exit code (k3/error.h). */
int k3_cmd_pack_trunk(int argc, char **argv);

#endif

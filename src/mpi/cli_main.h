/* cli_main.h - the k3 command's entry point in the MPI build: src/cli/main.c
 * is compiled again with -Dmain=k3_cli_main and this header forced in
 * (-include), so bin/k3-mpi's own main (src/mpi/main.c) can run it. */
#ifndef K3_MPI_CLI_MAIN_H
#define K3_MPI_CLI_MAIN_H

int k3_cli_main(int argc, char **argv);

#endif

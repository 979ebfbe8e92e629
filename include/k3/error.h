/* k3/error.h - status codes and the error record of the k3 API.
 *
 * Every fallible call returns one of these codes (it is also the CLI's exit
 * code) and fills a k3_err with a one-line message that names the file,
 * tensor or field at fault. */
#ifndef K3_ERROR_H
#define K3_ERROR_H

enum {
    K3_OK = 0,       /* success */
    K3_ERUNTIME = 1, /* runtime or I/O failure (out of memory, read error) */
    K3_EINPUT = 2,   /* bad usage or bad input (files, options, ids, text) */
    K3_EBUDGET = 3,  /* does not fit the memory budget */
    K3_EINVALID = 4  /* run invalid: a weight read failed after retries */
};

typedef struct k3_err {
    int code;        /* K3_OK until the first failure */
    char msg[1024];  /* the first failure's message */
} k3_err;

#endif

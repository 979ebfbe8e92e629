/* xxh3.c - see xxh3.h. The only file that includes xxhash.h; the Makefile
 * gives it (and only it) -idirafter /usr/include so cross compilers find the
 * header after their own system headers. */
#include "util/xxh3.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t k3_xxh3_64(const void *data, size_t n)
{
    return (uint64_t)XXH3_64bits(data, n);
}

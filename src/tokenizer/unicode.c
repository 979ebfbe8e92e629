/* unicode.c - lookups in the generated tables; see unicode.h. */
#include "tokenizer/unicode.h"

unsigned k3_uc_props(uint32_t cp)
{
    if (cp < 256)
        return k3_uc_latin1[cp];
    if (cp > 0x10FFFF)
        return 0;
    /* The last run starting at or before cp. Runs start at code point 0, so
     * it exists. */
    size_t lo = 0, hi = k3_uc_nruns;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((k3_uc_runs[mid] >> 8) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return k3_uc_runs[lo] & 0xFF;
}

int k3_uc_fold_az(uint32_t cp)
{
    if (cp >= 'a' && cp <= 'z')
        return (int)cp;
    size_t lo = 0, hi = k3_uc_nfold_az;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k3_uc_fold_az_table[mid][0] == cp)
            return (int)k3_uc_fold_az_table[mid][1];
        if (k3_uc_fold_az_table[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

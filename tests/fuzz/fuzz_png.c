/* fuzz_png.c - the image decoder of src/vision/image.h on arbitrary bytes as
 * PNG (libpng): byte 0..7 are forced to the PNG signature, so every input
 * reaches the PNG decoder. Seeds: small images of every mode Pillow writes
 * (tests/fuzz/make_seeds.py).
 *
 * Promises checked (image.h): a refusal is K3_EINPUT with a message (or
 * K3_ERUNTIME for out of memory) and leaves the image empty; an accepted
 * image has both sides in 1..K3_IMAGE_MAX_SIDE, at most K3_IMAGE_MAX_PIXELS
 * pixels, 3 or 4 channels, and every pixel byte readable. A build without
 * image support refuses everything with a message. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "vision/image.h"

static const uint8_t sig[] = { 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    FZ_ASSERT(buf != NULL, "out of memory");
    memcpy(buf, data, size);
    memcpy(buf, sig, size < sizeof sig ? size : sizeof sig);
    k3_image im;
    k3_err e = { 0, "" };
    int rc = k3_image_decode(buf, size, "input", &im, &e);
    free(buf);
    if (rc != K3_OK) {
        if (rc != K3_ERUNTIME)
            fz_check_input_refusal(&e, rc);
        FZ_ASSERT(im.px == NULL && im.width == 0, "a refused image is not empty");
        return 0;
    }
    FZ_ASSERT(im.width >= 1 && im.width <= K3_IMAGE_MAX_SIDE && im.height >= 1 &&
                  im.height <= K3_IMAGE_MAX_SIDE, "size %dx%d", im.width, im.height);
    FZ_ASSERT((size_t)im.width * (size_t)im.height <= K3_IMAGE_MAX_PIXELS, "too many pixels");
    FZ_ASSERT(im.channels == 3 || im.channels == 4, "channels %d", im.channels);
    unsigned sum = 0;
    size_t n = (size_t)im.width * (size_t)im.height * (size_t)im.channels;
    for (size_t i = 0; i < n; i++)
        sum += im.px[i];
    FZ_ASSERT(sum <= 255u * n, "pixel sum");
    k3_image_free(&im);
    return 0;
}

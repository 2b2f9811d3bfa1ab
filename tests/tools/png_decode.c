/* png_decode: decodes one image file through sl_image_decode (the sniffing
 * front door: PNG, JPEG or WebP) and writes its RGB HWC bytes, for the PIL oracle
 * in tests/integration/test_png_pil.sh and test_webp_pil.sh.
 *
 *   png_decode IN OUT      OUT gets width * height * 3 raw bytes
 *
 * Prints "W H FORMAT" on stdout. Exit status: 0 ok; 1 decode or I/O failure
 * (the error, and for a decode failure "code N" with the negative errno, on
 * stderr); 2 usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/file.h"
#include "common/image/image_decode.h"

#define PNG_DECODE_MAX_FILE ((size_t)1 << 30)
#define PNG_DECODE_MAX_PIXELS 100000000ull

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: png_decode IN OUT\n");
        return 2;
    }
    char err[256];
    char *buf = NULL;
    size_t len = 0;
    int rc = sl_file_read(argv[1], PNG_DECODE_MAX_FILE, &buf, &len, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "png_decode: %s\n", err);
        return 1;
    }
    sl_tensor_t out;
    sl_tensor_init(&out);
    sl_image_format_e fmt;
    int status = 1;
    rc = sl_image_decode((const uint8_t *)buf, len, PNG_DECODE_MAX_PIXELS, &out, &fmt, err,
                         sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "png_decode: '%s': %s (code %d)\n", argv[1], err, rc);
        goto out;
    }
    FILE *f = fopen(argv[2], "wbe");
    if (f == NULL) {
        perror("png_decode: fopen");
        goto out;
    }
    size_t wrote = fwrite(out.data, 1, out.nbytes, f);
    if (fclose(f) != 0 || wrote != out.nbytes) {
        fprintf(stderr, "png_decode: cannot write '%s'\n", argv[2]);
        goto out;
    }
    printf("%u %u %s\n", out.w, out.h, sl_image_format_name(fmt));
    status = 0;
out:
    sl_tensor_free(&out);
    free(buf);
    return status;
}

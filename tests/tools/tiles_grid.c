/* tiles_grid: sl_tiles_grid over many inputs, for the Python oracle in
 * tests/integration/test_tiles_grid.sh.
 *
 *   tiles_grid < queries
 *
 * Each input line is "WIDTH HEIGHT TILE MIN MAX"; each output line is
 * "COLS ROWS", or "error N" (the negative errno) when the grid is refused.
 * Exit status: 0 ok, 2 a malformed line. */
#include <inttypes.h>
#include <stdio.h>

#include "common/image/tiles.h"

int main(void)
{
    char line[256];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        uint32_t w, h, tile, mn, mx, cols, rows;
        if (sscanf(line, "%" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32, &w, &h,
                   &tile, &mn, &mx) != 5) {
            fprintf(stderr, "tiles_grid: bad line: %s", line);
            return 2;
        }
        int rc = sl_tiles_grid(w, h, tile, mn, mx, &cols, &rows);
        if (rc < 0) {
            printf("error %d\n", rc);
        } else {
            printf("%" PRIu32 " %" PRIu32 "\n", cols, rows);
        }
    }
    return 0;
}

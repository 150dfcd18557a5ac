/* Link test, part 1: the one file with the implementation. Part 2 only includes the header; the
   program links without duplicate or missing symbols. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <stdio.h>
int lwo_link_b(void);
int main(void) {
    int r = lwo_link_b();
    int ok = r == LWO_ERROR_INVALID_ARGUMENT;
    printf("link test: the header-only unit called lwo_create and got %s\n", lwo_result_string((lwo_result)r));
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}

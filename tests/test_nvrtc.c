/* NVRTC compiles lwo's embedded kernel source for every supported arch (no GPU needed), and a
   broken source is reported as LWO_ERROR_COMPILE with NVRTC's log. */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include <math.h>
#include "check.h"

static char *joined_source(void) {
    size_t i, n = 0, np = sizeof lwo__kernel_source_parts / sizeof *lwo__kernel_source_parts;
    char *s;
    for (i = 0; i < np; i++) n += strlen(lwo__kernel_source_parts[i]);
    s = (char *)malloc(n + 1);
    n = 0;
    for (i = 0; i < np; i++) { size_t k = strlen(lwo__kernel_source_parts[i]); memcpy(s + n, lwo__kernel_source_parts[i], k); n += k; }
    s[n] = 0;
    return s;
}

int main(int argc, char **argv) {
    static const char *const archs[] = { "sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120" };
    static const char *const kopts[] = { "--fmad=false", NULL };
    static char err[LWO__ERROR_CAP];
    lwo__nvrtc nv;
    lwo_result r;
    char *src = joined_source();
    size_t i;
    /* e.g. LWO_TEST_ARCHS="sm_90a" to compile fewer; the g++, clang and sanitizer builds of this
       test do two archs, since the gcc build already does all of them */
    const char *only = getenv("LWO_TEST_ARCHS");
    (void)argc;
    if (!only && (strstr(argv[0], "-cxx") || strstr(argv[0], "-clang") || strstr(argv[0], "-san"))) only = "sm_75 sm_90a";
    check_seed("test_nvrtc");
    r = lwo__nvrtc_load(&nv, NULL, err, sizeof err);
    CHECK(r == LWO_SUCCESS, "NVRTC loads: %s", err);
    if (r) { free(src); return CHECK_SUMMARY(); }
    printf("NVRTC %d from %s\n", nv.version, nv.path);
    for (i = 0; i < sizeof archs / sizeof *archs; i++) {
        unsigned char *cubin = NULL;
        size_t size = 0;
        double t0 = lwo__now_ms();
        if (only && !strstr(only, archs[i])) continue;
        r = lwo__nvrtc_compile(&nv, src, "lwo_kernels.cu", archs[i], kopts, &cubin, &size, err, sizeof err);
        CHECK(r == LWO_SUCCESS && size > 1000, "%s: %s", archs[i], err);
        /* an ELF cubin */
        CHECK(cubin && size > 4 && memcmp(cubin, "\x7f" "ELF", 4) == 0, "%s: cubin is ELF", archs[i]);
        printf("  %-7s %7zu bytes in %6.0f ms\n", archs[i], size, lwo__now_ms() - t0);
        free(cubin);
    }
    {
        unsigned char *cubin = NULL;
        size_t size = 0;
        r = lwo__nvrtc_compile(&nv, "extern \"C\" __global__ void k(int *p) { p[0] = undefined_name; }", "broken.cu", "sm_80", NULL, &cubin, &size, err, sizeof err);
        CHECK_EQ_INT(r, LWO_ERROR_COMPILE);
        CHECK(strstr(err, "undefined_name") != NULL && strstr(err, "broken.cu") != NULL, "the NVRTC log is in the message: %s", err);
        r = lwo__nvrtc_compile(&nv, "extern \"C\" __global__ void k(int *p) { p[0] = 1; }", "bad_arch.cu", "sm_12345", NULL, &cubin, &size, err, sizeof err);
        CHECK_EQ_INT(r, LWO_ERROR_COMPILE);
    }
    {
        lwo__nvrtc none;
        r = lwo__nvrtc_load(&none, "/nonexistent/libnvrtc.so.13", err, sizeof err);
        /* the explicit path fails, the search continues and finds the real one */
        CHECK(r == LWO_SUCCESS, "the search goes on past a bad explicit path");
        if (!r) lwo__nvrtc_unload(&none);
    }
    lwo__nvrtc_unload(&nv);
    free(src);
    return CHECK_SUMMARY();
}

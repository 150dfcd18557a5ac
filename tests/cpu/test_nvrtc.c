/* NVRTC compiles lwo's embedded kernel source for every supported arch (no GPU needed), and a
   broken source is reported as LWO_ERROR_COMPILE with NVRTC's log. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"
#include <sys/wait.h>

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
    static char err[LWO__ERROR_CAP];
    lwo__nvrtc nv_lib;
    lwo_result r;
    char *src = joined_source();
    size_t i;
    /* e.g. LWO_TEST_ARCHS="sm_90a" to compile fewer; the g++, clang and sanitizer builds of this
       test do two archs, since the gcc build already does all of them */
    const char *only = getenv("LWO_TEST_ARCHS");
    (void)argc;
    int only_base = 0, all_variants = getenv("LWO_TEST_ALL_VARIANTS") != NULL;
    if (!only && (strstr(argv[0], "-cxx") || strstr(argv[0], "-clang") || strstr(argv[0], "-san"))) { only = "sm_75 sm_90a"; only_base = 1; }
    check_seed("test_nvrtc");
    r = lwo__nvrtc_load(&nv_lib, NULL, err, sizeof err);
    CHECK(r == LWO_SUCCESS, "NVRTC loads: %s", err);
    if (r) { free(src); return CHECK_SUMMARY(); }
    printf("NVRTC %d from %s\n", nv_lib.version, nv_lib.path);
    fflush(stdout);
    /* every arch x (the base module + each GEMM variant); two compiles at a time, one per core */
    {
        static const char *const variants[] = { NULL, "-DLWO_GEMM_VARIANT_bf16", "-DLWO_GEMM_VARIANT_f16", "-DLWO_GEMM_VARIANT_s8", "-DLWO_GEMM_VARIANT_e4m3",
                                                 "-DLWO_GEMM_VARIANT_bf16_fp8" };
        size_t nv = only_base ? 1 : sizeof variants / sizeof *variants, v, running = 0;
        int status;
        for (i = 0; i < sizeof archs / sizeof *archs; i++) {
            if (only && !strstr(only, archs[i])) continue;
            for (v = 0; v < nv; v++) {
                pid_t pid;
                /* each GEMM variant takes ptxas 25-60 s per arch on CI's two cores: the two mma.sync
                   families (sm_80, sm_90a) get every variant, the others the base module, unless
                   LWO_TEST_ALL_VARIANTS is set */
                if (v > 0 && !all_variants && strcmp(archs[i], "sm_80") != 0 && strcmp(archs[i], "sm_90a") != 0) continue;
                if (running == 2) { pid_t w = wait(&status); CHECK(w > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "a compile failed (see above)"); running--; }
                pid = fork();
                if (pid == 0) {
                    unsigned char *cubin = NULL;
                    size_t size = 0;
                    const char *opts[3];
                    double t0 = lwo__now_ms();
                    opts[0] = "--fmad=false"; opts[1] = variants[v]; opts[2] = NULL;
                    r = lwo__nvrtc_compile(&nv_lib, src, "lwo_kernels.cu", archs[i], opts, &cubin, &size, err, sizeof err);
                    if (r || size < 1000 || memcmp(cubin, "\x7f" "ELF", 4) != 0) { printf("FAIL %s %s: %s\n", archs[i], variants[v] ? variants[v] : "base", err); fflush(stdout); _exit(1); }
                    printf("  %-7s %-26s %8zu bytes in %6.0f ms\n", archs[i], variants[v] ? variants[v] + 2 : "base", size, lwo__now_ms() - t0);
                    fflush(stdout);
                    _exit(0);
                }
                CHECK(pid > 0, "fork");
                if (pid > 0) running++;
            }
        }
        while (running) { pid_t w = wait(&status); CHECK(w > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "a compile failed (see above)"); running--; }
    }
    {
        unsigned char *cubin = NULL;
        size_t size = 0;
        r = lwo__nvrtc_compile(&nv_lib, "extern \"C\" __global__ void k(int *p) { p[0] = undefined_name; }", "broken.cu", "sm_80", NULL, &cubin, &size, err, sizeof err);
        CHECK_EQ_INT(r, LWO_ERROR_COMPILE);
        CHECK(strstr(err, "undefined_name") != NULL && strstr(err, "broken.cu") != NULL, "the NVRTC log is in the message: %s", err);
        r = lwo__nvrtc_compile(&nv_lib, "extern \"C\" __global__ void k(int *p) { p[0] = 1; }", "bad_arch.cu", "sm_12345", NULL, &cubin, &size, err, sizeof err);
        CHECK_EQ_INT(r, LWO_ERROR_COMPILE);
    }
    {
        lwo__nvrtc none;
        r = lwo__nvrtc_load(&none, "/nonexistent/libnvrtc.so.13", err, sizeof err);
        /* the explicit path fails, the search continues and finds the real one */
        CHECK(r == LWO_SUCCESS, "the search goes on past a bad explicit path");
        if (!r) lwo__nvrtc_unload(&none);
    }
    lwo__nvrtc_unload(&nv_lib);
    free(src);
    return CHECK_SUMMARY();
}

/* warm_cache: fills an lwo cubin cache for one arch on a machine without that GPU (or without any),
   so a GPU run starts from cubins instead of spending minutes in NVRTC. It builds what a context
   would build on first use, under the keys lwo__module_build computes: lwo's own module, the four
   GEMM variants, and the diffusion examples' module (examples/dit_kernels.cu).

   Usage: warm_cache [--arch sm_90a] [--jobs 2] <cache folder>
   The cache folder is what LWO_CACHE_DIR names at run time. Cache lookup ignores the NVRTC version
   in the file name, so a cubin from this machine's NVRTC is what the GPU run loads: use the same
   NVRTC major version as that machine's driver accepts. */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include "../examples/dit_common.h"
#include <sys/wait.h>
#include <unistd.h>

static char *join_parts(const char *const *parts, size_t n) {
    size_t i, total = 0;
    char *s;
    for (i = 0; i < n; i++) total += strlen(parts[i]);
    s = (char *)malloc(total + 1);
    if (!s) return NULL;
    for (total = 0, i = 0; i < n; i++) { size_t k = strlen(parts[i]); memcpy(s + total, parts[i], k); total += k; }
    s[total] = 0;
    return s;
}

/* Compiles one module and stores it as the runtime would: same key, same file format. */
static int warm_one(lwo_context *ctx, const char *const *parts, size_t nparts, const char *name, const char *const *opts,
                    const char *label) {
    uint64_t key = lwo__module_key(parts, nparts, ctx->info.arch, opts);
    unsigned char *file = NULL, *cubin = NULL;
    const unsigned char *found = NULL;
    size_t size = 0;
    double t0 = lwo__now_ms();
    char *src;
    lwo_result r;
    if (lwo__cache_lookup(ctx, key, &file, &found, &size)) {
        printf("  %-8s %-12s cached\n", ctx->info.arch, label);
        LWO_FREE(file);
        return 0;
    }
    src = join_parts(parts, nparts);
    if (!src) return 1;
    r = lwo__nvrtc_compile(&ctx->nvrtc, src, name, ctx->info.arch, opts, &cubin, &size, ctx->error, sizeof ctx->error);
    free(src);
    if (r) { printf("FAIL %s %s:\n%s\n", ctx->info.arch, label, ctx->error); return 1; }
    lwo__cache_store(ctx, key, cubin, size);
    printf("  %-8s %-12s %8zu bytes in %6.1f s\n", ctx->info.arch, label, size, (lwo__now_ms() - t0) / 1000.0);
    LWO_FREE(cubin);
    return 0;
}

int main(int argc, char **argv) {
    static lwo_context ctx; /* only the fields the cache and NVRTC helpers read */
    static const char *const kopts[] = { "--fmad=false", NULL };
    const char *arch = "sm_90a", *dir = NULL;
    int jobs = 2, i, running = 0, failed = 0, status;
    const size_t nparts = sizeof lwo__kernel_source_parts / sizeof *lwo__kernel_source_parts;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc) arch = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else { fprintf(stderr, "usage: %s [--arch sm_90a] [--jobs N] <cache folder>\n", argv[0]); return 2; }
    }
    if (!dir || jobs < 1) { fprintf(stderr, "usage: %s [--arch sm_90a] [--jobs N] <cache folder>\n", argv[0]); return 2; }
    snprintf(ctx.info.arch, sizeof ctx.info.arch, "%s", arch);
    ctx.cache_dir = (char *)dir;
    if (lwo__nvrtc_load(&ctx.nvrtc, NULL, ctx.error, sizeof ctx.error)) { fprintf(stderr, "%s\n", ctx.error); return 1; }
    if (!lwo__mkdir_p(dir)) { fprintf(stderr, "cannot create %s\n", dir); return 1; }
    printf("NVRTC %d, arch %s, cache %s\n", ctx.nvrtc.version, arch, dir);
    fflush(stdout);
    /* job 0: lwo's module; 1 to LWO__GEMM_VARIANTS: the GEMM variants; then the examples' module.
       One process each. */
    for (i = 0; i < LWO__GEMM_VARIANTS + 2; i++) {
        pid_t pid;
        if (running == jobs) { if (wait(&status) > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failed++; running--; }
        pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            int rc;
            if (i == 0) rc = warm_one(&ctx, lwo__kernel_source_parts, nparts, "lwo_kernels.cu", kopts, "base");
            else if (i <= LWO__GEMM_VARIANTS) {
                char def[64];
                const char *opts[3];
                snprintf(def, sizeof def, "-DLWO_GEMM_VARIANT_%s", lwo__gemm_variants[i - 1]);
                opts[0] = "--fmad=false"; opts[1] = def; opts[2] = NULL;
                rc = warm_one(&ctx, lwo__kernel_source_parts, nparts, "lwo_gemm.cu", opts, lwo__gemm_variants[i - 1]);
            } else {
                /* dit_module_create hands lwo_module_create the joined source as one part */
                static const char *const dopts[] = { "--fmad=false", NULL };
                char *src = join_parts(dit_kernel_source_parts, sizeof dit_kernel_source_parts / sizeof *dit_kernel_source_parts);
                const char *one[1];
                one[0] = src;
                rc = src ? warm_one(&ctx, one, 1, "dit_kernels.cu", dopts, "dit") : 1;
                free(src);
            }
            fflush(stdout);
            _exit(rc);
        }
        running++;
    }
    while (running) { if (wait(&status) > 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) failed++; running--; }
    return failed ? 1 : 0;
}

/* NVRTC compiles the diffusion examples' kernel source (examples/dit_kernels.cu, as embedded in
   examples/dit_common.h) for every arch lwo supports, with the options the examples use; no GPU
   needed. On the tensor-core archs ptxas's report of the flash-attention kernels must show no
   stack frame and no spills: their accumulators, scores and Q fragments are meant to live in
   registers, and a spill would put local memory in the loop over key tiles. The kernels' results
   are checked on the GPU by tests/test_dit_selftest.c. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include "../../examples/dit_common.h"
#include "../check.h"

/* Compiles src for arch with ptxas's -v and checks its report of each flash kernel. */
static void check_ptxas_report(const lwo__nvrtc *nv, const char *src, const char *arch) {
    static const char *const flash[] = { "dit_flash_attention_hd64", "dit_flash_attention_hd128" };
    char archopt[32];
    const char *opts[5];
    lwo__nvrtcProgram p = NULL;
    size_t logn = 0, k;
    char *log = NULL;
    int rc;
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    opts[0] = archopt; opts[1] = "-std=c++17"; opts[2] = "-default-device"; opts[3] = "--fmad=false"; opts[4] = "--ptxas-options=-v";
    rc = nv->nvrtcCreateProgram(&p, src, "dit_kernels.cu", 0, NULL, NULL);
    if (rc == 0) rc = nv->nvrtcCompileProgram(p, 5, opts);
    if (p && nv->nvrtcGetProgramLogSize(p, &logn) == 0 && (log = (char *)malloc(logn + 1)) != NULL) { log[0] = 0; nv->nvrtcGetProgramLog(p, log); log[logn] = 0; }
    CHECK(rc == 0 && log, "%s: the compile with ptxas -v (error %d)", arch, rc);
    for (k = 0; rc == 0 && log && k < sizeof flash / sizeof *flash; k++) {
        char key[96];
        const char *at, *used;
        int stack = -1, st = -1, ld = -1, regs = -1;
        snprintf(key, sizeof key, "Function properties for %s\n", flash[k]);
        at = strstr(log, key);
        /* the next line: "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" */
        if (at) { at += strlen(key); sscanf(at, "ptxas . %d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &stack, &st, &ld); }
        used = at ? strstr(at, "Used ") : NULL;
        if (used) sscanf(used, "Used %d registers", &regs);
        CHECK(at && stack == 0 && st == 0 && ld == 0 && regs > 0, "%s %s: stack %d, spill stores %d, spill loads %d (want 0, 0, 0)", arch, flash[k], stack, st, ld);
        printf("  %-7s %-26s %3d registers, %d bytes stack, %d + %d bytes spilled\n", arch, flash[k], regs, stack, st, ld);
    }
    free(log);
    if (p) nv->nvrtcDestroyProgram(&p);
}

int main(void) {
    static const char *const archs[] = { "sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120" };
    static const char *const kernels[] = { "dit_patchify", "dit_time_embed", "dit_silu_bf16", "dit_condition", "dit_embed_pos",
                                           "dit_ln_modulate", "dit_gate_residual", "dit_gelu_tanh_bf16", "dit_gelu_tanh_bf16_2d", "dit_attention_hd64",
                                           "dit_attention_hd128", "dit_qkv_to_bf16", "dit_flash_attention_hd64", "dit_flash_attention_hd128",
                                           "dit_euler", "dit_step_advance" };
    static char err[LWO__ERROR_CAP];
    lwo__nvrtc nv;
    size_t i, k, n = 0, np = sizeof dit_kernel_source_parts / sizeof *dit_kernel_source_parts;
    char *src;
    lwo_result r = lwo__nvrtc_load(&nv, NULL, err, sizeof err);
    CHECK(r == LWO_SUCCESS, "NVRTC loads: %s", err);
    if (r) return CHECK_SUMMARY();
    for (i = 0; i < np; i++) n += strlen(dit_kernel_source_parts[i]);
    src = (char *)malloc(n + 1);
    for (n = 0, i = 0; i < np; i++) { size_t m = strlen(dit_kernel_source_parts[i]); memcpy(src + n, dit_kernel_source_parts[i], m); n += m; }
    src[n] = 0;
    for (k = 0; k < sizeof kernels / sizeof *kernels; k++) CHECK(strstr(src, kernels[k]) != NULL, "the source has %s", kernels[k]);
    for (i = 0; i < sizeof archs / sizeof *archs; i++) {
        unsigned char *cubin = NULL;
        size_t size = 0;
        const char *opts[2] = { "--fmad=false", NULL };
        double t0 = lwo__now_ms();
        r = lwo__nvrtc_compile(&nv, src, "dit_kernels.cu", archs[i], opts, &cubin, &size, err, sizeof err);
        CHECK(r == LWO_SUCCESS && size > 1000 && memcmp(cubin, "\x7f" "ELF", 4) == 0, "%s: %s", archs[i], err);
        /* every kernel is in the cubin under its extern "C" name */
        for (k = 0; r == LWO_SUCCESS && k < sizeof kernels / sizeof *kernels; k++) {
            size_t j, len = strlen(kernels[k]);
            int found = 0;
            for (j = 0; j + len <= size && !found; j++) found = memcmp(cubin + j, kernels[k], len) == 0 && cubin[j + len] == 0;
            CHECK(found, "%s: the cubin has %s", archs[i], kernels[k]);
        }
        printf("  %-7s %8zu bytes in %6.0f ms\n", archs[i], size, lwo__now_ms() - t0);
        LWO_FREE(cubin);
        if (strcmp(archs[i], "sm_75")) check_ptxas_report(&nv, src, archs[i]);
    }
    free(src);
    lwo__nvrtc_unload(&nv);
    return CHECK_SUMMARY();
}

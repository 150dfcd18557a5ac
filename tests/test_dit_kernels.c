/* NVRTC compiles the diffusion examples' kernel source (examples/dit_kernels.cu, as embedded in
   examples/dit_common.h) for every arch lwo supports, with the options the examples use; no GPU
   needed. The kernels' results are checked on the GPU by `diffuse --selftest`. */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include "../examples/dit_common.h"
#include "check.h"

int main(void) {
    static const char *const archs[] = { "sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120" };
    static const char *const kernels[] = { "dit_patchify", "dit_time_embed", "dit_silu_bf16", "dit_condition", "dit_embed_pos",
                                           "dit_ln_modulate", "dit_gate_residual", "dit_gelu_tanh_bf16", "dit_gelu_tanh_bf16_2d", "dit_attention_hd64",
                                           "dit_attention_hd128", "dit_euler", "dit_step_advance" };
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
    }
    free(src);
    lwo__nvrtc_unload(&nv);
    return CHECK_SUMMARY();
}

/* hello.c - the smallest complete use of lwo: device info, a cold and a warm start, and an
   fp8 round trip (bf16 -> fp8 e4m3 with a computed scale -> bf16) checked against the CPU.
   Build: cc -std=c99 -O2 examples/hello.c -ldl -lm -o hello */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static int fail(lwo_context *ctx, lwo_result r, const char *what) {
    fprintf(stderr, "hello: %s failed: %s\n  %s\n", what, lwo_result_string(r), lwo_last_error(ctx));
    lwo_destroy(ctx);
    return 1;
}

static void quiet(void *user, lwo_log_level level, const char *msg) { (void)user; (void)level; (void)msg; }

int main(void) {
    lwo_desc desc;
    lwo_context *ctx = NULL;
    lwo_result r;
    lwo_context_info info;
    lwo_startup_times cold;
    lwo_quantize_desc qd;
    enum { N = 1 << 20 };
    uint64_t shape[1] = { N }, one[1] = { 1 };
    lwo_tensor *x, *q, *y, *scale;
    uint16_t *hx = (uint16_t *)malloc(N * 2), *hy = (uint16_t *)malloc(N * 2);
    uint8_t *hq = (uint8_t *)malloc(N);
    float s_gpu, s_cpu;
    double err = 0, ref = 0;
    int i, mismatches = 0;

    memset(&desc, 0, sizeof desc);
    desc.vram_budget = 64ull << 20;  /* this example needs a few MiB */
    desc.log = quiet;                /* failures are reported below, through lwo_last_error */
    /* start twice: the first start compiles (or finds the cache), the second must hit the cache */
    r = lwo_create(&desc, &ctx);
    if (r) return fail(ctx, r, "lwo_create");
    lwo_context_get_info(ctx, &info);
    cold = info.startup;
    lwo_destroy(ctx);
    r = lwo_create(&desc, &ctx);
    if (r) return fail(ctx, r, "lwo_create (second)");
    lwo_context_get_info(ctx, &info);   /* the device, this start's times, the arena */
    printf("lwo %d.%d.%d on %s: compute %d.%d (%s), %d SMs, %.1f GiB, driver %d\n", LWO_VERSION_MAJOR, LWO_VERSION_MINOR,
           LWO_VERSION_PATCH, info.device.name, info.device.cc_major, info.device.cc_minor, info.device.arch, info.device.sm_count,
           info.device.total_memory / 1073741824.0, info.device.driver_version);
    printf("first start  %7.1f ms (cuInit %.1f, kernels %s %.1f ms)\n", cold.total_ms, cold.cu_init_ms,
           cold.module_from_cache ? "from cache" : "compiled", cold.module_ms);
    printf("second start %7.1f ms (cuInit %.1f, kernels %s %.1f ms)\n", info.startup.total_ms, info.startup.cu_init_ms,
           info.startup.module_from_cache ? "from cache" : "compiled", info.startup.module_ms);

    for (i = 0; i < N; i++) hx[i] = lwo_ref_f32_to_bf16((float)(sin(i * 0.001) * 30.0 + cos(i * 0.37)));
    if ((r = lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, shape, &x)) || (r = lwo_tensor_create(ctx, LWO_DTYPE_F8_E4M3, 1, shape, &q)) ||
        (r = lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, shape, &y)) || (r = lwo_tensor_create(ctx, LWO_DTYPE_F32, 1, one, &scale)))
        return fail(ctx, r, "lwo_tensor_create");
    memset(&qd, 0, sizeof qd);   /* per tensor, the scale computed first: absmax / 448 */
    qd.src = x; qd.dst = q; qd.scales = scale; qd.compute_scale = 1;
    if ((r = lwo_tensor_upload(ctx, x, hx, N * 2)) || (r = lwo_quantize(ctx, &qd)) ||
        (r = lwo_tensor_download(ctx, scale, &s_gpu, 4)) || (r = lwo_convert(ctx, NULL, q, y, s_gpu)) ||
        (r = lwo_tensor_download(ctx, q, hq, N)) || (r = lwo_tensor_download(ctx, y, hy, N * 2)))
        return fail(ctx, r, "the fp8 round trip");
    s_cpu = lwo_ref_fp8_scale(hx, LWO_DTYPE_BF16, N, LWO_DTYPE_F8_E4M3);
    for (i = 0; i < N; i++) {
        float a = lwo_ref_bf16_to_f32(hx[i]), b = lwo_ref_bf16_to_f32(hy[i]);
        uint8_t want = lwo_ref_f32_to_fp8(a * (1.0f / s_cpu), LWO_DTYPE_F8_E4M3);
        mismatches += hq[i] != want;
        err += (double)(a - b) * (a - b);
        ref += (double)a * a;
    }
    printf("fp8 round trip of %d values: scale %g (CPU %g), %d codes differ from the CPU reference, relative L2 error %.2e\n",
           N, s_gpu, s_cpu, mismatches, sqrt(err / ref));
    free(hx); free(hy); free(hq);
    lwo_destroy(ctx);
    return (mismatches == 0 && s_gpu == s_cpu) ? 0 : 1;
}

/* bench.c - lwo's memory-bound kernels against the device copy ceiling measured in the same run.
   Prints "key value" lines (also to $LWO_BENCH_OUT if set) that tests/bench/bench_peers.py puts beside
   PyTorch's numbers. `bench --startup` times one start (create to first kernel) and exits. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lwo_context *ctx;
static FILE *out;

static void emit(const char *key, double v) {
    printf("%-40s %12.4f\n", key, v);
    if (out) fprintf(out, "%s %.6f\n", key, v);
}

static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return x < y ? -1 : x > y; }

/* Median over 20 timed runs (after 3 warm-ups) of fn, in ms, with events on the compute stream. */
typedef lwo_result (*bench_fn)(void *);
static float time_ms(bench_fn fn, void *arg) {
    lwo_event *a, *b;
    float t[20];
    int i;
    lwo_event_create(ctx, &a);
    lwo_event_create(ctx, &b);
    for (i = 0; i < 3; i++) fn(arg);
    for (i = 0; i < 20; i++) {
        lwo_event_record(ctx, a, NULL);
        if (fn(arg)) { printf("bench: %s\n", lwo_last_error(ctx)); exit(1); }
        lwo_event_record(ctx, b, NULL);
        lwo_event_synchronize(ctx, b);
        lwo_event_elapsed_ms(ctx, a, b, &t[i]);
    }
    lwo_event_destroy(ctx, a);
    lwo_event_destroy(ctx, b);
    qsort(t, 20, sizeof *t, cmpf);
    return (t[9] + t[10]) / 2;
}

typedef struct { lwo_tensor *a, *b, *c, *d; } args4;
static lwo_result do_copy(void *p) {
    args4 *x = (args4 *)p;
    return ctx->cu.cuMemcpyDtoDAsync(lwo_tensor_device_ptr(x->b), lwo_tensor_device_ptr(x->a), lwo_tensor_bytes(x->a), ctx->compute) ? LWO_ERROR_CUDA : LWO_SUCCESS;
}
static lwo_result do_upcast(void *p) { args4 *x = (args4 *)p; return lwo_convert(ctx, NULL, x->a, x->b, 1.0f); }
static lwo_result do_act_quant(void *p) {
    args4 *x = (args4 *)p;
    lwo_quantize_desc qd;
    memset(&qd, 0, sizeof qd);
    qd.src = x->a; qd.dst = x->b; qd.scales = x->c; qd.per_row = 1;
    return lwo_quantize(ctx, &qd);
}
static lwo_result do_fp8_quant(void *p) {
    args4 *x = (args4 *)p;
    lwo_quantize_desc qd;
    memset(&qd, 0, sizeof qd);
    qd.src = x->a; qd.dst = x->b; qd.scales = x->c; qd.compute_scale = 1;
    return lwo_quantize(ctx, &qd);
}

static void quiet(void *u, lwo_log_level l, const char *m) { (void)u; if (l <= LWO_LOG_WARN) fprintf(stderr, "lwo: %s\n", m); }

int main(int argc, char **argv) {
    lwo_desc d;
    lwo_result r;
    args4 x;
    uint64_t n = 1ull << 30, one = 1;
    float ms;
    memset(&d, 0, sizeof d);
    d.log = quiet;
    if (argc > 1 && strcmp(argv[1], "--startup") == 0) {
        /* one start in a fresh process: create, then the first kernel, then wait for it */
        double t0 = lwo__now_ms(), t1;
        lwo_context_info ci;
        const lwo_startup_times *st = &ci.startup;
        lwo_tensor *a, *b;
        d.vram_budget = 256ull << 20;
        r = lwo_create(&d, &ctx);
        if (r) { printf("lwo_create: %s\n", lwo_last_error(ctx)); return 1; }
        n = 4096;
        lwo_tensor_create(ctx, LWO_DTYPE_F8_E4M3, 1, &n, &a);
        lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, &n, &b);
        lwo_convert(ctx, NULL, a, b, 1.0f);
        lwo_stream_synchronize(ctx, NULL);
        t1 = lwo__now_ms();
        memset(&ci, 0, sizeof ci);
        lwo_context_get_info(ctx, &ci);
        printf("startup %s: create+first kernel %.1f ms, cuInit %.1f ms, beyond cuInit %.1f ms (kernels %.1f ms, arena %.1f ms, context %.1f ms)\n",
               st->module_from_cache ? "warm" : "cold", t1 - t0, st->cu_init_ms, t1 - t0 - st->cu_init_ms, st->module_ms, st->arena_ms, st->context_ms);
        if (getenv("LWO_BENCH_OUT") && (out = fopen(getenv("LWO_BENCH_OUT"), "a")) != NULL) {
            fprintf(out, "startup_%s_beyond_cuinit_ms %.3f\nstartup_%s_cuinit_ms %.3f\n", st->module_from_cache ? "warm" : "cold", t1 - t0 - st->cu_init_ms,
                    st->module_from_cache ? "warm" : "cold", st->cu_init_ms);
            fclose(out);
        }
        lwo_destroy(ctx);
        return 0;
    }
    if (getenv("LWO_BENCH_OUT")) out = fopen(getenv("LWO_BENCH_OUT"), "a");
    d.vram_budget = 12ull << 30;
    r = lwo_create(&d, &ctx);
    if (r) { printf("lwo_create: %s\n", lwo_last_error(ctx)); return 1; }
    memset(&x, 0, sizeof x);
    /* device copy ceiling: 2 GiB copied, bytes read + written */
    {
        uint64_t m = 2ull << 30;
        lwo_tensor_create(ctx, LWO_DTYPE_U8, 1, &m, &x.a);
        lwo_tensor_create(ctx, LWO_DTYPE_U8, 1, &m, &x.b);
        lwo_tensor_fill_bytes(ctx, NULL, x.a, 0x3c);
        ms = time_ms(do_copy, &x);
        emit("copy_ceiling_TBps", 2.0 * (double)m / ms / 1e9);
        lwo_tensor_destroy(ctx, x.a); lwo_tensor_destroy(ctx, x.b);
    }
    /* upcast e4m3 -> bf16: 1 B read + 2 B written per element */
    lwo_tensor_create(ctx, LWO_DTYPE_F8_E4M3, 1, &n, &x.a);
    lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, &n, &x.b);
    lwo_tensor_fill_bytes(ctx, NULL, x.a, 0x3c); /* 1.5, not zero */
    ms = time_ms(do_upcast, &x);
    emit("upcast_e4m3_bf16_TBps", 3.0 * (double)n / ms / 1e9);
    emit("upcast_e4m3_bf16_ms", ms);
    lwo_tensor_destroy(ctx, x.a); lwo_tensor_destroy(ctx, x.b);
    /* per-token int8 quantize of x [16384, 8192] bf16: 2 B read + 1 B written per element, + scales */
    {
        uint64_t shape[2] = { 16384, 8192 }, i, cnt = shape[0] * shape[1];
        uint16_t *h = (uint16_t *)malloc(cnt * 2);
        for (i = 0; i < cnt; i++) h[i] = lwo_ref_f32_to_bf16((float)((int)(i * 2654435761u % 2001) - 1000) * 0.01f);
        lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, shape, &x.a);
        lwo_tensor_create(ctx, LWO_DTYPE_I8, 2, shape, &x.b);
        lwo_tensor_create(ctx, LWO_DTYPE_F32, 1, shape, &x.c);
        lwo_tensor_upload(ctx, x.a, h, cnt * 2);
        ms = time_ms(do_act_quant, &x);
        emit("quant_act_int8_TBps", (3.0 * (double)cnt + 4.0 * shape[0]) / ms / 1e9);
        emit("quant_act_int8_ms", ms);
        lwo_tensor_destroy(ctx, x.b);
        lwo_tensor_create(ctx, LWO_DTYPE_F8_E4M3, 2, shape, &x.b);
        lwo_tensor_destroy(ctx, x.c);
        lwo_tensor_create(ctx, LWO_DTYPE_F32, 1, &one, &x.c);
        ms = time_ms(do_fp8_quant, &x);
        /* two passes over x (absmax, then quantize) */
        emit("quant_fp8_tensor_TBps_one_pass_bytes", 3.0 * (double)cnt / ms / 1e9);
        emit("quant_fp8_tensor_ms", ms);
        free(h);
    }
    lwo_destroy(ctx);
    if (out) fclose(out);
    return 0;
}

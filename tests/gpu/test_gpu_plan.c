/* test_gpu_plan.c - a plan is a promise, and a failed call leaves the context usable (GPU).
   For every storage format, a stack of weights made from data already in the stored format (so
   making them takes no VRAM) is planned under the smallest budget the plan reports
   (lwo_stats.plan_min_budget), and every lwo_linear up to the declared rows must then run, bit for
   bit equal to the same calls on resident weights; one byte under that budget the plan must fail
   with OUT_OF_BUDGET and name the smallest budget. Calls with more rows than declared run in row
   chunks. Twice per format: with lwo_desc.gemm_split forcing the Hopper GEMMs to split their last
   rounds at these small shapes (the plan must reserve the split area and the GEMMs split), and with
   splitting off (no split area). Then failures are injected in the middle of streamed passes (a bad
   argument, a failed launch, a weight left acquired, a failure inside a whole-pass capture):
   lwo_pass_abort, and the next full pass matches the resident result bit for bit.
   LWO_TEST_QUICK=1: fewer formats (for compute-sanitizer). */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

#define LAYERS 6
#define MAX_ROWS 256
static const uint64_t shape_n[LAYERS] = { 640, 256, 384, 640, 256, 1024 };
static const uint64_t shape_k[LAYERS] = { 256, 640, 196, 256, 640, 320 };   /* 196: x padded into the workspace (K % 8 != 0) */

typedef struct layer_data {
    void *w;            /* [N, K] in the stored dtype */
    float *row_scales;  /* W8A8 */
    float scale;        /* fp8 upcast */
    uint16_t *bias;     /* bf16 [N] */
} layer_data;

typedef struct stack {
    lwo_context *ctx;
    lwo_weight *w[LAYERS];
    lwo_tensor *x[LAYERS], *y[LAYERS];
} stack;

static layer_data data[LAYERS];
static uint16_t *host_x[LAYERS];   /* [M, K] for the largest M used */

static lwo_dtype x_dtype(lwo_format f) { return f == LWO_FORMAT_F16 ? LWO_DTYPE_F16 : LWO_DTYPE_BF16; }

static void quiet(void *u, lwo_log_level l, const char *m) { (void)u; if (l <= LWO_LOG_ERROR) printf("  [lwo] %s\n", m); }


/* Random weights, quantized on the CPU by lwo's references into the stored format. */
static void make_data(lwo_format f) {
    int l;
    uint64_t i;
    for (l = 0; l < LAYERS; l++) {
        uint64_t N = shape_n[l], K = shape_k[l];
        float *wf = (float *)malloc(N * K * 4);
        layer_data *d = &data[l];
        free(d->w); free(d->row_scales); free(d->bias);
        memset(d, 0, sizeof *d);
        for (i = 0; i < N * K; i++) wf[i] = (float)(check_rand_normal() * 0.05);
        d->bias = (uint16_t *)malloc(N * 2);
        for (i = 0; i < N; i++) d->bias[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
        switch (f) {
        case LWO_FORMAT_BF16: case LWO_FORMAT_F16:
            d->w = malloc(N * K * 2);
            for (i = 0; i < N * K; i++)
                ((uint16_t *)d->w)[i] = f == LWO_FORMAT_BF16 ? lwo_ref_f32_to_bf16(wf[i]) : lwo_ref_f32_to_f16(wf[i]);
            break;
        case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: {
            lwo_dtype t = f == LWO_FORMAT_FP8_E4M3 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_F8_E5M2;
            lwo_ref_quantize_desc rd;
            d->w = malloc(N * K);
            d->scale = lwo_ref_fp8_scale(wf, LWO_DTYPE_F32, N * K, t);
            memset(&rd, 0, sizeof rd);
            rd.src = wf; rd.src_dtype = LWO_DTYPE_F32; rd.dst = d->w; rd.dst_dtype = t; rd.rows = 1; rd.cols = N * K; rd.scale = d->scale;
            lwo_ref_quantize(&rd);
            break;
        }
        default: {
            lwo_ref_quantize_desc rd;
            d->w = malloc(N * K);
            d->row_scales = (float *)malloc(N * 4);
            memset(&rd, 0, sizeof rd);
            rd.per_row = 1; rd.src = wf; rd.src_dtype = LWO_DTYPE_F32; rd.rows = N; rd.cols = K;
            rd.dst = d->w; rd.dst_dtype = f == LWO_FORMAT_INT8 ? LWO_DTYPE_I8 : LWO_DTYPE_F8_E4M3; rd.dst_cols = K; rd.scales = d->row_scales;
            lwo_ref_quantize(&rd);
            break;
        }
        }
        free(wf);
        free(host_x[l]);
        host_x[l] = (uint16_t *)malloc(2 * MAX_ROWS * K * 2);
        for (i = 0; i < 2 * MAX_ROWS * K; i++) {
            float v = (float)check_rand_normal();
            host_x[l][i] = f == LWO_FORMAT_F16 ? lwo_ref_f32_to_f16(v) : lwo_ref_f32_to_bf16(v);
        }
    }
}

static lwo_weight_desc layer_desc(lwo_format f, int l, lwo_placement pl) {
    lwo_weight_desc d;
    memset(&d, 0, sizeof d);
    d.rows = shape_n[l]; d.cols = shape_k[l];
    d.data = data[l].w;
    d.data_dtype = f == LWO_FORMAT_BF16 ? LWO_DTYPE_BF16 : f == LWO_FORMAT_F16 ? LWO_DTYPE_F16 :
                   f == LWO_FORMAT_FP8_E5M2 ? LWO_DTYPE_F8_E5M2 : f == LWO_FORMAT_INT8 ? LWO_DTYPE_I8 : LWO_DTYPE_F8_E4M3;
    d.scale = (f == LWO_FORMAT_FP8_E4M3 || f == LWO_FORMAT_FP8_E5M2) ? data[l].scale : 0.0f;
    d.row_scales = data[l].row_scales;
    d.bias = data[l].bias; d.bias_dtype = LWO_DTYPE_BF16;
    d.format = f;
    d.placement = pl;
    return d;
}

/* A context of `budget` bytes with the stack's tensors (x of 2 x MAX_ROWS rows, f32 y), then its
   weights: the same arena use, in the same order, whatever the budget. */
static lwo_result stack_open(stack *s, lwo_format f, uint64_t budget, int split, lwo_placement pl) {
    lwo_desc d;
    lwo_result r;
    int l;
    memset(s, 0, sizeof *s);
    memset(&d, 0, sizeof d);
    d.vram_budget = budget;
    d.log = quiet;
    d.gemm_split = split;
    d.graph_cache = -1;   /* plain launches: the GEMMs' choices are the same in every context */
    if ((r = lwo_create(&d, &s->ctx)) != 0) return r;
    for (l = 0; l < LAYERS; l++) {
        uint64_t xs[2], ys[2];
        xs[0] = 2 * MAX_ROWS; xs[1] = shape_k[l]; ys[0] = 2 * MAX_ROWS; ys[1] = shape_n[l];
        if ((r = lwo_tensor_create(s->ctx, x_dtype(f), 2, xs, &s->x[l])) != 0 || (r = lwo_tensor_create(s->ctx, LWO_DTYPE_F32, 2, ys, &s->y[l])) != 0)
            return r;
        if ((r = lwo_tensor_upload(s->ctx, s->x[l], host_x[l], lwo_tensor_bytes(s->x[l]))) != 0) return r;
    }
    for (l = 0; l < LAYERS; l++) {
        lwo_weight_desc wd = layer_desc(f, l, pl);
        if ((r = lwo_weight_create(s->ctx, &wd, &s->w[l])) != 0) return r;
    }
    return LWO_SUCCESS;
}

static lwo_result plan(stack *s) {
    lwo_streaming_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.max_rows = MAX_ROWS;
    return lwo_streaming_plan(s->ctx, &sd);
}

/* One pass over the stack with x of M rows (views of the first M rows of x and y); out gets the
   outputs [M, N] of every layer, one after another. */
static lwo_result run_pass(stack *s, uint64_t M, float *out) {
    lwo_result r;
    lwo_tensor *xv[LAYERS], *yv[LAYERS];
    int l;
    memset(xv, 0, sizeof xv); memset(yv, 0, sizeof yv);
    for (l = 0; l < LAYERS; l++) {
        uint64_t xs[2], ys[2];
        xs[0] = M; xs[1] = shape_k[l]; ys[0] = M; ys[1] = shape_n[l];
        if ((r = lwo_tensor_wrap(s->ctx, lwo_tensor_device_ptr(s->x[l]), lwo_tensor_dtype(s->x[l]), 2, xs, &xv[l])) != 0 ||
            (r = lwo_tensor_wrap(s->ctx, lwo_tensor_device_ptr(s->y[l]), LWO_DTYPE_F32, 2, ys, &yv[l])) != 0) goto done;
        if ((r = lwo_tensor_fill_bytes(s->ctx, NULL, s->y[l], 0xff)) != 0) goto done;   /* NaN: every output must be written */
    }
    if ((r = lwo_pass_begin(s->ctx)) != 0) goto done;
    for (l = 0; l < LAYERS; l++)
        if ((r = check_linear(s->ctx, xv[l], s->w[l], yv[l])) != 0) { lwo_pass_abort(s->ctx); goto done; }
    if ((r = lwo_pass_end(s->ctx)) != 0) goto done;
    for (l = 0; l < LAYERS && out; l++) {
        if ((r = lwo_tensor_download(s->ctx, yv[l], out, M * shape_n[l] * 4)) != 0) goto done;
        out += M * shape_n[l];
    }
done:
    for (l = 0; l < LAYERS; l++) { lwo_tensor_destroy(s->ctx, xv[l]); lwo_tensor_destroy(s->ctx, yv[l]); }
    return r;
}

static uint64_t outputs(uint64_t M) {
    uint64_t n = 0;
    int l;
    for (l = 0; l < LAYERS; l++) n += M * shape_n[l];
    return n;
}

/* max |a - b| over the outputs, relative to max |b|; and whether they are equal bit for bit */
static double rel_diff(const float *a, const float *b, uint64_t n, int *same) {
    double mx = 0, d = 0;
    uint64_t i;
    *same = memcmp(a, b, n * 4) == 0;
    for (i = 0; i < n; i++) {
        if (fabs((double)b[i]) > mx) mx = fabs((double)b[i]);
        if (a[i] != a[i] || fabs((double)a[i] - (double)b[i]) > d) d = a[i] != a[i] ? 1e30 : fabs((double)a[i] - (double)b[i]);
    }
    return mx > 0 ? d / mx : d;
}

/* declared, smaller (one 128-row tile, and three 64-row tiles: at 177 the 16-bit GEMM on the padded
   layer picks 64 x 128 tiles and splits, so every format that reserves the split area uses it),
   more (chunks) */
#define TEST_ROWS 4
static const uint64_t test_rows[TEST_ROWS] = { MAX_ROWS, 77, 177, 2 * MAX_ROWS };

/* The formats this device can store */
static int format_ok(lwo_context *ctx, lwo_format f) {
    lwo_context_info ci;
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(ctx, &ci);
    return f != LWO_FORMAT_FP8_E4M3_W8A8 || ci.device.cc_major * 10 + ci.device.cc_minor >= 89;
}

static void inject_failures(lwo_format f, uint64_t budget, int split, float *const ref[TEST_ROWS]);

static void test_format(lwo_format f, int split) {
    stack s;
    float *ref[TEST_ROWS], *got = (float *)malloc(outputs(2 * MAX_ROWS) * 4);
    uint64_t min_budget = 0;
    lwo_stats st;
    lwo_result r;
    memset(&st, 0, sizeof st);
    int k, same;
    const char *mode = split > 0 ? "forced splits" : "no splits";
    make_data(f);
    /* the reference: resident weights in a context with room to spare */
    r = stack_open(&s, f, 256ull << 20, split, LWO_PLACE_RESIDENT);
    CHECK(r == LWO_SUCCESS, "%s: the resident stack: %s", lwo_format_name(f), lwo_last_error(s.ctx));
    for (k = 0; k < TEST_ROWS; k++) {
        ref[k] = (float *)malloc(outputs(test_rows[k]) * 4);
        if (!r) { r = run_pass(&s, test_rows[k], ref[k]); CHECK(r == LWO_SUCCESS, "%s: resident pass: %s", lwo_format_name(f), lwo_last_error(s.ctx)); }
    }
    lwo_destroy(s.ctx);
    /* the plan under a generous budget tells the smallest */
    if (!r) {
        r = stack_open(&s, f, 256ull << 20, split, LWO_PLACE_AUTO);
        if (!r) r = plan(&s);
        CHECK(r == LWO_SUCCESS, "%s: plan under 256 MiB: %s", lwo_format_name(f), lwo_last_error(s.ctx));
        lwo_context_get_stats(s.ctx, &st);
        min_budget = st.plan_min_budget;
        lwo_destroy(s.ctx);
    }
    /* at the smallest budget: the plan holds, and every call keeps the promise */
    if (!r) {
        lwo_memory_stats ms;
        int hopper, splittable = f != LWO_FORMAT_BF16 && f != LWO_FORMAT_F16;
        r = stack_open(&s, f, min_budget, split, LWO_PLACE_AUTO);
        CHECK(r == LWO_SUCCESS, "%s: the stack under its smallest budget %llu: %s", lwo_format_name(f), (unsigned long long)min_budget, lwo_last_error(s.ctx));
        if (!r) { r = plan(&s); CHECK(r == LWO_SUCCESS, "%s, %s: plan at the smallest budget %llu: %s", lwo_format_name(f), mode, (unsigned long long)min_budget, lwo_last_error(s.ctx)); }
        lwo_context_get_stats(s.ctx, &st);
        CHECK(!r || (st.ring_bytes > 0 && st.plan_min_budget == min_budget), "%s: the smallest plan streams (ring %llu), the same minimum (%llu, %llu)",
              lwo_format_name(f), (unsigned long long)st.ring_bytes, (unsigned long long)st.plan_min_budget, (unsigned long long)min_budget);
        hopper = s.ctx && !strcmp(s.ctx->info.arch, "sm_90a");
        if (split > 0 && hopper && splittable)
            CHECK(!r && st.plan_split_bytes == lwo__split_bytes(s.ctx), "%s: forced splits on sm_90a: the plan reserves the split area (%llu)",
                  lwo_format_name(f), (unsigned long long)st.plan_split_bytes);
        if (split < 0) CHECK(st.plan_split_bytes == 0, "%s: no splits, no split area (%llu)", lwo_format_name(f), (unsigned long long)st.plan_split_bytes);
        for (k = 0; k < TEST_ROWS && !r; k++) {
            int p;
            for (p = 0; p < 2 && !r; p++) {   /* the first pass teaches the order, the second prefetches along it */
                double d;
                r = run_pass(&s, test_rows[k], got);
                CHECK(r == LWO_SUCCESS, "%s, %s, M %llu at the smallest budget: %s", lwo_format_name(f), mode, (unsigned long long)test_rows[k], lwo_last_error(s.ctx));
                if (r) break;
                d = rel_diff(got, ref[k], outputs(test_rows[k]), &same);
                /* chunks of x run other tiles and splits than the whole call: the float
                   formats may round differently there; int8 accumulates exactly */
                if (k < TEST_ROWS - 1 || f == LWO_FORMAT_INT8) CHECK(same, "%s, %s, M %llu: streamed == resident bit for bit (max diff %.3g)", lwo_format_name(f), mode, (unsigned long long)test_rows[k], d);
                else CHECK(d < 1e-5, "%s, %s, M %llu in chunks: within %.3g of resident", lwo_format_name(f), mode, (unsigned long long)test_rows[k], d);
            }
        }
        lwo_context_get_stats(s.ctx, &st);
        {
            lwo_context_info ci;
            memset(&ci, 0, sizeof ci);
            lwo_context_get_info(s.ctx, &ci);
            ms = ci.memory;
        }
        CHECK(ms.peak <= min_budget, "peak %llu within the budget %llu", (unsigned long long)ms.peak, (unsigned long long)min_budget);
        {   /* calls whose workspace need is more than the plan reserved ran in chunks, the others whole */
            uint64_t over = 0;
            int l;
            for (l = 0; l < LAYERS; l++)
                if (lwo__linear_ws(f, 2 * MAX_ROWS, shape_n[l], lwo__kpad(shape_k[l], 0), shape_k[l] % 8 != 0) > st.plan_workspace_bytes) over++;
            CHECK(r || (over > 0) == (st.linear_chunked > 0), "%s: %llu layers need more than the reservation at %d rows; %llu calls ran in chunks",
                  lwo_format_name(f), (unsigned long long)over, 2 * MAX_ROWS, (unsigned long long)st.linear_chunked);
        }
        /* the plan reserved the split area exactly when some GEMM of the declared shapes splits */
        CHECK((st.plan_split_bytes > 0) == (st.gemm_splits > 0), "%s, %s: split area reserved %llu, split GEMMs %llu", lwo_format_name(f), mode,
              (unsigned long long)st.plan_split_bytes, (unsigned long long)st.gemm_splits);
        if (split < 0) CHECK(st.gemm_splits == 0, "%s: gemm_split -1: no GEMM split (%llu)", lwo_format_name(f), (unsigned long long)st.gemm_splits);
        printf("  %-13s %-13s smallest budget %8llu bytes: workspace %llu, split area %llu, ring %llu; %llu chunked calls, %llu split GEMMs\n",
               lwo_format_name(f), mode, (unsigned long long)min_budget, (unsigned long long)st.plan_workspace_bytes, (unsigned long long)st.plan_split_bytes,
               (unsigned long long)st.ring_bytes, (unsigned long long)st.linear_chunked, (unsigned long long)st.gemm_splits);
        lwo_destroy(s.ctx);
    }
    /* one byte under: the plan fails, and says how much is needed */
    if (!r) {
        char want[32];
        r = stack_open(&s, f, min_budget - 1, split, LWO_PLACE_AUTO);
        CHECK(r == LWO_SUCCESS, "%s: the stack one byte under: %s", lwo_format_name(f), lwo_last_error(s.ctx));
        if (!r) {
            lwo_result pr = plan(&s);
            snprintf(want, sizeof want, "%llu", (unsigned long long)min_budget);
            CHECK(pr == LWO_ERROR_OUT_OF_BUDGET && strstr(lwo_last_error(s.ctx), want) != NULL,
                  "%s: one byte under the smallest budget the plan fails naming %s: %s (%s)", lwo_format_name(f), want, lwo_result_string(pr), lwo_last_error(s.ctx));
        }
        lwo_destroy(s.ctx);
        r = LWO_SUCCESS;
    }
    if (!r && split > 0) inject_failures(f, min_budget, split, ref);
    for (k = 0; k < TEST_ROWS; k++) free(ref[k]);
    free(got);
}

/* Failures in the middle of streamed passes at the smallest budget; after lwo_pass_abort the next
   pass is bit for bit the resident one, and plans and captures work again. */
static void inject_failures(lwo_format f, uint64_t budget, int split, float *const ref[TEST_ROWS]) {
    stack s;
    float *got = (float *)malloc(outputs(MAX_ROWS) * 4);
    lwo_result r;
    lwo_stats st0, st1;
    lwo_module *nop = NULL;
    int kind, same;
    memset(&st0, 0, sizeof st0);
    memset(&st1, 0, sizeof st1);
    r = stack_open(&s, f, budget, split, LWO_PLACE_AUTO);
    if (!r) r = plan(&s);
    if (!r) r = run_pass(&s, MAX_ROWS, got);   /* learns the order */
    CHECK(r == LWO_SUCCESS, "%s: setup for the injected failures: %s", lwo_format_name(f), lwo_last_error(s.ctx));
    if (!r) r = lwo_module_create(s.ctx, "extern \"C\" __global__ void nop(int *p) { if (p) *p = 0; }", "nop.cu", NULL, &nop);
    for (kind = 0; kind < 4 && !r; kind++) {
        static const char *what[4] = { "a bad argument", "a failed launch", "a weight left acquired", "a failure inside a capture" };
        lwo_tensor *bad = NULL;
        lwo_weight_info info;
        lwo_result fr = LWO_SUCCESS;
        uint64_t shp[2];
        int l;
        lwo_context_get_stats(s.ctx, &st0);
        if (kind == 3) { r = lwo_graph_capture_begin(s.ctx); CHECK(r == LWO_SUCCESS, "capture begin: %s", lwo_last_error(s.ctx)); if (r) break; }
        r = lwo_pass_begin(s.ctx);
        for (l = 0; l < LAYERS / 2 && !r; l++) {
            uint64_t xs[2], ys[2];
            lwo_tensor *xv = NULL, *yv = NULL;
            xs[0] = MAX_ROWS; xs[1] = shape_k[l]; ys[0] = MAX_ROWS; ys[1] = shape_n[l];
            lwo_tensor_wrap(s.ctx, lwo_tensor_device_ptr(s.x[l]), lwo_tensor_dtype(s.x[l]), 2, xs, &xv);
            lwo_tensor_wrap(s.ctx, lwo_tensor_device_ptr(s.y[l]), LWO_DTYPE_F32, 2, ys, &yv);
            r = check_linear(s.ctx, xv, s.w[l], yv);
            lwo_tensor_destroy(s.ctx, xv); lwo_tensor_destroy(s.ctx, yv);
        }
        CHECK(r == LWO_SUCCESS, "%s: the first half of the pass: %s", lwo_format_name(f), lwo_last_error(s.ctx));
        if (r) break;
        shp[0] = 3; shp[1] = 5;
        switch (kind) {
        case 0: case 3:   /* y of the wrong shape */
            lwo_tensor_wrap(s.ctx, lwo_tensor_device_ptr(s.y[3]), LWO_DTYPE_F32, 2, shp, &bad);
            fr = check_linear(s.ctx, s.x[3], s.w[3], bad);
            CHECK(fr == LWO_ERROR_INVALID_ARGUMENT, "%s: %s is refused: %s", lwo_format_name(f), what[kind], lwo_result_string(fr));
            lwo_tensor_destroy(s.ctx, bad);
            break;
        case 1: {         /* a launch the driver refuses: 2048 threads a block */
            lwo_launch_desc ld;
            void *args[1];
            void *nullp = NULL;
            args[0] = &nullp;
            memset(&ld, 0, sizeof ld);
            ld.module = nop; ld.kernel = "nop"; ld.block[0] = 2048; ld.args = args;
            fr = lwo_launch(s.ctx, &ld);
            CHECK(fr == LWO_ERROR_CUDA, "%s: %s fails: %s (%s)", lwo_format_name(f), what[kind], lwo_result_string(fr), lwo_last_error(s.ctx));
            break;
        }
        case 2:           /* the caller's own op acquired a streamed weight and failed before releasing it */
            fr = lwo_weight_acquire(s.ctx, NULL, s.w[3], &info);
            CHECK(fr == LWO_SUCCESS, "%s: acquire: %s", lwo_format_name(f), lwo_last_error(s.ctx));
            break;
        }
        /* a plan now is refused (a pass is open), and says how to end it */
        fr = plan(&s);
        CHECK(fr == LWO_ERROR_INVALID_ARGUMENT && strstr(lwo_last_error(s.ctx), "lwo_pass_abort") != NULL, "%s: a plan inside the pass: %s",
              lwo_format_name(f), lwo_last_error(s.ctx));
        r = lwo_pass_abort(s.ctx);
        CHECK(r == LWO_SUCCESS, "%s: lwo_pass_abort after %s: %s", lwo_format_name(f), what[kind], lwo_last_error(s.ctx));
        lwo_context_get_stats(s.ctx, &st1);
        CHECK(st1.passes == st0.passes && !s.ctx->engine->in_pass && !s.ctx->capturing, "%s: the aborted pass is not counted, nothing open", lwo_format_name(f));
        {
            size_t i, held = 0;
            for (i = 0; i < s.ctx->nitems; i++) held += s.ctx->items[i]->acquired != 0;
            CHECK(held == 0, "%s: after %s no weight stays acquired (%zu)", lwo_format_name(f), what[kind], held);
        }
        /* the context goes on: a full pass, bit for bit the resident one; a plan; a capture */
        r = run_pass(&s, MAX_ROWS, got);
        CHECK(r == LWO_SUCCESS, "%s: the pass after %s: %s", lwo_format_name(f), what[kind], lwo_last_error(s.ctx));
        if (r) break;
        rel_diff(got, ref[0], outputs(MAX_ROWS), &same);
        CHECK(same, "%s: after %s the next pass equals the resident one bit for bit", lwo_format_name(f), what[kind]);
        r = plan(&s);
        CHECK(r == LWO_SUCCESS, "%s: a plan after %s: %s", lwo_format_name(f), what[kind], lwo_last_error(s.ctx));
    }
    /* and a whole pass captured after all that replays the resident result */
    if (!r) {
        lwo_graph *g = NULL;
        int l;
        r = lwo_graph_capture_begin(s.ctx);
        if (!r) r = run_pass(&s, MAX_ROWS, NULL);
        if (!r) r = lwo_graph_capture_end(s.ctx, &g);
        else lwo_pass_abort(s.ctx);
        CHECK(r == LWO_SUCCESS, "%s: a capture after the failures: %s", lwo_format_name(f), lwo_last_error(s.ctx));
        if (!r) {
            float *o = got;
            for (l = 0; l < LAYERS; l++) lwo_tensor_fill_bytes(s.ctx, NULL, s.y[l], 0xff);
            r = lwo_graph_launch(s.ctx, g);
            for (l = 0; l < LAYERS && !r; l++) {
                uint64_t ys[2];
                lwo_tensor *yv = NULL;
                ys[0] = MAX_ROWS; ys[1] = shape_n[l];
                lwo_tensor_wrap(s.ctx, lwo_tensor_device_ptr(s.y[l]), LWO_DTYPE_F32, 2, ys, &yv);
                r = lwo_tensor_download(s.ctx, yv, o, MAX_ROWS * shape_n[l] * 4);
                lwo_tensor_destroy(s.ctx, yv);
                o += MAX_ROWS * shape_n[l];
            }
            rel_diff(got, ref[0], outputs(MAX_ROWS), &same);
            CHECK(r == LWO_SUCCESS && same, "%s: the graph's replay equals the resident pass bit for bit (%s)", lwo_format_name(f), lwo_last_error(s.ctx));
            lwo_graph_destroy(s.ctx, g);
        }
    }
    lwo_destroy(s.ctx);
    free(got);
}

int main(void) {
    static const lwo_format fmts[6] = { LWO_FORMAT_INT8, LWO_FORMAT_BF16, LWO_FORMAT_FP8_E4M3_W8A8, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_F16, LWO_FORMAT_FP8_E5M2 };
    lwo_context *probe = NULL;
    lwo_desc d;
    int i, quick = getenv("LWO_TEST_QUICK") != NULL;
    check_seed("test_gpu_plan");
    memset(&d, 0, sizeof d);
    d.vram_budget = 16ull << 20;
    d.log = quiet;
    if (lwo_create(&d, &probe) != LWO_SUCCESS) { CHECK(0, "no context: %s", lwo_last_error(probe)); lwo_destroy(probe); return CHECK_SUMMARY(); }
    for (i = 0; i < (quick ? 2 : 6); i++) {
        if (!format_ok(probe, fmts[i])) { printf("  %s: not on this device\n", lwo_format_name(fmts[i])); continue; }
        test_format(fmts[i], 8);    /* splits forced on 8 CTAs: at these shapes the last rounds split */
        test_format(fmts[i], -1);
    }
    lwo_destroy(probe);
    for (i = 0; i < LAYERS; i++) { free(data[i].w); free(data[i].row_scales); free(data[i].bias); free(host_x[i]); }
    return CHECK_SUMMARY();
}

/* bench_stream.c - the streaming benchmark: ANCHORS.md's 24-block stack (qkv 3072->9216, out
   3072->3072, up 3072->12288, down 12288->3072; M = 4608 tokens) in bf16, fp8 (upcast and W8A8)
   and int8 storage
   at budgets: all resident, half resident, the minimum. For each: ms per forward (median of 5),
   bytes streamed, and the bound max(compute-only time, streamed bytes / host-to-device bandwidth
   measured in this run). Writes "key value" lines to $LWO_BENCH_OUT; tests/bench/bench_stream_peers.py
   measures PyTorch beside it and tests/bench/bench_stream_table.py prints the table. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H 3072
#define M 4608
#define NB 24
static const uint64_t shapes[4][2] = { { 3 * H, H }, { H, H }, { 4 * H, H }, { H, 4 * H } }; /* [N, K] */
static FILE *out;
static lwo_context *ctx;
static lwo_module *ops;
static uint16_t *host_w[4], *host_b[4]; /* one random matrix per shape, shared by the blocks' weights */

/* The stack's elementwise ops, the benchmark's stand-ins for a user's kernels: eight bf16 a thread
   in 16-byte accesses (PyTorch's own run near the copy ceiling; one element a thread ran at a
   third of it and put 5 ms of a 46 ms pass on these ops), f32 math rounded to nearest even. gelu
   takes two vectors a thread, both loaded before either is computed, and half the grid: its tanh
   left one vector a thread 0.2 ms of 24 launches behind PyTorch's (H100, session 27: 2.17 ms
   against 1.93; two vectors 1.97-2.06, a plain copy 1.88). */
static const char *ops_src =
    "__device__ float bf(unsigned short h) { return __uint_as_float((unsigned)h << 16); }\n"
    "__device__ unsigned short rn(float v) { unsigned u = __float_as_uint(v); u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n"
    "__device__ float gelu(float x) { return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))); }\n"
    "struct __align__(16) v8 { unsigned short h[8]; };\n"
    "extern \"C\" __global__ void add_bf16(unsigned short *y, const unsigned short *a, unsigned long long n) {\n"
    "  unsigned long long i = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) * 8; int k;\n"
    "  if (i + 8 <= n) { v8 p = *(v8 *)(y + i), q = *(const v8 *)(a + i);\n"
    "    for (k = 0; k < 8; k++) p.h[k] = rn(bf(p.h[k]) + bf(q.h[k])); *(v8 *)(y + i) = p; }\n"
    "  else for (; i < n; i++) y[i] = rn(bf(y[i]) + bf(a[i])); }\n"
    "extern \"C\" __global__ void gelu_bf16(unsigned short *y, unsigned long long n) {\n"
    "  unsigned long long st = (unsigned long long)gridDim.x * blockDim.x * 8, i = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) * 8; int j, k;\n"
    "  if (i + st + 8 <= n) { v8 p = *(v8 *)(y + i), q = *(v8 *)(y + i + st);\n"
    "    for (k = 0; k < 8; k++) { p.h[k] = rn(gelu(bf(p.h[k]))); q.h[k] = rn(gelu(bf(q.h[k]))); } *(v8 *)(y + i) = p; *(v8 *)(y + i + st) = q; }\n"
    "  else for (j = 0; j < 2; j++, i += st) for (k = 0; k < 8 && i + k < n; k++) y[i + k] = rn(gelu(bf(y[i + k]))); }\n"
    "extern \"C\" __global__ void busy_fma(float *y, int iters) {\n"
    "  float a = threadIdx.x * 1e-3f, b = 1.0001f; for (int i = 0; i < iters; i++) { a = a * b + 1e-7f; b = b * a + 1e-7f; }\n"
    "  if (a == 12345.f) y[0] = b; }\n";

static void emit(const char *key, double v) {
    printf("%-52s %10.3f\n", key, v);
    if (out) { fprintf(out, "%s %.6f\n", key, v); fflush(out); }
}

static void die(const char *what) { printf("bench_stream: %s: %s\n", what, lwo_last_error(ctx)); exit(1); }

/* One of the ops module's kernels on the compute stream, a 1-D grid of 256-thread blocks. */
static lwo_result launch(const char *k, unsigned blocks, void **args) {
    lwo_launch_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.module = ops; ld.kernel = k; ld.grid[0] = blocks; ld.block[0] = 256; ld.args = args;
    return lwo_launch(ctx, &ld);
}

/* per_thread: the elements one thread takes (8 for add, 16 for gelu). */
static lwo_result elementwise(const char *k, lwo_tensor *y, lwo_tensor *a, unsigned per_thread) {
    uint64_t n = lwo_tensor_numel(y), py = lwo_tensor_device_ptr(y), pa = a ? lwo_tensor_device_ptr(a) : 0;
    void *args3[3] = { &py, &pa, &n }, *args2[2] = { &py, &n };
    return launch(k, (unsigned)(((n + per_thread - 1) / per_thread + 255) / 256), a ? args3 : args2);
}

/* lwo_linear on the compute stream, the weight's own bias. */
static lwo_result linear(const lwo_tensor *x, const lwo_weight *w, lwo_tensor *y) {
    lwo_linear_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.x = x; ld.w = w; ld.y = y;
    return lwo_linear(ctx, &ld);
}

typedef struct stack { lwo_weight *w[NB][4]; lwo_tensor *x, *t1, *qkv, *t2, *view; } stack;

/* Op i of block b: x += out(qkv(x)[first M*H elements]); x += down(gelu(up(x))). */
#define NOPS 7
static const char *op_names[NOPS] = { "qkv", "out", "add", "up", "gelu", "down", "add2" };
static lwo_result block_op(stack *s, int b, int i) {
    switch (i) {
    case 0: return linear(s->x, s->w[b][0], s->qkv);
    case 1: return linear(s->view, s->w[b][1], s->t2);
    case 3: return linear(s->x, s->w[b][2], s->t1);
    case 4: return elementwise("gelu_bf16", s->t1, NULL, 16);
    case 5: return linear(s->t1, s->w[b][3], s->t2);
    default: return elementwise("add_bf16", s->x, s->t2, 8);
    }
}

static lwo_result forward(stack *s) {
    int b, i;
    lwo_result r;
    if ((r = lwo_pass_begin(ctx)) != 0) return r;
    for (b = 0; b < NB; b++)
        for (i = 0; i < NOPS; i++)
            if ((r = block_op(s, b, i)) != 0) return r;
    return lwo_pass_end(ctx);
}

/* One resident pass with an event between ops: where the pass's time goes, per op, summed over the
   blocks (the events themselves cost a few microseconds each). */
static void breakdown(stack *s, const char *fname) {
    lwo_event *ev[NOPS + 1];
    double sum[NOPS] = { 0 };
    float ms;
    int b, i;
    char key[96];
    for (i = 0; i <= NOPS; i++) lwo_event_create(ctx, &ev[i]);
    if (lwo_pass_begin(ctx)) die("pass");
    for (b = 0; b < NB; b++) {
        lwo_event_record(ctx, ev[0], NULL);
        for (i = 0; i < NOPS; i++) {
            if (block_op(s, b, i)) die(op_names[i]);
            lwo_event_record(ctx, ev[i + 1], NULL);
        }
        lwo_event_synchronize(ctx, ev[NOPS]);
        for (i = 0; i < NOPS; i++) { lwo_event_elapsed_ms(ctx, ev[i], ev[i + 1], &ms); sum[i] += ms; }
    }
    if (lwo_pass_end(ctx)) die("pass");
    for (i = 0; i < NOPS; i++) {
        snprintf(key, sizeof key, "lwo_%s_resident_op_%s_ms", fname, op_names[i]);
        emit(key, sum[i]);
    }
    for (i = 0; i <= NOPS; i++) lwo_event_destroy(ctx, ev[i]);
}

static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return x < y ? -1 : x > y; }

/* Copies kept running beside a timed pass (see time_forward_beside_copies). */
typedef struct side_copies { lwo_stream *stream; lwo_tensor *dst; const void *src; int count; } side_copies;

/* Median ms of `iters` passes after two untimed ones; with `side`, its copies are enqueued on its
   stream before each timed pass. */
static float time_forward(stack *s, int iters, const side_copies *side) {
    lwo_event *e0, *e1;
    float t[16];
    int i, c;
    lwo_event_create(ctx, &e0);
    lwo_event_create(ctx, &e1);
    for (i = 0; i < 2; i++) if (forward(s)) die("forward");
    for (i = 0; i < iters; i++) {
        if (side) {
            lwo_stream_synchronize(ctx, NULL);
            for (c = 0; c < side->count; c++) lwo_tensor_upload_async(ctx, side->stream, side->dst, side->src, lwo_tensor_numel(side->dst));
        }
        lwo_event_record(ctx, e0, NULL);
        if (forward(s)) die("forward");
        lwo_event_record(ctx, e1, NULL);
        lwo_event_synchronize(ctx, e1);
        lwo_event_elapsed_ms(ctx, e0, e1, &t[i]);
        if (side) lwo_stream_synchronize(ctx, side->stream);
    }
    lwo_event_destroy(ctx, e0);
    lwo_event_destroy(ctx, e1);
    qsort(t, (size_t)iters, sizeof *t, cmpf);
    return t[iters / 2];
}

/* The resident pass with the bus busy beside it (64 MiB copies into a scratch tensor on another
   stream, enough to outlast the pass): how much the copies' writes slow the compute itself, which a
   streamed pass pays and its bound does not count. */
static float time_forward_beside_copies(stack *s, int iters, float pass_ms) {
    const uint64_t n = 64ull << 20;
    void *hp;
    side_copies sc;
    float ms;
    sc.count = (int)(pass_ms * 1.3 * 56e6 / (double)n) + 2;
    if (lwo_host_alloc(ctx, n, &hp) || lwo_tensor_create(ctx, LWO_DTYPE_U8, 1, &n, &sc.dst) || lwo_stream_create(ctx, &sc.stream))
        die("copies beside the pass");
    memset(hp, 1, (size_t)n);
    sc.src = hp;
    ms = time_forward(s, iters, &sc);
    lwo_stream_destroy(ctx, sc.stream);
    lwo_tensor_destroy(ctx, sc.dst);
    lwo_host_free(ctx, hp);
    return ms;
}

static double h2d_GBps(void) {
    uint64_t n = 1ull << 30;
    void *hp;
    lwo_tensor *d;
    lwo_event *e0, *e1;
    float ms, best = 1e30f;
    int i;
    if (lwo_host_alloc(ctx, n, &hp) || lwo_tensor_create(ctx, LWO_DTYPE_U8, 1, &n, &d)) die("h2d buffers");
    memset(hp, 7, (size_t)n);
    lwo_event_create(ctx, &e0);
    lwo_event_create(ctx, &e1);
    for (i = 0; i < 4; i++) {
        lwo_event_record(ctx, e0, NULL);
        lwo_tensor_upload_async(ctx, NULL, d, hp, n);
        lwo_event_record(ctx, e1, NULL);
        lwo_event_synchronize(ctx, e1);
        lwo_event_elapsed_ms(ctx, e0, e1, &ms);
        if (i && ms < best) best = ms;
    }
    lwo_tensor_destroy(ctx, d);
    lwo_host_free(ctx, hp);
    lwo_event_destroy(ctx, e0);
    lwo_event_destroy(ctx, e1);
    return (double)n / best / 1e6;
}

/* What the bus gives a pass's copies, beside the 1 GiB figure: 64 MiB copies back to back on one
   offload stream, alternating over two, and on one while the compute stream runs FMA kernels (the
   GEMMs' load) or memory-bound ones (the elementwise ops' load). Each is GB/s over 16 copies. */
static void h2d_conditions(void) {
    const uint64_t n = 64ull << 20, big = 1ull << 30;
    void *hp;
    lwo_tensor *d, *m1, *m2;
    lwo_stream *st[2];
    lwo_event *e0, *e1;
    const char *names[4] = { "lwo_h2d_64MiB_GBps", "lwo_h2d_64MiB_2streams_GBps", "lwo_h2d_64MiB_busy_fma_GBps", "lwo_h2d_64MiB_busy_mem_GBps" };
    int c, i;
    uint64_t half = big / 4;
    if (lwo_host_alloc(ctx, 16 * n, &hp) || lwo_tensor_create(ctx, LWO_DTYPE_U8, 1, &big, &d) ||
        lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, &half, &m1) || lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, &half, &m2) ||
        lwo_stream_create(ctx, &st[0]) || lwo_stream_create(ctx, &st[1]) || lwo_event_create(ctx, &e0) || lwo_event_create(ctx, &e1))
        die("h2d probe buffers");
    memset(hp, 3, (size_t)(16 * n));
    lwo_tensor_fill_bytes(ctx, NULL, m1, 0);
    lwo_tensor_fill_bytes(ctx, NULL, m2, 0);
    for (c = 0; c < 4; c++) {
        float ms = 0;
        lwo_stream_synchronize(ctx, NULL);
        if (c >= 2) { /* load the compute stream for longer than the copies take */
            for (i = 0; i < (c == 2 ? 4 : 100); i++) {
                uint64_t py = lwo_tensor_device_ptr(m1), pa = lwo_tensor_device_ptr(m2), cnt = half;
                int iters = 2000000;
                void *fa[2] = { &py, &iters }, *aa[3] = { &py, &pa, &cnt };
                if (launch(c == 2 ? "busy_fma" : "add_bf16", c == 2 ? 1056u : (unsigned)(((half + 7) / 8 + 255) / 256), c == 2 ? fa : aa)) die("busy kernel");
            }
        }
        lwo_event_record(ctx, e0, st[0]);
        for (i = 0; i < 16; i++) {
            lwo_tensor *v = NULL;
            lwo_tensor_wrap(ctx, lwo_tensor_device_ptr(d) + (uint64_t)i * n, LWO_DTYPE_U8, 1, &n, &v);
            if (c == 1 && i) lwo_stream_wait_event(ctx, st[i & 1], e0);   /* both streams start together */
            lwo_tensor_upload_async(ctx, st[c == 1 ? i & 1 : 0], v, (const char *)hp + (uint64_t)i * n, n);
            lwo_tensor_destroy(ctx, v);
        }
        if (c == 1) { lwo_event_record(ctx, e1, st[1]); lwo_stream_wait_event(ctx, st[0], e1); }
        lwo_event_record(ctx, e1, st[0]);
        lwo_event_synchronize(ctx, e1);
        lwo_event_elapsed_ms(ctx, e0, e1, &ms);
        emit(names[c], ms > 0 ? 16.0 * (double)n / ms / 1e6 : 0);
    }
    lwo_stream_synchronize(ctx, NULL);
    lwo_stream_destroy(ctx, st[0]); lwo_stream_destroy(ctx, st[1]);
    lwo_event_destroy(ctx, e0); lwo_event_destroy(ctx, e1);
    lwo_tensor_destroy(ctx, d); lwo_tensor_destroy(ctx, m1); lwo_tensor_destroy(ctx, m2);
    lwo_host_free(ctx, hp);
}

static void quiet(void *u, lwo_log_level l, const char *m) { (void)u; if (l <= LWO_LOG_WARN) printf("lwo: %s\n", m); }

/* Runs one storage format at one budget fraction (1 = all resident, 0.5, 0 = minimum). */
static void run(lwo_format fmt, const char *fname, double frac, double bw, double *compute_ms) {
    lwo_desc d;
    stack s;
    lwo_stats st, st0;
    lwo_streaming_desc sd;
    memset(&st0, 0, sizeof st0);
    memset(&st, 0, sizeof st);
    uint64_t xs[2] = { M, H }, ts[2] = { M, 4 * H }, vs[2] = { M, H }, qs[2] = { M, 3 * H }, ws_bytes, stack_bytes = 0, budget, minimum, largest = 0;
    int b, k;
    float ms;
    char key[128];
    memset(&d, 0, sizeof d);
    memset(&s, 0, sizeof s);
    d.log = quiet;
    /* the stack's stored size decides the budgets: bf16 2 B/weight, the 8-bit formats 1 B */
    for (k = 0; k < 4; k++) {
        uint64_t wb = shapes[k][0] * shapes[k][1] * (fmt == LWO_FORMAT_BF16 ? 2 : 1) + shapes[k][0] * 8;
        stack_bytes += NB * wb;
        if (wb > largest) largest = wb;
    }
    ws_bytes = (uint64_t)M * 4 * H * 2 * 3 + (uint64_t)M * H * 2 * 2 + (256ull << 20); /* activations + lwo_linear's workspace */
    /* the activations (x, t1, t2) come out of the arena too, before the plan */
    minimum = ws_bytes + (uint64_t)M * H * 2 + 2ull * M * 4 * H * 2 + 2 * largest + (64ull << 20);
    budget = frac >= 1.0 ? stack_bytes + ws_bytes + (512ull << 20) : frac > 0 ? minimum + (uint64_t)(frac * (double)stack_bytes) : minimum;
    d.vram_budget = budget;
    if (getenv("LWO_BENCH_OFFLOAD_STREAMS")) d.offload_streams = atoi(getenv("LWO_BENCH_OFFLOAD_STREAMS"));
    if (getenv("LWO_BENCH_GEMM_KERNELS")) d.gemm_kernels = atoi(getenv("LWO_BENCH_GEMM_KERNELS"));
    if (lwo_create(&d, &ctx)) die("lwo_create");
    if (lwo_module_create(ctx, ops_src, "bench_ops.cu", NULL, &ops)) die("ops");
    for (b = 0; b < NB; b++)
        for (k = 0; k < 4; k++) {
            lwo_weight_desc wd;
            memset(&wd, 0, sizeof wd);
            wd.rows = shapes[k][0];
            wd.cols = shapes[k][1];
            wd.data = host_w[k];
            wd.data_dtype = LWO_DTYPE_BF16;
            wd.format = fmt;
            wd.bias = host_b[k];
            wd.bias_dtype = LWO_DTYPE_BF16;
            wd.placement = LWO_PLACE_AUTO;
            if (lwo_weight_create(ctx, &wd, &s.w[b][k])) die("lwo_weight_create");
        }
    if (lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, xs, &s.x) ||
        lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, ts, &s.t1) || lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, xs, &s.t2))
        die("activations");
    /* qkv output and the out-projection's input: views of t1's buffer */
    if (lwo_tensor_wrap(ctx, lwo_tensor_device_ptr(s.t1), LWO_DTYPE_BF16, 2, qs, &s.qkv) ||
        lwo_tensor_wrap(ctx, lwo_tensor_device_ptr(s.t1), LWO_DTYPE_BF16, 2, vs, &s.view)) die("views");
    {
        uint64_t n = (uint64_t)M * H, i;
        uint16_t *hx = (uint16_t *)malloc(n * 2);
        for (i = 0; i < n; i++) hx[i] = lwo_ref_f32_to_bf16((float)((int)(i * 2654435761u % 2001) - 1000) * 0.001f);
        lwo_tensor_upload(ctx, s.x, hx, n * 2);
        free(hx);
    }
    memset(&sd, 0, sizeof sd);
    sd.max_rows = M;   /* every linear's x has M rows */
    if (lwo_streaming_plan(ctx, &sd)) die("lwo_streaming_plan");
    /* one pass teaches lwo the order and each use's compute time; the plan made again is timed
       against them */
    if (forward(&s) || forward(&s) || lwo_stream_synchronize(ctx, NULL)) die("forward");   /* the first loads modules */
    if (lwo_streaming_plan(ctx, &sd)) die("lwo_streaming_plan");
    lwo_context_get_stats(ctx, &st0);
    ms = time_forward(&s, 5, NULL);
    lwo_context_get_stats(ctx, &st);
    {   /* one more pass, read whole: its time, its waits, and lwo's profile of it (the compute a
           plan made now would be timed with); pass - waits = profile when the marks see it all */
        lwo_stats a, z;
        double sum = 0;
        size_t u;
        memset(&a, 0, sizeof a);
        memset(&z, 0, sizeof z);
        lwo_context_get_stats(ctx, &a);
        if (forward(&s)) die("forward");
        lwo_context_get_stats(ctx, &z);
        for (u = 0; ctx->engine && u < ctx->engine->profiled; u++) sum += ctx->engine->use_ms[u];
        snprintf(key, sizeof key, "lwo_%s_%s_last_pass_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
        emit(key, z.last_pass_ms);
        snprintf(key, sizeof key, "lwo_%s_%s_last_wait_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
        emit(key, z.wait_ms - a.wait_ms);
        snprintf(key, sizeof key, "lwo_%s_%s_profile_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
        emit(key, sum);
        if (ctx->engine && ctx->engine->xfer_gaps) {   /* idle between back-to-back copies */
            snprintf(key, sizeof key, "lwo_%s_%s_copy_gap_us", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
            emit(key, ctx->engine->xfer_gap_ms * 1000.0 / (double)ctx->engine->xfer_gaps);
        }
    }
    if (frac >= 1) {
        breakdown(&s, fname);
        snprintf(key, sizeof key, "lwo_%s_resident_beside_copies_ms", fname);
        emit(key, time_forward_beside_copies(&s, 5, ms));
    }
    snprintf(key, sizeof key, "lwo_%s_%s_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, ms);
    snprintf(key, sizeof key, "lwo_%s_%s_streamed_GB", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, (double)st.last_pass_bytes / 1e9);
    snprintf(key, sizeof key, "lwo_%s_%s_budget_GB", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, (double)budget / 1e9);
    snprintf(key, sizeof key, "lwo_%s_%s_ring_MB", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, (double)st.ring_bytes / 1e6);
    snprintf(key, sizeof key, "lwo_%s_%s_model_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, st.plan_predicted_ms);
    snprintf(key, sizeof key, "lwo_%s_%s_copy_GBps", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, st.transfer_GBps);
    snprintf(key, sizeof key, "lwo_%s_%s_wait_frac", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    emit(key, st.last_pass_ms > 0 && st.passes > st0.passes ? (st.wait_ms - st0.wait_ms) / (double)(st.passes - st0.passes) / st.last_pass_ms : 0);
    if (frac >= 1) *compute_ms = ms;
    snprintf(key, sizeof key, "lwo_%s_%s_bound_ms", fname, frac >= 1 ? "resident" : frac > 0 ? "half" : "minimum");
    {
        double tb = (double)st.last_pass_bytes / bw / 1e6;
        emit(key, tb > *compute_ms ? tb : *compute_ms);
    }
    lwo_destroy(ctx);
    ctx = NULL;
}

/* Whether `name` is in the comma-separated `list` (no list: every name is). */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    const char *p = list;
    if (!list) return 1;
    while ((p = strstr(p, name)) != NULL) {
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
        p += n;
    }
    return 0;
}

int main(void) {
    lwo_desc d;
    double bw, compute;
    int k;
    static const lwo_format fmts[4] = { LWO_FORMAT_BF16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_FP8_E4M3_W8A8, LWO_FORMAT_INT8 };
    static const char *names[4] = { "bf16", "fp8", "fp8w8a8", "int8" };
    static const double fracs[3] = { 1.0, 0.5, 0.0 };
    int f, b;
    if (getenv("LWO_BENCH_OUT")) out = fopen(getenv("LWO_BENCH_OUT"), "a");
    for (k = 0; k < 4; k++) {
        uint64_t n = shapes[k][0] * shapes[k][1], i, st = 0x1234567ull + (uint64_t)k;
        host_w[k] = (uint16_t *)malloc(n * 2);
        host_b[k] = (uint16_t *)malloc(shapes[k][0] * 2);
        for (i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            host_w[k][i] = lwo_ref_f32_to_bf16(((float)(int)((st >> 33) % 2001) - 1000.0f) * (0.0173f / 1000.0f) * 1.7f);
        }
        for (i = 0; i < shapes[k][0]; i++) host_b[k][i] = lwo_ref_f32_to_bf16(0.01f * (float)(i % 7));
    }
    memset(&d, 0, sizeof d);
    d.vram_budget = 3ull << 30;
    d.log = quiet;
    if (lwo_create(&d, &ctx)) die("lwo_create");
    bw = h2d_GBps();
    emit("lwo_h2d_pinned_GBps", bw);
    if (lwo_module_create(ctx, ops_src, "bench_ops.cu", NULL, &ops)) die("ops");
    h2d_conditions();
    lwo_module_destroy(ctx, ops);
    lwo_destroy(ctx);
    ctx = NULL;
    /* LWO_BENCH_QUICK: every format resident and at the minimum, bf16 also half resident;
       LWO_BENCH_FORMATS=int8,fp8w8a8: only those; LWO_BENCH_OFFLOAD_STREAMS: lwo_desc.offload_streams;
       LWO_BENCH_GEMM_KERNELS: lwo_desc.gemm_kernels (9: fp8 upcast weights read as stored) */
    for (f = 0; f < 4; f++) {
        compute = 0;
        for (b = 0; b < 3; b++) {
            if (getenv("LWO_BENCH_QUICK") && b == 1 && f > 0) continue;
            if (!listed(getenv("LWO_BENCH_FORMATS"), names[f])) continue;
            run(fmts[f], names[f], fracs[b], bw, &compute);
        }
    }
    if (out) fclose(out);
    return 0;
}

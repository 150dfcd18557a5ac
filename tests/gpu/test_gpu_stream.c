/* GPU tests of the streaming engine: a 24-layer stack whose weights (weight, bias, scale parts)
   live in pinned host memory, streamed under random budgets from the minimum to all resident,
   must give output bit-identical to the all-resident run over many passes, with random delays
   injected on the compute and offload streams so that a missing wait shows; a pass in another
   order stays correct; a whole pass captured as a graph equals eager; the arena never exceeds the
   budget. LWO_TEST_QUICK=1: fewer passes (for compute-sanitizer). The ops are the test's own
   kernels, compiled through lwo's public JIT API: y[m,n] = (sum_k x[m,k] W[n,k]) * scale[n] + bias[n],
   summed in a fixed order so every run is bit-for-bit repeatable. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"
#include <sys/mman.h>

#define LAYERS 24
#define M 64
static const char *op_src =
    "extern \"C\" __global__ void layer(const float *x, const float *w, const float *bias, const float *scale, float *y,\n"
    "                                   int M, int N, int K) {\n"
    "  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y; if (n >= N) return;\n"
    "  float acc = 0.0f; for (int k = 0; k < K; k++) acc = __fadd_rn(acc, __fmul_rn(x[m * K + k], w[n * K + k]));\n"
    "  float v = __fadd_rn(__fmul_rn(acc, scale[n]), bias[n]); y[m * N + n] = v / (1.0f + fabsf(v)); }\n"
    "extern \"C\" __global__ void spin(unsigned long long cycles) {\n"
    "  unsigned long long t0 = clock64(); while (clock64() - t0 < cycles) { } }\n";

static int dims[LAYERS + 1];
static float *host_w[LAYERS], *host_b[LAYERS], *host_s[LAYERS];
static float x0[M * 512];

typedef struct run_ctx {
    lwo_context *ctx; lwo_module *mod; lwo__item *items[LAYERS]; lwo_tensor *act[2]; float *x0_pinned;
    lwo__home homes[LAYERS][3]; int nhomes; void *map; size_t map_len;
} run_ctx;

/* home_mode 0: pinned copies (lwo_host_alloc); 1: lwo's own pinned homes; 2: a file of the weights,
   mapped read-only and registered with the driver in place (each part on its own pages). */
static int home_mode;

static void quiet(void *u, lwo_log_level l, const char *m) { (void)u; if (l <= LWO_LOG_WARN) printf("  [lwo] %s\n", m); }


static lwo_result spin(run_ctx *rc, lwo__CUstream s, unsigned long long cycles) {
    lwo__CUfunction fn;
    void *args[1];
    lwo_result r = lwo__module_function(rc->ctx, rc->mod, "spin", &fn);
    if (r) return r;
    args[0] = &cycles;
    return lwo__launch_fn(rc->ctx, s, fn, 1, 1, 1, 1, 1, 1, 0, args, "spin");
}

static lwo_result setup(run_ctx *rc, uint64_t budget, int offload_streams, int max_slots) {
    lwo_desc d;
    lwo_result r;
    int l;
    uint64_t shape[2] = { M, 512 };
    memset(rc, 0, sizeof *rc);
    memset(&d, 0, sizeof d);
    d.vram_budget = budget;
    d.log = quiet;
    d.offload_streams = offload_streams;
    d.max_slots = max_slots;
    if ((r = lwo_create(&d, &rc->ctx)) != 0) { printf("create: %s\n", lwo_last_error(rc->ctx)); return r; }
    if ((r = lwo_module_create(rc->ctx, op_src, "stack_ops.cu", NULL, &rc->mod)) != 0) return r;
    if ((r = lwo_tensor_create(rc->ctx, LWO_DTYPE_F32, 2, shape, &rc->act[0])) || (r = lwo_tensor_create(rc->ctx, LWO_DTYPE_F32, 2, shape, &rc->act[1]))) return r;
    /* the weights' host homes (graphs cannot copy from pageable memory) */
    if ((r = lwo_host_alloc(rc->ctx, sizeof x0, (void **)&rc->x0_pinned)) != 0) return r;
    memcpy(rc->x0_pinned, x0, sizeof x0);
    if (home_mode == 2) {
        char path[] = "/tmp/lwo-weights-XXXXXX";
        int fd = mkstemp(path);
        size_t off = 0;
        long ps = sysconf(_SC_PAGESIZE);
        for (l = 0; l < LAYERS; l++) {
            size_t b[3];
            const float *src[3];
            int p;
            b[0] = (size_t)dims[l + 1] * dims[l] * 4; b[1] = b[2] = (size_t)dims[l + 1] * 4;
            src[0] = host_w[l]; src[1] = host_b[l]; src[2] = host_s[l];
            for (p = 0; p < 3; p++) {
                if (pwrite(fd, src[p], b[p], (off_t)off) != (ssize_t)b[p]) return LWO_ERROR_IO;
                off += (b[p] + (size_t)ps - 1) / (size_t)ps * (size_t)ps;
            }
        }
        if (ftruncate(fd, (off_t)off) != 0) return LWO_ERROR_IO;
        rc->map = mmap(NULL, off, PROT_READ, MAP_SHARED, fd, 0);
        rc->map_len = off;
        close(fd);
        unlink(path);
        if (rc->map == MAP_FAILED) return LWO_ERROR_IO;
        off = 0;
        for (l = 0; l < LAYERS; l++) {
            const void *host[3];
            uint64_t bytes[3];
            int p;
            bytes[0] = (uint64_t)dims[l + 1] * dims[l] * 4; bytes[1] = bytes[2] = (uint64_t)dims[l + 1] * 4;
            for (p = 0; p < 3; p++) {
                if ((r = lwo__home_make(rc->ctx, (const char *)rc->map + off, bytes[p], 1, &rc->homes[l][p])) != 0) return r;
                if (rc->homes[l][p].kind != LWO__HOME_REGISTERED) return LWO_ERROR_UNSUPPORTED;
                host[p] = rc->homes[l][p].ptr;
                off += (bytes[p] + (uint64_t)ps - 1) / (uint64_t)ps * (uint64_t)ps;
            }
            if ((r = lwo__item_create(rc->ctx, host, bytes, 0, &rc->items[l])) != 0) return r;
        }
        rc->nhomes = 1;
        return LWO_SUCCESS;
    }
    for (l = 0; l < LAYERS; l++) {
        const void *host[3];
        uint64_t bytes[3];
        int p;
        const float *src[3];
        bytes[0] = (uint64_t)dims[l + 1] * dims[l] * 4; src[0] = host_w[l];
        bytes[1] = (uint64_t)dims[l + 1] * 4; src[1] = host_b[l];
        bytes[2] = (uint64_t)dims[l + 1] * 4; src[2] = host_s[l];
        for (p = 0; p < 3; p++) {
            void *h;
            if (home_mode == 1) {
                if ((r = lwo__home_make(rc->ctx, src[p], bytes[p], 0, &rc->homes[l][p])) != 0) return r;
                if (rc->homes[l][p].kind != LWO__HOME_PINNED) return LWO_ERROR_UNSUPPORTED;
                h = rc->homes[l][p].ptr;
                rc->nhomes = 1;
            } else {
                if ((r = lwo_host_alloc(rc->ctx, bytes[p], &h)) != 0) return r;
                memcpy(h, src[p], (size_t)bytes[p]);
            }
            host[p] = h;
        }
        if ((r = lwo__item_create(rc->ctx, host, bytes, 0, &rc->items[l])) != 0) return r;
    }
    return LWO_SUCCESS;
}

/* One forward pass; order 0 is the stack in order, order 1 swaps layers 4 and 8 (same shapes), a
   pass that leaves the learned order (its output is compared with the resident run of order 1).
   delay: random spins on the compute and the offload streams. */
static void teardown(run_ctx *rc) {
    int l, p;
    if (rc->ctx && rc->nhomes) {
        lwo_stream_synchronize(rc->ctx, NULL);
        for (l = 0; l < LAYERS; l++) for (p = 0; p < 3; p++) if (rc->homes[l][p].kind) lwo__home_free(rc->ctx, &rc->homes[l][p]);
    }
    lwo_destroy(rc->ctx);
    if (rc->map && rc->map != MAP_FAILED) munmap(rc->map, rc->map_len);
    memset(rc, 0, sizeof *rc);
}

static lwo_result pass(run_ctx *rc, int order, int delay, float *out) {
    lwo_context *ctx = rc->ctx;
    lwo__CUfunction fn;
    lwo_result r;
    int i;
    if ((r = lwo__module_function(ctx, rc->mod, "layer", &fn)) != 0) return r;
    if ((r = lwo_tensor_upload_async(ctx, NULL, rc->act[0], rc->x0_pinned, (uint64_t)M * dims[0] * 4)) != 0) return r;
    if ((r = lwo_pass_begin(ctx)) != 0) return r;
    for (i = 0; i < LAYERS; i++) {
        int l = (order && i == 4) ? 8 : (order && i == 8) ? 4 : i;
        lwo__item *it = rc->items[l];
        lwo__CUdeviceptr w, xp = lwo_tensor_device_ptr(rc->act[i & 1]), yp = lwo_tensor_device_ptr(rc->act[(i + 1) & 1]);
        lwo__CUdeviceptr bp, sp;
        int Mi = M, N = dims[l + 1], K = dims[l];
        void *args[8];
        /* short delays often, long ones (up to ~1 ms) now and then: long enough for a transfer to
           overtake a pending kernel, or a kernel to overtake a pending transfer, were a wait missing */
        if (delay && check_rand_u64() % 3 == 0) {
            unsigned long long c = check_rand_u64() % 8 == 0 ? check_rand_u64() % 2000000 : check_rand_u64() % 60000;
            if ((r = spin(rc, ctx->compute, c)) != 0) return r;
        }
        if (delay && ctx->engine->nstreams && check_rand_u64() % 3 == 0) {
            unsigned long long c = check_rand_u64() % 8 == 0 ? check_rand_u64() % 2000000 : check_rand_u64() % 60000;
            if ((r = spin(rc, ctx->engine->streams[check_rand_u64() % ctx->engine->nstreams], c)) != 0) return r;
        }
        if ((r = lwo__item_acquire(ctx, it, ctx->compute, &w)) != 0) return r;
        bp = w + it->offset[1];
        sp = w + it->offset[2];
        args[0] = &xp; args[1] = &w; args[2] = &bp; args[3] = &sp; args[4] = &yp; args[5] = &Mi; args[6] = &N; args[7] = &K;
        if ((r = lwo__launch_fn(ctx, ctx->compute, fn, (unsigned)(N + 127) / 128, M, 1, 128, 1, 1, 0, args, "layer")) != 0) return r;
        if ((r = lwo__item_release(ctx, it, ctx->compute)) != 0) return r;
    }
    if ((r = lwo_pass_end(ctx)) != 0) return r;
    if (out) return lwo_tensor_download(ctx, rc->act[LAYERS & 1], out, (uint64_t)M * dims[LAYERS] * 4);
    return LWO_SUCCESS;
}

static uint64_t total_weight_bytes(void) {
    uint64_t t = 0;
    int l;
    for (l = 0; l < LAYERS; l++) t += ((uint64_t)dims[l + 1] * dims[l] * 4 + 255) / 256 * 256 + 2 * (((uint64_t)dims[l + 1] * 4 + 255) / 256 * 256);
    return t;
}

/* lwo_linear on streamable weights (bf16, fp8 upcast, int8 W8A8, with bias): a 12-layer chain
   under a small budget must equal the same chain all resident, bit for bit, over 20 passes with
   random delays, and lwo_weight_acquire/release serve a custom op. */
static void test_linear_streamed(void) {
    static const lwo_format fmts[3] = { LWO_FORMAT_BF16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_INT8 };
    enum { L = 12, D = 512, MM = 96 };
    static uint16_t hw[L][D * D], hb[L][D], hx[MM * D], out_ref[MM * D], out[MM * D];
    int f, l, i;
    for (l = 0; l < L; l++) {
        for (i = 0; i < D * D; i++) hw[l][i] = lwo_ref_f32_to_bf16((float)(check_rand_normal() / sqrt((double)D)));
        for (i = 0; i < D; i++) hb[l][i] = lwo_ref_f32_to_bf16((float)(0.1 * check_rand_normal()));
    }
    for (i = 0; i < MM * D; i++) hx[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (f = 0; f < 3; f++) {
        int mode;
        for (mode = 0; mode < 2; mode++) { /* 0: all resident (reference), 1: streamed under a small budget */
            lwo_desc d;
            lwo_context *c = NULL;
            lwo_weight *w[L];
            lwo_tensor *a = NULL, *b = NULL;
            uint64_t shape[2] = { MM, D };
            lwo_result r;
            int p, bad = 0;
            lwo_stats st;
            memset(&d, 0, sizeof d);
            d.log = quiet;
            d.vram_budget = mode ? (6ull << 20) : (64ull << 20);
            r = lwo_create(&d, &c);
            if (r) { CHECK(0, "create: %s", lwo_last_error(c)); lwo_destroy(c); return; }
            for (l = 0; l < L && !r; l++) {
                lwo_weight_desc wd;
                memset(&wd, 0, sizeof wd);
                wd.rows = D; wd.cols = D; wd.data = hw[l]; wd.data_dtype = LWO_DTYPE_BF16; wd.format = fmts[f];
                wd.bias = hb[l]; wd.bias_dtype = LWO_DTYPE_BF16;
                wd.placement = mode ? LWO_PLACE_AUTO : LWO_PLACE_RESIDENT;
                r = lwo_weight_create(c, &wd, &w[l]);
            }
            if (!r) r = lwo_tensor_create(c, LWO_DTYPE_BF16, 2, shape, &a);
            if (!r) r = lwo_tensor_create(c, LWO_DTYPE_BF16, 2, shape, &b);
            if (!r && mode) {
                lwo_streaming_desc sd;
                memset(&sd, 0, sizeof sd);
                sd.max_rows = shape[0];
                sd.free_bytes = 4ull << 20;   /* a budget that leaves the weights too little room: they stream */
                r = lwo_streaming_plan(c, &sd);
            }
            CHECK(r == LWO_SUCCESS, "%s setup (mode %d): %s", lwo_format_name(fmts[f]), mode, lwo_last_error(c));
            for (p = 0; !r && p < (mode ? 20 : 1); p++) {
                lwo_tensor_upload(c, a, hx, sizeof hx);
                r = lwo_pass_begin(c);
                for (l = 0; !r && l < L; l++) {
                    lwo_linear_desc ld;
                    memset(&ld, 0, sizeof ld);
                    ld.x = (l & 1) ? b : a; ld.w = w[l]; ld.y = (l & 1) ? a : b;
                    r = lwo_linear(c, &ld);
                    if (!r && mode && check_rand_u64() % 4 == 0) {
                        lwo__CUfunction fn;
                        unsigned long long cyc = check_rand_u64() % 400000;
                        void *args[1];
                        args[0] = &cyc;
                        if (lwo__module_function(c, c->kernels, "lwo_k_spin", &fn) == 0) lwo__launch_fn(c, c->compute, fn, 1, 1, 1, 1, 1, 1, 0, args, "spin");
                    }
                }
                if (!r) r = lwo_pass_end(c);
                if (!r) r = lwo_tensor_download(c, (L & 1) ? b : a, mode ? out : out_ref, sizeof out);
                if (!r && mode && memcmp(out, out_ref, sizeof out) != 0) bad++;
            }
            CHECK(r == LWO_SUCCESS, "%s passes (mode %d): %s", lwo_format_name(fmts[f]), mode, lwo_last_error(c));
            if (mode) {
                lwo_weight_info info;
                memset(&st, 0, sizeof st);
                lwo_context_get_stats(c, &st);
                CHECK(bad == 0, "%s: %d of 20 streamed passes differ from the resident chain", lwo_format_name(fmts[f]), bad);
                CHECK(st.bytes_streamed > 0 && st.ring_bytes > 0, "%s: weights streamed (%llu bytes, ring %llu)", lwo_format_name(fmts[f]),
                      (unsigned long long)st.bytes_streamed, (unsigned long long)st.ring_bytes);
                printf("  lwo_linear %-9s streamed: resident %.1f MiB, ring %.1f MiB, %.1f MiB moved over 20 passes, %d differ\n", lwo_format_name(fmts[f]),
                       st.resident_bytes / 1048576.0, st.ring_bytes / 1048576.0, st.bytes_streamed / 1048576.0, bad);
                /* a custom op: acquire gives device tensors to read, release returns the slot */
                r = lwo_weight_acquire(c, NULL, w[L - 1], &info);
                CHECK(r == LWO_SUCCESS && info.data && lwo_tensor_device_ptr(info.data) != 0, "acquire for a custom op: %s", lwo_last_error(c));
                if (!r) {
                    static uint8_t back[D * D * 2];
                    r = lwo_tensor_download(c, info.data, back, lwo_tensor_bytes(info.data) < sizeof back ? lwo_tensor_bytes(info.data) : sizeof back);
                    CHECK(r == LWO_SUCCESS, "read an acquired weight: %s", lwo_last_error(c));
                    if (fmts[f] == LWO_FORMAT_BF16) CHECK(memcmp(back, hw[L - 1], 64) == 0, "the acquired bytes are the weight's");
                    CHECK(lwo_weight_release(c, NULL, w[L - 1]) == LWO_SUCCESS, "release");
                }
            }
            lwo_destroy(c);
        }
    }
}

int main(void) {
    static float ref[2][M * 512], got[M * 512];
    run_ctx rc;
    int l, i, trial, timed_plans = 0, quick = getenv("LWO_TEST_QUICK") != NULL, passes = quick ? 6 : 100;
    uint64_t wbytes, largest = 0, base;
    lwo_result r;
    check_seed("test_gpu_stream");
    for (l = 0; l <= LAYERS; l++) dims[l] = (l % 4 == 0) ? 256 : (l % 4 == 1) ? 384 : (l % 4 == 2) ? 512 : 320;
    for (l = 0; l < LAYERS; l++) {
        size_t nw = (size_t)dims[l + 1] * dims[l], k;
        host_w[l] = (float *)malloc(nw * 4); host_b[l] = (float *)malloc(dims[l + 1] * 4); host_s[l] = (float *)malloc(dims[l + 1] * 4);
        for (k = 0; k < nw; k++) host_w[l][k] = (float)(check_rand_normal() / sqrt((double)dims[l]));
        for (k = 0; k < (size_t)dims[l + 1]; k++) { host_b[l][k] = (float)(0.1 * check_rand_normal()); host_s[l][k] = (float)(0.5 + check_rand_uniform()); }
        {
            uint64_t b = ((uint64_t)nw * 4 + 255) / 256 * 256 + 2 * (((uint64_t)dims[l + 1] * 4 + 255) / 256 * 256);
            if (b > largest) largest = b;
        }
    }
    for (i = 0; i < M * dims[0]; i++) x0[i] = (float)check_rand_normal();
    wbytes = total_weight_bytes();
    base = 2ull << 20; /* activations, scratch and allocator rounding */

    /* the all-resident reference, both orders */
    r = setup(&rc, wbytes + base + (8ull << 20), 2, 4);
    CHECK(r == LWO_SUCCESS, "setup: %s", lwo_last_error(rc.ctx));
    if (r) return CHECK_SUMMARY();
    CHECK(lwo_streaming_plan(rc.ctx, NULL) == LWO_SUCCESS, "plan: %s", lwo_last_error(rc.ctx));
    CHECK(rc.ctx->stats.ring_bytes == 0 && rc.ctx->stats.resident_bytes == wbytes, "everything resident (%llu of %llu)",
          (unsigned long long)rc.ctx->stats.resident_bytes, (unsigned long long)wbytes);
    CHECK(pass(&rc, 0, 0, ref[0]) == LWO_SUCCESS && pass(&rc, 1, 0, ref[1]) == LWO_SUCCESS, "resident passes: %s", lwo_last_error(rc.ctx));
    teardown(&rc);

    /* too small a budget names the weight and the bytes missing */
    r = setup(&rc, 1 << 20, 2, 4); /* 1 MiB: the activations leave less than the largest weight */
    if (!r) {
        r = lwo_streaming_plan(rc.ctx, NULL);
        CHECK_EQ_INT(r, LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(lwo_last_error(rc.ctx), "smallest") != NULL, "%s", lwo_last_error(rc.ctx));
    }
    teardown(&rc);

    /* random budgets from the minimum to all resident; 1-3 offload streams, 1-4 slots */
    for (trial = 0; trial < (quick ? 2 : 7); trial++) {
        double f = trial == 0 ? 0.0 : trial == 1 ? 0.5 : check_rand_uniform();
        uint64_t budget = base + largest + (uint64_t)(f * (double)(wbytes - largest));
        int ns = 1 + (int)(check_rand_u64() % 3), ms = 1 + (int)(check_rand_u64() % 4), bad = 0, p;
        lwo_stats st;
        lwo_memory_stats mem;
        memset(&st, 0, sizeof st); memset(&mem, 0, sizeof mem);
        size_t fr0, fr1, tot;
        budget = (budget + (1 << 20)) / (1 << 20) * (1 << 20);
        if (trial == 0) { ms = 2; ns = 3; } /* the minimum, with the most transfers in flight at once */
        home_mode = trial % 3; /* pinned by the test, lwo's pinned homes, a registered mapped file */
        r = setup(&rc, budget, ns, ms);
        CHECK(r == LWO_SUCCESS, "setup budget %llu: %s", (unsigned long long)budget, lwo_last_error(rc.ctx));
        if (r) { teardown(&rc); continue; }
        rc.ctx->cu.cuMemGetInfo(&fr0, &tot);
        r = lwo_streaming_plan(rc.ctx, NULL);
        CHECK(r == LWO_SUCCESS, "plan at budget %llu: %s", (unsigned long long)budget, lwo_last_error(rc.ctx));
        if (r) { teardown(&rc); continue; }
        for (p = 0; p < passes; p++) {
            int ord = (p % 10 == 7) || (quick && p == 3);
            r = pass(&rc, ord, 1, got);
            if (r) { CHECK(0, "pass %d: %s", p, lwo_last_error(rc.ctx)); break; }
            if (memcmp(got, ref[ord], (size_t)M * dims[LAYERS] * 4) != 0) bad++;
        }
        /* planned again, timed against the last pass (in the learned order): still exact */
        if (!r) {
            lwo_stats ts;
            int tbad = 0;
            r = lwo_streaming_plan(rc.ctx, NULL);
            lwo_context_get_stats(rc.ctx, &ts);
            CHECK(r == LWO_SUCCESS, "a timed plan: %s", lwo_last_error(rc.ctx));
            /* timed when the first plan's resident uploads gave lwo a rate (1 MiB or more) */
            timed_plans += ts.plan_predicted_ms > 0;
            CHECK(ts.plan_predicted_wait_ms >= 0 && ts.plan_predicted_wait_ms <= ts.plan_predicted_ms,
                  "the model's figures (%.3f ms, %.3f waiting)", ts.plan_predicted_ms, ts.plan_predicted_wait_ms);
            for (p = 0; !r && p < 10; p++) {
                r = pass(&rc, 0, 1, got);
                if (memcmp(got, ref[0], (size_t)M * dims[LAYERS] * 4) != 0) tbad++;
            }
            CHECK(r == LWO_SUCCESS && tbad == 0, "after the timed plan: %d of 10 passes differ (%s)", tbad, lwo_last_error(rc.ctx));
            lwo_context_get_stats(rc.ctx, &ts);
            /* the copies' own rate: measured when something streamed, and a rate a bus can have */
            CHECK(ts.ring_bytes == 0 || (ts.transfer_GBps > 0.05 && ts.transfer_GBps < 2000),
                  "the streamed copies' rate after the timed plan: %.2f GB/s", ts.transfer_GBps);
            if (trial < 2)
                printf("  timed plan: ring %.2f MiB, resident %.1f MiB; the model's pass %.3f ms (%.3f waiting); the last pass %.3f ms\n",
                       ts.ring_bytes / 1048576.0, ts.resident_bytes / 1048576.0, ts.plan_predicted_ms, ts.plan_predicted_wait_ms, rc.ctx->stats.last_pass_ms);
        }
        lwo_context_get_stats(rc.ctx, &st);
        mem = check_memory_stats(rc.ctx);
        rc.ctx->cu.cuMemGetInfo(&fr1, &tot);
        /* copies run one at a time, in use order, over however many offload streams */
        CHECK(rc.ctx->engine->xfer_overlap_ms < 1e-3, "%d offload streams: copies ran beside each other for %.4f ms", ns, rc.ctx->engine->xfer_overlap_ms);
        CHECK(bad == 0, "budget %.0f%% (%d streams, %d slots max): %d of %d passes differ from the resident run", 100 * f, ns, ms, bad, passes);
        CHECK(mem.peak <= budget && fr0 - fr1 < (4u << 20), "the arena stays within the budget (peak %llu of %llu; device free moved %lld bytes)",
              (unsigned long long)mem.peak, (unsigned long long)budget, (long long)fr0 - (long long)fr1);
        CHECK(st.resident_bytes < wbytes ? st.bytes_streamed > 0 : 1, "something streamed");
        /* packed by bytes: a ring of two of the largest weights holds three of the smaller ones
           (324 + 786 + 655 KiB do not fit, but a 384- and a 320-row weight beside a 256-row one do) */
        if (rc.ctx->engine->ring_bytes >= 2 * largest && st.resident_bytes == 0)
            CHECK(rc.ctx->engine->live_max >= 3, "a ring of %.2f MiB held %d weights at once (the smaller ones share the room of a large one)",
                  rc.ctx->engine->ring_bytes / 1048576.0, rc.ctx->engine->live_max);
        CHECK(st.order_deviations > 0, "the reordered passes were counted as deviations");
        CHECK(st.passes >= (uint64_t)passes && st.last_pass_ms > 0 && (st.bytes_streamed == 0 || st.last_pass_GBps > 0) && st.wait_ms >= 0,
              "pass timing: %llu passes, last %.3f ms, %.1f GB/s, waited %.2f ms", (unsigned long long)st.passes, st.last_pass_ms, st.last_pass_GBps, st.wait_ms);
        printf("  %s: budget %6.1f MiB (%3.0f%%), %d offload streams, ring of %.2f MiB (at most %d weights in it at once), resident %.1f MiB: %d passes, %.1f MiB streamed, %llu deviations\n",
               home_mode == 2 ? "mapped file" : home_mode == 1 ? "lwo pinned " : "test pinned", budget / 1048576.0, 100 * f, ns, rc.ctx->engine->ring_bytes / 1048576.0, rc.ctx->engine->live_max,
               st.resident_bytes / 1048576.0, passes, st.bytes_streamed / 1048576.0, (unsigned long long)st.order_deviations);
        printf("      last pass %.3f ms, %.2f MiB streamed in it (%.1f GB/s), compute waited %.1f ms over all passes\n", st.last_pass_ms,
               st.last_pass_bytes / 1048576.0, st.last_pass_GBps, st.wait_ms);
        /* a whole pass as a graph, transfers included, equals eager; also after eager passes */
        if (trial <= 1) {
            lwo_graph *g = NULL;
            int gb = 0;
            lwo_stats s0, s1;
            uint64_t eager_bytes = 0;
            lwo_context_get_stats(rc.ctx, &s0);
            r = lwo_graph_capture_begin(rc.ctx);
            if (!r) r = pass(&rc, 0, 0, NULL);
            if (!r) r = lwo_graph_capture_end(rc.ctx, &g);
            CHECK(r == LWO_SUCCESS, "capture a streamed pass: %s", lwo_last_error(rc.ctx));
            lwo_context_get_stats(rc.ctx, &s1);
            /* the capture moves nothing; each launch moves what an eager pass in the learned order does */
            CHECK(s1.bytes_streamed == s0.bytes_streamed && s1.transfers == s0.transfers, "a capture counts no bytes (%llu -> %llu)",
                  (unsigned long long)s0.bytes_streamed, (unsigned long long)s1.bytes_streamed);
            for (p = 0; !r && p < 20; p++) {
                if (p == 10) {
                    lwo_context_get_stats(rc.ctx, &s0);
                    r = pass(&rc, 0, 1, got);
                    lwo_context_get_stats(rc.ctx, &s1);
                    eager_bytes = s1.bytes_streamed - s0.bytes_streamed;
                    if (memcmp(got, ref[0], (size_t)M * dims[LAYERS] * 4)) gb++;
                }
                lwo_context_get_stats(rc.ctx, &s0);
                r = lwo_graph_launch(rc.ctx, g);
                lwo_context_get_stats(rc.ctx, &s1);
                if (s1.bytes_streamed - s0.bytes_streamed != lwo_graph_bytes_streamed(g)) gb += 1000;
                if (!r) r = lwo_tensor_download(rc.ctx, rc.act[LAYERS & 1], got, (uint64_t)M * dims[LAYERS] * 4);
                if (memcmp(got, ref[0], (size_t)M * dims[LAYERS] * 4)) gb++;
            }
            CHECK(r == LWO_SUCCESS && gb == 0, "graph replays equal the resident run and count their bytes: %d (%s)", gb, lwo_last_error(rc.ctx));
            /* an eager pass may also prefetch the next pass's first weights: the graph moves at most as much */
            CHECK(st.resident_bytes < wbytes ? lwo_graph_bytes_streamed(g) > 0 && lwo_graph_bytes_streamed(g) <= eager_bytes : lwo_graph_bytes_streamed(g) == 0,
                  "a graph launch streams the pass's weights (%llu bytes; an eager pass %llu)", (unsigned long long)lwo_graph_bytes_streamed(g), (unsigned long long)eager_bytes);
            lwo_graph_destroy(rc.ctx, g);
        }
        /* the protocol's sensitivity: without the consumed wait, the same stress should corrupt */
        if (trial == 0 && !quick && rc.ctx->engine->live_max > 1) {
            int corrupt = 0;
            rc.ctx->engine->test_skip_consumed_wait = 1;
            for (p = 0; p < 30; p++) { if (pass(&rc, 0, 1, got)) break; corrupt += memcmp(got, ref[0], (size_t)M * dims[LAYERS] * 4) != 0; }
            rc.ctx->engine->test_skip_consumed_wait = 0;
            rc.ctx->engine->test_skip_ready_wait = 1;
            {
                int corrupt2 = 0;
                for (p = 0; p < 30; p++) { if (pass(&rc, 0, 1, got)) break; corrupt2 += memcmp(got, ref[0], (size_t)M * dims[LAYERS] * 4) != 0; }
                printf("  sensitivity: without the consumed wait %d of 30 passes corrupt; without the ready wait %d of 30\n", corrupt, corrupt2);
                CHECK(corrupt > 0 && corrupt2 > 0, "the stress test sees a missing wait (consumed: %d, ready: %d corrupt passes)", corrupt, corrupt2);
            }
            rc.ctx->engine->test_skip_ready_wait = 0;
            {   /* without the wait on the previous copy, copies on other streams overlap it */
                double o0;
                lwo_context_get_stats(rc.ctx, &st);
                o0 = rc.ctx->engine->xfer_overlap_ms;
                rc.ctx->engine->test_skip_in_order = 1;
                for (p = 0; p < 30; p++) if (pass(&rc, 0, 1, got)) break;
                rc.ctx->engine->test_skip_in_order = 0;
                lwo_context_get_stats(rc.ctx, &st);
                printf("  sensitivity: without the wait on the previous copy, copies overlapped for %.3f ms in 30 passes\n", rc.ctx->engine->xfer_overlap_ms - o0);
                CHECK(rc.ctx->engine->xfer_overlap_ms - o0 > 0, "the overlap measure sees copies out of order (%.4f ms)", rc.ctx->engine->xfer_overlap_ms - o0);
            }
            lwo_stream_synchronize(rc.ctx, NULL);
        }
        teardown(&rc);
    }
    CHECK(timed_plans > 0, "a plan was timed against a pass in %d of the trials", timed_plans);
    for (l = 0; l < LAYERS; l++) { free(host_w[l]); free(host_b[l]); free(host_s[l]); }
    test_linear_streamed();
    return CHECK_SUMMARY();
}

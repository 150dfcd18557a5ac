/* bench_gemm.c - lwo_linear per path: ms and TFLOP/s (median of 20 after 3 warm-up runs, CUDA events).
   "e2e" is lwo_linear as called (W8A8: per-token quantization + GEMM; fp8 upcast: upcast + GEMM, or
   on sm_90a the register-A GEMM on the codes where its tiles fill the grid).
   "stored e2e" (fp8 upcast only) is the
   same call with the GEMM reading the fp8 codes as stored (lwo_desc.gemm_kernels 9, sm_90a), and
   the forced tiles' columns of that row are such GEMMs alone; "regs e2e" the same with the
   register-A kernels (lwo_desc.gemm_kernels 10), and below the row that call with each of their
   tiles forced (11 to 13), so that their choice per shape can be checked against measurements;
   "copy e2e" the same call through a 16-bit copy of the weight (lwo_desc.gemm_kernels 14), which the
   default takes where the register-A kernels' tiles would not fill the grid.
   "gemm" is the GEMM alone on already-prepared operands (the internal lwo__gemm), with the tile
   lwo picks; on sm_90a the GEMM is also timed with each Hopper tile forced (lwo_desc.gemm_kernels
   2 to 7), so the tile table in lwo__gemm_wg_tile can be checked against measurements. "quant" is the
   W8A8 per-token quantizer alone, its rate counting the bf16 read and the 8-bit write. "no split" is
   the GEMM alone with lwo_desc.gemm_split = -1 (its last rounds never split along K); it and the
   default are each timed twice, in the order default, no split, (tiles), no split, default, and
   report their faster time. "e2e" is timed first and last for the weight, and reports its faster time.
   Build: make build/bench_gemm. Peers: tests/bench/bench_gemm_peers.py (same shapes). */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <stdio.h>
#include <time.h>

static lwo_context *ctx;
static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return x < y ? -1 : x > y; }

static const lwo_tensor *g_x; static const lwo_weight *g_w; static lwo_tensor *g_y;
static int g_gemm_only; /* 0: lwo_linear; 1: the GEMM alone; 2: the W8A8 per-token quantizer alone */
static lwo_result one(void) {
    if (!g_gemm_only) {
        lwo_linear_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.x = g_x; ld.w = g_w; ld.y = g_y;
        return lwo_linear(ctx, &ld);
    }
    if (g_gemm_only == 2) {
        const lwo_weight *w = g_w;
        uint64_t M = g_x->shape[0], qbytes = (M * w->kpad + 255) / 256 * 256;
        lwo__CUdeviceptr ws = ctx->arena + ctx->ws_off;
        return lwo__rowq_launch(ctx, ctx->compute, g_x->ptr, g_x->dtype, M, g_x->shape[1], 0, 0, 0, 0,
                                w->format == LWO_FORMAT_FP8_E4M3_W8A8, ws, w->kpad, ws + qbytes);
    }
    {
        const lwo_weight *w = g_w;
        uint64_t M = g_x->shape[0], Kp = w->kpad;
        lwo__CUdeviceptr ws = ctx->arena + ctx->ws_off;
        lwo__gemm_args g;
        memset(&g, 0, sizeof g);
        g.stream = ctx->compute; g.op = g_x->dtype; g.a = g_x->ptr; g.lda = g.a_k = w->cols; g.kpad = Kp;
        g.M = M; g.N = w->rows; g.y = g_y->ptr; g.y_kind = 2;
        switch (w->format) {
        case LWO_FORMAT_BF16: case LWO_FORMAT_F16: g.b = w->data->ptr; break;
        case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2:   /* the codes as stored, or the upcast W */
            g.may_split = 1;
            if (lwo__gemm_fp8_ok(ctx, M, g.N, w->data->ptr, g.y)) {
                g.b = w->data->ptr; g.b_fp8 = w->format == LWO_FORMAT_FP8_E5M2 ? 2 : 1; g.b_scales = w->scales->ptr;
            } else g.b = ws;
            break;
        default:   /* W8A8: x quantized into the workspace, its row scales after the codes */
            g.op = w->format == LWO_FORMAT_INT8 ? LWO_DTYPE_I8 : LWO_DTYPE_F8_E4M3;
            g.a = ws; g.lda = g.a_k = Kp; g.b = w->data->ptr; g.may_split = 1;
            g.a_scales = ws + (M * Kp + 255) / 256 * 256; g.b_scales = w->scales->ptr;
            break;
        }
        return lwo__gemm(ctx, &g);
    }
}

static double time_ms(void) {
    lwo_event *a, *b;
    float t[20], ms;
    int i;
    /* the card idle for 30 ms first, as tests/bench/bench_gemm_peers.py does before each of its figures:
       clocks fall with the heat of what ran before, and this puts every figure on the same footing */
    struct timespec idle = { 0, 30000000L };
    nanosleep(&idle, NULL);
    lwo_event_create(ctx, &a); lwo_event_create(ctx, &b);
    for (i = 0; i < 3; i++) one();
    for (i = 0; i < 20; i++) {
        lwo_event_record(ctx, a, NULL);
        one();
        lwo_event_record(ctx, b, NULL);
        lwo_event_synchronize(ctx, b);
        lwo_event_elapsed_ms(ctx, a, b, &ms);
        t[i] = ms;
    }
    lwo_event_destroy(ctx, a); lwo_event_destroy(ctx, b);
    qsort(t, 20, sizeof *t, cmpf);
    return 0.5 * (t[9] + t[10]);
}

int main(void) {
    static const uint64_t shapes[][3] = { { 4608, 3072, 3072 }, { 4608, 3072, 12288 }, { 4608, 12288, 3072 },
                                          { 8192, 8192, 8192 }, { 1024, 3072, 12288 }, { 256, 3072, 3072 } };
    static const lwo_format fmts[] = { LWO_FORMAT_BF16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_INT8, LWO_FORMAT_FP8_E4M3_W8A8 };
    lwo_desc desc;
    lwo_context_info ci;
    const lwo_device_info *info = &ci.device;
    int s, f;
    /* LWO_BENCH_TILES: which forced tiles to time, in that order, as lwo_desc.gemm_kernels digits (default
       "2345678"); a tile named twice reports its faster time, so "567765" times three tiles in both
       orders (clocks fall as the card warms: what runs later runs slower) */
    const char *tiles = getenv("LWO_BENCH_TILES") ? getenv("LWO_BENCH_TILES") : "2345678";
    /* LWO_BENCH_TILE_SPLIT: lwo_desc.gemm_split while a tile is forced (the device's multiprocessor
       count: every tile that may split does, wherever its units leave a round part-filled) */
    const int tile_split = getenv("LWO_BENCH_TILE_SPLIT") ? atoi(getenv("LWO_BENCH_TILE_SPLIT")) : 0;
    /* LWO_BENCH_SHAPES: which shapes to run, as digits of their index in `shapes` (e.g. "01"; for a profiler) */
    const char *only = getenv("LWO_BENCH_SHAPES");
    memset(&desc, 0, sizeof desc);
    desc.vram_budget = (uint64_t)16 << 30;
    if (lwo_create(&desc, &ctx) != LWO_SUCCESS) { fprintf(stderr, "lwo_create: %s\n", lwo_last_error(ctx)); lwo_destroy(ctx); return 1; }
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(ctx, &ci);
    printf("lwo bench_gemm on %s (%s)\n%-20s %-11s %9s %8s %9s %9s %9s %9s %9s %9s %9s %8s %9s %10s %9s %9s %9s %9s %9s\n", info->name, info->arch, "M x K x N", "path",
           "gemm ms", "gemm TF", "64x128", "128x128", "128x256", "pingpong", "pp 2x1", "256 2x1", "e2e ms", "e2e TF", "quant ms", "quant TB/s",
           "no split", "192 2x1", "stored e2e", "regs e2e", "copy e2e");
    for (s = 0; s < 6; s++) {
        uint64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2], i;
        double flop = 2.0 * M * N * K;
        float *wf;
        uint16_t *xh;
        uint64_t sx[2], sy[2];
        lwo_tensor *x, *y;
        if (only && !strchr(only, '0' + s)) continue;
        wf = (float *)malloc(N * K * 4);
        xh = (uint16_t *)malloc(M * K * 2);
        for (i = 0; i < N * K; i++) wf[i] = (float)((double)((i * 2654435761u) % 2001) / 1000.0 - 1.0) * 0.05f;
        for (i = 0; i < M * K; i++) xh[i] = lwo_ref_f32_to_bf16((float)((double)((i * 40503u) % 2001) / 1000.0 - 1.0));
        sx[0] = M; sx[1] = K; sy[0] = M; sy[1] = N;
        if (lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, sx, &x) || lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, sy, &y)) { fprintf(stderr, "%s\n", lwo_last_error(ctx)); return 1; }
        lwo_tensor_upload(ctx, x, xh, M * K * 2);
        for (f = 0; f < 4; f++) {
            lwo_weight_desc d;
            lwo_weight *w;
            double tg, tn, te, tq = 0, tc = 0, tr = 0, tt[LWO__WG_TILES] = { 0 }, tu[3] = { 0 }, tcp = 0;
            int t;
            const char *c;
            if (fmts[f] == LWO_FORMAT_FP8_E4M3_W8A8 && info->cc_major * 10 + info->cc_minor < 89) continue;
            memset(&d, 0, sizeof d);
            d.rows = N; d.cols = K; d.data = wf; d.format = fmts[f];
            if (lwo_weight_create(ctx, &d, &w)) { fprintf(stderr, "weight: %s\n", lwo_last_error(ctx)); continue; }
            g_x = x; g_w = w; g_y = y;
            g_gemm_only = 0;
            if (fmts[f] == LWO_FORMAT_FP8_E4M3 && strcmp(info->arch, "sm_90a") == 0) {
                /* first: the copy's call leaves the upcast weight in the workspace, which the
                   GEMM-only run of this row reads (the default may read the codes as stored) */
                ctx->desc.gemm_kernels = LWO__GEMM_FP8_COPY; tcp = time_ms(); ctx->desc.gemm_kernels = 0;
            }
            te = time_ms();   /* first: it also sizes the workspace the GEMM-only run reads */
            g_gemm_only = 1; tg = time_ms();
            ctx->desc.gemm_split = -1; tn = time_ms(); ctx->desc.gemm_split = 0;
            if (strcmp(info->arch, "sm_90a") == 0)
                for (c = tiles; *c; c++) {
                    double ms;
                    if (*c < '2' || *c >= '2' + LWO__WG_TILES) continue;
                    t = *c - '2';
                    ctx->desc.gemm_kernels = 2 + t; ctx->desc.gemm_split = tile_split; ms = time_ms();
                    ctx->desc.gemm_kernels = 0; ctx->desc.gemm_split = 0;
                    if (tt[t] == 0 || ms < tt[t]) tt[t] = ms;
                }
            {
                double t2;
                ctx->desc.gemm_split = -1; t2 = time_ms(); ctx->desc.gemm_split = 0;
                if (t2 < tn) tn = t2;
                if ((t2 = time_ms()) < tg) tg = t2;
            }
            if (fmts[f] == LWO_FORMAT_INT8 || fmts[f] == LWO_FORMAT_FP8_E4M3_W8A8) { g_gemm_only = 2; tq = time_ms(); }
            if (fmts[f] == LWO_FORMAT_FP8_E4M3 && strcmp(info->arch, "sm_90a") == 0) {
                g_gemm_only = 0; ctx->desc.gemm_kernels = LWO__GEMM_FP8_STORED; tc = time_ms();
                ctx->desc.gemm_kernels = LWO__GEMM_FP8_REGS; tr = time_ms();
                for (t = 0; t < 3; t++) { ctx->desc.gemm_kernels = LWO__GEMM_FP8_REGS + 1 + t; tu[t] = time_ms(); }
                ctx->desc.gemm_kernels = 0;
            }
            {
                double t2;
                g_gemm_only = 0;
                if ((t2 = time_ms()) < te) te = t2;
            }
            printf("%5llux%5llux%5llu  %-11s %9.3f %8.1f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.1f %9.4f %10.2f %9.3f %9.3f %9.3f %9.3f %9.3f\n", (unsigned long long)M, (unsigned long long)K,
                   (unsigned long long)N, fmts[f] == LWO_FORMAT_BF16 ? "bf16" : fmts[f] == LWO_FORMAT_FP8_E4M3 ? "fp8 upcast" :
                   fmts[f] == LWO_FORMAT_INT8 ? "int8 w8a8" : "fp8 w8a8", tg, flop / tg * 1e-9, tt[0], tt[1], tt[2], tt[3], tt[4], tt[5], te, flop / te * 1e-9,
                   tq, tq > 0 ? (double)M * K * 3 / tq * 1e-9 : 0.0, tn, tt[6], tc, tr, tcp);   /* bf16 read, 8-bit written */
            if (tu[0] > 0) {
                const lwo__wgu_tile *pick = lwo__gemm_wgu_tile(ctx, M, N);
                printf("    regs e2e per tile: 128x256 %.3f, 192x192 %.3f, 128x128 %.3f ms; per shape %ux%u\n", tu[0], tu[1], tu[2],
                       pick->channels, pick->tokens);
            }
            fflush(stdout);
            lwo_weight_destroy(ctx, w);
        }
        lwo_tensor_destroy(ctx, x); lwo_tensor_destroy(ctx, y);
        free(wf); free(xh);
    }
    for (f = 0; f < LWO__GEMM_VARIANTS; f++)
        for (s = 0; s < LWO__WG_TILES; s++)
            if (ctx->gemm_clusters[f][s]) printf("%s GEMMs, tile %s: %d clusters of %u CTAs at once\n", lwo__gemm_variants[f],
                                                lwo__wg_tiles[s].suffix, ctx->gemm_clusters[f][s], lwo__wg_tiles[s].cm * lwo__wg_tiles[s].cn);
    lwo_destroy(ctx);
    return 0;
}

/* GPU tests of the foundation: cold and warm starts, a corrupt cache, every conversion and
   quantization kernel against its CPU reference (bit-exact) on fresh random inputs with outputs
   poisoned first, the caller's own kernels, streams and events, the budget, cross-context checks.
   Run on the GPU machine: make test-gpu. LWO_TEST_QUICK=1 shrinks the sizes (for the sanitizer). */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

static lwo_context *ctx;
static int quick;

static void quiet(void *user, lwo_log_level level, const char *msg) { (void)user; if (level <= LWO_LOG_WARN) printf("  [lwo] %s\n", msg); }

static lwo_tensor *mk(lwo_dtype t, uint64_t a, uint64_t b) {
    uint64_t shape[2] = { a, b };
    lwo_tensor *x = NULL;
    lwo_result r = lwo_tensor_create(ctx, t, b ? 2 : 1, shape, &x);
    if (r) printf("tensor_create: %s\n", lwo_last_error(ctx));
    return x;
}

/* Random data in dtype t: fp8 gets every code (NaN included), floats get normals of a random scale
   with a few exact zeros, infinities and NaNs. */
static void fill_random(void *p, lwo_dtype t, uint64_t n, int specials) {
    uint64_t i;
    double mag = pow(10.0, check_rand_uniform() * 4 - 2);
    for (i = 0; i < n; i++) {
        if (t == LWO_DTYPE_F8_E4M3 || t == LWO_DTYPE_F8_E5M2) { ((uint8_t *)p)[i] = (uint8_t)check_rand_u64(); continue; }
        {
            float v = (float)(check_rand_normal() * mag);
            if (specials && i % 997 == 3) v = 0.0f;
            if (specials && i % 4999 == 7) v = (i & 1) ? INFINITY : NAN;
            lwo_ref_store(p, t, i, v);
        }
    }
}

/* The context's startup times and arena use (lwo_context_get_info). */
static lwo_startup_times startup_times(lwo_context *c) {
    lwo_context_info ci;
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(c, &ci);
    return ci.startup;
}

/* lwo_quantize per tensor (fp8, one scale) and per row (the W8A8 quantizer, smooth optional). */
static lwo_result quantize_fp8(lwo_tensor *src, lwo_tensor *dst, lwo_tensor *scale, int compute) {
    lwo_quantize_desc qd;
    memset(&qd, 0, sizeof qd);
    qd.src = src; qd.dst = dst; qd.scales = scale; qd.compute_scale = compute;
    return lwo_quantize(ctx, &qd);
}
static lwo_result quantize_rows(lwo_tensor *src, lwo_tensor *smooth, lwo_tensor *dst, lwo_tensor *scales) {
    lwo_quantize_desc qd;
    memset(&qd, 0, sizeof qd);
    qd.src = src; qd.dst = dst; qd.scales = scales; qd.per_row = 1; qd.smooth = smooth;
    return lwo_quantize(ctx, &qd);
}


static int bits_equal(const void *a, const void *b, lwo_dtype t, uint64_t n, uint64_t *first_bad) {
    uint64_t i;
    size_t es = lwo_dtype_size(t);
    for (i = 0; i < n; i++) {
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) == 0) continue;
        if (t != LWO_DTYPE_I8) {
            float x = lwo_ref_load(a, t, i), y = lwo_ref_load(b, t, i);
            if (x != x && y != y) continue; /* both NaN */
        }
        *first_bad = i;
        return 0;
    }
    return 1;
}

static void test_starts(void) {
    char dir[] = "/tmp/lwo-gpu-cache-XXXXXX";
    lwo_desc d;
    lwo_context *c = NULL;
    lwo_startup_times t1, t2, t3;
    char path[4200];
    struct dirent *e;
    DIR *dd;
    lwo_result r;
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    memset(&d, 0, sizeof d);
    d.cache_dir = dir;
    d.vram_budget = 64ull << 20;
    d.log = quiet;
    r = lwo_create(&d, &c);
    CHECK(r == LWO_SUCCESS, "cold create: %s", lwo_last_error(c));
    if (r) { lwo_destroy(c); return; }
    t1 = startup_times(c);
    CHECK(!t1.module_from_cache, "the first start compiles");
    lwo_destroy(c);
    c = NULL;
    r = lwo_create(&d, &c);
    CHECK(r == LWO_SUCCESS, "warm create: %s", lwo_last_error(c));
    t2 = startup_times(c);
    CHECK(t2.module_from_cache, "the second start loads the cubin from the cache");
    CHECK(c->nvrtc.lib == NULL, "a warm start does not load NVRTC at all");
    lwo_destroy(c);
    printf("  cold start %.1f ms (cuInit %.1f, compile %.1f) | warm start %.1f ms (cuInit %.1f, cache load %.1f, arena %.1f)\n",
           t1.total_ms, t1.cu_init_ms, t1.module_ms, t2.total_ms, t2.cu_init_ms, t2.module_ms, t2.arena_ms);
    /* truncate every cache file: the next start must notice, recompile and work */
    dd = opendir(dir);
    while (dd && (e = readdir(dd)) != NULL) {
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        f = fopen(path, "r+b");
        if (f) { CHECK(ftruncate(fileno(f), 5000) == 0, "truncate"); fclose(f); }
    }
    if (dd) closedir(dd);
    c = NULL;
    r = lwo_create(&d, &c);
    CHECK(r == LWO_SUCCESS, "create after corruption: %s", lwo_last_error(c));
    t3 = startup_times(c);
    CHECK(!t3.module_from_cache, "a truncated cache file is not loaded");
    lwo_destroy(c);
}

static void test_convert_one(lwo_dtype st, lwo_dtype dt, uint64_t n, float scale, int misalign) {
    size_t ss = lwo_dtype_size(st), ds = lwo_dtype_size(dt);
    void *hs = malloc(n * ss + 16), *hd = malloc(n * ds), *ref = malloc(n * ds);
    lwo_tensor *ts = mk(st, n + 16, 0), *td = mk(dt, n + 16, 0), *vs = NULL, *vd = NULL;
    uint64_t shape[1] = { n }, bad = 0;
    lwo_result r;
    fill_random(hs, st, n, 1);
    /* views at an odd offset exercise the element-by-element path */
    lwo_tensor_wrap(ctx, lwo_tensor_device_ptr(ts) + (misalign ? ss : 0), st, 1, shape, &vs);
    lwo_tensor_wrap(ctx, lwo_tensor_device_ptr(td) + (misalign ? ds : 0), dt, 1, shape, &vd);
    lwo_tensor_fill_bytes(ctx, NULL, td, 0xff);
    lwo_tensor_upload(ctx, vs, hs, n * ss);
    r = lwo_convert(ctx, NULL, vs, vd, scale);
    CHECK(r == LWO_SUCCESS, "convert %s->%s: %s", lwo_dtype_name(st), lwo_dtype_name(dt), lwo_last_error(ctx));
    lwo_tensor_download(ctx, vd, hd, n * ds);
    lwo_ref_convert(hs, st, ref, dt, n, scale);
    CHECK(bits_equal(hd, ref, dt, n, &bad), "convert %s->%s n=%llu scale=%g misalign=%d: element %llu is %g, CPU says %g", lwo_dtype_name(st),
          lwo_dtype_name(dt), (unsigned long long)n, scale, misalign, (unsigned long long)bad, lwo_ref_load(hd, dt, bad), lwo_ref_load(ref, dt, bad));
    lwo_tensor_destroy(ctx, vs); lwo_tensor_destroy(ctx, vd); lwo_tensor_destroy(ctx, ts); lwo_tensor_destroy(ctx, td);
    free(hs); free(hd); free(ref);
}

static void test_convert(void) {
    static const lwo_dtype srcs[] = { LWO_DTYPE_F8_E4M3, LWO_DTYPE_F8_E5M2, LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    static const lwo_dtype dsts[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    uint64_t sizes[] = { 1, 7, 255, 4097, 1000003 };
    size_t a, b, k;
    for (a = 0; a < 5; a++)
        for (b = 0; b < 3; b++)
            for (k = 0; k < 5; k++) {
                if (quick && k == 4) continue;
                test_convert_one(srcs[a], dsts[b], sizes[k], 1.0f, 0);
                if (k >= 2) test_convert_one(srcs[a], dsts[b], sizes[k], (float)(0.01 + check_rand_uniform()), (int)(k & 1));
            }
    if (!quick) test_convert_one(LWO_DTYPE_F8_E4M3, LWO_DTYPE_BF16, (64ull << 20) + 5, 0.75f, 0);
}

static void test_quantize_fp8(void) {
    static const lwo_dtype srcs[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    uint64_t sizes[] = { 1, 7, 255, 4097, 3000017 };
    size_t a, k, f;
    for (a = 0; a < 3; a++)
        for (f = 0; f < 2; f++)
            for (k = 0; k < 5; k++) {
                lwo_dtype st = srcs[a], qt = f ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
                uint64_t n = sizes[k], bad = 0;
                void *hs, *ref;
                uint8_t *hq;
                float s_gpu = 0, s_cpu;
                lwo_tensor *ts, *tq, *sc;
                if (quick && k == 4) continue;
                hs = malloc(n * lwo_dtype_size(st)); hq = (uint8_t *)malloc(n); ref = malloc(n);
                fill_random(hs, st, n, 0);
                if (k == 1) memset(hs, 0, n * lwo_dtype_size(st)); /* all zero: scale 1 */
                ts = mk(st, n, 0); tq = mk(qt, n, 0); sc = mk(LWO_DTYPE_F32, 1, 0);
                lwo_tensor_upload(ctx, ts, hs, n * lwo_dtype_size(st));
                lwo_tensor_fill_bytes(ctx, NULL, tq, 0xff);
                CHECK(quantize_fp8(ts, tq, sc, 1) == LWO_SUCCESS, "quantize_fp8: %s", lwo_last_error(ctx));
                lwo_tensor_download(ctx, sc, &s_gpu, 4);
                lwo_tensor_download(ctx, tq, hq, n);
                s_cpu = lwo_ref_fp8_scale(hs, st, n, qt);
                check_ref_quantize_fp8(hs, st, (uint8_t *)ref, qt, n, s_cpu);
                CHECK(memcmp(&s_gpu, &s_cpu, 4) == 0, "%s->%s n=%llu: scale %g, CPU %g", lwo_dtype_name(st), lwo_dtype_name(qt), (unsigned long long)n, s_gpu, s_cpu);
                CHECK(bits_equal(hq, ref, qt, n, &bad), "%s->%s n=%llu: code %llu is 0x%02x, CPU 0x%02x", lwo_dtype_name(st), lwo_dtype_name(qt),
                      (unsigned long long)n, (unsigned long long)bad, hq[bad], ((uint8_t *)ref)[bad]);
                /* a given scale is read, not recomputed */
                s_cpu = 0.125f;
                lwo_tensor_upload(ctx, sc, &s_cpu, 4);
                quantize_fp8(ts, tq, sc, 0);
                lwo_tensor_download(ctx, tq, hq, n);
                check_ref_quantize_fp8(hs, st, (uint8_t *)ref, qt, n, 0.125f);
                CHECK(bits_equal(hq, ref, qt, n, &bad), "given scale: code %llu differs", (unsigned long long)bad);
                lwo_tensor_destroy(ctx, ts); lwo_tensor_destroy(ctx, tq); lwo_tensor_destroy(ctx, sc);
                free(hs); free(hq); free(ref);
            }
}

static void test_quantize_rows(void) {
    static const lwo_dtype srcs[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    static const uint64_t shapes[][3] = { { 1, 7, 7 }, { 3, 255, 256 }, { 64, 4097, 4160 }, { 1000, 3072, 3072 }, { 4608, 3072, 3136 }, { 5, 12288, 12288 }, { 3, 60001, 60032 } };
    size_t a, k;
    for (a = 0; a < 3; a++)
        for (k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            int with_smooth;
            if (quick && k == 4) continue;
            for (with_smooth = 0; with_smooth < 2; with_smooth++) {
                lwo_dtype st = srcs[a];
                uint64_t R = shapes[k][0], K = shapes[k][1], KQ = shapes[k][2], bad = 0, i;
                void *hx = malloc(R * K * lwo_dtype_size(st));
                int8_t *hq = (int8_t *)malloc(R * KQ), *rq = (int8_t *)malloc(R * KQ);
                float *hs = (float *)malloc(R * 4), *rs = (float *)malloc(R * 4), *sm = (float *)malloc(K * 4);
                lwo_tensor *tx = mk(st, R, K), *tq = mk(LWO_DTYPE_I8, R, KQ), *ts = mk(LWO_DTYPE_F32, R, 0), *tsm = mk(LWO_DTYPE_F32, K, 0);
                lwo_result r;
                fill_random(hx, st, R * K, 0);
                if (R > 2) memset((char *)hx + lwo_dtype_size(st) * K, 0, K * lwo_dtype_size(st)); /* row 1 all zero */
                for (i = 0; i < K; i++) sm[i] = (float)(0.25 + check_rand_uniform() * 2);
                lwo_tensor_upload(ctx, tx, hx, R * K * lwo_dtype_size(st));
                lwo_tensor_upload(ctx, tsm, sm, K * 4);
                lwo_tensor_fill_bytes(ctx, NULL, tq, 0x5a);
                lwo_tensor_fill_bytes(ctx, NULL, ts, 0xff);
                r = quantize_rows(tx, with_smooth ? tsm : NULL, tq, ts);
                CHECK(r == LWO_SUCCESS, "quantize rows: %s", lwo_last_error(ctx));
                lwo_tensor_download(ctx, tq, hq, R * KQ);
                lwo_tensor_download(ctx, ts, hs, R * 4);
                check_ref_quantize_rows(hx, st, R, K, with_smooth ? sm : NULL, rq, LWO_DTYPE_I8, KQ, rs);
                CHECK(memcmp(hs, rs, R * 4) == 0, "%s [%llu,%llu] smooth=%d: scales differ", lwo_dtype_name(st), (unsigned long long)R, (unsigned long long)K, with_smooth);
                CHECK(bits_equal(hq, rq, LWO_DTYPE_I8, R * KQ, &bad), "%s [%llu,%llu->%llu] smooth=%d: q[%llu] = %d, CPU %d", lwo_dtype_name(st), (unsigned long long)R,
                      (unsigned long long)K, (unsigned long long)KQ, with_smooth, (unsigned long long)bad, hq[bad], rq[bad]);
                lwo_tensor_destroy(ctx, tx); lwo_tensor_destroy(ctx, tq); lwo_tensor_destroy(ctx, ts); lwo_tensor_destroy(ctx, tsm);
                free(hx); free(hq); free(rq); free(hs); free(rs); free(sm);
            }
        }
}

/* The W8A8 prep inside the row quantizer (lwo__rowq_launch, the launch lwo_linear and
   lwo_weight_create use): permutation, smoothing (divide, or multiply for weights), the blockwise
   Hadamard rotation, int8 and e4m3 codes, against lwo_ref_prep_rows + the plain quantizer, bit for
   bit. Rows short enough to be held in shared memory with their prep, staged without it, and too
   long for shared memory; x rows 16-byte aligned and not (K odd, or x shifted by one element); and
   without a permutation, rows streamed through the ring kernel (lwo_k_quantize_rows_ring_*, up to
   K = 8533 f32 or 17066 16-bit values; v = 0 and 1 take it, 2 and 3 are misaligned), with more rows
   than its persistent grid has blocks (1500 x 3072, 3000 x 1064), the widest K it takes and the
   first past it, per width. */
static void test_quantize_prep(void) {
    static const lwo_dtype srcs[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    static const uint64_t shapes[][4] = { /* rows, K, block, no permutation */
        { 3, 7, 0, 0 }, { 2, 13, 4, 0 }, { 5, 328, 256, 0 }, { 4, 1000, 8, 0 }, { 3, 4097, 128, 0 }, { 64, 3072, 64, 0 },
        { 9, 12288, 128, 0 }, { 3, 16384, 256, 0 }, { 2, 20000, 32, 0 }, { 2, 60001, 16, 0 }, { 2, 70000, 0, 0 },
        { 1500, 3072, 0, 1 }, { 3000, 1064, 0, 1 }, { 7, 1064, 0, 1 }, { 3, 8528, 0, 1 }, { 3, 8536, 0, 1 },
        { 6, 16384, 0, 1 }, { 3, 17064, 0, 1 }, { 3, 17072, 0, 1 }, { 3, 32768, 0, 1 } };
    size_t a, k;
    for (a = 0; a < 3; a++)
        for (k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            int v;
            if (quick && shapes[k][1] > 20000) continue;
            for (v = 0; v < 4; v++) {
                lwo_dtype st = srcs[a];
                uint64_t R = shapes[k][0], K = shapes[k][1], b = shapes[k][2] ? shapes[k][2] : 1, kr = (K + b - 1) / b * b, i;
                uint64_t KQ = v == 3 ? kr + 5 : (kr + 63) / 64 * 64, xoff = (v == 2) ? 1 : 0, bad = 0;
                int fp8 = v & 1, smul = v == 1, use_perm = (v != 2 || K < 20000) && !shapes[k][3], use_smooth = v != 0;
                int hlog = shapes[k][2] ? lwo__hadamard_log((int)shapes[k][2]) : 0;
                size_t es = lwo_dtype_size(st);
                void *hx = malloc((R * K + 1) * es);
                uint8_t *hq = (uint8_t *)malloc(R * KQ), *rq = (uint8_t *)malloc(R * KQ);
                float *hs = (float *)malloc(R * 4), *rs = (float *)malloc(R * 4), *sm = (float *)malloc(K * 4), *smp = (float *)malloc(K * 4);
                float *prep = (float *)malloc(R * KQ * 4);
                int32_t *perm = (int32_t *)malloc(K * 4);
                lwo_tensor *tbig = mk(st, R * K + 1, 0), *tq = mk(LWO_DTYPE_U8, R, KQ), *ts = mk(LWO_DTYPE_F32, R, 0);
                lwo_tensor *tsm = mk(LWO_DTYPE_F32, K, 0), *tp = mk(LWO_DTYPE_I32, K, 0);
                lwo_result r;
                fill_random(hx, st, R * K + 1, 0);
                for (i = 0; i < K; i += 1 + K / 16) lwo_ref_store(hx, st, xoff + i, 60.0f); /* outliers in row 0 */
                if (R > 2) memset((char *)hx + es * (xoff + K), 0, K * es);                 /* row 1 all zero */
                if (R > 2 && K > 1 && shapes[k][3]) lwo_ref_store(hx, st, xoff + 2 * K + 1, NAN); /* a NaN in row 2: its code */
                for (i = 0; i < K; i++) { sm[i] = (float)(0.25 + check_rand_uniform() * 2); perm[i] = (int32_t)i; }
                for (i = K; i > 1; i--) { uint64_t j = check_rand_u64() % i; int32_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t; }
                for (i = 0; i < K; i++) smp[i] = use_perm ? sm[perm[i]] : sm[i]; /* the kernel reads smooth by position */
                lwo_tensor_upload(ctx, tbig, hx, (R * K + 1) * es);
                lwo_tensor_upload(ctx, tsm, smp, K * 4);
                lwo_tensor_upload(ctx, tp, perm, K * 4);
                lwo_tensor_fill_bytes(ctx, NULL, tq, 0x5a);
                lwo_tensor_fill_bytes(ctx, NULL, ts, 0xff);
                r = lwo__rowq_launch(ctx, ctx->compute, lwo_tensor_device_ptr(tbig) + xoff * es, st, R, K, use_perm ? lwo_tensor_device_ptr(tp) : 0,
                                     use_smooth ? lwo_tensor_device_ptr(tsm) : 0, smul, hlog, fp8, lwo_tensor_device_ptr(tq), KQ, lwo_tensor_device_ptr(ts));
                CHECK(r == LWO_SUCCESS, "rowq launch: %s", lwo_last_error(ctx));
                lwo_tensor_download(ctx, tq, hq, R * KQ);
                lwo_tensor_download(ctx, ts, hs, R * 4);
                {
                    lwo_ref_prep_desc pd;
                    memset(&pd, 0, sizeof pd);
                    pd.x = (char *)hx + xoff * es; pd.x_dtype = st; pd.rows = R; pd.cols = K; pd.perm = use_perm ? perm : NULL;
                    pd.smooth = use_smooth ? sm : NULL; pd.weight = smul; pd.hadamard = (int)shapes[k][2]; pd.out = prep; pd.out_cols = KQ;
                    lwo_ref_prep_rows(&pd);
                }
                check_ref_quantize_rows(prep, LWO_DTYPE_F32, R, KQ, NULL, rq, fp8 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_I8, KQ, rs);
                for (i = 0; i < R * KQ && !bad; i++) if (hq[i] != rq[i]) bad = i + 1;
                CHECK(memcmp(hs, rs, R * 4) == 0, "%s [%llu,%llu] b=%d perm=%d smooth=%d smul=%d %s: scales differ (%g, CPU %g)", lwo_dtype_name(st),
                      (unsigned long long)R, (unsigned long long)K, (int)shapes[k][2], use_perm, use_smooth, smul, fp8 ? "e4m3" : "i8", (double)hs[0], (double)rs[0]);
                CHECK(bad == 0, "%s [%llu,%llu->%llu] b=%d perm=%d smooth=%d smul=%d xoff=%d %s: q[%llu] = %d, CPU %d", lwo_dtype_name(st), (unsigned long long)R,
                      (unsigned long long)K, (unsigned long long)KQ, (int)shapes[k][2], use_perm, use_smooth, smul, (int)xoff, fp8 ? "e4m3" : "i8",
                      (unsigned long long)(bad - 1), bad ? hq[bad - 1] : 0, bad ? rq[bad - 1] : 0);
                lwo_tensor_destroy(ctx, tbig); lwo_tensor_destroy(ctx, tq); lwo_tensor_destroy(ctx, ts); lwo_tensor_destroy(ctx, tsm); lwo_tensor_destroy(ctx, tp);
                free(hx); free(hq); free(rq); free(hs); free(rs); free(sm); free(smp); free(prep); free(perm);
            }
        }
}

static void test_user_module_streams_events(void) {
    static const char *src = "extern \"C\" __global__ void add_k(float *x, unsigned long long n, float k) {\n"
                             "  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; if (i < n) x[i] += k; }\n";
    lwo_module *m = NULL;
    lwo_stream *s = NULL;
    lwo_event *e0 = NULL, *e1 = NULL;
    lwo_tensor *t = mk(LWO_DTYPE_F32, 1000, 0);
    float h[1000], k = 2.5f, ms = -1;
    unsigned long long n = 1000;
    lwo_launch_desc ld;
    void *args[3];
    uint64_t p = lwo_tensor_device_ptr(t);
    int i, bad = 0;
    lwo_result r = lwo_module_create(ctx, src, "add.cu", NULL, &m);
    CHECK(r == LWO_SUCCESS, "user module compiles: %s", lwo_last_error(ctx));
    for (i = 0; i < 1000; i++) h[i] = (float)i;
    lwo_tensor_upload(ctx, t, h, sizeof h);
    CHECK(lwo_stream_create(ctx, &s) == LWO_SUCCESS && lwo_event_create(ctx, &e0) == LWO_SUCCESS && lwo_event_create(ctx, &e1) == LWO_SUCCESS, "streams and events");
    /* the launch on a second stream must wait for the compute stream's upload via an event */
    lwo_event_record(ctx, e0, NULL);
    lwo_stream_wait_event(ctx, s, e0);
    args[0] = &p; args[1] = &n; args[2] = &k;
    memset(&ld, 0, sizeof ld);
    ld.stream = s; ld.module = m; ld.kernel = "add_k"; ld.grid[0] = 4; ld.block[0] = 256; ld.args = args;
    r = lwo_launch(ctx, &ld);
    CHECK(r == LWO_SUCCESS, "lwo_launch: %s", lwo_last_error(ctx));
    lwo_event_record(ctx, e1, s);
    lwo_event_synchronize(ctx, e1);
    CHECK(lwo_event_elapsed_ms(ctx, e0, e1, &ms) == LWO_SUCCESS && ms >= 0, "elapsed %g ms", ms);
    lwo_tensor_download(ctx, t, h, sizeof h);
    for (i = 0; i < 1000; i++) bad += h[i] != (float)i + 2.5f;
    CHECK(bad == 0, "%d elements wrong after the user's kernel", bad);
    ld.kernel = "no_such_kernel";
    CHECK_EQ_INT(lwo_launch(ctx, &ld), LWO_ERROR_NOT_FOUND);
    CHECK_EQ_INT(lwo_module_create(ctx, "this is not CUDA", "bad.cu", NULL, &m), LWO_ERROR_COMPILE);
    CHECK(strstr(lwo_last_error(ctx), "bad.cu") != NULL, "the compile error carries the log: %.200s", lwo_last_error(ctx));
    lwo_tensor_destroy(ctx, t);
}

static void test_budget_and_validation(void) {
    lwo_desc d;
    lwo_context *other = NULL;
    lwo_context_info ci;
    lwo_tensor *a = NULL, *b = NULL, *big = NULL;
    uint64_t shape[2] = { 1024, 1024 };
    size_t fr0, fr1, tot;
    memset(&d, 0, sizeof d);
    d.vram_budget = 32ull << 20;
    d.log = quiet;
    ctx->cu.cuMemGetInfo(&fr0, &tot);
    CHECK(lwo_create(&d, &other) == LWO_SUCCESS, "second context: %s", lwo_last_error(other));
    other->cu.cuMemGetInfo(&fr1, &tot);
    printf("  a 32 MiB context took %.1f MiB of device memory (context overhead included)\n", (double)(fr0 - fr1) / 1048576.0);
    CHECK(lwo_tensor_create(other, LWO_DTYPE_F32, 2, shape, &a) == LWO_SUCCESS, "4 MiB fits in 32 MiB");
    shape[0] = 8 * 1024;
    CHECK_EQ_INT(lwo_tensor_create(other, LWO_DTYPE_F32, 2, shape, &big), LWO_ERROR_OUT_OF_BUDGET);
    CHECK(strstr(lwo_last_error(other), "budget") != NULL, "%s", lwo_last_error(other));
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(other, &ci);
    CHECK(ci.memory.budget == 32ull << 20 && ci.memory.in_use >= 4ull << 20 && ci.memory.peak >= ci.memory.in_use, "memory stats");
    b = mk(LWO_DTYPE_F32, 16, 0);
    CHECK_EQ_INT(lwo_convert(other, NULL, a, b, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(other), "another lwo_context") != NULL, "%s", lwo_last_error(other));
    CHECK_EQ_INT(lwo_convert(ctx, NULL, b, b, 1.0f) == LWO_SUCCESS, 1);
    {
        lwo_tensor *i8 = mk(LWO_DTYPE_I8, 16, 0);
        CHECK_EQ_INT(lwo_convert(ctx, NULL, i8, b, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "'src'") != NULL, "%s", lwo_last_error(ctx));
        lwo_tensor_destroy(ctx, i8);
    }
    shape[0] = 0;
    CHECK_EQ_INT(lwo_tensor_create(ctx, LWO_DTYPE_F32, 2, shape, &big), LWO_ERROR_INVALID_ARGUMENT);
    shape[0] = 1ull << 40; shape[1] = 1ull << 40;
    CHECK_EQ_INT(lwo_tensor_create(ctx, LWO_DTYPE_F32, 2, shape, &big), LWO_ERROR_INVALID_ARGUMENT);
    lwo_tensor_destroy(ctx, b);
    lwo_destroy(other); /* frees its tensor `a` */
    d.vram_budget = 1ull << 50;
    other = NULL;
    CHECK_EQ_INT(lwo_create(&d, &other), LWO_ERROR_OUT_OF_DEVICE_MEMORY);
    lwo_destroy(other);
    {
        void *hp = NULL;
        CHECK(lwo_host_alloc(ctx, 1 << 20, &hp) == LWO_SUCCESS && hp, "pinned host memory");
        lwo_host_free(ctx, hp);
    }
}

int main(void) {
    lwo_desc d;
    lwo_result r;
    lwo_context_info ci;
    const lwo_device_info *info = &ci.device;
    quick = getenv("LWO_TEST_QUICK") != NULL;
    check_seed("test_gpu");
    memset(&d, 0, sizeof d);
    d.vram_budget = 4ull << 30;
    d.log = quiet;
    r = lwo_create(&d, &ctx);
    CHECK(r == LWO_SUCCESS, "lwo_create: %s", lwo_last_error(ctx));
    if (r) { lwo_destroy(ctx); return CHECK_SUMMARY(); }
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(ctx, &ci);
    printf("  %s, cc %d.%d (%s), %d SMs, %.1f GiB, driver %d, NVRTC %d\n", info->name, info->cc_major, info->cc_minor, info->arch,
           info->sm_count, info->total_memory / 1073741824.0, info->driver_version, info->nvrtc_version);
    test_starts();
    test_convert();
    test_quantize_fp8();
    test_quantize_rows();
    test_quantize_prep();
    test_user_module_streams_events();
    test_budget_and_validation();
    lwo_destroy(ctx);
    return CHECK_SUMMARY();
}

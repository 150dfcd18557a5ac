/* CPU tests of lwo.h: fp8/bf16/f16 codecs against independent decoders written from the formats'
   definitions, the quantizer references, the cache-file validator, the arena allocator, argument
   validation and lwo_create on a machine without a GPU. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

/* ---- independent decoders, straight from the definitions ---------------------------------- */
static double indep_fp8(unsigned c, int e5m2) {
    int s = (c >> 7) & 1, ebits = e5m2 ? 5 : 4, mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    int e = (int)(c >> mbits) & ((1 << ebits) - 1), m = (int)c & ((1 << mbits) - 1);
    double v;
    if (!e5m2 && e == 15 && m == 7) return NAN;             /* e4m3fn: only S.1111.111 is special */
    if (e5m2 && e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    if (e == 0) v = ldexp((double)m, 1 - bias - mbits);     /* subnormal */
    else v = ldexp(1.0 + (double)m / (1 << mbits), e - bias);
    return s ? -v : v;
}

static double indep_f16(unsigned h) {
    int s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp((double)m, -24);
    return s ? -v : v;
}

/* Nearest finite fp8 code by exhaustive search; ties to the even code; beyond the range saturates. */
static unsigned indep_encode_fp8(double x, int e5m2) {
    unsigned best = 0, c;
    double bestd = INFINITY, maxv = e5m2 ? 57344.0 : 448.0;
    if (x != x) return 0x7f;
    if (x >= maxv) return e5m2 ? 0x7b : 0x7e;
    if (x <= -maxv) return e5m2 ? 0xfb : 0xfe;
    for (c = 0; c < 256; c++) {
        double v = indep_fp8(c, e5m2), d;
        if (v != v || isinf(v)) continue;
        if ((v == 0.0) && signbit(v) != signbit(x)) continue; /* keep the sign of zero */
        d = fabs(v - x);
        if (d < bestd || (d == bestd && (c & 1) == 0 && (best & 1) == 1)) { bestd = d; best = c; }
    }
    /* a value that rounds to zero keeps its sign */
    if (indep_fp8(best, e5m2) == 0.0) best = signbit(x) ? 0x80 : 0x00;
    return best;
}

static int same_float(float a, float b) {
    if (a != a || b != b) return (a != a) && (b != b);
    return memcmp(&a, &b, 4) == 0;
}

static void test_fp8_decode(void) {
    unsigned c;
    int f, bad = 0;
    for (f = 0; f < 2; f++) {
        lwo_dtype t = f ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
        for (c = 0; c < 256; c++) {
            float got = lwo_ref_fp8_to_f32((uint8_t)c, t);
            double want = indep_fp8(c, f);
            if (!same_float(got, (float)want)) { bad++; printf("  %s code 0x%02x: %g != %g\n", lwo_dtype_name(t), c, got, want); }
        }
    }
    CHECK(bad == 0, "%d fp8 codes decode wrongly", bad);
    CHECK(isnan(lwo_ref_fp8_to_f32(0x7f, LWO_DTYPE_F8_E4M3)) && isnan(lwo_ref_fp8_to_f32(0xff, LWO_DTYPE_F8_E4M3)), "e4m3 NaN codes");
    CHECK(lwo_ref_fp8_to_f32(0x7e, LWO_DTYPE_F8_E4M3) == 448.0f, "e4m3 max is 448");
    CHECK(isinf(lwo_ref_fp8_to_f32(0x7c, LWO_DTYPE_F8_E5M2)), "e5m2 0x7c is inf");
    CHECK(lwo_ref_fp8_to_f32(0x7b, LWO_DTYPE_F8_E5M2) == 57344.0f, "e5m2 max is 57344");
    CHECK(lwo_ref_fp8_to_f32(0x01, LWO_DTYPE_F8_E4M3) == 0.001953125f, "e4m3 smallest subnormal 2^-9");
}

static void test_fp8_encode_all_bf16(void) {
    unsigned h;
    int f, bad = 0;
    for (f = 0; f < 2; f++) {
        lwo_dtype t = f ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
        for (h = 0; h < 65536; h++) {
            float x = lwo_ref_bf16_to_f32((uint16_t)h);
            unsigned got = lwo_ref_f32_to_fp8(x, t), want;
            if (x != x) { if ((got & 0x7f) != 0x7f) bad++; continue; }
            want = indep_encode_fp8((double)x, f);
            if (got != want) { if (bad < 10) printf("  %s bf16 0x%04x (%g): got 0x%02x want 0x%02x\n", lwo_dtype_name(t), h, x, got, want); bad++; }
        }
    }
    CHECK(bad == 0, "%d of 131072 bf16 -> fp8 encodings differ from the exhaustive nearest-even search", bad);
    CHECK(lwo_ref_f32_to_fp8(INFINITY, LWO_DTYPE_F8_E4M3) == 0x7e, "e4m3: +inf saturates to 448");
    CHECK(lwo_ref_f32_to_fp8(-1e30f, LWO_DTYPE_F8_E5M2) == 0xfb, "e5m2: -huge saturates to -57344");
    CHECK(lwo_ref_f32_to_fp8(NAN, LWO_DTYPE_F8_E5M2) == 0x7f, "e5m2: NaN stays NaN");
}

static void test_fp8_roundtrip_codes(void) {
    unsigned c;
    int f, bad = 0;
    for (f = 0; f < 2; f++) {
        lwo_dtype t = f ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
        for (c = 0; c < 256; c++) {
            float v = lwo_ref_fp8_to_f32((uint8_t)c, t);
            if (v != v || isinf(v)) continue;
            if (lwo_ref_f32_to_fp8(v, t) != c) bad++;
        }
    }
    CHECK(bad == 0, "%d finite fp8 codes do not survive decode+encode", bad);
}

static void test_half_formats(void) {
    unsigned h;
    int bad = 0, i;
    for (h = 0; h < 65536; h++) {
        if (!same_float(lwo_ref_f16_to_f32((uint16_t)h), (float)indep_f16(h))) bad++;
        if (!isnan(indep_f16(h)) && lwo_ref_f32_to_f16((float)indep_f16(h)) != h) bad++;
        {
            float b = lwo_ref_bf16_to_f32((uint16_t)h);
            if (b == b && lwo_ref_f32_to_bf16(b) != h) bad++;
        }
    }
    CHECK(bad == 0, "%d half/bfloat16 codes do not round-trip", bad);
    /* rounding: random f32 against the two neighbouring candidates, ties to even */
    bad = 0;
    for (i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)check_rand_u64();
        float x;
        memcpy(&x, &u, 4);
        if (x != x) continue;
        {
            uint16_t b = lwo_ref_f32_to_bf16(x), lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
            double dx = x, dlo = fabs(dx - lwo_ref_bf16_to_f32(lo)), dhi;
            float fhi = lwo_ref_bf16_to_f32(hi);
            /* past the largest finite value the next step is 2^128 (RNE then overflows to inf) */
            dhi = (fhi != fhi) ? INFINITY : isinf(fhi) ? fabs(fabs(dx) - ldexp(1.0, 128)) : fabs(dx - fhi);
            if (isinf(x)) { if (b != lo) bad++; continue; }
            if (!(dlo < dhi ? b == lo : dhi < dlo ? b == hi : b == ((lo & 1) ? hi : lo))) { bad++; printf("  bf16: %08x -> %04x\n", u, b); }
        }
        if (fabsf(x) < 65000.0f) {
            uint16_t f = lwo_ref_f32_to_f16(x);
            double err = fabs((double)x - indep_f16(f));
            /* neighbours of f must not be strictly closer */
            double e1 = fabs((double)x - indep_f16((uint16_t)(f + 1))), e0 = (f & 0x7fff) ? fabs((double)x - indep_f16((uint16_t)(f - 1))) : INFINITY;
            if (e1 < err || e0 < err || ((e1 == err || e0 == err) && (f & 1))) { bad++; printf("  f16: %08x (%g) -> %04x\n", u, x, f); }
        }
    }
    CHECK(bad == 0, "%d random f32 values round wrongly to bf16/f16", bad);
    CHECK(lwo_ref_f32_to_f16(70000.0f) == 0x7c00, "f16 overflow gives inf");
    CHECK(lwo_ref_f32_to_f16(65519.0f) == 0x7bff, "65519 rounds to the f16 max");
}

static void test_quantize_int8_rows(void) {
    enum { R = 37, K = 75, KQ = 96 };
    static float w[R * K], smooth[K], scales[R];
    static int8_t q[R * KQ];
    int r, k, bad = 0;
    for (r = 0; r < R; r++)
        for (k = 0; k < K; k++) w[r * K + k] = (float)(check_rand_normal() * (r % 5 == 0 ? 100.0 : 1.0));
    for (k = 0; k < K; k++) { w[3 * K + k] = 0.0f; w[4 * K + k] = 0.0f; }
    w[4 * K + 7] = -1e-30f;                                  /* a tiny row */
    w[5 * K + 11] = 1e20f;                                   /* an outlier */
    for (k = 0; k < K; k++) smooth[k] = (float)(0.5 + check_rand_uniform());
    memset(q, 0x55, sizeof q);
    CHECK_EQ_INT(check_ref_quantize_int8_rows(w, LWO_DTYPE_F32, R, K, NULL, q, KQ, scales), LWO_SUCCESS);
    for (r = 0; r < R; r++) {
        float m = 0.0f;
        for (k = 0; k < K; k++) m = fabsf(w[r * K + k]) > m ? fabsf(w[r * K + k]) : m;
        if (m == 0.0f) { if (scales[r] != 1.0f) bad++; }
        else if (scales[r] != m / 127.0f) bad++;
        for (k = 0; k < K; k++) {
            double back = (double)q[r * KQ + k] * scales[r];
            if (q[r * KQ + k] < -127 || fabs(back - w[r * K + k]) > 0.5001 * scales[r]) bad++;
        }
        for (k = K; k < KQ; k++) if (q[r * KQ + k] != 0) bad++;
    }
    CHECK(bad == 0, "%d int8 row-quantization values out of spec", bad);
    for (k = 0; k < K; k++) CHECK(q[3 * KQ + k] == 0, "zero row gives zeros");
    CHECK(scales[3] == 1.0f, "zero row gives scale 1, got %g", scales[3]);
    CHECK(q[5 * KQ + 11] == 127, "the outlier maps to 127");
    /* smoothing divides first */
    CHECK_EQ_INT(check_ref_quantize_int8_rows(w, LWO_DTYPE_F32, R, K, smooth, q, KQ, scales), LWO_SUCCESS);
    {
        float m = 0.0f;
        for (k = 0; k < K; k++) { float v = fabsf(w[K + k] / smooth[k]); m = v > m ? v : m; }
        CHECK(scales[1] == m / 127.0f, "smoothed scale");
    }
    CHECK_EQ_INT(check_ref_quantize_int8_rows(w, LWO_DTYPE_F32, R, K, NULL, q, K - 1, scales), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_quantize_int8_rows(w, LWO_DTYPE_I8, R, K, NULL, q, KQ, scales), LWO_ERROR_INVALID_ARGUMENT);
}

static void test_quantize_fp8_ref(void) {
    enum { N = 1000 };
    static uint16_t x[N];
    static uint8_t q[N];
    int i, f, bad = 0;
    float s;
    for (i = 0; i < N; i++) x[i] = lwo_ref_f32_to_bf16((float)(check_rand_normal() * 1000.0));
    for (f = 0; f < 2; f++) {
        lwo_dtype t = f ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
        float fmax = f ? 57344.0f : 448.0f, m = 0.0f;
        for (i = 0; i < N; i++) m = fabsf(lwo_ref_bf16_to_f32(x[i])) > m ? fabsf(lwo_ref_bf16_to_f32(x[i])) : m;
        s = lwo_ref_fp8_scale(x, LWO_DTYPE_BF16, N, t);
        CHECK(s == m / fmax, "fp8 scale is absmax / max");
        CHECK_EQ_INT(check_ref_quantize_fp8(x, LWO_DTYPE_BF16, q, t, N, s), LWO_SUCCESS);
        for (i = 0; i < N; i++) {
            float v = lwo_ref_bf16_to_f32(x[i]) * (1.0f / s);
            if (q[i] != lwo_ref_f32_to_fp8(v, t)) bad++;
            if (fabsf(lwo_ref_fp8_to_f32(q[i], t)) > fmax) bad++;
        }
    }
    CHECK(bad == 0, "%d fp8 quantized values wrong", bad);
    memset(x, 0, sizeof x);
    CHECK(lwo_ref_fp8_scale(x, LWO_DTYPE_BF16, N, LWO_DTYPE_F8_E4M3) == 1.0f, "all-zero tensor: scale 1");
    x[5] = lwo_ref_f32_to_bf16(NAN);
    CHECK(isnan(lwo_ref_fp8_scale(x, LWO_DTYPE_BF16, N, LWO_DTYPE_F8_E4M3)), "a NaN input gives a NaN scale");
}

static void test_convert_ref(void) {
    float src[4] = { 1.0f, -2.5f, 3.0e-3f, NAN }, out[4];
    uint16_t b[4];
    CHECK_EQ_INT(lwo_ref_convert(src, LWO_DTYPE_F32, b, LWO_DTYPE_BF16, 4, 2.0f), LWO_SUCCESS);
    CHECK_EQ_INT(lwo_ref_convert(b, LWO_DTYPE_BF16, out, LWO_DTYPE_F32, 4, 1.0f), LWO_SUCCESS);
    CHECK(out[0] == 2.0f && out[1] == -5.0f && isnan(out[3]), "convert with scale");
    CHECK_EQ_INT(lwo_ref_convert(src, LWO_DTYPE_F32, b, LWO_DTYPE_F8_E4M3, 4, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(lwo_ref_convert(src, LWO_DTYPE_I32, b, LWO_DTYPE_F32, 4, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
}

/* ---- cache files --------------------------------------------------------------------------- */
static void test_cache_validate(void) {
    unsigned char buf[256];
    lwo__cache_header h;
    const unsigned char *p;
    size_t n, i;
    int bad = 0;
    for (i = 0; i < 100; i++) buf[sizeof h + i] = (unsigned char)(i * 7);
    memcpy(h.magic, "LWOCUBIN", 8);
    h.format = LWO__CACHE_FORMAT; h.reserved = 0; h.size = 100;
    h.hash = lwo__fnv1a(LWO__FNV_SEED, buf + sizeof h, 100);
    memcpy(buf, &h, sizeof h);
    CHECK(lwo__cache_validate(buf, sizeof h + 100, &p, &n) && n == 100 && p == buf + sizeof h, "a whole cache file validates");
    for (i = 0; i < sizeof h + 100; i++) if (lwo__cache_validate(buf, i, &p, &n)) bad++;
    CHECK(bad == 0, "%d truncated cache files accepted", bad);
    bad = 0;
    for (i = 0; i < sizeof h + 100; i++) {
        if (i >= 12 && i < 16) continue; /* the reserved word is not checked */
        buf[i] ^= 0x10;
        if (lwo__cache_validate(buf, sizeof h + 100, &p, &n)) bad++;
        buf[i] ^= 0x10;
    }
    CHECK(bad == 0, "%d single-bit corruptions accepted", bad);
    {
        const char *parts[1] = { "source" };
        const char *o1[] = { "--fmad=false", NULL };
        uint64_t a = lwo__module_key(parts, 1, "sm_90a", o1), b = lwo__module_key(parts, 1, "sm_90", o1), c = lwo__module_key(parts, 1, "sm_90a", NULL);
        CHECK(a != b && a != c && b != c, "the cache key covers arch and options");
    }
}

/* ---- the arena allocator, driven on a context built by hand (no GPU) ----------------------- */
static void test_arena(void) {
    lwo_context ctx;
    enum { N = 200 };
    uint64_t off[N], size[N];
    int live[N], i, it, bad = 0;
    memset(&ctx, 0, sizeof ctx);
    ctx.magic = LWO__MAGIC_CTX;
    ctx.desc.log_level = -1;
    ctx.arena_size = 1 << 20;
    ctx.free_list = (lwo__block *)malloc(16 * sizeof(lwo__block));
    ctx.capfree = 16; ctx.nfree = 1; ctx.free_list[0].off = 0; ctx.free_list[0].size = ctx.arena_size;
    memset(live, 0, sizeof live);
    for (it = 0; it < 20000; it++) {
        i = (int)(check_rand_u64() % N);
        if (live[i]) { lwo__arena_free(&ctx, off[i], size[i]); live[i] = 0; }
        else {
            uint64_t want = 1 + check_rand_u64() % 20000;
            lwo_result r = lwo__arena_alloc(&ctx, want, &off[i], &size[i], "test");
            if (r == LWO_SUCCESS) {
                int j;
                live[i] = 1;
                if (off[i] % 256 || size[i] < want || off[i] + size[i] > ctx.arena_size) bad++;
                for (j = 0; j < N; j++) if (j != i && live[j] && off[i] < off[j] + size[j] && off[j] < off[i] + size[i]) bad++;
            } else if (r != LWO_ERROR_OUT_OF_BUDGET || !strstr(ctx.error, "budget")) bad++;
        }
    }
    for (i = 0; i < N; i++) if (live[i]) lwo__arena_free(&ctx, off[i], size[i]);
    CHECK(bad == 0, "%d arena overlaps or misalignments", bad);
    CHECK(ctx.nfree == 1 && ctx.free_list[0].size == ctx.arena_size && ctx.arena_used == 0, "the free list coalesces back to one block (%zu blocks)", ctx.nfree);
    CHECK(ctx.arena_peak <= ctx.arena_size && ctx.arena_peak > 0, "peak tracked");
    {
        uint64_t o, s;
        CHECK_EQ_INT(lwo__arena_alloc(&ctx, ctx.arena_size + 1, &o, &s, "big tensor"), LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(ctx.error, "big tensor") != NULL, "the budget error names the request: %s", ctx.error);
    }
    free(ctx.free_list);
}

/* ---- lwo_create without a GPU, and argument validation ------------------------------------ */
static int log_calls;
static void count_log(void *user, lwo_log_level level, const char *msg) { (void)user; (void)level; (void)msg; log_calls++; }

static void test_create_without_gpu(void) {
    lwo_context *ctx = NULL;
    lwo_desc d;
    lwo_result r;
    lwo_tensor *t = NULL;
    uint64_t shape[2] = { 4, 4 };
    memset(&d, 0, sizeof d);
    d.log = count_log;
    d.driver_path = "/nonexistent/libcuda.so.1";
    r = lwo_create(&d, &ctx);
    CHECK_EQ_INT(r, LWO_ERROR_NO_DRIVER);
    CHECK(ctx != NULL && strstr(lwo_last_error(ctx), "/nonexistent/libcuda.so.1") != NULL, "the message names the path tried: %s", lwo_last_error(ctx));
    CHECK(log_calls > 0, "the failure reached the log callback");
    /* a failed context answers every call with INVALID_ARGUMENT and a readable reason */
    CHECK_EQ_INT(lwo_tensor_create(ctx, LWO_DTYPE_BF16, 2, shape, &t), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "failed to create") != NULL, "%s", lwo_last_error(ctx));
    CHECK_EQ_INT(lwo_convert(ctx, NULL, NULL, NULL, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(lwo_convert(NULL, NULL, NULL, NULL, 1.0f), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(lwo_last_error(NULL) != NULL && strlen(lwo_last_error(NULL)) > 0, "lwo_last_error(NULL) explains");
    lwo_destroy(ctx);
    lwo_destroy(NULL);

    /* the default driver path: libcuda.so.1 (nvcuda.dll) is absent here, or a stub is found */
    r = lwo_create(NULL, &ctx);
    CHECK(r == LWO_ERROR_NO_DRIVER || r == LWO_ERROR_STUB_DRIVER || r == LWO_ERROR_NO_DEVICE, "no GPU here: %s (%s)", lwo_result_string(r), lwo_last_error(ctx));
    CHECK(strlen(lwo_last_error(ctx)) > 20, "a readable message");
    if (r == LWO_ERROR_NO_DRIVER) CHECK(strstr(lwo_last_error(ctx), "'" LWO__DRIVER_DEFAULT "'") != NULL, "the message names the driver: %s", lwo_last_error(ctx));
    printf("lwo_create with the default driver: %s: %s\n", lwo_result_string(r), lwo_last_error(ctx));
    lwo_destroy(ctx);

#ifndef _WIN32
    /* the toolkit's stub library, if this machine has one, is recognised as such (Linux: the
       Windows toolkit has no stub DLL, only an import library) */
    {
        const char *stubs[] = { "/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so" };
        lwo_context *other = NULL;
        int i;
        for (i = 0; i < 2; i++) {
            if (access(stubs[i], R_OK) != 0) continue;
            d.driver_path = stubs[i];
            r = lwo_create(&d, &other);
            CHECK_EQ_INT(r, LWO_ERROR_STUB_DRIVER);
            CHECK(strstr(lwo_last_error(other), "stub") != NULL, "%s", lwo_last_error(other));
            lwo_destroy(other);
            other = NULL;
            break;
        }
    }
#endif
    CHECK_EQ_INT(lwo_create(NULL, NULL), LWO_ERROR_INVALID_ARGUMENT);
}

static void test_names(void) {
    int i, j, bad = 0;
    for (i = 0; i < LWO_RESULT_COUNT; i++) {
        const char *a = lwo_result_string((lwo_result)i);
        if (!a || strncmp(a, "LWO_", 4) != 0) bad++;
        for (j = 0; j < i; j++) if (strcmp(a, lwo_result_string((lwo_result)j)) == 0) bad++;
    }
    CHECK(bad == 0, "result names are distinct");
    CHECK(strcmp(lwo_result_string(LWO_RESULT_COUNT), "LWO_ERROR_UNKNOWN") == 0, "an unknown code is named so");
    CHECK(lwo_dtype_size(LWO_DTYPE_BF16) == 2 && lwo_dtype_size(LWO_DTYPE_F8_E4M3) == 1 && lwo_dtype_size(LWO_DTYPE_INVALID) == 0 &&
          lwo_dtype_size((lwo_dtype)99) == 0, "dtype sizes");
    {
        uint64_t prod = 0;
        CHECK(lwo__mul_ok(1ull << 32, 1ull << 31, &prod) && prod == 1ull << 63 && !lwo__mul_ok(1ull << 32, 1ull << 32, &prod), "overflow check");
    }
}

static void test_desc_defaults(void) {
    lwo_context ctx;
    lwo_desc d;
    memset(&d, 0, sizeof d);
    memset(&ctx, 0, sizeof ctx);
    check_setenv("LWO_CACHE_DIR", "/tmp/lwo-test-cache");
    CHECK_EQ_INT(lwo__desc_defaults(&ctx, &d), LWO_SUCCESS);
    CHECK(ctx.cache_dir && strcmp(ctx.cache_dir, "/tmp/lwo-test-cache") == 0, "LWO_CACHE_DIR is used");
    CHECK(strcmp(ctx.driver_path, LWO__DRIVER_DEFAULT) == 0, "the default driver is " LWO__DRIVER_DEFAULT " (on Linux libcuda.so.1, never the dev symlink)");
#ifdef _WIN32
    CHECK(strcmp(ctx.driver_path, "nvcuda.dll") == 0, "%s", ctx.driver_path);
#else
    CHECK(strcmp(ctx.driver_path, "libcuda.so.1") == 0, "%s", ctx.driver_path);
#endif
    CHECK(ctx.desc.log_level == LWO_LOG_PROGRESS, "default log level: warnings and progress");
    free(ctx.cache_dir); free(ctx.driver_path);
    check_unsetenv("LWO_CACHE_DIR");
#ifdef _WIN32
    /* a user name in UTF-8 that the ANSI code page cannot spell: lwo reads the variable as UTF-16 */
    check_setenv("LOCALAPPDATA", "C:\\Users\\\xe7\x94\xa8\xe6\x88\xb7\\AppData\\Local");
    memset(&ctx, 0, sizeof ctx);
    lwo__desc_defaults(&ctx, &d);
    CHECK(ctx.cache_dir && strcmp(ctx.cache_dir, "C:\\Users\\\xe7\x94\xa8\xe6\x88\xb7\\AppData\\Local\\lwo") == 0, "%%LOCALAPPDATA%%\\lwo: %s", ctx.cache_dir);
#else
    check_setenv("XDG_CACHE_HOME", "/tmp/xdg");
    memset(&ctx, 0, sizeof ctx);
    lwo__desc_defaults(&ctx, &d);
    CHECK(ctx.cache_dir && strcmp(ctx.cache_dir, "/tmp/xdg/lwo") == 0, "XDG_CACHE_HOME/lwo");
#endif
    free(ctx.cache_dir); free(ctx.driver_path);
    d.cache_dir = "-";
    memset(&ctx, 0, sizeof ctx);
    lwo__desc_defaults(&ctx, &d);
    CHECK(ctx.cache_dir == NULL, "'-' disables the cache");
    free(ctx.driver_path);
    {   /* gemm_kernels outside the values lwo_desc lists: refused, naming the field */
        static const int bad[] = { -1, 15, 1000 };
        int i;
        for (i = 0; i < 3; i++) {
            d.gemm_kernels = bad[i];
            memset(&ctx, 0, sizeof ctx);
            CHECK_EQ_INT(lwo__desc_defaults(&ctx, &d), LWO_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(ctx.error, "gemm_kernels") != NULL, "gemm_kernels %d: %s", bad[i], ctx.error);
            free(ctx.cache_dir); free(ctx.driver_path);
        }
        d.gemm_kernels = 14;
        memset(&ctx, 0, sizeof ctx);
        CHECK_EQ_INT(lwo__desc_defaults(&ctx, &d), LWO_SUCCESS);
        free(ctx.cache_dir); free(ctx.driver_path);
    }
}

int main(void) {
    check_seed("test_cpu");
    test_fp8_decode();
    test_fp8_encode_all_bf16();
    test_fp8_roundtrip_codes();
    test_half_formats();
    test_quantize_int8_rows();
    test_quantize_fp8_ref();
    test_convert_ref();
    test_cache_validate();
    test_arena();
    test_create_without_gpu();
    test_names();
    test_desc_defaults();
    return CHECK_SUMMARY();
}

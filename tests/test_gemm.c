/* test_gemm.c - CPU checks of lwo_linear's references and of the weight validation (no GPU).
   The references are checked against a naive double-precision computation of the dequantized
   math; the validation runs on the context a GPU-less lwo_create returns. */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include <math.h>
#include "check.h"

static double rel_l2(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) { num += (a[i] - b[i]) * (a[i] - b[i]); den += b[i] * b[i]; }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_ref_int8(uint64_t M, uint64_t N, uint64_t K) {
    uint64_t ld = K + 5, m, n, k;
    int8_t *qx = (int8_t *)calloc(M * ld, 1), *qw = (int8_t *)calloc(N * ld, 1);
    float *sx = (float *)malloc(M * 4), *sw = (float *)malloc(N * 4), *bias = (float *)malloc(N * 4), *y = (float *)malloc(M * N * 4);
    double *d = (double *)malloc(M * N * 8);
    int exact = 1;
    for (m = 0; m < M * ld; m++) qx[m] = (int8_t)((int)(check_rand_u64() % 255) - 127);
    for (m = 0; m < N * ld; m++) qw[m] = (int8_t)((int)(check_rand_u64() % 255) - 127);
    for (m = 0; m < M; m++) sx[m] = (float)(0.001 + check_rand_uniform() * 0.01);
    for (n = 0; n < N; n++) { sw[n] = (float)(0.001 + check_rand_uniform() * 0.01); bias[n] = (float)check_rand_normal(); }
    CHECK(lwo_ref_linear(qx, LWO_DTYPE_I8, ld, qw, LWO_DTYPE_I8, ld, M, N, K, sx, sw, bias, y, LWO_DTYPE_F32) == LWO_SUCCESS, "ref int8");
    for (m = 0; m < M; m++)
        for (n = 0; n < N; n++) {
            long long acc = 0;
            float v;
            for (k = 0; k < K; k++) acc += (long long)qx[m * ld + k] * qw[n * ld + k];
            d[m * N + n] = (double)acc * sx[m] * sw[n] + bias[n];
            v = (float)acc; v = v * sx[m]; v = v * sw[n]; v = v + bias[n]; /* the documented f32 order */
            if (v != y[m * N + n]) exact = 0;
        }
    CHECK(exact, "int8 reference differs from the f32 epilogue of the exact sum (M=%llu N=%llu K=%llu)", (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
    CHECK(rel_l2(y, d, M * N) < 1e-6, "int8 reference vs double: %g", rel_l2(y, d, M * N));
    free(qx); free(qw); free(sx); free(sw); free(bias); free(y); free(d);
}

static void test_ref_float(lwo_dtype xt, lwo_dtype wt, lwo_dtype yt, uint64_t M, uint64_t N, uint64_t K, int with_scales) {
    size_t xs = lwo_dtype_size(xt), ws = lwo_dtype_size(wt);
    unsigned char *x = (unsigned char *)malloc(M * K * xs), *w = (unsigned char *)malloc(N * K * ws);
    float *sx = (float *)malloc(M * 4), *sw = (float *)malloc(N * 4), *bias = (float *)malloc(N * 4), *yf = (float *)malloc(M * N * 4);
    unsigned char *y = (unsigned char *)malloc(M * N * 4);
    double *d = (double *)malloc(M * N * 8);
    uint64_t i, m, n, k;
    double e;
    for (i = 0; i < M * K; i++) lwo_ref_store(x, xt, i, (float)check_rand_normal());
    for (i = 0; i < N * K; i++) lwo_ref_store(w, wt, i, (float)check_rand_normal());
    for (m = 0; m < M; m++) sx[m] = (float)(0.5 + check_rand_uniform());
    for (n = 0; n < N; n++) { sw[n] = (float)(0.5 + check_rand_uniform()); bias[n] = (float)check_rand_normal(); }
    CHECK(lwo_ref_linear(x, xt, K, w, wt, K, M, N, K, with_scales ? sx : NULL, with_scales ? sw : NULL, bias, y, yt) == LWO_SUCCESS, "ref float");
    for (m = 0; m < M; m++)
        for (n = 0; n < N; n++) {
            double acc = 0;
            for (k = 0; k < K; k++) acc += (double)lwo_ref_load(x, xt, m * K + k) * lwo_ref_load(w, wt, n * K + k);
            if (with_scales) acc *= (double)sx[m] * sw[n];
            d[m * N + n] = acc + bias[n];
            yf[m * N + n] = lwo_ref_load(y, yt, m * N + n);
        }
    e = rel_l2(yf, d, M * N);
    CHECK(e < (yt == LWO_DTYPE_F32 ? 1e-6 : 1e-2), "float reference %s x %s -> %s: rel L2 %g", lwo_dtype_name(xt), lwo_dtype_name(wt), lwo_dtype_name(yt), e);
    free(x); free(w); free(sx); free(sw); free(bias); free(yf); free(y); free(d);
}

static void test_fp8_rows(void) {
    uint64_t R = 7, K = 45, kq = 64, r, k;
    float *x = (float *)malloc(R * K * 4), scales[7], sm[45];
    uint8_t *q = (uint8_t *)malloc(R * kq);
    int ok = 1;
    for (r = 0; r < R * K; r++) x[r] = (float)check_rand_normal();
    for (k = 0; k < R * K; k += 9) x[k] = 0; /* some zeros */
    for (k = 0; k < K; k++) x[3 * K + k] = 0; /* one zero row */
    for (k = 0; k < K; k++) sm[k] = (float)(0.5 + check_rand_uniform());
    CHECK(lwo_ref_quantize_fp8_rows(x, LWO_DTYPE_F32, R, K, sm, q, kq, scales) == LWO_SUCCESS, "fp8 rows");
    CHECK(scales[3] == 1.0f, "zero row scale %g", (double)scales[3]);
    for (r = 0; r < R; r++) {
        float amax = 0;
        for (k = 0; k < K; k++) { float v = fabsf(x[r * K + k] / sm[k]); if (v > amax) amax = v; }
        for (k = 0; k < K; k++) {
            double deq = lwo_ref_fp8_to_f32(q[r * kq + k], LWO_DTYPE_F8_E4M3) * (double)scales[r], v = x[r * K + k] / sm[k];
            if (fabs(deq - v) > fabs(v) * 0.0626 + scales[r] * 0.002) ok = 0;
        }
        for (k = K; k < kq; k++) if (q[r * kq + k]) ok = 0;
        if (amax > 0) { float m = 0; for (k = 0; k < K; k++) { float v = fabsf(lwo_ref_fp8_to_f32(q[r * kq + k], LWO_DTYPE_F8_E4M3)); if (v > m) m = v; } if (m != 448.0f) ok = 0; }
    }
    CHECK(ok, "fp8 row quantization round trip");
    free(x); free(q);
}

static void test_validation(void) {
    lwo_desc desc;
    lwo_context *ctx = NULL;
    lwo_weight *w = (lwo_weight *)1;
    lwo_weight_desc d;
    float data[12] = { 0 }, sm[4] = { 1, 1, 1, 1 }, badsm[4] = { 1, 0, 1, 1 };
    lwo_result r;
    memset(&desc, 0, sizeof desc);
    desc.driver_path = "/nonexistent/libcuda.so.1";
    desc.cache_dir = "-";
    desc.log_level = -1;
    r = lwo_create(&desc, &ctx);
    CHECK(r != LWO_SUCCESS, "lwo_create succeeded with no driver");
    CHECK(ctx != NULL, "no context returned");
    if (!ctx) return;
    memset(&d, 0, sizeof d);
    d.rows = 3; d.cols = 4; d.data = data;
    CHECK_EQ_INT(lwo_weight_create(ctx, &d, &w), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(lwo_weight_create(NULL, &d, &w), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(lwo_linear(ctx, NULL, NULL, NULL, NULL, NULL), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(lwo_linear(NULL, NULL, NULL, NULL, NULL, NULL), LWO_ERROR_INVALID_ARGUMENT);
    lwo_weight_destroy(ctx, NULL);
    /* the host-side validation, driven directly */
    CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
    CHECK_EQ_INT(lwo__weight_validate(ctx, NULL, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.rows = 0; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.rows") != NULL, "detail: %s", lwo_last_error(ctx));
    d.rows = 3; d.cols = 0; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.cols") != NULL, "detail: %s", lwo_last_error(ctx));
    d.cols = 4; d.data = NULL; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.data") != NULL, "detail: %s", lwo_last_error(ctx));
    d.data = data; d.format = (lwo_format)99; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.format") != NULL, "detail: %s", lwo_last_error(ctx));
    d.format = LWO_FORMAT_BF16; d.data_dtype = LWO_DTYPE_I32; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.data_dtype = LWO_DTYPE_I8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.format = LWO_FORMAT_INT8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "row_scales") != NULL, "detail: %s", lwo_last_error(ctx));
    d.row_scales = sm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
    d.smooth = sm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS); /* pre-quantized i8 holding W * smooth */
    d.smooth = badsm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.smooth = NULL; d.row_scales = NULL; d.data_dtype = LWO_DTYPE_F8_E5M2; d.format = LWO_FORMAT_FP8_E4M3;
    CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.format = LWO_FORMAT_FP8_E5M2; d.scale = 0.5f; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
    d.scale = -1.0f; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.scale") != NULL, "detail: %s", lwo_last_error(ctx));
    d.scale = 0; d.data_dtype = LWO_DTYPE_F32; d.format = LWO_FORMAT_BF16; d.smooth = sm;
    CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.format = LWO_FORMAT_INT8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
    d.smooth = badsm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lwo_last_error(ctx), "desc.smooth[1]") != NULL, "detail: %s", lwo_last_error(ctx));
    d.smooth = NULL; d.bias = data; d.bias_dtype = LWO_DTYPE_I8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    d.bias_dtype = LWO_DTYPE_BF16; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
    d.format = LWO_FORMAT_FP8_E4M3_W8A8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 89), LWO_SUCCESS);
    CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 86), LWO_ERROR_UNSUPPORTED);
    d.rows = (uint64_t)1 << 40; d.cols = (uint64_t)1 << 30; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
    lwo_destroy(ctx);
}

int main(void) {
    check_seed("test_gemm");
    test_ref_int8(5, 7, 33);
    test_ref_int8(17, 9, 200);
    test_ref_float(LWO_DTYPE_BF16, LWO_DTYPE_BF16, LWO_DTYPE_F32, 6, 11, 70, 0);
    test_ref_float(LWO_DTYPE_F16, LWO_DTYPE_F16, LWO_DTYPE_F16, 3, 5, 19, 0);
    test_ref_float(LWO_DTYPE_F8_E4M3, LWO_DTYPE_F8_E4M3, LWO_DTYPE_BF16, 4, 9, 64, 1);
    test_ref_float(LWO_DTYPE_F8_E4M3, LWO_DTYPE_F8_E4M3, LWO_DTYPE_F32, 4, 9, 64, 1);
    test_fp8_rows();
    {
        float a = 1;
        CHECK_EQ_INT(lwo_ref_linear(NULL, LWO_DTYPE_I8, 1, &a, LWO_DTYPE_I8, 1, 1, 1, 1, NULL, NULL, NULL, &a, LWO_DTYPE_F32), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_linear(&a, LWO_DTYPE_I8, 1, &a, LWO_DTYPE_BF16, 1, 1, 1, 1, NULL, NULL, NULL, &a, LWO_DTYPE_F32), LWO_ERROR_INVALID_ARGUMENT);
    }
    test_validation();
    return CHECK_SUMMARY();
}

/* test_gemm.c - CPU checks of lwo_linear's references and of the weight validation (no GPU).
   The references are checked against a naive double-precision computation of the dequantized
   math; the validation runs on the context a GPU-less lwo_create returns. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

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
    CHECK(check_ref_linear(qx, LWO_DTYPE_I8, ld, qw, LWO_DTYPE_I8, ld, M, N, K, sx, sw, bias, y, LWO_DTYPE_F32) == LWO_SUCCESS, "ref int8");
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
    CHECK(check_ref_linear(x, xt, K, w, wt, K, M, N, K, with_scales ? sx : NULL, with_scales ? sw : NULL, bias, y, yt) == LWO_SUCCESS, "ref float");
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
    CHECK(check_ref_quantize_fp8_rows(x, LWO_DTYPE_F32, R, K, sm, q, kq, scales) == LWO_SUCCESS, "fp8 rows");
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

/* ---- the W8A8 prep: permutation, smoothing, blockwise Hadamard rotation ---------------------- */
static int popcount_u(unsigned v) { int c = 0; while (v) { c += (int)(v & 1u); v >>= 1; } return c; }

/* The documented f32 order written another way: H_b = [[H_b/2, H_b/2], [H_b/2, -H_b/2]], the halves
   transformed first (the smaller stages), then combined (stage b/2); the scaling last. */
static void fwht_recursive(float *v, int b) {
    int i;
    if (b == 1) return;
    fwht_recursive(v, b / 2);
    fwht_recursive(v + b / 2, b / 2);
    for (i = 0; i < b / 2; i++) { float a = v[i], c = v[i + b / 2]; v[i] = a + c; v[i + b / 2] = a - c; }
}

static int rand_perm(int32_t *p, uint64_t k) {
    uint64_t i;
    for (i = 0; i < k; i++) p[i] = (int32_t)i;
    for (i = k; i > 1; i--) { uint64_t j = check_rand_u64() % i; int32_t t = p[i - 1]; p[i - 1] = p[j]; p[j] = t; }
    return 0;
}

/* lwo_ref_hadamard against the dense matrix H[i][j] = (-1)^popcount(i & j) / sqrt(b) in double, and
   bit for bit against the recursive form of the same f32 order; H H^T = I, H symmetric. */
static void test_hadamard(void) {
    int l;
    for (l = 1; l <= 8; l++) {
        int b = 1 << l, nb = 3, i, j, bad_dense = 0, bad_bits = 0, bad_orth = 0, bad_sym = 0;
        uint64_t n = (uint64_t)b * nb, blk;
        float *v = (float *)malloc(n * 4), *w = (float *)malloc(n * 4), *h = (float *)malloc((size_t)b * b * 4);
        double *x = (double *)malloc(n * 8), maxerr = 0, maxorth = 0;
        float s = 0;
        for (i = 0; i < (int)n; i++) { v[i] = (float)check_rand_normal(); x[i] = v[i]; w[i] = v[i]; }
        CHECK_EQ_INT(lwo_ref_hadamard(v, n, b), LWO_SUCCESS);
        for (blk = 0; blk < (uint64_t)nb; blk++) {
            double l1 = 0;
            for (j = 0; j < b; j++) l1 += fabs(x[blk * b + j]);
            for (i = 0; i < b; i++) {
                double d = 0, e;
                for (j = 0; j < b; j++) d += ((popcount_u((unsigned)(i & j)) & 1) ? -1.0 : 1.0) * x[blk * b + j];
                d /= sqrt((double)b);
                e = fabs(v[blk * b + i] - d);
                if (e > maxerr) maxerr = e;
                /* each of l + 1 roundings is at most 2^-24 of a partial sum bounded by the block's L1 norm */
                if (e > (l + 2) * 6.0e-8 * l1) bad_dense++;
            }
            fwht_recursive(w + blk * b, b);
        }
        /* s_b: 2^-(l/2), times (float)(1/sqrt 2) for odd l */
        s = (l & 1) ? 0.70710678118654752f : 1.0f;
        for (i = 0; i < l / 2; i++) s = s * 0.5f;
        for (i = 0; i < (int)n; i++) { w[i] = w[i] * s; if (memcmp(&w[i], &v[i], 4) != 0) bad_bits++; }
        CHECK(bad_dense == 0, "b=%d: %d entries off the dense double transform (max error %g)", b, bad_dense, maxerr);
        CHECK(bad_bits == 0, "b=%d: %d entries differ from the recursive form of the documented f32 order", b, bad_bits);
        {
            double want = 1.0 / sqrt((double)b), e = fabs((double)s - want);
            CHECK(e <= fabs((double)nextafterf(s, 0.0f) - want) && e <= fabs((double)nextafterf(s, 1.0f) - want),
                  "b=%d: s_b %.9g is not the f32 nearest 1/sqrt(b)", b, (double)s);
        }
        /* H column by column: the transform of each unit vector */
        for (j = 0; j < b; j++) {
            float *col = (float *)malloc((size_t)b * 4);
            for (i = 0; i < b; i++) col[i] = i == j ? 1.0f : 0.0f;
            lwo_ref_hadamard(col, (uint64_t)b, b);
            for (i = 0; i < b; i++) h[(size_t)i * b + j] = col[i];
            free(col);
        }
        for (i = 0; i < b; i++)
            for (j = 0; j < b; j++) {
                double d = 0;
                int k;
                for (k = 0; k < b; k++) d += (double)h[(size_t)i * b + k] * h[(size_t)j * b + k];
                d -= i == j ? 1.0 : 0.0;
                if (fabs(d) > maxorth) maxorth = fabs(d);
                if (h[(size_t)i * b + j] != h[(size_t)j * b + i]) bad_sym++;
            }
        /* even l: entries are exactly +-2^-(l/2) and H H^T = I exactly; odd l: s_b is rounded */
        if (!(l & 1)) { if (maxorth != 0) bad_orth = 1; }
        else if (maxorth > 1.2e-7) bad_orth = 1;
        CHECK(!bad_orth, "b=%d: |H H^T - I| = %g", b, maxorth);
        CHECK(bad_sym == 0, "b=%d: H is not symmetric (%d entries)", b, bad_sym);
        free(v); free(w); free(h); free(x);
    }
    {
        float v[8] = { 0 };
        CHECK_EQ_INT(lwo_ref_hadamard(v, 8, 3), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_hadamard(v, 8, 1), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_hadamard(v, 8, 512), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_hadamard(v, 6, 4), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_hadamard(NULL, 8, 4), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_ref_hadamard(v, 8, 8), LWO_SUCCESS);
    }
}

/* lwo_ref_prep_rows against a dense O(K^2) transform in double (the rows permuted and smoothed in
   double, times the block-diagonal H), and x' W'^T against x W^T: the transform must not change
   the product. K is not a multiple of every block, so the last block mixes columns with padding. */
static void test_prep_rows(lwo_dtype xt, uint64_t M, uint64_t N, uint64_t K, int hadamard, int with_perm, int with_smooth) {
    uint64_t b = hadamard ? (uint64_t)hadamard : 1, kr = (K + b - 1) / b * b, kq = kr + 8 * (check_rand_u64() % 3), i, j, m, n;
    size_t xs = lwo_dtype_size(xt);
    unsigned char *x = (unsigned char *)malloc(M * K * xs), *w = (unsigned char *)malloc(N * K * xs);
    float *xp = (float *)malloc(M * kq * 4), *wp = (float *)malloc(N * kq * 4), *sm = (float *)malloc(K * 4);
    int32_t *perm = (int32_t *)malloc(K * 4);
    double *u = (double *)malloc(kq * 8), maxerr = 0, maxprod = 0;
    int bad_dense = 0, bad_pad = 0, bad_prod = 0;
    for (i = 0; i < M * K; i++) lwo_ref_store(x, xt, i, (float)check_rand_normal());
    for (i = 0; i < N * K; i++) lwo_ref_store(w, xt, i, (float)(check_rand_normal() * 0.05));
    for (i = 0; i < K; i++) sm[i] = (float)(0.25 + 2 * check_rand_uniform());
    lwo_ref_store(x, xt, 0, 40.0f); /* an outlier */
    rand_perm(perm, K);
    for (i = 0; i < M * kq; i++) xp[i] = NAN;
    for (i = 0; i < N * kq; i++) wp[i] = NAN;
    CHECK_EQ_INT(check_ref_prep_rows(x, xt, M, K, with_perm ? perm : NULL, with_smooth ? sm : NULL, 0, hadamard, xp, kq), LWO_SUCCESS);
    CHECK_EQ_INT(check_ref_prep_rows(w, xt, N, K, with_perm ? perm : NULL, with_smooth ? sm : NULL, 1, hadamard, wp, kq), LWO_SUCCESS);
    /* the activations' transform, densely: u = permuted and smoothed row, then sum_j H[i][j] u[j] */
    for (m = 0; m < M; m++) {
        for (j = 0; j < kq; j++) u[j] = 0;
        for (j = 0; j < K; j++) {
            uint64_t c = with_perm ? (uint64_t)perm[j] : j;
            u[j] = (double)lwo_ref_load(x, xt, m * K + c) / (with_smooth ? (double)sm[c] : 1.0);
        }
        for (i = 0; i < kq; i++) {
            double d = 0, l1 = 0, e;
            if (i >= kr) { if (xp[m * kq + i] != 0.0f) bad_pad++; continue; }
            for (j = (i / b) * b; j < (i / b + 1) * b; j++) {
                d += ((popcount_u((unsigned)(i & j & (b - 1))) & 1) ? -1.0 : 1.0) * u[j];
                l1 += fabs(u[j]);
            }
            d /= sqrt((double)b);
            e = fabs(xp[m * kq + i] - d);
            if (e > maxerr) maxerr = e;
            /* the smoothing division and l + 1 roundings, each within 2^-24 of the block's L1 norm */
            if (e > 12 * 6.0e-8 * l1) bad_dense++;
        }
    }
    /* x' W'^T == x W^T, up to f32 rounding of the transformed operands */
    for (m = 0; m < M; m++)
        for (n = 0; n < N; n++) {
            double a = 0, c = 0, nx = 0, nw = 0;
            for (j = 0; j < kq; j++) a += (double)xp[m * kq + j] * wp[n * kq + j];
            for (j = 0; j < K; j++) {
                double xv = lwo_ref_load(x, xt, m * K + j), wv = lwo_ref_load(w, xt, n * K + j);
                c += xv * wv; nx += xv * xv; nw += wv * wv;
            }
            if (fabs(a - c) > maxprod) maxprod = fabs(a - c);
            if (fabs(a - c) > 2e-6 * sqrt(nx * nw) * 8) bad_prod++;
        }
    CHECK(bad_dense == 0 && bad_pad == 0, "prep %s K=%llu b=%d perm=%d smooth=%d: %d entries off the dense transform (max %g), %d padded entries not 0",
          lwo_dtype_name(xt), (unsigned long long)K, hadamard, with_perm, with_smooth, bad_dense, maxerr, bad_pad);
    CHECK(bad_prod == 0, "prep %s K=%llu b=%d perm=%d smooth=%d: x'W'^T differs from xW^T (max %g)", lwo_dtype_name(xt),
          (unsigned long long)K, hadamard, with_perm, with_smooth, maxprod);
    free(x); free(w); free(xp); free(wp); free(sm); free(perm); free(u);
}

/* With no permutation and no rotation, prep + quantize of f32 is the plain quantizer bit for bit
   (the GPU's int8 results without the new options stay what they were); and the arguments. */
static void test_prep_plain_and_errors(void) {
    uint64_t R = 9, K = 77, KQ = 128, i;
    float *x = (float *)malloc(R * K * 4), *xp = (float *)malloc(R * KQ * 4), sm[77], s1[9], s2[9];
    uint16_t *xb = (uint16_t *)malloc(R * K * 2);
    int8_t q1[9 * 128], q2[9 * 128];
    uint8_t f1[9 * 128], f2[9 * 128];
    int32_t perm[77];
    int t;
    for (i = 0; i < R * K; i++) { x[i] = (float)check_rand_normal(); xb[i] = lwo_ref_f32_to_bf16(x[i]); }
    for (i = 0; i < K; i++) sm[i] = (float)(0.25 + 2 * check_rand_uniform());
    for (t = 0; t < 4; t++) {
        const void *src = (t & 2) ? (const void *)xb : (const void *)x;
        lwo_dtype st = (t & 2) ? LWO_DTYPE_BF16 : LWO_DTYPE_F32;
        const float *s = (t & 1) ? sm : NULL;
        memset(q1, 0x5a, sizeof q1); memset(q2, 0x33, sizeof q2); memset(f1, 0x5a, sizeof f1); memset(f2, 0x33, sizeof f2);
        CHECK_EQ_INT(check_ref_prep_rows(src, st, R, K, NULL, s, 0, 0, xp, KQ), LWO_SUCCESS);
        check_ref_quantize_int8_rows(xp, LWO_DTYPE_F32, R, KQ, NULL, q1, KQ, s1);
        check_ref_quantize_int8_rows(src, st, R, K, s, q2, KQ, s2);
        CHECK(memcmp(q1, q2, sizeof q1) == 0 && memcmp(s1, s2, sizeof s1) == 0, "int8: prep without perm/rotation is not the plain quantizer (%s, smooth %d)", lwo_dtype_name(st), t & 1);
        check_ref_quantize_fp8_rows(xp, LWO_DTYPE_F32, R, KQ, NULL, f1, KQ, s1);
        check_ref_quantize_fp8_rows(src, st, R, K, s, f2, KQ, s2);
        CHECK(memcmp(f1, f2, sizeof f1) == 0 && memcmp(s1, s2, sizeof s1) == 0, "e4m3: prep without perm/rotation is not the plain quantizer (%s, smooth %d)", lwo_dtype_name(st), t & 1);
    }
    /* a permutation alone permutes the codes: int8 q[:, j] = q_plain[:, perm[j]], same scales */
    rand_perm(perm, K);
    check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, perm, sm, 0, 0, xp, KQ);
    check_ref_quantize_int8_rows(xp, LWO_DTYPE_F32, R, KQ, NULL, q1, KQ, s1);
    check_ref_quantize_int8_rows(x, LWO_DTYPE_F32, R, K, sm, q2, KQ, s2);
    {
        int bad = memcmp(s1, s2, sizeof s1) != 0;
        uint64_t r, j;
        for (r = 0; r < R; r++) for (j = 0; j < K; j++) if (q1[r * KQ + j] != q2[r * KQ + (uint64_t)perm[j]]) bad++;
        CHECK(bad == 0, "a permutation alone does not permute the int8 codes (%d)", bad);
    }
    /* arguments */
    CHECK_EQ_INT(check_ref_prep_rows(NULL, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 0, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 0, NULL, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_I8, R, K, NULL, NULL, 0, 0, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 3, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 1, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 512, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, -4, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 128, xp, KQ), LWO_SUCCESS);     /* 77 -> 128 */
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 256, xp, KQ), LWO_ERROR_INVALID_ARGUMENT); /* 77 -> 256 > kq */
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, NULL, NULL, 0, 0, xp, K - 1), LWO_ERROR_INVALID_ARGUMENT);
    perm[5] = perm[6];
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, perm, NULL, 0, 0, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    rand_perm(perm, K); perm[3] = (int32_t)K;
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, perm, NULL, 0, 0, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    perm[3] = -1;
    CHECK_EQ_INT(check_ref_prep_rows(x, LWO_DTYPE_F32, R, K, perm, NULL, 0, 0, xp, KQ), LWO_ERROR_INVALID_ARGUMENT);
    free(x); free(xp); free(xb);
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
    {
        lwo_linear_desc ld;
        memset(&ld, 0, sizeof ld);   /* no x, w or y */
        CHECK_EQ_INT(lwo_linear(ctx, &ld), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_linear(ctx, NULL), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(lwo_linear(NULL, &ld), LWO_ERROR_INVALID_ARGUMENT);
    }
    lwo_weight_destroy(ctx, NULL);
    /* the host-side validation, driven directly: it judges a desc whose format lwo_weight_create
       has resolved (KEEP never reaches it; f32 data's KEEP is BF16) */
    d.format = LWO_FORMAT_BF16;
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
    /* the prep options: W8A8 formats with float data, a real permutation, a block of 2..256 */
    {
        int32_t perm[4] = { 2, 0, 3, 1 }, dup[4] = { 2, 0, 2, 1 }, beyond[4] = { 2, 0, 4, 1 }, neg[4] = { 2, -1, 3, 1 };
        static const int bad_blocks[] = { 1, 3, 6, 100, 512, -2, -256 };
        size_t i;
        d.rows = 3; d.cols = 4; d.bias = NULL; d.data_dtype = LWO_DTYPE_F32; d.format = LWO_FORMAT_INT8;
        d.perm = perm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
        d.hadamard = 256; d.smooth = sm; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
        d.format = LWO_FORMAT_FP8_E4M3_W8A8; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 89), LWO_SUCCESS);
        d.data_dtype = LWO_DTYPE_BF16; d.hadamard = 2; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_SUCCESS);
        d.smooth = NULL; d.data_dtype = LWO_DTYPE_F32;
        d.perm = dup; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.perm[2] = 2 repeats desc.perm[0]") != NULL, "detail: %s", lwo_last_error(ctx));
        d.perm = beyond; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.perm[2] is 4") != NULL && strstr(lwo_last_error(ctx), "permutation of 0..3") != NULL, "detail: %s", lwo_last_error(ctx));
        d.perm = neg; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.perm[1] is -1") != NULL, "detail: %s", lwo_last_error(ctx));
        d.perm = perm;
        for (i = 0; i < sizeof bad_blocks / sizeof *bad_blocks; i++) {
            d.hadamard = bad_blocks[i];
            CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(lwo_last_error(ctx), "desc.hadamard") != NULL && strstr(lwo_last_error(ctx), "power of two from 2 to 256") != NULL, "detail: %s", lwo_last_error(ctx));
        }
        d.hadamard = 64; d.perm = NULL;
        d.format = LWO_FORMAT_BF16; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.hadamard applies to the W8A8 formats only") != NULL, "detail: %s", lwo_last_error(ctx));
        d.hadamard = 0; d.perm = perm; d.format = LWO_FORMAT_FP8_E4M3;
        CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.perm applies to the W8A8 formats only") != NULL, "detail: %s", lwo_last_error(ctx));
        /* pre-quantized data holds W as it was quantized: lwo cannot permute or rotate it */
        d.format = LWO_FORMAT_INT8; d.data_dtype = LWO_DTYPE_I8; d.row_scales = sm;
        CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.perm needs f32, f16 or bf16 data") != NULL, "detail: %s", lwo_last_error(ctx));
        d.perm = NULL; d.hadamard = 16; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        d.format = LWO_FORMAT_FP8_E4M3_W8A8; d.data_dtype = LWO_DTYPE_F8_E4M3; CHECK_EQ_INT(lwo__weight_validate(ctx, &d, 90), LWO_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lwo_last_error(ctx), "desc.hadamard needs f32, f16 or bf16 data") != NULL, "detail: %s", lwo_last_error(ctx));
    }
    /* a zero format is KEEP: the data's own format (f32 -> BF16); F32 is no weight's format */
    {
        lwo_weight_desc k, e;
        memset(&k, 0, sizeof k);
        k.rows = 3; k.cols = 4; k.data = data;
        e = k; e.format = LWO_FORMAT_BF16;
        CHECK(lwo_weight_device_bytes(&k) != 0 && lwo_weight_device_bytes(&k) == lwo_weight_device_bytes(&e), "KEEP of f32 data is BF16");
        k.data_dtype = e.data_dtype = LWO_DTYPE_F8_E5M2; e.format = LWO_FORMAT_FP8_E5M2;
        CHECK(lwo_weight_device_bytes(&k) != 0 && lwo_weight_device_bytes(&k) == lwo_weight_device_bytes(&e), "KEEP of f8_e5m2 data is FP8_E5M2");
        k.data_dtype = LWO_DTYPE_F32; k.format = LWO_FORMAT_F32;
        CHECK_EQ_INT(lwo_weight_device_bytes(&k), 0);
    }
    lwo_destroy(ctx);
}

/* The Hopper tile choice (lwo__gemm_wg_tile) on 132 multiprocessors. A round is one tile a CTA.
   For 8-bit operands the 128 x 256 tile takes 8192^3 and the 1024-row shapes (measured faster there
   than the 2x1 ping-pong pair on the H100, level on the H200); a single band of rows takes 64x128.
   Counting a cluster's round as two tiles' time (an early version) picked the lone ping-pong tile
   at 4608 x 3072. Units are whole clusters: odd tile counts round up. The 192 x 192 pair takes the
   M = 4608 shapes, whose 2.9, 8.7 or 11.6 rounds of it fill the multiprocessors better than any
   other tile's (measured faster at each). lwo_desc.gemm_kernels 2..8 forces. The first cases are
   8-bit operands; 16-bit ones have their own rates (the second table). */
static void test_wg_tiles(void) {
    static const struct { uint64_t M, N; const char *want; } cases[] = {
        { 4608, 3072, "wg192c2" }, { 8192, 8192, "wg256" }, { 1024, 12288, "wg256" }, { 4608, 12288, "wg192c2" },
        { 4608, 9216, "wg192c2" }, { 256, 3072, "wg64" }, { 64, 3072, "wg64" } };
    lwo_context c;
    size_t i;
    memset(&c, 0, sizeof c);
    c.info.sm_count = 132;
    for (i = 0; i < 2 * sizeof cases / sizeof *cases; i++) {   /* without, then with the split tail */
        const size_t j = i % (sizeof cases / sizeof *cases);
        const int split = i >= sizeof cases / sizeof *cases;
        const char *got = lwo__gemm_wg_tile(&c, cases[j].M, cases[j].N, 3072, split, 1)->suffix;
        CHECK(strcmp(got, cases[j].want) == 0, "%llu x %llu, split %d: tile %s, want %s", (unsigned long long)cases[j].M,
              (unsigned long long)cases[j].N, split, got, cases[j].want);
    }
    /* 16-bit operands: the wide tile where its rounds fill the SMs about as well (bf16 8192^3 measured
       1.387 ms against the 2x1 ping-pong's 1.520), the 2x1 ping-pong tile at 6.55 rounds of it */
    {
        static const struct { uint64_t M, N; const char *want; } wide[] = {
            { 8192, 8192, "wg256" }, { 4608, 9216, "wg256" }, { 4608, 3072, "wg192c2" }, { 4608, 12288, "wg192c2" },
            { 1024, 12288, "wg256" }, { 256, 3072, "wg64" } };
        for (i = 0; i < sizeof wide / sizeof *wide; i++) {
            const char *got = lwo__gemm_wg_tile(&c, wide[i].M, wide[i].N, 6144, 1, 0)->suffix;
            CHECK(strcmp(got, wide[i].want) == 0, "16-bit %llu x %llu: tile %s, want %s", (unsigned long long)wide[i].M,
                  (unsigned long long)wide[i].N, got, wide[i].want);
        }
    }
    CHECK_EQ_INT((int)lwo__wg_units(&lwo__wg_tiles[4], 4608, 3072), 432);   /* 36 x 24 tiles in pairs of rows */
    CHECK_EQ_INT((int)lwo__wg_units(&lwo__wg_tiles[4], 300, 520), 10);      /* 3 row tiles: 2 pairs, the last half past M */
    CHECK_EQ_INT((int)lwo__wg_units(&lwo__wg_tiles[5], 129, 257), 2);       /* 128 x 256: 2 row tiles, one pair; 2 column tiles */
    for (i = 2; i < 2 + LWO__WG_TILES; i++) {
        c.desc.gemm_kernels = (int)i;
        CHECK(lwo__gemm_wg_tile(&c, 4608, 3072, 3072, 1, 0) == &lwo__wg_tiles[i - 2], "gemm_kernels %d forces tile %d", (int)i, (int)i - 2);
    }
    c.desc.gemm_kernels = 2 + LWO__WG_TILES;   /* past the table: chosen by shape */
    CHECK(strcmp(lwo__gemm_wg_tile(&c, 4608, 3072, 3072, 0, 1)->suffix, "wg192c2") == 0, "gemm_kernels past the table");
    c.desc.gemm_kernels = 0;
    /* forced splits (tests) pick only tiles that can split; a call that may not split still may take it */
    c.desc.gemm_split = 8;
    CHECK(lwo__wg_can_split(lwo__gemm_wg_tile(&c, 4608, 3072, 3072, 1, 1)), "gemm_split 8: a tile that splits");
    CHECK(lwo__wg_can_split(lwo__gemm_wg_tile(&c, 4608, 3072, 3072, 1, 0)), "gemm_split 8, 16-bit: a tile that splits");
    c.desc.gemm_split = 0;
    CHECK(!lwo__wg_can_split(&lwo__wg_tiles[6]) && lwo__wg_can_split(&lwo__wg_tiles[2]), "192 x 192 cannot split, 128 x 256 can");
}

/* fp8 upcast weights read as stored (sm_90a): when lwo_linear may, that every Hopper tile keeps at
   least three stages beside the staging slots, and the conversion's arithmetic (kernels.cuh.inc,
   lwo_fp8x2_to_16x2: the code's exponent and mantissa under the target's fields, the sign back,
   times a power of two) exact for every code but the NaN and infinity codes. */
static double check_half_bits(uint32_t h, int f16) {
    if (!f16) { float f; uint32_t u = h << 16; memcpy(&f, &u, 4); return f; }
    return lwo_ref_f16_to_f32((uint16_t)h);
}
static void test_fp8_weight(void) {
    lwo_context c;
    int f16, e5, code, t;
    memset(&c, 0, sizeof c);
    c.info.sm_count = 132;
    snprintf(c.info.arch, sizeof c.info.arch, "sm_90a");
    CHECK(!lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "sm_90a, the default: no shared-memory conversion");
    /* the default's register-A rule: 16-bit y with whole 16-byte rows, aligned codes and y, and the
       tile's units at least one round (132 here) */
    CHECK(lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 512, 2) && lwo__gemm_fp8_regs_default(&c, 1024, 12288, 256, 512, 1),
          "the default: register A at 4608 x 3072 (384 units of 192 x 192) and 1024 x 12288 (384 of 128 x 256)");
    CHECK(!lwo__gemm_fp8_regs_default(&c, 256, 3072, 256, 512, 2), "256 x 3072: 48 units of 128 x 128, the copy");
    CHECK(lwo__gemm_fp8_regs_default(&c, 4608, 1024, 256, 512, 2) && !lwo__gemm_fp8_regs_default(&c, 2048, 1024, 256, 512, 2),
          "4608 x 1024: 288 units, register A; 2048 x 1024: 128 units, the copy");
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 512, 0), "f32 y: the copy");
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3068, 256, 512, 2), "rows of 3068 16-bit values (not whole 16 bytes): the copy");
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3072, 264, 512, 2) && !lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 520, 2),
          "unaligned codes or y: the copy");
    c.desc.gemm_kernels = LWO__GEMM_FP8_COPY;
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 512, 2) && !lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512),
          "gemm_kernels 14: always the copy");
    c.desc.gemm_kernels = 1;
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 512, 2), "gemm_kernels 1 (mma.sync): the copy");
    c.desc.gemm_kernels = 0;
    CHECK(lwo__gemm_operands(&c, LWO_FORMAT_FP8_E4M3) == LWO__OPS_16, "the default: fp8 upcast weights are 16-bit operands");
    c.desc.gemm_kernels = LWO__GEMM_FP8_STORED;
    CHECK(lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "gemm_kernels 9, aligned: read as stored");
    CHECK(!lwo__gemm_fp8_ok(&c, 4608, 3072, 264, 512) && !lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 520), "unaligned codes or y: the copy");
    c.desc.gemm_kernels = 1;
    CHECK(!lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "gemm_kernels 1: the copy");
    c.desc.gemm_kernels = 4;
    CHECK(lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "a forced tile reads as stored");
    c.desc.gemm_kernels = LWO__GEMM_FP8_REGS;
    CHECK(lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "gemm_kernels 10 reads as stored");
    {
        lwo__gemm_args g;
        memset(&g, 0, sizeof g);
        g.b_fp8 = 1; g.y_kind = 2; g.N = 3072; g.kpad = 3072;
        CHECK(lwo__gemm_wgu_ok(&g), "the register-A kernels: bf16 y, whole 16-byte rows");
        g.y_kind = 0;
        CHECK(!lwo__gemm_wgu_ok(&g), "f32 y: not the register-A kernels");
        g.y_kind = 1; g.N = 3071;
        CHECK(!lwo__gemm_wgu_ok(&g), "odd N: not the register-A kernels");
    }
    {   /* their tile per shape (tokens x channels, 132 multiprocessors): 128 x 256 where its last
           round is nearly full, 192 x 192 where it fills 2.9 of 3 rounds against 3.3 of 4, 128 x
           128 where one round of the others leaves most multiprocessors idle; 11..13 force them */
        static const struct { uint64_t M, N; unsigned channels, tokens; } want[] = {
            { 8192, 8192, 128, 256 }, { 1024, 12288, 128, 256 }, { 4608, 3072, 192, 192 }, { 4608, 12288, 192, 192 },
            { 256, 3072, 128, 128 }, { 1, 200, 128, 128 } };
        unsigned i;
        for (i = 0; i < sizeof want / sizeof *want; i++) {
            const lwo__wgu_tile *tl = lwo__gemm_wgu_tile(&c, want[i].M, want[i].N);
            CHECK(tl->channels == want[i].channels && tl->tokens == want[i].tokens, "register-A tile at %llu x %llu: %u x %u",
                  (unsigned long long)want[i].M, (unsigned long long)want[i].N, tl->channels, tl->tokens);
        }
        for (i = 0; i < 3; i++) {
            c.desc.gemm_kernels = LWO__GEMM_FP8_REGS + 1 + (int)i;
            CHECK(lwo__gemm_wgu_tile(&c, 4608, 3072) == &lwo__wgu_tiles[i], "gemm_kernels %d forces register-A tile %u", c.desc.gemm_kernels, i);
            CHECK(lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "gemm_kernels %d reads as stored", c.desc.gemm_kernels);
            /* three stages beside the barriers and an 8 KiB output buffer a consumer (lwo__gemm_wgu) */
            CHECK(1024u + lwo__wgu_tiles[i].consumers * 8192u + 3u * (lwo__wgu_tiles[i].channels * 64u + lwo__wgu_tiles[i].tokens * 128u) <= 232448u,
                  "register-A tile %u fits three stages", i);
            CHECK(lwo__wgu_tiles[i].channels == 64u * lwo__wgu_tiles[i].consumers, "a consumer warpgroup a 64-channel slice");
        }
        c.desc.gemm_kernels = LWO__GEMM_FP8_REGS;
    }
    c.desc.gemm_kernels = LWO__GEMM_FP8_STORED;
    CHECK(lwo__gemm_operands(&c, LWO_FORMAT_FP8_E5M2) == LWO__OPS_FP8_B && lwo__gemm_operands(&c, LWO_FORMAT_INT8) == LWO__OPS_8 &&
          lwo__gemm_operands(&c, LWO_FORMAT_BF16) == LWO__OPS_16, "the operands of each format");
    for (t = 0; t < 200; t++) {   /* never a ping-pong tile, whose consumers leave the conversion to three warps */
        const uint64_t M = 1 + check_rand_u64() % 9000, N = 1 + check_rand_u64() % 13000;
        const lwo__wg_tile *tl = lwo__gemm_wg_tile(&c, M, N, 6144, (int)(t & 1), LWO__OPS_FP8_B);
        CHECK(!tl->pp, "fp8 B at %llu x %llu: tile %s", (unsigned long long)M, (unsigned long long)N, tl->suffix);
    }
    snprintf(c.info.arch, sizeof c.info.arch, "sm_89");
    CHECK(!lwo__gemm_fp8_ok(&c, 4608, 3072, 256, 512), "sm_89: the copy");
    c.desc.gemm_kernels = 0;
    CHECK(!lwo__gemm_fp8_regs_default(&c, 4608, 3072, 256, 512, 2), "sm_89, the default: the copy");
    CHECK(lwo__gemm_operands(&c, LWO_FORMAT_FP8_E4M3) == LWO__OPS_16, "sm_89: fp8 upcast weights are 16-bit operands");
    for (t = 0; t < LWO__WG_TILES; t++) {   /* 227 KiB: what sm_90 gives a block */
        const lwo__wg_tile *tl = &lwo__wg_tiles[t];
        const unsigned stage = (tl->bm + tl->bn) * tl->bk, head = lwo__wg_smem_head(tl, 1, 1);
        CHECK(head % 1024 == 0 && 232448u >= head + 3u * stage, "tile %s with fp8 B: head %u + 3 stages of %u", tl->suffix, head, stage);
        CHECK(head - lwo__wg_smem_head(tl, 1, 0) == LWO__WG_FP8_SLOTS * tl->bn * tl->bk / 2, "tile %s: the staging slots", tl->suffix);
    }
    for (f16 = 0; f16 < 2; f16++)
        for (e5 = 0; e5 < 2; e5++)
            for (code = 0; code < 256; code++) {
                const int shift = f16 ? (e5 ? 0 : 1) : (e5 ? 3 : 4), pow2 = f16 ? (e5 ? 0 : 8) : (e5 ? 112 : 120);
                const uint32_t v = (uint32_t)code << 8, r = ((v & 0x7f00u) >> shift) | (v & 0x8000u);
                const double got = ldexp(check_half_bits(r, f16), pow2);
                const float want = lwo_ref_fp8_to_f32((uint8_t)code, e5 ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3);
                const int special = e5 ? (code & 0x7c) == 0x7c : (code & 0x7f) == 0x7f;
                if (special) continue;
                CHECK(got == (double)want, "%s -> %s code 0x%02x: %g, want %g", e5 ? "e5m2" : "e4m3", f16 ? "f16" : "bf16", code, got, (double)want);
            }
}

/* The split tail's extent (lwo__wg_rounds): the last two rounds' units, P to 2P - 1 of them (the
   kernel's counters and the runs' lengths count on both bounds), by default only where it saves
   time and the grid runs at least LWO__SPLIT_MIN_ROUNDS whole rounds. */
static void test_wg_split(void) {
    const lwo__wg_tile *pp2 = &lwo__wg_tiles[4], *wide = &lwo__wg_tiles[2];
    lwo_context c;
    uint64_t first;
    double r;
    memset(&c, 0, sizeof c);
    c.info.sm_count = 132;
    r = lwo__wg_rounds(&c, pp2, 2048, 66, 64, 1, &first);   /* 8192^3: 31.03 rounds, the tail 68 units */
    CHECK_EQ_INT((int)first, 30 * 66);
    CHECK(r > 2048.0 / 66 && r < 31.5, "rounds %.3f", r);
    CHECK_EQ_INT((int)lwo__wg_rounds(&c, pp2, 2048, 66, 64, 0, &first), 32);   /* the caller may not split */
    CHECK_EQ_INT((int)first, 2048);
    CHECK_EQ_INT((int)lwo__wg_rounds(&c, pp2, 432, 66, 24, 1, &first), 7);   /* 4608 x 3072: 6.55 rounds, too few */
    CHECK_EQ_INT((int)first, 432);
    lwo__wg_rounds(&c, pp2, 16 * 66 + 30, 66, 24, 1, &first);   /* 16.45 rounds: the first that splits */
    CHECK_EQ_INT((int)first, 15 * 66);
    lwo__wg_rounds(&c, pp2, 15 * 66 + 30, 66, 24, 1, &first);
    CHECK_EQ_INT((int)first, 15 * 66 + 30);
    CHECK_EQ_INT((int)lwo__wg_rounds(&c, pp2, 20 * 66, 66, 24, 1, &first), 20);   /* whole rounds */
    CHECK_EQ_INT((int)first, 20 * 66);
    lwo__wg_rounds(&c, pp2, 60, 66, 24, 1, &first);   /* one round, part empty: nothing to gain */
    CHECK_EQ_INT((int)first, 60);
    lwo__wg_rounds(&c, pp2, 20 * 66 + 59, 66, 24, 1, &first);   /* 20.89 rounds: splitting would cost more */
    CHECK_EQ_INT((int)first, 20 * 66 + 59);
    lwo__wg_rounds(&c, pp2, 2048, 66, 1, 1, &first);   /* one slice of K: nothing to share */
    CHECK_EQ_INT((int)first, 2048);
    lwo__wg_rounds(&c, wide, 4096, 132, 24, 1, &first);   /* 128 x 256: the largest tile the split area's slots hold */
    CHECK_EQ_INT((int)first, 30 * 132);
    c.desc.gemm_split = -1;
    lwo__wg_rounds(&c, pp2, 2048, 66, 64, 1, &first);
    CHECK_EQ_INT((int)first, 2048);
    c.desc.gemm_split = 7;   /* always, on at most 7 CTAs: 3 clusters of 2, 7 single CTAs */
    CHECK_EQ_INT((int)lwo__wg_slots(&c, pp2), 3);
    CHECK_EQ_INT((int)lwo__wg_slots(&c, &lwo__wg_tiles[3]), 7);
    lwo__wg_rounds(&c, pp2, 455, 66, 24, 1, &first);
    CHECK_EQ_INT((int)first, 5 * 66);
    lwo__wg_rounds(&c, pp2, 432, 66, 24, 1, &first);
    CHECK_EQ_INT((int)first, 5 * 66);
    lwo__wg_rounds(&c, pp2, 10, 3, 2, 1, &first);
    CHECK_EQ_INT((int)first, 6);
    c.desc.gemm_split = 1;
    CHECK_EQ_INT((int)lwo__wg_slots(&c, pp2), 1);
    c.desc.gemm_split = 0;
    CHECK_EQ_INT((int)lwo__wg_slots(&c, pp2), 66);
    {   /* test_gpu_gemm's default split (pass 0): the 8-bit formats at 4608 x 1024 x 7488 take the 2x1
           ping-pong tile, 1062 units, split on 64, 65 or 66 clusters (the ones that fit at once);
           at 4608 x 1024 x 7808 they take 192 x 192, which does not split */
        const lwo__wg_tile *t;
        uint64_t fit;
        snprintf(c.info.arch, sizeof c.info.arch, "sm_90a");
        t = lwo__gemm_wg_tile(&c, 4608, 7488, 1024, 1, LWO__OPS_8);
        CHECK(t == pp2, "4608 x 7488, 8-bit: tile %s, want %s", t->suffix, pp2->suffix);
        CHECK_EQ_INT((int)lwo__wg_units(t, 4608, 7488), 1062);
        for (fit = 64; fit <= 66; fit++) {
            lwo__wg_rounds(&c, t, 1062, fit, 1024 / t->bk, 1, &first);
            CHECK(first < 1062, "4608 x 7488 on %d clusters: no split", (int)fit);
        }
        CHECK(!lwo__wg_can_split(lwo__gemm_wg_tile(&c, 4608, 7808, 1024, 1, LWO__OPS_8)), "4608 x 7808, 8-bit: a tile that cannot split");
    }
}

/* int8 codes of the CPU reference: round to nearest even, saturate to +-127, NaN 0 (as the GPU). */
static void test_i8_codes(void) {
    CHECK_EQ_INT(lwo__ref_i8_sat(NAN), 0);
    CHECK_EQ_INT(lwo__ref_i8_sat(-NAN), 0);
    CHECK_EQ_INT(lwo__ref_i8_sat(INFINITY), 127);
    CHECK_EQ_INT(lwo__ref_i8_sat(-INFINITY), -127);
    CHECK_EQ_INT(lwo__ref_i8_sat(-200.0f), -127);
    CHECK_EQ_INT(lwo__ref_i8_sat(2.5f), 2);
    CHECK_EQ_INT(lwo__ref_i8_sat(-3.5f), -4);
    CHECK_EQ_INT(lwo__ref_i8_sat(126.6f), 127);
}

int main(void) {
    check_seed("test_gemm");
    test_wg_tiles();
    test_wg_split();
    test_fp8_weight();
    test_i8_codes();
    test_ref_int8(5, 7, 33);
    test_ref_int8(17, 9, 200);
    test_ref_float(LWO_DTYPE_BF16, LWO_DTYPE_BF16, LWO_DTYPE_F32, 6, 11, 70, 0);
    test_ref_float(LWO_DTYPE_F16, LWO_DTYPE_F16, LWO_DTYPE_F16, 3, 5, 19, 0);
    test_ref_float(LWO_DTYPE_F8_E4M3, LWO_DTYPE_F8_E4M3, LWO_DTYPE_BF16, 4, 9, 64, 1);
    test_ref_float(LWO_DTYPE_F8_E4M3, LWO_DTYPE_F8_E4M3, LWO_DTYPE_F32, 4, 9, 64, 1);
    test_fp8_rows();
    test_hadamard();
    {
        static const int blocks[] = { 0, 2, 4, 8, 16, 32, 64, 128, 256 };
        size_t i;
        for (i = 0; i < sizeof blocks / sizeof *blocks; i++) {
            test_prep_rows(LWO_DTYPE_F32, 3, 4, 300, blocks[i], (int)(i & 1), (int)((i >> 1) & 1));
            test_prep_rows(i & 1 ? LWO_DTYPE_BF16 : LWO_DTYPE_F16, 2, 3, 1 + check_rand_u64() % 700, blocks[i], 1, 1);
        }
        test_prep_rows(LWO_DTYPE_BF16, 2, 2, 3000, 256, 1, 1);
    }
    test_prep_plain_and_errors();
    {
        float a = 1;
        CHECK_EQ_INT(check_ref_linear(NULL, LWO_DTYPE_I8, 1, &a, LWO_DTYPE_I8, 1, 1, 1, 1, NULL, NULL, NULL, &a, LWO_DTYPE_F32), LWO_ERROR_INVALID_ARGUMENT);
        CHECK_EQ_INT(check_ref_linear(&a, LWO_DTYPE_I8, 1, &a, LWO_DTYPE_BF16, 1, 1, 1, 1, NULL, NULL, NULL, &a, LWO_DTYPE_F32), LWO_ERROR_INVALID_ARGUMENT);
    }
    test_validation();
    return CHECK_SUMMARY();
}

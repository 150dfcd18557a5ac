/* test_gpu_safetensors.c - checkpoint tensors as weights (lwo_safetensors_load_weight) on the GPU.
   Writes four checkpoints with lwo_safetensors_write: plain bf16 / f32 / f16, ComfyUI scaled fp8
   (e4m3, e5m2), ComfyUI comfy_quant (e4m3), lwo int8 (with and without smooth); K a multiple of
   64 and not, with and without bias. Each tensor is loaded in every format that makes sense for
   it, RESIDENT in a roomy context and AUTO / STREAMED in one whose budget holds about a third of
   the weights (lwo_streaming_plan), and checked:
   - the stored weight (data, scales, bias, smooth, read back through lwo_weight_acquire) equals
     the CPU conversion of the file tensor with lwo's references, bit for bit;
   - zero copy happened exactly when expected (the file's dtype is the stored one, K % 64 == 0,
     AUTO or STREAMED): host_home REGISTERED and host_data pointing into the mapping, else a pinned
     copy (streamed) or none (resident); one registration per file, released with the last weight;
   - lwo_linear on random x, output poisoned first: int8 within one f32 ulp of lwo_ref_linear over
     the CPU operands, the other paths relative L2 < 1e-2 against it, and every path close to the
     unquantized linear of what the checkpoint means; the streamed outputs (two passes) equal the
     resident ones bit for bit;
   - policies pick the formats; errors (missing, unsupported, bad shape, out of budget) name the
     tensor and leave nothing allocated or registered.
   LWO_TEST_QUICK=1: one format per tensor and one streamed pass (for compute-sanitizer). */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"
#include <unistd.h>

enum { M = 33, MAXF = 6 };

typedef struct src_t {
    const char *name;          /* "<name>.weight" in the file */
    int file;                  /* 0 plain, 1 ComfyUI scaled fp8, 2 comfy_quant, 3 lwo int8 */
    lwo_dtype dt;
    uint64_t N, K;
    lwo_dtype bias_dt;         /* LWO_DTYPE_INVALID: no bias */
    int smooth;                /* lwo int8 with a smooth divisor */
    lwo_format fmts[MAXF];
    int nfmts;
    /* made by make_src */
    void *w;                   /* the file's bytes of the weight */
    uint64_t wbytes;
    float scale;               /* fp8 */
    float *row_scales, *sm;    /* int8 */
    void *bias;
    float *weff;               /* [N, K]: what the checkpoint means (dequantized) */
    float *bias_f;             /* [N] or NULL */
    char wname[64], bname[64], sname[64], smname[64], cqname[64];
    uint64_t scalar_shape[1], json_shape[1];
} src_t;

#define F_BF LWO_FORMAT_BF16
#define F_H LWO_FORMAT_F16
#define F_E4 LWO_FORMAT_FP8_E4M3
#define F_E5 LWO_FORMAT_FP8_E5M2
#define F_I8 LWO_FORMAT_INT8
#define F_W8 LWO_FORMAT_FP8_E4M3_W8A8
typedef struct src_spec {
    const char *name; int file; lwo_dtype dt; uint64_t N, K; lwo_dtype bias_dt; int smooth; lwo_format fmts[MAXF]; int nfmts;
} src_spec;
/* The references on f32 operands (y f32). */
static void ref_quantize_fp8(const float *src, uint8_t *dst, lwo_dtype fp8, uint64_t n, float scale) { check_ref_quantize_fp8(src, LWO_DTYPE_F32, dst, fp8, n, scale); }
static void ref_linear(const void *x, lwo_dtype xt, uint64_t ldx, const void *w, lwo_dtype wt, uint64_t ldw, uint64_t M, uint64_t N, uint64_t K,
                       const float *sx, const float *sw, const float *bias, float *y) {
    check_ref_linear(x, xt, ldx, w, wt, ldw, M, N, K, sx, sw, bias, y, LWO_DTYPE_F32);
}

static const src_spec specs[] = {
    { "bf_a", 0, LWO_DTYPE_BF16, 384, 1024, LWO_DTYPE_BF16, 0, { F_BF, F_H, F_E4, F_E5, F_I8, F_W8 }, 6 },
    { "bf_b", 0, LWO_DTYPE_BF16, 200, 328, LWO_DTYPE_INVALID, 0, { F_BF, F_I8, F_E4 }, 3 },
    { "f32_a", 0, LWO_DTYPE_F32, 384, 1024, LWO_DTYPE_F32, 0, { F_BF, F_H, F_E4, F_I8, F_W8 }, 5 },
    { "f32_b", 0, LWO_DTYPE_F32, 200, 328, LWO_DTYPE_INVALID, 0, { F_BF, F_E5, F_I8 }, 3 },
    { "h_a", 0, LWO_DTYPE_F16, 256, 512, LWO_DTYPE_F16, 0, { F_H, F_BF, F_I8 }, 3 },
    { "e4_a", 1, LWO_DTYPE_F8_E4M3, 384, 1024, LWO_DTYPE_BF16, 0, { F_E4, F_W8, F_BF, F_I8, F_E5 }, 5 },
    { "e4_b", 1, LWO_DTYPE_F8_E4M3, 200, 100, LWO_DTYPE_INVALID, 0, { F_E4, F_BF, F_W8 }, 3 },
    { "e5_a", 1, LWO_DTYPE_F8_E5M2, 256, 512, LWO_DTYPE_F32, 0, { F_E5, F_BF, F_E4 }, 3 },
    { "cq_a", 2, LWO_DTYPE_F8_E4M3, 256, 512, LWO_DTYPE_BF16, 0, { F_E4, F_BF }, 2 },
    { "q_a", 3, LWO_DTYPE_I8, 384, 1024, LWO_DTYPE_F32, 1, { F_I8, F_BF, F_H, F_E4, F_W8 }, 5 },
    { "q_b", 3, LWO_DTYPE_I8, 200, 100, LWO_DTYPE_INVALID, 0, { F_I8, F_BF, F_W8 }, 3 },
};
#define NSRC ((int)(sizeof specs / sizeof *specs))
static src_t srcs[NSRC];

/* What a (tensor, format) must become on the device, and its linear on the case's x. */
typedef struct tcase {
    src_t *s;
    lwo_format fmt;
    lwo_dtype xt, wdt;         /* x's dtype; the stored weight's */
    uint64_t kp;
    int as_is;                 /* the file's bytes are the stored bytes (up to K padding) */
    uint16_t *x;               /* [M, K] */
    uint8_t *wq;               /* [N, kp] in wdt */
    float *scales;             /* nscales */
    uint64_t nscales;
    const float *smooth;       /* [K] or NULL */
    float *yref;               /* [M, N]: lwo_ref_linear over the CPU operands */
    double *ytrue;             /* [M, N]: x @ weff^T + bias */
    float *yres;               /* [M, N]: the resident run's output */
    int have_yres;
} tcase;

static tcase cases[64];
static int ncases, warnings;
static char tmpdir[256], paths[4][320];

static void on_log(void *u, lwo_log_level l, const char *m) {
    (void)u;
    if (l <= LWO_LOG_WARN) { warnings++; printf("  [lwo] %s\n", m); }
}




static lwo_dtype stored_dtype(lwo_format f) {
    switch (f) {
    case LWO_FORMAT_BF16: return LWO_DTYPE_BF16;
    case LWO_FORMAT_F16: return LWO_DTYPE_F16;
    case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E4M3_W8A8: return LWO_DTYPE_F8_E4M3;
    case LWO_FORMAT_FP8_E5M2: return LWO_DTYPE_F8_E5M2;
    default: return LWO_DTYPE_I8;
    }
}

static uint64_t r256(uint64_t v) { return (v + 255) / 256 * 256; }

static void make_src(src_t *s) {
    uint64_t N = s->N, K = s->K, n = N * K, i, k;
    float *W = (float *)malloc(n * 4);
    lwo_dtype d = s->dt;
    for (i = 0; i < n; i++) W[i] = (float)(check_rand_normal() * 0.05);
    s->weff = (float *)malloc(n * 4);
    s->wbytes = n * lwo_dtype_size(s->dt);
    s->w = malloc(s->wbytes);
    switch (s->dt) {
    case LWO_DTYPE_BF16: case LWO_DTYPE_F16: case LWO_DTYPE_F32:
        for (i = 0; i < n; i++) { lwo_ref_store(s->w, d, i, W[i]); s->weff[i] = lwo_ref_load(s->w, d, i); }
        break;
    case LWO_DTYPE_F8_E4M3: case LWO_DTYPE_F8_E5M2:
        s->scale = lwo_ref_fp8_scale(W, LWO_DTYPE_F32, n, d);
        ref_quantize_fp8(W, (uint8_t *)s->w, d, n, s->scale);
        for (i = 0; i < n; i++) s->weff[i] = lwo_ref_fp8_to_f32(((uint8_t *)s->w)[i], d) * s->scale;
        break;
    default: { /* lwo int8: q = quant_rows(W * smooth), w = (q * s[n]) / smooth[k] */
        const int8_t *q = (const int8_t *)s->w;
        s->row_scales = (float *)malloc(N * 4);
        if (s->smooth) {
            s->sm = (float *)malloc(K * 4);
            for (k = 0; k < K; k++) s->sm[k] = (float)(0.5 + 1.5 * check_rand_uniform());
            for (i = 0; i < N; i++) for (k = 0; k < K; k++) W[i * K + k] = W[i * K + k] * s->sm[k];
        }
        check_ref_quantize_rows(W, LWO_DTYPE_F32, N, K, NULL, s->w, LWO_DTYPE_I8, K, s->row_scales);
        for (i = 0; i < N; i++)
            for (k = 0; k < K; k++) {
                float v = (float)q[i * K + k] * s->row_scales[i];
                s->weff[i * K + k] = s->sm ? v / s->sm[k] : v;
            }
        break;
    }
    }
    if (s->bias_dt != LWO_DTYPE_INVALID) {
        lwo_dtype bd = s->bias_dt;
        s->bias = malloc(N * lwo_dtype_size(bd));
        s->bias_f = (float *)malloc(N * 4);
        for (i = 0; i < N; i++) { lwo_ref_store(s->bias, bd, i, (float)check_rand_normal()); s->bias_f[i] = lwo_ref_load(s->bias, bd, i); }
    }
    snprintf(s->wname, sizeof s->wname, "%s.weight", s->name);
    snprintf(s->bname, sizeof s->bname, "%s.bias", s->name);
    snprintf(s->sname, sizeof s->sname, s->file == 1 ? "%s.scale_weight" : "%s.weight_scale", s->name);
    snprintf(s->smname, sizeof s->smname, "%s.smooth", s->name);
    snprintf(s->cqname, sizeof s->cqname, "%s.comfy_quant", s->name);
    free(W);
}


static const char *cq_json = "{\"format\": \"float8_e4m3fn\", \"group\": null}";
static uint64_t shapes2[NSRC][2], shapesN[NSRC][1], shapesK[NSRC][1];
static float small_w[4 * 64], small_b[5];
static int8_t small_q[4 * 64];

static int write_files(void) {
    lwo_safetensors_write_tensor w[4][64];
    size_t nw[4] = { 0, 0, 0, 0 };
    static const uint64_t s0[1] = { 0 }, s464[2] = { 4, 64 }, s64[1] = { 64 }, s5[1] = { 5 };
    const char *mk_[1] = { "lwo.quant" }, *mv[1] = { LWO_SAFETENSORS_LWO_INT8_V1 };
    int i, f;
    for (i = 0; i < NSRC; i++) {
        src_t *s = &srcs[i];
        lwo_safetensors_write_tensor *l = w[s->file];
        size_t *n = &nw[s->file];
        shapes2[i][0] = s->N; shapes2[i][1] = s->K; shapesN[i][0] = s->N; shapesK[i][0] = s->K;
        l[(*n)++] = check_st_tensor(s->wname, s->dt, 2, shapes2[i], s->w);
        if (s->bias) l[(*n)++] = check_st_tensor(s->bname, s->bias_dt, 1, shapesN[i], s->bias);
        if (s->file == 1 || s->file == 2) l[(*n)++] = check_st_tensor(s->sname, LWO_DTYPE_F32, 0, NULL, &s->scale);
        if (s->file == 2) { s->json_shape[0] = strlen(cq_json); l[(*n)++] = check_st_tensor(s->cqname, LWO_DTYPE_U8, 1, s->json_shape, cq_json); }
        if (s->file == 3) l[(*n)++] = check_st_tensor(s->sname, LWO_DTYPE_F32, 1, shapesN[i], s->row_scales);
        if (s->sm) l[(*n)++] = check_st_tensor(s->smname, LWO_DTYPE_F32, 1, shapesK[i], s->sm);
    }
    w[1][nw[1]++] = check_st_tensor("scaled_fp8", LWO_DTYPE_F8_E4M3, 1, s0, NULL);   /* ComfyUI's marker */
    /* tensors for the error cases */
    for (i = 0; i < 4 * 64; i++) { small_w[i] = (float)check_rand_normal(); small_q[i] = (int8_t)(i % 100); }
    w[0][nw[0]++] = check_st_tensor("i8plain.weight", LWO_DTYPE_I8, 2, s464, small_q);
    w[0][nw[0]++] = check_st_tensor("vec.weight", LWO_DTYPE_F32, 1, s64, small_w);
    w[0][nw[0]++] = check_st_tensor("bbad.weight", LWO_DTYPE_F32, 2, s464, small_w);
    w[0][nw[0]++] = check_st_tensor("bbad.bias", LWO_DTYPE_F32, 1, s5, small_b);
    for (f = 0; f < 4; f++) {
        lwo_safetensors_write_desc wd;
        snprintf(paths[f], sizeof paths[f], "%s/ckpt%d.safetensors", tmpdir, f);
        memset(&wd, 0, sizeof wd);
        wd.path = paths[f]; wd.tensors = w[f]; wd.tensor_count = nw[f];
        if (f == 3) { wd.meta_keys = mk_; wd.meta_values = mv; wd.meta_count = 1; }
        if (lwo_safetensors_write(&wd) != LWO_SUCCESS) {
            CHECK(0, "write %s: %s", paths[f], wd.error);
            return 0;
        }
    }
    return 1;
}

static void make_expect(tcase *c) {
    src_t *s = c->s;
    uint64_t N = s->N, K = s->K, kp = (K + 63) / 64 * 64, n, k;
    size_t es;
    lwo_format f = c->fmt;
    c->kp = kp;
    c->wdt = stored_dtype(f);
    c->xt = f == LWO_FORMAT_F16 ? LWO_DTYPE_F16 : LWO_DTYPE_BF16;
    es = lwo_dtype_size(c->wdt);
    c->wq = (uint8_t *)calloc(N * kp, es);
    c->scales = (float *)calloc(N, 4);
    c->as_is = (s->dt == LWO_DTYPE_BF16 && f == LWO_FORMAT_BF16) || (s->dt == LWO_DTYPE_F16 && f == LWO_FORMAT_F16) ||
               (s->dt == LWO_DTYPE_F8_E4M3 && (f == LWO_FORMAT_FP8_E4M3 || f == LWO_FORMAT_FP8_E4M3_W8A8)) ||
               (s->dt == LWO_DTYPE_F8_E5M2 && f == LWO_FORMAT_FP8_E5M2) || (s->dt == LWO_DTYPE_I8 && f == LWO_FORMAT_INT8);
    if (c->as_is) {
        for (n = 0; n < N; n++) memcpy(c->wq + n * kp * es, (const uint8_t *)s->w + n * K * es, K * es);
        if (f == LWO_FORMAT_FP8_E4M3 || f == LWO_FORMAT_FP8_E5M2) { c->nscales = 1; c->scales[0] = s->scale; }
        if (f == LWO_FORMAT_FP8_E4M3_W8A8) { c->nscales = N; for (n = 0; n < N; n++) c->scales[n] = s->scale; }
        if (f == LWO_FORMAT_INT8) { c->nscales = N; memcpy(c->scales, s->row_scales, N * 4); c->smooth = s->sm; }
    } else {
        const float *wsrc = s->weff;   /* what the GPU quantizes: the file's values, dequantized */
        switch (f) {
        case LWO_FORMAT_BF16: case LWO_FORMAT_F16:
            for (n = 0; n < N; n++) for (k = 0; k < K; k++) lwo_ref_store(c->wq, c->wdt, n * kp + k, wsrc[n * K + k]);
            break;
        case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: {
            uint8_t *t = (uint8_t *)malloc(N * K);
            c->nscales = 1;
            c->scales[0] = lwo_ref_fp8_scale(wsrc, LWO_DTYPE_F32, N * K, c->wdt);
            ref_quantize_fp8(wsrc, t, c->wdt, N * K, c->scales[0]);
            for (n = 0; n < N; n++) memcpy(c->wq + n * kp, t + n * K, K);
            free(t);
            break;
        }
        case LWO_FORMAT_INT8:
            c->nscales = N;
            check_ref_quantize_rows(wsrc, LWO_DTYPE_F32, N, K, NULL, c->wq, LWO_DTYPE_I8, kp, c->scales);
            break;
        default: { /* W8A8 e4m3: the smooth of an lwo int8 checkpoint is kept and folded back in */
            float *folded = (float *)malloc(N * K * 4);
            c->smooth = s->sm;
            for (n = 0; n < N; n++) for (k = 0; k < K; k++) folded[n * K + k] = s->sm ? wsrc[n * K + k] * s->sm[k] : wsrc[n * K + k];
            c->nscales = N;
            check_ref_quantize_rows(folded, LWO_DTYPE_F32, N, K, NULL, c->wq, LWO_DTYPE_F8_E4M3, kp, c->scales);
            free(folded);
            break;
        }
        }
    }
    /* x and the two references */
    c->x = (uint16_t *)malloc(M * K * 2);
    for (n = 0; n < M * K; n++) lwo_ref_store(c->x, c->xt, n, (float)check_rand_normal());
    c->yref = (float *)malloc(M * N * 4);
    c->ytrue = (double *)malloc(M * N * 8);
    c->yres = (float *)malloc(M * N * 4);
    switch (f) {
    case LWO_FORMAT_BF16: case LWO_FORMAT_F16:
        ref_linear(c->x, c->xt, K, c->wq, c->wdt, kp, M, N, K, NULL, NULL, s->bias_f, c->yref);
        break;
    case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: { /* upcast to x's dtype, as the GPU does */
        uint16_t *up = (uint16_t *)malloc(N * kp * 2);
        lwo_ref_convert(c->wq, c->wdt, up, c->xt, N * kp, c->scales[0]);
        ref_linear(c->x, c->xt, K, up, c->xt, kp, M, N, K, NULL, NULL, s->bias_f, c->yref);
        free(up);
        break;
    }
    default: { /* W8A8: x quantized per token (after the smooth divisor) */
        uint8_t *aq = (uint8_t *)malloc(M * kp);
        float *asc = (float *)malloc(M * 4);
        if (f == LWO_FORMAT_INT8) {
            check_ref_quantize_rows(c->x, c->xt, M, K, c->smooth, aq, LWO_DTYPE_I8, kp, asc);
            ref_linear(aq, LWO_DTYPE_I8, kp, c->wq, LWO_DTYPE_I8, kp, M, N, kp, asc, c->scales, s->bias_f, c->yref);
        } else {
            check_ref_quantize_rows(c->x, c->xt, M, K, c->smooth, aq, LWO_DTYPE_F8_E4M3, kp, asc);
            ref_linear(aq, LWO_DTYPE_F8_E4M3, kp, c->wq, LWO_DTYPE_F8_E4M3, kp, M, N, kp, asc, c->scales, s->bias_f, c->yref);
        }
        free(aq); free(asc);
        break;
    }
    }
    for (n = 0; n < M; n++) {
        uint64_t j;
        for (j = 0; j < N; j++) {
            double u = s->bias_f ? s->bias_f[j] : 0.0;
            for (k = 0; k < K; k++) u += (double)lwo_ref_load(c->x, c->xt, n * K + k) * s->weff[j * K + k];
            c->ytrue[n * N + j] = u;
        }
    }
}

static uint32_t ordered32(float f) { uint32_t u; memcpy(&u, &f, 4); return (u & 0x80000000u) ? 0x80000000u - (u & 0x7fffffffu) : 0x80000000u + u; }

/* y against the case's references; prints one line when verbose. */
static void check_y(const tcase *c, const float *y, const char *where, int verbose) {
    uint64_t N = c->s->N, i, nan = 0, maxulp = 0;
    double num = 0, den = 0, unum = 0, uden = 0, e, ue, tol;
    for (i = 0; i < M * N; i++) {
        double g = y[i], r = c->yref[i], u = c->ytrue[i];
        if (y[i] != y[i]) { nan++; continue; }
        num += (g - r) * (g - r); den += r * r;
        unum += (g - u) * (g - u); uden += u * u;
        if (c->fmt == LWO_FORMAT_INT8) {
            uint32_t a = ordered32(y[i]), b = ordered32(c->yref[i]);
            uint64_t d = a > b ? a - b : b - a;
            if (d > maxulp) maxulp = d;
        }
    }
    e = sqrt(num / (den > 0 ? den : 1));
    ue = sqrt(unum / (uden > 0 ? uden : 1));
    tol = (c->fmt == LWO_FORMAT_BF16 || c->fmt == LWO_FORMAT_F16) ? 2e-2 : c->fmt == LWO_FORMAT_INT8 ? 5e-2 : 0.2;
    if (verbose)
        printf("  %-6s -> %-13s %-9s N=%-4llu K=%-5llu bias=%d as_is=%d relL2(ref)=%.2e maxulp=%llu relL2(unquantized)=%.2e\n", c->s->name,
               lwo_format_name(c->fmt), where, (unsigned long long)N, (unsigned long long)c->s->K, c->s->bias_f != NULL, c->as_is, e,
               (unsigned long long)maxulp, ue);
    CHECK(nan == 0, "%s -> %s %s: %llu outputs not written (or NaN)", c->s->name, lwo_format_name(c->fmt), where, (unsigned long long)nan);
    if (c->fmt == LWO_FORMAT_INT8) CHECK(maxulp <= 1, "%s -> int8 %s: %llu ulp from lwo_ref_linear", c->s->name, where, (unsigned long long)maxulp);
    else CHECK(e < 1e-2, "%s -> %s %s: relative L2 %.3e against lwo_ref_linear", c->s->name, lwo_format_name(c->fmt), where, e);
    CHECK(ue < tol, "%s -> %s %s: relative L2 %.3e against the unquantized linear", c->s->name, lwo_format_name(c->fmt), where, ue);
}

/* The stored weight, read back through acquire, against the CPU conversion. */
static void check_stored(lwo_context *ctx, const lwo_weight *w, const tcase *c, const char *where) {
    lwo_weight_info info;
    uint64_t N = c->s->N, K = c->s->K, i, bad = 0;
    size_t es = lwo_dtype_size(c->wdt);
    lwo_result r = lwo_weight_acquire(ctx, NULL, w, &info);
    CHECK(r == LWO_SUCCESS, "%s -> %s %s: acquire: %s", c->s->name, lwo_format_name(c->fmt), where, lwo_last_error(ctx));
    if (r) return;
    CHECK(info.format == c->fmt && info.rows == N && info.cols == K && info.kpad == c->kp && info.data &&
          lwo_tensor_dtype(info.data) == c->wdt && lwo_tensor_bytes(info.data) == N * c->kp * es,
          "%s -> %s %s: weight info (format %d, %llu x %llu, kpad %llu)", c->s->name, lwo_format_name(c->fmt), where, (int)info.format,
          (unsigned long long)info.rows, (unsigned long long)info.cols, (unsigned long long)info.kpad);
    if (info.data && lwo_tensor_bytes(info.data) == N * c->kp * es) {
        uint8_t *d = (uint8_t *)malloc(N * c->kp * es);
        CHECK(lwo_tensor_download(ctx, info.data, d, N * c->kp * es) == LWO_SUCCESS, "download: %s", lwo_last_error(ctx));
        for (i = 0; i < N * c->kp; i++) if (memcmp(d + i * es, c->wq + i * es, es) != 0) bad++;
        CHECK(bad == 0, "%s -> %s %s: %llu of %llu stored elements differ from the CPU conversion", c->s->name, lwo_format_name(c->fmt), where,
              (unsigned long long)bad, (unsigned long long)(N * c->kp));
        free(d);
    }
    if (c->nscales) {
        CHECK(info.scales && lwo_tensor_numel(info.scales) == c->nscales, "%s -> %s %s: %llu scales expected", c->s->name, lwo_format_name(c->fmt), where,
              (unsigned long long)c->nscales);
        if (info.scales && lwo_tensor_numel(info.scales) == c->nscales) {
            float *sc = (float *)malloc(c->nscales * 4);
            lwo_tensor_download(ctx, info.scales, sc, c->nscales * 4);
            CHECK(memcmp(sc, c->scales, c->nscales * 4) == 0, "%s -> %s %s: scales differ (%g vs %g)", c->s->name, lwo_format_name(c->fmt), where,
                  (double)sc[0], (double)c->scales[0]);
            free(sc);
        }
    }
    if (c->s->bias_f) {
        CHECK(info.bias && lwo_tensor_numel(info.bias) == N, "%s -> %s %s: bias attached", c->s->name, lwo_format_name(c->fmt), where);
        if (info.bias && lwo_tensor_numel(info.bias) == N) {
            float *b = (float *)malloc(N * 4);
            lwo_tensor_download(ctx, info.bias, b, N * 4);
            CHECK(memcmp(b, c->s->bias_f, N * 4) == 0, "%s -> %s %s: bias differs", c->s->name, lwo_format_name(c->fmt), where);
            free(b);
        }
    } else {
        CHECK(info.bias == NULL, "%s -> %s %s: no bias in the file, none attached", c->s->name, lwo_format_name(c->fmt), where);
    }
    if (c->smooth) {
        CHECK(info.smooth && lwo_tensor_numel(info.smooth) == K, "%s -> %s %s: smooth attached", c->s->name, lwo_format_name(c->fmt), where);
        if (info.smooth && lwo_tensor_numel(info.smooth) == K) {
            float *sm = (float *)malloc(K * 4);
            lwo_tensor_download(ctx, info.smooth, sm, K * 4);
            CHECK(memcmp(sm, c->smooth, K * 4) == 0, "%s -> %s %s: smooth differs", c->s->name, lwo_format_name(c->fmt), where);
            free(sm);
        }
    } else {
        CHECK(info.smooth == NULL, "%s -> %s %s: no smooth expected", c->s->name, lwo_format_name(c->fmt), where);
    }
    CHECK(lwo_weight_release(ctx, NULL, w) == LWO_SUCCESS, "release: %s", lwo_last_error(ctx));
}

/* Where the weight's host bytes must be, and the check that they are. */
static int expect_zero_copy(const tcase *c, lwo_placement pl) { return c->as_is && c->s->K % 64 == 0 && pl != LWO_PLACE_RESIDENT; }
static void check_home(lwo_context *ctx, lwo_safetensors *f, const lwo_weight *w, const tcase *c, lwo_placement pl, const char *where) {
    lwo_weight_info info;
    const lwo_safetensors_tensor *t = lwo_safetensors_find(f, c->s->wname);
    memset(&info, 0, sizeof info);
    CHECK(lwo_weight_get_info(ctx, w, &info) == LWO_SUCCESS, "info: %s", lwo_last_error(ctx));
    if (expect_zero_copy(c, pl))
        CHECK(info.host_home == LWO_HOME_REGISTERED && t && info.host_data == t->data, "%s -> %s %s: zero copy expected (home %d, host %p, file %p)",
              c->s->name, lwo_format_name(c->fmt), where, (int)info.host_home, info.host_data, t ? t->data : NULL);
    else if (pl == LWO_PLACE_RESIDENT)
        CHECK(info.host_home == LWO_HOME_NONE && info.host_data == NULL, "%s -> %s %s: resident, no host home (home %d)", c->s->name, lwo_format_name(c->fmt),
              where, (int)info.host_home);
    else
        CHECK(info.host_home == LWO_HOME_PINNED && info.host_data && info.host_data != (const void *)(t ? t->data : NULL),
              "%s -> %s %s: a pinned copy expected (home %d)", c->s->name, lwo_format_name(c->fmt), where, (int)info.host_home);
}

static lwo_tensor *tensor2(lwo_context *ctx, lwo_dtype dt, uint64_t a, uint64_t b) {
    uint64_t sh[2];
    lwo_tensor *t = NULL;
    sh[0] = a; sh[1] = b;
    if (lwo_tensor_create(ctx, dt, 2, sh, &t) != LWO_SUCCESS) { CHECK(0, "tensor: %s", lwo_last_error(ctx)); return NULL; }
    return t;
}

static size_t count_regs(lwo_context *ctx, size_t *refs) {
    size_t n = 0;
    lwo__host_reg *r;
    *refs = 0;
    for (r = ctx->host_regs; r; r = r->next) { n++; *refs += r->refs; }
    return n;
}

/* ---- resident: every case in a roomy context ---- */
static void run_resident(lwo_safetensors **files) {
    lwo_desc d;
    lwo_context *ctx = NULL;
    int i;
    memset(&d, 0, sizeof d);
    d.vram_budget = 1ull << 30;
    d.log = on_log;
    if (lwo_create(&d, &ctx) != LWO_SUCCESS) { CHECK(0, "create: %s", lwo_last_error(ctx)); lwo_destroy(ctx); return; }
    for (i = 0; i < ncases; i++) {
        tcase *c = &cases[i];
        lwo_weight *w = NULL;
        lwo_tensor *x, *y;
        lwo_result r = lwo_safetensors_load_weight(ctx, files[c->s->file], c->s->wname, c->fmt, LWO_PLACE_RESIDENT, &w);
        CHECK(r == LWO_SUCCESS && w, "load %s as %s resident: %s", c->s->wname, lwo_format_name(c->fmt), lwo_last_error(ctx));
        if (r) continue;
        check_home(ctx, files[c->s->file], w, c, LWO_PLACE_RESIDENT, "resident");
        check_stored(ctx, w, c, "resident");
        x = tensor2(ctx, c->xt, M, c->s->K);
        y = tensor2(ctx, LWO_DTYPE_F32, M, c->s->N);
        if (x && y) {
            lwo_tensor_upload(ctx, x, c->x, M * c->s->K * 2);
            lwo_tensor_fill_bytes(ctx, NULL, y, 0xff);
            r = check_linear(ctx, x, w, y);
            CHECK(r == LWO_SUCCESS, "linear %s as %s: %s", c->s->wname, lwo_format_name(c->fmt), lwo_last_error(ctx));
            if (!r && lwo_tensor_download(ctx, y, c->yres, M * c->s->N * 4) == LWO_SUCCESS) {
                c->have_yres = 1;
                check_y(c, c->yres, "resident", 1);
            }
        }
        if (x) lwo_tensor_destroy(ctx, x);
        if (y) lwo_tensor_destroy(ctx, y);
        lwo_weight_destroy(ctx, w);
    }
    {   /* policies pick the format; KEEP keeps the file's, zero copy included */
        static const lwo_storage_rule rules[3] = { { "bf_a.weight", LWO_FORMAT_INT8 }, { "e4_*", LWO_FORMAT_KEEP }, { "f32_b.*", LWO_FORMAT_F32 } };
        lwo_storage_policy pol;
        lwo_weight *w = NULL;
        lwo_weight_info info;
        memset(&pol, 0, sizeof pol);
        pol.rules = rules; pol.rule_count = 3; pol.default_format = LWO_FORMAT_KEEP;
        CHECK(lwo_safetensors_load_weight_policy(ctx, files[0], "bf_a.weight", &pol, LWO_PLACE_STREAMED, &w) == LWO_SUCCESS &&
              lwo_weight_get_info(ctx, w, &info) == LWO_SUCCESS && info.format == LWO_FORMAT_INT8 && info.host_home == LWO_HOME_PINNED,
              "policy: bf_a -> int8 (pinned copy): %s", lwo_last_error(ctx));
        lwo_weight_destroy(ctx, w); w = NULL;
        CHECK(lwo_safetensors_load_weight_policy(ctx, files[1], "e4_a.weight", &pol, LWO_PLACE_STREAMED, &w) == LWO_SUCCESS &&
              lwo_weight_get_info(ctx, w, &info) == LWO_SUCCESS && info.format == LWO_FORMAT_FP8_E4M3 && info.host_home == LWO_HOME_REGISTERED,
              "policy: e4_a kept as fp8 e4m3, zero copy: %s", lwo_last_error(ctx));
        lwo_weight_destroy(ctx, w); w = NULL;
        CHECK(lwo_safetensors_load_weight_policy(ctx, files[0], "f32_a.weight", &pol, LWO_PLACE_AUTO, &w) == LWO_SUCCESS &&
              lwo_weight_get_info(ctx, w, &info) == LWO_SUCCESS && info.format == LWO_FORMAT_BF16 && info.host_home == LWO_HOME_PINNED,
              "policy: f32 kept -> bf16: %s", lwo_last_error(ctx));
        lwo_weight_destroy(ctx, w); w = NULL;
        CHECK(lwo_safetensors_load_weight_policy(ctx, files[3], "q_a.weight", NULL, LWO_PLACE_AUTO, &w) == LWO_SUCCESS &&
              lwo_weight_get_info(ctx, w, &info) == LWO_SUCCESS && info.format == LWO_FORMAT_INT8 && info.host_home == LWO_HOME_REGISTERED && info.smooth,
              "policy NULL: lwo int8 kept, zero copy, smooth: %s", lwo_last_error(ctx));
        lwo_weight_destroy(ctx, w); w = (lwo_weight *)1;
        CHECK(lwo_safetensors_load_weight_policy(ctx, files[0], "f32_b.weight", &pol, LWO_PLACE_AUTO, &w) == LWO_ERROR_UNSUPPORTED && w == NULL &&
              strstr(lwo_last_error(ctx), "f32_b.weight") != NULL, "policy f32 refused: %s", lwo_last_error(ctx));
    }
    {   /* errors name the tensor and leave nothing behind */
        lwo_memory_stats m0, m1;
        lwo_weight *w = (lwo_weight *)1;
        uint64_t pinned0 = ctx->pinned_bytes;
        size_t refs;
        m0 = check_memory_stats(ctx);
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "nope.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &w) == LWO_ERROR_NOT_FOUND && w == NULL &&
              strstr(lwo_last_error(ctx), "nope.weight"), "missing: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "i8plain.weight", LWO_FORMAT_INT8, LWO_PLACE_AUTO, &w) == LWO_ERROR_UNSUPPORTED &&
              strstr(lwo_last_error(ctx), "i8plain.weight"), "plain i8: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "vec.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &w) == LWO_ERROR_INVALID_ARGUMENT &&
              strstr(lwo_last_error(ctx), "vec.weight"), "1-D: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "bbad.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &w) == LWO_ERROR_BAD_FILE &&
              strstr(lwo_last_error(ctx), "bbad.bias"), "bias shape: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "bf_a.weight", (lwo_format)99, LWO_PLACE_AUTO, &w) == LWO_ERROR_INVALID_ARGUMENT,
              "bad format: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, files[0], "bf_a.weight", LWO_FORMAT_BF16, (lwo_placement)9, &w) == LWO_ERROR_INVALID_ARGUMENT,
              "bad placement: %s", lwo_last_error(ctx));
        CHECK(lwo_safetensors_load_weight(ctx, NULL, "bf_a.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &w) == LWO_ERROR_INVALID_ARGUMENT &&
              strstr(lwo_last_error(ctx), "'f'"), "NULL file: %s", lwo_last_error(ctx));
        if (ctx->info.cc_major * 10 + ctx->info.cc_minor < 89)
            CHECK(lwo_safetensors_load_weight(ctx, files[1], "e4_a.weight", LWO_FORMAT_FP8_E4M3_W8A8, LWO_PLACE_AUTO, &w) == LWO_ERROR_UNSUPPORTED &&
                  strstr(lwo_last_error(ctx), "e4_a.weight"), "W8A8 fp8 before sm_89: %s", lwo_last_error(ctx));
        m1 = check_memory_stats(ctx);
        CHECK(w == NULL && m1.in_use == m0.in_use && ctx->weights == NULL && ctx->pinned_bytes == pinned0 && count_regs(ctx, &refs) == 0,
              "failed loads leave nothing (arena %llu -> %llu bytes, %zu registrations)", (unsigned long long)m0.in_use, (unsigned long long)m1.in_use,
              count_regs(ctx, &refs));
    }
    lwo_destroy(ctx);
    {   /* a weight stored as the file holds it streams from the mapping itself: making it takes no
           VRAM, so a 1 MiB budget holds it, and destroying it releases the registration. Resident,
           it needs its bytes (and lwo_weight_create's temporaries) in the arena: out of budget,
           the tensor named, nothing left registered or pinned */
        lwo_context *tiny = NULL;
        lwo_weight *w = (lwo_weight *)1;
        size_t refs;
        memset(&d, 0, sizeof d);
        d.vram_budget = 1ull << 20;
        d.log = on_log;
        if (lwo_create(&d, &tiny) == LWO_SUCCESS) {
            lwo_memory_stats m0, m1;
            lwo_result r;
            m0 = check_memory_stats(tiny);
            r = lwo_safetensors_load_weight(tiny, files[0], "bf_a.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &w);
            m1 = check_memory_stats(tiny);
            CHECK(r == LWO_SUCCESS && w && count_regs(tiny, &refs) == 1 && m1.in_use == m0.in_use,
                  "a zero-copy weight under 1 MiB: %s, %zu registrations, arena %llu -> %llu bytes", lwo_last_error(tiny), count_regs(tiny, &refs),
                  (unsigned long long)m0.in_use, (unsigned long long)m1.in_use);
            if (r == LWO_SUCCESS) lwo_weight_destroy(tiny, w);
            CHECK(count_regs(tiny, &refs) == 0 && tiny->weights == NULL, "destroyed, it leaves no registration");
            w = (lwo_weight *)1;
            r = lwo_safetensors_load_weight(tiny, files[0], "bf_a.weight", LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, &w);
            CHECK(r == LWO_ERROR_OUT_OF_BUDGET && w == NULL && strstr(lwo_last_error(tiny), "bf_a.weight") != NULL,
                  "out of budget names the tensor: %s (%s)", lwo_result_string(r), lwo_last_error(tiny));
            CHECK(count_regs(tiny, &refs) == 0 && tiny->weights == NULL && tiny->pinned_bytes == 0, "nothing left registered or pinned");
        } else CHECK(0, "tiny create: %s", lwo_last_error(tiny));
        lwo_destroy(tiny);
    }
}

/* ---- streamed: every case AUTO and STREAMED at once, under a budget that holds about a third ---- */
static void run_streamed(lwo_safetensors **files, int passes) {
    enum { WS = 2 << 20 };
    static const lwo_placement pls[2] = { LWO_PLACE_AUTO, LWO_PLACE_STREAMED };
    lwo_weight *w[128];
    lwo_tensor *x[64], *y[128];
    float *got = NULL;
    uint64_t fixed = 0, weights = 0, budget, maxmn = 0;
    lwo_desc d;
    lwo_context *ctx = NULL;
    lwo_stats st;
    int i, p, pass, nw = 2 * ncases, ok = 1, bad_bits = 0, zc = 0, zc_files[4] = { 0, 0, 0, 0 }, nzc_files = 0;
    size_t refs, nregs;
    memset(w, 0, sizeof w); memset(x, 0, sizeof x); memset(y, 0, sizeof y);
    for (i = 0; i < ncases; i++) {
        tcase *c = &cases[i];
        uint64_t N = c->s->N, item = r256(N * c->kp * lwo_dtype_size(c->wdt)) + (c->s->bias_f ? r256(N * 4) : 0) + (c->nscales ? r256(c->nscales * 4) : 0);
        fixed += r256(M * c->s->K * 2) + 2 * r256(M * N * 4) + (c->smooth ? 2 * r256(c->s->K * 4) : 0);
        weights += 2 * item;
        if (M * N > maxmn) maxmn = M * N;
    }
    budget = (fixed + (8u << 20) + weights * 35 / 100 + (1u << 20) - 1) / (1u << 20) * (1u << 20);
    memset(&d, 0, sizeof d);
    d.vram_budget = budget;
    d.log = on_log;
    if (lwo_create(&d, &ctx) != LWO_SUCCESS) { CHECK(0, "create: %s", lwo_last_error(ctx)); lwo_destroy(ctx); return; }
    for (i = 0; i < ncases && ok; i++) {
        tcase *c = &cases[i];
        if (!(x[i] = tensor2(ctx, c->xt, M, c->s->K)) || !(y[2 * i] = tensor2(ctx, LWO_DTYPE_F32, M, c->s->N)) ||
            !(y[2 * i + 1] = tensor2(ctx, LWO_DTYPE_F32, M, c->s->N))) ok = 0;
        else lwo_tensor_upload(ctx, x[i], c->x, M * c->s->K * 2);
    }
    for (i = 0; i < nw && ok; i++) {
        tcase *c = &cases[i / 2];
        lwo_result r = lwo_safetensors_load_weight(ctx, files[c->s->file], c->s->wname, c->fmt, pls[i & 1], &w[i]);
        CHECK(r == LWO_SUCCESS, "load %s as %s %s: %s", c->s->wname, lwo_format_name(c->fmt), (i & 1) ? "streamed" : "auto", lwo_last_error(ctx));
        if (r) { ok = 0; break; }
        check_home(ctx, files[c->s->file], w[i], c, pls[i & 1], (i & 1) ? "streamed" : "auto");
        if (expect_zero_copy(c, pls[i & 1])) { zc++; if (!zc_files[c->s->file]++) nzc_files++; }
    }
    nregs = count_regs(ctx, &refs);
    CHECK(!ok || (nregs == (size_t)nzc_files && refs == (size_t)zc), "one registration per file with zero-copy weights (%zu of %d), one count per weight (%zu of %d)",
          nregs, nzc_files, refs, zc);
    if (ok) {
        lwo_streaming_desc sd;
        lwo_result r;
        memset(&sd, 0, sizeof sd);
        sd.max_rows = M;
        sd.free_bytes = WS;
        r = lwo_streaming_plan(ctx, &sd);
        CHECK(r == LWO_SUCCESS, "plan under %llu bytes: %s", (unsigned long long)budget, lwo_last_error(ctx));
        if (r) ok = 0;
    }
    got = (float *)malloc(maxmn * 4);
    for (pass = 0; pass < passes && ok; pass++) {
        lwo_result r = LWO_SUCCESS;
        for (i = 0; i < nw; i++) lwo_tensor_fill_bytes(ctx, NULL, y[i], 0xff);
        r = lwo_pass_begin(ctx);
        for (i = 0; i < nw && !r; i++) r = check_linear(ctx, x[i / 2], w[i], y[i]);
        if (!r) r = lwo_pass_end(ctx);
        CHECK(r == LWO_SUCCESS, "streamed pass %d: %s", pass, lwo_last_error(ctx));
        if (r) { ok = 0; break; }
        for (i = 0; i < nw; i++) {
            tcase *c = &cases[i / 2];
            const char *where = (i & 1) ? "streamed" : "auto";
            if (lwo_tensor_download(ctx, y[i], got, M * c->s->N * 4) != LWO_SUCCESS) { CHECK(0, "download: %s", lwo_last_error(ctx)); continue; }
            if (pass == 0) check_y(c, got, where, 0);
            if (c->have_yres && memcmp(got, c->yres, M * c->s->N * 4) != 0) {
                bad_bits++;
                printf("  %s -> %s %s pass %d differs from the resident run\n", c->s->name, lwo_format_name(c->fmt), where, pass);
            }
        }
    }
    CHECK(bad_bits == 0, "streamed outputs equal the resident ones bit for bit (%d differ)", bad_bits);
    if (ok) {
        memset(&st, 0, sizeof st);
        lwo_context_get_stats(ctx, &st);
        printf("  streamed: budget %.1f MiB for %.1f MiB of weights: resident %.1f MiB, ring %.1f MiB, %.1f MiB moved in %d passes; %d zero-copy weights in %d files\n",
               budget / 1048576.0, weights / 1048576.0, st.resident_bytes / 1048576.0, st.ring_bytes / 1048576.0, st.bytes_streamed / 1048576.0, passes, zc, nzc_files);
        CHECK(st.bytes_streamed > 0 && st.ring_bytes > 0 && st.resident_bytes < weights, "weights streamed (%llu bytes)", (unsigned long long)st.bytes_streamed);
        for (i = 0; i < nw; i++) check_stored(ctx, w[i], &cases[i / 2], (i & 1) ? "streamed" : "auto");
    }
    for (i = 0; i < nw; i++) if (w[i]) lwo_weight_destroy(ctx, w[i]);
    CHECK(count_regs(ctx, &refs) == 0, "the registrations went with the last weight");
    CHECK(ctx->pinned_bytes == 0, "the pinned copies went with their weights (%llu bytes left)", (unsigned long long)ctx->pinned_bytes);
    for (p = 0; p < 64; p++) if (x[p]) lwo_tensor_destroy(ctx, x[p]);
    for (p = 0; p < 128; p++) if (y[p]) lwo_tensor_destroy(ctx, y[p]);
    free(got);
    lwo_destroy(ctx);
}

int main(void) {
    lwo_safetensors *files[4] = { NULL, NULL, NULL, NULL };
    lwo_desc d;
    lwo_context *probe = NULL;
    lwo_context_info ci;
    int quick = getenv("LWO_TEST_QUICK") != NULL, i, j, f, cc, opened = 1;
    const char *t = getenv("TMPDIR");
    check_seed("test_gpu_safetensors");
    memset(&d, 0, sizeof d);
    d.vram_budget = 64ull << 20;
    if (lwo_create(&d, &probe) != LWO_SUCCESS) { printf("lwo_create: %s\n", lwo_last_error(probe)); CHECK(0, "no context"); lwo_destroy(probe); return CHECK_SUMMARY(); }
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(probe, &ci);
    cc = ci.device.cc_major * 10 + ci.device.cc_minor;
    printf("%s (%s)\n", ci.device.name, ci.device.arch);
    lwo_destroy(probe);
    snprintf(tmpdir, sizeof tmpdir, "%s/lwo-gpu-st-%ld", t ? t : "/tmp", (long)getpid());
    if (mkdir(tmpdir, 0700) != 0) { CHECK(0, "cannot create %s", tmpdir); return CHECK_SUMMARY(); }
    for (i = 0; i < NSRC; i++) {
        const src_spec *sp = &specs[i];
        memset(&srcs[i], 0, sizeof srcs[i]);
        srcs[i].name = sp->name; srcs[i].file = sp->file; srcs[i].dt = sp->dt; srcs[i].N = sp->N; srcs[i].K = sp->K;
        srcs[i].bias_dt = sp->bias_dt; srcs[i].smooth = sp->smooth; srcs[i].nfmts = sp->nfmts;
        memcpy(srcs[i].fmts, sp->fmts, sizeof sp->fmts);
        make_src(&srcs[i]);
        for (j = 0; j < srcs[i].nfmts && (!quick || j == 0); j++) {
            if (srcs[i].fmts[j] == LWO_FORMAT_FP8_E4M3_W8A8 && cc < 89) continue;
            cases[ncases].s = &srcs[i];
            cases[ncases].fmt = srcs[i].fmts[j];
            make_expect(&cases[ncases]);
            ncases++;
        }
    }
    printf("  %d cases (tensor x format) from %d tensors in 4 checkpoints\n", ncases, NSRC);
    if (write_files()) {
        for (f = 0; f < 4; f++) {
            lwo_safetensors_desc sd;
            lwo_result r;
            memset(&sd, 0, sizeof sd);
            sd.path = paths[f];
            r = lwo_safetensors_create(&sd, &files[f]);
            CHECK(r == LWO_SUCCESS, "open %s: %s", paths[f], lwo_safetensors_last_error(files[f]));
            if (r) opened = 0;
        }
        if (opened) {
            run_resident(files);
            run_streamed(files, quick ? 1 : 2);
        }
    }
    for (f = 0; f < 4; f++) { lwo_safetensors_destroy(files[f]); unlink(paths[f]); }
    rmdir(tmpdir);
    printf("  %d warnings logged\n", warnings);
    for (i = 0; i < ncases; i++) { free(cases[i].x); free(cases[i].wq); free(cases[i].scales); free(cases[i].yref); free(cases[i].ytrue); free(cases[i].yres); }
    for (i = 0; i < NSRC; i++) { free(srcs[i].w); free(srcs[i].row_scales); free(srcs[i].sm); free(srcs[i].bias); free(srcs[i].weff); free(srcs[i].bias_f); }
    return CHECK_SUMMARY();
}

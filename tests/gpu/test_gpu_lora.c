/* test_gpu_lora.c - LoRA on every storage format, resident and streamed (GPU).
   Per format: a stack of three linears (one with K = 196, where x cannot feed the tensor cores
   and the side path takes the plain GEMM; y in f32, bf16 and f16) gets two LoRAs per weight (one
   given in x's dtype, one in f32; ranks 5 and 16; alpha = rank and alpha = 8; strengths 0.8 and
   -0.5). Checked:
   - the outputs against the CPU reference of the side path (check_ref_lora) applied to the GPU's own
     output without LoRAs, within a tolerance set by the size of the LoRA terms, and the LoRAs
     changing y by far more than that tolerance;
   - every strength 0 gives the outputs without LoRAs bit for bit; a second call (the W8A8 weights'
     per-shape graphs replay) the same bits as the first;
   - the same weights streamed (placement STREAMED, planned after the attach) equal the resident
     outputs bit for bit, in a pass and in a whole-pass graph; after lwo_lora_set_strength the
     graph's replay equals a new eager pass bit for bit and the reference at the new strengths;
     after a detach lwo_graph_launch refuses the old graph; all detached equals no LoRA bit for bit;
   - bad calls: a compute dtype a 16-bit weight cannot take, rank 0, LoRAs computing in f16 under
     bf16 x, a merge into a streamed weight.
   For the 16-bit formats lwo_lora_merge against its reference (the stored W, downloaded). For bf16,
   a call of 8300 rows (the side path in two chunks of the scratch), and lwo_lora_load from files
   written here: kohya names under a prefix and underscore rule equal lwo_lora_attach bit for bit; a
   pair that matches no weight, a shape that fits no weight and a missing alpha each refuse with
   nothing left attached. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#define LWO_IMPLEMENTATION_DONE
#include "../check.h"

#define LAYERS 3
#define NL 2
#define MROWS 256
static const uint64_t shape_n[LAYERS] = { 640, 384, 1024 };
static const uint64_t shape_k[LAYERS] = { 256, 196, 320 };
static const lwo_dtype y_dt[LAYERS] = { LWO_DTYPE_F32, LWO_DTYPE_BF16, LWO_DTYPE_F16 };
static const uint64_t ranks[NL] = { 5, 16 };
static const float alphas[NL] = { 0.0f, 8.0f };
static float strengths[NL];

static float *wf[LAYERS];                  /* the weights, f32 [N, K] */
static uint16_t *bias[LAYERS];             /* bf16 [N] */
static uint16_t *xh[LAYERS];               /* x [MROWS, K] in x's dtype */
static float *lf[LAYERS][NL][2];           /* each LoRA's down and up as generated (f32) */
static uint16_t *ld[LAYERS][NL][2];        /* ... and in x's dtype: what lwo stores and the reference reads */

typedef struct stack {
    lwo_context *ctx;
    lwo_weight *w[LAYERS];
    lwo_tensor *x[LAYERS], *y[LAYERS];
    lwo_lora *lora[LAYERS][NL];
} stack;

static void quiet(void *u, lwo_log_level l, const char *m) { (void)u; if (l <= LWO_LOG_ERROR) printf("  [lwo] %s\n", m); }
static lwo_dtype xdt_of(lwo_format f) { return f == LWO_FORMAT_F16 ? LWO_DTYPE_F16 : LWO_DTYPE_BF16; }
static uint16_t to16(lwo_dtype dt, float v) { return dt == LWO_DTYPE_F16 ? lwo_ref_f32_to_f16(v) : lwo_ref_f32_to_bf16(v); }
static uint64_t ybytes(int l, uint64_t M) { return M * shape_n[l] * lwo_dtype_size(y_dt[l]); }
static uint64_t all_bytes(uint64_t M) { uint64_t b = 0; int l; for (l = 0; l < LAYERS; l++) b += ybytes(l, M); return b; }

static void make_data(lwo_format f) {
    lwo_dtype dt = xdt_of(f);
    int l, i, k;
    uint64_t j;
    for (l = 0; l < LAYERS; l++) {
        uint64_t N = shape_n[l], K = shape_k[l];
        free(wf[l]); free(bias[l]); free(xh[l]);
        wf[l] = (float *)malloc(N * K * 4); bias[l] = (uint16_t *)malloc(N * 2); xh[l] = (uint16_t *)malloc(MROWS * K * 2);
        for (j = 0; j < N * K; j++) wf[l][j] = (float)(check_rand_normal() * 0.05);
        for (j = 0; j < N; j++) bias[l][j] = lwo_ref_f32_to_bf16((float)(check_rand_normal() * 0.1));
        for (j = 0; j < MROWS * K; j++) xh[l][j] = to16(dt, (float)check_rand_normal());
        for (i = 0; i < NL; i++)
            for (k = 0; k < 2; k++) {
                uint64_t n = k == 0 ? ranks[i] * K : N * ranks[i];
                free(lf[l][i][k]); free(ld[l][i][k]);
                lf[l][i][k] = (float *)malloc(n * 4); ld[l][i][k] = (uint16_t *)malloc(n * 2);
                for (j = 0; j < n; j++) {
                    lf[l][i][k][j] = (float)(check_rand_normal() * 0.1);
                    ld[l][i][k][j] = to16(dt, lf[l][i][k][j]);
                }
            }
    }
}

static lwo_result stack_open(stack *s, lwo_format f, uint64_t budget, lwo_placement pl) {
    lwo_desc d;
    lwo_result r;
    int l;
    memset(s, 0, sizeof *s);
    memset(&d, 0, sizeof d);
    d.vram_budget = budget;
    d.log = quiet;
    if ((r = lwo_create(&d, &s->ctx)) != 0) return r;
    for (l = 0; l < LAYERS; l++) {
        uint64_t xs[2], ys[2];
        lwo_weight_desc wd;
        xs[0] = MROWS; xs[1] = shape_k[l]; ys[0] = MROWS; ys[1] = shape_n[l];
        if ((r = lwo_tensor_create(s->ctx, xdt_of(f), 2, xs, &s->x[l])) != 0 || (r = lwo_tensor_create(s->ctx, y_dt[l], 2, ys, &s->y[l])) != 0 ||
            (r = lwo_tensor_upload(s->ctx, s->x[l], xh[l], lwo_tensor_bytes(s->x[l]))) != 0)
            return r;
        memset(&wd, 0, sizeof wd);
        wd.rows = shape_n[l]; wd.cols = shape_k[l]; wd.data = wf[l]; wd.data_dtype = LWO_DTYPE_F32; wd.format = f;
        wd.bias = bias[l]; wd.bias_dtype = LWO_DTYPE_BF16; wd.placement = pl;
        if ((r = lwo_weight_create(s->ctx, &wd, &s->w[l])) != 0) return r;
    }
    return LWO_SUCCESS;
}

static lwo_lora_desc lora_desc(lwo_format f, int l, int i) {
    lwo_lora_desc d;
    memset(&d, 0, sizeof d);
    d.rank = ranks[i]; d.alpha = alphas[i]; d.strength = strengths[i];
    if (i == 0) { d.down = ld[l][i][0]; d.up = ld[l][i][1]; d.dtype = xdt_of(f); }   /* x's dtype: kept as it is */
    else { d.down = lf[l][i][0]; d.up = lf[l][i][1]; d.dtype = LWO_DTYPE_F32; }      /* converted at attach */
    return d;
}

static lwo_result attach_all(stack *s, lwo_format f) {
    lwo_result r;
    int l, i;
    for (l = 0; l < LAYERS; l++)
        for (i = 0; i < NL; i++) {
            lwo_lora_desc d = lora_desc(f, l, i);
            if ((r = lwo_lora_attach(s->ctx, s->w[l], &d, &s->lora[l][i])) != 0) return r;
        }
    return LWO_SUCCESS;
}

static char run_error[4096];   /* the failure of the last run() */

/* The stack's lwo_linear calls with x of M rows (views), in a pass when `pass`; y into out (all
   layers' outputs one after another, as stored). */
static lwo_result run(stack *s, uint64_t M, int pass, unsigned char *out) {
    lwo_tensor *xv[LAYERS], *yv[LAYERS];
    lwo_result r = LWO_SUCCESS;
    int l;
    memset(xv, 0, sizeof xv); memset(yv, 0, sizeof yv);
    for (l = 0; l < LAYERS && !r; l++) {
        uint64_t xs[2], ys[2];
        xs[0] = M; xs[1] = shape_k[l]; ys[0] = M; ys[1] = shape_n[l];
        if ((r = lwo_tensor_wrap(s->ctx, lwo_tensor_device_ptr(s->x[l]), lwo_tensor_dtype(s->x[l]), 2, xs, &xv[l])) == 0 &&
            (r = lwo_tensor_wrap(s->ctx, lwo_tensor_device_ptr(s->y[l]), y_dt[l], 2, ys, &yv[l])) == 0)
            r = lwo_tensor_fill_bytes(s->ctx, NULL, s->y[l], 0xff);   /* NaN: every output must be written */
    }
    if (!r && pass) r = lwo_pass_begin(s->ctx);
    for (l = 0; l < LAYERS && !r; l++) {
        lwo_linear_desc d;
        memset(&d, 0, sizeof d);
        d.x = xv[l]; d.w = s->w[l]; d.y = yv[l];
        r = lwo_linear(s->ctx, &d);
    }
    if (r) snprintf(run_error, sizeof run_error, "%s", lwo_last_error(s->ctx));   /* lwo_pass_abort starts a new message */
    if (pass) { if (r) lwo_pass_abort(s->ctx); else r = lwo_pass_end(s->ctx); }
    for (l = 0; l < LAYERS && !r && out; l++) { r = lwo_tensor_download(s->ctx, yv[l], out, ybytes(l, M)); out += ybytes(l, M); }
    for (l = 0; l < LAYERS; l++) { lwo_tensor_destroy(s->ctx, xv[l]); lwo_tensor_destroy(s->ctx, yv[l]); }
    return r;
}

static lwo_result download_all(stack *s, uint64_t M, unsigned char *out) {
    lwo_result r = LWO_SUCCESS;
    int l;
    for (l = 0; l < LAYERS && !r; l++) { r = lwo_tensor_download(s->ctx, s->y[l], out, ybytes(l, M)); out += ybytes(l, M); }
    return r;
}

/* The reference from the outputs without LoRAs (base) at strengths s[], compared with got:
   |got - ref| <= 2^-7 (mag + |ref|) + 1e-5 (one rounding of t or of y apart). Returns the worst
   ratio of the error to that bound; *moved gets the largest |got - base|. */
static double compare_ref(lwo_format f, uint64_t M, const unsigned char *base, const unsigned char *got, const float *s, double *moved) {
    lwo_dtype dt = xdt_of(f);
    double worst = 0;
    int l, i;
    *moved = 0;
    for (l = 0; l < LAYERS; l++) {
        uint64_t N = shape_n[l], K = shape_k[l], j, n = M * N;
        unsigned char *ref = (unsigned char *)malloc(ybytes(l, M));
        double *mag = (double *)malloc(n * sizeof(double));
        const void *downs[NL], *ups[NL];
        float sc[NL];
        memcpy(ref, base, ybytes(l, M));
        for (i = 0; i < NL; i++) {
            downs[i] = ld[l][i][0]; ups[i] = ld[l][i][1];
            sc[i] = s[i] * ((alphas[i] > 0 ? alphas[i] : (float)ranks[i]) / (float)ranks[i]);
        }
        check_ref_lora(xh[l], dt, M, K, N, NL, downs, ups, ranks, sc, ref, y_dt[l], mag);
        for (j = 0; j < n; j++) {
            double g = lwo_ref_load(got, y_dt[l], j), e = lwo_ref_load(ref, y_dt[l], j), b = lwo_ref_load(base, y_dt[l], j);
            double tol = (mag[j] + fabs(e)) / 128.0 + 1e-5, err = g != g ? 1e30 : fabs(g - e);
            if (err / tol > worst) worst = err / tol;
            if (fabs(g - b) > *moved) *moved = fabs(g - b);
        }
        free(ref); free(mag);
        base += ybytes(l, M); got += ybytes(l, M);
    }
    return worst;
}

static lwo_result set_strengths(stack *s, const float *v) {
    lwo_result r = LWO_SUCCESS;
    int l, i;
    for (l = 0; l < LAYERS && !r; l++)
        for (i = 0; i < NL && !r; i++) r = lwo_lora_set_strength(s->ctx, s->lora[l][i], v[i]);
    return r;
}

static void test_merge(stack *s, lwo_format f) {
    lwo_dtype dt = xdt_of(f);
    lwo_weight *w = NULL;
    lwo_weight_desc wd;
    lwo_weight_info wi;
    lwo_lora_desc d = lora_desc(f, 0, 0);
    uint64_t N = shape_n[0], K = shape_k[0], n, k, r;
    uint16_t *before, *after;
    int bad = 0;
    double sc = (double)strengths[0];
    memset(&wd, 0, sizeof wd);
    wd.rows = N; wd.cols = K; wd.data = wf[0]; wd.data_dtype = LWO_DTYPE_F32; wd.format = f;
    if (lwo_weight_create(s->ctx, &wd, &w) != LWO_SUCCESS) { CHECK(0, "merge weight: %s", lwo_last_error(s->ctx)); return; }
    lwo_weight_get_info(s->ctx, w, &wi);
    before = (uint16_t *)malloc(N * wi.kpad * 2); after = (uint16_t *)malloc(N * wi.kpad * 2);
    lwo_tensor_download(s->ctx, wi.data, before, N * wi.kpad * 2);
    CHECK(lwo_lora_merge(s->ctx, w, &d) == LWO_SUCCESS, "%s: merge: %s", lwo_format_name(f), lwo_last_error(s->ctx));
    lwo_tensor_download(s->ctx, wi.data, after, N * wi.kpad * 2);
    for (n = 0; n < N; n++)
        for (k = 0; k < wi.kpad; k++) {
            double acc = 0, mag = 0, e, g;
            for (r = 0; r < ranks[0] && k < K; r++) {
                double t = (double)lwo_ref_load(ld[0][0][1], dt, n * ranks[0] + r) * lwo_ref_load(ld[0][0][0], dt, r * K + k);
                acc += t; mag += fabs(t);
            }
            e = (float)acc * (float)sc == 0.0f ? lwo_ref_load(before, dt, n * wi.kpad + k)
                                               : lwo_ref_load(before, dt, n * wi.kpad + k) + (float)((float)acc * (float)sc);
            g = lwo_ref_load(after, dt, n * wi.kpad + k);
            if (!(fabs(g - e) <= (fabs(e) + mag * fabs(sc)) / 128.0 + 1e-6)) bad++;
            if (k >= K && after[n * wi.kpad + k] != before[n * wi.kpad + k]) bad++;   /* the padding stays */
        }
    CHECK(bad == 0, "%s: %d merged elements off the reference", lwo_format_name(f), bad);
    CHECK(memcmp(before, after, N * wi.kpad * 2) != 0, "%s: the merge changed nothing", lwo_format_name(f));
    free(before); free(after);
    lwo_weight_destroy(s->ctx, w);
}

/* A 2-D tensor entry whose shape array lives in `shape` (the entry keeps the pointer). */
static lwo_safetensors_write_tensor st2(const char *name, lwo_dtype dt, uint64_t *shape, uint64_t a, uint64_t b, const void *data) {
    shape[0] = a; shape[1] = b;
    return check_st_tensor(name, dt, 2, shape, data);
}

/* lwo_lora_load of a kohya file with LoRA 0 of every layer (plus `extra`: 1 a pair for no weight,
   2 layer 0's pair one column too wide, 3 no alphas), prefix "lora_unet_", dots as '_'. */
static lwo_result load_file(stack *s, lwo_format f, const char *dir, int extra, int allow, float alpha, lwo_lora **loras,
                            lwo_lora_load_desc *out) {
    static char names[LAYERS + 1][3][64];
    static uint64_t shapes[LAYERS + 1][2][2];
    static float alpha_v[LAYERS + 1];
    static const uint64_t s1[1] = { 1 };
    static const char *mnames[LAYERS] = { "blocks.0.lin.weight", "blocks.1.lin.weight", "blocks.2.lin.weight" };
    lwo_safetensors_write_tensor t[(LAYERS + 1) * 3];
    lwo_safetensors *file = NULL;
    char path[1200], err[256];
    size_t n = 0;
    int l, pairs = LAYERS + (extra == 1);
    lwo_result r;
    uint16_t *wide = NULL;
    for (l = 0; l < pairs; l++) {
        int lw = l < LAYERS ? l : 0;
        const void *down = ld[lw][0][0];
        uint64_t cols = shape_k[lw];
        if (extra == 2 && l == 0) {
            uint64_t i;
            wide = (uint16_t *)calloc(ranks[0] * (cols + 1), 2);
            for (i = 0; i < ranks[0] * cols; i++) wide[i] = ld[0][0][0][i];
            down = wide; cols++;
        }
        snprintf(names[l][0], 64, "lora_unet_blocks_%d_lin.lora_down.weight", l < LAYERS ? l : 9);
        snprintf(names[l][1], 64, "lora_unet_blocks_%d_lin.lora_up.weight", l < LAYERS ? l : 9);
        snprintf(names[l][2], 64, "lora_unet_blocks_%d_lin.alpha", l < LAYERS ? l : 9);
        alpha_v[l] = (float)ranks[0];
        t[n++] = st2(names[l][0], xdt_of(f), shapes[l][0], ranks[0], cols, down);
        t[n++] = st2(names[l][1], xdt_of(f), shapes[l][1], shape_n[lw], ranks[0], ld[lw][0][1]);
        if (extra != 3) t[n++] = check_st_tensor(names[l][2], LWO_DTYPE_F32, 0, s1, &alpha_v[l]);
    }
    snprintf(path, sizeof path, "%s/lora%d.safetensors", dir, extra);
    r = check_st_write(path, t, n, NULL, NULL, 0, err, sizeof err);
    free(wide);
    if (r) { CHECK(0, "write %s: %s", path, err); return r; }
    if ((r = check_st_open(path, &file)) != 0) { CHECK(0, "open %s: %s", path, lwo_safetensors_last_error(file)); lwo_safetensors_destroy(file); return r; }
    memset(out, 0, sizeof *out);
    out->file = file; out->weights = s->w; out->names = mnames; out->count = LAYERS;
    out->match.prefix = "lora_unet_"; out->match.underscores = 1;
    out->strength = strengths[0]; out->alpha = alpha; out->allow_unmatched = allow; out->loras = loras;
    r = lwo_lora_load(s->ctx, out);
    lwo_safetensors_destroy(file);   /* the factors were copied at attach */
    return r;
}

static int attached(stack *s) {
    int l, n = 0;
    for (l = 0; l < LAYERS; l++) {
        lwo_weight_info wi;
        lwo_weight_get_info(s->ctx, s->w[l], &wi);
        n += (int)wi.lora_count;
    }
    return n;
}

static void test_load(stack *s, lwo_format f, const unsigned char *want) {
    char dir[1024];
    lwo_lora_load_desc d;
    unsigned char *got = (unsigned char *)malloc(all_bytes(MROWS));
    lwo_lora *loras[LAYERS];
    lwo_result r;
    int l;
    if (!check_tmpdir(dir, sizeof dir, "lwo-gpu-lora")) { CHECK(0, "no tmpdir"); free(got); return; }
    memset(loras, 0, sizeof loras);
    r = load_file(s, f, dir, 0, 0, 0.0f, loras, &d);
    CHECK(r == LWO_SUCCESS && d.matched == LAYERS && attached(s) == LAYERS, "load: %s (matched %zu)", lwo_last_error(s->ctx), d.matched);
    if (!r) {
        r = run(s, MROWS, 0, got);
        CHECK(r == LWO_SUCCESS && memcmp(got, want, all_bytes(MROWS)) == 0, "a loaded LoRA equals the attached one bit for bit (%s)", lwo_last_error(s->ctx));
    }
    /* the handles a load hands out detach what it attached */
    for (l = 0; l < LAYERS; l++) CHECK(loras[l] != NULL && lwo_lora_detach(s->ctx, loras[l]) == LWO_SUCCESS, "detach loras[%d]", l);
    CHECK(attached(s) == 0, "all detached");
    r = load_file(s, f, dir, 1, 0, 0.0f, NULL, &d);
    CHECK(r == LWO_ERROR_NOT_FOUND && strstr(lwo_last_error(s->ctx), "lora_unet_blocks_9_lin") && attached(s) == 0,
          "a pair for no weight: %s, \"%s\", %d attached", lwo_result_string(r), lwo_last_error(s->ctx), attached(s));
    r = load_file(s, f, dir, 1, 1, 0.0f, loras, &d);
    CHECK(r == LWO_SUCCESS && d.unmatched == 1 && d.matched == LAYERS, "allow_unmatched: %s, unmatched %zu", lwo_last_error(s->ctx), d.unmatched);
    for (l = 0; l < LAYERS; l++) if (loras[l]) { lwo_lora_detach(s->ctx, loras[l]); loras[l] = NULL; }
    r = load_file(s, f, dir, 2, 0, 0.0f, NULL, &d);
    CHECK(r == LWO_ERROR_BAD_FILE && strstr(lwo_last_error(s->ctx), "blocks.0.lin.weight") && attached(s) == 0,
          "a shape for no weight: %s, \"%s\"", lwo_result_string(r), lwo_last_error(s->ctx));
    r = load_file(s, f, dir, 3, 0, 0.0f, NULL, &d);
    CHECK(r == LWO_ERROR_BAD_FILE && strstr(lwo_last_error(s->ctx), "alpha") && attached(s) == 0,
          "no alpha: %s, \"%s\"", lwo_result_string(r), lwo_last_error(s->ctx));
    r = load_file(s, f, dir, 3, 0, (float)ranks[0], loras, &d);
    CHECK(r == LWO_SUCCESS && attached(s) == LAYERS, "no alpha but desc.alpha: %s", lwo_last_error(s->ctx));
    if (!r) {
        r = run(s, MROWS, 0, got);
        CHECK(r == LWO_SUCCESS && memcmp(got, want, all_bytes(MROWS)) == 0, "desc.alpha = rank equals alpha = rank in the file");
    }
    for (l = 0; l < LAYERS; l++) if (loras[l]) { lwo_lora_detach(s->ctx, loras[l]); loras[l] = NULL; }
    check_rmtree(dir);
    free(got);
}

/* 8300 rows through layer 0: the side path in chunks of the 8192-row scratch. */
static void test_chunks(stack *s, lwo_format f) {
    enum { BIG = 8300 };
    uint64_t N = shape_n[0], K = shape_k[0], xs[2], ys[2], j;
    lwo_tensor *x = NULL, *y = NULL;
    uint16_t *xb = (uint16_t *)malloc(BIG * K * 2);
    float *base = (float *)malloc(BIG * N * 4), *got = (float *)malloc(BIG * N * 4);
    double moved = 0, worst = 0;
    const void *downs[NL], *ups[NL];
    double *mag = (double *)malloc(BIG * N * sizeof(double));
    float sc[NL];
    lwo_linear_desc d;
    lwo_lora *keep[NL];
    int i, ok = 1;
    for (j = 0; j < BIG * K; j++) xb[j] = to16(xdt_of(f), (float)check_rand_normal());
    xs[0] = BIG; xs[1] = K; ys[0] = BIG; ys[1] = N;
    ok = lwo_tensor_create(s->ctx, xdt_of(f), 2, xs, &x) == 0 && lwo_tensor_create(s->ctx, LWO_DTYPE_F32, 2, ys, &y) == 0 &&
         lwo_tensor_upload(s->ctx, x, xb, BIG * K * 2) == 0;
    memset(&d, 0, sizeof d);
    d.x = x; d.w = s->w[0]; d.y = y;
    for (i = 0; i < NL; i++) keep[i] = s->lora[0][i];
    /* the outputs without LoRAs: both at strength 0 (bit for bit the same, checked elsewhere) */
    for (i = 0; ok && i < NL; i++) ok = lwo_lora_set_strength(s->ctx, keep[i], 0.0f) == 0;
    ok = ok && lwo_linear(s->ctx, &d) == 0 && lwo_tensor_download(s->ctx, y, base, BIG * N * 4) == 0;
    for (i = 0; ok && i < NL; i++) ok = lwo_lora_set_strength(s->ctx, keep[i], strengths[i]) == 0;
    ok = ok && lwo_tensor_fill_bytes(s->ctx, NULL, y, 0xff) == 0 && lwo_linear(s->ctx, &d) == 0 && lwo_tensor_download(s->ctx, y, got, BIG * N * 4) == 0;
    CHECK(ok, "%s: 8300 rows: %s", lwo_format_name(f), lwo_last_error(s->ctx));
    if (ok) {
        for (j = 8192 * N; j < BIG * N; j++) if (fabs((double)got[j] - base[j]) > moved) moved = fabs((double)got[j] - base[j]);
        for (i = 0; i < NL; i++) { downs[i] = ld[0][i][0]; ups[i] = ld[0][i][1]; sc[i] = strengths[i] * ((alphas[i] > 0 ? alphas[i] : (float)ranks[i]) / (float)ranks[i]); }
        check_ref_lora(xb, xdt_of(f), BIG, K, N, NL, downs, ups, ranks, sc, base, LWO_DTYPE_F32, mag);
        for (j = 0; j < BIG * N; j++) {
            double e = base[j], g = got[j], tol = (mag[j] + fabs(e)) / 128.0 + 1e-5;
            if ((g != g ? 1e30 : fabs(g - e)) / tol > worst) worst = g != g ? 1e30 : fabs(g - e) / tol;
        }
        CHECK(worst <= 1.0 && moved > 0.05, "%s: 8300 rows against the reference: worst error %.3g of the tolerance; the second chunk moved by %.3g",
              lwo_format_name(f), worst, moved);
    }
    lwo_tensor_destroy(s->ctx, x); lwo_tensor_destroy(s->ctx, y);
    free(xb); free(base); free(got); free(mag);
}

static void test_format(lwo_format f) {
    static const float zero[NL] = { 0.0f, 0.0f };
    const float later[NL] = { 0.3f, -0.5f };
    stack res, str;
    uint64_t tb = all_bytes(MROWS);
    unsigned char *base = (unsigned char *)malloc(tb), *got = (unsigned char *)malloc(tb), *again = (unsigned char *)malloc(tb),
                  *sgot = (unsigned char *)malloc(tb);
    double worst, moved;
    lwo_result r;
    lwo_graph *g = NULL;
    int l;
    strengths[0] = 0.8f; strengths[1] = -0.5f;
    make_data(f);
    memset(&str, 0, sizeof str);
    r = stack_open(&res, f, 256ull << 20, LWO_PLACE_RESIDENT);
    CHECK(r == LWO_SUCCESS, "%s: resident stack: %s", lwo_format_name(f), lwo_last_error(res.ctx));
    if (r) goto done;
    if ((r = run(&res, MROWS, 0, base)) != 0) { CHECK(0, "%s: base: %s", lwo_format_name(f), lwo_last_error(res.ctx)); goto done; }
    {   /* what the attaches take is what the sizing queries say */
        uint64_t before = check_memory_stats(res.ctx).in_use, want = lwo_lora_scratch_bytes(ranks[0] + ranks[1]);
        for (l = 0; l < LAYERS; l++) {
            lwo_weight_desc wd;
            memset(&wd, 0, sizeof wd);
            wd.rows = shape_n[l]; wd.cols = shape_k[l]; wd.data = wf[l]; wd.data_dtype = LWO_DTYPE_F32; wd.format = f;
            want += lwo_lora_device_bytes(&wd, ranks[0] + ranks[1]);
        }
        r = attach_all(&res, f);
        CHECK(r == LWO_SUCCESS, "%s: attach: %s", lwo_format_name(f), lwo_last_error(res.ctx));
        if (r) goto done;
        CHECK(check_memory_stats(res.ctx).in_use - before == want, "%s: the LoRAs take %llu bytes of the arena; the sizing queries say %llu",
              lwo_format_name(f), (unsigned long long)(check_memory_stats(res.ctx).in_use - before), (unsigned long long)want);
    }
    {
        lwo_weight_info wi;
        lwo_weight_get_info(res.ctx, res.w[0], &wi);
        CHECK(wi.lora_count == 2 && wi.lora_rank == 21, "%s: info: %zu LoRAs, rank %llu", lwo_format_name(f), wi.lora_count, (unsigned long long)wi.lora_rank);
    }
    r = run(&res, MROWS, 0, got);
    CHECK(r == LWO_SUCCESS, "%s: with LoRAs: %s", lwo_format_name(f), lwo_last_error(res.ctx));
    if (r) goto done;
    worst = compare_ref(f, MROWS, base, got, strengths, &moved);
    CHECK(worst <= 1.0 && moved > 0.05, "%s: resident against the reference: worst error %.3g of the tolerance, LoRAs moved y by up to %.3g",
          lwo_format_name(f), worst, moved);
    r = run(&res, MROWS, 0, again);
    CHECK(r == LWO_SUCCESS && memcmp(again, got, tb) == 0, "%s: a second call (graph replay for W8A8) differs", lwo_format_name(f));
    r = set_strengths(&res, zero);
    if (!r) r = run(&res, MROWS, 0, again);
    CHECK(r == LWO_SUCCESS && memcmp(again, base, tb) == 0, "%s: strength 0 equals no LoRA bit for bit (%s)", lwo_format_name(f), lwo_last_error(res.ctx));
    set_strengths(&res, strengths);
    /* 77 rows: the reference again */
    {
        unsigned char *b77 = (unsigned char *)malloc(all_bytes(77)), *g77 = (unsigned char *)malloc(all_bytes(77));
        set_strengths(&res, zero);
        r = run(&res, 77, 0, b77);
        set_strengths(&res, strengths);
        if (!r) r = run(&res, 77, 0, g77);
        worst = r ? 1e30 : compare_ref(f, 77, b77, g77, strengths, &moved);
        CHECK(worst <= 1.0, "%s: 77 rows: worst error %.3g of the tolerance (%s)", lwo_format_name(f), worst, lwo_last_error(res.ctx));
        free(b77); free(g77);
    }
    /* bad calls */
    {
        lwo_lora_desc d = lora_desc(f, 0, 0);
        lwo_lora *l2 = NULL;
        d.compute_dtype = f == LWO_FORMAT_F16 ? LWO_DTYPE_BF16 : LWO_DTYPE_F16;
        r = lwo_lora_attach(res.ctx, res.w[0], &d, &l2);
        CHECK(r == LWO_ERROR_INVALID_ARGUMENT && l2 == NULL, "%s: a second compute dtype: %s", lwo_format_name(f), lwo_result_string(r));
        d = lora_desc(f, 0, 0); d.rank = 0;
        CHECK(lwo_lora_attach(res.ctx, res.w[0], &d, &l2) == LWO_ERROR_INVALID_ARGUMENT, "%s: rank 0", lwo_format_name(f));
        d = lora_desc(f, 0, 0); d.down = NULL;
        CHECK(lwo_lora_attach(res.ctx, res.w[0], &d, &l2) == LWO_ERROR_INVALID_ARGUMENT, "%s: no down", lwo_format_name(f));
        CHECK(lwo_lora_set_strength(res.ctx, NULL, 1.0f) == LWO_ERROR_INVALID_ARGUMENT, "%s: NULL lora", lwo_format_name(f));
    }
    if (f == LWO_FORMAT_BF16 || f == LWO_FORMAT_F16) test_merge(&res, f);
    if (f == LWO_FORMAT_BF16) test_chunks(&res, f);

    /* streamed, planned after the attach */
    r = stack_open(&str, f, 64ull << 20, LWO_PLACE_STREAMED);
    if (!r) r = attach_all(&str, f);
    if (!r) { lwo_streaming_desc sd; memset(&sd, 0, sizeof sd); sd.max_rows = 8192; r = lwo_streaming_plan(str.ctx, &sd); }
    CHECK(r == LWO_SUCCESS, "%s: streamed stack: %s", lwo_format_name(f), lwo_last_error(str.ctx));
    if (r) goto done;
    r = run(&str, MROWS, 1, sgot);
    CHECK(r == LWO_SUCCESS && memcmp(sgot, got, tb) == 0, "%s: streamed equals resident bit for bit (%s)", lwo_format_name(f), lwo_last_error(str.ctx));
    {
        lwo_lora_desc d = lora_desc(f, 0, 0);
        CHECK(f == LWO_FORMAT_BF16 || f == LWO_FORMAT_F16 ? lwo_lora_merge(str.ctx, str.w[0], &d) == LWO_ERROR_INVALID_ARGUMENT : 1,
              "%s: a merge into a streamed weight must refuse", lwo_format_name(f));
    }
    r = lwo_graph_capture_begin(str.ctx);
    if (!r) r = run(&str, MROWS, 1, NULL);
    if (!r) r = lwo_graph_capture_end(str.ctx, &g); else lwo_pass_abort(str.ctx);
    CHECK(r == LWO_SUCCESS, "%s: capture: %s", lwo_format_name(f), lwo_last_error(str.ctx));
    if (!r) {
        for (l = 0; l < LAYERS; l++) lwo_tensor_fill_bytes(str.ctx, NULL, str.y[l], 0xff);
        r = lwo_graph_launch(str.ctx, g);
        if (!r) r = download_all(&str, MROWS, again);
        CHECK(r == LWO_SUCCESS && memcmp(again, got, tb) == 0, "%s: the graph equals the eager pass bit for bit (%s)", lwo_format_name(f), lwo_last_error(str.ctx));
        r = set_strengths(&str, later);
        if (!r) { for (l = 0; l < LAYERS; l++) lwo_tensor_fill_bytes(str.ctx, NULL, str.y[l], 0xff); r = lwo_graph_launch(str.ctx, g); }
        if (!r) r = download_all(&str, MROWS, again);
        if (!r) r = run(&str, MROWS, 1, sgot);
        CHECK(r == LWO_SUCCESS && memcmp(again, sgot, tb) == 0 && memcmp(again, got, tb) != 0,
              "%s: after a strength change the graph equals a new eager pass and differs from before (%s)", lwo_format_name(f), lwo_last_error(str.ctx));
        worst = r ? 1e30 : compare_ref(f, MROWS, base, again, later, &moved);
        CHECK(worst <= 1.0, "%s: the graph at the new strengths against the reference: %.3g", lwo_format_name(f), worst);
        r = lwo_lora_detach(str.ctx, str.lora[0][1]);
        CHECK(r == LWO_SUCCESS, "%s: detach: %s", lwo_format_name(f), lwo_last_error(str.ctx));
        r = lwo_graph_launch(str.ctx, g);
        CHECK(r == LWO_ERROR_INVALID_ARGUMENT && strstr(lwo_last_error(str.ctx), "capture the pass again"),
              "%s: a graph captured before a detach must refuse: %s", lwo_format_name(f), lwo_result_string(r));
        lwo_graph_destroy(str.ctx, g);
        for (l = 0; l < LAYERS; l++) {
            if (l != 0) lwo_lora_detach(str.ctx, str.lora[l][1]);
            lwo_lora_detach(str.ctx, str.lora[l][0]);
        }
        r = run(&str, MROWS, 1, sgot);
        CHECK(r == LWO_SUCCESS && memcmp(sgot, base, tb) == 0, "%s: all detached equals no LoRA bit for bit (%s)", lwo_format_name(f), lwo_last_error(str.ctx));
    }
    /* LoRAs computing in f16 under bf16 x (8-bit formats: x may be either) */
    if (f != LWO_FORMAT_BF16 && f != LWO_FORMAT_F16) {
        lwo_lora_desc d = lora_desc(f, 0, 1);
        lwo_lora *l2 = NULL;
        d.compute_dtype = LWO_DTYPE_F16;
        r = lwo_lora_attach(str.ctx, str.w[0], &d, &l2);
        CHECK(r == LWO_SUCCESS, "%s: an f16 LoRA: %s", lwo_format_name(f), lwo_last_error(str.ctx));
        if (!r) {
            r = run(&str, MROWS, 1, NULL);
            CHECK(r == LWO_ERROR_INVALID_ARGUMENT && strstr(run_error, "compute_dtype"), "%s: f16 LoRAs under bf16 x: %s (%s)",
                  lwo_format_name(f), lwo_result_string(r), run_error);
            lwo_lora_detach(str.ctx, l2);
        }
    }
    if (f == LWO_FORMAT_BF16) {
        /* the resident stack with LoRA 0 alone, attached, then the same from files */
        unsigned char *want = (unsigned char *)malloc(tb);
        for (l = 0; l < LAYERS; l++) lwo_lora_detach(res.ctx, res.lora[l][1]);
        r = run(&res, MROWS, 0, want);
        for (l = 0; l < LAYERS; l++) lwo_lora_detach(res.ctx, res.lora[l][0]);
        CHECK(r == LWO_SUCCESS && attached(&res) == 0, "LoRA 0 alone: %s", lwo_last_error(res.ctx));
        if (!r) test_load(&res, f, want);
        free(want);
    }
done:
    if (res.ctx) lwo_destroy(res.ctx);
    if (str.ctx) lwo_destroy(str.ctx);
    free(base); free(got); free(again); free(sgot);
}

int main(void) {
    static const lwo_format fmts[6] = { LWO_FORMAT_BF16, LWO_FORMAT_F16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_FP8_E5M2, LWO_FORMAT_INT8, LWO_FORMAT_FP8_E4M3_W8A8 };
    lwo_context *probe = NULL;
    lwo_context_info ci;
    lwo_desc d;
    int i, l, a, k, cc;
    check_seed("test_gpu_lora");
    memset(&d, 0, sizeof d);
    d.vram_budget = 16ull << 20;
    d.log = quiet;
    if (lwo_create(&d, &probe) != LWO_SUCCESS) { CHECK(0, "no context: %s", lwo_last_error(probe)); lwo_destroy(probe); return CHECK_SUMMARY(); }
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(probe, &ci);
    cc = ci.device.cc_major * 10 + ci.device.cc_minor;
    lwo_destroy(probe);
    for (i = 0; i < 6; i++) {
        if (fmts[i] == LWO_FORMAT_FP8_E4M3_W8A8 && cc < 89) { printf("  %s: not on this device\n", lwo_format_name(fmts[i])); continue; }
        test_format(fmts[i]);
    }
    for (l = 0; l < LAYERS; l++) {
        free(wf[l]); free(bias[l]); free(xh[l]);
        for (a = 0; a < NL; a++) for (k = 0; k < 2; k++) { free(lf[l][a][k]); free(ld[l][a][k]); }
    }
    return CHECK_SUMMARY();
}

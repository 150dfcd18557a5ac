/* test_dit_selftest.c - the diffusion demo (examples/diffuse.c) on the GPU against its CPU reference
   (examples/dit_ref.h), per storage format (bf16, int8, fp8; --storage picks others):
     - every kernel of examples/dit_kernels.cu on the model's own buffers, random inputs, outputs
       poisoned first: exact where the math is exact, else within a bf16 ulp or the stated bound;
     - one lwo_linear of the model in the storage format against float32;
     - the attention path over shapes the model does not have (head_dim 64 and 128, T from 1 to
       1100), the bf16 copy exact, nothing written outside the output (once per run);
     - one whole denoising step against the CPU model; graph replays bit-identical to eager steps;
       a run streaming most weights bit-identical to the all-resident one.
   It includes diffuse.c itself (without its main), so what it checks is the demo's own GPU path.
   Needs a GPU; run from the repository root (it reads examples/tiny_dit.safetensors).
   Ends with "N passed, N failed".
   Build: make build/test_dit_selftest
   Run:   build/test_dit_selftest [--storage bf16,int8,fp8] [--seed N] [--model PATH] [--verbose] */
#define DIFFUSE_NO_MAIN
#include "../../examples/diffuse.c"

static int st_verbose;   /* lwo's log at info level (--verbose) */

/* ---- reporting and comparing -------------------------------------------------------------------- */
typedef struct st_counts { int passed, failed; } st_counts;
static void st_report(st_counts *c, int ok, const char *what, const char *detail) {
    if (ok) c->passed++; else c->failed++;
    printf("%s %-34s %s\n", ok ? "PASS" : "FAIL", what, detail);
    fflush(stdout);
}

static uint64_t st_rng = 0x5eed;
static float st_randn(void) {   /* deterministic; the selftest's inputs */
    double u1 = dit_uniform(&st_rng), u2 = dit_uniform(&st_rng);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.141592653589793 * u2));
}

/* Units in the last place of bf16 between a and b (both finite), or a large number. */
static int bf16_ulps(uint16_t a, uint16_t b) {
    int ia = (a & 0x8000) ? -(int)(a & 0x7fff) : (int)a, ib = (b & 0x8000) ? -(int)(b & 0x7fff) : (int)b;
    if ((a & 0x7f80) == 0x7f80 || (b & 0x7f80) == 0x7f80) return 1 << 20;   /* inf / NaN (the poison) */
    return ia > ib ? ia - ib : ib - ia;
}

/* GPU bf16 output vs the CPU float reference rounded to bf16: each element at most max_ulp bf16
   ulps apart, or within abs_tol (where the op cancels -- gelu's 1 + tanh near -1, cos of a large
   argument near a zero -- a last-bit difference of the f32 math functions is no bf16 ulp). */
static void st_cmp_bf16(st_counts *c, const char *what, const uint16_t *got, const float *want, uint64_t n, int max_ulp, double abs_tol) {
    uint64_t i, bad = 0, worst_i = 0;
    int worst = 0;
    char d[200];
    for (i = 0; i < n; i++) {
        int u = bf16_ulps(got[i], lwo_ref_f32_to_bf16(want[i]));
        if (u > max_ulp && fabs((double)lwo_ref_bf16_to_f32(got[i]) - want[i]) <= abs_tol) u = max_ulp;
        if (u > worst) { worst = u; worst_i = i; }
        if (u > max_ulp) bad++;
    }
    snprintf(d, sizeof d, "%llu elements, worst %d bf16 ulp at %llu (got %g want %g), %llu over %d ulp and %.0e", (unsigned long long)n, worst,
             (unsigned long long)worst_i, (double)lwo_ref_bf16_to_f32(got[worst_i]), (double)want[worst_i], (unsigned long long)bad, max_ulp, abs_tol);
    st_report(c, bad == 0, what, d);
}

/* f32 outputs: relative error at most tol everywhere (|got - want| <= tol * max(|want|, 1e-3)). */
static void st_cmp_f32(st_counts *c, const char *what, const float *got, const float *want, uint64_t n, double tol) {
    uint64_t i, bad = 0, wi = 0;
    double worst = 0;
    char d[160];
    for (i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(fabs((double)want[i]), 1e-3);
        if (!(e <= tol)) bad++;
        if (!(e <= worst)) { worst = e; wi = i; }
    }
    snprintf(d, sizeof d, "%llu elements, worst relative error %.3g at %llu (got %g want %g), %llu over %.1g", (unsigned long long)n, worst,
             (unsigned long long)wi, (double)got[wi], (double)want[wi], (unsigned long long)bad, tol);
    st_report(c, bad == 0, what, d);
}

static double rel_l2(const float *a, const float *b, uint64_t n) {
    double e = 0, r = 0;
    uint64_t i;
    for (i = 0; i < n; i++) { double d = (double)a[i] - b[i]; e += d * d; r += (double)b[i] * b[i]; }
    return sqrt(e / (r > 0 ? r : 1e-300));
}

/* Attention output bf16 [rows, D] (row stride ld_got) against the float64 reference `want` [rows, D]
   computed from the same bf16 q, k, v (qkv [rows, 3D]): relative L2 at most 1e-2 and every element
   within 1e-2 * max |v|. What stays is the kernel's own error: P rounded to bf16 for its mma (2^-9
   relative a probability), f32 sums in another order, the output's bf16 rounding -- an emulation
   of that rounding in numpy gave 1.8e-3 relative L2 and at most 0.015 (of limits near 0.07) at
   these inputs; a lost key tile, the keys past T let in, a wrong row or head go past a bound. NaN
   (the poison) fails. */
static int st_cmp_attention(st_counts *c, const char *what, const uint16_t *got, uint64_t ld_got, const float *want, uint64_t rows, int D,
                            const float *qkv) {
    uint64_t r, wi = 0, bad = 0;
    double e2 = 0, w2 = 0, vmax = 0, worst = 0, rel;
    int d, ok;
    char det[240];
    for (r = 0; r < rows; r++) for (d = 0; d < D; d++) vmax = fmax(vmax, fabs((double)qkv[r * 3 * D + 2 * (uint64_t)D + d]));
    for (r = 0; r < rows; r++) for (d = 0; d < D; d++) {
        double gv = lwo_ref_bf16_to_f32(got[r * ld_got + d]), wv = want[r * D + d], e = fabs(gv - wv);
        e2 += (gv - wv) * (gv - wv); w2 += wv * wv;
        if (!(e <= 1e-2 * vmax)) bad++;
        if (!(e <= worst)) { worst = e; wi = r * D + d; }
    }
    rel = sqrt(e2 / (w2 > 0 ? w2 : 1e-300));
    ok = bad == 0 && rel <= 1e-2;
    snprintf(det, sizeof det, "%llu x %d: relative L2 %.2e (limit 1e-2), worst |error| %.3g at %llu (limit %.3g), %llu over", (unsigned long long)rows, D,
             rel, worst, (unsigned long long)wi, 1e-2 * vmax, (unsigned long long)bad);
    st_report(c, ok, what, det);
    return ok;
}

static int st_upload_f32(dit_gpu *g, lwo_tensor *t, const float *v, uint64_t n) { return lwo_tensor_upload(g->ctx, t, v, n * 4) == 0; }
static int st_upload_bf16(dit_gpu *g, lwo_tensor *t, const float *v, uint64_t n, float *rounded) {
    uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
    uint64_t i;
    int ok;
    if (!h) return 0;
    for (i = 0; i < n; i++) { h[i] = lwo_ref_f32_to_bf16(v[i]); if (rounded) rounded[i] = lwo_ref_bf16_to_f32(h[i]); }
    ok = lwo_tensor_upload(g->ctx, t, h, n * 2) == 0;
    free(h);
    return ok;
}
static int st_poison(dit_gpu *g, lwo_tensor *t) { return lwo_tensor_fill_bytes(g->ctx, NULL, t, 0xff) == 0; }   /* NaN in f32 and bf16 */

/* The per-kernel checks: random inputs into the model's own activation tensors, outputs poisoned first. */
static void selftest_kernels(dit_gpu *g, const dit_model *md, st_counts *c) {
    const dit_arch *a = g->a;
    uint64_t M = g->M, D = (uint64_t)a->D, Bt = (uint64_t)g->Bt, nx = (uint64_t)g->N * a->C * a->img * a->img, i;
    uint64_t big = M * (uint64_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D), nmax = big > M * D * 2 ? big : M * D * 2;
    float *in = (float *)malloc((size_t)nmax * 4), *in2 = (float *)malloc((size_t)nmax * 4), *want = (float *)malloc((size_t)nmax * 4);
    float *got = (float *)malloc((size_t)nmax * 4), *modv = (float *)malloc((size_t)Bt * 6 * D * 4), *tab = NULL, *posf = NULL;
    uint16_t *gb = (uint16_t *)malloc((size_t)nmax * 2);
    int *lab = (int *)malloc((size_t)Bt * sizeof *lab);
    lwo_context *ctx = g->ctx;
    int N = g->N, Bti = g->Bt, C = a->C, H = a->img, W = a->img, p = a->p, T = a->T, Di = a->D, tdim = a->tdim, rows = a->classes + 1, steps = 7;
    int ok, k;
    void *args[12];
    uint64_t xp = lwo_tensor_device_ptr(g->x), tokp = lwo_tensor_device_ptr(g->tok), cp = lwo_tensor_device_ptr(g->counter);
    uint64_t tembp = lwo_tensor_device_ptr(g->temb), thp = lwo_tensor_device_ptr(g->th), thbp = lwo_tensor_device_ptr(g->thb);
    uint64_t tep = lwo_tensor_device_ptr(g->te), ytp = lwo_tensor_device_ptr(g->ytab), labp = lwo_tensor_device_ptr(g->labels);
    uint64_t scp = lwo_tensor_device_ptr(g->sc), tmpp = lwo_tensor_device_ptr(g->tmp), posp = lwo_tensor_device_ptr(g->pos);
    uint64_t hp = lwo_tensor_device_ptr(g->h), bigp = lwo_tensor_device_ptr(g->big), gelp = lwo_tensor_device_ptr(g->gel);
    uint64_t actp = lwo_tensor_device_ptr(g->act), outp = lwo_tensor_device_ptr(g->out), nth = Bt * D, ngel = M * (uint64_t)a->mlp;
    float ts = a->time_scale, nlp = a->neg_log_period, cfg = 2.5f;
    int cfg_on = g->cfg_on, counter = 3;
    if (!in || !in2 || !want || !got || !modv || !gb || !lab) { st_report(c, 0, "selftest buffers", "out of host memory"); goto done; }
    tab = bf16_to_f32_array(md->ytab->data, (uint64_t)rows * D);
    posf = bf16_to_f32_array(md->pos->data, (uint64_t)T * D);
    if (!tab || !posf) { st_report(c, 0, "selftest buffers", "out of host memory"); goto done; }

    /* patchify: exact */
    for (i = 0; i < nx; i++) in[i] = st_randn();
    ok = st_upload_f32(g, g->x, in, nx) && st_poison(g, g->tok);
    args[0] = &xp; args[1] = &N; args[2] = &Bti; args[3] = &C; args[4] = &H; args[5] = &W; args[6] = &p; args[7] = &tokp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_patchify", M * a->P, args) && !lwo_tensor_download(ctx, g->tok, gb, M * a->P * 2);
    ref_patchify(in, N, Bti, C, H, W, p, want);
    if (ok) st_cmp_bf16(c, "dit_patchify", gb, want, M * a->P, 0, 0); else st_report(c, 0, "dit_patchify", lwo_last_error(ctx));

    /* time embedding at step `counter` of `steps` */
    ok = lwo_tensor_upload(ctx, g->counter, &counter, 4) == 0 && st_poison(g, g->temb);
    args[0] = &cp; args[1] = &steps; args[2] = &Bti; args[3] = &tdim; args[4] = &ts; args[5] = &nlp; args[6] = &tembp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_time_embed", Bt * (tdim / 2), args) && !lwo_tensor_download(ctx, g->temb, gb, Bt * tdim * 2);
    ref_time_embed(ref_t_at(counter, steps), Bti, tdim, ts, nlp, want);
    if (ok) st_cmp_bf16(c, "dit_time_embed", gb, want, Bt * tdim, 1, 2e-4); else st_report(c, 0, "dit_time_embed", lwo_last_error(ctx));

    /* silu */
    for (i = 0; i < nth; i++) in[i] = 4 * st_randn();
    ok = st_upload_f32(g, g->th, in, nth) && st_poison(g, g->thb);
    args[0] = &thp; args[1] = &nth; args[2] = &thbp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_silu_bf16", nth, args) && !lwo_tensor_download(ctx, g->thb, gb, nth * 2);
    ref_silu(in, nth, want);
    if (ok) st_cmp_bf16(c, "dit_silu_bf16", gb, want, nth, 1, 1e-6); else st_report(c, 0, "dit_silu_bf16", lwo_last_error(ctx));

    /* condition: te + table[label] (the null class included) */
    for (i = 0; i < nth; i++) in[i] = st_randn();
    for (k = 0; k < Bti; k++) lab[k] = k % rows;
    ok = st_upload_f32(g, g->te, in, nth) && !lwo_tensor_upload(ctx, g->labels, lab, Bt * 4) && st_poison(g, g->sc);
    args[0] = &tep; args[1] = &ytp; args[2] = &rows; args[3] = &labp; args[4] = &Bti; args[5] = &Di; args[6] = &scp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_condition", nth, args) && !lwo_tensor_download(ctx, g->sc, gb, nth * 2);
    ref_condition(in, tab, rows, lab, Bti, Di, want);
    if (ok) st_cmp_bf16(c, "dit_condition", gb, want, nth, 1, 1e-6); else st_report(c, 0, "dit_condition", lwo_last_error(ctx));

    /* embed + pos: exact */
    for (i = 0; i < M * D; i++) in[i] = st_randn();
    ok = st_upload_f32(g, g->tmp, in, M * D) && st_poison(g, g->h);
    args[0] = &tmpp; args[1] = &posp; args[2] = &M; args[3] = &T; args[4] = &Di; args[5] = &hp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_embed_pos", M * D, args) && !lwo_tensor_download(ctx, g->h, got, M * D * 4);
    ref_embed_pos(in, posf, M, T, Di, want);
    if (ok) st_cmp_f32(c, "dit_embed_pos", got, want, M * D, 0); else st_report(c, 0, "dit_embed_pos", lwo_last_error(ctx));

    /* LayerNorm + modulate (rows with an offset mean and a large spread) */
    for (i = 0; i < M * D; i++) in[i] = 3 * st_randn() + (float)(i / D % 7) - 3;
    for (i = 0; i < Bt * 6 * D; i++) modv[i] = 0.5f * st_randn();
    ok = st_upload_f32(g, g->h, in, M * D) && st_upload_f32(g, g->mod, modv, Bt * 6 * D) && st_poison(g, g->act);
    ok = ok && !k_ln_modulate(g, g->mod, 6 * Di, 3 * Di, 4 * Di) && !lwo_tensor_download(ctx, g->act, gb, M * D * 2);
    ref_ln_modulate(in, M, Di, T, modv, 6 * Di, 3 * Di, 4 * Di, a->eps, want);
    if (ok) st_cmp_bf16(c, "dit_ln_modulate", gb, want, M * D, 1, 1e-5); else st_report(c, 0, "dit_ln_modulate", lwo_last_error(ctx));

    /* gated residual: exact */
    for (i = 0; i < M * D; i++) { in[i] = st_randn(); in2[i] = st_randn(); }
    ok = st_upload_f32(g, g->h, in, M * D) && st_upload_f32(g, g->tmp, in2, M * D);
    ok = ok && !k_gate(g, 5 * Di) && !lwo_tensor_download(ctx, g->h, got, M * D * 4);
    memcpy(want, in, (size_t)(M * D) * 4);
    ref_gate_residual(want, in2, M, Di, T, modv, 6 * Di, 5 * Di);
    if (ok) st_cmp_f32(c, "dit_gate_residual", got, want, M * D, 0); else st_report(c, 0, "dit_gate_residual", lwo_last_error(ctx));

    /* GELU */
    for (i = 0; i < ngel; i++) in[i] = 3 * st_randn();
    ok = st_upload_f32(g, g->v_fc1, in, ngel) && st_poison(g, g->gel);
    args[0] = &bigp; args[1] = &ngel; args[2] = &gelp;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_gelu_tanh_bf16", ngel, args) && !lwo_tensor_download(ctx, g->gel, gb, ngel * 2);
    ref_gelu(in, ngel, want);
    if (ok) st_cmp_bf16(c, "dit_gelu_tanh_bf16", gb, want, ngel, 1, 1e-6); else st_report(c, 0, "dit_gelu_tanh_bf16", lwo_last_error(ctx));

    /* attention as the model runs it (scores of a realistic spread: q, k ~ N(0, 1.5^2)): the flash
       kernel on sm_80+, against the reference from the bf16 q, k, v it reads; then the plain kernel
       (the sm_75 path) against the f32 reference at a bf16 ulp */
    {
        double *sbuf = (double *)malloc((size_t)T * sizeof *sbuf);
        float scale = (float)(1.0 / sqrt((double)a->hd));
        int ld_qkv = 3 * Di, ld_out = Di, hd = a->hd;
        const char *plain = hd == 64 ? "dit_attention_hd64" : "dit_attention_hd128";
        for (i = 0; i < M * 3 * D; i++) in[i] = 1.5f * st_randn();
        ok = sbuf && st_upload_f32(g, g->v_qkv, in, M * 3 * D) && st_poison(g, g->act);
        ok = ok && !k_attention(g, g->v_qkv, g->act) && !lwo_tensor_download(ctx, g->act, gb, M * D * 2);
        for (i = 0; i < M * 3 * D; i++) in2[i] = g->cc >= 80 ? lwo_ref_bf16_to_f32(lwo_ref_f32_to_bf16(in[i])) : in[i];
        if (sbuf) ref_attention(in2, Bti, T, Di, a->heads, scale, sbuf, want);
        if (ok) st_cmp_attention(c, g->cc >= 80 ? "dit_attention (flash, the model's)" : "dit_attention (plain, the model's)", gb, D, want, M, Di, in2);
        else st_report(c, 0, "dit_attention", lwo_last_error(ctx));
        ok = sbuf && st_poison(g, g->act);
        args[0] = &bigp; args[1] = &ld_qkv; args[2] = &T; args[3] = &Di; args[4] = &scale; args[5] = &actp; args[6] = &ld_out;
        ok = ok && !dit_launch_3d(ctx, g->kern, plain, (unsigned)((T + 31) / 32), (unsigned)a->heads, (unsigned)Bti, (unsigned)hd, 0, args);
        ok = ok && !lwo_tensor_download(ctx, g->act, gb, M * D * 2);
        if (sbuf) ref_attention(in, Bti, T, Di, a->heads, scale, sbuf, want);
        if (ok) st_cmp_bf16(c, plain, gb, want, M * D, 1, 1e-5); else st_report(c, 0, plain, lwo_last_error(ctx));
        free(sbuf);
    }

    /* kernels of bench_dit.c's on this model's buffers: the plain head_dim 128 attention (its path
       below sm_80; 2 heads of the same width), GELU on a strided block */
    {
        double *sbuf = (double *)malloc((size_t)T * sizeof *sbuf);
        int ld_qkv = 3 * Di, ld_out = Di;
        float scale = (float)(1.0 / sqrt(128.0));
        for (i = 0; i < M * 3 * D; i++) in[i] = 1.5f * st_randn();
        ok = sbuf && Di % 128 == 0 && st_upload_f32(g, g->v_qkv, in, M * 3 * D) && st_poison(g, g->act);
        args[0] = &bigp; args[1] = &ld_qkv; args[2] = &T; args[3] = &Di; args[4] = &scale; args[5] = &actp; args[6] = &ld_out;
        ok = ok && !dit_launch_3d(ctx, g->kern, "dit_attention_hd128", (unsigned)((T + 31) / 32), (unsigned)(Di / 128), (unsigned)Bti, 128, 0, args);
        ok = ok && !lwo_tensor_download(ctx, g->act, gb, M * D * 2);
        if (ok) { ref_attention(in, Bti, T, Di, Di / 128, scale, sbuf, want); st_cmp_bf16(c, "dit_attention_hd128", gb, want, M * D, 1, 1e-5); }
        else st_report(c, 0, "dit_attention_hd128", Di % 128 ? "hidden is not a multiple of 128" : lwo_last_error(ctx));
        free(sbuf);
    }
    {
        uint64_t rows = M, r2;
        int cols = Di / 2, ldx = a->mlp, ldy = a->mlp, cc2;
        for (i = 0; i < ngel; i++) in[i] = 3 * st_randn();
        ok = st_upload_f32(g, g->v_fc1, in, ngel) && st_poison(g, g->gel);
        args[0] = &bigp; args[1] = &rows; args[2] = &cols; args[3] = &ldx; args[4] = &gelp; args[5] = &ldy;
        ok = ok && !dit_launch_1d(ctx, g->kern, "dit_gelu_tanh_bf16_2d", rows * cols, args) && !lwo_tensor_download(ctx, g->gel, gb, ngel * 2);
        for (r2 = 0; r2 < rows; r2++) for (cc2 = 0; cc2 < a->mlp; cc2++) {   /* outside the block: still the poison */
            uint64_t e = r2 * a->mlp + cc2;
            want[e] = cc2 < cols ? ref_gelu1(in[e]) : 0.0f;
            if (cc2 >= cols) { ok = ok && gb[e] == 0xffff; gb[e] = 0; }
        }
        if (ok) st_cmp_bf16(c, "dit_gelu_tanh_bf16_2d", gb, want, ngel, 1, 1e-6); else st_report(c, 0, "dit_gelu_tanh_bf16_2d", "failed, or wrote outside its block");
    }

    /* Euler + CFG + unpatchify: exact */
    for (i = 0; i < nx; i++) in[i] = st_randn();
    for (i = 0; i < M * a->P; i++) in2[i] = st_randn();
    ok = st_upload_f32(g, g->x, in, nx) && st_upload_f32(g, g->out, in2, M * a->P) && lwo_tensor_upload(ctx, g->counter, &counter, 4) == 0;
    args[0] = &xp; args[1] = &outp; args[2] = &cp; args[3] = &steps; args[4] = &N; args[5] = &C; args[6] = &H; args[7] = &W;
    args[8] = &p; args[9] = &cfg_on; args[10] = &cfg;
    ok = ok && !dit_launch_1d(ctx, g->kern, "dit_euler", nx, args) && !lwo_tensor_download(ctx, g->x, got, nx * 4);
    memcpy(want, in, (size_t)nx * 4);
    ref_euler(want, in2, ref_t_at(counter + 1, steps) - ref_t_at(counter, steps), N, C, H, W, p, cfg_on, cfg);
    if (ok) st_cmp_f32(c, "dit_euler", got, want, nx, 0); else st_report(c, 0, "dit_euler", lwo_last_error(ctx));

    /* the step counter */
    args[0] = &cp;
    ok = !dit_launch_1d(ctx, g->kern, "dit_step_advance", 1, args) && !lwo_tensor_download(ctx, g->counter, &k, 4);
    {
        char d[64];
        snprintf(d, sizeof d, "counter %d -> %d", counter, ok ? k : -1);
        st_report(c, ok && k == counter + 1, "dit_step_advance", d);
    }

    /* one lwo_linear of the model (qkv of block 0) in the chosen storage, on bf16 activations */
    {
        const dit_lin *l = &md->lin[dit_lin_block(a, 0, DIT_B_QKV)];
        float *wf = bf16_to_f32_array(l->w->data, l->rows * l->cols), *bf = bf16_to_f32_array(l->b->data, l->rows);
        char d[160];
        double e;
        for (i = 0; i < M * D; i++) in[i] = st_randn();
        ok = wf && bf && st_upload_bf16(g, g->act, in, M * D, in2) && st_poison(g, g->v_qkv);
        ok = ok && !lin(g, g->act, dit_lin_block(a, 0, DIT_B_QKV), g->v_qkv);   /* outside a pass: the order is not learned from it */
        ok = ok && !lwo_tensor_download(ctx, g->v_qkv, got, M * 3 * D * 4);
        if (wf && bf) ref_linear(in2, M, D, wf, bf, 3 * D, want);
        e = ok ? rel_l2(got, want, M * 3 * D) : 1;
        snprintf(d, sizeof d, "%s: relative L2 %.3e vs float32 (limit %s)", lwo_format_name(g->format), e, g->format == LWO_FORMAT_BF16 ? "1e-5" : "5e-2");
        st_report(c, ok && e <= (g->format == LWO_FORMAT_BF16 ? 1e-5 : 5e-2), "lwo_linear attn.qkv", ok ? d : lwo_last_error(ctx));
        free(wf); free(bf);
    }
done:
    free(in); free(in2); free(want); free(got); free(modv); free(gb); free(lab); free(tab); free(posf);
}

/* The attention path (dit_attention: the bf16 conversion, then the flash kernel; the plain kernel
   below sm_80) over shapes the model does not have: head_dim 64 and 128, T from one key to past a
   thousand (a lone key, a partial key tile, partial query blocks, exact multiples of both tiles),
   one and two samples. Fresh inputs; q, k, v rows of stride 3D + 4 and output rows of D + 8, so
   both strides matter; the bf16 copy, the output and XROWS rows past it poisoned first: the copy
   must match lwo_ref_f32_to_bf16 exactly, nothing may land in the output's padding or past its
   last row. Its own context, as the model's buffers are sized for the model's T. */
static void selftest_attention(st_counts *c) {
    static const int cases[][4] = {   /* head_dim, heads, T, samples */
        { 64, 2, 1, 1 }, { 64, 3, 77, 2 }, { 64, 2, 333, 1 }, { 64, 1, 1024, 1 },
        { 128, 2, 1, 1 }, { 128, 2, 77, 2 }, { 128, 1, 128, 1 }, { 128, 2, 333, 1 }, { 128, 2, 1100, 1 } };
    enum { NC = sizeof cases / sizeof cases[0], XROWS = 16 };
    lwo_desc desc;
    lwo_context_info info;
    lwo_context *ctx = NULL;
    lwo_module *m = NULL;
    lwo_tensor *tq = NULL, *tb = NULL, *to = NULL;
    uint64_t nq = 0, nb = 0, no = 0, shape[1], r, tmax = 0;
    float *in = NULL, *rnd = NULL, *want = NULL;
    uint16_t *gb = NULL, *ob = NULL;
    double *sbuf = NULL;
    int k, conv_bad = 0, pad_bad = 0, ok;
    char d[200];
    for (k = 0; k < NC; k++) {
        uint64_t rows = (uint64_t)cases[k][2] * cases[k][3], D = (uint64_t)cases[k][0] * cases[k][1];
        if (rows * (3 * D + 4) > nq) nq = rows * (3 * D + 4);
        if (rows * 3 * D > nb) nb = rows * 3 * D;
        if ((rows + XROWS) * (D + 8) > no) no = (rows + XROWS) * (D + 8);
        if ((uint64_t)cases[k][2] > tmax) tmax = (uint64_t)cases[k][2];
    }
    memset(&desc, 0, sizeof desc);
    desc.log = dit_log;
    desc.log_user = &st_verbose;
    desc.log_level = st_verbose ? LWO_LOG_INFO : LWO_LOG_WARN;
    desc.vram_budget = 64ull << 20;
    in = (float *)malloc((size_t)nq * 4); rnd = (float *)malloc((size_t)nb * 4); want = (float *)malloc((size_t)nb / 3 * 4);
    gb = (uint16_t *)malloc((size_t)nb * 2); ob = (uint16_t *)malloc((size_t)no * 2); sbuf = (double *)malloc((size_t)tmax * sizeof *sbuf);
    ok = in && rnd && want && gb && ob && sbuf && !lwo_create(&desc, &ctx) && !lwo_context_get_info(ctx, &info) && !dit_module_create(ctx, &m);
    shape[0] = nq; ok = ok && !lwo_tensor_create(ctx, LWO_DTYPE_F32, 1, shape, &tq);
    shape[0] = nb; ok = ok && !lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, shape, &tb);
    shape[0] = no; ok = ok && !lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, shape, &to);
    if (!ok) { st_report(c, 0, "attention sweep: setup", ctx ? lwo_last_error(ctx) : "out of host memory"); goto done; }
    for (k = 0; k < NC; k++) {
        const int hd = cases[k][0], heads = cases[k][1], T = cases[k][2], Bt = cases[k][3], D = hd * heads, ldq = 3 * D + 4, ldo = D + 8;
        const uint64_t rows = (uint64_t)T * Bt;
        const float scale = (float)(1.0 / sqrt((double)hd));
        int dd, col;
        char what[96];
        for (r = 0; r < rows * ldq; r++) in[r] = 1.5f * st_randn();
        for (r = 0; r < rows; r++) for (col = 0; col < 3 * D; col++) rnd[r * 3 * D + col] = lwo_ref_bf16_to_f32(lwo_ref_f32_to_bf16(in[r * ldq + col]));
        ok = !lwo_tensor_upload(ctx, tq, in, rows * ldq * 4) && !lwo_tensor_fill_bytes(ctx, NULL, tb, 0xff) && !lwo_tensor_fill_bytes(ctx, NULL, to, 0xff);
        ok = ok && !dit_attention(ctx, m, lwo_tensor_device_ptr(tq), ldq, tb, Bt, T, D, hd, scale, lwo_tensor_device_ptr(to), ldo);
        ok = ok && !lwo_tensor_download(ctx, to, ob, (rows + XROWS) * ldo * 2) && !lwo_tensor_download(ctx, tb, gb, rows * 3 * D * 2);
        snprintf(what, sizeof what, "attention hd %d, %d heads, T %d, %d sample%s", hd, heads, T, Bt, Bt > 1 ? "s" : "");
        if (!ok) { st_report(c, 0, what, lwo_last_error(ctx)); continue; }
        if (info.device.cc_major >= 8)
            for (r = 0; r < rows * 3 * D; r++) conv_bad += gb[r] != lwo_ref_f32_to_bf16(in[r / (3 * D) * ldq + r % (3 * D)]);
        for (r = 0; r < rows + XROWS; r++) for (dd = 0; dd < ldo; dd++) if (r >= rows || dd >= D) pad_bad += ob[r * ldo + dd] != 0xffff;
        ref_attention(rnd, Bt, T, D, heads, scale, sbuf, want);
        st_cmp_attention(c, what, ob, (uint64_t)ldo, want, rows, D, rnd);
    }
    snprintf(d, sizeof d, "%d of the copies' elements differ from lwo_ref_f32_to_bf16%s", conv_bad, info.device.cc_major >= 8 ? "" : " (not used below sm_80)");
    st_report(c, conv_bad == 0, "dit_qkv_to_bf16", d);
    snprintf(d, sizeof d, "%d elements of the outputs' padding and the rows past them written", pad_bad);
    st_report(c, pad_bad == 0, "attention writes only its output", d);
done:
    lwo_destroy(ctx);
    free(in); free(rnd); free(want); free(gb); free(ob); free(sbuf);
}

/* The selftest: kernels; then one whole step against the CPU model; graph replays against eager
   steps; a streamed run against the resident one, bit for bit. */
static void selftest(lwo_safetensors *f, const dit_model *md, const char *storage, uint64_t seed, st_counts *c) {
    const dit_arch *a = &md->a;
    const int N = 2, steps = 3;
    const double cfg = a->cfg;
    uint64_t nx = (uint64_t)N * a->C * a->img * a->img, i;
    float *noise = (float *)malloc((size_t)nx * 4), *x_eager = (float *)malloc((size_t)nx * 4), *x_graph = (float *)malloc((size_t)nx * 4);
    float *x_stream = (float *)malloc((size_t)nx * 4), *x_cpu = (float *)malloc((size_t)nx * 4), *v_gpu = NULL;
    int labels[2] = { 3, 8 }, k;
    dit_gpu gs, *g = &gs;
    lwo_graph *graph = NULL;
    char d[512];
    if (!noise || !x_eager || !x_graph || !x_stream || !x_cpu) { st_report(c, 0, "selftest buffers", "out of host memory"); goto done; }
    dit_noise(seed, nx, noise);
    printf("selftest: %d samples (classes %d, %d), cfg %g, storage %s\n", N, labels[0], labels[1], cfg, storage);
    if (dit_gpu_open(g, f, md, storage, N, DIT_VRAM_ALL, 0, steps, cfg, st_verbose, NULL, 0.0)) {
        st_report(c, 0, "dit_gpu_open (all resident)", g->ctx ? lwo_last_error(g->ctx) : "no context");
        dit_gpu_close(g);
        goto done;
    }
    selftest_kernels(g, md, c);

    /* one eager step: the model output against the CPU model's, and the state after the step */
    {
        cpu_model cm;
        uint64_t nout = g->M * a->P;
        double e_out, e_x;
        int ok = cpu_init(&cm, md, g->Bt);
        v_gpu = (float *)malloc((size_t)nout * 4);
        ok = ok && v_gpu && !dit_gpu_reset(g, noise, labels) && !dit_gpu_step(g) && !lwo_stream_synchronize(g->ctx, NULL) &&
             !lwo_tensor_download(g->ctx, g->out, v_gpu, nout * 4) && !lwo_tensor_download(g->ctx, g->x, x_eager, nx * 4);
        if (ok) {
            cpu_forward(&cm, noise, N, ref_t_at(0, steps), labels);
            memcpy(x_cpu, noise, (size_t)nx * 4);
            ref_euler(x_cpu, cm.out, ref_t_at(1, steps) - ref_t_at(0, steps), N, a->C, a->img, a->img, a->p, g->cfg_on, g->cfg);
            e_out = rel_l2(v_gpu, cm.out, nout);
            e_x = rel_l2(x_eager, x_cpu, nx);
            snprintf(d, sizeof d, "%s: model output relative L2 %.3e, state after the step %.3e (limit %s)", lwo_format_name(g->format), e_out, e_x,
                     g->format == LWO_FORMAT_BF16 ? "2e-2" : "1e-1");
            st_report(c, e_out <= (g->format == LWO_FORMAT_BF16 ? 2e-2 : 1e-1), "a whole step vs the CPU model", d);
        } else st_report(c, 0, "a whole step vs the CPU model", lwo_last_error(g->ctx));
        cpu_free(&cm, md->nlin);
    }
    /* eager steps vs graph replays, from the same noise */
    {
        int ok = !dit_gpu_reset(g, noise, labels);
        for (k = 0; ok && k < steps; k++) ok = !dit_gpu_step(g);
        ok = ok && !lwo_stream_synchronize(g->ctx, NULL) && !lwo_tensor_download(g->ctx, g->x, x_eager, nx * 4);
        ok = ok && !dit_gpu_capture(g, noise, labels, &graph) && !dit_gpu_reset(g, noise, labels);
        for (k = 0; ok && k < steps; k++) ok = !lwo_graph_launch(g->ctx, graph);
        ok = ok && !lwo_stream_synchronize(g->ctx, NULL) && !lwo_tensor_download(g->ctx, g->x, x_graph, nx * 4);
        snprintf(d, sizeof d, "%d steps: %.300s", steps, ok ? (memcmp(x_eager, x_graph, (size_t)nx * 4) ? "the states differ" : "bit-identical") : lwo_last_error(g->ctx));
        st_report(c, ok && !memcmp(x_eager, x_graph, (size_t)nx * 4), "graph replays == eager steps", d);
        for (i = 0, k = 0; i < nx; i++) k += !(x_graph[i] == x_graph[i]) || fabsf(x_graph[i]) > 100.0f;
        snprintf(d, sizeof d, "%d of %llu values NaN or > 100", k, (unsigned long long)nx);
        st_report(c, ok && k == 0, "the state stays finite", d);
    }
    lwo_graph_destroy(g->ctx, graph);
    graph = NULL;
    dit_gpu_close(g);
    /* the same under a budget that streams most weights */
    {
        int ok = !dit_gpu_open(g, f, md, storage, N, DIT_VRAM_AUTO, 0, steps, cfg, st_verbose, NULL, 0.0);
        lwo_stats st;
        ok = ok && !dit_gpu_capture(g, noise, labels, &graph) && !dit_gpu_reset(g, noise, labels);
        for (k = 0; ok && k < steps; k++) ok = !lwo_graph_launch(g->ctx, graph);
        ok = ok && !lwo_stream_synchronize(g->ctx, NULL) && !lwo_tensor_download(g->ctx, g->x, x_stream, nx * 4);
        memset(&st, 0, sizeof st);
        if (g->ctx) lwo_context_get_stats(g->ctx, &st);
        snprintf(d, sizeof d, "%.2f MiB resident, %.2f MiB streamed: %.300s", st.resident_bytes / 1048576.0, st.bytes_streamed / 1048576.0,
                 ok ? (memcmp(x_stream, x_graph, (size_t)nx * 4) ? "the states differ" : "bit-identical") : lwo_last_error(g->ctx));
        st_report(c, ok && st.bytes_streamed > 0 && !memcmp(x_stream, x_graph, (size_t)nx * 4), "streamed graph == resident graph", d);
        if (graph) lwo_graph_destroy(g->ctx, graph);
        dit_gpu_close(g);
    }
done:
    free(noise); free(x_eager); free(x_graph); free(x_stream); free(x_cpu); free(v_gpu);
}


int main(int argc, char **argv) {
    const char *model = DIT_PATH_DEFAULT, *storages = "bf16,int8,fp8";
    char list[256], err[512], *tok;
    uint64_t seed = 0;
    lwo_safetensors_desc sdesc;
    lwo_safetensors *f = NULL;
    dit_model md;
    st_counts c = { 0, 0 };
    lwo_result r;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--verbose")) st_verbose = 1;
        else if (v && !strcmp(a, "--storage")) { storages = v; i++; }
        else if (v && !strcmp(a, "--model")) { model = v; i++; }
        else if (v && !strcmp(a, "--seed") && dit_parse_u64(v, 0, UINT64_MAX, &seed)) i++;
        else {
            fprintf(stderr, "usage: test_dit_selftest [--storage bf16,int8,fp8] [--seed N] [--model PATH] [--verbose]\n"
                            "  --storage: a comma-separated list of bf16, int8, fp8, fp8-w8a8, fp8-upcast (as diffuse's)\n");
            return 2;
        }
    }
    memset(&sdesc, 0, sizeof sdesc);
    sdesc.path = model;
    if ((r = lwo_safetensors_create(&sdesc, &f)) != LWO_SUCCESS || !dit_model_read(f, &md, err, sizeof err)) {
        printf("FAIL %-34s %s: %s\n", "the checkpoint", model, r ? (f ? lwo_safetensors_last_error(f) : "out of memory") : err);
        if (!r) dit_model_free(&md);
        lwo_safetensors_destroy(f);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    snprintf(list, sizeof list, "%s", storages);
    for (tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (strcmp(tok, "bf16") && strcmp(tok, "int8") && strcmp(tok, "fp8") && strcmp(tok, "fp8-w8a8") && strcmp(tok, "fp8-upcast")) {
            st_report(&c, 0, "--storage", tok);
            continue;
        }
        selftest(f, &md, tok, seed, &c);
    }
    selftest_attention(&c);
    dit_model_free(&md);
    lwo_safetensors_destroy(f);   /* after every context: their weights may read its mapping */
    printf("%d passed, %d failed\n", c.passed, c.failed);
    return c.failed ? 1 : 0;
}

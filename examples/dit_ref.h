/* dit_ref.h - the tiny DiT on the CPU: the reference the diffusion demo's GPU path (examples/diffuse.c,
   its kernels examples/dit_kernels.cu) and the PyTorch script (tools/train_tiny_dit.py) are checked
   against. Every op of the GPU path in plain C, float32 with sums in float64; the model (cpu_forward)
   and the script's sampler (cpu_sample, what `diffuse --cpu` runs). No GPU needed.
   Include after lwo.h (its CPU codecs), dit_common.h (the clock) and dit_model.h (the checkpoint).
   Everything here is static inline. */
#ifndef DIT_REF_H
#define DIT_REF_H
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bf16 from the mapping (no alignment assumed) */
static inline float bf16_at(const void *p, uint64_t i) {
    uint16_t h;
    memcpy(&h, (const unsigned char *)p + 2 * i, 2);
    return lwo_ref_bf16_to_f32(h);
}
static inline float *bf16_to_f32_array(const void *p, uint64_t n) {
    float *o = (float *)malloc((size_t)n * sizeof *o);
    uint64_t i;
    if (o) for (i = 0; i < n; i++) o[i] = bf16_at(p, i);
    return o;
}

/* Each function computes what the kernel of the same name in dit_kernels.cu computes, in the same
   layout; where the kernel rounds to bf16 (its outputs feeding lwo_linear) these keep float32, so
   the sampler below is the float32 model of the PyTorch reference. */
static inline float ref_t_at(int i, int steps) { return (float)((double)(steps - i) / (double)steps); }

static inline void ref_patchify(const float *x, int N, int Bt, int C, int H, int W, int p, float *tok) {
    int G = W / p, T = (H / p) * G, P = p * p * C, b, n, e;
    for (b = 0; b < Bt; b++) for (n = 0; n < T; n++) for (e = 0; e < P; e++) {
        int ch = e % C, pp = e / C, py = pp / p, px = pp % p, r = n / G, c = n % G, s = b < N ? b : b - N;
        tok[((size_t)b * T + n) * P + e] = x[(((size_t)s * C + ch) * H + (size_t)(r * p + py)) * W + (size_t)(c * p + px)];
    }
}

static inline void ref_time_embed(float t, int Bt, int dim, float time_scale, float neg_log_period, float *out) {
    int half = dim / 2, b, k;
    for (b = 0; b < Bt; b++) for (k = 0; k < half; k++) {
        float f = expf((neg_log_period * (float)k) / (float)half);
        float a = (t * time_scale) * f;
        out[(size_t)b * dim + k] = cosf(a);
        out[(size_t)b * dim + half + k] = sinf(a);
    }
}

static inline float ref_silu1(float x) { return x / (1.0f + expf(-x)); }
static inline void ref_silu(const float *x, uint64_t n, float *y) { uint64_t i; for (i = 0; i < n; i++) y[i] = ref_silu1(x[i]); }

static inline void ref_condition(const float *te, const float *table, int rows, const int *labels, int Bt, int D, float *sc) {
    int b, d;
    for (b = 0; b < Bt; b++) {
        int l = labels[b] < 0 || labels[b] >= rows ? rows - 1 : labels[b];
        for (d = 0; d < D; d++) sc[(size_t)b * D + d] = ref_silu1(te[(size_t)b * D + d] + table[(size_t)l * D + d]);
    }
}

static inline void ref_embed_pos(const float *e, const float *pos, uint64_t M, int T, int D, float *h) {
    uint64_t m;
    int d;
    for (m = 0; m < M; m++) for (d = 0; d < D; d++) h[m * D + d] = e[m * D + d] + pos[(m % T) * D + d];
}

static inline void ref_ln_modulate(const float *h, uint64_t M, int D, int T, const float *mod, int stride, int shift_off, int scale_off,
                            float eps, float *out) {
    uint64_t m;
    int d;
    for (m = 0; m < M; m++) {
        const float *row = h + m * D, *sh = mod + (m / T) * stride + shift_off, *sc = mod + (m / T) * stride + scale_off;
        double s = 0, v = 0;
        float mean, rstd;
        for (d = 0; d < D; d++) s += row[d];
        mean = (float)(s / D);
        for (d = 0; d < D; d++) { double c = (double)row[d] - mean; v += c * c; }
        rstd = (float)(1.0 / sqrt(v / D + eps));
        for (d = 0; d < D; d++) out[m * D + d] = ((row[d] - mean) * rstd) * (1.0f + sc[d]) + sh[d];
    }
}

static inline void ref_gate_residual(float *h, const float *y, uint64_t M, int D, int T, const float *mod, int stride, int gate_off) {
    uint64_t m;
    int d;
    for (m = 0; m < M; m++) for (d = 0; d < D; d++) h[m * D + d] = h[m * D + d] + mod[(m / T) * stride + gate_off + d] * y[m * D + d];
}

static inline float ref_gelu1(float v) {
    float cube = (v * v) * v;
    float inner = 0.7978845608028654f * (v + 0.044715f * cube);
    return (0.5f * v) * (1.0f + tanhf(inner));
}
static inline void ref_gelu(const float *x, uint64_t n, float *y) { uint64_t i; for (i = 0; i < n; i++) y[i] = ref_gelu1(x[i]); }

/* softmax(q k^T * scale) v per (sample, head), in float64; qkv [Bt * T, 3D], out [Bt * T, D] */
static inline void ref_attention(const float *qkv, int Bt, int T, int D, int heads, float scale, double *sbuf, float *out) {
    int hd = D / heads, b, hh, i, j, d;
    size_t ld = 3 * (size_t)D;
    for (b = 0; b < Bt; b++) for (hh = 0; hh < heads; hh++) for (i = 0; i < T; i++) {
        const float *q = qkv + ((size_t)b * T + i) * ld + (size_t)hh * hd;
        double mx = -DBL_MAX, l = 0;
        for (j = 0; j < T; j++) {
            const float *k = qkv + ((size_t)b * T + j) * ld + D + (size_t)hh * hd;
            double s = 0;
            for (d = 0; d < hd; d++) s += (double)q[d] * k[d];
            sbuf[j] = s * scale;
            if (sbuf[j] > mx) mx = sbuf[j];
        }
        for (j = 0; j < T; j++) { sbuf[j] = exp(sbuf[j] - mx); l += sbuf[j]; }
        for (d = 0; d < hd; d++) {
            double acc = 0;
            for (j = 0; j < T; j++) acc += sbuf[j] * qkv[((size_t)b * T + j) * ld + 2 * (size_t)D + (size_t)hh * hd + d];
            out[((size_t)b * T + i) * D + (size_t)hh * hd + d] = (float)(acc / l);
        }
    }
}

static inline void ref_euler(float *x, const float *o, float dt, int N, int C, int H, int W, int p, int cfg_on, float cfg) {
    int G = W / p, T = (H / p) * G, P = p * p * C, s, ch, row, col;
    for (s = 0; s < N; s++) for (ch = 0; ch < C; ch++) for (row = 0; row < H; row++) for (col = 0; col < W; col++) {
        int n = (row / p) * G + col / p, e = ((row % p) * p + col % p) * C + ch;
        size_t i = (((size_t)s * C + ch) * H + row) * W + col;
        float v = o[((size_t)s * T + n) * P + e];
        if (cfg_on) { float vu = o[((size_t)(s + N) * T + n) * P + e]; v = vu + cfg * (v - vu); }
        x[i] = x[i] + dt * v;
    }
}

/* y [M, N] = x [M, K] W^T + b, W [N, K] float; four float64 partial sums per dot product */
static inline void ref_linear(const float *x, uint64_t M, uint64_t K, const float *w, const float *b, uint64_t N, float *y) {
    uint64_t m, n, k;
    for (m = 0; m < M; m++) {
        const float *xr = x + m * K;
        for (n = 0; n < N; n++) {
            const float *wr = w + n * K;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (k = 0; k + 4 <= K; k += 4) {
                s0 += (double)xr[k] * wr[k]; s1 += (double)xr[k + 1] * wr[k + 1];
                s2 += (double)xr[k + 2] * wr[k + 2]; s3 += (double)xr[k + 3] * wr[k + 3];
            }
            for (; k < K; k++) s0 += (double)xr[k] * wr[k];
            y[m * N + n] = (float)((s0 + s1) + (s2 + s3) + (b ? b[n] : 0.0));
        }
    }
}

/* The model on the CPU: float copies of every tensor, and work buffers for Bt rows. */
typedef struct cpu_model {
    const dit_arch *a;
    float **w, **b;          /* per linear, in dit_model order */
    float *pos, *ytab;
    int Bt;
    float *tok, *temb, *th, *te, *sc, *h, *tmp, *act, *big, *mod, *out;
    double *sbuf;
    int *lab;                /* [Bt]: the labels, then the null class for the CFG half */
} cpu_model;

static inline void cpu_free(cpu_model *cm, int nlin) {
    int i;
    for (i = 0; cm->w && i < nlin; i++) { free(cm->w[i]); free(cm->b[i]); }
    free(cm->w); free(cm->b); free(cm->pos); free(cm->ytab);
    free(cm->tok); free(cm->temb); free(cm->th); free(cm->te); free(cm->sc); free(cm->h); free(cm->tmp); free(cm->act);
    free(cm->big); free(cm->mod); free(cm->out); free(cm->sbuf); free(cm->lab);
    memset(cm, 0, sizeof *cm);
}

static inline int cpu_init(cpu_model *cm, const dit_model *md, int Bt) {
    const dit_arch *a = &md->a;
    size_t M = (size_t)Bt * a->T, wide = (size_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D);
    int i;
    memset(cm, 0, sizeof *cm);
    cm->a = a; cm->Bt = Bt;
    cm->w = (float **)calloc((size_t)md->nlin, sizeof *cm->w);
    cm->b = (float **)calloc((size_t)md->nlin, sizeof *cm->b);
    if (!cm->w || !cm->b) return 0;
    for (i = 0; i < md->nlin; i++) {
        cm->w[i] = bf16_to_f32_array(md->lin[i].w->data, md->lin[i].rows * md->lin[i].cols);
        cm->b[i] = bf16_to_f32_array(md->lin[i].b->data, md->lin[i].rows);
        if (!cm->w[i] || !cm->b[i]) return 0;
    }
    cm->pos = bf16_to_f32_array(md->pos->data, (uint64_t)a->T * a->D);
    cm->ytab = bf16_to_f32_array(md->ytab->data, (uint64_t)(a->classes + 1) * a->D);
    cm->tok = (float *)malloc(M * a->P * sizeof(float));
    cm->temb = (float *)malloc((size_t)Bt * a->tdim * sizeof(float));
    cm->th = (float *)malloc((size_t)Bt * a->D * sizeof(float));
    cm->te = (float *)malloc((size_t)Bt * a->D * sizeof(float));
    cm->sc = (float *)malloc((size_t)Bt * a->D * sizeof(float));
    cm->mod = (float *)malloc((size_t)Bt * 6 * a->D * sizeof(float));
    cm->h = (float *)malloc(M * a->D * sizeof(float));
    cm->tmp = (float *)malloc(M * a->D * sizeof(float));
    cm->act = (float *)malloc(M * wide * sizeof(float));
    cm->big = (float *)malloc(M * wide * sizeof(float));
    cm->out = (float *)malloc(M * a->P * sizeof(float));
    cm->sbuf = (double *)malloc((size_t)a->T * sizeof(double));
    cm->lab = (int *)malloc((size_t)Bt * sizeof(int));
    return cm->lab && cm->pos && cm->ytab && cm->tok && cm->temb && cm->th && cm->te && cm->sc && cm->mod && cm->h && cm->tmp && cm->act &&
           cm->big && cm->out && cm->sbuf;
}

/* One forward of Bt rows (x [N, C, H, W] and labels [N]; rows >= N repeat x with the null class,
   the CFG half) at time t: cm->out [Bt * T, P] is the velocity, still patchified. */
static inline void cpu_forward(cpu_model *cm, const float *x, int N, float t, const int *labels) {
    const dit_arch *a = cm->a;
    int Bt = cm->Bt, D = a->D, i;
    uint64_t M = (uint64_t)Bt * a->T;
    for (i = 0; i < Bt; i++) cm->lab[i] = i < N ? labels[i] : a->null_class;
    ref_patchify(x, N, Bt, a->C, a->img, a->img, a->p, cm->tok);
    ref_time_embed(t, Bt, a->tdim, a->time_scale, a->neg_log_period, cm->temb);
    ref_linear(cm->temb, (uint64_t)Bt, (uint64_t)a->tdim, cm->w[DIT_L_T0], cm->b[DIT_L_T0], (uint64_t)D, cm->th);
    ref_silu(cm->th, (uint64_t)Bt * D, cm->th);
    ref_linear(cm->th, (uint64_t)Bt, (uint64_t)D, cm->w[DIT_L_T2], cm->b[DIT_L_T2], (uint64_t)D, cm->te);
    ref_condition(cm->te, cm->ytab, a->classes + 1, cm->lab, Bt, D, cm->sc);
    ref_linear(cm->tok, M, (uint64_t)a->P, cm->w[DIT_L_XEMB], cm->b[DIT_L_XEMB], (uint64_t)D, cm->tmp);
    ref_embed_pos(cm->tmp, cm->pos, M, a->T, D, cm->h);
    for (i = 0; i < a->depth; i++) {
        int ada = dit_lin_block(a, i, DIT_B_ADA), qkv = dit_lin_block(a, i, DIT_B_QKV), proj = dit_lin_block(a, i, DIT_B_PROJ);
        int fc1 = dit_lin_block(a, i, DIT_B_FC1), fc2 = dit_lin_block(a, i, DIT_B_FC2);
        ref_linear(cm->sc, (uint64_t)Bt, (uint64_t)D, cm->w[ada], cm->b[ada], 6 * (uint64_t)D, cm->mod);
        ref_ln_modulate(cm->h, M, D, a->T, cm->mod, 6 * D, 0, D, a->eps, cm->act);
        ref_linear(cm->act, M, (uint64_t)D, cm->w[qkv], cm->b[qkv], 3 * (uint64_t)D, cm->big);
        ref_attention(cm->big, Bt, a->T, D, a->heads, (float)(1.0 / sqrt((double)a->hd)), cm->sbuf, cm->act);
        ref_linear(cm->act, M, (uint64_t)D, cm->w[proj], cm->b[proj], (uint64_t)D, cm->tmp);
        ref_gate_residual(cm->h, cm->tmp, M, D, a->T, cm->mod, 6 * D, 2 * D);
        ref_ln_modulate(cm->h, M, D, a->T, cm->mod, 6 * D, 3 * D, 4 * D, a->eps, cm->act);
        ref_linear(cm->act, M, (uint64_t)D, cm->w[fc1], cm->b[fc1], (uint64_t)a->mlp, cm->big);
        ref_gelu(cm->big, M * a->mlp, cm->act);
        ref_linear(cm->act, M, (uint64_t)a->mlp, cm->w[fc2], cm->b[fc2], (uint64_t)D, cm->tmp);
        ref_gate_residual(cm->h, cm->tmp, M, D, a->T, cm->mod, 6 * D, 5 * D);
    }
    ref_linear(cm->sc, (uint64_t)Bt, (uint64_t)D, cm->w[dit_lin_fada(a)], cm->b[dit_lin_fada(a)], 2 * (uint64_t)D, cm->mod);
    ref_ln_modulate(cm->h, M, D, a->T, cm->mod, 2 * D, 0, D, a->eps, cm->act);
    ref_linear(cm->act, M, (uint64_t)D, cm->w[dit_lin_flin(a)], cm->b[dit_lin_flin(a)], (uint64_t)a->P, cm->out);
}

/* The sampler of the script, on the CPU: x holds the noise on entry, the (unclamped) result on exit. */
static inline int cpu_sample(const dit_model *md, float *x, int N, const int *labels, int steps, double cfg, double *secs) {
    cpu_model cm;
    int cfg_on = cfg != 1.0, Bt = cfg_on ? 2 * N : N, i;
    const dit_arch *a = &md->a;
    double t0;
    if (!cpu_init(&cm, md, Bt)) { cpu_free(&cm, md->nlin); fprintf(stderr, "diffuse: out of memory\n"); return 0; }
    t0 = dit_now_s();
    for (i = 0; i < steps; i++) {
        cpu_forward(&cm, x, N, ref_t_at(i, steps), labels);
        ref_euler(x, cm.out, ref_t_at(i + 1, steps) - ref_t_at(i, steps), N, a->C, a->img, a->img, a->p, cfg_on, (float)cfg);
        dit_progress("cpu", i + 1, steps, dit_now_s() - t0);
    }
    *secs = dit_now_s() - t0;
    cpu_free(&cm, md->nlin);
    return 1;
}
#endif

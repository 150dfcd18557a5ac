/* bench_dit.c - a Flux-sized diffusion transformer streamed through lwo: hidden 3072, 24 heads of
   128, 19 double-stream blocks (separate image and text weights, joint attention) and 38
   single-stream blocks (fused qkv + MLP input, fused output), MLP ratio 4, random weights (about
   11.8 B parameters in the linears), 4608 tokens (512 text + 4096 image), batch 1. Each storage
   format (bf16, fp8, int8) is timed under VRAM budgets (default 8 GiB, 16 GiB, and everything
   resident): seconds per step (one forward, replayed as a CUDA graph), VRAM in use, bytes streamed
   per step, the host-to-device rate achieved, and the transfer bound (bytes streamed / the
   measured host-to-device bandwidth): a step can be no faster than that.
   The numbers are of the transformer's linears (lwo_linear) and of diffuse.c's kernels
   (examples/dit_kernels.cu: LayerNorm + modulation, gated residuals, GELU, and attention: q, k, v
   to bf16, then a flash-attention kernel on the tensor cores, sm_80+; --no-attention leaves it out
   to show the weights' part alone). Left out of Flux: the QK RMSNorm, RoPE, the embedders and
   final layer.
   Memory: bf16 keeps 24 GB of pinned host copies, fp8/int8 12 GB; one format at a time.
   Build: cc -std=c99 -O2 examples/bench_dit.c -ldl -lm -o bench_dit
   Run:   ./bench_dit [--formats bf16,fp8,int8] [--budgets 8192,16384,all] [--steps 3] [--quick] */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include "dit_common.h"
#include <errno.h>

typedef struct bench_cfg {
    int D, heads, hd, ndouble, nsingle, mlp, Tt, Ti, T, steps, attention;
    int slots;   /* lwo_desc.max_slots (0 = lwo's default) */
} bench_cfg;

enum { DB_IMG_MOD, DB_TXT_MOD, DB_IMG_QKV, DB_TXT_QKV, DB_IMG_PROJ, DB_IMG_FC1, DB_IMG_FC2, DB_TXT_PROJ, DB_TXT_FC1, DB_TXT_FC2, DB_COUNT };
enum { SB_MOD, SB_LIN1, SB_LIN2, SB_COUNT };

typedef struct bench {
    bench_cfg c;
    lwo_context *ctx;
    lwo_module *kern;
    lwo_format format;
    lwo_weight **w;        /* double blocks (DB_COUNT each), then single blocks (SB_COUNT each) */
    int nw;
    uint64_t workspace, graph_bytes, act_bytes;
    lwo_tensor *vec, *h, *tmp, *act, *big, *cat, *mod;
    lwo_tensor *qkvb;      /* q, k, v as bf16 for the flash attention kernel */
    /* views, [0] the text rows, [1] the image rows */
    lwo_tensor *h_s[2], *mod_s[2], *qkv_s[2], *act_s[2], *tmp_s[2], *fc1_s[2], *gel_s[2];
    lwo_tensor *mod1, *lin1, *lin1_mlp, *cat_mlp, *cat_all;
} bench;

static const char *fmt_name(lwo_format f) {
    return f == LWO_FORMAT_BF16 ? "bf16" : f == LWO_FORMAT_INT8 ? "int8" : f == LWO_FORMAT_FP8_E4M3_W8A8 ? "fp8-w8a8" : f == LWO_FORMAT_FP8_E4M3 ? "fp8-upcast" : "?";
}

#define B_TRY(call, what) do { lwo_result b__r = (call); if (b__r) { \
    fprintf(stderr, "bench_dit: %s failed: %s\n  %s\n", (what), lwo_result_string(b__r), lwo_last_error(b->ctx)); return b__r; } } while (0)

static void weight_shape(const bench_cfg *c, int i, uint64_t *rows, uint64_t *cols) {
    uint64_t D = (uint64_t)c->D, H = (uint64_t)c->mlp;
    if (i < c->ndouble * DB_COUNT) {
        switch (i % DB_COUNT) {
        case DB_IMG_MOD: case DB_TXT_MOD: *rows = 6 * D; *cols = D; return;
        case DB_IMG_QKV: case DB_TXT_QKV: *rows = 3 * D; *cols = D; return;
        case DB_IMG_PROJ: case DB_TXT_PROJ: *rows = D; *cols = D; return;
        case DB_IMG_FC1: case DB_TXT_FC1: *rows = H; *cols = D; return;
        default: *rows = D; *cols = H; return;
        }
    }
    switch ((i - c->ndouble * DB_COUNT) % SB_COUNT) {
    case SB_MOD: *rows = 3 * D; *cols = D; return;
    case SB_LIN1: *rows = 3 * D + H; *cols = D; return;
    default: *rows = D; *cols = D + H; return;
    }
}

static uint64_t r256(uint64_t v) { return (v + 255) / 256 * 256; }

/* Weight i's desc: random bf16 data (the same numbers, shifted) and bias, stored as `format`. */
static lwo_weight_desc weight_desc(const bench_cfg *c, int i, const uint16_t *rnd, lwo_format format) {
    lwo_weight_desc wd;
    memset(&wd, 0, sizeof wd);
    weight_shape(c, i, &wd.rows, &wd.cols);
    wd.data = rnd + (size_t)(i % 7) * 4096; wd.data_dtype = LWO_DTYPE_BF16;
    wd.bias = rnd; wd.bias_dtype = LWO_DTYPE_BF16;
    wd.format = format;
    wd.placement = LWO_PLACE_AUTO;
    return wd;
}
/* The plan: the workspace for x of up to T rows (every linear's x has at most the token rows). */
static lwo_streaming_desc plan_desc(const bench *b) {
    lwo_streaming_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.max_rows = (uint64_t)b->c.T;
    return sd;
}

static lwo_result view(bench *b, const lwo_tensor *of, uint64_t byte_off, lwo_dtype dt, uint64_t rows, uint64_t cols, lwo_tensor **t) {
    uint64_t shape[2];
    shape[0] = rows; shape[1] = cols;
    return lwo_tensor_wrap(b->ctx, lwo_tensor_device_ptr(of) + byte_off, dt, 2, shape, t);
}
static lwo_result make(bench *b, lwo_dtype dt, uint64_t rows, uint64_t cols, lwo_tensor **t) {
    uint64_t shape[2];
    shape[0] = rows; shape[1] = cols;
    return lwo_tensor_create(b->ctx, dt, 2, shape, t);
}

/* y = x W^T + bias on the compute stream */
static lwo_result lin(bench *b, const lwo_tensor *x, const lwo_weight *w, lwo_tensor *y) {
    lwo_linear_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.x = x; ld.w = w; ld.y = y;
    return lwo_linear(b->ctx, &ld);
}

/* ---- the kernels of one block ---- */
static lwo_result k_ln(bench *b, const lwo_tensor *h, uint64_t rows, const lwo_tensor *mod, int shift_off, int scale_off, lwo_tensor *out) {
    uint64_t hp = lwo_tensor_device_ptr(h), mp = lwo_tensor_device_ptr(mod), op = lwo_tensor_device_ptr(out);
    int D = b->c.D, T = (int)rows, stride = 0;
    float eps = 1e-6f;
    void *args[10];
    args[0] = &hp; args[1] = &rows; args[2] = &D; args[3] = &T; args[4] = &mp; args[5] = &stride; args[6] = &shift_off; args[7] = &scale_off;
    args[8] = &eps; args[9] = &op;
    return dit_launch_3d(b->ctx, b->kern, "dit_ln_modulate", (unsigned)((rows + 7) / 8), 1, 1, 256, 0, args);
}
static lwo_result k_gate(bench *b, lwo_tensor *h, const lwo_tensor *y, uint64_t rows, const lwo_tensor *mod, int gate_off) {
    uint64_t hp = lwo_tensor_device_ptr(h), yp = lwo_tensor_device_ptr(y), mp = lwo_tensor_device_ptr(mod);
    int D = b->c.D, T = (int)rows, stride = 0;
    void *args[8];
    args[0] = &hp; args[1] = &yp; args[2] = &rows; args[3] = &D; args[4] = &T; args[5] = &mp; args[6] = &stride; args[7] = &gate_off;
    return dit_launch_1d(b->ctx, b->kern, "dit_gate_residual", rows * (uint64_t)D, args);
}
static lwo_result k_attn(bench *b, const lwo_tensor *qkv, int ld_qkv, lwo_tensor *out, int ld_out) {
    if (!b->c.attention) return LWO_SUCCESS;
    return dit_attention(b->ctx, b->kern, lwo_tensor_device_ptr(qkv), ld_qkv, b->qkvb, 1, b->c.T, b->c.D, b->c.hd,
                         (float)(1.0 / sqrt((double)b->c.hd)), lwo_tensor_device_ptr(out), ld_out);
}
static lwo_result k_gelu(bench *b, const lwo_tensor *x, uint64_t rows, int cols, int ldx, lwo_tensor *y, int ldy) {
    uint64_t xp = lwo_tensor_device_ptr(x), yp = lwo_tensor_device_ptr(y);
    void *args[6];
    args[0] = &xp; args[1] = &rows; args[2] = &cols; args[3] = &ldx; args[4] = &yp; args[5] = &ldy;
    return dit_launch_1d(b->ctx, b->kern, "dit_gelu_tanh_bf16_2d", rows * (uint64_t)cols, args);
}

/* One forward of the transformer: rows 0 .. Tt-1 of h are text, Tt .. T-1 image (Flux's order). */
static lwo_result forward_pass(bench *b) {
    const bench_cfg *c = &b->c;
    int i, s, D = c->D, H = c->mlp;
    uint64_t rows_s[2];
    rows_s[0] = (uint64_t)c->Tt; rows_s[1] = (uint64_t)c->Ti;
    B_TRY(lwo_pass_begin(b->ctx), "lwo_pass_begin");
    for (i = 0; i < c->ndouble; i++) {
        lwo_weight **w = b->w + i * DB_COUNT;
        B_TRY(lin(b, b->vec, w[DB_IMG_MOD], b->mod_s[1]), "img_mod");
        B_TRY(lin(b, b->vec, w[DB_TXT_MOD], b->mod_s[0]), "txt_mod");
        for (s = 0; s < 2; s++) B_TRY(k_ln(b, b->h_s[s], rows_s[s], b->mod_s[s], 0, D, b->act_s[s]), "ln");
        B_TRY(lin(b, b->act_s[1], w[DB_IMG_QKV], b->qkv_s[1]), "img_qkv");
        B_TRY(lin(b, b->act_s[0], w[DB_TXT_QKV], b->qkv_s[0]), "txt_qkv");
        B_TRY(k_attn(b, b->big, 3 * D, b->act, D), "joint attention");
        for (s = 1; s >= 0; s--) {   /* the image stream, then the text stream (their weights' order) */
            lwo_weight *proj = w[s ? DB_IMG_PROJ : DB_TXT_PROJ], *fc1 = w[s ? DB_IMG_FC1 : DB_TXT_FC1], *fc2 = w[s ? DB_IMG_FC2 : DB_TXT_FC2];
            B_TRY(lin(b, b->act_s[s], proj, b->tmp_s[s]), "proj");
            B_TRY(k_gate(b, b->h_s[s], b->tmp_s[s], rows_s[s], b->mod_s[s], 2 * D), "gate");
            B_TRY(k_ln(b, b->h_s[s], rows_s[s], b->mod_s[s], 3 * D, 4 * D, b->act_s[s]), "ln");
            B_TRY(lin(b, b->act_s[s], fc1, b->fc1_s[s]), "fc1");
            B_TRY(k_gelu(b, b->fc1_s[s], rows_s[s], H, H, b->gel_s[s], H), "gelu");
            B_TRY(lin(b, b->gel_s[s], fc2, b->tmp_s[s]), "fc2");
            B_TRY(k_gate(b, b->h_s[s], b->tmp_s[s], rows_s[s], b->mod_s[s], 5 * D), "gate");
        }
    }
    for (i = 0; i < c->nsingle; i++) {
        lwo_weight **w = b->w + c->ndouble * DB_COUNT + i * SB_COUNT;
        B_TRY(lin(b, b->vec, w[SB_MOD], b->mod1), "single mod");
        B_TRY(k_ln(b, b->h, (uint64_t)c->T, b->mod1, 0, D, b->act), "ln");
        B_TRY(lin(b, b->act, w[SB_LIN1], b->lin1), "linear1");
        B_TRY(k_attn(b, b->big, 3 * D + H, b->cat, D + H), "attention");
        B_TRY(k_gelu(b, b->lin1_mlp, (uint64_t)c->T, H, 3 * D + H, b->cat_mlp, D + H), "gelu");
        B_TRY(lin(b, b->cat_all, w[SB_LIN2], b->tmp), "linear2");
        B_TRY(k_gate(b, b->h, b->tmp, (uint64_t)c->T, b->mod1, 2 * D), "gate");
    }
    B_TRY(lwo_pass_end(b->ctx), "lwo_pass_end");
    return LWO_SUCCESS;
}
/* A forward whose failure leaves the context as it was before the pass (the next budget still runs). */
static lwo_result forward(bench *b) {
    lwo_result r = forward_pass(b);
    if (r) lwo_pass_abort(b->ctx);
    return r;
}

/* ---- setup ---- */
static void bench_close(bench *b) {
    lwo_destroy(b->ctx);
    free(b->w);
    memset(b, 0, sizeof *b);
}

static uint64_t activation_bytes(const bench_cfg *c) {
    uint64_t T = (uint64_t)c->T, D = (uint64_t)c->D, H = (uint64_t)c->mlp;
    return r256(D * 2) + 2 * r256(T * D * 4) + r256(T * D * 2) + r256(T * (3 * D + H) * 4) + r256(T * (D + H) * 2) + r256(2 * 6 * D * 4) +
           r256(T * 3 * D * 2);
}

static lwo_result bench_tensors(bench *b) {
    const bench_cfg *c = &b->c;
    uint64_t T = (uint64_t)c->T, Tt = (uint64_t)c->Tt, Ti = (uint64_t)c->Ti, D = (uint64_t)c->D, H = (uint64_t)c->mlp;
    B_TRY(make(b, LWO_DTYPE_BF16, 1, D, &b->vec), "activations");
    B_TRY(make(b, LWO_DTYPE_F32, T, D, &b->h), "activations");
    B_TRY(make(b, LWO_DTYPE_F32, T, D, &b->tmp), "activations");
    B_TRY(make(b, LWO_DTYPE_BF16, T, D, &b->act), "activations");
    B_TRY(make(b, LWO_DTYPE_F32, T, 3 * D + H, &b->big), "activations");
    B_TRY(make(b, LWO_DTYPE_BF16, T, D + H, &b->cat), "activations");
    B_TRY(make(b, LWO_DTYPE_F32, 2, 6 * D, &b->mod), "activations");
    B_TRY(make(b, LWO_DTYPE_BF16, T, 3 * D, &b->qkvb), "activations");
    B_TRY(view(b, b->h, 0, LWO_DTYPE_F32, Tt, D, &b->h_s[0]), "views");
    B_TRY(view(b, b->h, Tt * D * 4, LWO_DTYPE_F32, Ti, D, &b->h_s[1]), "views");
    B_TRY(view(b, b->mod, 0, LWO_DTYPE_F32, 1, 6 * D, &b->mod_s[0]), "views");
    B_TRY(view(b, b->mod, 6 * D * 4, LWO_DTYPE_F32, 1, 6 * D, &b->mod_s[1]), "views");
    B_TRY(view(b, b->big, 0, LWO_DTYPE_F32, Tt, 3 * D, &b->qkv_s[0]), "views");
    B_TRY(view(b, b->big, Tt * 3 * D * 4, LWO_DTYPE_F32, Ti, 3 * D, &b->qkv_s[1]), "views");
    B_TRY(view(b, b->act, 0, LWO_DTYPE_BF16, Tt, D, &b->act_s[0]), "views");
    B_TRY(view(b, b->act, Tt * D * 2, LWO_DTYPE_BF16, Ti, D, &b->act_s[1]), "views");
    B_TRY(view(b, b->tmp, 0, LWO_DTYPE_F32, Tt, D, &b->tmp_s[0]), "views");
    B_TRY(view(b, b->tmp, Tt * D * 4, LWO_DTYPE_F32, Ti, D, &b->tmp_s[1]), "views");
    B_TRY(view(b, b->big, 0, LWO_DTYPE_F32, Tt, H, &b->fc1_s[0]), "views");   /* each stream in turn, from the start */
    B_TRY(view(b, b->big, 0, LWO_DTYPE_F32, Ti, H, &b->fc1_s[1]), "views");
    B_TRY(view(b, b->cat, 0, LWO_DTYPE_BF16, Tt, H, &b->gel_s[0]), "views");
    B_TRY(view(b, b->cat, 0, LWO_DTYPE_BF16, Ti, H, &b->gel_s[1]), "views");
    B_TRY(view(b, b->mod, 0, LWO_DTYPE_F32, 1, 3 * D, &b->mod1), "views");
    B_TRY(view(b, b->big, 0, LWO_DTYPE_F32, T, 3 * D + H, &b->lin1), "views");
    B_TRY(view(b, b->big, 3 * D * 4, LWO_DTYPE_F32, T, H, &b->lin1_mlp), "views");   /* pointer only: strided by the kernel */
    B_TRY(view(b, b->cat, D * 2, LWO_DTYPE_BF16, T, H, &b->cat_mlp), "views");
    B_TRY(view(b, b->cat, 0, LWO_DTYPE_BF16, T, D + H, &b->cat_all), "views");
    return LWO_SUCCESS;
}

/* host-to-device bandwidth from pinned memory, 1 GiB copies on the compute stream */
static double measure_h2d(bench *b) {
    const uint64_t n = 1ull << 30;
    uint64_t shape[1];
    void *host = NULL;
    lwo_tensor *t = NULL;
    lwo_event *e0 = NULL, *e1 = NULL;
    float ms = 0;
    double gbs = 0;
    int i;
    shape[0] = n;
    if (!lwo_host_alloc(b->ctx, n, &host) && !lwo_tensor_create(b->ctx, LWO_DTYPE_U8, 1, shape, &t) && !lwo_event_create(b->ctx, &e0) &&
        !lwo_event_create(b->ctx, &e1)) {
        memset(host, 1, (size_t)n);
        lwo_tensor_upload(b->ctx, t, host, n);   /* warm */
        lwo_event_record(b->ctx, e0, NULL);
        for (i = 0; i < 3; i++) lwo_tensor_upload_async(b->ctx, NULL, t, host, n);
        lwo_event_record(b->ctx, e1, NULL);
        if (!lwo_event_synchronize(b->ctx, e1) && !lwo_event_elapsed_ms(b->ctx, e0, e1, &ms) && ms > 0) gbs = 3.0 * n / (ms * 1e6);
    }
    if (t) lwo_tensor_destroy(b->ctx, t);
    if (host) lwo_host_free(b->ctx, host);
    if (e0) lwo_event_destroy(b->ctx, e0);
    if (e1) lwo_event_destroy(b->ctx, e1);
    return gbs;
}

static void log_fn(void *user, lwo_log_level level, const char *msg) {
    if (level != LWO_LOG_ERROR || *(const int *)user) fprintf(stderr, "lwo: %s\n", msg);
}

static lwo_result bench_open(bench *b, const bench_cfg *c, const char *fmt, const uint16_t *rnd, int *verbose, double *h2d) {
    lwo_desc desc;
    lwo_context_info info;
    uint64_t wb = 0;
    lwo_weight_desc *wd;
    int i, cc;
    double t0 = dit_now_s();
    memset(b, 0, sizeof *b);
    b->c = *c;
    b->nw = c->ndouble * DB_COUNT + c->nsingle * SB_COUNT;
    memset(&desc, 0, sizeof desc);
    desc.log = log_fn; desc.log_user = verbose; desc.log_level = *verbose ? LWO_LOG_INFO : LWO_LOG_PROGRESS;
    desc.vram_budget = 64ull << 20;   /* a probe for the compute capability */
    B_TRY(lwo_create(&desc, &b->ctx), "lwo_create");
    lwo_context_get_info(b->ctx, &info);
    cc = info.device.cc_major * 10 + info.device.cc_minor;
    b->format = !strcmp(fmt, "bf16") ? LWO_FORMAT_BF16 : !strcmp(fmt, "int8") ? LWO_FORMAT_INT8 : !strcmp(fmt, "fp8-upcast") ? LWO_FORMAT_FP8_E4M3
              : cc >= 89 ? LWO_FORMAT_FP8_E4M3_W8A8 : LWO_FORMAT_FP8_E4M3;
    /* lwo's own sizes: each weight's VRAM, and what a plan reserves for lwo_linear */
    wd = (lwo_weight_desc *)calloc((size_t)b->nw, sizeof *wd);
    if (!wd) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < b->nw; i++) {
        wd[i] = weight_desc(c, i, rnd, b->format);
        wb += lwo_weight_device_bytes(&wd[i]);
    }
    b->workspace = lwo_linear_workspace_bytes(b->ctx, wd, (size_t)b->nw, (uint64_t)c->T);
    lwo_destroy(b->ctx);
    b->ctx = NULL;
    b->act_bytes = activation_bytes(c);
    desc.max_slots = c->slots;
    /* room for everything resident, and 1 GiB for the bandwidth probe and lwo's rounding */
    desc.vram_budget = (wb + b->act_bytes + b->workspace + (1ull << 30) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    B_TRY(lwo_create(&desc, &b->ctx), "lwo_create");
    printf("%s on %s: %d weights, %.2f GiB stored, activations %.2f GiB, workspace %.0f MiB; arena %.2f GiB\n", fmt_name(b->format), info.device.name,
           b->nw, wb / 1073741824.0, b->act_bytes / 1073741824.0, b->workspace / 1048576.0, desc.vram_budget / 1073741824.0);
    fflush(stdout);
    B_TRY(dit_module_create(b->ctx, &b->kern), "compiling examples/dit_kernels.cu");
    if (*h2d <= 0) *h2d = measure_h2d(b);
    b->w = (lwo_weight **)calloc((size_t)b->nw, sizeof *b->w);
    if (!b->w) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < b->nw; i++) {
        lwo_result r = lwo_weight_create(b->ctx, &wd[i], &b->w[i]);
        if (r) { free(wd); B_TRY(r, "lwo_weight_create"); }
    }
    free(wd);
    B_TRY(bench_tensors(b), "tensors");
    B_TRY(lwo_tensor_upload(b->ctx, b->vec, rnd, (uint64_t)c->D * 2), "upload");
    {
        float *h = (float *)malloc((size_t)c->T * c->D * 4);
        uint64_t k;
        if (!h) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        for (k = 0; k < (uint64_t)c->T * c->D; k++) h[k] = lwo_ref_bf16_to_f32(rnd[k % 100003]) * 10.0f;
        B_TRY(lwo_tensor_upload(b->ctx, b->h, h, (uint64_t)c->T * c->D * 4), "upload");
        free(h);
    }
    printf("  weights created in %.1f s\n", dit_now_s() - t0);
    return LWO_SUCCESS;
}

typedef struct bench_row {
    char format[24], budget[32];
    int lora_rank;    /* a LoRA of this rank on every linear (0: none) */
    double s_step, s_eager, wait_frac, gbs, bound_s, vram_gib, resident_gib, streamed_gib;
    int ok;
} bench_row;

/* Plans under `budget` bytes (0 = the whole arena), runs a warm-up pass, plans again (timed against
   it), then times `steps` eager passes back to back and `steps` replays of a captured pass. */
static lwo_result bench_budget(bench *b, uint64_t budget, double h2d, bench_row *row) {
    lwo_context_info ci;
    lwo_stats st;
    lwo_streaming_desc sd;
    lwo_tensor *ballast = NULL;
    lwo_graph *g = NULL;
    uint64_t shape[1];
    double t0, wait0;
    int i;
    B_TRY(lwo_context_get_info(b->ctx, &ci), "lwo_context_get_info");
    if (budget && budget < ci.memory.budget) {
        /* the arena was sized for everything resident: a ballast tensor takes what the budget excludes */
        if (budget < ci.memory.in_use + b->workspace) { fprintf(stderr, "bench_dit: a %.2f GiB budget leaves no room next to %.2f GiB of activations\n", budget / 1073741824.0, ci.memory.in_use / 1073741824.0); return LWO_ERROR_OUT_OF_BUDGET; }
        shape[0] = ci.memory.budget - budget;
        B_TRY(lwo_tensor_create(b->ctx, LWO_DTYPE_U8, 1, shape, &ballast), "the ballast");
    }
    sd = plan_desc(b);
    B_TRY(lwo_streaming_plan(b->ctx, &sd), "lwo_streaming_plan");
    /* two passes: the first loads the GEMM modules, so its timings are not the GPU's alone */
    if (forward(b) || forward(b)) return LWO_ERROR_CUDA;
    B_TRY(lwo_stream_synchronize(b->ctx, NULL), "the warm-up passes");
    /* planned again, now timed against those passes: lwo knows each use's compute time and the rate
       */
    B_TRY(lwo_streaming_plan(b->ctx, &sd), "lwo_streaming_plan");
    if (forward(b)) return LWO_ERROR_CUDA;
    B_TRY(lwo_stream_synchronize(b->ctx, NULL), "the warm-up pass");
    /* eager passes back to back: each one's last weights prefetch the next one's first */
    B_TRY(lwo_context_get_stats(b->ctx, &st), "lwo_context_get_stats");
    wait0 = st.wait_ms;
    t0 = dit_now_s();
    for (i = 0; i < b->c.steps; i++) if (forward(b)) return LWO_ERROR_CUDA;
    B_TRY(lwo_stream_synchronize(b->ctx, NULL), "an eager pass");
    row->s_eager = (dit_now_s() - t0) / b->c.steps;
    B_TRY(lwo_context_get_stats(b->ctx, &st), "lwo_context_get_stats");
    row->wait_frac = (st.wait_ms - wait0) / 1000.0 / b->c.steps / row->s_eager;
    B_TRY(lwo_graph_capture_begin(b->ctx), "lwo_graph_capture_begin");
    if (forward(b)) return LWO_ERROR_CUDA;   /* forward ended the pass and the capture */
    B_TRY(lwo_graph_capture_end(b->ctx, &g), "lwo_graph_capture_end");
    b->graph_bytes = lwo_graph_bytes_streamed(g);
    t0 = dit_now_s();
    for (i = 0; i < b->c.steps; i++) {
        B_TRY(lwo_graph_launch(b->ctx, g), "lwo_graph_launch");
        B_TRY(lwo_stream_synchronize(b->ctx, NULL), "a step");
        dit_progress("  ", i + 1, b->c.steps, dit_now_s() - t0);
    }
    row->s_step = (dit_now_s() - t0) / b->c.steps;
    lwo_graph_destroy(b->ctx, g);
    B_TRY(lwo_context_get_info(b->ctx, &ci), "lwo_context_get_info");
    B_TRY(lwo_context_get_stats(b->ctx, &st), "lwo_context_get_stats");
    row->vram_gib = (ci.memory.in_use - (ballast ? lwo_tensor_bytes(ballast) : 0)) / 1073741824.0;
    row->resident_gib = st.resident_bytes / 1073741824.0;
    row->streamed_gib = b->graph_bytes / 1073741824.0;
    row->gbs = b->graph_bytes / row->s_step / 1e9;
    row->bound_s = h2d > 0 ? b->graph_bytes / (h2d * 1e9) : 0;
    row->ok = 1;
    printf("  %-10s budget %-9s plan: workspace %.0f MiB, split area %.1f MiB; GEMMs that split their last rounds: %llu in %llu launches since creation\n",
           fmt_name(b->format), row->budget, st.plan_workspace_bytes / 1048576.0, st.plan_split_bytes / 1048576.0,
           (unsigned long long)st.gemm_splits, (unsigned long long)st.kernels_launched);
    printf("  %-10s budget %-9s resident %6.2f GiB, ring %6.0f MiB, streamed %6.2f GiB/step: %7.3f s/step (eager %.3f, waited %.1f%%; "
           "the plan's model %.3f, graph %.3f; eager copies ran at %.1f GB/s), H2D %5.1f GB/s, transfer bound %.3f s, VRAM in use %.2f GiB\n", fmt_name(b->format), row->budget, row->resident_gib,
           st.ring_bytes / 1048576.0, row->streamed_gib, row->s_step, row->s_eager, 100.0 * row->wait_frac, st.plan_predicted_ms / 1000.0, st.plan_predicted_graph_ms / 1000.0, st.transfer_GBps, row->gbs,
           row->bound_s, row->vram_gib);
    fflush(stdout);
    if (ballast) lwo_tensor_destroy(b->ctx, ballast);
    return LWO_SUCCESS;
}

/* A LoRA of `rank` on every linear: random bf16 factors (the shared numbers), strength 1. */
static lwo_result attach_loras(bench *b, const uint16_t *rnd, uint64_t rank) {
    int i;
    for (i = 0; i < b->nw; i++) {
        lwo_lora_desc ld;
        lwo_lora *l;
        memset(&ld, 0, sizeof ld);
        ld.rank = rank; ld.down = rnd + 1; ld.up = rnd + 3; ld.dtype = LWO_DTYPE_BF16; ld.strength = 1.0f;
        B_TRY(lwo_lora_attach(b->ctx, b->w[i], &ld, &l), "lwo_lora_attach");
    }
    return LWO_SUCCESS;
}

/* Milliseconds of one attention of a block (what k_attn enqueues: the bf16 conversion and the
   flash kernel), and in *flash_ms of the flash kernel alone (0 below sm_80, where the plain kernel
   runs); each the mean of 10 launches after a warm one. */
static double attention_ms(bench *b, double *flash_ms) {
    const int reps = 10;
    lwo_event *e0 = NULL, *e1 = NULL;
    lwo_context_info info;
    float ms = 0, fms = 0;
    int i, D = b->c.D, ok;
    *flash_ms = 0;
    if (!b->c.attention || lwo_context_get_info(b->ctx, &info) || lwo_event_create(b->ctx, &e0) || lwo_event_create(b->ctx, &e1)) return 0;
    ok = !k_attn(b, b->big, 3 * D, b->act, D) && !lwo_event_record(b->ctx, e0, NULL);   /* warm */
    for (i = 0; ok && i < reps; i++) ok = !k_attn(b, b->big, 3 * D, b->act, D);
    ok = ok && !lwo_event_record(b->ctx, e1, NULL) && !lwo_event_synchronize(b->ctx, e1) && !lwo_event_elapsed_ms(b->ctx, e0, e1, &ms);
    if (ok && info.device.cc_major >= 8) {
        uint64_t qb = lwo_tensor_device_ptr(b->qkvb), op = lwo_tensor_device_ptr(b->act);
        float scale = (float)(1.0 / sqrt((double)b->c.hd));
        ok = !lwo_event_record(b->ctx, e0, NULL);
        for (i = 0; ok && i < reps; i++) ok = !dit_launch_flash_attention(b->ctx, b->kern, qb, 3 * D, 1, b->c.T, D, b->c.hd, scale, op, D);
        ok = ok && !lwo_event_record(b->ctx, e1, NULL) && !lwo_event_synchronize(b->ctx, e1) && !lwo_event_elapsed_ms(b->ctx, e0, e1, &fms);
        if (ok) *flash_ms = fms / reps;
    }
    lwo_event_destroy(b->ctx, e0);
    lwo_event_destroy(b->ctx, e1);
    return ok ? ms / reps : 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_dit [--formats bf16,fp8,int8] [--budgets 8192,16384,all] (MiB) [--steps 3] [--tokens-txt 512]\n"
               "                 [--tokens-img 4096] [--slots N] [--no-attention] [--quick] [--verbose]\n"
               "                 [--lora-ranks 32,128] [--lora-formats int8]\n"
               "  --lora-ranks: then each of --lora-formats (default: every format) again with a LoRA of each rank on every\n"
               "  linear, under the smallest budget, against the same step without\n"
               "  fp8 = fp8-w8a8 on compute capability 8.9+, else fp8-upcast; --quick: a small model (hidden 1024, 2 + 4 blocks,\n"
               "  1024 tokens, budgets 96,192,all MiB) to check the program itself; --slots: most staging slots (lwo_desc.max_slots)\n");
}

int main(int argc, char **argv) {
    bench_cfg c;
    const char *formats = "bf16,fp8,int8", *budgets = NULL, *lora_formats = NULL;
    uint64_t lora_ranks[4];
    int nlora = 0;
    char list[256], *tok, *save = NULL;
    bench_row rows[64];
    int nrows = 0, i, verbose = 0, quick = 0, failed = 0;
    uint64_t txt = 512, img = 4096, steps = 3, slots = 0, nrnd;
    uint16_t *rnd;
    double h2d = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "--quick")) quick = 1;
        else if (!strcmp(a, "--no-attention")) { /* read below */ }
        else if (!strcmp(a, "--verbose")) verbose = 1;
        else if (!strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (v && !strcmp(a, "--formats")) { formats = v; i++; }
        else if (v && !strcmp(a, "--budgets")) { budgets = v; i++; }
        else if (v && !strcmp(a, "--lora-formats")) { lora_formats = v; i++; }
        else if (v && !strcmp(a, "--lora-ranks")) {
            char rl[64], *rt, *rs = NULL;
            snprintf(rl, sizeof rl, "%s", v);
            for (rt = strtok_r(rl, ",", &rs); rt; rt = strtok_r(NULL, ",", &rs)) {
                unsigned long long u;
                errno = 0;
                u = strtoull(rt, &end, 10);
                if (errno || *end || u < 1 || u > 1024 || nlora == 4) { fprintf(stderr, "bench_dit: --lora-ranks %s: want up to 4 ranks 1 .. 1024\n", v); return 2; }
                lora_ranks[nlora++] = u;
            }
            i++;
        }
        else if (v && (!strcmp(a, "--steps") || !strcmp(a, "--tokens-txt") || !strcmp(a, "--tokens-img") || !strcmp(a, "--slots"))) {
            unsigned long long u;
            errno = 0;
            u = strtoull(v, &end, 10);
            if (errno || *end || *v == '-' || u < 1 || u > 65536) { fprintf(stderr, "bench_dit: %s %s: want an integer 1 .. 65536\n", a, v); return 2; }
            if (!strcmp(a, "--steps")) steps = u; else if (!strcmp(a, "--slots")) slots = u;
            else if (!strcmp(a, "--tokens-txt")) txt = u; else img = u;
            i++;
        } else { fprintf(stderr, "bench_dit: unknown or incomplete option %s\n", a); usage(stderr); return 2; }
    }
    memset(&c, 0, sizeof c);
    c.attention = 1;
    for (i = 1; i < argc; i++) if (!strcmp(argv[i], "--no-attention")) c.attention = 0;
    c.D = 3072; c.heads = 24; c.hd = 128; c.ndouble = 19; c.nsingle = 38;
    if (quick) { c.D = 1024; c.heads = 8; c.ndouble = 2; c.nsingle = 4; txt = 128; img = 896; }
    if (!budgets) budgets = quick ? "96,192,all" : "8192,16384,all";
    c.mlp = 4 * c.D; c.Tt = (int)txt; c.Ti = (int)img; c.T = c.Tt + c.Ti; c.steps = (int)steps; c.slots = (int)slots;
    printf("bench_dit: hidden %d, %d heads of %d, %d double + %d single blocks, MLP %d, %d tokens (%d text + %d image), %s attention\n",
           c.D, c.heads, c.hd, c.ndouble, c.nsingle, c.mlp, c.T, c.Tt, c.Ti, c.attention ? "with" : "without");
    /* one buffer of N(0, 0.02^2) bf16 numbers, as large as the largest weight (+ shifts) */
    nrnd = (uint64_t)(3 * c.D + c.mlp) * c.D + 7 * 4096;
    rnd = (uint16_t *)malloc((size_t)nrnd * 2);
    if (!rnd) { fprintf(stderr, "bench_dit: out of memory\n"); return 1; }
    {
        uint64_t k, st = 42;
        for (k = 0; k < nrnd; k++) {
            double u1 = dit_uniform(&st), u2 = dit_uniform(&st);
            rnd[k] = lwo_ref_f32_to_bf16((float)(0.02 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
        }
    }
    snprintf(list, sizeof list, "%s", formats);
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bench b;
        char blist[256], *bt, *bsave = NULL;
        double att, flash, flops;
        if (strcmp(tok, "bf16") && strcmp(tok, "fp8") && strcmp(tok, "int8") && strcmp(tok, "fp8-upcast")) {
            fprintf(stderr, "bench_dit: format %s: want bf16, fp8, fp8-upcast or int8\n", tok); failed++; continue;
        }
        if (bench_open(&b, &c, tok, rnd, &verbose, &h2d)) { bench_close(&b); failed++; continue; }
        att = attention_ms(&b, &flash);
        flops = 4.0 * c.T * (double)c.T * c.hd * c.heads;   /* Q K^T and P V, 2 flops a multiply-add */
        printf("  host-to-device %.1f GB/s (pinned, 1 GiB copies); attention %.2f ms a block (%.0f TFLOP/s), %.3f s a step", h2d, att,
               att > 0 ? flops / (att * 1e9) : 0.0, att * (c.ndouble + c.nsingle) / 1000.0);
        if (flash > 0) printf("; of a block's, the flash kernel %.3f ms (%.0f TFLOP/s), the q, k, v bf16 copy %.3f ms", flash, flops / (flash * 1e9), att - flash);
        printf("\n");
        /* budgets smallest first, everything resident last: each ballast then fits in the hole the
           previous one left (a plan's placements stay until the next plan) */
        {
            uint64_t mibs[16], t;
            int nb = 0, j, k;
            snprintf(blist, sizeof blist, "%s", budgets);
            for (bt = strtok_r(blist, ",", &bsave); bt && nb < 16; bt = strtok_r(NULL, ",", &bsave)) {
                char *end;
                if (!strcmp(bt, "all")) { mibs[nb++] = UINT64_MAX; continue; }
                errno = 0;
                t = strtoull(bt, &end, 10);
                if (errno || *end || t == 0 || t > (1ull << 30)) { fprintf(stderr, "bench_dit: budget %s: want MiB or 'all'\n", bt); failed++; continue; }
                mibs[nb++] = t;
            }
            for (j = 1; j < nb; j++) for (k = j; k > 0 && mibs[k] < mibs[k - 1]; k--) { t = mibs[k]; mibs[k] = mibs[k - 1]; mibs[k - 1] = t; }
            for (j = 0; j < nb && nrows < 64; j++) {
                bench_row *r = &rows[nrows++];
                memset(r, 0, sizeof *r);
                snprintf(r->format, sizeof r->format, "%s", fmt_name(b.format));
                if (mibs[j] == UINT64_MAX) snprintf(r->budget, sizeof r->budget, "all");
                else snprintf(r->budget, sizeof r->budget, "%llu MiB", (unsigned long long)mibs[j]);
                if (bench_budget(&b, mibs[j] == UINT64_MAX ? 0 : mibs[j] << 20, h2d, r)) failed++;
            }
            bench_close(&b);
            /* with LoRAs, under the smallest budget: a fresh context each, so the plan of the run
               before holds no room the factors need */
            for (j = 0; j < nlora && nb && nrows < 64 && (!lora_formats || strstr(lora_formats, tok)); j++) {
                bench_row *r = &rows[nrows++];
                memset(r, 0, sizeof *r);
                if (bench_open(&b, &c, tok, rnd, &verbose, &h2d) || attach_loras(&b, rnd, lora_ranks[j])) { bench_close(&b); failed++; continue; }
                snprintf(r->format, sizeof r->format, "%s+r%llu", fmt_name(b.format), (unsigned long long)lora_ranks[j]);
                r->lora_rank = (int)lora_ranks[j];
                if (mibs[0] == UINT64_MAX) snprintf(r->budget, sizeof r->budget, "all");
                else snprintf(r->budget, sizeof r->budget, "%llu MiB", (unsigned long long)mibs[0]);
                if (bench_budget(&b, mibs[0] == UINT64_MAX ? 0 : mibs[0] << 20, h2d, r)) failed++;
                bench_close(&b);
            }
        }
    }
    free(rnd);
    printf("\n==== bench_dit: %d tokens, %d double + %d single blocks, hidden %d, %s attention; H2D %.1f GB/s ====\n", c.T, c.ndouble,
           c.nsingle, c.D, c.attention ? "with" : "without", h2d);
    /* The target's measure: a step against max(the same format's all-resident step, the transfer bound). */
    printf("%-10s %-10s %9s %9s %8s %12s %9s %9s %10s %10s %9s\n", "format", "budget", "s/step", "eager s", "waited", "streamed GiB",
           "H2D GB/s", "bound s", "vs target", "eager vs", "VRAM GiB");
    for (i = 0; i < nrows; i++) {
        bench_row *r = &rows[i];
        double compute = 0, ref;
        int j;
        if (!r->ok) { printf("%-10s %-10s failed\n", r->format, r->budget); continue; }
        for (j = 0; j < nrows; j++)
            if (rows[j].ok && !strcmp(rows[j].format, r->format) && !strcmp(rows[j].budget, "all")) compute = rows[j].s_step;
        ref = compute > r->bound_s ? compute : r->bound_s;
        printf("%-10s %-10s %9.3f %9.3f %7.1f%% %12.2f %9.1f %9.3f %9.3fx %9.3fx %9.2f\n", r->format, r->budget, r->s_step, r->s_eager,
               100.0 * r->wait_frac, r->streamed_gib, r->gbs, r->bound_s, ref > 0 ? r->s_step / ref : 0.0, ref > 0 ? r->s_eager / ref : 0.0, r->vram_gib);
    }
    /* LoRA rows: the step against the same format's step without LoRAs under the same budget, and
       against max(that format's all-resident step, this row's transfer bound) */
    for (i = 0; i < nrows; i++) {
        bench_row *r = &rows[i];
        char base[24];
        double plain = 0, compute = 0, ref;
        int j;
        if (!r->ok || !r->lora_rank) continue;
        memcpy(base, r->format, sizeof base);
        base[strcspn(base, "+")] = 0;
        for (j = 0; j < nrows; j++) {
            if (!rows[j].ok || rows[j].lora_rank || strcmp(rows[j].format, base)) continue;
            if (!strcmp(rows[j].budget, r->budget)) plain = rows[j].s_step;
            if (!strcmp(rows[j].budget, "all")) compute = rows[j].s_step;
        }
        ref = compute > r->bound_s ? compute : r->bound_s;
        printf("lora %s rank %d under %s: %.3f s/step, %.3fx the step without LoRAs (%.3f s), %.3fx max(compute, transfer bound) (%.3f s)\n",
               base, r->lora_rank, r->budget, r->s_step, plain > 0 ? r->s_step / plain : 0.0, plain, ref > 0 ? r->s_step / ref : 0.0, ref);
    }
    return failed ? 1 : 0;
}

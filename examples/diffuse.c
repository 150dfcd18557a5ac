/* diffuse.c - class-conditional Fashion-MNIST images from the tiny DiT of tools/train_tiny_dit.py
   ("tiny-dit-v1", examples/tiny_dit.safetensors), on a GPU through lwo:
     - every linear through lwo_linear, its weight stored as --storage (bf16, fp8, int8) and placed
       LWO_PLACE_AUTO under the --vram budget: lwo_streaming_plan keeps what fits resident and
       streams the rest through its ring;
     - everything else (patchify, timestep and class embedding, LayerNorm + adaLN modulation,
       attention, GELU, gated residuals, unpatchify, the CFG Euler update) as this example's own
       kernels, examples/dit_kernels.cu, compiled at run time with lwo_module_compile;
     - one denoising step captured as a CUDA graph (lwo_graph_capture_begin/end), replayed for every
       step: the step index lives in a device counter that the graph's last kernel advances.
   The initial noise is the script's "splitmix64-boxmuller-v1", so this program and the PyTorch
   reference (train_tiny_dit.py --sample-ref) start from identical noise; --raw writes the samples
   as the script's --score / --compare read them.
   --cpu runs the same sampler in plain C (float32, sums in float64) with no GPU: the reference
   this file's GPU path and the PyTorch script are checked against. --selftest checks every GPU
   kernel against it.

   Storage formats: bf16 (weights as in the file, bf16 GEMM); int8 (W8A8: per-channel int8 weights,
   activations quantized per token); fp8 = fp8-w8a8 (e4m3 weights and per-token e4m3 activations on
   fp8 tensor cores) where the GPU has them (compute capability 8.9+), else fp8-upcast (e4m3
   weights, upcast to bf16 for each GEMM). Activations into the GEMMs are bf16, and so are attention's
   q, k, v and probabilities on the tensor cores (sm_80+); the residual stream, the GEMM outputs,
   the softmax's running max and sums and the sampler state are float32.

   Build: cc -std=c99 -O2 examples/diffuse.c -ldl -lm -o diffuse      (also as C++)
   Run:   ./diffuse [--storage int8] [--vram auto] [--steps 20] [--cfg 2] [--out out.png]
          ./diffuse --cpu --classes 2 --per-class 1 --steps 2           (no GPU needed) */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include "dit_common.h"
#include <errno.h>
#include <float.h>

#define DIT_PATH_DEFAULT "examples/tiny_dit.safetensors"
#define DIT_MAX_SAMPLES 2000

/* ==== options =================================================================================== */
typedef enum { DIT_VRAM_AUTO = 0, DIT_VRAM_ALL, DIT_VRAM_MIB } dit_vram_mode;
typedef struct dit_opts {
    const char *model, *png, *raw, *storage;
    int steps, classes, per_class, cpu, selftest, verbose;   /* steps/cfg 0 / NAN: from the file */
    double cfg;
    uint64_t seed;
    dit_vram_mode vram;
    uint64_t vram_mib;
} dit_opts;

static void usage(FILE *f) {
    fprintf(f,
        "usage: diffuse [options]\n"
        "  --model PATH        checkpoint (default " DIT_PATH_DEFAULT ")\n"
        "  --storage FMT       bf16 | int8 (default) | fp8 (= fp8-w8a8 on cc >= 8.9, else fp8-upcast) |\n"
        "                      fp8-w8a8 | fp8-upcast\n"
        "  --vram auto|all|MiB the whole VRAM budget of lwo's arena. auto (default): activations and\n"
        "                      workspace plus about a quarter of the weights, so most weights stream;\n"
        "                      all: enough for every weight to stay resident\n"
        "  --steps N           Euler steps (default: the file's lwo.steps)\n"
        "  --cfg S             classifier-free guidance scale, 1 = off (default: the file's lwo.cfg_scale)\n"
        "  --seed N            noise seed (default 0)\n"
        "  --classes K         classes 0..K-1 (default 10)\n"
        "  --per-class N       samples per class (default 10); sample i has class i / N\n"
        "  --out PATH          PNG grid, a row per class (default out.png; '-' for none)\n"
        "  --raw PATH          float32 samples [K*N, 28, 28] (default samples.f32; '-' for none)\n"
        "  --cpu               the plain-C reference sampler (no GPU; slow: use few steps and samples)\n"
        "  --selftest          check every GPU kernel against the CPU reference, and graph, streamed\n"
        "                      and eager runs against each other; ends with 'N passed, N failed'\n"
        "  --verbose           lwo's log at info level\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    unsigned long long v;
    if (!s || !*s || *s == '-') return 0;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_opts(int argc, char **argv, dit_opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->model = DIT_PATH_DEFAULT; o->png = "out.png"; o->raw = "samples.f32"; o->storage = "int8";
    o->classes = 10; o->per_class = 10; o->cfg = NAN;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        int takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--cpu")) { o->cpu = 1; takes = 0; }
        else if (!strcmp(a, "--selftest")) { o->selftest = 1; takes = 0; }
        else if (!strcmp(a, "--verbose")) { o->verbose = 1; takes = 0; }
        else if (!v) { fprintf(stderr, "diffuse: %s needs a value (or is unknown)\n", a); return 0; }
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--out")) o->png = v;
        else if (!strcmp(a, "--raw")) o->raw = v;
        else if (!strcmp(a, "--storage")) {
            if (strcmp(v, "bf16") && strcmp(v, "int8") && strcmp(v, "fp8") && strcmp(v, "fp8-w8a8") && strcmp(v, "fp8-upcast")) {
                fprintf(stderr, "diffuse: --storage %s: want bf16, int8, fp8, fp8-w8a8 or fp8-upcast\n", v); return 0;
            }
            o->storage = v;
        } else if (!strcmp(a, "--vram")) {
            if (!strcmp(v, "auto")) o->vram = DIT_VRAM_AUTO;
            else if (!strcmp(v, "all")) o->vram = DIT_VRAM_ALL;
            else if (parse_u64(v, 1, 1u << 24, &u)) { o->vram = DIT_VRAM_MIB; o->vram_mib = u; }
            else { fprintf(stderr, "diffuse: --vram %s: want auto, all or a number of MiB (1 .. 16777216)\n", v); return 0; }
        } else if (!strcmp(a, "--steps")) {
            if (!parse_u64(v, 1, 100000, &u)) { fprintf(stderr, "diffuse: --steps %s: want an integer 1 .. 100000\n", v); return 0; }
            o->steps = (int)u;
        } else if (!strcmp(a, "--seed")) {
            if (!parse_u64(v, 0, UINT64_MAX, &u)) { fprintf(stderr, "diffuse: --seed %s: want an unsigned 64-bit integer\n", v); return 0; }
            o->seed = u;
        } else if (!strcmp(a, "--classes")) {
            if (!parse_u64(v, 1, 1000, &u)) { fprintf(stderr, "diffuse: --classes %s: want an integer 1 .. (the model's classes)\n", v); return 0; }
            o->classes = (int)u;
        } else if (!strcmp(a, "--per-class")) {
            if (!parse_u64(v, 1, DIT_MAX_SAMPLES, &u)) { fprintf(stderr, "diffuse: --per-class %s: want an integer 1 .. %d\n", v, DIT_MAX_SAMPLES); return 0; }
            o->per_class = (int)u;
        } else if (!strcmp(a, "--cfg")) {
            char *end;
            double d;
            errno = 0;
            d = strtod(v, &end);
            if (errno || *end || !(d >= 0.0 && d <= 100.0)) { fprintf(stderr, "diffuse: --cfg %s: want a number 0 .. 100\n", v); return 0; }
            o->cfg = d;
        } else { fprintf(stderr, "diffuse: unknown option %s (--help lists them)\n", a); return 0; }
        i += takes;
    }
    if ((uint64_t)o->classes * (uint64_t)o->per_class > DIT_MAX_SAMPLES) {
        fprintf(stderr, "diffuse: %d classes x %d per class is more than %d samples\n", o->classes, o->per_class, DIT_MAX_SAMPLES);
        return 0;
    }
    if (o->cpu && o->selftest) { fprintf(stderr, "diffuse: --cpu and --selftest exclude each other\n"); return 0; }
    return 1;
}

/* ==== the checkpoint ============================================================================= */
typedef struct dit_arch {
    int D, depth, heads, hd, p, img, C, classes, null_class, mlp, tdim, G, T, P;
    float eps, time_scale, neg_log_period;
    int steps;      /* the file's defaults */
    double cfg;
} dit_arch;

/* One nn.Linear of the checkpoint: W [rows, cols] and bias [rows], bf16 in the mapped file. */
typedef struct dit_lin { char name[64]; uint64_t rows, cols; const void *w, *b; } dit_lin;

typedef struct dit_file {
    lwo_safetensors *f;
    dit_arch a;
    dit_lin *lin;    /* every linear in use order (see dit_lin_index) */
    int nlin;
    const void *pos, *ytab;   /* bf16 [T, D], bf16 [classes + 1, D] */
} dit_file;

/* Use order of the linears: t_embedder.mlp.0, .2, x_embedder, per block (adaLN, qkv, proj, fc1,
   fc2), final adaLN, final linear -- the order the forward pass calls them. */
enum { DIT_L_T0 = 0, DIT_L_T2, DIT_L_XEMB, DIT_L_BLOCK0 };
enum { DIT_B_ADA = 0, DIT_B_QKV, DIT_B_PROJ, DIT_B_FC1, DIT_B_FC2, DIT_B_COUNT };
static int dit_lin_block(const dit_arch *a, int block, int which) { (void)a; return DIT_L_BLOCK0 + block * DIT_B_COUNT + which; }
static int dit_lin_fada(const dit_arch *a) { return DIT_L_BLOCK0 + a->depth * DIT_B_COUNT; }
static int dit_lin_flin(const dit_arch *a) { return DIT_L_BLOCK0 + a->depth * DIT_B_COUNT + 1; }

static int meta_int(lwo_safetensors *f, const char *key, int lo, int hi, int *out, char *err, size_t n) {
    const char *v = lwo_safetensors_metadata_find(f, key);
    uint64_t u;
    if (!v) { snprintf(err, n, "metadata %s is missing", key); return 0; }
    if (!parse_u64(v, (uint64_t)lo, (uint64_t)hi, &u)) { snprintf(err, n, "metadata %s = '%s' is not an integer in %d .. %d", key, v, lo, hi); return 0; }
    *out = (int)u;
    return 1;
}

static int meta_num(lwo_safetensors *f, const char *key, double lo, double hi, double *out, char *err, size_t n) {
    const char *v = lwo_safetensors_metadata_find(f, key);
    char *end;
    if (!v) { snprintf(err, n, "metadata %s is missing", key); return 0; }
    errno = 0;
    *out = strtod(v, &end);
    if (errno || *end || !(*out >= lo && *out <= hi)) { snprintf(err, n, "metadata %s = '%s' is not a number in %g .. %g", key, v, lo, hi); return 0; }
    return 1;
}

/* A bf16 tensor of the given shape (cols 0: a vector of rows). */
static const void *file_tensor(lwo_safetensors *f, const char *name, uint64_t rows, uint64_t cols, char *err, size_t n) {
    const lwo_st_tensor *t = lwo_safetensors_find(f, name);
    if (!t) { snprintf(err, n, "tensor %s is missing", name); return NULL; }
    if (t->dtype != LWO_ST_BF16) { snprintf(err, n, "tensor %s is %s, not BF16", name, lwo_st_dtype_name(t->dtype)); return NULL; }
    if ((cols == 0 && (t->ndim != 1 || t->shape[0] != rows)) || (cols && (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols))) {
        if (cols) snprintf(err, n, "tensor %s: want shape [%llu, %llu]", name, (unsigned long long)rows, (unsigned long long)cols);
        else snprintf(err, n, "tensor %s: want shape [%llu]", name, (unsigned long long)rows);
        return NULL;
    }
    return t->data;
}

static int file_lin(dit_file *df, int i, const char *prefix, uint64_t rows, uint64_t cols, char *err, size_t n) {
    char name[96];
    dit_lin *l = &df->lin[i];
    snprintf(l->name, sizeof l->name, "%s.weight", prefix);
    l->rows = rows; l->cols = cols;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (!(l->w = file_tensor(df->f, name, rows, cols, err, n))) return 0;
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (!(l->b = file_tensor(df->f, name, rows, 0, err, n))) return 0;
    return 1;
}

static void file_close(dit_file *df) {
    lwo_safetensors_close(df->f);
    free(df->lin);
    memset(df, 0, sizeof *df);
}

/* Opens the checkpoint and checks it is the architecture this program implements, op by op. */
static int file_open(const char *path, dit_file *df, char *err, size_t n) {
    dit_arch *a = &df->a;
    const char *v;
    double d;
    int i, ok = 1;
    lwo_result r;
    memset(df, 0, sizeof *df);
    r = lwo_safetensors_open(path, &df->f);
    if (r) { snprintf(err, n, "%.200s: %s: %.250s", path, lwo_result_string(r), df->f ? lwo_safetensors_error(df->f) : "out of memory"); return 0; }
    v = lwo_safetensors_metadata_find(df->f, "lwo.arch");
    if (!v || strcmp(v, "tiny-dit-v1")) { snprintf(err, n, "%s: metadata lwo.arch is '%s', not tiny-dit-v1", path, v ? v : "(missing)"); return 0; }
    v = lwo_safetensors_metadata_find(df->f, "lwo.gelu");
    if (!v || strcmp(v, "tanh")) { snprintf(err, n, "%s: metadata lwo.gelu is '%s', not tanh", path, v ? v : "(missing)"); return 0; }
    v = lwo_safetensors_metadata_find(df->f, "lwo.sampler");
    if (!v || strcmp(v, "rectified-flow-euler")) { snprintf(err, n, "%s: metadata lwo.sampler is '%s', not rectified-flow-euler", path, v ? v : "(missing)"); return 0; }
    ok = meta_int(df->f, "lwo.hidden", 32, 8192, &a->D, err, n) && meta_int(df->f, "lwo.depth", 1, 256, &a->depth, err, n) &&
         meta_int(df->f, "lwo.heads", 1, 256, &a->heads, err, n) && meta_int(df->f, "lwo.head_dim", 1, 1024, &a->hd, err, n) &&
         meta_int(df->f, "lwo.patch", 1, 64, &a->p, err, n) && meta_int(df->f, "lwo.image_size", 1, 4096, &a->img, err, n) &&
         meta_int(df->f, "lwo.channels", 1, 16, &a->C, err, n) && meta_int(df->f, "lwo.num_classes", 1, 100000, &a->classes, err, n) &&
         meta_int(df->f, "lwo.null_class", 0, 100000, &a->null_class, err, n) && meta_int(df->f, "lwo.mlp_hidden", 1, 65536, &a->mlp, err, n) &&
         meta_int(df->f, "lwo.time_embed_dim", 2, 65536, &a->tdim, err, n) && meta_int(df->f, "lwo.steps", 1, 100000, &a->steps, err, n) &&
         meta_num(df->f, "lwo.cfg_scale", 0, 100, &a->cfg, err, n);
    if (!ok) return 0;
    if (!meta_num(df->f, "lwo.eps", 0, 1, &d, err, n)) return 0;
    a->eps = (float)d;
    if (!meta_num(df->f, "lwo.time_scale", 0, 1e9, &d, err, n)) return 0;
    a->time_scale = (float)d;
    if (!meta_num(df->f, "lwo.time_max_period", 1, 1e30, &d, err, n)) return 0;
    a->neg_log_period = (float)-log(d);   /* the script: -math.log(10000) as a float32 scalar */
    if (a->D != a->heads * a->hd || a->img % a->p || a->tdim % 2 || a->null_class != a->classes) {
        snprintf(err, n, "%s: inconsistent architecture (hidden %d, heads %d x %d, image %d, patch %d, time dim %d, null class %d of %d)",
                 path, a->D, a->heads, a->hd, a->img, a->p, a->tdim, a->null_class, a->classes);
        return 0;
    }
    a->G = a->img / a->p; a->T = a->G * a->G; a->P = a->p * a->p * a->C;
    df->nlin = DIT_L_BLOCK0 + a->depth * DIT_B_COUNT + 2;
    df->lin = (dit_lin *)calloc((size_t)df->nlin, sizeof *df->lin);
    if (!df->lin) { snprintf(err, n, "out of memory"); return 0; }
    ok = file_lin(df, DIT_L_T0, "t_embedder.mlp.0", (uint64_t)a->D, (uint64_t)a->tdim, err, n) &&
         file_lin(df, DIT_L_T2, "t_embedder.mlp.2", (uint64_t)a->D, (uint64_t)a->D, err, n) &&
         file_lin(df, DIT_L_XEMB, "x_embedder", (uint64_t)a->D, (uint64_t)a->P, err, n);
    for (i = 0; ok && i < a->depth; i++) {
        char pre[64];
        uint64_t D = (uint64_t)a->D;
        snprintf(pre, sizeof pre, "blocks.%d.adaLN_modulation.1", i); ok = ok && file_lin(df, dit_lin_block(a, i, DIT_B_ADA), pre, 6 * D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.attn.qkv", i);          ok = ok && file_lin(df, dit_lin_block(a, i, DIT_B_QKV), pre, 3 * D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.attn.proj", i);         ok = ok && file_lin(df, dit_lin_block(a, i, DIT_B_PROJ), pre, D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.mlp.fc1", i);           ok = ok && file_lin(df, dit_lin_block(a, i, DIT_B_FC1), pre, (uint64_t)a->mlp, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.mlp.fc2", i);           ok = ok && file_lin(df, dit_lin_block(a, i, DIT_B_FC2), pre, D, (uint64_t)a->mlp, err, n);
    }
    ok = ok && file_lin(df, dit_lin_fada(a), "final_layer.adaLN_modulation.1", 2 * (uint64_t)a->D, (uint64_t)a->D, err, n) &&
         file_lin(df, dit_lin_flin(a), "final_layer.linear", (uint64_t)a->P, (uint64_t)a->D, err, n);
    if (!ok) return 0;
    if (!(df->pos = file_tensor(df->f, "pos_embed", (uint64_t)a->T, (uint64_t)a->D, err, n))) return 0;
    if (!(df->ytab = file_tensor(df->f, "y_embedder.embedding_table.weight", (uint64_t)a->classes + 1, (uint64_t)a->D, err, n))) return 0;
    return 1;
}

/* bf16 from the mapping (no alignment assumed) */
static float bf16_at(const void *p, uint64_t i) {
    uint16_t h;
    memcpy(&h, (const unsigned char *)p + 2 * i, 2);
    return lwo_ref_bf16_to_f32(h);
}
static float *bf16_to_f32_array(const void *p, uint64_t n) {
    float *o = (float *)malloc((size_t)n * sizeof *o);
    uint64_t i;
    if (o) for (i = 0; i < n; i++) o[i] = bf16_at(p, i);
    return o;
}

/* ==== the CPU reference: every op of the GPU path, in float32 with sums in float64 ============== */
/* Each function computes what the kernel of the same name in dit_kernels.cu computes, in the same
   layout; where the kernel rounds to bf16 (its outputs feeding lwo_linear) these keep float32, so
   the sampler below is the float32 model of the PyTorch reference. */
static float ref_t_at(int i, int steps) { return (float)((double)(steps - i) / (double)steps); }

static void ref_patchify(const float *x, int N, int Bt, int C, int H, int W, int p, float *tok) {
    int G = W / p, T = (H / p) * G, P = p * p * C, b, n, e;
    for (b = 0; b < Bt; b++) for (n = 0; n < T; n++) for (e = 0; e < P; e++) {
        int ch = e % C, pp = e / C, py = pp / p, px = pp % p, r = n / G, c = n % G, s = b < N ? b : b - N;
        tok[((size_t)b * T + n) * P + e] = x[(((size_t)s * C + ch) * H + (size_t)(r * p + py)) * W + (size_t)(c * p + px)];
    }
}

static void ref_time_embed(float t, int Bt, int dim, float time_scale, float neg_log_period, float *out) {
    int half = dim / 2, b, k;
    for (b = 0; b < Bt; b++) for (k = 0; k < half; k++) {
        float f = expf((neg_log_period * (float)k) / (float)half);
        float a = (t * time_scale) * f;
        out[(size_t)b * dim + k] = cosf(a);
        out[(size_t)b * dim + half + k] = sinf(a);
    }
}

static float ref_silu1(float x) { return x / (1.0f + expf(-x)); }
static void ref_silu(const float *x, uint64_t n, float *y) { uint64_t i; for (i = 0; i < n; i++) y[i] = ref_silu1(x[i]); }

static void ref_condition(const float *te, const float *table, int rows, const int *labels, int Bt, int D, float *sc) {
    int b, d;
    for (b = 0; b < Bt; b++) {
        int l = labels[b] < 0 || labels[b] >= rows ? rows - 1 : labels[b];
        for (d = 0; d < D; d++) sc[(size_t)b * D + d] = ref_silu1(te[(size_t)b * D + d] + table[(size_t)l * D + d]);
    }
}

static void ref_embed_pos(const float *e, const float *pos, uint64_t M, int T, int D, float *h) {
    uint64_t m;
    int d;
    for (m = 0; m < M; m++) for (d = 0; d < D; d++) h[m * D + d] = e[m * D + d] + pos[(m % T) * D + d];
}

static void ref_ln_modulate(const float *h, uint64_t M, int D, int T, const float *mod, int stride, int shift_off, int scale_off,
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

static void ref_gate_residual(float *h, const float *y, uint64_t M, int D, int T, const float *mod, int stride, int gate_off) {
    uint64_t m;
    int d;
    for (m = 0; m < M; m++) for (d = 0; d < D; d++) h[m * D + d] = h[m * D + d] + mod[(m / T) * stride + gate_off + d] * y[m * D + d];
}

static float ref_gelu1(float v) {
    float cube = (v * v) * v;
    float inner = 0.7978845608028654f * (v + 0.044715f * cube);
    return (0.5f * v) * (1.0f + tanhf(inner));
}
static void ref_gelu(const float *x, uint64_t n, float *y) { uint64_t i; for (i = 0; i < n; i++) y[i] = ref_gelu1(x[i]); }

/* softmax(q k^T * scale) v per (sample, head), in float64; qkv [Bt * T, 3D], out [Bt * T, D] */
static void ref_attention(const float *qkv, int Bt, int T, int D, int heads, float scale, double *sbuf, float *out) {
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

static void ref_euler(float *x, const float *o, float dt, int N, int C, int H, int W, int p, int cfg_on, float cfg) {
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
static void ref_linear(const float *x, uint64_t M, uint64_t K, const float *w, const float *b, uint64_t N, float *y) {
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
    float **w, **b;          /* per linear, in dit_file order */
    float *pos, *ytab;
    int Bt;
    float *tok, *temb, *th, *te, *sc, *h, *tmp, *act, *big, *mod, *out;
    double *sbuf;
    int *lab;                /* [Bt]: the labels, then the null class for the CFG half */
} cpu_model;

static void cpu_free(cpu_model *cm, int nlin) {
    int i;
    for (i = 0; cm->w && i < nlin; i++) { free(cm->w[i]); free(cm->b[i]); }
    free(cm->w); free(cm->b); free(cm->pos); free(cm->ytab);
    free(cm->tok); free(cm->temb); free(cm->th); free(cm->te); free(cm->sc); free(cm->h); free(cm->tmp); free(cm->act);
    free(cm->big); free(cm->mod); free(cm->out); free(cm->sbuf); free(cm->lab);
    memset(cm, 0, sizeof *cm);
}

static int cpu_init(cpu_model *cm, const dit_file *df, int Bt) {
    const dit_arch *a = &df->a;
    size_t M = (size_t)Bt * a->T, wide = (size_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D);
    int i;
    memset(cm, 0, sizeof *cm);
    cm->a = a; cm->Bt = Bt;
    cm->w = (float **)calloc((size_t)df->nlin, sizeof *cm->w);
    cm->b = (float **)calloc((size_t)df->nlin, sizeof *cm->b);
    if (!cm->w || !cm->b) return 0;
    for (i = 0; i < df->nlin; i++) {
        cm->w[i] = bf16_to_f32_array(df->lin[i].w, df->lin[i].rows * df->lin[i].cols);
        cm->b[i] = bf16_to_f32_array(df->lin[i].b, df->lin[i].rows);
        if (!cm->w[i] || !cm->b[i]) return 0;
    }
    cm->pos = bf16_to_f32_array(df->pos, (uint64_t)a->T * a->D);
    cm->ytab = bf16_to_f32_array(df->ytab, (uint64_t)(a->classes + 1) * a->D);
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
static void cpu_forward(cpu_model *cm, const float *x, int N, float t, const int *labels) {
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
static int cpu_sample(const dit_file *df, float *x, int N, const int *labels, int steps, double cfg, double *secs) {
    cpu_model cm;
    int cfg_on = cfg != 1.0, Bt = cfg_on ? 2 * N : N, i;
    const dit_arch *a = &df->a;
    double t0;
    if (!cpu_init(&cm, df, Bt)) { cpu_free(&cm, df->nlin); fprintf(stderr, "diffuse: out of memory\n"); return 0; }
    t0 = dit_now_s();
    for (i = 0; i < steps; i++) {
        cpu_forward(&cm, x, N, ref_t_at(i, steps), labels);
        ref_euler(x, cm.out, ref_t_at(i + 1, steps) - ref_t_at(i, steps), N, a->C, a->img, a->img, a->p, cfg_on, (float)cfg);
        dit_progress("cpu", i + 1, steps, dit_now_s() - t0);
    }
    *secs = dit_now_s() - t0;
    cpu_free(&cm, df->nlin);
    return 1;
}

/* ==== output: PNG (stored deflate, CRC-32, Adler-32) and raw float32 ============================ */
static uint32_t png_crc(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t table[256], c;
    size_t i;
    int k;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    crc = ~crc;
    for (i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void put_be32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v; }

static int png_chunk(FILE *f, const char *type, const unsigned char *data, size_t n) {
    unsigned char hdr[8], tail[4];
    uint32_t crc;
    put_be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    crc = png_crc(png_crc(0, hdr + 4, 4), data, n);
    put_be32(tail, crc);
    return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4;
}

/* An 8-bit grayscale PNG of w x h pixels; the zlib stream is stored blocks (no compression). */
static int png_write(const char *path, const unsigned char *pix, int w, int h) {
    size_t raw = (size_t)h * (w + 1), nblk = raw / 65535 + 1, zn = 2 + raw + 5 * nblk + 4, i, at = 0, pos;
    unsigned char *z = (unsigned char *)malloc(zn), ihdr[13];
    uint32_t a1 = 1, a2 = 0;
    FILE *f;
    int ok;
    if (!z) return 0;
    z[at++] = 0x78; z[at++] = 0x01;               /* deflate, 32K window, no dictionary, check bits */
    for (pos = 0, i = 0; i < nblk; i++) {
        size_t len = raw - pos < 65535 ? raw - pos : 65535, k;
        z[at++] = (unsigned char)(i + 1 == nblk);   /* BFINAL, BTYPE 00 */
        z[at++] = (unsigned char)len; z[at++] = (unsigned char)(len >> 8);
        z[at++] = (unsigned char)~len; z[at++] = (unsigned char)(~len >> 8);
        for (k = 0; k < len; k++, pos++) {
            size_t yy = pos / (w + 1), xx = pos % (w + 1);
            unsigned char v = xx == 0 ? 0 : pix[yy * w + xx - 1];   /* filter byte 0 per scanline */
            z[at++] = v;
            a1 = (a1 + v) % 65521; a2 = (a2 + a1) % 65521;
        }
    }
    put_be32(z + at, (a2 << 16) | a1); at += 4;
    put_be32(ihdr, (uint32_t)w); put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8; ihdr[9] = 0; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;   /* 8-bit gray, no interlace */
    f = fopen(path, "wb");
    if (!f) { free(z); return 0; }
    ok = fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && png_chunk(f, "IHDR", ihdr, 13) && png_chunk(f, "IDAT", z, at) && png_chunk(f, "IEND", NULL, 0);
    ok = (fclose(f) == 0) && ok;
    free(z);
    return ok;
}

/* The samples as a grid: a row per class, a column per sample, 2-pixel white borders, 3x zoom. */
static int write_grid(const char *path, const float *s, int classes, int per_class, int img) {
    const int pad = 2, zoom = 3, cell = img + pad;
    int W = (per_class * cell + pad) * zoom, H = (classes * cell + pad) * zoom, x, y, ok;
    unsigned char *pix = (unsigned char *)malloc((size_t)W * H);
    if (!pix) return 0;
    for (y = 0; y < H; y++) for (x = 0; x < W; x++) {
        int gx = x / zoom, gy = y / zoom, cx = gx % cell - pad, cy = gy % cell - pad, c = gx / cell, r = gy / cell;
        unsigned char v = 255;
        if (cx >= 0 && cy >= 0 && c < per_class && r < classes) {
            double f = ((double)s[((size_t)r * per_class + c) * img * img + (size_t)cy * img + cx] + 1.0) * 127.5 + 0.5;
            v = (unsigned char)(f < 0 ? 0 : f > 255 ? 255 : f);
        }
        pix[(size_t)y * W + x] = v;
    }
    ok = png_write(path, pix, W, H);
    free(pix);
    return ok;
}

static int write_raw(const char *path, const float *s, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = fwrite(s, sizeof *s, n, f) == n;   /* little-endian hosts: the script reads '<f4' */
    return (fclose(f) == 0) && ok;
}

static int write_outputs(const dit_opts *o, const float *x, int N, int img) {
    size_t i, n = (size_t)N * img * img;
    float *s = (float *)malloc(n * sizeof *s);
    int ok = 1;
    if (!s) return 0;
    for (i = 0; i < n; i++) s[i] = x[i] < -1.0f ? -1.0f : x[i] > 1.0f ? 1.0f : x[i];   /* the script's clamp */
    if (strcmp(o->raw, "-")) {
        if (write_raw(o->raw, s, n)) printf("wrote %s (%d samples, float32 [%d, %d, %d])\n", o->raw, N, N, img, img);
        else { fprintf(stderr, "diffuse: cannot write %s: %s\n", o->raw, strerror(errno)); ok = 0; }
    }
    if (strcmp(o->png, "-")) {
        if (write_grid(o->png, s, o->classes, o->per_class, img)) printf("wrote %s (%d classes x %d samples)\n", o->png, o->classes, o->per_class);
        else { fprintf(stderr, "diffuse: cannot write %s: %s\n", o->png, strerror(errno)); ok = 0; }
    }
    free(s);
    return ok;
}

/* ==== the GPU path ================================================================================ */
typedef struct dit_gpu {
    lwo_context *ctx;
    lwo_module *kern;
    const dit_arch *a;
    lwo_format format;
    int N, Bt, steps, cfg_on, verbose;
    int cc;                   /* compute capability, major * 10 + minor */
    float cfg;
    uint64_t M, workspace;
    uint64_t graph_bytes;     /* weight bytes one replay of the step graph streams */
    lwo_weight **w;           /* per linear, dit_file order */
    int nlin;
    /* device tensors: state, step counter, labels, constants, activations (and views of them) */
    lwo_tensor *x, *counter, *labels, *pos, *ytab;
    lwo_tensor *temb, *th, *thb, *te, *sc, *tok, *h, *tmp, *act, *big, *gel, *mod, *out;
    lwo_tensor *qkvb;         /* q, k, v as bf16 for the flash attention kernel */
    lwo_tensor *v_qkv, *v_fc1, *v_mod6, *v_mod2;
} dit_gpu;

static const char *format_name(lwo_format f) {
    switch (f) {
    case LWO_FORMAT_BF16: return "bf16";
    case LWO_FORMAT_F16: return "f16";
    case LWO_FORMAT_FP8_E4M3: return "fp8 e4m3 (upcast to bf16)";
    case LWO_FORMAT_FP8_E5M2: return "fp8 e5m2 (upcast to bf16)";
    case LWO_FORMAT_INT8: return "int8 W8A8";
    case LWO_FORMAT_FP8_E4M3_W8A8: return "fp8 e4m3 W8A8";
    default: return "?";
    }
}

static lwo_format storage_format(const char *s, int cc) {
    if (!strcmp(s, "bf16")) return LWO_FORMAT_BF16;
    if (!strcmp(s, "int8")) return LWO_FORMAT_INT8;
    if (!strcmp(s, "fp8-upcast")) return LWO_FORMAT_FP8_E4M3;
    if (!strcmp(s, "fp8-w8a8")) return LWO_FORMAT_FP8_E4M3_W8A8;
    return cc >= 89 ? LWO_FORMAT_FP8_E4M3_W8A8 : LWO_FORMAT_FP8_E4M3;
}

static uint64_t round256(uint64_t v) { return (v + 255) / 256 * 256; }

/* Activation tensors, in the order dit_gpu_alloc makes them. */
static uint64_t activation_bytes(const dit_arch *a, uint64_t N, uint64_t Bt) {
    uint64_t M = Bt * a->T, D = (uint64_t)a->D, wide = (uint64_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D);
    return round256(N * a->C * a->img * a->img * 4) + 256 + round256(Bt * 4) + round256((uint64_t)a->T * D * 2) +
           round256((uint64_t)(a->classes + 1) * D * 2) + round256(Bt * a->tdim * 2) + round256(Bt * D * 4) + round256(Bt * D * 2) +
           round256(Bt * D * 4) + round256(Bt * D * 2) + round256(M * a->P * 2) + 2 * round256(M * D * 4) + round256(M * D * 2) +
           round256(M * wide * 4) + round256(M * (uint64_t)a->mlp * 2) + round256(Bt * 6 * D * 4) + round256(M * a->P * 4) +
           round256(M * 3 * D * 2);
}

/* The desc of a linear's weight: the checkpoint's bf16 data and bias, stored as `format`. */
static lwo_weight_desc dit_weight_desc(const dit_lin *l, lwo_format format, lwo_placement placement) {
    lwo_weight_desc wd;
    memset(&wd, 0, sizeof wd);
    wd.rows = l->rows; wd.cols = l->cols;
    wd.data = l->w; wd.data_dtype = LWO_DTYPE_BF16;
    wd.bias = l->b; wd.bias_dtype = LWO_DTYPE_BF16;
    wd.format = format;
    wd.placement = (int)placement;
    return wd;
}

#define DIT_TRY(call, what) do { lwo_result dit__r = (call); if (dit__r) { \
    fprintf(stderr, "diffuse: %s failed: %s\n  %s\n", (what), lwo_result_string(dit__r), lwo_last_error(g->ctx)); return dit__r; } } while (0)

static lwo_result tensor2(dit_gpu *g, lwo_dtype dt, uint64_t rows, uint64_t cols, lwo_tensor **t) {
    uint64_t shape[2];
    shape[0] = rows; shape[1] = cols;
    return lwo_tensor_create(g->ctx, dt, cols ? 2 : 1, shape, t);
}
static lwo_result view2(dit_gpu *g, const lwo_tensor *of, lwo_dtype dt, uint64_t rows, uint64_t cols, lwo_tensor **t) {
    uint64_t shape[2];
    shape[0] = rows; shape[1] = cols;
    return lwo_tensor_wrap(g->ctx, lwo_tensor_device_ptr(of), dt, 2, shape, t);
}

/* lwo's warnings (and with --verbose its info) on stderr; its errors reach the user through
   lwo_last_error, printed where a call fails. */
static void dit_log(void *user, lwo_log_level level, const char *msg) {
    if (level != LWO_LOG_ERROR || *(const int *)user) fprintf(stderr, "lwo: %s\n", msg);
}

/* Creates the context under the budget, the weights, the activations; plans the streaming. */
static lwo_result dit_gpu_open(dit_gpu *g, const dit_file *df, const dit_opts *o, int N, dit_vram_mode vram, uint64_t vram_mib,
                               int steps, double cfg, int verbose) {
    const dit_arch *a = &df->a;
    lwo_desc desc;
    lwo_device_info info;
    lwo_result r;
    uint64_t wbytes = 0, largest = 0, act, budget, D = (uint64_t)a->D, wide = (uint64_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D);
    int i, cc;
    memset(g, 0, sizeof *g);
    g->verbose = verbose;
    g->a = a; g->N = N; g->steps = steps; g->cfg_on = cfg != 1.0; g->cfg = (float)cfg;
    g->Bt = g->cfg_on ? 2 * N : N;
    g->M = (uint64_t)g->Bt * a->T;
    g->nlin = df->nlin;
    memset(&desc, 0, sizeof desc);
    desc.log = dit_log;
    desc.log_user = &g->verbose;
    desc.log_level = verbose ? LWO_LOG_INFO : LWO_LOG_WARN;
    /* a probe context tells the compute capability (fp8 W8A8 or not) before the budget is known */
    desc.vram_budget = 16ull << 20;
    r = lwo_create(&desc, &g->ctx);
    if (r) { fprintf(stderr, "diffuse: lwo_create failed: %s\n  %s\n  (--cpu runs the CPU reference sampler without a GPU)\n", lwo_result_string(r), lwo_last_error(g->ctx)); return r; }
    lwo_device_info_get(g->ctx, &info);
    cc = info.cc_major * 10 + info.cc_minor;
    g->cc = cc;
    g->format = storage_format(o->storage, cc);
    {   /* lwo's own sizes: each weight's VRAM, and what a plan reserves for lwo_linear on all of them */
        lwo_weight_desc *wd = (lwo_weight_desc *)calloc((size_t)df->nlin, sizeof *wd);
        if (!wd) { lwo_destroy(g->ctx); g->ctx = NULL; return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        for (i = 0; i < df->nlin; i++) {
            uint64_t b;
            wd[i] = dit_weight_desc(&df->lin[i], g->format, LWO_PLACE_AUTO);
            b = lwo_weight_device_bytes(&wd[i]);
            wbytes += b;
            if (b > largest) largest = b;
        }
        g->workspace = lwo_linear_workspace_bytes(g->ctx, wd, (size_t)df->nlin, g->M);
        free(wd);
    }
    lwo_destroy(g->ctx);
    g->ctx = NULL;
    act = activation_bytes(a, (uint64_t)N, (uint64_t)g->Bt);
    /* auto: activations + workspace + the ring (4 slots of the largest weight) + a quarter of the
       weights (+ 512 KiB for lwo's own rounding and scratch): most weights stream */
    if (vram == DIT_VRAM_MIB) budget = vram_mib << 20;
    else if (vram == DIT_VRAM_ALL) budget = act + g->workspace + wbytes + (4ull << 20);
    else budget = act + g->workspace + 4 * largest + wbytes / 4 + (512u << 10);
    desc.vram_budget = budget;
    r = lwo_create(&desc, &g->ctx);
    if (r) { fprintf(stderr, "diffuse: lwo_create (budget %.1f MiB) failed: %s\n  %s\n", budget / 1048576.0, lwo_result_string(r), lwo_last_error(g->ctx)); return r; }
    printf("lwo %d.%d.%d on %s (compute %d.%d, %s); weights %s, budget %.1f MiB (%s): activations %.1f MiB, "
           "workspace %.1f MiB, weights %.1f MiB\n", LWO_VERSION_MAJOR, LWO_VERSION_MINOR, LWO_VERSION_PATCH, info.name, info.cc_major,
           info.cc_minor, info.arch, format_name(g->format), budget / 1048576.0, vram == DIT_VRAM_AUTO ? "auto" : vram == DIT_VRAM_ALL ? "all" : "--vram",
           act / 1048576.0, g->workspace / 1048576.0, wbytes / 1048576.0);
    fflush(stdout);
    DIT_TRY(dit_module_compile(g->ctx, &g->kern), "compiling examples/dit_kernels.cu");
    g->w = (lwo_weight **)calloc((size_t)df->nlin, sizeof *g->w);
    if (!g->w) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < df->nlin; i++) {
        lwo_weight_desc wd = dit_weight_desc(&df->lin[i], g->format, LWO_PLACE_AUTO);
        r = lwo_weight_create(g->ctx, &wd, &g->w[i]);
        if (r) { fprintf(stderr, "diffuse: weight %s: %s\n  %s\n", df->lin[i].name, lwo_result_string(r), lwo_last_error(g->ctx)); return r; }
    }
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, (uint64_t)N * a->C * a->img * a->img, 0, &g->x), "allocating the state");
    DIT_TRY(tensor2(g, LWO_DTYPE_I32, 1, 0, &g->counter), "allocating the step counter");
    DIT_TRY(tensor2(g, LWO_DTYPE_I32, (uint64_t)g->Bt, 0, &g->labels), "allocating the labels");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, (uint64_t)a->T, D, &g->pos), "allocating pos_embed");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, (uint64_t)a->classes + 1, D, &g->ytab), "allocating the class table");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, (uint64_t)g->Bt, (uint64_t)a->tdim, &g->temb), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, (uint64_t)g->Bt, D, &g->th), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, (uint64_t)g->Bt, D, &g->thb), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, (uint64_t)g->Bt, D, &g->te), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, (uint64_t)g->Bt, D, &g->sc), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, g->M, (uint64_t)a->P, &g->tok), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, g->M, D, &g->h), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, g->M, D, &g->tmp), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, g->M, D, &g->act), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, g->M, wide, &g->big), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, g->M, (uint64_t)a->mlp, &g->gel), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, (uint64_t)g->Bt, 6 * D, &g->mod), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_F32, g->M, (uint64_t)a->P, &g->out), "allocating activations");
    DIT_TRY(tensor2(g, LWO_DTYPE_BF16, g->M, 3 * D, &g->qkvb), "allocating activations");
    DIT_TRY(view2(g, g->big, LWO_DTYPE_F32, g->M, 3 * D, &g->v_qkv), "a view");
    DIT_TRY(view2(g, g->big, LWO_DTYPE_F32, g->M, (uint64_t)a->mlp, &g->v_fc1), "a view");
    DIT_TRY(view2(g, g->mod, LWO_DTYPE_F32, (uint64_t)g->Bt, 6 * D, &g->v_mod6), "a view");
    DIT_TRY(view2(g, g->mod, LWO_DTYPE_F32, (uint64_t)g->Bt, 2 * D, &g->v_mod2), "a view");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->pos, df->pos, (uint64_t)a->T * D * 2), "uploading pos_embed");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->ytab, df->ytab, ((uint64_t)a->classes + 1) * D * 2), "uploading the class table");
    {
        lwo_streaming_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.max_rows = g->M;   /* the largest x of any linear: the token rows */
        DIT_TRY(lwo_streaming_plan(g->ctx, &sd), "lwo_streaming_plan");
    }
    return LWO_SUCCESS;
}

static void dit_gpu_close(dit_gpu *g) {
    lwo_destroy(g->ctx);   /* frees weights, tensors, module */
    free(g->w);
    memset(g, 0, sizeof *g);
}

/* Sets the state to x0 [N, C, H, W], the labels (cond, then null for the CFG half) and step 0. */
static lwo_result dit_gpu_reset(dit_gpu *g, const float *x0, const int *labels) {
    const dit_arch *a = g->a;
    int zero = 0, i;
    int *lab = (int *)malloc((size_t)g->Bt * sizeof *lab);
    lwo_result r;
    if (!lab) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < g->Bt; i++) lab[i] = i < g->N ? labels[i] : a->null_class;
    r = lwo_tensor_upload(g->ctx, g->labels, lab, (uint64_t)g->Bt * 4);
    free(lab);
    DIT_TRY(r, "uploading the labels");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->x, x0, (uint64_t)g->N * a->C * a->img * a->img * 4), "uploading the noise");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->counter, &zero, 4), "resetting the step counter");
    return LWO_SUCCESS;
}

static lwo_result k_ln_modulate(dit_gpu *g, const lwo_tensor *mod, int stride, int shift_off, int scale_off) {
    const dit_arch *a = g->a;
    uint64_t hp = lwo_tensor_device_ptr(g->h), mp = lwo_tensor_device_ptr(mod), op = lwo_tensor_device_ptr(g->act), M = g->M;
    int D = a->D, T = a->T;
    float eps = a->eps;
    void *args[10];
    args[0] = &hp; args[1] = &M; args[2] = &D; args[3] = &T; args[4] = &mp; args[5] = &stride; args[6] = &shift_off; args[7] = &scale_off;
    args[8] = &eps; args[9] = &op;
    return dit_launch_3d(g->ctx, g->kern, "dit_ln_modulate", (unsigned)((M + 7) / 8), 1, 1, 256, args);
}

static lwo_result k_gate(dit_gpu *g, int gate_off) {
    const dit_arch *a = g->a;
    uint64_t hp = lwo_tensor_device_ptr(g->h), yp = lwo_tensor_device_ptr(g->tmp), mp = lwo_tensor_device_ptr(g->mod), M = g->M;
    int D = a->D, T = a->T, stride = 6 * a->D;
    void *args[8];
    args[0] = &hp; args[1] = &yp; args[2] = &M; args[3] = &D; args[4] = &T; args[5] = &mp; args[6] = &stride; args[7] = &gate_off;
    return dit_launch_1d(g->ctx, g->kern, "dit_gate_residual", M * D, args);
}

/* flash attention on sm_80+ (through g->qkvb), the plain f32 kernel below (dit_common.h) */
static lwo_result k_attention(dit_gpu *g, const lwo_tensor *qkv, lwo_tensor *out) {
    const dit_arch *a = g->a;
    return dit_attention(g->ctx, g->kern, lwo_tensor_device_ptr(qkv), 3 * a->D, g->qkvb, g->Bt, a->T, a->D, a->hd,
                         (float)(1.0 / sqrt((double)a->hd)), lwo_tensor_device_ptr(out), a->D);
}

/* One denoising step, enqueued on the compute stream as one lwo pass (all of it capturable). */
static lwo_result dit_gpu_step(dit_gpu *g) {
    const dit_arch *a = g->a;
    lwo_context *ctx = g->ctx;
    uint64_t D = (uint64_t)a->D;
    int i, C = a->C, H = a->img, W = a->img, p = a->p, N = g->N, Bt = g->Bt, steps = g->steps, tdim = a->tdim, rows = a->classes + 1, Di = a->D, T = a->T;
    uint64_t xp = lwo_tensor_device_ptr(g->x), tokp = lwo_tensor_device_ptr(g->tok), cp = lwo_tensor_device_ptr(g->counter);
    uint64_t tembp = lwo_tensor_device_ptr(g->temb), thp = lwo_tensor_device_ptr(g->th), thbp = lwo_tensor_device_ptr(g->thb);
    uint64_t tep = lwo_tensor_device_ptr(g->te), ytp = lwo_tensor_device_ptr(g->ytab), labp = lwo_tensor_device_ptr(g->labels);
    uint64_t scp = lwo_tensor_device_ptr(g->sc), tmpp = lwo_tensor_device_ptr(g->tmp), posp = lwo_tensor_device_ptr(g->pos);
    uint64_t hp = lwo_tensor_device_ptr(g->h), bigp = lwo_tensor_device_ptr(g->big), gelp = lwo_tensor_device_ptr(g->gel);
    uint64_t outp = lwo_tensor_device_ptr(g->out), M = g->M, nth = (uint64_t)Bt * D, ngel = M * (uint64_t)a->mlp;
    float ts = a->time_scale, nlp = a->neg_log_period, cfg = g->cfg;
    int cfg_on = g->cfg_on;
    void *args[12];
    DIT_TRY(lwo_pass_begin(ctx), "lwo_pass_begin");
    args[0] = &xp; args[1] = &N; args[2] = &Bt; args[3] = &C; args[4] = &H; args[5] = &W; args[6] = &p; args[7] = &tokp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_patchify", M * a->P, args), "dit_patchify");
    args[0] = &cp; args[1] = &steps; args[2] = &Bt; args[3] = &tdim; args[4] = &ts; args[5] = &nlp; args[6] = &tembp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_time_embed", (uint64_t)Bt * (tdim / 2), args), "dit_time_embed");
    DIT_TRY(lwo_linear(ctx, NULL, g->temb, g->w[DIT_L_T0], NULL, g->th), "lwo_linear t_embedder.mlp.0");
    args[0] = &thp; args[1] = &nth; args[2] = &thbp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_silu_bf16", nth, args), "dit_silu_bf16");
    DIT_TRY(lwo_linear(ctx, NULL, g->thb, g->w[DIT_L_T2], NULL, g->te), "lwo_linear t_embedder.mlp.2");
    args[0] = &tep; args[1] = &ytp; args[2] = &rows; args[3] = &labp; args[4] = &Bt; args[5] = &Di; args[6] = &scp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_condition", nth, args), "dit_condition");
    DIT_TRY(lwo_linear(ctx, NULL, g->tok, g->w[DIT_L_XEMB], NULL, g->tmp), "lwo_linear x_embedder");
    args[0] = &tmpp; args[1] = &posp; args[2] = &M; args[3] = &T; args[4] = &Di; args[5] = &hp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_embed_pos", M * D, args), "dit_embed_pos");
    for (i = 0; i < a->depth; i++) {
        DIT_TRY(lwo_linear(ctx, NULL, g->sc, g->w[dit_lin_block(a, i, DIT_B_ADA)], NULL, g->v_mod6), "lwo_linear adaLN_modulation");
        DIT_TRY(k_ln_modulate(g, g->mod, 6 * Di, 0, Di), "dit_ln_modulate (msa)");
        DIT_TRY(lwo_linear(ctx, NULL, g->act, g->w[dit_lin_block(a, i, DIT_B_QKV)], NULL, g->v_qkv), "lwo_linear attn.qkv");
        DIT_TRY(k_attention(g, g->v_qkv, g->act), "dit_attention");
        DIT_TRY(lwo_linear(ctx, NULL, g->act, g->w[dit_lin_block(a, i, DIT_B_PROJ)], NULL, g->tmp), "lwo_linear attn.proj");
        DIT_TRY(k_gate(g, 2 * Di), "dit_gate_residual (msa)");
        DIT_TRY(k_ln_modulate(g, g->mod, 6 * Di, 3 * Di, 4 * Di), "dit_ln_modulate (mlp)");
        DIT_TRY(lwo_linear(ctx, NULL, g->act, g->w[dit_lin_block(a, i, DIT_B_FC1)], NULL, g->v_fc1), "lwo_linear mlp.fc1");
        args[0] = &bigp; args[1] = &ngel; args[2] = &gelp;
        DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_gelu_tanh_bf16", ngel, args), "dit_gelu_tanh_bf16");
        DIT_TRY(lwo_linear(ctx, NULL, g->gel, g->w[dit_lin_block(a, i, DIT_B_FC2)], NULL, g->tmp), "lwo_linear mlp.fc2");
        DIT_TRY(k_gate(g, 5 * Di), "dit_gate_residual (mlp)");
    }
    DIT_TRY(lwo_linear(ctx, NULL, g->sc, g->w[dit_lin_fada(a)], NULL, g->v_mod2), "lwo_linear final adaLN_modulation");
    DIT_TRY(k_ln_modulate(g, g->mod, 2 * Di, 0, Di), "dit_ln_modulate (final)");
    DIT_TRY(lwo_linear(ctx, NULL, g->act, g->w[dit_lin_flin(a)], NULL, g->out), "lwo_linear final_layer.linear");
    args[0] = &xp; args[1] = &outp; args[2] = &cp; args[3] = &steps; args[4] = &N; args[5] = &C; args[6] = &H; args[7] = &W;
    args[8] = &p; args[9] = &cfg_on; args[10] = &cfg;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_euler", (uint64_t)N * C * H * W, args), "dit_euler");
    args[0] = &cp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_step_advance", 1, args), "dit_step_advance");
    DIT_TRY(lwo_pass_end(ctx), "lwo_pass_end");
    return LWO_SUCCESS;
}

/* Two warm-up steps (eager: lwo learns the weight order and each use's compute time, grows its
   workspace and loads its GEMM modules -- none of which may happen inside a capture), a plan timed
   against them, then the state is reset and one step is captured as a graph. */
static lwo_result dit_gpu_capture(dit_gpu *g, const float *x0, const int *labels, lwo_graph **graph) {
    DIT_TRY(dit_gpu_reset(g, x0, labels), "reset");
    if (dit_gpu_step(g) || dit_gpu_step(g)) return LWO_ERROR_CUDA;   /* the first loads the modules: its timings are the host's */
    DIT_TRY(lwo_stream_synchronize(g->ctx, NULL), "the warm-up steps");
    {   /* planned again, timed against the warm-up steps (each use's compute time, the copy rate) */
        lwo_streaming_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.max_rows = g->M;
        DIT_TRY(lwo_streaming_plan(g->ctx, &sd), "lwo_streaming_plan");
    }
    DIT_TRY(dit_gpu_reset(g, x0, labels), "reset");
    DIT_TRY(lwo_graph_capture_begin(g->ctx), "lwo_graph_capture_begin");
    if (dit_gpu_step(g)) { lwo_pass_abort(g->ctx); return LWO_ERROR_CUDA; }   /* ends the pass and the capture */
    DIT_TRY(lwo_graph_capture_end(g->ctx, graph), "lwo_graph_capture_end");
    g->graph_bytes = lwo_graph_bytes_streamed(*graph);
    return LWO_SUCCESS;
}

static void print_stats(dit_gpu *g, int replays) {
    lwo_stats st;
    lwo_memory_stats ms;
    uint64_t wbytes = 0, total;
    int i;
    for (i = 0; i < g->nlin; i++) {   /* the weights' device bytes as lwo stores them */
        lwo_weight_info wi;
        if (lwo_weight_get_info(g->ctx, g->w[i], &wi)) continue;
        wbytes += lwo_tensor_bytes(wi.data) + (wi.bias ? lwo_tensor_bytes(wi.bias) : 0) + (wi.scales ? lwo_tensor_bytes(wi.scales) : 0);
    }
    lwo_stats_get(g->ctx, &st);
    lwo_memory_stats_get(g->ctx, &ms);
    printf("peak VRAM %.1f MiB of a %.1f MiB budget; weights resident %.2f MiB, ring %.2f MiB\n", ms.peak / 1048576.0, ms.budget / 1048576.0,
           st.resident_bytes / 1048576.0, st.ring_bytes / 1048576.0);
    /* the warm-up pass and every graph replay */
    total = st.bytes_streamed;
    printf("streamed %.2f MiB a step (%.2f MiB in all: %d graph replays and the warm-up step); eager warm-up pass %.2f ms, "
           "%.1f GB/s host-to-device; compute waited %.2f ms\n", g->graph_bytes / 1048576.0, total / 1048576.0, replays,
           st.last_pass_ms, st.last_pass_GBps, st.wait_ms);
    printf("lwo_stats: %llu kernels and %llu transfers enqueued, %llu passes, %llu graph launches, %llu order deviations, "
           "%llu modules compiled, %llu from cache\n", (unsigned long long)st.kernels_launched, (unsigned long long)st.transfers,
           (unsigned long long)st.passes, (unsigned long long)st.graph_launches, (unsigned long long)st.order_deviations,
           (unsigned long long)st.modules_compiled, (unsigned long long)st.modules_from_cache);
    printf("stats: weight_bytes=%llu resident_bytes=%llu ring_bytes=%llu step_bytes=%llu bytes_streamed=%llu peak=%llu budget=%llu\n",
           (unsigned long long)wbytes, (unsigned long long)st.resident_bytes, (unsigned long long)st.ring_bytes,
           (unsigned long long)g->graph_bytes, (unsigned long long)total, (unsigned long long)ms.peak, (unsigned long long)ms.budget);
}

static lwo_result gpu_sample(const dit_file *df, const dit_opts *o, float *x, int N, const int *labels, int steps, double cfg) {
    dit_gpu gs, *g = &gs;
    lwo_graph *graph = NULL;
    lwo_result r;
    double t0, ts;
    int i;
    t0 = dit_now_s();
    r = dit_gpu_open(g, df, o, N, o->vram, o->vram_mib, steps, cfg, o->verbose);
    if (!r) r = dit_gpu_capture(g, x, labels, &graph);
    if (r) { dit_gpu_close(g); return r; }
    printf("setup %.2f s (kernels, weights, a warm-up step, the capture)\n", dit_now_s() - t0);
    fflush(stdout);
    ts = dit_now_s();
    for (i = 0; i < steps && !r; i++) {
        r = lwo_graph_launch(g->ctx, graph);
        if (!r) r = lwo_stream_synchronize(g->ctx, NULL);
        dit_progress("gpu", i + 1, steps, dit_now_s() - ts);
    }
    if (r) { fprintf(stderr, "\ndiffuse: step %d failed: %s\n  %s\n", i, lwo_result_string(r), lwo_last_error(g->ctx)); dit_gpu_close(g); return r; }
    ts = dit_now_s() - ts;
    r = lwo_tensor_download(g->ctx, g->x, x, (uint64_t)N * df->a.C * df->a.img * df->a.img * 4);
    if (r) { fprintf(stderr, "diffuse: download failed: %s\n  %s\n", lwo_result_string(r), lwo_last_error(g->ctx)); dit_gpu_close(g); return r; }
    printf("sampled %d images in %d steps (cfg %g): %.3f s, %.1f steps/s, %.1f images/s; wall %.2f s\n", N, steps, cfg, ts, steps / ts, N / ts,
           dit_now_s() - t0);
    print_stats(g, steps);
    lwo_graph_destroy(g->ctx, graph);
    dit_gpu_close(g);
    return LWO_SUCCESS;
}

/* ==== --selftest: every GPU op against the CPU reference ========================================= */
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
static void selftest_kernels(dit_gpu *g, const dit_file *df, st_counts *c) {
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
    tab = bf16_to_f32_array(df->ytab, (uint64_t)rows * D);
    posf = bf16_to_f32_array(df->pos, (uint64_t)T * D);
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
        ok = ok && !dit_launch_3d(ctx, g->kern, plain, (unsigned)((T + 31) / 32), (unsigned)a->heads, (unsigned)Bti, (unsigned)hd, args);
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
        ok = ok && !dit_launch_3d(ctx, g->kern, "dit_attention_hd128", (unsigned)((T + 31) / 32), (unsigned)(Di / 128), (unsigned)Bti, 128, args);
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
        const dit_lin *l = &df->lin[dit_lin_block(a, 0, DIT_B_QKV)];
        float *wf = bf16_to_f32_array(l->w, l->rows * l->cols), *bf = bf16_to_f32_array(l->b, l->rows);
        char d[160];
        double e;
        for (i = 0; i < M * D; i++) in[i] = st_randn();
        ok = wf && bf && st_upload_bf16(g, g->act, in, M * D, in2) && st_poison(g, g->v_qkv);
        ok = ok && !lwo_linear(ctx, NULL, g->act, g->w[dit_lin_block(a, 0, DIT_B_QKV)], NULL, g->v_qkv);   /* outside a pass: the order is not learned from it */
        ok = ok && !lwo_tensor_download(ctx, g->v_qkv, got, M * 3 * D * 4);
        if (wf && bf) ref_linear(in2, M, D, wf, bf, 3 * D, want);
        e = ok ? rel_l2(got, want, M * 3 * D) : 1;
        snprintf(d, sizeof d, "%s: relative L2 %.3e vs float32 (limit %s)", format_name(g->format), e, g->format == LWO_FORMAT_BF16 ? "1e-5" : "5e-2");
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
static void selftest_attention(const dit_opts *o, st_counts *c) {
    static const int cases[][4] = {   /* head_dim, heads, T, samples */
        { 64, 2, 1, 1 }, { 64, 3, 77, 2 }, { 64, 2, 333, 1 }, { 64, 1, 1024, 1 },
        { 128, 2, 1, 1 }, { 128, 2, 77, 2 }, { 128, 1, 128, 1 }, { 128, 2, 333, 1 }, { 128, 2, 1100, 1 } };
    enum { NC = sizeof cases / sizeof cases[0], XROWS = 16 };
    lwo_desc desc;
    lwo_device_info info;
    lwo_context *ctx = NULL;
    lwo_module *m = NULL;
    lwo_tensor *tq = NULL, *tb = NULL, *to = NULL;
    uint64_t nq = 0, nb = 0, no = 0, shape[1], r, tmax = 0;
    float *in = NULL, *rnd = NULL, *want = NULL;
    uint16_t *gb = NULL, *ob = NULL;
    double *sbuf = NULL;
    int k, verbose = o->verbose, conv_bad = 0, pad_bad = 0, ok;
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
    desc.log_user = &verbose;
    desc.log_level = verbose ? LWO_LOG_INFO : LWO_LOG_WARN;
    desc.vram_budget = 64ull << 20;
    in = (float *)malloc((size_t)nq * 4); rnd = (float *)malloc((size_t)nb * 4); want = (float *)malloc((size_t)nb / 3 * 4);
    gb = (uint16_t *)malloc((size_t)nb * 2); ob = (uint16_t *)malloc((size_t)no * 2); sbuf = (double *)malloc((size_t)tmax * sizeof *sbuf);
    ok = in && rnd && want && gb && ob && sbuf && !lwo_create(&desc, &ctx) && !lwo_device_info_get(ctx, &info) && !dit_module_compile(ctx, &m);
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
        if (info.cc_major >= 8)
            for (r = 0; r < rows * 3 * D; r++) conv_bad += gb[r] != lwo_ref_f32_to_bf16(in[r / (3 * D) * ldq + r % (3 * D)]);
        for (r = 0; r < rows + XROWS; r++) for (dd = 0; dd < ldo; dd++) if (r >= rows || dd >= D) pad_bad += ob[r * ldo + dd] != 0xffff;
        ref_attention(rnd, Bt, T, D, heads, scale, sbuf, want);
        st_cmp_attention(c, what, ob, (uint64_t)ldo, want, rows, D, rnd);
    }
    snprintf(d, sizeof d, "%d of the copies' elements differ from lwo_ref_f32_to_bf16%s", conv_bad, info.cc_major >= 8 ? "" : " (not used below sm_80)");
    st_report(c, conv_bad == 0, "dit_qkv_to_bf16", d);
    snprintf(d, sizeof d, "%d elements of the outputs' padding and the rows past them written", pad_bad);
    st_report(c, pad_bad == 0, "attention writes only its output", d);
done:
    lwo_destroy(ctx);
    free(in); free(rnd); free(want); free(gb); free(ob); free(sbuf);
}

/* The selftest: kernels; then one whole step against the CPU model; graph replays against eager
   steps; a streamed run against the resident one, bit for bit. */
static int selftest(const dit_file *df, const dit_opts *o) {
    const dit_arch *a = &df->a;
    const int N = 2, steps = 3;
    const double cfg = a->cfg;
    uint64_t nx = (uint64_t)N * a->C * a->img * a->img, i;
    float *noise = (float *)malloc((size_t)nx * 4), *x_eager = (float *)malloc((size_t)nx * 4), *x_graph = (float *)malloc((size_t)nx * 4);
    float *x_stream = (float *)malloc((size_t)nx * 4), *x_cpu = (float *)malloc((size_t)nx * 4), *v_gpu = NULL;
    int labels[2] = { 3, 8 }, k;
    st_counts c = { 0, 0 };
    dit_gpu gs, *g = &gs;
    lwo_graph *graph = NULL;
    char d[512];
    if (!noise || !x_eager || !x_graph || !x_stream || !x_cpu) { printf("out of host memory\n"); return 1; }
    dit_noise(o->seed, nx, noise);
    printf("selftest: %d samples (classes %d, %d), cfg %g, storage %s\n", N, labels[0], labels[1], cfg, o->storage);
    if (dit_gpu_open(g, df, o, N, DIT_VRAM_ALL, 0, steps, cfg, o->verbose)) { dit_gpu_close(g); printf("0 passed, 1 failed\n"); return 1; }
    selftest_kernels(g, df, &c);
    selftest_attention(o, &c);

    /* one eager step: the model output against the CPU model's, and the state after the step */
    {
        cpu_model cm;
        uint64_t nout = g->M * a->P;
        double e_out, e_x;
        int ok = cpu_init(&cm, df, g->Bt);
        v_gpu = (float *)malloc((size_t)nout * 4);
        ok = ok && v_gpu && !dit_gpu_reset(g, noise, labels) && !dit_gpu_step(g) && !lwo_stream_synchronize(g->ctx, NULL) &&
             !lwo_tensor_download(g->ctx, g->out, v_gpu, nout * 4) && !lwo_tensor_download(g->ctx, g->x, x_eager, nx * 4);
        if (ok) {
            cpu_forward(&cm, noise, N, ref_t_at(0, steps), labels);
            memcpy(x_cpu, noise, (size_t)nx * 4);
            ref_euler(x_cpu, cm.out, ref_t_at(1, steps) - ref_t_at(0, steps), N, a->C, a->img, a->img, a->p, g->cfg_on, g->cfg);
            e_out = rel_l2(v_gpu, cm.out, nout);
            e_x = rel_l2(x_eager, x_cpu, nx);
            snprintf(d, sizeof d, "%s: model output relative L2 %.3e, state after the step %.3e (limit %s)", format_name(g->format), e_out, e_x,
                     g->format == LWO_FORMAT_BF16 ? "2e-2" : "1e-1");
            st_report(&c, e_out <= (g->format == LWO_FORMAT_BF16 ? 2e-2 : 1e-1), "a whole step vs the CPU model", d);
        } else st_report(&c, 0, "a whole step vs the CPU model", lwo_last_error(g->ctx));
        cpu_free(&cm, df->nlin);
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
        st_report(&c, ok && !memcmp(x_eager, x_graph, (size_t)nx * 4), "graph replays == eager steps", d);
        for (i = 0, k = 0; i < nx; i++) k += !(x_graph[i] == x_graph[i]) || fabsf(x_graph[i]) > 100.0f;
        snprintf(d, sizeof d, "%d of %llu values NaN or > 100", k, (unsigned long long)nx);
        st_report(&c, ok && k == 0, "the state stays finite", d);
    }
    lwo_graph_destroy(g->ctx, graph);
    graph = NULL;
    dit_gpu_close(g);
    /* the same under a budget that streams most weights */
    {
        int ok = !dit_gpu_open(g, df, o, N, DIT_VRAM_AUTO, 0, steps, cfg, o->verbose);
        lwo_stats st;
        ok = ok && !dit_gpu_capture(g, noise, labels, &graph) && !dit_gpu_reset(g, noise, labels);
        for (k = 0; ok && k < steps; k++) ok = !lwo_graph_launch(g->ctx, graph);
        ok = ok && !lwo_stream_synchronize(g->ctx, NULL) && !lwo_tensor_download(g->ctx, g->x, x_stream, nx * 4);
        memset(&st, 0, sizeof st);
        if (g->ctx) lwo_stats_get(g->ctx, &st);
        snprintf(d, sizeof d, "%.2f MiB resident, %.2f MiB streamed: %.300s", st.resident_bytes / 1048576.0, st.bytes_streamed / 1048576.0,
                 ok ? (memcmp(x_stream, x_graph, (size_t)nx * 4) ? "the states differ" : "bit-identical") : lwo_last_error(g->ctx));
        st_report(&c, ok && st.bytes_streamed > 0 && !memcmp(x_stream, x_graph, (size_t)nx * 4), "streamed graph == resident graph", d);
        if (graph) lwo_graph_destroy(g->ctx, graph);
        dit_gpu_close(g);
    }
    free(noise); free(x_eager); free(x_graph); free(x_stream); free(x_cpu); free(v_gpu);
    printf("%d passed, %d failed\n", c.passed, c.failed);
    return c.failed ? 1 : 0;
}

/* ==== main ======================================================================================== */
int main(int argc, char **argv) {
    dit_opts o;
    dit_file df;
    char err[512];
    float *x;
    int *labels, N, i, steps, rc = 0;
    double cfg, secs = 0, t0 = dit_now_s();
    uint64_t nx;
    if (!parse_opts(argc, argv, &o)) { usage(stderr); return 2; }
    if (!file_open(o.model, &df, err, sizeof err)) { fprintf(stderr, "diffuse: %s\n", err); file_close(&df); return 1; }
    if (o.classes > df.a.classes) { fprintf(stderr, "diffuse: --classes %d: the model has %d\n", o.classes, df.a.classes); file_close(&df); return 2; }
    if (o.selftest) { rc = selftest(&df, &o); file_close(&df); return rc; }
    steps = o.steps ? o.steps : df.a.steps;
    cfg = o.cfg == o.cfg ? o.cfg : df.a.cfg;
    N = o.classes * o.per_class;
    nx = (uint64_t)N * df.a.C * df.a.img * df.a.img;
    x = (float *)malloc((size_t)nx * sizeof *x);
    labels = (int *)malloc((size_t)N * sizeof *labels);
    if (!x || !labels) { fprintf(stderr, "diffuse: out of memory\n"); free(x); free(labels); file_close(&df); return 1; }
    for (i = 0; i < N; i++) labels[i] = i / o.per_class;
    dit_noise(o.seed, nx, x);
    printf("tiny-dit-v1 (hidden %d, depth %d, heads %d x %d, %d tokens): %d samples (%d classes x %d), %d steps, cfg %g, seed %llu, "
           "noise[0,0,0,:4] = %.7g %.7g %.7g %.7g\n", df.a.D, df.a.depth, df.a.heads, df.a.hd, df.a.T, N, o.classes, o.per_class, steps, cfg,
           (unsigned long long)o.seed, x[0], x[1], x[2], x[3]);
    fflush(stdout);
    if (o.cpu) {
        if (!cpu_sample(&df, x, N, labels, steps, cfg, &secs)) rc = 1;
        else printf("cpu reference: %d samples, %d steps in %.2f s (%.3f steps/s); wall %.2f s\n", N, steps, secs, steps / secs, dit_now_s() - t0);
    } else if (gpu_sample(&df, &o, x, N, labels, steps, cfg)) rc = 1;
    if (!rc && !write_outputs(&o, x, N, df.a.img)) rc = 1;
    free(x); free(labels);
    file_close(&df);
    return rc;
}

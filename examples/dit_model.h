/* dit_model.h - the tiny DiT's checkpoint as the diffusion demo reads it (examples/diffuse.c, its CPU
   reference examples/dit_ref.h, tests/gpu/test_dit_selftest.c): "tiny-dit-v1" of tools/train_tiny_dit.py,
   its architecture from the file's metadata and its linears in the order the forward pass calls
   them, every tensor checked for the dtype and shape this architecture gives it, op by op.
   Include after lwo.h. Everything here is static inline. */
#ifndef DIT_MODEL_H
#define DIT_MODEL_H
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dit_arch {
    int D, depth, heads, hd, p, img, C, classes, null_class, mlp, tdim, G, T, P;
    float eps, time_scale, neg_log_period;
    int steps;      /* the file's defaults */
    double cfg;
} dit_arch;

/* One nn.Linear of the checkpoint: "<prefix>.weight" [rows, cols] and "<prefix>.bias" [rows], bf16. */
typedef struct dit_lin {
    char name[64];                          /* "<prefix>.weight", what lwo_safetensors_load_weight takes */
    uint64_t rows, cols;
    const lwo_safetensors_tensor *w, *b;    /* in the file's mapping */
} dit_lin;

typedef struct dit_model {
    dit_arch a;
    dit_lin *lin;                           /* every linear in use order (see dit_lin_block) */
    int nlin;
    const lwo_safetensors_tensor *pos, *ytab;   /* bf16 [T, D], bf16 [classes + 1, D] */
} dit_model;

/* Use order of the linears: t_embedder.mlp.0, .2, x_embedder, per block (adaLN, qkv, proj, fc1,
   fc2), final adaLN, final linear -- the order the forward pass calls them. */
enum { DIT_L_T0 = 0, DIT_L_T2, DIT_L_XEMB, DIT_L_BLOCK0 };
enum { DIT_B_ADA = 0, DIT_B_QKV, DIT_B_PROJ, DIT_B_FC1, DIT_B_FC2, DIT_B_COUNT };
static inline int dit_lin_block(const dit_arch *a, int block, int which) { (void)a; return DIT_L_BLOCK0 + block * DIT_B_COUNT + which; }
static inline int dit_lin_fada(const dit_arch *a) { return DIT_L_BLOCK0 + a->depth * DIT_B_COUNT; }
static inline int dit_lin_flin(const dit_arch *a) { return DIT_L_BLOCK0 + a->depth * DIT_B_COUNT + 1; }

/* An unsigned decimal (or 0x hex) integer in lo .. hi, nothing after it. */
static inline int dit_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    unsigned long long v;
    if (!s || !*s || *s == '-') return 0;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static inline int dit_meta_int(lwo_safetensors *f, const char *key, int lo, int hi, int *out, char *err, size_t n) {
    const char *v = lwo_safetensors_metadata_find(f, key);
    uint64_t u;
    if (!v) { snprintf(err, n, "metadata %s is missing", key); return 0; }
    if (!dit_parse_u64(v, (uint64_t)lo, (uint64_t)hi, &u)) { snprintf(err, n, "metadata %s = '%s' is not an integer in %d .. %d", key, v, lo, hi); return 0; }
    *out = (int)u;
    return 1;
}

static inline int dit_meta_num(lwo_safetensors *f, const char *key, double lo, double hi, double *out, char *err, size_t n) {
    const char *v = lwo_safetensors_metadata_find(f, key);
    char *end;
    if (!v) { snprintf(err, n, "metadata %s is missing", key); return 0; }
    errno = 0;
    *out = strtod(v, &end);
    if (errno || *end || !(*out >= lo && *out <= hi)) { snprintf(err, n, "metadata %s = '%s' is not a number in %g .. %g", key, v, lo, hi); return 0; }
    return 1;
}

static inline int dit_meta_is(lwo_safetensors *f, const char *key, const char *want, char *err, size_t n) {
    const char *v = lwo_safetensors_metadata_find(f, key);
    if (v && !strcmp(v, want)) return 1;
    snprintf(err, n, "metadata %s is '%s', not %s", key, v ? v : "(missing)", want);
    return 0;
}

/* A bf16 tensor of the given shape (cols 0: a vector of rows). */
static inline const lwo_safetensors_tensor *dit_tensor(lwo_safetensors *f, const char *name, uint64_t rows, uint64_t cols, char *err, size_t n) {
    const lwo_safetensors_tensor *t = lwo_safetensors_find(f, name);
    if (!t) { snprintf(err, n, "tensor %s is missing", name); return NULL; }
    if (t->dtype != LWO_DTYPE_BF16) { snprintf(err, n, "tensor %s is %s, not bf16", name, lwo_dtype_name(t->dtype)); return NULL; }
    if ((cols == 0 && (t->ndim != 1 || t->shape[0] != rows)) || (cols && (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols))) {
        if (cols) snprintf(err, n, "tensor %s: want shape [%llu, %llu]", name, (unsigned long long)rows, (unsigned long long)cols);
        else snprintf(err, n, "tensor %s: want shape [%llu]", name, (unsigned long long)rows);
        return NULL;
    }
    return t;
}

static inline int dit_model_lin(lwo_safetensors *f, dit_model *m, int i, const char *prefix, uint64_t rows, uint64_t cols, char *err, size_t n) {
    char name[96];
    dit_lin *l = &m->lin[i];
    snprintf(l->name, sizeof l->name, "%s.weight", prefix);
    l->rows = rows; l->cols = cols;
    if (!(l->w = dit_tensor(f, l->name, rows, cols, err, n))) return 0;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return (l->b = dit_tensor(f, name, rows, 0, err, n)) != NULL;
}

static inline void dit_model_free(dit_model *m) {
    free(m->lin);
    memset(m, 0, sizeof *m);
}

/* Reads the architecture of the open checkpoint f and checks it is the one this demo implements.
   m points into f's mapping: keep f open while m is used. On failure err says why. */
static inline int dit_model_read(lwo_safetensors *f, dit_model *m, char *err, size_t n) {
    dit_arch *a = &m->a;
    double d;
    int i, ok;
    memset(m, 0, sizeof *m);
    ok = dit_meta_is(f, "lwo.arch", "tiny-dit-v1", err, n) && dit_meta_is(f, "lwo.gelu", "tanh", err, n) &&
         dit_meta_is(f, "lwo.sampler", "rectified-flow-euler", err, n) &&
         dit_meta_int(f, "lwo.hidden", 32, 8192, &a->D, err, n) && dit_meta_int(f, "lwo.depth", 1, 256, &a->depth, err, n) &&
         dit_meta_int(f, "lwo.heads", 1, 256, &a->heads, err, n) && dit_meta_int(f, "lwo.head_dim", 1, 1024, &a->hd, err, n) &&
         dit_meta_int(f, "lwo.patch", 1, 64, &a->p, err, n) && dit_meta_int(f, "lwo.image_size", 1, 4096, &a->img, err, n) &&
         dit_meta_int(f, "lwo.channels", 1, 16, &a->C, err, n) && dit_meta_int(f, "lwo.num_classes", 1, 100000, &a->classes, err, n) &&
         dit_meta_int(f, "lwo.null_class", 0, 100000, &a->null_class, err, n) && dit_meta_int(f, "lwo.mlp_hidden", 1, 65536, &a->mlp, err, n) &&
         dit_meta_int(f, "lwo.time_embed_dim", 2, 65536, &a->tdim, err, n) && dit_meta_int(f, "lwo.steps", 1, 100000, &a->steps, err, n) &&
         dit_meta_num(f, "lwo.cfg_scale", 0, 100, &a->cfg, err, n);
    if (!ok) return 0;
    if (!dit_meta_num(f, "lwo.eps", 0, 1, &d, err, n)) return 0;
    a->eps = (float)d;
    if (!dit_meta_num(f, "lwo.time_scale", 0, 1e9, &d, err, n)) return 0;
    a->time_scale = (float)d;
    if (!dit_meta_num(f, "lwo.time_max_period", 1, 1e30, &d, err, n)) return 0;
    a->neg_log_period = (float)-log(d);   /* the script: -math.log(10000) as a float32 scalar */
    if (a->D != a->heads * a->hd || a->img % a->p || a->tdim % 2 || a->null_class != a->classes) {
        snprintf(err, n, "inconsistent architecture (hidden %d, heads %d x %d, image %d, patch %d, time dim %d, null class %d of %d)",
                 a->D, a->heads, a->hd, a->img, a->p, a->tdim, a->null_class, a->classes);
        return 0;
    }
    a->G = a->img / a->p; a->T = a->G * a->G; a->P = a->p * a->p * a->C;
    m->nlin = DIT_L_BLOCK0 + a->depth * DIT_B_COUNT + 2;
    m->lin = (dit_lin *)calloc((size_t)m->nlin, sizeof *m->lin);
    if (!m->lin) { snprintf(err, n, "out of memory"); return 0; }
    ok = dit_model_lin(f, m, DIT_L_T0, "t_embedder.mlp.0", (uint64_t)a->D, (uint64_t)a->tdim, err, n) &&
         dit_model_lin(f, m, DIT_L_T2, "t_embedder.mlp.2", (uint64_t)a->D, (uint64_t)a->D, err, n) &&
         dit_model_lin(f, m, DIT_L_XEMB, "x_embedder", (uint64_t)a->D, (uint64_t)a->P, err, n);
    for (i = 0; ok && i < a->depth; i++) {
        char pre[64];
        uint64_t D = (uint64_t)a->D;
        snprintf(pre, sizeof pre, "blocks.%d.adaLN_modulation.1", i); ok = ok && dit_model_lin(f, m, dit_lin_block(a, i, DIT_B_ADA), pre, 6 * D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.attn.qkv", i);          ok = ok && dit_model_lin(f, m, dit_lin_block(a, i, DIT_B_QKV), pre, 3 * D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.attn.proj", i);         ok = ok && dit_model_lin(f, m, dit_lin_block(a, i, DIT_B_PROJ), pre, D, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.mlp.fc1", i);           ok = ok && dit_model_lin(f, m, dit_lin_block(a, i, DIT_B_FC1), pre, (uint64_t)a->mlp, D, err, n);
        snprintf(pre, sizeof pre, "blocks.%d.mlp.fc2", i);           ok = ok && dit_model_lin(f, m, dit_lin_block(a, i, DIT_B_FC2), pre, D, (uint64_t)a->mlp, err, n);
    }
    ok = ok && dit_model_lin(f, m, dit_lin_fada(a), "final_layer.adaLN_modulation.1", 2 * (uint64_t)a->D, (uint64_t)a->D, err, n) &&
         dit_model_lin(f, m, dit_lin_flin(a), "final_layer.linear", (uint64_t)a->P, (uint64_t)a->D, err, n);
    if (!ok) return 0;
    if (!(m->pos = dit_tensor(f, "pos_embed", (uint64_t)a->T, (uint64_t)a->D, err, n))) return 0;
    return (m->ytab = dit_tensor(f, "y_embedder.embedding_table.weight", (uint64_t)a->classes + 1, (uint64_t)a->D, err, n)) != NULL;
}
#endif

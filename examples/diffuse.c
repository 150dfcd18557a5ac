/* diffuse.c - class-conditional Fashion-MNIST images from the tiny DiT of tools/train_tiny_dit.py
   ("tiny-dit-v1", examples/tiny_dit.safetensors), on a GPU through lwo:
     - the context made under a VRAM budget sized with lwo's own queries (lwo_weight_device_bytes,
       lwo_linear_workspace_bytes, asked of a small probe context first);
     - every linear's weight loaded from the checkpoint (lwo_safetensors_create,
       lwo_safetensors_load_weight_policy) in the format --storage picks, placed LWO_PLACE_AUTO:
       lwo_streaming_plan keeps what fits resident and streams the rest through its ring. The file
       holds bf16, so --storage bf16 keeps it as it is and a streamed weight reads straight from
       the file's mapping (zero copy);
     - every linear through lwo_linear; everything else (patchify, timestep and class embedding,
       LayerNorm + adaLN modulation, attention, GELU, gated residuals, unpatchify, the CFG Euler
       update) as this example's own kernels, examples/dit_kernels.cu, through lwo_module_create
       and lwo_launch (examples/dit_common.h);
     - one denoising step captured as a CUDA graph (lwo_graph_capture_begin/end), replayed for every
       step: the step index lives in a device counter that the graph's last kernel advances.
   The initial noise is the script's "splitmix64-boxmuller-v1", so this program and the PyTorch
   reference (train_tiny_dit.py --sample-ref) start from identical noise; --raw writes the samples
   as the script's --score / --compare read them.
   --cpu runs the same sampler in plain C (examples/dit_ref.h: float32, sums in float64) with no
   GPU: the reference this GPU path and the PyTorch script are checked against.
   tests/gpu/test_dit_selftest.c checks every kernel and a whole step of this file against it.

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
#include "dit_common.h"   /* the kernels and their launches, the noise, a clock */
#include "dit_model.h"    /* the checkpoint: architecture and linears */
#include "dit_ref.h"      /* the CPU reference model and sampler (--cpu) */
#include "dit_args.h"     /* the options */
#include "png.h"          /* the PNG writer */

/* ==== the GPU path ================================================================================ */
typedef struct dit_gpu {
    lwo_context *ctx;
    lwo_module *kern;
    const dit_arch *a;
    lwo_format format;        /* the weights' format (lwo_safetensors_weight_format of the policy's) */
    int N, Bt, steps, cfg_on, verbose;
    int cc;                   /* compute capability, major * 10 + minor */
    float cfg;
    uint64_t M, workspace, weight_bytes, act_bytes;
    lwo_safetensors *lora;    /* --lora's file, or NULL */
    uint64_t lora_bytes;      /* the VRAM its factors and the side path's scratch take */
    uint64_t graph_bytes;     /* weight bytes one replay of the step graph streams */
    lwo_weight **w;           /* per linear, dit_model order */
    int nlin;
    /* device tensors: state, step counter, labels, constants, activations (and views of them) */
    lwo_tensor *x, *counter, *labels, *pos, *ytab;
    lwo_tensor *temb, *th, *thb, *te, *sc, *tok, *h, *tmp, *act, *big, *gel, *mod, *out;
    lwo_tensor *qkvb;         /* q, k, v as bf16 for the flash attention kernel */
    lwo_tensor *v_qkv, *v_fc1, *v_mod6, *v_mod2;
} dit_gpu;

#define DIT_TRY(call, what) do { lwo_result dit__r = (call); if (dit__r) { \
    fprintf(stderr, "diffuse: %s failed: %s\n  %s\n", (what), lwo_result_string(dit__r), lwo_last_error(g->ctx)); return dit__r; } } while (0)

/* --storage as a storage policy: no rules, one format for every tensor. */
static lwo_storage_policy dit_policy(const char *storage, int cc) {
    lwo_storage_policy p;
    memset(&p, 0, sizeof p);
    p.default_format = !strcmp(storage, "bf16") ? LWO_FORMAT_KEEP : !strcmp(storage, "int8") ? LWO_FORMAT_INT8
                     : !strcmp(storage, "fp8-upcast") ? LWO_FORMAT_FP8_E4M3 : !strcmp(storage, "fp8-w8a8") ? LWO_FORMAT_FP8_E4M3_W8A8
                     : cc >= 89 ? LWO_FORMAT_FP8_E4M3_W8A8 : LWO_FORMAT_FP8_E4M3;
    return p;
}

/* The activations and constants, in the order they are made: [rows, cols] (cols 0: a vector). */
typedef struct dit_tensor_spec { lwo_tensor **t; lwo_dtype dtype; uint64_t rows, cols; } dit_tensor_spec;
enum { DIT_NTENSORS = 19 };
static void dit_tensor_specs(dit_gpu *g, dit_tensor_spec *out) {
    const dit_arch *a = g->a;
    uint64_t D = (uint64_t)a->D, Bt = (uint64_t)g->Bt, M = g->M, wide = (uint64_t)(a->mlp > 3 * a->D ? a->mlp : 3 * a->D);
    dit_tensor_spec s[DIT_NTENSORS] = {
        { &g->x, LWO_DTYPE_F32, (uint64_t)g->N * a->C * a->img * a->img, 0 }, { &g->counter, LWO_DTYPE_I32, 1, 0 },
        { &g->labels, LWO_DTYPE_I32, Bt, 0 }, { &g->pos, LWO_DTYPE_BF16, (uint64_t)a->T, D }, { &g->ytab, LWO_DTYPE_BF16, (uint64_t)a->classes + 1, D },
        { &g->temb, LWO_DTYPE_BF16, Bt, (uint64_t)a->tdim }, { &g->th, LWO_DTYPE_F32, Bt, D }, { &g->thb, LWO_DTYPE_BF16, Bt, D },
        { &g->te, LWO_DTYPE_F32, Bt, D }, { &g->sc, LWO_DTYPE_BF16, Bt, D }, { &g->tok, LWO_DTYPE_BF16, M, (uint64_t)a->P },
        { &g->h, LWO_DTYPE_F32, M, D }, { &g->tmp, LWO_DTYPE_F32, M, D }, { &g->act, LWO_DTYPE_BF16, M, D },
        { &g->big, LWO_DTYPE_F32, M, wide }, { &g->gel, LWO_DTYPE_BF16, M, (uint64_t)a->mlp }, { &g->mod, LWO_DTYPE_F32, Bt, 6 * D },
        { &g->out, LWO_DTYPE_F32, M, (uint64_t)a->P }, { &g->qkvb, LWO_DTYPE_BF16, M, 3 * D } };
    memcpy(out, s, sizeof s);
}

static lwo_result view2(dit_gpu *g, const lwo_tensor *of, uint64_t rows, uint64_t cols, lwo_tensor **t) {
    uint64_t shape[2];
    shape[0] = rows; shape[1] = cols;
    return lwo_tensor_wrap(g->ctx, lwo_tensor_device_ptr(of), lwo_tensor_dtype(of), 2, shape, t);
}

/* lwo's warnings (and with --verbose its info) on stderr; its errors reach the user through
   lwo_last_error, printed where a call fails. */
static void dit_log(void *user, lwo_log_level level, const char *msg) {
    if (level != LWO_LOG_ERROR || *(const int *)user) fprintf(stderr, "lwo: %s\n", msg);
}

/* lwo's sizes, asked of the probe context: each weight's VRAM in the format the policy gives it,
   and what a plan reserves for lwo_linear on all of them with up to M rows of x. */
static lwo_result dit_sizes(dit_gpu *g, lwo_safetensors *f, const dit_model *md, const lwo_storage_policy *pol, uint64_t *largest) {
    lwo_weight_desc *wd = (lwo_weight_desc *)calloc((size_t)md->nlin, sizeof *wd);
    lwo_result r = LWO_SUCCESS;
    uint64_t scratch = 0;
    int i;
    if (!wd) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < md->nlin && !r; i++) {
        const dit_lin *l = &md->lin[i];
        uint64_t b;
        r = lwo_safetensors_weight_format(f, l->name, lwo_storage_policy_format(pol, l->name), &wd[i].format);
        if (r) { fprintf(stderr, "diffuse: %s: %s\n", lwo_result_string(r), lwo_safetensors_last_error(f)); break; }
        wd[i].rows = l->rows; wd[i].cols = l->cols;
        wd[i].data = l->w->data; wd[i].data_dtype = l->w->dtype;
        wd[i].bias = l->b->data; wd[i].bias_dtype = l->b->dtype;
        wd[i].placement = LWO_PLACE_AUTO;
        b = lwo_weight_device_bytes(&wd[i]);
        g->weight_bytes += b;
        if (b > *largest) *largest = b;
        if (g->lora) {   /* its LoRA's factors stay resident: they come out of the budget */
            lwo_safetensors_lora fl;
            lwo_result lr = lwo_safetensors_find_lora(g->lora, l->name, NULL, &fl);
            if (lr == LWO_SUCCESS) {
                g->lora_bytes += lwo_lora_device_bytes(&wd[i], fl.rank);
                if (lwo_lora_scratch_bytes(fl.rank) > scratch) scratch = lwo_lora_scratch_bytes(fl.rank);
            } else if (lr != LWO_ERROR_NOT_FOUND) { fprintf(stderr, "diffuse: --lora: %s\n", lwo_safetensors_last_error(g->lora)); r = lr; }
        }
    }
    g->lora_bytes += scratch;
    if (!r) g->format = wd[dit_lin_block(g->a, 0, DIT_B_QKV)].format;
    if (!r) g->workspace = lwo_linear_workspace_bytes(g->ctx, wd, (size_t)md->nlin, g->M);
    free(wd);
    return r;
}

/* Creates the context under the budget, the weights, the activations; plans the streaming. */
static lwo_result dit_gpu_open(dit_gpu *g, lwo_safetensors *f, const dit_model *md, const char *storage, int N, dit_vram_mode vram,
                               uint64_t vram_mib, int steps, double cfg, int verbose, lwo_safetensors *lora, double lora_strength) {
    const dit_arch *a = &md->a;
    dit_tensor_spec ts[DIT_NTENSORS];
    lwo_storage_policy pol;
    lwo_streaming_desc sd;
    lwo_context_info info;
    lwo_desc desc;
    lwo_result r;
    uint64_t largest = 0, budget, D = (uint64_t)a->D;
    int i;
    memset(g, 0, sizeof *g);
    g->verbose = verbose;
    g->lora = lora;
    g->a = a; g->N = N; g->steps = steps; g->cfg_on = cfg != 1.0; g->cfg = (float)cfg;
    g->Bt = g->cfg_on ? 2 * N : N;
    g->M = (uint64_t)g->Bt * a->T;
    g->nlin = md->nlin;
    dit_tensor_specs(g, ts);
    for (i = 0; i < DIT_NTENSORS; i++)   /* each in the arena, 256-byte aligned */
        g->act_bytes += (ts[i].rows * (ts[i].cols ? ts[i].cols : 1) * lwo_dtype_size(ts[i].dtype) + 255) / 256 * 256;
    memset(&desc, 0, sizeof desc);
    desc.log = dit_log;
    desc.log_user = &g->verbose;
    desc.log_level = verbose ? LWO_LOG_INFO : LWO_LOG_PROGRESS;
    /* a probe context tells the device (fp8 W8A8 or not) and lwo's sizes before the budget is known */
    desc.vram_budget = 16ull << 20;
    r = lwo_create(&desc, &g->ctx);
    if (r) { fprintf(stderr, "diffuse: lwo_create failed: %s\n  %s\n  (--cpu runs the CPU reference sampler without a GPU)\n", lwo_result_string(r), lwo_last_error(g->ctx)); return r; }
    lwo_context_get_info(g->ctx, &info);
    g->cc = info.device.cc_major * 10 + info.device.cc_minor;
    pol = dit_policy(storage, g->cc);
    r = dit_sizes(g, f, md, &pol, &largest);
    lwo_destroy(g->ctx);
    g->ctx = NULL;
    if (r) return r;
    /* auto: activations + workspace + the ring (4 slots of the largest weight) + a quarter of the
       weights (+ 512 KiB for lwo's own rounding and scratch): most weights stream */
    if (vram == DIT_VRAM_MIB) budget = vram_mib << 20;
    else if (vram == DIT_VRAM_ALL) budget = g->act_bytes + g->workspace + g->lora_bytes + g->weight_bytes + (4ull << 20);
    else budget = g->act_bytes + g->workspace + g->lora_bytes + 4 * largest + g->weight_bytes / 4 + (512u << 10);
    desc.vram_budget = budget;
    r = lwo_create(&desc, &g->ctx);
    if (r) { fprintf(stderr, "diffuse: lwo_create (budget %.1f MiB) failed: %s\n  %s\n", budget / 1048576.0, lwo_result_string(r), lwo_last_error(g->ctx)); return r; }
    printf("lwo %d.%d.%d on %s (compute %d.%d, %s); weights %s (--storage %s), budget %.1f MiB (%s): activations %.1f MiB, "
           "workspace %.1f MiB, weights %.1f MiB\n", LWO_VERSION_MAJOR, LWO_VERSION_MINOR, LWO_VERSION_PATCH, info.device.name,
           info.device.cc_major, info.device.cc_minor, info.device.arch, lwo_format_name(g->format), storage, budget / 1048576.0,
           vram == DIT_VRAM_AUTO ? "auto" : vram == DIT_VRAM_ALL ? "all" : "--vram", g->act_bytes / 1048576.0, g->workspace / 1048576.0,
           g->weight_bytes / 1048576.0);
    fflush(stdout);
    DIT_TRY(dit_module_create(g->ctx, &g->kern), "compiling examples/dit_kernels.cu");
    g->w = (lwo_weight **)calloc((size_t)md->nlin, sizeof *g->w);
    if (!g->w) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < md->nlin; i++)   /* "<prefix>.weight" and "<prefix>.bias", in the policy's format */
        DIT_TRY(lwo_safetensors_load_weight_policy(g->ctx, f, md->lin[i].name, &pol, LWO_PLACE_AUTO, &g->w[i]), md->lin[i].name);
    if (lora) {   /* on every linear the file has a LoRA for; one the model lacks is an error */
        lwo_lora_load_desc ld;
        const char **names = (const char **)calloc((size_t)md->nlin, sizeof *names);
        lwo_lora **loras = (lwo_lora **)calloc((size_t)md->nlin, sizeof *loras);
        if (!names || !loras) { free(names); free(loras); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        for (i = 0; i < md->nlin; i++) names[i] = md->lin[i].name;
        memset(&ld, 0, sizeof ld);
        ld.file = lora; ld.weights = g->w; ld.names = names; ld.count = (size_t)md->nlin; ld.loras = loras;
        ld.strength = (float)lora_strength;   /* 0 would mean 1: set below */
        r = lwo_lora_load(g->ctx, &ld);
        for (i = 0; i < md->nlin && !r && lora_strength == 0.0; i++) if (loras[i]) r = lwo_lora_set_strength(g->ctx, loras[i], 0.0f);
        free(names); free(loras);
        DIT_TRY(r, "lwo_lora_load (--lora)");
        printf("lora: %zu of %d linears, strength %g, %.2f MiB of VRAM\n", ld.matched, md->nlin, lora_strength, g->lora_bytes / 1048576.0);
    }
    for (i = 0; i < DIT_NTENSORS; i++) {
        uint64_t shape[2];
        shape[0] = ts[i].rows; shape[1] = ts[i].cols;
        DIT_TRY(lwo_tensor_create(g->ctx, ts[i].dtype, ts[i].cols ? 2 : 1, shape, ts[i].t), "allocating the activations");
    }
    DIT_TRY(view2(g, g->big, g->M, 3 * D, &g->v_qkv), "a view");
    DIT_TRY(view2(g, g->big, g->M, (uint64_t)a->mlp, &g->v_fc1), "a view");
    DIT_TRY(view2(g, g->mod, (uint64_t)g->Bt, 6 * D, &g->v_mod6), "a view");
    DIT_TRY(view2(g, g->mod, (uint64_t)g->Bt, 2 * D, &g->v_mod2), "a view");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->pos, md->pos->data, md->pos->bytes), "uploading pos_embed");
    DIT_TRY(lwo_tensor_upload(g->ctx, g->ytab, md->ytab->data, md->ytab->bytes), "uploading the class table");
    memset(&sd, 0, sizeof sd);
    sd.max_rows = g->M;   /* the largest x of any linear: the token rows */
    DIT_TRY(lwo_streaming_plan(g->ctx, &sd), "lwo_streaming_plan");
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

/* y = x W^T + b for linear i on the compute stream (the weight's own bias) */
static lwo_result lin(dit_gpu *g, const lwo_tensor *x, int i, lwo_tensor *y) {
    lwo_linear_desc ld;
    memset(&ld, 0, sizeof ld);
    ld.x = x; ld.w = g->w[i]; ld.y = y;
    return lwo_linear(g->ctx, &ld);
}

static lwo_result k_ln_modulate(dit_gpu *g, const lwo_tensor *mod, int stride, int shift_off, int scale_off) {
    const dit_arch *a = g->a;
    uint64_t hp = lwo_tensor_device_ptr(g->h), mp = lwo_tensor_device_ptr(mod), op = lwo_tensor_device_ptr(g->act), M = g->M;
    int D = a->D, T = a->T;
    float eps = a->eps;
    void *args[10];
    args[0] = &hp; args[1] = &M; args[2] = &D; args[3] = &T; args[4] = &mp; args[5] = &stride; args[6] = &shift_off; args[7] = &scale_off;
    args[8] = &eps; args[9] = &op;
    return dit_launch_3d(g->ctx, g->kern, "dit_ln_modulate", (unsigned)((M + 7) / 8), 1, 1, 256, 0, args);
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
    DIT_TRY(lin(g, g->temb, DIT_L_T0, g->th), "lwo_linear t_embedder.mlp.0");
    args[0] = &thp; args[1] = &nth; args[2] = &thbp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_silu_bf16", nth, args), "dit_silu_bf16");
    DIT_TRY(lin(g, g->thb, DIT_L_T2, g->te), "lwo_linear t_embedder.mlp.2");
    args[0] = &tep; args[1] = &ytp; args[2] = &rows; args[3] = &labp; args[4] = &Bt; args[5] = &Di; args[6] = &scp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_condition", nth, args), "dit_condition");
    DIT_TRY(lin(g, g->tok, DIT_L_XEMB, g->tmp), "lwo_linear x_embedder");
    args[0] = &tmpp; args[1] = &posp; args[2] = &M; args[3] = &T; args[4] = &Di; args[5] = &hp;
    DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_embed_pos", M * D, args), "dit_embed_pos");
    for (i = 0; i < a->depth; i++) {
        DIT_TRY(lin(g, g->sc, dit_lin_block(a, i, DIT_B_ADA), g->v_mod6), "lwo_linear adaLN_modulation");
        DIT_TRY(k_ln_modulate(g, g->mod, 6 * Di, 0, Di), "dit_ln_modulate (msa)");
        DIT_TRY(lin(g, g->act, dit_lin_block(a, i, DIT_B_QKV), g->v_qkv), "lwo_linear attn.qkv");
        DIT_TRY(k_attention(g, g->v_qkv, g->act), "dit_attention");
        DIT_TRY(lin(g, g->act, dit_lin_block(a, i, DIT_B_PROJ), g->tmp), "lwo_linear attn.proj");
        DIT_TRY(k_gate(g, 2 * Di), "dit_gate_residual (msa)");
        DIT_TRY(k_ln_modulate(g, g->mod, 6 * Di, 3 * Di, 4 * Di), "dit_ln_modulate (mlp)");
        DIT_TRY(lin(g, g->act, dit_lin_block(a, i, DIT_B_FC1), g->v_fc1), "lwo_linear mlp.fc1");
        args[0] = &bigp; args[1] = &ngel; args[2] = &gelp;
        DIT_TRY(dit_launch_1d(ctx, g->kern, "dit_gelu_tanh_bf16", ngel, args), "dit_gelu_tanh_bf16");
        DIT_TRY(lin(g, g->gel, dit_lin_block(a, i, DIT_B_FC2), g->tmp), "lwo_linear mlp.fc2");
        DIT_TRY(k_gate(g, 5 * Di), "dit_gate_residual (mlp)");
    }
    DIT_TRY(lin(g, g->sc, dit_lin_fada(a), g->v_mod2), "lwo_linear final adaLN_modulation");
    DIT_TRY(k_ln_modulate(g, g->mod, 2 * Di, 0, Di), "dit_ln_modulate (final)");
    DIT_TRY(lin(g, g->act, dit_lin_flin(a), g->out), "lwo_linear final_layer.linear");
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
    lwo_streaming_desc sd;
    DIT_TRY(dit_gpu_reset(g, x0, labels), "reset");
    if (dit_gpu_step(g) || dit_gpu_step(g)) return LWO_ERROR_CUDA;   /* the first loads the modules: its timings are the host's */
    DIT_TRY(lwo_stream_synchronize(g->ctx, NULL), "the warm-up steps");
    memset(&sd, 0, sizeof sd);   /* planned again, timed against the warm-up steps (each use's compute time, the copy rate) */
    sd.max_rows = g->M;
    DIT_TRY(lwo_streaming_plan(g->ctx, &sd), "lwo_streaming_plan");
    DIT_TRY(dit_gpu_reset(g, x0, labels), "reset");
    DIT_TRY(lwo_graph_capture_begin(g->ctx), "lwo_graph_capture_begin");
    if (dit_gpu_step(g)) { lwo_pass_abort(g->ctx); return LWO_ERROR_CUDA; }   /* ends the pass and the capture */
    DIT_TRY(lwo_graph_capture_end(g->ctx, graph), "lwo_graph_capture_end");
    g->graph_bytes = lwo_graph_bytes_streamed(*graph);
    return LWO_SUCCESS;
}

/* ==== the program: sampling with the graph, the stats, the outputs, main ========================= */
#ifndef DIFFUSE_NO_MAIN   /* tests/gpu/test_dit_selftest.c includes this file for its GPU path above */
static void print_stats(dit_gpu *g, int replays) {
    lwo_stats st;
    lwo_context_info ci;
    lwo_context_get_stats(g->ctx, &st);
    lwo_context_get_info(g->ctx, &ci);
    printf("peak VRAM %.1f MiB of a %.1f MiB budget; weights resident %.2f MiB, ring %.2f MiB\n", ci.memory.peak / 1048576.0,
           ci.memory.budget / 1048576.0, st.resident_bytes / 1048576.0, st.ring_bytes / 1048576.0);
    /* bytes_streamed: the warm-up passes and every graph replay */
    printf("streamed %.2f MiB a step (%.2f MiB in all: %d graph replays and the warm-up steps); eager warm-up pass %.2f ms, "
           "%.1f GB/s host-to-device; compute waited %.2f ms\n", g->graph_bytes / 1048576.0, st.bytes_streamed / 1048576.0, replays,
           st.last_pass_ms, st.last_pass_GBps, st.wait_ms);
    printf("lwo_stats: %llu kernels and %llu transfers enqueued, %llu passes, %llu graph launches, %llu order deviations, "
           "%llu modules compiled, %llu from cache\n", (unsigned long long)st.kernels_launched, (unsigned long long)st.transfers,
           (unsigned long long)st.passes, (unsigned long long)st.graph_launches, (unsigned long long)st.order_deviations,
           (unsigned long long)st.modules_compiled, (unsigned long long)st.modules_from_cache);
    /* weight_bytes: the weights' VRAM as lwo_weight_device_bytes counts it (what the plan places) */
    printf("stats: weight_bytes=%llu resident_bytes=%llu ring_bytes=%llu step_bytes=%llu bytes_streamed=%llu peak=%llu budget=%llu\n",
           (unsigned long long)g->weight_bytes, (unsigned long long)st.resident_bytes, (unsigned long long)st.ring_bytes,
           (unsigned long long)g->graph_bytes, (unsigned long long)st.bytes_streamed, (unsigned long long)ci.memory.peak,
           (unsigned long long)ci.memory.budget);
}

static lwo_result gpu_sample(lwo_safetensors *f, const dit_model *md, const dit_opts *o, float *x, int N, const int *labels, int steps,
                             double cfg) {
    dit_gpu gs, *g = &gs;
    lwo_graph *graph = NULL;
    lwo_result r;
    double t0 = dit_now_s(), ts;
    int i;
    lwo_safetensors *lora = NULL;
    if (o->lora[0]) {   /* mapped until the factors are copied at attach */
        lwo_safetensors_desc ld;
        memset(&ld, 0, sizeof ld);
        ld.path = o->lora;
        if ((r = lwo_safetensors_create(&ld, &lora)) != LWO_SUCCESS) {
            fprintf(stderr, "diffuse: --lora %.200s: %s: %.250s\n", o->lora, lwo_result_string(r), lora ? lwo_safetensors_last_error(lora) : "out of memory");
            lwo_safetensors_destroy(lora);
            return r;
        }
    }
    r = dit_gpu_open(g, f, md, o->storage, N, o->vram, o->vram_mib, steps, cfg, o->verbose, lora, o->lora_strength);
    lwo_safetensors_destroy(lora);
    g->lora = NULL;
    if (!r) r = dit_gpu_capture(g, x, labels, &graph);
    if (r) { dit_gpu_close(g); return r; }
    printf("setup %.2f s (kernels, weights, the warm-up steps, the capture)\n", dit_now_s() - t0);
    fflush(stdout);
    ts = dit_now_s();
    for (i = 0; i < steps && !r; i++) {
        r = lwo_graph_launch(g->ctx, graph);
        if (!r) r = lwo_stream_synchronize(g->ctx, NULL);
        dit_progress("gpu", i + 1, steps, dit_now_s() - ts);
    }
    if (r) { fprintf(stderr, "\ndiffuse: step %d failed: %s\n  %s\n", i, lwo_result_string(r), lwo_last_error(g->ctx)); dit_gpu_close(g); return r; }
    ts = dit_now_s() - ts;
    r = lwo_tensor_download(g->ctx, g->x, x, (uint64_t)N * md->a.C * md->a.img * md->a.img * 4);
    if (r) { fprintf(stderr, "diffuse: download failed: %s\n  %s\n", lwo_result_string(r), lwo_last_error(g->ctx)); dit_gpu_close(g); return r; }
    printf("sampled %d images in %d steps (cfg %g): %.3f s, %.1f steps/s, %.1f images/s; wall %.2f s\n", N, steps, cfg, ts, steps / ts, N / ts,
           dit_now_s() - t0);
    print_stats(g, steps);
    lwo_graph_destroy(g->ctx, graph);
    dit_gpu_close(g);
    return LWO_SUCCESS;
}

/* the PNG grid (png.h) and the raw float32 samples */
static int write_outputs(const dit_opts *o, const float *x, int N, int img) {
    size_t i, n = (size_t)N * img * img;
    float *s = (float *)malloc(n * sizeof *s);
    FILE *f;
    int ok = 1;
    if (!s) return 0;
    for (i = 0; i < n; i++) s[i] = x[i] < -1.0f ? -1.0f : x[i] > 1.0f ? 1.0f : x[i];   /* the script's clamp */
    if (strcmp(o->raw, "-")) {   /* little-endian hosts: the script reads '<f4' */
        int wrote = (f = fopen(o->raw, "wb")) != NULL && fwrite(s, sizeof *s, n, f) == n;
        if (f && fclose(f) != 0) wrote = 0;
        if (wrote) printf("wrote %s (%d samples, float32 [%d, %d, %d])\n", o->raw, N, N, img, img);
        else { fprintf(stderr, "diffuse: cannot write %s: %s\n", o->raw, strerror(errno)); ok = 0; }
    }
    if (strcmp(o->png, "-")) {
        if (png_write_grid(o->png, s, o->classes, o->per_class, img)) printf("wrote %s (%d classes x %d samples)\n", o->png, o->classes, o->per_class);
        else { fprintf(stderr, "diffuse: cannot write %s: %s\n", o->png, strerror(errno)); ok = 0; }
    }
    free(s);
    return ok;
}

int main(int argc, char **argv) {
    dit_opts o;
    dit_model md;
    lwo_safetensors_desc sdesc;
    lwo_safetensors *f = NULL;
    lwo_result r;
    char err[512];
    float *x;
    int *labels, N, i, steps, rc = 0;
    double cfg, secs = 0, t0 = dit_now_s();
    uint64_t nx;
    if (!dit_parse_opts(argc, argv, &o)) { dit_usage(stderr); return 2; }
    memset(&sdesc, 0, sizeof sdesc);
    sdesc.path = o.model;   /* mapped read-only; the weights of a --storage bf16 run stream from it */
    if ((r = lwo_safetensors_create(&sdesc, &f)) != LWO_SUCCESS) {
        fprintf(stderr, "diffuse: %.200s: %s: %.250s\n", o.model, lwo_result_string(r), f ? lwo_safetensors_last_error(f) : "out of memory");
        lwo_safetensors_destroy(f);
        return 1;
    }
    if (!dit_model_read(f, &md, err, sizeof err)) { fprintf(stderr, "diffuse: %s: %s\n", o.model, err); dit_model_free(&md); lwo_safetensors_destroy(f); return 1; }
    if (o.classes > md.a.classes) { fprintf(stderr, "diffuse: --classes %d: the model has %d\n", o.classes, md.a.classes); rc = 2; goto done; }
    steps = o.steps ? o.steps : md.a.steps;
    cfg = o.cfg == o.cfg ? o.cfg : md.a.cfg;
    N = o.classes * o.per_class;
    nx = (uint64_t)N * md.a.C * md.a.img * md.a.img;
    x = (float *)malloc((size_t)nx * sizeof *x);
    labels = (int *)malloc((size_t)N * sizeof *labels);
    if (!x || !labels) { fprintf(stderr, "diffuse: out of memory\n"); free(x); free(labels); rc = 1; goto done; }
    for (i = 0; i < N; i++) labels[i] = i / o.per_class;
    dit_noise(o.seed, nx, x);
    printf("tiny-dit-v1 (hidden %d, depth %d, heads %d x %d, %d tokens): %d samples (%d classes x %d), %d steps, cfg %g, seed %llu, "
           "noise[0,0,0,:4] = %.7g %.7g %.7g %.7g\n", md.a.D, md.a.depth, md.a.heads, md.a.hd, md.a.T, N, o.classes, o.per_class, steps, cfg,
           (unsigned long long)o.seed, x[0], x[1], x[2], x[3]);
    fflush(stdout);
    if (o.cpu) {
        if (!cpu_sample(&md, x, N, labels, steps, cfg, &secs)) rc = 1;
        else printf("cpu reference: %d samples, %d steps in %.2f s (%.3f steps/s); wall %.2f s\n", N, steps, secs, steps / secs, dit_now_s() - t0);
    } else if (gpu_sample(f, &md, &o, x, N, labels, steps, cfg)) rc = 1;
    if (!rc && !write_outputs(&o, x, N, md.a.img)) rc = 1;
    free(x); free(labels);
done:
    dit_model_free(&md);
    lwo_safetensors_destroy(f);   /* after the weights: a streamed bf16 weight reads the mapping */
    return rc;
}
#endif

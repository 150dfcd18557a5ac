/* dit_common.h - what the diffusion examples share (examples/diffuse.c, examples/bench_dit.c):
   their kernels (examples/dit_kernels.cu, embedded below by `make embed`), compiling and launching
   them through lwo, the splitmix64 / Box-Muller noise of tools/train_tiny_dit.py, a clock.
   Include after lwo.h. Everything here is static (inline, so a user of part of it builds clean). */
#ifndef DIT_COMMON_H
#define DIT_COMMON_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* LWO_EMBED_BEGIN (tools/embed_kernels.py writes this block; edit examples/dit_kernels.cu) */
static const char *const dit_kernel_source_parts[] = {
"/* The diffusion demo's own kernels (examples/diffuse.c, examples/bench_dit.c), compiled at run time\n   with lwo_module_compile (options: --fmad=false, so every product and sum rounds as the CPU\n   reference in diffuse.c does). No toolkit #include: NVRTC finds none.\n\n   Layouts: activations are row-major [M, width] with row m = b * T + n (sample b, token n).\n   Per-sample vectors (the adaLN modulations) are [B, stride] rows; chunk j of one starts at\n   column j * D. Element counts are 64-bit; the 1-D kernels are grid-stride loops, so any grid\n   size is correct. */\ntypedef unsigned short dit_u16;\ntypedef unsigned int dit_u32;\ntypedef unsigned long long dit_u64;\n\n__device__ __forceinline__ float dit_bf16_to_f32(dit_u16 h) { return __uint_as_float((dit_u32)h << 16); }\n__device__ __forceinline__ dit_u16 dit_f32_to_bf16(float v) {\n    dit_u32 u = __float_as_uint(v);\n    if ((u & 0x7fffffffu) > 0x7f800000u) return (dit_u16)((u >> 16) | 0x40u); /* quiet NaN */\n    u += 0x7fffu + ((u >> 16) & 1u);                                           /* nearest even */\n    return (dit_u16)(u >> 16);\n}\n#define DIT_GRID_STRIDE(i, n) for (dit_u64 i = (dit_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (dit_u64)gridDim.x * blockDim.x)\n\n/* t_i of the rectified-flow Euler sampler: float32((steps - i) / steps), the division in double as\n   Python does it. */\n__device__ __forceinline__ float dit_t_at(int i, int steps) { return (float)((double)(steps - i) / (double)steps); }\n\n/* patchify the state x [N, C, H, W] f32 into tokens tok bf16 [Bt * T, P], P = p * p * C, token\n   n = r * G + c, element (py * p + px) * C + ch. Rows b >= N repeat sample b - N (the CFG half). */\nextern \"C\" __global__ void dit_patchify(const float *x, int N, int Bt, int C, int H, int W, int p, dit_u16 *tok) {\n    int G = W / p, T = (H / p) * G, P = p * p * C;\n    dit_u64 total = (dit_u64)Bt * T * P;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 b = i / ((dit_u64)T * P);\n        int rem = (int)(i - b * T * P), n = rem / P, e = rem % P;\n        int ch = e % C, pp = e / C, py = pp / p, px = pp % p, r = n / G, c = n % G;\n        dit_u64 s = b < (dit_u64)N ? b : b - N;\n        tok[i] = dit_f32_to_bf16(x[((s * C + ch) * H + (dit_u64)(r * p + py)) * W + (dit_u64)(c * p + px)]);\n    }\n}\n\n/* Sinusoidal timestep embedding of t = t_(*counter), the same for all Bt rows: out bf16 [Bt, dim],\n   f_k = exp((neg_log_period * k) / half), a_k = (time_scale * t) * f_k, out = [cos(a), sin(a)]. */\nextern \"C\" __global__ void dit_time_embed(const int *counter, int steps, int Bt, int dim, float time_scale,\n                                          float neg_log_period, dit_u16 *out) {\n    int half = dim / 2;\n    float t = dit_t_at(counter[0], steps);\n    dit_u64 total = (dit_u64)Bt * half;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 b = i / half;\n        int k = (int)(i % half);\n",
"        float f = expf(__fdiv_rn(__fmul_rn(neg_log_period, (float)k), (float)half));\n        float a = __fmul_rn(__fmul_rn(t, time_scale), f);\n        out[b * dim + k] = dit_f32_to_bf16(cosf(a));\n        out[b * dim + half + k] = dit_f32_to_bf16(sinf(a));\n    }\n}\n\n__device__ __forceinline__ float dit_silu(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }\n\n/* y = bf16(silu(x)), n elements */\nextern \"C\" __global__ void dit_silu_bf16(const float *x, dit_u64 n, dit_u16 *y) {\n    DIT_GRID_STRIDE(i, n) y[i] = dit_f32_to_bf16(dit_silu(x[i]));\n}\n\n/* The conditioning: c = te + table[label], sc = bf16(silu(c)); te f32 [Bt, D], table bf16\n   [rows, D], labels int [Bt] (clamped into the table). */\nextern \"C\" __global__ void dit_condition(const float *te, const dit_u16 *table, int rows, const int *labels, int Bt, int D,\n                                         dit_u16 *sc) {\n    dit_u64 total = (dit_u64)Bt * D;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 b = i / D;\n        int d = (int)(i % D), l = labels[b];\n        if (l < 0 || l >= rows) l = rows - 1;\n        float c = __fadd_rn(te[i], dit_bf16_to_f32(table[(dit_u64)l * D + d]));\n        sc[i] = dit_f32_to_bf16(dit_silu(c));\n    }\n}\n\n/* h = e + pos[n]: e, h f32 [M, D], pos bf16 [T, D], n = m % T */\nextern \"C\" __global__ void dit_embed_pos(const float *e, const dit_u16 *pos, dit_u64 M, int T, int D, float *h) {\n    dit_u64 total = M * D;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 m = i / D;\n        int d = (int)(i % D);\n        h[i] = __fadd_rn(e[i], dit_bf16_to_f32(pos[(m % T) * D + d]));\n    }\n}\n\n/* LayerNorm without affine parameters, then modulate, one warp per row:\n   out[m] = bf16(((h[m] - mean) * rstd) * (1 + scale[b]) + shift[b]), rstd = 1 / sqrt(var + eps),\n   mean and biased var over D (two passes, f32), b = m / T; shift / scale at columns shift_off /\n   scale_off of row b of mod [*, mod_stride]. Block: 256 threads = 8 rows. */\nextern \"C\" __global__ void dit_ln_modulate(const float *h, dit_u64 M, int D, int T, const float *mod, int mod_stride,\n                                           int shift_off, int scale_off, float eps, dit_u16 *out) {\n    dit_u64 m = (dit_u64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n    int lane = threadIdx.x % 32, d;\n    float s = 0.0f, v = 0.0f, mean, rstd;\n    const float *row, *sh, *sc;\n    if (m >= M) return;\n    row = h + m * D;\n    for (d = lane; d < D; d += 32) s = __fadd_rn(s, row[d]);\n    for (d = 16; d > 0; d >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, d));\n    mean = __fdiv_rn(s, (float)D);\n    for (d = lane; d < D; d += 32) { float c = __fsub_rn(row[d], mean); v = __fadd_rn(v, __fmul_rn(c, c)); }\n    for (d = 16; d > 0; d >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, d));\n    rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(v, (float)D), eps)));\n    sh = mod + (m / T) * mod_stride + shift_off;\n",
"    sc = mod + (m / T) * mod_stride + scale_off;\n    for (d = lane; d < D; d += 32) {\n        float y = __fmul_rn(__fsub_rn(row[d], mean), rstd);\n        out[m * D + d] = dit_f32_to_bf16(__fadd_rn(__fmul_rn(y, __fadd_rn(1.0f, sc[d])), sh[d]));\n    }\n}\n\n/* h += gate[b] * y: h, y f32 [M, D]; gate at column gate_off of row b = m / T of mod */\nextern \"C\" __global__ void dit_gate_residual(float *h, const float *y, dit_u64 M, int D, int T, const float *mod, int mod_stride,\n                                             int gate_off) {\n    dit_u64 total = M * D;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 m = i / D;\n        int d = (int)(i % D);\n        h[i] = __fadd_rn(h[i], __fmul_rn(mod[(m / T) * mod_stride + gate_off + d], y[i]));\n    }\n}\n\n/* gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */\n__device__ __forceinline__ float dit_gelu_tanh(float v) {\n    float cube = __fmul_rn(__fmul_rn(v, v), v);\n    float inner = __fmul_rn(0.7978845608028654f, __fadd_rn(v, __fmul_rn(0.044715f, cube)));\n    return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));\n}\n/* y = bf16(gelu_tanh(x)), n elements */\nextern \"C\" __global__ void dit_gelu_tanh_bf16(const float *x, dit_u64 n, dit_u16 *y) {\n    DIT_GRID_STRIDE(i, n) y[i] = dit_f32_to_bf16(dit_gelu_tanh(x[i]));\n}\n/* the same over a [rows, cols] block of x (row stride ldx) into y (row stride ldy) */\nextern \"C\" __global__ void dit_gelu_tanh_bf16_2d(const float *x, dit_u64 rows, int cols, int ldx, dit_u16 *y, int ldy) {\n    dit_u64 total = rows * cols;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 r = i / cols, c = i % cols;\n        y[r * ldy + c] = dit_f32_to_bf16(dit_gelu_tanh(x[r * ldx + c]));\n    }\n}\n\n/* Attention, softmax in f32: out[b*T + i, hh*HD ..] = bf16(softmax_j(q_i . k_j * scale) v_j), q, k, v\n   read from qkv f32 [Bt * T, >= 3 * D] of row stride ld_qkv (q at column hh * HD, k at D + hh * HD,\n   v at 2 * D + hh * HD); out bf16 of row stride ld_out.\n   Grid (ceil(T / QT), heads, Bt), block QT * (HD / 32) threads: G = HD / 32 threads per query, each\n   owning the dims d * G + g (so a group reads consecutive shared words), their partial dot\n   products summed by shuffles. Keys and values go through shared memory KC keys at a time; the\n   running max rescales the sums only when it grows. */\ntemplate <int HD, int QT, int KC>\n__device__ __forceinline__ void dit_attention_body(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {\n    enum { G = HD / 32 };\n    __shared__ float ks[KC * HD], vs[KC * HD];\n    const int b = blockIdx.z, hh = blockIdx.y, tid = threadIdx.x, g = tid % G;\n    const int qi = blockIdx.x * QT + tid / G;\n    const dit_u64 ld = (dit_u64)ld_qkv;\n    const float *base = qkv + (dit_u64)b * T * ld + (dit_u64)hh * HD;\n    float q[32], acc[32], m = __int_as_float(0xff800000), l = 0.0f;\n    int d, j, k0;\n",
"    for (d = 0; d < 32; d++) { q[d] = qi < T ? base[(dit_u64)qi * ld + d * G + g] : 0.0f; acc[d] = 0.0f; }\n    for (k0 = 0; k0 < T; k0 += KC) {\n        int nk = T - k0 < KC ? T - k0 : KC, i;\n        __syncthreads();\n        for (i = tid; i < KC * HD; i += blockDim.x) {\n            int kj = i / HD, kd = i % HD;\n            float kv = 0.0f, vv = 0.0f;\n            if (kj < nk) { const float *r = base + (dit_u64)(k0 + kj) * ld + kd; kv = r[D]; vv = r[2 * D]; }\n            ks[i] = kv; vs[i] = vv;\n        }\n        __syncthreads();\n        for (j = 0; j < nk; j++) {   /* every thread runs every key: the shuffles need the whole warp */\n            const float *kr = ks + j * HD + g, *vr = vs + j * HD + g;\n            float s = 0.0f, p;\n            int o;\n            for (d = 0; d < 32; d++) s = __fadd_rn(s, __fmul_rn(q[d], kr[d * G]));\n            for (o = 1; o < G; o <<= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));\n            s = __fmul_rn(s, scale);\n            if (s > m) {\n                float c = expf(__fsub_rn(m, s));\n                l = __fmul_rn(l, c);\n                for (d = 0; d < 32; d++) acc[d] = __fmul_rn(acc[d], c);\n                m = s;\n            }\n            p = expf(__fsub_rn(s, m));\n            l = __fadd_rn(l, p);\n            for (d = 0; d < 32; d++) acc[d] = __fadd_rn(acc[d], __fmul_rn(p, vr[d * G]));\n        }\n    }\n    if (qi < T)\n        for (d = 0; d < 32; d++) out[((dit_u64)b * T + qi) * ld_out + (dit_u64)hh * HD + d * G + g] = dit_f32_to_bf16(__fdiv_rn(acc[d], l));\n}\n/* head_dim 64: block 64 threads (32 queries); head_dim 128: block 128 threads (32 queries) */\nextern \"C\" __global__ void dit_attention_hd64(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {\n    dit_attention_body<64, 32, 64>(qkv, ld_qkv, T, D, scale, out, ld_out);\n}\nextern \"C\" __global__ void dit_attention_hd128(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {\n    dit_attention_body<128, 32, 32>(qkv, ld_qkv, T, D, scale, out, ld_out);\n}\n\n/* One Euler step of the sampler, with the model output o f32 [Bt * T, P] unpatchified on the fly:\n   v = o (cond rows 0..N-1); with cfg_on, v = vu + cfg * (vc - vu), vu from rows N..2N-1;\n   x += (t_(i+1) - t_i) * v, i = *counter. x [N, C, H, W] f32. */\nextern \"C\" __global__ void dit_euler(float *x, const float *o, const int *counter, int steps, int N, int C, int H, int W, int p,\n                                     int cfg_on, float cfg) {\n    int G = W / p, T = (H / p) * G, P = p * p * C, i0 = counter[0];\n    float dt = __fsub_rn(dit_t_at(i0 + 1, steps), dit_t_at(i0, steps));\n    dit_u64 total = (dit_u64)N * C * H * W;\n    DIT_GRID_STRIDE(i, total) {\n        dit_u64 s = i / ((dit_u64)C * H * W);\n        int rem = (int)(i - s * C * H * W), ch = rem / (H * W), row = (rem / W) % H, col = rem % W;\n        int n = (row / p) * G + col / p, e = ((row % p) * p + col % p) * C + ch;\n",
"        float v = o[(s * T + n) * P + e];\n        if (cfg_on) {\n            float vu = o[((s + N) * T + n) * P + e];\n            v = __fadd_rn(vu, __fmul_rn(cfg, __fsub_rn(v, vu)));\n        }\n        x[i] = __fadd_rn(x[i], __fmul_rn(dt, v));\n    }\n}\n\n/* The last kernel of a step: the next step reads t_(i+1). */\nextern \"C\" __global__ void dit_step_advance(int *counter) {\n    if (blockIdx.x == 0 && threadIdx.x == 0) counter[0] += 1;\n}\n",
};
/* LWO_EMBED_END */

/* ---- kernels ------------------------------------------------------------------------------- */
/* Compiles dit_kernels.cu for this device (through lwo's NVRTC path and cubin cache). --fmad=false:
   every product and sum rounds on its own, as in diffuse.c's CPU reference. */
static inline lwo_result dit_module_compile(lwo_context *ctx, lwo_module **out) {
    static const char *const opts[] = { "--fmad=false", NULL };
    size_t i, n = 0, np = sizeof dit_kernel_source_parts / sizeof *dit_kernel_source_parts;
    char *src;
    lwo_result r;
    for (i = 0; i < np; i++) n += strlen(dit_kernel_source_parts[i]);
    src = (char *)malloc(n + 1);
    if (!src) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (n = 0, i = 0; i < np; i++) { size_t k = strlen(dit_kernel_source_parts[i]); memcpy(src + n, dit_kernel_source_parts[i], k); n += k; }
    src[n] = 0;
    r = lwo_module_compile(ctx, src, "dit_kernels.cu", opts, out);
    free(src);
    return r;
}

/* A grid-stride kernel over n elements: 256 threads a block, at most 2^20 blocks. */
static inline lwo_result dit_launch_1d(lwo_context *ctx, lwo_module *m, const char *kernel, uint64_t n, void **args) {
    uint64_t blocks = (n + 255) / 256;
    unsigned grid[3], block[3] = { 256, 1, 1 };
    grid[0] = (unsigned)(blocks == 0 ? 1 : blocks > (1u << 20) ? (1u << 20) : blocks);
    grid[1] = grid[2] = 1;
    return lwo_launch(ctx, NULL, m, kernel, grid, block, 0, args);
}

static inline lwo_result dit_launch_3d(lwo_context *ctx, lwo_module *m, const char *kernel, unsigned gx, unsigned gy, unsigned gz,
                                unsigned threads, void **args) {
    unsigned grid[3], block[3];
    grid[0] = gx; grid[1] = gy; grid[2] = gz;
    block[0] = threads; block[1] = block[2] = 1;
    return lwo_launch(ctx, NULL, m, kernel, grid, block, 0, args);
}

/* ---- noise: "splitmix64-boxmuller-v1" of tools/train_tiny_dit.py ------------------------------ */
static inline uint64_t dit_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* u = ((z >> 11) + 0.5) * 2^-53, strictly inside (0, 1) */
static inline double dit_uniform(uint64_t *state) { return ((double)(dit_splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
/* n standard normals: normal k from draws 2k (u1) and 2k+1 (u2), the cosine branch only, float64
   math rounded to float32 -- the order is the caller's (sample, channel, row, col). */
static inline void dit_noise(uint64_t seed, uint64_t n, float *out) {
    uint64_t i, st = seed;
    for (i = 0; i < n; i++) {
        double u1 = dit_uniform(&st), u2 = dit_uniform(&st);
        out[i] = (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * 3.141592653589793 * u2));
    }
}

static inline double dit_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Progress on stderr: "[#####-----]  12/20 steps   45.3 steps/s" */
static inline void dit_progress(const char *what, int done, int total, double elapsed_s) {
    char bar[41];
    int i, w = 30, fill = total > 0 ? (int)((long long)done * w / total) : w;
    for (i = 0; i < w; i++) bar[i] = i < fill ? '#' : '-';
    bar[w] = 0;
    fprintf(stderr, "\r%s [%s] %4d/%d steps %8.2f steps/s", what, bar, done, total, elapsed_s > 0 ? done / elapsed_s : 0.0);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}
#endif

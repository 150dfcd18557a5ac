/* The diffusion demo's own kernels (examples/diffuse.c, examples/bench_dit.c), compiled at run time
   with lwo_module_compile (options: --fmad=false, so every product and sum rounds as the CPU
   reference in diffuse.c does). No toolkit #include: NVRTC finds none.

   Layouts: activations are row-major [M, width] with row m = b * T + n (sample b, token n).
   Per-sample vectors (the adaLN modulations) are [B, stride] rows; chunk j of one starts at
   column j * D. Element counts are 64-bit; the 1-D kernels are grid-stride loops, so any grid
   size is correct. */
typedef unsigned short dit_u16;
typedef unsigned int dit_u32;
typedef unsigned long long dit_u64;

__device__ __forceinline__ float dit_bf16_to_f32(dit_u16 h) { return __uint_as_float((dit_u32)h << 16); }
__device__ __forceinline__ dit_u16 dit_f32_to_bf16(float v) {
    dit_u32 u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (dit_u16)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                           /* nearest even */
    return (dit_u16)(u >> 16);
}
#define DIT_GRID_STRIDE(i, n) for (dit_u64 i = (dit_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (dit_u64)gridDim.x * blockDim.x)

/* t_i of the rectified-flow Euler sampler: float32((steps - i) / steps), the division in double as
   Python does it. */
__device__ __forceinline__ float dit_t_at(int i, int steps) { return (float)((double)(steps - i) / (double)steps); }

/* patchify the state x [N, C, H, W] f32 into tokens tok bf16 [Bt * T, P], P = p * p * C, token
   n = r * G + c, element (py * p + px) * C + ch. Rows b >= N repeat sample b - N (the CFG half). */
extern "C" __global__ void dit_patchify(const float *x, int N, int Bt, int C, int H, int W, int p, dit_u16 *tok) {
    int G = W / p, T = (H / p) * G, P = p * p * C;
    dit_u64 total = (dit_u64)Bt * T * P;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 b = i / ((dit_u64)T * P);
        int rem = (int)(i - b * T * P), n = rem / P, e = rem % P;
        int ch = e % C, pp = e / C, py = pp / p, px = pp % p, r = n / G, c = n % G;
        dit_u64 s = b < (dit_u64)N ? b : b - N;
        tok[i] = dit_f32_to_bf16(x[((s * C + ch) * H + (dit_u64)(r * p + py)) * W + (dit_u64)(c * p + px)]);
    }
}

/* Sinusoidal timestep embedding of t = t_(*counter), the same for all Bt rows: out bf16 [Bt, dim],
   f_k = exp((neg_log_period * k) / half), a_k = (time_scale * t) * f_k, out = [cos(a), sin(a)]. */
extern "C" __global__ void dit_time_embed(const int *counter, int steps, int Bt, int dim, float time_scale,
                                          float neg_log_period, dit_u16 *out) {
    int half = dim / 2;
    float t = dit_t_at(counter[0], steps);
    dit_u64 total = (dit_u64)Bt * half;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 b = i / half;
        int k = (int)(i % half);
        float f = expf(__fdiv_rn(__fmul_rn(neg_log_period, (float)k), (float)half));
        float a = __fmul_rn(__fmul_rn(t, time_scale), f);
        out[b * dim + k] = dit_f32_to_bf16(cosf(a));
        out[b * dim + half + k] = dit_f32_to_bf16(sinf(a));
    }
}

__device__ __forceinline__ float dit_silu(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }

/* y = bf16(silu(x)), n elements */
extern "C" __global__ void dit_silu_bf16(const float *x, dit_u64 n, dit_u16 *y) {
    DIT_GRID_STRIDE(i, n) y[i] = dit_f32_to_bf16(dit_silu(x[i]));
}

/* The conditioning: c = te + table[label], sc = bf16(silu(c)); te f32 [Bt, D], table bf16
   [rows, D], labels int [Bt] (clamped into the table). */
extern "C" __global__ void dit_condition(const float *te, const dit_u16 *table, int rows, const int *labels, int Bt, int D,
                                         dit_u16 *sc) {
    dit_u64 total = (dit_u64)Bt * D;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 b = i / D;
        int d = (int)(i % D), l = labels[b];
        if (l < 0 || l >= rows) l = rows - 1;
        float c = __fadd_rn(te[i], dit_bf16_to_f32(table[(dit_u64)l * D + d]));
        sc[i] = dit_f32_to_bf16(dit_silu(c));
    }
}

/* h = e + pos[n]: e, h f32 [M, D], pos bf16 [T, D], n = m % T */
extern "C" __global__ void dit_embed_pos(const float *e, const dit_u16 *pos, dit_u64 M, int T, int D, float *h) {
    dit_u64 total = M * D;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 m = i / D;
        int d = (int)(i % D);
        h[i] = __fadd_rn(e[i], dit_bf16_to_f32(pos[(m % T) * D + d]));
    }
}

/* LayerNorm without affine parameters, then modulate, one warp per row:
   out[m] = bf16(((h[m] - mean) * rstd) * (1 + scale[b]) + shift[b]), rstd = 1 / sqrt(var + eps),
   mean and biased var over D (two passes, f32), b = m / T; shift / scale at columns shift_off /
   scale_off of row b of mod [*, mod_stride]. Block: 256 threads = 8 rows. */
extern "C" __global__ void dit_ln_modulate(const float *h, dit_u64 M, int D, int T, const float *mod, int mod_stride,
                                           int shift_off, int scale_off, float eps, dit_u16 *out) {
    dit_u64 m = (dit_u64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32, d;
    float s = 0.0f, v = 0.0f, mean, rstd;
    const float *row, *sh, *sc;
    if (m >= M) return;
    row = h + m * D;
    for (d = lane; d < D; d += 32) s = __fadd_rn(s, row[d]);
    for (d = 16; d > 0; d >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, d));
    mean = __fdiv_rn(s, (float)D);
    for (d = lane; d < D; d += 32) { float c = __fsub_rn(row[d], mean); v = __fadd_rn(v, __fmul_rn(c, c)); }
    for (d = 16; d > 0; d >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, d));
    rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(v, (float)D), eps)));
    sh = mod + (m / T) * mod_stride + shift_off;
    sc = mod + (m / T) * mod_stride + scale_off;
    for (d = lane; d < D; d += 32) {
        float y = __fmul_rn(__fsub_rn(row[d], mean), rstd);
        out[m * D + d] = dit_f32_to_bf16(__fadd_rn(__fmul_rn(y, __fadd_rn(1.0f, sc[d])), sh[d]));
    }
}

/* h += gate[b] * y: h, y f32 [M, D]; gate at column gate_off of row b = m / T of mod */
extern "C" __global__ void dit_gate_residual(float *h, const float *y, dit_u64 M, int D, int T, const float *mod, int mod_stride,
                                             int gate_off) {
    dit_u64 total = M * D;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 m = i / D;
        int d = (int)(i % D);
        h[i] = __fadd_rn(h[i], __fmul_rn(mod[(m / T) * mod_stride + gate_off + d], y[i]));
    }
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
__device__ __forceinline__ float dit_gelu_tanh(float v) {
    float cube = __fmul_rn(__fmul_rn(v, v), v);
    float inner = __fmul_rn(0.7978845608028654f, __fadd_rn(v, __fmul_rn(0.044715f, cube)));
    return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
}
/* y = bf16(gelu_tanh(x)), n elements */
extern "C" __global__ void dit_gelu_tanh_bf16(const float *x, dit_u64 n, dit_u16 *y) {
    DIT_GRID_STRIDE(i, n) y[i] = dit_f32_to_bf16(dit_gelu_tanh(x[i]));
}
/* the same over a [rows, cols] block of x (row stride ldx) into y (row stride ldy) */
extern "C" __global__ void dit_gelu_tanh_bf16_2d(const float *x, dit_u64 rows, int cols, int ldx, dit_u16 *y, int ldy) {
    dit_u64 total = rows * cols;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 r = i / cols, c = i % cols;
        y[r * ldy + c] = dit_f32_to_bf16(dit_gelu_tanh(x[r * ldx + c]));
    }
}

/* Attention, softmax in f32: out[b*T + i, hh*HD ..] = bf16(softmax_j(q_i . k_j * scale) v_j), q, k, v
   read from qkv f32 [Bt * T, >= 3 * D] of row stride ld_qkv (q at column hh * HD, k at D + hh * HD,
   v at 2 * D + hh * HD); out bf16 of row stride ld_out.
   Grid (ceil(T / QT), heads, Bt), block QT * (HD / 32) threads: G = HD / 32 threads per query, each
   owning the dims d * G + g (so a group reads consecutive shared words), their partial dot
   products summed by shuffles. Keys and values go through shared memory KC keys at a time; the
   running max rescales the sums only when it grows. */
template <int HD, int QT, int KC>
__device__ __forceinline__ void dit_attention_body(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {
    enum { G = HD / 32 };
    __shared__ float ks[KC * HD], vs[KC * HD];
    const int b = blockIdx.z, hh = blockIdx.y, tid = threadIdx.x, g = tid % G;
    const int qi = blockIdx.x * QT + tid / G;
    const dit_u64 ld = (dit_u64)ld_qkv;
    const float *base = qkv + (dit_u64)b * T * ld + (dit_u64)hh * HD;
    float q[32], acc[32], m = __int_as_float(0xff800000), l = 0.0f;
    int d, j, k0;
    for (d = 0; d < 32; d++) { q[d] = qi < T ? base[(dit_u64)qi * ld + d * G + g] : 0.0f; acc[d] = 0.0f; }
    for (k0 = 0; k0 < T; k0 += KC) {
        int nk = T - k0 < KC ? T - k0 : KC, i;
        __syncthreads();
        for (i = tid; i < KC * HD; i += blockDim.x) {
            int kj = i / HD, kd = i % HD;
            float kv = 0.0f, vv = 0.0f;
            if (kj < nk) { const float *r = base + (dit_u64)(k0 + kj) * ld + kd; kv = r[D]; vv = r[2 * D]; }
            ks[i] = kv; vs[i] = vv;
        }
        __syncthreads();
        for (j = 0; j < nk; j++) {   /* every thread runs every key: the shuffles need the whole warp */
            const float *kr = ks + j * HD + g, *vr = vs + j * HD + g;
            float s = 0.0f, p;
            int o;
            for (d = 0; d < 32; d++) s = __fadd_rn(s, __fmul_rn(q[d], kr[d * G]));
            for (o = 1; o < G; o <<= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
            s = __fmul_rn(s, scale);
            if (s > m) {
                float c = expf(__fsub_rn(m, s));
                l = __fmul_rn(l, c);
                for (d = 0; d < 32; d++) acc[d] = __fmul_rn(acc[d], c);
                m = s;
            }
            p = expf(__fsub_rn(s, m));
            l = __fadd_rn(l, p);
            for (d = 0; d < 32; d++) acc[d] = __fadd_rn(acc[d], __fmul_rn(p, vr[d * G]));
        }
    }
    if (qi < T)
        for (d = 0; d < 32; d++) out[((dit_u64)b * T + qi) * ld_out + (dit_u64)hh * HD + d * G + g] = dit_f32_to_bf16(__fdiv_rn(acc[d], l));
}
/* head_dim 64: block 64 threads (32 queries); head_dim 128: block 128 threads (32 queries) */
extern "C" __global__ void dit_attention_hd64(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {
    dit_attention_body<64, 32, 64>(qkv, ld_qkv, T, D, scale, out, ld_out);
}
extern "C" __global__ void dit_attention_hd128(const float *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out, int ld_out) {
    dit_attention_body<128, 32, 32>(qkv, ld_qkv, T, D, scale, out, ld_out);
}

/* One Euler step of the sampler, with the model output o f32 [Bt * T, P] unpatchified on the fly:
   v = o (cond rows 0..N-1); with cfg_on, v = vu + cfg * (vc - vu), vu from rows N..2N-1;
   x += (t_(i+1) - t_i) * v, i = *counter. x [N, C, H, W] f32. */
extern "C" __global__ void dit_euler(float *x, const float *o, const int *counter, int steps, int N, int C, int H, int W, int p,
                                     int cfg_on, float cfg) {
    int G = W / p, T = (H / p) * G, P = p * p * C, i0 = counter[0];
    float dt = __fsub_rn(dit_t_at(i0 + 1, steps), dit_t_at(i0, steps));
    dit_u64 total = (dit_u64)N * C * H * W;
    DIT_GRID_STRIDE(i, total) {
        dit_u64 s = i / ((dit_u64)C * H * W);
        int rem = (int)(i - s * C * H * W), ch = rem / (H * W), row = (rem / W) % H, col = rem % W;
        int n = (row / p) * G + col / p, e = ((row % p) * p + col % p) * C + ch;
        float v = o[(s * T + n) * P + e];
        if (cfg_on) {
            float vu = o[((s + N) * T + n) * P + e];
            v = __fadd_rn(vu, __fmul_rn(cfg, __fsub_rn(v, vu)));
        }
        x[i] = __fadd_rn(x[i], __fmul_rn(dt, v));
    }
}

/* The last kernel of a step: the next step reads t_(i+1). */
extern "C" __global__ void dit_step_advance(int *counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) counter[0] += 1;
}

/* The diffusion demo's own kernels (examples/diffuse.c, examples/bench_dit.c), compiled at run time
   with lwo_module_create (options: --fmad=false, so every product and sum rounds as the CPU
   reference, examples/dit_ref.h, does). No toolkit #include: NVRTC finds none.

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

/* Attention, plain: the path below sm_80 (dit_attention in dit_common.h takes it there), f32
   throughout, within a bf16 ulp of the CPU reference.
   out[b*T + i, hh*HD ..] = bf16(softmax_j(q_i . k_j * scale) v_j), q, k, v read from qkv f32
   [Bt * T, >= 3 * D] of row stride ld_qkv (q at column hh * HD, k at D + hh * HD, v at
   2 * D + hh * HD); out bf16 of row stride ld_out.
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

/* ---- flash attention on tensor cores (sm_80+) ------------------------------------------------ */
/* q, k, v as bf16: dst[r, c] = bf16(src[r, c]) for c < cols, rows of stride ld_src (f32) and ld_dst
   (bf16) elements -- the qkv f32 rows a linear wrote, for dit_flash_attention_*. Exact (round to
   nearest even, as lwo_ref_f32_to_bf16). Requirements: cols, ld_src and ld_dst multiples of 4, src
   16-byte and dst 8-byte aligned (a float4 in, four bf16 out per thread). Grid
   (ceil(cols / 1024), any), 256 threads; rows grid-stride over gridDim.y. */
extern "C" __global__ void dit_qkv_to_bf16(const float *src, dit_u64 rows, int cols, int ld_src, dit_u16 *dst, int ld_dst) {
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= cols) return;
    for (dit_u64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4 v = *(const float4 *)(src + r * ld_src + c);
        uint2 o;
        o.x = (dit_u32)dit_f32_to_bf16(v.x) | ((dit_u32)dit_f32_to_bf16(v.y) << 16);
        o.y = (dit_u32)dit_f32_to_bf16(v.z) | ((dit_u32)dit_f32_to_bf16(v.w) << 16);
        *(uint2 *)(dst + r * ld_dst + c) = o;
    }
}

__device__ __forceinline__ void dit_cp_async16(dit_u32 saddr, const void *g, int valid) {
#if __CUDA_ARCH__ >= 800
    /* src-size 0 reads nothing and zero-fills: rows past T arrive as zeros, never as stale data */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(saddr), "l"(g), "r"(valid ? 16 : 0) : "memory");
#endif
}
__device__ __forceinline__ void dit_cp_async_commit_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void dit_cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void dit_cp_async_wait_all() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}
__device__ __forceinline__ void dit_ldmatrix_x4(dit_u32 *r, dit_u32 saddr) {
#if __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(saddr));
#endif
}
__device__ __forceinline__ void dit_ldmatrix_x4_trans(dit_u32 *r, dit_u32 saddr) {
#if __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(saddr));
#endif
}
/* c += a b, m16n8k16, bf16 in, f32 accumulators */
__device__ __forceinline__ void dit_mma_bf16(float *c, const dit_u32 *a, dit_u32 b0, dit_u32 b1) {
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
/* two f32 as bf16 (nearest even) in one register, lo in the low half: an mma operand pair */
__device__ __forceinline__ dit_u32 dit_pack_bf16x2(float lo, float hi) {
    dit_u32 r = 0;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
/* 2^x (MUFU; 2 ulp, ex2(-inf) = 0): the softmax's exponent, in log2 units */
__device__ __forceinline__ float dit_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* a count as a type, for a lambda whose loop must unroll (its trip count a constant) */
template <int N> struct dit_int { enum { value = N }; };

/* 1 / x within an ulp (MUFU), for x the row sums, which are >= 1 (the max's own term is 1): the
   division's exact-rounding subroutine would cost registers for nothing the bf16 output keeps */
__device__ __forceinline__ float dit_rcp(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Byte offset of 16-byte chunk c of row r in a shared tile of rows of HD bf16 (HD * 2 bytes, a
   multiple of 128): chunk slot c ^ (r % 8). An ldmatrix phase reads one chunk column of eight
   consecutive rows; the XOR puts those eight chunks in eight different bank groups. */
template <int HD>
__device__ __forceinline__ dit_u32 dit_fa_swz(int r, int c) { return (dit_u32)(r * (HD * 2) + ((c ^ (r & 7)) << 4)); }

/* Flash attention (FlashAttention-2's schedule): out[b*T + i, hh*HD ..] =
   bf16(softmax_j(q_i . k_j * scale) v_j) with q, k, v bf16 from qkv [Bt * T, >= 3 * D] of row
   stride ld_qkv (q at column hh * HD, k at D + hh * HD, v at 2 * D + hh * HD, as
   dit_attention_body reads them); out bf16 of row stride ld_out.
   Grid (ceil(T / 128), heads, Bt), 256 threads (8 warps), dynamic shared memory 4 * 64 * HD * 2
   bytes (64 KiB at HD 128). A block takes 128 queries, warp w the 16 rows w * 16 ..; keys go by
   tiles of 64, double-buffered: tile j + 1 is in flight (cp.async) while tile j is computed.
   S = Q K^T and O += P V on mma.sync m16n8k16 (bf16 in, f32 out); the running max and sum are f32;
   P goes to bf16 for its mma. Scores in log2 units (scale * log2 e folded into one FMA before ex2).
   Any T >= 1: keys >= T score -inf (their rows load as zeros), queries >= T are not written.
   Requirements (the host checks): ld_qkv and D multiples of 8 and qkv 16-byte aligned (16-byte
   copies); ld_out even and out 4-byte aligned (bf16 pairs). Below sm_80 (no bf16 mma.sync) the
   kernel traps: dit_attention (dit_common.h) launches the plain f32 kernels there. */
template <int HD>
__device__ __forceinline__ void dit_flash_attention_body(const dit_u16 *qkv, int ld_qkv, int T, int D, float scale, dit_u16 *out,
                                                         int ld_out) {
#if __CUDA_ARCH__ >= 800
    enum { BM = 128, BN = 64, THREADS = 256, CH = HD / 8, KS = HD / 16, NO = HD / 8, TILE = BN * HD * 2, STAGE = 2 * TILE };
    extern __shared__ __align__(128) unsigned char dit_fa_smem[];
    const dit_u32 sbase = (dit_u32)__cvta_generic_to_shared(dit_fa_smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q4 = lane & 3;
    const int b = blockIdx.z, hh = blockIdx.y, q0 = blockIdx.x * BM, ntiles = (T + BN - 1) / BN;
    const dit_u64 ld = (dit_u64)ld_qkv;
    const dit_u16 *base = qkv + (dit_u64)b * T * ld + (dit_u64)hh * HD;
    const float c2 = __fmul_rn(scale, 1.4426950408889634f);
    /* Copies: thread tid takes chunk cc of rows cr, cr + RSTEP, ... of a tile. RSTEP is a multiple
       of 8, so those rows share the swizzle and their shared addresses differ by constants. */
    enum { RSTEP = THREADS / CH };
    const int cr = tid / CH, cc = tid % CH;
    const dit_u32 cs = dit_fa_swz<HD>(cr, cc);
    /* ROWS rows from token t0 of column block col into the tile at s; rows past T zero-filled */
    auto load_rows = [&](auto rows_tag, dit_u32 s, int t0, int col) {
        enum { ROWS = decltype(rows_tag)::value };
        const dit_u16 *gp = base + (dit_u64)(t0 + cr) * ld + col + cc * 8;
#pragma unroll
        for (int k = 0; k < ROWS / RSTEP; k++) {
            const int ok = t0 + cr + k * RSTEP < T;
            dit_cp_async16(s + cs + k * RSTEP * HD * 2, ok ? gp + (dit_u64)k * RSTEP * ld : base, ok);
        }
    };

    /* Q rides in stage 1 (128 rows of HD = exactly its K and V tiles) until it is in registers. */
    load_rows(dit_int<BM>(), sbase + STAGE, q0, 0);
    load_rows(dit_int<BN>(), sbase, 0, D);
    load_rows(dit_int<BN>(), sbase + TILE, 0, 2 * D);
    dit_cp_async_commit_wait_all();
    __syncthreads();
    dit_u32 qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++)   /* A fragments: lanes 0-15 rows 0-15 of chunk 2ks, lanes 16-31 of chunk 2ks+1 */
        dit_ldmatrix_x4(qf[ks], sbase + STAGE + dit_fa_swz<HD>(warp * 16 + (lane & 15), ks * 2 + (lane >> 4)));

    /* Accumulator fragment element e of n-tile t: row g + 8 * (e >> 1), column t * 8 + 2 * q4 + (e & 1);
       so each thread keeps the statistics of two rows, g and g + 8, shared with its quad. */
    float o[NO][4];
#pragma unroll
    for (int t = 0; t < NO; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
    float m0 = __int_as_float(0xff800000), m1 = m0, l0 = 0.0f, l1 = 0.0f;   /* running max (raw score), partial sums */

    for (int j = 0; j < ntiles; j++) {
        /* One barrier a tile: after it tile j has landed for every thread, and every warp is done
           with tile j - 1 (and at j = 0 with Q), whose stage the next copy refills. */
        __syncthreads();
        if (j + 1 < ntiles) {
            const dit_u32 s = sbase + ((j + 1) & 1) * STAGE;
            load_rows(dit_int<BN>(), s, (j + 1) * BN, D);
            load_rows(dit_int<BN>(), s + TILE, (j + 1) * BN, 2 * D);
            dit_cp_async_commit();
        }
        const dit_u32 sK = sbase + (j & 1) * STAGE, sV = sK + TILE;

        float s[8][4];
#pragma unroll
        for (int t = 0; t < 8; t++) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                /* B fragments of key tiles 2jp, 2jp+1: (keys 0-7, chunk 2ks) (0-7, 2ks+1) (8-15, 2ks) (8-15, 2ks+1) */
                dit_u32 kf[4];
                dit_ldmatrix_x4(kf, sK + dit_fa_swz<HD>(jp * 16 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
                dit_mma_bf16(s[2 * jp], qf[ks], kf[0], kf[1]);
                dit_mma_bf16(s[2 * jp + 1], qf[ks], kf[2], kf[3]);
            }
        if (j * BN + BN > T) {   /* the last, partial tile */
#pragma unroll
            for (int t = 0; t < 8; t++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (j * BN + t * 8 + q4 * 2 + (e & 1) >= T) s[t][e] = __int_as_float(0xff800000);
        }

        /* Online softmax: every tile has a key < T, so the new max is finite and the rescale
           factor of the first tile, 2^(-inf), is 0. */
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int t = 0; t < 8; t++) { mx0 = fmaxf(mx0, fmaxf(s[t][0], s[t][1])); mx1 = fmaxf(mx1, fmaxf(s[t][2], s[t][3])); }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1)); mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1)); mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float a0 = dit_ex2(__fmul_rn(__fsub_rn(m0, mx0), c2)), a1 = dit_ex2(__fmul_rn(__fsub_rn(m1, mx1), c2));
        const float mc0 = __fmul_rn(mx0, c2), mc1 = __fmul_rn(mx1, c2);
        m0 = mx0; m1 = mx1;
        float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            s[t][0] = dit_ex2(__fmaf_rn(s[t][0], c2, -mc0)); s[t][1] = dit_ex2(__fmaf_rn(s[t][1], c2, -mc0));
            s[t][2] = dit_ex2(__fmaf_rn(s[t][2], c2, -mc1)); s[t][3] = dit_ex2(__fmaf_rn(s[t][3], c2, -mc1));
            r0 = __fadd_rn(r0, __fadd_rn(s[t][0], s[t][1])); r1 = __fadd_rn(r1, __fadd_rn(s[t][2], s[t][3]));
        }
        l0 = __fmaf_rn(l0, a0, r0); l1 = __fmaf_rn(l1, a1, r1);
#pragma unroll
        for (int t = 0; t < NO; t++) { o[t][0] *= a0; o[t][1] *= a0; o[t][2] *= a1; o[t][3] *= a1; }

#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            /* P's accumulator layout is the A operand's: keys kk*16 .. +15 are score tiles 2kk, 2kk+1 */
            dit_u32 pf[4];
            pf[0] = dit_pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
            pf[1] = dit_pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
            pf[2] = dit_pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            pf[3] = dit_pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < HD / 16; dp++) {
                /* V is [key][dim]; the B operand wants key pairs per dim: transposed loads of
                   (keys 0-7, chunk 2dp) (8-15, 2dp) (0-7, 2dp+1) (8-15, 2dp+1) */
                dit_u32 vf[4];
                dit_ldmatrix_x4_trans(vf, sV + dit_fa_swz<HD>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
                dit_mma_bf16(o[2 * dp], pf, vf[0], vf[1]);
                dit_mma_bf16(o[2 * dp + 1], pf, vf[2], vf[3]);
            }
        }
        if (j + 1 < ntiles) dit_cp_async_wait_all();
    }

    l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, 1)); l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, 2));
    l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, 1)); l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, 2));
    const float i0 = dit_rcp(l0), i1 = dit_rcp(l1);
    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
    dit_u16 *ob = out + (dit_u64)b * T * ld_out + (dit_u64)hh * HD + q4 * 2;
    if (row0 < T)
#pragma unroll
        for (int t = 0; t < NO; t++) *(dit_u32 *)(ob + (dit_u64)row0 * ld_out + t * 8) = dit_pack_bf16x2(o[t][0] * i0, o[t][1] * i0);
    if (row1 < T)
#pragma unroll
        for (int t = 0; t < NO; t++) *(dit_u32 *)(ob + (dit_u64)row1 * ld_out + t * 8) = dit_pack_bf16x2(o[t][2] * i1, o[t][3] * i1);
#else
    __trap();
#endif
}
/* head_dim 64 (32 KiB of shared memory) and 128 (64 KiB). One block an SM either way: O, S and
   Q's fragments (80 registers at 64, 128 at 128) with the copies' and ldmatrix addresses come to
   140-150 registers at 64 and 200-240 at 128 (ptxas, sm_80 .. sm_120), and a cap of 128 for two
   blocks of 64 spills on some of those archs (tests/cpu/test_dit_kernels.c checks for spills). */
extern "C" __global__ void __launch_bounds__(256, 1) dit_flash_attention_hd64(const dit_u16 *qkv, int ld_qkv, int T, int D, float scale,
                                                                              dit_u16 *out, int ld_out) {
    dit_flash_attention_body<64>(qkv, ld_qkv, T, D, scale, out, ld_out);
}
extern "C" __global__ void __launch_bounds__(256, 1) dit_flash_attention_hd128(const dit_u16 *qkv, int ld_qkv, int T, int D, float scale,
                                                                               dit_u16 *out, int ld_out) {
    dit_flash_attention_body<128>(qkv, ld_qkv, T, D, scale, out, ld_out);
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

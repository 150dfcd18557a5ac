/* test_gpu_gemm.c - lwo_linear on the GPU against the CPU references, every path and output dtype.
   y is poisoned (0xFF bytes, NaN in every float dtype) first and must be fully written. int8: equal
   to lwo_ref_linear of the same quantized operands up to one output ulp. bf16/f16/fp8: relative L2
   < 1e-2 against the double reference of the same (dequantized) operands. The error against the
   unquantized linear is reported. Large problems check a sample of rows. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

static lwo_context *ctx;

static uint32_t ordered(const void *p, lwo_dtype t, uint64_t i) {
    if (t == LWO_DTYPE_F32) { uint32_t u; memcpy(&u, (const char *)p + i * 4, 4); return (u & 0x80000000u) ? 0x80000000u - (u & 0x7fffffffu) : 0x80000000u + u; }
    { uint16_t h; memcpy(&h, (const char *)p + i * 2, 2); return (h & 0x8000u) ? 0x8000u - (h & 0x7fffu) : 0x8000u + h; }
}

/* The weight formats, in the order the suites run them. */
static const lwo_format formats[] = { LWO_FORMAT_BF16, LWO_FORMAT_F16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_FP8_E5M2, LWO_FORMAT_INT8,
                                      LWO_FORMAT_FP8_E4M3_W8A8 };



/* with_perm, hadamard (the W8A8 prep: a random permutation, the Hadamard block size or 0) and
   streamed (the weight placed STREAMED: lwo_linear reads it from the staging ring) extend the plain
   case. For W8A8 formats the stored weight (codes and scales) must also equal the CPU reference of
   its prep and quantization bit for bit. */
static void run_case_ex(lwo_format fmt, lwo_dtype yt, int with_bias, int with_smooth, int with_perm, int hadamard, int streamed,
                        uint64_t M, uint64_t N, uint64_t K) {
    /* fp8 upcast weights take x in either 16-bit dtype (on sm_90a, kernels of their own for each):
       f16 where M + N + K is odd */
    int upcast = fmt == LWO_FORMAT_FP8_E4M3 || fmt == LWO_FORMAT_FP8_E5M2;
    lwo_dtype xt = fmt == LWO_FORMAT_F16 || (upcast && ((M ^ N ^ K) & 1)) ? LWO_DTYPE_F16 : LWO_DTYPE_BF16;
    lwo_dtype qt = fmt == LWO_FORMAT_INT8 ? LWO_DTYPE_I8 : LWO_DTYPE_F8_E4M3;   /* W8A8: the codes */
    int w8a8 = fmt == LWO_FORMAT_INT8 || fmt == LWO_FORMAT_FP8_E4M3_W8A8, acquired = 0;
    int32_t *perm = (int32_t *)malloc(K * 4);
    float *prep = NULL, *rsc = NULL;
    unsigned char *rwq = NULL;
    size_t ys = lwo_dtype_size(yt);
    float *wf = (float *)malloc(N * K * 4), *bias = (float *)malloc(N * 4), *sm = (float *)malloc(K * 4);
    uint16_t *x = (uint16_t *)malloc(M * K * 2);
    unsigned char *y = (unsigned char *)malloc(M * N * ys), *yr = (unsigned char *)malloc(N * 4);
    lwo_weight_desc d;
    lwo_weight *w = NULL;
    lwo_weight_info info;
    lwo_tensor *tx = NULL, *ty = NULL;
    uint64_t sx[2], sy[2], i, m, n, k, kp, rows_checked = 0, nan = 0, maxulp = 0;
    double num = 0, den = 0, unum = 0, uden = 0;
    unsigned char *wq = NULL;
    float *wsc = NULL, *wb = NULL, *asc = NULL;
    unsigned char *aq = NULL, *wup = NULL;
    lwo_result r;
    for (i = 0; i < N * K; i++) wf[i] = (float)(check_rand_normal() * 0.05);
    for (i = 0; i < N; i++) bias[i] = (float)check_rand_normal();
    for (i = 0; i < K; i++) sm[i] = (float)(0.25 + check_rand_uniform() * 2);
    for (i = 0; i < M * K; i++) { float v = (float)check_rand_normal(); x[i] = xt == LWO_DTYPE_BF16 ? lwo_ref_f32_to_bf16(v) : lwo_ref_f32_to_f16(v); }
    for (i = 0; i < K; i++) perm[i] = (int32_t)i;
    for (i = K; i > 1; i--) { uint64_t j = check_rand_u64() % i; int32_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t; }
    memset(&d, 0, sizeof d);
    d.rows = N; d.cols = K; d.data = wf; d.format = fmt;
    if (with_bias) d.bias = bias;
    if (with_smooth) d.smooth = sm;
    if (with_perm) d.perm = perm;
    d.hadamard = hadamard;
    if (streamed) d.placement = LWO_PLACE_STREAMED;
    r = lwo_weight_create(ctx, &d, &w);
    CHECK(r == LWO_SUCCESS, "lwo_weight_create %s: %s", lwo_format_name(fmt), lwo_last_error(ctx));
    if (r) goto out;
    lwo_weight_get_info(ctx, w, &info);
    kp = info.kpad;
    {
        uint64_t a = hadamard > 64 ? (uint64_t)hadamard : 64;
        CHECK(kp == (K + a - 1) / a * a && info.hadamard == hadamard && (info.perm != NULL) == (with_perm != 0),
              "info: kpad %llu, hadamard %d, perm %p", (unsigned long long)kp, info.hadamard, (const void *)info.perm);
    }
    if (streamed) {
        CHECK(info.host_home != LWO_HOME_NONE, "a STREAMED weight has a host home");
        lwo_streaming_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.max_rows = M;
        sd.free_bytes = M * K * 2 + M * N * 4 + (1u << 20);   /* x and y are made after the plan */
        r = lwo_streaming_plan(ctx, &sd);
        CHECK(r == LWO_SUCCESS, "lwo_streaming_plan: %s", lwo_last_error(ctx));
        if (r) goto out;
    }
    sx[0] = M; sx[1] = K; sy[0] = M; sy[1] = N;
    if (lwo_tensor_create(ctx, xt, 2, sx, &tx) || lwo_tensor_create(ctx, yt, 2, sy, &ty)) { CHECK(0, "tensors: %s", lwo_last_error(ctx)); goto out; }
    lwo_tensor_upload(ctx, tx, x, M * K * 2);
    lwo_tensor_fill_bytes(ctx, NULL, ty, 0xff);
    r = check_linear(ctx, tx, w, ty);
    CHECK(r == LWO_SUCCESS, "lwo_linear: %s", lwo_last_error(ctx));
    if (r) goto out;
    r = lwo_tensor_download(ctx, ty, y, M * N * ys);
    CHECK(r == LWO_SUCCESS, "download: %s", lwo_last_error(ctx));
    for (i = 0; i < M * N; i++) if (lwo_ref_load(y, yt, i) != lwo_ref_load(y, yt, i)) nan++;
    CHECK(nan == 0, "%s M=%llu N=%llu K=%llu: %llu outputs not written (or NaN)", lwo_format_name(fmt), (unsigned long long)M, (unsigned long long)N, (unsigned long long)K, (unsigned long long)nan);
    /* the operands as the GEMM saw them (a streamed weight: where acquire puts it) */
    if (streamed) {
        r = lwo_weight_acquire(ctx, NULL, w, &info);
        CHECK(r == LWO_SUCCESS, "lwo_weight_acquire: %s", lwo_last_error(ctx));
        if (r) goto out;
        acquired = 1;
    }
    wq = (unsigned char *)malloc(info.data->bytes);
    lwo_tensor_download(ctx, info.data, wq, info.data->bytes);
    if (info.scales) { wsc = (float *)malloc(info.scales->bytes); lwo_tensor_download(ctx, info.scales, wsc, info.scales->bytes); }
    if (info.bias) { wb = (float *)malloc(N * 4); lwo_tensor_download(ctx, info.bias, wb, N * 4); }
    if (upcast) {
        wup = (unsigned char *)malloc(N * kp * 2);
        lwo_ref_convert(wq, info.data->dtype, wup, xt, N * kp, wsc[0]);
    }
    if (acquired) { lwo_weight_release(ctx, NULL, w); acquired = 0; }
    if (w8a8) {
        uint64_t bad = 0;
        aq = (unsigned char *)malloc(M * kp);
        asc = (float *)malloc(M * 4);
        if (with_perm || hadamard) { /* the prep on the CPU, then the plain quantizer over kpad columns */
            prep = (float *)malloc((M > N ? M : N) * kp * 4);
            check_ref_prep_rows(x, xt, M, K, with_perm ? perm : NULL, with_smooth ? sm : NULL, 0, hadamard, prep, kp);
            check_ref_quantize_rows(prep, LWO_DTYPE_F32, M, kp, NULL, aq, qt, kp, asc);
        } else check_ref_quantize_rows(x, xt, M, K, with_smooth ? sm : NULL, aq, qt, kp, asc);
        /* the weight lwo_weight_create stored: W permuted, times smooth, rotated, quantized per row */
        if (!prep) prep = (float *)malloc(N * kp * 4);
        rwq = (unsigned char *)malloc(N * kp);
        rsc = (float *)malloc(N * 4);
        check_ref_prep_rows(wf, LWO_DTYPE_F32, N, K, with_perm ? perm : NULL, with_smooth ? sm : NULL, 1, hadamard, prep, kp);
        check_ref_quantize_rows(prep, LWO_DTYPE_F32, N, kp, NULL, rwq, qt, kp, rsc);
        for (i = 0; i < N * kp && !bad; i++) if (rwq[i] != wq[i]) bad = i + 1;
        CHECK(bad == 0, "%s perm=%d b=%d: stored weight code %llu is %d, the CPU reference %d", lwo_format_name(fmt), with_perm, hadamard,
              (unsigned long long)(bad - 1), bad ? wq[bad - 1] : 0, bad ? rwq[bad - 1] : 0);
        CHECK(memcmp(rsc, wsc, N * 4) == 0, "%s perm=%d b=%d: stored weight scales differ from the CPU reference", lwo_format_name(fmt), with_perm, hadamard);
    }
    for (m = 0; m < M; m++) {
        int sample = (double)M * N * K > 3e7;
        if (sample && !(m == 0 || m == M - 1 || check_rand_u64() % (M / 8 + 1) == 0)) continue;
        rows_checked++;
        switch (fmt) {
        case LWO_FORMAT_BF16: case LWO_FORMAT_F16:
            check_ref_linear(x + m * K, xt, K, wq, info.data->dtype, kp, 1, N, K, NULL, NULL, wb, yr, LWO_DTYPE_F32); break;
        case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2:
            check_ref_linear(x + m * K, xt, K, wup, xt, kp, 1, N, K, NULL, NULL, wb, yr, LWO_DTYPE_F32); break;
        case LWO_FORMAT_INT8:
            check_ref_linear(aq + m * kp, LWO_DTYPE_I8, kp, wq, LWO_DTYPE_I8, kp, 1, N, kp, asc + m, wsc, wb, yr, yt); break;
        default:
            check_ref_linear(aq + m * kp, LWO_DTYPE_F8_E4M3, kp, wq, LWO_DTYPE_F8_E4M3, kp, 1, N, kp, asc + m, wsc, wb, yr, LWO_DTYPE_F32); break;
        }
        for (n = 0; n < N; n++) {
            double g = lwo_ref_load(y, yt, m * N + n), u = with_bias ? bias[n] : 0.0;
            for (k = 0; k < K; k++) u += (double)lwo_ref_load(x, xt, m * K + k) * wf[n * K + k];
            unum += (g - u) * (g - u); uden += u * u;
            if (fmt == LWO_FORMAT_INT8) {
                uint32_t a = ordered(y, yt, m * N + n), b = ordered(yr, yt, n);
                uint64_t du = a > b ? a - b : b - a;
                if (du > maxulp) maxulp = du;
                { double rv = lwo_ref_load(yr, yt, n); num += (g - rv) * (g - rv); den += rv * rv; }
            } else {
                double rv = ((float *)yr)[n];
                num += (g - rv) * (g - rv); den += rv * rv;
            }
        }
    }
    {
        double e = sqrt(num / (den > 0 ? den : 1)), ue = sqrt(unum / (uden > 0 ? uden : 1));
        printf("  %-13s x=%-4s y=%-4s bias=%d smooth=%d perm=%d had=%-3d str=%d M=%-5llu N=%-5llu K=%-5llu rows=%-5llu relL2(ref)=%.2e maxulp=%llu relL2(unquantized)=%.2e\n",
               lwo_format_name(fmt), lwo_dtype_name(xt), lwo_dtype_name(yt), with_bias, with_smooth, with_perm, hadamard, streamed, (unsigned long long)M, (unsigned long long)N,
               (unsigned long long)K, (unsigned long long)rows_checked, e, (unsigned long long)maxulp, ue);
        if (fmt == LWO_FORMAT_INT8) CHECK(maxulp <= 1, "int8 path differs from the reference by %llu ulp", (unsigned long long)maxulp);
        else CHECK(e < 1e-2, "%s: relative L2 %.3e against the reference", lwo_format_name(fmt), e);
        CHECK(ue < (fmt == LWO_FORMAT_BF16 || fmt == LWO_FORMAT_F16 ? 2e-2 : fmt == LWO_FORMAT_INT8 ? 5e-2 : 0.2), "%s: relative L2 %.3e against the unquantized linear", lwo_format_name(fmt), ue);
    }
out:
    if (acquired) lwo_weight_release(ctx, NULL, w);
    if (tx) lwo_tensor_destroy(ctx, tx);
    if (ty) lwo_tensor_destroy(ctx, ty);
    if (w) lwo_weight_destroy(ctx, w);
    free(wf); free(bias); free(sm); free(x); free(y); free(yr); free(wq); free(wsc); free(wb); free(asc); free(aq); free(wup);
    free(perm); free(prep); free(rsc); free(rwq);
}

static void run_case(lwo_format fmt, lwo_dtype yt, int with_bias, int with_smooth, uint64_t M, uint64_t N, uint64_t K) {
    run_case_ex(fmt, yt, with_bias, with_smooth, 0, 0, 0, M, N, K);
}

/* The fixed shapes (tile edges, tiny M, the benchmark's) and a few drawn per run, every format. */
static void run_suite(const lwo_device_info *info) {
    static const uint64_t shapes[][3] = { { 1, 200, 328 }, { 3, 200, 328 }, { 64, 200, 328 }, { 1000, 200, 328 }, { 3, 77, 13 }, { 64, 3072, 3072 } };
    static const lwo_dtype outs[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    int fi, s, o, b, quick = getenv("LWO_TEST_QUICK") != NULL;
    for (fi = 0; fi < (int)(sizeof formats / sizeof *formats); fi++) {
        lwo_format f = formats[fi];
        if (f == LWO_FORMAT_FP8_E4M3_W8A8 && info->cc_major * 10 + info->cc_minor < 89) continue;
        for (s = 0; s < (int)(sizeof shapes / sizeof *shapes); s++)
            for (o = 0; o < 3; o++)
                for (b = 0; b < 2; b++) {
                    if (s == 5 && (o != 0 || b != 1)) continue;
                    run_case(f, outs[o], b, 0, shapes[s][0], shapes[s][1], shapes[s][2]);
                }
        if (f == LWO_FORMAT_INT8 || f == LWO_FORMAT_FP8_E4M3_W8A8) {
            static const int blocks[] = { 2, 4, 8, 16, 32, 64, 128, 256 };
            int i;
            /* 18 x 59 units of 2x1 ping-pong tiles, 16.1 rounds of 64-66 clusters, which the default
               splits (test_gemm's test_wg_split checks the choice). First: after the streamed cases'
               lwo_streaming_plan the context is planned, and a weight made after a plan gets no split
               area (the arena's room is the plan's), so it would run unsplit */
            if (f == LWO_FORMAT_INT8) run_case(f, LWO_DTYPE_BF16, 1, 0, 4608, 7488, 1024);
            run_case(f, LWO_DTYPE_BF16, 1, 1, 64, 200, 328);
            /* the prep: every block size over K = 328 (a multiple of 8 but not of 16 or more: the last
               block mixes columns with padding), with and without perm and smooth */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 0, 1, 0, 0, 64, 200, 328);
            for (i = 0; i < 8; i++)
                run_case_ex(f, outs[i % 3], i & 1, (i >> 1) & 1, i % 3 != 1, blocks[i], 0, 37, 200, 328);
            run_case_ex(f, LWO_DTYPE_F32, 1, 1, 1, 256, 0, 5, 100, 3000);   /* 3000 -> kpad 3072 */
            run_case_ex(f, LWO_DTYPE_BF16, 0, 1, 1, 64, 0, 3, 77, 13);      /* tiny, odd K */
            run_case_ex(f, LWO_DTYPE_F16, 1, 0, 0, 128, 0, 129, 257, 4097); /* odd K, unaligned rows */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 1, 1, 128, 0, 64, 3072, 12288); /* the benchmark's K, held on chip */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 1, 1, 64, 0, 3, 64, 20000);  /* staged, prep done twice */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 1, 1, 32, 0, 3, 64, 60001);  /* past shared memory: two passes */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 1, 1, 256, 1, 64, 200, 328); /* a streamed weight */
            run_case_ex(f, LWO_DTYPE_BF16, 1, 0, 0, 16, 1, 3, 300, 1000);
        }
        for (s = 0; s < (quick ? 1 : 3); s++) /* drawn: multiples and non-multiples of the 64/128 tiles */
            run_case(f, outs[check_rand_u64() % 3], (int)(check_rand_u64() & 1), 0,
                     1 + check_rand_u64() % 2500, 1 + check_rand_u64() % 1500, 1 + check_rand_u64() % 1500);
        run_case(f, LWO_DTYPE_BF16, 1, 0, 129, 257, 200);
        if (!quick) run_case(f, LWO_DTYPE_BF16, 1, 0, 4608, 3072, 3072);
        /* 18 x 61 units of 2x1 tiles: 16.6 rounds of 66 clusters, which the default splits where the
           16-bit GEMM may (fp8 upcast weights through the copy); on sm_90a fp8 upcast weights take
           the register-A kernels here and the 8-bit formats the 192 x 192 tile, neither of which splits */
        run_case(f, LWO_DTYPE_BF16, 1, 0, 4608, 7808, 1024);
    }
}

/* One Hopper tile forced (lwo_desc.gemm_kernels 2..8): its edges, a persistent grid with more tiles
   than multiprocessors and a last group of row tiles shorter than the others (2500 rows), an odd
   number of row and of column tiles (300 x 520: a cluster's unit with tiles wholly past M or N),
   and a drawn shape, every format. */
static void run_tile_suite(void) {
    static const uint64_t shapes[][3] = { { 1, 200, 328 }, { 129, 257, 200 }, { 1000, 200, 328 }, { 2500, 2100, 328 },
                                          { 300, 520, 1000 } };
    static const lwo_dtype outs[] = { LWO_DTYPE_BF16, LWO_DTYPE_F16, LWO_DTYPE_F32 };
    int fi, s;
    for (fi = 0; fi < (int)(sizeof formats / sizeof *formats); fi++) {
        lwo_format f = formats[fi];
        for (s = 0; s < (int)(sizeof shapes / sizeof *shapes); s++)
            run_case(f, outs[(fi + s) % 3], (fi + s) & 1, 0, shapes[s][0], shapes[s][1], shapes[s][2]);
        run_case(f, outs[check_rand_u64() % 3], (int)(check_rand_u64() & 1), 0,
                 1 + check_rand_u64() % 3000, 1 + check_rand_u64() % 3000, 1 + check_rand_u64() % 1000);
    }
}

/* Each kernel family lwo has for the device: on sm_90a the wgmma kernels (the default, its tile
   chosen per shape), the mma.sync ones (lwo_desc.gemm_kernels = 1), then each wgmma tile forced
   (passes 2 to 7, and e), then the tiles that split their last rounds along K forced to split on a
   grid of a few CTAs (lwo_desc.gemm_split), so that small shapes have units cut in two and in
   three, and CTAs that add one helper's sums or two (passes 8 to d), then the 192 x 192 tile (pass
   e, which never splits: its slot would not fit the split area's), then the tile per shape with fp8
   upcast weights read as stored (pass f; the forced tiles read them so too, the default through a
   16-bit copy), and as wgmma's register operand (pass g, where y is 16-bit, the tile per shape;
   passes h, i, j force its three tiles); elsewhere only the default, which is mma.sync. */
int main(void) {
    lwo_desc desc;
    lwo_context_info ci;
    const lwo_device_info *info = &ci.device;
    int pass;
    static const struct { int kernels, split; const char *name; } passes[] = {
        { 0, 0, "wgmma (tile per shape)" }, { 1, 0, "mma.sync" }, { 2, 0, "wgmma 64x128" }, { 3, 0, "wgmma 128x128" },
        { 4, 0, "wgmma 128x256" }, { 5, 0, "wgmma 128x128 ping-pong" }, { 6, 0, "wgmma 128x128 ping-pong, 2x1 clusters" },
        { 7, 0, "wgmma 128x256, 2x1 clusters" }, { 5, 7, "wgmma 128x128 ping-pong, split on 7 CTAs" },
        { 6, 10, "wgmma 128x128 ping-pong, 2x1 clusters, split on 10 CTAs" }, { 3, 5, "wgmma 128x128, split on 5 CTAs" },
        { 2, 3, "wgmma 64x128, split on 3 CTAs" }, { 4, 6, "wgmma 128x256, split on 6 CTAs" },
        { 7, 8, "wgmma 128x256, 2x1 clusters, split on 8 CTAs" }, { 8, 0, "wgmma 192x192, 2x1 clusters" },
        { 9, 0, "wgmma (tile per shape), fp8 upcast weights read as stored" },
        { 10, 0, "wgmma (tile per shape), fp8 upcast weights as the register operand" },
        { 11, 0, "wgmma, fp8 upcast weights as the register operand, 128x256" },
        { 12, 0, "wgmma, fp8 upcast weights as the register operand, 192x192" },
        { 13, 0, "wgmma, fp8 upcast weights as the register operand, 128x128" } };
    static const char digits[] = "0123456789abcdefghij";
    check_seed("test_gpu_gemm");
    /* LWO_TEST_WGMMA_ONLY: the wgmma passes only (the sanitizer runs look at the pipelined kernels);
       LWO_TEST_GEMM_PASSES: the passes to run, as digits (e.g. "45", "89ab") */
    const char *only = getenv("LWO_TEST_GEMM_PASSES");
    for (pass = 0; pass < (int)(sizeof passes / sizeof *passes); pass++) {
        lwo_stats st;
        if (pass == 1 && getenv("LWO_TEST_WGMMA_ONLY")) continue;
        if (only && !strchr(only, digits[pass])) continue;
        memset(&desc, 0, sizeof desc);
        desc.vram_budget = (uint64_t)8 << 30;
        desc.gemm_kernels = passes[pass].kernels;
        desc.gemm_split = passes[pass].split;
        if (lwo_create(&desc, &ctx) != LWO_SUCCESS) { printf("lwo_create: %s\n", lwo_last_error(ctx)); CHECK(0, "no context"); lwo_destroy(ctx); return CHECK_SUMMARY(); }
        memset(&ci, 0, sizeof ci);
        lwo_context_get_info(ctx, &ci);
        if (pass >= 1 && strcmp(info->arch, "sm_90a") != 0) { lwo_destroy(ctx); break; }
        printf("%s (%s), %s GEMMs\n", info->name, info->arch, strcmp(info->arch, "sm_90a") == 0 ? passes[pass].name : "mma.sync");
        if (pass < 2) run_suite(info); else run_tile_suite();
        memset(&st, 0, sizeof st);
        CHECK(lwo_context_get_stats(ctx, &st) == LWO_SUCCESS, "lwo_context_get_stats: %s", lwo_last_error(ctx));
        /* the default splits int8's 4608 x 1024 x 7488 (16.1 rounds, before any plan); a forced
           split, every shape past its grid */
        if (passes[pass].split || (pass == 0 && info->sm_count == 132))
            CHECK(st.gemm_splits > 0, "%s: no GEMM split its last rounds", passes[pass].name);
        printf("  %llu GEMM launches split their last rounds\n", (unsigned long long)st.gemm_splits);
        /* on sm_90a gemm_kernels 9 and up and the forced tiles read fp8 upcast weights as stored, and
           the default does where the register-A tiles fill the grid (4608 x 7808 x 1024 and, not
           quick, 4608 x 3072 x 3072 with bf16 y); mma.sync takes the 16-bit copy */
        {
            const int stored = strcmp(info->arch, "sm_90a") == 0 && passes[pass].kernels != 1;
            CHECK(stored ? st.gemm_fp8_weight > 0 : st.gemm_fp8_weight == 0, "%s: %llu GEMMs read fp8 weights as stored", passes[pass].name,
                  (unsigned long long)st.gemm_fp8_weight);
            printf("  %llu GEMM launches read fp8 weights as stored\n", (unsigned long long)st.gemm_fp8_weight);
        }
        lwo_destroy(ctx);
    }
    return CHECK_SUMMARY();
}

/* test_lora.c - LoRA files and the side path's reference, on the CPU (no GPU).
   lwo_safetensors_find_lora against files written here: both layouts (kohya's lora_down/lora_up
   with alpha, and lora_A/lora_B), the prefix and underscore rule, and every malformed case a clear
   error: half a pair, both layouts at once, a factor of the wrong dtype or rank, ranks that differ,
   a malformed alpha, a name that matches nothing. Then check_ref_lora (the reference the GPU test
   compares lwo_linear with) against a plain double-precision evaluation of the documented math. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#define LWO_IMPLEMENTATION_DONE
#include "../check.h"

enum { N = 24, K = 40, R = 3 };

static char tmpdir[1024];
static uint16_t down_bf[R * K], up_bf[N * (R + 1)];   /* room for the rank-mismatch case */
static float down_f32[R * K], alpha_f32 = 6.0f, alpha_bad[2] = { 1.0f, 2.0f }, alpha_neg = -1.0f;
static int8_t down_i8[R * K];

/* Writes tensors into a fresh file and opens it; NULL on failure (counted). */
static lwo_safetensors *make(const char *name, const lwo_safetensors_write_tensor *t, size_t n) {
    char path[1200], err[256];
    lwo_safetensors *f = NULL;
    snprintf(path, sizeof path, "%s/%s.safetensors", tmpdir, name);
    if (check_st_write(path, t, n, NULL, NULL, 0, err, sizeof err) != LWO_SUCCESS) { CHECK(0, "write %s: %s", name, err); return NULL; }
    if (check_st_open(path, &f) != LWO_SUCCESS) { CHECK(0, "open %s: %s", name, lwo_safetensors_last_error(f)); lwo_safetensors_destroy(f); return NULL; }
    return f;
}

/* find_lora of `weight` under (prefix, underscores) must give `want`, and on a failure a message
   holding `says`. */
static void expect(const char *file, const lwo_safetensors_write_tensor *t, size_t n, const char *weight, const char *prefix,
                   int underscores, lwo_result want, const char *says) {
    lwo_safetensors *f = make(file, t, n);
    lwo_safetensors_lora fl;
    lwo_lora_match m;
    lwo_result r;
    if (!f) return;
    memset(&m, 0, sizeof m);
    m.prefix = prefix; m.underscores = underscores;
    r = lwo_safetensors_find_lora(f, weight, &m, &fl);
    CHECK(r == want, "%s: %s, want %s (%s)", file, lwo_result_string(r), lwo_result_string(want), lwo_safetensors_last_error(f));
    if (r && says) CHECK(strstr(lwo_safetensors_last_error(f), says) != NULL, "%s: message \"%s\" lacks \"%s\"", file, lwo_safetensors_last_error(f), says);
    lwo_safetensors_destroy(f);
}

static void test_files(void) {
    static const uint64_t sd[2] = { R, K }, su[2] = { N, R }, su_bad[2] = { N, R + 1 }, sd3[3] = { R, K, 1 }, s1[1] = { 1 }, s2[1] = { 2 };
    lwo_safetensors_write_tensor t[4];
    lwo_safetensors *f;
    lwo_safetensors_lora fl;
    lwo_lora_match m;
    uint64_t i;
    for (i = 0; i < R * K; i++) { down_f32[i] = (float)check_rand_normal(); down_bf[i] = lwo_ref_f32_to_bf16(down_f32[i]); down_i8[i] = (int8_t)(i % 100); }
    for (i = 0; i < N * R; i++) up_bf[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());

    /* kohya, prefix and underscores: blocks.1.attn.qkv.weight -> lora_unet_blocks_1_attn_qkv */
    t[0] = check_st_tensor("lora_unet_blocks_1_attn_qkv.lora_down.weight", LWO_DTYPE_BF16, 2, sd, down_bf);
    t[1] = check_st_tensor("lora_unet_blocks_1_attn_qkv.lora_up.weight", LWO_DTYPE_BF16, 2, su, up_bf);
    t[2] = check_st_tensor("lora_unet_blocks_1_attn_qkv.alpha", LWO_DTYPE_F32, 0, s1, &alpha_f32);
    if ((f = make("kohya", t, 3)) != NULL) {
        memset(&m, 0, sizeof m);
        m.prefix = "lora_unet_"; m.underscores = 1;
        CHECK(lwo_safetensors_find_lora(f, "blocks.1.attn.qkv.weight", &m, &fl) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
        CHECK(fl.kohya == 1 && fl.rank == R && fl.rows == N && fl.cols == K && fl.alpha && fl.alpha_value == 6.0f,
              "kohya: kohya %d rank %llu rows %llu cols %llu alpha %g", fl.kohya, (unsigned long long)fl.rank, (unsigned long long)fl.rows,
              (unsigned long long)fl.cols, (double)fl.alpha_value);
        CHECK(fl.down && memcmp(fl.down->data, down_bf, sizeof down_bf) == 0, "kohya: the down factor's bytes");
        CHECK(lwo_safetensors_find_lora(f, "blocks.1.attn.qkv", &m, &fl) == LWO_SUCCESS, "a name without .weight: %s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_find_lora(f, "blocks.2.attn.qkv.weight", &m, &fl) == LWO_ERROR_NOT_FOUND, "another weight has none");
        CHECK(strstr(lwo_safetensors_last_error(f), "lora_unet_blocks_2_attn_qkv") != NULL, "the key tried is named: %s", lwo_safetensors_last_error(f));
        m.underscores = 0;
        CHECK(lwo_safetensors_find_lora(f, "blocks.1.attn.qkv.weight", &m, &fl) == LWO_ERROR_NOT_FOUND, "dots kept: no match");
        CHECK(lwo_safetensors_find_lora(f, "blocks.1.attn.qkv.weight", NULL, &fl) == LWO_ERROR_NOT_FOUND, "no prefix: no match");
        CHECK(lwo_safetensors_find_lora(f, NULL, &m, &fl) == LWO_ERROR_INVALID_ARGUMENT, "NULL name");
        lwo_safetensors_destroy(f);
    }
    /* lora_A / lora_B, f32, no alpha */
    t[0] = check_st_tensor("transformer.blocks.0.mlp.lora_A.weight", LWO_DTYPE_F32, 2, sd, down_f32);
    t[1] = check_st_tensor("transformer.blocks.0.mlp.lora_B.weight", LWO_DTYPE_BF16, 2, su, up_bf);
    expect("ab_mixed", t, 2, "blocks.0.mlp.weight", "transformer.", 0, LWO_ERROR_BAD_FILE, "differ in dtype");
    t[1] = check_st_tensor("transformer.blocks.0.mlp.lora_B.weight", LWO_DTYPE_F32, 2, su, down_f32);   /* N*R <= R*K floats */
    if ((f = make("ab", t, 2)) != NULL) {
        memset(&m, 0, sizeof m);
        m.prefix = "transformer.";
        CHECK(lwo_safetensors_find_lora(f, "blocks.0.mlp.weight", &m, &fl) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
        CHECK(fl.kohya == 0 && !fl.alpha && fl.alpha_value == 0.0f && fl.rank == R, "lora_A/B: kohya %d alpha %p", fl.kohya, (const void *)fl.alpha);
        lwo_safetensors_destroy(f);
    }
    /* malformed */
    t[0] = check_st_tensor("a.lora_down.weight", LWO_DTYPE_BF16, 2, sd, down_bf);
    t[1] = check_st_tensor("a.lora_up.weight", LWO_DTYPE_BF16, 2, su, up_bf);
    t[2] = check_st_tensor("a.alpha", LWO_DTYPE_F32, 0, s1, &alpha_f32);
    expect("half", t, 1, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "has no \"a.lora_up.weight\"");
    t[3] = check_st_tensor("a.lora_B.weight", LWO_DTYPE_BF16, 2, su, up_bf);
    { lwo_safetensors_write_tensor both[4] = { t[0], t[1], t[2], t[3] }; expect("both", both, 4, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "both layouts"); }
    t[1] = check_st_tensor("a.lora_up.weight", LWO_DTYPE_BF16, 2, su_bad, up_bf);
    expect("rank", t, 2, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "rank");
    t[1] = check_st_tensor("a.lora_up.weight", LWO_DTYPE_BF16, 2, su, up_bf);
    t[0] = check_st_tensor("a.lora_down.weight", LWO_DTYPE_I8, 2, sd, down_i8);
    expect("dtype", t, 2, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "i8");
    t[0] = check_st_tensor("a.lora_down.weight", LWO_DTYPE_BF16, 3, sd3, down_bf);
    expect("3d", t, 2, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "2-D");
    t[0] = check_st_tensor("a.lora_down.weight", LWO_DTYPE_BF16, 2, sd, down_bf);
    t[2] = check_st_tensor("a.alpha", LWO_DTYPE_F32, 1, s2, alpha_bad);
    expect("alpha2", t, 3, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "a.alpha");
    t[2] = check_st_tensor("a.alpha", LWO_DTYPE_F32, 0, s1, &alpha_neg);
    expect("alphaneg", t, 3, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "> 0");
    t[2] = check_st_tensor("a.alpha", LWO_DTYPE_I8, 0, s1, down_i8);
    expect("alphai8", t, 3, "a.weight", NULL, 0, LWO_ERROR_BAD_FILE, "a.alpha");
    t[2] = check_st_tensor("a.alpha", LWO_DTYPE_F32, 0, s1, &alpha_f32);
    expect("nomatch", t, 3, "b.weight", NULL, 0, LWO_ERROR_NOT_FOUND, "no LoRA for \"b.weight\"");
}

/* check_ref_lora against the documented math evaluated plainly: t in double then rounded to bf16
   (a double sum and check_ref_linear's agree except at a rounding tie, which random data never
   meets), d in double, y = bf16(y + d). */
static void test_reference(void) {
    enum { M = 5, N2 = 7, K2 = 9, R1 = 2, R2 = 3 };
    uint16_t x[M * K2], a1[R1 * K2], b1[N2 * R1], a2[R2 * K2], b2[N2 * R2], y[M * N2], y0[M * N2], yz[M * N2];
    const void *downs[2] = { a1, a2 }, *ups[2] = { b1, b2 };
    const uint64_t ranks[2] = { R1, R2 };
    const float scales[2] = { 0.75f, -1.5f }, zero[2] = { 0.0f, 0.0f };
    uint64_t i, m, n, r, k;
    int bad = 0;
    for (i = 0; i < M * K2; i++) x[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < R1 * K2; i++) a1[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < R2 * K2; i++) a2[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < N2 * R1; i++) b1[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < N2 * R2; i++) b2[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < M * N2; i++) y0[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    y0[3] = 0x8000;   /* -0: stays -0 at strength 0 */
    memcpy(y, y0, sizeof y); memcpy(yz, y0, sizeof yz);
    CHECK(check_ref_lora(x, LWO_DTYPE_BF16, M, K2, N2, 2, downs, ups, ranks, scales, y, LWO_DTYPE_BF16, NULL), "out of memory");
    CHECK(check_ref_lora(x, LWO_DTYPE_BF16, M, K2, N2, 2, downs, ups, ranks, zero, yz, LWO_DTYPE_BF16, NULL), "out of memory");
    CHECK(memcmp(yz, y0, sizeof y0) == 0, "strength 0 changes y");
    for (m = 0; m < M; m++)
        for (n = 0; n < N2; n++) {
            double d = 0;
            for (r = 0; r < R1 + R2; r++) {
                const uint16_t *A = r < R1 ? a1 + r * K2 : a2 + (r - R1) * K2;
                double acc = 0, bv = lwo_ref_bf16_to_f32(r < R1 ? b1[n * R1 + r] : b2[n * R2 + r - R1]);
                for (k = 0; k < K2; k++) acc += (double)lwo_ref_bf16_to_f32(x[m * K2 + k]) * lwo_ref_bf16_to_f32(A[k]);
                d += (double)lwo_ref_bf16_to_f32(lwo_ref_f32_to_bf16((float)acc * scales[r < R1 ? 0 : 1])) * bv;
            }
            if (lwo_ref_f32_to_bf16(lwo_ref_bf16_to_f32(y0[m * N2 + n]) + (float)d) != y[m * N2 + n]) bad++;
        }
    CHECK(bad == 0, "%d of %d outputs differ from the plain evaluation", bad, M * N2);
}

int main(void) {
    check_seed("test_lora");
    if (!check_tmpdir(tmpdir, sizeof tmpdir, "lwo-lora-test")) return 1;
    test_files();
    test_reference();
    check_rmtree(tmpdir);
    return CHECK_SUMMARY();
}

/* check.h - the tests' tiny harness. Each test program ends with CHECK_SUMMARY(), which prints
   "N passed, N failed"; tests/tools/run.sh adds the programs' lines into the final one. */
#ifndef LWO_CHECK_H
#define LWO_CHECK_H
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
static int check_passed, check_failed;
#define CHECK(cond, ...) do { if (cond) check_passed++; else { check_failed++; \
    printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); printf(__VA_ARGS__); printf("\n"); } } while (0)
#define CHECK_EQ_INT(a, b) CHECK((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_SUMMARY() (printf("%d passed, %d failed\n", check_passed, check_failed), check_failed ? 1 : 0)
/* Deterministic per-run random numbers: the seed comes from LWO_TEST_SEED or the clock, and is printed. */
static uint64_t check_rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t check_rand_u64(void) {
    uint64_t z = (check_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double check_rand_uniform(void) { return (double)(check_rand_u64() >> 11) * (1.0 / 9007199254740992.0); }
static inline double check_rand_normal(void) {
    double u = check_rand_uniform(), v = check_rand_uniform();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
#include <time.h>
static inline void check_seed(const char *prog) {
    const char *e = getenv("LWO_TEST_SEED");
    uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
    check_rng_state = s;
    printf("%s: seed %llu (set LWO_TEST_SEED to repeat)\n", prog, (unsigned long long)s);
}

/* The few OS calls the tests make themselves, for POSIX and Windows (lwo.h keeps its own in its
   platform section): environment variables and a temporary folder. */
#ifdef _WIN32
#include <windows.h>
#include <direct.h>
#include <io.h>
#ifndef F_OK
#define F_OK 0
#endif
#ifndef R_OK
#define R_OK 4
#endif
/* Both copies of the environment: the process's (what lwo reads, as UTF-16) and the C runtime's
   (what getenv reads). */
static inline void check_setenv(const char *name, const char *value) {
    wchar_t wn[256], wv[2048];
    char kv[2400];
    if (!MultiByteToWideChar(CP_UTF8, 0, name, -1, wn, 256) || !MultiByteToWideChar(CP_UTF8, 0, value, -1, wv, 2048)) return;
    snprintf(kv, sizeof kv, "%s=%s", name, value);
    _putenv(kv);                    /* first: it sets the process's copy too, from the ANSI text */
    SetEnvironmentVariableW(wn, wv);
}
static inline void check_unsetenv(const char *name) {
    wchar_t wn[256];
    char kv[300];
    if (!MultiByteToWideChar(CP_UTF8, 0, name, -1, wn, 256)) return;
    snprintf(kv, sizeof kv, "%s=", name);
    _putenv(kv);
    SetEnvironmentVariableW(wn, NULL);
}
static inline int check_mkdir(const char *path) { return _mkdir(path); }
static inline unsigned long check_pid(void) { return (unsigned long)GetCurrentProcessId(); }
#else
#include <sys/stat.h>
#include <unistd.h>
static inline void check_setenv(const char *name, const char *value) { setenv(name, value, 1); }
static inline void check_unsetenv(const char *name) { unsetenv(name); }
static inline int check_mkdir(const char *path) { return mkdir(path, 0700); }
static inline unsigned long check_pid(void) { return (unsigned long)getpid(); }
#endif
/* A fresh folder for this process's files: $TMPDIR (or %TEMP%), else /tmp, + "/<prog>-<pid>". */
static inline int check_tmpdir(char *buf, size_t cap, const char *prog) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = getenv("TEMP");
    if (!t || !*t) t = "/tmp";
    snprintf(buf, cap, "%s/%s-%lu", t, prog, check_pid());
    if (check_mkdir(buf) != 0) { printf("cannot create %s\n", buf); return 0; }
    return 1;
}

#ifdef LWO_IMPLEMENTATION_DONE
/* rm -rf through lwo's own platform calls (the tests include the implementation). */
static inline void check_rmtree(const char *path) {
    lwo__dir d;
    const char *name;
    char sub[4096];
    if (lwo__remove_file(path)) return;
    if (lwo__dir_open(&d, path)) {
        while ((name = lwo__dir_next(&d)) != NULL) {
            if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, name) < sizeof sub) check_rmtree(sub);
        }
        lwo__dir_close(&d);
    }
#ifdef _WIN32
    {
        wchar_t *w = lwo__widen(path);
        if (w) RemoveDirectoryW(w);
        LWO_FREE(w);
    }
#else
    rmdir(path);
#endif
}
#endif

#ifdef LWO_H
/* The calls the tests make most, through their descs, spelled positionally. */
static inline lwo_result check_linear(lwo_context *ctx, const lwo_tensor *x, const lwo_weight *w, lwo_tensor *y) {
    lwo_linear_desc d;   /* the compute stream, the weight's own bias */
    memset(&d, 0, sizeof d);
    d.x = x; d.w = w; d.y = y;
    return lwo_linear(ctx, &d);
}
static inline lwo_memory_stats check_memory_stats(lwo_context *ctx) {
    lwo_context_info ci;
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(ctx, &ci);
    return ci.memory;
}
/* lwo_ref_quantize per tensor: n elements of src into fp8 with the given scale. */
static inline lwo_result check_ref_quantize_fp8(const void *src, lwo_dtype st, uint8_t *dst, lwo_dtype fp8, uint64_t n, float scale) {
    lwo_ref_quantize_desc d;
    memset(&d, 0, sizeof d);
    d.src = src; d.src_dtype = st; d.dst = dst; d.dst_dtype = fp8; d.rows = 1; d.cols = n; d.scale = scale;
    return lwo_ref_quantize(&d);
}
/* lwo_ref_quantize per row: x [rows, k] into q [rows, kq] of qt (i8 or f8_e4m3), scales [rows]. */
static inline lwo_result check_ref_quantize_rows(const void *x, lwo_dtype xt, uint64_t rows, uint64_t k, const float *smooth, void *q,
                                                 lwo_dtype qt, uint64_t kq, float *scales) {
    lwo_ref_quantize_desc d;
    memset(&d, 0, sizeof d);
    d.per_row = 1; d.src = x; d.src_dtype = xt; d.rows = rows; d.cols = k; d.smooth = smooth;
    d.dst = q; d.dst_dtype = qt; d.dst_cols = kq; d.scales = scales;
    return lwo_ref_quantize(&d);
}
static inline lwo_result check_ref_quantize_int8_rows(const void *x, lwo_dtype xt, uint64_t rows, uint64_t k, const float *smooth,
                                                      int8_t *q, uint64_t kq, float *scales) {
    return check_ref_quantize_rows(x, xt, rows, k, smooth, q, LWO_DTYPE_I8, kq, scales);
}
static inline lwo_result check_ref_quantize_fp8_rows(const void *x, lwo_dtype xt, uint64_t rows, uint64_t k, const float *smooth,
                                                     uint8_t *q, uint64_t kq, float *scales) {
    return check_ref_quantize_rows(x, xt, rows, k, smooth, q, LWO_DTYPE_F8_E4M3, kq, scales);
}
/* lwo_ref_prep_rows: x [rows, k] prepped into out [rows, kq]. */
static inline lwo_result check_ref_prep_rows(const void *x, lwo_dtype xt, uint64_t rows, uint64_t k, const int32_t *perm,
                                             const float *smooth, int weight, int hadamard, float *out, uint64_t kq) {
    lwo_ref_prep_desc d;
    memset(&d, 0, sizeof d);
    d.x = x; d.x_dtype = xt; d.rows = rows; d.cols = k; d.perm = perm; d.smooth = smooth; d.weight = weight; d.hadamard = hadamard;
    d.out = out; d.out_cols = kq;
    return lwo_ref_prep_rows(&d);
}
/* lwo_ref_linear of x [M, K] (row stride ldx) and w [N, K] (row stride ldw) into y [M, N] of yt. */
static inline lwo_result check_ref_linear(const void *x, lwo_dtype xt, uint64_t ldx, const void *w, lwo_dtype wt, uint64_t ldw,
                                          uint64_t M, uint64_t N, uint64_t K, const float *sx, const float *sw, const float *bias,
                                          void *y, lwo_dtype yt) {
    lwo_ref_linear_desc d;
    memset(&d, 0, sizeof d);
    d.x = x; d.x_dtype = xt; d.ldx = ldx; d.w = w; d.w_dtype = wt; d.ldw = ldw; d.M = M; d.N = N; d.K = K;
    d.x_scales = sx; d.w_scales = sw; d.bias = bias; d.y = y; d.y_dtype = yt;
    return lwo_ref_linear(&d);
}
/* The LoRA side path's reference (lwo.h, Public API 9): y [M, N] of yt holds x W^T + bias as the GPU
   computed it; n LoRAs, LoRA i with down_i [rank_i, K] and up_i [N, rank_i] in dt (x's dtype) and
   scale s_i, are added as lwo_linear adds them: t = dt(s_r * x A^T), d = t B^T, y = yt(y + d) where
   d != 0. mag (optional, [M, N]) gets sum_r |t[m, r] B[n, r]|, the size a tolerance scales with.
   Returns 0 when out of host memory. */
static inline int check_ref_lora(const void *x, lwo_dtype dt, uint64_t M, uint64_t K, uint64_t N, size_t n,
                                 const void *const *downs, const void *const *ups, const uint64_t *ranks, const float *scales,
                                 void *y, lwo_dtype yt, double *mag) {
    uint64_t R = 0, off = 0, m, j, r;
    size_t i;
    uint16_t *t, *bcat;
    float *ti, *sw, *d;
    for (i = 0; i < n; i++) R += ranks[i];
    t = (uint16_t *)malloc((size_t)(M * R * 2 + 2)); bcat = (uint16_t *)malloc((size_t)(N * R * 2 + 2));
    ti = (float *)malloc((size_t)(M * R * 4 + 4)); sw = (float *)malloc((size_t)(R * 4 + 4)); d = (float *)malloc((size_t)(M * N * 4 + 4));
    if (!t || !bcat || !ti || !sw || !d) { free(t); free(bcat); free(ti); free(sw); free(d); return 0; }
    for (i = 0; i < n; i++) {
        for (r = 0; r < ranks[i]; r++) sw[r] = scales[i];
        check_ref_linear(x, dt, K, downs[i], dt, K, M, ranks[i], K, NULL, sw, NULL, ti, dt);   /* ti as dt [M, rank_i] */
        for (m = 0; m < M; m++) memcpy(t + m * R + off, (uint16_t *)ti + m * ranks[i], (size_t)ranks[i] * 2);
        for (j = 0; j < N; j++) memcpy(bcat + j * R + off, (const uint16_t *)ups[i] + j * ranks[i], (size_t)ranks[i] * 2);
        off += ranks[i];
    }
    check_ref_linear(t, dt, R, bcat, dt, R, M, N, R, NULL, NULL, NULL, d, LWO_DTYPE_F32);
    for (m = 0; m < M; m++)
        for (j = 0; j < N; j++) {
            float dv = d[m * N + j];
            if (dv != 0.0f) lwo_ref_store(y, yt, m * N + j, lwo_ref_load(y, yt, m * N + j) + dv);
            if (mag) {
                double s = 0;
                for (r = 0; r < R; r++) s += fabs((double)lwo_ref_load(t, dt, m * R + r) * (double)lwo_ref_load(bcat, dt, j * R + r));
                mag[m * N + j] = s;
            }
        }
    free(t); free(bcat); free(ti); free(sw); free(d);
    return 1;
}
/* A tensor entry for lwo_safetensors_write (the safetensors tests write their own checkpoints). */
static inline lwo_safetensors_write_tensor check_st_tensor(const char *name, lwo_dtype dt, int ndim, const uint64_t *shape, const void *data) {
    lwo_safetensors_write_tensor t;
    uint64_t n = 1;
    int i;
    memset(&t, 0, sizeof t);
    for (i = 0; i < ndim; i++) n *= shape[i];
    t.name = name; t.dtype = dt; t.ndim = ndim; t.shape = shape; t.data = data; t.bytes = n * lwo_dtype_size(dt);
    return t;
}
/* lwo_safetensors_create from one file, or from bytes in memory (the tests open checkpoints often). */
static inline lwo_result check_st_open(const char *path, lwo_safetensors **out) {
    lwo_safetensors_desc d;
    memset(&d, 0, sizeof d);
    d.path = path;
    return lwo_safetensors_create(&d, out);
}
static inline lwo_result check_st_open_memory(const void *data, size_t size, lwo_safetensors **out) {
    lwo_safetensors_desc d;
    memset(&d, 0, sizeof d);
    d.data = data;
    d.size = size;
    return lwo_safetensors_create(&d, out);
}
static inline lwo_result check_st_open_many(const char *const *paths, size_t n, lwo_safetensors **out) {
    lwo_safetensors_desc d;
    memset(&d, 0, sizeof d);
    d.paths = paths;
    d.path_count = n;
    return lwo_safetensors_create(&d, out);
}
/* lwo_safetensors_convert of one tensor into `format` (0 = KEEP). */
static inline lwo_result check_st_convert(const lwo_safetensors_tensor *t, lwo_format format, void *buf, uint64_t buf_bytes,
                                          float *scales, uint64_t scales_count, lwo_safetensors_converted *out) {
    lwo_safetensors_convert_desc d;
    memset(&d, 0, sizeof d);
    d.tensor = t; d.format = format; d.buf = buf; d.buf_bytes = buf_bytes; d.scales = scales; d.scales_count = scales_count;
    return lwo_safetensors_convert(&d, out);
}
/* lwo_safetensors_write of `count` tensors and `meta_count` metadata pairs; its desc's error text
   is copied into err (err_size bytes, "" on success). */
static inline lwo_result check_st_write(const char *path, const lwo_safetensors_write_tensor *tensors, size_t count,
                                        const char *const *keys, const char *const *values, size_t meta_count,
                                        char *err, size_t err_size) {
    lwo_safetensors_write_desc d;
    lwo_result r;
    memset(&d, 0, sizeof d);
    d.path = path; d.tensors = tensors; d.tensor_count = count;
    d.meta_keys = keys; d.meta_values = values; d.meta_count = meta_count;
    r = lwo_safetensors_write(&d);
    if (err && err_size) {   /* a copy cut to err_size (snprintf would warn that it may cut) */
        size_t n = strlen(d.error);
        if (n >= err_size) n = err_size - 1;
        memcpy(err, d.error, n);
        err[n] = 0;
    }
    return r;
}
#endif
#endif

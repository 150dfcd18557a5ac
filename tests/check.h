/* check.h - the tests' tiny harness. Each test program ends with CHECK_SUMMARY(), which prints
   "N passed, N failed"; tests/run.sh adds the programs' lines into the final one. */
#ifndef LWO_CHECK_H
#define LWO_CHECK_H
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
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

#ifdef LWO_H
/* A tensor entry for lwo_safetensors_write (the safetensors tests write their own checkpoints). */
static inline lwo_st_write_tensor check_st_tensor(const char *name, lwo_st_dtype dt, int ndim, const uint64_t *shape, const void *data) {
    lwo_st_write_tensor t;
    uint64_t n = 1;
    int i;
    memset(&t, 0, sizeof t);
    for (i = 0; i < ndim; i++) n *= shape[i];
    t.name = name; t.dtype = dt; t.ndim = ndim; t.shape = shape; t.data = data; t.bytes = n * lwo_st_dtype_size(dt);
    return t;
}
#endif
#endif

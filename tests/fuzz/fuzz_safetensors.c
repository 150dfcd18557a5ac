/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: open from memory, then every
   accessor, the quant conventions, lwo_safetensors_convert into every format, the storage
   policy lookup and the weight loaders' CPU side (lwo__st_weight_prep), all under a memory budget.
     clang -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_safetensors.c -lm -o build/fuzz_safetensors
   With -DLWO_FUZZ_MAIN it is a plain program that replays the files named on its command line,
   each also opened by path (the mapping), timing each input (CPU time) and reporting the slowest
   and the process's peak RSS; it fails when an input takes over LWO_FUZZ_MAX_MS (default 1000) or
   the peak RSS passes LWO_FUZZ_MAX_RSS_MB (default 256).

   The budget (issue 24): lwo's host memory, counted through LWO_MALLOC, never exceeds
   FZ_MEM_PER_BYTE bytes per input byte plus FZ_MEM_SLACK at any moment, so no header can make lwo
   allocate more than a fixed multiple of the file; an input that does traps (a crash to libFuzzer).
   Everything lwo allocated for an input is freed by the end of it (another trap). */
#define _POSIX_C_SOURCE 200809L   /* before any system header, as lwo.h would set it */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a failed check names its line, then crashes (what libFuzzer records) */
#define FZ_TRAP() (fprintf(stderr, "fuzz_safetensors: the check at line %d failed\n", __LINE__), __builtin_trap())
#define FZ_MEM_PER_BYTE 16
#define FZ_MEM_SLACK ((size_t)1 << 16)
static size_t fz_live, fz_peak, fz_limit = (size_t)-1;
typedef union fz_head { size_t n; long double ld; void *p; long long ll; } fz_head;   /* keeps malloc's alignment */
static void fz_over(size_t want) {
    fprintf(stderr, "fuzz_safetensors: lwo would hold %zu bytes, over its budget of %zu for this input\n", want, fz_limit);
    FZ_TRAP();
}
static void *fz_malloc(size_t n) {
    fz_head *h;
    if (n > fz_limit - fz_live) fz_over(fz_live + n);
    h = (fz_head *)malloc(sizeof *h + n);
    if (!h) return NULL;
    h->n = n;
    fz_live += n;
    if (fz_live > fz_peak) fz_peak = fz_live;
    return h + 1;
}
static void fz_free(void *p) {
    fz_head *h;
    if (!p) return;
    h = (fz_head *)p - 1;
    fz_live -= h->n;
    free(h);
}
/* a new block, a copy, then the old one freed: the moment both are live counts, as it does when
   the C library's realloc moves a block */
static void *fz_realloc(void *p, size_t n) {
    void *q;
    size_t old;
    if (!p) return fz_malloc(n);
    old = ((fz_head *)p - 1)->n;
    q = fz_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    fz_free(p);
    return q;
}
#define LWO_MALLOC(sz) fz_malloc(sz)
#define LWO_FREE(p) fz_free(p)
#define LWO_REALLOC(p, sz) fz_realloc(p, sz)
#define LWO_IMPLEMENTATION
#include "../../lwo.h"

/* Past this many tensors (4 times as many metadata keys), the costly checks run on an even sample
   that includes the last: what lwo does per tensor does not depend on how many there are (an
   O(n) lookup would still show, n times over the sample), and the harness must stay fast on
   inputs of many thousand keys. */
#define FZ_DEEP_TENSORS 512

static const lwo_storage_rule fz_rules[] = {
    { "*.attn.*.weight", LWO_FORMAT_FP8_E4M3 }, { "*.mlp.*", LWO_FORMAT_INT8 }, { "*norm*", LWO_FORMAT_F32 },
    { "?", LWO_FORMAT_F16 }, { "*.weight", LWO_FORMAT_KEEP },
};
/* Every lwo_format, then one past the last (refused everywhere). */
static const lwo_format fz_formats[] = {
    LWO_FORMAT_KEEP, LWO_FORMAT_BF16, LWO_FORMAT_F16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_FP8_E5M2, LWO_FORMAT_INT8,
    LWO_FORMAT_FP8_E4M3_W8A8, LWO_FORMAT_F32, LWO_FORMAT_COUNT,
};
#define FZ_NFORMATS (sizeof fz_formats / sizeof fz_formats[0])

static lwo_result fz_convert_to(const lwo_safetensors_tensor *t, lwo_format format, void *buf, uint64_t buf_bytes, float *scales,
                                uint64_t scales_count, lwo_safetensors_converted *out) {
    lwo_safetensors_convert_desc d;
    memset(&d, 0, sizeof d);
    d.tensor = t; d.format = format; d.buf = buf; d.buf_bytes = buf_bytes; d.scales = scales; d.scales_count = scales_count;
    return lwo_safetensors_convert(&d, out);
}
static lwo_result fz_open(const char *path, const void *data, size_t size, lwo_safetensors **out) {
    lwo_safetensors_desc d;
    memset(&d, 0, sizeof d);
    if (path) d.path = path;
    else { d.data = data; d.size = size; }
    return lwo_safetensors_create(&d, out);
}

/* Every format, into buffers lwo allocates and then into the caller's: the same bytes (W8A8 fp8 is
   no conversion's target, and one past the end is none: both refused). */
static void fz_convert(const lwo_safetensors_tensor *t) {
    size_t fi;
    for (fi = 0; fi < FZ_NFORMATS; fi++) {
        const lwo_format fmt = fz_formats[fi];
        lwo_safetensors_converted c, d;
        lwo_result r = fz_convert_to(t, fmt, NULL, 0, NULL, 0, &c);
        if (r != LWO_SUCCESS) {
            if (!c.error[0] || c.data || c.owned_data || c.owned_scales) FZ_TRAP();   /* says why, holds nothing */
            continue;
        }
        if (c.error[0]) FZ_TRAP();
        if (c.zero_copy) { if (c.data != t->data || c.bytes != t->bytes || c.owned_data) FZ_TRAP(); continue; }
        /* the budget in the header's LIMITS: 4 bytes of data and 4 of scales per element */
        if (c.bytes > 4 * t->numel || (c.row_scales && c.rows > (t->numel > 1 ? t->numel : 1))) FZ_TRAP();
        {
            void *buf = malloc(c.bytes ? (size_t)c.bytes : 1);   /* the caller's, outside lwo's budget */
            float *sc = c.row_scales ? (float *)malloc(c.rows ? (size_t)c.rows * 4 : 1) : NULL;
            r = fz_convert_to(t, fmt, buf, c.bytes, sc, c.rows, &d);
            if (r != LWO_SUCCESS || d.data != buf || d.owned_data || d.owned_scales || d.bytes != c.bytes ||
                memcmp(&d.scale, &c.scale, sizeof d.scale) != 0 || (c.bytes && memcmp(buf, c.data, (size_t)c.bytes) != 0) ||
                (sc && memcmp(sc, c.row_scales, (size_t)c.rows * 4) != 0))
                FZ_TRAP();
            if (c.bytes && fz_convert_to(t, fmt, buf, c.bytes - 1, sc, c.rows, &d) != LWO_ERROR_INVALID_ARGUMENT)
                FZ_TRAP();   /* a buffer one byte short is refused */
            free(buf);
            free(sc);
        }
        lwo_safetensors_converted_destroy(&c);
    }
}

/* What the weight loaders hand lwo_weight_create (no GPU needed): for every lwo_format, and for
   what a storage policy picks (lwo_safetensors_load_weight_policy's lookup). */
static void fz_weight(lwo_safetensors *f, const lwo_safetensors_tensor *t) {
    lwo_storage_policy pol;
    lwo__st_prep p;
    lwo_format lf;
    size_t fi;
    for (fi = 0; fi < FZ_NFORMATS; fi++) {
        const lwo_format fmt = fz_formats[fi];
        lwo_result r = lwo_safetensors_weight_format(f, t->name, fmt, &lf);
        if (r != LWO_SUCCESS && !lwo_safetensors_last_error(f)[0]) FZ_TRAP();   /* every failure says why */
        if (r == LWO_SUCCESS && (fmt == LWO_FORMAT_COUNT || fmt == LWO_FORMAT_F32 || lf == LWO_FORMAT_KEEP || lf >= LWO_FORMAT_F32)) FZ_TRAP();
    }
    for (fi = 0; fi < FZ_NFORMATS; fi++) {
        const lwo_format fmt = fz_formats[fi];
        if (lwo__st_weight_prep(f, t->name, fmt, (lwo_placement)(fi % 3), &p) == LWO_SUCCESS) {
            if (fmt == LWO_FORMAT_COUNT) FZ_TRAP();
            if (p.d.rows * p.d.cols != t->numel || !p.d.data || !t->numel) FZ_TRAP();
            if (p.zero_copy && p.d.data != t->data) FZ_TRAP();
        } else if (!lwo_safetensors_last_error(f)[0]) {
            FZ_TRAP();   /* every failure says why */
        }
        lwo__st_prep_free(&p);
    }
    memset(&pol, 0, sizeof pol);
    pol.rules = fz_rules;
    pol.rule_count = sizeof fz_rules / sizeof fz_rules[0];
    pol.default_format = LWO_FORMAT_BF16;
    if (lwo_safetensors_weight_format(f, t->name, lwo_storage_policy_format(&pol, t->name), &lf) == LWO_SUCCESS) {
        if (lwo__st_weight_prep(f, t->name, lf, LWO_PLACE_AUTO, &p) != LWO_SUCCESS && !lwo_safetensors_last_error(f)[0]) FZ_TRAP();
        lwo__st_prep_free(&p);
    }
}

static void fz_check(lwo_safetensors *f) {
    size_t i, n = lwo_safetensors_count(f), step = n > FZ_DEEP_TENSORS ? n / FZ_DEEP_TENSORS : 1;
    for (i = 0; i < n; i++) {
        const lwo_safetensors_tensor *t = lwo_safetensors_tensor_at(f, i);
        volatile uint8_t sink = 0;
        lwo_safetensors_quant q;
        if (lwo_safetensors_find(f, t->name) != t) FZ_TRAP();
        if (t->bytes) sink ^= ((const uint8_t *)t->data)[t->bytes - 1];
        (void)sink;
        if (i % step && i != n - 1) continue;
        if (lwo_safetensors_get_quant_info(f, t->name, &q) != LWO_SUCCESS && !lwo_safetensors_last_error(f)[0]) FZ_TRAP();
        fz_convert(t);
        fz_weight(f, t);
    }
    n = lwo_safetensors_metadata_count(f);
    step = n > 4 * FZ_DEEP_TENSORS ? n / (4 * FZ_DEEP_TENSORS) : 1;
    for (i = 0; i < n; i++)
        if ((i % step == 0 || i == n - 1) &&
            lwo_safetensors_metadata_find(f, lwo_safetensors_metadata_key(f, i)) != lwo_safetensors_metadata_value(f, i))
            FZ_TRAP();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lwo_safetensors *f = NULL;
    lwo_result r;
    fz_live = fz_peak = 0;
    fz_limit = FZ_MEM_PER_BYTE * size + FZ_MEM_SLACK;
    r = fz_open(NULL, data, size, &f);
    if (r == LWO_SUCCESS) fz_check(f);
    else if (f && !lwo_safetensors_last_error(f)[0]) FZ_TRAP();   /* every failure says why */
    lwo_safetensors_destroy(f);
    if (fz_live != 0) { fprintf(stderr, "fuzz_safetensors: %zu bytes still held after close\n", fz_live); FZ_TRAP(); }
    fz_limit = (size_t)-1;
    return 0;
}

#ifdef LWO_FUZZ_MAIN
#include <time.h>
#ifndef _WIN32
#include <sys/resource.h>
#endif
/* CPU time, not wall time: an amplification is work done, and a busy machine must not fail the
   replay by making an input wait for a core. */
static double fz_now(void) {
#ifdef _WIN32
    return (double)clock() / CLOCKS_PER_SEC;
#else
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
#endif
}
/* Peak resident memory in MiB (-1 where the platform does not say: Windows) */
static long fz_peak_rss_mb(void) {
#ifdef _WIN32
    return -1;
#else
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);   /* ru_maxrss is in KiB on Linux */
    return ru.ru_maxrss / 1024;
#endif
}
int main(int argc, char **argv) {
    int i, n = 0, fails = 0;
    const char *e = getenv("LWO_FUZZ_MAX_MS"), *slowest = "";
    double max_ms = e ? atof(e) : 1000.0, worst = 0.0, worst_ratio = 0.0;
    long max_rss_mb, rss;
    e = getenv("LWO_FUZZ_MAX_RSS_MB");
    max_rss_mb = e ? atol(e) : 256;
    for (i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb");
        long sz;
        uint8_t *b;
        double t0, ms;
        size_t peak;
        lwo_safetensors *f = NULL, *g = NULL;
        lwo_result rm, rf;
        if (!fp) { printf("FAIL cannot open %s\n", argv[i]); return 1; }
        fseek(fp, 0, SEEK_END); sz = ftell(fp); fseek(fp, 0, SEEK_SET);
        b = (uint8_t *)malloc(sz > 0 ? (size_t)sz : 1);
        if (sz > 0 && fread(b, 1, (size_t)sz, fp) != (size_t)sz) { printf("FAIL cannot read %s\n", argv[i]); return 1; }
        fclose(fp);
        t0 = fz_now();
        LLVMFuzzerTestOneInput(b, (size_t)sz);
        ms = (fz_now() - t0) * 1e3;
        peak = fz_peak;
        /* the same bytes through the mapping: the same verdict */
        rm = fz_open(NULL, b, (size_t)sz, &f);
        rf = fz_open(argv[i], NULL, 0, &g);
        if (rm != rf || lwo_safetensors_count(f) != lwo_safetensors_count(g) ||
            lwo_safetensors_metadata_count(f) != lwo_safetensors_metadata_count(g)) {
            printf("FAIL %s: from memory %s, by path %s (%s)\n", argv[i], lwo_result_string(rm), lwo_result_string(rf), lwo_safetensors_last_error(g));
            fails++;
        }
        lwo_safetensors_destroy(f);
        lwo_safetensors_destroy(g);
        if (sz >= (long)FZ_MEM_SLACK && (double)peak / (double)sz > worst_ratio) worst_ratio = (double)peak / (double)sz;
        if (ms > worst) { worst = ms; slowest = argv[i]; }
        if (ms > max_ms) { printf("FAIL %s: %.0f ms of CPU, over the %.0f ms an input may take\n", argv[i], ms, max_ms); fails++; }
        if (getenv("LWO_FUZZ_VERBOSE")) printf("  %8.1f ms  %10ld bytes  lwo peak %zu bytes  %s\n", ms, sz, peak, argv[i]);
        free(b);
        n++;
    }
    rss = fz_peak_rss_mb();
    printf("replayed %d inputs; slowest %.0f ms of CPU (%s); peak RSS %ld MiB; on inputs of 64 KiB and more lwo held at most "
           "%.1f bytes per input byte (the budget: %d, plus 64 KiB)\n", n, worst, slowest, rss, worst_ratio, FZ_MEM_PER_BYTE);
    if (rss > max_rss_mb) { printf("FAIL peak RSS %ld MiB is over %ld MiB\n", rss, max_rss_mb); fails++; }
    return fails ? 1 : 0;
}
#endif

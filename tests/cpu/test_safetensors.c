/* test_safetensors.c - the safetensors reader, writer, quant conventions, policy, conversion,
   and hostile inputs (issue 24: work and memory bounded by the file). CPU only. */
#define _POSIX_C_SOURCE 200809L   /* before any system header, as lwo.h would set it */
#include <stddef.h>
#include <stdlib.h>
/* lwo's host allocations here are refused above 256 MiB and counted: a header that makes lwo size
   a buffer by its shape alone shows up as a refusal (checked at the end), not as an OOM kill. */
#define CHECK_ALLOC_CAP ((size_t)256 << 20)
static size_t check_alloc_refused, check_alloc_biggest;
static void *check_malloc(size_t n) {
    if (n > check_alloc_biggest) check_alloc_biggest = n;
    if (n > CHECK_ALLOC_CAP) { check_alloc_refused++; return NULL; }
    return malloc(n);
}
static void *check_realloc(void *p, size_t n) {
    if (n > check_alloc_biggest) check_alloc_biggest = n;
    if (n > CHECK_ALLOC_CAP) { check_alloc_refused++; return NULL; }
    return realloc(p, n);
}
#define LWO_MALLOC(sz) check_malloc(sz)
#define LWO_FREE(p) free(p)
#define LWO_REALLOC(p, sz) check_realloc(p, sz)
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include <stdint.h>
#ifndef _WIN32   /* the special-file and shrinking-file tests are POSIX */
#include <unistd.h>
#include <signal.h>
#include <setjmp.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/resource.h>
#endif
#include "../check.h"

static char tmpdir[256];
static uint16_t pad16[16];
static const char *tpath(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}


/* ---- a file from a header string and n data bytes (pattern), in memory ---- */
static uint8_t *mk(const char *header, size_t hlen, size_t ndata, size_t *size) {
    size_t n = 8 + hlen + ndata, i;
    uint8_t *b = (uint8_t *)malloc(n ? n : 1);
    for (i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    for (i = 0; i < ndata; i++) b[8 + hlen + i] = (uint8_t)i;
    *size = n;
    return b;
}
static void expect_bad_mem(const uint8_t *b, size_t n, const char *label) {
    lwo_safetensors *f = NULL;
    lwo_result r = check_st_open_memory(b, n, &f);
    CHECK(r == LWO_ERROR_BAD_FILE, "%s: result %d", label, (int)r);
    CHECK(f && lwo_safetensors_last_error(f)[0], "%s: no message", label);
    if (getenv("LWO_TEST_VERBOSE") && f) printf("  %-28s %s\n", label, lwo_safetensors_last_error(f));
    lwo_safetensors_destroy(f);
}
static void expect_bad(const char *header, size_t ndata, const char *label) {
    size_t n;
    uint8_t *b = mk(header, strlen(header), ndata, &n);
    expect_bad_mem(b, n, label);
    free(b);
}
#define T1 "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"

static void test_malformed(void) {
    static const struct { const char *label, *header; size_t ndata; } cases[] = {
        {"offset past end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4},
        {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8},
        {"hole", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12},
        {"hole at start", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8},
        {"trailing data", T1, 8},
        {"data, no tensors", "{}", 4},
        {"reversed offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4},
        {"byte length mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4},
        {"unknown dtype", "{\"a\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"lowercase dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"dtype not a string", "{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"empty header", "", 0},
        {"lone brace", "{", 0},
        {"key only", "{\"a\"", 0},
        {"no value", "{\"a\":}", 0},
        {"missing colon", "{\"a\" {}}", 0},
        {"trailing comma", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", 4},
        {"trailing comma in shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 4},
        {"single quotes", "{'a':{}}", 0},
        {"unterminated string", "{\"a", 0},
        {"garbage after", "{}}", 0},
        {"garbage after 2", "{} x", 0},
        {"array at top", "[]", 0},
        {"null at top", "null", 0},
        {"bad escape", "{\"a\\x\":{}}", 0},
        {"raw newline in string", "{\"a\nb\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"not an object", "{\"a\":1}", 0},
        {"non-string key", "{1:2}", 0},
        {"deep nesting", "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 0},
        {"nested shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4},
        {"huge number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4},
        {"2^64 offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 1},
        {"2^63 offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,9223372036854775808]}}", 1},
        {"shape product overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", 4},
        {"byte size overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8},
        {"negative shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4},
        {"negative offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-0,4]}}", 4},
        {"float shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4},
        {"exponent shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4},
        {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4},
        {"string shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4},
        {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4},
        {"one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4},
        {"nine dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1},
        {"duplicate names", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8},
        {"duplicate field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4},
        {"missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4},
        {"empty entry", "{\"a\":{}}", 0},
        {"extra field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"strides\":[1]}}", 4},
        {"name 0xff", "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"name lone continuation", "{\"\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"name truncated seq", "{\"\xc3\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"overlong C0 AF", "{\"\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"overlong E0 80 AF", "{\"\xe0\x80\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"overlong F0 80 80 AF", "{\"\xf0\x80\x80\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"raw surrogate ED A0 80", "{\"\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"past U+10FFFF", "{\"\xf4\x90\x80\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"metadata bad UTF-8", "{\"__metadata__\":{\"k\":\"v\xc3\"}}", 0},
        {"lone high surrogate", "{\"\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"lone low surrogate", "{\"\\udc00\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"high + non-low", "{\"\\ud800\\u0041\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
        {"high at end", "{\"__metadata__\":{\"k\":\"\\ud83d\"}}", 0},
        {"\\u0000", "{\"__metadata__\":{\"k\\u0000\":\"v\"}}", 0},
        {"bad hex", "{\"__metadata__\":{\"k\":\"\\u12g4\"}}", 0},
        {"metadata number", "{\"__metadata__\":{\"k\":1}}", 0},
        {"metadata nested", "{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0},
        {"metadata array", "{\"__metadata__\":[]}", 0},
        {"metadata string", "{\"__metadata__\":\"x\"}", 0},
        {"metadata null", "{\"__metadata__\":{\"k\":null}}", 0},
        {"duplicate metadata key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0},
        {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0},
    };
    size_t i, n;
    uint8_t *b;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_bad(cases[i].header, cases[i].ndata, cases[i].label);
    printf("malformed table: %d cases\n", (int)(sizeof cases / sizeof cases[0]));
    /* truncations of a valid file at every byte */
    b = mk(T1, strlen(T1), 4, &n);
    {
        lwo_safetensors *f = NULL;
        CHECK(check_st_open_memory(b, n, &f) == LWO_SUCCESS, "valid T1: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
    }
    for (i = 0; i < n; i++) { char l[32]; snprintf(l, sizeof l, "truncated at %d", (int)i); expect_bad_mem(b, i, l); }
    /* header length past the end, and huge */
    b[7] = 0x7f; expect_bad_mem(b, n, "huge header length");
    b[7] = 0; b[0] = (uint8_t)(strlen(T1) + 5); expect_bad_mem(b, n, "header length past end");
    free(b);
    {   /* over LWO_SAFETENSORS_MAX_HEADER while inside the file */
        size_t big = (size_t)LWO_SAFETENSORS_MAX_HEADER + 16, hl = (size_t)LWO_SAFETENSORS_MAX_HEADER + 1;
        uint8_t *g = (uint8_t *)calloc(big, 1);
        for (i = 0; i < 8; i++) g[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        expect_bad_mem(g, big, "header over the cap");
        free(g);
    }
    {   /* very deep nesting does not recurse */
        size_t depth = 100000, k = 0;
        char *h = (char *)malloc(2 * depth + 16);
        memcpy(h, "{\"a\":", 5); k = 5;
        for (i = 0; i < depth; i++) h[k++] = '[';
        for (i = 0; i < depth; i++) h[k++] = ']';
        h[k++] = '}'; h[k] = 0;
        expect_bad(h, 0, "100000-deep nesting");
        free(h);
    }
    {   /* missing file, a directory */
        lwo_safetensors *f = NULL;
        CHECK(check_st_open(tpath("does-not-exist.safetensors"), &f) == LWO_ERROR_IO, "missing file");
        CHECK(f && strstr(lwo_safetensors_last_error(f), "does-not-exist"), "message names the path: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        CHECK(check_st_open(tmpdir, &f) == LWO_ERROR_IO, "a directory");
        lwo_safetensors_destroy(f);
        CHECK(check_st_open(NULL, &f) == LWO_ERROR_INVALID_ARGUMENT, "NULL path");
        lwo_safetensors_destroy(f);
    }
    {   /* the desc names exactly one source */
        static const uint8_t empty[16] = { 8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' ' };
        const char *one[1];
        lwo_safetensors_desc d;
        lwo_safetensors *f = NULL;
        one[0] = tpath("does-not-exist.safetensors");
        memset(&d, 0, sizeof d);
        CHECK(lwo_safetensors_create(&d, &f) == LWO_ERROR_INVALID_ARGUMENT && f && strstr(lwo_safetensors_last_error(f), "nothing to read"),
              "a zero desc: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        d.data = empty; d.size = sizeof empty;
        CHECK(lwo_safetensors_create(&d, &f) == LWO_SUCCESS && lwo_safetensors_count(f) == 0, "data alone: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        d.path = one[0];
        CHECK(lwo_safetensors_create(&d, &f) == LWO_ERROR_INVALID_ARGUMENT && f && strstr(lwo_safetensors_last_error(f), "more than one source"),
              "path and data: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        memset(&d, 0, sizeof d);
        d.paths = one;
        CHECK(lwo_safetensors_create(&d, &f) == LWO_ERROR_INVALID_ARGUMENT && f && strstr(lwo_safetensors_last_error(f), "no paths"),
              "paths with path_count 0: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        d.path_count = 1;
        CHECK(lwo_safetensors_create(&d, &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "does-not-exist"), "paths alone: %s",
              lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        CHECK(lwo_safetensors_create(NULL, &f) == LWO_ERROR_INVALID_ARGUMENT && f && strstr(lwo_safetensors_last_error(f), "desc"),
              "NULL desc: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        CHECK(lwo_safetensors_create(&d, NULL) == LWO_ERROR_INVALID_ARGUMENT, "NULL out");
        CHECK(lwo_safetensors_write(NULL) == LWO_ERROR_INVALID_ARGUMENT, "write: NULL desc");
    }
    {   /* whitespace padding, escapes, empty file, message names the tensor */
        lwo_safetensors *f = NULL;
        const char *h = " {\"__metadata__\":{\"k\\\"\\u00fc\\ud83d\\ude00\":\"v\\n\"},\"x\\/y\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}    ";
        b = mk(h, strlen(h), 1, &n);
        CHECK(check_st_open_memory(b, n, &f) == LWO_ERROR_BAD_FILE, "leading space is rejected (header starts with '{')");
        lwo_safetensors_destroy(f);
        b[8] = '{'; b[9] = ' ';
        memmove(b + 9, b + 9, 0);
        free(b);
        h = "{\"__metadata__\":{\"k\\\"\\u00fc\\ud83d\\ude00\":\"v\\n\"},\"x\\/y\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}    ";
        b = mk(h, strlen(h), 1, &n);
        CHECK(check_st_open_memory(b, n, &f) == LWO_SUCCESS, "escapes: %s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_metadata_find(f, "k\"\xc3\xbc\xf0\x9f\x98\x80") && strcmp(lwo_safetensors_metadata_find(f, "k\"\xc3\xbc\xf0\x9f\x98\x80"), "v\n") == 0, "decoded key/value");
        CHECK(lwo_safetensors_find(f, "x/y") && lwo_safetensors_find(f, "x/y")->ndim == 0, "scalar x/y");
        lwo_safetensors_destroy(f);
        free(b);
        b = mk("{}", 2, 0, &n);
        CHECK(check_st_open_memory(b, n, &f) == LWO_SUCCESS && lwo_safetensors_count(f) == 0, "empty header {}");
        lwo_safetensors_destroy(f);
        free(b);
        expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "names tensor");
        h = "{\"my.w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}";
        b = mk(h, strlen(h), 8, &n);
        check_st_open_memory(b, n, &f);
        CHECK(strstr(lwo_safetensors_last_error(f), "my.w") && strstr(lwo_safetensors_last_error(f), "file offset"), "message: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        free(b);
    }
}

/* ---- round trip writer -> reader --------------------------------------------------------- */
static void test_roundtrip(void) {
    enum { NT = 4 * (LWO_DTYPE_COUNT - 1) + 2 };
    lwo_safetensors_write_tensor w[NT];
    char names[NT][64];
    uint64_t shapes[4][3] = { {3, 5, 0}, {0, 0, 0}, {0, 4, 0}, {7, 0, 0} };
    int ndims[4] = { 2, 0, 2, 1 };
    uint8_t *bufs[NT];
    uint64_t shape8[8] = { 1, 2, 1, 2, 1, 1, 2, 1 };
    const char *mk_[3] = { "format", "unicode \xc3\xa9\"\\", "ctl" };
    const char *mv[3] = { "pt", "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "a\x01\tb" };
    char err[256];
    int n = 0, d, s, i;
    lwo_safetensors *f = NULL;
    for (d = 1; d < (int)LWO_DTYPE_COUNT; d++)   /* every dtype a file holds */
        for (s = 0; s < 4; s++) {
            uint64_t numel = 1, k;
            int j;
            for (j = 0; j < ndims[s]; j++) numel *= shapes[s][j];
            snprintf(names[n], 64, "model.diffusion_model.blocks.%d.%s.w%d", s, lwo_dtype_name((lwo_dtype)d), s);
            w[n].name = names[n];
            w[n].dtype = (lwo_dtype)d;
            w[n].ndim = ndims[s];
            w[n].shape = shapes[s];
            w[n].bytes = numel * lwo_dtype_size((lwo_dtype)d);
            bufs[n] = (uint8_t *)malloc(w[n].bytes + 1);
            for (k = 0; k < w[n].bytes; k++) bufs[n][k] = (uint8_t)check_rand_u64();
            w[n].data = w[n].bytes ? bufs[n] : NULL;
            n++;
        }
    snprintf(names[n], 64, "eight.dims \"quoted\" \xc3\xbc");
    w[n].name = names[n]; w[n].dtype = LWO_DTYPE_BF16; w[n].ndim = 8; w[n].shape = shape8; w[n].bytes = 16;
    bufs[n] = (uint8_t *)malloc(16); memset(bufs[n], 0x3f, 16); w[n].data = bufs[n]; n++;
    snprintf(names[n], 64, "__metadata");
    w[n].name = names[n]; w[n].dtype = LWO_DTYPE_U8; w[n].ndim = 1; w[n].shape = shapes[3]; w[n].bytes = 7;
    bufs[n] = (uint8_t *)malloc(7); memset(bufs[n], 7, 7); w[n].data = bufs[n]; n++;
    CHECK(check_st_write(tpath("rt.safetensors"), w, (size_t)n, mk_, mv, 3, err, sizeof err) == LWO_SUCCESS, "write: %s", err);
    CHECK(access(tpath("rt.safetensors"), R_OK) == 0, "file exists");
    CHECK(check_st_open(tpath("rt.safetensors"), &f) == LWO_SUCCESS, "open: %s", lwo_safetensors_last_error(f));
    CHECK_EQ_INT(lwo_safetensors_count(f), n);
    for (i = 0; i < n; i++) {
        const lwo_safetensors_tensor *t = lwo_safetensors_find(f, w[i].name);
        int j, same = 1;
        CHECK(t != NULL, "find %s", w[i].name);
        if (!t) continue;
        CHECK(t->dtype == w[i].dtype && t->ndim == w[i].ndim && t->bytes == w[i].bytes, "%s: dtype/ndim/bytes", w[i].name);
        for (j = 0; j < w[i].ndim; j++) same &= t->shape[j] == w[i].shape[j];
        CHECK(same, "%s: shape", w[i].name);
        CHECK(w[i].bytes == 0 || memcmp(t->data, w[i].data, w[i].bytes) == 0, "%s: data", w[i].name);
        CHECK(t->offset % lwo_dtype_size(t->dtype) == 0, "%s: aligned to element size (offset %llu)", w[i].name, (unsigned long long)t->offset);
        CHECK((const uint8_t *)t->data - (const uint8_t *)lwo_safetensors_tensor_at(f, 0)->data ==
              (ptrdiff_t)t->offset - (ptrdiff_t)lwo_safetensors_tensor_at(f, 0)->offset, "data pointer matches offset");
    }
    CHECK(lwo_safetensors_find(f, "nope") == NULL, "absent name");
    CHECK_EQ_INT(lwo_safetensors_metadata_count(f), 3);
    for (i = 0; i < 3; i++) {
        const char *v = lwo_safetensors_metadata_find(f, mk_[i]);
        CHECK(v && strcmp(v, mv[i]) == 0, "metadata %s", mk_[i]);
    }
    CHECK(strcmp(lwo_safetensors_metadata_key(f, 0), "ctl") == 0, "metadata ordered by key");
    lwo_safetensors_destroy(f);
    {   /* header is padded to 8 with spaces */
        FILE *fp = fopen(tpath("rt.safetensors"), "rb");
        uint8_t h8[8];
        uint64_t hl = 0;
        char last = 0;
        CHECK(fp && fread(h8, 1, 8, fp) == 8, "read header length");
        for (i = 7; i >= 0; i--) hl = (hl << 8) | h8[i];
        CHECK(hl % 8 == 0, "header length %llu multiple of 8", (unsigned long long)hl);
        if (fp) { fseek(fp, (long)(8 + hl - 1), SEEK_SET); last = (char)fgetc(fp); fclose(fp); }
        CHECK(last == ' ' || last == '}', "padding");
    }
    /* writer validation */
    {
        lwo_safetensors_write_tensor bad[2];
        uint64_t sh[1] = { 2 };
        float v[2] = { 1, 2 };
        memset(bad, 0, sizeof bad);
        bad[0].name = "x"; bad[0].dtype = LWO_DTYPE_F32; bad[0].ndim = 1; bad[0].shape = sh; bad[0].data = v; bad[0].bytes = 8;
        bad[1] = bad[0];
        err[0] = 0;
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT && err[0], "duplicate names: %s", err);
        bad[1].name = "y"; bad[1].dtype = LWO_DTYPE_F16;
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT, "size mismatch");
        bad[1].dtype = LWO_DTYPE_INVALID;
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT && strstr(err, "dtype"),
              "invalid dtype: %s", err);
        bad[1].dtype = LWO_DTYPE_F16;
        bad[1].bytes = 4; bad[1].name = "\xc0\xaf";
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT, "bad UTF-8 name");
        bad[1].name = "__metadata__";
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT, "reserved name");
        bad[1].name = "x";   /* same name, other element size */
        CHECK(check_st_write(tpath("bad.safetensors"), bad, 2, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT, "duplicate across sizes");
        {
            const char *k2[2] = { "a", "a" }, *v2[2] = { "1", "2" };
            CHECK(check_st_write(tpath("bad.safetensors"), bad, 1, k2, v2, 2, err, sizeof err) == LWO_ERROR_INVALID_ARGUMENT, "duplicate metadata key");
        }
        CHECK(access(tpath("bad.safetensors"), F_OK) != 0, "nothing written");
        CHECK(check_st_write(tpath("no-such-dir/x.safetensors"), bad, 1, NULL, NULL, 0, err, sizeof err) == LWO_ERROR_IO && err[0], "unwritable: %s", err);
        CHECK(check_st_write(tpath("empty.safetensors"), NULL, 0, NULL, NULL, 0, err, sizeof err) == LWO_SUCCESS, "empty file: %s", err);
        CHECK(check_st_open(tpath("empty.safetensors"), &f) == LWO_SUCCESS && lwo_safetensors_count(f) == 0, "open empty");
        lwo_safetensors_destroy(f);
    }
    /* shards */
    {
        lwo_safetensors_write_tensor a[1], b2[1];
        uint64_t sh[1] = { 2 };
        float v[2] = { 1, 2 };
        const char *paths[2];
        const char *ka[1] = { "format" }, *va[1] = { "first" }, *vb[1] = { "second" };
        memset(a, 0, sizeof a);
        a[0].name = "shard0.w"; a[0].dtype = LWO_DTYPE_F32; a[0].ndim = 1; a[0].shape = sh; a[0].data = v; a[0].bytes = 8;
        b2[0] = a[0]; b2[0].name = "shard1.w";
        CHECK(check_st_write(tpath("s0.safetensors"), a, 1, ka, va, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
        CHECK(check_st_write(tpath("s1.safetensors"), b2, 1, ka, vb, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
        paths[0] = tpath("s0.safetensors"); paths[1] = tpath("s1.safetensors");
        CHECK(check_st_open_many(paths, 2, &f) == LWO_SUCCESS, "open_many: %s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_count(f) == 2 && lwo_safetensors_find(f, "shard1.w") && lwo_safetensors_find(f, "shard1.w")->shard == 1, "lookup across shards");
        CHECK(lwo_safetensors_metadata_find(f, "format") && strcmp(lwo_safetensors_metadata_find(f, "format"), "first") == 0, "first shard's metadata wins");
        lwo_safetensors_destroy(f);
        paths[1] = tpath("s0.safetensors");
        CHECK(check_st_open_many(paths, 2, &f) == LWO_ERROR_BAD_FILE && strstr(lwo_safetensors_last_error(f), "shard0.w"), "duplicate across shards: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
    }
    for (i = 0; i < n; i++) free(bufs[i]);
}

/* ---- policy -------------------------------------------------------------------------------- */
static void test_policy(void) {
    static const struct { const char *p, *n; int m; } g[] = {
        {"*", "", 1}, {"*", "abc", 1}, {"", "", 1}, {"", "a", 0}, {"a?c", "abc", 1}, {"a?c", "ac", 0},
        {"*.weight", "model.blocks.0.attn.qkv.weight", 1}, {"*.weight", "model.blocks.0.attn.qkv.bias", 0},
        {"*blocks.*.attn.*", "model.blocks.12.attn.proj.weight", 1}, {"*blocks.*.mlp.*", "model.blocks.12.attn.proj.weight", 0},
        {"a*b*c", "aXbYc", 1}, {"a*b*c", "aXbYcZ", 0}, {"a**", "a", 1}, {"*a", "aaaa", 1}, {"?", "", 0},
        {"*x*y*z*", "--x--y--z--", 1}, {"*x*y*z*", "--x--z--y--", 0}, {"exact", "exact", 1}, {"exact", "exac", 0},
    };
    lwo_storage_rule rules[3] = { {"*.norm*", LWO_FORMAT_F32}, {"*blocks.*.weight", LWO_FORMAT_INT8}, {"*.weight", LWO_FORMAT_FP8_E4M3} };
    lwo_storage_policy p;
    size_t i;
    for (i = 0; i < sizeof g / sizeof g[0]; i++) CHECK(lwo_glob_match(g[i].p, g[i].n) == g[i].m, "glob %s ~ %s", g[i].p, g[i].n);
    {   /* pathological: a*a*a*...b against aaaa...: must stay fast */
        char pat[64], nm[4096];
        for (i = 0; i < 30; i++) { pat[2 * i] = 'a'; pat[2 * i + 1] = '*'; }
        pat[60] = 'b'; pat[61] = 0;
        memset(nm, 'a', sizeof nm - 1); nm[sizeof nm - 1] = 0;
        CHECK(lwo_glob_match(pat, nm) == 0, "pathological glob");
    }
    memset(&p, 0, sizeof p);
    CHECK(lwo_storage_policy_format(&p, "x.weight") == LWO_FORMAT_KEEP, "zero policy keeps");
    p.rules = rules; p.rule_count = 3; p.default_format = LWO_FORMAT_BF16;
    CHECK(lwo_storage_policy_format(&p, "blocks.0.norm1.weight") == LWO_FORMAT_F32, "first match wins");
    CHECK(lwo_storage_policy_format(&p, "m.blocks.3.ff.weight") == LWO_FORMAT_INT8, "rule 2");
    CHECK(lwo_storage_policy_format(&p, "m.head.weight") == LWO_FORMAT_FP8_E4M3, "rule 3");
    CHECK(lwo_storage_policy_format(&p, "m.head.bias") == LWO_FORMAT_BF16, "default");
    CHECK(strcmp(lwo_format_name(LWO_FORMAT_INT8), "int8") == 0, "format name");
    {   /* the names of the formats, by value */
        static const struct { lwo_format f; const char *name; } fn[] = {
            { LWO_FORMAT_KEEP, "keep" }, { LWO_FORMAT_BF16, "bf16" }, { LWO_FORMAT_F16, "f16" }, { LWO_FORMAT_FP8_E4M3, "fp8_e4m3" },
            { LWO_FORMAT_FP8_E5M2, "fp8_e5m2" }, { LWO_FORMAT_INT8, "int8" }, { LWO_FORMAT_FP8_E4M3_W8A8, "fp8_e4m3_w8a8" },
            { LWO_FORMAT_F32, "f32" } };
        for (i = 0; i < sizeof fn / sizeof fn[0]; i++) CHECK(strcmp(lwo_format_name(fn[i].f), fn[i].name) == 0, "format name %s", fn[i].name);
        CHECK(strcmp(lwo_format_name(LWO_FORMAT_COUNT), "invalid") == 0, "an unknown format's name");
    }
    {   /* the file's dtype tags read into lwo_dtype (the checkpoint-only ones too); an unknown tag is a bad file */
        static const struct { const char *tag; lwo_dtype t; const char *name; size_t size; } dt[] = {
            { "F64", LWO_DTYPE_F64, "f64", 8 }, { "F32", LWO_DTYPE_F32, "f32", 4 }, { "F16", LWO_DTYPE_F16, "f16", 2 },
            { "BF16", LWO_DTYPE_BF16, "bf16", 2 }, { "F8_E4M3", LWO_DTYPE_F8_E4M3, "f8_e4m3", 1 }, { "F8_E5M2", LWO_DTYPE_F8_E5M2, "f8_e5m2", 1 },
            { "I64", LWO_DTYPE_I64, "i64", 8 }, { "I32", LWO_DTYPE_I32, "i32", 4 }, { "I16", LWO_DTYPE_I16, "i16", 2 },
            { "I8", LWO_DTYPE_I8, "i8", 1 }, { "U8", LWO_DTYPE_U8, "u8", 1 }, { "BOOL", LWO_DTYPE_BOOL, "bool", 1 } };
        for (i = 0; i < sizeof dt / sizeof dt[0]; i++) {
            char h[128];
            size_t n;
            uint8_t *b;
            lwo_safetensors *f = NULL;
            const lwo_safetensors_tensor *t;
            snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":[0,%u]}}", dt[i].tag, (unsigned)(2 * dt[i].size));
            b = mk(h, strlen(h), 2 * dt[i].size, &n);
            CHECK(check_st_open_memory(b, n, &f) == LWO_SUCCESS, "dtype %s: %s", dt[i].tag, lwo_safetensors_last_error(f));
            t = lwo_safetensors_find(f, "a");
            CHECK(t && t->dtype == dt[i].t && t->bytes == 2 * dt[i].size, "dtype %s reads as %s", dt[i].tag, t ? lwo_dtype_name(t->dtype) : "nothing");
            CHECK(lwo_dtype_size(dt[i].t) == dt[i].size && strcmp(lwo_dtype_name(dt[i].t), dt[i].name) == 0, "dtype %s: size and name", dt[i].tag);
            lwo_safetensors_destroy(f);
            free(b);
        }
        CHECK(lwo_dtype_size(LWO_DTYPE_INVALID) == 0 && lwo_dtype_size(LWO_DTYPE_COUNT) == 0, "no size for an invalid dtype");
        expect_bad("{\"a\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype F8");
        expect_bad("{\"a\":{\"dtype\":\"INVALID\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype INVALID");
    }
}

/* ---- conversions against a straightforward reference -------------------------------------- */
/* Value of a non-negative code of a binary float format with e exponent bits and m mantissa bits,
   straight from the definition. */
static double ref_value(unsigned code, int m, int bias) {
    unsigned ef = code >> m, mf = code & ((1u << m) - 1);
    if (ef == 0) return (double)mf / (double)(1u << m) * pow(2.0, 1 - bias);
    return (1.0 + (double)mf / (double)(1u << m)) * pow(2.0, (int)ef - bias);
}
/* Nearest code in [0, maxcode] by binary search over the monotonic codes, ties to the even code. */
static unsigned ref_nearest(double a, unsigned maxcode, int m, int bias) {
    unsigned lo = 0, hi = maxcode;
    double dl, dh;
    if (a >= ref_value(maxcode, m, bias)) return maxcode;
    while (hi - lo > 1) { unsigned mid = (lo + hi) / 2; if (ref_value(mid, m, bias) <= a) lo = mid; else hi = mid; }
    dl = a - ref_value(lo, m, bias); dh = ref_value(hi, m, bias) - a;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}
static uint8_t ref_fp8(float v, int e5) {
    uint8_t s = signbit(v) ? 0x80 : 0;
    if (isnan(v)) return (uint8_t)(s | (e5 ? 0x7e : 0x7f));
    return (uint8_t)(s | ref_nearest(fabs((double)v), e5 ? 0x7b : 0x7e, e5 ? 2 : 3, e5 ? 15 : 7));
}
static uint16_t ref_half(float v, int bf) {   /* finite inputs below max + half ulp */
    uint16_t s = signbit(v) ? 0x8000 : 0;
    return (uint16_t)(s | ref_nearest(fabs((double)v), bf ? 0x7f7f : 0x7bff, bf ? 7 : 10, bf ? 127 : 15));
}
static float rand_val(void) {
    double e = check_rand_uniform();
    float v = (float)(check_rand_normal() * pow(2.0, (e * 40.0) - 24.0));
    return v;
}
/* The conversion's codecs are lwo's references (section 7); here they are checked against the
   definitions above, over every code and random values. */
static float dec8(uint8_t c, int e5) { return lwo_ref_fp8_to_f32(c, e5 ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3); }
static uint8_t enc8(float v, int e5) { return lwo_ref_f32_to_fp8(v, e5 ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3); }
static void test_codecs(void) {
    int i, bad = 0;
    for (i = 0; i < 256; i++) {   /* every fp8 code decodes and re-encodes to itself */
        float v4 = dec8((uint8_t)i, 0), v5 = dec8((uint8_t)i, 1);
        if ((i & 0x7f) != 0x7f) { if (enc8(v4, 0) != i || (double)fabsf(v4) != ref_value((unsigned)i & 0x7f, 3, 7)) bad++; }
        else if (!isnan(v4)) bad++;
        if ((i & 0x7c) != 0x7c) { if (enc8(v5, 1) != i) bad++; }
        else if ((i & 3) && !isnan(v5)) bad++;
    }
    CHECK(bad == 0, "%d fp8 code round trips wrong", bad);
    bad = 0;
    for (i = 0; i < 65536; i++) {
        float v = lwo_ref_f16_to_f32((uint16_t)i);
        if ((i & 0x7c00) != 0x7c00) { if (lwo_ref_f32_to_f16(v) != i) bad++; }
        else if ((i & 0x3ff) ? !isnan(v) : !isinf(v)) bad++;
    }
    CHECK(bad == 0, "%d f16 code round trips wrong", bad);
    bad = 0;
    for (i = 0; i < 200000; i++) {
        float v = rand_val();
        if (fabsf(v) < 448.0f && enc8(v, 0) != ref_fp8(v, 0)) bad++;
        if (enc8(v, 1) != ref_fp8(v, 1)) bad++;
        if (fabsf(v) < 65504.0f && lwo_ref_f32_to_f16(v) != ref_half(v, 0)) bad++;
        if (lwo_ref_f32_to_bf16(v) != ref_half(v, 1)) bad++;
    }
    CHECK(bad == 0, "%d random encodes differ from the reference", bad);
    /* specials: saturation, NaN, inf, ties */
    CHECK(enc8(1000.0f, 0) == 0x7e && enc8(-1e30f, 0) == 0xfe, "e4m3 saturates");
    CHECK(enc8(464.0f, 0) == 0x7e && enc8((float)INFINITY, 0) == 0x7e, "e4m3 464, inf");
    CHECK(enc8(1e9f, 1) == 0x7b && enc8((float)-INFINITY, 1) == 0xfb, "e5m2 saturates");
    CHECK(enc8((float)NAN, 0) == 0x7f && (enc8((float)NAN, 1) & 0x7f) > 0x7c, "NaN kept");
    CHECK(enc8(1.0625f, 0) == 0x38 && enc8(1.1875f, 0) == 0x3a, "e4m3 ties to even");
    CHECK(enc8((float)ldexp(1.0, -10), 0) == 0x00 && enc8((float)ldexp(3.0, -10), 0) == 0x02, "e4m3 subnormal ties");
    CHECK(lwo_ref_f32_to_f16(65520.0f) == 0x7c00 && lwo_ref_f32_to_f16(65519.0f) == 0x7bff, "f16 overflow to inf");
    CHECK(lwo_ref_f32_to_bf16((float)NAN) != 0 && isnan(lwo_ref_bf16_to_f32(lwo_ref_f32_to_bf16((float)NAN))), "bf16 NaN");
    CHECK(lwo_ref_f32_to_bf16(3.4e38f) == 0x7f80, "bf16 overflow rounds to inf");
}

static void test_convert(void) {
    enum { R = 37, C = 53 };
    float src[R * C];
    uint16_t src_bf[R * C];
    double src_d[R * C];
    lwo_safetensors_write_tensor w[4];
    uint64_t sh[2] = { R, C };
    char err[256];
    lwo_safetensors *f = NULL;
    int i, bad;
    for (i = 0; i < R * C; i++) {
        src[i] = (float)check_rand_normal() * (float)(1 + (i / C) % 7);
        if (i / C == 5) src[i] = 0.0f;           /* an all-zero row */
        src_bf[i] = lwo_ref_f32_to_bf16(src[i]);
        src_d[i] = (double)src[i];
    }
    memset(w, 0, sizeof w);
    w[0].name = "f32"; w[0].dtype = LWO_DTYPE_F32; w[0].ndim = 2; w[0].shape = sh; w[0].data = src; w[0].bytes = sizeof src;
    w[1].name = "bf16"; w[1].dtype = LWO_DTYPE_BF16; w[1].ndim = 2; w[1].shape = sh; w[1].data = src_bf; w[1].bytes = sizeof src_bf;
    w[2].name = "f64"; w[2].dtype = LWO_DTYPE_F64; w[2].ndim = 2; w[2].shape = sh; w[2].data = src_d; w[2].bytes = sizeof src_d;
    w[3].name = "zero"; w[3].dtype = LWO_DTYPE_F32; w[3].ndim = 1; w[3].shape = sh; w[3].data = src + 5 * C; w[3].bytes = R * 4;
    CHECK(check_st_write(tpath("cv.safetensors"), w, 4, NULL, NULL, 0, err, sizeof err) == LWO_SUCCESS, "%s", err);
    CHECK(check_st_open(tpath("cv.safetensors"), &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
    {
        const lwo_safetensors_tensor *tf = lwo_safetensors_find(f, "f32"), *tb = lwo_safetensors_find(f, "bf16"), *td = lwo_safetensors_find(f, "f64");
        lwo_safetensors_converted c;
        float scales[R];
        int8_t q[R * C];
        /* zero copy */
        CHECK(check_st_convert(tf, LWO_FORMAT_F32, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.zero_copy && c.data == tf->data && !c.owned_data, "f32 -> f32 zero copy");
        CHECK(check_st_convert(tb, LWO_FORMAT_KEEP, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.zero_copy && c.data == tb->data && c.dtype == LWO_DTYPE_BF16, "keep zero copy");
        /* to bf16 / f16 / f32 */
        CHECK(check_st_convert(tf, LWO_FORMAT_BF16, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.owned_data && c.bytes == R * C * 2, "f32 -> bf16");
        for (bad = 0, i = 0; i < R * C; i++) { uint16_t h; memcpy(&h, (const uint8_t *)c.data + 2 * i, 2); if (h != ref_half(src[i], 1)) bad++; }
        CHECK(bad == 0, "bf16 values: %d wrong", bad);
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(td, LWO_FORMAT_F16, NULL, 0, NULL, 0, &c) == LWO_SUCCESS, "f64 -> f16");
        for (bad = 0, i = 0; i < R * C; i++) { uint16_t h; memcpy(&h, (const uint8_t *)c.data + 2 * i, 2); if (h != ref_half(src[i], 0)) bad++; }
        CHECK(bad == 0, "f16 values: %d wrong", bad);
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(tb, LWO_FORMAT_F32, NULL, 0, NULL, 0, &c) == LWO_SUCCESS, "bf16 -> f32");
        for (bad = 0, i = 0; i < R * C; i++) { float v; uint32_t u = (uint32_t)src_bf[i] << 16; float e; memcpy(&e, &u, 4); memcpy(&v, (const uint8_t *)c.data + 4 * i, 4); if (v != e) bad++; }
        CHECK(bad == 0, "f32 values: %d wrong", bad);
        lwo_safetensors_converted_destroy(&c);
        /* fp8 with per-tensor scale */
        {
            int e5;
            for (e5 = 0; e5 < 2; e5++) {
                float amax = 0, s;
                for (i = 0; i < R * C; i++) if (fabsf(src[i]) > amax) amax = fabsf(src[i]);
                s = amax / (e5 ? 57344.0f : 448.0f);
                CHECK(check_st_convert(tf, e5 ? LWO_FORMAT_FP8_E5M2 : LWO_FORMAT_FP8_E4M3, NULL, 0, NULL, 0, &c) == LWO_SUCCESS, "-> fp8");
                CHECK(c.scale == s, "fp8 scale %g != %g", c.scale, s);
                for (bad = 0, i = 0; i < R * C; i++) if (((const uint8_t *)c.data)[i] != ref_fp8(src[i] * (1.0f / s), e5)) bad++; /* the kernels' reciprocal */
                CHECK(bad == 0, "fp8 e5m2=%d values: %d wrong", e5, bad);
                lwo_safetensors_converted_destroy(&c);
            }
        }
        /* int8 rows into caller buffers */
        CHECK(check_st_convert(tf, LWO_FORMAT_INT8, q, sizeof q, scales, R - 1, &c) == LWO_ERROR_INVALID_ARGUMENT, "scales too small");
        CHECK(check_st_convert(tf, LWO_FORMAT_INT8, q, sizeof q - 1, scales, R, &c) == LWO_ERROR_INVALID_ARGUMENT, "buffer too small");
        CHECK(check_st_convert(tf, LWO_FORMAT_INT8, q, sizeof q, scales, R, &c) == LWO_SUCCESS && c.data == q && c.row_scales == scales && !c.owned_data && !c.owned_scales, "-> int8");
        CHECK(c.rows == R && c.cols == C, "int8 layout");
        for (bad = 0, i = 0; i < R; i++) {
            float amax = 0, s;
            int k;
            for (k = 0; k < C; k++) if (fabsf(src[i * C + k]) > amax) amax = fabsf(src[i * C + k]);
            s = amax == 0.0f ? 1.0f : amax / 127.0f;
            if (scales[i] != s) bad++;
            for (k = 0; k < C; k++) {
                long r = lrintf(src[i * C + k] * (1.0f / s));
                if (r > 127) r = 127;
                if (r < -127) r = -127;
                if (q[i * C + k] != (int8_t)r) bad++;
            }
        }
        CHECK(bad == 0, "int8 values: %d wrong", bad);
        CHECK(scales[5] == 1.0f, "all-zero row scale 1");
        {   /* the same as the references of the GPU quantizers (what lwo_weight_create makes) */
            int8_t q2[R * C];
            float s2[R];
            uint8_t f8[R * C];
            float s8 = lwo_ref_fp8_scale(src, LWO_DTYPE_F32, R * C, LWO_DTYPE_F8_E4M3);
            check_ref_quantize_int8_rows(src, LWO_DTYPE_F32, R, C, NULL, q2, C, s2);
            CHECK(memcmp(q2, q, sizeof q) == 0 && memcmp(s2, scales, sizeof s2) == 0, "int8 conversion equals lwo_ref_quantize per row");
            check_ref_quantize_fp8(src, LWO_DTYPE_F32, f8, LWO_DTYPE_F8_E4M3, R * C, s8);
            CHECK(check_st_convert(tf, LWO_FORMAT_FP8_E4M3, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.scale == s8 && memcmp(c.data, f8, sizeof f8) == 0,
                  "e4m3 conversion equals lwo_ref_fp8_scale + lwo_ref_quantize");
            lwo_safetensors_converted_destroy(&c);
        }
        CHECK(check_st_convert(lwo_safetensors_find(f, "zero"), LWO_FORMAT_FP8_E4M3, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.scale == 1.0f, "all-zero fp8 scale 1");
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(tf, (lwo_format)99, NULL, 0, NULL, 0, &c) == LWO_ERROR_INVALID_ARGUMENT, "bad target");
        {   /* NaN: skipped by absmax, int8 0, fp8 NaN */
            float v4[4];
            lwo_safetensors_tensor t;
            int8_t q4[4];
            float s4[1];
            v4[0] = (float)NAN; v4[1] = 1.0f; v4[2] = -2.0f; v4[3] = 0.0f;
            memset(&t, 0, sizeof t);
            t.name = "nan"; t.dtype = LWO_DTYPE_F32; t.ndim = 2; t.shape[0] = 1; t.shape[1] = 4; t.numel = 4; t.bytes = 16; t.data = v4;
            CHECK(check_st_convert(&t, LWO_FORMAT_INT8, q4, 4, s4, 1, &c) == LWO_SUCCESS && s4[0] == 2.0f / 127.0f &&
                  q4[0] == 0 && q4[1] == 64 && q4[2] == -127 && q4[3] == 0, "int8 with a NaN: %d %d %d %d", q4[0], q4[1], q4[2], q4[3]);
            CHECK(check_st_convert(&t, LWO_FORMAT_FP8_E5M2, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.scale == 2.0f / 57344.0f &&
                  (((const uint8_t *)c.data)[0] & 0x7f) == 0x7f && ((const uint8_t *)c.data)[2] == 0xfb, "e5m2 with a NaN");
            lwo_safetensors_converted_destroy(&c);
        }
    }
    lwo_safetensors_destroy(f);
}

/* ---- quantization conventions ------------------------------------------------------------- */
static void test_quant(void) {
    char err[256];
    lwo_safetensors *f = NULL;
    lwo_safetensors_quant qi;
    uint8_t w8[16] = { 0 };
    float half = 0.5f, two = 2.0f, quarter = 0.25f, three = 3.0f, ws3[3] = { 1, 2, 3 }, sm4[4] = { 1, 1, 2, 2 }, ws2[2] = { 1, 2 };
    uint64_t s44[2] = { 4, 4 }, s0[1] = { 0 }, s34[2] = { 3, 4 }, s3[1] = { 3 }, s4[1] = { 4 }, s2[1] = { 2 }, sj[1], sj2[1], sj3[1];
    const char *cj = "{\"format\": \"float8_e4m3fn\", \"extra\": [1, -2.5e-3, {\"x\": null, \"y\": true}], \"s\": \"\\u00e9\"}";
    const char *cj2 = "{\"format\": 1}";
    const char *cj3 = "{\"format\": \"float8_e5m2\"}";
    {   /* ComfyUI scaled fp8 */
        lwo_safetensors_write_tensor w[6];
        memset(w, 0, sizeof w);
        w[0].name = "scaled_fp8"; w[0].dtype = LWO_DTYPE_F8_E4M3; w[0].ndim = 1; w[0].shape = s0;
        w[1].name = "model.diffusion_model.blocks.0.attn.qkv.weight"; w[1].dtype = LWO_DTYPE_F8_E4M3; w[1].ndim = 2; w[1].shape = s44; w[1].data = w8; w[1].bytes = 16;
        w[2].name = "model.diffusion_model.blocks.0.attn.qkv.scale_weight"; w[2].dtype = LWO_DTYPE_F32; w[2].data = &half; w[2].bytes = 4;
        w[3].name = "model.diffusion_model.blocks.0.attn.qkv.scale_input"; w[3].dtype = LWO_DTYPE_F32; w[3].data = &two; w[3].bytes = 4;
        w[4].name = "model.diffusion_model.blocks.0.attn.proj.weight"; w[4].dtype = LWO_DTYPE_F8_E4M3; w[4].ndim = 2; w[4].shape = s44; w[4].data = w8; w[4].bytes = 16;
        w[5].name = "model.diffusion_model.blocks.0.attn.proj.bias"; w[5].dtype = LWO_DTYPE_F32; w[5].ndim = 1; w[5].shape = s4; w[5].data = sm4; w[5].bytes = 16;
        CHECK(check_st_write(tpath("q1.safetensors"), w, 6, NULL, NULL, 0, err, sizeof err) == LWO_SUCCESS, "%s", err);
        CHECK(check_st_open(tpath("q1.safetensors"), &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_get_quant_info(f, w[1].name, &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_COMFY_SCALED_FP8, "scaled fp8 detected");
        CHECK(qi.weight_scale && qi.input_scale && qi.weight_scale_value == 0.5f && qi.input_scale_value == 2.0f, "scaled fp8 scales");
        CHECK(lwo_safetensors_get_quant_info(f, w[4].name, &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_COMFY_SCALED_FP8 && !qi.weight_scale && qi.weight_scale_value == 1.0f, "no scale_weight: 1");
        CHECK(lwo_safetensors_get_quant_info(f, w[5].name, &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_NONE && qi.weight, "bias: none");
        CHECK(lwo_safetensors_get_quant_info(f, "missing.weight", &qi) == LWO_ERROR_NOT_FOUND, "missing");
        lwo_safetensors_destroy(f);
    }
    {   /* ComfyUI comfy_quant */
        lwo_safetensors_write_tensor w[9];
        memset(w, 0, sizeof w);
        sj[0] = strlen(cj); sj2[0] = strlen(cj2); sj3[0] = strlen(cj3);
        w[0].name = "blk.weight"; w[0].dtype = LWO_DTYPE_F8_E4M3; w[0].ndim = 2; w[0].shape = s44; w[0].data = w8; w[0].bytes = 16;
        w[1].name = "blk.comfy_quant"; w[1].dtype = LWO_DTYPE_U8; w[1].ndim = 1; w[1].shape = sj; w[1].data = cj; w[1].bytes = sj[0];
        w[2].name = "blk.weight_scale"; w[2].dtype = LWO_DTYPE_F32; w[2].data = &quarter; w[2].bytes = 4;
        w[3].name = "blk.input_scale"; w[3].dtype = LWO_DTYPE_F32; w[3].data = &three; w[3].bytes = 4;
        w[4].name = "bad.weight"; w[4].dtype = LWO_DTYPE_F8_E4M3; w[4].ndim = 2; w[4].shape = s44; w[4].data = w8; w[4].bytes = 16;
        w[5].name = "bad.comfy_quant"; w[5].dtype = LWO_DTYPE_U8; w[5].ndim = 1; w[5].shape = sj2; w[5].data = cj2; w[5].bytes = sj2[0];
        w[6].name = "mis.weight"; w[6].dtype = LWO_DTYPE_F8_E4M3; w[6].ndim = 2; w[6].shape = s44; w[6].data = w8; w[6].bytes = 16;
        w[7].name = "mis.comfy_quant"; w[7].dtype = LWO_DTYPE_U8; w[7].ndim = 1; w[7].shape = sj3; w[7].data = cj3; w[7].bytes = sj3[0];
        w[8].name = "plain.weight"; w[8].dtype = LWO_DTYPE_BF16; w[8].ndim = 2; w[8].shape = s44; w[8].data = pad16; w[8].bytes = 32;
        CHECK(check_st_write(tpath("q2.safetensors"), w, 9, NULL, NULL, 0, err, sizeof err) == LWO_SUCCESS, "%s", err);
        CHECK(check_st_open(tpath("q2.safetensors"), &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_get_quant_info(f, "blk.weight", &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_COMFY_QUANT, "comfy_quant: %s", lwo_safetensors_last_error(f));
        CHECK(strcmp(qi.comfy_format, "float8_e4m3fn") == 0 && qi.weight_scale_value == 0.25f && qi.input_scale_value == 3.0f, "comfy_quant fields");
        CHECK(lwo_safetensors_get_quant_info(f, "bad.weight", &qi) == LWO_ERROR_BAD_FILE && lwo_safetensors_last_error(f)[0], "bad comfy_quant JSON: %s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_get_quant_info(f, "mis.weight", &qi) == LWO_ERROR_BAD_FILE, "format/dtype mismatch");
        CHECK(lwo_safetensors_get_quant_info(f, "plain.weight", &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_NONE, "plain");
        lwo_safetensors_destroy(f);
    }
    {   /* lwo int8 */
        lwo_safetensors_write_tensor w[5];
        int8_t q12[12] = { 0 };
        const char *k[1] = { "lwo.quant" }, *v[1] = { LWO_SAFETENSORS_LWO_INT8_V1 };
        memset(w, 0, sizeof w);
        w[0].name = "l.weight"; w[0].dtype = LWO_DTYPE_I8; w[0].ndim = 2; w[0].shape = s34; w[0].data = q12; w[0].bytes = 12;
        w[1].name = "l.weight_scale"; w[1].dtype = LWO_DTYPE_F32; w[1].ndim = 1; w[1].shape = s3; w[1].data = ws3; w[1].bytes = 12;
        w[2].name = "l.smooth"; w[2].dtype = LWO_DTYPE_F32; w[2].ndim = 1; w[2].shape = s4; w[2].data = sm4; w[2].bytes = 16;
        w[3].name = "m.weight"; w[3].dtype = LWO_DTYPE_I8; w[3].ndim = 2; w[3].shape = s34; w[3].data = q12; w[3].bytes = 12;
        w[4].name = "m.weight_scale"; w[4].dtype = LWO_DTYPE_F32; w[4].ndim = 1; w[4].shape = s2; w[4].data = ws2; w[4].bytes = 8;
        CHECK(check_st_write(tpath("q3.safetensors"), w, 5, k, v, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
        CHECK(check_st_open(tpath("q3.safetensors"), &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
        CHECK(lwo_safetensors_get_quant_info(f, "l.weight", &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_LWO_INT8, "lwo int8: %s", lwo_safetensors_last_error(f));
        CHECK(qi.weight_scale && qi.weight_scale->shape[0] == 3 && qi.smooth && qi.smooth->shape[0] == 4 && !qi.input_scale, "lwo int8 tensors");
        CHECK(lwo_safetensors_get_quant_info(f, "m.weight", &qi) == LWO_ERROR_BAD_FILE, "wrong scale shape: %s", lwo_safetensors_last_error(f));
        {   /* zero copy of the file's int8 */
            lwo_safetensors_converted c;
            CHECK(check_st_convert(lwo_safetensors_find(f, "l.weight"), LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.zero_copy && !c.row_scales, "int8 zero copy");
        }
        lwo_safetensors_destroy(f);
    }
}

/* ---- checkpoint tensors as weights: what the loader hands lwo_weight_create ---------------- */
/* lwo__st_weight_prep, expecting result r; on success the caller frees p. */
static int prep(lwo_safetensors *f, const char *name, lwo_format fmt, lwo_placement pl, lwo__st_prep *p, lwo_result want) {
    lwo_result r = lwo__st_weight_prep(f, name, fmt, pl, p);
    CHECK(r == want, "prep %.60s as %d placement %d: got %s, want %s (%.300s)", name, (int)fmt, (int)pl, lwo_result_string(r), lwo_result_string(want),
          lwo_safetensors_last_error(f));
    if (r != LWO_SUCCESS) {
        CHECK(strstr(lwo_safetensors_last_error(f), name) != NULL || strstr(lwo_safetensors_last_error(f), "bias") != NULL,
              "the detail names the tensor: %.300s", lwo_safetensors_last_error(f));
        lwo__st_prep_free(p);
    }
    return r == LWO_SUCCESS;
}
static void test_load(void) {
    enum { N = 6, K = 128, K2 = 100 };
    static uint16_t wb[N * K], wb2[N * K2], wh[N * K], bb[N];
    static float wf[N * K], bf[N], half = 0.5f, zero = 0.0f, neg = -2.0f, ws[N], sm[K], smz[K], scales_n[N];
    static double wd[N * K], bd[N];
    static uint8_t w8[N * K], w5[N * K];
    static int8_t q8[N * K];
    static int32_t bi[N];
    uint64_t sNK[2] = { N, K }, sNK2[2] = { N, K2 }, sN[1] = { N }, sK[1] = { K }, s0[1] = { 0 }, sN1[1] = { N + 1 }, sj[1], sj2[1];
    const char *cq_int = "{\"format\": \"int8_blockwise\"}", *cq_e4 = "{\"format\": \"float8_e4m3fn\"}";
    lwo_safetensors_write_tensor w[40];
    const char *mk_[1] = { "lwo.quant" }, *mv[1] = { LWO_SAFETENSORS_LWO_INT8_V1 };
    char err[256];
    lwo_safetensors *f = NULL, *g = NULL;
    lwo__st_prep p;
    lwo_format fmt;
    lwo_weight *wout;
    int i, n = 0, bad;
    for (i = 0; i < N * K; i++) {
        float v = (float)check_rand_normal();
        wf[i] = v; wd[i] = (double)v * (1.0 + 1e-9); wb[i] = lwo_ref_f32_to_bf16(v); wh[i] = lwo_ref_f32_to_f16(v);
        w8[i] = lwo_ref_f32_to_fp8(v * 100.0f, LWO_DTYPE_F8_E4M3); w5[i] = lwo_ref_f32_to_fp8(v * 100.0f, LWO_DTYPE_F8_E5M2);
        q8[i] = (int8_t)((int)(check_rand_u64() % 255) - 127);
    }
    for (i = 0; i < N * K2; i++) wb2[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    for (i = 0; i < N; i++) { bf[i] = (float)check_rand_normal(); bb[i] = lwo_ref_f32_to_bf16(bf[i]); bd[i] = bf[i]; bi[i] = i; ws[i] = 0.01f * (float)(i + 1); scales_n[i] = 1.0f; }
    for (i = 0; i < K; i++) { sm[i] = 0.5f + (float)i / K; smz[i] = i == 3 ? 0.0f : 1.0f; }
    /* file 1: plain tensors, ComfyUI scaled fp8 (the "scaled_fp8" marker), comfy_quant */
    w[n++] = check_st_tensor("bf.weight", LWO_DTYPE_BF16, 2, sNK, wb);
    w[n++] = check_st_tensor("bf.bias", LWO_DTYPE_BF16, 1, sN, bb);
    w[n++] = check_st_tensor("bf100.weight", LWO_DTYPE_BF16, 2, sNK2, wb2);
    w[n++] = check_st_tensor("h.weight", LWO_DTYPE_F16, 2, sNK, wh);
    w[n++] = check_st_tensor("f.weight", LWO_DTYPE_F32, 2, sNK, wf);
    w[n++] = check_st_tensor("f.bias", LWO_DTYPE_F32, 1, sN, bf);
    w[n++] = check_st_tensor("d.weight", LWO_DTYPE_F64, 2, sNK, wd);
    w[n++] = check_st_tensor("d.bias", LWO_DTYPE_F64, 1, sN, bd);
    w[n++] = check_st_tensor("scaled_fp8", LWO_DTYPE_F8_E4M3, 1, s0, NULL);
    w[n++] = check_st_tensor("e4.weight", LWO_DTYPE_F8_E4M3, 2, sNK, w8);
    w[n++] = check_st_tensor("e4.scale_weight", LWO_DTYPE_F32, 0, NULL, &half);
    w[n++] = check_st_tensor("e4.bias", LWO_DTYPE_F32, 1, sN, bf);
    w[n++] = check_st_tensor("e5.weight", LWO_DTYPE_F8_E5M2, 2, sNK, w5);
    w[n++] = check_st_tensor("e5.scale_weight", LWO_DTYPE_F32, 0, NULL, &half);
    w[n++] = check_st_tensor("e4zero.weight", LWO_DTYPE_F8_E4M3, 2, sNK, w8);
    w[n++] = check_st_tensor("e4zero.scale_weight", LWO_DTYPE_F32, 0, NULL, &zero);
    w[n++] = check_st_tensor("e4neg.weight", LWO_DTYPE_F8_E4M3, 2, sNK, w8);
    w[n++] = check_st_tensor("e4neg.scale_weight", LWO_DTYPE_F32, 0, NULL, &neg);
    w[n++] = check_st_tensor("cq.weight", LWO_DTYPE_F8_E4M3, 2, sNK, w8);
    sj[0] = strlen(cq_e4);
    sj2[0] = strlen(cq_int);
    w[n++] = check_st_tensor("cq.comfy_quant", LWO_DTYPE_U8, 1, sj, cq_e4);
    w[n++] = check_st_tensor("cq.weight_scale", LWO_DTYPE_F32, 1, sN, ws);   /* per channel: not loaded */
    w[n++] = check_st_tensor("cqi.weight", LWO_DTYPE_I8, 2, sNK, q8);
    w[n++] = check_st_tensor("cqi.comfy_quant", LWO_DTYPE_U8, 1, sj2, cq_int);
    w[n++] = check_st_tensor("i8plain.weight", LWO_DTYPE_I8, 2, sNK, q8);
    w[n++] = check_st_tensor("vec.weight", LWO_DTYPE_F32, 1, sK, wf);
    w[n++] = check_st_tensor("bbad.weight", LWO_DTYPE_F32, 2, sNK, wf);
    w[n++] = check_st_tensor("bbad.bias", LWO_DTYPE_F32, 1, sN1, wf);
    w[n++] = check_st_tensor("bint.weight", LWO_DTYPE_F32, 2, sNK, wf);
    w[n++] = check_st_tensor("bint.bias", LWO_DTYPE_I32, 1, sN, bi);
    w[n++] = check_st_tensor("i64.weight", LWO_DTYPE_I64, 2, sNK, wd);
    CHECK(check_st_write(tpath("load1.safetensors"), w, (size_t)n, NULL, NULL, 0, err, sizeof err) == LWO_SUCCESS, "write: %s", err);
    CHECK(check_st_open(tpath("load1.safetensors"), &f) == LWO_SUCCESS, "open: %s", lwo_safetensors_last_error(f));
    /* file 2: lwo int8 */
    n = 0;
    w[n++] = check_st_tensor("l.weight", LWO_DTYPE_I8, 2, sNK, q8);
    w[n++] = check_st_tensor("l.weight_scale", LWO_DTYPE_F32, 1, sN, ws);
    w[n++] = check_st_tensor("l.smooth", LWO_DTYPE_F32, 1, sK, sm);
    w[n++] = check_st_tensor("l.bias", LWO_DTYPE_F32, 1, sN, bf);
    w[n++] = check_st_tensor("ns.weight", LWO_DTYPE_I8, 2, sNK, q8);
    w[n++] = check_st_tensor("ns.weight_scale", LWO_DTYPE_F32, 1, sN, ws);
    w[n++] = check_st_tensor("z.weight", LWO_DTYPE_I8, 2, sNK, q8);
    w[n++] = check_st_tensor("z.weight_scale", LWO_DTYPE_F32, 1, sN, scales_n);
    w[n++] = check_st_tensor("z.smooth", LWO_DTYPE_F32, 1, sK, smz);
    CHECK(check_st_write(tpath("load2.safetensors"), w, (size_t)n, mk_, mv, 1, err, sizeof err) == LWO_SUCCESS, "write: %s", err);
    CHECK(check_st_open(tpath("load2.safetensors"), &g) == LWO_SUCCESS, "open: %s", lwo_safetensors_last_error(g));
    if (!f || !g || lwo_safetensors_count(f) == 0 || lwo_safetensors_count(g) == 0) { lwo_safetensors_destroy(f); lwo_safetensors_destroy(g); return; }

    /* no context: argument errors, *out cleared */
    wout = (lwo_weight *)1;
    CHECK_EQ_INT(lwo_safetensors_load_weight(NULL, f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, &wout), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(wout == NULL, "*out cleared on failure");
    wout = (lwo_weight *)1;
    CHECK_EQ_INT(lwo_safetensors_load_weight_policy(NULL, f, "bf.weight", NULL, LWO_PLACE_RESIDENT, &wout), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(wout == NULL, "*out cleared on failure (policy)");
    CHECK_EQ_INT(lwo_safetensors_load_weight(NULL, NULL, NULL, LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, NULL), LWO_ERROR_INVALID_ARGUMENT);
    {   /* a context that failed to create answers with its reason, and loads nothing */
        lwo_desc desc;
        lwo_context *ctx = NULL;
        memset(&desc, 0, sizeof desc);
        desc.driver_path = "/nonexistent/libcuda.so.1";
        desc.cache_dir = "-";
        desc.log_level = -1;
        CHECK(lwo_create(&desc, &ctx) != LWO_SUCCESS && ctx, "GPU-less create");
        if (ctx) {
            wout = (lwo_weight *)1;
            CHECK_EQ_INT(lwo_safetensors_load_weight(ctx, f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, &wout), LWO_ERROR_INVALID_ARGUMENT);
            CHECK(wout == NULL && strstr(lwo_last_error(ctx), "failed to create") != NULL, "detail: %s", lwo_last_error(ctx));
            CHECK_EQ_INT(lwo_safetensors_load_weight_policy(ctx, f, "bf.weight", NULL, LWO_PLACE_AUTO, &wout), LWO_ERROR_INVALID_ARGUMENT);
            lwo_destroy(ctx);
        }
    }

    /* policy -> format */
    CHECK(lwo_safetensors_weight_format(f, "bf.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_BF16, "keep bf16");
    CHECK(lwo_safetensors_weight_format(f, "h.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_F16, "keep f16");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_BF16, "keep f32 -> bf16");
    CHECK(lwo_safetensors_weight_format(f, "d.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_BF16, "keep f64 -> bf16");
    CHECK(lwo_safetensors_weight_format(f, "e4.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_FP8_E4M3, "keep e4m3");
    CHECK(lwo_safetensors_weight_format(f, "e5.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_FP8_E5M2, "keep e5m2");
    CHECK(lwo_safetensors_weight_format(g, "l.weight", LWO_FORMAT_KEEP, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_INT8, "keep lwo int8");
    CHECK(lwo_safetensors_weight_format(f, "i8plain.weight", LWO_FORMAT_KEEP, &fmt) == LWO_ERROR_UNSUPPORTED, "keep plain i8");
    CHECK(strstr(lwo_safetensors_last_error(f), "i8plain.weight") != NULL, "detail: %s", lwo_safetensors_last_error(f));
    CHECK(lwo_safetensors_weight_format(f, "i64.weight", LWO_FORMAT_KEEP, &fmt) == LWO_ERROR_UNSUPPORTED, "keep i64");
    CHECK(lwo_safetensors_weight_format(f, "missing.weight", LWO_FORMAT_KEEP, &fmt) == LWO_ERROR_NOT_FOUND, "keep missing");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_BF16, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_BF16, "bf16");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_F16, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_F16, "f16");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_FP8_E4M3, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_FP8_E4M3, "e4m3");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_FP8_E5M2, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_FP8_E5M2, "e5m2");
    CHECK(lwo_safetensors_weight_format(f, "e4.weight", LWO_FORMAT_INT8, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_INT8, "int8");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_F32, &fmt) == LWO_ERROR_UNSUPPORTED, "f32 is refused");
    CHECK(strstr(lwo_safetensors_last_error(f), "f.weight") && strstr(lwo_safetensors_last_error(f), "f32"), "detail: %s", lwo_safetensors_last_error(f));
    CHECK(lwo_safetensors_weight_format(f, "f.weight", LWO_FORMAT_FP8_E4M3_W8A8, &fmt) == LWO_SUCCESS && fmt == LWO_FORMAT_FP8_E4M3_W8A8, "e4m3 W8A8");
    CHECK(lwo_safetensors_weight_format(f, "f.weight", (lwo_format)42, &fmt) == LWO_ERROR_INVALID_ARGUMENT, "bad store format");
    CHECK(lwo_safetensors_weight_format(f, NULL, LWO_FORMAT_KEEP, &fmt) == LWO_ERROR_INVALID_ARGUMENT, "NULL name");
    CHECK(lwo_safetensors_weight_format(NULL, "f.weight", LWO_FORMAT_KEEP, &fmt) == LWO_ERROR_INVALID_ARGUMENT, "NULL file");

    /* plain bf16: as it is; zero copy exactly when streamable and K % 64 == 0 */
    if (prep(f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const lwo_safetensors_tensor *t = lwo_safetensors_find(f, "bf.weight"), *b = lwo_safetensors_find(f, "bf.bias");
        CHECK(p.zero_copy && p.d.borrow_host && p.d.data == t->data && p.d.data_dtype == LWO_DTYPE_BF16, "bf16 streamed: zero copy");
        CHECK(p.region && (const uint8_t *)t->data >= p.region && (const uint8_t *)t->data + t->bytes <= p.region + p.region_bytes, "the region holds the tensor");
        CHECK(p.d.rows == N && p.d.cols == K && p.d.format == LWO_FORMAT_BF16 && p.d.placement == LWO_PLACE_STREAMED, "desc shape");
        CHECK(p.d.bias == b->data && p.d.bias_dtype == LWO_DTYPE_BF16 && p.bias == b, "bias attached as it is");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &p, LWO_SUCCESS)) { CHECK(p.zero_copy, "bf16 auto: zero copy"); lwo__st_prep_free(&p); }
    /* KEEP loads as the file holds it; F32 is no weight's format */
    if (prep(f, "bf.weight", LWO_FORMAT_KEEP, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(p.zero_copy && p.d.format == LWO_FORMAT_BF16, "bf16 kept: zero copy as BF16 (%s)", lwo_format_name(p.d.format));
        lwo__st_prep_free(&p);
    }
    if (prep(f, "e4.weight", LWO_FORMAT_KEEP, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(p.zero_copy && p.d.format == LWO_FORMAT_FP8_E4M3 && p.d.scale == 0.5f, "e4m3 kept: zero copy as FP8_E4M3 (%s)", lwo_format_name(p.d.format));
        lwo__st_prep_free(&p);
    }
    prep(f, "f.weight", LWO_FORMAT_F32, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    if (prep(f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, &p, LWO_SUCCESS)) { CHECK(!p.zero_copy && !p.d.borrow_host, "resident: no borrow"); lwo__st_prep_free(&p); }
    if (prep(f, "bf100.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(!p.zero_copy && p.d.data == lwo_safetensors_find(f, "bf100.weight")->data && !p.d.bias, "K = 100: no zero copy, no bias");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "bf.weight", LWO_FORMAT_INT8, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(!p.zero_copy && p.d.data_dtype == LWO_DTYPE_BF16 && !p.dequantized, "bf16 -> int8: quantized on the GPU");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "h.weight", LWO_FORMAT_F16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) { CHECK(p.zero_copy && p.d.data_dtype == LWO_DTYPE_F16, "f16 zero copy"); lwo__st_prep_free(&p); }
    if (prep(f, "h.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) { CHECK(!p.zero_copy, "f16 -> bf16 is a conversion"); lwo__st_prep_free(&p); }
    if (prep(f, "f.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(!p.zero_copy && p.d.data_dtype == LWO_DTYPE_F32 && p.d.bias_dtype == LWO_DTYPE_F32, "f32 -> bf16 on the GPU");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "d.weight", LWO_FORMAT_BF16, LWO_PLACE_RESIDENT, &p, LWO_SUCCESS)) {
        const float *v = (const float *)p.d.data, *bv = (const float *)p.d.bias;
        for (bad = 0, i = 0; i < N * K; i++) if (v[i] != (float)wd[i]) bad++;
        for (i = 0; i < N; i++) if (bv[i] != (float)bd[i]) bad++;
        CHECK(bad == 0 && p.d.data_dtype == LWO_DTYPE_F32 && p.owned_data && p.owned_bias && !p.dequantized, "f64 -> f32 on the CPU: %d wrong", bad);
        lwo__st_prep_free(&p);
    }
    /* scaled fp8 */
    if (prep(f, "e4.weight", LWO_FORMAT_FP8_E4M3, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(p.zero_copy && p.d.data_dtype == LWO_DTYPE_F8_E4M3 && p.d.scale == 0.5f && p.d.bias_dtype == LWO_DTYPE_F32, "e4m3 zero copy with its scale");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "e4.weight", LWO_FORMAT_FP8_E4M3_W8A8, LWO_PLACE_AUTO, &p, LWO_SUCCESS)) {
        CHECK(p.zero_copy && p.d.scale == 0.5f && !p.d.row_scales, "e4m3 -> W8A8: as it is, the scale on every row");
        lwo__st_prep_free(&p);
    }
    if (prep(f, "e4.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const float *v = (const float *)p.d.data;
        for (bad = 0, i = 0; i < N * K; i++) if (v[i] != lwo_ref_fp8_to_f32(w8[i], LWO_DTYPE_F8_E4M3) * 0.5f) bad++;
        CHECK(bad == 0 && !p.zero_copy && p.dequantized && p.d.data_dtype == LWO_DTYPE_F32 && p.d.scale == 0.0f, "e4m3 -> bf16 dequantized: %d wrong", bad);
        lwo__st_prep_free(&p);
    }
    if (prep(f, "e5.weight", LWO_FORMAT_FP8_E5M2, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) { CHECK(p.zero_copy && p.d.data_dtype == LWO_DTYPE_F8_E5M2, "e5m2 zero copy"); lwo__st_prep_free(&p); }
    if (prep(f, "e5.weight", LWO_FORMAT_FP8_E4M3, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const float *v = (const float *)p.d.data;
        for (bad = 0, i = 0; i < N * K; i++) if (v[i] != lwo_ref_fp8_to_f32(w5[i], LWO_DTYPE_F8_E5M2) * 0.5f) bad++;
        CHECK(bad == 0 && p.dequantized && !p.zero_copy, "e5m2 -> e4m3 dequantized first: %d wrong", bad);
        lwo__st_prep_free(&p);
    }
    prep(f, "e4zero.weight", LWO_FORMAT_FP8_E4M3, LWO_PLACE_STREAMED, &p, LWO_ERROR_BAD_FILE);
    prep(f, "e4neg.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_BAD_FILE);
    prep(f, "cq.weight", LWO_FORMAT_FP8_E4M3, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    CHECK(strstr(lwo_safetensors_last_error(f), "cq.weight_scale") != NULL, "per-channel comfy scale named: %s", lwo_safetensors_last_error(f));
    prep(f, "cqi.weight", LWO_FORMAT_INT8, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    CHECK(strstr(lwo_safetensors_last_error(f), "int8_blockwise") != NULL, "comfy format named: %s", lwo_safetensors_last_error(f));
    prep(f, "i8plain.weight", LWO_FORMAT_INT8, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    prep(f, "i64.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    prep(f, "vec.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_INVALID_ARGUMENT);
    prep(f, "bbad.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_BAD_FILE);
    prep(f, "bint.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_UNSUPPORTED);
    prep(f, "missing.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_ERROR_NOT_FOUND);
    prep(f, "bf.weight", (lwo_format)99, LWO_PLACE_STREAMED, &p, LWO_ERROR_INVALID_ARGUMENT);
    prep(f, "bf.weight", LWO_FORMAT_BF16, (lwo_placement)7, &p, LWO_ERROR_INVALID_ARGUMENT);
    {   /* a file that failed to open */
        static const uint8_t junk[16] = { 4, 0, 0, 0, 0, 0, 0, 0, '{', '}', 'x', 'y' };
        lwo_safetensors *bad_f = NULL;
        CHECK(check_st_open_memory(junk, sizeof junk, &bad_f) != LWO_SUCCESS && bad_f, "junk is refused");
        if (bad_f) {
            CHECK_EQ_INT(lwo__st_weight_prep(bad_f, "bf.weight", LWO_FORMAT_BF16, LWO_PLACE_AUTO, &p), LWO_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(lwo_safetensors_last_error(bad_f), "did not open") != NULL, "detail: %s", lwo_safetensors_last_error(bad_f));
            lwo__st_prep_free(&p);
            lwo_safetensors_destroy(bad_f);
        }
    }
    /* lwo int8 */
    if (prep(g, "l.weight", LWO_FORMAT_INT8, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const lwo_safetensors_tensor *t = lwo_safetensors_find(g, "l.weight");
        CHECK(p.zero_copy && p.d.data == t->data && p.d.data_dtype == LWO_DTYPE_I8, "lwo int8 zero copy");
        CHECK(p.d.row_scales && memcmp(p.d.row_scales, ws, sizeof ws) == 0 && ((uintptr_t)p.d.row_scales & 3) == 0, "row scales (aligned copy)");
        CHECK(p.d.smooth && memcmp(p.d.smooth, sm, sizeof sm) == 0, "smooth (aligned copy)");
        CHECK(p.d.bias && p.d.bias_dtype == LWO_DTYPE_F32, "bias");
        lwo__st_prep_free(&p);
    }
    if (prep(g, "l.weight", LWO_FORMAT_INT8, LWO_PLACE_RESIDENT, &p, LWO_SUCCESS)) { CHECK(!p.zero_copy && p.d.smooth, "resident int8: copied"); lwo__st_prep_free(&p); }
    if (prep(g, "l.weight", LWO_FORMAT_BF16, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const float *v = (const float *)p.d.data;
        int k;
        for (bad = 0, i = 0; i < N; i++) for (k = 0; k < K; k++) if (v[i * K + k] != ((float)q8[i * K + k] * ws[i]) / sm[k]) bad++;
        CHECK(bad == 0 && p.dequantized && !p.d.smooth && !p.d.row_scales, "int8 -> bf16: (q * s) / smooth, %d wrong", bad);
        lwo__st_prep_free(&p);
    }
    if (prep(g, "l.weight", LWO_FORMAT_FP8_E4M3_W8A8, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        CHECK(p.dequantized && p.d.smooth && memcmp(p.d.smooth, sm, sizeof sm) == 0 && p.d.data_dtype == LWO_DTYPE_F32, "int8 -> fp8 W8A8 keeps the smooth");
        lwo__st_prep_free(&p);
    }
    if (prep(g, "ns.weight", LWO_FORMAT_FP8_E4M3, LWO_PLACE_STREAMED, &p, LWO_SUCCESS)) {
        const float *v = (const float *)p.d.data;
        for (bad = 0, i = 0; i < N * K; i++) if (v[i] != (float)q8[i] * ws[i / K]) bad++;
        CHECK(bad == 0 && !p.d.smooth && !p.d.bias, "int8 without smooth -> fp8: q * s, %d wrong", bad);
        lwo__st_prep_free(&p);
    }
    prep(g, "z.weight", LWO_FORMAT_INT8, LWO_PLACE_STREAMED, &p, LWO_ERROR_BAD_FILE);
    CHECK(strstr(lwo_safetensors_last_error(g), "z.smooth") && strstr(lwo_safetensors_last_error(g), "element 3 "), "zero smooth named: %s", lwo_safetensors_last_error(g));
    lwo_safetensors_destroy(f);
    lwo_safetensors_destroy(g);
}

/* ---- hostile inputs (issue 24): work and memory bounded by the file ------------------------- */
/* CPU time: the limits below are on work done, which a busy machine does not change */
static double now_s(void) {
#ifdef _WIN32
    return (double)clock() / CLOCKS_PER_SEC;
#else
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
#endif
}
/* A metadata-only header of n keys "k<i>" with values "v<i>", in ascending or descending i; with
   dup, one more entry repeats "k0" at the very end. */
static char *meta_header(size_t n, int desc, int dup, size_t *len) {
    size_t k = 0, i;
    char *h = (char *)malloc(64 + n * 48);
    k += (size_t)sprintf(h + k, "{\"__metadata__\":{");
    for (i = 0; i < n; i++) {
        unsigned long long j = (unsigned long long)(desc ? n - 1 - i : i);
        k += (size_t)sprintf(h + k, "%s\"k%llu\":\"v%llu\"", i ? "," : "", j, j);
    }
    if (dup) k += (size_t)sprintf(h + k, ",\"k0\":\"again\"");
    k += (size_t)sprintf(h + k, "}}");
    *len = k;
    return h;
}
static lwo_safetensors *open_header(const char *h, size_t hlen, size_t ndata, uint8_t **keep, lwo_result want, const char *label) {
    size_t n;
    lwo_safetensors *f = NULL;
    lwo_result r;
    *keep = mk(h, hlen, ndata, &n);
    r = check_st_open_memory(*keep, n, &f);
    CHECK(r == want, "%s: %s (%s)", label, lwo_result_string(r), lwo_safetensors_last_error(f));
    return f;
}

/* Shapes of no elements with one enormous dimension: INT8 conversion must neither allocate nor
   loop per row (2^36 rows asked malloc for 256 GiB of row scales; 2^30 rows looped for seconds). */
static void test_hostile_shapes(void) {
    static const unsigned long long rows[] = { 2, 1ull << 30, 1ull << 36, 1ull << 62, 0x7fffffffffffffffull };
    /* every conversion target but INT8 (which needs a scale per row) */
    static const lwo_format empty_ok[] = { LWO_FORMAT_KEEP, LWO_FORMAT_BF16, LWO_FORMAT_F16, LWO_FORMAT_F32, LWO_FORMAT_FP8_E4M3,
                                           LWO_FORMAT_FP8_E5M2 };
    char h[256], want[64];
    size_t i;
    double t0 = now_s();
    check_alloc_biggest = 0;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint8_t *b;
        lwo_safetensors *f;
        const lwo_safetensors_tensor *t;
        lwo_safetensors_converted c;
        lwo__st_prep p;
        lwo_format lf;
        float sc[1];
        int fmt;
        snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"F32\",\"shape\":[%llu,0],\"data_offsets\":[0,0]}}", rows[i]);
        snprintf(want, sizeof want, "[%llu, 0]", rows[i]);
        f = open_header(h, strlen(h), 0, &b, LWO_SUCCESS, want);
        t = lwo_safetensors_find(f, "w");
        CHECK(t && t->numel == 0 && t->bytes == 0, "%s: no elements", want);
        if (!t) { lwo_safetensors_destroy(f); free(b); continue; }
        CHECK(check_st_convert(t, LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_ERROR_BAD_FILE && !c.data && !c.owned_scales,
              "%s -> int8 refused: %s", want, c.error);
        CHECK(strstr(c.error, "\"w\"") && strstr(c.error, want) && strstr(c.error, "row scales"), "the message names the tensor and its shape: %s", c.error);
        CHECK(check_st_convert(t, LWO_FORMAT_INT8, sc, 0, sc, 1, &c) == LWO_ERROR_BAD_FILE, "%s: refused with the caller's buffers too", want);
        for (fmt = 0; fmt < (int)(sizeof empty_ok / sizeof *empty_ok); fmt++) {
            CHECK(check_st_convert(t, empty_ok[fmt], NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.bytes == 0 && !c.error[0],
                  "%s -> %s: nothing to convert (%s)", want, lwo_format_name(empty_ok[fmt]), c.error);
            lwo_safetensors_converted_destroy(&c);
        }
        CHECK(lwo__st_weight_prep(f, "w", LWO_FORMAT_INT8, LWO_PLACE_AUTO, &p) == LWO_ERROR_INVALID_ARGUMENT &&
              strstr(lwo_safetensors_last_error(f), want), "%s: the loader refuses it by shape: %s", want, lwo_safetensors_last_error(f));
        lwo__st_prep_free(&p);
        CHECK(lwo_safetensors_weight_format(f, "w", LWO_FORMAT_KEEP, &lf) == LWO_SUCCESS && lf == LWO_FORMAT_BF16, "%s: KEEP is bf16", want);
        lwo_safetensors_destroy(f);
        free(b);
    }
    CHECK(now_s() - t0 < 1.0, "the enormous empty shapes took %.2f s", now_s() - t0);
    CHECK(check_alloc_biggest <= 16384, "no allocation sized by a shape (the largest was %llu bytes)", (unsigned long long)check_alloc_biggest);
    {   /* the edges: one empty row is one scale; no rows, no scales; 1-D is one row */
        const char *hs = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,0],\"data_offsets\":[0,0]},\"c\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
                         "\"d\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]},\"e\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
        uint8_t *b;
        lwo_safetensors *f = open_header(hs, strlen(hs), 16, &b, LWO_SUCCESS, "edges");
        lwo_safetensors_converted c;
        CHECK(check_st_convert(lwo_safetensors_find(f, "a"), LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_SUCCESS &&
              c.rows == 1 && c.cols == 0 && c.row_scales && c.row_scales[0] == 1.0f, "[1, 0] -> one row of scale 1: %s", c.error);
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(lwo_safetensors_find(f, "c"), LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.rows == 0, "[0, 5] -> no rows");
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(lwo_safetensors_find(f, "d"), LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.rows == 1, "[0] -> one row");
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(lwo_safetensors_find(f, "e"), LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_SUCCESS && c.rows == 2 && c.cols == 2, "[2, 2]");
        lwo_safetensors_converted_destroy(&c);
        CHECK(check_st_convert(NULL, LWO_FORMAT_INT8, NULL, 0, NULL, 0, &c) == LWO_ERROR_INVALID_ARGUMENT && c.error[0], "NULL tensor says why");
        CHECK(check_st_convert(lwo_safetensors_find(f, "e"), (lwo_format)99, NULL, 0, NULL, 0, &c) == LWO_ERROR_INVALID_ARGUMENT &&
              strstr(c.error, "99"), "bad target says why: %s", c.error);
        lwo_safetensors_destroy(f);
        free(b);
    }
}

/* Many keys: 200,000 metadata keys in either order, a duplicate found only at the end, 50,000
   tensors, and the writer with 200,000 keys (its value lookup was quadratic). */
static void test_hostile_keys(void) {
    enum { NK = 200000, NT = 50000 };
    size_t len, i, k;
    int desc;
    char *h;
    uint8_t *b;
    lwo_safetensors *f;
    double t0;
    for (desc = 0; desc < 2; desc++) {
        h = meta_header(NK, desc, 0, &len);
        t0 = now_s();
        f = open_header(h, len, 0, &b, LWO_SUCCESS, desc ? "200k keys, descending" : "200k keys");
        CHECK(now_s() - t0 < 1.0, "opening %d metadata keys took %.2f s", NK, now_s() - t0);
        CHECK(lwo_safetensors_metadata_count(f) == NK, "all keys");
        CHECK(lwo_safetensors_metadata_find(f, "k0") && strcmp(lwo_safetensors_metadata_find(f, "k0"), "v0") == 0 &&
              lwo_safetensors_metadata_find(f, "k199999") && strcmp(lwo_safetensors_metadata_find(f, "k199999"), "v199999") == 0, "lookups");
        for (i = 1; i < lwo_safetensors_metadata_count(f); i++)
            if (strcmp(lwo_safetensors_metadata_key(f, i - 1), lwo_safetensors_metadata_key(f, i)) >= 0) break;
        CHECK(i == NK, "keys in order (broken at %llu)", (unsigned long long)i);
        lwo_safetensors_destroy(f);
        free(b);
        free(h);
    }
    h = meta_header(NK, 1, 1, &len);
    f = open_header(h, len, 0, &b, LWO_ERROR_BAD_FILE, "a duplicate key at the end");
    CHECK(f && strstr(lwo_safetensors_last_error(f), "duplicate metadata key \"k0\""), "names the key: %s", lwo_safetensors_last_error(f));
    lwo_safetensors_destroy(f); free(b); free(h);
    h = (char *)malloc(16 + (size_t)NT * 64);
    k = (size_t)sprintf(h, "{");
    for (i = 0; i < NT; i++)
        k += (size_t)sprintf(h + k, "%s\"t%llu\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", (unsigned long long)(NT - i));
    k += (size_t)sprintf(h + k, "}");
    t0 = now_s();
    f = open_header(h, k, 0, &b, LWO_SUCCESS, "50k tensors");
    CHECK(now_s() - t0 < 1.0 && lwo_safetensors_count(f) == NT && lwo_safetensors_find(f, "t1") && lwo_safetensors_find(f, "t50000"),
          "50k empty tensors: %.2f s", now_s() - t0);
    lwo_safetensors_destroy(f); free(b); free(h);
    {   /* the writer: 200,000 keys given in descending order, each value still beside its key */
        const char **ks = (const char **)malloc(NK * sizeof *ks), **vs = (const char **)malloc(NK * sizeof *vs);
        char *pool = (char *)malloc((size_t)NK * 24), err[256];
        size_t at = 0, bad = 0;
        for (i = 0; i < NK; i++) {
            ks[i] = pool + at; at += (size_t)sprintf(pool + at, "k%llu", (unsigned long long)(NK - 1 - i)) + 1;
            vs[i] = pool + at; at += (size_t)sprintf(pool + at, "v%llu", (unsigned long long)(NK - 1 - i)) + 1;
        }
        t0 = now_s();
        CHECK(check_st_write(tpath("keys.safetensors"), NULL, 0, ks, vs, NK, err, sizeof err) == LWO_SUCCESS, "%s", err);
        CHECK(now_s() - t0 < 2.0, "writing %d metadata keys took %.2f s", NK, now_s() - t0);
        CHECK(check_st_open(tpath("keys.safetensors"), &f) == LWO_SUCCESS && lwo_safetensors_metadata_count(f) == NK, "%s", lwo_safetensors_last_error(f));
        for (i = 0; i < lwo_safetensors_metadata_count(f); i++)
            if (strcmp(lwo_safetensors_metadata_key(f, i) + 1, lwo_safetensors_metadata_value(f, i) + 1) != 0) bad++;
        CHECK(bad == 0, "every value beside its key (%llu wrong)", (unsigned long long)bad);
        lwo_safetensors_destroy(f);
        free(ks); free(vs); free(pool);
    }
}

/* lwo's heap sort against qsort: element sizes below, at and above its 64-byte swap chunk, inputs
   random (with repeats), sorted, reversed and constant. Keys repeat with identical payloads, so
   the sorted arrays must match byte for byte. */
static size_t sort_es;
static int cmp_key(const void *a, const void *b) {
    uint32_t x, y;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    return x < y ? -1 : x > y ? 1 : 0;
}
static void test_sort(void) {
    static const size_t sizes[3] = { 4, 7, 100 }, counts[8] = { 0, 1, 2, 3, 17, 64, 1000, 4097 };
    size_t si, ci, i, bad = 0;
    int pat;
    for (si = 0; si < 3; si++)
        for (ci = 0; ci < 8; ci++)
            for (pat = 0; pat < 4; pat++) {
                size_t es = sort_es = sizes[si], n = counts[ci];
                unsigned char *a = (unsigned char *)malloc(n * es + 1), *q = (unsigned char *)malloc(n * es + 1);
                for (i = 0; i < n; i++) {
                    uint32_t key = pat == 0 ? (uint32_t)(check_rand_u64() % (n / 3 + 1)) : pat == 1 ? (uint32_t)i : pat == 2 ? (uint32_t)(n - i) : 7u;
                    size_t j;
                    memcpy(a + i * es, &key, 4);
                    for (j = 4; j < es; j++) a[i * es + j] = (unsigned char)(key * 31 + j);
                }
                memcpy(q, a, n * es);
                lwo__st_sort(a, n, es, cmp_key);
                qsort(q, n, es, cmp_key);
                if (n && memcmp(a, q, n * es) != 0) bad++;
                free(a);
                free(q);
            }
    CHECK(bad == 0, "heap sort equals qsort (%llu of 96 differ)", (unsigned long long)bad);
}

/* A 64 KiB weight name: its lwo int8 companions and bias are found (a 1 KiB buffer used to drop
   them silently). */
static void test_hostile_names(void) {
    enum { L = 65536 };
    char *nm[4], err[256];
    static const char *const suffix[4] = { ".weight", ".weight_scale", ".smooth", ".bias" };
    int8_t q[4] = { 1, -2, 3, -4 };
    float ws[2] = { 0.5f, 0.25f }, sm[2] = { 1.0f, 2.0f }, bias[2] = { 1.0f, -1.0f };
    uint64_t s22[2] = { 2, 2 }, s2[1] = { 2 };
    lwo_safetensors_write_tensor w[4];
    const char *k[1] = { "lwo.quant" }, *v[1] = { LWO_SAFETENSORS_LWO_INT8_V1 };
    lwo_safetensors *f = NULL;
    lwo_safetensors_quant qi;
    lwo__st_prep p;
    int i;
    for (i = 0; i < 4; i++) {
        nm[i] = (char *)malloc(L + 16);
        memset(nm[i], 'n', L);
        strcpy(nm[i] + L, suffix[i]);
    }
    w[0] = check_st_tensor(nm[0], LWO_DTYPE_I8, 2, s22, q);
    w[1] = check_st_tensor(nm[1], LWO_DTYPE_F32, 1, s2, ws);
    w[2] = check_st_tensor(nm[2], LWO_DTYPE_F32, 1, s2, sm);
    w[3] = check_st_tensor(nm[3], LWO_DTYPE_F32, 1, s2, bias);
    CHECK(check_st_write(tpath("long.safetensors"), w, 4, k, v, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
    CHECK(check_st_open(tpath("long.safetensors"), &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
    CHECK(lwo_safetensors_get_quant_info(f, nm[0], &qi) == LWO_SUCCESS && qi.convention == LWO_CONVENTION_LWO_INT8 && qi.weight_scale && qi.smooth,
          "a 64 KiB name keeps its int8 convention (%d)", (int)qi.convention);
    if (prep(f, nm[0], LWO_FORMAT_INT8, LWO_PLACE_AUTO, &p, LWO_SUCCESS)) {
        CHECK(p.bias && p.d.bias && p.d.row_scales && p.d.smooth, "and its bias");
        lwo__st_prep_free(&p);
    }
    CHECK(lwo_safetensors_get_quant_info(f, "nnn.weight", &qi) == LWO_ERROR_NOT_FOUND && strlen(lwo_safetensors_last_error(f)) < 400, "short message");
    lwo_safetensors_destroy(f);
    {   /* an error about a long name quotes 300 bytes of it */
        size_t n;
        char *h = (char *)malloc(L + 128);
        uint8_t *b;
        sprintf(h, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", nm[0]);
        b = mk(h, strlen(h), 4, &n);
        CHECK(check_st_open_memory(b, n, &f) == LWO_ERROR_BAD_FILE && strlen(lwo_safetensors_last_error(f)) < 700, "long name, short message");
        lwo_safetensors_destroy(f);
        free(b);
        free(h);
    }
    for (i = 0; i < 4; i++) free(nm[i]);
}

#ifndef _WIN32
/* Only regular files open. Opening a FIFO used to block forever: the alarm turns a hang into a
   failed run that says so. */
static void on_alarm(int sig) {
    static const char msg[] = "FAIL test_special_files: lwo_safetensors_open blocked for 30 s (on a FIFO?)\n";
    (void)sig;
    if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(2);
}
static void test_special_files(void) {
    lwo_safetensors *f = NULL;
    char fifo[512], link[512], dlink[512];
    snprintf(fifo, sizeof fifo, "%s", tpath("fifo"));
    snprintf(link, sizeof link, "%s", tpath("fifo-link"));
    snprintf(dlink, sizeof dlink, "%s", tpath("dir-link"));
    fflush(stdout);
    signal(SIGALRM, on_alarm);
    alarm(30);
    CHECK(mkfifo(fifo, 0600) == 0 && symlink(fifo, link) == 0 && symlink(tmpdir, dlink) == 0, "make the special files");
    CHECK(check_st_open(fifo, &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "a FIFO") && strstr(lwo_safetensors_last_error(f), fifo),
          "a FIFO is refused, not waited on: %s", lwo_safetensors_last_error(f));
    lwo_safetensors_destroy(f);
    CHECK(check_st_open(link, &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "a FIFO"), "a link to a FIFO: %s", lwo_safetensors_last_error(f));
    lwo_safetensors_destroy(f);
    CHECK(check_st_open(dlink, &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "a directory"), "a link to a directory: %s", lwo_safetensors_last_error(f));
    lwo_safetensors_destroy(f);
    if (access("/dev/null", R_OK) == 0) {
        CHECK(check_st_open("/dev/null", &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "a character device"), "/dev/null: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
    }
    {
        const char *paths[2];
        paths[0] = tpath("long.safetensors"); paths[1] = fifo;
        CHECK(check_st_open_many(paths, 2, &f) == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "a FIFO"), "a FIFO among shards: %s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
    }
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

/* The file under an open mapping. The size is checked at open only (see LIMITS in lwo.h): a file
   that shrinks makes a read of the lost pages raise SIGBUS, which is the caller's to handle; what
   open decoded (names, shapes, metadata) stays usable; a file replaced by rename leaves the open
   mapping intact. */
static sigjmp_buf bus_jump;
static void on_sigbus(int sig) { (void)sig; siglongjmp(bus_jump, 1); }
static void test_shrink(void) {
    enum { BIG = 256 << 10 };
    uint8_t *big = (uint8_t *)malloc(BIG);
    float two[2] = { 1.5f, -2.5f };
    uint64_t sb[1] = { BIG }, s2[1] = { 2 };
    lwo_safetensors_write_tensor w[2];
    const char *k[1] = { "note" }, *v[1] = { "kept" };
    char err[256];
    const char *path = tpath("shrink.safetensors");
    lwo_safetensors *f = NULL, *g = NULL;
    const lwo_safetensors_tensor *t;
    lwo_safetensors_quant qi;
    int st = 0;
    pid_t pid;
    memset(big, 0x5a, BIG);
    w[0] = check_st_tensor("big", LWO_DTYPE_U8, 1, sb, big);
    w[1] = check_st_tensor("small", LWO_DTYPE_F32, 1, s2, two);
    CHECK(check_st_write(path, w, 2, k, v, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
    CHECK(check_st_open(path, &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
    t = lwo_safetensors_find(f, "big");
    CHECK(t && t->offset + t->bytes > 8192, "big lies past the first pages");
    CHECK(truncate(path, 4096) == 0, "truncate");
    /* what open decoded lives in lwo's memory */
    CHECK(lwo_safetensors_find(f, "big") == t && lwo_safetensors_count(f) == 2 && t->shape[0] == BIG, "lookups after the shrink");
    CHECK(lwo_safetensors_metadata_find(f, "note") && strcmp(lwo_safetensors_metadata_find(f, "note"), "kept") == 0, "metadata after the shrink");
    CHECK(lwo_safetensors_get_quant_info(f, "big", &qi) == LWO_SUCCESS, "quant_info reads no tensor data");
    fflush(stdout);
    pid = fork();
    if (pid == 0) {   /* no handler: reading a lost page kills with SIGBUS */
        volatile uint8_t x;
        signal(SIGBUS, SIG_DFL);
        x = ((const volatile uint8_t *)t->data)[t->bytes - 1];
        (void)x;
        _exit(0);
    }
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "a read past the new end is SIGBUS (status 0x%x)", st);
    pid = fork();
    if (pid == 0) {   /* the caller's recipe: a handler that jumps out of the read */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigbus;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
        if (sigsetjmp(bus_jump, 1)) _exit(7);
        { volatile uint8_t x = ((const volatile uint8_t *)t->data)[t->bytes - 1]; (void)x; }
        _exit(0);
    }
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7, "a caller's SIGBUS handler catches it (status 0x%x)", st);
    CHECK(check_st_open(path, &g) == LWO_ERROR_BAD_FILE && strstr(lwo_safetensors_last_error(g), "past the end"), "reopened, the shrunk file is refused: %s",
          lwo_safetensors_last_error(g));
    lwo_safetensors_destroy(g);
    lwo_safetensors_destroy(f);
    /* replaced by rename while open: the old mapping keeps the old bytes */
    CHECK(check_st_write(path, w, 2, k, v, 1, err, sizeof err) == LWO_SUCCESS, "%s", err);
    CHECK(check_st_open(path, &f) == LWO_SUCCESS, "%s", lwo_safetensors_last_error(f));
    memset(big, 0xa5, BIG);
    CHECK(check_st_write(path, w, 2, k, v, 1, err, sizeof err) == LWO_SUCCESS, "rewrite: %s", err);
    t = lwo_safetensors_find(f, "big");
    CHECK(t && ((const uint8_t *)t->data)[0] == 0x5a && ((const uint8_t *)t->data)[BIG - 1] == 0x5a, "the open file still reads its own bytes");
    CHECK(check_st_open(path, &g) == LWO_SUCCESS && ((const uint8_t *)lwo_safetensors_find(g, "big")->data)[0] == 0xa5, "a new open reads the new file");
    lwo_safetensors_destroy(g);
    lwo_safetensors_destroy(f);
    free(big);
}

#endif /* _WIN32 */

int main(void) {
    check_seed("test_safetensors");
    if (!check_tmpdir(tmpdir, sizeof tmpdir, "lwo-st-test")) return 1;
    test_malformed();
    test_roundtrip();
    test_policy();
    test_codecs();
    test_convert();
    test_quant();
    test_load();
    test_hostile_shapes();
    test_hostile_keys();
    test_sort();
    test_hostile_names();
#ifndef _WIN32
    test_special_files();
    test_shrink();
#endif
    CHECK(check_alloc_refused == 0, "%llu allocations asked lwo's allocator for more than 256 MiB (the largest: %llu bytes)",
          (unsigned long long)check_alloc_refused, (unsigned long long)check_alloc_biggest);
#ifndef _WIN32
    {   /* the whole run, hostile cases and the 100 MiB header buffer of test_malformed included */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);   /* ru_maxrss in KiB on Linux */
        CHECK(ru.ru_maxrss < 256L * 1024, "peak RSS %ld MiB is over 256 MiB", ru.ru_maxrss / 1024);
        printf("peak RSS %ld MiB\n", ru.ru_maxrss / 1024);
    }
#endif
    check_rmtree(tmpdir);
    return CHECK_SUMMARY();
}

/* test_platform.c - lwo.h's platform section (section 1), the same checks on every OS: natively
   on Linux, and cross-compiled with mingw-w64 and run under Wine by `make test-windows`, where the
   Win32 bodies run. UTF-8 paths and environment values, whole-file reads, temp-and-rename writes,
   folders and listings, the cubin cache's store / lookup / validate and a module built through
   it, read-only mapping (regular files only; a sparse file over 4 GiB), shared libraries, and the
   NVRTC search's failure message. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"
#ifdef _WIN32
#include <winioctl.h>
#else
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

static char tmpdir[512];
static const char *tpath(const char *name) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* A name no single ANSI code page holds (Latin, Cyrillic, CJK): on Windows it only survives the
   round trip if every call widens it from UTF-8 and narrows what comes back. */
#define UNAME "\xc3\xbc" "ber-\xd0\xb6-\xe5\x90\x8d"

static int log_warnings, log_progress;
static char log_last_progress[512];
static void count_log(void *user, lwo_log_level level, const char *msg) {
    (void)user;
    if (level == LWO_LOG_WARN) log_warnings++;
    if (level == LWO_LOG_PROGRESS) { log_progress++; snprintf(log_last_progress, sizeof log_last_progress, "%s", msg); }
}

/* The names in a folder other than . and .., joined by '|', sorted. */
static void list_dir(const char *dir, char *out, size_t cap) {
    char names[32][256];
    int n = 0, i, j;
    lwo__dir d;
    const char *e;
    out[0] = 0;
    if (!lwo__dir_open(&d, dir)) { snprintf(out, cap, "(cannot list)"); return; }
    while ((e = lwo__dir_next(&d)) != NULL)
        if (strcmp(e, ".") && strcmp(e, "..") && n < 32 && strlen(e) < sizeof names[0]) memcpy(names[n++], e, strlen(e) + 1);
    lwo__dir_close(&d);
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[256];
            memcpy(t, names[j], sizeof t); memcpy(names[j], names[j - 1], sizeof t); memcpy(names[j - 1], t, sizeof t);
        }
    for (i = 0; i < n; i++) lwo__appendf(out, cap, "%s%s", i ? "|" : "", names[i]);
}

static void test_basics(void) {
    double t0 = lwo__now_ms(), t1 = lwo__now_ms();
    uint64_t ps = lwo__page_size(), ram = lwo__phys_ram();
    char v[64];
    CHECK(t1 >= t0 && t0 > 0, "a monotonic clock: %f then %f", t0, t1);
    CHECK(ps >= 4096 && (ps & (ps - 1)) == 0, "page size %llu", (unsigned long long)ps);
    CHECK(ram >= ((uint64_t)256 << 20), "physical RAM %llu bytes", (unsigned long long)ram);
    CHECK(lwo__pid() != 0, "a process id");
    check_setenv("LWO_TEST_VAR", UNAME);
    CHECK(lwo__env("LWO_TEST_VAR", v, sizeof v) && strcmp(v, UNAME) == 0, "a UTF-8 environment value round trips: '%s'", v);
    CHECK(!lwo__env("LWO_TEST_VAR", v, 4), "a value that does not fit reads as unset");
    check_unsetenv("LWO_TEST_VAR");
    CHECK(!lwo__env("LWO_TEST_VAR", v, sizeof v), "an unset variable");
}

static void test_files(void) {
    const char *dir = tpath("a/" UNAME "/c");
    char file[1024], listing[2048], err[1024];
    unsigned char *data = NULL;
    size_t size = 0;
    lwo__wfile f;
    snprintf(file, sizeof file, "%s/f-%s.bin", dir, UNAME);
    CHECK(lwo__mkdir_p(dir), "mkdir -p %s", dir);
    CHECK(lwo__mkdir_p(dir), "mkdir -p of a folder that exists");
    CHECK(lwo__write_file_atomic(file, "hello ", 6, "world", 5), "an atomic write");
    CHECK(lwo__read_file(file, &data, &size) && size == 11 && memcmp(data, "hello world", 11) == 0, "read back (%llu bytes)", (unsigned long long)size);
    free(data); data = NULL;
    CHECK(lwo__write_file_atomic(file, "second", 6, NULL, 0), "a write over an existing file (rename replaces it)");
    CHECK(lwo__read_file(file, &data, &size) && size == 6 && memcmp(data, "second", 6) == 0, "the new content replaced the old");
    free(data); data = NULL;
    list_dir(dir, listing, sizeof listing);
    CHECK(strcmp(listing, "f-" UNAME ".bin") == 0, "the listing has the UTF-8 name and no temporary file: %s", listing);

    /* an abandoned write leaves the file as it was and no temporary behind */
    err[0] = 0;
    CHECK(lwo__wfile_open(&f, file, err, sizeof err) && lwo__wfile_write(&f, "partial", 7, err, sizeof err), "%s", err);
    lwo__wfile_abort(&f);
    CHECK(lwo__read_file(file, &data, &size) && size == 6 && memcmp(data, "second", 6) == 0, "abort keeps the old file");
    free(data); data = NULL;
    list_dir(dir, listing, sizeof listing);
    CHECK(strcmp(listing, "f-" UNAME ".bin") == 0, "abort removes the temporary: %s", listing);

    /* failures say where */
    err[0] = 0;
    CHECK(!lwo__wfile_open(&f, tpath("no-such-folder/x.bin"), err, sizeof err) && strstr(err, "cannot create") && strstr(err, "no-such-folder"),
          "a write into a missing folder: %s", err);
    {
        char under_file[1100];
        snprintf(under_file, sizeof under_file, "%s/sub", file);
        CHECK(!lwo__mkdir_p(under_file), "mkdir -p under a regular file fails");
    }
    CHECK(!lwo__read_file(tpath("missing.bin"), &data, &size), "reading a missing file fails");
    CHECK(!lwo__read_file(dir, &data, &size), "reading a folder fails");
    CHECK(lwo__remove_file(file) && !lwo__read_file(file, &data, &size), "remove");
    CHECK(!lwo__remove_file(file), "removing it again fails");
}

/* The module cache (section 4) through the platform calls, on a context built by hand. */
static void test_cache(void) {
    lwo_context ctx;
    unsigned char cubin[5000], *file = NULL;
    const unsigned char *got = NULL;
    const char *parts[1] = { "extern \"C\" __global__ void k() {}" };
    char dir[1024], name[128], listing[2048];
    size_t size = 0, i;
    uint64_t key = lwo__module_key(parts, 1, "sm_90a", NULL);
    for (i = 0; i < sizeof cubin; i++) cubin[i] = (unsigned char)check_rand_u64();
    snprintf(dir, sizeof dir, "%s", tpath("cache/" UNAME));
    memset(&ctx, 0, sizeof ctx);
    ctx.magic = LWO__MAGIC_CTX;
    ctx.desc.log_level = LWO_LOG_WARN;
    ctx.desc.log = count_log;
    ctx.cache_dir = dir;
    ctx.nvrtc.version = 12090;
    CHECK(!lwo__cache_lookup(&ctx, key, &file, &got, &size), "nothing cached yet (the folder does not exist)");
    lwo__cache_store(&ctx, key, cubin, sizeof cubin);
    snprintf(name, sizeof name, "lwo-%016llx-nvrtc12090.cubin", (unsigned long long)key);
    list_dir(dir, listing, sizeof listing);
    CHECK(strcmp(listing, name) == 0, "the store made the folder and one file named by key and NVRTC: %s", listing);
    CHECK(lwo__cache_lookup(&ctx, key, &file, &got, &size) && size == sizeof cubin && memcmp(got, cubin, sizeof cubin) == 0,
          "the cubin comes back whole (%llu bytes)", (unsigned long long)size);
    free(file); file = NULL;
    CHECK(!lwo__cache_lookup(&ctx, key + 1, &file, &got, &size), "another key finds nothing");
    lwo__cache_store(&ctx, key, cubin, sizeof cubin);
    CHECK(lwo__cache_lookup(&ctx, key, &file, &got, &size) && size == sizeof cubin, "a second store replaces the file");
    free(file); file = NULL;
    {   /* a file cut short is refused, logged and removed */
        char path[1200];
        unsigned char *whole = NULL;
        size_t n = 0;
        snprintf(path, sizeof path, "%s" LWO__SEP "%s", dir, name);
        CHECK(lwo__read_file(path, &whole, &n) && n == sizeof(lwo__cache_header) + sizeof cubin, "the file is header + cubin");
        CHECK(lwo__write_file_atomic(path, whole, n - 1, NULL, 0), "truncate it");
        free(whole);
        log_warnings = 0;
        CHECK(!lwo__cache_lookup(&ctx, key, &file, &got, &size), "a truncated cache file is not used");
        CHECK(log_warnings == 1, "and a warning says so (%d)", log_warnings);
        list_dir(dir, listing, sizeof listing);
        CHECK(listing[0] == 0, "and it is removed: %s", listing);
    }
    ctx.cache_dir = NULL;
    CHECK(!lwo__cache_lookup(&ctx, key, &file, &got, &size), "no cache folder: no lookup");
}

static void test_mapping(void) {
    unsigned char bytes[256];
    const uint8_t *base = NULL;
    uint64_t size = 0;
    char err[1024];
    int i;
    lwo_result r;
    for (i = 0; i < 256; i++) bytes[i] = (unsigned char)i;
    CHECK(lwo__write_file_atomic(tpath("m-" UNAME ".bin"), bytes, sizeof bytes, NULL, 0), "write");
    r = lwo__map_file(tpath("m-" UNAME ".bin"), &base, &size, err, sizeof err);
    CHECK(r == LWO_SUCCESS && size == 256 && memcmp(base, bytes, 256) == 0, "a mapped file has its bytes: %s", r ? err : "");
    if (r == LWO_SUCCESS) lwo__unmap_file(base, size);
    CHECK(lwo__write_file_atomic(tpath("empty.bin"), "", 0, NULL, 0), "write an empty file");
    r = lwo__map_file(tpath("empty.bin"), &base, &size, err, sizeof err);
    CHECK(r == LWO_SUCCESS && size == 0 && base != NULL, "an empty file maps to nothing: %s", r ? err : "");
    lwo__unmap_file(base, size);
    err[0] = 0;
    r = lwo__map_file(tmpdir, &base, &size, err, sizeof err);
    CHECK(r == LWO_ERROR_IO && strstr(err, "not a regular file") && strstr(err, tmpdir), "a folder is refused by name: %s", err);
    err[0] = 0;
    r = lwo__map_file(tpath("missing.bin"), &base, &size, err, sizeof err);
    CHECK(r == LWO_ERROR_IO && strstr(err, "cannot open") && strstr(err, "missing.bin"), "a missing file: %s", err);
#ifdef _WIN32
    err[0] = 0;
    r = lwo__map_file("NUL", &base, &size, err, sizeof err);
    CHECK(r == LWO_ERROR_IO && (strstr(err, "not a regular file") || strstr(err, "cannot open")), "the NUL device is refused: %s", err);
#else
    if (mkfifo(tpath("fifo"), 0600) == 0) {
        err[0] = 0;
        r = lwo__map_file(tpath("fifo"), &base, &size, err, sizeof err); /* O_NONBLOCK: does not wait for a writer */
        CHECK(r == LWO_ERROR_IO && strstr(err, "not a regular file"), "a FIFO is refused without blocking: %s", err);
    }
    err[0] = 0;
    r = lwo__map_file("/dev/null", &base, &size, err, sizeof err);
    CHECK(r == LWO_ERROR_IO && strstr(err, "not a regular file"), "a device is refused: %s", err);
#endif
    {   /* a checkpoint with a UTF-8 name, written and read through lwo's safetensors calls */
        uint64_t shape[2] = { 4, 8 };
        float w[32];
        lwo_safetensors_write_tensor t;
        lwo_safetensors *f = NULL;
        const lwo_safetensors_tensor *st;
        char werr[512];
        for (i = 0; i < 32; i++) w[i] = (float)i * 0.5f;
        t = check_st_tensor("w", LWO_DTYPE_F32, 2, shape, w);
        r = check_st_write(tpath(UNAME ".safetensors"), &t, 1, NULL, NULL, 0, werr, sizeof werr);
        CHECK(r == LWO_SUCCESS, "write %s: %s", UNAME ".safetensors", werr);
        r = check_st_open(tpath(UNAME ".safetensors"), &f);
        st = r == LWO_SUCCESS ? lwo_safetensors_find(f, "w") : NULL;
        CHECK(st && st->bytes == sizeof w && memcmp(st->data, w, sizeof w) == 0, "read back: %s", f ? lwo_safetensors_last_error(f) : "");
        lwo_safetensors_destroy(f);
        r = check_st_open(tpath("missing.safetensors"), &f);
        CHECK(r == LWO_ERROR_IO && strstr(lwo_safetensors_last_error(f), "missing.safetensors"), "%s", lwo_safetensors_last_error(f));
        lwo_safetensors_destroy(f);
        r = check_st_write(tpath("no-such-folder/x.safetensors"), &t, 1, NULL, NULL, 0, werr, sizeof werr);
        CHECK(r == LWO_ERROR_IO && strstr(werr, "cannot create"), "a write into a missing folder: %s", werr);
    }
}

/* A sparse file: the header at 0, `tail` at `at`, holes between. 0 where the OS refused. */
static int make_sparse(const char *path, const void *head, size_t hn, const void *tail, size_t tn, uint64_t at) {
#ifdef _WIN32
    wchar_t *w = lwo__widen(path);
    HANDLE h = w ? CreateFileW(w, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL) : INVALID_HANDLE_VALUE;
    DWORD n = 0;
    LARGE_INTEGER off;
    int ok;
    free(w);
    if (h == INVALID_HANDLE_VALUE) return 0;
    DeviceIoControl(h, FSCTL_SET_SPARSE, NULL, 0, NULL, 0, &n, NULL); /* NTFS: holes stay unallocated */
    off.QuadPart = (LONGLONG)at;
    ok = WriteFile(h, head, (DWORD)hn, &n, NULL) && n == hn && SetFilePointerEx(h, off, NULL, FILE_BEGIN) &&
         WriteFile(h, tail, (DWORD)tn, &n, NULL) && n == tn;
    return CloseHandle(h) && ok;
#else
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600), ok;
    if (fd < 0) return 0;
    ok = write(fd, head, hn) == (ssize_t)hn && pwrite(fd, tail, tn, (off_t)at) == (ssize_t)tn;
    return close(fd) == 0 && ok;
#endif
}

/* Over 4 GiB: the second tensor starts past 2^32, so a 32-bit size or offset anywhere between
   the file's size and the tensor's pointer shows. The file is sparse: 8 KiB on disk. */
static void test_big_file(void) {
    const uint64_t big = ((uint64_t)1 << 32) + 16;
    char head[256];
    unsigned char tail[16];
    const uint8_t *base = NULL;
    uint64_t size = 0, data0, total;
    size_t hl, pad, i;
    char err[1024];
    lwo_safetensors *f = NULL;
    lwo_result r;
    const char *path = tpath("big-" UNAME ".safetensors");
    hl = (size_t)snprintf(head + 8, sizeof head - 8,
                          "{\"big\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[0,%llu]},"
                          "\"tail\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[%llu,%llu]}}",
                          (unsigned long long)big, (unsigned long long)big, (unsigned long long)big, (unsigned long long)(big + 16));
    pad = (8 - hl % 8) % 8;
    for (i = 0; i < pad; i++) head[8 + hl++] = ' ';
    for (i = 0; i < 8; i++) head[i] = (char)(((uint64_t)hl >> (8 * i)) & 0xff);
    for (i = 0; i < 16; i++) tail[i] = (unsigned char)(0xa0 + i);
    data0 = 8 + hl;
    total = data0 + big + 16;
    if (!make_sparse(path, head, 8 + hl, tail, 16, data0 + big)) {
        printf("notice: this filesystem would not make a sparse %llu-byte file: the mapping over 4 GiB is not tested here\n", (unsigned long long)total);
        return;
    }
    r = lwo__map_file(path, &base, &size, err, sizeof err);
    CHECK(r == LWO_SUCCESS && size == total, "a %llu-byte file maps whole (%llu): %s", (unsigned long long)total, (unsigned long long)size, r ? err : "");
    if (r == LWO_SUCCESS && size == total) {
        CHECK(memcmp(base + data0 + big, tail, 16) == 0 && base[data0 + ((uint64_t)1 << 32)] == 0 && base[size - 1] == 0xaf,
              "bytes past 4 GiB read through the mapping");
        lwo__unmap_file(base, size);
    }
    r = check_st_open(path, &f);
    CHECK(r == LWO_SUCCESS, "open: %s", lwo_safetensors_last_error(f));
    if (r == LWO_SUCCESS) {
        const lwo_safetensors_tensor *b = lwo_safetensors_find(f, "big"), *t = lwo_safetensors_find(f, "tail");
        CHECK(b && b->bytes == big && b->numel == big && b->shape[0] == big, "a tensor of 2^32 + 16 bytes");
        CHECK(t && t->bytes == 16 && memcmp(t->data, tail, 16) == 0, "the tensor past 4 GiB has its bytes");
        CHECK(t && b && (const uint8_t *)t->data - (const uint8_t *)b->data == (ptrdiff_t)big, "at a 64-bit offset");
    }
    lwo_safetensors_destroy(f);
    CHECK(lwo__remove_file(path), "remove the big file");
}

static void test_libraries(void) {
    char err[1024];
    void *lib;
    err[0] = 0;
#ifdef _WIN32
    lib = lwo__lib_open("lwo-no-such-library.dll", err, sizeof err);
    CHECK(!lib && strlen(err) > 5, "a missing DLL fails with a reason: %s", err);
    lib = lwo__lib_open("kernel32.dll", err, sizeof err);
    CHECK(lib && lwo__lib_sym(lib, "GetCurrentProcessId") && !lwo__lib_sym(lib, "lwo_no_such_symbol"), "kernel32.dll and a symbol of it");
#else
    lib = lwo__lib_open("/nonexistent/liblwo-no-such.so", err, sizeof err);
    CHECK(!lib && strstr(err, "liblwo-no-such.so"), "a missing library fails with a reason: %s", err);
    lib = lwo__lib_open("libc.so.6", err, sizeof err);
    CHECK(lib && lwo__lib_sym(lib, "getpid") && !lwo__lib_sym(lib, "lwo_no_such_symbol"), "libc.so.6 and a symbol of it");
#endif
    if (lib) lwo__lib_close(lib);
}

/* The module build (section 4) end to end where NVRTC can be had (Linux here; under Wine, the
   Windows DLL from PyPI's nvidia-cuda-nvrtc-cu12 wheel, found through %VIRTUAL_ENV%): compiled
   once and stored, then a fresh context loads the cubin from the disk cache without loading NVRTC
   at all. The driver is a stand-in that only checks it was handed an ELF image. */
static int fake_loads;
static lwo__CUresult fake_module_load(lwo__CUmodule *m, const void *image) {
    fake_loads++;
    if (memcmp(image, "\x7f" "ELF", 4) != 0) return 200; /* CUDA_ERROR_INVALID_IMAGE */
    *m = NULL;
    return 0;
}
static void module_ctx(lwo_context *ctx, const char *cache) {
    memset(ctx, 0, sizeof *ctx);
    ctx->magic = LWO__MAGIC_CTX;
    ctx->desc.log_level = LWO_LOG_PROGRESS;
    ctx->desc.log = count_log;
    ctx->cache_dir = (char *)cache;
    snprintf(ctx->info.arch, sizeof ctx->info.arch, "sm_80");
    ctx->cu.cuModuleLoadData = fake_module_load;
}
static void test_module_cache(void) {
    static const char *const parts[2] = { "extern \"C\" __global__ void lwo_test_fill(float *p, float v) ",
                                          "{ p[threadIdx.x] = v; }\n" };
    static const char *const opts[] = { "--fmad=false", NULL };
    char cache[1024], listing[2048];
    lwo_context ctx;
    lwo_module *m = NULL;
    lwo_result r;
    snprintf(cache, sizeof cache, "%s", tpath("modules-" UNAME));
    module_ctx(&ctx, cache);
    fake_loads = 0;
    log_progress = 0;
    r = lwo__module_build(&ctx, parts, 2, "lwo_test.cu", opts, &m);
    if (r == LWO_ERROR_NO_NVRTC) {
        printf("notice: no NVRTC here, the module build through the cache is not tested: %.300s\n", ctx.error);
        return;
    }
    CHECK(r == LWO_SUCCESS && m && !m->from_cache && ctx.stats.modules_compiled == 1 && fake_loads == 1,
          "compiled by NVRTC and handed to the driver: %s", ctx.error);
    printf("NVRTC %d from %s compiled a module for sm_80\n", ctx.nvrtc.version, ctx.nvrtc.path);
    /* a compile is announced before it starts and timed when it ends (a first start never looks hung) */
    CHECK(log_progress == 2 && strstr(log_last_progress, "compiled lwo_test.cu for sm_80 in "),
          "two progress messages around the compile (got %d, the last \"%s\")", log_progress, log_last_progress);
    if (m) lwo__module_free(&ctx, m);
    /* NVRTC stays loaded (the next context starts without it all the same): unloaded, the C++
       runtime's pool inside libnvrtc would show as a leak to the ASan build's LeakSanitizer */
    list_dir(cache, listing, sizeof listing);
    CHECK(strncmp(listing, "lwo-", 4) == 0 && strstr(listing, ".cubin") && !strchr(listing, '|'), "one cubin in the cache: %s", listing);

    module_ctx(&ctx, cache);
    m = NULL;
    log_progress = 0;
    r = lwo__module_build(&ctx, parts, 2, "lwo_test.cu", opts, &m);
    CHECK(r == LWO_SUCCESS && m && m->from_cache && ctx.stats.modules_from_cache == 1 && ctx.stats.modules_compiled == 0 && fake_loads == 2,
          "a fresh context loads the cubin from the cache: %s", ctx.error);
    CHECK(ctx.nvrtc.lib == NULL, "without loading NVRTC");
    CHECK(log_progress == 0, "and without a progress message (%d)", log_progress);
    if (m) lwo__module_free(&ctx, m);
}

/* Several modules built at once (lwo__modules_build: a thread per compile), as a context's GEMM
   variants are on a first start: every module built and cached, the progress lines counting them
   as they end, a compile error in one failing the call with that module's log while the others
   are built all the same, and a fresh context loading them all from the cache. */
static void test_modules_at_once(void) {
    static const char *const a[1] = { "extern \"C\" __global__ void lwo_k_a(float *p) { p[threadIdx.x] = 1.0f; }\n" };
    static const char *const b[1] = { "extern \"C\" __global__ void lwo_k_b(float *p) { p[threadIdx.x] = 2.0f; }\n" };
    static const char *const c[1] = { "extern \"C\" __global__ void lwo_k_c(float *p) { p[threadIdx.x] = 3.0f; }\n" };
    static const char *const bad[1] = { "extern \"C\" __global__ void lwo_k_bad(float *p) { p[threadIdx.x] = undeclared_name; }\n" };
    static const char *const opts[] = { "--fmad=false", NULL };
    const char *const *srcs[3] = { a, b, c };
    static const char *const names[3] = { "lwo_a.cu", "lwo_b.cu", "lwo_c.cu" };
    char cache[1024], listing[4096];
    lwo__module_job jobs[4];
    lwo_module *m[4];
    lwo_context ctx;
    lwo_result r;
    int i, round, cubins = 0;
    const char *p;
    snprintf(cache, sizeof cache, "%s", tpath("at-once-" UNAME));
    for (round = 0; round < 2; round++) {   /* 0: compiled, three at once; 1: all three from the cache */
        module_ctx(&ctx, cache);
        memset(jobs, 0, sizeof jobs);
        for (i = 0; i < 3; i++) {
            m[i] = NULL;
            jobs[i].parts = srcs[i]; jobs[i].nparts = 1; jobs[i].name = names[i]; jobs[i].opts = opts; jobs[i].out = &m[i];
        }
        fake_loads = 0;
        log_progress = 0;
        r = lwo__modules_build(&ctx, jobs, 3);
        if (r == LWO_ERROR_NO_NVRTC) { printf("notice: no NVRTC here, modules at once are not tested\n"); return; }
        CHECK(r == LWO_SUCCESS && m[0] && m[1] && m[2] && fake_loads == 3, "round %d: three modules built: %s", round, ctx.error);
        if (round == 0) {
            CHECK(ctx.stats.modules_compiled == 3 && !m[0]->from_cache && !m[2]->from_cache, "compiled (%llu)", (unsigned long long)ctx.stats.modules_compiled);
            CHECK(log_progress == 4 && strstr(log_last_progress, " (3/3)"), "a line before and one per module as it ends (%d, the last \"%s\")",
                  log_progress, log_last_progress);
        } else {
            CHECK(ctx.stats.modules_from_cache == 3 && m[1]->from_cache && ctx.nvrtc.lib == NULL && log_progress == 0,
                  "a fresh context loads all three from the cache, without NVRTC and without progress lines");
        }
        for (i = 0; i < 3; i++) if (m[i]) lwo__module_free(&ctx, m[i]);
    }
    list_dir(cache, listing, sizeof listing);
    for (p = listing; (p = strstr(p, ".cubin")) != NULL; p++) cubins++;
    CHECK(cubins == 3, "three cubins in the cache: %s", listing);

    /* one of three does not compile: its log is the error; the other two (one cached, one new) are built */
    module_ctx(&ctx, cache);
    memset(jobs, 0, sizeof jobs);
    {
        static const char *const d[1] = { "extern \"C\" __global__ void lwo_k_d(float *p) { p[threadIdx.x] = 4.0f; }\n" };
        const char *const *set[3] = { a, bad, d };
        static const char *const setn[3] = { "lwo_a.cu", "lwo_bad.cu", "lwo_d.cu" };
        for (i = 0; i < 3; i++) {
            m[i] = NULL;
            jobs[i].parts = set[i]; jobs[i].nparts = 1; jobs[i].name = setn[i]; jobs[i].opts = opts; jobs[i].out = &m[i];
        }
    }
    r = lwo__modules_build(&ctx, jobs, 3);
    CHECK(r == LWO_ERROR_COMPILE && strstr(ctx.error, "lwo_bad.cu") && strstr(ctx.error, "undeclared_name"),
          "the failing module's log is the error: %.200s", ctx.error);
    CHECK(m[0] && m[0]->from_cache && !m[1] && m[2] && !m[2]->from_cache && jobs[0].r == LWO_SUCCESS && jobs[2].r == LWO_SUCCESS,
          "the others are built all the same");
    for (i = 0; i < 3; i++) if (m[i]) lwo__module_free(&ctx, m[i]);
}

/* lwo__thread: a function on a thread of its own, joined; here threads are to be had on every platform. */
static void thread_fill(void *p) {
    int *v = (int *)p, i;
    for (i = 0; i < 1000; i++) v[i] = i * 3;
}
static void test_threads(void) {
    static int v[4][1000];
    lwo__thread t[4];
    int i, k, ok = 1, started = 0;
    for (i = 0; i < 4; i++) started += lwo__thread_start(&t[i], thread_fill, v[i]);
    CHECK(started == 4, "four threads started (%d)", started);
    for (i = 0; i < started; i++) lwo__thread_join(&t[i]);
    for (i = 0; i < started; i++)
        for (k = 0; k < 1000; k++) ok &= v[i][k] == k * 3;
    CHECK(ok, "each thread's work is there after its join");
    lwo__sleep_ms(1);
}

/* Where no NVRTC can be found, the message lists each place tried, in order. The Linux machines
   have NVRTC installed, so there only the Windows run (under Wine) checks the message; it also
   puts decoys into %CUDA_PATH%\bin\x64 to see the newest name tried first and *.alt skipped. */
static void test_nvrtc_search(void) {
    static char err[LWO__ERROR_CAP];
    lwo__nvrtc n;
    lwo_result r;
    char cuda[1024];
    char venv[2048] = "";
    snprintf(cuda, sizeof cuda, "%s", tpath("cuda"));
    check_setenv("LWO_NVRTC_PATH", tpath("no-such-nvrtc.lib"));
    check_setenv("CUDA_PATH", cuda);
    if (lwo__env("VIRTUAL_ENV", venv, sizeof venv)) check_unsetenv("VIRTUAL_ENV"); /* test_module_cache's NVRTC */
#ifdef _WIN32
    {
        char x64[1100];
        snprintf(x64, sizeof x64, "%s\\bin\\x64", cuda);
        CHECK(lwo__mkdir_p(x64), "%s", x64);
        /* not DLLs: each fails to load, and the message says so in the order they were tried */
        snprintf(x64, sizeof x64, "%s\\bin\\x64\\nvrtc64_120_0.dll", cuda);
        lwo__write_file_atomic(x64, "MZ", 2, NULL, 0);
        snprintf(x64, sizeof x64, "%s\\bin\\x64\\nvrtc64_130_0.dll", cuda);
        lwo__write_file_atomic(x64, "MZ", 2, NULL, 0);
        snprintf(x64, sizeof x64, "%s\\bin\\x64\\nvrtc64_130_0.alt.dll", cuda);
        lwo__write_file_atomic(x64, "MZ", 2, NULL, 0);
    }
#endif
    err[0] = 0;
    r = lwo__nvrtc_load(&n, NULL, err, sizeof err);
    if (r == LWO_SUCCESS) {
        printf("note: NVRTC %d found at %s: its failure message is checked where there is none (under Wine)\n", n.version, n.path);
        /* left loaded, as in test_module_cache: unloaded, libnvrtc's C++ pool reads as a leak under ASan */
    } else {
        const char *a, *b;
        printf("the NVRTC search's message:\n%s\n", err);
        CHECK_EQ_INT(r, LWO_ERROR_NO_NVRTC);
        CHECK(strstr(err, "no-such-nvrtc.lib") != NULL, "the explicit path comes first");
        CHECK(strstr(err, "LWO_NVRTC_PATH") != NULL, "the message says how to point lwo at NVRTC");
#ifdef _WIN32
        CHECK(strstr(err, "nvrtc64_*.dll") && strstr(err, "\n  nvrtc64_130_0.dll: ") && strstr(err, "\n  nvrtc64_120_0.dll: "),
              "the versioned names through the DLL search");
        a = strstr(err, "bin\\x64\\nvrtc64_130_0.dll: ");
        b = strstr(err, "bin\\x64\\nvrtc64_120_0.dll: ");
        CHECK(a && b && a < b && !strstr(err, ".alt."), "%%CUDA_PATH%%\\bin\\x64: the newest first, *.alt skipped");
        CHECK(strstr(err, "cuda\\bin\\nvrtc64_*.dll: no match") != NULL, "%%CUDA_PATH%%\\bin searched");
        CHECK(strstr(err, "nvrtc64_*.dll: no match") != NULL, "the exe's folder searched");
#else
        a = strstr(err, "libnvrtc.so.13");
        b = strstr(err, "libnvrtc.so.12");
        CHECK(a && b && a < b && strstr(err, "/usr/local/cuda"), "the sonames, newest first, then the toolkit");
#endif
    }
    check_unsetenv("LWO_NVRTC_PATH");
    check_unsetenv("CUDA_PATH");
    if (venv[0]) check_setenv("VIRTUAL_ENV", venv);
}

int main(void) {
    check_seed("test_platform");
    if (!check_tmpdir(tmpdir, sizeof tmpdir, "lwo-platform-test")) return 1;
    test_basics();
    test_files();
    test_cache();
    test_mapping();
    test_big_file();
    test_libraries();
    test_nvrtc_search();
    test_threads();
    test_module_cache();    /* after: the NVRTC it leaves loaded would answer the search by name */
    test_modules_at_once();
    check_rmtree(tmpdir);
    return CHECK_SUMMARY();
}

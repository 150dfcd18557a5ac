/* lwo.h - low-VRAM weights, offloaded. v0.1.0
   A header-only C library that runs neural networks larger than the GPU's memory: weights live in
   host RAM in compact formats (fp8, int8), stream to the GPU ahead of the layer that needs them,
   and feed lwo's own kernels. The CUDA driver and NVRTC are loaded at run time; nothing from the
   CUDA toolkit is needed to build.

   INTEGRATION
     In exactly one C or C++ file:
         #define LWO_IMPLEMENTATION
         #include "lwo.h"
     elsewhere just #include "lwo.h". Build: cc -std=c99 app.c -ldl   (or c++ app.cpp -ldl)
     At run time lwo needs an NVIDIA driver (libcuda.so.1) and, for the first start on a device,
     libnvrtc (found as described at lwo_desc.nvrtc_path). Later starts load cached cubins.

   CONFIGURATION MACROS (define before the #include that has LWO_IMPLEMENTATION)
     LWO_IMPLEMENTATION       emit the implementation in this translation unit
     LWO_STATIC               make every lwo function static (a private copy per file)
     LWO_MALLOC(sz)/LWO_FREE(p)/LWO_REALLOC(p,sz)   host allocation (default: malloc/free/realloc)
     LWO_ASSERT(x)            internal invariant checks (default: assert)
     LWO_NO_STDIO             no default log sink on stderr (the log callback still works)

   MINIMAL EXAMPLE
     lwo_desc desc = {0};                 // zero means defaults, documented at each field
     lwo_context *ctx = NULL;
     lwo_result r = lwo_create(&desc, &ctx);
     if (r != LWO_SUCCESS) { fprintf(stderr, "lwo: %s\n", lwo_last_error(ctx)); lwo_destroy(ctx); return 1; }
     uint64_t shape[1] = {1024};
     lwo_tensor *a, *b;
     lwo_tensor_create(ctx, LWO_DTYPE_F8_E4M3, 1, shape, &a);
     lwo_tensor_create(ctx, LWO_DTYPE_BF16, 1, shape, &b);
     lwo_convert(ctx, NULL, a, b, 1.0f);    // upcast on the context's compute stream
     lwo_destroy(ctx);                      // frees every tensor, stream and module it made

   CONTENTS (sections appear in this order, each uses only those above it)
     Public API ........ results, dtypes, context, tensors, streams, modules, kernels, CPU refs
     1. Platform ....... dlopen, clock, files, allocation
     2. Driver loader .. one X-macro table of CUDA driver entry points via cuGetProcAddress
     3. NVRTC loader ... search order, version
     4. Kernel module .. compile for the device's exact arch, atomic on-disk cubin cache
     5. Memory ......... device arena of exactly the budget, pinned host buffers
     6. Tensors ........ device tensors; (weights: future)
     7. Kernels, ops ... convert (upcast/downcast), quantize fp8 / int8 rows / int8 activations
     11. Stats, logging
     CPU references .... the exact math of every kernel, usable with no GPU

   THREAD SAFETY
     A context is used by one thread at a time. Two contexts in one process do not interfere:
     there is no global mutable state; every table lives in the context.

   REVISIONS
     0.1.0  loaders, kernel module and cache, arena, convert and quantize kernels.
*/
#ifndef LWO_H
#define LWO_H

#define LWO_VERSION_MAJOR 0
#define LWO_VERSION_MINOR 1
#define LWO_VERSION_PATCH 0

#include <stddef.h>
#include <stdint.h>

#ifdef LWO_STATIC
#define LWO_API static
#else
#define LWO_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Public API: results ==================================================================== */
typedef enum lwo_result {
    LWO_SUCCESS = 0,
    LWO_ERROR_INVALID_ARGUMENT,  /* a NULL, zero, overflowing or mismatched argument; the detail names it */
    LWO_ERROR_OUT_OF_HOST_MEMORY,
    LWO_ERROR_NO_DRIVER,         /* libcuda.so.1 could not be loaded (no NVIDIA driver installed) */
    LWO_ERROR_STUB_DRIVER,       /* the CUDA toolkit's stub libcuda was loaded instead of a driver */
    LWO_ERROR_DRIVER_SYMBOL,     /* the driver lacks an entry point lwo needs (driver too old) */
    LWO_ERROR_NO_DEVICE,         /* a driver, but no usable CUDA device (or the index is out of range) */
    LWO_ERROR_NO_NVRTC,          /* kernels must be compiled and no libnvrtc was found */
    LWO_ERROR_COMPILE,           /* NVRTC rejected the source; the detail holds its log */
    LWO_ERROR_OUT_OF_BUDGET,     /* the request does not fit in the remaining VRAM budget */
    LWO_ERROR_OUT_OF_DEVICE_MEMORY, /* the driver could not allocate device memory */
    LWO_ERROR_BAD_FILE,          /* a malformed or untrusted file was rejected */
    LWO_ERROR_IO,                /* a file could not be opened, read, written or renamed */
    LWO_ERROR_UNSUPPORTED,       /* valid request the device or this build cannot do */
    LWO_ERROR_NOT_FOUND,         /* a named item (kernel, tensor) does not exist */
    LWO_ERROR_CUDA,              /* any other driver error; the detail names the call and code */
    LWO_RESULT_COUNT
} lwo_result;

LWO_API const char *lwo_result_string(lwo_result r);

/* ==== Public API: data types ================================================================= */
typedef enum lwo_dtype {
    LWO_DTYPE_INVALID = 0,
    LWO_DTYPE_F32,
    LWO_DTYPE_F16,
    LWO_DTYPE_BF16,
    LWO_DTYPE_F8_E4M3,   /* e4m3fn: bias 7, max 448, no infinities, 0x7f/0xff are NaN */
    LWO_DTYPE_F8_E5M2,   /* bias 15, max 57344, IEEE-like with inf and NaN */
    LWO_DTYPE_I8,
    LWO_DTYPE_U8,
    LWO_DTYPE_I32,
    LWO_DTYPE_COUNT
} lwo_dtype;

LWO_API size_t lwo_dtype_size(lwo_dtype t);       /* bytes per element, 0 for an invalid dtype */
LWO_API const char *lwo_dtype_name(lwo_dtype t);  /* "bf16", "f8_e4m3", ... */

/* ==== Public API: context ==================================================================== */
typedef struct lwo_context lwo_context;
typedef struct lwo_tensor lwo_tensor;
typedef struct lwo_stream lwo_stream;
typedef struct lwo_event lwo_event;
typedef struct lwo_module lwo_module;

typedef enum lwo_log_level { LWO_LOG_ERROR = 0, LWO_LOG_WARN, LWO_LOG_INFO, LWO_LOG_DEBUG } lwo_log_level;
typedef void (*lwo_log_fn)(void *user, lwo_log_level level, const char *message);

/* Every field's zero value is a documented default: `lwo_desc d = {0};` is a valid desc. */
typedef struct lwo_desc {
    int device;                /* CUDA device ordinal. Default 0. */
    int log_level;             /* messages at or below this level reach `log`. 0 = LWO_LOG_WARN. */
    uint64_t vram_budget;      /* bytes of VRAM lwo may use, allocated once as its arena at create.
                                  0 = 90% of the device's free memory at create, minus 256 MiB,
                                  rounded down to 2 MiB. */
    const char *cache_dir;     /* cubin cache folder. NULL = $LWO_CACHE_DIR, else $XDG_CACHE_HOME/lwo,
                                  else $HOME/.cache/lwo. "-" disables the disk cache. */
    const char *driver_path;   /* NULL = "libcuda.so.1" (never the toolkit's stub libcuda.so) */
    const char *nvrtc_path;    /* NULL = $LWO_NVRTC_PATH, then libnvrtc.so.13, .12, libnvrtc.so, then
                                  /usr/local/cuda/lib64 and the nvidia-cuda-nvrtc wheel locations */
    lwo_log_fn log;            /* NULL = warnings and errors to stderr (none with LWO_NO_STDIO) */
    void *log_user;
    void *cu_context;          /* a CUcontext to share; NULL = the device's primary context.
                                  lwo never destroys a context it was lent. */
    void *cu_stream;           /* a CUstream to use as the compute stream; NULL = lwo creates one.
                                  lwo never destroys a stream it was lent. */
} lwo_desc;

typedef struct lwo_device_info {
    char name[256];
    int cc_major, cc_minor;    /* compute capability */
    int sm_count;
    int max_smem_per_block;    /* opt-in dynamic shared memory limit, bytes */
    uint64_t total_memory, free_memory_at_create;
    int driver_version, nvrtc_version; /* e.g. 13000; nvrtc_version 0 when NVRTC was not needed */
    char arch[16];             /* the target lwo compiles for, e.g. "sm_90a" */
} lwo_device_info;

typedef struct lwo_startup_times {
    double load_driver_ms, cu_init_ms, context_ms, arena_ms;
    double module_ms;          /* compile or cache load of lwo's kernels */
    int module_from_cache;     /* 1 when the cubin came from the disk cache (no NVRTC used) */
    double total_ms;           /* lwo_create from entry to return */
} lwo_startup_times;

/* Create a context: load the driver, pick the device, allocate the arena, load the kernels.
   On failure *out is still set (unless host memory ran out) so lwo_last_error(*out) can say why;
   such a context answers only lwo_last_error and lwo_destroy. Always lwo_destroy what you got. */
LWO_API lwo_result lwo_create(const lwo_desc *desc, lwo_context **out);
/* Frees everything lwo made (tensors, streams, events, modules, arena); nothing it was lent. */
LWO_API void lwo_destroy(lwo_context *ctx);
/* The detail of the last failure on this context ("" if none). Valid until the next lwo call. */
LWO_API const char *lwo_last_error(const lwo_context *ctx);
LWO_API lwo_result lwo_device_info_get(lwo_context *ctx, lwo_device_info *out);
LWO_API lwo_result lwo_startup_times_get(lwo_context *ctx, lwo_startup_times *out);

/* ==== Public API: tensors ==================================================================== */
#define LWO_MAX_DIMS 4
/* A dense, row-major device tensor. Created ones live in the context's arena (256-byte aligned);
   wrapped ones point at memory the caller owns (or at part of another tensor). */
LWO_API lwo_result lwo_tensor_create(lwo_context *ctx, lwo_dtype dtype, int ndim, const uint64_t *shape,
                                     lwo_tensor **out);
LWO_API lwo_result lwo_tensor_wrap(lwo_context *ctx, uint64_t device_ptr, lwo_dtype dtype, int ndim,
                                   const uint64_t *shape, lwo_tensor **out);
LWO_API void lwo_tensor_destroy(lwo_context *ctx, lwo_tensor *t);
LWO_API uint64_t lwo_tensor_device_ptr(const lwo_tensor *t);  /* CUdeviceptr, for own kernels */
LWO_API lwo_dtype lwo_tensor_dtype(const lwo_tensor *t);
LWO_API int lwo_tensor_ndim(const lwo_tensor *t);
LWO_API uint64_t lwo_tensor_dim(const lwo_tensor *t, int i);
LWO_API uint64_t lwo_tensor_numel(const lwo_tensor *t);
LWO_API uint64_t lwo_tensor_bytes(const lwo_tensor *t);
/* Copies between host memory and a tensor, ordered on `stream` (NULL = the compute stream).
   The plain forms return when the copy is done; the _async forms need pinned host memory to overlap. */
LWO_API lwo_result lwo_tensor_upload(lwo_context *ctx, lwo_tensor *dst, const void *src, uint64_t bytes);
LWO_API lwo_result lwo_tensor_download(lwo_context *ctx, const lwo_tensor *src, void *dst, uint64_t bytes);
LWO_API lwo_result lwo_tensor_upload_async(lwo_context *ctx, lwo_stream *s, lwo_tensor *dst, const void *src, uint64_t bytes);
LWO_API lwo_result lwo_tensor_download_async(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, void *dst, uint64_t bytes);
LWO_API lwo_result lwo_tensor_fill_bytes(lwo_context *ctx, lwo_stream *s, lwo_tensor *t, uint8_t value);

/* Arena use: bytes now in use, the peak since create, and the budget. */
typedef struct lwo_memory_stats { uint64_t budget, in_use, peak, largest_free; } lwo_memory_stats;
LWO_API lwo_result lwo_memory_stats_get(lwo_context *ctx, lwo_memory_stats *out);

/* Pinned (page-locked) host memory, for transfers that overlap compute. */
LWO_API lwo_result lwo_host_alloc(lwo_context *ctx, uint64_t bytes, void **out);
LWO_API void lwo_host_free(lwo_context *ctx, void *p);

/* ==== Public API: streams and events ========================================================= */
/* NULL as a stream argument anywhere means the context's compute stream. */
LWO_API lwo_result lwo_stream_create(lwo_context *ctx, lwo_stream **out);
LWO_API void lwo_stream_destroy(lwo_context *ctx, lwo_stream *s);
LWO_API lwo_result lwo_stream_synchronize(lwo_context *ctx, lwo_stream *s);
LWO_API void *lwo_stream_handle(lwo_context *ctx, lwo_stream *s);  /* the CUstream */
LWO_API lwo_result lwo_event_create(lwo_context *ctx, lwo_event **out);
LWO_API void lwo_event_destroy(lwo_context *ctx, lwo_event *e);
LWO_API lwo_result lwo_event_record(lwo_context *ctx, lwo_event *e, lwo_stream *s);
LWO_API lwo_result lwo_stream_wait_event(lwo_context *ctx, lwo_stream *s, lwo_event *e); /* GPU-side wait */
LWO_API lwo_result lwo_event_synchronize(lwo_context *ctx, lwo_event *e);
LWO_API lwo_result lwo_event_elapsed_ms(lwo_context *ctx, lwo_event *start, lwo_event *end, float *ms);

/* ==== Public API: your own kernels =========================================================== */
/* Compile CUDA C source (no toolkit #includes available) for this device through the same NVRTC
   path and cubin cache lwo uses for its own kernels. `name` labels the NVRTC log; `options` is an
   optional NULL-terminated list of extra NVRTC options (part of the cache key). */
LWO_API lwo_result lwo_module_compile(lwo_context *ctx, const char *source, const char *name,
                                      const char *const *options, lwo_module **out);
LWO_API void lwo_module_destroy(lwo_context *ctx, lwo_module *m);
/* Launch extern "C" __global__ `kernel` of module `m`; args as for cuLaunchKernel (an array of
   pointers to each argument). Functions are looked up once and remembered. */
LWO_API lwo_result lwo_launch(lwo_context *ctx, lwo_stream *s, lwo_module *m, const char *kernel,
                              const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
                              void **args);

/* ==== Public API: conversion and quantization kernels ======================================== */
/* dst = src * scale, elementwise, any shapes with equal element counts.
   src: f8_e4m3, f8_e5m2, bf16, f16, f32.  dst: bf16, f16, f32 (round to nearest even).
   NaN stays NaN. Use lwo_quantize_fp8 to produce fp8. */
LWO_API lwo_result lwo_convert(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, lwo_tensor *dst, float scale);

/* dst = sat(src / scale) in fp8, round to nearest even, saturating to +-448 (e4m3) / +-57344 (e5m2);
   NaN stays NaN. `scale` is an f32 tensor of one element on the device. With compute_scale != 0 it
   is written first as absmax(src) / fp8_max (1.0 when src is all zero); else it is read. */
LWO_API lwo_result lwo_quantize_fp8(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, lwo_tensor *dst,
                                    lwo_tensor *scale, int compute_scale);

/* Per-row symmetric int8: for W [N, K] (bf16/f16/f32): scales[n] = absmax(W[n,:]) / 127 and
   q[n,k] = clamp(rne(W[n,k] / scales[n]), -127, 127). An all-zero row gets scale 1 and zeros.
   q: i8 [N, Kq] with Kq >= K (columns past K are written as 0); scales: f32 [N]. */
LWO_API lwo_result lwo_quantize_int8_rows(lwo_context *ctx, lwo_stream *s, const lwo_tensor *w,
                                          lwo_tensor *q, lwo_tensor *scales);

/* Dynamic per-token activation quantization for W8A8: for x [M, K] (bf16/f16/f32) and an optional
   smoothing divisor smooth [K] (f32), v = x[m,k] / smooth[k]; scales[m] = absmax(v) / 127;
   q[m,k] = clamp(rne(v / scales[m]), -127, 127); q: i8 [M, Kq], Kq >= K, zero past K.
   The same convention as lwo_quantize_int8_rows (an all-zero row: scale 1, zeros). */
LWO_API lwo_result lwo_quantize_act_int8(lwo_context *ctx, lwo_stream *s, const lwo_tensor *x,
                                         const lwo_tensor *smooth, lwo_tensor *q, lwo_tensor *scales);

/* ==== Public API: CPU references (no GPU, no context needed) ================================= */
/* Exactly the math of the kernels above, element by element; the GPU tests compare against them. */
LWO_API float lwo_ref_fp8_to_f32(uint8_t code, lwo_dtype fp8);      /* exact */
LWO_API uint8_t lwo_ref_f32_to_fp8(float v, lwo_dtype fp8);         /* RNE, saturating, NaN kept */
LWO_API float lwo_ref_bf16_to_f32(uint16_t h);
LWO_API uint16_t lwo_ref_f32_to_bf16(float v);                      /* RNE, NaN kept (quiet) */
LWO_API float lwo_ref_f16_to_f32(uint16_t h);
LWO_API uint16_t lwo_ref_f32_to_f16(float v);                       /* RNE, overflow to inf */
LWO_API float lwo_ref_load(const void *data, lwo_dtype t, uint64_t i); /* element i as f32 */
LWO_API void lwo_ref_store(void *data, lwo_dtype t, uint64_t i, float v);
LWO_API lwo_result lwo_ref_convert(const void *src, lwo_dtype st, void *dst, lwo_dtype dt, uint64_t n, float scale);
LWO_API float lwo_ref_fp8_scale(const void *src, lwo_dtype st, uint64_t n, lwo_dtype fp8);
LWO_API lwo_result lwo_ref_quantize_fp8(const void *src, lwo_dtype st, uint8_t *dst, lwo_dtype fp8, uint64_t n, float scale);
LWO_API lwo_result lwo_ref_quantize_int8_rows(const void *w, lwo_dtype wt, uint64_t rows, uint64_t k,
                                              const float *smooth, int8_t *q, uint64_t kq, float *scales);

/* ==== Public API: safetensors (section 10) ==================================================== */
/* (reserved: the safetensors reader and writer go here) */

/* ==== Public API: stats ====================================================================== */
typedef struct lwo_stats {
    uint64_t kernels_launched;
    uint64_t bytes_uploaded, bytes_downloaded;
    uint64_t modules_compiled, modules_from_cache;
} lwo_stats;
LWO_API lwo_result lwo_stats_get(lwo_context *ctx, lwo_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* LWO_H */

/* ============================================================================================= */
/* ==== Implementation ========================================================================= */
/* ============================================================================================= */
#ifdef LWO_IMPLEMENTATION
#ifndef LWO_IMPLEMENTATION_DONE
#define LWO_IMPLEMENTATION_DONE

/* ==== 10. safetensors ======================================================================== */
/* (reserved: the safetensors implementation goes here; it uses only section 1 and the error helpers) */

/* LWO_EMBED_BEGIN (tools/embed_kernels.py writes this block; edit kernels.cuh.inc) */
static const char *const lwo__kernel_source_parts[] = {
"/* kernels.cuh.inc - every kernel of lwo, as real CUDA C (compiled by NVRTC at run time). */\n",
};
/* LWO_EMBED_END */

#endif /* LWO_IMPLEMENTATION_DONE */
#endif /* LWO_IMPLEMENTATION */

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
/* A bounds-checked reader and an atomic writer of the .safetensors checkpoint format, plus the
   quantized-checkpoint conventions (ComfyUI scaled fp8, ComfyUI comfy_quant, lwo int8), storage
   policies (glob rules -> storage format) and the CPU conversion into a storage format.
   None of this needs a context or a GPU.

   The reader never trusts the file: the 8-byte little-endian header length must lie within the
   file and under LWO_SAFETENSORS_MAX_HEADER; the JSON header is parsed against the exact schema
   {"__metadata__": {str: str, ...}, name: {"dtype": str, "shape": [uint, ...],
   "data_offsets": [begin, end]}, ...} -- any other field, type, a float or negative number, an
   integer above 2^63-1, invalid UTF-8 (overlong forms, surrogates, code points past U+10FFFF),
   a lone surrogate in a \u escape, \u0000, a control character, duplicate names or metadata keys,
   trailing bytes other than whitespace: all are LWO_ERROR_BAD_FILE. Because every value has a
   known shape, the parser never recurses, so nesting depth is bounded by construction (a nested
   value where a number or string belongs is an error). Every tensor's byte length must equal
   dtype size x product(shape) (checked for overflow), and the tensors, sorted by offset, must cover
   the data area exactly: no overlaps, no holes, no trailing bytes (as the Rust reference checks).
   Tensor data is not aligned beyond what the file gives (lwo's writer aligns each tensor to its
   element size); read through memcpy when in doubt. Multi-byte values are little-endian, as on
   every host lwo supports. */
#ifndef LWO_SAFETENSORS_MAX_HEADER
#define LWO_SAFETENSORS_MAX_HEADER (100u << 20)   /* largest JSON header accepted, bytes (100 MiB) */
#endif
#define LWO_ST_MAX_DIMS 8            /* a tensor of more dimensions is rejected as a bad file */
#define LWO_ST_MAX_JSON_DEPTH 32     /* nesting bound of the free-form JSON in comfy_quant entries */
#define LWO_ST_QUANT_LWO_INT8_V1 "int8-per-channel-v1"  /* value of metadata key "lwo.quant" */

/* The dtypes of the safetensors format (their file spelling is lwo_st_dtype_name's answer). */
typedef enum lwo_st_dtype {
    LWO_ST_INVALID = 0,
    LWO_ST_F64, LWO_ST_F32, LWO_ST_F16, LWO_ST_BF16,
    LWO_ST_F8_E4M3,   /* "F8_E4M3": e4m3fn, max 448, no inf, 0x7f/0xff NaN */
    LWO_ST_F8_E5M2,   /* "F8_E5M2": max 57344, inf and NaN */
    LWO_ST_I64, LWO_ST_I32, LWO_ST_I16, LWO_ST_I8, LWO_ST_U8,
    LWO_ST_BOOL,      /* one byte per element */
    LWO_ST_DTYPE_COUNT
} lwo_st_dtype;
LWO_API const char *lwo_st_dtype_name(lwo_st_dtype t);  /* "F32", "BF16", ...; "INVALID" otherwise */
LWO_API size_t lwo_st_dtype_size(lwo_st_dtype t);       /* bytes per element, 0 when invalid */
LWO_API lwo_st_dtype lwo_st_dtype_from_name(const char *name); /* LWO_ST_INVALID when unknown */
LWO_API lwo_dtype lwo_st_dtype_to_lwo(lwo_st_dtype t);  /* LWO_DTYPE_INVALID where lwo has none */

/* One tensor of an open file. Pointers stay valid until lwo_safetensors_close. */
typedef struct lwo_st_tensor {
    const char *name;             /* NUL-terminated UTF-8 */
    lwo_st_dtype dtype;
    int ndim;                     /* 0 (a scalar) .. LWO_ST_MAX_DIMS */
    uint64_t shape[LWO_ST_MAX_DIMS];  /* entries past ndim are 0 */
    uint64_t numel;               /* product of shape (1 for a scalar, 0 when a dim is 0) */
    uint64_t bytes;               /* numel * lwo_st_dtype_size(dtype) */
    uint64_t offset;              /* absolute file offset of the first byte */
    const void *data;             /* into the read-only mapping (or the caller's memory) */
    size_t shard;                 /* index of the file in lwo_safetensors_open_many's list */
} lwo_st_tensor;

typedef struct lwo_safetensors lwo_safetensors;

/* Open and validate one file (mapped read-only; the mapping lives until close). On failure *out is
   still set (unless host memory ran out; then it is NULL) so lwo_safetensors_error can say what is
   wrong and where (file offset, tensor name); always lwo_safetensors_close what you got.
   Returns LWO_ERROR_IO (open/stat/mmap failed), LWO_ERROR_BAD_FILE, LWO_ERROR_INVALID_ARGUMENT. */
LWO_API lwo_result lwo_safetensors_open(const char *path, lwo_safetensors **out);
/* The same over `size` bytes the caller owns and keeps alive (and unchanged) until close. */
LWO_API lwo_result lwo_safetensors_open_memory(const void *data, size_t size, lwo_safetensors **out);
/* A sharded checkpoint as one set: names are looked up across all files; a name in two shards is
   LWO_ERROR_BAD_FILE. Metadata is merged; for a key in several shards the first shard's value wins. */
LWO_API lwo_result lwo_safetensors_open_many(const char *const *paths, size_t count, lwo_safetensors **out);
LWO_API void lwo_safetensors_close(lwo_safetensors *f);   /* NULL is fine */
/* Detail of the last failure ("" if none). Valid until the next call on f. */
LWO_API const char *lwo_safetensors_error(const lwo_safetensors *f);

/* Tensors in header order, shard after shard. */
LWO_API size_t lwo_safetensors_count(const lwo_safetensors *f);
LWO_API const lwo_st_tensor *lwo_safetensors_tensor(const lwo_safetensors *f, size_t i); /* NULL if out of range */
LWO_API const lwo_st_tensor *lwo_safetensors_find(const lwo_safetensors *f, const char *name); /* O(log n); NULL if absent */
/* Metadata ("__metadata__"), ordered by key bytes. */
LWO_API size_t lwo_safetensors_metadata_count(const lwo_safetensors *f);
LWO_API const char *lwo_safetensors_metadata_key(const lwo_safetensors *f, size_t i);
LWO_API const char *lwo_safetensors_metadata_value(const lwo_safetensors *f, size_t i);
LWO_API const char *lwo_safetensors_metadata_find(const lwo_safetensors *f, const char *key); /* NULL if absent */

/* ---- quantized-checkpoint conventions ----------------------------------------------------------
   For a weight `<prefix>.weight`, lwo_safetensors_quant_info reports how it is stored:
   LWO_ST_QUANT_COMFY_QUANT   `<prefix>.comfy_quant` exists: a U8 [n] tensor holding a JSON object
                              such as {"format":"float8_e4m3fn"} (format copied to `format`);
                              scales `<prefix>.weight_scale`, optional `<prefix>.input_scale`.
   LWO_ST_QUANT_LWO_INT8      metadata "lwo.quant" = "int8-per-channel-v1" and the weight is I8:
                              `<prefix>.weight` I8 [N, K], `<prefix>.weight_scale` F32 [N]
                              (w = q * weight_scale[n]), optional `<prefix>.smooth` F32 [K]
                              (the activation divisor: y = (x / smooth) @ (q * s)^T).
   LWO_ST_QUANT_COMFY_SCALED_FP8  a tensor named `scaled_fp8` exists and the weight is fp8:
                              `<prefix>.scale_weight` (one f32; missing means 1) and optional
                              `<prefix>.scale_input`; w = fp8 * scale_weight.
   LWO_ST_QUANT_NONE          none of these (a plain tensor).
   Checked in that order. Scale values are parsed when the scale tensor has one element (F32, F16,
   BF16 or F64); else the *_value field is 1 and the caller reads the tensor.
   Returns LWO_ERROR_NOT_FOUND when weight_name is absent, LWO_ERROR_BAD_FILE when a convention's
   tensors are inconsistent (wrong dtype or shape, bad comfy_quant JSON); detail in the error. */
typedef enum lwo_st_quant_format {
    LWO_ST_QUANT_NONE = 0,
    LWO_ST_QUANT_COMFY_SCALED_FP8,
    LWO_ST_QUANT_COMFY_QUANT,
    LWO_ST_QUANT_LWO_INT8
} lwo_st_quant_format;
typedef struct lwo_st_quant {
    lwo_st_quant_format format;
    const lwo_st_tensor *weight;
    const lwo_st_tensor *weight_scale;   /* scale_weight / weight_scale, or NULL */
    const lwo_st_tensor *input_scale;    /* scale_input / input_scale, or NULL */
    const lwo_st_tensor *smooth;         /* lwo int8 only, or NULL */
    float weight_scale_value;            /* the scalar scale, or 1 */
    float input_scale_value;             /* the scalar input scale, or 1 */
    char comfy_format[64];               /* comfy_quant's "format" ("" otherwise) */
} lwo_st_quant;
LWO_API lwo_result lwo_safetensors_quant_info(lwo_safetensors *f, const char *weight_name, lwo_st_quant *out);

/* ---- writer ------------------------------------------------------------------------------------ */
typedef struct lwo_st_write_tensor {
    const char *name;          /* UTF-8, unique, not "__metadata__" */
    lwo_st_dtype dtype;
    int ndim;                  /* 0 .. LWO_ST_MAX_DIMS */
    const uint64_t *shape;     /* ndim entries (may be NULL when ndim is 0) */
    const void *data;          /* `bytes` bytes, little-endian; may be NULL when bytes is 0 */
    uint64_t bytes;            /* must equal dtype size * product(shape) */
} lwo_st_write_tensor;
/* Writes a .safetensors file: the header (8-byte length, JSON with __metadata__ first when
   meta_count > 0, padded with spaces to a multiple of 8 as the Rust implementation does), then the
   data, ordered by element size (largest first) then name, so every tensor is aligned to its
   element size. Writes `path.tmp.<pid>`, fsyncs, renames over `path`; on failure removes the
   temporary file and writes the reason into err (when err_size > 0).
   Returns LWO_ERROR_INVALID_ARGUMENT, LWO_ERROR_IO or LWO_ERROR_OUT_OF_HOST_MEMORY. */
LWO_API lwo_result lwo_safetensors_write(const char *path, const lwo_st_write_tensor *tensors, size_t count,
                                         const char *const *meta_keys, const char *const *meta_values,
                                         size_t meta_count, char *err, size_t err_size);

/* ---- storage policy ---------------------------------------------------------------------------- */
typedef enum lwo_store_format {
    LWO_STORE_KEEP = 0,        /* as in the file (zero copy) */
    LWO_STORE_BF16, LWO_STORE_F16, LWO_STORE_F32,
    LWO_STORE_FP8_E4M3,        /* per-tensor scale = absmax / 448 (1 when all zero) */
    LWO_STORE_FP8_E5M2,        /* per-tensor scale = absmax / 57344 (1 when all zero) */
    LWO_STORE_INT8,            /* per-row scale = absmax(row) / 127 (1 for an all-zero row) */
    LWO_STORE_FORMAT_COUNT
} lwo_store_format;
LWO_API const char *lwo_store_format_name(lwo_store_format f);  /* "keep", "bf16", ..., "int8" */

/* Rules are tried in order; the first whose pattern matches the whole name wins. Patterns are
   globs over bytes: `*` matches any run (dots included), `?` one byte, everything else itself.
   A zero-filled policy keeps every tensor as it is. */
typedef struct lwo_storage_rule { const char *pattern; lwo_store_format format; } lwo_storage_rule;
typedef struct lwo_storage_policy {
    const lwo_storage_rule *rules;
    size_t rule_count;
    lwo_store_format default_format;   /* when no rule matches. 0 = LWO_STORE_KEEP */
} lwo_storage_policy;
LWO_API int lwo_glob_match(const char *pattern, const char *name);   /* 1 on a match */
LWO_API lwo_store_format lwo_storage_policy_format(const lwo_storage_policy *p, const char *name);

/* Converts file tensor t to `target` on the CPU. Any source dtype is read as f32 (f64 and the
   integers through a C conversion); f32 -> bf16/f16 round to nearest even (f16 overflows to inf),
   fp8 saturates with RNE and keeps NaN (inf saturates too), int8 rows are
   clamp(rne(x / scale), -127, 127) with NaN -> 0. For INT8 a tensor of ndim >= 2 has rows =
   shape[0] and cols = numel / rows; ndim 0 or 1 is one row.
   Zero copy: when t's dtype already is the target's dtype (always for KEEP) out->data points into
   the mapping, nothing is allocated, and scale / row_scales are 1 / NULL -- the file's own scales
   (lwo_safetensors_quant_info) apply.
   Buffers: `buf` (buf_bytes) receives the data and `scales` (scales_count floats) the int8 row
   scales; either NULL means lwo allocates it with LWO_MALLOC (freed by lwo_st_converted_free).
   Returns LWO_ERROR_INVALID_ARGUMENT (bad target, buffer too small), LWO_ERROR_OUT_OF_HOST_MEMORY. */
typedef struct lwo_st_converted {
    lwo_store_format format;   /* the target (KEEP resolved to itself) */
    lwo_st_dtype dtype;        /* dtype of data */
    const void *data;
    uint64_t bytes;
    float scale;               /* fp8: dequantize as value * scale; else 1 */
    const float *row_scales;   /* int8: [rows]; else NULL */
    uint64_t rows, cols;       /* int8 layout; else 0 */
    int zero_copy;             /* 1 when data points into the file */
    void *owned_data;          /* what lwo allocated (freed by lwo_st_converted_free) */
    float *owned_scales;
} lwo_st_converted;
LWO_API lwo_result lwo_safetensors_convert(const lwo_st_tensor *t, lwo_store_format target, void *buf,
                                           uint64_t buf_bytes, float *scales, uint64_t scales_count,
                                           lwo_st_converted *out);
LWO_API void lwo_st_converted_free(lwo_st_converted *c);

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
/* Reader: map, then parse the header against its fixed schema with explicit lengths (bounds are
   checked by subtraction, never by adding to a pointer). Strings decode into one pool per file: a
   decoded string plus its NUL is never longer than its JSON form with quotes, so a pool of the
   header's size cannot overflow. Uses only the C library and POSIX open/fstat/mmap/write/fsync
   (declared by glibc even under -std=c99). */
#ifndef LWO_MALLOC
#include <stdlib.h>
#define LWO_MALLOC(sz) malloc(sz)
#define LWO_FREE(p) free(p)
#define LWO_REALLOC(p,sz) realloc(p,sz)
#endif
#include <stdlib.h>   /* qsort */
#include <stdio.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct lwo__st_shard {
    char *path;                 /* a copy, for messages */
    const uint8_t *base;
    uint64_t size;
    int mapped;                 /* 1: munmap at close */
    uint64_t data_start;        /* 8 + header length */
    char *pool;                 /* decoded strings of this file's header */
} lwo__st_shard;

typedef struct lwo__st_meta { const char *key, *value; size_t shard, order; } lwo__st_meta;

struct lwo_safetensors {
    lwo__st_shard *shards;
    size_t shard_count;
    lwo_st_tensor *tensors;
    size_t count, cap;
    const lwo_st_tensor **by_name;  /* sorted by name */
    lwo__st_meta *meta;             /* sorted by key after open */
    size_t meta_count, meta_cap;
    int ready;                      /* open succeeded: the indexes are valid */
    char error[768];
};

static const char *const lwo__st_dtype_names[LWO_ST_DTYPE_COUNT] = {
    "INVALID", "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8", "U8", "BOOL"
};
static const unsigned char lwo__st_dtype_sizes[LWO_ST_DTYPE_COUNT] = { 0, 8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1 };

LWO_API const char *lwo_st_dtype_name(lwo_st_dtype t) {
    return ((unsigned)t < (unsigned)LWO_ST_DTYPE_COUNT) ? lwo__st_dtype_names[t] : "INVALID";
}
LWO_API size_t lwo_st_dtype_size(lwo_st_dtype t) {
    return ((unsigned)t < (unsigned)LWO_ST_DTYPE_COUNT) ? lwo__st_dtype_sizes[t] : 0;
}
LWO_API lwo_st_dtype lwo_st_dtype_from_name(const char *name) {
    int i;
    if (!name) return LWO_ST_INVALID;
    for (i = 1; i < (int)LWO_ST_DTYPE_COUNT; i++)
        if (strcmp(name, lwo__st_dtype_names[i]) == 0) return (lwo_st_dtype)i;
    return LWO_ST_INVALID;
}
LWO_API lwo_dtype lwo_st_dtype_to_lwo(lwo_st_dtype t) {
    switch (t) {
    case LWO_ST_F32: return LWO_DTYPE_F32;
    case LWO_ST_F16: return LWO_DTYPE_F16;
    case LWO_ST_BF16: return LWO_DTYPE_BF16;
    case LWO_ST_F8_E4M3: return LWO_DTYPE_F8_E4M3;
    case LWO_ST_F8_E5M2: return LWO_DTYPE_F8_E5M2;
    case LWO_ST_I8: return LWO_DTYPE_I8;
    case LWO_ST_U8: return LWO_DTYPE_U8;
    case LWO_ST_I32: return LWO_DTYPE_I32;
    default: return LWO_DTYPE_INVALID;
    }
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void lwo__st_fail(lwo_safetensors *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error, sizeof f->error, fmt, ap);
    va_end(ap);
}

/* ---- the JSON parser ----------------------------------------------------------------------- */
typedef struct lwo__st_parser {
    lwo_safetensors *f;
    const char *what;           /* file path, or the tensor holding the JSON */
    const uint8_t *begin, *end, *p;
    uint64_t file_offset;       /* file offset of begin */
    char *pool;                 /* decoded strings */
    size_t pool_used, pool_cap;
    int failed;
} lwo__st_parser;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static int lwo__st_perr(lwo__st_parser *P, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    if (P->failed) return 0;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lwo__st_fail(P->f, "%s: header byte %llu (file offset %llu): %s", P->what,
                 (unsigned long long)(P->p - P->begin),
                 (unsigned long long)(P->file_offset + (uint64_t)(P->p - P->begin)), msg);
    P->failed = 1;
    return 0;
}

static void lwo__st_ws(lwo__st_parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')) P->p++;
}
static int lwo__st_peek(lwo__st_parser *P) { return P->p < P->end ? *P->p : -1; }
static const char *lwo__st_show(int c, char buf[16]) {
    if (c < 0) return "the end of the header";
    if (c >= 0x21 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
    else snprintf(buf, 16, "byte 0x%02x", (unsigned)c);
    return buf;
}
static int lwo__st_expect(lwo__st_parser *P, int c, const char *what) {
    char b[16];
    lwo__st_ws(P);
    if (lwo__st_peek(P) != c) return lwo__st_perr(P, "expected %s, found %s", what, lwo__st_show(lwo__st_peek(P), b));
    P->p++;
    return 1;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid: rejects stray
   continuation bytes, overlong forms (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
   code points past U+10FFFF (F4 90.., F5..FF). */
static size_t lwo__st_utf8_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t len, i;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) { len = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (len > n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < len; i++) if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}
static int lwo__st_utf8_valid(const char *s) {
    size_t n = strlen(s), i = 0, l;
    while (i < n) { l = lwo__st_utf8_len((const uint8_t *)s + i, n - i); if (!l) return 0; i += l; }
    return 1;
}

static int lwo__st_hex4(lwo__st_parser *P, unsigned *out) {
    unsigned v = 0;
    int i;
    if (P->end - P->p < 4) return lwo__st_perr(P, "truncated \\u escape");
    for (i = 0; i < 4; i++) {
        int c = P->p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return lwo__st_perr(P, "bad hex digit in \\u escape");
        v = v * 16 + (unsigned)d;
    }
    P->p += 4;
    *out = v;
    return 1;
}

/* Parses a JSON string at P->p (after whitespace) into the pool; *out is NUL-terminated UTF-8. */
static int lwo__st_string(lwo__st_parser *P, const char **out) {
    char b[16];
    char *dst;
    lwo__st_ws(P);
    if (lwo__st_peek(P) != '"') return lwo__st_perr(P, "expected a string, found %s", lwo__st_show(lwo__st_peek(P), b));
    P->p++;
    dst = P->pool + P->pool_used;
    for (;;) {
        int c = lwo__st_peek(P);
        if (c < 0) return lwo__st_perr(P, "unterminated string");
        if (c == '"') { P->p++; break; }
        if (c < 0x20) return lwo__st_perr(P, "control character 0x%02x in a string", (unsigned)c);
        if (c == '\\') {
            unsigned cp;
            P->p++;
            c = lwo__st_peek(P);
            if (c < 0) return lwo__st_perr(P, "unterminated escape");
            P->p++;
            switch (c) {
            case '"': *dst++ = '"'; continue;
            case '\\': *dst++ = '\\'; continue;
            case '/': *dst++ = '/'; continue;
            case 'b': *dst++ = '\b'; continue;
            case 'f': *dst++ = '\f'; continue;
            case 'n': *dst++ = '\n'; continue;
            case 'r': *dst++ = '\r'; continue;
            case 't': *dst++ = '\t'; continue;
            case 'u': break;
            default: P->p--; return lwo__st_perr(P, "unknown escape \\%s", lwo__st_show(c, b));
            }
            if (!lwo__st_hex4(P, &cp)) return 0;
            if (cp >= 0xdc00 && cp <= 0xdfff) { P->p -= 6; return lwo__st_perr(P, "lone low surrogate \\u%04x", cp); }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (P->end - P->p < 2 || P->p[0] != '\\' || P->p[1] != 'u') {
                    P->p -= 6; return lwo__st_perr(P, "high surrogate \\u%04x not followed by a low one", cp);
                }
                P->p += 2;
                if (!lwo__st_hex4(P, &lo)) return 0;
                if (lo < 0xdc00 || lo > 0xdfff) { P->p -= 12; return lwo__st_perr(P, "high surrogate \\u%04x not followed by a low one", cp); }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) { P->p -= 6; return lwo__st_perr(P, "\\u0000 (NUL) is not allowed in a string"); }
            if (cp < 0x80) *dst++ = (char)cp;
            else if (cp < 0x800) { *dst++ = (char)(0xc0 | (cp >> 6)); *dst++ = (char)(0x80 | (cp & 0x3f)); }
            else if (cp < 0x10000) {
                *dst++ = (char)(0xe0 | (cp >> 12)); *dst++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *dst++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *dst++ = (char)(0xf0 | (cp >> 18)); *dst++ = (char)(0x80 | ((cp >> 12) & 0x3f));
                *dst++ = (char)(0x80 | ((cp >> 6) & 0x3f)); *dst++ = (char)(0x80 | (cp & 0x3f));
            }
            continue;
        }
        {
            size_t l = lwo__st_utf8_len(P->p, (size_t)(P->end - P->p));
            if (!l) return lwo__st_perr(P, "invalid UTF-8 in a string");
            memcpy(dst, P->p, l);
            dst += l;
            P->p += l;
        }
    }
    *dst++ = 0;
    *out = P->pool + P->pool_used;
    P->pool_used = (size_t)(dst - P->pool);
    return 1;
}

/* A non-negative integer of at most 2^63-1; floats, signs and leading zeros are errors. */
static int lwo__st_uint(lwo__st_parser *P, uint64_t *out, const char *what) {
    char b[16];
    uint64_t v = 0;
    int c;
    lwo__st_ws(P);
    c = lwo__st_peek(P);
    if (c == '-') return lwo__st_perr(P, "negative number in %s", what);
    if (c < '0' || c > '9') return lwo__st_perr(P, "expected an integer in %s, found %s", what, lwo__st_show(c, b));
    if (c == '0' && P->end - P->p > 1 && P->p[1] >= '0' && P->p[1] <= '9')
        return lwo__st_perr(P, "leading zero in %s", what);
    while ((c = lwo__st_peek(P)) >= '0' && c <= '9') {
        uint64_t d = (uint64_t)(c - '0');
        if (v > (UINT64_C(0x7fffffffffffffff) - d) / 10) return lwo__st_perr(P, "integer too large in %s", what);
        v = v * 10 + d;
        P->p++;
    }
    if (c == '.' || c == 'e' || c == 'E') return lwo__st_perr(P, "non-integer number in %s", what);
    *out = v;
    return 1;
}

/* A free-form JSON value (only inside comfy_quant entries), depth-bounded. */
static int lwo__st_skip_value(lwo__st_parser *P, int depth) {
    char b[16];
    int c;
    const char *s;
    if (depth > LWO_ST_MAX_JSON_DEPTH) return lwo__st_perr(P, "JSON nested deeper than %d", LWO_ST_MAX_JSON_DEPTH);
    lwo__st_ws(P);
    c = lwo__st_peek(P);
    if (c == '"') { size_t keep = P->pool_used; int ok = lwo__st_string(P, &s); P->pool_used = keep; return ok; }
    if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        P->p++;
        lwo__st_ws(P);
        if (lwo__st_peek(P) == close) { P->p++; return 1; }
        for (;;) {
            if (c == '{') {
                size_t keep = P->pool_used;
                if (!lwo__st_string(P, &s)) return 0;
                P->pool_used = keep;
                if (!lwo__st_expect(P, ':', "':'")) return 0;
            }
            if (!lwo__st_skip_value(P, depth + 1)) return 0;
            lwo__st_ws(P);
            if (lwo__st_peek(P) == ',') { P->p++; continue; }
            if (lwo__st_peek(P) == close) { P->p++; return 1; }
            return lwo__st_perr(P, "expected ',' or '%c', found %s", close, lwo__st_show(lwo__st_peek(P), b));
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {   /* the JSON number grammar */
        if (c == '-') P->p++;
        c = lwo__st_peek(P);
        if (c == '0') P->p++;
        else if (c >= '1' && c <= '9') { while ((c = lwo__st_peek(P)) >= '0' && c <= '9') P->p++; }
        else return lwo__st_perr(P, "bad number");
        if (lwo__st_peek(P) == '.') {
            P->p++;
            if ((c = lwo__st_peek(P)) < '0' || c > '9') return lwo__st_perr(P, "bad number");
            while ((c = lwo__st_peek(P)) >= '0' && c <= '9') P->p++;
        }
        c = lwo__st_peek(P);
        if (c == 'e' || c == 'E') {
            P->p++;
            c = lwo__st_peek(P);
            if (c == '+' || c == '-') P->p++;
            if ((c = lwo__st_peek(P)) < '0' || c > '9') return lwo__st_perr(P, "bad number");
            while ((c = lwo__st_peek(P)) >= '0' && c <= '9') P->p++;
        }
        return 1;
    }
    {
        static const char *const words[3] = { "true", "false", "null" };
        int i;
        for (i = 0; i < 3; i++) {
            size_t l = strlen(words[i]);
            if ((size_t)(P->end - P->p) >= l && memcmp(P->p, words[i], l) == 0) { P->p += l; return 1; }
        }
    }
    return lwo__st_perr(P, "expected a JSON value, found %s", lwo__st_show(c, b));
}

static int lwo__st_push_tensor(lwo_safetensors *f, lwo_st_tensor **out) {
    if (f->count == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 64;
        void *n;
        if (nc > ((size_t)-1) / sizeof(lwo_st_tensor)) return 0;
        n = LWO_REALLOC(f->tensors, nc * sizeof(lwo_st_tensor));
        if (!n) return 0;
        f->tensors = (lwo_st_tensor *)n;
        f->cap = nc;
    }
    *out = &f->tensors[f->count++];
    memset(*out, 0, sizeof **out);
    return 1;
}
static int lwo__st_push_meta(lwo_safetensors *f, const char *k, const char *v, size_t shard) {
    if (f->meta_count == f->meta_cap) {
        size_t nc = f->meta_cap ? f->meta_cap * 2 : 16;
        void *n;
        if (nc > ((size_t)-1) / sizeof(lwo__st_meta)) return 0;
        n = LWO_REALLOC(f->meta, nc * sizeof(lwo__st_meta));
        if (!n) return 0;
        f->meta = (lwo__st_meta *)n;
        f->meta_cap = nc;
    }
    f->meta[f->meta_count].key = k;
    f->meta[f->meta_count].value = v;
    f->meta[f->meta_count].shard = shard;
    f->meta[f->meta_count].order = f->meta_count;
    f->meta_count++;
    return 1;
}

/* Returns 1 ok, 0 bad file (error set), -1 out of memory. Offsets are stored relative to the
   data area in t->offset until lwo__st_check_layout makes them absolute. */
static int lwo__st_parse_tensor(lwo__st_parser *P, const char *name, size_t shard) {
    char b[16];
    int have_dtype = 0, have_shape = 0, have_off = 0;
    lwo_st_tensor *t;
    uint64_t begin = 0, end = 0;
    if (!lwo__st_push_tensor(P->f, &t)) return -1;
    t->name = name;
    t->shard = shard;
    if (!lwo__st_expect(P, '{', "'{' (a tensor entry)")) return 0;
    lwo__st_ws(P);
    if (lwo__st_peek(P) != '}') for (;;) {
        const char *key;
        size_t keep = P->pool_used;
        if (!lwo__st_string(P, &key)) return 0;
        P->pool_used = keep;   /* field names are not kept */
        if (!lwo__st_expect(P, ':', "':'")) return 0;
        if (strcmp(key, "dtype") == 0) {
            const char *dt;
            if (have_dtype++) return lwo__st_perr(P, "tensor \"%s\": duplicate field \"dtype\"", name);
            if (!lwo__st_string(P, &dt)) return 0;
            t->dtype = lwo_st_dtype_from_name(dt);
            if (t->dtype == LWO_ST_INVALID) return lwo__st_perr(P, "tensor \"%s\": unknown dtype \"%.40s\"", name, dt);
            P->pool_used = keep;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++) return lwo__st_perr(P, "tensor \"%s\": duplicate field \"shape\"", name);
            if (!lwo__st_expect(P, '[', "'[' (shape)")) return 0;
            lwo__st_ws(P);
            if (lwo__st_peek(P) == ']') P->p++;
            else for (;;) {
                uint64_t d;
                if (t->ndim == LWO_ST_MAX_DIMS) return lwo__st_perr(P, "tensor \"%s\": more than %d dimensions", name, LWO_ST_MAX_DIMS);
                if (!lwo__st_uint(P, &d, "shape")) return 0;
                t->shape[t->ndim++] = d;
                lwo__st_ws(P);
                if (lwo__st_peek(P) == ',') { P->p++; continue; }
                if (lwo__st_peek(P) == ']') { P->p++; break; }
                return lwo__st_perr(P, "tensor \"%s\": expected ',' or ']' in shape, found %s", name, lwo__st_show(lwo__st_peek(P), b));
            }
        } else if (strcmp(key, "data_offsets") == 0) {
            if (have_off++) return lwo__st_perr(P, "tensor \"%s\": duplicate field \"data_offsets\"", name);
            if (!lwo__st_expect(P, '[', "'[' (data_offsets)")) return 0;
            if (!lwo__st_uint(P, &begin, "data_offsets")) return 0;
            if (!lwo__st_expect(P, ',', "',' (data_offsets has two entries)")) return 0;
            if (!lwo__st_uint(P, &end, "data_offsets")) return 0;
            if (!lwo__st_expect(P, ']', "']' (data_offsets has two entries)")) return 0;
        } else {
            return lwo__st_perr(P, "tensor \"%s\": unknown field \"%.40s\"", name, key);
        }
        lwo__st_ws(P);
        if (lwo__st_peek(P) == ',') { P->p++; continue; }
        if (lwo__st_peek(P) == '}') break;
        return lwo__st_perr(P, "tensor \"%s\": expected ',' or '}', found %s", name, lwo__st_show(lwo__st_peek(P), b));
    }
    P->p++;
    if (!have_dtype || !have_shape || !have_off)
        return lwo__st_perr(P, "tensor \"%s\": missing field \"%s\"", name,
                            !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    if (begin > end)
        return lwo__st_perr(P, "tensor \"%s\": data_offsets [%llu, %llu] are reversed", name,
                            (unsigned long long)begin, (unsigned long long)end);
    {
        uint64_t n = 1, es = lwo_st_dtype_size(t->dtype);
        int i;
        for (i = 0; i < t->ndim; i++) {
            if (t->shape[i] && n > UINT64_MAX / t->shape[i])
                return lwo__st_perr(P, "tensor \"%s\": element count overflows", name);
            n *= t->shape[i];
        }
        if (n > UINT64_MAX / es) return lwo__st_perr(P, "tensor \"%s\": byte size overflows", name);
        t->numel = n;
        t->bytes = n * es;
        if (end - begin != t->bytes)
            return lwo__st_perr(P, "tensor \"%s\": data_offsets span %llu bytes, but %s with this shape is %llu bytes",
                                name, (unsigned long long)(end - begin), lwo_st_dtype_name(t->dtype),
                                (unsigned long long)t->bytes);
    }
    t->offset = begin;
    return 1;
}

static int lwo__st_cmp_offset(const void *a, const void *b) {
    const lwo_st_tensor *x = *(const lwo_st_tensor *const *)a, *y = *(const lwo_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}
static int lwo__st_cmp_name(const void *a, const void *b) {
    const lwo_st_tensor *x = *(const lwo_st_tensor *const *)a, *y = *(const lwo_st_tensor *const *)b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x < y ? -1 : x > y ? 1 : 0;
}
static int lwo__st_cmp_meta(const void *a, const void *b) {
    const lwo__st_meta *x = (const lwo__st_meta *)a, *y = (const lwo__st_meta *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->order < y->order ? -1 : x->order > y->order ? 1 : 0;
}

/* Tensors first..count-1 belong to shard s: sort by offset and require an exact tiling of the
   data area, then make offsets absolute and set data pointers. */
static lwo_result lwo__st_check_layout(lwo_safetensors *f, size_t s, size_t first) {
    lwo__st_shard *sh = &f->shards[s];
    uint64_t data_size = sh->size - sh->data_start, cursor = 0;
    size_t n = f->count - first, i;
    const lwo_st_tensor **v;
    if (n == 0) {
        if (data_size != 0) { lwo__st_fail(f, "%s: %llu data bytes but no tensors", sh->path, (unsigned long long)data_size); return LWO_ERROR_BAD_FILE; }
        return LWO_SUCCESS;
    }
    if (n > ((size_t)-1) / sizeof *v) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    v = (const lwo_st_tensor **)LWO_MALLOC(n * sizeof *v);
    if (!v) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < n; i++) v[i] = &f->tensors[first + i];
    qsort(v, n, sizeof *v, lwo__st_cmp_offset);
    for (i = 0; i < n; i++) {
        const lwo_st_tensor *t = v[i];
        uint64_t end = t->offset + t->bytes;   /* no overflow: end came from the file as a uint */
        if (end > data_size) {
            lwo__st_fail(f, "%s: tensor \"%s\": data_offsets [%llu, %llu] past the end of the data (%llu bytes)",
                         sh->path, t->name, (unsigned long long)t->offset, (unsigned long long)end,
                         (unsigned long long)data_size);
            LWO_FREE(v); return LWO_ERROR_BAD_FILE;
        }
        if (t->offset > cursor) {
            lwo__st_fail(f, "%s: data bytes [%llu, %llu) (file offset %llu) belong to no tensor (a hole before \"%s\")",
                         sh->path, (unsigned long long)cursor, (unsigned long long)t->offset,
                         (unsigned long long)(sh->data_start + cursor), t->name);
            LWO_FREE(v); return LWO_ERROR_BAD_FILE;
        }
        if (t->offset < cursor) {
            lwo__st_fail(f, "%s: tensor \"%s\" (data_offsets [%llu, %llu]) overlaps tensor \"%s\"",
                         sh->path, t->name, (unsigned long long)t->offset, (unsigned long long)end, v[i - 1]->name);
            LWO_FREE(v); return LWO_ERROR_BAD_FILE;
        }
        cursor = end;
    }
    LWO_FREE(v);
    if (cursor != data_size) {
        lwo__st_fail(f, "%s: trailing data bytes [%llu, %llu) (file offset %llu) belong to no tensor", sh->path,
                     (unsigned long long)cursor, (unsigned long long)data_size,
                     (unsigned long long)(sh->data_start + cursor));
        return LWO_ERROR_BAD_FILE;
    }
    for (i = first; i < f->count; i++) {
        lwo_st_tensor *t = &f->tensors[i];
        t->data = sh->base + sh->data_start + t->offset;
        t->offset += sh->data_start;
    }
    return LWO_SUCCESS;
}

static lwo_result lwo__st_parse_shard(lwo_safetensors *f, size_t s) {
    lwo__st_shard *sh = &f->shards[s];
    lwo__st_parser P;
    uint64_t hlen = 0;
    size_t first = f->count;
    int i, have_meta = 0, r;
    char b[16];
    if (sh->size < 8) {
        lwo__st_fail(f, "%s: file is %llu bytes, shorter than the 8-byte header length", sh->path, (unsigned long long)sh->size);
        return LWO_ERROR_BAD_FILE;
    }
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | sh->base[i];
    if (hlen > sh->size - 8) {
        lwo__st_fail(f, "%s: header length %llu runs past the end of the file (%llu bytes after the length)",
                     sh->path, (unsigned long long)hlen, (unsigned long long)(sh->size - 8));
        return LWO_ERROR_BAD_FILE;
    }
    if (hlen > LWO_SAFETENSORS_MAX_HEADER) {
        lwo__st_fail(f, "%s: header length %llu is over the limit LWO_SAFETENSORS_MAX_HEADER (%llu)", sh->path,
                     (unsigned long long)hlen, (unsigned long long)LWO_SAFETENSORS_MAX_HEADER);
        return LWO_ERROR_BAD_FILE;
    }
    sh->data_start = 8 + hlen;
    sh->pool = (char *)LWO_MALLOC((size_t)hlen + 1);
    if (!sh->pool) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    memset(&P, 0, sizeof P);
    P.f = f;
    P.what = sh->path;
    P.begin = P.p = sh->base + 8;
    P.end = P.begin + hlen;
    P.file_offset = 8;
    P.pool = sh->pool;
    P.pool_cap = (size_t)hlen + 1;
    if (lwo__st_peek(&P) != '{') {
        lwo__st_perr(&P, "the header must start with '{', found %s", lwo__st_show(lwo__st_peek(&P), b));
        return LWO_ERROR_BAD_FILE;
    }
    P.p++;
    lwo__st_ws(&P);
    if (lwo__st_peek(&P) != '}') for (;;) {
        const char *key;
        if (!lwo__st_string(&P, &key)) return LWO_ERROR_BAD_FILE;
        if (!lwo__st_expect(&P, ':', "':'")) return LWO_ERROR_BAD_FILE;
        if (strcmp(key, "__metadata__") == 0) {
            if (have_meta++) { lwo__st_perr(&P, "duplicate \"__metadata__\""); return LWO_ERROR_BAD_FILE; }
            if (!lwo__st_expect(&P, '{', "'{' (__metadata__ must be an object)")) return LWO_ERROR_BAD_FILE;
            lwo__st_ws(&P);
            if (lwo__st_peek(&P) != '}') for (;;) {
                const char *k, *v;
                if (!lwo__st_string(&P, &k)) return LWO_ERROR_BAD_FILE;
                if (!lwo__st_expect(&P, ':', "':'")) return LWO_ERROR_BAD_FILE;
                lwo__st_ws(&P);
                if (lwo__st_peek(&P) != '"') {
                    lwo__st_perr(&P, "metadata value of \"%s\" must be a string", k);
                    return LWO_ERROR_BAD_FILE;
                }
                if (!lwo__st_string(&P, &v)) return LWO_ERROR_BAD_FILE;
                if (!lwo__st_push_meta(f, k, v, s)) return LWO_ERROR_OUT_OF_HOST_MEMORY;
                lwo__st_ws(&P);
                if (lwo__st_peek(&P) == ',') { P.p++; continue; }
                if (lwo__st_peek(&P) == '}') break;
                lwo__st_perr(&P, "expected ',' or '}' in __metadata__, found %s", lwo__st_show(lwo__st_peek(&P), b));
                return LWO_ERROR_BAD_FILE;
            }
            P.p++;
        } else {
            r = lwo__st_parse_tensor(&P, key, s);
            if (r < 0) return LWO_ERROR_OUT_OF_HOST_MEMORY;
            if (r == 0) return LWO_ERROR_BAD_FILE;
        }
        lwo__st_ws(&P);
        if (lwo__st_peek(&P) == ',') { P.p++; continue; }
        if (lwo__st_peek(&P) == '}') break;
        lwo__st_perr(&P, "expected ',' or '}' at the top level, found %s", lwo__st_show(lwo__st_peek(&P), b));
        return LWO_ERROR_BAD_FILE;
    }
    P.p++;
    lwo__st_ws(&P);
    if (P.p != P.end) {
        lwo__st_perr(&P, "unexpected %s after the header's closing '}'", lwo__st_show(lwo__st_peek(&P), b));
        return LWO_ERROR_BAD_FILE;
    }
    return lwo__st_check_layout(f, s, first);
}

/* After every shard parsed: name index (duplicates are errors) and metadata (sorted; duplicates
   within a file are errors, across files the first file's value wins). */
static lwo_result lwo__st_finish(lwo_safetensors *f) {
    size_t i, j;
    if (f->count) {
        if (f->count > ((size_t)-1) / sizeof *f->by_name) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        f->by_name = (const lwo_st_tensor **)LWO_MALLOC(f->count * sizeof *f->by_name);
        if (!f->by_name) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        for (i = 0; i < f->count; i++) f->by_name[i] = &f->tensors[i];
        qsort(f->by_name, f->count, sizeof *f->by_name, lwo__st_cmp_name);
        for (i = 1; i < f->count; i++) {
            const lwo_st_tensor *a = f->by_name[i - 1], *b = f->by_name[i];
            if (strcmp(a->name, b->name) == 0) {
                if (a->shard == b->shard)
                    lwo__st_fail(f, "%s: duplicate tensor name \"%s\"", f->shards[a->shard].path, a->name);
                else
                    lwo__st_fail(f, "tensor \"%s\" is in both %s and %s", a->name, f->shards[a->shard].path,
                                 f->shards[b->shard].path);
                return LWO_ERROR_BAD_FILE;
            }
        }
    }
    if (f->meta_count) {
        qsort(f->meta, f->meta_count, sizeof *f->meta, lwo__st_cmp_meta);
        for (i = 1, j = 1; i < f->meta_count; i++) {
            if (strcmp(f->meta[i].key, f->meta[j - 1].key) == 0) {
                if (f->meta[i].shard == f->meta[j - 1].shard) {
                    lwo__st_fail(f, "%s: duplicate metadata key \"%s\"", f->shards[f->meta[i].shard].path, f->meta[i].key);
                    return LWO_ERROR_BAD_FILE;
                }
                continue;   /* a later shard's copy: the first wins */
            }
            f->meta[j++] = f->meta[i];
        }
        f->meta_count = j;
    }
    f->ready = 1;
    return LWO_SUCCESS;
}

static lwo_result lwo__st_new(size_t shards, lwo_safetensors **out) {
    lwo_safetensors *f = (lwo_safetensors *)LWO_MALLOC(sizeof *f);
    *out = NULL;
    if (!f) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    memset(f, 0, sizeof *f);
    if (shards) {
        if (shards > ((size_t)-1) / sizeof *f->shards) { LWO_FREE(f); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        f->shards = (lwo__st_shard *)LWO_MALLOC(shards * sizeof *f->shards);
        if (!f->shards) { LWO_FREE(f); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        memset(f->shards, 0, shards * sizeof *f->shards);
    }
    *out = f;
    return LWO_SUCCESS;
}
static char *lwo__st_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)LWO_MALLOC(n);
    if (d) memcpy(d, s, n);
    return d;
}

LWO_API void lwo_safetensors_close(lwo_safetensors *f) {
    size_t i;
    if (!f) return;
    for (i = 0; i < f->shard_count; i++) {
        lwo__st_shard *sh = &f->shards[i];
        if (sh->mapped && sh->size) munmap((void *)(uintptr_t)sh->base, (size_t)sh->size);
        LWO_FREE(sh->pool);
        LWO_FREE(sh->path);
    }
    LWO_FREE(f->shards);
    LWO_FREE(f->tensors);
    LWO_FREE(f->by_name);
    LWO_FREE(f->meta);
    LWO_FREE(f);
}

static lwo_result lwo__st_map(lwo_safetensors *f, lwo__st_shard *sh, const char *path) {
    struct stat st;
    void *m;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { lwo__st_fail(f, "%s: cannot open: %s", path, strerror(errno)); return LWO_ERROR_IO; }
    if (fstat(fd, &st) != 0) { lwo__st_fail(f, "%s: cannot stat: %s", path, strerror(errno)); close(fd); return LWO_ERROR_IO; }
    if (!S_ISREG(st.st_mode)) { lwo__st_fail(f, "%s: not a regular file", path); close(fd); return LWO_ERROR_IO; }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)((size_t)-1)) {
        lwo__st_fail(f, "%s: file too large to map", path); close(fd); return LWO_ERROR_IO;
    }
    sh->size = (uint64_t)st.st_size;
    if (sh->size == 0) { close(fd); sh->base = (const uint8_t *)""; return LWO_SUCCESS; }
    m = mmap(NULL, (size_t)sh->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { lwo__st_fail(f, "%s: cannot map: %s", path, strerror(errno)); sh->size = 0; return LWO_ERROR_IO; }
    sh->base = (const uint8_t *)m;
    sh->mapped = 1;
    return LWO_SUCCESS;
}

LWO_API lwo_result lwo_safetensors_open_many(const char *const *paths, size_t count, lwo_safetensors **out) {
    lwo_safetensors *f;
    lwo_result r;
    size_t i;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    r = lwo__st_new(count, out);
    if (r != LWO_SUCCESS) return r;
    f = *out;
    if (!paths || count == 0) { lwo__st_fail(f, "lwo_safetensors_open_many: no paths"); return LWO_ERROR_INVALID_ARGUMENT; }
    for (i = 0; i < count; i++) {
        if (!paths[i]) { lwo__st_fail(f, "lwo_safetensors_open_many: paths[%llu] is NULL", (unsigned long long)i); return LWO_ERROR_INVALID_ARGUMENT; }
        f->shards[i].path = lwo__st_strdup(paths[i]);
        if (!f->shards[i].path) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        f->shard_count = i + 1;
        r = lwo__st_map(f, &f->shards[i], paths[i]);
        if (r != LWO_SUCCESS) return r;
        r = lwo__st_parse_shard(f, i);
        if (r != LWO_SUCCESS) return r;
    }
    return lwo__st_finish(f);
}
LWO_API lwo_result lwo_safetensors_open(const char *path, lwo_safetensors **out) {
    if (!path) {
        lwo_result r;
        if (!out) return LWO_ERROR_INVALID_ARGUMENT;
        r = lwo__st_new(0, out);
        if (r != LWO_SUCCESS) return r;
        lwo__st_fail(*out, "lwo_safetensors_open: path is NULL");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    return lwo_safetensors_open_many(&path, 1, out);
}
LWO_API lwo_result lwo_safetensors_open_memory(const void *data, size_t size, lwo_safetensors **out) {
    lwo_safetensors *f;
    lwo_result r;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    r = lwo__st_new(1, out);
    if (r != LWO_SUCCESS) return r;
    f = *out;
    if (!data && size) { lwo__st_fail(f, "lwo_safetensors_open_memory: data is NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    f->shards[0].path = lwo__st_strdup("<memory>");
    if (!f->shards[0].path) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    f->shard_count = 1;
    f->shards[0].base = data ? (const uint8_t *)data : (const uint8_t *)"";
    f->shards[0].size = size;
    r = lwo__st_parse_shard(f, 0);
    if (r != LWO_SUCCESS) return r;
    return lwo__st_finish(f);
}

LWO_API const char *lwo_safetensors_error(const lwo_safetensors *f) { return f ? f->error : "lwo_safetensors is NULL"; }
LWO_API size_t lwo_safetensors_count(const lwo_safetensors *f) { return f && f->ready ? f->count : 0; }
LWO_API const lwo_st_tensor *lwo_safetensors_tensor(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->count) ? &f->tensors[i] : NULL;
}
LWO_API const lwo_st_tensor *lwo_safetensors_find(const lwo_safetensors *f, const char *name) {
    size_t lo = 0, hi;
    if (!f || !f->ready || !f->by_name || !name) return NULL;
    hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}
LWO_API size_t lwo_safetensors_metadata_count(const lwo_safetensors *f) { return f && f->ready ? f->meta_count : 0; }
LWO_API const char *lwo_safetensors_metadata_key(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->meta_count) ? f->meta[i].key : NULL;
}
LWO_API const char *lwo_safetensors_metadata_value(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->meta_count) ? f->meta[i].value : NULL;
}
LWO_API const char *lwo_safetensors_metadata_find(const lwo_safetensors *f, const char *key) {
    size_t lo = 0, hi;
    if (!f || !f->ready || !key) return NULL;
    hi = f->meta_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->meta[mid].key, key);
        if (c == 0) return f->meta[mid].value;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

/* ---- number codecs (the CPU conversion) ---------------------------------------------------- */
static float lwo__st_bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float v; memcpy(&v, &u, 4); return v; }
static uint16_t lwo__st_f32_to_bf16(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   /* NaN, made quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float lwo__st_f16_to_f32(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? (float)ldexp((double)m, -24) : e == 31 ? (m ? (float)NAN : (float)INFINITY)
                     : (float)ldexp((double)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}
static float lwo__st_fp8_to_f32(uint8_t c, int e5m2) {
    float v;
    if (e5m2) {
        int e = (c >> 2) & 31, m = c & 3;
        v = e == 31 ? (m ? (float)NAN : (float)INFINITY) : e == 0 ? (float)ldexp((double)m, -16)
                    : (float)ldexp((double)(4 + m), e - 17);
    } else {
        int e = (c >> 3) & 15, m = c & 7;
        v = (c & 0x7f) == 0x7f ? (float)NAN : e == 0 ? (float)ldexp((double)m, -9) : (float)ldexp((double)(8 + m), e - 10);
    }
    return (c & 0x80) ? -v : v;
}
/* Round-to-nearest-even of a >= 0 (finite) to a format of `mbits` mantissa bits and exponent
   `bias`, as the unsigned code (exponent field << mbits | mantissa); subnormals included. The
   caller handles saturation or overflow for codes past its largest finite one. */
static uint32_t lwo__st_encode_mag(double a, int mbits, int bias) {
    int e, emin = 1 - bias;
    double q, r, d;
    uint32_t m;
    if (a == 0) return 0;
    (void)frexp(a, &e);
    e -= 1;                                 /* a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    q = ldexp(a, mbits - e);                /* a in units of the ulp at exponent e: exact */
    r = floor(q);
    d = q - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    m = (uint32_t)r;
    if (m >= (2u << mbits)) { m >>= 1; e += 1; }   /* rounding carried into the next binade */
    if (m < (1u << mbits)) return m;               /* subnormal (e == emin) or zero */
    return ((uint32_t)(e + bias) << mbits) | (m - (1u << mbits));
}
static uint16_t lwo__st_f32_to_f16(float v) {
    uint16_t s = signbit(v) ? 0x8000 : 0;
    uint32_t c;
    if (isnan(v)) return (uint16_t)(s | 0x7e00);
    if (isinf(v)) return (uint16_t)(s | 0x7c00);
    c = lwo__st_encode_mag(fabs((double)v), 10, 15);
    if (c >= 0x7c00) c = 0x7c00;                   /* overflow to inf */
    return (uint16_t)(s | c);
}
static uint8_t lwo__st_f32_to_fp8(float v, int e5m2) {
    uint8_t s = signbit(v) ? 0x80 : 0;
    double a;
    uint32_t c, maxc = e5m2 ? 0x7b : 0x7e;
    if (isnan(v)) return (uint8_t)(s | (e5m2 ? 0x7e : 0x7f));
    a = fabs((double)v);
    if (a >= (e5m2 ? 57344.0 : 448.0)) return (uint8_t)(s | maxc);   /* saturate (inf too) */
    c = e5m2 ? lwo__st_encode_mag(a, 2, 15) : lwo__st_encode_mag(a, 3, 7);
    if (c > maxc) c = maxc;
    return (uint8_t)(s | c);
}
static float lwo__st_rne(float x) {   /* |x| < 2^23 */
    float r = floorf(x), d = x - r;
    if (d > 0.5f || (d == 0.5f && fmodf(r, 2.0f) != 0.0f)) r += 1.0f;
    return r;
}
/* Element i of `data` (dtype t, unaligned) as f32. */
static float lwo__st_load(const void *data, lwo_st_dtype t, uint64_t i) {
    const uint8_t *p = (const uint8_t *)data + i * lwo_st_dtype_size(t);
    switch (t) {
    case LWO_ST_F64: { double d; memcpy(&d, p, 8); return (float)d; }
    case LWO_ST_F32: { float f; memcpy(&f, p, 4); return f; }
    case LWO_ST_F16: { uint16_t h; memcpy(&h, p, 2); return lwo__st_f16_to_f32(h); }
    case LWO_ST_BF16: { uint16_t h; memcpy(&h, p, 2); return lwo__st_bf16_to_f32(h); }
    case LWO_ST_F8_E4M3: return lwo__st_fp8_to_f32(*p, 0);
    case LWO_ST_F8_E5M2: return lwo__st_fp8_to_f32(*p, 1);
    case LWO_ST_I64: { int64_t x; memcpy(&x, p, 8); return (float)x; }
    case LWO_ST_I32: { int32_t x; memcpy(&x, p, 4); return (float)x; }
    case LWO_ST_I16: { int16_t x; memcpy(&x, p, 2); return (float)x; }
    case LWO_ST_I8: return (float)(int8_t)*p;
    case LWO_ST_U8: return (float)*p;
    case LWO_ST_BOOL: return *p ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/* ---- quantized-checkpoint conventions ------------------------------------------------------ */
static int lwo__st_scalar(const lwo_st_tensor *t, float *v) {
    if (!t || t->numel != 1) return 0;
    if (t->dtype != LWO_ST_F32 && t->dtype != LWO_ST_F16 && t->dtype != LWO_ST_BF16 && t->dtype != LWO_ST_F64) return 0;
    *v = lwo__st_load(t->data, t->dtype, 0);
    return 1;
}
static const lwo_st_tensor *lwo__st_find_suffix(const lwo_safetensors *f, const char *prefix, size_t plen,
                                                 const char *suffix, char *buf, size_t bufsize) {
    size_t sl = strlen(suffix);
    if (sl > bufsize - 1 - plen) return NULL;
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, suffix, sl + 1);
    return lwo_safetensors_find(f, buf);
}
/* Reads the comfy_quant JSON object and copies its top-level "format" string. */
static int lwo__st_comfy_json(lwo_safetensors *f, const lwo_st_tensor *t, char *format, size_t fsize) {
    lwo__st_parser P;
    char what[300], b[16];
    int ok = 1;
    snprintf(what, sizeof what, "%s: tensor \"%.200s\"", f->shards[t->shard].path, t->name);
    memset(&P, 0, sizeof P);
    P.f = f;
    P.what = what;
    P.begin = P.p = (const uint8_t *)t->data;
    P.end = P.begin + t->bytes;
    P.file_offset = t->offset;
    P.pool_cap = (size_t)t->bytes + 1;
    P.pool = (char *)LWO_MALLOC(P.pool_cap);
    if (!P.pool) { lwo__st_fail(f, "out of host memory"); return -1; }
    format[0] = 0;
    if (!lwo__st_expect(&P, '{', "'{' (comfy_quant holds a JSON object)")) ok = 0;
    lwo__st_ws(&P);
    if (ok && lwo__st_peek(&P) == '}') P.p++;
    else while (ok) {
        const char *k, *v;
        if (!lwo__st_string(&P, &k) || !lwo__st_expect(&P, ':', "':'")) { ok = 0; break; }
        lwo__st_ws(&P);
        if (strcmp(k, "format") == 0) {
            if (lwo__st_peek(&P) != '"') { ok = lwo__st_perr(&P, "\"format\" must be a string"); break; }
            if (!lwo__st_string(&P, &v)) { ok = 0; break; }
            snprintf(format, fsize, "%s", v);
        } else if (!lwo__st_skip_value(&P, 1)) { ok = 0; break; }
        lwo__st_ws(&P);
        if (lwo__st_peek(&P) == ',') { P.p++; continue; }
        if (lwo__st_peek(&P) == '}') { P.p++; break; }
        ok = lwo__st_perr(&P, "expected ',' or '}', found %s", lwo__st_show(lwo__st_peek(&P), b));
    }
    if (ok) {
        lwo__st_ws(&P);
        while (P.p < P.end && *P.p == 0) P.p++;   /* tolerate NUL padding after the object */
        if (P.p != P.end) ok = lwo__st_perr(&P, "unexpected %s after the JSON object", lwo__st_show(lwo__st_peek(&P), b));
    }
    if (ok && !format[0]) ok = lwo__st_perr(&P, "no \"format\" in comfy_quant");
    LWO_FREE(P.pool);
    return ok;
}

LWO_API lwo_result lwo_safetensors_quant_info(lwo_safetensors *f, const char *weight_name, lwo_st_quant *out) {
    char buf[1024];
    const lwo_st_tensor *w, *cq;
    const char *lq;
    size_t nl, plen;
    if (!f || !weight_name || !out) { if (f) lwo__st_fail(f, "lwo_safetensors_quant_info: NULL argument"); return LWO_ERROR_INVALID_ARGUMENT; }
    memset(out, 0, sizeof *out);
    out->weight_scale_value = out->input_scale_value = 1.0f;
    w = lwo_safetensors_find(f, weight_name);
    if (!w) { lwo__st_fail(f, "no tensor \"%.300s\"", weight_name); return LWO_ERROR_NOT_FOUND; }
    out->weight = w;
    nl = strlen(weight_name);
    if (nl < 7 || strcmp(weight_name + nl - 7, ".weight") != 0 || nl - 7 > sizeof buf - 32) return LWO_SUCCESS;
    plen = nl - 7;   /* "<prefix>" without ".weight" */

    cq = lwo__st_find_suffix(f, weight_name, plen, ".comfy_quant", buf, sizeof buf);
    if (cq) {
        int r;
        if (cq->dtype != LWO_ST_U8 || cq->ndim != 1) {
            lwo__st_fail(f, "tensor \"%s\": comfy_quant must be U8 [n], found %s with %d dims", cq->name,
                         lwo_st_dtype_name(cq->dtype), cq->ndim);
            return LWO_ERROR_BAD_FILE;
        }
        r = lwo__st_comfy_json(f, cq, out->comfy_format, sizeof out->comfy_format);
        if (r < 0) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        if (!r) return LWO_ERROR_BAD_FILE;
        if ((strcmp(out->comfy_format, "float8_e4m3fn") == 0 && w->dtype != LWO_ST_F8_E4M3) ||
            (strcmp(out->comfy_format, "float8_e5m2") == 0 && w->dtype != LWO_ST_F8_E5M2)) {
            lwo__st_fail(f, "tensor \"%s\": comfy_quant says %s but the weight is %s", w->name, out->comfy_format,
                         lwo_st_dtype_name(w->dtype));
            return LWO_ERROR_BAD_FILE;
        }
        out->format = LWO_ST_QUANT_COMFY_QUANT;
        out->weight_scale = lwo__st_find_suffix(f, weight_name, plen, ".weight_scale", buf, sizeof buf);
        out->input_scale = lwo__st_find_suffix(f, weight_name, plen, ".input_scale", buf, sizeof buf);
        (void)lwo__st_scalar(out->weight_scale, &out->weight_scale_value);
        (void)lwo__st_scalar(out->input_scale, &out->input_scale_value);
        return LWO_SUCCESS;
    }

    lq = lwo_safetensors_metadata_find(f, "lwo.quant");
    if (lq && strcmp(lq, LWO_ST_QUANT_LWO_INT8_V1) == 0 && w->dtype == LWO_ST_I8) {
        const lwo_st_tensor *s = lwo__st_find_suffix(f, weight_name, plen, ".weight_scale", buf, sizeof buf);
        const lwo_st_tensor *sm = lwo__st_find_suffix(f, weight_name, plen, ".smooth", buf, sizeof buf);
        if (w->ndim != 2) { lwo__st_fail(f, "tensor \"%s\": lwo int8 weights are [N, K], this has %d dims", w->name, w->ndim); return LWO_ERROR_BAD_FILE; }
        if (!s || s->dtype != LWO_ST_F32 || s->ndim != 1 || s->shape[0] != w->shape[0]) {
            lwo__st_fail(f, "tensor \"%s\": lwo int8 needs %.*s.weight_scale F32 [%llu]", w->name, (int)plen, weight_name,
                         (unsigned long long)w->shape[0]);
            return LWO_ERROR_BAD_FILE;
        }
        if (sm && (sm->dtype != LWO_ST_F32 || sm->ndim != 1 || sm->shape[0] != w->shape[1])) {
            lwo__st_fail(f, "tensor \"%s\": must be F32 [%llu]", sm->name, (unsigned long long)w->shape[1]);
            return LWO_ERROR_BAD_FILE;
        }
        out->format = LWO_ST_QUANT_LWO_INT8;
        out->weight_scale = s;
        out->smooth = sm;
        (void)lwo__st_scalar(s, &out->weight_scale_value);
        return LWO_SUCCESS;
    }

    if (lwo_safetensors_find(f, "scaled_fp8") && (w->dtype == LWO_ST_F8_E4M3 || w->dtype == LWO_ST_F8_E5M2)) {
        out->format = LWO_ST_QUANT_COMFY_SCALED_FP8;
        out->weight_scale = lwo__st_find_suffix(f, weight_name, plen, ".scale_weight", buf, sizeof buf);
        out->input_scale = lwo__st_find_suffix(f, weight_name, plen, ".scale_input", buf, sizeof buf);
        if (out->weight_scale && !lwo__st_scalar(out->weight_scale, &out->weight_scale_value)) {
            lwo__st_fail(f, "tensor \"%s\": scale_weight must be one float, found %s with %llu elements",
                         out->weight_scale->name, lwo_st_dtype_name(out->weight_scale->dtype),
                         (unsigned long long)out->weight_scale->numel);
            return LWO_ERROR_BAD_FILE;
        }
        (void)lwo__st_scalar(out->input_scale, &out->input_scale_value);
        return LWO_SUCCESS;
    }
    return LWO_SUCCESS;
}

/* ---- writer -------------------------------------------------------------------------------- */
typedef struct lwo__st_buf { char *p; size_t n, cap; int oom; } lwo__st_buf;
static void lwo__st_put(lwo__st_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t nc = b->cap ? b->cap : 256;
        void *np;
        while (n > nc - b->n) { if (nc > ((size_t)-1) / 2) { b->oom = 1; return; } nc *= 2; }
        np = LWO_REALLOC(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = (char *)np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void lwo__st_puts(lwo__st_buf *b, const char *s) { lwo__st_put(b, s, strlen(s)); }
static void lwo__st_put_json(lwo__st_buf *b, const char *s) {
    lwo__st_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[8];
        if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; lwo__st_put(b, e, 2); }
        else if (c < 0x20) { snprintf(e, sizeof e, "\\u%04x", c); lwo__st_put(b, e, 6); }
        else lwo__st_put(b, s, 1);
    }
    lwo__st_put(b, "\"", 1);
}
static void lwo__st_put_u64(lwo__st_buf *b, uint64_t v) {
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    lwo__st_puts(b, t);
}
static int lwo__st_write_all(int fd, const void *data, uint64_t n) {
    const char *p = (const char *)data;
    while (n) {
        size_t chunk = n > (uint64_t)(1u << 30) ? (size_t)(1u << 30) : (size_t)n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) { if (errno == EINTR) continue; return 0; }
        if (w == 0) { errno = EIO; return 0; }
        p += w;
        n -= (uint64_t)w;
    }
    return 1;
}
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void lwo__st_werr(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;
    if (!err || !err_size) return;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}
static int lwo__st_cmp_write(const void *a, const void *b) {
    const lwo_st_write_tensor *x = *(const lwo_st_write_tensor *const *)a, *y = *(const lwo_st_write_tensor *const *)b;
    size_t sx = lwo_st_dtype_size(x->dtype), sy = lwo_st_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}
static int lwo__st_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

LWO_API lwo_result lwo_safetensors_write(const char *path, const lwo_st_write_tensor *tensors, size_t count,
                                         const char *const *meta_keys, const char *const *meta_values,
                                         size_t meta_count, char *err, size_t err_size) {
    const lwo_st_write_tensor **order = NULL;
    const char **keys = NULL;
    lwo__st_buf h;
    char *tmp = NULL;
    size_t i, pad;
    uint64_t off = 0, hl;
    uint8_t len8[8];
    int fd = -1;
    lwo_result r = LWO_ERROR_INVALID_ARGUMENT;
    memset(&h, 0, sizeof h);
    if (err && err_size) err[0] = 0;
    if (!path || (count && !tensors) || (meta_count && (!meta_keys || !meta_values))) {
        lwo__st_werr(err, err_size, "lwo_safetensors_write: NULL path, tensors or metadata");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if (count > ((size_t)-1) / sizeof *order - 1 || meta_count > ((size_t)-1) / sizeof *keys - 1) {
        lwo__st_werr(err, err_size, "lwo_safetensors_write: count too large");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    order = (const lwo_st_write_tensor **)LWO_MALLOC((count + 1) * sizeof *order);
    keys = (const char **)LWO_MALLOC((meta_count + 1) * sizeof *keys);
    if (!order || !keys) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
    for (i = 0; i < meta_count; i++) {
        if (!meta_keys[i] || !meta_values[i]) { lwo__st_werr(err, err_size, "metadata %llu: NULL key or value", (unsigned long long)i); goto done; }
        if (!lwo__st_utf8_valid(meta_keys[i]) || !lwo__st_utf8_valid(meta_values[i])) {
            lwo__st_werr(err, err_size, "metadata %llu: key or value is not valid UTF-8", (unsigned long long)i); goto done;
        }
        keys[i] = meta_keys[i];
    }
    qsort(keys, meta_count, sizeof *keys, lwo__st_cmp_str);
    for (i = 1; i < meta_count; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) { lwo__st_werr(err, err_size, "duplicate metadata key \"%.200s\"", keys[i]); goto done; }
    for (i = 0; i < count; i++) {
        const lwo_st_write_tensor *t = &tensors[i];
        uint64_t n = 1, es;
        int d;
        if (!t->name) { lwo__st_werr(err, err_size, "tensors[%llu]: NULL name", (unsigned long long)i); goto done; }
        if (!lwo__st_utf8_valid(t->name)) { lwo__st_werr(err, err_size, "tensors[%llu]: name is not valid UTF-8", (unsigned long long)i); goto done; }
        if (strcmp(t->name, "__metadata__") == 0) { lwo__st_werr(err, err_size, "tensors[%llu]: the name \"__metadata__\" is reserved", (unsigned long long)i); goto done; }
        es = lwo_st_dtype_size(t->dtype);
        if (!es) { lwo__st_werr(err, err_size, "tensor \"%.200s\": invalid dtype %d", t->name, (int)t->dtype); goto done; }
        if (t->ndim < 0 || t->ndim > LWO_ST_MAX_DIMS || (t->ndim && !t->shape)) {
            lwo__st_werr(err, err_size, "tensor \"%.200s\": ndim %d (0..%d, with a shape)", t->name, t->ndim, LWO_ST_MAX_DIMS); goto done;
        }
        for (d = 0; d < t->ndim; d++) {
            if (t->shape[d] > UINT64_C(0x7fffffffffffffff) || (t->shape[d] && n > UINT64_MAX / t->shape[d])) {
                lwo__st_werr(err, err_size, "tensor \"%.200s\": shape overflows", t->name); goto done;
            }
            n *= t->shape[d];
        }
        if (n > UINT64_MAX / es || n * es != t->bytes) {
            lwo__st_werr(err, err_size, "tensor \"%.200s\": bytes %llu, but %s with this shape is %llu bytes", t->name,
                         (unsigned long long)t->bytes, lwo_st_dtype_name(t->dtype), (unsigned long long)(n * es));
            goto done;
        }
        if (t->bytes && !t->data) { lwo__st_werr(err, err_size, "tensor \"%.200s\": NULL data", t->name); goto done; }
        if (t->bytes > UINT64_C(0x7fffffffffffffff) - off) { lwo__st_werr(err, err_size, "total size overflows"); goto done; }
        off += t->bytes;
        order[i] = t;
    }
    qsort(order, count, sizeof *order, lwo__st_cmp_write);
    {   /* unique names, through a name-sorted copy */
        const char **names = (const char **)LWO_MALLOC((count + 1) * sizeof *names);
        if (!names) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
        for (i = 0; i < count; i++) names[i] = tensors[i].name;
        qsort(names, count, sizeof *names, lwo__st_cmp_str);
        for (i = 1; i < count; i++)
            if (strcmp(names[i - 1], names[i]) == 0) {
                lwo__st_werr(err, err_size, "duplicate tensor name \"%.200s\"", names[i]);
                LWO_FREE(names); goto done;
            }
        LWO_FREE(names);
    }

    lwo__st_puts(&h, "{");
    if (meta_count) {
        lwo__st_puts(&h, "\"__metadata__\":{");
        for (i = 0; i < meta_count; i++) {
            size_t k;
            for (k = 0; k < meta_count; k++) if (meta_keys[k] == keys[i]) break;  /* value of this key */
            if (i) lwo__st_puts(&h, ",");
            lwo__st_put_json(&h, keys[i]);
            lwo__st_puts(&h, ":");
            lwo__st_put_json(&h, meta_values[k]);
        }
        lwo__st_puts(&h, "}");
    }
    off = 0;
    for (i = 0; i < count; i++) {
        const lwo_st_write_tensor *t = order[i];
        int d;
        if (i || meta_count) lwo__st_puts(&h, ",");
        lwo__st_put_json(&h, t->name);
        lwo__st_puts(&h, ":{\"dtype\":\"");
        lwo__st_puts(&h, lwo_st_dtype_name(t->dtype));
        lwo__st_puts(&h, "\",\"shape\":[");
        for (d = 0; d < t->ndim; d++) { if (d) lwo__st_puts(&h, ","); lwo__st_put_u64(&h, t->shape[d]); }
        lwo__st_puts(&h, "],\"data_offsets\":[");
        lwo__st_put_u64(&h, off);
        lwo__st_puts(&h, ",");
        off += t->bytes;
        lwo__st_put_u64(&h, off);
        lwo__st_puts(&h, "]}");
    }
    lwo__st_puts(&h, "}");
    pad = (8 - h.n % 8) % 8;
    for (i = 0; i < pad; i++) lwo__st_puts(&h, " ");
    if (h.oom) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
    if (h.n > LWO_SAFETENSORS_MAX_HEADER) {
        lwo__st_werr(err, err_size, "header of %llu bytes is over LWO_SAFETENSORS_MAX_HEADER", (unsigned long long)h.n); goto done;
    }
    hl = h.n;
    for (i = 0; i < 8; i++) len8[i] = (uint8_t)(hl >> (8 * i));

    {
        size_t pl = strlen(path), tl = pl + 32;
        tmp = (char *)LWO_MALLOC(tl);
        if (!tmp) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
        snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
    }
    r = LWO_ERROR_IO;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { lwo__st_werr(err, err_size, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    if (!lwo__st_write_all(fd, len8, 8) || !lwo__st_write_all(fd, h.p, h.n)) goto werr;
    for (i = 0; i < count; i++)
        if (order[i]->bytes && !lwo__st_write_all(fd, order[i]->data, order[i]->bytes)) goto werr;
    if (fsync(fd) != 0) goto werr;
    if (close(fd) != 0) { fd = -1; goto werr; }
    fd = -1;
    if (rename(tmp, path) != 0) { lwo__st_werr(err, err_size, "rename %s -> %s: %s", tmp, path, strerror(errno)); goto done; }
    LWO_FREE(tmp);
    tmp = NULL;
    r = LWO_SUCCESS;
    goto done;
werr:
    lwo__st_werr(err, err_size, "%s: write failed: %s", tmp, strerror(errno));
done:
    if (fd >= 0) close(fd);
    if (tmp) { if (r == LWO_ERROR_IO) unlink(tmp); LWO_FREE(tmp); }
    LWO_FREE(h.p);
    LWO_FREE(order);
    LWO_FREE(keys);
    return r;
}

/* ---- storage policy ------------------------------------------------------------------------ */
static const char *const lwo__st_store_names[LWO_STORE_FORMAT_COUNT] = {
    "keep", "bf16", "f16", "f32", "fp8_e4m3", "fp8_e5m2", "int8"
};
LWO_API const char *lwo_store_format_name(lwo_store_format f) {
    return ((unsigned)f < (unsigned)LWO_STORE_FORMAT_COUNT) ? lwo__st_store_names[f] : "invalid";
}
/* Iterative glob with one backtrack point (the last `*`): O(len(pattern) * len(name)) at worst. */
LWO_API int lwo_glob_match(const char *pattern, const char *name) {
    const char *p = pattern, *n = name, *star = NULL, *resume = NULL;
    if (!pattern || !name) return 0;
    while (*n) {
        if (*p == '*') { star = ++p; resume = n; continue; }
        if (*p && (*p == '?' || *p == *n)) { p++; n++; continue; }
        if (star) { p = star; n = ++resume; continue; }
        return 0;
    }
    while (*p == '*') p++;
    return *p == 0;
}
LWO_API lwo_store_format lwo_storage_policy_format(const lwo_storage_policy *p, const char *name) {
    size_t i;
    if (!p) return LWO_STORE_KEEP;
    for (i = 0; i < p->rule_count && p->rules; i++)
        if (lwo_glob_match(p->rules[i].pattern, name)) return p->rules[i].format;
    return p->default_format;
}

/* ---- conversion ---------------------------------------------------------------------------- */
static lwo_st_dtype lwo__st_store_dtype(lwo_store_format f, lwo_st_dtype keep) {
    switch (f) {
    case LWO_STORE_KEEP: return keep;
    case LWO_STORE_BF16: return LWO_ST_BF16;
    case LWO_STORE_F16: return LWO_ST_F16;
    case LWO_STORE_F32: return LWO_ST_F32;
    case LWO_STORE_FP8_E4M3: return LWO_ST_F8_E4M3;
    case LWO_STORE_FP8_E5M2: return LWO_ST_F8_E5M2;
    case LWO_STORE_INT8: return LWO_ST_I8;
    default: return LWO_ST_INVALID;
    }
}
LWO_API void lwo_st_converted_free(lwo_st_converted *c) {
    if (!c) return;
    LWO_FREE(c->owned_data);
    LWO_FREE(c->owned_scales);
    c->owned_data = NULL;
    c->owned_scales = NULL;
}
LWO_API lwo_result lwo_safetensors_convert(const lwo_st_tensor *t, lwo_store_format target, void *buf,
                                           uint64_t buf_bytes, float *scales, uint64_t scales_count,
                                           lwo_st_converted *out) {
    lwo_st_dtype dt;
    uint64_t n, i, bytes;
    uint8_t *dst;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!t || (t->numel && !t->data) || lwo_st_dtype_size(t->dtype) == 0) return LWO_ERROR_INVALID_ARGUMENT;
    dt = lwo__st_store_dtype(target, t->dtype);
    if (dt == LWO_ST_INVALID) return LWO_ERROR_INVALID_ARGUMENT;
    out->format = target;
    out->dtype = dt;
    out->scale = 1.0f;
    n = t->numel;
    if (target == LWO_STORE_INT8) {
        out->rows = t->ndim >= 2 ? t->shape[0] : 1;
        out->cols = out->rows ? n / out->rows : 0;
        if (n == 0) out->rows = t->ndim >= 2 ? t->shape[0] : 1;
    }
    if (dt == t->dtype) {   /* zero copy */
        out->data = t->data;
        out->bytes = t->bytes;
        out->zero_copy = 1;
        return LWO_SUCCESS;
    }
    if (n > UINT64_MAX / lwo_st_dtype_size(dt) || n * lwo_st_dtype_size(dt) > (uint64_t)((size_t)-1)) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    bytes = n * lwo_st_dtype_size(dt);
    if (buf) {
        if (buf_bytes < bytes) return LWO_ERROR_INVALID_ARGUMENT;
        dst = (uint8_t *)buf;
    } else {
        dst = (uint8_t *)LWO_MALLOC(bytes ? (size_t)bytes : 1);
        if (!dst) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        out->owned_data = dst;
    }
    out->data = dst;
    out->bytes = bytes;
    switch (target) {
    case LWO_STORE_F32:
        for (i = 0; i < n; i++) { float v = lwo__st_load(t->data, t->dtype, i); memcpy(dst + 4 * i, &v, 4); }
        break;
    case LWO_STORE_BF16: case LWO_STORE_F16:
        for (i = 0; i < n; i++) {
            float v = lwo__st_load(t->data, t->dtype, i);
            uint16_t h = target == LWO_STORE_BF16 ? lwo__st_f32_to_bf16(v) : lwo__st_f32_to_f16(v);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    case LWO_STORE_FP8_E4M3: case LWO_STORE_FP8_E5M2: {
        int e5 = target == LWO_STORE_FP8_E5M2;
        float amax = 0.0f, s;
        for (i = 0; i < n; i++) { float a = fabsf(lwo__st_load(t->data, t->dtype, i)); if (a > amax) amax = a; }
        s = amax > 0.0f ? amax / (e5 ? 57344.0f : 448.0f) : 1.0f;
        if (!(s > 0.0f)) s = 1.0f;   /* amax so small the division underflowed */
        out->scale = s;
        for (i = 0; i < n; i++) dst[i] = lwo__st_f32_to_fp8(lwo__st_load(t->data, t->dtype, i) / s, e5);
        break;
    }
    case LWO_STORE_INT8: {
        uint64_t r, c, rows = out->rows, cols = out->cols;
        float *sc;
        if (scales) {
            if (scales_count < rows) { lwo_st_converted_free(out); memset(out, 0, sizeof *out); return LWO_ERROR_INVALID_ARGUMENT; }
            sc = scales;
        } else {
            if (rows > ((size_t)-1) / sizeof(float)) { lwo_st_converted_free(out); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
            sc = (float *)LWO_MALLOC(rows ? (size_t)rows * sizeof(float) : 1);
            if (!sc) { lwo_st_converted_free(out); memset(out, 0, sizeof *out); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
            out->owned_scales = sc;
        }
        out->row_scales = sc;
        for (r = 0; r < rows; r++) {
            float amax = 0.0f, s;
            for (c = 0; c < cols; c++) { float a = fabsf(lwo__st_load(t->data, t->dtype, r * cols + c)); if (a > amax) amax = a; }
            s = amax > 0.0f ? amax / 127.0f : 1.0f;
            if (!(s > 0.0f)) s = 1.0f;
            sc[r] = s;
            for (c = 0; c < cols; c++) {
                float v = lwo__st_load(t->data, t->dtype, r * cols + c) / s;
                if (v != v) v = 0.0f;
                if (v > 127.0f) v = 127.0f;
                if (v < -127.0f) v = -127.0f;
                dst[r * cols + c] = (uint8_t)(int8_t)lwo__st_rne(v);
            }
        }
        break;
    }
    default: break;
    }
    return LWO_SUCCESS;
}

/* LWO_EMBED_BEGIN (tools/embed_kernels.py writes this block; edit kernels.cuh.inc) */
static const char *const lwo__kernel_source_parts[] = {
"/* kernels.cuh.inc - every kernel of lwo, as real CUDA C (compiled by NVRTC at run time). */\n",
};
/* LWO_EMBED_END */

#endif /* LWO_IMPLEMENTATION_DONE */
#endif /* LWO_IMPLEMENTATION */

/* lwo.h - low-VRAM weights, offloaded. v0.2.0
   A header-only C library that runs neural networks larger than the GPU's memory: weights live in
   host RAM in compact formats (fp8, int8), stream to the GPU ahead of the layer that needs them,
   and feed lwo's own kernels. The CUDA driver and NVRTC are loaded at run time; nothing from the
   CUDA toolkit is needed to build.

   INTEGRATION
     In exactly one C or C++ file:
         #define LWO_IMPLEMENTATION
         #include "lwo.h"
     elsewhere just #include "lwo.h". Build: cc -std=c99 app.c -ldl   (or c++ app.cpp -ldl)
     Windows (64-bit): cl /std:c11 app.c (or cl /TP app.c), x86_64-w64-mingw32-gcc -std=c99 app.c;
     no import library, no CUDA toolkit. The implementation's file includes <windows.h>.
     At run time lwo needs an NVIDIA driver (libcuda.so.1; nvcuda.dll on Windows) and, for the
     first start on a device, NVRTC (libnvrtc; nvrtc64_*.dll), found as described at
     lwo_desc.nvrtc_path. Later starts load cached cubins.

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

   CONTENTS (the public API, then the implementation, in the same sections and order; each section
   uses only those above it, and none declares a function of a later one)
     0. Core ............ C library, allocation hooks, the CUDA ABI lwo calls, the context, results,
                          errors, logging
     1. Platform ........ POSIX and Win32: libraries, clock, files, folders, mapping
     2. Driver loader ... the CUDA driver's entry points through cuGetProcAddress
     3. NVRTC loader .... search order, version, compile
     4. Modules ......... the embedded kernels, compiled for the exact arch, cubin cache; launches;
                          your own modules
     5. Memory .......... the device arena of exactly the budget; pinned host memory; registrations
     6. Tensors ......... device tensors, upload and download; streams and events
     7. Kernels ......... CPU references; convert, quantize, pad on the GPU
     8. GEMMs ........... the reference of lwo_linear; mma.sync and sm_90a wgmma GEMMs, tile choice
     9. Weights ......... storage formats, host homes, items (what streams), weights, sizing queries
     10. Streaming ...... the planner, the staging ring, offload streams, passes, acquire/release
     11. Linear, graphs . lwo_linear and its per-shape graphs; whole passes as graphs
     12. safetensors .... the bounds-checked reader and the writer
     13. Checkpoints .... conventions, storage policies, conversion, weights from a checkpoint
     14. Stats .......... counters
     15. Context ........ lwo_create, lwo_destroy, lwo_context_get_info

   THREAD SAFETY
     A context is used by one thread at a time. Two contexts in one process do not interfere:
     there is no global mutable state; every table lives in the context.

   REVISIONS
     0.2.0  one layering pass: sections in dependency order; one name for each idea (_create and
            _destroy, _get_info, the lwo_safetensors_ prefix, one format enum with lwo_format_name,
            one dtype enum, one error channel per object); desc structs for calls with many inputs
            (lwo_linear, lwo_launch, lwo_quantize, the references, the checkpoint writer and
            conversion, lwo_plan_create); sizing queries (lwo_weight_device_bytes,
            lwo_linear_workspace_bytes); a plan that succeeds never runs out of budget. Not
            source-compatible with 0.1: see the README's table of old and new names.
     0.1.0  loaders, kernel module and cache, arena, convert and quantize kernels, mma.sync GEMMs
            and lwo_linear, the streaming engine, safetensors.
*/
/* The implementation uses POSIX (dlopen, clock_gettime, mmap, glob) or, on Windows, Win32
   (LoadLibraryExW, file mappings, the W file calls). Strict -std=c99 hides the POSIX calls unless
   a feature macro is set before the first system header: include lwo.h first in the file that
   defines LWO_IMPLEMENTATION, or build with -D_POSIX_C_SOURCE=200809L. Windows needs none, and
   there lwo calls none of the C runtime functions MSVC marks deprecated (getenv, fopen, strerror). */
#if defined(LWO_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef LWO_H
#define LWO_H

#define LWO_VERSION_MAJOR 0
#define LWO_VERSION_MINOR 2
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

/* ==== Public API 0. Core: results, errors, logging ============================================ */
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
LWO_API const char *lwo_result_string(lwo_result r);   /* "LWO_ERROR_OUT_OF_BUDGET", ... */

/* Every object lwo hands out is opaque and owned by its context (or, for checkpoints, by itself). */
typedef struct lwo_context lwo_context;
typedef struct lwo_tensor lwo_tensor;
typedef struct lwo_stream lwo_stream;
typedef struct lwo_event lwo_event;
typedef struct lwo_module lwo_module;
typedef struct lwo_weight lwo_weight;
typedef struct lwo_graph lwo_graph;

/* One error channel per object: a context's last failure is lwo_last_error(ctx), a checkpoint's is
   lwo_safetensors_last_error(f); calls without an object (lwo_plan_create, lwo_safetensors_write,
   lwo_safetensors_convert) write theirs into an `error` field of the struct they fill. */
LWO_API const char *lwo_last_error(const lwo_context *ctx);   /* "" if none; valid until the next call */

/* PROGRESS: long work under way, so a first start never looks hung (compiling lwo's kernels for
   a GPU the cache has not seen: seconds to a minute). Shown by default. */
typedef enum lwo_log_level { LWO_LOG_ERROR = 0, LWO_LOG_WARN, LWO_LOG_PROGRESS, LWO_LOG_INFO, LWO_LOG_DEBUG } lwo_log_level;
typedef void (*lwo_log_fn)(void *user, lwo_log_level level, const char *message);

/* ==== Public API 4. Modules: your own kernels ================================================ */
/* Compile CUDA C source (no toolkit #includes available) for this device through the same NVRTC
   path and cubin cache lwo uses for its own kernels. `name` labels the NVRTC log; `options` is an
   optional NULL-terminated list of extra NVRTC options (part of the cache key). */
LWO_API lwo_result lwo_module_create(lwo_context *ctx, const char *source, const char *name,
                                     const char *const *options, lwo_module **out);
LWO_API void lwo_module_destroy(lwo_context *ctx, lwo_module *m);
/* Launch extern "C" __global__ `kernel` of `module`; args as for cuLaunchKernel (an array of
   pointers to each argument). Functions are looked up once and remembered. */
typedef struct lwo_launch_desc {
    lwo_stream *stream;        /* NULL = the context's compute stream */
    lwo_module *module;        /* required */
    const char *kernel;        /* required: the extern "C" name */
    unsigned grid[3];          /* each 0 = 1 */
    unsigned block[3];         /* each 0 = 1 */
    unsigned shared_bytes;     /* dynamic shared memory; past 48 KiB the limit is raised for it */
    void **args;
} lwo_launch_desc;
LWO_API lwo_result lwo_launch(lwo_context *ctx, const lwo_launch_desc *desc);

/* ==== Public API 5. Memory: pinned host memory =============================================== */
/* Pinned (page-locked) host memory, for transfers that overlap compute. Freed by lwo_host_free or
   lwo_destroy. The device arena itself is lwo_desc.vram_budget; its use is lwo_context_info.memory. */
LWO_API lwo_result lwo_host_alloc(lwo_context *ctx, uint64_t bytes, void **out);
LWO_API void lwo_host_free(lwo_context *ctx, void *p);

/* ==== Public API 6. Tensors, streams, events ================================================= */
/* One element type for everything lwo reads or writes: device tensors, host data, checkpoints. */
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
    LWO_DTYPE_F64,       /* the rest only in checkpoints: lwo reads them, its kernels do not */
    LWO_DTYPE_I64,
    LWO_DTYPE_I16,
    LWO_DTYPE_BOOL,      /* one byte per element */
    LWO_DTYPE_COUNT
} lwo_dtype;
LWO_API size_t lwo_dtype_size(lwo_dtype t);       /* bytes per element, 0 for an invalid dtype */
LWO_API const char *lwo_dtype_name(lwo_dtype t);  /* "bf16", "f8_e4m3", ...; "invalid" otherwise */

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

/* ==== Public API 7. Kernels: convert, quantize, and their CPU references ===================== */
/* dst = src * scale, elementwise, any shapes with equal element counts.
   src: f8_e4m3, f8_e5m2, bf16, f16, f32.  dst: bf16, f16, f32 (round to nearest even).
   NaN stays NaN. lwo_quantize makes fp8. */
LWO_API lwo_result lwo_convert(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, lwo_tensor *dst, float scale);

/* Quantize src (f32, f16 or bf16) into dst, one of two ways:
   per tensor (per_row 0): dst f8_e4m3 or f8_e5m2 with src's element count;
     dst = sat(src * (1 / scale)), round to nearest even, saturating to +-448 (e4m3) / +-57344
     (e5m2), NaN kept. `scales` is an f32 tensor of one element: with compute_scale it is written
     first as absmax(src) / fp8_max (1.0 when src is all zero), else it is read.
   per row (per_row 1, the W8A8 quantizers): src [rows, K] 2-D, dst i8 or f8_e4m3 [rows, Kq],
     Kq >= K (columns past K written as 0), scales f32 [rows], always computed. With smooth (f32 [K])
     v = src[r, k] / smooth[k], else v = src[r, k]; scales[r] = absmax(v) / qmax (127 for i8, 448
     for e4m3; 1 for an all-zero row), q = code(v * (1 / scales[r])): i8 rounds to nearest even and
     saturates to +-127 (NaN is 0), e4m3 as above. Per output channel of a weight, or per token of
     activations: the same kernel. */
typedef struct lwo_quantize_desc {
    lwo_stream *stream;        /* NULL = the compute stream */
    const lwo_tensor *src;     /* required */
    lwo_tensor *dst;           /* required */
    lwo_tensor *scales;        /* required: f32 [1] per tensor, [rows] per row */
    int per_row;               /* 0 = one scale for the tensor; 1 = a scale per row */
    int compute_scale;         /* per tensor: write the scale first (else read it). Per row: ignored */
    const lwo_tensor *smooth;  /* per row only, optional: the divisor per column */
} lwo_quantize_desc;
LWO_API lwo_result lwo_quantize(lwo_context *ctx, const lwo_quantize_desc *desc);

/* The CPU references: exactly the math of the kernels, element by element; the GPU tests compare
   against them. No GPU or context needed. */
LWO_API float lwo_ref_fp8_to_f32(uint8_t code, lwo_dtype fp8);      /* exact */
LWO_API uint8_t lwo_ref_f32_to_fp8(float v, lwo_dtype fp8);         /* RNE, saturating, NaN kept */
LWO_API float lwo_ref_bf16_to_f32(uint16_t h);
LWO_API uint16_t lwo_ref_f32_to_bf16(float v);                      /* RNE, NaN kept (quiet) */
LWO_API float lwo_ref_f16_to_f32(uint16_t h);
LWO_API uint16_t lwo_ref_f32_to_f16(float v);                       /* RNE, overflow to inf */
LWO_API float lwo_ref_load(const void *data, lwo_dtype t, uint64_t i); /* element i as f32 */
LWO_API void lwo_ref_store(void *data, lwo_dtype t, uint64_t i, float v);
/* lwo_convert's reference: dst[i] = src[i] * scale for i < n (src a float or fp8 dtype, dst a float one). */
LWO_API lwo_result lwo_ref_convert(const void *src, lwo_dtype src_dtype, void *dst, lwo_dtype dst_dtype, uint64_t n, float scale);
/* absmax / fp8_max with the kernels' conventions: 1 for an all-zero input, NaN if any input is NaN. */
LWO_API float lwo_ref_fp8_scale(const void *src, lwo_dtype src_dtype, uint64_t n, lwo_dtype fp8);
/* lwo_quantize's reference. Per tensor: rows x cols elements (rows 0 = 1) of src quantized with
   `scale` (given, as lwo_ref_fp8_scale computes it) into dst (f8_e4m3/f8_e5m2). Per row: src
   [rows, cols] into dst [rows, dst_cols] (i8 or f8_e4m3; dst_cols 0 = cols), the scales written to
   `scales` [rows], smooth optional. */
typedef struct lwo_ref_quantize_desc {
    const void *src;           /* required */
    lwo_dtype src_dtype;       /* f32, f16 or bf16 */
    void *dst;                 /* required */
    lwo_dtype dst_dtype;
    uint64_t rows, cols;
    uint64_t dst_cols;         /* per row: the stored row length, >= cols; 0 = cols */
    int per_row;
    float scale;               /* per tensor: the scale to divide by */
    float *scales;             /* per row: out, [rows] */
    const float *smooth;       /* per row: optional divisor per column [cols] */
} lwo_ref_quantize_desc;
LWO_API lwo_result lwo_ref_quantize(const lwo_ref_quantize_desc *desc);

/* The W8A8 prep on the CPU (lwo_weight_desc in section 9 describes it), the reference of what lwo_weight_create stores and what
   lwo_linear feeds its GEMM: out[r, j] for j < out_cols, f32, from x [rows, cols] (f32/f16/bf16):
   u[j] = x[r, perm[j]] then / smooth[perm[j]] (weight == 0: activations) or * smooth[perm[j]]
   (weight != 0: weights), 0 for j >= cols; then the rotation in blocks of `hadamard` (0: none)
   over the first cols rounded up to the block, as lwo_ref_hadamard. perm and smooth may be NULL.
   out_cols must be at least cols rounded up to the block. Quantizing the result per row with
   lwo_ref_quantize (f32, cols = out_cols, no smooth) gives the stored codes bit for bit.
   LWO_ERROR_INVALID_ARGUMENT for a NULL x or out, a bad dtype or block size, a short out_cols, or a
   perm that is not a permutation of 0..cols-1; LWO_ERROR_OUT_OF_HOST_MEMORY if checking perm cannot
   allocate cols / 8 bytes. */
typedef struct lwo_ref_prep_desc {
    const void *x; lwo_dtype x_dtype;
    uint64_t rows, cols;
    const int32_t *perm;       /* optional */
    const float *smooth;       /* optional */
    int weight;                /* 1: multiply by smooth (a weight); 0: divide (activations) */
    int hadamard;              /* the block size, 0 = none */
    float *out;                /* [rows, out_cols] */
    uint64_t out_cols;
} lwo_ref_prep_desc;
LWO_API lwo_result lwo_ref_prep_rows(const lwo_ref_prep_desc *desc);
/* The normalized Walsh-Hadamard rotation of v[0..n) in place, in blocks of `block` (a power of two,
   2..256, dividing n), in the documented f32 order: stages h = 1, 2, .., block/2, the pair
   (i, i + h) with i & h == 0 becoming (v[i] + v[i+h], v[i] - v[i+h]); then each v[i] * s_b. */
LWO_API lwo_result lwo_ref_hadamard(float *v, uint64_t n, int block);

/* ==== Public API 8. GEMMs: the reference of every lwo_linear path ============================ */
/* y[m,n] = epi(acc), acc = sum_k x[m,k] * w[n,k] with x, w as the GEMM sees them (x after
   quantization, W as stored or upcast; row strides ldx, ldw elements, 0 = K). i8 x i8: exact integer
   accumulation (the GPU's s32); every other pair: accumulation in double. Then in f32, in this
   order: v = (float)acc; v *= x_scales[m] (if any); v *= w_scales[n] (if any); v += bias[n] (if
   any); stored as y_dtype (RNE), y [M, N]. */
typedef struct lwo_ref_linear_desc {
    const void *x; lwo_dtype x_dtype; uint64_t ldx;
    const void *w; lwo_dtype w_dtype; uint64_t ldw;
    uint64_t M, N, K;
    const float *x_scales, *w_scales, *bias;   /* each optional */
    void *y; lwo_dtype y_dtype;
} lwo_ref_linear_desc;
LWO_API lwo_result lwo_ref_linear(const lwo_ref_linear_desc *desc);

/* ==== Public API 9. Weights and residency ==================================================== */
/* A weight: the matrix W [N = rows, K = cols] of y = x W^T + bias, stored on the device in one
   format and consumed by lwo_linear. Owned by its context (lwo_weight_destroy or lwo_destroy).
   One format enum for everything that says how a tensor is stored: weights, storage policies,
   the CPU conversion of a checkpoint. */
typedef enum lwo_format {
    LWO_FORMAT_KEEP = 0,      /* as the data already is: bf16 -> BF16, f16 -> F16, f8_e4m3 -> FP8_E4M3,
                                 f8_e5m2 -> FP8_E5M2, i8 -> INT8; f32 (and f64) -> BF16 for a weight,
                                 F32 for a conversion */
    LWO_FORMAT_BF16,          /* bf16 weight, tensor-core bf16 GEMM (x must be bf16) */
    LWO_FORMAT_F16,           /* f16 weight, tensor-core f16 GEMM (x must be f16) */
    LWO_FORMAT_FP8_E4M3,      /* e4m3 + per-tensor scale = absmax / 448; upcast to x's dtype per call */
    LWO_FORMAT_FP8_E5M2,      /* e5m2 + per-tensor scale = absmax / 57344; as above */
    LWO_FORMAT_INT8,          /* W8A8 int8: per-output-channel scales absmax / 127; x quantized per token per call */
    LWO_FORMAT_FP8_E4M3_W8A8, /* W8A8 fp8 e4m3, per-output-channel scales, x per token (absmax/448); cc >= 8.9 */
    LWO_FORMAT_F32,           /* conversions only (norms, biases): no weight is stored as f32 */
    LWO_FORMAT_COUNT
} lwo_format;
LWO_API const char *lwo_format_name(lwo_format f);   /* "keep", "bf16", ..., "fp8_e4m3_w8a8", "f32" */

/* Where a weight lives. RESIDENT: in the arena from creation on. AUTO: lwo_streaming_plan keeps it
   resident if the budget allows, else it streams from its host home. STREAMED: always streams. */
typedef enum lwo_placement { LWO_PLACE_RESIDENT = 0, LWO_PLACE_AUTO, LWO_PLACE_STREAMED } lwo_placement;

/* W8A8 activation prep. Before x is quantized per token, and before W is quantized per output
   channel at lwo_weight_create, both go through the same column transform, chosen so that
   x' W'^T = x W^T in real arithmetic (perm, smooth and hadamard of lwo_weight_desc; each optional):
     x'[m, :] = H (x[m, perm[j]] / smooth[perm[j]])_j      W'[n, :] = H (W[n, perm[j]] * smooth[perm[j]])_j
   in this order: permute, smooth, rotate; j runs over the K = cols columns, and the row is zero
   padded to kpad first. smooth is indexed by the original column, so a caller who adds a
   permutation keeps its smoothing vector as it is. H is block-diagonal along K with blocks of b =
   desc.hadamard positions, each the normalized Walsh-Hadamard matrix H_b[i][j] = (-1)^popcount(i & j)
   * s_b, s_b the f32 nearest 1/sqrt(b) (exact for b = 4, 16, 64, 256): symmetric and orthogonal,
   H H^T = I; with P the permutation (x P = x[:, perm]) and S = diag(smooth),
   x' W'^T = (x S^-1 P H)(H^T P^T S W^T) = x W^T. When cols is not a multiple of b the
   rotation runs over the zero padding too (the last block mixes real columns with padded zeros, and
   the padded columns of x' and W' are no longer zero): kpad is cols rounded up to a multiple of 64
   and of b. In f32, each block of the CPU references and the kernels alike is: butterfly stages
   h = 1, 2, 4, .., b/2 in that order, positions (i, i + h) with i & h == 0 becoming
   (v[i] + v[i+h], v[i] - v[i+h]), each sum rounded to f32; then every v[i] = v[i] * s_b (the same
   sequence as lwo_ref_hadamard). Without perm the transform is the identity permutation, without
   smooth the divisor 1, without hadamard H = I: with none of them, the math is lwo_quantize's plain
   per-row quantizer. The rotation spreads an outlier channel over its block, so per-token scales
   are set by typical values rather than by the outlier; the permutation lets a caller choose which
   channels share a block (or keep outliers together). */

/* Valid when zero-filled except for rows, cols and data. Host pointers are read during
   lwo_weight_create only, except `data` with borrow_host. */
typedef struct lwo_weight_desc {
    uint64_t rows;            /* N, output features. Required. */
    uint64_t cols;            /* K, input features. Required. */
    const void *data;         /* host [rows, cols], row-major. Required. */
    lwo_dtype data_dtype;     /* 0 = f32. f32/f16/bf16 (quantized by lwo on the GPU), or already
                                 quantized: f8_e4m3/f8_e5m2 (with `scale`, for the fp8 formats),
                                 i8 (with `row_scales`, LWO_FORMAT_INT8 only). */
    lwo_format format;        /* 0 = LWO_FORMAT_KEEP: data_dtype's own format (f32 -> BF16) */
    float scale;              /* pre-quantized fp8 data: the dequantization scale. 0 = 1. */
    const float *row_scales;  /* pre-quantized i8 (required) or e4m3 W8A8 data: f32[rows] scales.
                                 NULL for e4m3 W8A8 data = `scale` for every row. */
    const void *bias;         /* optional host [rows]; stored as f32 */
    lwo_dtype bias_dtype;     /* 0 = f32; f32/f16/bf16 */
    const float *smooth;      /* optional f32[cols] > 0, W8A8 formats only: activations are divided
                                 by it before quantization and W's columns multiplied by it (float
                                 data; pre-quantized i8 / e4m3 data already holds W * smooth and is
                                 stored as it is). Indexed by the original column (see above). */
    const int32_t *perm;      /* optional int32[cols], W8A8 formats with f32/f16/bf16 data only: a
                                 permutation of 0..cols-1 (each index once). The linear is computed on
                                 x[:, perm] and W[:, perm], which gives the same y; it decides which
                                 columns share a Hadamard block. Kept on the device (4 B per column). */
    int hadamard;             /* W8A8 formats with f32/f16/bf16 data only: the Hadamard block size b,
                                 a power of two from 2 to 256; 0 = no rotation. See above. */
    lwo_placement placement;  /* 0 = LWO_PLACE_RESIDENT */
    int borrow_host;          /* streamed weights only: keep `data` itself as the weight's host home
                                 (registered with the driver read-only, no copy in RAM: a mapped
                                 checkpoint). Needs data already in the stored format and layout:
                                 data_dtype matching `format` and cols a multiple of 64. The memory
                                 must outlive the weight. 0 = lwo keeps a pinned copy. */
} lwo_weight_desc;

/* Where a weight's stored bytes wait in host RAM while the GPU does not hold them. */
typedef enum lwo_host_home {
    LWO_HOME_NONE = 0,        /* a RESIDENT weight: no host copy is kept */
    LWO_HOME_PINNED,          /* lwo's own pinned copy (counted against lwo_desc.pinned_cap) */
    LWO_HOME_REGISTERED,      /* desc.borrow_host: the caller's memory itself (a mapped checkpoint),
                                 registered with the driver read-only: zero copy, full bus speed */
    LWO_HOME_PAGEABLE_COPY,   /* lwo's copy in pageable memory (pinning refused or past pinned_cap): slow */
    LWO_HOME_BORROWED         /* desc.borrow_host, but the driver would not register it: slow, no graphs */
} lwo_host_home;

typedef struct lwo_weight_info {
    uint64_t rows, cols, kpad;    /* kpad: the stored row length (cols rounded up to a multiple of 64
                                     and of the Hadamard block) */
    lwo_format format;            /* never KEEP: the format it was resolved to */
    const lwo_tensor *data;       /* [rows, kpad]: bf16, f16, f8_e4m3, f8_e5m2 or i8 */
    const lwo_tensor *scales;     /* f32 [1] (fp8 upcast formats), f32 [rows] (W8A8), or NULL */
    const lwo_tensor *bias;       /* f32 [rows] or NULL */
    const lwo_tensor *smooth;     /* f32 [cols] or NULL; with a permutation in the permuted order
                                     (smooth[perm[j]] at j), as the kernels read it */
    const lwo_tensor *perm;       /* i32 [cols] (desc.perm) or NULL. smooth and perm stay resident
                                     in the arena when the weight streams (they are small) */
    int hadamard;                 /* desc.hadamard: the rotation's block size, 0 for none */
    lwo_host_home host_home;      /* where the stored weight bytes live on the host (AUTO, STREAMED) */
    const void *host_data;        /* what the transfers read: inside the caller's memory for
                                     REGISTERED / BORROWED (desc.data itself), NULL for NONE */
    size_t lora_count;            /* LoRAs attached (lwo_lora_attach) */
    uint64_t lora_rank;           /* their ranks summed */
} lwo_weight_info;

/* Makes a weight. Data already in the stored form (the format's dtype, nothing to permute or
   rotate) of a weight that may stream goes straight to its host home, laid out on the CPU as the
   device holds it: no VRAM, no trip through the device. Anything else is uploaded and quantized on
   the GPU (which needs room in the arena for the upload and the result while it runs), and a
   streamable weight's result then moves to its host home. Returns when the weight is ready. */
LWO_API lwo_result lwo_weight_create(lwo_context *ctx, const lwo_weight_desc *desc, lwo_weight **out);
LWO_API void lwo_weight_destroy(lwo_context *ctx, lwo_weight *w);
LWO_API lwo_result lwo_weight_get_info(lwo_context *ctx, const lwo_weight *w, lwo_weight_info *out);
/* The VRAM a weight made from `desc` takes, resident or in a staging slot: its stored data (rows x
   kpad), scales, bias, smooth and perm, each rounded as the arena rounds (smooth and perm stay
   resident when the weight streams). Needs no context: what a caller sizes its budget with before
   lwo_create. 0 for a desc lwo_weight_create would reject for its shape or format. */
LWO_API uint64_t lwo_weight_device_bytes(const lwo_weight_desc *desc);
/* The VRAM lwo_streaming_plan reserves for lwo_linear on weights made from descs[0..count), x of up
   to max_rows rows (16-byte aligned), on this context's device: the workspace the largest call
   needs (W8A8: the quantized rows and their scales; fp8 upcast: the upcast weight; x padded to kpad
   when cols % 8 != 0), plus on sm_90a the GEMMs' split area when some call of those shapes would
   share its last rounds out along K (lwo_desc.gemm_split). Both are shared by every call, so this is
   the largest need, not a sum. max_rows 0: the least a call needs (64 rows at a time). */
LWO_API uint64_t lwo_linear_workspace_bytes(lwo_context *ctx, const lwo_weight_desc *descs, size_t count, uint64_t max_rows);

/* LoRA: low-rank adapters on a weight of any format, resident or streamed. With LoRAs i attached,
   lwo_linear computes y = x W^T + bias + sum_i s_i (x A_i^T) B_i^T, A_i = down [rank_i, cols],
   B_i = up [rows, rank_i], s_i = strength_i * (alpha_i / rank_i) (f32, in that order), as a side
   path after W's GEMM: W is never touched or re-quantized, and the factors keep their 16-bit
   precision. Exactly, on the GPU and in a CPU reference alike (dt, the LoRAs' dtype, is x's):
     t[m, r] = dt(s_r * sum_k x[m, k] A[r, k])       the ranks of all the weight's LoRAs side by side
     y[m, n] = y(y[m, n] + d) where d = sum_r t[m, r] B[n, r] is not 0; else y[m, n] stays as it was
   with each sum in f32 on the tensor cores (the order is theirs: compare with a tolerance), so a
   LoRA at strength 0 leaves y bit for bit. The factors are copied into the context's arena at
   attach (counted against the budget: a plan made after the attach accounts for them) and stay
   resident when the weight streams; a side path needs no transfer. The side path of every LoRA'd
   weight shares one scratch of the context (x A^T, up to 8192 rows at a time), so, like lwo_linear's
   workspace, calls on different streams must be ordered.
   Graphs: a strength is read by the GPU at run time, so lwo_lora_set_strength keeps every captured
   graph (whole passes and lwo_linear's own) valid. Attaching or detaching changes the kernels a
   pass runs: lwo_graph_launch then refuses a graph captured before (capture it again).
   Attach, set_strength, detach and merge wait for the device (they free or rewrite what queued
   work reads), and none may run inside a whole-pass capture. */
typedef struct lwo_lora lwo_lora;   /* owned by its weight: freed by lwo_lora_detach or with the weight */
typedef struct lwo_lora_desc {
    uint64_t rank;             /* r. Required */
    const void *down;          /* A [rank, cols], host, row-major (lora_down / lora_A). Required */
    const void *up;            /* B [rows, rank], host, row-major (lora_up / lora_B). Required */
    lwo_dtype dtype;           /* of down and up: f32, f16 or bf16. 0 = f32 */
    float alpha;               /* the scale is strength * alpha / rank. 0 = rank (scale = strength) */
    float strength;            /* s; 0 is a LoRA with no effect until lwo_lora_set_strength */
    lwo_dtype compute_dtype;   /* x's dtype in lwo_linear, which the factors are stored in: bf16 or f16.
                                  0 = the weight's own for a BF16 or F16 weight, bf16 for the others.
                                  Every LoRA of a weight has the same */
} lwo_lora_desc;
/* Attaches a LoRA to w. LWO_ERROR_INVALID_ARGUMENT for a bad desc (names the field), a dtype other
   than the weight's LoRAs', or inside a capture; LWO_ERROR_OUT_OF_BUDGET when the arena cannot hold
   the factors; the weight is then as it was. */
LWO_API lwo_result lwo_lora_attach(lwo_context *ctx, lwo_weight *w, const lwo_lora_desc *desc, lwo_lora **out);
LWO_API lwo_result lwo_lora_set_strength(lwo_context *ctx, lwo_lora *lora, float strength);
/* Removes the LoRA from its weight and frees it. */
LWO_API lwo_result lwo_lora_detach(lwo_context *ctx, lwo_lora *lora);
/* Folds a LoRA into a RESIDENT bf16 or f16 weight once: W[n, k] = W(W[n, k] + d) where
   d = s * sum_r B[n, r] A[r, k] (the f32 sum of the tensor cores) is not 0 (the rounding of the
   stored W, once). No side path and no handle afterwards: the strength is fixed and it cannot be
   taken out. The fastest way to run a LoRA that never changes on a weight kept in 16 bits. */
LWO_API lwo_result lwo_lora_merge(lwo_context *ctx, lwo_weight *w, const lwo_lora_desc *desc);
/* Sizing, with no context: the VRAM the LoRAs of total rank `rank` take on a weight made from
   `weight` (the side by side factors and their scales, rounded as the arena rounds), and the
   context's scratch that rank needs (one for all weights: budget the largest). 0 for a rank of 0
   or a desc lwo_weight_create would reject. */
LWO_API uint64_t lwo_lora_device_bytes(const lwo_weight_desc *weight, uint64_t rank);
LWO_API uint64_t lwo_lora_scratch_bytes(uint64_t rank);

/* ==== Public API 10. Streaming ================================================================ */
/* Which weights stay resident and how large a staging ring the rest stream through, under a budget.
   Pure host code: the streaming engine calls it, and so can a caller that wants to know ahead. */
typedef struct lwo_plan_desc {
    const uint64_t *weight_bytes; /* device bytes of each weight, in use order */
    size_t count;
    uint64_t budget;              /* arena bytes available to weights and the ring */
    uint64_t workspace;           /* bytes to keep free for activations and scratch */
    int max_slots;                /* most staging slots in the ring; 0 = 4 */
    const uint8_t *must_stream;   /* optional, count flags: 1 = this weight never stays resident */
    /* Optional, for a plan timed against the pass (the engine fills these in after a pass it
       timed): with use_ms and h2d_GBps set, candidate plans (ring sizes, which weights stream) are
       played through a model of the ring and the fastest wins, instead of the fewest bytes. */
    const uint32_t *use_order;    /* weight indices in use order, use_count of them; NULL: each
                                     weight once, in index order */
    size_t use_count;
    const float *use_ms;          /* compute-stream milliseconds from each use to the next one */
    double h2d_GBps;              /* host-to-device rate the transfers run at */
} lwo_plan_desc;

typedef struct lwo_plan {
    uint8_t *resident;            /* count flags, 1 = resident (owned by the plan) */
    uint64_t resident_bytes;
    uint64_t slot_bytes;          /* at least the largest streamed weight (256-byte rounded); the
                                     room no resident weight takes is shared among the slots, up
                                     to a ring that holds every streamed byte */
    int slots;                    /* the ring is slots x slot_bytes (0 when everything is resident);
                                     weights are packed into it by bytes, so more than `slots` of
                                     the smaller ones may be in it at once */
    uint64_t streamed_bytes;      /* bytes moved per pass */
    uint64_t total_bytes;         /* resident + ring + workspace: never above the budget */
    double predicted_ms;          /* a timed plan: the model's steady-state pass, and how long the */
    double predicted_wait_ms;     /* compute stream waits in it on transfers (0 when not timed); */
    double predicted_graph_ms;    /* and a graph's replay of the pass (it starts from an empty ring) */
    char error[256];              /* why lwo_plan_create failed ("" on success): on OUT_OF_BUDGET,
                                     the weight that cannot fit and the bytes missing (the plan needs
                                     at least the largest streamable weight, one slot, beside the
                                     workspace) */
} lwo_plan;
LWO_API lwo_result lwo_plan_create(const lwo_plan_desc *desc, lwo_plan *out);
LWO_API void lwo_plan_destroy(lwo_plan *plan);

/* Streaming. Weights that do not stay resident travel through a staging ring on offload streams,
   in the order the passes use them. Bracket each forward pass with lwo_pass_begin/end: the first
   pass teaches the order; later passes prefetch ahead along it. A pass may deviate from the order:
   it stays correct, only slower, and lwo_stats.order_deviations counts it.

   lwo_streaming_plan places every weight created so far: resident where the budget allows, the rest
   streamed through a ring of staging slots. A plan is a promise: once it succeeds, every
   lwo_linear, lwo_weight_acquire and lwo_weight_release on the planned weights fits in what it
   reserved, in this order of the arena: lwo_linear's workspace for x of up to desc.max_rows rows
   (lwo_linear_workspace_bytes: the quantized activations, the upcast weight, x padded), the GEMMs'
   split area where a GEMM of those shapes would split (sm_90a), the ring, and the resident weights;
   besides them it leaves desc.free_bytes of the budget free for the caller's own tensors made after
   the plan. lwo_linear's per-shape graphs and whole-pass graphs take no VRAM of the budget. Nothing
   grows after a plan for the weights it placed (a call with more rows than declared runs in row
   chunks); a weight created after the plan may grow the workspace into free room, and is placed by
   the next plan. Where the budget cannot hold a plan it fails with LWO_ERROR_OUT_OF_BUDGET, and its
   message and lwo_stats.plan_min_budget give the smallest lwo_desc.vram_budget that holds one (the
   same tensors and weights made in the same order).
   Called again after passes in the learned order, it is timed against them (each use's compute
   time in the last pass, and the streamed copies' rate): run two passes first, since the first
   loads the GEMM modules and its timings are the host's, not the GPU's. Not inside a pass. */
typedef struct lwo_streaming_desc {
    uint64_t max_rows;     /* the most rows of x (tokens) any lwo_linear on the planned weights gets: the
                              workspace and split area are reserved for every call up to it. 0 = the
                              workspace lwo_linear has grown so far, and at least what a call in
                              chunks of 64 rows needs (run a pass before planning, or declare it) */
    uint64_t free_bytes;   /* bytes of the budget kept free for tensors the caller makes after the plan
                              (activations, say). 0 = none */
} lwo_streaming_desc;
LWO_API lwo_result lwo_streaming_plan(lwo_context *ctx, const lwo_streaming_desc *desc);   /* NULL: zero desc */
LWO_API lwo_result lwo_pass_begin(lwo_context *ctx);
/* Ends a pass. Weights still acquired are released (as if lwo_weight_release on the compute stream). */
LWO_API lwo_result lwo_pass_end(lwo_context *ctx);
/* For your own ops on a streamable weight: acquire makes the weight readable by kernels enqueued
   next on `stream` (waiting on the GPU for its transfer, never on the host) and fills `out` with
   device tensors valid until release; release records that the work enqueued so far on `stream`
   is the last to read it, so its bytes in the staging ring may be overwritten after that work.
   lwo_linear does both itself. On a resident weight both are cheap and `out` is what
   lwo_weight_get_info gives. */
LWO_API lwo_result lwo_weight_acquire(lwo_context *ctx, lwo_stream *stream, const lwo_weight *w, lwo_weight_info *out);
LWO_API lwo_result lwo_weight_release(lwo_context *ctx, lwo_stream *stream, const lwo_weight *w);

/* ==== Public API 11. Linear and graphs ======================================================= */
/* y[M, N] = x[M, K] W^T + bias, ordered on `stream` (NULL = compute stream).
   x: bf16 or f16 (2-D, row-major). y: f32, f16 or bf16 [M, N]. bias: NULL = the weight's own bias
   (if any), else an f32/f16/bf16 device tensor of N elements that overrides it.
   W8A8 formats quantize x per token into a workspace; the fp8 upcast formats upcast W into one.
   The workspace is kept by the context and counted in the arena: calls of lwo_linear that use it
   share it, so order those on different streams (events) or they race; on sm_90a their GEMMs also
   share the split area of lwo_desc.gemm_split (8.4 MiB on an H200). A bf16 or f16 weight with x
   16-byte aligned and K a multiple of 8 uses neither. Before any lwo_streaming_plan the workspace
   grows to what a call needs (growing synchronizes the device) and the split area is made by the
   first GEMM that splits, where the arena has room. lwo_streaming_plan reserves both for the shapes
   it is told (lwo_streaming_desc.max_rows) and from then on nothing grows for its weights: a call
   with more rows than the workspace holds runs in row chunks that fit (lwo_stats.linear_chunked),
   and a GEMM with no split area runs unsplit, so no call on a planned weight fails for lack of VRAM.
   Paths: sm_90a wgmma + tensor copy engine, other sm_80+ tensor cores (mma.sync), sm_75 a plain
   FMA kernel (correctness only).
   W8A8 weights that are not streamed keep a CUDA graph of their quantize + GEMM pair per (M, x, y
   and bias dtypes) (lwo_desc.graph_cache): the first call at a key runs plainly, then captures and
   launches it; later ones point its kernels at the new x, y, bias and workspace and launch it. Not
   inside a capture of the stream (the plain kernels join the caller's graph); a failed capture or
   update means plain launches for that weight from then on (logged at INFO,
   lwo_stats.linear_graph_fallbacks).
   A weight with LoRAs (section 9) adds their side path to y after W's GEMM, on the same stream. */
typedef struct lwo_linear_desc {
    lwo_stream *stream;        /* NULL = the compute stream */
    const lwo_tensor *x;       /* required */
    const lwo_weight *w;       /* required */
    const lwo_tensor *bias;    /* NULL = the weight's own */
    lwo_tensor *y;             /* required */
} lwo_linear_desc;
LWO_API lwo_result lwo_linear(lwo_context *ctx, const lwo_linear_desc *desc);

/* A whole pass, streamed transfers included, as one CUDA graph: capture begins after the compute
   stream is idle and records everything enqueued on it (and the transfers it waits on) until
   capture_end. Needs pinned or registered host homes (graphs cannot copy from pageable memory).
   Run the pass once before capturing it: the first use of a GEMM format loads its module and
   lwo_linear may grow its workspace, and neither can happen inside a capture. A LoRA's strength
   may change between launches; attaching or detaching one makes lwo_graph_launch refuse graphs
   captured before (LWO_ERROR_INVALID_ARGUMENT): capture again. */
LWO_API lwo_result lwo_graph_capture_begin(lwo_context *ctx);
LWO_API lwo_result lwo_graph_capture_end(lwo_context *ctx, lwo_graph **out);
LWO_API lwo_result lwo_graph_launch(lwo_context *ctx, lwo_graph *g);
LWO_API void lwo_graph_destroy(lwo_context *ctx, lwo_graph *g);
/* Host-to-device bytes one launch of g streams (lwo_stats.bytes_streamed grows by this per launch;
   the capture itself counts nothing). 0 for NULL. */
LWO_API uint64_t lwo_graph_bytes_streamed(const lwo_graph *g);
/* After any failed call inside a pass (or a whole-pass capture): ends the pass without learning or
   timing anything from it, releases every weight it held acquired (their slots are free once the
   work already queued on the compute stream is done), ends an open lwo_graph_capture_begin (no
   graph is made), and waits for the streams. The context is then as usable as before the pass: the
   next pass, plan or capture runs as if the failed pass had not been. No-op outside a pass and
   capture. A sticky CUDA error (an illegal address in a kernel) is not recoverable: the driver
   context is lost, and every later call reports it. */
LWO_API lwo_result lwo_pass_abort(lwo_context *ctx);

/* ==== Public API 12. safetensors: the reader and the writer ================================== */
/* A bounds-checked reader and an atomic writer of the .safetensors checkpoint format. No context
   or GPU needed.

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
   every host lwo supports. The file's dtype tags ("F32", "BF16", "F8_E4M3", ...) are read into
   lwo_dtype and written from it; F64, I64, I16 and BOOL exist for reading checkpoints.

   LIMITS. What a hostile file can make lwo do is bounded by the file, never by what its header
   claims. H is the header's length in bytes, B the bytes a tensor really has in the file.
     header       at most LWO_SAFETENSORS_MAX_HEADER bytes (default 100 MiB; define it before the
                  include to change it), and it must lie within the file.
     keys         no count of their own: a tensor entry takes at least 49 header bytes and a
                  metadata entry about 6, so H bounds them (2 million tensors, 17 million metadata
                  keys in a 100 MiB header). Names and metadata keys must be unique.
     rank         at most LWO_SAFETENSORS_MAX_DIMS (8) dimensions.
     dims         each at most 2^63-1, with dtype size x product(shape) below 2^64. A dimension may
                  be 0; the tensor then has no bytes, whatever its other dimensions say.
     names        names, keys and values may be as long as the header holds; the conventions
                  (<prefix>.weight_scale, .bias, ...) are found for names of any length, and
                  messages quote at most 300 bytes of a name.
     nesting      none in the header (its schema is flat, so the parser never recurses);
                  LWO_SAFETENSORS_MAX_JSON_DEPTH (32) inside a comfy_quant tensor.
     open         O(H log H) time and at most about 13 bytes of host memory per header byte at
                  any moment (the decoded strings, the tensor and metadata tables as they grow by
                  doubling, the name index). The indexes are sorted with lwo's own heap sort: the C
                  library's qsort promises no bound, and a quicksort can be driven quadratic by an
                  order an attacker picks. tests/fuzz/fuzz_safetensors.c fails any input that makes lwo
                  hold more than 16 bytes per byte of the file (plus 64 KiB), conversions and the
                  loaders' CPU side included.
     later calls  loop and allocate in proportion to B of the tensors they touch, never to a
                  shape alone: lwo_safetensors_find and the conventions are O(log n) lookups;
                  lwo_safetensors_convert writes at most 4 bytes of data and 4 bytes of row scales
                  per element (an element takes at least one byte), and refuses INT8 for a tensor
                  whose row count exceeds its element count (a tensor of no elements and more than
                  one row: [2^36, 0] would otherwise ask for 2^36 row scales); the weight loaders
                  refuse tensors of no elements, and their CPU side holds at most an f32 copy of
                  the tensor (4 bytes per element) plus copies of its scales, smooth and bias. The
                  weight itself is stored with K padded to a multiple of 64 (lwo_weight_info.kpad),
                  so a [N, 1] fp8 tensor becomes up to 128 x B bytes of device (and, when
                  streamed, pinned host) memory: that is built in the arena, so the VRAM budget
                  caps it.
     file types   regular files only. lwo_safetensors_create opens with O_NONBLOCK (Windows: GetFileType) (so a FIFO cannot
                  block it), then fstat rejects anything else with LWO_ERROR_IO naming what it is
                  (a FIFO, a directory, a device, a socket).
     file changes the file's size is checked once, at open. A file that shrinks while mapped
                  makes a later read of the lost pages (tensor data; the header while it is parsed)
                  raise SIGBUS, as for any reader of a mapped file; lwo installs no signal handler,
                  since that is process-wide state a library must not take. Keep checkpoints
                  immutable while open: replace a file by writing a new one and renaming it over
                  the old (lwo_safetensors_write does), which leaves an open mapping on the old
                  file intact; or handle SIGBUS yourself. Everything but tensor data (names,
                  shapes, metadata, the indexes) is decoded into lwo's memory at open, so lookups
                  never touch the mapping; only reads of tensors do (the data itself, and the
                  small tensors the conventions parse: comfy_quant JSON, scalar scales). */
#ifndef LWO_SAFETENSORS_MAX_HEADER
#define LWO_SAFETENSORS_MAX_HEADER (100u << 20)   /* largest JSON header accepted, bytes (100 MiB) */
#endif
#define LWO_SAFETENSORS_MAX_DIMS 8        /* a tensor of more dimensions is rejected as a bad file */
#define LWO_SAFETENSORS_MAX_JSON_DEPTH 32 /* nesting bound of the free-form JSON in comfy_quant entries */
#define LWO_SAFETENSORS_LWO_INT8_V1 "int8-per-channel-v1"  /* value of metadata key "lwo.quant" */

/* One tensor of an open file. Pointers stay valid until lwo_safetensors_destroy. */
typedef struct lwo_safetensors_tensor {
    const char *name;             /* NUL-terminated UTF-8 */
    lwo_dtype dtype;
    int ndim;                     /* 0 (a scalar) .. LWO_SAFETENSORS_MAX_DIMS */
    uint64_t shape[LWO_SAFETENSORS_MAX_DIMS];  /* entries past ndim are 0 */
    uint64_t numel;               /* product of shape (1 for a scalar, 0 when a dim is 0) */
    uint64_t bytes;               /* numel * lwo_dtype_size(dtype) */
    uint64_t offset;              /* absolute file offset of the first byte */
    const void *data;             /* into the read-only mapping (or the caller's memory) */
    size_t shard;                 /* index of the file in the desc's paths */
} lwo_safetensors_tensor;

typedef struct lwo_safetensors lwo_safetensors;
/* What to read: one file (path), a sharded checkpoint as one set (paths: names are looked up across
   all files, a name in two shards is LWO_ERROR_BAD_FILE, metadata is merged with the first shard's
   value winning), or bytes the caller owns and keeps alive and unchanged until destroy (data,
   size). Exactly one of the three. Paths are UTF-8 (on Windows too). */
typedef struct lwo_safetensors_desc {
    const char *path;
    const char *const *paths;
    size_t path_count;
    const void *data;
    size_t size;
} lwo_safetensors_desc;
/* Opens and validates (files are mapped read-only; the mapping lives until destroy). On failure
   *out is still set (unless host memory ran out; then it is NULL) so lwo_safetensors_last_error can
   say what is wrong and where (file offset, tensor name); always lwo_safetensors_destroy what you got.
   Returns LWO_ERROR_IO (open/stat/map failed, or not a regular file), LWO_ERROR_BAD_FILE,
   LWO_ERROR_INVALID_ARGUMENT. */
LWO_API lwo_result lwo_safetensors_create(const lwo_safetensors_desc *desc, lwo_safetensors **out);
LWO_API void lwo_safetensors_destroy(lwo_safetensors *f);   /* NULL is fine */
/* Detail of the last failure ("" if none). Valid until the next call on f. */
LWO_API const char *lwo_safetensors_last_error(const lwo_safetensors *f);

/* Tensors in header order, shard after shard. */
LWO_API size_t lwo_safetensors_count(const lwo_safetensors *f);
LWO_API const lwo_safetensors_tensor *lwo_safetensors_tensor_at(const lwo_safetensors *f, size_t i); /* NULL if out of range */
LWO_API const lwo_safetensors_tensor *lwo_safetensors_find(const lwo_safetensors *f, const char *name); /* O(log n); NULL if absent */
/* Metadata ("__metadata__"), ordered by key bytes. */
LWO_API size_t lwo_safetensors_metadata_count(const lwo_safetensors *f);
LWO_API const char *lwo_safetensors_metadata_key(const lwo_safetensors *f, size_t i);
LWO_API const char *lwo_safetensors_metadata_value(const lwo_safetensors *f, size_t i);
LWO_API const char *lwo_safetensors_metadata_find(const lwo_safetensors *f, const char *key); /* NULL if absent */

typedef struct lwo_safetensors_write_tensor {
    const char *name;          /* UTF-8, unique, not "__metadata__" */
    lwo_dtype dtype;           /* any but INVALID */
    int ndim;                  /* 0 .. LWO_SAFETENSORS_MAX_DIMS */
    const uint64_t *shape;     /* ndim entries (may be NULL when ndim is 0) */
    const void *data;          /* `bytes` bytes, little-endian; may be NULL when bytes is 0 */
    uint64_t bytes;            /* must equal dtype size * product(shape) */
} lwo_safetensors_write_tensor;
typedef struct lwo_safetensors_write_desc {
    const char *path;          /* required, UTF-8 */
    const lwo_safetensors_write_tensor *tensors;
    size_t tensor_count;
    const char *const *meta_keys, *const *meta_values;   /* meta_count each */
    size_t meta_count;
    char error[512];           /* out: why the write failed ("" on success) */
} lwo_safetensors_write_desc;
/* Writes a .safetensors file: the header (8-byte length, JSON with __metadata__ first when
   meta_count > 0, padded with spaces to a multiple of 8 as the Rust implementation does), then the
   data, ordered by element size (largest first) then name, so every tensor is aligned to its
   element size. Writes `path.tmp.<pid>`, fsyncs, renames over `path` (Windows: FlushFileBuffers,
   MoveFileExW replacing it); on failure removes the temporary file and writes the reason into
   desc->error. Returns LWO_ERROR_INVALID_ARGUMENT, LWO_ERROR_IO or LWO_ERROR_OUT_OF_HOST_MEMORY. */
LWO_API lwo_result lwo_safetensors_write(lwo_safetensors_write_desc *desc);

/* ==== Public API 13. Checkpoints: conventions, storage policies, conversion, loading ========= */
/* For a weight `<prefix>.weight`, lwo_safetensors_get_quant_info reports the convention it is
   stored in:
   LWO_CONVENTION_COMFY_QUANT `<prefix>.comfy_quant` exists: a U8 [n] tensor holding a JSON object
                              such as {"format":"float8_e4m3fn"} (copied to `comfy_format`);
                              scales `<prefix>.weight_scale`, optional `<prefix>.input_scale`.
   LWO_CONVENTION_LWO_INT8    metadata "lwo.quant" = "int8-per-channel-v1" and the weight is I8:
                              `<prefix>.weight` I8 [N, K], `<prefix>.weight_scale` F32 [N]
                              (w = q * weight_scale[n]), optional `<prefix>.smooth` F32 [K]
                              (the activation divisor: y = (x / smooth) @ (q * s)^T).
   LWO_CONVENTION_COMFY_SCALED_FP8a tensor named `scaled_fp8` exists and the weight is fp8:
                              `<prefix>.scale_weight` (one f32; missing means 1) and optional
                              `<prefix>.scale_input`; w = fp8 * scale_weight.
   LWO_CONVENTION_NONE        none of these (a plain tensor).
   Checked in that order. Scale values are parsed when the scale tensor has one element (F32, F16,
   BF16 or F64); else the *_value field is 1 and the caller reads the tensor.
   Returns LWO_ERROR_NOT_FOUND when weight_name is absent, LWO_ERROR_BAD_FILE when a convention's
   tensors are inconsistent (wrong dtype or shape, bad comfy_quant JSON); detail in the error. */
typedef enum lwo_convention {
    LWO_CONVENTION_NONE = 0,
    LWO_CONVENTION_COMFY_SCALED_FP8,
    LWO_CONVENTION_COMFY_QUANT,
    LWO_CONVENTION_LWO_INT8
} lwo_convention;
typedef struct lwo_safetensors_quant {
    lwo_convention convention;
    const lwo_safetensors_tensor *weight;
    const lwo_safetensors_tensor *weight_scale;   /* scale_weight / weight_scale, or NULL */
    const lwo_safetensors_tensor *input_scale;    /* scale_input / input_scale, or NULL */
    const lwo_safetensors_tensor *smooth;         /* lwo int8 only, or NULL */
    float weight_scale_value;            /* the scalar scale, or 1 */
    float input_scale_value;             /* the scalar input scale, or 1 */
    char comfy_format[64];               /* comfy_quant's "format" ("" otherwise) */
} lwo_safetensors_quant;
LWO_API lwo_result lwo_safetensors_get_quant_info(lwo_safetensors *f, const char *weight_name, lwo_safetensors_quant *out);

/* Storage policies say, by glob over tensor names, how each tensor is stored. Rules are tried in
   order; the first whose pattern matches the whole name wins. Patterns are globs over bytes: `*`
   matches any run (dots included), `?` one byte, everything else itself. A zero-filled policy keeps
   every tensor as it is (LWO_FORMAT_KEEP). */
typedef struct lwo_storage_rule { const char *pattern; lwo_format format; } lwo_storage_rule;
typedef struct lwo_storage_policy {
    const lwo_storage_rule *rules;
    size_t rule_count;
    lwo_format default_format;   /* when no rule matches. 0 = LWO_FORMAT_KEEP */
} lwo_storage_policy;
LWO_API int lwo_glob_match(const char *pattern, const char *name);   /* 1 on a match */
LWO_API lwo_format lwo_storage_policy_format(const lwo_storage_policy *p, const char *name);

/* Converts file tensor `tensor` to `format` on the CPU with lwo's reference codecs (lwo_ref_*, the
   math of the GPU kernels). Targets: KEEP, BF16, F16, F32, FP8_E4M3, FP8_E5M2, INT8 (W8A8 fp8 is a
   weight's format, not a conversion's). Any source dtype is read as f32 (f64 and the integers
   through a C conversion); f32 -> bf16/f16 round to nearest even (f16 overflows to inf); fp8 is
   q = fp8(x * (1 / scale)), RNE, saturating (inf too), NaN kept; int8 rows are
   clamp(rne(x * (1 / scale)), -127, 127) with NaN -> 0. The scales are absmax / 448 (e4m3),
   absmax / 57344 (e5m2), absmax(row) / 127 (int8), NaNs skipped, 1 for all zeros (or when the
   division underflows): on NaN-free data exactly what lwo_quantize (and so lwo_weight_create)
   produces on the GPU. NaN encodes as lwo_ref's: bf16 quiet, f16 0x7fff, fp8 sign | 0x7f. For INT8
   a tensor of ndim >= 2 has rows = shape[0] and cols = numel / rows; ndim 0 or 1 is one row.
   Zero copy: when the tensor's dtype already is the target's (always for KEEP) out->data points
   into the mapping, nothing is allocated, and scale / row_scales are 1 / NULL -- the file's own
   scales (lwo_safetensors_get_quant_info) apply.
   Buffers: `buf` (buf_bytes) receives the data and `scales` (scales_count floats) the int8 row
   scales; either NULL means lwo allocates it with LWO_MALLOC (freed by
   lwo_safetensors_converted_destroy). Work and memory are bounded by the tensor's bytes (LIMITS
   above): INT8 of a tensor with more rows than elements (an empty [R, 0] with R > 1) is
   LWO_ERROR_BAD_FILE, whatever the buffers. Returns LWO_ERROR_INVALID_ARGUMENT (bad target, buffer
   too small), LWO_ERROR_BAD_FILE, LWO_ERROR_OUT_OF_HOST_MEMORY; out->error says why (naming the
   tensor and its shape). */
typedef struct lwo_safetensors_convert_desc {
    const lwo_safetensors_tensor *tensor;   /* required */
    lwo_format format;         /* 0 = KEEP */
    void *buf;                 /* optional */
    uint64_t buf_bytes;
    float *scales;             /* optional */
    uint64_t scales_count;
} lwo_safetensors_convert_desc;
typedef struct lwo_safetensors_converted {
    lwo_format format;         /* the target (KEEP resolved to the file's own) */
    lwo_dtype dtype;           /* dtype of data */
    const void *data;
    uint64_t bytes;
    float scale;               /* fp8: dequantize as value * scale; else 1 */
    const float *row_scales;   /* int8: [rows]; else NULL */
    uint64_t rows, cols;       /* int8 layout; else 0 */
    int zero_copy;             /* 1 when data points into the file */
    void *owned_data;          /* what lwo allocated (freed by lwo_safetensors_converted_destroy) */
    float *owned_scales;
    char error[256];           /* why the call failed ("" on success) */
} lwo_safetensors_converted;
LWO_API lwo_result lwo_safetensors_convert(const lwo_safetensors_convert_desc *desc, lwo_safetensors_converted *out);
LWO_API void lwo_safetensors_converted_destroy(lwo_safetensors_converted *c);

/* Weights from a checkpoint (these need a context): lwo_safetensors_load_weight makes an lwo_weight (as lwo_weight_create does) from the 2-D tensor
   `weight_name` of f, normally "<prefix>.weight" [N, K], stored in `format` (KEEP: as the file holds it, lwo_safetensors_weight_format) with `placement`.
   "<prefix>.bias" (1-D [N]: F32, F16, BF16, or F64 converted to f32) is attached when present.
   How the tensor is read depends on how the file stores it (lwo_safetensors_get_quant_info):
     plain F32 / F16 / BF16: handed to lwo_weight_create as it is and quantized on the GPU into any
       format (F64 is converted to f32 on the CPU first);
     fp8 (ComfyUI scaled fp8, or comfy_quant "float8_e4m3fn" / "float8_e5m2", with a scalar weight
       scale; a plain fp8 tensor has scale 1): in its own fp8 format, codes and scale as they are
       (e4m3: LWO_FORMAT_FP8_E4M3, or LWO_FORMAT_FP8_E4M3_W8A8 with that scale on every row; e5m2:
       LWO_FORMAT_FP8_E5M2). The input scale is not used: lwo quantizes activations per call;
     lwo int8 (I8 + weight_scale [N] + optional smooth [K]): LWO_FORMAT_INT8 as it is, with its
       row scales and smooth;
     a quantized tensor asked for in another format is first dequantized on the CPU with lwo's
       reference codecs into an f32 buffer of N x K (held for the call only): fp8 as code * scale,
       int8 as (q * weight_scale[n]) / smooth[k]; for FP8_E4M3_W8A8 the smooth is kept (lwo folds
       it back into the columns); then it is quantized on the GPU like a plain tensor.
   Zero copy: when the tensor already is what the device stores (BF16 -> LWO_FORMAT_BF16, F16 ->
   F16, F8_E4M3 -> FP8_E4M3 or FP8_E4M3_W8A8, F8_E5M2 -> FP8_E5M2, lwo int8 -> INT8), K is a multiple
   of 64 and the placement is AUTO or STREAMED, the weight's host home is the file's mapping itself
   (lwo_weight_desc.borrow_host): the file's whole data area is registered with the driver
   read-only, once per file and context (the driver refuses to register a page twice, and packed
   tensors share pages), and no copy is made in RAM. Registering pins the mapping, so the first
   zero-copy load reads the whole file into RAM, and tensors of that file loaded as copies are then
   held twice: load a checkpoint as it is stored, or convert it once ahead (lwo_safetensors_convert,
   lwo_safetensors_write). Another context registering the same file gets pinned copies (a
   warning). The registration goes with the last weight using it. lwo_weight_info.host_home is then
   LWO_HOME_REGISTERED and host_data points at the tensor in the mapping. Should the driver refuse
   the registration, the weight gets lwo's pinned copy instead and a warning is logged.
   THE MAPPING MUST OUTLIVE THE WEIGHT: destroy the weights (or the context) before
   lwo_safetensors_destroy(f). Weights that were copied do not need the file after the call.
   Returns LWO_ERROR_INVALID_ARGUMENT (a NULL, a format or placement out of range, a tensor that is
   not 2-D), LWO_ERROR_NOT_FOUND (no such tensor), LWO_ERROR_BAD_FILE (a convention's tensors are
   inconsistent, a bias of the wrong shape, a scale that is not positive and finite, a smooth
   divisor that is not), LWO_ERROR_UNSUPPORTED (a dtype or convention lwo cannot store: integers
   other than lwo int8, per-channel or block comfy scales, other comfy_quant formats), or what
   lwo_weight_create returns. lwo_last_error(ctx) names the tensor. On failure *out is NULL and
   nothing stays allocated or registered. */
LWO_API lwo_result lwo_safetensors_load_weight(lwo_context *ctx, lwo_safetensors *f, const char *weight_name,
                                               lwo_format format, lwo_placement placement, lwo_weight **out);
/* The lwo_format a storage choice means for weight tensor `weight_name` of f. LWO_FORMAT_KEEP: the
   format the file holds it in (BF16 -> LWO_FORMAT_BF16, F16 -> F16, F8_E4M3 -> FP8_E4M3 (the upcast
   format), F8_E5M2 -> FP8_E5M2, lwo int8 -> INT8; F32 and F64 -> BF16, the nearest format lwo
   stores). Any weight format: itself. LWO_FORMAT_F32: LWO_ERROR_UNSUPPORTED, since lwo stores no
   weight as f32 (a policy meant for norms and biases must not pick f32 for a linear weight; ask
   for BF16 or KEEP). A tensor no format keeps (plain integers) is LWO_ERROR_UNSUPPORTED too. No
   context needed; the detail of a failure is lwo_safetensors_last_error(f). */
LWO_API lwo_result lwo_safetensors_weight_format(lwo_safetensors *f, const char *weight_name, lwo_format format,
                                                 lwo_format *out);
/* lwo_safetensors_load_weight in the format `policy` picks for weight_name: lwo_storage_policy_format,
   then lwo_safetensors_weight_format. A NULL policy keeps every tensor as the file has it. */
LWO_API lwo_result lwo_safetensors_load_weight_policy(lwo_context *ctx, lwo_safetensors *f, const char *weight_name,
                                                      const lwo_storage_policy *policy, lwo_placement placement,
                                                      lwo_weight **out);

/* LoRA files. A LoRA for the model weight `<base>.weight` is found under a key: `prefix` + base,
   with base's dots made '_' when `underscores` (kohya's lora_unet_double_blocks_0_img_attn_qkv),
   in either common layout:
     <key>.lora_down.weight [rank, cols]  <key>.lora_up.weight [rows, rank]  <key>.alpha (one value)
     <key>.lora_A.weight    [rank, cols]  <key>.lora_B.weight  [rows, rank]  (<key>.alpha if present)
   Factors f32, f16 or bf16; alpha one f32/f16/bf16/f64 value, finite and > 0. */
typedef struct lwo_lora_match {
    const char *prefix;        /* put before the base name: "lora_unet_", "transformer."; NULL = "" */
    int underscores;           /* 1: the base name's dots become '_' */
} lwo_lora_match;
typedef struct lwo_safetensors_lora {
    const lwo_safetensors_tensor *down, *up;
    const lwo_safetensors_tensor *alpha;   /* NULL when the file has none */
    int kohya;                 /* 1: lora_down / lora_up, 0: lora_A / lora_B */
    uint64_t rank, rows, cols;
    float alpha_value;         /* the file's alpha, 0 when it has none */
} lwo_safetensors_lora;
/* The LoRA of weight_name ("blocks.0.attn.qkv.weight" or without ".weight") in f. No context or
   GPU needed. LWO_ERROR_NOT_FOUND when f has no LoRA under its key; LWO_ERROR_BAD_FILE (with the
   detail in lwo_safetensors_last_error) for half a pair, both layouts at once, a factor that is
   not 2-D or not f32/f16/bf16, ranks that differ between down and up, or a malformed alpha. */
LWO_API lwo_result lwo_safetensors_find_lora(lwo_safetensors *f, const char *weight_name, const lwo_lora_match *match,
                                             lwo_safetensors_lora *out);
/* Attaches a LoRA file to a model: for each weights[i], the LoRA found for names[i] (if any) at
   `strength`. Every LoRA pair of the file must find its weight, or nothing is attached (a wrong
   prefix rule would otherwise load nothing, silently): LWO_ERROR_NOT_FOUND names the first pair left
   over, unless allow_unmatched (pairs for other models, a text encoder's, are then skipped and
   counted in `unmatched`). A pair whose shape does not fit its weight, or a lora_down pair without
   alpha (when desc.alpha is 0), is LWO_ERROR_BAD_FILE; on any failure nothing stays attached. */
typedef struct lwo_lora_load_desc {
    lwo_safetensors *file;     /* the LoRA file. Required */
    lwo_weight *const *weights;/* the model's weights [count]. Required */
    const char *const *names;  /* their names in the model's checkpoint [count]. Required */
    size_t count;
    lwo_lora_match match;      /* how a name becomes a key of the file */
    float strength;            /* 0 = 1 (set 0 later with lwo_lora_set_strength) */
    float alpha;               /* for pairs without <key>.alpha: 0 = rank for lora_A/lora_B pairs, an
                                  error for lora_down/lora_up pairs (kohya files always carry it) */
    lwo_dtype compute_dtype;   /* as lwo_lora_desc.compute_dtype */
    int allow_unmatched;       /* 1: pairs that fit no weight are skipped */
    lwo_lora **loras;          /* optional out [count]: weights[i]'s LoRA from this file, or NULL */
    size_t matched;            /* out: the weights that got a LoRA */
    size_t unmatched;          /* out: the file's pairs that found no weight (allow_unmatched) */
} lwo_lora_load_desc;
LWO_API lwo_result lwo_lora_load(lwo_context *ctx, lwo_lora_load_desc *desc);

/* ==== Public API 14. Stats =================================================================== */
typedef struct lwo_stats {
    uint64_t kernels_launched;
    uint64_t bytes_uploaded, bytes_downloaded;
    uint64_t modules_compiled, modules_from_cache;
    /* streaming (section 10) */
    uint64_t bytes_streamed, transfers;  /* host-to-device weight traffic through the ring (a
                                            captured pass counts at each lwo_graph_launch) */
    uint64_t passes, order_deviations;   /* passes ended; acquisitions that left the learned order */
    uint64_t graph_launches;
    /* lwo_linear's per-weight graphs (lwo_desc.graph_cache) */
    uint64_t linear_graph_captures;      /* graphs captured (each first call at a key) */
    uint64_t linear_graph_hits;          /* calls replayed from a cached graph */
    uint64_t linear_graph_evictions;     /* graphs dropped to make room (least recently used) */
    uint64_t linear_graph_fallbacks;     /* weights whose capture or update failed: plain launches since */
    uint64_t resident_bytes, ring_bytes; /* of the current plan */
    double wait_ms;                      /* time the compute stream stood waiting for transfers */
    double last_pass_ms;                 /* GPU time of the last finished pass */
    uint64_t last_pass_bytes;            /* bytes streamed in it */
    double last_pass_GBps;               /* last_pass_bytes / last_pass_ms: achieved host-to-device */
    double transfer_GBps;                /* the streamed copies' own rate since the last plan: their
                                            bytes over the time some copy was running (what a plan
                                            made after them is timed with) */
    double plan_predicted_ms;            /* a plan timed against a pass (lwo_streaming_plan after one): */
    double plan_predicted_wait_ms;       /* the model's eager pass and its waits, and a graph's */
    double plan_predicted_graph_ms;      /* replay of the pass; 0 when not timed */
    uint64_t gemm_splits;                /* GEMM launches whose last rounds were split along K
                                            (lwo_desc.gemm_split) */
    uint64_t gemm_fp8_weight;            /* GEMM launches that read an fp8 upcast weight as it is
                                            stored, converting it on chip (sm_90a): no bf16 copy */
    uint64_t linear_chunked;             /* lwo_linear calls that ran x in row chunks: more rows than
                                            the workspace holds (lwo_streaming_desc.max_rows) */
    uint64_t plan_min_budget;            /* the smallest lwo_desc.vram_budget the last lwo_streaming_plan
                                            would have succeeded with (set whether it did or not) */
    uint64_t plan_workspace_bytes;       /* what the last plan reserved for lwo_linear's workspace */
    uint64_t plan_split_bytes;           /* and for the GEMMs' split area (0: none) */
} lwo_stats;
/* The counters since create. Reading them waits for the compute stream, so the timings of all the
   work so far count. */
LWO_API lwo_result lwo_context_get_stats(lwo_context *ctx, lwo_stats *out);

/* ==== Public API 15. The context ============================================================== */
/* Every field's zero value is a documented default: `lwo_desc d = {0};` is a valid desc. */
typedef struct lwo_desc {
    int device;                /* CUDA device ordinal. Default 0. */
    int log_level;             /* messages at or below this level reach `log`. 0 = LWO_LOG_PROGRESS. */
    uint64_t vram_budget;      /* bytes of VRAM lwo may use, allocated once as its arena at create.
                                  0 = 90% of the device's free memory at create, minus 256 MiB,
                                  rounded down to 2 MiB. */
    const char *cache_dir;     /* cubin cache folder. NULL = $LWO_CACHE_DIR, else $XDG_CACHE_HOME/lwo,
                                  else $HOME/.cache/lwo; on Windows %LWO_CACHE_DIR%, else
                                  %LOCALAPPDATA%\lwo. "-" disables the disk cache. Paths are UTF-8. */
    const char *driver_path;   /* NULL = "libcuda.so.1" (never the toolkit's stub libcuda.so);
                                  "nvcuda.dll" on Windows */
    const char *nvrtc_path;    /* NULL = $LWO_NVRTC_PATH, then libnvrtc.so.13, .12, libnvrtc.so, then
                                  /usr/local/cuda/lib64 and the nvidia-cuda-nvrtc wheel locations.
                                  Windows: %LWO_NVRTC_PATH%, nvrtc64_130_0.dll and nvrtc64_120_0.dll
                                  through the DLL search, then nvrtc64_*.dll in the exe's folder,
                                  %CUDA_PATH%\bin\x64 and \bin, a venv's or conda's NVRTC wheel,
                                  %ProgramFiles%\NVIDIA GPU Computing Toolkit\CUDA\v* (newest first) */
    lwo_log_fn log;            /* NULL = warnings and errors to stderr (none with LWO_NO_STDIO) */
    void *log_user;
    void *cu_context;          /* a CUcontext to share; NULL = the device's primary context.
                                  lwo never destroys a context it was lent. */
    void *cu_stream;           /* a CUstream to use as the compute stream; NULL = lwo creates one.
                                  lwo never destroys a stream it was lent. */
    int offload_streams;       /* streams that carry weights host-to-device. 0 = 1: the copies run
                                  one at a time in use order anyway (side by side they share the
                                  bus), and the next copy starts 1.7 us after the last on one stream
                                  against 5 us across two (H200, measured) */
    int max_slots;             /* most staging slots in the streaming ring. 0 = 4 */
    uint64_t pinned_cap;       /* most bytes of host memory lwo pins for weight copies. 0 = half of the
                                  machine's RAM. Past it, copies stay pageable (slower, logged). */
    int gemm_kernels;          /* 0 = the fastest GEMMs lwo has for the device (on sm_90a: wgmma fed
                                  by the tensor copy engine, the tile chosen per shape); 1 = the
                                  mma.sync kernels on every arch (to compare, or to rule the Hopper
                                  kernels out); on sm_90a, 2, 3, 4, 5 force the 64x128, 128x128,
                                  128x256 or ping-pong 128x128 tile, 6 and 7 the ping-pong and the
                                  128x256 tiles in clusters of 2x1 CTAs, 8 the 192x192 tile in
                                  clusters of 2x1 (tests and benchmarks). 9: the tile per shape,
                                  and fp8 upcast weights read by the GEMM as stored, converted on
                                  chip, rather than through a 16-bit copy in the workspace; 2-8 do
                                  that too. 10: as 9, with the register-A kernels where they apply
                                  (16-bit y), their tile chosen per shape; 11, 12, 13 force their
                                  128x256, 192x192 or 128x128 tile. 0 takes them where a call's
                                  tiles fill the grid at least once and y is 16-bit;
                                  14: the tile per shape, fp8 upcast weights always through the
                                  16-bit copy (the comparison). */
    int gemm_split;            /* sm_90a, W8A8 and upcast lwo_linear: when a GEMM's tiles leave its
                                  last round of CTAs part empty, the last two rounds' tiles are shared
                                  out along K instead (partial sums added by the CTA that writes the
                                  tile). 0 = at 16 or more whole rounds, where the estimate says it
                                  is faster (it measured slower at fewer); -1 = never; n > 0 =
                                  always, on a grid of at most n CTAs (tests: splits at small
                                  shapes). */
    int graph_cache;           /* CUDA graphs per W8A8 weight (LWO_FORMAT_INT8, FP8_E4M3_W8A8) that
                                  lwo_linear keeps, one per (M, x, y and bias dtypes), least recently
                                  used evicted: its quantize + GEMM pair is captured once and replayed
                                  with the new pointers. 0 = 4; negative = no graphs (plain launches). */
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

/* Arena use: bytes now in use, the peak since create, the budget, the largest free block. */
typedef struct lwo_memory_stats { uint64_t budget, in_use, peak, largest_free; } lwo_memory_stats;

/* What a context is: its device, how its start went, its arena. */
typedef struct lwo_context_info {
    lwo_device_info device;
    lwo_startup_times startup;
    lwo_memory_stats memory;
} lwo_context_info;

/* Create a context: load the driver, pick the device, allocate the arena, load the kernels.
   On failure *out is still set (unless host memory ran out) so lwo_last_error(*out) can say why;
   such a context answers only lwo_last_error and lwo_destroy. Always lwo_destroy what you got. */
LWO_API lwo_result lwo_create(const lwo_desc *desc, lwo_context **out);
/* Frees everything lwo made (tensors, streams, events, modules, weights, arena); nothing it was lent. */
LWO_API void lwo_destroy(lwo_context *ctx);
LWO_API lwo_result lwo_context_get_info(lwo_context *ctx, lwo_context_info *out);

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
/* ==== 0. Core ================================================================================ */
/* What every section below uses: the C library, the allocation hooks, a few helpers; the CUDA
   driver's and NVRTC's types and function tables, declared here so no CUDA header is needed; the
   context, which holds every table and resource lwo has (two contexts never share mutable state);
   results, errors and logging. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LWO_MALLOC
#define LWO_MALLOC(sz) malloc(sz)
#define LWO_FREE(p) free(p)
#define LWO_REALLOC(p, sz) realloc(p, sz)
#endif
#ifndef LWO_ASSERT
#include <assert.h>
#define LWO_ASSERT(x) assert(x)
#endif

#ifdef LWO_STATIC
#define LWO_DEF static
#else
#define LWO_DEF
#endif

#define LWO__ERROR_CAP 4096

/* a * b without wrapping; 0 on overflow (callers treat 0 as invalid). */
static int lwo__mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static uint64_t lwo__round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
/* Room for one more element in a growing array of `count` elements of `size` bytes, capacity
   *cap: the array as it is while it has room, else one reallocated to twice the capacity (at
   least `first`) with *cap updated; NULL when out of host memory (the old array stays valid). */
static void *lwo__grow(void *data, size_t count, size_t *cap, size_t size, size_t first) {
    size_t nc;
    void *p;
    if (count < *cap) return data;
    nc = *cap ? *cap * 2 : first;
    if (nc <= *cap || nc > ((size_t)-1) / size) return NULL;
    p = LWO_REALLOC(data, nc * size);
    if (p) *cap = nc;
    return p;
}

static char *lwo__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)LWO_MALLOC(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends to a fixed buffer, truncating; keeps it NUL-terminated. */
static void lwo__appendf(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    va_list ap;
    if (len + 1 >= cap) return;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* FNV-1a 64: the cache key and the cache file's checksum; not cryptographic, only a guard
   against truncation and bit rot, with the key also covering every input of the compile. */
static uint64_t lwo__fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}
#define LWO__FNV_SEED 0xcbf29ce484222325ull

/* ---- the CUDA driver API and NVRTC, as lwo calls them --------------------------------------- */
/* The few driver types lwo needs, declared here so no CUDA header is needed to build. */
typedef int lwo__CUresult;
typedef int lwo__CUdevice;
typedef void *lwo__CUcontext;
typedef void *lwo__CUmodule;
typedef void *lwo__CUfunction;
typedef void *lwo__CUstream;
typedef void *lwo__CUevent;
typedef void *lwo__CUgraph;
typedef void *lwo__CUgraphExec;
typedef void *lwo__CUgraphNode;
typedef unsigned long long lwo__CUdeviceptr;
/* CUDA_KERNEL_NODE_PARAMS_v2 of the CUDA 12 driver API (what cuGraphExecKernelNodeSetParams takes
   at API version 12000): kern and ctx zero, so `func` is the kernel. */
typedef struct lwo__kernel_node_params {
    lwo__CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern, *ctx;
} lwo__kernel_node_params;
/* CUlaunchConfig: the launch cuOccupancyMaxActiveClusters is asked about (no attributes: the
   cluster shape is the kernel's own, __cluster_dims__). */
typedef struct lwo__launch_config {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    lwo__CUstream hStream;
    void *attrs;
    unsigned numAttrs;
} lwo__launch_config;
typedef struct lwo__launch_attr { int id, pad; unsigned int value[16]; } lwo__launch_attr; /* CUlaunchAttribute */

enum {
    LWO__CUDA_SUCCESS = 0, LWO__CUDA_ERROR_OUT_OF_MEMORY = 2, LWO__CUDA_ERROR_NOT_INITIALIZED = 3,
    LWO__CUDA_ERROR_STUB_LIBRARY = 34, LWO__CUDA_ERROR_NO_DEVICE = 100, LWO__CUDA_ERROR_INVALID_DEVICE = 101,
    LWO__CUDA_ERROR_NOT_READY = 600,
    LWO__CU_ATTR_MAX_THREADS_PER_BLOCK = 1, LWO__CU_ATTR_SM_COUNT = 16, LWO__CU_ATTR_CC_MAJOR = 75,
    LWO__CU_ATTR_CC_MINOR = 76, LWO__CU_ATTR_MAX_SMEM_OPTIN = 97,
    LWO__CU_FUNC_ATTR_MAX_DYNAMIC_SMEM = 8, LWO__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
    LWO__CU_STREAM_NON_BLOCKING = 1, LWO__CU_EVENT_DISABLE_TIMING = 2
};

/* The driver API version lwo asks cuGetProcAddress for: with 12000 the unversioned names below
   resolve to their current (_v2, _v3) entry points, never the CUDA 3.x-era ABI. */
#define LWO__CUDA_API_VERSION 12000

/* One line per driver entry point: X(name, return-and-parameter list). */
#define LWO__DRIVER_FUNCS(X)                                                                          \
    X(cuGetErrorName, (lwo__CUresult, const char **))                                                \
    X(cuGetErrorString, (lwo__CUresult, const char **))                                              \
    X(cuInit, (unsigned))                                                                            \
    X(cuDriverGetVersion, (int *))                                                                   \
    X(cuDeviceGetCount, (int *))                                                                     \
    X(cuDeviceGet, (lwo__CUdevice *, int))                                                           \
    X(cuDeviceGetName, (char *, int, lwo__CUdevice))                                                 \
    X(cuDeviceGetAttribute, (int *, int, lwo__CUdevice))                                             \
    X(cuDeviceTotalMem, (size_t *, lwo__CUdevice))                                                   \
    X(cuDevicePrimaryCtxRetain, (lwo__CUcontext *, lwo__CUdevice))                                   \
    X(cuDevicePrimaryCtxRelease, (lwo__CUdevice))                                                    \
    X(cuCtxSetCurrent, (lwo__CUcontext))                                                             \
    X(cuCtxGetCurrent, (lwo__CUcontext *))                                                           \
    X(cuCtxGetDevice, (lwo__CUdevice *))                                                             \
    X(cuCtxSynchronize, (void))                                                                      \
    X(cuMemGetInfo, (size_t *, size_t *))                                                            \
    X(cuMemAlloc, (lwo__CUdeviceptr *, size_t))                                                      \
    X(cuMemFree, (lwo__CUdeviceptr))                                                                 \
    X(cuMemHostAlloc, (void **, size_t, unsigned))                                                   \
    X(cuMemFreeHost, (void *))                                                                       \
    X(cuMemHostRegister, (void *, size_t, unsigned))                                                 \
    X(cuMemHostUnregister, (void *))                                                                 \
    X(cuMemcpyHtoDAsync, (lwo__CUdeviceptr, const void *, size_t, lwo__CUstream))                    \
    X(cuMemcpyDtoHAsync, (void *, lwo__CUdeviceptr, size_t, lwo__CUstream))                          \
    X(cuMemcpyDtoDAsync, (lwo__CUdeviceptr, lwo__CUdeviceptr, size_t, lwo__CUstream))                \
    X(cuMemsetD8Async, (lwo__CUdeviceptr, unsigned char, size_t, lwo__CUstream))                     \
    X(cuMemsetD32Async, (lwo__CUdeviceptr, unsigned, size_t, lwo__CUstream))                         \
    X(cuStreamCreate, (lwo__CUstream *, unsigned))                                                   \
    X(cuStreamDestroy, (lwo__CUstream))                                                              \
    X(cuStreamSynchronize, (lwo__CUstream))                                                          \
    X(cuStreamWaitEvent, (lwo__CUstream, lwo__CUevent, unsigned))                                    \
    X(cuEventCreate, (lwo__CUevent *, unsigned))                                                     \
    X(cuEventDestroy, (lwo__CUevent))                                                                \
    X(cuEventRecord, (lwo__CUevent, lwo__CUstream))                                                  \
    X(cuEventSynchronize, (lwo__CUevent))                                                            \
    X(cuEventQuery, (lwo__CUevent))                                                                  \
    X(cuEventElapsedTime, (float *, lwo__CUevent, lwo__CUevent))                                     \
    X(cuModuleLoadData, (lwo__CUmodule *, const void *))                                             \
    X(cuModuleUnload, (lwo__CUmodule))                                                               \
    X(cuModuleGetFunction, (lwo__CUfunction *, lwo__CUmodule, const char *))                         \
    X(cuFuncSetAttribute, (lwo__CUfunction, int, int))                                               \
    X(cuOccupancyMaxActiveClusters, (int *, lwo__CUfunction, const lwo__launch_config *))             \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, (int *, lwo__CUfunction, int, size_t))            \
    X(cuLaunchKernel, (lwo__CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
                       unsigned, lwo__CUstream, void **, void **))                                   \
    X(cuLaunchKernelEx, (const lwo__launch_config *, lwo__CUfunction, void **, void **))             \
    X(cuStreamBeginCapture, (lwo__CUstream, int))                                                    \
    X(cuStreamEndCapture, (lwo__CUstream, lwo__CUgraph *))                                           \
    X(cuGraphInstantiateWithFlags, (lwo__CUgraphExec *, lwo__CUgraph, unsigned long long))            \
    X(cuGraphLaunch, (lwo__CUgraphExec, lwo__CUstream))                                              \
    X(cuGraphDestroy, (lwo__CUgraph))                                                                \
    X(cuGraphExecDestroy, (lwo__CUgraphExec))                                                      \
    X(cuGraphExecKernelNodeSetParams, (lwo__CUgraphExec, lwo__CUgraphNode, const lwo__kernel_node_params *)) \
    X(cuStreamIsCapturing, (lwo__CUstream, int *))                                                   \
    X(cuStreamGetCaptureInfo, (lwo__CUstream, int *, unsigned long long *, lwo__CUgraph *,           \
                               const lwo__CUgraphNode **, size_t *))                                 \
    X(cuTensorMapEncodeTiled, (void *, int, unsigned, void *, const uint64_t *, const uint64_t *,        \
                               const unsigned *, const unsigned *, int, int, int, int))

typedef struct lwo__driver {
    void *lib;
#define LWO__X(name, params) lwo__CUresult (*name) params;
    LWO__DRIVER_FUNCS(LWO__X)
#undef LWO__X
} lwo__driver;

typedef int lwo__nvrtcResult;
#define LWO__NVRTC_ERROR_INVALID_OPTION 5
typedef struct lwo__nvrtcProgram_st *lwo__nvrtcProgram;

#define LWO__NVRTC_FUNCS(X)                                                                           \
    X(nvrtcVersion, (int *, int *))                                                                  \
    X(nvrtcCreateProgram, (lwo__nvrtcProgram *, const char *, const char *, int, const char *const *, \
                           const char *const *))                                                     \
    X(nvrtcDestroyProgram, (lwo__nvrtcProgram *))                                                    \
    X(nvrtcCompileProgram, (lwo__nvrtcProgram, int, const char *const *))                            \
    X(nvrtcGetProgramLogSize, (lwo__nvrtcProgram, size_t *))                                         \
    X(nvrtcGetProgramLog, (lwo__nvrtcProgram, char *))                                               \
    X(nvrtcGetCUBINSize, (lwo__nvrtcProgram, size_t *))                                              \
    X(nvrtcGetCUBIN, (lwo__nvrtcProgram, char *))

typedef struct lwo__nvrtc {
    void *lib;
    void *builtins; /* lwo__nvrtc_companion's, if any */
    int version; /* major * 1000 + minor * 10, like the driver's */
    char path[1024];
#define LWO__X(name, params) lwo__nvrtcResult (*name) params;
    LWO__NVRTC_FUNCS(LWO__X)
#undef LWO__X
} lwo__nvrtc;

/* ---- the context ---------------------------------------------------------------------------- */
typedef struct lwo__block { uint64_t off, size; } lwo__block;

/* A stream or an event: a driver handle on the context's list. The public lwo_stream and lwo_event
   point at one (their structs are never defined), so one pair of functions makes and unmakes
   both; the magic tells them apart. */
typedef struct lwo__handle { uint32_t magic; lwo_context *ctx; void *h; struct lwo__handle *next; } lwo__handle;
typedef struct lwo__host_block { void *p; struct lwo__host_block *next; } lwo__host_block;

#define LWO__MAGIC_CTX 0x6c776f43u
#define LWO__MAGIC_TENSOR 0x6c776f54u
#define LWO__MAGIC_STREAM 0x6c776f53u
#define LWO__MAGIC_EVENT 0x6c776f45u
#define LWO__MAGIC_MODULE 0x6c776f4du

#define LWO__WG_TILES 7 /* the Hopper GEMM's tiles (lwo__wg_tiles) */
#define LWO__WGU_TILES 3 /* the register-A GEMM's tiles (lwo__wgu_tiles) */
#define LWO__GEMM_VARIANTS 6 /* the GEMM modules (lwo__gemm_variants) */
/* The context: every table and resource lwo holds, so two contexts never share mutable state.
   Each section's fields are its own; the comments say which. */
struct lwo_context {
    uint32_t magic;
    int ok; /* 1 once lwo_create succeeded; a failed context answers only last_error and destroy */
    lwo_desc desc;
    char *cache_dir, *nvrtc_path, *driver_path;
    lwo__driver cu;
    lwo__nvrtc nvrtc; /* loaded on the first compile only */
    lwo__CUdevice dev;
    lwo__CUcontext cuctx;
    int own_ctx;
    lwo__CUstream compute;
    int own_stream;
    lwo_device_info info;
    lwo_startup_times times;
    lwo_stats stats;
    /* arena: one allocation of exactly the budget; free list sorted by offset */
    lwo__CUdeviceptr arena;
    uint64_t arena_size, arena_used, arena_peak;
    lwo__block *free_list;
    size_t nfree, capfree;
    lwo_module *kernels; /* lwo's own module */
    lwo_module *gemm_modules[LWO__GEMM_VARIANTS]; /* the tensor-core GEMMs, one module per operand type, built on first use */
    int gemm_clusters[LWO__GEMM_VARIANTS][LWO__WG_TILES]; /* per module and Hopper tile: its clusters that fit at once (0: not asked) */
    unsigned gemm_smem[LWO__GEMM_VARIANTS][LWO__WG_TILES]; /* ... and the dynamic shared memory its function is allowed (0: not set) */
    unsigned gemm_wgu_smem[LWO__GEMM_VARIANTS][LWO__WGU_TILES]; /* the same for the register-A tiles */
    int rowq_fit[3][3]; /* per x dtype (f32, f16, bf16): the ring quantizer's blocks per SM, for (threads, shared bytes) */
    unsigned rowq_smem[3]; /* ... and the dynamic shared memory its function was allowed (0: not raised yet) */
    lwo_module *modules;
    lwo_tensor *tensors;
    lwo__handle *handles;       /* streams and events */
    lwo__host_block *host_blocks;
    lwo__CUdeviceptr scratch; /* 256 bytes of arena for reductions */
    struct lwo__engine *engine; /* the streaming engine (section 10), made on first use */
    uint64_t pinned_bytes;      /* host bytes pinned for weight homes, against desc.pinned_cap */
    lwo_weight *weights;        /* every live weight (section 9) */
    struct lwo__item **items;   /* every item made, by id (section 9); freed with the context */
    size_t nitems, capitems;
    struct lwo__host_reg *host_regs; /* shared registrations of caller ranges (section 5) */
    uint64_t ws_off, ws_size;   /* lwo_linear's grow-only workspace in the arena (0: none) */
    uint64_t split_off, split_size; /* the Hopper GEMMs' split area in the arena (0: none yet) */
    int split_refused;              /* the arena had no room for it (logged once) */
    int planned;                /* a streaming plan is in force: the workspace and split area are
                                   what it reserved, and neither grows (section 10) */
    int capturing;              /* a whole-pass capture is open (section 11): nothing grows (growing
                                   synchronizes) and the engine joins its streams to the capture */
    int chunk_logged;           /* lwo_linear said once that it runs x in row chunks */
    lwo_tensor *lora_scratch;   /* x A^T of the LoRA side paths, a row chunk at a time (section 9) */
    uint64_t lora_epoch;        /* counts LoRA attaches and detaches: a whole-pass graph captured
                                   under another count would run the old side paths (section 11) */
    struct lwo__lsink *lsink;   /* while lwo_linear captures or retargets a graph (section 11) */
    unsigned gemm_wanted;       /* the GEMM variants the weights made so far use (bit v: lwo__gemm_variants[v]) */
    char error[LWO__ERROR_CAP];
};
LWO_DEF const char *lwo_result_string(lwo_result r) {
    static const char *const names[LWO_RESULT_COUNT] = {
        "LWO_SUCCESS", "LWO_ERROR_INVALID_ARGUMENT", "LWO_ERROR_OUT_OF_HOST_MEMORY", "LWO_ERROR_NO_DRIVER",
        "LWO_ERROR_STUB_DRIVER", "LWO_ERROR_DRIVER_SYMBOL", "LWO_ERROR_NO_DEVICE", "LWO_ERROR_NO_NVRTC",
        "LWO_ERROR_COMPILE", "LWO_ERROR_OUT_OF_BUDGET", "LWO_ERROR_OUT_OF_DEVICE_MEMORY", "LWO_ERROR_BAD_FILE",
        "LWO_ERROR_IO", "LWO_ERROR_UNSUPPORTED", "LWO_ERROR_NOT_FOUND", "LWO_ERROR_CUDA",
    };
    return (r >= 0 && r < LWO_RESULT_COUNT) ? names[r] : "LWO_ERROR_UNKNOWN";
}

LWO_DEF const char *lwo_last_error(const lwo_context *ctx) {
    if (!ctx) return "no context (lwo_create could not allocate one, or NULL was passed)";
    if (ctx->magic != LWO__MAGIC_CTX) return "not a live lwo_context";
    return ctx->error;
}

static void lwo__log(lwo_context *ctx, lwo_log_level level, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    if ((int)level > ctx->desc.log_level) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->desc.log) ctx->desc.log(ctx->desc.log_user, level, msg);
#ifndef LWO_NO_STDIO
    else if (level == LWO_LOG_PROGRESS) fprintf(stderr, "lwo: %s\n", msg);
    else fprintf(stderr, "lwo %s: %s\n", level == LWO_LOG_ERROR ? "error" : level == LWO_LOG_WARN ? "warning" : "info", msg);
#endif
}

/* Records the failure detail and returns r, so callers write `return lwo__fail(ctx, r, ...)`. */
static lwo_result lwo__fail(lwo_context *ctx, lwo_result r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    lwo__log(ctx, LWO_LOG_DEBUG, "%s: %s", lwo_result_string(r), ctx->error);
    return r;
}

static lwo_result lwo__cuda_fail(lwo_context *ctx, lwo__CUresult rc, const char *what) {
    const char *name = "?", *str = "";
    if (ctx->cu.cuGetErrorName) ctx->cu.cuGetErrorName(rc, &name);
    if (ctx->cu.cuGetErrorString) ctx->cu.cuGetErrorString(rc, &str);
    return lwo__fail(ctx, rc == LWO__CUDA_ERROR_OUT_OF_MEMORY ? LWO_ERROR_OUT_OF_DEVICE_MEMORY : LWO_ERROR_CUDA,
                     "%s failed: %s (%d): %s", what, name ? name : "?", rc, str ? str : "");
}
#define LWO__CU(ctx, call)                                                                            \
    do {                                                                                             \
        lwo__CUresult lwo__rc = (ctx)->cu.call;                                                      \
        if (lwo__rc != 0) return lwo__cuda_fail((ctx), lwo__rc, #call);                              \
    } while (0)

/* Every entry point taking a context starts here: a usable context, made current on this thread. */
static lwo_result lwo__enter(lwo_context *ctx) {
    if (!ctx || ctx->magic != LWO__MAGIC_CTX) return LWO_ERROR_INVALID_ARGUMENT;
    ctx->error[0] = 0;
    if (!ctx->ok) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "this context failed to create; only lwo_last_error and lwo_destroy may be called");
    LWO__CU(ctx, cuCtxSetCurrent(ctx->cuctx));
    return LWO_SUCCESS;
}
#define LWO__ENTER(ctx)                                                                               \
    do {                                                                                             \
        lwo_result lwo__r = lwo__enter(ctx);                                                         \
        if (lwo__r) return lwo__r;                                                                   \
    } while (0)

/* The driver handle of p, which must be a live stream or event (magic) of this context. */
static lwo_result lwo__handle_get(lwo_context *ctx, const void *p, uint32_t magic, const char *arg, void **out) {
    const lwo__handle *x = (const lwo__handle *)p;
    if (!x || x->magic != magic)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument '%s' is not a live %s", arg, magic == LWO__MAGIC_STREAM ? "lwo_stream" : "lwo_event");
    if (x->ctx != ctx) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument '%s' belongs to another lwo_context", arg);
    *out = x->h;
    return LWO_SUCCESS;
}
/* The stream work goes on: s, or the compute stream for NULL. */
static lwo_result lwo__get_stream(lwo_context *ctx, lwo_stream *s, lwo__CUstream *out) {
    void *h = NULL;
    lwo_result r;
    *out = ctx->compute;
    if (!s) return LWO_SUCCESS;
    if ((r = lwo__handle_get(ctx, s, LWO__MAGIC_STREAM, "stream", &h)) != 0) return r;
    *out = (lwo__CUstream)h;
    return LWO_SUCCESS;
}
/* The driver handle of event e (argument `arg`). */
static lwo_result lwo__get_event(lwo_context *ctx, const lwo_event *e, const char *arg, lwo__CUevent *out) {
    void *h = NULL;
    lwo_result r = lwo__handle_get(ctx, e, LWO__MAGIC_EVENT, arg, &h);
    *out = (lwo__CUevent)h;
    return r;
}
#define LWO__GET_STREAM(ctx, s, out)                                                                  \
    do {                                                                                             \
        lwo_result lwo__r = lwo__get_stream((ctx), (s), &(out));                                     \
        if (lwo__r) return lwo__r;                                                                   \
    } while (0)

/* ==== 1. Platform ============================================================================ */
/* Everything that differs between POSIX and Windows is in this section, as small lwo__ functions
   with one POSIX and one Win32 body each; the sections below call them and never test _WIN32.
   On Windows every path lwo is given or builds is UTF-8, widened (MultiByteToWideChar) for the W
   APIs, so a user name or folder outside the ANSI code page works; what Windows hands back (file
   names, environment values, error text) is narrowed to UTF-8 the same way. File sizes and
   offsets are 64-bit on both. */
#if defined(_WIN32)
#if !defined(_WIN64)
#error "lwo needs 64-bit Windows: the CUDA 12 driver API it calls has no 32-bit form"
#endif
/* the lean windows.h, without min/max macros; the two switches are undone after it unless the
   including file had set them itself. The file that defines LWO_IMPLEMENTATION sees the rest of
   windows.h's macros (near, far, ...): keep it a file of its own where that matters. */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#define LWO__UNDEF_LEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#define LWO__UNDEF_NOMINMAX
#endif
#include <windows.h>
#ifdef LWO__UNDEF_LEAN
#undef WIN32_LEAN_AND_MEAN
#undef LWO__UNDEF_LEAN
#endif
#ifdef LWO__UNDEF_NOMINMAX
#undef NOMINMAX
#undef LWO__UNDEF_NOMINMAX
#endif
#else
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#endif
/* ---- what each platform provides --------------------------------------------------------------
   lwo__now_ms()                       monotonic milliseconds
   lwo__page_size(), lwo__phys_ram()   bytes (phys_ram 0: unknown)
   lwo__pid()                          this process's id, for temporary file names
   lwo__sys_error(buf, cap)            the last failed call's reason (errno / GetLastError) as text
   lwo__env(name, buf, cap)            an environment variable as UTF-8: 1 if set, non-empty, fits
   lwo__lib_open/_sym/_close           a shared library (dlopen / LoadLibraryExW)
   lwo__thread_start/_join, lwo__sleep_ms  a function on a thread of its own (the parallel compile)
   lwo__read_file(path, &data, &size)  a whole file into memory
   lwo__wfile_create/_put/_finish/_close  a file being written (lwo__wfile_open and the rest,
                                       after the platforms, build the atomic write on them)
   lwo__rename_over(from, to, sync)    a rename that replaces `to`
   lwo__remove_file, lwo__mkdir1       one file, one folder
   lwo__dir_open/_next/_close          the names in a folder
   lwo__map_file, lwo__unmap_file      a regular file mapped read-only, whole
   lwo__default_cache_dir(buf, cap)    where cubins go when nothing says otherwise
   lwo__nvrtc_search(try, ...)         every place NVRTC may be, in order
   lwo__nvrtc_companion(path, maj, min)  what NVRTC needs loaded beside it (Windows: its builtins)
   LWO__DRIVER_DEFAULT, LWO__NVRTC_LIB, LWO__SEP, LWO__IS_SEP(c)   names and separators */

/* lwo__dir: the names in one folder, one at a time (the cache lookup) */
typedef struct lwo__dir {
#if defined(_WIN32)
    HANDLE h;
    WIN32_FIND_DATAW fd;
    int first;                  /* fd holds FindFirstFileW's entry, not yet returned */
#else
    DIR *d;
#endif
    char name[1024];            /* the last name returned, UTF-8 */
} lwo__dir;

/* lwo__wfile: a file written whole under a temporary name, then renamed over its real name, so a
   reader sees the old file or the new one, never a part */
typedef struct lwo__wfile {
    const char *path;
    char *tmp;                  /* "<path>.tmp.<pid>" */
#if defined(_WIN32)
    HANDLE h;
#else
    int fd;
#endif
} lwo__wfile;

/* lwo__thread: fn(arg) on a thread of its own. POSIX threads are looked up at run time (glibc
   2.34 on has them in libc), so a program links with -ldl -lm alone; where they are not to be had,
   lwo__thread_start fails and the caller runs fn itself. */
typedef struct lwo__thread {
    void (*fn)(void *);
    void *arg;
#if defined(_WIN32)
    HANDLE h;
#else
    pthread_t t;
    void *self;                 /* dlopen(NULL): where pthread_join is */
#endif
} lwo__thread;

typedef int (*lwo__try_lib_fn)(void *user, const char *path);

#if defined(_WIN32)
#define LWO__DRIVER_DEFAULT "nvcuda.dll"
#define LWO__NVRTC_LIB "nvrtc64_*.dll"
#define LWO__SEP "\\"
#define LWO__IS_SEP(c) ((c) == '/' || (c) == '\\')

/* UTF-8 -> a new wide string (LWO_FREE it); NULL when s is not UTF-8 or memory ran out, with
   the last error saying which. */
static wchar_t *lwo__widen(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    wchar_t *w;
    if (n <= 0) return NULL;
    w = (wchar_t *)LWO_MALLOC((size_t)n * sizeof *w);
    if (!w) { SetLastError(ERROR_NOT_ENOUGH_MEMORY); return NULL; }
    if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) { LWO_FREE(w); return NULL; }
    return w;
}

/* wide -> UTF-8 in buf; 0 (and buf empty) when it does not fit. */
static int lwo__narrow(const wchar_t *w, char *buf, size_t cap) {
    int n;
    if (!cap) return 0;
    n = WideCharToMultiByte(CP_UTF8, 0, w, -1, buf, cap > INT_MAX ? INT_MAX : (int)cap, NULL, NULL);
    if (n <= 0) { buf[0] = 0; return 0; }
    return 1;
}

static double lwo__now_ms(void) {
    LARGE_INTEGER t, f;
    QueryPerformanceCounter(&t);
    QueryPerformanceFrequency(&f);
    return (double)t.QuadPart * 1e3 / (double)f.QuadPart;
}

static uint64_t lwo__page_size(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize ? (uint64_t)si.dwPageSize : 4096u;
}

static uint64_t lwo__phys_ram(void) {
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof ms;
    return GlobalMemoryStatusEx(&ms) ? (uint64_t)ms.ullTotalPhys : 0;
}

static unsigned long lwo__pid(void) { return (unsigned long)GetCurrentProcessId(); }

static const char *lwo__sys_error(char *buf, size_t cap) {
    DWORD e = GetLastError(), n;
    wchar_t msg[512];
    char text[1024];
    n = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e, 0, msg, 512, NULL);
    while (n && (msg[n - 1] == L'\r' || msg[n - 1] == L'\n' || msg[n - 1] == L' ' || msg[n - 1] == L'.')) msg[--n] = 0;
    if (n && lwo__narrow(msg, text, sizeof text)) snprintf(buf, cap, "%s (error %lu)", text, (unsigned long)e);
    else snprintf(buf, cap, "error %lu", (unsigned long)e);
    return buf;
}

/* GetEnvironmentVariableW rather than getenv: getenv's value is in the ANSI code page, which
   cannot spell every user's %LOCALAPPDATA%. */
static int lwo__env(const char *name, char *buf, size_t cap) {
    wchar_t wname[64], *w;
    DWORD n;
    size_t i;
    int ok = 0;
    for (i = 0; name[i] && i + 1 < sizeof wname / sizeof *wname; i++) wname[i] = (wchar_t)(unsigned char)name[i];
    wname[i] = 0;
    n = GetEnvironmentVariableW(wname, NULL, 0); /* the length with its NUL; 1: set but empty */
    if (n <= 1) return 0;
    w = (wchar_t *)LWO_MALLOC((size_t)n * sizeof *w);
    if (w && GetEnvironmentVariableW(wname, w, n) == n - 1) ok = lwo__narrow(w, buf, cap);
    LWO_FREE(w);
    return ok;
}

/* A path with a folder in it is made absolute and loaded with LOAD_WITH_ALTERED_SEARCH_PATH (whose
   behaviour with a relative path is undefined), so the DLLs it imports are found beside it; a
   bare name takes the standard search (the exe's folder, the system folders, PATH). No error box
   for a DLL that will not load: the thread's error mode for the call, where Windows 7's API is. */
static void *lwo__lib_open(const char *path, char *err, size_t cap) {
    wchar_t *w = lwo__widen(path), *full = NULL;
    HMODULE h = NULL;
    DWORD flags = 0;
#if !defined(_WIN32_WINNT) || _WIN32_WINNT >= 0x0601
    DWORD old = 0;
#endif
    if (!w) { lwo__sys_error(err, cap); return NULL; }
    if (strchr(path, '\\') || strchr(path, '/')) {
        DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
        if (n && (full = (wchar_t *)LWO_MALLOC((size_t)n * sizeof *full)) != NULL && GetFullPathNameW(w, n, full, NULL) < n) {
            LWO_FREE(w);
            w = full;
            flags = LOAD_WITH_ALTERED_SEARCH_PATH;
        } else {
            LWO_FREE(full);
        }
    }
#if !defined(_WIN32_WINNT) || _WIN32_WINNT >= 0x0601
    SetThreadErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX, &old);
#endif
    h = LoadLibraryExW(w, NULL, flags);
    if (!h) lwo__sys_error(err, cap);
#if !defined(_WIN32_WINNT) || _WIN32_WINNT >= 0x0601
    SetThreadErrorMode(old, NULL);
#endif
    LWO_FREE(w);
    return (void *)h;
}

static void *lwo__lib_sym(void *lib, const char *name) {
    FARPROC f = GetProcAddress((HMODULE)lib, name);
    void *p;
    memcpy(&p, &f, sizeof p); /* a function pointer as data, which C and C++ allow only this way */
    return p;
}

static void lwo__lib_close(void *lib) { FreeLibrary((HMODULE)lib); }

static DWORD WINAPI lwo__thread_main(LPVOID p) {
    lwo__thread *t = (lwo__thread *)p;
    t->fn(t->arg);
    return 0;
}
static int lwo__thread_start(lwo__thread *t, void (*fn)(void *), void *arg) {
    t->fn = fn;
    t->arg = arg;
    t->h = CreateThread(NULL, 0, lwo__thread_main, t, 0, NULL);
    return t->h != NULL;
}
static void lwo__thread_join(lwo__thread *t) {
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
}
static void lwo__sleep_ms(unsigned ms) { Sleep(ms); }

static int lwo__read_file(const char *path, unsigned char **data, size_t *size) {
    wchar_t *w = lwo__widen(path);
    HANDLE h;
    LARGE_INTEGER sz;
    unsigned char *buf;
    size_t got = 0;
    if (!w) return 0;
    /* every share mode: another process may rename a new cache file over this one meanwhile */
    h = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                    FILE_ATTRIBUTE_NORMAL, NULL);
    LWO_FREE(w);
    if (h == INVALID_HANDLE_VALUE) return 0;
    if (!GetFileSizeEx(h, &sz) || sz.QuadPart < 0 || (uint64_t)sz.QuadPart >= (uint64_t)SIZE_MAX ||
        !(buf = (unsigned char *)LWO_MALLOC((size_t)sz.QuadPart + 1))) { CloseHandle(h); return 0; }
    while (got < (size_t)sz.QuadPart) {
        size_t left = (size_t)sz.QuadPart - got;
        DWORD chunk = left > (1u << 30) ? (1u << 30) : (DWORD)left, n = 0;
        if (!ReadFile(h, buf + got, chunk, &n, NULL) || n == 0) break;
        got += n;
    }
    CloseHandle(h);
    if (got != (size_t)sz.QuadPart) { LWO_FREE(buf); return 0; }
    *data = buf;
    *size = got;
    return 1;
}

/* Opens f->tmp for writing, truncated; 0 with the reason left for lwo__sys_error. */
static int lwo__wfile_create(lwo__wfile *f) {
    wchar_t *w = lwo__widen(f->tmp);
    f->h = w ? CreateFileW(w, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL) : INVALID_HANDLE_VALUE;
    LWO_FREE(w);
    return f->h != INVALID_HANDLE_VALUE;
}

/* Writes some of p[0, n), n at most 1 GiB: the bytes written, 0 on failure. */
static uint64_t lwo__wfile_put(lwo__wfile *f, const char *p, uint64_t n) {
    DWORD w = 0;
    return WriteFile(f->h, p, (DWORD)n, &w, NULL) ? w : 0;
}

/* sync: the data reaches the disk (FlushFileBuffers) before the close. */
static int lwo__wfile_finish(lwo__wfile *f, int sync) {
    int ok;
    if (sync && !FlushFileBuffers(f->h)) return 0;
    ok = CloseHandle(f->h) != 0;
    f->h = INVALID_HANDLE_VALUE;
    return ok;
}

static void lwo__wfile_close(lwo__wfile *f) {
    if (f->h != INVALID_HANDLE_VALUE) CloseHandle(f->h);
    f->h = INVALID_HANDLE_VALUE;
}

/* MOVEFILE_REPLACE_EXISTING is Windows' rename over an existing name; it fails while another
   process holds that file open without FILE_SHARE_DELETE. sync: MOVEFILE_WRITE_THROUGH. */
static int lwo__rename_over(const char *from, const char *to, int sync) {
    wchar_t *wf = lwo__widen(from), *wt = lwo__widen(to);
    int ok = wf && wt && MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | (sync ? MOVEFILE_WRITE_THROUGH : 0));
    DWORD e = GetLastError();
    LWO_FREE(wf);
    LWO_FREE(wt);
    SetLastError(e);   /* for lwo__sys_error */
    return ok;
}

static int lwo__remove_file(const char *path) {
    wchar_t *w = lwo__widen(path);
    int ok = w && DeleteFileW(w);
    LWO_FREE(w);
    return ok;
}

/* Creates one folder; 1 if it exists afterwards. */
static int lwo__mkdir1(const char *path) {
    wchar_t *w = lwo__widen(path);
    DWORD a;
    int ok = 0;
    if (w) {
        ok = CreateDirectoryW(w, NULL) ||
             ((a = GetFileAttributesW(w)) != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY));
        LWO_FREE(w);
    }
    return ok;
}

static int lwo__dir_open(lwo__dir *d, const char *path) {
    size_t n = strlen(path);
    char *pat = (char *)LWO_MALLOC(n + 3);
    wchar_t *w;
    d->h = INVALID_HANDLE_VALUE;
    if (!pat) return 0;
    memcpy(pat, path, n);
    memcpy(pat + n, "\\*", 3);
    w = lwo__widen(pat);
    LWO_FREE(pat);
    if (!w) return 0;
    d->h = FindFirstFileW(w, &d->fd);
    LWO_FREE(w);
    d->first = 1;
    return d->h != INVALID_HANDLE_VALUE;
}

/* The next name (UTF-8), NULL at the end; a name too long for d->name is skipped. */
static const char *lwo__dir_next(lwo__dir *d) {
    for (;;) {
        if (!d->first && !FindNextFileW(d->h, &d->fd)) return NULL;
        d->first = 0;
        if (lwo__narrow(d->fd.cFileName, d->name, sizeof d->name)) return d->name;
    }
}

static void lwo__dir_close(lwo__dir *d) {
    if (d->h != INVALID_HANDLE_VALUE) FindClose(d->h);
    d->h = INVALID_HANDLE_VALUE;
}

/* Maps the whole file read-only: *base and *size; a 0-byte file maps nothing (*base is ""). Only a
   regular file on a disk is accepted: a folder, pipe, console or device is refused by name. The
   file's handle and the mapping object are closed at once: the view holds the file open. Other
   processes may read, rename or delete it meanwhile, but not write it (FILE_SHARE_WRITE is not
   given), so the bytes validated are the bytes used. */
static lwo_result lwo__map_file(const char *path, const uint8_t **base, uint64_t *size, char *err, size_t cap) {
    wchar_t *w = lwo__widen(path);
    char why[512];
    HANDLE h, m;
    LARGE_INTEGER sz;
    DWORD a;
    void *v;
    *base = NULL;
    *size = 0;
    if (!w) { lwo__sys_error(why, sizeof why); snprintf(err, cap, "%s: cannot open: %s", path, why); return LWO_ERROR_IO; }
    a = GetFileAttributesW(w);
    if (a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY)) {
        LWO_FREE(w);
        snprintf(err, cap, "%s: not a regular file", path);
        return LWO_ERROR_IO;
    }
    h = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    LWO_FREE(w);
    if (h == INVALID_HANDLE_VALUE) { lwo__sys_error(why, sizeof why); snprintf(err, cap, "%s: cannot open: %s", path, why); return LWO_ERROR_IO; }
    if (GetFileType(h) != FILE_TYPE_DISK) { CloseHandle(h); snprintf(err, cap, "%s: not a regular file", path); return LWO_ERROR_IO; }
    if (!GetFileSizeEx(h, &sz)) { lwo__sys_error(why, sizeof why); CloseHandle(h); snprintf(err, cap, "%s: cannot stat: %s", path, why); return LWO_ERROR_IO; }
    if (sz.QuadPart < 0 || (uint64_t)sz.QuadPart > (uint64_t)SIZE_MAX) { CloseHandle(h); snprintf(err, cap, "%s: file too large to map", path); return LWO_ERROR_IO; }
    if (sz.QuadPart == 0) { CloseHandle(h); *base = (const uint8_t *)""; return LWO_SUCCESS; } /* no mapping of 0 bytes */
    m = CreateFileMappingW(h, NULL, PAGE_READONLY, 0, 0, NULL);
    if (!m) { lwo__sys_error(why, sizeof why); CloseHandle(h); snprintf(err, cap, "%s: cannot map: %s", path, why); return LWO_ERROR_IO; }
    v = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
    if (!v) lwo__sys_error(why, sizeof why);
    CloseHandle(m);
    CloseHandle(h);
    if (!v) { snprintf(err, cap, "%s: cannot map: %s", path, why); return LWO_ERROR_IO; }
    *base = (const uint8_t *)v;
    *size = (uint64_t)sz.QuadPart;
    return LWO_SUCCESS;
}

static void lwo__unmap_file(const uint8_t *base, uint64_t size) {
    if (base && size) UnmapViewOfFile((const void *)base);
}

/* %LOCALAPPDATA%\lwo: per user, per machine, not roamed (cubins are built for this machine's GPU). */
static int lwo__default_cache_dir(char *buf, size_t cap) {
    char v[2048];
    if (!lwo__env("LOCALAPPDATA", v, sizeof v)) return 0;
    return (size_t)snprintf(buf, cap, "%s\\lwo", v) < cap;
}

/* nvrtc64_*.dll in one folder, highest name (newest CUDA) first; *.alt.dll are skipped, as the
   Linux search skips libnvrtc.alt (the same compiler built against another C++ runtime). */
static int lwo__nvrtc_in_dir(const char *dir, lwo__try_lib_fn try_fn, void *user, char *tried, size_t cap) {
    char names[16][64], path[2400];
    size_t n = 0, i, j, dl = strlen(dir);
    wchar_t *w;
    HANDLE h;
    WIN32_FIND_DATAW fd;
    if (dl + sizeof "\\nvrtc64_*.dll" > sizeof path) return 0;
    snprintf(path, sizeof path, "%s\\nvrtc64_*.dll", dir);
    if (!(w = lwo__widen(path))) return 0;
    h = FindFirstFileW(w, &fd);
    LWO_FREE(w);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            char nm[64];
            if (n < 16 && lwo__narrow(fd.cFileName, nm, sizeof nm) && !strstr(nm, ".alt.")) memcpy(names[n++], nm, sizeof nm);
        } while (FindNextFileW(h, &fd));
        FindClose(h);
    }
    if (!n) { lwo__appendf(tried, cap, "\n  %s: no match", path); return 0; }
    for (i = 1; i < n; i++) /* insertion sort, descending: sixteen names at most */
        for (j = i; j > 0 && strcmp(names[j - 1], names[j]) < 0; j--) {
            char t[64];
            memcpy(t, names[j], sizeof t); memcpy(names[j], names[j - 1], sizeof t); memcpy(names[j - 1], t, sizeof t);
        }
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s\\%s", dir, names[i]);
        if (try_fn(user, path)) return 1;
    }
    return 0;
}

/* The versioned DLL names through the standard search, then nvrtc64_*.dll in: the exe's folder,
   %CUDA_PATH%\bin\x64 (CUDA 13) and \bin (CUDA 12), a Python venv's or conda's NVRTC wheel, and
   every toolkit under %ProgramFiles%\NVIDIA GPU Computing Toolkit\CUDA, newest first. */
static int lwo__nvrtc_search(lwo__try_lib_fn try_fn, void *user, char *tried, size_t cap) {
    static const char *const names[] = { "nvrtc64_130_0.dll", "nvrtc64_120_0.dll" };
    static const char *const env_dirs[][2] = {
        { "CUDA_PATH", "\\bin\\x64" }, { "CUDA_PATH", "\\bin" },
        { "VIRTUAL_ENV", "\\Lib\\site-packages\\nvidia\\cu13\\bin\\x86_64" },
        { "VIRTUAL_ENV", "\\Lib\\site-packages\\nvidia\\cuda_nvrtc\\bin" },
        { "CONDA_PREFIX", "\\Library\\bin" }, { "CONDA_PREFIX", "\\Library\\bin\\x64" },
    };
    char dir[2048], v[1024];
    wchar_t exe[1024];
    DWORD n;
    size_t i;
    lwo__dir d;
    for (i = 0; i < sizeof names / sizeof *names; i++)
        if (try_fn(user, names[i])) return 1;
    n = GetModuleFileNameW(NULL, exe, sizeof exe / sizeof *exe);
    if (n > 0 && n < sizeof exe / sizeof *exe && lwo__narrow(exe, dir, sizeof dir)) {
        char *slash = strrchr(dir, '\\');
        if (slash) { *slash = 0; if (lwo__nvrtc_in_dir(dir, try_fn, user, tried, cap)) return 1; }
    }
    for (i = 0; i < sizeof env_dirs / sizeof *env_dirs; i++) {
        if (!lwo__env(env_dirs[i][0], v, sizeof v)) {
            if (i == 0 || strcmp(env_dirs[i][0], env_dirs[i - 1][0]) != 0) lwo__appendf(tried, cap, "\n  %%%s%%: not set", env_dirs[i][0]);
            continue;
        }
        snprintf(dir, sizeof dir, "%s%s", v, env_dirs[i][1]);
        if (lwo__nvrtc_in_dir(dir, try_fn, user, tried, cap)) return 1;
    }
    if (lwo__env("ProgramFiles", v, sizeof v)) {
        char vers[16][64];
        size_t nv = 0, j;
        const char *e;
        snprintf(dir, sizeof dir, "%s\\NVIDIA GPU Computing Toolkit\\CUDA", v);
        if (lwo__dir_open(&d, dir)) {
            while ((e = lwo__dir_next(&d)) != NULL)
                if (e[0] == 'v' && strlen(e) < sizeof vers[0] && nv < 16) memcpy(vers[nv++], e, strlen(e) + 1);
            lwo__dir_close(&d);
        }
        if (!nv) lwo__appendf(tried, cap, "\n  %s\\v*: none", dir);
        for (i = 1; i < nv; i++) /* newest first: "v13.0" before "v12.8" before "v12.10"? by number */
            for (j = i; j > 0 && atof(vers[j - 1] + 1) < atof(vers[j] + 1); j--) {
                char t[64];
                memcpy(t, vers[j], sizeof t); memcpy(vers[j], vers[j - 1], sizeof t); memcpy(vers[j - 1], t, sizeof t);
            }
        for (i = 0; i < nv; i++) {
            char sub[2400];
            snprintf(sub, sizeof sub, "%s\\%s\\bin\\x64", dir, vers[i]);
            if (lwo__nvrtc_in_dir(sub, try_fn, user, tried, cap)) return 1;
            snprintf(sub, sizeof sub, "%s\\%s\\bin", dir, vers[i]);
            if (lwo__nvrtc_in_dir(sub, try_fn, user, tried, cap)) return 1;
        }
    }
    return 0;
}

/* NVRTC loads its builtins DLL (nvrtc-builtins64_<major><minor>.dll) by bare name when it first
   compiles, through the standard search, which does not include NVRTC's own folder: NVRTC loaded
   from a path off PATH (a wheel, a copy beside nothing) fails there. Loading the builtins from that
   folder first makes the later by-name load find the module already in the process. Returns its
   handle (lwo__lib_close at unload) or NULL when there is none to load, which is not an error. */
static void *lwo__nvrtc_companion(const char *nvrtc_path, int major, int minor) {
    char path[1200], why[256];
    const char *slash = strrchr(nvrtc_path, '\\'), *fwd = strrchr(nvrtc_path, '/');
    size_t dl;
    if (fwd && (!slash || fwd > slash)) slash = fwd;
    if (!slash || (dl = (size_t)(slash - nvrtc_path)) + 40 > sizeof path) return NULL;
    memcpy(path, nvrtc_path, dl);
    snprintf(path + dl, sizeof path - dl, "\\nvrtc-builtins64_%d%d.dll", major, minor);
    return lwo__lib_open(path, why, sizeof why);
}

#else /* POSIX */
#define LWO__DRIVER_DEFAULT "libcuda.so.1"
#define LWO__NVRTC_LIB "libnvrtc"
#define LWO__SEP "/"
#define LWO__IS_SEP(c) ((c) == '/')

static double lwo__now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static uint64_t lwo__page_size(void) {
    long ps = sysconf(_SC_PAGESIZE);
    return ps > 0 ? (uint64_t)ps : 4096u;
}

static uint64_t lwo__phys_ram(void) {
    long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
    return (pages > 0 && ps > 0) ? (uint64_t)pages * (uint64_t)ps : 0;
}

static unsigned long lwo__pid(void) { return (unsigned long)getpid(); }

static const char *lwo__sys_error(char *buf, size_t cap) {
    snprintf(buf, cap, "%s", strerror(errno));
    return buf;
}

static int lwo__env(const char *name, char *buf, size_t cap) {
    const char *e = getenv(name);
    size_t n;
    if (!e || !*e || (n = strlen(e)) >= cap) return 0;
    memcpy(buf, e, n + 1);
    return 1;
}

static void *lwo__lib_open(const char *path, char *err, size_t cap) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(err, cap, "%s", e ? e : "unknown error");
    }
    return lib;
}

static void *lwo__lib_sym(void *lib, const char *name) { return dlsym(lib, name); }

static void lwo__lib_close(void *lib) { dlclose(lib); }

typedef int (*lwo__pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*lwo__pthread_join_fn)(pthread_t, void **);
static void *lwo__thread_main(void *p) {
    lwo__thread *t = (lwo__thread *)p;
    t->fn(t->arg);
    return NULL;
}
static int lwo__thread_start(lwo__thread *t, void (*fn)(void *), void *arg) {
    void *sym;
    lwo__pthread_create_fn create;
    t->fn = fn;
    t->arg = arg;
    if ((t->self = dlopen(NULL, RTLD_NOW)) == NULL) return 0;
    sym = dlsym(t->self, "pthread_create");
    memcpy(&create, &sym, sizeof create);   /* data to function pointer, the one way C and C++ allow */
    if (!sym || !dlsym(t->self, "pthread_join") || create(&t->t, NULL, lwo__thread_main, t) != 0) {
        dlclose(t->self);
        return 0;
    }
    return 1;
}
static void lwo__thread_join(lwo__thread *t) {
    void *sym = dlsym(t->self, "pthread_join");
    lwo__pthread_join_fn join;
    memcpy(&join, &sym, sizeof join);
    join(t->t, NULL);
    dlclose(t->self);
}
static void lwo__sleep_ms(unsigned ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static int lwo__read_file(const char *path, unsigned char **data, size_t *size) {
    struct stat st;
    unsigned char *buf;
    size_t got = 0, want;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size >= (uint64_t)SIZE_MAX ||
        !(buf = (unsigned char *)LWO_MALLOC((size_t)st.st_size + 1))) { close(fd); return 0; }
    want = (size_t)st.st_size;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != want) { LWO_FREE(buf); return 0; }
    *data = buf;
    *size = got;
    return 1;
}

static int lwo__wfile_create(lwo__wfile *f) {
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    return f->fd >= 0;
}

static uint64_t lwo__wfile_put(lwo__wfile *f, const char *p, uint64_t n) {
    ssize_t w;
    do w = write(f->fd, p, (size_t)n); while (w < 0 && errno == EINTR);
    if (w == 0) errno = EIO;
    return w > 0 ? (uint64_t)w : 0;
}

/* sync: fsync before the close, so after a crash the renamed name holds the whole new file. */
static int lwo__wfile_finish(lwo__wfile *f, int sync) {
    int ok = !sync || fsync(f->fd) == 0;
    ok = (close(f->fd) == 0) && ok;
    f->fd = -1;
    return ok;
}

static void lwo__wfile_close(lwo__wfile *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}

static int lwo__rename_over(const char *from, const char *to, int sync) {
    (void)sync;   /* the data was synced before the close */
    return rename(from, to) == 0;
}

static int lwo__remove_file(const char *path) { return unlink(path) == 0; }

/* Creates one folder; 1 if it exists afterwards. */
static int lwo__mkdir1(const char *path) {
    struct stat st;
    return mkdir(path, 0755) == 0 || (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

static int lwo__dir_open(lwo__dir *d, const char *path) { return (d->d = opendir(path)) != NULL; }

/* The next name, NULL at the end; a name too long for d->name is skipped. */
static const char *lwo__dir_next(lwo__dir *d) {
    struct dirent *e;
    while ((e = readdir(d->d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < sizeof d->name) { memcpy(d->name, e->d_name, n + 1); return d->name; }
    }
    return NULL;
}

static void lwo__dir_close(lwo__dir *d) {
    if (d->d) closedir(d->d);
    d->d = NULL;
}

/* Maps the whole file read-only: *base and *size; a 0-byte file maps nothing (*base is ""). Only a
   regular file is accepted: O_NONBLOCK keeps the open of a FIFO from waiting for a writer, and
   fstat refuses it, a folder or a device by name. */
/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. fstat on the
   descriptor (not stat on the path, which could change in between) then admits regular files
   only, so O_NONBLOCK never affects a read. */
static lwo_result lwo__map_file(const char *path, const uint8_t **base, uint64_t *size, char *err, size_t cap) {
    struct stat st;
    char why[256];
    void *m;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    *base = NULL;
    *size = 0;
    if (fd < 0) { snprintf(err, cap, "%s: cannot open: %s", path, lwo__sys_error(why, sizeof why)); return LWO_ERROR_IO; }
    if (fstat(fd, &st) != 0) { snprintf(err, cap, "%s: cannot stat: %s", path, lwo__sys_error(why, sizeof why)); close(fd); return LWO_ERROR_IO; }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                         : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "something else";
        snprintf(err, cap, "%s: is %s, not a regular file (lwo maps regular files only)", path, kind);
        close(fd);
        return LWO_ERROR_IO;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        snprintf(err, cap, "%s: file too large to map", path); close(fd); return LWO_ERROR_IO;
    }
    if (st.st_size == 0) { close(fd); *base = (const uint8_t *)""; return LWO_SUCCESS; } /* no mapping of 0 bytes */
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { snprintf(err, cap, "%s: cannot map: %s", path, lwo__sys_error(why, sizeof why)); return LWO_ERROR_IO; }
    *base = (const uint8_t *)m;
    *size = (uint64_t)st.st_size;
    return LWO_SUCCESS;
}

static void lwo__unmap_file(const uint8_t *base, uint64_t size) {
    if (base && size) munmap((void *)(uintptr_t)base, (size_t)size);
}

/* $XDG_CACHE_HOME/lwo, else $HOME/.cache/lwo */
static int lwo__default_cache_dir(char *buf, size_t cap) {
    char v[2048];
    if (lwo__env("XDG_CACHE_HOME", v, sizeof v)) return (size_t)snprintf(buf, cap, "%s/lwo", v) < cap;
    if (lwo__env("HOME", v, sizeof v)) return (size_t)snprintf(buf, cap, "%s/.cache/lwo", v) < cap;
    return 0;
}

/* The loader's own search for the versioned sonames, then the toolkit and Python wheel locations,
   highest version first within each pattern. */
static int lwo__nvrtc_search(lwo__try_lib_fn try_fn, void *user, char *tried, size_t cap) {
    static const char *const sonames[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so" };
    static const char *const patterns[] = {
        "/usr/local/cuda/lib64/libnvrtc.so*", "/usr/local/cuda/targets/*/lib/libnvrtc.so*",
        "/usr/local/cuda-*/lib64/libnvrtc.so*", "/opt/cuda/lib64/libnvrtc.so*",
        "/usr/lib/x86_64-linux-gnu/libnvrtc.so*", "/usr/lib/aarch64-linux-gnu/libnvrtc.so*",
        "/usr/local/lib/python3*/*-packages/nvidia/cu1*/lib/libnvrtc.so*",
        "/usr/local/lib/python3*/*-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
        "/usr/lib/python3*/*-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
        "/opt/*/.venv/lib/python3*/site-packages/nvidia/cu1*/lib/libnvrtc.so*",
        "/opt/*/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
    };
    size_t i, j;
    for (i = 0; i < sizeof sonames / sizeof *sonames; i++)
        if (try_fn(user, sonames[i])) return 1;
    for (i = 0; i < sizeof patterns / sizeof *patterns; i++) {
        glob_t g;
        if (glob(patterns[i], 0, NULL, &g) == 0) {
            for (j = g.gl_pathc; j-- > 0;) { /* highest version sorts last */
                if (strstr(g.gl_pathv[j], "builtins") || strstr(g.gl_pathv[j], ".alt.")) continue;
                if (try_fn(user, g.gl_pathv[j])) { globfree(&g); return 1; }
            }
            globfree(&g);
        } else {
            lwo__appendf(tried, cap, "\n  %s: no match", patterns[i]);
        }
    }
    return 0;
}
/* libnvrtc finds its builtins library beside itself (its RUNPATH is $ORIGIN): nothing to load. */
static void *lwo__nvrtc_companion(const char *nvrtc_path, int major, int minor) {
    (void)nvrtc_path; (void)major; (void)minor;
    return NULL;
}
#endif

/* ---- built on the functions above, the same on every platform ------------------------------- */

/* lwo__wfile, on the functions above: open, write, then commit (rename over path) or abort
   (remove the temporary); a failed open or commit leaves nothing to abort. err says why. */
static void lwo__wfile_abort(lwo__wfile *f) {
    lwo__wfile_close(f);
    if (f->tmp) lwo__remove_file(f->tmp);
    LWO_FREE(f->tmp);
    f->tmp = NULL;
}

static int lwo__wfile_open(lwo__wfile *f, const char *path, char *err, size_t cap) {
    size_t n = strlen(path) + 32;
    char why[512];
    f->path = path;
    f->tmp = (char *)LWO_MALLOC(n);
    if (!f->tmp) { snprintf(err, cap, "%s: out of host memory", path); return 0; }
    snprintf(f->tmp, n, "%s.tmp.%lu", path, lwo__pid());
    if (!lwo__wfile_create(f)) {
        snprintf(err, cap, "%s: cannot create: %s", f->tmp, lwo__sys_error(why, sizeof why));
        LWO_FREE(f->tmp);
        f->tmp = NULL;
        return 0;
    }
    return 1;
}

static int lwo__wfile_write(lwo__wfile *f, const void *data, uint64_t n, char *err, size_t cap) {
    const char *p = (const char *)data;
    char why[512];
    while (n) {
        uint64_t w = lwo__wfile_put(f, p, n > ((uint64_t)1 << 30) ? ((uint64_t)1 << 30) : n);
        if (w == 0) { snprintf(err, cap, "%s: write failed: %s", f->tmp, lwo__sys_error(why, sizeof why)); return 0; }
        p += w;
        n -= w;
    }
    return 1;
}

static int lwo__wfile_commit(lwo__wfile *f, int sync, char *err, size_t cap) {
    char why[512];
    if (!lwo__wfile_finish(f, sync)) {
        snprintf(err, cap, "%s: write failed: %s", f->tmp, lwo__sys_error(why, sizeof why));
        lwo__wfile_abort(f);
        return 0;
    }
    if (!lwo__rename_over(f->tmp, f->path, sync)) {
        snprintf(err, cap, "rename %s -> %s: %s", f->tmp, f->path, lwo__sys_error(why, sizeof why));
        lwo__wfile_abort(f);
        return 0;
    }
    LWO_FREE(f->tmp);
    f->tmp = NULL;
    return 1;
}
/* Writes a + b to path whole or not at all (temporary name, then rename). No fsync: the cache's
   readers check a checksum, so a file cut short by a crash is recompiled, not trusted. */
static int lwo__write_file_atomic(const char *path, const void *a, size_t an, const void *b, size_t bn) {
    lwo__wfile f;
    char err[256];
    if (!lwo__wfile_open(&f, path, err, sizeof err)) return 0;
    if (!lwo__wfile_write(&f, a, an, err, sizeof err) || (bn && !lwo__wfile_write(&f, b, bn, err, sizeof err))) {
        lwo__wfile_abort(&f);
        return 0;
    }
    return lwo__wfile_commit(&f, 0, err, sizeof err);
}

/* mkdir -p: each prefix is created in turn, and only the last must succeed (a drive "C:", a UNC
   "\\server\share" or a folder without permission above an existing one cannot be created). */
static int lwo__mkdir_p(const char *dir) {
    char p[4096];
    size_t i, n = strlen(dir);
    if (n == 0 || n >= sizeof p) return 0;
    memcpy(p, dir, n + 1);
    for (i = 1; i < n; i++)
        if (LWO__IS_SEP(p[i]) && !LWO__IS_SEP(p[i - 1])) {
            char c = p[i];
            p[i] = 0;
            lwo__mkdir1(p);
            p[i] = c;
        }
    return lwo__mkdir1(p);
}

/* ==== 2. Driver loader ======================================================================= */
typedef lwo__CUresult (*lwo__get_proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef lwo__CUresult (*lwo__get_proc_v1_fn)(const char *, void **, int, unsigned long long);

/* Loads `path` (LWO__DRIVER_DEFAULT: libcuda.so.1, nvcuda.dll on Windows) and fills the table.
   On failure writes why into err. */
static lwo_result lwo__driver_load(lwo__driver *d, const char *path, char *err, size_t errcap) {
    void *sym;
    lwo__get_proc_v2_fn gpa2 = NULL;
    lwo__get_proc_v1_fn gpa1 = NULL;
    lwo__CUresult r;
    char why[1024];
    memset(d, 0, sizeof *d);
    d->lib = lwo__lib_open(path, why, sizeof why);
    if (!d->lib) {
        snprintf(err, errcap, "no CUDA driver: could not load '%s' (%s); install the NVIDIA driver, "
                 "or set lwo_desc.driver_path", path, why);
        return LWO_ERROR_NO_DRIVER;
    }
    sym = lwo__lib_sym(d->lib, "cuGetProcAddress_v2");
    if (sym) memcpy(&gpa2, &sym, sizeof sym);
    else if ((sym = lwo__lib_sym(d->lib, "cuGetProcAddress")) != NULL) memcpy(&gpa1, &sym, sizeof sym);
    if (!gpa2 && !gpa1) {
        snprintf(err, errcap, "'%s' has no cuGetProcAddress: the driver is older than CUDA 11.3", path);
        return LWO_ERROR_DRIVER_SYMBOL;
    }
#define LWO__X(name, params)                                                                          \
    {                                                                                                \
        void *p = NULL;                                                                              \
        int status = 0;                                                                              \
        r = gpa2 ? gpa2(#name, &p, LWO__CUDA_API_VERSION, 0, &status)                                \
                 : gpa1(#name, &p, LWO__CUDA_API_VERSION, 0);                                        \
        if (r == LWO__CUDA_ERROR_STUB_LIBRARY) {                                                     \
            snprintf(err, errcap, "'%s' is the CUDA toolkit's stub libcuda (CUDA_ERROR_STUB_LIBRARY), " \
                     "not a driver: it only satisfies the linker. Install the NVIDIA driver and make " \
                     "sure its libcuda.so.1 comes first in the library path", path);                 \
            return LWO_ERROR_STUB_DRIVER;                                                            \
        }                                                                                            \
        if (r != 0 || !p) {                                                                          \
            snprintf(err, errcap, "the driver in '%s' lacks %s for CUDA API %d (error %d): the driver is " \
                     "too old for lwo", path, #name, LWO__CUDA_API_VERSION, r);                      \
            return LWO_ERROR_DRIVER_SYMBOL;                                                          \
        }                                                                                            \
        memcpy(&d->name, &p, sizeof p);                                                              \
    }
    LWO__DRIVER_FUNCS(LWO__X)
#undef LWO__X
    return LWO_SUCCESS;
}

static void lwo__driver_unload(lwo__driver *d) {
    if (d->lib) lwo__lib_close(d->lib);
    memset(d, 0, sizeof *d);
}

/* ==== 3. NVRTC loader ======================================================================== */
static int lwo__nvrtc_try(lwo__nvrtc *n, const char *path, char *tried, size_t cap) {
    char why[1024];
    void *lib = lwo__lib_open(path, why, sizeof why);
    int maj = 0, min = 0;
    if (!lib) { lwo__appendf(tried, cap, "\n  %s: %s", path, why); return 0; }
#define LWO__X(name, params)                                                                          \
    {                                                                                                \
        void *p = lwo__lib_sym(lib, #name);                                                          \
        if (!p) { lwo__appendf(tried, cap, "\n  %s: no symbol %s", path, #name); lwo__lib_close(lib); return 0; } \
        memcpy(&n->name, &p, sizeof p);                                                              \
    }
    LWO__NVRTC_FUNCS(LWO__X)
#undef LWO__X
    n->lib = lib;
    n->nvrtcVersion(&maj, &min);
    n->version = maj * 1000 + min * 10;
    n->builtins = lwo__nvrtc_companion(path, maj, min);
    snprintf(n->path, sizeof n->path, "%s", path);
    return 1;
}

/* lwo__nvrtc_search's callback: one candidate, its failure noted in the list of places tried. */
typedef struct lwo__nvrtc_search_ctx { lwo__nvrtc *n; char *tried; size_t cap; } lwo__nvrtc_search_ctx;
static int lwo__nvrtc_try_cb(void *user, const char *path) {
    lwo__nvrtc_search_ctx *c = (lwo__nvrtc_search_ctx *)user;
    return lwo__nvrtc_try(c->n, path, c->tried, c->cap);
}

/* Search order: explicit path (lwo_desc.nvrtc_path, else $LWO_NVRTC_PATH), then the platform's
   list (lwo__nvrtc_search): the versioned names through the loader's own search, then the toolkit
   and Python wheel locations. */
static lwo_result lwo__nvrtc_load(lwo__nvrtc *n, const char *explicit_path, char *err, size_t errcap) {
    char tried[3000] = "", env[2048];
    lwo__nvrtc_search_ctx c;
    memset(n, 0, sizeof *n);
    if ((!explicit_path || !*explicit_path) && lwo__env("LWO_NVRTC_PATH", env, sizeof env)) explicit_path = env;
    if (explicit_path && *explicit_path) {
        if (lwo__nvrtc_try(n, explicit_path, tried, sizeof tried)) return LWO_SUCCESS;
    }
    c.n = n; c.tried = tried; c.cap = sizeof tried;
    if (lwo__nvrtc_search(lwo__nvrtc_try_cb, &c, tried, sizeof tried)) return LWO_SUCCESS;
    snprintf(err, errcap, "no NVRTC: lwo must compile its kernels for this GPU and could not load "
             LWO__NVRTC_LIB " (set LWO_NVRTC_PATH or lwo_desc.nvrtc_path). Tried:%s", tried);
    return LWO_ERROR_NO_NVRTC;
}

static void lwo__nvrtc_unload(lwo__nvrtc *n) {
    if (n->lib) lwo__lib_close(n->lib);
    if (n->builtins) lwo__lib_close(n->builtins);
    memset(n, 0, sizeof *n);
}

/* Compiles `source` for `arch` ("sm_90a") to a cubin. On failure err holds the NVRTC log. */
static lwo_result lwo__nvrtc_compile(const lwo__nvrtc *n, const char *source, const char *name,
                                     const char *arch, const char *const *extra, unsigned char **cubin,
                                     size_t *cubin_size, char *err, size_t errcap) {
    const char *opts[24];
    char archopt[64];
    int nopt = 0, rc;
    size_t logn = 0, sz = 0;
    lwo__nvrtcProgram p = NULL;
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    opts[nopt++] = archopt;
    opts[nopt++] = "-std=c++17";
    opts[nopt++] = "-default-device";
    while (extra && *extra && nopt < 22) opts[nopt++] = *extra++;
    /* the kernels of a module compiled side by side on every core (lwo's GEMM modules hold a dozen):
       the first start's wait is the slowest kernel's, not their sum. Measured, NVRTC 13, 2 cores:
       the s8 GEMMs 17.2 s alone, 11.3-13.0 s split. An NVRTC without the option compiles without it */
    opts[nopt++] = "-split-compile=0";
    for (;;) {
        if (n->nvrtcCreateProgram(&p, source, name, 0, NULL, NULL) != 0) {
            snprintf(err, errcap, "nvrtcCreateProgram failed for '%s'", name);
            return LWO_ERROR_COMPILE;
        }
        rc = n->nvrtcCompileProgram(p, nopt, opts);
        if (rc != LWO__NVRTC_ERROR_INVALID_OPTION || strcmp(opts[nopt - 1], "-split-compile=0") != 0) break;
        n->nvrtcDestroyProgram(&p);
        nopt--;
    }
    n->nvrtcGetProgramLogSize(p, &logn);
    if (rc != 0) {
        char *log = (char *)LWO_MALLOC(logn + 1);
        if (log) { log[0] = 0; n->nvrtcGetProgramLog(p, log); log[logn] = 0; }
        snprintf(err, errcap, "NVRTC %d.%d could not compile '%s' for %s (error %d):\n%s", n->version / 1000,
                 n->version % 1000 / 10, name, arch, rc, log ? log : "(no log)");
        LWO_FREE(log);
        n->nvrtcDestroyProgram(&p);
        return LWO_ERROR_COMPILE;
    }
    if (n->nvrtcGetCUBINSize(p, &sz) != 0 || sz == 0) {
        snprintf(err, errcap, "NVRTC produced no cubin for '%s' on %s (is %s a real architecture?)", name, arch, arch);
        n->nvrtcDestroyProgram(&p);
        return LWO_ERROR_COMPILE;
    }
    *cubin = (unsigned char *)LWO_MALLOC(sz);
    if (!*cubin) { n->nvrtcDestroyProgram(&p); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
    n->nvrtcGetCUBIN(p, (char *)*cubin);
    *cubin_size = sz;
    n->nvrtcDestroyProgram(&p);
    return LWO_SUCCESS;
}

/* ==== 4. Modules ============================================================================= */
/* The embedded kernel source, compiled by NVRTC for the device's exact arch, cached on disk as
   cubins keyed by a hash of what went into them; the launch helpers; the caller's own modules. */
/* The kernel source, embedded from kernels.cuh.inc. */
/* LWO_EMBED_BEGIN (tools/embed_kernels.py writes this block; edit kernels.cuh.inc) */
static const char *const lwo__kernel_source_parts[] = {
"/* kernels.cuh.inc - every kernel of lwo, as real CUDA C.\n   lwo.h embeds this file (tools/embed_kernels.py) and compiles it with NVRTC at run time for the\n   device's exact arch. No toolkit #include is available to NVRTC here, so the few types and\n   conversions needed are written out below. The module is compiled with --fmad=false so every\n   product and sum rounds exactly as the CPU references in lwo.h do.\n\n   Layout conventions: tensors are dense and row-major; element counts are 64-bit. Kernels that\n   take a `vec_ok` flag use 16-byte vector accesses only when the host saw every pointer 16-byte\n   aligned; the tail past the last full vector is done element by element. */\n\ntypedef unsigned char lwo_u8;\ntypedef unsigned short lwo_u16;\ntypedef unsigned int lwo_u32;\ntypedef unsigned long long lwo_u64;\ntypedef long long lwo_i64;\n\n/* ---- scalar conversions (bit-identical to lwo_ref_* in lwo.h) ------------------------------ */\n\n__device__ __forceinline__ float lwo_bits_f32(lwo_u32 u) { return __uint_as_float(u); }\n\n__device__ __forceinline__ float lwo_bf16_to_f32(lwo_u16 h) { return __uint_as_float((lwo_u32)h << 16); }\n\n__device__ __forceinline__ lwo_u16 lwo_f32_to_bf16(float v) {\n    lwo_u32 u = __float_as_uint(v);\n    if ((u & 0x7fffffffu) > 0x7f800000u) return (lwo_u16)((u >> 16) | 0x40u); /* quiet NaN */\n    u += 0x7fffu + ((u >> 16) & 1u);                                           /* round to nearest even */\n    return (lwo_u16)(u >> 16);\n}\n\n__device__ __forceinline__ float lwo_f16_to_f32(lwo_u16 h) {\n    float f;\n    asm(\"{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }\" : \"=f\"(f) : \"h\"(h));\n    return f;\n}\n\n__device__ __forceinline__ lwo_u16 lwo_f32_to_f16(float v) {\n    lwo_u16 h;\n    asm(\"{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }\" : \"=h\"(h) : \"f\"(v));\n    return h;\n}\n\n/* fp8 e4m3fn: bias 7, 3 mantissa bits, no infinities, S.1111.111 is NaN, max 448. */\n__device__ __forceinline__ float lwo_e4m3_to_f32(lwo_u8 c) {\n    lwo_u32 s = (lwo_u32)(c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;\n    if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);\n    if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f)); /* m * 2^-9 */\n    return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));\n}\n\n/* fp8 e5m2: bias 15, 2 mantissa bits, IEEE-like infinities and NaNs, max 57344. */\n__device__ __forceinline__ float lwo_e5m2_to_f32(lwo_u8 c) {\n    lwo_u32 s = (lwo_u32)(c & 0x80u) << 24, e = (c >> 2) & 31u, m = c & 3u;\n    if (e == 31u) return __uint_as_float(s | (m ? 0x7fc00000u : 0x7f800000u));\n    if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 1.52587890625e-05f)); /* m * 2^-16 */\n    return __uint_as_float(s | ((e + 112u) << 23) | (m << 21));\n}\n\n/* Round to nearest even, saturate to the largest finite code, keep NaN (as S.1111111). The normal\n",
"   range rounds on the f32 bit pattern, so a mantissa carry moves into the exponent by itself; the\n   subnormal range is a plain integer count of the smallest step. */\n__device__ __forceinline__ lwo_u8 lwo_f32_to_fp8(float v, int e5m2) {\n    lwo_u32 u = __float_as_uint(v), s = (u >> 24) & 0x80u, a = u & 0x7fffffffu;\n    if (a > 0x7f800000u) return (lwo_u8)(s | 0x7fu);\n    float fa = __uint_as_float(a);\n    if (!e5m2) {\n        if (fa >= 448.0f) return (lwo_u8)(s | 0x7eu);\n        if (fa < 0.015625f) return (lwo_u8)(s | (lwo_u32)rintf(fa * 512.0f));   /* below 2^-6 */\n        lwo_u32 r = a + 0x7ffffu + ((a >> 20) & 1u);\n        return (lwo_u8)(s | ((r >> 20) - (120u << 3)));\n    } else {\n        if (fa >= 57344.0f) return (lwo_u8)(s | 0x7bu);\n        if (fa < 6.103515625e-05f) return (lwo_u8)(s | (lwo_u32)rintf(fa * 65536.0f)); /* below 2^-14 */\n        lwo_u32 r = a + 0xfffffu + ((a >> 21) & 1u);\n        return (lwo_u8)(s | ((r >> 21) - (112u << 2)));\n    }\n}\n\n/* int8 code of v: round to nearest even, saturate to +-127; NaN is 0 (as the CPU reference). One\n   conversion (cvt.rni.s32.f32 makes NaN 0 and saturates past the int range) and two integer clamps. */\n__device__ __forceinline__ int lwo_f32_to_i8_sat(float v) {\n    int r;\n    asm(\"cvt.rni.s32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(v));\n    return r < -127 ? -127 : r > 127 ? 127 : r;\n}\n\n/* ---- typed element access ------------------------------------------------------------------ */\n/* Type tags: the element type, its width, and its decode/encode to f32. */\nstruct lwo_t_f32 { typedef float S; enum { W = 4 };\n    static __device__ __forceinline__ float get(const lwo_u8 *p) { return *(const float *)p; }\n    static __device__ __forceinline__ void put(lwo_u8 *p, float v) { *(float *)p = v; } };\nstruct lwo_t_f16 { enum { W = 2 };\n    static __device__ __forceinline__ float get(const lwo_u8 *p) { return lwo_f16_to_f32(*(const lwo_u16 *)p); }\n    static __device__ __forceinline__ void put(lwo_u8 *p, float v) { *(lwo_u16 *)p = lwo_f32_to_f16(v); } };\nstruct lwo_t_bf16 { enum { W = 2 };\n    static __device__ __forceinline__ float get(const lwo_u8 *p) { return lwo_bf16_to_f32(*(const lwo_u16 *)p); }\n    static __device__ __forceinline__ void put(lwo_u8 *p, float v) { *(lwo_u16 *)p = lwo_f32_to_bf16(v); } };\nstruct lwo_t_e4m3 { enum { W = 1 };\n    static __device__ __forceinline__ float get(const lwo_u8 *p) { return lwo_e4m3_to_f32(*p); }\n    static __device__ __forceinline__ void put(lwo_u8 *p, float v) { *p = lwo_f32_to_fp8(v, 0); } };\nstruct lwo_t_e5m2 { enum { W = 1 };\n    static __device__ __forceinline__ float get(const lwo_u8 *p) { return lwo_e5m2_to_f32(*p); }\n    static __device__ __forceinline__ void put(lwo_u8 *p, float v) { *p = lwo_f32_to_fp8(v, 1); } };\n\n/* 16 elements per thread: 16*W bytes in and out, as whole uint4 vectors when vec_ok. */\n#define LWO_VEC 16\n\n",
"/* ---- convert: dst = src * scale ------------------------------------------------------------ */\n/* Any element count n; grid-stride. scale == 1 is exact for every widening conversion. The scale\n   comes either as a host value or, when scale_dev is non-null, from one f32 in device memory.\n   An fp8 source is decoded through a 256-entry table in shared memory: the arithmetic decode costs\n   more instructions than the memory system leaves time for at full bandwidth. With scale == 1 the\n   table holds the finished output values (fp8 widens exactly into bf16, f16 and f32). Blocks must\n   have at least 256 threads for that path. */\ntemplate <class S> struct lwo_is_fp8 { enum { V = 0 }; };\ntemplate <> struct lwo_is_fp8<lwo_t_e4m3> { enum { V = 1 }; };\ntemplate <> struct lwo_is_fp8<lwo_t_e5m2> { enum { V = 1 }; };\n\n/* Each thread takes chunks of V elements, V chosen so the wider side of the conversion moves exactly\n   16 bytes: a warp's loads and stores then cover whole 32-byte sectors, and no partially written\n   sector has to be read back from memory. Two chunks per iteration keep two loads in flight. */\ntemplate <class S, class D>\nstruct lwo_vec { enum { V = 16 / (S::W > D::W ? S::W : D::W), SB = V * S::W, DB = V * D::W }; };\n\ntemplate <int B> struct lwo_chunk;          /* B bytes as one vector access */\ntemplate <> struct lwo_chunk<16> { typedef uint4 T; };\ntemplate <> struct lwo_chunk<8> { typedef uint2 T; };\ntemplate <> struct lwo_chunk<4> { typedef unsigned int T; };\n\ntemplate <class S, class D, int LUT>\n__device__ __forceinline__ void lwo_convert_chunk(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 c, float scale,\n                                                  const float *lut_f32, const lwo_u8 *lut_d, int exact) {\n    typedef lwo_vec<S, D> VV;\n    typedef typename lwo_chunk<VV::SB>::T TS;\n    typedef typename lwo_chunk<VV::DB>::T TD;\n    union { TS v; lwo_u8 b[VV::SB]; } in;\n    union { TD v; lwo_u8 b[VV::DB]; } out;\n    in.v = *(const TS *)(src + c * VV::SB);\n    if (LUT && exact) {\n#pragma unroll\n        for (int j = 0; j < VV::V; j++) {\n            if (D::W == 2) *(lwo_u16 *)(out.b + j * 2) = ((const lwo_u16 *)lut_d)[in.b[j]];\n            else *(lwo_u32 *)(out.b + j * 4) = ((const lwo_u32 *)lut_d)[in.b[j]];\n        }\n    } else if (LUT) {\n#pragma unroll\n        for (int j = 0; j < VV::V; j++) D::put(out.b + j * D::W, lut_f32[in.b[j]] * scale);\n    } else {\n#pragma unroll\n        for (int j = 0; j < VV::V; j++) D::put(out.b + j * D::W, S::get(in.b + j * S::W) * scale);\n    }\n    *(TD *)(dst + c * VV::DB) = out.v;\n}\n\ntemplate <class S, class D, int LUT>\n__device__ __forceinline__ void lwo_convert_loop(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 n, float scale, int vec_ok,\n                                                 const float *lut_f32, const lwo_u8 *lut_d, int exact) {\n    typedef lwo_vec<S, D> VV;\n    lwo_u64 nvec = vec_ok ? n / VV::V : 0;\n",
"    lwo_u64 stride = (lwo_u64)gridDim.x * blockDim.x;\n    lwo_u64 i = (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x;\n    for (; i + stride < nvec; i += 2 * stride) {\n        lwo_convert_chunk<S, D, LUT>(src, dst, i, scale, lut_f32, lut_d, exact);\n        lwo_convert_chunk<S, D, LUT>(src, dst, i + stride, scale, lut_f32, lut_d, exact);\n    }\n    if (i < nvec) lwo_convert_chunk<S, D, LUT>(src, dst, i, scale, lut_f32, lut_d, exact);\n    for (lwo_u64 k = nvec * VV::V + (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride)\n        D::put(dst + k * D::W, S::get(src + k * S::W) * scale);\n}\n\ntemplate <class S, class D>\n__device__ __forceinline__ void lwo_convert_body(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 n, float scale,\n                                                 const float *scale_dev, int vec_ok) {\n    if (scale_dev) scale = *scale_dev;\n    if (lwo_is_fp8<S>::V) {\n        __shared__ float lut_f32[256];\n        __shared__ lwo_u32 lut_d[256]; /* D values, packed at D::W bytes each */\n        const int exact = scale == 1.0f;\n        for (int c = threadIdx.x; c < 256; c += blockDim.x) {\n            lwo_u8 code = (lwo_u8)c;\n            float v = S::get(&code);\n            lut_f32[c] = v;\n            D::put((lwo_u8 *)lut_d + c * D::W, v);\n        }\n        __syncthreads();\n        lwo_convert_loop<S, D, 1>(src, dst, n, scale, vec_ok, lut_f32, (const lwo_u8 *)lut_d, exact);\n    } else {\n        lwo_convert_loop<S, D, 0>(src, dst, n, scale, vec_ok, 0, 0, 0);\n    }\n}\n\n#define LWO_CONVERT_KERNEL(sn, dn)                                                                   \\\n    extern \"C\" __global__ void lwo_k_convert_##sn##_##dn(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 n,     \\\n                                                         float scale, const float *scale_dev, int vec_ok) { \\\n        lwo_convert_body<lwo_t_##sn, lwo_t_##dn>(src, dst, n, scale, scale_dev, vec_ok);             \\\n    }\n#define LWO_CONVERT_TO(sn) LWO_CONVERT_KERNEL(sn, f32) LWO_CONVERT_KERNEL(sn, f16) LWO_CONVERT_KERNEL(sn, bf16)\nLWO_CONVERT_TO(e4m3)\nLWO_CONVERT_TO(e5m2)\nLWO_CONVERT_TO(bf16)\nLWO_CONVERT_TO(f16)\nLWO_CONVERT_TO(f32)\n\n/* ---- fp8 quantization with a per-tensor scale ---------------------------------------------- */\n/* Three launches when the scale is computed: lwo_k_absmax_* folds |x| into *absmax_bits with an\n   integer atomicMax (non-negative floats order like their bit patterns; NaN orders above inf, so a\n   NaN input gives a NaN scale), lwo_k_fp8_scale turns it into the scale, then lwo_k_quantize_fp8_*\n   writes q = fp8(x * (1/scale)). *absmax_bits must be zeroed before the first. */\n__device__ __forceinline__ float lwo_warp_max(float v) {\n#pragma unroll\n    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n    return v;\n}\n\ntemplate <class S>\n__device__ __forceinline__ void lwo_absmax_body(const lwo_u8 *src, lwo_u64 n, lwo_u32 *absmax_bits, int vec_ok) {\n",
"    lwo_u32 m = 0;\n    lwo_u64 stride = (lwo_u64)gridDim.x * blockDim.x;\n    lwo_u64 nvec = vec_ok ? n / LWO_VEC : 0;\n    for (lwo_u64 i = (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {\n        uint4 in[(LWO_VEC * S::W + 15) / 16];\n        const uint4 *sp = (const uint4 *)(src + i * LWO_VEC * S::W);\n#pragma unroll\n        for (int j = 0; j < (LWO_VEC * S::W + 15) / 16; j++) in[j] = sp[j];\n        const lwo_u8 *ib = (const lwo_u8 *)in;\n#pragma unroll\n        for (int j = 0; j < LWO_VEC; j++) {\n            lwo_u32 b = __float_as_uint(S::get(ib + j * S::W)) & 0x7fffffffu;\n            m = b > m ? b : m;\n        }\n    }\n    for (lwo_u64 i = nvec * LWO_VEC + (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n        lwo_u32 b = __float_as_uint(S::get(src + i * S::W)) & 0x7fffffffu;\n        m = b > m ? b : m;\n    }\n#pragma unroll\n    for (int o = 16; o > 0; o >>= 1) { lwo_u32 t = __shfl_xor_sync(0xffffffffu, m, o); m = t > m ? t : m; }\n    if ((threadIdx.x & 31) == 0 && m) atomicMax(absmax_bits, m);\n}\nextern \"C\" __global__ void lwo_k_absmax_f32(const lwo_u8 *s, lwo_u64 n, lwo_u32 *a, int v) { lwo_absmax_body<lwo_t_f32>(s, n, a, v); }\nextern \"C\" __global__ void lwo_k_absmax_f16(const lwo_u8 *s, lwo_u64 n, lwo_u32 *a, int v) { lwo_absmax_body<lwo_t_f16>(s, n, a, v); }\nextern \"C\" __global__ void lwo_k_absmax_bf16(const lwo_u8 *s, lwo_u64 n, lwo_u32 *a, int v) { lwo_absmax_body<lwo_t_bf16>(s, n, a, v); }\n\n/* scale = absmax / fp8_max, or 1 when absmax is 0. Overwrites the absmax word with the scale. */\nextern \"C\" __global__ void lwo_k_fp8_scale(lwo_u32 *absmax_bits_then_scale, float fp8_max) {\n    float a = __uint_as_float(*absmax_bits_then_scale);\n    float s = a > 0.0f ? a / fp8_max : (a == 0.0f ? 1.0f : a);\n    *(float *)absmax_bits_then_scale = s;\n}\n\ntemplate <class S, class D>\n__device__ __forceinline__ void lwo_quantize_fp8_body(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 n,\n                                                      const float *scale, int vec_ok) {\n    lwo_convert_body<S, D>(src, dst, n, 1.0f / *scale, 0, vec_ok);\n}\n#define LWO_QFP8_KERNEL(sn, dn)                                                                         \\\n    extern \"C\" __global__ void lwo_k_quantize_fp8_##sn##_##dn(const lwo_u8 *src, lwo_u8 *dst, lwo_u64 n, \\\n                                                              const float *scale, int vec_ok) {         \\\n        lwo_quantize_fp8_body<lwo_t_##sn, lwo_t_##dn>(src, dst, n, scale, vec_ok);                   \\\n    }\nLWO_QFP8_KERNEL(f32, e4m3) LWO_QFP8_KERNEL(f16, e4m3) LWO_QFP8_KERNEL(bf16, e4m3)\nLWO_QFP8_KERNEL(f32, e5m2) LWO_QFP8_KERNEL(f16, e5m2) LWO_QFP8_KERNEL(bf16, e5m2)\n\n/* ---- per-row quantization with the W8A8 prep (activations per token, weights per channel) ---- */\n/* One block of LWO_ROWQ_THREADS per row of x [rows, K] (f32, f16 or bf16). The row is prepped, then\n",
"   quantized against its own absmax; lwo.h's lwo_ref_prep_rows + lwo_ref_quantize_*_rows do the same\n   math op for op:\n     u[j] = x[perm[j]] for j < K (no perm: x[j]), 0 for j >= K\n     u[j] = u[j] / smooth[j] (activations) or u[j] * smooth[j] (LWO_ROWQ_SMUL: weights), j < K;\n            smooth is read by position j: the host passes it already permuted\n     v    = u rotated in blocks of b = 2^hlog positions (hlog 0: v = u): butterfly stages\n            h = 1, 2, 4, .., b/2 in that order, the pair (j, j + h) with j & h == 0 becoming\n            (v[j] + v[j+h], v[j] - v[j+h]), each rounded to f32; then v[j] = v[j] * hs\n     scale = absmax(v) / qmax (127 int8, 448 e4m3; 1 for an all-zero row; NaN skipped, as fmaxf does)\n     q[j] = code(v[j] * (1 / scale)) for j < Kq; zero from Kr = K rounded up to b on (Kq >= Kr).\n   Work is cut into slots of 8 positions; in each step of 256 slots thread t takes slot t, so a warp\n   holds 256 consecutive positions and a Hadamard block (b <= 256, aligned) lies inside one warp:\n   stages h < 8 run inside a thread, the others exchange with lane ^ (h / 8) by shuffles.\n   LWO_ROWQ_STAGE: the row is copied into dynamic shared memory first (cp.async, every 16-byte\n   chunk in flight at once), so x is read from DRAM once and gathers through perm hit shared memory;\n   LWO_ROWQ_HOLD adds room for the prepped row (f32), so the second pass does not prep it again.\n   Without STAGE (rows too long for shared memory) both passes read x from global memory (the\n   second mostly from L1/L2). Shared memory: stage = (K * W rounded up to 16) + 16 bytes, then\n   hold = 32 bytes per slot: the host sizes it the same way (lwo__rowq_launch). */\n#define LWO_ROWQ_THREADS 256\n#define LWO_ROWQ_VEC_X 1     /* x 16-byte aligned and K % 8 == 0: 16-byte loads of x */\n#define LWO_ROWQ_VEC_Q 2     /* q 8-byte aligned and Kq % 8 == 0: 8-byte stores of q */\n#define LWO_ROWQ_VEC_SIDE 4  /* perm and smooth 16-byte aligned: 16-byte loads of them */\n#define LWO_ROWQ_SMUL 8      /* multiply by smooth (weights) instead of dividing (activations) */\n#define LWO_ROWQ_STAGE 16    /* the row goes through shared memory */\n#define LWO_ROWQ_HOLD 32     /* and so does the prepped row (needs STAGE) */\n#define LWO_ROWQ_E4M3 64     /* q is fp8 e4m3 (qmax 448), else int8 (qmax 127); a flag rather than a\n                                template parameter, so the module compiles three of these, not six */\n\n__device__ __forceinline__ void lwo_rowq_cp16(lwo_u8 *smem, const lwo_u8 *g) {\n#if __CUDA_ARCH__ >= 800\n    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"((lwo_u32)__cvta_generic_to_shared(smem)), \"l\"(g) : \"memory\");\n#else\n    *(uint4 *)smem = *(const uint4 *)g;\n#endif\n}\n\n/* v = v / smooth (activations) or v * smooth (LWO_ROWQ_SMUL) for the slot at k0; side: the 8\n   factors may be read as two 16-byte vectors. */\n",
"__device__ __forceinline__ void lwo_rowq_smooth(const float *smooth, bool side, lwo_u64 K, int flags, lwo_u64 k0, float v[8]) {\n    float s[8];\n    if (side) {\n        const float4 a = ((const float4 *)(smooth + k0))[0], b = ((const float4 *)(smooth + k0))[1];\n        s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w; s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;\n    } else {\n#pragma unroll\n        for (int e = 0; e < 8; e++) s[e] = k0 + e < K ? smooth[k0 + e] : 1.0f;\n    }\n    if (flags & LWO_ROWQ_SMUL) {\n#pragma unroll\n        for (int e = 0; e < 8; e++) v[e] = v[e] * s[e];\n    } else {\n#pragma unroll\n        for (int e = 0; e < 8; e++) v[e] = v[e] / s[e];\n    }\n}\n\n/* Slot vi (positions 8vi .. 8vi + 7) of u, read from the row at `src` (global or shared memory):\n   gathered, smoothed, zero from K on. vec: full slots may be read as 16-byte vectors. */\ntemplate <class S>\n__device__ __forceinline__ void lwo_rowq_slot(const lwo_u8 *src, int vec, lwo_u64 K, const int *perm, const float *smooth,\n                                              int flags, lwo_u64 vi, float v[8]) {\n    const lwo_u64 k0 = vi * 8;\n    const bool full = k0 + 8 <= K, side = full && (flags & LWO_ROWQ_VEC_SIDE);\n#pragma unroll\n    for (int e = 0; e < 8; e++) v[e] = 0.0f;\n    if (k0 >= K) return;\n    if (perm) {\n        int p[8];\n        if (side) {\n            const int4 a = ((const int4 *)(perm + k0))[0], b = ((const int4 *)(perm + k0))[1];\n            p[0] = a.x; p[1] = a.y; p[2] = a.z; p[3] = a.w; p[4] = b.x; p[5] = b.y; p[6] = b.z; p[7] = b.w;\n        } else {\n#pragma unroll\n            for (int e = 0; e < 8; e++) p[e] = k0 + e < K ? perm[k0 + e] : 0;\n        }\n#pragma unroll\n        for (int e = 0; e < 8; e++) if (k0 + e < K) v[e] = S::get(src + (lwo_u64)(unsigned)p[e] * S::W);\n    } else if (full && vec) {\n        uint4 in[(8 * S::W + 15) / 16];\n        const uint4 *p = (const uint4 *)(src + k0 * S::W);\n#pragma unroll\n        for (int j = 0; j < (8 * S::W + 15) / 16; j++) in[j] = p[j];\n        const lwo_u8 *b = (const lwo_u8 *)in;\n#pragma unroll\n        for (int e = 0; e < 8; e++) v[e] = S::get(b + e * S::W);\n    } else {\n#pragma unroll\n        for (int e = 0; e < 8; e++) if (k0 + e < K) v[e] = S::get(src + (k0 + e) * S::W);\n    }\n    if (smooth) lwo_rowq_smooth(smooth, side, K, flags, k0, v);\n}\n\n/* The rotation of one slot per lane. The whole warp calls it together (shuffles). */\n__device__ __forceinline__ void lwo_rowq_fwht(float v[8], int hlog, float hs) {\n    const int b = 1 << hlog;\n    const unsigned lane = threadIdx.x & 31u;\n#pragma unroll\n    for (int h = 1; h < 8; h <<= 1) {\n        if (h >= b) break;\n#pragma unroll\n        for (int e = 0; e < 8; e++)\n            if (!(e & h)) { const float a = v[e], c = v[e + h]; v[e] = a + c; v[e + h] = a - c; }\n    }\n    for (int m = 1; 8 * m < b; m <<= 1) {\n        const bool hi = (lane & (unsigned)m) != 0u; /* this lane holds the j + h side of its pairs */\n",
"#pragma unroll\n        for (int e = 0; e < 8; e++) {\n            const float o = __shfl_xor_sync(0xffffffffu, v[e], m);\n            v[e] = hi ? o - v[e] : v[e] + o;\n        }\n    }\n#pragma unroll\n    for (int e = 0; e < 8; e++) v[e] = v[e] * hs;\n}\n\n__device__ __forceinline__ void lwo_rowq_store(lwo_u8 *qr, lwo_u64 Kq, int flags, lwo_u64 vi, const float v[8], float inv) {\n    union { lwo_u8 c[8]; lwo_u16 h[4]; uint2 u; } o;\n    if (flags & LWO_ROWQ_E4M3) {\n#if __CUDA_ARCH__ >= 890\n        /* the hardware's paired encode: round to nearest even, finite values past 448 and infinities\n           to +-448, as lwo_f32_to_fp8; a NaN, which it would make 0x7f whatever its sign, the slow way */\n#pragma unroll\n        for (int e = 0; e < 8; e += 2) {\n            const float x0 = v[e] * inv, x1 = v[e + 1] * inv;\n            asm(\"{ .reg .b16 p; cvt.rn.satfinite.e4m3x2.f32 p, %1, %2; mov.b16 %0, p; }\" : \"=h\"(o.h[e / 2]) : \"f\"(x1), \"f\"(x0));\n            if (x0 != x0 || x1 != x1) { o.c[e] = lwo_f32_to_fp8(x0, 0); o.c[e + 1] = lwo_f32_to_fp8(x1, 0); }\n        }\n#else\n#pragma unroll\n        for (int e = 0; e < 8; e++) o.c[e] = lwo_f32_to_fp8(v[e] * inv, 0);\n#endif\n    } else {\n        /* the low bytes of four codes into one word: two byte permutes pair them, a third joins the pairs */\n#pragma unroll\n        for (int h = 0; h < 2; h++) {\n            const int c0 = lwo_f32_to_i8_sat(v[4 * h] * inv), c1 = lwo_f32_to_i8_sat(v[4 * h + 1] * inv);\n            const int c2 = lwo_f32_to_i8_sat(v[4 * h + 2] * inv), c3 = lwo_f32_to_i8_sat(v[4 * h + 3] * inv);\n            const lwo_u32 lo = __byte_perm((lwo_u32)c0, (lwo_u32)c1, 0x0040u), hi = __byte_perm((lwo_u32)c2, (lwo_u32)c3, 0x0040u);\n            if (h == 0) o.u.x = __byte_perm(lo, hi, 0x5410u);\n            else o.u.y = __byte_perm(lo, hi, 0x5410u);\n        }\n    }\n    if (flags & LWO_ROWQ_VEC_Q) *(uint2 *)(qr + vi * 8) = o.u;\n    else {\n#pragma unroll\n        for (int e = 0; e < 8; e++) if (vi * 8 + e < Kq) qr[vi * 8 + e] = o.c[e];\n    }\n}\n\n/* The row's scale from each thread's absmax m (T threads, red: T / 32 floats of shared memory):\n   absmax / qmax (1 for an all-zero row), written to *scale by thread 0; returns 1 / scale. */\n__device__ __forceinline__ float lwo_rowq_scale(float m, float *red, unsigned t, unsigned T, int flags, float *scale_out) {\n    m = lwo_warp_max(m);\n    if ((t & 31) == 0) red[t >> 5] = m;\n    __syncthreads();\n    if (t < 32) {\n        float a = t < T / 32 ? red[t] : 0.0f;\n        a = lwo_warp_max(a);\n        if (t == 0) red[0] = a;\n    }\n    __syncthreads();\n    const float amax = red[0];\n    const float scale = amax > 0.0f ? amax / ((flags & LWO_ROWQ_E4M3) ? 448.0f : 127.0f) : 1.0f;\n    if (t == 0) *scale_out = scale;\n    return 1.0f / scale;\n}\n\ntemplate <class S>\n__device__ __forceinline__ void lwo_rowq_body(const lwo_u8 *x, lwo_u64 K, const int *perm, const float *smooth, int hlog,\n",
"                                              float hs, lwo_u8 *q, lwo_u64 Kq, float *scales, int flags) {\n    extern __shared__ __align__(16) lwo_u8 lwo_rowq_smem[];\n    __shared__ float red[LWO_ROWQ_THREADS / 32];\n    const lwo_u64 row = blockIdx.x, b = (lwo_u64)1 << hlog;\n    const lwo_u64 ns = (((K + b - 1) & ~(b - 1)) + 7) / 8; /* slots of the rotated row */\n    const unsigned t = threadIdx.x, wbase = t & ~31u;\n    const lwo_u8 *src = x + row * K * S::W;\n    lwo_u8 *qr = q + row * Kq;\n    float4 *hold = 0;\n    int vec = flags & LWO_ROWQ_VEC_X;\n    if (flags & LWO_ROWQ_STAGE) {\n        /* 16-byte chunks wholly inside the row by cp.async, to the same offset mod 16 in shared\n           memory; the few elements before the first and after the last chunk one by one */\n        const lwo_u64 a = (lwo_u64)src, e = a + K * S::W, a16 = (a + 15) & ~(lwo_u64)15, e16 = e & ~(lwo_u64)15;\n        lwo_u8 *row_s = lwo_rowq_smem + (a & 15);\n        lwo_u64 k_lo = K, k_hi = K;\n        if (a16 < e16) {\n            k_lo = (a16 - a) / S::W; k_hi = (e16 - a) / S::W;\n            for (lwo_u64 c = t; c < (e16 - a16) / 16; c += LWO_ROWQ_THREADS)\n                lwo_rowq_cp16(row_s + (a16 - a) + c * 16, (const lwo_u8 *)a16 + c * 16);\n        }\n        for (lwo_u64 k = t; k < k_lo; k += LWO_ROWQ_THREADS) {\n            if (S::W == 4) ((lwo_u32 *)row_s)[k] = ((const lwo_u32 *)src)[k];\n            else ((lwo_u16 *)row_s)[k] = ((const lwo_u16 *)src)[k];\n        }\n        for (lwo_u64 k = k_hi + t; k < K; k += LWO_ROWQ_THREADS) {\n            if (S::W == 4) ((lwo_u32 *)row_s)[k] = ((const lwo_u32 *)src)[k];\n            else ((lwo_u16 *)row_s)[k] = ((const lwo_u16 *)src)[k];\n        }\n#if __CUDA_ARCH__ >= 800\n        asm volatile(\"cp.async.wait_all;\" ::: \"memory\");\n#endif\n        __syncthreads();\n        vec = (a & 15) == 0;\n        src = row_s;\n        if (flags & LWO_ROWQ_HOLD) hold = (float4 *)(lwo_rowq_smem + ((K * S::W + 15) & ~(lwo_u64)15) + 16);\n    }\n    /* pass 0 finds absmax(v) (and keeps v in `hold`, two planes of float4: conflict-free); pass 1\n       quantizes, reading back only the slots the thread itself held. One loop for both keeps the\n       slot code in the binary once. */\n    float m = 0.0f, inv = 0.0f;\n#pragma unroll 1\n    for (int pass = 0; pass < 2; pass++) {\n        for (lwo_u64 base = 0; base < ns; base += LWO_ROWQ_THREADS) {\n            const lwo_u64 vi = base + t;\n            float v[8];\n            if (pass && hold) {\n                if (vi >= ns) continue;\n                const float4 lo = hold[vi], hi = hold[ns + vi];\n                v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w; v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;\n            } else {\n                lwo_rowq_slot<S>(src, vec, K, perm, smooth, flags, vi, v);\n                if (hlog && base + wbase < ns) lwo_rowq_fwht(v, hlog, hs);\n            }\n            if (!pass) {\n#pragma unroll\n",
"                for (int e = 0; e < 8; e++) m = fmaxf(m, fabsf(v[e]));\n                if (hold && vi < ns) {\n                    hold[vi] = make_float4(v[0], v[1], v[2], v[3]);\n                    hold[ns + vi] = make_float4(v[4], v[5], v[6], v[7]);\n                }\n            } else if (vi < ns) lwo_rowq_store(qr, Kq, flags, vi, v, inv);\n        }\n        if (pass) break;\n        inv = lwo_rowq_scale(m, red, t, LWO_ROWQ_THREADS, flags, scales + row);\n    }\n    for (lwo_u64 k = ns * 8 + t; k < Kq; k += LWO_ROWQ_THREADS) qr[k] = 0;\n}\n#define LWO_ROWQ_KERNEL(sn)                                                                              \\\n    extern \"C\" __global__ void __launch_bounds__(LWO_ROWQ_THREADS)                                     \\\n    lwo_k_quantize_rows_##sn(const lwo_u8 *x, lwo_u64 K, const int *perm, const float *smooth, int hlog,  \\\n                             float hs, lwo_u8 *q, lwo_u64 Kq, float *scales, int flags) {                 \\\n        lwo_rowq_body<lwo_t_##sn>(x, K, perm, smooth, hlog, hs, q, Kq, scales, flags);                   \\\n    }\nLWO_ROWQ_KERNEL(f32) LWO_ROWQ_KERNEL(f16) LWO_ROWQ_KERNEL(bf16)\n\n/* The same quantizer for aligned rows without the gather or the rotation (x 16-byte aligned,\n   K % 8 == 0, q 8-byte aligned, Kq % 8 == 0, smooth (if any) 16-byte aligned), streaming: the grid\n   is persistent (the blocks that fit at once; block b takes rows b, b + grid, ...) and each block\n   keeps a ring of LWO_ROWQ_RING rows in dynamic shared memory (LWO_ROWQ_RING * K * W bytes), filled\n   by cp.async a row at a time: while it quantizes one row the next ones are in flight, so a\n   block's loads never wait for its own reduction and stores, and it needs 32 registers. Each row\n   costs three barriers: the one that opens it (its copies landed, and every thread is done with the\n   row before, whose slot is refilled next) and the two of the scale's reduction. Measured on the\n   H200 it was no faster than the one-row-per-block register kernel it replaced (int8 1.9-2.9 TB/s\n   against a 4.2 TB/s copy ceiling): what bounds it is its instructions, about 8 an element, which\n   is why the codes below come from paired and packed instructions. Same math, same helpers, the\n   same bits as lwo_rowq_body. */\n#define LWO_ROWQ_RING 3\ntemplate <class S>\n__device__ __forceinline__ void lwo_rowq_ring_fill(lwo_u8 *slot, const lwo_u8 *x, lwo_u64 row, lwo_u64 rows, lwo_u64 K) {\n    const unsigned chunks = (unsigned)(K * S::W / 16);\n    if (row < rows)\n        for (unsigned c = threadIdx.x; c < chunks; c += blockDim.x) lwo_rowq_cp16(slot + c * 16, x + (row * K * S::W + c * 16));\n#if __CUDA_ARCH__ >= 800\n    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");   /* one group a row, empty past the last */\n#endif\n}\n/* Slot vi of a row held in shared memory: its 8 values, smoothed. */\ntemplate <class S>\n",
"__device__ __forceinline__ void lwo_rowq_ring_slot(const lwo_u8 *row_s, const float *smooth, lwo_u64 K, int flags, unsigned vi, float v[8]) {\n    uint4 raw[S::W / 2];\n#pragma unroll\n    for (int c = 0; c < S::W / 2; c++) raw[c] = ((const uint4 *)row_s)[vi * (S::W / 2) + c];\n    const lwo_u8 *b = (const lwo_u8 *)raw;\n#pragma unroll\n    for (int e = 0; e < 8; e++) v[e] = S::get(b + e * S::W);\n    if (smooth) lwo_rowq_smooth(smooth, (flags & LWO_ROWQ_VEC_SIDE) != 0, K, flags, (lwo_u64)vi * 8, v);\n}\n/* max(m2, |x|) over the eight 16-bit values of a 16-byte chunk, two at a time (abs and max of packed\n   pairs, sm_80+): the first pass of a row without smoothing, a quarter of the instructions of\n   converting each value first. Exact (max picks a value; the widening to f32 is exact), and max\n   skips a NaN as fmaxf does. */\n__device__ __forceinline__ lwo_u32 lwo_absmax_pairs(lwo_t_bf16, lwo_u32 m2, uint4 r) {\n#if __CUDA_ARCH__ >= 800\n    asm(\"{ .reg .b32 a; abs.bf16x2 a, %1; max.bf16x2 %0, %0, a; abs.bf16x2 a, %2; max.bf16x2 %0, %0, a;\\n\\t\"\n        \"abs.bf16x2 a, %3; max.bf16x2 %0, %0, a; abs.bf16x2 a, %4; max.bf16x2 %0, %0, a; }\"\n        : \"+r\"(m2) : \"r\"(r.x), \"r\"(r.y), \"r\"(r.z), \"r\"(r.w));\n#endif\n    return m2;\n}\n__device__ __forceinline__ lwo_u32 lwo_absmax_pairs(lwo_t_f16, lwo_u32 m2, uint4 r) {\n#if __CUDA_ARCH__ >= 800\n    asm(\"{ .reg .b32 a; abs.f16x2 a, %1; max.f16x2 %0, %0, a; abs.f16x2 a, %2; max.f16x2 %0, %0, a;\\n\\t\"\n        \"abs.f16x2 a, %3; max.f16x2 %0, %0, a; abs.f16x2 a, %4; max.f16x2 %0, %0, a; }\"\n        : \"+r\"(m2) : \"r\"(r.x), \"r\"(r.y), \"r\"(r.z), \"r\"(r.w));\n#endif\n    return m2;\n}\n/* never called (f32 rows take the per-value path); it lets that branch compile for them */\n__device__ __forceinline__ lwo_u32 lwo_absmax_pairs(lwo_t_f32, lwo_u32 m2, uint4) { return m2; }\n\ntemplate <class S>\n__device__ __forceinline__ void lwo_rowq_ring_body(const lwo_u8 *x, lwo_u64 rows, lwo_u64 K, const float *smooth, lwo_u8 *q,\n                                                   lwo_u64 Kq, float *scales, int flags) {\n    extern __shared__ __align__(16) lwo_u8 lwo_rowq_smem[];\n    __shared__ float red[LWO_ROWQ_THREADS / 32];\n    const unsigned t = threadIdx.x, T = blockDim.x, ns = (unsigned)(K / 8);\n    const lwo_u64 G = gridDim.x, R = K * S::W;\n    lwo_u64 row = blockIdx.x;\n    int slot = 0;\n#if __CUDA_ARCH__ >= 900\n    /* The GEMM launched after this (programmatic dependent launch, lwo__gemm_wg) may start: its\n       blocks take multiprocessors as this grid's leave them and wait for all of it to finish before\n       reading what it wrote, so their launch and set-up overlap this grid's last rows. */\n    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n#endif\n#pragma unroll\n    for (int i = 0; i < LWO_ROWQ_RING - 1; i++) lwo_rowq_ring_fill<S>(lwo_rowq_smem + i * R, x, row + i * G, rows, K);\n",
"    for (; row < rows; row += G, slot = slot == LWO_ROWQ_RING - 1 ? 0 : slot + 1) {\n        const lwo_u8 *row_s = lwo_rowq_smem + slot * R;\n        lwo_u8 *qr = q + row * Kq;\n#if __CUDA_ARCH__ >= 800\n        asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(LWO_ROWQ_RING - 2) : \"memory\");   /* this row's group */\n#endif\n        __syncthreads();\n        lwo_rowq_ring_fill<S>(lwo_rowq_smem + (slot == 0 ? LWO_ROWQ_RING - 1 : slot - 1) * R, x, row + (LWO_ROWQ_RING - 1) * G, rows, K);\n        float m = 0.0f;\n#if __CUDA_ARCH__ >= 800\n        if (S::W == 2 && !smooth) {\n            lwo_u32 m2 = 0;\n            for (unsigned vi = t; vi < ns; vi += T) m2 = lwo_absmax_pairs(S(), m2, ((const uint4 *)row_s)[vi]);\n            m = fmaxf(S::get((const lwo_u8 *)&m2), S::get((const lwo_u8 *)&m2 + 2));\n        } else\n#endif\n        for (unsigned vi = t; vi < ns; vi += T) {\n            float v[8];\n            lwo_rowq_ring_slot<S>(row_s, smooth, K, flags, vi, v);\n#pragma unroll\n            for (int e = 0; e < 8; e++) m = fmaxf(m, fabsf(v[e]));\n        }\n        const float inv = lwo_rowq_scale(m, red, t, T, flags, scales + row);\n        for (unsigned vi = t; vi < ns; vi += T) {\n            float v[8];\n            lwo_rowq_ring_slot<S>(row_s, smooth, K, flags, vi, v);\n            lwo_rowq_store(qr, Kq, flags, vi, v, inv);\n        }\n        for (lwo_u64 k = K + 8 * t; k < Kq; k += 8 * T) *(uint2 *)(qr + k) = make_uint2(0u, 0u);\n    }\n}\n#define LWO_ROWQ_RING_KERNEL(sn)                                                                         \\\n    extern \"C\" __global__ void __launch_bounds__(LWO_ROWQ_THREADS)                                     \\\n    lwo_k_quantize_rows_ring_##sn(const lwo_u8 *x, lwo_u64 rows, lwo_u64 K, const float *smooth, lwo_u8 *q, \\\n                                  lwo_u64 Kq, float *scales, int flags) {                                \\\n        lwo_rowq_ring_body<lwo_t_##sn>(x, rows, K, smooth, q, Kq, scales, flags);                        \\\n    }\nLWO_ROWQ_RING_KERNEL(f32) LWO_ROWQ_RING_KERNEL(f16) LWO_ROWQ_RING_KERNEL(bf16)\n\n/* ---- test helper: a kernel that spins for a given number of clock cycles -------------------- */\n/* Used by the tests and the streaming checks to delay a stream by a random amount. */\nextern \"C\" __global__ void lwo_k_spin(lwo_u64 cycles) {\n    lwo_u64 t0 = clock64();\n    while ((lwo_u64)(clock64() - t0) < cycles) { }\n}\n\n/* ---- GEMMs ---------------------------------------------------------------------------------- */\n/* y[M, N] = epilogue(A[M, K] . B[N, K]^T). A is row-major with row stride lda elements (x, or the\n   quantized activations), B is the weight, row-major [N, Kpad] (Kpad a multiple of 64 elements,\n   zero past K). Element widths: 2 bytes (bf16/f16) or 1 byte (i8, e4m3). The tensor-core kernel\n   works in *bytes* of K: one mma k-step is 32 bytes of K (k16 for 16-bit, k32 for 8-bit), and\n",
"   m16n8k16 (16-bit) and m16n8k32 (8-bit) have the same fragment layout in bytes, so one body\n   serves every operand type; only the mma instruction differs (the Op tag).\n\n   Epilogue, in f32 and in this order (the CPU references do the same):\n     v = (float)acc; if (sa) v = v * sa[m]; if (sw) v = v * sw[n]; if (bias) v = v + bias[n];\n   then stored as y's dtype (out_kind 0 f32, 1 f16, 2 bf16; RNE). acc is s32 (int8) or f32. */\n\n#define LWO_GEMM_BK 64      /* bytes of K per pipeline stage: two 32-byte mma k-steps */\n#define LWO_GEMM_STAGES 3\n\n__device__ __forceinline__ float lwo_gemm_load_y(const void *y, int out_kind, lwo_u64 i) {\n    if (out_kind == 0) return ((const float *)y)[i];\n    if (out_kind == 1) return lwo_f16_to_f32(((const lwo_u16 *)y)[i]);\n    return lwo_bf16_to_f32(((const lwo_u16 *)y)[i]);\n}\n\n/* out_kind | 4 accumulates (a LoRA's up projection, a merge): y = y + v, rounded once more, and y\n   untouched where v is 0, so a LoRA at strength 0 leaves y bit for bit (-0 stays -0). Only the\n   mma.sync and plain kernels are given it. */\n__device__ __forceinline__ void lwo_gemm_store(void *y, int out_kind, lwo_u64 i, float v) {\n    if (out_kind & 4) {\n        out_kind &= 3;\n        if (v == 0.0f) return;\n        v = lwo_gemm_load_y(y, out_kind, i) + v;\n    }\n    if (out_kind == 0) ((float *)y)[i] = v;\n    else if (out_kind == 1) ((lwo_u16 *)y)[i] = lwo_f32_to_f16(v);\n    else ((lwo_u16 *)y)[i] = lwo_f32_to_bf16(v);\n}\n\n__device__ __forceinline__ float lwo_gemm_bias(const void *bias, int bias_kind, lwo_u64 n) {\n    if (bias_kind == 0) return ((const float *)bias)[n];\n    if (bias_kind == 1) return lwo_f16_to_f32(((const lwo_u16 *)bias)[n]);\n    return lwo_bf16_to_f32(((const lwo_u16 *)bias)[n]);\n}\n\n/* The shared epilogue of every GEMM kernel (f32 math, --fmad=false so nothing contracts). */\n__device__ __forceinline__ float lwo_gemm_epi(float v, const float *sa, const float *sw, const void *bias,\n                                              int bias_kind, lwo_u64 m, lwo_u64 n) {\n    if (sa) v = v * sa[m];\n    if (sw) v = v * sw[n];\n    if (bias) v = v + lwo_gemm_bias(bias, bias_kind, n);\n    return v;\n}\n\n/* mma tags: operand element width W, accumulator type, and one m16n8 x 32-byte-k step. */\nstruct lwo_mma_bf16 { enum { W = 2 }; typedef float Acc;\n    static __device__ __forceinline__ void mma(float *c, const lwo_u32 *a, const lwo_u32 *b) {\n#if __CUDA_ARCH__ >= 800\n        asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n                     : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n#endif\n    } };\nstruct lwo_mma_f16 { enum { W = 2 }; typedef float Acc;\n    static __device__ __forceinline__ void mma(float *c, const lwo_u32 *a, const lwo_u32 *b) {\n#if __CUDA_ARCH__ >= 800\n",
"        asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n                     : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n#endif\n    } };\nstruct lwo_mma_s8 { enum { W = 1 }; typedef int Acc;\n    static __device__ __forceinline__ void mma(int *c, const lwo_u32 *a, const lwo_u32 *b) {\n#if __CUDA_ARCH__ >= 800\n        asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n                     : \"+r\"(c[0]), \"+r\"(c[1]), \"+r\"(c[2]), \"+r\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n#endif\n    } };\nstruct lwo_mma_e4m3 { enum { W = 1 }; typedef float Acc;\n    static __device__ __forceinline__ void mma(float *c, const lwo_u32 *a, const lwo_u32 *b) {\n#if __CUDA_ARCH__ >= 890\n        asm volatile(\"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n                     : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3]) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n#endif\n    } };\n\n/* Shared-memory tile: rows of LWO_GEMM_BK = 64 bytes = four 16-byte chunks. Chunk c of row r lives\n   at chunk slot c ^ ((r >> 1) & 3): the eight rows one ldmatrix phase reads (same c) then fall on\n   eight different 16-byte bank groups, so the reads are conflict-free. */\n__device__ __forceinline__ lwo_u32 lwo_gemm_swz(int r, int c) { return (lwo_u32)(r * 64 + ((c ^ ((r >> 1) & 3)) << 4)); }\n\n__device__ __forceinline__ void lwo_cp_async16(lwo_u32 saddr, const void *g, int valid) {\n#if __CUDA_ARCH__ >= 800\n    /* src-size 0 reads nothing and zero-fills the 16 bytes: the edge predicate. */\n    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(saddr), \"l\"(g), \"r\"(valid ? 16 : 0) : \"memory\");\n#endif\n}\n__device__ __forceinline__ void lwo_cp_async_commit() {\n#if __CUDA_ARCH__ >= 800\n    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n#endif\n}\ntemplate <int N>\n__device__ __forceinline__ void lwo_cp_async_wait() {\n#if __CUDA_ARCH__ >= 800\n    asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\");\n#endif\n}\n__device__ __forceinline__ void lwo_ldmatrix_x4(lwo_u32 *r, lwo_u32 saddr) {\n#if __CUDA_ARCH__ >= 800\n    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n                 : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(saddr));\n#endif\n}\n\n/* The tensor-core GEMM (sm_80+). Block tile BM x BN, WM x WN warps, each warp a (BM/WM) x (BN/WN)\n   tile of MT x NT m16n8 fragments. Grid: (ceil(N/BN), ceil(M/BM)); dynamic shared memory\n   LWO_GEMM_STAGES * (BM + BN) * 64 bytes.\n   Bounds: A rows >= M and A chunks at byte offset >= a_kbytes (the valid K of A, a multiple of 16\n",
"   bytes) are zero-filled; B rows >= N are zero-filled, and B is read up to ktiles*64 bytes, which\n   the host keeps <= Kpad bytes. Requirements (checked on the host): A and B 16-byte aligned,\n   lda*W and ldb*W multiples of 16. Stores are guarded by m < M and n < N. */\ntemplate <class Op, int BM, int BN, int WM, int WN>\n__device__ __forceinline__ void lwo_gemm_tc_body(const lwo_u8 *A, lwo_u64 lda_bytes, lwo_u64 a_kbytes,\n                                                 const lwo_u8 *B, lwo_u64 ldb_bytes, lwo_u64 M, lwo_u64 N,\n                                                 const float *sa, const float *sw, const void *bias, int bias_kind,\n                                                 void *y, int out_kind) {\n#if __CUDA_ARCH__ >= 800\n    typedef typename Op::Acc Acc;\n    enum { THREADS = 32 * WM * WN, WTM = BM / WM, WTN = BN / WN, MT = WTM / 16, NT = WTN / 8,\n           A_BYTES = BM * LWO_GEMM_BK, STAGE_BYTES = (BM + BN) * LWO_GEMM_BK };\n    extern __shared__ __align__(128) lwo_u8 lwo_gemm_smem[];\n    const lwo_u32 sbase = (lwo_u32)__cvta_generic_to_shared(lwo_gemm_smem);\n    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n    const int wm = warp / WN, wn = warp % WN;\n    const lwo_u64 bm0 = (lwo_u64)blockIdx.y * BM, bn0 = (lwo_u64)blockIdx.x * BN;\n    const lwo_u64 ktiles = (a_kbytes + LWO_GEMM_BK - 1) / LWO_GEMM_BK;\n\n    Acc acc[MT][NT][4];\n#pragma unroll\n    for (int i = 0; i < MT; i++)\n#pragma unroll\n        for (int j = 0; j < NT; j++)\n#pragma unroll\n            for (int e = 0; e < 4; e++) acc[i][j][e] = 0;\n\n    /* One stage: (BM + BN) rows x 4 chunks, spread over the block's threads. */\n    auto load_tile = [&](lwo_u64 kt, int stage) {\n        const lwo_u32 sA = sbase + stage * STAGE_BYTES, sB = sA + A_BYTES;\n        const lwo_u64 kb = kt * LWO_GEMM_BK;\n#pragma unroll\n        for (int i = tid; i < BM * 4; i += THREADS) {\n            const int r = i >> 2, c = i & 3;\n            const lwo_u64 gm = bm0 + r, gk = kb + (lwo_u64)c * 16;\n            const int ok = gm < M && gk < a_kbytes;\n            const lwo_u8 *g = ok ? A + gm * lda_bytes + gk : A;\n            lwo_cp_async16(sA + lwo_gemm_swz(r, c), g, ok);\n        }\n#pragma unroll\n        for (int i = tid; i < BN * 4; i += THREADS) {\n            const int r = i >> 2, c = i & 3;\n            const lwo_u64 gn = bn0 + r, gk = kb + (lwo_u64)c * 16;\n            const int ok = gn < N;\n            const lwo_u8 *g = ok ? B + gn * ldb_bytes + gk : B;\n            lwo_cp_async16(sB + lwo_gemm_swz(r, c), g, ok);\n        }\n    };\n\n#pragma unroll\n    for (int s = 0; s < LWO_GEMM_STAGES - 1; s++) {\n        if ((lwo_u64)s < ktiles) load_tile((lwo_u64)s, s);\n        lwo_cp_async_commit();\n    }\n\n    for (lwo_u64 kt = 0; kt < ktiles; kt++) {\n        /* Groups committed so far: STAGES-1+kt; at most STAGES-2 pending means tile kt has landed.\n           The barrier also guarantees every warp finished reading the stage refilled below. */\n",
"        lwo_cp_async_wait<LWO_GEMM_STAGES - 2>();\n        __syncthreads();\n        {\n            const lwo_u64 nk = kt + LWO_GEMM_STAGES - 1;\n            if (nk < ktiles) load_tile(nk, (int)(nk % LWO_GEMM_STAGES));\n            lwo_cp_async_commit();\n        }\n        const int stage = (int)(kt % LWO_GEMM_STAGES);\n        const lwo_u32 sA = sbase + stage * STAGE_BYTES, sB = sA + A_BYTES;\n#pragma unroll\n        for (int ks = 0; ks < 2; ks++) {\n            lwo_u32 af[MT][4], bfr[NT][2];\n#pragma unroll\n            for (int i = 0; i < MT; i++) {\n                /* lanes 0-15 address rows 0-15 of the first 16 bytes, lanes 16-31 the second. */\n                const int r = wm * WTM + i * 16 + (lane & 15), c = ks * 2 + (lane >> 4);\n                lwo_ldmatrix_x4(af[i], sA + lwo_gemm_swz(r, c));\n            }\n#pragma unroll\n            for (int j = 0; j < NT; j += 2) {\n                /* matrices: (n 0-7, bytes 0-15) (n 0-7, bytes 16-31) (n 8-15, 0-15) (n 8-15, 16-31) */\n                const int r = wn * WTN + j * 8 + (lane & 7) + ((lane >> 4) << 3), c = ks * 2 + ((lane >> 3) & 1);\n                lwo_u32 t[4];\n                lwo_ldmatrix_x4(t, sB + lwo_gemm_swz(r, c));\n                bfr[j][0] = t[0]; bfr[j][1] = t[1];\n                bfr[j + 1][0] = t[2]; bfr[j + 1][1] = t[3];\n            }\n#pragma unroll\n            for (int i = 0; i < MT; i++)\n#pragma unroll\n                for (int j = 0; j < NT; j++) Op::mma(acc[i][j], af[i], bfr[j]);\n        }\n    }\n    lwo_cp_async_wait<0>();\n\n    /* Accumulator fragment: c0,c1 at (row g, cols 2q, 2q+1), c2,c3 at row g+8; g = lane/4, q = lane%4. */\n    const int g = lane >> 2, q = lane & 3;\n#pragma unroll\n    for (int i = 0; i < MT; i++)\n#pragma unroll\n        for (int j = 0; j < NT; j++)\n#pragma unroll\n            for (int e = 0; e < 4; e++) {\n                const lwo_u64 m = bm0 + wm * WTM + i * 16 + g + (e >> 1) * 8;\n                const lwo_u64 n = bn0 + wn * WTN + j * 8 + q * 2 + (e & 1);\n                if (m < M && n < N)\n                    lwo_gemm_store(y, out_kind, m * N + n, lwo_gemm_epi((float)acc[i][j][e], sa, sw, bias, bias_kind, m, n));\n            }\n#endif\n}\n\n#define LWO_GEMM_ARGS const lwo_u8 *A, lwo_u64 lda_bytes, lwo_u64 a_kbytes, const lwo_u8 *B, lwo_u64 ldb_bytes, \\\n    lwo_u64 M, lwo_u64 N, const float *sa, const float *sw, const void *bias, int bias_kind, void *y, int out_kind\n#define LWO_GEMM_PASS A, lda_bytes, a_kbytes, B, ldb_bytes, M, N, sa, sw, bias, bias_kind, y, out_kind\n/* _l: 128x128 tile, 8 warps (2x4, warp tile 64x32); _s: 64x64 tile, 4 warps (2x2, warp tile 32x32),\n   for small M or N where the large tile leaves SMs idle. */\n#define LWO_GEMM_TC_KERNELS(name, op)                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(256) lwo_k_gemm_##name##_l(LWO_GEMM_ARGS) {             \\\n",
"        lwo_gemm_tc_body<op, 128, 128, 2, 4>(LWO_GEMM_PASS);                                             \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(128) lwo_k_gemm_##name##_s(LWO_GEMM_ARGS) {             \\\n        lwo_gemm_tc_body<op, 64, 64, 2, 2>(LWO_GEMM_PASS);                                               \\\n    }\n/* ---- Hopper GEMM: wgmma fed by the tensor copy engine (sm_90a) ---------------------------- */\n/* Same contract and epilogue as the mma.sync kernel, for the same four operand types. A block is\n   one producer warpgroup and CWG consumer warpgroups. The producer's one thread walks the block's\n   tiles and, for every BK-byte slice of K (128, or 64 for a deeper ring), has the copy engine\n   (cp.async.bulk.tensor) bring an A tile [BM rows x BK] and a B tile [BN rows x BK] into a ring of\n   shared-memory stages,\n   each stage guarded by two mbarriers: `full` (the copy landed: its transaction bytes arrived) and\n   `empty` (every consumer warpgroup is done reading it). A cooperative consumer warpgroup owns 64\n   rows of every tile; a ping-pong one owns every row of every other tile (lwo_gemm_wg_body says\n   which is faster where). Either runs BK / 32 wgmma steps (32 bytes of K each) per stage with both\n   operands read from shared memory, the accumulators in registers. The grid is persistent: block b\n   takes tiles b, b + grid, ... in M-fastest order, so concurrently running blocks share their\n   weight (B) tile in L2.\n\n   Shared-memory layout: BK-byte rows written with the copy engine's BK-byte swizzle (for 128: 16-byte\n   chunk c of row r at chunk c ^ (r % 8)), which is the layout the wgmma descriptor's swizzle mode\n   of that width reads; each tile starts on a 1024-byte boundary (at least one 8-row swizzle atom). The copy engine\n   zero-fills rows past M or N and bytes past the tensor map's K extent, so edges need no code.\n   The tensor maps come from the host (cuTensorMapEncodeTiled): A over [M rows, a_kbytes] with\n   row pitch lda_bytes, B over [N rows, ldb_bytes], both as bytes, box BK x (BM or BN) rows. */\n\n#define LWO_WG_MAX_STAGES 16  /* the ring's stages: as many as the launch's shared memory holds, at most this */\n\nstruct __align__(64) lwo_tmap { lwo_u64 v[16]; };   /* CUtensorMap: 128 opaque bytes */\n\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n__device__ __forceinline__ void lwo_mbar_init(lwo_u32 bar, lwo_u32 count) {\n    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(bar), \"r\"(count) : \"memory\");\n}\n__device__ __forceinline__ void lwo_mbar_expect_tx(lwo_u32 bar, lwo_u32 bytes) {\n    asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\" :: \"r\"(bar), \"r\"(bytes) : \"memory\");\n}\n__device__ __forceinline__ void lwo_mbar_arrive(lwo_u32 bar) {\n    asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(bar) : \"memory\");\n",
"}\n/* Spins until the barrier's phase of the given parity has completed. */\n__device__ __forceinline__ void lwo_mbar_wait(lwo_u32 bar, lwo_u32 parity) {\n    lwo_u32 done;\n    do {\n        asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n                     : \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");\n    } while (!done);\n}\n__device__ __forceinline__ void lwo_tma_load_2d(lwo_u32 dst, const lwo_tmap *map, lwo_u32 bar, int x, int y) {\n    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\"\n                 :: \"r\"(dst), \"l\"((lwo_u64)map), \"r\"(bar), \"r\"(x), \"r\"(y) : \"memory\");\n}\n/* The same copy landing at the same shared-memory offset in every CTA of the cluster named in `mask`\n   (bit r: rank r), each CTA's barrier at offset `bar` counting the bytes that land in it. */\n__device__ __forceinline__ void lwo_tma_load_2d_mc(lwo_u32 dst, const lwo_tmap *map, lwo_u32 bar, int x, int y, lwo_u16 mask) {\n    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\"\n                 :: \"r\"(dst), \"l\"((lwo_u64)map), \"r\"(bar), \"r\"(x), \"r\"(y), \"h\"(mask) : \"memory\");\n}\n/* Arrives on the barrier at offset `bar` of CTA `rank` of the cluster (this CTA's own included). The\n   default (CTA-scope) release: what it orders is the warpgroup's reads of the stage, which the\n   wgmma wait has completed, before the copies that refill it. A cluster-scope release here made\n   each stage wait like a fence: the clustered kernels ran 2.5x slower (H200). */\n__device__ __forceinline__ void lwo_mbar_arrive_cluster(lwo_u32 bar, lwo_u32 rank) {\n    asm volatile(\"{ .reg .b32 r; mapa.shared::cluster.u32 r, %0, %1; mbarrier.arrive.shared::cluster.b64 _, [r]; }\"\n                 :: \"r\"(bar), \"r\"(rank) : \"memory\");\n}\n__device__ __forceinline__ lwo_u32 lwo_cluster_rank() {\n    lwo_u32 r;\n    asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r));\n    return r;\n}\n/* Every thread of every CTA of the cluster. */\n__device__ __forceinline__ void lwo_cluster_sync() {\n    asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\" ::: \"memory\");\n}\n/* Shared-memory matrix descriptor of BK-byte rows (128 or 64) with the matching swizzle, K-major,\n   8-row atoms 8 * BK bytes apart (the leading-byte offset is unused in these modes and set to 1).\n   Adding n to it moves the start n x 16 bytes along K inside the swizzle atom. */\ntemplate <int BK>\n__device__ __forceinline__ lwo_u64 lwo_wg_desc(lwo_u32 saddr) {\n    return (lwo_u64)((saddr & 0x3FFFFu) >> 4) | ((lwo_u64)1 << 16) | ((lwo_u64)(8 * BK >> 4) << 32) |\n           ((lwo_u64)(BK == 128 ? 1 : 2) << 62);\n}\n#endif\n\n/* The operand lists of the wgmma accumulators: \"%0, ..., %63\" (n128), \"%0, ..., %95\" (n192) and\n",
"   \"%0, ..., %127\" (n256). */\n#define LWO_WG_REGS64 \\\n    \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \" \\\n    \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \" \\\n    \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \" \\\n    \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63\"\n#define LWO_WG_REGS96 LWO_WG_REGS64 \", \" \\\n    \"%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, \" \\\n    \"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95\"\n#define LWO_WG_REGS128 LWO_WG_REGS96 \", \" \\\n    \"%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, \" \\\n    \"%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127\"\n\n#define LWO_WG_OUT8(c, d, i) c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), c(d[i + 7])\n#define LWO_WG_OUT32(c, d, i) LWO_WG_OUT8(c, d, i), LWO_WG_OUT8(c, d, i + 8), LWO_WG_OUT8(c, d, i + 16), LWO_WG_OUT8(c, d, i + 24)\n#define LWO_WG_OUT64(c, d, i) LWO_WG_OUT32(c, d, i), LWO_WG_OUT32(c, d, i + 32)\n\ntemplate <int N> struct lwo_wg_n {};   /* the instruction's n, as a type for overloading */\n\n/* wgmma tags: one m64 x (n128, n192 or n256) x 32-byte-k step, D += A . B^T, A and B from shared memory.\n   KT is the instruction's k, accumulator and operand types; TAIL its immediate operands\n   (scale-a, scale-b and, for 16-bit types, the two transposes: K-major both, so 0). */\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n#define LWO_WG_OP(tag, AccT, C, KT, TAIL)                                                                 \\\n    struct tag { typedef AccT Acc;                                                                       \\\n        static __device__ __forceinline__ void mma(AccT *d, lwo_u64 da, lwo_u64 db, lwo_wg_n<128>) {       \\\n            asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128\" KT  \\\n                         \" {\" LWO_WG_REGS64 \"}, %64, %65, p\" TAIL \"; }\"                                   \\\n                         : LWO_WG_OUT64(C, d, 0) : \"l\"(da), \"l\"(db), \"r\"(1));                             \\\n        }                                                                                                 \\\n        static __device__ __forceinline__ void mma(AccT *d, lwo_u64 da, lwo_u64 db, lwo_wg_n<192>) {       \\\n            asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %98, 0; wgmma.mma_async.sync.aligned.m64n192\" KT  \\\n                         \" {\" LWO_WG_REGS96 \"}, %96, %97, p\" TAIL \"; }\"                                   \\\n                         : LWO_WG_OUT64(C, d, 0), LWO_WG_OUT32(C, d, 64) : \"l\"(da), \"l\"(db), \"r\"(1));     \\\n",
"        }                                                                                                 \\\n        static __device__ __forceinline__ void mma(AccT *d, lwo_u64 da, lwo_u64 db, lwo_wg_n<256>) {       \\\n            asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %130, 0; wgmma.mma_async.sync.aligned.m64n256\" KT \\\n                         \" {\" LWO_WG_REGS128 \"}, %128, %129, p\" TAIL \"; }\"                                \\\n                         : LWO_WG_OUT64(C, d, 0), LWO_WG_OUT64(C, d, 64) : \"l\"(da), \"l\"(db), \"r\"(1));     \\\n        } };\n#else\n#define LWO_WG_OP(tag, AccT, C, KT, TAIL)                                                                 \\\n    struct tag { typedef AccT Acc;                                                                       \\\n        template <int N> static __device__ __forceinline__ void mma(AccT *, lwo_u64, lwo_u64, lwo_wg_n<N>) {} };\n#endif\nLWO_WG_OP(lwo_wg_bf16, float, \"+f\", \"k16.f32.bf16.bf16\", \", 1, 1, 0, 0\")\nLWO_WG_OP(lwo_wg_f16, float, \"+f\", \"k16.f32.f16.f16\", \", 1, 1, 0, 0\")\nLWO_WG_OP(lwo_wg_s8, int, \"+r\", \"k32.s32.s8.s8\", \"\")\nLWO_WG_OP(lwo_wg_e4m3, float, \"+f\", \"k32.f32.e4m3.e4m3\", \", 1, 1\")\n\n/* Keeps the compiler from moving accumulator reads or writes across the asynchronous MMAs. */\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_pin(float *d) {\n#pragma unroll\n    for (int i = 0; i < N; i++) asm volatile(\"\" : \"+f\"(d[i]) :: \"memory\");\n}\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_pin(int *d) {\n#pragma unroll\n    for (int i = 0; i < N; i++) asm volatile(\"\" : \"+r\"(d[i]) :: \"memory\");\n}\n\n/* Which parts of the epilogue a launch has (bits of lwo_wg_epi4's `has`). */\nenum { LWO_WG_SA = 1, LWO_WG_SW = 2, LWO_WG_BIAS = 4 };\n\n/* The epilogue of two adjacent columns (n, n + 1; n even) of rows m and m + 8, as lwo_gemm_epi\n   computes it, stored as one 4- or 8-byte store per row where both columns exist (the host takes\n   this path only for a 16-byte aligned y). v0..v3: (m, n), (m, n + 1), (m + 8, n), (m + 8, n + 1);\n   a0, a1 the rows' activation scales; cw, cb the two columns' weight scales and bias (as f32), in\n   shared memory. Not inlined: sixteen inlined copies of it per kernel took NVVM two minutes per\n   GEMM module. */\n__device__ __noinline__ void lwo_wg_epi4(float v0, float v1, float v2, float v3, lwo_u64 M, lwo_u64 N, lwo_u64 m,\n                                         lwo_u64 n, float a0, float a1, const float *cw, const float *cb, int has,\n                                         void *y, int out_kind) {\n    const float v[4] = { v0, v1, v2, v3 }, a[2] = { a0, a1 };\n    if (n >= N) return;\n    const int two = n + 1 < N;\n    const float w0 = cw[0], w1 = cw[1], b0 = cb[0], b1 = cb[1];\n#pragma unroll\n    for (int h = 0; h < 2; h++) {\n        const lwo_u64 r = m + 8 * h, i = r * N + n;\n        if (r >= M) continue;\n        float v0 = v[2 * h], v1 = v[2 * h + 1];\n",
"        if (has & LWO_WG_SA) { v0 = v0 * a[h]; v1 = v1 * a[h]; }\n        if (has & LWO_WG_SW) { v0 = v0 * w0; v1 = v1 * w1; }\n        if (has & LWO_WG_BIAS) { v0 = v0 + b0; v1 = v1 + b1; }\n        if (two && (N & 1) == 0) {\n            if (out_kind == 0) *(lwo_u64 *)((float *)y + i) = __float_as_uint(v0) | ((lwo_u64)__float_as_uint(v1) << 32);\n            else if (out_kind == 1) *(lwo_u32 *)((lwo_u16 *)y + i) = lwo_f32_to_f16(v0) | ((lwo_u32)lwo_f32_to_f16(v1) << 16);\n            else *(lwo_u32 *)((lwo_u16 *)y + i) = lwo_f32_to_bf16(v0) | ((lwo_u32)lwo_f32_to_bf16(v1) << 16);\n        } else {\n            lwo_gemm_store(y, out_kind, i, v0);\n            if (two) lwo_gemm_store(y, out_kind, i + 1, v1);\n        }\n    }\n}\n\n/* The epilogue over a consumer's accumulators, one 8-column group J at a time. A compile-time\n   recursion rather than a loop: every accumulator index is then a constant, which keeps the\n   accumulators in registers (a loop the compiler leaves rolled would move them to local memory).\n   c: the thread's first column within the tile; col_w, col_b: the tile's column tables. */\ntemplate <int J, int NJ>\nstruct lwo_wg_epi_cols {\n    template <class Acc>\n    static __device__ __forceinline__ void run(const Acc *d, lwo_u64 M, lwo_u64 N, lwo_u64 m, lwo_u64 n, int c, float a0,\n                                               float a1, const float *col_w, const float *col_b, int has, void *y,\n                                               int out_kind) {\n        lwo_wg_epi4((float)d[J * 4], (float)d[J * 4 + 1], (float)d[J * 4 + 2], (float)d[J * 4 + 3], M, N, m, n + J * 8,\n                    a0, a1, col_w + c + J * 8, col_b + c + J * 8, has, y, out_kind);\n        lwo_wg_epi_cols<J + 1, NJ>::run(d, M, N, m, n, c, a0, a1, col_w, col_b, has, y, out_kind);\n    }\n};\ntemplate <int NJ>\nstruct lwo_wg_epi_cols<NJ, NJ> {\n    template <class Acc>\n    static __device__ __forceinline__ void run(const Acc *, lwo_u64, lwo_u64, lwo_u64, lwo_u64, int, float, float,\n                                               const float *, const float *, int, void *, int) {}\n};\n\n/* Two adjacent 16-bit outputs (OUT 1: f16, 2: bf16) packed, the first in the low half. bf16 takes\n   the hardware's paired convert (round to nearest even, as lwo_f32_to_bf16) with a NaN, which the\n   two would quiet differently, sent the slow way. */\ntemplate <int OUT>\n__device__ __forceinline__ lwo_u32 lwo_wg_pack2(float v0, float v1) {\n    if (OUT == 1) return lwo_f32_to_f16(v0) | ((lwo_u32)lwo_f32_to_f16(v1) << 16);\n    lwo_u32 p;\n    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(p) : \"f\"(v1), \"f\"(v0));\n    if (v0 != v0 || v1 != v1) p = lwo_f32_to_bf16(v0) | ((lwo_u32)lwo_f32_to_bf16(v1) << 16);\n    return p;\n}\n/* Two adjacent outputs (columns n, n + 1 of one row, element i = n of an even-N row) stored as one\n   access: y is 16-byte aligned and N even, so i even is 8-byte aligned for f32, 4 for 16-bit. */\ntemplate <int OUT>\n",
"__device__ __forceinline__ void lwo_wg_store2(void *y, lwo_u64 i, float v0, float v1) {\n    if (OUT == 0) *(float2 *)((float *)y + i) = make_float2(v0, v1);\n    else *(lwo_u32 *)((lwo_u16 *)y + i) = lwo_wg_pack2<OUT>(v0, v1);\n}\n\n/* The epilogue of a tile that lies wholly inside y (N even): no bounds, no flags (an absent scale is\n   1 and an absent bias -0, both exact identities of the f32 math), every accumulator index a\n   constant once unrolled. About a quarter of the instructions of the general path below, whose\n   calls dominated the tile's instruction count. d[h]: the accumulators of rows 64 h + ..; r0 the\n   thread's first row, c0 its first column; a[h][e] the activation scales of rows r0 + 64 h + 8 e;\n   col_w, col_b the tile's column tables from the thread's first column on. */\ntemplate <int OUT, int RH, int NACC, class Acc>\n__device__ __forceinline__ void lwo_wg_epi_tile(const Acc (&d)[RH][NACC], void *y, lwo_u64 N, lwo_u64 r0, lwo_u64 c0,\n                                                const float (&a)[RH][2], const float *col_w, const float *col_b) {\n#pragma unroll\n    for (int j = 0; j < NACC / 4; j++) {\n        const float2 w = *(const float2 *)(col_w + 8 * j), b = *(const float2 *)(col_b + 8 * j);\n#pragma unroll\n        for (int h = 0; h < RH; h++)\n#pragma unroll\n            for (int e = 0; e < 2; e++) {\n                const float v0 = (float)d[h][4 * j + 2 * e] * a[h][e] * w.x + b.x;\n                const float v1 = (float)d[h][4 * j + 2 * e + 1] * a[h][e] * w.y + b.y;\n                lwo_wg_store2<OUT>(y, (r0 + 64 * h + 8 * e) * N + c0 + 8 * j, v0, v1);\n            }\n    }\n}\n\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n__device__ __forceinline__ void lwo_stmatrix4(lwo_u32 addr, lwo_u32 r0, lwo_u32 r1, lwo_u32 r2, lwo_u32 r3) {\n    asm volatile(\"stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\" :: \"r\"(addr), \"r\"(r0), \"r\"(r1), \"r\"(r2), \"r\"(r3)\n                 : \"memory\");\n}\n/* The copy engine's store of a box of shared memory to the tensor map's box at (x bytes, y rows);\n   it writes nothing past the map's extent. */\n__device__ __forceinline__ void lwo_tma_store_2d(const lwo_tmap *map, lwo_u32 src, int x, int y) {\n    asm volatile(\"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\" :: \"l\"((lwo_u64)map), \"r\"(src),\n                 \"r\"(x), \"r\"(y) : \"memory\");\n}\n__device__ __forceinline__ void lwo_tma_store_commit() { asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\"); }\n/* This thread's committed stores have read their shared memory (which may then be rewritten). */\n__device__ __forceinline__ void lwo_tma_store_wait_read() { asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\"); }\n/* ... and have written global memory. */\n__device__ __forceinline__ void lwo_tma_store_wait() { asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\"); }\n",
"/* The generic proxy's shared-memory writes made visible to the copy engine's reads. */\n__device__ __forceinline__ void lwo_fence_proxy_async() { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n\n/* The epilogue of 64 rows of a tile, 16-bit outputs, in two steps: the values packed in registers\n   (p[2 j + e]: rows g + 8 e of column group j, as pairs), which can run while the copy engine still\n   reads the buffer, then written to shared memory for the copy engine to store. The accumulators'\n   fragment is the 8x8 matrix fragment stmatrix takes (thread i: row i / 4, columns 2 (i % 4) and\n   + 1), so one stmatrix.x4 writes 16 rows x 16 columns of the warp's: 16 instructions a thread\n   where the direct path stores 64 times 4 bytes, each store touching eight rows. The buffer holds\n   the 64 rows as boxes of 64 columns (128 bytes a row, 8 KiB a box) in the 128-byte swizzle the\n   tensor map stores with (16-byte chunk c of row r at c ^ (r % 8)), which also puts an 8x8\n   matrix's rows in different banks. d, a0, a1, col_w, col_b as in lwo_wg_epi_tile's half. */\ntemplate <int OUT, int NACC, class Acc>\n__device__ __forceinline__ void lwo_wg_epi_pack(const Acc *d, lwo_u32 (&p)[NACC / 2], float a0, float a1,\n                                                const float *col_w, const float *col_b) {\n#pragma unroll\n    for (int j = 0; j < NACC / 4; j++) {\n        const float2 w = *(const float2 *)(col_w + 8 * j), b = *(const float2 *)(col_b + 8 * j);\n#pragma unroll\n        for (int e = 0; e < 2; e++) {\n            const float s = e ? a1 : a0;\n            p[2 * j + e] = lwo_wg_pack2<OUT>((float)d[4 * j + 2 * e] * s * w.x + b.x, (float)d[4 * j + 2 * e + 1] * s * w.y + b.y);\n        }\n    }\n}\ntemplate <int NP>\n__device__ __forceinline__ void lwo_wg_epi_stmatrix(const lwo_u32 (&p)[NP], lwo_u32 buf, int warp, int lane) {\n    const int k = lane >> 3, row = warp * 16 + (k & 1) * 8 + (lane & 7);   /* the row whose address this thread gives */\n#pragma unroll\n    for (int j = 0; j < NP / 2; j += 2) {   /* matrices: rows g and g + 8 of column groups j and j + 1 */\n        const int c = j + (k >> 1);\n        lwo_stmatrix4(buf + (c >> 3) * 8192 + row * 128 + (((c & 7) ^ (row & 7)) << 4), p[2 * j], p[2 * j + 1], p[2 * j + 2],\n                      p[2 * j + 3]);\n    }\n}\n#endif\n\n/* Tile order: groups of LWO_WG_GROUP_M row tiles, and within a group the row tile fastest. The blocks\n   running at one time then read a band of A and a band of B of about the same size, which stay in\n   L2 together (M-fastest over all rows re-reads the whole of A from memory for every band of\n   columns once A outgrows L2). A cluster of CM x CN CTAs takes units of CM x CN tiles in that order,\n   CTA `rank` the tile (rank % CM, rank / CM) of each. */\n#define LWO_WG_GROUP_M 16\ntemplate <int CM, int CN>\n__device__ __forceinline__ void lwo_wg_tile(lwo_u64 unit, lwo_u64 units_m, lwo_u64 units_n, lwo_u32 rank, lwo_u64 *mt, lwo_u64 *nt) {\n",
"    const lwo_u64 group = LWO_WG_GROUP_M / CM, span = group * units_n, g = unit / span, first = g * group;\n    const lwo_u64 gm = units_m - first < group ? units_m - first : group, r = unit - g * span;\n    *mt = (first + r % gm) * CM + rank % CM;\n    *nt = (r / gm) * CN + rank / CM;\n}\n\n/* A block's work, as items: a unit and the slices [k0, k1) of its K (ktiles of BK bytes) it runs.\n   Whole units come first: cluster c of P takes units c, c + P, ... below sk_first. The units from\n   sk_first on (the split tail, P to 2P - 1 of them when the host splits, none otherwise) are shared\n   out along K: their I = (units - sk_first) x ktiles slices, in unit order, are cut into P equal\n   runs, and cluster c takes run [c I / P, (c + 1) I / P), as items cut at unit boundaries. So the\n   last rounds take (units - sk_first) / P of a round rather than two whole ones. A unit's slices\n   may come from up to three clusters: the one holding its slice 0 runs it last of its items (the\n   others run theirs first), adds their partial sums and writes the unit (lwo_gemm_wg_body). */\nstruct lwo_wg_item { lwo_u64 unit; lwo_u32 k0, k1; };\nstruct lwo_wg_sched { lwo_u64 c, P, sk_first, kt, work, n_whole, b, e, n; };\n__device__ __forceinline__ lwo_wg_sched lwo_wg_sched_make(lwo_u64 c, lwo_u64 P, lwo_u64 units, lwo_u64 sk_first, lwo_u64 kt) {\n    lwo_wg_sched s;\n    s.c = c; s.P = P; s.sk_first = sk_first; s.kt = kt;\n    s.work = (units - sk_first) * kt;\n    s.n_whole = sk_first > c ? (sk_first - c + P - 1) / P : 0;\n    s.b = c * s.work / P;\n    s.e = (c + 1) * s.work / P;\n    s.n = s.n_whole + (s.e > s.b ? (s.e - 1) / kt - s.b / kt + 1 : 0);\n    return s;\n}\ntemplate <int SPLIT>   /* 0: no split tail (the compiler drops its arithmetic) */\n__device__ __forceinline__ lwo_wg_item lwo_wg_sched_item(const lwo_wg_sched &s, lwo_u64 i) {\n    lwo_wg_item w;\n    if (!SPLIT || i < s.n_whole) {\n        w.unit = s.c + i * s.P; w.k0 = 0; w.k1 = (lwo_u32)s.kt;\n    } else {\n        const lwo_u64 j = i - s.n_whole, tail = s.b / s.kt + j, lo = j ? tail * s.kt : s.b;\n        const lwo_u64 hi = s.e < (tail + 1) * s.kt ? s.e : (tail + 1) * s.kt;\n        w.unit = s.sk_first + tail; w.k0 = (lwo_u32)(lo - tail * s.kt); w.k1 = (lwo_u32)(hi - tail * s.kt);\n    }\n    return w;\n}\n/* The clusters whose runs start inside tail unit `tail` after cluster c's: those that hold the\n   unit's other slices when c holds its slice 0 but not all of them. */\n__device__ __forceinline__ lwo_u64 lwo_wg_sched_helpers(const lwo_wg_sched &s, lwo_u64 tail) {\n    lwo_u64 w = s.c + 1;\n    while (w < s.P && w * s.work / s.P < (tail + 1) * s.kt) w++;\n    return w - s.c - 1;\n}\n\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n/* A split unit's partial sums: each consumer thread's accumulators, four at a time, in slot order\n   (thread T's values 4 q .. 4 q + 3 at [q x threads + T]), so that the thread that adds them back\n",
"   holds the same fragment and the stores and loads are 16-byte and coalesced. Through L2 only (cg):\n   another multiprocessor wrote them. */\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_part_store(int4 *slot, int threads, int T, const int *d) {\n#pragma unroll\n    for (int q = 0; q < N / 4; q++) __stcg(slot + q * threads + T, make_int4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));\n}\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_part_store(int4 *slot, int threads, int T, const float *d) {\n#pragma unroll\n    for (int q = 0; q < N / 4; q++)\n        __stcg(slot + q * threads + T, make_int4(__float_as_int(d[4 * q]), __float_as_int(d[4 * q + 1]),\n                                                 __float_as_int(d[4 * q + 2]), __float_as_int(d[4 * q + 3])));\n}\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_part_add(const int4 *slot, int threads, int T, int *d) {\n#pragma unroll\n    for (int q = 0; q < N / 4; q++) {\n        const int4 v = __ldcg(slot + q * threads + T);\n        d[4 * q] += v.x; d[4 * q + 1] += v.y; d[4 * q + 2] += v.z; d[4 * q + 3] += v.w;\n    }\n}\ntemplate <int N>\n__device__ __forceinline__ void lwo_wg_part_add(const int4 *slot, int threads, int T, float *d) {\n#pragma unroll\n    for (int q = 0; q < N / 4; q++) {\n        const int4 v = __ldcg(slot + q * threads + T);\n        d[4 * q] += __int_as_float(v.x); d[4 * q + 1] += __int_as_float(v.y);\n        d[4 * q + 2] += __int_as_float(v.z); d[4 * q + 3] += __int_as_float(v.w);\n    }\n}\n/* The unit's counter of partial sums written: one thread adds with a release once its warpgroup's\n   stores are all issued (the barrier before it), the adder's one thread waits with acquires, then\n   its warpgroup's barrier lets every thread read (the pattern of CUTLASS's generic barrier). */\n__device__ __forceinline__ void lwo_wg_count_up(unsigned int *cnt) {\n    asm volatile(\"red.release.gpu.global.add.u32 [%0], 1;\" :: \"l\"(cnt) : \"memory\");\n}\n__device__ __forceinline__ void lwo_wg_count_wait(unsigned int *cnt, unsigned int want) {\n    unsigned int v;\n    do asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(cnt) : \"memory\");\n    while (v < want);\n    *(volatile unsigned int *)cnt = 0;   /* every helper has counted: ready for the next launch */\n}\n\n/* A barrier of one warpgroup's 128 threads (ids 1, 2, ...; 0 is __syncthreads). */\n__device__ __forceinline__ void lwo_wg_bar(int wg) { asm volatile(\"bar.sync %0, 128;\" :: \"r\"(1 + wg) : \"memory\"); }\n/* The ping-pong consumers' turns: barrier 8 + w is warpgroup w's (the previous warpgroup arrives on\n   it, w waits on it: 256 threads). */\n__device__ __forceinline__ void lwo_wg_turn_wait(int wg) { asm volatile(\"bar.sync %0, 256;\" :: \"r\"(8 + wg) : \"memory\"); }\n__device__ __forceinline__ void lwo_wg_turn_pass(int wg, int cwg) {\n    asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(8 + (wg + 1) % cwg) : \"memory\");\n}\n",
"/* A consumer warpgroup is done with a stage: it tells every CTA whose copies land in this CTA's stage,\n   itself included, that is the CN CTAs of its row tile (A) and the CM of its column tile (B), one\n   thread each. */\ntemplate <int CM, int CN>\n__device__ __forceinline__ void lwo_wg_release(lwo_u32 bar, int t, lwo_u32 rank) {\n    if (CM * CN == 1) {\n        if (t == 0) lwo_mbar_arrive(bar);\n    } else if (t < CN) {\n        lwo_mbar_arrive_cluster(bar, rank % CM + CM * (lwo_u32)t);\n    } else if (t < CN + CM - 1) {\n        lwo_u32 i = (lwo_u32)t - CN;\n        i += i >= rank % CM;\n        lwo_mbar_arrive_cluster(bar, i + CM * (rank / CM));\n    }\n}\n\n/* fp8 weights read as they are stored (an upcast format: e4m3 or e5m2 codes, one scale applied in\n   the epilogue). The copy engine lands a stage's B rows as fp8 codes in a staging slot; warps 1-3 of\n   the producer warpgroup turn them into the 16-bit operand, written where and how the copy engine\n   would have put a 16-bit B (the stage's B tile, BK-byte rows in the BK-byte swizzle), so the\n   consumers and their descriptors are those of the 16-bit GEMM. A pair of codes, each in the high\n   byte of a 16-bit half (v: codes at bits 8-15 and 24-31), becomes a pair of 16-bit values exactly:\n   exponent and mantissa moved under the target's fields, the sign put back, then one paired\n   multiply by the power of two between the two exponent biases (bf16: 2^120 from e4m3, 2^112 from\n   e5m2; f16: 2^8 from e4m3, 1 from e5m2, whose codes are f16's high bytes). Subnormal codes land\n   on subnormals or normals of the target and stay exact. The formats' NaN codes (e4m3 0x7f/0xff,\n   e5m2 exponent 31) come out finite in bf16; lwo's own quantizers never write them. */\nenum { LWO_WG_FP8_SLOTS = 2,      /* staging slots: the conversion runs up to two stages ahead */\n       LWO_WG_FP8_WARPS = 3 };    /* converting warps of the producer warpgroup (1-3) */\ntemplate <int F16>\n__device__ __forceinline__ lwo_u32 lwo_fp8x2_to_16x2(lwo_u32 v, int shift, lwo_u32 mul) {\n    lwo_u32 r = ((v & 0x7f007f00u) >> shift) | (v & 0x80008000u);\n    if (F16) asm(\"fma.rn.f16x2 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(r), \"r\"(mul), \"r\"(0x80008000u));\n    else asm(\"fma.rn.bf16x2 %0, %1, %2, %3;\" : \"=r\"(r) : \"r\"(r), \"r\"(mul), \"r\"(0x80008000u));\n    return r;\n}\n/* Thread ct of the nct converting threads' share: BN staged rows of BK / 2 codes (linear, 16-byte\n   chunks) at `src` into BN rows of BK bytes at `dst`. fmt: 1 e4m3, 2 e5m2. The swizzle: 16-byte\n   chunk c of row r at c ^ (r % 8) for 128-byte rows, c ^ ((r / 2) % 4) for 64. */\ntemplate <int F16, int BN, int BK>\n__device__ __forceinline__ void lwo_wg_fp8_stage(lwo_u32 src, lwo_u32 dst, int ct, int nct, int fmt) {\n    enum { CH = BK / 32 };   /* 16-byte chunks of codes a row */\n    const int shift = F16 ? (fmt == 2 ? 0 : 1) : (fmt == 2 ? 3 : 4);\n",
"    const lwo_u32 mul = F16 ? (fmt == 2 ? 0x3c003c00u : 0x5c005c00u) : (fmt == 2 ? 0x77807780u : 0x7b807b80u);\n    for (int i = ct; i < BN * CH; i += nct) {\n        const int r = i / CH, c = i % CH, sw = BK == 128 ? (r & 7) : ((r >> 1) & 3);\n        lwo_u32 v[4], o[8];\n        asm volatile(\"ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\" : \"=r\"(v[0]), \"=r\"(v[1]), \"=r\"(v[2]), \"=r\"(v[3]) : \"r\"(src + 16u * i));\n#pragma unroll\n        for (int e = 0; e < 4; e++) {\n            lwo_u32 lo, hi;\n            asm(\"prmt.b32 %0, %1, 0, 0x1404;\" : \"=r\"(lo) : \"r\"(v[e]));   /* codes 0, 1 to bits 8-15, 24-31 */\n            asm(\"prmt.b32 %0, %1, 0, 0x3424;\" : \"=r\"(hi) : \"r\"(v[e]));   /* codes 2, 3 */\n            o[2 * e] = lwo_fp8x2_to_16x2<F16>(lo, shift, mul);\n            o[2 * e + 1] = lwo_fp8x2_to_16x2<F16>(hi, shift, mul);\n        }\n        const lwo_u32 row = dst + (lwo_u32)r * BK;\n        asm volatile(\"st.shared.v4.u32 [%0], {%1, %2, %3, %4};\" :: \"r\"(row + (((2 * c) ^ sw) << 4)), \"r\"(o[0]), \"r\"(o[1]), \"r\"(o[2]), \"r\"(o[3]) : \"memory\");\n        asm volatile(\"st.shared.v4.u32 [%0], {%1, %2, %3, %4};\" :: \"r\"(row + (((2 * c + 1) ^ sw) << 4)), \"r\"(o[4]), \"r\"(o[5]), \"r\"(o[6]), \"r\"(o[7]) : \"memory\");\n    }\n}\n/* The ring's position p (stage p % stages, staging slot p % LWO_WG_FP8_SLOTS): thread ct of the\n   nct converting threads waits for the slot's codes, converts its share into the stage's B and\n   counts its warp in, on the stage's `full` and on the slot's `drained` of each of the CM CTAs whose\n   copies land in the slot. Waiting for the codes is also what makes the stage's B free to write:\n   the producer copies them only after it has seen the stage `empty`. */\ntemplate <int FP8B, int BN, int BK, int CM>\n__device__ __forceinline__ void lwo_wg_fp8_position(lwo_u32 p, int stages, lwo_u32 staging, lwo_u32 stage_b, lwo_u32 stage_bytes,\n                                                    lwo_u32 landed, lwo_u32 drained, lwo_u32 full, int ct, int nct, int fmt, lwo_u32 rank) {\n    const lwo_u32 j = p % LWO_WG_FP8_SLOTS, s = p % (lwo_u32)stages;\n    lwo_mbar_wait(landed + 8 * j, (p / LWO_WG_FP8_SLOTS) & 1u);\n    lwo_wg_fp8_stage<FP8B == 2, BN, BK>(staging + j * (BN * BK / 2), stage_b + s * stage_bytes, ct, nct, fmt);\n    lwo_fence_proxy_async();   /* the writes seen by the MMAs' (async proxy) reads */\n    __syncwarp();\n    if ((threadIdx.x & 31) == 0) {\n        lwo_mbar_arrive(full + 8 * s);\n        for (int i = 0; i < CM; i++) {\n            if (CM > 1) lwo_mbar_arrive_cluster(drained + 8 * j, i + CM * (rank / CM));\n            else lwo_mbar_arrive(drained + 8 * j);\n        }\n    }\n}\n#endif\n\n/* Grid: min(tiles, SMs) blocks of 128 * (CWG + 1) threads; all the dynamic shared memory the device\n   allows (lwo__gemm_wg in lwo.h). It is laid out as the stages' barriers (16 * LWO_WG_MAX_STAGES\n",
"   bytes), the consumers' column tables (CWG * BN * 8), then, from the next 1024-byte boundary, with\n   ytma an output buffer of 64 rows x EPI_BN (128, or 64 for BN 192) per consumer warpgroup (lwo_wg_epi_pack: a 16-bit y\n   whose rows are whole 16-byte chunks goes out through the copy engine, by the tensor map tmY, 128\n   columns at a time, so that a 128 x 256 tile keeps a stage more in the ring), then as\n   many stages as fit, up to LWO_WG_MAX_STAGES: the deeper the ring, the longer a copy may take\n   before the MMAs wait for it (6 stages of a 128 x 128 tile in 227 KiB beside two output buffers,\n   7 without). ktiles = ceil(a_kbytes / BK). Work comes as items (lwo_wg_sched): whole units, and\n   with sk_first < units a split tail whose partial sums go through `split` (lwo__split_area in\n   lwo.h). The kernel is launched as a programmatic dependent of the one before it (the quantizer\n   of its activations): it waits for that one (griddepcontrol.wait) once its barriers are set up.\n   PP = 0 (cooperative): the CWG consumer warpgroups share every tile, 64 rows each, so each tile's\n   epilogue stops the tensor cores. PP = 1 (ping-pong): consumer warpgroup w takes the block's tiles\n   w, w + CWG, ... whole (all BM rows, as BM / 64 row halves), so one warpgroup's epilogue runs while\n   the other's main loop keeps the tensor cores busy. The producer is the same for both: it fills the\n   ring with the block's tiles in order, and a ping-pong consumer steps over the other's stages.\n   After the stages' barriers, each consumer warpgroup has two tables of BN floats: the tile's\n   weight scales and bias, read once from global memory per tile (during the main loop) rather than\n   once per accumulator pair in the epilogue, where each load's latency was paid in turn.\n   CM x CN > 1: the block is one CTA of a cluster of CM x CN (launched with those cluster dims as\n   CM * CN along x) that takes CM x CN neighbouring tiles at a time. The CTAs of one row tile share\n   its A: each copies a 1/CN slice and the copy engine delivers it to all of them; likewise B among\n   the CM CTAs of a column tile. So each CTA reads (BM / CN + BN / CM) rows through L2 per stage\n   rather than BM + BN. A stage is refilled only when the consumers of every CTA that copies into\n   it are done with it: the `empty` barriers count those CM + CN - 1 CTAs' consumer warpgroups. */\ntemplate <class Op, int BN, int CWG, int PP, int CM, int CN, int BK, int FP8B>\n__device__ __forceinline__ void lwo_gemm_wg_body(const lwo_tmap *tmA, const lwo_tmap *tmB, lwo_u64 M, lwo_u64 N, lwo_u64 ktiles,\n                                                 const float *sa, const float *sw, const void *bias, int bias_kind,\n                                                 void *y, int out_kind, lwo_u64 sk_first, void *split,\n                                                 const lwo_tmap *tmY, int ytma, int b_fp8) {\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n    typedef typename Op::Acc Acc;\n",
"    enum { BM = 64 * CWG, A_BYTES = BM * BK, STAGE_BYTES = (BM + BN) * BK, NACC = BN / 2, CPT = (BN + 127) / 128,\n           RH = PP ? CWG : 1, CL = CM * CN, A_PART = BM / CN, B_PART = BN / CM,\n           SPLIT = BM * BN <= 128 * 256,     /* the split area has a 128 x 256 slot per CTA (lwo.h) */\n           /* the output buffer's columns: a wider tile goes out in parts (192: three of 64) */\n           EPI_BN = BN % 128 ? 64 : 128,\n           /* FP8B: B's codes staged per stage (BN rows of BK / 2 bytes), see lwo_wg_fp8_stage */\n           STG_BYTES = FP8B ? BN * BK / 2 : 0, STG_PART = B_PART * BK / 2,\n           /* ... converted by the producer warpgroup's warps 1-3 and, in cooperative tiles, by the\n              consumers, each of which converts the next stage's share while its MMAs run */\n           CONV_WARPS = LWO_WG_FP8_WARPS + (PP ? 0 : 4 * CWG), CONV_THREADS = 32 * CONV_WARPS };\n    extern __shared__ __align__(1024) lwo_u8 lwo_wg_smem[];\n    lwo_u32 dyn;\n    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(dyn));\n    const lwo_u32 raw = (lwo_u32)__cvta_generic_to_shared(lwo_wg_smem), full = raw, empty = raw + 8 * LWO_WG_MAX_STAGES;\n    /* FP8B: the staging slots' barriers after the column tables: `landed` (the codes arrived) and\n       `drained` (every CTA's converters that read the slot are done with it) */\n    const lwo_u32 landed = empty + 8 * LWO_WG_MAX_STAGES + CWG * BN * 8, drained = landed + 8 * LWO_WG_FP8_SLOTS;\n    const lwo_u32 epi = (landed + (FP8B ? 16 * LWO_WG_FP8_SLOTS : 0) + 1023u) & ~1023u;   /* the output buffers */\n    const lwo_u32 staging = epi + (ytma ? CWG * 64 * EPI_BN * 2 : 0), base = staging + LWO_WG_FP8_SLOTS * STG_BYTES;\n    const int fit = (int)((raw + dyn - base) / STAGE_BYTES), STAGES = fit < LWO_WG_MAX_STAGES ? fit : LWO_WG_MAX_STAGES;\n    const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;\n    const lwo_u32 rank = CL > 1 ? lwo_cluster_rank() : 0;\n    const lwo_u64 units_m = ((M + BM - 1) / BM + CM - 1) / CM, units_n = ((N + BN - 1) / BN + CN - 1) / CN;\n    const lwo_u64 units = units_m * units_n;\n    const lwo_wg_sched sch = lwo_wg_sched_make(blockIdx.x / CL, gridDim.x / CL, units, SPLIT ? sk_first : units, ktiles);\n    if (threadIdx.x == 0) {\n        for (int s = 0; s < STAGES; s++) {\n            /* FP8B: a stage is full once A's bytes landed and each converting warp wrote its share of B */\n            lwo_mbar_init(full + 8 * s, FP8B ? 1 + CONV_WARPS : 1);\n            lwo_mbar_init(empty + 8 * s, (PP ? 1 : CWG) * (CM + CN - 1));\n        }\n        for (int j = 0; FP8B && j < LWO_WG_FP8_SLOTS; j++) {\n            lwo_mbar_init(landed + 8 * j, 1);\n            lwo_mbar_init(drained + 8 * j, CONV_WARPS * CM);   /* B's codes come from the CM CTAs of its column tile */\n        }\n        asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n    }\n",
"    if (CL > 1) lwo_cluster_sync();   /* every CTA's barriers exist before another's copies or arrivals reach them */\n    else __syncthreads();\n    /* Launched as a programmatic dependent of the kernel before it (the activations' quantizer):\n       everything up to here may have overlapped that kernel; nothing it writes is read before it\n       has finished. */\n    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n\n    if (wg == CWG) { /* producer */\n        if (CWG > 1) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\");\n        if (t == 0) {\n            int s = 0, j = 0;\n            lwo_u32 phase = 0, jphase = 0;\n            /* the CTAs sharing this one's A slice (same row tile) and its B slice (same column tile) */\n            lwo_u16 mask_a = 0, mask_b = 0;\n            for (int j = 0; j < CN; j++) mask_a |= (lwo_u16)(1u << (rank % CM + CM * j));\n            for (int i = 0; i < CM; i++) mask_b |= (lwo_u16)(1u << (i + CM * (rank / CM)));\n            for (lwo_u64 item = 0; item < sch.n; item++) {\n                const lwo_wg_item w = lwo_wg_sched_item<SPLIT>(sch, item);\n                lwo_u64 mt, nt;\n                lwo_wg_tile<CM, CN>(w.unit, units_m, units_n, rank, &mt, &nt);\n                const int ra = (int)(mt * BM + (rank / CM) * A_PART), rb = (int)(nt * BN + (rank % CM) * B_PART);\n                const lwo_u32 oa = (rank / CM) * A_PART * BK, ob = A_BYTES + (rank % CM) * B_PART * BK;\n                for (lwo_u64 kt = w.k0; kt < w.k1; kt++) {\n                    const lwo_u32 sA = base + s * STAGE_BYTES;\n                    lwo_mbar_wait(empty + 8 * s, phase ^ 1u);   /* a fresh barrier passes parity 1 */\n                    lwo_mbar_expect_tx(full + 8 * s, FP8B ? A_BYTES : STAGE_BYTES);\n                    if (CN > 1) lwo_tma_load_2d_mc(sA + oa, tmA, full + 8 * s, (int)(kt * BK), ra, mask_a);\n                    else lwo_tma_load_2d(sA, tmA, full + 8 * s, (int)(kt * BK), ra);\n                    if (FP8B) {   /* B's codes into staging slot j; the converters will fill the stage's B */\n                        const lwo_u32 sj = staging + j * STG_BYTES + (rank % CM) * STG_PART;\n                        lwo_mbar_wait(drained + 8 * j, jphase ^ 1u);\n                        lwo_mbar_expect_tx(landed + 8 * j, STG_BYTES);\n                        if (CM > 1) lwo_tma_load_2d_mc(sj, tmB, landed + 8 * j, (int)(kt * (BK / 2)), rb, mask_b);\n                        else lwo_tma_load_2d(sj, tmB, landed + 8 * j, (int)(kt * (BK / 2)), rb);\n                        if (++j == LWO_WG_FP8_SLOTS) { j = 0; jphase ^= 1u; }\n                    } else if (CM > 1) lwo_tma_load_2d_mc(sA + ob, tmB, full + 8 * s, (int)(kt * BK), rb, mask_b);\n                    else lwo_tma_load_2d(sA + ob, tmB, full + 8 * s, (int)(kt * BK), rb);\n                    if (++s == STAGES) { s = 0; phase ^= 1u; }\n                }\n            }\n",
"        } else if (FP8B && t >= 32 && t < 32 + 32 * LWO_WG_FP8_WARPS) {   /* converters: every position in order */\n            lwo_u32 p = 0;\n            for (lwo_u64 item = 0; item < sch.n; item++) {\n                const lwo_wg_item w = lwo_wg_sched_item<SPLIT>(sch, item);\n                for (lwo_u32 kt = w.k0; kt < w.k1; kt++, p++)\n                    lwo_wg_fp8_position<FP8B, BN, BK, CM>(p, STAGES, staging, base + A_BYTES, STAGE_BYTES, landed, drained, full,\n                                                          CONV_THREADS - 96 + t - 32, CONV_THREADS, b_fp8, rank);\n            }\n        }\n    } else { /* consumer warpgroup wg: rows [wg * 64, wg * 64 + 64) of each tile, or every row of every CWG-th */\n        /* the registers a consumer thread may have once the producer gives up its own (64 K a block) */\n        if (CWG == 2) asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\");\n        if (CWG == 3) asm volatile(\"setmaxnreg.inc.sync.aligned.u32 152;\");\n        const int warp = t >> 5, lane = t & 31, g = lane >> 2, q = lane & 3;\n        const int has = (sa ? LWO_WG_SA : 0) | (sw ? LWO_WG_SW : 0) | (bias ? LWO_WG_BIAS : 0);\n        const int row0 = PP ? 0 : wg * 64;   /* the warpgroup's first row in the tile */\n        float *const col_w = (float *)(lwo_wg_smem + 16 * LWO_WG_MAX_STAGES) + wg * 2 * BN, *const col_b = col_w + BN;\n        /* it: the ring position (stages the producer filled before) of the item */\n        lwo_u64 it = 0;\n        for (lwo_u64 item = 0; item < sch.n; item++) {\n            const lwo_wg_item w = lwo_wg_sched_item<SPLIT>(sch, item);\n            if (PP && (int)(item % CWG) != wg) { it += w.k1 - w.k0; continue; }   /* the other warpgroup's */\n            lwo_u64 mt, nt;\n            lwo_wg_tile<CM, CN>(w.unit, units_m, units_n, rank, &mt, &nt);\n            const lwo_u64 n0 = nt * BN, r0 = mt * BM + row0 + warp * 16 + g;\n            /* this tile's epilogue inputs, loaded before the main loop so that it hides their latency */\n            float a[RH][2], cw[CPT], cb[CPT];\n#pragma unroll\n            for (int h = 0; h < RH; h++) {\n                a[h][0] = sa && r0 + 64 * h < M ? sa[r0 + 64 * h] : 1.0f;\n                a[h][1] = sa && r0 + 64 * h + 8 < M ? sa[r0 + 64 * h + 8] : 1.0f;\n            }\n#pragma unroll\n            for (int i = 0; i < CPT; i++) {\n                const lwo_u64 n = n0 + t + 128 * i;\n                const bool in = t + 128 * i < BN && n < N;\n                cw[i] = sw && in ? sw[FP8B ? 0 : n] : 1.0f;   /* an fp8 weight's one scale */\n                cb[i] = bias && in ? lwo_gemm_bias(bias, bias_kind, n) : -0.0f;\n            }\n            Acc d[RH][NACC];\n#pragma unroll\n            for (int h = 0; h < RH; h++)\n#pragma unroll\n                for (int i = 0; i < NACC; i++) d[h][i] = 0;\n            int s = (int)(it % STAGES), prev = -1;\n            lwo_u32 phase = (lwo_u32)(it / STAGES) & 1u;\n",
"            /* Ping-pong: this main loop starts once the other warpgroup's has issued its last MMAs.\n               Besides keeping the two apart, this is what makes the parity waits below sound: the\n               stages' earlier fills have all landed, so none is mistaken for this tile's. */\n            if (PP && item > 0) lwo_wg_turn_wait(wg);\n            for (lwo_u32 kt = w.k0; kt < w.k1; kt++) {\n                const lwo_u32 sA = base + s * STAGE_BYTES, pos = (lwo_u32)(it + (kt - w.k0));\n                const lwo_u64 da = lwo_wg_desc<BK>(sA + row0 * BK), db = lwo_wg_desc<BK>(sA + A_BYTES);\n                if (FP8B && !PP && pos == 0)   /* the first position: nobody converted it ahead */\n                    lwo_wg_fp8_position<FP8B, BN, BK, CM>(0, STAGES, staging, base + A_BYTES, STAGE_BYTES, landed, drained, full,\n                                                          128 * wg + t, CONV_THREADS, b_fp8, rank);\n                lwo_mbar_wait(full + 8 * s, phase);\n#pragma unroll\n                for (int h = 0; h < RH; h++) lwo_wg_pin<NACC>(d[h]);\n                asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n#pragma unroll\n                for (int k = 0; k < BK / 32; k++)\n#pragma unroll\n                    for (int h = 0; h < RH; h++) Op::mma(d[h], da + 4 * BK * h + 2 * k, db + 2 * k, lwo_wg_n<BN>());\n                asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n#pragma unroll\n                for (int h = 0; h < RH; h++) lwo_wg_pin<NACC>(d[h]);\n                /* the next position's share of B while these MMAs run: its stage was last read two\n                   positions before this one at the latest (STAGES >= 3), whose MMAs are done */\n                if (FP8B && !PP && (kt + 1 < w.k1 || item + 1 < sch.n))\n                    lwo_wg_fp8_position<FP8B, BN, BK, CM>(pos + 1, STAGES, staging, base + A_BYTES, STAGE_BYTES, landed, drained, full,\n                                                          128 * wg + t, CONV_THREADS, b_fp8, rank);\n                /* The previous stage's MMAs are done once at most this one's group is pending. */\n                asm volatile(\"wgmma.wait_group.sync.aligned 1;\" ::: \"memory\");\n#pragma unroll\n                for (int h = 0; h < RH; h++) lwo_wg_pin<NACC>(d[h]);\n                if (prev >= 0) lwo_wg_release<CM, CN>(empty + 8 * prev, t, rank);\n                prev = s;\n                if (++s == STAGES) { s = 0; phase ^= 1u; }\n            }\n            if (PP && item + 1 < sch.n) lwo_wg_turn_pass(wg, CWG);\n            asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n#pragma unroll\n            for (int h = 0; h < RH; h++) lwo_wg_pin<NACC>(d[h]);\n            if (prev >= 0) lwo_wg_release<CM, CN>(empty + 8 * prev, t, rank);\n            it += w.k1 - w.k0;\n\n            if (SPLIT && (w.k0 != 0 || w.k1 != ktiles)) {   /* a split unit */\n",
"                /* the split area: a counter per tail tile and warpgroup, then a slot per CTA */\n                unsigned int *const cnt = (unsigned int *)split + ((w.unit - sk_first) * CL + rank) * (PP ? 1 : CWG) + (PP ? 0 : wg);\n                int4 *const slots = (int4 *)((lwo_u8 *)split + (16u * gridDim.x + 255u) / 256u * 256u);\n                const int threads = PP ? 128 : 128 * CWG, T = PP ? t : 128 * wg + t;\n                if (w.k0 != 0) {   /* a helper: its sums go to this CTA's slot, and the adder is told */\n#pragma unroll\n                    for (int h = 0; h < RH; h++)\n                        lwo_wg_part_store<NACC>(slots + (lwo_u64)blockIdx.x * (BM * BN / 4) + h * (NACC / 4) * threads, threads, T, d[h]);\n                    lwo_wg_bar(wg);\n                    if (t == 0) lwo_wg_count_up(cnt);\n                    continue;\n                }\n                /* slice 0: the unit's adder, its last item; the helpers ran theirs as their first */\n                const lwo_u64 helpers = lwo_wg_sched_helpers(sch, w.unit - sk_first);\n                if (t == 0) lwo_wg_count_wait(cnt, (unsigned int)helpers);\n                lwo_wg_bar(wg);\n                for (lwo_u64 c = sch.c + 1; c <= sch.c + helpers; c++)\n#pragma unroll\n                    for (int h = 0; h < RH; h++)\n                        lwo_wg_part_add<NACC>(slots + (c * CL + rank) * (BM * BN / 4) + h * (NACC / 4) * threads, threads, T, d[h]);\n            }\n\n            /* The column tables: written once every warp of this warpgroup has left the previous\n               tile's epilogue, read once all of them are written. */\n            lwo_wg_bar(wg);\n#pragma unroll\n            for (int i = 0; i < CPT; i++)\n                if (t + 128 * i < BN) { col_w[t + 128 * i] = cw[i]; col_b[t + 128 * i] = cb[i]; }\n            lwo_wg_bar(wg);\n            /* Accumulator j * 4 + e of half h: row 64 h + warp * 16 + g + 8 * (e >> 1), column\n               j * 8 + 2 * q + (e & 1). */\n            if (ytma) {   /* 16-bit y through shared memory and the copy engine, which clips the edges */\n                const lwo_u32 buf = epi + wg * (64 * EPI_BN * 2);\n#pragma unroll\n                for (int h = 0; h < RH; h++)\n#pragma unroll\n                    for (int c = 0; c < BN / EPI_BN; c++) {   /* columns [c EPI_BN, (c + 1) EPI_BN) of the tile */\n                        lwo_u32 p[EPI_BN / 4];\n                        const int o = c * EPI_BN;\n                        if (out_kind == 1) lwo_wg_epi_pack<1, EPI_BN / 2>(d[h] + o / 2, p, a[h][0], a[h][1], col_w + o + 2 * q, col_b + o + 2 * q);\n                        else lwo_wg_epi_pack<2, EPI_BN / 2>(d[h] + o / 2, p, a[h][0], a[h][1], col_w + o + 2 * q, col_b + o + 2 * q);\n                        if (t == 0) lwo_tma_store_wait_read();   /* the buffer's last stores have read it */\n                        lwo_wg_bar(wg);\n                        lwo_wg_epi_stmatrix(p, buf, warp, lane);\n",
"                        lwo_fence_proxy_async();\n                        lwo_wg_bar(wg);\n                        if (t == 0) {\n#pragma unroll\n                            for (int b = 0; b < EPI_BN / 64; b++)\n                                lwo_tma_store_2d(tmY, buf + b * 8192, (int)((n0 + o + 64 * b) * 2), (int)(mt * BM + row0 + 64 * h));\n                            lwo_tma_store_commit();\n                        }\n                    }\n            } else if ((mt + 1) * BM <= M && n0 + BN <= N && (N & 1) == 0) {\n                if (out_kind == 0) lwo_wg_epi_tile<0>(d, y, N, r0, n0 + 2 * q, a, col_w + 2 * q, col_b + 2 * q);\n                else if (out_kind == 1) lwo_wg_epi_tile<1>(d, y, N, r0, n0 + 2 * q, a, col_w + 2 * q, col_b + 2 * q);\n                else lwo_wg_epi_tile<2>(d, y, N, r0, n0 + 2 * q, a, col_w + 2 * q, col_b + 2 * q);\n            } else {\n#pragma unroll\n                for (int h = 0; h < RH; h++)\n                    lwo_wg_epi_cols<0, BN / 8>::run(d[h], M, N, r0 + 64 * h, n0 + 2 * q, 2 * q, a[h][0], a[h][1], col_w,\n                                                    col_b, has, y, out_kind);\n            }\n        }\n        if (ytma && t == 0) lwo_tma_store_wait();   /* the buffer stays until the copy engine is done with it */\n    }\n    /* A CTA leaves only once no other can still copy into it or arrive on its barriers. */\n    if (CL > 1) lwo_cluster_sync();\n#endif\n}\n\n#define LWO_GEMM_WG_ARGS const __grid_constant__ lwo_tmap tmA, const __grid_constant__ lwo_tmap tmB, lwo_u64 M, lwo_u64 N, \\\n    lwo_u64 ktiles, const float *sa, const float *sw, const void *bias, int bias_kind, void *y, int out_kind,  \\\n    lwo_u64 sk_first, void *split, const __grid_constant__ lwo_tmap tmY, int ytma, int b_fp8\n#define LWO_GEMM_WG_PASS &tmA, &tmB, M, N, ktiles, sa, sw, bias, bias_kind, y, out_kind, sk_first, split, &tmY, ytma, b_fp8\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n#define LWO_WG_CLUSTER(n) __cluster_dims__(n, 1, 1)\n#else\n#define LWO_WG_CLUSTER(n) /* no clusters before sm_90, where these kernels are empty */\n#endif\n/* Tiles (BM x BN): _wg256 128 x 256, _wg128 128 x 128, _wg64 64 x 128, _wgpp 128 x 128 ping-pong,\n   _wgpp2 the same in clusters of 2 x 1 CTAs (B shared), _wg256c2 the 128 x 256 tile in clusters of\n   2 x 1, _wg192c2 192 x 192 (three consumer warpgroups) in clusters of 2 x 1; the host picks by the tile counts (lwo__gemm_wg_tile in lwo.h). The body takes any CM x CN\n   cluster; 2 x 2 (A shared too) measured slower than 2 x 1 at every benchmark shape (H200). */\n#define LWO_GEMM_WG_KERNELS(name, op, fp8)                                                                   \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) lwo_k_gemm_##name##_wg256(LWO_GEMM_WG_ARGS) {   \\\n        lwo_gemm_wg_body<op, 256, 2, 0, 1, 1, 128, fp8>(LWO_GEMM_WG_PASS);                                   \\\n",
"    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) lwo_k_gemm_##name##_wg128(LWO_GEMM_WG_ARGS) {   \\\n        lwo_gemm_wg_body<op, 128, 2, 0, 1, 1, 128, fp8>(LWO_GEMM_WG_PASS);                                   \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(256, 1) lwo_k_gemm_##name##_wg64(LWO_GEMM_WG_ARGS) {    \\\n        lwo_gemm_wg_body<op, 128, 1, 0, 1, 1, 128, fp8>(LWO_GEMM_WG_PASS);                                   \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) lwo_k_gemm_##name##_wgpp(LWO_GEMM_WG_ARGS) {    \\\n        lwo_gemm_wg_body<op, 128, 2, 1, 1, 1, 128, fp8>(LWO_GEMM_WG_PASS);                                   \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) LWO_WG_CLUSTER(2)                                \\\n    lwo_k_gemm_##name##_wgpp2(LWO_GEMM_WG_ARGS) {                                                         \\\n        lwo_gemm_wg_body<op, 128, 2, 1, 2, 1, 128, fp8>(LWO_GEMM_WG_PASS);                                   \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) LWO_WG_CLUSTER(2)                                \\\n    lwo_k_gemm_##name##_wg256c2(LWO_GEMM_WG_ARGS) {                                                       \\\n        lwo_gemm_wg_body<op, 256, 2, 0, 2, 1, 64, fp8>(LWO_GEMM_WG_PASS);                               \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(512, 1) LWO_WG_CLUSTER(2)                                \\\n    lwo_k_gemm_##name##_wg192c2(LWO_GEMM_WG_ARGS) {                                                       \\\n        lwo_gemm_wg_body<op, 192, 3, 0, 2, 1, 128, fp8>(LWO_GEMM_WG_PASS);                               \\\n    }\n\n/* ---- Hopper GEMM with fp8 upcast weights as wgmma's register operand (sm_90a) --------------- */\n/* y^T = W x^T for an upcast-format weight (e4m3 or e5m2 codes, one scale): W is the A operand, from\n   registers, so its codes are converted where the MMAs take them and never written back as 16 bits\n   (lwo_gemm_wg_body<..., FP8B> writes the converted tile to shared memory, which costs it the\n   bandwidth the MMAs need). A block: CW consumer warpgroups and a producer; a tile is 64 CW\n   channels (64 a consumer) x BT tokens. A stage is 64 of K: W's codes, 64 CW rows x 64 bytes by\n",
"   the copy engine in its 64-byte swizzle (16-byte chunk c of row r at c ^ ((r / 2) % 4)), and x, BT\n   rows x 128 bytes in the 128-byte swizzle, as the 16-bit GEMM's B. Each consumer thread holds the\n   m64k16 A fragment per warp (rows 16 warp + g and + 8, k 2q, 2q + 1 and 2q + 8, 2q + 9 of each\n   k16 step): two 4-byte loads a row and step, prmt to put each pair in the high bytes, then\n   lwo_fp8x2_to_16x2. wgmma reads its register operands asynchronously, so a stage's fragments\n   (16 registers) stay untouched until `wgmma.wait_group` has retired the MMAs that read them: two\n   sets alternate, and the next stage's are converted while this one's MMAs run. Epilogue: d * scale\n   + bias[channel], packed to y's 16 bits (out_kind 1 f16, 2 bf16), written transposed by stmatrix.trans (tokens become 128-byte\n   rows of the warpgroup's 64 channels, chunk c of row t at c ^ (t % 8)) and stored by the copy\n   engine in 64 x 64 boxes through tmY, which clips at M and N. Shared memory: the stages' barriers,\n   then (from 1024) an 8 KiB output buffer per consumer, then as many stages as fit. No split tail. */\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n/* wgmma m64nNk16 with A from registers (a[0..3]) and B by descriptor db; REGS and OUTS name the\n   N / 2 accumulators and the outputs (...) bound to them, A, DB and P the operand numbers after them. */\n#define LWO_WGU_ASM(N, T, REGS, A, DB, P, ...)                                                             \\\n    asm volatile(\"{ .reg .pred p; setp.ne.b32 p, \" P \", 0; wgmma.mma_async.sync.aligned.m64n\" #N \"k16.f32.\" T \".\" T \\\n                 \" {\" REGS \"}, {\" A \"}, \" DB \", p, 1, 1, 0; }\"                                               \\\n                 : __VA_ARGS__ : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(1))\n#define LWO_WGU_MMA(N, REGS, A, DB, P, ...)                                                                \\\n    template <int F16>                                                                                    \\\n    __device__ __forceinline__ void lwo_wgu_mma(float *d, const lwo_u32 *a, lwo_u64 db, lwo_wg_n<N>) {   \\\n        if (F16) LWO_WGU_ASM(N, \"f16\", REGS, A, DB, P, __VA_ARGS__);                                      \\\n        else LWO_WGU_ASM(N, \"bf16\", REGS, A, DB, P, __VA_ARGS__);                                         \\\n    }\nLWO_WGU_MMA(256, LWO_WG_REGS128, \"%128, %129, %130, %131\", \"%132\", \"%133\", LWO_WG_OUT64(\"+f\", d, 0), LWO_WG_OUT64(\"+f\", d, 64))\nLWO_WGU_MMA(192, LWO_WG_REGS96, \"%96, %97, %98, %99\", \"%100\", \"%101\", LWO_WG_OUT64(\"+f\", d, 0), LWO_WG_OUT32(\"+f\", d, 64))\nLWO_WGU_MMA(128, LWO_WG_REGS64, \"%64, %65, %66, %67\", \"%68\", \"%69\", LWO_WG_OUT64(\"+f\", d, 0))\n/* Keeps a fragment set's registers as they are up to this point (the MMAs that read them have\n   retired by then): the compiler may not reuse them earlier. */\n",
"__device__ __forceinline__ void lwo_wgu_pin(lwo_u32 (&f)[4][4]) {\n#pragma unroll\n    for (int k = 0; k < 4; k++)\n#pragma unroll\n        for (int i = 0; i < 4; i++) asm volatile(\"\" : \"+r\"(f[k][i]) :: \"memory\");\n}\n/* One stage's fragments: rows r and r + 8 of the W tile at sW, the four k16 steps. sel: the prmt\n   selector of this thread's pair within its word (q even: bytes 0, 1; odd: bytes 2, 3). */\ntemplate <int F16>\n__device__ __forceinline__ void lwo_wgu_frags(lwo_u32 (&f)[4][4], lwo_u32 sW, int r, int q, lwo_u32 sel, int shift, lwo_u32 mul) {\n#pragma unroll\n    for (int h = 0; h < 2; h++) {\n        const int row = r + 8 * h, sw = (row >> 1) & 3;\n#pragma unroll\n        for (int kk = 0; kk < 4; kk++) {\n            const lwo_u32 at = sW + (lwo_u32)row * 64u + (lwo_u32)((kk ^ sw) << 4) + 4u * (lwo_u32)(q >> 1);\n            lwo_u32 lo, hi;\n            asm volatile(\"ld.shared.u32 %0, [%1];\" : \"=r\"(lo) : \"r\"(at));\n            asm volatile(\"ld.shared.u32 %0, [%1];\" : \"=r\"(hi) : \"r\"(at + 8u));\n            asm(\"prmt.b32 %0, %1, 0, %2;\" : \"=r\"(lo) : \"r\"(lo), \"r\"(sel));\n            asm(\"prmt.b32 %0, %1, 0, %2;\" : \"=r\"(hi) : \"r\"(hi), \"r\"(sel));\n            f[kk][h] = lwo_fp8x2_to_16x2<F16>(lo, shift, mul);       /* a0 (row g) / a1 (row g + 8): k 2q, 2q + 1 */\n            f[kk][2 + h] = lwo_fp8x2_to_16x2<F16>(hi, shift, mul);   /* a2 / a3: k 2q + 8, 2q + 9 */\n        }\n    }\n}\n#endif\n\n/* One stage: its fragments into `cur`, its MMAs issued, then the wait that retires the stage before\n   it, after which `other` (that stage's fragments) may be rewritten. */\ntemplate <int F16, int BT>\n__device__ __forceinline__ void lwo_wgu_stage(float *d, lwo_u32 (&cur)[4][4], lwo_u32 (&other)[4][4], lwo_u32 sW, lwo_u64 db, int r,\n                                              int q, lwo_u32 sel, int shift, lwo_u32 mul) {\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n    lwo_wgu_frags<F16>(cur, sW, r, q, sel, shift, mul);\n    lwo_wg_pin<BT / 2>(d);\n    asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n#pragma unroll\n    for (int kk = 0; kk < 4; kk++) lwo_wgu_mma<F16>(d, cur[kk], db + 2 * kk, lwo_wg_n<BT>());\n    asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n    lwo_wg_pin<BT / 2>(d);\n    lwo_wgu_pin(cur);\n    asm volatile(\"wgmma.wait_group.sync.aligned 1;\" ::: \"memory\");\n    lwo_wg_pin<BT / 2>(d);\n    lwo_wgu_pin(other);\n#endif\n}\n\ntemplate <int F16, int BT, int CW>\n__device__ __forceinline__ void lwo_gemm_wgu_body(const lwo_tmap *tmW, const lwo_tmap *tmX, lwo_u64 M, lwo_u64 N, lwo_u64 ktiles,\n                                                  const float *scale, const void *bias, int bias_kind, const lwo_tmap *tmY,\n                                                  int out_kind, int b_fp8) {\n#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n    enum { BM = 64 * CW, W_BYTES = BM * 64, STAGE_BYTES = W_BYTES + BT * 128, NACC = BT / 2 };\n",
"    extern __shared__ __align__(1024) lwo_u8 lwo_wg_smem[];\n    lwo_u32 dyn;\n    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(dyn));\n    const lwo_u32 raw = (lwo_u32)__cvta_generic_to_shared(lwo_wg_smem), full = raw, empty = raw + 8 * LWO_WG_MAX_STAGES;\n    const lwo_u32 epi = (empty + 8 * LWO_WG_MAX_STAGES + 1023u) & ~1023u, base = epi + CW * 8192;\n    const int fit = (int)((raw + dyn - base) / STAGE_BYTES), STAGES = fit < LWO_WG_MAX_STAGES ? fit : LWO_WG_MAX_STAGES;\n    const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;\n    const lwo_u64 units_m = (N + BM - 1) / BM, units_n = (M + BT - 1) / BT, units = units_m * units_n;\n    const lwo_wg_sched sch = lwo_wg_sched_make(blockIdx.x, gridDim.x, units, units, ktiles);\n    if (threadIdx.x == 0) {\n        for (int s = 0; s < STAGES; s++) { lwo_mbar_init(full + 8 * s, 1); lwo_mbar_init(empty + 8 * s, CW); }\n        asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n    }\n    __syncthreads();\n    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n    if (wg == CW) {   /* producer; with three consumers it gives up all it can, so they have 160 */\n        if (CW == 2) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\");\n        if (CW == 3) asm volatile(\"setmaxnreg.dec.sync.aligned.u32 24;\");\n        if (t == 0) {\n            int s = 0;\n            lwo_u32 phase = 0;\n            for (lwo_u64 item = 0; item < sch.n; item++) {\n                const lwo_wg_item w = lwo_wg_sched_item<0>(sch, item);\n                lwo_u64 mt, nt;   /* mt: the channel tile, nt: the token tile */\n                lwo_wg_tile<1, 1>(w.unit, units_m, units_n, 0, &mt, &nt);\n                for (lwo_u64 kt = w.k0; kt < w.k1; kt++) {\n                    const lwo_u32 sW = base + s * STAGE_BYTES;\n                    lwo_mbar_wait(empty + 8 * s, phase ^ 1u);\n                    lwo_mbar_expect_tx(full + 8 * s, STAGE_BYTES);\n                    lwo_tma_load_2d(sW, tmW, full + 8 * s, (int)(kt * 64), (int)(mt * BM));\n                    lwo_tma_load_2d(sW + W_BYTES, tmX, full + 8 * s, (int)(kt * 128), (int)(nt * BT));\n                    if (++s == STAGES) { s = 0; phase ^= 1u; }\n                }\n            }\n        }\n    } else {   /* consumer warpgroup wg: channels [64 wg, 64 wg + 64) of each tile */\n        if (CW == 2) asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\");\n        if (CW == 3) asm volatile(\"setmaxnreg.inc.sync.aligned.u32 160;\");\n        const int warp = t >> 5, lane = t & 31, g = lane >> 2, q = lane & 3, r = 64 * wg + 16 * warp + g;\n        const int shift = F16 ? (b_fp8 == 2 ? 0 : 1) : (b_fp8 == 2 ? 3 : 4);\n        const lwo_u32 mul = F16 ? (b_fp8 == 2 ? 0x3c003c00u : 0x5c005c00u) : (b_fp8 == 2 ? 0x77807780u : 0x7b807b80u);\n        const lwo_u32 sel = (q & 1) ? 0x3424u : 0x1404u, buf = epi + wg * 8192;\n        const float sc = *scale;\n        lwo_u32 fa[2][4][4];\n        lwo_u64 it = 0;\n",
"        for (lwo_u64 item = 0; item < sch.n; item++) {\n            const lwo_wg_item w = lwo_wg_sched_item<0>(sch, item);\n            lwo_u64 mt, nt;\n            lwo_wg_tile<1, 1>(w.unit, units_m, units_n, 0, &mt, &nt);\n            const lwo_u64 c0 = mt * BM + r;   /* this thread's channels: c0 and c0 + 8 */\n            const float b0 = bias && c0 < N ? lwo_gemm_bias(bias, bias_kind, c0) : 0.0f;\n            const float b1 = bias && c0 + 8 < N ? lwo_gemm_bias(bias, bias_kind, c0 + 8) : 0.0f;\n            float d[NACC];\n#pragma unroll\n            for (int i = 0; i < NACC; i++) d[i] = 0.0f;\n            int s = (int)(it % STAGES), prev = -1;\n            lwo_u32 phase = (lwo_u32)(it / STAGES) & 1u;\n            for (lwo_u64 kt = w.k0; kt < w.k1; kt++) {\n                const lwo_u32 sW = base + s * STAGE_BYTES;\n                const lwo_u64 db = lwo_wg_desc<128>(sW + W_BYTES);\n                lwo_mbar_wait(full + 8 * s, phase);\n                /* the set this stage takes was read by the MMAs two stages back, which the last\n                   wait_group 1 retired; the other one is read by the MMAs still running. Two\n                   branches, so that each set's index is a constant and it stays in registers */\n                if ((it + (kt - w.k0)) & 1) lwo_wgu_stage<F16, BT>(d, fa[1], fa[0], sW, db, r, q, sel, shift, mul);\n                else lwo_wgu_stage<F16, BT>(d, fa[0], fa[1], sW, db, r, q, sel, shift, mul);\n                if (prev >= 0 && t == 0) lwo_mbar_arrive(empty + 8 * prev);\n                prev = s;\n                if (++s == STAGES) { s = 0; phase ^= 1u; }\n            }\n            asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n            lwo_wg_pin<NACC>(d);\n            lwo_wgu_pin(fa[0]);\n            lwo_wgu_pin(fa[1]);\n            if (prev >= 0 && t == 0) lwo_mbar_arrive(empty + 8 * prev);\n            it += w.k1 - w.k0;\n            /* accumulator 4 j + e: channel r + 8 (e >> 1), token 8 j + 2q + (e & 1) */\n#pragma unroll\n            for (int c = 0; c < BT / 64; c++) {   /* tokens [64 c, 64 c + 64) of the tile */\n                lwo_u32 p[16];\n#pragma unroll\n                for (int jj = 0; jj < 8; jj++) {\n                    const int j = 8 * c + jj;\n                    p[2 * jj] = out_kind == 1 ? lwo_wg_pack2<1>(d[4 * j] * sc + b0, d[4 * j + 1] * sc + b0)\n                                              : lwo_wg_pack2<2>(d[4 * j] * sc + b0, d[4 * j + 1] * sc + b0);\n                    p[2 * jj + 1] = out_kind == 1 ? lwo_wg_pack2<1>(d[4 * j + 2] * sc + b1, d[4 * j + 3] * sc + b1)\n                                                  : lwo_wg_pack2<2>(d[4 * j + 2] * sc + b1, d[4 * j + 3] * sc + b1);\n                }\n                if (t == 0) lwo_tma_store_wait_read();   /* the buffer's last store has read it */\n                lwo_wg_bar(wg);\n                {\n                    const int mi = lane >> 3, ri = lane & 7;   /* the matrix and row this lane addresses */\n",
"#pragma unroll\n                    for (int jj = 0; jj < 8; jj += 2) {\n                        const int tok = 8 * (jj + (mi >> 1)) + ri, chunk = 2 * warp + (mi & 1);\n                        const lwo_u32 at = buf + (lwo_u32)tok * 128u + (lwo_u32)((chunk ^ (tok & 7)) << 4);\n                        asm volatile(\"stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\"\n                                     :: \"r\"(at), \"r\"(p[2 * jj]), \"r\"(p[2 * jj + 1]), \"r\"(p[2 * jj + 2]), \"r\"(p[2 * jj + 3]) : \"memory\");\n                    }\n                }\n                lwo_fence_proxy_async();\n                lwo_wg_bar(wg);\n                if (t == 0) {\n                    lwo_tma_store_2d(tmY, buf, (int)((mt * BM + 64 * wg) * 2), (int)(nt * BT + 64 * c));\n                    lwo_tma_store_commit();\n                }\n            }\n        }\n        if (t == 0) lwo_tma_store_wait();\n    }\n#endif\n}\n#define LWO_GEMM_WGU_ARGS const __grid_constant__ lwo_tmap tmW, const __grid_constant__ lwo_tmap tmX, lwo_u64 M, lwo_u64 N, \\\n    lwo_u64 ktiles, const float *scale, const void *bias, int bias_kind, const __grid_constant__ lwo_tmap tmY, int out_kind, int b_fp8\n#define LWO_GEMM_WGU_PASS &tmW, &tmX, M, N, ktiles, scale, bias, bias_kind, &tmY, out_kind, b_fp8\n/* _wgu256: 128 channels x 256 tokens; _wgu128: x 128 tokens (fewer rows of x); _wgu192: 192 x 192,\n   three consumer warpgroups (fuller last rounds where 128 x 256 tiles leave many idle). */\n#define LWO_GEMM_WGU_KERNELS(name, f16)                                                                   \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) lwo_k_gemm_##name##_wgu256(LWO_GEMM_WGU_ARGS) {  \\\n        lwo_gemm_wgu_body<f16, 256, 2>(LWO_GEMM_WGU_PASS);                                                  \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(384, 1) lwo_k_gemm_##name##_wgu128(LWO_GEMM_WGU_ARGS) {  \\\n        lwo_gemm_wgu_body<f16, 128, 2>(LWO_GEMM_WGU_PASS);                                                  \\\n    }                                                                                                     \\\n    extern \"C\" __global__ void __launch_bounds__(512, 1) lwo_k_gemm_##name##_wgu192(LWO_GEMM_WGU_ARGS) {  \\\n        lwo_gemm_wgu_body<f16, 192, 3>(LWO_GEMM_WGU_PASS);                                                  \\\n    }\n\n/* Each tensor-core GEMM is its own module, compiled on first use with -DLWO_GEMM_VARIANT_<name>:\n   these bodies take ptxas most of the compile time, and a start should not pay for all four. */\n#if defined(LWO_GEMM_VARIANT_bf16)\nLWO_GEMM_TC_KERNELS(bf16, lwo_mma_bf16)\nLWO_GEMM_WG_KERNELS(bf16, lwo_wg_bf16, 0)\n#elif defined(LWO_GEMM_VARIANT_f16)\nLWO_GEMM_TC_KERNELS(f16, lwo_mma_f16)\nLWO_GEMM_WG_KERNELS(f16, lwo_wg_f16, 0)\n#elif defined(LWO_GEMM_VARIANT_s8)\n",
"LWO_GEMM_TC_KERNELS(s8, lwo_mma_s8)\nLWO_GEMM_WG_KERNELS(s8, lwo_wg_s8, 0)\n#elif defined(LWO_GEMM_VARIANT_e4m3)\nLWO_GEMM_TC_KERNELS(e4m3, lwo_mma_e4m3)\nLWO_GEMM_WG_KERNELS(e4m3, lwo_wg_e4m3, 0)\n#elif defined(LWO_GEMM_VARIANT_bf16_fp8)   /* fp8 upcast weights, bf16 x: only the Hopper kernels */\nLWO_GEMM_WG_KERNELS(bf16_fp8, lwo_wg_bf16, 1)\nLWO_GEMM_WGU_KERNELS(bf16_fp8, 0)\n#elif defined(LWO_GEMM_VARIANT_f16_fp8)\nLWO_GEMM_WG_KERNELS(f16_fp8, lwo_wg_f16, 2)\nLWO_GEMM_WGU_KERNELS(f16_fp8, 1)\n#endif\n\n/* The simple GEMM: correctness only, for sm_75 (no bf16/s8 mma.sync of the sm_80 forms there) and\n   as a fallback. 16x16 threads, one output each, K in shared-memory tiles of 16 elements.\n   Grid (ceil(N/16), ceil(M/16)). Any M, N, K: loads past an edge read 0. A [M, K] row stride lda,\n   B [N, K] row stride ldb (elements). Operand kinds: 0 f32, 1 f16, 2 bf16, 3 i8, 4 e4m3.\n   i8 x i8 accumulates exactly in s32; every other pair in f32, k ascending. */\n__device__ __forceinline__ float lwo_gemm_ld(const lwo_u8 *p, int kind, lwo_u64 i) {\n    switch (kind) {\n    case 0: return ((const float *)p)[i];\n    case 1: return lwo_f16_to_f32(((const lwo_u16 *)p)[i]);\n    case 2: return lwo_bf16_to_f32(((const lwo_u16 *)p)[i]);\n    case 3: return (float)((const signed char *)p)[i];\n    default: return lwo_e4m3_to_f32(p[i]);\n    }\n}\nextern \"C\" __global__ void __launch_bounds__(256)\nlwo_k_gemm_simple(const lwo_u8 *A, int a_kind, lwo_u64 lda, const lwo_u8 *B, int b_kind, lwo_u64 ldb,\n                  lwo_u64 M, lwo_u64 N, lwo_u64 K, const float *sa, const float *sw, const void *bias,\n                  int bias_kind, void *y, int out_kind) {\n    __shared__ float As[16][17], Bs[16][17];\n    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;\n    const lwo_u64 m = (lwo_u64)blockIdx.y * 16 + ty, n = (lwo_u64)blockIdx.x * 16 + tx;\n    const lwo_u64 bn = (lwo_u64)blockIdx.x * 16;\n    const int exact = a_kind == 3 && b_kind == 3;\n    float accf = 0.0f;\n    int acci = 0;\n    for (lwo_u64 k0 = 0; k0 < K; k0 += 16) {\n        As[ty][tx] = (m < M && k0 + tx < K) ? lwo_gemm_ld(A, a_kind, m * lda + k0 + tx) : 0.0f;\n        Bs[ty][tx] = (bn + ty < N && k0 + tx < K) ? lwo_gemm_ld(B, b_kind, (bn + ty) * ldb + k0 + tx) : 0.0f;\n        __syncthreads();\n#pragma unroll\n        for (int k = 0; k < 16; k++) {\n            if (exact) acci += (int)As[ty][k] * (int)Bs[tx][k];\n            else accf = accf + As[ty][k] * Bs[tx][k];\n        }\n        __syncthreads();\n    }\n    if (m < M && n < N)\n        lwo_gemm_store(y, out_kind, m * N + n, lwo_gemm_epi(exact ? (float)acci : accf, sa, sw, bias, bias_kind, m, n));\n}\n\n/* ---- GEMM operand preparation ---- */\n/* dst[r, k] = src[r, k] * (smooth ? smooth[k] : 1) for k < K, 0 for K <= k < Kd: weights (the\n   smoothing factor folded into the columns, K padded) and activations that need padding.\n   Grid-stride over rows * Kd elements. */\ntemplate <class S, class D>\n",
"__device__ __forceinline__ void lwo_pad_rows_body(const lwo_u8 *src, lwo_u64 rows, lwo_u64 K, const float *smooth,\n                                                  lwo_u8 *dst, lwo_u64 Kd) {\n    const lwo_u64 n = rows * Kd, stride = (lwo_u64)gridDim.x * blockDim.x;\n    for (lwo_u64 i = (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n        const lwo_u64 r = i / Kd, k = i - r * Kd;\n        float v = 0.0f;\n        if (k < K) { v = S::get(src + (r * K + k) * S::W); if (smooth) v = v * smooth[k]; }\n        D::put(dst + i * D::W, v);\n    }\n}\n#define LWO_PAD_KERNEL(sn, dn)                                                                           \\\n    extern \"C\" __global__ void lwo_k_pad_rows_##sn##_##dn(const lwo_u8 *src, lwo_u64 rows, lwo_u64 K,     \\\n                                                          const float *smooth, lwo_u8 *dst, lwo_u64 Kd) { \\\n        lwo_pad_rows_body<lwo_t_##sn, lwo_t_##dn>(src, rows, K, smooth, dst, Kd);                        \\\n    }\nLWO_PAD_KERNEL(f32, f32) LWO_PAD_KERNEL(f16, f32) LWO_PAD_KERNEL(bf16, f32)\nLWO_PAD_KERNEL(f32, f16) LWO_PAD_KERNEL(f16, f16) LWO_PAD_KERNEL(bf16, f16)\nLWO_PAD_KERNEL(f32, bf16) LWO_PAD_KERNEL(f16, bf16) LWO_PAD_KERNEL(bf16, bf16)\n\n/* Byte rows: dst[r, k] = src[r, k] for k < K, 0 past it (already-quantized i8 / fp8 weights). */\nextern \"C\" __global__ void lwo_k_pad_rows_u8(const lwo_u8 *src, lwo_u64 rows, lwo_u64 K, lwo_u8 *dst, lwo_u64 Kd) {\n    const lwo_u64 n = rows * Kd, stride = (lwo_u64)gridDim.x * blockDim.x;\n    for (lwo_u64 i = (lwo_u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n        const lwo_u64 r = i / Kd, k = i - r * Kd;\n        dst[i] = k < K ? src[r * K + k] : (lwo_u8)0;\n    }\n}\n",
};
/* LWO_EMBED_END */

typedef struct lwo__kfunc { const char *name; lwo__CUfunction fn; } lwo__kfunc;
struct lwo_module {
    uint32_t magic;
    lwo_context *ctx;
    lwo__CUmodule mod;
    lwo__kfunc *funcs; /* looked-up kernels, names owned */
    size_t nfuncs, capfuncs;
    int from_cache;
    lwo_module *next;
};

/* The target lwo compiles for: the device's exact arch, with the "a" variant on Hopper so the
   arch-specific instructions (wgmma, setmaxnreg) are available. */
static void lwo__arch_name(int major, int minor, char *out, size_t cap) {
    snprintf(out, cap, "sm_%d%d%s", major, minor, (major == 9 && minor == 0) ? "a" : "");
}

/* Cache files: "<dir>/lwo-<key of source, arch, options>-nvrtc<version>.cubin", each a header
   {magic, format, payload size, payload hash} then the cubin. The NVRTC version is part of the name
   rather than of the lookup, so a warm start finds its cubin without loading NVRTC at all. */
typedef struct lwo__cache_header { char magic[8]; uint32_t format, reserved; uint64_t size, hash; } lwo__cache_header;
#define LWO__CACHE_FORMAT 1u

static uint64_t lwo__module_key(const char *const *parts, size_t nparts, const char *arch, const char *const *opts) {
    uint64_t h = LWO__FNV_SEED;
    size_t i;
    for (i = 0; i < nparts; i++) h = lwo__fnv1a(h, parts[i], strlen(parts[i]));
    h = lwo__fnv1a(h, "\0", 1);
    h = lwo__fnv1a(h, arch, strlen(arch));
    while (opts && *opts) { h = lwo__fnv1a(h, "\0", 1); h = lwo__fnv1a(h, *opts, strlen(*opts)); opts++; }
    return h;
}

/* Returns 1 and the payload when the file is whole and its checksum matches; else 0. */
static int lwo__cache_validate(const unsigned char *data, size_t size, const unsigned char **payload, size_t *psize) {
    lwo__cache_header h;
    if (size < sizeof h) return 0;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, "LWOCUBIN", 8) != 0 || h.format != LWO__CACHE_FORMAT) return 0;
    if (h.size == 0 || h.size != size - sizeof h) return 0;
    if (lwo__fnv1a(LWO__FNV_SEED, data + sizeof h, (size_t)h.size) != h.hash) return 0;
    *payload = data + sizeof h;
    *psize = (size_t)h.size;
    return 1;
}

static int lwo__cache_lookup(lwo_context *ctx, uint64_t key, unsigned char **file, const unsigned char **cubin, size_t *csize) {
    char prefix[64];
    lwo__dir d;
    const char *name;
    int found = 0;
    if (!ctx->cache_dir) return 0;
    snprintf(prefix, sizeof prefix, "lwo-%016llx-", (unsigned long long)key);
    if (!lwo__dir_open(&d, ctx->cache_dir)) return 0;
    while (!found && (name = lwo__dir_next(&d)) != NULL) {
        char path[4096];
        size_t n = strlen(name);
        unsigned char *data;
        size_t size;
        if (strncmp(name, prefix, strlen(prefix)) != 0 || n < 6 || strcmp(name + n - 6, ".cubin") != 0) continue;
        if ((size_t)snprintf(path, sizeof path, "%s" LWO__SEP "%s", ctx->cache_dir, name) >= sizeof path) continue;
        if (!lwo__read_file(path, &data, &size)) continue;
        if (lwo__cache_validate(data, size, cubin, csize)) { *file = data; found = 1; }
        else {
            lwo__log(ctx, LWO_LOG_WARN, "cache file %s is truncated or corrupt; recompiling", path);
            LWO_FREE(data);
            lwo__remove_file(path);
        }
    }
    lwo__dir_close(&d);
    return found;
}

static void lwo__cache_store(lwo_context *ctx, uint64_t key, const unsigned char *cubin, size_t size) {
    char path[4096];
    lwo__cache_header h;
    if (!ctx->cache_dir) return;
    if (!lwo__mkdir_p(ctx->cache_dir)) { lwo__log(ctx, LWO_LOG_WARN, "cannot create cache folder %s", ctx->cache_dir); return; }
    memcpy(h.magic, "LWOCUBIN", 8);
    h.format = LWO__CACHE_FORMAT;
    h.reserved = 0;
    h.size = size;
    h.hash = lwo__fnv1a(LWO__FNV_SEED, cubin, size);
    snprintf(path, sizeof path, "%s" LWO__SEP "lwo-%016llx-nvrtc%d.cubin", ctx->cache_dir, (unsigned long long)key, ctx->nvrtc.version);
    if (!lwo__write_file_atomic(path, &h, sizeof h, cubin, size))
        lwo__log(ctx, LWO_LOG_WARN, "cannot write cache file %s", path);
}

/* One module to build (lwo__modules_build): the concatenation of `parts`, compiled as `name` with
   `opts`, into *out. The rest is the build's own: what a compile thread reads and writes. */
typedef struct lwo__module_job {
    const char *const *parts;
    size_t nparts;
    const char *name;
    const char *const *opts;
    lwo_module **out;
    lwo_result r;               /* out: this module's result (its message in err) */
    const lwo__nvrtc *nvrtc;
    const char *arch;
    char *src;
    unsigned char *cubin;
    size_t size;
    volatile int done;          /* set last by the compile: the only field read while it runs */
    char err[LWO__ERROR_CAP];
} lwo__module_job;

static void lwo__module_job_compile(void *p) {
    lwo__module_job *j = (lwo__module_job *)p;
    j->r = lwo__nvrtc_compile(j->nvrtc, j->src, j->name, j->arch, j->opts, &j->cubin, &j->size, j->err, sizeof j->err);
    j->done = 1;
}

/* The cubin handed to the driver as a module of the context. */
static lwo_result lwo__module_load(lwo_context *ctx, const unsigned char *cubin, int from_cache, lwo_module **out) {
    lwo__CUresult rc;
    lwo_module *m = (lwo_module *)LWO_MALLOC(sizeof *m);
    if (!m) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(m, 0, sizeof *m);
    rc = ctx->cu.cuModuleLoadData(&m->mod, cubin);
    if (rc) { LWO_FREE(m); return lwo__cuda_fail(ctx, rc, "cuModuleLoadData"); }
    m->magic = LWO__MAGIC_MODULE;
    m->ctx = ctx;
    m->from_cache = from_cache;
    if (from_cache) ctx->stats.modules_from_cache++; else ctx->stats.modules_compiled++;
    *out = m;
    return LWO_SUCCESS;
}

/* Builds the modules of `jobs`: each from the cache where it holds the cubin, the rest compiled at
   once, a thread each (NVRTC compiles distinct programs concurrently, and each compile spreads its
   kernels over the cores too: -split-compile), so a first start waits for the slowest module rather
   than for their sum. Progress: a line before, a line as each compile ends. Every job is tried;
   each has its own result, and the call returns the first failure (its message the context's). */
static lwo_result lwo__modules_build(lwo_context *ctx, lwo__module_job *jobs, size_t n) {
    lwo__thread threads[8];
    int started[8] = { 0 }, logged[8] = { 0 };
    size_t i, k, todo = 0, ended = 0;
    char names[256] = "";
    double t0;
    LWO_ASSERT(n <= 8);
    for (i = 0; i < n; i++) {   /* the cache first: a start that finds every cubin never loads NVRTC */
        lwo__module_job *j = &jobs[i];
        unsigned char *file = NULL;
        const unsigned char *cubin = NULL;
        size_t csize = 0;
        j->r = LWO_SUCCESS; j->src = NULL; j->cubin = NULL; j->done = 0; j->err[0] = 0;
        if (!lwo__cache_lookup(ctx, lwo__module_key(j->parts, j->nparts, ctx->info.arch, j->opts), &file, &cubin, &csize)) {
            j->r = LWO_ERROR_COMPILE;   /* to compile: until its compile says otherwise */
            todo++;
            if (strlen(names) + strlen(j->name) + 3 < sizeof names)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", j->name);
            continue;
        }
        if ((j->r = lwo__module_load(ctx, cubin, 1, j->out)) != 0) snprintf(j->err, sizeof j->err, "%s", ctx->error);
        LWO_FREE(file);
    }
    if (todo && !ctx->nvrtc.lib) {
        double tl = lwo__now_ms();
        lwo_result r = lwo__nvrtc_load(&ctx->nvrtc, ctx->nvrtc_path, ctx->error, sizeof ctx->error);
        for (i = 0; r && i < n; i++)
            if (jobs[i].r == LWO_ERROR_COMPILE) { jobs[i].r = r; snprintf(jobs[i].err, sizeof jobs[i].err, "%s", ctx->error); }
        if (r) return r;
        ctx->info.nvrtc_version = ctx->nvrtc.version;
        lwo__log(ctx, LWO_LOG_INFO, "NVRTC %d from %s (%.1f ms)", ctx->nvrtc.version, ctx->nvrtc.path, lwo__now_ms() - tl);
    }
    for (i = 0; i < n; i++) {
        lwo__module_job *j = &jobs[i];
        size_t total = 0;
        if (j->r != LWO_ERROR_COMPILE) continue;
        for (k = 0; k < j->nparts; k++) total += strlen(j->parts[k]);
        if ((j->src = (char *)LWO_MALLOC(total + 1)) == NULL) {
            j->r = LWO_ERROR_OUT_OF_HOST_MEMORY;
            snprintf(j->err, sizeof j->err, "out of host memory for the source of %s", j->name);
            todo--;
            continue;
        }
        for (total = 0, k = 0; k < j->nparts; k++) { size_t len = strlen(j->parts[k]); memcpy(j->src + total, j->parts[k], len); total += len; }
        j->src[total] = 0;
        j->nvrtc = &ctx->nvrtc;
        j->arch = ctx->info.arch;
    }
    if (todo == 1) lwo__log(ctx, LWO_LOG_PROGRESS, "compiling %s for %s (the first start on this GPU; the cubin is cached) ...", names, ctx->info.arch);
    else if (todo > 1) lwo__log(ctx, LWO_LOG_PROGRESS, "compiling %u modules for %s at once (the first start on this GPU; the cubins are cached): %s ...",
                                (unsigned)todo, ctx->info.arch, names);
    t0 = lwo__now_ms();
    /* a thread per compile; one a thread is refused for runs on this one */
    for (i = 0; i < n; i++)
        if (jobs[i].src && todo > 1) started[i] = lwo__thread_start(&threads[i], lwo__module_job_compile, &jobs[i]);
    for (i = 0; i < n; i++)
        if (jobs[i].src && !started[i]) lwo__module_job_compile(&jobs[i]);
    while (ended < todo) {
        for (i = 0; i < n; i++) {
            if (!jobs[i].src || logged[i] || !jobs[i].done) continue;
            logged[i] = 1;
            ended++;
            if (todo == 1) lwo__log(ctx, LWO_LOG_PROGRESS, "compiled %s for %s in %.1f s", jobs[i].name, ctx->info.arch, (lwo__now_ms() - t0) / 1000.0);
            else lwo__log(ctx, LWO_LOG_PROGRESS, "compiled %s for %s in %.1f s (%u/%u)", jobs[i].name, ctx->info.arch, (lwo__now_ms() - t0) / 1000.0,
                          (unsigned)ended, (unsigned)todo);
        }
        if (ended < todo) lwo__sleep_ms(10);
    }
    for (i = 0; i < n; i++) {
        lwo__module_job *j = &jobs[i];
        if (started[i]) lwo__thread_join(&threads[i]);
        if (!j->src) continue;
        LWO_FREE(j->src);
        j->src = NULL;
        if (j->r == LWO_SUCCESS) {
            lwo__cache_store(ctx, lwo__module_key(j->parts, j->nparts, ctx->info.arch, j->opts), j->cubin, j->size);
            if ((j->r = lwo__module_load(ctx, j->cubin, 0, j->out)) != 0) snprintf(j->err, sizeof j->err, "%s", ctx->error);
        } else {
            lwo__log(ctx, LWO_LOG_ERROR, "%s", j->err);
        }
        LWO_FREE(j->cubin);
        j->cubin = NULL;
    }
    for (i = 0; i < n; i++)
        if (jobs[i].r) return lwo__fail(ctx, jobs[i].r, "%s", jobs[i].err);
    return LWO_SUCCESS;
}

/* Compile (or load from the cache) the concatenation of `parts` into a module of the context. */
static lwo_result lwo__module_build(lwo_context *ctx, const char *const *parts, size_t nparts, const char *name,
                                    const char *const *opts, lwo_module **out) {
    lwo__module_job j;
    memset(&j, 0, sizeof j);
    j.parts = parts; j.nparts = nparts; j.name = name; j.opts = opts; j.out = out;
    return lwo__modules_build(ctx, &j, 1);
}

static void lwo__module_free(lwo_context *ctx, lwo_module *m) {
    size_t i;
    if (m->mod && ctx->cu.cuModuleUnload) ctx->cu.cuModuleUnload(m->mod);
    for (i = 0; i < m->nfuncs; i++) LWO_FREE((void *)m->funcs[i].name);
    LWO_FREE(m->funcs);
    m->magic = 0;
    LWO_FREE(m);
}

static lwo_result lwo__module_function(lwo_context *ctx, lwo_module *m, const char *kernel, lwo__CUfunction *fn) {
    size_t i;
    lwo__CUresult rc;
    for (i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i].name, kernel) == 0) { *fn = m->funcs[i].fn; return LWO_SUCCESS; }
    rc = ctx->cu.cuModuleGetFunction(fn, m->mod, kernel);
    if (rc) return lwo__fail(ctx, LWO_ERROR_NOT_FOUND, "no kernel named '%s' in the module (is it extern \"C\" __global__?)", kernel);
    {
        lwo__kfunc *nf = (lwo__kfunc *)lwo__grow(m->funcs, m->nfuncs, &m->capfuncs, sizeof *nf, 16);
        if (!nf) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        m->funcs = nf;
    }
    m->funcs[m->nfuncs].name = lwo__strdup(kernel);
    if (!m->funcs[m->nfuncs].name) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->funcs[m->nfuncs++].fn = *fn;
    return LWO_SUCCESS;
}

/* Where lwo__launch_fn sends launches while lwo_linear builds or replays one of its graphs
   (section 11): CAPTURE launches into the capturing stream and notes each kernel node made; UPDATE
   launches nothing and points the graph's next node at the launch's config and arguments. */
#define LWO__LSINK_NODES 4
typedef struct lwo__lsink {
    int update;                              /* 0: capture, 1: update */
    lwo__CUgraphExec exec;                   /* update: the graph being retargeted */
    lwo__CUgraphNode nodes[LWO__LSINK_NODES];
    lwo__CUfunction funcs[LWO__LSINK_NODES]; /* an update must find the kernels the capture saw */
    int n;
} lwo__lsink;

static lwo_result lwo__launch_fn_ex(lwo_context *ctx, lwo__CUstream s, lwo__CUfunction fn, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void **args,
                                    const char *what, int dependent) {
    lwo__lsink *k = ctx->lsink;
    lwo__CUresult rc;
    if (k && k->update) {
        lwo__kernel_node_params p;
        if (k->n >= LWO__LSINK_NODES || k->funcs[k->n] != fn)
            return lwo__fail(ctx, LWO_ERROR_CUDA, "lwo_linear's graph does not have %s where this call launches it", what);
        memset(&p, 0, sizeof p);
        p.func = fn; p.gridDimX = gx; p.gridDimY = gy; p.gridDimZ = gz;
        p.blockDimX = bx; p.blockDimY = by; p.blockDimZ = bz; p.sharedMemBytes = smem; p.kernelParams = args;
        rc = ctx->cu.cuGraphExecKernelNodeSetParams(k->exec, k->nodes[k->n], &p);
        if (rc) return lwo__cuda_fail(ctx, rc, "cuGraphExecKernelNodeSetParams");
        k->n++;
        ctx->stats.kernels_launched++;
        return LWO_SUCCESS;
    }
    if (dependent) {
        /* programmatic dependent launch: the kernel may start once the one before it on the stream
           has triggered it (griddepcontrol.launch_dependents) and must itself wait
           (griddepcontrol.wait) before reading what that kernel writes */
        lwo__launch_config lc;
        lwo__launch_attr at;
        memset(&lc, 0, sizeof lc);
        memset(&at, 0, sizeof at);
        at.id = LWO__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value[0] = 1;
        lc.gridDimX = gx; lc.gridDimY = gy; lc.gridDimZ = gz; lc.blockDimX = bx; lc.blockDimY = by; lc.blockDimZ = bz;
        lc.sharedMemBytes = smem; lc.hStream = s; lc.attrs = &at; lc.numAttrs = 1;
        rc = ctx->cu.cuLaunchKernelEx(&lc, fn, args, NULL);
    } else {
        rc = ctx->cu.cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, smem, s, args, NULL);
    }
    if (rc) return lwo__cuda_fail(ctx, rc, what);
    if (k) { /* capture: the node just made is now the stream's one capture dependency */
        int status = 0;
        unsigned long long id = 0;
        lwo__CUgraph g = NULL;
        const lwo__CUgraphNode *deps = NULL;
        size_t ndeps = 0;
        rc = ctx->cu.cuStreamGetCaptureInfo(s, &status, &id, &g, &deps, &ndeps);
        if (rc) return lwo__cuda_fail(ctx, rc, "cuStreamGetCaptureInfo");
        if (ndeps != 1 || !deps || k->n >= LWO__LSINK_NODES)
            return lwo__fail(ctx, LWO_ERROR_CUDA, "lwo_linear's capture could not find the node of %s", what);
        k->funcs[k->n] = fn;
        k->nodes[k->n++] = deps[0];
    }
    ctx->stats.kernels_launched++;
    return LWO_SUCCESS;
}
static lwo_result lwo__launch_fn(lwo_context *ctx, lwo__CUstream s, lwo__CUfunction fn, unsigned gx, unsigned gy,
                                 unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void **args,
                                 const char *what) {
    return lwo__launch_fn_ex(ctx, s, fn, gx, gy, gz, bx, by, bz, smem, args, what, 0);
}

/* The embedded source compiled with extra options into one more module of lwo's own. */
/* bf16_fp8, f16_fp8: the Hopper kernels only, B as fp8 upcast codes (lwo__gemm_args.b_fp8). */
static const char *const lwo__gemm_variants[LWO__GEMM_VARIANTS] = { "bf16", "f16", "s8", "e4m3", "bf16_fp8", "f16_fp8" };
/* The variant's index in lwo__gemm_variants (and ctx->gemm_modules and its per-module caches);
   LWO__GEMM_VARIANTS if none. */
static int lwo__gemm_variant_index(const char *variant) {
    int v = 0;
    while (v < LWO__GEMM_VARIANTS && strcmp(variant, lwo__gemm_variants[v]) != 0) v++;
    return v;
}
/* The GEMM modules of the variants in `mask` (bit v: lwo__gemm_variants[v]) that the context has not
   built yet, built at once (lwo__modules_build). The result is the variant `need`'s. */
static lwo_result lwo__gemm_modules_build(lwo_context *ctx, unsigned mask, int need) {
    lwo__module_job jobs[LWO__GEMM_VARIANTS];
    char defs[LWO__GEMM_VARIANTS][64], names[LWO__GEMM_VARIANTS][32];
    const char *opts[LWO__GEMM_VARIANTS][3];
    int v, idx[LWO__GEMM_VARIANTS];
    size_t n = 0, i;
    double t0 = lwo__now_ms();
    lwo_result r;
    memset(jobs, 0, sizeof jobs);
    for (v = 0; v < LWO__GEMM_VARIANTS; v++) {
        if (!(mask >> v & 1u) || ctx->gemm_modules[v]) continue;
        snprintf(defs[n], sizeof defs[n], "-DLWO_GEMM_VARIANT_%s", lwo__gemm_variants[v]);
        snprintf(names[n], sizeof names[n], "lwo_gemm_%s.cu", lwo__gemm_variants[v]);
        opts[n][0] = "--fmad=false"; opts[n][1] = defs[n]; opts[n][2] = NULL;
        jobs[n].parts = lwo__kernel_source_parts;
        jobs[n].nparts = sizeof lwo__kernel_source_parts / sizeof *lwo__kernel_source_parts;
        jobs[n].name = names[n];
        jobs[n].opts = opts[n];
        jobs[n].out = &ctx->gemm_modules[v];
        idx[n++] = v;
    }
    r = lwo__modules_build(ctx, jobs, n);
    for (i = 0; i < n; i++) {
        if (idx[i] == need && jobs[i].r) return lwo__fail(ctx, jobs[i].r, "%s", jobs[i].err);
        if (!jobs[i].r)
            lwo__log(ctx, LWO_LOG_INFO, "GEMM module %s %s in %.1f ms", lwo__gemm_variants[idx[i]],
                     ctx->gemm_modules[idx[i]]->from_cache ? "loaded from cache" : "compiled", lwo__now_ms() - t0);
    }
    return ctx->gemm_modules[need] ? LWO_SUCCESS : r;
}

/* The GEMM module of `variant`. The first one a context needs comes with every other variant its
   weights have asked for (ctx->gemm_wanted), all compiled at once on a first start. */
static lwo_result lwo__gemm_module(lwo_context *ctx, const char *variant, lwo_module **out) {
    lwo_result r;
    int v;
    if ((v = lwo__gemm_variant_index(variant)) == LWO__GEMM_VARIANTS) return lwo__fail(ctx, LWO_ERROR_NOT_FOUND, "no GEMM variant '%s'", variant);
    if (!ctx->gemm_modules[v] && (r = lwo__gemm_modules_build(ctx, (1u << v) | ctx->gemm_wanted, v)) != 0) return r;
    *out = ctx->gemm_modules[v];
    return LWO_SUCCESS;
}

/* Launch one of lwo's own kernels by name on stream s. */
static lwo_result lwo__launch(lwo_context *ctx, lwo__CUstream s, const char *kernel, unsigned gx, unsigned gy,
                              unsigned bx, unsigned smem, void **args) {
    lwo__CUfunction fn;
    lwo_result r = lwo__module_function(ctx, ctx->kernels, kernel, &fn);
    if (r) return r;
    return lwo__launch_fn(ctx, s, fn, gx, gy, 1, bx, 1, 1, smem, args, kernel);
}

/* ---- the caller's own kernels --------------------------------------------------------------- */
LWO_DEF lwo_result lwo_module_create(lwo_context *ctx, const char *source, const char *name,
                                      const char *const *options, lwo_module **out) {
    lwo_result r;
    lwo_module *m;
    const char *parts[1];
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    if (!source || !*source) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'source' is NULL or empty");
    parts[0] = source;
    r = lwo__module_build(ctx, parts, 1, name ? name : "user.cu", options, &m);
    if (r) return r;
    m->next = ctx->modules;
    ctx->modules = m;
    *out = m;
    return LWO_SUCCESS;
}

LWO_DEF void lwo_module_destroy(lwo_context *ctx, lwo_module *m) {
    lwo_module **pp;
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !m) return;
    for (pp = &ctx->modules; *pp; pp = &(*pp)->next)
        if (*pp == m) { *pp = m->next; ctx->cu.cuCtxSetCurrent(ctx->cuctx); lwo__module_free(ctx, m); return; }
}

LWO_DEF lwo_result lwo_launch(lwo_context *ctx, const lwo_launch_desc *d) {
    lwo__CUstream cs = NULL;
    lwo__CUfunction fn;
    lwo_result r;
    unsigned g[3], b[3];
    int i;
    LWO__ENTER(ctx);
    if (!d) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_launch: argument 'desc' is NULL");
    LWO__GET_STREAM(ctx, d->stream, cs);
    if (!d->module || d->module->magic != LWO__MAGIC_MODULE || d->module->ctx != ctx)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_launch: desc.module is not a live module of this context");
    if (!d->kernel) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_launch: desc.kernel is NULL");
    for (i = 0; i < 3; i++) { g[i] = d->grid[i] ? d->grid[i] : 1; b[i] = d->block[i] ? d->block[i] : 1; }
    if ((r = lwo__module_function(ctx, d->module, d->kernel, &fn)) != 0) return r;
    if (d->shared_bytes > 48u * 1024u) {
        if ((int)d->shared_bytes > ctx->info.max_smem_per_block)
            return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_launch: desc.shared_bytes (%u) exceeds the device's %d", d->shared_bytes, ctx->info.max_smem_per_block);
        LWO__CU(ctx, cuFuncSetAttribute(fn, LWO__CU_FUNC_ATTR_MAX_DYNAMIC_SMEM, (int)d->shared_bytes));
    }
    return lwo__launch_fn(ctx, cs, fn, g[0], g[1], g[2], b[0], b[1], b[2], d->shared_bytes, d->args, d->kernel);
}

/* ==== 5. Memory ============================================================================== */
/* The arena: exactly the budget, allocated once, handed out first-fit in 256-byte-aligned blocks.
   The free list stays sorted by offset so neighbours coalesce on free. */
#define LWO__ALIGN 256u

static lwo_result lwo__arena_alloc(lwo_context *ctx, uint64_t bytes, uint64_t *off, uint64_t *size, const char *what) {
    size_t i;
    uint64_t need = (bytes + LWO__ALIGN - 1) / LWO__ALIGN * LWO__ALIGN, largest = 0;
    if (need < bytes) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: size %llu overflows", what, (unsigned long long)bytes);
    if (need == 0) need = LWO__ALIGN;
    for (i = 0; i < ctx->nfree; i++) {
        lwo__block *b = &ctx->free_list[i];
        if (b->size >= need) {
            *off = b->off;
            *size = need;
            b->off += need;
            b->size -= need;
            if (b->size == 0) { memmove(b, b + 1, (ctx->nfree - i - 1) * sizeof *b); ctx->nfree--; }
            ctx->arena_used += need;
            if (ctx->arena_used > ctx->arena_peak) ctx->arena_peak = ctx->arena_used;
            return LWO_SUCCESS;
        }
        if (b->size > largest) largest = b->size;
    }
    return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET,
                     "%s needs %llu bytes of VRAM but the budget of %llu has %llu free (largest free block %llu); "
                     "raise lwo_desc.vram_budget or free tensors", what, (unsigned long long)need,
                     (unsigned long long)ctx->arena_size, (unsigned long long)(ctx->arena_size - ctx->arena_used),
                     (unsigned long long)largest);
}

static void lwo__arena_free(lwo_context *ctx, uint64_t off, uint64_t size) {
    size_t i = 0;
    while (i < ctx->nfree && ctx->free_list[i].off < off) i++;
    ctx->arena_used -= size;
    if (i > 0 && ctx->free_list[i - 1].off + ctx->free_list[i - 1].size == off) {
        ctx->free_list[i - 1].size += size;
        if (i < ctx->nfree && off + size == ctx->free_list[i].off) {
            ctx->free_list[i - 1].size += ctx->free_list[i].size;
            memmove(&ctx->free_list[i], &ctx->free_list[i + 1], (ctx->nfree - i - 1) * sizeof(lwo__block));
            ctx->nfree--;
        }
        return;
    }
    if (i < ctx->nfree && off + size == ctx->free_list[i].off) {
        ctx->free_list[i].off = off;
        ctx->free_list[i].size += size;
        return;
    }
    {
        lwo__block *nb = (lwo__block *)lwo__grow(ctx->free_list, ctx->nfree, &ctx->capfree, sizeof *nb, 16);
        if (!nb) { lwo__log(ctx, LWO_LOG_ERROR, "out of host memory: leaking %llu arena bytes", (unsigned long long)size); return; }
        ctx->free_list = nb;
    }
    memmove(&ctx->free_list[i + 1], &ctx->free_list[i], (ctx->nfree - i) * sizeof(lwo__block));
    ctx->free_list[i].off = off;
    ctx->free_list[i].size = size;
    ctx->nfree++;
}

/* The arena's use, for lwo_context_get_info. */
static void lwo__memory_stats(const lwo_context *ctx, lwo_memory_stats *out) {
    size_t i;
    out->budget = ctx->arena_size;
    out->in_use = ctx->arena_used;
    out->peak = ctx->arena_peak;
    out->largest_free = 0;
    for (i = 0; i < ctx->nfree; i++) if (ctx->free_list[i].size > out->largest_free) out->largest_free = ctx->free_list[i].size;
}

LWO_DEF lwo_result lwo_host_alloc(lwo_context *ctx, uint64_t bytes, void **out) {
    lwo__host_block *hb;
    void *p = NULL;
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    if (bytes == 0 || bytes > (uint64_t)SIZE_MAX) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'bytes' is %llu", (unsigned long long)bytes);
    hb = (lwo__host_block *)LWO_MALLOC(sizeof *hb);
    if (!hb) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    {
        lwo__CUresult rc = ctx->cu.cuMemHostAlloc(&p, (size_t)bytes, 0);
        if (rc) { LWO_FREE(hb); return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "cuMemHostAlloc of %llu bytes failed (%d): pinned memory refused", (unsigned long long)bytes, rc); }
    }
    hb->p = p;
    hb->next = ctx->host_blocks;
    ctx->host_blocks = hb;
    *out = p;
    return LWO_SUCCESS;
}

LWO_DEF void lwo_host_free(lwo_context *ctx, void *p) {
    lwo__host_block **pp;
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !ctx->ok || !p) return;
    for (pp = &ctx->host_blocks; *pp; pp = &(*pp)->next) {
        if ((*pp)->p == p) {
            lwo__host_block *hb = *pp;
            *pp = hb->next;
            ctx->cu.cuCtxSetCurrent(ctx->cuctx);
            ctx->cu.cuMemFreeHost(p);
            LWO_FREE(hb);
            return;
        }
    }
    lwo__log(ctx, LWO_LOG_WARN, "lwo_host_free: %p was not allocated by lwo_host_alloc of this context", p);
}

/* A shared registration: one caller range (a checkpoint's mapped data) registered once, that many
   homes lie inside. The driver refuses to register a page twice, and the tensors of a checkpoint
   are packed, so neighbouring weights share pages: each registering its own page range would fail
   for the second. Counted; unregistered when the last user lets go (the device idle by then). */
typedef struct lwo__host_reg {
    const uint8_t *base;  /* the caller's range */
    uint64_t len;
    void *reg_base;       /* the page-aligned range registered */
    size_t reg_len;
    size_t refs;
    struct lwo__host_reg *next;
} lwo__host_reg;

/* The shared registration holding [p, p + bytes), or NULL. Bounds by subtraction. */
static lwo__host_reg *lwo__host_reg_find(lwo_context *ctx, const void *p, uint64_t bytes) {
    lwo__host_reg *r;
    for (r = ctx->host_regs; r; r = r->next)
        if ((const uint8_t *)p >= r->base && (uint64_t)((const uint8_t *)p - r->base) <= r->len &&
            bytes <= r->len - (uint64_t)((const uint8_t *)p - r->base))
            return r;
    return NULL;
}

/* Registers [p, p + bytes) read-only, or counts one more user of a registration that holds it. */
static lwo_result lwo__host_reg_acquire(lwo_context *ctx, const void *p, uint64_t bytes, lwo__host_reg **out) {
    lwo__host_reg *r = lwo__host_reg_find(ctx, p, bytes);
    uint64_t ps = lwo__page_size();
    uintptr_t a = (uintptr_t)p, base, end;
    lwo__CUresult rc;
    *out = NULL;
    if (r) { r->refs++; *out = r; return LWO_SUCCESS; }
    if (bytes == 0 || UINTPTR_MAX - a < (uintptr_t)ps || bytes > (uint64_t)(UINTPTR_MAX - a - (uintptr_t)ps))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "cannot register %llu bytes at %p", (unsigned long long)bytes, p);
    base = a / (uintptr_t)ps * (uintptr_t)ps;
    end = (a + (uintptr_t)bytes + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
    r = (lwo__host_reg *)LWO_MALLOC(sizeof *r);
    if (!r) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    rc = ctx->cu.cuMemHostRegister((void *)base, (size_t)(end - base), 0x08 /* CU_MEMHOSTREGISTER_READ_ONLY */);
    if (rc) { LWO_FREE(r); return lwo__cuda_fail(ctx, rc, "cuMemHostRegister (read-only) of a mapped checkpoint"); }
    r->base = (const uint8_t *)p;
    r->len = bytes;
    r->reg_base = (void *)base;
    r->reg_len = (size_t)(end - base);
    r->refs = 1;
    r->next = ctx->host_regs;
    ctx->host_regs = r;
    *out = r;
    return LWO_SUCCESS;
}

static void lwo__host_reg_release(lwo_context *ctx, lwo__host_reg *r) {
    lwo__host_reg **pp;
    if (!r || --r->refs > 0) return;
    for (pp = &ctx->host_regs; *pp; pp = &(*pp)->next)
        if (*pp == r) { *pp = r->next; break; }
    ctx->cu.cuMemHostUnregister(r->reg_base);
    LWO_FREE(r);
}

/* ==== 6. Tensors ============================================================================= */
struct lwo_tensor {
    uint32_t magic;
    lwo_context *ctx;
    lwo__CUdeviceptr ptr;
    lwo_dtype dtype;
    int ndim;
    uint64_t shape[LWO_MAX_DIMS];
    uint64_t numel, bytes;
    uint64_t arena_off, arena_size; /* arena_size 0: wrapped, not owned */
    lwo_tensor *prev, *next;
};

static const struct { const char *name; size_t size; } lwo__dtypes[LWO_DTYPE_COUNT] = {
    { "invalid", 0 }, { "f32", 4 }, { "f16", 2 }, { "bf16", 2 }, { "f8_e4m3", 1 }, { "f8_e5m2", 1 },
    { "i8", 1 }, { "u8", 1 }, { "i32", 4 }, { "f64", 8 }, { "i64", 8 }, { "i16", 2 }, { "bool", 1 },
};

LWO_DEF size_t lwo_dtype_size(lwo_dtype t) { return (t > 0 && t < LWO_DTYPE_COUNT) ? lwo__dtypes[t].size : 0; }
LWO_DEF const char *lwo_dtype_name(lwo_dtype t) { return (t >= 0 && t < LWO_DTYPE_COUNT) ? lwo__dtypes[t].name : "invalid"; }

static lwo_result lwo__shape_check(lwo_context *ctx, lwo_dtype dtype, int ndim, const uint64_t *shape, uint64_t *numel, uint64_t *bytes) {
    int i;
    uint64_t n = 1;
    *numel = 0;
    *bytes = 0;
    if (lwo_dtype_size(dtype) == 0) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'dtype' (%d) is not a valid lwo_dtype", (int)dtype);
    if (ndim < 1 || ndim > LWO_MAX_DIMS) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'ndim' is %d; it must be 1..%d", ndim, LWO_MAX_DIMS);
    if (!shape) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'shape' is NULL");
    for (i = 0; i < ndim; i++) {
        if (shape[i] == 0) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'shape[%d]' is 0", i);
        if (!lwo__mul_ok(n, shape[i], &n)) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'shape': element count overflows");
    }
    if (!lwo__mul_ok(n, lwo_dtype_size(dtype), bytes) || *bytes > ((uint64_t)1 << 62))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'shape': byte size overflows");
    *numel = n;
    return LWO_SUCCESS;
}

static lwo_result lwo__tensor_new(lwo_context *ctx, lwo_dtype dtype, int ndim, const uint64_t *shape, lwo_tensor **out) {
    lwo_tensor *t;
    uint64_t numel = 0, bytes = 0;
    lwo_result r;
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    r = lwo__shape_check(ctx, dtype, ndim, shape, &numel, &bytes);
    if (r) return r;
    t = (lwo_tensor *)LWO_MALLOC(sizeof *t);
    if (!t) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(t, 0, sizeof *t);
    t->magic = LWO__MAGIC_TENSOR;
    t->ctx = ctx;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->numel = numel;
    t->bytes = bytes;
    t->next = ctx->tensors;
    if (ctx->tensors) ctx->tensors->prev = t;
    ctx->tensors = t;
    *out = t;
    return LWO_SUCCESS;
}

static void lwo__tensor_free(lwo_context *ctx, lwo_tensor *t) {
    if (t->prev) t->prev->next = t->next; else ctx->tensors = t->next;
    if (t->next) t->next->prev = t->prev;
    if (t->arena_size) lwo__arena_free(ctx, t->arena_off, t->arena_size);
    t->magic = 0;
    LWO_FREE(t);
}

LWO_DEF lwo_result lwo_tensor_create(lwo_context *ctx, lwo_dtype dtype, int ndim, const uint64_t *shape, lwo_tensor **out) {
    lwo_tensor *t;
    lwo_result r;
    LWO__ENTER(ctx);
    r = lwo__tensor_new(ctx, dtype, ndim, shape, &t);
    if (r) return r;
    r = lwo__arena_alloc(ctx, t->bytes, &t->arena_off, &t->arena_size, "lwo_tensor_create");
    if (r) { t->arena_size = 0; lwo__tensor_free(ctx, t); return r; }
    t->ptr = ctx->arena + t->arena_off;
    *out = t;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_tensor_wrap(lwo_context *ctx, uint64_t device_ptr, lwo_dtype dtype, int ndim, const uint64_t *shape, lwo_tensor **out) {
    lwo_result r;
    LWO__ENTER(ctx);
    if (!device_ptr) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'device_ptr' is 0");
    r = lwo__tensor_new(ctx, dtype, ndim, shape, out);
    if (r) return r;
    (*out)->ptr = device_ptr;
    return LWO_SUCCESS;
}

/* NULL-safe checks that name the argument, so a bad call says exactly what was wrong. */
static lwo_result lwo__check_tensor(lwo_context *ctx, const lwo_tensor *t, const char *arg) {
    if (!t) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument '%s' is NULL", arg);
    if (t->magic != LWO__MAGIC_TENSOR) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument '%s' is not a live lwo_tensor", arg);
    if (t->ctx != ctx) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument '%s' belongs to another lwo_context", arg);
    return LWO_SUCCESS;
}
#define LWO__CHECK_TENSOR(ctx, t)                                                                     \
    do {                                                                                             \
        lwo_result lwo__r = lwo__check_tensor((ctx), (t), #t);                                       \
        if (lwo__r) return lwo__r;                                                                   \
    } while (0)

LWO_DEF void lwo_tensor_destroy(lwo_context *ctx, lwo_tensor *t) {
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !t) return;
    if (lwo__check_tensor(ctx, t, "t")) { lwo__log(ctx, LWO_LOG_WARN, "lwo_tensor_destroy: %s", ctx->error); return; }
    lwo__tensor_free(ctx, t);
}

LWO_DEF uint64_t lwo_tensor_device_ptr(const lwo_tensor *t) { return t && t->magic == LWO__MAGIC_TENSOR ? t->ptr : 0; }
LWO_DEF lwo_dtype lwo_tensor_dtype(const lwo_tensor *t) { return t && t->magic == LWO__MAGIC_TENSOR ? t->dtype : LWO_DTYPE_INVALID; }
LWO_DEF int lwo_tensor_ndim(const lwo_tensor *t) { return t && t->magic == LWO__MAGIC_TENSOR ? t->ndim : 0; }
LWO_DEF uint64_t lwo_tensor_dim(const lwo_tensor *t, int i) {
    return t && t->magic == LWO__MAGIC_TENSOR && i >= 0 && i < t->ndim ? t->shape[i] : 0;
}
LWO_DEF uint64_t lwo_tensor_numel(const lwo_tensor *t) { return t && t->magic == LWO__MAGIC_TENSOR ? t->numel : 0; }
LWO_DEF uint64_t lwo_tensor_bytes(const lwo_tensor *t) { return t && t->magic == LWO__MAGIC_TENSOR ? t->bytes : 0; }

static lwo_result lwo__copy_check(lwo_context *ctx, const lwo_tensor *t, const void *host, uint64_t bytes, const char *what) {
    if (!host) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: host pointer is NULL", what);
    if (bytes == 0 || bytes > t->bytes)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: argument 'bytes' is %llu; the tensor holds %llu", what,
                         (unsigned long long)bytes, (unsigned long long)t->bytes);
    return LWO_SUCCESS;
}

/* Copies between tensor t and host memory on stream s: up (host to t) or down. */
static lwo_result lwo__tensor_copy(lwo_context *ctx, lwo_stream *s, const lwo_tensor *t, const void *host, uint64_t bytes, int up) {
    lwo__CUstream cs = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_tensor(ctx, t, up ? "dst" : "src")) != 0) return r;
    LWO__GET_STREAM(ctx, s, cs);
    if ((r = lwo__copy_check(ctx, t, host, bytes, up ? "lwo_tensor_upload" : "lwo_tensor_download")) != 0) return r;
    if (up) {
        LWO__CU(ctx, cuMemcpyHtoDAsync(t->ptr, host, (size_t)bytes, cs));
        ctx->stats.bytes_uploaded += bytes;
    } else {
        LWO__CU(ctx, cuMemcpyDtoHAsync((void *)(uintptr_t)host, t->ptr, (size_t)bytes, cs));
        ctx->stats.bytes_downloaded += bytes;
    }
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_tensor_upload_async(lwo_context *ctx, lwo_stream *s, lwo_tensor *dst, const void *src, uint64_t bytes) {
    return lwo__tensor_copy(ctx, s, dst, src, bytes, 1);
}

LWO_DEF lwo_result lwo_tensor_download_async(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, void *dst, uint64_t bytes) {
    return lwo__tensor_copy(ctx, s, src, dst, bytes, 0);
}

LWO_DEF lwo_result lwo_tensor_upload(lwo_context *ctx, lwo_tensor *dst, const void *src, uint64_t bytes) {
    lwo_result r = lwo_tensor_upload_async(ctx, NULL, dst, src, bytes);
    if (r) return r;
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_tensor_download(lwo_context *ctx, const lwo_tensor *src, void *dst, uint64_t bytes) {
    lwo_result r = lwo_tensor_download_async(ctx, NULL, src, dst, bytes);
    if (r) return r;
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_tensor_fill_bytes(lwo_context *ctx, lwo_stream *s, lwo_tensor *t, uint8_t value) {
    lwo__CUstream cs = NULL;
    LWO__ENTER(ctx);
    LWO__CHECK_TENSOR(ctx, t);
    LWO__GET_STREAM(ctx, s, cs);
    LWO__CU(ctx, cuMemsetD8Async(t->ptr, value, (size_t)t->bytes, cs));
    return LWO_SUCCESS;
}

static lwo_result lwo__tensor2(lwo_context *ctx, lwo_dtype dt, uint64_t a, uint64_t b, lwo_tensor **out) {
    uint64_t shape[2];
    shape[0] = a; shape[1] = b;
    return lwo_tensor_create(ctx, dt, b ? 2 : 1, shape, out);
}

/* ---- streams and events --------------------------------------------------------------------- */
/* Makes a stream (magic LWO__MAGIC_STREAM) or an event and puts it on the context's list. out is
   the caller's lwo_stream * or lwo_event *, written with memcpy (it is not a lwo__handle *). */
static lwo_result lwo__handle_create(lwo_context *ctx, uint32_t magic, void *out) {
    lwo__handle *x = NULL;
    lwo__CUstream s = NULL;
    lwo__CUevent e = NULL;
    lwo__CUresult rc;
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    memcpy(out, &x, sizeof x);
    x = (lwo__handle *)LWO_MALLOC(sizeof *x);
    if (!x) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    rc = magic == LWO__MAGIC_STREAM ? ctx->cu.cuStreamCreate(&s, LWO__CU_STREAM_NON_BLOCKING) : ctx->cu.cuEventCreate(&e, 0);
    if (rc) { LWO_FREE(x); return lwo__cuda_fail(ctx, rc, magic == LWO__MAGIC_STREAM ? "cuStreamCreate" : "cuEventCreate"); }
    x->magic = magic;
    x->ctx = ctx;
    x->h = magic == LWO__MAGIC_STREAM ? (void *)s : (void *)e;
    x->next = ctx->handles;
    ctx->handles = x;
    memcpy(out, &x, sizeof x);
    return LWO_SUCCESS;
}

/* Unlinks and frees p when it is a stream or event (magic) of the context; else does nothing. */
static void lwo__handle_destroy(lwo_context *ctx, const void *p, uint32_t magic) {
    lwo__handle **pp;
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !p) return;
    for (pp = &ctx->handles; *pp; pp = &(*pp)->next)
        if ((const void *)*pp == p && (*pp)->magic == magic) {
            lwo__handle *x = *pp;
            *pp = x->next;
            ctx->cu.cuCtxSetCurrent(ctx->cuctx);
            if (magic == LWO__MAGIC_STREAM) ctx->cu.cuStreamDestroy((lwo__CUstream)x->h);
            else ctx->cu.cuEventDestroy((lwo__CUevent)x->h);
            x->magic = 0;
            LWO_FREE(x);
            return;
        }
}

LWO_DEF lwo_result lwo_stream_create(lwo_context *ctx, lwo_stream **out) { return lwo__handle_create(ctx, LWO__MAGIC_STREAM, out); }

LWO_DEF void lwo_stream_destroy(lwo_context *ctx, lwo_stream *s) { lwo__handle_destroy(ctx, s, LWO__MAGIC_STREAM); }

LWO_DEF lwo_result lwo_stream_synchronize(lwo_context *ctx, lwo_stream *s) {
    lwo__CUstream cs = NULL;
    LWO__ENTER(ctx);
    LWO__GET_STREAM(ctx, s, cs);
    LWO__CU(ctx, cuStreamSynchronize(cs));
    return LWO_SUCCESS;
}

LWO_DEF void *lwo_stream_handle(lwo_context *ctx, lwo_stream *s) {
    lwo__CUstream cs = NULL;
    if (lwo__enter(ctx) || lwo__get_stream(ctx, s, &cs)) return NULL;
    return cs;
}

LWO_DEF lwo_result lwo_event_create(lwo_context *ctx, lwo_event **out) { return lwo__handle_create(ctx, LWO__MAGIC_EVENT, out); }

LWO_DEF void lwo_event_destroy(lwo_context *ctx, lwo_event *e) { lwo__handle_destroy(ctx, e, LWO__MAGIC_EVENT); }

/* Records e on s (wait 0), or makes s wait on the GPU for e (wait 1). */
static lwo_result lwo__stream_event(lwo_context *ctx, lwo_stream *s, const lwo_event *e, int wait) {
    lwo__CUstream cs = NULL;
    lwo__CUevent ev = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__get_event(ctx, e, "e", &ev)) != 0) return r;
    LWO__GET_STREAM(ctx, s, cs);
    if (wait) LWO__CU(ctx, cuStreamWaitEvent(cs, ev, 0));
    else LWO__CU(ctx, cuEventRecord(ev, cs));
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_event_record(lwo_context *ctx, lwo_event *e, lwo_stream *s) { return lwo__stream_event(ctx, s, e, 0); }

LWO_DEF lwo_result lwo_stream_wait_event(lwo_context *ctx, lwo_stream *s, lwo_event *e) { return lwo__stream_event(ctx, s, e, 1); }

LWO_DEF lwo_result lwo_event_synchronize(lwo_context *ctx, lwo_event *e) {
    lwo__CUevent ev = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__get_event(ctx, e, "e", &ev)) != 0) return r;
    LWO__CU(ctx, cuEventSynchronize(ev));
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_event_elapsed_ms(lwo_context *ctx, lwo_event *start, lwo_event *end, float *ms) {
    lwo__CUevent e0 = NULL, e1 = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__get_event(ctx, start, "start", &e0)) != 0 || (r = lwo__get_event(ctx, end, "end", &e1)) != 0) return r;
    if (!ms) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'ms' is NULL");
    LWO__CU(ctx, cuEventElapsedTime(ms, e0, e1));
    return LWO_SUCCESS;
}

/* ==== 7. Kernels ============================================================================= */
/* The CPU references (the definition of every kernel's math), then the GPU ops: convert,
   quantize per tensor and per row, pad. */
/* CPU references first: they define the math, and the GPU kernels in kernels.cuh.inc are written
   to match them bit for bit. */
static float lwo__bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t lwo__f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

LWO_DEF float lwo_ref_bf16_to_f32(uint16_t h) { return lwo__bits_f32((uint32_t)h << 16); }

LWO_DEF uint16_t lwo_ref_f32_to_bf16(float v) {
    uint32_t u = lwo__f32_bits(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

LWO_DEF float lwo_ref_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 31u) return lwo__bits_f32(s | 0x7f800000u | (m << 13));
    if (e == 0u) { float f = (float)m * 5.9604644775390625e-08f; return s ? -f : f; } /* m * 2^-24 */
    return lwo__bits_f32(s | ((e + 112u) << 23) | (m << 13));
}

LWO_DEF uint16_t lwo_ref_f32_to_f16(float v) {
    uint32_t u = lwo__f32_bits(v), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    float fa = lwo__bits_f32(a);
    if (a > 0x7f800000u) return (uint16_t)0x7fff; /* the canonical NaN the GPU's cvt produces */
    if (fa >= 65520.0f) return (uint16_t)(s | 0x7c00u); /* rounds past the largest finite: inf */
    if (fa < 6.103515625e-05f) return (uint16_t)(s | (uint32_t)nearbyintf(fa * 16777216.0f)); /* below 2^-14 */
    {
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(s | ((r >> 13) - (112u << 10)));
    }
}

LWO_DEF float lwo_ref_fp8_to_f32(uint8_t c, lwo_dtype fp8) {
    uint32_t s = (uint32_t)(c & 0x80u) << 24;
    if (fp8 == LWO_DTYPE_F8_E4M3) {
        uint32_t e = (c >> 3) & 15u, m = c & 7u;
        if (e == 15u && m == 7u) return lwo__bits_f32(s | 0x7fc00000u);
        if (e == 0u) { float f = (float)m * 0.001953125f; return s ? -f : f; }
        return lwo__bits_f32(s | ((e + 120u) << 23) | (m << 20));
    } else {
        uint32_t e = (c >> 2) & 31u, m = c & 3u;
        if (e == 31u) return lwo__bits_f32(s | (m ? 0x7fc00000u : 0x7f800000u));
        if (e == 0u) { float f = (float)m * 1.52587890625e-05f; return s ? -f : f; }
        return lwo__bits_f32(s | ((e + 112u) << 23) | (m << 21));
    }
}

LWO_DEF uint8_t lwo_ref_f32_to_fp8(float v, lwo_dtype fp8) {
    uint32_t u = lwo__f32_bits(v), s = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    float fa = lwo__bits_f32(a);
    if (a > 0x7f800000u) return (uint8_t)(s | 0x7fu);
    if (fp8 == LWO_DTYPE_F8_E4M3) {
        if (fa >= 448.0f) return (uint8_t)(s | 0x7eu);
        if (fa < 0.015625f) return (uint8_t)(s | (uint32_t)nearbyintf(fa * 512.0f));
        return (uint8_t)(s | (((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3)));
    } else {
        if (fa >= 57344.0f) return (uint8_t)(s | 0x7bu);
        if (fa < 6.103515625e-05f) return (uint8_t)(s | (uint32_t)nearbyintf(fa * 65536.0f));
        return (uint8_t)(s | (((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - (112u << 2)));
    }
}

/* int8 code of v: round to nearest even, saturate to +-127, NaN 0 (as the GPU's). */
static int8_t lwo__ref_i8_sat(float v) {
    float r = nearbyintf(v);
    if (v != v) return 0;
    r = r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r;
    return (int8_t)(int)r;
}

LWO_DEF float lwo_ref_load(const void *data, lwo_dtype t, uint64_t i) {
    const unsigned char *p = (const unsigned char *)data;
    uint16_t h;
    float f;
    switch (t) {
    case LWO_DTYPE_F32: memcpy(&f, p + i * 4, 4); return f;
    case LWO_DTYPE_F16: memcpy(&h, p + i * 2, 2); return lwo_ref_f16_to_f32(h);
    case LWO_DTYPE_BF16: memcpy(&h, p + i * 2, 2); return lwo_ref_bf16_to_f32(h);
    case LWO_DTYPE_F8_E4M3: case LWO_DTYPE_F8_E5M2: return lwo_ref_fp8_to_f32(p[i], t);
    case LWO_DTYPE_I8: return (float)(int8_t)p[i];
    case LWO_DTYPE_U8: return (float)p[i];
    case LWO_DTYPE_I32: { int32_t v; memcpy(&v, p + i * 4, 4); return (float)v; }
    default: return 0.0f;
    }
}

LWO_DEF void lwo_ref_store(void *data, lwo_dtype t, uint64_t i, float v) {
    unsigned char *p = (unsigned char *)data;
    uint16_t h;
    switch (t) {
    case LWO_DTYPE_F32: memcpy(p + i * 4, &v, 4); break;
    case LWO_DTYPE_F16: h = lwo_ref_f32_to_f16(v); memcpy(p + i * 2, &h, 2); break;
    case LWO_DTYPE_BF16: h = lwo_ref_f32_to_bf16(v); memcpy(p + i * 2, &h, 2); break;
    case LWO_DTYPE_F8_E4M3: case LWO_DTYPE_F8_E5M2: p[i] = lwo_ref_f32_to_fp8(v, t); break;
    case LWO_DTYPE_I8: p[i] = (unsigned char)lwo__ref_i8_sat(v); break;
    default: break;
    }
}

static int lwo__is_float(lwo_dtype t) { return t == LWO_DTYPE_F32 || t == LWO_DTYPE_F16 || t == LWO_DTYPE_BF16; }
static int lwo__is_fp8(lwo_dtype t) { return t == LWO_DTYPE_F8_E4M3 || t == LWO_DTYPE_F8_E5M2; }
static float lwo__fp8_max(lwo_dtype t) { return t == LWO_DTYPE_F8_E4M3 ? 448.0f : 57344.0f; }

LWO_DEF lwo_result lwo_ref_convert(const void *src, lwo_dtype st, void *dst, lwo_dtype dt, uint64_t n, float scale) {
    uint64_t i;
    if (!src || !dst || !(lwo__is_float(st) || lwo__is_fp8(st)) || !lwo__is_float(dt)) return LWO_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < n; i++) lwo_ref_store(dst, dt, i, lwo_ref_load(src, st, i) * scale);
    return LWO_SUCCESS;
}

/* absmax / fp8_max with the kernels' conventions: 1 for an all-zero input, NaN if any input is NaN. */
LWO_DEF float lwo_ref_fp8_scale(const void *src, lwo_dtype st, uint64_t n, lwo_dtype fp8) {
    uint32_t m = 0;
    uint64_t i;
    float a;
    for (i = 0; i < n; i++) {
        uint32_t b = lwo__f32_bits(lwo_ref_load(src, st, i)) & 0x7fffffffu;
        if (b > m) m = b;
    }
    a = lwo__bits_f32(m);
    return a > 0.0f ? a / lwo__fp8_max(fp8) : (a == 0.0f ? 1.0f : a);
}

/* The per-row quantizer both W8A8 references share: v = x / smooth; scale = absmax(v) / qmax (1 for
   an all-zero row); q = code(v * (1/scale)), int8 (saturating, qmax 127) or e4m3 (qmax 448); zero
   past k. The absmax skips NaN, as the GPU's fmaxf does. */
static void lwo__ref_quantize_rows(const void *x, lwo_dtype xt, uint64_t rows, uint64_t k, const float *smooth, int to_fp8,
                                   uint8_t *q, uint64_t kq, float *scales) {
    const float qmax = to_fp8 ? 448.0f : 127.0f;
    uint64_t r, c;
    for (r = 0; r < rows; r++) {
        float m = 0.0f, scale, inv;
        for (c = 0; c < k; c++) {
            float v = lwo_ref_load(x, xt, r * k + c);
            if (smooth) v = v / smooth[c];
            v = fabsf(v);
            if (v > m) m = v;
        }
        scale = m > 0.0f ? m / qmax : 1.0f;
        inv = 1.0f / scale;
        scales[r] = scale;
        for (c = 0; c < k; c++) {
            float v = lwo_ref_load(x, xt, r * k + c);
            if (smooth) v = v / smooth[c];
            q[r * kq + c] = to_fp8 ? lwo_ref_f32_to_fp8(v * inv, LWO_DTYPE_F8_E4M3) : (uint8_t)lwo__ref_i8_sat(v * inv);
        }
        for (c = k; c < kq; c++) q[r * kq + c] = 0;
    }
}

LWO_DEF lwo_result lwo_ref_quantize(const lwo_ref_quantize_desc *d) {
    uint64_t i, n, kq;
    if (!d || !d->src || !d->dst || !lwo__is_float(d->src_dtype)) return LWO_ERROR_INVALID_ARGUMENT;
    if (!d->per_row) {
        float inv = 1.0f / d->scale;
        if (!lwo__is_fp8(d->dst_dtype) || !lwo__mul_ok(d->rows ? d->rows : 1, d->cols, &n)) return LWO_ERROR_INVALID_ARGUMENT;
        for (i = 0; i < n; i++) ((uint8_t *)d->dst)[i] = lwo_ref_f32_to_fp8(lwo_ref_load(d->src, d->src_dtype, i) * inv, d->dst_dtype);
        return LWO_SUCCESS;
    }
    kq = d->dst_cols ? d->dst_cols : d->cols;
    if (!d->scales || kq < d->cols || (d->dst_dtype != LWO_DTYPE_I8 && d->dst_dtype != LWO_DTYPE_F8_E4M3)) return LWO_ERROR_INVALID_ARGUMENT;
    lwo__ref_quantize_rows(d->src, d->src_dtype, d->rows, d->cols, d->smooth, d->dst_dtype == LWO_DTYPE_F8_E4M3, (uint8_t *)d->dst, kq, d->scales);
    return LWO_SUCCESS;
}

/* log2 of a Hadamard block size, or -1 unless it is a power of two from 2 to 256. */
static int lwo__hadamard_log(int b) {
    int l;
    for (l = 1; l <= 8; l++) if (b == 1 << l) return l;
    return -1;
}

/* s_b for b = 2^l: 2^-(l/2), times the f32 nearest 1/sqrt(2) for odd l. Scaling by a power of two
   is exact, so this is the f32 nearest 1/sqrt(b) for every b; the kernels get it from here. */
static float lwo__hadamard_scale(int l) {
    float s = (l & 1) ? 0.70710678118654752f : 1.0f;
    int i;
    for (i = 0; i < l / 2; i++) s = s * 0.5f;
    return s;
}

/* 0 when perm[0..k) is a permutation of 0..k-1. Else *at is the first bad position: 1 when its
   index is out of range, 2 when it repeats the index at *prev; 3 when out of host memory. */
static int lwo__perm_check(const int32_t *perm, uint64_t k, uint64_t *at, uint64_t *prev) {
    unsigned char *seen = (unsigned char *)LWO_MALLOC((size_t)(k / 8 + 1));
    uint64_t j;
    int bad = 0;
    *at = *prev = 0;
    if (!seen) return 3;
    memset(seen, 0, (size_t)(k / 8 + 1));
    for (j = 0; j < k && !bad; j++) {
        int32_t p = perm[j];
        if (p < 0 || (uint64_t)p >= k) bad = 1;
        else if (seen[p >> 3] & (1u << (p & 7))) {
            bad = 2;
            while (perm[*prev] != p) (*prev)++;
        } else seen[p >> 3] |= (unsigned char)(1u << (p & 7));
        if (bad) *at = j;
    }
    LWO_FREE(seen);
    return bad;
}

static void lwo__ref_hadamard(float *v, uint64_t n, int l) {
    const uint64_t b = (uint64_t)1 << l;
    const float s = lwo__hadamard_scale(l);
    uint64_t base, h, i;
    for (base = 0; base + b <= n; base += b) {
        float *r = v + base;
        for (h = 1; h < b; h <<= 1)
            for (i = 0; i < b; i++)
                if (!(i & h)) { float a = r[i], c = r[i + h]; r[i] = a + c; r[i + h] = a - c; }
        for (i = 0; i < b; i++) r[i] = r[i] * s;
    }
}

LWO_DEF lwo_result lwo_ref_hadamard(float *v, uint64_t n, int block) {
    int l = lwo__hadamard_log(block);
    if (!v || l < 0 || n % (uint64_t)block) return LWO_ERROR_INVALID_ARGUMENT;
    lwo__ref_hadamard(v, n, l);
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_ref_prep_rows(const lwo_ref_prep_desc *d) {
    const void *x = d ? d->x : NULL;
    const lwo_dtype xt = d ? d->x_dtype : LWO_DTYPE_INVALID;
    const uint64_t rows = d ? d->rows : 0, k = d ? d->cols : 0, kq = d ? d->out_cols : 0;
    const int32_t *perm = d ? d->perm : NULL;
    const float *smooth = d ? d->smooth : NULL;
    const int weight = d ? d->weight : 0, hadamard = d ? d->hadamard : 0;
    float *out = d ? d->out : NULL;
    int l = hadamard ? lwo__hadamard_log(hadamard) : 0;
    uint64_t b, kr, r, j, at, prev;
    if (!x || !out || !lwo__is_float(xt) || l < 0) return LWO_ERROR_INVALID_ARGUMENT;
    b = (uint64_t)1 << l;
    kr = (k + b - 1) / b * b;
    if (kq < kr) return LWO_ERROR_INVALID_ARGUMENT;
    if (perm) {
        int bad = lwo__perm_check(perm, k, &at, &prev);
        if (bad) return bad == 3 ? LWO_ERROR_OUT_OF_HOST_MEMORY : LWO_ERROR_INVALID_ARGUMENT;
    }
    for (r = 0; r < rows; r++) {
        float *o = out + r * kq;
        for (j = 0; j < k; j++) {
            uint64_t c = perm ? (uint64_t)perm[j] : j;
            float v = lwo_ref_load(x, xt, r * k + c);
            if (smooth) v = weight ? v * smooth[c] : v / smooth[c];
            o[j] = v;
        }
        for (j = k; j < kq; j++) o[j] = 0.0f;
        if (l) lwo__ref_hadamard(o, kr, l);
    }
    return LWO_SUCCESS;
}

/* ---- GPU ops -------------------------------------------------------------------------------- */
static unsigned lwo__grid_for(lwo_context *ctx, uint64_t items, unsigned threads) {
    uint64_t blocks = (items + threads - 1) / threads, cap = (uint64_t)ctx->info.sm_count * 16;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

static int lwo__aligned16(lwo__CUdeviceptr p) { return (p & 15u) == 0; }

static const char *lwo__kname(lwo_dtype t) {
    switch (t) {
    case LWO_DTYPE_F32: return "f32";
    case LWO_DTYPE_F16: return "f16";
    case LWO_DTYPE_BF16: return "bf16";
    case LWO_DTYPE_F8_E4M3: return "e4m3";
    case LWO_DTYPE_F8_E5M2: return "e5m2";
    default: return "?";
    }
}

/* Launches dst = src * scale (scale_dev, if nonzero, overrides scale on the GPU). */
static lwo_result lwo__convert_launch(lwo_context *ctx, lwo__CUstream cs, lwo__CUdeviceptr src, lwo_dtype st,
                                      lwo__CUdeviceptr dst, lwo_dtype dt, uint64_t n, float scale, lwo__CUdeviceptr scale_dev,
                                      const char *prefix) {
    char name[64];
    int vec_ok = lwo__aligned16(src) && lwo__aligned16(dst);
    void *args[6];
    args[0] = &src; args[1] = &dst; args[2] = &n; args[3] = &scale; args[4] = &scale_dev; args[5] = &vec_ok;
    snprintf(name, sizeof name, "%s_%s_%s", prefix, lwo__kname(st), lwo__kname(dt));
    return lwo__launch(ctx, cs, name, lwo__grid_for(ctx, vec_ok ? (n + 15) / 16 : n, 256), 1, 256, 0, args);
}

LWO_DEF lwo_result lwo_convert(lwo_context *ctx, lwo_stream *s, const lwo_tensor *src, lwo_tensor *dst, float scale) {
    lwo__CUstream cs = NULL;
    LWO__ENTER(ctx);
    LWO__CHECK_TENSOR(ctx, src);
    LWO__CHECK_TENSOR(ctx, dst);
    LWO__GET_STREAM(ctx, s, cs);
    if (!(lwo__is_float(src->dtype) || lwo__is_fp8(src->dtype)))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_convert: argument 'src' has dtype %s; it must be f32, f16, bf16, f8_e4m3 or f8_e5m2", lwo_dtype_name(src->dtype));
    if (!lwo__is_float(dst->dtype))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_convert: argument 'dst' has dtype %s; it must be f32, f16 or bf16 (lwo_quantize makes fp8)", lwo_dtype_name(dst->dtype));
    if (src->numel != dst->numel)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_convert: 'src' has %llu elements, 'dst' %llu", (unsigned long long)src->numel, (unsigned long long)dst->numel);
    return lwo__convert_launch(ctx, cs, src->ptr, src->dtype, dst->ptr, dst->dtype, src->numel, scale, 0, "lwo_k_convert");
}

/* Per tensor: dst (fp8) = sat(src * (1 / scale)), the scale first computed on the GPU when asked. */
static lwo_result lwo__quantize_tensor(lwo_context *ctx, lwo__CUstream cs, const lwo_tensor *src, lwo_tensor *dst, lwo_tensor *scale,
                                       int compute_scale) {
    char name[64];
    lwo_result r;
    int vec_ok;
    uint64_t n;
    void *args[5];
    if (!lwo__is_fp8(dst->dtype)) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.dst has dtype %s; per tensor it must be f8_e4m3 or f8_e5m2", lwo_dtype_name(dst->dtype));
    if (scale->dtype != LWO_DTYPE_F32 || scale->numel != 1) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.scales must be an f32 tensor of one element per tensor");
    if (src->numel != dst->numel) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.src has %llu elements, desc.dst %llu", (unsigned long long)src->numel, (unsigned long long)dst->numel);
    n = src->numel;
    if (compute_scale) {
        float fmax = lwo__fp8_max(dst->dtype);
        void *a1[4], *a2[2];
        lwo__CUdeviceptr sp = scale->ptr;
        int vec = lwo__aligned16(src->ptr);
        LWO__CU(ctx, cuMemsetD32Async(scale->ptr, 0, 1, cs));
        a1[0] = (void *)&src->ptr; a1[1] = &n; a1[2] = &sp; a1[3] = &vec;
        snprintf(name, sizeof name, "lwo_k_absmax_%s", lwo__kname(src->dtype));
        if ((r = lwo__launch(ctx, cs, name, lwo__grid_for(ctx, vec ? (n + 15) / 16 : n, 256), 1, 256, 0, a1)) != 0) return r;
        a2[0] = &sp; a2[1] = &fmax;
        if ((r = lwo__launch(ctx, cs, "lwo_k_fp8_scale", 1, 1, 1, 0, a2)) != 0) return r;
    }
    vec_ok = lwo__aligned16(src->ptr) && lwo__aligned16(dst->ptr);
    args[0] = (void *)&src->ptr; args[1] = &dst->ptr; args[2] = &n; args[3] = &scale->ptr; args[4] = &vec_ok;
    snprintf(name, sizeof name, "lwo_k_quantize_fp8_%s_%s", lwo__kname(src->dtype), lwo__kname(dst->dtype));
    return lwo__launch(ctx, cs, name, lwo__grid_for(ctx, vec_ok ? (n + 15) / 16 : n, 256), 1, 256, 0, args);
}

/* The per-row quantizer of every W8A8 path, prep included (lwo_k_quantize_rows_<x dtype>, whose
   comment has the math): x [rows, K] into q [rows, Kq] (i8, or e4m3 when fp8) and f32 scales [rows].
   perm (i32) and smooth (f32, by position: already permuted) are [K] device arrays or 0; smul
   multiplies by smooth (weights) where activations divide; hlog is log2 of the Hadamard block, 0
   for none; Kq >= K rounded up to the block. Rows with neither gather nor rotation, aligned for
   vector access and narrow enough that LWO_ROWQ_RING of them fit in LWO__ROWQ_SMEM (17066 16-bit
   or 8533 f32 values), stream through a ring in shared memory (lwo_k_quantize_rows_ring_*: the
   common activation case, a persistent grid with rows always in flight). Otherwise the row goes
   through shared memory when it fits, so x
   is read from DRAM once; the prepped row is kept there too when smoothing or the rotation would
   otherwise be done twice. Past LWO__ROWQ_SMEM the kernel reads x twice (the second time mostly
   from L1/L2). */
#define LWO__ROWQ_SMEM (100u * 1024u) /* a 16384-wide bf16 row and its f32 prep; 3+ blocks per SM on sm_80/90 */
#define LWO__ROWQ_RING 3      /* kernels.cuh.inc's LWO_ROWQ_RING: rows a ring block holds */
#define LWO__ROWQ_THREADS 256 /* and LWO_ROWQ_THREADS, the most threads a block of it has */
enum { LWO__ROWQ_VEC_X = 1, LWO__ROWQ_VEC_Q = 2, LWO__ROWQ_VEC_SIDE = 4, LWO__ROWQ_SMUL = 8, LWO__ROWQ_STAGE = 16,
       LWO__ROWQ_HOLD = 32, LWO__ROWQ_E4M3 = 64 }; /* kernels.cuh.inc's LWO_ROWQ_* flags */
static lwo_result lwo__rowq_launch(lwo_context *ctx, lwo__CUstream cs, lwo__CUdeviceptr x, lwo_dtype xt, uint64_t rows,
                                   uint64_t K, lwo__CUdeviceptr perm, lwo__CUdeviceptr smooth, int smul, int hlog, int fp8,
                                   lwo__CUdeviceptr q, uint64_t Kq, lwo__CUdeviceptr scales) {
    const uint64_t b = (uint64_t)1 << hlog, ns = ((K + b - 1) / b * b + 7) / 8;
    const uint64_t stage = (K * lwo_dtype_size(xt) + 15) / 16 * 16 + 16, hold = ns * 32;
    /* the kernels' static shared memory (a block reduction's 32 bytes) comes out of the same limit */
    uint64_t cap = (uint64_t)(ctx->info.max_smem_per_block > 1024 ? ctx->info.max_smem_per_block - 1024 : 0);
    unsigned smem = 0;
    int flags = 0;
    float hs = lwo__hadamard_scale(hlog);
    char name[64];
    lwo__CUfunction fn;
    lwo_result r;
    void *args[10];
    if (rows == 0) return LWO_SUCCESS;
    if (rows > 0x7fffffffu) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%llu rows is more than one launch of the row quantizer takes", (unsigned long long)rows);
    if (cap > LWO__ROWQ_SMEM) cap = LWO__ROWQ_SMEM;
    if ((x & 15u) == 0 && K % 8 == 0) flags |= LWO__ROWQ_VEC_X;
    if ((q & 7u) == 0 && Kq % 8 == 0) flags |= LWO__ROWQ_VEC_Q;
    if ((perm & 15u) == 0 && (smooth & 15u) == 0) flags |= LWO__ROWQ_VEC_SIDE;
    if (smul) flags |= LWO__ROWQ_SMUL;
    if (fp8) flags |= LWO__ROWQ_E4M3;
    if (!perm && !hlog && (flags & LWO__ROWQ_VEC_X) && (flags & LWO__ROWQ_VEC_Q) && (!smooth || (flags & LWO__ROWQ_VEC_SIDE)) &&
        LWO__ROWQ_RING * K * lwo_dtype_size(xt) <= cap) {
        /* the ring (lwo_k_quantize_rows_ring_*): about two 8-value slots a thread, a multiple of 32
           threads (32 for K = 0: scale 1, q zero); as many blocks as fit at once */
        unsigned threads = (unsigned)((ns + 63) / 64 * 32), grid = (unsigned)rows;
        const int xi = xt == LWO_DTYPE_F32 ? 0 : xt == LWO_DTYPE_F16 ? 1 : 2;
        int *fit = ctx->rowq_fit[xi];
        if (threads > LWO__ROWQ_THREADS) threads = LWO__ROWQ_THREADS;
        if (threads < 32) threads = 32;
        smem = (unsigned)(LWO__ROWQ_RING * K * lwo_dtype_size(xt));
        snprintf(name, sizeof name, "lwo_k_quantize_rows_ring_%s", lwo__kname(xt));
        if ((r = lwo__module_function(ctx, ctx->kernels, name, &fn)) != 0) return r;
        /* the function's limit, raised once to the most this path launches with: the kernel's own
           static shared memory comes on top of the dynamic bytes, so "past 48 KiB" cannot be told
           from smem alone (3 rows of 8192 bf16 are exactly 48 KiB, and the launch failed) */
        if (!ctx->rowq_smem[xi] && cap > 48u * 1024u) {
            LWO__CU(ctx, cuFuncSetAttribute(fn, LWO__CU_FUNC_ATTR_MAX_DYNAMIC_SMEM, (int)cap));
            ctx->rowq_smem[xi] = (unsigned)cap;
        }
        if (fit[0] == 0 || (unsigned)fit[1] != threads || (unsigned)fit[2] != smem) {
            LWO__CU(ctx, cuOccupancyMaxActiveBlocksPerMultiprocessor(&fit[0], fn, (int)threads, smem));
            fit[1] = (int)threads; fit[2] = (int)smem;
            if (fit[0] < 1) fit[0] = 1;
        }
        if ((uint64_t)fit[0] * (uint64_t)ctx->info.sm_count < rows) grid = (unsigned)(fit[0] * ctx->info.sm_count);
        args[0] = &x; args[1] = &rows; args[2] = &K; args[3] = &smooth; args[4] = &q; args[5] = &Kq; args[6] = &scales; args[7] = &flags;
        return lwo__launch_fn(ctx, cs, fn, grid, 1, 1, threads, 1, 1, smem, args, name);
    }
    if ((smooth || hlog) && stage + hold <= cap) { flags |= LWO__ROWQ_STAGE | LWO__ROWQ_HOLD; smem = (unsigned)(stage + hold); }
    else if (stage <= cap) { flags |= LWO__ROWQ_STAGE; smem = (unsigned)stage; }
    snprintf(name, sizeof name, "lwo_k_quantize_rows_%s", lwo__kname(xt));
    if ((r = lwo__module_function(ctx, ctx->kernels, name, &fn)) != 0) return r;
    if (smem + 1024u > 48u * 1024u) LWO__CU(ctx, cuFuncSetAttribute(fn, LWO__CU_FUNC_ATTR_MAX_DYNAMIC_SMEM, (int)cap));
    args[0] = &x; args[1] = &K; args[2] = &perm; args[3] = &smooth; args[4] = &hlog; args[5] = &hs;
    args[6] = &q; args[7] = &Kq; args[8] = &scales; args[9] = &flags;
    return lwo__launch_fn(ctx, cs, fn, (unsigned)rows, 1, 1, 256, 1, 1, smem, args, name);
}

/* The checks of the public per-row quantizers (per output channel, per token). */
/* Per row: q (i8 or e4m3) and scales from x [rows, K], divided by smooth first when given. */
static lwo_result lwo__quantize_rows(lwo_context *ctx, lwo__CUstream cs, const lwo_tensor *x, const lwo_tensor *smooth,
                                     lwo_tensor *q, lwo_tensor *scales) {
    uint64_t rows, K, Kq;
    if (x->ndim != 2 || q->ndim != 2) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: per row, desc.src and desc.dst must be 2-D [rows, K]");
    if (q->dtype != LWO_DTYPE_I8 && q->dtype != LWO_DTYPE_F8_E4M3)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.dst has dtype %s; per row it must be i8 or f8_e4m3", lwo_dtype_name(q->dtype));
    rows = x->shape[0]; K = x->shape[1]; Kq = q->shape[1];
    if (q->shape[0] != rows || Kq < K) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.dst is [%llu, %llu]; it must be [%llu, >= %llu]",
                                                        (unsigned long long)q->shape[0], (unsigned long long)Kq, (unsigned long long)rows, (unsigned long long)K);
    if (scales->dtype != LWO_DTYPE_F32 || scales->numel != rows) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.scales must be f32 with %llu elements", (unsigned long long)rows);
    if (smooth && (smooth->dtype != LWO_DTYPE_F32 || smooth->numel != K)) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.smooth must be f32 with %llu elements", (unsigned long long)K);
    if (rows > 0x7fffffffu) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: %llu rows is more than one launch takes", (unsigned long long)rows);
    return lwo__rowq_launch(ctx, cs, x->ptr, x->dtype, rows, K, 0, smooth ? smooth->ptr : 0, 0, 0, q->dtype == LWO_DTYPE_F8_E4M3, q->ptr, Kq, scales->ptr);
}

LWO_DEF lwo_result lwo_quantize(lwo_context *ctx, const lwo_quantize_desc *d) {
    lwo__CUstream cs = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if (!d) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: argument 'desc' is NULL");
    if ((r = lwo__check_tensor(ctx, d->src, "desc.src")) != 0 || (r = lwo__check_tensor(ctx, d->dst, "desc.dst")) != 0 ||
        (r = lwo__check_tensor(ctx, d->scales, "desc.scales")) != 0 || (d->smooth && (r = lwo__check_tensor(ctx, d->smooth, "desc.smooth")) != 0))
        return r;
    LWO__GET_STREAM(ctx, d->stream, cs);
    if (!lwo__is_float(d->src->dtype))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.src has dtype %s; it must be f32, f16 or bf16", lwo_dtype_name(d->src->dtype));
    if (!d->per_row) {
        if (d->smooth) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_quantize: desc.smooth applies per row only");
        return lwo__quantize_tensor(ctx, cs, d->src, d->dst, d->scales, d->compute_scale);
    }
    return lwo__quantize_rows(ctx, cs, d->src, d->smooth, d->dst, d->scales);
}

static unsigned lwo__grid_rows(lwo_context *ctx, uint64_t n) { return lwo__grid_for(ctx, n, 256); }

/* dst [rows, Kd] = pad(src [rows, K]) (* smooth per column), converting src's dtype to dst's. */
static lwo_result lwo__pad_launch(lwo_context *ctx, lwo__CUstream cs, lwo__CUdeviceptr src, lwo_dtype st, uint64_t rows,
                                  uint64_t K, lwo__CUdeviceptr smooth, lwo__CUdeviceptr dst, lwo_dtype dt, uint64_t Kd) {
    char name[64];
    void *args[6];
    if (lwo_dtype_size(st) == 1) {
        void *a[5];
        a[0] = &src; a[1] = &rows; a[2] = &K; a[3] = &dst; a[4] = &Kd;
        return lwo__launch(ctx, cs, "lwo_k_pad_rows_u8", lwo__grid_rows(ctx, rows * Kd), 1, 256, 0, a);
    }
    args[0] = &src; args[1] = &rows; args[2] = &K; args[3] = &smooth; args[4] = &dst; args[5] = &Kd;
    snprintf(name, sizeof name, "lwo_k_pad_rows_%s_%s", lwo__kname(st), lwo__kname(dt));
    return lwo__launch(ctx, cs, name, lwo__grid_rows(ctx, rows * Kd), 1, 256, 0, args);
}

/* ==== 8. GEMMs =============================================================================== */
/* The reference of every lwo_linear path, then one GEMM call: the tensor-core kernels (mma.sync,
   and wgmma with TMA on sm_90a with its tile choice and split area) or the simple kernel. */
LWO_DEF lwo_result lwo_ref_linear(const lwo_ref_linear_desc *d) {
    const void *x = d ? d->x : NULL, *w = d ? d->w : NULL;
    void *y = d ? d->y : NULL;
    const lwo_dtype xt = d ? d->x_dtype : LWO_DTYPE_INVALID, wt = d ? d->w_dtype : LWO_DTYPE_INVALID, yt = d ? d->y_dtype : LWO_DTYPE_INVALID;
    const uint64_t M = d ? d->M : 0, N = d ? d->N : 0, K = d ? d->K : 0;
    const uint64_t ldx = d && d->ldx ? d->ldx : K, ldw = d && d->ldw ? d->ldw : K;
    const float *sx = d ? d->x_scales : NULL, *sw = d ? d->w_scales : NULL, *bias = d ? d->bias : NULL;
    uint64_t m, n, k;
    int exact = xt == LWO_DTYPE_I8 && wt == LWO_DTYPE_I8;
    if (!x || !w || !y || !lwo__is_float(yt) || ldx < K || ldw < K) return LWO_ERROR_INVALID_ARGUMENT;
    if (!exact && !((lwo__is_float(xt) || xt == LWO_DTYPE_F8_E4M3 || xt == LWO_DTYPE_F8_E5M2) &&
                    (lwo__is_float(wt) || wt == LWO_DTYPE_F8_E4M3 || wt == LWO_DTYPE_F8_E5M2)))
        return LWO_ERROR_INVALID_ARGUMENT;
    for (m = 0; m < M; m++)
        for (n = 0; n < N; n++) {
            float v;
            if (exact) {
                const int8_t *a = (const int8_t *)x + m * ldx, *b = (const int8_t *)w + n * ldw;
                int64_t acc = 0;
                for (k = 0; k < K; k++) acc += (int32_t)a[k] * (int32_t)b[k];
                v = (float)(int32_t)acc; /* the GPU's s32 accumulator (no overflow for K < 133000) */
            } else {
                double acc = 0.0;
                for (k = 0; k < K; k++) acc += (double)lwo_ref_load(x, xt, m * ldx + k) * (double)lwo_ref_load(w, wt, n * ldw + k);
                v = (float)acc;
            }
            if (sx) v = v * sx[m];
            if (sw) v = v * sw[n];
            if (bias) v = v + bias[n];
            lwo_ref_store(y, yt, m * N + n, v);
        }
    return LWO_SUCCESS;
}

/* One GEMM's arguments: y [M, N] = epi(A B^T), acc * a_scales[m] * b_scales[n] + bias[n]. */
typedef struct lwo__gemm_args {
    lwo__CUstream stream;
    lwo_dtype op;                         /* A's and B's dtype: f16, bf16, f8_e4m3 or i8 */
    lwo__CUdeviceptr a;                   /* A [M, *]: rows lda elements apart, the first a_k valid */
    uint64_t lda, a_k;
    lwo__CUdeviceptr b;                   /* B [N, kpad] */
    uint64_t kpad;
    uint64_t M, N;
    lwo__CUdeviceptr a_scales, b_scales;  /* f32 per row of A, per row of B (0: none) */
    lwo__CUdeviceptr bias;                /* [N] of bias_kind (lwo__gemm_kind), 0: none */
    int bias_kind;
    lwo__CUdeviceptr y;                   /* [M, N] of y_kind (lwo__gemm_kind) */
    int y_kind;
    int may_split;                        /* the caller uses the workspace, whose split area the Hopper
                                             GEMMs may then use; calls that do not may run on several
                                             streams at once */
    int mma_sync_only;                    /* never the Hopper kernels: a LoRA's GEMMs, whose y_kind may
                                             carry the accumulate bit (4) only the others know */
    int b_fp8;                            /* 1 (e4m3), 2 (e5m2): B is [N, kpad] fp8 codes of an upcast
                                             weight, which the Hopper kernels turn into op (f16 or bf16)
                                             on chip; b_scales is then its one f32 scale. Only where
                                             lwo__gemm_fp8_ok says so */
} lwo__gemm_args;
/* The kernels' code for a float dtype (f32 0, f16 1, bf16 2), i8 3, anything else 4. */
static int lwo__gemm_kind(lwo_dtype t) {
    switch (t) {
    case LWO_DTYPE_F32: return 0;
    case LWO_DTYPE_F16: return 1;
    case LWO_DTYPE_BF16: return 2;
    case LWO_DTYPE_I8: return 3;
    default: return 4;
    }
}

/* The split area of the Hopper GEMMs (lwo_desc.gemm_split): a 32-bit counter per tail tile and
   warpgroup, 16 bytes a CTA, then a 128 x 256 tile of 32-bit partial sums per CTA
   (lwo_gemm_wg_body). The counters must be zero before a GEMM: each launch leaves them so, and a new
   area's are zeroed on the stream of the GEMM that made it (or by lwo_streaming_plan, which lays the
   arena out again). Before any plan the first GEMM that splits makes it, where the arena has room,
   and not inside a capture (lwo_linear's graphs count their kernels); after a plan it exists only
   if the plan reserved it. A GEMM that finds none does not split. LWO__SPLIT_SLOT: a CTA's partial
   sums, in elements (kernels.cuh.inc's SPLIT test has the same bound). */
#define LWO__SPLIT_SLOT (128u * 256u)
static uint64_t lwo__split_bytes(const lwo_context *ctx) {
    const uint64_t n = (uint64_t)(ctx->info.sm_count > 0 ? ctx->info.sm_count : 0);
    return (16 * n + 255) / 256 * 256 + n * LWO__SPLIT_SLOT * 4;
}
static lwo_result lwo__split_zero(lwo_context *ctx, lwo__CUstream cs) {
    LWO__CU(ctx, cuMemsetD32Async(ctx->arena + ctx->split_off, 0, (size_t)ctx->info.sm_count * 4, cs));
    return LWO_SUCCESS;
}
static lwo_result lwo__split_area(lwo_context *ctx, lwo__CUstream cs, lwo__CUdeviceptr *out) {
    *out = 0;
    if (!ctx->split_size) {
        char keep[LWO__ERROR_CAP];
        if (ctx->planned || ctx->lsink || ctx->capturing) return LWO_SUCCESS;
        memcpy(keep, ctx->error, sizeof keep);
        if (lwo__arena_alloc(ctx, lwo__split_bytes(ctx), &ctx->split_off, &ctx->split_size, "the GEMMs' split area") != 0) {
            if (!ctx->split_refused) lwo__log(ctx, LWO_LOG_INFO, "GEMMs do not split their last rounds: %s", ctx->error);
            ctx->split_refused = 1;
            ctx->split_size = 0;
            memcpy(ctx->error, keep, sizeof keep);
            return LWO_SUCCESS;
        }
        {
            lwo_result r = lwo__split_zero(ctx, cs);
            if (r) { lwo__arena_free(ctx, ctx->split_off, ctx->split_size); ctx->split_size = 0; return r; }
        }
    }
    *out = ctx->arena + ctx->split_off;
    return LWO_SUCCESS;
}

/* The sm_90a GEMMs (kernels.cuh.inc, "Hopper GEMM"): on a device lwo compiles for sm_90a, unless
   the desc asks for mma.sync, for a y the paired stores may write 8 bytes at a time, and sizes the
   copy engine's 32-bit coordinates reach. The tensor-core path's alignment checks apply as well. */
static int lwo__gemm_wg_ok(const lwo_context *ctx, uint64_t M, uint64_t N, lwo__CUdeviceptr y) {
    return strcmp(ctx->info.arch, "sm_90a") == 0 && ctx->desc.gemm_kernels != 1 && (y & 15u) == 0 &&
           M < 0x7fffff00u && N < 0x7fffff00u;
}

/* Whether lwo_desc.gemm_kernels asks for an fp8 upcast weight (codes at b, 16-bit x in A as
   lwo_linear passes it: 16-byte aligned rows) to go to the Hopper GEMM as it is stored
   (lwo__gemm_args.b_fp8) rather than through a 16-bit copy: 9 (and the forced tiles, 2-8), whose
   kernels convert it into shared memory (0.58-0.81x of the copy path on the H100, NOTES.md session
   30), and 10-13, the register-A kernels where y allows. The default takes the register-A kernels
   by shape (lwo__gemm_fp8_regs_default). */
#define LWO__WG_FP8_SLOTS 2u   /* the kernels' staging slots for fp8 B (LWO_WG_FP8_SLOTS) */
#define LWO__GEMM_FP8_STORED 9 /* lwo_desc.gemm_kernels: the tile per shape, fp8 weights read as stored */
#define LWO__GEMM_FP8_REGS 10  /* ... by the register-A kernels where they apply (lwo__gemm_wgu); */
#define LWO__GEMM_FP8_REGS_LAST 13   /* 11..13 force their tiles (lwo__wgu_tiles) */
#define LWO__GEMM_FP8_COPY 14  /* the tile per shape, fp8 weights always through the 16-bit copy */
static int lwo__gemm_fp8_ok(const lwo_context *ctx, uint64_t M, uint64_t N, lwo__CUdeviceptr b, lwo__CUdeviceptr y) {
    return ctx->desc.gemm_kernels >= 2 && ctx->desc.gemm_kernels <= LWO__GEMM_FP8_REGS_LAST && (b & 15u) == 0 &&
           lwo__gemm_wg_ok(ctx, M, N, y);
}
/* Whether this device and lwo_desc.gemm_kernels read fp8 upcast weights as stored at all (the
   shape and pointers aside): what the planner and the kernel-variant choice go by. */
static int lwo__fp8_weights_as_stored(const lwo_context *ctx) { return lwo__gemm_fp8_ok(ctx, 1, 1, 0, 0); }

/* A 2-D tensor map over `rows` rows of `row_bytes` valid bytes, `pitch` bytes apart, read in boxes
   of box_bytes x box_rows rows, with the swizzle of that width the wgmma descriptors expect (box
   bytes 128 or 64), or none (`plain`: fp8 codes staged for conversion); reads past either edge
   return zeros. */
static lwo_result lwo__tensor_map(lwo_context *ctx, void *map, lwo__CUdeviceptr base, uint64_t row_bytes, uint64_t rows,
                                  uint64_t pitch, unsigned box_rows, unsigned box_bytes, int plain) {
    enum { U8 = 0, NO_INTERLEAVE = 0, SWIZZLE_NONE = 0, SWIZZLE_64B = 2, SWIZZLE_128B = 3, L2_256B = 3, OOB_ZERO = 0 };
    uint64_t dims[2], strides[1];
    unsigned box[2], estr[2] = { 1, 1 };
    lwo__CUresult rc;
    dims[0] = row_bytes; dims[1] = rows; strides[0] = pitch;
    box[0] = box_bytes; box[1] = box_rows;
    rc = ctx->cu.cuTensorMapEncodeTiled(map, U8, 2, (void *)(uintptr_t)base, dims, strides, box, estr, NO_INTERLEAVE,
                                        plain ? SWIZZLE_NONE : box_bytes == 128 ? SWIZZLE_128B : SWIZZLE_64B, L2_256B, OOB_ZERO);
    return rc ? lwo__cuda_fail(ctx, rc, "cuTensorMapEncodeTiled") : LWO_SUCCESS;
}

/* The Hopper GEMM's tiles (kernels.cuh.inc, LWO_GEMM_WG_KERNELS): BM x BN, consumer warpgroups, the
   cluster's CTAs along M and N (cm x cn), and rate: the tile's speed per multiply-add relative to
   the cooperative 128 x 128, for 16-bit operands and for 8-bit ones (NOTES.md: forced tiles timed
   back to back at the benchmark's shapes). 8-bit, H200: 64 x 128 0.75-0.8x; the ping-pong 128 x 128
   0.96-1.11x (most where K is short and the epilogue it hides is a larger part), 1.26 in 2x1
   clusters (B shared: a quarter fewer bytes through L2); the clustered 128 x 256 0.80-0.95x. 8-bit,
   H100 (session 27, power-capped at about 1450 MHz under int8): 128 x 256 1.10-1.33x, ahead of the
   2x1 ping-pong at 8192^3 (int8 0.704 against 0.828 ms, fp8 0.744 against 0.829), which the H200
   timed level with it; so 128 x 256 has 1.32 and takes 8192^3 and the 1024-row shapes on both.
   16-bit MMAs run at half the rate on the same bytes, so the ping-pong tile's hidden epilogue and
   the clusters' saved L2 bytes matter less and the wide tile's fewer shared-memory reads per
   multiply-add (m64n256) more: 128 x 256 measured 1.03-1.10x of 128 x 128, the ping-pong tiles
   0.97-1.06x, the clustered 128 x 256 1.05x (session 21; bf16 8192^3: 128 x 256 1.387 ms against
   the 2x1 ping-pong's 1.520). The 192 x 192 tile in 2x1 clusters (three consumer warpgroups;
   cuBLAS's choice at the DiT shapes) fills 132 multiprocessors in 2.9 rounds at 4608 x 3072 where
   128 x 256 takes 3.3 (4) and the 2x1 ping-pong 6.6 (7); measured (H100, forced, one run): bf16
   0.117 / 0.453 / 0.429 ms at 4608 x 3072 x 3072 / x 12288 / 4608 x 12288 x 3072 against the best
   other tile's 0.141 / 0.479 / 0.503, int8 0.066 / 0.239 / 0.216 against 0.075 / 0.260 / 0.261,
   but at 8192^3 behind 128 x 256 (bf16 1.486 against 1.405, int8 0.728 against 0.706): per round
   of its area it runs as fast as 128 x 256 for 16-bit operands and 3% faster for 8-bit ones, which
   gives it the qkv shape 4608 x 9216 x 3072 (10 rounds of 128 x 256, 9 of it; the int8 stack of
   bench-stream 23.2 ms a pass with it there against 23.5-24.0 with 128 x 256, three alternating
   runs, H100) and leaves 8192^3 to 128 x 256. It never splits (its slot would not fit the split
   area's). */
typedef struct lwo__wg_tile {
    const char *suffix;
    unsigned bm, bn, cwg, pp, cm, cn, bk;   /* pp: ping-pong consumers */
    double rate[2];                         /* 16-bit, 8-bit */
} lwo__wg_tile;
static const lwo__wg_tile lwo__wg_tiles[LWO__WG_TILES] = {
    { "wg64", 64, 128, 1, 0, 1, 1, 128, { 0.78, 0.78 } }, { "wg128", 128, 128, 2, 0, 1, 1, 128, { 1.0, 1.0 } },
    { "wg256", 128, 256, 2, 0, 1, 1, 128, { 1.08, 1.32 } }, { "wgpp", 128, 128, 2, 1, 1, 1, 128, { 1.0, 1.2 } },
    { "wgpp2", 128, 128, 2, 1, 2, 1, 128, { 1.03, 1.26 } }, { "wg256c2", 128, 256, 2, 0, 2, 1, 64, { 1.04, 0.9 } },
    { "wg192c2", 192, 192, 3, 0, 2, 1, 128, { 1.08, 1.36 } } };

/* The operands of lwo_linear's GEMM (lwo__gemm_wg_tile's ops): 8-bit (W8A8), 16-bit, or 16-bit x
   with an upcast weight's fp8 codes read as stored (lwo__gemm_fp8_ok), whose conversion the
   consumers of a cooperative tile share and a ping-pong tile leaves to three warps. */
enum { LWO__OPS_16 = 0, LWO__OPS_8 = 1, LWO__OPS_FP8_B = 2 };

/* Whether a tile's partial sums fit the split area's slot of 128 x 256 per CTA (lwo__split_area). */
static int lwo__wg_can_split(const lwo__wg_tile *t) { return t->bm * t->bn <= LWO__SPLIT_SLOT; }

/* Units of work: a cluster's cm x cn tiles at a time. */
static uint64_t lwo__wg_units(const lwo__wg_tile *t, uint64_t M, uint64_t N) {
    uint64_t tm = (M + t->bm - 1) / t->bm, tn = (N + t->bn - 1) / t->bn;
    return ((tm + t->cm - 1) / t->cm) * ((tn + t->cn - 1) / t->cn);
}

/* The clusters a grid of tile t may have: one CTA per multiprocessor, or lwo_desc.gemm_split's
   cap (tests); the occupancy can lower it further (lwo__gemm_wg). */
static uint64_t lwo__wg_slots(const lwo_context *ctx, const lwo__wg_tile *t) {
    uint64_t cl = t->cm * t->cn, cap = (uint64_t)ctx->info.sm_count;
    if (ctx->desc.gemm_split > 0 && (uint64_t)ctx->desc.gemm_split < cap) cap = (uint64_t)ctx->desc.gemm_split;
    return cap / cl ? cap / cl : 1;
}

/* The rounds of units `slots` clusters take: whole rounds (a partly filled last round costs a whole
   one), or with the last two rounds' units split along K (lwo_wg_sched in kernels.cuh.inc) the
   units over the slots, plus LWO__SPLIT_COST for the partial sums' trip through L2 and the
   unevenly cut units, where that is less and the grid runs at least LWO__SPLIT_MIN_ROUNDS whole
   rounds. *first: the first unit of the split tail (units when none). Splitting needs a caller
   that may (`split`: lwo__gemm_wg), a tile of at most 128 x 256 (its slot in the split area) and
   at least two slices of K.
   Measured (H200, ping-pong 2x1 clusters, the default then forced off, timed in the order
   on, off, off, on, the card idle before each figure): at 8192^3 (31.03 rounds) splitting took
   int8 0.729 against 0.731-0.737 ms and fp8 0.776-0.777 against 0.785-0.788, at 4608 x 3072 x 12288
   (26.2 rounds) within 1% either way; at the 4608-row shapes (6.55 rounds) it was 2-3% slower (0.074
   against 0.072 ms at 4608 x 3072 x 3072 int8), at 1024 x 3072 x 12288 (5.8 rounds) 5% slower. A trace
   of every CTA's items at 4608 x 3072 x 3072 (one run, before the epilogue went through the copy
   engine) showed why: the split tail's K slices took 0.50 us each against 0.38-0.42 in whole
   units, the short items leaving the other warpgroup's epilogue exposed, so the tail ended later
   than the half-empty last round it replaced. */
#define LWO__SPLIT_COST 0.15
#define LWO__SPLIT_MIN_ROUNDS 16
static double lwo__wg_rounds(const lwo_context *ctx, const lwo__wg_tile *t, uint64_t units, uint64_t slots, uint64_t ktiles,
                             int split, uint64_t *first) {
    const uint64_t whole = (units + slots - 1) / slots;
    const double even = (double)units / (double)slots + LWO__SPLIT_COST;
    *first = units;
    if (!split || ctx->desc.gemm_split < 0 || !lwo__wg_can_split(t) || ktiles < 2 || units <= slots || units % slots == 0 ||
        (ctx->desc.gemm_split == 0 && (even >= (double)whole || units / slots < LWO__SPLIT_MIN_ROUNDS)))
        return (double)whole;
    *first = (units / slots - 1) * slots;
    return even;
}

/* Tile choice: the tile whose estimated time is least, the time being the rounds of units the
   persistent grid runs (lwo__wg_rounds; a round is one tile a CTA) times the tile's area over its
   rate for the operands' width; on a tie the later tile in the table. akb: the bytes of K; split:
   whether the call may split (lwo__wg_rounds); ops: LWO__OPS_* (fp8 B: no ping-pong tile).
   lwo_desc.gemm_kernels 2..8 forces one (tests, benchmarks); lwo_desc.gemm_split > 0 (always split)
   leaves out the tiles that cannot. */
static const lwo__wg_tile *lwo__gemm_wg_tile(const lwo_context *ctx, uint64_t M, uint64_t N, uint64_t akb, int split, int ops) {
    const lwo__wg_tile *best = NULL;
    double best_t = 0;
    int i;
    if (ctx->desc.gemm_kernels >= 2 && ctx->desc.gemm_kernels < 2 + LWO__WG_TILES) return &lwo__wg_tiles[ctx->desc.gemm_kernels - 2];
    for (i = LWO__WG_TILES - 1; i >= 0; i--) {
        const lwo__wg_tile *t = &lwo__wg_tiles[i];
        uint64_t first;
        double rounds, time;
        if ((split && ctx->desc.gemm_split > 0 && !lwo__wg_can_split(t)) || (ops == LWO__OPS_FP8_B && t->pp)) continue;
        rounds = lwo__wg_rounds(ctx, t, lwo__wg_units(t, M, N), lwo__wg_slots(ctx, t), (akb + t->bk - 1) / t->bk, split, &first);
        time = rounds * t->bm * t->bn / t->rate[ops == LWO__OPS_8];
        if (!best || time < best_t) { best = t; best_t = time; }
    }
    return best;
}

/* The shared memory lwo_gemm_wg_body puts before its stages: 16 bytes of barriers for each of
   LWO_WG_MAX_STAGES (16) stages, the column tables, with fp8 B the staging slots' barriers (16 bytes
   a slot), up to the next 1024-byte boundary; with ytma a 64-row output buffer of 128 columns (64
   where the tile's are not a multiple of 128) per consumer warpgroup; with fp8 B the staging slots
   (bn rows of bk / 2 codes each). */
static unsigned lwo__wg_smem_head(const lwo__wg_tile *tl, int ytma, int fp8) {
    return (16u * 16u + tl->cwg * tl->bn * 8u + (fp8 ? 16u * LWO__WG_FP8_SLOTS : 0) + 1023u) / 1024u * 1024u +
           (ytma ? tl->cwg * 64u * (tl->bn % 128 ? 64u : 128u) * 2u : 0) + (fp8 ? LWO__WG_FP8_SLOTS * tl->bn * tl->bk / 2u : 0);
}

/* What the Hopper GEMMs (lwo__gemm_wg, lwo__gemm_wgu) share before a launch: their function, given
   all the shared memory a block may have (need: the least the tile takes), that limit set once per
   function in *set (a launch may be inside a capture). */
static lwo_result lwo__gemm_hopper_fn(lwo_context *ctx, const char *variant, const char *name, unsigned need, unsigned *set,
                                      lwo__CUfunction *fn) {
    const unsigned smem = (unsigned)ctx->info.max_smem_per_block;
    lwo_module *gm = NULL;
    lwo_result r;
    if (ctx->info.max_smem_per_block < 0 || smem < need)
        return lwo__fail(ctx, LWO_ERROR_UNSUPPORTED, "lwo_linear: the Hopper GEMM %s needs %u bytes of shared memory; the device gives %d",
                         name, need, ctx->info.max_smem_per_block);
    if ((r = lwo__gemm_module(ctx, variant, &gm)) != 0) return r;
    if ((r = lwo__module_function(ctx, gm, name, fn)) != 0) return r;
    if (*set != smem) {
        LWO__CU(ctx, cuFuncSetAttribute(*fn, LWO__CU_FUNC_ATTR_MAX_DYNAMIC_SMEM, (int)smem));
        *set = smem;
    }
    return LWO_SUCCESS;
}

/* The register-A kernels (kernels.cuh.inc, lwo_gemm_wgu_body): an fp8 upcast weight as wgmma's A
   operand from registers, y^T in tiles of channels x tokens. 16-bit y with whole 16-byte rows only
   (the copy engine stores it transposed), codes rows of whole 16-byte chunks, no split. */
static int lwo__gemm_wgu_ok(const lwo__gemm_args *g) {
    return g->b_fp8 && g->y_kind != 0 && (g->N * 2) % 16 == 0 && g->kpad % 16 == 0;
}
/* Their tiles, and the one a call takes: least whole rounds of the persistent grid times the tile's
   area over its rate (lwo__gemm_wg_tile's estimate; the rates of the 16-bit tiles of these sizes).
   128 x 256 leaves most multiprocessors idle in its last round at the 4608-token DiT shapes (432
   units on 132: 3.27 rounds), where 192 x 192 fills 2.9 of 3. */
typedef struct lwo__wgu_tile { unsigned channels, tokens, consumers; double rate; } lwo__wgu_tile;
static const lwo__wgu_tile lwo__wgu_tiles[LWO__WGU_TILES] = { { 128, 256, 2, 1.08 }, { 192, 192, 3, 1.08 }, { 128, 128, 2, 1.0 } };
static const lwo__wgu_tile *lwo__gemm_wgu_tile(const lwo_context *ctx, uint64_t M, uint64_t N) {
    const uint64_t sms = ctx->info.sm_count > 0 ? (uint64_t)ctx->info.sm_count : 1;
    const lwo__wgu_tile *best = NULL;
    double best_t = 0;
    int i;
    if (ctx->desc.gemm_kernels > LWO__GEMM_FP8_REGS && ctx->desc.gemm_kernels <= LWO__GEMM_FP8_REGS_LAST)
        return &lwo__wgu_tiles[ctx->desc.gemm_kernels - LWO__GEMM_FP8_REGS - 1];
    for (i = 0; i < LWO__WGU_TILES; i++) {
        const lwo__wgu_tile *t = &lwo__wgu_tiles[i];
        const uint64_t units = ((N + t->channels - 1) / t->channels) * ((M + t->tokens - 1) / t->tokens);
        const double time = (double)((units + sms - 1) / sms) * t->channels * t->tokens / t->rate;
        if (!best || time < best_t) { best = t; best_t = time; }
    }
    return best;
}
/* Whether the default (lwo_desc.gemm_kernels 0) reads an fp8 upcast weight by the register-A
   kernels: on sm_90a, y 16-bit (y_kind) with whole 16-byte rows, codes and y 16-byte aligned, and
   its tile's units fill at least one round of the grid. Measured on the H100 (NOTES.md, session
   31): 1.00-1.32x the copy path at every bench-gemm shape of M >= 1024, and at or above bf16
   F.linear; at 256 x 3072 x 3072 (48 units) 0.93x, so there the copy. */
static int lwo__gemm_fp8_regs_default(const lwo_context *ctx, uint64_t M, uint64_t N, lwo__CUdeviceptr b, lwo__CUdeviceptr y, int y_kind) {
    const lwo__wgu_tile *t;
    if (ctx->desc.gemm_kernels != 0 || y_kind == 0 || (N * 2) % 16 != 0 || (b & 15u) != 0 || !lwo__gemm_wg_ok(ctx, M, N, y)) return 0;
    t = lwo__gemm_wgu_tile(ctx, M, N);
    return ((N + t->channels - 1) / t->channels) * ((M + t->tokens - 1) / t->tokens) >= (uint64_t)ctx->info.sm_count;
}
static lwo_result lwo__gemm_wgu(lwo_context *ctx, const lwo__gemm_args *g) {
    const lwo__CUstream cs = g->stream;
    const uint64_t lda_b = g->lda * 2, akb = g->a_k * 2, ktiles = (akb + 127) / 128, N = g->N, M = g->M;
    const lwo__wgu_tile *tl = lwo__gemm_wgu_tile(ctx, M, N);
    const unsigned bm = tl->channels, bt = tl->tokens, stage = bm * 64u + bt * 128u;
    const unsigned threads = 128u * (tl->consumers + 1), smem = (unsigned)ctx->info.max_smem_per_block, head = 1024u + tl->consumers * 8192u;
    const uint64_t units = ((N + bm - 1) / bm) * ((M + bt - 1) / bt), grid = units < (uint64_t)ctx->info.sm_count ? units : (uint64_t)ctx->info.sm_count;
    const char *variant = g->op == LWO_DTYPE_F16 ? "f16_fp8" : "bf16_fp8";
    unsigned char maps[3 * 128 + 64];
    void *tmW = (void *)(((uintptr_t)maps + 63) & ~(uintptr_t)63), *tmX = (unsigned char *)tmW + 128, *tmY = (unsigned char *)tmW + 256;
    lwo__CUdeviceptr scale = g->b_scales, bias = g->bias;
    int bias_kind = g->bias_kind, out_kind = g->y_kind, b_fp8 = g->b_fp8;
    uint64_t Mv = M, Nv = N, kt = ktiles;
    char name[64];
    lwo__CUfunction fn;
    lwo_result r;
    void *args[11];
    if (M == 0 || N == 0) return LWO_SUCCESS;
    snprintf(name, sizeof name, "lwo_k_gemm_%s_wgu%u", variant, bt);
    if ((r = lwo__gemm_hopper_fn(ctx, variant, name, head + 3u * stage,
                                 &ctx->gemm_wgu_smem[lwo__gemm_variant_index(variant)][tl - lwo__wgu_tiles], &fn)) != 0) return r;
    if ((r = lwo__tensor_map(ctx, tmW, g->b, g->kpad, N, g->kpad, bm, 64, 0)) != 0) return r;   /* codes: 64 bytes of K a stage */
    if ((r = lwo__tensor_map(ctx, tmX, g->a, akb, M, lda_b, bt, 128, 0)) != 0) return r;
    if ((r = lwo__tensor_map(ctx, tmY, g->y, N * 2, M, N * 2, 64, 128, 0)) != 0) return r;
    args[0] = tmW; args[1] = tmX; args[2] = &Mv; args[3] = &Nv; args[4] = &kt; args[5] = &scale; args[6] = &bias; args[7] = &bias_kind;
    args[8] = tmY; args[9] = &out_kind; args[10] = &b_fp8;
    if ((r = lwo__launch_fn_ex(ctx, cs, fn, (unsigned)grid, 1, 1, threads, 1, 1, smem, args, name, 1)) != 0) return r;
    ctx->stats.gemm_fp8_weight++;
    return LWO_SUCCESS;
}

/* The grid is persistent: one block per multiprocessor at most, and for a clustered tile no more
   clusters than fit at once (cuOccupancyMaxActiveClusters, asked once per module and tile: a
   cluster that waited for another to finish would run its units after it). It gets all the shared
   memory a block may have: lwo_gemm_wg_body puts its barriers and column tables first and fills
   the rest with as many stages as fit (at least three, checked here). may_split: the call may split
   its last rounds (it is lwo_linear's and uses the workspace, so calls on other streams are
   ordered with it, as the split area needs). */
static lwo_result lwo__gemm_wg(lwo_context *ctx, const lwo__gemm_args *g) {
    const lwo__CUstream cs = g->stream;
    const lwo_dtype op = g->op;
    const int fp8 = g->b_fp8;   /* B's rows are fp8 codes: one byte an element */
    const uint64_t W = lwo_dtype_size(op), lda_b = g->lda * W, akb = g->a_k * W, ldb_b = g->kpad * (fp8 ? 1 : W);
    lwo__CUdeviceptr A = g->a, B = g->b, sa = g->a_scales, sw = g->b_scales, bias = g->bias, y = g->y;
    uint64_t M = g->M, N = g->N;
    int bias_kind = g->bias_kind, out_kind = g->y_kind;
    const int may_split = g->may_split;
    unsigned char maps[3 * 128 + 64]; /* three CUtensorMaps, which must be 64-byte aligned */
    void *tmA = (void *)(((uintptr_t)maps + 63) & ~(uintptr_t)63), *tmB = (unsigned char *)tmA + 128, *tmY = (unsigned char *)tmA + 256;
    const char *variant = fp8 ? (op == LWO_DTYPE_F16 ? "f16_fp8" : "bf16_fp8") : op == LWO_DTYPE_I8 ? "s8" : lwo__kname(op);
    const lwo__wg_tile *tl = lwo__gemm_wg_tile(ctx, M, N, akb, may_split, fp8 ? LWO__OPS_FP8_B : W == 1 ? LWO__OPS_8 : LWO__OPS_16);
    const unsigned cl = tl->cm * tl->cn;
    unsigned threads = 128u * (tl->cwg + 1), smem = (unsigned)ctx->info.max_smem_per_block;
    /* a 16-bit y whose rows are whole 16-byte chunks is stored by the copy engine (lwo_wg_epi_pack) */
    int ytma = out_kind != 0 && (N * 2) % 16 == 0;
    unsigned head = lwo__wg_smem_head(tl, ytma, fp8), stage = (tl->bm + tl->bn) * tl->bk;
    uint64_t units = lwo__wg_units(tl, M, N), ktiles = (akb + tl->bk - 1) / tl->bk, slots = lwo__wg_slots(ctx, tl), sk_first;
    lwo__CUdeviceptr area = 0;
    unsigned grid;
    const int v = lwo__gemm_variant_index(variant);   /* the module's index, for the per-tile caches */
    char name[64];
    lwo__CUfunction fn;
    lwo_result r;
    void *args[16];
    int b_fp8 = fp8;
    if (M == 0 || N == 0) return LWO_SUCCESS;
    /* each CTA of a cluster copies a 1/cn slice of the A tile and a 1/cm slice of the B tile (fp8 B:
       the same K as A's bk bytes, in half the bytes, unswizzled) */
    if ((r = lwo__tensor_map(ctx, tmA, A, akb, M, lda_b, tl->bm / tl->cn, tl->bk, 0)) != 0) return r;
    if ((r = lwo__tensor_map(ctx, tmB, B, ldb_b, N, ldb_b, tl->bn / tl->cm, fp8 ? tl->bk / 2 : tl->bk, fp8)) != 0) return r;
    if (ytma && (r = lwo__tensor_map(ctx, tmY, y, N * 2, M, N * 2, 64, 128, 0)) != 0) return r;   /* boxes of 64 rows x 64 columns */
    if (!ytma) memset(tmY, 0, 128);
    snprintf(name, sizeof name, "lwo_k_gemm_%s_%s", variant, tl->suffix);
    if ((r = lwo__gemm_hopper_fn(ctx, variant, name, head + 3u * stage, &ctx->gemm_smem[v][tl - lwo__wg_tiles], &fn)) != 0) return r;
    if (cl > 1) {
        int *fit = &ctx->gemm_clusters[v][tl - lwo__wg_tiles];
        if (*fit == 0) {
            lwo__launch_config lc;
            memset(&lc, 0, sizeof lc);
            lc.gridDimX = (unsigned)(slots * cl); lc.gridDimY = lc.gridDimZ = 1;
            lc.blockDimX = threads; lc.blockDimY = lc.blockDimZ = 1; lc.sharedMemBytes = smem; lc.hStream = cs;
            LWO__CU(ctx, cuOccupancyMaxActiveClusters(fit, fn, &lc));
            if (*fit < 1) {
                *fit = 0;
                return lwo__fail(ctx, LWO_ERROR_UNSUPPORTED, "lwo_linear: no cluster of %u CTAs of %s fits on the device", cl, name);
            }
            lwo__log(ctx, LWO_LOG_INFO, "%s: %d clusters of %u CTAs fit at once on %d multiprocessors", name, *fit, cl, ctx->info.sm_count);
        }
        if ((uint64_t)*fit < slots) slots = (uint64_t)*fit;
    }
    grid = (unsigned)((units < slots ? units : slots) * cl);
    lwo__wg_rounds(ctx, tl, units, slots, ktiles, may_split, &sk_first);
    if (sk_first < units && ((r = lwo__split_area(ctx, cs, &area)) != 0 || !area)) {
        if (r) return r;
        sk_first = units;   /* no room for the split area, or inside a capture */
    }
    args[0] = tmA; args[1] = tmB; args[2] = &M; args[3] = &N; args[4] = &ktiles; args[5] = &sa; args[6] = &sw;
    args[7] = &bias; args[8] = &bias_kind; args[9] = &y; args[10] = &out_kind; args[11] = &sk_first; args[12] = &area;
    args[13] = tmY; args[14] = &ytma; args[15] = &b_fp8;
    if ((r = lwo__launch_fn_ex(ctx, cs, fn, grid, 1, 1, threads, 1, 1, smem, args, name, 1)) != 0) return r;
    if (sk_first < units) ctx->stats.gemm_splits++;
    if (fp8) ctx->stats.gemm_fp8_weight++;
    return LWO_SUCCESS;
}

/* One GEMM: the tensor-core kernels when the arch has them, else lwo_k_gemm_simple. */
static lwo_result lwo__gemm(lwo_context *ctx, const lwo__gemm_args *g) {
    const lwo__CUstream cs = g->stream;
    const lwo_dtype op = g->op;
    lwo__CUdeviceptr A = g->a, B = g->b, sa = g->a_scales, sw = g->b_scales, bias = g->bias, y = g->y;
    uint64_t lda = g->lda, a_k = g->a_k, kpad = g->kpad, M = g->M, N = g->N;
    int bias_kind = g->bias_kind, out_kind = g->y_kind;
    int cc = ctx->info.cc_major * 10 + ctx->info.cc_minor;
    int tc = cc >= 80 && (op != LWO_DTYPE_F8_E4M3 || cc >= 89) && (A & 15u) == 0 && (B & 15u) == 0;
    uint64_t W = lwo_dtype_size(op);
    if (tc && ((lda * W) % 16 != 0 || (a_k * W) % 16 != 0)) tc = 0;
    if (tc && !g->mma_sync_only && lwo__gemm_wg_ok(ctx, M, N, y)) {
        const int gk = ctx->desc.gemm_kernels;   /* fp8 codes go to the register-A kernels by default and at 10-13 */
        if (g->b_fp8 && (gk == 0 || (gk >= LWO__GEMM_FP8_REGS && gk <= LWO__GEMM_FP8_REGS_LAST)) && lwo__gemm_wgu_ok(g))
            return lwo__gemm_wgu(ctx, g);
        return lwo__gemm_wg(ctx, g);
    }
    if (g->b_fp8)   /* the caller asked lwo__gemm_fp8_ok first */
        return lwo__fail(ctx, LWO_ERROR_UNSUPPORTED, "lwo_linear: an fp8 weight read as stored needs the sm_90a GEMMs");
    if (tc) {
        char name[64];
        uint64_t lda_b = lda * W, akb = a_k * W, ldb_b = kpad * W;
        uint64_t big = ((M + 127) / 128) * ((N + 127) / 128);
        int small = big < (uint64_t)ctx->info.sm_count;
        unsigned BMN = small ? 64 : 128, threads = small ? 128 : 256;
        unsigned smem = 3u * 2u * BMN * 64u;
        uint64_t gx = (N + BMN - 1) / BMN, gy = (M + BMN - 1) / BMN;
        lwo__CUfunction fn;
        lwo_result r;
        void *args[13];
        if (gy > 65535 || gx > 0x7fffffffu) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: M = %llu is more than one launch takes", (unsigned long long)M);
        args[0] = &A; args[1] = &lda_b; args[2] = &akb; args[3] = &B; args[4] = &ldb_b; args[5] = &M; args[6] = &N;
        args[7] = &sa; args[8] = &sw; args[9] = &bias; args[10] = &bias_kind; args[11] = &y; args[12] = &out_kind;
        snprintf(name, sizeof name, "lwo_k_gemm_%s_%s", op == LWO_DTYPE_I8 ? "s8" : lwo__kname(op), small ? "s" : "l");
        {
            lwo_module *gm = NULL;
            if ((r = lwo__gemm_module(ctx, op == LWO_DTYPE_I8 ? "s8" : lwo__kname(op), &gm)) != 0) return r;
            if ((r = lwo__module_function(ctx, gm, name, &fn)) != 0) return r;
        }
        return lwo__launch_fn(ctx, cs, fn, (unsigned)gx, (unsigned)gy, 1, threads, 1, 1, smem, args, name);
    } else {
        int ak = lwo__gemm_kind(op), bk = ak;
        uint64_t gx = (N + 15) / 16, gy = (M + 15) / 16;
        void *args[15];
        if (gy > 65535 || gx > 0x7fffffffu) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: M = %llu is more than one launch takes", (unsigned long long)M);
        args[0] = &A; args[1] = &ak; args[2] = &lda; args[3] = &B; args[4] = &bk; args[5] = &kpad; args[6] = &M; args[7] = &N;
        args[8] = &a_k; args[9] = &sa; args[10] = &sw; args[11] = &bias; args[12] = &bias_kind; args[13] = &y; args[14] = &out_kind;
        return lwo__launch(ctx, cs, "lwo_k_gemm_simple", (unsigned)gx, (unsigned)gy, 256, 0, args);
    }
}

/* ==== 9. Weights and residency =============================================================== */
/* A weight is a matrix in one storage format; where its bytes live is its residency: a host
   home (a pinned copy, or the caller's registered memory), and an item, what the streaming
   engine moves, made of the home's byte ranges. */
/* ---- host homes ----------------------------------------------------------------------------- */
/* Host homes of weights. A home is where a weight's bytes live in host RAM while the GPU does not
   hold them: a pinned copy (cuMemHostAlloc, counted against desc.pinned_cap), or the caller's own
   memory (a mapped checkpoint, say) registered with the driver read-only, which transfers as fast
   as pinned memory without a second copy in RAM; when the driver refuses either, a pageable copy
   or the caller's memory as it is, with a warning, since transfers from it run at a fraction of
   the bus speed and cannot be captured in a graph. */
typedef enum lwo__home_kind { LWO__HOME_PINNED = 1, LWO__HOME_REGISTERED, LWO__HOME_PAGEABLE_COPY, LWO__HOME_BORROWED } lwo__home_kind;

typedef struct lwo__home {
    lwo__home_kind kind;
    void *ptr;            /* what transfers read */
    uint64_t bytes;
    void *reg_base;       /* the page-aligned range registered, for LWO__HOME_REGISTERED */
    size_t reg_len;
    lwo__host_reg *shared; /* LWO__HOME_REGISTERED inside a shared registration (reg_base unused) */
} lwo__home;

static lwo_result lwo__home_make(lwo_context *ctx, const void *src, uint64_t bytes, int borrow, lwo__home *h) {
    memset(h, 0, sizeof *h);
    h->bytes = bytes;
    if (borrow && (h->shared = lwo__host_reg_find(ctx, src, bytes)) != NULL) {
        h->shared->refs++;
        h->ptr = (void *)src;
        h->kind = LWO__HOME_REGISTERED;
        return LWO_SUCCESS;
    }
    if (borrow) {
        uint64_t ps = lwo__page_size();
        uintptr_t a = (uintptr_t)src, base = a / (uintptr_t)ps * (uintptr_t)ps, end = (a + (uintptr_t)bytes + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
        lwo__CUresult rc = ctx->cu.cuMemHostRegister((void *)base, (size_t)(end - base), 0x08 /* CU_MEMHOSTREGISTER_READ_ONLY */);
        h->ptr = (void *)src;
        if (rc == 0) { h->kind = LWO__HOME_REGISTERED; h->reg_base = (void *)base; h->reg_len = (size_t)(end - base); return LWO_SUCCESS; }
        lwo__log(ctx, LWO_LOG_WARN, "the driver would not register %llu bytes of caller memory (error %d): transfers from it will be slow and cannot be captured in a graph",
                 (unsigned long long)bytes, rc);
        h->kind = LWO__HOME_BORROWED;
        return LWO_SUCCESS;
    }
    if (ctx->pinned_bytes + bytes <= ctx->desc.pinned_cap && ctx->cu.cuMemHostAlloc(&h->ptr, (size_t)bytes, 0) == 0) {
        ctx->pinned_bytes += bytes;
        h->kind = LWO__HOME_PINNED;
    } else {
        lwo__log(ctx, LWO_LOG_WARN, "pinning %llu more bytes would pass lwo_desc.pinned_cap (%llu) or was refused: this weight stays in pageable memory",
                 (unsigned long long)bytes, (unsigned long long)ctx->desc.pinned_cap);
        h->ptr = LWO_MALLOC((size_t)bytes);
        if (!h->ptr) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a %llu-byte weight copy", (unsigned long long)bytes);
        h->kind = LWO__HOME_PAGEABLE_COPY;
    }
    if (src) memcpy(h->ptr, src, (size_t)bytes);
    return LWO_SUCCESS;
}

static void lwo__home_free(lwo_context *ctx, lwo__home *h) {
    switch (h->kind) {
    case LWO__HOME_PINNED: ctx->cu.cuMemFreeHost(h->ptr); ctx->pinned_bytes -= h->bytes; break;
    case LWO__HOME_REGISTERED:
        if (h->shared) lwo__host_reg_release(ctx, h->shared);
        else ctx->cu.cuMemHostUnregister(h->reg_base);
        break;
    case LWO__HOME_PAGEABLE_COPY: LWO_FREE(h->ptr); break;
    default: break;
    }
    memset(h, 0, sizeof *h);
}

/* ---- items ---------------------------------------------------------------------------------- */
#define LWO__PARTS 3

/* An item is what streams: up to three byte ranges of host memory (weight, then bias, then scales)
   laid out at 256-byte aligned offsets in device memory, resident in its own arena storage or
   brought into the staging ring while it is in use (section 10). Items live as long as the
   context: a destroyed weight's item is dead but keeps its id, which the learned use order names. */
typedef struct lwo__item lwo__item;
struct lwo__item {
    const void *host[LWO__PARTS];
    uint64_t bytes[LWO__PARTS], offset[LWO__PARTS];
    uint64_t total;        /* device bytes, parts at 256-byte aligned offsets */
    int force;             /* 0 auto, 1 resident, 2 streamed */
    int joined;            /* parts from this one on lie in one host block as on the device (3: none) */
    int resident;
    lwo__CUdeviceptr dev;  /* resident storage, or its place in the ring while it has one */
    uint64_t arena_off, arena_size;
    int fill;              /* index of its fill in the ring, -1 when in none */
    int acquired;
    int dead;              /* its weight was destroyed; the id stays so the order stays valid */
    uint32_t id;
};

/* Registers host byte ranges as one streamable item (the weight code calls this). force: 0 let
   the plan decide, 1 always resident, 2 always streamed. The host memory must outlive the item. */
static lwo_result lwo__item_create(lwo_context *ctx, const void *const host[LWO__PARTS], const uint64_t bytes[LWO__PARTS],
                                   int force, lwo__item **out) {
    lwo__item *it;
    int p;
    it = (lwo__item *)LWO_MALLOC(sizeof *it);
    if (!it) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(it, 0, sizeof *it);
    for (p = 0; p < LWO__PARTS; p++) {
        it->host[p] = host[p];
        it->bytes[p] = host[p] ? bytes[p] : 0;
        it->offset[p] = it->total;
        it->total += (it->bytes[p] + LWO__ALIGN - 1) / LWO__ALIGN * LWO__ALIGN;
    }
    it->force = force;
    it->joined = LWO__PARTS;
    it->fill = -1;
    {
        lwo__item **ni = (lwo__item **)lwo__grow(ctx->items, ctx->nitems, &ctx->capitems, sizeof *ni, 64);
        if (!ni) { LWO_FREE(it); return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); }
        ctx->items = ni;
    }
    it->id = (uint32_t)ctx->nitems;
    ctx->items[ctx->nitems++] = it;
    *out = it;
    return LWO_SUCCESS;
}

/* Says that the item's parts from `first` on lie in one host block laid out as on the device. */
static void lwo__item_join_parts(lwo__item *it, int first) { it->joined = first; }

/* Makes item it readable by kernels enqueued next on the compute stream; returns its device base. */
static uint64_t lwo__item_part_offset(const lwo__item *it, int part) { return it->offset[part]; }

/* Its weight is gone: the item keeps its id (the learned order refers to it) but holds nothing. A
   ring fill that held it is a remnant from now on (lwo__fill_item): its bytes stay taken until
   overwritten. */
static void lwo__item_kill(lwo_context *ctx, lwo__item *it) {
    int p;
    if (it->arena_size) lwo__arena_free(ctx, it->arena_off, it->arena_size);
    for (p = 0; p < LWO__PARTS; p++) { it->host[p] = NULL; it->bytes[p] = 0; }
    it->total = 0; it->arena_size = 0; it->fill = -1; it->dev = 0; it->resident = 0; it->acquired = 0;
    it->dead = 1;
}
static void lwo__items_free(lwo_context *ctx) {
    size_t i;
    for (i = 0; i < ctx->nitems; i++) LWO_FREE(ctx->items[i]);
    LWO_FREE(ctx->items);
    ctx->items = NULL;
    ctx->nitems = ctx->capitems = 0;
}

/* ---- LoRA factors --------------------------------------------------------------------------- */
/* A LoRA on a weight: y = x W^T + s (x A^T) B^T with A = down [rank, cols], B = up [rows, rank] and
   s = strength * alpha / rank. Each keeps a host copy of its factors in its weight's LoRA dtype
   (bf16 or f16); the weight's set concatenates them along the rank on the device, which is what the
   side path reads: down [R8, kpad] and up [rows, Rk] zero padded (R the total rank, R8 = R rounded
   up to 8, Rk = R8 rounded up to 64: the GEMMs' row and K granularity), and the f32 scale of each
   rank row (0 in the padding). Attaching and detaching rebuild the set; a strength changes only the
   scales, which graphs read by address. */
struct lwo_lora {
    uint32_t magic;
    lwo_weight *w;
    uint64_t rank;
    float alpha, strength;
    uint16_t *down, *up;      /* [rank, cols], [rows, rank] in the set's dtype */
};
#define LWO__MAGIC_LORA 0x6c776f4cu

typedef struct lwo__lora_set {
    lwo_lora **loras;
    size_t n, cap;
    lwo_dtype dtype;          /* bf16 or f16: x's dtype in lwo_linear, and the factors' */
    uint64_t R, R8, Rk;
    lwo_tensor *down, *up, *scales;
} lwo__lora_set;

static void lwo__lora_free(lwo_lora *l) {
    LWO_FREE(l->down);
    LWO_FREE(l->up);
    l->magic = 0;
    LWO_FREE(l);
}

static void lwo__lora_set_tensors_free(lwo_context *ctx, lwo__lora_set *set) {
    if (set->down) lwo__tensor_free(ctx, set->down);
    if (set->up) lwo__tensor_free(ctx, set->up);
    if (set->scales) lwo__tensor_free(ctx, set->scales);
    set->down = set->up = set->scales = NULL;
}

static void lwo__lora_set_free(lwo_context *ctx, lwo__lora_set *set) {
    size_t i;
    if (!set) return;
    for (i = 0; i < set->n; i++) lwo__lora_free(set->loras[i]);
    lwo__lora_set_tensors_free(ctx, set);
    LWO_FREE(set->loras);
    LWO_FREE(set);
}

/* ---- weights -------------------------------------------------------------------------------- */
struct lwo_weight {
    uint32_t magic;
    lwo_context *ctx;
    uint64_t rows, cols, kpad;
    lwo_format format;
    lwo_tensor *data, *scales, *bias, *smooth, *perm; /* smooth by position: permuted with perm */
    int hlog;         /* log2 of the Hadamard block, 0 for none */
    const void *host; /* the caller's data and its layout */
    lwo_dtype host_dtype;
    uint64_t host_bytes;
    struct lwo__item *item;  /* streamable weights (section 10): data, bias, scales travel together */
    lwo__home homes[3];
    struct lwo__lgraph *graphs; /* lwo_linear's graph cache (W8A8 formats), lwo_desc.graph_cache slots */
    int graphs_off;             /* a capture or update failed: plain launches for this weight */
    int planned;                /* the last lwo_streaming_plan reserved lwo_linear's workspace for it */
    uint64_t graph_clock;       /* LRU stamps */
    lwo__lora_set *lora;        /* its LoRAs, NULL for none */
    lwo_weight *prev, *next;
};
#define LWO__MAGIC_WEIGHT 0x6c776f57u

/* A weight's graph cache (lwo_linear's, section 11, captures and replays them): one cached
   quantize + GEMM chain of lwo_linear a slot. N and K are the weight's; the rest of what picks
   the kernels and their grids is the key, so a later call at the key only changes arguments. */
typedef struct lwo__lgraph {
    int used;                   /* 0: a free slot */
    uint64_t M;
    int xdt, ydt, bias_kind;    /* bias_kind -1: no bias */
    int y16;                    /* y 16-byte aligned (the Hopper GEMM needs it) */
    uint64_t stamp;
    lwo__CUgraph graph;
    lwo__CUgraphExec exec;
    lwo__lsink nodes;           /* the kernel nodes in launch order */
    int nnodes;                 /* how many the capture made */
} lwo__lgraph;

static int lwo__graph_slots(const lwo_context *ctx) { return ctx->desc.graph_cache > 0 ? ctx->desc.graph_cache : 4; }
static void lwo__lgraph_drop(lwo_context *ctx, lwo__lgraph *g) {
    if (!g->used) return;
    if (g->exec) ctx->cu.cuGraphExecDestroy(g->exec);
    if (g->graph) ctx->cu.cuGraphDestroy(g->graph);
    memset(g, 0, sizeof *g);
}
static void lwo__weight_graphs_free(lwo_context *ctx, lwo_weight *w) {
    int i;
    if (!w->graphs) return;
    for (i = 0; i < lwo__graph_slots(ctx); i++) lwo__lgraph_drop(ctx, &w->graphs[i]);
    LWO_FREE(w->graphs);
    w->graphs = NULL;
}

#define LWO__KPAD 64u

LWO_DEF const char *lwo_format_name(lwo_format f) {
    static const char *const n[LWO_FORMAT_COUNT] = { "keep", "bf16", "f16", "fp8_e4m3", "fp8_e5m2", "int8", "fp8_e4m3_w8a8", "f32" };
    return ((unsigned)f < (unsigned)LWO_FORMAT_COUNT) ? n[f] : "invalid";
}
static int lwo__format_w8a8(lwo_format f) { return f == LWO_FORMAT_INT8 || f == LWO_FORMAT_FP8_E4M3_W8A8; }
static int lwo__format_upcast(lwo_format f) { return f == LWO_FORMAT_FP8_E4M3 || f == LWO_FORMAT_FP8_E5M2; }
/* The operands (LWO__OPS_*) lwo_linear's GEMM has for a weight of format f. */
static int lwo__gemm_operands(const lwo_context *ctx, lwo_format f) {
    return lwo__format_w8a8(f) ? LWO__OPS_8 : lwo__format_upcast(f) && lwo__fp8_weights_as_stored(ctx) ? LWO__OPS_FP8_B : LWO__OPS_16;
}
/* The dtype a weight of format f is stored in. */
static lwo_dtype lwo__format_dtype(lwo_format f) {
    switch (f) {
    case LWO_FORMAT_BF16: return LWO_DTYPE_BF16;
    case LWO_FORMAT_F16: return LWO_DTYPE_F16;
    case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E4M3_W8A8: return LWO_DTYPE_F8_E4M3;
    case LWO_FORMAT_FP8_E5M2: return LWO_DTYPE_F8_E5M2;
    case LWO_FORMAT_INT8: return LWO_DTYPE_I8;
    case LWO_FORMAT_F32: return LWO_DTYPE_F32;
    default: return LWO_DTYPE_INVALID;   /* KEEP: no dtype of its own */
    }
}
/* A weight desc's format with KEEP resolved: the data's own (f32, and anything without a format of
   its own, as BF16, the nearest lwo stores); any other value as it is (lwo__weight_validate judges). */
static lwo_format lwo__weight_format(const lwo_weight_desc *d) {
    if (d->format != LWO_FORMAT_KEEP) return d->format;
    switch (d->data_dtype) {
    case LWO_DTYPE_F16: return LWO_FORMAT_F16;
    case LWO_DTYPE_F8_E4M3: return LWO_FORMAT_FP8_E4M3;
    case LWO_DTYPE_F8_E5M2: return LWO_FORMAT_FP8_E5M2;
    case LWO_DTYPE_I8: return LWO_FORMAT_INT8;
    default: return LWO_FORMAT_BF16;
    }
}
/* The stored row length: cols rounded up to a multiple of 64 and, with a Hadamard block of 2^hlog
   (the rotation runs over whole blocks), of the block. */
static uint64_t lwo__kpad(uint64_t cols, int hlog) {
    uint64_t a = (uint64_t)1 << hlog > LWO__KPAD ? (uint64_t)1 << hlog : LWO__KPAD;
    return (cols + a - 1) / a * a;
}

/* Every check of a weight desc that needs no GPU; cc = compute capability * 10 (e.g. 90). */
static lwo_result lwo__weight_validate(lwo_context *ctx, const lwo_weight_desc *d, int cc) {
    lwo_dtype dt;
    uint64_t n;
    if (!d) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: argument 'desc' is NULL");
    dt = d->data_dtype ? d->data_dtype : LWO_DTYPE_F32;
    if (d->rows == 0) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.rows is 0");
    if (d->cols == 0) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.cols is 0");
    if (d->rows > 0x7fffffffull * 64u || d->cols > ((uint64_t)1 << 31) || !lwo__mul_ok(d->rows, d->cols + 256u, &n) || n > ((uint64_t)1 << 40))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.rows x desc.cols (%llu x %llu) is too large",
                         (unsigned long long)d->rows, (unsigned long long)d->cols);
    if (!d->data) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.data is NULL");
    if ((int)d->format <= (int)LWO_FORMAT_KEEP || d->format >= LWO_FORMAT_F32)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.format (%d, %s) is not a weight's format%s", (int)d->format,
                         lwo_format_name(d->format), d->format == LWO_FORMAT_F32 ? ": lwo stores no weight as f32 (BF16 is the nearest)" : "");
    if (!(lwo__is_float(dt) || lwo__is_fp8(dt) || dt == LWO_DTYPE_I8))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.data_dtype %s is not f32, f16, bf16, f8_e4m3, f8_e5m2 or i8", lwo_dtype_name(dt));
    if (dt == LWO_DTYPE_I8 && d->format != LWO_FORMAT_INT8)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.data_dtype i8 needs desc.format LWO_FORMAT_INT8 (got %s)", lwo_format_name(d->format));
    if (dt == LWO_DTYPE_I8 && !d->row_scales)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.row_scales is NULL; i8 data needs its per-row scales");
    if (lwo__is_fp8(dt)) {
        int ok = (dt == LWO_DTYPE_F8_E4M3 && (d->format == LWO_FORMAT_FP8_E4M3 || d->format == LWO_FORMAT_FP8_E4M3_W8A8)) ||
                 (dt == LWO_DTYPE_F8_E5M2 && d->format == LWO_FORMAT_FP8_E5M2);
        if (!ok) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.data_dtype %s does not match desc.format %s (pre-quantized data must be stored as is)",
                                  lwo_dtype_name(dt), lwo_format_name(d->format));
    }
    if (!(d->scale >= 0.0f) || d->scale > 3.0e38f)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.scale must be 0 (meaning 1) or a positive finite number");
    if (d->scale != 0.0f && !lwo__is_fp8(dt))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.scale is set but desc.data_dtype %s is not fp8 (scales are computed for float data)", lwo_dtype_name(dt));
    if (d->row_scales && !(dt == LWO_DTYPE_I8 || (dt == LWO_DTYPE_F8_E4M3 && d->format == LWO_FORMAT_FP8_E4M3_W8A8)))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.row_scales is only for pre-quantized i8 or e4m3 W8A8 data");
    if (d->bias && !lwo__is_float(d->bias_dtype ? d->bias_dtype : LWO_DTYPE_F32))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.bias_dtype %s is not f32, f16 or bf16", lwo_dtype_name(d->bias_dtype));
    if (d->smooth && !lwo__format_w8a8(d->format))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.smooth applies to the W8A8 formats only (format is %s)", lwo_format_name(d->format));
    if (d->smooth) {
        uint64_t k;
        for (k = 0; k < d->cols; k++)
            if (!(d->smooth[k] > 0.0f) || d->smooth[k] > 3.0e38f)
                return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.smooth[%llu] is %g; it must be positive and finite", (unsigned long long)k, (double)d->smooth[k]);
    }
    if ((d->perm || d->hadamard) && !lwo__format_w8a8(d->format))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.%s applies to the W8A8 formats only (format is %s)",
                         d->perm ? "perm" : "hadamard", lwo_format_name(d->format));
    if ((d->perm || d->hadamard) && !lwo__is_float(dt))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.%s needs f32, f16 or bf16 data (got %s): lwo permutes and rotates W "
                         "before it quantizes it, and pre-quantized data cannot be rotated", d->perm ? "perm" : "hadamard", lwo_dtype_name(dt));
    if (d->hadamard && lwo__hadamard_log(d->hadamard) < 0)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.hadamard is %d; it must be 0 (no rotation) or a power of two from 2 to 256", d->hadamard);
    if (d->perm) {
        uint64_t at, prev;
        switch (lwo__perm_check(d->perm, d->cols, &at, &prev)) {
        case 1: return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.perm[%llu] is %ld; desc.perm must be a permutation of 0..%llu (cols - 1)",
                                 (unsigned long long)at, (long)d->perm[at], (unsigned long long)(d->cols - 1));
        case 2: return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.perm[%llu] = %ld repeats desc.perm[%llu]; desc.perm must be a permutation of 0..%llu (cols - 1)",
                                 (unsigned long long)at, (long)d->perm[at], (unsigned long long)prev, (unsigned long long)(d->cols - 1));
        case 3: return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "lwo_weight_create: out of host memory checking desc.perm");
        default: break;
        }
    }
    if (d->format == LWO_FORMAT_FP8_E4M3_W8A8 && cc < 89)
        return lwo__fail(ctx, LWO_ERROR_UNSUPPORTED, "lwo_weight_create: LWO_FORMAT_FP8_E4M3_W8A8 needs fp8 tensor cores (compute capability 8.9+); this device is %d.%d. "
                         "Use LWO_FORMAT_FP8_E4M3 (upcast) or LWO_FORMAT_INT8", cc / 10, cc % 10);
    return LWO_SUCCESS;
}

static void lwo__weight_free(lwo_context *ctx, lwo_weight *w) {
    int p;
    if (w->prev) w->prev->next = w->next; else if (ctx->weights == w) ctx->weights = w->next;
    if (w->next) w->next->prev = w->prev;
    lwo__weight_graphs_free(ctx, w);
    lwo__lora_set_free(ctx, w->lora);
    if (w->item) lwo__item_kill(ctx, w->item);
    for (p = 0; p < 3; p++) if (w->homes[p].kind) lwo__home_free(ctx, &w->homes[p]);
    if (w->data) lwo__tensor_free(ctx, w->data);
    if (w->scales) lwo__tensor_free(ctx, w->scales);
    if (w->bias) lwo__tensor_free(ctx, w->bias);
    if (w->smooth) lwo__tensor_free(ctx, w->smooth);
    if (w->perm) lwo__tensor_free(ctx, w->perm);
    w->magic = 0;
    LWO_FREE(w);
}

static lwo_result lwo__weight_build(lwo_context *ctx, const lwo_weight_desc *d, lwo_weight *w) {
    lwo__CUstream cs = ctx->compute;
    lwo_dtype dt = d->data_dtype ? d->data_dtype : LWO_DTYPE_F32;
    uint64_t N = d->rows, K = d->cols, Kp = w->kpad;
    lwo_tensor *src = NULL, *tmp = NULL, *btmp = NULL;
    lwo_result r;
    lwo__CUdeviceptr sm;
    if ((r = lwo__tensor2(ctx, dt, N, K, &src)) != 0) goto done;
    if ((r = lwo_tensor_upload(ctx, src, d->data, src->bytes)) != 0) goto done;
    if (d->perm) {
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_I32, K, 0, &w->perm)) != 0) goto done;
        if ((r = lwo_tensor_upload(ctx, w->perm, d->perm, K * 4)) != 0) goto done;
    }
    if (d->smooth) {
        /* the kernels read smooth by position, so with a permutation it goes up permuted */
        float *ps = NULL;
        if (d->perm) {
            uint64_t j;
            if (!(ps = (float *)LWO_MALLOC((size_t)K * 4))) { r = lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); goto done; }
            for (j = 0; j < K; j++) ps[j] = d->smooth[d->perm[j]];
        }
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, K, 0, &w->smooth)) == 0) r = lwo_tensor_upload(ctx, w->smooth, ps ? ps : d->smooth, K * 4);
        LWO_FREE(ps);
        if (r) goto done;
    }
    sm = w->smooth ? w->smooth->ptr : 0;
    switch (d->format) {
    case LWO_FORMAT_BF16: case LWO_FORMAT_F16: {
        lwo_dtype sd = d->format == LWO_FORMAT_BF16 ? LWO_DTYPE_BF16 : LWO_DTYPE_F16;
        if ((r = lwo__tensor2(ctx, sd, N, Kp, &w->data)) != 0) goto done;
        r = lwo__pad_launch(ctx, cs, src->ptr, dt, N, K, 0, w->data->ptr, sd, Kp);
        break;
    }
    case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: {
        lwo_dtype sd = d->format == LWO_FORMAT_FP8_E4M3 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_F8_E5M2;
        if ((r = lwo__tensor2(ctx, sd, N, Kp, &w->data)) != 0) goto done;
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, 1, 0, &w->scales)) != 0) goto done;
        if (lwo__is_fp8(dt)) {
            float s = d->scale != 0.0f ? d->scale : 1.0f;
            if ((r = lwo_tensor_upload(ctx, w->scales, &s, 4)) != 0) goto done;
            r = lwo__pad_launch(ctx, cs, src->ptr, dt, N, K, 0, w->data->ptr, sd, Kp);
        } else {
            if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, N, Kp, &tmp)) != 0) goto done;
            if ((r = lwo__pad_launch(ctx, cs, src->ptr, dt, N, K, 0, tmp->ptr, LWO_DTYPE_F32, Kp)) != 0) goto done;
            r = lwo__quantize_tensor(ctx, cs, tmp, w->data, w->scales, 1);
        }
        break;
    }
    case LWO_FORMAT_INT8: case LWO_FORMAT_FP8_E4M3_W8A8: {
        int fp8 = d->format == LWO_FORMAT_FP8_E4M3_W8A8;
        if ((r = lwo__tensor2(ctx, fp8 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_I8, N, Kp, &w->data)) != 0) goto done;
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, N, 0, &w->scales)) != 0) goto done;
        if (!lwo__is_float(dt)) {
            if (d->row_scales) r = lwo_tensor_upload(ctx, w->scales, d->row_scales, N * 4);
            else {
                uint32_t bits = lwo__f32_bits(d->scale != 0.0f ? d->scale : 1.0f);
                LWO__CU(ctx, cuMemsetD32Async(w->scales->ptr, bits, (size_t)N, cs));
            }
            if (r) goto done;
            r = lwo__pad_launch(ctx, cs, src->ptr, dt, N, K, 0, w->data->ptr, dt, Kp);
        } else /* the activations' prep, but W's columns multiplied by smooth */
            r = lwo__rowq_launch(ctx, cs, src->ptr, dt, N, K, w->perm ? w->perm->ptr : 0, sm, 1, w->hlog, fp8, w->data->ptr, Kp, w->scales->ptr);
        break;
    }
    default: r = lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: bad format"); break;
    }
    if (r) goto done;
    if (d->bias) {
        lwo_dtype bt = d->bias_dtype ? d->bias_dtype : LWO_DTYPE_F32;
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, N, 0, &w->bias)) != 0) goto done;
        if ((r = lwo__tensor2(ctx, bt, N, 0, &btmp)) != 0) goto done;
        if ((r = lwo_tensor_upload(ctx, btmp, d->bias, btmp->bytes)) != 0) goto done;
        if ((r = lwo__convert_launch(ctx, cs, btmp->ptr, bt, w->bias->ptr, LWO_DTYPE_F32, N, 1.0f, 0, "lwo_k_convert")) != 0) goto done;
    }
    LWO__CU(ctx, cuStreamSynchronize(cs));
done:
    if (r) ctx->cu.cuStreamSynchronize(cs); /* temporaries below may still be read by queued work */
    if (src) lwo__tensor_free(ctx, src);
    if (tmp) lwo__tensor_free(ctx, tmp);
    if (btmp) lwo__tensor_free(ctx, btmp);
    return r;
}

/* Turns a freshly built (resident) weight into a streamable one: its stored bytes move to a host
   home laid out as the device stores them, weight first, then bias, then scales (the order they
   travel in), so one copy moves them all; a borrowed weight keeps the caller's bytes, and its bias
   and scales share a home of their own. The arena storage goes back; the tensors stay as views
   that acquire points at the weight's current place. */
static lwo_result lwo__weight_make_streamable(lwo_context *ctx, lwo_weight *w, const lwo_weight_desc *d) {
    lwo_tensor *parts[3];
    const void *host[3];
    uint64_t bytes[3], off[3], total = 0;
    lwo_result r;
    int p, first = 0;
    parts[0] = w->data; parts[1] = w->bias; parts[2] = w->scales;
    for (p = 0; p < 3; p++) {
        off[p] = total;
        bytes[p] = parts[p] ? parts[p]->bytes : 0;
        total += (bytes[p] + LWO__ALIGN - 1) / LWO__ALIGN * LWO__ALIGN;
        host[p] = NULL;
    }
    if (d->borrow_host && parts[0]) {
        if ((r = lwo__home_make(ctx, d->data, bytes[0], 1, &w->homes[0])) != 0) return r;
        host[0] = w->homes[0].ptr;
        first = 1;
    }
    if (total > off[first]) {
        lwo__home *h = &w->homes[first];
        if ((r = lwo__home_make(ctx, NULL, total - off[first], 0, h)) != 0) return r;
        for (p = first; p < 3; p++) {
            if (!parts[p]) continue;
            host[p] = (unsigned char *)h->ptr + (off[p] - off[first]);
            if ((r = lwo_tensor_download(ctx, parts[p], (void *)host[p], bytes[p])) != 0) return r;
        }
    }
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    for (p = 0; p < 3; p++) {
        if (!parts[p]) continue;
        lwo__arena_free(ctx, parts[p]->arena_off, parts[p]->arena_size);
        parts[p]->arena_size = 0;
        parts[p]->ptr = 0;
    }
    if ((r = lwo__item_create(ctx, host, bytes, d->placement == LWO_PLACE_STREAMED ? 2 : 0, &w->item)) != 0) return r;
    lwo__item_join_parts(w->item, first);
    return LWO_SUCCESS;
}

/* Whether a weight goes straight to its host home (lwo__weight_build_host): it may stream, and its
   data already is what the device stores (the format's dtype; nothing to permute or rotate). */
static int lwo__weight_as_stored(const lwo_weight_desc *d) {
    return d->placement != LWO_PLACE_RESIDENT && (d->data_dtype ? d->data_dtype : LWO_DTYPE_F32) == lwo__format_dtype(d->format) &&
           !d->perm && !d->hadamard;
}

/* A streamable weight whose data is stored as it is: its home is laid out on the CPU as the device
   holds it (rows padded to kpad with zeros, then the bias widened to f32, then the scales), so
   making it takes no VRAM and no trip through the device; the bytes are the GPU path's (padding
   and the widening of a 16-bit bias are exact). With borrow_host the data stays in the caller's
   memory and only bias and scales get a home. smooth stays resident, as on the GPU path. */
static lwo_result lwo__weight_build_host(lwo_context *ctx, const lwo_weight_desc *d, lwo_weight *w) {
    const uint64_t N = d->rows, K = d->cols, Kp = w->kpad;
    const lwo_dtype dt = lwo__format_dtype(d->format);
    const size_t es = lwo_dtype_size(dt);
    const void *host[3];
    uint64_t bytes[3], off[3], total = 0, shape[2], i;
    lwo_tensor **parts[3];
    lwo_result r;
    int p, first = d->borrow_host ? 1 : 0;
    shape[0] = N; shape[1] = Kp;
    if ((r = lwo__tensor_new(ctx, dt, 2, shape, &w->data)) != 0) return r;
    if (d->bias && (r = lwo__tensor_new(ctx, LWO_DTYPE_F32, 1, &N, &w->bias)) != 0) return r;
    shape[0] = lwo__format_w8a8(d->format) ? N : 1;
    if (d->format != LWO_FORMAT_BF16 && d->format != LWO_FORMAT_F16 && (r = lwo__tensor_new(ctx, LWO_DTYPE_F32, 1, shape, &w->scales)) != 0) return r;
    if (d->smooth) {
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_F32, K, 0, &w->smooth)) != 0) return r;
        if ((r = lwo_tensor_upload(ctx, w->smooth, d->smooth, K * 4)) != 0) return r;
    }
    parts[0] = &w->data; parts[1] = &w->bias; parts[2] = &w->scales;
    for (p = 0; p < 3; p++) {
        off[p] = total;
        bytes[p] = *parts[p] ? (*parts[p])->bytes : 0;
        total += lwo__round_up(bytes[p], LWO__ALIGN);
        host[p] = NULL;
    }
    if (first) {   /* lwo__weight_check_borrow saw data as stored and K == Kp */
        if ((r = lwo__home_make(ctx, d->data, bytes[0], 1, &w->homes[0])) != 0) return r;
        host[0] = w->homes[0].ptr;
    }
    if (total > off[first]) {
        lwo__home *h = &w->homes[first];
        if ((r = lwo__home_make(ctx, NULL, total - off[first], 0, h)) != 0) return r;
        for (p = first; p < 3; p++) if (bytes[p]) host[p] = (uint8_t *)h->ptr + (off[p] - off[first]);
        if (!first)
            for (i = 0; i < N; i++) {
                uint8_t *row = (uint8_t *)h->ptr + i * Kp * es;
                memcpy(row, (const uint8_t *)d->data + i * K * es, (size_t)(K * es));
                memset(row + K * es, 0, (size_t)((Kp - K) * es));
            }
        if (d->bias) {
            lwo_dtype bt = d->bias_dtype ? d->bias_dtype : LWO_DTYPE_F32;
            float *b = (float *)host[1];
            for (i = 0; i < N; i++) b[i] = lwo_ref_load(d->bias, bt, i);
        }
        if (w->scales) {
            float *sc = (float *)host[2], one = d->scale != 0.0f ? d->scale : 1.0f;
            for (i = 0; i < w->scales->numel; i++) sc[i] = d->row_scales ? d->row_scales[i] : one;
        }
    }
    if ((r = lwo__item_create(ctx, host, bytes, d->placement == LWO_PLACE_STREAMED ? 2 : 0, &w->item)) != 0) return r;
    lwo__item_join_parts(w->item, first);
    return LWO_SUCCESS;
}

/* desc.borrow_host: the caller's bytes must be exactly what the device stores. */
static lwo_result lwo__weight_check_borrow(lwo_context *ctx, const lwo_weight_desc *d) {
    lwo_dtype dt = d->data_dtype ? d->data_dtype : LWO_DTYPE_F32, want = lwo__format_dtype(d->format);
    if (d->placement == LWO_PLACE_RESIDENT) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.borrow_host needs desc.placement AUTO or STREAMED");
    /* pre-quantized data with smooth is stored as it is (smooth divides the activations only) */
    if (dt != want || d->cols % LWO__KPAD != 0)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.borrow_host needs the data as stored: %s with cols a multiple of %u "
                         "(got %s, cols %llu)", lwo_dtype_name(want), LWO__KPAD, lwo_dtype_name(dt), (unsigned long long)d->cols);
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_weight_create(lwo_context *ctx, const lwo_weight_desc *user_desc, lwo_weight **out) {
    lwo_weight_desc resolved;
    const lwo_weight_desc *desc = &resolved;
    lwo_weight *w;
    lwo_result r;
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: argument 'out' is NULL");
    *out = NULL;
    if (!user_desc) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: argument 'desc' is NULL");
    resolved = *user_desc;
    resolved.format = lwo__weight_format(user_desc);
    if ((r = lwo__weight_validate(ctx, desc, ctx->info.cc_major * 10 + ctx->info.cc_minor)) != 0) return r;
    if ((int)desc->placement < (int)LWO_PLACE_RESIDENT || (int)desc->placement > (int)LWO_PLACE_STREAMED)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_weight_create: desc.placement (%d) is not an lwo_placement", (int)desc->placement);
    if (desc->borrow_host && (r = lwo__weight_check_borrow(ctx, desc)) != 0) return r;
    w = (lwo_weight *)LWO_MALLOC(sizeof *w);
    if (!w) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(w, 0, sizeof *w);
    w->magic = LWO__MAGIC_WEIGHT;
    w->ctx = ctx;
    w->rows = desc->rows;
    w->cols = desc->cols;
    w->hlog = desc->hadamard ? lwo__hadamard_log(desc->hadamard) : 0;
    w->kpad = lwo__kpad(desc->cols, w->hlog);
    w->format = desc->format;
    /* the GEMM variant lwo_linear will want for it (an upcast weight: bf16, the common x, read as
       stored on sm_90a), compiled with the first GEMM module the context builds */
    ctx->gemm_wanted |= 1u << lwo__gemm_variant_index(w->format == LWO_FORMAT_INT8 ? "s8" : w->format == LWO_FORMAT_FP8_E4M3_W8A8 ? "e4m3"
                                                      : w->format == LWO_FORMAT_F16 ? "f16"
                                                      : lwo__gemm_operands(ctx, w->format) == LWO__OPS_FP8_B ? "bf16_fp8" : "bf16");
    /* by default an upcast weight on sm_90a takes the register-A kernels (the fp8 module) where a
       call's tiles fill the grid and the copy (bf16) where not: both, so no call compiles mid-run
       (inside a graph capture, say) */
    if (lwo__format_upcast(w->format) && ctx->desc.gemm_kernels == 0 && lwo__gemm_wg_ok(ctx, 1, 1, 0))
        ctx->gemm_wanted |= 1u << lwo__gemm_variant_index("bf16_fp8");
    w->host = desc->data;
    w->host_dtype = desc->data_dtype ? desc->data_dtype : LWO_DTYPE_F32;
    w->host_bytes = desc->rows * desc->cols * lwo_dtype_size(w->host_dtype);
    w->next = ctx->weights;
    if (ctx->weights) ctx->weights->prev = w;
    ctx->weights = w;
    if (lwo__weight_as_stored(desc)) r = lwo__weight_build_host(ctx, desc, w);
    else {
        r = lwo__weight_build(ctx, desc, w);
        if (!r && desc->placement != LWO_PLACE_RESIDENT) r = lwo__weight_make_streamable(ctx, w, desc);
    }
    if (r) {
        char keep[LWO__ERROR_CAP];
        memcpy(keep, ctx->error, sizeof keep);
        lwo__weight_free(ctx, w);
        memcpy(ctx->error, keep, sizeof keep);
        return r;
    }
    *out = w;
    return LWO_SUCCESS;
}

static lwo_result lwo__check_weight(lwo_context *ctx, const lwo_weight *w) {
    if (!w) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'w' is NULL");
    if (w->magic != LWO__MAGIC_WEIGHT) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'w' is not a live lwo_weight");
    if (w->ctx != ctx) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'w' belongs to another lwo_context");
    return LWO_SUCCESS;
}

LWO_DEF void lwo_weight_destroy(lwo_context *ctx, lwo_weight *w) {
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !w) return;
    if (lwo__check_weight(ctx, w)) { lwo__log(ctx, LWO_LOG_WARN, "lwo_weight_destroy: %s", ctx->error); return; }
    /* queued lwo_linear calls may still read it: the stream-ordered arena reuse needs the device idle */
    if (ctx->cu.cuCtxSetCurrent && ctx->cuctx) { ctx->cu.cuCtxSetCurrent(ctx->cuctx); ctx->cu.cuCtxSynchronize(); }
    lwo__weight_free(ctx, w);
}

LWO_DEF lwo_result lwo_weight_get_info(lwo_context *ctx, const lwo_weight *w, lwo_weight_info *out) {
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    out->rows = w->rows; out->cols = w->cols; out->kpad = w->kpad; out->format = w->format;
    out->data = w->data; out->scales = w->scales; out->bias = w->bias; out->smooth = w->smooth;
    out->perm = w->perm; out->hadamard = w->hlog ? 1 << w->hlog : 0;
    switch (w->homes[0].kind) {
    case LWO__HOME_PINNED: out->host_home = LWO_HOME_PINNED; break;
    case LWO__HOME_REGISTERED: out->host_home = LWO_HOME_REGISTERED; break;
    case LWO__HOME_PAGEABLE_COPY: out->host_home = LWO_HOME_PAGEABLE_COPY; break;
    case LWO__HOME_BORROWED: out->host_home = LWO_HOME_BORROWED; break;
    default: out->host_home = LWO_HOME_NONE; break;
    }
    out->host_data = w->homes[0].ptr;
    out->lora_count = w->lora ? w->lora->n : 0;
    out->lora_rank = w->lora ? w->lora->R : 0;
    return LWO_SUCCESS;
}

/* ---- sizing: lwo_linear's workspace and a weight's device bytes ----------------------------- */
/* lwo_linear's workspace for x of M rows on a weight of format f, [N, Kp] as stored: W8A8 quantizes
   x into it (M x Kp codes, at the arena's granularity, then M f32 row scales); the fp8 upcast formats
   upcast W into it (N x Kp 16-bit); with `pad` (K % 8 != 0, or x not 16-byte aligned) x follows,
   copied with its rows padded to Kp (the tensor-core GEMMs read K in whole 16-byte chunks). */
static uint64_t lwo__linear_ws(lwo_format f, uint64_t M, uint64_t N, uint64_t Kp, int pad) {
    uint64_t b = 0;
    if (f == LWO_FORMAT_INT8 || f == LWO_FORMAT_FP8_E4M3_W8A8) return lwo__round_up(M * Kp, LWO__ALIGN) + M * 4;
    if (f == LWO_FORMAT_FP8_E4M3 || f == LWO_FORMAT_FP8_E5M2) b = lwo__round_up(N * Kp * 2, LWO__ALIGN);
    return pad ? b + M * Kp * 2 : b;
}

/* A call whose x does not fit the workspace runs in chunks of whole 64-row tiles: every chunk's rows
   of x and y then start 16-byte aligned, as the tensor-core paths need. */
#define LWO__CHUNK_ROWS 64u

/* The most rows of x a call can take at once in `bytes` of workspace: all M, or a multiple of
   LWO__CHUNK_ROWS below M; 0 when not even one chunk fits. */
static uint64_t lwo__linear_rows(lwo_format f, uint64_t M, uint64_t N, uint64_t Kp, int pad, uint64_t bytes) {
    uint64_t lo = 0, hi = (M + LWO__CHUNK_ROWS - 1) / LWO__CHUNK_ROWS;
    if (lwo__linear_ws(f, M, N, Kp, pad) <= bytes) return M;
    while (lo < hi) {   /* the need grows with the rows: the largest whole number of chunks that fits */
        uint64_t mid = (lo + hi + 1) / 2;
        if (lwo__linear_ws(f, mid * LWO__CHUNK_ROWS, N, Kp, pad) <= bytes) lo = mid; else hi = mid - 1;
    }
    return lo * LWO__CHUNK_ROWS;
}

/* What lwo_streaming_plan reserves for lwo_linear: the largest workspace of the weights' calls, and
   the split area when some call's GEMM would split. */
typedef struct lwo__reserve { uint64_t ws, split; } lwo__reserve;

/* Whether lwo_linear's GEMM on this weight splits its last rounds for some x of M <= max_rows rows
   (x 16-byte aligned): the tile lwo__gemm_wg would pick and its rounds, at every 64 rows (the tiles'
   granularity in M). Only the Hopper GEMMs split, and only calls that use the workspace. */
static int lwo__linear_splits(const lwo_context *ctx, lwo_format f, uint64_t max_rows, uint64_t N, uint64_t K, uint64_t Kp) {
    const int pad = K % 8 != 0;
    const uint64_t akb = lwo__format_w8a8(f) ? Kp : (pad ? Kp : K) * 2;
    uint64_t M = 0;
    if (strcmp(ctx->info.arch, "sm_90a") != 0 || ctx->desc.gemm_kernels == 1 || ctx->desc.gemm_split < 0 ||
        N >= 0x7fffff00u || !(lwo__format_w8a8(f) || lwo__format_upcast(f) || pad))
        return 0;
    while (M < max_rows && M < 0x7fffff00u) {
        const lwo__wg_tile *t;
        uint64_t first;
        M = M + 64 < max_rows ? M + 64 : max_rows;
        t = lwo__gemm_wg_tile(ctx, M, N, akb, 1, lwo__gemm_operands(ctx, f));
        lwo__wg_rounds(ctx, t, lwo__wg_units(t, M, N), lwo__wg_slots(ctx, t), (akb + t->bk - 1) / t->bk, 1, &first);
        if (first < lwo__wg_units(t, M, N)) return 1;
    }
    return 0;
}

/* Adds one weight's calls, x of up to max_rows rows (0: chunks of 64 rows), to the reservation. */
static void lwo__reserve_add(const lwo_context *ctx, lwo__reserve *rv, lwo_format f, uint64_t N, uint64_t K, uint64_t Kp,
                             uint64_t max_rows) {
    uint64_t need = lwo__linear_ws(f, max_rows ? max_rows : LWO__CHUNK_ROWS, N, Kp, K % 8 != 0);
    if (need > rv->ws) rv->ws = need;
    if (max_rows && !rv->split && lwo__linear_splits(ctx, f, max_rows, N, K, Kp)) rv->split = lwo__split_bytes(ctx);
}

/* The shape checks of a weight desc that need no context (lwo__weight_validate has them all). */
static int lwo__weight_shape_ok(const lwo_weight_desc *d) {
    uint64_t n;
    return d && d->rows && d->cols && d->rows <= 0x7fffffffull * 64u && d->cols <= ((uint64_t)1 << 31) &&
           lwo__mul_ok(d->rows, d->cols + 256u, &n) && n <= ((uint64_t)1 << 40) && (int)lwo__weight_format(d) > (int)LWO_FORMAT_KEEP &&
           lwo__weight_format(d) < LWO_FORMAT_F32 && (!d->hadamard || lwo__hadamard_log(d->hadamard) > 0);
}

LWO_DEF uint64_t lwo_linear_workspace_bytes(lwo_context *ctx, const lwo_weight_desc *descs, size_t count, uint64_t max_rows) {
    lwo__reserve rv = { 0, 0 };
    size_t i;
    if (lwo__enter(ctx) != LWO_SUCCESS || (count && !descs)) return 0;
    for (i = 0; i < count; i++) {
        const lwo_weight_desc *d = &descs[i];
        if (!lwo__weight_shape_ok(d)) return 0;
        lwo__reserve_add(ctx, &rv, lwo__weight_format(d), d->rows, d->cols, lwo__kpad(d->cols, d->hadamard ? lwo__hadamard_log(d->hadamard) : 0), max_rows);
    }
    return lwo__round_up(rv.ws, LWO__ALIGN) + rv.split;
}

LWO_DEF uint64_t lwo_weight_device_bytes(const lwo_weight_desc *d) {
    uint64_t N, K, Kp, b;
    if (!lwo__weight_shape_ok(d)) return 0;
    N = d->rows; K = d->cols; Kp = lwo__kpad(K, d->hadamard ? lwo__hadamard_log(d->hadamard) : 0);
    b = lwo__round_up(N * Kp * lwo_dtype_size(lwo__format_dtype(lwo__weight_format(d))), LWO__ALIGN);
    if (lwo__format_upcast(lwo__weight_format(d))) b += LWO__ALIGN;                  /* the scale */
    if (lwo__format_w8a8(lwo__weight_format(d))) b += lwo__round_up(N * 4, LWO__ALIGN); /* the row scales */
    if (d->bias) b += lwo__round_up(N * 4, LWO__ALIGN);
    if (d->smooth) b += lwo__round_up(K * 4, LWO__ALIGN);
    if (d->perm) b += lwo__round_up(K * 4, LWO__ALIGN);
    return b;
}

/* ---- LoRA: attach, strength, detach, merge, and lwo_linear's side path ----------------------- */
#define LWO__LORA_ROWS 8192   /* rows of x one side-path chunk takes, where the scratch has room */

LWO_DEF uint64_t lwo_lora_device_bytes(const lwo_weight_desc *d, uint64_t rank) {
    uint64_t Kp, R8, Rk;
    if (rank == 0 || !lwo__weight_shape_ok(d)) return 0;
    Kp = lwo__kpad(d->cols, d->hadamard ? lwo__hadamard_log(d->hadamard) : 0);
    R8 = lwo__round_up(rank, 8);
    Rk = lwo__round_up(R8, 64);
    return lwo__round_up(R8 * Kp * 2, LWO__ALIGN) + lwo__round_up(d->rows * Rk * 2, LWO__ALIGN) + lwo__round_up(R8 * 4, LWO__ALIGN);
}

LWO_DEF uint64_t lwo_lora_scratch_bytes(uint64_t rank) {
    return rank ? lwo__round_up(LWO__LORA_ROWS * lwo__round_up(rank, 8) * 2, LWO__ALIGN) : 0;
}

/* The LoRAs' dtype on weight w: a 16-bit weight's own (its x has that dtype), else the asked one. */
static lwo_dtype lwo__lora_dtype(const lwo_weight *w, lwo_dtype asked) {
    if (w->format == LWO_FORMAT_BF16) return LWO_DTYPE_BF16;
    if (w->format == LWO_FORMAT_F16) return LWO_DTYPE_F16;
    return asked ? asked : LWO_DTYPE_BF16;
}

/* s = strength * (alpha / rank), in f32, as documented. */
static float lwo__lora_scale(float strength, float alpha, uint64_t rank) { return strength * (alpha / (float)rank); }

/* Checks a desc against w (`fn` names the call); *st: the factors' dtype, *dt: the LoRAs'. */
static lwo_result lwo__lora_check(lwo_context *ctx, const lwo_weight *w, const lwo_lora_desc *d, const char *fn,
                                  lwo_dtype *st, lwo_dtype *dt) {
    if (!d) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: argument 'desc' is NULL", fn);
    if (ctx->capturing) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s inside a whole-pass capture: end the capture first", fn);
    if (d->rank == 0 || d->rank > 65536) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: rank %llu is not in 1..65536", fn, (unsigned long long)d->rank);
    if (!d->down || !d->up) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: 'down' and 'up' are required", fn);
    *st = d->dtype ? d->dtype : LWO_DTYPE_F32;
    if (!lwo__is_float(*st)) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: the factors' dtype must be f32, f16 or bf16 (it is %s)", fn, lwo_dtype_name(*st));
    if (d->compute_dtype && d->compute_dtype != LWO_DTYPE_BF16 && d->compute_dtype != LWO_DTYPE_F16)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: compute_dtype must be bf16 or f16 (it is %s)", fn, lwo_dtype_name(d->compute_dtype));
    *dt = lwo__lora_dtype(w, d->compute_dtype);
    if (d->compute_dtype && d->compute_dtype != *dt)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: a %s weight takes %s x, so its LoRAs compute in %s, not %s", fn, lwo_format_name(w->format),
                         lwo_dtype_name(*dt), lwo_dtype_name(*dt), lwo_dtype_name(d->compute_dtype));
    if (w->lora && w->lora->n && w->lora->dtype != *dt)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: the weight's LoRAs compute in %s; this one asks for %s", fn, lwo_dtype_name(w->lora->dtype), lwo_dtype_name(*dt));
    if (!(d->alpha >= 0.0f && d->alpha <= 3.0e38f) || !(d->strength >= -3.0e38f && d->strength <= 3.0e38f))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "%s: alpha must be finite and >= 0, strength finite (alpha %g, strength %g)", fn, (double)d->alpha, (double)d->strength);
    return LWO_SUCCESS;
}

/* n elements of dtype st as dt (bf16 or f16): the same bits where the dtypes match. */
static uint16_t *lwo__lora_copy(const void *src, lwo_dtype st, uint64_t n, lwo_dtype dt) {
    uint16_t *p = (uint16_t *)LWO_MALLOC((size_t)n * 2);
    uint64_t i;
    if (!p) return NULL;
    if (st == dt) { memcpy(p, src, (size_t)n * 2); return p; }
    for (i = 0; i < n; i++) {
        float v = lwo_ref_load(src, st, i);
        p[i] = dt == LWO_DTYPE_F16 ? lwo_ref_f32_to_f16(v) : lwo_ref_f32_to_bf16(v);
    }
    return p;
}

static lwo_result lwo__lora_scales_upload(lwo_context *ctx, lwo__lora_set *set) {
    float *h = (float *)LWO_MALLOC((size_t)set->R8 * sizeof(float));
    uint64_t off = 0, r;
    size_t i;
    lwo_result res;
    if (!h) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(h, 0, (size_t)set->R8 * sizeof(float));
    for (i = 0; i < set->n; i++) {
        const lwo_lora *l = set->loras[i];
        for (r = 0; r < l->rank; r++) h[off + r] = lwo__lora_scale(l->strength, l->alpha, l->rank);
        off += l->rank;
    }
    res = lwo_tensor_upload(ctx, set->scales, h, set->R8 * sizeof(float));
    LWO_FREE(h);
    return res;
}

/* The scratch holds LWO__LORA_ROWS rows of x A^T where the arena has room, at least 64. The device
   is idle (the caller synchronized). */
static lwo_result lwo__lora_scratch(lwo_context *ctx, uint64_t R8) {
    uint64_t want = LWO__LORA_ROWS * R8 * 2, least = 64 * R8 * 2;
    lwo_tensor *t = NULL;
    lwo_result r;
    if (ctx->lora_scratch && ctx->lora_scratch->bytes >= want) return LWO_SUCCESS;
    if (lwo__tensor2(ctx, LWO_DTYPE_U8, want, 0, &t) != 0) {
        if (ctx->lora_scratch && ctx->lora_scratch->bytes >= least) { ctx->error[0] = 0; return LWO_SUCCESS; }
        if ((r = lwo__tensor2(ctx, LWO_DTYPE_U8, least, 0, &t)) != 0) return r;
    }
    if (ctx->lora_scratch) lwo__tensor_free(ctx, ctx->lora_scratch);
    ctx->lora_scratch = t;
    return LWO_SUCCESS;
}

/* Lays the set's LoRAs side by side on the device. The new tensors are made before the old are
   freed, so a failure leaves the set as it was, unless `shrink` (a detach: the old go first, so
   the smaller set always fits). */
static lwo_result lwo__lora_rebuild(lwo_context *ctx, lwo_weight *w, int shrink) {
    lwo__lora_set *set = w->lora;
    uint64_t R = 0, R8, Rk, N = w->rows, K = w->cols, Kp = w->kpad, off = 0, i, n;
    uint16_t *down = NULL, *up = NULL;
    lwo_tensor *td = NULL, *tu = NULL, *ts = NULL;
    lwo_result r;
    size_t j;
    for (j = 0; j < set->n; j++) R += set->loras[j]->rank;
    LWO__CU(ctx, cuCtxSynchronize());   /* queued side paths read the old set and the scratch */
    if (shrink || R == 0) { lwo__lora_set_tensors_free(ctx, set); set->R = set->R8 = set->Rk = 0; }
    if (R == 0) return LWO_SUCCESS;
    R8 = lwo__round_up(R, 8);
    Rk = lwo__round_up(R8, 64);
    if ((r = lwo__lora_scratch(ctx, R8)) != 0) return r;
    down = (uint16_t *)LWO_MALLOC((size_t)(R8 * Kp * 2));
    up = (uint16_t *)LWO_MALLOC((size_t)(N * Rk * 2));
    if (!down || !up) { r = lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); goto done; }
    memset(down, 0, (size_t)(R8 * Kp * 2));
    memset(up, 0, (size_t)(N * Rk * 2));
    for (j = 0; j < set->n; j++) {
        const lwo_lora *l = set->loras[j];
        for (i = 0; i < l->rank; i++) memcpy(down + (off + i) * Kp, l->down + i * K, (size_t)K * 2);
        for (n = 0; n < N; n++) memcpy(up + n * Rk + off, l->up + n * l->rank, (size_t)l->rank * 2);
        off += l->rank;
    }
    if ((r = lwo__tensor2(ctx, set->dtype, R8, Kp, &td)) != 0 || (r = lwo__tensor2(ctx, set->dtype, N, Rk, &tu)) != 0 ||
        (r = lwo__tensor2(ctx, LWO_DTYPE_F32, R8, 0, &ts)) != 0 || (r = lwo_tensor_upload(ctx, td, down, td->bytes)) != 0 ||
        (r = lwo_tensor_upload(ctx, tu, up, tu->bytes)) != 0)
        goto done;
    lwo__lora_set_tensors_free(ctx, set);
    set->down = td; set->up = tu; set->scales = ts;
    td = tu = ts = NULL;
    set->R = R; set->R8 = R8; set->Rk = Rk;
    r = lwo__lora_scales_upload(ctx, set);
done:
    if (td) lwo__tensor_free(ctx, td);
    if (tu) lwo__tensor_free(ctx, tu);
    if (ts) lwo__tensor_free(ctx, ts);
    LWO_FREE(down);
    LWO_FREE(up);
    return r;
}

static lwo_result lwo__check_lora(lwo_context *ctx, const lwo_lora *l) {
    if (!l) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'lora' is NULL");
    if (l->magic != LWO__MAGIC_LORA) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'lora' is not a live lwo_lora");
    if (l->w->ctx != ctx) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'lora' belongs to another lwo_context");
    if (ctx->capturing) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "a LoRA cannot change inside a whole-pass capture: end the capture first");
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_lora_attach(lwo_context *ctx, lwo_weight *w, const lwo_lora_desc *d, lwo_lora **out) {
    lwo_dtype st, dt;
    lwo_lora *l;
    lwo__lora_set *set;
    void *grown;
    lwo_result r;
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_lora_attach: argument 'out' is NULL");
    *out = NULL;
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    if ((r = lwo__lora_check(ctx, w, d, "lwo_lora_attach", &st, &dt)) != 0) return r;
    if (!w->lora) {
        if (!(w->lora = (lwo__lora_set *)LWO_MALLOC(sizeof *w->lora))) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memset(w->lora, 0, sizeof *w->lora);
    }
    set = w->lora;
    if (!(grown = lwo__grow(set->loras, set->n, &set->cap, sizeof *set->loras, 4))) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    set->loras = (lwo_lora **)grown;
    if (!(l = (lwo_lora *)LWO_MALLOC(sizeof *l))) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(l, 0, sizeof *l);
    l->magic = LWO__MAGIC_LORA;
    l->w = w;
    l->rank = d->rank;
    l->alpha = d->alpha > 0.0f ? d->alpha : (float)d->rank;
    l->strength = d->strength;
    l->down = lwo__lora_copy(d->down, st, d->rank * w->cols, dt);
    l->up = lwo__lora_copy(d->up, st, w->rows * d->rank, dt);
    if (!l->down || !l->up) { lwo__lora_free(l); return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); }
    set->dtype = dt;
    set->loras[set->n++] = l;
    if ((r = lwo__lora_rebuild(ctx, w, 0)) != 0) { set->n--; lwo__lora_free(l); return r; }
    ctx->lora_epoch++;
    *out = l;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_lora_set_strength(lwo_context *ctx, lwo_lora *l, float strength) {
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_lora(ctx, l)) != 0) return r;
    if (!(strength >= -3.0e38f && strength <= 3.0e38f)) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_lora_set_strength: strength %g is not finite", (double)strength);
    LWO__CU(ctx, cuCtxSynchronize());   /* queued side paths read the scales */
    l->strength = strength;
    return lwo__lora_scales_upload(ctx, l->w->lora);
}

LWO_DEF lwo_result lwo_lora_detach(lwo_context *ctx, lwo_lora *l) {
    lwo__lora_set *set;
    lwo_result r;
    size_t i;
    LWO__ENTER(ctx);
    if ((r = lwo__check_lora(ctx, l)) != 0) return r;
    set = l->w->lora;
    for (i = 0; i < set->n && set->loras[i] != l; i++) {}
    memmove(set->loras + i, set->loras + i + 1, (set->n - i - 1) * sizeof *set->loras);
    set->n--;
    r = lwo__lora_rebuild(ctx, l->w, 1);
    lwo__lora_free(l);
    ctx->lora_epoch++;
    return r;
}

LWO_DEF lwo_result lwo_lora_merge(lwo_context *ctx, lwo_weight *w, const lwo_lora_desc *d) {
    lwo_dtype st, dt;
    uint64_t N, K, Kp, rank, r8, rk, i, k;
    uint16_t *a = NULL, *b = NULL, *down = NULL;
    float *sw = NULL, s;
    lwo_tensor *ta = NULL, *tb = NULL, *ts = NULL;
    lwo__gemm_args g;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    if ((r = lwo__lora_check(ctx, w, d, "lwo_lora_merge", &st, &dt)) != 0) return r;
    if ((w->format != LWO_FORMAT_BF16 && w->format != LWO_FORMAT_F16) || w->item)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_lora_merge: the weight is %s %s; a merge needs a resident bf16 or f16 weight "
                         "(lwo_lora_attach works on every weight)", w->item ? "streamable" : "resident", lwo_format_name(w->format));
    N = w->rows; K = w->cols; Kp = w->kpad; rank = d->rank;
    r8 = lwo__round_up(rank, 8); rk = lwo__round_up(r8, 64);
    s = lwo__lora_scale(d->strength, d->alpha > 0.0f ? d->alpha : (float)rank, rank);
    /* W [N, Kp] += (B [N, rank]) (A^T [Kp, rank])^T, scaled per column of W by s: the side path's
       up GEMM with B as the activations and A^T as the weight */
    a = (uint16_t *)LWO_MALLOC((size_t)(N * r8 * 2));
    b = (uint16_t *)LWO_MALLOC((size_t)(Kp * rk * 2));
    sw = (float *)LWO_MALLOC((size_t)Kp * sizeof(float));
    down = lwo__lora_copy(d->down, st, rank * K, dt);
    if (!a || !b || !sw || !down) { r = lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); goto done; }
    memset(a, 0, (size_t)(N * r8 * 2));
    memset(b, 0, (size_t)(Kp * rk * 2));
    {
        uint16_t *up = lwo__lora_copy(d->up, st, N * rank, dt);
        if (!up) { r = lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); goto done; }
        for (i = 0; i < N; i++) memcpy(a + i * r8, up + i * rank, (size_t)rank * 2);
        LWO_FREE(up);
    }
    for (i = 0; i < rank; i++)
        for (k = 0; k < K; k++) b[k * rk + i] = down[i * K + k];
    for (k = 0; k < Kp; k++) sw[k] = s;
    if ((r = lwo__tensor2(ctx, dt, N, r8, &ta)) != 0 || (r = lwo__tensor2(ctx, dt, Kp, rk, &tb)) != 0 ||
        (r = lwo__tensor2(ctx, LWO_DTYPE_F32, Kp, 0, &ts)) != 0 || (r = lwo_tensor_upload(ctx, ta, a, ta->bytes)) != 0 ||
        (r = lwo_tensor_upload(ctx, tb, b, tb->bytes)) != 0 || (r = lwo_tensor_upload(ctx, ts, sw, ts->bytes)) != 0)
        goto done;
    memset(&g, 0, sizeof g);
    g.stream = ctx->compute; g.op = dt; g.a = ta->ptr; g.lda = g.a_k = r8; g.b = tb->ptr; g.kpad = rk; g.M = N; g.N = Kp;
    g.b_scales = ts->ptr; g.y = w->data->ptr; g.y_kind = lwo__gemm_kind(dt) | 4; g.mma_sync_only = 1;
    if ((r = lwo__gemm(ctx, &g)) != 0) goto done;
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
done:
    if (ta) lwo__tensor_free(ctx, ta);
    if (tb) lwo__tensor_free(ctx, tb);
    if (ts) lwo__tensor_free(ctx, ts);
    LWO_FREE(a); LWO_FREE(b); LWO_FREE(sw); LWO_FREE(down);
    return r;
}

/* lwo_linear's side path, after W's GEMM wrote y on `cs`: t = x A^T (scaled per rank row) into the
   scratch, then y += t B^T, a row chunk at a time. */
static lwo_result lwo__lora_apply(lwo_context *ctx, lwo__CUstream cs, const lwo_tensor *x, const lwo_weight *w, const lwo_tensor *y) {
    const lwo__lora_set *set = w->lora;
    uint64_t M = x->shape[0], K = w->cols, N = w->rows, rows, m0;
    lwo__gemm_args g;
    lwo_result r;
    if (!set || set->R == 0 || M == 0 || N == 0) return LWO_SUCCESS;
    if (x->dtype != set->dtype)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: the weight's LoRAs compute in %s and 'x' is %s (lwo_lora_desc.compute_dtype)",
                         lwo_dtype_name(set->dtype), lwo_dtype_name(x->dtype));
    rows = ctx->lora_scratch->bytes / (set->R8 * 2);
    for (m0 = 0; m0 < M; m0 += rows) {
        uint64_t mc = M - m0 < rows ? M - m0 : rows;
        memset(&g, 0, sizeof g);
        g.stream = cs; g.op = set->dtype; g.a = x->ptr + m0 * K * 2; g.lda = g.a_k = K; g.b = set->down->ptr; g.kpad = w->kpad;
        g.M = mc; g.N = set->R8; g.b_scales = set->scales->ptr; g.y = ctx->lora_scratch->ptr; g.y_kind = lwo__gemm_kind(set->dtype);
        g.mma_sync_only = 1;
        if ((r = lwo__gemm(ctx, &g)) != 0) return r;
        memset(&g, 0, sizeof g);
        g.stream = cs; g.op = set->dtype; g.a = ctx->lora_scratch->ptr; g.lda = g.a_k = set->R8; g.b = set->up->ptr; g.kpad = set->Rk;
        g.M = mc; g.N = N; g.y = y->ptr + m0 * N * lwo_dtype_size(y->dtype); g.y_kind = lwo__gemm_kind(y->dtype) | 4; g.mma_sync_only = 1;
        if ((r = lwo__gemm(ctx, &g)) != 0) return r;
    }
    return LWO_SUCCESS;
}

/* ==== 10. Streaming ========================================================================== */
/* The planner, then the engine: the staging ring, the offload streams, the protocol, passes. */
/* The planner. Streamed bytes per pass are what the time of an offloaded pass is made of, so the
   plan keeps as many bytes resident as fit; the ring's slot size is set by the largest streamed
   weight, so each candidate slot size (each distinct weight size, largest first) is tried: every
   weight larger than it must be resident, the rest of the room is filled with the largest weights
   that fit, and the candidate that streams the fewest bytes wins (ties: more slots). What room is
   left then widens the slots, so more small weights pack into them. */

/* Which weights of one size stay resident decides where the streamed ones fall in the pass. In
   index (use) order the resident ones would be the first blocks and the streamed ones the last: the
   copy engine would idle through the first part of the pass and the compute stream wait through
   the rest (measured: bf16 at half the stack resident waited 11.6% of the pass, 1.107x its bound).
   So each run of equal sizes in `order` (indices ascending) is reordered by the bit-reversed rank:
   any prefix of it, the resident part, is then spread evenly along the pass. */
static int lwo__plan_spread(const uint64_t *sizes, size_t *order, size_t n) {
    size_t *key = (size_t *)LWO_MALLOC((n + 1) * sizeof *key), i = 0, j, e, g, r, bits, k;
    if (!key) return 0;
    while (i < n) {
        for (e = i; e < n && sizes[order[e]] == sizes[order[i]]; e++) {}
        g = e - i;
        for (bits = 0; ((size_t)1 << bits) < g; bits++) {}
        for (r = 0; r < g; r++) {
            size_t t = r, v = 0;
            for (k = 0; k < bits; k++, t >>= 1) v = (v << 1) | (t & 1);
            key[i + r] = v;
        }
        for (r = i + 1; r < e; r++) { /* insertion sort of the run by key (keys are distinct) */
            size_t o = order[r], kv = key[r];
            for (j = r; j > i && key[j - 1] > kv; j--) { order[j] = order[j - 1]; key[j] = key[j - 1]; }
            order[j] = o; key[j] = kv;
        }
        i = e;
    }
    LWO_FREE(key);
    return 1;
}

/* The room no resident weight took goes to the slots: room to pack more small weights, up to a ring
   that holds every streamed byte (past that a wider slot moves nothing sooner, and the room stays
   the caller's). */
static uint64_t lwo__plan_widen(const uint64_t *sizes, size_t n, const uint8_t *resident, uint64_t room, uint64_t slot, int slots) {
    uint64_t res = 0, streamed = 0, most, wide = slot;
    size_t i;
    if (slots <= 0) return slot;
    for (i = 0; i < n; i++) { if (resident[i]) res += sizes[i]; else streamed += sizes[i]; }
    most = lwo__round_up((streamed + (uint64_t)slots - 1) / (uint64_t)slots, LWO__ALIGN);
    if (room > res + (uint64_t)slots * slot) wide += (room - res - (uint64_t)slots * slot) / (uint64_t)slots / LWO__ALIGN * LWO__ALIGN;
    if (wide > most) wide = most;
    return wide > slot ? wide : slot;
}

/* The timed planner. Fewest bytes streamed is the right aim only while transfers outrun compute
   everywhere; where they do not, a plan that keeps the most bytes resident can still leave the
   compute stream waiting: the ring it leaves is small, so transfers run only a few weights ahead,
   and the streamed weights can bunch where there is little compute to hide them (measured on a
   Flux-sized model: the modulation weights, read by one-row products, and the double blocks'
   weights streamed while the single blocks' stayed resident, 1.19x of the resident step with
   transfers half as long as it). Given each use's compute time and the host-to-device rate, the
   planner plays candidate plans through a model of the ring and keeps the fastest.
   The model does what lwo__item_fill and lwo__item_acquire do, on a clock: transfers in use order,
   one after another at the rate (plus a fixed cost each), each placed at the ring's head by the
   slot rule and started once every fill it overwrites has been read; a use waits for its
   transfer, then computes for its use_ms, and its fill counts as read at the end of that. Three
   passes run back to back from an empty ring: the first is a graph's replay (it starts with
   nothing in the ring: a replay cannot carry transfers over from the one before), the third the
   eager steady state (each pass's last uses prefetch the next one's first weights). */
#define LWO__XFER_FIXED_MS 0.004

typedef struct lwo__plan_model {
    const uint64_t *sizes;
    size_t n, uses;
    const uint32_t *order;
    const float *ms;
    double bytes_per_ms;
    double slack;          /* each use computes this fraction longer than ms says (0: as measured) */
    const uint8_t *must;   /* weights that never stay resident (NULL: none) */
    /* scratch: live fills, and each weight's fill (-1: none) */
    uint64_t *f_off, *f_size;
    double *f_ready, *f_read;
    size_t *f_item;
    long *fill_of;
} lwo__plan_model;

static double lwo__plan_simulate(lwo__plan_model *m, const uint8_t *resident, uint64_t slot, int slots, double *wait_ms, double *graph_ms) {
    const uint64_t ring = slot * (uint64_t)slots;
    uint64_t head = 0;
    double t = 0, t_xfer = 0, pass_start = 0, waited = 0;
    size_t nf = 0, u, k;
    int pass;
    for (k = 0; k < m->n; k++) m->fill_of[k] = -1;
    for (pass = 0; pass < 3; pass++) {
        if (pass == 1) *graph_ms = t;
        if (pass == 2) { pass_start = t; waited = 0; }
        for (u = 0; u < m->uses; u++) {
            size_t w = m->order[u];
            double start = t;
            long f = -1;
            if (!resident[w] && m->sizes[w] && ring) {
                f = m->fill_of[w];
                if (f < 0) {
                    uint64_t size = m->sizes[w], off = head;
                    double go = t_xfer;
                    if (off % slot + size > slot) off = (off / slot + 1) * slot;
                    if (off + size > ring) off = 0;
                    for (k = 0; k < nf;) {   /* the fills it overwrites leave the ring */
                        if (m->f_off[k] < off + size && off < m->f_off[k] + m->f_size[k]) {
                            if (m->f_read[k] > go) go = m->f_read[k];
                            m->fill_of[m->f_item[k]] = -1;
                            nf--;
                            m->f_off[k] = m->f_off[nf]; m->f_size[k] = m->f_size[nf]; m->f_ready[k] = m->f_ready[nf];
                            m->f_read[k] = m->f_read[nf]; m->f_item[k] = m->f_item[nf];
                            if (k < nf) m->fill_of[m->f_item[k]] = (long)k;
                        } else k++;
                    }
                    t_xfer = go + (double)size / m->bytes_per_ms + LWO__XFER_FIXED_MS;
                    f = (long)nf++;
                    m->f_off[f] = off; m->f_size[f] = size; m->f_ready[f] = t_xfer; m->f_read[f] = 0; m->f_item[f] = w;
                    m->fill_of[w] = f;
                    head = off + size;
                }
                if (m->f_ready[f] > start) { waited += m->f_ready[f] - start; start = m->f_ready[f]; }
            }
            t = start + m->ms[u] * (1 + m->slack);
            if (f >= 0) m->f_read[f] = t;
        }
    }
    *wait_ms = waited;
    return t - pass_start;
}

/* A candidate's score: its modeled eager and graph passes as measured plus the same with every
   use's compute 3% longer, so that of two plans equally fast on paper the one with room to absorb a
   pass's jitter wins (a ring that just keeps up on paper falls behind when a kernel runs late).
   Measured: a pass's kernels vary by 2-3% from one pass to the next, and run 2% slower beside the
   copies. The copies' rate needs no such margin: it is measured in the passes (busy time of the
   streamed copies), and an earlier margin of 15% on it chose plans that stream the fewest bytes
   where a deeper ring was faster. *ms, *wait, *graph_ms: the model as measured. */
static double lwo__plan_score(lwo__plan_model *m, const uint8_t *resident, uint64_t slot, int slots, double *ms, double *wait, double *graph_ms) {
    double w2, slow, slow_graph;
    *ms = lwo__plan_simulate(m, resident, slot, slots, wait, graph_ms);
    m->slack = 0.03;
    slow = lwo__plan_simulate(m, resident, slot, slots, &w2, &slow_graph);
    m->slack = 0;
    return *ms + *graph_ms + slow + slow_graph;
}

/* Which weights stream, for a ring of `ring` bytes and slots of `slot`: walking the uses in order,
   a credit grows by rho bytes per millisecond of compute (capped at the ring: transfers can run
   no further ahead than it holds), and a weight streams when its bytes fit the credit. rho is the
   streaming density along the pass; the caller searches for the smallest one whose resident
   weights fit. Weights larger than a slot stay resident; weights no use reads stream (they cost
   nothing). The credit starts at `start` of the ring: half of it for an eager pass, whose first
   weights arrived during the pass before; none for a graph's replay, which starts with an empty
   ring and so computes best on resident weights while its first transfers run. Weights that must
   stream always do. Returns the resident bytes (UINT64_MAX: a weight that must stream is larger
   than the slot). */
static uint64_t lwo__plan_dither(const lwo__plan_model *m, double rho, double start, uint64_t slot, uint64_t ring, uint8_t *resident, uint8_t *seen) {
    double credit = (double)ring * start;
    uint64_t res = 0;
    size_t u, i;
    memset(seen, 0, m->n);
    for (i = 0; i < m->n; i++) resident[i] = 1;
    for (u = 0; u < m->uses; u++) {
        size_t w = m->order[u];
        if (!seen[w]) {
            seen[w] = 1;
            if (m->must && m->must[w] && m->sizes[w] > slot) return UINT64_MAX;   /* it must stream, and cannot here */
            if (m->sizes[w] && m->sizes[w] <= slot && ((double)m->sizes[w] <= credit || (m->must && m->must[w]))) {
                resident[w] = 0;
                credit -= (double)m->sizes[w];
            }
        }
        credit += rho * m->ms[u];
        if (credit > (double)ring) credit = (double)ring;
    }
    for (i = 0; i < m->n; i++) {
        if (!seen[i] && m->must && m->must[i] && m->sizes[i] > slot) return UINT64_MAX;
        if (!seen[i] && m->sizes[i] <= slot) resident[i] = 0;
        if (resident[i]) res += m->sizes[i];
    }
    return res;
}

/* The plan the search keeps: which weights stay resident, the ring, and the model's figures. */
typedef struct lwo__plan_pick {
    uint8_t *resident;
    uint64_t slot, streamed;
    int slots;
    double score, ms, wait, graph_ms;
    double least;          /* the best score seen: a tie is judged against it, so ties cannot drift */
} lwo__plan_pick;

/* The timed search: for each slot size (a distinct weight size), ring depth and starting credit,
   the densest streaming whose resident weights fit the room the ring leaves, the room still free
   then given to the largest streamed weights that fit; each candidate is played through the model
   and replaces *best when it scores better (by 0.2%, or ties the best seen, within 0.2%, streaming
   fewer bytes). Each is
   timed as it would be made, its slots widened by the room left. */
static int lwo__plan_timed(lwo__plan_model *m, uint64_t room, int max_slots, lwo__plan_pick *best) {
    static const int depth[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64 };
    static const double start[] = { 0.5, 0 };
    uint8_t *cand = (uint8_t *)LWO_MALLOC(2 * m->n + 2), *seen;
    size_t i, j, d, c;
    uint64_t total = 0;
    if (!cand) return 0;
    seen = cand + m->n + 1;
    for (i = 0; i < m->n; i++) total += m->sizes[i];
    for (i = 0; i < m->n; i++) {
        uint64_t S = m->sizes[i];
        int dup = S == 0;
        for (j = 0; j < i && !dup; j++) dup = m->sizes[j] == S;
        if (dup) continue;
        for (d = 0; d < sizeof depth / sizeof depth[0]; d++) {
            int slots = depth[d] < max_slots ? depth[d] : max_slots;
            uint64_t ring = (uint64_t)depth[d] * S, slot0, cap;
            if (ring > room) break;
            slot0 = ring / (uint64_t)slots / LWO__ALIGN * LWO__ALIGN;
            if (slot0 < S) continue;
            ring = slot0 * (uint64_t)slots;
            cap = room - ring;
            for (c = 0; c < sizeof start / sizeof start[0]; c++) {
                uint64_t res, streamed, slot;
                double lo = 0, hi = 1, ms, wait, graph_ms, score;
                int it;
                if (lwo__plan_dither(m, 1e30, start[c], slot0, ring, cand, seen) > cap) break;   /* the slot is too narrow for this room */
                for (it = 0; it < 200 && lwo__plan_dither(m, hi, start[c], slot0, ring, cand, seen) > cap; it++) hi *= 2;
                for (it = 0; it < 40; it++) {
                    double mid = (lo + hi) / 2;
                    if (lwo__plan_dither(m, mid, start[c], slot0, ring, cand, seen) > cap) lo = mid; else hi = mid;
                }
                res = lwo__plan_dither(m, hi, start[c], slot0, ring, cand, seen);
                if (res > cap) continue;
                /* the room left: the largest streamed weights that fit it stay resident */
                for (;;) {
                    size_t pick = m->n;
                    for (j = 0; j < m->n; j++)
                        if (!cand[j] && !(m->must && m->must[j]) && m->sizes[j] <= cap - res && (pick == m->n || m->sizes[j] > m->sizes[pick])) pick = j;
                    if (pick == m->n || !m->sizes[pick]) break;
                    cand[pick] = 1;
                    res += m->sizes[pick];
                }
                streamed = total - res;
                if (!streamed) continue;   /* all resident is the untimed plan's case */
                slot = lwo__plan_widen(m->sizes, m->n, cand, room, slot0, slots);
                score = lwo__plan_score(m, cand, slot, slots, &ms, &wait, &graph_ms);
                if (score < best->least) best->least = score;
                if (score < best->score * 0.998 || (score <= best->least * 1.002 && streamed < best->streamed)) {
                    memcpy(best->resident, cand, m->n);
                    best->slot = slot; best->slots = slots; best->streamed = streamed;
                    best->score = score; best->ms = ms; best->wait = wait; best->graph_ms = graph_ms;
                }
            }
        }
    }
    LWO_FREE(cand);
    return 1;
}

LWO_DEF lwo_result lwo_plan_create(const lwo_plan_desc *desc, lwo_plan *out) {
    size_t i, j, n, *order = NULL, largest_i = 0;
    uint64_t *sizes = NULL, total = 0, best_stream = UINT64_MAX;
    int max_slots, best_slots = 0, timed;
    uint64_t best_slot = 0;
    uint8_t *flags = NULL, *best = NULL;
    char *err;
    size_t err_size;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    err = out->error;
    err_size = sizeof out->error;
    if (!desc) { snprintf(err, err_size, "argument 'desc' is NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    n = desc->count;
    if (n && !desc->weight_bytes) { snprintf(err, err_size, "argument 'desc->weight_bytes' is NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    max_slots = desc->max_slots > 0 ? desc->max_slots : 4;
    timed = desc->use_ms && desc->h2d_GBps > 0;
    if (timed && desc->use_order) {
        for (i = 0; i < desc->use_count; i++)
            if (desc->use_order[i] >= n) { snprintf(err, err_size, "use %zu names weight %u; there are %zu", i, (unsigned)desc->use_order[i], n); return LWO_ERROR_INVALID_ARGUMENT; }
    }
    if (timed) {
        size_t uses = desc->use_order ? desc->use_count : n;
        for (i = 0; i < uses; i++)
            if (!(desc->use_ms[i] >= 0 && desc->use_ms[i] < 1e9)) { snprintf(err, err_size, "use %zu: use_ms is %g; want a time in milliseconds", i, (double)desc->use_ms[i]); return LWO_ERROR_INVALID_ARGUMENT; }
        if (!(desc->h2d_GBps < 1e6)) { snprintf(err, err_size, "h2d_GBps is %g; want GB/s", desc->h2d_GBps); return LWO_ERROR_INVALID_ARGUMENT; }
    }
    if (desc->workspace > desc->budget) {
        snprintf(err, err_size, "the workspace (%llu bytes) alone exceeds the budget (%llu bytes)", (unsigned long long)desc->workspace, (unsigned long long)desc->budget);
        return LWO_ERROR_OUT_OF_BUDGET;
    }
    sizes = (uint64_t *)LWO_MALLOC((n + 1) * sizeof *sizes);
    order = (size_t *)LWO_MALLOC((n + 1) * sizeof *order);
    flags = (uint8_t *)LWO_MALLOC(n + 1);
    best = (uint8_t *)LWO_MALLOC(n + 1);
    if (!sizes || !order || !flags || !best) { LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
    for (i = 0; i < n; i++) {
        sizes[i] = lwo__round_up(desc->weight_bytes[i], LWO__ALIGN);
        if (sizes[i] < desc->weight_bytes[i] || total + sizes[i] < total) { snprintf(err, err_size, "weight %zu: size overflows", i); goto invalid; }
        total += sizes[i];
        if (sizes[i] > sizes[largest_i]) largest_i = i;
    }
    /* weights sorted by size, largest first (indices) */
    for (i = 0; i < n; i++) order[i] = i;
    for (i = 1; i < n; i++) { /* insertion sort, stable: a plan must not depend on qsort's order */
        size_t k = order[i];
        for (j = i; j > 0 && sizes[order[j - 1]] < sizes[k]; j--) order[j] = order[j - 1];
        order[j] = k;
    }
    if (!lwo__plan_spread(sizes, order, n)) { LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
    {
        uint64_t room = desc->budget - desc->workspace;
        int any_must = 0;
        for (i = 0; i < n; i++) if (desc->must_stream && desc->must_stream[i] && sizes[i]) any_must = 1;
        if (total <= room && !any_must) { /* all resident */
            memset(best, 1, n);
            best_stream = 0; best_slot = 0; best_slots = 0;
        } else {
            /* candidate k: the k largest weights resident, the slot sized for weight order[k] */
            size_t k;
            for (k = 0; k < n; k++) {
                uint64_t slot = sizes[order[k]], used = 0, left;
                size_t nstreamed = n - k;
                int slots, keep;
                if (slot == 0) break;   /* only empty weights left */
                if (k > 0 && desc->must_stream && desc->must_stream[order[k - 1]]) break;   /* it cannot be resident */
                if (k > 0 && slot == sizes[order[k - 1]]) continue;
                for (i = 0; i < k; i++) used += sizes[order[i]];
                if (used > room) break;
                if (room - used < slot) continue;
                /* keep room for two slots where possible, so a transfer overlaps the compute of the
                   previous weight, then fill the rest with more resident weights, largest first */
                keep = (room - used) / slot >= 2 && nstreamed >= 2 ? 2 : 1;
                left = room - used - (uint64_t)keep * slot;
                memset(flags, 0, n);
                for (i = 0; i < k; i++) flags[order[i]] = 1;
                for (i = k + 1; i < n; i++)
                    if (sizes[order[i]] <= left && !(desc->must_stream && desc->must_stream[order[i]])) { flags[order[i]] = 1; left -= sizes[order[i]]; used += sizes[order[i]]; nstreamed--; }
                slots = (int)((room - used) / slot < (uint64_t)max_slots ? (room - used) / slot : (uint64_t)max_slots);
                if ((size_t)slots > nstreamed) slots = (int)nstreamed;
                if (total - used < best_stream || (total - used == best_stream && slots > best_slots)) {
                    best_stream = total - used; best_slot = slot; best_slots = slots;
                    memcpy(best, flags, n);
                }
            }
            if (best_stream == UINT64_MAX) {
                uint64_t need = sizes[largest_i] + desc->workspace;
                snprintf(err, err_size, "the budget of %llu bytes cannot hold weight %zu (%llu bytes) in a staging slot beside the "
                         "workspace (%llu bytes): %llu bytes missing", (unsigned long long)desc->budget, largest_i,
                         (unsigned long long)sizes[largest_i], (unsigned long long)desc->workspace,
                         (unsigned long long)(need - desc->budget));
                LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best);
                return LWO_ERROR_OUT_OF_BUDGET;
            }
        }
    }
    best_slot = lwo__plan_widen(sizes, n, best, desc->budget - desc->workspace, best_slot, best_slots);
    /* timed: the plan above is the first candidate, and the model may find a faster one */
    if (timed && best_slots > 0) {
        lwo__plan_model m;
        lwo__plan_pick pick;
        uint32_t *idx = NULL;
        void *scratch;
        size_t uses = desc->use_order ? desc->use_count : n;
        memset(&m, 0, sizeof m);
        m.sizes = sizes; m.n = n; m.uses = uses; m.ms = desc->use_ms; m.must = desc->must_stream;
        m.bytes_per_ms = desc->h2d_GBps * 1e6;
        scratch = LWO_MALLOC((uses + 1) * (2 * sizeof(uint64_t) + 2 * sizeof(double) + sizeof(size_t)) + (n + 1) * (sizeof(long) + sizeof(uint32_t)));
        if (!scratch) { LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        m.f_ready = (double *)scratch; m.f_read = m.f_ready + uses + 1;
        m.f_off = (uint64_t *)(m.f_read + uses + 1); m.f_size = m.f_off + uses + 1;
        m.f_item = (size_t *)(m.f_size + uses + 1);
        m.fill_of = (long *)(m.f_item + uses + 1);
        idx = (uint32_t *)(m.fill_of + n + 1);
        if (!desc->use_order) for (i = 0; i < n; i++) idx[i] = (uint32_t)i;
        m.order = desc->use_order ? desc->use_order : idx;
        pick.resident = best; pick.slot = best_slot; pick.slots = best_slots; pick.streamed = best_stream;
        pick.score = lwo__plan_score(&m, best, best_slot, best_slots, &pick.ms, &pick.wait, &pick.graph_ms);
        pick.least = pick.score;
        if (!lwo__plan_timed(&m, desc->budget - desc->workspace, max_slots, &pick)) {
            LWO_FREE(scratch); LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best); return LWO_ERROR_OUT_OF_HOST_MEMORY;
        }
        best_slot = pick.slot; best_slots = pick.slots; best_stream = pick.streamed;
        out->predicted_ms = pick.ms;
        out->predicted_wait_ms = pick.wait;
        out->predicted_graph_ms = pick.graph_ms;
        LWO_FREE(scratch);
    } else if (timed) {
        for (i = 0; i < (desc->use_order ? desc->use_count : n); i++) out->predicted_ms += desc->use_ms[i];
        out->predicted_graph_ms = out->predicted_ms;
    }
    out->resident = best;
    out->slot_bytes = best_slot;
    out->slots = best_slots;
    out->streamed_bytes = best_stream;
    for (i = 0; i < n; i++) if (best[i]) out->resident_bytes += sizes[i];
    out->total_bytes = out->resident_bytes + (uint64_t)best_slots * best_slot + desc->workspace;
    LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags);
    return LWO_SUCCESS;
invalid:
    LWO_FREE(sizes); LWO_FREE(order); LWO_FREE(flags); LWO_FREE(best);
    return LWO_ERROR_INVALID_ARGUMENT;
}

LWO_DEF void lwo_plan_destroy(lwo_plan *plan) {
    if (!plan) return;
    LWO_FREE(plan->resident);
    memset(plan, 0, sizeof *plan);
}

/* The engine. An item is what streams: up to three byte ranges of host memory (weight, then bias,
   then scales: the weight first, so the largest transfer starts soonest) laid out at fixed offsets
   in device memory. A resident item has its own arena storage; a streamed one lives in the ring
   while it is in use. The ring is one block of the plan's slots x slot_bytes, filled first in
   first out and packed by bytes: several weights share a slot when they fit, so beside a large
   weight being read the next small ones are on their way (one weight per slot, two slots let a
   transfer run only one weight ahead, and the copy engine idles while a long kernel reads a weight
   that came quickly). A weight never straddles a slot boundary: then no fill overwrites a younger
   weight than one weight per slot would, and the packing is never worse. Each stay in the ring is
   a `fill`. The protocol (DESIGN.md):
   - a transfer starts on its offload stream only after the `consumed` event of every fill whose
     bytes it overwrites, recorded on the compute stream after the last kernel that read it (and
     after that fill's own `ready`: its transfer may still run on another offload stream);
   - transfers run one at a time in use order: on another offload stream a transfer first waits
     for the one before it (side by side they would share the bus and delay the first needed);
   - the compute stream waits on the fill's `ready` event before any kernel reads it;
   - the host never blocks on either: every wait is cuStreamWaitEvent;
   - the ring is filled in use order, so transfers run as far ahead as it has room; a prefetch
     never overwrites a weight fetched for a use still to come, or one acquired. */
#define LWO__MAX_OFFLOAD 8
/* Ring bytes [off, off + size) hold item `item`. With item -1 the fill is a remnant: its weight was
   destroyed, or a later fill overwrote part of it. Its bytes stay taken, so the next writer there
   still waits for their last reader and their transfer. */
typedef struct lwo__fill {
    uint64_t off, size;
    lwo__CUevent ready, consumed;
    int live;
    int consumed_valid;    /* `consumed` was recorded after the last kernel that read it */
    int pending;           /* fetched (or found) ahead for a use still to come: a prefetch keeps it */
    int item;
} lwo__fill;

/* A use's timing: events pre (before its wait on the fill) and post (after it; the same event for
   a resident weight), indices into the pool. pos: its position in the pass's order, LWO__MARK_NONE
   outside a pass or off the order, LWO__MARK_END for a pass's end (uses: how many it had). The
   compute after a use runs from its post to the next mark's pre. */
#define LWO__MARK_NONE ((size_t)-1)
#define LWO__MARK_END ((size_t)-2)
typedef struct lwo__mark { size_t pre, post, pos, uses; } lwo__mark;
/* A transfer's timing: pool events recorded around its copy on its offload stream. */
typedef struct lwo__xfer { size_t start, end; uint64_t bytes; double s, e; /* ms, when read */ } lwo__xfer;

typedef struct lwo__engine {
    lwo__CUdeviceptr ring;
    uint64_t ring_bytes, slot_bytes, ring_arena_off, ring_arena_size;
    uint64_t head;         /* where the next fill goes when it fits before the end */
    lwo__fill *fills;      /* records, reused once not live; events made on first use */
    int nfills;
    int live_max;          /* most fills live at once (the tests look at it) */
    lwo__CUstream streams[LWO__MAX_OFFLOAD];
    int nstreams;
    lwo__CUevent graph_done;             /* a whole-pass graph's end: the next eager writes wait on it */
    int graph_wait[LWO__MAX_OFFLOAD];    /* stream k has yet to wait on graph_done */
    int joined[LWO__MAX_OFFLOAD];        /* stream k has joined the open capture */
    uint32_t *order, *learning; /* use order (item ids) and the one being learned */
    size_t norder, nlearning, caplearning, pos;
    int order_known, in_pass;
    uint64_t fill_counter;
    lwo__CUevent fork;     /* joins offload streams into a capture */
    /* the last fill's ready event and its stream (-1: none since the ring was last forgotten): the
       next fill on another stream waits on it, so copies run one at a time in use order. Two copies
       side by side share the bus, and the one needed first arrives late: the compute stream waits,
       its consumed events come later, and with a small ring the next copies wait on those */
    lwo__CUevent prev_ready;
    int prev_stream;
    int test_skip_consumed_wait, test_skip_ready_wait, test_skip_in_order;
    /* timing, harvested once complete: marks on the compute stream at each use in a pass (and at
       each wait on a fill outside one), from a pool of events; one event pair per pass */
    lwo__CUevent *wait_ev;
    size_t nwait, capwait;
    struct lwo__mark *marks;
    size_t nmarks, capmarks, harvested;
    float *use_ms;         /* compute time after each use, by position, in the last pass timed
                              whole; where that is over 1.5x the least since the last plan (the
                              pass loaded modules, or waited on the host), the least. Not the least
                              everywhere: a sum of least times undercounts a pass by 2-6% (measured:
                              clocks and jitter), and the plan then trusts compute it does not have */
    float *use_least;      /* each use's least since the last plan */
    float *pass_ms;        /* the same for the pass being harvested */
    size_t cap_use_ms, timed_uses, profiled;   /* uses timed in the pass being harvested; in the profile */
    double h2d_GBps;       /* measured on the resident uploads of a plan (0: not yet) */
    /* each eager transfer's start and end events (pool indices), read like the marks: the copies'
       busy time, the union of their intervals over the offload streams, gives their rate */
    lwo__xfer *xfers;
    size_t nxfers, capxfers, xfers_harvested;
    double xfer_busy_ms;   /* busy time and bytes read since the last plan */
    uint64_t xfer_bytes;
    double xfer_overlap_ms; /* time copies ran beside an earlier one (the tests look at it: 0 in order) */
    double xfer_gap_ms;    /* idle gaps under 50 us between one copy and the next, and their count: */
    uint64_t xfer_gaps;    /* what starting a copy after the one before costs (the benches print it) */
    size_t xfer_max_end;   /* the pool event of the latest end read so far (LWO__MARK_NONE: none
                              since the pool started over; no later copy can overlap one before) */
    uint64_t deviations0;  /* order deviations when the open pass began */
    lwo__CUevent pass_ev[2];
    int pass_timed;        /* a pass's events were recorded and not yet read */
    int pass_timing;       /* the open pass recorded its start event */
    uint64_t pass_bytes0, pass_bytes;
    uint64_t cap_bytes0, cap_transfers0; /* stats when the open capture began */
} lwo__engine;

static lwo_result lwo__engine_get(lwo_context *ctx, lwo__engine **out) {
    lwo__engine *e = ctx->engine;
    int i;
    if (!e) {
        e = (lwo__engine *)LWO_MALLOC(sizeof *e);
        if (!e) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memset(e, 0, sizeof *e);
        ctx->engine = e;
        e->nstreams = ctx->desc.offload_streams > 0 ? ctx->desc.offload_streams : 1;
        if (e->nstreams > LWO__MAX_OFFLOAD) e->nstreams = LWO__MAX_OFFLOAD;
        for (i = 0; i < e->nstreams; i++) LWO__CU(ctx, cuStreamCreate(&e->streams[i], LWO__CU_STREAM_NON_BLOCKING));
        LWO__CU(ctx, cuEventCreate(&e->fork, LWO__CU_EVENT_DISABLE_TIMING));
        LWO__CU(ctx, cuEventCreate(&e->graph_done, LWO__CU_EVENT_DISABLE_TIMING));
        for (i = 0; i < 2; i++) LWO__CU(ctx, cuEventCreate(&e->pass_ev[i], 0));
        e->xfer_max_end = LWO__MARK_NONE;
        e->prev_stream = -1;
    }
    *out = e;
    return LWO_SUCCESS;
}

/* Forgets what the ring holds (after a capture, whose transfers did not run, or a graph launch):
   the next use fetches again. */
static void lwo__engine_forget_ring(lwo_context *ctx, lwo__engine *e) {
    int i;
    for (i = 0; i < e->nfills; i++) {
        lwo__fill *f = &e->fills[i];
        if (f->live && f->item >= 0) { ctx->items[f->item]->fill = -1; ctx->items[f->item]->dev = 0; }
        f->live = 0;
    }
    e->head = 0;
    e->prev_stream = -1;
}

static void lwo__engine_free_ring(lwo_context *ctx, lwo__engine *e) {
    int i;
    lwo__engine_forget_ring(ctx, e);
    for (i = 0; i < e->nfills; i++) {
        if (e->fills[i].ready) ctx->cu.cuEventDestroy(e->fills[i].ready);
        if (e->fills[i].consumed) ctx->cu.cuEventDestroy(e->fills[i].consumed);
    }
    LWO_FREE(e->fills);
    e->fills = NULL;
    e->nfills = 0;
    if (e->ring_arena_size) lwo__arena_free(ctx, e->ring_arena_off, e->ring_arena_size);
    e->ring = 0;
    e->ring_bytes = e->slot_bytes = e->ring_arena_off = e->ring_arena_size = 0;
}

static void lwo__engine_free(lwo_context *ctx) {
    lwo__engine *e = ctx->engine;
    size_t i;
    int k;
    if (!e) return;
    for (k = 0; k < e->nstreams; k++) if (e->streams[k]) ctx->cu.cuStreamSynchronize(e->streams[k]);
    lwo__engine_free_ring(ctx, e);
    for (k = 0; k < e->nstreams; k++) if (e->streams[k]) ctx->cu.cuStreamDestroy(e->streams[k]);
    if (e->fork) ctx->cu.cuEventDestroy(e->fork);
    if (e->graph_done) ctx->cu.cuEventDestroy(e->graph_done);
    for (i = 0; i < e->capwait; i++) if (e->wait_ev[i]) ctx->cu.cuEventDestroy(e->wait_ev[i]);
    LWO_FREE(e->wait_ev); LWO_FREE(e->marks); LWO_FREE(e->xfers);
    LWO_FREE(e->use_ms); LWO_FREE(e->use_least); LWO_FREE(e->pass_ms);
    for (k = 0; k < 2; k++) if (e->pass_ev[k]) ctx->cu.cuEventDestroy(e->pass_ev[k]);
    LWO_FREE(e->order); LWO_FREE(e->learning);
    LWO_FREE(e);
    ctx->engine = NULL;
}

/* Copies an item's parts into device memory at dst, on stream s, weight bytes first. Parts whose
   host bytes lie as they will on the device travel in one copy: a small copy costs about as much
   time as a large one's first microseconds, and a pass makes hundreds of them. */
static lwo_result lwo__item_upload(lwo_context *ctx, const lwo__item *it, lwo__CUdeviceptr dst, lwo__CUstream s) {
    int p, q;
    for (p = 0; p < LWO__PARTS; p = q) {
        uint64_t n = it->bytes[p];
        q = p + 1;
        if (!n) continue;
        if (p >= it->joined) /* the rest share one host block laid out as on the device */
            for (; q < LWO__PARTS; q++) if (it->bytes[q]) n = it->offset[q] - it->offset[p] + it->bytes[q];
        LWO__CU(ctx, cuMemcpyHtoDAsync(dst + it->offset[p], it->host[p], (size_t)n, s));
    }
    return LWO_SUCCESS;
}

/* Reads the last timed pass's events into the stats once they are done. */
static void lwo__engine_read_pass(lwo_context *ctx, lwo__engine *e) {
    float ms;
    if (e->pass_timed && ctx->cu.cuEventQuery(e->pass_ev[1]) == 0 && ctx->cu.cuEventElapsedTime(&ms, e->pass_ev[0], e->pass_ev[1]) == 0) {
        ctx->stats.last_pass_ms = ms;
        ctx->stats.last_pass_bytes = e->pass_bytes;
        ctx->stats.last_pass_GBps = ms > 0 ? (double)e->pass_bytes / ms / 1e6 : 0;
        e->pass_timed = 0;
    }
}

/* Moves the unread marks and transfers to the front of their arrays, and the pool events they name
   to the front of the pool (a rotation: the events before the oldest still named are free, and go
   to the back), so the pool is reused while a pass is still running; with nothing unread the pool
   simply starts over. */
static void lwo__engine_compact(lwo__engine *e) {
    size_t lo = e->nwait, k, i, j;
    lwo__CUevent t;
    for (k = e->harvested; k < e->nmarks; k++) {
        if (e->marks[k].pre < lo) lo = e->marks[k].pre;
        if (e->marks[k].post < lo) lo = e->marks[k].post;
    }
    for (k = e->xfers_harvested; k < e->nxfers; k++) {
        if (e->xfers[k].start < lo) lo = e->xfers[k].start;
        if (e->xfers[k].end < lo) lo = e->xfers[k].end;
    }
    if (e->xfers_harvested == e->nxfers) e->xfer_max_end = LWO__MARK_NONE;   /* no later copy can overlap it */
    else if (e->xfer_max_end < lo) lo = e->xfer_max_end;
    if (lo == e->nwait) e->nwait = 0;
    else if (lo > 0) {   /* rotate left by lo: reverse [0, lo), [lo, nwait), then the whole */
        size_t span[3][2];
        span[0][0] = 0; span[0][1] = lo; span[1][0] = lo; span[1][1] = e->nwait; span[2][0] = 0; span[2][1] = e->nwait;
        for (k = 0; k < 3; k++)
            for (i = span[k][0], j = span[k][1]; i + 1 < j; i++, j--) { t = e->wait_ev[i]; e->wait_ev[i] = e->wait_ev[j - 1]; e->wait_ev[j - 1] = t; }
        e->nwait -= lo;
        for (k = e->harvested; k < e->nmarks; k++) { e->marks[k].pre -= lo; e->marks[k].post -= lo; }
        for (k = e->xfers_harvested; k < e->nxfers; k++) { e->xfers[k].start -= lo; e->xfers[k].end -= lo; }
        if (e->xfer_max_end != LWO__MARK_NONE) e->xfer_max_end -= lo;
    }
    memmove(e->marks, e->marks + e->harvested, (e->nmarks - e->harvested) * sizeof *e->marks);
    e->nmarks -= e->harvested;
    e->harvested = 0;
    memmove(e->xfers, e->xfers + e->xfers_harvested, (e->nxfers - e->xfers_harvested) * sizeof *e->xfers);
    e->nxfers -= e->xfers_harvested;
    e->xfers_harvested = 0;
}

/* Reads the finished marks: waits into the stats, each use's compute time into use_ms (a pass
   whose every use was read becomes the profile the planner times against), and the last pass.
   With `wait` set it first lets the compute stream finish and then drops what it cannot read (a
   use whose next mark was never recorded), so the pool can be reused. budget: the most marks and
   the most transfers read in this call (0: all); each costs a few driver calls. */
#define LWO__HARVEST_BUDGET 8   /* marks and transfers read at each release */
static void lwo__engine_harvest(lwo_context *ctx, lwo__engine *e, int wait, size_t budget) {
    float ms;
    int k;
    size_t read = 0;
    if (wait && ctx->capturing) wait = 0;   /* a capturing stream cannot be synchronized */
    if (wait) {
        ctx->cu.cuStreamSynchronize(ctx->compute);
        for (k = 0; k < e->nstreams; k++) ctx->cu.cuStreamSynchronize(e->streams[k]);   /* prefetches no use waited for yet */
    }
    while (e->harvested < e->nmarks && (!budget || read++ < budget)) {
        const lwo__mark *m = &e->marks[e->harvested];
        if (ctx->cu.cuEventQuery(e->wait_ev[m->post]) != 0) break;
        if (m->pos != LWO__MARK_NONE && m->pos != LWO__MARK_END) {
            const lwo__mark *nx = m + 1;
            if (e->harvested + 1 >= e->nmarks || ctx->cu.cuEventQuery(e->wait_ev[nx->pre]) != 0) break;
            if (m->pos < e->cap_use_ms && ctx->cu.cuEventElapsedTime(&ms, e->wait_ev[m->post], e->wait_ev[nx->pre]) == 0) {
                e->pass_ms[m->pos] = ms;
                e->timed_uses++;
            }
        }
        if (m->pre != m->post && ctx->cu.cuEventElapsedTime(&ms, e->wait_ev[m->pre], e->wait_ev[m->post]) == 0) ctx->stats.wait_ms += ms;
        if (m->pos == LWO__MARK_END) {
            if (e->timed_uses == m->uses && m->uses) {
                size_t u;
                if (e->profiled != m->uses) memcpy(e->use_least, e->pass_ms, m->uses * sizeof *e->use_least);
                for (u = 0; u < m->uses; u++) {
                    if (e->pass_ms[u] < e->use_least[u]) e->use_least[u] = e->pass_ms[u];
                    e->use_ms[u] = e->pass_ms[u] > 1.5f * e->use_least[u] ? e->use_least[u] : e->pass_ms[u];
                }
                e->profiled = m->uses;
            }
            e->timed_uses = 0;
        }
        e->harvested++;
    }
    /* transfers: the finished run from the oldest unread one, timed from its start (earlier ones
       give negative times), sorted by start and merged. Copies run in use order, one at a time;
       the merge still counts copies that ran side by side once (the overlap is what the tests
       check is 0), and the gaps between copies are what starting one after another costs */
    {
        size_t a = e->xfers_harvested, b = a, k, m;
        float f;
        double cur = -1e300;
        while (b < e->nxfers && (!budget || b - a < budget) && ctx->cu.cuEventQuery(e->wait_ev[e->xfers[b].end]) == 0) b++;
        if (b > a) {
            lwo__CUevent ref = e->wait_ev[e->xfers[a].start];
            for (k = a; k < b; k++) {
                lwo__xfer *x = &e->xfers[k];
                x->s = ctx->cu.cuEventElapsedTime(&f, ref, e->wait_ev[x->start]) == 0 ? f : 0;
                x->e = ctx->cu.cuEventElapsedTime(&f, ref, e->wait_ev[x->end]) == 0 ? f : x->s;
            }
            for (k = a + 1; k < b; k++) {   /* insertion sort: nearly in order already */
                lwo__xfer t = e->xfers[k];
                for (m = k; m > a && e->xfers[m - 1].s > t.s; m--) e->xfers[m] = e->xfers[m - 1];
                e->xfers[m] = t;
            }
            if (e->xfer_max_end != LWO__MARK_NONE && ctx->cu.cuEventElapsedTime(&f, ref, e->wait_ev[e->xfer_max_end]) == 0) cur = f;
            for (k = a; k < b; k++) {
                const lwo__xfer *x = &e->xfers[k];
                if (x->s < cur) e->xfer_overlap_ms += (x->e < cur ? x->e : cur) - x->s;
                else if (x->s - cur < 0.05) { e->xfer_gap_ms += x->s - cur; e->xfer_gaps++; }
                if (x->e > cur) { e->xfer_busy_ms += x->e - (x->s > cur ? x->s : cur); cur = x->e; e->xfer_max_end = x->end; }
                e->xfer_bytes += x->bytes;
            }
            e->xfers_harvested = b;
        }
    }
    if (e->xfer_busy_ms > 0) ctx->stats.transfer_GBps = (double)e->xfer_bytes / e->xfer_busy_ms / 1e6;
    if (wait && e->harvested < e->nmarks) { e->timed_uses = 0; e->harvested = e->nmarks; }   /* a pass cut short is no profile */
    if (e->harvested || e->xfers_harvested || (e->nmarks == 0 && e->nxfers == 0)) lwo__engine_compact(e);
    lwo__engine_read_pass(ctx, e);
}

/* Makes room in the event pool for `need` more events: the pool grows, up to 8192 events; past
   that the marks are read (after the compute stream finishes) and the pool starts over. */
static lwo_result lwo__engine_reserve(lwo_context *ctx, lwo__engine *e, size_t need) {
    size_t cap, i;
    lwo__CUevent *ne;
    if (e->nwait + need <= e->capwait) return LWO_SUCCESS;
    if (e->capwait >= 8192) { lwo__engine_harvest(ctx, e, 1, 0); if (e->nwait + need <= e->capwait) return LWO_SUCCESS; }
    cap = e->capwait ? e->capwait * 2 : 256;
    ne = (lwo__CUevent *)LWO_REALLOC(e->wait_ev, cap * sizeof *ne);
    if (!ne) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    e->wait_ev = ne;
    for (i = e->capwait; i < cap; i++) {
        lwo__CUresult rc = ctx->cu.cuEventCreate(&e->wait_ev[i], 0);
        if (rc) { e->capwait = i; return lwo__cuda_fail(ctx, rc, "cuEventCreate"); }
    }
    e->capwait = cap;
    return LWO_SUCCESS;
}

/* Records the next pool event on stream cs (room reserved); *index is where it went. */
static lwo_result lwo__engine_event(lwo_context *ctx, lwo__engine *e, lwo__CUstream cs, size_t *index) {
    LWO__CU(ctx, cuEventRecord(e->wait_ev[e->nwait], cs));
    *index = e->nwait++;
    return LWO_SUCCESS;
}

/* Appends a mark (pre == post: one event) after recording its events; nothing inside a capture. */
static lwo_result lwo__engine_mark(lwo_context *ctx, lwo__engine *e, size_t pre, size_t post, size_t pos, size_t uses) {
    lwo__mark *m = (lwo__mark *)lwo__grow(e->marks, e->nmarks, &e->capmarks, sizeof *m, 256);
    if (!m) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    e->marks = m;
    m = &e->marks[e->nmarks++];
    m->pre = pre; m->post = post; m->pos = pos; m->uses = uses;
    return LWO_SUCCESS;
}

/* Appends a transfer's events (recorded around its copy on its offload stream) and bytes. */
static lwo_result lwo__engine_xfer(lwo_context *ctx, lwo__engine *e, size_t start, size_t end, uint64_t bytes) {
    lwo__xfer *nx = (lwo__xfer *)lwo__grow(e->xfers, e->nxfers, &e->capxfers, sizeof *nx, 256);
    if (!nx) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    e->xfers = nx;
    memset(&e->xfers[e->nxfers], 0, sizeof *e->xfers);
    e->xfers[e->nxfers].start = start; e->xfers[e->nxfers].end = end; e->xfers[e->nxfers].bytes = bytes;
    e->nxfers++;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_streaming_plan(lwo_context *ctx, const lwo_streaming_desc *desc) {
    lwo__engine *e;
    lwo_plan_desc pd;
    lwo_plan plan;
    lwo_result r;
    lwo_streaming_desc zero;
    lwo__reserve rv = { 0, 0 };
    lwo_weight *w;
    uint64_t *sizes, forced = 0, free_bytes, ws_keep, split_keep, reserve, largest = 0, need;
    uint8_t *must;
    size_t i, n, ev0 = 0, ev1 = 0, demoted = 0;
    int k;
    LWO__ENTER(ctx);
    if (!desc) { memset(&zero, 0, sizeof zero); desc = &zero; }
    if ((r = lwo__engine_get(ctx, &e)) != 0) return r;
    if (e->in_pass) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_streaming_plan inside a pass: end it first (lwo_pass_end, or lwo_pass_abort after a failed call)");
    if (ctx->capturing) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_streaming_plan inside a graph capture");
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    for (k = 0; k < e->nstreams; k++) LWO__CU(ctx, cuStreamSynchronize(e->streams[k]));
    /* start from nothing placed: resident storage, the ring, lwo_linear's workspace and the split
       area go back to the arena, to be laid out again in one run (a workspace grown during a pass
       sits between the last plan's blocks, and would split the room this plan counts on) */
    ctx->planned = 0;
    lwo__engine_free_ring(ctx, e);
    for (i = 0; i < ctx->nitems; i++) {
        lwo__item *it = ctx->items[i];
        if (it->arena_size) { lwo__arena_free(ctx, it->arena_off, it->arena_size); it->arena_size = 0; }
        it->resident = 0; it->dev = 0;
    }
    ws_keep = ctx->ws_size;
    if (ws_keep) { lwo__arena_free(ctx, ctx->ws_off, ctx->ws_size); ctx->ws_size = 0; }
    split_keep = ctx->split_size;
    if (split_keep) { lwo__arena_free(ctx, ctx->split_off, ctx->split_size); ctx->split_size = 0; }
    /* what lwo_linear can need on these weights: reserved now, so that no call after the plan
       finds the arena without room (declared rows; else what calls used so far, and at least a
       chunk of 64 rows) */
    for (w = ctx->weights; w; w = w->next) {
        lwo__reserve_add(ctx, &rv, w->format, w->rows, w->cols, w->kpad, desc->max_rows);
        w->planned = 1;
    }
    if (!desc->max_rows) {
        if (ws_keep > rv.ws) rv.ws = ws_keep;
        rv.split = split_keep;
    }
    rv.ws = lwo__round_up(rv.ws, LWO__ALIGN);
    reserve = rv.ws + rv.split + lwo__round_up(desc->free_bytes, LWO__ALIGN) + 64 * LWO__ALIGN; /* allocator rounding headroom */
    n = ctx->nitems;
    sizes = (uint64_t *)LWO_MALLOC((n + 1) * (sizeof *sizes + 1));
    if (!sizes) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    must = (uint8_t *)(sizes + n + 1);
    /* forced-resident items are placed first; the plan divides what is left among the others */
    for (i = 0; i < n; i++) {
        lwo__item *it = ctx->items[i];
        sizes[i] = (it->force == 1 || it->dead) ? 0 : it->total;
        must[i] = it->force == 2;
        if (it->force == 1 && !it->dead) forced += it->total;
        else if (!it->dead && it->total > largest) largest = it->total;
    }
    free_bytes = ctx->arena_size - ctx->arena_used;
    /* the smallest budget: what others hold, the forced weights, the reservation, and one slot of
       the largest weight that may stream (everything else streaming through it) */
    need = (ctx->arena_size - free_bytes) + forced + reserve + lwo__round_up(largest, LWO__ALIGN);
    ctx->stats.plan_min_budget = need;
    if (need > ctx->arena_size) {
        LWO_FREE(sizes);
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET,
                         "lwo_streaming_plan: the budget of %llu bytes cannot hold a plan; the smallest that can is %llu bytes (%.1f MiB): "
                         "%llu held by tensors and weights made outside the plan, %llu by weights marked resident, %llu for lwo_linear's "
                         "workspace (max_rows %llu), %llu for the GEMMs' split area, %llu kept free (free_bytes), and a staging slot of %llu "
                         "for the largest weight", (unsigned long long)ctx->arena_size, (unsigned long long)need, (double)need / 1048576.0,
                         (unsigned long long)(ctx->arena_size - free_bytes), (unsigned long long)forced, (unsigned long long)rv.ws,
                         (unsigned long long)desc->max_rows, (unsigned long long)rv.split, (unsigned long long)desc->free_bytes,
                         (unsigned long long)largest);
    }
    memset(&pd, 0, sizeof pd);
    pd.weight_bytes = sizes;
    pd.count = n;
    pd.budget = free_bytes - forced;
    pd.workspace = reserve;
    pd.max_slots = ctx->desc.max_slots;
    pd.must_stream = must;
    /* a whole pass timed in the learned order, and a measured rate: the plan is timed against them */
    lwo__engine_harvest(ctx, e, 1, 0);
    if (e->order_known && e->profiled == e->norder && e->norder && e->h2d_GBps > 0) {
        pd.use_order = e->order; pd.use_count = e->norder; pd.use_ms = e->use_ms; pd.h2d_GBps = e->h2d_GBps;
        /* the streamed copies' own rate where they moved enough to tell: it counts what a pass does
           to the bus (copies beside kernels, one weight at a time), which one large upload does not */
        if (e->xfer_bytes >= (16u << 20) && e->xfer_busy_ms > 0) pd.h2d_GBps = (double)e->xfer_bytes / e->xfer_busy_ms / 1e6;
    }
    e->xfer_busy_ms = 0;
    e->xfer_bytes = 0;
    r = lwo_plan_create(&pd, &plan);
    LWO_FREE(sizes);
    if (r) { lwo__fail(ctx, r, "streaming plan: %s", plan.error); lwo_plan_destroy(&plan); return r; }
    e->profiled = 0;   /* the next plan is timed against the passes that follow this one */
    ctx->stats.resident_bytes = 0;
    /* the workspace and the split area, then the ring (the one large block), then the resident weights */
    if (rv.ws && (r = lwo__arena_alloc(ctx, rv.ws, &ctx->ws_off, &ctx->ws_size, "lwo_linear's workspace")) != 0) { lwo_plan_destroy(&plan); return r; }
    if (rv.split) {
        if ((r = lwo__arena_alloc(ctx, rv.split, &ctx->split_off, &ctx->split_size, "the GEMMs' split area")) != 0 ||
            (r = lwo__split_zero(ctx, ctx->compute)) != 0) { lwo_plan_destroy(&plan); return r; }
        /* zeroed before a GEMM on any stream reads it */
        {
            lwo__CUresult rc = ctx->cu.cuStreamSynchronize(ctx->compute);
            if (rc) { lwo_plan_destroy(&plan); return lwo__cuda_fail(ctx, rc, "cuStreamSynchronize"); }
        }
    }
    if (plan.slots > 0) {
        uint64_t bytes = (uint64_t)plan.slots * plan.slot_bytes;
        if ((r = lwo__arena_alloc(ctx, bytes, &e->ring_arena_off, &e->ring_arena_size, "the staging ring")) != 0) { lwo_plan_destroy(&plan); return r; }
        e->ring = ctx->arena + e->ring_arena_off;
        e->ring_bytes = bytes;
        e->slot_bytes = plan.slot_bytes;
        e->head = 0;
    }
    /* the resident uploads, timed: the host-to-device rate a later plan is timed with */
    if ((r = lwo__engine_reserve(ctx, e, 2)) != 0 || (r = lwo__engine_event(ctx, e, ctx->compute, &ev0)) != 0) { lwo_plan_destroy(&plan); return r; }
    for (i = 0; i < n; i++) {
        lwo__item *it = ctx->items[i];
        if (it->dead || (it->force != 1 && !plan.resident[i])) continue;
        r = lwo__arena_alloc(ctx, it->total, &it->arena_off, &it->arena_size, "a resident weight");
        /* the arena's free room is split (tensors made between plans): a weight the slots can
           take streams instead; the plan stays within the budget, it only moves more bytes */
        if (r == LWO_ERROR_OUT_OF_BUDGET && it->force != 1 && e->ring_bytes && it->total <= e->slot_bytes) {
            ctx->error[0] = 0;
            demoted++;
            continue;
        }
        if (r) { lwo_plan_destroy(&plan); return r; }
        it->resident = 1;
        it->dev = ctx->arena + it->arena_off;
        ctx->stats.resident_bytes += it->total;
        if ((r = lwo__item_upload(ctx, it, it->dev, ctx->compute)) != 0) { lwo_plan_destroy(&plan); return r; }
    }
    if ((r = lwo__engine_event(ctx, e, ctx->compute, &ev1)) != 0) { lwo_plan_destroy(&plan); return r; }
    e->live_max = 0;
    ctx->planned = 1;
    ctx->stats.plan_workspace_bytes = rv.ws;
    ctx->stats.plan_split_bytes = rv.split;
    ctx->stats.ring_bytes = e->ring_bytes;
    ctx->stats.plan_predicted_ms = plan.predicted_ms;
    ctx->stats.plan_predicted_wait_ms = plan.predicted_wait_ms;
    ctx->stats.plan_predicted_graph_ms = plan.predicted_graph_ms;
    if (pd.use_ms)
        lwo__log(ctx, LWO_LOG_INFO, "streaming plan, timed against the last pass (%.2f ms of compute, %.1f GB/s): %llu bytes resident, "
                 "%d slots of %llu bytes, %llu bytes streamed per pass; the model's pass %.2f ms, %.2f ms of it waiting (a graph's replay %.2f ms)",
                 ctx->stats.plan_predicted_ms - plan.predicted_wait_ms, pd.h2d_GBps, (unsigned long long)ctx->stats.resident_bytes, plan.slots,
                 (unsigned long long)plan.slot_bytes, (unsigned long long)plan.streamed_bytes, plan.predicted_ms, plan.predicted_wait_ms,
                 plan.predicted_graph_ms);
    else
        lwo__log(ctx, LWO_LOG_INFO, "streaming plan: %llu bytes resident, %d slots of %llu bytes, %llu bytes streamed per pass",
                 (unsigned long long)ctx->stats.resident_bytes, plan.slots, (unsigned long long)plan.slot_bytes, (unsigned long long)plan.streamed_bytes);
    if (demoted)
        lwo__log(ctx, LWO_LOG_INFO, "streaming plan: %zu weights planned resident stream instead: the arena's free room is split into blocks too small for them",
                 demoted);
    lwo_plan_destroy(&plan);
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    {
        float ms = 0;
        /* 1 MiB or more: below that the copies' start-up is most of what is timed (a small upload
           still gives a rate, a low one, which only makes the planner cautious) */
        if (ctx->stats.resident_bytes >= (1u << 20) && ctx->cu.cuEventElapsedTime(&ms, e->wait_ev[ev0], e->wait_ev[ev1]) == 0 && ms > 0)
            e->h2d_GBps = (double)ctx->stats.resident_bytes / ms / 1e6;
    }
    e->nmarks = e->harvested = e->nwait = 0;   /* the pool's events are free again (harvested above) */
    e->nxfers = e->xfers_harvested = 0;
    e->xfer_max_end = LWO__MARK_NONE;
    return LWO_SUCCESS;
}

/* The item a fill holds, or NULL when the fill is a remnant: a later fill overwrote part of it, or
   its weight was destroyed. */
static lwo__item *lwo__fill_item(const lwo_context *ctx, const lwo__fill *f) {
    return f->item >= 0 && !ctx->items[f->item]->dead ? ctx->items[f->item] : NULL;
}
/* Whether ring bytes [off, off + size) may be overwritten now: no fill there is acquired, and for
   a prefetch none holds a weight fetched for a use still to come. */
static int lwo__ring_free_at(const lwo_context *ctx, const lwo__engine *e, uint64_t off, uint64_t size, int prefetch) {
    int i;
    if (off + size > e->ring_bytes || off / e->slot_bytes != (off + size - 1) / e->slot_bytes) return 0;
    for (i = 0; i < e->nfills; i++) {
        const lwo__fill *f = &e->fills[i];
        const lwo__item *held;
        if (!f->live || f->off >= off + size || off >= f->off + f->size || !(held = lwo__fill_item(ctx, f))) continue;
        if (held->acquired || (prefetch && f->pending)) return 0;
    }
    return 1;
}

/* Brings item it into the ring at the head, or at the next slot's start when it does not fit in
   the rest of the head's slot. A prefetch that finds that place taken stops there (*placed = 0); a
   use now takes the first place no acquired weight holds, and is an error only when there is none. */
static lwo_result lwo__item_fill(lwo_context *ctx, lwo__engine *e, lwo__item *it, int prefetch, int *placed) {
    uint64_t size = it->total, S = e->slot_bytes, off = e->head;
    lwo__fill *f;
    lwo__CUstream st;
    lwo_result r;
    int i, k, rec = -1, live = 1;
    *placed = 0;
    if (size > e->ring_bytes)
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET, "a weight of %llu bytes does not fit the %llu-byte staging ring: call lwo_streaming_plan after creating it",
                         (unsigned long long)size, (unsigned long long)e->ring_bytes);
    if (size > S)
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET, "a weight of %llu bytes does not fit the %llu-byte staging slots: call lwo_streaming_plan after creating it",
                         (unsigned long long)size, (unsigned long long)S);
    if (off % S + size > S) off = (off / S + 1) * S;
    if (off + size > e->ring_bytes) off = 0;
    if (!lwo__ring_free_at(ctx, e, off, size, prefetch)) {
        int j = -1;
        if (prefetch) return LWO_SUCCESS;
        /* the head is blocked by an acquired weight: a slot's start, or the end of some fill */
        for (i = 0; i < e->nfills + (int)(e->ring_bytes / S); i++) {
            if (i < (int)(e->ring_bytes / S)) off = (uint64_t)i * S;
            else if (e->fills[(j = i - (int)(e->ring_bytes / S))].live) off = e->fills[j].off + e->fills[j].size;
            else continue;
            if (lwo__ring_free_at(ctx, e, off, size, 0)) break;
        }
        if (i == e->nfills + (int)(e->ring_bytes / S))
            return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET, "the %llu-byte staging ring has no room for a weight of %llu bytes beside the weights still acquired: release one first, or raise the budget",
                             (unsigned long long)e->ring_bytes, (unsigned long long)size);
    }
    if (!ctx->capturing && (r = lwo__engine_reserve(ctx, e, 2)) != 0) return r;   /* the copy's timing events */
    k = (int)(e->fill_counter % (uint64_t)e->nstreams);
    st = e->streams[k];
    /* inside a capture the offload stream joins the graph by waiting on the capturing stream, once:
       its later transfers then depend only on what they wait for (joining at every fill would tie
       each transfer to the compute stream's position when the host issued it) */
    if (ctx->capturing && !e->joined[k]) {
        LWO__CU(ctx, cuEventRecord(e->fork, ctx->compute));
        LWO__CU(ctx, cuStreamWaitEvent(st, e->fork, 0));
        e->joined[k] = 1;
    }
    if (e->graph_wait[k]) { LWO__CU(ctx, cuStreamWaitEvent(st, e->graph_done, 0)); e->graph_wait[k] = 0; }
    if (e->prev_stream >= 0 && e->prev_stream != k && !e->test_skip_in_order) LWO__CU(ctx, cuStreamWaitEvent(st, e->prev_ready, 0));
    /* the fills it overwrites leave the ring; the rule the reference systems broke is to write
       before their last reader is done (e->test_skip_consumed_wait exists only so a test can show
       it would see the corruption) */
    for (i = 0; i < e->nfills; i++) {
        lwo__fill *o = &e->fills[i];
        uint64_t end = o->off + o->size;
        if (!o->live) { if (rec < 0) rec = i; continue; }
        if (o->off >= off + size || off >= end) { live += lwo__fill_item(ctx, o) != NULL; continue; }
        if (o->consumed_valid && !e->test_skip_consumed_wait) LWO__CU(ctx, cuStreamWaitEvent(st, o->consumed, 0));
        LWO__CU(ctx, cuStreamWaitEvent(st, o->ready, 0));
        if (o->item >= 0) { ctx->items[o->item]->fill = -1; ctx->items[o->item]->dev = 0; }
        o->item = -1;
        o->pending = 0;
        if (o->off >= off && end <= off + size) { o->live = 0; if (rec < 0) rec = i; continue; }
        /* its bytes past this fill stay taken, events and all: a later write there must wait for
           the same reader and transfer (this fill's waits cover only the bytes it overwrites) */
        if (o->off >= off) { o->off = off + size; o->size = end - o->off; }
        else if (end <= off + size) o->size = off - o->off;
    }
    if (rec < 0) {
        int cap = e->nfills * 2 + 16;
        lwo__fill *nf = (lwo__fill *)LWO_REALLOC(e->fills, (size_t)cap * sizeof *nf);
        if (!nf) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memset(nf + e->nfills, 0, (size_t)(cap - e->nfills) * sizeof *nf);
        e->fills = nf;
        rec = e->nfills;
        e->nfills = cap;
    }
    f = &e->fills[rec];
    if (!f->ready) LWO__CU(ctx, cuEventCreate(&f->ready, LWO__CU_EVENT_DISABLE_TIMING));
    if (!f->consumed) LWO__CU(ctx, cuEventCreate(&f->consumed, LWO__CU_EVENT_DISABLE_TIMING));
    if (ctx->capturing) {
        if ((r = lwo__item_upload(ctx, it, e->ring + off, st)) != 0) return r;
    } else {   /* timed: the copies' rate (lwo__engine_harvest) */
        size_t t0 = 0, t1 = 0;
        if ((r = lwo__engine_event(ctx, e, st, &t0)) != 0 ||
            (r = lwo__item_upload(ctx, it, e->ring + off, st)) != 0 || (r = lwo__engine_event(ctx, e, st, &t1)) != 0 ||
            (r = lwo__engine_xfer(ctx, e, t0, t1, it->total)) != 0) return r;
    }
    LWO__CU(ctx, cuEventRecord(f->ready, st));
    e->prev_ready = f->ready;
    e->prev_stream = k;
    f->off = off; f->size = size; f->item = (int)it->id;
    f->live = 1; f->consumed_valid = 0; f->pending = prefetch;
    e->head = off + size;
    e->fill_counter++;
    if (live > e->live_max) e->live_max = live;
    it->fill = rec;
    it->dev = e->ring + off;
    ctx->stats.bytes_streamed += it->total;
    ctx->stats.transfers++;
    *placed = 1;
    return LWO_SUCCESS;
}

static lwo_result lwo__item_acquire(lwo_context *ctx, lwo__item *it, lwo__CUstream cs, lwo__CUdeviceptr *dev) {
    lwo__engine *e;
    lwo_result r;
    size_t k, pos = LWO__MARK_NONE, pre = 0, post = 0;
    int placed;
    if ((r = lwo__engine_get(ctx, &e)) != 0) return r;
    /* the order covers resident weights too, so a pass that reorders them is seen */
    if (e->in_pass) {
        if (!e->order_known) {
            uint32_t *nl = (uint32_t *)lwo__grow(e->learning, e->nlearning, &e->caplearning, sizeof *nl, 64);
            if (!nl) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            e->learning = nl;
            e->learning[e->nlearning++] = it->id;
            pos = e->nlearning - 1;
        } else if (e->pos < e->norder && e->order[e->pos] == it->id) {
            pos = e->pos++;
        } else {
            ctx->stats.order_deviations++;
            /* find it later in the order and go on from there */
            for (k = 0; k < e->norder; k++) if (e->order[k] == it->id) { e->pos = k + 1; break; }
        }
        if (pos != LWO__MARK_NONE && pos >= e->cap_use_ms) {
            size_t cap = pos * 2 + 64;
            float **per_use[3];
            per_use[0] = &e->use_ms; per_use[1] = &e->use_least; per_use[2] = &e->pass_ms;
            for (k = 0; k < 3; k++) {
                float *grown = (float *)LWO_REALLOC(*per_use[k], cap * sizeof *grown);
                if (!grown) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
                *per_use[k] = grown;
            }
            e->cap_use_ms = cap;
        }
    }
    if (!it->resident) {
        if (!e->ring_bytes) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "a weight is not placed yet: call lwo_streaming_plan after creating weights");
        if (it->fill < 0 && (r = lwo__item_fill(ctx, e, it, 0, &placed)) != 0) return r;
        e->fills[it->fill].pending = 0;
        it->acquired = 1;
    }
    /* prefetch the streamed weights that follow in the order, as far as the ring holds them
       beside this one; those already there are marked as wanted, so no prefetch overwrites them.
       Outside a capture the walk wraps into the next pass, so its first weights are on their way
       while this pass ends. */
    if (e->in_pass && e->order_known && e->ring_bytes) {
        size_t look = e->pos, seen = 0;
        uint64_t ahead = it->resident ? 0 : it->total;
        while (seen < e->norder) {
            lwo__item *nx;
            if (look >= e->norder) { if (ctx->capturing) break; look = 0; }
            nx = ctx->items[e->order[look++]];
            seen++;
            if (nx->resident || nx->dead || nx == it) continue;
            if ((ahead += nx->total) > e->ring_bytes) break;
            if (nx->fill >= 0) { e->fills[nx->fill].pending = 1; continue; }
            if ((r = lwo__item_fill(ctx, e, nx, 1, &placed)) != 0) return r;
            if (!placed) break;
        }
    }
    /* the marks time the wait, and in a pass the compute that follows this use (the planner's
       profile); a capture records none */
    if (ctx->capturing) {
        if (!it->resident && !e->test_skip_ready_wait) LWO__CU(ctx, cuStreamWaitEvent(cs, e->fills[it->fill].ready, 0));
    } else if (it->resident) {
        if (e->in_pass) {
            if ((r = lwo__engine_reserve(ctx, e, 1)) != 0 || (r = lwo__engine_event(ctx, e, cs, &pre)) != 0 ||
                (r = lwo__engine_mark(ctx, e, pre, pre, pos, 0)) != 0) return r;
        }
    } else {
        if ((r = lwo__engine_reserve(ctx, e, 2)) != 0 || (r = lwo__engine_event(ctx, e, cs, &pre)) != 0) return r;
        if (!e->test_skip_ready_wait) LWO__CU(ctx, cuStreamWaitEvent(cs, e->fills[it->fill].ready, 0));
        if ((r = lwo__engine_event(ctx, e, cs, &post)) != 0 || (r = lwo__engine_mark(ctx, e, pre, post, e->in_pass ? pos : LWO__MARK_NONE, 0)) != 0) return r;
    }
    *dev = it->dev;
    return LWO_SUCCESS;
}

/* Records that the kernels enqueued so far on the compute stream are the last to read it. */
static lwo_result lwo__item_release(lwo_context *ctx, lwo__item *it, lwo__CUstream cs) {
    lwo__engine *e = ctx->engine;
    it->acquired = 0;
    if (!e) return LWO_SUCCESS;   /* nothing was ever acquired */
    if (!ctx->capturing) lwo__engine_harvest(ctx, e, 0, LWO__HARVEST_BUDGET);   /* the use's kernels are queued: the GPU is busy */
    if (it->resident || it->fill < 0) return LWO_SUCCESS;
    LWO__CU(ctx, cuEventRecord(e->fills[it->fill].consumed, cs));
    e->fills[it->fill].consumed_valid = 1;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_pass_begin(lwo_context *ctx) {
    lwo__engine *e;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__engine_get(ctx, &e)) != 0) return r;
    if (e->in_pass) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_pass_begin: a pass is already open");
    /* the last pass's marks are read a few at a time as this pass's uses are released, while the
       GPU works, not here: after a synchronize the GPU would wait for them (hundreds of driver
       calls, about a millisecond) */
    lwo__engine_read_pass(ctx, e);
    e->pass_timing = !ctx->capturing && !e->pass_timed;
    if (e->pass_timing) LWO__CU(ctx, cuEventRecord(e->pass_ev[0], ctx->compute));
    e->pass_bytes0 = ctx->stats.bytes_streamed;
    e->in_pass = 1;
    e->deviations0 = ctx->stats.order_deviations;
    e->pos = 0;
    e->nlearning = 0;
    return LWO_SUCCESS;
}

/* Releases every weight still acquired, after the work queued so far on the compute stream. */
static lwo_result lwo__items_release_all(lwo_context *ctx) {
    size_t i;
    lwo_result r;
    for (i = 0; i < ctx->nitems; i++)
        if (ctx->items[i]->acquired && (r = lwo__item_release(ctx, ctx->items[i], ctx->compute)) != 0) return r;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_pass_end(lwo_context *ctx) {
    lwo__engine *e;
    lwo_result r;
    LWO__ENTER(ctx);
    e = ctx->engine;
    if (!e || !e->in_pass) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_pass_end without lwo_pass_begin");
    if ((r = lwo__items_release_all(ctx)) != 0) return r;
    e->in_pass = 0;
    if (!ctx->capturing) {   /* the end of the pass's last use; with it, how many uses the pass had */
        size_t ev = 0;
        lwo_result r = lwo__engine_reserve(ctx, e, 1);
        if (!r) r = lwo__engine_event(ctx, e, ctx->compute, &ev);
        /* a pass that left the order is no profile: no count of uses matches it */
        if (!r) r = lwo__engine_mark(ctx, e, ev, ev, LWO__MARK_END,
                                     ctx->stats.order_deviations != e->deviations0 ? LWO__MARK_NONE : e->order_known ? e->pos : e->nlearning);
        if (r) return r;
    }
    if (e->pass_timing) {
        e->pass_timing = 0;
        LWO__CU(ctx, cuEventRecord(e->pass_ev[1], ctx->compute));
        e->pass_timed = 1;
        e->pass_bytes = ctx->stats.bytes_streamed - e->pass_bytes0;
    }
    if (!e->order_known && e->nlearning) {
        LWO_FREE(e->order);
        e->order = e->learning;
        e->norder = e->nlearning;
        e->learning = NULL;
        e->nlearning = e->caplearning = 0;
        e->order_known = 1;
    } else if (e->order_known && e->pos != e->norder) {
        ctx->stats.order_deviations++;
    }
    ctx->stats.passes++;
    return LWO_SUCCESS;
}

/* Points a streamable weight's tensors at where it is now readable (its slot, or resident storage). */
static lwo_result lwo__weight_acquire(lwo_context *ctx, lwo__CUstream cs, lwo_weight *w) {
    lwo__CUdeviceptr base = 0;
    lwo_result r;
    if (!w->item) return LWO_SUCCESS;
    if ((r = lwo__item_acquire(ctx, w->item, cs, &base)) != 0) return r;
    w->data->ptr = base + lwo__item_part_offset(w->item, 0);
    if (w->bias) w->bias->ptr = base + lwo__item_part_offset(w->item, 1);
    if (w->scales) w->scales->ptr = base + lwo__item_part_offset(w->item, 2);
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_weight_acquire(lwo_context *ctx, lwo_stream *stream, const lwo_weight *w, lwo_weight_info *out) {
    lwo__CUstream cs = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    LWO__GET_STREAM(ctx, stream, cs);
    if ((r = lwo__weight_acquire(ctx, cs, (lwo_weight *)w)) != 0) return r;
    return out ? lwo_weight_get_info(ctx, w, out) : LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_weight_release(lwo_context *ctx, lwo_stream *stream, const lwo_weight *w) {
    lwo__CUstream cs = NULL;
    lwo_result r;
    LWO__ENTER(ctx);
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    LWO__GET_STREAM(ctx, stream, cs);
    return w->item ? lwo__item_release(ctx, w->item, cs) : LWO_SUCCESS;
}

/* ==== 11. Linear and graphs ================================================================== */
/* lwo_linear: the workspace, the W8A8 chain and its per-shape graphs, the paths by format; then
   whole passes as graphs. */
/* Grows the workspace to `bytes`. Growing waits for the device, since queued GEMMs may still read
   the old block; where the arena has no room the old block stays (same size, maybe moved). */
static lwo_result lwo__workspace_grow(lwo_context *ctx, uint64_t bytes) {
    uint64_t off, size, old = ctx->ws_size;
    lwo_result r;
    LWO__CU(ctx, cuCtxSynchronize());
    if (old) { lwo__arena_free(ctx, ctx->ws_off, ctx->ws_size); ctx->ws_size = 0; }
    if ((r = lwo__arena_alloc(ctx, bytes, &off, &size, "lwo_linear's workspace")) != 0) {
        char keep[LWO__ERROR_CAP];
        memcpy(keep, ctx->error, sizeof keep);
        /* the block just freed is free again, so this fits */
        if (old && lwo__arena_alloc(ctx, old, &ctx->ws_off, &ctx->ws_size, "lwo_linear's workspace") != 0) ctx->ws_size = 0;
        memcpy(ctx->error, keep, sizeof keep);
        return r;
    }
    ctx->ws_off = off;
    ctx->ws_size = size;
    return LWO_SUCCESS;
}

/* The workspace of one lwo_linear call on weight w: *rows = M where it holds the whole call (it
   grows to that where it may), else the most rows it holds at a time (the call runs in chunks).
   For a weight the last plan placed nothing grows: the plan reserved what its declared shapes
   need, and larger calls run in chunks. A weight made after the plan may grow it where the arena
   has room (into the room the plan left free). Inside a capture nothing grows (growing
   synchronizes). */
static lwo_result lwo__linear_space(lwo_context *ctx, const lwo_weight *w, uint64_t M, int pad, lwo__CUdeviceptr *ws, uint64_t *rows) {
    const lwo_format f = w->format;
    const uint64_t N = w->rows, Kp = w->kpad, full = lwo__linear_ws(f, M, N, Kp, pad);
    const int may_grow = !(ctx->planned && w->planned) && !ctx->capturing;
    *rows = M;
    if (full > ctx->ws_size) {
        if (!may_grow || lwo__workspace_grow(ctx, full) != LWO_SUCCESS) {
            uint64_t least = lwo__linear_ws(f, M < LWO__CHUNK_ROWS ? M : LWO__CHUNK_ROWS, N, Kp, pad);
            ctx->error[0] = 0;
            if (least > ctx->ws_size && may_grow) lwo__workspace_grow(ctx, least);
            *rows = lwo__linear_rows(f, M, N, Kp, pad, ctx->ws_size);
            if (*rows == 0)
                return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET,
                                 "lwo_linear: a %llu x %llu %s weight needs %llu bytes of workspace (%llu for all %llu rows of x), and the "
                                 "workspace has %llu: %s", (unsigned long long)N, (unsigned long long)Kp, lwo_format_name(f),
                                 (unsigned long long)least, (unsigned long long)full, (unsigned long long)M, (unsigned long long)ctx->ws_size,
                                 ctx->planned && w->planned ? "more than the last lwo_streaming_plan reserved"
                                 : ctx->planned ? "the weight was made after the last lwo_streaming_plan, which reserves the workspace, and the arena has no room; plan again"
                                 : ctx->capturing ? "run the pass once before capturing it (the workspace cannot grow inside a capture)"
                                 : "the budget has no room for it (raise lwo_desc.vram_budget)");
            if (!ctx->chunk_logged) {
                lwo__log(ctx, LWO_LOG_WARN, "lwo_linear runs x of %llu rows in chunks of %llu: the workspace holds %llu bytes, the call needs %llu "
                         "(declare the largest x in lwo_streaming_desc.max_rows)", (unsigned long long)M, (unsigned long long)*rows,
                         (unsigned long long)ctx->ws_size, (unsigned long long)full);
                ctx->chunk_logged = 1;
            }
            ctx->stats.linear_chunked++;
        }
    }
    *ws = ctx->arena + ctx->ws_off;
    return LWO_SUCCESS;
}

/* The W8A8 chain: x [M, K] quantized per token into the workspace (q, then the f32 row scales at
   ws + qbytes), then the GEMM into y [M, N]. The same code launches it, captures it and retargets a
   graph of it (lwo__launch_fn and ctx->lsink), and runs each row chunk of a chunked call. */
static lwo_result lwo__w8a8_chain(lwo_context *ctx, lwo__CUstream cs, lwo__CUdeviceptr x, lwo_dtype xt, uint64_t M,
                                  const lwo_weight *w, lwo__CUdeviceptr ws, lwo__CUdeviceptr bp, int bias_kind,
                                  lwo__CUdeviceptr y, lwo_dtype yt) {
    int fp8 = w->format == LWO_FORMAT_FP8_E4M3_W8A8;
    uint64_t K = w->cols, N = w->rows, Kp = w->kpad, qbytes = lwo__round_up(M * Kp, LWO__ALIGN);
    lwo__CUdeviceptr sm = w->smooth ? w->smooth->ptr : 0, pm = w->perm ? w->perm->ptr : 0, q = ws, sa = ws + qbytes, sw = w->scales->ptr;
    lwo__gemm_args g;
    lwo_result r = lwo__rowq_launch(ctx, cs, x, xt, M, K, pm, sm, 0, w->hlog, fp8, q, Kp, sa);
    if (r) return r;
    memset(&g, 0, sizeof g);
    g.stream = cs; g.op = fp8 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_I8;
    g.a = q; g.lda = g.a_k = Kp; g.b = w->data->ptr; g.kpad = Kp; g.M = M; g.N = N; g.a_scales = sa; g.b_scales = sw;
    g.bias = bp; g.bias_kind = bias_kind < 0 ? 0 : bias_kind; g.y = y; g.y_kind = lwo__gemm_kind(yt); g.may_split = 1;
    return lwo__gemm(ctx, &g);
}

/* Gives up on graphs for weight w after a failed capture or update (the call then runs plainly). */
static void lwo__w8a8_graphs_off(lwo_context *ctx, lwo_weight *w, const char *why) {
    lwo__log(ctx, LWO_LOG_INFO, "lwo_linear: no graphs for this %llu x %llu weight from now on: %s", (unsigned long long)w->rows,
             (unsigned long long)w->cols, why);
    lwo__weight_graphs_free(ctx, w);
    w->graphs_off = 1;
    ctx->stats.linear_graph_fallbacks++;
    ctx->error[0] = 0;
}

/* lwo_linear of a W8A8 weight: through the weight's graph cache where it may be used, else plain. */
static lwo_result lwo__w8a8_linear(lwo_context *ctx, lwo__CUstream cs, const lwo_tensor *x, const lwo_weight *cw,
                                   lwo__CUdeviceptr ws, lwo__CUdeviceptr bp, int bias_kind, const lwo_tensor *y) {
    lwo_weight *w = (lwo_weight *)cw;
    uint64_t M = x->shape[0];
    int nslots = lwo__graph_slots(ctx), i, capturing = 1, y16 = (y->ptr & 15u) == 0;
    lwo__lgraph *g = NULL, *victim = NULL;
    lwo__lsink sink;
    lwo__CUresult rc;
    lwo_result r;
    /* no graphs: when off, for streamed weights (their acquire and release record events), for empty
       products, and inside the caller's own capture (which must get the plain kernels) */
    if (ctx->desc.graph_cache < 0 || w->graphs_off || w->item || M == 0 || w->rows == 0 ||
        ctx->cu.cuStreamIsCapturing(cs, &capturing) != 0 || capturing != 0)
        return lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype);
    if (!w->graphs) {
        w->graphs = (lwo__lgraph *)LWO_MALLOC((size_t)nslots * sizeof *w->graphs);
        if (!w->graphs) { lwo__w8a8_graphs_off(ctx, w, "out of host memory"); return lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype); }
        memset(w->graphs, 0, (size_t)nslots * sizeof *w->graphs);
    }
    for (i = 0; i < nslots; i++) {
        lwo__lgraph *e = &w->graphs[i];
        if (e->used && e->M == M && e->xdt == (int)x->dtype && e->ydt == (int)y->dtype && e->bias_kind == bias_kind && e->y16 == y16) { g = e; break; }
        /* the slot a capture takes: a free one, else the least recently used */
        if (!victim || (victim->used && (!e->used || e->stamp < victim->stamp))) victim = e;
    }
    if (g) { /* replay: point the nodes at this call's pointers */
        g->nodes.update = 1; g->nodes.exec = g->exec; g->nodes.n = 0;
        ctx->lsink = &g->nodes;
        r = lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype);
        ctx->lsink = NULL;
        if (!r && g->nodes.n != g->nnodes) r = lwo__fail(ctx, LWO_ERROR_CUDA, "lwo_linear's graph has %d kernels; this call launched %d", g->nnodes, g->nodes.n);
        if (!r && (rc = ctx->cu.cuGraphLaunch(g->exec, cs)) != 0) r = lwo__cuda_fail(ctx, rc, "cuGraphLaunch");
        if (r) { lwo__w8a8_graphs_off(ctx, w, ctx->error); return lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype); }
        g->stamp = ++w->graph_clock;
        ctx->stats.linear_graph_hits++;
        return LWO_SUCCESS;
    }
    /* First call at this key: run it plainly (which also loads every module and kernel it needs,
       lazily loaded ones included, outside the capture), then capture the chain, instantiate and
       launch it, so the graph writes the same result once more. A failed capture leaves the plain
       result standing. */
    if ((r = lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype)) != 0) return r;
    if (victim->used) { lwo__lgraph_drop(ctx, victim); ctx->stats.linear_graph_evictions++; }
    g = victim;
    memset(&sink, 0, sizeof sink);
    if ((rc = ctx->cu.cuStreamBeginCapture(cs, 2 /* relaxed: other streams and threads go on */)) != 0) {
        lwo__cuda_fail(ctx, rc, "cuStreamBeginCapture");
        lwo__w8a8_graphs_off(ctx, w, ctx->error);
        return LWO_SUCCESS;
    }
    ctx->lsink = &sink;
    r = lwo__w8a8_chain(ctx, cs, x->ptr, x->dtype, M, w, ws, bp, bias_kind, y->ptr, y->dtype);
    ctx->lsink = NULL;
    rc = ctx->cu.cuStreamEndCapture(cs, &g->graph); /* always: the stream leaves capture mode */
    if (!r && rc) r = lwo__cuda_fail(ctx, rc, "cuStreamEndCapture");
    if (!r && (rc = ctx->cu.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0)) != 0) r = lwo__cuda_fail(ctx, rc, "cuGraphInstantiateWithFlags");
    g->used = 1; /* from here lwo__lgraph_drop frees what was made */
    if (!r && (rc = ctx->cu.cuGraphLaunch(g->exec, cs)) != 0) r = lwo__cuda_fail(ctx, rc, "cuGraphLaunch");
    /* a launch that failed enqueued nothing: the plain result stands */
    if (r) { lwo__w8a8_graphs_off(ctx, w, ctx->error); return LWO_SUCCESS; }
    g->M = M; g->xdt = (int)x->dtype; g->ydt = (int)y->dtype; g->bias_kind = bias_kind; g->y16 = y16;
    g->nodes = sink;
    g->nnodes = sink.n;
    g->stamp = ++w->graph_clock;
    ctx->stats.linear_graph_captures++;
    return LWO_SUCCESS;
}

static lwo_result lwo__linear_main(lwo_context *ctx, lwo_stream *stream, const lwo_tensor *x, const lwo_weight *w,
                                   const lwo_tensor *bias, lwo_tensor *y) {
    lwo__CUstream cs;
    lwo_result r;
    uint64_t M, N, K, Kp, xrow, yrow;
    lwo__CUdeviceptr bp = 0, ws = 0;
    int bias_kind = 0, out_kind;
    LWO__ENTER(ctx);
    LWO__CHECK_TENSOR(ctx, x);
    LWO__CHECK_TENSOR(ctx, y);
    if (bias) LWO__CHECK_TENSOR(ctx, bias);
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    LWO__GET_STREAM(ctx, stream, cs);
    if (x->ndim != 2 || (x->dtype != LWO_DTYPE_BF16 && x->dtype != LWO_DTYPE_F16))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: argument 'x' must be a 2-D bf16 or f16 tensor [M, K] (it is %dd %s)", x->ndim, lwo_dtype_name(x->dtype));
    M = x->shape[0]; K = x->shape[1]; N = w->rows; Kp = w->kpad;
    if (K != w->cols) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: 'x' has K = %llu columns; the weight has %llu", (unsigned long long)K, (unsigned long long)w->cols);
    if (y->ndim != 2 || y->shape[0] != M || y->shape[1] != N || !lwo__is_float(y->dtype))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: argument 'y' must be f32, f16 or bf16 [%llu, %llu]", (unsigned long long)M, (unsigned long long)N);
    if ((w->format == LWO_FORMAT_BF16 && x->dtype != LWO_DTYPE_BF16) || (w->format == LWO_FORMAT_F16 && x->dtype != LWO_DTYPE_F16))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: 'x' is %s but the weight is %s; they must match", lwo_dtype_name(x->dtype), lwo_format_name(w->format));
    if (bias) {
        if (!lwo__is_float(bias->dtype) || bias->numel != N)
            return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: argument 'bias' must be f32, f16 or bf16 with %llu elements", (unsigned long long)N);
        bp = bias->ptr; bias_kind = lwo__gemm_kind(bias->dtype);
    } else if (w->bias) { bp = w->bias->ptr; bias_kind = 0; }
    out_kind = lwo__gemm_kind(y->dtype);
    xrow = K * lwo_dtype_size(x->dtype);
    yrow = N * lwo_dtype_size(y->dtype);
    if (M > 0x7fffffffu) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: M = %llu is more than one launch takes", (unsigned long long)M);
    switch (w->format) {
    case LWO_FORMAT_BF16: case LWO_FORMAT_F16: case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: {
        int upcast = lwo__format_upcast(w->format), copied = 0;
        int pad = (K % 8) != 0 || !lwo__aligned16(x->ptr);
        lwo__CUdeviceptr xpad = 0;
        uint64_t rows = M, m0;
        /* sized before anything is queued: growing synchronizes and allocates. An upcast weight's
           16-bit copy keeps its room even where the Hopper GEMM reads the codes as they are: the
           plan's workspace does not depend on the device's kernels */
        if ((upcast || pad) && (r = lwo__linear_space(ctx, w, M, pad, &ws, &rows)) != 0) return r;
        xpad = upcast ? ws + lwo__round_up(N * Kp * 2, LWO__ALIGN) : ws;
        for (m0 = 0; m0 < M; m0 += rows) {
            uint64_t mc = M - m0 < rows ? M - m0 : rows, lda = K;
            lwo__CUdeviceptr A = x->ptr + m0 * xrow, B = w->data->ptr;
            int fp8 = upcast && (lwo__gemm_fp8_ok(ctx, mc, N, B, y->ptr + m0 * yrow) ||
                                 lwo__gemm_fp8_regs_default(ctx, mc, N, B, y->ptr + m0 * yrow, out_kind));
            if (upcast && !fp8) {   /* the weight upcast into the workspace, once a call */
                if (!copied && (r = lwo__convert_launch(ctx, cs, w->data->ptr, w->data->dtype, ws, x->dtype, N * Kp, 1.0f,
                                                        w->scales->ptr, "lwo_k_convert")) != 0) return r;
                copied = 1;
                B = ws;
            }
            if (pad) {
                if ((r = lwo__pad_launch(ctx, cs, A, x->dtype, mc, K, 0, xpad, x->dtype, Kp)) != 0) return r;
                A = xpad;
                lda = Kp;
            }
            lwo__gemm_args g;
            memset(&g, 0, sizeof g);
            g.stream = cs; g.op = x->dtype; g.a = A; g.lda = g.a_k = lda; g.b = B; g.kpad = Kp; g.M = mc; g.N = N;
            g.bias = bp; g.bias_kind = bias_kind; g.y = y->ptr + m0 * yrow; g.y_kind = out_kind; g.may_split = ws != 0;
            if (fp8) { g.b_fp8 = w->format == LWO_FORMAT_FP8_E5M2 ? 2 : 1; g.b_scales = w->scales->ptr; }
            if ((r = lwo__gemm(ctx, &g)) != 0) return r;
        }
        return LWO_SUCCESS;
    }
    case LWO_FORMAT_INT8: case LWO_FORMAT_FP8_E4M3_W8A8: {
        uint64_t rows, m0;
        int kind = bias ? bias_kind : (w->bias ? 0 : -1);
        if ((r = lwo__linear_space(ctx, w, M, 0, &ws, &rows)) != 0) return r;
        if (rows == M) return lwo__w8a8_linear(ctx, cs, x, w, ws, bp, kind, y);
        for (m0 = 0; m0 < M; m0 += rows) {   /* chunked: plain launches, no graph */
            uint64_t mc = M - m0 < rows ? M - m0 : rows;
            if ((r = lwo__w8a8_chain(ctx, cs, x->ptr + m0 * xrow, x->dtype, mc, w, ws, bp, kind, y->ptr + m0 * yrow, y->dtype)) != 0) return r;
        }
        return LWO_SUCCESS;
    }
    default: return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: the weight has an invalid format");
    }
}

/* W's path, then the LoRAs' side path on the same stream. */
static lwo_result lwo__linear_run(lwo_context *ctx, lwo_stream *stream, const lwo_tensor *x, const lwo_weight *w,
                                  const lwo_tensor *bias, lwo_tensor *y) {
    lwo__CUstream cs;
    lwo_result r = lwo__linear_main(ctx, stream, x, w, bias, y);
    if (r || !w->lora || w->lora->R == 0) return r;
    LWO__GET_STREAM(ctx, stream, cs);
    return lwo__lora_apply(ctx, cs, x, w, y);
}

LWO_DEF lwo_result lwo_linear(lwo_context *ctx, const lwo_linear_desc *d) {
    lwo_stream *stream;
    const lwo_tensor *x, *bias;
    const lwo_weight *w;
    lwo_tensor *y;
    lwo_result r, r2;
    LWO__ENTER(ctx);
    if (!d) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_linear: argument 'desc' is NULL");
    stream = d->stream; x = d->x; w = d->w; bias = d->bias; y = d->y;
    if ((r = lwo__check_weight(ctx, w)) != 0) return r;
    if (!w->item) return lwo__linear_run(ctx, stream, x, w, bias, y);
    if ((r = lwo_weight_acquire(ctx, stream, w, NULL)) != 0) return r;
    r = lwo__linear_run(ctx, stream, x, w, bias, y);
    if (r) {
        char keep[LWO__ERROR_CAP];
        memcpy(keep, ctx->error, sizeof keep); /* release starts afresh; keep the reason */
        lwo_weight_release(ctx, stream, w);
        memcpy(ctx->error, keep, sizeof keep);
        return r;
    }
    r2 = lwo_weight_release(ctx, stream, w);
    return r2;
}

/* ---- whole passes as graphs ----------------------------------------------------------------- */
/* bytes, transfers: what one launch moves (stats count them per launch, not at capture) */
/* lora_epoch: the context's count of LoRA attaches and detaches at the capture */
struct lwo_graph { uint32_t magic; lwo_context *ctx; lwo__CUgraph graph; lwo__CUgraphExec exec; uint64_t bytes, transfers, lora_epoch; };
#define LWO__MAGIC_GRAPH 0x6c776f47u

LWO_DEF lwo_result lwo_graph_capture_begin(lwo_context *ctx) {
    lwo__engine *e;
    lwo_result r;
    int k;
    LWO__ENTER(ctx);
    if ((r = lwo__engine_get(ctx, &e)) != 0) return r;
    if (ctx->capturing) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "a capture is already open");
    /* events recorded before the capture cannot be waited on inside it: start from idle streams */
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    for (k = 0; k < e->nstreams; k++) LWO__CU(ctx, cuStreamSynchronize(e->streams[k]));
    for (k = 0; k < e->nstreams; k++) e->graph_wait[k] = e->joined[k] = 0;
    /* and from an empty ring, so every transfer the pass needs is part of the graph */
    lwo__engine_forget_ring(ctx, e);
    LWO__CU(ctx, cuStreamBeginCapture(ctx->compute, 2 /* relaxed */));
    ctx->capturing = 1;
    e->cap_bytes0 = ctx->stats.bytes_streamed;
    e->cap_transfers0 = ctx->stats.transfers;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_graph_capture_end(lwo_context *ctx, lwo_graph **out) {
    lwo__engine *e;
    lwo_graph *g;
    lwo__CUresult rc;
    uint64_t cap_bytes, cap_transfers;
    LWO__ENTER(ctx);
    e = ctx->engine;
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    *out = NULL;
    if (!e || !ctx->capturing) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_graph_capture_end without lwo_graph_capture_begin");
    ctx->capturing = 0;
    /* the captured transfers move nothing until the graph runs (each launch counts them), and
       nothing at all if the capture fails */
    cap_bytes = ctx->stats.bytes_streamed - e->cap_bytes0;
    cap_transfers = ctx->stats.transfers - e->cap_transfers0;
    ctx->stats.bytes_streamed = e->cap_bytes0;
    ctx->stats.transfers = e->cap_transfers0;
    g = (lwo_graph *)LWO_MALLOC(sizeof *g);
    if (!g) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(g, 0, sizeof *g);
    rc = ctx->cu.cuStreamEndCapture(ctx->compute, &g->graph);
    if (rc) { LWO_FREE(g); return lwo__cuda_fail(ctx, rc, "cuStreamEndCapture (did a streamed weight stay acquired, or a transfer wait outside the pass?)"); }
    rc = ctx->cu.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    if (rc) { ctx->cu.cuGraphDestroy(g->graph); LWO_FREE(g); return lwo__cuda_fail(ctx, rc, "cuGraphInstantiateWithFlags"); }
    g->magic = LWO__MAGIC_GRAPH;
    g->ctx = ctx;
    g->bytes = cap_bytes;
    g->transfers = cap_transfers;
    g->lora_epoch = ctx->lora_epoch;   /* LoRAs cannot change during a capture */
    /* the captured transfers have not run, and the events recorded during capture are not real
       records: the ring is empty as far as the next eager use is concerned */
    lwo__engine_forget_ring(ctx, e);
    *out = g;
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_graph_launch(lwo_context *ctx, lwo_graph *g) {
    lwo__engine *e;
    int k;
    LWO__ENTER(ctx);
    if (!g || g->magic != LWO__MAGIC_GRAPH || g->ctx != ctx) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'g' is not a live graph of this context");
    if (g->lora_epoch != ctx->lora_epoch)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_graph_launch: a LoRA was attached or detached since this graph was captured, "
                         "and the graph still runs the old side paths (or reads freed factors): capture the pass again");
    /* transfers still in flight from eager prefetches write the bytes the graph will fill */
    e = ctx->engine;
    for (k = 0; e && k < e->nfills; k++)
        if (e->fills[k].live) LWO__CU(ctx, cuStreamWaitEvent(ctx->compute, e->fills[k].ready, 0));
    LWO__CU(ctx, cuGraphLaunch(g->exec, ctx->compute));
    ctx->stats.graph_launches++;
    ctx->stats.bytes_streamed += g->bytes;
    ctx->stats.transfers += g->transfers;
    /* any ring byte may be read inside the graph: a later eager transfer waits for the whole graph */
    if (e) {
        LWO__CU(ctx, cuEventRecord(e->graph_done, ctx->compute));
        for (k = 0; k < e->nstreams; k++) e->graph_wait[k] = 1;
        lwo__engine_forget_ring(ctx, e);
    }
    return LWO_SUCCESS;
}

LWO_DEF uint64_t lwo_graph_bytes_streamed(const lwo_graph *g) { return g && g->magic == LWO__MAGIC_GRAPH ? g->bytes : 0; }

LWO_DEF void lwo_graph_destroy(lwo_context *ctx, lwo_graph *g) {
    if (!ctx || ctx->magic != LWO__MAGIC_CTX || !g || g->magic != LWO__MAGIC_GRAPH || g->ctx != ctx) return;
    ctx->cu.cuCtxSetCurrent(ctx->cuctx);
    ctx->cu.cuGraphExecDestroy(g->exec);
    ctx->cu.cuGraphDestroy(g->graph);
    g->magic = 0;
    LWO_FREE(g);
}

LWO_DEF lwo_result lwo_pass_abort(lwo_context *ctx) {
    lwo__engine *e;
    lwo__CUresult rc;
    lwo_result r;
    size_t i;
    int k;
    LWO__ENTER(ctx);
    e = ctx->engine;
    if (!e || (!e->in_pass && !ctx->capturing)) return LWO_SUCCESS;
    if (ctx->capturing) {
        lwo__CUgraph g = NULL;
        /* the offload streams that joined the capture join back, so it can end (it is dropped) */
        for (k = 0; k < e->nstreams; k++)
            if (e->joined[k] && ctx->cu.cuEventRecord(e->fork, e->streams[k]) == 0) ctx->cu.cuStreamWaitEvent(ctx->compute, e->fork, 0);
        rc = ctx->cu.cuStreamEndCapture(ctx->compute, &g);   /* the stream leaves capture mode either way */
        if (g) ctx->cu.cuGraphDestroy(g);
        (void)rc;
        ctx->capturing = 0;
        ctx->stats.bytes_streamed = e->cap_bytes0;
        ctx->stats.transfers = e->cap_transfers0;
        lwo__engine_forget_ring(ctx, e);   /* nothing captured ran */
        for (i = 0; i < ctx->nitems; i++) ctx->items[i]->acquired = 0;
    }
    if (e->in_pass) {
        e->in_pass = 0;
        e->nlearning = 0;         /* a cut-short pass teaches no order */
        e->pass_timing = 0;       /* and is no pass to time */
    }
    if ((r = lwo__items_release_all(ctx)) != 0) return r;
    /* the pass's marks lack their end: read what can be read, drop the rest (no profile) */
    lwo__engine_harvest(ctx, e, 1, 0);
    LWO__CU(ctx, cuStreamSynchronize(ctx->compute));
    for (k = 0; k < e->nstreams; k++) LWO__CU(ctx, cuStreamSynchronize(e->streams[k]));
    return LWO_SUCCESS;
}

/* ==== 12. safetensors: the reader and the writer ============================================= */
/* Reader: map, then parse the header against its fixed schema with explicit lengths (bounds are
   checked by subtraction, never by adding to a pointer). Strings decode into one pool per file: a
   decoded string plus its NUL is never longer than its JSON form with quotes, so a pool of the
   header's size cannot overflow. Uses only the C library and the platform section's file calls
   (lwo__map_file, lwo__wfile_*). */

typedef struct lwo__st_shard {
    char *path;                 /* a copy, for messages */
    const uint8_t *base;
    uint64_t size;
    int mapped;                 /* 1: lwo__unmap_file at close */
    uint64_t data_start;        /* 8 + header length */
    char *pool;                 /* decoded strings of this file's header */
} lwo__st_shard;

typedef struct lwo__st_meta { const char *key, *value; size_t shard, order; } lwo__st_meta;

struct lwo_safetensors {
    lwo__st_shard *shards;
    size_t shard_count;
    lwo_safetensors_tensor *tensors;
    size_t count, cap;
    const lwo_safetensors_tensor **by_name;  /* sorted by name */
    lwo__st_meta *meta;             /* sorted by key after open */
    size_t meta_count, meta_cap;
    int ready;                      /* open succeeded: the indexes are valid */
    char error[768];
};

/* The file's dtype tags, by lwo_dtype: the only place they are spelled. */
static const char *const lwo__st_dtype_names[LWO_DTYPE_COUNT] = {
    "INVALID", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I8", "U8", "I32", "F64", "I64", "I16", "BOOL"
};

static const char *lwo__st_dtype_tag(lwo_dtype t) {
    return ((unsigned)t < (unsigned)LWO_DTYPE_COUNT) ? lwo__st_dtype_names[t] : "INVALID";
}
static lwo_dtype lwo__st_dtype_from_tag(const char *name) {
    int i;
    if (!name) return LWO_DTYPE_INVALID;
    for (i = 1; i < (int)LWO_DTYPE_COUNT; i++)
        if (strcmp(name, lwo__st_dtype_names[i]) == 0) return (lwo_dtype)i;
    return LWO_DTYPE_INVALID;
}
/* t where lwo's kernels and lwo_ref_load take it; INVALID for the dtypes only checkpoints hold
   (lwo_dtype lists those last, from F64 on). */
static lwo_dtype lwo__st_kernel_dtype(lwo_dtype t) { return t > LWO_DTYPE_INVALID && t < LWO_DTYPE_F64 ? t : LWO_DTYPE_INVALID; }

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void lwo__st_fail(lwo_safetensors *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error, sizeof f->error, fmt, ap);
    va_end(ap);
}

/* A tensor's shape as "2, 3" (for messages). */
static void lwo__st_shape(const lwo_safetensors_tensor *t, char *buf, size_t size) {
    int i;
    size_t n = 0;
    buf[0] = 0;
    for (i = 0; i < t->ndim && n + 24 < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %llu" : "%llu", (unsigned long long)t->shape[i]);
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
/* After an object's member: 1 past a ',' (another member follows), 0 at the '}' (left to the
   caller), -1 at anything else, reported for the tensor named `tensor` (or, NULL, with `where`). */
static int lwo__st_member_end(lwo__st_parser *P, const char *tensor, const char *where) {
    char b[16];
    lwo__st_ws(P);
    if (lwo__st_peek(P) == ',') { P->p++; return 1; }
    if (lwo__st_peek(P) == '}') return 0;
    if (tensor) lwo__st_perr(P, "tensor \"%.300s\": expected ',' or '}', found %s", tensor, lwo__st_show(lwo__st_peek(P), b));
    else lwo__st_perr(P, "expected ',' or '}'%s, found %s", where, lwo__st_show(lwo__st_peek(P), b));
    return -1;
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
    if (depth > LWO_SAFETENSORS_MAX_JSON_DEPTH) return lwo__st_perr(P, "JSON nested deeper than %d", LWO_SAFETENSORS_MAX_JSON_DEPTH);
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

static int lwo__st_push_tensor(lwo_safetensors *f, lwo_safetensors_tensor **out) {
    void *n = lwo__grow(f->tensors, f->count, &f->cap, sizeof *f->tensors, 64);
    if (!n) return 0;
    f->tensors = (lwo_safetensors_tensor *)n;
    *out = &f->tensors[f->count++];
    memset(*out, 0, sizeof **out);
    return 1;
}
static int lwo__st_push_meta(lwo_safetensors *f, const char *k, const char *v, size_t shard) {
    void *n = lwo__grow(f->meta, f->meta_count, &f->meta_cap, sizeof *f->meta, 16);
    if (!n) return 0;
    f->meta = (lwo__st_meta *)n;
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
    int have_dtype = 0, have_shape = 0, have_off = 0, m;
    lwo_safetensors_tensor *t;
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
            if (have_dtype++) return lwo__st_perr(P, "tensor \"%.300s\": duplicate field \"dtype\"", name);
            if (!lwo__st_string(P, &dt)) return 0;
            t->dtype = lwo__st_dtype_from_tag(dt);
            if (t->dtype == LWO_DTYPE_INVALID) return lwo__st_perr(P, "tensor \"%.300s\": unknown dtype \"%.40s\"", name, dt);
            P->pool_used = keep;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++) return lwo__st_perr(P, "tensor \"%.300s\": duplicate field \"shape\"", name);
            if (!lwo__st_expect(P, '[', "'[' (shape)")) return 0;
            lwo__st_ws(P);
            if (lwo__st_peek(P) == ']') P->p++;
            else for (;;) {
                uint64_t d;
                if (t->ndim == LWO_SAFETENSORS_MAX_DIMS) return lwo__st_perr(P, "tensor \"%.300s\": more than %d dimensions", name, LWO_SAFETENSORS_MAX_DIMS);
                if (!lwo__st_uint(P, &d, "shape")) return 0;
                t->shape[t->ndim++] = d;
                lwo__st_ws(P);
                if (lwo__st_peek(P) == ',') { P->p++; continue; }
                if (lwo__st_peek(P) == ']') { P->p++; break; }
                return lwo__st_perr(P, "tensor \"%.300s\": expected ',' or ']' in shape, found %s", name, lwo__st_show(lwo__st_peek(P), b));
            }
        } else if (strcmp(key, "data_offsets") == 0) {
            if (have_off++) return lwo__st_perr(P, "tensor \"%.300s\": duplicate field \"data_offsets\"", name);
            if (!lwo__st_expect(P, '[', "'[' (data_offsets)")) return 0;
            if (!lwo__st_uint(P, &begin, "data_offsets")) return 0;
            if (!lwo__st_expect(P, ',', "',' (data_offsets has two entries)")) return 0;
            if (!lwo__st_uint(P, &end, "data_offsets")) return 0;
            if (!lwo__st_expect(P, ']', "']' (data_offsets has two entries)")) return 0;
        } else {
            return lwo__st_perr(P, "tensor \"%.300s\": unknown field \"%.40s\"", name, key);
        }
        if ((m = lwo__st_member_end(P, name, NULL)) < 0) return 0;
        if (!m) break;
    }
    P->p++;
    if (!have_dtype || !have_shape || !have_off)
        return lwo__st_perr(P, "tensor \"%.300s\": missing field \"%.300s\"", name,
                            !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    if (begin > end)
        return lwo__st_perr(P, "tensor \"%.300s\": data_offsets [%llu, %llu] are reversed", name,
                            (unsigned long long)begin, (unsigned long long)end);
    {
        uint64_t n = 1, es = lwo_dtype_size(t->dtype);
        int i;
        for (i = 0; i < t->ndim; i++) {
            if (t->shape[i] && n > UINT64_MAX / t->shape[i])
                return lwo__st_perr(P, "tensor \"%.300s\": element count overflows", name);
            n *= t->shape[i];
        }
        if (n > UINT64_MAX / es) return lwo__st_perr(P, "tensor \"%.300s\": byte size overflows", name);
        t->numel = n;
        t->bytes = n * es;
        if (end - begin != t->bytes)
            return lwo__st_perr(P, "tensor \"%.300s\": data_offsets span %llu bytes, but %s with this shape is %llu bytes",
                                name, (unsigned long long)(end - begin), lwo__st_dtype_tag(t->dtype),
                                (unsigned long long)t->bytes);
    }
    t->offset = begin;
    return 1;
}

/* In-place heap sort: O(n log n) comparisons whatever the order of the input. These arrays come
   from the file, and the C library's qsort promises no bound (a quicksort can be driven quadratic
   by an order an attacker picks, McIlroy 1999). cmp must be a total order; every comparator here
   breaks ties by position, so the result does not depend on the sort being unstable. */
static void lwo__st_swap(unsigned char *a, unsigned char *b, size_t size) {
    unsigned char t[64];
    while (size) {
        size_t k = size < sizeof t ? size : sizeof t;
        memcpy(t, a, k); memcpy(a, b, k); memcpy(b, t, k);
        a += k; b += k; size -= k;
    }
}
/* Bottom-up sift (Wegener): down to a leaf along the larger children, one comparison a level,
   then up to where the root's element belongs, so the whole sort makes about n log2 n comparisons
   rather than the 2 n log2 n of the textbook sift. */
static void lwo__st_sift(unsigned char *b, size_t root, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    size_t j = root, k;
    while ((k = 2 * j + 1) < n) {
        if (k + 1 < n && cmp(b + k * size, b + (k + 1) * size) < 0) k++;
        j = k;
    }
    while (j != root && cmp(b + root * size, b + j * size) > 0) j = (j - 1) / 2;
    /* rotate the path root..j up one place, the root's element landing at j */
    for (; j != root; j = (j - 1) / 2) lwo__st_swap(b + root * size, b + j * size, size);
}
static void lwo__st_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    unsigned char *b = (unsigned char *)base;
    size_t i;
    if (n < 2) return;
    for (i = n / 2; i-- > 0;) lwo__st_sift(b, i, n, size, cmp);
    for (i = n - 1; i > 0; i--) {
        lwo__st_swap(b, b + i * size, size);
        lwo__st_sift(b, 0, i, size, cmp);
    }
}

static int lwo__st_cmp_offset(const void *a, const void *b) {
    const lwo_safetensors_tensor *x = *(const lwo_safetensors_tensor *const *)a, *y = *(const lwo_safetensors_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}
static int lwo__st_cmp_name(const void *a, const void *b) {
    const lwo_safetensors_tensor *x = *(const lwo_safetensors_tensor *const *)a, *y = *(const lwo_safetensors_tensor *const *)b;
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
    const lwo_safetensors_tensor **v;
    if (n == 0) {
        if (data_size != 0) { lwo__st_fail(f, "%s: %llu data bytes but no tensors", sh->path, (unsigned long long)data_size); return LWO_ERROR_BAD_FILE; }
        return LWO_SUCCESS;
    }
    if (n > ((size_t)-1) / sizeof *v) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    v = (const lwo_safetensors_tensor **)LWO_MALLOC(n * sizeof *v);
    if (!v) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    for (i = 0; i < n; i++) v[i] = &f->tensors[first + i];
    lwo__st_sort(v, n, sizeof *v, lwo__st_cmp_offset);
    for (i = 0; i < n; i++) {
        const lwo_safetensors_tensor *t = v[i];
        uint64_t end = t->offset + t->bytes;   /* no overflow: end came from the file as a uint */
        if (end > data_size) {
            lwo__st_fail(f, "%s: tensor \"%.300s\": data_offsets [%llu, %llu] past the end of the data (%llu bytes)",
                         sh->path, t->name, (unsigned long long)t->offset, (unsigned long long)end,
                         (unsigned long long)data_size);
            LWO_FREE(v); return LWO_ERROR_BAD_FILE;
        }
        if (t->offset > cursor) {
            lwo__st_fail(f, "%s: data bytes [%llu, %llu) (file offset %llu) belong to no tensor (a hole before \"%.300s\")",
                         sh->path, (unsigned long long)cursor, (unsigned long long)t->offset,
                         (unsigned long long)(sh->data_start + cursor), t->name);
            LWO_FREE(v); return LWO_ERROR_BAD_FILE;
        }
        if (t->offset < cursor) {
            lwo__st_fail(f, "%s: tensor \"%.300s\" (data_offsets [%llu, %llu]) overlaps tensor \"%.300s\"",
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
        lwo_safetensors_tensor *t = &f->tensors[i];
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
    int i, have_meta = 0, r, m;
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
                    lwo__st_perr(&P, "metadata value of \"%.300s\" must be a string", k);
                    return LWO_ERROR_BAD_FILE;
                }
                if (!lwo__st_string(&P, &v)) return LWO_ERROR_BAD_FILE;
                if (!lwo__st_push_meta(f, k, v, s)) return LWO_ERROR_OUT_OF_HOST_MEMORY;
                if ((m = lwo__st_member_end(&P, NULL, " in __metadata__")) < 0) return LWO_ERROR_BAD_FILE;
                if (!m) break;
            }
            P.p++;
        } else {
            r = lwo__st_parse_tensor(&P, key, s);
            if (r < 0) return LWO_ERROR_OUT_OF_HOST_MEMORY;
            if (r == 0) return LWO_ERROR_BAD_FILE;
        }
        if ((m = lwo__st_member_end(&P, NULL, " at the top level")) < 0) return LWO_ERROR_BAD_FILE;
        if (!m) break;
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
        f->by_name = (const lwo_safetensors_tensor **)LWO_MALLOC(f->count * sizeof *f->by_name);
        if (!f->by_name) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        for (i = 0; i < f->count; i++) f->by_name[i] = &f->tensors[i];
        lwo__st_sort(f->by_name, f->count, sizeof *f->by_name, lwo__st_cmp_name);
        for (i = 1; i < f->count; i++) {
            const lwo_safetensors_tensor *a = f->by_name[i - 1], *b = f->by_name[i];
            if (strcmp(a->name, b->name) == 0) {
                if (a->shard == b->shard)
                    lwo__st_fail(f, "%s: duplicate tensor name \"%.300s\"", f->shards[a->shard].path, a->name);
                else
                    lwo__st_fail(f, "tensor \"%.300s\" is in both %s and %s", a->name, f->shards[a->shard].path,
                                 f->shards[b->shard].path);
                return LWO_ERROR_BAD_FILE;
            }
        }
    }
    if (f->meta_count) {
        lwo__st_sort(f->meta, f->meta_count, sizeof *f->meta, lwo__st_cmp_meta);
        for (i = 1, j = 1; i < f->meta_count; i++) {
            if (strcmp(f->meta[i].key, f->meta[j - 1].key) == 0) {
                if (f->meta[i].shard == f->meta[j - 1].shard) {
                    lwo__st_fail(f, "%s: duplicate metadata key \"%.300s\"", f->shards[f->meta[i].shard].path, f->meta[i].key);
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

LWO_DEF void lwo_safetensors_destroy(lwo_safetensors *f) {
    size_t i;
    if (!f) return;
    for (i = 0; i < f->shard_count; i++) {
        lwo__st_shard *sh = &f->shards[i];
        if (sh->mapped) lwo__unmap_file(sh->base, sh->size);
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
    lwo_result r = lwo__map_file(path, &sh->base, &sh->size, f->error, sizeof f->error);
    sh->mapped = r == LWO_SUCCESS && sh->size != 0;
    return r;
}

/* The shards of a file set, opened one after another into f. */
static lwo_result lwo__st_open_files(lwo_safetensors *f, const char *const *paths, size_t count) {
    lwo_result r;
    size_t i;
    for (i = 0; i < count; i++) {
        if (!paths[i]) { lwo__st_fail(f, "lwo_safetensors_create: desc.paths[%llu] is NULL", (unsigned long long)i); return LWO_ERROR_INVALID_ARGUMENT; }
        f->shards[i].path = lwo__strdup(paths[i]);
        if (!f->shards[i].path) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        f->shard_count = i + 1;
        r = lwo__st_map(f, &f->shards[i], paths[i]);
        if (r != LWO_SUCCESS) return r;
        r = lwo__st_parse_shard(f, i);
        if (r != LWO_SUCCESS) return r;
    }
    return lwo__st_finish(f);
}

/* The caller's bytes, as one shard. */
static lwo_result lwo__st_open_memory(lwo_safetensors *f, const void *data, size_t size) {
    lwo_result r;
    f->shards[0].path = lwo__strdup("<memory>");
    if (!f->shards[0].path) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    f->shard_count = 1;
    f->shards[0].base = data ? (const uint8_t *)data : (const uint8_t *)"";
    f->shards[0].size = size;
    r = lwo__st_parse_shard(f, 0);
    if (r != LWO_SUCCESS) return r;
    return lwo__st_finish(f);
}

LWO_DEF lwo_result lwo_safetensors_create(const lwo_safetensors_desc *d, lwo_safetensors **out) {
    size_t count = !d ? 0 : d->path ? 1 : d->paths ? d->path_count : 1;
    int sources = d ? (d->path != NULL) + (d->paths != NULL) + (d->data != NULL || d->size != 0) : 0;
    lwo_result r;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    if ((r = lwo__st_new(count ? count : 1, out)) != LWO_SUCCESS) return r;
    if (!d) { lwo__st_fail(*out, "lwo_safetensors_create: argument 'desc' is NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    if (sources != 1 || (d->paths && d->path_count == 0)) {
        lwo__st_fail(*out, "lwo_safetensors_create: the desc names %s; give exactly one of path, paths (with path_count > 0), data",
                     sources == 0 ? "nothing to read" : sources > 1 ? "more than one source" : "no paths");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if (d->path) return lwo__st_open_files(*out, &d->path, 1);
    if (d->paths) return lwo__st_open_files(*out, d->paths, d->path_count);
    if (!d->data) { lwo__st_fail(*out, "lwo_safetensors_create: desc.data is NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    return lwo__st_open_memory(*out, d->data, d->size);
}

LWO_DEF const char *lwo_safetensors_last_error(const lwo_safetensors *f) { return f ? f->error : "lwo_safetensors is NULL"; }
LWO_DEF size_t lwo_safetensors_count(const lwo_safetensors *f) { return f && f->ready ? f->count : 0; }
LWO_DEF const lwo_safetensors_tensor *lwo_safetensors_tensor_at(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->count) ? &f->tensors[i] : NULL;
}
LWO_DEF const lwo_safetensors_tensor *lwo_safetensors_find(const lwo_safetensors *f, const char *name) {
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
LWO_DEF size_t lwo_safetensors_metadata_count(const lwo_safetensors *f) { return f && f->ready ? f->meta_count : 0; }
LWO_DEF const char *lwo_safetensors_metadata_key(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->meta_count) ? f->meta[i].key : NULL;
}
LWO_DEF const char *lwo_safetensors_metadata_value(const lwo_safetensors *f, size_t i) {
    return (f && f->ready && i < f->meta_count) ? f->meta[i].value : NULL;
}
LWO_DEF const char *lwo_safetensors_metadata_find(const lwo_safetensors *f, const char *key) {
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
    const lwo_safetensors_write_tensor *x = *(const lwo_safetensors_write_tensor *const *)a, *y = *(const lwo_safetensors_write_tensor *const *)b;
    size_t sx = lwo_dtype_size(x->dtype), sy = lwo_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}
static int lwo__st_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}
typedef struct lwo__st_kv { const char *key, *value; } lwo__st_kv;
static int lwo__st_cmp_kv(const void *a, const void *b) {
    return strcmp(((const lwo__st_kv *)a)->key, ((const lwo__st_kv *)b)->key);
}

LWO_DEF lwo_result lwo_safetensors_write(lwo_safetensors_write_desc *desc) {
    const char *path = desc ? desc->path : NULL;
    const lwo_safetensors_write_tensor *tensors = desc ? desc->tensors : NULL;
    const size_t count = desc ? desc->tensor_count : 0, meta_count = desc ? desc->meta_count : 0;
    const char *const *meta_keys = desc ? desc->meta_keys : NULL, *const *meta_values = desc ? desc->meta_values : NULL;
    char dummy[1], *err = desc ? desc->error : dummy;
    const size_t err_size = desc ? sizeof desc->error : sizeof dummy;
    const lwo_safetensors_write_tensor **order = NULL;
    lwo__st_kv *keys = NULL;   /* the metadata sorted by key, each with its value */
    lwo__st_buf h;
    lwo__wfile wf;
    char why[768];
    size_t i, pad;
    uint64_t off = 0, hl;
    uint8_t len8[8];
    int ok;
    lwo_result r = LWO_ERROR_INVALID_ARGUMENT;
    memset(&h, 0, sizeof h);
    if (err && err_size) err[0] = 0;
    if (!desc || !path || (count && !tensors) || (meta_count && (!meta_keys || !meta_values))) {
        lwo__st_werr(err, err_size, "lwo_safetensors_write: NULL desc, path, tensors or metadata");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if (count > ((size_t)-1) / sizeof *order - 1 || meta_count > ((size_t)-1) / sizeof *keys - 1) {
        lwo__st_werr(err, err_size, "lwo_safetensors_write: count too large");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    order = (const lwo_safetensors_write_tensor **)LWO_MALLOC((count + 1) * sizeof *order);
    keys = (lwo__st_kv *)LWO_MALLOC((meta_count + 1) * sizeof *keys);
    if (!order || !keys) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
    for (i = 0; i < meta_count; i++) {
        if (!meta_keys[i] || !meta_values[i]) { lwo__st_werr(err, err_size, "metadata %llu: NULL key or value", (unsigned long long)i); goto done; }
        if (!lwo__st_utf8_valid(meta_keys[i]) || !lwo__st_utf8_valid(meta_values[i])) {
            lwo__st_werr(err, err_size, "metadata %llu: key or value is not valid UTF-8", (unsigned long long)i); goto done;
        }
        keys[i].key = meta_keys[i];
        keys[i].value = meta_values[i];
    }
    lwo__st_sort(keys, meta_count, sizeof *keys, lwo__st_cmp_kv);
    for (i = 1; i < meta_count; i++)
        if (strcmp(keys[i - 1].key, keys[i].key) == 0) { lwo__st_werr(err, err_size, "duplicate metadata key \"%.200s\"", keys[i].key); goto done; }
    for (i = 0; i < count; i++) {
        const lwo_safetensors_write_tensor *t = &tensors[i];
        uint64_t n = 1, es;
        int d;
        if (!t->name) { lwo__st_werr(err, err_size, "tensors[%llu]: NULL name", (unsigned long long)i); goto done; }
        if (!lwo__st_utf8_valid(t->name)) { lwo__st_werr(err, err_size, "tensors[%llu]: name is not valid UTF-8", (unsigned long long)i); goto done; }
        if (strcmp(t->name, "__metadata__") == 0) { lwo__st_werr(err, err_size, "tensors[%llu]: the name \"__metadata__\" is reserved", (unsigned long long)i); goto done; }
        es = lwo_dtype_size(t->dtype);
        if (!es) { lwo__st_werr(err, err_size, "tensor \"%.200s\": invalid dtype %d", t->name, (int)t->dtype); goto done; }
        if (t->ndim < 0 || t->ndim > LWO_SAFETENSORS_MAX_DIMS || (t->ndim && !t->shape)) {
            lwo__st_werr(err, err_size, "tensor \"%.200s\": ndim %d (0..%d, with a shape)", t->name, t->ndim, LWO_SAFETENSORS_MAX_DIMS); goto done;
        }
        for (d = 0; d < t->ndim; d++) {
            if (t->shape[d] > UINT64_C(0x7fffffffffffffff) || (t->shape[d] && n > UINT64_MAX / t->shape[d])) {
                lwo__st_werr(err, err_size, "tensor \"%.200s\": shape overflows", t->name); goto done;
            }
            n *= t->shape[d];
        }
        if (n > UINT64_MAX / es || n * es != t->bytes) {
            lwo__st_werr(err, err_size, "tensor \"%.200s\": bytes %llu, but %s with this shape is %llu bytes", t->name,
                         (unsigned long long)t->bytes, lwo__st_dtype_tag(t->dtype), (unsigned long long)(n * es));
            goto done;
        }
        if (t->bytes && !t->data) { lwo__st_werr(err, err_size, "tensor \"%.200s\": NULL data", t->name); goto done; }
        if (t->bytes > UINT64_C(0x7fffffffffffffff) - off) { lwo__st_werr(err, err_size, "total size overflows"); goto done; }
        off += t->bytes;
        order[i] = t;
    }
    lwo__st_sort(order, count, sizeof *order, lwo__st_cmp_write);
    {   /* unique names, through a name-sorted copy */
        const char **names = (const char **)LWO_MALLOC((count + 1) * sizeof *names);
        if (!names) { r = LWO_ERROR_OUT_OF_HOST_MEMORY; lwo__st_werr(err, err_size, "out of host memory"); goto done; }
        for (i = 0; i < count; i++) names[i] = tensors[i].name;
        lwo__st_sort(names, count, sizeof *names, lwo__st_cmp_str);
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
            if (i) lwo__st_puts(&h, ",");
            lwo__st_put_json(&h, keys[i].key);
            lwo__st_puts(&h, ":");
            lwo__st_put_json(&h, keys[i].value);
        }
        lwo__st_puts(&h, "}");
    }
    off = 0;
    for (i = 0; i < count; i++) {
        const lwo_safetensors_write_tensor *t = order[i];
        int d;
        if (i || meta_count) lwo__st_puts(&h, ",");
        lwo__st_put_json(&h, t->name);
        lwo__st_puts(&h, ":{\"dtype\":\"");
        lwo__st_puts(&h, lwo__st_dtype_tag(t->dtype));
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

    r = LWO_ERROR_IO;
    if (!lwo__wfile_open(&wf, path, why, sizeof why)) { lwo__st_werr(err, err_size, "%s", why); goto done; }
    ok = lwo__wfile_write(&wf, len8, 8, why, sizeof why) && lwo__wfile_write(&wf, h.p, h.n, why, sizeof why);
    for (i = 0; ok && i < count; i++)
        if (order[i]->bytes) ok = lwo__wfile_write(&wf, order[i]->data, order[i]->bytes, why, sizeof why);
    if (!ok) lwo__wfile_abort(&wf);
    else ok = lwo__wfile_commit(&wf, 1, why, sizeof why);   /* fsync, close, rename over path */
    if (!ok) { lwo__st_werr(err, err_size, "%s", why); goto done; }
    r = LWO_SUCCESS;
done:
    LWO_FREE(h.p);
    LWO_FREE(order);
    LWO_FREE(keys);
    return r;
}

/* ==== 13. Checkpoints ======================================================================== */
/* What the ecosystem stores in safetensors files and how lwo reads it: number codecs,
   quantized-checkpoint conventions, storage policies, the CPU conversion, weights from a
   checkpoint. */
/* ---- number codecs (the CPU conversion) ---------------------------------------------------- */
/* The codecs are section 7's references (lwo_ref_*), the math of the GPU kernels, so a tensor
   converted here is bit for bit what lwo's kernels make of the same data. */
/* Element i of `data` (dtype t, unaligned) as f32. */
static float lwo__st_load(const void *data, lwo_dtype t, uint64_t i) {
    const uint8_t *p = (const uint8_t *)data + i * lwo_dtype_size(t);
    switch (t) {
    case LWO_DTYPE_F64: { double d; memcpy(&d, p, 8); return (float)d; }
    case LWO_DTYPE_F32: case LWO_DTYPE_F16: case LWO_DTYPE_BF16: case LWO_DTYPE_F8_E4M3: case LWO_DTYPE_F8_E5M2:
        return lwo_ref_load(p, lwo__st_kernel_dtype(t), 0);
    case LWO_DTYPE_I64: { int64_t x; memcpy(&x, p, 8); return (float)x; }
    case LWO_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); return (float)x; }
    case LWO_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); return (float)x; }
    case LWO_DTYPE_I8: return (float)(int8_t)*p;
    case LWO_DTYPE_U8: return (float)*p;
    case LWO_DTYPE_BOOL: return *p ? 1.0f : 0.0f;
    default: return 0.0f;
    }
}

/* ---- quantized-checkpoint conventions ------------------------------------------------------ */
static int lwo__st_scalar(const lwo_safetensors_tensor *t, float *v) {
    if (!t || t->numel != 1) return 0;
    if (t->dtype != LWO_DTYPE_F32 && t->dtype != LWO_DTYPE_F16 && t->dtype != LWO_DTYPE_BF16 && t->dtype != LWO_DTYPE_F64) return 0;
    *v = lwo__st_load(t->data, t->dtype, 0);
    return 1;
}
/* strcmp(name, prefix[0, plen) + suffix) without building the joined name, so a name of any
   length finds its companions with no buffer and no allocation. */
static int lwo__st_cmp_joined(const char *name, const char *prefix, size_t plen, const char *suffix) {
    size_t i;
    for (i = 0; i < plen; i++)   /* stops at name's NUL: prefix has none before plen */
        if (name[i] != prefix[i]) return (unsigned char)name[i] < (unsigned char)prefix[i] ? -1 : 1;
    return strcmp(name + plen, suffix);
}
/* The tensor named prefix[0, plen) + suffix, or NULL: a binary search of the name index. */
static const lwo_safetensors_tensor *lwo__st_find_suffix(const lwo_safetensors *f, const char *prefix, size_t plen, const char *suffix) {
    size_t lo = 0, hi;
    if (!f || !f->ready || !f->by_name) return NULL;
    hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = lwo__st_cmp_joined(f->by_name[mid]->name, prefix, plen, suffix);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}
/* Reads the comfy_quant JSON object and copies its top-level "format" string. */
static int lwo__st_comfy_json(lwo_safetensors *f, const lwo_safetensors_tensor *t, char *format, size_t fsize) {
    lwo__st_parser P;
    char what[300], b[16];
    int ok = 1, m;
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
        if ((m = lwo__st_member_end(&P, NULL, "")) < 0) { ok = 0; break; }
        if (!m) { P.p++; break; }
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

LWO_DEF lwo_result lwo_safetensors_get_quant_info(lwo_safetensors *f, const char *weight_name, lwo_safetensors_quant *out) {
    const lwo_safetensors_tensor *w, *cq;
    const char *lq;
    size_t nl, plen;
    if (!f || !weight_name || !out) { if (f) lwo__st_fail(f, "lwo_safetensors_quant_info: NULL argument"); return LWO_ERROR_INVALID_ARGUMENT; }
    memset(out, 0, sizeof *out);
    out->weight_scale_value = out->input_scale_value = 1.0f;
    w = lwo_safetensors_find(f, weight_name);
    if (!w) { lwo__st_fail(f, "no tensor \"%.300s\"", weight_name); return LWO_ERROR_NOT_FOUND; }
    out->weight = w;
    nl = strlen(weight_name);
    if (nl < 7 || strcmp(weight_name + nl - 7, ".weight") != 0) return LWO_SUCCESS;
    plen = nl - 7;   /* "<prefix>" without ".weight" */

    cq = lwo__st_find_suffix(f, weight_name, plen, ".comfy_quant");
    if (cq) {
        int r;
        if (cq->dtype != LWO_DTYPE_U8 || cq->ndim != 1) {
            lwo__st_fail(f, "tensor \"%.300s\": comfy_quant must be U8 [n], found %s with %d dims", cq->name,
                         lwo__st_dtype_tag(cq->dtype), cq->ndim);
            return LWO_ERROR_BAD_FILE;
        }
        r = lwo__st_comfy_json(f, cq, out->comfy_format, sizeof out->comfy_format);
        if (r < 0) return LWO_ERROR_OUT_OF_HOST_MEMORY;
        if (!r) return LWO_ERROR_BAD_FILE;
        if ((strcmp(out->comfy_format, "float8_e4m3fn") == 0 && w->dtype != LWO_DTYPE_F8_E4M3) ||
            (strcmp(out->comfy_format, "float8_e5m2") == 0 && w->dtype != LWO_DTYPE_F8_E5M2)) {
            lwo__st_fail(f, "tensor \"%.300s\": comfy_quant says %s but the weight is %s", w->name, out->comfy_format,
                         lwo__st_dtype_tag(w->dtype));
            return LWO_ERROR_BAD_FILE;
        }
        out->convention = LWO_CONVENTION_COMFY_QUANT;
        out->weight_scale = lwo__st_find_suffix(f, weight_name, plen, ".weight_scale");
        out->input_scale = lwo__st_find_suffix(f, weight_name, plen, ".input_scale");
        (void)lwo__st_scalar(out->weight_scale, &out->weight_scale_value);
        (void)lwo__st_scalar(out->input_scale, &out->input_scale_value);
        return LWO_SUCCESS;
    }

    lq = lwo_safetensors_metadata_find(f, "lwo.quant");
    if (lq && strcmp(lq, LWO_SAFETENSORS_LWO_INT8_V1) == 0 && w->dtype == LWO_DTYPE_I8) {
        const lwo_safetensors_tensor *s = lwo__st_find_suffix(f, weight_name, plen, ".weight_scale");
        const lwo_safetensors_tensor *sm = lwo__st_find_suffix(f, weight_name, plen, ".smooth");
        if (w->ndim != 2) { lwo__st_fail(f, "tensor \"%.300s\": lwo int8 weights are [N, K], this has %d dims", w->name, w->ndim); return LWO_ERROR_BAD_FILE; }
        if (!s || s->dtype != LWO_DTYPE_F32 || s->ndim != 1 || s->shape[0] != w->shape[0]) {
            lwo__st_fail(f, "tensor \"%.300s\": lwo int8 needs %.*s.weight_scale F32 [%llu]", w->name, (int)(plen < 300 ? plen : 300), weight_name,
                         (unsigned long long)w->shape[0]);
            return LWO_ERROR_BAD_FILE;
        }
        if (sm && (sm->dtype != LWO_DTYPE_F32 || sm->ndim != 1 || sm->shape[0] != w->shape[1])) {
            lwo__st_fail(f, "tensor \"%.300s\": must be F32 [%llu]", sm->name, (unsigned long long)w->shape[1]);
            return LWO_ERROR_BAD_FILE;
        }
        out->convention = LWO_CONVENTION_LWO_INT8;
        out->weight_scale = s;
        out->smooth = sm;
        (void)lwo__st_scalar(s, &out->weight_scale_value);
        return LWO_SUCCESS;
    }

    if (lwo_safetensors_find(f, "scaled_fp8") && (w->dtype == LWO_DTYPE_F8_E4M3 || w->dtype == LWO_DTYPE_F8_E5M2)) {
        out->convention = LWO_CONVENTION_COMFY_SCALED_FP8;
        out->weight_scale = lwo__st_find_suffix(f, weight_name, plen, ".scale_weight");
        out->input_scale = lwo__st_find_suffix(f, weight_name, plen, ".scale_input");
        if (out->weight_scale && !lwo__st_scalar(out->weight_scale, &out->weight_scale_value)) {
            lwo__st_fail(f, "tensor \"%.300s\": scale_weight must be one float, found %s with %llu elements",
                         out->weight_scale->name, lwo__st_dtype_tag(out->weight_scale->dtype),
                         (unsigned long long)out->weight_scale->numel);
            return LWO_ERROR_BAD_FILE;
        }
        (void)lwo__st_scalar(out->input_scale, &out->input_scale_value);
        return LWO_SUCCESS;
    }
    return LWO_SUCCESS;
}

/* ---- storage policy ------------------------------------------------------------------------ */
/* Iterative glob with one backtrack point (the last `*`): O(len(pattern) * len(name)) at worst. */
LWO_DEF int lwo_glob_match(const char *pattern, const char *name) {
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
LWO_DEF lwo_format lwo_storage_policy_format(const lwo_storage_policy *p, const char *name) {
    size_t i;
    if (!p) return LWO_FORMAT_KEEP;
    for (i = 0; i < p->rule_count && p->rules; i++)
        if (lwo_glob_match(p->rules[i].pattern, name)) return p->rules[i].format;
    return p->default_format;
}

/* ---- conversion ---------------------------------------------------------------------------- */
/* The dtype a conversion to f writes (KEEP: the tensor's own); INVALID where f is no conversion's. */
static lwo_dtype lwo__st_store_dtype(lwo_format f, lwo_dtype keep) {
    if (f == LWO_FORMAT_KEEP) return keep;
    return f == LWO_FORMAT_FP8_E4M3_W8A8 ? LWO_DTYPE_INVALID : lwo__format_dtype(f);
}
LWO_DEF void lwo_safetensors_converted_destroy(lwo_safetensors_converted *c) {
    if (!c) return;
    LWO_FREE(c->owned_data);
    LWO_FREE(c->owned_scales);
    c->owned_data = NULL;
    c->owned_scales = NULL;
}
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static lwo_result lwo__st_cfail(lwo_safetensors_converted *out, lwo_result r, const char *fmt, ...) {
    va_list ap;
    char why[sizeof out->error];
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    lwo_safetensors_converted_destroy(out);
    memset(out, 0, sizeof *out);
    memcpy(out->error, why, sizeof why);
    return r;
}
LWO_DEF lwo_result lwo_safetensors_convert(const lwo_safetensors_convert_desc *desc, lwo_safetensors_converted *out) {
    const lwo_safetensors_tensor *t = desc ? desc->tensor : NULL;
    const lwo_format target = desc ? desc->format : LWO_FORMAT_KEEP;
    void *buf = desc ? desc->buf : NULL;
    const uint64_t buf_bytes = desc ? desc->buf_bytes : 0, scales_count = desc ? desc->scales_count : 0;
    float *scales = desc ? desc->scales : NULL;
    lwo_dtype dt;
    uint64_t n, i, bytes;
    uint8_t *dst;
    char sh[200];
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!t) return lwo__st_cfail(out, LWO_ERROR_INVALID_ARGUMENT, "lwo_safetensors_convert: desc%s is NULL", desc ? ".tensor" : "");
    if ((t->numel && !t->data) || lwo_dtype_size(t->dtype) == 0)
        return lwo__st_cfail(out, LWO_ERROR_INVALID_ARGUMENT, "lwo_safetensors_convert: tensor \"%.100s\" has %s",
                             t->name ? t->name : "", t->numel && !t->data ? "no data" : "an invalid dtype");
    dt = lwo__st_store_dtype(target, t->dtype);
    if (dt == LWO_DTYPE_INVALID)
        return lwo__st_cfail(out, LWO_ERROR_INVALID_ARGUMENT, "lwo_safetensors_convert: target %d is not an lwo_format", (int)target);
    out->format = target;
    out->dtype = dt;
    out->scale = 1.0f;
    n = t->numel;
    if (target == LWO_FORMAT_INT8) {
        out->rows = t->ndim >= 2 ? t->shape[0] : 1;
        out->cols = out->rows ? n / out->rows : 0;
        /* Per-row structure stays within the data: with elements, rows <= numel already (shape[0]
           divides it); a tensor of no elements has no rows to scale, so [2^36, 0] would ask for
           256 GiB of scales and 2^36 turns of the row loop out of a few header bytes. */
        if (out->rows > (n > 1 ? n : 1)) {
            lwo__st_shape(t, sh, sizeof sh);
            return lwo__st_cfail(out, LWO_ERROR_BAD_FILE, "tensor \"%.100s\" %s [%s] has %llu rows but %llu elements: "
                                 "its int8 row scales would outgrow its data", t->name ? t->name : "",
                                 lwo__st_dtype_tag(t->dtype), sh, (unsigned long long)out->rows, (unsigned long long)n);
        }
    }
    if (dt == t->dtype) {   /* zero copy */
        out->data = t->data;
        out->bytes = t->bytes;
        out->zero_copy = 1;
        return LWO_SUCCESS;
    }
    if (n > UINT64_MAX / lwo_dtype_size(dt) || n * lwo_dtype_size(dt) > (uint64_t)((size_t)-1)) {
        lwo__st_shape(t, sh, sizeof sh);
        return lwo__st_cfail(out, LWO_ERROR_OUT_OF_HOST_MEMORY, "tensor \"%.100s\" [%s]: %llu elements of %s do not fit in memory",
                             t->name ? t->name : "", sh, (unsigned long long)n, lwo__st_dtype_tag(dt));
    }
    bytes = n * lwo_dtype_size(dt);
    if (buf) {
        if (buf_bytes < bytes)
            return lwo__st_cfail(out, LWO_ERROR_INVALID_ARGUMENT, "tensor \"%.100s\": buf holds %llu bytes, the %s data needs %llu",
                                 t->name ? t->name : "", (unsigned long long)buf_bytes, lwo__st_dtype_tag(dt), (unsigned long long)bytes);
        dst = (uint8_t *)buf;
    } else {
        dst = (uint8_t *)LWO_MALLOC(bytes ? (size_t)bytes : 1);
        if (!dst)
            return lwo__st_cfail(out, LWO_ERROR_OUT_OF_HOST_MEMORY, "tensor \"%.100s\": out of host memory for %llu bytes of %s",
                                 t->name ? t->name : "", (unsigned long long)bytes, lwo__st_dtype_tag(dt));
        out->owned_data = dst;
    }
    out->data = dst;
    out->bytes = bytes;
    switch (target) {
    case LWO_FORMAT_F32:
        for (i = 0; i < n; i++) { float v = lwo__st_load(t->data, t->dtype, i); memcpy(dst + 4 * i, &v, 4); }
        break;
    case LWO_FORMAT_BF16: case LWO_FORMAT_F16: {
        lwo_dtype d16 = target == LWO_FORMAT_BF16 ? LWO_DTYPE_BF16 : LWO_DTYPE_F16;
        for (i = 0; i < n; i++) lwo_ref_store(dst, d16, i, lwo__st_load(t->data, t->dtype, i));
        break;
    }
    case LWO_FORMAT_FP8_E4M3: case LWO_FORMAT_FP8_E5M2: {
        lwo_dtype d8 = target == LWO_FORMAT_FP8_E5M2 ? LWO_DTYPE_F8_E5M2 : LWO_DTYPE_F8_E4M3;
        float amax = 0.0f, s, inv;
        for (i = 0; i < n; i++) { float a = fabsf(lwo__st_load(t->data, t->dtype, i)); if (a > amax) amax = a; }
        s = amax > 0.0f ? amax / lwo__fp8_max(d8) : 1.0f;
        if (!(s > 0.0f)) s = 1.0f;   /* amax so small the division underflowed */
        out->scale = s;
        inv = 1.0f / s;
        for (i = 0; i < n; i++) dst[i] = lwo_ref_f32_to_fp8(lwo__st_load(t->data, t->dtype, i) * inv, d8);
        break;
    }
    case LWO_FORMAT_INT8: {
        uint64_t r, c, rows = out->rows, cols = out->cols;
        float *sc;
        if (scales) {
            if (scales_count < rows)
                return lwo__st_cfail(out, LWO_ERROR_INVALID_ARGUMENT, "tensor \"%.100s\": scales holds %llu floats, its %llu rows need one each",
                                     t->name ? t->name : "", (unsigned long long)scales_count, (unsigned long long)rows);
            sc = scales;
        } else {
            if (rows > ((size_t)-1) / sizeof(float))   /* only a tensor made by hand can get here */
                return lwo__st_cfail(out, LWO_ERROR_OUT_OF_HOST_MEMORY, "tensor \"%.100s\": %llu row scales do not fit in memory",
                                     t->name ? t->name : "", (unsigned long long)rows);
            sc = (float *)LWO_MALLOC(rows ? (size_t)rows * sizeof(float) : 1);
            if (!sc) return lwo__st_cfail(out, LWO_ERROR_OUT_OF_HOST_MEMORY, "tensor \"%.100s\": out of host memory for %llu row scales",
                                          t->name ? t->name : "", (unsigned long long)rows);
            out->owned_scales = sc;
        }
        out->row_scales = sc;
        for (r = 0; r < rows; r++) {
            float amax = 0.0f, s, inv;
            for (c = 0; c < cols; c++) { float a = fabsf(lwo__st_load(t->data, t->dtype, r * cols + c)); if (a > amax) amax = a; }
            s = amax > 0.0f ? amax / 127.0f : 1.0f;
            if (!(s > 0.0f)) s = 1.0f;
            sc[r] = s;
            inv = 1.0f / s;
            for (c = 0; c < cols; c++) {
                float v = lwo__st_load(t->data, t->dtype, r * cols + c) * inv;
                dst[r * cols + c] = (uint8_t)lwo__ref_i8_sat(v);
            }
        }
        break;
    }
    default: break;
    }
    return LWO_SUCCESS;
}

/* ---- weights from a checkpoint ------------------------------------------------------------- */
/* What lwo_safetensors_load_weight hands lwo_weight_create, worked out without a context (the CPU
   tests drive it): the desc, the host buffers made for it (aligned copies of scales and smooth,
   which a file need not align; dequantized data), and the file range to register for zero copy. */
typedef struct lwo__st_prep {
    lwo_weight_desc d;
    const lwo_safetensors_tensor *weight, *bias;
    void *owned_data, *owned_bias;
    float *owned_scales, *owned_smooth;
    int zero_copy;             /* d.borrow_host: the weight's host home is the mapping itself */
    int dequantized;           /* a quantized tensor was dequantized to f32 on the CPU */
    const uint8_t *region;     /* zero copy: the shard's data area, registered once per context */
    uint64_t region_bytes;
} lwo__st_prep;

static void lwo__st_prep_free(lwo__st_prep *p) {
    LWO_FREE(p->owned_data);
    LWO_FREE(p->owned_bias);
    LWO_FREE(p->owned_scales);
    LWO_FREE(p->owned_smooth);
    memset(p, 0, sizeof *p);
}

static int lwo__st_finite(float v) { return fabsf(v) <= 3.40282347e38f; }

/* An aligned f32 copy of an F32 tensor whose every element is finite (and > 0 with positive). */
static lwo_result lwo__st_f32_copy(lwo_safetensors *f, const char *weight, const lwo_safetensors_tensor *t, int positive, float **out) {
    uint64_t i;
    float *c = (float *)LWO_MALLOC(t->bytes ? (size_t)t->bytes : 1);
    *out = NULL;
    if (!c) { lwo__st_fail(f, "out of host memory"); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
    if (t->bytes) memcpy(c, t->data, (size_t)t->bytes);
    for (i = 0; i < t->numel; i++)
        if (!lwo__st_finite(c[i]) || (positive && !(c[i] > 0.0f))) {
            lwo__st_fail(f, "tensor \"%.300s\": element %llu of \"%.300s\" is %g; it must be %s", weight, (unsigned long long)i, t->name, (double)c[i],
                         positive ? "positive and finite" : "finite");
            LWO_FREE(c);
            return LWO_ERROR_BAD_FILE;
        }
    *out = c;
    return LWO_SUCCESS;
}

static lwo_result lwo__st_weight_prep(lwo_safetensors *f, const char *name, lwo_format format, lwo_placement placement,
                                      lwo__st_prep *p) {
    lwo_safetensors_quant q;
    const lwo_safetensors_tensor *w;
    lwo_result r;
    lwo_dtype fdt;                   /* the file data's dtype, as lwo names it */
    uint64_t N, K, n, i, k;
    float scale = 1.0f;
    int fp8 = 0, i8 = 0;
    char sh[200];
    memset(p, 0, sizeof *p);
    if (!f->ready) {
        char why[sizeof f->error];
        memcpy(why, f->error, sizeof why);
        lwo__st_fail(f, "tensor \"%.300s\": the file did not open (%.400s)", name, why);
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if ((int)format < 0 || format >= LWO_FORMAT_COUNT) {
        lwo__st_fail(f, "tensor \"%.300s\": format %d is not an lwo_format", name, (int)format);
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    /* KEEP: as the file holds it; F32: refused, naming the tensor */
    if ((format == LWO_FORMAT_KEEP || format == LWO_FORMAT_F32) && (r = lwo_safetensors_weight_format(f, name, format, &format)) != 0) return r;
    if ((int)placement < (int)LWO_PLACE_RESIDENT || (int)placement > (int)LWO_PLACE_STREAMED) {
        lwo__st_fail(f, "tensor \"%.300s\": placement %d is not an lwo_placement", name, (int)placement);
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if ((r = lwo_safetensors_get_quant_info(f, name, &q)) != 0) return r;   /* f->error names the tensor */
    w = p->weight = q.weight;
    lwo__st_shape(w, sh, sizeof sh);
    if (w->ndim != 2 || w->numel == 0) {
        lwo__st_fail(f, "tensor \"%.300s\" is %s [%s]; a weight is a 2-D tensor [N, K] with N, K > 0", name, lwo__st_dtype_tag(w->dtype), sh);
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    N = w->shape[0];
    K = w->shape[1];
    switch (q.convention) {
    case LWO_CONVENTION_LWO_INT8: i8 = 1; break;   /* quant_info checked I8 [N, K], weight_scale F32 [N], smooth F32 [K] */
    case LWO_CONVENTION_COMFY_QUANT:
        if (strcmp(q.comfy_format, "float8_e4m3fn") != 0 && strcmp(q.comfy_format, "float8_e5m2") != 0) {
            lwo__st_fail(f, "tensor \"%.300s\": comfy_quant format \"%.300s\" is not one lwo loads (float8_e4m3fn, float8_e5m2)", name, q.comfy_format);
            return LWO_ERROR_UNSUPPORTED;
        }
        /* fall through */
    case LWO_CONVENTION_COMFY_SCALED_FP8:
        if (q.weight_scale) {
            float v;
            if (q.weight_scale->numel != 1) {
                lwo__st_fail(f, "tensor \"%.300s\": its scale \"%.300s\" has %llu elements; lwo loads fp8 weights with one scale per tensor",
                             name, q.weight_scale->name, (unsigned long long)q.weight_scale->numel);
                return LWO_ERROR_UNSUPPORTED;
            }
            if (!lwo__st_scalar(q.weight_scale, &v)) {
                lwo__st_fail(f, "tensor \"%.300s\": its scale \"%.300s\" is %s; a scale is F32, F16, BF16 or F64", name,
                             q.weight_scale->name, lwo__st_dtype_tag(q.weight_scale->dtype));
                return LWO_ERROR_BAD_FILE;
            }
        }
        fp8 = 1;
        scale = q.weight_scale_value;
        break;
    default:
        switch (w->dtype) {
        case LWO_DTYPE_F32: case LWO_DTYPE_F16: case LWO_DTYPE_BF16: case LWO_DTYPE_F64: break;
        case LWO_DTYPE_F8_E4M3: case LWO_DTYPE_F8_E5M2: fp8 = 1; break;   /* no convention: the codes are the values */
        case LWO_DTYPE_I8:
            lwo__st_fail(f, "tensor \"%.300s\" is I8 without lwo's int8 convention (metadata \"lwo.quant\" = \"%.300s\" and a "
                         "\"<prefix>.weight_scale\" F32 [N]), so its scales are unknown", name, LWO_SAFETENSORS_LWO_INT8_V1);
            return LWO_ERROR_UNSUPPORTED;
        default:
            lwo__st_fail(f, "tensor \"%.300s\" is %s; lwo loads weights from F32, F16, BF16, F64, F8_E4M3, F8_E5M2 or lwo int8",
                         name, lwo__st_dtype_tag(w->dtype));
            return LWO_ERROR_UNSUPPORTED;
        }
        break;
    }
    if (fp8 && !(scale > 0.0f && lwo__st_finite(scale))) {
        lwo__st_fail(f, "tensor \"%.300s\": its weight scale is %g; it must be positive and finite", name, (double)scale);
        return LWO_ERROR_BAD_FILE;
    }
    fdt = lwo__st_kernel_dtype(w->dtype);   /* LWO_DTYPE_INVALID for F64 */
    p->d.rows = N;
    p->d.cols = K;
    p->d.format = format;
    p->d.placement = placement;
    if (i8 && format == LWO_FORMAT_INT8) {
        if ((r = lwo__st_f32_copy(f, name, q.weight_scale, 0, &p->owned_scales)) != 0) return r;
        if (q.smooth && (r = lwo__st_f32_copy(f, name, q.smooth, 1, &p->owned_smooth)) != 0) return r;
        p->d.data = w->data;
        p->d.data_dtype = LWO_DTYPE_I8;
        p->d.row_scales = p->owned_scales;
        p->d.smooth = p->owned_smooth;
    } else if (fp8 && lwo__format_dtype(format) == fdt) {
        p->d.data = w->data;
        p->d.data_dtype = fdt;
        p->d.scale = scale;
    } else if (!fp8 && !i8 && fdt != LWO_DTYPE_INVALID) {
        p->d.data = w->data;   /* f32 / f16 / bf16: lwo_weight_create quantizes on the GPU */
        p->d.data_dtype = fdt;
    } else {                   /* dequantize (or widen f64) to f32 on the CPU */
        float *buf;
        if (!lwo__mul_ok(N, K, &n) || n > (uint64_t)((size_t)-1) / 4) {
            lwo__st_fail(f, "tensor \"%.300s\": %llu x %llu is too large", name, (unsigned long long)N, (unsigned long long)K);
            return LWO_ERROR_INVALID_ARGUMENT;
        }
        buf = (float *)LWO_MALLOC((size_t)n * 4);
        if (!buf) { lwo__st_fail(f, "tensor \"%.300s\": out of host memory for its %llu-byte f32 copy", name, (unsigned long long)(n * 4)); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
        p->owned_data = buf;
        if (i8) {
            const int8_t *qd = (const int8_t *)w->data;
            if ((r = lwo__st_f32_copy(f, name, q.weight_scale, 0, &p->owned_scales)) != 0) return r;
            if (q.smooth && (r = lwo__st_f32_copy(f, name, q.smooth, 1, &p->owned_smooth)) != 0) return r;
            for (i = 0; i < N; i++)
                for (k = 0; k < K; k++) {
                    float v = (float)qd[i * K + k] * p->owned_scales[i];
                    buf[i * K + k] = p->owned_smooth ? v / p->owned_smooth[k] : v;
                }
            /* the W8A8 fp8 format keeps the activation smoothing the checkpoint was made with */
            if (format == LWO_FORMAT_FP8_E4M3_W8A8) p->d.smooth = p->owned_smooth;
            p->dequantized = 1;
        } else if (fp8) {
            const uint8_t *c = (const uint8_t *)w->data;
            for (i = 0; i < n; i++) buf[i] = lwo_ref_fp8_to_f32(c[i], fdt) * scale;
            p->dequantized = 1;
        } else {
            for (i = 0; i < n; i++) buf[i] = lwo__st_load(w->data, w->dtype, i);
        }
        p->d.data = buf;
        p->d.data_dtype = LWO_DTYPE_F32;
    }
    /* zero copy: the bytes the device stores are the file's bytes */
    if (p->d.data == w->data && p->d.data_dtype == lwo__format_dtype(format) && K % LWO__KPAD == 0 &&
        placement != LWO_PLACE_RESIDENT) {
        const lwo__st_shard *s = &f->shards[w->shard];
        p->d.borrow_host = 1;
        p->zero_copy = 1;
        p->region = s->base + s->data_start;
        p->region_bytes = s->size - s->data_start;
    }
    /* the bias, "<prefix>.bias" */
    {
        size_t nl = strlen(name);
        const lwo_safetensors_tensor *b = NULL;
        if (nl > 7 && strcmp(name + nl - 7, ".weight") == 0) b = lwo__st_find_suffix(f, name, nl - 7, ".bias");
        if (b) {
            lwo__st_shape(b, sh, sizeof sh);
            if (b->ndim != 1 || b->shape[0] != N) {
                lwo__st_fail(f, "tensor \"%.300s\" is [%s] but its weight \"%.300s\" has %llu rows; a bias is [N]", b->name, sh, name,
                             (unsigned long long)N);
                return LWO_ERROR_BAD_FILE;
            }
            p->bias = b;
            switch (b->dtype) {
            case LWO_DTYPE_F32: case LWO_DTYPE_F16: case LWO_DTYPE_BF16:
                p->d.bias = b->data;   /* read through the driver's copy: alignment does not matter */
                p->d.bias_dtype = lwo__st_kernel_dtype(b->dtype);
                break;
            case LWO_DTYPE_F64: {
                float *bf = (float *)LWO_MALLOC((size_t)N * 4);
                if (!bf) { lwo__st_fail(f, "out of host memory"); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
                for (i = 0; i < N; i++) bf[i] = lwo__st_load(b->data, b->dtype, i);
                p->owned_bias = bf;
                p->d.bias = bf;
                p->d.bias_dtype = LWO_DTYPE_F32;
                break;
            }
            default:
                lwo__st_fail(f, "tensor \"%.300s\" is %s; a bias is F32, F16, BF16 or F64", b->name, lwo__st_dtype_tag(b->dtype));
                return LWO_ERROR_UNSUPPORTED;
            }
        }
    }
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_safetensors_weight_format(lwo_safetensors *f, const char *weight_name, lwo_format store,
                                                 lwo_format *out) {   /* store: what a policy or caller asks for */
    lwo_safetensors_quant q;
    lwo_result r;
    if (!f || !weight_name || !out) {
        if (f) lwo__st_fail(f, "lwo_safetensors_weight_format: argument '%s' is NULL", !weight_name ? "weight_name" : "out");
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    *out = LWO_FORMAT_BF16;
    switch (store) {
    case LWO_FORMAT_BF16: *out = LWO_FORMAT_BF16; return LWO_SUCCESS;
    case LWO_FORMAT_F16: *out = LWO_FORMAT_F16; return LWO_SUCCESS;
    case LWO_FORMAT_FP8_E4M3: *out = LWO_FORMAT_FP8_E4M3; return LWO_SUCCESS;
    case LWO_FORMAT_FP8_E5M2: *out = LWO_FORMAT_FP8_E5M2; return LWO_SUCCESS;
    case LWO_FORMAT_INT8: *out = LWO_FORMAT_INT8; return LWO_SUCCESS;
    case LWO_FORMAT_FP8_E4M3_W8A8: *out = LWO_FORMAT_FP8_E4M3_W8A8; return LWO_SUCCESS;
    case LWO_FORMAT_F32:
        lwo__st_fail(f, "tensor \"%.300s\": the storage policy asks for f32, but lwo stores weights as bf16, f16, fp8 or int8 "
                     "(ask for LWO_FORMAT_BF16, or LWO_FORMAT_KEEP)", weight_name);
        return LWO_ERROR_UNSUPPORTED;
    case LWO_FORMAT_KEEP: break;
    default:
        lwo__st_fail(f, "tensor \"%.300s\": storage format %d is not an lwo_format", weight_name, (int)store);
        return LWO_ERROR_INVALID_ARGUMENT;
    }
    if ((r = lwo_safetensors_get_quant_info(f, weight_name, &q)) != 0) return r;
    switch (q.weight->dtype) {
    case LWO_DTYPE_BF16: case LWO_DTYPE_F32: case LWO_DTYPE_F64: *out = LWO_FORMAT_BF16; return LWO_SUCCESS;
    case LWO_DTYPE_F16: *out = LWO_FORMAT_F16; return LWO_SUCCESS;
    case LWO_DTYPE_F8_E4M3: *out = LWO_FORMAT_FP8_E4M3; return LWO_SUCCESS;
    case LWO_DTYPE_F8_E5M2: *out = LWO_FORMAT_FP8_E5M2; return LWO_SUCCESS;
    case LWO_DTYPE_I8: if (q.convention == LWO_CONVENTION_LWO_INT8) { *out = LWO_FORMAT_INT8; return LWO_SUCCESS; } break;
    default: break;
    }
    lwo__st_fail(f, "tensor \"%.300s\" is %s%s; no lwo format keeps it", weight_name, lwo__st_dtype_tag(q.weight->dtype),
                 q.weight->dtype == LWO_DTYPE_I8 ? " without lwo's int8 convention" : "");
    return LWO_ERROR_UNSUPPORTED;
}

LWO_DEF lwo_result lwo_safetensors_load_weight(lwo_context *ctx, lwo_safetensors *f, const char *weight_name,
                                               lwo_format format, lwo_placement placement, lwo_weight **out) {
    lwo__st_prep p;
    lwo__host_reg *reg = NULL;
    lwo_result r;
    if (out) *out = NULL;
    LWO__ENTER(ctx);
    if (!out || !f || !weight_name)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_safetensors_load_weight: argument '%s' is NULL", !out ? "out" : !f ? "f" : "weight_name");
    if ((r = lwo__st_weight_prep(f, weight_name, format, placement, &p)) != 0) {
        lwo__st_prep_free(&p);
        return lwo__fail(ctx, r, "lwo_safetensors_load_weight: %s", f->error);
    }
    if (p.zero_copy && lwo__host_reg_acquire(ctx, p.region, p.region_bytes, &reg) != 0) {
        lwo__log(ctx, LWO_LOG_WARN, "lwo_safetensors_load_weight: tensor \"%.300s\" gets a pinned copy instead of borrowing the mapping: %s",
                 weight_name, ctx->error);
        ctx->error[0] = 0;
        p.d.borrow_host = 0;
        p.zero_copy = 0;
        reg = NULL;
    }
    r = lwo_weight_create(ctx, &p.d, out);
    lwo__host_reg_release(ctx, reg);   /* the weight's home counts itself; an unused registration goes */
    lwo__st_prep_free(&p);
    if (r) {
        char why[LWO__ERROR_CAP];
        memcpy(why, ctx->error, sizeof why);
        *out = NULL;
        return lwo__fail(ctx, r, "lwo_safetensors_load_weight: tensor \"%.300s\": %s", weight_name, why);
    }
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_safetensors_load_weight_policy(lwo_context *ctx, lwo_safetensors *f, const char *weight_name,
                                                      const lwo_storage_policy *policy, lwo_placement placement,
                                                      lwo_weight **out) {
    lwo_format fmt;
    lwo_result r;
    if (out) *out = NULL;
    LWO__ENTER(ctx);
    if (!out || !f || !weight_name)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_safetensors_load_weight_policy: argument '%s' is NULL", !out ? "out" : !f ? "f" : "weight_name");
    if ((r = lwo_safetensors_weight_format(f, weight_name, lwo_storage_policy_format(policy, weight_name), &fmt)) != 0)
        return lwo__fail(ctx, r, "lwo_safetensors_load_weight_policy: %s", f->error);
    return lwo_safetensors_load_weight(ctx, f, weight_name, fmt, placement, out);
}

/* ---- LoRA files ------------------------------------------------------------------------------ */
/* The key of weight_name under m, allocated: prefix + the name without ".weight", dots made '_'. */
static char *lwo__lora_key(const char *weight_name, const lwo_lora_match *m, size_t *klen) {
    const char *pre = m && m->prefix ? m->prefix : "";
    size_t pl = strlen(pre), nl = strlen(weight_name), i;
    char *k;
    if (nl >= 7 && strcmp(weight_name + nl - 7, ".weight") == 0) nl -= 7;
    if (!(k = (char *)LWO_MALLOC(pl + nl + 1))) return NULL;
    memcpy(k, pre, pl);
    memcpy(k + pl, weight_name, nl);
    k[pl + nl] = 0;
    if (m && m->underscores)
        for (i = pl; i < pl + nl; i++) if (k[i] == '.') k[i] = '_';
    *klen = pl + nl;
    return k;
}

static int lwo__ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

LWO_DEF lwo_result lwo_safetensors_find_lora(lwo_safetensors *f, const char *weight_name, const lwo_lora_match *match,
                                             lwo_safetensors_lora *out) {
    static const char *const sfx[2][2] = { { ".lora_down.weight", ".lora_up.weight" }, { ".lora_A.weight", ".lora_B.weight" } };
    const lwo_safetensors_tensor *t[2][2], *pair[2];
    size_t klen = 0;
    char *key, shape[2][96];
    int L, have[2], i;
    float v;
    lwo_result r = LWO_ERROR_BAD_FILE;
    if (!f || !weight_name || !out) { if (f) lwo__st_fail(f, "lwo_safetensors_find_lora: argument NULL"); return LWO_ERROR_INVALID_ARGUMENT; }
    memset(out, 0, sizeof *out);
    if (!(key = lwo__lora_key(weight_name, match, &klen))) { lwo__st_fail(f, "out of host memory"); return LWO_ERROR_OUT_OF_HOST_MEMORY; }
    for (L = 0; L < 2; L++) {
        t[L][0] = lwo__st_find_suffix(f, key, klen, sfx[L][0]);
        t[L][1] = lwo__st_find_suffix(f, key, klen, sfx[L][1]);
        have[L] = t[L][0] || t[L][1];
    }
    if (!have[0] && !have[1]) {
        lwo__st_fail(f, "no LoRA for \"%.300s\": no \"%.300s.lora_down.weight\" or \"%.300s.lora_A.weight\"", weight_name, key, key);
        r = LWO_ERROR_NOT_FOUND;
        goto done;
    }
    if (have[0] && have[1]) { lwo__st_fail(f, "\"%.300s\" has LoRA tensors of both layouts (lora_down/lora_up and lora_A/lora_B)", key); goto done; }
    L = have[0] ? 0 : 1;
    pair[0] = t[L][0]; pair[1] = t[L][1];
    if (!pair[0] || !pair[1]) {
        lwo__st_fail(f, "\"%.300s%s\" has no \"%.300s%s\"", key, sfx[L][pair[0] ? 0 : 1], key, sfx[L][pair[0] ? 1 : 0]);
        goto done;
    }
    for (i = 0; i < 2; i++) {
        lwo__st_shape(pair[i], shape[i], sizeof shape[i]);
        if (pair[i]->ndim != 2 || pair[i]->numel == 0 ||
            (pair[i]->dtype != LWO_DTYPE_F32 && pair[i]->dtype != LWO_DTYPE_F16 && pair[i]->dtype != LWO_DTYPE_BF16)) {
            lwo__st_fail(f, "LoRA factor \"%.300s\" must be a non-empty 2-D f32, f16 or bf16 tensor (it is %s [%s])", pair[i]->name,
                         lwo_dtype_name(pair[i]->dtype), shape[i]);
            goto done;
        }
    }
    if (pair[0]->dtype != pair[1]->dtype) {
        lwo__st_fail(f, "the LoRA factors of \"%.300s\" differ in dtype (%s and %s)", key, lwo_dtype_name(pair[0]->dtype), lwo_dtype_name(pair[1]->dtype));
        goto done;
    }
    if (pair[1]->shape[1] != pair[0]->shape[0]) {
        lwo__st_fail(f, "the LoRA of \"%.300s\" has rank %llu in \"%.300s\" [%s] and %llu in \"%.300s\" [%s]", key,
                     (unsigned long long)pair[0]->shape[0], pair[0]->name, shape[0], (unsigned long long)pair[1]->shape[1], pair[1]->name, shape[1]);
        goto done;
    }
    out->alpha = lwo__st_find_suffix(f, key, klen, ".alpha");
    if (out->alpha) {
        if (!lwo__st_scalar(out->alpha, &v) || !lwo__st_finite(v) || v <= 0.0f) {
            lwo__st_fail(f, "\"%.300s\" must hold one finite f32, f16, bf16 or f64 value > 0", out->alpha->name);
            goto done;
        }
        out->alpha_value = v;
    }
    out->down = pair[0]; out->up = pair[1]; out->kohya = L == 0;
    out->rank = pair[0]->shape[0]; out->cols = pair[0]->shape[1]; out->rows = pair[1]->shape[0];
    r = LWO_SUCCESS;
done:
    if (r) out->alpha = NULL;
    LWO_FREE(key);
    return r;
}

/* One weight's LoRA from the file (fl), attached. */
static lwo_result lwo__lora_load_one(lwo_context *ctx, const lwo_lora_load_desc *d, size_t i, const lwo_safetensors_lora *fl, lwo_lora **out) {
    const lwo_weight *w = d->weights[i];
    lwo_lora_desc ld;
    lwo_result r;
    if ((r = lwo__check_weight(ctx, w)) != 0) return lwo__fail(ctx, r, "lwo_lora_load: weights[%zu]: %s", i, ctx->error);
    if (fl->rows != w->rows || fl->cols != w->cols)
        return lwo__fail(ctx, LWO_ERROR_BAD_FILE, "lwo_lora_load: the LoRA \"%.300s\" is for a %llu x %llu weight (rank %llu); \"%.300s\" is %llu x %llu",
                         fl->down->name, (unsigned long long)fl->rows, (unsigned long long)fl->cols, (unsigned long long)fl->rank, d->names[i],
                         (unsigned long long)w->rows, (unsigned long long)w->cols);
    memset(&ld, 0, sizeof ld);
    ld.rank = fl->rank; ld.down = fl->down->data; ld.up = fl->up->data; ld.dtype = fl->down->dtype;
    ld.alpha = fl->alpha ? fl->alpha_value : d->alpha;
    if (ld.alpha == 0.0f && fl->kohya)
        return lwo__fail(ctx, LWO_ERROR_BAD_FILE, "lwo_lora_load: \"%.300s\" has no alpha (a lora_down/lora_up pair carries <key>.alpha); "
                         "give lwo_lora_load_desc.alpha to load it anyway", fl->down->name);
    ld.strength = d->strength != 0.0f ? d->strength : 1.0f;
    ld.compute_dtype = d->compute_dtype;
    return lwo_lora_attach(ctx, d->weights[i], &ld, out);
}

LWO_DEF lwo_result lwo_lora_load(lwo_context *ctx, lwo_lora_load_desc *d) {
    lwo_lora **made = NULL;
    unsigned char *used = NULL;
    size_t i, nt, pairs = 0, left = 0;
    const char *first = NULL;
    lwo_result r = LWO_SUCCESS;
    LWO__ENTER(ctx);
    if (!d || !d->file || (d->count && (!d->weights || !d->names)))
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_lora_load: %s is NULL", !d ? "argument 'desc'" : !d->file ? "desc.file" : "desc.weights or desc.names");
    d->matched = d->unmatched = 0;
    if (d->loras) memset(d->loras, 0, d->count * sizeof *d->loras);
    nt = lwo_safetensors_count(d->file);
    made = (lwo_lora **)LWO_MALLOC((d->count ? d->count : 1) * sizeof *made);
    used = (unsigned char *)LWO_MALLOC(nt ? nt : 1);
    if (!made || !used) { r = lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory"); goto done; }
    memset(made, 0, (d->count ? d->count : 1) * sizeof *made);
    memset(used, 0, nt ? nt : 1);
    for (i = 0; i < d->count; i++) {
        lwo_safetensors_lora fl;
        if (!d->names[i]) { r = lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_lora_load: names[%zu] is NULL", i); goto done; }
        r = lwo_safetensors_find_lora(d->file, d->names[i], &d->match, &fl);
        if (r == LWO_ERROR_NOT_FOUND) { r = LWO_SUCCESS; continue; }
        if (r) { r = lwo__fail(ctx, r, "lwo_lora_load: %s", lwo_safetensors_last_error(d->file)); goto done; }
        if ((r = lwo__lora_load_one(ctx, d, i, &fl, &made[i])) != 0) goto done;
        used[fl.down - lwo_safetensors_tensor_at(d->file, 0)] = 1;
        d->matched++;
    }
    for (i = 0; i < nt; i++) {
        const char *name = lwo_safetensors_tensor_at(d->file, i)->name;
        if (!lwo__ends_with(name, ".lora_down.weight") && !lwo__ends_with(name, ".lora_A.weight")) continue;
        pairs++;
        if (!used[i]) { left++; if (!first) first = name; }
    }
    if (pairs == 0) { r = lwo__fail(ctx, LWO_ERROR_NOT_FOUND, "lwo_lora_load: the file has no LoRA pairs (no <key>.lora_down.weight or <key>.lora_A.weight)"); goto done; }
    if (left && !d->allow_unmatched) {
        size_t klen;
        char *key = d->count ? lwo__lora_key(d->names[0], &d->match, &klen) : NULL;
        r = lwo__fail(ctx, LWO_ERROR_NOT_FOUND, "lwo_lora_load: %zu of the file's %zu LoRA pairs match no weight, the first \"%.300s\" (the "
                      "weights' keys look like \"%.300s\": fix lwo_lora_match, or set allow_unmatched)", left, pairs, first, key ? key : "");
        LWO_FREE(key);
        goto done;
    }
    d->unmatched = left;
    if (left) lwo__log(ctx, LWO_LOG_INFO, "lwo_lora_load: %zu of the file's %zu LoRA pairs match no weight (skipped), the first \"%.300s\"", left, pairs, first);
done:
    if (r) {   /* nothing stays attached; the first failure's message stays */
        char keep[LWO__ERROR_CAP];
        memcpy(keep, ctx->error, sizeof keep);
        for (i = d->count; made && i-- > 0;) if (made[i]) lwo_lora_detach(ctx, made[i]);
        memcpy(ctx->error, keep, sizeof keep);
        d->matched = 0;
    } else if (d->loras) memcpy(d->loras, made, d->count * sizeof *made);
    LWO_FREE(made);
    LWO_FREE(used);
    return r;
}

/* ==== 14. Stats ============================================================================== */
/* Reading the stats waits for the compute stream, so the timings of all the work so far count. */
LWO_DEF lwo_result lwo_context_get_stats(lwo_context *ctx, lwo_stats *out) {
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    if (ctx->engine) lwo__engine_harvest(ctx, ctx->engine, 1, 0);
    *out = ctx->stats;
    return LWO_SUCCESS;
}

/* ==== 15. Context lifetime =================================================================== */
/* lwo_create and lwo_destroy, last: they use every section above. */
/* All defaults are resolved here, once; the rest of the code never tests for zero. */
static lwo_result lwo__desc_defaults(lwo_context *ctx, const lwo_desc *in) {
    char buf[4096];
    ctx->desc = *in;
    if (ctx->desc.log_level == 0) ctx->desc.log_level = LWO_LOG_PROGRESS;
    ctx->driver_path = lwo__strdup(in->driver_path ? in->driver_path : LWO__DRIVER_DEFAULT);
    ctx->nvrtc_path = in->nvrtc_path ? lwo__strdup(in->nvrtc_path) : NULL;
    buf[0] = 0;
    if (in->cache_dir) snprintf(buf, sizeof buf, "%s", in->cache_dir);
    else if (!lwo__env("LWO_CACHE_DIR", buf, sizeof buf) && !lwo__default_cache_dir(buf, sizeof buf)) buf[0] = 0;
    ctx->cache_dir = (buf[0] && strcmp(buf, "-") != 0) ? lwo__strdup(buf) : NULL;
    if (in->gemm_kernels < 0 || in->gemm_kernels > LWO__GEMM_FP8_COPY)
        return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "lwo_create: gemm_kernels = %d; lwo_desc lists 0 to %d", in->gemm_kernels,
                         LWO__GEMM_FP8_COPY);
    if (!ctx->driver_path || (in->nvrtc_path && !ctx->nvrtc_path) || (buf[0] && strcmp(buf, "-") && !ctx->cache_dir))
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (ctx->desc.pinned_cap == 0) {
        uint64_t ram = lwo__phys_ram();
        ctx->desc.pinned_cap = ram ? ram / 2 : (uint64_t)8 << 30;
    }
    ctx->desc.driver_path = ctx->driver_path;
    ctx->desc.nvrtc_path = ctx->nvrtc_path;
    ctx->desc.cache_dir = ctx->cache_dir;
    return LWO_SUCCESS;
}

#define LWO__MIB ((uint64_t)1 << 20)

static lwo_result lwo__create_gpu(lwo_context *ctx) {
    double t0 = lwo__now_ms(), t;
    int count = 0, v;
    size_t freeb = 0, totalb = 0;
    lwo__CUresult rc;
    lwo_result r;
    const char *parts[sizeof lwo__kernel_source_parts / sizeof *lwo__kernel_source_parts];
    static const char *const kopts[] = { "--fmad=false", NULL };
    size_t i;

    r = lwo__driver_load(&ctx->cu, ctx->driver_path, ctx->error, sizeof ctx->error);
    if (r) return r;
    ctx->times.load_driver_ms = lwo__now_ms() - t0;
    t = lwo__now_ms();
    rc = ctx->cu.cuInit(0);
    ctx->times.cu_init_ms = lwo__now_ms() - t;
    if (rc == LWO__CUDA_ERROR_STUB_LIBRARY) return lwo__fail(ctx, LWO_ERROR_STUB_DRIVER, "'%s' is the CUDA toolkit's stub libcuda, not a driver", ctx->driver_path);
    if (rc == LWO__CUDA_ERROR_NO_DEVICE) return lwo__fail(ctx, LWO_ERROR_NO_DEVICE, "cuInit: the driver found no CUDA device");
    if (rc) return lwo__cuda_fail(ctx, rc, "cuInit");
    ctx->cu.cuDriverGetVersion(&ctx->info.driver_version);
    LWO__CU(ctx, cuDeviceGetCount(&count));
    if (ctx->desc.device < 0 || ctx->desc.device >= count)
        return lwo__fail(ctx, LWO_ERROR_NO_DEVICE, "lwo_desc.device is %d but the driver sees %d CUDA device(s)", ctx->desc.device, count);
    LWO__CU(ctx, cuDeviceGet(&ctx->dev, ctx->desc.device));

    t = lwo__now_ms();
    if (ctx->desc.cu_context) {
        ctx->cuctx = (lwo__CUcontext)ctx->desc.cu_context;
    } else {
        LWO__CU(ctx, cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->dev));
        ctx->own_ctx = 1;
    }
    LWO__CU(ctx, cuCtxSetCurrent(ctx->cuctx));
    ctx->times.context_ms = lwo__now_ms() - t;

    LWO__CU(ctx, cuDeviceGetName(ctx->info.name, (int)sizeof ctx->info.name, ctx->dev));
    LWO__CU(ctx, cuDeviceGetAttribute(&ctx->info.cc_major, LWO__CU_ATTR_CC_MAJOR, ctx->dev));
    LWO__CU(ctx, cuDeviceGetAttribute(&ctx->info.cc_minor, LWO__CU_ATTR_CC_MINOR, ctx->dev));
    LWO__CU(ctx, cuDeviceGetAttribute(&ctx->info.sm_count, LWO__CU_ATTR_SM_COUNT, ctx->dev));
    LWO__CU(ctx, cuDeviceGetAttribute(&v, LWO__CU_ATTR_MAX_SMEM_OPTIN, ctx->dev));
    ctx->info.max_smem_per_block = v;
    LWO__CU(ctx, cuMemGetInfo(&freeb, &totalb));
    ctx->info.total_memory = totalb;
    ctx->info.free_memory_at_create = freeb;
    lwo__arch_name(ctx->info.cc_major, ctx->info.cc_minor, ctx->info.arch, sizeof ctx->info.arch);
    if (ctx->info.cc_major * 10 + ctx->info.cc_minor < 75)
        return lwo__fail(ctx, LWO_ERROR_UNSUPPORTED, "%s has compute capability %d.%d; lwo needs 7.5 or newer", ctx->info.name, ctx->info.cc_major, ctx->info.cc_minor);

    if (ctx->desc.cu_stream) {
        ctx->compute = (lwo__CUstream)ctx->desc.cu_stream;
    } else {
        LWO__CU(ctx, cuStreamCreate(&ctx->compute, LWO__CU_STREAM_NON_BLOCKING));
        ctx->own_stream = 1;
    }

    t = lwo__now_ms();
    if (ctx->desc.vram_budget == 0) {
        uint64_t b = (uint64_t)((double)freeb * 0.9);
        b = b > 256 * LWO__MIB ? b - 256 * LWO__MIB : 0;
        ctx->desc.vram_budget = b / (2 * LWO__MIB) * (2 * LWO__MIB);
    }
    if (ctx->desc.vram_budget < LWO__MIB)
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_BUDGET, "a VRAM budget of %llu bytes is below lwo's minimum of 1 MiB", (unsigned long long)ctx->desc.vram_budget);
    if (ctx->desc.vram_budget > freeb)
        return lwo__fail(ctx, LWO_ERROR_OUT_OF_DEVICE_MEMORY, "lwo_desc.vram_budget is %llu bytes but %s has only %llu free",
                         (unsigned long long)ctx->desc.vram_budget, ctx->info.name, (unsigned long long)freeb);
    rc = ctx->cu.cuMemAlloc(&ctx->arena, (size_t)ctx->desc.vram_budget);
    if (rc) return lwo__cuda_fail(ctx, rc, "cuMemAlloc of the arena (lwo_desc.vram_budget)");
    ctx->arena_size = ctx->desc.vram_budget;
    ctx->free_list = (lwo__block *)LWO_MALLOC(16 * sizeof *ctx->free_list);
    if (!ctx->free_list) return lwo__fail(ctx, LWO_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    ctx->capfree = 16;
    ctx->nfree = 1;
    ctx->free_list[0].off = 0;
    ctx->free_list[0].size = ctx->arena_size;
    {
        uint64_t off, size;
        if ((r = lwo__arena_alloc(ctx, LWO__ALIGN, &off, &size, "lwo's scratch")) != 0) return r;
        ctx->scratch = ctx->arena + off;
    }
    ctx->times.arena_ms = lwo__now_ms() - t;

    t = lwo__now_ms();
    for (i = 0; i < sizeof parts / sizeof *parts; i++) parts[i] = lwo__kernel_source_parts[i];
    r = lwo__module_build(ctx, parts, sizeof parts / sizeof *parts, "lwo_kernels.cu", kopts, &ctx->kernels);
    if (r) return r;
    ctx->times.module_ms = lwo__now_ms() - t;
    ctx->times.module_from_cache = ctx->kernels->from_cache;
    lwo__log(ctx, LWO_LOG_INFO, "%s (%s, %d SMs), kernels %s in %.1f ms", ctx->info.name, ctx->info.arch, ctx->info.sm_count,
             ctx->kernels->from_cache ? "from cache" : "compiled", ctx->times.module_ms);
    return LWO_SUCCESS;
}

LWO_DEF lwo_result lwo_create(const lwo_desc *desc, lwo_context **out) {
    lwo_context *ctx;
    lwo_result r;
    double t0 = lwo__now_ms();
    lwo_desc zero;
    if (!out) return LWO_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    ctx = (lwo_context *)LWO_MALLOC(sizeof *ctx);
    if (!ctx) return LWO_ERROR_OUT_OF_HOST_MEMORY;
    memset(ctx, 0, sizeof *ctx);
    ctx->magic = LWO__MAGIC_CTX;
    *out = ctx;
    memset(&zero, 0, sizeof zero);
    if ((r = lwo__desc_defaults(ctx, desc ? desc : &zero)) != 0) return r;
    r = lwo__create_gpu(ctx);
    ctx->times.total_ms = lwo__now_ms() - t0;
    if (r) {
        if (!ctx->error[0]) snprintf(ctx->error, sizeof ctx->error, "%s", lwo_result_string(r));
        lwo__log(ctx, LWO_LOG_ERROR, "lwo_create: %s", ctx->error);
        return r;
    }
    ctx->ok = 1;
    return LWO_SUCCESS;
}

LWO_DEF void lwo_destroy(lwo_context *ctx) {
    if (!ctx || ctx->magic != LWO__MAGIC_CTX) return;
    if (ctx->cu.cuCtxSetCurrent && ctx->cuctx) {
        ctx->cu.cuCtxSetCurrent(ctx->cuctx);
        if (ctx->compute) ctx->cu.cuStreamSynchronize(ctx->compute);
    }
    while (ctx->weights) lwo_weight_destroy(ctx, ctx->weights);
    while (ctx->tensors) lwo__tensor_free(ctx, ctx->tensors);
    while (ctx->handles) lwo__handle_destroy(ctx, ctx->handles, ctx->handles->magic);
    while (ctx->modules) lwo_module_destroy(ctx, ctx->modules);
    lwo__engine_free(ctx);
    lwo__items_free(ctx);
    while (ctx->host_blocks) lwo_host_free(ctx, ctx->host_blocks->p);
    if (ctx->kernels) lwo__module_free(ctx, ctx->kernels);
    {
        int v;
        for (v = 0; v < LWO__GEMM_VARIANTS; v++) if (ctx->gemm_modules[v]) lwo__module_free(ctx, ctx->gemm_modules[v]);
    }
    if (ctx->arena) ctx->cu.cuMemFree(ctx->arena);
    if (ctx->own_stream && ctx->compute) ctx->cu.cuStreamDestroy(ctx->compute);
    if (ctx->own_ctx) ctx->cu.cuDevicePrimaryCtxRelease(ctx->dev);
    lwo__nvrtc_unload(&ctx->nvrtc);
    lwo__driver_unload(&ctx->cu);
    LWO_FREE(ctx->free_list);
    LWO_FREE(ctx->cache_dir);
    LWO_FREE(ctx->nvrtc_path);
    LWO_FREE(ctx->driver_path);
    ctx->magic = 0;
    LWO_FREE(ctx);
}

LWO_DEF lwo_result lwo_context_get_info(lwo_context *ctx, lwo_context_info *out) {
    LWO__ENTER(ctx);
    if (!out) return lwo__fail(ctx, LWO_ERROR_INVALID_ARGUMENT, "argument 'out' is NULL");
    out->device = ctx->info;
    out->startup = ctx->times;
    lwo__memory_stats(ctx, &out->memory);
    return LWO_SUCCESS;
}

#endif /* LWO_IMPLEMENTATION_DONE */
#endif /* LWO_IMPLEMENTATION */

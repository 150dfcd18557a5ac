/* test_gpu_graphs.c - lwo_linear's per-weight graph cache (lwo_desc.graph_cache) for the W8A8
   formats. Two contexts on one device: G with graphs (the default 4 per weight) and E without
   (graph_cache = -1). Every output of G (captured, replayed with other pointers, replayed with the
   first pointers again, after LRU evictions, inside the caller's own capture) must equal E's
   output of the same call bit for bit; outputs are poisoned (0xFF) first. Also prints the per-call
   time of graphed against plain lwo_linear at M = 256. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

static lwo_context *G, *E;

typedef struct pair { lwo_weight *g, *e; } pair;

static int make_weight(lwo_format fmt, uint64_t N, uint64_t K, const float *wf, const float *bias, pair *out) {
    lwo_weight_desc d;
    memset(&d, 0, sizeof d);
    d.rows = N; d.cols = K; d.data = wf; d.format = fmt; d.bias = bias;
    out->g = out->e = NULL;
    if (lwo_weight_create(G, &d, &out->g)) { CHECK(0, "weight on G: %s", lwo_last_error(G)); return 1; }
    if (lwo_weight_create(E, &d, &out->e)) { CHECK(0, "weight on E: %s", lwo_last_error(E)); return 1; }
    return 0;
}


/* y = check_linear(x) on context c, y poisoned first; the result downloaded into host (malloc'd). */
static unsigned char *call(lwo_context *c, lwo_weight *w, lwo_tensor *x, lwo_tensor *y) {
    uint64_t bytes = lwo_tensor_bytes(y);
    unsigned char *h = (unsigned char *)malloc(bytes);
    lwo_result r;
    lwo_tensor_fill_bytes(c, NULL, y, 0xff);
    r = check_linear(c, x, w, y);
    if (!r) r = lwo_tensor_download(c, y, h, bytes);
    CHECK(r == LWO_SUCCESS, "lwo_linear: %s", lwo_last_error(c));
    if (r) memset(h, 0xee, bytes);
    return h;
}

/* x [M, K] bf16 random, the same bytes on both contexts */
static void make_x(uint64_t M, uint64_t K, lwo_tensor **xg, lwo_tensor **xe) {
    uint64_t s[2], i;
    uint16_t *h = (uint16_t *)malloc(M * K * 2);
    for (i = 0; i < M * K; i++) h[i] = lwo_ref_f32_to_bf16((float)check_rand_normal());
    s[0] = M; s[1] = K;
    *xg = *xe = NULL;
    if (lwo_tensor_create(G, LWO_DTYPE_BF16, 2, s, xg) || lwo_tensor_create(E, LWO_DTYPE_BF16, 2, s, xe)) CHECK(0, "x tensors");
    else { lwo_tensor_upload(G, *xg, h, M * K * 2); lwo_tensor_upload(E, *xe, h, M * K * 2); }
    free(h);
}

static lwo_tensor *make_y(lwo_context *c, lwo_dtype t, uint64_t M, uint64_t N) {
    uint64_t s[2];
    lwo_tensor *y = NULL;
    s[0] = M; s[1] = N;
    if (lwo_tensor_create(c, t, 2, s, &y)) CHECK(0, "y tensor: %s", lwo_last_error(c));
    return y;
}

static int same(const unsigned char *a, const unsigned char *b, uint64_t bytes) { return memcmp(a, b, bytes) == 0; }

static uint64_t want_captures, want_hits;

/* x1 -> y1 (capture), x2 -> y2 (replay, other pointers and data), x1 -> y3 (replay) on G; the same
   on E; all bit-identical. */
static void run_case(lwo_format fmt, int with_bias, lwo_dtype yt, uint64_t M, uint64_t N, uint64_t K, const pair *w) {
    lwo_tensor *x1g, *x1e, *x2g, *x2e, *y1 = make_y(G, yt, M, N), *y2 = make_y(G, yt, M, N), *y3 = make_y(G, yt, M, N);
    lwo_tensor *ye = make_y(E, yt, M, N);
    uint64_t bytes = M * N * lwo_dtype_size(yt);
    unsigned char *g1, *g2, *g3, *e1, *e2;
    const char *what = fmt == LWO_FORMAT_INT8 ? "int8" : "fp8";
    make_x(M, K, &x1g, &x1e);
    make_x(M, K, &x2g, &x2e);
    g1 = call(G, w->g, x1g, y1);
    g2 = call(G, w->g, x2g, y2);
    g3 = call(G, w->g, x1g, y3);
    e1 = call(E, w->e, x1e, ye);
    e2 = call(E, w->e, x2e, ye);
    CHECK(same(g1, e1, bytes), "%s bias %d %s (%llu, %llu, %llu): captured call differs from the plain one", what, with_bias,
          lwo_dtype_name(yt), (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
    CHECK(same(g2, e2, bytes), "%s bias %d %s (%llu, %llu, %llu): replay with new pointers differs", what, with_bias,
          lwo_dtype_name(yt), (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
    CHECK(same(g3, e1, bytes), "%s bias %d %s (%llu, %llu, %llu): replay with the first x differs", what, with_bias,
          lwo_dtype_name(yt), (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
    CHECK(!same(e1, e2, bytes), "the two inputs gave the same output: the test would not see a stale pointer");
    want_captures += 1; want_hits += 2;
    free(g1); free(g2); free(g3); free(e1); free(e2);
    lwo_tensor_destroy(G, x1g); lwo_tensor_destroy(G, x2g); lwo_tensor_destroy(E, x1e); lwo_tensor_destroy(E, x2e);
    lwo_tensor_destroy(G, y1); lwo_tensor_destroy(G, y2); lwo_tensor_destroy(G, y3); lwo_tensor_destroy(E, ye);
}

static float *randn(uint64_t n, double s) {
    float *p = (float *)malloc(n * 4);
    uint64_t i;
    for (i = 0; i < n; i++) p[i] = (float)(check_rand_normal() * s);
    return p;
}

/* One call of (M, N, K) with a fresh x on both contexts, compared. */
static void one(const pair *w, uint64_t M, uint64_t N, uint64_t K, const char *what) {
    lwo_tensor *xg, *xe, *yg = make_y(G, LWO_DTYPE_BF16, M, N), *ye = make_y(E, LWO_DTYPE_BF16, M, N);
    unsigned char *a, *b;
    make_x(M, K, &xg, &xe);
    a = call(G, w->g, xg, yg);
    b = call(E, w->e, xe, ye);
    CHECK(same(a, b, M * N * 2), "%s: M = %llu differs", what, (unsigned long long)M);
    free(a); free(b);
    lwo_tensor_destroy(G, xg); lwo_tensor_destroy(E, xe); lwo_tensor_destroy(G, yg); lwo_tensor_destroy(E, ye);
}

static double per_call_ms(lwo_context *c, lwo_weight *w, lwo_tensor *x, lwo_tensor *y) {
    lwo_event *a = NULL, *b = NULL;
    float ms = 0;
    int i;
    lwo_event_create(c, &a); lwo_event_create(c, &b);
    for (i = 0; i < 5; i++) check_linear(c, x, w, y);
    lwo_event_record(c, a, NULL);
    for (i = 0; i < 50; i++) check_linear(c, x, w, y);
    lwo_event_record(c, b, NULL);
    lwo_event_synchronize(c, b);
    lwo_event_elapsed_ms(c, a, b, &ms);
    lwo_event_destroy(c, a); lwo_event_destroy(c, b);
    return ms / 50.0;
}

int main(void) {
    static const uint64_t shapes[3][3] = { { 256, 3072, 3072 }, { 3, 200, 328 }, { 1000, 77, 13 } };
    lwo_desc desc;
    lwo_context_info ci;
    lwo_stats st;
    int s, f, b, t;
    check_seed("test_gpu_graphs");
    memset(&desc, 0, sizeof desc);
    desc.vram_budget = (uint64_t)4 << 30;
    if (lwo_create(&desc, &G) != LWO_SUCCESS) { printf("lwo_create: %s\n", lwo_last_error(G)); CHECK(0, "no context"); lwo_destroy(G); return CHECK_SUMMARY(); }
    desc.graph_cache = -1;
    if (lwo_create(&desc, &E) != LWO_SUCCESS) { printf("lwo_create: %s\n", lwo_last_error(E)); CHECK(0, "no context"); lwo_destroy(E); lwo_destroy(G); return CHECK_SUMMARY(); }
    memset(&ci, 0, sizeof ci);
    lwo_context_get_info(G, &ci);
    printf("%s (%s)\n", ci.device.name, ci.device.arch);

    /* 2 formats x 2 bias x 2 y dtypes x 3 shapes, 4 checks each */
    for (s = 0; s < 3; s++) {
        uint64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *wf = randn(N * K, 0.05), *bias = randn(N, 1.0);
        for (f = 0; f < 2; f++)
            for (b = 0; b < 2; b++) {
                pair w;
                lwo_format fmt = f ? LWO_FORMAT_FP8_E4M3_W8A8 : LWO_FORMAT_INT8;
                if (make_weight(fmt, N, K, wf, b ? bias : NULL, &w) == 0)
                    for (t = 0; t < 2; t++) run_case(fmt, b, t ? LWO_DTYPE_F32 : LWO_DTYPE_BF16, M, N, K, &w);
                lwo_weight_destroy(G, w.g); /* its graphs are live */
                lwo_weight_destroy(E, w.e);
            }
        free(wf); free(bias);
    }
    lwo_context_get_stats(G, &st);
    CHECK_EQ_INT(st.linear_graph_captures, want_captures);
    CHECK_EQ_INT(st.linear_graph_hits, want_hits);
    CHECK_EQ_INT(st.linear_graph_fallbacks, 0);
    lwo_context_get_stats(E, &st);
    CHECK_EQ_INT(st.linear_graph_captures + st.linear_graph_hits, 0);

    { /* LRU: five M values with four slots, then the first again (evicted: captured anew) */
        float *wf = randn(200 * 328, 0.05);
        pair w;
        lwo_stats s0, s1;
        uint64_t Ms[6] = { 1, 2, 3, 4, 5, 1 };
        int i;
        lwo_context_get_stats(G, &s0);
        if (make_weight(LWO_FORMAT_INT8, 200, 328, wf, NULL, &w) == 0) {
            for (i = 0; i < 6; i++) one(&w, Ms[i], 200, 328, "LRU");
            one(&w, 5, 200, 328, "LRU hit"); /* still cached */
            lwo_context_get_stats(G, &s1);
            CHECK_EQ_INT(s1.linear_graph_captures - s0.linear_graph_captures, 6);
            CHECK_EQ_INT(s1.linear_graph_evictions - s0.linear_graph_evictions, 2);
            CHECK_EQ_INT(s1.linear_graph_hits - s0.linear_graph_hits, 1);

            { /* inside the caller's own capture: plain kernels captured into the caller's graph */
                lwo_graph *g = NULL;
                lwo_tensor *xg, *xe, *yg = make_y(G, LWO_DTYPE_F32, 7, 200), *ye = make_y(E, LWO_DTYPE_F32, 7, 200);
                unsigned char *a = (unsigned char *)malloc(7 * 200 * 4), *e;
                lwo_result r;
                make_x(7, 328, &xg, &xe);
                lwo_context_get_stats(G, &s0);
                lwo_tensor_fill_bytes(G, NULL, yg, 0xff);
                r = lwo_graph_capture_begin(G);
                if (!r) r = check_linear(G, xg, w.g, yg);
                if (!r) r = lwo_graph_capture_end(G, &g);
                if (!r) r = lwo_graph_launch(G, g);
                if (!r) r = lwo_tensor_download(G, yg, a, 7 * 200 * 4);
                CHECK(r == LWO_SUCCESS, "lwo_linear in a whole-pass capture: %s", lwo_last_error(G));
                lwo_context_get_stats(G, &s1);
                CHECK_EQ_INT(s1.linear_graph_captures - s0.linear_graph_captures, 0);
                e = call(E, w.e, xe, ye);
                CHECK(r == LWO_SUCCESS && same(a, e, 7 * 200 * 4), "lwo_linear in a whole-pass capture differs");
                if (g) lwo_graph_destroy(G, g);
                free(a); free(e);
                lwo_tensor_destroy(G, xg); lwo_tensor_destroy(E, xe); lwo_tensor_destroy(G, yg); lwo_tensor_destroy(E, ye);
            }
        }
        lwo_weight_destroy(G, w.g);
        lwo_weight_destroy(E, w.e);
        free(wf);
    }

    { /* timing, printed only */
        float *wf = randn(3072 * 3072, 0.05);
        pair w;
        if (make_weight(LWO_FORMAT_INT8, 3072, 3072, wf, NULL, &w) == 0) {
            lwo_tensor *xg, *xe, *yg = make_y(G, LWO_DTYPE_BF16, 256, 3072), *ye = make_y(E, LWO_DTYPE_BF16, 256, 3072);
            make_x(256, 3072, &xg, &xe);
            printf("int8 (256, 3072, 3072) -> bf16: %.4f ms per call graphed, %.4f ms plain\n",
                   per_call_ms(G, w.g, xg, yg), per_call_ms(E, w.e, xe, ye));
            lwo_tensor_destroy(G, xg); lwo_tensor_destroy(E, xe); lwo_tensor_destroy(G, yg); lwo_tensor_destroy(E, ye);
        }
        /* G's weight keeps its graph: lwo_destroy frees it */
        lwo_weight_destroy(E, w.e);
        free(wf);
    }
    lwo_destroy(E);
    lwo_destroy(G);
    return CHECK_SUMMARY();
}

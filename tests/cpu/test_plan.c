/* The streaming planner as pure host code: invariants on random problems, hand-checked cases, the
   too-small budget error, and a comparison with the exhaustive optimum on small problems. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <math.h>
#include "../check.h"

/* Every plan must fit the budget, stream each non-resident weight through a slot large enough,
   have a ring whenever something streams, and give that ring the room no resident weight takes. */
static int plan_valid(const lwo_plan_desc *d, const lwo_plan *p) {
    size_t i;
    uint64_t res = 0, str = 0;
    for (i = 0; i < d->count; i++) {
        uint64_t sz = (d->weight_bytes[i] + 255) / 256 * 256;
        if (p->resident[i]) { res += sz; if (d->must_stream && d->must_stream[i]) return 0; }
        else { str += sz; if (sz > p->slot_bytes) return 0; }
    }
    if (res != p->resident_bytes || str != p->streamed_bytes) return 0;
    if (str && (p->slots < 1 || p->slots > (d->max_slots ? d->max_slots : 4))) return 0;
    if (!str && p->slots != 0) return 0;
    if (res + (uint64_t)p->slots * p->slot_bytes + d->workspace > d->budget) return 0;
    /* the room left over widens the slots (less than one 256-byte step per slot stays unused), up
       to a ring that holds every streamed byte */
    if (p->slots && d->budget - (res + (uint64_t)p->slots * p->slot_bytes + d->workspace) >= (uint64_t)p->slots * 256 &&
        (uint64_t)p->slots * p->slot_bytes < str) return 0;
    if (p->slots && !d->use_ms) {   /* and no wider: the largest streamed weight, or the streamed bytes over the slots
                                       (the timed planner also tries slots sized for a ring depth) */
        uint64_t mxs = 0, even = (str + (uint64_t)p->slots - 1) / (uint64_t)p->slots;
        for (i = 0; i < d->count; i++) if (!p->resident[i] && (d->weight_bytes[i] + 255) / 256 * 256 > mxs) mxs = (d->weight_bytes[i] + 255) / 256 * 256;
        even = (even + 255) / 256 * 256;
        if (p->slot_bytes > (mxs > even ? mxs : even)) return 0;
    }
    return p->total_bytes == res + (uint64_t)p->slots * p->slot_bytes + d->workspace;
}

/* The fewest streamed bytes any resident subset allows with at least one slot. */
static uint64_t brute_best(const lwo_plan_desc *d) {
    size_t n = d->count, i;
    uint64_t mask, best = UINT64_MAX;
    for (mask = 0; mask < (1ull << n); mask++) {
        uint64_t res = 0, slot = 0, str = 0;
        for (i = 0; i < n; i++) {
            uint64_t sz = (d->weight_bytes[i] + 255) / 256 * 256;
            if (mask >> i & 1) res += sz; else { str += sz; if (sz > slot) slot = sz; }
        }
        if (res + slot + d->workspace <= d->budget && str < best) best = str;
    }
    return best;
}

/* The model of a plan's eager pass (what the timed planner compares candidates with), for a plan
   made with or without timing, at `rate` times the desc's host-to-device rate; *graph: a graph's
   replay of it. */
static double model_graph_at(const lwo_plan_desc *d, const lwo_plan *p, double rate, double slack, double *wait, double *graph) {
    static uint64_t sz[512], off[1024], size[1024];
    static double ready[1024], read[1024];
    static size_t item[1024];
    static long fill_of[512];
    static uint32_t idx[512];
    lwo__plan_model m;
    size_t i;
    *wait = *graph = 0;
    if (!p->slots) return 0;
    for (i = 0; i < d->count; i++) { sz[i] = (d->weight_bytes[i] + 255) / 256 * 256; idx[i] = (uint32_t)i; }
    memset(&m, 0, sizeof m);
    m.sizes = sz; m.n = d->count; m.uses = d->use_order ? d->use_count : d->count; m.order = d->use_order ? d->use_order : idx;
    m.ms = d->use_ms; m.bytes_per_ms = rate * d->h2d_GBps * 1e6; m.slack = slack;
    m.f_off = off; m.f_size = size; m.f_ready = ready; m.f_read = read; m.f_item = item; m.fill_of = fill_of;
    return lwo__plan_simulate(&m, p->resident, p->slot_bytes, p->slots, wait, graph);
}
static double model_ms(const lwo_plan_desc *d, const lwo_plan *p, double *wait) { double g; return model_graph_at(d, p, 1.0, 0, wait, &g); }
/* the planner's score: eager and graph, as measured and with each use's compute 3% longer */
static double model_score(const lwo_plan_desc *d, const lwo_plan *p) {
    double w, g1, g2, e1 = model_graph_at(d, p, 1.0, 0, &w, &g1), e2 = model_graph_at(d, p, 1.0, 0.03, &w, &g2);
    return e1 + g1 + e2 + g2;
}

/* A transformer shaped like Flux (19 double blocks of ten weights, 38 single blocks of three,
   8-bit bytes) with each use's compute from its product's size at 800 TOP/s plus the attention
   (0.91 ms a block): the modulation weights are large and read by one-row products. */
static size_t flux_like(uint64_t *w, float *ms, double *compute) {
    const uint64_t D = 3072, H = 12288;
    static const uint64_t rows[10] = { 6 * D, 6 * D, 3 * D, 3 * D, D, H, D, D, H, D }, cols[10] = { D, D, D, D, D, D, H, D, D, H };
    static const double M[10] = { 1, 1, 4096, 512, 4096, 4096, 4096, 512, 512, 512 };
    size_t n = 0;
    int b, j;
    *compute = 0;
    for (b = 0; b < 19; b++)
        for (j = 0; j < 10; j++, n++) {
            w[n] = rows[j] * cols[j] + rows[j] * 8;
            ms[n] = (float)(2.0 * M[j] * rows[j] * cols[j] / 8e11 + 0.03 + (j == 3 ? 0.91 : 0));
        }
    for (b = 0; b < 38; b++) {
        w[n] = 3 * D * D + 3 * D * 8; ms[n++] = 0.04f;
        w[n] = (3 * D + H) * D + (3 * D + H) * 8; ms[n++] = (float)(2.0 * 4608 * (3 * D + H) * D / 8e11 + 0.97);
        w[n] = D * (D + H) + D * 8; ms[n++] = (float)(2.0 * 4608 * D * (D + H) / 8e11 + 0.03);
    }
    for (j = 0; j < (int)n; j++) *compute += ms[j];
    return n;
}

static void timed_tests(void) {
    static uint64_t w[512];
    static float ms[512];
    static uint32_t order[1024];
    lwo_plan_desc d;
    lwo_plan p, q;
    double compute, wait, t, bytes_ms, graph;
    size_t n, i;
    int it, bad = 0, slower = 0;
    /* the model by hand: three 1 MiB weights streamed through two 1 MiB slots at 1 MiB per ms,
       1 ms of compute each: the transfers (1.004 ms each, the fixed cost included) run back to
       back, and each use waits the 0.004 ms its transfer is longer than the compute before it */
    {
        uint64_t wb[3] = { 1u << 20, 1u << 20, 1u << 20 };
        float ums[3] = { 1, 1, 1 };
        uint8_t none[3] = { 0, 0, 0 };
        memset(&d, 0, sizeof d);
        memset(&p, 0, sizeof p);
        d.weight_bytes = wb; d.count = 3; d.use_ms = ums; d.h2d_GBps = (double)(1u << 20) / 1e6;
        p.resident = none; p.slots = 2; p.slot_bytes = 1u << 20;
        /* a graph's replay starts from an empty ring: the first transfer is not hidden, and the
           last use computes with nothing left to move (1.004 + 3 x 1.004 - 1.004 + 1) */
        double g;
        t = model_graph_at(&d, &p, 1.0, 0, &wait, &g);
        CHECK(fabs(t - 3.012) < 1e-9 && fabs(wait - 0.012) < 1e-9, "model, transfer-bound: %.6f ms (want 3.012), waited %.6f (want 0.012)", t, wait);
        CHECK(fabs(g - 4.012) < 1e-9, "model, transfer-bound graph: %.6f ms (want 4.012)", g);
        ums[0] = ums[1] = ums[2] = 2;   /* compute-bound: transfers hide behind the compute */
        t = model_graph_at(&d, &p, 1.0, 0, &wait, &g);
        CHECK(fabs(t - 6.0) < 1e-9 && wait == 0, "model, compute-bound: %.6f ms (want 6), waited %.6f", t, wait);
        CHECK(fabs(g - 7.004) < 1e-9, "model, compute-bound graph: %.6f ms (want 7.004: the first transfer)", g);
        p.slots = 3;   /* a ring that holds every streamed weight keeps them: nothing moves */
        ums[0] = ums[1] = ums[2] = 0.5f;
        t = model_graph_at(&d, &p, 1.0, 0, &wait, &g);
        CHECK(fabs(t - 1.5) < 1e-9 && wait == 0, "model, everything stays in the ring: %.6f ms (want 1.5)", t);
        CHECK(fabs(g - 3.512) < 1e-9, "model, a graph moves it all again: %.6f ms (want 3.512)", g);
    }
    /* Flux-like at 8 GiB: the fewest-bytes plan keeps the large weights resident and leaves a
       small ring; the model sees the compute stream wait, and the timed plan removes that */
    n = flux_like(w, ms, &compute);
    memset(&d, 0, sizeof d);
    d.weight_bytes = w; d.count = n; d.budget = 7ull << 30; d.workspace = 64u << 20;
    CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
    d.use_ms = ms; d.h2d_GBps = 54.0;
    bytes_ms = model_ms(&d, &p, &wait);
    CHECK_EQ_INT(lwo_plan_create(&d, &q), LWO_SUCCESS);
    CHECK(plan_valid(&d, &q), "the timed plan is valid");
    t = model_graph_at(&d, &q, 1.0, 0, &wait, &graph);
    printf("  Flux-like, 7 GiB: compute %.1f ms; fewest bytes: %.2f GiB streamed, ring %d x %.0f MiB, model %.1f ms; timed: %.2f GiB, "
           "ring %d x %.0f MiB, model %.1f ms (%.1f waiting; a graph %.1f ms)\n", compute, p.streamed_bytes / 1073741824.0, p.slots, p.slot_bytes / 1048576.0,
           bytes_ms, q.streamed_bytes / 1073741824.0, q.slots, q.slot_bytes / 1048576.0, t, wait, graph);
    CHECK(fabs(t - q.predicted_ms) < 1e-6 * t && fabs(wait - q.predicted_wait_ms) < 1e-6 * t && fabs(graph - q.predicted_graph_ms) < 1e-6 * t,
          "the plan reports its model's figures");
    CHECK(graph < compute * 1.03, "a graph's replay of the timed plan is within 3%% of the compute (%.1f of %.1f ms)", graph, compute);
    CHECK(bytes_ms > compute * 1.1, "the fewest-bytes plan leaves the compute stream waiting (%.1f of %.1f ms)", bytes_ms, compute);
    CHECK(t < compute * 1.02, "the timed plan is within 2%% of the compute (%.1f of %.1f ms)", t, compute);
    lwo_plan_destroy(&p);
    lwo_plan_destroy(&q);
    /* an explicit use order, with a weight read twice: the same as its unrolled form */
    for (i = 0; i < n; i++) order[i] = (uint32_t)i;
    order[n] = 0;
    ms[n] = 0.5f;
    d.use_order = order; d.use_count = n + 1;
    CHECK_EQ_INT(lwo_plan_create(&d, &q), LWO_SUCCESS);
    CHECK(plan_valid(&d, &q) && q.predicted_ms >= compute + 0.5 - 1e-3, "use order with a repeat: valid, %.1f ms", q.predicted_ms);
    lwo_plan_destroy(&q);
    order[n] = (uint32_t)n;
    CHECK_EQ_INT(lwo_plan_create(&d, &q), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(q.error, "names weight") != NULL, "%s", q.error);
    order[n] = 0;
    ms[3] = -1;
    CHECK_EQ_INT(lwo_plan_create(&d, &q), LWO_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(q.error, "use 3") != NULL, "%s", q.error);
    /* random problems: a timed plan is valid and never scores worse in the model (its time at the
       measured rate and at 85% of it) than the fewest-bytes plan, one of its candidates */
    for (it = 0; it < 400; it++) {
        double tb, tt;
        uint64_t all = 0, mx = 0;
        n = 1 + check_rand_u64() % 40;
        for (i = 0; i < n; i++) {
            w[i] = 256 * (1 + check_rand_u64() % 4096);
            ms[i] = (float)(check_rand_uniform() < 0.2 ? 0 : check_rand_uniform() * 0.2);
            all += w[i]; if (w[i] > mx) mx = w[i];
        }
        memset(&d, 0, sizeof d);
        d.weight_bytes = w; d.count = n; d.workspace = 256 * (check_rand_u64() % 8); d.max_slots = (int)(check_rand_u64() % 9);
        d.budget = d.workspace + mx + check_rand_u64() % (all + 1);
        if (lwo_plan_create(&d, &p) != LWO_SUCCESS) { bad++; continue; }
        d.use_ms = ms; d.h2d_GBps = 0.5 + check_rand_uniform() * 50;
        if (lwo_plan_create(&d, &q) != LWO_SUCCESS) { bad++; lwo_plan_destroy(&p); continue; }
        if (!plan_valid(&d, &q)) bad++;
        tb = model_score(&d, &p);
        tt = model_score(&d, &q);
        if (p.slots && tt > tb * 1.002 + 1e-9) slower++;
        lwo_plan_destroy(&p);
        lwo_plan_destroy(&q);
    }
    CHECK(bad == 0, "%d random timed plans failed or invalid", bad);
    CHECK(slower == 0, "%d random timed plans score worse in the model than the fewest-bytes plan", slower);
}

/* The engine's event pool compaction (lwo__engine_compact, host bookkeeping only: no driver call),
   on random pools with fake event handles: every unread mark and transfer names the same event as
   before, the read ones are gone, the pool keeps every handle once, and it shrinks by exactly the
   events before the oldest one still named. */
static void test_pool_compaction(void) {
    int trial;
    for (trial = 0; trial < 2000; trial++) {
        lwo__engine e;
        size_t cap = 8 + check_rand_u64() % 200, nm = check_rand_u64() % 40, nx = check_rand_u64() % 30, k, lo;
        void *before_m[40][2], *before_x[30][2], *before_max = NULL;
        unsigned char seen[208];
        int ok = 1;
        memset(&e, 0, sizeof e);
        e.wait_ev = (lwo__CUevent *)malloc(cap * sizeof *e.wait_ev);
        e.marks = (lwo__mark *)malloc((nm + 1) * sizeof *e.marks);
        e.xfers = (lwo__xfer *)malloc((nx + 1) * sizeof *e.xfers);
        for (k = 0; k < cap; k++) e.wait_ev[k] = (lwo__CUevent)(uintptr_t)(k + 1);
        e.capwait = cap;
        e.nwait = 1 + check_rand_u64() % cap;
        e.nmarks = nm; e.harvested = nm ? check_rand_u64() % (nm + 1) : 0;
        e.nxfers = nx; e.xfers_harvested = nx ? check_rand_u64() % (nx + 1) : 0;
        for (k = 0; k < nm; k++) {
            e.marks[k].pre = check_rand_u64() % e.nwait;
            e.marks[k].post = (check_rand_u64() & 1) ? e.marks[k].pre : check_rand_u64() % e.nwait;
            e.marks[k].pos = k; e.marks[k].uses = 0;
            before_m[k][0] = e.wait_ev[e.marks[k].pre]; before_m[k][1] = e.wait_ev[e.marks[k].post];
        }
        for (k = 0; k < nx; k++) {
            memset(&e.xfers[k], 0, sizeof e.xfers[k]);
            e.xfers[k].start = check_rand_u64() % e.nwait; e.xfers[k].end = check_rand_u64() % e.nwait; e.xfers[k].bytes = k;
            before_x[k][0] = e.wait_ev[e.xfers[k].start]; before_x[k][1] = e.wait_ev[e.xfers[k].end];
        }
        e.xfer_max_end = (check_rand_u64() & 3) ? check_rand_u64() % e.nwait : LWO__MARK_NONE;
        if (e.xfer_max_end != LWO__MARK_NONE) before_max = e.wait_ev[e.xfer_max_end];
        /* the expected shrink: the oldest event still named */
        lo = e.nwait;
        for (k = e.harvested; k < nm; k++) { if (e.marks[k].pre < lo) lo = e.marks[k].pre; if (e.marks[k].post < lo) lo = e.marks[k].post; }
        for (k = e.xfers_harvested; k < nx; k++) { if (e.xfers[k].start < lo) lo = e.xfers[k].start; if (e.xfers[k].end < lo) lo = e.xfers[k].end; }
        if (e.xfers_harvested < nx && e.xfer_max_end != LWO__MARK_NONE && e.xfer_max_end < lo) lo = e.xfer_max_end;
        {
            size_t nwait0 = e.nwait, h = e.harvested, hx = e.xfers_harvested;
            lwo__engine_compact(&e);
            ok &= e.nwait == nwait0 - lo && e.harvested == 0 && e.nmarks == nm - h && e.xfers_harvested == 0 && e.nxfers == nx - hx;
            for (k = 0; ok && k < e.nmarks; k++)
                ok &= e.marks[k].pos == h + k && e.marks[k].pre < e.nwait && e.marks[k].post < e.nwait &&
                      e.wait_ev[e.marks[k].pre] == before_m[h + k][0] && e.wait_ev[e.marks[k].post] == before_m[h + k][1];
            for (k = 0; ok && k < e.nxfers; k++)
                ok &= e.xfers[k].bytes == hx + k && e.xfers[k].start < e.nwait && e.xfers[k].end < e.nwait &&
                      e.wait_ev[e.xfers[k].start] == before_x[hx + k][0] && e.wait_ev[e.xfers[k].end] == before_x[hx + k][1];
            if (hx == nx) ok &= e.xfer_max_end == LWO__MARK_NONE;
            else if (before_max) ok &= e.xfer_max_end < e.nwait && e.wait_ev[e.xfer_max_end] == before_max;
            memset(seen, 0, sizeof seen);
            for (k = 0; k < cap; k++) {
                uintptr_t v = (uintptr_t)e.wait_ev[k];
                ok &= v >= 1 && v <= cap && !seen[v];
                if (v >= 1 && v <= cap) seen[v] = 1;
            }
        }
        CHECK(ok, "trial %d: pool of %llu (%llu used), %llu marks, %llu transfers: the compacted pool names other events",
              trial, (unsigned long long)cap, (unsigned long long)e.nwait, (unsigned long long)nm, (unsigned long long)nx);
        free(e.wait_ev); free(e.marks); free(e.xfers);
        if (!ok) break;
    }
}

/* A plan keeps every weight marked must_stream out of the resident set, whichever planner made it,
   and its slots take each of them. */
static void must_stream_tests(void) {
    static uint64_t w[64];
    static float ms[64];
    static uint8_t must[64];
    lwo_plan_desc d;
    lwo_plan p;
    int it, bad = 0, failed = 0, timed;
    for (it = 0; it < 1500; it++) {
        size_t n = 1 + check_rand_u64() % 24, i;
        uint64_t all = 0, mx = 0;
        for (i = 0; i < n; i++) {
            w[i] = 256 * (1 + check_rand_u64() % 256);
            must[i] = check_rand_uniform() < 0.3;
            ms[i] = (float)(check_rand_uniform() * 0.2);
            all += w[i]; if (w[i] > mx) mx = w[i];
        }
        for (timed = 0; timed < 2; timed++) {
            memset(&d, 0, sizeof d);
            d.weight_bytes = w; d.count = n; d.workspace = 256 * (check_rand_u64() % 8); d.max_slots = (int)(check_rand_u64() % 5);
            d.budget = d.workspace + mx + check_rand_u64() % (all + 1);
            d.must_stream = must;
            if (timed) { d.use_ms = ms; d.h2d_GBps = 0.5 + check_rand_uniform() * 50; }
            if (lwo_plan_create(&d, &p) != LWO_SUCCESS) { failed++; continue; }
            if (!plan_valid(&d, &p)) bad++;
            for (i = 0; i < n; i++)
                if (must[i] && (p.resident[i] || w[i] > p.slot_bytes || !p.slots)) {
                    if (!bad++) printf("  must stream: weight %zu of %zu (%llu bytes, %s) resident %d, %d slots of %llu\n", i, n, (unsigned long long)w[i],
                                       timed ? "timed" : "untimed", p.resident[i], p.slots, (unsigned long long)p.slot_bytes);
                }
            lwo_plan_destroy(&p);
        }
    }
    CHECK(failed == 0, "%d plans with weights that must stream failed at a budget that holds the largest", failed);
    CHECK(bad == 0, "%d plans kept a weight that must stream resident, or left it no slot", bad);
    /* all would fit, but one must stream: a ring for it, the rest resident */
    {
        uint64_t wb[3] = { 4096, 8192, 2048 };
        uint8_t m3[3] = { 0, 0, 1 };
        memset(&d, 0, sizeof d);
        d.weight_bytes = wb; d.count = 3; d.budget = 1 << 20; d.must_stream = m3;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
        CHECK(p.resident[0] && p.resident[1] && !p.resident[2] && p.slots >= 1 && p.slot_bytes >= 2048 && p.streamed_bytes == 2048,
              "one weight must stream: resident %d %d %d, %d slots of %llu", p.resident[0], p.resident[1], p.resident[2], p.slots,
              (unsigned long long)p.slot_bytes);
        lwo_plan_destroy(&p);
    }
}

/* lwo_linear's reservation (what lwo_streaming_plan reserves), computed on the CPU for a context
   that says it is an H200 (132 multiprocessors, sm_90a): the workspace by hand, the row chunks,
   which shapes split, and that the reservation covers every call up to the declared rows. */
static void reserve_tests(void) {
    static lwo_context fake;
    lwo__reserve rv;
    lwo_weight_desc wd;
    uint64_t M, rows;
    int i, bad = 0;
    memset(&fake, 0, sizeof fake);
    fake.info.sm_count = 132;
    snprintf(fake.info.arch, sizeof fake.info.arch, "sm_90a");
    /* the workspace by hand: W8A8 codes at 256-byte granularity then f32 scales; the upcast weight;
       x padded to kpad when K % 8 != 0 */
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_INT8, 100, 300, 256, 0), 25600 + 400);
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_FP8_E4M3_W8A8, 3, 300, 64, 0), 256 + 12);
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_FP8_E4M3, 100, 300, 256, 0), 153600);
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_FP8_E5M2, 10, 3, 64, 1), 512 + 10 * 64 * 2);
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_BF16, 100, 300, 256, 0), 0);
    CHECK_EQ_INT(lwo__linear_ws(LWO_FORMAT_F16, 100, 300, 256, 1), 100 * 256 * 2);
    /* row chunks: all rows when they fit, else whole 64-row chunks, the most that fit */
    for (i = 0; i < 3000; i++) {
        static const lwo_format fs[4] = { LWO_FORMAT_INT8, LWO_FORMAT_FP8_E4M3_W8A8, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_BF16 };
        lwo_format f = fs[i % 4];
        uint64_t N = 1 + check_rand_u64() % 5000, Kp = 64 * (1 + check_rand_u64() % 200), bytes = check_rand_u64() % (64ull << 20);
        int pad = (int)(check_rand_u64() % 2);
        M = 1 + check_rand_u64() % 20000;
        rows = lwo__linear_rows(f, M, N, Kp, pad, bytes);
        if (rows == M) { if (lwo__linear_ws(f, M, N, Kp, pad) > bytes) bad++; continue; }
        if (rows % 64 || rows > M || (rows && lwo__linear_ws(f, rows, N, Kp, pad) > bytes) ||
            (rows + 64 < M && lwo__linear_ws(f, rows + 64, N, Kp, pad) <= bytes) || (!rows && lwo__linear_ws(f, 64 < M ? 64 : M, N, Kp, pad) <= bytes))
            bad++;
    }
    CHECK(bad == 0, "%d row-chunk sizes wrong", bad);
    /* which GEMMs split (the default: 16 or more whole rounds with a part-empty last one) */
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_INT8, 8192, 8192, 8192, 8192) == 1, "int8 8192^3 splits: 31 rounds");
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_INT8, 4608, 3072, 3072, 3072) == 0, "int8 4608 x 3072 x 3072 does not: 6.55 rounds");
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_BF16, 8192, 8192, 8192, 8192) == 0, "a bf16 weight with K a multiple of 8 uses no workspace: never");
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_FP8_E4M3, 8192, 8192, 8192, 8192) == 1, "an upcast weight splits where its GEMM would");
    fake.desc.gemm_split = -1;
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_INT8, 8192, 8192, 8192, 8192) == 0, "gemm_split -1: never");
    fake.desc.gemm_split = 8;
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_INT8, 256, 640, 256, 256) == 1, "gemm_split 8: a small shape splits");
    fake.desc.gemm_split = 0;
    snprintf(fake.info.arch, sizeof fake.info.arch, "sm_89");
    CHECK(lwo__linear_splits(&fake, LWO_FORMAT_INT8, 8192, 8192, 8192, 8192) == 0, "only the Hopper GEMMs split");
    snprintf(fake.info.arch, sizeof fake.info.arch, "sm_90a");
    /* the reservation covers every call up to max_rows: each M's workspace, and the split area
       whenever that M's GEMM (the tile lwo__gemm_wg picks, and its rounds) would split */
    bad = 0;
    for (i = 0; i < 300; i++) {
        static const lwo_format fs[6] = { LWO_FORMAT_BF16, LWO_FORMAT_F16, LWO_FORMAT_FP8_E4M3, LWO_FORMAT_FP8_E5M2, LWO_FORMAT_INT8, LWO_FORMAT_FP8_E4M3_W8A8 };
        lwo_format f = fs[i % 6];
        uint64_t N = 64 + check_rand_u64() % 12000, K = 8 + check_rand_u64() % 12000, Kp = lwo__kpad(K, 0), max_rows = 1 + check_rand_u64() % 9000, j;
        int pad = K % 8 != 0;
        fake.desc.gemm_split = i % 3 == 0 ? (int)(4 + check_rand_u64() % 40) : 0;
        rv.ws = rv.split = 0;
        lwo__reserve_add(&fake, &rv, f, N, K, Kp, max_rows);
        for (j = 0; j < 40; j++) {
            const lwo__wg_tile *t;
            uint64_t first, akb = lwo__format_w8a8(f) ? Kp : (pad ? Kp : K) * 2;
            int uses_ws = lwo__format_w8a8(f) || lwo__format_upcast(f) || pad;
            M = j == 0 ? max_rows : 1 + check_rand_u64() % max_rows;
            if (lwo__linear_ws(f, M, N, Kp, pad) > rv.ws) bad++;
            t = lwo__gemm_wg_tile(&fake, M, N, akb, uses_ws, lwo__gemm_operands(&fake, f));
            lwo__wg_rounds(&fake, t, lwo__wg_units(t, M, N), lwo__wg_slots(&fake, t), (akb + t->bk - 1) / t->bk, uses_ws, &first);
            if (first < lwo__wg_units(t, M, N) && rv.split != lwo__split_bytes(&fake)) bad++;
        }
    }
    fake.desc.gemm_split = 0;
    CHECK(bad == 0, "%d calls up to max_rows need more than the reservation", bad);
    /* no rows declared: a chunk of 64 rows, whatever the calls will be */
    rv.ws = rv.split = 0;
    lwo__reserve_add(&fake, &rv, LWO_FORMAT_INT8, 3072, 3072, 3072, 0);
    CHECK(rv.ws == 64 * 3072 + 256 && rv.split == 0, "max_rows 0: one chunk, %llu bytes", (unsigned long long)rv.ws);
    /* a weight's VRAM by hand: data [N, kpad] as stored, scales, bias, smooth, each 256-byte rounded */
    memset(&wd, 0, sizeof wd);
    wd.rows = 300; wd.cols = 200; wd.format = LWO_FORMAT_INT8;
    CHECK_EQ_INT(lwo_weight_device_bytes(&wd), 300 * 256 + 1280);
    wd.bias = &wd; wd.smooth = (const float *)&wd;
    CHECK_EQ_INT(lwo_weight_device_bytes(&wd), 300 * 256 + 1280 + 1280 + 1024);
    wd.format = LWO_FORMAT_BF16; wd.bias = NULL; wd.smooth = NULL; wd.hadamard = 128;
    CHECK_EQ_INT(lwo_weight_device_bytes(&wd), 300 * 256 * 2);
    wd.format = LWO_FORMAT_FP8_E5M2; wd.hadamard = 0; wd.cols = 64;
    CHECK_EQ_INT(lwo_weight_device_bytes(&wd), 300 * 64 + 256);
    wd.hadamard = 3;
    CHECK_EQ_INT(lwo_weight_device_bytes(&wd), 0);
    CHECK_EQ_INT(lwo_weight_device_bytes(NULL), 0);
}

int main(void) {
    lwo_plan p;
    lwo_plan_desc d;
    uint64_t w[64];
    int it, bad = 0, worse = 0;
    double worst = 1.0;
    check_seed("test_plan");
    test_pool_compaction();
    memset(&d, 0, sizeof d);
    /* a 24-block stack like ANCHORS.md's: qkv, out, up, down per block (bf16 bytes) */
    {
        uint64_t blk[4] = { 3072ull * 9216 * 2, 3072ull * 3072 * 2, 3072ull * 12288 * 2, 12288ull * 3072 * 2 }, all = 0;
        int i;
        for (i = 0; i < 64 && i < 96; i++) w[i] = blk[i % 4];
        d.weight_bytes = w; d.count = 64; d.workspace = 256ull << 20;
        for (i = 0; i < 64; i++) all += w[i];
        d.budget = all + d.workspace;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
        CHECK(p.slots == 0 && p.streamed_bytes == 0 && p.resident_bytes == all, "everything fits: all resident, no ring");
        lwo_plan_destroy(&p);
        d.budget = all / 2 + d.workspace;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
        CHECK(plan_valid(&d, &p), "half budget: valid");
        CHECK(p.slots >= 2 && p.resident_bytes + p.slots * p.slot_bytes > all / 2 - blk[2], "half budget: the room is used (resident %llu, ring %d x %llu)",
              (unsigned long long)p.resident_bytes, p.slots, (unsigned long long)p.slot_bytes);
        lwo_plan_destroy(&p);
        d.budget = blk[2] + d.workspace; /* the minimum: one slot of the largest weight */
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
        CHECK(plan_valid(&d, &p) && p.slots == 1 && p.resident_bytes == 0 && p.slot_bytes == blk[2], "minimum budget: one slot, nothing resident");
        lwo_plan_destroy(&p);
        d.budget = blk[2] + d.workspace - 1;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(p.error, "weight 2") && strstr(p.error, "1 bytes missing"), "the error names the weight and the bytes missing: %s", p.error);
        d.budget = 100; d.workspace = 200;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(p.error, "workspace") != NULL, "%s", p.error);
    }
    CHECK_EQ_INT(lwo_plan_create(NULL, &p), LWO_ERROR_INVALID_ARGUMENT);
    d.weight_bytes = NULL; d.count = 3;
    CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_ERROR_INVALID_ARGUMENT);
    /* random problems: always valid; near the exhaustive optimum */
    for (it = 0; it < 3000; it++) {
        size_t n = 1 + check_rand_u64() % 12, i;
        uint64_t all = 0, mx = 0, opt;
        for (i = 0; i < n; i++) { w[i] = 256 * (1 + check_rand_u64() % 64); all += w[i]; if (w[i] > mx) mx = w[i]; }
        d.weight_bytes = w; d.count = n; d.workspace = 256 * (check_rand_u64() % 8); d.max_slots = (int)(check_rand_u64() % 5);
        d.budget = d.workspace + mx + check_rand_u64() % (all + 1);
        if (lwo_plan_create(&d, &p) != LWO_SUCCESS) { bad++; continue; }
        if (!plan_valid(&d, &p)) bad++;
        opt = brute_best(&d);
        if (p.streamed_bytes > opt) { worse++; if (opt && (double)p.streamed_bytes / opt > worst) worst = (double)p.streamed_bytes / opt; }
        /* the ring keeps a second slot for overlap, so a plan may stream up to two slots more than
           the one-slot optimum, never more */
        if (p.streamed_bytes > opt + 2 * mx) bad++;
        lwo_plan_destroy(&p);
    }
    CHECK(bad == 0, "%d random plans invalid or far from optimal", bad);
    printf("  3000 random plans: %d stream more than the exhaustive optimum (worst ratio %.2f), keeping two slots for overlap\n", worse, worst);
    /* the streamed weights of one size are spread along the pass, not bunched at its end: 24 blocks
       of four weights (the streaming benchmark's shapes), half of the bytes resident */
    {
        uint64_t wb[96], total = 0;
        int b, k, i, run = 0, longest = 0, first_half = 0, streamed = 0;
        static const uint64_t shape_bytes[4] = { 9216ull * 3072 * 2, 3072ull * 3072 * 2, 12288ull * 3072 * 2, 3072ull * 12288 * 2 };
        for (b = 0; b < 24; b++) for (k = 0; k < 4; k++) { wb[b * 4 + k] = shape_bytes[k]; total += shape_bytes[k]; }
        memset(&d, 0, sizeof d);
        d.weight_bytes = wb; d.count = 96; d.budget = total / 2; d.max_slots = 4;
        CHECK_EQ_INT(lwo_plan_create(&d, &p), LWO_SUCCESS);
        for (i = 0; i < 96; i++) {
            if (!p.resident[i]) { streamed++; if (i < 48) first_half++; }
            /* runs counted over the large (up, down) weights only: the others may all stream */
            if (i % 4 >= 2) { run = p.resident[i] ? 0 : run + 1; if (run > longest) longest = run; }
        }
        printf("  spread: %d of 96 weights streamed, %d of them in the first half of the pass; longest run of streamed up/down weights %d\n",
               streamed, first_half, longest);
        CHECK(streamed > 0 && first_half * 3 >= streamed && first_half * 3 <= 2 * streamed,
              "the streamed weights are spread over the pass (%d of %d in its first half)", first_half, streamed);
        CHECK(longest <= 4, "no long stretch of streamed large weights (longest %d)", longest);
        lwo_plan_destroy(&p);
    }
    timed_tests();
    must_stream_tests();
    reserve_tests();
    return CHECK_SUMMARY();
}

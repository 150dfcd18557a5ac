/* The streaming planner as pure host code: invariants on random problems, hand-checked cases, the
   too-small budget error, and a comparison with the exhaustive optimum on small problems. */
#define LWO_IMPLEMENTATION
#include "../lwo.h"
#include <math.h>
#include "check.h"

/* Every plan must fit the budget, stream each non-resident weight through a slot large enough,
   have a ring whenever something streams, and give that ring the room no resident weight takes. */
static int plan_valid(const lwo_plan_desc *d, const lwo_plan *p) {
    size_t i;
    uint64_t res = 0, str = 0;
    for (i = 0; i < d->count; i++) {
        uint64_t sz = (d->weight_bytes[i] + 255) / 256 * 256;
        if (p->resident[i]) res += sz;
        else { str += sz; if (sz > p->slot_bytes) return 0; }
    }
    if (res != p->resident_bytes || str != p->streamed_bytes) return 0;
    if (str && (p->slots < 1 || p->slots > (d->max_slots ? d->max_slots : 4))) return 0;
    if (!str && p->slots != 0) return 0;
    if (res + (uint64_t)p->slots * p->slot_bytes + d->workspace > d->budget) return 0;
    /* the room left over widens the slots: less than one 256-byte step per slot stays unused */
    if (p->slots && d->budget - (res + (uint64_t)p->slots * p->slot_bytes + d->workspace) >= (uint64_t)p->slots * 256) return 0;
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

int main(void) {
    char err[512];
    lwo_plan p;
    lwo_plan_desc d;
    uint64_t w[64];
    int it, bad = 0, worse = 0;
    double worst = 1.0;
    check_seed("test_plan");
    memset(&d, 0, sizeof d);
    /* a 24-block stack like ANCHORS.md's: qkv, out, up, down per block (bf16 bytes) */
    {
        uint64_t blk[4] = { 3072ull * 9216 * 2, 3072ull * 3072 * 2, 3072ull * 12288 * 2, 12288ull * 3072 * 2 }, all = 0;
        int i;
        for (i = 0; i < 64 && i < 96; i++) w[i] = blk[i % 4];
        d.weight_bytes = w; d.count = 64; d.workspace = 256ull << 20;
        for (i = 0; i < 64; i++) all += w[i];
        d.budget = all + d.workspace;
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_SUCCESS);
        CHECK(p.slots == 0 && p.streamed_bytes == 0 && p.resident_bytes == all, "everything fits: all resident, no ring");
        lwo_plan_free(&p);
        d.budget = all / 2 + d.workspace;
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_SUCCESS);
        CHECK(plan_valid(&d, &p), "half budget: valid");
        CHECK(p.slots >= 2 && p.resident_bytes + p.slots * p.slot_bytes > all / 2 - blk[2], "half budget: the room is used (resident %llu, ring %d x %llu)",
              (unsigned long long)p.resident_bytes, p.slots, (unsigned long long)p.slot_bytes);
        lwo_plan_free(&p);
        d.budget = blk[2] + d.workspace; /* the minimum: one slot of the largest weight */
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_SUCCESS);
        CHECK(plan_valid(&d, &p) && p.slots == 1 && p.resident_bytes == 0 && p.slot_bytes == blk[2], "minimum budget: one slot, nothing resident");
        lwo_plan_free(&p);
        d.budget = blk[2] + d.workspace - 1;
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(err, "weight 2") && strstr(err, "1 bytes missing"), "the error names the weight and the bytes missing: %s", err);
        d.budget = 100; d.workspace = 200;
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_ERROR_OUT_OF_BUDGET);
        CHECK(strstr(err, "workspace") != NULL, "%s", err);
    }
    CHECK_EQ_INT(lwo_plan_make(NULL, &p, err, sizeof err), LWO_ERROR_INVALID_ARGUMENT);
    d.weight_bytes = NULL; d.count = 3;
    CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_ERROR_INVALID_ARGUMENT);
    /* random problems: always valid; near the exhaustive optimum */
    for (it = 0; it < 3000; it++) {
        size_t n = 1 + check_rand_u64() % 12, i;
        uint64_t all = 0, mx = 0, opt;
        for (i = 0; i < n; i++) { w[i] = 256 * (1 + check_rand_u64() % 64); all += w[i]; if (w[i] > mx) mx = w[i]; }
        d.weight_bytes = w; d.count = n; d.workspace = 256 * (check_rand_u64() % 8); d.max_slots = (int)(check_rand_u64() % 5);
        d.budget = d.workspace + mx + check_rand_u64() % (all + 1);
        if (lwo_plan_make(&d, &p, err, sizeof err) != LWO_SUCCESS) { bad++; continue; }
        if (!plan_valid(&d, &p)) bad++;
        opt = brute_best(&d);
        if (p.streamed_bytes > opt) { worse++; if (opt && (double)p.streamed_bytes / opt > worst) worst = (double)p.streamed_bytes / opt; }
        /* the ring keeps a second slot for overlap, so a plan may stream up to two slots more than
           the one-slot optimum, never more */
        if (p.streamed_bytes > opt + 2 * mx) bad++;
        lwo_plan_free(&p);
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
        CHECK_EQ_INT(lwo_plan_make(&d, &p, err, sizeof err), LWO_SUCCESS);
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
        lwo_plan_free(&p);
    }
    return CHECK_SUMMARY();
}

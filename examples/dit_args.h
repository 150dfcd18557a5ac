/* dit_args.h - the diffusion demo's command line (examples/diffuse.c): its options, their checks
   (a bad value is refused with a message naming it) and the usage text.
   Include after dit_model.h (dit_parse_u64). Everything here is static inline. */
#ifndef DIT_ARGS_H
#define DIT_ARGS_H
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIT_PATH_DEFAULT "examples/tiny_dit.safetensors"
#define DIT_MAX_SAMPLES 2000

typedef enum { DIT_VRAM_AUTO = 0, DIT_VRAM_ALL, DIT_VRAM_MIB } dit_vram_mode;
typedef struct dit_opts {
    const char *model, *png, *raw, *storage;
    int steps, classes, per_class, cpu, verbose;   /* steps/cfg 0 / NAN: from the file */
    double cfg;
    uint64_t seed;
    dit_vram_mode vram;
    uint64_t vram_mib;
    char lora[1024];                                /* --lora FILE[:strength]: the file ("" none) */
    double lora_strength;
} dit_opts;

static inline void dit_usage(FILE *f) {
    fprintf(f,
        "usage: diffuse [options]\n"
        "  --model PATH        checkpoint (default " DIT_PATH_DEFAULT ")\n"
        "  --storage FMT       bf16 | int8 (default) | fp8 (= fp8-w8a8 on cc >= 8.9, else fp8-upcast) |\n"
        "                      fp8-w8a8 | fp8-upcast\n"
        "  --vram auto|all|MiB the whole VRAM budget of lwo's arena. auto (default): activations and\n"
        "                      workspace plus about a quarter of the weights, so most weights stream;\n"
        "                      all: enough for every weight to stay resident\n"
        "  --steps N           Euler steps (default: the file's lwo.steps)\n"
        "  --cfg S             classifier-free guidance scale, 1 = off (default: the file's lwo.cfg_scale)\n"
        "  --seed N            noise seed (default 0)\n"
        "  --classes K         classes 0..K-1 (default 10)\n"
        "  --per-class N       samples per class (default 10); sample i has class i / N\n"
        "  --out PATH          PNG grid, a row per class (default out.png; '-' for none)\n"
        "  --raw PATH          float32 samples [K*N, 28, 28] (default samples.f32; '-' for none)\n"
        "  --lora FILE[:S]     a LoRA (kohya or lora_A/lora_B safetensors) on the model's linears at\n"
        "                      strength S (default 1), e.g. examples/tiny_dit_lora.safetensors:0.5\n"
        "  --cpu               the plain-C reference sampler (no GPU; slow: use few steps and samples)\n"
        "  --verbose           lwo's log at info level\n");
}

static inline int dit_parse_opts(int argc, char **argv, dit_opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->model = DIT_PATH_DEFAULT; o->png = "out.png"; o->raw = "samples.f32"; o->storage = "int8";
    o->classes = 10; o->per_class = 10; o->cfg = NAN;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        int takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { dit_usage(stdout); exit(0); }
        else if (!strcmp(a, "--cpu")) { o->cpu = 1; takes = 0; }
        else if (!strcmp(a, "--selftest")) { fprintf(stderr, "diffuse: --selftest is a test program now: make build/test_dit_selftest && build/test_dit_selftest\n"); return 0; }
        else if (!strcmp(a, "--verbose")) { o->verbose = 1; takes = 0; }
        else if (!v) { fprintf(stderr, "diffuse: %s needs a value (or is unknown)\n", a); return 0; }
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--out")) o->png = v;
        else if (!strcmp(a, "--raw")) o->raw = v;
        else if (!strcmp(a, "--storage")) {
            if (strcmp(v, "bf16") && strcmp(v, "int8") && strcmp(v, "fp8") && strcmp(v, "fp8-w8a8") && strcmp(v, "fp8-upcast")) {
                fprintf(stderr, "diffuse: --storage %s: want bf16, int8, fp8, fp8-w8a8 or fp8-upcast\n", v); return 0;
            }
            o->storage = v;
        } else if (!strcmp(a, "--vram")) {
            if (!strcmp(v, "auto")) o->vram = DIT_VRAM_AUTO;
            else if (!strcmp(v, "all")) o->vram = DIT_VRAM_ALL;
            else if (dit_parse_u64(v, 1, 1u << 24, &u)) { o->vram = DIT_VRAM_MIB; o->vram_mib = u; }
            else { fprintf(stderr, "diffuse: --vram %s: want auto, all or a number of MiB (1 .. 16777216)\n", v); return 0; }
        } else if (!strcmp(a, "--steps")) {
            if (!dit_parse_u64(v, 1, 100000, &u)) { fprintf(stderr, "diffuse: --steps %s: want an integer 1 .. 100000\n", v); return 0; }
            o->steps = (int)u;
        } else if (!strcmp(a, "--seed")) {
            if (!dit_parse_u64(v, 0, UINT64_MAX, &u)) { fprintf(stderr, "diffuse: --seed %s: want an unsigned 64-bit integer\n", v); return 0; }
            o->seed = u;
        } else if (!strcmp(a, "--classes")) {
            if (!dit_parse_u64(v, 1, 1000, &u)) { fprintf(stderr, "diffuse: --classes %s: want an integer 1 .. (the model's classes)\n", v); return 0; }
            o->classes = (int)u;
        } else if (!strcmp(a, "--per-class")) {
            if (!dit_parse_u64(v, 1, DIT_MAX_SAMPLES, &u)) { fprintf(stderr, "diffuse: --per-class %s: want an integer 1 .. %d\n", v, DIT_MAX_SAMPLES); return 0; }
            o->per_class = (int)u;
        } else if (!strcmp(a, "--lora")) {
            const char *colon = strrchr(v, ':');
            char *end;
            size_t n = strlen(v);
            o->lora_strength = 1.0;
            if (colon && colon[1]) {   /* FILE:S when what follows the last ':' is a number (C:\ stays a path) */
                double d;
                errno = 0;
                d = strtod(colon + 1, &end);
                if (!errno && !*end) {
                    if (!(d >= -100.0 && d <= 100.0)) { fprintf(stderr, "diffuse: --lora %s: want a strength -100 .. 100\n", v); return 0; }
                    o->lora_strength = d;
                    n = (size_t)(colon - v);
                }
            }
            if (n == 0 || n >= sizeof o->lora) { fprintf(stderr, "diffuse: --lora %s: want FILE or FILE:strength\n", v); return 0; }
            memcpy(o->lora, v, n);
            o->lora[n] = 0;
        } else if (!strcmp(a, "--cfg")) {
            char *end;
            double d;
            errno = 0;
            d = strtod(v, &end);
            if (errno || *end || !(d >= 0.0 && d <= 100.0)) { fprintf(stderr, "diffuse: --cfg %s: want a number 0 .. 100\n", v); return 0; }
            o->cfg = d;
        } else { fprintf(stderr, "diffuse: unknown option %s (--help lists them)\n", a); return 0; }
        i += takes;
    }
    if (o->cpu && o->lora[0]) { fprintf(stderr, "diffuse: --lora runs on the GPU path only (not with --cpu)\n"); return 0; }
    if ((uint64_t)o->classes * (uint64_t)o->per_class > DIT_MAX_SAMPLES) {
        fprintf(stderr, "diffuse: %d classes x %d per class is more than %d samples\n", o->classes, o->per_class, DIT_MAX_SAMPLES);
        return 0;
    }
    return 1;
}
#endif

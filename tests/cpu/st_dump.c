/* st_dump.c - what lwo reads from a .safetensors file, for tests/check_safetensors_py.sh.
     st_dump dump FILE...   one line per tensor: name<TAB>dtype<TAB>d0,d1,..<TAB>bytes<TAB>fnv1a64(bytes)
                            (dtype as lwo_dtype_name: "f32", "bf16", "f8_e4m3", ...),
                            then meta<TAB>key<TAB>value lines; exit 1 with the error when open fails
     st_dump write FILE     writes a fixed set of tensors (every dtype) that the script checks in Python */
#define LWO_IMPLEMENTATION
#include "../../lwo.h" /* first: it sets the POSIX feature level */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t fnv(const void *p, uint64_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h = 1469598103934665603ull, i;
    for (i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h;
}
int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "dump") == 0) {
        lwo_safetensors *f = NULL;
        lwo_safetensors_desc sd;
        size_t i;
        int j;
        memset(&sd, 0, sizeof sd);
        sd.paths = (const char *const *)(argv + 2);
        sd.path_count = (size_t)(argc - 2);
        if (lwo_safetensors_create(&sd, &f) != LWO_SUCCESS) {
            printf("error\t%s\n", lwo_safetensors_last_error(f));
            lwo_safetensors_destroy(f);
            return 1;
        }
        for (i = 0; i < lwo_safetensors_count(f); i++) {
            const lwo_safetensors_tensor *t = lwo_safetensors_tensor_at(f, i);
            printf("%s\t%s\t", t->name, lwo_dtype_name(t->dtype));
            for (j = 0; j < t->ndim; j++) printf(j ? ",%llu" : "%llu", (unsigned long long)t->shape[j]);
            printf("\t%llu\t%016llx\n", (unsigned long long)t->bytes, (unsigned long long)fnv(t->data, t->bytes));
        }
        for (i = 0; i < lwo_safetensors_metadata_count(f); i++)
            printf("meta\t%s\t%s\n", lwo_safetensors_metadata_key(f, i), lwo_safetensors_metadata_value(f, i));
        lwo_safetensors_destroy(f);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        /* every dtype a file holds, tensor d + 1 of dtype types[d] (tests/cpu/check_safetensors_py.sh
           reads tensor 2 as f32) */
        static const lwo_dtype types[] = { LWO_DTYPE_F64, LWO_DTYPE_F32, LWO_DTYPE_F16, LWO_DTYPE_BF16, LWO_DTYPE_F8_E4M3,
                                           LWO_DTYPE_F8_E5M2, LWO_DTYPE_I64, LWO_DTYPE_I32, LWO_DTYPE_I16, LWO_DTYPE_I8,
                                           LWO_DTYPE_U8, LWO_DTYPE_BOOL };
        enum { N = sizeof types / sizeof types[0] };
        static uint8_t data[N][4 * 6 * 8];
        static char names[N][96];
        uint64_t shape[3] = { 4, 6, 1 }, scalar[1] = { 0 };
        lwo_safetensors_write_tensor w[N + 2];
        lwo_safetensors_write_desc wd;
        const char *mk[2] = { "format", "lwo.note" }, *mv[2] = { "pt", "written by lwo \xc3\xa9" };
        int d, k;
        memset(w, 0, sizeof w);
        for (d = 1; d <= N; d++) {
            lwo_dtype t = types[d - 1];
            size_t es = lwo_dtype_size(t), nb = 24 * es;
            for (k = 0; k < (int)nb; k++) data[d - 1][k] = (uint8_t)(k * 37 + d * 11);
            if (t == LWO_DTYPE_BOOL) for (k = 0; k < (int)nb; k++) data[d - 1][k] &= 1;
            if (t == LWO_DTYPE_F8_E4M3 || t == LWO_DTYPE_F8_E5M2) for (k = 0; k < (int)nb; k++) data[d - 1][k] &= 0x3f; /* finite */
            snprintf(names[d - 1], sizeof names[0], "model.diffusion_model.blocks.%d.attn.qkv.weight", d);
            w[d - 1].name = names[d - 1];
            w[d - 1].dtype = t;
            w[d - 1].ndim = 3;
            w[d - 1].shape = shape;
            w[d - 1].data = data[d - 1];
            w[d - 1].bytes = nb;
        }
        w[N].name = "scalar"; w[N].dtype = LWO_DTYPE_F32; w[N].ndim = 0; w[N].data = data[1]; w[N].bytes = 4;
        w[N + 1].name = "empty"; w[N + 1].dtype = LWO_DTYPE_F16; w[N + 1].ndim = 1; w[N + 1].shape = scalar; w[N + 1].bytes = 0;
        memset(&wd, 0, sizeof wd);
        wd.path = argv[2]; wd.tensors = w; wd.tensor_count = N + 2; wd.meta_keys = mk; wd.meta_values = mv; wd.meta_count = 2;
        if (lwo_safetensors_write(&wd) != LWO_SUCCESS) {
            printf("error\t%s\n", wd.error);
            return 1;
        }
        return 0;
    }
    fprintf(stderr, "usage: st_dump dump FILE... | st_dump write FILE\n");
    return 2;
}

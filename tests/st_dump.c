/* st_dump.c - what lwo reads from a .safetensors file, for tests/check_safetensors_py.sh.
     st_dump dump FILE...   one line per tensor: name<TAB>dtype<TAB>d0,d1,..<TAB>bytes<TAB>fnv1a64(bytes),
                            then meta<TAB>key<TAB>value lines; exit 1 with the error when open fails
     st_dump write FILE     writes a fixed set of tensors (every dtype) that the script checks in Python */
#define LWO_IMPLEMENTATION
#include "../lwo.h" /* first: it sets the POSIX feature level */
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
        size_t i;
        int j;
        if (lwo_safetensors_open_many((const char *const *)(argv + 2), (size_t)(argc - 2), &f) != LWO_SUCCESS) {
            printf("error\t%s\n", lwo_safetensors_error(f));
            lwo_safetensors_close(f);
            return 1;
        }
        for (i = 0; i < lwo_safetensors_count(f); i++) {
            const lwo_st_tensor *t = lwo_safetensors_tensor(f, i);
            printf("%s\t%s\t", t->name, lwo_st_dtype_name(t->dtype));
            for (j = 0; j < t->ndim; j++) printf(j ? ",%llu" : "%llu", (unsigned long long)t->shape[j]);
            printf("\t%llu\t%016llx\n", (unsigned long long)t->bytes, (unsigned long long)fnv(t->data, t->bytes));
        }
        for (i = 0; i < lwo_safetensors_metadata_count(f); i++)
            printf("meta\t%s\t%s\n", lwo_safetensors_metadata_key(f, i), lwo_safetensors_metadata_value(f, i));
        lwo_safetensors_close(f);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        enum { N = LWO_ST_DTYPE_COUNT - 1 };
        static uint8_t data[N][4 * 6 * 8];
        static char names[N][96];
        uint64_t shape[3] = { 4, 6, 1 }, scalar[1] = { 0 };
        lwo_st_write_tensor w[N + 2];
        const char *mk[2] = { "format", "lwo.note" }, *mv[2] = { "pt", "written by lwo \xc3\xa9" };
        char err[256];
        int d, k;
        memset(w, 0, sizeof w);
        for (d = 1; d <= N; d++) {
            size_t es = lwo_st_dtype_size((lwo_st_dtype)d), nb = 24 * es;
            for (k = 0; k < (int)nb; k++) data[d - 1][k] = (uint8_t)(k * 37 + d * 11);
            if (d == LWO_ST_BOOL) for (k = 0; k < (int)nb; k++) data[d - 1][k] &= 1;
            if (d == LWO_ST_F8_E4M3 || d == LWO_ST_F8_E5M2) for (k = 0; k < (int)nb; k++) data[d - 1][k] &= 0x3f; /* finite */
            snprintf(names[d - 1], sizeof names[0], "model.diffusion_model.blocks.%d.attn.qkv.weight", d);
            w[d - 1].name = names[d - 1];
            w[d - 1].dtype = (lwo_st_dtype)d;
            w[d - 1].ndim = 3;
            w[d - 1].shape = shape;
            w[d - 1].data = data[d - 1];
            w[d - 1].bytes = nb;
        }
        w[N].name = "scalar"; w[N].dtype = LWO_ST_F32; w[N].ndim = 0; w[N].data = data[1]; w[N].bytes = 4;
        w[N + 1].name = "empty"; w[N + 1].dtype = LWO_ST_F16; w[N + 1].ndim = 1; w[N + 1].shape = scalar; w[N + 1].bytes = 0;
        if (lwo_safetensors_write(argv[2], w, N + 2, mk, mv, 2, err, sizeof err) != LWO_SUCCESS) {
            printf("error\t%s\n", err);
            return 1;
        }
        return 0;
    }
    fprintf(stderr, "usage: st_dump dump FILE... | st_dump write FILE\n");
    return 2;
}

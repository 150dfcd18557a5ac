/* fuzz_safetensors.c - libFuzzer target for the safetensors reader (open from memory, then every
   accessor, the quant conventions and small conversions).
     clang -fsanitize=fuzzer,address,undefined tests/fuzz_safetensors.c -lm -o build/fuzz_safetensors
   With -DLWO_FUZZ_MAIN it is a plain program that replays the files named on its command line. */
#define LWO_IMPLEMENTATION
#include "../lwo.h" /* first: it sets the POSIX feature level */
#include <stdint.h>
#include <stddef.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lwo_safetensors *f = NULL;
    lwo_result r = lwo_safetensors_open_memory(data, size, &f);
    if (r == LWO_SUCCESS) {
        size_t i, n = lwo_safetensors_count(f);
        for (i = 0; i < n; i++) {
            const lwo_st_tensor *t = lwo_safetensors_tensor(f, i);
            lwo_st_quant q;
            volatile uint8_t sink = 0;
            if (lwo_safetensors_find(f, t->name) != t) __builtin_trap();
            if (t->bytes) sink ^= ((const uint8_t *)t->data)[t->bytes - 1];
            (void)sink;
            (void)lwo_safetensors_quant_info(f, t->name, &q);
            if (t->numel <= 4096) {
                lwo_st_converted c;
                lwo__st_prep p;
                lwo_format lf;
                int fmt;
                for (fmt = 0; fmt < (int)LWO_STORE_FORMAT_COUNT; fmt++) {
                    if (lwo_safetensors_convert(t, (lwo_store_format)fmt, NULL, 0, NULL, 0, &c) == LWO_SUCCESS)
                        lwo_st_converted_free(&c);
                    (void)lwo_safetensors_weight_format(f, t->name, (lwo_store_format)fmt, &lf);
                }
                /* what the weight loader would hand lwo_weight_create (no GPU needed) */
                for (fmt = 0; fmt < (int)LWO_FORMAT_COUNT; fmt++) {
                    if (lwo__st_weight_prep(f, t->name, (lwo_format)fmt, (lwo_placement)(fmt % 3), &p) == LWO_SUCCESS) {
                        if (p.d.rows * p.d.cols != t->numel || !p.d.data) __builtin_trap();
                        if (p.zero_copy && p.d.data != t->data) __builtin_trap();
                    } else if (!lwo_safetensors_error(f)[0]) {
                        __builtin_trap();   /* every failure says why */
                    }
                    lwo__st_prep_free(&p);
                }
            }
        }
        for (i = 0; i < lwo_safetensors_metadata_count(f); i++)
            if (lwo_safetensors_metadata_find(f, lwo_safetensors_metadata_key(f, i)) != lwo_safetensors_metadata_value(f, i))
                __builtin_trap();
    } else if (f && !lwo_safetensors_error(f)[0]) {
        __builtin_trap();   /* every failure says why */
    }
    lwo_safetensors_close(f);
    return 0;
}

#ifdef LWO_FUZZ_MAIN
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int i, n = 0;
    for (i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb");
        long sz;
        uint8_t *b;
        if (!fp) { printf("FAIL cannot open %s\n", argv[i]); return 1; }
        fseek(fp, 0, SEEK_END); sz = ftell(fp); fseek(fp, 0, SEEK_SET);
        b = (uint8_t *)malloc(sz > 0 ? (size_t)sz : 1);
        if (sz > 0 && fread(b, 1, (size_t)sz, fp) != (size_t)sz) { printf("FAIL cannot read %s\n", argv[i]); return 1; }
        fclose(fp);
        LLVMFuzzerTestOneInput(b, (size_t)sz);
        free(b);
        n++;
    }
    printf("replayed %d inputs\n", n);
    return 0;
}
#endif

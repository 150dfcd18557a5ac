/* Writes lwo's CPU codecs as raw tables for tests/cpu/check_mldtypes.py to compare with ml_dtypes:
   decode of all 256 codes of both fp8 formats (f32 bits), encode of all 65536 bf16 values to both
   fp8 formats, and f32 -> bf16 / f16 of the given random f32 bit patterns. */
#define LWO_IMPLEMENTATION
#include "../../lwo.h"
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *in, *out;
    unsigned i;
    uint32_t u;
    if (argc != 3 || !(in = fopen(argv[1], "rb")) || !(out = fopen(argv[2], "wb"))) { fprintf(stderr, "usage: dump_codecs in.f32 out.bin\n"); return 2; }
    for (i = 0; i < 512; i++) { float f = lwo_ref_fp8_to_f32((uint8_t)i, i < 256 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_F8_E5M2); fwrite(&f, 4, 1, out); }
    for (i = 0; i < 131072; i++) {
        uint8_t c = lwo_ref_f32_to_fp8(lwo_ref_bf16_to_f32((uint16_t)i), i < 65536 ? LWO_DTYPE_F8_E4M3 : LWO_DTYPE_F8_E5M2);
        fwrite(&c, 1, 1, out);
    }
    while (fread(&u, 4, 1, in) == 1) {
        float f;
        uint16_t b, h;
        memcpy(&f, &u, 4);
        b = lwo_ref_f32_to_bf16(f); h = lwo_ref_f32_to_f16(f);
        fwrite(&b, 2, 1, out); fwrite(&h, 2, 1, out);
    }
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}

/* png.h - a minimal PNG writer for the diffusion demo (examples/diffuse.c): 8-bit grayscale, the
   zlib stream as stored (uncompressed) deflate blocks, CRC-32 and Adler-32 computed here; and a
   grid of samples in [-1, 1] drawn as one such image. No dependencies beyond the C library.
   Everything here is static inline. */
#ifndef DIT_PNG_H
#define DIT_PNG_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t png_crc(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t table[256], c;
    size_t i;
    int k;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    crc = ~crc;
    for (i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static inline void png_put_be32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v; }

static inline int png_chunk(FILE *f, const char *type, const unsigned char *data, size_t n) {
    unsigned char hdr[8], tail[4];
    uint32_t crc;
    png_put_be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    crc = png_crc(png_crc(0, hdr + 4, 4), data, n);
    png_put_be32(tail, crc);
    return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4;
}

/* An 8-bit grayscale PNG of w x h pixels; the zlib stream is stored blocks (no compression). */
static inline int png_write(const char *path, const unsigned char *pix, int w, int h) {
    size_t raw = (size_t)h * (w + 1), nblk = raw / 65535 + 1, zn = 2 + raw + 5 * nblk + 4, i, at = 0, pos;
    unsigned char *z = (unsigned char *)malloc(zn), ihdr[13];
    uint32_t a1 = 1, a2 = 0;
    FILE *f;
    int ok;
    if (!z) return 0;
    z[at++] = 0x78; z[at++] = 0x01;               /* deflate, 32K window, no dictionary, check bits */
    for (pos = 0, i = 0; i < nblk; i++) {
        size_t len = raw - pos < 65535 ? raw - pos : 65535, k;
        z[at++] = (unsigned char)(i + 1 == nblk);   /* BFINAL, BTYPE 00 */
        z[at++] = (unsigned char)len; z[at++] = (unsigned char)(len >> 8);
        z[at++] = (unsigned char)~len; z[at++] = (unsigned char)(~len >> 8);
        for (k = 0; k < len; k++, pos++) {
            size_t yy = pos / (w + 1), xx = pos % (w + 1);
            unsigned char v = xx == 0 ? 0 : pix[yy * w + xx - 1];   /* filter byte 0 per scanline */
            z[at++] = v;
            a1 = (a1 + v) % 65521; a2 = (a2 + a1) % 65521;
        }
    }
    png_put_be32(z + at, (a2 << 16) | a1); at += 4;
    png_put_be32(ihdr, (uint32_t)w); png_put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8; ihdr[9] = 0; ihdr[10] = 0; ihdr[11] = 0; ihdr[12] = 0;   /* 8-bit gray, no interlace */
    f = fopen(path, "wb");
    if (!f) { free(z); return 0; }
    ok = fwrite("\x89PNG\r\n\x1a\n", 1, 8, f) == 8 && png_chunk(f, "IHDR", ihdr, 13) && png_chunk(f, "IDAT", z, at) && png_chunk(f, "IEND", NULL, 0);
    ok = (fclose(f) == 0) && ok;
    free(z);
    return ok;
}

/* The samples as a grid: a row per class, a column per sample, 2-pixel white borders, 3x zoom. */
static inline int png_write_grid(const char *path, const float *s, int classes, int per_class, int img) {
    const int pad = 2, zoom = 3, cell = img + pad;
    int W = (per_class * cell + pad) * zoom, H = (classes * cell + pad) * zoom, x, y, ok;
    unsigned char *pix = (unsigned char *)malloc((size_t)W * H);
    if (!pix) return 0;
    for (y = 0; y < H; y++) for (x = 0; x < W; x++) {
        int gx = x / zoom, gy = y / zoom, cx = gx % cell - pad, cy = gy % cell - pad, c = gx / cell, r = gy / cell;
        unsigned char v = 255;
        if (cx >= 0 && cy >= 0 && c < per_class && r < classes) {
            double f = ((double)s[((size_t)r * per_class + c) * img * img + (size_t)cy * img + cx] + 1.0) * 127.5 + 0.5;
            v = (unsigned char)(f < 0 ? 0 : f > 255 ? 255 : f);
        }
        pix[(size_t)y * W + x] = v;
    }
    ok = png_write(path, pix, W, H);
    free(pix);
    return ok;
}
#endif

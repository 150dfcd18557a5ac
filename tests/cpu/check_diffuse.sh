#!/usr/bin/env bash
# The diffusion demo without a GPU: bad options are refused with a message (exit 2); the GPU path
# exits 1 with lwo's message, not a crash; --cpu (the plain-C reference sampler) is deterministic,
# writes float32 samples the size the script reads, and a PNG that a standard decoder accepts
# (every CRC, the zlib stream and its Adler-32 checked) with the pixels of those samples.
set -u
B=${1:-build/diffuse}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
p=0; f=0
ok() { if [ "$1" -eq 0 ]; then p=$((p+1)); else f=$((f+1)); echo "FAIL: $2"; fi; }

for bad in "--steps 0" "--steps x" "--storage fp4" "--vram lots" "--cfg nan" "--classes 11" "--per-class 0" "--frobnicate" "--seed" "--selftest" \
           "--lora" "--lora a.safetensors:500" "--lora :0.5" "--cpu --lora examples/tiny_dit_lora.safetensors"; do
  out=$($B $bad 2>&1); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q 'diffuse: '; ok $? "'diffuse $bad' exited $rc with: $(echo "$out" | head -n 1)"
done
out=$($B --model "$W/none.safetensors" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'LWO_ERROR_IO'; ok $? "a missing model: exit $rc, $out"
out=$($B --lora "$W/none.safetensors:0.5" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'none.safetensors: LWO_ERROR_IO'; ok $? "a missing LoRA: exit $rc, $out"

if [ -e /dev/nvidiactl ] || ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  echo "a GPU driver is present: the no-GPU check is skipped"
else
  out=$($B --out "$W/g.png" --raw "$W/g.f32" 2>&1); rc=$?
  [ $rc -eq 1 ] && echo "$out" | grep -qE 'LWO_ERROR_(NO_DRIVER|STUB_DRIVER|NO_DEVICE)' && echo "$out" | grep -q 'libcuda' && [ ! -e "$W/g.png" ]; ok $? "no GPU: exit $rc, $out"
  echo "$out" | grep LWO_ERROR
fi

# --cpu: one class, one sample (and its CFG twin), one step: ~2 s
$B --cpu --classes 2 --per-class 1 --steps 1 --out "$W/a.png" --raw "$W/a.f32" >"$W/a.log" 2>&1; rc=$?
ok $rc "--cpu exited $rc: $(cat "$W/a.log")"
$B --cpu --classes 2 --per-class 1 --steps 1 --out - --raw "$W/b.f32" >/dev/null 2>&1
cmp -s "$W/a.f32" "$W/b.f32"; ok $? "--cpu is deterministic"
[ "$(stat -c %s "$W/a.f32" 2>/dev/null)" = $((2 * 28 * 28 * 4)) ]; ok $? "raw samples are 2 x 28 x 28 float32"
grep -q 'noise\[0,0,0,:4\] = -0.4527577 2.650606 -0.9886041 0.2524627' "$W/a.log"; ok $? "seed 0 noise starts as the script's: $(grep -o 'noise.*' "$W/a.log")"
python3 - "$W/a.png" "$W/a.f32" <<'PY'
import struct, sys, zlib
png, raw = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "signature"
pos, chunks = 8, []
while pos < len(png):
    n, = struct.unpack(">I", png[pos:pos + 4]); typ = png[pos + 4:pos + 8]; data = png[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(typ + data) & 0xffffffff == crc, "CRC of %r" % typ
    chunks.append((typ, data)); pos += 12 + n
assert [c[0] for c in chunks] == [b"IHDR", b"IDAT", b"IEND"], [c[0] for c in chunks]
w, h, depth, color = struct.unpack(">IIBB", chunks[0][1][:10])
assert (depth, color) == (8, 0)
pix = zlib.decompress(chunks[1][1])   # checks the Adler-32
assert len(pix) == h * (w + 1) and all(pix[y * (w + 1)] == 0 for y in range(h))
vals = struct.unpack("<%df" % (len(raw) // 4), raw)
assert (w, h) == ((1 * 30 + 2) * 3, (2 * 30 + 2) * 3), (w, h)
for s in range(2):                     # row per class, 2-pixel borders, 3x zoom
    for y in range(28):
        for x in range(28):
            v = vals[s * 784 + y * 28 + x]
            want = int(min(max((v + 1) * 127.5 + 0.5, 0), 255))
            gy, gx = (s * 30 + 2 + y) * 3 + 1, (2 + x) * 3 + 1
            assert pix[gy * (w + 1) + 1 + gx] == want, (s, y, x, pix[gy * (w + 1) + 1 + gx], want)
print("png ok: %dx%d" % (w, h))
PY
ok $? "the PNG decodes to the samples"
echo "$p passed, $f failed"
[ $f -eq 0 ]

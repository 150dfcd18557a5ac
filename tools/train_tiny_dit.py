#!/usr/bin/env python3
"""Tiny class-conditional diffusion transformer (DiT) on Fashion-MNIST for the lwo demo (issue 7).

Modes
-----
  train (default):
      python3 tools/train_tiny_dit.py --data .data/fashion-mnist \
          --out examples/tiny_dit.safetensors --time-budget 180
      -> trains the DiT (rectified flow) for --time-budget seconds, exports the EMA weights as
         bf16 safetensors, trains an independent CNN classifier (<= --cls-budget s), runs the
         float32 reference sampler on the *exported* file, scores it, prints a summary table.
  --sample-ref:   load --out, write --ref-out (raw float32) + PNG grid, score if --classifier exists
  --train-classifier:  only train the scoring classifier (<= --cls-budget s) -> --classifier-out
  --train-classifier-synthetic:  the scoring classifier WITHOUT the data set: draws
      --synthetic-per-class samples of each class from --out with the float32 reference sampler
      (same --steps / --cfg as the demo; noise from a stream disjoint from the demo's, see
      SYN_JUMP), holds out --synthetic-holdout of them, trains the same CNN on the rest
      (<= --cls-budget s) and saves it (weights float16) -> --classifier-out
      (default examples/tiny_dit_classifier.pt, the one --score falls back to)
  --train-lora:  a LoRA (issue 22) of the frozen --out (default examples/tiny_dit.safetensors) that
      draws class --lora-class (default 1, trouser) with INVERTED brightness (target -x0: white
      background, dark garment), every other class unchanged.  No data set: draws --lora-per-class
      samples of each class from --out with the float32 reference sampler (--steps / --cfg as the
      demo; noise seeded --seed + 2^41 draws, see LORA_JUMP), negates class --lora-class's, trains
      rank --lora-rank adapters (alpha --lora-alpha, default = rank) on attn.qkv, attn.proj,
      mlp.fc1, mlp.fc2 of every block with the rectified-flow loss of the DiT (logit-normal t,
      label drop --label-drop) for --lora-time-budget s -> --lora-out (default
      examples/tiny_dit_lora.safetensors), then runs --eval-lora.
          python3 tools/train_tiny_dit.py --train-lora --lora-time-budget 180
      LoRA file: for each adapted linear whose model weight is <base>.weight (e.g.
      blocks.0.attn.qkv.weight): <base>.lora_down.weight [rank, in] bf16, <base>.lora_up.weight
      [out, rank] bf16, <base>.alpha scalar (shape []) float32.  Applied at strength s:
          W' = W + s * (alpha / rank) * up @ down      (rank = rows of down; biases unchanged)
      __metadata__: lwo.base ("tiny-dit-v1"), lwo.lora_class, lwo.lora_rank, lwo.lora_alpha,
      lwo.lora_target ("class N drawn with inverted brightness"), lwo.lora_modules,
      lwo.lora_formula, lwo.lora_train.
  --eval-lora:    the demo's reference set (--seed, --per-class, --steps, --cfg) sampled in float32
      from --out without and with --lora-out merged (float32, from the file's bf16 tensors) at each
      --lora-strength (default 1.0; several allowed): per-class mean pixel, RMS change and classifier
      accuracy (examples/tiny_dit_classifier.pt by default); the first strength's samples ->
      --lora-ref-out (default build/ref_lora.f32, raw float32 like --ref-out) + build/ref_lora.png.
  --score F.f32|F.png --classifier build/fmnist_classifier.pt
      prints "[score] per class: ...", "per-class accuracy: 0:100.0 ... 9:100.0 min 90.0" and
      "F: N samples, X% classified as their class"; a .png is the demo's grid (8-bit)
  --compare A.f32 B.f32          relative L2 ||A-B|| / ||B|| (and max abs diff)
  --smoke:        tiny step counts / subsets, proves the pipeline end to end on CPU
                  (writes to build/smoke_* unless paths are given explicitly).

Data: the four IDX .gz files of Fashion-MNIST in --data (parsed with gzip + numpy).
Pixels: x = u8 / 127.5 - 1, i.e. in [-1, 1]; image layout [C=1, H=28, W=28].

Architecture "tiny-dit-v1" (defaults: D=hidden=256, depth=6, heads=4, head_dim=64, patch p=2,
image 28x28x1, tokens T=(28/p)^2=196, token dim P=p*p*C=4, MLP hidden 4*D=1024, 10 classes +
null class 10, LayerNorm eps=1e-6 without affine params).  All matmuls are nn.Linear:
y = x @ W^T + b with W stored [out, in].  Every op, in order (B = batch):

  inputs: x [B,1,28,28] float32 (the current noisy image x_t), t [B] float32 in [0,1],
          y [B] int class in 0..9, or 10 = null class (unconditional, for CFG)
  1. patchify: token n = r*G + c (G = 28/p, row-major over patch rows r / cols c); the token
     vector (length P) is ordered (py, px, ch): element (py*p + px)*C + ch = x[ch, r*p+py, c*p+px]
  2. h = x_embedder(tokens)                          Linear P->D          [B,T,D]
  3. h = h + pos_embed                               tensor `pos_embed` [T,D] (use the file's
     tensor; it is fixed 2-D sin-cos: with D4=D/4, w_k = 1/10000^(k/D4), k<D4, for token (r,c):
     dims [0,D4) = sin(c*w_k), [D4,2*D4) = cos(c*w_k), [2*D4,3*D4) = sin(r*w_k),
     [3*D4,D) = cos(r*w_k); computed in float64, stored bf16 like everything else)
  4. timestep embedding (float32): half=128, f_k = exp(-ln(10000) * k / 128), k=0..127,
     a_k = (1000*t) * f_k, e = [cos(a_0..a_127), sin(a_0..a_127)]   (cos FIRST)   [B,256]
     te = t_embedder.mlp.2( SiLU( t_embedder.mlp.0(e) ) )   Linear 256->D, SiLU, Linear D->D
  5. ye = y_embedder.embedding_table.weight[y]       row lookup in [11, D]
  6. c = te + ye                                     [B,D];  sc = SiLU(c) (reused below)
  7. for each block i in 0..depth-1 (prefix blocks.i.):
       m = adaLN_modulation.1(sc)                    Linear D->6D, split in 6 chunks of D, in
           order: shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
       a = LN(h) * (1 + scale_msa) + shift_msa       (LN: mean / biased var over D, eps 1e-6,
                                                      (h-mean)/sqrt(var+eps), no affine)
       qkv = attn.qkv(a)                             Linear D->3D; output feature j:
           j in [0,D) = q, [D,2D) = k, [2D,3D) = v; inside each, head hh owns dims
           [hh*hd, (hh+1)*hd)   (hd = D/heads)
       per head: o = softmax(q k^T / sqrt(hd)) v     (softmax over keys; no mask)
       o = concat heads (head-major, [B,T,D]);  o = attn.proj(o)       Linear D->D
       h = h + gate_msa * o
       a = LN(h) * (1 + scale_mlp) + shift_mlp
       a = mlp.fc2( GELU_tanh( mlp.fc1(a) ) )        Linear D->4D, GELU, Linear 4D->D
           GELU_tanh(x) = 0.5 x (1 + tanh( sqrt(2/pi) (x + 0.044715 x^3) ))
       h = h + gate_mlp * a
  8. m = final_layer.adaLN_modulation.1(sc)          Linear D->2D, chunks: shift, scale
     h = LN(h) * (1 + scale) + shift
     o = final_layer.linear(h)                       Linear D->P  [B,T,P]
  9. unpatchify (inverse of 1) -> v [B,1,28,28] = predicted velocity (noise - x0)

Rectified flow: x_t = (1 - t) x0 + t * noise, the model predicts v = noise - x0.  Training:
t = sigmoid(N(0,1)) (logit-normal), MSE on v, class dropped to the null class with p = 0.1.

Sampler "rectified-flow-euler" (float32, weights upcast from the bf16 file):
  t_i = float32((steps - i) / steps) for i = 0..steps (t_0 = 1, t_steps = 0)
  x = noise;  for i in 0..steps-1:
      if cfg != 1:  v = v_u + cfg * (v_c - v_u),  v_c = model(x, t_i, y), v_u = model(x, t_i, 10)
      else:         v = model(x, t_i, y)
      x = x + (t_{i+1} - t_i) * v            (dt = t_{i+1} - t_i in float32, negative)
  output = clamp(x, -1, 1).   Defaults: steps = 20, cfg = 2.0 (both in the file metadata).

Noise generator "splitmix64-boxmuller-v1" (numpy here; the C side reproduces it bit-exactly):
  splitmix64 with uint64 state = seed:  next(): state += 0x9E3779B97F4A7C15; z = state;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
      return z ^ (z >> 31)          (all mod 2^64; seed 0 -> first output 0xE220A8397B1DCDAF)
  uniform from draw z: u = ((z >> 11) + 0.5) * 2^-53     (float64, strictly inside (0,1))
  normal n (n = 0,1,2,...) uses draws 2n (u1) and 2n+1 (u2), only the cosine branch:
      g = sqrt(-2 ln u1) * cos(2 pi u2)     in float64, then cast to float32 (round to nearest)
  Order of n: sample-major, then channel, row, col: n = ((s*C + ch)*H + row)*W + col.
  Reference set: 100 samples, sample s has class s // 10, default seed 0.

Outputs: raw float32 little-endian [N, 28, 28] files (class-major: sample i has class
i // (N/10)); scoring = fraction whose classifier argmax equals their class.

File (safetensors, every tensor bf16, PyTorch names such as blocks.0.attn.qkv.weight,
pos_embed, y_embedder.embedding_table.weight), __metadata__ string values: lwo.arch =
"tiny-dit-v1", lwo.hidden, lwo.depth, lwo.heads, lwo.head_dim, lwo.patch, lwo.image_size,
lwo.channels, lwo.num_classes (10), lwo.null_class (10), lwo.mlp_ratio, lwo.mlp_hidden,
lwo.gelu ("tanh"), lwo.eps ("1e-06"), lwo.time_embed_dim ("256"), lwo.time_scale ("1000"),
lwo.time_max_period ("10000"), lwo.time_freq (convention text), lwo.pos_embed, lwo.patch_order,
lwo.sampler ("rectified-flow-euler"), lwo.prediction ("velocity: noise - x0"), lwo.steps,
lwo.cfg_scale, lwo.noise ("splitmix64-boxmuller-v1"), lwo.pixel_range, lwo.train_steps,
lwo.train_loss, lwo.ema_decay.
"""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # --compare works without torch
    torch = None

ARCH = "tiny-dit-v1"
NOISE = "splitmix64-boxmuller-v1"
TIME_DIM = 256
TIME_SCALE = 1000.0
MAX_PERIOD = 10000.0
EPS = 1e-6
NUM_CLASSES = 10
IMG = 28
CH = 1


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------- data
def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if (magic >> 8) != 0x08:  # unsigned byte
        raise ValueError(f"{path}: unexpected IDX magic {magic:#x}")
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size mismatch")
    return arr.reshape(dims).copy()


def load_fmnist(d):
    def p(name):
        return os.path.join(d, name)
    xtr = read_idx(p("train-images-idx3-ubyte.gz"))
    ytr = read_idx(p("train-labels-idx1-ubyte.gz"))
    xte = read_idx(p("t10k-images-idx3-ubyte.gz"))
    yte = read_idx(p("t10k-labels-idx1-ubyte.gz"))
    assert xtr.shape == (60000, 28, 28) and ytr.shape == (60000,), (xtr.shape, ytr.shape)
    assert xte.shape == (10000, 28, 28) and yte.shape == (10000,), (xte.shape, yte.shape)
    return xtr, ytr, xte, yte


# ----------------------------------------------------------------------------- noise generator
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)


def splitmix64_draws(seed, count):
    """Draws 1..count of splitmix64 seeded with `seed` (state_k = seed + k*GOLDEN, k>=1)."""
    with np.errstate(over="ignore"):
        k = np.arange(1, count + 1, dtype=np.uint64)
        z = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + k * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * M1
        z = (z ^ (z >> np.uint64(27))) * M2
        z = z ^ (z >> np.uint64(31))
    return z


def gen_noise(seed, n_samples, c=CH, h=IMG, w=IMG):
    """float32 [n_samples, c, h, w] standard normals, see module docstring."""
    n = n_samples * c * h * w
    z = splitmix64_draws(seed, 2 * n)
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0 ** -53)
    u1, u2 = u[0::2], u[1::2]
    g = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    return g.astype(np.float32).reshape(n_samples, c, h, w)


def selftest_noise():
    z = splitmix64_draws(0, 3)
    assert int(z[0]) == 0xE220A8397B1DCDAF, hex(int(z[0]))
    assert int(z[1]) == 0x6E789E6AA1B965F4, hex(int(z[1]))
    g = gen_noise(0, 100)
    assert abs(float(g.mean())) < 0.02 and abs(float(g.std()) - 1) < 0.02, (g.mean(), g.std())


# ----------------------------------------------------------------------------- model
def pos_embed_2d(d, g):
    d4 = d // 4
    assert d % 4 == 0
    w = 1.0 / (10000.0 ** (np.arange(d4, dtype=np.float64) / d4))
    r, c = np.meshgrid(np.arange(g, dtype=np.float64), np.arange(g, dtype=np.float64), indexing="ij")
    r, c = r.reshape(-1, 1), c.reshape(-1, 1)  # token n = r*g + c
    emb = np.concatenate([np.sin(c * w), np.cos(c * w), np.sin(r * w), np.cos(r * w)], axis=1)
    return emb.astype(np.float32)  # [g*g, d]


if torch is not None:

    def timestep_embedding(t):
        half = TIME_DIM // 2
        freqs = torch.exp(-math.log(MAX_PERIOD) *
                          torch.arange(half, dtype=torch.float32, device=t.device) / half)
        args = (t.float() * TIME_SCALE)[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class TimestepEmbedder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(TIME_DIM, d), nn.SiLU(), nn.Linear(d, d))

        def forward(self, t):
            return self.mlp(timestep_embedding(t))

    class LabelEmbedder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.embedding_table = nn.Embedding(NUM_CLASSES + 1, d)

        def forward(self, y):
            return self.embedding_table(y)

    class Attention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [B,H,T,hd]
            o = F.scaled_dot_product_attention(q, k, v)
            return self.proj(o.transpose(1, 2).reshape(b, t, d))

    class Mlp(nn.Module):
        def __init__(self, d, hidden):
            super().__init__()
            self.fc1 = nn.Linear(d, hidden)
            self.act = nn.GELU(approximate="tanh")
            self.fc2 = nn.Linear(hidden, d)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    def modulate(x, shift, scale):
        return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    class DiTBlock(nn.Module):
        def __init__(self, d, heads, mlp_ratio):
            super().__init__()
            self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=EPS)
            self.attn = Attention(d, heads)
            self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=EPS)
            self.mlp = Mlp(d, int(d * mlp_ratio))
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

        def forward(self, x, c):
            sm, cm, gm, sp, cp, gp = self.adaLN_modulation(c).chunk(6, dim=1)
            x = x + gm.unsqueeze(1) * self.attn(modulate(self.norm1(x), sm, cm))
            x = x + gp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), sp, cp))
            return x

    class FinalLayer(nn.Module):
        def __init__(self, d, out):
            super().__init__()
            self.norm_final = nn.LayerNorm(d, elementwise_affine=False, eps=EPS)
            self.linear = nn.Linear(d, out)
            self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))

        def forward(self, x, c):
            shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
            return self.linear(modulate(self.norm_final(x), shift, scale))

    class TinyDiT(nn.Module):
        def __init__(self, hidden=256, depth=6, heads=4, patch=2, mlp_ratio=4.0):
            super().__init__()
            assert IMG % patch == 0 and hidden % heads == 0 and hidden % 4 == 0
            self.hidden, self.depth, self.heads, self.patch, self.mlp_ratio = \
                hidden, depth, heads, patch, mlp_ratio
            self.grid = IMG // patch
            pdim = patch * patch * CH
            self.x_embedder = nn.Linear(pdim, hidden)
            self.register_buffer("pos_embed", torch.from_numpy(pos_embed_2d(hidden, self.grid)))
            self.t_embedder = TimestepEmbedder(hidden)
            self.y_embedder = LabelEmbedder(hidden)
            self.blocks = nn.ModuleList([DiTBlock(hidden, heads, mlp_ratio) for _ in range(depth)])
            self.final_layer = FinalLayer(hidden, pdim)
            self._init()

        def _init(self):
            def basic(m):
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)
            self.apply(basic)
            nn.init.normal_(self.y_embedder.embedding_table.weight, std=0.02)
            nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
            nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
            for blk in self.blocks:  # adaLN-zero
                nn.init.zeros_(blk.adaLN_modulation[1].weight)
                nn.init.zeros_(blk.adaLN_modulation[1].bias)
            nn.init.zeros_(self.final_layer.adaLN_modulation[1].weight)
            nn.init.zeros_(self.final_layer.adaLN_modulation[1].bias)
            nn.init.zeros_(self.final_layer.linear.weight)
            nn.init.zeros_(self.final_layer.linear.bias)

        def patchify(self, x):
            b, p, g = x.shape[0], self.patch, self.grid
            x = x.reshape(b, CH, g, p, g, p).permute(0, 2, 4, 3, 5, 1)  # b, r, c, py, px, ch
            return x.reshape(b, g * g, p * p * CH)

        def unpatchify(self, x):
            b, p, g = x.shape[0], self.patch, self.grid
            x = x.reshape(b, g, g, p, p, CH).permute(0, 5, 1, 3, 2, 4)  # b, ch, r, py, c, px
            return x.reshape(b, CH, IMG, IMG)

        def forward(self, x, t, y):
            h = self.x_embedder(self.patchify(x)) + self.pos_embed
            c = self.t_embedder(t) + self.y_embedder(y)
            for blk in self.blocks:
                h = blk(h, c)
            return self.unpatchify(self.final_layer(h, c))

    # ------------------------------------------------------------------------- classifier
    class FmnistCNN(nn.Module):
        """Independent scorer: input [B,1,28,28] in [-1,1] -> 10 logits."""
        def __init__(self):
            super().__init__()

            def cbr(i, o):
                return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]
            self.net = nn.Sequential(
                *cbr(1, 32), *cbr(32, 32), nn.MaxPool2d(2), nn.Dropout(0.25),
                *cbr(32, 64), *cbr(64, 64), nn.MaxPool2d(2), nn.Dropout(0.25),
                nn.Flatten(), nn.Linear(64 * 7 * 7, 256, bias=False), nn.BatchNorm1d(256),
                nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Linear(256, 10))

        def forward(self, x):
            return self.net(x)


# ----------------------------------------------------------------------------- helpers
def to_unit(x_u8_tensor):
    return x_u8_tensor.float().div_(127.5).sub_(1.0)


def pick_device(arg):
    if arg:
        return torch.device(arg)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def ensure_dir(path):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)


def metadata(model, args, steps_done, final_loss):
    return {
        "lwo.arch": ARCH,
        "lwo.hidden": str(model.hidden),
        "lwo.depth": str(model.depth),
        "lwo.heads": str(model.heads),
        "lwo.head_dim": str(model.hidden // model.heads),
        "lwo.patch": str(model.patch),
        "lwo.image_size": str(IMG),
        "lwo.channels": str(CH),
        "lwo.num_classes": str(NUM_CLASSES),
        "lwo.null_class": str(NUM_CLASSES),
        "lwo.mlp_ratio": str(model.mlp_ratio),
        "lwo.mlp_hidden": str(int(model.hidden * model.mlp_ratio)),
        "lwo.gelu": "tanh",
        "lwo.eps": repr(EPS),
        "lwo.time_embed_dim": str(TIME_DIM),
        "lwo.time_scale": str(int(TIME_SCALE)),
        "lwo.time_max_period": str(int(MAX_PERIOD)),
        "lwo.time_freq": "f_k=exp(-ln(10000)*k/128), k<128; a=1000*t*f_k; emb=[cos(a), sin(a)] (cos first)",
        "lwo.pos_embed": "tensor pos_embed [T,D]: 2d sin-cos, [sin(col*w),cos(col*w),sin(row*w),cos(row*w)], w_k=10000^(-k/(D/4))",
        "lwo.patch_order": "token n=r*G+c; vector element (py*p+px)*C+ch",
        "lwo.adaln_order": "block: shift_msa,scale_msa,gate_msa,shift_mlp,scale_mlp,gate_mlp; final: shift,scale",
        "lwo.sampler": "rectified-flow-euler",
        "lwo.prediction": "velocity: noise - x0 (x_t = (1-t) x0 + t noise)",
        "lwo.steps": str(args.steps),
        "lwo.cfg_scale": repr(float(args.cfg)),
        "lwo.noise": NOISE,
        "lwo.pixel_range": "[-1,1]",
        "lwo.train_steps": str(steps_done),
        "lwo.train_loss": f"{final_loss:.5f}",
        "lwo.ema_decay": repr(args.ema),
    }


def export(ema_model, path, meta):
    from safetensors.torch import save_file
    ensure_dir(path)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in ema_model.state_dict().items()}
    save_file(sd, path, metadata=meta)
    return os.path.getsize(path)


def load_exported(path, dev):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
    assert meta.get("lwo.arch") == ARCH, meta.get("lwo.arch")
    model = TinyDiT(hidden=int(meta["lwo.hidden"]), depth=int(meta["lwo.depth"]),
                    heads=int(meta["lwo.heads"]), patch=int(meta["lwo.patch"]),
                    mlp_ratio=float(meta["lwo.mlp_ratio"]))
    sd = {k: v.float() for k, v in load_file(path).items()}
    model.load_state_dict(sd, strict=True)
    return model.to(dev).eval(), meta


# ----------------------------------------------------------------------------- DiT training
def rf_step(model, opt, params, x0, y, lr, use_amp, dev):
    """One rectified-flow step (the loss of train_dit, the docstring's "Training"): t logit-normal,
    x_t = (1 - t) x0 + t noise, MSE against v = noise - x0, gradients clipped to norm 1. Returns the loss."""
    t = torch.sigmoid(torch.randn(x0.shape[0], device=dev))
    noise = torch.randn_like(x0)
    tb = t.view(-1, 1, 1, 1)
    xt = (1 - tb) * x0 + tb * noise
    for g in opt.param_groups:
        g["lr"] = lr
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_amp):
        pred = model(xt, t, y)
    loss = F.mse_loss(pred.float(), noise - x0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss


def train_dit(args, xtr, ytr, dev):
    import copy
    torch.manual_seed(args.train_seed)
    model = TinyDiT(args.hidden, args.depth, args.heads, args.patch, args.mlp_ratio).to(dev)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"[dit] params {nparams/1e6:.2f} M  hidden {args.hidden} depth {args.depth} heads {args.heads} "
        f"patch {args.patch} tokens {(IMG // args.patch) ** 2}  batch {args.batch}  device {dev}")
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)
    if dev.type == "cuda":
        opt_kw["fused"] = True
    opt = torch.optim.AdamW(model.parameters(), **opt_kw)
    params = [p for p in model.parameters()]
    ema_params = [p for p in ema.parameters()]

    X = torch.from_numpy(xtr).to(dev)  # uint8 [N,28,28]
    Y = torch.from_numpy(ytr.astype(np.int64)).to(dev)
    n = X.shape[0]
    use_amp = dev.type == "cuda"
    t0 = time.time()
    last_t, last_step = t0, 0
    step, loss_acc, loss_cnt, final_loss = 0, 0.0, 0, float("nan")
    while True:
        if args.max_steps and step >= args.max_steps:
            break
        if time.time() - t0 >= args.time_budget:
            break
        idx = torch.randint(0, n, (args.batch,), device=dev)
        x0 = to_unit(X[idx]).unsqueeze(1)
        y = Y[idx]
        y = torch.where(torch.rand(args.batch, device=dev) < args.label_drop,
                        torch.full_like(y, NUM_CLASSES), y)
        loss = rf_step(model, opt, params, x0, y, args.lr * min(1.0, (step + 1) / args.warmup), use_amp, dev)
        d = min(args.ema, (1 + step) / (10 + step))
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, params, 1.0 - d)
        loss_acc = loss_acc + loss.detach()
        loss_cnt += 1
        step += 1
        if step % args.log_every == 0:
            now = time.time()
            l = float(loss_acc) / loss_cnt
            final_loss = l
            log(f"[dit] step {step:6d}  loss {l:.4f}  {(step - last_step) / (now - last_t):7.1f} steps/s  "
                f"lr {lr:.2e}  t {now - t0:6.1f}s")
            last_t, last_step = now, step
            loss_acc, loss_cnt = 0.0, 0
    sync(dev)
    if loss_cnt:
        final_loss = float(loss_acc) / loss_cnt
    elapsed = time.time() - t0
    log(f"[dit] done: {step} steps in {elapsed:.1f}s, final loss {final_loss:.4f}")
    return ema, step, final_loss, elapsed


# ----------------------------------------------------------------------------- classifier
def fit_cnn(args, X, Y, epochs, eval_fn, dev, tag="cls"):
    """Trains a fresh FmnistCNN on X [N,1,28,28] float in [-1,1], Y [N] int64 (both on dev):
    AdamW + one-cycle LR, batch 256, label smoothing 0.05, random horizontal flips when
    --cls-augment; eval_fn(model) -> accuracy after every epoch; stops after the epoch that
    passes --cls-budget seconds."""
    torch.manual_seed(args.train_seed + 1)
    model = FmnistCNN().to(dev)
    n, bs = X.shape[0], 256
    steps_per_epoch = (n + bs - 1) // bs
    if n > 1 and n % bs == 1:  # a last batch of one would break BatchNorm1d in training mode
        steps_per_epoch -= 1
    total = steps_per_epoch * epochs
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=total, pct_start=0.2)
    t0 = time.time()
    done = 0
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(n, device=dev)
        for i in range(steps_per_epoch):
            idx = perm[i * bs:(i + 1) * bs]
            xb = X[idx]
            if args.cls_augment:  # random horizontal flip (label preserving for Fashion-MNIST)
                flip = torch.rand(xb.shape[0], device=dev) < 0.5
                xb = torch.where(flip.view(-1, 1, 1, 1), xb.flip(3), xb)
            loss = F.cross_entropy(model(xb), Y[idx], label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if done < total - 1:
                sched.step()
            done += 1
        sync(dev)
        acc = eval_fn(model)
        log(f"[{tag}] epoch {ep + 1}/{epochs}  loss {loss.item():.4f}  test acc {acc * 100:.2f}%  "
            f"t {time.time() - t0:.1f}s")
        if time.time() - t0 > args.cls_budget:
            log(f"[{tag}] time budget reached, stopping")
            break
    return model.eval(), eval_fn(model), time.time() - t0


def train_classifier(args, xtr, ytr, xte, yte, dev):
    X = to_unit(torch.from_numpy(xtr).to(dev)).unsqueeze(1)
    Y = torch.from_numpy(ytr.astype(np.int64)).to(dev)
    epochs = args.cls_epochs if args.cls_epochs else 5
    model, acc, secs = fit_cnn(args, X, Y, epochs, lambda m: eval_classifier(m, xte, yte, dev), dev)
    ensure_dir(args.classifier_out)
    torch.save({"arch": "fmnist-cnn-v1", "state_dict": model.state_dict()}, args.classifier_out)
    return model, acc, secs


@torch.no_grad() if torch is not None else (lambda f: f)
def classify(model, imgs, dev):
    """imgs: float32 numpy [N,28,28] in [-1,1] -> predicted labels numpy [N]."""
    model.eval()
    out = []
    for i in range(0, imgs.shape[0], 1000):
        xb = torch.from_numpy(np.ascontiguousarray(imgs[i:i + 1000])).to(dev).float().unsqueeze(1)
        out.append(model(xb).argmax(1).cpu().numpy())
    return np.concatenate(out)


def eval_classifier(model, xte, yte, dev):
    pred = classify(model, xte.astype(np.float32) / 127.5 - 1.0, dev)
    return float((pred == yte).mean())


def load_classifier(path, dev):
    ck = torch.load(path, map_location=dev, weights_only=True)
    model = FmnistCNN().to(dev)
    model.load_state_dict(ck["state_dict"])
    return model.eval()


def per_class_line(pred, labels):
    """The line shell scripts parse (tests/gpu/score_demo.sh):
    'per-class accuracy: 0:100.0 1:90.0 ... 9:100.0 min 90.0' (percent, one decimal)."""
    accs = [float((pred[labels == c] == c).mean()) * 100 if (labels == c).any() else float("nan")
            for c in range(NUM_CLASSES)]
    return ("per-class accuracy: " + " ".join(f"{c}:{a:.1f}" for c, a in enumerate(accs)) +
            f" min {min(accs):.1f}"), accs


def score_samples(cls_model, samples, dev, verbose=True):
    n = samples.shape[0]
    assert n % NUM_CLASSES == 0, n
    per = n // NUM_CLASSES
    labels = np.arange(n) // per
    pred = classify(cls_model, samples, dev)
    ok = pred == labels
    if verbose:
        pc = " ".join(f"{c}:{ok[labels == c].mean() * 100:.0f}%" for c in range(NUM_CLASSES))
        log(f"[score] per class: {pc}")
        log(per_class_line(pred, labels)[0])
    return float(ok.mean())


# ----------------------------------------------------------------------------- sampling
@torch.no_grad() if torch is not None else (lambda f: f)
def sample_euler(model, noise, labels, steps, cfg, dev):
    """Float32 Euler sampler (see docstring).  noise: float32 numpy [N,1,28,28]."""
    x = torch.from_numpy(noise).to(dev)
    y = torch.from_numpy(labels.astype(np.int64)).to(dev)
    n = x.shape[0]
    ynull = torch.full_like(y, NUM_CLASSES)
    ts = [np.float32((steps - i) / steps) for i in range(steps + 1)]
    for i in range(steps):
        t = torch.full((n,), float(ts[i]), dtype=torch.float32, device=dev)
        if cfg != 1.0:
            v2 = model(torch.cat([x, x]), torch.cat([t, t]), torch.cat([y, ynull]))
            vc, vu = v2[:n], v2[n:]
            v = vu + cfg * (vc - vu)
        else:
            v = model(x, t, y)
        dt = float(np.float32(ts[i + 1] - ts[i]))
        x = x + dt * v
    return x.clamp(-1.0, 1.0).squeeze(1).cpu().numpy().astype(np.float32)


def save_grid_png(samples, path, ncol=10):
    n = samples.shape[0]
    nrow = (n + ncol - 1) // ncol
    pad = 2
    H = nrow * (IMG + pad) + pad
    W = ncol * (IMG + pad) + pad
    grid = np.full((H, W), 255, dtype=np.uint8)
    img = np.clip((samples + 1.0) * 127.5 + 0.5, 0, 255).astype(np.uint8)
    for i in range(n):
        r, c = divmod(i, ncol)
        grid[pad + r * (IMG + pad): pad + r * (IMG + pad) + IMG,
             pad + c * (IMG + pad): pad + c * (IMG + pad) + IMG] = img[i]
    ensure_dir(path)
    try:
        from PIL import Image
        Image.fromarray(grid, mode="L").resize((W * 3, H * 3), Image.NEAREST).save(path)
        return path
    except ImportError:
        pgm = os.path.splitext(path)[0] + ".pgm"
        with open(pgm, "wb") as f:
            f.write(f"P5 {W} {H} 255\n".encode())
            f.write(grid.tobytes())
        return pgm


def run_reference(args, dev, cls_model=None):
    """Loads the EXPORTED bf16 file, samples 10 classes x 10 in float32, writes .f32 + PNG."""
    # plain float32 for the reference: no TF32 anywhere
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model, meta = load_exported(args.out, dev)
    steps = args.steps
    cfg = args.cfg
    n = NUM_CLASSES * args.per_class
    noise = gen_noise(args.seed, n)
    labels = np.arange(n) // args.per_class
    t0 = time.time()
    samples = sample_euler(model, noise, labels, steps, cfg, dev)
    sync(dev)
    dt = time.time() - t0
    ensure_dir(args.ref_out)
    samples.tofile(args.ref_out)
    png = save_grid_png(samples, os.path.splitext(args.ref_out)[0] + ".png")
    log(f"[ref] {n} samples, {steps} Euler steps, cfg {cfg}, seed {args.seed}, {dt:.2f}s -> "
        f"{args.ref_out} ({os.path.getsize(args.ref_out)} bytes), {png}")
    log(f"[ref] noise[0,0,0,:4] = {noise[0, 0, 0, :4].tolist()}  sample mean {samples.mean():.4f} "
        f"std {samples.std():.4f}")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    acc = None
    if cls_model is None and args.classifier and os.path.exists(args.classifier):
        cls_model = load_classifier(args.classifier, dev)
    if cls_model is not None:
        acc = score_samples(cls_model, samples, dev)
        log(f"[ref] class accuracy of reference samples: {acc * 100:.1f}% (target >= 80%)")
    return samples, acc, dt


# ----------------------------------------------------------------------------- synthetic classifier
SHIPPED_CLASSIFIER = "examples/tiny_dit_classifier.pt"
# Noise of the synthetic training set.  Same generator as the demo ("splitmix64-boxmuller-v1"),
# but a different stream position: the demo (and --sample-ref) with --seed s consumes splitmix64
# states s + k*GOLDEN for draws k = 1 .. 2*784*N (156,800 draws for its 100 samples).  The
# synthetic set is seeded with s + SYN_JUMP*GOLDEN (mod 2^64), so its draw k is the demo stream's
# draw SYN_JUMP + k: it starts 2^40 draws (~7e8 images) past the demo's first draw, so the two sets
# share no draw unless the demo draws more than 7e8 images.  Any *other* demo seed s' is a random-
# looking position (s'-s)*GOLDEN^-1 of that same cycle of 2^64: the chance that its draws reach
# the synthetic window (a few million draws) is ~1e-12.
SYN_JUMP = 1 << 40


def synthetic_noise_seed(seed):
    return (int(seed) + SYN_JUMP * int(GOLDEN)) & 0xFFFFFFFFFFFFFFFF


def sample_chunked(model, noise, labels, steps, cfg, dev, bsz, tag):
    out, t0 = [], time.time()
    for i in range(0, noise.shape[0], bsz):
        out.append(sample_euler(model, noise[i:i + bsz], labels[i:i + bsz], steps, cfg, dev))
        sync(dev)
        log(f"[{tag}] sampled {i + out[-1].shape[0]}/{noise.shape[0]}  t {time.time() - t0:.1f}s")
    return np.concatenate(out), time.time() - t0


def save_classifier_small(model, path, extra):
    """torch.save in load_classifier's format; weight tensors (>= 1024 elements) as float16,
    the rest (BatchNorm statistics, biases) float32.  load_state_dict casts back to float32."""
    sd = {k: (v.detach().half() if v.is_floating_point() and v.numel() >= 1024 else v.detach()).cpu()
          for k, v in model.state_dict().items()}
    ensure_dir(path)
    torch.save(dict({"arch": "fmnist-cnn-v1", "state_dict": sd}, **extra), path)
    return os.path.getsize(path)


def train_classifier_synthetic(args, dev):
    """The scoring classifier without the data set: FmnistCNN trained on the DiT's own float32
    reference samples (sample_euler: same sampler, --steps, --cfg as the demo) of each class."""
    T0 = time.time()
    if not args.synthetic_batch:  # large batches are slower per sample on a CPU (cache)
        args.synthetic_batch = 1000 if dev.type == "cuda" else 32
    if dev.type == "cuda":  # plain float32 samples, as run_reference makes them
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model, meta = load_exported(args.out, dev)
    per = args.synthetic_per_class
    n = NUM_CLASSES * per
    sseed = synthetic_noise_seed(args.seed)
    noise = gen_noise(sseed, n)
    demo0 = gen_noise(args.seed, 1)
    assert not np.array_equal(noise[0], demo0[0])
    labels = np.arange(n) % NUM_CLASSES  # interleaved: every chunk holds every class
    if (str(args.steps), float(args.cfg)) != (meta.get("lwo.steps"), float(meta.get("lwo.cfg_scale", "nan"))):
        log(f"[syn] WARNING: --steps {args.steps} --cfg {args.cfg} differ from the file's (the demo's defaults): "
            f"lwo.steps {meta.get('lwo.steps')}, lwo.cfg_scale {meta.get('lwo.cfg_scale')}")
    log(f"[syn] {args.out}: {n} samples ({per} per class), {args.steps} Euler steps, cfg {args.cfg}, "
        f"float32, noise {NOISE} seed {sseed:#x} (= --seed {args.seed} + 2^40 draws), device {dev}")
    samples, t_sample = sample_chunked(model, noise, labels, args.steps, args.cfg, dev,
                                       max(1, args.synthetic_batch), "syn")
    log(f"[syn] {n} samples in {t_sample:.1f}s  mean {samples.mean():.4f} std {samples.std():.4f}")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # held-out split: per class, a random args.synthetic_holdout of its samples (>= 1 when per >= 2)
    rng = np.random.default_rng(args.train_seed)
    hold = np.zeros(n, dtype=bool)
    for c in range(NUM_CLASSES):
        idx = np.flatnonzero(labels == c)
        k = int(round(per * args.synthetic_holdout))
        k = min(max(k, 1), per - 1) if per >= 2 else 0
        hold[rng.permutation(idx)[:k]] = True
    xh, yh = samples[hold], labels[hold]
    X = torch.from_numpy(samples[~hold]).to(dev).unsqueeze(1)
    Y = torch.from_numpy(labels[~hold].astype(np.int64)).to(dev)

    def held_out(m):
        return float((classify(m, xh, dev) == yh).mean()) if yh.size else float("nan")

    epochs = args.cls_epochs if args.cls_epochs else 40
    log(f"[syn] classifier: {int((~hold).sum())} train / {int(hold.sum())} held out, {epochs} epochs, "
        f"budget {args.cls_budget:.0f}s")
    cls, acc, t_cls = fit_cnn(args, X, Y, epochs, held_out, dev, tag="cls-syn")
    if yh.size:
        line, accs = per_class_line(classify(cls, xh, dev), yh)
        log(f"[syn] held-out {line}")
    size = save_classifier_small(cls, args.classifier_out, {
        "trained_on": f"synthetic: {n} {meta.get('lwo.arch')} samples of {args.out}, {args.steps} steps, "
                      f"cfg {args.cfg}, noise seed {sseed:#x}",
        "heldout_accuracy": acc})
    log(f"[syn] classifier -> {args.classifier_out} ({size} bytes, {size / 1e6:.2f} MB)")
    if yh.size:  # the file as --score reads it (float16 weights) against the model in memory
        same = int((classify(load_classifier(args.classifier_out, dev), xh, dev) == classify(cls, xh, dev)).sum())
        log(f"[syn] the saved file agrees with the trained model on {same}/{yh.size} held-out samples")
    log(f"[syn] held-out accuracy {acc * 100:.2f}% ({int(hold.sum())} samples)  "
        f"sampling {t_sample:.1f}s  classifier {t_cls:.1f}s")

    if args.synthetic_ref_check:  # the demo's own set (its noise, disjoint from the training set)
        if dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        nr = NUM_CLASSES * args.per_class
        ref, _ = sample_chunked(model, gen_noise(args.seed, nr), np.arange(nr) // args.per_class,
                                args.steps, args.cfg, dev, max(1, args.synthetic_batch), "syn-ref")
        racc = score_samples(cls, ref, dev)
        log(f"[syn] the demo's set (seed {args.seed}, {nr} samples): {racc * 100:.1f}% classified as their class")
    log(f"[syn] total {time.time() - T0:.1f}s")
    return acc


def read_f32(path):
    a = np.fromfile(path, dtype="<f4")
    assert a.size % (IMG * IMG) == 0, f"{path}: {a.size} floats is not N x 28 x 28"
    return a.reshape(-1, IMG, IMG)


def read_png_grid(path):
    """The samples of a PNG grid as examples/diffuse.c (write_grid) and save_grid_png write it:
    8-bit grayscale, 28x28 cells with 2-pixel borders, 3x zoom, samples row-major (the demo: a row
    per class) -> float32 [N,28,28] = u8 / 127.5 - 1 (8-bit quantized, so within 1/255 of the
    raw samples).  Plain zlib, no imaging library."""
    import struct
    import zlib
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, ihdr, idat = 8, None, []
    while pos + 8 <= len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        typ, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b"IHDR":
            ihdr = body
        elif typ == b"IDAT":
            idat.append(body)
        elif typ == b"IEND":
            break
    if ihdr is None or not idat:
        raise ValueError(f"{path}: no IHDR / IDAT")
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", ihdr[:13])
    if (depth, color, interlace) != (8, 0, 0):
        raise ValueError(f"{path}: want 8-bit grayscale, not interlaced (depth {depth}, color type {color})")
    raw = zlib.decompress(b"".join(idat))
    if len(raw) != h * (w + 1):
        raise ValueError(f"{path}: {len(raw)} bytes of scanlines, want {h * (w + 1)}")
    pix = np.zeros((h, w), dtype=np.uint8)
    prev = np.zeros(w, dtype=np.int64)
    for y in range(h):
        ft = raw[y * (w + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=w, offset=y * (w + 1) + 1).astype(np.int64)
        if ft == 0:
            cur = line
        elif ft == 1:  # sub (1 byte per pixel): a running sum
            cur = np.cumsum(line) & 255
        elif ft == 2:
            cur = (line + prev) & 255
        elif ft in (3, 4):
            cur = np.zeros(w, dtype=np.int64)
            left = 0
            for x in range(w):
                up = int(prev[x])
                if ft == 3:
                    pr = (left + up) >> 1
                else:  # Paeth
                    ul = int(prev[x - 1]) if x else 0
                    pp = left + up - ul
                    pa, pb, pc = abs(pp - left), abs(pp - up), abs(pp - ul)
                    pr = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                left = cur[x] = (int(line[x]) + pr) & 255
        else:
            raise ValueError(f"{path}: bad filter type {ft} on row {y}")
        pix[y] = cur
        prev = cur
    pad, zoom, cell = 2, 3, IMG + 2
    cols, rows = (w // zoom - pad) // cell, (h // zoom - pad) // cell
    if cols < 1 or rows < 1 or w != (cols * cell + pad) * zoom or h != (rows * cell + pad) * zoom:
        raise ValueError(f"{path}: {w}x{h} is not a grid of 28x28 cells (2-pixel borders, 3x zoom)")
    r, c = np.divmod(np.arange(rows * cols), cols)
    yy = (r[:, None] * cell + pad + np.arange(IMG)[None]) * zoom + 1      # [N,28] centre rows
    xx = (c[:, None] * cell + pad + np.arange(IMG)[None]) * zoom + 1      # [N,28] centre cols
    u8 = pix[yy[:, :, None], xx[:, None, :]]                              # [N,28,28]
    return (u8.astype(np.float32) / np.float32(127.5) - np.float32(1.0)).astype(np.float32)


def read_samples(path):
    return read_png_grid(path) if path.lower().endswith(".png") else read_f32(path)


# ----------------------------------------------------------------------------- LoRA (issue 22)
# Training noise of --train-lora: the demo's generator, seeded 2^41 draws past --seed, i.e. 2^40 draws
# past the synthetic classifier's set (SYN_JUMP), so the three sets share no draw (see SYN_JUMP).
LORA_JUMP = 2 * SYN_JUMP
LORA_TARGETS = ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")
LORA_OUT = "examples/tiny_dit_lora.safetensors"


def lora_noise_seed(seed):
    return (int(seed) + LORA_JUMP * int(GOLDEN)) & 0xFFFFFFFFFFFFFFFF


if torch is not None:

    class LoRALinear(nn.Module):
        """y = base(x) + (alpha / rank) * (x @ down^T) @ up^T, i.e. W_eff = W + (alpha / rank) up @ down
        with down [rank, in], up [out, rank]; the base Linear is frozen.  down: kaiming-uniform
        (a = sqrt(5), bound 1/sqrt(in), as PEFT), up: zeros, so training starts from the base model."""
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base, self.rank, self.alpha = base, rank, float(alpha)
            self.down = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device))
            self.up = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))
            nn.init.kaiming_uniform_(self.down, a=math.sqrt(5))

        def forward(self, x):
            return self.base(x) + (self.alpha / self.rank) * F.linear(F.linear(x, self.down), self.up)


def lora_linears(model):
    """[(name, parent module, attribute)] of the adapted linears, e.g. ('blocks.0.attn.qkv', attn, 'qkv'):
    attn.qkv, attn.proj, mlp.fc1, mlp.fc2 of every block (4 * depth)."""
    out = []
    for i, blk in enumerate(model.blocks):
        for t in LORA_TARGETS:
            sub, attr = t.split(".")
            out.append((f"blocks.{i}.{t}", getattr(blk, sub), attr))
    return out


def add_lora(model, rank, alpha):
    """Freezes the model and wraps each adapted Linear in a LoRALinear -> [(name, LoRALinear)]."""
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for name, parent, attr in lora_linears(model):
        m = LoRALinear(getattr(parent, attr), rank, alpha)
        setattr(parent, attr, m)
        adapters.append((name, m))
    return adapters


def export_lora(adapters, path, meta):
    """<base>.lora_down.weight [rank, in] bf16, <base>.lora_up.weight [out, rank] bf16, <base>.alpha
    scalar (shape []) float32, where <base>.weight is the adapted weight of the model file."""
    from safetensors.torch import save_file
    ensure_dir(path)
    sd = {}
    for name, m in adapters:
        sd[f"{name}.lora_down.weight"] = m.down.detach().to(torch.bfloat16).cpu().contiguous()
        sd[f"{name}.lora_up.weight"] = m.up.detach().to(torch.bfloat16).cpu().contiguous()
        sd[f"{name}.alpha"] = torch.tensor(m.alpha, dtype=torch.float32)
    save_file(sd, path, metadata=meta)
    return os.path.getsize(path)


def load_lora(path):
    """-> ({base name: (down float32 [r,in], up float32 [out,r], alpha float)}, metadata)"""
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    sd = load_file(path)
    lora = {}
    for k in sd:
        if k.endswith(".lora_down.weight"):
            b = k[:-len(".lora_down.weight")]
            lora[b] = (sd[k].float(), sd[b + ".lora_up.weight"].float(), float(sd[b + ".alpha"]))
    return lora, meta


@torch.no_grad() if torch is not None else (lambda f: f)
def apply_lora(model, lora, strength):
    """Merges in float32, in place: W += strength * (alpha / rank) * up @ down (rank = down.shape[0]);
    the weights come from the bf16 file upcast to float32, as load_exported gives them."""
    params = dict(model.named_parameters())
    for b, (down, up, alpha) in lora.items():
        w = params[b + ".weight"]
        assert tuple(w.shape) == (up.shape[0], down.shape[1]) and up.shape[1] == down.shape[0], (b, w.shape)
        w.add_((strength * alpha / down.shape[0]) * (up.to(w.device) @ down.to(w.device)))
    return model


def cached_samples(path, n, make, tag):
    """Raw float32 [n,28,28] from `path` when it holds exactly n samples, else make() (written to
    `path` when one is given)."""
    if path and os.path.exists(path) and os.path.getsize(path) == n * IMG * IMG * 4:
        log(f"[{tag}] reusing {path} ({n} samples)")
        return read_f32(path)
    s = make()
    if path:
        ensure_dir(path)
        s.tofile(path)
        log(f"[{tag}] -> {path}")
    return s


def train_lora(args, dev):
    """--train-lora: a LoRA of the frozen --out that draws class --lora-class with inverted brightness
    (target image -x0), every other class unchanged; trained on the base model's own samples."""
    T0 = time.time()
    torch.manual_seed(args.train_seed)
    model, meta = load_exported(args.out, dev)
    c, per = args.lora_class, args.lora_per_class
    n = NUM_CLASSES * per
    sseed = lora_noise_seed(args.seed)
    labels = np.arange(n) % NUM_CLASSES  # interleaved, as --train-classifier-synthetic

    def make():
        log(f"[lora] sampling {n} training images ({per} per class) from {args.out}: {args.steps} Euler "
            f"steps, cfg {args.cfg}, float32, noise {NOISE} seed {sseed:#x} (= --seed {args.seed} + 2^41 draws)")
        s, dt = sample_chunked(model, gen_noise(sseed, n), labels, args.steps, args.cfg, dev,
                               max(1, args.synthetic_batch or 32), "lora-data")
        return s
    samples = cached_samples(args.lora_data, n, make, "lora-data")
    t_data = time.time() - T0
    x0 = torch.from_numpy(samples.copy()).unsqueeze(1).to(dev)
    Y = torch.from_numpy(labels.astype(np.int64)).to(dev)
    inv = Y == c
    x0[inv] = -x0[inv]  # the target style: class c with inverted brightness
    log(f"[lora] class {c}: mean pixel {float(-x0[inv].mean()):.3f} -> target {float(x0[inv].mean()):.3f}; "
        f"other classes mean {float(x0[~inv].mean()):.3f} (kept)")
    idx_c = torch.nonzero(inv).flatten()
    idx_o = torch.nonzero(~inv).flatten()

    adapters = add_lora(model, args.lora_rank, args.lora_alpha)
    model.train()
    params = [p for _, m in adapters for p in (m.down, m.up)]
    log(f"[lora] rank {args.lora_rank} alpha {args.lora_alpha:g} on {len(adapters)} linears "
        f"({', '.join(LORA_TARGETS)} of {len(model.blocks)} blocks): {sum(p.numel() for p in params)} params; "
        f"batch {args.lora_batch}, lr {args.lora_lr:g}, class {c} share of conditioned items "
        f"{args.lora_class_frac:g}, label drop {args.label_drop:g}, budget {args.lora_time_budget:.0f}s")
    opt = torch.optim.AdamW(params, lr=args.lora_lr, betas=(0.9, 0.99), weight_decay=0.0)
    bs = args.lora_batch
    t0 = time.time()
    step, loss_acc, loss_cnt, final_loss = 0, 0.0, 0, float("nan")
    while True:
        if args.lora_max_steps and step >= args.lora_max_steps:
            break
        if time.time() - t0 >= args.lora_time_budget:
            break
        # conditioned items: class c with probability --lora-class-frac, else one of the others;
        # dropped items (null class, p = --label-drop): uniform over the whole set, so the
        # unconditional model sees the new marginal (class c inverted at its natural share)
        drop = torch.rand(bs, device=dev) < args.label_drop
        pick_c = torch.rand(bs, device=dev) < args.lora_class_frac
        i_c = idx_c[torch.randint(0, idx_c.numel(), (bs,), device=dev)]
        i_o = idx_o[torch.randint(0, idx_o.numel(), (bs,), device=dev)]
        i_a = torch.randint(0, n, (bs,), device=dev)
        idx = torch.where(drop, i_a, torch.where(pick_c, i_c, i_o))
        xb = x0[idx]
        flip = torch.rand(bs, device=dev) < 0.5  # label preserving for Fashion-MNIST
        xb = torch.where(flip.view(-1, 1, 1, 1), xb.flip(3), xb)
        y = torch.where(drop, torch.full_like(Y[idx], NUM_CLASSES), Y[idx])
        # linear warmup, then cosine decay to 0 at the end of the budget (time or --lora-max-steps)
        prog = (time.time() - t0) / args.lora_time_budget
        if args.lora_max_steps:
            prog = max(prog, step / args.lora_max_steps)
        lr = args.lora_lr * min(1.0, (step + 1) / args.lora_warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, prog)))
        loss = rf_step(model, opt, params, xb, y, lr, False, dev)
        loss_acc += float(loss.detach())
        loss_cnt += 1
        step += 1
        if step % args.lora_log_every == 0:
            final_loss = loss_acc / loss_cnt
            log(f"[lora] step {step:5d}  loss {final_loss:.4f}  lr {lr:.2e}  t {time.time() - t0:6.1f}s")
            loss_acc, loss_cnt = 0.0, 0
    if loss_cnt:
        final_loss = loss_acc / loss_cnt
    t_train = time.time() - t0
    log(f"[lora] done: {step} steps in {t_train:.1f}s, final loss {final_loss:.4f}")

    lmeta = {
        "lwo.base": meta.get("lwo.arch", ARCH),
        "lwo.lora_class": str(c),
        "lwo.lora_rank": str(args.lora_rank),
        "lwo.lora_alpha": f"{args.lora_alpha:g}",
        "lwo.lora_target": f"class {c} drawn with inverted brightness",
        "lwo.lora_modules": ",".join(LORA_TARGETS) + f" of blocks 0..{len(model.blocks) - 1}",
        "lwo.lora_formula": "W' = W + strength * (alpha / rank) * up @ down; down [rank,in], up [out,rank]",
        "lwo.lora_train": f"{step} steps, batch {bs}, lr {args.lora_lr:g}, final loss {final_loss:.5f}, "
                          f"{n} samples of the base model ({args.steps} steps, cfg {args.cfg:g}, noise seed {sseed:#x})",
    }
    size = export_lora(adapters, args.lora_out, lmeta)
    log(f"[lora] -> {args.lora_out} ({size} bytes, {size / 1e3:.1f} KB)  data {t_data:.1f}s  "
        f"training {t_train:.1f}s")
    del model, adapters
    eval_lora(args, dev)
    log(f"[lora] total {time.time() - T0:.1f}s")


def eval_lora(args, dev):
    """The demo's reference set (--seed, --per-class, --steps, --cfg) sampled in float32 from --out
    without and with --lora-out merged at each --lora-strength: per-class mean pixel, RMS change,
    classifier accuracy.  The first strength's samples -> --lora-ref-out (raw float32) + PNG grid."""
    import copy
    base, meta = load_exported(args.out, dev)
    lora, lmeta = load_lora(args.lora_out)
    c = int(lmeta.get("lwo.lora_class", args.lora_class))
    n = NUM_CLASSES * args.per_class
    noise = gen_noise(args.seed, n)
    labels = np.arange(n) // args.per_class
    bsz = max(1, args.synthetic_batch or 50)
    log(f"[lora-eval] {args.lora_out}: {len(lora)} adapted linears, rank "
        f"{next(iter(lora.values()))[0].shape[0]}, class {c}; reference set: {n} samples, seed {args.seed}, "
        f"{args.steps} steps, cfg {args.cfg}")
    runs = [("base", cached_samples(
        args.lora_base_ref, n,
        lambda: sample_chunked(base, noise, labels, args.steps, args.cfg, dev, bsz, "lora-eval base")[0],
        "lora-eval base"))]
    for k, s in enumerate(args.lora_strength):
        m = apply_lora(copy.deepcopy(base), lora, s)
        smp, dt = sample_chunked(m, noise, labels, args.steps, args.cfg, dev, bsz, f"lora-eval x{s:g}")
        runs.append((f"lora x{s:g}", smp))
        if k == 0:
            ensure_dir(args.lora_ref_out)
            smp.tofile(args.lora_ref_out)
            png = save_grid_png(smp, os.path.splitext(args.lora_ref_out)[0] + ".png")
            log(f"[lora-eval] strength {s:g}: {args.lora_ref_out}, {png}")
        del m
    cls_model = None
    if args.classifier and os.path.exists(args.classifier):
        cls_model = load_classifier(args.classifier, dev)
    ref = runs[0][1]
    log("")
    log(f"per-class mean pixel ([-1,1]), RMS change vs base (same noise), classifier accuracy"
        + ("" if cls_model is not None else " (no classifier)"))
    hdr = f"  {'class':>5} " + "".join(f"| {name:^27} " for name, _ in runs)
    log(hdr)
    log(f"  {'':>5} " + "".join(f"| {'mean':>7} {'rms chg':>8} {'acc %':>8} " for _ in runs))
    preds = [classify(cls_model, s, dev) if cls_model is not None else None for _, s in runs]
    for cc in range(NUM_CLASSES):
        sel = labels == cc
        row = f"  {cc:>5}{'*' if cc == c else ' '}"
        for (name, s), p in zip(runs, preds):
            rms = float(np.sqrt(np.mean((s[sel] - ref[sel]) ** 2)))
            acc = f"{(p[sel] == cc).mean() * 100:8.1f}" if p is not None else f"{'-':>8}"
            row += f"| {float(s[sel].mean()):7.3f} {rms:8.3f} {acc} "
        log(row)
    others = labels != c
    row = f"  {'other':>5} "
    for (name, s), p in zip(runs, preds):
        rms = float(np.sqrt(np.mean((s[others] - ref[others]) ** 2)))
        acc = f"{(p[others] == labels[others]).mean() * 100:8.1f}" if p is not None else f"{'-':>8}"
        row += f"| {float(s[others].mean()):7.3f} {rms:8.3f} {acc} "
    log(row)
    log(f"  (* = class {c}, the LoRA's target; 'other' = the 9 other classes together)")
    if cls_model is not None:
        sel = labels == c
        for (name, s) in runs:
            pi = classify(cls_model, -s[sel], dev)
            log(f"[lora-eval] {name}: class {c} samples with brightness inverted back (-x) classified as "
                f"class {c}: {(pi == c).mean() * 100:.1f}%")
        for (name, s), p in zip(runs, preds):
            log(f"[lora-eval] {name}: " + per_class_line(p, labels)[0])
    return runs


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=".data/fashion-mnist")
    ap.add_argument("--out", default=None, help="exported bf16 safetensors (default examples/tiny_dit.safetensors)")
    ap.add_argument("--classifier-out", default=None, help="default build/fmnist_classifier.pt")
    ap.add_argument("--classifier", default=None, help="classifier for --score / --sample-ref")
    ap.add_argument("--ref-out", default=None, help="default build/ref_samples.f32")
    ap.add_argument("--time-budget", type=float, default=180.0, help="DiT training seconds")
    ap.add_argument("--max-steps", type=int, default=0, help="stop DiT training after N steps (0 = time only)")
    ap.add_argument("--cls-budget", type=float, default=60.0, help="classifier training seconds (checked per epoch)")
    ap.add_argument("--cls-epochs", type=int, default=None,
                    help="classifier epochs (default 5 on the data set, 40 on the synthetic set)")
    ap.add_argument("--cls-augment", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--patch", type=int, default=2)
    ap.add_argument("--mlp-ratio", type=float, default=4.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--label-drop", type=float, default=0.1)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--train-seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=20, help="Euler sampling steps")
    ap.add_argument("--cfg", type=float, default=2.0, help="classifier-free guidance scale (1 = off)")
    ap.add_argument("--seed", type=int, default=0, help="reference noise seed (splitmix64)")
    ap.add_argument("--per-class", type=int, default=10)
    ap.add_argument("--device", default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny run for CPU testing")
    ap.add_argument("--sample-ref", action="store_true")
    ap.add_argument("--train-classifier", action="store_true", help="train only the classifier")
    ap.add_argument("--train-classifier-synthetic", action="store_true",
                    help="train the classifier on the model's own samples (no data set) -> --classifier-out "
                         f"(default {SHIPPED_CLASSIFIER})")
    ap.add_argument("--synthetic-per-class", type=int, default=300, help="synthetic samples per class")
    ap.add_argument("--synthetic-holdout", type=float, default=0.2, help="fraction held out per class")
    ap.add_argument("--synthetic-batch", type=int, default=None,
                    help="samples per sampler call, the CFG batch twice that (default 1000 on CUDA, 32 on CPU)")
    ap.add_argument("--synthetic-ref-check", type=int, default=1,
                    help="1: also sample the demo's own set (--seed, --per-class) and score it")
    ap.add_argument("--train-lora", action="store_true",
                    help=f"train a LoRA of --out that inverts --lora-class's brightness -> --lora-out ({LORA_OUT})")
    ap.add_argument("--eval-lora", action="store_true", help="only evaluate --lora-out on the reference set")
    ap.add_argument("--lora-out", default=None, help=f"LoRA safetensors (default {LORA_OUT})")
    ap.add_argument("--lora-class", type=int, default=1, help="class drawn with inverted brightness (1 = trouser)")
    ap.add_argument("--lora-rank", type=int, default=4)
    ap.add_argument("--lora-alpha", type=float, default=None, help="LoRA alpha (default = rank)")
    ap.add_argument("--lora-per-class", type=int, default=30, help="training samples drawn per class")
    ap.add_argument("--lora-data", default=None,
                    help="cache of the training samples (raw float32, sample n has class n %% 10): read when "
                         "it holds 10 x --lora-per-class samples, else written")
    ap.add_argument("--lora-time-budget", type=float, default=180.0, help="LoRA training seconds")
    ap.add_argument("--lora-max-steps", type=int, default=0, help="stop LoRA training after N steps (0 = time only)")
    ap.add_argument("--lora-batch", type=int, default=16)
    ap.add_argument("--lora-lr", type=float, default=3e-3, help="peak LoRA lr (warmup, then cosine to 0)")
    ap.add_argument("--lora-warmup", type=int, default=10)
    ap.add_argument("--lora-class-frac", type=float, default=0.3,
                    help="share of --lora-class among the conditioned (not dropped) training items")
    ap.add_argument("--lora-log-every", type=int, default=10)
    ap.add_argument("--lora-strength", type=float, nargs="+", default=[1.0],
                    help="strength(s) evaluated; the first one's samples -> --lora-ref-out")
    ap.add_argument("--lora-ref-out", default=None, help="LoRA samples, raw float32 (default build/ref_lora.f32) + .png")
    ap.add_argument("--lora-base-ref", default=None,
                    help="the base model's reference samples (as --sample-ref writes them, same --seed / --steps / "
                         "--cfg / --per-class): read when present, else sampled and written")
    ap.add_argument("--score", default=None, metavar="FILE.f32")
    ap.add_argument("--compare", nargs=2, default=None, metavar=("A.f32", "B.f32"))
    args = ap.parse_args()

    if args.compare:
        a, b = read_f32(args.compare[0]), read_f32(args.compare[1])
        assert a.shape == b.shape, (a.shape, b.shape)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        rel = np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30)
        log(f"relative L2 ||A-B||/||B|| = {rel:.6e}   max |A-B| = {np.abs(a64 - b64).max():.6e}   "
            f"N = {a.shape[0]}")
        return 0

    if torch is None:
        log("PyTorch is required for this mode")
        return 2
    selftest_noise()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    dev = pick_device(args.device)

    sm = "build/smoke_" if args.smoke else None
    if args.train_lora or args.eval_lora:  # --out is the base model here: an input, also with --smoke
        if args.out is None:
            args.out = "examples/tiny_dit.safetensors"
        if args.lora_out is None:
            args.lora_out = sm + "tiny_dit_lora.safetensors" if sm else LORA_OUT
        if args.lora_ref_out is None:
            args.lora_ref_out = sm + "ref_lora.f32" if sm else "build/ref_lora.f32"
        if args.lora_alpha is None:
            args.lora_alpha = float(args.lora_rank)
        if args.classifier is None and os.path.exists(SHIPPED_CLASSIFIER):
            args.classifier = SHIPPED_CLASSIFIER
        if args.smoke:
            args.lora_per_class = min(args.lora_per_class, 2)
            args.lora_max_steps = args.lora_max_steps or 3
            args.lora_batch = min(args.lora_batch, 4)
            args.lora_log_every = 1
            args.steps = min(args.steps, 3)
            args.per_class = min(args.per_class, 1)
        if args.train_lora:
            train_lora(args, dev)
        else:
            eval_lora(args, dev)
        return 0
    if args.out is None:
        args.out = sm + "tiny_dit.safetensors" if sm else "examples/tiny_dit.safetensors"
    if args.classifier_out is None and args.train_classifier_synthetic:
        args.classifier_out = sm + "tiny_dit_classifier.pt" if sm else SHIPPED_CLASSIFIER
    if args.classifier_out is None:
        args.classifier_out = sm + "fmnist_classifier.pt" if sm else "build/fmnist_classifier.pt"
    if args.ref_out is None:
        args.ref_out = sm + "ref_samples.f32" if sm else "build/ref_samples.f32"
    if args.classifier is None:
        args.classifier = args.classifier_out
        if ((args.score or args.sample_ref) and not os.path.exists(args.classifier)
                and os.path.exists(SHIPPED_CLASSIFIER)):
            args.classifier = SHIPPED_CLASSIFIER  # the one trained without the data set

    if args.score:
        if not os.path.exists(args.classifier):
            log(f"no classifier {args.classifier}: make one with --train-classifier (data set) or "
                f"--train-classifier-synthetic (no data set)")
            return 2
        cls_model = load_classifier(args.classifier, dev)
        s = read_samples(args.score)
        acc = score_samples(cls_model, s, dev)
        log(f"{args.score}: {s.shape[0]} samples, {acc * 100:.1f}% classified as their class")
        return 0

    if args.sample_ref:
        run_reference(args, dev)
        return 0

    if args.train_classifier_synthetic:
        train_classifier_synthetic(args, dev)
        return 0

    if args.train_classifier:
        xtr, ytr, xte, yte = load_fmnist(args.data)
        _, cls_acc, t_cls = train_classifier(args, xtr, ytr, xte, yte, dev)
        log(f"[cls] test accuracy {cls_acc * 100:.2f}% in {t_cls:.1f}s -> {args.classifier_out}")
        return 0

    if args.smoke:
        args.time_budget = min(args.time_budget, 60.0)
        args.max_steps = args.max_steps or 6
        args.batch = min(args.batch, 16)
        args.log_every = 2
        args.cls_epochs = 1
        args.steps = min(args.steps, 3)

    T0 = time.time()
    xtr, ytr, xte, yte = load_fmnist(args.data)
    log(f"[data] train {xtr.shape} test {xte.shape} from {args.data}  ({time.time() - T0:.1f}s)")
    cls_xtr, cls_ytr, cls_xte, cls_yte = xtr, ytr, xte, yte
    if args.smoke:
        cls_xtr, cls_ytr, cls_xte, cls_yte = xtr[:2000], ytr[:2000], xte[:1000], yte[:1000]

    ema, steps_done, final_loss, t_train = train_dit(args, xtr, ytr, dev)
    size = export(ema, args.out, metadata(ema, args, steps_done, final_loss))
    log(f"[export] {args.out}: {size / 1e6:.2f} MB bf16")
    if size > 30e6:
        log("[export] WARNING: file is larger than 30 MB")
    del ema
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    cls_model, cls_acc, t_cls = train_classifier(args, cls_xtr, cls_ytr, cls_xte, cls_yte, dev)
    log(f"[cls] test accuracy {cls_acc * 100:.2f}% -> {args.classifier_out}"
        + ("" if cls_acc >= 0.90 or args.smoke else "  WARNING: below 90%"))

    samples, ref_acc, t_ref = run_reference(args, dev, cls_model)

    total = time.time() - T0
    rows = [
        ("device", str(dev) + (f" ({torch.cuda.get_device_name()})" if dev.type == "cuda" else "")),
        ("DiT training steps", f"{steps_done}"),
        ("DiT final loss", f"{final_loss:.4f}"),
        ("DiT training time", f"{t_train:.1f} s"),
        ("classifier test accuracy", f"{cls_acc * 100:.2f} % ({t_cls:.1f} s)"),
        ("reference sample class acc", f"{ref_acc * 100:.1f} % ({args.steps} steps, cfg {args.cfg}, {t_ref:.1f} s)"),
        ("quality targets", ("classifier >= 90%: " + ("OK" if cls_acc >= 0.90 else "MISSED")) +
                             ("; samples >= 80%: " + ("OK" if ref_acc >= 0.80 else "MISSED"))),
        ("exported file", f"{args.out} {size / 1e6:.2f} MB"),
        ("total wall time", f"{total:.1f} s"),
    ]
    w = max(len(r[0]) for r in rows)
    log("\n==== tiny-dit summary ====")
    for k, v in rows:
        log(f"  {k:<{w}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

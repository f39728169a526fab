#!/usr/bin/python3
"""Export Kiln's model zoo from PyTorch to ONNX, with reference inputs and outputs.

usage: make_models.py OUT_DIR [--only NAME,...] [--opsets 13,17] [--force] [--list]
                      [--expect-list tests/models/tolerances] [--fp64-error]

Every model is built with a fixed seed and random weights (nothing is
downloaded), put in eval mode, run once in PyTorch on a seeded random input,
and exported with torch.onnx.export at each of its opsets (13 and 17 unless
the model's entry says otherwise). Each export is written as

    OUT_DIR/<name>-op<N>/model.onnx
    OUT_DIR/<name>-op<N>/test_data_set_0/input_K.pb     (onnx TensorProto)
    OUT_DIR/<name>-op<N>/test_data_set_0/output_K.pb    (PyTorch's float32 outputs)
    OUT_DIR/<name>-op<N>/info.json                      (shapes, fp32-vs-fp64 error, timings)

A dynamic model (dynamic_axes) is run on data of other sizes than it was
exported at ("data_inputs"), and on more sizes as test_data_set_1, 2, ...
("more_data_inputs"; info.json's "data_sets" lists every set's shapes).

Each folder is written under a temporary name and renamed when complete, so
an existing folder is a finished export and is skipped (the cache). A stamp
OUT_DIR/.generator holds a hash of this script and the library versions;
when it differs, the cache is thrown away and everything is regenerated.
--force regenerates the selected models regardless.

With --fp64-error, info.json's "fp64_error" compares PyTorch's float32 output
with the same model run in float64: the rounding error of PyTorch's own
float32 arithmetic, the floor under any tolerance a float32 consumer can be
checked at (tests/models/tolerances and docs/MODELS.md cite it). It doubles
the PyTorch time, so it is off by default.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision,
python3-onnx); OMP_NUM_THREADS=1 keeps it polite on shared machines.
"""
import argparse
import contextlib
import copy
import hashlib
import io
import json
import os
import shutil
import sys
import time
import warnings
from typing import List

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from onnx import numpy_helper  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

SEED = 20240601
DEFAULT_OPSETS = (13, 17)


# --------------------------------------------------------------------------
# Model definitions
# --------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(784, 512)
        self.fc1 = nn.Linear(512, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(F.relu(self.fc0(x)))))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn0 = nn.BatchNorm2d(16)
        self.conv1 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn0(self.conv0(x))), 2)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(torch.flatten(x, 1))


class Pointwise(nn.Module):
    """GELU, SiLU, tanh, sigmoid and add/mul chains: no weights, all elementwise."""

    def forward(self, x, y):
        a = F.gelu(x)
        b = F.silu(y * 0.5 + a)
        c = torch.tanh(b) * torch.sigmoid(a - y)
        d = (c + x) * (b - 0.25) + a * y
        e = torch.sigmoid(d) * F.gelu(c * 2.0) - torch.tanh(d + 1.0)
        return e * x + d, c


def transformer_encoder(d_model=256, heads=4, layers=4, ff=1024):
    layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=ff, dropout=0.1,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, layers)


class ViTBlock(nn.Module):
    """A hand-written ViT: conv patch embedding, cls token, learned position
    embedding, pre-norm blocks with explicit q/k/v attention (reshape, permute,
    matmul, softmax), GELU MLP, final LayerNorm, linear head on the cls token."""

    def __init__(self, image=64, patch=8, dim=128, heads=4, depth=2, classes=10):
        super().__init__()
        self.heads = heads
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleDict(dict(
                norm1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), proj=nn.Linear(dim, dim),
                norm2=nn.LayerNorm(dim), fc1=nn.Linear(dim, 4 * dim), fc2=nn.Linear(4 * dim, dim))))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)  # B, N, D
        b, n, d = x.shape
        x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1) + self.pos
        h = self.heads
        for blk in self.blocks:
            y = blk["norm1"](x)
            qkv = blk["qkv"](y).reshape(b, n + 1, 3, h, d // h).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = torch.softmax(q @ k.transpose(-2, -1) * (d // h) ** -0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, n + 1, d)
            x = x + blk["proj"](y)
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["norm2"](x))))
        return self.head(self.norm(x)[:, 0])


class TextClassifier(nn.Module):
    """Token ids (int64) -> embedding (Gather) + position embedding -> transformer
    encoder with a key padding mask built in the graph -> masked mean -> linear."""

    def __init__(self, vocab=1000, dim=128, seq=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, dim_feedforward=256, dropout=0.0,
                                           batch_first=True, activation="gelu", norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 4)

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        x = self.enc(x)
        keep = (ids != 0).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1).clamp(min=1.0))


class Seq2Seq(nn.Module):
    """nn.Transformer (encoder-decoder) with a causal target mask."""

    def __init__(self, dim=128, tgt_len=24, declare_causal=False):
        super().__init__()
        # torch.export cannot trace nn.Transformer's check that the mask is
        # causal (a data-dependent guard); torch 2.x lets the caller say so.
        self.declare_causal = declare_causal
        self.t = nn.Transformer(dim, 4, num_encoder_layers=2, num_decoder_layers=2,
                                dim_feedforward=256, dropout=0.1, batch_first=True)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(tgt_len))

    def forward(self, src, tgt):
        if self.declare_causal:
            return self.t(src, tgt, tgt_mask=self.mask, tgt_is_causal=True)
        return self.t(src, tgt, tgt_mask=self.mask)


class LSTMModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(32, 64, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(128, 8)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return self.fc(out), h, c


class GRUModel(nn.Module):
    """Two stacked GRU layers (unidirectional) with an explicit initial state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(32, 48, num_layers=2, batch_first=True)

    def forward(self, x, h0):
        out, h = self.rnn(x, h0)
        return out, h


class RNNTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(16, 32, num_layers=1, bidirectional=True, batch_first=True)

    def forward(self, x):
        out, h = self.rnn(x)
        return out, h


class UNet(nn.Module):
    """Small U-Net: conv blocks, max-pool downsampling, upsampling by
    ConvTranspose2d, nearest and bilinear F.interpolate, skip concatenation."""

    def __init__(self, c=16, classes=3):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.d0, self.d1, self.d2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 4 * c), \
            block(4 * c, 8 * c)
        self.up2 = nn.ConvTranspose2d(8 * c, 4 * c, 2, stride=2)
        self.u2 = block(8 * c, 4 * c)
        self.red1 = nn.Conv2d(4 * c, 2 * c, 1)
        self.u1 = block(4 * c, 2 * c)
        self.red0 = nn.Conv2d(2 * c, c, 1)
        self.u0 = block(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        s0 = self.d0(x)
        s1 = self.d1(F.max_pool2d(s0, 2))
        s2 = self.d2(F.max_pool2d(s1, 2))
        m = self.mid(F.max_pool2d(s2, 2))
        y = self.u2(torch.cat([self.up2(m), s2], 1))
        y = F.interpolate(self.red1(y), scale_factor=2, mode="nearest")
        y = self.u1(torch.cat([y, s1], 1))
        y = F.interpolate(self.red0(y), scale_factor=2, mode="bilinear", align_corners=False)
        y = self.u0(torch.cat([y, s0], 1))
        return self.out(y)


class PatchViT(nn.Module):
    """A ViT built from nn.TransformerEncoder: conv patch embedding, cls token,
    position embedding, pre-norm GELU encoder layers, linear head."""

    def __init__(self, image=64, patch=8, dim=128, heads=4, depth=3, classes=10):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.enc(x))[:, 0])


def decoder_blocks(dim, depth):
    """A decoder's pre-norm blocks: attention (qkv, proj) and a GELU MLP."""
    return nn.ModuleList(nn.ModuleDict(dict(
        ln1=nn.LayerNorm(dim), qkv=nn.Linear(dim, 3 * dim), proj=nn.Linear(dim, dim),
        ln2=nn.LayerNorm(dim), fc1=nn.Linear(dim, 4 * dim), fc2=nn.Linear(4 * dim, dim)))
        for _ in range(depth))


class DecoderLM(nn.Module):
    """A decoder-only language model: token + position embedding, pre-norm
    blocks with causal F.scaled_dot_product_attention, GELU MLP, tied head."""

    def __init__(self, vocab=1000, dim=128, heads=4, depth=2, seq=64):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        self.blocks = decoder_blocks(dim, depth)
        self.ln = nn.LayerNorm(dim)

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos[:, :t]
        h = self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (z.reshape(b, t, h, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.ln(x) @ self.tok.weight.t()


class CausalLM(nn.Module):
    """A GPT-style decoder as torch 1.13 writes one (no F.scaled_dot_product_attention):
    positions from torch.arange and a causal mask from torch.triu of the sequence
    length, so a dynamic batch x sequence export computes both from the input's shape
    (Shape -> Gather -> Range, ConstantOfShape -> Trilu)."""

    def __init__(self, vocab=1000, dim=64, heads=4, depth=2, max_seq=128):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_seq, dim)
        self.blocks = decoder_blocks(dim, depth)
        self.ln = nn.LayerNorm(dim)

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t))
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (z.reshape(b, t, h, -1).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5) + mask
            y = att.softmax(dim=-1) @ v
            x = x + blk["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x))))
        return self.ln(x) @ self.tok.weight.t()


class GNUNetBlock(nn.Module):
    """The diffusion U-Net's building blocks: GroupNorm + SiLU residual blocks,
    a strided-conv downsample and a nearest upsample with a skip concat."""

    def __init__(self, c=32, groups=8):
        super().__init__()

        def res(i, o):
            return nn.ModuleDict(dict(n1=nn.GroupNorm(groups, i), c1=nn.Conv2d(i, o, 3, padding=1),
                                      n2=nn.GroupNorm(groups, o), c2=nn.Conv2d(o, o, 3, padding=1),
                                      skip=nn.Conv2d(i, o, 1) if i != o else nn.Identity()))
        self.inp = nn.Conv2d(3, c, 3, padding=1)
        self.r0 = res(c, c)
        self.down = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.r1 = res(c, 2 * c)
        self.r2 = res(3 * c, c)
        self.out = nn.Sequential(nn.GroupNorm(groups, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

    @staticmethod
    def run(r, x):
        y = r["c1"](F.silu(r["n1"](x)))
        y = r["c2"](F.silu(r["n2"](y)))
        return y + r["skip"](x)

    def forward(self, x):
        s = self.run(self.r0, self.inp(x))
        y = self.run(self.r1, self.down(s))
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")
        return self.out(self.run(self.r2, torch.cat([y, s], 1)))


class FoldAntialias(nn.Module):
    """Antialiased bilinear and bicubic downscaling (Resize antialias=1),
    unfold -> linear -> nn.Fold (Col2Im) and a float8 round trip (Cast to
    FLOAT8E4M3FN and back): what torch 2.x exports for these opset-18 ops."""

    def __init__(self, c=8, k=3):
        super().__init__()
        self.k = k
        self.proj = nn.Linear(c * k * k, c * k * k)
        self.fold = nn.Fold(output_size=(16, 16), kernel_size=k, padding=1)

    def forward(self, x):
        y = F.interpolate(x, size=(16, 16), mode="bilinear", antialias=True)
        z = F.interpolate(x, size=(16, 16), mode="bicubic", antialias=True)
        p = F.unfold(y, kernel_size=self.k, padding=1)
        p = self.proj(p.transpose(1, 2)).transpose(1, 2)
        q = (z * 8).to(torch.float8_e4m3fn).to(torch.float32) / 8
        return self.fold(p) + q


# Scripted models (torch.jit.script, the "script" entry): their control flow
# is kept, and torch.onnx writes If and Loop.

class ScriptedBranch(nn.Module):
    """A branch on a value computed from the input (data-dependent)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(self.a(x))
        else:
            y = self.b(x) * 2.0
        return y


class ScriptedDecoder(nn.Module):
    """A recurrent decoder that feeds back its own output for x.size(1) steps
    (a trip count from an input's size) and accumulates the outputs with
    torch.cat (a loop-carried value that grows)."""

    def __init__(self):
        super().__init__()
        self.wx = nn.Linear(8, 16)
        self.wh = nn.Linear(16, 16)
        self.out = nn.Linear(16, 8)

    def forward(self, x):
        h = torch.zeros(x.size(0), 16)
        y = self.out(h)
        outs = y.unsqueeze(1)
        for t in range(x.size(1)):
            h = torch.tanh(self.wx(x[:, t] + y) + self.wh(h))
            y = self.out(h)
            outs = torch.cat([outs, y.unsqueeze(1)], dim=1)
        return outs, h


class ScriptedWhile(nn.Module):
    """A while loop whose exit depends on the values (and a step limit)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        i = 0
        while bool((x * x).sum() > 1.0) and i < 20:
            x = x * 0.7 + 0.01 * self.lin(x)
            i += 1
        return x


class ScriptedNested(nn.Module):
    """A loop over steps.size(0) with a branch on the iteration inside."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x, steps):
        for i in range(steps.size(0)):
            if i % 2 == 0:
                x = self.a(x)
            else:
                x = torch.relu(self.b(x))
        return x


class ScriptedAppend(nn.Module):
    """Appends to a Python list in a loop over x.size(1) steps, then reads
    its last element and length and stacks and concatenates it (the
    sequence ops: SequenceEmpty, SequenceInsert in the Loop body,
    SequenceAt, SequenceLength, ConcatFromSequence with and without a new
    axis)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        outs: List[torch.Tensor] = []
        h = torch.zeros(x.size(0), 8)
        for t in range(x.size(1)):
            h = torch.tanh(self.lin(x[:, t]) + h)
            outs.append(h)
        last = outs[-1] * float(len(outs))
        return torch.stack(outs, 1), torch.cat(outs, 1), last


class MaskedSelect(nn.Module):
    """Boolean-mask indexing, h[h > 0] (NonZero, GatherND): the output's size
    is the count of the run's positive values, not known before it runs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x)
        v = h[h > 0]
        return torch.tanh(v) * 2.0 + v.sum()


class TopKHalf(nn.Module):
    """torch.topk with k = seq // 2 of a dynamic seq: K computed from a dim,
    known once the dim is bound."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x).sum(-1)
        v, i = torch.topk(h, h.shape[1] // 2, dim=1)
        return v * 2.0, i


class TopKCounted(nn.Module):
    """torch.topk with k the count of positive values (scripted): a K, and an
    output size, that only the run knows."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x).flatten()
        k = (h > 0).sum().clamp(min=1)
        v, i = torch.topk(h, int(k))
        return torch.tanh(v), i


def tv(name, **kw):
    def build():
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build


def vit_tiny():
    return torchvision.models.VisionTransformer(image_size=64, patch_size=8, num_layers=4,
                                                num_heads=4, hidden_dim=128, mlp_dim=512,
                                                num_classes=10)


# --------------------------------------------------------------------------
# The zoo. Each entry: builder, inputs (name, shape, kind), opsets, extras.
# kind: "randn" (standard normal float32), "image" (uniform [0,1) normalized
# like ImageNet), "ids" (int64 token ids in [0, 1000) with trailing zeros).
# --------------------------------------------------------------------------

IMG = [("input", (1, 3, 224, 224), "image")]

MODELS = {
    # The six named by issue 3.
    "mlp": dict(build=MLP, inputs=[("x", (64, 784), "randn")]),
    "small_cnn": dict(build=SmallCNN, inputs=[("x", (8, 3, 32, 32), "image")]),
    "resnet18": dict(build=tv("resnet18"), inputs=IMG),
    "mobilenet_v2": dict(build=tv("mobilenet_v2"), inputs=IMG),
    "transformer_encoder": dict(build=transformer_encoder, inputs=[("src", (1, 128, 256), "randn")]),
    "pointwise": dict(build=Pointwise, inputs=[("x", (1, 1024, 1024), "randn"),
                                               ("y", (1, 1024, 1024), "randn")]),
    # More of what PyTorch exports: torchvision classifiers.
    "squeezenet1_1": dict(build=tv("squeezenet1_1"), inputs=IMG),
    "shufflenet_v2_x0_5": dict(build=tv("shufflenet_v2_x0_5"), inputs=IMG),
    "mnasnet0_5": dict(build=tv("mnasnet0_5"), inputs=IMG),
    "mobilenet_v3_small": dict(build=tv("mobilenet_v3_small"), inputs=IMG),
    "efficientnet_b0": dict(build=tv("efficientnet_b0"), inputs=IMG),
    "regnet_y_400mf": dict(build=tv("regnet_y_400mf"), inputs=IMG),
    "googlenet": dict(build=tv("googlenet", aux_logits=False, init_weights=True), inputs=IMG),
    "densenet121": dict(build=tv("densenet121"), inputs=IMG, opsets=(17,)),
    # init_weights=False: torchvision's own init (truncated normal, std 0.1) makes
    # the random network's logits ~1e12.
    "inception_v3": dict(build=tv("inception_v3", aux_logits=False, init_weights=False),
                         inputs=[("input", (1, 3, 299, 299), "image")], opsets=(17,)),
    "convnext_tiny": dict(build=tv("convnext_tiny"), inputs=IMG, opsets=(17,)),
    "swin_t": dict(build=tv("swin_t"), inputs=IMG, opsets=(17,)),
    # Transformers.
    "vit_tiny": dict(build=vit_tiny, inputs=[("x", (1, 3, 64, 64), "image")]),
    "vit_block": dict(build=ViTBlock, inputs=[("x", (2, 3, 64, 64), "image")]),
    "text_classifier": dict(build=TextClassifier, inputs=[("ids", (2, 64), "ids")]),
    "seq2seq": dict(build=Seq2Seq, inputs=[("src", (1, 32, 128), "randn"),
                                           ("tgt", (1, 24, 128), "randn")]),
    # Recurrent.
    "lstm": dict(build=LSTMModel, inputs=[("x", (2, 16, 32), "randn")]),
    "gru": dict(build=GRUModel, inputs=[("x", (3, 12, 32), "randn"), ("h0", (2, 3, 48), "randn")]),
    "rnn_tanh": dict(build=RNNTanh, inputs=[("x", (2, 10, 16), "randn")]),
    # U-Net.
    "unet": dict(build=UNet, inputs=[("x", (1, 3, 64, 64), "image")]),
    # Scripted control flow (If, Loop): data sets that take each branch and
    # several trip counts (0 included), each run against PyTorch.
    "scripted_branch": dict(build=ScriptedBranch, script=True, inputs=[("x", (4, 16), "randn")],
                            data_inputs=[(5, 16)], more_data_inputs=[[(3, 16)], [(2, 16)]],
                            dynamic_axes={"x": {0: "batch"}, "output_0": {0: "batch"}}),
    "scripted_decoder": dict(build=ScriptedDecoder, script=True, inputs=[("x", (2, 4, 8), "randn")],
                             data_inputs=[(3, 5, 8)], more_data_inputs=[[(1, 1, 8)], [(2, 0, 8)]],
                             dynamic_axes={"x": {0: "batch", 1: "steps"}}),
    "scripted_while": dict(build=ScriptedWhile, script=True, inputs=[("x", (4, 16), "randn")],
                           data_inputs=[(4, 16)], more_data_inputs=[[(1, 16)], [(9, 16)]],
                           dynamic_axes={"x": {0: "batch"}, "output_0": {0: "batch"}}),
    "scripted_nested": dict(build=ScriptedNested, script=True,
                            inputs=[("x", (4, 16), "randn"), ("steps", (3,), "randn")],
                            data_inputs=[(5, 16), (5,)], more_data_inputs=[[(2, 16), (0,)],
                                                                          [(1, 16), (2,)]],
                            dynamic_axes={"x": {0: "batch"}, "steps": {0: "n"},
                                          "output_0": {0: "batch"}}),
    # A size the run decides (Note [Data-dependent shapes] in codegen/Staged.cpp):
    # each data set has another count of positive values.
    "masked_select": dict(build=MaskedSelect, inputs=[("x", (4, 16), "randn")],
                          data_inputs=[(4, 16)], more_data_inputs=[[(4, 16)], [(4, 16)]]),
    "topk_half": dict(build=TopKHalf, inputs=[("x", (2, 10, 16), "randn")],
                      data_inputs=[(3, 12, 16)], more_data_inputs=[[(1, 5, 16)]],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}}),
    "topk_counted": dict(build=TopKCounted, script=True, inputs=[("x", (4, 16), "randn")],
                         data_inputs=[(4, 16)], more_data_inputs=[[(2, 16)], [(5, 16)]],
                         dynamic_axes={"x": {0: "batch"}}),
    "scripted_append": dict(build=ScriptedAppend, script=True, inputs=[("x", (2, 4, 8), "randn")],
                            data_inputs=[(3, 5, 8)], more_data_inputs=[[(1, 1, 8)], [(2, 7, 8)]],
                            dynamic_axes={"x": {0: "batch", 1: "steps"}}),
    # Dynamic batch: exported at batch 64 with dim 0 named "batch"; the test data
    # uses batch 5, so a consumer must bind the symbol from the inputs (or --dim).
    "mlp_dynamic": dict(build=MLP, inputs=[("x", (64, 784), "randn")], data_inputs=[(5, 784)],
                        more_data_inputs=[[(1, 784)]],
                        dynamic_axes={"x": {0: "batch"}, "output_0": {0: "batch"}}),
    # Dynamic batch through SiLU and squeeze-excite kernels on channels-last
    # buffers (Note [Shared kernels in channels-last] in codegen/RunTimeSizes.cpp).
    "efficientnet_b0_dynamic": dict(build=tv("efficientnet_b0"),
                                    inputs=[("input", (2, 3, 224, 224), "image")],
                                    data_inputs=[(3, 3, 224, 224)],
                                    more_data_inputs=[[(1, 3, 224, 224)]], opsets=(17,),
                                    dynamic_axes={"input": {0: "batch"}, "output_0": {0: "batch"}}),
    # Dynamic batch x sequence: exported at [2, 32], run at [3, 17] and [1, 5].
    "causal_lm_dynamic": dict(build=CausalLM, inputs=[("ids", (2, 32), "ids")],
                              data_inputs=[(3, 17)], more_data_inputs=[[(1, 5)]], opsets=(17,),
                              dynamic_axes={"ids": {0: "batch", 1: "seq"},
                                            "output_0": {0: "batch", 1: "seq"}}),
}


# The dynamo zoo (--exporter dynamo): what torch.onnx.export(..., dynamo=True),
# PyTorch 2.x's default exporter, writes at opset 18 and at the newest opset
# it writes (23). Run by the torch 2.x of the build tree's venv (scripts/venv.sh).
DYNAMO_OPSETS = (18, 23)
DYNAMO_MODELS = {
    "resnet50": dict(build=tv("resnet50"), inputs=IMG, calibrate_bn=True),
    "mobilenet_v3_large": dict(build=tv("mobilenet_v3_large"), inputs=IMG),
    "efficientnet_b0": MODELS["efficientnet_b0"],
    "convnext_tiny": dict(build=tv("convnext_tiny"), inputs=IMG),
    "swin_t": dict(build=tv("swin_t"), inputs=IMG),
    "vit_encoder": dict(build=PatchViT, inputs=[("x", (2, 3, 64, 64), "image")]),
    "decoder_lm": dict(build=DecoderLM, inputs=[("ids", (2, 64), "ids")]),
    "gn_unet_block": dict(build=GNUNetBlock, inputs=[("x", (1, 3, 64, 64), "image")]),
    "seq2seq": dict(MODELS["seq2seq"], build=lambda: Seq2Seq(declare_causal=True)),
    "fold_antialias": dict(build=FoldAntialias, inputs=[("x", (2, 8, 40, 36), "randn")]),
    "resnet18_dynamic": dict(build=tv("resnet18"), inputs=[("input", (4, 3, 224, 224), "image")],
                             data_inputs=[(3, 3, 224, 224)],
                             dynamic_axes={"input": {0: "batch"}, "output_0": {0: "batch"}}),
    # Dynamic batch x sequence (positions sliced and the causal mask sized by seq).
    "decoder_lm_dynamic": dict(build=DecoderLM, inputs=[("ids", (2, 64), "ids")],
                               data_inputs=[(3, 17)], more_data_inputs=[[(1, 5)]],
                               dynamic_axes={"ids": {0: "batch", 1: "seq"},
                                             "output_0": {0: "batch", 1: "seq"}}),
}


# --------------------------------------------------------------------------

def randomize(model, gen):
    """Random weights everywhere, including BatchNorm statistics and affine
    parameters (fresh ones are mean 0 / var 1 / weight 1 / bias 0, which would
    leave batch_norm an identity and test nothing)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 0.5 + 0.75)
                if m.affine:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
            elif isinstance(m, nn.Linear) and not m.weight.any():
                # zero-initialized heads (torchvision's ViT) would make the output 0
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.05)
            elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
            elif isinstance(m, nn.GroupNorm) and m.affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)


def calibrate_batchnorm(model, inputs, gen, batches=4):
    """Replace BatchNorm's random statistics with the ones of the network's own
    activations on a few seeded inputs, as training would: each BatchNorm then
    normalizes what it sees, and a deep network's logits keep a trained one's
    size. Without it torchvision's resnet50 gives logits of 229, where
    PyTorch's own float32 rounding (1.4e-4 against float64) is already above
    the 1e-4 floor the dynamo zoo is checked at."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*[make_input(shape, kind, gen) for _, shape, kind in inputs])
    model.eval()


def make_input(shape, kind, gen):
    if kind == "randn":
        return torch.randn(shape, generator=gen)
    if kind == "image":
        x = torch.rand(shape, generator=gen)
        mean = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
        return (x - mean) / std
    if kind == "ids":
        ids = torch.randint(1, 1000, shape, generator=gen)
        ids[:, shape[1] * 3 // 4:] = 0  # padding
        ids[0, -1] = 17  # one row without trailing padding at its end
        return ids
    raise ValueError(kind)


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(flat_outputs(o))
    return res


def to64(t):
    return t.double() if t.is_floating_point() else t


def build_model(name, spec):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + 1)
    model = spec["build"]()
    randomize(model, gen)
    if spec.get("calibrate_bn"):
        calibrate_batchnorm(model, spec["inputs"], gen)
    model.eval()
    if spec.get("script"):
        model = torch.jit.script(model)
    inputs = [make_input(shape, kind, gen) for _, shape, kind in spec["inputs"]]
    data_sets = [inputs]
    if "data_inputs" in spec:
        data_sets = [[make_input(shape, kind, gen)
                      for shape, (_, _, kind) in zip(shapes, spec["inputs"])]
                     for shapes in [spec["data_inputs"]] + spec.get("more_data_inputs", [])]
    return model, inputs, data_sets


def max_errors(got, want):
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    diff = np.abs(got - want)
    rel = diff / np.maximum(np.abs(want), 1e-30)
    return dict(max_abs=float(diff.max(initial=0)), max_rel=float(rel.max(initial=0)),
                max_abs_ref=float(np.abs(want).max(initial=0)))


def export_one(name, spec, opset, out_dir, cache, measure_fp64, exporter="torchscript"):
    final = os.path.join(out_dir, "%s-op%d" % (name, opset))
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.time()
    if name not in cache:
        model, inputs, data_sets = build_model(name, spec)
        # Grad mode stays on (here and in the export): under no_grad, PyTorch 1.13
        # takes the fused inference fast path of nn.TransformerEncoderLayer and
        # nn.MultiheadAttention (aten::_transformer_encoder_layer_fwd,
        # aten::_native_multi_head_attention), which torch.onnx cannot export.
        out_sets = [[o.detach().clone() for o in flat_outputs(model(*d))] for d in data_sets]
        outs = out_sets[0]
        errs = [None] * len(outs)
        if measure_fp64:
            m64 = copy.deepcopy(model).double()
            outs64 = [o.detach() for o in flat_outputs(m64(*[to64(x) for x in data_sets[0]]))]
            errs = [max_errors(o.numpy(), o64.numpy()) if o.is_floating_point() else None
                    for o, o64 in zip(outs, outs64)]
            del m64
        cache[name] = (model, inputs, data_sets, out_sets, errs)
    model, inputs, data_sets, out_sets, errs = cache[name]
    data_inputs, outs = data_sets[0], out_sets[0]
    t_run = time.time() - t0
    input_names = [n for n, _, _ in spec["inputs"]]
    output_names = ["output_%d" % i for i in range(len(outs))]
    path = os.path.join(tmp, "model.onnx")
    log = io.StringIO()
    t1 = time.time()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        if exporter == "dynamo":
            # torch.export traces the model; onnxscript's torchlib translates it
            # and optimizes the ONNX graph (constant folding, function inlining).
            torch.onnx.export(model, tuple(inputs), path, opset_version=opset, dynamo=True,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=spec.get("dynamic_axes"))
        else:
            torch.onnx.export(model, tuple(inputs), path, opset_version=opset,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=spec.get("dynamic_axes"), do_constant_folding=True)
    t_export = time.time() - t1
    onnx_model = onnx.load(path)
    onnx.checker.check_model(onnx_model)
    if len(onnx_model.graph.output) != len(outs):
        raise RuntimeError("%s: ONNX graph has %d outputs, PyTorch %d"
                           % (name, len(onnx_model.graph.output), len(outs)))
    graph_inputs = [i.name for i in onnx_model.graph.input]
    # One test_data_set_K per data set (a dynamic model's sets have other sizes).
    for n, (set_inputs, set_outs) in enumerate(zip(data_sets, out_sets)):
        data = os.path.join(tmp, "test_data_set_%d" % n)
        os.makedirs(data)
        for k, x in enumerate(set_inputs):
            with open(os.path.join(data, "input_%d.pb" % k), "wb") as f:
                f.write(numpy_helper.from_array(x.numpy(), graph_inputs[k]).SerializeToString())
        for k, o in enumerate(set_outs):
            with open(os.path.join(data, "output_%d.pb" % k), "wb") as f:
                f.write(numpy_helper.from_array(o.numpy(), onnx_model.graph.output[k].name)
                        .SerializeToString())
    ops = sorted({n.op_type for n in onnx_model.graph.node})
    info = dict(model=name, opset=opset, exporter=exporter, torch=torch.__version__,
                torchvision=torchvision.__version__, onnx=onnx.__version__,
                inputs=[dict(name=graph_inputs[k], shape=list(x.shape), dtype=str(x.dtype))
                        for k, x in enumerate(data_inputs)],
                outputs=[dict(name=onnx_model.graph.output[k].name, shape=list(o.shape),
                              dtype=str(o.dtype), fp64_error=errs[k],
                              max_abs=float(o.abs().max()) if o.is_floating_point() else None)
                         for k, o in enumerate(outs)],
                data_sets=[[list(x.shape) for x in d] for d in data_sets],
                dynamic_axes=spec.get("dynamic_axes"), onnx_ops=ops,
                nodes=len(onnx_model.graph.node),
                params=int(sum(np.prod(i.dims) for i in onnx_model.graph.initializer)),
                seconds=dict(torch_run=round(t_run, 2), export=round(t_export, 2)))
    with open(os.path.join(tmp, "info.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return info


def read_list(path):
    """The exports named by tests/models/tolerances ('NAME OPSETS RTOL ATOL ...')."""
    res = set()
    with open(path) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if fields:
                res.update("%s-op%s" % (fields[0], o) for o in fields[1].split(","))
    return res


def generator_stamp():
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(("%s %s %s %s" % (torch.__version__, torchvision.__version__, onnx.__version__,
                               np.__version__)).encode())
    try:  # the dynamo exporter's translator
        from importlib.metadata import version
        h.update(version("onnxscript").encode())
    except Exception:
        pass
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--opsets", default="", help="restrict to these opsets, e.g. 17")
    ap.add_argument("--force", action="store_true", help="regenerate even if present")
    ap.add_argument("--list", action="store_true", help="print '<name>-op<N>' per export and exit")
    ap.add_argument("--expect-list", metavar="FILE",
                    help="fail unless FILE (tests/models/tolerances) lists exactly the zoo's exports")
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                    help="torch.onnx's TorchScript exporter (the zoo of MODELS, torch 1.x or 2.x) "
                         "or its dynamo exporter (DYNAMO_MODELS, torch 2.x)")
    ap.add_argument("--fp64-error", action="store_true",
                    help="also run each model in float64 and record PyTorch's float32 error")
    args = ap.parse_args()

    dynamo = args.exporter == "dynamo"
    models = DYNAMO_MODELS if dynamo else MODELS
    if dynamo and int(torch.__version__.split(".")[0]) < 2:
        sys.exit("make_models.py: --exporter dynamo needs torch 2.x, this is torch %s (run it "
                 "with the venv's python, scripts/venv.sh)" % torch.__version__)
    names = list(models)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in models]
        if unknown:
            sys.exit("make_models.py: unknown model(s) %s; known: %s"
                     % (", ".join(unknown), ", ".join(models)))
    only_opsets = {int(o) for o in args.opsets.split(",") if o.strip()}
    jobs = [(n, o) for n in names
            for o in (DYNAMO_OPSETS if dynamo else models[n].get("opsets", DEFAULT_OPSETS))
            if not only_opsets or o in only_opsets]
    if args.list:
        for n, o in jobs:
            print("%s-op%d" % (n, o))
        return 0
    if args.expect_list:
        listed = read_list(args.expect_list)
        made = {"%s-op%d" % j for j in jobs}
        if not args.only and listed != made:
            sys.exit("make_models.py: %s and the zoo disagree:\n  only in the list: %s\n"
                     "  only in make_models.py: %s" % (args.expect_list,
                                                      " ".join(sorted(listed - made)) or "-",
                                                      " ".join(sorted(made - listed)) or "-"))
    if not args.out_dir:
        ap.error("OUT_DIR is required")

    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    stamp_path = os.path.join(out_dir, ".generator")
    stamp = generator_stamp()
    old = open(stamp_path).read().strip() if os.path.exists(stamp_path) else None
    if old != stamp:
        if old is not None:
            print("make_models.py: generator changed; regenerating %s" % out_dir)
        for entry in os.listdir(out_dir):
            p = os.path.join(out_dir, entry)
            if os.path.isdir(p) and "-op" in entry:
                shutil.rmtree(p)
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")

    start = time.time()
    cache, failures, made, skipped = {}, [], 0, 0
    for name, opset in jobs:
        final = os.path.join(out_dir, "%s-op%d" % (name, opset))
        if not args.force and os.path.exists(os.path.join(final, "model.onnx")):
            skipped += 1
            continue
        t0 = time.time()
        try:
            info = export_one(name, models[name], opset, out_dir, cache, args.fp64_error,
                              args.exporter)
        except Exception as e:  # report every failure, keep going
            failures.append("%s-op%d: %s: %s" % (name, opset, type(e).__name__, e))
            print("FAIL %s-op%d: %s" % (name, opset, failures[-1]), flush=True)
            continue
        made += 1
        scale = max((o["max_abs"] or 0.0 for o in info["outputs"]), default=0.0)
        worst = ""
        if args.fp64_error:
            worst = "  fp32-vs-fp64 max|err| %.1e" % max(
                (o["fp64_error"]["max_abs"] for o in info["outputs"] if o["fp64_error"]), default=0)
        print("made %-28s %5d nodes %9d params  max|out| %.2e%s  %.1fs"
              % ("%s-op%d" % (name, opset), info["nodes"], info["params"], scale, worst,
                 time.time() - t0), flush=True)
        if len(cache) > 1:  # keep only the model being exported at several opsets
            for k in list(cache):
                if k != name:
                    del cache[k]
    print("make_models.py: %d made, %d cached, %d failed in %.1fs -> %s"
          % (made, skipped, len(failures), time.time() - start, out_dir))
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

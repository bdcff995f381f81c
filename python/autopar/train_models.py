"""Small PyTorch models with their loss inside, for training with autopar.

``Gpt`` (a nanoGPT-style decoder: token and position embeddings, causal
self-attention, GELU MLP, dropout, cross-entropy) and ``Cnn`` (convolutions with
BatchNorm, max pooling, a linear classifier, cross-entropy) are what the training
benchmark (bench/bench_train.py) and the training quick start
(examples/tiny-gpt) train; ``export_for_training`` writes the training-mode ONNX
file autopar-compile --mode train takes. Importing this module needs torch.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, seq, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        # A buffer, not a parameter: autopar does not train it either (it only
        # reaches the loss through a comparison).
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, width, heads, seq, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, seq, dropout)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class Gpt(nn.Module):
    """forward(idx, targets) -> the mean cross-entropy of the next-token logits."""

    def __init__(self, vocab=256, width=128, heads=4, layers=2, seq=64, dropout=0.0):
        super().__init__()
        self.seq = seq
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, seq, dropout) for _ in range(layers))
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def logits(self, idx):
        b, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class Cnn(nn.Module):
    """forward(x, y) -> the mean cross-entropy of a small VGG-style classifier
    (3x3 convolutions, BatchNorm in training mode, ReLU, max pooling)."""

    def __init__(self, channels=3, width=32, classes=10, image=32):
        super().__init__()
        layers, c = [], channels
        for w in (width, 2 * width, 4 * width):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU(), nn.MaxPool2d(2)]
            c = w
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c * (image // 8) ** 2, classes)

    def forward(self, x, y):
        return F.cross_entropy(self.classifier(self.features(x).flatten(1)), y)


def export_for_training(model, example_inputs, input_names, path, output_names=("loss",)):
    """The training-mode export autopar-compile --mode train takes: training
    forms of Dropout and BatchNorm, no constant folding (so that the weights
    stay initializers)."""
    model.train()
    torch.onnx.export(model, tuple(example_inputs), path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=list(input_names),
                      output_names=list(output_names))

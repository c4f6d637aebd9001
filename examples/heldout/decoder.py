"""A decoder-only transformer (GPT-like): token and position embeddings, pre-norm blocks with causal
self-attention through `scaled_dot_product_attention`, a language-model head."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.act, self.out = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(self.act(self.fc(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab: int = 8192, d: int = 512, heads: int = 8, layers: int = 8, context: int = 256):
        super().__init__()
        self.vocab, self.context = vocab, context
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tok(input_ids) + self.pos(positions)
        return self.head(self.ln(self.blocks(x)))

    def example_inputs(self, batch: int):
        return torch.randint(0, self.vocab, (batch, self.context))

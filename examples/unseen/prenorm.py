"""A pre-norm transformer encoder, 512 wide, 6 layers, 8 heads, over 128 tokens: LayerNorm before attention
and before the feed-forward, residuals around both, a final LayerNorm and mean pooling."""
import torch
from torch import nn


class PreNormLayer(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.norm2(x))


class PreNormEncoder(nn.Module):
    def __init__(self, vocab: int = 16000, d: int = 512, heads: int = 8, layers: int = 6, length: int = 128,
                 classes: int = 4):
        super().__init__()
        self.vocab, self.length = vocab, length
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.layers = nn.ModuleList(PreNormLayer(d, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(dim=1))

    def example_inputs(self, batch: int):
        return torch.randint(0, self.vocab, (batch, self.length))

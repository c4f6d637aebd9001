"""A BERT-like encoder of its own width and depth (768 wide, 6 layers, 12 heads), taking token ids and a
padding mask by keyword, as a tokenizer hands them over."""
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, pad):
        x = self.ln1(x + self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0])
        return self.ln2(x + self.ff(x))


class Encoder(nn.Module):
    def __init__(self, vocab: int = 30000, d: int = 768, heads: int = 12, layers: int = 6, length: int = 128,
                 classes: int = 2):
        super().__init__()
        self.vocab, self.length = vocab, length
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(1, length, d))
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.classifier = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask):
        pad = ~attention_mask  # True where a position is padding
        x = self.tok(input_ids) + self.pos
        for layer in self.layers:
            x = layer(x, pad)
        return self.classifier(x[:, 0])

    def example_inputs(self, batch: int):
        lengths = torch.randint(self.length // 2, self.length + 1, (batch, 1))
        return {"input_ids": torch.randint(0, self.vocab, (batch, self.length)),
                "attention_mask": torch.arange(self.length)[None, :] < lengths}

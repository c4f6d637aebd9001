"""A text classifier: embeddings, a two-layer LSTM, the last step's hidden state to the classes."""
import torch
from torch import nn


class LSTMClassifier(nn.Module):
    def __init__(self, vocab: int = 20000, d: int = 256, hidden: int = 512, layers: int = 2, length: int = 128,
                 classes: int = 5):
        super().__init__()
        self.vocab, self.length = vocab, length
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        out, _ = self.lstm(self.emb(tokens))
        return self.head(out[:, -1])

    def example_inputs(self, batch: int):
        return torch.randint(0, self.vocab, (batch, self.length))

"""A message-passing graph network over a batch of graphs (64 nodes and 256 edges each): per layer, messages
from each edge's source node through an MLP, summed at the destination with index_add, a GRU-style update;
a mean over each graph's nodes to the classes. Many small gathers and scatters: a host-heavy step."""
import torch
from torch import nn


class MessageLayer(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.message = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU())
        self.update = nn.GRUCell(d, d)

    def forward(self, h, src, dst):
        m = self.message(torch.cat([h.index_select(0, src), h.index_select(0, dst)], dim=1))
        summed = torch.zeros_like(h).index_add(0, dst, m)
        return self.update(summed, h)


class GraphNet(nn.Module):
    def __init__(self, features: int = 32, d: int = 128, layers: int = 3, nodes: int = 64, edges: int = 256,
                 classes: int = 8):
        super().__init__()
        self.features, self.nodes, self.edges = features, nodes, edges
        self.embed = nn.Linear(features, d)
        self.layers = nn.ModuleList(MessageLayer(d) for _ in range(layers))
        self.head = nn.Linear(d, classes)

    def forward(self, x, src, dst):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, src, dst)
        return self.head(h.view(-1, self.nodes, h.shape[1]).mean(dim=1))

    def example_inputs(self, batch: int):
        offsets = (torch.arange(batch) * self.nodes).repeat_interleave(self.edges)
        src = torch.randint(0, self.nodes, (batch * self.edges,)) + offsets
        dst = torch.randint(0, self.nodes, (batch * self.edges,)) + offsets
        return torch.randn(batch * self.nodes, self.features), src, dst

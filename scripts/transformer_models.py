"""Transformer models in the shapes users run (BERT, GPT-2,
torch.nn.Transformer), sized by arguments: the benchmarks build them at full
size, the tests small. Random weights; nothing is downloaded."""
import torch


def distinct_layers(stack):
    """Gives every layer of `stack` weights of its own. torch's
    TransformerEncoder/Decoder deep-copy one layer, so all start equal, and
    torch.onnx then stores one copy that every layer reads: a model with a
    twelfth of BERT's weights. Real checkpoints differ per layer."""
    for layer in list(stack.layers)[1:]:
        for m in layer.modules():
            if isinstance(m, torch.nn.MultiheadAttention):
                m._reset_parameters()
            elif isinstance(m, (torch.nn.Linear, torch.nn.LayerNorm)):
                m.reset_parameters()
    return stack


class Bert(torch.nn.Module):
    """BERT-base's shape: token, position and segment embeddings, a layer
    norm, post-norm encoder layers with GELU, and the pooler."""

    def __init__(self, vocab=30522, d=768, heads=12, ff=3072, layers=12):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Embedding(512, d)
        self.segments = torch.nn.Embedding(2, d)
        self.norm = torch.nn.LayerNorm(d, eps=1e-12)
        layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0,
                                                 activation="gelu", batch_first=True)
        self.encoder = distinct_layers(
            torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False))
        self.pooler = torch.nn.Linear(d, d)

    def forward(self, ids, segments):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.norm(self.tokens(ids) + self.positions(positions) + self.segments(segments))
        h = self.encoder(h)
        return h, torch.tanh(self.pooler(h[:, 0]))


class GPT2(torch.nn.Module):
    """GPT-2 small's shape: learned positions, pre-norm causal decoder
    blocks, the output head tied to the token embedding."""

    def __init__(self, vocab=50257, d=768, heads=12, layers=12, seq=128):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Embedding(1024, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = distinct_layers(
            torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False))
        self.norm = torch.nn.LayerNorm(d)
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.tokens(ids) + self.positions(positions)
        h = self.norm(self.blocks(h, mask=self.causal))
        return h @ self.tokens.weight.t()


class Transformer(torch.nn.Module):
    """torch.nn.Transformer: encoder and decoder stacks, batch first."""

    def __init__(self, d=512, heads=8, ff=2048, layers=6):
        super().__init__()
        self.model = torch.nn.Transformer(d, heads, layers, layers, ff, dropout=0.0,
                                          batch_first=True)

    def forward(self, src, tgt):
        return self.model(src, tgt)

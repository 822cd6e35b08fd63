#!/usr/bin/python3
"""Export a torchvision classification model or a TransformerEncoder to ONNX.

Weights are random with a fixed seed, normalization statistics included
(see randomize_norms): nothing is downloaded.

    export_model.py resnet18 resnet18.onnx [--opset 17]
    export_model.py transformer_encoder enc.onnx --opset 13
"""
import argparse
import warnings

import torch
import torchvision

# Spatial size each family expects (inception_v3 needs 299).
INPUT_SIZE = {"inception_v3": 299}


class TransformerEncoderModel(torch.nn.Module):
    """Two post-norm encoder layers, batch first, as users build them."""

    def __init__(self, d_model=128, nhead=4, ff=256, layers=2):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            d_model, nhead, ff, dropout=0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers,
                                                   enable_nested_tensor=False)

    def forward(self, src):
        return self.encoder(src)


def randomize_norms(model, seed=1):
    """Gives normalization layers trained-like statistics and affine terms.

    Freshly built layers normalize with mean 0 and variance 1 and scale by 1
    and shift by 0, so exported (folded) biases are all zeros and every
    convolution's bias is the same constant: a model no one trains, which
    hides how biases are lowered and lets CSE merge what real models keep
    apart.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and \
                    m.running_mean is not None:
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            if isinstance(m, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm,
                              torch.nn.GroupNorm)) and getattr(m, "weight", None) is not None:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    return model


def build(name):
    """Returns (model, example input, dynamic axes) for `name`."""
    torch.manual_seed(0)
    if name == "transformer_encoder":
        model = randomize_norms(TransformerEncoderModel().eval())
        # Batch and sequence are symbolic, as exported for serving; the
        # compiler fixes them with --input-shape.
        return model, torch.randn(2, 16, 128), {"input": {0: "batch", 1: "seq"}}
    model = randomize_norms(getattr(torchvision.models, name)(weights=None).eval())
    size = INPUT_SIZE.get(name, 224)
    return model, torch.randn(1, 3, size, size), None


def export(name, path, opset=17):
    model, example, dynamic_axes = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example, path, opset_version=opset,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes=dynamic_axes)
    return example


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="torchvision model name or transformer_encoder")
    parser.add_argument("output", help="where to write the .onnx file")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()
    example = export(args.model, args.output, args.opset)
    print(f"exported {args.model} (input {'x'.join(map(str, example.shape))}, "
          f"opset {args.opset}) to {args.output}")


if __name__ == "__main__":
    main()

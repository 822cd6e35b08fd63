#!/usr/bin/env python3
"""Hugging Face models at their published sizes, from their configs (random
weights, nothing downloaded), through the Python API on the IPU model: the
largest difference from PyTorch (fp32), the compile time, the IPU model's
time per call on this host and the estimate's.

    .venv/bin/python benchmarks/huggingface.py [--models bert-base,gpt2,vit-b16]

Run by .venv's Python (scripts/install-deps.sh installs transformers
there). Not a test: the models compile for minutes on two cores.
"""
import argparse
import os
import sys
import time

# benchmarks/transformers.py (Tessera's own transformer benchmark) is beside
# this script: the package is Hugging Face's.
sys.path = [p for p in sys.path
            if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402
import transformers  # noqa: E402

import tessera  # noqa: E402


def bert_base():
    config = transformers.BertConfig()  # bert-base-uncased's shape
    ids = torch.randint(0, config.vocab_size, (1, 128))
    return transformers.BertModel(config), {"input_ids": ids,
                                            "attention_mask": torch.ones_like(ids)}


def gpt2_small():
    config = transformers.GPT2Config()  # gpt2 (124M)
    return transformers.GPT2Model(config), {
        "input_ids": torch.randint(0, config.vocab_size, (1, 128))}


def vit_b16():
    config = transformers.ViTConfig()  # google/vit-base-patch16-224's shape
    return transformers.ViTModel(config), {"pixel_values": torch.randn(1, 3, 224, 224)}


MODELS = {"bert-base": bert_base, "gpt2": gpt2_small, "vit-b16": vit_b16}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, inputs = MODELS[name]()
        model.eval()
        ipu = tessera.inferenceModel(model)
        with torch.no_grad():
            start = time.perf_counter()
            ipu.compile(**inputs)
            compiled = time.perf_counter() - start
            start = time.perf_counter()
            got = ipu(**inputs)
            ran = time.perf_counter() - start
            want = model(**inputs)
        diff = float((got.last_hidden_state - want.last_hidden_state).abs().max())
        scale = float(want.last_hidden_state.abs().max())
        cycles = ipu.cycleCount()
        print(f"{name}: max |IPU model - PyTorch| {diff:.2e} (outputs up to {scale:.2f}); "
              f"compile {compiled:.1f} s; a call {ran * 1e3:.0f} ms on this host; "
              f"estimated {cycles:,} cycles ({cycles / 1.33e9 * 1e3:.3f} ms on an ipu2)")


if __name__ == "__main__":
    main()

"""Hugging Face transformers models, built from their configs (random
weights, nothing downloaded), through the Python API: BERT, GPT-2 and ViT
match PyTorch on the IPU model; a BERT classifier fine-tunes pipelined over
two IPUs with an optimum-graphcore IPUConfig and reaches the weights of the
unpipelined run. Run by .venv's Python (scripts/install-deps.sh installs
transformers there, pinned in python/requirements.txt). The models are
checked at two sizes: small (2 layers) and as published (bert-base,
gpt2, vit-base-patch16-224: about 10 s each to compile on two cores);
benchmarks/huggingface.py prints the published sizes' figures.
"""
import pytest
import torch
import transformers

import tessera

SMALL = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def bert():
    config = transformers.BertConfig(hidden_size=64, vocab_size=100, **SMALL)
    inputs = {"input_ids": torch.randint(0, 100, (2, 8)),
              "attention_mask": torch.ones(2, 8, dtype=torch.long),
              "token_type_ids": torch.zeros(2, 8, dtype=torch.long)}
    return transformers.BertModel(config), inputs


def gpt2():
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                                     n_positions=32)
    return transformers.GPT2Model(config), {"input_ids": torch.randint(0, 100, (2, 8))}


def vit():
    config = transformers.ViTConfig(hidden_size=64, image_size=32, patch_size=8, **SMALL)
    return transformers.ViTModel(config), {"pixel_values": torch.randn(2, 3, 32, 32)}


def bert_base():
    config = transformers.BertConfig()
    ids = torch.randint(0, config.vocab_size, (1, 128))
    return transformers.BertModel(config), {"input_ids": ids,
                                            "attention_mask": torch.ones_like(ids)}


def gpt2_small():
    config = transformers.GPT2Config()
    return transformers.GPT2Model(config), {
        "input_ids": torch.randint(0, config.vocab_size, (1, 128))}


def vit_b16():
    return transformers.ViTModel(transformers.ViTConfig()), {
        "pixel_values": torch.randn(1, 3, 224, 224)}


@pytest.mark.parametrize("build", [bert, gpt2, vit, bert_base, gpt2_small, vit_b16],
                         ids=lambda f: f.__name__)
def test_model_matches_pytorch(build):
    torch.manual_seed(0)
    model, inputs = build()
    model.eval()
    with torch.no_grad():
        got = tessera.inferenceModel(model)(**inputs)
        want = model(**inputs)
    # The model's own output class, with its fields.
    assert type(got) is type(want)
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state,
                               rtol=1e-4, atol=1e-4)
    if getattr(want, "pooler_output", None) is not None:
        torch.testing.assert_close(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-4)


def test_bert_fine_tunes_pipelined_with_its_ipu_config_to_the_unpipelined_weights():
    config = transformers.BertConfig(hidden_size=64, vocab_size=100, num_labels=3, **SMALL)
    batches = [(torch.randint(0, 100, (8, 8)), torch.randint(0, 3, (8,))) for _ in range(3)]
    trained = []
    for layers_per_ipu in ([-1], [1, 1]):
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification(config)
        model.train()
        ipu_config = tessera.IPUConfig(layers_per_ipu=layers_per_ipu,
                                       gradient_accumulation_steps=4, device_iterations=1)
        options = ipu_config.to_options()
        optimizer = tessera.optim.SGD(model.parameters(), lr=0.05)
        training = tessera.trainingModel(model, options, optimizer)
        for ids, labels in batches:
            out = training(input_ids=ids, labels=labels)
        assert torch.isfinite(out.loss).all()
        info = training._executable.info
        if layers_per_ipu == [1, 1]:
            assert info["num_ipus"] == 2 and info["pipeline_stages"] >= 2, info
        trained.append({k: v.clone() for k, v in model.state_dict().items()})
    for name, value in trained[0].items():
        torch.testing.assert_close(trained[1][name], value, rtol=1e-4, atol=1e-5, msg=name)

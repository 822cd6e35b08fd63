"""optimum-graphcore's IPUConfig: the JSON file users keep beside a model.

The attributes, defaults and methods are optimum-graphcore's, so its
published configurations (bert-base-ipu, gpt2-ipu, vit-base-ipu, ...) load
unchanged. `to_options` turns one into `tessera.Options` (layers spread
over IPUs, replication and the rest); what Tessera does not build yet is
reported as not available when options are made from it, never dropped.
"""
import copy
import json
import os
import warnings

import torch

from ._errors import Error, not_available
from .options import Options, OutputMode

CONFIG_NAME = "ipu_config.json"

# Attribute -> default (optimum-graphcore 3.x). `inference_*` twins default
# to their training value.
_DEFAULTS = {
    "seed": None,
    "auto_loss_scaling": False,
    "executable_cache_dir": "",
    "profile_dir": "",
    "replication_factor": 1,
    "inference_replication_factor": 1,
    "gradient_accumulation_steps": 1,
    "device_iterations": 1,
    "inference_device_iterations": 1,
    "layers_per_ipu": [-1],
    "inference_layers_per_ipu": None,
    "ipus_per_replica": None,
    "inference_ipus_per_replica": None,
    "optimizer_state_offchip": True,
    "replicated_tensor_sharding": False,
    "matmul_proportion": 0.2,
    "inference_matmul_proportion": None,
    "enable_half_partials": True,
    "embedding_serialization_factor": 1,
    "serialized_embedding_splits_per_ipu": None,
    "projection_serialization_factor": 1,
    "serialized_projection_splits_per_ipu": None,
    "recompute_checkpoint_every_layer": False,
    "output_mode": "final",
    "execute_encoder_on_cpu_for_generation": False,
    "explicit_ir_inference": False,
}
# Written by optimum-graphcore and transformers into saved files: kept, not
# options.
_METADATA = {"optimum_version", "transformers_version", "optimum_graphcore_version"}
_TWINS = {"layers_per_ipu", "ipus_per_replica", "matmul_proportion"}


class IPUConfig:
    """optimum.graphcore.IPUConfig, for Tessera."""

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - set(_DEFAULTS) - _METADATA)
        if unknown:
            warnings.warn(f"IPUConfig: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(unknown)} (kept in to_dict, not used)", stacklevel=2)
        values = copy.deepcopy(_DEFAULTS)
        values.update(copy.deepcopy(kwargs))
        if values["ipus_per_replica"] is None:
            values["ipus_per_replica"] = len(values["layers_per_ipu"])
        for name in _TWINS:
            if values[f"inference_{name}"] is None:
                values[f"inference_{name}"] = copy.deepcopy(values[name])
        self.__dict__.update(values)
        self._check()

    def _check(self):
        for name in ("replication_factor", "inference_replication_factor",
                     "gradient_accumulation_steps", "device_iterations",
                     "inference_device_iterations", "ipus_per_replica",
                     "inference_ipus_per_replica", "embedding_serialization_factor",
                     "projection_serialization_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise Error(f"IPUConfig: {name} must be a positive integer, got {value!r}")
        for name in ("layers_per_ipu", "inference_layers_per_ipu"):
            layers = getattr(self, name)
            if not isinstance(layers, list) or not layers or not all(
                    isinstance(n, int) and n >= -1 for n in layers):
                raise Error(f"IPUConfig: {name} must be a list of layer counts (-1: split "
                            f"the rest evenly, 0: none), got {layers!r}")
        for name in ("matmul_proportion", "inference_matmul_proportion"):
            value = getattr(self, name)
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, (int, float)) and 0 < v <= 1 for v in values):
                raise Error(f"IPUConfig: {name} must be in (0, 1] (or a list, one per IPU), "
                            f"got {value!r}")
        if self.output_mode not in ("all", "sum", "final", "default"):
            raise Error(f"IPUConfig: output_mode must be all, sum, final or default, got "
                        f"{self.output_mode!r}")

    # -- Files and dictionaries --------------------------------------------

    @classmethod
    def from_dict(cls, values):
        return cls(**values)

    @classmethod
    def from_json_file(cls, path):
        try:
            with open(path) as f:
                values = json.load(f)
        except json.JSONDecodeError as e:
            raise Error(f"{path}: not valid JSON: {e}") from None
        if not isinstance(values, dict):
            raise Error(f"{path}: an IPU configuration is a JSON object")
        return cls.from_dict(values)

    @classmethod
    def from_pretrained(cls, name_or_path, **overrides):
        """From a directory holding ipu_config.json, or a JSON file (models
        are never downloaded)."""
        path = str(name_or_path)
        if os.path.isdir(path):
            path = os.path.join(path, CONFIG_NAME)
        if not os.path.isfile(path):
            raise Error(f"IPUConfig.from_pretrained: no {CONFIG_NAME} at '{name_or_path}' "
                        "(Tessera reads local files only; download the configuration first)")
        config = cls.from_json_file(path)
        for key, value in overrides.items():
            if key not in config.__dict__:
                raise Error(f"IPUConfig.from_pretrained: unknown key {key!r}")
            setattr(config, key, value)
        config._check()
        return config

    def to_dict(self):
        return copy.deepcopy(dict(self.__dict__))

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save_pretrained(self, directory):
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, CONFIG_NAME)
        with open(path + ".tmp", "w") as f:
            f.write(self.to_json_string())
        os.replace(path + ".tmp", path)

    def update_from_string(self, update):
        """optimum's "key=value,key=[a b c]" updates: ints, floats, strings
        as they are, true/false, lists in brackets; each key must exist."""
        for item in filter(None, update.split(",")):
            if "=" not in item:
                raise Error(f"IPUConfig.update_from_string: expected key=value, got {item!r}")
            key, text = item.split("=", 1)
            key = key.strip()
            if key not in self.__dict__:
                raise Error(f"IPUConfig.update_from_string: key {key} isn't in the "
                            "original config dict")
            setattr(self, key, _parse_value(text.strip()))
        self._check()
        return self

    def __repr__(self):
        return f"IPUConfig {self.to_json_string()}"

    def __eq__(self, other):
        return isinstance(other, IPUConfig) and self.to_dict() == other.to_dict()

    # -- Options -------------------------------------------------------------

    def batch_size_factor(self, for_inference=False):
        """Samples per host call per micro-batch sample: replication x
        gradient accumulation x device iterations (inference: replication x
        device iterations)."""
        if for_inference:
            return self.inference_replication_factor * self.inference_device_iterations
        return (self.replication_factor * self.gradient_accumulation_steps *
                self.device_iterations)

    def to_options(self, for_inference=False, compile_only=False):
        """tessera.Options with this configuration's values."""
        prefix = "inference_" if for_inference else ""
        ipus = getattr(self, f"{prefix}ipus_per_replica")
        layers = getattr(self, f"{prefix}layers_per_ipu")
        replication = getattr(self, f"{prefix}replication_factor")
        opts = Options()
        opts.replicationFactor(replication)
        # optimum-graphcore's layers_per_ipu: the layers found from the
        # model's module paths, pipelined over the IPUs.
        if ipus > 1 and list(layers) == [-1]:
            layers = [-1] * ipus  # optimum's "split evenly"
        if ipus > 1 or len(layers) > 1:
            if len(layers) != ipus:
                raise Error(f"{prefix}layers_per_ipu {layers} has {len(layers)} entries but "
                            f"{prefix}ipus_per_replica is {ipus}: give one per IPU")
            opts._stages["layers_per_ipu"] = list(layers)
            opts._stages["num_ipus"] = ipus
        if self.recompute_checkpoint_every_layer and not for_inference:
            opts._stages["recompute"] = "checkpoint-every-layer"
        if self.auto_loss_scaling and not for_inference:
            opts._stages["loss_scaling"] = "auto"
        opts.deviceIterations(getattr(self, f"{prefix}device_iterations"))
        if not for_inference:
            opts.Training.gradientAccumulation(self.gradient_accumulation_steps)
        opts.outputMode({"all": OutputMode.All, "sum": OutputMode.Sum,
                         "final": OutputMode.Final, "default": OutputMode.Default}[
                             self.output_mode])
        if self.seed is not None:
            opts.randomSeed(self.seed)
        if self.executable_cache_dir:
            opts.enableExecutableCaching(self.executable_cache_dir)
        proportion = getattr(self, f"{prefix}matmul_proportion")
        if isinstance(proportion, list):
            proportion = proportion[0]
        opts.setAvailableMemoryProportion({"IPU0": proportion})
        # As optimum-graphcore: fp16 partials for the matmuls and convolutions
        # of a half model (an fp32 one is unaffected).
        opts.Precision.setPartialsType(torch.float16 if self.enable_half_partials
                                       else torch.float32)
        if compile_only:
            opts.useOfflineIpuTarget()
        return opts


def _parse_value(text):
    if text.startswith("[") and text.endswith("]"):
        return [_parse_value(t) for t in text[1:-1].split()]
    if text in ("true", "false"):
        return text == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text in ("None", "null"):
        return None
    return text

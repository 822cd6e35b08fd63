"""Shared fixtures: where the built tools are, and model export helpers."""
import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get(
    "TESSERA_SOURCE_DIR",
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
TOOLS_DIR = os.environ.get("TESSERA_TOOLS_DIR",
                           os.path.join(SOURCE_DIR, "build", "bin"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test", "Importers", "ONNX", "Inputs"))


def tool(name):
    path = os.path.join(TOOLS_DIR, name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built")
    return path


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)

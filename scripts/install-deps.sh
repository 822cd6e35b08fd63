#!/usr/bin/env bash
# Installs the Debian 12 packages Tessera builds and tests with. Idempotent:
# does nothing when everything is already installed. Run as root.
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build ccache g++ git
  # MLIR/LLVM 22
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # ONNX importer
  libonnx-dev libprotobuf-dev protobuf-compiler
  # TorchScript importer
  libtorch-dev
  # tests and model export
  libgtest-dev python3-torch python3-torchvision python3-onnx python3-numpy
  python3-pytest pybind11-dev libonnx-testdata
  # the Python module (pybind11 extension)
  python3-dev
  # .npz inputs and data sets (CRC-checked, compressed and ZIP64 members)
  libzip-dev
  # coverage-guided fuzzers (libFuzzer) of the runtime's file readers
  clang-22 libclang-rt-22-dev
  # the training example's data set (8x8 digits, shipped with the package)
  python3-sklearn
  # the report page's tests: headless Chromium driven over WebDriver
  chromium chromium-driver
  # .venv for the PyPI packages of python/requirements.txt
  python3-venv python3-pip
  # tessera-launch: instances over OpenMPI, collectives between processes
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q "${missing[@]}"
fi

# PyPI packages (python/requirements.txt: Hugging Face transformers, pinned)
# in .venv, over Debian's: made from /usr/bin/python3 with
# --system-site-packages, so torch, numpy and the tessera and poptorch
# packages (build.sh's .pth file) are Debian's and this checkout's. The
# constraints hold torch and numpy at the versions pip sees installed: pip
# never installs a second torch. Done again only when the list changes.
cd "$(dirname "$0")/.."
VENV=.venv
if [ ! -x "$VENV/bin/python" ] || ! cmp -s python/requirements.txt "$VENV/requirements.txt"; then
  echo "install-deps: PyPI packages into $VENV (python/requirements.txt)"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  /usr/bin/python3 - > "$VENV/constraints.txt" <<'PY'
import importlib.metadata as m
for name in ("torch", "torchvision", "numpy", "onnx"):
    try:
        print(f"{name}=={m.version(name)}")
    except m.PackageNotFoundError:
        pass
PY
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    -r python/requirements.txt -c "$VENV/constraints.txt"
  cp python/requirements.txt "$VENV/requirements.txt"
else
  echo "install-deps: $VENV has python/requirements.txt's packages"
fi

"""A cache no one else can plant code in.

A .tess and a kernel object are native code Tessera runs, so the executable
cache and its kernel cache are refused, before anything in them is read,
when anyone but the user (or root) could have written them: a group- or
world-writable directory, an entry owned by another user or writable by
others (as ssh's StrictModes refuses a key file). Entries are created
writable by their owner only whatever the umask, and tessera-run warns about
an executable others could have written.
"""
import os
import shutil
import stat

import numpy as np
import pytest

import onnx_gen as G
from conftest import run, tool

SMALL_TARGET = ["--tiles-per-ipu", "16"]
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")


def model(tmp_path):
    rng = np.random.RandomState(0)
    return G.save("mm", [G.node("MatMul", ["x", "w"], ["h"]), G.node("Relu", ["h"], ["y"])],
                  [G.vi("x", G.T.FLOAT, [2, 8])], [G.vi("y", G.T.FLOAT, [2, 4])],
                  [G.init("w", rng.randn(8, 4).astype(np.float32))], outdir=str(tmp_path))


def compile_with(tmp_path, cache, out="m.tess", **kwargs):
    return run([tool("tessera-compile"), model(tmp_path), *SMALL_TARGET, "--cache-dir",
                str(cache), "-o", str(tmp_path / out)], **kwargs)


def filled_cache(tmp_path):
    cache = tmp_path / "cache"
    result = compile_with(tmp_path, cache, out="first.tess")
    assert result.returncode == 0, result.stderr
    assert "cache miss" in result.stderr
    return cache


def assert_refused(result, tmp_path, path, why):
    assert result.returncode == 1, result.stderr
    assert f"refusing the cache at '{path}'" in result.stderr, result.stderr
    assert why in result.stderr, result.stderr
    assert "use a cache directory of your own" in result.stderr
    assert not (tmp_path / "m.tess").exists()


@pytest.mark.parametrize("mode,why", [(0o775, "writable by its group (mode 775)"),
                                      (0o777, "writable by every user (mode 777)"),
                                      (0o1777, "writable by every user (mode 1777)")])
def test_a_cache_directory_others_can_write_is_refused(mode, why, tmp_path):
    cache = filled_cache(tmp_path)
    os.chmod(cache, mode)
    result = compile_with(tmp_path, cache)
    assert_refused(result, tmp_path, cache, why)
    assert "cache hit" not in result.stderr


def test_a_kernel_cache_others_can_write_is_refused(tmp_path):
    cache = filled_cache(tmp_path)
    os.chmod(cache / "kernels", 0o777)
    assert_refused(compile_with(tmp_path, cache), tmp_path, cache / "kernels",
                   "writable by every user")


def test_a_cache_under_a_directory_others_can_write_is_refused(tmp_path):
    # Whoever can rename entries of the directory above can swap the cache.
    shared = tmp_path / "shared"
    shared.mkdir()
    cache = filled_cache(tmp_path)
    shutil.move(str(cache), str(shared / "cache"))
    os.chmod(shared, 0o777)
    assert_refused(compile_with(tmp_path, shared / "cache"), tmp_path, shared / "cache",
                   f"the directory above it, '{shared}', is writable by every user")


def entry(cache):
    entries = list(cache.glob("*.tess"))
    assert len(entries) == 1, entries
    return entries[0]


def test_an_entry_others_can_write_is_never_loaded(tmp_path):
    cache = filled_cache(tmp_path)
    planted = entry(cache)
    os.chmod(planted, 0o666)
    assert_refused(compile_with(tmp_path, cache), tmp_path, planted,
                   "writable by every user (mode 666)")


@as_root
def test_an_entry_owned_by_another_user_is_never_loaded(tmp_path):
    cache = filled_cache(tmp_path)
    planted = entry(cache)
    os.chown(planted, NOBODY, NOBODY)
    assert_refused(compile_with(tmp_path, cache), tmp_path, planted,
                   f"is owned by another user (uid {NOBODY})")


@as_root
def test_a_kernel_owned_by_another_user_is_never_loaded(tmp_path):
    cache = filled_cache(tmp_path)
    entry(cache).unlink()  # an executable-cache miss, which reads the kernels
    kernels = sorted((cache / "kernels").iterdir())
    assert kernels
    for k in kernels:
        os.chown(k, NOBODY, NOBODY)
    result = compile_with(tmp_path, cache)
    assert result.returncode == 1, result.stderr
    assert "refusing the cache at '" + str(cache / "kernels") in result.stderr, result.stderr
    assert f"owned by another user (uid {NOBODY})" in result.stderr
    assert not (tmp_path / "m.tess").exists()
    assert not list(cache.glob("*.tess"))


def test_entries_are_writable_by_their_owner_only_whatever_the_umask(tmp_path):
    cache = tmp_path / "cache"
    old = os.umask(0)
    try:
        result = compile_with(tmp_path, cache)
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    paths = [cache, cache / "kernels", *cache.iterdir(), *(cache / "kernels").iterdir()]
    assert len(paths) > 3
    for p in paths:
        assert not os.stat(p).st_mode & (stat.S_IWGRP | stat.S_IWOTH), (p, oct(os.stat(p).st_mode))
    # The output too: a .tess is code.
    assert not os.stat(tmp_path / "m.tess").st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    # And the cache still hits.
    result = compile_with(tmp_path, cache, out="again.tess")
    assert result.returncode == 0 and "cache hit" in result.stderr, result.stderr


def test_tessera_run_warns_about_an_executable_others_can_write(tmp_path):
    tess = tmp_path / "m.tess"
    result = run([tool("tessera-compile"), model(tmp_path), *SMALL_TARGET, "-o", str(tess)])
    assert result.returncode == 0, result.stderr
    np.save(tmp_path / "x.npy", np.ones((2, 8), np.float32))
    args = [tool("tessera-run"), str(tess), "--input", f"x={tmp_path / 'x.npy'}"]
    result = run(args)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    os.chmod(tess, 0o664)
    result = run(args)
    assert result.returncode == 0, result.stderr
    assert "writable by its group (mode 664)" in result.stderr, result.stderr
    assert "a .tess is native code that runs as you" in result.stderr


def test_the_python_api_refuses_the_same_cache(tmp_path):
    import torch
    import tessera
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)
    opts = tessera.Options().enableExecutableCaching(str(cache))
    model = tessera.inferenceModel(torch.nn.Linear(4, 2), opts)
    with pytest.raises(tessera.Error, match="writable by every user") as error:
        model(torch.ones(1, 4))
    assert f"refusing the cache at '{cache}'" in str(error.value)
    assert not list(cache.iterdir())

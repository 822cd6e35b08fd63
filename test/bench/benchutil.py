"""Shared helpers of the benchmark scripts."""
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def timed(cmd):
    """Wall seconds, peak RSS (MiB), stdout and stderr of one child process.

    The caller must stay small (no torch imported): a forked child's peak
    RSS starts from its parent's.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed:\n{err}")
    return wall, usage.ru_maxrss / 1024.0, out, err


def pytorch_ms(model, runs, threads=None):
    """PyTorch's time per inference (ms) of a torchvision model, batch 1,
    in a child process (torch stays out of the caller)."""
    threads_line = f"torch.set_num_threads({threads})" if threads else ""
    out = subprocess.run([sys.executable, "-c", f"""
import time, torch, torchvision
{threads_line}
torch.manual_seed(0)
m = getattr(torchvision.models, '{model}')().eval(); x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    m(x); t = time.perf_counter()
    for _ in range({runs}): m(x)
print((time.perf_counter() - t) / {runs} * 1000)"""], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def export(model, path):
    """Exports a torchvision model (random weights) in a child process."""
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_model.py"),
                    model, path], check=True, capture_output=True)

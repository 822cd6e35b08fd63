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


def export(model, path):
    """Exports a torchvision model (random weights) in a child process."""
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "export_model.py"),
                    model, path], check=True, capture_output=True)

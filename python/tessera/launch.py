"""tessera-launch: PopRun's command line over OpenMPI.

``tessera-launch --num-instances 2 --num-replicas 4 COMMAND...`` runs COMMAND
once per instance through ``mpirun``; each instance learns where it stands
from PopDist's environment variables (``tessera.distributed`` reads them, and
so do ``tessera-run`` and the runtime), runs its share of the replicas on its
own IPU model, and the program's all-reduces span every instance over MPI.

When an instance fails or dies, mpirun stops the others; this launcher names
the instance and what happened, and exits non-zero.
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading

# PopRun's options that choose and configure real IPU partitions (V-IPU):
# accepted, so that a Pod's command line runs unchanged, and ignored -- every
# instance runs on its own IPU model.
_PARTITION_OPTIONS = (
    "--vipu-server-host", "--vipu-server-port", "--vipu-server-timeout",
    "--vipu-partition", "--vipu-cluster", "--vipu-allocation",
    "--update-partition", "--reset-partition", "--remove-partition",
    "--ipus-per-instance", "--process-placement",
)
_PARTITION_FLAGS = ("--numa-aware", "--offline-mode")

# mpirun's words for an instance that failed (OpenMPI 4).
_SIGNALLED = re.compile(
    r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\)")
_FAILED = re.compile(r"tessera: instance (\d+) of \d+ failed \(status (\d+)\)")
_ABORTED = re.compile(r"MPI_ABORT was invoked on rank (\d+) [\s\S]*?errorcode (\d+)")
_EXITED_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXITED_CODE = re.compile(r"Exit code:\s*(\d+)")
_UNREACHABLE = re.compile(r"(ORTE was unable to reliably start|could not be found|"
                          r"ssh: |Host key verification failed|There are not enough slots)")


def _parser():
    p = argparse.ArgumentParser(
        prog="tessera-launch",
        usage="tessera-launch [options] COMMAND [ARGS...]",
        description="Run COMMAND as PopRun's instances over OpenMPI: each runs its "
        "share of the replicas on its own IPU model; all-reduces span every instance.")
    p.add_argument("--num-instances", type=int, default=1, metavar="N",
                   help="processes to run COMMAND in (default 1)")
    p.add_argument("--num-replicas", type=int, default=None, metavar="R",
                   help="replicas in all, a multiple of --num-instances "
                   "(default: one per instance)")
    p.add_argument("--ipus-per-replica", type=int, default=1, metavar="I",
                   help="IPUs each replica runs on (default 1)")
    p.add_argument("--host", "-H", default=None, metavar="H1,H2,...",
                   help="hosts to spread the instances over, evenly, in order "
                   "(default: this host)")
    p.add_argument("--mpi-global-args", default="", metavar="ARGS",
                   help="passed to mpirun before everything else (quoted, e.g. "
                   "\"--mca btl_tcp_if_include eth0\")")
    p.add_argument("--mpi-local-args", default="", metavar="ARGS",
                   help="passed to mpirun for every instance (quoted, e.g. \"-x MY_VAR\")")
    p.add_argument("--only-output-from-instance", type=int, default=None, metavar="K",
                   help="show the standard output of instance K only (every "
                   "instance's errors still show)")
    p.add_argument("--executable-cache-path", default=None, metavar="DIR",
                   help="the instances' executable cache (TESSERA_CACHE_DIR): "
                   "tessera-compile's and the Python API's")
    p.add_argument("--num-ilds", type=int, default=None, metavar="D",
                   help="IPU-Link domains the replicas span (checked: the replicas split "
                   "evenly over them; the estimate takes its domains from the target)")
    p.add_argument("--print-topology", nargs="?", const="yes", default="no",
                   choices=["yes", "no"], metavar="yes|no",
                   help="print each instance's host and replicas before running")
    p.add_argument("-v", "--vv", dest="verbose", action="store_true",
                   help="verbose: print the topology and the mpirun command line")
    p.add_argument("--print-command", action="store_true",
                   help="print the mpirun command line before running it")
    p.add_argument("--dry-run", action="store_true",
                   help="print the mpirun command line and stop")
    for option in _PARTITION_OPTIONS:
        p.add_argument(option, default=None, help=argparse.SUPPRESS)
    for flag in _PARTITION_FLAGS:  # --numa-aware or --numa-aware=yes, as PopRun's
        p.add_argument(flag, nargs="?", const="yes", default=None, help=argparse.SUPPRESS)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    return p


class LaunchError(Exception):
    pass


def plan(args):
    """Each instance's (host, environment) from the launcher's options."""
    n = args.num_instances
    if n < 1:
        raise LaunchError(f"--num-instances must be at least 1, got {n}")
    replicas = n if args.num_replicas is None else args.num_replicas
    if replicas < 1:
        raise LaunchError(f"--num-replicas must be at least 1, got {replicas}")
    if replicas % n:
        raise LaunchError(f"--num-replicas {replicas} is not a multiple of --num-instances {n}: "
                          "every instance runs the same number of replicas")
    if args.ipus_per_replica < 1:
        raise LaunchError(f"--ipus-per-replica must be at least 1, got {args.ipus_per_replica}")
    if args.only_output_from_instance is not None and not (
            0 <= args.only_output_from_instance < n):
        raise LaunchError(f"--only-output-from-instance {args.only_output_from_instance} is not "
                          f"an instance (0 to {n - 1})")
    hosts = [h for h in (args.host or "").split(",") if h]
    if args.host is not None and not hosts:
        raise LaunchError("--host names no host")
    if len(hosts) > n:
        raise LaunchError(f"--host names {len(hosts)} hosts for {n} instance(s): give at "
                          "least one instance to each host")
    if args.num_ilds is not None and (args.num_ilds < 1 or replicas % args.num_ilds or
                                      n % args.num_ilds):
        raise LaunchError(f"--num-ilds {args.num_ilds}: the replicas ({replicas}) and instances "
                          f"({n}) must split evenly over the IPU-Link domains")
    local = replicas // n
    instances = []
    for i in range(n):
        env = {
            "POPDIST_NUM_INSTANCES": str(n),
            "POPDIST_INSTANCE_INDEX": str(i),
            "POPDIST_NUM_TOTAL_REPLICAS": str(replicas),
            "POPDIST_NUM_LOCAL_REPLICAS": str(local),
            "POPDIST_REPLICA_INDEX_OFFSET": str(i * local),
            "POPDIST_NUM_IPUS_PER_REPLICA": str(args.ipus_per_replica),
        }
        if args.executable_cache_path:
            env["TESSERA_CACHE_DIR"] = os.path.abspath(args.executable_cache_path)
        host = hosts[i * len(hosts) // n] if hosts else None
        instances.append((host, env))
    return instances


def mpirun_command(args, instances, mpirun="mpirun"):
    """The mpirun command line: one application context per instance
    (OpenMPI's MPMD form, ``ctx : ctx``), each with its own environment."""
    cmd = [mpirun]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # The IPU model runs its own threads: no binding to one core; instances
    # may outnumber this host's cores.
    cmd += ["--bind-to", "none", "--oversubscribe"]
    # Containers often forbid the cross-memory attach of shared-memory
    # transfers; plain copies work everywhere.
    cmd += ["--mca", "btl_vader_single_copy_mechanism", "none"]
    cmd += shlex.split(args.mpi_global_args)
    local_args = shlex.split(args.mpi_local_args)
    for i, (host, env) in enumerate(instances):
        if i:
            cmd.append(":")
        cmd += ["-np", "1"]
        if host:
            cmd += ["--host", host]
        for key, value in env.items():
            cmd += ["-x", f"{key}={value}"]
        cmd += local_args
        program = list(args.command)
        if args.only_output_from_instance is not None and i != args.only_output_from_instance:
            program = ["sh", "-c", 'exec "$@" >/dev/null', "tessera-instance"] + program
        cmd += program
    return cmd


def topology(instances):
    """A table: each instance's host and replicas."""
    rows = ["instance  host         replicas"]
    for i, (host, env) in enumerate(instances):
        first = int(env["POPDIST_REPLICA_INDEX_OFFSET"])
        count = int(env["POPDIST_NUM_LOCAL_REPLICAS"])
        rows.append(f"{i:8d}  {host or 'localhost':11s}  {first} to {first + count - 1}")
    return "\n".join(rows)


def _explain(lines, code):
    """What went wrong, from mpirun's own report, naming the instance."""
    text = "\n".join(lines)
    m = _SIGNALLED.search(text)
    if m:
        return (f"instance {m.group(1)} (on {m.group(2)}) was killed by signal {m.group(3)} "
                f"({m.group(4)}); the other instances were stopped")
    m = _FAILED.search(text) or _ABORTED.search(text)
    if m:
        return (f"instance {m.group(1)} failed (status {m.group(2)}; its error is above); "
                "the other instances were stopped")
    name, exit_code = _EXITED_NAME.search(text), _EXITED_CODE.search(text)
    if name:
        status = f" with status {exit_code.group(1)}" if exit_code else ""
        return (f"instance {name.group(1)} exited{status} (its error is above); "
                "the other instances were stopped")
    m = _UNREACHABLE.search(text)
    if m:
        return "mpirun could not start every instance (a host unreachable or misnamed?): see above"
    return f"mpirun exited with status {code}"


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print("tessera-launch: error: no command to run (tessera-launch [options] COMMAND ...)",
              file=sys.stderr)
        return 2
    ignored = [o for o in _PARTITION_OPTIONS + _PARTITION_FLAGS
               if getattr(args, o[2:].replace("-", "_"))]
    if ignored:
        print(f"tessera-launch: note: {', '.join(ignored)} choose(s) IPU partitions; every "
              "instance runs on its own IPU model here", file=sys.stderr)
    try:
        instances = plan(args)
    except LaunchError as e:
        print(f"tessera-launch: error: {e}", file=sys.stderr)
        return 2
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("tessera-launch: error: mpirun is not found: install OpenMPI (Debian's "
              "openmpi-bin; scripts/install-deps.sh does)", file=sys.stderr)
        return 2
    cmd = mpirun_command(args, instances, mpirun)
    if args.print_topology == "yes" or args.verbose:
        print(topology(instances))
    if args.print_command or args.dry_run or args.verbose:
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        if args.dry_run:
            return 0
    # mpirun's standard error passes through as it comes, and is kept to
    # name the instance that failed.
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace")
    seen = []

    def forward():
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            seen.append(line.rstrip("\n"))

    reader = threading.Thread(target=forward, daemon=True)
    reader.start()

    def stop(signum, _frame):
        proc.send_signal(signum)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)
    code = proc.wait()
    reader.join(timeout=5)
    if code != 0:
        print(f"tessera-launch: error: {_explain(seen, code)}", file=sys.stderr)
        return code if 0 < code < 256 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

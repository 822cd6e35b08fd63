"""Reading a Tessera report from a script, in the spirit of PopVision's
analysis library (``pva``): the figures behind the report page, as objects.

    import tessera.profile
    report = tessera.profile.open("report_dir")      # or .../report.json
    fullest = max(report.tiles, key=lambda t: t.peak_bytes)
    for var in fullest.variables[:5]:
        print(var.name, var.bytes_on(fullest.index))
    slowest = max(report.steps, key=lambda s: s.cycles)

A report is written by ``tessera-compile --report DIR``, ``tessera-run
--report DIR``, ``tessera-report``, or ``Options.enableProfiling`` (and
Poplar's autoReport options) in the Python API. Its numbers are the
compiler's: tile memory from the memory plan, cycles from the estimate the
IPU model counts.
"""

import builtins
import bisect
import json
import os

from ._errors import Error

__all__ = ["open", "Report", "Tile", "Variable", "Step"]

_VERSION = 1
CATEGORIES = ("weights", "activations", "temporaries", "code")


class Variable:
    """A variable, or an exchange's receive buffer, as memory holds it: its
    bytes on each tile and the program steps it is live in (inclusive)."""

    def __init__(self, data):
        self._data = data
        self.name = data["name"]
        self.category = data["category"]          # weights, activations, temporaries
        self.kind = data.get("kind")              # input, weight, activation, constant,
        self.dtype = data.get("dtype")            # receive buffer
        self.shape = tuple(data["shape"]) if "shape" in data else None
        self.bytes = data["bytes"]                # on all tiles
        self.birth = data["birth"]
        self.death = data["death"]
        runs = data["tiles"]
        self._firsts = [r[0] for r in runs]
        self._runs = runs

    @property
    def tiles(self):
        """{tile: bytes} of every tile it occupies."""
        return {first + k: b for first, count, b in self._runs for k in range(count)}

    def bytes_on(self, tile):
        i = bisect.bisect_right(self._firsts, tile) - 1
        if i >= 0:
            first, count, b = self._runs[i]
            if tile < first + count:
                return b
        return 0

    def live_at(self, step):
        return self.birth <= step <= self.death

    def __repr__(self):
        return f"Variable({self.name!r}, {self.category}, {self.bytes} bytes)"


class Tile:
    """One tile: its bytes by category at its peak, and what it holds."""

    def __init__(self, report, index):
        memory = report._data["memory"]
        self._report = report
        self.index = index
        self.ipu = index // report.target["tiles_per_ipu"]
        self.peak_bytes = memory["peak_bytes"][index]
        self.memory = {c: memory[c][index] for c in CATEGORIES}
        self.capacity = report.target["bytes_per_tile"]

    @property
    def variables(self):
        """What the tile holds, largest here first."""
        held = [v for v in self._report.variables if v.bytes_on(self.index)]
        return sorted(held, key=lambda v: -v.bytes_on(self.index))

    @property
    def liveness(self):
        """Its live bytes at each program step (its vertex code included)."""
        steps = self._report.program["steps"]
        delta = [0] * (steps + 1)
        for v in self._report.variables:
            b = v.bytes_on(self.index)
            if b:
                delta[min(v.birth, steps)] += b
                delta[min(v.death + 1, steps)] -= b
        live, out = self.memory["code"], []
        for t in range(steps):
            live += delta[t]
            out.append(live)
        return out

    def __repr__(self):
        return f"Tile({self.index}, peak {self.peak_bytes} bytes)"


class Step:
    """One step of an iteration: a host stream, a compute set, a copy, an
    all-reduce or a state update, with its estimated cycles and, after a
    run, the IPU model's host time."""

    def __init__(self, index, data):
        self.index = index
        self.name = data["name"]
        self.location = data["location"]          # the source op
        self.kind = data["kind"]
        self.phase = data["phase"]                # host, forward, loss, backward,
        self.cycles = data["cycles"]              # all-reduce, update
        self.compute_cycles = data["compute"]
        self.exchange_cycles = data["exchange"]
        self.sync_cycles = data["sync"]
        self.all_reduce_cycles = data["all_reduce"]
        self.exchange_bytes = data["exchange_bytes"]
        self.tiles_used = data["tiles_used"]
        self.macs = data["macs"]
        self.ipus = data["ipus"]
        self.per_update = data.get("per_update", False)
        self.plan = data.get("plan")
        self.program_step = data.get("step")      # index into the program's steps
        self.host_ms = (data["host_exchange_ms"] + data["host_compute_ms"]
                        if "host_compute_ms" in data else None)

    def __repr__(self):
        return f"Step({self.name!r}, {self.location!r}, {self.cycles} cycles)"


class Report:
    """A report: ``tiles``, ``variables``, ``steps``, ``ops`` (cycles by
    source op), ``liveness`` (the chip's live bytes per step), ``estimate``,
    and for a program that does not fit, ``out_of_memory``."""

    def __init__(self, data, path=None):
        self._data = data
        self.path = path
        self.source = data["source"]
        self.target = data["target"]
        self.program = data["program"]
        self.fits = data["fits"]
        self.error = data.get("error")
        self.out_of_memory = data.get("out_of_memory")
        self.estimate = data["estimate"]
        self.execution = data.get("execution")
        self.variables = [Variable(v) for v in data["items"]]
        self.steps = [Step(i, s) for i, s in enumerate(data["steps"])]
        self.tiles = [Tile(self, t) for t in range(data["memory"]["tiles"])]
        liveness = data["liveness"]
        self.liveness = liveness["chip"]
        self.peak_step = liveness["peak_step"]

    @property
    def fullest_tile(self):
        return self.tiles[self._data["memory"]["max"]["tile"]]

    @property
    def ops(self):
        """{source op: cycles}, summed over its steps, costliest first (an
        iteration's; steps that run once per weight update left out)."""
        totals = {}
        for s in self.steps:
            if s.location and not s.per_update:
                totals[s.location] = totals.get(s.location, 0) + s.cycles
        return dict(sorted(totals.items(), key=lambda kv: -kv[1]))

    def live_at(self, step):
        """The variables live at a program step, largest first."""
        return sorted((v for v in self.variables if v.live_at(step)), key=lambda v: -v.bytes)

    def __repr__(self):
        return (f"Report({self.source!r}, {len(self.tiles)} tiles, {len(self.steps)} steps, "
                f"{'fits' if self.fits else 'does not fit'})")


def open(path):
    """The report in directory `path` (its report.json), or the file itself."""
    path = os.fspath(path)
    file = os.path.join(path, "report.json") if os.path.isdir(path) else path
    try:
        with builtins.open(file) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise Error(f"no report at '{file}': write one with tessera-compile --report DIR, "
                    "tessera-run --report DIR or Options.enableProfiling()") from None
    except json.JSONDecodeError as e:
        raise Error(f"'{file}' is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != "tessera-report":
        raise Error(f"'{file}' is not a Tessera report")
    if data.get("version") != _VERSION:
        raise Error(f"'{file}' is a report of version {data.get('version')}; this Tessera "
                    f"reads version {_VERSION} (make it again with tessera-report)")
    return Report(data, file)

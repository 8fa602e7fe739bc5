"""vramscope's capture hook: records what vramscope analyzes, in any PyTorch program.

One file, two uses:

* As the ``sitecustomize`` that ``vramscope record -- COMMAND`` puts first on
  PYTHONPATH. It imports nothing heavy and never imports torch: it waits for
  the program to import torch (an import hook), and starts recording only when
  the program initializes CUDA, so shell wrappers, launchers such as torchrun's
  agent, data-loader workers and tokenizer subprocesses are left alone. It then
  runs the ``sitecustomize`` that was on the path before it, if any.
* As a module (``vramscope hook --path`` says where it is) for code that wants
  explicit control::

      import vramscope_hook
      vramscope_hook.start(out="runs/mem", steps=[2, 3, 4])
      for i, batch in enumerate(loader):
          serve(batch)
          vramscope_hook.step(i + 1)   # loops without an optimizer
      vramscope_hook.dump("after warm-up")

      with vramscope_hook.capture(out="runs/mem"):
          train()

Per process it records the allocator's history
(torch.cuda.memory._record_memory_history), dumps snapshots at chosen
optimizer steps (torch's global optimizer step hook), every N steps or every
so many seconds, on an out-of-memory error (with the message beside it), on a
signal and at exit, and writes a memory-log CSV in the SGLang recipe's format.
Files go to OUT/step{N}/{tag}_rank{R}_pid{P}.pickle (OOM: OUT/oom/, signal and
interval dumps: OUT/{YYYYmmdd-HHMMSS}/, exit: OUT/final/), each written to a
hidden temporary name and renamed, so a file that looks whole is whole.

With module_names on (``record --module-names``, VRAMSCOPE_MODULE_NAMES=1)
every module forward tags its allocations with the module's qualified name,
through torch.cuda.memory._set_memory_metadata (torch 2.10 and later), for
``vramscope breakdown --by module``.

Settings come from keyword arguments or VRAMSCOPE_* environment variables
(see Settings). It works on torch 2.1 through 2.11 by checking for each API
rather than for versions; anything missing is reported once on stderr and
skipped.
"""

import atexit
import contextlib
import datetime
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import sys
import threading
import time
import weakref

__all__ = ["start", "stop", "step", "dump", "capture", "pool", "Settings"]

_ENV = "VRAMSCOPE_"
_MiB = 1024 * 1024

# Default ring-buffer size of the allocator history, per device. With
# Python stacks an entry pickles to 50-100 bytes in the shipped H100
# scenarios (frames are shared between entries) and a few hundred with deep
# model stacks, so a snapshot stays within a few hundred MB while covering
# many steps of a training loop.
DEFAULT_MAX_ENTRIES = 1_000_000


def _warn(msg):
    try:
        sys.stderr.write("vramscope: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


def _env(name, default=""):
    return os.environ.get(_ENV + name, default)


def _parse_steps(s):
    """'2,3,4' -> [2, 3, 4]; '' or 'none' -> []."""
    s = (s or "").strip()
    if not s or s.lower() == "none":
        return []
    return sorted({int(x) for x in s.split(",") if x.strip()})


def _parse_seconds(s):
    """'90', '1.5', '500ms', '30s', '5m', '2h' -> seconds; '' or '0' -> 0."""
    s = (s or "").strip().lower()
    if not s:
        return 0.0
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(ms|s|m|h)?", s)
    if not m:
        raise ValueError("%r is not a duration (e.g. 30s, 5m)" % s)
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


class Settings:
    """What to record. Every field has a VRAMSCOPE_<FIELD> variable."""

    def __init__(self, **kw):
        self.out = kw.get("out") or _env("OUT") or time.strftime("vramscope-%Y%m%d-%H%M%S")
        # The tag defaults to the script's name, read when a file is named:
        # under `python -m` sys.argv[0] is only final once the module runs.
        self.tag = kw.get("tag") or _env("TAG") or None
        self.stacks = kw.get("stacks") or _env("STACKS", "python")
        self.max_entries = int(kw.get("max_entries") or _env("MAX_ENTRIES") or DEFAULT_MAX_ENTRIES)
        # history off: no allocator history (snapshots then hold the state
        # only), for the memory log alone at no allocation cost.
        self.history = _flag(kw.get("history"), _env("HISTORY", "1"))
        steps = kw.get("steps")
        self.steps = list(steps) if steps is not None else _parse_steps(_env("STEPS", "2,3,4"))
        self.every = int(kw.get("every") or _env("EVERY") or 0)
        self.interval = _seconds(kw.get("interval"), _env("INTERVAL"))
        # log_interval: 0 logs one row per step; < 0 (or VRAMSCOPE_LOG=off) not at all.
        self.log_interval = _seconds(kw.get("log_interval"), _env("LOG_INTERVAL"))
        if not _flag(kw.get("log"), _env("LOG", "1")):
            self.log_interval = -1.0
        self.signal = (kw.get("signal") or _env("SIGNAL", "USR1")).upper()
        self.oom = _flag(kw.get("oom"), _env("OOM", "1"))
        self.final = (kw.get("final") or _env("FINAL", "auto")).lower()
        # module_names: tag each module forward's allocations with the
        # module's qualified name (torch >= 2.10; off by default: one Python
        # call per module call).
        self.module_names = _flag(kw.get("module_names"), _env("MODULE_NAMES", "0"))
        if self.stacks not in ("python", "all"):
            raise ValueError("stacks %r: want python or all" % self.stacks)
        if self.final not in ("auto", "always", "never"):
            raise ValueError("final %r: want auto, always or never" % self.final)

    def as_dict(self):
        return dict(vars(self))


def _seconds(arg, env):
    if arg is None:
        return _parse_seconds(env)
    if isinstance(arg, (int, float)):
        return float(arg)
    return _parse_seconds(arg)


def _flag(arg, env):
    if arg is not None:
        return bool(arg)
    return env.strip().lower() not in ("0", "false", "no", "off", "")


def _script_tag():
    """The tag from the program's name: train.py -> train, python -m pkg.cli -> cli."""
    argv0 = sys.argv[0] if getattr(sys, "argv", None) else ""
    if argv0 in ("", "-c", "-"):
        return "python"
    base = os.path.basename(argv0)
    stem = base[:-3] if base.endswith(".py") else base
    if stem == "__main__":
        stem = os.path.basename(os.path.dirname(os.path.abspath(argv0))) or "python"
    return _safe(stem)


def _safe(s):
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-.")
    return s or "python"


def _rank(torch=None):
    """The global rank: torch.distributed when initialized, else RANK or LOCAL_RANK, else 0."""
    torch = torch or sys.modules.get("torch")
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    for var in ("RANK", "LOCAL_RANK"):
        v = os.environ.get(var, "").strip()
        if v.isdigit():
            return int(v)
    return 0


def atomic_write(path, write):
    """Calls write(tmp) for a hidden temporary file beside path, then renames it to path.

    A reader that lists the folder never sees a half-written file under the
    final name (vramscope skips hidden files). On failure the temporary file
    is removed and the error raised.
    """
    d, base = os.path.split(path)
    os.makedirs(d or ".", exist_ok=True)
    tmp = os.path.join(d, ".%s.%d.tmp" % (base, os.getpid()))
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


def _write_text(path, text):
    def w(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    return atomic_write(path, w)


class _Recorder:
    """The state of one process's recording."""

    def __init__(self, settings):
        self.s = settings
        self.torch = None
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.step = 0            # steps completed (optimizer steps or step(n))
        self.explicit = False    # step() was called: the optimizer hook stops counting
        self.lead = None         # weak reference to the optimizer that keeps the step count
        self.recording = False   # memory history is on
        self.stopped = False     # stop() was called: hooks torch keeps do nothing
        self.dumps = 0           # snapshots written by this process
        self.ooms = 0
        self.logger = None
        self.threads_stop = threading.Event()
        self.handles = []
        self.warned = set()

    # ---------------------------------------------------------- arming
    def arm(self, torch):
        """Called once torch is imported: hooks that need no CUDA now, recording at CUDA init."""
        self.torch = torch
        self._hook_optimizer()
        if self.s.module_names:
            try:
                self.handles += _ModuleNames(torch).install()
            except Exception as e:
                self._once("modules", "module names off: %r" % (e,))
        try:
            torch.cuda._lazy_call(self._on_cuda_init)
        except Exception as e:  # very old or CPU-only builds
            self._once("lazy", "cannot wait for CUDA initialization (%s); recording nothing" % e)
        atexit.register(self.at_exit)
        self._chain_excepthook()

    def _chain_excepthook(self):
        """An OOM that ends the program: its message goes beside the snapshot."""
        previous = sys.excepthook

        def hook(etype, value, tb):
            with contextlib.suppress(Exception):
                self._on_oom_error(value)
            previous(etype, value, tb)
        sys.excepthook = hook

    def _on_cuda_init(self):
        # Runs inside torch.cuda._lazy_init: an exception here would break the
        # program's first CUDA call, so none escapes.
        if self.stopped or os.getpid() != self.pid:
            return
        parts = []
        if self.s.history:
            parts.append(self._record_history)
        if self.s.oom:
            parts.append(self._attach_oom_observer)
        # Only processes that record take the dump signal: a launcher that
        # imports torch but never uses CUDA keeps its default.
        if self.s.signal not in ("", "NONE", "OFF"):
            parts.append(self._install_signal)
        parts.append(self._start_threads)
        for part in parts:  # each on its own: one that fails leaves the others
            try:
                part()
            except Exception as e:
                self._once(part.__name__, "%s failed: %r" % (part.__name__.strip("_"), e))

    def _record_history(self):
        mem = self.torch.cuda.memory
        rec = getattr(mem, "_record_memory_history", None)
        if rec is None:
            self._once("history", "torch.cuda.memory._record_memory_history is missing; no snapshots")
            return
        try:
            rec(enabled="all", context="all", stacks=self.s.stacks, max_entries=self.s.max_entries)
        except TypeError:
            # The legacy boolean form (before 2.1).
            rec(True, trace_alloc_max_entries=self.s.max_entries, trace_alloc_record_context=True,
                record_context_cpp=self.s.stacks == "all")
        self.recording = True

    def _hook_optimizer(self):
        try:
            # By module name: some releases delete the attribute from torch.optim.
            register = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook
        except (ImportError, AttributeError):
            self._once("optim", "torch.optim has no global step hook; call vramscope_hook.step(n)")
            return
        self.handles.append(register(self._on_optimizer_step))

    def _on_optimizer_step(self, optimizer, args, kwargs):
        """The first optimizer to step keeps the time: each of its steps ends
        a step, so that with several (GAN, actor and critic) one iteration
        counts once. When it is gone (an optimizer made anew each epoch),
        the next one to step takes over the count."""
        if self.explicit:
            return
        lead = self.lead() if self.lead is not None else None
        if lead is None:
            with contextlib.suppress(TypeError):  # no weak reference: every step counts
                self.lead = weakref.ref(optimizer)
            lead = optimizer
        if optimizer is lead:
            self._end_step(self.step + 1)

    def _end_step(self, n):
        with self.lock:
            self.step = n
        if self.logger is not None and self.s.log_interval == 0:
            self.logger.sample()
        if n in self.s.steps or (self.s.every > 0 and n % self.s.every == 0):
            self.dump("step", folder="step%d" % n)

    def _install_signal(self):
        signum = getattr(signal, "SIG" + self.s.signal.replace("SIG", "", 1), None)
        if signum is None:
            self._once("signal", "no signal %r here" % self.s.signal)
            return
        try:
            if signal.getsignal(signum) not in (signal.SIG_DFL, None):
                self._once("signal", "the program handles SIG%s itself; no dump on it" % self.s.signal)
                return
            signal.signal(signum, self._on_signal)
        except ValueError:
            return  # CUDA started off the main thread, where no signal handler can be set
        self._announce(signum)

    def _announce(self, signum):
        """Leaves a note in OUT/.vramscope/ so that `vramscope record` forwards
        the signal to this process (and not to launchers that would die of it)."""
        try:
            d = os.path.join(self.s.out, ".vramscope")
            os.makedirs(d, exist_ok=True)
            _write_text(os.path.join(d, "signal-%d" % os.getpid()), "%d\n" % signum)
        except OSError:
            pass

    def _on_signal(self, signum, frame):
        self.dump("signal", folder=_now_folder())

    # ------------------------------------------------------------ OOM
    def _attach_oom_observer(self):
        attach = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            self._once("oom", "torch has no out-of-memory observer; no snapshot at OOM")
            return
        attach(self._on_oom)

    def _on_oom(self, device, alloc, device_allocated, device_free):
        """Torch calls this from the allocator, without its lock, before it
        raises OutOfMemoryError. The snapshot's trace ends with the 'oom'
        event; the message does not exist yet, so a one-shot tracer catches
        it as it passes the calling frame (and sys.excepthook if uncaught)."""
        try:
            if self.stopped or os.getpid() != self.pid:
                return
            self.ooms += 1
            if self.ooms > 1:
                return  # servers that catch OOMs would fill the disk
            path = self.dump("oom", folder="oom")
            if path is None:
                return
            base = path[: -len(".pickle")]
            self.oom_text = base + "_oom.txt"
            _write_text(self.oom_text, (
                "vramscope: out of memory on device %d: tried to allocate %d bytes with %d bytes "
                "allocated by PyTorch and %d bytes free on the device (the message follows when "
                "the error is raised)\n" % (device, alloc, device_allocated, device_free)))
        except Exception as e:
            self._once("oom-dump", "OOM snapshot failed: %r" % (e,))
            return
        try:
            caller = sys._getframe(1)
        except ValueError:
            return  # an allocator thread with no Python frame (backward): sys.excepthook only
        _catch_next_exception(caller, self._on_oom_error)

    def _on_oom_error(self, exc):
        text = getattr(self, "oom_text", None)
        if text is None or not _is_oom(exc):
            return
        self.oom_text = None  # only the first message
        try:
            _write_text(text, str(exc).strip() + "\n")
        except OSError:
            pass

    # --------------------------------------------------------- threads
    def _start_threads(self):
        if self.s.log_interval >= 0:
            self.logger = _MemoryLog(self)
            if self.s.log_interval > 0:
                self._every(self.s.log_interval, self.logger.sample, "vramscope-log")
        if self.s.interval > 0:
            self._every(self.s.interval, lambda: self.dump("interval", folder=_now_folder()),
                        "vramscope-interval")

    def _every(self, seconds, fn, name):
        def loop():
            while not self.threads_stop.wait(seconds):
                if os.getpid() != self.pid:
                    return
                fn()
        threading.Thread(target=loop, name=name, daemon=True).start()

    # ----------------------------------------------------------- dumps
    def name(self):
        return "%s_rank%d_pid%d" % (self.s.tag or _script_tag(), _rank(self.torch), os.getpid())

    def dump(self, reason, folder=None):
        """Writes OUT/folder/{tag}_rank{R}_pid{P}.pickle; returns the path or None."""
        torch = self.torch
        if torch is None or self.stopped or os.getpid() != self.pid:
            return None
        try:
            if not torch.cuda.is_initialized():
                return None
        except Exception:
            return None
        folder = folder or _now_folder()
        with self.lock:
            path = self._free_path(folder, reason)
            t0 = time.time()
            try:
                atomic_write(path, torch.cuda.memory._dump_snapshot)
            except Exception as e:
                self._once("dump", "snapshot %s failed: %r" % (path, e))
                return None
            self.dumps += 1
            self._note_dump(path, reason, t0)
        return path

    def _free_path(self, folder, reason):
        """OUT/folder/{name}.pickle, or for dumps other than step, OOM,
        interval and exit ones {name}_{reason}.pickle; numbered when two
        fall in one folder (two signals in one second)."""
        name = self.name()
        if reason not in ("step", "oom", "interval", "exit"):
            name += "_" + _safe(reason)
        path = os.path.join(self.s.out, folder, name + ".pickle")
        n = 1
        while os.path.exists(path):
            n += 1
            path = os.path.join(self.s.out, folder, "%s_%d.pickle" % (name, n))
        return path

    def _note_dump(self, path, reason, t0):
        """Appends one line about the dump to OUT/.vramscope/dumps-PID.jsonl
        (hidden, so analyze does not list it as a skipped file)."""
        torch = self.torch
        note = {"path": os.path.relpath(path, self.s.out), "reason": reason, "step": self.step,
                "rank": _rank(torch), "pid": os.getpid(), "time_unix": round(t0, 3),
                "dump_seconds": round(time.time() - t0, 3), "bytes": 0,
                "torch_version": str(getattr(torch, "__version__", ""))}
        try:
            note["bytes"] = os.path.getsize(path)
            note["memory_allocated"] = int(torch.cuda.memory_allocated())
            note["memory_reserved"] = int(torch.cuda.memory_reserved())
            d = os.path.join(self.s.out, ".vramscope")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "dumps-%d.jsonl" % os.getpid()), "a") as f:
                f.write(json.dumps(note, sort_keys=True) + "\n")
        except Exception:
            pass

    def at_exit(self):
        self.threads_stop.set()
        if self.stopped or os.getpid() != self.pid:
            return
        try:
            # No sample at exit: the program has dropped its model by now,
            # and a last row far below the rest would hide a trend.
            if self.logger is not None:
                self.logger.close()
            if self.s.final == "always" or (self.s.final == "auto" and self.dumps == 0):
                self.dump("exit", folder="final")
        except Exception as e:
            self._once("exit", "final dump failed: %r" % (e,))

    def stop(self):
        self.stopped = True
        self.threads_stop.set()
        for h in self.handles:
            with contextlib.suppress(Exception):
                h.remove()
        self.handles = []
        if self.logger is not None:
            self.logger.close()
            self.logger = None
        if self.recording:
            with contextlib.suppress(Exception):
                self.torch.cuda.memory._record_memory_history(enabled=None)
            self.recording = False

    def _once(self, key, msg):
        if key not in self.warned:
            self.warned.add(key)
            _warn(msg)


class _ModuleNames:
    """Tags allocations with the qualified name of the module whose forward
    runs: torch.cuda.memory._set_memory_metadata("module=NAME") on entry,
    the enclosing module's tag (or what was set before the outermost one)
    again on exit (the program's own calls to _set_memory_metadata are
    seen through a wrapper, so that its "step=3" comes back after a
    forward). vramscope's breakdown then names modules exactly
    ("LlamaForCausalLM.model.layers.3.mlp") where stacks give only code
    lines. The metadata is per thread, so backward (the autograd engine's
    threads) carries none. A module is named on its first call: the root
    by its class, a child by the attribute path from the module that
    called it."""

    def __init__(self, torch):
        self.torch = torch
        self.names = weakref.WeakKeyDictionary()
        self.local = threading.local()

    def install(self):
        """Registers the global forward hooks; returns their handles. Raises
        when this torch cannot tag allocations."""
        mem = self.torch.cuda.memory
        self.set = getattr(mem, "_set_memory_metadata", None)
        if self.set is None:
            raise RuntimeError("torch.cuda.memory._set_memory_metadata is missing (torch < 2.10)")
        original = self.set

        def set_memory_metadata(md, *args, **kwargs):
            self.local.user = md
            return original(md, *args, **kwargs)
        module = importlib.import_module("torch.nn.modules.module")
        pre = module.register_module_forward_pre_hook(self._enter)
        try:  # always_call: restore the tag when forward raises, too
            post = module.register_module_forward_hook(self._exit, always_call=True)
        except TypeError:
            post = module.register_module_forward_hook(self._exit)
        mem._set_memory_metadata = set_memory_metadata
        return [pre, post]

    def _stack(self):
        st = getattr(self.local, "stack", None)
        if st is None:
            st = self.local.stack = []
        return st

    def _name(self, module, parent):
        name = self.names.get(module)
        if name is not None:
            return name
        name = type(module).__name__
        if parent is not None:
            pmod, pname = parent
            for child, m in pmod.named_modules():
                if m is module and child:
                    name = pname + "." + child
                    break
        with contextlib.suppress(TypeError):
            self.names[module] = name
        return name

    def _enter(self, module, args):
        try:
            st = self._stack()
            name = self._name(module, (st[-1][0], st[-1][1]) if st else None)
            st.append((module, name))
            self.set("module=" + name)
        except Exception:
            pass

    def _exit(self, module, args, output):
        try:
            st = self._stack()
            while st:  # pops what a forward that raised left behind, too
                m, _ = st.pop()
                if m is module:
                    break
            self.set("module=" + st[-1][1] if st else getattr(self.local, "user", ""))
        except Exception:
            pass


def _now_folder():
    # A folder name vramscope reads as a dump time (20060102-150405).
    return time.strftime("%Y%m%d-%H%M%S")


def _is_oom(exc):
    torch = sys.modules.get("torch")
    oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)


def _catch_next_exception(frame, callback):
    """Calls callback(exc) with the first exception that passes frame or its
    callers, by tracing that frame only until then. Skipped when a debugger
    or coverage tool already traces this thread. sys.excepthook covers
    errors that escape anyway."""
    if sys.gettrace() is not None:
        return

    def local(fr, event, arg):
        if event == "exception":
            sys.settrace(None)
            f = frame
            while f is not None:
                f.f_trace = None
                f = f.f_back
            callback(arg[1])
            return None
        return local

    f = frame
    while f is not None:
        f.f_trace = local
        f = f.f_back
    sys.settrace(lambda *a: None)


class _MemoryLog:
    """The SGLang recipe's memory log: one CSV row per sample,

        timestamp,memory_summary,memory_allocated,memory_reserved
        2025-08-12 10:00:00.125,"<memory_summary with ',' as ';'>",184.65,235.52

    with sizes in MB. sample() reads the two cheap counters in the caller and
    leaves memory_summary(), which formats a table, and the write to a thread,
    so that logging every step costs the program microseconds.
    """

    def __init__(self, rec):
        self.rec = rec
        self.path = None
        self.f = None
        self.queue = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="vramscope-log-writer", daemon=True)
        self.thread.start()

    def sample(self):
        torch = self.rec.torch
        try:
            a = torch.cuda.memory_allocated()
            r = torch.cuda.memory_reserved()
        except Exception:
            return
        with self.cond:
            if self.closed:
                return
            self.queue.append((time.time(), a, r))
            self.cond.notify()

    def _run(self):
        while True:
            with self.cond:
                while not self.queue and not self.closed:
                    self.cond.wait()
                rows, self.queue = self.queue, []
                closed = self.closed
            if rows:
                self._write(rows)
            if closed:
                return

    def _write(self, rows):
        torch = self.rec.torch
        try:
            if self.f is None:
                self.path = os.path.join(self.rec.s.out, self.rec.name() + "_memory_log.csv")
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                self.f = open(self.path, "w")
                self.f.write("timestamp,memory_summary,memory_allocated,memory_reserved\n")
            summary = torch.cuda.memory_summary(abbreviated=True).replace(",", ";").replace('"', "'")
            for t, a, r in rows:
                ts = datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                self.f.write('%s,"%s",%.2f,%.2f\n' % (ts, summary, a / _MiB, r / _MiB))
            self.f.flush()
        except Exception as e:
            self.rec._once("log", "memory log: %r" % (e,))

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=10)
        if self.f is not None:
            self.f.close()
            self.f = None


# ------------------------------------------------------------- pool ledger
LEDGER_FORMAT = "vramscope-pool-ledger"
_LEDGER_FRAMES = 8  # frames kept per allocation: enough to name the caller's caller's caller


class Pool:
    """A pool the program manages itself (a KV cache's pages, request slots),
    whose allocations and frees go to an append-only ledger that vramscope
    analyze reads: what is still held at the end and at idle moments, grouped
    by the allocating stack and by owner. See pool() and the README's
    "Pool ledger" for the file format."""

    def __init__(self, name, capacity, unit, path):
        self.name, self.capacity, self.unit, self.path = name, int(capacity), unit, path
        self.lock = threading.Lock()
        self.stacks = {}  # (file, line, function) tuples -> id in the ledger
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.f = open(path, "a", buffering=1 << 16)
        self._write({"format": LEDGER_FORMAT, "version": 1, "pool": name, "capacity": self.capacity,
                     "unit": unit, "pid": os.getpid(), "rank": _rank(), "t": time.time()})
        atexit.register(self.close)

    def _write(self, rec):
        self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def _stack(self):
        """The caller's stack, interned: the ledger holds each distinct one once."""
        frames = []
        fr = sys._getframe(3)
        while fr is not None and len(frames) < _LEDGER_FRAMES:
            frames.append((fr.f_code.co_filename, fr.f_lineno, fr.f_code.co_name))
            fr = fr.f_back
        key = tuple(frames)
        sid = self.stacks.get(key)
        if sid is None:
            sid = self.stacks[key] = len(self.stacks)
            self._write({"op": "stack", "id": sid, "frames": [list(f) for f in frames]})
        return sid

    def _op(self, op, n, owner, slots):
        if slots is not None:
            slots = [int(x) for x in slots]
            n = len(slots) if n is None else n
        if n is None:
            raise ValueError("%s on pool %s: give n or slots" % (op, self.name))
        rec = {"op": op, "t": round(time.time(), 6), "n": int(n)}
        if owner is not None:
            rec["owner"] = str(owner)
        if slots is not None:
            rec["slots"] = slots
        with self.lock:
            if self.f is None:
                return
            if op == "alloc":
                rec["stack"] = self._stack()
            self._write(rec)

    def alloc(self, n=None, owner=None, slots=None):
        """Records n units (or the slot indices slots) taken, for owner (a request id)."""
        self._op("alloc", n, owner, slots)
        return slots

    def free(self, n=None, owner=None, slots=None):
        """Records n units (or slots) given back by owner."""
        self._op("free", n, owner, slots)

    def idle(self):
        """Marks an idle moment, when nothing should be held: what is, leaked."""
        with self.lock:
            if self.f is not None:
                self._write({"op": "idle", "t": round(time.time(), 6)})
                self.f.flush()

    def close(self):
        with self.lock:
            if self.f is not None:
                self.f.close()
                self.f = None


def pool(name, capacity, unit="slots", out=None):
    """Opens the ledger of a pool the program manages itself:

        kv = vramscope_hook.pool("token_to_kv_pool", 400000, "tokens")
        kv.alloc(512, owner=req.rid)          # or kv.alloc(slots=[3, 4, 5], owner=...)
        kv.free(512, owner=req.rid)
        kv.idle()                             # nothing should be held now

    It appends to OUT/{tag}_rank{R}_pid{P}_pool_{name}.ledger.jsonl, beside the
    snapshots (OUT as start() or VRAMSCOPE_OUT say, else out, else the folder
    start() would use). Each allocation records the stack that made it."""
    rec = _recorder
    folder = out or (rec.s.out if rec is not None else None) or Settings().out
    tag = (rec.s.tag if rec is not None else None) or _env("TAG") or _script_tag()
    base = "%s_rank%d_pid%d_pool_%s.ledger.jsonl" % (tag, _rank(), os.getpid(), _safe(name))
    return Pool(name, capacity, unit, os.path.join(folder, base))


# ------------------------------------------------------------- import hook
class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch is being imported, it wraps torch's
    loader so that on_import(torch) runs right after torch's __init__."""

    def __init__(self, on_import):
        self.on_import = on_import
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ArmingLoader(spec.loader, self)
        return spec

    def done(self, module):
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        try:
            self.on_import(module)
        except Exception as e:
            _warn("could not arm on import torch: %r" % (e,))


class _ArmingLoader(importlib.abc.Loader):
    """Torch's own loader, plus a call to the watcher once the module has run."""

    def __init__(self, loader, watcher):
        self._loader = loader
        self._watcher = watcher

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # Leave torch's spec as torch made it, for importlib.resources and friends.
        with contextlib.suppress(Exception):
            module.__spec__.loader = self._loader
            module.__loader__ = self._loader
        self._watcher.done(module)


# ----------------------------------------------------------- public API
_recorder = None
_watcher = None


def _when_torch(fn):
    """Runs fn(torch) now if torch is imported, else right after it is."""
    global _watcher
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):
        fn(torch)
        return
    _watcher = _TorchWatcher(fn)
    sys.meta_path.insert(0, _watcher)


def start(**settings):
    """Starts recording in this process (once): now if torch is imported, else
    when it is. Keyword arguments override the VRAMSCOPE_* variables: out, tag,
    stacks, max_entries, history, steps, every, interval, log_interval, log, signal,
    oom, final. Returns the output folder."""
    global _recorder
    if _recorder is not None and _recorder.pid == os.getpid():
        return _recorder.s.out
    _recorder = _Recorder(Settings(**settings))
    _when_torch(_recorder.arm)
    return _recorder.s.out


def step(n=None):
    """Marks the end of step n (default: the next one), for loops without an
    optimizer. Once called, optimizer steps no longer count."""
    rec = _recorder
    if rec is None:
        return
    rec.explicit = True
    rec._end_step(rec.step + 1 if n is None else int(n))


def dump(reason="manual"):
    """Writes a snapshot now to OUT/{YYYYmmdd-HHMMSS}/; returns its path, or
    None when nothing is recorded (no torch, CUDA not initialized)."""
    rec = _recorder
    return rec.dump(reason) if rec is not None else None


def stop():
    """Stops recording and the hook's threads; the files stay."""
    global _recorder
    if _recorder is not None:
        _recorder.stop()
        _recorder = None


@contextlib.contextmanager
def capture(**settings):
    """Records inside the block and dumps once at its end (to OUT/final/).
    Under `vramscope record`, which already records, it only adds that dump."""
    ours = _recorder is None or _recorder.pid != os.getpid()
    out = start(**settings)
    try:
        yield out
    finally:
        rec = _recorder
        if rec is not None:
            rec.dump("exit", folder="final")
        if ours:
            stop()


def _chain_sitecustomize(own_dir):
    """Runs the sitecustomize this file shadows: the next one on sys.path."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != own_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _main_as_sitecustomize():
    # Code that does `import vramscope_hook` gets this module and its state.
    sys.modules.setdefault("vramscope_hook", sys.modules[__name__])
    own_dir = os.path.dirname(os.path.abspath(__file__))
    if _env("OUT"):
        try:
            start()
        except Exception as e:
            _warn("hook not started: %r" % (e,))
    try:
        _chain_sitecustomize(own_dir)
    except Exception as e:
        _warn("the sitecustomize after vramscope's failed: %r" % (e,))


if __name__ == "sitecustomize":
    _main_as_sitecustomize()

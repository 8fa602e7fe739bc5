"""Tests of vramscope_hook.py under plain python3, with torch replaced by
testdata/torch, a stand-in that records the calls the hook makes.

Each test runs a small program in a fresh interpreter, as `vramscope record`
does: the hook is copied into a temporary folder as sitecustomize.py and put
first on PYTHONPATH, followed by testdata/ (the stand-in torch).

    python3 -m unittest discover -s capture/hook -p 'test_*.py'
"""
import csv
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(HERE, "vramscope_hook.py")
FAKE_TORCH = os.path.join(HERE, "testdata")

sys.path.insert(0, HERE)
import vramscope_hook as hook  # noqa: E402


class Run:
    """One program run under the hook, and what it left behind."""

    def __init__(self, tmp, code, env=None, sitecustomize=True, args=()):
        self.out = os.path.join(tmp, "out")
        self.calls_log = os.path.join(tmp, "calls.jsonl")
        hook_dir = os.path.join(tmp, "hook")
        os.makedirs(hook_dir, exist_ok=True)
        shutil.copy(HOOK, os.path.join(hook_dir, "sitecustomize.py" if sitecustomize else "vramscope_hook.py"))
        script = os.path.join(tmp, "train.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMSCOPE_") and k not in ("RANK", "LOCAL_RANK")}
        e.update({"PYTHONPATH": os.pathsep.join([hook_dir, FAKE_TORCH]), "FAKE_TORCH_LOG": self.calls_log})
        if sitecustomize:
            e["VRAMSCOPE_OUT"] = self.out
        e.update(env or {})
        self.proc = subprocess.run([sys.executable, script, *args], env=e, cwd=tmp,
                                   capture_output=True, text=True, timeout=60)

    @property
    def calls(self):
        if not os.path.exists(self.calls_log):
            return []
        with open(self.calls_log) as f:
            return [json.loads(line)[0] for line in f]

    def files(self, pattern="**/*"):
        return sorted(os.path.relpath(p, self.out) for p in glob.glob(os.path.join(self.out, pattern), recursive=True)
                      if os.path.isfile(p))

    def dumps(self):
        notes = []
        for p in glob.glob(os.path.join(self.out, ".vramscope", "dumps-*.jsonl")):
            with open(p) as f:
                notes += [json.loads(line) for line in f]
        return notes


class HookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vramscope-hook-test-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def ok(self, code, **kw):
        r = Run(self.tmp, code, **kw)
        self.assertEqual(r.proc.returncode, 0, r.proc.stderr)
        return r


# A training loop on the stand-in: 1 MiB more allocated every step.
TRAIN = """
import torch
opt = torch.optim.Optimizer()
for i in range(6):
    torch.cuda.alloc(1 << 20)
    opt.step()
"""


class TestArming(HookTest):
    def test_inert_without_torch(self):
        r = self.ok("""
            import sys
            assert "torch" not in sys.modules, "the hook imported torch"
            import json
            print("ok")
        """)
        self.assertEqual(r.calls, [])
        self.assertEqual(r.files(), [])

    def test_import_torch_without_cuda_records_nothing(self):
        # torchrun's agent and tokenizer workers import torch and never use CUDA.
        r = self.ok("import torch\nopt = torch.optim.Optimizer()\nopt.step()\nopt.step()\n")
        self.assertEqual(r.calls, ["optim.register_optimizer_step_post_hook"])
        self.assertEqual(r.files(), [])

    def test_records_from_cuda_init(self):
        r = self.ok(TRAIN)
        self.assertEqual(r.calls[:4], ["optim.register_optimizer_step_post_hook", "cuda.init",
                                       "cuda.memory._record_memory_history",
                                       "_C._cuda_attach_out_of_memory_observer"])

    def test_record_settings_reach_torch(self):
        r = self.ok(TRAIN, env={"VRAMSCOPE_STACKS": "all", "VRAMSCOPE_MAX_ENTRIES": "1234"})
        with open(r.calls_log) as f:
            rec = [json.loads(line) for line in f if "_record_memory_history" in line][0]
        self.assertEqual(rec[2], {"enabled": "'all'", "context": "'all'", "stacks": "'all'", "max_entries": "1234"})

    def test_torch_spec_is_torch_own(self):
        r = self.ok("""
            import torch
            print(type(torch.__spec__.loader).__name__, type(torch.__loader__).__name__)
        """)
        self.assertNotIn("_ArmingLoader", r.proc.stdout)

    def test_history_off(self):
        r = self.ok(TRAIN, env={"VRAMSCOPE_HISTORY": "0"})
        self.assertNotIn("cuda.memory._record_memory_history", r.calls)


class TestSitecustomizeChain(HookTest):
    def test_runs_the_shadowed_sitecustomize(self):
        other = os.path.join(self.tmp, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['CHAINED'] = 'yes'\n")
        r = self.ok("import os\nprint('chained', os.environ.get('CHAINED'))\n" + TRAIN,
                    env={"PYTHONPATH": os.pathsep.join([os.path.join(self.tmp, "hook"), FAKE_TORCH, other])})
        self.assertIn("chained yes", r.proc.stdout)
        self.assertIn("step2/train_rank0_pid", "".join(r.files()))

    def test_import_vramscope_hook_is_the_running_hook(self):
        r = self.ok("""
            import sitecustomize, vramscope_hook
            print(vramscope_hook is sitecustomize)
        """)
        self.assertEqual(r.proc.stdout.strip(), "True")


class TestNaming(unittest.TestCase):
    def test_script_tag(self):
        cases = [(["/x/train.py"], "train"), (["-c"], "python"), ([""], "python"),
                 (["/x/pkg/__main__.py"], "pkg"), (["/x/my run!.py"], "my-run"), (["/usr/bin/serve"], "serve")]
        saved = sys.argv
        try:
            for argv, want in cases:
                sys.argv = argv
                self.assertEqual(hook._script_tag(), want, argv)
        finally:
            sys.argv = saved

    def test_rank(self):
        class Dist:
            def __init__(self, rank):
                self.rank = rank

            def is_available(self):
                return True

            def is_initialized(self):
                return self.rank is not None

            def get_rank(self):
                return self.rank

        class Torch:
            def __init__(self, rank):
                self.distributed = Dist(rank)

        cases = [({}, None, 0), ({"LOCAL_RANK": "3"}, None, 3), ({"RANK": "5", "LOCAL_RANK": "1"}, None, 5),
                 ({"RANK": "5"}, 7, 7), ({"RANK": ""}, None, 0)]
        for env, dist_rank, want in cases:
            saved = {k: os.environ.pop(k, None) for k in ("RANK", "LOCAL_RANK")}
            try:
                os.environ.update(env)
                self.assertEqual(hook._rank(Torch(dist_rank)), want, (env, dist_rank))
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None)
                    if v is not None:
                        os.environ[k] = v

    def test_parse(self):
        self.assertEqual(hook._parse_steps("4, 2,3"), [2, 3, 4])
        self.assertEqual(hook._parse_steps("none"), [])
        self.assertEqual(hook._parse_seconds("5m"), 300)
        self.assertEqual(hook._parse_seconds("1.5"), 1.5)
        self.assertEqual(hook._parse_seconds("250ms"), 0.25)
        with self.assertRaises(ValueError):
            hook._parse_seconds("soon")


class TestDumps(HookTest):
    def test_steps_and_layout(self):
        r = self.ok(TRAIN, env={"RANK": "3"})
        pid = r.dumps()[0]["pid"]
        self.assertEqual(r.files("step*/*"), ["step%d/train_rank3_pid%d.pickle" % (n, pid) for n in (2, 3, 4)])
        self.assertEqual([(d["reason"], d["step"]) for d in r.dumps()], [("step", 2), ("step", 3), ("step", 4)])

    def test_every_and_tag(self):
        r = self.ok(TRAIN, env={"VRAMSCOPE_STEPS": "none", "VRAMSCOPE_EVERY": "3", "VRAMSCOPE_TAG": "actor"})
        self.assertEqual([f.split("_")[0] for f in r.files("step*/*")], ["step3/actor", "step6/actor"])

    def test_several_optimizers_count_steps_once(self):
        r = self.ok("""
            import torch
            g, d = torch.optim.Optimizer(), torch.optim.Optimizer()
            for i in range(4):
                torch.cuda.alloc(1 << 20)
                d.step()
                g.step()
        """)
        self.assertEqual([d["step"] for d in r.dumps()], [2, 3, 4])

    def test_optimizer_made_anew(self):
        r = self.ok("""
            import torch
            for i in range(4):
                torch.cuda.alloc(1 << 20)
                opt = torch.optim.Optimizer()
                opt.step()
        """)
        self.assertEqual([d["step"] for d in r.dumps()], [2, 3, 4])

    def test_explicit_steps_replace_the_optimizer(self):
        r = self.ok("""
            import torch, vramscope_hook
            opt = torch.optim.Optimizer()
            torch.cuda.alloc(1)
            for n in (10, 2, 3):
                vramscope_hook.step(n)
                opt.step()
        """)
        self.assertEqual([d["step"] for d in r.dumps()], [2, 3])

    def test_final_dump(self):
        cases = [("auto", "import torch\ntorch.cuda.alloc(1)\n", ["final"]),
                 ("auto", TRAIN, ["step2", "step3", "step4"]),
                 ("always", TRAIN, ["final", "step2", "step3", "step4"]),
                 ("never", "import torch\ntorch.cuda.alloc(1)\n", [])]
        for final, code, want in cases:
            with self.subTest(final=final, want=want):
                shutil.rmtree(os.path.join(self.tmp, "out"), ignore_errors=True)
                r = self.ok(code, env={"VRAMSCOPE_FINAL": final})
                self.assertEqual(sorted({f.split("/")[0] for f in r.files("*/*.pickle")}), want)

    def test_interval(self):
        r = self.ok("""
            import time, torch
            torch.cuda.alloc(1)
            time.sleep(0.75)
        """, env={"VRAMSCOPE_INTERVAL": "0.2", "VRAMSCOPE_STEPS": "none"})
        reasons = [d["reason"] for d in r.dumps()]
        self.assertGreaterEqual(reasons.count("interval"), 2, reasons)
        for f in r.files("*/*.pickle"):
            self.assertRegex(f, r"^\d{8}-\d{6}/train_rank0_pid\d+(_\d+)?\.pickle$")


class TestSignal(HookTest):
    SELF_SIGNAL = """
        import os, signal, time, torch
        torch.cuda.alloc(1)
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.1)
        print("alive")
    """

    def test_dump_on_sigusr1(self):
        r = self.ok(self.SELF_SIGNAL)
        self.assertIn("alive", r.proc.stdout)
        self.assertEqual([d["reason"] for d in r.dumps()], ["signal"])
        self.assertRegex(r.files("*/*.pickle")[0], r"^\d{8}-\d{6}/train_rank0_pid\d+_signal\.pickle$")
        # and says so, for record to forward its SIGUSR1 here
        pid = r.dumps()[0]["pid"]
        with open(os.path.join(r.out, ".vramscope", "signal-%d" % pid)) as f:
            self.assertEqual(int(f.read()), signal.SIGUSR1)

    def test_program_handler_wins(self):
        r = self.ok("""
            import os, signal, time, torch
            signal.signal(signal.SIGUSR1, lambda *a: print("program handler"))
            torch.cuda.alloc(1)
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.1)
        """)
        self.assertIn("program handler", r.proc.stdout)
        self.assertEqual([d["reason"] for d in r.dumps()], ["exit"])
        self.assertIn("handles SIGUSR1 itself", r.proc.stderr)

    def test_signal_none(self):
        r = Run(self.tmp, self.SELF_SIGNAL, env={"VRAMSCOPE_SIGNAL": "none"})
        self.assertEqual(r.proc.returncode, -signal.SIGUSR1)  # the default action: terminated
        self.assertEqual(r.dumps(), [])


class TestOOM(HookTest):
    def check_oom(self, r):
        pid = r.dumps()[0]["pid"]
        name = "train_rank0_pid%d" % pid
        self.assertIn("oom/%s.pickle" % name, r.files())
        with open(os.path.join(r.out, "oom", name + "_oom.txt")) as f:
            self.assertTrue(f.read().startswith("CUDA out of memory. Tried to allocate 1024.00 MiB."))

    def test_uncaught(self):
        r = Run(self.tmp, "import torch\ntorch.cuda.alloc(1)\ntorch.cuda.oom(1 << 30)\n")
        self.assertEqual(r.proc.returncode, 1)
        self.assertIn("OutOfMemoryError", r.proc.stderr)
        self.check_oom(r)

    def test_caught_by_the_program(self):
        r = self.ok("""
            import torch
            def serve():
                torch.cuda.oom(1 << 30)
            for i in range(3):
                try:
                    serve()
                except torch.cuda.OutOfMemoryError:
                    print("recovered")
        """)
        self.assertEqual(r.proc.stdout.count("recovered"), 3)
        self.assertEqual([d["reason"] for d in r.dumps()], ["oom"])  # the first OOM only
        self.check_oom(r)

    def test_off(self):
        r = Run(self.tmp, "import torch\ntorch.cuda.oom(1 << 30)\n", env={"VRAMSCOPE_OOM": "0"})
        self.assertNotIn("_C._cuda_attach_out_of_memory_observer", r.calls)
        self.assertEqual(r.files("oom/*"), [])


class TestMemoryLog(HookTest):
    def test_csv_format(self):
        r = self.ok(TRAIN)
        (name,) = r.files("*_memory_log.csv")
        self.assertRegex(name, r"^train_rank0_pid\d+_memory_log\.csv$")
        with open(os.path.join(r.out, name), newline="") as f:
            text = f.read()
        self.assertTrue(text.startswith("timestamp,memory_summary,memory_allocated,memory_reserved\n"))
        rows = list(csv.reader(io.StringIO(text)))[1:]
        # one row per step
        self.assertEqual([r[2] for r in rows], ["1.00", "2.00", "3.00", "4.00", "5.00", "6.00"])
        self.assertEqual(rows[0][3], "1.00")
        self.assertRegex(rows[0][0], r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")
        self.assertIn("PyTorch CUDA memory summary; device ID 0", rows[0][1])
        self.assertNotIn(",", rows[0][1])

    def test_interval(self):
        r = self.ok("""
            import time, torch
            torch.cuda.alloc(3 << 20)
            time.sleep(0.55)
        """, env={"VRAMSCOPE_LOG_INTERVAL": "100ms"})
        (name,) = r.files("*_memory_log.csv")
        with open(os.path.join(r.out, name), newline="") as f:
            rows = list(csv.reader(f))[1:]
        self.assertGreaterEqual(len(rows), 3)
        self.assertEqual({row[2] for row in rows}, {"3.00"})

    def test_off(self):
        r = self.ok(TRAIN, env={"VRAMSCOPE_LOG": "0"})
        self.assertEqual(r.files("*.csv"), [])


class TestAtomicWrite(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_interrupted_write_leaves_nothing(self):
        path = os.path.join(self.tmp, "step2", "a_rank0_pid1.pickle")

        def half(tmp):
            with open(tmp, "wb") as f:
                f.write(b"\x80\x04half")
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            hook.atomic_write(path, half)
        self.assertEqual(os.listdir(os.path.dirname(path)), [])

    def test_write_is_hidden_until_renamed(self):
        path = os.path.join(self.tmp, "a.pickle")
        seen = []

        def write(tmp):
            seen.append(os.path.basename(tmp))
            with open(tmp, "wb") as f:
                f.write(b"whole")
            seen.append(sorted(os.listdir(self.tmp)))

        hook.atomic_write(path, write)
        self.assertTrue(seen[0].startswith("."))
        self.assertNotIn("a.pickle", seen[1])
        self.assertEqual(os.listdir(self.tmp), ["a.pickle"])


class TestModule(HookTest):
    def test_start_step_dump_capture(self):
        out = os.path.join(self.tmp, "mod")
        r = self.ok("""
            import sys, torch, vramscope_hook
            out = sys.argv[1]
            assert vramscope_hook.dump() is None          # nothing started
            vramscope_hook.start(out=out, steps=[2], tag="dec", log=False)
            torch.cuda.alloc(1)
            for n in (1, 2, 3):
                vramscope_hook.step(n)
            print(vramscope_hook.dump("after warm-up"))
            vramscope_hook.stop()
            with vramscope_hook.capture(out=out + "/phase2", tag="p2") as got:
                print("capture", got)
                torch.cuda.alloc(1)
        """, sitecustomize=False, args=[out])
        pid = r.proc.stdout.split("_pid")[1].split("_")[0]
        files = sorted(os.path.relpath(p, out) for p in glob.glob(out + "/**/*.pickle", recursive=True))
        self.assertEqual([f.split("/", 1)[1] if f.split("/")[0][:1].isdigit() else f for f in files],
                         ["dec_rank0_pid%s_after-warm-up.pickle" % pid, "phase2/final/p2_rank0_pid%s.pickle" % pid,
                          "step2/dec_rank0_pid%s.pickle" % pid])
        self.assertIn("capture " + out + "/phase2", r.proc.stdout)
        # stop() turned history off; capture() turned it on and off again
        hist = [c for c in r.calls if c == "cuda.memory._record_memory_history"]
        self.assertEqual(len(hist), 4)

    def test_forked_child_dumps_nothing(self):
        r = self.ok("""
            import os, torch
            torch.cuda.alloc(1)
            pid = os.fork()
            if pid == 0:
                import vramscope_hook
                print("child dump", vramscope_hook.dump("child"))
                os._exit(0)
            os.waitpid(pid, 0)
        """, env={"VRAMSCOPE_FINAL": "never"})
        self.assertIn("child dump None", r.proc.stdout)


class TestPoolLedger(HookTest):
    def test_ledger_beside_the_snapshots(self):
        r = self.ok("""
            import torch, vramscope_hook
            torch.cuda.alloc(1)

            def admit(kv, rid):
                return kv.alloc(slots=[rid, rid + 10], owner="req-%d" % rid)

            kv = vramscope_hook.pool("req slots", 64, "slots")
            pages = vramscope_hook.pool("kv", 1000, "tokens")
            for rid in range(3):
                admit(kv, rid)
                pages.alloc(100, owner=rid)
            kv.free(slots=[0, 10], owner="req-0")
            pages.free(100, owner=0)
            kv.idle()
        """)
        (path,) = r.files("*_pool_req-slots.ledger.jsonl")
        self.assertRegex(path, r"^train_rank0_pid\d+_pool_req-slots\.ledger\.jsonl$")
        with open(os.path.join(r.out, path)) as f:
            recs = [json.loads(line) for line in f]
        head = recs[0]
        self.assertEqual((head["format"], head["version"], head["pool"], head["capacity"], head["unit"]),
                         ("vramscope-pool-ledger", 1, "req slots", 64, "slots"))
        ops = [x.get("op") for x in recs[1:]]
        self.assertEqual(ops, ["stack", "alloc", "alloc", "alloc", "free", "idle"])
        stack = recs[1]["frames"]
        self.assertEqual([f[2] for f in stack[:2]], ["admit", "<module>"])  # the caller, not the hook
        self.assertEqual(recs[2], {"op": "alloc", "t": recs[2]["t"], "n": 2, "owner": "req-0", "slots": [0, 10], "stack": 0})
        self.assertEqual(recs[5]["slots"], [0, 10])
        self.assertEqual(len(r.files("*_pool_kv.ledger.jsonl")), 1)

    def test_alloc_needs_a_count(self):
        kv = hook.pool("p", 4, out=self.tmp)
        with self.assertRaises(ValueError):
            kv.alloc(owner="x")
        kv.close()


# A model of the stand-in: Net(encoder=Block(mlp=Leaf), head=Leaf), each
# forward allocating once before calling its children; the head raises on
# its second call.
MODEL = """
import json
import torch
from torch import nn

class Leaf(nn.Module):
    calls = 0
    def forward(self, x):
        torch.cuda.alloc(1)
        return x

class Raises(Leaf):
    def forward(self, x):
        Raises.calls += 1
        torch.cuda.alloc(1)
        if Raises.calls == 2:
            raise ValueError("boom")
        return x

class Block(nn.Module):
    def forward(self, x):
        torch.cuda.alloc(1)
        return self.mlp(x)

class Net(nn.Module):
    def forward(self, x):
        torch.cuda.alloc(1)
        x = self.encoder(x)
        torch.cuda.alloc(1)
        return self.head(x)

net = Net(encoder=Block(mlp=Leaf()), head=Raises())
torch.cuda.memory._set_memory_metadata("step=1")
net(0)
torch.cuda.alloc(1)
try:
    net(0)
except ValueError:
    pass
torch.cuda.alloc(1)
print(json.dumps(torch.cuda.tags))
"""


class TestModuleNames(HookTest):
    def test_forwards_tag_their_allocations(self):
        r = self.ok(MODEL, env={"VRAMSCOPE_MODULE_NAMES": "1"})
        tags = json.loads(r.proc.stdout)
        one = ["module=Net", "module=Net.encoder", "module=Net.encoder.mlp", "module=Net", "module=Net.head"]
        # After each forward the tag is what the program had set; a forward
        # that raised restores it too.
        self.assertEqual(tags, one + ["step=1"] + one + ["step=1"])
        self.assertIn("nn.register_module_forward_pre_hook", r.calls)

    def test_off_by_default(self):
        r = self.ok(MODEL)
        self.assertEqual(set(json.loads(r.proc.stdout)), {"step=1"})
        self.assertNotIn("nn.register_module_forward_pre_hook", r.calls)

    def test_old_torch_warns_once(self):
        r = self.ok("""
            import json
            import torch
            from torch import nn
            class Leaf(nn.Module):
                def forward(self, x):
                    torch.cuda.alloc(1)
            Leaf()(0)
            Leaf()(0)
            print(json.dumps(torch.cuda.tags))
        """, env={"VRAMSCOPE_MODULE_NAMES": "1", "FAKE_TORCH_NO_METADATA": "1"})
        self.assertEqual(json.loads(r.proc.stdout), ["", ""])
        self.assertEqual(r.proc.stderr.count("module names off"), 1, r.proc.stderr)

if __name__ == "__main__":
    unittest.main()

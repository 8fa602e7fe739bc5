"""Tests of memo_refs.py on a pickle whose memo reads are known."""
import pickle
import unittest

import memo_refs


def snapshot():
    """A snapshot-shaped dict with 3000 trace entries in batches of 1000:
    keys, the action 'alloc' and five frame dicts first written in entry 0;
    each pair of entries sharing one frames list (alloc and free of one
    call); from entry 1500 on, a new action string object, first written
    there; from entry 2500 on, another, first written there."""
    frames = [{"filename": f"f{k}.py", "line": k, "name": f"fn{k}"} for k in range(5)]
    alloc, oom, reset = "alloc", "".join(["o", "o", "m"]), "".join(["re", "set"])
    trace, shared = [], None
    for i in range(3000):
        if i % 2 == 0:
            shared = [frames[i % 5], frames[(i + 1) % 5]]
        action = reset if i >= 2500 else oom if i >= 1500 else alloc
        trace.append({"action": action, "addr": i, "frames": shared})
    return {"segments": [], "device_traces": [trace]}


class RefsTest(unittest.TestCase):
    def test_one_tail(self):
        # Cut in two, the tail starts at the first batch after the middle
        # (entry 1500): entry 2000, and reads 1000 entries' worth.
        size, prefix_len, rows = memo_refs.refs(pickle.dumps(snapshot(), protocol=4), 2, 0.2)
        self.assertEqual(len(rows), 1)
        r = rows[0]
        self.assertGreater(r["start"], size // 2)
        # The second of each pair reads the first's list; entries 2501-2999
        # read the action entry 2500 wrote.
        self.assertEqual(r["own"], 500 + 499)
        self.assertEqual(r["own_str"], 499)
        self.assertEqual(r["prefix_str"], 3000)  # three keys an entry
        self.assertEqual(r["prefix_other"], 1000)  # two frame dicts a list, written in entry 0
        self.assertEqual(r["mid_str"], 500)  # the action first written in entry 1500
        self.assertEqual(len(r["mid_str_ids"]), 1)
        self.assertEqual(r["mid_other"], 0)
        self.assertEqual(r["reads"], 3000 + 500 + 499 + 500 + 1000)
        self.assertGreater(prefix_len, 0)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""Unit tests of scripts/check-journal on synthetic journals."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                       "check-journal")
S = 1_000_000_000  # one second in ns


def ev(t, who, event, **kw):
    d = {"mono_ns": int(t * S), "wall": "2026-01-01T00:00:00.000Z", "identity": who,
         "event": event, "term": kw.pop("term", 1)}
    d.update(kw)
    return d


def lead(who, start, stop, term=1, fence=True, ticks=()):
    """A replica's term: acquired at start, ticker started, renewed each 0.5 s, stopped at stop."""
    out = [ev(start, who, "term_acquired", term=term,
              **({"valid_until_ns": int((start + 1.5) * S)} if fence else {})),
           ev(start + 0.01, who, "module_started", term=term, module="tick", leader_only=True)]
    t, last = start + 0.5, (start + 10 if stop is None else stop)
    while fence and t < last:
        out.append(ev(t, who, "renewed", term=term, valid_until_ns=int((t + 1.5) * S)))
        t += 0.5
    out += [ev(x, who, "module_output", term=term, module="tick", leader_only=True,
               detail=f"tick {n} term {term}") for n, x in enumerate(ticks, 1)]
    if stop is not None:
        out += [ev(stop, who, "module_stopped", term=term, module="tick", leader_only=True),
                ev(stop + 0.01, who, "term_lost", term=term, reason="test")]
    return out


class CheckJournal(unittest.TestCase):
    def run_checker(self, journals, *args):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for who, events in journals.items():
                p = os.path.join(d, who + ".jsonl")
                with open(p, "w") as f:
                    for e in sorted(events, key=lambda e: e["mono_ns"]):
                        f.write(json.dumps(e) + "\n")
                paths.append(p)
            r = subprocess.run([sys.executable, CHECKER, "--json", *args, *paths],
                               capture_output=True, text=True, timeout=30)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        return r.returncode, json.loads(r.stdout)

    def test_per_lease_judges_each_lease_apart(self):
        """Agents of a balance group lead different leases at once: not an overlap
        with --per-lease (without it, it is); one lease led by two is one."""
        def on(lease, events):
            return [dict(e, lease=lease) for e in events]
        journals = {"a": on("default/w-0", lead("a", 10, 20)),
                    "b": on("default/w-1", lead("b", 10, 20, term=2))}
        rc, rep = self.run_checker(journals, "--per-lease")
        self.assertEqual(rc, 0, rep)
        self.assertEqual(sorted(rep["replicas"]), ["a default/w-0", "b default/w-1"])
        rc, rep = self.run_checker(journals)
        self.assertEqual(rc, 1)
        journals["b"] += on("default/w-0", lead("b", 15, 18, term=3))
        rc, rep = self.run_checker(journals, "--per-lease")
        self.assertEqual(rc, 1)
        self.assertEqual(rep["overlaps"][0]["replicas"], ["a default/w-0", "b default/w-0"])

    def test_overlapping_pair_is_caught(self):
        rc, rep = self.run_checker({"a": lead("a", 10, 14), "b": lead("b", 13, 16, term=2)})
        self.assertEqual(rc, 1)
        self.assertEqual(len(rep["overlaps"]), 1)
        self.assertAlmostEqual(rep["overlaps"][0]["ms"], 990, delta=1)

    def test_a_replica_that_never_led_has_its_row(self):
        # Regression: the demo's table left out the agent that never
        # led (its journal is empty).
        rc, rep = self.run_checker({"a": lead("a", 10, 14), "quiet": []})
        self.assertEqual(rc, 0)
        self.assertIn("quiet", rep["replicas"])
        self.assertEqual(rep["replicas"]["quiet"]["intervals"], 0)

    def test_clean_handover_passes(self):
        rc, rep = self.run_checker(
            {"a": lead("a", 10, 14, ticks=[11, 12, 13]),
             "b": lead("b", 16, None, term=2, ticks=[17, 18])},
            "--heal", f"outage={15 * S}", "--bound", "2")
        self.assertEqual(rc, 0, rep)
        self.assertEqual(rep["overlaps"], [])
        self.assertEqual(rep["stray_ticks"], [])
        self.assertAlmostEqual(rep["liveness"][0]["recovery_ms"], 1010, delta=1)
        self.assertEqual(rep["liveness"][0]["leader"], "b")

    def test_tick_after_fence_expiry_is_caught(self):
        # a leads, renews until 12 (fence 13.5), is paused, resumes at 20 and ticks
        # before its runner notices; b took over at 15.
        a = [e for e in lead("a", 10, 21) if not (e["event"] == "renewed" and e["mono_ns"] > 12 * S)]
        a.append(ev(20.2, "a", "module_output", module="tick", leader_only=True,
                    detail="tick 9 term 1"))
        rc, rep = self.run_checker({"a": a, "b": lead("b", 15, None, term=2)})
        self.assertEqual(rc, 1)
        self.assertEqual(rep["overlaps"], [], "the fence ends a's interval at 13.5")
        self.assertEqual(len(rep["stray_ticks"]), 1)
        self.assertIn("outside its own", rep["stray_ticks"][0]["why"])

    def test_skipped_tick_after_fence_expiry_is_fine(self):
        a = [e for e in lead("a", 10, 21) if not (e["event"] == "renewed" and e["mono_ns"] > 12 * S)]
        a.append(ev(20.2, "a", "module_output", module="tick", leader_only=True,
                    detail="tick skipped: the lease is not confirmed (fence expired)"))
        rc, rep = self.run_checker({"a": a, "b": lead("b", 15, None, term=2)})
        self.assertEqual(rc, 0, rep)

    def test_tick_inside_another_replicas_interval_is_caught(self):
        b = lead("b", 15, None, term=2)
        a = lead("a", 10, 14) + [ev(16, "a", "module_started", term=1, module="tick",
                                    leader_only=True),
                                 ev(16.1, "a", "module_output", module="tick", leader_only=True,
                                    detail="tick 1 term 1")]
        rc, rep = self.run_checker({"a": a, "b": b})
        self.assertEqual(rc, 1)
        self.assertTrue(rep["stray_ticks"])

    def test_killed_process_interval_ends_at_its_end(self):
        # No fence data: a's interval ends only when its process ended (--ended).
        a = lead("a", 10, None, fence=False)
        b = lead("b", 14, None, term=2, fence=False)
        rc, rep = self.run_checker({"a": a, "b": b})
        self.assertEqual(rc, 1, "open-ended interval of a overlaps b")
        rc, rep = self.run_checker({"a": a, "b": b}, "--ended", f"a={12 * S}")
        self.assertEqual(rc, 0, rep)
        self.assertTrue(rep["warnings"])

    def test_interval_ends_when_the_module_is_down_not_when_asked(self):
        a = lead("a", 10, None, fence=False) + [
            ev(14, "a", "module_stopped", module="tick", leader_only=True,
               reason="stop requested: leadership ended"),
            ev(15, "a", "module_stopped", module="tick", leader_only=True,
               reason="exit_reason(user_shutdown)")]
        rc, rep = self.run_checker({"a": a, "b": lead("b", 14.5, None, term=2, fence=False)})
        self.assertEqual(rc, 1)
        self.assertAlmostEqual(rep["overlaps"][0]["ms"], 490, delta=1)

    def test_no_leader_after_heal_is_late(self):
        rc, rep = self.run_checker({"a": lead("a", 10, 14), "b": lead("b", 30, None, term=2)},
                                   "--heal", f"down={15 * S}", "--bound", "5")
        self.assertEqual(rc, 1)
        self.assertFalse(rep["liveness"][0]["ok"])
        rc, rep = self.run_checker({"a": lead("a", 10, 14)}, "--heal", f"down={15 * S}")
        self.assertEqual(rc, 1)
        self.assertIsNone(rep["liveness"][0]["recovery_ms"])

    def test_counts_per_fault(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump([{"name": "first", "injected_mono_ns": 9 * S, "healed_mono_ns": 15 * S},
                       {"name": "second", "injected_mono_ns": 20 * S,
                        "healed_mono_ns": 21 * S}], f)
        try:
            rc, rep = self.run_checker({"a": lead("a", 10, 14),
                                        "b": lead("b", 16, None, term=2)}, "--heals", f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(rc, 0, rep)
        first, second = rep["liveness"]
        self.assertEqual(first["counts"]["term_acquired"], 2)
        self.assertEqual(first["counts"]["module_stopped"], 1)
        self.assertEqual(second["counts"]["term_acquired"], 0)
        self.assertEqual(second["recovery_ms"], 0)


if __name__ == "__main__":
    unittest.main()

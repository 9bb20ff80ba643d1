"""bench/python/common.py's interleaved rounds (--repeat): which run an allocator's table row
shows, and the rounds it lists."""

import os
import sys
import unittest

BENCH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "bench", "python"))
sys.path.insert(0, BENCH)
import common  # noqa: E402


def run(ms, tag):
    return {"ms": {"median": ms}, "tag": tag}


def figure(result):
    return result["ms"]["median"]


class MiddleRunTest(unittest.TestCase):
    def test_the_run_with_the_median_figure_is_kept_with_every_rounds_figure(self):
        chosen = common.middle_run([run(12.0, "a"), run(9.0, "b"), run(10.0, "c")], figure)
        self.assertEqual(chosen["tag"], "c")
        self.assertEqual(chosen["rounds"], [12.0, 9.0, 10.0])

    def test_a_failed_round_is_never_chosen_and_shows_as_none(self):
        chosen = common.middle_run([{"error": "exit 1"}, run(9.0, "b"), run(11.0, "c")], figure)
        self.assertEqual(chosen["tag"], "b")  # the lower middle of two
        self.assertEqual(chosen["rounds"], [None, 9.0, 11.0])

    def test_when_every_round_failed_the_last_failure_is_reported(self):
        chosen = common.middle_run([{"error": "exit 1"}, {"error": "exit 2"}], figure)
        self.assertEqual(chosen["error"], "exit 2")
        self.assertEqual(chosen["rounds"], [None, None])

    def test_the_runs_themselves_are_not_changed(self):
        runs = [run(1.0, "a"), run(2.0, "b"), run(3.0, "c")]
        common.middle_run(runs, figure)
        self.assertNotIn("rounds", runs[1])




class OffloadRowSettingsTest(unittest.TestCase):
    """offload_bench.py's rows with settings (ROW:chunk=MIB:slice=N): parsed, or refused with
    the row named."""

    def setUp(self):
        import offload_bench
        self.bench = offload_bench

    def test_settings_are_parsed_and_each_row_stays_a_row_of_its_own(self):
        self.assertEqual(self.bench.row_settings("uma_2x_bw:chunk=32:slice=0"),
                         ("uma_2x_bw", {"chunk": 32, "slice": 0}))
        self.assertEqual(self.bench.row_settings("native"), ("native", {}))
        self.assertEqual(self.bench.checked_rows("native, uma_3x_bw:slice=1"),
                         ["native", "uma_3x_bw:slice=1"])
        self.assertEqual(self.bench.row_settings("uma_3x_bw:streams=1"),
                         ("uma_3x_bw", {"streams": 1}))

    def test_bad_settings_are_refused_naming_the_row(self):
        for name, words in [("uma_2x_bw:chunk=0", "'chunk=0' is not a setting"),
                            ("uma_2x_bw:chunk=\u00b2", "is not a setting"),
                            ("uma_2x_bw:depth=3", "'depth=3' is not a setting"),
                            ("uma_2x_bw:slice=1:slice=2", "slice given twice"),
                            ("uma_2x_bw:streams=0", "'streams=0' is not a setting"),
                            ("uma_2x_bw:streams=3", "'streams=3' is not a setting"),
                            ("uma_2x:slice=1", "settings are for step_in_backward rows"),
                            ("uma_2x_bwwhole:slice=1", "other than _bwce and _bwwhole")]:
            with self.assertRaises(SystemExit) as refused:
                self.bench.row_settings(name)
            self.assertIn(repr(name), str(refused.exception))
            self.assertIn(words, str(refused.exception))
        with self.assertRaises(SystemExit) as refused:
            self.bench.checked_rows("native,uma_9x_bw")
        self.assertIn("uma_9x_bw", str(refused.exception))


class ChildProgressTest(unittest.TestCase):
    """run_children prints each child's figure as it finishes, so that a run cut short by a
    time limit around the whole script still shows what it measured."""

    def test_each_childs_figure_is_printed_when_it_finishes(self):
        import contextlib
        import io
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
            script.write("import json, sys\n"
                         f"print({common.RESULT_PREFIX!r} + json.dumps("
                         "{'ms': {'median': len(sys.argv[2]) * 1.5}}))\n")
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                results = common.run_children(script.name, ["ab", "abcd"], [], 60, figure)
        finally:
            os.unlink(script.name)
        lines = [line.strip() for line in out.getvalue().splitlines()]
        self.assertEqual(figure(results["ab"]), 3.0)
        self.assertTrue(any(line.startswith("ab: 3.000 in ") for line in lines), lines)
        self.assertTrue(any(line.startswith("abcd: 6.000 in ") for line in lines), lines)
        self.assertLess(lines.index(next(line for line in lines if line.startswith("ab: "))),
                        lines.index(next(line for line in lines if "abcd" in line)),
                        "printed before the next child starts")


if __name__ == "__main__":
    unittest.main()

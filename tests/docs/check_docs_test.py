#!/usr/bin/python3
"""Tests of scripts/check-docs on small made-up trees: each kind of reference
it checks is caught when stale and passes when it resolves, and each
readability rule (long sentences, long table cells, the opening question,
issue numbers) fails a page that breaks it, naming the file and line."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                       "check-docs")

SOURCE = """\
// A source file: the names the docs may cite.
constexpr double jitter_factor = 0.2;
void spawn_runner();
struct supervision_policy { int restart_backoff_min, restart_backoff_max; };
const char* env = "LEASEHOLD_KEEP_TEMP";
const char* flag = "--margin-ms";
const char* key = "max_restarts";
"""


class Harness(unittest.TestCase):
    """Runs the checker on made-up trees (no tests of its own)."""

    def check(self, readme, extra=None):
        """Runs the checker on a tree with README.md = readme; (exit code, output)."""
        with tempfile.TemporaryDirectory() as root:
            files = {"README.md": textwrap.dedent(readme),
                     "docs/safety.md": "# Safety: why can two replicas never lead at once?\n\n"
                                       "## The seeded simulator (`tests/sim`)\n\ntext\n\n"
                                       "## Bounds\n\n## Bounds\n",
                     "actors/runner.cpp": SOURCE,
                     "tests/sim/meson.build": "executable('sim-test', 'sim_test.cpp')\n",
                     "tests/sim/sim_test.cpp": "// nothing\n",
                     "meson.build": "static_library('leasehold')\n"}
            files.update(extra or {})
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            r = subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True,
                               text=True, timeout=60, env=dict(os.environ, LEASEHOLD_BUILD_ROOT=""))
        return r.returncode, r.stdout + r.stderr

    def assert_clean(self, readme, extra=None):
        rc, out = self.check(readme, extra)
        self.assertEqual(rc, 0, out)

    def assert_caught(self, readme, what, extra=None):
        rc, out = self.check(readme, extra)
        self.assertEqual(rc, 1, out)
        self.assertIn(what, out)


class CheckDocs(Harness):
    def test_resolving_references_pass(self):
        self.assert_clean("""\
            # Title

            See [safety](docs/safety.md), [its simulator](docs/safety.md#the-seeded-simulator-testssim),
            [the second bounds](docs/safety.md#bounds-1), [this](#title), [web](https://example.com/x).
            `jitter_factor`, `spawn_runner()`, `leasehold::spawn_runner`, `LEASEHOLD_KEEP_TEMP=1`,
            `restart.max_restarts`, `supervision_policy::restart_backoff_min/max`, `--margin-ms`,
            `actors/runner.cpp`, `runner.cpp`, `tests/sim`, `build/tests/sim/sim-test`,
            `libleasehold.a`, `leasehold fence check --margin-ms N`, actors/runner.cpp in prose.
            Prose spans: `leader`, `ns/name`, `coordination.k8s.io/v1`, `/livez`, `<prefix>/lib`,
            `application/json`, `go.etcd.io/etcd/client/v3`, `kubectl get lease -w`.

            ```sh
            not/a/path.cpp `missing_name` [x](nowhere.md)
            ```
            """)

    def test_a_broken_link_is_caught(self):
        self.assert_caught("[x](docs/missing.md)\n", "link `docs/missing.md`")

    def test_a_missing_anchor_is_caught(self):
        self.assert_caught("[x](docs/safety.md#the-simulator)\n", "anchor `docs/safety.md#the-simulator`")
        self.assert_caught("# Title\n\n[x](#titel)\n", "anchor `#titel`")

    def test_a_stale_name_is_caught(self):
        self.assert_caught("the constant `retry_jitter`\n", "name `retry_jitter`")
        self.assert_caught("`LEASEHOLD_KEEP_TMP=1`\n", "`LEASEHOLD_KEEP_TMP`")
        self.assert_caught("`supervision_policy::restart_backoff_min/avg`\n", "restart_backoff_avg")
        self.assert_caught("as `validate_all(timings)` says\n", "`validate_all`")

    def test_a_name_only_in_markdown_is_caught(self):
        self.assert_caught("`only_in_docs`\n", "only_in_docs",
                           extra={"docs/other.md": "`only_in_docs`\n"})

    def test_a_stale_path_is_caught(self):
        self.assert_caught("`actors/elector.cpp`\n", "path `actors/elector.cpp`")
        self.assert_caught("see actors/elector.cpp\n", "path actors/elector.cpp")
        self.assert_caught("`elector.hpp`\n", "path `elector.hpp`")
        self.assert_caught("`build/tests/sim/sim-tests`\n", "path `build/tests/sim/sim-tests`")

    def test_a_stale_flag_of_this_project_is_caught(self):
        self.assert_caught("`leasehold fence check --margin N`\n", "flag `--margin`")
        self.assert_caught("`--no-such-flag`\n", "flag `--no-such-flag`")

    def test_a_stale_path_in_a_source_comment_is_caught(self):
        self.assert_caught("text\n", "path actors/clock.hpp (in a comment)",
                           extra={"actors/x.cpp": "// wall times: see actors/clock.hpp\nint x;\n"})


def sentence(n, end="."):
    """A sentence of n words."""
    return " ".join(["word"] * n) + end


class Readability(Harness):
    """The rules on prose: sentence length, table cells, the opening
    question, no issue numbers."""

    def test_short_sentences_pass(self):
        # 33 short sentences and one of 41 words: 1 of 34 is under 3 %.
        # Fenced code, tables, headings and list markers do not count, and
        # "e.g." ends no sentence.
        prose = " ".join(sentence(8) for _ in range(33)) + "\n\n" + sentence(41) + "\n"
        self.assert_clean("# Title\n\n" + prose + "\n```\n" + sentence(80) + "\n```\n\n"
                          "| a | b |\n|---|---|\n| " + sentence(50) + " | x |\n\n"
                          "- e.g. " + sentence(30) + "\n")

    def test_too_many_long_sentences_fail_naming_file_and_line(self):
        # 2 of 11 sentences ("A list:" is one) over 40 words: one line per
        # long sentence.
        page = "# Title\n\n" + " ".join(sentence(5) for _ in range(8)) + "\n\n" \
            + sentence(41) + "\n\nA list:\n\n- " + sentence(45) + "\n"
        rc, out = self.check(page)
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:5: sentence of 41 words: 2 of 11 sentences over 40 words", out)
        self.assertIn("README.md:9: sentence of 45 words", out)

    def test_a_sentence_runs_on_until_its_end(self):
        # A sentence over three lines, its words counted as one sentence; a
        # list item is a sentence of its own even without a full stop.
        words = sentence(42).split()
        page = "# T\n\n" + " ".join(words[:14]) + "\n" + " ".join(words[14:28]) + "\n" \
            + " ".join(words[28:]) + "\n"
        rc, out = self.check(page)
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:3: sentence of 42 words: 1 of 1", out)
        self.assert_clean("# T\n\n" + "\n".join("- " + sentence(21, "") for _ in range(2)) + "\n")

    def test_a_long_table_cell_fails_naming_file_and_line(self):
        self.assert_caught("# T\n\n| a | b |\n|---|---|\n| x | " + sentence(61) + " |\n",
                           "README.md:5: table cell 2 has 61 words (at most 60)")
        self.assert_clean("# T\n\n| a | b |\n|---|---|\n| x | " + sentence(60) + " |\n")

    def test_a_long_cell_in_other_markdown_is_caught(self):
        self.assert_caught("text\n", "tests/notes.md:3: table cell 1 has 70 words",
                           extra={"tests/notes.md": "| a |\n|---|\n| " + sentence(70) + " |\n"})

    def test_a_docs_page_without_its_question_fails(self):
        self.assert_caught("text\n", "docs/other.md:1: no question",
                           extra={"docs/other.md": "# Other\n\nIt says things.\n"})
        self.assert_caught("text\n", "cmd/tool/README.md:1: no question",
                           extra={"cmd/tool/README.md": "# tool\n\nA tool.\n"})
        # A question later on does not count: it must open the page.
        self.assert_caught("text\n", "docs/other.md:1: no question",
                           extra={"docs/other.md": "# Other\n\nIt says things.\n\nWhy?\n"})

    def test_a_docs_page_that_opens_with_its_question_passes(self):
        self.assert_clean("text\n", extra={
            "docs/a.md": "# A: why does it hold?\n\ntext\n",
            "docs/b.md": "# B\n\nWhat does B do, and\nwhen does it stop?\n\ntext\n",
            "cmd/tool/README.md": "## tool\n\nHow do I run it?\n"})

    def test_issue_numbers_fail_naming_file_and_line(self):
        ref = "issue %d" % 19        # built here, so this file holds no reference itself
        self.assert_caught("text\n\nSee " + ref + ".\n", "README.md:3: issue reference `" + ref + "`")
        self.assert_caught("text\n", "actors/x.cpp:2: issue reference",
                           extra={"actors/x.cpp": "int x;\n// fixed in " + ref.title() + ", item 6\n"})
        self.assert_caught("text\n", "tests/t.py:1: issue reference `(#%d)`" % 12,
                           extra={"tests/t.py": "# the fix (#%d)\n" % 12})
        self.assert_caught("text\n", "tests/meson.build:1: issue reference",
                           extra={"tests/meson.build": "test('unit-" + ref.replace(" ", "-") + "')\n"})
        # A comment that wraps between the word and its number.
        self.assert_caught("text\n", "tests/t.cpp:1: issue reference",
                           extra={"tests/t.cpp": "// see issue\n// %d for why\n" % 20})
        # A test case's name.
        self.assert_caught("text\n", "tests/t.cpp:1: issue reference",
                           extra={"tests/t.cpp": 'TEST_CASE("it holds (%s)") {}\n' % ref})

    def test_words_and_numbers_that_are_no_issue_reference_pass(self):
        self.assert_clean("text\n\nAn issue with 3 replicas; #include; C# 12; seed #7.\n", extra={
            "actors/x.cpp": "#include <x>\n// an issue: 2 leases\nint a[2]; // #1 of 2\n"})


if __name__ == "__main__":
    unittest.main()

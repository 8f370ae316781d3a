#!/usr/bin/python3
"""Tests of scripts/check-docs on small made-up trees: each kind of reference
it checks is caught when stale and passes when it resolves."""

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


class CheckDocs(unittest.TestCase):
    def check(self, readme, extra=None):
        """Runs the checker on a tree with README.md = readme; (exit code, output)."""
        with tempfile.TemporaryDirectory() as root:
            files = {"README.md": textwrap.dedent(readme),
                     "docs/safety.md": "# Safety\n\n## The seeded simulator (`tests/sim`)\n\ntext\n\n"
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


if __name__ == "__main__":
    unittest.main()

"""benchmarks/readme_examples.py: marker parsing, block replacement, a trivial end-to-end run, the README guard."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "readme_examples.py"

_spec = importlib.util.spec_from_file_location("readme_examples", SCRIPT)
rx = importlib.util.module_from_spec(_spec)
sys.modules["readme_examples"] = rx  # dataclasses resolve their module through sys.modules
_spec.loader.exec_module(rx)

DOC = """# Title

Some text.

<!-- example-output: python -m tool --help -->
```
old help
```

```bash
make demo   # a command to type, no marker needed
```

<!-- example-output: mkdir -p runs && echo hi > runs/a.txt && cat runs/a.txt -->
```text
old 1
old 2
```
tail text
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_find_examples_lines_and_commands():
    examples = rx.find_examples(DOC)
    assert [(e.line, e.command) for e in examples] == [
        (5, "python -m tool --help"),
        (14, "mkdir -p runs && echo hi > runs/a.txt && cat runs/a.txt"),
    ]
    lines = DOC.splitlines()
    assert lines[examples[0].start:examples[0].end] == ["old help"]
    assert lines[examples[1].start:examples[1].end] == ["old 1", "old 2"]


def test_marker_without_block_is_an_error():
    with pytest.raises(ValueError, match="line 1"):
        rx.find_examples("<!-- example-output: echo x -->\n\n```\nx\n```\n")


def test_replace_outputs_keeps_the_rest_byte_identical():
    first, second = rx.find_examples(DOC)
    new = rx.replace_outputs(DOC, {first: "usage: tool\n  -h", second: ""})
    assert new == DOC.replace("old help\n", "usage: tool\n  -h\n").replace("old 1\nold 2\n", "")
    assert rx.replace_outputs(DOC, {}) == DOC


def test_normalise_paths_warnings_and_whitespace():
    raw = ("\n/tmp/x/runs/r1: done   \n/work/m/gnn/a.py:3: UserWarning: careful\n  warnings.warn('careful')\n"
           "outputs in /tmp/x\nlast\n\n")
    assert rx.normalise(raw, ["/tmp/x"]) == "runs/r1: done\noutputs in .\nlast"


def test_end_to_end_on_a_temporary_file(tmp_path):
    doc = tmp_path / "doc.md"
    text = 'Intro.\n\n<!-- example-output: echo hello && python -c "print(1+1)" -->\n```\nstale\n```\nEnd.\n'
    doc.write_text(text)
    proc = _run("--file", str(doc))
    assert proc.returncode == 0, proc.stderr
    expected = '$ echo hello\nhello\n$ python -c "print(1+1)"\n2\n'
    assert doc.read_text() == text.replace("stale\n", expected)


def test_failing_example_leaves_the_file_unchanged(tmp_path):
    doc = tmp_path / "doc.md"
    text = "<!-- example-output: echo before && exit 3 -->\n```\nstale\n```\n"
    doc.write_text(text)
    proc = _run("--file", str(doc))
    assert proc.returncode == 1
    assert "exited with code 3" in proc.stderr.splitlines()[-1]
    assert doc.read_text() == text


def test_check_flags_unmarked_plain_blocks(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```\ntyped output\n```\n\n<!-- example-output: echo ok -->\n```\nok\n```\n\n```bash\nls\n```\n")
    proc = _run("--check", "--file", str(doc))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [f"{doc}:1: plain fenced block without an example-output marker above it"]
    doc.write_text("<!-- example-output: echo ok -->\n```\nok\n```\n\n```bash\nls\n```\n")
    assert _run("--check", "--file", str(doc)).returncode == 0


def test_readme_has_no_typed_output():
    proc = _run("--check")
    assert proc.returncode == 0, proc.stdout


def test_bad_argument_exits_2():
    assert _run("--no-such-option").returncode == 2

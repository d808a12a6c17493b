"""benchmarks/readme_examples.py: marker parsing, block replacement, a trivial end-to-end run, the README guard.

Also the documentation's shape: README.md stays one page and every relative link of README.md and docs/*.md
points at a file (and heading) that exists.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import readme_examples as rx

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "readme_examples.py"

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
    raw = ("\n/tmp/x/runs/r1: done   \n/home/u/gnn/a.py:3: UserWarning: careful\n  warnings.warn('careful')\n"
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


def test_several_files_each_in_its_own_directory(tmp_path):
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("<!-- example-output: echo one > x.txt && cat x.txt -->\n```\nstale\n```\n")
    second.write_text("<!-- example-output: ls -->\n```\nstale\n```\n")
    proc = _run("--file", str(first), "--file", str(second))
    assert proc.returncode == 0, proc.stderr
    assert first.read_text() == "<!-- example-output: echo one > x.txt && cat x.txt -->\n```\n" \
        "$ echo one > x.txt\n$ cat x.txt\none\n```\n"
    assert second.read_text() == "<!-- example-output: ls -->\n```\n$ ls\n```\n"  # a.md's x.txt is not there


def test_failure_in_a_later_file_keeps_the_earlier_one_written(tmp_path):
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("<!-- example-output: echo ok -->\n```\nstale\n```\n")
    second.write_text("<!-- example-output: exit 4 -->\n```\nstale\n```\n")
    proc = _run("--file", str(first), "--file", str(second))
    assert proc.returncode == 1
    assert f"{second}:1" in proc.stderr and "exited with code 4" in proc.stderr
    assert first.read_text() == "<!-- example-output: echo ok -->\n```\n$ echo ok\nok\n```\n"
    assert second.read_text() == "<!-- example-output: exit 4 -->\n```\nstale\n```\n"


def test_check_covers_every_file(tmp_path):
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    good.write_text("<!-- example-output: echo ok -->\n```\nok\n```\n")
    bad.write_text("Text.\n\n```\ntyped output\n```\n")
    proc = _run("--check", "--file", str(good), "--file", str(bad))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [f"{bad}:3: plain fenced block without an example-output marker above it"]


def test_default_files_are_the_readme_and_every_docs_page():
    files = rx.default_files()
    docs = sorted((REPO_ROOT / "docs").glob("*.md"))
    assert docs, "docs/*.md is missing"
    assert files == [REPO_ROOT / "README.md", *docs]


def test_readme_has_no_typed_output():
    """--check with no --file covers README.md and every docs/*.md."""
    proc = _run("--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


README_MAX_LINES = 250


def test_readme_is_one_page():
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the depth to docs/")


LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(text: str) -> list[str]:
    """The lines of a markdown text outside fenced blocks."""
    lines = text.splitlines()
    inside = {j for start, end, _ in rx._fences(lines) for j in range(start, end + 1)}
    return [line for i, line in enumerate(lines) if i not in inside]


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in _prose(path.read_text(encoding="utf-8")) if re.match(r"#{1,6} ", line)}


def test_relative_links_point_at_existing_files():
    broken = []
    for doc in rx.default_files():
        for line in _prose(doc.read_text(encoding="utf-8")):
            for target in LINK.findall(line):
                if SCHEME.match(target):
                    continue  # http:, https:, mailto: ...
                file_part, _, anchor = target.partition("#")
                dest = (doc.parent / file_part).resolve() if file_part else doc
                where = f"{doc.relative_to(REPO_ROOT)}: ({target})"
                if not dest.is_relative_to(REPO_ROOT):
                    broken.append(f"{where} leaves the repository")
                elif not dest.exists():
                    broken.append(f"{where} names no file")
                elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                    broken.append(f"{where} names no heading of {dest.relative_to(REPO_ROOT)}")
    assert not broken, "\n".join(broken)


def test_bad_argument_exits_2():
    assert _run("--no-such-option").returncode == 2

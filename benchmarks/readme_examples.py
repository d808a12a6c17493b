"""Regenerate the example outputs of markdown files (README.md, docs/*.md), so that no output is typed by hand.

    python benchmarks/readme_examples.py [--file docs/x.md ...] [--only SUBSTRING] [--check]

``--file`` may repeat; without it the files are README.md and every ``docs/*.md`` (sorted), what ``make readme``
regenerates and ``--check`` checks.

An example is a marker line, directly followed by one fenced block with no language tag (or ``text``):

    <!-- example-output: python -m gnn.train --dataset cora --model gcn --seeds 3 --run-dir runs/r1 -->
    ```
    (generated output)
    ```

The marker is an HTML comment, invisible when the markdown is rendered, so the block shows each command itself:
the generated output is, for each `` && ``-joined part of the command, a line ``$ PART`` followed by that part's
output (stdout and stderr together). ``&&`` is split literally, so do not put `` && `` inside quotes.

Running: every example of a file runs in file order, in one fresh temporary working directory per file (later
examples may use files that earlier ones of the same file wrote, never another file's: each file is self-contained,
an example that needs an earlier output makes it first, joined with `` && ``), through ``bash -c`` with
``PYTHONPATH`` = the repository root, ``GNN_CACHE_DIR`` = its ``datasets/cache`` (datasets are not reprocessed),
``PATH`` led by this interpreter's folder (``python``, ``torchrun`` are the venv's), ``TERM=dumb``,
``PYTHONUNBUFFERED=1`` and no TTY (no progress bars). The files run one after the other, each written as soon as
its examples are done. A command that exits non-zero stops the script (exit code 1) and leaves its file (and the
files not reached yet) unchanged.
``--only SUBSTRING`` runs only the examples whose command contains SUBSTRING: use it for examples that stand
alone, since the ones they may depend on do not run.

Normalisation of the output: the temporary directory's path (and the repository root's) followed by ``/`` is
removed, so paths are relative and no path of this machine reaches the file; Python warning lines
(``file:line: SomethingWarning: ...``) are dropped with their following indented source line; trailing whitespace
is stripped from every line, and leading / trailing blank lines from the whole output.

``--check`` runs nothing: it lists every plain (untagged or ``text``) fenced block without a marker, in every file,
and exits 1 if there is one (or a marker without its block). Code blocks (```bash, ```python, ...) are things to
type and need no marker.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- example-output: (?P<command>.+?) -->\s*$")
FENCE = re.compile(r"^\s*```(?P<tag>[^`\s]*)\s*$")
PLAIN_TAGS = ("", "text")
WARNING = re.compile(r":\d+: \w*Warning: ")


@dataclass(frozen=True)
class Example:
    """One marked example: ``line`` is the marker's 1-based line; ``lines[start:end]`` is the output block's body."""

    line: int
    command: str
    start: int
    end: int


def _fences(lines: list[str]) -> list[tuple[int, int, str]]:
    """(opening index, closing index, tag) of every fenced block, 0-based."""
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            close = next((j for j in range(i + 1, len(lines)) if (c := FENCE.match(lines[j])) and not c["tag"]), None)
            if close is None:
                raise ValueError(f"line {i + 1}: fenced block is never closed")
            blocks.append((i, close, m["tag"]))
            i = close
        i += 1
    return blocks


def find_examples(text: str) -> list[Example]:
    """The marked examples of a markdown text, in file order; a marker not followed by a plain block is an error."""
    lines = text.splitlines()
    fences = _fences(lines)
    inside = {j for start, end, _ in fences for j in range(start, end + 1)}
    opening = {start: (end, tag) for start, end, tag in fences}
    examples = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m or i in inside:
            continue
        end, tag = opening.get(i + 1, (None, None))
        if end is None or tag not in PLAIN_TAGS:
            raise ValueError(f"line {i + 1}: example-output marker is not directly followed by a plain fenced block")
        examples.append(Example(line=i + 1, command=m["command"].strip(), start=i + 2, end=end))
    return examples


def unmarked_blocks(text: str) -> list[int]:
    """1-based opening lines of the plain fenced blocks that have no marker directly above them."""
    lines = text.splitlines()
    return [start + 1 for start, _, tag in _fences(lines)
            if tag in PLAIN_TAGS and not (start > 0 and MARKER.match(lines[start - 1]))]


def replace_outputs(text: str, outputs: dict[Example, str]) -> str:
    """``text`` with the body of each given example's block replaced by its output; all else byte-identical."""
    lines = text.splitlines(keepends=True)
    for ex in sorted(outputs, key=lambda e: e.start, reverse=True):
        body = [line + "\n" for line in outputs[ex].splitlines()]
        lines[ex.start:ex.end] = body
    return "".join(lines)


def normalise(output: str, paths: list[str]) -> str:
    """Machine paths made relative, warning lines dropped, trailing whitespace and outer blank lines stripped."""
    for path in sorted(set(paths), key=len, reverse=True):
        output = output.replace(path + "/", "").replace(path, ".")
    kept, skip_source = [], False
    for line in output.splitlines():
        if skip_source and line[:1].isspace():
            skip_source = False
            continue
        skip_source = bool(WARNING.search(line))
        if not skip_source:
            kept.append(line.rstrip())
    return "\n".join(kept).strip("\n")


def shell_script(command: str) -> str:
    """The bash script of a command: each ``&&`` part echoed as ``$ PART``, then run; the first failure stops."""
    parts = [p.strip() for p in re.split(r"\s&&\s", command)]
    return " && ".join(f"printf '%s\\n' {shlex.quote('$ ' + p)} && {p}" for p in parts)


def run_example(ex: Example, workdir: Path) -> tuple[int, str]:
    """Run one example in ``workdir``; (exit code, raw combined output)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), GNN_CACHE_DIR=str(REPO_ROOT / "datasets" / "cache"),
               TERM="dumb", PYTHONUNBUFFERED="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    proc = subprocess.run(["bash", "-c", shell_script(ex.command)], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def default_files() -> list[Path]:
    """README.md and every docs/*.md of the repository, sorted: the files ``make readme`` regenerates."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def regenerate(path: Path, only: str | None) -> int:
    """Run the chosen examples of one file in a fresh temporary directory and write their outputs; 0 or 1."""
    text = path.read_text(encoding="utf-8")
    chosen = [ex for ex in find_examples(text) if only is None or only in ex.command]
    if not chosen:
        return 0
    outputs: dict[Example, str] = {}
    with tempfile.TemporaryDirectory(prefix="readme_examples_") as tmp:
        paths = [tmp, str(Path(tmp).resolve()), str(REPO_ROOT)]
        for n, ex in enumerate(chosen, 1):
            print(f"[{n}/{len(chosen)}] {path}:{ex.line}: {ex.command}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            code, raw = run_example(ex, Path(tmp))
            if code != 0:
                print("\n".join(normalise(raw, paths).splitlines()[-20:]), file=sys.stderr)
                print(f"error: example at {path}:{ex.line} ({ex.command}) exited with code {code}; "
                      f"{path} left unchanged", file=sys.stderr)
                return 1
            outputs[ex] = normalise(raw, paths)
            print(f"    done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    path.write_text(replace_outputs(text, outputs), encoding="utf-8")
    print(f"{path}: {len(outputs)} example output(s) regenerated", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", type=Path, action="append",
                   help="markdown file; repeat for several (default: README.md and docs/*.md)")
    p.add_argument("--only", metavar="SUBSTRING", help="run only the examples whose command contains SUBSTRING")
    p.add_argument("--check", action="store_true", help="run nothing; fail if a plain output block has no marker")
    args = p.parse_args(argv)
    files = args.file or default_files()
    for path in files:
        if not path.is_file():
            p.error(f"--file {path}: no such file")
    # Parse every file before running anything, so that a malformed one fails at once.
    failed = False
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            find_examples(text)
            unmarked = unmarked_blocks(text)
        except ValueError as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            failed = True
            continue
        if args.check:
            for line in unmarked:
                print(f"{path}:{line}: plain fenced block without an example-output marker above it")
            failed = failed or bool(unmarked)
    if args.check or failed:
        return 1 if failed else 0
    for path in files:
        if regenerate(path, args.only):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

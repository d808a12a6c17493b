"""Generate RESULTS.md from benchmarks/results/*.json (never typed by hand).

    python -m benchmarks.make_results        # or: python benchmarks/make_results.py

Each known result file's section is rendered by the benchmark module that writes the file (STAGES names the
function, imported only when its file is rendered); any other JSON file in results/ is listed with its top-level
summary, so a new benchmark is visible in RESULTS.md before it has a dedicated renderer. Sections follow the pipeline
(STAGES: one `##` per stage, one `###` per result file, a contents list on top), and no line is longer than
LINE_LIMIT: long paragraphs wrap at sentence ends, long command lists and long table cells move into collapsed
lists under their paragraph or table.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from benchmarks._common import RESULTS

OUT = Path(__file__).resolve().parents[1] / "RESULTS.md"


def render_other(name: str, res: dict) -> list[str]:
    def shorten(v):  # a long string would make a line over LINE_LIMIT in the code block, which cannot be wrapped
        if isinstance(v, str) and len(v) > OTHER_STRING_CHARS:
            return v[:OTHER_STRING_CHARS] + "... (truncated; see the file)"
        if isinstance(v, dict):
            return {k: shorten(x) for k, x in v.items()}
        return [shorten(x) for x in v] if isinstance(v, list) else v

    text = json.dumps(shorten(res), indent=1, sort_keys=True)
    if len(text) > 4000:
        text = text[:4000] + "\n... (truncated; see the file)"
    return [f"## {name}", "", f"File: `benchmarks/results/{name}.json` (no dedicated table yet).", "",
            "```json", text, "```", ""]


# RESULTS.md follows the pipeline: each stage a `##` section, each result file a `###` under it, in this order.
# Per result file, the function of the benchmarks package that renders its section ("module.function": most are the
# `render` of the script that writes the file). A result file named in no stage goes to OTHER_STAGE, at the end.
STAGES = (
    ("Data and FP32 training", (("fp32_accuracy", "fp32_accuracy.render"), ("train_speed", "train_speed.render"),
                                ("user_graphs", "user_graphs.render"))),
    ("Quantization", (("quant_table", "quant_table.render"), ("quant_defaults", "quant_defaults.render"),
                      ("quant_speed", "quant_speed.render"), ("quant_speed_grid", "quant_speed.render_grid"),
                      ("quant_speed_sparse_input", "quant_speed.render_sparse_input"))),
    ("Export and integer path", (("integer_accuracy", "integer_accuracy.render"),
                                 ("export_fixed_point", "export_fixed_point.render"),
                                 ("quant_storage", "quant_storage.render"), ("pack_speed", "pack_speed.render"),
                                 ("graph_level_chain", "graph_level_chain.render"))),
    ("Cycle model (hw)", (("hw_ablation", "hw_ablation.render"), ("hw_sim", "hw_sim.render"),
                          ("a2q_hw_cost", "a2q_hw_cost.render"), ("hw_cost_fidelity", "hw_cost_fidelity.render"),
                          ("hw_aware", "hw_aware.render"), ("hw_explore", "hw_explore.render"))),
    ("RTL", (("rtl_cells", "rtl_sim.render_rtl_cells"), ("rtl_sim", "rtl_sim.render"),
             ("rtl_layer", "rtl_layer.render"))),
    ("Distributed training", (("dist_accuracy", "dist_accuracy.render"),
                              ("dist_quant_accuracy", "dist_quant_accuracy.render"),
                              ("dist_bytes", "dist_bytes.render"), ("halo_codec_speed", "halo_codec_speed.render"),
                              ("dist_time", "dist_time.render"),
                              ("dist_staleness", "dist_staleness.render"),
                              ("fault_injection", "fault_injection.render"),
                              ("teardown_race", "teardown_race.render"))),
    ("Graph transformer", (("gt_accuracy", "gt_accuracy.render"), ("gt_screen", "gt_screen.render"),
                           ("gt_attention", "gt_attention.render"), ("gt_attention_cuda", "gt_attention.render_cuda"),
                           ("gt_max_nodes", "gt_max_nodes.render"), ("gt_comm_bytes", "gt_comm_bytes.render"),
                           ("gt_halo_codec", "gt_halo_codec.render"))),
)
RENDERERS = {stem: target for _, files in STAGES for stem, target in files}
OTHER_STAGE = "Other results"
LINE_LIMIT = 1000  # no line of RESULTS.md is longer
OTHER_STRING_CHARS = 900  # render_other shortens longer strings


def _outside_code(text: str, i: int) -> bool:
    return text.count("`", 0, i) % 2 == 0


def _safe_start(text: str) -> bool:
    """Whether a continuation line may start with text without starting a Markdown block (list item, heading,
    quote, table row, HTML block, setext underline) instead of continuing the paragraph."""
    return bool(text) and text[0] not in "-+*#>|=<" and not re.match(r"\d+[.)]", text)


def _wrap(line: str, limit: int = LINE_LIMIT) -> list[str]:
    """A paragraph or list-item line over ``limit`` as several lines of the same paragraph (each line break stands
    for a space): one sentence a line; a sentence still too long breaks after its semicolons, then its commas, then
    at spaces outside code spans, then at spaces inside them (a code span's line break reads as a space too)."""
    if len(line) <= limit:
        return [line]
    indent = "  " if re.match(r"[-*] ", line) else ""  # a list item's continuation lines stay in the item
    width = limit - len(indent)
    marker, line = line[:len(indent)], line[len(indent):]  # the item's marker stays on its first line

    def split(text: str, pattern: str, in_code: bool = False) -> list[str]:
        parts, last = [], 0
        for m in re.finditer(pattern, text):
            rest = text[m.end():]
            if (in_code or _outside_code(text, m.start())) and _safe_start(rest):
                parts.append(text[last:m.start()])
                last = m.end()
        return parts + [text[last:]]

    def pack(parts: list[str], sep: str = " ") -> list[str]:  # greedily join pieces up to the width
        out: list[str] = []
        for part in parts:
            if out and len(out[-1]) + len(sep) + len(part) <= width:
                out[-1] += sep + part
            else:
                out.append(part)
        return out

    def fit(text: str, level: int) -> list[str]:
        if len(text) <= width or level == 5:
            return [text]
        pattern, in_code = ((r"(?<=[.!?]) (?=\S)", False), (r"(?<=;) ", False), (r"(?<=,) ", False),
                            (r" ", False), (r" ", True))[level]
        parts = split(text, pattern, in_code)
        if level == 0:  # one sentence a line
            return [piece for part in parts for piece in fit(part, 1)]
        return [piece for part in pack(parts) for piece in fit(part, level + 1)]

    pieces = fit(line, 0)
    return [marker + pieces[0]] + [indent + p for p in pieces[1:]]


def _cells(row: str) -> list[str]:
    return row.strip()[1:-1].strip().split(" | ") if row.strip().endswith("|") else [row]


def _fit_table(table: list[str], first_note: int) -> tuple[list[str], list[str]]:
    """A table whose rows stay within LINE_LIMIT: the longest cells of a row over it move out of the table, the cell
    keeping a summary (first and last item, the item count, the note's number); returns the rows and the notes."""
    head = _cells(table[0])
    rows, notes = [], []
    for row in table:
        cells = _cells(row)
        while len(row) > LINE_LIMIT and len(cells) == len(head) and len(cells) > 1:
            i = max(range(1, len(cells)), key=lambda j: (len(cells[j]), -j))  # the first column names the row
            if len(cells[i]) < 40:
                break
            text = cells[i]
            items = text.split("; ") if "; " in text else text.split(", ") if ", " in text else text.split(" ")
            number = first_note + len(notes)
            notes.append(f"- note {number} ({' / '.join(cells[:i][:2])}, column \"{head[i]}\"): {text}")
            cells[i] = (f"{items[0]} ... {items[-1]} ({len(items)} items, note {number})" if len(items) > 2
                        else f"see note {number}")
            row = "| " + " | ".join(cells) + " |"
        rows.append(row)
    return rows, [w for n in notes for w in _wrap(n)]


def _fit_lines(lines: list[str]) -> list[str]:
    """A renderer's lines with none over LINE_LIMIT: long paragraphs and list items wrapped (_wrap), long table
    cells moved into a collapsed block under their table (_fit_table); code blocks and HTML are left as they are."""
    out: list[str] = []
    notes = 1
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):  # a fenced block as it is
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines) - 1)
            out += lines[i:end + 1]
            i = end + 1
        elif line.startswith("|"):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            rows, moved = _fit_table(lines[i:end], notes)
            out += rows
            if moved:
                notes += sum(m.startswith("- note ") for m in moved)
                out += ["", "<details><summary>Long table cells (moved out of the table above)</summary>", "",
                        *moved, "", "</details>"]
                if end < len(lines) and lines[end]:
                    out.append("")
            i = end
        else:
            out += [line] if line.startswith(("<", "#")) else _wrap(line)
            i += 1
    return out


def _anchor(title: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def renderer(stem: str) -> Callable[[dict], list[str]]:
    """The function that renders result file ``stem``'s section (its module imported now), else render_other."""
    if stem not in RENDERERS:
        return lambda res: render_other(stem, res)
    module, _, function = RENDERERS[stem].rpartition(".")
    return getattr(importlib.import_module(f"benchmarks.{module}"), function)


def _read(path: Path) -> list[str]:
    """A result file's section; a file that is not valid JSON (still being written) says so."""
    try:
        res = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return [f"## {path.stem}", "", f"File: `benchmarks/results/{path.name}` could not be read ({type(e).__name__})."
                " Rerun `python benchmarks/make_results.py` once its benchmark has written it.", ""]
    return renderer(path.stem)(res)


def render(results: Path = RESULTS) -> str:
    """RESULTS.md's text from the result files under ``results``."""
    files = {p.stem: p for p in sorted(results.glob("*.json"))}
    stages = [(stage, tuple(stem for stem, _ in entries)) for stage, entries in STAGES]
    stages.append((OTHER_STAGE, tuple(s for s in files if s not in RENDERERS)))
    seen: dict[str, int] = {}
    for title in ("Results", "Contents"):
        _anchor(title, seen)
    body, contents = [], []
    for stage, stems in stages:
        sections = [lines for lines in (_read(files[s]) for s in stems if s in files) if lines]
        if not sections:
            continue
        body += [f"## {stage}", ""]
        contents.append(f"- [{stage}](#{_anchor(stage, seen)})")
        for lines in sections:
            lines = ["#" + line if line.startswith("## ") else line for line in _fit_lines(lines)]
            for line in lines:
                if line.startswith("### "):
                    contents.append(f"  - [{line[4:]}](#{_anchor(line[4:], seen)})")
            body += lines
    head = ["# Results", "", "Generated by `python benchmarks/make_results.py` from `benchmarks/results/*.json`; "
            "every number below was measured by a script in `benchmarks/`. Do not edit by hand. Sections follow the "
            "pipeline: " + " -> ".join(stage for stage, _ in stages[:-1]) + "; result files of no stage come last.",
            "", "## Contents", "", *contents, ""]
    return "\n".join(head + body)


def main(results: Path = RESULTS, out: Path = OUT) -> None:
    out.write_text(render(results))
    print(f"written {out}")


if __name__ == "__main__":
    main()

"""The project's benchmarks: each module measures one thing, writes its JSON to ``benchmarks/results/``, and renders
that file's RESULTS.md section (its ``render*`` functions, listed per results file in ``make_results.STAGES``).

Run a benchmark as ``python -m benchmarks.<name>`` (or ``python benchmarks/<name>.py``) and regenerate RESULTS.md
with ``python -m benchmarks.make_results``. No package of the project imports ``benchmarks``.
"""

"""Design-space exploration of the accelerator model: spaces, a point cache, executors, Pareto fronts, plots.

``python -m hw.explore`` is the entry point (``hw/explore/__main__.py``); ``docs/explore.md`` describes it.
"""

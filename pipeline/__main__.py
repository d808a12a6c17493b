"""``python -m pipeline``: the main job (see :mod:`pipeline`)."""

from pipeline.cli import main

if __name__ == "__main__":
    main()

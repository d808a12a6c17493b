"""Reading a TOML file with one-line errors (the dataset registry; ``hw.config``'s accelerator files). Standard
library only, so that the numpy-only accelerator model can use it."""

from __future__ import annotations

import tomllib
from pathlib import Path


def read_toml(path: str | Path, error: type[Exception], what: str, hint: str = "") -> dict:
    """The parsed TOML file. An unreadable file raises ``error("cannot read <what> <path>: <reason>")``, malformed
    TOML ``error("<path>: malformed TOML: <message with the line and column><hint>")``."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: malformed TOML: {e}{hint}") from e

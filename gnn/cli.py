"""What every command-line entry point shares: a bad command line ends with one line and exit status 2."""

from __future__ import annotations

import sys


class UsageError(SystemExit):
    """Raised for bad input: prints ``error: <message>`` on stderr and exits with status 2 (argparse's convention),
    with no traceback. ``str(exc)`` is the message, so tests can match it."""

    def __init__(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message

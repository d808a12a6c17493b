"""Puts this folder on sys.path, so spawned ranks (which inherit sys.path) can import `off_boundary`."""

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

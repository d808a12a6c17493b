"""Puts this folder on sys.path for the shared test helpers (`arch_cases`, `export_metrics`, `toy_arch`)."""

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

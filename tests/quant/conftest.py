"""Puts this folder on sys.path for the shared check of export metrics (`export_metrics`)."""

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

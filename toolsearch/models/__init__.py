"""The models shipped inside toolsearch, one folder each (package data, read from disk)."""

from pathlib import Path

__all__ = ["MODELS_DIR"]

#: The folder holding the shipped models' folders.
MODELS_DIR = Path(__file__).resolve().parent

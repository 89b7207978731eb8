"""Issue 34's final offline answer, frozen as a benchmark baseline (see extractive.py)."""

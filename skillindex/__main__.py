"""Runs the command line as `python -m skillindex`."""

from __future__ import annotations

from skillindex.cli import main

main()

"""Entry point of the Beam subprocess (run by Beam's interpreter, never with panes): scenarios as JSON
lines on stdin, results as JSON lines on stdout. beam_side's DoFn must live in an imported module,
not in __main__ (Beam pickles __main__'s by value, and the panes it records would be lost)."""

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
importlib.import_module("beam_side").main()

import os
import sys

# The tests' shared helpers (force_reference.py) import as plain modules.
sys.path.insert(0, os.path.dirname(__file__))

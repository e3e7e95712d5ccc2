"""scripts/torch_needed.py: what a script that needs torch says where torch is missing: one line,
not a traceback. The project never depends on torch; such a script imports it as

    try:
        import torch
    except ImportError:
        torch = None

reads its arguments (its --help and its arguments' errors need no torch), then calls
exit_without(torch).
"""
import os
import sys


def exit_without(torch):
    """Ends the program with the line saying it needs torch when torch (the module) is None."""
    if torch is None:
        sys.exit(f"error: {os.path.basename(sys.argv[0])} needs torch, which {sys.executable} lacks: "
                 "the project never depends on torch, so run it where torch is")

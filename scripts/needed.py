"""scripts/needed.py: what a script says where a package it needs is missing: one line naming the
package and how to get it, not a traceback. numpy is the one the project uses (`make venv`
installs it into .venv, and nothing else); torch and transformers it never depends on, so a
script that needs them runs where they are. A script, and a module it imports, imports such a
package as

    try:
        import torch
    except ImportError:
        torch = None

reads its arguments (its --help and its arguments' errors need none of them), then calls
exit_without(torch=torch), naming each package it needs.
"""
import os
import sys

HOW_TO_GET = {
    "numpy": "`make venv` installs it into .venv, then run the script with .venv/bin/python3",
    "torch": "the project never depends on it (`make venv` installs numpy alone): pip install torch, or run the "
             "script where torch is",
    "transformers": "the project never depends on it (`make venv` installs numpy alone): pip install transformers, "
                    "or run the script where transformers is",
}


def exit_without(**packages):
    """Ends the program with the line saying what it needs where a package (name=module) is None,
    the first such in the order given."""
    for name, module in packages.items():
        if module is None:
            sys.exit(f"error: {os.path.basename(sys.argv[0])} needs {name}, which {sys.executable} lacks: "
                     f"{HOW_TO_GET[name]}")

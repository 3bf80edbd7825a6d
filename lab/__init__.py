"""The retrieval experiments behind the default's choices (not shipped with toolsearch).

Each module is a script run from the repository root, e.g. ``python -m lab.ablation``; its
results are in ``lab/results/`` and rendered into docs/results.md, and the decisions they led
to are written up in lab/retrieval.md. ``pip install -e '.[lab]'`` installs what they need.
"""

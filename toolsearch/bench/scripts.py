"""The benchmark scripts of ``benchmarks/`` (plain files, not a package) imported as modules.

The table regenerator renders each script's results with the script's own ``markdown``
function, and the tests call the scripts' helpers; both import a script once, under one name,
through :func:`load_script`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_script"]


def load_script(path: Path) -> ModuleType:
    """The script at ``path`` as module ``benchmarks_<stem>``, imported on first use.

    Its folder joins ``sys.path`` (the scripts import one another by name), and the module is
    registered before it runs, because dataclasses look their module up while being built.
    """
    name = f"benchmarks_{path.stem}"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the benchmark script {path}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module

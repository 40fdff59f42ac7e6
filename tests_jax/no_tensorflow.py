"""A Python where TensorFlow cannot be imported, for the tests that show
keras_slim runs on Keras's JAX backend without it.

`install()` puts a `sys.meta_path` finder first that makes importing
`tensorflow` or any `tensorflow.*` module raise `ModuleNotFoundError`, and
makes `importlib.util.find_spec` answer `None` for them, as in an
environment where TensorFlow is not installed; `prelude()` is the
Python source that does the same first thing in a fresh process.

Example:
```python
code = no_tensorflow.prelude() + "import keras_slim\\n"
subprocess.run([sys.executable, "-c", code], env=env, check=True)
```
"""

import importlib.util
import pathlib
import sys

__all__ = ["BlockTensorFlow", "blocked", "install", "prelude"]

#: The repository root, where `tests_jax` is importable from.
ROOT = pathlib.Path(__file__).resolve().parent.parent


def blocked(name):
    """Whether the finder refuses module `name`: `tensorflow` and its
    submodules.

    Args:
        name: A module's full name.

    Returns:
        A bool.
    """
    return name == "tensorflow" or name.startswith("tensorflow.")


class BlockTensorFlow:
    """A `sys.meta_path` finder that refuses TensorFlow's modules."""

    def find_spec(self, name, path=None, target=None):
        """Raises for TensorFlow's modules; `None` (not mine) for others.

        Args:
            name: The module's full name.
            path: The parent package's `__path__`, or `None`.
            target: The module being reloaded, or `None`.

        Returns:
            `None`.

        Raises:
            ModuleNotFoundError: for `tensorflow` and `tensorflow.*`.
        """
        del path, target
        if blocked(name):
            raise ModuleNotFoundError(
                f"No module named {name!r} (blocked by "
                "tests_jax/no_tensorflow.py)",
                name=name,
            )
        return None


def install():
    """Puts a `BlockTensorFlow` first on `sys.meta_path`, once.

    Raises:
        RuntimeError: if TensorFlow is imported already (too late to
            block it).
    """
    loaded = sorted(name for name in sys.modules if blocked(name))
    if loaded:
        raise RuntimeError(f"TensorFlow is imported already: {loaded[:3]}")
    if not any(isinstance(f, BlockTensorFlow) for f in sys.meta_path):
        sys.meta_path.insert(0, BlockTensorFlow())
        importlib.util.find_spec = _find_spec_without(importlib.util.find_spec)


def _find_spec_without(find_spec):
    """`importlib.util.find_spec` answering `None` for TensorFlow's
    modules, as where TensorFlow is not installed (libraries ask it before
    they import: etils' `epath`, which orbax uses, does)."""

    def without(name, package=None):
        if blocked(name):
            return None
        return find_spec(name, package)

    return without


def prelude():
    """Python source that blocks TensorFlow, to run first in a fresh
    process (`python -c prelude() + code`).

    Returns:
        The source, ending with a newline.
    """
    return (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests_jax import no_tensorflow\n"
        "no_tensorflow.install()\n"
    )

"""Every Python process of the test suite starts here (tests/conftest.py
and tests_jax/conftest.py put this folder first on `PYTHONPATH`): Keras
imports scikit-learn (for its scikit-learn wrappers) and matplotlib (for
its plots) whenever they are installed, about 1.5 s of CPU in each of the
suite's hundreds of processes, on either backend. keras_slim uses
neither Keras feature, so here Keras's own imports of them fail, as when
they are not installed (Keras guards both); any other module, keras_slim's
digits loader or a test, imports them as usual.
"""

import gc
import sys

_SKIPPED = frozenset({"sklearn", "matplotlib"})
_FIRST_IMPORTS = frozenset({"tensorflow", "keras"})
_IMPORTERS = ("keras.", "tf_keras.")


class _NotForKeras:
    """A `sys.meta_path` finder: `sklearn` and `matplotlib` are not
    found when a module of Keras (or tf_keras) imports them."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] not in _SKIPPED:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(
            "<frozen importlib"
        ):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__", "") if frame else ""
        if importer.startswith(_IMPORTERS):
            raise ModuleNotFoundError(
                f"{name} is not imported for {importer} in the tests",
                name=name,
            )
        return None


class _CollectAfterImports:
    """A `sys.meta_path` finder: the process starts with Python's cyclic
    garbage collector paused, and resumes it once the first of
    `tensorflow` and `keras` is imported (Keras imports its backend, and
    on JAX no TensorFlow), with what the import made frozen (`gc.freeze`:
    never scanned again, as nothing of it is garbage). Importing
    TensorFlow and Keras makes some 365,000 objects, over which the
    collector otherwise runs its full passes again and again: about 1 s
    of CPU in each of the suite's TensorFlow processes, and again at every
    full pass after."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in _FIRST_IMPORTS:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not cls]
        import importlib.util

        spec = importlib.util.find_spec(name)
        exec_module = spec.loader.exec_module

        def exec_then_collect(module):
            try:
                exec_module(module)
            finally:
                gc.freeze()
                gc.enable()

        spec.loader.exec_module = exec_then_collect
        return spec


def install():
    if not any(type(f).__name__ == "_NotForKeras" for f in sys.meta_path):
        sys.meta_path.insert(0, _NotForKeras())


def _pause_collection_until_imported():
    if _FIRST_IMPORTS.isdisjoint(sys.modules) and gc.isenabled():
        gc.disable()
        sys.meta_path.insert(0, _CollectAfterImports)


install()
_pause_collection_until_imported()

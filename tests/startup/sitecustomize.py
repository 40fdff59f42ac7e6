"""Every Python process of the test suite starts here (conftest.py puts
this folder first on `PYTHONPATH`): Keras imports scikit-learn (for its
scikit-learn wrappers) and matplotlib (for its plots) whenever they are
installed, about 1.5 s of CPU in each of the suite's hundreds of
TensorFlow processes. keras_slim uses neither Keras feature, so here
Keras's own imports of them fail, as when they are not installed (Keras
guards both); any other module, keras_slim's digits loader or a test,
imports them as usual.
"""

import sys

_SKIPPED = frozenset({"sklearn", "matplotlib"})
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


def install():
    if not any(type(f).__name__ == "_NotForKeras" for f in sys.meta_path):
        sys.meta_path.insert(0, _NotForKeras())


install()

"""Which Keras backend runs, and TensorFlow imported only where it is used."""

import importlib
import sys

import keras

__all__ = [
    "LazyModule",
    "backend",
    "is_tensorflow",
    "lazy_attributes",
    "require_tensorflow",
    "tensorflow",
]


def backend():
    """The name of Keras's backend in this process.

    Returns:
        `keras.backend.backend()`: `"tensorflow"`, `"jax"`, ...
    """
    return keras.backend.backend()


def is_tensorflow():
    """Whether Keras runs on its TensorFlow backend in this process.

    Returns:
        A bool.
    """
    return backend() == "tensorflow"


def require_tensorflow(feature, instead, *, why=None):
    """Refuses a feature of Keras's TensorFlow backend on another backend.

    Args:
        feature: What is refused, as users call it
            (`"keras_slim.optimizers.RMSProp"`).
        instead: What to use instead on the backend in use
            (`"keras.optimizers.RMSprop"`).
        why: Why it needs TensorFlow (`"TF1's kernels"`), or `None`.
            Defaults to `None`.

    Raises:
        RuntimeError: when Keras's backend is not TensorFlow: the message
            names `feature`, the backend and `instead`.

    Example:
    ```python
    require_tensorflow(
        "keras_slim.optimizers.RMSProp",
        "keras.optimizers.RMSprop",
        why="TF1's kernels",
    )
    # On KERAS_BACKEND=jax: RuntimeError: keras_slim.optimizers.RMSProp
    # runs on Keras's TensorFlow backend (TF1's kernels); this process runs
    # Keras on 'jax' (KERAS_BACKEND=jax). Use keras.optimizers.RMSprop
    # instead.
    ```
    """
    name = backend()
    if name == "tensorflow":
        return
    reason = f" ({why})" if why else ""
    raise RuntimeError(
        f"{feature} runs on Keras's TensorFlow backend{reason}; this "
        f"process runs Keras on {name!r} (KERAS_BACKEND={name}). Use "
        f"{instead} instead."
    )


class LazyModule:
    """A module imported when one of its attributes is first read.

    Reading an attribute imports the module (an `ImportError` then says
    it is missing) and returns the module's own attribute; nothing can be
    set on the stand-in.

    Args:
        name: The module's name (`"tensorflow"`).

    Example:
    ```python
    tf = LazyModule("tensorflow")  # nothing imported yet
    tf.constant(1.0)  # imports tensorflow
    ```
    """

    __slots__ = ("_name", "_module")

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attribute):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self):
        state = "imported" if self._module is not None else "not imported"
        return f"<LazyModule {self._name!r} ({state})>"


def _tensorflow():
    """TensorFlow itself on Keras's TensorFlow backend (which has imported
    it already), else a `LazyModule` of it."""
    if is_tensorflow():
        return importlib.import_module("tensorflow")
    return LazyModule("tensorflow")


#: TensorFlow, for `from keras_slim._backend import tensorflow as tf`: the
#: module on Keras's TensorFlow backend, a `LazyModule` on the others (a
#: module that only uses `tf` inside its functions imports no TensorFlow).
tensorflow = _tensorflow()


def lazy_attributes(module_name, makers):
    """A module's `__getattr__` (PEP 562) for names whose values need
    TensorFlow: each is made on first access, then kept in the module.

    Code inside the module calls the maker (give it `functools.cache`,
    so that a class it defines is made once): a module's own global names
    do not go through its `__getattr__`.

    Args:
        module_name: The module's `__name__`.
        makers: A dict of attribute name to a function of no argument
            that returns its value.

    Returns:
        The `__getattr__` function to assign in the module.

    Example:
    ```python
    __getattr__ = _backend.lazy_attributes(
        __name__, {"DataState": _data_state}
    )
    ```
    """

    def __getattr__(name):
        maker = makers.get(name)
        if maker is None:
            raise AttributeError(
                f"module {module_name!r} has no attribute {name!r}"
            )
        value = maker()
        setattr(sys.modules[module_name], name, value)
        return value

    return __getattr__

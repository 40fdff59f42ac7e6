"""What a model's `fit` prepared from its dataset, for its next `fit`.
docs/design.md ("A fit call's fixed cost, and the input's threads") says
how and why.
"""


class InputCache:
    """The last dataset a model's `fit` prepared, kept for the next `fit`.

    Preparing a dataset for a fit (the threading options `input_options`
    chooses, the blocks, the stateful-op check, which serializes the
    pipeline) costs more than a millisecond: as much as a small model's
    step. The model's train function keeps one `InputCache`, so a loop of
    `fit` calls on the same `tf.data.Dataset` pays for it once; it also
    keeps the next pass's iterator a `fit` left unread, for the next `fit`
    (`HostFeed.end`). It holds that dataset until a `fit` on another one,
    or a new compile.

    Example:
    ```python
    cache = InputCache()
    host = cache.get(dataset, "host", lambda: input_options.for_fit(dataset))
    ```
    """

    def __init__(self):
        self._dataset = None
        self._values = {}

    def get(self, dataset, key, make):
        """`make()`, made once per `(dataset, key)`.

        Args:
            dataset: The `tf.data.Dataset` given to `fit` (by identity).
            key: What of it is asked for (hashable).
            make: A function of no argument making the value.

        Returns:
            The value.
        """
        if dataset is not self._dataset:
            self._dataset, self._values = dataset, {}
        if key not in self._values:
            self._values[key] = make()
        return self._values[key]

    def swap(self, dataset, key, value):
        """Stores `value` for `(dataset, key)`; returns what was stored
        (or `None`).

        Args:
            dataset: The `tf.data.Dataset` given to `fit` (by identity).
            key: What of it is stored (hashable).
            value: The new value, or `None`.

        Returns:
            The previous value, or `None`.
        """
        if dataset is not self._dataset:
            self._dataset, self._values = dataset, {}
        previous = self._values.pop(key, None)
        if value is not None:
            self._values[key] = value
        return previous

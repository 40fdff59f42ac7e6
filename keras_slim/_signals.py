"""SIGTERM and SIGINT during training: finish the call, save, stop."""

import contextlib
import logging
import signal
import threading

logger = logging.getLogger("keras_slim")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """The stop signals of one run.

    Example:
    ```python
    signals = StopSignals()
    signals.catch()
    ...  # at the end of each call of the train function:
    if signals.received is not None:
        with signals.saving():
            manager.save()
    signals.release()
    ```
    """

    def __init__(self):
        #: The name of the first signal received (`"SIGTERM"`), or `None`.
        self.received = None
        self._saving = False
        self._abort_after_save = False
        self._previous = None

    def catch(self):
        """Replaces the SIGTERM and SIGINT handlers (idempotent).

        Only the main thread can catch signals; elsewhere this does
        nothing.
        """
        if self._previous is not None:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous = {s: signal.getsignal(s) for s in _SIGNALS}
        for number in _SIGNALS:
            signal.signal(number, self._on_signal)

    def release(self):
        """Puts back the handlers `catch` replaced."""
        previous, self._previous = self._previous, None
        for number, handler in (previous or {}).items():
            signal.signal(number, handler)

    @contextlib.contextmanager
    def saving(self):
        """While a checkpoint is written: a second SIGINT waits for it."""
        self._saving = True
        try:
            yield
        finally:
            self._saving = False
        if self._abort_after_save:
            self._abort_after_save = False
            self.release()
            raise KeyboardInterrupt

    def _on_signal(self, number, frame):
        del frame
        name = signal.Signals(number).name
        if self.received is None:
            self.received = name
            logger.warning(
                "%s received: finishing the current call, then saving a "
                "checkpoint and stopping (a second SIGINT aborts).",
                name,
            )
            return
        if number == signal.SIGINT:
            if self._saving:
                self._abort_after_save = True
                return
            self.release()
            raise KeyboardInterrupt

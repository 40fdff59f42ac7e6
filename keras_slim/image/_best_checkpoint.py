"""`BestCheckpoint`: the best checkpoint so far, kept in its own directory."""

import datetime
import json
import logging
import math
import os
import re
import shutil

_LOG = logging.getLogger("keras_slim")

#: The metrics `evaluate` returns, and whether higher is better.
METRICS = {"accuracy": True, "recall_5": True, "loss": False}
#: The directory of the best checkpoint, under the eval or train dir.
BEST = "best"
#: What the best directory says about its checkpoint.
INFO = "best.json"
_OLD = BEST + ".old"
_TEMP = re.compile(re.escape(BEST) + r"\.tmp-\d+")
# The files of a checkpoint prefix: TF2's and TF1's (with its graph).
_FILES = r"\.(index|meta|data-\d+-of-\d+)"


def check_metric(name, *, num_classes=None):
    """Refuses a metric `evaluate` does not compute.

    Args:
        name: A metric name (`--best_metric`).
        num_classes: The classes of the task; `recall_5` needs more than
            5. `None`: not checked.

    Raises:
        ValueError: naming the metric and the valid ones.
    """
    if name not in METRICS:
        raise ValueError(
            f"flag --best_metric: unknown metric {name!r}; valid: "
            f"{', '.join(METRICS)} (accuracy and recall_5 are higher-"
            "better, loss lower-better)"
        )
    if name == "recall_5" and num_classes is not None and num_classes <= 5:
        raise ValueError(
            f"flag --best_metric: recall_5 (top-5) needs more than 5 "
            f"classes; the dataset has {num_classes}. Valid: accuracy, loss"
        )


def checkpoint_is_a_best(path):
    """Whether checkpoint `path` (a directory or a prefix) is itself a
    kept best (its directory holds `best.json`)."""
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    return os.path.isfile(os.path.join(directory, INFO))


def _sync(path):
    """Flushes a file or a directory to the disk."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _checkpoint_files(prefix):
    directory, base = os.path.split(prefix)
    pattern = re.compile(re.escape(base) + _FILES)
    names = [n for n in os.listdir(directory) if pattern.fullmatch(n)]
    if not any(n.endswith(".index") for n in names):
        raise FileNotFoundError(f"No checkpoint at {prefix!r}")
    return [os.path.join(directory, n) for n in names]


class BestCheckpoint:
    """Keeps a copy of the best checkpoint by one metric in a directory.

    Ties keep the earlier checkpoint (only a strictly better value
    replaces it); a non-finite value is never kept. Made with `open`,
    which recovers from a crash in a swap and reads the best so far.

    Args:
        directory: Where `best/` goes (the eval or train directory).
        metric: A name of `METRICS`. Defaults to `"accuracy"`.

    Raises:
        ValueError: for an unknown metric.

    Example:
    ```python
    best = BestCheckpoint.open("/tmp/run/eval", metric="accuracy")
    best.consider(path, step=600, results=evaluate(model, data))
    ```
    """

    def __init__(self, directory, *, metric="accuracy"):
        check_metric(metric)
        self.parent = os.fspath(directory)
        self.directory = os.path.join(self.parent, BEST)
        self.metric = metric
        self.higher_is_better = METRICS[metric]
        #: `best.json`'s content, or `None` before a first best.
        self.info = None

    @classmethod
    def open(cls, directory, *, metric="accuracy"):
        """A `BestCheckpoint` with the best so far read from `directory`.

        Args:
            directory: Where `best/` goes.
            metric: A name of `METRICS`. Defaults to `"accuracy"`.

        Returns:
            The `BestCheckpoint`.

        Raises:
            ValueError: when the best there was kept by another metric
                (both named), or its `best.json` cannot be read.
        """
        best = cls(directory, metric=metric)
        best.recover()
        best.info = best._read()
        return best

    def recover(self):
        """Finishes or undoes a swap a crash interrupted: `best.old/`
        without `best/` becomes `best/` again; beside it, it is deleted;
        temporary copies are deleted."""
        old = os.path.join(self.parent, _OLD)
        if os.path.isdir(old):
            if os.path.isdir(self.directory):
                shutil.rmtree(old)
            else:
                os.replace(old, self.directory)
                _LOG.warning(
                    "Restored the previous best checkpoint %s (a swap was "
                    "interrupted).",
                    self.directory,
                )
        if os.path.isdir(self.parent):
            for name in os.listdir(self.parent):
                if _TEMP.fullmatch(name):
                    shutil.rmtree(os.path.join(self.parent, name))

    def _read(self):
        path = os.path.join(self.directory, INFO)
        if not os.path.isfile(path):
            return None
        try:
            with open(path) as file:
                info = json.load(file)
            stored = info["metric"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"The best checkpoint's {path!r} cannot be read ({error}); "
                f"move {self.directory!r} aside to start a new best."
            ) from None
        if stored != self.metric:
            raise ValueError(
                f"{self.directory!r} holds the best checkpoint by "
                f"{stored!r} ({stored} = {info.get('value')}), not by "
                f"--best_metric={self.metric!r}: pass "
                f"--best_metric={stored}, or move {self.directory!r} aside "
                f"to keep a new best by {self.metric!r}."
            )
        return info

    def is_better(self, value):
        """Whether `value` strictly beats the best so far (any finite
        value beats none)."""
        if value is None or not math.isfinite(value):
            return False
        if self.info is None:
            return True
        if self.higher_is_better:
            return value > self.info["value"]
        return value < self.info["value"]

    def consider(self, path, *, step, results):
        """Keeps checkpoint `path` when its value beats the best.

        Args:
            path: The checkpoint prefix evaluated.
            step: Its global step.
            results: `evaluate`'s dict of its metrics.

        Returns:
            Whether it became the best.

        Raises:
            OSError: when the copy cannot be written (the best before
                stays whole).
        """
        value = results[self.metric]
        if not self.is_better(value):
            return False
        info = {
            "metric": self.metric,
            "value": value,
            "higher_is_better": self.higher_is_better,
            "global_step": int(step),
            "checkpoint": os.path.basename(path),
            "source": os.path.abspath(path),
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "results": results,
        }
        try:
            self._replace_with(path, info)
        except FileNotFoundError as error:
            # Training deleted it (--keep_checkpoint_max) meanwhile.
            _LOG.warning(
                "Not keeping %s as the best checkpoint: %s", path, error
            )
            return False
        self.info = info
        _LOG.info(
            "best | %s: %.6g | global step: %d | %s",
            self.metric,
            value,
            step,
            self.directory,
        )
        return True

    def _replace_with(self, path, info):
        temp = os.path.join(self.parent, f"{BEST}.tmp-{os.getpid()}")
        try:
            self._write_copy(temp, path, info)
            self._swap(temp)
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    def _write_copy(self, temp, path, info):
        """A whole, synced checkpoint directory `temp`: the files of
        `path`, its `checkpoint` state file, `best.json`."""
        os.makedirs(temp)
        for source in _checkpoint_files(path):
            target = os.path.join(temp, os.path.basename(source))
            shutil.copyfile(source, target)
            _sync(target)
        base = json.dumps(info["checkpoint"])
        texts = {
            # Relative: the state file stays right after the renames.
            "checkpoint": f"model_checkpoint_path: {base}\n"
            f"all_model_checkpoint_paths: {base}\n",
            INFO: json.dumps(info, indent=2) + "\n",
        }
        for name, text in texts.items():
            with open(os.path.join(temp, name), "w") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
        _sync(temp)

    def _swap(self, temp):
        old = os.path.join(self.parent, _OLD)
        had_best = os.path.isdir(self.directory)
        if had_best:
            os.replace(self.directory, old)
        try:
            os.replace(temp, self.directory)
        except OSError:
            if had_best:
                os.replace(old, self.directory)
            raise
        _sync(self.parent)
        shutil.rmtree(old, ignore_errors=True)

"""The run: one object per `fit` call, handed to what needs it."""

import ast
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _run
from keras_slim import _strategy
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import RunView
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import StepCounter
from keras_slim.callbacks import StopAtStep
from keras_slim.callbacks import WarmStart
from keras_slim.callbacks._step_loss import records_step_losses
from tests.callbacks import common
from tests.helpers import global_step

PACKAGE = pathlib.Path(keras_slim.__file__).parent


def _current(model):
    run, _ = vars(model).get("_keras_slim_run", (None, None))
    return run


class Seen(StepCallback):
    """Records the run each hook sees."""

    def __init__(self):
        super().__init__()
        self.runs = []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.runs.append(self._run)

    def on_train_end(self, logs=None):
        self.runs.append(self._run)


def test_start_joins_an_explicit_run_and_removes_it_after():
    model = common.model()
    with _run.start(model, is_chief=False) as outer:
        assert _current(model) is outer
        with _run.start(model) as inner:
            assert inner is outer
        assert _run.of(model, params={"epochs": 1}) is outer
        assert not outer.is_chief
    assert _current(model) is None


def test_the_run_decides_the_deployment_mode_once(monkeypatch):
    """The run keeps the `Mode` decided at its start and hands it on;
    reading it asks the strategy nothing again."""
    model = common.model()
    with _run.start(model) as run:
        mode = run.mode
        assert mode == _strategy.mode(model.distribute_strategy)

        def asked_again(strategy):
            raise AssertionError("the run's Mode was decided again")

        monkeypatch.setattr(_strategy, "mode", asked_again)
        assert run.mode is mode
        assert run.is_chief is mode.chief


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_one_run_per_fit_shared_by_its_callbacks(kind):
    _, _, data = common.full_batch()
    model = common.model(kind)
    first, second = Seen(), Seen()
    common.fit(model, data, 2, [first, second])
    later = Seen()
    common.fit(model, data, 2, [later])
    assert first.runs[0] is first.runs[1] is second.runs[0]
    assert later.runs[0] is not first.runs[0]
    assert isinstance(first.run, RunView)
    assert isinstance(first.counter, StepCounter)
    assert first.counter.step == 2 and later.counter.step == 4
    if kind == "slim":
        # SlimModel.fit ends its run; a plain model's stays until the next.
        assert _current(model) is None
        # The fit handed the run over: no lookup by model.
        assert first._handed is None


class Fail(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        raise RuntimeError("stop")


def test_a_failed_fit_leaves_no_state_to_the_next(tmp_path):
    """A plain model's fit that resumed and then failed (no on_train_end)
    must not make the next fit's warm start step aside."""
    _, _, data = common.full_batch()
    run_dir, source = tmp_path / "run", tmp_path / "source"
    donor = common.model("keras")
    common.fit(donor, data, 2, [Checkpoints(source, every_n_steps=1)])
    common.fit(common.model("keras"), data, 2, [Checkpoints(run_dir)])
    model = common.model("keras")
    with pytest.raises(RuntimeError, match="stop"):
        common.fit(model, data, 2, [Checkpoints(run_dir), Fail()])
    warm = WarmStart(str(source))
    common.fit(model, data, 1, [warm])
    assert warm.resumed_from is None
    assert warm.report["restored"]


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_a_run_at_its_target_runs_no_step_and_keeps_the_train_function(
    kind,
):
    _, _, data = common.full_batch()
    model = common.model(kind)
    common.fit(model, data, 3)
    function = model.train_function
    before = [w.copy() for w in model.get_weights()]
    common.fit(model, data, 3, [StopAtStep(last_step=3)])
    assert global_step(model) == 3
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert model.train_function is function


class SkipFrom(StepCallback):
    """Declares that non-finite steps are skipped once training has begun
    (too late: the run's step options are fixed before its first step)."""

    def __init__(self):
        super().__init__()
        self.skip = False
        self.asked = 0

    def step_options(self, model):
        self.asked += 1
        return {"raise_on_nonfinite": not self.skip}

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.skip = True
        #: The options the model's step is traced with now.
        self.traced = self.model.step_options


def test_the_step_options_are_fixed_for_the_run():
    """A run's NaN mode is asked for once, before its first step: a
    callback changing its mind later changes nothing in that run's step."""
    x, y, _ = common.full_batch()
    x = x.copy()
    x[-8:] = np.nan  # the last batch of 4
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model = common.model()
    callback = SkipFrom()
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        model.fit(data, epochs=1, verbose=0, callbacks=[callback])
    assert callback.traced.raise_on_nonfinite
    assert callback.asked == 1


def test_only_the_run_module_sets_an_attribute_on_the_model():
    """`grep -rn "_keras_slim_" keras_slim/` shows only the run module."""
    hits = [
        f"{p.relative_to(PACKAGE)}:{n}"
        for p in PACKAGE.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "_keras_slim_" in line
    ]
    assert len(hits) == 1 and hits[0].startswith("_run.py:"), hits


def _calls(name):
    """The modules calling `_run.<name>(` (one entry per call)."""
    pattern = re.compile(rf"\b_run\.{name}\(")
    return sorted(
        f"{p.relative_to(PACKAGE)}"
        for p in PACKAGE.rglob("*.py")
        if p.name != "_run.py"  # its docstrings show the calls
        for line in p.read_text().splitlines()
        if pattern.search(line)
    )


def test_the_run_is_found_by_model_in_two_places_only():
    """Whoever starts a run hands it over; the lookups left: a plain
    model's callbacks (`of`), and a fit joining train's run (`start`)."""
    assert _calls("of") == ["callbacks/_run_callback.py"]
    assert _calls("start") == ["_fit/__init__.py", "learning.py"]
    source = (PACKAGE / "_run.py").read_text()
    assert source.count("# A lookup by model:") == 2


def test_no_callback_assigns_the_train_function():
    pattern = re.compile(r"\.train_function\s*=")
    for path in (PACKAGE / "callbacks").glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


def _module_paths():
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(p for p in parts if p != "__init__")] = path
    return modules


def _imports(path, modules):
    """The keras_slim modules `path` imports, at any depth of the file:
    `from a import b` imports module `a.b` where there is one, else `a`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n in modules}


def _module_graph():
    modules = _module_paths()
    return {
        name: _imports(path, modules) - {name} for name, path in modules.items()
    }


def test_the_package_has_no_import_circle():
    graph = _module_graph()
    done, active = set(), []

    def visit(name):
        if name in active:
            cycle = active[active.index(name) :] + [name]
            pytest.fail("import circle: " + " -> ".join(cycle))
        if name in done:
            return
        active.append(name)
        for other in sorted(graph[name]):
            visit(other)
        active.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_run_imports_nothing_above_it():
    assert _module_graph()["keras_slim._run"] == {
        "keras_slim._keras",
        "keras_slim._signals",
        "keras_slim._strategy",
        "keras_slim._step.accumulate",
    }


def test_records_step_losses_only_for_slim_models():
    assert records_step_losses(common.model())
    assert not records_step_losses(common.model("keras"))
    assert not records_step_losses(object())


class SeenCheckpoints(StepCallback):
    """Records `run.latest_checkpoint` at each batch end and at the end."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.seen.append(("begin", self.run.latest_checkpoint))

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.seen.append((self.counter.step, self.run.latest_checkpoint))

    def on_train_end(self, logs=None):
        self.seen.append(("end", self.run.latest_checkpoint))


def test_the_latest_checkpoint_is_seen_at_the_batch_end_of_its_save(
    tmp_path,
):
    _, _, data = common.full_batch()
    directory = str(tmp_path / "run")
    names = [f"{directory}/model.ckpt-{n}" for n in (2, 3)]
    first = SeenCheckpoints()
    common.fit(
        common.model(),
        data,
        3,
        [Checkpoints(directory, every_n_steps=2, every_n_secs=None), first],
    )
    assert first.seen == [
        ("begin", None),
        (1, None),
        (2, names[0]),
        (3, names[0]),
        ("end", names[1]),  # the save at train end
    ]
    resumed = SeenCheckpoints()
    common.fit(common.model(), data, 1, [Checkpoints(directory), resumed])
    assert resumed.seen[0] == ("begin", names[1])
    without = SeenCheckpoints()
    common.fit(common.model(), data, 1, [without])
    assert without.seen == [("begin", None), (1, None), ("end", None)]

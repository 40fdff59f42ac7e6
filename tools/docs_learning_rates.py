"""mkdocs hook: the learning-rate picture, drawn at docs build.

`images/learning_rates.svg` is added to the site as a generated file:
matplotlib plots the rates `keras_slim.image.learning_rate.
configure_learning_rate` itself returns (the function keras-slim-train
calls) for TF-Slim's exponential and polynomial decays and for the
recipes' warmup and cosine, so the picture cannot drift from the code.
"""

import io
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SRC_URI = "images/learning_rates.svg"

#: (label, flags): the curves, on 1,000 examples an epoch, batch 32
#: (31 steps an epoch), 600 steps.
CURVES = (
    (
        "exponential (TF-Slim's default): 0.94 every 2 epochs, staircase",
        {"learning_rate_decay_type": "exponential"},
    ),
    (
        "polynomial: to 0.0001 over 8 epochs",
        {"learning_rate_decay_type": "polynomial", "num_epochs_per_decay": 8},
    ),
    (
        "--warmup_epochs=2 then cosine to --max_number_of_steps",
        {
            "learning_rate_decay_type": "cosine",
            "warmup_epochs": 2,
            "max_number_of_steps": 600,
        },
    ),
)
EXAMPLES, STEPS = 1000, 600


def rates(flags):
    """The rate at each step 0..STEPS, from `configure_learning_rate`."""
    import numpy

    from keras_slim.image import learning_rate

    schedule = learning_rate.configure_learning_rate(
        EXAMPLES, None, learning_rate=0.01, **flags
    )
    # The schedule takes a vector of steps (elementwise, as at one step).
    steps = numpy.arange(STEPS + 1, dtype="float32")
    return [float(rate) for rate in numpy.asarray(schedule(steps))]


def svg():
    """The picture, as SVG text."""
    import matplotlib

    matplotlib.use("Agg")
    # Text as text (the page's font, searchable), not glyph outlines.
    matplotlib.rcParams["svg.fonttype"] = "none"
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7.2, 4.0))
    for label, flags in CURVES:
        axes.plot(range(STEPS + 1), rates(flags), label=label)
    axes.set_xlabel("global step (31 steps an epoch)")
    axes.set_ylabel("learning rate (--learning_rate=0.01)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    out = io.StringIO()
    # No date in the file: the same code draws the same bytes.
    figure.savefig(out, format="svg", metadata={"Date": None})
    pyplot.close(figure)
    return out.getvalue()


def on_files(files, config, **kwargs):
    """mkdocs' hook: adds the generated picture to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, SRC_URI, content=svg()))
    return files

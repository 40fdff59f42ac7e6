"""Today's augmentation recipes in the input pipeline, off by default:
RandAugment per image, MixUp and CutMix per batch, on Keras's layers.
"""

import dataclasses
import numbers

import keras
import tensorflow as tf

from keras_slim import checks
from keras_slim.image import _keras

#: timm's largest RandAugment magnitude: M / 10 is Keras's `factor`.
MAX_MAGNITUDE = 10
# Folded into a position's seed: each stream its own draws.
_RANDAUGMENT_TAG = 1
_MIX_TAG = 2
_SWITCH_TAG = 3


def _alpha(name, value):
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not 0 <= value < float("inf")
    ):
        raise checks.invalid(name, value, "a non-negative number (0: off)")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What a training pipeline adds to TF-Slim's preprocessing.

    Args:
        randaugment: `(num_ops, magnitude)`: Keras's RandAugment with
            `num_ops` (1 to 11) operations per image, at most `magnitude`
            (0 to 10) / 10 of their strength; `None`: off.
        mixup_alpha: Non-negative float: MixUp's Beta parameter; 0: off.
        cutmix_alpha: Float in [0, 1]: CutMix's Beta parameter (Keras's
            CutMix takes at most 1, timm's default); 0: off.

    Raises:
        ValueError: for a value out of range, naming it.

    Example:
    ```python
    Augmentation(randaugment=(2, 9), mixup_alpha=0.8, cutmix_alpha=1.0)
    ```
    """

    randaugment: tuple | None = None
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    # Each layer is made once: its seed generator is a variable, which a
    # dataset function traced twice (parameter-server workers) must not
    # make again.
    _layers: dict = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self):
        if self.randaugment is not None:
            _check_randaugment(self.randaugment)
        _alpha("mixup_alpha", self.mixup_alpha)
        if _alpha("cutmix_alpha", self.cutmix_alpha) > 1:
            raise checks.invalid(
                "cutmix_alpha",
                self.cutmix_alpha,
                "a number in [0, 1] (Keras's CutMix; 0: off)",
            )

    @property
    def mixes(self):
        """Whether batches are mixed (MixUp or CutMix)."""
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    def _layer(self, layer_class, **arguments):
        """The `layer_class(**arguments)` this recipe made, or a new one,
        made outside any function being traced."""
        key = (layer_class.__name__, *sorted(arguments.items()))
        if key not in self._layers:
            with tf.init_scope():
                self._layers[key] = layer_class(**arguments)
        return self._layers[key]

    def image_fn(self, value_range):
        """`(image, seed) -> image`: RandAugment, or `None` when off.

        Args:
            value_range: The images' range: `(0, 255)` for decoded uint8
                images (returned as uint8), `(0, 1)` for floats.

        Returns:
            A function of one `[height, width, channels]` image and its
            `[2]` int64 seed, or `None`.
        """
        if self.randaugment is None:
            return None
        num_ops, magnitude = self.randaugment
        layer = self._layer(
            keras.layers.RandAugment,
            value_range=tuple(value_range),
            num_ops=int(num_ops),
            factor=magnitude / MAX_MAGNITUDE,
        )

        def augment(image, seed):
            seeds = _keras.StatelessSeeds(_fold(seed, _RANDAUGMENT_TAG))
            batch = tf.cast(image, tf.float32)[None]
            change = _keras.random_transformation(layer, batch, seeds)
            out = _keras.rand_augment_chosen(layer, batch, change)[0]
            if image.dtype == tf.uint8:
                return tf.cast(tf.clip_by_value(tf.round(out), 0, 255), "uint8")
            return tf.cast(out, image.dtype)

        return augment

    def batch_fn(self):
        """`(images, one-hot labels, seed) -> (images, soft labels)`:
        MixUp, CutMix or either (0.5 each), or `None` when off."""
        if not self.mixes:
            return None
        mixup = cutmix = None
        if self.mixup_alpha > 0:
            mixup = _mixer(
                self._layer(keras.layers.MixUp, alpha=self.mixup_alpha)
            )
        if self.cutmix_alpha > 0:
            alpha = self.cutmix_alpha
            cutmix = _mixer(
                self._layer(keras.layers.CutMix, factor=(alpha, alpha))
            )
        if mixup is None or cutmix is None:
            return mixup or cutmix

        def either(images, labels, seed):
            draw = tf.random.stateless_uniform([], _fold(seed, _SWITCH_TAG))
            return tf.cond(
                draw < 0.5,
                lambda: cutmix(images, labels, seed),
                lambda: mixup(images, labels, seed),
            )

        return either


def from_arguments(is_training, **recipe):
    """The `Augmentation` of `load`'s recipe arguments (`randaugment`,
    `mixup_alpha`, `cutmix_alpha`), or `None` when all are off: the
    pipeline is then TF-Slim's, no layer built.

    Raises:
        ValueError: for a value out of range, or any set for an eval
            split (`is_training=False`).
    """
    off = {"randaugment": None, "mixup_alpha": 0.0, "cutmix_alpha": 0.0}
    if recipe == off:
        return None
    augmentation = Augmentation(**recipe)
    if not is_training:
        given = {k: v for k, v in recipe.items() if v != off[k]}
        raise ValueError(
            f"Augmentation is for training. Received: {given} with "
            "is_training=False. Expected them only when is_training=True."
        )
    return augmentation


def _check_randaugment(value):
    ops = len(_keras.rand_augment_ops())
    ok = isinstance(value, tuple) and len(value) == 2
    if ok:
        num_ops, magnitude = value
        ok = (
            checks.is_int(num_ops)
            and 1 <= num_ops <= ops
            and isinstance(magnitude, numbers.Real)
            and not isinstance(magnitude, bool)
            and 0 <= magnitude <= MAX_MAGNITUDE
        )
    if not ok:
        raise checks.invalid(
            "randaugment",
            value,
            f"(num_ops, magnitude): num_ops an integer in [1, {ops}] (the "
            "operations of Keras's RandAugment), magnitude a number in "
            f"[0, {MAX_MAGNITUDE}] (timm's rand-mM-nN)",
        )


def _fold(seed, tag):
    return tf.random.experimental.stateless_fold_in(
        tf.cast(seed, tf.int64), tag
    )


def _mixer(layer):
    """`(images, labels, seed) -> (images, labels)` with `layer`'s draws
    from `seed`; CutMix's label weight is the pasted pixels' fraction."""

    def mix(images, labels, seed):
        seeds = _keras.StatelessSeeds(_fold(seed, _MIX_TAG))
        change = _keras.random_transformation(layer, images, seeds)
        if "batch_masks" in change:
            pasted = tf.cast(change["batch_masks"], tf.float32)
            change["mix_weight"] = 1.0 - tf.reduce_mean(pasted, axis=[1, 2, 3])
        images = layer.transform_images(images, change, training=True)
        labels = layer.transform_labels(labels, change, training=True)
        return images, labels

    return mix


def augment_images(data, augmentation, seed, value_range):
    """`data` of `(image, label)` with each image RandAugment-ed from
    `[seed, its index in the stream]`; `data` itself when off."""
    augment = augmentation and augmentation.image_fn(value_range)
    if augment is None:
        return data

    def element(index, image, label):
        return augment(
            image, tf.stack([tf.constant(seed, tf.int64), index])
        ), label

    return data.enumerate().map(
        lambda index, pair: element(index, *pair),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def mix_batches(data, augmentation, seed):
    """`data` of `(images, one-hot labels)` batches, each mixed from
    `[seed, its index in the stream]`; `data` itself when off."""
    mix = augmentation and augmentation.batch_fn()
    if mix is None:
        return data

    @tf.autograph.experimental.do_not_convert
    def batch(index, images, labels):
        return mix(
            images, labels, tf.stack([tf.constant(seed, tf.int64), index])
        )

    return data.enumerate().map(
        lambda index, pair: batch(index, *pair),
        num_parallel_calls=tf.data.AUTOTUNE,
    )

"""Keras Applications as `keras-slim-train` nets: `mobilenet_v2`,
`resnet50`, `inception_v3`.

Each is the Keras Application without its top and with random weights
(nothing is downloaded), global average pooling, then a dense `logits`
layer. `inception_v3`'s layers are unnamed in Keras, so they are renamed
to the names a fresh Keras session gives them (`conv2d/kernel` ...
`conv2d_93/kernel`), whatever was built before it in the process.

`slim_name_map` for `mobilenet_v2` maps Keras's paths to the names in
TF-Slim's `mobilenet_v2_1.0_224.ckpt`.
"""

import collections
import re

import keras

_APPLICATIONS = {
    "mobilenet_v2": keras.applications.MobileNetV2,
    "resnet50": keras.applications.ResNet50,
    "inception_v3": keras.applications.InceptionV3,
}

# Keras's MobileNetV2 layers -> TF-Slim's `MobilenetV2` scopes.
_MOBILENET_V2_SCOPES = (
    (r"Conv1", r"Conv"),
    (r"bn_Conv1", r"Conv/BatchNorm"),
    (r"expanded_conv_(depthwise|project)", r"expanded_conv/\1"),
    (r"expanded_conv_(depthwise|project)_BN", r"expanded_conv/\1/BatchNorm"),
    (r"block_(\d+)_(expand|depthwise|project)", r"expanded_conv_\1/\2"),
    (
        r"block_(\d+)_(expand|depthwise|project)_BN",
        r"expanded_conv_\1/\2/BatchNorm",
    ),
    (r"Conv_1", r"Conv_1"),
    (r"Conv_1_bn", r"Conv_1/BatchNorm"),
    (r"logits", r"Logits/Conv2d_1c_1x1"),
)

_SLIM_VARIABLES = {
    "kernel": "weights",
    "bias": "biases",
    "gamma": "gamma",
    "beta": "beta",
    "moving_mean": "moving_mean",
    "moving_variance": "moving_variance",
}


def _auto_prefix(layer):
    # The name Keras gives an unnamed layer, before its counter suffix
    # (as Keras's naming.to_snake_case writes it).
    name = re.sub(r"\W+", "", type(layer).__name__)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _local_names(layers):
    """Each layer's name, with the suffixes of Keras's automatic names
    counted within `layers` (in creation order), as a fresh session
    would count them."""
    groups = collections.defaultdict(list)
    for layer in layers:
        prefix = _auto_prefix(layer)
        match = re.fullmatch(re.escape(prefix) + r"(?:_(\d+))?", layer.name)
        if match:
            groups[prefix].append((int(match.group(1) or 0), layer.name))
    names = {layer.name: layer.name for layer in layers}
    for prefix, members in groups.items():
        for rank, (_, name) in enumerate(sorted(members)):
            names[name] = f"{prefix}_{rank}" if rank else prefix
    return names


def _owners(model):
    return [layer for layer in model.layers if layer.weights]


def _with_local_names(base, inputs):
    """`base`'s output on `inputs`, its layers renamed by `_local_names`
    where that changes a variable's path."""
    names = _local_names(base.layers)
    if all(names[layer.name] == layer.name for layer in _owners(base)):
        return base.output

    def rename(layer):
        config = dict(layer.get_config(), name=names[layer.name])
        return type(layer).from_config(config)

    # Cloning is the public way to rename layers before they are built.
    clone = keras.models.clone_model(
        base, input_tensors=[inputs], clone_function=rename
    )
    return clone.output


def features(model_name, inputs):
    """The pooled features of the Keras Application `model_name` on
    `inputs`, its layers named as in a fresh session."""
    base = _APPLICATIONS[model_name](
        include_top=False, weights=None, input_tensor=inputs, pooling="avg"
    )
    return _with_local_names(base, inputs)


def regularize(model, weight_decay):
    """Adds TF-Slim's halved L2 penalty to conv and dense kernels."""
    regularizer = keras.regularizers.L2(weight_decay / 2)
    for layer in model.layers:
        # DepthwiseConv2D is not a Conv2D: TF-Slim leaves it unregularized.
        if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense)):
            layer.kernel_regularizer = regularizer
            layer.kernel.regularizer = regularizer


def mobilenet_v2_name(path):
    """The TF-Slim checkpoint name of a Keras MobileNetV2 variable path
    (`slim_name_map("mobilenet_v2")` documents the map)."""
    layer, _, variable = path.rpartition("/")
    if variable not in _SLIM_VARIABLES:
        return path
    for pattern, scope in _MOBILENET_V2_SCOPES:
        match = re.fullmatch(pattern, layer)
        if match:
            scope = match.expand(scope)
            if variable == "kernel" and scope.endswith("/depthwise"):
                return f"MobilenetV2/{scope}/depthwise_weights"
            return f"MobilenetV2/{scope}/{_SLIM_VARIABLES[variable]}"
    return path

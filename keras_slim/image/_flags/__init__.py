"""The flags of `keras-slim-train` and `keras-slim-eval`, in groups."""

from keras_slim.image._flags.consistency import check_digits_flags
from keras_slim.image._flags.consistency import check_flags
from keras_slim.image._flags.consistency import check_image_size
from keras_slim.image._flags.data import DIGITS
from keras_slim.image._flags.data import add_augmentation_flags
from keras_slim.image._flags.data import add_data_flags
from keras_slim.image._flags.deployment import add_deployment_flags
from keras_slim.image._flags.deployment import add_master_flag
from keras_slim.image._flags.fine_tuning import add_fine_tuning_flags
from keras_slim.image._flags.fine_tuning import add_policy_flags
from keras_slim.image._flags.model import QUANTIZATION
from keras_slim.image._flags.model import add_inference_average_flag
from keras_slim.image._flags.model import add_model_flags
from keras_slim.image._flags.model import add_quantization_flag
from keras_slim.image._flags.optimization import MIXED_PRECISION
from keras_slim.image._flags.optimization import add_optimization_flags
from keras_slim.image._flags.optimization import add_precision_flag
from keras_slim.image._flags.services import add_best_flags
from keras_slim.image._flags.services import add_dry_run_flag
from keras_slim.image._flags.services import add_logging_flags
from keras_slim.image._flags.services import add_services_flags

__all__ = [
    "DIGITS",
    "MIXED_PRECISION",
    "QUANTIZATION",
    "add_augmentation_flags",
    "add_best_flags",
    "add_data_flags",
    "add_deployment_flags",
    "add_dry_run_flag",
    "add_fine_tuning_flags",
    "add_inference_average_flag",
    "add_logging_flags",
    "add_master_flag",
    "add_model_flags",
    "add_optimization_flags",
    "add_policy_flags",
    "add_precision_flag",
    "add_quantization_flag",
    "add_services_flags",
    "check_digits_flags",
    "check_flags",
    "check_image_size",
]

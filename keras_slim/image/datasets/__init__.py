"""TF-Slim's datasets: `dataset_factory`, one reader per layout, writers."""

from keras_slim.image.datasets.dataset_factory import CHANNELS
from keras_slim.image.datasets.dataset_factory import FORMATS
from keras_slim.image.datasets.dataset_factory import DamagedImageError
from keras_slim.image.datasets.dataset_factory import ImageData
from keras_slim.image.datasets.dataset_factory import MissingSplitError
from keras_slim.image.datasets.dataset_factory import load
from keras_slim.image.datasets.folders import IMAGE_EXTENSIONS
from keras_slim.image.datasets.layouts import LAYOUTS
from keras_slim.image.datasets.layouts import Layout
from keras_slim.image.datasets.writers import IMAGE_FORMATS
from keras_slim.image.datasets.writers import LABELS_FILENAME
from keras_slim.image.datasets.writers import SPLITS
from keras_slim.image.datasets.writers import write_dataset
from keras_slim.image.datasets.writers import write_image_folder
from keras_slim.image.datasets.writers import write_tfrecords

__all__ = [
    "CHANNELS",
    "DamagedImageError",
    "FORMATS",
    "IMAGE_EXTENSIONS",
    "IMAGE_FORMATS",
    "ImageData",
    "LABELS_FILENAME",
    "LAYOUTS",
    "Layout",
    "MissingSplitError",
    "SPLITS",
    "load",
    "write_dataset",
    "write_image_folder",
    "write_tfrecords",
]

"""TF-Slim's image classification app on keras_slim: research/slim's map.

TF-Slim's research/slim holds `nets/`, `datasets/`, `preprocessing/` and
the scripts beside them; so does this package:

- `keras-slim-train` (`train_image_classifier`), `keras-slim-eval`
  (`eval_image_classifier`) and `keras-slim-export`
  (`export_inference_graph`): TF-Slim's scripts, with their flags;
- `nets`: `nets_factory` and the nets, one module per family;
- `datasets`: `dataset_factory`, one reader per layout, writers;
- `preprocessing`: `preprocessing_factory`, one module per family.

It is built on the training library (`keras_slim.train`,
`keras_slim.DeploymentConfig`, `keras_slim.callbacks`), which does not
import it.
"""

from keras_slim.image import datasets
from keras_slim.image import nets
from keras_slim.image import preprocessing

__all__ = ["datasets", "nets", "preprocessing"]

"""The site's generated picture: the learning rates keras-slim-train uses.

tools/docs_learning_rates.py draws it at docs build from
`configure_learning_rate`; here, its curves against TF1's formulas.
"""

import importlib.util
import pathlib
import xml.etree.ElementTree as ElementTree

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "docs_learning_rates", ROOT / "tools" / "docs_learning_rates.py"
)
HOOK = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(HOOK)


def test_the_curves_are_tf_slims_and_the_recipes():
    exponential, polynomial, cosine = (HOOK.rates(f) for _, f in HOOK.CURVES)
    # 1,000 examples, batch 32: int(1000 * 2 / 32) = 62 steps a decay.
    assert exponential[61] == pytest.approx(0.01)
    assert exponential[62] == pytest.approx(0.01 * 0.94)
    assert exponential[600] == pytest.approx(0.01 * 0.94 ** (600 // 62))
    # Linear (power 1) to 0.0001 over int(1000 * 8 / 32) = 250 steps.
    assert polynomial[125] == pytest.approx((0.01 + 0.0001) / 2)
    assert polynomial[250] == polynomial[600] == pytest.approx(0.0001)
    # A 62-step ramp from 0, then a cosine over the 538 steps left.
    assert cosine[0] == 0.0
    assert cosine[31] == pytest.approx(0.005)
    assert cosine[62] == pytest.approx(0.01)
    assert cosine[62 + 269] == pytest.approx((0.01 + 0.0001) / 2, rel=1e-4)
    assert cosine[600] == pytest.approx(0.0001)


def test_the_picture_is_an_svg_of_three_curves():
    root = ElementTree.fromstring(HOOK.svg())
    assert root.tag.endswith("svg")
    texts = {element.text for element in root.iter() if element.text}
    for label, _ in HOOK.CURVES:
        assert label in texts

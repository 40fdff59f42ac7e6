"""One run of TF-Slim's own nets for every test module here that needs it.

Each module lists its nets as `SPECS` (see slim_peer.py); the `slim`
fixture runs the peer once per test session for the specs of the modules
collected, in one process (one TensorFlow import), and gives its output
directory.
"""

import hashlib

import pytest

from tests.image.nets import peer


@pytest.fixture(scope="session")
def slim(request, tmp_path_factory):
    modules = sorted(
        {
            item.module
            for item in request.session.items
            if getattr(item.module, "SPECS", None)
        },
        key=lambda module: module.__name__,
    )
    # A net two modules use (the nets' tests, the commands') runs once.
    specs = list(
        {
            spec["name"]: spec for module in modules for spec in module.SPECS
        }.values()
    )
    names = ",".join(spec["name"] for spec in specs)
    key = "tf_slim_" + hashlib.sha1(names.encode()).hexdigest()[:10]
    return peer.run(tmp_path_factory, key, specs)

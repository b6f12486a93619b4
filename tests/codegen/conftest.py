import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    if shutil.which("cc") is not None:
        return
    skip = pytest.mark.skip(reason="needs_cc: no C compiler (cc) on this machine; apt-get install gcc")
    for item in items:
        if "needs_cc" in item.keywords:
            item.add_marker(skip)

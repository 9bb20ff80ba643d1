"""python/'s build backend (pyproject.toml): setuptools' own, run on a copy of the project in a
scratch folder, so that `pip install python/` and `pip wheel python/` leave the checkout as they
found it. setuptools writes build/ and uma.egg-info beside pyproject.toml; run in the checkout,
they outlived the install and a later build packed stale files from them (issue 36).

Editable installs (`pip install -e`) point at the checkout by design: they run in it, unchanged.
"""

import contextlib
import os
import shutil
import tempfile

from setuptools import build_meta as _setuptools

# What setuptools leaves behind, and what no build needs from the checkout.
_LEFT_OUT = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__")


@contextlib.contextmanager
def _in_a_copy():
    """Runs the body in a scratch copy of the project (the hooks' working directory, PEP 517)."""
    project = os.getcwd()
    scratch = tempfile.mkdtemp(prefix="uma-python-build-")
    copy = os.path.join(scratch, "project")
    try:
        shutil.copytree(project, copy, ignore=_LEFT_OUT)
        os.chdir(copy)
        yield
    finally:
        os.chdir(project)
        shutil.rmtree(scratch, ignore_errors=True)


def _absolute(path):
    return None if path is None else os.path.abspath(path)


def get_requires_for_build_wheel(config_settings=None):
    with _in_a_copy():
        return _setuptools.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _in_a_copy():
        return _setuptools.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    metadata_directory = _absolute(metadata_directory)
    with _in_a_copy():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory, metadata_directory = _absolute(wheel_directory), _absolute(metadata_directory)
    with _in_a_copy():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    sdist_directory = _absolute(sdist_directory)
    with _in_a_copy():
        return _setuptools.build_sdist(sdist_directory, config_settings)


# Editable installs: setuptools' hooks as they are (the checkout is what they install).
if hasattr(_setuptools, "build_editable"):
    get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
    prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable
    build_editable = _setuptools.build_editable

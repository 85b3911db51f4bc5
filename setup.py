"""Keel installs under one import name, `keel`.

The repository keeps its layers as top-level folders (program/, executor/, kernels/, proto/,
tools/; see docs/architecture.md); installed, each is a subpackage of `keel`: keel.program,
keel.executor, ... . setuptools' package_dir does the mapping; this file only lists the
packages under each folder, so a new subpackage needs no edit here. The metadata lives in
pyproject.toml.
"""
from setuptools import find_packages, setup

# repository folder -> its package under `keel`
MAPPED = {"program": "keel.program", "executor": "keel.executor", "kernels": "keel.kernels",
          "proto": "keel.proto", "tools": "keel.tools"}


def packages_and_dirs() -> tuple[list[str], dict[str, str]]:
    packages = ["keel"] + [f"keel.{name}" for name in find_packages("keel")]
    package_dir = {"keel": "keel"}
    for folder, package in MAPPED.items():
        package_dir[package] = folder
        packages += [package] + [f"{package}.{name}" for name in find_packages(folder)]
    return packages, package_dir


PACKAGES, PACKAGE_DIR = packages_and_dirs()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR, package_data={"keel.proto": ["*.proto"]})

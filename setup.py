"""The compiled part of gossamer: parse/_simhash.pyx, the near-duplicate fingerprint (Cython;
docs/crawler.md, "Near-duplicates"). Everything else is in pyproject.toml."""

import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3: some Pythons build extensions at -O2, where gcc does not vectorise its UTF-8 length loop
FLAGS = [] if sys.platform == "win32" else ["-O3"]

setup(
    ext_modules=cythonize(
        [
            Extension(
                "gossamer.parse._simhash",
                ["src/gossamer/parse/_simhash.pyx"],
                extra_compile_args=FLAGS,
            )
        ],
        compiler_directives={"language_level": 3},
    )
)

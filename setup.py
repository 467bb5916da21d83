"""The compiled parts of gossamer (Cython): parse/_simhash.pyx, the near-duplicate fingerprint,
and _neardup.pyx, its block index (docs/crawler.md, "Near-duplicates"), and
graph/_hyperball.pyx, HyperBall's iteration (docs/graph.md, "Distances: exact and
estimated"). Everything else is in pyproject.toml."""

import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3: some Pythons build extensions at -O2, where gcc does not vectorise the fingerprint's UTF-8
# length loop nor HyperBall's register-wise max
FLAGS = [] if sys.platform == "win32" else ["-O3"]

setup(
    ext_modules=cythonize(
        [
            Extension(
                "gossamer.parse._simhash",
                ["src/gossamer/parse/_simhash.pyx"],
                extra_compile_args=FLAGS,
            ),
            Extension(
                "gossamer._neardup",
                ["src/gossamer/_neardup.pyx"],
                extra_compile_args=FLAGS,
            ),
            Extension(
                "gossamer.graph._hyperball",
                ["src/gossamer/graph/_hyperball.pyx"],
                extra_compile_args=FLAGS,
            ),
        ],
        compiler_directives={"language_level": 3},
    )
)

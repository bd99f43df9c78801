"""The optional compiled engine core (mta/_native.c); everything else is in pyproject.toml.

``optional=True``: without a working C compiler the build goes on and the
package runs on its pure-Python engines (mta.native.AVAILABLE is False).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mta._native", ["mta/_native.c"], optional=True)])

"""Horismos: a neuro-symbolic decision runtime served as a CDS Hooks service."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("horismos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

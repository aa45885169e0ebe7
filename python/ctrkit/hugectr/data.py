"""hugectr.data: HugeCTR's data submodule (DataSourceParams)."""

from . import DataSourceParams  # noqa: F401

__all__ = ["DataSourceParams"]

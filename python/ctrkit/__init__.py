"""ctrkit: click-through-rate datasets and training, compatible with NVIDIA
HugeCTR. `import ctrkit.hugectr as hugectr` gives HugeCTR's Python API
backed by the ctrkit binary (found through $CTRKIT_BIN, then PATH)."""

from ._proc import CtrkitError, binary

__all__ = ["CtrkitError", "binary"]
__version__ = "0.1.0"

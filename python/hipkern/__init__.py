"""hipkern from Python: HIP/CUDA kernels with float64 CPU references.

- :mod:`hipkern.torch`: force/virial assembly as torch ops with DeePMD's
  signature (``edge_force_assembly``, ``build_plan``), on torch's stream;
- :mod:`hipkern.nearfield`: near-field tables (built or loaded through the
  SQLite cache) and the List 1 evaluator, numpy arrays in and out;
- :mod:`hipkern.psf`: the PSF sink, star events replayed into a float64
  HDR image, numpy arrays in and out.

``hipkern.torch`` imports torch; the rest needs numpy only. Every function
checks its inputs first and raises ``ValueError`` naming the problem
(``RuntimeError`` for the machine: no device, a runtime failure).
"""
from . import _native

__version__ = "0.1.0"


def platform() -> str:
    """``"cpu"``, ``"nvidia"`` or ``"amd"``: what this build's kernels run on
    (``"cpu"``: no device code; every function takes its CPU path)."""
    return _native.platform()


def compiled_archs() -> list:
    """The device architectures compiled in (``sm_90``, ``gfx942``, ...)."""
    return _native.compiled_archs()


def abi_version() -> int:
    """The C ABI version of the kernel layer this build links."""
    return _native.abi_version()


def device_count() -> int:
    """The number of visible devices. Raises ``RuntimeError`` with the
    runtime's message where there is no driver or no device, and on the
    cpu platform."""
    return _native.device_count()


__all__ = ["platform", "compiled_archs", "abi_version", "device_count", "__version__"]

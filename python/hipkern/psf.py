"""The PSF sink: star events replayed into a float64 HDR RGB image.

The model, the coordinates and what each sink promises are those of
``docs/design/psf.md``; this module is numpy arrays in and out.

Events
    An (N, 7) float64 array, one row per event, columns
    ``x, y, flux, r, g, b, support`` (:data:`EVENT_FIELDS`, the C ABI's
    ``HIPKERN_PSF_EVENT_FIELDS`` order). A structured array with those
    field names is taken too, and :func:`star_events` builds the array from
    columns. Pixel ``(ix, iy)`` covers ``[ix, ix+1) x [iy, iy+1)``: a star
    at ``x = 10.5`` is centred on pixel 10. Every value must be finite,
    flux and colours non-negative, the support (the radius of the disc of
    pixel centres an event reaches, in pixels) positive. An event deposits
    ``flux*r``, ``flux*g``, ``flux*b`` spread over its support pixels.

Image
    float64, shape ``(height, width, 3)``, C order, RGB last:
    ``image[iy, ix, c]``. Each side 1..=2**20.

Sinks
    ``device=None`` is the float64 CPU sink (the reference; its
    row-parallel form with ``threads`` is bitwise the serial one). An
    integer is the device sink on that GPU, in one of :data:`MODES`
    (default ``"atomic"``, as in Rust): ``"atomic"`` (float64 atomics, the
    order of a pixel's sums varies from run to run), ``"tile16"`` and
    ``"tile32"`` (owner-computes tiles, bitwise repeatable for the same
    chunking), ``"adaptive"`` (per chunk of up to 16,384 events: 32-px tiles
    for chunks of at least 8,192 events, atomics for smaller ones; see
    :attr:`Sink.chunk_log`). The device image agrees with the CPU
    reference within the acceptance of ``docs/design/psf.md#acceptance``
    (:func:`compare`, tolerance 1e-10).

Events whose support does not fit the cache's 95x95 stamps (supports from
47.5 px up) go by the exact direct path with ``direct=True`` (the default),
as the Rust sinks' ``accumulate_routed`` does; ``direct=False`` refuses
them.

Errors: every event of a call is checked before anything is accumulated;
bad input raises ``ValueError`` naming the argument (and the event's index)
and leaves the image as it was. On the ``cpu`` platform (no device code)
asking for a device raises ``RuntimeError`` with hipkern's message. One
exception to all-or-nothing: a device sink in a tile mode can refuse a chunk
whose tile lists need more than its bounded scratch (``ValueError`` naming
the buffer); the chunks of that call before it stay accumulated.
"""
import math
import operator

import numpy as np

from . import _native

#: Event columns, in order.
EVENT_FIELDS = ("x", "y", "flux", "r", "g", "b", "support")
#: The structured dtype with those fields, all float64.
EVENT_DTYPE = np.dtype([(name, np.float64) for name in EVENT_FIELDS])
#: The device sink's modes.
MODES = ("atomic", "tile16", "tile32", "adaptive")
#: Where the tile modes build their per-tile event lists.
BINNINGS = ("device", "host")
#: Events per chunk of the sinks.
CHUNK_EVENTS = 16384
#: Stamp offsets run over -47..=47 px of an event's anchor pixel.
CACHE_RADIUS = 47
#: Side of a stamp, 95 px.
STAMP_SIDE = 2 * CACHE_RADIUS + 1
#: Phase intervals per axis of the default cache (305 MB of stamps).
DEFAULT_PHASES = 64
#: The most phase intervals a cache takes.
MAX_PHASES = 1024
#: The largest image side.
MAX_IMAGE_SIDE = 1 << 20
#: The largest support the direct path renders, px.
MAX_DIRECT_SUPPORT = 1e12
#: Luminance weights of R, G, B.
LUMA = (0.2126, 0.7152, 0.0722)
#: The acceptance tolerance of a device image against the CPU reference.
TOLERANCE = 1e-10


def _real(value, name):
    """``value`` as a float; a ``ValueError`` naming ``name`` otherwise."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r} is not a real number") from None


def _integer(value, name, *, allow_none=False):
    """``value`` as a non-negative int (bools and floats refused, so that
    ``width=2.5`` is an error rather than 2); a ``ValueError`` naming
    ``name`` otherwise."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} = {value!r} is a bool, not an integer")
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} = {value!r} is not an integer") from None
    if v < 0:
        raise ValueError(f"{name} = {v} is negative")
    return v


class Psf:
    """A circular Moffat PSF of unit total flux.

    ``I(r) = (beta - 1)/(pi alpha^2) (1 + r^2/alpha^2)^-beta`` with
    ``alpha = fwhm / (2 sqrt(2^(1/beta) - 1))``; the support radius leaves
    the fraction ``tail`` of the flux outside:
    ``R = alpha sqrt(tail^(1/(1-beta)) - 1)`` (45.85 px for the defaults).

    Parameters
    ----------
    fwhm : float
        Full width at half maximum, px, 0.5..=1000 (default 2.7).
    beta : float
        Moffat exponent, 1.1..=100 (default 4.5).
    tail : float
        Flux fraction outside the support radius, 1e-15..=0.5 (default
        1e-8). Together the three must give a support radius of at most
        1e12 px.

    Raises
    ------
    ValueError
        A parameter out of its range (the message names it and the range).
    """

    __slots__ = ("_fwhm", "_beta", "_tail", "_alpha", "_norm", "_support")

    def __init__(self, fwhm=2.7, beta=4.5, tail=1e-8):
        f, b, t = _real(fwhm, "fwhm"), _real(beta, "beta"), _real(tail, "tail")
        self._alpha, self._norm, self._support = _native.psf_params(f, b, t)
        self._fwhm, self._beta, self._tail = f, b, t

    fwhm = property(lambda self: self._fwhm, doc="Full width at half maximum, px.")
    beta = property(lambda self: self._beta, doc="Moffat exponent.")
    tail = property(lambda self: self._tail, doc="Flux fraction outside the support radius.")
    alpha = property(lambda self: self._alpha, doc="The scale alpha, px.")
    norm = property(lambda self: self._norm, doc="The peak (beta - 1)/(pi alpha^2), per px^2.")
    support_radius = property(
        lambda self: self._support, doc="R: the radius outside which ``tail`` of the flux lies, px."
    )

    def __repr__(self):
        """``Psf(fwhm=..., beta=..., tail=...)``."""
        return f"Psf(fwhm={self._fwhm!r}, beta={self._beta!r}, tail={self._tail!r})"

    def __eq__(self, other):
        """Equal parameters."""
        if not isinstance(other, Psf):
            return NotImplemented
        return (self._fwhm, self._beta, self._tail) == (other._fwhm, other._beta, other._tail)

    def __hash__(self):
        """The parameters' hash."""
        return hash((self._fwhm, self._beta, self._tail))

    def intensity(self, r):
        """The profile at distance ``r`` from the centre.

        Parameters
        ----------
        r : array_like
            Distances, px.

        Returns
        -------
        numpy.ndarray
            ``I(r)``, flux per px^2, float64.
        """
        r = np.asarray(r, dtype=np.float64)
        return self._norm * (1.0 + r * r / self._alpha**2) ** -self._beta

    def flux_outside(self, r):
        """The fraction of the flux outside radius ``r``.

        Parameters
        ----------
        r : array_like
            Radii, px.

        Returns
        -------
        numpy.ndarray
            ``(1 + r^2/alpha^2)^(1 - beta)``, float64.
        """
        r = np.asarray(r, dtype=np.float64)
        return (1.0 + r * r / self._alpha**2) ** (1.0 - self._beta)

    def pixel_integral(self, cu, cv):
        """The PSF integrated over unit pixels (what the stamps hold).

        Parameters
        ----------
        cu, cv : array_like
            Pixel centres relative to the PSF's centre, px (broadcast
            together): the pixel ``[cu - 1/2, cu + 1/2] x [cv - 1/2, cv + 1/2]``.

        Returns
        -------
        numpy.ndarray
            The integrals, float64, of the broadcast shape (Gauss-Legendre,
            about 1e-16 absolute).

        Raises
        ------
        ValueError
            The arrays do not broadcast.
        """
        try:
            u, v = np.broadcast_arrays(np.asarray(cu, np.float64), np.asarray(cv, np.float64))
        except ValueError as e:
            raise ValueError(f"cu and cv do not broadcast: {e}") from None
        shape = u.shape
        u, v = np.ascontiguousarray(u).ravel(), np.ascontiguousarray(v).ravel()
        out = np.empty(u.shape)
        _native.psf_pixel_integral(self._fwhm, self._beta, self._tail, u, v, out)
        return out.reshape(shape)


class PsfCache:
    """The phase cache: pixel-integrated stamps of a PSF at (P+1)^2 phases.

    Immutable once built; build it once (the expensive part: seconds at
    P = 64, with the GIL released) and share it between sinks and renders.
    Stamp ``(i, j)`` is the PSF centred at phase ``(i/P, j/P)`` of the
    anchor pixel, integrated over each pixel of offsets ``-47..=47``; an
    event blends the four stamps bracketing its phase bilinearly (about
    5e-5 relative from exact integrals at P = 64, falling as 1/P^2).

    Parameters
    ----------
    psf : Psf, optional
        The PSF (default ``Psf()``).
    phases : int
        Phase intervals per axis P, 1..=1024 (default 64: 305 MB of
        stamps; P = 16 is 21 MB).
    threads : int
        Build threads, 0 = every core.

    Raises
    ------
    ValueError
        ``phases`` or ``threads`` out of range, ``psf`` not a :class:`Psf`.
    MemoryError
        The stamps do not fit this machine (found before allocating).
    """

    def __init__(self, psf=None, phases=DEFAULT_PHASES, threads=0):
        psf = Psf() if psf is None else psf
        if not isinstance(psf, Psf):
            raise ValueError(f"psf must be a hipkern.psf.Psf, not {type(psf).__name__}")
        self._psf = psf
        self._native = _native.PsfCache(
            psf.fwhm, psf.beta, psf.tail, _integer(phases, "phases"), _integer(threads, "threads")
        )

    psf = property(lambda self: self._psf, doc="The PSF (a :class:`Psf`).")
    phases = property(lambda self: self._native.phases, doc="Phase intervals per axis, P.")
    nbytes = property(lambda self: self._native.nbytes, doc="Bytes of the stamps.")
    build_seconds = property(lambda self: self._native.build_seconds,
                             doc="Wall time of the build, s.")

    def __repr__(self):
        """``PsfCache(Psf(...), phases=P)``."""
        return f"PsfCache({self._psf!r}, phases={self.phases})"

    def stamp(self, i, j):
        """One stamp.

        Parameters
        ----------
        i, j : int
            x and y phase indices, 0..=P: the PSF centred at ``(i/P, j/P)``
            of the anchor pixel.

        Returns
        -------
        numpy.ndarray
            (95, 95) float64 indexed ``[dy + 47, dx + 47]``: the value of
            pixel ``(anchor_x + dx, anchor_y + dy)``.

        Raises
        ------
        ValueError
            An index beyond 0..=P.
        """
        return self._native.stamp(_integer(i, "i"), _integer(j, "j"))


def as_events(events):
    """Events as the (N, 7) C-contiguous float64 array the sinks take.

    Parameters
    ----------
    events : array_like
        (N, 7) real numbers (float16/32/64 or integers, converted to
        float64) in :data:`EVENT_FIELDS` order, or a 1-D structured array
        with those fields.

    Returns
    -------
    numpy.ndarray
        (N, 7) float64, C order (the input itself when it already is).

    Raises
    ------
    ValueError
        A shape other than (N, 7), or a dtype that is not real numbers.
    """
    a = np.asarray(events)
    if a.dtype.names is not None:
        missing = [f for f in EVENT_FIELDS if f not in a.dtype.names]
        if missing or a.ndim != 1:
            raise ValueError(
                f"events: a structured array must be 1-D with the fields {', '.join(EVENT_FIELDS)}"
                f" (shape {a.shape}, missing {missing})"
            )
        cols = [np.asarray(a[f]) for f in EVENT_FIELDS]
        if not all(c.dtype.kind in "fiu" and c.dtype.itemsize <= 8 for c in cols):
            raise ValueError("events: every field must hold real numbers")
        return np.ascontiguousarray(np.stack(cols, axis=1), dtype=np.float64)
    if a.dtype.kind not in "fiu" or a.dtype.itemsize > 8:
        raise ValueError(f"events has dtype {a.dtype}: need float64 (or another real dtype)")
    if a.ndim != 2 or a.shape[1] != len(EVENT_FIELDS):
        raise ValueError(
            f"events has shape {a.shape}: need (N, 7), columns {', '.join(EVENT_FIELDS)}"
        )
    return np.ascontiguousarray(a, dtype=np.float64)


def star_events(x, y, flux, r=1.0, g=1.0, b=1.0, support=None, *, psf=None):
    """Builds an event array from columns.

    Parameters
    ----------
    x, y : array_like
        Centres, continuous pixel units.
    flux : array_like
        Total fluxes (>= 0).
    r, g, b : array_like
        Colour weights (>= 0); the event deposits ``flux*r`` in R, etc.
    support : array_like, optional
        Support radii, px (> 0); default the PSF's ``support_radius``.
    psf : Psf, optional
        Whose support radius is the default (``Psf()`` when None).

    Returns
    -------
    numpy.ndarray
        (N, 7) float64 events, every column broadcast to one length N.

    Raises
    ------
    ValueError
        The columns do not broadcast to one dimension.
    """
    if support is None:
        support = (Psf() if psf is None else psf).support_radius
    cols = [np.asarray(c, dtype=np.float64) for c in (x, y, flux, r, g, b, support)]
    try:
        cols = np.broadcast_arrays(*cols)
    except ValueError as e:
        raise ValueError(f"event columns do not broadcast: {e}") from None
    if cols[0].ndim > 1:
        raise ValueError(f"event columns broadcast to shape {cols[0].shape}: need 1-D")
    return np.ascontiguousarray(np.stack([np.atleast_1d(c) for c in cols], axis=1))


def _image_array(image, name, width=None, height=None, *, writeable=False):
    """``image`` itself when it is a float64 C-contiguous (height, width, 3)
    array (writeable if asked): one that is written in place."""
    if not isinstance(image, np.ndarray) or image.dtype != np.float64:
        raise ValueError(f"{name} must be a float64 numpy array (height, width, 3)")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{name} has shape {image.shape}: need (height, width, 3)")
    if width is not None and image.shape[:2] != (height, width):
        raise ValueError(
            f"{name} has shape {image.shape}: need (height, width, 3) = ({height}, {width}, 3)"
        )
    if not image.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if writeable and not image.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return image


def _start_image(image, width, height):
    """An image a sink copies: any real array of the sink's shape."""
    a = np.asarray(image)
    if a.dtype.kind not in "fiu" or a.dtype.itemsize > 8:
        raise ValueError(f"image has dtype {a.dtype}: need float64 (height, width, 3)")
    if a.shape != (height, width, 3):
        raise ValueError(
            f"image has shape {a.shape}: need (height, width, 3) = ({height}, {width}, 3)"
        )
    return np.ascontiguousarray(a, dtype=np.float64)


def _cache_of(cache, psf, phases):
    """The cache given, or one built from ``psf`` and ``phases``."""
    if cache is not None:
        if psf is not None or phases is not None:
            raise ValueError("give cache, or psf and phases to build one; not both")
        if not isinstance(cache, PsfCache):
            raise ValueError(f"cache must be a hipkern.psf.PsfCache, not {type(cache).__name__}")
        return cache
    return PsfCache(psf, DEFAULT_PHASES if phases is None else phases)


class Sink:
    """A PSF sink: events in, in any number of calls; the image out.

    The cache is built (or taken) once and, on a device, the image, the
    stamps and every scratch buffer are allocated once, when the sink is
    made; feed events in chunks of any size with :meth:`accumulate`.

    Parameters
    ----------
    width, height : int
        Image size, px, each 1..=2**20.
    cache : PsfCache, optional
        A cache to share; else one is built from ``psf`` and ``phases``.
    psf : Psf, optional
        The PSF of the cache to build (default ``Psf()``).
    phases : int, optional
        Its phase intervals per axis (default 64).
    device : int, optional
        None: the float64 CPU sink. An integer: the device sink on that
        GPU.
    mode : str, optional
        The device sink's mode, one of :data:`MODES` (default
        ``"atomic"``); device sinks only.
    binning : str
        Where the tile modes build their lists, ``"device"`` (default) or
        ``"host"`` (the comparison path, same lists); device sinks only.
    threads : int
        CPU sink threads (0 = every core; the result is bitwise the serial
        one's for any count); CPU sinks only.
    image : array_like, optional
        (height, width, 3) finite real values to start from (copied as
        float64); default black.

    Raises
    ------
    ValueError
        A bad size, mode, binning, thread count or image; an option of the
        other kind of sink; ``cache`` together with ``psf``/``phases``.
    RuntimeError
        No such device, or the ``cpu`` platform (no device code), or a
        device failure.
    MemoryError
        The image does not fit this machine's memory.
    """

    def __init__(self, width, height, *, cache=None, psf=None, phases=None, device=None,
                 mode=None, binning="device", threads=0, image=None):
        width, height = _integer(width, "width"), _integer(height, "height")
        device = _integer(device, "device", allow_none=True)
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode = {mode!r} is unknown (one of {', '.join(MODES)})")
        if binning not in BINNINGS:
            raise ValueError(f"binning = {binning!r} is unknown (one of {', '.join(BINNINGS)})")
        threads = _integer(threads, "threads")
        for name, side in (("width", width), ("height", height)):
            if not 1 <= side <= MAX_IMAGE_SIDE:
                raise ValueError(f"{name} = {side} (each side must be in 1..={MAX_IMAGE_SIDE})")
        # The options of the other kind of sink are refused, not ignored
        # (and before a cache is built for nothing).
        if device is None and (mode is not None or binning != "device"):
            raise ValueError("mode and binning are the device sink's: device=None is the CPU sink")
        if device is not None and threads != 0:
            raise ValueError("threads is the CPU sink's (device=None); a device sink takes none")
        if image is not None:
            image = _start_image(image, width, height)
        self._cache = _cache_of(cache, psf, phases)
        self._sink = _native.PsfSink(self._cache._native, width, height, device, mode, binning,
                                     threads, image)

    cache = property(lambda self: self._cache, doc="The :class:`PsfCache`.")
    width = property(lambda self: self._sink.width, doc="Image width, px.")
    height = property(lambda self: self._sink.height, doc="Image height, px.")
    device = property(lambda self: self._sink.device, doc="The GPU ordinal, None on the CPU.")
    mode = property(lambda self: self._sink.mode, doc="The device mode, None on the CPU.")
    threads = property(lambda self: self._sink.threads, doc="CPU threads (0 on a device).")
    closed = property(lambda self: self._sink.closed, doc="Whether :meth:`close` was called.")

    @property
    def stats(self):
        """Counters so far, a dict: ``chunks``, ``events`` (accepted, all
        paths), ``cached`` (through the cache, touching the image),
        ``direct`` (by the direct path, touching the image), ``outside``
        (no support pixel in the image, skipped), ``contributions``
        (event-pixel pairs added)."""
        return self._sink.stats

    @property
    def chunk_log(self):
        """The device sink's chunks of the cached path, in order, as
        ``(events, mode)`` with mode ``"atomic"``, ``"tile16"`` or
        ``"tile32"`` (how ``"adaptive"`` chose); empty on the CPU."""
        return self._sink.chunk_log

    def __repr__(self):
        """Size, where, and the cache."""
        where = "cpu" if self.device is None else f"device {self.device}, {self.mode}"
        return f"<hipkern.psf.Sink {self.width}x{self.height} ({where}), {self._cache!r}>"

    def __enter__(self):
        """The sink; :meth:`close` on leaving the block."""
        return self

    def __exit__(self, *exc):
        """Closes the sink."""
        self.close()
        return False

    def accumulate(self, events, *, direct=True):
        """Adds events to the image.

        Parameters
        ----------
        events : array_like
            (N, 7) events (see the module docs and :func:`as_events`).
        direct : bool
            Events too large for the cache (supports from 47.5 px) go by
            the exact direct path (default); False refuses them.

        Returns
        -------
        int
            How many events went by the direct path.

        Raises
        ------
        ValueError
            A bad array, or a bad event (named by its index): nothing of
            the call is accumulated. Also a tile-mode chunk beyond the
            device scratch (the chunks before it stay; see the module docs).
        RuntimeError
            A device failure.
        """
        return self._sink.accumulate(as_events(events), bool(direct))

    def image(self, out=None):
        """The image so far (the sink keeps accumulating into its own).

        Parameters
        ----------
        out : numpy.ndarray, optional
            (height, width, 3) float64 C-contiguous array to overwrite
            whole; default a new array.

        Returns
        -------
        numpy.ndarray
            ``out``, or the new array: ``image[iy, ix, c]``.

        Raises
        ------
        ValueError
            ``out`` of another shape, dtype or layout, or read-only.
        """
        if out is None:
            out = np.empty((self.height, self.width, 3))
        else:
            out = _image_array(out, "out", self.width, self.height, writeable=True)
        self._sink.image(out)
        return out

    def set_image(self, image):
        """Replaces the image (the counters stay).

        Parameters
        ----------
        image : array_like
            (height, width, 3) finite real values (copied as float64).

        Raises
        ------
        ValueError
            Another shape or dtype, or a non-finite value.
        """
        self._sink.set_image(_start_image(image, self.width, self.height))

    def reset(self):
        """Back to a black image and zero counters, keeping the buffers.

        Raises
        ------
        RuntimeError
            A device failure.
        """
        self._sink.reset()

    def close(self):
        """Frees the image and any device memory now; later calls raise
        ``ValueError``. Closing twice is harmless."""
        self._sink.close()


def render(events, width=None, height=None, *, psf=None, phases=None, cache=None, device=None,
           mode=None, binning="device", threads=0, direct=True, image=None, return_stats=False):
    """Renders events into an image in one call.

    Parameters
    ----------
    events : array_like
        (N, 7) events (see the module docs).
    width, height : int, optional
        Image size, px; default the size of ``image``.
    psf, phases, cache, device, mode, binning, threads
        As for :class:`Sink`. Pass a :class:`PsfCache` as ``cache`` to
        avoid rebuilding the stamps on every call.
    direct : bool
        Events too large for the cache go by the exact direct path
        (default); False refuses them.
    image : numpy.ndarray, optional
        (height, width, 3) float64 C-contiguous writeable array to
        accumulate into, in place; written only when the whole call
        succeeds.
    return_stats : bool
        Also return the sink's counters (see :attr:`Sink.stats`).

    Returns
    -------
    numpy.ndarray or (numpy.ndarray, dict)
        The (height, width, 3) float64 image (``image`` itself when
        given), and the counters when ``return_stats``.

    Raises
    ------
    ValueError
        Bad input, named; nothing is written.
    RuntimeError
        No such device or the ``cpu`` platform, or a device failure.
    MemoryError
        The image or the cache does not fit this machine's memory.
    """
    events = as_events(events)
    if image is not None:
        if not isinstance(image, np.ndarray) or image.ndim != 3:
            raise ValueError("image must be a (height, width, 3) float64 numpy array")
        h, w = image.shape[:2]
        width = w if width is None else width
        height = h if height is None else height
        image = _image_array(image, "image", _integer(width, "width"),
                             _integer(height, "height"), writeable=True)
    elif width is None or height is None:
        raise ValueError("width and height are needed (or image)")
    with Sink(width, height, cache=cache, psf=psf, phases=phases, device=device, mode=mode,
              binning=binning, threads=threads, image=image) as sink:
        sink.accumulate(events, direct=direct)
        out = sink.image(out=image)
        return (out, sink.stats) if return_stats else out


def compare(image, reference, tol=TOLERANCE):
    """How an image differs from a reference, and the acceptance verdict.

    The terms of ``docs/design/psf.md#acceptance`` (Rust's
    ``HdrImage::compare`` and ``Comparison::accept``): every value finite
    in both, the same zero pattern, ``max_rel < tol`` over the values where
    the reference is nonzero, ``max_abs < tol * peak``, and the R, G, B and
    luminance totals within ``tol`` relative.

    Parameters
    ----------
    image, reference : array_like
        (height, width, 3) floats, the same size.
    tol : float
        The tolerance (default 1e-10, every Rust test's).

    Returns
    -------
    dict
        ``nonfinite``, ``zero_mismatches`` (counts), ``max_abs``,
        ``max_rel``, ``peak`` (the reference's largest magnitude),
        ``flux_rel`` ([R, G, B, Y]), ``accepted`` (bool) and ``failures``
        (None, or the failed terms, ``"; "``-separated).

    Raises
    ------
    ValueError
        Arrays of another dtype or shape, or of different sizes.
    """
    a, b = np.asarray(image), np.asarray(reference)
    for x, name in ((a, "image"), (b, "reference")):
        if x.dtype.kind != "f" or x.ndim != 3 or x.shape[2] != 3:
            raise ValueError(f"{name} has dtype {x.dtype} and shape {x.shape}: "
                             "need a float (height, width, 3) array")
    tol = _real(tol, "tol")
    if a.shape != b.shape:
        raise ValueError(f"images of different sizes: {a.shape} and {b.shape}")
    both = np.isfinite(a) & np.isfinite(b)
    av, bv = a[both], b[both]
    nz = bv != 0
    diff = np.abs(av - bv)
    c = {
        "nonfinite": int(both.size - np.count_nonzero(both)),
        "zero_mismatches": int(np.count_nonzero((av == 0) != (bv == 0))),
        "max_abs": float(diff.max(initial=0.0)),
        "max_rel": float((diff[nz] / np.abs(bv[nz])).max(initial=0.0)),
        "peak": float(np.abs(b[~np.isnan(b)]).max(initial=0.0)),
    }
    # Correctly rounded totals (math.fsum), so a 1e-10 comparison measures
    # the images, not the summation; NaN where a value is not finite.
    if c["nonfinite"]:
        totals = [[math.nan] * 4] * 2
    else:
        totals = []
        for x in (a, b):
            rgb = [math.fsum(x[..., k].ravel()) for k in range(3)]
            totals.append(rgb + [sum(w * t for w, t in zip(LUMA, rgb))])
    c["flux_rel"] = [abs(s - r) / abs(r) if r != 0 else abs(s - r) for s, r in zip(*totals)]
    why = []
    if c["nonfinite"]:
        why.append(f"{c['nonfinite']} non-finite values")
    if c["zero_mismatches"]:
        why.append(f"{c['zero_mismatches']} values zero in one image only")
    if not c["max_rel"] < tol:
        why.append(f"max_rel {c['max_rel']:e} >= {tol:e}")
    if c["max_abs"] > 0 and c["max_abs"] >= tol * c["peak"]:
        why.append(f"max_abs {c['max_abs']:e} >= {tol:e} x peak {c['peak']:e}")
    for name, v in zip("RGBY", c["flux_rel"]):
        if not v <= tol:
            why.append(f"{name} flux relative difference {v:e} > {tol:e}")
    c["accepted"] = not why
    c["failures"] = "; ".join(why) or None
    return c


__all__ = [
    "Psf", "PsfCache", "Sink", "render", "compare", "as_events", "star_events",
    "EVENT_FIELDS", "EVENT_DTYPE", "MODES", "BINNINGS", "CHUNK_EVENTS", "CACHE_RADIUS",
    "STAMP_SIDE", "DEFAULT_PHASES", "MAX_PHASES", "MAX_IMAGE_SIDE", "MAX_DIRECT_SUPPORT",
    "TOLERANCE", "LUMA",
]

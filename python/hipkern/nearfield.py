"""Near-field interaction tables and List 1 for volume-potential FMMs.

For users of volumential (a volume-potential FMM): the near-field table
(every interaction of a box's Lagrange density with the boxes it touches in
a 2:1-balanced quadtree or octree) built here means the same thing as one
built by volumential, and the List 1 evaluator applies it over a tree on
the CPU in float64 or on a GPU. numpy arrays in, numpy arrays out.

- :func:`build_table` builds a table (from its symmetry representatives by
  default, which is far faster than entry by entry) or reads it from
  hipkern's SQLite table cache, storing what it built there;
- :class:`Tree` holds a tree as List 1 needs it (box centres and levels,
  the List 1 lists in CSR form); :func:`uniform_tree` and
  :func:`random_tree` generate 2:1-balanced ones, :meth:`Tree.from_boxtree`
  takes boxtree's arrays, :func:`box_points` gives where a density is
  sampled;
- :func:`evaluate_list1` runs List 1 once (CPU by default, ``device=N`` for
  GPU ``N``); :class:`Evaluator` keeps a table on a GPU and
  :meth:`Evaluator.plan` a tree, for many densities.

Conventions (those of volumential; ``docs/design/nearfield.md`` and
``docs/design/list1.md`` in the repository give the full statement):

- **Nodes.** A box of side ``h`` carries ``q`` Gauss-Legendre nodes per
  axis, ascending, tensor product; the flat node index is
  ``m = sum_k m_k * q**(dim-1-k)`` (axis 0 slowest). The same index names a
  source mode ``s`` and a target point ``t``. ``Table.q_points`` are the
  nodes of the template box ``[0, L]**dim``.
- **Entries.** ``Table.dense()[c, s, t] = T[c, s, t]``, the integral over
  the template source box ``[0, L]**dim`` of the Lagrange basis function of
  node ``s`` times ``G(x_t - y)``, where ``x_t`` is node ``t`` of the target
  box of case ``c``. ``dense().ravel()`` is volumential's ``data``: entry
  id ``c*q**(2*dim) + s*q**dim + t``. ``G``: Laplace ``-ln|r|/(2 pi)`` (2D),
  ``1/(4 pi |r|)`` (3D); Yukawa ``K0(lam |r|)/(2 pi)``,
  ``exp(-lam |r|)/(4 pi |r|)``; constant ``1``; ``r = x - y``.
- **Cases.** The case of a (target, source) pair is the vector
  ``4*(centre_t - centre_s)/h_s`` (integer components in -6..6); case ids
  number the valid vectors in lexicographic order (``Table.case_vectors``);
  ``Table.case_indices[code]`` maps ``code = sum_k (c_k + 6)*13**(dim-1-k)``
  to the id, -1 for no case.
- **List 1.** For target box ``B = target_boxes[i]`` and its node ``t``::

      u[i, t] = sum over S in B's list, in list order, of
                sum_s f[S, s] * (scale(S) * T[case(B, S), s, t] + disp(S) * N_s)

  with ``f[S, s]`` the density at node ``s`` of box ``S``, ``N_s =
  Table.mode_normalizers``, and, for one table of extent ``L`` and
  ``rho = h_S/L``: ``scale = rho**2`` (3D Laplace), ``rho**dim``
  (constant), ``rho`` (Laplace derivatives), and ``disp = 0`` except 2D
  Laplace: ``scale = rho**2``, ``disp = -rho**2 ln(rho)/(2 pi)``. Yukawa
  has no such rule: pass one table per source level ``l``, built at
  ``box_extent = root_extent/2**l`` (``scale = 1``).
- **Arrays.** The density has a row per box of the tree, at its nodes
  (:func:`box_points`); rows of boxes in no list are not read but must be
  finite. The potential has a row per target box, at its nodes.
"""
import math
import numbers
import os

import numpy as np

from . import _native

KERNELS = ("laplace", "constant", "yukawa")
CONTRACTS = ("fast", "exact")
LAYOUTS = ("auto", "dense", "orbit", "fallback")
#: The deepest box level List 1 takes.
MAX_LEVEL = 20
_U32 = 2**32


def _int(name, value, lo=0, hi=2**63 - 1):
    """``value`` as a Python int in ``[lo, hi]``, else ValueError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} = {v}: must be in [{lo}, {hi}]")
    return v


def _real(name, value):
    """``value`` as a Python float (finiteness is checked where it matters)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, not {value!r}")
    return float(value)


def _choice(name, value, choices):
    """``value`` if it is one of the strings ``choices``, else ValueError."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} = {value!r}: expected one of {', '.join(choices)}")
    return value


def _index_array(name, a, ndim=1):
    """An integer array as contiguous uint32 (every value in [0, 2**32))."""
    a = np.asarray(a)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must have an integer dtype, not {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, has shape {a.shape}")
    if a.size and (a.min() < 0 or a.max() >= _U32):
        i = int(np.flatnonzero((a < 0) | (a >= _U32))[0])
        raise ValueError(f"{name}[{i}] = {a.ravel()[i]}: must be in [0, 2**32)")
    return np.array(a, dtype=np.uint32, order="C")


def _real_array(name, a, integers=True):
    """A real array as contiguous float64: floating dtypes up to float64 (exact),
    and integer ones unless ``integers`` is False (a density of ints is a
    mistake more often than not)."""
    a = np.asarray(a)
    ok = np.issubdtype(a.dtype, np.floating) and a.dtype.itemsize <= 8
    ok = ok or (integers and a.dtype != np.bool_ and np.issubdtype(a.dtype, np.integer))
    if not ok:
        kinds = "a real" if integers else "a float64, float32 or float16"
        raise ValueError(f"{name} must have {kinds} dtype, not {a.dtype}")
    return np.array(a, dtype=np.float64, order="C")


def _frozen(a):
    """``a``, made read-only (a Tree's arrays are checked once)."""
    a.setflags(write=False)
    return a


class Table:
    """A near-field interaction table (made by :func:`build_table`).

    Attributes
    ----------
    dim, q : int
        Dimension (2 or 3) and Gauss-Legendre nodes per axis.
    n_modes : int
        ``q**dim``: source modes and target points per case.
    n_cases : int
        Interaction cases: 33 (2D) or 139 (3D).
    self_case : int
        The id of the case of a box with itself (the zero vector).
    box_extent : float
        Side ``L`` of the template source box ``[0, L]**dim``.
    kernel : str
        ``"laplace"``, ``"yukawa"`` or ``"constant"``.
    lam : float or None
        Yukawa's screening parameter.
    derivative : tuple or None
        ``("target", axis)``, ``("source", axis)`` or ``("direction", vector)``.
    symmetry : str
        ``"full"``: built from (and holding) one value per symmetry orbit;
        ``"none"``: built entry by entry.
    loaded : bool
        True when the values were read from the cache, False when built.
    cache : str or None
        The cache file given to :func:`build_table`.
    """

    __slots__ = ("_native", "_info", "cache")

    def __init__(self, native, cache=None):
        # The metadata and small arrays are read once; dense() on demand.
        self._native = native
        self._info = native.info()
        for v in self._info.values():
            if isinstance(v, np.ndarray):
                v.setflags(write=False)
        self.cache = cache

    dim = property(lambda self: self._info["dim"])
    q = property(lambda self: self._info["q"])
    n_modes = property(lambda self: self._info["n_modes"])
    n_cases = property(lambda self: self._info["n_cases"])
    self_case = property(lambda self: self._info["self_case"])
    box_extent = property(lambda self: self._info["extent"])
    kernel = property(lambda self: self._info["kernel"])
    lam = property(lambda self: self._info["lam"])
    symmetry = property(lambda self: self._info["symmetry"])
    loaded = property(lambda self: self._info["loaded"])

    @property
    def derivative(self):
        """None, ``(kind, axis)`` or ``("direction", vector)``."""
        d = self._info["derivative"]
        return None if d is None else (d[0], d[1] if d[0] != "direction" else tuple(d[1]))

    def dense(self):
        """Every entry, ``T[c, s, t]``.

        Returns
        -------
        numpy.ndarray
            float64, shape ``(n_cases, n_modes, n_modes)``, a new array:
            case, source mode, target point (module docs). Its ``ravel()``
            is volumential's flat ``data``. A ``symmetry="full"`` table
            expands its representatives (the same values the evaluators use).
        """
        n = self.n_modes
        return self._native.dense_data().reshape(self.n_cases, n, n)

    @property
    def q_points(self):
        """The template box's nodes, float64 ``(n_modes, dim)``, in ``[0, L]``
        (read-only, as every array attribute)."""
        return self._info["q_points"].reshape(self.n_modes, self.dim)

    @property
    def mode_normalizers(self):
        """``N_s``, the integral of each mode's basis function, ``(n_modes,)``."""
        return self._info["mode_normalizers"]

    @property
    def case_vectors(self):
        """The case vectors in case-id order, int32 ``(n_cases, dim)``."""
        return self._info["case_vectors"].reshape(self.n_cases, self.dim)

    @property
    def case_indices(self):
        """volumential's lookup from case code to case id, int32 ``(13**dim,)``."""
        return self._info["case_indices"]

    @property
    def reduced_entry_ids(self):
        """The orbits' representative entry ids, ascending, uint32
        (``symmetry="full"``; else None): every entry is +-1 times (or, zero
        by symmetry, 0) the value of its orbit's representative, and
        ``dense().ravel()[reduced_entry_ids] == reduced_data``."""
        return self._info.get("reduced_entry_ids")

    @property
    def reduced_data(self):
        """The representatives' values (``symmetry="full"``; else None)."""
        return self._info.get("reduced_data")

    def __repr__(self):
        extra = f", lam={self.lam!r}" if self.lam is not None else ""
        if self.derivative is not None:
            extra += f", derivative={self.derivative!r}"
        return (
            f"Table(kernel={self.kernel!r}, dim={self.dim}, q={self.q}, "
            f"box_extent={self.box_extent!r}{extra}, symmetry={self.symmetry!r}, "
            f"{'loaded from' if self.loaded else 'built'}"
            f"{' cache ' + repr(self.cache) if self.cache else ''})"
        )


def _derivative_args(derivative, dim):
    """(kind, axis, direction) for the native call, from ``derivative``."""
    if derivative is None:
        return None, 0, None
    if not isinstance(derivative, (tuple, list)) or len(derivative) != 2:
        raise ValueError(
            f"derivative = {derivative!r}: expected None, ('target', axis), "
            "('source', axis) or ('direction', vector)"
        )
    kind, arg = derivative
    if kind in ("target", "source"):
        return kind, _int("derivative axis", arg, 0, 2), None
    if kind == "direction":
        v = _real_array("derivative direction", arg)
        if v.shape != (dim,) or not np.isfinite(v).all():
            raise ValueError(
                f"derivative direction {arg!r}: expected {dim} finite components"
            )
        return kind, 0, [float(x) for x in v]
    raise ValueError(
        f"derivative kind {kind!r}: expected 'target', 'source' or 'direction'"
    )


def build_table(
    kernel="laplace",
    dim=3,
    q=3,
    box_extent=1.0,
    *,
    lam=None,
    derivative=None,
    symmetry="full",
    cache=None,
    rebuild=False,
):
    """Build a near-field table, or read it from a table cache.

    Parameters
    ----------
    kernel : {"laplace", "constant", "yukawa"}
        The kernel ``G`` (module docs).
    dim : {2, 3}
        Dimension.
    q : int
        Gauss-Legendre nodes per axis, 1 to 64 (3D at most 15: entry ids
        are 32-bit).
    box_extent : float
        Side ``L`` of the template source box, in [1e-50, 1e50].
    lam : float, optional
        Yukawa's screening parameter (required for, and only for, Yukawa).
    derivative : tuple, optional
        ``("target", axis)`` (d/dx_axis), ``("source", axis)`` (d/dy_axis) or
        ``("direction", vector)`` (sum_k v_k d/dy_k), axes 0-based.
    symmetry : {"full", "none"}
        ``"full"`` computes one value per symmetry orbit and keeps only
        those (3D q=3 Laplace: 2,510 of 101,331 entries; about 30 times
        faster); ``"none"`` computes every entry by quadrature, as
        volumential does. At power-of-two extents both give bitwise the
        same dense table.
    cache : str or os.PathLike, optional
        An SQLite table cache (created if missing). When it holds a table
        of exactly these parameters the table is read from it
        (``Table.loaded`` is True); else the table is built and stored.
    rebuild : bool
        Build even when the cache holds the table, and replace it (the way
        out of a corrupt entry).

    Returns
    -------
    Table

    Raises
    ------
    ValueError
        A bad argument (named), before any work or file; a cache file that
        is no table cache or holds a corrupt entry.
    OSError
        The cache file cannot be opened or written (permissions, disk).
    """
    _choice("kernel", kernel, KERNELS)
    dim = _int("dim", dim)
    q = _int("q", q)
    box_extent = _real("box_extent", box_extent)
    if lam is not None:
        lam = _real("lam", lam)
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam = {lam}: must be finite and positive")
    kind, axis, direction = _derivative_args(derivative, dim)
    _choice("symmetry", symmetry, ("full", "none"))
    if not isinstance(rebuild, (bool, np.bool_)):
        raise ValueError(f"rebuild must be a bool, not {rebuild!r}")
    if cache is not None:
        if not isinstance(cache, (str, bytes, os.PathLike)):
            raise ValueError(f"cache must be a path, not {cache!r}")
        cache = os.fsdecode(os.fspath(cache))
    t = _native.build_table(
        kernel, dim, q, box_extent, lam, kind, axis, direction, symmetry, cache,
        bool(rebuild),
    )
    return Table(t, cache)


class Tree:
    """A quadtree or octree as List 1 input.

    The arrays are copied (read-only) and checked here; that each pair is a
    List 1 pair of a 2:1-balanced tree (touching, sizes in ratio 1/2, 1 or
    2, aligned) is checked by every evaluation, before any work.

    Parameters
    ----------
    centers : array_like, shape (n_boxes, dim)
        Box centres (boxtree's ``box_centers`` is ``(dim, n_boxes)``: pass its
        transpose, or use :meth:`from_boxtree`).
    levels : array_like of int, shape (n_boxes,)
        Box levels, 0 to 20: box ``b`` has side ``root_extent / 2**levels[b]``.
    root_extent : float
        Side of the root box.
    source_starts : array_like of int, shape (n_targets + 1,)
        CSR offsets: the List 1 of target ``i`` is
        ``source_boxes[source_starts[i]:source_starts[i+1]]``.
    source_boxes : array_like of int, shape (n_pairs,)
        Box ids of the List 1 lists, concatenated (each target's own box
        included where it is a source).
    target_boxes : array_like of int, shape (n_targets,), optional
        The target boxes, one output row each; default every box in order.

    Raises
    ------
    ValueError
        A shape, dtype or value that is wrong, named.
    """

    __slots__ = ("centers", "levels", "root_extent", "source_starts",
                 "source_boxes", "target_boxes")

    def __init__(self, centers, levels, root_extent, source_starts,
                 source_boxes, target_boxes=None):
        c = _real_array("centers", centers)
        if c.ndim != 2 or c.shape[1] not in (2, 3):
            raise ValueError(f"centers must have shape (n_boxes, 2 or 3), not {c.shape}")
        if not np.isfinite(c).all():
            raise ValueError("centers holds a value that is not finite")
        n = c.shape[0]
        lv = _index_array("levels", levels)
        if lv.shape != (n,):
            raise ValueError(f"levels has {lv.size} values, centers {n} boxes")
        if lv.size and lv.max() > MAX_LEVEL:
            i = int(np.argmax(lv > MAX_LEVEL))
            raise ValueError(f"levels[{i}] = {lv[i]}: at most {MAX_LEVEL}")
        ext = _real("root_extent", root_extent)
        if not (np.isfinite(ext) and ext > 0):
            raise ValueError(f"root_extent = {ext}: must be finite and positive")
        tb = (np.arange(n, dtype=np.uint32) if target_boxes is None
              else _index_array("target_boxes", target_boxes))
        st = _index_array("source_starts", source_starts)
        sb = _index_array("source_boxes", source_boxes)
        for name, a in (("target_boxes", tb), ("source_boxes", sb)):
            if a.size and a.max() >= n:
                i = int(np.argmax(a >= n))
                raise ValueError(f"{name}[{i}] = {a[i]}: out of range [0, n_boxes = {n})")
        if st.size != tb.size + 1:
            raise ValueError(
                f"source_starts has {st.size} offsets, expected n_targets + 1 = {tb.size + 1}"
            )
        if st[0] != 0 or st[-1] != sb.size or (np.diff(st.astype(np.int64)) < 0).any():
            raise ValueError(
                "source_starts must start at 0, never decrease and end at "
                f"len(source_boxes) = {sb.size}"
            )
        self.centers, self.levels = _frozen(c), _frozen(lv)
        self.root_extent = ext
        self.source_starts, self.source_boxes = _frozen(st), _frozen(sb)
        self.target_boxes = _frozen(tb)

    dim = property(lambda self: self.centers.shape[1], doc="2 or 3.")
    n_boxes = property(lambda self: self.centers.shape[0], doc="Boxes.")
    n_targets = property(lambda self: self.target_boxes.size, doc="Output rows.")
    n_pairs = property(lambda self: self.source_boxes.size, doc="List 1 pairs.")

    @classmethod
    def from_boxtree(cls, tree, traversal):
        """The tree and List 1 of boxtree (volumential's tree).

        Parameters
        ----------
        tree : boxtree.Tree
            With host arrays (``tree.get(queue)``): ``box_centers``
            ``(dim, n)`` (``n`` may be padded past the box count, which
            ``box_levels`` gives), ``box_levels``, ``root_extent``.
        traversal : boxtree.traversal.FMMTraversalInfo
            With host arrays: ``target_boxes``, ``neighbor_source_boxes_starts``,
            ``neighbor_source_boxes_lists`` (List 1).

        Returns
        -------
        Tree
            Every box of ``tree`` (leaves and not): the density has a row
            per box, of which only the List 1 sources are read.

        Raises
        ------
        ValueError
            Arrays of the wrong shape, dtype or values, named.
        """
        levels = np.asarray(tree.box_levels)
        centers = np.asarray(tree.box_centers)
        if centers.ndim != 2 or centers.shape[1] < levels.size:
            raise ValueError(
                f"tree.box_centers has shape {centers.shape}, expected (dim, n_boxes) "
                f"with n_boxes = len(tree.box_levels) = {levels.size}"
            )
        return cls(
            centers[:, :levels.size].T, levels, tree.root_extent,
            traversal.neighbor_source_boxes_starts,
            traversal.neighbor_source_boxes_lists, traversal.target_boxes,
        )

    def _args(self):
        """The arrays as the native calls take them."""
        return (self.dim, self.root_extent, self.centers.ravel(), self.levels,
                self.target_boxes, self.source_starts, self.source_boxes)

    def __repr__(self):
        return (f"Tree(dim={self.dim}, n_boxes={self.n_boxes}, n_targets="
                f"{self.n_targets}, n_pairs={self.n_pairs}, root_extent={self.root_extent!r})")


def _root_lower(root_lower, dim):
    """The root's lower corner as ``dim`` floats (default the origin)."""
    if root_lower is None:
        return [0.0] * dim
    v = _real_array("root_lower", root_lower)
    if v.shape != (dim,) or not np.isfinite(v).all():
        raise ValueError(f"root_lower {root_lower!r}: expected {dim} finite components")
    return [float(x) for x in v]


def _generated(dim, arrays, root_extent):
    """A Tree of a generated tree's arrays (every leaf a target box)."""
    centers, levels, starts, sources = arrays
    return Tree(centers.reshape(-1, dim), levels, root_extent, starts, sources)


def uniform_tree(dim, level, *, root_lower=None, root_extent=1.0):
    """The uniform tree: every leaf at ``level``, with its List 1.

    Parameters
    ----------
    dim : {2, 3}
    level : int
        0 to 20, at most 2**24 leaves.
    root_lower : array_like, optional
        Lower corner of the root box (default the origin).
    root_extent : float
        Side of the root box.

    Returns
    -------
    Tree
        The leaves in Morton order, every leaf a target box whose List 1 is
        every leaf touching it (itself included), ascending.

    Raises
    ------
    ValueError
        A bad argument, named.
    """
    dim = _int("dim", dim)
    level = _int("level", level, 0, 2**32 - 1)
    ext = _real("root_extent", root_extent)
    rl = _root_lower(root_lower, dim) if dim in (2, 3) else []
    return _generated(dim, _native.tree(dim, rl, ext, None, level, 0, 0, 0.0), ext)


def random_tree(dim, seed, max_level, *, min_level=2, attractors=3,
                refine_probability=0.1, root_lower=None, root_extent=1.0):
    """A random adaptive tree, balanced 2:1 across faces, edges and corners.

    The same arguments give the same tree on every platform.

    Parameters
    ----------
    dim : {2, 3}
    seed : int
        Seed of the generator (0 to 2**64 - 1).
    max_level : int
        Deepest level, 1 to 20.
    min_level : int
        Every box above this level is refined.
    attractors : int
        Random points the refinement gathers around (a box is refined when
        one lies within 1.5 box sides of its centre), at most 65536.
    refine_probability : float
        Probability that any other box is refined anyway, in [0, 1].
    root_lower : array_like, optional
        Lower corner of the root box (default the origin).
    root_extent : float
        Side of the root box.

    Returns
    -------
    Tree
        As :func:`uniform_tree`.

    Raises
    ------
    ValueError
        A bad argument, named; a refinement that could grow past 2**24
        leaves (``refine_probability * 2**dim >= 1`` with a deep
        ``max_level``, or a deep ``min_level``).
    """
    dim = _int("dim", dim)
    seed = _int("seed", seed, 0, 2**64 - 1)
    max_level = _int("max_level", max_level, 0, 2**32 - 1)
    min_level = _int("min_level", min_level, 0, 2**32 - 1)
    attractors = _int("attractors", attractors)
    p = _real("refine_probability", refine_probability)
    ext = _real("root_extent", root_extent)
    rl = _root_lower(root_lower, dim) if dim in (2, 3) else []
    # Refinements that could grow without bound would exhaust the machine
    # rather than fail: refused with the uniform tree's limit of 2**24 leaves.
    if dim in (2, 3):
        if dim * min(min_level, max_level) > 24:
            raise ValueError(
                f"min_level = {min_level}: refining every box to it makes more than "
                "2**24 leaves"
            )
        if p * 2**dim >= 1 and dim * max_level > 24:
            raise ValueError(
                f"refine_probability = {p} with max_level = {max_level}: the tree could "
                "grow past 2**24 leaves (keep refine_probability * 2**dim below 1, or "
                "dim * max_level at most 24)"
            )
    if attractors > 2**16:
        raise ValueError(f"attractors = {attractors}: at most 65536")
    arrays = _native.tree(dim, rl, ext, seed, max_level, min_level, attractors, p)
    return _generated(dim, arrays, ext)


def box_points(tree, q):
    """Where a density is sampled: the ``q**dim`` nodes of every box.

    Parameters
    ----------
    tree : Tree
    q : int
        Gauss-Legendre nodes per axis (the table's ``q``).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_boxes, q**dim, dim)``: ``[b, m]`` is node ``m``
        of box ``b`` (node order of the module docs), ``centre - h/2 + x_m``
        with ``x_m`` the Gauss-Legendre nodes on ``[0, h]``.

    Raises
    ------
    ValueError
        ``tree`` not a Tree, ``q`` out of range.
    """
    if not isinstance(tree, Tree):
        raise ValueError(f"tree must be a hipkern.nearfield.Tree, not {type(tree).__name__}")
    q = _int("q", q)
    pts = _native.box_points(tree.dim, tree.root_extent, tree.centers.ravel(),
                             tree.levels, q)
    return pts.reshape(tree.n_boxes, q**tree.dim, tree.dim)


def _tables(table):
    """(list of native tables, per_level) of a Table or a per-level list."""
    if isinstance(table, Table):
        if table.kernel == "yukawa":
            raise ValueError(
                "table: Yukawa tables do not scale with the box size; pass one "
                "table per source level l, built at box_extent = root_extent/2**l"
            )
        return [table], False
    if isinstance(table, (list, tuple)) and table and all(isinstance(t, Table) for t in table):
        first = table[0]
        for i, t in enumerate(table):
            if (t.kernel, t.lam, t.derivative, t.dim, t.q) != (
                    first.kernel, first.lam, first.derivative, first.dim, first.q):
                raise ValueError(f"table[{i}]: {t!r} differs from table[0]: {first!r}")
        return list(table), True
    raise ValueError(
        "table must be a Table, or a non-empty list of Tables (one per source level)"
    )


def _density(density, tree, n_modes):
    """density as flat float64 (n_boxes * n_modes) and the output shape."""
    f = _real_array("density", density, integers=False)
    n = tree.n_boxes
    if f.shape == (n, n_modes):
        shape = (tree.n_targets, n_modes)
    elif f.shape == (n * n_modes,):
        shape = (tree.n_targets * n_modes,)
    else:
        raise ValueError(
            f"density has shape {f.shape}, expected (n_boxes, q**dim) = ({n}, {n_modes}) "
            f"or ({n * n_modes},)"
        )
    bad = ~np.isfinite(f.ravel())
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"density at box {i // n_modes}, node {i % n_modes} is not finite "
            f"({f.ravel()[i]})"
        )
    return f.ravel(), shape


def _device(device):
    """A device ordinal, checked."""
    return _int("device", device, 0, 2**31 - 1)


def evaluate_list1(table, tree, density, *, device=None, contract="fast", layout="auto"):
    """List 1 (the near field) of a density over a tree.

    Parameters
    ----------
    table : Table or list of Table
        One table of a kernel that scales with the box size (Laplace,
        constant and their derivatives; any ``box_extent``), or one per
        source level (``table[l]`` built at ``box_extent =
        tree.root_extent / 2**l``; needed for Yukawa).
    tree : Tree
    density : array_like, float, shape (n_boxes, q**dim) or (n_boxes*q**dim,)
        The density at every box's nodes (:func:`box_points`), finite.
    device : int, optional
        None: the CPU float64 evaluator (the definition). An int: that GPU.
    contract : {"fast", "exact"}
        On a GPU: ``"exact"`` gives bitwise the CPU's result; ``"fast"``
        agrees with it within 1e-13 relative max-norm. A single call (this
        function, :meth:`Evaluator.evaluate`) builds the plan that costs
        least, on the device, and its result is bitwise the CPU's under
        either contract; a :class:`Plan` kept for many densities runs the
        fastest kernel for the tree under ``"fast"``.
    layout : {"auto", "dense", "orbit", "fallback"}
        How the table is held on the GPU. ``"auto"``: the compact ORBIT rows
        for a ``symmetry="full"`` table (the generated fallback for a
        directional derivative), every entry for a ``symmetry="none"`` one.
        Compact layouts of a ``symmetry="none"`` table use each orbit's
        representative value, which may differ from its other entries by
        a few ulps, so "exact" then matches the CPU over those values only.

    Returns
    -------
    numpy.ndarray
        float64: ``u[i, t]`` at node ``t`` of box ``tree.target_boxes[i]``,
        shape ``(n_targets, q**dim)``, or flat ``(n_targets*q**dim,)`` when
        ``density`` is flat.

    Raises
    ------
    ValueError
        A bad argument (named) or tree (a pair that is no List 1 pair of a
        2:1 tree names both boxes), before any work.
    RuntimeError
        No usable device (a ``cpu`` build says so), or the device failed.
    """
    natives, per_level = _tables(table)
    if not isinstance(tree, Tree):
        raise ValueError(f"tree must be a hipkern.nearfield.Tree, not {type(tree).__name__}")
    if natives[0].dim != tree.dim:
        raise ValueError(f"table is {natives[0].dim}D, tree is {tree.dim}D (dim differs)")
    _choice("contract", contract, CONTRACTS)
    _choice("layout", layout, LAYOUTS)
    if device is not None:
        device = _device(device)
    f, shape = _density(density, tree, natives[0].n_modes)
    raw = [t._native for t in natives]
    u = _native.list1(raw, per_level, tree._args(), f, device, layout, contract)
    return u.reshape(shape)


class Evaluator:
    """A table kept on a GPU, for List 1 of many trees and densities.

    Parameters
    ----------
    table : Table or list of Table
        As :func:`evaluate_list1`.
    device : int
        The GPU.
    contract : {"fast", "exact"}
    layout : {"auto", "dense", "orbit", "fallback"}
        As :func:`evaluate_list1`.

    Attributes
    ----------
    layout, contract : str
    device : int
    upload_bytes : int
        Bytes of the table on the device.
    tensor_cores : bool
        Whether the fast contract can use FP64 tensor cores here.

    Raises
    ------
    ValueError
        A bad argument, named.
    RuntimeError
        No usable device (a ``cpu`` build says so), or the device failed.
    """

    __slots__ = ("_native", "_info", "_dim", "_n_modes")

    def __init__(self, table, device=0, *, contract="fast", layout="auto"):
        natives, per_level = _tables(table)
        _choice("contract", contract, CONTRACTS)
        _choice("layout", layout, LAYOUTS)
        device = _device(device)
        self._dim, self._n_modes = natives[0].dim, natives[0].n_modes
        self._native = _native.List1Evaluator(
            [t._native for t in natives], per_level, device, layout, contract
        )
        self._info = self._native.info()

    layout = property(lambda self: self._info["layout"])
    contract = property(lambda self: self._info["contract"])
    device = property(lambda self: self._info["device"])
    upload_bytes = property(lambda self: self._info["upload_bytes"])
    tensor_cores = property(lambda self: self._info["tensor_cores"])

    def _tree(self, tree):
        """``tree`` if it is a Tree of this table's dimension."""
        if not isinstance(tree, Tree):
            raise ValueError(f"tree must be a hipkern.nearfield.Tree, not {type(tree).__name__}")
        if tree.dim != self._dim:
            raise ValueError(f"table is {self._dim}D, tree is {tree.dim}D (dim differs)")
        return tree

    def plan(self, tree):
        """Check a tree, choose its kernel and upload its pairs.

        Parameters
        ----------
        tree : Tree

        Returns
        -------
        Plan

        Raises
        ------
        ValueError
            A bad tree (a pair that is no List 1 pair names both boxes).
        RuntimeError
            The device failed.
        """
        tree = self._tree(tree)
        return Plan(self._native.plan(tree._args()), tree, self._n_modes)

    def evaluate(self, tree, density):
        """List 1 of ``density`` over ``tree`` (planned for this call).

        Parameters
        ----------
        tree : Tree
        density : array_like
            As :func:`evaluate_list1`.

        Returns
        -------
        numpy.ndarray
            As :func:`evaluate_list1`.

        Raises
        ------
        ValueError
            A bad argument or tree, before any work.
        RuntimeError
            The device failed.
        """
        tree = self._tree(tree)
        _density(density, tree, self._n_modes)  # checked before the plan's upload
        return self.plan(tree).evaluate(density)


class Plan:
    """A tree planned on an :class:`Evaluator`'s device (:meth:`Evaluator.plan`).

    Attributes
    ----------
    kernel : str
        The device kernel the contract chose (``grouped``, ``tiled``, ...).
    reason : str
        Why.
    tree : Tree
        The tree it was made for.
    """

    __slots__ = ("_native", "tree", "_n_modes")

    def __init__(self, native, tree, n_modes):
        # Made by Evaluator.plan only.
        self._native, self.tree, self._n_modes = native, tree, n_modes

    kernel = property(lambda self: self._native.kernel()[0])
    reason = property(lambda self: self._native.kernel()[1])

    def evaluate(self, density):
        """List 1 of ``density`` over the planned tree.

        Parameters
        ----------
        density : array_like
            As :func:`evaluate_list1`.

        Returns
        -------
        numpy.ndarray
            As :func:`evaluate_list1`.

        Raises
        ------
        ValueError
            A bad density, before any work.
        RuntimeError
            The device failed.
        """
        f, shape = _density(density, self.tree, self._n_modes)
        return self._native.evaluate(f).reshape(shape)


__all__ = [
    "KERNELS", "CONTRACTS", "LAYOUTS", "MAX_LEVEL", "Table", "Tree", "Evaluator",
    "Plan", "build_table", "uniform_tree", "random_tree", "box_points",
    "evaluate_list1",
]

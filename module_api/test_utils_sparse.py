"""``mx.test_utils``' random sparse arrays, with mxnet 1.9.1's signatures and
distributions (no scipy here: positions are drawn with numpy).

* ``uniform`` csr: ``int(rows * cols * density)`` distinct positions drawn uniformly
  (as scipy's ``sparse.rand`` that mxnet calls), values uniform in [0, 1);
* ``powerlaw`` csr: every row starts with one entry, then row ``r`` gets up to ``2**(r+1)``
  entries from its left, whole rows once the columns run out, until the count is
  used (values in [1.001, 3));
* row_sparse: each row kept with probability ``density`` (or the rows given), values
  uniform in [0, 1).
"""
from __future__ import annotations

import numpy as np
import numpy.random as rnd


def assign_each(the_input, function):
    """``function`` applied to each element of ``the_input`` (a float64 array; a copy
    when ``function`` is None)."""
    values = np.array(the_input)
    if function is None:
        return values
    return np.vectorize(function, otypes=[np.float64])(values).reshape(values.shape)


def assign_each2(input1, input2, function):
    """``function`` applied to each pair of elements of two same-shaped arrays."""
    a, b = np.array(input1), np.array(input2)
    return np.vectorize(function, otypes=[np.float64])(a, b).reshape(a.shape)


def _check_csr_request(rows, cols, density, distribution):
    if not 0 <= density <= 1:
        raise ValueError("density has to be between 0 and 1")
    if rows <= 0 or cols <= 0:
        raise ValueError("num_rows or num_cols should be greater than 0")
    if distribution == "powerlaw" and int(rows * cols * density) < 2 * rows:
        raise ValueError(f"not supported for this density: {density} for this shape "
                         f"({rows}, {cols}) Please keep : num_rows * num_cols * density "
                         f">= 2 * num_rows")


def _uniform_csr_dense(rows, cols, density, dtype, data_init):
    count = int(round(rows * cols * density))
    where = np.sort(rnd.choice(rows * cols, size=count, replace=False))
    dense = np.zeros((rows, cols), dtype=dtype)
    values = rnd.rand(count) if data_init is None else np.full(count, data_init)
    dense.reshape(-1)[where] = values.astype(dtype)
    return dense


def _powerlaw_csr_dense(rows, cols, density, dtype):
    left = int(rows * cols * density)
    dense = np.zeros((rows, cols), dtype=dtype)
    for r in range(rows):                      # no empty row
        dense[r, 0] = 1 + rnd.uniform(0.001, 2)
        left -= 1
        if left <= 0:
            return dense
    width = 2
    for r in range(rows):
        limit = min(cols, width)
        if limit == cols and left > limit:     # the whole row, one value
            dense[r] = 1 + rnd.uniform(0.001, 2)
            left -= limit - 1
            if left <= 0:
                return dense
            continue
        for c in range(1, limit):
            dense[r, c] = 1 + rnd.uniform(0.001, 2)
            left -= 1
            if left <= 0:
                return dense
        width *= 2
    if left > 0:
        raise ValueError(f"not supported for this density: {density} for this shape "
                         f"({rows},{cols})")
    return dense


def _shuffled_within_rows(csr):
    """The same csr array with each row's stored column indices in a random order."""
    from .ndarray import sparse
    indptr = csr.indptr.asnumpy()
    indices, data = csr.indices.asnumpy(), csr.data.asnumpy()
    for r in range(len(indptr) - 1):
        order = rnd.permutation(indptr[r + 1] - indptr[r]) + indptr[r]
        indices[indptr[r]:indptr[r + 1]] = indices[order]
        data[indptr[r]:indptr[r + 1]] = data[order]
    return sparse.csr_matrix((data, indices, indptr), shape=csr.shape, dtype=csr.dtype,
                             ctx=csr.context)


def rand_sparse_ndarray(shape, stype, density=None, dtype=None, distribution=None,
                        data_init=None, rsp_indices=None, modifier_func=None,
                        shuffle_csr_indices=False, ctx=None):
    """A random csr or row_sparse array, and its parts.

    Parameters
    ----------
    shape : tuple of int
    stype : str
        ``'csr'`` (2-D) or ``'row_sparse'``.
    density : float, optional
        The stored fraction (random in [0, 1) when not given).
    dtype : numpy dtype, optional
        float32 when not given.
    distribution : str, optional
        ``'uniform'`` (the default) or, for csr, ``'powerlaw'``.
    data_init : float, optional
        Every stored value set to this.
    rsp_indices : array of int, optional
        The rows a row_sparse array stores.
    modifier_func : callable, optional
        Applied to each stored value of a row_sparse array.
    shuffle_csr_indices : bool
        Store each csr row's column indices in a random order.
    ctx : Context, optional

    Returns
    -------
    tuple
        ``(array, (indptr, indices, data))`` for csr, ``(array, (values, row
        indices))`` for row_sparse, as mxnet's.
    """
    from .ndarray import sparse, zeros
    from .array_checks import default_context
    ctx = ctx or default_context()
    density = rnd.rand() if density is None else density
    dtype = np.float32 if dtype is None else dtype
    distribution = distribution or "uniform"
    if stype == "row_sparse":
        if distribution != "uniform":
            raise ValueError(f"Distribution {distribution} not supported for row_sparse")
        rows = np.asarray(rsp_indices) if rsp_indices is not None else \
            np.flatnonzero(rnd.rand(shape[0]) < density)
        if rows.shape[0] == 0:
            return (zeros(shape, stype="row_sparse", dtype=dtype, ctx=ctx),
                    (np.array([], dtype=dtype), np.array([])))
        values = rnd.rand(rows.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            values.fill(data_init)
        if modifier_func is not None:
            values = assign_each(values, modifier_func)
        arr = sparse.row_sparse_array((values, rows), shape=shape, dtype=dtype, ctx=ctx)
        return arr, (values, rows)
    if stype != "csr":
        raise ValueError(f"unknown storage type {stype!r}: 'csr' or 'row_sparse'")
    if len(shape) != 2:
        raise ValueError(f"a csr array is 2-D, got shape {tuple(shape)}")
    _check_csr_request(shape[0], shape[1], density, distribution)
    if distribution == "uniform":
        dense = _uniform_csr_dense(shape[0], shape[1], density, dtype, data_init)
    elif distribution == "powerlaw":
        dense = _powerlaw_csr_dense(shape[0], shape[1], density, dtype)
    else:
        raise ValueError(f"Distribution not supported: {distribution}")
    csr = sparse.csr_matrix(dense, dtype=dtype, ctx=ctx)
    if shuffle_csr_indices and distribution == "uniform":
        csr = _shuffled_within_rows(csr)
    return csr, (csr.indptr, csr.indices, csr.data)


def create_sparse_array(shape, stype, data_init=None, rsp_indices=None, dtype=None,
                        modifier_func=None, density=0.5, shuffle_csr_indices=False):
    """A random sparse array (:func:`rand_sparse_ndarray` without its parts); a
    row_sparse one stores ``rsp_indices`` (sorted) when given."""
    if stype not in ("row_sparse", "csr"):
        raise AssertionError("Unknown storage type: " + str(stype))
    if stype == "row_sparse" and rsp_indices is not None:
        rsp_indices = np.sort(np.asarray(rsp_indices))
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, dtype=dtype,
                                 data_init=data_init, rsp_indices=rsp_indices,
                                 modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices)
    return arr


def create_sparse_array_zd(shape, stype, density, data_init=None, rsp_indices=None,
                           dtype=None, modifier_func=None, shuffle_csr_indices=False):
    """:func:`create_sparse_array` where a row_sparse array stores only ``rsp_indices``
    (none when not given: density 0)."""
    if stype == "row_sparse":
        density = 0.0
        if rsp_indices is not None and len(rsp_indices) > shape[0]:
            raise AssertionError(f"{len(rsp_indices)} row indices for {shape[0]} rows")
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices,
                               dtype=dtype, modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)

"""How a batch is cut over contexts: mxnet 1.9.1's ``_split_input_slice``.

One rule for both sides of the import flow: the runtime's executor group
slices each batch by it, and ahead-of-time compiling (``aot.py``) compiles
the per-context shapes it gives.
"""
from __future__ import annotations


def split_input_slice(batch_size, work_load_list):
    """Get input slice from the input shape (mxnet 1.9.1 ``executor_manager``).

    Each device gets ``round(w * batch_size / sum(w))`` samples (Python 3
    rounding), the shortfall goes to the last device, and a device left with
    no sample raises ``ValueError('Too many slices. Some splits are empty.')``.

    Parameters
    ----------
    batch_size : int
        The number of samples in a mini-batch.
    work_load_list : list of float or int
        The work load of each device, in the order of the contexts.

    Returns
    -------
    list of slice
    """
    total = sum(work_load_list)
    counts = [round(share * batch_size / total) for share in work_load_list]
    counts[-1] += max(0, batch_size - sum(counts))      # rounding's shortfall: the last device
    slices, begin = [], 0
    for count in counts:
        begin = min(begin, batch_size)
        end = min(begin + count, batch_size)
        if end <= begin:
            raise ValueError('Too many slices. Some splits are empty.')
        slices.append(slice(int(begin), int(end)))
        begin = end
    return slices

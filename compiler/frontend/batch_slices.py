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
    total_work_load = sum(work_load_list)
    batch_num_list = [round(work_load * batch_size / total_work_load)
                      for work_load in work_load_list]
    batch_num_sum = sum(batch_num_list)
    if batch_num_sum < batch_size:
        batch_num_list[-1] += batch_size - batch_num_sum
    slices = []
    end = 0
    for batch_num in batch_num_list:
        begin = int(min((end, batch_size)))
        end = int(min((begin + batch_num, batch_size)))
        if begin >= end:
            raise ValueError('Too many slices. Some splits are empty.')
        slices.append(slice(begin, end))
    return slices

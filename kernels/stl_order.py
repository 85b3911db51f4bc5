"""The orders libstdc++'s unstable algorithms leave equal elements in.

PaddlePaddle's CPU detection kernels rank boxes with std::sort, std::nth_element and
std::partial_sort, whose arrangement of elements that compare equal (boxes with the same
score) is not specified by the standard but is fixed by GCC's implementation
(bits/stl_algo.h, bits/stl_heap.h: introsort with median-of-three pivots and a final
insertion sort, introselect, heap select plus heap sort). The functions here follow those
algorithms step for step, on a Python list `seq` of items ordered by `less(a, b)` (the
kernel's comparator, e.g. `score[a] > score[b]`), so that ties come out where GCC puts
them. They run on the host, in Python; callers use them only when ties can matter and take
a numpy sort otherwise (with distinct keys every correct algorithm gives the same order).
"""
from __future__ import annotations

_THRESHOLD = 16   # std::__introsort_loop's _S_threshold


def _lg(n: int) -> int:
    return n.bit_length() - 1


def _move_median_to_first(seq, result, a, b, c, less):
    if less(seq[a], seq[b]):
        if less(seq[b], seq[c]):
            pick = b
        elif less(seq[a], seq[c]):
            pick = c
        else:
            pick = a
    elif less(seq[a], seq[c]):
        pick = a
    elif less(seq[b], seq[c]):
        pick = c
    else:
        pick = b
    seq[result], seq[pick] = seq[pick], seq[result]


def _unguarded_partition(seq, first, last, pivot, less):
    while True:
        while less(seq[first], seq[pivot]):
            first += 1
        last -= 1
        while less(seq[pivot], seq[last]):
            last -= 1
        if not first < last:
            return first
        seq[first], seq[last] = seq[last], seq[first]
        first += 1


def _partition_pivot(seq, first, last, less):
    mid = first + (last - first) // 2
    _move_median_to_first(seq, first, first + 1, mid, last - 1, less)
    return _unguarded_partition(seq, first + 1, last, first, less)


def _unguarded_linear_insert(seq, last, less):
    val = seq[last]
    nxt = last - 1
    while less(val, seq[nxt]):
        seq[last] = seq[nxt]
        last = nxt
        nxt -= 1
    seq[last] = val


def _insertion_sort(seq, first, last, less):
    if first == last:
        return
    for i in range(first + 1, last):
        if less(seq[i], seq[first]):
            val = seq[i]
            seq[first + 1:i + 1] = seq[first:i]
            seq[first] = val
        else:
            _unguarded_linear_insert(seq, i, less)


def _push_heap(seq, base, hole, top, value, less):
    parent = (hole - 1) // 2
    while hole > top and less(seq[base + parent], value):
        seq[base + hole] = seq[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    seq[base + hole] = value


def _adjust_heap(seq, base, hole, length, value, less):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(seq[base + child], seq[base + child - 1]):
            child -= 1
        seq[base + hole] = seq[base + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        seq[base + hole] = seq[base + child - 1]
        hole = child - 1
    _push_heap(seq, base, hole, top, value, less)


def _make_heap(seq, first, last, less):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(seq, first, parent, length, seq[first + parent], less)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(seq, first, last, result, less):
    value = seq[result]
    seq[result] = seq[first]
    _adjust_heap(seq, first, 0, last - first, value, less)


def _heap_select(seq, first, middle, last, less):
    _make_heap(seq, first, middle, less)
    for i in range(middle, last):
        if less(seq[i], seq[first]):
            _pop_heap(seq, first, middle, i, less)


def _sort_heap(seq, first, last, less):
    while last - first > 1:
        last -= 1
        _pop_heap(seq, first, last, last, less)


def partial_sort(seq: list, middle: int, less, last: int | None = None) -> None:
    """std::partial_sort(seq.begin(), seq.begin() + middle, seq.begin() + last), in place."""
    last = len(seq) if last is None else last
    _heap_select(seq, 0, middle, last, less)
    _sort_heap(seq, 0, middle, less)


def _introsort_loop(seq, first, last, depth, less):
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_select(seq, first, last, last, less)
            _sort_heap(seq, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(seq, first, last, less)
        _introsort_loop(seq, cut, last, depth, less)
        last = cut


def sort(seq: list, less) -> None:
    """std::sort over the whole list, in place."""
    n = len(seq)
    if n == 0:
        return
    _introsort_loop(seq, 0, n, 2 * _lg(n), less)
    if n > _THRESHOLD:
        _insertion_sort(seq, 0, _THRESHOLD, less)
        for i in range(_THRESHOLD, n):
            _unguarded_linear_insert(seq, i, less)
    else:
        _insertion_sort(seq, 0, n, less)


def nth_element(seq: list, nth: int, less) -> None:
    """std::nth_element(seq.begin(), seq.begin() + nth, seq.end()), in place."""
    first, last = 0, len(seq)
    if first == last or nth == last:
        return
    depth = 2 * _lg(last - first)
    while last - first > 3:
        if depth == 0:
            _heap_select(seq, first, nth + 1, last, less)
            seq[first], seq[nth] = seq[nth], seq[first]
            return
        depth -= 1
        cut = _partition_pivot(seq, first, last, less)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(seq, first, last, less)

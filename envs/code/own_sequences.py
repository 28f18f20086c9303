"""Our own code tasks about lists, numbers and grids (see ``own_tasks.py``)."""

from __future__ import annotations

SEQUENCE_TASKS: list[tuple[str, list[tuple], list[tuple]]] = [
    (
        '''def running_max(xs: list[int]) -> list[int]:
    """Return a list whose i-th item is the largest of xs[0..i].

    >>> running_max([1, 3, 2, 5])
    [1, 3, 3, 5]
    """
    out, best = [], None
    for x in xs:
        best = x if best is None or x > best else best
        out.append(best)
    return out
''',
        [([1, 3, 2, 5],), ([],)],
        [([5, 4, 3],), ([-2, -5, -1],), ([7],), ([0, 0, 1, 0],), ([3, 9, 2, 9, 10],)],
    ),
    (
        '''def merge_intervals(intervals: list[list[int]]) -> list[list[int]]:
    """Merge overlapping closed intervals [start, end]; return them sorted by start.
    Intervals that touch ([1, 2] and [2, 3]) are merged.

    >>> merge_intervals([[1, 3], [2, 6], [8, 10]])
    [[1, 6], [8, 10]]
    """
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
''',
        [([[1, 3], [2, 6], [8, 10]],)],
        [
            ([],),
            ([[5, 6], [1, 2]],),
            ([[1, 2], [2, 3]],),
            ([[1, 10], [2, 3], [4, 5]],),
            ([[3, 3]],),
        ],
    ),
    (
        '''def second_largest(xs: list[int]) -> int | None:
    """The second largest *distinct* value, or None when there are fewer than two.

    >>> second_largest([4, 1, 4, 3])
    3
    """
    distinct = sorted(set(xs))
    return distinct[-2] if len(distinct) >= 2 else None
''',
        [([4, 1, 4, 3],), ([2],)],
        [([],), ([5, 5, 5],), ([-1, -2],), ([1, 2, 3, 4, 5],), ([9, 8, 9, 8],)],
    ),
    (
        '''def chunk(xs: list, size: int) -> list[list]:
    """Split xs into consecutive chunks of length size (the last may be shorter).

    >>> chunk([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    return [xs[i : i + size] for i in range(0, len(xs), size)]
''',
        [([1, 2, 3, 4, 5], 2)],
        [([], 3), ([1, 2, 3], 3), ([1, 2, 3], 5), (["a", "b", "c", "d"], 1), ([1, 2, 3, 4], 2)],
    ),
    (
        '''def flatten(nested: list) -> list:
    """Flatten arbitrarily nested lists (not tuples or strings) into one list.

    >>> flatten([1, [2, [3, 4]], 5])
    [1, 2, 3, 4, 5]
    """
    out: list = []
    for x in nested:
        if isinstance(x, list):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out
''',
        [([1, [2, [3, 4]], 5],)],
        [([],), ([[[]]],), ([(1, 2), [3]],), (["ab", ["cd"]],), ([[1], [[2]], [[[3]]]],)],
    ),
    (
        '''def primes_up_to(n: int) -> list[int]:
    """All primes <= n, in increasing order.

    >>> primes_up_to(10)
    [2, 3, 5, 7]
    """
    if n < 2:
        return []
    sieve = [True] * (n + 1)
    sieve[0] = sieve[1] = False
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = [False] * len(range(i * i, n + 1, i))
    return [i for i, p in enumerate(sieve) if p]
''',
        [(10,)],
        [(0,), (1,), (2,), (30,), (97,), (100,)],
    ),
    (
        '''def gcd_list(xs: list[int]) -> int:
    """The greatest common divisor of a non-empty list of integers (always >= 0).

    >>> gcd_list([12, 18, 24])
    6
    """
    from math import gcd

    g = 0
    for x in xs:
        g = gcd(g, x)
    return g
''',
        [([12, 18, 24],)],
        [([7],), ([0, 5],), ([-4, 6],), ([17, 34, 51],), ([0, 0],), ([9, 28],)],
    ),
    (
        '''def transpose(matrix: list[list[int]]) -> list[list[int]]:
    """Transpose a rectangular matrix given as a list of rows.

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    return [list(col) for col in zip(*matrix)]
''',
        [([[1, 2, 3], [4, 5, 6]],)],
        [([],), ([[1]],), ([[1, 2]],), ([[1], [2], [3]],), ([[1, 2], [3, 4]],)],
    ),
    (
        '''def two_sum(nums: list[int], target: int) -> tuple[int, int] | None:
    """Indices (i, j), i < j, of the first pair (smallest j, then smallest i) adding up to
    target, or None.

    >>> two_sum([2, 7, 11, 15], 9)
    (0, 1)
    """
    seen: dict[int, int] = {}
    for j, x in enumerate(nums):
        if target - x in seen:
            return (seen[target - x], j)
        seen.setdefault(x, j)
    return None
''',
        [([2, 7, 11, 15], 9)],
        [([], 1), ([1, 2], 4), ([3, 3], 6), ([1, 5, 1, 5], 6), ([-1, 0, 1], 0), ([0, 4, 3, 0], 0)],
    ),
    (
        '''def matrix_spiral(m: list[list[int]]) -> list[int]:
    """The items of a rectangular matrix in clockwise spiral order from the top-left.

    >>> matrix_spiral([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    [1, 2, 3, 6, 9, 8, 7, 4, 5]
    """
    out: list[int] = []
    m = [row[:] for row in m]
    while m:
        out.extend(m.pop(0))
        m = [list(r) for r in zip(*m)][::-1]
    return out
''',
        [([[1, 2, 3], [4, 5, 6], [7, 8, 9]],)],
        [([],), ([[1]],), ([[1, 2, 3]],), ([[1], [2], [3]],), ([[1, 2], [3, 4], [5, 6]],)],
    ),
    (
        '''def count_islands(grid: list[str]) -> int:
    """Count groups of '#' cells connected up/down/left/right in a grid of '#' and '.'.

    >>> count_islands(["#.#", "#..", "..#"])
    3
    """
    seen: set[tuple[int, int]] = set()
    count = 0
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch != "#" or (r, c) in seen:
                continue
            count += 1
            stack = [(r, c)]
            while stack:
                y, x = stack.pop()
                if (y, x) in seen or not (0 <= y < len(grid) and 0 <= x < len(grid[y])):
                    continue
                if grid[y][x] != "#":
                    continue
                seen.add((y, x))
                stack += [(y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)]
    return count
''',
        [(["#.#", "#..", "..#"],)],
        [
            ([],),
            (["...."],),
            (["####"],),
            (["#.", ".#"],),
            (["##.", ".##", "..#"],),
            (["#.#.#", ".....", "#.#.#"],),
        ],
    ),
    (
        '''def dedupe_keep_order(xs: list) -> list:
    """Drop repeated items, keeping the first occurrence of each (items are hashable).

    >>> dedupe_keep_order([3, 1, 3, 2, 1])
    [3, 1, 2]
    """
    seen: set = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
''',
        [([3, 1, 3, 2, 1],)],
        [([],), (["a", "A", "a"],), ([1, 1.0, True],), ([(1, 2), (1, 2), (2, 1)],), ([0, -0],)],
    ),
    (
        '''def mean_median_mode(xs: list[int]) -> tuple[float, float, int]:
    """(mean, median, mode) of a non-empty list; the mode is the smallest most common value.

    >>> mean_median_mode([1, 2, 2, 3, 4])
    (2.4, 2.0, 2)
    """
    s = sorted(xs)
    n = len(s)
    median = float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    counts: dict[int, int] = {}
    for x in s:
        counts[x] = counts.get(x, 0) + 1
    mode = min(counts, key=lambda k: (-counts[k], k))
    return (sum(s) / n, median, mode)
''',
        [([1, 2, 2, 3, 4],)],
        [([5],), ([1, 2],), ([3, 1, 2, 3, 1],), ([-1, -1, 0, 10],), ([7, 7, 7, 7],)],
    ),
    (
        '''def pascal_row(n: int) -> list[int]:
    """Row n of Pascal's triangle (row 0 is [1]).

    >>> pascal_row(4)
    [1, 4, 6, 4, 1]
    """
    row = [1]
    for _ in range(n):
        row = [a + b for a, b in zip([0] + row, row + [0])]
    return row
''',
        [(4,)],
        [(0,), (1,), (2,), (10,), (30,)],
    ),
    (
        '''def balance_after(transactions: list[tuple[str, int]], start: int) -> int | None:
    """Apply ("deposit", n) and ("withdraw", n) in order to a balance; return None as soon as a
    withdrawal would make it negative. Unknown kinds raise ValueError.

    >>> balance_after([("deposit", 5), ("withdraw", 3)], 0)
    2
    """
    bal = start
    for kind, n in transactions:
        if kind == "deposit":
            bal += n
        elif kind == "withdraw":
            if n > bal:
                return None
            bal -= n
        else:
            raise ValueError(kind)
    return bal
''',
        [([("deposit", 5), ("withdraw", 3)], 0)],
        [
            ([], 7),
            ([("withdraw", 1)], 0),
            ([("withdraw", 5)], 5),
            ([("deposit", 1)] * 3, -2),
            ([("withdraw", 2), ("deposit", 100)], 1),
            ([("bonus", 1)], 0),
        ],
    ),
]

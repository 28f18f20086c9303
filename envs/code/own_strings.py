"""Our own code tasks about strings and parsing (see ``own_tasks.py``)."""

from __future__ import annotations

STRING_TASKS: list[tuple[str, list[tuple], list[tuple]]] = [
    (
        '''def rle_encode(s: str) -> list[tuple[str, int]]:
    """Run-length encode a string as (character, count) tuples.

    >>> rle_encode("aaab")
    [('a', 3), ('b', 1)]
    """
    out: list[tuple[str, int]] = []
    for ch in s:
        if out and out[-1][0] == ch:
            out[-1] = (ch, out[-1][1] + 1)
        else:
            out.append((ch, 1))
    return out
''',
        [("aaab",), ("",)],
        [("abc",), ("zzzz",), ("aabbaa",), ("x",), ("  !!",)],
    ),
    (
        '''def is_balanced(s: str) -> bool:
    """True if every bracket in s ((), [], {}) is closed in the right order; other characters
    are ignored.

    >>> is_balanced("(a[b]{c})")
    True
    """
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack
''',
        [("(a[b]{c})",), ("(]",)],
        [("",), ("((",), ("())",), ("{[()()]}",), ("]",), ("a(b)c)",), ("([)]",)],
    ),
    (
        '''def word_frequencies(text: str) -> dict[str, int]:
    """Count words, case-insensitively; words are runs of letters (a-z) only.

    >>> word_frequencies("The cat, the HAT.")
    {'the': 2, 'cat': 1, 'hat': 1}
    """
    import re

    counts: dict[str, int] = {}
    for w in re.findall(r"[a-z]+", text.lower()):
        counts[w] = counts.get(w, 0) + 1
    return counts
''',
        [("The cat, the HAT.",)],
        [("",), ("a a a",), ("it's 4 o'clock",), ("Hello\\nhello\\tHELLO",), ("x1y2z",)],
    ),
    (
        '''def roman_to_int(s: str) -> int:
    """Convert a Roman numeral (I, V, X, L, C, D, M; subtractive forms allowed) to an int.

    >>> roman_to_int("XIV")
    14
    """
    vals = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = vals[ch]
        total += -v if i + 1 < len(s) and vals[s[i + 1]] > v else v
    return total
''',
        [("XIV",), ("III",)],
        [("MCMXCIV",), ("IV",), ("XL",), ("MMXXIV",), ("CDXLIV",), ("I",)],
    ),
    (
        '''def int_to_base(n: int, base: int) -> str:
    """Write a non-negative integer in a base from 2 to 16 with digits 0-9a-f.

    >>> int_to_base(255, 16)
    'ff'
    """
    digits = "0123456789abcdef"
    if n == 0:
        return "0"
    out = ""
    while n:
        n, r = divmod(n, base)
        out = digits[r] + out
    return out
''',
        [(255, 16), (5, 2)],
        [(0, 10), (0, 2), (1, 2), (100, 7), (4095, 16), (10, 10), (123456789, 3)],
    ),
    (
        '''def caesar(text: str, shift: int) -> str:
    """Shift each ASCII letter by shift places in the alphabet, keeping case; leave other
    characters alone. shift may be negative or larger than 26.

    >>> caesar("abc XYZ", 2)
    'cde ZAB'
    """
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + shift) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + shift) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)
''',
        [("abc XYZ", 2)],
        [("", 5), ("Hello, World!", 13), ("abc", -1), ("abc", 52), ("Zz", 27), ("é1", 3)],
    ),
    (
        '''def is_anagram(a: str, b: str) -> bool:
    """True if a and b use the same letters the same number of times, ignoring case and
    spaces.

    >>> is_anagram("Dormitory", "dirty room")
    True
    """
    def key(s: str) -> list[str]:
        return sorted(s.replace(" ", "").lower())

    return key(a) == key(b)
''',
        [("Dormitory", "dirty room"), ("abc", "abd")],
        [("", ""), ("a", ""), ("Listen", "Silent"), ("aab", "abb"), ("a b c", "cba")],
    ),
    (
        '''def digit_sum(n: int) -> int:
    """Repeatedly sum the decimal digits of |n| until one digit is left.

    >>> digit_sum(9875)
    2
    """
    n = abs(n)
    while n >= 10:
        n = sum(int(d) for d in str(n))
    return n
''',
        [(9875,)],
        [(0,), (9,), (10,), (-38,), (999999999999,), (123456789,)],
    ),
    (
        '''def snake_to_camel(name: str) -> str:
    """Convert snake_case to camelCase; leading/trailing/double underscores are dropped.

    >>> snake_to_camel("hello_big_world")
    'helloBigWorld'
    """
    parts = [p for p in name.split("_") if p]
    if not parts:
        return ""
    return parts[0].lower() + "".join(p[:1].upper() + p[1:].lower() for p in parts[1:])
''',
        [("hello_big_world",)],
        [("",), ("x",), ("_private_name",), ("a__b",), ("ALL_CAPS",), ("trailing_",)],
    ),
    (
        '''def compress_ranges(xs: list[int]) -> str:
    """Describe sorted distinct integers as comma-separated ranges: runs of 3 or more become
    "a-b", shorter runs are listed.

    >>> compress_ranges([1, 2, 3, 5, 7, 8, 9, 10])
    '1-3,5,7-10'
    """
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{xs[i]}-{xs[j]}")
        else:
            out.extend(str(x) for x in xs[i : j + 1])
        i = j + 1
    return ",".join(out)
''',
        [([1, 2, 3, 5, 7, 8, 9, 10],)],
        [([],), ([4],), ([1, 2],), ([-3, -2, -1, 0],), ([1, 3, 5],), ([1, 2, 4, 5, 6],)],
    ),
    (
        '''def valid_ipv4(s: str) -> bool:
    """True for a dotted IPv4 address: four decimal parts 0-255, no leading zeros (except
    "0" itself), no signs or spaces.

    >>> valid_ipv4("192.168.0.1")
    True
    """
    parts = s.split(".")
    if len(parts) != 4:
        return False
    for p in parts:
        if not p.isdigit() or not p.isascii() or (len(p) > 1 and p[0] == "0") or int(p) > 255:
            return False
    return True
''',
        [("192.168.0.1",), ("256.1.1.1",)],
        [
            ("",),
            ("1.2.3",),
            ("01.2.3.4",),
            ("0.0.0.0",),
            ("1.2.3.4 ",),
            ("255.255.255.255",),
            ("1.2.-3.4",),
            ("1..2.3",),
        ],
    ),
    (
        '''def longest_common_prefix(words: list[str]) -> str:
    """The longest prefix shared by every word ("" for an empty list).

    >>> longest_common_prefix(["flower", "flow", "flight"])
    'fl'
    """
    if not words:
        return ""
    prefix = words[0]
    for w in words[1:]:
        while not w.startswith(prefix):
            prefix = prefix[:-1]
    return prefix
''',
        [(["flower", "flow", "flight"],)],
        [([],), (["alone"],), (["a", "b"],), (["same", "same"],), (["", "x"],), (["ab", "abc"],)],
    ),
    (
        '''def parse_duration(s: str) -> int:
    """Seconds in a duration like "1h30m", "45s" or "2h5s" (units h, m, s, each at most once,
    in that order); "" is 0.

    >>> parse_duration("1h30m")
    5400
    """
    import re

    m = re.fullmatch(r"(?:(\\d+)h)?(?:(\\d+)m)?(?:(\\d+)s)?", s)
    if m is None:
        raise ValueError(f"bad duration {s!r}")
    h, mi, se = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + se
''',
        [("1h30m",), ("45s",)],
        [("",), ("2h5s",), ("0h0m0s",), ("10m",), ("100h",), ("1h1m1s",), ("5x",), ("1m1h",)],
    ),
    (
        '''def bracket_depth(s: str) -> int:
    """The deepest nesting of round brackets in s (assume they are balanced).

    >>> bracket_depth("(a(b)(c(d)))")
    3
    """
    depth = best = 0
    for ch in s:
        if ch == "(":
            depth += 1
            best = max(best, depth)
        elif ch == ")":
            depth -= 1
    return best
''',
        [("(a(b)(c(d)))",)],
        [("",), ("abc",), ("()",), ("()()()",), ("((()))(())",)],
    ),
    (
        '''def version_compare(a: str, b: str) -> int:
    """Compare dotted version strings numerically: -1 if a < b, 0 if equal, 1 if a > b.
    Missing parts count as 0 ("1.0" == "1").

    >>> version_compare("1.10", "1.9")
    1
    """
    pa = [int(x) for x in a.split(".")]
    pb = [int(x) for x in b.split(".")]
    n = max(len(pa), len(pb))
    pa += [0] * (n - len(pa))
    pb += [0] * (n - len(pb))
    return (pa > pb) - (pa < pb)
''',
        [("1.10", "1.9")],
        [("1.0", "1"), ("1.2.3", "1.2.4"), ("2", "10"), ("0.0.1", "0.0.1"), ("3.0.0.1", "3")],
    ),
    (
        '''def group_anagrams(words: list[str]) -> list[list[str]]:
    """Group words that are anagrams of each other; groups in order of first appearance,
    words in each group in input order.

    >>> group_anagrams(["eat", "tea", "tan", "ate", "nat", "bat"])
    [['eat', 'tea', 'ate'], ['tan', 'nat'], ['bat']]
    """
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault("".join(sorted(w)), []).append(w)
    return list(groups.values())
''',
        [(["eat", "tea", "tan", "ate", "nat", "bat"],)],
        [([],), ([""],), (["a", "b", "a"],), (["ab", "ba", "abc", "cab", "x"],)],
    ),
]

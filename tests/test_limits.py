"""reportgen.limits: the bounds every reader applies to what a file claims (issue 14)."""

from reportgen import limits


def test_world_size_claims_are_checked_against_the_ranks_found():
    said = []
    problem = lambda path, text: said.append(text)  # noqa: E731
    assert limits.world_size(10**9, [0, 1, 2], "f", problem) == 3
    assert limits.world_size("8", [0, 1], "f", problem) == 8
    assert limits.world_size(2, [0, 5], "f", problem) == 6
    assert len(said) == 2 and "not a usable rank count" in said[0] and "smaller than the ranks found" in said[1]


def test_missing_ranks_are_listed_up_to_the_cap_then_counted():
    assert limits.missing_ranks(8, [0, 1]) == ([2, 3, 4, 5, 6, 7], 0)
    assert limits.missing_ranks(limits.MAX_LISTED_RANKS + 3, [0, 1]) == ([], limits.MAX_LISTED_RANKS + 1)
    assert limits.missing_ranks(10**6, [0]) == ([], 10**6 - 1)
    assert limits.missing_ranks(None, [0]) == ([], 0)


def test_rejects_one_problem_per_kind_with_first_lines():
    r = limits.Rejects()
    for line in range(2, 12):
        r.add("a.csv", line, "column 'total'", "negative")
    out = []
    r.flush(lambda path, text: out.append((path, text)))
    assert out == [("a.csv", "10 rows skipped: column 'total' negative (lines 2, 3, 4, 5, 6, …)")]

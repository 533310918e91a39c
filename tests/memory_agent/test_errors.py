"""The one error mapper: a bug is `internal`, never `invalid`. (Issue 9.)"""

from memory_agent.errors import describe


def test_a_bug_is_internal_never_invalid():
    assert describe(ValueError("int() of 'x'")).code == "internal"
    assert describe(KeyError("hits")).code == "internal"

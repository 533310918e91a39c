"""The copy-on-write dict behind the read model's per-document maps: every copy behaves as an
independent dict, and a copy costs its changes, not its size."""

import random

import pytest

from ragcore import cow
from ragcore.cow import CowDict, CowList


@pytest.mark.parametrize("fold_min", [4, 4096])
def test_a_lineage_of_copies_behaves_as_independent_dicts(monkeypatch, fold_min):
    monkeypatch.setattr(cow, "FOLD_MIN", fold_min)  # small: the copies fold their changes in
    rng = random.Random(7)
    keys = [f"k{n}" for n in range(300)]
    start = {k: n for n, k in enumerate(keys[:200])}
    lineage = [(CowDict(dict(start)), dict(start))]
    for step in range(3000):
        mine, ref = lineage[rng.randrange(len(lineage))] if step % 7 == 0 else lineage[-1]
        op = rng.random()
        key = rng.choice(keys)
        if op < 0.4:
            mine[key] = ref[key] = step
        elif op < 0.6:
            assert mine.pop(key, None) == ref.pop(key, None)
        elif op < 0.7 and key in ref:
            del mine[key]
            del ref[key]
        elif op < 0.75:
            lineage.append((mine.copy(), dict(ref)))  # the model's clone: both keep changing
        assert len(mine) == len(ref)
        assert (key in mine) == (key in ref) and mine.get(key, "none") == ref.get(key, "none")
    for mine, ref in lineage:
        assert dict(mine) == ref and dict(mine.items()) == ref
        assert sorted(mine.values()) == sorted(ref.values()) and len(mine) == len(ref)
        with pytest.raises(KeyError):
            mine["absent"]
        with pytest.raises(KeyError):
            del mine["absent"]


def test_a_copy_shares_its_base_and_carries_only_the_changes():
    base = {f"doc-{n}": n for n in range(100_000)}
    first = CowDict(base)
    first["doc-1"] = -1
    del first["doc-2"]
    first["new"] = 5
    second = first.copy()
    assert second._base is base and len(second._top) == 3  # not 100,000 keys
    second["doc-3"] = -3
    assert first["doc-3"] == 3 and second["doc-3"] == -3 and "doc-2" not in second
    assert base["doc-1"] == 1 and base["doc-2"] == 2  # the base is never written


def test_changes_beyond_a_sixteenth_of_the_base_are_folded_in_by_the_next_copy():
    base = {n: n for n in range(100_000)}
    mine = CowDict(base)
    for n in range(7_000):  # more than 100,000 / 16
        mine[n] = -n
    copy = mine.copy()
    assert copy._base is not base and not copy._top
    assert copy[6_999] == -6_999 and copy[7_000] == 7_000 and len(copy) == 100_000


def test_iteration_keeps_a_dicts_order_for_changes_in_place_and_new_keys():
    mine = CowDict({"a": 1, "b": 2, "c": 3})
    mine["b"] = 20  # changed in place: keeps its place
    mine["d"] = 4  # new: last
    del mine["a"]
    assert list(mine) == ["b", "c", "d"] and list(mine.values()) == [20, 3, 4]
    assert list(mine.copy().items()) == [("b", 20), ("c", 3), ("d", 4)]


@pytest.mark.parametrize("fold_min", [4, 4096])
def test_a_lineage_of_list_copies_behaves_as_independent_lists(monkeypatch, fold_min):
    monkeypatch.setattr(cow, "FOLD_MIN", fold_min)
    rng = random.Random(11)
    lineage = [(CowList(list(range(100))), list(range(100)))]
    for step in range(3000):
        mine, ref = lineage[rng.randrange(len(lineage))] if step % 7 == 0 else lineage[-1]
        op = rng.random()
        i = rng.randrange(len(ref))
        if op < 0.4:
            mine[i] = ref[i] = -step
        elif op < 0.7:
            mine.append(step)
            ref.append(step)
        elif op < 0.75:
            lineage.append((mine.copy(), list(ref)))
        assert len(mine) == len(ref) and mine[i] == ref[i]
    for mine, ref in lineage:
        assert list(mine) == ref and mine == ref
        with pytest.raises(IndexError):
            mine[len(ref)]


def test_a_list_copy_shares_its_base():
    base = list(range(100_000))
    first = CowList(base)
    first[5] = -5
    first.append(7)
    second = first.copy()
    assert second._base is base and len(second._set) == 1 and second._tail == [7]
    second[5] = 55
    second[100_000] = 8  # the appended one
    assert first[5] == -5 and first[100_000] == 7 and second[100_000] == 8 and base[5] == 5

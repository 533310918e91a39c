from ragcore import Tokenizer
from ragcore.lexical import BM25Index
from ragcore.tokenizer import term_frequencies


def test_english_is_lowercased_stemmed_and_stopwords_dropped():
    assert Tokenizer()("The Running dogs are RUNNING") == ["run", "dog", "run"]


def test_chinese_gets_jieba_words_and_character_bigrams():
    tokens = Tokenizer()("记忆系统")
    assert "记忆" in tokens and "系统" in tokens
    assert {"~记忆", "~忆系", "~系统"} <= set(tokens)


def test_bigrams_match_a_name_that_jieba_segments_differently():
    # jieba may cut a name one way inside a sentence and another way alone; bigrams overlap anyway
    tok = Tokenizer()
    question = set(tok("盛大游戏运营什么"))
    text = set(tok("中国大陆由盛大游戏运营"))
    assert {"~盛大", "~大游", "~游戏"} <= question & text


def test_mixed_language_text():
    tokens = Tokenizer()("使用 Qdrant 的 local mode")
    assert "qdrant" in tokens and "local" in tokens and "mode" in tokens
    assert "使用" in tokens


def test_bm25_ranks_the_document_with_the_rare_term_first():
    tok = Tokenizer()
    idx = BM25Index()
    docs = {
        "a": "the cat sat on the mat",
        "b": "the dog sat on the log",
        "c": "a cat and a dog",
        "d": "zebra crossing rules",
    }
    for k, v in docs.items():
        idx.add(k, term_frequencies(tok(v)))
    hits = idx.search(term_frequencies(tok("zebra cat")), 10)
    assert hits[0][0] == "d"
    assert {k for k, _ in hits} == {"a", "c", "d"}


def test_bm25_removal_and_readd_keep_statistics_exact():
    tok = Tokenizer()
    fresh, churned = BM25Index(), BM25Index()
    docs = {f"d{i}": f"term{i % 3} common words here {i}" for i in range(20)}
    for k, v in docs.items():
        fresh.add(k, term_frequencies(tok(v)))
        churned.add(k, term_frequencies(tok(v)))
    churned.add("tmp", term_frequencies(tok("term1 term1 term1 noise")))
    churned.remove("tmp")
    churned.add("d3", term_frequencies(tok(docs["d3"])))  # re-add replaces
    q = term_frequencies(tok("term1 common"))
    assert fresh.search(q, 20) == churned.search(q, 20)
    assert len(churned) == 20


def test_bm25_respects_the_allowed_set():
    tok = Tokenizer()
    idx = BM25Index()
    idx.add("x", term_frequencies(tok("apple pie")))
    idx.add("y", term_frequencies(tok("apple tart")))
    assert [k for k, _ in idx.search(term_frequencies(tok("apple")), 5, allowed={"y"})] == ["y"]


def test_bm25_top_k_pruning_gives_the_full_sums_top_k(monkeypatch):
    """The common terms of a query are scored on the slots rarer terms touched once no other
    slot can reach the top k: the top k and their scores are the full sum's, with a filter
    mask and with removed documents too, and the pruning does happen."""
    import numpy as np

    from ragcore import lexical

    monkeypatch.setattr(lexical, "PRUNE_TERMS_OVER", 40)  # this corpus's common terms
    rng = np.random.default_rng(3)
    vocabulary = 400
    weights = 1.0 / np.arange(1, vocabulary + 1)  # Zipf: a few terms in most documents
    weights /= weights.sum()
    index = BM25Index()
    for d in range(2_000):
        terms = rng.choice(vocabulary, size=int(rng.integers(3, 30)), p=weights)
        tf: dict[int, float] = {}
        for t in terms.tolist():
            tf[t] = tf.get(t, 0.0) + 1.0
        index.add(f"d{d}", tf)
    for d in range(0, 2_000, 7):
        index.remove(f"d{d}")
    full = BM25Index()
    full.__dict__.update(index.__dict__)
    full.prune = False
    pruned = 0
    for q in range(200):
        query = {int(t): 1.0 for t in rng.choice(vocabulary, size=int(rng.integers(2, 7)))}
        mask = rng.random(2_000) < 0.8 if q % 2 else None
        limit = int(rng.choice([5, 10, 100]))
        got = index.search_slots(query, limit, mask)
        pruned += index.pruned_terms > 0
        want = full.search_slots(query, limit, mask)
        assert [s for s, _ in got] == [s for s, _ in want] or sorted(
            round(x, 4) for _, x in got
        ) == sorted(round(x, 4) for _, x in want)  # only ties may come in another order
        assert np.allclose([x for _, x in got], [x for _, x in want], rtol=1e-5)
        assert {s for s, _ in got} <= {s for s, _ in want} | {s for s, x in got if x == got[-1][1]}
    assert pruned > 20, pruned  # the pruning ran (it would pass vacuously otherwise)

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
